#!/usr/bin/env bash
# A sweep alone and under `mpiexec -n N` must write the same tables (rows, values, order by
# point index, Pareto set, filtered counts), for the analytic and the Monte Carlo evaluator.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -euo pipefail
prism=$1 mpiexec=$2 n=$3 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
for exp in sweep_small sweep_small_mc; do
    toml=$src/tests/data/sweeps/$exp.toml
    "$prism" sweep "$toml" -o "$dir/$exp.serial.h5" -q
    "$mpiexec" -n "$n" "$prism" sweep "$toml" -o "$dir/$exp.mpi.h5" -q
    /usr/bin/python3 "$src/tests/cli/compare_results.py" "$dir/$exp.serial.h5" "$dir/$exp.mpi.h5"
done
