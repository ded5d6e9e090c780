#!/usr/bin/env bash
# `prism eval`'s lines for the tail terms (docs/tails.md): hiccups (per node and step, lognormal
# delay) and a periodic event on the quickstart's FSDP point (ZeRO-3, tp 2, 1,024 H100: 128
# nodes) with no other noise. Against closed forms computed here: P(a step is hit) =
# 1 - (1 - q)^n, E[H] = integral of 1 - (1 - q + q F_D(h))^n dh (F_D lognormal), the periodic
# event's duration / cadence; and the mean step less the deterministic one = E[H] + that.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
tails='hiccup_probability = 1e-4\nhiccup_delay_median = "500 ms"\nhiccup_delay_sigma = 0.8\n\n[variability.periodic]\ngc = {every = 50, duration = "3 s"}'
sed "s/^preset = \"prism-paper\"/preset = \"none\"\n$tails/" "$src/configs/quickstart.toml" >tails.toml
grep -q "^hiccup_probability" tails.toml || fail "the experiment has no hiccup keys"
point=gpus=1024,tp=2,pp=1,microbatch=2,zero_stage=3,recompute=full
"$prism" eval tails.toml --point "$point" >eval.out 2>&1 || fail "eval: exit $?: $(tail -3 eval.out)"
det=$(awk '$1 == "step_time_s" {print $2}' eval.out)
mean=$(awk '$1 == "step_time_mean_s" {print $2}' eval.out)
hline=$(grep '^hiccups (' eval.out) pline=$(grep '^periodic events (' eval.out)
/usr/bin/python3 - "$det" "$mean" "$hline" "$pline" <<'PY' && echo "ok   $hline | $pline" || fail "$hline | $pline"
import math, re, sys
det, mean, hline, pline = float(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4]
q, m, s, n = 1e-4, 0.5, 0.8, 128
p_hit = 1 - (1 - q) ** n
F = lambda h: 0.5 * (1 + math.erf((math.log(h / m)) / (s * math.sqrt(2)))) if h > 0 else 0.0
# E[H] by the trapezoid rule on a log grid (the integrand is 1 - G(h), G the CDF of the max)
hs = [1e-6 * 1.001 ** k for k in range(25000)]
g = [1 - (1 - q + q * F(h)) ** n for h in hs]
eh = sum(0.5 * (g[i] + g[i + 1]) * (hs[i + 1] - hs[i]) for i in range(len(hs) - 1)) + 1e-6 * g[0]
periodic = 3.0 / 50
shown = re.search(r": ([0-9]+) nodes: ([0-9.e+-]+)% of steps hit, \+([0-9.e+-]+) ms mean", hline)
shown_p = re.search(r"gc every 50 steps \+3 s\): \+([0-9.e+-]+) ms mean", pline)
if not shown or not shown_p:
    print("  lines not as expected"); sys.exit(1)
nodes, hit, h_ms, p_ms = int(shown.group(1)), float(shown.group(2)), float(shown.group(3)), float(shown_p.group(1))
print(f"  nodes {nodes}; hit {hit}% (closed form {100 * p_hit:.4f}%), E[H] {h_ms} ms ({1e3 * eh:.4f}), "
      f"periodic {p_ms} ms ({1e3 * periodic:.4f}); mean - deterministic {mean - det:.5f} s "
      f"({eh + periodic:.5f})")
ulp = lambda v, digits: 0.5 * 10 ** (math.floor(math.log10(abs(v))) - digits + 1)
ok = (nodes == n and abs(hit - 100 * p_hit) <= ulp(hit, 3) + 1e-9
      and abs(h_ms - 1e3 * eh) <= ulp(h_ms, 4) + 2e-3 * h_ms
      and abs(p_ms - 1e3 * periodic) <= ulp(p_ms, 4)
      and abs(mean - det - eh - periodic) <= ulp(det, 5) + ulp(mean, 5) + 2e-3 * (eh + periodic))
sys.exit(0 if ok else 1)
PY
echo "$fails failed"
[ "$fails" = 0 ]
