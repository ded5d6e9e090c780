#!/usr/bin/env bash
# A pruned sweep (explorer/pruning.hpp) of the quickstart (min p95 step time, min GPU-hours):
# the same file alone and under `mpiexec -n N`; the same front (indices) and the same evaluated
# rows as the unpruned sweep, its dominated rows being the unpruned ok rows' deterministic part
# (tests/cli/compare_pruned.py); and an interrupted pruned sweep, resumed, equal to the
# uninterrupted one.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 n=$3 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
exp=$src/configs/quickstart.toml
sed 's/^method = "analytic"/method = "analytic"\nprune = false/' "$exp" >"$dir/unpruned.toml"
grep -q '^prune = false' "$dir/unpruned.toml" || { echo "FAIL could not turn pruning off"; exit 1; }

"$prism" sweep "$exp" -o "$dir/serial.h5" -q || fail "serial sweep"
"$mpiexec" -n "$n" "$prism" sweep "$exp" -o "$dir/mpi.h5" -q || fail "mpi sweep"
"$prism" sweep "$dir/unpruned.toml" -o "$dir/unpruned.h5" -q || fail "unpruned sweep"
/usr/bin/python3 "$src/tests/cli/compare_results.py" "$dir/serial.h5" "$dir/mpi.h5" \
    && echo "ok   alone = mpiexec -n $n" || fail "pruned files differ with the rank count"
/usr/bin/python3 "$src/tests/cli/compare_pruned.py" "$dir/mpi.h5" "$dir/unpruned.h5" \
    && echo "ok   pruned agrees with unpruned" \
    || fail "pruned and unpruned disagree"

# interrupted by --time-limit (every point 25 ms slower: test-only knob), then resumed
PRISM_TEST_POINT_DELAY_MS=25 "$mpiexec" -n "$n" "$prism" sweep "$exp" -o "$dir/limit.h5" \
    --time-limit 1.5 -q >"$dir/limit.log" 2>&1; rc=$?
[ "$rc" = 3 ] || { fail "time-limit: exit $rc, expected 3"; cat "$dir/limit.log"; }
"$mpiexec" -n "$n" "$prism" sweep "$exp" -o "$dir/limit.h5" --resume -q >"$dir/resume.log" 2>&1 \
    || { fail "resume"; cat "$dir/resume.log"; }
/usr/bin/python3 "$src/tests/cli/compare_results.py" "$dir/serial.h5" "$dir/limit.h5" \
    && echo "ok   interrupted and resumed = uninterrupted" || fail "resumed file differs"
exit $fails
