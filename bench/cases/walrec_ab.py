#!/usr/bin/env python3
"""walrec_ab - a daemon A/B whose WAL rotates, releases and recycles segments (h-walrec).

    python3 -B bench/cases/walrec_ab.py BIN_A BIN_B

One shard, gRPC, 4 connections, WALREC_REQUESTS (default 1,500) x 1,000-record log requests
per fresh daemon (~11 segments of 64 MiB), until every row is in a block; arms alternating
(AB, BA, ...) for WALREC_PASSES (default 4) passes. Prints per run the daemon's CPU ns per
record, records/s, miradb_wal_disk_bytes and the WAL directory's files.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib as bl  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    arms = {"A": sys.argv[1], "B": sys.argv[2]}
    lb = os.path.join(ROOT, "build")
    n = int(os.environ.get("WALREC_REQUESTS", "1500"))
    for p in range(int(os.environ.get("WALREC_PASSES", "4"))):
        for a in (("A", "B") if p % 2 == 0 else ("B", "A")):
            data = bl.fresh_data("walrec-ab")
            d = bl.Daemon(arms[a], data, ["--shards", "1"], name="walrec-" + a).start()
            try:
                c0 = bl.proc_cpu_s(d.pid)
                rep = bl.load(lb, d.port("grpc"), "logs", protocol="grpc", connections=4,
                              requests=n, records=1000, timeout=60, deadline=600)
                acked = rep["records"]["acknowledged"]
                rows, _, _ = bl.settle(d, "logs", acked, deadline=120)
                c1 = bl.proc_cpu_s(d.pid)
                wd = bl.metric_sum(d.metrics(), "miradb_wal_disk_bytes")
                files = sorted(os.listdir(os.path.join(data, "wal", "logs-0")))
            finally:
                d.stop()
            bl.remove_data(data)
            print("%d %s cpu_ns_per_record %.0f records_per_s %.0f acked %d rows %d "
                  "wal_disk %.0f files %s" % (p, a, (c1 - c0) * 1e9 / max(acked, 1),
                                              rep["records_per_s"], acked, rows, wd,
                                              " ".join(files)), flush=True)


if __name__ == "__main__":
    main()
