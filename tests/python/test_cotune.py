#!/usr/bin/python3
"""Checks a [cotune] study's result file (tests/cli/cotune_test.sh sweeps
configs/examples/cotune.toml) and scripts/prism_results.py's time-to-target plot.

- tokens_to_target = steps_to_target x tokens per step, row by row (tokens per step taken from
  the file's own tokens_per_s x step_time_s; no ramp in the example), to 1e-12;
- goodput_tokens_per_s = tokens_per_s_mean x statistical_efficiency, to 1e-12;
- prism_results.time_to_target() against a brute-force pass over the rows;
- `prism_results.py time-to-target FILE -o out.png` writes a PNG.

Usage: /usr/bin/python3 tests/python/test_cotune.py FILE OUTDIR
"""
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "scripts", "prism_results.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import prism_results as pr  # noqa: E402


def main(path, outdir):
    t = pr.load(path)
    ok = t["status"] == "ok"
    assert ok.sum() > 100, ok.sum()
    per_step = t["tokens_per_s"][ok] * t["step_time_s"][ok]
    np.testing.assert_allclose(t["tokens_to_target"][ok], t["steps_to_target"][ok] * per_step,
                               rtol=1e-12)
    np.testing.assert_allclose(per_step, t["global_batch"][ok] * 8192.0, rtol=1e-12)
    np.testing.assert_allclose(t["goodput_tokens_per_s"][ok],
                               t["tokens_per_s_mean"][ok] * t["statistical_efficiency"][ok],
                               rtol=1e-12)
    assert pr.units(path)["b_noise"] == "tokens"

    curves = pr.time_to_target(path)
    assert sorted(curves) == [4.0e6, 4.0e10], sorted(curves)
    for bn, by_gpus in curves.items():
        assert sorted(by_gpus) == [256, 512, 1024, 2048], sorted(by_gpus)
        for gpus, c in by_gpus.items():
            rows = ok & (t["b_noise"] == bn) & (t["gpus"] == gpus)
            for b, best in zip(c["batch"], c["best"]):
                brute = min(t["time_to_target_p50_days"][i] for i in np.flatnonzero(rows)
                            if t["global_batch"][i] == b)
                assert best == brute, (bn, gpus, b, best, brute)
            fastest = max(np.flatnonzero(rows), key=lambda i: t["tokens_per_s"][i])
            assert c["throughput_batch"] == t["global_batch"][fastest]

    out = os.path.join(outdir, "time_to_target.png")
    cli = subprocess.run([sys.executable, SCRIPT, "time-to-target", path, "-o", out],
                         capture_output=True, text=True)
    assert cli.returncode == 0, cli.stderr
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n", f"{out} is not a PNG"
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
