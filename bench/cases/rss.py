"""rss case: the daemon's peak RSS against its memory budget under load (issue 13).

Per point (budget, connections): a fresh daemon (--memory-budget B, --ack wal, fresh data
directory), a client posting 1,000-record log exports for RSS_SECONDS (wrk: the peer case's fixed
payload over HTTP/1.1 keep-alive; grpc, http/protobuf: build/otlp-load), while /proc/PID/status and /metrics are
sampled every 100 ms. Printed per point: VmHWM (peak RSS over the process's life) against the
budget and PASS / FAIL, the peak of miradb_memory_in_use_bytes (what the budget accounts for),
the largest RSS - in_use seen (what it does not), ack p50/p99 from wrk, the requests refused,
and the admission and ack-tail figures from /metrics.

Environment: RSS_BUDGETS (default "256MiB 128MiB"), RSS_CONNS (default "1 4"), RSS_CLIENTS (default "wrk grpc"),
RSS_SECONDS (default 10; 5 with BENCH_QUICK=1), RSS_ARGS (extra daemon flags), PEER_PAYLOAD.
Exit status 1 when a point fails (peak RSS above its budget, or a request refused).

    python3 bench/cases/rss.py BUILD_DIR
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

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


class Sampler(threading.Thread):
    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.stop_ev = threading.Event()
        self.samples = []  # (t, rss, in_use)

    def run(self):
        t0 = time.monotonic()
        while not self.stop_ev.is_set():
            try:
                rss = status_kib(self.d.pid, "VmRSS")
                m = self.d.metrics()
                self.samples.append((round(time.monotonic() - t0, 2), rss,
                                     int(m.get("miradb_memory_in_use_bytes", 0))))
            except (OSError, RuntimeError):
                pass
            self.stop_ev.wait(0.1)


def one(build, client, budget, conns, secs, payload, lua, extra):
    data = bl.fresh_data("rss")
    d = bl.Daemon(bl.miradb_bin(build), data, ["--memory-budget", budget] + extra,
                  name="rss").start()
    try:
        s = Sampler(d)
        s.start()
        if client in ("grpc", "http/protobuf"):
            r = peer.run_load(build, d.port(client), client, "logs", conns, secs, False)
        else:
            r = peer.run_wrk(d.http_port, "logs", conns, secs, payload, lua)
        s.stop_ev.set()
        s.join()
        r["peak_rss_bytes"] = status_kib(d.pid, "VmHWM")
        m = d.metrics()
        r["metrics"] = {k: v for k, v in m.items() if k.startswith((
            "miradb_admission", "miradb_ack_", "miradb_memory", "miradb_wal_append",
            "miradb_block_fsync", "miradb_ingest_cache", "miradb_block_table",
            "miradb_seal"))}
        smp = s.samples
        r["peak_in_use_bytes"] = max((x[2] for x in smp), default=0)
        r["max_unaccounted_bytes"] = max((x[1] - x[2] for x in smp), default=0)
        r["samples"] = smp[::10]  # (s, RSS, in_use) about once a second
    finally:
        d.stop()
        bl.remove_data(data)
    return r


def main():
    build = bl.build_dir(sys.argv)
    budgets = os.environ.get("RSS_BUDGETS", "256MiB 128MiB").split()
    conns = [int(c) for c in os.environ.get("RSS_CONNS", "1 4").split()]
    secs = int(os.environ.get("RSS_SECONDS", "5" if bl.QUICK else "10"))
    extra = os.environ.get("RSS_ARGS", "").split()
    clients = os.environ.get("RSS_CLIENTS", "wrk grpc").split()
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
        for b, c, cl in [(b, c, cl) for b in budgets for c in conns for cl in clients]:
            if True:
                r = one(build, cl, b, c, secs, payload, lua, extra)
                limit = parse_bytes(b)
                refused = r["errors_total"]
                ok = r["peak_rss_bytes"] <= limit and refused == 0
                failed += not ok
                bl.log("rss: %s budget %s c%d: peak RSS %.1f MiB (%s), peak in_use %.1f MiB, "
                       "max RSS-in_use %.1f MiB, p50/p99 %.2f/%.2f ms, %d requests, %d refused"
                       % (cl, b, c, r["peak_rss_bytes"] / 2**20, "PASS" if ok else "FAIL",
                          r["peak_in_use_bytes"] / 2**20, r["max_unaccounted_bytes"] / 2**20,
                          r["ack_p50_ms"], r["ack_p99_ms"], r["ack_samples"], refused))
                r.update({"client": cl, "budget": b, "connections": c, "pass": ok})
                points.append(r)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    bl.emit({"case": "rss", "machine": bl.machine(), "seconds": secs, "points": points})
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
