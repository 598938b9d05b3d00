// status.js - the Status page: the daemon's own counters from /metrics (Prometheus text),
// grouped as an operator reads them, with rates from two scrapes 5 s apart, and every series
// in a filterable table below.

import { get } from "./api.js";
import { h, fmtNum } from "./dom.js";
import { notice } from "./editor.js";

const EVERY_MS = 5000;

// Prometheus text -> [{name, labels: {..}, value}] (comments skipped).
export function parseExposition(text) {
  const out = [];
  for (const line of text.split("\n")) {
    if (!line || line[0] === "#") continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    if (m[3]) for (const kv of m[3].matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[kv[1]] = kv[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    out.push({ name: m[1], labels, value: Number(m[4]) });
  }
  return out;
}

const bytes = (v) => {
  const u = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return `${+v.toPrecision(4)} ${u[i]}`;
};

// Sections: a title and the series it shows (by name or pattern), rate for counters.
const SECTIONS = [
  ["Ingest (records/s by signal and transport)", (s) => s.name === "miradb_otlp_records_total", "rate"],
  ["Ingest requests/s", (s) => s.name === "miradb_otlp_requests_total", "rate"],
  ["Admission waits and refusals", (s) => /^miradb_(admission_|disk_low_refusals|otlp_rejected_records|otlp_request_errors|auth_refusals|http_host_refusals|connections_refused|grpc_flood)/.test(s.name), "total"],
  ["Memory budget", (s) => /^miradb_memory_/.test(s.name), "bytes"],
  ["Blocks (hot and cold tiers; open = not yet sealed)", (s) => /^miradb_(blocks|block_bytes|block_rows|tier_|unsealed_|open_block_)/.test(s.name), "value"],
  ["WAL (on disk now; written since start)", (s) => /^miradb_wal_(disk_bytes|bytes_total|frames_total)$/.test(s.name), "value"],
  ["Verification failures", (s) => /^miradb_(blocks_quarantined|query_blocks_failed|wal_torn_frames|wal_replay_bad_frames|seal_failures|verify_)/.test(s.name), "total"],
  ["Compaction backlog", (s) => /^miradb_compact/.test(s.name), "value"],
];

const seriesKey = (s) => `${s.name}{${Object.entries(s.labels).map(([k, v]) => `${k}="${v}"`).join(",")}}`;

export function render(root) {
  const top = h("div.status-top");
  const cards = h("div.cards");
  const filter = h("input.filter", { type: "text", placeholder: "filter series", "aria-label": "filter series" });
  const all = h("div.all");
  root.append(top, cards, h("h3", "Every series"), filter, all);
  let prev = null, prevAt = 0, timer = null, stopped = false, last = [];
  const abort = new AbortController();

  const drawAll = () => {
    const f = filter.value.trim();
    all.replaceChildren(h("table.series", h("tbody", last.filter((s) => !f || seriesKey(s).includes(f)).map((s) =>
      h("tr", h("td.series", seriesKey(s)), h("td.num", fmtNum(s.value)))))));
  };
  filter.addEventListener("input", drawAll);

  async function tick() {
    try {
      const text = await get("/metrics", {}, abort.signal);
      const now = Date.now();
      const cur = parseExposition(text);
      const before = prev ? new Map(prev.map((s) => [seriesKey(s), s.value])) : null;
      const dt = (now - prevAt) / 1000;
      const mem = Object.fromEntries(cur.filter((s) => s.name.startsWith("miradb_memory_")).map((s) => [s.name, s.value]));
      const used = mem.miradb_memory_in_use_bytes || 0, budget = mem.miradb_memory_budget_bytes || 0;
      const bar = h("div.membar", h("div.fill"));
      bar.firstChild.style.width = `${budget ? Math.min(100, (100 * used) / budget) : 0}%`;
      top.replaceChildren(h("div.memline", `Memory in use ${bytes(used)} of ${bytes(budget)}`, bar),
        h("div.muted", `from /metrics, every ${EVERY_MS / 1000} s${before ? "" : " (rates after the second scrape)"}`));
      cards.replaceChildren(...SECTIONS.map(([title, match, kind]) => {
        const ss = cur.filter(match);
        const rows = ss.filter((s) => kind !== "rate" || s.value > 0 || before).map((s) => {
          let v;
          if (kind === "rate") v = before && before.has(seriesKey(s)) ? `${fmtNum(Math.max(0, s.value - before.get(seriesKey(s))) / dt)}/s` : `${fmtNum(s.value)} total`;
          else if (kind === "bytes" || /bytes/.test(s.name)) v = bytes(s.value);
          else v = fmtNum(s.value);
          const lab = Object.entries(s.labels).map(([k, x]) => `${k}=${x}`).join(" ");
          return h("tr", { dataset: { series: seriesKey(s) } }, h("td.series", s.name.replace(/^miradb_/, ""), lab ? h("span.lab", ` ${lab}`) : null), h("td.num", v));
        });
        return h("section.card", h("h4", title), rows.length ? h("table", h("tbody", rows)) : h("div.muted", ss.length ? "nothing yet" : "not reported by this daemon"));
      }));
      last = cur;
      drawAll();
      prev = cur;
      prevAt = now;
    } catch (e) {
      if (e.name === "AbortError") return;
      top.replaceChildren(notice(e.message));
    }
    if (!stopped) timer = setTimeout(tick, EVERY_MS);
  }
  tick();
  return { unmount() { stopped = true; abort.abort(); clearTimeout(timer); } };
}
