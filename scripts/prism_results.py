#!/usr/bin/python3
"""Post-processing of PRISM result files (HDF5, format "prism-results" versions 1 and 2).

Run with /usr/bin/python3 (needs h5py, numpy; matplotlib for plots).

As a module:
    import prism_results as pr
    table = pr.load("results.h5")          # dict: column name -> numpy array, one row per point
    front = pr.pareto("results.h5", "time_vs_cost")
    pr.plot_pareto("results.h5", "step_time_p95_s", "gpu_hours_mean", "pareto.png")

As a program:
    prism_results.py summary FILE
    prism_results.py plot FILE --x METRIC --y METRIC [--front NAME] -o out.png
    prism_results.py quantiles FILE [--top N] [--by METRIC] -o out.png
    prism_results.py time-to-target FILE [--metric METRIC] -o out.png
    prism_results.py qq QQ.csv -o out.png     (the CSV of `prism trace fit --qq`)
"""
import argparse
import re
import signal
import sys

import h5py
import numpy as np

FORMAT = "prism-results"
FORMAT_VERSIONS = (1, 2)
STATUS_LABELS = ("ok", "infeasible", "failed", "dominated")


class ResultFileError(Exception):
    """A file that is not a readable PRISM result file."""


def _open(path):
    # SWMR read works while a sweep writes the file and after its writer was killed; files of
    # format 1 (not SWMR) open plainly.
    try:
        f = h5py.File(path, "r", swmr=True)
    except (OSError, FileNotFoundError):
        try:
            f = h5py.File(path, "r")
        except (OSError, FileNotFoundError) as e:
            raise ResultFileError(f"{path}: cannot open: {e}") from None
    if f.attrs.get("format") != FORMAT:
        f.close()
        raise ResultFileError(f"{path}: not a prism result file (no 'format' attribute)")
    if int(f.attrs.get("format_version", -1)) not in FORMAT_VERSIONS:
        version = f.attrs.get("format_version")
        f.close()
        raise ResultFileError(f"{path}: unsupported format_version {version}")
    return f


def _as_str(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def header(path):
    """Root attributes as a dict of Python scalars and strings."""
    with _open(path) as f:
        out = {}
        for key, value in f.attrs.items():
            if isinstance(value, np.ndarray):  # string lists (included_file_names, _texts)
                out[key] = [_as_str(v) for v in value]
            else:
                out[key] = int(value) if isinstance(value, np.integer) else _as_str(value)
        return out


def _column(ds, rows):
    """First `rows` values of a dataset; enumerations become arrays of label strings."""
    values = ds[:rows]
    enum = h5py.check_enum_dtype(ds.dtype)
    if enum is None:
        return values
    labels = np.empty(max(enum.values()) + 1, dtype=object)
    for label, value in enum.items():
        labels[value] = label
    return labels[values.astype(np.int64)].astype(str)


def load(path):
    """Committed rows of /points and /metrics joined: name -> numpy array (same length).

    `status` and enumeration columns hold label strings, `reason` the reason text ("" when
    none); metric columns are float64 (NaN where undefined). A metric with the name of a point
    column (e.g. `gpus`) is stored under "metrics/<name>".
    """
    return _load(path)[0]


def _load(path):
    """(table, {metric name: its key in table})."""
    with _open(path) as f:
        rows = int(f.attrs["rows_committed"])
        points, metrics = f["points"], f["metrics"]
        table = {"index": points["index"][:rows], "status": _column(points["status"], rows)}
        reasons = np.array(list(f["reasons"].asstr()[:]) + [""], dtype=object)
        table["reason"] = reasons[points["reason_id"][:rows]].astype(str)  # -1 -> ""
        for name in points.attrs["columns"]:
            table[_as_str(name)] = _column(points[name], rows)
        keys = {}
        for name in metrics.attrs["columns"]:
            name = _as_str(name)
            keys[name] = f"metrics/{name}" if name in table else name
            table[keys[name]] = metrics[name][:rows]
        return table, keys


def units(path):
    """Column name -> unit string for /points and /metrics (metrics also as "metrics/<name>")."""
    with _open(path) as f:
        out = {name: _as_str(ds.attrs.get("unit", "")) for name, ds in f["points"].items()}
        for name, ds in f["metrics"].items():
            out[f"metrics/{name}"] = _as_str(ds.attrs.get("unit", ""))
            out[name] = out[f"metrics/{name}"]
        return out


def pareto_names(path):
    with _open(path) as f:
        return sorted(f["pareto"].keys())


def pareto(path, name=None):
    """A stored Pareto front: dict(name, objectives, senses, index). `name` may be omitted when
    the file holds exactly one front."""
    with _open(path) as f:
        names = sorted(f["pareto"].keys())
        if name is None:
            if len(names) != 1:
                raise ResultFileError(f"{path}: {len(names)} pareto sets {names}; name one")
            name = names[0]
        if name not in f["pareto"]:
            raise ResultFileError(f"{path}: no pareto set {name!r} (have {names})")
        g = f["pareto"][name]
        return {"name": name,
                "objectives": [_as_str(o) for o in g.attrs["objectives"]],
                "senses": [_as_str(s) for s in g.attrs["senses"]],
                "index": g["index"][:]}


def failures(path):
    """List of (index, message) of points whose evaluation threw."""
    with _open(path) as f:
        g = f["failures"]
        if "commit" in f.attrs:  # format 2: [next_index, rows, reasons, failures, filtered]
            n = int(f.attrs["commit"][3])
        else:
            n = int(g.attrs.get("committed", g["index"].shape[0]))
        return list(zip(g["index"][:n].tolist(), g["message"].asstr()[:n]))


def filtered(path):
    """Reason -> count of points rejected before evaluation."""
    with _open(path) as f:
        g = f["filtered"]
        return {r: c for r, c in zip(g["reason"].asstr()[:], g["count"][:].tolist()) if c > 0}


def verify(path):
    """The Monte Carlo verification of the front (`[evaluation] verify = "montecarlo"`): dict of
    numpy arrays, one row per front point (index, ks, and for q in mean, p50, p95, p99:
    q_analytic_s, q_mc_s, q_diff_s = analytic minus Monte Carlo), plus "samples"; None when the
    file has no /verify."""
    with _open(path) as f:
        if "verify" not in f:
            return None
        g = f["verify"]
        out = {name: g[name][:] for name in g.keys()}
        out["samples"] = int(g.attrs["samples"]) if "samples" in g.attrs else None
        return out


def step_time_quantiles(table):
    """[(q, metric name)] for metrics step_time_p<q>_s, sorted by q. The digits are a percent
    whose first two digits are the integer part: p50 = 0.5, p999 = 0.999, p9999 = 0.9999;
    p99p9 = 0.999 is read too."""
    out = []
    for name in table:
        m = re.fullmatch(r"step_time_p(\d+)(?:p(\d+))?_s", name)
        if not m:
            continue
        whole, fraction = m.group(1), m.group(2) or ""
        if not fraction and len(whole) > 2:
            whole, fraction = whole[:2], whole[2:]
        out.append((float("0." + whole.zfill(2) + fraction), name))  # exact decimal parse
    return sorted(out)


def summary(path, out=sys.stdout):
    h = header(path)
    table, keys = _load(path)
    u = units(path)
    n = len(table["index"])
    print(f"{path}: {h['experiment_name']} (prism {h['program_version']}), status {h['status']}",
          file=out)
    print(f"  rows {n} of space {h['space_size']}, next_index {h['next_index']}, "
          f"seed {h['seed']}, sha256 {h['experiment_sha256'][:12]}...", file=out)
    counts = {label: int(np.sum(table["status"] == label)) for label in STATUS_LABELS}
    print("  status: " + ", ".join(f"{k} {v}" for k, v in counts.items()), file=out)
    for reason, count in sorted(filtered(path).items()):
        print(f"  filtered: {reason}: {count}", file=out)
    fails = failures(path)
    if fails:
        print(f"  failures: {len(fails)} (first: {fails[0][0]}: {fails[0][1]})", file=out)
    ok = table["status"] == "ok"
    metric_names = list(keys)
    if metric_names:
        print(f"  {'metric':<32} {'unit':<10} {'min':>12} {'median':>12} {'max':>12}", file=out)
    for name in metric_names:
        values = table[keys[name]][ok]
        values = values[np.isfinite(values)]
        if values.size == 0:
            print(f"  {name:<32} {u[name]:<10} {'-':>12} {'-':>12} {'-':>12}", file=out)
            continue
        print(f"  {name:<32} {u[name]:<10} {np.min(values):>12.6g} {np.median(values):>12.6g} "
              f"{np.max(values):>12.6g}", file=out)
    for name in pareto_names(path):
        front = pareto(path, name)
        objectives = ", ".join(f"{s} {o}" for o, s in zip(front["objectives"], front["senses"]))
        print(f"  pareto {name}: {len(front['index'])} points ({objectives})", file=out)
    v = verify(path)
    if v is not None and len(v["index"]):
        rel = np.abs(v["p95_diff_s"] / v["p95_mc_s"])
        print(f"  verify: {len(v['index'])} front points by Monte Carlo ({v['samples']} samples): "
              f"KS max {np.nanmax(v['ks']):.3g}, |p95 analytic - Monte Carlo| max "
              f"{100 * np.nanmax(rel):.2f}%", file=out)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_pareto(path, x, y, output, front=None):
    """Scatter of metric y against metric x for the ok points, the Pareto front highlighted
    (the stored front `front`, or the only one stored, or none)."""
    plt = _pyplot()
    table = load(path)
    u = units(path)
    for name in (x, y):
        if name not in table:
            raise ResultFileError(f"{path}: no column {name!r}")
    ok = (table["status"] == "ok") & np.isfinite(table[x]) & np.isfinite(table[y])
    fig, ax = plt.subplots(figsize=(6.4, 4.8))
    ax.scatter(table[x][ok], table[y][ok], s=8, color="0.6", label=f"points ({int(ok.sum())})")
    names = pareto_names(path)
    if front is None and len(names) == 1:
        front = names[0]
    if front is not None:
        members = np.isin(table["index"], pareto(path, front)["index"]) & ok
        order = np.argsort(table[x][members])
        ax.plot(table[x][members][order], table[y][members][order], "o-", color="C3", ms=5,
                label=f"pareto {front} ({int(members.sum())})")
    ax.set_xlabel(f"{x} [{u.get(x, '')}]")
    ax.set_ylabel(f"{y} [{u.get(y, '')}]")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)


def plot_quantiles(path, output, top=10, by=None):
    """Grouped bars of the step-time quantiles of the `top` ok points with the smallest `by`
    (default: the highest stored step-time quantile)."""
    plt = _pyplot()
    table = load(path)
    quantiles = step_time_quantiles(table)
    if not quantiles:
        raise ResultFileError(f"{path}: no step_time_p*_s metrics")
    by = by or quantiles[-1][1]
    ok = np.flatnonzero((table["status"] == "ok") & np.isfinite(table[by]))
    chosen = ok[np.argsort(table[by][ok], kind="stable")[:top]]
    fig, ax = plt.subplots(figsize=(max(6.4, 0.6 * len(chosen) + 2), 4.8))
    width = 0.8 / len(quantiles)
    positions = np.arange(len(chosen))
    for k, (q, name) in enumerate(quantiles):
        ax.bar(positions + k * width, table[name][chosen], width, label=f"p{100 * q:.4g}")
    ax.set_xticks(positions + 0.4 - width / 2)
    ax.set_xticklabels([str(i) for i in table["index"][chosen]], rotation=45)
    ax.set_xlabel("design point index")
    ax.set_ylabel("step time [s]")
    ax.legend(ncol=len(quantiles), loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)


def time_to_target(path, metric="time_to_target_p50_days"):
    """Best `metric` (smallest over every other design parameter) per (b_noise, gpus,
    global_batch) of a [cotune] study's ok points, and the global batch with the most
    tokens_per_s per (b_noise, gpus).

    Returns {b_noise: {gpus: {"batch": array, "best": array, "throughput_batch": int}}};
    b_noise is None when the file has no b_noise column.
    """
    table = load(path)
    for name in (metric, "tokens_per_s", "gpus", "global_batch"):
        if name not in table:
            raise ResultFileError(f"{path}: no column {name!r} (not a [cotune] study?)")
    ok = (table["status"] == "ok") & np.isfinite(table[metric])
    noise = table["b_noise"] if "b_noise" in table else np.full(len(ok), np.nan)
    gpus = table["gpus"]
    batch = table["global_batch"]
    out = {}
    for bn in sorted(set(noise[ok].tolist()), key=lambda v: (np.isnan(v), v)):
        in_noise = ok & ((noise == bn) | (np.isnan(noise) & np.isnan(bn)))
        key = None if np.isnan(bn) else bn
        out[key] = {}
        for g in sorted(set(gpus[in_noise].tolist())):
            rows = in_noise & (gpus == g)
            batches = np.array(sorted(set(batch[rows].tolist())))
            best = np.array([np.min(table[metric][rows & (batch == b)]) for b in batches])
            fastest = np.flatnonzero(rows)[np.argmax(table["tokens_per_s"][rows])]
            out[key][int(g)] = {"batch": batches, "best": best,
                                "throughput_batch": int(batch[fastest])}
    return out


def plot_time_to_target(path, output, metric="time_to_target_p50_days"):
    """Time to target against global batch, one line per GPU count (best over the other
    parameters), one panel per b_noise; a cross marks each GPU count's highest-throughput
    batch."""
    plt = _pyplot()
    curves = time_to_target(path, metric)
    u = units(path)
    fig, axes = plt.subplots(1, len(curves), figsize=(6.0 * len(curves), 4.8), squeeze=False)
    for ax, (bn, by_gpus) in zip(axes[0], curves.items()):
        for k, (g, c) in enumerate(by_gpus.items()):
            # files up to model version 2026.11.26.4 stored the time to target in seconds
            days = c["best"] / 86400.0 if u.get(metric) == "s" else c["best"]
            ax.plot(c["batch"], days, "o-", color=f"C{k}", label=f"{g} GPUs")
            at = np.flatnonzero(c["batch"] == c["throughput_batch"])
            if at.size:
                ax.plot(c["batch"][at], days[at], "x", color=f"C{k}", ms=12, mew=2)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(f"global batch [{u.get('global_batch', '')}]")
        ax.set_ylabel("time to target [days]")
        title = "B_noise from B_crit(L)" if bn is None else f"B_noise = {bn:.3g} tokens"
        ax.set_title(title + "  (x: highest tokens/s)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)


def load_qq(path):
    """The QQ table `prism trace fit --qq` writes: dict class -> dict of numpy arrays (p, fitted,
    empirical) and the chosen family, its cv and KS distance."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ResultFileError(f"{path}: cannot open: {e}") from None
    columns = ["class", "family", "cv", "ks", "p", "fitted", "empirical"]
    if not lines or lines[0].split(",") != columns:
        raise ResultFileError(f"{path}: not a QQ table (header {','.join(columns)})")
    out = {}
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split(",")
        try:
            cls, family, cv, ks, p, fitted, empirical = cells
            row = out.setdefault(cls, {"family": family, "cv": float(cv), "ks": float(ks),
                                       "p": [], "fitted": [], "empirical": []})
            for key, value in (("p", p), ("fitted", fitted), ("empirical", empirical)):
                row[key].append(float(value))
        except ValueError:
            raise ResultFileError(f"{path}:{number}: malformed row {line!r}") from None
    for row in out.values():
        for key in ("p", "fitted", "empirical"):
            row[key] = np.array(row[key])
    return out


def plot_qq(path, output):
    """One QQ panel per kernel class: the empirical quantiles of the transient factor X against
    the fitted family's (on the diagonal when the family fits)."""
    plt = _pyplot()
    table = load_qq(path)
    n = len(table)
    cols = min(n, 4)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 3.0 * rows), squeeze=False)
    for ax, (cls, row) in zip(axes.flat, table.items()):
        ax.plot(row["fitted"], row["empirical"], ".", ms=4)
        lo = min(row["fitted"].min(), row["empirical"].min())
        hi = max(row["fitted"].max(), row["empirical"].max())
        ax.plot([lo, hi], [lo, hi], "-", color="0.5", lw=0.8)
        ax.set_title(f"{cls}: {row['family']} cv {row['cv']:.3g}, KS {row['ks']:.2f}", fontsize=9)
        ax.set_xlabel("fitted quantile of X", fontsize=8)
        ax.set_ylabel("empirical quantile of X", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)


def main(argv=None):
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `... summary FILE | head` ends quietly
    parser = argparse.ArgumentParser(description="PRISM result files: summary and plots")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("summary", help="print the header, status counts, metric ranges, fronts")
    p.add_argument("file")
    p = sub.add_parser("plot", help="Pareto scatter of two metrics")
    p.add_argument("file")
    p.add_argument("--x", required=True)
    p.add_argument("--y", required=True)
    p.add_argument("--front", help="stored pareto set to highlight")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("quantiles", help="step-time quantile bars of the best points")
    p.add_argument("file")
    p.add_argument("--top", type=int, default=10)
    p.add_argument("--by", help="metric to rank by (smallest first)")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("time-to-target",
                       help="[cotune] time to target against global batch per GPU count")
    p.add_argument("file")
    p.add_argument("--metric", default="time_to_target_p50_days")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("qq", help="QQ plots per kernel class from `prism trace fit --qq`")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    try:
        if args.command == "summary":
            summary(args.file)
        elif args.command == "plot":
            plot_pareto(args.file, args.x, args.y, args.output, args.front)
        elif args.command == "time-to-target":
            plot_time_to_target(args.file, args.output, args.metric)
        elif args.command == "qq":
            plot_qq(args.file, args.output)
        else:
            plot_quantiles(args.file, args.output, args.top, args.by)
    except ResultFileError as e:
        print(f"prism_results: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
