# Sourced by scripts/test.sh and deploy/test-compose.sh: the one way their
# venvs of pinned PyPI packages are kept. Needs `as_root` from the caller.
#
# venv_from VENV REQUIREMENTS: builds VENV from REQUIREMENTS unless it was
# built from exactly this file (a stamp copy records what it holds), first
# installing Debian's python3-venv where a venv cannot be made.
venv_from() {
  local venv="$1" requirements="$2"
  if cmp -s "$requirements" "$venv/.sasha-installed-requirements"; then
    return 0
  fi
  rm -rf "$venv"
  if ! python3 -m venv "$venv"; then
    as_root apt-get update
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y python3-venv
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/.sasha-installed-requirements"
}
