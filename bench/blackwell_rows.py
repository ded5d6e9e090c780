#!/usr/bin/python3
"""Issue 34, item 2: do the shared MLPerf Blackwell medians identify a Blackwell GEMM or
attention ceiling of their own?

The Blackwell rows of the shared MLPerf set (configs/examples/mlperf: GPT-3 175B on 64 B200,
NVIDIA v4.1; Llama 3.1 405B on 256 B200 and Llama 3.1 8B on 64 B200, University of Florida v5.1;
Llama 3.1 405B on 512 GB200, Carina v5.0) are evaluated with the nemo-mlperf stack while one
factor k multiplies the GPU preset's compute ceilings (gemm_max_efficiency,
fp8_gemm_max_efficiency, attention_efficiency; `[hardware.*]` overrides), or two factors (GEMM,
attention) separately. For each, the least-squares fit on the log errors of all rows and with
each row left out (its error predicted by the fit on the others). Measured medians: the pooled
runs' median after the first 5 steps and the first step after each evaluation (as
tests/data/reference/mlperf_medians.csv; Carina's from `prism steps compare`).

Run from the repository root: /usr/bin/python3 bench/blackwell_rows.py [PRISM]
"""
import math
import os
import re
import subprocess
import sys
import tempfile

PRISM = sys.argv[1] if len(sys.argv) > 1 else "build/explorer/prism"



def ceilings(preset):
    """(bf16 GEMM, fp8 GEMM, attention) ceilings of configs/presets/gpus/<preset>.toml."""
    text = open(os.path.join("configs/presets/gpus", preset + ".toml")).read()
    keys = ("gemm_max_efficiency", "fp8_gemm_max_efficiency", "attention_efficiency")
    return tuple(float(re.search(r"^%s\s*=\s*([0-9.eE+-]+)" % k, text, re.M).group(1))
                 for k in keys)


# (experiment, measured median s, the GPU preset's ceilings (bf16 GEMM, fp8 GEMM, attention))
B200 = ceilings("b200")
GB200 = ceilings("gb200-nvl72")
ROWS = [
    ("nyx_b200_64", 36.2338, B200),
    ("uf_b200_256", 27.6641, B200),
    ("uf_b200_64_8b", 0.1893, B200),
    ("carina_gb200_512", 19.3134, GB200),
]


def step(experiment, gemm, attention, ceilings):
    path = os.path.join("configs/examples/mlperf", experiment + ".toml")
    lines = open(path).read().splitlines()
    at = next(i for i, l in enumerate(lines) if l.startswith("[hardware."))
    extra = [
        "gemm_max_efficiency = %.6f" % (ceilings[0] * gemm),
        "fp8_gemm_max_efficiency = %.6f" % (ceilings[1] * gemm),
        "attention_efficiency = %.6f" % (ceilings[2] * attention),
    ]
    lines[at + 1:at + 1] = extra
    with tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False) as f:
        f.write("\n".join(lines) + "\n")
        name = f.name
    try:
        out = subprocess.run([PRISM, "eval", name], capture_output=True, text=True, check=True)
    finally:
        os.unlink(name)
    return float(re.search(r"^step_time_s\s+(\S+)", out.stdout, re.M).group(1))


def log_error(row, gemm, attention):
    return math.log(step(row[0], gemm, attention, row[2]) / row[1])


def fit_one(rows):
    """k (GEMM and attention together) minimising the squared log errors: golden section."""
    lo, hi = 0.7, 1.3
    g = (math.sqrt(5) - 1) / 2
    f = lambda k: sum(log_error(r, k, k) ** 2 for r in rows)
    a, b = hi - g * (hi - lo), lo + g * (hi - lo)
    fa, fb = f(a), f(b)
    for _ in range(22):
        if fa < fb:
            hi, b, fb = b, a, fa
            a = hi - g * (hi - lo)
            fa = f(a)
        else:
            lo, a, fa = a, b, fb
            b = lo + g * (hi - lo)
            fb = f(b)
    return (lo + hi) / 2


def fit_two(rows):
    """(GEMM, attention) factors: Gauss-Newton on the log errors, finite-difference slopes."""
    x = [1.0, 1.0]
    for _ in range(6):
        e = [log_error(r, *x) for r in rows]
        h = 0.02
        jg = [(log_error(r, x[0] * (1 + h), x[1]) - ei) / h for r, ei in zip(rows, e)]
        ja = [(log_error(r, x[0], x[1] * (1 + h)) - ei) / h for r, ei in zip(rows, e)]
        a11 = sum(v * v for v in jg) + 1e-9
        a22 = sum(v * v for v in ja) + 1e-9
        a12 = sum(u * v for u, v in zip(jg, ja))
        b1 = -sum(u * v for u, v in zip(jg, e))
        b2 = -sum(u * v for u, v in zip(ja, e))
        det = a11 * a22 - a12 * a12
        dg, da = (a22 * b1 - a12 * b2) / det, (a11 * b2 - a12 * b1) / det
        x = [x[0] * (1 + dg), x[1] * (1 + da)]
    return x


def pct(v):
    return "%+.1f%%" % (100 * (math.exp(v) - 1))


def main():
    print("row                  measured    today  (k = 1)")
    for r in ROWS:
        print("%-20s %9.4f s  %s" % (r[0], r[1], pct(log_error(r, 1, 1))))
    k = fit_one(ROWS)
    print("\none factor on every compute ceiling, all rows: k = %.3f" % k)
    for r in ROWS:
        print("  %-20s %s" % (r[0], pct(log_error(r, k, k))))
    print("left out (fit on the others, that row predicted):")
    for i, r in enumerate(ROWS):
        ki = fit_one(ROWS[:i] + ROWS[i + 1:])
        print("  %-20s k = %.3f  %s" % (r[0], ki, pct(log_error(r, ki, ki))))
    b200 = [r for r in ROWS if r[2] is B200]
    k = fit_one(b200)
    print("\nB200 rows only: k = %.3f; left out:" % k)
    for i, r in enumerate(b200):
        ki = fit_one(b200[:i] + b200[i + 1:])
        print("  %-20s k = %.3f  %s" % (r[0], ki, pct(log_error(r, ki, ki))))
    x = fit_two(ROWS)
    print("\nGEMM and attention apart, all rows: GEMM x %.3f, attention x %.3f" % tuple(x))
    for r in ROWS:
        print("  %-20s %s" % (r[0], pct(log_error(r, *x))))
    print("left out (two factors fitted on the other three rows, that row predicted):")
    for i, r in enumerate(ROWS):
        xi = fit_two(ROWS[:i] + ROWS[i + 1:])
        print("  %-20s GEMM x %.3f, attention x %.3f  %s" % (r[0], xi[0], xi[1],
                                                            pct(log_error(r, *xi))))


if __name__ == "__main__":
    main()
