#!/bin/sh
# Ingest against Fluent Bit 5.1.1 in one sitting: records per CPU-second, ack
# p50/p99, peak RSS, MiraDB / Fluent Bit ratio (bench/cases/peer.py; issue 13).
# FLUENT_BIT=path selects the binary (default ../shared/peers/fluent-bit/fluent-bit);
# without one the case is skipped with a message.
exec python3 -B "$(dirname "$0")/peer.py" "${1:-build}"
