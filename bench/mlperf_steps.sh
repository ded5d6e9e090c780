#!/usr/bin/env bash
# The model against the measured step times of the MLPerf Training v4.1 GPT-3 175B runs
# (tests/data/steps): the deterministic step against each system's measured median, and the
# step-time distribution with a variability profile fitted on another scale (or platform).
# docs/validation.md "Measured step-time distributions" quotes its output. Usage, from the repository root:
#   bash bench/mlperf_steps.sh [PRISM_BINARY] [MONTE_CARLO_SAMPLES]
# With MONTE_CARLO_SAMPLES (e.g. 2000) the within-run shapes are Monte Carlo's, not analytic.
set -euo pipefail
prism=${1:-build/explorer/prism}
mc=${2:-0}
data=tests/data/steps
exp=configs/examples/mlperf
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mc_args=()
[[ "$mc" != 0 ]] && mc_args=(--monte-carlo "$mc")

h100_256=("$data"/mlperfv41_NVIDIA_eos_n32_*.csv)
h100_512=("$data"/mlperfv41_NVIDIA_eos_n64_*.csv)
b200_64=("$data"/mlperfv41_NVIDIA_b200_n8_*.csv)

# The 512-GPU profile is fitted here (the 256-GPU and B200 ones are presets, written the same
# way: see their headers).
"$prism" steps fit "${h100_512[@]}" --experiment "$exp/eos_h100_512.toml" \
    -o "$scratch/eos-h100-512.toml" > "$scratch/fit512.log"

compare() {  # title, experiment, variability, runs...
    local title=$1 experiment=$2 variability=$3
    shift 3
    echo "=== $title"
    "$prism" steps compare "$@" --experiment "$exp/$experiment" --variability "$variability" \
        "${mc_args[@]}" | sed -n '/^ *steps/,$p'
    echo
}

compare "256 H100 <- fitted on 512 H100" eos_h100_256.toml "$scratch/eos-h100-512.toml" "${h100_256[@]}"
compare "512 H100 <- fitted on 256 H100 (mlperf-eos-h100)" eos_h100_512.toml mlperf-eos-h100 "${h100_512[@]}"
compare "64 B200 <- fitted on 256 H100 (mlperf-eos-h100)" nyx_b200_64.toml mlperf-eos-h100 "${b200_64[@]}"
compare "256 H100 <- in sample (mlperf-eos-h100)" eos_h100_256.toml mlperf-eos-h100 "${h100_256[@]}"
compare "512 H100 <- in sample" eos_h100_512.toml "$scratch/eos-h100-512.toml" "${h100_512[@]}"
compare "64 B200 <- in sample (mlperf-nyx-b200)" nyx_b200_64.toml mlperf-nyx-b200 "${b200_64[@]}"
for e in "eos_h100_256.toml h100_256" "eos_h100_512.toml h100_512" "nyx_b200_64.toml b200_64"; do
    set -- $e
    runs="$2[@]"
    compare "$1 <- prism-paper" "$1" prism-paper "${!runs}"
done
