#!/bin/bash
# Tests of the launch scripts in jobs/ against stub commands (prism, srun, sbatch, squeue,
# scontrol, qsub, qstat, mpirun, python): exit-code handling, resubmission with --resume, the
# time limit derived from the allocation, the resume loop and signal handling.
#
# Usage: bash jobs/tests/test_jobs.sh     (exit 0 when every check passes; needs only bash)

set -uo pipefail

jobs_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d)"
trap '[[ -n "${KEEP:-}" ]] || rm -rf "$work"' EXIT
stubs="$work/bin"
mkdir -p "$stubs"
failures=0
checks=0

check() {  # check DESCRIPTION COMMAND...
    local what="$1"
    shift
    checks=$((checks + 1))
    if ! "$@"; then
        echo "FAIL: $what" >&2
        failures=$((failures + 1))
    fi
}
contains() { grep -qF -- "$2" "$1"; }
not_contains() { ! grep -qF -- "$2" "$1" 2>/dev/null; }
lines() { [[ "$(wc -l 2>/dev/null <"$1" || echo 0)" -eq "$2" ]]; }
between() { [[ "$1" -ge "$2" && "$1" -le "$3" ]]; }

# prism: logs its arguments, one run per line, and exits with the next code of $CODES_FILE
# (one per line; the last one repeats). With PRISM_STUB_SLEEP it sleeps first and exits 3 on
# SIGTERM, like the real program.
cat >"$stubs/prism" <<'EOF'
#!/bin/bash
trap 'kill "$!" 2>/dev/null; exit 3' TERM
echo "$*" >>"$LOG"
n=$(wc -l <"$LOG")
code=$(sed -n "${n}p" "$CODES_FILE")
[[ -n "$code" ]] || code=$(tail -n 1 "$CODES_FILE")
if [[ -n "${PRISM_STUB_SLEEP:-}" ]]; then
    sleep "$PRISM_STUB_SLEEP" &
    wait $!
fi
exit "$code"
EOF
# Waits until the prism stub has started (and set its trap), at most 20 s.
wait_for_prism() {
    local i
    for ((i = 0; i < 200; ++i)); do
        [[ -s "$LOG" ]] && return 0
        sleep 0.1
    done
    return 1
}
# Launchers run their command after the options.
cat >"$stubs/srun" <<'EOF'
#!/bin/bash
exec "$@"
EOF
cat >"$stubs/mpirun" <<'EOF'
#!/bin/bash
echo "$*" >>"$LAUNCH_LOG"
while [[ "$1" == -* ]]; do
    case "$1" in -n|--hostfile) shift 2 ;; *) shift ;; esac
done
exec "$@"
EOF
cat >"$stubs/sbatch" <<'EOF'
#!/bin/bash
echo "$* RESUME=$PRISM_RESUME ATTEMPT=$PRISM_ATTEMPT EXP=$EXP OUT=$OUT" >>"$SUBMIT_LOG"
EOF
cat >"$stubs/qsub" <<'EOF'
#!/bin/bash
echo "$*" >>"$SUBMIT_LOG"
EOF
cat >"$stubs/squeue" <<'EOF'
#!/bin/bash
echo "$SQUEUE_LEFT"
EOF
cat >"$stubs/scontrol" <<'EOF'
#!/bin/bash
printf 'JobId=%s JobName=prism-sweep\n   Command=%s\n' "$SLURM_JOB_ID" "$SCONTROL_COMMAND"
EOF
cat >"$stubs/qstat" <<'EOF'
#!/bin/bash
printf 'Job Id: %s\n    Resource_List.walltime = %s\n    resources_used.walltime = %s\n' \
    "$2" "$QSTAT_LIMIT" "$QSTAT_USED"
EOF
cat >"$stubs/python" <<'EOF'
#!/bin/bash
echo "$*" >>"$LOG"
[[ "$2" == summary ]] && echo "summary of $3"
exit 0
EOF
chmod +x "$stubs"/*

# A fresh environment per case: clear every setting the scripts read.
reset_case() {
    unset EXP OUT PRISM_BIN PRISM_MARGIN_S PRISM_LAUNCHER PRISM_RESUME PRISM_ATTEMPT \
        PRISM_MAX_ATTEMPTS PRISM_PROGRESS_S PRISM_EXTRA_ARGS PRISM_SBATCH_ARGS PRISM_JOB_SCRIPT \
        SLURM_JOB_END_TIME SLURM_JOB_ID SLURM_SUBMIT_DIR SLURM_NTASKS SQUEUE_LEFT \
        SCONTROL_COMMAND PBS_WALLTIME PBS_JOBID PBS_O_WORKDIR PBS_NODEFILE NP PRISM_MPIRUN \
        PRISM_MPIRUN_ARGS PRISM_WALLTIME_S PRISM_QSUB_ARGS PRISM_TIME_LIMIT QSTAT_LIMIT \
        QSTAT_USED PRISM_STUB_SLEEP PYTHON PRISM_ROOT PLOT_X PLOT_Y PLOT_OUT SUMMARY_OUT SKIP_PLOT
    case_dir="$work/case$((++case_number))"
    mkdir -p "$case_dir"
    export LOG="$case_dir/prism.log" CODES_FILE="$case_dir/codes" SUBMIT_LOG="$case_dir/submit.log"
    export LAUNCH_LOG="$case_dir/launch.log"
    export PATH="$stubs:$PATH" EXP=exp.toml OUT="$case_dir/out.h5" PRISM_BIN="$stubs/prism"
    : >"$LOG"
}
case_number=0

# ---- syntax -------------------------------------------------------------------------------
for script in slurm_sweep.sbatch pbs_sweep.pbs mpirun_sweep.sh postprocess.sh; do
    check "bash -n $script" bash -n "$jobs_dir/$script"
done

# ---- Slurm ----------------------------------------------------------------------------------
slurm_env() {
    export SLURM_JOB_ID=42 SLURM_SUBMIT_DIR="$case_dir" SLURM_NTASKS=8
    export SCONTROL_COMMAND="$jobs_dir/slurm_sweep.sbatch"
}

reset_case && slurm_env
echo 3 >"$CODES_FILE"
export SLURM_JOB_END_TIME=$(($(date +%s) + 1000)) PRISM_MARGIN_S=300
bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1
rc=$?
limit=$(sed -n 's/.*--time-limit \([0-9]*\).*/\1/p' "$LOG")
check "slurm: interrupted run resubmits and the job succeeds" [ "$rc" -eq 0 ]
check "slurm: time limit is the time left minus the margin (got '$limit')" between "${limit:-0}" 695 700
check "slurm: first run has no --resume" not_contains "$LOG" "--resume"
check "slurm: runs sweep EXP -o OUT" contains "$LOG" "sweep exp.toml -o $OUT"
check "slurm: resubmits with PRISM_RESUME=1, attempt 2" contains "$SUBMIT_LOG" "RESUME=1 ATTEMPT=2 EXP=exp.toml"
check "slurm: resubmits the script scontrol names" contains "$SUBMIT_LOG" "$jobs_dir/slurm_sweep.sbatch"

reset_case && slurm_env
echo 3 >"$CODES_FILE"
export SQUEUE_LEFT="1-02:03:04" PRISM_RESUME=1 PRISM_ATTEMPT=4 PRISM_SBATCH_ARGS="--nodes=4 --account=abc"
bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1
check "slurm: squeue's D-HH:MM:SS minus 300 s" contains "$LOG" "--time-limit 93484"
check "slurm: a resubmitted job passes --resume" contains "$LOG" "--resume"
check "slurm: resubmission carries PRISM_SBATCH_ARGS" contains "$SUBMIT_LOG" "--nodes=4 --account=abc"
check "slurm: attempt counter advances" contains "$SUBMIT_LOG" "ATTEMPT=5"

reset_case && slurm_env
echo 3 >"$CODES_FILE"
export SQUEUE_LEFT="04:00" PRISM_ATTEMPT=20
bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1
rc=$?
check "slurm: a short allocation still gets 60 s" contains "$LOG" "--time-limit 60"
check "slurm: stops resubmitting after PRISM_MAX_ATTEMPTS (exit 3)" [ "$rc" -eq 3 ]
check "slurm: nothing submitted at the attempt limit" lines "$SUBMIT_LOG" 0

for code in 0 1 2; do
    reset_case && slurm_env
    echo "$code" >"$CODES_FILE"
    export SQUEUE_LEFT=UNLIMITED PRISM_LAUNCHER=mpirun
    bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1
    rc=$?
    check "slurm: exit $code is passed on" [ "$rc" -eq "$code" ]
    check "slurm: exit $code is not resubmitted" lines "$SUBMIT_LOG" 0
    check "slurm: no time limit when the allocation is unlimited" not_contains "$LOG" "--time-limit"
    check "slurm: mpirun -n \$SLURM_NTASKS" contains "$LAUNCH_LOG" "-n 8 $stubs/prism sweep"
done

reset_case && slurm_env
echo 0 >"$CODES_FILE"
unset EXP
bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1
rc=$?
check "slurm: missing EXP is bad input" [ "$rc" -eq 2 ]
check "slurm: missing EXP is named" contains "$case_dir/stdout" "EXP (experiment TOML) is not set"

reset_case && slurm_env
echo 0 >"$CODES_FILE"
export PRISM_STUB_SLEEP=30 SQUEUE_LEFT=UNLIMITED
bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1 &
pid=$!
wait_for_prism
sleep 0.2
kill -TERM "$pid"
wait "$pid"
rc=$?
check "slurm: scancel (TERM) stops the sweep with exit 3" [ "$rc" -eq 3 ]
check "slurm: scancel does not resubmit" lines "$SUBMIT_LOG" 0

reset_case && slurm_env
echo 0 >"$CODES_FILE"
export PRISM_STUB_SLEEP=30 SQUEUE_LEFT=UNLIMITED
bash "$jobs_dir/slurm_sweep.sbatch" >"$case_dir/stdout" 2>&1 &
pid=$!
wait_for_prism
sleep 0.2
kill -USR1 "$pid"
wait "$pid"
rc=$?
check "slurm: USR1 before the time limit stops and resubmits" lines "$SUBMIT_LOG" 1
check "slurm: the job that resubmitted succeeds" [ "$rc" -eq 0 ]

# ---- PBS ------------------------------------------------------------------------------------
pbs_env() {
    export PBS_JOBID=7.server PBS_O_WORKDIR="$case_dir" PBS_NODEFILE="$case_dir/nodes"
    printf 'n1\nn1\nn2\nn2\n' >"$PBS_NODEFILE"
}

reset_case && pbs_env
echo 3 >"$CODES_FILE"
export PBS_WALLTIME=3600 PRISM_MARGIN_S=600 PRISM_QSUB_ARGS="-l walltime=01:00:00"
bash "$jobs_dir/pbs_sweep.pbs" >"$case_dir/stdout" 2>&1
rc=$?
limit=$(sed -n 's/.*--time-limit \([0-9]*\).*/\1/p' "$LOG")
check "pbs: interrupted run resubmits and the job succeeds" [ "$rc" -eq 0 ]
check "pbs: Torque PBS_WALLTIME minus the margin (got '$limit')" between "${limit:-0}" 2995 3000
check "pbs: ranks from PBS_NODEFILE" contains "$LAUNCH_LOG" "-n 4 $stubs/prism sweep exp.toml"
check "pbs: resubmits with resume and the next attempt" contains "$SUBMIT_LOG" "PRISM_RESUME=1,PRISM_ATTEMPT=2"
check "pbs: resubmission carries PRISM_QSUB_ARGS" contains "$SUBMIT_LOG" "-l walltime=01:00:00 -v EXP=exp.toml"
check "pbs: resubmits jobs/pbs_sweep.pbs of the submit directory" contains "$SUBMIT_LOG" "$case_dir/jobs/pbs_sweep.pbs"
check "pbs: NP is not frozen into the resubmission" not_contains "$SUBMIT_LOG" ",NP="

reset_case && pbs_env
echo 3 >"$CODES_FILE"
export QSTAT_LIMIT=02:00:00 QSTAT_USED=00:10:00 NP=3 PRISM_RESUME=1 PRISM_MAX_ATTEMPTS=1
bash "$jobs_dir/pbs_sweep.pbs" >"$case_dir/stdout" 2>&1
rc=$?
limit=$(sed -n 's/.*--time-limit \([0-9]*\).*/\1/p' "$LOG")
check "pbs: PBS Pro qstat limit - used - margin (got '$limit')" between "${limit:-0}" 6295 6300
check "pbs: NP overrides the node file" contains "$LAUNCH_LOG" "-n 3 "
check "pbs: --resume when asked" contains "$LOG" "--resume"
check "pbs: attempt limit ends with exit 3" [ "$rc" -eq 3 ]
check "pbs: nothing submitted at the attempt limit" lines "$SUBMIT_LOG" 0

reset_case && pbs_env
echo 1 >"$CODES_FILE"
bash "$jobs_dir/pbs_sweep.pbs" >"$case_dir/stdout" 2>&1
rc=$?
check "pbs: other errors pass through" [ "$rc" -eq 1 ]
check "pbs: no walltime known, no time limit" not_contains "$LOG" "--time-limit"

# ---- plain mpirun ---------------------------------------------------------------------------
reset_case
printf '3\n3\n0\n' >"$CODES_FILE"
export NP=2 PRISM_TIME_LIMIT=3h50m
bash "$jobs_dir/mpirun_sweep.sh" exp2.toml "$case_dir/r.h5" --progress-interval 9 >"$case_dir/stdout" 2>&1
rc=$?
check "mpirun: loops until complete" [ "$rc" -eq 0 ]
check "mpirun: three runs" lines "$LOG" 3
check "mpirun: first run without --resume" [ "$(sed -n 1p "$LOG")" == "sweep exp2.toml -o $case_dir/r.h5 --time-limit 3h50m --progress-interval 9" ]
check "mpirun: later runs with --resume" [ "$(sed -n 3p "$LOG")" == "sweep exp2.toml -o $case_dir/r.h5 --time-limit 3h50m --progress-interval 9 --resume" ]
check "mpirun: -n NP" contains "$LAUNCH_LOG" "-n 2 "

reset_case
echo 3 >"$CODES_FILE"
export PRISM_MAX_ATTEMPTS=4 NP=0
bash "$jobs_dir/mpirun_sweep.sh" >"$case_dir/stdout" 2>&1
rc=$?
check "mpirun: gives up after PRISM_MAX_ATTEMPTS with exit 3" [ "$rc" -eq 3 ]
check "mpirun: exactly PRISM_MAX_ATTEMPTS runs" lines "$LOG" 4
check "mpirun: NP=0 runs prism without mpirun" [ ! -e "$LAUNCH_LOG" ]

reset_case
echo 2 >"$CODES_FILE"
bash "$jobs_dir/mpirun_sweep.sh" >"$case_dir/stdout" 2>&1
rc=$?
check "mpirun: bad input ends the loop with exit 2" [ "$rc" -eq 2 ]
check "mpirun: bad input is not retried" lines "$LOG" 1

reset_case
echo 0 >"$CODES_FILE"
export PRISM_STUB_SLEEP=30 NP=0
# Job control on, so that the background script does not start with SIGINT ignored.
set -m
bash "$jobs_dir/mpirun_sweep.sh" >"$case_dir/stdout" 2>&1 &
pid=$!
set +m
wait_for_prism
sleep 0.2
kill -INT "$pid"
wait "$pid"
rc=$?
check "mpirun: Ctrl-C stops cleanly with exit 3" [ "$rc" -eq 3 ]
check "mpirun: Ctrl-C is not followed by a resume" lines "$LOG" 1

# ---- post-processing ------------------------------------------------------------------------
reset_case
touch "$case_dir/res.h5"
mkdir -p "$case_dir/root/scripts" && touch "$case_dir/root/scripts/prism_results.py"
export PYTHON="$stubs/python" PRISM_ROOT="$case_dir/root" SUMMARY_OUT="$case_dir/summary.txt"
bash "$jobs_dir/postprocess.sh" "$case_dir/res.h5" gpu_hours_p95 run_time_p95_days >"$case_dir/stdout" 2>&1
rc=$?
check "postprocess: succeeds" [ "$rc" -eq 0 ]
check "postprocess: summary" contains "$LOG" "$case_dir/root/scripts/prism_results.py summary $case_dir/res.h5"
check "postprocess: plot" contains "$LOG" "plot $case_dir/res.h5 --x gpu_hours_p95 --y run_time_p95_days -o $case_dir/res_gpu_hours_p95_vs_run_time_p95_days.png"
check "postprocess: summary copied to SUMMARY_OUT" contains "$case_dir/summary.txt" "summary of $case_dir/res.h5"

reset_case
export PYTHON="$stubs/python" PRISM_ROOT="$case_dir"
bash "$jobs_dir/postprocess.sh" "$case_dir/missing.h5" >"$case_dir/stdout" 2>&1
rc=$?
check "postprocess: a missing file is bad input" [ "$rc" -eq 2 ]
check "postprocess: names the missing file" contains "$case_dir/stdout" "no such result file: $case_dir/missing.h5"

echo "$((checks - failures))/$checks checks passed"
((failures == 0))
