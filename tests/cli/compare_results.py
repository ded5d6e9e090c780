#!/usr/bin/python3
"""Asserts that two prism result files hold the same tables.

Compares every dataset under /points, /metrics, /failures, /filtered, /pareto (values, dtypes,
shapes; NaN equals NaN) and the root attributes that describe content (not timestamps).
Usage: compare_results.py A.h5 B.h5 [--ignore-attr NAME ...]
"""
import sys

import h5py
import numpy as np

CONTENT_ATTRS = ["format", "format_version", "experiment_name", "experiment_toml",
                 "experiment_sha256", "seed", "space_size", "status", "next_index",
                 "rows_committed"]


def datasets(f):
    out = {}

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            out[name] = obj

    f.visititems(visit)
    return out


def same(a, b):
    if a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def main(argv):
    a_path, b_path = argv[1], argv[2]
    ignore = set(argv[i + 1] for i, x in enumerate(argv) if x == "--ignore-attr")
    problems = []
    with h5py.File(a_path, "r", swmr=True) as a, h5py.File(b_path, "r", swmr=True) as b:
        for key in CONTENT_ATTRS:
            if key in ignore:
                continue
            va, vb = a.attrs.get(key), b.attrs.get(key)
            if not np.array_equal(np.asarray(va), np.asarray(vb)):
                problems.append(f"attribute {key}: {va!r} != {vb!r}")
        da, db = datasets(a), datasets(b)
        if set(da) != set(db):
            problems.append(f"datasets differ: only in A {sorted(set(da) - set(db))}, "
                            f"only in B {sorted(set(db) - set(da))}")
        for name in sorted(set(da) & set(db)):
            xa, xb = da[name][()], db[name][()]
            if not same(np.asarray(xa), np.asarray(xb)):
                problems.append(f"dataset {name} differs")
        for name in sorted(set(da) & set(db)):
            for k in da[name].attrs:
                if not np.array_equal(np.asarray(da[name].attrs[k]),
                                      np.asarray(db[name].attrs.get(k))):
                    problems.append(f"attribute {name}@{k} differs")
        rows = a["points/index"].shape[0] if "points/index" in a else 0
    if problems:
        print(f"{a_path} != {b_path}:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"identical content: {rows} rows, {len(da)} datasets")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
