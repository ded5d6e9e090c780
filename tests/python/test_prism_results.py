#!/usr/bin/python3
"""Checks scripts/prism_results.py on a file written by tests/io/result_store_test.cpp
(test ResultStore.PythonModuleLoadsSummarizesAndPlots). The expected values are the closed forms
that test writes (index 3r+1, ...), restated here.

Usage: /usr/bin/python3 tests/python/test_prism_results.py FILE OUTDIR
"""
import io
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "prism_results.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import prism_results as pr  # noqa: E402


def status_of(i):
    return "infeasible" if i % 7 == 0 else "failed" if i % 11 == 0 else "ok"


def reason_of(i):
    s = status_of(i)
    return f"memory: {i % 2} GiB" if s == "infeasible" else f"boom {i}" if s == "failed" else ""


def main(path, outdir):
    rows = 17
    table = pr.load(path)
    index = np.array([3 * r + 1 for r in range(rows)], dtype=np.uint64)
    assert np.array_equal(table["index"], index), table["index"]
    assert list(table["status"]) == [status_of(int(i)) for i in index]
    assert list(table["reason"]) == [reason_of(int(i)) for i in index]
    assert list(table["placement"]) == [("tp_inner", "dp_inner", "spread")[int(i) % 3] for i in index]
    assert np.array_equal(table["tp"], [1 << (int(i) % 4) for i in index])
    assert np.array_equal(table["lr"], 1e-4 * index.astype(float) + 0.125)
    assert np.array_equal(table["tokens_per_s"], 1e6 * index.astype(float) + 0.25)
    ok = table["status"] == "ok"
    p95 = table["step_time_p95_s"]
    assert np.all(np.isnan(p95[~ok])) and np.array_equal(p95[ok], 0.5 + index[ok] / 1024.0)
    assert pr.units(path)["tokens_per_s"] == "tokens/s"

    df = pr.frame(path)
    assert len(df) == rows and list(df["index"]) == list(index)
    assert str(df["status"].dtype) == "category", df["status"].dtype
    assert list(df["status"].cat.categories) == ["ok", "infeasible", "failed", "dominated"]
    assert list(df["status"].astype(str)) == [status_of(int(i)) for i in index]
    assert list(df["placement"].cat.categories) == ["tp_inner", "dp_inner", "spread"]
    assert list(df["placement"].astype(str)) == list(table["placement"])
    assert df["tp"].dtype.kind == "i" and list(df["tp"]) == [1 << (int(i) % 4) for i in index]
    assert np.array_equal(df["tokens_per_s"].to_numpy(), 1e6 * index.astype(float) + 0.25)
    assert df.attrs["units"]["tokens_per_s"] == "tokens/s"
    assert df.attrs["header"]["status"] == "complete"

    front = pr.pareto(path)
    assert front["name"] == "time_vs_tokens", front
    assert front["objectives"] == ["step_time_p95_s", "tokens_per_s"]
    assert front["senses"] == ["min", "max"]
    assert list(front["index"]) == [4, 7, 16]
    assert pr.filtered(path) == {"too many gpus": 3, "tp does not divide heads": 12}
    assert pr.failures(path) == [(13, "kernel exploded")]
    assert pr.header(path)["status"] == "complete"

    names = {"step_time_p50_s": 0, "step_time_p999_s": 0, "step_time_p99p9_s": 0,
             "step_time_p5_s": 0, "step_time_s": 0}
    assert pr.step_time_quantiles(names) == [
        (0.05, "step_time_p5_s"), (0.5, "step_time_p50_s"), (0.999, "step_time_p999_s"),
        (0.999, "step_time_p99p9_s")], pr.step_time_quantiles(names)

    text = io.StringIO()
    pr.summary(path, out=text)
    summary = text.getvalue()
    assert "status complete" in summary, summary
    assert f"ok {int(ok.sum())}" in summary, summary
    assert "pareto time_vs_tokens: 3 points (min step_time_p95_s, max tokens_per_s)" in summary

    cli = subprocess.run([sys.executable, SCRIPT, "summary", path], capture_output=True, text=True)
    assert cli.returncode == 0 and cli.stdout == summary, cli.stderr
    for command in (["plot", path, "--x", "step_time_p95_s", "--y", "tokens_per_s"],
                    ["quantiles", path, "--top", "4"]):
        out = os.path.join(outdir, command[0] + ".png")
        cli = subprocess.run([sys.executable, SCRIPT] + command + ["-o", out],
                             capture_output=True, text=True)
        assert cli.returncode == 0, cli.stderr
        with open(out, "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
    bad = subprocess.run([sys.executable, SCRIPT, "summary", SCRIPT], capture_output=True,
                         text=True)
    assert bad.returncode == 1 and "cannot open" in bad.stderr, bad.stderr
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
