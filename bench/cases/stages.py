"""stages case: where one acknowledged log record's CPU goes in the daemon, stage by stage (issue 13).

The same loads as the peer case's MiraDB arms (wrk over HTTP/1.1 protobuf, the same request gzip'd
and zstd'd, h2load over gRPC; one fixed 1,000-record ExportLogsServiceRequest, PEER_PAYLOAD, default
../shared/peers/fluent-bit/logs-1000.pb), each point run twice on a fresh daemon with its defaults
(--ack wal):

  1. without a profiler: the daemon's CPU seconds from /proc over the load and its drain (until the
     sealer idles), over the records acknowledged: CPU ns a record;
  2. under `perf record --call-graph dwarf` (STAGES_HZ samples a second, default 499): each sample
     put in one stage by its thread and call chain (classify()), the stage's share of the samples.

A stage's cost a record = (1)'s CPU ns a record x (2)'s share. The stages:
  read    socket reads, HTTP/1.1 parsing, HTTP/2 framing, the body gathered from the frames
  gunzip  libdeflate inflating a gzip body, libzstd decoding a zstd one
  decode  protobuf / JSON decode into the batch
  WAL     the write-ahead log: frame, CRC, the write into the page cache (and fsync with --ack fsync)
  append  the batch into the shard's open block (and the shard's queue)
  reply   responses written to the socket
  seal    the sealer: sort, columns, dictionaries, attribute tables, zstd, the block file's writes
  bloom   the sealer's filters: body tokens and grams, trace ids, attribute hashes
  other   the event loops' waits, timers, the scheduler, other threads

Run under perf the daemon is a few per cent slower, which the shares do not depend on; (1) is the
figure to quote for CPU a record. Without perf (or with perf unable to sample: perf_event_paranoid),
the case says so and reports (1) only.

Environment: STAGES_SECONDS (per point, default 8; 3 with BENCH_QUICK=1), STAGES_CONNS (default 4),
STAGES_POINTS (comma list of wrk, wrk-gzip, wrk-zstd, h2load; default all four), STAGES_HZ (0: no
profiled run), PEER_PAYLOAD.

    python3 bench/cases/stages.py BUILD_DIR
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

import benchlib as bl
import peer

STAGES = ("read", "gunzip", "decode", "WAL", "append", "reply", "seal", "bloom", "other")

# Symbols that name a stage wherever they stand in an I/O thread's chain, tried in this order
# (the first stage with a symbol in the chain wins): a WAL write under the shard's drain is the
# WAL's, not the append's; a decode under the body's assembly is the decode's.
IO_RULES = (
    ("gunzip", ("libdeflate_gzip_decompress", "libdeflate_gzip_decompress_ex",
                "libdeflate_deflate_decompress", "libdeflate_deflate_decompress_ex",
                "decomp_all", "ZSTD_decompressDCtx", "ZSTD_decompressStream")),
    ("WAL", ("wal_append", "wal_append_coded", "wal_sync")),
    ("decode", ("pbdec_decode", "jsondec_decode")),
    ("append", ("oblock_append", "drain", "shard_submit_take", "shard_submit")),
    ("reply", ("out_write", "conn_flush", "writev", "sendmsg", "nghttp2_session_send",
               "evbuffer_write_atmost", "evbuffer_write", "tcp_sendmsg", "sock_write_iter")),
    ("read", ("read", "__libc_read", "recv", "recvmsg", "conn_on_read", "sock_read_iter",
              "tcp_recvmsg", "nghttp2_session_mem_recv", "http_parser_execute",
              "ingest_body_append")),
)
SEAL_BLOOM = ("bloom_", "grams_", "body_index")


def classify(comm, chain):
    """The stage of one sample: |comm| its thread's name, |chain| its frames' symbols, leaf first."""
    if comm == "sealer":
        for s in chain:
            if s.startswith(SEAL_BLOOM):
                return "bloom"
        return "seal"
    if comm.startswith("wal"):
        return "WAL"
    if comm.startswith("io-") or comm.startswith("shard-"):
        syms = set(chain)
        for stage, names in IO_RULES:
            if not syms.isdisjoint(names):
                return stage
    return "other"


def parse_script(text):
    """Counts of samples by stage from `perf script -F comm,ip,sym` output."""
    counts = dict.fromkeys(STAGES, 0)
    comm, chain = None, []
    for ln in text.splitlines() + [""]:
        if not ln.strip():
            if comm is not None:
                counts[classify(comm, chain)] += 1
            comm, chain = None, []
        elif ln[0] in " \t" and comm is not None:
            f = ln.split(None, 1)
            sym = f[1].strip() if len(f) > 1 else ""
            chain.append(sym.split("+", 1)[0])
        else:
            comm, chain = ln.strip(), []
    return counts


def perf_ok():
    if shutil.which("perf") is None:
        return "no perf (apt-get install linux-perf)"
    p = subprocess.run(["perf", "record", "-o", "/dev/null", "-q", "--", "true"],
                       capture_output=True, text=True)
    return None if p.returncode == 0 else "perf record fails: " + (p.stderr.strip()[-200:])


def load(arm, port, conns, secs, payload, lua, workdir):
    if arm == "h2load":
        return peer.run_h2load(port, conns, secs, payload, workdir)
    return peer.run_wrk(port, "logs", conns, secs, payload, lua)


def one(build, arm, conns, secs, payload, lua, workdir, hz):
    """One run of |arm| on a fresh daemon; with |hz| the daemon is sampled by perf."""
    os.sync()  # as the peer case: no writeback of an earlier run in this one
    data = bl.fresh_data("stages")
    srv = bl.Daemon(bl.miradb_bin(build), data, ["--ack", "wal"], name="stages").start()
    prof, pdata = None, os.path.join(workdir, "perf.data")
    try:
        port = srv.port("grpc" if arm == "h2load" else "http/protobuf")
        if hz:
            prof = subprocess.Popen(["perf", "record", "-q", "-F", str(hz), "--call-graph",
                                     "dwarf,16384", "-p", str(srv.pid), "-o", pdata],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                    preexec_fn=bl._pdeathsig)
            time.sleep(0.5)  # perf attached before the first request
        cpu0 = bl.proc_cpu_s(srv.pid)
        r = load(arm, port, conns, secs, payload, lua, workdir)
        r["drain_cpu_s"] = peer.drain(srv.pid)
        cpu = bl.proc_cpu_s(srv.pid) - cpu0
        acked = bl.acked_records(srv.metrics(), "logs")
    finally:
        if prof is not None:
            prof.send_signal(2)  # SIGINT: perf writes its file and exits
            try:
                prof.wait(timeout=60)
            except subprocess.TimeoutExpired:
                prof.kill()
        srv.stop()
        bl.remove_data(data)
    out = {"records_acked": r["records_acked"], "server_acked_records": acked,
           "errors_total": r["errors_total"], "server_cpu_s": round(cpu, 3),
           "cpu_ns_per_record": round(cpu * 1e9 / r["records_acked"], 1)
           if r["records_acked"] else None,
           "ack_p50_ms": r["ack_p50_ms"], "ack_p99_ms": r["ack_p99_ms"]}
    if hz:
        p = subprocess.run(["perf", "script", "-i", pdata, "--no-inline", "-F", "comm,ip,sym"],
                           capture_output=True, text=True, timeout=600)
        counts = parse_script(p.stdout)
        out["samples"] = counts
        os.unlink(pdata)
    return out


def main():
    build = bl.build_dir(sys.argv)
    secs = int(os.environ.get("STAGES_SECONDS", "3" if bl.QUICK else "8"))
    conns = int(os.environ.get("STAGES_CONNS", "4"))
    hz = int(os.environ.get("STAGES_HZ", "499"))
    arms = [a.strip() for a in os.environ.get("STAGES_POINTS", "wrk,wrk-gzip,wrk-zstd,h2load").split(",")]
    payload = peer.payload_path()
    if payload is None:
        bl.log("stages: no payload file (PEER_PAYLOAD or ../shared/peers/fluent-bit/logs-1000.pb)")
        bl.emit({"case": "stages", "skipped": "no payload file"})
        return 0
    why = perf_ok()
    if why:
        bl.log("stages: %s: CPU a record only, no stages" % why)
    workdir = tempfile.mkdtemp(prefix="miradb-stages-")
    wrk_in = peer.wrk_inputs(workdir, payload)
    points = []
    try:
        for arm in arms:
            client = "h2load" if arm == "h2load" else "wrk"
            if arm not in ("wrk", "wrk-gzip", "wrk-zstd", "h2load"):
                raise SystemExit("STAGES_POINTS: unknown point %r" % arm)
            if shutil.which(client) is None:
                bl.log("stages: %s skipped: no %s" % (arm, client))
                continue
            proto = "http/protobuf" + (arm[3:].replace("-", "+") if arm != "h2load" else "")
            pl, lu = wrk_in[proto]
            bl.log("stages: %s c%d, %d s, no profiler" % (arm, conns, secs))
            plain = one(build, arm, conns, secs, pl, lu, workdir, 0)
            row = {"arm": arm, "connections": conns, "run": plain}
            if not why and hz > 0:
                bl.log("stages: %s c%d, %d s, perf at %d Hz" % (arm, conns, secs, hz))
                prof = one(build, arm, conns, secs, pl, lu, workdir, hz)
                total = sum(prof["samples"].values())
                ns = plain["cpu_ns_per_record"]
                row["profiled_run"] = prof
                row["stages"] = {s: {"share": round(prof["samples"][s] / total, 4),
                                     "cpu_ns_per_record": round(ns * prof["samples"][s] / total, 1)}
                                 for s in STAGES} if total and ns else None
                if row["stages"]:
                    bl.log("stages: %s: %s ns a record: %s" % (
                        arm, ns, ", ".join("%s %.0f" % (s, v["cpu_ns_per_record"])
                                           for s, v in row["stages"].items())))
            points.append(row)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    bl.emit({"case": "stages", "machine": bl.machine(), "seconds": secs, "payload": payload,
             "perf": why or "ok", "points": points})
    return 0


if __name__ == "__main__":
    sys.exit(main())
