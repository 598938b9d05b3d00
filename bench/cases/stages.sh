#!/bin/sh
# Where an acknowledged log record's daemon CPU goes, stage by stage (read,
# gunzip, decode, WAL, append, reply, seal, bloom): CPU ns a record from /proc
# times each stage's share of perf's samples (bench/cases/stages.py; issue 13).
exec python3 -B "$(dirname "$0")/stages.py" "${1:-build}"
