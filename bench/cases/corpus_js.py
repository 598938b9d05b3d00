#!/usr/bin/env python3
"""Bytes per record on a second corpus (issue 12, "Measure"): what the official OpenTelemetry JS
SDK exporters send (tests/interop/send.mjs: log bodies of every AnyValue kind, attributes of every
kind, span trees with events and links, every metric instrument kind), not our generator's.

One daemon (one shard per signal, blocks sealed only when asked) takes the JS exporters' output
over HTTP/protobuf, uncompressed: COUNT log records and COUNT spans in one run, and COLLECTIONS
metric collections of the same series (one send.mjs run each, as a periodic reader would send
them). The WAL then holds every request body as it arrived (storage/wal.c's frame format), which
gives the raw protobuf bytes and their `zstd -3` size. The daemon is restarted with a 1 s block
age to seal (hot bytes), then with --compact-after 1s (cold bytes). Prints one JSON line with,
per signal: records, raw B/record, zstd -3 B/record, hot B/record, cold B/record.

    sh bench/cases/corpus_js.sh [BUILD_DIR]      (BENCH_QUICK=1: 20,000 records, 5 collections)
"""
import glob
import os
import shutil
import struct
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

INTEROP = os.path.join(bl.ROOT, "tests", "interop")
SIG_NAME = {1: "logs", 2: "traces", 3: "metrics"}
WAL_HDR = 20


def send(port, count, deadline_s):
    argv = ["node", os.path.join(INTEROP, "send.mjs"), "--protocol", "http/protobuf",
            "--endpoint", "http://127.0.0.1:%d" % port, "--count", str(count),
            "--deadline-ms", str(deadline_s * 1000), "--timeout-ms", "30000"]
    r = subprocess.run(argv, cwd=INTEROP, capture_output=True, text=True,
                       timeout=deadline_s + 30)
    if r.returncode != 0:
        raise SystemExit("corpus_js: send.mjs failed (%d): %s %s"
                         % (r.returncode, r.stdout[-500:], r.stderr[-500:]))


def wal_payloads(data):
    """{signal: [payload bytes, ...]} from every WAL segment under |data|, in seq order."""
    out = {s: [] for s in SIG_NAME.values()}
    for seg in sorted(glob.glob(os.path.join(data, "**", "*.wal"), recursive=True)):
        with open(seg, "rb") as f:
            buf = f.read()
        at = 0
        while at + WAL_HDR <= len(buf):
            n, = struct.unpack_from("<I", buf, at)
            sig, fmt = buf[at + 16], buf[at + 17]
            if n == 0 or at + WAL_HDR + n > len(buf) or fmt != 0 or sig not in SIG_NAME:
                raise SystemExit("corpus_js: unexpected frame in %s at %d" % (seg, at))
            out[SIG_NAME[sig]].append(buf[at + WAL_HDR:at + WAL_HDR + n])
            at += WAL_HDR + n
    return out


def zstd3_bytes(chunks):
    r = subprocess.run(["zstd", "-3", "-c", "-q"], input=b"".join(chunks), capture_output=True,
                       timeout=600, check=True)
    return len(r.stdout)


def tier_bytes(m, sig, tier):
    return int(m.get('miradb_tier_block_bytes{signal="%s",tier="%s"}' % (sig, tier), 0))


def wait_for(d, pred, deadline, what):
    t0 = time.monotonic()
    while True:
        m = d.metrics()
        if pred(m):
            return m
        if time.monotonic() - t0 > deadline:
            raise SystemExit("corpus_js: no %s within %d s" % (what, deadline))
        time.sleep(0.2)


def main():
    if shutil.which("node") is None or not os.path.isdir(os.path.join(INTEROP, "node_modules")):
        # As peer.sh does without its peer: said, not a failure of `make bench`.
        why = "node or tests/interop/node_modules missing (make interop installs them)"
        bl.log("corpus_js: %s: skipped" % why)
        bl.emit({"case": "corpus_js", "skipped": why})
        return
    build = bl.build_dir(sys.argv)
    binary = bl.miradb_bin(build)
    count, collections = (20000, 5) if bl.QUICK else (100000, 20)
    data = bl.fresh_data("corpus-js")
    base = ["--shards", "1", "--compact-after", "0"]
    # 1. Ingest with nothing sealed: the WAL keeps every body.
    d = bl.Daemon(binary, data, base + ["--block-max-age", "1h", "--block-target", "256MiB"],
                  name="corpus-js").start()
    send(d.http_port, count, 600)
    for _ in range(collections - 1):
        send(d.http_port, 50, 120)  # metrics again; logs and spans too (50 each, counted)
    m = d.metrics()
    acked = {s: bl.acked_records(m, s) for s in bl.SIGNALS}
    raw = wal_payloads(data)
    d.stop()
    # 2. Seal everything (the WAL replays into open blocks that a 1 s age seals).
    d = bl.Daemon(binary, data, base + ["--block-max-age", "1s"], name="corpus-js").start()
    m = wait_for(d, lambda m: all(int(m.get('miradb_block_rows{signal="%s"}' % s, 0)) == acked[s]
                                  for s in bl.SIGNALS), 300, "seal of every row")
    hot = {s: tier_bytes(m, s, "hot") for s in bl.SIGNALS}
    d.stop()
    # 3. Compact it.
    d = bl.Daemon(binary, data, ["--shards", "1", "--compact-after", "1s"],
                  name="corpus-js").start()
    m = wait_for(d, lambda m: all(tier_bytes(m, s, "hot") == 0 for s in bl.SIGNALS) and
                 all(int(m.get('miradb_block_rows{signal="%s"}' % s, 0)) == acked[s]
                     for s in bl.SIGNALS), 600, "compaction of every hot block")
    cold = {s: tier_bytes(m, s, "cold") for s in bl.SIGNALS}
    d.stop()
    out = {"case": "corpus_js", "quick": bl.QUICK, "machine": bl.machine()}
    for s in bl.SIGNALS:
        n = acked[s]
        rb = sum(len(p) for p in raw[s])
        out[s] = {"records": n, "requests": len(raw[s]), "raw_b_per_record": round(rb / n, 1),
                  "zstd3_b_per_record": round(zstd3_bytes(raw[s]) / n, 1),
                  "hot_b_per_record": round(hot[s] / n, 1),
                  "cold_b_per_record": round(cold[s] / n, 1)}
    bl.emit(out)
    bl.remove_data(data)


if __name__ == "__main__":
    try:
        main()
    except SystemExit as e:
        if e.code not in (None, 0):
            bl.emit({"case": "corpus_js", "error": str(e.code)})
            sys.exit(1)
