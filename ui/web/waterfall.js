// waterfall.js - a trace as a waterfall: one row per span, nested under its parent (children
// by start time), a bar on the trace's time axis coloured by service, errors marked, events
// as ticks, and the critical path as a dark strip along the bars that make it up. Rows are
// virtual: the names are DOM rows only for what is on screen and the bars one canvas the
// height of the viewport, so a 10,000-span trace costs what its visible rows cost.

import { h, fmtDur, colorOf, cssVar, fitCanvas } from "./dom.js";

export const ROW = 22;
const NAME_W = 340;
const OVERSCAN = 10;

// Tree order of |spans| (each {id, parent, start, end, ...}): sets span.children, span.depth
// and returns the rows depth first, children sorted by start. Spans whose parent is not in
// the trace are roots.
export function treeOrder(spans) {
  const byId = new Map(spans.map((s) => [s.id, s]));
  const roots = [];
  for (const s of spans) s.children = [];
  for (const s of spans) {
    const p = s.parent && byId.get(s.parent);
    if (p && p !== s) p.children.push(s);
    else roots.push(s);
  }
  const byStart = (a, b) => a.start - b.start || a.end - b.end;
  roots.sort(byStart);
  const rows = [];
  const stack = roots.slice().reverse().map((s) => [s, 0]);
  const seen = new Set();
  while (stack.length) {
    const [s, d] = stack.pop();
    if (seen.has(s)) continue; // a cycle in bad data
    seen.add(s);
    s.depth = d;
    rows.push(s);
    s.children.sort(byStart);
    for (let i = s.children.length - 1; i >= 0; i--) stack.push([s.children[i], d + 1]);
  }
  return { rows, roots };
}

// The critical path: for each span the [from, to] pieces of it that nothing under it covered
// while it was on the path. Walks back from each root's end, always into the child that
// finished last before the current point (iterative: no recursion depth limit).
export function criticalPath(roots) {
  const segs = new Map();
  const mark = (s, a, b) => { if (b > a) { if (!segs.has(s)) segs.set(s, []); segs.get(s).push([a, b]); } };
  const stack = roots.map((r) => [r, r.end]);
  while (stack.length) {
    const [s, upTo] = stack.pop();
    let t = Math.min(s.end, upTo);
    const kids = s.children.slice().sort((a, b) => b.end - a.end);
    for (const c of kids) {
      if (t <= s.start) break;
      if (c.start >= t || c.end <= s.start) continue;
      const ce = Math.min(c.end, t);
      mark(s, ce, t);
      stack.push([c, ce]);
      t = Math.max(c.start, s.start);
    }
    mark(s, s.start, t);
  }
  return segs;
}

// Mounts the waterfall of |spans| (span.color, when set, is its bar's colour) in |host|; |onSelect(span)| when a row is clicked.
// Returns {select(span), scrollTo(span)}.
export function waterfall(host, spans, onSelect) {
  const { rows, roots } = treeOrder(spans);
  const crit = criticalPath(roots);
  const t0 = Math.min(...rows.map((s) => s.start));
  const t1 = Math.max(...rows.map((s) => s.end));
  const total = t1 - t0 || 1;
  let selected = null;

  const axis = h("canvas.wf-axis");
  const names = h("div.wf-names");
  const bars = h("canvas.wf-bars", { dataset: { rows: String(rows.length), drawn: "0" } });
  const inner = h("div.wf-inner", names, bars);
  const scroller = h("div.wf-scroll", inner);
  inner.style.height = `${rows.length * ROW}px`;
  host.append(h("div.wf", h("div.wf-head", h("div.wf-head-name", `${rows.length} spans · ${fmtDur(total)} · critical path marked`), axis), scroller));

  const barX = (w, t) => ((t - t0) / total) * (w - 8) + 2;
  let frame = 0;
  function draw() {
    frame = 0;
    const w = Math.max(200, scroller.clientWidth - NAME_W);
    const vh = Math.min(scroller.clientHeight || 600, rows.length * ROW);
    const first = Math.max(0, Math.floor(scroller.scrollTop / ROW));
    const last = Math.min(rows.length, Math.ceil((scroller.scrollTop + vh) / ROW) + 1);
    // names: DOM rows for what is visible (plus a margin)
    const a = Math.max(0, first - OVERSCAN), b = Math.min(rows.length, last + OVERSCAN);
    const nodes = [];
    for (let i = a; i < b; i++) {
      const s = rows[i];
      const dot = h("span.svcdot");
      dot.style.background = s.color || colorOf(s.service);
      // the span's critical-path pieces, ms from the trace's start ("" when off the path)
      const cp = (crit.get(s) || []).slice().sort((x, y) => x[0] - y[0]).map(([p, q]) => `${+(p - t0).toFixed(3)}-${+(q - t0).toFixed(3)}`).join(",");
      const el = h("div.wf-row", { dataset: { span: s.id, depth: String(s.depth), parent: s.parent || "", index: String(i), crit: cp },
        className: `wf-row${s === selected ? " sel" : ""}${s.error ? " err" : ""}`, title: `${s.service}: ${s.name}` },
      dot, h("span.wf-name", s.name), h("span.wf-svc", s.service), s.error ? h("span.errmark", { title: "error" }, "!") : null);
      el.style.top = `${i * ROW}px`;
      el.style.paddingLeft = `${6 + Math.min(s.depth, 30) * 12}px`;
      el.addEventListener("click", () => onSelect(s));
      nodes.push(el);
    }
    names.replaceChildren(...nodes);
    // bars: one canvas the height of the viewport, stuck to its top
    const ch = Math.min(vh + ROW, (rows.length - first) * ROW);
    const ctx = fitCanvas(bars, w, ch);
    bars.style.top = `${first * ROW}px`;
    const critColor = cssVar("--crit"), errColor = cssVar("--err"), grid = cssVar("--grid"), selBg = cssVar("--sel");
    let drawn = 0;
    for (let i = first; i < last; i++) {
      const s = rows[i];
      const y = (i - first) * ROW;
      if (s === selected) { ctx.fillStyle = selBg; ctx.fillRect(0, y, w, ROW); }
      ctx.fillStyle = grid;
      ctx.fillRect(0, y + ROW - 1, w, 1);
      const x = barX(w, s.start), bw = Math.max(1, barX(w, s.end) - x);
      ctx.fillStyle = s.color || colorOf(s.service);
      ctx.fillRect(x, y + 4, bw, ROW - 9);
      drawn++;
      if (s.error) { ctx.strokeStyle = errColor; ctx.lineWidth = 2; ctx.strokeRect(x, y + 4, bw, ROW - 9); }
      for (const ev of s.events) {
        const ex = barX(w, ev.time);
        ctx.fillStyle = cssVar("--fg");
        ctx.fillRect(ex - 0.5, y + 2, 1.5, ROW - 5);
      }
      for (const [p, q] of crit.get(s) || []) {
        ctx.fillStyle = critColor;
        ctx.fillRect(barX(w, p), y + ROW - 7, Math.max(1, barX(w, q) - barX(w, p)), 3);
      }
    }
    bars.dataset.drawn = String(drawn);
    bars.dataset.first = String(first);
    // axis
    const actx = fitCanvas(axis, w, 20);
    actx.font = "11px system-ui, sans-serif";
    actx.fillStyle = cssVar("--muted");
    actx.textBaseline = "top";
    for (let k = 0; k <= 4; k++) {
      const x = barX(w, t0 + (total * k) / 4);
      actx.textAlign = k === 0 ? "left" : k === 4 ? "right" : "center";
      actx.fillText(fmtDur((total * k) / 4), x, 4);
    }
  }
  const schedule = () => { if (!frame) frame = requestAnimationFrame(draw); };
  scroller.addEventListener("scroll", schedule);
  const ro = new ResizeObserver(schedule);
  ro.observe(scroller);
  bars.addEventListener("click", (e) => {
    const r = bars.getBoundingClientRect();
    const i = Math.floor((e.clientY - r.top) / ROW) + Number(bars.dataset.first);
    if (rows[i]) onSelect(rows[i]);
  });
  draw();
  return {
    rows,
    crit,
    select(s) { selected = s; schedule(); },
    scrollTo(s) {
      const i = rows.indexOf(s);
      if (i >= 0 && (i * ROW < scroller.scrollTop || (i + 1) * ROW > scroller.scrollTop + scroller.clientHeight)) scroller.scrollTop = Math.max(0, i * ROW - 3 * ROW);
      schedule();
    },
    destroy() { ro.disconnect(); },
  };
}
