// trace.js - one trace (?view=trace&id=<hex>): its waterfall and, for the span picked (a
// row click, or &span=<id> in the URL), a detail pane with attributes, events and links,
// links to its logs (by trace and span id) and its service's RED metrics (TraceQL metrics on
// /api/metrics/query_range, when the daemon serves it). Escape closes the pane.

import { get, ApiError } from "./api.js";
import { h, fmtDur, fmtTime, nsToMs, colorOf } from "./dom.js";
import { notice } from "./editor.js";
import { idHex, attr, attrTable } from "./otlp.js";
import { waterfall } from "./waterfall.js";
import { lineChart } from "./chart.js";

// The spans of a trace JSON ({batches} or {resourceSpans}, or v2's {trace: {...}}), flat.
export function spansOf(doc) {
  const rs = doc.batches || doc.resourceSpans || (doc.trace && (doc.trace.resourceSpans || doc.trace.batches)) || [];
  const out = [];
  for (const r of rs) {
    const res = (r.resource && r.resource.attributes) || [];
    const service = attr(res, "service.name") || "unknown";
    for (const ss of r.scopeSpans || r.instrumentationLibrarySpans || []) {
      for (const s of ss.spans || []) {
        const code = s.status && s.status.code;
        out.push({
          id: idHex(s.spanId), parent: idHex(s.parentSpanId || ""), traceId: idHex(s.traceId), name: s.name || "",
          service, resource: res, scope: ss.scope || ss.instrumentationLibrary || {},
          kind: String(s.kind || "SPAN_KIND_UNSPECIFIED").replace("SPAN_KIND_", "").toLowerCase(),
          start: nsToMs(s.startTimeUnixNano || "0"), end: nsToMs(s.endTimeUnixNano || s.startTimeUnixNano || "0"),
          error: code === 2 || code === "STATUS_CODE_ERROR",
          status: s.status || {}, attributes: s.attributes || [],
          events: (s.events || []).map((e) => ({ name: e.name || "", time: nsToMs(e.timeUnixNano || "0"), attributes: e.attributes || [] })),
          links: (s.links || []).map((l) => ({ traceId: idHex(l.traceId), spanId: idHex(l.spanId), attributes: l.attributes || [] })),
        });
      }
    }
  }
  return out;
}

export function render(root, p, ctx) {
  const id = (p.get("id") || "").trim().toLowerCase();
  const head = h("div.toolbar.trace-head",
    h("a.back", { href: `?${ctx.viewParams("traces")}`, on: { click: (e) => { e.preventDefault(); history.length > 1 ? history.back() : ctx.open("traces"); } } }, "← Traces"),
    h("span.trace-id", `Trace ${id}`));
  const body = h("div.trace-body");
  const pane = h("aside.pane");
  pane.hidden = true;
  root.append(head, h("div.trace-main", body, pane));
  const abort = new AbortController();
  let wf = null, spans = [];

  const close = () => {
    pane.hidden = true;
    if (wf) wf.select(null);
    if (p.get("span")) ctx.navigate({ span: null }, true);
  };
  const select = (s, push = true) => {
    if (!s) return close();
    wf.select(s);
    wf.scrollTo(s);
    pane.hidden = false;
    pane.replaceChildren(detail(s, spans, ctx, close, abort.signal));
    if (push && p.get("span") !== s.id) { history.replaceState(null, "", `?${new URLSearchParams({ ...Object.fromEntries(new URLSearchParams(location.search)), span: s.id })}`); }
  };

  if (!/^[0-9a-f]{1,32}$/.test(id)) {
    body.append(notice("a trace id is 1 to 32 hex digits"));
    return null;
  }
  body.append(h("div.loading", "Loading…"));
  get(`/api/traces/${id}`, {}, abort.signal)
    .then((doc) => {
      spans = spansOf(doc);
      body.replaceChildren();
      if (spans.length === 0) { body.append(notice("the trace has no spans")); return; }
      // one distinct colour per service of this trace
      const svcs = [...new Set(spans.map((s) => s.service))].sort();
      const colors = new Map(svcs.map((s, i) => [s, colorOf(s, i)]));
      for (const s of spans) s.color = colors.get(s.service);
      body.append(h("ul.legend.small.services", svcs.map((s) => { const sw = h("span.swatch"); sw.style.background = colors.get(s); return h("li", sw, s); })));
      wf = waterfall(body, spans, (s) => select(s));
      const want = p.get("span");
      const s = want && spans.find((x) => x.id === want);
      if (s) select(s, false);
    })
    .catch((e) => {
      if (e.name === "AbortError") return;
      body.replaceChildren(notice(e instanceof ApiError && e.status === 404 ? `no trace ${id} in this daemon` : e.message));
    });
  return {
    unmount() { abort.abort(); if (wf) wf.destroy(); },
    escape() { if (!pane.hidden) close(); },
  };
}

function detail(s, spans, ctx, close, signal) {
  const t0 = Math.min(...spans.map((x) => x.start));
  const logsQ = `{service_name=~".+"} | trace_id="${s.traceId}" | span_id="${s.id}"`;
  const red = h("section.red", h("h4", `RED metrics of ${s.service}`));
  loadRed(red, s.service, signal);
  return h("div.span-detail", { dataset: { span: s.id } },
    h("div.pane-head", h("h3", s.name), h("button.close", { type: "button", title: "close (Escape)", on: { click: close } }, "×")),
    h("table.kv", h("tbody",
      [["service", s.service], ["duration", fmtDur(s.end - s.start)], ["start", `${fmtTime(s.start)} (+${fmtDur(s.start - t0)})`],
        ["kind", s.kind], ["status", `${String(s.status.code || "unset").replace("STATUS_CODE_", "").toLowerCase()}${s.status.message ? `: ${s.status.message}` : ""}`],
        ["span id", s.id], ["parent", s.parent || "(root)"], ["scope", `${s.scope.name || ""} ${s.scope.version || ""}`]]
        .map(([k, v]) => h("tr", h("td.k", k), h("td.v", v))))),
    h("div.links",
      h("a.span-logs", { href: `?${ctx.viewParams("logs", { q: logsQ })}`, on: { click: (e) => { e.preventDefault(); ctx.open("logs", { q: logsQ }); } } }, "Logs of this span"),
      h("a.trace-logs", { href: "#", on: { click: (e) => { e.preventDefault(); ctx.open("logs", { q: `{service_name=~".+"} | trace_id="${s.traceId}"` }); } } }, "Logs of this trace")),
    attrTable("Attributes", s.attributes),
    s.events.length ? h("section.attrs", h("h4", `Events (${s.events.length})`),
      s.events.map((e) => h("div.event", h("div", h("b", e.name), ` +${fmtDur(e.time - s.start)}`), attrTable("", e.attributes)))) : null,
    s.links.length ? h("section.attrs", h("h4", `Links (${s.links.length})`),
      s.links.map((l) => h("div.link", h("a", { href: "#", on: { click: (e) => { e.preventDefault(); ctx.open("trace", { id: l.traceId, span: l.spanId }); } } }, `${l.traceId} / ${l.spanId}`), attrTable("", l.attributes)))) : null,
    attrTable("Resource", s.resource),
    red);
}

// Rate, errors and duration of |service| over the last hour, from TraceQL metrics.
async function loadRed(host, service, signal) {
  const sel = `resource.service.name = ${JSON.stringify(service)}`;
  const end = Date.now(), start = end - 3600000;
  const qs = [["rate (spans/s)", `{ ${sel} } | rate()`], ["errors (spans/s)", `{ ${sel} && status = error } | rate()`],
    ["duration p90 (s)", `{ ${sel} } | quantile_over_time(duration, .9)`]];
  for (const [title, q] of qs) {
    const box = h("div.red-chart");
    host.append(h("div.red-title", title), box);
    try {
      const r = await get("/api/metrics/query_range", { q, start: Math.floor(start / 1000), end: Math.floor(end / 1000), step: "60s" }, signal);
      const series = (r.series || []).map((x) => ({
        label: (x.labels || []).map((l) => `${l.key}=${Object.values(l.value || {})[0]}`).join(", ") || title,
        points: (x.samples || []).map((sm) => [Number(sm.timestampMs), Number(sm.value)]),
      }));
      lineChart(box, series, start, end, 100);
    } catch (e) {
      if (e.name === "AbortError") return;
      box.append(notice(e instanceof ApiError && e.status === 404 ? "TraceQL metrics (/api/metrics/query_range) are not served by this daemon" : e.message, "info"));
      if (e instanceof ApiError && e.status === 404) return;
    }
  }
}
