#!/bin/sh
# Peak RSS against --memory-budget under wrk's 1,000-record log exports, with
# ack p50/p99 and refusals; PASS when VmHWM <= the budget (bench/cases/rss.py; issue 13).
exec python3 -B "$(dirname "$0")/rss.py" "${1:-build}"
