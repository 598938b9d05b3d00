#!/bin/sh
# Restart with a full WAL: no losses, no duplicates; replay speed and boot
# price (bench/cases/restart.py).
exec python3 -B "$(dirname "$0")/restart.py" "${1:-build}"
