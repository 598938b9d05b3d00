#!/bin/sh
# Per core, no I/O: decode and append per signal on one thread, append and
# seal cost per record, WAL append latency (bench/cases/percore.py).
exec python3 -B "$(dirname "$0")/percore.py" "${1:-build}"
