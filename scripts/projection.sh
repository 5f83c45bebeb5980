#!/usr/bin/env bash
# make projection: validates `stockbench project` on this machine
# (docs/projection.md). It runs the five strategies of the article's
# question (rowlock, lua-tcc, batched, outbox-local, buckets) and the null
# probe with the tiers sharing the machine, then the five again under each
# CPU budget split of PROJECTION_SPLITS, and prints the error table of
# `stockbench project FREE --against SPLIT…`: each strategy's throughput
# projected from the unconstrained run's costs beside the one measured
# under the budget, medians of PROJECTION_REPEAT repeats. The results stay
# in PROJECTION_OUT (reports/projection) for `stockbench project` again.
#
#   scripts/projection.sh [RUN FLAGS]      e.g. --backend docker --rtt same-zone
#
# Every budget needs root (cgroups) or the docker backend. A crowded
# machine makes the table mean little: run it on a quiet one.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=${BIN:-bin/stockbench}
out=${PROJECTION_OUT:-reports/projection}
repeat=${PROJECTION_REPEAT:-3}
strategies=rowlock,lua-tcc,batched,outbox-local,buckets
# One split a line: the run flag and its value.
splits=${PROJECTION_SPLITS:-"--cpuset mysql=0,redis=1,harness=1
--cpus mysql=1,redis=0.5,harness=0.5
--cpus mysql=0.5,redis=0.5,harness=1"}
common=(--scenario sustained --buyers 128 --duration 5s --warmup 1s --calibrate 0 --repeat "$repeat" --quiet)

say() { echo "projection: $*" >&2; }

mkdir -p "$out"
say "load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"
say "unconstrained: $strategies and the null probe"
"$bin" run --strategies "$strategies,null" "${common[@]}" "$@" --out "$out/free" >/dev/null
against=()
i=0
while IFS= read -r split; do
  [ -n "$split" ] || continue
  i=$((i + 1))
  say "split $i: $split"
  # shellcheck disable=SC2086 # the split is a flag and its value
  "$bin" run --strategies "$strategies" "${common[@]}" $split "$@" --out "$out/split-$i" >/dev/null
  against+=("$out/split-$i/results.json")
done <<<"$splits"
say "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
"$bin" project "$out/free/results.json" --against "$(IFS=,; echo "${against[*]}")" | tee "$out/errors.md"
