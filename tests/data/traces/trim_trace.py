import json, gzip, sys
src, dst = sys.argv[1], sys.argv[2]
d = json.load(gzip.open(src))
ev = d["traceEvents"]
keep_corr = set()
out = []
for e in ev:
    c = e.get("cat")
    if c in ("kernel", "gpu_memcpy", "gpu_memset"):
        a = e.get("args", {})
        e = dict(e); e["args"] = {k: a[k] for k in ("device", "stream", "correlation", "grid", "block", "Collective name", "In msg nelems", "Group size", "dtype") if k in a}
        out.append(e)
        if "correlation" in e.get("args", {}): keep_corr.add(e["args"]["correlation"])
    elif c in ("user_annotation", "gpu_user_annotation") and (e["name"].startswith("ProfilerStep") or e["name"].startswith("nccl:")):
        out.append(e)
    elif c == "cpu_op" and e["name"].startswith("nccl:"):
        out.append(e)
    elif e.get("ph") == "M":
        out.append(e)
for e in ev:
    if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") in keep_corr:
        e = dict(e); e["args"] = {"correlation": e["args"]["correlation"]}
        out.append(e)
d["traceEvents"] = out
d.pop("INFO", None)
with gzip.open(dst, "wt", compresslevel=9) as f:
    json.dump(d, f, separators=(",", ":"))
