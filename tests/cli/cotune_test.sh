#!/usr/bin/env bash
# A [cotune] study end to end: the example sweep (its file checked by tests/python/test_cotune.py,
# an interrupted run resumed to the same file), and `prism fit-lr` on generated loss curves,
# a diverging one rejected by name, a malformed CSV refused with file:line.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
exp=$src/configs/examples/cotune.toml

"$prism" sweep "$exp" -o full.h5 -q >full.log 2>&1 || { fail "sweep: exit $?"; cat full.log; }
/usr/bin/python3 "$src/tests/python/test_cotune.py" full.h5 "$dir" || fail "test_cotune.py"
"$prism" report full.h5 --sort time_to_target_p95_days --top 3 >report.txt 2>&1 || fail "report"
grep -q 'time_to_target_p95_days' report.txt || fail "report: no time_to_target_p95_days"

# interrupted (--time-limit with a per-point delay), resumed: the same file as the full run
PRISM_TEST_POINT_DELAY_MS=2 "$prism" sweep "$exp" -o part.h5 --time-limit 0.5 -q >part.log 2>&1
rc=$?
[ "$rc" = 3 ] || { fail "interrupted sweep: exit $rc, expected 3"; cat part.log; }
"$prism" sweep "$exp" -o part.h5 --resume -q >resume.log 2>&1 || { fail "resume: exit $?"; cat resume.log; }
/usr/bin/python3 "$src/tests/cli/compare_results.py" full.h5 part.h5 || fail "resumed file differs"

# loss curves: y = a exp(b x) + c + noise for three learning rates, and one that diverges
/usr/bin/python3 - <<'PY'
import numpy as np
rng = np.random.default_rng(1)
with open("curves.csv", "w") as f:
    f.write("# synthetic: sigma 0.01\nlearning_rate,step,loss\n")
    for lr, a, b, c in ((1e-4, 2.0, -0.004, 2.45), (3e-4, 2.0, -0.01, 2.40), (1e-3, 2.0, -0.03, 2.7)):
        for x in range(0, 500, 5):
            f.write(f"{lr},{x},{a * np.exp(b * x) + c + rng.normal(0, 0.01):.6f}\n")
    for x in range(0, 500, 5):
        f.write(f"0.01,{x},{3.0 + 0.002 * x + rng.normal(0, 0.01):.6f}\n")
PY
"$prism" fit-lr curves.csv --tau 2000 >fit.out 2>fit.err || { fail "fit-lr: exit $?"; cat fit.err; }
cat fit.out fit.err
grep -q '^best learning_rate 3e-04 ' fit.out || fail "fit-lr: did not pick 3e-4"
grep -q '^prism: warning: curves.csv: learning_rate 0.01: the loss does not decrease' fit.err ||
    fail "fit-lr: diverging curve not rejected by name"
printf 'learning_rate,step,loss\n1e-4,0,3.0\n1e-4,10,x\n' >bad.csv
"$prism" fit-lr bad.csv --tau 100 >bad.out 2>bad.err; rc=$?
[ "$rc" = 2 ] || fail "bad csv: exit $rc, expected 2"
grep -q "^prism: error: bad.csv:3: loss: 'x' is not a finite number" bad.err || { fail "bad csv message"; cat bad.err; }
"$prism" fit-lr curves.csv >notau.out 2>notau.err; rc=$?
[ "$rc" = 2 ] || fail "fit-lr without --tau: exit $rc, expected 2"

[ "$fails" = 0 ] && echo "ok   cotune"
exit "$fails"
