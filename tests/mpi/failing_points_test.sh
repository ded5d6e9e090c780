#!/usr/bin/env bash
# Points whose evaluation throws: with on_error = "skip" the sweep finishes and lists them in
# the file and the report; with "abort" it stops with the point's index in the message and a
# resumable file whose --resume completes it. Failures are injected with the test-only
# environment variable PRISM_FAULT_INJECT_INDICES (read by every rank).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 n=$3 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
compare=$src/tests/cli/compare_results.py
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
run() { "$mpiexec" -n "$n" "$prism" "$@"; }
py() { /usr/bin/python3 -c "$@"; }

skip=$src/tests/data/sweeps/sweep_small.toml
sed 's/^on_error = "skip"/on_error = "abort"/' "$skip" > "$dir/abort.toml"

run sweep "$skip" -o "$dir/ref.h5" -q || { echo "FAIL reference"; exit 1; }
# Three evaluated (not filtered) indices: rows 3, 10 and 25 of the reference.
bad=$(py "import h5py; i=h5py.File('$dir/ref.h5','r')['points/index'][()]; print(','.join(str(i[k]) for k in (3, 10, 25)))")
first=${bad%%,*}
echo "     injecting failures at indices $bad"

# skip: completes, failures recorded as rows with status failed and in /failures.
PRISM_FAULT_INJECT_INDICES=$bad run sweep "$skip" -o "$dir/skip.h5" -q >"$dir/skip.log" 2>&1; rc=$?
[ "$rc" = 0 ] || { fail "skip: exit $rc"; cat "$dir/skip.log"; }
py "
import h5py, numpy as np
f = h5py.File('$dir/skip.h5', 'r'); r = h5py.File('$dir/ref.h5', 'r')
bad = [int(x) for x in '$bad'.split(',')]
assert f.attrs['status'] == 'complete', f.attrs['status']
assert sorted(f['failures/index'][()].tolist()) == bad, f['failures/index'][()]
msgs = [m.decode() if isinstance(m, bytes) else m for m in f['failures/message'][()]]
assert all('injected failure at index' in m for m in msgs), msgs
idx = f['points/index'][()]
assert np.array_equal(idx, r['points/index'][()]), 'same rows as the reference'
status = f['points/status'][()]
failed_code = h5py.check_enum_dtype(f['points/status'].dtype)['failed']
assert sorted(idx[status == failed_code].tolist()) == bad
ok = ~np.isin(idx, bad)
assert np.array_equal(f['metrics/step_time_s'][()][ok], r['metrics/step_time_s'][()][ok])
assert np.isnan(f['metrics/step_time_s'][()][~ok]).all()
print('ok   skip: 3 failed rows recorded, other rows equal to the reference')
" || fail "skip: file content"
"$prism" report "$dir/skip.h5" >"$dir/skip.report" 2>&1
grep -q ", 3 failed; " "$dir/skip.report" && grep -q "failed    index $first: injected failure" "$dir/skip.report" \
    && echo "ok   skip: the report lists the failures" || { fail "skip: report"; cat "$dir/skip.report"; }

# abort: exit 1 naming the point, file resumable up to the failing index.
PRISM_FAULT_INJECT_INDICES=$bad run sweep "$dir/abort.toml" -o "$dir/abort.h5" -q >"$dir/abort.log" 2>&1; rc=$?
[ "$rc" = 1 ] || fail "abort: exit $rc, expected 1"
grep -q "point $first (.*) failed and on_error = \"abort\": injected failure" "$dir/abort.log" \
    && echo "ok   abort: $(grep 'on_error' "$dir/abort.log")" || { fail "abort: message"; cat "$dir/abort.log"; }
py "
import h5py
f = h5py.File('$dir/abort.h5', 'r')
assert f.attrs['status'] == 'failed', f.attrs['status']
assert int(f.attrs['next_index']) == $first, f.attrs['next_index']
assert (f['points/index'][()] < $first).all()
print('ok   abort: file status failed, next_index', $first)
" || fail "abort: file"
run sweep "$dir/abort.toml" -o "$dir/abort.h5" --resume -q >"$dir/abort.resume.log" 2>&1 \
    || { fail "abort: resume exit $?"; cat "$dir/abort.resume.log"; }
run sweep "$dir/abort.toml" -o "$dir/abort_ref.h5" -q
/usr/bin/python3 "$compare" "$dir/abort_ref.h5" "$dir/abort.h5" && echo "ok   abort: resumed file equals an uninterrupted run" \
    || fail "abort: resumed content differs"

echo "$fails failed"
[ "$fails" = 0 ]
