#!/usr/bin/env bash
# Issue 33, item 14: files of result format 1 (older prism). `status` said "continue with
# --resume", which refuses them (they need `recover`), and their counts were not checked
# ("1000000000000 of 960 indices processed", exit 0). A format-2 file is rewritten by h5py into
# format 1's attributes (format_version 1, the commit as next_index / rows_committed).
# Arguments: PRISM MPIEXEC N SCRATCH SOURCE_DIR
set -uo pipefail
prism=$1 dir=$4 src=$5
rm -rf "$dir" && mkdir -p "$dir" && cd "$dir" || exit 1
fails=0
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
"$prism" sweep "$src/tests/data/sweeps/sweep_small.toml" -o v2.h5 -q || { echo "FAIL sweep"; exit 1; }
as_format1() {  # IN OUT STATUS NEXT_INDEX
    cp "$1" "$2"
    /usr/bin/python3 - "$2" "$3" "$4" <<'PY'
import sys, h5py, numpy as np
path, status, next_index = sys.argv[1], sys.argv[2], int(sys.argv[3])
with h5py.File(path, "r+") as f:
    rows = int(f["points/index"].shape[0])
    f.attrs["format_version"] = np.int64(1)
    f.attrs["status"] = status
    f.attrs["next_index"] = np.uint64(next_index)
    f.attrs["rows_committed"] = np.uint64(min(rows, next_index))
    if "commit" in f.attrs:
        del f.attrs["commit"]
PY
}
as_format1 v2.h5 interrupted.h5 interrupted 60
"$prism" status interrupted.h5 >interrupted.out 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "made in result format 1 by an older prism, which cannot be continued as it is: convert it with \`prism recover interrupted.h5 -o NEW.h5\`, then continue NEW.h5 with --resume" interrupted.out &&
    ! grep -q "its writer stopped without closing it: continue with --resume" interrupted.out \
    && echo "ok   an interrupted format-1 file: status says recover, exit 1" \
    || fail "interrupted format 1: exit $rc: $(cat interrupted.out)"
"$prism" sweep "$src/tests/data/sweeps/sweep_small.toml" -o interrupted.h5 --resume -q >resume.out 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "prism recover" resume.out || fail "--resume of format 1: exit $rc: $(cat resume.out)"
as_format1 v2.h5 huge.h5 interrupted 1000000000000
"$prism" status huge.h5 >huge.out 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "damaged: its counts do not add up (rows_committed [0-9]*, next_index 1000000000000" huge.out \
    && echo "ok   format-1 counts past the space: damaged, exit 1" \
    || fail "format 1 with next_index 1e12: exit $rc: $(cat huge.out)"
exit "$fails"
