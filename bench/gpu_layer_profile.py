#!/usr/bin/env python3
"""GEMMs inside a training step against the same GEMMs alone, on one GPU (a GPU machine only).

Not part of the build or of CI. Builds Llama-3-8B-shaped decoder layers in plain PyTorch (BF16
weights, RMSNorm, fused QKV, cuDNN causal attention (GQA's K / V repeated to every head), SwiGLU MLP; no RoPE, no optimizer),
runs forward + backward steps under torch.profiler, and sums the step's GPU kernels by class
(GEMM, attention, other) from the exported trace. Then times each of the layer's GEMM shapes
alone (forward, dgrad, wgrad). It tells whether the GEMMs of a step run at their isolated rate
(docs/calibration.md, "Kernels measured on an H200": the GEMM curve's end-to-end half size).
Usage: python3 bench/gpu_layer_profile.py OUT_DIR
"""
import json
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
dev = torch.device("cuda")
H, HEADS, KV, FFN, D = 4096, 32, 8, 14336, 128
result = {}


def log(*a):
    print(*a, flush=True)


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.n1 = torch.nn.RMSNorm(H)
        self.qkv = torch.nn.Linear(H, H + 2 * KV * D, bias=False)
        self.o = torch.nn.Linear(H, H, bias=False)
        self.n2 = torch.nn.RMSNorm(H)
        self.up = torch.nn.Linear(H, 2 * FFN, bias=False)
        self.down = torch.nn.Linear(FFN, H, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        q, k, v = self.qkv(self.n1(x)).split([H, KV * D, KV * D], dim=-1)
        q = q.view(b, s, HEADS, D).transpose(1, 2)
        k = k.view(b, s, KV, D).transpose(1, 2)
        v = v.view(b, s, KV, D).transpose(1, 2)
        k = k.repeat_interleave(HEADS // KV, dim=1)  # GQA as MHA: the same FLOPs per query head
        v = v.repeat_interleave(HEADS // KV, dim=1)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, H))
        g, u = self.up(self.n2(x)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


def gemm_shapes(tokens):
    """(name, m, n, k) of one layer's GEMMs: forward y = x W^T, dgrad dx = dy W, wgrad dy^T x."""
    out = []
    for name, n_out, n_in in (("qkv", H + 2 * KV * D, H), ("o", H, H), ("up", 2 * FFN, H),
                              ("down", H, FFN)):
        out += [(name + ".fwd", tokens, n_out, n_in), (name + ".dgrad", tokens, n_in, n_out),
                (name + ".wgrad", n_out, n_in, tokens)]
    return out


def classify(name):
    low = name.lower()
    if any(t in low for t in ("sdpa", "fmha", "flash", "attn", "cudnn_generated")):
        return "attention"
    if any(t in low for t in ("gemm", "nvjet", "xmma", "cutlass", "cublas")):
        return "gemm"
    return "other"


def run(layers, batch, seq):
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Layer() for _ in range(layers)]).to(dev, torch.bfloat16)
    x = torch.randn(batch, seq, H, device=dev, dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn_like(x)

    def step():
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            model(x).backward(g)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        step()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) / 1e3)
    trace = os.path.join(OUT, "trace_%d_%d.json" % (batch, seq))
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            step()
        torch.cuda.synchronize()
    prof.export_chrome_trace(trace)
    events = json.load(open(trace))["traceEvents"]
    os.remove(trace)
    sums, names = {"gemm": 0.0, "attention": 0.0, "other": 0.0}, {}
    for ev in events:
        if ev.get("cat") != "kernel":
            continue
        c = classify(ev["name"])
        sums[c] += ev["dur"] * 1e-6 / 3
        names[ev["name"][:90]] = c
    tokens = batch * seq
    gemm_flops = 3 * sum(2.0 * m * n * k for _, m, n, k in gemm_shapes(tokens)[::3]) * layers
    alone = []
    for name, m, n, k in gemm_shapes(tokens):
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
        b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
        for _ in range(3):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            torch.matmul(a, b)
        e.record()
        e.synchronize()
        t = s.elapsed_time(e) / 1e3 / 20
        alone.append({"gemm": name, "m": m, "n": n, "k": k, "s": t,
                      "tflops": 2.0 * m * n * k / t / 1e12})
    alone_s = sum(r["s"] for r in alone) * layers
    r = {"layers": layers, "batch": batch, "seq": seq, "step_s": statistics.median(times),
         "kernel_s": sums, "gemm_flops": gemm_flops,
         "gemm_tflops_in_step": gemm_flops / sums["gemm"] / 1e12,
         "gemm_s_alone": alone_s, "gemm_tflops_alone": gemm_flops / alone_s / 1e12,
         "alone": alone, "kernel_names": names}
    log("  %d layers, batch %d, seq %d: step %.2f ms; kernels gemm %.2f / attention %.2f / other "
        "%.2f ms; GEMMs %.0f TFLOP/s in the step, %.0f alone" % (
            layers, batch, seq, 1e3 * r["step_s"], 1e3 * sums["gemm"], 1e3 * sums["attention"],
            1e3 * sums["other"], r["gemm_tflops_in_step"], r["gemm_tflops_alone"]))
    del model, x, g
    torch.cuda.empty_cache()
    return r


t0 = time.time()
result["torch"] = torch.__version__
result["cudnn"] = torch.backends.cudnn.version()
result["runs"] = []
for layers, batch, seq in ((4, 1, 4096), (4, 1, 8192), (4, 2, 8192), (2, 1, 1024), (2, 1, 2048)):
    try:
        result["runs"].append(run(layers, batch, seq))
    except Exception as e:  # noqa: BLE001
        log("  failed %d %d %d: %s" % (layers, batch, seq, str(e)[:300]))
        result["runs"].append({"layers": layers, "batch": batch, "seq": seq, "error": str(e)})
    with open(os.path.join(OUT, "layer_profile.json"), "w") as fh:
        json.dump(result, fh, indent=1)
log("done in %.0f s" % (time.time() - t0))
