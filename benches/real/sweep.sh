#!/bin/bash
# An accuracy sweep of configs/xmc.toml on the real sets, many one-thread runs at once: slide's
# training gives the same model for any thread count, so a machine of N cores measures N
# settings at a time (accuracy only: times from runs side by side are not a recipe's time).
#
#   benches/real/sweep.sh SETTINGS [SET...]
#
# SETTINGS: one setting a line, a name and the `--set` flags that make it ("bz --set
# train.beta1=0 ...", quoted as on a shell's command line: xargs reads the quotes), or the
# name alone for the config as shipped. SETs: names of folders of
# $DATA holding train.txt and test.txt (default: the three real sets that benches/xmc/compare.py
# builds: deb-deps, deb-tags, bibtex).
# Each (setting, SET) run appends one line to $RESULTS: the name, the set, its wall seconds
# and the trainer's `done:` line (P@1 / P@3 / P@5 on the whole test file).
#
# Environment: DATA (datasets/real), RUNS (a folder for the runs' logs, /tmp/sweep), RESULTS
# ($RUNS/results.txt), BIN (target/release/slide-train), PARALLEL (the cores), KERNELS
# (portable: the same digits on every x86-64-v3 CPU tried, an AMD EPYC and an Intel Xeon), SWEEP_S (a limit on the whole sweep, in
# seconds; runs still going then are stopped and leave no line).
set -u
if [ "${1:-}" = "--one" ]; then
  # One run: --one NAME SET [FLAGS...]
  name=$2; set=$3; shift 3
  start=$(date +%s)
  SLIDE_KERNELS=$KERNELS $BIN --config configs/xmc.toml --threads 1 --quiet \
    --set data.train="\"$DATA/$set/train.txt\"" --set data.test="\"$DATA/$set/test.txt\"" \
    --set checkpoint.at_end=false --set checkpoint.every=0 \
    --set train.eval_every=0 --set train.eval_samples=0 \
    --out "$RUNS/$name-$set" "$@" > "$RUNS/$name-$set.log" 2>&1
  rc=$?
  line=$(grep '^done' "$RUNS/$name-$set.log")
  [ -z "$line" ] && line="FAILED (exit $rc): $(tail -2 "$RUNS/$name-$set.log" | tr '\n' ' ')"
  echo "$name $set [$(( $(date +%s) - start )) s] $line" >> "$RESULTS"
  exit 0
fi
settings=${1:?usage: benches/real/sweep.sh SETTINGS [SET...]}
shift
sets=("$@")
[ ${#sets[@]} -eq 0 ] && sets=(deb-deps deb-tags bibtex)
export DATA=${DATA:-datasets/real} RUNS=${RUNS:-/tmp/sweep} BIN=${BIN:-target/release/slide-train}
export KERNELS=${KERNELS:-portable}
export RESULTS=${RESULTS:-$RUNS/results.txt}
mkdir -p "$RUNS"
touch "$RESULTS"
[ -x "$BIN" ] || { echo "no $BIN: cargo build --release --bin slide-train" >&2; exit 1; }
for set in "${sets[@]}"; do
  for f in train test; do
    [ -f "$DATA/$set/$f.txt" ] || { echo "no $DATA/$set/$f.txt" >&2; exit 1; }
  done
done
# The longest set first in each setting, so that the settings' runs end together.
jobs=$RUNS/jobs.txt
: > "$jobs"
while read -r name flags; do
  [ -z "$name" ] && continue
  for set in "${sets[@]}"; do echo "$name $set${flags:+ $flags}" >> "$jobs"; done
done < "$settings"
echo "$(wc -l < "$jobs") runs, ${PARALLEL:-$(nproc)} at a time, into $RESULTS"
timeout "${SWEEP_S:-86400}" xargs -P "${PARALLEL:-$(nproc)}" -L 1 "$0" --one < "$jobs"
echo "sweep ended (exit $?): $(wc -l < "$RESULTS") lines in $RESULTS"
