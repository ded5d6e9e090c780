#!/bin/bash
# Summarize a PRISM result file and plot two of its metrics against each other.
#
# Usage:
#   jobs/postprocess.sh RESULTS.h5 [X_METRIC Y_METRIC]
#   PLOT_X=gpu_hours_p95 PLOT_Y=run_time_p95_days jobs/postprocess.sh results/x.h5
#
# Runs, from the repository root:
#   $PYTHON scripts/prism_results.py summary RESULTS.h5
#   $PYTHON scripts/prism_results.py plot RESULTS.h5 --x X_METRIC --y Y_METRIC -o PLOT_OUT
# The summary goes to standard output and, with SUMMARY_OUT set, to that file as well. Works on
# a finished file and on one a sweep is still writing or was interrupted in (rows committed so
# far). Needs h5py, numpy and matplotlib for that Python.
#
# Environment (arguments win over PLOT_X and PLOT_Y):
#   PYTHON        Python interpreter (default /usr/bin/python3)
#   PRISM_ROOT    repository root holding scripts/prism_results.py (default: this script's ..)
#   PLOT_X        metric on the x axis (default step_time_s)
#   PLOT_Y        metric on the y axis (default mfu)
#   PLOT_OUT      image file (default RESULTS with .h5 replaced by _X_vs_Y.png)
#   SUMMARY_OUT   also write the summary to this file
#   SKIP_PLOT     1: summary only

set -uo pipefail

die() {
    echo "postprocess: error: $*" >&2
    exit 2
}

(($# >= 1)) || die "usage: jobs/postprocess.sh RESULTS.h5 [X_METRIC Y_METRIC]"
file="$1"
x="${2:-${PLOT_X:-step_time_s}}"
y="${3:-${PLOT_Y:-mfu}}"
[[ -f "$file" ]] || die "no such result file: $file"

python="${PYTHON:-/usr/bin/python3}"
root="${PRISM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
tool="$root/scripts/prism_results.py"
[[ -x "$python" ]] || command -v "$python" >/dev/null 2>&1 || die "python not found: $python (set PYTHON)"
[[ -f "$tool" ]] || die "not found: $tool (set PRISM_ROOT)"

stem="${file%.h5}"
plot_out="${PLOT_OUT:-${stem}_${x}_vs_${y}.png}"

if [[ -n "${SUMMARY_OUT:-}" ]]; then
    "$python" "$tool" summary "$file" | tee "$SUMMARY_OUT"
    rc=${PIPESTATUS[0]}
else
    "$python" "$tool" summary "$file"
    rc=$?
fi
((rc == 0)) || die "summary failed (exit $rc)"

if [[ "${SKIP_PLOT:-0}" != 1 ]]; then
    "$python" "$tool" plot "$file" --x "$x" --y "$y" -o "$plot_out" ||
        die "plot failed (exit $?)"
    echo "postprocess: wrote $plot_out"
fi
