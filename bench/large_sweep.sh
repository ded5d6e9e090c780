#!/usr/bin/env bash
# Scale benchmark (issue: 10^7-point spaces): --dry-run time, then a full sweep of
# bench/space_1e7.toml alone and under mpirun -n 3, with points/s and the master's peak RSS
# (its memory must stay bounded: rows stream to the file, the Pareto archive holds the front).
#
#   bash bench/large_sweep.sh [PRISM] [OUTDIR]
set -euo pipefail
prism=${1:-build/explorer/prism}
out=${2:-$(mktemp -d)}
here=$(cd "$(dirname "$0")/.." && pwd)
exp=$here/bench/space_1e7.toml
mkdir -p "$out"
start=$(date +%s.%N)
"$prism" sweep "$exp" --dry-run
echo "dry run: $(echo "$(date +%s.%N) - $start" | bc) s"
for ranks in 1 3; do
    rm -f "$out/large.$ranks.h5"
    if [ "$ranks" = 1 ]; then
        "$prism" sweep "$exp" -o "$out/large.$ranks.h5" --progress-interval 30 2>&1 | grep -E '^(processed|master|progress)'
    else
        mpirun -n "$ranks" "$prism" sweep "$exp" -o "$out/large.$ranks.h5" --progress-interval 30 2>&1 \
            | grep -E '^(processed|master|progress)'
    fi
    ls -la "$out/large.$ranks.h5"
done
