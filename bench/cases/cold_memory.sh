#!/bin/sh
# cold_memory.sh - what compaction's merges hold, with no load (h-merge):
# boots a daemon on a hard-linked copy of CORPUS (default bench/ab's hot
# query corpus: make it with `bench/ab --cold-b ...`) with --compact-after
# CA (default 1s), waits until no hot block is left (at most 300 s), and
# prints the cold tier's blocks and bytes and the compactor's counters:
# merges, input and output bytes, and the most one merge held charged to
# the memory budget (miradb_compaction_peak_bytes) with that merge's input
# bytes. The bytes are exact: run it with two builds on the same corpus to
# compare what their merges write. EXTRA adds daemon flags.
#
#   sh bench/cases/cold_memory.sh [BUILD_DIR]
set -e
cd "$(dirname "$0")/../.."
B=${1:-build}
C=${CORPUS:-bench/data/ab/corpus}
[ -d "$C/logs" ] || { echo "cold_memory: no corpus at $C (bench/ab --cold-b)" >&2; exit 1; }
D=bench/data/cold-memory
rm -rf $D
cp -al "$C" $D
P=$(python3 -c 'import sys; sys.path.insert(0, "bench/cases"); import benchlib; print(benchlib.free_port())')
H=$(python3 -c 'import sys; sys.path.insert(0, "bench/cases"); import benchlib; print(benchlib.free_port())')
# shellcheck disable=SC2086
$B/miradb serve --data $D --grpc-listen 127.0.0.1:$P --http-listen 127.0.0.1:$H \
    --compact-after "${CA:-1s}" $EXTRA 2>bench/data/cold-memory.log &
PID=$!
M=
for i in $(seq 1 600); do
    M=$(curl -s http://127.0.0.1:$H/metrics 2>/dev/null || true)
    hot=$(echo "$M" | awk '/^miradb_tier_blocks\{.*tier="hot"/ {s += $2} END {print s + 0}')
    [ -n "$M" ] && [ "$hot" = 0 ] && break
    sleep 0.5
done
kill $PID
wait $PID || true
echo "$M" | awk '
    /^miradb_tier_blocks\{.*tier="cold"/ {print}
    /^miradb_tier_block_bytes\{.*tier="cold"/ {print}
    /^miradb_(compactions_total|compaction_rows_total|compaction_bytes_in_total|compaction_bytes_out_total|compaction_yields_total) / {print}
    /^miradb_compaction_peak_bytes / {pk = $2; print}
    /^miradb_compaction_peak_input_bytes / {pi = $2; print}
    END {if (pi > 0) printf "merge peak per input byte %.1f\n", pk / pi}'
rm -rf $D
