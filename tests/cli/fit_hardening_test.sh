#!/usr/bin/env bash
# Issue 33: the fitting commands (`steps fit/compare`, `trace fit`, `fit-lr`), `[cotune]`
# validation and `recover`/`status` on hostile input. Each check names the item it covers;
# each failed before the fix (a segfault, exit 0 with a wrong or unloadable answer, an
# overwritten input, exit 1 for bad input, memory without bound).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
exp=$src/configs/examples/mlperf/eos_h100_256.toml
steps=("$src"/tests/data/steps/mlperfv41_NVIDIA_eos_n32_*.csv)
now_ms() { date +%s%3N; }
# expect CODE NAME PATTERN COMMAND...: exit CODE and PATTERN (grep -E) in the output
expect() {
    local code=$1 name=$2 pattern=$3
    shift 3
    "$@" >"$name.out" 2>&1
    local rc=$?
    if [ "$rc" = "$code" ] && grep -Eq -- "$pattern" "$name.out"; then ok "$name"; else
        fail "$name: exit $rc (want $code): $(head -c 600 "$name.out")"
    fi
}

# 1, 11: an infinite step time, a profiler step of dur 0: a segfault (139) before.
{ echo "step,step_time_s,first_step_after_eval"; for i in $(seq 1 40); do echo "$i,18.$i,0"; done
  echo "41,inf,0"; } >inf.csv
expect 2 item1_inf_csv "inf.csv:42: column 'step_time_s': inf is not a finite positive time" \
    "$prism" steps compare inf.csv --experiment "$exp"
cat >zero_step.json <<'JSON'
{"traceEvents": [
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 0},
 {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 10, "dur": 0},
 {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 1, "dur": 5}]}
JSON
expect 2 item1_zero_step_trace "zero_step.json: traceEvents\[0\] \('ProfilerStep#1'\): a profiler step of 'dur' 0" \
    "$prism" steps compare zero_step.json --experiment "$exp"

# 6: --monte-carlo without a cap (2^31-1: 17 GB in a minute; negative taken as analytic).
t0=$(now_ms)
expect 2 item6_monte_carlo_cap "--monte-carlo: 2147483647 is not a sample count from 1 to 100000" \
    "$prism" steps compare "${steps[0]}" --experiment "$exp" --monte-carlo 2147483647
[ $(($(now_ms) - t0)) -lt 5000 ] || fail "item6: the refusal took $(($(now_ms) - t0)) ms"
expect 2 item6_monte_carlo_negative "--monte-carlo: -5 is not a sample count" \
    "$prism" steps compare "${steps[0]}" --experiment "$exp" --monte-carlo -5

# 7: readers with a size limit: a profile linked to /dev/urandom (11-15 GB before), a step
# file that is a device.
ln -s /dev/urandom urandom.toml
t0=$(now_ms)
expect 2 item7_variability_urandom "urandom.toml: larger than 1048576 bytes, the limit for a variability profile" \
    "$prism" steps compare "${steps[0]}" --experiment "$exp" --variability urandom.toml
expect 2 item7_base_urandom "urandom.toml: larger than 1048576 bytes" \
    "$prism" steps fit "${steps[0]}" --experiment "$exp" --base urandom.toml -o never.toml
sed 's/^\[evaluation\]/[variability]\npreset = "urandom.toml"\n\n[evaluation]/' \
    "$src/tests/data/sweeps/sweep_small.toml" >uses_urandom.toml
expect 2 item7_experiment_profile_urandom "uses_urandom.toml:[0-9]+:[0-9]+: variability.preset: 'urandom.toml': .*larger than 1048576 bytes" \
    "$prism" validate uses_urandom.toml
ln -s /dev/zero zero.csv
expect 2 item7_step_csv_device "zero.csv: larger than 67108864 bytes, the limit for a step file" \
    "$prism" steps compare zero.csv --experiment "$exp"
[ $(($(now_ms) - t0)) -lt 15000 ] || fail "item7: the refusals took $(($(now_ms) - t0)) ms"
[ -e never.toml ] && fail "item7: a profile was written"

# 10: a directory or an empty file as a profile was "no variability".
mkdir dir.toml && : >empty.toml
expect 2 item10_directory_profile "dir.toml: is a directory, not a variability profile" \
    "$prism" steps compare "${steps[0]}" --experiment "$exp" --variability dir.toml
expect 2 item10_empty_profile "empty.toml: empty variability profile" \
    "$prism" steps compare "${steps[0]}" --experiment "$exp" --variability empty.toml

# 8: `steps fit` / `trace fit -o` overwrote anything, their own inputs included.
cp "$exp" exp_copy.toml
cp "${steps[0]}" run0.csv
sum_before=$(md5sum exp_copy.toml run0.csv)
expect 2 item8_fit_onto_experiment "steps fit: -o exp_copy.toml: is the input exp_copy.toml" \
    "$prism" steps fit run0.csv --experiment exp_copy.toml -o exp_copy.toml
expect 2 item8_fit_onto_run "steps fit: -o run0.csv: is the input run0.csv" \
    "$prism" steps fit run0.csv --experiment exp_copy.toml -o run0.csv --overwrite
echo "keep me" >existing.toml
expect 2 item8_fit_onto_existing "steps fit: -o existing.toml: file exists \(use --overwrite to replace it\)" \
    "$prism" steps fit run0.csv --experiment exp_copy.toml -o existing.toml
[ "$(md5sum exp_copy.toml run0.csv)" = "$sum_before" ] && [ "$(cat existing.toml)" = "keep me" ] ||
    fail "item8: an input or an existing file changed"
trace=$src/tests/data/traces/a100_2rank_rank0_nccl.json.gz
cp "$trace" t.json.gz
expect 2 item8_trace_fit_onto_trace "trace fit: -o t.json.gz: is the input t.json.gz" \
    "$prism" trace fit t.json.gz -o t.json.gz --overwrite
expect 2 item8_trace_fit_onto_dev_null "trace fit: -o /dev/null: exists and is not a regular file" \
    "$prism" trace fit t.json.gz -o /dev/null
cmp -s "$trace" t.json.gz || fail "item8: the trace changed"

# 9: steps that identify nothing: constant steps, 10-ms rounding of the MLPerf steps.
{ echo "step,step_time_s,first_step_after_eval"; for i in $(seq 1 60); do echo "$i,18.37,0"; done; } >constant.csv
expect 2 item9_constant "steps fit: constant.csv: all 55 steps take 18.37 s: constant steps pin no spread" \
    "$prism" steps fit constant.csv --experiment "$exp" -o constant.toml
awk -F, -v OFS=, 'NR > 1 { $2 = sprintf("%.2f", $2) } { print }' "${steps[0]}" >rounded.csv
expect 2 item9_rounded "steps fit: rounded.csv: the step times come in steps of 0.01 s \(the timer's resolution\?\)" \
    "$prism" steps fit rounded.csv --experiment "$exp" -o rounded.toml
[ -e constant.toml ] || [ -e rounded.toml ] && fail "item9: a profile was written"

# 13, 15: a newline in --note, a carriage return in --name: the profile loads. A multi-point
# experiment: the point used is named.
"$prism" steps fit "${steps[@]}" --experiment "$exp" -o escaped.toml --fit regime \
    --note $'first line\nsecond line' --name $'fit\rname' >escaped.out 2>&1 || fail "item13: steps fit: $(cat escaped.out)"
expect 0 item13_profile_loads "^KS shape" \
    "$prism" steps compare "${steps[@]}" --experiment "$exp" --variability escaped.toml
grep -q '^# second line$' escaped.toml && grep -q '^name = "fit\\rname"$' escaped.toml ||
    fail "item13: escaped.toml: $(head -n 5 escaped.toml)"
expect 0 item15_names_the_point "note: .*quickstart.toml has 288 points; the runs are taken to be its first: tp=2 pp=1 dp=128" \
    "$prism" steps compare "${steps[0]}" --experiment "$src/configs/quickstart.toml"

# 16: the same trace twice was fitted as two jobs.
expect 2 item16_same_trace_twice "trace fit: t2.json.gz is the same trace as t.json.gz" \
    bash -c "cp t.json.gz t2.json.gz && '$prism' trace fit t.json.gz t2.json.gz -o twice.toml"

# 17: fit-lr --tau before the first measured step extrapolated backwards without a word.
{ echo "learning_rate,step,loss"; for s in 100 200 300 400 500 600; do
    echo "1e-4,$s,$(awk -v s=$s 'BEGIN { printf "%.4f", 2 + 3 * exp(-s / 200) }')"; done; } >curves.csv
expect 0 item17_tau_before_first_step "warning: curves.csv: learning_rate 0.0001: --tau 50 is before the first measured step 100" \
    "$prism" fit-lr curves.csv --tau 50

# 18, 21: recover -o EXISTING exited 1 (sweep: 2); status and recover advised `sweep ... -o
# DIR --overwrite` onto a directory or /dev/null.
"$prism" sweep "$src/tests/data/sweeps/sweep_small.toml" -o small.h5 -q || fail "sweep_small"
echo "keep me" >taken.h5
expect 2 item18_recover_onto_existing "recover: -o taken.h5: file exists \(use --overwrite to replace it\)" \
    "$prism" recover small.h5 -o taken.h5
mkdir results_dir
expect 2 item21_status_directory "results_dir: a directory, not a result file" "$prism" status results_dir
grep -q -- "--overwrite" item21_status_directory.out && fail "item21: status still advises --overwrite"
expect 2 item21_recover_dev_null "/dev/null: not a regular file, not a result file" \
    "$prism" recover /dev/null -o rec.h5
grep -q -- "--overwrite" item21_recover_dev_null.out && fail "item21: recover still advises --overwrite"

# 19: [cotune] noise = "kaplan" with an unreachable target_loss: exit 1, unlocated.
# kaplan.parameters = n_c puts the asymptote at exactly 1: 1 + 1e-10 takes ~3e16 steps
sed -e 's/^target_tokens = 1.0e12/target_loss = 1.0000000001\nkaplan = { parameters = 8.8e13 }/' \
    -e 's/^b_noise = 4.0e6 .*$/noise = "kaplan"/' -e '/^b_noise = \[/d' \
    "$src/configs/examples/cotune.toml" >kaplan.toml
expect 2 item19_kaplan_unreachable "kaplan.toml:[0-9]+:[0-9]+: cotune.target_loss: 1.0000000001 takes .* optimal-batch steps .* more than 2\^53" \
    "$prism" validate kaplan.toml

[ "$fails" = 0 ] && echo "ok   fitting commands hardened"
exit "$fails"
