"""Scenario fronts and the robust pick of a study, checked by brute force with h5py alone.

Truth: the ok rows of /points and /metrics. For each scenario (the values of the front's
`scenarios` dimensions) the non-dominated ok rows by pairwise comparison; their union must be
the stored front. The robust pick: for every configuration (the other point columns) ok in
every scenario, regret(c, s) = min over the scenario's front of max_j c_j / f_j - 1 (clipped at
0), worst over the scenarios; the least worst (ties: the smallest index) must be what `prism
report` printed and what prism_results.robust_pick and the page's data say.

Usage: /usr/bin/python3 tests/cli/check_scenarios.py FILE.h5 REPORT.txt SOURCE_DIR
"""
import re
import sys

import h5py
import numpy as np


def main(path, report_path, src):
    sys.path.insert(0, f"{src}/scripts")
    import prism_results as pr

    with h5py.File(path, "r") as f:
        rows = int(f.attrs["rows_committed"])
        pts = f["points"]
        names = [n.decode() if isinstance(n, bytes) else str(n) for n in pts.attrs["columns"]]
        status_enum = h5py.check_enum_dtype(pts["status"].dtype)
        ok_code = status_enum["ok"]
        status = pts["status"][:rows]
        index = pts["index"][:rows]
        columns = {n: pts[n][:rows] for n in names}
        g = f["pareto"]["objectives"]
        objectives = [o.decode() if isinstance(o, bytes) else str(o) for o in g.attrs["objectives"]]
        senses = [s.decode() if isinstance(s, bytes) else str(s) for s in g.attrs["senses"]]
        scenarios = [s.decode() if isinstance(s, bytes) else str(s) for s in g.attrs["scenarios"]]
        stored = sorted(int(i) for i in g["index"][:])
        values = np.column_stack([f["metrics"][o][:rows] for o in objectives])
    problems = []
    assert scenarios == ["b_noise"], scenarios
    ok = [r for r in range(rows) if status[r] == ok_code and np.all(np.isfinite(values[r]))]
    scen = {r: tuple(columns[d][r] for d in scenarios) for r in ok}
    conf = {r: tuple(columns[n][r] for n in names if n not in scenarios) for r in ok}
    sign = np.array([-1.0 if s == "max" else 1.0 for s in senses])

    def dominates(a, b):
        x, y = values[a] * sign, values[b] * sign
        return bool(np.all(x <= y) and np.any(x < y))

    keys = sorted(set(scen.values()))
    fronts = {k: [r for r in ok if scen[r] == k and
                  not any(dominates(q, r) for q in ok if scen[q] == k)] for k in keys}
    brute = sorted(int(index[r]) for k in keys for r in fronts[k])
    if brute != stored:
        problems.append(f"stored front {stored} != per-scenario brute force {brute}")
    if len(keys) < 2 or any(not fronts[k] for k in keys):
        problems.append(f"expected a front in each of >= 2 scenarios: {fronts}")
    # the fronts mix no scenarios: a point of one scenario may dominate a front point of another
    # (that is why fronts are per scenario); report whether it happens here
    cross = sum(1 for k in keys for r in fronts[k] for q in ok if scen[q] != k and dominates(q, r))
    print(f"per-scenario fronts: {[len(fronts[k]) for k in keys]} points; "
          f"{cross} (front point, other-scenario point) pairs where the other dominates")

    def regret(r, k):
        best = np.inf
        for fr in fronts[k]:
            worst = 0.0
            for j, s in enumerate(senses):
                c, v = values[r][j], values[fr][j]
                worst = max(worst, v / c - 1 if s == "max" else c / v - 1)
            best = min(best, worst)
        return best

    by_conf = {}
    for r in ok:
        by_conf.setdefault(conf[r], {})[scen[r]] = r
    best = None
    for c, per in by_conf.items():
        if len(per) != len(keys):
            continue
        worst = max(regret(r, k) for k, r in per.items())
        first = min(int(index[r]) for r in per.values())
        if best is None or (worst, first) < best[:2]:
            best = (worst, first, sorted(int(index[r]) for r in per.values()))
    assert best is not None, "no configuration is ok in every scenario"
    print(f"robust pick by brute force: indices {best[2]}, worst regret {100 * best[0]:.4f}%")

    report = open(report_path).read()
    m = re.search(r"Robust pick across scenarios .*: worst regret ([0-9.]+)%", report)
    if not m:
        problems.append("report: no robust pick line")
    else:
        if abs(float(m.group(1)) - 100 * best[0]) > 0.006:
            problems.append(f"report: worst regret {m.group(1)}% != {100 * best[0]:.4f}%")
        table = report[m.end():].split("\n\n")[0].splitlines()[4:]
        shown = sorted(int(line.split()[0]) for line in table if line.strip())
        if shown != best[2]:
            problems.append(f"report: robust pick rows {shown} != {best[2]}")
    for k in keys:
        label = "b_noise=" + f"{k[0]:g}"
        if f"scenario {label}: {len(fronts[k])} points" not in report:
            problems.append(f"report: no 'scenario {label}: {len(fronts[k])} points'")

    mine = pr.robust_pick(path)
    if mine.get("index") != best[2] or abs(mine["worst"] - best[0]) > 1e-12:
        problems.append(f"prism_results.robust_pick {mine} != brute force {best}")
    data, _ = pr.page_data(path)
    page_fronts = {fr["scenario"]: sorted(int(index[data["rows"][r]] if data["rows"] else
                                              index[r]) for r in fr["rows"])
                   for fr in data["fronts"] if fr["set"] == "objectives"}
    want = {"b_noise=" + f"{k[0]:g}": sorted(int(index[r]) for r in fronts[k]) for k in keys}
    if page_fronts != want:
        problems.append(f"page fronts {page_fronts} != {want}")
    if len(data["robust"]) != 1 or abs(data["robust"][0]["worst"] - best[0]) > 1e-12:
        problems.append(f"page robust pick {data['robust']} != {best}")
    for p in problems:
        print("FAIL", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
