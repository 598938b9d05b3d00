"""peer_point: one point of the peer case, MiraDB only, two builds alternating (issue 13).

    python3 -B bench/cases/peer_point.py BUILD_A BUILD_B [ARM PROTO SIGNAL CONNS]

The point defaults to peer.py's "load grpc logs c4" (build/otlp-load, 1,000-record requests
from its generator pool, 4 gRPC connections), MiraDB with --ack wal on a fresh data directory
per run, measured exactly as peer.py's one() measures it (server CPU from /proc over the run,
then the drain). PEER_PASSES passes (default 4), PEER_SECONDS per run (default 8); the order
flips pass by pass (A B, B A, ...). Prints each run and, per build, the median records per
CPU-second with and without the drain, and the per-pass B/A ratios. Fluent Bit is not run: its
figure does not depend on MiraDB's build (peer.py gives it).
"""

import os
import sys
import tempfile

import benchlib as bl
import peer


def main():
    if len(sys.argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    builds = {"A": sys.argv[1], "B": sys.argv[2]}
    pt = ("load", "grpc", "logs", 4)
    if len(sys.argv) >= 7:
        pt = (sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6]))
    passes = int(os.environ.get("PEER_PASSES", "4"))
    secs = int(os.environ.get("PEER_SECONDS", "8"))
    workdir = tempfile.mkdtemp(prefix="miradb-peerpt-")
    # The wrk and h2load arms post peer.py's payload file (wrk through its script).
    payload = peer.payload_path() if pt[0] in ("wrk", "h2load") else None
    lua = None
    if pt[0] == "wrk":
        lua = os.path.join(workdir, "post.lua")
        with open(lua, "w") as f:
            f.write(peer.WRK_LUA)
    runs = {"A": [], "B": []}
    for p in range(passes):
        for arm in ("A", "B") if p % 2 == 0 else ("B", "A"):
            r = peer.one(builds[arm], pt, "wal", "miradb", secs, payload, lua, None, workdir)
            runs[arm].append(r)
            bl.log("peer_point: pass %d %s %s: %s rec/s, %s rec/CPU-s (%s drained), errors %s, "
                   "acked_match %s" % (p + 1, arm, builds[arm], r["records_per_s"],
                                       r["records_per_cpu_s"], r["records_per_cpu_s_drained"],
                                       r["errors_total"], r["acked_match"]))
    out = {"case": "peer_point", "point": list(pt), "passes": passes, "seconds": secs,
           "machine": bl.machine(), "builds": builds}
    for k in ("records_per_cpu_s", "records_per_cpu_s_drained", "records_per_s", "cores_busy"):
        a = [r[k] for r in runs["A"]]
        b = [r[k] for r in runs["B"]]
        out[k] = {"A": bl.median(a), "B": bl.median(b),
                  "B_over_A_per_pass": [round(y / x, 3) for x, y in zip(a, b) if x and y]}
    out["errors"] = {arm: sum(r["errors_total"] for r in rs) for arm, rs in runs.items()}
    out["acked_match_all"] = all(r["acked_match"] for rs in runs.values() for r in rs)
    bl.emit(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
