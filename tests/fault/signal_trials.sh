#!/usr/bin/env bash
# Randomized fault trials of `mpirun -n 3 prism sweep`: SIGTERM to mpiexec (which forwards it),
# SIGTERM to every process of the job at once (what a batch scheduler does: mpiexec's group and
# the processes below it, since hydra puts its proxy and the ranks in sessions of their own;
# before 2026-11-29 the ranks were left out), and SIGKILL of the
# whole job, each at a random moment from launch to the end of the sweep (SIGTERM: from the
# moment the sweep's file exists. MPICH's mpiexec can hang for good, its ranks waiting in their
# own sessions, when SIGTERM reaches it in the first ~15 ms of its start-up, before MPI is up:
# reproduced under load in 2 of 30 immediate signals, and once in CI; a launcher matter, not the
# sweep's). After each trial:
# - after SIGTERM the launcher's exit status is the file's: 3 when `prism status` says
#   resumable, 0 only when it says complete (a run killed before it made the file exits non-zero
#   and leaves none);
# - every file left is accepted by `prism status` (exit 0 or 3) and by --resume, which completes
#   it to the same content as an undisturbed run.
# Usage: signal_trials.sh PRISM MPIEXEC TRIALS SCRATCH SOURCE_DIR [MAX_DELAY_S]
# CI runs a few trials (tests/cli/fault_trials_test.sh); run many by hand:
#   bash tests/fault/signal_trials.sh build/explorer/prism mpiexec 300 /tmp/trials .
set -uo pipefail
prism=$1 mpiexec=$2 trials=$3 dir=$4 src=$5 max_delay=${6:-2.5}
rm -rf "$dir" && mkdir -p "$dir"
compare=$src/tests/cli/compare_results.py
# 384 points sharing 48 step-time distributions; 15 ms each on two workers: about 3 s.
exp=$dir/sweep.toml
sed 's/^zero_stage = \[0, 3\]/zero_stage = [0, 3]\nlearning_rate = [1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4, 7e-4, 8e-4]/' \
    "$src/tests/data/sweeps/sweep_small.toml" > "$exp"
"$prism" sweep "$exp" -o "$dir/ref.h5" -q || { echo "FAIL reference run"; exit 1; }

grace=${PRISM_TRIAL_GRACE_S:-60}  # seconds a stopped job may take to end (undisturbed: ~3 s)
# running, sweep_started, tree, wait_bounded, kill_job, leftovers, settle, started_or_killed,
# await_job
source "$src/tests/fault/launcher.sh"
violations=0 agreed=0 term_runs=0 identical=0 files=0 none=0
declare -A kinds=()
violation() { echo "FAIL trial $t ($kind after ${delay}s): $*"; violations=$((violations + 1)); }

for t in $(seq "$trials"); do
    case $((t % 3)) in
        1) kind=term-mpiexec ;;
        2) kind=term-all ;;
        0) kind=kill-all ;;
    esac
    kinds[$kind]=$((${kinds[$kind]:-0} + 1))
    delay=$(awk -v r="$RANDOM" -v m="$max_delay" 'BEGIN { printf "%.2f", r / 32767 * m }')
    file=$dir/t.h5
    rm -f "$file" "$file.lock"
    PRISM_TEST_POINT_DELAY_MS=15 setsid "$mpiexec" -n 3 "$prism" sweep "$exp" -o "$file" -q \
        --flush-interval 0.2 > "$dir/run.log" 2>&1 &
    pid=$!
    # SIGTERM once the sweep's file exists (above); SIGKILL from the launch on
    if [ "$kind" != kill-all ] && ! started_or_killed "$pid" "$file" 30; then
        violation "$stuck"
        continue
    fi
    sleep "$delay"
    case $kind in
        term-mpiexec) kill -TERM "$pid" 2>/dev/null ;;
        term-all) kill -TERM -- "-$pid" $(tree "$pid") 2>/dev/null ;;
        kill-all) kill -KILL -- "-$pid" 2>/dev/null ;;
    esac
    if ! await_job "$pid" "$grace"; then
        violation "$stuck"
        continue
    fi
    rc=$waited
    if [ ! -e "$file" ]; then
        none=$((none + 1))
        [ "$kind" = kill-all ] || [ "$rc" != 0 ] || violation "exit 0 and no file"
        continue
    fi
    files=$((files + 1))
    "$prism" status "$file" > "$dir/status.log" 2>&1; status=$?
    if [ "$status" != 0 ] && [ "$status" != 3 ]; then
        violation "prism status exited $status: $(cat "$dir/status.log")"
        continue
    fi
    if [ "$kind" != kill-all ]; then
        term_runs=$((term_runs + 1))
        if [ "$rc" = "$status" ]; then agreed=$((agreed + 1)); else
            violation "launcher exit $rc, file status $status: $(cat "$dir/status.log")"
        fi
    fi
    if [ "$status" = 3 ]; then
        timeout -s KILL 300 "$mpiexec" -n 3 "$prism" sweep "$exp" -o "$file" --resume -q \
            > "$dir/resume.log" 2>&1 \
            || { violation "--resume exited $?: $(cat "$dir/resume.log")"; continue; }
    fi
    if /usr/bin/python3 "$compare" "$dir/ref.h5" "$file" > "$dir/compare.log" 2>&1; then
        identical=$((identical + 1))
    else
        violation "content differs: $(cat "$dir/compare.log")"
    fi
done

echo "trials $trials (term-mpiexec ${kinds[term-mpiexec]:-0}, term-all ${kinds[term-all]:-0}," \
     "kill-all ${kinds[kill-all]:-0}), delays 0-${max_delay}s (SIGTERM: after the file exists):" \
     "exit status = file status in $agreed of $term_runs SIGTERM runs;" \
     "files identical to an undisturbed run after --resume: $identical of $files;" \
     "no file made: $none; violations: $violations"
[ "$violations" = 0 ]
