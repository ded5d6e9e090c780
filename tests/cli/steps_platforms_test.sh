#!/usr/bin/env bash
# Issue 35, items 5-6: the shared MLPerf platforms beyond Eos (tests/data/steps, Apache-2.0).
# - University of Florida B200 at two scales (Llama 3.1 405B on 256 GPUs, 8B on 64):
#   `prism steps fit --runs-from tests/data/steps/uf_b200_runs.toml --hiccups`; each scale
#   predicted from a fit on the other alone within the goal, KS shape < 0.2 (measured: 0.197
#   and 0.179), and no periodic event in these runs (scattered slow steps are not a period).
# - Every platform preset (configs/presets/variability/mlperf-*.toml) against the measured steps
#   of its platform with `prism steps compare`: KS shape below 0.2 (the fits: 0.035-0.16).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
data=$src/tests/data/steps
exp=$src/configs/examples/mlperf

# a number below a bound (awk: the shell has no floating point)
below() { awk -v x="$1" -v b="$2" 'BEGIN { exit !(x != "" && x + 0 < b + 0) }'; }

"$prism" steps fit --runs-from "$data/uf_b200_runs.toml" --hiccups -o uf.toml >uf.out 2>&1 ||
    fail "uf_fit: exit $?: $(tail -5 uf.out)"
for group in uf_b200_256 uf_b200_64_8b; do
    left=$(awk -v g="$group.toml" '$1 == g { print $NF }' uf.out)
    below "$left" 0.2 && ok "uf_left_out $group $left" ||
        fail "uf_left_out $group: '$left' not below 0.2: $(grep -A4 'per group' uf.out)"
done
grep -q "periodic event" uf.out && fail "uf_no_period: $(grep 'periodic event' uf.out)" ||
    ok uf_no_period

check() {  # preset experiment runs-glob
    local preset=$1 experiment=$2 glob=$3 ks
    # shellcheck disable=SC2086
    "$prism" steps compare $data/$glob --experiment "$exp/$experiment" --variability "$preset" \
        >"$preset.out" 2>&1 || { fail "$preset: exit $?: $(tail -3 "$preset.out")"; return; }
    ks=$(sed -n 's/^KS shape (each run and the model scaled by their medians) \([0-9.]*\).*/\1/p' \
        "$preset.out")
    below "$ks" 0.2 && ok "$preset KS shape $ks" || fail "$preset: KS shape '$ks' not below 0.2"
}
check mlperf-oracle-h100 oracle_h100_1536.toml 'mlperfv41_Oracle_*.csv'
check mlperf-nebius-h200 nebius_h200_512.toml 'mlperfv50_Nebius_*.csv'
check mlperf-uf-b200 uf_b200_256.toml 'mlperfv51_University-of-Florida_hpg.dgxb200x8.n32_*.csv'
check mlperf-uf-b200 uf_b200_64_8b.toml 'mlperfv51_University-of-Florida_hpg.dgxb200x8.n8_*.csv'
check mlperf-carina-gb200 carina_gb200_512.toml 'mlperfv50_IBM-CoreWeave-NVIDIA_carina_*.csv'

[ "$fails" = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
