# Helpers of the signal trials (signal_trials.sh, verify_signal_trials.sh) for a launcher PID
# and what it started; sourced, not run. wait_bounded writes to $dir, the trials' scratch folder.

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
# Waits up to LIMIT seconds for the child PID, its exit status in $waited; fails when a watchdog
# had to kill the job (what was still running in its session is then in $dir/timed_out).
wait_bounded() {
    local pid=$1 limit=$2 dog i
    rm -f "$dir/timed_out"
    (
        for ((i = 0; i < limit; i++)); do sleep 1; running "$pid" || exit 0; done
        leftovers "$pid" > "$dir/timed_out"
        kill_job "$pid"
    ) 2>/dev/null &
    dog=$!
    wait "$pid" 2>/dev/null; waited=$?
    kill "$dog" 2>/dev/null; wait "$dog" 2>/dev/null
    [ ! -e "$dir/timed_out" ]
}
# SIGKILL to PID's session and every process below PID.
kill_job() {
    local procs
    procs=$(tree "$1")
    kill -KILL -- "-$1" 2>/dev/null
    kill -KILL $procs 2>/dev/null
}
# The processes of the job's session (setsid made PID its leader), one line each.
leftovers() { ps -s "$1" -o pid=,stat=,etime=,args= 2>/dev/null | awk '$2 !~ /^Z/' | tr '\n' ';'; }
# Waits up to LIMIT seconds for every process of the session to end.
settle() {
    local i
    for ((i = 0; i < $2 * 10; i++)); do [ -z "$(leftovers "$1")" ] && return 0; sleep 0.1; done
    return 1
}
# Waits up to LIMIT seconds for the sweep's FILE (sweep_started); when it does not come, kills the
# job and fails with the reason in $stuck.
started_or_killed() {
    sweep_started "$1" "$2" "$3" && return 0
    stuck="no file $3 s after the launch: $(leftovers "$1")"
    kill_job "$1"
    wait "$1" 2>/dev/null
    return 1
}
# Waits for the signalled job PID to end, its launcher and then every process of its session, at
# most LIMIT seconds each, the launcher's exit status in $waited. A job still running then is a
# violation of its own, not a hung test: killed, and the call fails with what still ran in $stuck.
await_job() {
    if ! wait_bounded "$1" "$2"; then
        stuck="launcher still running ${2}s after the signal: $(cat "$dir/timed_out")"
        return 1
    fi
    # mpiexec can return while the ranks it was killed with still exit (and hold the file's claim)
    if ! settle "$1" "$2"; then
        stuck="launcher exited $waited but ranks still ran ${2}s later: $(leftovers "$1")"
        kill_job "$1"
        return 1
    fi
}
