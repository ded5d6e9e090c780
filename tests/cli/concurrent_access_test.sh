#!/usr/bin/env bash
# One writer, many readers, while a sweep runs under mpiexec -n 3:
# - a second `prism sweep -o` the same file (plain, --overwrite, --resume, alone or under
#   mpiexec) is refused with exit 2 and "in use by another prism sweep", before it touches it;
# - `prism status` (exit 3, "being written by pid ..."), `prism report` and h5py (swmr=True)
#   read the committed rows;
# - the running sweep finishes (exit 0) with a file identical to an undisturbed run's.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
# sweep_small with 8 learning rates: 384 points to evaluate, which share 48 step-time
# distributions (fast), so that the test delay below sets the pace. Pruning off: with it only
# the non-dominated few (64) would be evaluated and the sweep would end before the readers run.
exp=$dir/sweep.toml
sed -e 's/^zero_stage = \[0, 3\]/zero_stage = [0, 3]\nlearning_rate = [1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4, 7e-4, 8e-4]/' \
    -e 's/^method = "analytic"/method = "analytic"\nprune = false/' \
    "$src/tests/data/sweeps/sweep_small.toml" > "$exp"
grep -q '^prune = false' "$exp" || { echo "FAIL could not turn pruning off"; exit 1; }
compare=$src/tests/cli/compare_results.py
checker=$src/tests/python/check_result_file.py
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }

"$prism" sweep "$exp" -o "$dir/ref.h5" -q || { echo "FAIL reference run"; exit 1; }

# 384 evaluated points at 25 ms each on two workers: about 5 s of sweep.
PRISM_TEST_POINT_DELAY_MS=25 "$mpiexec" -n 3 "$prism" sweep "$exp" -o "$dir/run.h5" \
    --flush-interval 0.2 --progress-interval 0.2 > "$dir/run.out" 2> "$dir/run.err" &
pid=$!
# Wait until rows are committed (at most 30 s).
for _ in $(seq 300); do
    rows=$(/usr/bin/python3 -c "import h5py,sys; print(h5py.File(sys.argv[1],'r',swmr=True).attrs['rows_committed'])" "$dir/run.h5" 2>/dev/null)
    [ -n "$rows" ] && [ "$rows" -gt 0 ] && break
    sleep 0.1
done
[ -n "${rows:-}" ] && [ "$rows" -gt 0 ] || fail "no committed rows while running"
inode=$(stat -c %i "$dir/run.h5")

# Second writers: refused before touching the file.
second() {
    local name=$1; shift
    "$@" > "$dir/$name.out" 2> "$dir/$name.err"; local rc=$?
    if [ "$rc" = 2 ] && grep -q "run\.h5: in use by another prism sweep (pid [0-9]* on host " "$dir/$name.err"; then
        echo "ok   $name: $(head -n 1 "$dir/$name.err" | sed 's/(pid.*/(pid ...)/')"
    else
        fail "$name: exit $rc"; cat "$dir/$name.err"
    fi
}
second plain "$prism" sweep "$exp" -o "$dir/run.h5" -q
second overwrite "$prism" sweep "$exp" -o "$dir/run.h5" --overwrite -q
second resume "$prism" sweep "$exp" -o "$dir/run.h5" --resume -q
second mpi-overwrite "$mpiexec" -n 2 "$prism" sweep "$exp" -o "$dir/run.h5" --overwrite -q
[ "$(stat -c %i "$dir/run.h5")" = "$inode" ] || fail "the file was replaced"

# Readers.
"$prism" status "$dir/run.h5" > "$dir/status.out" 2>&1; rc=$?
if [ "$rc" = 3 ] && grep -q "run\.h5: running (.*; being written by pid" "$dir/status.out"; then
    echo "ok   status while running: $(sed 's/(pid.*/.../' "$dir/status.out")"
else
    fail "status while running: exit $rc"; cat "$dir/status.out"
fi
"$prism" report "$dir/run.h5" --top 3 > "$dir/report.out" 2>&1; rc=$?
if [ "$rc" = 0 ] && grep -q "^status      running" "$dir/report.out"; then
    echo "ok   report while running: $(grep '^points' "$dir/report.out")"
else
    fail "report while running: exit $rc"; cat "$dir/report.out"
fi
/usr/bin/python3 "$checker" "$dir/run.h5" --status running > "$dir/h5py.out" 2>&1 \
    && echo "ok   h5py (swmr=True) while running: $(cat "$dir/h5py.out")" \
    || { fail "h5py while running"; cat "$dir/h5py.out"; }

wait "$pid"; rc=$?
[ "$rc" = 0 ] || { fail "the running sweep exited $rc"; cat "$dir/run.err"; }
/usr/bin/python3 "$compare" "$dir/ref.h5" "$dir/run.h5" > "$dir/compare.out" 2>&1 \
    && echo "ok   the running sweep's file: $(cat "$dir/compare.out")" \
    || { fail "the running sweep's file differs"; cat "$dir/compare.out"; }
[ ! -e "$dir/run.h5.lock" ] || fail "lock file left behind"
grep -q "prism: worker rank 2 is pid [0-9]* on host" "$dir/run.err" \
    || { fail "no pid of worker rank 2"; cat "$dir/run.err"; }

echo "$fails failed"
[ "$fails" = 0 ]
