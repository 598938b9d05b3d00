#!/bin/sh
# Runs the ThreadSanitizer stress (tests/tsan/shard_stress.c) under each ack
# mode, 3 rounds each, each bounded to 300 s; fails on a wrong count or on
# any ThreadSanitizer report.
#   scripts/run-tsan.sh TSAN_BUILD_DIR
set -u
dir=$1
failed=0
export TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=1 exitcode=66}"
for ack in wal fsync seal; do
    for round in 1 2 3; do
        log=$dir/shard_stress-$ack-$round.log
        if timeout 300 "$dir/shard_stress" "$ack" >"$log" 2>&1 &&
            ! grep -q 'WARNING: ThreadSanitizer' "$log"; then
            tail -n 1 "$log"
        else
            echo "shard_stress $ack (round $round): FAILED (see $log)"
            head -n 60 "$log"
            failed=$((failed + 1))
        fi
    done
done
[ "$failed" -eq 0 ] && echo "tsan: all passed" || echo "tsan: $failed failed"
[ "$failed" -eq 0 ]
