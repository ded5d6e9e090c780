#!/usr/bin/env bash
# [evaluation] verify = "montecarlo" on the quickstart (analytic, 2,000 samples): /verify holds
# one row per front point, consistent with the sweep's own metrics and with an independent
# Monte Carlo sweep of the same experiment (tests/cli/check_verify.py); `prism report` shows
# the table; the file is the same under `mpiexec -n 3` (the workers share the points).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
exp=$src/configs/quickstart.toml
sed 's/^method = "analytic"/method = "analytic"\nverify = "montecarlo"\nsamples = 2000/' "$exp" \
    >"$dir/verify.toml"
sed 's/^method = "analytic"/method = "montecarlo"\nsamples = 2000\nsensitivity = false/' "$exp" \
    >"$dir/montecarlo.toml"
grep -q '^verify = "montecarlo"' "$dir/verify.toml" || { echo "FAIL could not set verify"; exit 1; }

"$prism" sweep "$dir/verify.toml" -o "$dir/verify.h5" -q || fail "verified sweep"
"$prism" sweep "$dir/montecarlo.toml" -o "$dir/montecarlo.h5" -q || fail "Monte Carlo sweep"
/usr/bin/python3 "$src/tests/cli/check_verify.py" "$dir/verify.h5" "$dir/montecarlo.h5" 0.06 \
    && echo "ok   /verify consistent" || fail "/verify"
# prism_results.verify reads the same table as h5py, and summary reports it
PYTHONPATH=$src/scripts /usr/bin/python3 - "$dir/verify.h5" >"$dir/py.txt" 2>&1 <<'PY' \
    && echo "ok   prism_results.verify and summary" || { fail "prism_results.verify"; cat "$dir/py.txt"; }
import sys, h5py, numpy as np, prism_results as pr
path = sys.argv[1]
v = pr.verify(path)
with h5py.File(path, "r") as f:
    g = f["verify"]
    assert set(v) == set(g.keys()) | {"samples"}, sorted(v)
    for name in g.keys():
        assert np.array_equal(v[name], g[name][:], equal_nan=True), name
    assert v["samples"] == 2000, v["samples"]
import io
out = io.StringIO()
pr.summary(path, out)
line = [l for l in out.getvalue().splitlines() if l.strip().startswith("verify:")]
assert line and f"{len(v['index'])} front points" in line[0], out.getvalue()
PY
"$prism" report "$dir/verify.h5" --top 0 >"$dir/report.txt" 2>&1 || fail "report"
grep -q "^Monte Carlo verification of the front (3 points, 2000 samples" "$dir/report.txt" \
    && echo "ok   report shows the verification" || { fail "report"; cat "$dir/report.txt"; }
"$mpiexec" -n 3 "$prism" sweep "$dir/verify.toml" -o "$dir/mpi.h5" -q || fail "mpi sweep"
/usr/bin/python3 "$src/tests/cli/compare_results.py" "$dir/verify.h5" "$dir/mpi.h5" \
    && echo "ok   alone = mpiexec -n 3" || fail "verified files differ with the rank count"
exit $fails
