"""promql case: MiraDB's Prometheus API against Prometheus 2.42 over the same data, in one
sitting, as latency ratios (issue 11: "no slower than Prometheus on any of them").

Data (bench/promgen, one seed): 10,000 counter series bench_requests_total (100 jobs x 10
instances x 10 routes) and 100 classic histograms bench_latency_seconds (9 bounds + Inf: 1,000
_bucket series, plus _sum and _count), one point per series every 15 s over the queried hour
and the 5 minutes before it (261 points a series, each resource at its own 0-14 s offset). The
hour starts two hours before now, on the hour. The same points go
  - as OpenMetrics text through `promtool tsdb create-blocks-from openmetrics` into a
    Prometheus 2.42 started on loopback (no scrape targets: the backfilled blocks are all it
    holds), and
  - as 14 OTLP/HTTP protobuf requests (/v1/metrics) into a fresh MiraDB run with
    --block-max-age 2s, so every row is in a sealed block before any query ("sealed" in the
    output says whether that held).
Both must answer count() and sum(count_over_time()) over every bench_ series with exactly the
generator's series and samples before anything is timed.

Queries (range: the hour at step 15 s, 241 steps; instant: at the hour's end):
  rate_10k          rate(bench_requests_total[5m])                       10,000 series
  sum_rate          sum(rate(bench_requests_total[5m]))
  hq_1k             histogram_quantile(0.9, sum by (le) (rate(bench_latency_seconds_bucket[5m])))
  topk_10           topk(10, rate(bench_requests_total[5m]))
each as range and as instant, and the label-browser calls Grafana makes over the hour:
  labels            /api/v1/labels
  job_values        /api/v1/label/job/values
  name_values       /api/v1/label/__name__/values
  series_all        /api/v1/series?match[]=bench_requests_total          10,000 series
  series_job        /api/v1/series?match[]=bench_requests_total{job="svc-07"}
Timing: per query a warm-up pair (discarded), then N passes (9; 3 with BENCH_QUICK=1;
BENCH_PROMQL_PASSES), fewer once 60 s of passes went by (20 s quick; BENCH_PROMQL_BUDGET),
never fewer than one, so a query that takes minutes ends the case in time; each
pass one request to each server, the order alternating (M P, P M, M P, ...) so neither always
goes first; latency is the client's wall time from connect to the last body byte (a new
connection per request, no gzip, for both). Per pass the ratio MiraDB/Prometheus; reported:
median latencies, median ratio, every ratio, how many passes were above 1, and both servers'
CPU time per request (from /proc). An answer counts only if both are 200 "success" with the
same number of series (label-browser lists: the same values); small answers are also compared
label set by label set and value by value (relative difference reported).
MiraDB's /metrics counters around the measured passes give per request: PromQL series and
samples selected, OTLP points scanned, rows and blocks scanned.

Profile: with BENCH_PROMQL_PERF=1 (the default in a full run when perf exists), every query
whose median ratio is above 1 is run again on MiraDB under `perf record -F 499 -g -p PID` for
15 s (repeated while it fits, at least once; a request still running then is abandoned and the
daemon given time to end it), after the timed passes, so it costs no timed figure; the top 10
symbols by self time go into the output ("perf").

    python3 bench/cases/promql.py BUILD_DIR
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse

import benchlib as bl

STEP = 15
SERVE_ARGS = ["--block-max-age", "2s", "--query-max-rows", "2000000000", "--query-timeout",
              "600s", "--query-memory", "4GiB"]
HTTP_TIMEOUT = 660
PERF_WINDOW_S = 15
CTR = "bench_requests_total"
HIST = "bench_latency_seconds_bucket"
ALL = '{__name__=~"bench_.+"}'

QUERIES = [
    ("rate_10k", "rate(%s[5m])" % CTR),
    ("sum_rate", "sum(rate(%s[5m]))" % CTR),
    ("hq_1k", "histogram_quantile(0.9, sum by (le) (rate(%s[5m])))" % HIST),
    ("topk_10", "topk(10, rate(%s[5m]))" % CTR),
]


def pass_budget():
    """Seconds of measured passes per query: passes stop early once they went by (after at
    least one), so a query taking minutes cannot hold the case past run-all's timeout."""
    env = os.environ.get("BENCH_PROMQL_BUDGET")
    if env:
        return float(env)
    return 20.0 if bl.QUICK else 60.0


def passes():
    env = os.environ.get("BENCH_PROMQL_PASSES")
    if env:
        return int(env)
    return 3 if bl.QUICK else 9


# ---------------------------------------------------------------- HTTP


def get(port, path, timeout=HTTP_TIMEOUT):
    """(status, body, wall seconds): a fresh connection, the whole body read."""
    t0 = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path, headers={"Accept": "application/json"})
        r = c.getresponse()
        body = r.read()
        st = r.status
    except (OSError, http.client.HTTPException):
        st, body = 0, b""
    finally:
        c.close()
    return st, body, time.perf_counter() - t0


def post(port, path, data, patience=120.0):
    """POSTs |data|; a 429 or 503 (the memory budget full while the sealer
    catches up) is retried after its Retry-After, as an OTLP exporter
    retries, for at most |patience| seconds."""
    deadline = time.monotonic() + patience
    while True:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        try:
            c.request("POST", path, body=data,
                      headers={"Content-Type": "application/x-protobuf"})
            r = c.getresponse()
            st, body, after = r.status, r.read(), r.getheader("Retry-After")
        finally:
            c.close()
        if st not in (429, 503) or time.monotonic() >= deadline:
            return st, body
        try:
            wait = min(max(float(after), 0.05), 5.0) if after else 0.5
        except ValueError:
            wait = 0.5
        time.sleep(wait)


def qs(params):
    return urllib.parse.urlencode(params)


# ---------------------------------------------------------------- Prometheus


class Prometheus:
    def __init__(self, tsdb, workdir):
        self.tsdb = tsdb
        self.workdir = workdir
        self.proc = None
        self.port = None
        self.log_path = os.path.join(workdir, "prometheus.log")

    def start(self):
        cfg = os.path.join(self.workdir, "prometheus.yml")
        with open(cfg, "w") as f:
            f.write("global:\n  scrape_interval: 1m\n")
        for _ in range(3):  # a port found free may be taken before Prometheus binds it
            port = bl.free_port()
            logf = open(self.log_path, "w")
            self.proc = subprocess.Popen(
                ["prometheus", "--config.file=" + cfg, "--storage.tsdb.path=" + self.tsdb,
                 "--storage.tsdb.retention.time=10y", "--web.listen-address=127.0.0.1:%d" % port,
                 "--log.level=warn"], stdout=subprocess.DEVNULL, stderr=logf,
                stdin=subprocess.DEVNULL, preexec_fn=bl._pdeathsig)
            logf.close()
            bl._children.append(self.proc)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and self.proc.poll() is None:
                st, _, _ = get(port, "/-/ready", timeout=2)
                if st == 200:
                    self.port = port
                    return self
                time.sleep(0.2)
            self.stop()
            if "address already in use" not in open(self.log_path).read():
                break
        raise RuntimeError("prometheus: /-/ready did not answer 200 within 60 s: %s"
                           % open(self.log_path).read()[-800:])

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def prom_version():
    try:
        out = subprocess.run(["prometheus", "--version"], capture_output=True, text=True,
                             timeout=20)
        return (out.stdout + out.stderr).splitlines()[0].strip()
    except (OSError, IndexError, subprocess.TimeoutExpired):
        return None


# ---------------------------------------------------------------- answers


def scalar_answer(port, query, at):
    """The value of an instant query's single sample, or None."""
    st, body, _ = get(port, "/api/v1/query?" + qs({"query": query, "time": at}))
    if st != 200:
        return None
    try:
        res = json.loads(body)["data"]["result"]
        return float(res[0]["value"][1]) if res else 0.0
    except (ValueError, KeyError, IndexError, TypeError):
        return None


def holds(port, at):
    """(series, samples) the server answers for the dataset at |at| (a minute after the last
    point). Samples are summed per family: count_over_time drops the name, so _sum and _count
    of one histogram would collide in one vector."""
    total = 0.0
    for sel in (CTR, HIST, "bench_latency_seconds_sum", "bench_latency_seconds_count"):
        v = scalar_answer(port, "sum(count_over_time(%s[70m]))" % sel, at)
        if v is None:
            return scalar_answer(port, "count(%s)" % ALL, at), None
        total += v
    return scalar_answer(port, "count(%s)" % ALL, at), total


def shape(body, kind):
    """(ok, series count, parsed data or None) of an answer body. Series are counted without
    parsing the body (a 10,000-series matrix is 70 MB of JSON); bodies under 4 MB are parsed
    so their contents can be compared too."""
    if b'"status":"success"' not in body[:200]:
        return False, None, None
    data = None
    if len(body) < (4 << 20):
        try:
            data = json.loads(body)["data"]
        except (ValueError, KeyError):
            return False, None, None
    if kind == "query":
        return True, body.count(b'"metric":'), data
    if kind == "series":
        return True, body.count(b'"__name__":'), data
    if data is None:
        return False, None, None
    return True, len(data), data


def compare(a, b, kind):
    """What differs between two parsed answers: {"same_labelsets": bool,
    "max_rel_diff": float} (queries), {"same_values": bool} (lists)."""
    if a is None or b is None:
        return {}
    if kind == "labels":
        return {"same_values": sorted(a) == sorted(b)}
    if kind == "series":
        key = lambda m: tuple(sorted(m.items()))
        return {"same_labelsets": sorted(map(key, a)) == sorted(map(key, b))}
    rows = {}
    for side, d in ((0, a), (1, b)):
        for s in d["result"]:
            k = tuple(sorted(s["metric"].items()))
            pts = s.get("values") or [s["value"]]
            rows.setdefault(k, [None, None])[side] = {p[0]: float(p[1]) for p in pts}
    same = all(v[0] is not None and v[1] is not None and v[0].keys() == v[1].keys()
               for v in rows.values())
    diff = 0.0
    for v in rows.values():
        if v[0] is None or v[1] is None:
            continue
        for t, x in v[0].items():
            y = v[1].get(t)
            if y is None:
                continue
            if x != y:
                diff = max(diff, abs(x - y) / max(abs(x), abs(y), 1e-300))
    return {"same_labelsets": same, "max_rel_diff": diff}


# ---------------------------------------------------------------- timing


COUNTERS = {
    "promql_series_selected": "miradb_promql_series_selected_total",
    "promql_samples_selected": "miradb_promql_samples_selected_total",
    "promql_points_scanned": "miradb_promql_points_scanned_total",
    "rows_scanned": "miradb_query_rows_scanned_total",
    "blocks_considered": "miradb_query_blocks_considered_total",
    "blocks_scanned": "miradb_query_blocks_scanned_total",
}


def cases(base, end):
    out = []
    rng = {"start": base, "end": end, "step": STEP}
    for name, q in QUERIES:
        out.append((name + "_range", q, "query", "/api/v1/query_range?" + qs(dict(rng, query=q))))
    for name, q in QUERIES:
        out.append((name + "_instant", q, "query", "/api/v1/query?" + qs({"query": q,
                                                                         "time": end})))
    span = {"start": base, "end": end}
    out += [
        ("labels", None, "labels", "/api/v1/labels?" + qs(span)),
        ("job_values", None, "labels", "/api/v1/label/job/values?" + qs(span)),
        ("name_values", None, "labels", "/api/v1/label/__name__/values?" + qs(span)),
        ("series_all", CTR, "series", "/api/v1/series?" + qs(dict(span, **{"match[]": CTR}))),
        ("series_job", CTR + '{job="svc-07"}', "series", "/api/v1/series?" + qs(
            dict(span, **{"match[]": CTR + '{job="svc-07"}'}))),
    ]
    return out


def one(port, pid, path):
    c0 = bl.proc_cpu_s(pid)
    st, body, wall = get(port, path)
    return st, body, wall, bl.proc_cpu_s(pid) - c0


def time_case(mira, prom, name, path, kind, n):
    sides = {"miradb": (mira.http_port, mira.pid), "prometheus": (prom.port, prom.pid)}
    # warm-up pair, discarded; its answers are the ones checked
    ans = {}
    for side in ("miradb", "prometheus"):
        st, body, _, _ = one(*sides[side], path)
        ok, count, data = shape(body, kind) if st == 200 else (False, None, None)
        ans[side] = {"status": st, "ok": ok, "series": count, "bytes": len(body), "data": data,
                     "error": None if ok else body[:300].decode("utf-8", "replace")}
    res = {"path": path,
           "series": {s: ans[s]["series"] for s in ans},
           "status": {s: ans[s]["status"] for s in ans},
           "response_bytes": {s: ans[s]["bytes"] for s in ans}}
    for s in ans:
        if ans[s]["error"]:
            res.setdefault("errors", {})[s] = ans[s]["error"]
    res["same_series_count"] = (ans["miradb"]["ok"] and ans["prometheus"]["ok"]
                                and ans["miradb"]["series"] == ans["prometheus"]["series"])
    res.update(compare(ans["miradb"]["data"], ans["prometheus"]["data"], kind))
    if not (ans["miradb"]["ok"] and ans["prometheus"]["ok"]):
        res["timed"] = False
        return res
    lat = {"miradb": [], "prometheus": []}
    cpu = {"miradb": [], "prometheus": []}
    bad = 0
    m0 = mira.metrics()
    t0 = time.monotonic()
    for i in range(n):
        if i > 0 and time.monotonic() - t0 > pass_budget():
            break
        order = ("miradb", "prometheus") if i % 2 == 0 else ("prometheus", "miradb")
        for side in order:
            st, body, wall, c = one(*sides[side], path)
            if st != 200 or len(body) != ans[side]["bytes"]:
                bad += 1
            lat[side].append(wall)
            cpu[side].append(c)
    m1 = mira.metrics()
    ratios = [m / p for m, p in zip(lat["miradb"], lat["prometheus"])]
    n = len(ratios)
    res.update({
        "timed": True,
        "passes": n,
        "passes_planned": passes(),
        "failed_requests": bad,
        "miradb_ms_median": round(bl.median(lat["miradb"]) * 1000, 2),
        "prometheus_ms_median": round(bl.median(lat["prometheus"]) * 1000, 2),
        "ratio_median": round(bl.median(ratios), 3),
        "ratios": [round(r, 3) for r in ratios],
        "passes_miradb_slower": sum(1 for r in ratios if r > 1),
        "miradb_cpu_ms_median": round(bl.median(cpu["miradb"]) * 1000, 1),
        "prometheus_cpu_ms_median": round(bl.median(cpu["prometheus"]) * 1000, 1),
        "miradb_per_request": {k: round((bl.metric_sum(m1, v) - bl.metric_sum(m0, v)) / n)
                               for k, v in COUNTERS.items()},
    })
    return res


# ---------------------------------------------------------------- perf


def queries_done(mira):
    return bl.metric_sum(mira.metrics(), "miradb_queries_total")


def profile(mira, path, out_dir, name, window=PERF_WINDOW_S):
    """Top 10 symbols (self time) of MiraDB while it answers |path|: the request is repeated
    for |window| seconds (at least once); a request still running then is abandoned (its
    connection closed) and the daemon is given time to finish or cancel it before the next."""
    data = os.path.join(out_dir, "perf-%s.data" % name)
    done0 = queries_done(mira)
    p = subprocess.Popen(["perf", "record", "-F", "499", "-g", "-p", str(mira.pid), "-o", data],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         preexec_fn=bl._pdeathsig)
    bl._children.append(p)
    time.sleep(0.5)
    t0 = time.monotonic()
    sent = complete = 0
    while sent == 0 or time.monotonic() - t0 < window:
        left = max(1.0, window - (time.monotonic() - t0))
        st, _, _ = get(mira.http_port, path, timeout=left)
        sent += 1
        complete += st == 200
        if st != 200:
            break
    sampled = time.monotonic() - t0
    p.send_signal(signal.SIGINT)
    try:
        p.wait(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        return {"error": "perf record did not stop"}
    deadline = time.monotonic() + 300
    while queries_done(mira) < done0 + sent and time.monotonic() < deadline:
        time.sleep(1)
    try:
        rep = subprocess.run(["perf", "report", "-i", data, "--no-children", "--stdio", "-g",
                              "none", "--sort", "symbol", "--percent-limit", "0.5"],
                             capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return {"error": "perf report timed out"}
    top = []
    for line in rep.stdout.splitlines():
        t = line.strip()
        if not t or t.startswith("#") or "%" not in t:
            continue
        pct, _, sym = t.partition("%")
        try:
            words = [w for w in sym.split() if w not in ("[.]", "[k]", "-")]
            top.append({"self_pct": float(pct), "symbol": words[0] if words else "?"})
        except ValueError:
            continue
        if len(top) == 10:
            break
    return {"sampled_s": round(sampled, 1), "requests": sent, "completed": complete,
            "perf_data": os.path.relpath(data, bl.ROOT), "top10_self": top}


# ---------------------------------------------------------------- main


def main():
    build = bl.build_dir(sys.argv)
    gen = os.path.join(build, "promgen")
    for tool in ("prometheus", "promtool"):
        if shutil.which(tool) is None:
            bl.emit({"case": "promql", "skipped": "%s is not installed (scripts/deps.sh)" % tool})
            return 0
    version = prom_version()
    if not version or "version 2.42." not in version:
        bl.emit({"case": "promql", "skipped": "prometheus is not 2.42: %s" % version})
        return 0
    if not os.access(gen, os.X_OK):
        bl.emit({"case": "promql", "error": "%s is not built (make all)" % gen})
        return 1
    t_case = time.monotonic()
    work = bl.fresh_data("promql")
    src = os.path.join(work, "dataset")
    os.makedirs(src)
    base = (int(time.time()) // 3600 - 2) * 3600
    end = base + 3600
    rc, out, err = run_text([gen, "--out", src, "--base-s", str(base)], 300)
    w = out.split()
    if rc != 0 or len(w) != 6 or w[0::2] != ["series", "samples", "points"]:
        bl.emit({"case": "promql", "error": "promgen: %s %s" % (out.strip(), err.strip()[-300:])})
        return 1
    series, samples, points = int(w[1]), int(w[3]), int(w[5])
    bl.log("promql: dataset of %d series, %d samples (%d OTLP points) from %d" %
           (series, samples, points, base))
    t = time.monotonic()
    rc, _, err = run_text(["promtool", "tsdb", "create-blocks-from", "openmetrics",
                           os.path.join(src, "data.om"), os.path.join(work, "prom")], 900)
    if rc != 0:
        bl.emit({"case": "promql", "error": "promtool: " + err.strip()[-400:]})
        return 1
    backfill_s = time.monotonic() - t
    prom = Prometheus(os.path.join(work, "prom"), work).start()
    mira = bl.Daemon(bl.miradb_bin(build), os.path.join(work, "miradb"), SERVE_ARGS,
                     name="promql-miradb")
    os.makedirs(mira.data)
    mira.start()
    try:
        return run(build, prom, mira, work, src, base, end, series, samples, points, backfill_s,
                   version, t_case)
    finally:
        mira.stop()
        prom.stop()
        if os.environ.get("BENCH_PROMQL_KEEP", "") in ("", "0"):
            for d in (src, prom.tsdb, mira.data):  # perf data and logs stay
                shutil.rmtree(d, ignore_errors=True)


def run_text(argv, timeout):
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           preexec_fn=bl._pdeathsig)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return -1, "", "timed out after %ss" % timeout


def run(build, prom, mira, work, src, base, end, series, samples, points, backfill_s, version,
        t_case):
    t = time.monotonic()
    files = sorted(f for f in os.listdir(src) if f.endswith(".pb"))
    for f in files:
        with open(os.path.join(src, f), "rb") as fh:
            st, body = post(mira.http_port, "/v1/metrics", fh.read())
        if st != 200:
            bl.emit({"case": "promql", "error": "POST /v1/metrics %s answered %s: %s"
                     % (f, st, body[:200])})
            return 1
    ingest_s = time.monotonic() - t
    rows, waited, m = bl.settle(mira, "metrics", points, deadline=300)
    t = time.monotonic()
    while m.get('miradb_block_rows{signal="metrics"}', 0) != points and \
            time.monotonic() - t < 120:  # every row in a sealed block
        time.sleep(0.5)
        m = mira.metrics()
    waited += time.monotonic() - t
    sealed = (m.get('miradb_block_rows{signal="metrics"}', 0) == points
              and m.get('miradb_open_block_rows{signal="metrics"}', 1) == 0
              and m.get('miradb_unsealed_rows{signal="metrics"}', 0) == 0)
    store = {"ingest_requests": len(files), "ingest_s": round(ingest_s, 2),
             "seal_wait_s": round(waited, 2), "rows": rows,
             "sealed_rows": int(m.get('miradb_block_rows{signal="metrics"}', 0)),
             "sealed_blocks": int(m.get('miradb_blocks{signal="metrics"}', 0)),
             "sealed_block_bytes": int(m.get('miradb_block_bytes{signal="metrics"}', 0)),
             "sealed": sealed, "prometheus_backfill_s": round(backfill_s, 2)}
    bl.log("promql: MiraDB holds %d rows (%d sealed, %d blocks)" %
           (rows, store["sealed_rows"], store["sealed_blocks"]))
    # both must answer the whole dataset before anything is timed
    at = end + 60
    want = (float(series), float(samples))
    deadline = time.monotonic() + 180
    while True:
        hp, hm = holds(prom.port, at), holds(mira.http_port, at)
        if (hp == want and hm == want) or time.monotonic() > deadline:
            break
        time.sleep(1)
    store["holds"] = {"want": list(want), "prometheus": list(hp), "miradb": list(hm)}
    if hp != want or hm != want:
        bl.emit({"case": "promql", "error": "the servers do not hold the dataset",
                 "store": store})
        return 1
    n = passes()
    res = {}
    for name, q, kind, path in cases(base, end):
        bl.log("promql: %s" % name)
        r = time_case(mira, prom, name, path, kind, n)
        if q:
            r["query"] = q
        res[name] = r
    timed = [k for k, v in res.items() if v.get("timed")]
    slower = sorted(k for k in timed if res[k]["ratio_median"] > 1)
    summary = {
        "all_answers_match": all(v["same_series_count"] and v.get("same_values", True)
                                 and v.get("same_labelsets", True) for v in res.values()),
        "timed": len(timed),
        "slower_than_prometheus": slower,
        "design_target_met": not slower and len(timed) == len(res),
        "ratio_medians": {k: res[k]["ratio_median"] for k in timed},
    }
    perf_on = os.environ.get("BENCH_PROMQL_PERF", "0" if bl.QUICK else "1") not in ("", "0")
    if perf_on and slower and shutil.which("perf"):
        for k in slower:
            bl.log("promql: perf record of %s" % k)
            res[k]["perf"] = profile(mira, res[k]["path"], work, k)
    bl.emit({"case": "promql", "quick": bl.QUICK, "prometheus": version,
             "daemon_args": " ".join(SERVE_ARGS),
             "dataset": {"series": series, "samples": samples, "otlp_points": points,
                         "counter_series": 10000, "bucket_series": 1000, "step_s": STEP,
                         "range_start": base, "range_end": end, "range_steps": 3600 // STEP + 1},
             "store": store, "summary": summary, "queries": res,
             "case_s": round(time.monotonic() - t_case, 1), "machine": bl.machine()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
