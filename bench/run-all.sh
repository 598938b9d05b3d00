#!/bin/sh
# Runs every bench case (bench/cases/*.sh), each printing one JSON object.
#   bench/run-all.sh BUILD_DIR
set -u
build=${1:-build}
status=0
for c in bench/cases/*.sh; do
    [ -e "$c" ] || { echo '{"note":"no bench cases yet"}'; exit 0; }
    sh "$c" "$build" || status=1
done
exit $status
