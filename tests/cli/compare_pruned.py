#!/usr/bin/python3
"""Asserts that a pruned sweep's file agrees with an unpruned one of the same experiment.

The Pareto sets hold the same indices; rows are the same points in the same order; every row
the pruned sweep evaluated (status ok, infeasible, failed) equals the unpruned row in every
column; every `dominated` row is an `ok` row of the unpruned file whose deterministic metrics
(those the dominated row has, non-NaN) are equal and whose other metrics are NaN in the pruned
file; the dominated rows carry the deterministic step and memory, and no p95 step time.
Fails when no row is dominated (the comparison would then test nothing about pruning). Prints
the share of rows dominated.
Usage: compare_pruned.py PRUNED.h5 UNPRUNED.h5
"""
import sys

import h5py
import numpy as np


def main(argv):
    problems = []
    with h5py.File(argv[1], "r") as a, h5py.File(argv[2], "r") as b:
        for name in b["pareto"]:
            ia, ib = a[f"pareto/{name}/index"][:], b[f"pareto/{name}/index"][:]
            if not np.array_equal(ia, ib):
                problems.append(f"pareto {name}: {ia.tolist()} != {ib.tolist()}")
        if not np.array_equal(a["points/index"][:], b["points/index"][:]):
            problems.append("rows differ in their indices")
        labels = h5py.check_enum_dtype(a["points/status"].dtype)
        dominated_value = labels["dominated"]
        sa, sb = a["points/status"][:], b["points/status"][:]
        dom = sa == dominated_value
        if np.any(sb[dom] != labels["ok"]):
            problems.append("a dominated row is not an ok row of the unpruned file")
        if not np.array_equal(sa[~dom], sb[~dom]):
            problems.append("statuses differ outside the dominated rows")
        for group in ("points", "metrics"):
            for name in b[group]:
                va, vb = a[f"{group}/{name}"][:], b[f"{group}/{name}"][:]
                if name == "status":
                    continue
                same_kept = (np.array_equal(va[~dom], vb[~dom], equal_nan=True)
                             if va.dtype.kind == "f" else np.array_equal(va[~dom], vb[~dom]))
                if not same_kept:
                    problems.append(f"{group}/{name}: evaluated rows differ")
                if group == "metrics":
                    filled = ~np.isnan(va[dom])
                    if not np.array_equal(va[dom][filled], vb[dom][filled]):
                        problems.append(f"metrics/{name}: a dominated row's value differs")
                elif not np.array_equal(va[dom], vb[dom]):
                    problems.append(f"points/{name}: dominated rows differ")
        if not np.any(dom):
            problems.append("no row is dominated: pruning skipped nothing")
        for name, filled in (("step_time_s", True), ("memory_per_gpu_gib", True),
                             ("step_time_p95_s", False)):
            if np.any(np.isnan(a[f"metrics/{name}"][:][dom]) == filled):
                problems.append(f"metrics/{name}: dominated rows should "
                                f"{'carry it' if filled else 'leave it NaN'}")
        share = float(np.mean(dom)) if len(dom) else 0.0
        print(f"{argv[1]}: {int(dom.sum())} of {len(dom)} rows dominated ({100 * share:.1f}%), "
              f"front {len(b['pareto/objectives/index'])} points")
    for p in problems:
        print("DIFF", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
