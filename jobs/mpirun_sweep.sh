#!/bin/bash
# Run a PRISM sweep with plain mpirun (a workstation, or an allocation you already hold),
# resuming until it is complete.
#
# Usage:
#   jobs/mpirun_sweep.sh EXP.toml OUT.h5 [extra prism sweep arguments...]
#   EXP=configs/experiments/x.toml OUT=results/x.h5 NP=16 jobs/mpirun_sweep.sh
#
# Runs `mpirun -n NP prism sweep EXP -o OUT`. prism exits 0 when the sweep is complete, 3 when
# it stopped early but resumable (time limit or signal), 2 for bad input, 1 for other errors.
# On 3 the sweep runs again with --resume, up to PRISM_MAX_ATTEMPTS runs; anything else ends
# the loop with prism's exit code. Ctrl-C or SIGTERM stops the sweep cleanly (the file stays
# resumable: run again with PRISM_RESUME=1) and ends the loop with exit code 3.
#
# Environment (arguments win over EXP and OUT):
#   EXP                  experiment TOML file
#   OUT                  HDF5 result file
#   PRISM_BIN            prism executable (default: prism on PATH, else build/explorer/prism)
#   NP                   MPI ranks (default: the number of cores, nproc); NP=0 runs prism
#                        alone, without mpirun
#   PRISM_MPIRUN         MPI launcher (default mpirun)
#   PRISM_MPIRUN_ARGS    extra launcher arguments (word-split), e.g. "--hostfile hosts"
#   PRISM_TIME_LIMIT     --time-limit of each run (SECONDS or 3h50m); unset: none
#   PRISM_RESUME         1 to start with --resume (continue an earlier, interrupted sweep)
#   PRISM_MAX_ATTEMPTS   runs at most (default 10)
#   PRISM_EXTRA_ARGS     more arguments for `prism sweep` (word-split)

set -uo pipefail

die() {
    echo "mpirun_sweep: error: $*" >&2
    exit 2
}

if (($# >= 1)); then
    EXP="$1"
    shift
fi
if (($# >= 1)); then
    OUT="$1"
    shift
fi
[[ -n "${EXP:-}" ]] || die "no experiment: jobs/mpirun_sweep.sh EXP.toml OUT.h5 (or set EXP)"
[[ -n "${OUT:-}" ]] || die "no result file: jobs/mpirun_sweep.sh EXP.toml OUT.h5 (or set OUT)"

if [[ -z "${PRISM_BIN:-}" ]]; then
    PRISM_BIN="$(command -v prism || echo build/explorer/prism)"
fi
[[ -x "$PRISM_BIN" ]] || die "prism executable not found: $PRISM_BIN (set PRISM_BIN)"
np="${NP:-$(nproc 2>/dev/null || echo 1)}"
[[ "$np" =~ ^[0-9]+$ ]] || die "NP must be a number, got '$np'"
max_attempts="${PRISM_MAX_ATTEMPTS:-10}"
[[ "$max_attempts" =~ ^[1-9][0-9]*$ ]] || die "PRISM_MAX_ATTEMPTS must be positive, got '$max_attempts'"

launcher=()
if ((np > 0)); then
    launcher=("${PRISM_MPIRUN:-mpirun}" -n "$np")
    if [[ -n "${PRISM_MPIRUN_ARGS:-}" ]]; then
        read -r -a launcher_args <<<"$PRISM_MPIRUN_ARGS"
        launcher+=("${launcher_args[@]}")
    fi
fi
base=(sweep "$EXP" -o "$OUT")
if [[ -n "${PRISM_TIME_LIMIT:-}" ]]; then
    base+=(--time-limit "$PRISM_TIME_LIMIT")
fi
if [[ -n "${PRISM_EXTRA_ARGS:-}" ]]; then
    read -r -a extra <<<"$PRISM_EXTRA_ARGS"
    base+=("${extra[@]}")
fi
base+=("$@")

# Run in the background so that the trap fires at once; prism turns TERM into a clean stop.
stopped=0
signalled=0
child=""
trap 'signalled=1; stopped=1; if [[ -n "$child" ]]; then kill -TERM "$child" 2>/dev/null || true; fi' TERM INT

resume="${PRISM_RESUME:-0}"
rc=1
for ((attempt = 1; attempt <= max_attempts; ++attempt)); do
    cmd=(${launcher[@]+"${launcher[@]}"} "$PRISM_BIN" "${base[@]}")
    if [[ "$resume" == 1 ]]; then
        cmd+=(--resume)
    fi
    echo "mpirun_sweep: attempt $attempt/$max_attempts: ${cmd[*]}"
    "${cmd[@]}" &
    child=$!
    rc=""
    while :; do
        signalled=0
        wait "$child"
        status=$?
        # A trapped signal makes wait return 128+n at once: wait again for the real status. A
        # second wait on a child already collected returns 127: keep what we have.
        if ((signalled && status > 128)); then
            rc=$status
            continue
        fi
        if ((status == 127)) && [[ -n "$rc" ]]; then
            break
        fi
        rc=$status
        break
    done
    child=""
    # MPICH's mpirun (Hydra) can return 0 after forwarding a signal even though prism exited 3:
    # when the run ended normally or interrupted, the file's own status decides.
    if [[ "$rc" == 0 || "$rc" == 3 ]] && [[ -f "$OUT" ]]; then
        "$PRISM_BIN" status "$OUT" >/dev/null 2>&1
        rc=$?
    fi
    case "$rc" in
        0)
            echo "mpirun_sweep: sweep complete: $OUT"
            exit 0
            ;;
        3)
            if ((stopped)); then
                echo "mpirun_sweep: stopped; continue with PRISM_RESUME=1" >&2
                exit 3
            fi
            echo "mpirun_sweep: interrupted (resumable); resuming"
            resume=1
            ;;
        *)
            echo "mpirun_sweep: prism failed with exit code $rc" >&2
            exit "$rc"
            ;;
    esac
done
echo "mpirun_sweep: still incomplete after $max_attempts attempts; continue with PRISM_RESUME=1" >&2
exit 3
