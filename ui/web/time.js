// time.js - the time range every view shares: "from" and "to" in the URL, each either
// relative ("now", "now-15m", "now-2d") or absolute (an ISO 8601 date-time), and the picker
// that edits them.

import { h } from "./dom.js";

const UNITS = { s: 1000, m: 60000, h: 3600000, d: 86400000, w: 604800000 };
export const PRESETS = ["now-5m", "now-15m", "now-1h", "now-6h", "now-24h", "now-7d"];
export const DEFAULT_FROM = "now-1h";

// ms since the epoch for one end of a range, or NaN when |s| is neither form.
export function parseTime(s, now = Date.now()) {
  if (s === undefined || s === null || s === "" || s === "now") return now;
  const m = /^now-(\d+)([smhdw])$/.exec(s);
  if (m) return now - Number(m[1]) * UNITS[m[2]];
  if (/^\d{4}-\d\d-\d\d/.test(s)) return Date.parse(s);
  return NaN;
}

// {start, end} in ms for the URL parameters |p| (from, to); throws on a bad or empty range.
export function rangeOf(p, now = Date.now()) {
  const start = parseTime(p.get("from") || DEFAULT_FROM, now);
  const end = parseTime(p.get("to") || "now", now);
  if (Number.isNaN(start) || Number.isNaN(end)) throw new Error("bad time range: use now-15m or an ISO date-time");
  if (end <= start) throw new Error("the range ends before it starts");
  return { start, end };
}

// A step in seconds giving about |points| steps over the range (at least 1 s, a round number).
export function autoStep(range, points = 120) {
  const raw = (range.end - range.start) / 1000 / points;
  const nice = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400];
  return nice.find((n) => n >= raw) || Math.ceil(raw / 86400) * 86400;
}

const toLocalInput = (ms) => {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
};

// The picker: a preset list (relative) and two date-time fields (absolute). |onChange|
// gets {from, to} strings for the URL.
export function picker(p, onChange) {
  const from = p.get("from") || DEFAULT_FROM;
  const to = p.get("to") || "now";
  const relative = to === "now" && PRESETS.includes(from);
  let range;
  try {
    range = rangeOf(p);
  } catch {
    range = rangeOf(new URLSearchParams());
  }
  const sel = h("select.range-preset", { "aria-label": "time range" },
    PRESETS.map((x) => h("option", { value: x, selected: relative && x === from }, `Last ${x.slice(4)}`)),
    h("option", { value: "abs", selected: !relative }, "Absolute…"));
  const a = h("input.range-from", { type: "datetime-local", step: "1", value: toLocalInput(range.start), "aria-label": "from" });
  const b = h("input.range-to", { type: "datetime-local", step: "1", value: toLocalInput(range.end), "aria-label": "to" });
  const abs = h("span.range-abs", a, " – ", b, h("button", { type: "button", on: { click: applyAbs } }, "Apply"));
  abs.hidden = relative;
  function applyAbs() {
    const s = new Date(a.value).toISOString(), e = new Date(b.value).toISOString();
    onChange({ from: s, to: e });
  }
  sel.addEventListener("change", () => {
    if (sel.value === "abs") abs.hidden = false;
    else onChange({ from: sel.value, to: "now" });
  });
  return h("span.range", sel, abs);
}
