#!/usr/bin/env bash
# `prism trace fit` on the three shared traces (tests/data/traces): the fitted profile, its QQ
# plot, and an experiment that uses the profile validating and sweeping; `prism steps
# compare/fit` on the MLPerf step files; bad traces and step files: a message naming the file
# and a non-zero exit.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
traces=("$src"/tests/data/traces/*.json.gz)

# The fit: every class the traces hold, a profile and a QQ table.
"$prism" trace fit "${traces[@]}" -o fitted.toml --qq qq.csv >fit.out 2>fit.err ||
    fail "trace fit: exit $? $(cat fit.err)"
cat fit.out
for cls in gemm elementwise allreduce alltoall optimizer dataloader; do
    grep -Eq "^$cls " fit.out || fail "trace fit: no row for $cls"
    grep -Eq "^$cls = \{dist = " fitted.toml || fail "fitted.toml: no $cls"
done
grep -q '^# not in the traces: kept from prism-paper' fitted.toml || fail "no provenance for unfitted classes"
grep -q 'chosen: ' fitted.toml || fail "no goodness of fit in the profile"
[ "$(head -n 1 qq.csv)" = "class,family,cv,ks,p,fitted,empirical" ] || fail "qq.csv header"
/usr/bin/python3 "$src/scripts/prism_results.py" qq qq.csv -o qq.png && [ -s qq.png ] || fail "qq plot"

# The profile in an experiment: validates and sweeps.
sed 's/^\[evaluation\]/[variability]\npreset = "fitted.toml"\n\n[evaluation]/' \
    "$src/tests/data/sweeps/sweep_small.toml" >uses_profile.toml
"$prism" validate uses_profile.toml >validate.out 2>&1 || fail "validate: $(cat validate.out)"
"$prism" sweep uses_profile.toml -o sweep.h5 -q >sweep.out 2>&1 || fail "sweep: $(cat sweep.out)"
"$prism" status sweep.h5 | grep -q complete || fail "sweep not complete"
sed 's/^\[evaluation\]/[variability]\npreset = "missing.toml"\n\n[evaluation]/' \
    "$src/tests/data/sweeps/sweep_small.toml" >missing_profile.toml
"$prism" validate missing_profile.toml >missing.out 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "missing_profile.toml:[0-9]*:[0-9]*: variability.preset: cannot read the profile file 'missing.toml'" missing.out ||
    fail "missing profile: exit $rc $(cat missing.out)"

# Bad traces: exit 2 (bad input, as README says; issue 33 made it one rule), the file named.
head -c 20000 "${traces[0]}" >truncated.json.gz
echo '{"schema": 2, "events": []}' >foreign.json
for bad in truncated.json.gz foreign.json; do
    "$prism" trace fit "$bad" -o bad.toml >bad.out 2>&1
    rc=$?
    [ "$rc" = 2 ] && grep -q "^prism: error: $bad: " bad.out || fail "bad trace $bad: exit $rc $(cat bad.out)"
    [ -e bad.toml ] && fail "bad trace $bad: a profile was written"
done

# Steps: compare and fit on the MLPerf runs; a bad step file.
steps=("$src"/tests/data/steps/mlperfv41_NVIDIA_eos_n32_*.csv)
"$prism" steps compare "${steps[@]}" --experiment "$src/configs/examples/mlperf/eos_h100_256.toml" \
    --variability mlperf-eos-h100 >compare.out 2>&1 || fail "steps compare: $(cat compare.out)"
grep -q "of 300 steps (dropped 5 warm-up, 24 first after an evaluation)" compare.out || fail "step selection"
grep -q "^KS shape" compare.out || fail "no KS"
"$prism" steps fit "${steps[@]}" --experiment "$src/configs/examples/mlperf/eos_h100_256.toml" \
    -o steps.toml --fit regime >stepsfit.out 2>&1 || fail "steps fit: $(cat stepsfit.out)"
grep -q '^comm_regime = {dist = "lognormal", cv = ' steps.toml || fail "steps fit: no regime"
"$prism" steps fit "${steps[@]}" --experiment "$src/configs/examples/mlperf/eos_h100_256.toml" \
    -o x.toml --fit everything >badfit.out 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "unknown value 'everything'" badfit.out || fail "bad --fit: exit $rc"
printf 'step,step_time_s,first_step_after_eval\n6,slow,0\n' >bad.csv
"$prism" steps compare bad.csv --experiment "$src/configs/examples/mlperf/eos_h100_256.toml" >badcsv.out 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "bad.csv:2: column 'step_time_s': 'slow' is not a number" badcsv.out ||
    fail "bad csv: exit $rc $(cat badcsv.out)"

[ "$fails" = 0 ] && echo "ok   trace fit and steps"
exit "$fails"
