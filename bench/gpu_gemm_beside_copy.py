#!/usr/bin/env python3
"""BF16 GEMMs beside a communication-like kernel, on one GPU (a GPU machine only; not in CI).

NCCL's collectives run as a few CTAs (one per channel, 16-32 on NVLink) that stream memory,
concurrently with the compute kernels they are overlapped with. This runs a Triton copy kernel
with a fixed number of CTAs on a second stream and times BF16 GEMMs of transformer shapes on the
first while it runs, against the same GEMMs alone: whether such a neighbour costs a GEMM a
fraction of its time or a fixed amount (docs/calibration.md, "Kernels measured on an H200").
Usage: python3 bench/gpu_gemm_beside_copy.py OUT_DIR
"""
import json
import os
import statistics
import sys

import torch
import triton
import triton.language as tl

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
dev = torch.device("cuda")


@triton.jit
def copy_kernel(src, dst, n, reps, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for _ in range(reps):
        for start in range(pid * BLOCK, n, step):
            offs = start + tl.arange(0, BLOCK)
            m = offs < n
            tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


def log(*a):
    print(*a, flush=True)


n = 1 << 28  # 1 GiB of fp32 each way
src = torch.randn(n, device=dev)
dst = torch.empty_like(src)
side = torch.cuda.Stream()


def copy_rate(ctas, reps=2):
    copy_kernel[(ctas,)](src, dst, n, reps, BLOCK=4096)  # the same specialization as timed
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    copy_kernel[(ctas,)](src, dst, n, reps, BLOCK=4096)
    e.record()
    e.synchronize()
    sec = s.elapsed_time(e) / 1e3
    return 2 * 4 * n * reps / sec, sec / reps


def gemm_time(a, b, iters):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(iters):
        torch.matmul(a, b)
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 1e3 / iters


res = {"copy": {}, "gemm": []}
for ctas in (8, 16, 32, 132):
    bw, per = copy_rate(ctas)
    res["copy"][ctas] = {"bytes_per_s": bw, "s_per_pass": per}
    log("  copy with %3d CTAs: %.2f TB/s (%.2f ms per 2 GiB pass)" % (ctas, bw / 1e12, 1e3 * per))

for tokens in (512, 1024, 2048, 4096, 8192):
    for nn_, kk in ((4096, 4096), (14336, 4096), (4096, 14336), (8192, 8192)):
        a = torch.randn(tokens, kk, device=dev, dtype=torch.bfloat16)
        b = torch.randn(kk, nn_, device=dev, dtype=torch.bfloat16)
        for _ in range(5):
            torch.matmul(a, b)
        torch.cuda.synchronize()
        one = gemm_time(a, b, 5)
        iters = max(10, int(0.02 / one))
        alone = statistics.median(gemm_time(a, b, iters) for _ in range(3))
        row = {"m": tokens, "n": nn_, "k": kk, "flops": 2.0 * tokens * nn_ * kk, "alone_s": alone}
        for ctas in (8, 16, 32):
            per = res["copy"][ctas]["s_per_pass"]
            reps = max(2, int(3 * 3 * iters * alone / per) + 2)
            torch.cuda.synchronize()
            done = torch.cuda.Event()
            with torch.cuda.stream(side):
                copy_kernel[(ctas,)](src, dst, n, reps, BLOCK=4096)
                done.record(side)
            beside = statistics.median(gemm_time(a, b, iters) for _ in range(3))
            row["background_outlasted_%d" % ctas] = not done.query()
            torch.cuda.synchronize()
            row["beside_%d_s" % ctas] = beside
        res["gemm"].append(row)
        log("  %5d x %5d x %5d: alone %.1f us (%.0f TFLOP/s); beside " % (
            tokens, nn_, kk, 1e6 * alone, row["flops"] / alone / 1e12) + ", ".join(
            "%d CTAs %+.1f%%%s" % (c, 100 * (row["beside_%d_s" % c] / alone - 1),
                                   "" if row["background_outlasted_%d" % c] else " (ended early)")
            for c in (8, 16, 32)))
        with open(os.path.join(OUT, "gemm_beside_copy.json"), "w") as fh:
            json.dump(res, fh, indent=1)
