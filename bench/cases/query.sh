#!/bin/sh
# Query latency and scan rates over a sealed corpus; cases whose endpoint is
# missing are skipped, never faked (bench/cases/query.py).
exec python3 -B "$(dirname "$0")/query.py" "${1:-build}"
