#!/usr/bin/python3
"""Checks the data the study page (`prism_results.py html`) and the static plots are built
from, on a swept result file, against truths computed here independently:

- front membership: the page's front rows are the file's /pareto indices, and those are the
  ok rows no other ok row dominates (brute force over every pair, read with h5py);
- the breakdown lines of every front point sum to its step_time_s, and equal the lines
  `prism eval --point` prints for the same configuration (exposed TP + CP + FSDP + DP
  communication; pipeline bubble; compute + embedding + LM head + optimizer + host; with an MoE
  model the exposed all-to-all), to eval's printed precision (1 us);
- the CDF points of every front point are the file's step_time_p*_s columns (read with h5py),
  exactly, at q = 0.5, 0.9, 0.95, 0.99, 0.999;
- the column blob the page's script decodes holds every metric as float32 of the file's
  float64 and every enumeration as its label;
- a page limited to fewer rows keeps every front point and says it is sampled;
- the written page loads nothing from the network (no src= or href= to anything but itself).

Usage: /usr/bin/python3 tests/python/test_page_data.py FILE.h5 PRISM OUTDIR
"""
import base64
import gzip
import os
import re
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


def read_raw(path):
    """The file's rows with h5py alone: (points dict, metrics dict, fronts, the experiment)."""
    with h5py.File(path, "r") as f:
        points, metrics, _ = read_rows(f)
        fronts = {name: (list(g.attrs["objectives"]), list(g.attrs["senses"]), g["index"][:])
                  for name, g in f["pareto"].items()}
        toml = f.attrs["experiment_toml"]
    return points, metrics, fronts, toml


def brute_front(points, metrics, objectives, senses):
    ok = np.flatnonzero(points["status"] == "ok")
    out = []
    for i in ok:
        dominated = False
        for j in ok:
            if i == j:
                continue
            better_or_equal = all(
                (metrics[o][j] <= metrics[o][i]) if s == "min" else (metrics[o][j] >= metrics[o][i])
                for o, s in zip(objectives, senses))
            strictly = any(
                (metrics[o][j] < metrics[o][i]) if s == "min" else (metrics[o][j] > metrics[o][i])
                for o, s in zip(objectives, senses))
            if better_or_equal and strictly:
                dominated = True
                break
        if not dominated:
            out.append(int(points["index"][i]))
    return sorted(out)


def eval_breakdown(prism, toml_path, assignment):
    """(step, [rest, exposed communication, bubble]) in seconds from `prism eval`'s printed
    lines (ms, 3 decimals)."""
    r = subprocess.run([prism, "eval", toml_path, "--point", assignment], capture_output=True,
                       text=True)
    assert r.returncode == 0, (assignment, r.stdout, r.stderr)
    lines = {}
    for line in r.stdout.splitlines():
        m = re.match(r"\s*(.+?)\s+(-?[0-9.]+) ms$", line)
        if m:
            lines.setdefault(m.group(1).strip(), float(m.group(2)) / 1e3)
    comm = sum(lines[k] for k in ("layers: TP comm exposed", "layers: CP comm exposed",
                                  "FSDP comm exposed", "DP sync exposed"))
    comm += lines.get("layers: PP p2p (blocking)", 0.0)  # DeepSpeed's blocking transfers
    rest = sum(lines[k] for k in ("layers: compute", "embedding", "LM head and loss", "optimizer",
                                  "layers: host-bound stretch"))
    parts = [rest, comm, lines["pipeline bubble and waits"]]
    if "layers: MoE a2a exposed" in lines:  # an MoE model's fourth line
        parts.append(lines["layers: MoE a2a exposed"])
    return lines["step time"], parts


def main(path, prism, outdir):
    points, metrics, fronts, toml = read_raw(path)
    assert fronts, "the study has no front"
    data, blob = pr.page_data(path)
    n = len(points["index"])
    assert data["rows_total"] == data["rows_shown"] == n and not data["sampled"]

    # front membership
    for front in data["fronts"]:
        objectives, senses, stored = fronts[front["name"]]
        page = sorted(int(points["index"][r]) for r in front["rows"])
        assert page == sorted(stored.tolist()), (page, stored)
        brute = brute_front(points, metrics, objectives, senses)
        assert page == brute, (front["name"], page, brute)

    # per-point details of the front points
    toml_path = os.path.join(outdir, "experiment.toml")
    with open(toml_path, "w") as f:
        f.write(toml)
    dims = data["dimensions"]
    quantile_names = {0.5: "step_time_p50_s", 0.9: "step_time_p90_s", 0.95: "step_time_p95_s",
                      0.99: "step_time_p99_s", 0.999: "step_time_p999_s"}
    checked = 0
    for row, d in data["details"].items():
        r = int(row)
        assert d["index"] == int(points["index"][r])
        q = dict(d["quantiles"])
        assert sorted(q) == sorted(quantile_names), sorted(q)
        for level, name in quantile_names.items():
            assert q[level] == metrics[name][r], (r, level, q[level], metrics[name][r])
        parts = [v for _, v in d["breakdown"]]
        assert len(parts) == len(data["breakdown_labels"]) and all(v >= 0 for v in parts), parts
        assert len(parts) == (4 if "moe_a2a_exposed_s" in metrics else 3), parts
        step = metrics["step_time_s"][r]
        assert abs(sum(parts) - step) <= 1e-12 * step, (sum(parts), step)
        # dp follows from gpus (prism eval takes one of them)
        assignment = ",".join(f"{name}={points[name][r]}" for name in dims
                              if not (name == "dp" and "gpus" in dims))
        e_step, e_parts = eval_breakdown(prism, toml_path, assignment)
        assert abs(e_step - step) <= 1e-6, (assignment, e_step, step)
        assert len(e_parts) == len(parts), (assignment, e_parts, parts)
        for name, mine, theirs in zip(data["breakdown_labels"], parts, e_parts):
            assert abs(mine - theirs) <= 5e-6, (assignment, name, mine, theirs)
        assert d["label"] == " ".join(f"{name}={pr._format_value(points[name][r])}"
                                      for name in dims)
        for label, p in d["p_slow"]:
            name = "p_slow_" + label.rstrip("%").replace(".", "p") + "pct"
            assert p == metrics[name][r], (name, p)
        checked += 1
    assert checked == len({r for fr in data["fronts"] for r in fr["rows"]}), checked

    # the blob the page's script decodes
    raw = gzip.decompress(blob) if data["blob"]["gzip"] else blob
    dtypes = {"f4": "<f4", "f8": "<f8", "u1": "u1", "u2": "<u2"}
    for c in data["columns"]:
        values = np.frombuffer(raw, dtype=dtypes[c["dtype"]], count=n, offset=c["offset"])
        if "labels" in c:
            labels = np.array(c["labels"])[values]
            expected = points[c["name"]]
            assert list(labels) == [str(v) for v in expected], c["name"]
        elif c["kind"] == "metric":
            file_name = c["name"].removeprefix("metrics/")
            expected = metrics[file_name].astype(np.float32)
            assert np.array_equal(values, expected, equal_nan=True), c["name"]
        else:
            expected = points[c["name"]].astype(np.float64)
            assert c["dtype"] == "f8", (c["name"], c["dtype"])
            assert np.array_equal(values, expected, equal_nan=True), c["name"]
    # compressed the same way
    data_z, blob_z = pr.page_data(path, gzip_above=0)
    assert data_z["blob"]["gzip"] and gzip.decompress(blob_z) == raw

    # sampling keeps the front and the ranking table's rows (the top ok rows by the first
    # objective, ranked here by sorting), in a study of more than 200 rows (the quickstart's)
    if n > 200:
        small, _ = pr.page_data(path, max_rows=200)
        assert small["sampled"] and small["rows_shown"] == 200 and small["rows_total"] == n
        for front in small["fronts"]:
            shown = sorted(int(points["index"][small["rows"][r]]) for r in front["rows"])
            assert shown == sorted(fronts[front["name"]][2].tolist())
        objective, sense = small["fronts"][0]["objectives"][0], small["fronts"][0]["senses"][0]
        ok = [i for i in range(n)
              if points["status"][i] == "ok" and np.isfinite(metrics[objective][i])]
        ok.sort(key=lambda i: -metrics[objective][i] if sense == "max" else metrics[objective][i])
        assert set(ok[:pr.PAGE_TOP]) <= set(small["rows"]), "a top row was sampled out"

    # a page that needs no network
    page = os.path.join(outdir, "page.html")
    size = pr.write_html(path, page)
    with open(page, encoding="utf-8") as f:
        text = f.read()
    assert len(text.encode()) == size
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)\s*=", text), "external"
    assert text.count('id="prism-blob"') == 1
    b64 = re.search(r'<script id="prism-blob" type="text/plain">([^<]*)</script>', text).group(1)
    assert base64.b64decode(b64) == blob
    print(f"ok: {checked} front points, {n} rows, page {size / 1e6:.2f} MB")


if __name__ == "__main__":
    main(*sys.argv[1:4])
