#!/usr/bin/env python3
"""Host time of eager PyTorch training layers, on a GPU machine (not part of the build or CI).

Megatron-style GPT layers (LayerNorm, QKV / output / MLP linears with bias, unfused causal
attention: baddbmm, mask, softmax, dropout, bmm; GeLU, dropout) in plain eager PyTorch, BF16,
small enough that the GPU waits on the host: forward + backward of a stack of layers, with full
activation recomputation (torch.utils.checkpoint per layer, as vTrain's Megatron-DeepSpeed runs)
and without. For each: the step's wall time (host-bound), its GPU kernels' sum and count from
the profiler, and so the host time per layer and per launched kernel. The host is this machine's
CPU, not the one of any published run. Usage: python3 bench/gpu_host_overhead.py OUT_DIR
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
dev = torch.device("cuda")


def log(*a):
    print(*a, flush=True)


class GptLayer(torch.nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.h, self.heads = h, heads
        self.ln1 = torch.nn.LayerNorm(h)
        self.qkv = torch.nn.Linear(h, 3 * h)
        self.proj = torch.nn.Linear(h, h)
        self.ln2 = torch.nn.LayerNorm(h)
        self.fc1 = torch.nn.Linear(h, 4 * h)
        self.fc2 = torch.nn.Linear(4 * h, h)

    def forward(self, x):  # x: [s, b, h] as Megatron
        s, b, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).view(s, b * self.heads, 3 * d).split(d, dim=-1)
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # [b n, s, d]
        scores = torch.baddbmm(torch.empty(b * self.heads, s, s, device=x.device, dtype=x.dtype),
                               q, k.transpose(1, 2), beta=0.0, alpha=d ** -0.5)
        mask = torch.ones(s, s, device=x.device, dtype=torch.bool).triu_(1)
        p = F.dropout(torch.softmax(scores.masked_fill(mask, -10000.0), dim=-1), 0.1, True)
        ctx = torch.bmm(p, v).transpose(0, 1).reshape(s, b, h)
        x = x + F.dropout(self.proj(ctx), 0.1, True)
        return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), 0.1, True)


def run(h, heads, layers, seq, batch, recompute):
    torch.manual_seed(0)
    blocks = torch.nn.ModuleList([GptLayer(h, heads) for _ in range(layers)]).to(dev, torch.bfloat16)
    x0 = torch.randn(seq, batch, h, device=dev, dtype=torch.bfloat16, requires_grad=True)

    def step():
        x = x0
        for blk in blocks:
            x = checkpoint(blk, x, use_reentrant=True) if recompute else blk(x)
        x.float().sum().backward()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    walls = []
    for _ in range(10):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        walls.append(time.perf_counter() - t0)
    trace = os.path.join(OUT, "host_trace.json")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace)
    ev = [e for e in json.load(open(trace))["traceEvents"] if e.get("cat") == "kernel"]
    os.remove(trace)
    gpu_s = sum(e["dur"] for e in ev) * 1e-6
    wall = statistics.median(walls)
    r = {"hidden": h, "heads": heads, "layers": layers, "seq": seq, "batch": batch,
         "recompute": recompute, "wall_s": wall, "gpu_kernels_s": gpu_s, "kernels": len(ev),
         "wall_per_layer_s": wall / layers, "wall_per_kernel_s": wall / len(ev)}
    log("  h %4d L %2d s %4d b %d recompute %d: step %.2f ms, kernels %d (%.2f ms on the GPU): "
        "%.0f us per layer, %.1f us per kernel" % (
            h, layers, seq, batch, recompute, 1e3 * wall, len(ev), 1e3 * gpu_s,
            1e6 * wall / layers, 1e6 * wall / len(ev)))
    del blocks, x0
    torch.cuda.empty_cache()
    return r


t0 = time.time()
res = {"torch": torch.__version__, "cpu": open("/proc/cpuinfo").read().split("model name")[1]
       .split("\n")[0].strip(": \t") if os.path.exists("/proc/cpuinfo") else "?", "runs": []}
log("cpu: %s" % res["cpu"])
for h, heads, layers, seq, batch, rc in ((1024, 16, 12, 1024, 1, True), (1024, 16, 12, 1024, 1, False),
                                         (1024, 16, 24, 1024, 1, True), (512, 8, 12, 512, 1, True),
                                         (2048, 16, 12, 1024, 1, True), (1024, 16, 12, 2048, 4, True),
                                         (4096, 32, 4, 2048, 4, True)):
    try:
        res["runs"].append(run(h, heads, layers, seq, batch, rc))
    except Exception as e:  # noqa: BLE001
        log("  failed: %s" % str(e)[:300])
    with open(os.path.join(OUT, "host_overhead.json"), "w") as fh:
        json.dump(res, fh, indent=1)
log("done in %.0f s" % (time.time() - t0))
