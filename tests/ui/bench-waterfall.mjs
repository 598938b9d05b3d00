// bench-waterfall.mjs - how long the UI takes to open a 10,000-span trace (navigation to the
// first waterfall row, 5 runs, page and trace fetched each time) and to redraw after a jump
// to the middle (scroll to the second animation frame). Informational, not a test.
//   cd tests/ui && node bench-waterfall.mjs ../../build/miradb
import { spawn } from "node:child_process";
import { chromium } from "playwright-core";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
const bin = process.argv[2];
const tmp = mkdtempSync(join(tmpdir(), "miradb-wfb-"));
const d = spawn(bin, ["serve", "--data", join(tmp, "data"), "--http-listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
let err = ""; const port = await new Promise((r) => d.stderr.on("data", (b) => { err += b; const m = /http=[^ ]*:(\d+)/.exec(err); if (m) r(m[1]); }));
const id = "00000000000000000000000000abcdef", base = Date.now() - 60000, spans = [];
const sid = (i) => (i + 1).toString(16).padStart(16, "0");
for (let i = 0; i < 10000; i++) spans.push({ traceId: id, spanId: sid(i), parentSpanId: i ? sid(i <= 100 ? 0 : 1 + ((i - 101) % 100)) : "", name: `op-${i}`, startTimeUnixNano: String(BigInt(base + (i % 500)) * 1000000n), endTimeUnixNano: String(BigInt(base + (i % 500) + 5) * 1000000n) });
await fetch(`http://127.0.0.1:${port}/v1/traces`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ resourceSpans: [{ resource: { attributes: [{ key: "service.name", value: { stringValue: "big" } }] }, scopeSpans: [{ spans }] }] }) });
const b = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox", "--no-proxy-server"] });
const p = await (await b.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
const open = [], scroll = [];
for (let k = 0; k < 5; k++) {
  const t = Date.now();
  await p.goto(`http://127.0.0.1:${port}/ui/?view=trace&id=${id}`);
  await p.waitForSelector(".wf-row");
  open.push(Date.now() - t);
  scroll.push(await p.evaluate(() => new Promise((res) => { const s = document.querySelector(".wf-scroll"); const t0 = performance.now(); s.scrollTop = s.scrollHeight / 2; requestAnimationFrame(() => requestAnimationFrame(() => res(performance.now() - t0))); })));
}
const med = (a) => a.slice().sort((x, y) => x - y)[2];
console.log(`open ms ${open.join(" ")} median ${med(open)}; scroll+redraw ms ${scroll.map((x) => x.toFixed(1)).join(" ")} median ${med(scroll).toFixed(1)}`);
await b.close();
d.kill("SIGTERM");
await new Promise((r) => d.once("exit", r));
rmSync(tmp, { recursive: true, force: true });
