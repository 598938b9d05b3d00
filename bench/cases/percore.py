"""percore case: wraps build/percore (decode and append per signal on one
thread, append and seal cost per record, WAL append of a 4 KiB body) and
sets the issue's per-core targets beside the measured figures.

    python3 bench/cases/percore.py BUILD_DIR
"""

import os
import sys

import benchlib as bl

# Issue 5: decode + append per core (protobuf, one thread).
TARGETS = {"logs": 2e6, "traces": 2e6, "metrics": 5e6}


def main():
    build = bl.build_dir(sys.argv)
    wal = bl.fresh_data("percore-wal")
    blk = bl.fresh_data("percore-blk")
    if bl.QUICK:
        args = ["--seconds", "0.5", "--formats", "protobuf", "--seal-blocks", "1"]
    else:
        args = ["--seconds", "2", "--formats", "all", "--seal-blocks", "3"]
    argv = [os.path.join(build, "percore"), "--wal-dir", wal, "--blk-dir", blk] + args
    rc, j, err = bl.run_json(argv, timeout=600)
    if j is None or rc != 0:
        bl.emit({"case": "percore", "error": "percore failed (status %s): %s"
                 % (rc, err.strip()[-400:])})
        return 1
    j["command"] = " ".join(["build/percore"] + args)
    targets = []
    for s, want in TARGETS.items():
        got = j["%s_protobuf" % s]["decode_append_records_per_cpu_s"]
        targets.append({"target": "decode + append per core, %s >= %.0fM records/s"
                        % (s, want / 1e6), "measured_per_cpu_s": got, "met": got >= want})
    j["targets"] = targets
    j["machine"] = bl.machine()
    bl.emit(j)
    return 0


if __name__ == "__main__":
    sys.exit(main())
