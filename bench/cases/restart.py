"""restart case: rows before and after a restart with a full WAL, replay
speed, and what replay adds to boot.

1. A daemon with a large budget and block target and --block-max-age 1h (so
   nothing seals: every acknowledged row lives only in the WAL and the open
   blocks) takes a bounded load of logs, traces and metrics over gRPC.
2. SIGTERM, restart: every row must come back from the WAL (rows per signal,
   open + sealed, from /metrics, against the rows before and the records
   otlp-load saw acknowledged). Then SIGKILL, restart: the same again.
3. Boot price, as BENCH.md says: a daemon that only replays and answers
   /ready, timed from fork to the first 200 from /ready, against the same on
   an empty store, alternating empty and full, K pairs; medians. Replay
   frames/s and MB/s are the replayed frames and bytes over the median
   difference. The WAL was just written, so it is read from the page cache
   (a warm-cache replay: decode and append, not disk reads).

    python3 bench/cases/restart.py BUILD_DIR
Full: 300 logs, 150 traces, 300 metrics requests of 1,000 records (~240 MB
of WAL), 5 pairs. BENCH_QUICK=1: a fifth of that, 3 pairs. RESTART_GZIP=1:
the requests gzip'd (grpc-encoding gzip), so the WAL holds them as they
arrived and replay inflates each frame.
"""

import os
import sys

import benchlib as bl

GZIP = os.environ.get("RESTART_GZIP", "") not in ("", "0")

ARGS = ["--memory-budget", "4GiB", "--block-target", "1GiB", "--block-max-age", "1h"]


def all_rows(m):
    return {s: bl.rows(m, s) for s in bl.SIGNALS}


def sealed_rows(m):
    return sum(int(m.get('miradb_block_rows{signal="%s"}' % s, 0)) for s in bl.SIGNALS)


def diff(before, after):
    return {"losses": {s: max(0, before[s] - after[s]) for s in bl.SIGNALS},
            "duplicates": {s: max(0, after[s] - before[s]) for s in bl.SIGNALS}}


def main():
    build = bl.build_dir(sys.argv)
    binary = bl.miradb_bin(build)
    scale = 5 if bl.QUICK else 1
    reqs = {"logs": 300 // scale, "traces": 150 // scale, "metrics": 300 // scale}
    pairs = 3 if bl.QUICK else 5
    out = {"case": "restart", "quick": bl.QUICK, "gzip": GZIP, "daemon_args": " ".join(ARGS),
           "requests": reqs, "records_per_request": 1000, "protocol": "grpc", "ack": "wal"}
    data = bl.fresh_data("restart")

    # 1. Fill the WAL.
    d = bl.Daemon(binary, data, ARGS, name="restart").start()
    acked = {}
    failed = 0
    for s in bl.SIGNALS:
        rep = bl.load(build, d.grpc_port, s, connections=4, requests=reqs[s], records=1000,
                      extra=["--gzip"] if GZIP else [])
        acked[s] = rep["records"]["acknowledged"]
        failed += rep["requests"]["failed"] + rep["requests"]["unanswered"]
    m = d.metrics()
    before = all_rows(m)
    out["acked_records"] = acked
    out["requests_failed"] = failed
    out["rows_before"] = before
    out["sealed_rows_before"] = sealed_rows(m)
    out["wal_frames_written"] = int(bl.metric_sum(m, "miradb_wal_frames_total"))
    out["wal_bytes_written"] = int(bl.metric_sum(m, "miradb_wal_bytes_total"))
    out["exit_term"] = d.stop()
    out["wal_bytes_on_disk"] = bl.du_bytes(data + "/wal")

    # 2. Restart after SIGTERM, then after SIGKILL.
    d = bl.Daemon(binary, data, ARGS, name="restart").start()
    m = d.metrics()
    after_term = all_rows(m)
    out["rows_after_term_restart"] = after_term
    out["after_term_restart"] = diff(before, after_term)
    d.kill()
    d = bl.Daemon(binary, data, ARGS, name="restart").start()
    after_kill = all_rows(bl.settle(d, "logs", before["logs"], deadline=30)[2])
    out["rows_after_kill_restart"] = after_kill
    out["after_kill_restart"] = diff(before, after_kill)
    out["exit_after_kill_restart"] = d.stop()

    # 3. Boot price: alternate empty and full stores.
    empty_s, full_s = [], []
    frames = bytes_ = 0
    for _ in range(pairs):
        e = bl.fresh_data("restart-empty")
        de = bl.Daemon(binary, e, ARGS, name="restart-empty").start()
        empty_s.append(de.boot_s)
        de.stop()
        bl.remove_data(e)
        df = bl.Daemon(binary, data, ARGS, name="restart").start()
        full_s.append(df.boot_s)
        m = df.metrics()
        frames = int(bl.metric_sum(m, "miradb_wal_replayed_frames_total"))
        bytes_ = int(bl.metric_sum(m, "miradb_wal_replayed_bytes_total"))
        if all_rows(m) != before:
            out.setdefault("boot_rows_mismatch", []).append(all_rows(m))
        df.stop()
    me, mf = bl.median(empty_s), bl.median(full_s)
    replay = mf - me
    out["boot"] = {
        "pairs": pairs,
        "measured": "fork to first 200 from /ready, polled every 2 ms",
        "empty_store_s": [round(x, 4) for x in empty_s],
        "full_store_s": [round(x, 4) for x in full_s],
        "empty_median_s": round(me, 4),
        "full_median_s": round(mf, 4),
        "replay_s": round(replay, 4),
        "page_cache": "warm (the WAL was just written or replayed)",
    }
    out["replayed_frames"] = frames
    out["replayed_bytes"] = bytes_
    out["replay_frames_per_s"] = round(frames / replay) if replay > 0 else None
    out["replay_mb_per_s"] = round(bytes_ / replay / 1e6, 1) if replay > 0 else None
    out["replay_records_per_s"] = round(sum(before.values()) / replay) if replay > 0 else None
    losses = sum(out["after_term_restart"]["losses"].values()) + \
        sum(out["after_kill_restart"]["losses"].values())
    dups = sum(out["after_term_restart"]["duplicates"].values()) + \
        sum(out["after_kill_restart"]["duplicates"].values())
    out["losses"] = losses
    out["duplicates"] = dups
    out["acked_equals_rows_before"] = acked == before
    out["machine"] = bl.machine()
    bl.emit(out)
    bl.remove_data(data)
    ok = (losses == 0 and dups == 0 and acked == before and failed == 0
          and "boot_rows_mismatch" not in out and out["sealed_rows_before"] == 0)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
