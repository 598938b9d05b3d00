// logs.js - the Logs view: a LogQL box, the range, a histogram of matches by level
// (sum by (detected_level) (count_over_time(...)) on Loki's query_range), the records newest
// first from the native API (/api/v1/logs: every field with its type), more as you scroll,
// and live tail by polling (this daemon serves no /loki/api/v1/tail WebSocket).

import { get, ApiError } from "./api.js";
import { h, fmtTime, nsToMs } from "./dom.js";
import { queryBox, rangeOr, failTo } from "./editor.js";
import { picker, autoStep } from "./time.js";
import { stackedBars } from "./chart.js";
import { anyValue, attrTable, levelOf, LEVEL_COLORS, attr } from "./otlp.js";

const PAGE = 100;
const POLL_MS = 2000;
const DEFAULT_Q = '{service_name=~".+"}';
const nsOf = (ms) => `${Math.floor(ms)}000000`;

export function render(root, p, ctx) {
  const q = p.get("q") || DEFAULT_Q;
  const live = p.get("live") === "1";
  const box = queryBox({ value: q, label: "LogQL query", placeholder: '{service_name="api"} |= "error"',
    onRun: (text) => ctx.navigate({ q: text }) });
  const liveBtn = h("button.live", { type: "button", className: live ? "live on" : "live",
    on: { click: () => ctx.navigate({ live: live ? null : "1" }) } }, live ? "Stop live" : "Live");
  const hist = h("div.hist");
  const info = h("div.info");
  const list = h("div.records", { role: "list" });
  const sentinel = h("div.sentinel");
  root.append(h("div.toolbar", box.el, picker(p, (r) => ctx.navigate(r)), liveBtn), hist, info, list, sentinel);

  const range = rangeOr(p, info);
  if (!range) return null;
  const abort = new AbortController();
  let stopped = false, oldest = null, newest = null, atOldest = new Set(), done = false, loading = false, count = 0;
  const key = (r) => `${r.timestamp}|${JSON.stringify(r.body)}|${r.spanId}|${JSON.stringify(r.attributes)}`;

  const fail = failTo(box, info);
  const setInfo = () => info.replaceChildren(h("span.count", `${count} record${count === 1 ? "" : "s"}${done ? "" : " (scroll for more)"}`),
    ...(live ? [h("span.tail", " · live: polling every 2 s")] : []));

  async function page() {
    if (loading || done || stopped) return;
    loading = true;
    try {
      const end = oldest === null ? nsOf(range.end) : String(BigInt(oldest) + 1n);
      const r = await get("/api/v1/logs", { query: q, start: nsOf(range.start), end, limit: PAGE, direction: "backward" }, abort.signal);
      const recs = r.data.records || [];
      if (recs.length < PAGE) done = true;
      let added = 0;
      for (const rec of recs) {
        if (rec.timestamp === oldest && atOldest.has(key(rec))) continue;
        list.append(row(rec, ctx));
        added++;
        count++;
        if (newest === null) newest = rec.timestamp;
      }
      if (recs.length) {
        const last = recs[recs.length - 1].timestamp;
        if (last !== oldest) atOldest = new Set();
        oldest = last;
        for (const rec of recs) if (rec.timestamp === last) atOldest.add(key(rec));
      }
      if (added === 0 && recs.length) done = true; // a page of only already-shown records
      box.clearError();
      setInfo();
    } catch (e) {
      done = true;
      fail(e);
    } finally {
      loading = false;
    }
    if (!done && sentinel.getBoundingClientRect().top < innerHeight) page();
  }

  async function histogram() {
    const step = autoStep(range, 60);
    try {
      const r = await get("/loki/api/v1/query_range", {
        query: `sum by (detected_level) (count_over_time(${q} [${step}s]))`,
        start: nsOf(range.start), end: nsOf(range.end), step,
      }, abort.signal);
      const groups = (r.data.result || []).map((s) => {
        const lvl = s.metric.detected_level || "unknown";
        return { label: lvl, color: LEVEL_COLORS[lvl] || LEVEL_COLORS.unknown, points: s.values.map(([t, v]) => [t * 1000 - step * 1000, Number(v)]) };
      });
      stackedBars(hist, groups, range.start, range.end, step * 1000);
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 400)) fail(e);
    }
  }

  let timer = null;
  async function poll() {
    if (stopped) return;
    try {
      const start = newest === null ? nsOf(Date.now() - 60000) : String(BigInt(newest) + 1n);
      const r = await get("/api/v1/logs", { query: q, start, end: nsOf(Date.now() + 1000), limit: 500, direction: "forward" }, abort.signal);
      for (const rec of r.data.records || []) {
        list.prepend(row(rec, ctx));
        newest = rec.timestamp;
        count++;
      }
      setInfo();
    } catch (e) {
      fail(e);
    }
    if (!stopped) timer = setTimeout(poll, POLL_MS);
  }

  const io = new IntersectionObserver((es) => { if (es.some((e) => e.isIntersecting)) page(); });
  io.observe(sentinel);
  histogram();
  page().then(() => { if (live) timer = setTimeout(poll, POLL_MS); });

  return {
    unmount() { stopped = true; abort.abort(); io.disconnect(); clearTimeout(timer); },
    escape() { for (const d of list.querySelectorAll(".record.open")) d.classList.remove("open"); for (const d of list.querySelectorAll(".detail")) d.remove(); },
  };
}

function row(rec, ctx) {
  const lvl = levelOf(rec);
  const [, bodyText] = anyValue(rec.body);
  const svc = attr(rec.resource && rec.resource.attributes, "service.name");
  const badge = h("span.level", lvl);
  badge.style.background = LEVEL_COLORS[lvl];
  const head = h("div.rhead", { tabIndex: 0 }, h("span.time", fmtTime(nsToMs(rec.timestamp))), badge,
    h("span.svc", svc), h("span.body", bodyText.replace(/\s+/g, " ")));
  const el = h("div.record", { role: "listitem", dataset: { ts: rec.timestamp } }, head);
  const toggle = () => {
    const d = el.querySelector(".detail");
    if (d) { d.remove(); el.classList.remove("open"); return; }
    el.classList.add("open");
    el.append(detail(rec, ctx));
  };
  head.addEventListener("click", toggle);
  head.addEventListener("keydown", (e) => { if (e.key === "Enter") toggle(); });
  return el;
}

function detail(rec, ctx) {
  const [btype, btext] = anyValue(rec.body);
  const fields = [
    ["timestamp", fmtTime(nsToMs(rec.timestamp)) + ` (${rec.timestamp} ns)`],
    ["observed", rec.observedTimeUnixNano && rec.observedTimeUnixNano !== "0" ? `${fmtTime(nsToMs(rec.observedTimeUnixNano))} (${rec.observedTimeUnixNano} ns)` : ""],
    ["severity", `${rec.severityText || ""} (${rec.severityNumber || 0})`],
    ["event name", rec.eventName || ""],
    ["flags", String(rec.flags || 0)],
    ["dropped attributes", String(rec.droppedAttributesCount || 0)],
  ];
  const tid = rec.traceId && !/^0*$/.test(rec.traceId) ? rec.traceId : "";
  const sid = rec.spanId && !/^0*$/.test(rec.spanId) ? rec.spanId : "";
  const scope = rec.scope || {};
  return h("div.detail",
    h("section.attrs", h("h4", "Record"), h("table", h("tbody",
      h("tr", h("td.k", "body"), h("td.t", btype), h("td.v", h("pre.bodyval", btext))),
      fields.map(([k, v]) => h("tr", h("td.k", k), h("td.t", ""), h("td.v", v))),
      h("tr", h("td.k", "trace id"), h("td.t", ""), h("td.v", tid ? h("a.traceid", { href: `?${ctx.viewParams("trace", { id: tid, span: sid })}`,
        on: { click: (e) => { e.preventDefault(); ctx.open("trace", { id: tid, span: sid }); } } }, tid) : "")),
      h("tr", h("td.k", "span id"), h("td.t", ""), h("td.v", sid))))),
    attrTable("Attributes", rec.attributes),
    attrTable("Resource", rec.resource && rec.resource.attributes),
    h("section.attrs", h("h4", "Scope"), h("table", h("tbody",
      h("tr", h("td.k", "name"), h("td.t", ""), h("td.v", scope.name || "")),
      h("tr", h("td.k", "version"), h("td.t", ""), h("td.v", scope.version || ""))))),
    attrTable("Scope attributes", scope.attributes));
}
