#!/usr/bin/env bash
# Size and generation time of the study page (`prism report FILE --html OUT`) for three studies:
# the quickstart (288 rows), the GPT-3 175B / 1024-A100 space
# (configs/examples/gpt3_175b_1024_space.toml, 19,116 rows) and a study of ~10^5 rows (98,928:
# the quickstart's model on a larger space written here: 15 GPU counts x tp 2-8 x pp 1-8 x
# microbatch 1-4 x ZeRO 1/3 x recompute x 7 global batches x 18 checkpoint intervals, of which
# the batch filter keeps 98,928). Prints the sweep's wall time, then per study the page's size
# and the wall time and peak RSS of `prism report --html` (best of REPEAT), and, with CHECK=1,
# whether headless chromium draws it (tests/python/check_page.py) and how long that takes.
#
#   bash bench/page_bench.sh [PRISM] [OUTDIR] [REPEAT=3]
set -euo pipefail
prism=${1:-build/explorer/prism}
out=${2:-$(mktemp -d)}
repeat=${3:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
/usr/bin/python3 - "$here/configs/quickstart.toml" "$out/large.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
space = """[space]
gpus = [%s]
tp = [2, 4, 8]
pp = [1, 2, 4, 8]
microbatch = [1, 2, 4]
zero_stage = [1, 3]
recompute = ["selective", "full"]
global_batch = [768, 1024, 1536, 2048, 3072, 4096, 6144]
checkpoint_interval = [%s]
""" % (", ".join(str(128 * k) for k in range(2, 17)),
       ", ".join(f'"{m} min"' for m in (10, 15, 20, 25, 30, 40, 45, 50, 60, 75, 90, 105, 120,
                                        150, 180, 210, 240, 300)))
text = re.sub(r"\[space\]\n(.*?\n)\n", space + "\n", text, flags=re.S)
text = text.replace('name = "quickstart"', 'name = "page-bench-1e5"')
open(sys.argv[2], "w").write(text)
PY
declare -A toml=([quickstart]=$here/configs/quickstart.toml
                 [gpt3]=$here/configs/examples/gpt3_175b_1024_space.toml
                 [large]=$out/large.toml)
for study in quickstart gpt3 large; do
    t0=$(date +%s.%N)
    "$prism" sweep "${toml[$study]}" -o "$out/$study.h5" -q --overwrite
    rows=$(/usr/bin/python3 -c "import h5py,sys; print(h5py.File(sys.argv[1]).attrs['rows_committed'])" "$out/$study.h5")
    echo "$study: $rows rows, sweep $(echo "$(date +%s.%N) - $t0" | bc) s"
    best=""
    for _ in $(seq "$repeat"); do
        /usr/bin/time -f "%e %M" -o "$out/time.txt" "$prism" report "$out/$study.h5" --html "$out/$study.html" >/dev/null
        read -r wall rss <"$out/time.txt"
        if [ -z "$best" ] || [ "$(echo "$wall < $best" | bc)" = 1 ]; then best=$wall best_rss=$rss; fi
    done
    size=$(stat -c %s "$out/$study.html")
    echo "$study: page $(echo "scale=2; $size / 1000000" | bc) MB, report --html $best s (best of $repeat), peak RSS $((best_rss / 1024)) MiB"
    if [ "${CHECK:-0}" = 1 ]; then
        mkdir -p "$out/$study.check"
        t0=$(date +%s.%N)
        /usr/bin/python3 "$here/tests/python/check_page.py" "$out/$study.html" "$out/$study.check" \
            --panels front,cdf,breakdown --tables top-table | tail -1
        echo "$study: chromium check $(echo "$(date +%s.%N) - $t0" | bc) s (two headless loads)"
    fi
done
