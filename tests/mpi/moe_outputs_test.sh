#!/usr/bin/env bash
# What a sweep of a Mixture-of-Experts experiment writes (docs/moe_outputs.md), end to end on
# tests/data/sweeps/moe_small.toml (Qwen3-30B-A3B, real routing, ep 1-16): alone and under
# `mpiexec -n N` the same tables; the routing share of p50 / p95 against the same space swept
# with moe_force_balance = true, the MoE lines against `prism eval`, prism_results and
# `prism report` showing them, a file without them still read
# (tests/python/check_moe_outputs.py); the page's data with the fourth breakdown line against
# `prism eval` (tests/python/test_page_data.py).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -euo pipefail
prism=$1 mpiexec=$2 n=$3 dir=$4 src=$5
py=/usr/bin/python3
rm -rf "$dir" && mkdir -p "$dir"
toml=$src/tests/data/sweeps/moe_small.toml
grep -q '^moe_force_balance = false$' "$toml"
sed 's/^moe_force_balance = false$/moe_force_balance = true/' "$toml" >"$dir/forced.toml"
"$prism" sweep "$toml" -o "$dir/moe.serial.h5" -q
"$mpiexec" -n "$n" "$prism" sweep "$toml" -o "$dir/moe.mpi.h5" -q
$py "$src/tests/cli/compare_results.py" "$dir/moe.serial.h5" "$dir/moe.mpi.h5"
"$prism" sweep "$dir/forced.toml" -o "$dir/forced.h5" -q
$py "$src/tests/python/check_moe_outputs.py" "$dir/moe.mpi.h5" "$dir/forced.h5" "$prism" "$dir"
$py "$src/tests/python/test_page_data.py" "$dir/moe.mpi.h5" "$prism" "$dir"
echo "ok   moe outputs (np $n)"
