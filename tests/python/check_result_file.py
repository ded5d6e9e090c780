#!/usr/bin/python3
"""Checks a PRISM result file with h5py alone, with no knowledge of the C++ code.

Usage: /usr/bin/python3 tests/python/check_result_file.py FILE [--rows N] [--status S]

Asserts: root attributes present and typed, enums readable as enums, units and descriptions on
every column, /points and /metrics rows aligned, indices increasing and below next_index,
reason ids valid, pareto sets sorted with objectives and senses. Prints "ok: N rows" and exits 0,
or prints the failed check and exits 1.
"""
import argparse
import sys

import h5py
import numpy as np

ROOT_ATTRS = {
    "format": str, "format_version": np.integer, "program_version": str, "model_version": str,
    "experiment_name": str, "experiment_toml": str, "experiment_sha256": str,
    "seed": np.integer, "space_size": np.integer, "status": str, "next_index": np.integer,
    "rows_committed": np.integer, "created": str, "updated": str,
}


def check(path, rows=None, status=None):
    # SWMR read: works while a sweep writes the file and after its writer was killed.
    with h5py.File(path, "r", swmr=True) as f:
        for name, kind in ROOT_ATTRS.items():
            assert name in f.attrs, f"missing root attribute {name!r}"
            assert isinstance(f.attrs[name], kind), (
                f"root attribute {name!r} is {type(f.attrs[name]).__name__}")
        assert f.attrs["format"] == "prism-results", f.attrs["format"]
        assert f.attrs["format_version"] == 2
        assert f.attrs["status"] in ("running", "interrupted", "complete", "failed")
        assert len(f.attrs["experiment_sha256"]) == 64
        if status is not None:
            assert f.attrs["status"] == status, f"status {f.attrs['status']!r} != {status!r}"
        committed = int(f.attrs["rows_committed"])
        if rows is not None:
            assert committed == rows, f"rows_committed {committed} != {rows}"

        points, metrics = f["points"], f["metrics"]
        columns = list(points.attrs["columns"])
        assert set(columns) | {"index", "status", "reason_id"} == set(points.keys()), (
            f"/points holds {sorted(points.keys())}, columns attribute says {columns}")
        assert set(metrics.attrs["columns"]) == set(metrics.keys())
        lengths = set()
        for group in (points, metrics):
            for name, ds in group.items():
                assert ds.ndim == 1, f"{ds.name} is not 1-D"
                assert "unit" in ds.attrs and "description" in ds.attrs, f"{ds.name}: no unit"
                assert ds.compression == "gzip" and ds.shuffle, f"{ds.name}: not compressed"
                lengths.add(ds.shape[0])
        running = f.attrs["status"] == "running"
        if running:
            # a writer extends the datasets one after another before it commits: a reader
            # takes the first rows_committed rows of each, which every dataset holds
            assert min(lengths) >= committed, f"{sorted(lengths)} rows < rows_committed {committed}"
            total = committed
        else:
            assert len(lengths) == 1, f"/points and /metrics rows not aligned: {sorted(lengths)}"
            total = lengths.pop()
            assert total == committed, f"{total} rows != rows_committed {committed}"

        status_enum = h5py.check_enum_dtype(points["status"].dtype)
        assert status_enum == {"ok": 0, "infeasible": 1, "failed": 2, "dominated": 3}, status_enum
        for name in columns:
            ds = points[name]
            enum = h5py.check_enum_dtype(ds.dtype)
            if enum is not None:
                values = ds[:committed]
                assert set(np.unique(values)) <= set(enum.values()), f"{ds.name}: bad enum value"
            else:
                assert ds.dtype.kind in "if", f"{ds.name}: dtype {ds.dtype}"

        index = points["index"][:committed]
        assert index.dtype == np.uint64
        assert np.all(np.diff(index.astype(np.float64)) > 0), "indices do not increase"
        if committed:
            assert index[-1] < f.attrs["next_index"], "index past next_index"
        reasons = f["reasons"].asstr()[:]
        reason_id = points["reason_id"][:committed]
        assert np.all((reason_id >= -1) & (reason_id < len(reasons))), "bad reason_id"

        assert f["failures/index"].shape == f["failures/message"].shape
        assert f["filtered/reason"].shape == f["filtered/count"].shape
        for name, front in f["pareto"].items():
            objectives = list(front.attrs["objectives"])
            senses = list(front.attrs["senses"])
            assert len(objectives) == len(senses) > 0, f"/pareto/{name}: objectives/senses"
            assert set(senses) <= {"min", "max"}, senses
            assert all(o in metrics for o in objectives), f"/pareto/{name}: {objectives}"
            idx = front["index"][:]
            assert np.all(np.diff(idx.astype(np.float64)) > 0), f"/pareto/{name} not sorted"
        if "histograms" in f:
            h = f["histograms"]
            assert h["step_time"].ndim == 2 and h["step_time"].dtype == np.float32
            for name in ("step_time", "step_time_lo_s", "step_time_hi_s"):
                rows_h = h[name].shape[0]
                assert rows_h >= total if running else rows_h == total, f"{name}: {rows_h} rows"
        return committed


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("file")
    parser.add_argument("--rows", type=int)
    parser.add_argument("--status")
    args = parser.parse_args(argv)
    try:
        n = check(args.file, args.rows, args.status)
    except AssertionError as e:
        print(f"{args.file}: check failed: {e}", file=sys.stderr)
        return 1
    print(f"ok: {n} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
