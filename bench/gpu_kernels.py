#!/usr/bin/env python3
"""Kernel microbenchmarks for the GPU presets' ceilings (issue 34 item 1), run on a GPU machine.

Not part of the build or of CI (it needs a GPU and PyTorch). It measures, with PyTorch's
cuBLAS / cuBLASLt / cuDNN on the machine it runs on:
  gemm_curve   BF16 GEMMs of transformer shapes (tokens x output x input, three layouts) from
               about 1e8 to 1e13 FLOPs: the GEMM curve's ceiling and half-saturation size
  fp8          FP8 (E4M3) GEMMs through torch._scaled_mm, with and without fast accumulation
  attention    causal scaled-dot-product attention, BF16, cuDNN and FlashAttention-2 backends,
               forward and backward, 1k-32k keys, head dim 128 (and 64)
  hbm          device-to-device copy and a triad over 4 GiB arrays
  sustained    one 8192^3 BF16 GEMM back to back for SUSTAIN_S seconds, TFLOP/s per window,
               with nvidia-smi's SM clock, power and temperature logged beside it
  attention_sustained
               cuDNN causal attention (16k keys, head dim 128, forward + backward) back to back
               for SUSTAIN_S / 2 seconds per shape, clocks logged the same way: at NVIDIA's cuDNN
               benchmark shape (batch 1, 64 query / 8 KV heads) and this script's (batch 2,
               16 heads), for the presets' attention_sustained (docs/calibration.md)
Every figure is a median of CUDA-event timings after warm-up; FLOPs are counted as 2 M N K per
GEMM and 4 b h s^2 d / 2 for the causal attention forward (backward: 2.5x the forward's).
Usage: python3 bench/gpu_kernels.py OUT_DIR [SUSTAIN_S]   (writes OUT_DIR/gpu_kernels.json)
"""
import json
import os
import statistics
import subprocess
import sys
import time
import traceback

import torch
import torch.nn.functional as F

OUT = sys.argv[1] if len(sys.argv) > 1 else "."
SUSTAIN_S = float(sys.argv[2]) if len(sys.argv) > 2 else 45.0
dev = torch.device("cuda")
result = {"started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def log(*a):
    print(*a, flush=True)


def smi(query):
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=" + query, "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return "error: %s" % e


def timed(fn, target_s=0.05, min_iters=5, reps=3):
    """Median seconds per call of fn over reps timed batches, each about target_s long."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    one = max(time.perf_counter() - t0, 1e-6)
    n = max(min_iters, int(target_s / one))
    samples = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(n):
            fn()
        e.record()
        e.synchronize()
        samples.append(s.elapsed_time(e) / 1e3 / n)
    return statistics.median(samples)


def part(name, f):
    t0 = time.time()
    try:
        result[name] = f()
    except Exception:  # noqa: BLE001
        result[name] = {"error": traceback.format_exc()}
        log(result[name]["error"])
    log("== %s done in %.1f s" % (name, time.time() - t0))
    with open(os.path.join(OUT, "gpu_kernels.json"), "w") as fh:
        json.dump(result, fh, indent=1)


def environment():
    return {
        "gpu": torch.cuda.get_device_name(0),
        "sms": torch.cuda.get_device_properties(0).multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "smi": smi("name,driver_version,power.limit,power.max_limit,clocks.max.sm,clocks.max.mem,"
                   "memory.total"),
    }


def gemm_curve():
    rows = []
    torch.manual_seed(0)
    outs_ins = [(1024, 4096), (4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336),
                (8192, 8192), (28672, 8192), (8192, 28672), (16384, 16384), (53248, 16384)]
    for tokens in (256, 512, 1024, 2048, 4096, 8192, 16384):
        for n, k in outs_ins:
            for layout in ("nt", "nn", "tn"):
                if layout != "nt" and tokens not in (1024, 8192):
                    continue
                a = torch.randn(tokens, k, device=dev, dtype=torch.bfloat16)
                if layout == "nt":  # y = x W^T (forward)
                    b = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
                    fn = lambda a=a, b=b: torch.matmul(a, b.t())  # noqa: E731
                elif layout == "nn":  # dgrad: dx = dy W
                    b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
                    fn = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
                else:  # wgrad: dW = dy^T x (reduction over the tokens)
                    a = torch.randn(k, tokens, device=dev, dtype=torch.bfloat16)
                    b = torch.randn(tokens, n, device=dev, dtype=torch.bfloat16)
                    fn = lambda a=a, b=b: torch.matmul(a, b)  # noqa: E731
                t = timed(fn)
                flops = 2.0 * tokens * n * k
                rows.append({"m": tokens, "n": n, "k": k, "layout": layout, "s": t,
                             "flops": flops, "tflops": flops / t / 1e12})
                del a, b
        log("  tokens %5d: %s" % (tokens, " ".join("%.0f" % r["tflops"] for r in rows
                                                  if r["m"] == tokens and r["layout"] == "nt")))
    for s in (256, 512, 1024, 2048, 4096, 8192, 16384):
        a = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
        b = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
        t = timed(lambda: torch.matmul(a, b))
        rows.append({"m": s, "n": s, "k": s, "layout": "square", "s": t, "flops": 2.0 * s ** 3,
                     "tflops": 2.0 * s ** 3 / t / 1e12})
        log("  square %5d: %.0f TFLOP/s" % (s, rows[-1]["tflops"]))
    return rows


def fp8():
    rows = []
    one = torch.ones((), device=dev, dtype=torch.float32)
    for m, n, k in ((1024, 4096, 4096), (4096, 4096, 4096), (8192, 8192, 8192),
                    (16384, 8192, 8192), (8192, 28672, 8192), (16384, 16384, 16384),
                    (2048, 14336, 4096), (8192, 14336, 4096)):
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn).t()  # column-major
        for fast in (False, True):
            fn = lambda a=a, b=b, fast=fast: torch._scaled_mm(  # noqa: E731
                a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16, use_fast_accum=fast)
            t = timed(fn)
            rows.append({"m": m, "n": n, "k": k, "fast_accum": fast, "s": t,
                         "tflops": 2.0 * m * n * k / t / 1e12})
            log("  fp8 %5d x %5d x %5d fast %d: %.0f TFLOP/s" % (m, n, k, fast, rows[-1]["tflops"]))
        del a, b
    return rows


def attention():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    backends = {"cudnn": SDPBackend.CUDNN_ATTENTION, "fa2": SDPBackend.FLASH_ATTENTION}
    cases = [(s, 128, 16) for s in (1024, 2048, 4096, 8192, 16384, 32768)]
    cases += [(s, 64, 32) for s in (2048, 8192, 16384)]
    for name, backend in backends.items():
        for s, d, h in cases:
            b = max(1, 32768 // s)
            try:
                q = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                k = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                v = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
                g = torch.randn(b, h, s, d, device=dev, dtype=torch.bfloat16)
                with sdpa_kernel([backend]):
                    def fwd():
                        with torch.no_grad():
                            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

                    def fwd_bwd():
                        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                        o.backward(g)

                    tf = timed(fwd)
                    tfb = timed(fwd_bwd)
                fl = 4.0 * b * h * s * s * d / 2
                tb = max(tfb - tf, 1e-9)
                rows.append({"backend": name, "seq": s, "head_dim": d, "heads": h, "batch": b,
                             "fwd_s": tf, "bwd_s": tb, "fwd_tflops": fl / tf / 1e12,
                             "bwd_tflops": 2.5 * fl / tb / 1e12,
                             "fwd_bwd_tflops": 3.5 * fl / tfb / 1e12})
                log("  %-5s s %5d d %3d: fwd %.0f bwd %.0f fwd+bwd %.0f TFLOP/s" % (
                    name, s, d, rows[-1]["fwd_tflops"], rows[-1]["bwd_tflops"],
                    rows[-1]["fwd_bwd_tflops"]))
                del q, k, v, g
            except Exception as e:  # noqa: BLE001
                rows.append({"backend": name, "seq": s, "head_dim": d, "error": str(e)[:300]})
                log("  %-5s s %5d d %3d: %s" % (name, s, d, str(e)[:200]))
            torch.cuda.empty_cache()
    return rows


def hbm():
    n = 1 << 30  # 4 GiB of fp32
    x = torch.empty(n, device=dev, dtype=torch.float32).normal_()
    y = torch.empty_like(x)
    z = torch.empty_like(x).normal_()
    t_copy = timed(lambda: y.copy_(x), target_s=0.1)
    t_triad = timed(lambda: torch.add(x, z, alpha=2.0, out=y), target_s=0.1)
    r = {"copy_bytes_per_s": 2 * 4 * n / t_copy, "triad_bytes_per_s": 3 * 4 * n / t_triad}
    log("  copy %.2f TB/s, triad %.2f TB/s" % (r["copy_bytes_per_s"] / 1e12,
                                                r["triad_bytes_per_s"] / 1e12))
    return r


def smi_log(path):
    """nvidia-smi's SM and memory clocks, power and temperature every 500 ms into `path`, until
    the returned process is terminated (and the returned file closed)."""
    fh = open(path, "w")
    mon = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,"
                            "temperature.gpu", "--format=csv,noheader", "-lms", "500"],
                           stdout=fh, stderr=subprocess.STDOUT)
    return mon, fh


def sustained():
    s = 8192
    a = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    b = torch.randn(s, s, device=dev, dtype=torch.bfloat16)
    path = os.path.join(OUT, "smi_sustained.csv")
    mon, fh = smi_log(path)
    windows = []
    t_start = time.time()
    while time.time() - t_start < SUSTAIN_S:
        ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ev0.record()
        for _ in range(200):
            torch.matmul(a, b)
        ev1.record()
        ev1.synchronize()
        sec = ev0.elapsed_time(ev1) / 1e3
        windows.append({"t": time.time() - t_start, "tflops": 200 * 2.0 * s ** 3 / sec / 1e12})
    mon.terminate()
    fh.close()
    tf = [w["tflops"] for w in windows]
    log("  sustained: first window %.0f, last %.0f, median %.0f, min %.0f TFLOP/s over %.0f s" % (
        tf[0], tf[-1], statistics.median(tf), min(tf), windows[-1]["t"]))
    return {"windows": windows, "smi": open(path).read().splitlines()}


def attention_sustained():
    from torch.nn.attention import SDPBackend, sdpa_kernel
    out = {}
    s, d = 16384, 128
    fl_one = 4.0 * s * s * d / 2  # one head, one sequence, causal forward
    for label, b, hq, hk in (("nvidia_gqa_64_8", 1, 64, 8), ("mha_16", 2, 16, 16)):
        q = torch.randn(b, hq, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(b, hk, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(b, hk, s, d, device=dev, dtype=torch.bfloat16, requires_grad=True)
        g = torch.randn(b, hq, s, d, device=dev, dtype=torch.bfloat16)
        gqa = hq != hk

        def step():
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
            o.backward(g)

        path = os.path.join(OUT, "smi_attention_%s.csv" % label)
        mon, fh = smi_log(path)
        windows = []
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
                step()
                torch.cuda.synchronize()
                t_start = time.time()
                while time.time() - t_start < SUSTAIN_S / 2:
                    ev0 = torch.cuda.Event(enable_timing=True)
                    ev1 = torch.cuda.Event(enable_timing=True)
                    ev0.record()
                    for _ in range(10):
                        step()
                    ev1.record()
                    ev1.synchronize()
                    sec = ev0.elapsed_time(ev1) / 1e3
                    windows.append({"t": time.time() - t_start,
                                    "tflops": 10 * 3.5 * fl_one * b * hq / sec / 1e12})
        except Exception as e:  # noqa: BLE001
            out[label] = {"error": str(e)[:300]}
            log("  attention %s: %s" % (label, str(e)[:200]))
        mon.terminate()
        fh.close()
        if windows:
            tf = [w["tflops"] for w in windows]
            log("  attention %s: first window %.0f, median %.0f, min %.0f TFLOP/s over %.0f s" % (
                label, tf[0], statistics.median(tf), min(tf), windows[-1]["t"]))
            out[label] = {"windows": windows, "smi": open(path).read().splitlines()}
        del q, k, v, g
        torch.cuda.empty_cache()
    return out


part("environment", environment)
log(json.dumps(result["environment"]))
part("gemm_curve", gemm_curve)
part("fp8", fp8)
part("attention", attention)
part("hbm", hbm)
part("sustained", sustained)
part("attention_sustained", attention_sustained)
result["ended"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
part("smi_after", lambda: smi("clocks.sm,power.draw,temperature.gpu"))
