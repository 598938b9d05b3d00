// run.mjs - MiraDB's web UI in a real browser: starts a daemon (port 0, a temp data dir),
// fills it with the known data of data.mjs over OTLP/HTTP JSON, and drives Debian's chromium
// headless (playwright-core, no browser download) through every view at 1280x800. Prints one
// PASS/FAIL line per check, screenshots under OUT, and "ui: N passed, N failed" last.
//
//   node run.mjs BIN OUT        BIN = the miradb binary, OUT = the screenshot folder
//
// Environment: MIRADB_CHROMIUM (default /usr/bin/chromium). Every wait has a deadline.

import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import * as data from "./data.mjs";

const [bin, out] = process.argv.slice(2);
if (!bin || !out) {
  console.error("usage: node run.mjs BIN OUT");
  process.exit(64);
}
mkdirSync(out, { recursive: true });
let passed = 0, failed = 0;
const pass = (what) => { passed++; console.log(`PASS ${what}`); };
const fail = (what, why) => { failed++; console.log(`FAIL ${what}: ${why}`); };
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);
const check = (what, got, want) => (eq(got, want) ? pass(what) : fail(what, `got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`));

const tmp = mkdtempSync(join(tmpdir(), "miradb-ui-"));
let browser = null;
const daemons = []; // {name, proc, err, status}
for (const sig of ["SIGINT", "SIGTERM"]) process.on(sig, async () => { console.log(`ui: interrupted (${sig})`); await cleanup(); process.exit(1); });
async function stopDaemon(d) {
  if (d.proc.exitCode === null && d.proc.signalCode === null) {
    d.proc.kill("SIGTERM");
    await new Promise((r) => { const t = setTimeout(() => { d.proc.kill("SIGKILL"); r(); }, 10000); d.proc.once("exit", () => { clearTimeout(t); r(); }); });
  }
  d.status = d.proc.exitCode;
}
async function cleanup() {
  if (browser) await browser.close().catch(() => {});
  for (const d of daemons) await stopDaemon(d);
  rmSync(tmp, { recursive: true, force: true });
}
function finish() {
  console.log(`ui: ${passed} passed, ${failed} failed`);
  process.exitCode = failed === 0 && passed > 0 ? 0 : 1;
}
const deadline = setTimeout(async () => { fail("run", "still running after 170 s"); await cleanup(); finish(); process.exit(1); }, 170000);

// Starts a daemon named |name| (its own data dir) with |extra| arguments; resolves to its HTTP port.
async function startDaemon(name, extra = []) {
  const proc = spawn(bin, ["serve", "--data", join(tmp, name), "--http-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", ...extra],
    { stdio: ["ignore", "ignore", "pipe"] });
  const d = { name, proc, err: "", status: null };
  daemons.push(d);
  proc.stderr.on("data", (b) => { d.err += b; });
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${name}: no listening line within 20 s: ${d.err.slice(-400)}`)), 20000);
    proc.stderr.on("data", () => {
      const m = /event=listening .*http=[^ ]*:(\d+)/.exec(d.err);
      if (m) { clearTimeout(t); resolve(Number(m[1])); }
    });
    proc.once("exit", (c) => { clearTimeout(t); reject(new Error(`${name}: daemon exited ${c}: ${d.err.slice(-400)}`)); });
  });
}

async function post(port, path, body) {
  const r = await fetch(`http://127.0.0.1:${port}${path}`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  if (r.status !== 200) throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
}

// A trace of |n| spans: a root, 100 children, the rest spread under them.
function bigTrace(base, n) {
  const id = "00000000000000000000000000abcdef";
  const sid = (i) => (i + 1).toString(16).padStart(16, "0");
  const spans = [];
  for (let i = 0; i < n; i++) {
    const parent = i === 0 ? "" : i <= 100 ? sid(0) : sid(1 + ((i - 101) % 100));
    const off = i === 0 ? 0 : i <= 100 ? i * 10 : ((i - 101) % 100) * 10 + 1 + (i % 7);
    spans.push({ traceId: id, spanId: sid(i), parentSpanId: parent, name: `op-${i}`, kind: 1,
      startTimeUnixNano: String(BigInt(base + off) * 1000000n), endTimeUnixNano: String(BigInt(base + off + (i === 0 ? 1100 : i <= 100 ? 9 : 2)) * 1000000n),
      status: { code: i % 97 === 0 ? 2 : 0 } });
  }
  return { id, body: { resourceSpans: [{ resource: { attributes: [{ key: "service.name", value: { stringValue: "big" } }] }, scopeSpans: [{ spans }] }] } };
}

async function main() {
  const port = await startDaemon("main");
  const origin = `http://127.0.0.1:${port}`;
  pass(`daemon listening on :${port}`);
  const base = Date.now() - 120000;
  await post(port, "/v1/logs", data.logs(base));
  await post(port, "/v1/traces", data.traces(base));
  await post(port, "/v1/metrics", data.metrics(base));
  await post(port, "/v1/logs", data.pager(base));
  await post(port, "/v1/logs", data.kvLog(base));
  const big = bigTrace(base, 10000);
  await post(port, "/v1/traces", big.body);
  pass("known data exported (logs, one trace, metrics, a 10,000-span trace)");

  // ---- the server side, as a browser sees it ----
  const idx = await fetch(`${origin}/ui/`);
  const html = await idx.text();
  check("GET /ui/: status and content type", [idx.status, idx.headers.get("content-type")], [200, "text/html; charset=utf-8"]);
  check("GET /ui/: no-cache, nosniff, CSP", [idx.headers.get("cache-control"), idx.headers.get("x-content-type-options"), /^default-src 'self'; script-src 'self';/.test(idx.headers.get("content-security-policy") || "")], ["no-cache", "nosniff", true]);
  const asset = /src="(a\/[0-9a-f]{16}\/app\.js)"/.exec(html);
  if (!asset) fail("index names app.js under a/<hash>/", html.slice(0, 300));
  else {
    const a = await fetch(`${origin}/ui/${asset[1]}`);
    await a.arrayBuffer();
    check("app.js: type and immutable caching", [a.status, a.headers.get("content-type"), a.headers.get("cache-control")], [200, "text/javascript; charset=utf-8", "public, max-age=31536000, immutable"]);
    const again = await fetch(`${origin}/ui/${asset[1]}`, { headers: { "if-none-match": a.headers.get("etag") } });
    check("app.js with If-None-Match: its ETag -> 304 and no body", [again.status, (await again.arrayBuffer()).byteLength], [304, 0]);
  }
  const miss = await fetch(`${origin}/ui/nope.js`);
  check("GET /ui/nope.js -> 404", miss.status, 404);
  const root = await fetch(`${origin}/`, { redirect: "manual" });
  check("GET / -> 302 /ui/", [root.status, root.headers.get("location")], [302, "/ui/"]);

  // ---- the browser ----
  browser = await chromium.launch({ executablePath: process.env.MIRADB_CHROMIUM || "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-proxy-server"] });
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, colorScheme: "dark" });
  const page = await context.newPage();
  const consoleErrors = [];
  // An HTTP error the test provokes on purpose shows in Chromium's console as
  // "Failed to load resource"; only those, on the URLs expected, are allowed.
  let allowed = [];
  page.on("console", (m) => {
    if (m.type() !== "error") return;
    const url = m.location().url || "";
    if (/Failed to load resource: the server responded with a status of (400|404)/.test(m.text()) && allowed.some((re) => re.test(url))) return;
    consoleErrors.push(`${m.text()} (${url})`);
  });
  page.on("pageerror", (e) => consoleErrors.push(`page error: ${e.message}`));
  const ui = (params) => `${origin}/ui/?${new URLSearchParams(params)}`;
  const shot = (name) => page.screenshot({ path: join(out, `${name}.png`) });
  const T = { timeout: 15000 };

  // Logs: find the known record, expand it.
  const logQ = '{service_name="payment"} |= "declined"';
  await page.goto(ui({ view: "logs", q: logQ }));
  await page.waitForSelector(".record .rhead", T);
  check("logs: the search finds exactly the known record", await page.locator(".record").count(), 1);
  check("logs: its body", await page.locator(".record .rhead .body").textContent(), data.KNOWN_LOG.body);
  await page.waitForSelector(".hist canvas.chart", T);
  check("logs: the histogram has one level (error)", await page.locator(".hist ul.legend li .label").allTextContents(), ["error"]);
  await page.click(".record .rhead");
  await page.waitForSelector(".record .detail", T);
  const attrs = await page.$$eval(".detail section.attrs:nth-of-type(2) tr.attr", (rs) => rs.map((r) => [r.dataset.key, r.dataset.type, r.querySelector("td.v").textContent]));
  check("logs: the expanded record lists its attributes with their types", attrs, data.KNOWN_LOG.attrs);
  const res = await page.$$eval(".detail section.attrs:nth-of-type(3) tr.attr", (rs) => rs.map((r) => [r.dataset.key, r.querySelector("td.v").textContent]));
  check("logs: and its resource", res, [["service.name", "payment"], ["host.name", "ui-host"]]);
  check("logs: body type and trace id", [await page.locator(".detail pre.bodyval").textContent(), await page.locator(".detail a.traceid").textContent()], [data.KNOWN_LOG.body, data.TRACE_ID]);
  await shot("logs");

  // A body of another type: a map, shown as JSON with its type; array and bytes attributes.
  await page.goto(ui({ view: "logs", q: '{service_name="kvbody"}' }));
  await page.waitForSelector(".record .rhead", T);
  await page.click(".record .rhead");
  await page.waitForSelector(".record .detail", T);
  const bodyType = await page.$eval(".detail pre.bodyval", (b) => b.closest("tr").querySelector("td.t").textContent);
  check("logs: a map body is typed kvlist and shown whole", [bodyType, JSON.parse(await page.textContent(".detail pre.bodyval"))], ["kvlist", data.KV_BODY]);
  check("logs: array and bytes attributes with their types",
    await page.$$eval(".detail section.attrs:nth-of-type(2) tr.attr", (rs) => rs.map((r) => [r.dataset.key, r.dataset.type, r.querySelector("td.v").textContent])),
    [["tags", "array", '["a",2]'], ["raw", "bytes", "AQID"]]);

  // An absolute range that holds the record finds it; one that ends before it does not;
  // a preset writes a relative range into the URL.
  const iso = (ms) => new Date(ms).toISOString();
  await page.goto(ui({ view: "logs", q: logQ, from: iso(base - 1000), to: iso(base + 1000) }));
  await page.waitForSelector(".info .count", T);
  check("range: an absolute range around the record finds it, picker on Absolute",
    [await page.locator(".record").count(), await page.inputValue("select.range-preset")], [1, "abs"]);
  await page.goto(ui({ view: "logs", q: logQ, from: iso(base - 10000), to: iso(base) }));
  await page.waitForSelector(".info .count", T);
  check("range: one that ends before the record finds nothing", await page.textContent(".info .count"), "0 records");
  await page.selectOption("select.range-preset", "now-15m");
  await page.waitForSelector(".record", T);
  check("range: a preset puts from=now-15m&to=now in the URL", [new URL(page.url()).searchParams.get("from"), new URL(page.url()).searchParams.get("to")], ["now-15m", "now"]);
  await page.goto(ui({ view: "logs", q: logQ }));
  await page.waitForSelector(".record .rhead", T);
  await page.click(".record .rhead");
  await page.waitForSelector(".record .detail", T);

  // Its trace id opens the waterfall, whose span pane charts its service's RED metrics
  // (TraceQL metrics on /api/metrics/query_range).
  await page.click(".detail a.traceid");
  await page.waitForSelector(".wf-row", T);
  check("trace: the URL names the trace", new URL(page.url()).searchParams.get("id"), data.TRACE_ID);
  const rows = await page.$$eval(".wf-row", (rs) => rs.map((r) => ({ name: r.querySelector(".wf-name").textContent, id: r.dataset.span, parent: r.dataset.parent, depth: Number(r.dataset.depth) })));
  check("trace: one row per span, in parent/child order", rows.map((r) => r.name), data.WATERFALL);
  let nested = rows.length === data.SPANS.length;
  rows.forEach((r, i) => {
    const want = data.SPANS.find((s) => s[0] === r.id);
    if (!want || want[1] !== r.parent) nested = false;
    if (i > 0) { const p = rows.slice(0, i).find((x) => x.id === r.parent); if (!p || p.depth !== r.depth - 1) nested = false; }
  });
  check("trace: each row sits one level under its parent, which comes before it", nested, true);
  check("trace: the canvas drew a bar for each span", await page.getAttribute("canvas.wf-bars", "data-drawn"), String(data.SPANS.length));
  check("trace: the critical path, piece by piece", await page.$$eval(".wf-row", (rs) => rs.map((r) => r.dataset.crit)), data.CRITICAL);
  check("trace: the error span is marked", await page.$$eval(".wf-row.err .wf-name", (rs) => rs.map((r) => r.textContent)), ["payment.charge"]);
  await page.waitForSelector("aside.pane .span-detail", T);
  check("trace: the log's span is open in the pane", await page.getAttribute("aside.pane .span-detail", "data-span"), data.SPANS[2][0]);
  await page.waitForFunction(() => document.querySelectorAll("aside.pane .red canvas.chart").length === 3, null, T);
  check("trace: the span's service gets rate, errors and duration charts, one series each (payment)",
    await page.$$eval("aside.pane .red canvas.chart", (cs) => cs.map((c) => c.dataset.series)), ["1", "1", "1"]);
  await shot("trace");
  await page.click("aside.pane a.span-logs");
  await page.waitForSelector(".record .body", T);
  check("trace: the span's logs (by trace and span id) are the known record",
    await page.$$eval(".record .body", (bs) => bs.map((b) => b.textContent)), [data.KNOWN_LOG.body]);
  await page.goBack();
  await page.waitForSelector("aside.pane .span-detail", T);
  await page.keyboard.press("Escape");
  check("trace: Escape closes the pane", await page.locator("aside.pane").isHidden(), true);
  await page.goBack();
  await page.waitForSelector(".record", T);
  check("back button: the logs view with its query again", await page.inputValue("input.query"), logQ);

  // Paging as the list scrolls: every record once, newest first, across a run of equal
  // timestamps at a page's end.
  await page.goto(ui({ view: "logs", q: '{service_name="pager"}' }));
  await page.waitForSelector(".record", T);
  for (let i = 0; i < 10 && (await page.locator(".record").count()) < data.PAGER_COUNT; i++) {
    await page.$eval(".sentinel", (s) => s.scrollIntoView());
    await page.waitForFunction((n) => document.querySelectorAll(".record").length > n || /records$/.test(document.querySelector(".info .count").textContent),
      await page.locator(".record").count(), T).catch(() => {});
  }
  const paged = await page.$$eval(".record", (rs) => rs.map((r) => [r.querySelector(".body").textContent, r.dataset.ts]));
  const bodies = paged.map((x) => x[0]);
  check("logs paging: all 250 records, each once", [paged.length, new Set(bodies).size], [data.PAGER_COUNT, data.PAGER_COUNT]);
  check("logs paging: newest first", paged.every((x, i) => i === 0 || BigInt(paged[i - 1][1]) >= BigInt(x[1])), true);
  check("logs paging: the end of the list says so", await page.textContent(".info .count"), `${data.PAGER_COUNT} records`);

  // Live tail: a record exported while the view polls shows up on top.
  await page.goto(ui({ view: "logs", q: '{service_name="tail"}', live: "1" }));
  await page.waitForSelector(".info .tail", T);
  await post(port, "/v1/logs", data.liveRecord(Date.now()));
  await page.waitForSelector(".record .body", T);
  check("live tail: the new record arrives on top", await page.textContent(".record .body"), "arrived while tailing");

  // Traces search.
  await page.goto(ui({ view: "traces", q: '{ resource.service.name = "payment" }' }));
  await page.waitForSelector("tr.trace", T);
  const tr = await page.$$eval("tr.trace", (rs) => rs.map((r) => [r.dataset.id, ...[...r.cells].slice(1, 5).map((c) => c.textContent)]));
  check("traces: the search finds the trace with its root, duration and span count", tr, [[data.TRACE_ID, "frontend", "GET /checkout", "400 ms", String(data.SPANS.length)]]);
  await shot("traces");
  await page.click("tr.trace");
  await page.waitForSelector(".wf-row", T);
  check("traces: a row opens its waterfall", await page.locator(".wf-row").count(), data.SPANS.length);

  // 10,000 spans: virtual rows.
  await page.goto(ui({ view: "trace", id: big.id }));
  await page.waitForSelector(".wf-row", { timeout: 60000 });
  const domRows = await page.locator(".wf-row").count();
  check("big trace: 10,000 rows known to the waterfall", await page.getAttribute("canvas.wf-bars", "data-rows"), "10000");
  check("big trace: only the visible rows are in the DOM", domRows > 0 && domRows < 80, true);
  await page.$eval(".wf-scroll", (s) => { s.scrollTop = s.scrollHeight; });
  await page.waitForFunction(() => Number(document.querySelector("canvas.wf-bars").dataset.first) > 9900, null, T);
  const lastName = await page.$$eval(".wf-row", (rs) => rs.map((r) => Number(r.dataset.index)).sort((a, b) => b - a)[0]);
  check("big trace: scrolled to the end, the last row is drawn", lastName, 9999);
  await shot("trace-10000");

  // Metrics: chart, legend, last values.
  await page.goto(ui({ view: "metrics", q: "ui_test_temp", from: "now-15m" }));
  await page.waitForSelector("canvas.chart", T);
  check("metrics: three series drawn", await page.getAttribute("canvas.chart", "data-series"), "3");
  const legend = await page.$$eval("ul.legend li", (ls) => ls.map((l) => [l.querySelector(".label").textContent, Number(l.dataset.last)]));
  check("metrics: each series' last value in the legend", legend.sort(), Object.entries(data.ROOMS).map(([r, v]) => [`ui_test_temp{job="sensors", room="${r}"}`, v]).sort());
  await shot("metrics");
  await page.fill("input.query", "");
  await page.type("input.query", "ui_test_t");
  await page.waitForSelector("ul.complete li", T);
  check("metrics: completion offers the metric name", await page.$$eval("ul.complete li", (ls) => ls.map((l) => l.textContent)), ["ui_test_temp"]);
  await page.keyboard.press("Tab");
  await page.type("input.query", "{ro");
  await page.waitForFunction(() => [...document.querySelectorAll("ul.complete li")].some((l) => l.textContent === "room"), null, T);
  pass("metrics: completion offers label names inside {}");
  await page.goto(ui({ view: "metrics", q: "ui_test_latency_seconds_bucket", from: "now-15m" }));
  await page.waitForSelector("canvas.heatmap", T);
  check("metrics: a histogram is a heatmap of its 4 buckets, low to high", await page.getAttribute("canvas.heatmap", "data-rows"), "≤ 0.1|≤ 0.5|≤ 1|≤ +Inf");
  check("metrics: the heatmap's last column holds each bucket's own count", await page.getAttribute("canvas.heatmap", "data-last"), data.HIST_LAST.join(","));
  await shot("metrics-heatmap");
  await page.goto(ui({ view: "metrics", q: "ui_test_exp", from: "now-15m" }));
  await page.waitForSelector("canvas.heatmap", T);
  check("metrics: a native histogram is a heatmap by bucket bound, its last column the counts",
    [await page.getAttribute("canvas.heatmap", "data-rows"), await page.getAttribute("canvas.heatmap", "data-last")], ["≤ 2|≤ 4|≤ 8", data.EXP_LAST.join(",")]);
  await shot("metrics-native-heatmap");
  await page.goto(ui({ view: "metrics", q: "ui_test_temp", mode: "instant" }));
  await page.waitForSelector("table.instant tbody tr", T);
  check("metrics: an instant query is a table of 3 rows", await page.locator("table.instant tbody tr").count(), 3);

  // Syntax errors at their position.
  allowed = [/\/loki\/api\/v1\/query_range/, /\/api\/v1\/logs/, /\/api\/v1\/query_range/, /\/api\/search/];
  await page.goto(ui({ view: "logs", q: '{service_name="payment"} |= "x" | ' }));
  await page.waitForSelector(".qerror:not([hidden])", T);
  check("logs: a LogQL syntax error names line 1, column 35", [await page.getAttribute(".qerror", "data-line"), await page.getAttribute(".qerror", "data-col")], ["1", "35"]);
  const caret = (await page.textContent(".qerror pre.caret")).split("\n")[1];
  check("logs: the caret stands under column 35", caret.indexOf("^"), 34);
  await shot("logs-error");
  await page.goto(ui({ view: "metrics", q: "sum(rate(foo[5m]" }));
  await page.waitForSelector(".qerror:not([hidden])", T);
  check("metrics: a PromQL syntax error names column 17", await page.getAttribute(".qerror", "data-col"), "17");
  await page.goto(ui({ view: "traces", q: "{ name = }" }));
  await page.waitForSelector(".qerror:not([hidden])", T);
  check("traces: a TraceQL syntax error names column 10", await page.getAttribute(".qerror", "data-col"), "10");
  allowed = [];

  // Status.
  await page.goto(ui({ view: "status" }));
  await page.waitForSelector("section.card tr", T);
  const logsJson = await page.$eval('section.card tr[data-series^="miradb_otlp_records_total{signal=\\"logs\\",transport=\\"http_json\\""] td.num', (c) => c.textContent);
  // 31 (logs()) + the pager's + the map-bodied one + the one live record
  check("status: logs records over HTTP/JSON counted", logsJson, `${31 + data.PAGER_COUNT + 1 + 1} total`);
  await shot("status");
  await page.click("#theme");
  await page.waitForSelector("section.card tr", T);
  check("theme: the button switches to the other theme", await page.$eval("html", (e) => e.dataset.theme), "light");
  await shot("status-light");

  check("no console errors on any view", consoleErrors, []);

  // Under --query-token-file: the page loads without a token (its files hold no data), finds
  // its API calls refused, shows the token box, and with the token typed in its calls carry it.
  const tokFile = join(tmp, "query.tokens");
  writeFileSync(tokFile, "ui-secret-token\n");
  const tport = await startDaemon("token", ["--query-token-file", tokFile]);
  await post(tport, "/v1/logs", data.logs(base));
  const tpage = await context.newPage();
  const tErrors = [];
  tpage.on("pageerror", (e) => tErrors.push(e.message));
  const sent = [];
  await tpage.route(`http://127.0.0.1:${tport}/**`, (route) => {
    const u = new URL(route.request().url());
    sent.push([u.pathname, route.request().headers().authorization || ""]);
    return route.continue();
  });
  await tpage.goto(`http://127.0.0.1:${tport}/ui/?${new URLSearchParams({ view: "logs", q: logQ })}`);
  await tpage.waitForSelector("#token-form:not([hidden])", T);
  pass("token: a 401 from the API shows the token box");
  await tpage.fill("#token", "ui-secret-token");
  await tpage.press("#token", "Enter");
  await tpage.waitForSelector(".record .body", T);
  check("token: with the token the search finds the record", await tpage.textContent(".record .body"), data.KNOWN_LOG.body);
  const last = sent.filter(([path]) => path === "/api/v1/logs").pop();
  check("token: the API call carried it as a Bearer header", last && last[1], "Bearer ui-secret-token");
  check("token: kept in sessionStorage", await tpage.evaluate(() => sessionStorage.getItem("miradb.token")), "ui-secret-token");
  check("token: no page errors", tErrors, []);
  await tpage.close();
}

try {
  await main();
} catch (e) {
  fail("run", e.stack || e.message);
}
clearTimeout(deadline);
await cleanup();
// An ASan/UBSan build reports on its stderr, which no HTTP answer shows.
for (const d of daemons) {
  const san = /ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:/.exec(d.err);
  if (san) fail(`daemon ${d.name}: no sanitizer report`, d.err.slice(Math.max(0, san.index - 200), san.index + 2000));
  else check(`daemon ${d.name}: SIGTERM -> exit status 0, no sanitizer report`, d.status, 0);
}
finish();
