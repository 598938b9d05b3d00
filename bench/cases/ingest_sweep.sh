#!/bin/sh
# End-to-end ingest sweep through the daemon (bench/cases/ingest_sweep.py).
exec python3 -B "$(dirname "$0")/ingest_sweep.py" "${1:-build}"
