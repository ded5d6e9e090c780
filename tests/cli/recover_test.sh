#!/usr/bin/env bash
# Damaged result files: a file cut short at several sizes is diagnosed by `prism status` (exit 1)
# and `--resume` (exit 2) with the way forward; `prism recover` saves the committed rows that
# read back whole into a new file, which --resume completes to the same content as an
# undisturbed run. A file with nothing to save says to start again with --overwrite.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
compare=$src/tests/cli/compare_results.py
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
# 384 rows in chunks of 64 (sweep_small with 8 learning rates).
exp=$dir/sweep.toml
sed 's/^zero_stage = \[0, 3\]/zero_stage = [0, 3]\nlearning_rate = [1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4, 7e-4, 8e-4]/' \
    "$src/tests/data/sweeps/sweep_small.toml" > "$exp"
"$prism" sweep "$exp" -o "$dir/ref.h5" -q || { echo "FAIL reference run"; exit 1; }
# The file to damage: written in many commits (each commit's rows lie together in the file, as
# in any long sweep; a sweep done in one commit stores column after column, and a cut file of
# that kind keeps no complete row).
PRISM_TEST_POINT_DELAY_MS=3 "$prism" sweep "$exp" -o "$dir/whole.h5" -q --flush-interval 0.05 \
    || { echo "FAIL run in many commits"; exit 1; }
size=$(stat -c %s "$dir/whole.h5")
partial=0

for percent in 60 80 95 99; do
    cut=$((size * percent / 100)) name=cut$percent
    cp "$dir/whole.h5" "$dir/$name.h5" && truncate -s "$cut" "$dir/$name.h5"
    "$prism" status "$dir/$name.h5" > "$dir/$name.status" 2>&1; rc=$?
    grep -q "$name\.h5: damaged: cut short: $cut of $size bytes; save the committed rows that read back whole with \`prism recover" "$dir/$name.status" && [ "$rc" = 1 ] \
        || { fail "$name: status exit $rc"; cat "$dir/$name.status"; }
    "$prism" sweep "$exp" -o "$dir/$name.h5" --resume -q > "$dir/$name.resume" 2>&1; rc=$?
    grep -q "$name\.h5: damaged: cut short" "$dir/$name.resume" && [ "$rc" = 2 ] \
        || { fail "$name: --resume exit $rc"; cat "$dir/$name.resume"; }
    "$prism" recover "$dir/$name.h5" -o "$dir/$name.rec.h5" > "$dir/$name.recover" 2>&1; rc=$?
    [ "$rc" = 0 ] || { fail "$name: recover exit $rc"; cat "$dir/$name.recover"; continue; }
    grep -Eq "rec\.h5: [1-9][0-9]* of 384 committed rows" "$dir/$name.recover" \
        && ! grep -q ": 384 of 384" "$dir/$name.recover" && partial=$((partial + 1))
    "$prism" status "$dir/$name.rec.h5" > /dev/null 2>&1; rc=$?
    [ "$rc" = 3 ] || fail "$name: the recovered file's status exit $rc, expected 3"
    "$prism" sweep "$exp" -o "$dir/$name.rec.h5" --resume -q > "$dir/$name.rec.resume" 2>&1 \
        || { fail "$name: resume of the recovered file exit $?"; cat "$dir/$name.rec.resume"; continue; }
    /usr/bin/python3 "$compare" "$dir/ref.h5" "$dir/$name.rec.h5" > "$dir/$name.compare" 2>&1 \
        && echo "ok   $name: $(sed "s|$dir/||g; s/; continue.*//" "$dir/$name.recover"); resumed: identical" \
        || { fail "$name: recovered and resumed file differs"; cat "$dir/$name.compare"; }
done

[ "$partial" -gt 0 ] || fail "no cut saved some rows but not all"

# Nothing to save: an empty file, a text file.
: > "$dir/empty.h5"
echo "not HDF5" > "$dir/text.h5"
for name in empty text; do
    "$prism" status "$dir/$name.h5" > "$dir/$name.status" 2>&1; rc=$?
    grep -q "nothing can be saved: start again with \`prism sweep EXPERIMENT.toml -o .*$name\.h5 --overwrite\`" "$dir/$name.status" && [ "$rc" = 1 ] \
        && echo "ok   $name: $(sed "s|$dir/||g" "$dir/$name.status")" \
        || { fail "$name: status exit $rc"; cat "$dir/$name.status"; }
    "$prism" recover "$dir/$name.h5" -o "$dir/$name.rec.h5" > "$dir/$name.recover" 2>&1; rc=$?
    [ "$rc" = 1 ] && [ ! -e "$dir/$name.rec.h5" ] || { fail "$name: recover exit $rc"; cat "$dir/$name.recover"; }
done
"$prism" recover "$dir/ref.h5" -o "$dir/ref.h5" > "$dir/self.out" 2>&1; rc=$?
[ "$rc" = 2 ] && grep -q "is the damaged file itself" "$dir/self.out" || { fail "recover onto itself: exit $rc"; cat "$dir/self.out"; }

echo "$fails failed"
[ "$fails" = 0 ]
