#!/usr/bin/env bash
# Issue 35: `prism steps fit --runs-from RUNS.toml` (groups of runs at several scales, paths
# relative to the manifest) and `--hiccups` on the Eos-dfw Llama 3.1 405B runs: the periodic
# event at step 57-59 of every 512-GPU run is found and left out, each group gets an in-sample
# and a left-out KS, the profile loads back; bad manifests are refused with file:line:col.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir/m" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
ok() { echo "ok   $*"; }
expect() {
    local code=$1 name=$2 pattern=$3
    shift 3
    "$@" >"$name.out" 2>&1
    local rc=$?
    if [ "$rc" = "$code" ] && grep -Eq -- "$pattern" "$name.out"; then ok "$name"; else
        fail "$name: exit $rc (want $code): $(head -c 600 "$name.out")"
    fi
}
cp "$src"/configs/examples/mlperf/eos_dfw_h100_{512,8192}.toml m/
cp "$src"/tests/data/steps/mlperfv50_NVIDIA_eos-dfw_*.csv m/
{
    echo '[[group]]'
    echo 'experiment = "eos_dfw_h100_512.toml"'
    echo "runs = [$(cd m && ls mlperfv50_NVIDIA_eos-dfw_n64_*.csv | sed 's/.*/"&"/' | paste -sd,)]"
    echo '[[group]]'
    echo 'experiment = "eos_dfw_h100_8192.toml"'
    echo "runs = [$(cd m && ls mlperfv50_NVIDIA_eos-dfw_n1024_*.csv | sed 's/.*/"&"/' | paste -sd,)]"
} >m/runs.toml

expect 0 groups_fit "group left out of the fit" \
    "$prism" steps fit --runs-from m/runs.toml -o both.toml --hiccups
grep -Eq "periodic event same_index_(56|57|58|59): every 230 steps" groups_fit.out &&
    ok groups_periodic || fail "groups_periodic: $(grep periodic groups_fit.out)"
[ "$(grep -Ec '^eos_dfw_h100_(512|8192)\.toml .* +[0-9.]+ +[0-9.]+ *$' groups_fit.out)" = 2 ] &&
    ok groups_two_rows || fail "groups_two_rows: $(tail -5 groups_fit.out)"
expect 0 groups_profile_loads "KS shape" "$prism" steps compare \
    m/mlperfv50_NVIDIA_eos-dfw_n1024_*.csv --experiment m/eos_dfw_h100_8192.toml \
    --variability both.toml

# --stalls (src/fit/stall_fit.hpp): 20 ms stalls flatten the two scales' medians only by
# lengthening every step (~90% at 64 nodes): refused, the profile written without them and the
# finding in its header; 1 s stalls explain the growth (0.2% at 64 nodes) and are written
expect 0 stalls_not_stall_like "not written \(stall_fraction 0\)" \
    "$prism" steps fit --runs-from m/runs.toml -o stalls20.toml --stalls "20 ms"
if grep -q '^stall_fraction' stalls20.toml || ! grep -q '^#   not written' stalls20.toml; then
    fail "stalls_not_written: $(grep -n stall stalls20.toml | head -3)"
else ok stalls_not_written; fi
expect 0 stalls_written "stalls of 1000 ms \(given\): stalled fraction 0.000137" \
    "$prism" steps fit --runs-from m/runs.toml -o stalls1s.toml --stalls "1 s"
grep -q '^stall_fraction = 0.000137' stalls1s.toml && grep -q '^stall_duration = 1 ' stalls1s.toml &&
    ok stalls_keys || fail "stalls_keys: $(grep -n '^stall' stalls1s.toml)"
# compare with it says what the stalls add: once a step, the largest of 64 replicas of 16 nodes
expect 0 stalls_profile_loads "^stalls \(0.000137 of a node's time, 1000 ms each\): 1 synchronization a step among 64 members of 16 nodes: \+[0-9.]+ ms mean" \
    "$prism" steps compare m/mlperfv50_NVIDIA_eos-dfw_n1024_*.csv \
    --experiment m/eos_dfw_h100_8192.toml --variability stalls1s.toml
expect 2 stalls_bad_duration "--stalls 'fast'" \
    "$prism" steps fit --runs-from m/runs.toml -o x.toml --stalls fast
expect 2 stalls_zero_duration "--stalls '0 ms': one stall's duration must be positive" \
    "$prism" steps fit --runs-from m/runs.toml -o x.toml --stalls "0 ms"
expect 2 stalls_need_groups "--stalls needs --runs-from" \
    "$prism" steps fit m/mlperfv50_NVIDIA_eos-dfw_n64_ngc25.01_nemo_llama31_405b_result_0.csv \
    --experiment m/eos_dfw_h100_512.toml -o x.toml --stalls "20 ms"

printf '[[group]]\nexperiment = "eos_dfw_h100_512.toml"\nruns = []\n' >m/empty.toml
expect 2 groups_empty_runs "m/empty.toml:3:8: group\[0\].runs: empty list" \
    "$prism" steps fit --runs-from m/empty.toml -o x.toml
printf '[[group]]\nexperiment = "eos_dfw_h100_512.toml"\nrun = ["a.csv"]\n' >m/typo.toml
expect 2 groups_unknown_key "m/typo.toml:3:1: .*run" \
    "$prism" steps fit --runs-from m/typo.toml -o x.toml
expect 2 groups_and_runs "give no RUNS or --experiment with it" \
    "$prism" steps fit m/a.csv --runs-from m/runs.toml -o x.toml
expect 2 groups_neither "give the runs and --experiment EXP.toml, or --runs-from RUNS.toml" \
    "$prism" steps fit -o x.toml

[ "$fails" = 0 ] && echo "all passed" || { echo "$fails failed"; exit 1; }
