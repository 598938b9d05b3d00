// chart.js - hand-drawn canvas charts (no library): a time-series line chart with a legend,
// stacked bars (the logs histogram) and a heatmap (histogram buckets over time). Colours
// come from the theme's CSS variables, so both themes read well.

import { h, fmtNum, fmtTime, cssVar, fitCanvas, colorOf } from "./dom.js";

const PAD = { l: 56, r: 12, t: 10, b: 22 };

function niceTicks(lo, hi, n) {
  if (!(hi > lo)) return [lo];
  const raw = (hi - lo) / n;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((k) => k * mag).find((s) => s >= raw);
  const out = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
  return out;
}

function timeLabel(ms, span) {
  const d = new Date(ms);
  const hm = `${String(d.getHours()).padStart(2, "0")}:${String(d.getMinutes()).padStart(2, "0")}`;
  if (span > 2 * 86400000) return `${d.getMonth() + 1}/${d.getDate()} ${hm}`;
  if (span < 300000) return `${hm}:${String(d.getSeconds()).padStart(2, "0")}`;
  return hm;
}

// Axes and grid into |ctx| for x in [x0, x1] (ms) and y in [y0, y1]; returns the mappers.
function axes(ctx, w, ht, x0, x1, y0, y1, yfmt = fmtNum) {
  const pw = w - PAD.l - PAD.r, ph = ht - PAD.t - PAD.b;
  const X = (t) => PAD.l + ((t - x0) / (x1 - x0 || 1)) * pw;
  const Y = (v) => PAD.t + ph - ((v - y0) / (y1 - y0 || 1)) * ph;
  ctx.font = "11px system-ui, sans-serif";
  ctx.fillStyle = cssVar("--muted");
  ctx.strokeStyle = cssVar("--grid");
  ctx.lineWidth = 1;
  ctx.textAlign = "right";
  ctx.textBaseline = "middle";
  for (const v of niceTicks(y0, y1, 4)) {
    const y = Math.round(Y(v)) + 0.5;
    ctx.beginPath(); ctx.moveTo(PAD.l, y); ctx.lineTo(w - PAD.r, y); ctx.stroke();
    ctx.fillText(yfmt(v), PAD.l - 6, y);
  }
  ctx.textAlign = "center";
  ctx.textBaseline = "top";
  const n = Math.max(2, Math.floor(pw / 110));
  for (let i = 0; i <= n; i++) {
    const t = x0 + ((x1 - x0) * i) / n;
    ctx.fillText(timeLabel(t, x1 - x0), X(t), ht - PAD.b + 6);
  }
  return { X, Y, pw, ph };
}

function box(el, height) {
  const w = Math.max(300, el.clientWidth || el.parentElement?.clientWidth || 800);
  return { w, ht: height };
}

// A line chart of |series| ([{label, points: [[ms, value], …]}]) over [start, end] into
// |host| (emptied first), with a legend listing each series and its last value.
export function lineChart(host, series, start, end, height = 260) {
  host.replaceChildren();
  const canvas = h("canvas.chart", { dataset: { series: String(series.length) } });
  const tip = h("div.tip");
  tip.hidden = true;
  const wrap = h("div.chart-wrap", canvas, tip);
  const legend = h("ul.legend");
  host.append(wrap, legend);
  let lo = Infinity, hi = -Infinity;
  for (const s of series) for (const [, v] of s.points) if (Number.isFinite(v)) { lo = Math.min(lo, v); hi = Math.max(hi, v); }
  if (!Number.isFinite(lo)) { lo = 0; hi = 1; }
  if (lo === hi) { lo -= 1; hi += 1; }
  const padY = (hi - lo) * 0.05;
  lo -= padY; hi += padY;
  series.forEach((s, i) => { s.color = colorOf(s.label, i); });
  const draw = () => {
    const { w, ht } = box(wrap, height);
    const ctx = fitCanvas(canvas, w, ht);
    const { X, Y } = axes(ctx, w, ht, start, end, lo, hi);
    ctx.lineWidth = 1.5;
    for (const s of series) {
      ctx.strokeStyle = s.color;
      ctx.beginPath();
      let prev = null;
      for (const [t, v] of s.points) {
        if (!Number.isFinite(v)) { prev = null; continue; }
        if (prev === null) ctx.moveTo(X(t), Y(v)); else ctx.lineTo(X(t), Y(v));
        prev = t;
      }
      ctx.stroke();
      if (s.points.length === 1) { ctx.fillStyle = s.color; ctx.fillRect(X(s.points[0][0]) - 2, Y(s.points[0][1]) - 2, 4, 4); }
    }
    return X;
  };
  let X = draw();
  new ResizeObserver(() => { X = draw(); }).observe(wrap);
  canvas.addEventListener("mousemove", (ev) => {
    const r = canvas.getBoundingClientRect();
    const t = start + ((ev.clientX - r.left - PAD.l) / (r.width - PAD.l - PAD.r)) * (end - start);
    const lines = [];
    for (const s of series.slice(0, 12)) {
      let best = null;
      for (const p of s.points) if (best === null || Math.abs(p[0] - t) < Math.abs(best[0] - t)) best = p;
      if (best) lines.push(`${s.label}: ${fmtNum(best[1])}`);
    }
    tip.textContent = `${fmtTime(t, false)}\n${lines.join("\n")}`;
    tip.hidden = false;
    tip.style.left = `${Math.min(ev.clientX - r.left + 12, r.width - 220)}px`;
    tip.style.top = `${ev.clientY - r.top + 12}px`;
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });
  for (const s of series) {
    const last = s.points.length ? s.points[s.points.length - 1][1] : NaN;
    const sw = h("span.swatch");
    sw.style.background = s.color;
    legend.append(h("li", { dataset: { last: String(last) } }, sw, h("span.label", s.label), h("span.last", fmtNum(last))));
  }
  void X;
}

// Stacked bars: |groups| [{label, color, points: [[ms, count]]}] over [start, end] at |stepMs|.
export function stackedBars(host, groups, start, end, stepMs, height = 110) {
  host.replaceChildren();
  const canvas = h("canvas.chart", { dataset: { groups: String(groups.length) } });
  const legend = h("ul.legend.small");
  host.append(h("div.chart-wrap", canvas), legend);
  const totals = new Map();
  for (const g of groups) for (const [t, v] of g.points) totals.set(t, (totals.get(t) || 0) + v);
  const hi = Math.max(1, ...totals.values());
  const draw = () => {
    const { w, ht } = box(host, height);
    const ctx = fitCanvas(canvas, w, ht);
    const { X, Y } = axes(ctx, w, ht, start, end, 0, hi, (v) => fmtNum(v));
    const bw = Math.max(1, X(start + stepMs) - X(start) - 1);
    const acc = new Map();
    for (const g of groups) {
      ctx.fillStyle = g.color;
      for (const [t, v] of g.points) {
        const base = acc.get(t) || 0;
        ctx.fillRect(X(t), Y(base + v), bw, Y(base) - Y(base + v));
        acc.set(t, base + v);
      }
    }
  };
  draw();
  new ResizeObserver(draw).observe(host);
  for (const g of groups) {
    const sw = h("span.swatch");
    sw.style.background = g.color;
    const n = g.points.reduce((a, [, v]) => a + v, 0);
    legend.append(h("li", sw, h("span.label", g.label), h("span.last", fmtNum(n))));
  }
}

// A heatmap: |rows| bucket labels (low to high), |cols| [[ms, [count per row]]].
export function heatmap(host, rows, cols, start, end, stepMs, height = 260) {
  host.replaceChildren();
  const canvas = h("canvas.chart.heatmap", { dataset: { buckets: String(rows.length), rows: rows.join("|"),
    last: cols.length ? cols[cols.length - 1][1].join(",") : "" } });
  const tip = h("div.tip");
  tip.hidden = true;
  host.append(h("div.chart-wrap", canvas, tip));
  let hi = 0;
  for (const [, c] of cols) for (const v of c) hi = Math.max(hi, v);
  const draw = () => {
    const { w, ht } = box(host, height);
    const ctx = fitCanvas(canvas, w, ht);
    const { X, ph } = axes(ctx, w, ht, start, end, 0, rows.length, () => "");
    const rh = ph / rows.length;
    ctx.fillStyle = cssVar("--muted");
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    rows.forEach((r, i) => ctx.fillText(r, PAD.l - 6, PAD.t + ph - (i + 0.5) * rh));
    const cw = Math.max(1, X(start + stepMs) - X(start));
    for (const [t, c] of cols) {
      c.forEach((v, i) => {
        if (!(v > 0)) return;
        const a = 0.15 + 0.85 * (v / (hi || 1));
        ctx.fillStyle = `hsl(${(40 - 40 * a).toFixed(0)} 90% ${(70 - 30 * a).toFixed(0)}%)`;
        ctx.fillRect(X(t), PAD.t + ph - (i + 1) * rh, cw, rh - 1);
      });
    }
  };
  draw();
  new ResizeObserver(draw).observe(host);
}
