#!/usr/bin/env bash
# The study page (`prism report FILE --html OUT`, written by scripts/prism_results.py html) in a
# browser: the quickstart (with /verify) and the co-tuning example are swept, their pages loaded
# by Debian's headless chromium from file:// URLs with networking off, and checked by
# tests/python/check_page.py (no console errors, the front, CDF, breakdown and other panels
# drawn in the DOM and not blank in a screenshot). Then the data the page is built from
# (tests/python/test_page_data.py: front membership by brute force, breakdown against
# `prism eval`, CDF points against the file's quantile columns), the static plots as PNG, SVG
# and PDF, where `prism report --html` finds the script, and its errors; a Mixture-of-Experts
# study's page (tests/data/sweeps/moe_small.toml).
# Chromium is a test dependency: when it is missing, the Makefile's deps target installs it.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
py=/usr/bin/python3

if ! command -v chromium >/dev/null 2>&1; then
    echo "chromium missing: make deps installs it"
    make -C "$src" deps || { echo "FAIL make deps could not install chromium"; exit 1; }
fi

# the quickstart with the Monte Carlo verification of its front (a smaller sample)
sed 's/^method = "analytic"/method = "analytic"\nverify = "montecarlo"\nsamples = 1000/' \
    "$src/configs/quickstart.toml" >quickstart.toml
grep -q '^verify = "montecarlo"' quickstart.toml || { echo "FAIL could not set verify"; exit 1; }
"$prism" sweep quickstart.toml -o quickstart.h5 -q >sweep.log 2>&1 || { fail "sweep"; cat sweep.log; }
front=$($py -c "import h5py,sys; f=h5py.File(sys.argv[1]); print(len(f['pareto/objectives/index']))" quickstart.h5)
rows=$($py -c "import h5py,sys; f=h5py.File(sys.argv[1]); print(f.attrs['rows_committed'])" quickstart.h5)
"$prism" report quickstart.h5 --html quickstart.html >report.out 2>&1 || { fail "report --html"; cat report.out; }
grep -q '^quickstart.html: [0-9.]* MB$' report.out || { fail "report --html output"; cat report.out; }
mkdir -p quickstart.check
# on the default axes (p95 step time, GPU-hours) every ok row is drawn
ok_rows=$($py -c "
import h5py, numpy as np, sys
print(int(np.sum(h5py.File(sys.argv[1])['points/status'][:] == 0)))" quickstart.h5)
$py "$src/tests/python/check_page.py" quickstart.html quickstart.check \
    --panels front,cdf,pslow,breakdown,sensitivity,runtime --front-points "$front" \
    --min-points "$ok_rows" --tables top-table,verify-table,detail-table,front-table-objectives ||
    fail "quickstart page in chromium"
# on deterministic axes the dominated rows (pruned: deterministic metrics only) are drawn too
drawable=$($py -c "
import h5py, numpy as np, sys
f = h5py.File(sys.argv[1]); s = f['points/status'][:]
x, y = f['metrics/step_time_s'][:], f['metrics/memory_per_gpu_gib'][:]
print(int(np.sum(((s == 0) | (s == 3)) & np.isfinite(x) & np.isfinite(y))))" quickstart.h5)
mkdir -p quickstart.axes
$py "$src/tests/python/check_page.py" quickstart.html quickstart.axes --panels front,cdf \
    --fragment "x=step_time_s&y=memory_per_gpu_gib" --min-points "$drawable" --tables top-table ||
    fail "quickstart page on deterministic axes ($drawable ok and dominated rows)"
$py "$src/tests/python/test_page_data.py" quickstart.h5 "$prism" "$dir" || fail "page data"
echo "quickstart: $rows rows, front $front"

# static plots: PNG, SVG, PDF by extension, with the front's configurations as labels
for cmd in quantiles cdf breakdown sensitivity; do
    for ext in png svg pdf; do
        $py "$src/scripts/prism_results.py" "$cmd" quickstart.h5 -o "$cmd.$ext" 2>err.txt ||
            { fail "$cmd.$ext"; cat err.txt; }
    done
done
$py "$src/scripts/prism_results.py" plot quickstart.h5 --x gpu_hours_mean --y step_time_p95_s \
    -o plot.svg || fail "plot.svg"
$py "$src/scripts/prism_results.py" quantiles quickstart.h5 --top 4 --by step_time_p99_s \
    -o top.png || fail "quantiles --top"
$py "$src/scripts/prism_results.py" cdf quickstart.h5 --index 226,999999 -o bad.png 2>bad.err
grep -q "no row with index 999999" bad.err || fail "cdf --index past the space: $(cat bad.err)"
$py - "$dir" <<'PY' || fail "static plot files"
import sys, os, re
d = sys.argv[1]
magic = {"png": b"\x89PNG", "pdf": b"%PDF", "svg": b"<?xml"}
for cmd in ("quantiles", "cdf", "breakdown", "sensitivity"):
    for ext, m in magic.items():
        with open(os.path.join(d, f"{cmd}.{ext}"), "rb") as f:
            assert f.read(len(m)) == m, (cmd, ext)
# configuration labels, not bare indices, on the axes and legends
for name in ("quantiles.svg", "cdf.svg", "breakdown.svg", "plot.svg"):
    text = open(os.path.join(d, name)).read()
    assert "gpus=1024" in text or "gpus=256" in text, f"{name}: no configuration label"
PY

# where prism report --html finds the script: an installed layout (bin/ beside share/prism/)
mkdir -p inst/bin inst/share/prism
cp "$prism" inst/bin/prism
cat >inst/share/prism/prism_results.py <<'PY'
import sys
open(sys.argv[-1], "w").write("installed copy: " + " ".join(sys.argv[1:]))
PY
env -u PRISM_RESULTS_SCRIPT inst/bin/prism report quickstart.h5 --html inst.html >inst.out 2>&1 ||
    { fail "installed layout"; cat inst.out; }
grep -q "^installed copy: html quickstart.h5 -o inst.html" inst.html || fail "installed script not used"
PRISM_RESULTS_SCRIPT=$PWD/inst/share/prism/prism_results.py "$prism" report quickstart.h5 \
    --html env.html >/dev/null 2>&1 && grep -q "^installed copy" env.html || fail "PRISM_RESULTS_SCRIPT"
rm -rf inst/share && mkdir -p inst2/bin && cp "$prism" inst2/bin/prism
# no script beside an installed copy: the source tree's (compiled in) is used
env -u PRISM_RESULTS_SCRIPT inst2/bin/prism report quickstart.h5 --html src.html >/dev/null 2>&1 &&
    grep -q 'id="prism-data"' src.html || fail "source-tree script fallback"

# errors: not a result file; an output that cannot be written
"$prism" report "$src/configs/quickstart.toml" --html x.html >err.out 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "not a prism result file\|cannot open" err.out || { fail "bad file: rc $rc"; cat err.out; }
[ ! -e x.html ] || fail "a page was written for a bad file"
"$prism" report quickstart.h5 --html /nonexistent/dir/x.html >err.out 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "/nonexistent/dir/x.html: cannot write" err.out || { fail "unwritable: rc $rc"; cat err.out; }
PRISM_PYTHON=/nonexistent/python "$prism" report quickstart.h5 --html y.html >err.out 2>&1; rc=$?
[ "$rc" = 1 ] && grep -q "cannot run /nonexistent/python" err.out || { fail "no python: rc $rc"; cat err.out; }

# the co-tuning example: its time-to-target panel
"$prism" sweep "$src/configs/examples/cotune.toml" -o cotune.h5 -q >cotune.log 2>&1 ||
    { fail "cotune sweep"; cat cotune.log; }
"$prism" report cotune.h5 --html cotune.html >/dev/null 2>&1 || fail "cotune report --html"
mkdir -p cotune.check
$py "$src/tests/python/check_page.py" cotune.html cotune.check \
    --panels front,cdf,pslow,breakdown,cotune --min-points 30 \
    --tables top-table,detail-table,robust-table-objectives || fail "cotune page in chromium"

# a Mixture-of-Experts study: its exposed all-to-all as a fourth breakdown line, the MoE lines
# and routing shares in the tables (docs/moe_outputs.md)
"$prism" sweep "$src/tests/data/sweeps/moe_small.toml" -o moe.h5 -q >moe.log 2>&1 ||
    { fail "moe sweep"; cat moe.log; }
"$prism" report moe.h5 --html moe.html >/dev/null 2>&1 || fail "moe report --html"
mkdir -p moe.check
# (its 18 points leave the scatter too sparse for the screenshot's ink check: DOM only)
$py "$src/tests/python/check_page.py" moe.html moe.check \
    --panels cdf,pslow,breakdown,sensitivity --front-points 2 --min-points 18 \
    --tables top-table,detail-table,front-table-objectives || fail "moe page in chromium"
grep -q 'exposed MoE all-to-all' moe.html && grep -q 'routing_share_p95' moe.html ||
    fail "moe page without its MoE lines"

[ "$fails" = 0 ] && echo "ok   report_html"
exit "$fails"
