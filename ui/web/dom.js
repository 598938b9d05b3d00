// dom.js - small helpers to build elements without innerHTML (every text goes in as text,
// so nothing a record holds can become markup) and to format numbers and times.

// h("div.cls#id", {attrs, on: {click}}, ...children): an element. Children are nodes,
// strings (text) or arrays of them; null and false are skipped.
export function h(tag, props = {}, ...children) {
  const [name, ...rest] = tag.split(/(?=[.#])/);
  const el = document.createElement(name || "div");
  for (const r of rest) {
    if (r[0] === ".") el.classList.add(r.slice(1));
    else el.id = r.slice(1);
  }
  if (props && (props instanceof Node || typeof props !== "object" || Array.isArray(props))) {
    children.unshift(props);
    props = {};
  }
  for (const [k, v] of Object.entries(props || {})) {
    if (k === "on") for (const [ev, fn] of Object.entries(v)) el.addEventListener(ev, fn);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else if (k in el && k !== "list" && k !== "form") el[k] = v;
    else if (v !== false && v != null) el.setAttribute(k, v === true ? "" : String(v));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c == null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

const pad = (n, w = 2) => String(n).padStart(w, "0");

// "2026-12-01 18:58:36.123" in local time from ms since the epoch.
export function fmtTime(ms, withMs = true) {
  const d = new Date(ms);
  const s = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return withMs ? `${s}.${pad(d.getMilliseconds(), 3)}` : s;
}

// A duration in ms as "1.23 s", "45.6 ms", "789 µs".
export function fmtDur(ms) {
  if (ms >= 60000) return `${(ms / 60000).toFixed(1)} min`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(2)} s`;
  if (ms >= 1) return `${+ms.toFixed(2)} ms`;
  return `${Math.round(ms * 1000)} µs`;
}

// A number with at most 4 significant digits and SI suffixes past 10^4.
export function fmtNum(v) {
  if (!Number.isFinite(v)) return String(v);
  const a = Math.abs(v);
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(4)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(4)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(4)}k`;
  return String(+v.toPrecision(6));
}

// A stable colour for a name (services, series): a hue from its hash.
export function colorOf(name, i = undefined) {
  let x = 2166136261;
  for (let k = 0; k < name.length; k++) x = Math.imul(x ^ name.charCodeAt(k), 16777619);
  const hue = i === undefined ? (x >>> 0) % 360 : (i * 137.508) % 360;
  return `hsl(${hue.toFixed(0)} 65% 52%)`;
}

// A CSS custom property of the current theme (canvas drawing reads its colours here).
export function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

// nanoseconds (a decimal string) to ms as a float, without losing the ms part.
export function nsToMs(s) {
  const str = String(s);
  if (str.length <= 6) return Number(str) / 1e6;
  return Number(str.slice(0, -6)) + Number(str.slice(-6)) / 1e6;
}

// A canvas sized to its box at the device's pixel ratio; returns its 2D context scaled to CSS px.
export function fitCanvas(canvas, width, height) {
  const dpr = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(width * dpr));
  canvas.height = Math.max(1, Math.round(height * dpr));
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const ctx = canvas.getContext("2d");
  ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
  return ctx;
}
