#!/usr/bin/env bash
# Sweep throughput benchmark: points/s of the quickstart space alone and under mpirun with 2 and
# 3 ranks, and how much CPU the master uses while it waits for workers (it must not busy-poll a
# core away from them). The figures come from the sweep's own summary lines (engine wall time,
# excluding process start-up and experiment parsing).
#
#   bash bench/sweep_timer.sh [PRISM] [REPEAT]
#
# Two spaces: the quickstart as shipped (288 points: the real per-point cost, with the
# step-time distribution and its sensitivity ranking), and the same space without variability
# and sensitivity but with a 50-value learning-rate dimension (14,400 cheap points): the
# explorer's own throughput and how it scales with workers.
set -euo pipefail
prism=${1:-build/explorer/prism}
repeat=${2:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cp "$here/configs/quickstart.toml" "$work/quickstart.toml"
lrs=$(/usr/bin/python3 -c "print(', '.join(f'{3e-4 * (1 + i / 100):.6g}' for i in range(50)))")
sed -e "s/^recompute = \[\"selective\", \"full\"\]/&\nlearning_rate = [$lrs]/" \
    -e 's/^preset = "prism-paper"/preset = "none"/' -e 's/^method = "analytic"/&\nsensitivity = false/' \
    "$here/configs/quickstart.toml" > "$work/quickstart_x50.toml"

printf '%-16s %5s %10s %12s %14s %12s\n' space ranks points wall_s points_per_s master_cpu
for space in quickstart quickstart_x50; do
    for ranks in 1 2 3; do
        for ((i = 0; i < repeat; i++)); do
            out=$work/$space.$ranks.$i
            if [ "$ranks" = 1 ]; then
                "$prism" sweep "$work/$space.toml" -o "$out.h5" --progress-interval 1000 >"$out.log" 2>&1
            else
                mpirun -n "$ranks" "$prism" sweep "$work/$space.toml" -o "$out.h5" \
                    --progress-interval 1000 >"$out.log" 2>&1
            fi
            line=$(grep '^processed' "$out.log")
            cpu=$(grep '^master cpu' "$out.log" | sed -E 's/.*\(([0-9.]+)% of a core.*/\1%/')
            points=$(echo "$line" | awk '{print $2}')
            wall=$(echo "$line" | awk '{print $5}')
            rate=$(echo "$line" | sed -E 's/.*\(([0-9]+) points\/s.*/\1/')
            printf '%-16s %5s %10s %12s %14s %12s\n' "$space" "$ranks" "$points" "$wall" "$rate" "$cpu"
        done
    done
done
