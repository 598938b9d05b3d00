#!/bin/sh
# Storage (issue 3, "Measure"): seal cost per record, block open cost with
# and without the split and the verification cache, bytes per record by
# table kind (plain and zstd), and in-process WAL replay speed, all from
# build/blkbench (bench/blkbench/main.c says what each figure is). Boot time
# on an empty store versus a full WAL, and replay through the daemon, are the
# restart case's (bench/cases/restart.sh), not repeated here.
#
#   sh bench/cases/storage.sh BUILD_DIR
#
# BENCH_QUICK=1: 8 MiB blocks, fewer repetitions. The data directory is
# ${BENCH_DATA:-bench/data}/blkbench (blkbench refuses tmpfs), removed after.
set -u
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
bin="$build/blkbench"
if [ ! -x "$bin" ] && [ -x build/blkbench ]; then
    # run-all.sh snapshots only miradb, otlp-load and percore into BUILD_DIR.
    echo "storage: $bin missing, using build/blkbench" >&2
    bin=build/blkbench
fi
if [ ! -x "$bin" ]; then
    printf '{"case":"storage","error":"%s is not built (make build/blkbench)"}\n' "$bin"
    exit 1
fi
dir=${BENCH_DATA:-bench/data}/blkbench
if [ "${BENCH_QUICK:-0}" != 0 ] && [ -n "${BENCH_QUICK:-}" ]; then
    set -- --block-bytes 8388608 --seal-reps 1 --open-reps 7 --wal-frames 20 --replay-reps 3
else
    set -- --block-bytes 33554432 --seal-reps 5 --open-reps 21 --wal-frames 100 --replay-reps 5
fi
exec timeout 900 "$bin" --dir "$dir" "$@"
