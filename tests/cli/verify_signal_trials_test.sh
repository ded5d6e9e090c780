#!/usr/bin/env bash
# A few of the randomized signal trials during the front's verification
# (tests/fault/verify_signal_trials.sh), for CI: 4 trials, one of each kind (~30 s).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
exec bash "$5/tests/fault/verify_signal_trials.sh" "$1" "$2" 4 "$4" "$5"
