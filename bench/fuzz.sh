#!/usr/bin/env bash
# Runs each fuzz target in fuzz/ for a given time with cargo-fuzz on nightly
# and prints, per target, executions, corpus size, crashes and slow units.
#
#   bench/fuzz.sh [SECONDS] [TARGET...]     (default 600 s; every target)
#
# Targets: package, formats, documents, grammar, paths, oauth, actions,
# read_guard (see fuzz/fuzz_targets/). The committed seeds in
# fuzz/corpus/<target> are read, never written: the growing corpus, crash
# artifacts and logs live under
# $CARGO_TARGET_DIR/fuzz/. A unit slower than 1 s counts as a timeout.
# SANITIZER=none trades AddressSanitizer for speed (default: address); its
# build has a target folder of its own, so neither build undoes the other.
# RUNS=N also stops each target after N executions, whichever comes first.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds="${1:-600}"
shift || true
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(package formats documents grammar paths oauth actions read_guard)
fi
sanitizer="${SANITIZER:-address}"
runs=()
if [ -n "${RUNS:-}" ]; then
  runs=(-runs="$RUNS")
fi
base="${CARGO_TARGET_DIR:-${HOME}/.cache/sasha-apps/target}/fuzz"
mkdir -p "$base"

if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  cargo +nightly install cargo-fuzz --locked
fi

printf '%-10s %14s %10s %8s %9s %8s\n' target executions corpus crashes timeouts seconds
for target in "${targets[@]}"; do
  corpus="$base/corpus/$target"
  artifacts="$base/artifacts/$target"
  log="$base/$target.log"
  mkdir -p "$corpus" "$artifacts"
  status=0
  started=$SECONDS
  cargo +nightly fuzz run --sanitizer "$sanitizer" --target-dir "$base/build-$sanitizer" \
    "$target" "$corpus" "fuzz/corpus/$target" -- \
    -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2560 \
    -artifact_prefix="$artifacts/" -print_final_stats=1 "${runs[@]}" >"$log" 2>&1 || status=$?
  executions=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  size=$(find "$corpus" -type f | wc -l)
  crashes=$(find "$artifacts" -type f -name 'crash-*' | wc -l)
  timeouts=$(find "$artifacts" -type f -name 'timeout-*' | wc -l)
  printf '%-10s %14s %10s %8s %9s %8s\n' "$target" "$executions" "$size" "$crashes" "$timeouts" "$((SECONDS - started))"
  if [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ] && [ "$timeouts" -eq 0 ]; then
    echo "$target: cargo fuzz failed (exit $status); see $log" >&2
  fi
done
