#!/usr/bin/env bash
# Randomized signal trials of a sweep that verifies its front (`verify = "montecarlo"`, issue
# 33): SIGTERM to mpiexec, SIGTERM to every process of the job, SIGKILL of the whole job, and
# SIGTERM to a sweep alone, each at a random moment from launch (through mpiexec: from the
# moment the file exists) to past the end of the verification (each point's verification
# slowed to last, PRISM_TEST_VERIFY_DELAY_MS). After
# each trial:
# - after SIGTERM the exit status is the file's: 3 when `prism status` says resumable (which
#   a file without /verify is), 0 only when it says complete (verified);
# - every file left is accepted by `prism status` (exit 0 or 3) and by --resume, which
#   completes and verifies it to the same content as an undisturbed run, /verify included.
# Usage: verify_signal_trials.sh PRISM MPIEXEC TRIALS SCRATCH SOURCE_DIR [MAX_DELAY_S]
# CI runs a few trials (tests/cli/verify_signal_trials_test.sh); run many by hand:
#   bash tests/fault/verify_signal_trials.sh build/explorer/prism mpiexec 100 /tmp/vtrials .
set -uo pipefail
prism=$1 mpiexec=$2 trials=$3 dir=$4 src=$5 max_delay=${6:-3.0}
rm -rf "$dir" && mkdir -p "$dir"
compare=$src/tests/cli/compare_results.py
exp=$dir/verify.toml
sed 's/^method = "analytic"/method = "analytic"\nverify = "montecarlo"\nsamples = 2000/' \
    "$src/configs/quickstart.toml" >"$exp"
"$prism" sweep "$exp" -o "$dir/ref.h5" -q || { echo "FAIL reference run"; exit 1; }
export PRISM_TEST_VERIFY_DELAY_MS=${PRISM_TEST_VERIFY_DELAY_MS:-400}
grace=${PRISM_TRIAL_GRACE_S:-60}  # seconds a stopped job may take to end

# running, sweep_started, tree, wait_bounded, kill_job, leftovers, settle, started_or_killed,
# await_job
source "$src/tests/fault/launcher.sh"
violations=0 agreed=0 term_runs=0 identical=0 files=0 none=0 unverified=0
declare -A kinds=()
violation() { echo "FAIL trial $t ($kind after ${delay}s): $*"; violations=$((violations + 1)); }

for t in $(seq "$trials"); do
    case $((t % 4)) in
        1) kind=term-mpiexec ;;
        2) kind=term-all ;;
        3) kind=term-alone ;;
        0) kind=kill-all ;;
    esac
    kinds[$kind]=$((${kinds[$kind]:-0} + 1))
    delay=$(awk -v r="$RANDOM" -v m="$max_delay" 'BEGIN { printf "%.2f", r / 32767 * m }')
    file=$dir/t.h5
    rm -f "$file" "$file.lock"
    if [ "$kind" = term-alone ]; then
        setsid "$prism" sweep "$exp" -o "$file" -q --flush-interval 0.2 >"$dir/run.log" 2>&1 &
    else
        setsid "$mpiexec" -n 3 "$prism" sweep "$exp" -o "$file" -q --flush-interval 0.2 \
            >"$dir/run.log" 2>&1 &
    fi
    pid=$!
    # SIGTERM through mpiexec once the sweep's file exists: MPICH's mpiexec can hang for good
    # when SIGTERM reaches it in the first ~15 ms of its start-up, before MPI is up
    # (signal_trials.sh); at most 60 s
    if [ "$kind" = term-mpiexec ] || [ "$kind" = term-all ]; then
        if ! started_or_killed "$pid" "$file" 60; then
            violation "$stuck"
            continue
        fi
    fi
    sleep "$delay"
    case $kind in
        term-mpiexec | term-alone) kill -TERM "$pid" 2>/dev/null ;;
        # every process: mpiexec's group and what runs below it (hydra's proxy and ranks are in
        # sessions of their own)
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
    "$prism" status "$file" >"$dir/status.log" 2>&1
    status=$?
    if [ "$status" != 0 ] && [ "$status" != 3 ]; then
        violation "prism status exited $status: $(cat "$dir/status.log")"
        continue
    fi
    grep -q "complete but not verified" "$dir/status.log" && unverified=$((unverified + 1))
    if [ "$kind" != kill-all ]; then
        term_runs=$((term_runs + 1))
        if [ "$rc" = "$status" ]; then agreed=$((agreed + 1)); else
            violation "exit $rc, file status $status: $(cat "$dir/status.log"); $(tail -n 3 "$dir/run.log")"
        fi
    fi
    if [ "$status" = 3 ]; then
        PRISM_TEST_VERIFY_DELAY_MS=0 timeout -s KILL 300 "$mpiexec" -n 3 "$prism" sweep "$exp" \
            -o "$file" --resume -q >"$dir/resume.log" 2>&1 ||
            { violation "--resume exited $?: $(cat "$dir/resume.log")"; continue; }
    fi
    if /usr/bin/python3 "$compare" "$dir/ref.h5" "$file" >"$dir/compare.log" 2>&1; then
        identical=$((identical + 1))
    else
        violation "content differs: $(cat "$dir/compare.log")"
    fi
done

echo "trials $trials (term-mpiexec ${kinds[term-mpiexec]:-0}, term-all ${kinds[term-all]:-0}," \
     "term-alone ${kinds[term-alone]:-0}, kill-all ${kinds[kill-all]:-0}), delays 0-${max_delay}s:" \
     "exit status = file status in $agreed of $term_runs SIGTERM runs;" \
     "left unverified (stopped while verifying): $unverified;" \
     "files identical to an undisturbed run after --resume: $identical of $files;" \
     "no file made: $none; violations: $violations"
[ "$violations" = 0 ]
