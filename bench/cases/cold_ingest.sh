#!/bin/sh
# cold_ingest.sh - what compaction costs ingest (issue 12): gRPC log ingest
# (otlp-load, 8 connections, 1,000 records a request, 8 s, closed loop) into
# a daemon booted on a hard-linked copy of bench/ab's hot query corpus
# (200k logs + 200k spans dated 2026-01-01, made by `bench/ab --cold-b ...`),
# with --compact-after 0 (off) or 1s (on: the corpus is compacted while the
# load runs), the arms alternating, 3 trials each. Prints acknowledged
# records/s, server CPU seconds and refused requests per trial. EXTRA adds
# daemon flags to both arms (e.g. EXTRA="--memory-budget 1GiB").
#
#   sh bench/cases/cold_ingest.sh [BUILD_DIR]
set -e
cd "$(dirname "$0")/../.."
B=${1:-build}
[ -d bench/data/ab/corpus/logs ] || { echo "cold_ingest: run bench/ab --cold-b first" >&2; exit 1; }
for t in 1 2 3; do
    for arm in off on; do
        if [ $((t % 2)) -eq 0 ]; then [ $arm = off ] && arm=on || arm=off; fi
        D=bench/data/ingest-$arm
        rm -rf $D
        cp -al bench/data/ab/corpus $D
        CA=0
        [ $arm = on ] && CA=1s
        P=$((47300 + t * 10))
        [ $arm = on ] && P=$((P + 1))
        # shellcheck disable=SC2086
        $B/miradb serve --data $D --grpc-listen 127.0.0.1:$P --http-listen 127.0.0.1:$((P + 5)) \
            --compact-after $CA $EXTRA 2>bench/data/ingest-$arm.log &
        PID=$!
        for i in $(seq 1 200); do
            curl -sf http://127.0.0.1:$((P + 5))/ready >/dev/null 2>&1 && break
            sleep 0.1
        done
        R=$($B/otlp-load --endpoint 127.0.0.1:$P --signal logs --connections 8 --duration 8 \
            --records-per-request 1000 --server-pid $PID)
        C=$(curl -s http://127.0.0.1:$((P + 5))/metrics | awk '/^miradb_compactions_total/ {print $2}')
        kill $PID
        wait $PID || true
        echo "trial $t arm $arm compactions=$C $(echo "$R" | python3 -c 'import json,sys; d=json.load(sys.stdin); print("acked_records_per_s %.0f server_cpu_s %.2f refused_requests %d" % (d["records_per_s"], d["server"]["cpu_s"], d["requests"]["failed"]))')"
        rm -rf $D
    done
done
