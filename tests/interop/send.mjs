// Sends logs, traces and metrics to an OTLP endpoint with the official OpenTelemetry JS SDK and
// exporters (versions pinned in package-lock.json), and prints ONE JSON line on stdout saying what
// was exported per signal and whether every export succeeded.
//
//   node send.mjs --protocol grpc|http/protobuf|http/json --endpoint http://127.0.0.1:PORT
//                 [--count N] [--compression none|gzip] [--timeout-ms MS] [--deadline-ms MS]
//
// --endpoint is the base URL: the gRPC exporters get it as is (http:// = plaintext, https:// =
// TLS), the HTTP exporters get it with /v1/logs, /v1/traces, /v1/metrics appended. Over https://
// the server's certificate is checked against Node's CAs plus NODE_EXTRA_CA_CERTS. --token T
// sends "Authorization: Bearer T" with every export (an HTTP header, or gRPC metadata).
//
// What is sent: N log records (bodies of every AnyValue kind, incl. a structured kvlist body;
// attributes of every kind; some with trace context), N spans (trees of up to six spans per trace:
// every span kind, events, links, error status, one remote parent per few traces), and one metric
// collection (counter, double counter, up-down counter, explicit and exponential histograms,
// synchronous gauge, observable gauge / counter / up-down counter) of 5*S+7 data points, S =
// min(N, 50) attribute sets per synchronous instrument.
//
// The SDK processors swallow export failures, so every exporter is wrapped: each export's
// ExportResultCode and item count is recorded. "sent" in the output counts items whose export
// returned SUCCESS. The exit status is 0 only if every export succeeded, no export reported a
// partial-success rejection, and every signal exported exactly the number of items generated.

// The exporters read OTEL_* variables (headers, compression, timeouts, endpoints): a developer's
// environment must not change what this test sends. Remove them before any SDK module loads.
const droppedEnv = Object.keys(process.env).filter((k) => k.startsWith('OTEL_'));
for (const k of droppedEnv) delete process.env[k];

const PROTOCOLS = {
  grpc: { suffix: 'grpc', logs: 'exporter-logs-otlp-grpc', traces: 'exporter-trace-otlp-grpc', metrics: 'exporter-metrics-otlp-grpc' },
  'http/protobuf': { suffix: 'proto', logs: 'exporter-logs-otlp-proto', traces: 'exporter-trace-otlp-proto', metrics: 'exporter-metrics-otlp-proto' },
  'http/json': { suffix: 'http', logs: 'exporter-logs-otlp-http', traces: 'exporter-trace-otlp-http', metrics: 'exporter-metrics-otlp-http' },
};
const SIGNALS = ['logs', 'traces', 'metrics'];
const BATCH = 512;
// The exporters allow 30 exports in flight (FACTS.md 9.1); flushing every 10 batches stays below.
const FLUSH_EVERY = BATCH * 10;

function usage(msg) {
  process.stderr.write(`send.mjs: ${msg}\n` +
    'usage: node send.mjs --protocol grpc|http/protobuf|http/json --endpoint http://HOST:PORT ' +
    '[--count N] [--compression none|gzip] [--timeout-ms MS] [--deadline-ms MS] [--token T]\n');
  process.exit(64);
}

function parseArgs(argv) {
  const opt = { protocol: null, endpoint: null, count: 100, compression: 'none', timeoutMs: 10000, deadlineMs: 60000, token: null };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = argv[i + 1];
    if (v === undefined) usage(`missing value for ${a}`);
    i++;
    switch (a) {
      case '--protocol': opt.protocol = v; break;
      case '--endpoint': opt.endpoint = v.replace(/\/+$/, ''); break;
      case '--count': opt.count = Number(v); break;
      case '--compression': opt.compression = v; break;
      case '--timeout-ms': opt.timeoutMs = Number(v); break;
      case '--deadline-ms': opt.deadlineMs = Number(v); break;
      case '--token': opt.token = v; break;
      default: usage(`unknown option ${a}`);
    }
  }
  if (!PROTOCOLS[opt.protocol]) usage(`bad --protocol ${opt.protocol}`);
  if (!opt.endpoint || !/^https?:\/\/[^/]+$/.test(opt.endpoint)) usage(`bad --endpoint ${opt.endpoint}`);
  if (!Number.isInteger(opt.count) || opt.count < 1 || opt.count > 1000000) usage(`bad --count ${opt.count}`);
  if (opt.compression !== 'none' && opt.compression !== 'gzip') usage(`bad --compression ${opt.compression}`);
  for (const k of ['timeoutMs', 'deadlineMs']) {
    if (!Number.isInteger(opt[k]) || opt[k] < 1) usage(`bad ${k} ${opt[k]}`);
  }
  return opt;
}

// CommonJS packages: named exports come through Node's CJS lexer, or else through .default.
async function load(pkg) {
  const m = await import(pkg);
  return new Proxy(m, { get: (t, k) => (k in t ? t[k] : t.default?.[k]) });
}

const opt = parseArgs(process.argv.slice(2));
const result = {
  protocol: opt.protocol,
  compression: opt.compression,
  endpoint: opt.endpoint,
  count: opt.count,
  ok: false,
  sent: { logs: 0, traces: 0, metrics: 0 },
  expected: { logs: 0, traces: 0, metrics: 0 },
  exports: {},
  partialSuccess: [],
  diag: [],
  errors: [],
  droppedEnv,
  node: process.version,
};
for (const s of SIGNALS) result.exports[s] = { calls: 0, succeeded: 0, failed: 0, items: 0, errors: [] };

let finished = false;
function finish(code) {
  if (finished) return;
  finished = true;
  process.stdout.write(JSON.stringify(result) + '\n');
  // gRPC channels or HTTP keep-alive sockets must not keep a failed run alive.
  process.exitCode = code;
  setImmediate(() => process.exit(code));
}

const deadline = setTimeout(() => {
  result.errors.push(`deadline of ${opt.deadlineMs} ms reached before every export finished`);
  finish(3);
}, opt.deadlineMs);
deadline.unref();

process.on('unhandledRejection', (e) => {
  result.errors.push(`unhandled rejection: ${e?.stack ?? e}`);
  finish(2);
});

// ---- record every export's outcome ----
function countItems(signal, items) {
  if (signal !== 'metrics') return items.length;
  let n = 0;
  for (const sm of items.scopeMetrics) for (const m of sm.metrics) n += m.dataPoints.length;
  return n;
}

function track(signal, exporter, SUCCESS) {
  const st = result.exports[signal];
  const orig = exporter.export.bind(exporter);
  exporter.export = (items, cb) => {
    const n = countItems(signal, items);
    st.calls++;
    orig(items, (res) => {
      if (res.code === SUCCESS) {
        st.succeeded++;
        st.items += n;
      } else {
        st.failed++;
        if (st.errors.length < 5) st.errors.push(String(res.error?.message ?? res.error ?? `code ${res.code}`));
      }
      cb(res);
    });
  };
  return exporter;
}

// ---- deterministic content ----
// A small PRNG so runs are reproducible given a count (ids stay random: the SDK makes them).
let seed = 20260101 >>> 0;
function rnd() {
  seed = (seed + 0x6d2b79f5) >>> 0;
  let t = seed;
  t = Math.imul(t ^ (t >>> 15), t | 1);
  t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
  return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
}
const pick = (arr) => arr[Math.floor(rnd() * arr.length)];
const NS = 1000000000n;
const baseNs = BigInt(Date.now()) * 1000000n;
const hr = (ns) => [Number(ns / NS), Number(ns % NS)];

function logBody(i) {
  switch (i % 7) {
    case 0: return `user ${i} logged in from 10.0.${i % 256}.${(i * 7) % 256} ✓ ünïcødé`;
    case 1: return i * 1000 + 7; // int
    case 2: return i + 0.25; // double
    case 3: return i % 2 === 0; // bool
    case 4: // structured body (kvlist, nested)
      return {
        event: 'order.placed',
        order: { id: `o-${i}`, items: i % 5 + 1, total: 19.5 + i, express: i % 3 === 0 },
        tags: ['web', 'eu', `n${i}`],
        note: null,
      };
    case 5: return ['a', i, 1.5, false, { k: 'v' }]; // array of mixed AnyValues
    default: return new Uint8Array([0xde, 0xad, 0xbe, 0xef, i & 0xff]); // bytes
  }
}

function logAttrs(i) {
  return {
    'interop.index': i,
    'interop.str': `value-${i % 13}`,
    'interop.double': i / 8 + 0.125,
    'interop.bool': i % 2 === 1,
    'interop.str_array': ['alpha', 'beta', `g${i % 4}`],
    'interop.int_array': [200, 404, i],
    'interop.double_array': [0.5, 1.25, i + 0.75],
    'interop.bool_array': [true, false],
    'interop.map': { region: 'eu-west', shard: i % 8, weight: 0.3 },
    'interop.bytes': new Uint8Array([1, 2, 3, i & 0xff]),
    'code.function.name': pick(['handle', 'render', 'commit']),
  };
}

const SEVERITIES = [[1, 'TRACE'], [5, 'DEBUG'], [9, 'INFO'], [13, 'WARN'], [17, 'ERROR'], [21, 'FATAL']];

// ---- main ----
async function main() {
  const P = PROTOCOLS[opt.protocol];
  const api = await load('@opentelemetry/api');
  const { ExportResultCode } = await load('@opentelemetry/core');
  const { resourceFromAttributes } = await load('@opentelemetry/resources');
  const { LoggerProvider, BatchLogRecordProcessor } = await load('@opentelemetry/sdk-logs');
  const { TracerProvider, BatchSpanProcessor } = await load('@opentelemetry/sdk-trace');
  const { MeterProvider, PeriodicExportingMetricReader, AggregationType } = await load('@opentelemetry/sdk-metrics');
  const { OTLPLogExporter } = await load(`@opentelemetry/${P.logs}`);
  const { OTLPTraceExporter } = await load(`@opentelemetry/${P.traces}`);
  const { OTLPMetricExporter } = await load(`@opentelemetry/${P.metrics}`);

  api.diag.setLogger({
    error: (...a) => note('error', a),
    warn: (...a) => note('warn', a),
    info: () => {},
    debug: () => {},
    verbose: () => {},
  }, api.DiagLogLevel.WARN);
  // The SDK's error handler hands over exceptions as JSON strings (stack, message, code, data =
  // the response body): keep message, status code and body, drop the stack.
  function describe(x) {
    let o = x;
    if (typeof x === 'string') {
      if (!x.startsWith('{')) return x;
      try { o = JSON.parse(x); } catch { return x; }
    }
    if (o?.message === undefined) return JSON.stringify(o);
    return [o.message, o.code !== undefined ? `(code ${o.code})` : '', o.data ? `body: ${o.data}` : ''].filter(Boolean).join(' ');
  }
  function note(level, args) {
    const text = args.map(describe).join(' ').slice(0, 400);
    const m = /Partial Success response:\s*(\{.*\})/.exec(text);
    if (m) {
      result.partialSuccess.push(JSON.parse(m[1]));
      return;
    }
    if (result.diag.length < 20) result.diag.push(`${level}: ${text}`);
  }

  const resource = resourceFromAttributes({
    'service.name': 'miradb-interop',
    'service.version': '1.0.0',
    'service.instance.id': `interop-${process.pid}`,
    'interop.protocol': opt.protocol,
    'interop.compression': opt.compression,
    'telemetry.sdk.language': 'nodejs',
  });
  const common = { timeoutMillis: opt.timeoutMs, compression: opt.compression };
  if (opt.token !== null) {
    if (opt.protocol === 'grpc') {
      const { Metadata } = await load('@grpc/grpc-js');
      const md = new Metadata();
      md.set('authorization', `Bearer ${opt.token}`);
      common.metadata = md;
    } else {
      common.headers = { Authorization: `Bearer ${opt.token}` };
    }
  }
  const url = (sig) => (opt.protocol === 'grpc' ? opt.endpoint : `${opt.endpoint}/v1/${sig}`);
  const logExporter = track('logs', new OTLPLogExporter({ ...common, url: url('logs') }), ExportResultCode.SUCCESS);
  const traceExporter = track('traces', new OTLPTraceExporter({ ...common, url: url('traces') }), ExportResultCode.SUCCESS);
  const metricExporter = track('metrics', new OTLPMetricExporter({ ...common, url: url('metrics') }), ExportResultCode.SUCCESS);

  const batchOpts = {
    maxExportBatchSize: BATCH,
    maxQueueSize: FLUSH_EVERY + BATCH, // a flush comes at most one trace (six spans) late
    scheduledDelayMillis: 200,
    exportTimeoutMillis: opt.timeoutMs + 2000,
  };
  const loggerProvider = new LoggerProvider({
    resource,
    processors: [new BatchLogRecordProcessor({ exporter: logExporter, ...batchOpts })],
  });
  const tracerProvider = new TracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor({ exporter: traceExporter, ...batchOpts })],
  });
  // One collection only: the long interval never fires; shutdown() collects and exports once.
  const reader = new PeriodicExportingMetricReader({
    exporter: metricExporter,
    exportIntervalMillis: 3600000,
    exportTimeoutMillis: opt.timeoutMs + 2000,
  });
  const meterProvider = new MeterProvider({
    resource,
    readers: [reader],
    views: [{ instrumentName: 'interop.payload.size', aggregation: { type: AggregationType.EXPONENTIAL_HISTOGRAM } }],
  });

  const n = opt.count;

  // ---- traces: trees of up to six spans ----
  const tracer = tracerProvider.getTracer('interop.checkout', '2.0.1');
  const tracerDb = tracerProvider.getTracer('interop.db-client', '0.9.0');
  const K = api.SpanKind;
  let spans = 0;
  let prevRoot = null;
  const spanCtxs = [];
  for (let t = 0; spans < n; t++) {
    const size = Math.min(6, n - spans);
    const t0 = baseNs + BigInt(t) * 20000000n;
    let parentCtx = api.ROOT_CONTEXT;
    if (t % 4 === 3) {
      // A root whose parent is remote (flags 0x301 on the wire).
      parentCtx = api.trace.setSpanContext(api.ROOT_CONTEXT, {
        traceId: (t + 1).toString(16).padStart(32, 'a'),
        spanId: (t + 1).toString(16).padStart(16, 'b'),
        traceFlags: api.TraceFlags.SAMPLED,
        isRemote: true,
      });
    }
    const links = prevRoot ? [{ context: prevRoot.spanContext(), attributes: { 'interop.link.kind': 'previous-trace', 'interop.link.index': t } }] : [];
    const root = tracer.startSpan(`GET /api/orders/${t}`, {
      kind: K.SERVER,
      startTime: hr(t0),
      links,
      attributes: {
        'http.request.method': 'GET',
        'http.route': '/api/orders/{id}',
        'http.response.status_code': t % 5 === 4 ? 500 : 200,
        'interop.trace_index': t,
        'interop.ratio': t / 3,
        'interop.sampled': true,
        'interop.tags': ['alpha', 'beta', `t${t}`],
        'interop.codes': [200, 201, 400],
        'interop.weights': [0.5, 1.25, 8.75],
        'interop.flags': [true, false, true],
        'interop.unicode': 'ünïcødé ✓ 日本語',
      },
    }, parentCtx);
    root.addEvent('request.received', { 'net.peer.port': 40000 + t, 'interop.queue_ms': 0.5 }, hr(t0 + 10000n));
    const made = [root];
    const ctxRoot = api.trace.setSpan(api.ROOT_CONTEXT, root);
    if (size > 1) {
      const s = tracerDb.startSpan('SELECT shop.orders', {
        kind: K.CLIENT,
        startTime: hr(t0 + 1000000n),
        attributes: { 'db.system.name': 'postgresql', 'db.query.text': 'SELECT * FROM orders WHERE id = $1', 'db.response.returned_rows': t % 30 },
      }, ctxRoot);
      s.addEvent('db.connection.acquired', { 'db.pool.size': 10, 'db.pool.wait_ms': 2.5 }, hr(t0 + 1200000n));
      s.end(hr(t0 + 4000000n));
      made.push(s);
    }
    let compute = null;
    if (size > 2) {
      compute = tracer.startSpan('compute-order-total', {
        kind: K.INTERNAL,
        startTime: hr(t0 + 5000000n),
        attributes: { 'interop.items': t % 7 + 1, 'interop.total': 12.5 * (t + 1), 'interop.currency': 'EUR' },
      }, ctxRoot);
      made.push(compute);
    }
    if (size > 3) {
      const s = tracer.startSpan('cache.get', {
        kind: K.INTERNAL,
        startTime: hr(t0 + 5500000n),
        attributes: { 'cache.key': `order:${t}`, 'cache.hit': t % 2 === 0 },
      }, api.trace.setSpan(api.ROOT_CONTEXT, compute));
      if (t % 3 === 0) {
        s.recordException(new Error(`cache backend timeout ${t}`), hr(t0 + 6000000n));
        s.setStatus({ code: api.SpanStatusCode.ERROR, message: 'cache backend timeout' });
      }
      s.end(hr(t0 + 6500000n));
      made.push(s);
    }
    if (compute) compute.end(hr(t0 + 9000000n));
    let producer = null;
    if (size > 4) {
      producer = tracer.startSpan('orders publish', {
        kind: K.PRODUCER,
        startTime: hr(t0 + 9500000n),
        attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': 'orders', 'messaging.batch.message_count': 1 },
      }, ctxRoot);
      made.push(producer);
    }
    if (size > 5) {
      const s = tracer.startSpan('orders process', {
        kind: K.CONSUMER,
        startTime: hr(t0 + 11000000n),
        links: [
          { context: producer.spanContext(), attributes: { 'interop.link.kind': 'producer' } },
          { context: root.spanContext() },
        ],
        attributes: { 'messaging.system': 'kafka', 'messaging.consumer.group.name': 'billing' },
      }, api.trace.setSpan(api.ROOT_CONTEXT, producer));
      s.addEvent('message.processed', { 'interop.attempt': 1 }, hr(t0 + 12000000n));
      s.addEvent('message.acked', hr(t0 + 12500000n));
      s.end(hr(t0 + 13000000n));
      made.push(s);
    }
    if (producer) producer.end(hr(t0 + 10500000n));
    root.setStatus(t % 5 === 4 ? { code: api.SpanStatusCode.ERROR, message: 'upstream 500' } : { code: api.SpanStatusCode.OK });
    root.end(hr(t0 + 14000000n));
    spans += made.length;
    prevRoot = root;
    if (spanCtxs.length < 64) spanCtxs.push(...made.map((s) => s.spanContext()));
    if (spans % FLUSH_EVERY < made.length && spans < n) await tracerProvider.forceFlush();
  }
  result.expected.traces = spans;

  // ---- logs ----
  const loggers = [loggerProvider.getLogger('interop.app', '1.2.0'), loggerProvider.getLogger('interop.audit', '0.1.0')];
  for (let i = 0; i < n; i++) {
    const [sevNum, sevText] = SEVERITIES[i % SEVERITIES.length];
    const rec = {
      timestamp: hr(baseNs + BigInt(i) * 1000n),
      observedTimestamp: hr(baseNs + BigInt(i) * 1000n + 500n),
      severityNumber: sevNum,
      severityText: sevText,
      body: logBody(i),
      attributes: logAttrs(i),
    };
    if (i % 3 === 0 && spanCtxs.length) rec.context = api.trace.setSpanContext(api.ROOT_CONTEXT, spanCtxs[i % spanCtxs.length]);
    if (i % 5 === 0) rec.eventName = 'interop.event';
    if (i % 11 === 10) rec.exception = new Error(`failure ${i}`);
    loggers[i % 2].emit(rec);
    if ((i + 1) % FLUSH_EVERY === 0 && i + 1 < n) await loggerProvider.forceFlush();
  }
  result.expected.logs = n;

  // ---- metrics ----
  const S = Math.min(n, 50);
  const meter = meterProvider.getMeter('interop.meter', '1.0.0');
  const runtime = meterProvider.getMeter('interop.runtime', '0.5.0');
  const series = (i) => ({
    'http.request.method': i % 2 ? 'POST' : 'GET',
    'http.route': `/api/r${i}`,
    'http.response.status_code': 200 + (i % 3),
    'interop.series': i,
    'interop.canary': i % 4 === 0,
    'interop.weight': i + 0.5,
  });
  const requests = meter.createCounter('interop.requests', { description: 'Requests served', unit: '{request}', valueType: api.ValueType.INT });
  const bytes = meter.createCounter('interop.response.bytes', { description: 'Response bytes', unit: 'By' });
  const inflight = meter.createUpDownCounter('interop.inflight', { description: 'Requests in flight', unit: '{request}', valueType: api.ValueType.INT });
  const latency = meter.createHistogram('interop.latency', {
    description: 'Request latency',
    unit: 'ms',
    advice: { explicitBucketBoundaries: [0, 5, 10, 25, 50, 100, 250, 500, 1000] },
  });
  const payload = meter.createHistogram('interop.payload.size', { description: 'Payload sizes (exponential)', unit: 'By' });
  const temperature = meter.createGauge('interop.temperature', { description: 'Temperature', unit: 'Cel' });
  for (let i = 0; i < S; i++) {
    const a = series(i);
    requests.add(i + 1, a);
    requests.add(2, a);
    bytes.add(100.25 * (i + 1), a);
    inflight.add(5, a);
    inflight.add(-2 - (i % 3), a);
    for (let k = 0; k < 4; k++) latency.record(1 + rnd() * 900, a);
    temperature.record(40 + rnd() * 30, a);
  }
  for (const dir of ['in', 'out']) {
    for (let k = 0; k < 5; k++) payload.record(k === 0 ? 0 : rnd() * 1e6, { 'interop.direction': dir });
  }
  runtime.createObservableGauge('interop.memory.heap', { unit: 'By', valueType: api.ValueType.INT })
    .addCallback((r) => { r.observe(1089571, { 'heap.space': 'new' }); r.observe(8426399, { 'heap.space': 'old' }); });
  runtime.createObservableCounter('interop.process.cpu.time', { unit: 's' })
    .addCallback((r) => { r.observe(14.5, { 'cpu.mode': 'user' }); r.observe(1.625, { 'cpu.mode': 'system' }); });
  runtime.createObservableUpDownCounter('interop.process.threads', { unit: '{thread}', valueType: api.ValueType.INT })
    .addCallback((r) => r.observe(17));
  result.expected.metrics = 5 * S + 2 + 2 + 2 + 1;

  // ---- flush and shut down (each shutdown exports what is left, then closes the exporter) ----
  const outcomes = await Promise.allSettled([loggerProvider.shutdown(), tracerProvider.shutdown(), meterProvider.shutdown()]);
  outcomes.forEach((o, k) => {
    if (o.status === 'rejected') result.errors.push(`${['logs', 'traces', 'metrics'][k]} shutdown: ${o.reason?.message ?? o.reason}`);
  });

  let ok = result.errors.length === 0;
  for (const s of SIGNALS) {
    const st = result.exports[s];
    result.sent[s] = st.items;
    if (st.failed > 0 || st.calls === 0 || st.items !== result.expected[s]) ok = false;
  }
  for (const ps of result.partialSuccess) {
    if (Number(ps.rejectedLogRecords ?? ps.rejectedSpans ?? ps.rejectedDataPoints ?? 0) > 0) ok = false;
  }
  result.ok = ok;
  finish(ok ? 0 : 1);
}

main().catch((e) => {
  result.errors.push(String(e?.stack ?? e));
  finish(2);
});
