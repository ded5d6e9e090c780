#!/usr/bin/env python3
"""A first comparison of prism's MoE model with Megatron-Bridge's H100 rows (issue 36).

Reads tests/data/reference/moe/megatron_bridge_h100.csv, writes one experiment per row into a
scratch directory, evaluates it with `prism eval` and prints the predicted and measured step
times. Nothing is fitted: every constant is the h100-sxm preset's.

    python3 scripts/moe_bridge_compare.py build/explorer/prism [--overlap] [--dispatcher NAME]
"""

import argparse
import csv
import os
import re
import subprocess
import sys
import tempfile

PRESETS = {
    "DeepSeekV3": "deepseek-v3",
    "Qwen3_235B_a22B": "qwen3-235b-a22b",
    "Qwen3_30B_a3B": "qwen3-30b-a3b",
}

# Pipeline splits prism can express for the published pp / vp (Megatron-Bridge's recipes use
# layouts or the embedding / loss accounting): DeepSeek-V3's 61 layers as 5 + 6 x 8 + 8.
SPLITS = {
    "deepseek-v3": "first_stage_layers = 5\nlast_stage_layers = 8\n",
    "qwen3-235b-a22b": "account_for_embedding_in_pipeline_split = true\n"
    "account_for_loss_in_pipeline_split = true\n",
    "qwen3-30b-a3b": "",
}


def experiment(row, dispatcher, overlap, interleave):
    preset = PRESETS[row["model"]]
    gpus, tp, pp, ep = (int(row[k]) for k in ("gpus", "tp", "pp", "ep"))
    cp = int(row["cp"] or 1)
    split = SPLITS[preset] if pp > 1 else ""
    # prism's first / last stage split has no interleaved form: DeepSeek-V3 runs as 1F1B
    vp = int(row["vp"]) if row["vp"] and interleave and preset != "deepseek-v3" else 1
    return f"""[experiment]
name = "bridge-{row['model']}-{row['container']}"
[model]
preset = "{preset}"
[training]
global_batch = {int(row['gbs'])}
precision = "fp8"
flash_attention = true
moe_dispatcher = "{dispatcher}"
moe_a2a_overlap = {"true" if overlap else "false"}
{split}[hardware.h100]
preset = "h100-sxm"
[defaults]
gpus = {gpus}
tp = {tp}
pp = {pp}
cp = {cp}
ep = {ep}
microbatch = {int(row['mbs'])}
zero_stage = 1
interleave = {vp}
placement = "tp-cp-dp-pp"
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prism")
    parser.add_argument("--overlap", action="store_true", help="moe_a2a_overlap = true")
    parser.add_argument("--dispatcher", default="alltoall")
    parser.add_argument("--no-interleave", action="store_true")
    parser.add_argument(
        "--data",
        default=os.path.join(
            os.path.dirname(__file__), "..", "tests", "data", "reference", "moe",
            "megatron_bridge_h100.csv"))
    args = parser.parse_args()
    rows = [r for r in csv.DictReader(open(args.data)) if r["variant"] == "main"]
    errors = []
    print(f"{'container':10} {'model':16} {'gpus':>5} {'tp':>3} {'pp':>3} {'vp':>3} {'ep':>3} "
          f"{'mb':>3} {'gbs':>5} {'measured_s':>10} {'prism_s':>9} {'error':>7}")
    with tempfile.TemporaryDirectory() as scratch:
        for i, row in enumerate(rows):
            path = os.path.join(scratch, f"row{i}.toml")
            with open(path, "w") as f:
                f.write(experiment(row, args.dispatcher, args.overlap, not args.no_interleave))
            out = subprocess.run([args.prism, "eval", path], capture_output=True, text=True)
            m = re.search(r"^  step time\s+([0-9.eE+-]+) ms", out.stdout, re.M)
            measured = float(row["step_time_s_derived"])
            if not m:
                print(f"{row['container']:10} {row['model']:16} failed: "
                      f"{(out.stdout + out.stderr).strip().splitlines()[-1]}")
                continue
            predicted = float(m.group(1)) / 1e3
            infeasible = "infeasible" in out.stdout
            err = predicted / measured - 1
            errors.append((row["model"], err))
            print(f"{row['container']:10} {row['model']:16} {row['gpus']:>5} {row['tp']:>3} "
                  f"{row['pp']:>3} {row['vp'] or '-':>3} {row['ep']:>3} {row['mbs']:>3} "
                  f"{row['gbs']:>5} {measured:10.2f} {predicted:9.2f} {err:+7.1%}{'  (over memory)' if infeasible else ''}")
    for model in PRESETS:
        e = [abs(x) for name, x in errors if name == model]
        if e:
            print(f"{model:16} rows {len(e):2}  mean |error| {sum(e) / len(e):6.1%}  "
                  f"max {max(e):6.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
