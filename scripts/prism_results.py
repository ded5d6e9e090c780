#!/usr/bin/python3
"""Post-processing of PRISM result files (HDF5, format "prism-results" versions 1 and 2).

Run with /usr/bin/python3 (needs h5py, numpy; matplotlib for plots; pandas for frame(); plotly
for the html page).

As a module:
    import prism_results as pr
    table = pr.load("results.h5")          # dict: column name -> numpy array, one row per point
    df = pr.frame("results.h5")            # the same as a pandas DataFrame (units in df.attrs)
    front = pr.pareto("results.h5", "time_vs_cost")
    pr.plot_pareto("results.h5", "step_time_p95_s", "gpu_hours_mean", "pareto.png")

As a program:
    prism_results.py summary FILE
    prism_results.py plot FILE --x METRIC --y METRIC [--front NAME] -o out.png
    prism_results.py quantiles|cdf|breakdown|sensitivity FILE [--front NAME | --top N [--by M]
                     | --index I,J] -o out.png|.svg|.pdf
    prism_results.py html FILE -o page.html     (the self-contained interactive page)
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


def frame(path):
    """The committed rows as a pandas DataFrame: one row per point, the columns of `load` (points
    then metrics; a metric named like a point column as "metrics/<name>"), enumeration columns
    (status and the enum parameters such as recompute, placement, hardware) as pandas
    categoricals whose categories are all the labels the file declares, in the file's order.
    `df.attrs["units"]` maps column name -> unit, `df.attrs["header"]` holds the root
    attributes (`header(path)`) and `df.attrs["path"]` the file name. Needs python3-pandas."""
    import pandas as pd
    table = load(path)
    categories = {}
    with _open(path) as f:
        for name, ds in f["points"].items():
            enum = h5py.check_enum_dtype(ds.dtype)
            if enum is not None:
                categories[name] = [label for label, _ in
                                    sorted(enum.items(), key=lambda kv: kv[1])]
    columns = {}
    for name, values in table.items():
        if name in categories:
            columns[name] = pd.Categorical(values, categories=categories[name])
        else:
            columns[name] = values
    df = pd.DataFrame(columns)
    u = units(path)
    df.attrs["units"] = {name: u.get(name, "") for name in df.columns}
    df.attrs["header"] = header(path)
    df.attrs["path"] = str(path)
    return df


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
                "scenarios": ([_as_str(s) for s in g.attrs["scenarios"]]
                              if "scenarios" in g.attrs else []),
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


# ---------------------------------------------------------------------------------------------
# The data the page and the static plots are built from.

def dimensions(table, point_names):
    """The point columns that take more than one value among the rows (the swept dimensions,
    plus defaults that vary through derived columns such as dp)."""
    out = []
    for name in point_names:
        values = table[name]
        if len(values) and len(np.unique(values)) > 1:
            out.append(name)
    return out


def _format_value(value):
    if isinstance(value, (str, np.str_)):
        return str(value)
    value = float(value)
    if np.isnan(value):
        return "nan"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


def config_label(table, row, dims):
    """A short configuration label: `name=value` of the swept dimensions, e.g.
    "gpus=1024 tp=4 pp=1 microbatch=1 zero_stage=3 recompute=selective"."""
    return " ".join(f"{name}={_format_value(table[name][row])}" for name in dims)


def slow_metrics(table):
    """[(label, metric)] of p_slow_<d>pct, by increasing d: ("5%", "p_slow_5pct")."""
    out = []
    for name in table:
        m = re.fullmatch(r"p_slow_(\d+(?:p\d+)?)pct", name)
        if m:
            out.append((float(m.group(1).replace("p", ".")), m.group(1).replace("p", ".") + "%",
                        name))
    return [(label, name) for _, label, name in sorted(out)]


def sensitivity_metrics(table):
    """[(kernel class, metric)] of sens_p95_<class>_s in the file's order."""
    return [(m.group(1), name) for name in table
            for m in [re.fullmatch(r"sens_p95_(.+)_s", name)] if m]


_DEADLINE_UNITS = {"d": 1.0, "h": 1.0 / 24.0, "s": 1.0 / 86400.0}


def deadline_metrics(table):
    """[(label, days, metric)] of p_run_le_<deadline>, by increasing deadline."""
    out = []
    for name in table:
        m = re.fullmatch(r"p_run_le_(\d+)([dhs])", name)
        if m:
            out.append((int(m.group(1)) * _DEADLINE_UNITS[m.group(2)], m.group(1) + m.group(2),
                        name))
    return [(label, days, name) for days, label, name in sorted(out)]


def run_time_quantiles(table):
    """[(q, metric)] of run_time_p<q>_days, sorted by q."""
    out = []
    for name in table:
        m = re.fullmatch(r"run_time_p(\d+)_days", name)
        if m:
            whole = m.group(1)
            out.append((float("0." + whole[:2].zfill(2) + whole[2:]), name))
    return sorted(out)


# The deterministic step as the file stores it: exposed_comm_s (TP + CP + FSDP + DP
# communication and DeepSpeed's blocking pipeline transfers not hidden by compute; `prism eval`
# prints them one by one; files before model 2026.11.29.8 leave the transfers in the rest) and bubble_fraction
# (pipeline idle time of the busiest stage / step time); the rest of step_time_s is the busiest
# stage's compute, embedding, LM head and loss, optimizer and host-bound stretch, which the
# file does not split further. Files of MoE experiments add moe_a2a_exposed_s (the dispatch and
# combine all-to-all not hidden, not in exposed_comm_s): a fourth line, taken out of the rest.
BREAKDOWN_LABELS = ("compute, embedding, LM head, optimizer, host",
                    "exposed TP + CP + FSDP + DP (+ blocking PP) communication",
                    "pipeline bubble and waits")
MOE_A2A_LABEL = "exposed MoE all-to-all (dispatch, combine)"

# What a sweep of an MoE experiment writes (docs/moe_outputs.md): the busiest stage's MoE lines
# per step (router and expert compute are part of its compute; dispatch and combine before
# overlap; moe_a2a_exposed_s what stays exposed) and the routing imbalance's share of p50 and
# p95, (p - p with moe_force_balance = true) / p (absent with [evaluation] routing_share =
# false). Files of dense experiments, and files written before these columns, have none.
MOE_COLUMNS = ("moe_router_s", "moe_expert_compute_s", "moe_dispatch_s", "moe_combine_s",
               "moe_a2a_exposed_s", "routing_share_p50", "routing_share_p95")


def moe_columns(table):
    """The MoE columns (MOE_COLUMNS) the file has, in that order; [] for a dense experiment or
    a file written before them."""
    return [name for name in MOE_COLUMNS if name in table]


def breakdown_labels(table):
    """The labels of `breakdown`'s lines for this file: BREAKDOWN_LABELS, and MOE_A2A_LABEL
    when it has moe_a2a_exposed_s."""
    return BREAKDOWN_LABELS + ((MOE_A2A_LABEL,) if "moe_a2a_exposed_s" in table else ())


def breakdown(table, row):
    """The deterministic step of one row as [(label, seconds)] summing to step_time_s, or []
    when the file lacks the columns or the row has no deterministic metrics."""
    for name in ("step_time_s", "exposed_comm_s", "bubble_fraction"):
        if name not in table:
            return []
    step = float(table["step_time_s"][row])
    comm = float(table["exposed_comm_s"][row])
    bubble = float(table["bubble_fraction"][row]) * step
    parts = [step - comm - bubble, comm, bubble]
    if "moe_a2a_exposed_s" in table:
        a2a = float(table["moe_a2a_exposed_s"][row])
        parts[0] -= a2a
        parts.append(a2a)
    if not all(np.isfinite(v) for v in parts):
        return []
    return list(zip(breakdown_labels(table), parts))


def _finite(value):
    value = float(value)
    return value if np.isfinite(value) else None


def point_details(table, row, dims):
    """What the page's per-point panels show for one row: its label, the step-time quantiles
    [(q, s)] (the file's step_time_p*_s columns, CDF points), mean, p(slow) [(label, p)], the
    deterministic breakdown [(label, s)], p95 minus the deterministic step, the p95 drop per
    kernel class [(class, s)], and with [failures] the run-time quantiles [(q, days)] and
    deadlines [(label, days, p)]. NaN values become None (JSON null)."""
    quantiles = [(q, _finite(table[name][row])) for q, name in step_time_quantiles(table)]
    step = _finite(table["step_time_s"][row]) if "step_time_s" in table else None
    p95 = _finite(table["step_time_p95_s"][row]) if "step_time_p95_s" in table else None
    return {
        "row": int(row),
        "index": int(table["index"][row]),
        "label": config_label(table, row, dims),
        "status": str(table["status"][row]),
        "step_time_s": step,
        "mean_s": _finite(table["step_time_mean_s"][row]) if "step_time_mean_s" in table else None,
        "quantiles": quantiles,
        "p_slow": [(label, _finite(table[name][row])) for label, name in slow_metrics(table)],
        "breakdown": [(label, float(v)) for label, v in breakdown(table, row)],
        "variability_p95_s": (p95 - step) if p95 is not None and step is not None else None,
        "sensitivity": [(cls, _finite(table[name][row]))
                        for cls, name in sensitivity_metrics(table)],
        "run_quantiles": [(q, _finite(table[name][row])) for q, name in run_time_quantiles(table)],
        "deadlines": [(label, days, _finite(table[name][row]))
                      for label, days, name in deadline_metrics(table)],
    }


def _scenario_text(value):
    """A scenario value as prism's report labels it (C++ fmt "{:g}" for numbers)."""
    if isinstance(value, (str, np.str_, bytes)):
        return _as_str(value)
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (int, np.integer)):
        return str(int(value))
    return f"{float(value):g}"


def scenario_fronts(path, name=None):
    """A front's per-scenario parts: a list of dict(label, rows) (row positions in load(path),
    in the order of the first objective), one per scenario present among the front's points;
    one entry labelled "" for a front without scenario dimensions (the stored front's
    `scenarios` attribute, from [space] scenarios)."""
    table = load(path)
    front = pareto(path, name)
    rows = front_rows(table, front)
    dims = front["scenarios"]
    if not dims:
        return [{"label": "", "rows": rows}]
    labels = [" ".join(f"{d}={_scenario_text(table[d][r])}" for d in dims) for r in rows]
    out = {}
    for r, label in zip(rows, labels):
        out.setdefault(label, []).append(r)
    return [{"label": label, "rows": np.array(members, dtype=np.int64)}
            for label, members in out.items()]


def robust_pick(path, name=None):
    """The configuration with the least worst-case regret across the front's scenarios, by
    brute force over the ok rows: regret(c, s) = min over the front F_s of scenario s of
    max_j c_j / f_j - 1 (f_j / c_j - 1 for a maximized objective), 0 on the front. Returns None
    without scenario dimensions, else dict(rows: {scenario label: row position}, regret:
    {label: value}, worst, index: [design-space indices]) or dict(why_not=...)."""
    table = load(path)
    front = pareto(path, name)
    dims = front["scenarios"]
    if not dims:
        return None
    objectives, senses = front["objectives"], front["senses"]
    point_names = [n for n in _point_names(path) if n not in dims]
    ok = np.flatnonzero(table["status"] == "ok")
    values = np.column_stack([table[o][ok] for o in objectives])
    finite = np.all(np.isfinite(values), axis=1)
    ok, values = ok[finite], values[finite]
    if np.any(values <= 0):
        return {"why_not": "an objective is not positive (regret is relative)"}
    scenario = [" ".join(f"{d}={_scenario_text(table[d][r])}" for d in dims) for r in ok]
    config = [tuple(_scenario_text(table[n][r]) for n in point_names) for r in ok]
    labels = sorted(set(scenario), key=lambda s: min(table["index"][r]
                                                     for r, t in zip(ok, scenario) if t == s))
    sign = np.array([-1.0 if s == "max" else 1.0 for s in senses])
    fronts = {}
    for label in labels:
        mine = values[[k for k, t in enumerate(scenario) if t == label]]
        keep = []
        for v in mine:
            dominated = any(np.all(w * sign <= v * sign) and np.any(w * sign < v * sign)
                            for w in mine)
            if not dominated:
                keep.append(v)
        fronts[label] = keep

    def regret(c, label):
        best = np.inf
        for f in fronts[label]:
            worst = 0.0
            for j, s in enumerate(senses):
                worst = max(worst, f[j] / c[j] - 1 if s == "max" else c[j] / f[j] - 1)
            best = min(best, worst)
        return best

    by_config = {}
    for k, (c, s) in enumerate(zip(config, scenario)):
        by_config.setdefault(c, {})[s] = k
    best = None
    for c, per in by_config.items():
        if len(per) != len(labels):
            continue
        regrets = {s: regret(values[k], s) for s, k in per.items()}
        worst = max(regrets.values())
        first = min(int(table["index"][ok[k]]) for k in per.values())
        if best is None or (worst, first) < (best["worst"], best["first"]):
            best = {"worst": worst, "first": first, "regret": regrets,
                    "rows": {s: int(ok[k]) for s, k in per.items()},
                    "index": sorted(int(table["index"][ok[k]]) for k in per.values())}
    if best is None:
        return {"why_not": "no configuration is ok in every scenario"}
    del best["first"]
    return best


def front_rows(table, front):
    """Row positions of a stored front's points (in the order of the first objective)."""
    rows = np.flatnonzero(np.isin(table["index"], front["index"]))
    first = table[front["objectives"][0]][rows]
    order = np.argsort(-first if front["senses"][0] == "max" else first, kind="stable")
    return rows[order]


def front_by_brute_force(table, objectives, senses):
    """Row positions of the ok rows that no other ok row dominates (at least as good in every
    objective, better in one), by comparing every pair: the check on the stored front."""
    ok = np.flatnonzero(table["status"] == "ok")
    values = np.column_stack([table[o][ok] * (-1.0 if s == "max" else 1.0)
                              for o, s in zip(objectives, senses)])
    keep = np.all(np.isfinite(values), axis=1)
    out = []
    for k in np.flatnonzero(keep):
        others = values[keep]
        dominated = np.any(np.all(others <= values[k], axis=1) & np.any(others < values[k], axis=1))
        if not dominated:
            out.append(ok[k])
    return np.array(out, dtype=np.int64)


# ---------------------------------------------------------------------------------------------
# The self-contained page (`prism_results.py html`, `prism report --html`).

PAGE_MAX_ROWS = 100_000     # rows the page holds; beyond, every front point and a sample
PAGE_GZIP_ABOVE = 0         # compress the column blob when it is larger (bytes)
PAGE_TOP = 100              # rows of the page's ranking table
KEY_METRICS = ("step_time_s", "step_time_p50_s", "step_time_p95_s", "step_time_p99_s",
               "p_slow_5pct", "tokens_per_s", "mfu", "memory_per_gpu_gib", "gpu_hours_mean",
               "run_time_p50_days", "time_to_target_p50_days", "time_to_target_p50_s",
               "goodput_tokens_per_s") + MOE_COLUMNS


def _page_rows(table, front_positions, max_rows, seed=0):
    """Row positions the page holds: all of them up to max_rows, else the rows it must keep
    (front points, the ranking table's) and a uniform sample of the others (seeded, so the page
    is reproducible)."""
    n = len(table["index"])
    if n <= max_rows:
        return np.arange(n), False
    keep = np.zeros(n, dtype=bool)
    keep[front_positions] = True
    others = np.flatnonzero(~keep)
    room = max(0, max_rows - int(keep.sum()))
    rng = np.random.default_rng(seed)
    keep[rng.choice(others, size=min(room, others.size), replace=False)] = True
    return np.flatnonzero(keep), True


def _cotune_panels(path, table, rows_label):
    # in days since model version 2026.11.27.2; files before stored seconds
    metric = "time_to_target_p50_days"
    if metric not in table:
        metric = "time_to_target_p50_s"
    if metric not in table or "global_batch" not in table or "tokens_per_s" not in table:
        return None
    per_day = 86400.0 if units(path).get(metric) == "s" else 1.0
    curves = time_to_target(path, metric)
    ok = (table["status"] == "ok") & np.isfinite(table[metric])
    noise = table["b_noise"] if "b_noise" in table else np.full(len(ok), np.nan)
    panels = []
    for bn, by_gpus in curves.items():
        in_noise = ok & ((noise == bn) if bn is not None else np.isnan(noise))
        rows = np.flatnonzero(in_noise)

        def pick(r):
            return {"index": int(table["index"][r]), "label": rows_label(r),
                    "batch": int(table["global_batch"][r]),
                    "days": float(table[metric][r]) / per_day,
                    "tokens_per_s": float(table["tokens_per_s"][r])}
        panels.append({
            "title": "B_noise from B_crit(L)" if bn is None else f"B_noise = {bn:.3g} tokens",
            "b_noise": bn,
            "curves": [{"gpus": g, "batch": c["batch"].tolist(),
                        "best_days": (c["best"] / per_day).tolist(),
                        "throughput_batch": c["throughput_batch"]} for g, c in by_gpus.items()],
            "time_pick": pick(rows[np.argmin(table[metric][rows])]) if rows.size else None,
            "throughput_pick": pick(rows[np.argmax(table["tokens_per_s"][rows])])
            if rows.size else None,
        })
    return {"metric": metric, "panels": panels}


def _elapsed(created, updated):
    from datetime import datetime
    try:
        a = datetime.fromisoformat(created.replace("Z", "+00:00"))
        b = datetime.fromisoformat(updated.replace("Z", "+00:00"))
    except ValueError:
        return ""
    seconds = int((b - a).total_seconds())
    if seconds < 0:
        return ""
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m:02d}m {s:02d}s" if h else f"{m}m {s:02d}s"


def page_data(path, max_rows=PAGE_MAX_ROWS, gzip_above=PAGE_GZIP_ABOVE):
    """Everything the page shows, as (data, blob): `data` a JSON-able dict (header, counts,
    dimensions, column layout, fronts as row positions in the page, per-front-point details of
    `point_details`, [cotune] panels, /verify rows); `blob` the bytes of the columns (float32
    metrics, float64 index and numeric parameters, uint8/uint16 enumeration codes), gzip-
    compressed when larger than gzip_above (default: always). Row positions refer to the page's rows
    (data["rows"] maps them to the file's rows)."""
    import gzip
    h = header(path)
    full, keys = _load(path)
    u = units(path)
    with _open(path) as f:
        point_names = [_as_str(n) for n in f["points"].attrs["columns"]]
        enums = {}
        for name in point_names + ["status"]:
            enum = h5py.check_enum_dtype(f["points"][name].dtype)
            if enum is not None:
                enums[name] = [label for label, _ in sorted(enum.items(), key=lambda kv: kv[1])]
        descriptions = {keys[_as_str(n)]: _as_str(f["metrics"][n].attrs.get("description", ""))
                        for n in f["metrics"].attrs["columns"]}
    n = len(full["index"])
    # a front of scenario dimensions is shown as one front per scenario, with the robust pick
    fronts, robust = [], []
    for name in pareto_names(path):
        fr = pareto(path, name)
        if not fr["scenarios"]:
            fronts.append(dict(fr, set=name, scenario=""))
            continue
        groups = {}
        for r in front_rows(full, fr):
            label = " ".join(f"{d}={_scenario_text(full[d][r])}" for d in fr["scenarios"])
            groups.setdefault(label, []).append(full["index"][r])
        for label, members in groups.items():
            fronts.append(dict(fr, name=f"{name} [{label}]", set=name, scenario=label,
                               index=np.array(members, dtype=np.uint64)))
        robust.append(dict(robust_pick(path, name), front=name, dimensions=fr["scenarios"]))
    front_positions = [front_rows(full, fr) for fr in fronts]
    all_front = (np.unique(np.concatenate(front_positions)) if front_positions
                 else np.array([], dtype=np.int64))
    keep = [all_front]  # and the ranking table's rows: the top ok rows by the first objective
    keep += [np.array(list(p["rows"].values()), dtype=np.int64) for p in robust if "rows" in p]
    if fronts:
        first, sense = fronts[0]["objectives"][0], fronts[0]["senses"][0]
        ok = np.flatnonzero((full["status"] == "ok") & np.isfinite(full[first]))
        order = np.argsort(-full[first][ok] if sense == "max" else full[first][ok], kind="stable")
        keep.append(ok[order[:PAGE_TOP]])
    rows, sampled = _page_rows(full, np.unique(np.concatenate(keep)).astype(np.int64), max_rows)
    table = {name: values[rows] for name, values in full.items()} if sampled else full
    position = {int(r): k for k, r in enumerate(rows)}
    dims = dimensions(full, point_names)

    # the column blob
    parts, columns, offset = [], [], 0

    def add(name, kind, values, dtype, labels=None):
        nonlocal offset
        data = np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes()
        code = {"<f4": "f4", "<f8": "f8", "|u1": "u1", "<u2": "u2"}
        entry = {"name": name, "kind": kind, "dtype": code[np.dtype(dtype).newbyteorder("<").str],
                 "offset": offset, "unit": u.get(name, "")}
        if labels is not None:
            entry["labels"] = labels
        if kind == "metric":
            entry["description"] = descriptions.get(name, "")
        columns.append(entry)
        parts.append(data + b"\0" * (-len(data) % 8))
        offset += len(parts[-1])

    def add_labels(name, kind, labels_of_rows, labels):
        present, inverse = np.unique(labels_of_rows, return_inverse=True)
        code = {label: k for k, label in enumerate(labels)}
        codes = np.array([code[str(v)] for v in present], dtype=np.int64)[inverse]
        add(name, kind, codes, "u1" if len(labels) < 256 else "u2", labels)

    add("index", "index", table["index"].astype(np.float64), "f8")
    add_labels("status", "status", table["status"], enums["status"])
    for name in point_names:
        if name in enums:
            add_labels(name, "param", table[name], enums[name])
        else:  # float64: labels print them as the file holds them
            add(name, "param", table[name].astype(np.float64), "f8")
    for key in keys.values():
        add(key, "metric", table[key].astype(np.float64), "f4")
    blob = b"".join(parts)
    compressed = len(blob) > gzip_above
    if compressed:
        blob = gzip.compress(blob, compresslevel=6, mtime=0)

    details = {}
    for k, fr in enumerate(fronts):
        for r in front_positions[k]:
            details[str(position[int(r)])] = point_details(table, position[int(r)], dims)
    counts = {label: int(np.sum(full["status"] == label)) for label in STATUS_LABELS}
    reasons = {}  # grouped with their numbers blanked: "memory N GiB > N GiB capacity ..."
    for reason in full["reason"][full["status"] == "infeasible"]:
        key = re.sub(r"\d+(\.\d+)?", "N", reason)
        count, example = reasons.get(key, (0, reason))
        reasons[key] = (count + 1, example)
    reasons = {f"{key} (e.g. {example})": count for key, (count, example) in reasons.items()}
    fails = failures(path)
    filt = filtered(path)
    v = verify(path)
    verify_data = None
    if v is not None and len(v["index"]):
        quantities = [q for q in ("mean", "p50", "p95", "p99") if f"{q}_mc_s" in v]
        by_index = {int(i): r for r, i in enumerate(full["index"])}
        verify_data = {"samples": v["samples"], "quantities": quantities, "rows": [
            dict({"index": int(i), "ks": float(v["ks"][k]),
                  "label": (config_label(full, by_index[int(i)], dims)
                            if int(i) in by_index else "")},
                 **{q: [float(v[f"{q}_analytic_s"][k]), float(v[f"{q}_mc_s"][k]),
                        float(v[f"{q}_diff_s"][k])] for q in quantities})
            for k, i in enumerate(v["index"])]}
    included = h.get("included_file_names", [])
    data = {
        "header": {key: h.get(key) for key in (
            "experiment_name", "experiment_toml", "experiment_sha256", "seed", "model_version",
            "program_version", "status", "space_size", "next_index", "rows_committed",
            "created", "updated")},
        "elapsed": _elapsed(str(h.get("created", "")), str(h.get("updated", ""))),
        "included_files": included if isinstance(included, list) else [included],
        "counts": counts,
        "filtered": sorted(((r, c) for r, c in filt.items()), key=lambda rc: -rc[1]),
        "filtered_total": int(sum(filt.values())),
        "infeasible_reasons": sorted(reasons.items(), key=lambda rc: -rc[1])[:10],
        "failures": [(f"{i}: {m}", 1) for i, m in fails[:10]],
        "rows_total": n, "rows_shown": int(len(rows)), "sampled": bool(sampled),
        "rows": rows.tolist() if sampled else None,
        "dimensions": dims,
        "columns": columns,
        "blob": {"bytes": len(blob), "gzip": compressed},
        "fronts": [{"name": fr["name"], "set": fr["set"], "scenario": fr["scenario"],
                    "objectives": fr["objectives"], "senses": fr["senses"],
                    "rows": [position[int(r)] for r in front_positions[k]]}
                   for k, fr in enumerate(fronts)],
        "robust": [dict({key: p[key] for key in ("front", "dimensions", "why_not") if key in p},
                        **({"worst": p["worst"],
                            "scenarios": [[s, p["regret"][s], position[p["rows"][s]]]
                                          for s in p["rows"]],
                            "label": config_label(full, next(iter(p["rows"].values())),
                                                  [d for d in dims if d not in p["dimensions"]])}
                           if "rows" in p else {}))
                   for p in robust],
        "details": details,
        "breakdown_labels": list(breakdown_labels(table)),
        "step_quantiles": step_time_quantiles(table),
        "slow": slow_metrics(table),
        "sensitivity": sensitivity_metrics(table),
        "run_quantiles": run_time_quantiles(table),
        "deadlines": deadline_metrics(table),
        "key_metrics": [m for m in KEY_METRICS if m in table],
        "cotune": _cotune_panels(path, full, lambda r: config_label(full, r, dims)),
        "verify": verify_data,
        "top": PAGE_TOP,
    }
    return data, blob


PAGE_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 auto; max-width: 1280px; padding: 0 16px;
       color: #222; background: #fff; }
h1 { font-size: 22px; margin: 18px 0 6px; } h2 { font-size: 18px; margin: 26px 0 6px;
     border-bottom: 1px solid #ddd; } h3 { font-size: 15px; margin: 14px 0 4px; }
dl#study { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: 0; }
dt { color: #555; } dd { margin: 0; font-family: ui-monospace, monospace; word-break: break-all; }
.controls label { margin-right: 14px; } .note { color: #555; font-size: 13px; }
.plot { width: 100%; min-height: 60px; }
table.sortable { border-collapse: collapse; font-size: 12px; margin-bottom: 10px; }
table.sortable th { background: #f3f3f3; cursor: pointer; position: sticky; top: 0;
                    padding: 3px 6px; text-align: left; white-space: nowrap; }
table.sortable th[data-sort=asc]::after { content: " \\25b2"; }
table.sortable th[data-sort=desc]::after { content: " \\25bc"; }
table.sortable td { padding: 2px 6px; border-top: 1px solid #eee; white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.scroll { overflow-x: auto; max-height: 600px; overflow-y: auto; }
#page-errors { color: #b00; white-space: pre-wrap; border: 2px solid #b00; padding: 6px; }
pre { background: #f7f7f7; padding: 8px; overflow: auto; max-height: 400px; }
"""

PAGE_BODY = """
<div id="page-errors" hidden></div>
<h1>PRISM study: <span id="title"></span></h1>
<p class="note">Written by prism_results.py from <code id="source"></code>. Everything on this
page is in this one file (plotly.js included); it needs no network.</p>
<section id="header-section"><h2>Study</h2><dl id="study"></dl><div id="reasons"></div>
<details><summary>experiment file</summary><pre id="toml"></pre></details></section>
<section id="front-section"><h2>Pareto front</h2>
<p id="sample-note" class="note" hidden></p>
<div class="controls">
<label>front <select id="front-select"></select></label>
<label>x <select id="x-select"></select></label>
<label><input type="checkbox" id="logx"> log x</label>
<label>y <select id="y-select"></select></label>
<label><input type="checkbox" id="logy"> log y</label>
<label>colour by <select id="colour-select"></select></label></div>
<p class="note">Every ok and dominated point (dominated: pruned by their bounds, faded); the
front's points are diamonds. Hover for the configuration; click a point to add it to the panels
below (click again to remove).</p>
<p id="scatter-note" class="note"></p>
<div id="front" class="plot"></div></section>
<section id="points-section"><h2>Front points and selected points</h2>
<p class="note"><span id="detail-note"></span>Points are named by their index (#); the table
gives their configurations.</p>
<div class="scroll"><table id="detail-table" class="sortable"></table></div>
<div class="controls"><label><input type="checkbox" id="cdf-relative"> step time relative to
each point's p50</label></div>
<div id="cdf" class="plot"></div><div id="pslow" class="plot"></div>
<div id="breakdown" class="plot"></div>
<p class="note">The breakdown is the busiest pipeline stage's deterministic step as the result
file stores it: exposed_comm_s (TP + CP + FSDP + DP communication and blocking pipeline transfers not hidden), bubble_fraction
x step_time_s, with an MoE model moe_a2a_exposed_s (the dispatch and combine all-to-all not
hidden), and the rest of step_time_s (compute, embedding, LM head and loss, optimizer,
host-bound stretch); <code>prism eval</code> splits a point further. The tables show an MoE
model's lines (moe_*_s) and the routing imbalance's share of p50 and p95 (routing_share_*). The hatched bar is p95
minus the deterministic step.</p>
<div id="sensitivity" class="plot"></div><div id="runtime" class="plot"></div></section>
<section id="scenario-section" hidden><h2>Scenarios: the robust pick</h2>
<p class="note">The front is computed per scenario (the dimensions [space] scenarios names, e.g.
b_noise: what is uncertain, not chosen); the front selector lists one per scenario. The robust
pick is the configuration, ok in every scenario, whose worst regret is least: regret in a
scenario is how much worse (relative, in the worse objective) it is than the nearest point of
that scenario's front.</p><div id="scenario-picks"></div></section>
<section id="cotune-section" hidden><h2>Co-tuning: time to target against batch</h2>
<p class="note">Best time to target over the other parameters per GPU count and batch; x: each
GPU count's highest-throughput batch; star: the configuration that reaches the target first;
open circle: the one with the most tokens/s.</p>
<div id="cotune" class="plot"></div><ul id="cotune-picks"></ul></section>
<section id="verify-section" hidden><h2>Monte Carlo verification of the front</h2>
<p id="verify-note" class="note"></p><div class="scroll"><table id="verify-table"
class="sortable"></table></div></section>
<section id="tables-section"><h2>Tables</h2><p class="note">Click a column's header to sort.</p>
<div id="tables" class="scroll"></div></section>
"""


def _script_text(text):
    """Text safe inside <script>: no "</" that could close the element."""
    return text.replace("</", "<\\/")


def write_html(path, output, max_rows=PAGE_MAX_ROWS, gzip_above=PAGE_GZIP_ABOVE):
    """Writes the self-contained interactive page of a result file; returns its size in bytes.
    plotly.js comes from Debian's python3-plotly and is embedded."""
    import base64
    import html
    import json
    import os
    import gzip
    try:
        from plotly.offline import get_plotlyjs
    except ImportError:
        raise ResultFileError("the page needs plotly (Debian package python3-plotly)") from None
    # Debian's plotly.js is not minified (8.7 MB): the page holds it gzip-compressed (1.9 MB)
    # and its script decompresses it with the browser's DecompressionStream.
    plotly_gz = gzip.compress(get_plotlyjs().encode("utf-8"), compresslevel=6, mtime=0)
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        with open(os.path.join(here, "prism_page.js")) as f:
            page_js = f.read()
    except OSError as e:
        raise ResultFileError(f"cannot read the page's script beside {__file__}: {e}") from None
    data, blob = page_data(path, max_rows, gzip_above)
    title = html.escape(f"PRISM: {data['header']['experiment_name']}")
    name = html.escape(str(data["header"]["experiment_name"]))
    body = PAGE_BODY.replace('<span id="title"></span>', f'<span id="title">{name}</span>')
    body = body.replace('<code id="source"></code>',
                        f'<code id="source">{html.escape(os.path.basename(str(path)))}</code>')
    text = "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
        f"<title>{title}</title>\n<style>{PAGE_CSS}</style>\n",
        "</head><body>\n", body,
        '<script id="plotly-gz" type="application/octet-stream">',
        base64.b64encode(plotly_gz).decode("ascii"), "</script>\n",
        '<script id="prism-data" type="application/json">',
        _script_text(json.dumps(_clean(data), allow_nan=False)), "</script>\n",
        '<script id="prism-blob" type="text/plain">', base64.b64encode(blob).decode("ascii"),
        "</script>\n<script>", _script_text(page_js), "</script>\n</body></html>\n"])
    tmp = f"{output}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, output)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ResultFileError(f"{output}: cannot write: {e}") from None
    return len(text.encode("utf-8"))


def _clean(value):
    """JSON-able copy: numpy scalars and arrays as Python ones, NaN and infinities as None."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_clean(v) for v in value.tolist()]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if np.isfinite(value) else None
    return value


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _point_names(path):
    with _open(path) as f:
        return [_as_str(n) for n in f["points"].attrs["columns"]]


def chosen_rows(path, table, front=None, top=None, by=None, indices=None):
    """Row positions of the points a static plot shows: the design-space `indices`, or the `top`
    ok points by `by` (smallest first; default the highest step-time quantile), or the points of
    the stored front `front` (default: the first stored front), in the order of its first
    objective."""
    if indices:
        where = {int(i): r for r, i in enumerate(table["index"])}
        missing = [i for i in indices if int(i) not in where]
        if missing:
            raise ResultFileError(f"{path}: no row with index {missing[0]}")
        return np.array([where[int(i)] for i in indices], dtype=np.int64)
    if top is not None or not pareto_names(path):
        quantiles = step_time_quantiles(table)
        by = by or (quantiles[-1][1] if quantiles else "step_time_s")
        if by not in table:
            raise ResultFileError(f"{path}: no column {by!r}")
        ok = np.flatnonzero((table["status"] == "ok") & np.isfinite(table[by]))
        return ok[np.argsort(table[by][ok], kind="stable")[:top or 10]]
    names = pareto_names(path)
    name = front or names[0]
    if name not in names:
        raise ResultFileError(f"{path}: no pareto set {name!r} (have {names})")
    return front_rows(table, pareto(path, name))


def _savefig(fig, output):
    try:
        fig.savefig(output, dpi=120, bbox_inches="tight")
    except (OSError, ValueError) as e:
        raise ResultFileError(f"{output}: cannot write: {e}") from None


def plot_pareto(path, x, y, output, front=None):
    """Scatter of metric y against metric x: the ok points, the dominated ones faded, the
    Pareto front (the stored front `front`, or the first stored one) highlighted with each
    front point labelled by its configuration."""
    plt = _pyplot()
    table = load(path)
    u = units(path)
    for name in (x, y):
        if name not in table:
            raise ResultFileError(f"{path}: no column {name!r}")
    dims = dimensions(table, _point_names(path))
    fin = np.isfinite(table[x]) & np.isfinite(table[y])
    ok = (table["status"] == "ok") & fin
    dominated = (table["status"] == "dominated") & fin
    fig, ax = plt.subplots(figsize=(8.0, 5.6))
    if dominated.any():
        ax.scatter(table[x][dominated], table[y][dominated], s=7, color="0.75", alpha=0.5,
                   label=f"dominated ({int(dominated.sum())})")
    ax.scatter(table[x][ok], table[y][ok], s=10, color="C0", alpha=0.7,
               label=f"ok ({int(ok.sum())})")
    names = pareto_names(path)
    if front is None and names:
        front = names[0]
    if front is not None:
        rows = [r for r in chosen_rows(path, table, front=front) if fin[r]]
        rows.sort(key=lambda r: table[x][r])
        ax.plot(table[x][rows], table[y][rows], "D-", color="C3", ms=6,
                label=f"front {front} ({len(rows)})")
        step = max(1, len(rows) // 12)
        for r in rows[::step]:
            ax.annotate(config_label(table, r, dims), (table[x][r], table[y][r]), fontsize=6.5,
                        xytext=(5, 4), textcoords="offset points")
    for axis, name, setter in ((table[x], x, ax.set_xscale), (table[y], y, ax.set_yscale)):
        v = axis[ok | dominated]
        if v.size and np.min(v) > 0 and np.max(v) / np.min(v) >= 100:
            setter("log")
    ax.set_xlabel(f"{x} [{u.get(x, '')}]")
    ax.set_ylabel(f"{y} [{u.get(y, '')}]")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _savefig(fig, output)
    plt.close(fig)


def _labels(table, rows, path):
    dims = dimensions(table, _point_names(path))
    return [f"#{int(table['index'][r])} {config_label(table, r, dims)}" for r in rows]


def plot_quantiles(path, output, top=None, by=None, front=None, indices=None):
    """Quantile fan per point: each stored quantile from p50 up as a multiple of the point's
    own p50 (or of its lowest stored quantile without p50), so the widths of distributions of
    16 s and 64 s steps compare on one axis that starts at 1 (p50), not at zero; one row per
    point, labelled by its configuration and its p50 in seconds. The points: a front's
    (default), the `top` ok points by `by`, or `indices`."""
    plt = _pyplot()
    table = load(path)
    quantiles = [(q, n) for q, n in step_time_quantiles(table) if q >= 0.5]
    if not quantiles:
        raise ResultFileError(f"{path}: no step_time_p*_s metrics from p50 up")
    base = f"p{100 * quantiles[0][0]:.4g}"  # p50 when stored, else the lowest stored
    rows = chosen_rows(path, table, front, top, by, indices)
    rows = [r for r in rows if np.isfinite(table[quantiles[0][1]][r])]
    if not rows:
        raise ResultFileError(f"{path}: no point with step-time quantiles to plot")
    labels = [f"{label}  ({base} {table[quantiles[0][1]][r]:.4g} s)"
              for label, r in zip(_labels(table, rows, path), rows)]
    fig, ax = plt.subplots(figsize=(9.0, 1.2 + 0.42 * len(rows)))
    markers = "o^sDvP*X"
    for k, r in enumerate(rows):
        values = [table[n][r] / table[quantiles[0][1]][r] for _, n in quantiles]
        ax.plot([values[0], values[-1]], [k, k], "-", color="0.6", lw=5, alpha=0.5,
                solid_capstyle="butt")
        for j, ((q, _), v) in enumerate(zip(quantiles, values)):
            ax.plot(v, k, markers[j % len(markers)], color=f"C{j}", ms=6,
                    label=f"p{100 * q:.4g}" if k == 0 else None)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(f"step time / the point's {base}")
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(ncol=len(quantiles), fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              frameon=False)
    fig.tight_layout()
    _savefig(fig, output)
    plt.close(fig)


def plot_cdf(path, output, top=None, by=None, front=None, indices=None):
    """The step-time CDF of each point through its stored quantiles, on a tail scale
    (-log10(1 - q): p50, p90, p99, p99.9 equally spaced) and a step-time axis that starts near
    the smallest p50, in seconds, or as a multiple of each point's p50 when the points' p50s
    differ by more than 1.5x; one line per point, labelled by its configuration."""
    plt = _pyplot()
    table = load(path)
    quantiles = [(q, n) for q, n in step_time_quantiles(table) if q >= 0.5]
    if not quantiles:
        raise ResultFileError(f"{path}: no step_time_p*_s metrics")
    rows = chosen_rows(path, table, front, top, by, indices)
    rows = [r for r in rows if np.isfinite(table[quantiles[0][1]][r])]
    if not rows:
        raise ResultFileError(f"{path}: no point with step-time quantiles to plot")
    labels = _labels(table, rows, path)
    p50 = np.array([table[quantiles[0][1]][r] for r in rows])
    relative = len(rows) > 1 and np.max(p50) / np.min(p50) > 1.5
    fig, ax = plt.subplots(figsize=(9.0, 5.0))
    y = [-np.log10(1 - q) for q, _ in quantiles]
    for k, (r, label) in enumerate(zip(rows, labels)):
        scale = p50[k] if relative else 1.0
        ax.plot([table[n][r] / scale for _, n in quantiles], y, "o-", ms=4, color=f"C{k % 10}",
                label=label + (f"  (p50 {p50[k]:.4g} s)" if relative else ""))
    ax.set_yticks(y)
    ax.set_yticklabels([f"p{100 * q:.4g}" for q, _ in quantiles])
    ax.set_xlabel("step time / the point's p50" if relative else "step time [s]")
    ax.set_ylabel("quantile (tail scale)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=6.5, loc="lower right")
    fig.tight_layout()
    _savefig(fig, output)
    plt.close(fig)


def plot_breakdown(path, output, top=None, by=None, front=None, indices=None):
    """The deterministic step of each point as a stacked bar (`breakdown`: the rest of the
    step, exposed TP + CP + FSDP + DP communication, the pipeline bubble, with an MoE model the
    exposed all-to-all; they sum to step_time_s)
    with p95 minus the deterministic step beside it, labelled by configuration."""
    plt = _pyplot()
    table = load(path)
    rows = [r for r in chosen_rows(path, table, front, top, by, indices) if breakdown(table, r)]
    if not rows:
        raise ResultFileError(f"{path}: no point with a deterministic breakdown "
                              "(step_time_s, exposed_comm_s, bubble_fraction)")
    labels = _labels(table, rows, path)
    fig, ax = plt.subplots(figsize=(9.0, 1.4 + 0.42 * len(rows)))
    left = np.zeros(len(rows))
    colours = ("#4c72b0", "#dd8452", "#55a868", "#8172b3")
    for k, name in enumerate(breakdown_labels(table)):
        widths = np.array([breakdown(table, r)[k][1] for r in rows])
        ax.barh(range(len(rows)), widths, left=left, color=colours[k], label=name)
        left += widths
    if "step_time_p95_s" in table:
        extra = np.array([table["step_time_p95_s"][r] - table["step_time_s"][r] for r in rows])
        ax.barh(range(len(rows)), np.nan_to_num(extra), left=left, color="#c44e52", alpha=0.5,
                hatch="//", label="p95 - deterministic step")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step (the busiest pipeline stage)")
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    _savefig(fig, output)
    plt.close(fig)


def plot_sensitivity(path, output, top=None, by=None, front=None, indices=None):
    """The drop in p95 step time when each kernel class is made deterministic
    (sens_p95_<class>_s), grouped bars per class, one colour per point."""
    plt = _pyplot()
    table = load(path)
    sens = sensitivity_metrics(table)
    if not sens:
        raise ResultFileError(f"{path}: no sens_p95_*_s metrics ([evaluation] sensitivity)")
    rows = [r for r in chosen_rows(path, table, front, top, by, indices)
            if any(np.isfinite(table[n][r]) for _, n in sens)]
    if not rows:
        raise ResultFileError(f"{path}: no point with sensitivities to plot")
    labels = _labels(table, rows, path)
    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(sens) * max(1, len(rows)) ** 0.5), 5.0))
    width = 0.8 / len(rows)
    for k, (r, label) in enumerate(zip(rows, labels)):
        ax.bar(np.arange(len(sens)) + k * width, [table[n][r] for _, n in sens], width,
               color=f"C{k % 10}", label=label)
    ax.set_xticks(np.arange(len(sens)) + 0.4 - width / 2)
    ax.set_xticklabels([c for c, _ in sens], rotation=30, ha="right")
    ax.set_ylabel("drop in p95 step time [s]")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=6.5)
    fig.tight_layout()
    _savefig(fig, output)
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
    for command, text in (("quantiles", "step-time quantile fan per point (axis from p50)"),
                          ("cdf", "step-time CDF per point on a tail scale"),
                          ("breakdown", "deterministic step breakdown per point, stacked"),
                          ("sensitivity", "p95 drop per kernel class per point")):
        p = sub.add_parser(command, help=text + "; the points: a front's (default), --top N "
                           "by --by, or --index i,j")
        p.add_argument("file")
        p.add_argument("--front", help="stored pareto set whose points to show")
        p.add_argument("--top", type=int, help="the N ok points with the smallest --by")
        p.add_argument("--by", help="metric to rank by (default: the highest step-time quantile)")
        p.add_argument("--index", help="design-space indices, comma-separated")
        p.add_argument("-o", "--output", required=True, help="PNG, SVG or PDF (by extension)")
    p = sub.add_parser("time-to-target",
                       help="[cotune] time to target against global batch per GPU count")
    p.add_argument("file")
    p.add_argument("--metric", default="time_to_target_p50_days")
    p.add_argument("-o", "--output", required=True)
    p = sub.add_parser("html", help="the self-contained interactive page of a study")
    p.add_argument("file")
    p.add_argument("-o", "--output", required=True)
    p.add_argument("--max-rows", type=int, default=PAGE_MAX_ROWS,
                   help="rows the page holds; beyond, every front point and a random sample")
    p.add_argument("--gzip-above", type=int, default=PAGE_GZIP_ABOVE, help=argparse.SUPPRESS)
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
        elif args.command == "html":
            size = write_html(args.file, args.output, args.max_rows, args.gzip_above)
            print(f"{args.output}: {size / 1e6:.1f} MB")
        elif args.command == "qq":
            plot_qq(args.file, args.output)
        else:
            indices = None
            if args.index:
                try:
                    indices = [int(i) for i in args.index.split(",") if i.strip()]
                except ValueError:
                    raise ResultFileError(
                        f"--index: not a list of integers: {args.index!r}") from None
            plotter = {"quantiles": plot_quantiles, "cdf": plot_cdf, "breakdown": plot_breakdown,
                       "sensitivity": plot_sensitivity}[args.command]
            plotter(args.file, args.output, args.top, args.by, args.front, indices)
    except ResultFileError as e:
        print(f"prism_results: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
