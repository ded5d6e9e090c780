#!/usr/bin/python3
"""Checks what a sweep of a Mixture-of-Experts experiment writes (docs/moe_outputs.md) on two
result files of one space (tests/data/sweeps/moe_small.toml): ROUTED, with a routing law
(moe_force_balance = false), and FORCED, the same experiment with moe_force_balance = true,
swept separately. Against truths computed here independently:

- the routing imbalance's share of p50 and p95 of every row ok in both files is
  (p - p_forced) / p, p_forced read from the FORCED file (read with h5py); > 0 with expert
  parallelism, exactly 0 at ep = 1 (no routing law) and everywhere in FORCED;
- the MoE lines (router, expert compute, dispatch, combine, exposed all-to-all) equal the lines
  `prism eval --point` prints for the same configuration, to its printed precision (1 us), and
  its "MoE routing imbalance" lines the shares (to their printed 0.1%);
- scripts/prism_results.py exposes them (load, frame with units, moe_columns, a fourth
  breakdown line that keeps the sum at step_time_s) and `prism report` shows them under the
  front;
- a file without these columns (an older prism's: the columns removed here with h5py) still
  reads: `prism report` (without the MoE table), load, breakdown (three lines), the page data;
  `--resume` of it is refused with a clear error.

Usage: /usr/bin/python3 tests/python/check_moe_outputs.py ROUTED.h5 FORCED.h5 PRISM OUTDIR
"""
import os
import re
import shutil
import subprocess
import sys

import h5py
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "prism_results.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import prism_results as pr  # noqa: E402

sys.path.insert(0, HERE)
from raw_rows import read_rows  # noqa: E402

LINES = ("moe_router_s", "moe_expert_compute_s", "moe_dispatch_s", "moe_combine_s",
         "moe_a2a_exposed_s")
SHARES = ("routing_share_p50", "routing_share_p95")
EVAL_LINES = {"moe_router_s": "MoE: router and permute", "moe_expert_compute_s":
              "MoE: expert compute", "moe_dispatch_s": "MoE: dispatch",
              "moe_combine_s": "MoE: combine", "moe_a2a_exposed_s": "layers: MoE a2a exposed"}


def read_raw(path):
    """(points, metrics, units) of the committed rows, with h5py alone."""
    with h5py.File(path, "r") as f:
        return read_rows(f)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def main(routed, forced, prism, outdir):
    points, metrics, units = read_raw(routed)
    fpoints, fmetrics, _ = read_raw(forced)
    assert np.array_equal(points["index"], fpoints["index"])
    for name in LINES + SHARES:
        assert name in metrics and name in fmetrics, name
        assert units[name] == ("1" if name in SHARES else "s"), (name, units[name])

    # the share against the separately swept forced-balance file
    ok = (points["status"] == "ok") & (fpoints["status"] == "ok")
    assert ok.sum() >= 10 and np.any(points["ep"][ok] == 1), ok.sum()
    for q in ("p50", "p95"):
        p, pf = metrics[f"step_time_{q}_s"][ok], fmetrics[f"step_time_{q}_s"][ok]
        share = metrics[f"routing_share_{q}"][ok]
        assert np.all(np.abs(share - (p - pf) / p) <= 1e-15), (q, share, (p - pf) / p)
        ep = points["ep"][ok]
        assert np.all(share[ep == 1] == 0.0), q
        assert np.all(share[ep > 1] > 0.005), (q, share[ep > 1])
        assert np.all(fmetrics[f"routing_share_{q}"][ok] == 0.0), q
    # rows that run no step (infeasible) have no shares; their deterministic lines are filled
    bad = points["status"] == "infeasible"
    assert bad.any() and np.all(np.isnan(metrics["routing_share_p95"][bad]))
    assert np.all(np.isfinite(metrics["moe_router_s"][bad]))
    # the router forced to balance: the busiest rank's dispatch is the balanced one
    many = ok & (points["ep"] > 1)
    assert np.all(metrics["moe_dispatch_s"][many] > fmetrics["moe_dispatch_s"][many])

    # the lines against prism eval's
    with h5py.File(routed, "r") as f:
        toml = f.attrs["experiment_toml"]
    toml_path = os.path.join(outdir, "moe_experiment.toml")
    with open(toml_path, "w") as f:
        f.write(toml)
    checked = 0
    for r in np.flatnonzero(ok & (points["ep"] > 1))[:3]:
        assignment = ",".join(f"{d}={points[d][r]}" for d in ("gpus", "ep", "tp", "pp"))
        rc, out = run([prism, "eval", toml_path, "--point", assignment])
        assert rc == 0, (assignment, out)
        for name, label in EVAL_LINES.items():
            m = re.search(r"^\s*" + re.escape(label) + r"\s+(-?[0-9.]+) ms$", out, re.M)
            assert m, (label, out)
            assert abs(float(m.group(1)) / 1e3 - metrics[name][r]) <= 1e-6, (name, assignment)
        for q in ("p50", "p95"):
            m = re.search(rf"^MoE routing imbalance: {q} .*\(([0-9.]+)% of {q}\)$", out, re.M)
            assert m, (q, out)
            assert abs(float(m.group(1)) - 100 * metrics[f"routing_share_{q}"][r]) <= 0.051, q
        checked += 1
    assert checked >= 2, checked

    # prism_results
    table = pr.load(routed)
    assert pr.moe_columns(table) == list(pr.MOE_COLUMNS)
    for name in LINES + SHARES:
        assert np.array_equal(table[name], metrics[name], equal_nan=True), name
    df = pr.frame(routed)
    assert df.attrs["units"]["routing_share_p95"] == "1"
    assert df.attrs["units"]["moe_a2a_exposed_s"] == "s"
    for r in np.flatnonzero(ok):
        parts = pr.breakdown(table, r)
        assert [label for label, _ in parts] == list(pr.BREAKDOWN_LABELS) + [pr.MOE_A2A_LABEL]
        assert parts[3][1] == metrics["moe_a2a_exposed_s"][r]
        step = metrics["step_time_s"][r]
        assert abs(sum(v for _, v in parts) - step) <= 1e-12 * step
    data, _ = pr.page_data(routed)
    assert set(pr.MOE_COLUMNS) <= set(data["key_metrics"]), data["key_metrics"]
    assert data["breakdown_labels"][-1] == pr.MOE_A2A_LABEL

    # prism report: the MoE table under the front, with every column
    rc, out = run([prism, "report", routed])
    assert rc == 0, out
    assert "MoE lines of front 'objectives'" in out, out
    header = out.split("MoE lines of front 'objectives'", 1)[1].splitlines()[1].split()
    assert header[-7:] == list(pr.MOE_COLUMNS), header
    rc, out = run([prism, "report", routed, "--sort", "routing_share_p95", "--desc",
                   "--metrics", "routing_share_p95,moe_a2a_exposed_s"])
    assert rc == 0 and "Top 10 by routing_share_p95 (largest first)" in out, out
    # ... and the MoE table under the top 10 too: its rows are the file's, in the top's order
    assert "MoE lines of the top 10" in out, out
    top = out.split("MoE lines of the top 10", 1)[1].splitlines()
    header = top[1].split()
    assert header[-7:] == list(pr.MOE_COLUMNS), header
    shares = metrics["routing_share_p95"]
    routed_ok = (points["status"] == "ok") & ~np.isnan(shares)
    order = sorted(np.flatnonzero(routed_ok), key=lambda r: -shares[r])[:10]
    body = [line.split() for line in top[4:4 + len(order)]]
    assert len(body) == len(order), top
    for row, r in zip(body, order):
        for k, name in enumerate(pr.MOE_COLUMNS):
            cell = float(row[len(row) - 7 + k])
            assert abs(cell - metrics[name][r]) <= 5e-4 * max(1.0, abs(metrics[name][r])), \
                (name, cell, metrics[name][r])

    # a file without the MoE columns (as an older prism wrote it) still reads
    old = os.path.join(outdir, "moe_old.h5")
    shutil.copyfile(routed, old)
    with h5py.File(old, "r+") as f:
        g = f["metrics"]
        for name in pr.MOE_COLUMNS:
            del g[name]
        g.attrs["columns"] = [c for c in g.attrs["columns"]
                              if pr._as_str(c) not in pr.MOE_COLUMNS]
    rc, out = run([prism, "report", old])
    assert rc == 0 and "Pareto front 'objectives'" in out and "MoE lines" not in out, out
    old_table = pr.load(old)
    assert pr.moe_columns(old_table) == []
    r = int(np.flatnonzero(ok)[0])
    assert [label for label, _ in pr.breakdown(old_table, r)] == list(pr.BREAKDOWN_LABELS)
    # resuming it is refused with both metric lists (bad input), the file left as it was
    before = open(old, "rb").read()
    rc, out = run([prism, "sweep", toml_path, "-o", old, "--resume", "-q"])
    assert rc == 2 and "/metrics: columns differ from this program's" in out, (rc, out)
    assert open(old, "rb").read() == before
    old_data, _ = pr.page_data(old)
    assert old_data["breakdown_labels"] == list(pr.BREAKDOWN_LABELS)
    assert not set(pr.MOE_COLUMNS) & set(old_data["key_metrics"])
    print(f"ok: {int(ok.sum())} rows against the forced-balance file, {checked} against eval")


if __name__ == "__main__":
    main(*sys.argv[1:5])
