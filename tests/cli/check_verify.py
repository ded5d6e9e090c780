#!/usr/bin/python3
"""Checks the /verify group of an analytic sweep (`[evaluation] verify = "montecarlo"`).

Against the sweep's own file: one row per point of /pareto/objectives, in index order; the
analytic mean, p50, p95 and p99 equal the file's metrics at those points; every *_diff_s is
analytic minus Monte Carlo. Against an independent Monte Carlo sweep of the same experiment
(method = "montecarlo", the same samples and seed, so the same random streams): the Monte
Carlo mean equals that sweep's step_time_mean_s; its quantiles are the order statistic
floor(p (n - 1)) where the sweep interpolates to the next one (Hyndman-Fan type 7), so they lie
at or just below the sweep's. The KS distance lies in (0, MAX_KS].
Usage: check_verify.py VERIFIED.h5 MONTECARLO.h5 MAX_KS
"""
import sys

import h5py
import numpy as np


def main(argv):
    problems = []
    max_ks = float(argv[3])
    with h5py.File(argv[1], "r") as v, h5py.File(argv[2], "r") as mc:
        if "verify" not in v:
            print("FAIL no /verify group")
            return 1
        g = v["verify"]
        index = g["index"][:]
        front = v["pareto/objectives/index"][:]
        if not np.array_equal(index, front):
            problems.append(f"/verify/index {index.tolist()} != front {front.tolist()}")
        samples = int(g.attrs["samples"])
        rows = np.searchsorted(v["points/index"][:], index)
        mc_rows = np.searchsorted(mc["points/index"][:], index)
        if not np.array_equal(mc["points/index"][:][mc_rows], index):
            problems.append("a front point is missing from the Monte Carlo file")
        for q, metric in (("mean", "step_time_mean_s"), ("p50", "step_time_p50_s"),
                          ("p95", "step_time_p95_s"), ("p99", "step_time_p99_s")):
            analytic, sample = g[f"{q}_analytic_s"][:], g[f"{q}_mc_s"][:]
            if not np.allclose(analytic, v[f"metrics/{metric}"][:][rows], rtol=1e-12, atol=0):
                problems.append(f"{q}_analytic_s differs from the sweep's {metric}")
            if not np.array_equal(g[f"{q}_diff_s"][:], analytic - sample):
                problems.append(f"{q}_diff_s is not analytic minus Monte Carlo")
            reference = mc[f"metrics/{metric}"][:][mc_rows]
            if q == "mean":
                ok = np.allclose(sample, reference, rtol=1e-12, atol=0)
            else:  # one order statistic below the interpolated value, within 0.5% of it
                ok = np.all(sample <= reference * (1 + 1e-12)) and np.all(
                    sample >= reference * (1 - 5e-3))
            if not ok:
                problems.append(f"{q}_mc_s inconsistent with the Monte Carlo sweep's {metric}: "
                                f"{sample.tolist()} vs {reference.tolist()}")
        ks = g["ks"][:]
        if not np.all((ks > 0) & (ks <= max_ks)):
            problems.append(f"ks outside (0, {max_ks}]: {ks.tolist()}")
        print(f"{argv[1]}: /verify holds the {len(index)} front points ({samples} samples), "
              f"KS up to {ks.max():.4f}, p95 differences up to "
              f"{100 * np.max(np.abs(g['p95_diff_s'][:] / g['p95_mc_s'][:])):.2f}%")
    for p in problems:
        print("DIFF", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
