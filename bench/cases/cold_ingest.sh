#!/bin/sh
# cold_ingest.sh - what compaction costs ingest (issue 12): gRPC log ingest
# (otlp-load, 8 connections, 1,000 records a request, 8 s, closed loop) into
# a daemon booted on a hard-linked copy of bench/ab's hot query corpus
# (200k logs + 200k spans dated 2026-01-01, made by `bench/ab --cold-b ...`),
# with --compact-after 0 (off) or 1s (on: the corpus, and the blocks the
# load seals, are compacted while the load runs), the arms alternating,
# TRIALS trials each (default 3). Per trial: acknowledged records/s, server
# CPU seconds, refused requests, and what does not depend on the machine's
# load: the daemon's admission counters (memory refusals, waits and their
# seconds), the highest miradb_memory_in_use_bytes seen (polled every
# 50 ms) and the compactor's (merges, the most one merge held, times it
# stepped back for ingest and merges it gave up). Last, the on/off ratio of
# records/s per trial and its median. EXTRA adds daemon flags to both arms
# (e.g. EXTRA="--memory-budget 1GiB").
#
#   sh bench/cases/cold_ingest.sh [BUILD_DIR]
set -e
cd "$(dirname "$0")/../.."
B=${1:-build}
[ -d bench/data/ab/corpus/logs ] || { echo "cold_ingest: run bench/ab --cold-b first" >&2; exit 1; }
TRIALS=${TRIALS:-3}
OUT=bench/data/cold_ingest.out
: >$OUT
for t in $(seq 1 "$TRIALS"); do
    for arm in off on; do
        if [ $((t % 2)) -eq 0 ]; then [ $arm = off ] && arm=on || arm=off; fi
        D=bench/data/ingest-$arm
        rm -rf $D
        cp -al bench/data/ab/corpus $D
        CA=0
        [ $arm = on ] && CA=1s
        P=$(python3 -c 'import sys; sys.path.insert(0, "bench/cases"); import benchlib; print(benchlib.free_port())')
        H=$(python3 -c 'import sys; sys.path.insert(0, "bench/cases"); import benchlib; print(benchlib.free_port())')
        # shellcheck disable=SC2086
        $B/miradb serve --data $D --grpc-listen 127.0.0.1:$P --http-listen 127.0.0.1:$H \
            --compact-after $CA $EXTRA 2>bench/data/ingest-$arm.log &
        PID=$!
        for i in $(seq 1 200); do
            curl -sf http://127.0.0.1:$H/ready >/dev/null 2>&1 && break
            sleep 0.1
        done
        curl -sf http://127.0.0.1:$H/ready >/dev/null 2>&1 ||
            { echo "cold_ingest: the daemon did not become ready (bench/data/ingest-$arm.log)" >&2; exit 1; }
        # the highest memory_in_use while the load runs (bounded: 12 s)
        (for i in $(seq 1 240); do
            curl -s http://127.0.0.1:$H/metrics 2>/dev/null |
                awk '/^miradb_memory_in_use_bytes/ {print $2}'
            sleep 0.05
        done) >bench/data/ingest-$arm.poll &
        POLL=$!
        R=$($B/otlp-load --endpoint 127.0.0.1:$P --signal logs --connections 8 --duration 8 \
            --records-per-request 1000 --server-pid $PID)
        kill $POLL 2>/dev/null || true
        wait $POLL 2>/dev/null || true
        M=$(curl -s http://127.0.0.1:$H/metrics)
        kill $PID
        wait $PID || true
        PEAK=$(sort -n bench/data/ingest-$arm.poll | tail -1)
        LINE="trial $t arm $arm load $(cut -d' ' -f1 /proc/loadavg) $(echo "$R" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("acked_records_per_s %.0f server_cpu_s %.2f refused_requests %d" % (d["records_per_s"], d["server"]["cpu_s"], d["requests"]["failed"]))')"
        LINE="$LINE $(echo "$M" | awk -v peak="${PEAK:-0}" '
            /^miradb_admission_memory_refusals_total / {r = $2}
            /^miradb_admission_waits_total / {w = $2}
            /^miradb_admission_wait_seconds_total / {ws = $2}
            /^miradb_compactions_total / {c = $2}
            /^miradb_compaction_peak_bytes / {cp = $2}
            /^miradb_compaction_deferrals_total / {d = $2}
            /^miradb_compaction_yields_total / {y = $2}
            END {printf "memory_refusals %d admission_waits %d wait_s %.1f peak_in_use_mib %.0f compactions %d merge_peak_mib %.1f deferrals %d yields %d",
                 r, w, ws, peak / 1048576, c, cp / 1048576, d, y}')"
        echo "$LINE"
        echo "$LINE" >>$OUT
        rm -rf $D bench/data/ingest-$arm.poll
    done
done
python3 - $OUT <<'EOF'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    f = line.split()
    by.setdefault(int(f[1]), {})[f[3]] = float(f[7])
r = [v["on"] / v["off"] for t, v in sorted(by.items()) if "on" in v and "off" in v and v["off"] > 0]
print("on/off records/s per trial: %s; median %.2f (issue 12: at least 0.90)" %
      (", ".join("%.2f" % x for x in r), statistics.median(r) if r else float("nan")))
EOF
