#!/usr/bin/env bash
# The load benchmark (issue 12): starts data-worker, studio-core and
# mcp-gateway from the release `sasha` binary on loopback with the Time Sheet
# app, drives six workloads at 1 and 8 clients through MCP `tools/call` and the
# same statements through an in-process rusqlite floor, prints a Markdown table
# and writes results.md and ops.png to $CARGO_TARGET_DIR/bench-results/<UTC time>/.
#
#   ./bench/run.sh           # normal counts, about 3 minutes after the build
#   ./bench/run.sh --quick   # small counts, a smoke check well under a minute
#
# Not part of ./scripts/test.sh: speed is measured here, never asserted.
set -euo pipefail
cd "$(dirname "$0")/.."

args=()
for arg in "$@"; do
  case "$arg" in
    --quick) args+=(--quick) ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--quick]" >&2; exit 2 ;;
  esac
done

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/sasha-apps/target}"
case "$CARGO_TARGET_DIR" in
  /*) ;;
  *) CARGO_TARGET_DIR="$PWD/$CARGO_TARGET_DIR" ;;
esac
exec cargo bench --bench load -- "${args[@]}"
