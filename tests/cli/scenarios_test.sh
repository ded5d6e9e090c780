#!/usr/bin/env bash
# Scenario dimensions ([space] scenarios, b_noise by default): one front per scenario and the
# robust pick, checked by brute force (tests/cli/check_scenarios.py); the same file under MPI and
# after an interrupted run resumed; validate says what it resolved.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
exp=$src/tests/data/experiments/scenarios/cotune_small.toml

"$prism" validate "$exp" >validate.txt 2>&1 || { fail "validate: exit $?"; cat validate.txt; }
grep -q '\* space.scenarios *= \["b_noise"\]' validate.txt || { fail "validate: no default scenarios line"; cat validate.txt; }
grep -q '\* evaluation.prune *= false .*scenario' validate.txt || { fail "validate: prune not off with its reason"; cat validate.txt; }

"$prism" sweep "$exp" -o one.h5 -q >one.log 2>&1 || { fail "sweep: exit $?"; cat one.log; }
"$prism" report one.h5 --top 3 >report.txt 2>&1 || { fail "report: exit $?"; cat report.txt; }
/usr/bin/python3 "$src/tests/cli/check_scenarios.py" one.h5 report.txt "$src" || fail "check_scenarios.py"

# the same file with 3 ranks
"$mpiexec" -n 3 "$prism" sweep "$exp" -o three.h5 -q >three.log 2>&1 || { fail "mpi sweep: exit $?"; cat three.log; }
/usr/bin/python3 "$src/tests/cli/compare_results.py" one.h5 three.h5 || fail "3 ranks differ"

# interrupted and resumed: the resumed sink rebuilds the per-scenario archives from the file
PRISM_TEST_POINT_DELAY_MS=5 "$prism" sweep "$exp" -o part.h5 --time-limit 0.2 -q >part.log 2>&1
rc=$?
[ "$rc" = 3 ] || { fail "interrupted sweep: exit $rc, expected 3"; cat part.log; }
"$prism" sweep "$exp" -o part.h5 --resume -q >resume.log 2>&1 || { fail "resume: exit $?"; cat resume.log; }
/usr/bin/python3 "$src/tests/cli/compare_results.py" one.h5 part.h5 || fail "resumed file differs"

# a scenario dimension that is not in [space]: the file, line and key
sed 's/^\[space\]$/[space]\nscenarios = ["b_nose"]/' "$exp" >bad.toml
"$prism" validate bad.toml >bad.txt 2>&1
rc=$?
[ "$rc" = 2 ] || fail "bad scenarios: exit $rc, expected 2"
grep -q "bad.toml:24:14: space.scenarios: 'b_nose' is not a dimension of \[space\].*did you mean 'b_noise'" bad.txt ||
    { fail "bad scenarios: message"; cat bad.txt; }

[ "$fails" = 0 ] && echo "scenarios: all checks passed"
exit "$fails"
