// traces.js - the Traces view: a TraceQL search (/api/search) over the range and a table of
// the traces it found (root service, root name, duration, span count, start), newest first.

import { get } from "./api.js";
import { h, fmtTime, fmtDur, nsToMs } from "./dom.js";
import { queryBox, rangeOr, failTo } from "./editor.js";
import { picker } from "./time.js";

export function render(root, p, ctx) {
  const q = p.get("q") || "{}";
  const limit = p.get("limit") || "50";
  const box = queryBox({ value: q, label: "TraceQL query", placeholder: '{ resource.service.name = "api" && status = error }',
    onRun: (text) => ctx.navigate({ q: text }) });
  const lim = h("select.limit", { "aria-label": "traces at most", on: { change: () => ctx.navigate({ limit: lim.value }) } },
    ["20", "50", "100", "500"].map((n) => h("option", { value: n, selected: n === limit }, `${n} traces`)));
  const out = h("div.results");
  root.append(h("div.toolbar", box.el, picker(p, (r) => ctx.navigate(r)), lim), out);
  const range = rangeOr(p, out);
  if (!range) return null;
  const abort = new AbortController();
  get("/api/search", { q, limit, start: Math.floor(range.start / 1000), end: Math.ceil(range.end / 1000) + 1 }, abort.signal)
    .then((r) => {
      const rows = (r.traces || []).slice().sort((a, b) => (BigInt(b.startTimeUnixNano || 0) > BigInt(a.startTimeUnixNano || 0) ? 1 : -1));
      const open = (t) => ctx.open("trace", { id: t.traceID });
      out.append(h("div.count", `${rows.length} trace${rows.length === 1 ? "" : "s"}`),
        h("table.traces", h("thead", h("tr", ["Trace", "Root service", "Root name", "Duration", "Spans", "Errors", "Start"].map((c) => h("th", c)))),
          h("tbody", rows.map((t) => {
            const stats = Object.values(t.serviceStats || {});
            const spans = stats.reduce((a, s) => a + (s.spanCount || 0), 0);
            const errs = stats.reduce((a, s) => a + (s.errorCount || 0), 0);
            return h("tr.trace", { tabIndex: 0, dataset: { id: t.traceID }, on: { click: () => open(t), keydown: (e) => { if (e.key === "Enter") open(t); } } },
              h("td.id", t.traceID.slice(0, 16)), h("td", t.rootServiceName || ""), h("td", t.rootTraceName || ""),
              h("td.num", t.durationMs ? fmtDur(t.durationMs) : "<1 ms"), h("td.num", String(spans || (t.spanSet && t.spanSet.matched) || "")),
              h("td.num", errs ? String(errs) : ""), h("td", fmtTime(nsToMs(t.startTimeUnixNano || "0"))));
          }))));
    })
    .catch(failTo(box, out));
  return { unmount: () => abort.abort() };
}
