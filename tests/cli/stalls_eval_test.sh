#!/usr/bin/env bash
# Stalls ([variability] stall_fraction / stall_duration, docs/tails.md) end to end: the
# quickstart's experiment with stalls and no other noise, `prism eval` of an FSDP point (ZeRO-3,
# tp 2, 1,024 H100: 128 nodes synchronizing twice a layer) and a 3D point (tp 4 x pp 4, ZeRO-1:
# 64 replicas of 2 nodes, once a step). The mean step less the deterministic one against the
# closed form computed here: syncs x d x E[M], E[M] = sum_x (1 - F(x)^g), F the Poisson CDF of
# one member's stalls between two synchronizations. Then with the quickstart's prism-paper noise:
# without stalls FSDP has the smaller p95, with them 3D (the front flips; docs/tails.md). eval's
# own stalls line (shape and mean added) against the same closed form.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
stalls='stall_fraction = 2.4e-3\nstall_duration = "20 ms"'
sed "s/^preset = \"prism-paper\"/preset = \"none\"\n$stalls/" "$src/configs/quickstart.toml" >only.toml
sed "s/^preset = \"prism-paper\"/preset = \"prism-paper\"\n$stalls/" "$src/configs/quickstart.toml" >noisy.toml
grep -q "^stall_fraction" only.toml || fail "the experiment has no stall keys"
fsdp=gpus=1024,tp=2,pp=1,microbatch=2,zero_stage=3,recompute=full
three_d=gpus=1024,tp=4,pp=4,microbatch=1,zero_stage=1,recompute=selective

value() { awk -v k="$1" '$1 == k {print $2}' "$2"; }

# syncs, members, nodes per member of each point (stall_shape): Llama 3 70B has 80 layers; one
# microbatch of 2 per replica under FSDP (1,024 sequences over dp 512); 3D: 16 GPUs a replica
check() {  # name point syncs members nodes_per_member
    "$prism" eval only.toml --point "$2" >"$1.out" 2>&1 || { fail "$1: exit $?: $(tail -2 "$1.out")"; return; }
    det=$(value step_time_s "$1.out")
    mean=$(value step_time_mean_s "$1.out")
    # eval's own line: "stalls (...): S synchronizations a step among G members of N nodes: +X ms mean"
    line=$(grep '^stalls (' "$1.out")
    /usr/bin/python3 - "$det" "$mean" "$3" "$4" "$5" "$line" <<'PY' && echo "ok   $1: $det s -> $mean s; $line" || fail "$1: $det s -> $mean s; $line"
import math, re, sys
det, mean, syncs, g, per = float(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
shown = re.search(r": ([0-9]+) synchronizations? a step among ([0-9]+) members? of ([0-9]+) nodes?: \+([0-9.e+-]+) ms mean", sys.argv[6])
if not shown or tuple(map(int, shown.groups()[:3])) != (syncs, g, per):
    print(f"  eval's stalls line does not show {syncs} syncs, {g} members of {per} nodes")
    sys.exit(1)
f, d = 2.4e-3, 0.02
mu = per * f / d * det / syncs
em, cdf, term = 0.0, 0.0, math.exp(-mu)
for x in range(2000):
    if x > 0:
        term *= mu / x
    cdf += term
    em += 1 - min(cdf, 1.0) ** g
expected = syncs * d * em
print(f"  mean - deterministic {mean - det:.5f} s, closed form {expected:.5f} s")
# eval prints 5 significant digits: each value within half a unit of its last digit
ulp = lambda v: 0.5 * 10 ** (math.floor(math.log10(abs(v))) - 4)
line_ms = float(shown.group(4))
print(f"  eval's stalls line: +{line_ms} ms, closed form {1e3 * expected:.4f} ms")
ok_line = abs(line_ms - 1e3 * expected) <= 0.5 * 10 ** (math.floor(math.log10(line_ms)) - 3) + 1e-6 * line_ms
sys.exit(0 if ok_line and abs(mean - det - expected) <= ulp(det) + ulp(mean) + 1e-4 * expected else 1)
PY
}
check fsdp "$fsdp" 160 128 1
check three_d "$three_d" 1 64 2

p95() { "$prism" eval "$1" --point "$2" 2>/dev/null | awk '$1 == "step_time_p95_s" {print $2}'; }
base_f=$(p95 "$src/configs/quickstart.toml" "$fsdp") base_3=$(p95 "$src/configs/quickstart.toml" "$three_d")
with_f=$(p95 noisy.toml "$fsdp") with_3=$(p95 noisy.toml "$three_d")
/usr/bin/python3 -c "import sys; a, b, c, e = map(float, sys.argv[1:]); sys.exit(0 if a < b and c > e else 1)" \
    "$base_f" "$base_3" "$with_f" "$with_3" &&
    echo "ok   p95 FSDP / 3D: $base_f / $base_3 s without stalls, $with_f / $with_3 s with them" ||
    fail "no flip: FSDP / 3D $base_f / $base_3 s without stalls, $with_f / $with_3 s with them"

echo "$fails failed"
[ "$fails" = 0 ]
