"""rss case: the daemon's peak RSS against its memory budget under load (issue 13).

Per point (budget, connections): a fresh daemon (--memory-budget B, --ack wal, fresh data
directory), a client posting 1,000-record log exports for RSS_SECONDS (wrk: the peer case's fixed
payload over HTTP/1.1 keep-alive; grpc, http/protobuf: build/otlp-load), while /proc/PID/status and /metrics are
sampled every 100 ms. Printed per point: VmHWM (peak RSS over the process's life) against the
budget and PASS / FAIL, the peak of miradb_memory_in_use_bytes (what the budget accounts for),
the largest RSS - in_use seen (what it does not), ack p50/p99 from wrk, the requests refused,
and the admission and ack-tail figures from /metrics; and the peaks of RssAnon, RssFile and
RssShmem (/proc/PID/status) with, from the /proc/PID/smaps read about once a second with the
largest Rss, where the resident bytes were: heap and anonymous mappings, the block files (*.blk),
the WAL and other files.

Arms (RSS_ARMS, default "ingest query"): "ingest" is the log client alone; "query" adds, for the
same seconds, otlp-load posting spans and data points at a low fixed rate (so that TraceQL and
PromQL have data) and a bounded loop of real queries over everything ingested so far, one at a
time over HTTP/1.1 keep-alive (LogQL range queries: a needle in no record, an attribute filter, a
100-line page, a count by service; TraceQL searches; PromQL range queries): the figures say how
many queries ran and how many did not answer 200 (the daemon runs with --query-max-rows 2e9
there, so that the scans read every block rather than stopping at the default million rows).

Environment: RSS_BUDGETS (default "256MiB 128MiB"), RSS_CONNS (default "1 4"), RSS_CLIENTS (default "wrk grpc"),
RSS_SECONDS (default 10; 5 with BENCH_QUICK=1), RSS_ARMS, RSS_ARGS (extra daemon flags), PEER_PAYLOAD.
Exit status 1 when a point fails (peak RSS above its budget, a request refused, or a query that
did not answer 200).

    python3 bench/cases/rss.py BUILD_DIR
"""

import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse

import benchlib as bl
import peer

UNITS = {"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def parse_bytes(s):
    m = re.fullmatch(r"(\d+)(KiB|MiB|GiB)?", s)
    if not m:
        raise ValueError("bad size %r" % s)
    return int(m.group(1)) * UNITS.get(m.group(2), 1)


def status_kib(pid, field):
    with open("/proc/%d/status" % pid) as f:
        m = re.search(r"%s:\s+(\d+) kB" % field, f.read())
    return int(m.group(1)) * 1024 if m else 0


def status_fields(pid, fields):
    with open("/proc/%d/status" % pid) as f:
        text = f.read()
    out = {}
    for k in fields:
        m = re.search(r"%s:\s+(\d+) kB" % k, text)
        out[k] = int(m.group(1)) * 1024 if m else 0
    return out


def smaps_split(pid):
    """Resident bytes by kind of mapping (/proc/PID/smaps): heap (brk and anonymous
    mappings), blocks (*.blk files), wal, other files."""
    out = {"anon": 0, "blocks": 0, "blocks_n": 0, "wal": 0, "files": 0, "total": 0}
    name = ""
    with open("/proc/%d/smaps" % pid) as f:
        for line in f:
            if re.match(r"[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split(None, 5)
                name = parts[5].strip() if len(parts) > 5 else ""
            elif line.startswith("Rss:"):
                n = int(line.split()[1]) * 1024
                out["total"] += n
                if not name.startswith("/"):
                    out["anon"] += n
                elif name.endswith(".blk") or ".blk " in name:
                    out["blocks"] += n
                    out["blocks_n"] += n > 0
                elif "/wal" in name:
                    out["wal"] += n
                else:
                    out["files"] += n
    return out


FIELDS = ("VmRSS", "RssAnon", "RssFile", "RssShmem")
# /metrics gauges kept at the sample with the largest VmRSS: what the budget counted there.
PEAK_GAUGES = ("miradb_memory_in_use_bytes", "miradb_memory_uncounted_bytes",
               "miradb_block_table_heap_bytes", "miradb_heap_trims_total",
               "miradb_query_memory_bytes", "miradb_query_page_window_bytes",
               'miradb_ingest_cache_bytes{kind="buffers"}', 'miradb_ingest_cache_bytes{kind="batches"}')


class Sampler(threading.Thread):
    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.stop_ev = threading.Event()
        self.samples = []  # (t, rss, in_use)
        self.peaks = dict.fromkeys(FIELDS, 0)
        self.peak_heap = 0  # miradb_block_table_heap_bytes
        self.smaps = None  # the split with the largest total seen
        self.at_peak = {}  # the accounting at the sample with the largest VmRSS

    def run(self):
        t0 = time.monotonic()
        i = 0
        while not self.stop_ev.is_set():
            try:
                st = status_fields(self.d.pid, FIELDS)
                m = self.d.metrics()
                for k in FIELDS:
                    self.peaks[k] = max(self.peaks[k], st[k])
                self.peak_heap = max(self.peak_heap,
                                     int(m.get("miradb_block_table_heap_bytes", 0)))
                self.samples.append((round(time.monotonic() - t0, 2), st["VmRSS"],
                                     int(m.get("miradb_memory_in_use_bytes", 0))))
                if st["VmRSS"] >= self.at_peak.get("VmRSS", 0):
                    self.at_peak = dict(st)
                    self.at_peak.update({k: int(m.get(k, 0)) for k in PEAK_GAUGES})
                if i % 10 == 0:
                    sp = smaps_split(self.d.pid)
                    if self.smaps is None or sp["total"] > self.smaps["total"]:
                        self.smaps = sp
                i += 1
            except (OSError, RuntimeError):
                pass
            self.stop_ev.wait(0.1)


SEL = '{service_name=~".+"}'


def query_paths(now_s):
    """The query arm's loop: GET paths over the last hour (and the next minute)."""
    lo, hi = now_s - 3600, now_s + 60
    rng = {"start": lo * 10**9, "end": hi * 10**9}

    def loki(q, **kw):
        return "/loki/api/v1/query_range?" + urllib.parse.urlencode(dict(query=q, **kw, **rng))

    def tempo(q):
        return "/api/search?" + urllib.parse.urlencode({"q": q, "start": lo, "end": hi,
                                                       "limit": 20})

    def prom(q):
        return "/api/v1/query_range?" + urllib.parse.urlencode(
            {"query": q, "start": lo, "end": hi, "step": "60s"})
    return [
        ("logql_miss", loki(SEL + ' |= "zzqxnotthere"', limit=100)),
        ("logql_attr", loki(SEL + ' | http_route="zzqx-no-route"', limit=100)),
        ("logql_page", loki(SEL, limit=100)),
        ("logql_count", loki("sum by (service_name) (count_over_time(%s[1m]))" % SEL,
                             step="60s")),
        ("traceql_miss", tempo('{ name = "zzqx-no-such-span" }')),
        ("traceql_attr", tempo('{ span.http.route = "zzqx-no-route" }')),
        ("promql_rate", prom("sum by (service_name) (rate(http_server_request_count_total[5m]))")),
        ("promql_gauge", prom("max_over_time(system_cpu_utilization[5m])")),
    ]


class Querier(threading.Thread):
    """Runs the query loop until told to stop (each request bounded by its timeout)."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.port = port
        self.stop_ev = threading.Event()
        self.counts = {}  # name -> [runs, not 200, seconds]

    def run(self):
        conn = None
        i = 0
        while not self.stop_ev.is_set():
            name, path = query_paths(int(time.time()))[i % 8]
            i += 1
            c = self.counts.setdefault(name, [0, 0, 0.0])
            t = time.monotonic()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
                conn.request("GET", path)
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                ok = False
                conn = None
            c[0] += 1
            c[1] += not ok
            c[2] += time.monotonic() - t
        if conn is not None:
            conn.close()


class Side(threading.Thread):
    """otlp-load posting |signal_| at |rate| requests/s of 1,000 records (the query arm)."""

    def __init__(self, build, port, signal_, secs, rate):
        super().__init__(daemon=True)
        self.args = (build, port, signal_)
        self.secs, self.rate = secs, rate
        self.result = None

    def run(self):
        build, port, signal_ = self.args
        try:
            self.result = bl.summary(bl.load(build, port, signal_, protocol="grpc",
                                             connections=1, duration=self.secs, rate=self.rate))
        except RuntimeError as e:
            self.result = {"error": str(e)}


def one(build, client, budget, conns, secs, payload, lua, extra, arm):
    data = bl.fresh_data("rss")
    qargs = ["--query-max-rows", "2000000000"] if arm == "query" else []
    d = bl.Daemon(bl.miradb_bin(build), data, ["--memory-budget", budget] + qargs + extra,
                  name="rss").start()
    try:
        s = Sampler(d)
        s.start()
        q, sides = None, []
        if arm == "query":
            sides = [Side(build, d.grpc_port, sig, secs, 10) for sig in ("traces", "metrics")]
            for t in sides:
                t.start()
            q = Querier(d.http_port)
            q.start()
        if client in ("grpc", "http/protobuf"):
            r = peer.run_load(build, d.port(client), client, "logs", conns, secs, False)
        else:
            r = peer.run_wrk(d.http_port, "logs", conns, secs, payload, lua)
        for t in sides:
            t.join(secs + 180)
        if q is not None:
            q.stop_ev.set()
            q.join(90)
        s.stop_ev.set()
        s.join()
        r["peak_rss_bytes"] = status_kib(d.pid, "VmHWM")
        m = d.metrics()
        r["metrics"] = {k: v for k, v in m.items() if k.startswith((
            "miradb_admission", "miradb_ack_", "miradb_memory", "miradb_wal_append",
            "miradb_block_fsync", "miradb_heap_trim", "miradb_ingest_cache", "miradb_block_table",
            "miradb_seal", "miradb_query"))}
        smp = s.samples
        r["peak_in_use_bytes"] = max((x[2] for x in smp), default=0)
        r["max_unaccounted_bytes"] = max((x[1] - x[2] for x in smp), default=0)
        r["peaks"] = {k: v for k, v in s.peaks.items()}
        r["peak_table_heap_bytes"] = s.peak_heap
        r["smaps_at_peak"] = s.smaps
        r["at_peak_rss"] = s.at_peak
        r["samples"] = smp[::10]  # (s, RSS, in_use) about once a second
        if q is not None:
            r["queries"] = {k: {"runs": v[0], "not_200": v[1],
                                "mean_ms": round(1000 * v[2] / max(v[0], 1), 1)}
                            for k, v in sorted(q.counts.items())}
            r["side_load"] = {t.args[2]: t.result for t in sides}
    finally:
        d.stop()
        bl.remove_data(data)
    return r


def mib(n):
    return n / 2**20


def main():
    build = bl.build_dir(sys.argv)
    budgets = os.environ.get("RSS_BUDGETS", "256MiB 128MiB").split()
    conns = [int(c) for c in os.environ.get("RSS_CONNS", "1 4").split()]
    secs = int(os.environ.get("RSS_SECONDS", "5" if bl.QUICK else "10"))
    extra = os.environ.get("RSS_ARGS", "").split()
    clients = os.environ.get("RSS_CLIENTS", "wrk grpc").split()
    arms = os.environ.get("RSS_ARMS", "ingest query").split()
    payload = peer.payload_path()
    if payload is None or shutil.which("wrk") is None:
        bl.log("rss: no wrk or no payload file: skipped")
        bl.emit({"case": "rss", "skipped": "no wrk or payload"})
        return 0
    workdir = tempfile.mkdtemp(prefix="miradb-rss-")
    lua = os.path.join(workdir, "post.lua")
    with open(lua, "w") as f:
        f.write(peer.WRK_LUA)
    points, failed = [], 0
    try:
        for b, c, cl, arm in [(b, c, cl, a) for b in budgets for c in conns for cl in clients
                              for a in arms]:
            r = one(build, cl, b, c, secs, payload, lua, extra, arm)
            limit = parse_bytes(b)
            refused = r["errors_total"]
            qbad = sum(v["not_200"] for v in r.get("queries", {}).values())
            ok = r["peak_rss_bytes"] <= limit and refused == 0 and qbad == 0
            failed += not ok
            pk, sm = r["peaks"], r["smaps_at_peak"] or {}
            bl.log("rss: %s %s budget %s c%d: peak RSS %.1f MiB (%s), peak in_use %.1f MiB, "
                   "max RSS-in_use %.1f MiB, p50/p99 %.2f/%.2f ms, %d requests, %d refused"
                   % (arm, cl, b, c, mib(r["peak_rss_bytes"]), "PASS" if ok else "FAIL",
                      mib(r["peak_in_use_bytes"]), mib(r["max_unaccounted_bytes"]),
                      r["ack_p50_ms"], r["ack_p99_ms"], r["ack_samples"], refused))
            bl.log("rss:   peaks RssAnon %.1f RssFile %.1f RssShmem %.1f MiB, table heap %.1f MiB;"
                   " smaps at its largest: anon %.1f, *.blk %.1f (%d files), wal %.1f, other "
                   "files %.1f MiB"
                   % (mib(pk["RssAnon"]), mib(pk["RssFile"]), mib(pk["RssShmem"]),
                      mib(r["peak_table_heap_bytes"]), mib(sm.get("anon", 0)),
                      mib(sm.get("blocks", 0)), sm.get("blocks_n", 0), mib(sm.get("wal", 0)),
                      mib(sm.get("files", 0))))
            ap = r["at_peak_rss"]
            bl.log("rss:   at the RSS peak (%.1f MiB: anon %.1f, file %.1f): in_use %.1f, of it "
                   "table heap %.1f, query memory %.1f, page windows %.1f MiB"
                   % (mib(ap.get("VmRSS", 0)), mib(ap.get("RssAnon", 0)), mib(ap.get("RssFile", 0)),
                      mib(ap.get("miradb_memory_in_use_bytes", 0)),
                      mib(ap.get("miradb_block_table_heap_bytes", 0)),
                      mib(ap.get("miradb_query_memory_bytes", 0)),
                      mib(ap.get("miradb_query_page_window_bytes", 0))))
            mt = r["metrics"]
            bl.log("rss:   query loads that waited for room %d (%.2f s), shared-bound waits %d "
                   "(%.2f s); uncounted at the RSS peak %.1f MiB"
                   % (mt.get("miradb_query_memory_waits_total", 0),
                      mt.get("miradb_query_memory_wait_seconds_total", 0),
                      mt.get("miradb_query_shared_waits_total", 0),
                      mt.get("miradb_query_shared_wait_seconds_total", 0),
                      mib(ap.get("miradb_memory_uncounted_bytes", 0))))
            if "queries" in r:
                bl.log("rss:   queries: " + ", ".join(
                    "%s %d (%d not 200, %.0f ms)" % (k, v["runs"], v["not_200"], v["mean_ms"])
                    for k, v in r["queries"].items()))
            r.update({"client": cl, "budget": b, "connections": c, "arm": arm, "pass": ok})
            points.append(r)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    bl.emit({"case": "rss", "machine": bl.machine(), "seconds": secs, "points": points})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
