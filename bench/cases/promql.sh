#!/bin/sh
# PromQL speed against Prometheus 2.42 over the same data, in one sitting:
# per-pass latency ratios MiraDB/Prometheus (bench/cases/promql.py).
exec python3 -B "$(dirname "$0")/promql.py" "${1:-build}"
