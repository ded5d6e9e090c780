#!/usr/bin/env bash
# Speed of a whole study (issue 23): the GPT-3 175B / 1024-A100 space
# (configs/examples/gpt3_175b_1024_space.toml: 19,116 points after the filters, PRISM-paper
# variability, analytic with sensitivity, exact front of p95 step time against memory per GPU)
# swept alone and under `mpiexec -n 3`, pruned (as shipped) and unpruned (prune = false);
# a second binary (e.g. main's, which has no pruning) runs the shipped file the same way,
# interleaved with this one. Prints the
# process wall and CPU time per run, the rows dominated, and checks that the pruned front
# equals the unpruned one (tests/cli/compare_pruned.py). Then the per-point cost by pipeline
# depth (bench/cost_by_pp: every kept point evaluated in full, one core) and its pp 32 / pp 2
# ratio.
#
#   bash bench/gpt3_space.sh [PRISM] [REPEAT=3] [OTHER_PRISM]
set -euo pipefail
prism=${1:-build/explorer/prism}
repeat=${2:-3}
other=${3:-}
here=$(cd "$(dirname "$0")/.." && pwd)
cost_by_pp=$(dirname "$(dirname "$prism")")/bench/cost_by_pp
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exp=$here/configs/examples/gpt3_175b_1024_space.toml
cp "$exp" "$work/pruned.toml"
sed 's/^method = "analytic"/method = "analytic"\nprune = false/' "$exp" >"$work/unpruned.toml"

# run LABEL BINARY TOML RANKS OUT: one sweep; prints wall s, cpu s (all ranks), dominated rows
run() {
    local label=$1 bin=$2 toml=$3 ranks=$4 out=$5
    local t0 t1
    t0=$(date +%s.%N)
    if [ "$ranks" = 1 ]; then
        /usr/bin/time -f "%U %S" -o "$out.time" "$bin" sweep "$toml" -o "$out" --overwrite \
            --progress-interval 1000 >"$out.log" 2>&1
    else
        /usr/bin/time -f "%U %S" -o "$out.time" mpiexec -n "$ranks" "$bin" sweep "$toml" -o "$out" \
            --overwrite --progress-interval 1000 >"$out.log" 2>&1
    fi
    t1=$(date +%s.%N)
    local cpu dominated
    cpu=$(awk '{print $1 + $2}' "$out.time")
    dominated=$(grep -Eo 'dominated [0-9]+' "$out.log" | awk '{print $2}' || true)
    printf '%-10s %-9s %5s %10.2f %10.2f %10s\n' "$label" "$(basename "$toml" .toml)" "$ranks" \
        "$(echo "$t1 - $t0" | bc)" "$cpu" "${dominated:--}"
}

printf '%-10s %-9s %5s %10s %10s %10s\n' binary space ranks wall_s cpu_s dominated
for ((i = 0; i < repeat; i++)); do
    for ranks in 1 3; do
        for space in pruned unpruned; do
            run this "$prism" "$work/$space.toml" "$ranks" "$work/this.$space.$ranks.h5"
            if [ -n "$other" ] && [ "$space" = pruned ]; then
                run other "$other" "$work/$space.toml" "$ranks" "$work/other.$space.$ranks.h5"
            fi
        done
    done
done
/usr/bin/python3 "$here/tests/cli/compare_pruned.py" "$work/this.pruned.1.h5" \
    "$work/this.unpruned.1.h5" && echo "front: pruned = unpruned (indices), evaluated rows equal"
/usr/bin/python3 "$here/tests/cli/compare_results.py" "$work/this.pruned.1.h5" \
    "$work/this.pruned.3.h5" >/dev/null && echo "pruned file: alone = mpiexec -n 3"

if [ -x "$cost_by_pp" ]; then
    echo
    echo "per-point cost by pp (every kept point evaluated in full, one core):"
    "$cost_by_pp" "$exp" | tee "$work/cost.txt"
    awk '$1 == 2 {a = $3} $1 == 32 {b = $3} END {if (a > 0) printf "pp 32 / pp 2: %.2fx\n", b / a}' \
        "$work/cost.txt"
fi
