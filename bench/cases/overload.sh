#!/bin/sh
# Twice the sustainable rate: retryable sheds, bounded wait and memory, no
# acknowledged record lost (bench/cases/overload.py).
exec python3 -B "$(dirname "$0")/overload.py" "${1:-build}"
