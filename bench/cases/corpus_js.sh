#!/bin/sh
# Bytes per record on the OpenTelemetry JS exporters' corpus: raw, zstd -3, hot and cold
# (bench/cases/corpus_js.py says how). Needs node and tests/interop's packages (make interop
# installs them; without them the case says so and is skipped).
exec python3 -B "$(dirname "$0")/corpus_js.py" "${1:-build}"
