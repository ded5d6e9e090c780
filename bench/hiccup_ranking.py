#!/usr/bin/python3
"""Issue 35, must-show 5: does the p99 ranking of configurations change once hiccups (rare delays
per node and step, docs/tails.md) grow with the node count?

Sweeps one experiment several times, each with the same space and seed and one set of hiccup
keys added to its [variability] (and `prune = false`, so that every configuration that fits gets
its step-time distribution), and compares the p99 step-time rankings with the run without
hiccups: Kendall's tau over all configurations that fit and within each GPU count, the best
configuration per GPU count, how much p99 moves at each scale and the share of steps a hiccup
hits, 1 - (1 - q)^nodes.

Run from the repository root (needs h5py, numpy: Debian's /usr/bin/python3):
    /usr/bin/python3 bench/hiccup_ranking.py [PRISM] [EXPERIMENT ...]
Default experiments: configs/quickstart.toml (README's example, 256-1,024 H100s) and
bench/hiccup_ranking_405b.toml (Llama 3 405B, 2,048-16,384 H100s).
"""
import math
import os
import re
import subprocess
import sys
import tempfile
import tomllib

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import prism_results as pr  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def preset_hiccups(name):
    """(probability, delay median, delay sigma) of a shipped variability preset."""
    with open(os.path.join(ROOT, "configs", "presets", "variability", name + ".toml"), "rb") as f:
        preset = tomllib.load(f)
    return (preset["hiccup_probability"], preset["hiccup_delay_median"],
            preset["hiccup_delay_sigma"])


# (label, probability per node and step, delay median s, delay sigma, where it comes from)
SETTINGS = [
    ("eos-gpt3", 5.2e-5, 0.09, 0.73,
     "fitted on NVIDIA Eos GPT-3 175B, 256 + 512 H100 (docs/tails.md)"),
    ("eos-dfw", *preset_hiccups("mlperf-eos-dfw-h100"),
     "preset mlperf-eos-dfw-h100 (Eos-dfw Llama 3.1 405B, 512 + 8,192 H100)"),
    ("q1e-5", 1e-5, 1.0, 1.0, "grid: 1 s median, lognormal sigma 1"),
    ("q1e-4", 1e-4, 1.0, 1.0, "grid"),
    ("q1e-3", 1e-3, 1.0, 1.0, "grid"),
]


def variant(text, keys):
    """The experiment's text with `keys` added to [variability] and prune = false."""
    if not re.search(r"^\[variability\]\s*$", text, re.M):
        text += "\n[variability]\n"
    text = re.sub(r"^\[variability\]\s*$", "[variability]\n" + keys, text, count=1, flags=re.M)
    if re.search(r"^\[evaluation\]\s*$", text, re.M):
        text = re.sub(r"^\s*prune\s*=.*$", "", text, flags=re.M)
        text = re.sub(r"^\[evaluation\]\s*$", "[evaluation]\nprune = false", text, count=1,
                      flags=re.M)
    else:
        text += "\n[evaluation]\nprune = false\n"
    return text


def sweep(prism, text, directory, name):
    path = os.path.join(directory, name + ".toml")
    with open(path, "w") as f:
        f.write(text)
    out = os.path.join(directory, name + ".h5")
    subprocess.run([prism, "sweep", path, "-o", out, "--overwrite", "-q"], check=True)
    return pr.load(out)


def kendall_tau(a, b):
    """Kendall's tau-b of two equally long sequences (ties counted as neither)."""
    n = len(a)
    concordant = discordant = ties_a = ties_b = 0
    for i in range(n):
        for j in range(i + 1, n):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif da == db:
                concordant += 1
            else:
                discordant += 1
    denominator = math.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return (concordant - discordant) / denominator if denominator else 1.0


def study(prism, experiment, gpus_per_node=8):
    with open(experiment) as f:
        text = f.read()
    print(f"=== {experiment}")
    with tempfile.TemporaryDirectory() as scratch:
        base = sweep(prism, variant(text, ""), scratch, "none")
        ok = base["status"] == "ok"
        rows = np.flatnonzero(ok)
        dims = [d for d in ("gpus", "tp", "pp", "cp", "microbatch", "zero_stage", "recompute",
                            "interleave") if d in base and len(set(base[d][rows])) > 1]
        gpus = base["gpus"][rows]
        scales = sorted(set(gpus.tolist()))
        print(f"{len(rows)} configurations fit, at {', '.join(str(s) for s in scales)} GPUs; "
              f"swept: {', '.join(dims)}")
        p99_0 = base["step_time_p99_s"][rows]
        best0 = {s: rows[np.argmin(np.where(gpus == s, p99_0, np.inf))] for s in scales}
        header = (f"{'hiccups':9} {'q/node-step':>11} {'median':>7} {'sigma':>5} "
                  f"{'tau all':>7} {'tau min/scale':>13} {'best changes':>12}  "
                  + "  ".join(f"{s:>6} GPUs: hit, p99 +" for s in scales))
        print(header)
        changes = []
        for name, q, median, sigma, source in SETTINGS:
            keys = (f"hiccup_probability = {q}\nhiccup_delay_median = {median}\n"
                    f"hiccup_delay_sigma = {sigma}\n")
            t = sweep(prism, variant(text, keys), scratch, name)
            assert np.array_equal(t["index"][rows], base["index"][rows])
            p99 = t["step_time_p99_s"][rows]
            tau_all = kendall_tau(p99_0, p99)
            taus, moved = [], []
            per_scale = []
            for s in scales:
                mask = gpus == s
                if mask.sum() > 1:
                    taus.append(kendall_tau(p99_0[mask], p99[mask]))
                best = rows[np.argmin(np.where(mask, p99, np.inf))]
                if best != best0[s]:
                    moved.append((s, best0[s], best))
                nodes = math.ceil(s / gpus_per_node)
                hit = 1 - (1 - q) ** nodes
                rise = np.median(p99[mask] / p99_0[mask]) - 1
                per_scale.append(f"{100 * hit:5.1f}%, {100 * rise:5.1f}%")
            print(f"{name:9} {q:11.3g} {median:6.3g}s {sigma:5.2f} {tau_all:7.3f} "
                  f"{min(taus) if taus else 1.0:13.3f} {len(moved):12d}  "
                  + "  ".join(f"{p:>22}" for p in per_scale))
            best_p99 = [p99[gpus == s].min() for s in scales]
            changes.append((name, source, moved, t, best_p99))
        print("(tau: Kendall's tau of the p99 ranking against the run without hiccups, over all "
              "configurations and the smallest within one GPU count; hit: share of steps with a "
              "hiccup on the job's nodes; p99 +: median rise of p99 over that scale's "
              "configurations)")
        best0_p99 = [p99_0[gpus == s].min() for s in scales]
        print(f"best p99 per scale, and the speed-up from {scales[0]} to {scales[-1]} GPUs at p99 "
              f"(ideal {scales[-1] / scales[0]:g}x); a scale is off the (p99, GPUs) front when a "
              "smaller one is as fast:")
        for name, best in [("none", best0_p99)] + [(c[0], c[4]) for c in changes]:
            off = [s for k, s in enumerate(scales) if any(best[j] <= best[k] for j in range(k))]
            print(f"  {name:9} " + " / ".join(f"{b:.3f}" for b in best) + " s"
                  + f"   speed-up {best[0] / best[-1]:.2f}x"
                  + (f"   off the front: {off}" if off else ""))
        for name, source, moved, t, _ in changes:
            print(f"  {name}: {source}")
            for s, old, new in moved:
                print(f"    {s} GPUs: best p99 was {pr.config_label(base, old, dims)} "
                      f"({base['step_time_p99_s'][old]:.3f} s), now {pr.config_label(t, new, dims)} "
                      f"({t['step_time_p99_s'][new]:.3f} s; the former {t['step_time_p99_s'][old]:.3f} s)")
        print()


def main():
    prism = sys.argv[1] if len(sys.argv) > 1 else "build/explorer/prism"
    experiments = sys.argv[2:] or ["configs/quickstart.toml", "bench/hiccup_ranking_405b.toml"]
    for experiment in experiments:
        study(prism, experiment)


if __name__ == "__main__":
    main()
