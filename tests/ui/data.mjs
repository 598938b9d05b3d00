// data.mjs - the known data the UI tests load: OTLP/JSON bodies for logs, one trace and
// metrics, all timed relative to |base| (ms since the epoch) so that the UI's default
// "last hour" range holds them. Exports the bodies and what the tests expect to see.

const hex = (n, width) => n.toString(16).padStart(width, "0");
export const TRACE_ID = "5b8efff798038103d269b633813fc60c";
// spans: [id, parent, service, name, start offset ms, duration ms, error, events]
export const SPANS = [
  ["eee19b7ec3c1b174", "", "frontend", "GET /checkout", 0, 400, false, []],
  ["eee19b7ec3c1b175", "eee19b7ec3c1b174", "cart", "cart.get", 10, 80, false, []],
  ["eee19b7ec3c1b176", "eee19b7ec3c1b174", "payment", "payment.charge", 100, 250, true, [["retry", 150]]],
  ["eee19b7ec3c1b177", "eee19b7ec3c1b176", "payment", "db.query", 120, 60, false, []],
  ["eee19b7ec3c1b178", "eee19b7ec3c1b175", "cart", "redis.get", 20, 15, false, []],
  // under cart.get's time entirely: not on the critical path
  ["eee19b7ec3c1b179", "eee19b7ec3c1b174", "frontend", "audit.log", 20, 40, false, []],
];
// The waterfall's rows in parent/child order (depth-first, children by start).
export const WATERFALL = ["GET /checkout", "cart.get", "redis.get", "audit.log", "payment.charge", "db.query"];
// Each row's critical-path pieces (ms from the trace's start), walking back from the root's
// end into the child that finished last: payment.charge (to 350, db.query inside it), then
// cart.get (to 90, redis.get inside it); audit.log ran under cart.get and is off the path.
export const CRITICAL = ["0-10,90-100,350-400", "10-20,35-90", "20-35", "", "100-120,180-350", "120-180"];

const ns = (ms) => String(BigInt(Math.round(ms)) * 1000000n);
const str = (key, v) => ({ key, value: { stringValue: v } });

export function traces(base) {
  const byService = new Map();
  for (const [id, parent, svc, name, off, dur, err, events] of SPANS) {
    if (!byService.has(svc)) byService.set(svc, []);
    byService.get(svc).push({
      traceId: TRACE_ID, spanId: id, parentSpanId: parent, name, kind: parent ? 3 : 2,
      startTimeUnixNano: ns(base + off), endTimeUnixNano: ns(base + off + dur),
      attributes: [str("http.route", "/checkout"), { key: "retries", value: { intValue: "2" } }],
      events: events.map(([n, at]) => ({ name: n, timeUnixNano: ns(base + at), attributes: [] })),
      status: err ? { code: 2, message: "card declined" } : { code: 0 },
    });
  }
  return {
    resourceSpans: [...byService].map(([svc, spans]) => ({
      resource: { attributes: [str("service.name", svc)] },
      scopeSpans: [{ scope: { name: "ui-test" }, spans }],
    })),
  };
}

// The record the log test looks for, and its typed attributes as the UI must show them.
export const KNOWN_LOG = {
  body: "payment declined for order 7731",
  attrs: [["order.id", "int", "7731"], ["amount", "double", "12.5"], ["card.present", "bool", "false"], ["customer", "string", "c-42"]],
};

export function logs(base) {
  const records = [];
  for (let i = 0; i < 30; i++) {
    records.push({
      timeUnixNano: ns(base - 60000 + i * 1000),
      severityNumber: i % 3 === 0 ? 13 : 9, severityText: i % 3 === 0 ? "WARN" : "INFO",
      body: { stringValue: `filler line ${i}` }, attributes: [str("i", String(i))],
    });
  }
  records.push({
    timeUnixNano: ns(base + 150), severityNumber: 17, severityText: "ERROR",
    body: { stringValue: KNOWN_LOG.body }, traceId: TRACE_ID, spanId: SPANS[2][0],
    attributes: [
      { key: "order.id", value: { intValue: "7731" } }, { key: "amount", value: { doubleValue: 12.5 } },
      { key: "card.present", value: { boolValue: false } }, str("customer", "c-42"),
    ],
  });
  return {
    resourceLogs: [{
      resource: { attributes: [str("service.name", "payment"), str("host.name", "ui-host")] },
      scopeLogs: [{ scope: { name: "ui-test-logger", version: "1.0" }, logRecords: records }],
    }],
  };
}

// ui_test_latency_seconds' bucket counts (not cumulative) at its last point, bounds 0.1, 0.5, 1, +Inf.
export const HIST_LAST = [40, 80, 120, 40];
// ui_test_exp's bucket counts at its last point, buckets up to 2, 4 and 8.
export const EXP_LAST = [40, 80, 120];
// Gauge ui_test_temp: one series per room, a point every 15 s for 10 min, the last value known.
export const ROOMS = { a: 21.5, b: 19, c: 23.25 };
export function metrics(base) {
  const points = [];
  for (const [room, last] of Object.entries(ROOMS)) {
    for (let k = 40; k >= 0; k--) {
      points.push({ timeUnixNano: ns(base - k * 15000), asDouble: k === 0 ? last : last - 1 + (k % 3),
                    attributes: [str("room", room)] });
    }
  }
  const hist = [];
  for (let k = 40; k >= 0; k--) {
    const j = 40 - k; // counts grow with time; the last point has HIST_LAST
    const c = [j, 2 * j, 3 * j, j];
    hist.push({ timeUnixNano: ns(base - k * 15000), startTimeUnixNano: ns(base - 700000),
                count: String(7 * j), sum: 0.4 * j, explicitBounds: [0.1, 0.5, 1],
                bucketCounts: c.map(String), attributes: [] });
  }
  // An exponential histogram (a native histogram to PromQL): scale 0, buckets (1,2], (2,4], (4,8].
  const exp = [];
  for (let k = 40; k >= 0; k--) {
    const j = 40 - k;
    exp.push({ timeUnixNano: ns(base - k * 15000), startTimeUnixNano: ns(base - 700000), count: String(6 * j), sum: 9 * j,
               scale: 0, zeroCount: "0", positive: { offset: 0, bucketCounts: [j, 2 * j, 3 * j].map(String) }, attributes: [] });
  }
  return {
    resourceMetrics: [{
      resource: { attributes: [str("service.name", "sensors")] },
      scopeMetrics: [{ scope: { name: "ui-test" }, metrics: [
        { name: "ui_test_temp", gauge: { dataPoints: points } },
        { name: "ui_test_latency_seconds", histogram: { aggregationTemporality: 2, dataPoints: hist } },
        { name: "ui_test_exp", exponentialHistogram: { aggregationTemporality: 2, dataPoints: exp } },
      ] }],
    }],
  };
}

export { hex };

// Service "pager": PAGER_COUNT records a second apart, newest "page 0", except that 11 of
// them (a run across the first page's end, at 100 a page) share one timestamp.
export const PAGER_COUNT = 250;
export function pager(base) {
  const records = [];
  for (let i = 0; i < PAGER_COUNT; i++) {
    const at = i >= 95 && i <= 105 ? base - 95000 : base - i * 1000;
    records.push({ timeUnixNano: ns(at), severityNumber: 9, body: { stringValue: `page ${i}` } });
  }
  return { resourceLogs: [{ resource: { attributes: [str("service.name", "pager")] }, scopeLogs: [{ logRecords: records }] }] };
}

// One record for the live tail to pick up, sent while the view polls.
export function liveRecord(at) {
  return { resourceLogs: [{ resource: { attributes: [str("service.name", "tail")] },
    scopeLogs: [{ logRecords: [{ timeUnixNano: ns(at), severityNumber: 13, body: { stringValue: "arrived while tailing" } }] }] }] };
}

// A record whose body is a map, with an array and a bytes attribute (service "kvbody").
export const KV_BODY = { user: { id: 7, name: "ann" }, ok: true };
export function kvLog(base) {
  const user = { kvlistValue: { values: [{ key: "id", value: { intValue: "7" } }, str("name", "ann")] } };
  const body = { kvlistValue: { values: [{ key: "user", value: user }, { key: "ok", value: { boolValue: true } }] } };
  const tags = { arrayValue: { values: [{ stringValue: "a" }, { intValue: "2" }] } };
  const record = { timeUnixNano: ns(base), severityNumber: 9, body,
    attributes: [{ key: "tags", value: tags }, { key: "raw", value: { bytesValue: "AQID" } }] };
  return { resourceLogs: [{ resource: { attributes: [str("service.name", "kvbody")] }, scopeLogs: [{ logRecords: [record] }] }] };
}
