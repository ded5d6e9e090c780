#!/usr/bin/python3
"""Loads a study page (`prism report FILE --html PAGE`) in Debian's headless chromium from a
file:// URL with networking disabled, and checks what a reader would see:

- the page finished drawing (body data-ready="ok") with no console messages, no page errors
  (its error box stays hidden) and no network request (chromium runs with a dead proxy and a
  host resolver that refuses everything, and its net log, --log-net-log, must show no request
  made by the page);
- the DOM holds the drawn panels: the front scatter with at least one point per front point
  and the other points, a step-time CDF with one line per front point, a breakdown with bars,
  and the sortable tables; the co-tuning panel when asked;
- a screenshot in which each of those panels' regions is not blank (enough non-white pixels
  and distinct colours).

Usage: /usr/bin/python3 tests/python/check_page.py PAGE.html WORKDIR [--panels front,cdf,...]
           [--front-points N] [--min-points N] [--tables ID,...] [--fragment x=M&y=M]
Prints "ok: ..." and exits 0, or prints what failed and exits 1.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from html.parser import HTMLParser

CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-extensions", "--disable-default-apps", "--hide-scrollbars", "--mute-audio",
    # networking off: every host resolves to nothing and every request goes to a dead proxy
    "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
    "--proxy-bypass-list=<-loopback>",
    "--enable-logging=stderr", "--v=0", "--virtual-time-budget=30000",
    "--run-all-compositor-stages-before-draw", "--force-device-scale-factor=1",
]


def chromium():
    for name in ("chromium", "chromium-browser"):
        path = shutil.which(name)
        if path:
            return path
    return None


def run_chromium(url, workdir, extra, width, height, timeout=100, tries=3):
    """One headless chromium run in a fresh profile; a run that hangs (seen once under heavy
    load) is killed with its whole process group and tried again."""
    for attempt in range(tries):
        profile = tempfile.mkdtemp(prefix="profile.", dir=workdir)
        command = [chromium()] + CHROMIUM_FLAGS + [
            f"--user-data-dir={profile}", f"--window-size={width},{height}"] + extra + [url]
        p = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, HOME=profile), start_new_session=True)
        try:
            out, err = p.communicate(timeout=timeout)
            shutil.rmtree(profile, ignore_errors=True)
            return subprocess.CompletedProcess(command, p.returncode, out, err)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.communicate()
            shutil.rmtree(profile, ignore_errors=True)
            print(f"check_page: chromium ran past {timeout} s (try {attempt + 1} of {tries})",
                  file=sys.stderr)
    return subprocess.CompletedProcess(command, -1, "", f"chromium ran past {timeout} s")


class PanelParser(HTMLParser):
    """Counts, per panel id, the plot elements drawn inside it (plotly's svg marks)."""

    PANELS = ("front", "cdf", "pslow", "breakdown", "sensitivity", "runtime", "cotune")
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
            "track", "wbr"}

    def __init__(self):
        super().__init__()
        self.stack = []  # (tag, panel id or None)
        self.counts = {p: {} for p in self.PANELS}
        self.body = {}
        self.ids = set()
        self.tables = {}
        self.table = None
        self.error_box = None
        self.in_error_box = False

    def panel(self):
        for _, p in reversed(self.stack):
            if p:
                return p
        return None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "body":
            self.body = a
        if "id" in a:
            self.ids.add(a["id"])
        if a.get("id") == "page-errors":
            self.error_box = {"hidden": "hidden" in a, "text": ""}
            self.in_error_box = True
        if tag == "table" and "sortable" in (a.get("class") or ""):
            self.table = a.get("id", f"table{len(self.tables)}")
            self.tables[self.table] = 0
        if tag == "tr" and self.table is not None:
            self.tables[self.table] += 1
        panel = a.get("id") if a.get("id") in self.PANELS else None
        inside = panel or self.panel()
        if inside:
            classes = (a.get("class") or "").split()
            for c in classes + [tag]:
                self.counts[inside][c] = self.counts[inside].get(c, 0) + 1
        if tag not in self.VOID:
            self.stack.append((tag, panel))

    def handle_endtag(self, tag):
        if tag == "table":
            self.table = None
        if tag == "div" and self.in_error_box:
            self.in_error_box = False
        for k in range(len(self.stack) - 1, -1, -1):
            if self.stack[k][0] == tag:
                del self.stack[k:]
                break

    def handle_data(self, data):
        if self.in_error_box:
            self.error_box["text"] += data


CONSOLE = re.compile(r":(INFO|WARNING|ERROR|FATAL):CONSOLE[^\]]*\]\s*(.*)")


def console_problems(stderr):
    """Console messages of the page (all of them count: the page logs only errors) and failed
    loads."""
    out = []
    for line in stderr.splitlines():
        m = CONSOLE.search(line)
        if m:
            out.append(m.group(2))
        elif "net::ERR_" in line or "Failed to load resource" in line:
            out.append(line)
    return out


def page_requests(net_log):
    """URLs the page itself asked the network for, from chromium's --log-net-log (requests
    whose network isolation key is the file:// page; chromium's own background requests, which
    the flags mostly switch off, have other keys)."""
    try:
        with open(net_log) as f:
            text = f.read().rstrip()
    except OSError as e:
        return [f"no net log: {e}"]
    if not text.endswith("}"):  # a log whose writer stopped before closing it
        text = text.rstrip(",") + "]}"
    try:
        log = json.loads(text)
    except ValueError as e:
        return [f"unreadable net log: {e}"]
    kinds = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    out = []
    for event in log.get("events", []):
        params = event.get("params", {})
        url = params.get("url", "")
        if kinds.get(event.get("type")) != "URL_REQUEST_START_JOB" or not url:
            continue
        if re.match(r"(file|data|blob|chrome|about):", url):
            continue
        key = params.get("network_isolation_key", "")
        if "file://" in key or params.get("initiator") == "null":
            out.append(url)
    return sorted(set(out))


def blank_regions(png, rects, names):
    """Names of the panels whose screenshot region is blank."""
    import numpy as np
    from matplotlib import image
    pixels = image.imread(png)[..., :3]
    if pixels.dtype != np.uint8:
        pixels = np.round(pixels * 255).astype(np.uint8)
    height, width = pixels.shape[:2]
    out = []
    for name in names:
        r = rects[name]
        y0, y1 = max(0, r["y"]), min(height, r["y"] + r["h"])
        x0, x1 = max(0, r["x"]), min(width, r["x"] + r["w"])
        region = pixels[y0:y1, x0:x1].reshape(-1, 3)
        if region.shape[0] < 1000:
            out.append(f"{name} (outside the screenshot: {r}, image {width}x{height})")
            continue
        non_white = np.mean(np.any(region < 235, axis=1))
        colours = len(np.unique(region[:: max(1, region.shape[0] // 200000)], axis=0))
        if non_white < 0.01 or colours < 8:
            out.append(f"{name} ({100 * non_white:.2f}% non-white pixels, {colours} colours)")
    return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page")
    parser.add_argument("workdir")
    parser.add_argument("--panels", default="front,cdf,pslow,breakdown,runtime",
                        help="panels that must be drawn")
    parser.add_argument("--front-points", type=int, default=1,
                        help="the least number of points of the front's detail lines")
    parser.add_argument("--min-points", type=int, default=1,
                        help="the least number of scatter points in the front panel")
    parser.add_argument("--tables", default="top-table",
                        help="ids of sortable tables that must hold at least one row of data")
    parser.add_argument("--fragment", default="",
                        help="URL fragment choosing the scatter's axes: x=METRIC&y=METRIC")
    parser.add_argument("--width", type=int, default=1280)
    args = parser.parse_args(argv)
    panels = [p for p in args.panels.split(",") if p]
    if chromium() is None:
        print("check_page: chromium is not installed (make deps installs it)", file=sys.stderr)
        return 1
    url = "file://" + os.path.abspath(args.page) + ("#" + args.fragment if args.fragment else "")
    problems = []

    net_log = os.path.join(args.workdir, "netlog.json")
    dom_run = run_chromium(url, args.workdir, ["--dump-dom", f"--log-net-log={net_log}"],
                           args.width, 2000)
    with open(os.path.join(args.workdir, "dom.html"), "w") as f:
        f.write(dom_run.stdout)
    with open(os.path.join(args.workdir, "chromium.log"), "w") as f:
        f.write(dom_run.stderr)
    if dom_run.returncode != 0 or not dom_run.stdout.strip():
        print(f"chromium --dump-dom failed ({dom_run.returncode}):\n{dom_run.stderr[-3000:]}")
        return 1
    problems += [f"console: {m}" for m in console_problems(dom_run.stderr)]
    problems += [f"network request by the page: {u}" for u in page_requests(net_log)]
    dom = PanelParser()
    dom.feed(dom_run.stdout)
    if dom.body.get("data-ready") != "ok":
        problems.append(f"page not ready: data-ready={dom.body.get('data-ready')!r}")
    if dom.error_box is None or not dom.error_box["hidden"] or dom.error_box["text"].strip():
        problems.append(f"page errors: {dom.error_box}")
    rects = json.loads(dom.body.get("data-rects", "{}"))
    for name in panels:
        counts = dom.counts[name]
        if name not in rects:
            problems.append(f"panel {name}: not laid out")
        if counts.get("main-svg", 0) == 0:
            problems.append(f"panel {name}: no plot drawn")
    front_points = dom.counts["front"].get("point", 0)
    if "front" in panels and front_points < args.min_points:
        problems.append(f"front: {front_points} points drawn, expected >= {args.min_points}")
    if "cdf" in panels:
        lines = dom.counts["cdf"].get("trace", 0)
        if lines < args.front_points:
            problems.append(f"cdf: {lines} traces, expected >= {args.front_points}")
    if "breakdown" in panels and dom.counts["breakdown"].get("point", 0) < 3 * args.front_points:
        problems.append(f"breakdown: {dom.counts['breakdown'].get('point', 0)} bars, expected "
                        f">= {3 * args.front_points}")
    if "cotune" in panels and dom.counts["cotune"].get("trace", 0) < 2:
        problems.append("cotune: no curves")
    front_tables = [t for t in dom.tables if t.startswith("front-table-")]
    if not front_tables or dom.tables[front_tables[0]] < args.front_points + 1:
        problems.append(f"front table: {dom.tables}")

    for t in [t for t in args.tables.split(",") if t]:
        if dom.tables.get(t, 0) < 2:
            problems.append(f"table {t}: {dom.tables.get(t, 0)} rows (header included)")

    if not problems:
        bottom = max(r["y"] + r["h"] for r in rects.values()) + 40
        png = os.path.join(args.workdir, "page.png")
        shot = run_chromium(url, args.workdir, [f"--screenshot={png}"], args.width, bottom)
        if shot.returncode != 0 or not os.path.exists(png):
            problems.append(f"screenshot failed ({shot.returncode}): {shot.stderr[-2000:]}")
        else:
            problems += [f"console (screenshot run): {m}" for m in console_problems(shot.stderr)]
            problems += [f"blank panel in the screenshot: {b}"
                         for b in blank_regions(png, rects, panels)]
    if problems:
        print(f"{args.page}: page check failed:")
        for p in problems:
            print("  " + p)
        return 1
    print(f"ok: {args.page}: panels {', '.join(panels)} drawn; {front_points} scatter points; "
          f"tables {dom.tables}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
