#!/usr/bin/env bash
# Issue 33, items 2, 3 and 5: the front's verification (`verify = "montecarlo"`) stops as the
# sweep does. With --time-limit (alone and under mpiexec) and on SIGTERM (to mpiexec) during
# the verification: exit 3 soon after, no /verify written, `prism status` calls the file
# resumable (exit 3, "not verified"), and --resume verifies it (exit 0, /verify, status 0).
# Before the fix the verification ran to its end and exited 0 (a 1 s limit ran a 10 s
# verification), and status called a file without /verify complete.
# PRISM_TEST_VERIFY_DELAY_MS makes each point's verification last (the front has 3 points).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# (no sensitivity ranking: the sweep itself stays well under the 4 s limit, its ZeRO-3 points
# being Monte Carlo ones)
sed 's/^method = "analytic"/method = "analytic"\nverify = "montecarlo"\nsamples = 2000\nsensitivity = false/' \
    "$src/configs/quickstart.toml" >"$dir/verify.toml"
grep -q '^verify = "montecarlo"' "$dir/verify.toml" || { echo "FAIL could not set verify"; exit 1; }
has_verify() {
    /usr/bin/python3 -c 'import sys, h5py; sys.exit(0 if "verify" in h5py.File(sys.argv[1], "r") else 1)' "$1"
}
now_ms() { date +%s%3N; }

# The file an interrupted verification leaves: complete rows, no /verify, resumable; --resume
# verifies it.
check_left() {  # NAME FILE
    local name=$1 file=$2
    has_verify "$file" && fail "$name: /verify was written"
    "$prism" status "$file" >"$dir/$name.status" 2>&1
    local rc=$?
    [ "$rc" = 3 ] && grep -q "complete but not verified" "$dir/$name.status" &&
        grep -q "continue with --resume to verify" "$dir/$name.status" ||
        fail "$name: status exit $rc: $(cat "$dir/$name.status")"
    "$prism" sweep "$dir/verify.toml" -o "$file" --resume -q >"$dir/$name.resume" 2>&1 ||
        fail "$name: --resume exit $?: $(cat "$dir/$name.resume")"
    has_verify "$file" || fail "$name: --resume wrote no /verify"
    "$prism" status "$file" >"$dir/$name.status2" 2>&1 ||
        fail "$name: status after --resume exit $?: $(cat "$dir/$name.status2")"
}

# --time-limit alone: the sweep takes well under 4 s (0.4 s here); the verification 3 x 4 s.
t0=$(now_ms)
PRISM_TEST_VERIFY_DELAY_MS=4000 "$prism" sweep "$dir/verify.toml" -o "$dir/alone.h5" -q \
    --time-limit 4 >"$dir/alone.log" 2>&1
rc=$? ms=$(($(now_ms) - t0))
[ "$rc" = 3 ] && grep -q "verification stopped by --time-limit" "$dir/alone.log" && [ "$ms" -lt 10000 ] \
    && echo "ok   --time-limit stops the verification alone (exit 3 after $ms ms)" \
    || fail "--time-limit alone: exit $rc after $ms ms: $(cat "$dir/alone.log")"
check_left alone "$dir/alone.h5"

# --time-limit under mpiexec -n 3: the master stops handing out points and releases each
# worker as its point comes back.
t0=$(now_ms)
PRISM_TEST_VERIFY_DELAY_MS=4000 "$mpiexec" -n 3 "$prism" sweep "$dir/verify.toml" \
    -o "$dir/mpi.h5" -q --time-limit 4 >"$dir/mpi.log" 2>&1
rc=$? ms=$(($(now_ms) - t0))
[ "$rc" = 3 ] && grep -q "verification stopped by --time-limit" "$dir/mpi.log" && [ "$ms" -lt 14000 ] \
    && echo "ok   --time-limit stops the verification under mpiexec (exit 3 after $ms ms)" \
    || fail "--time-limit under mpiexec: exit $rc after $ms ms: $(cat "$dir/mpi.log")"
check_left mpi "$dir/mpi.h5"

# SIGTERM to mpiexec once the verification has begun.
PRISM_TEST_VERIFY_DELAY_MS=4000 setsid "$mpiexec" -n 3 "$prism" sweep "$dir/verify.toml" \
    -o "$dir/term.h5" --progress-interval 100 >"$dir/term.log" 2>&1 &
pid=$!
for _ in $(seq 200); do
    grep -q "^verify: 3 Pareto-front points" "$dir/term.log" && break
    sleep 0.05
done
grep -q "^verify: 3 Pareto-front points" "$dir/term.log" || fail "SIGTERM: no verification began"
t0=$(now_ms)
kill -TERM "$pid"
wait "$pid"
rc=$? ms=$(($(now_ms) - t0))
[ "$rc" = 3 ] && grep -q "verification stopped by signal 15" "$dir/term.log" && [ "$ms" -lt 10000 ] \
    && echo "ok   SIGTERM to mpiexec stops the verification (exit 3 after $ms ms)" \
    || fail "SIGTERM under mpiexec: exit $rc after $ms ms: $(cat "$dir/term.log")"
check_left term "$dir/term.h5"

[ "$fails" = 0 ] && echo "ok   verification stops on --time-limit and signals"
exit "$fails"
