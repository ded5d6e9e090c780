#!/usr/bin/env bash
# A few of the randomized signal trials (tests/fault/signal_trials.sh), for CI.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
exec bash "$5/tests/fault/signal_trials.sh" "$1" "$2" 4 "$4" "$5"
