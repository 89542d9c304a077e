#!/usr/bin/env bash
# Runs every fuzz target for SECONDS each (default 10) from the committed seed corpus, two
# at a time, and prints how many inputs each ran. Needs cargo-fuzz; the stable toolchain
# serves with RUSTC_BOOTSTRAP=1. New corpus entries go to a scratch folder, so the
# committed seeds stay small; a crash leaves its input in fuzz/artifacts/<target>/ and
# fails the script.
#
#   fuzz/run.sh 600     # ten minutes per target
#   fuzz/run.sh 10 -D   # a smoke run (CI): unoptimised targets, built in a fraction of the time
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-10}"
# -O (optimised, the default) or -D (cargo fuzz's dev build).
build="${2:--O}"
export RUSTC_BOOTSTRAP=1
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --version 0.13.2 --locked
fi
cargo fuzz build "$build"
work="${TMPDIR:-/tmp}/slide-fuzz-corpus"
export work seconds build
# Two targets at a time: this machine has two cores.
printf '%s\n' xmc libsvm idx config checkpoint | xargs -P 2 -I{} sh -c '
  mkdir -p "$work/{}"
  cargo fuzz run "$build" {} "$work/{}" "fuzz/corpus/{}" -- -max_total_time="$seconds" \
    -rss_limit_mb=2048 -malloc_limit_mb=1024 -print_final_stats=1 >"$work/{}.log" 2>&1 || true'
status=0
for target in xmc libsvm idx config checkpoint; do
  log="$work/$target.log"
  runs=$(awk '/^stat::number_of_executed_units/ {print $2}' "$log")
  if [ -n "$runs" ] && ! grep -q "^==.*ERROR\|panicked\|deadly signal" "$log"; then
    echo "fuzz $target: $runs inputs in $seconds s, no crash"
  else
    echo "fuzz $target: FAILED (log: $log)"
    tail -40 "$log"
    status=1
  fi
done
exit $status
