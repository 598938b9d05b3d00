#!/bin/sh
# Runs each libFuzzer target for a bounded time from its seed corpus.
#   scripts/run-fuzz.sh FUZZ_BUILD_DIR SECONDS TARGET...
# Target fuzz_X reads tests/fuzz/corpus/X/ (seeds, read-only) and writes what it
# learns to build/fuzz/corpus/X/; crashes land in build/fuzz/ as crash-*.
set -u
dir=$1
secs=$2
shift 2
failed=0
for t in "$@"; do
    name=${t#fuzz_}
    work=$dir/corpus/$name
    mkdir -p "$work"
    echo "== $t for ${secs}s"
    if ! "$dir/$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -artifact_prefix="$dir/" "$work" "tests/fuzz/corpus/$name" 2>"$dir/$t.log"; then
        echo "$t: FAILED (see $dir/$t.log)"
        tail -n 30 "$dir/$t.log"
        failed=$((failed + 1))
    else
        tail -n 1 "$dir/$t.log"
    fi
done
[ "$failed" -eq 0 ]
