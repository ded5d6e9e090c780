#!/usr/bin/env bash
# configs/examples/deepseek_v3_space.toml (issue 36): the DeepSeek-V3 / 1,024-2,048-H100 space sweeps
# in under a minute, its result file has the ep column, and `prism eval` of Megatron-Bridge's
# 25.09 H100 configuration (tp 2, pp 8, ep 64, microbatch 1; measured 25.26 s per step,
# tests/data/reference/moe/megatron_bridge_h100.csv) shows the MoE lines and lands where a stack
# fitted on 26.04.01 software should on 25.09 software: faster, by at most the 1.42x the same
# Qwen3-235B H100 split gained between the two containers (docs/moe_calibration.md).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
exp=$src/configs/examples/deepseek_v3_space.toml
fails=0
start=$(date +%s.%N)
timeout 120 "$prism" sweep "$exp" -o dsv3.h5 >sweep.txt 2>&1; rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
cat sweep.txt
echo "sweep took $secs s"
[ "$rc" = 0 ] || { echo "FAIL sweep exit $rc"; fails=1; }
[ "$(echo "$secs < 60" | bc)" = 1 ] || { echo "FAIL sweep took $secs s"; fails=1; }
grep -q '^points      384 evaluated' sweep.txt || { echo "FAIL point count"; fails=1; }
grep -Eq '^index +gpus +ep +pp +tp' sweep.txt || { echo "FAIL ep column in the report"; fails=1; }

"$prism" eval "$exp" --point gpus=1024,ep=64,pp=8,tp=2,microbatch=1,recompute=none >eval.txt 2>&1 ||
    { echo "FAIL eval exit"; fails=1; }
cat eval.txt
for line in 'layers: MoE a2a exposed' 'MoE: router and permute' 'MoE: expert compute' \
    'MoE: dispatch' 'MoE: combine'; do
    grep -q "$line" eval.txt || { echo "FAIL no line '$line'"; fails=1; }
done
step=$(awk '$1 == "step_time_s" {print $2}' eval.txt)
echo "step time $step s (measured 25.26 s in 25.09)"
[ -n "$step" ] && [ "$(echo "$step > 25.264 / 1.42 && $step < 1.05 * 25.264" | bc -l)" = 1 ] ||
    { echo "FAIL step time $step s not within 25.26 s / 1.42 .. 25.26 s x 1.05"; fails=1; }

# configs/examples/deepseek_v3_gb200.toml: 256 GB200 NVL72, EP inside the 64-GPU NVLink domain
# (ep <= 64) or across it (128, 256); sweeps in under a minute too
start=$(date +%s.%N)
timeout 120 "$prism" sweep "$src/configs/examples/deepseek_v3_gb200.toml" -o gb200.h5 >gb200.txt 2>&1
rc=$?
secs=$(echo "$(date +%s.%N) - $start" | bc)
cat gb200.txt
[ "$rc" = 0 ] || { echo "FAIL gb200 sweep exit $rc"; fails=1; }
[ "$(echo "$secs < 60" | bc)" = 1 ] || { echo "FAIL gb200 sweep took $secs s"; fails=1; }
grep -q '^points      96 evaluated' gb200.txt || { echo "FAIL gb200 point count"; fails=1; }
[ "$fails" = 0 ] && echo "ok   moe example"
exit "$fails"
