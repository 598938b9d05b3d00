// metrics.js - the Metrics view: a PromQL box that completes metric names
// (/api/v1/label/__name__/values), label names (/api/v1/labels) and label values, a line
// chart with a legend for range queries (step automatic or chosen), a table for instant
// queries, and classic (le buckets) or native histograms drawn as heatmaps.

import { get } from "./api.js";
import { h, fmtNum, fmtTime } from "./dom.js";
import { queryBox, notice, rangeOr, failTo } from "./editor.js";
import { picker, autoStep } from "./time.js";
import { lineChart, heatmap } from "./chart.js";

const cache = new Map();
function cached(path) {
  if (!cache.has(path)) cache.set(path, get(path).then((r) => r.data || []).catch((e) => { cache.delete(path); throw e; }));
  return cache.get(path);
}

// What to offer at |cur| in |text|: {from, items}.
export async function complete(text, cur) {
  const before = text.slice(0, cur);
  const open = before.lastIndexOf("{"), shut = before.lastIndexOf("}");
  const word = /[A-Za-z_:][A-Za-z0-9_:]*$/.exec(before);
  const from = word ? cur - word[0].length : cur;
  const prefix = word ? word[0] : "";
  if (open > shut) {
    const val = /([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!=|!~|=)\s*"([^"]*)$/.exec(before);
    if (val) {
      const vals = await cached(`/api/v1/label/${encodeURIComponent(val[1])}/values`);
      return { from: cur - val[3].length, items: vals.filter((v) => v.startsWith(val[3]) && v !== val[3]) };
    }
    const names = await cached("/api/v1/labels");
    return { from, items: names.filter((n) => n.startsWith(prefix) && n !== prefix && n !== "__name__") };
  }
  if (!prefix) return { from, items: [] };
  const names = await cached("/api/v1/label/__name__/values");
  return { from, items: names.filter((n) => n.startsWith(prefix) && n !== prefix) };
}

const labelText = (m) => {
  const { __name__: name = "", ...rest } = m || {};
  const inner = Object.entries(rest).map(([k, v]) => `${k}="${v}"`).join(", ");
  return inner ? `${name}{${inner}}` : name || "{}";
};

export function render(root, p, ctx) {
  const q = p.get("q") || "";
  const mode = p.get("mode") === "instant" ? "instant" : "range";
  const stepP = p.get("step") || "";
  const box = queryBox({ value: q, label: "PromQL query", placeholder: "rate(http_requests_total[5m])", complete,
    onRun: (text) => ctx.navigate({ q: text }) });
  const modeSel = h("select.mode", { "aria-label": "query type", on: { change: () => ctx.navigate({ mode: modeSel.value === "range" ? null : modeSel.value }) } },
    h("option", { value: "range", selected: mode === "range" }, "Range (chart)"), h("option", { value: "instant", selected: mode === "instant" }, "Instant (table)"));
  const step = h("input.step", { type: "text", value: stepP, placeholder: "auto", size: 6, "aria-label": "step (seconds)",
    on: { keydown: (e) => { if (e.key === "Enter") ctx.navigate({ step: step.value.trim() }); }, change: () => ctx.navigate({ step: step.value.trim() }) } });
  const out = h("div.results");
  root.append(h("div.toolbar", box.el, picker(p, (r) => ctx.navigate(r)), modeSel, h("label.steplabel", "step ", step)), out);
  if (!q) {
    out.append(notice("Type a PromQL query and press Enter (Tab completes metric and label names).", "info"));
    return null;
  }
  const range = rangeOr(p, out);
  if (!range) return null;
  const abort = new AbortController();
  const fail = failTo(box, out);
  if (mode === "instant") {
    get("/api/v1/query", { query: q, time: range.end / 1000 }, abort.signal).then((r) => table(out, r.data)).catch(fail);
  } else {
    const st = Number(stepP) > 0 ? Number(stepP) : autoStep(range, 240);
    if (!stepP) step.placeholder = `auto (${st}s)`;
    get("/api/v1/query_range", { query: q, start: range.start / 1000, end: range.end / 1000, step: st }, abort.signal)
      .then((r) => chart(out, r.data, range, st, p.get("as") === "lines", ctx)).catch(fail);
  }
  return { unmount: () => abort.abort() };
}

function table(out, data) {
  const rt = data.resultType;
  let rows = [];
  if (rt === "scalar" || rt === "string") rows = [[rt, data.result[1], data.result[0]]];
  else rows = data.result.map((s) => [labelText(s.metric), s.value ? s.value[1] : histText(s.histogram && s.histogram[1]), (s.value || s.histogram)[0]]);
  out.append(h("div.count", `${rows.length} result${rows.length === 1 ? "" : "s"} (${rt})`),
    h("table.instant", h("thead", h("tr", h("th", "Series"), h("th", "Value"), h("th", "Time"))),
      h("tbody", rows.map(([l, v, t]) => h("tr", h("td.series", l), h("td.num", String(v)), h("td", fmtTime(t * 1000)))))));
}

const histText = (hv) => (hv ? `count ${hv.count}, sum ${hv.sum}` : "");

function chart(out, data, range, st, asLines, ctx) {
  const res = data.result || [];
  const bucketed = res.length > 0 && res.every((s) => s.metric && "le" in s.metric);
  const native = res.some((s) => s.histograms);
  if ((bucketed || native) && !asLines) {
    out.append(h("div.count", `${res.length} series as a heatmap `, h("a", { href: "#", on: { click: (e) => { e.preventDefault(); ctx.navigate({ as: "lines" }); } } }, "(show as lines)")));
    const host = h("div.chart-host");
    out.append(host);
    const { rows, cols } = bucketed ? classicBuckets(res) : nativeBuckets(res);
    heatmap(host, rows, cols, range.start, range.end, st * 1000);
    return;
  }
  // a native histogram as lines: its count
  const series = res.map((s) => ({ label: labelText(s.metric),
    points: (s.values || (s.histograms || []).map(([t, hv]) => [t, hv.count])).map(([t, v]) => [t * 1000, Number(v)]) }));
  out.append(h("div.count", `${series.length} series`));
  const host = h("div.chart-host");
  out.append(host);
  lineChart(host, series, range.start, range.end);
}

// An le bound as a number ("+Inf" included, which parseFloat does not read).
const leNum = (s) => (/^\+?inf$/i.test(s) ? Infinity : parseFloat(s));

// Cumulative le buckets (summed over other labels) -> per-bucket counts per step.
function classicBuckets(res) {
  const les = [...new Set(res.map((s) => s.metric.le))].sort((a, b) => leNum(a) - leNum(b));
  const at = new Map();
  for (const s of res) {
    const i = les.indexOf(s.metric.le);
    for (const [t, v] of s.values || []) {
      if (!at.has(t)) at.set(t, new Array(les.length).fill(0));
      at.get(t)[i] += Number(v);
    }
  }
  const cols = [...at].sort((a, b) => a[0] - b[0]).map(([t, cum]) => [t * 1000, cum.map((c, i) => Math.max(0, c - (i ? cum[i - 1] : 0)))]);
  return { rows: les.map((l) => `≤ ${l}`), cols };
}

// Native histograms: buckets [rule, lower, upper, count] -> rows by upper bound.
function nativeBuckets(res) {
  const uppers = new Set();
  for (const s of res) for (const [, hv] of s.histograms || []) for (const b of hv.buckets || []) uppers.add(b[2]);
  const rows = [...uppers].sort((a, b) => leNum(a) - leNum(b));
  const at = new Map();
  for (const s of res) {
    for (const [t, hv] of s.histograms || []) {
      if (!at.has(t)) at.set(t, new Array(rows.length).fill(0));
      for (const b of hv.buckets || []) at.get(t)[rows.indexOf(b[2])] += Number(b[3]);
    }
  }
  return { rows: rows.map((u) => `≤ ${fmtNum(leNum(u))}`), cols: [...at].sort((a, b) => a[0] - b[0]).map(([t, c]) => [t * 1000, c]) };
}
