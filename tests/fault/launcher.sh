# Helpers of the signal trials (signal_trials.sh, verify_signal_trials.sh) for a launcher PID
# and what it started; sourced, not run.

# Whether PID is running (a zombie, exited but not reaped, is not).
running() { local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1; [[ $s != Z* ]]; }
# Waits up to LIMIT seconds for the sweep's FILE to exist (MPI is up: the master made it) while
# PID runs; fails if it does not. MPICH's mpiexec can hang for good when SIGTERM reaches it in
# the first ~15 ms of its start-up, before MPI is up: the trials signal it after this.
sweep_started() {
    local i
    for ((i = 0; i < $3 * 100; i++)); do
        [ -e "$2" ] && return 0
        running "$1" || return 1
        sleep 0.01
    done
    return 1
}
# PID and every process below it (hydra puts its proxy and the ranks in sessions of their own,
# out of reach of a signal to PID's session).
tree() {
    local child
    echo "$1"
    for child in $(pgrep -P "$1" 2>/dev/null); do tree "$child"; done
}
