#!/usr/bin/env bash
# `--dry-run` on a 10^7-point space answers in seconds: space size, the filtered estimate by
# reason, an estimated run time; it writes no file.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
start=$(date +%s.%N)
timeout 60 "$prism" sweep "$src/bench/space_1e7.toml" --dry-run >out.txt 2>&1; rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
cat out.txt
echo "dry run took $secs s"
fails=0
[ "$rc" = 0 ] || { echo "FAIL exit $rc"; fails=1; }
grep -q '^space size     10000000 points (7 dimensions)' out.txt || { echo "FAIL space size"; fails=1; }
grep -q 'filtered: gpus is not a multiple of tp \* pp \* cp' out.txt || { echo "FAIL filter reasons"; fails=1; }
grep -q '^estimated run ' out.txt || { echo "FAIL estimate"; fails=1; }
[ "$(echo "$secs < 30" | bc)" = 1 ] || { echo "FAIL took $secs s"; fails=1; }
[ -z "$(ls ./*.h5 2>/dev/null)" ] || { echo "FAIL wrote a file"; fails=1; }
[ "$fails" = 0 ] && echo "ok   dry run"
exit "$fails"
