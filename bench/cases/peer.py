"""peer case: MiraDB's ingest against Fluent Bit 5.1.1's in the same sitting (issue 13).

Fluent Bit (`opentelemetry` input -> `null` output) keeps nothing, so it is the floor a store
must beat per CPU-second, not the goal. Both servers take the same client, payload and
connection count, one after the other, the order alternating pass by pass (M F, F M, ...),
each point on a freshly started server (a fresh data directory for MiraDB; Fluent Bit's memory
grows under load, so a fresh process bounds it).

Arms (client, protocol, signal):
  wrk      HTTP/1.1 keep-alive POST of one fixed 1,000-record ExportLogsServiceRequest
           (PEER_PAYLOAD, default ../shared/peers/fluent-bit/logs-1000.pb, 359 KB) to
           /v1/logs: a client that is not MiraDB's own code. Latency = wrk's own percentiles.
           Protocol http/protobuf+gzip: the same request gzip'd (level 6, 84 KB), with
           Content-Encoding: gzip, as the Collector's exporters send by default;
           http/protobuf+zstd: zstd'd (level 3), as they send with compression: zstd.
  h2load   nghttp2's h2load over gRPC (HTTP/2, one stream per connection) posting the same
           request as the wrk arm, framed as one gRPC message, to LogsService/Export: the gRPC
           figure that depends neither on MiraDB's own client nor on its generator's payload.
           h2load sees only :status, so MiraDB's count of records is checked on its /metrics
           (acked_match); latency from h2load's per-request log (--log-file).
  load     build/otlp-load, 1,000-record requests from its generator pool, over gRPC and over
           HTTP/1.1 protobuf (--any-2xx: Fluent Bit answers 201), logs; traces and metrics over
           gRPC.
MiraDB runs with its defaults (--ack wal), and for some points --ack fsync (data on a real
disk: bench/data, tmpfs refused).

Per point: records/s (acknowledged records over the client's run), the server's CPU seconds
over the run from /proc (user + system, all threads) as cores busy and records per CPU-second,
ack latency p50/p99 with the sample count, the server's peak RSS (VmHWM of a process that lived
for this point only), and for MiraDB whether the records it counts as acknowledged equal the
client's (up to one request per connection more: the client stops with requests in
flight). Reported per point: every pass's figures, the medians, and the ratio of the medians
MiraDB / Fluent Bit of records per CPU-second (the issue's target: >= 3 with --ack wal, >= 2
with --ack fsync). Beside it the same with the drain: the CPU the server spends after the
client stops until it idles (blocks the load left waiting for the sealer; at most 30 s) counted
too, since a server whose sealer lags would otherwise look cheaper by the seal work it owes.

Environment: FLUENT_BIT (path of the binary; default ../shared/peers/fluent-bit/fluent-bit),
PEER_PASSES (default 3; 1 with BENCH_QUICK=1), PEER_SECONDS (per point; default 10, 3 quick),
PEER_PAYLOAD, PEER_POINTS (other points than the grid's: see grid()). Without a Fluent Bit
binary, or without wrk or h2load, the case says so and skips that part.

    python3 bench/cases/peer.py BUILD_DIR
"""

import ctypes
import gzip
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import benchlib as bl

SHARED = os.path.join(bl.ROOT, "..", "shared", "peers", "fluent-bit")
FB_CONF = """[SERVICE]
    Flush 1
    Grace 1
    Log_Level warn
[INPUT]
    Name opentelemetry
    Listen 127.0.0.1
    Port %d
[OUTPUT]
    Name null
    Match *
"""

# wrk's script: POST the payload file; at the end one JSON line with the counts and the
# latency percentiles (microseconds).
WRK_LUA = r"""
local f = assert(io.open(os.getenv("PEER_PAYLOAD"), "rb"))
wrk.method = "POST"
wrk.body = f:read("*all")
f:close()
wrk.headers["Content-Type"] = "application/x-protobuf"
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"errors":{"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d},"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
"""


def fluent_bit_bin():
    p = os.environ.get("FLUENT_BIT") or os.path.join(SHARED, "fluent-bit")
    return p if os.path.isfile(p) and os.access(p, os.X_OK) else None


def payload_path():
    p = os.environ.get("PEER_PAYLOAD") or os.path.join(SHARED, "logs-1000.pb")
    return p if os.path.isfile(p) else None


def peak_rss(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            m = re.search(r"VmHWM:\s+(\d+) kB", f.read())
        return int(m.group(1)) * 1024 if m else None
    except OSError:
        return None


class FluentBit:
    """Fluent Bit as an OTLP sink (HTTP/1.1 and gRPC on one port), output discarded."""

    def __init__(self, binary, workdir):
        self.binary = binary
        self.workdir = workdir
        self.proc = None
        self.port = None

    def start(self, deadline=30):
        self.port = bl.free_port()
        conf = os.path.join(self.workdir, "fb.conf")
        with open(conf, "w") as f:
            f.write(FB_CONF % self.port)
        logf = open(os.path.join(self.workdir, "fb.log"), "w")
        self.proc = subprocess.Popen([self.binary, "-c", conf], stdout=logf, stderr=logf,
                                     preexec_fn=bl._pdeathsig)
        logf.close()
        bl._children.append(self.proc)
        t0 = time.monotonic()
        while time.monotonic() - t0 < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("fluent-bit exited (%s)" % self.proc.returncode)
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError("fluent-bit: not listening within %ss" % deadline)

    @property
    def pid(self):
        return self.proc.pid

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)


def grid():
    """The points: ([(arm, protocol, signal, connections)] with --ack wal, [...] with --ack
    fsync). PEER_POINTS picks them instead: a comma-separated list of
    arm/protocol/signal/connections[/fsync], the protocol written grpc, http-protobuf or
    http-json, e.g. "wrk/http-protobuf/logs/1,h2load/grpc/logs/16,wrk/http-protobuf/logs/4/fsync"
    (an fsync point's Fluent Bit figure is that of the same point without /fsync, if listed)."""
    env = os.environ.get("PEER_POINTS")
    if env:
        pts, fsync = [], []
        for item in env.split(","):
            f = item.strip().split("/")
            if len(f) not in (4, 5) or (len(f) == 5 and f[4] != "fsync"):
                raise SystemExit("PEER_POINTS: bad point %r (arm/protocol/signal/conns[/fsync])"
                                 % item)
            pt = (f[0], f[1].replace("-", "/"), f[2], int(f[3]))
            (fsync if len(f) == 5 else pts).append(pt)
        return pts, fsync
    if bl.QUICK:
        pts = [("wrk", "http/protobuf", "logs", 4), ("h2load", "grpc", "logs", 4),
               ("load", "grpc", "logs", 4)]
        return pts, [("wrk", "http/protobuf", "logs", 4)]
    pts = [("wrk", "http/protobuf", "logs", c) for c in (1, 4, 16)]
    pts += [("wrk", "http/protobuf+gzip", "logs", 4)]
    pts += [("h2load", "grpc", "logs", c) for c in (4, 16)]
    pts += [("load", p, "logs", c) for p in ("grpc", "http/protobuf") for c in (4, 16)]
    pts += [("load", "grpc", s, 4) for s in ("traces", "metrics")]
    fsync = [("wrk", "http/protobuf", "logs", c) for c in (4, 16)] + [("load", "grpc", "logs", 4)]
    return pts, fsync


def zstd_compress(data, level=3):
    """|data| as one zstd frame, by the libzstd the daemon links (no zstd CLI needed)."""
    z = ctypes.CDLL("libzstd.so.1")
    z.ZSTD_compressBound.restype = ctypes.c_size_t
    z.ZSTD_compressBound.argtypes = [ctypes.c_size_t]
    z.ZSTD_compress.restype = ctypes.c_size_t
    z.ZSTD_compress.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p,
                                ctypes.c_size_t, ctypes.c_int]
    z.ZSTD_isError.argtypes = [ctypes.c_size_t]
    cap = z.ZSTD_compressBound(len(data))
    out = ctypes.create_string_buffer(cap)
    n = z.ZSTD_compress(out, cap, data, len(data), level)
    if z.ZSTD_isError(n):
        raise RuntimeError("ZSTD_compress failed")
    return out.raw[:n]


def wrk_inputs(workdir, payload):
    """{protocol: (payload file, wrk script)} for the wrk arm, written into |workdir|: the
    request as it is, gzip'd (level 6) and zstd'd (level 3)."""
    lua = os.path.join(workdir, "post.lua")
    with open(lua, "w") as f:
        f.write(WRK_LUA)
    with open(payload, "rb") as f:
        body = f.read()
    out = {"http/protobuf": (payload, lua)}
    ct = 'wrk.headers["Content-Type"] = "application/x-protobuf"'
    for coding, data in (("gzip", gzip.compress(body, 6)), ("zstd", zstd_compress(body))):
        p = os.path.join(workdir, "payload.pb." + coding)
        s = os.path.join(workdir, "post-%s.lua" % coding)
        with open(p, "wb") as f:
            f.write(data)
        with open(s, "w") as f:
            f.write(WRK_LUA.replace(ct, ct + '\nwrk.headers["Content-Encoding"] = "%s"' % coding))
        out["http/protobuf+" + coding] = (p, s)
    return out


def run_wrk(port, signal_, conns, secs, payload, lua):
    argv = ["wrk", "-t", str(min(conns, 2)), "-c", str(conns), "-d", "%ds" % secs,
            "--timeout", "30s", "-s", lua, "http://127.0.0.1:%d/v1/%s" % (port, signal_)]
    env = dict(os.environ, PEER_PAYLOAD=payload)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=secs + 90, env=env,
                       preexec_fn=bl._pdeathsig)
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode != 0 or not line:
        raise RuntimeError("wrk failed (%s): %s" % (p.returncode, (p.stdout + p.stderr)[-500:]))
    j = json.loads(line[-1])
    e = j["errors"]
    bad = e["status"] + e["read"] + e["write"] + e["timeout"]
    ok = j["requests"] - e["status"]
    return {
        "elapsed_s": j["duration_us"] / 1e6,
        "requests_acked": ok,
        "records_acked": ok * 1000,
        "errors": e,
        "errors_total": bad + e["connect"],
        "ack_samples": j["requests"],
        "ack_p50_ms": j["p50_us"] / 1000.0,
        "ack_p99_ms": j["p99_us"] / 1000.0,
        "ack_max_ms": j["max_us"] / 1000.0,
    }


def run_h2load(port, conns, secs, payload, workdir):
    """h2load over gRPC: |payload| (an ExportLogsServiceRequest) as one uncompressed message."""
    msg = os.path.join(workdir, "payload.grpc")
    with open(payload, "rb") as f:
        body = f.read()
    with open(msg, "wb") as f:
        f.write(b"\x00" + len(body).to_bytes(4, "big") + body)
    logf = os.path.join(workdir, "h2load.log")
    # h2load appends to its --log-file: without this every later run's percentiles would
    # hold the samples of the runs before it (both servers' passes).
    if os.path.exists(logf):
        os.unlink(logf)
    argv = ["h2load", "-D", str(secs), "-c", str(conns), "-t", str(min(conns, 2)), "-m", "1",
            "-d", msg, "-H", "content-type: application/grpc", "-H", "te: trailers",
            "--log-file=" + logf,
            "http://127.0.0.1:%d/opentelemetry.proto.collector.logs.v1.LogsService/Export" % port]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=secs + 90,
                       preexec_fn=bl._pdeathsig)
    m = re.search(r"finished in ([0-9.]+)(m?s)", p.stdout)
    r = re.search(r"requests: (\d+) total, \d+ started, \d+ done, (\d+) succeeded, (\d+) failed, "
                  r"(\d+) errored, (\d+) timeout", p.stdout)
    if p.returncode != 0 or not m or not r:
        raise RuntimeError("h2load failed (%s): %s" % (p.returncode, (p.stdout + p.stderr)[-500:]))
    lat = []
    with open(logf) as f:
        for ln in f:
            c = ln.split()
            if len(c) == 3 and c[1].startswith("2"):
                lat.append(int(c[2]) / 1000.0)
    lat.sort()
    pct = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] if lat else None
    ok = int(r.group(2))
    if len(lat) > ok:
        raise RuntimeError("h2load logged %d successful requests but reported %d" % (len(lat), ok))
    return {
        "elapsed_s": float(m.group(1)) / (1000.0 if m.group(2) == "ms" else 1.0),
        "requests_acked": ok,
        "records_acked": ok * 1000,
        "errors_total": int(r.group(3)) + int(r.group(4)) + int(r.group(5)),
        "ack_samples": len(lat),
        "ack_p50_ms": pct(0.50),
        "ack_p99_ms": pct(0.99),
        "ack_max_ms": lat[-1] if lat else None,
    }


def run_load(build, port, proto, signal_, conns, secs, fb):
    extra = ["--any-2xx"] if fb and proto != "grpc" else []
    rep = bl.load(build, port, signal_, protocol=proto, connections=conns, duration=secs,
                  records=1000, extra=extra)
    s = bl.summary(rep)
    return {
        "elapsed_s": s["elapsed_s"],
        "requests_acked": s["requests_acked"],
        "records_acked": s["records_acked"],
        "errors_total": s["requests_failed"] + s["unanswered"],
        "failed_by_status": s["failed_by_status"],
        "ack_samples": s["ack_samples"],
        "ack_p50_ms": s["ack_p50_ms"],
        "ack_p99_ms": s["ack_p99_ms"],
        "ack_max_ms": s["ack_max_ms"],
    }


def one(build, pt, ack, server, secs, payload, lua, fbbin, workdir):
    arm, proto, sig, conns = pt
    fb = server == "fluent-bit"
    # The run before may have left gigabytes of WAL in the page cache, dirty: its writeback
    # (or the kernel throttling this run's writes behind it) would land in this point's tail.
    os.sync()
    if fb:
        srv = FluentBit(fbbin, workdir).start()
        port = srv.port
    else:
        data = bl.fresh_data("peer")
        srv = bl.Daemon(bl.miradb_bin(build), data, ["--ack", ack], name="peer").start()
        port = srv.port(proto.split("+")[0])
    try:
        cpu0 = bl.proc_cpu_s(srv.pid)
        if arm == "wrk":
            r = run_wrk(port, sig, conns, secs, payload, lua)
        elif arm == "h2load":
            r = run_h2load(port, conns, secs, payload, workdir)
        else:
            r = run_load(build, port, proto, sig, conns, secs, fb)
        cpu = bl.proc_cpu_s(srv.pid) - cpu0
        # Work the load left behind (blocks still waiting for the sealer) is
        # part of what the records cost: wait until the server idles (at most
        # DRAIN_MAX_S) and count that CPU too.
        r["drain_cpu_s"] = round(drain(srv.pid), 3)
        r["peak_rss_bytes"] = peak_rss(srv.pid)
        if not fb:
            m = srv.metrics()
            r["server_acked_records"] = bl.acked_records(m, sig)
            # wrk stops with requests in flight that the server may already have taken.
            n = r["server_acked_records"] - r["records_acked"]
            r["acked_match"] = 0 <= n <= conns * 1000
    finally:
        srv.stop()
        if not fb:
            bl.remove_data(data)
    r["server_cpu_s"] = round(cpu, 3)
    r["records_per_s"] = round(r["records_acked"] / r["elapsed_s"]) if r["elapsed_s"] else None
    r["cores_busy"] = round(cpu / r["elapsed_s"], 3) if r["elapsed_s"] else None
    r["records_per_cpu_s"] = round(r["records_acked"] / cpu) if cpu > 0 else None
    allcpu = cpu + r["drain_cpu_s"]
    r["records_per_cpu_s_drained"] = round(r["records_acked"] / allcpu) if allcpu > 0 else None
    return r


DRAIN_MAX_S = 30.0


def drain(pid):
    """CPU seconds |pid| spends after the load until it idles: under 2% of a core
    over 0.5 s (it never idles: stops after DRAIN_MAX_S)."""
    t0 = time.monotonic()
    c0 = last = bl.proc_cpu_s(pid)
    while time.monotonic() - t0 < DRAIN_MAX_S:
        time.sleep(0.5)
        c = bl.proc_cpu_s(pid)
        if c - last < 0.01:
            return c - c0
        last = c
    return bl.proc_cpu_s(pid) - c0


def key(pt, ack, server):
    arm, proto, sig, conns = pt
    return "%s %s %s c%d %s" % (arm, proto, sig, conns, server if ack is None else
                                "%s --ack %s" % (server, ack))


def med(runs, k):
    xs = [r[k] for r in runs if r.get(k) is not None]
    return bl.median(xs) if xs else None


def main():
    build = bl.build_dir(sys.argv)
    passes = int(os.environ.get("PEER_PASSES", "1" if bl.QUICK else "3"))
    secs = int(os.environ.get("PEER_SECONDS", "3" if bl.QUICK else "10"))
    fbbin = fluent_bit_bin()
    if fbbin is None:
        bl.log("peer: no Fluent Bit binary (set FLUENT_BIT=path, or put it at %s): skipped"
               % os.path.join(SHARED, "fluent-bit"))
        bl.emit({"case": "peer", "skipped": "no Fluent Bit binary"})
        return 0
    payload = payload_path()
    pts, fsync_pts = grid()
    skipped = []
    for client, pkg in (("wrk", "wrk"), ("h2load", "nghttp2-client")):
        have = shutil.which(client) is not None
        if payload is None or not have:
            why = "no %s (apt-get install %s)" % (client, pkg) if not have else "no payload file"
            bl.log("peer: %s arm skipped: %s" % (client, why))
            skipped.append("%s: %s" % (client, why))
            pts = [p for p in pts if p[0] != client]
            fsync_pts = [p for p in fsync_pts if p[0] != client]
    workdir = tempfile.mkdtemp(prefix="miradb-peer-")
    wrk_in = wrk_inputs(workdir, payload) if payload else {}
    # Every (point, server, ack) measured in each pass; the servers' order alternates.
    runs = {}
    plan = [(pt, "wal") for pt in pts] + [(pt, "fsync") for pt in fsync_pts]
    try:
        for p in range(passes):
            for i, (pt, ack) in enumerate(plan):
                order = ["miradb", "fluent-bit"] if (p + i) % 2 == 0 else ["fluent-bit", "miradb"]
                if ack == "fsync":
                    order = ["miradb"]  # Fluent Bit's figure is the --ack wal point's
                for server in order:
                    a = None if server == "fluent-bit" else ack
                    k = key(pt, a, server)
                    bl.log("peer: pass %d/%d %s" % (p + 1, passes, k))
                    try:
                        pl, lua = wrk_in.get(pt[1], (payload, None))
                        r = one(build, pt, ack, server, secs, pl, lua, fbbin, workdir)
                    except (RuntimeError, OSError, subprocess.TimeoutExpired) as e:
                        r = {"error": str(e)[-300:]}
                    runs.setdefault(k, []).append(r)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    points = []
    for pt, ack in plan:
        m = runs.get(key(pt, ack, "miradb"), [])
        f = runs.get(key(pt, None, "fluent-bit"), [])
        row = {"arm": pt[0], "protocol": pt[1], "signal": pt[2], "connections": pt[3],
               "ack": ack}
        for name, rs in (("miradb", m), ("fluent_bit", f)):
            row[name] = {k: med(rs, k) for k in ("records_per_s", "cores_busy",
                                                  "records_per_cpu_s",
                                                  "records_per_cpu_s_drained", "ack_p50_ms",
                                                  "ack_p99_ms", "peak_rss_bytes")}
            row[name]["ack_samples"] = sum(r.get("ack_samples", 0) for r in rs)
            row[name]["errors"] = sum(r.get("errors_total", 0) for r in rs)
            row[name]["passes"] = rs
        row["miradb"]["acked_match_all"] = all(r.get("acked_match") for r in m) if m else None
        a, b = row["miradb"]["records_per_cpu_s"], row["fluent_bit"]["records_per_cpu_s"]
        row["ratio_records_per_cpu_s"] = round(a / b, 3) if a and b else None
        ad, bd = (row["miradb"]["records_per_cpu_s_drained"],
                  row["fluent_bit"]["records_per_cpu_s_drained"])
        row["ratio_records_per_cpu_s_drained"] = round(ad / bd, 3) if ad and bd else None
        points.append(row)
        bl.log("peer: %-40s MiraDB %s rec/CPU-s (%s with the drain), Fluent Bit %s (%s): "
               "ratio %s (%s)" % (key(pt, ack, "miradb"), a, ad, b, bd,
                                  row["ratio_records_per_cpu_s"],
                                  row["ratio_records_per_cpu_s_drained"]))
    bl.emit({"case": "peer", "machine": bl.machine(), "passes": passes, "seconds": secs,
             "fluent_bit": fbbin, "payload": payload, "skipped": skipped, "points": points})
    return 0


if __name__ == "__main__":
    sys.exit(main())
