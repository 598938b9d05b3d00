#!/usr/bin/env bash
# Differential suite: MiraDB's PromQL answers against a real Prometheus 2.42 over the same data
# (tests/promdiff/README.md). One generated dataset goes (a) as OpenMetrics text through
# `promtool tsdb create-blocks-from openmetrics` into a Prometheus started on loopback and (b) as
# OTLP/HTTP protobuf into a fresh MiraDB; every query of queries.txt is then asked of both, as
# range queries and as instant queries, and the answers must match (promdiff-compare).
#
#   tests/promdiff/run.sh BUILD       BUILD = the build dir holding miradb, promdiff-gen and
#                                     promdiff-compare (make promdiff passes build)
#
# Environment:
#   PROMDIFF_QUERIES=REGEX   only the queries matching this extended regex
#   PROMDIFF_SELF=1          compare Prometheus with itself (checks the dataset, the queries and
#                            the comparer without MiraDB's PromQL API; MiraDB still has to
#                            accept every OTLP file with 200)
#   PROMDIFF_MIRADB=BIN      the miradb binary (default BUILD/miradb)
#   PROMDIFF_BASE=SEC        the dataset's first slot, a multiple of 3600 (default: three hours
#                            before now, rounded down to the hour)
#   PROMDIFF_BUDGET=SEC      queries not started within SEC seconds count as failed (default 150)
#   PROMDIFF_VERBOSE=1       print every query and evaluation, not only failures
#   PROMDIFF_KEEP=1          keep the temp dir (data, TSDB, daemon logs) for a look afterwards
# Needs prometheus and promtool (Debian's prometheus 2.42 package; scripts/deps.sh installs it)
# and curl. Every wait has a deadline; both daemons are stopped by pid and the temp dir removed
# on any exit.
set -u

usage() { echo "usage: $0 BUILD" >&2; exit 64; }
[ $# -eq 1 ] || usage
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "$1" && pwd) || usage
miradb=${PROMDIFF_MIRADB:-$build/miradb}
gen=$build/promdiff-gen
cmp=$build/promdiff-compare

log() { echo "promdiff: $*"; }
tmp=""
prom=""
mira=""
stop_pid() { # pid name
    local pid=$1
    kill -0 "$pid" 2>/dev/null || return 0
    kill -TERM "$pid" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
        log "$2 (pid $pid) still running 10 s after SIGTERM: SIGKILL"
        kill -KILL "$pid" 2>/dev/null
    fi
    wait "$pid" 2>/dev/null # its status is the function's
}
cleanup() {
    [ -n "$prom" ] && stop_pid "$prom" prometheus
    [ -n "$mira" ] && stop_pid "$mira" miradb
    if [ -n "$tmp" ]; then
        if [ -n "${PROMDIFF_KEEP:-}" ]; then log "kept $tmp"; else rm -rf "$tmp"; fi
    fi
}
trap cleanup EXIT
trap 'log interrupted; exit 130' INT
trap 'log interrupted; exit 143' TERM
abort() { log "FAIL $*"; echo "0 passed, 1 failed"; exit 1; }
show_log() { # file
    [ -s "$1" ] || return 0
    echo "---- $(basename "$1") (last 30 lines) ----"
    tail -n 30 "$1"
    echo "----"
}

for t in "$miradb" "$gen" "$cmp"; do
    [ -x "$t" ] || abort "setup: $t is not an executable (run make all $build/promdiff-gen $build/promdiff-compare)"
done
for t in prometheus promtool curl; do
    command -v "$t" >/dev/null 2>&1 || abort "setup: $t is missing (scripts/deps.sh installs it)"
done
prometheus --version 2>&1 | grep -q 'version 2\.42\.' ||
    abort "setup: $(command -v prometheus) is not Prometheus 2.42: $(prometheus --version 2>&1 | head -n 1)"

# Loopback only: no proxy may see these requests.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export no_proxy="127.0.0.1,localhost" NO_PROXY="127.0.0.1,localhost"

base=${PROMDIFF_BASE:-$(( ($(date +%s) / 3600 - 3) * 3600 ))}
tmp=$(mktemp -d "$build/promdiff.XXXXXX") || abort "setup: mktemp failed"
mkdir -p "$tmp/data" "$tmp/miradb"
started=$SECONDS

# ---- the dataset ----
counts=$("$gen" --out "$tmp/data" --base-ms "${base}000") || abort "dataset: promdiff-gen failed"
read -r w1 series w2 samples w3 points <<<"$counts"
[ "$w1 $w2 $w3" = "series samples points" ] || abort "dataset: promdiff-gen printed '$counts'"
log "dataset: $series series, $samples samples from $(date -u -d "@$base" +%FT%TZ), $(ls "$tmp/data" | grep -c '\.pb$') OTLP requests"

# ---- Prometheus over the backfilled blocks ----
if ! timeout 120 promtool tsdb create-blocks-from openmetrics "$tmp/data/data.om" "$tmp/prom" \
    >"$tmp/promtool.log" 2>&1; then
    show_log "$tmp/promtool.log"
    abort "prometheus: promtool tsdb create-blocks-from openmetrics failed"
fi
# No scrape targets: the backfilled blocks are all it holds. Retention counts back from the newest
# block, not from now, so the data's age does not matter; 10y keeps everything anyway.
printf 'global:\n  scrape_interval: 1m\n' >"$tmp/prometheus.yml"
prom_port=""
for _ in 1 2 3; do # a port found free may be taken before Prometheus binds it: try another
    port=$("$cmp" free-port) || abort "prometheus: no free port"
    prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/prom" \
        --storage.tsdb.retention.time=10y --web.listen-address="127.0.0.1:$port" \
        --log.level=warn >"$tmp/prometheus.log" 2>&1 </dev/null &
    prom=$!
    deadline=$((SECONDS + 30))
    while [ $SECONDS -lt $deadline ] && kill -0 "$prom" 2>/dev/null; do
        if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$port/-/ready")" = 200 ]; then
            prom_port=$port
            break
        fi
        sleep 0.2
    done
    [ -n "$prom_port" ] && break
    stop_pid "$prom" prometheus
    prom=""
    grep -q 'address already in use' "$tmp/prometheus.log" || break
done
if [ -z "$prom_port" ]; then
    show_log "$tmp/prometheus.log"
    abort "prometheus: /-/ready did not answer 200 within 30 s"
fi
log "prometheus: ready on 127.0.0.1:$prom_port (pid $prom)"

# What Prometheus holds must be exactly what the generator wrote.
all='{__name__=~".+"}[3h]'
end=$((base + 7200))
held=$("$cmp" count --a "$prom_port" --base "$base" --query "$all" --at 7200)
[ "$held" = "series $series samples $samples" ] ||
    abort "prometheus: holds '$held', the generator wrote $series series and $samples samples"

# ---- MiraDB ----
"$miradb" serve --data "$tmp/miradb" --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 \
    >"$tmp/miradb.out" 2>"$tmp/miradb.err" </dev/null &
mira=$!
http_port=""
deadline=$((SECONDS + 20))
while [ $SECONDS -lt $deadline ]; do
    line=$(grep -m 1 'event=listening' "$tmp/miradb.err" 2>/dev/null)
    if [ -n "$line" ]; then
        http_port=$(echo "$line" | sed -n 's/.*[[:space:]]http=[^[:space:]]*:\([0-9][0-9]*\).*/\1/p')
        break
    fi
    kill -0 "$mira" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$http_port" ]; then
    show_log "$tmp/miradb.err"
    abort "miradb: no 'event=listening ... http=...:PORT' line on stderr within 20 s"
fi
ready=""
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ] && kill -0 "$mira" 2>/dev/null; do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$http_port/ready")" = 200 ] &&
        { ready=1; break; }
    sleep 0.1
done
[ -n "$ready" ] || { show_log "$tmp/miradb.err"; abort "miradb: /ready did not answer 200 within 30 s"; }
log "miradb: ready on 127.0.0.1:$http_port (pid $mira)"
for f in "$tmp"/data/otlp-*.pb; do
    code=$(curl -s -o "$tmp/post.out" -w '%{http_code}' --max-time 30 \
        -H 'Content-Type: application/x-protobuf' --data-binary "@$f" \
        "http://127.0.0.1:$http_port/v1/metrics")
    if [ "$code" != 200 ]; then
        show_log "$tmp/miradb.err"
        abort "miradb: POST /v1/metrics $(basename "$f") answered $code: $(head -c 300 "$tmp/post.out")"
    fi
done
# Every data point counted as received, none refused.
curl -s --max-time 10 -o "$tmp/metrics.txt" "http://127.0.0.1:$http_port/metrics" ||
    abort "miradb: GET /metrics failed"
got=$(sed -n 's/^miradb_otlp_records_total{signal="metrics",transport="http_protobuf"} \([0-9]*\)$/\1/p' "$tmp/metrics.txt")
rej=$(sed -n 's/^miradb_otlp_rejected_records_total{signal="metrics"} \([0-9]*\)$/\1/p' "$tmp/metrics.txt")
[ "$got" = "$points" ] && [ "$rej" = 0 ] ||
    abort "miradb: /metrics counts ${got:-no} metric records received and ${rej:-no} rejected, the requests held $points"
log "miradb: every OTLP request answered 200, $points data points received, none rejected"

# ---- compare ----
b_port=$http_port
names=prometheus,miradb
if [ -n "${PROMDIFF_SELF:-}" ]; then
    b_port=$prom_port
    names=prometheus,prometheus
    log "self mode: comparing Prometheus with itself"
else
    code=$(curl -s -o "$tmp/probe.out" -w '%{http_code}' --max-time 10 \
        "http://127.0.0.1:$http_port/api/v1/query?query=1&time=$end")
    [ "$code" = 200 ] ||
        abort "miradb: GET /api/v1/query answered $code ($(head -c 200 "$tmp/probe.out")): no PromQL API in this build?"
    # The answers only compare once MiraDB serves every sample it acknowledged: the whole dataset
    # as one range-vector answer, the same series and samples from both.
    if ! "$cmp" sync --a "$prom_port" --b "$http_port" --base "$base" --names "$names" \
        --query "$all" --at 7200 --deadline 90; then
        show_log "$tmp/miradb.err"
        abort "miradb: does not answer with all $samples samples within 90 s"
    fi
fi
verbose=""
[ -n "${PROMDIFF_VERBOSE:-}" ] && verbose=--verbose
"$cmp" run --a "$prom_port" --b "$b_port" --base "$base" --names "$names" \
    --golden "$here/golden.txt" --queries "$here/queries.txt" --filter "${PROMDIFF_QUERIES:-}" \
    --budget "${PROMDIFF_BUDGET:-150}" $verbose
rc=$?
kill -0 "$prom" 2>/dev/null || { log "FAIL prometheus died during the run"; rc=1; }
# MiraDB must still run, stop on SIGTERM with status 0, and have written no sanitizer report
# (LeakSanitizer writes its report at exit, so it is read after the stop).
if kill -0 "$mira" 2>/dev/null; then
    stop_pid "$mira" miradb
    st=$?
    mira=""
    [ $st -eq 0 ] || { show_log "$tmp/miradb.err"; log "FAIL miradb: SIGTERM -> exit status $st, want 0"; rc=1; }
else
    show_log "$tmp/miradb.err"
    log "FAIL miradb died during the run"
    rc=1
fi
if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/miradb.err"; then
    grep -E -A 15 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/miradb.err" | head -n 40
    log "FAIL miradb: sanitizer report on stderr"
    rc=1
fi
log "done in $((SECONDS - started)) s"
exit $rc
