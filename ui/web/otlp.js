// otlp.js - reading OTLP JSON as the query APIs return it: typed AnyValues, attribute lists,
// ids (hex, or base64 in Tempo's trace JSON), severities.

import { h } from "./dom.js";

// [type, text] of an AnyValue: string, int, double, bool, bytes, array, kvlist or empty.
export function anyValue(v) {
  if (!v || typeof v !== "object") return ["empty", ""];
  if ("stringValue" in v) return ["string", v.stringValue];
  if ("intValue" in v) return ["int", String(v.intValue)];
  if ("doubleValue" in v) return ["double", String(v.doubleValue)];
  if ("boolValue" in v) return ["bool", String(v.boolValue)];
  if ("bytesValue" in v) return ["bytes", v.bytesValue];
  if ("arrayValue" in v) return ["array", JSON.stringify(plain(v))];
  if ("kvlistValue" in v) return ["kvlist", JSON.stringify(plain(v), null, 1)];
  return ["empty", ""];
}

// An AnyValue as a plain JS value (for JSON display of arrays and maps).
export function plain(v) {
  if (!v || typeof v !== "object") return null;
  if ("arrayValue" in v) return (v.arrayValue.values || []).map(plain);
  if ("kvlistValue" in v) return Object.fromEntries((v.kvlistValue.values || []).map((kv) => [kv.key, plain(kv.value)]));
  const [t, s] = anyValue(v);
  if (t === "int" || t === "double") return Number(s);
  if (t === "bool") return s === "true";
  return s;
}

// The value of attribute |key| in an attribute list, as text ("" when absent).
export function attr(list, key) {
  const kv = (list || []).find((a) => a.key === key);
  return kv ? anyValue(kv.value)[1] : "";
}

// Rows (tr) for an attribute list: key, type, value.
export function attrRows(list) {
  return (list || []).map((kv) => {
    const [t, s] = anyValue(kv.value);
    return h("tr.attr", { dataset: { key: kv.key, type: t } }, h("td.k", kv.key), h("td.t", t), h("td.v", h("pre", s)));
  });
}

// A key/type/value table with a heading; nothing for an empty list.
export function attrTable(title, list) {
  if (!list || list.length === 0) return null;
  return h("section.attrs", h("h4", title), h("table", h("tbody", attrRows(list))));
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const B64 = new Map([..."ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"].map((c, i) => [c.charCodeAt(0), i]));

// Hex from base64 (Tempo's trace JSON) or hex as it is. Decodes by hand: a trace holds
// three ids a span, and atob plus a string per byte cost a 10,000-span trace 200 ms.
export function idHex(s) {
  if (!s) return "";
  if ((s.length === 16 || s.length === 32) && /^[0-9a-f]+$/i.test(s)) return s.toLowerCase();
  let out = "", acc = 0, bits = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 61) break; // '='
    const v = B64.get(c);
    if (v === undefined) return s; // neither hex nor base64: as it is
    acc = ((acc << 6) | v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += HEX[(acc >> bits) & 0xff];
    }
  }
  return out;
}

const LEVELS = ["trace", "debug", "info", "warn", "error", "fatal"];
// The level of a log record: from its severity number, else its text; "unknown" without either.
export function levelOf(rec) {
  const n = rec.severityNumber || 0;
  if (n >= 1 && n <= 24) return LEVELS[Math.floor((n - 1) / 4)];
  const t = String(rec.severityText || "").toLowerCase();
  if (t.startsWith("warn")) return "warn";
  if (t.startsWith("err")) return "error";
  if (t === "critical" || t.startsWith("fatal")) return "fatal";
  return LEVELS.includes(t) ? t : "unknown";
}

export const LEVEL_COLORS = {
  trace: "hsl(270 50% 60%)", debug: "hsl(210 70% 55%)", info: "hsl(140 55% 45%)",
  warn: "hsl(42 95% 50%)", error: "hsl(0 75% 55%)", fatal: "hsl(330 80% 45%)",
  critical: "hsl(330 80% 45%)", unknown: "hsl(0 0% 55%)",
};
