#!/usr/bin/env bash
# A full disk or a failing disk under a sweep: exit 1 with ONE line naming the file, the
# operating system's reason and the committed rows (no HDF5 internals); the file keeps every
# committed row, `prism status` says it is resumable (3), and --resume completes it to the same
# content as an undisturbed run.
# Faults: tests/support/fail_writes.c (LD_PRELOAD, a disk that fills up or fails; ctest sets
# PRISM_FAIL_WRITES_LIB), and, as root where mount(8) is allowed, a tmpfs that is too small.
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 mpiexec=$2 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir"
exp=$src/tests/data/sweeps/sweep_small.toml
compare=$src/tests/cli/compare_results.py
lib=${PRISM_FAIL_WRITES_LIB:-}
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
line_re='^prism: error: .*\.h5: (no space left on device; [0-9]+ rows committed, continue with --resume after freeing space|input/output error; [0-9]+ rows committed, continue with --resume)$'

"$prism" sweep "$exp" -o "$dir/ref.h5" -q || { echo "FAIL reference run"; exit 1; }

# Checks a run that hit the fault ($1 name, $2 exit status, $3 its stderr, $4 its file), then
# resumes the file without the fault and compares it with the reference.
check_and_resume() {
    local name=$1 rc=$2 err=$3 file=$4
    if [ "$rc" != 1 ]; then fail "$name: exit $rc, expected 1"; cat "$err"; return; fi
    if [ "$(wc -l < "$err")" != 1 ] || ! grep -Eq "$line_re" "$err"; then
        fail "$name: not one clear line:"; cat "$err"; return
    fi
    if grep -Eq '0x|sblock|o_flags|=' "$err"; then fail "$name: library internals: $(cat "$err")"; fi
    "$prism" status "$file" > "$dir/$name.status" 2>&1; local src=$?
    [ "$src" = 3 ] || { fail "$name: prism status exited $src, expected 3"; cat "$dir/$name.status"; }
    "$prism" sweep "$exp" -o "$file" --resume -q > "$dir/$name.resume" 2>&1 \
        || { fail "$name: resume exited $?"; cat "$dir/$name.resume"; return; }
    /usr/bin/python3 "$compare" "$dir/ref.h5" "$file" > "$dir/$name.compare" 2>&1 \
        && echo "ok   $name: $(cat "$err" | sed 's/.*\.h5: //'); resumed: identical" \
        || { fail "$name: resumed file differs"; cat "$dir/$name.compare"; }
}

if [ -z "$lib" ] || [ ! -f "$lib" ]; then
    echo "skip fault injection: PRISM_FAIL_WRITES_LIB not set (run through ctest)"
else
    # Budgets (bytes the file may reach, or write for EIO) that fail at the first commit, in
    # the middle of the sweep and near its end; one run under mpiexec (every rank exits 1).
    for spec in "ENOSPC 170000 1" "ENOSPC 250000 1" "ENOSPC 290000 2" "EIO 150000 1" \
                "EIO 230000 1"; do
        set -- $spec
        name="$1-$2-np$3" file="$dir/$1-$2.h5"
        if [ "$3" = 1 ]; then launch=(); else launch=("$mpiexec" -n "$3"); fi
        LD_PRELOAD=$lib PRISM_FAIL_WRITES_PATH="$1-$2.h5" PRISM_FAIL_WRITES_AFTER=$2 \
            PRISM_FAIL_WRITES_ERRNO=$1 PRISM_TEST_POINT_DELAY_MS=3 \
            ${launch[@]+"${launch[@]}"} "$prism" sweep "$exp" -o "$file" -q --flush-interval 0.02 \
            2> "$dir/$name.err"
        check_and_resume "$name" $? "$dir/$name.err" "$file"
    done
    # A disk that is full before the file exists: one line, and no file left behind.
    LD_PRELOAD=$lib PRISM_FAIL_WRITES_PATH=early.h5 PRISM_FAIL_WRITES_AFTER=4096 \
        "$prism" sweep "$exp" -o "$dir/early.h5" -q 2> "$dir/early.err"; rc=$?
    if [ "$rc" = 1 ] && [ "$(wc -l < "$dir/early.err")" = 1 ] \
        && grep -q 'early\.h5: cannot create: no space left on device$' "$dir/early.err" \
        && [ ! -e "$dir/early.h5" ] && [ -z "$(ls -A "$dir" | grep '^\.early')" ]; then
        echo "ok   early: $(cat "$dir/early.err")"
    else
        fail "early: exit $rc"; cat "$dir/early.err"; ls -la "$dir"
    fi
fi

# A real file system that fills up in the middle of the sweep: a 260 KiB tmpfs (as root where mount is allowed).
mkdir -p "$dir/mnt"
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=260k tmpfs "$dir/mnt" 2>/dev/null; then
    PRISM_TEST_POINT_DELAY_MS=3 "$prism" sweep "$exp" -o "$dir/mnt/full.h5" -q \
        --flush-interval 0.02 2> "$dir/tmpfs.err"; rc=$?
    cp "$dir/mnt/full.h5" "$dir/tmpfs.h5" 2>/dev/null
    umount "$dir/mnt"
    check_and_resume tmpfs "$rc" "$dir/tmpfs.err" "$dir/tmpfs.h5"
else
    echo "skip tmpfs: not root, or mount(8) is not permitted here"
fi

echo "$fails failed"
[ "$fails" = 0 ]
