// The interactive page of a PRISM result file (`prism_results.py html`, `prism report --html`).
// Reads the JSON in #prism-data and the column blob in #prism-blob (little-endian typed arrays,
// base64, gzip-compressed for large studies) and draws every panel with plotly.js, which the
// page embeds. No network access: everything the page needs is in the file.
"use strict";
(function () {
  const errorBox = document.getElementById("page-errors");
  function reportError(message) {
    errorBox.hidden = false;
    errorBox.textContent += message + "\n";
    console.error("prism page: " + message);
  }
  window.addEventListener("error", (e) => reportError("error: " + e.message));
  window.addEventListener("unhandledrejection", (e) =>
    reportError("error: " + ((e.reason && e.reason.message) || e.reason)));

  const D = JSON.parse(document.getElementById("prism-data").textContent);
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94", "#f7b6d2",
    "#9edae5"];
  const FRONT_COLOUR = "#d62728";
  const PLOT_CONFIG = { displaylogo: false, responsive: true };
  const col = {};  // name -> {values: typed array, labels: [..] or null, unit, kind, description}
  let nRows = 0;

  // ----------------------------------------------------------------------------- data
  function base64Bytes(id) {
    const binary = atob(document.getElementById(id).textContent.trim());
    const bytes = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; ++i) bytes[i] = binary.charCodeAt(i);
    return bytes;
  }
  function gunzip(bytes) {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot decompress the page's data (no DecompressionStream); " +
                      "open the page in a current Chromium, Firefox or Safari");
    }
    return new Response(new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip")));
  }
  async function decodeBlob() {
    const bytes = base64Bytes("prism-blob");
    if (!D.blob.gzip) return bytes.buffer;
    return await gunzip(bytes).arrayBuffer();
  }
  async function loadPlotly() {  // plotly.js, embedded gzip-compressed
    if (typeof Plotly !== "undefined") return;
    const script = document.createElement("script");
    script.textContent = await gunzip(base64Bytes("plotly-gz")).text();
    document.head.append(script);
  }

  const TYPED = { f4: Float32Array, f8: Float64Array, u1: Uint8Array, u2: Uint16Array };

  function buildColumns(buffer) {
    nRows = D.rows_shown;
    for (const c of D.columns) {
      const Type = TYPED[c.dtype];
      col[c.name] = { values: new Type(buffer, c.offset, nRows), labels: c.labels || null,
                      unit: c.unit || "", kind: c.kind, description: c.description || "" };
    }
  }

  const has = (name) => Object.prototype.hasOwnProperty.call(col, name);
  function num(name, r) {
    return has(name) ? Number(col[name].values[r]) : NaN;
  }
  function value(name, r) {
    const c = col[name];
    return c.labels ? c.labels[c.values[r]] : Number(c.values[r]);
  }
  const finite = (v) => typeof v === "number" && Number.isFinite(v);

  function fmt(v) {
    if (typeof v === "string") return v;
    if (v === null || v === undefined || !Number.isFinite(v)) return "–";
    if (Number.isInteger(v) && Math.abs(v) < 1e9) return String(v);
    const a = Math.abs(v);
    if (a !== 0 && (a >= 1e6 || a < 1e-3)) return v.toExponential(3);
    return String(Number(v.toPrecision(4)));
  }
  function fmtRaw(v) {  // a point column's value as prism_results.config_label writes it
    if (typeof v === "string") return v;
    if (!Number.isFinite(v)) return "nan";
    if (Number.isInteger(v) && Math.abs(v) < 1e15) return String(v);
    // Python's "{:.4g}": 4 significant digits, exponent form below 1e-4 and from 1e4
    const exponent = Number(v.toExponential(3).split("e")[1]);
    if (exponent < -4 || exponent >= 4) {
      const [mantissa] = v.toExponential(3).split("e");
      const m = mantissa.includes(".") ? mantissa.replace(/\.?0+$/, "") : mantissa;
      return m + "e" + (exponent < 0 ? "-" : "+") + String(Math.abs(exponent)).padStart(2, "0");
    }
    const fixed = v.toFixed(Math.max(0, 3 - exponent));
    return fixed.includes(".") ? fixed.replace(/\.?0+$/, "") : fixed;
  }
  function label(r) {
    return D.dimensions.map((d) => d + "=" + fmtRaw(value(d, r))).join(" ");
  }
  function shortLabel(r) {
    return "#" + num("index", r);
  }
  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    return e;
  }
  function withUnit(name) {
    const u = has(name) ? col[name].unit : "";
    return u && u !== "1" ? name + " [" + u + "]" : name;
  }

  // ------------------------------------------------------------------ per-point details
  // The same quantities as prism_results.point_details, from the embedded columns; the page
  // checks them against the Python ones for the front points (selfCheck).
  function detail(r) {
    const step = num("step_time_s", r);
    const comm = num("exposed_comm_s", r);
    const bubble = num("bubble_fraction", r) * step;
    // an MoE model's exposed all-to-all is a fourth line, taken out of the rest
    const parts = [step - comm - bubble, comm, bubble];
    if (has("moe_a2a_exposed_s")) {
      const a2a = num("moe_a2a_exposed_s", r);
      parts[0] -= a2a;
      parts.push(a2a);
    }
    const breakdown = parts.every(finite) &&
        has("step_time_s") && has("exposed_comm_s") && has("bubble_fraction")
      ? D.breakdown_labels.map((l, k) => [l, parts[k]])
      : [];
    const p95 = num("step_time_p95_s", r);
    return {
      row: r,
      index: num("index", r),
      label: label(r),
      step_time_s: step,
      mean_s: num("step_time_mean_s", r),
      quantiles: D.step_quantiles.map(([q, name]) => [q, num(name, r)]),
      p_slow: D.slow.map(([l, name]) => [l, num(name, r)]),
      breakdown: breakdown,
      variability_p95_s: p95 - step,
      sensitivity: D.sensitivity.map(([c, name]) => [c, num(name, r)]),
      run_quantiles: D.run_quantiles.map(([q, name]) => [q, num(name, r)]),
      deadlines: D.deadlines.map(([l, days, name]) => [l, days, num(name, r)]),
    };
  }

  function close(a, b) {
    if (a === null || b === null || a === undefined || b === undefined) {
      return (a === null || a === undefined || Number.isNaN(a)) &&
             (b === null || b === undefined || Number.isNaN(b));
    }
    if (typeof a === "string" || typeof b === "string") return a === b;
    if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b);
    return Math.abs(a - b) <= 2e-6 * Math.max(Math.abs(a), Math.abs(b), 1e-12);
  }
  function sameDeep(a, b) {
    if (Array.isArray(a) && Array.isArray(b)) {
      return a.length === b.length && a.every((x, i) => sameDeep(x, b[i]));
    }
    return close(a, b);
  }
  function selfCheck() {
    for (const [row, expected] of Object.entries(D.details)) {
      const got = detail(Number(row));
      for (const key of ["index", "label", "quantiles", "p_slow", "breakdown", "sensitivity",
                         "run_quantiles", "deadlines"]) {
        if (!sameDeep(got[key], expected[key])) {
          reportError("row " + row + ": " + key + " differs from the result file's: " +
                      JSON.stringify(got[key]) + " vs " + JSON.stringify(expected[key]));
        }
      }
    }
  }

  // ----------------------------------------------------------------------------- header
  function renderHeader() {
    const h = D.header;
    const dl = document.getElementById("study");
    const add = (k, v) => { dl.append(el("dt", {}, k), el("dd", {}, v)); };
    add("experiment", h.experiment_name);
    add("status", h.status + " (" + h.next_index + " of " + h.space_size +
        " indices processed)");
    add("rows", Object.entries(D.counts).map(([k, v]) => k + " " + v).join(", ") +
        "; " + D.filtered_total + " filtered before evaluation");
    add("experiment sha256", h.experiment_sha256);
    add("seed", String(h.seed));
    add("model version", h.model_version + " (prism " + h.program_version + ")");
    add("created", h.created);
    add("updated", h.updated + (D.elapsed ? " (" + D.elapsed + " after it was created)" : ""));
    add("swept dimensions", D.dimensions.join(", ") || "(none)");
    if (D.included_files.length) add("profile files", D.included_files.join(", "));
    const reasons = document.getElementById("reasons");
    const lists = [["filtered before evaluation", D.filtered],
                   ["infeasible (the most frequent reasons)", D.infeasible_reasons],
                   ["failed (the first messages)", D.failures]];
    for (const [title, entries] of lists) {
      if (!entries.length) continue;
      reasons.append(el("h3", {}, title));
      const ul = el("ul");
      for (const [text, count] of entries) ul.append(el("li", {}, count + " × " + text));
      reasons.append(ul);
    }
    document.getElementById("toml").textContent = h.experiment_toml;
    if (D.sampled) {
      const note = document.getElementById("sample-note");
      note.hidden = false;
      note.textContent = "This study has " + D.rows_total + " rows; the page holds " +
        D.rows_shown + " of them to stay light: every front point, the top " + D.top +
        " ok rows by the first objective, and the others drawn at random (seed 0). The fronts " +
        "and the tables are complete; the scatter's other points are a sample.";
    }
  }

  // -------------------------------------------------------------------------- the front
  const state = { front: null, x: null, y: null, colour: null, logx: null, logy: null,
                  selected: new Set() };
  const frontByName = {};
  for (const f of D.fronts) frontByName[f.name] = f;

  function options(select, names, chosen) {
    select.textContent = "";
    for (const n of names) {
      const o = el("option", { value: n }, n);
      if (n === chosen) o.selected = true;
      select.append(o);
    }
  }

  function plottableMetrics() {
    return D.columns.filter((c) => c.kind === "metric").map((c) => c.name).filter((name) => {
      const v = col[name].values;
      for (let r = 0; r < nRows; ++r) if (Number.isFinite(v[r])) return true;
      return false;
    });
  }

  function spansDecades(name, rows) {
    let lo = Infinity, hi = -Infinity;
    for (const r of rows) {
      const v = num(name, r);
      if (!Number.isFinite(v)) continue;
      if (v <= 0) return false;
      lo = Math.min(lo, v); hi = Math.max(hi, v);
    }
    return Number.isFinite(lo) && hi / lo >= 100;
  }

  function hoverText(r) {
    const parts = ["<b>index " + num("index", r) + "</b> (" + value("status", r) + ")"];
    for (const c of D.columns) {
      if (c.kind === "param") parts.push(c.name + " = " + fmtRaw(value(c.name, r)));
    }
    const keys = [state.x, state.y].concat(D.key_metrics.filter((m) => m !== state.x &&
                                                                   m !== state.y));
    for (const m of keys) if (has(m)) parts.push(withUnit(m) + ": " + fmt(num(m, r)));
    return parts.join("<br>");
  }

  function colourOf(dim) {
    // category key per row and the ordered keys
    if (!dim || dim === "(none)") return { key: () => "points", keys: ["points"] };
    const seen = new Map();
    for (let r = 0; r < nRows; ++r) {
      const v = value(dim, r);
      if (!seen.has(String(v))) seen.set(String(v), v);
    }
    const keys = Array.from(seen.keys());
    keys.sort((a, b) => {
      const va = seen.get(a), vb = seen.get(b);
      return typeof va === "number" && typeof vb === "number" ? va - vb : 0;
    });
    return { key: (r) => String(value(dim, r)), keys: keys };
  }

  function frontTraceRows() {
    const f = frontByName[state.front];
    if (!f) return [];
    return f.rows.filter((r) => Number.isFinite(num(state.x, r)) && Number.isFinite(num(state.y, r)))
      .sort((a, b) => num(state.x, a) - num(state.x, b));
  }

  let webgl = null;
  function hasWebgl() {
    if (webgl === null) {
      try {
        const canvas = document.createElement("canvas");
        webgl = !!(canvas.getContext("webgl") || canvas.getContext("experimental-webgl"));
      } catch (e) {
        webgl = false;
      }
    }
    return webgl;
  }

  function renderFront() {
    const rows = [];
    const statusCodes = col.status.values, statusLabels = col.status.labels;
    const onFront = new Set(frontByName[state.front] ? frontByName[state.front].rows : []);
    const shown = { ok: 0, dominated: 0 }, missing = { ok: 0, dominated: 0 };
    for (let r = 0; r < nRows; ++r) {
      const s = statusLabels[statusCodes[r]];
      if (s !== "ok" && s !== "dominated") continue;
      if (Number.isFinite(num(state.x, r)) && Number.isFinite(num(state.y, r))) {
        shown[s] += 1;
        if (!onFront.has(r)) rows.push(r);
      } else {
        missing[s] += 1;
      }
    }
    let note = "Drawn: " + shown.ok + " ok and " + shown.dominated + " dominated rows.";
    if (missing.dominated) {
      note += " " + missing.dominated + " dominated rows have no value on these axes: pruning " +
        "skipped their stochastic evaluation, so they hold deterministic metrics only (choose " +
        "e.g. step_time_s, memory_per_gpu_gib or gpus to see them).";
    }
    if (missing.ok) note += " " + missing.ok + " ok rows have no value on these axes.";
    document.getElementById("scatter-note").textContent = note;
    // WebGL beyond 20,000 points, where the browser has it (asked only then: headless
    // browsers log a warning when they fall back to software WebGL)
    const type = rows.length > 20000 && hasWebgl() ? "scattergl" : "scatter";
    const colours = colourOf(state.colour);
    const colourIndex = new Map(colours.keys.map((k, i) => [k, i]));
    const traces = [];
    for (const status of ["ok", "dominated"]) {
      const groups = new Map(colours.keys.map((k) => [k, []]));
      for (const r of rows) {
        if (statusLabels[statusCodes[r]] === status) groups.get(colours.key(r)).push(r);
      }
      for (const [k, rs] of groups) {
        if (!rs.length) continue;
        const name = (colours.keys.length > 1 ? state.colour + "=" + k : "points") +
          (status === "dominated" ? " (dominated)" : "");
        traces.push({
          type: type, mode: "markers", name: name, legendgroup: k,
          x: rs.map((r) => num(state.x, r)), y: rs.map((r) => num(state.y, r)),
          customdata: rs, text: rs.map(hoverText), hovertemplate: "%{text}<extra></extra>",
          marker: { size: status === "ok" ? 7 : 5,
                    color: PALETTE[colourIndex.get(k) % PALETTE.length],
                    opacity: status === "ok" ? 0.85 : 0.22 },
        });
      }
    }
    const fr = frontTraceRows();
    // joined by a line on the front's own objectives only (elsewhere it is no curve)
    const objectives = frontByName[state.front] ? frontByName[state.front].objectives : [];
    const onObjectives = objectives.includes(state.x) && objectives.includes(state.y);
    traces.push({
      type: "scatter", mode: onObjectives ? "lines+markers" : "markers",
      name: "front " + state.front + " (" + fr.length + ")",
      x: fr.map((r) => num(state.x, r)), y: fr.map((r) => num(state.y, r)),
      customdata: fr, text: fr.map(hoverText), hovertemplate: "%{text}<extra></extra>",
      line: { color: FRONT_COLOUR, width: 1.5 },
      marker: { size: 13, symbol: "diamond", line: { color: "#000", width: 1.5 },
                color: fr.map((r) => PALETTE[colourIndex.get(colours.key(r)) % PALETTE.length]) },
    });
    const sel = Array.from(state.selected);
    traces.push({
      type: "scatter", mode: "markers", name: "selected (" + sel.length + ")",
      x: sel.map((r) => num(state.x, r)), y: sel.map((r) => num(state.y, r)),
      customdata: sel, text: sel.map(hoverText), hovertemplate: "%{text}<extra></extra>",
      marker: { size: 16, symbol: "star", color: "#000" },
    });
    const layout = {
      height: 560, margin: { l: 80, r: 20, t: 30, b: 60 }, hovermode: "closest",
      xaxis: { title: withUnit(state.x), type: state.logx ? "log" : "linear", zeroline: false },
      yaxis: { title: withUnit(state.y), type: state.logy ? "log" : "linear", zeroline: false },
      legend: { orientation: "v" },
    };
    const div = document.getElementById("front");
    return Plotly.react(div, traces, layout, PLOT_CONFIG).then(() => {
      if (!div.dataset.bound) {
        div.dataset.bound = "1";
        div.on("plotly_click", (ev) => {
          const p = ev.points && ev.points[0];
          if (!p || p.customdata === undefined) return;
          const r = Number(p.customdata);
          if (state.selected.has(r)) state.selected.delete(r); else state.selected.add(r);
          renderFront();
          renderDetails();
        });
      }
    });
  }

  function setupDetails() {
    // relative to each point's p50 when the front's p50s differ by more than half: on seconds
    // their fans would be a few pixels wide
    const f = frontByName[state.front];
    const p50 = D.step_quantiles.find(([q]) => q === 0.5);
    if (f && p50) {
      const v = f.rows.map((r) => num(p50[1], r)).filter(Number.isFinite);
      document.getElementById("cdf-relative").checked = v.length > 1 &&
        Math.max(...v) / Math.min(...v) > 1.5;
    }
    document.getElementById("cdf-relative").onchange = () => renderDetails();
  }

  function setupFront() {
    const metrics = plottableMetrics();
    const fx = document.getElementById("front-select");
    const xs = document.getElementById("x-select"), ys = document.getElementById("y-select");
    const cs = document.getElementById("colour-select");
    const lx = document.getElementById("logx"), ly = document.getElementById("logy");
    state.front = D.fronts.length ? D.fronts[0].name : null;
    const objectives = state.front ? frontByName[state.front].objectives : [];
    state.x = objectives[1] || metrics[1] || metrics[0];
    state.y = objectives[0] || metrics[0];
    if (objectives.length >= 2) { state.x = objectives[1]; state.y = objectives[0]; }
    state.colour = D.dimensions[0] || "(none)";
    // the URL's fragment may choose them: PAGE.html#x=step_time_s&y=gpus&colour=tp&front=NAME
    const wanted = new URLSearchParams(window.location.hash.slice(1));
    if (wanted.has("front") && frontByName[wanted.get("front")]) state.front = wanted.get("front");
    if (metrics.includes(wanted.get("x"))) state.x = wanted.get("x");
    if (metrics.includes(wanted.get("y"))) state.y = wanted.get("y");
    if (wanted.get("colour") === "status" || wanted.get("colour") === "(none)" ||
        D.dimensions.includes(wanted.get("colour"))) state.colour = wanted.get("colour");
    options(fx, D.fronts.map((f) => f.name), state.front);
    options(xs, metrics, state.x);
    options(ys, metrics, state.y);
    options(cs, ["(none)", "status"].concat(D.dimensions), state.colour);
    const allRows = [...Array(nRows).keys()];
    const autoLog = () => {
      state.logx = spansDecades(state.x, allRows);
      state.logy = spansDecades(state.y, allRows);
      lx.checked = state.logx; ly.checked = state.logy;
    };
    autoLog();
    fx.onchange = () => {
      state.front = fx.value;
      const o = frontByName[state.front].objectives;
      if (o.length >= 2) { state.x = o[1]; state.y = o[0]; xs.value = state.x; ys.value = state.y; }
      autoLog();
      renderFront(); renderDetails();
    };
    xs.onchange = () => { state.x = xs.value; autoLog(); renderFront(); };
    ys.onchange = () => { state.y = ys.value; autoLog(); renderFront(); };
    cs.onchange = () => { state.colour = cs.value; renderFront(); };
    lx.onchange = () => { state.logx = lx.checked; renderFront(); };
    ly.onchange = () => { state.logy = ly.checked; renderFront(); };
    if (!D.fronts.length) fx.disabled = true;
  }

  // ---------------------------------------------------------------------- point panels
  const MAX_FRONT_DETAILS = 16;
  function detailRows() {
    const f = frontByName[state.front];
    let rows = f ? f.rows.slice() : [];
    const note = document.getElementById("detail-note");
    note.textContent = "";
    if (rows.length > MAX_FRONT_DETAILS) {
      const step = (rows.length - 1) / (MAX_FRONT_DETAILS - 1);
      rows = Array.from({ length: MAX_FRONT_DETAILS }, (_, i) => rows[Math.round(i * step)]);
      note.textContent = MAX_FRONT_DETAILS + " of the front's " + f.rows.length +
        " points, evenly spaced along its first objective; click points in the scatter to add " +
        "others. ";
    }
    for (const r of state.selected) if (!rows.includes(r)) rows.push(r);
    return rows;
  }

  const tailY = (q) => -Math.log10(1 - q);

  function legendName(d) {
    return shortLabel(d.row) + " " + d.label;
  }

  function renderDetails() {
    const rows = detailRows();
    const details = rows.map(detail);
    const colourFor = (i) => PALETTE[i % PALETTE.length];
    const promises = [];
    const shortNames = details.map((d) => shortLabel(d.row));

    // step-time CDF (quantile fan) on an axis that starts near p50
    const cdf = [];
    let lo = Infinity, hi = -Infinity;
    const relative = document.getElementById("cdf-relative").checked;
    details.forEach((d, i) => {
      const pts = d.quantiles.filter(([q, v]) => finite(v) && q >= 0.5);
      if (!pts.length) return;
      const scale = relative ? pts[0][1] : 1;
      for (const [, v] of pts) { lo = Math.min(lo, v / scale); hi = Math.max(hi, v / scale); }
      cdf.push({ type: "scatter", mode: "lines+markers", name: legendName(d),
                 x: pts.map(([, v]) => v / scale), y: pts.map(([q]) => tailY(q)),
                 text: pts.map(([q, v]) => shortLabel(d.row) + " p" + fmt(100 * q) + " = " +
                               fmt(v) + " s (" + fmt(v / pts[0][1]) + " × p50)"),
                 hovertemplate: "%{text}<extra></extra>",
                 line: { color: colourFor(i) }, marker: { size: 7 } });
    });
    const qs = D.step_quantiles.map(([q]) => q).filter((q) => q >= 0.5);
    const pad = Number.isFinite(lo) ? 0.02 * (hi - lo || hi) : 0;
    promises.push(Plotly.react("cdf", cdf, {
      height: 420, margin: { l: 70, r: 20, t: 40, b: 50 },
      title: { text: "step-time distribution: the file's quantiles from p50", font: { size: 14 } },
      xaxis: { title: relative ? "step time / the point's p50" : "step time [s]",
               range: Number.isFinite(lo) ? [lo - pad, hi + pad] : undefined },
      yaxis: { title: "quantile (tail scale)", tickvals: qs.map(tailY),
               ticktext: qs.map((q) => "p" + fmt(100 * q)), zeroline: false },
      legend: { font: { size: 10 } },
    }, PLOT_CONFIG));

    // p(slow step)
    if (D.slow.length) {
      const traces = D.slow.map(([l], k) => ({
        type: "bar", name: "p(step > det. + " + l + ")", x: shortNames,
        y: details.map((d) => d.p_slow[k][1]),
        hovertemplate: "%{x}: %{y:.4f}<extra>" + l + "</extra>" }));
      promises.push(Plotly.react("pslow", traces, {
        height: 320, barmode: "group", margin: { l: 70, r: 20, t: 40, b: 50 },
        title: { text: "probability of a slow step", font: { size: 14 } },
        xaxis: { type: "category" }, yaxis: { title: "probability", range: [0, 1.02] } },
        PLOT_CONFIG));
    }

    // deterministic breakdown, stacked, with the variability up to p95 beside it
    const parts = D.breakdown_labels.map((l, k) => ({
      type: "bar", orientation: "h", name: l, y: shortNames,
      x: details.map((d) => (d.breakdown.length ? d.breakdown[k][1] : null)),
      hovertemplate: "%{y}: %{x:.4g} s<extra>" + l + "</extra>",
      marker: { color: ["#4c72b0", "#dd8452", "#55a868", "#8172b3"][k] } }));
    parts.push({ type: "bar", orientation: "h", name: "variability: p95 − deterministic step",
                 y: shortNames, x: details.map((d) => (finite(d.variability_p95_s) ?
                                                       d.variability_p95_s : null)),
                 marker: { color: "#c44e52", pattern: { shape: "/" }, opacity: 0.6 },
                 hovertemplate: "%{y}: %{x:.4g} s<extra>p95 − step</extra>" });
    promises.push(Plotly.react("breakdown", parts, {
      height: 170 + 28 * details.length, barmode: "stack",
      margin: { l: 70, r: 20, t: D.breakdown_labels.length > 3 ? 100 : 80, b: 50 },
      title: { text: "deterministic step (busiest stage) and the variability up to p95",
               font: { size: 14 } },
      xaxis: { title: "seconds per step" }, yaxis: { autorange: "reversed", type: "category" },
      legend: { orientation: "h", x: 0, y: 1.0, yanchor: "bottom" } }, PLOT_CONFIG));

    // sensitivity per kernel class
    const sensDiv = document.getElementById("sensitivity");
    const anySens = details.some((d) => d.sensitivity.some(([, v]) => finite(v)));
    if (D.sensitivity.length && anySens) {
      const traces = details.map((d, i) => ({
        type: "bar", name: shortLabel(d.row), x: d.sensitivity.map(([c]) => c),
        y: d.sensitivity.map(([, v]) => v), marker: { color: colourFor(i) },
        hovertemplate: shortLabel(d.row) + " %{x}: %{y:.4g} s<extra></extra>" }));
      promises.push(Plotly.react(sensDiv, traces, {
        height: 360, barmode: "group", margin: { l: 70, r: 20, t: 40, b: 60 },
        title: { text: "drop in p95 step time when a kernel class is made deterministic",
                 font: { size: 14 } },
        yaxis: { title: "s" } }, PLOT_CONFIG));
    } else {
      sensDiv.textContent = "No sensitivity in this study ([evaluation] sensitivity = false).";
    }

    // run time with the deadlines
    const runDiv = document.getElementById("runtime");
    if (D.run_quantiles.length) {
      const traces = [];
      let maxDays = 0;
      details.forEach((d, i) => {
        const pts = d.run_quantiles.filter(([, v]) => finite(v)).map(([q, v]) => [v, q])
          .concat(d.deadlines.filter(([, , p]) => finite(p)).map(([, days, p]) => [days, p]))
          .sort((a, b) => a[0] - b[0]);
        for (const [v] of pts) maxDays = Math.max(maxDays, v);
        traces.push({ type: "scatter", mode: "lines+markers", name: legendName(d),
                      x: pts.map(([v]) => v), y: pts.map(([, q]) => q),
                      line: { color: colourFor(i), dash: "dot" },  // between known points
                      hovertemplate: shortLabel(d.row) + ": P(run ≤ %{x:.4g} days) = %{y:.4f}" +
                                     "<extra></extra>" });
      });
      const shapes = D.deadlines.map(([, days]) => ({ type: "line", x0: days, x1: days, y0: 0,
        y1: 1, yref: "paper", line: { dash: "dash", color: "#333" } }));
        const annotations = D.deadlines.map(([l, days], k) => ({ x: days, y: 0.9 - 0.08 * k,
        yref: "paper", text: "deadline " + l, showarrow: false, xanchor: "left",
        bgcolor: "rgba(255,255,255,0.8)" }));
      promises.push(Plotly.react(runDiv, traces, {
        height: 380, margin: { l: 70, r: 20, t: 50, b: 50 }, shapes: shapes,
        annotations: annotations,
        title: { text: "run time with failures and checkpoints (the file's quantiles and " +
                       "P(run ≤ deadline))", font: { size: 14 } },
        xaxis: { title: "days" }, yaxis: { title: "probability", range: [0, 1.02] },
        legend: { font: { size: 10 } } }, PLOT_CONFIG));
    } else {
      runDiv.textContent = "No run-time metrics in this study (no [training] total_tokens).";
    }
    renderDetailTable(details);
    return Promise.all(promises);
  }

  function renderDetailTable(details) {
    const head = ["point", "index", "status", "configuration", "step_time_s"]
      .concat(D.step_quantiles.map(([, n]) => n), D.slow.map(([, n]) => n),
              D.deadlines.map(([, , n]) => n));
    const rows = details.map((d) => [shortLabel(d.row), d.index, value("status", d.row), d.label,
      d.step_time_s].concat(d.quantiles.map(([, v]) => v), d.p_slow.map(([, v]) => v),
                            d.deadlines.map(([, , p]) => p)));
    fillTable(document.getElementById("detail-table"), head, rows);
  }

  // ---------------------------------------------------------------------------- cotune
  function renderCotune() {
    const section = document.getElementById("cotune-section");
    if (!D.cotune) { section.hidden = true; return Promise.resolve(); }
    section.hidden = false;
    const panels = D.cotune.panels;
    const traces = [], annotations = [];
    const layout = { height: 460, margin: { l: 70, r: 20, t: 60, b: 60 }, annotations: annotations,
                     legend: { orientation: "h", y: -0.2 } };
    const width = 1 / panels.length;
    panels.forEach((p, k) => {
      const ax = k === 0 ? "" : String(k + 1);
      layout["xaxis" + ax] = { type: "log", title: "global batch [sequences]",
                               domain: [k * width + 0.04, (k + 1) * width - 0.04],
                               anchor: "y" + ax, dtick: Math.log10(2) };
      layout["yaxis" + ax] = { type: "log", title: k === 0 ? D.cotune.metric + " [days]" : "",
                               anchor: "x" + ax };
      annotations.push({ text: "<b>" + p.title + "</b>", x: (k + 0.5) * width, y: 1.08,
                         xref: "paper", yref: "paper", showarrow: false });
      p.curves.forEach((c, i) => {
        traces.push({ type: "scatter", mode: "lines+markers", name: c.gpus + " GPUs",
                      legendgroup: String(c.gpus), showlegend: k === 0,
                      x: c.batch, y: c.best_days, xaxis: "x" + ax, yaxis: "y" + ax,
                      line: { color: PALETTE[i % PALETTE.length] },
                      hovertemplate: c.gpus + " GPUs, batch %{x}: %{y:.4g} days<extra></extra>" });
        const at = c.batch.indexOf(c.throughput_batch);
        if (at >= 0) {
          traces.push({ type: "scatter", mode: "markers", showlegend: false,
                        legendgroup: String(c.gpus), x: [c.batch[at]], y: [c.best_days[at]],
                        xaxis: "x" + ax, yaxis: "y" + ax,
                        marker: { symbol: "x", size: 12, color: PALETTE[i % PALETTE.length] },
                        hovertemplate: c.gpus + " GPUs: the highest tokens/s at batch %{x}" +
                                       "<extra></extra>" });
        }
      });
      for (const [pick, symbol, name] of [[p.time_pick, "star", "time-to-target pick"],
                                          [p.throughput_pick, "circle-open", "throughput pick"]]) {
        if (!pick) continue;
        traces.push({ type: "scatter", mode: "markers", name: name, legendgroup: name,
                      showlegend: k === 0, x: [pick.batch], y: [pick.days],
                      xaxis: "x" + ax, yaxis: "y" + ax,
                      marker: { symbol: symbol, size: 20, color: "#000",
                                line: { width: 2, color: "#000" } },
                      hovertemplate: name + ": #" + pick.index + " " + pick.label + ", " +
                                     "%{y:.4g} days<extra></extra>" });
      }
    });
    const picks = document.getElementById("cotune-picks");
    picks.textContent = "";
    for (const p of panels) {
      for (const [pick, name] of [[p.time_pick, "time-to-target pick"],
                                  [p.throughput_pick, "throughput pick"]]) {
        if (pick) {
          picks.append(el("li", {}, p.title + ": " + name + " #" + pick.index + " " + pick.label +
                          ": " + fmt(pick.days) + " days to target, " + fmt(pick.tokens_per_s) +
                          " tokens/s"));
        }
      }
    }
    return Plotly.react("cotune", traces, layout, PLOT_CONFIG);
  }

  // -------------------------------------------------------------------------- scenarios
  // A front of scenario dimensions (b_noise by default) is one front per scenario (the front
  // selector lists them); the robust pick is the configuration with the least worst-case
  // regret against each scenario's front (prism_results.robust_pick).
  function renderScenarios() {
    if (!D.robust || !D.robust.length) return;
    const section = document.getElementById("scenario-section");
    section.hidden = false;
    const box = document.getElementById("scenario-picks");
    box.textContent = "";
    for (const p of D.robust) {
      if (p.why_not) {
        box.append(el("p", {}, "front " + p.front + " across " + p.dimensions.join(", ") +
                      ": no robust pick (" + p.why_not + ")"));
        continue;
      }
      box.append(el("p", {}, "front " + p.front + " across " + p.dimensions.join(", ") +
                    ": " + p.label + ", worst regret " + (100 * p.worst).toFixed(2) + "%"));
      const t = el("table", { class: "sortable", id: "robust-table-" + p.front });
      fillTable(t, ["scenario", "regret %", "index"],
                p.scenarios.map(([s, regret, row]) => [s, 100 * regret, num("index", row)]));
      box.append(t);
    }
  }

  // ---------------------------------------------------------------------------- tables
  function fillTable(table, head, rows) {
    table.textContent = "";
    const thead = el("thead"), tr = el("tr");
    head.forEach((h, k) => {
      const th = el("th", { title: "sort by " + h }, h);
      th.onclick = () => sortTable(table, k, th);
      tr.append(th);
    });
    thead.append(tr);
    const tbody = el("tbody");
    for (const row of rows) {
      const r = el("tr");
      for (const v of row) {
        const td = el("td", {}, fmt(v));
        if (typeof v === "number") { td.dataset.v = String(v); td.className = "num"; }
        r.append(td);
      }
      tbody.append(r);
    }
    table.append(thead, tbody);
  }

  function sortTable(table, k, th) {
    const tbody = table.tBodies[0];
    const descending = th.dataset.sort === "asc";
    for (const other of table.tHead.rows[0].cells) delete other.dataset.sort;
    th.dataset.sort = descending ? "desc" : "asc";
    const key = (tr) => {
      const td = tr.cells[k];
      return td.dataset.v !== undefined ? Number(td.dataset.v) : td.textContent;
    };
    const rows = Array.from(tbody.rows);
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      let c;
      if (typeof x === "number" && typeof y === "number") {
        c = Number.isNaN(x) ? (Number.isNaN(y) ? 0 : 1) : Number.isNaN(y) ? -1 : x - y;
        if (descending && !(Number.isNaN(x) || Number.isNaN(y))) c = -c;
      } else {
        c = String(x).localeCompare(String(y), undefined, { numeric: true });
        if (descending) c = -c;
      }
      return c;
    });
    for (const r of rows) tbody.append(r);
  }

  function metricColumns(extra) {
    const names = extra.concat(D.key_metrics);
    return names.filter((n, i) => has(n) && names.indexOf(n) === i);
  }

  function renderTables() {
    const container = document.getElementById("tables");
    for (const f of D.fronts) {
      const metrics = metricColumns(f.objectives);
      const head = ["index", "status"].concat(D.dimensions, metrics);
      const rows = f.rows.map((r) => [num("index", r), value("status", r)]
        .concat(D.dimensions.map((d) => value(d, r)), metrics.map((m) => num(m, r))));
      container.append(el("h3", {}, "front " + f.name + ": " + f.rows.length + " points (" +
        f.objectives.map((o, i) => f.senses[i] + " " + o).join(", ") + ")"));
      const t = el("table", { class: "sortable", id: "front-table-" + f.name });
      fillTable(t, head, rows);
      container.append(t);
    }
    // the top rows by the first objective among the ok rows
    const first = D.fronts.length ? D.fronts[0] : null;
    const by = first ? first.objectives[0] : D.key_metrics.find(has);
    if (by) {
      const sense = first ? first.senses[0] : "min";
      const ok = [];
      for (let r = 0; r < nRows; ++r) {
        if (value("status", r) === "ok" && Number.isFinite(num(by, r))) ok.push(r);
      }
      ok.sort((a, b) => (sense === "max" ? num(by, b) - num(by, a) : num(by, a) - num(by, b)));
      const top = ok.slice(0, D.top);
      const metrics = metricColumns(first ? first.objectives : [by]);
      container.append(el("h3", {}, "top " + top.length + " ok points by " + by));
      const t = el("table", { class: "sortable", id: "top-table" });
      fillTable(t, ["index", "status"].concat(D.dimensions, metrics),
                top.map((r) => [num("index", r), value("status", r)]
                  .concat(D.dimensions.map((d) => value(d, r)), metrics.map((m) => num(m, r)))));
      container.append(t);
    }
  }

  function renderVerify() {
    const section = document.getElementById("verify-section");
    if (!D.verify) { section.hidden = true; return; }
    section.hidden = false;
    document.getElementById("verify-note").textContent = "Analytic step-time distribution " +
      "against " + D.verify.samples + " Monte Carlo steps per front point (diff = analytic − " +
      "Monte Carlo, in % of Monte Carlo).";
    const qs = D.verify.quantities;
    const head = ["index", "configuration", "KS"];
    for (const q of qs) head.push(q + " analytic [s]", q + " MC [s]", q + " diff [%]");
    const rows = D.verify.rows.map((v) => {
      const out = [v.index, v.label, v.ks];
      for (const q of qs) out.push(v[q][0], v[q][1], 100 * v[q][2] / v[q][1]);
      return out;
    });
    fillTable(document.getElementById("verify-table"), head, rows);
  }

  function panelRects() {
    const out = {};
    for (const id of ["front", "cdf", "pslow", "breakdown", "sensitivity", "runtime", "cotune"]) {
      const e = document.getElementById(id);
      if (!e || e.closest("[hidden]")) continue;
      const b = e.getBoundingClientRect();
      out[id] = { x: Math.round(b.left + window.scrollX), y: Math.round(b.top + window.scrollY),
                  w: Math.round(b.width), h: Math.round(b.height),
                  svg: e.querySelectorAll(".main-svg").length };
    }
    return out;
  }

  async function main() {
    await loadPlotly();
    if (typeof Plotly === "undefined") throw new Error("plotly.js did not load");
    buildColumns(await decodeBlob());
    renderHeader();
    setupFront();
    setupDetails();
    await renderFront();
    await renderDetails();
    await renderCotune();
    renderVerify();
    renderScenarios();
    renderTables();
    selfCheck();
    document.body.dataset.rects = JSON.stringify(panelRects());
    document.body.dataset.ready = errorBox.hidden ? "ok" : "errors";
  }
  main().catch((e) => {
    reportError("error: " + (e && e.stack ? e.stack : e));
    document.body.dataset.ready = "errors";
  });
})();
