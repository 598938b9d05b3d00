"""tail: where the ack tail comes from, A against B (issue 13).

    python3 bench/cases/tail.py A_BINARY [B_BINARY ...]

For every pass, every connection count and every binary (the binaries' order alternating pass
by pass), a fresh daemon (defaults, TAIL_ACK: --ack wal unless set; fresh data directory on a
real disk) takes wrk's HTTP/1.1 keep-alive POSTs of the peer case's 1,000-record log request
for TAIL_SECONDS. Printed per run: records/s, records per CPU-second (the CPU of the drain after
the run counted too, as in the peer case), wrk's p50/p99, and from
the daemon's own /metrics histograms the p99 (bucket upper bound) of each ack phase (admit,
body, decode, shard, reply, total), of the WAL append and of the block fsync, the share of
acks over 5 and 10 ms, the admission waits, and the largest number of unsealed blocks and of
memory in use seen while it ran (sampled every 500 ms). Then the medians per binary and
connection count.

Environment: TAIL_CONNS (default "1,4"), TAIL_PASSES (3), TAIL_SECONDS (10), TAIL_ACK (wal),
TAIL_ARGS (more daemon arguments, split on spaces), TAIL_CLIENT (wrk, or grpc: build/otlp-load
over gRPC, TAIL_BUILD naming the build directory, default build; its latencies in the wrk_
columns), PEER_PAYLOAD (as the peer case).
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import benchlib as bl
import peer

PHASES = ("admit", "body", "decode", "shard", "reply", "total")


def hist(m, name, label=""):
    """[(upper bound s, cumulative count)] of one histogram in a /metrics dict."""
    out = []
    pre = name + "_bucket{" + (label + "," if label else "") + 'le="'
    for k, v in m.items():
        if k.startswith(pre):
            le = k[len(pre):-2]
            out.append((float("inf") if le == "+Inf" else float(le), v))
    out.sort()
    return out


def quantile(h, q):
    if not h or h[-1][1] == 0:
        return None
    want = q * h[-1][1]
    for le, c in h:
        if c >= want:
            return le * 1000.0
    return None


def over(h, ms):
    """Share of the samples above |ms| (needs a bucket bound at |ms|)."""
    if not h or h[-1][1] == 0:
        return None
    for le, c in h:
        if abs(le * 1000.0 - ms) < 1e-6:
            return 1.0 - c / h[-1][1]
    return None


class Sampler(threading.Thread):
    def __init__(self, d):
        super().__init__(daemon=True)
        self.d = d
        self.stop_ = False
        self.max_unsealed = 0
        self.max_in_use = 0

    def run(self):
        while not self.stop_:
            try:
                m = self.d.metrics()
                u = sum(v for k, v in m.items() if k.startswith("miradb_unsealed_blocks"))
                self.max_unsealed = max(self.max_unsealed, u)
                self.max_in_use = max(self.max_in_use, m.get("miradb_memory_in_use_bytes", 0))
            except (RuntimeError, OSError):
                pass
            time.sleep(0.5)


def one(binary, conns, secs, ack, args, payload, lua, client):
    os.sync()  # the run before's WAL, dirty in the page cache, written back first (peer.py)
    data = bl.fresh_data("tail")
    d = bl.Daemon(binary, data, ["--ack", ack] + args, name="tail").start()
    try:
        s = Sampler(d)
        s.start()
        cpu0 = bl.proc_cpu_s(d.proc.pid)
        if client == "wrk":
            r = peer.run_wrk(d.http_port, "logs", conns, secs, payload, lua)
        else:  # otlp-load over gRPC, its own generator's 1,000-record requests
            r = peer.run_load(bl.build_dir(["", os.environ.get("TAIL_BUILD", "build")]),
                              d.grpc_port, "grpc", "logs", conns, secs, False)
        cpu = bl.proc_cpu_s(d.proc.pid) - cpu0
        s.stop_ = True
        s.join()
        cpu += peer.drain(d.proc.pid)  # the seal work the run left behind is the records' too
        m = d.metrics()
    finally:
        d.stop()
        bl.remove_data(data)
    out = {"records_per_s": r["records_acked"] / r["elapsed_s"],
           "records_per_cpu_s": r["records_acked"] / cpu if cpu > 0 else None,
           "wrk_p50": r["ack_p50_ms"], "wrk_p99": r["ack_p99_ms"], "wrk_max": r["ack_max_ms"],
           "errors": r["errors_total"],
           "refused": sum(v for k, v in m.items()
                          if k.startswith("miradb_otlp_request_errors_total")),
           "admit_waits": m.get("miradb_admission_waits_total", 0),
           "max_unsealed": s.max_unsealed, "max_in_use_mib": s.max_in_use / 2**20}
    for p in PHASES:
        h = hist(m, "miradb_ack_phase_seconds", 'phase="%s"' % p)
        out[p + "_p99"] = quantile(h, 0.99)
        if p == "total":
            out["total_p50"] = quantile(h, 0.5)
            out["over5"] = over(h, 5)
            out["over10"] = over(h, 10)
    out["wal_p99"] = quantile(hist(m, "miradb_wal_append_seconds"), 0.99)
    out["wal_p999"] = quantile(hist(m, "miradb_wal_append_seconds"), 0.999)
    out["fsync_p50"] = quantile(hist(m, "miradb_block_fsync_seconds"), 0.5)
    return out


def fmt(r):
    def f(v, spec="%.1f"):
        return "-" if v is None else spec % v
    return ("rec/s %s k, rec/CPU-s %s k, wrk p50/p99 %s/%s ms, p99 admit %s body %s decode %s "
            "shard %s reply %s total %s (p50 %s), >5ms %s >10ms %s, wal p99/p99.9 %s/%s, "
            "fsync p50 %s, waits %d, refused %d, unsealed<=%d, in_use<=%s MiB" % (
                f(r["records_per_s"] / 1e3, "%.0f"), f(r["records_per_cpu_s"] and
                                                       r["records_per_cpu_s"] / 1e3, "%.0f"),
                f(r["wrk_p50"]), f(r["wrk_p99"]), f(r["admit_p99"], "%g"), f(r["body_p99"], "%g"),
                f(r["decode_p99"], "%g"), f(r["shard_p99"], "%g"), f(r["reply_p99"], "%g"),
                f(r["total_p99"], "%g"), f(r["total_p50"], "%g"), f(r["over5"], "%.3f"),
                f(r["over10"], "%.3f"), f(r["wal_p99"], "%g"), f(r["wal_p999"], "%g"),
                f(r["fsync_p50"], "%g"), r["admit_waits"], r["refused"], r["max_unsealed"],
                f(r["max_in_use_mib"], "%.0f")))


def main():
    bins = sys.argv[1:]
    if not bins:
        print(__doc__)
        return 2
    conns = [int(c) for c in os.environ.get("TAIL_CONNS", "1,4").split(",")]
    passes = int(os.environ.get("TAIL_PASSES", "3"))
    secs = int(os.environ.get("TAIL_SECONDS", "10"))
    ack = os.environ.get("TAIL_ACK", "wal")
    args = os.environ.get("TAIL_ARGS", "").split()
    client = os.environ.get("TAIL_CLIENT", "wrk")
    payload = peer.payload_path()
    workdir = tempfile.mkdtemp(prefix="miradb-tail-")
    lua = os.path.join(workdir, "post.lua")
    with open(lua, "w") as f:
        f.write(peer.WRK_LUA)
    runs = {}
    try:
        for p in range(passes):
            for c in conns:
                order = bins if p % 2 == 0 else bins[::-1]
                for b in order:
                    r = one(b, c, secs, ack, args, payload, lua, client)
                    runs.setdefault((b, c), []).append(r)
                    print("pass %d c%d %s: %s" % (p + 1, c, b, fmt(r)), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for c in conns:
        for b in bins:
            rs = runs[(b, c)]
            med = {k: bl.median([r[k] for r in rs if r[k] is not None] or [0]) for k in rs[0]}
            print("median c%d %s: %s" % (c, b, fmt(med)), flush=True)
    print(json.dumps({"runs": {"%s c%d" % k: v for k, v in runs.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
