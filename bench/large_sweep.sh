#!/usr/bin/env bash
# Scale benchmark: a 10^7-point space (bench/space_1e7.toml) with the PRISM-paper variability
# (analytic; its objectives become min p95 step time and min GPUs) on the machine's cores:
# --dry-run time and estimate, then the full sweep alone and under mpiexec -n 3, with the
# engine's points/s, the rows dominated (their stochastic evaluation skipped by pruning), the
# process wall time and the master's peak RSS (bounded: rows stream to the file, the Pareto
# archive holds the front). VARIABILITY "none" runs the original deterministic space (min
# deterministic step time and GPUs). SIZE (1-10, default 10) keeps the first SIZE values of the
# `gpus` dimension: SIZE x 10^6 points.
#
#   bash bench/large_sweep.sh [PRISM] [OUTDIR] [SIZE] [VARIABILITY]
set -euo pipefail
prism=${1:-build/explorer/prism}
out=${2:-$(mktemp -d)}
size=${3:-10}
variability=${4:-prism-paper}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
exp=$out/space.toml
/usr/bin/python3 - "$here/bench/space_1e7.toml" "$exp" "$size" "$variability" <<'PY'
import re, sys
src, dst, size, variability = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
text = open(src).read()
gpus = re.search(r"^gpus = \[(.*)\]$", text, re.M)
values = gpus.group(1).split(", ")[:size]
text = text.replace(gpus.group(0), "gpus = [" + ", ".join(values) + "]")
if variability != "none":
    text = text.replace('preset = "none"', f'preset = "{variability}"')
    text = text.replace('minimize = ["step_time_s", "gpus"]', 'minimize = ["step_time_p95_s", "gpus"]')
open(dst, "w").write(text)
PY
echo "space: $size x 10^6 points, variability $variability ($exp)"
start=$(date +%s.%N)
"$prism" sweep "$exp" --dry-run
echo "dry run: $(echo "$(date +%s.%N) - $start" | bc) s"
for ranks in 1 3; do
    rm -f "$out/large.$ranks.h5"
    start=$(date +%s.%N)
    if [ "$ranks" = 1 ]; then
        "$prism" sweep "$exp" -o "$out/large.$ranks.h5" --progress-interval 60 >"$out/large.$ranks.log" 2>&1
    else
        mpiexec -n "$ranks" "$prism" sweep "$exp" -o "$out/large.$ranks.h5" --progress-interval 60 \
            >"$out/large.$ranks.log" 2>&1
    fi
    wall=$(echo "$(date +%s.%N) - $start" | bc)
    grep -E '^(pruning|processed|master)' "$out/large.$ranks.log"
    echo "ranks $ranks: process wall $wall s; $(ls -la "$out/large.$ranks.h5" | awk '{print $5}') bytes"
done
/usr/bin/python3 "$here/tests/cli/compare_results.py" "$out/large.1.h5" "$out/large.3.h5"
