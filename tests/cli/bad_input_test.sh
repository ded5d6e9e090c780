#!/usr/bin/env bash
# Bad input: a clear message naming file:line:col and key, exit code 2, and no result file.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
fails=0

# expect NAME EXPECTED_CODE REGEX -- COMMAND...: runs it, checks code, stderr and no output file
expect() {
    local name=$1 code=$2 regex=$3; shift 4
    local out="$dir/$name.h5"
    "$@" -o "$out" >"$dir/$name.out" 2>"$dir/$name.err"
    local rc=$?
    if [ "$rc" != "$code" ]; then
        echo "FAIL $name: exit $rc, expected $code"; cat "$dir/$name.err"; fails=$((fails + 1)); return
    fi
    if ! grep -Eq -- "$regex" "$dir/$name.err"; then
        echo "FAIL $name: stderr does not match /$regex/:"; cat "$dir/$name.err"; fails=$((fails + 1)); return
    fi
    if [ -e "$out" ]; then
        echo "FAIL $name: a result file was left behind"; fails=$((fails + 1)); return
    fi
    echo "ok   $name: $(head -n 1 "$dir/$name.err")"
}

base=$src/tests/data/sweeps/sweep_small.toml
mk() { sed "$2" "$base" > "$dir/$1.toml"; }

printf '[experiment]\nname = "x"\nseed = 1\n[model\npreset = "llama3-8b"\n' > "$dir/malformed.toml"
expect malformed 2 'malformed\.toml:4:[0-9]+: ' -- "$prism" sweep "$dir/malformed.toml"

mk unknown_key 's/^tp = \[1, 2, 8\]/tpp = [1, 2, 8]/'
expect unknown_key 2 "unknown_key\.toml:[0-9]+:[0-9]+: .*'tpp'.*did you mean 'tp'" -- "$prism" sweep "$dir/unknown_key.toml"

mk wrong_type 's/^seed = 7/seed = "seven"/'
expect wrong_type 2 'wrong_type\.toml:[0-9]+:[0-9]+: experiment\.seed: expected an integer' -- "$prism" sweep "$dir/wrong_type.toml"

mk wrong_unit 's/^preset = "h100-sxm"/preset = "h100-sxm"\nnic_bandwidth = "80 GB"/'
expect wrong_unit 2 'wrong_unit\.toml:[0-9]+:[0-9]+: hardware\.h100\.nic_bandwidth: expected a bandwidth' -- "$prism" sweep "$dir/wrong_unit.toml"

mk empty_space 's/^pp = \[1, 2\]/pp = []/'
expect empty_space 2 'empty_space\.toml:[0-9]+:[0-9]+: space\.pp: .*empty' -- "$prism" sweep "$dir/empty_space.toml"

mk unknown_preset 's/^preset = "llama3-8b"/preset = "llama3-9b"/'
expect unknown_preset 2 'unknown_preset\.toml:[0-9]+:[0-9]+: model\.preset: .*llama3-9b.*llama3-8b' -- "$prism" sweep "$dir/unknown_preset.toml"

mk unknown_metric 's/^minimize = \["step_time_s"/minimize = ["step_tme_s"/'
expect unknown_metric 2 "unknown_metric\.toml:[0-9]+:[0-9]+: objectives\.minimize: .*'step_tme_s'.*did you mean 'step_time_s'" -- "$prism" sweep "$dir/unknown_metric.toml"

mk verify_value 's/^method = "analytic"/method = "analytic"\nverify = "mc"/'
expect verify_value 2 "verify_value\.toml:36:10: evaluation\.verify: .*'mc'" -- "$prism" sweep "$dir/verify_value.toml"

mk verify_method 's/^method = "analytic"/method = "montecarlo"\nverify = "montecarlo"/'
expect verify_method 2 'verify_method\.toml:36:10: evaluation\.verify: .*already montecarlo' -- "$prism" sweep "$dir/verify_method.toml"

sed -e 's/^method = "analytic"/method = "analytic"\nverify = "montecarlo"/' -e '/^\[objectives\]/,$d' "$base" >"$dir/verify_front.toml"
expect verify_front 2 'verify_front\.toml:36:10: evaluation\.verify: .*needs \[objectives\]' -- "$prism" sweep "$dir/verify_front.toml"

expect missing_file 2 'does_not_exist\.toml' -- "$prism" sweep "$dir/does_not_exist.toml"

# An existing output file is refused (and left untouched) unless --overwrite.
echo "precious" > "$dir/exists.h5"
"$prism" sweep "$base" -o "$dir/exists.h5" >"$dir/exists.out" 2>"$dir/exists.err"; rc=$?
if [ "$rc" = 2 ] && grep -q 'exists\.h5: file exists (use --overwrite' "$dir/exists.err" && [ "$(cat "$dir/exists.h5")" = precious ]; then
    echo "ok   exists: $(head -n 1 "$dir/exists.err")"
else
    echo "FAIL exists: exit $rc"; cat "$dir/exists.err"; fails=$((fails + 1))
fi
"$prism" sweep "$base" -o "$dir/exists.h5" --overwrite -q >/dev/null 2>"$dir/overwrite.err" \
    && echo "ok   overwrite" || { echo "FAIL overwrite"; cat "$dir/overwrite.err"; fails=$((fails + 1)); }

# Resuming a file made from another experiment is refused.
mk edited 's/^seed = 7/seed = 8/'
"$prism" sweep "$dir/edited.toml" -o "$dir/exists.h5" --resume >/dev/null 2>"$dir/edited.err"; rc=$?
if [ "$rc" = 2 ] && grep -q 'different experiment' "$dir/edited.err"; then
    echo "ok   resume_edited: $(head -n 1 "$dir/edited.err")"
else
    echo "FAIL resume_edited: exit $rc"; cat "$dir/edited.err"; fails=$((fails + 1))
fi

# Resuming a file made under another model version (older numerics) is refused, file unchanged.
cp "$dir/exists.h5" "$dir/oldmodel.h5"
/usr/bin/python3 -c "import h5py; f = h5py.File('$dir/oldmodel.h5', 'r+'); f.attrs['model_version'] = 'old'; f.close()"
sum_before=$(md5sum < "$dir/oldmodel.h5")
"$prism" sweep "$base" -o "$dir/oldmodel.h5" --resume >/dev/null 2>"$dir/oldmodel.err"; rc=$?
if [ "$rc" = 2 ] && grep -q "oldmodel\.h5: made under model version 'old', this program is '" "$dir/oldmodel.err" \
    && [ "$(md5sum < "$dir/oldmodel.h5")" = "$sum_before" ]; then
    echo "ok   resume_other_model: $(head -n 1 "$dir/oldmodel.err")"
else
    echo "FAIL resume_other_model: exit $rc"; cat "$dir/oldmodel.err"; fails=$((fails + 1))
fi

# A foreign HDF5 file and a garbage file are reported by `prism report` with their path.
/usr/bin/python3 -c "import h5py; h5py.File('$dir/foreign.h5', 'w').create_dataset('x', data=[1])"
"$prism" report "$dir/foreign.h5" >/dev/null 2>"$dir/foreign.err"; rc=$?
grep -q 'foreign\.h5: not a prism result file' "$dir/foreign.err" && [ "$rc" != 0 ] \
    && echo "ok   foreign: $(head -n 1 "$dir/foreign.err")" || { echo "FAIL foreign"; cat "$dir/foreign.err"; fails=$((fails + 1)); }
echo "garbage" > "$dir/garbage.h5"
"$prism" report "$dir/garbage.h5" >/dev/null 2>"$dir/garbage.err"; rc=$?
grep -q 'garbage\.h5: cannot open' "$dir/garbage.err" && [ "$rc" != 0 ] \
    && echo "ok   garbage: $(head -n 1 "$dir/garbage.err")" || { echo "FAIL garbage"; cat "$dir/garbage.err"; fails=$((fails + 1)); }

# --resume with --overwrite contradict each other; a non-regular output is refused untouched.
"$prism" sweep "$base" -o "$dir/exists.h5" --resume --overwrite >/dev/null 2>"$dir/both.err"; rc=$?
[ "$rc" = 2 ] && grep -q -- '--resume and --overwrite exclude each other' "$dir/both.err" \
    && echo "ok   resume_and_overwrite: $(head -n 1 "$dir/both.err")" \
    || { echo "FAIL resume_and_overwrite: exit $rc"; cat "$dir/both.err"; fails=$((fails + 1)); }
"$prism" sweep "$base" -o /dev/null --overwrite >/dev/null 2>"$dir/devnull.err"; rc=$?
[ "$rc" = 2 ] && grep -q '^prism: error: /dev/null: not a regular file' "$dir/devnull.err" && [ -c /dev/null ] \
    && echo "ok   dev_null: $(head -n 1 "$dir/devnull.err")" \
    || { echo "FAIL dev_null: exit $rc"; cat "$dir/devnull.err"; fails=$((fails + 1)); }

# A comment-only edit of the experiment does not block --resume (the hash is of the parsed
# experiment); the file keeps the text it was made from.
"$prism" sweep "$base" -o "$dir/comment.h5" --time-limit 0 -q >/dev/null 2>&1
{ echo "# a comment added after the run started"; sed 's/^seed = 7/seed = 7   # the seed/' "$base"; } > "$dir/commented.toml"
"$prism" sweep "$dir/commented.toml" -o "$dir/comment.h5" --resume -q >/dev/null 2>"$dir/comment.err"; rc=$?
[ "$rc" = 0 ] && echo "ok   comment_only_edit_resumes" \
    || { echo "FAIL comment_only_edit_resumes: exit $rc"; cat "$dir/comment.err"; fails=$((fails + 1)); }

# A variability profile file the experiment reads is part of it: a new value blocks --resume.
printf 'name = "fitted"\ngemm = {dist = "lognormal", cv = 0.03}\n' > "$dir/fitted.variability.toml"
sed 's/^method = "analytic"/method = "analytic"\n[variability]\npreset = "fitted.variability.toml"/' "$base" > "$dir/profiled.toml"
"$prism" sweep "$dir/profiled.toml" -o "$dir/profiled.h5" --time-limit 0 -q >/dev/null 2>&1
# the profile is stored in the file, as the experiment is, and the report names it
/usr/bin/python3 - "$dir/profiled.h5" "$dir/fitted.variability.toml" >"$dir/stored.out" 2>&1 <<'PY' \
    && "$prism" report "$dir/profiled.h5" --top 0 2>&1 | grep -q '^includes    fitted.variability.toml ' \
    && echo "ok   profile_stored_in_the_file" \
    || { echo "FAIL profile_stored_in_the_file"; cat "$dir/stored.out"; fails=$((fails + 1)); }
import sys, h5py
with h5py.File(sys.argv[1], "r", swmr=True) as f:
    names = [n.decode() if isinstance(n, bytes) else n for n in f.attrs["included_file_names"]]
    texts = [t.decode() if isinstance(t, bytes) else t for t in f.attrs["included_file_texts"]]
assert names == ["fitted.variability.toml"], names
assert texts == [open(sys.argv[2]).read()], texts
PY
sed -i 's/cv = 0.03/cv = 0.05/' "$dir/fitted.variability.toml"
"$prism" sweep "$dir/profiled.toml" -o "$dir/profiled.h5" --resume -q >/dev/null 2>"$dir/profiled.err"; rc=$?
[ "$rc" = 2 ] && grep -q 'profiled\.h5: .*made from a different experiment' "$dir/profiled.err" \
    && echo "ok   edited_profile_blocks_resume: $(head -n 1 "$dir/profiled.err")" \
    || { echo "FAIL edited_profile_blocks_resume: exit $rc"; cat "$dir/profiled.err"; fails=$((fails + 1)); }

# validate refuses what sweep would (file:line:col and key), quickly.
validate_refuses() {
    local name=$1 regex=$2
    "$prism" validate "$dir/$name.toml" >/dev/null 2>"$dir/$name.err"; local rc=$?
    if [ "$rc" = 2 ] && grep -Eq -- "$regex" "$dir/$name.err"; then
        echo "ok   $name: $(head -n 1 "$dir/$name.err")"
    else
        echo "FAIL $name: exit $rc"; cat "$dir/$name.err"; fails=$((fails + 1))
    fi
}
mk big_tokens 's/^total_tokens = 1.0e11/total_tokens = 1.0e300/'
validate_refuses big_tokens 'big_tokens\.toml:[0-9]+:[0-9]+: training\.total_tokens: .*more than 2\^53'
mk filtered_baseline 's/^baseline = { tp = 1, pp = 1, gpus = 16 }/baseline = { tp = 1, pp = 1, gpus = 17 }/'
validate_refuses filtered_baseline 'filtered_baseline\.toml:[0-9]+:[0-9]+: experiment\.baseline: global_batch is not a multiple'
mk same_metric 's/^method = "analytic"/method = "analytic"\nslow_deltas = [0.05, 0.050001]/'
validate_refuses same_metric "same_metric\.toml:[0-9]+:[0-9]+: evaluation\.slow_deltas: two values round to the same metric name 'p_slow_5pct'"
mk samples 's/^method = "analytic"/method = "montecarlo"\nsamples = 2000000000/'
validate_refuses samples 'samples\.toml:[0-9]+:[0-9]+: evaluation\.samples: 2000000000 is above the limit of 100000'
mk bins 's/^method = "analytic"/method = "analytic"\nhistogram = true\nhistogram_bins = 100000000/'
validate_refuses bins 'bins\.toml:[0-9]+:[0-9]+: evaluation\.histogram_bins: 100000000 is above the limit of 4096'
start=$(date +%s%N)
"$prism" validate /dev/zero >/dev/null 2>"$dir/zero.err"; rc=$?
ms=$(( ($(date +%s%N) - start) / 1000000 ))
[ "$rc" = 2 ] && grep -q '/dev/zero: larger than 1048576 bytes' "$dir/zero.err" && [ "$ms" -lt 5000 ] \
    && echo "ok   dev_zero: $(head -n 1 "$dir/zero.err") ($ms ms)" \
    || { echo "FAIL dev_zero: exit $rc after $ms ms"; cat "$dir/zero.err"; fails=$((fails + 1)); }

# eval --point reads values as the TOML does: a quantity with its unit; a bad unit is exit 2.
"$prism" eval "$base" --point "tp=2,pp=1,gpus=16,zero_stage=3,checkpoint_interval=30 min" >"$dir/point.out" 2>&1; rc=$?
[ "$rc" = 0 ] && grep -q 'ckpt=1800s' "$dir/point.out" \
    && echo "ok   eval_point_units: $(head -n 1 "$dir/point.out")" \
    || { echo "FAIL eval_point_units: exit $rc"; cat "$dir/point.out"; fails=$((fails + 1)); }
"$prism" eval "$base" --point "tp=2,checkpoint_interval=30 mins" >/dev/null 2>"$dir/point.err"; rc=$?
[ "$rc" = 2 ] && grep -q "^prism: error: --point:2:[0-9]*: point\.checkpoint_interval: unknown unit 'mins'" "$dir/point.err" \
    && echo "ok   eval_point_bad_unit: $(head -n 1 "$dir/point.err")" \
    || { echo "FAIL eval_point_bad_unit: exit $rc"; cat "$dir/point.err"; fails=$((fails + 1)); }
"$prism" eval "$base" --point "tp=8,gpus=16,global_batch=100000000" >"$dir/work.err" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q 'work limit: more than 262144 pipeline slots' "$dir/work.err" \
    && echo "ok   eval_work_limit: $(grep 'work limit' "$dir/work.err")" \
    || { echo "FAIL eval_work_limit: exit $rc"; cat "$dir/work.err"; fails=$((fails + 1)); }

# eval --point names every [space] dimension it leaves at the defaults, one line each (issue 32:
# `--point tp=2` alone silently ran dp = 1).
# (2 GPUs, no ZeRO: Llama 3 8B does not fit, exit 4)
"$prism" eval "$base" --point "tp=2" >/dev/null 2>"$dir/defaulted.err"; rc=$?
[ "$rc" = 4 ] && [ "$(grep -c '^prism: warning: --point: .* not given' "$dir/defaulted.err")" = 5 ] \
    && grep -q "^prism: warning: --point: gpus not given, using dp = 1 (2 GPUs); \[space\] gpus = \[16, 24\]" "$dir/defaulted.err" \
    && grep -q "^prism: warning: --point: hardware not given, using its \[defaults\] value; \[space\] hardware = \[\"a100\", \"h100\"\]" "$dir/defaulted.err" \
    && echo "ok   eval_point_defaulted: $(head -n 1 "$dir/defaulted.err")" \
    || { echo "FAIL eval_point_defaulted: exit $rc"; cat "$dir/defaulted.err"; fails=$((fails + 1)); }
# an infeasible point: the verdict is the first line and the exit status 4 (README, exit codes);
# Llama 3 8B without any sharding needs 18 bytes x 8e9 parameters = 134 GiB of model state alone
"$prism" eval "$base" --point "hardware=a100,gpus=16,tp=1,pp=1,microbatch=1,zero_stage=0" >"$dir/infeasible.out" 2>&1; rc=$?
[ "$rc" = 4 ] && head -n 1 "$dir/infeasible.out" | grep -q '^infeasible: memory [0-9.]* GiB > ' \
    && echo "ok   eval_point_infeasible: $(head -n 1 "$dir/infeasible.out")" \
    || { echo "FAIL eval_point_infeasible: exit $rc"; cat "$dir/infeasible.out"; fails=$((fails + 1)); }

# report checks --sort and --metrics before printing anything, with a suggestion
"$prism" report "$dir/profiled.h5" --sort step_time_p59_s >"$dir/sort.out" 2>"$dir/sort.err"; rc=$?
[ "$rc" = 2 ] && [ ! -s "$dir/sort.out" ] \
    && grep -q "^prism: error: report: --sort: unknown metric 'step_time_p59_s' in .*profiled.h5; did you mean 'step_time_p50_s'?" "$dir/sort.err" \
    && echo "ok   report_sort_unknown: $(head -n 1 "$dir/sort.err")" \
    || { echo "FAIL report_sort_unknown: exit $rc"; cat "$dir/sort.out" "$dir/sort.err"; fails=$((fails + 1)); }
"$prism" report "$dir/profiled.h5" --metrics gpus,tflops_per_gpu >"$dir/renamed.out" 2>"$dir/renamed.err"; rc=$?
[ "$rc" = 2 ] && [ ! -s "$dir/renamed.out" ] \
    && grep -q "unknown metric 'tflops_per_gpu' in .*; renamed 'megatron_tflops_per_gpu'" "$dir/renamed.err" \
    && echo "ok   report_metrics_renamed: $(head -n 1 "$dir/renamed.err")" \
    || { echo "FAIL report_metrics_renamed: exit $rc"; cat "$dir/renamed.out" "$dir/renamed.err"; fails=$((fails + 1)); }

# validate: the settings as resolved, defaults marked; a minimal Llama 3 70B experiment on
# H100 gets fused attention and SP with TP, and its memory is explained term by term: per layer
# and microbatch (10 h + 4 h + 4 h/8 + 6 f) / t bytes per token = 290,816 / 8 x 8192 tokens
# = 297,795,584 B = 0.277 GiB (Korthikanti et al., GQA and SwiGLU, fused, SP)
printf '[model]\npreset = "llama3-70b"\n[training]\nglobal_batch = 1024\n[hardware.h100]\npreset = "h100-sxm"\n[defaults]\ntp = 8\npp = 4\ngpus = 512\n' >"$dir/minimal.toml"
"$prism" validate "$dir/minimal.toml" >"$dir/validate.out" 2>&1; rc=$?
[ "$rc" = 0 ] && grep -Eq '^  \* training\.flash_attention +(= )?true +fused attention' "$dir/validate.out" \
    && grep -Eq '^  \* defaults\.sequence_parallel +(= )?tp > 1 ' "$dir/validate.out" \
    && grep -Eq '^    defaults\.tp +(= )?8$' "$dir/validate.out" \
    && grep -q '^  activations: 0\.277 GiB per layer and microbatch (fused attention, sequence parallel)' "$dir/validate.out" \
    && echo "ok   validate_resolved: $(grep -c '^  \*' "$dir/validate.out") defaults marked" \
    || { echo "FAIL validate_resolved: exit $rc"; cat "$dir/validate.out"; fails=$((fails + 1)); }

# prism metrics: every metric with its unit and meaning; with an experiment, its own schema
"$prism" metrics >"$dir/metrics.out" 2>&1; rc=$?
[ "$rc" = 0 ] && grep -Eq '^speedup_vs_baseline +1 +tokens per second / the baseline' "$dir/metrics.out" \
    && grep -Eq '^run_time_p95_days +days ' "$dir/metrics.out" \
    && grep -Eq '^time_to_target_p50_days +days ' "$dir/metrics.out" \
    && grep -Eq '^model_tflops_per_gpu +TFLOP/s ' "$dir/metrics.out" \
    && grep -Eq '^moe_a2a_exposed_s +s +MoE dispatch and combine not hidden' "$dir/metrics.out" \
    && grep -Eq '^routing_share_p95 +1 +MoE routing imbalance' "$dir/metrics.out" \
    && echo "ok   metrics_list: $(grep -c . "$dir/metrics.out") lines" \
    || { echo "FAIL metrics_list: exit $rc"; cat "$dir/metrics.out"; fails=$((fails + 1)); }
"$prism" metrics "$base" >"$dir/metrics_exp.out" 2>&1; rc=$?
[ "$rc" = 0 ] && grep -Eq '^p_slow_5pct +1 ' "$dir/metrics_exp.out" \
    && ! grep -q 'time_to_target' "$dir/metrics_exp.out" \
    && ! grep -q 'routing_share' "$dir/metrics_exp.out" \
    && echo "ok   metrics_of_experiment" \
    || { echo "FAIL metrics_of_experiment: exit $rc"; cat "$dir/metrics_exp.out"; fails=$((fails + 1)); }

echo "$fails failed"
[ "$fails" = 0 ]
