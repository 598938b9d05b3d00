"""query case: query latency and scan rates over a sealed corpus.

The endpoints are probed first on an empty daemon; a query whose endpoint
is missing (or answers "not implemented") is reported as
{"skipped": reason} and never timed. If nothing can be measured the case
prints {"case": "query", "skipped": reason} and builds no corpus.

Corpus: N log records and N spans ingested by otlp-load (--unique, so no
record repeats; 1,000-record requests, seed 1, records 1 ms apart from a
time base on the hour a day back, plus a jitter under 1 ms), with --block-max-age 2s so every row
ends up sealed before any query runs. N is 10 million (the issue's corpus)
or 1 million with BENCH_QUICK=1 (BENCH_QUERY_RECORDS overrides). The corpus
is kept in bench/data/query-corpus-N with a manifest and reused while a
daemon booted on it reports exactly the manifest's rows, all sealed; else it
is rebuilt (building 2 x 10M records takes several minutes here).

Queries (the daemon runs with --query-max-rows 2e9 and --query-timeout 60s
so the limits do not cut a scan short):
  logs_scan_miss      {service_name=~".+"} |= "zzqxnotthere"  (whole-token
                      needle in no record: every block pruned or scanned)
  logs_substr_miss    {service_name=~".+"} |= "qxnotth" (a substring, not a token,
                      in no record: only the body gram bloom can skip blocks)
  logs_substr_hit     sum(count_over_time({service_name=~".+"} |= "eadlock detec"
                      [whole corpus])): a substring in every block; correct when it
                      equals logs_substr_hit_control, the same count through
                      |~ "eadlock detec|qxnotthere" (no literal required: no block
                      skipped by grams)
  logs_scan_attr      {service_name=~".+"} | http_route="zzqx-no-route"
                      (same shape, attribute filter: a control)
  logs_page_100       {service_name=~".+"}, limit 100 (render 100 rows: a
                      control)
  logs_count_1h       sum(count_over_time({service_name=~".+"}[1h])), one
                      instant; the answer is checked against the records the
                      corpus holds in that hour
  trace_by_id         /api/traces/<id of a trace a log record links to>
  traces_scan_miss    TraceQL { name = "zzqx-no-such-span" } (/api/search)
  traces_scan_attr    TraceQL { span.http.route = "zzqx-no-route" }
  promql_rate_10k     rate() over 10,000 series (/api/v1/query_range)
Each query runs at least 5 times (3 quick) and until 1 s went by (at most 50
runs), fewer once 20 s went by; latency is the client's wall time per
request (median, min, max). Rows and
bytes scanned come from the daemon's /metrics counters around each run,
and server CPU from /proc, so "rows_per_cpu_s" is rows scanned per second
per core.

    python3 bench/cases/query.py BUILD_DIR
"""

import json
import os
import sys
import time
import urllib.parse

import benchlib as bl

SEED = 1
RPR = 1000
MS = 1000000
HOUR_NS = 3600 * 10**9
SERVE_ARGS = ["--block-max-age", "2s", "--query-max-rows", "2000000000",
              "--query-timeout", "60s"]
SEL = '{service_name=~".+"}'
REPEAT_BUDGET_S = 20.0
HTTP_TIMEOUT = 75


def corpus_records():
    env = os.environ.get("BENCH_QUERY_RECORDS")
    if env:
        return int(env)
    return 1000000 if bl.QUICK else 10000000


# ---------------------------------------------------------------- probing


def probe(build):
    """{query name: None (available) or the reason it is skipped}."""
    data = bl.fresh_data("query-probe")
    d = bl.Daemon(bl.miradb_bin(build), data, SERVE_ARGS, name="query-probe").start()
    out = {}
    try:
        st, body = bl.http_get(d.http_port, "/loki/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": SEL, "limit": 1}))
        loki = None if st == 200 else "no LogQL endpoint (/loki/api/v1/query_range answered " \
            "%s: %s)" % (st, body[:80].decode("utf-8", "replace").strip())
        for q in ("logs_scan_miss", "logs_substr_miss", "logs_substr_hit", "logs_substr_hit_control",
                  "logs_scan_attr", "logs_page_100", "logs_count_1h"):
            out[q] = loki
        st, _ = bl.http_get(d.http_port, "/api/echo")
        if st != 200:
            out["trace_by_id"] = "no Tempo endpoints (/api/echo answered %s)" % st
        elif loki:
            out["trace_by_id"] = "needs a trace id from the LogQL endpoint: " + loki
        else:
            out["trace_by_id"] = None
        st, body = bl.http_get(d.http_port, "/api/search?" + urllib.parse.urlencode(
            {"q": "{}", "limit": 1}))
        search = None if st == 200 else "TraceQL search (/api/search) answered %s: %s" % (
            st, body[:80].decode("utf-8", "replace").strip())
        out["traces_scan_miss"] = out["traces_scan_attr"] = search
        st, body = bl.http_get(d.http_port, "/api/v1/query?query=1")
        out["promql_rate_10k"] = "no PromQL endpoint (/api/v1/query answered %s)" % st \
            if st != 200 else "measured against Prometheus 2.42 by the promql case (bench/cases/promql.py)"
    finally:
        d.stop()
        bl.remove_data(data)
    return out


# ---------------------------------------------------------------- corpus


def corpus_ok(d, n):
    m = bl.settle(d, "logs", n, deadline=30)[2]
    ok = all(bl.rows(m, s) == n and m.get('miradb_open_block_rows{signal="%s"}' % s, 0) == 0
             for s in ("logs", "traces"))
    return ok, m


def build_corpus(build, n):
    """Returns (data dir, manifest)."""
    data = os.path.join(bl.data_root(), "query-corpus-%d" % n)
    mpath = os.path.join(data, "bench-manifest.json")
    want = {"records_per_signal": n, "seed": SEED, "records_per_request": RPR,
            "unique": True, "record_spacing_ms": 1}
    if os.path.exists(mpath):
        with open(mpath) as f:
            man = json.load(f)
        if all(man.get(k) == v for k, v in want.items()):
            d = bl.Daemon(bl.miradb_bin(build), data, SERVE_ARGS, name="query").start()
            ok, _ = corpus_ok(d, n)
            d.stop()
            if ok:
                man["reused"] = True
                return data, man
            bl.log("query: the kept corpus does not boot to %d sealed rows; rebuilding" % n)
    data = bl.fresh_data("query-corpus-%d" % n)
    t0_ns = (int(time.time()) // 3600 * 3600 - 86400) * 10**9
    bl.log("query: building a corpus of %d log records and %d spans in %s" % (n, n, data))
    t = time.monotonic()
    d = bl.Daemon(bl.miradb_bin(build), data, SERVE_ARGS, name="query").start()
    loads = {}
    try:
        for s in ("logs", "traces"):
            rep = bl.load(build, d.grpc_port, s, connections=8, requests=n // RPR, records=RPR,
                          seed=SEED, timeout=120, deadline=3600,
                          extra=["--unique", "--time-base", str(t0_ns)])
            loads[s] = {"acked": rep["records"]["acknowledged"],
                        "failed": rep["requests"]["failed"],
                        "records_per_s": round(rep["records_per_s"])}
            if rep["records"]["acknowledged"] != n:
                raise RuntimeError("corpus load of %s acknowledged %d of %d records: %s"
                                   % (s, rep["records"]["acknowledged"], n,
                                      rep["requests"]["failed_by_status"]))
        deadline = time.monotonic() + 900
        while True:
            ok, m = corpus_ok(d, n)
            if ok or time.monotonic() > deadline:
                break
            time.sleep(1)
        if not ok:
            raise RuntimeError("the corpus did not seal within 900 s")
    finally:
        d.stop()
    man = dict(want)
    man.update({"time_base_ns": t0_ns, "build_s": round(time.monotonic() - t, 1),
                "loads": loads, "blocks": {s: int(m.get('miradb_blocks{signal="%s"}' % s, 0))
                                           for s in ("logs", "traces")},
                "block_bytes": {s: int(m.get('miradb_block_bytes{signal="%s"}' % s, 0))
                                for s in ("logs", "traces")}})
    with open(mpath, "w") as f:
        json.dump(man, f)
    man["reused"] = False
    return data, man


# ---------------------------------------------------------------- timing

SCAN_COUNTERS = ("miradb_query_rows_scanned_total", "miradb_query_bytes_read_total",
                 "miradb_query_blocks_considered_total", "miradb_query_blocks_scanned_total",
                 "miradb_query_blocks_skipped_zone_total",
                 "miradb_query_blocks_skipped_bloom_total",
                 "miradb_query_blocks_skipped_dict_total")


def timed(d, path, runs):
    """Runs GET |path| at least |runs| times and until 1 s went by (at most 50 runs), fewer
    once REPEAT_BUDGET_S went by. Server CPU comes from /proc in 10 ms ticks, so it is summed
    over the runs: the 1 s floor keeps that rounding near 1%."""
    lat, cpu, deltas, status, body = [], [], [], None, b""
    spent = 0.0
    while len(lat) < 50 and (len(lat) < runs or spent < 1.0):
        m0 = d.metrics()
        c0 = bl.proc_cpu_s(d.pid)
        t = time.monotonic()
        status, body = bl.http_get(d.http_port, path, timeout=HTTP_TIMEOUT)
        dt = time.monotonic() - t
        c1 = bl.proc_cpu_s(d.pid)
        m1 = d.metrics()
        lat.append(dt)
        cpu.append(c1 - c0)
        deltas.append({k: int(m1.get(k, 0) - m0.get(k, 0)) for k in SCAN_COUNTERS})
        spent += dt
        if status != 200 or spent > REPEAT_BUDGET_S:
            break
    med = bl.median(lat)
    rows = bl.median([x["miradb_query_rows_scanned_total"] for x in deltas])
    byts = bl.median([x["miradb_query_bytes_read_total"] for x in deltas])
    rows_all = sum(x["miradb_query_rows_scanned_total"] for x in deltas)
    bytes_all = sum(x["miradb_query_bytes_read_total"] for x in deltas)
    cpu_all = sum(cpu)
    out = {
        "status": status,
        "runs": len(lat),
        "latency_ms_median": round(med * 1e3, 2),
        "latency_ms_min": round(min(lat) * 1e3, 2),
        "latency_ms_max": round(max(lat) * 1e3, 2),
        "server_cpu_ms_per_query": round(cpu_all / len(lat) * 1e3, 1),
        "rows_scanned": rows,
        "bytes_scanned": byts,
        "blocks": {k.replace("miradb_query_", "").replace("_total", ""): v
                   for k, v in deltas[-1].items() if "blocks" in k},
        "rows_per_s": round(rows / med) if med > 0 else None,
        "rows_per_cpu_s": round(rows_all / cpu_all) if cpu_all > 0 else None,
        "bytes_per_cpu_s": round(bytes_all / cpu_all) if cpu_all > 0 else None,
        "response_bytes": len(body),
    }
    if status != 200:
        out["error"] = body[:300].decode("utf-8", "replace")
    return out, body


def loki_path(endpoint, **params):
    return "/loki/api/v1/%s?%s" % (endpoint, urllib.parse.urlencode(params))


def entries(body):
    try:
        j = json.loads(body)
        return sum(len(s.get("values", [])) for s in j["data"]["result"])
    except (ValueError, KeyError, TypeError):
        return None


def first_trace_id(body):
    try:
        j = json.loads(body)
        for s in j["data"]["result"]:
            tid = s.get("stream", {}).get("trace_id")
            if tid:
                return tid
            for v in s.get("values", []):
                if len(v) > 2 and isinstance(v[2], dict):
                    tid = v[2].get("structuredMetadata", {}).get("trace_id")
                    if tid:
                        return tid
    except (ValueError, KeyError, TypeError):
        pass
    return None


def span_count(body):
    try:
        j = json.loads(body)
    except ValueError:
        return None
    n = 0
    for b in j.get("batches", j.get("resourceSpans", [])):
        for ss in b.get("scopeSpans", b.get("instrumentationLibrarySpans", [])):
            n += len(ss.get("spans", []))
    if not n and "trace" in j:
        return span_count(json.dumps(j["trace"]))
    return n


def run_queries(build, data, man, skipped):
    n = man["records_per_signal"]
    t0 = man["time_base_ns"]
    t_end = t0 + n * MS  # one past the last record
    runs = 3 if bl.QUICK else 5
    res = {}
    d = bl.Daemon(bl.miradb_bin(build), data, SERVE_ARGS, name="query").start()
    try:
        def q(name, path, check=None):
            if skipped.get(name):
                res[name] = {"skipped": skipped[name]}
                return None
            bl.log("query %s" % name)
            out, body = timed(d, path, runs)
            if check and out["status"] == 200:
                out.update(check(body))
            res[name] = out
            return body

        rng = {"start": t0, "end": t_end}
        q("logs_scan_miss", loki_path("query_range", query=SEL + ' |= "zzqxnotthere"',
                                      limit=100, **rng),
          lambda b: {"entries": entries(b), "correct": entries(b) == 0})
        # Substrings that are not whole tokens: only the body gram bloom (footer section 10)
        # can skip blocks for them. "qxnotth" is in no record; "eadlock detec" (in the
        # generator's "deadlock detected") is in every block, counted over the whole corpus
        # twice: once as |= (blocks pruned by grams) and once through a regex alternation that
        # requires no literal (no gram pruning, every block scanned) - the counts must agree.
        q("logs_substr_miss", loki_path("query_range", query=SEL + ' |= "qxnotth"',
                                        limit=100, **rng),
          lambda b: {"entries": entries(b), "correct": entries(b) == 0})
        whole = "%dh" % (n * MS // HOUR_NS + 1)
        counts = {}

        def substr_count(key):
            def check(b):
                try:
                    got = int(float(json.loads(b)["data"]["result"][0]["value"][1]))
                except (ValueError, KeyError, IndexError, TypeError):
                    got = None
                counts[key] = got
                return {"count": got}
            return check
        q("logs_substr_hit", loki_path("query", query='sum(count_over_time(%s |= "eadlock detec"'
                                       ' [%s]))' % (SEL, whole), time=t_end),
          substr_count("hit"))
        q("logs_substr_hit_control", loki_path(
            "query", query='sum(count_over_time(%s |~ "eadlock detec|qxnotthere" [%s]))'
            % (SEL, whole), time=t_end), substr_count("control"))
        if "logs_substr_hit" in res and "count" in res["logs_substr_hit"]:
            ok = counts.get("hit") is not None and counts.get("hit") == counts.get("control") \
                and counts["hit"] > 0
            res["logs_substr_hit"]["control_count"] = counts.get("control")
            res["logs_substr_hit"]["correct"] = ok
        q("logs_scan_attr", loki_path("query_range", query=SEL + ' | http_route="zzqx-no-route"',
                                      limit=100, **rng),
          lambda b: {"entries": entries(b), "correct": entries(b) == 0})
        page = q("logs_page_100", loki_path("query_range", query=SEL, limit=100, **rng),
                 lambda b: {"entries": entries(b), "correct": entries(b) == 100})
        # One instant at a whole millisecond: record k is at t0 + k ms plus a jitter in
        # [0, 1 ms) (gen.c), so (at - 1h, at] holds records K+1-3,600,000 .. K exactly.
        k_hi = min(2 * HOUR_NS // MS - 1, n - 1)
        at = t0 + (k_hi + 1) * MS
        expect = k_hi - max(0, k_hi + 1 - HOUR_NS // MS) + 1

        def count_check(b):
            try:
                got = int(float(json.loads(b)["data"]["result"][0]["value"][1]))
            except (ValueError, KeyError, IndexError, TypeError):
                got = None
            return {"count": got, "expected": expect, "correct": got == expect}
        q("logs_count_1h", loki_path("query", query="sum(count_over_time(%s[1h]))" % SEL,
                                     time=at), count_check)
        tid = first_trace_id(page) if page else None
        if not skipped.get("trace_by_id") and not tid:
            skipped["trace_by_id"] = "no trace_id in the LogQL page (cannot pick a trace)"
        q("trace_by_id", "/api/traces/%s" % tid,
          lambda b: {"trace_id": tid, "spans": span_count(b),
                     "correct": (span_count(b) or 0) > 0})
        srng = {"start": t0 // 10**9, "end": t_end // 10**9 + 1, "limit": 20}
        q("traces_scan_miss", "/api/search?" + urllib.parse.urlencode(
            dict(q='{ name = "zzqx-no-such-span" }', **srng)))
        q("traces_scan_attr", "/api/search?" + urllib.parse.urlencode(
            dict(q='{ span.http.route = "zzqx-no-route" }', **srng)))
        q("promql_rate_10k", "/api/v1/query_range")
    finally:
        d.stop()
    return res


def main():
    build = bl.build_dir(sys.argv)
    skipped = probe(build)
    if all(skipped.values()):
        bl.emit({"case": "query", "skipped": "; ".join(sorted(set(skipped.values())))})
        return 0
    n = corpus_records()
    try:
        data, man = build_corpus(build, n)
    except (RuntimeError, OSError) as e:
        bl.emit({"case": "query", "error": str(e)[:400]})
        return 1
    res = run_queries(build, data, man, skipped)
    targets = []
    r = res.get("trace_by_id", {})
    if "latency_ms_median" in r:
        targets.append({"target": "trace by id over %d spans <= 10 ms" % n,
                        "measured_ms": r["latency_ms_median"],
                        "met": r["latency_ms_median"] <= 10})
    r = res.get("logs_scan_miss", {})
    if "latency_ms_median" in r:
        targets.append({"target": "scan-miss on a whole-token needle over %d records <= 50 ms"
                                  % n, "measured_ms": r["latency_ms_median"],
                        "met": r["latency_ms_median"] <= 50})
    r = res.get("logs_substr_miss", {})
    if "latency_ms_median" in r:
        b = r.get("blocks", {})
        considered = b.get("blocks_considered", 0)
        skipped_n = considered - b.get("blocks_scanned", 0)
        targets.append({"target": "substring needle in no record over %d records <= 50 ms with"
                                  " >= 95%% of blocks skipped" % n,
                        "measured_ms": r["latency_ms_median"],
                        "blocks_skipped": skipped_n, "blocks_considered": considered,
                        "met": r["latency_ms_median"] <= 50 and considered > 0
                        and skipped_n >= 0.95 * considered})
    wrong = [k for k, v in res.items() if v.get("correct") is False or
             ("status" in v and v["status"] != 200)]
    bl.emit({"case": "query", "quick": bl.QUICK, "daemon_args": " ".join(SERVE_ARGS),
             "corpus": man, "queries": res, "wrong_or_failed": wrong, "targets": targets,
             "machine": bl.machine()})
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
