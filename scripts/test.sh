#!/usr/bin/env bash
# Every check and test of Sasha Apps, as CI runs it.
#
# On a fresh machine it first installs what is missing (rustfmt, clippy,
# cargo-nextest), then runs: cargo fmt --check, cargo clippy -D warnings, and the
# whole test suite (unit, process and conformance tests) with cargo-nextest.
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

step "cargo fmt --check"
cargo fmt --all --check

step "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests"
cargo nextest run --workspace --locked --no-fail-fast
