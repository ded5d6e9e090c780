#!/usr/bin/env bash
# Issue 35 item 3 and must-show 1: `prism steps fit --runs-from ... --regime-levels` on the two
# shared platforms with two scales (tests/data/steps: Eos-dfw Llama 3.1 405B at 512 / 8,192
# GPUs, Eos GPT-3 175B at 256 / 512), the comm regime per link level with the NVLink multiplier
# fitted across the scales: every group's KS with that group left out of the fit below the
# issue's goal of 0.2 (reached: 0.195 / 0.093 and 0.041 / 0.055; without the levels Eos-dfw
# was 0.324 / 0.247), and the written profile loads back with its levels.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }

# left_out OUTPUT GROUP-REGEX BOUND: the group's row's last column (the left-out KS) < BOUND
left_out() {
    local ks
    ks=$(grep -E "^$2 \(.*\) +[0-9]+ +[0-9.]+ +[0-9.]+ *$" "$1" | awk '{print $NF}')
    if [ -n "$ks" ] && awk -v k="$ks" -v b="$3" 'BEGIN { exit !(k < b) }'; then
        ok "$1 $2 left out KS $ks < $3"
    else
        fail "$1 $2 left out KS '$ks' (want < $3): $(tail -4 "$1")"
    fi
}

for platform in eos_dfw eos_gpt3; do
    if "$prism" steps fit --runs-from "$src/tests/data/steps/${platform}_runs.toml" \
        -o "$platform.toml" --regime-levels >"$platform.out" 2>&1; then
        ok "$platform fit"
    else
        fail "$platform fit: $(tail -5 "$platform.out")"
    fi
    grep -q "regime levels: nvlink multiplier .* fitted across the groups" "$platform.out" &&
        ok "$platform levels fitted" || fail "$platform levels: $(grep -i level "$platform.out")"
    grep -Eq "^regime_levels = \{nvlink = " "$platform.toml" &&
        ok "$platform profile has levels" || fail "$platform profile: no regime_levels"
done
left_out eos_dfw.out 'eos_dfw_h100_512\.toml' 0.2
left_out eos_dfw.out 'eos_dfw_h100_8192\.toml' 0.2
left_out eos_gpt3.out 'eos_h100_256\.toml' 0.2
left_out eos_gpt3.out 'eos_h100_512\.toml' 0.2
# the 8,192-GPU job crosses pods: its job regime is wider than the 512-GPU job's
cv512=$(grep -E '^eos_dfw_h100_512\.toml .*job regime cv' eos_dfw.out | awk '{print $NF}')
cv8k=$(grep -E '^eos_dfw_h100_8192\.toml .*job regime cv' eos_dfw.out | awk '{print $NF}')
awk -v a="$cv512" -v b="$cv8k" 'BEGIN { exit !(a > 0 && b > 1.5 * a) }' &&
    ok "8192 job regime cv $cv8k > 1.5 x 512's $cv512" || fail "job regime cv 512 '$cv512' 8192 '$cv8k'"
if "$prism" steps compare "$src"/tests/data/steps/mlperfv50_NVIDIA_eos-dfw_n1024_*.csv \
    --experiment "$src/configs/examples/mlperf/eos_dfw_h100_8192.toml" \
    --variability eos_dfw.toml >compare.out 2>&1 && grep -q "KS shape" compare.out; then
    ok "profile loads back"
else
    fail "profile loads back: $(tail -5 compare.out)"
fi

[ "$fails" = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
