#!/usr/bin/env bash
# Interop test: the official OpenTelemetry JS SDK exporters (tests/interop/package-lock.json)
# export logs, traces and metrics to a fresh MiraDB daemon over gRPC, HTTP/protobuf and
# HTTP/JSON (each plain and gzip); every export must succeed and /metrics must count exactly what
# was sent, per signal and transport. The daemon must then stop on SIGTERM with status 0.
#
#   tests/interop/run.sh BIN          BIN = the miradb binary (make interop passes build/miradb)
#
# Environment: INTEROP_COUNT (log records and spans per run, default 1000; metric data points
# follow from it, see send.mjs). INTEROP_TLS=1: the same over TLS on both listeners (https://
# endpoints; a test CA and server certificate made here with the openssl CLI, given to the
# exporters with NODE_EXTRA_CA_CERTS (grpc-js: GRPC_DEFAULT_SSL_ROOTS_FILE_PATH) and to curl
# with --cacert) with an ingest token that every
# exporter sends (--ingest-token-file). Needs node (installed with apt-get when missing), the npm
# registry the first time (npm ci from the lockfile) and curl. Every wait has a deadline; the
# daemon and the temp dir are removed on any exit.
set -u

usage() { echo "usage: $0 BIN" >&2; exit 64; }
[ $# -eq 1 ] || usage
here=$(cd "$(dirname "$0")" && pwd)
bin=$1
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
count=${INTEROP_COUNT:-1000}
tls=${INTEROP_TLS:-0}
protocols="grpc http/protobuf http/json"
compressions="none gzip"

passed=0
failed=0
pass() { passed=$((passed + 1)); echo "PASS $*"; }
fail() { failed=$((failed + 1)); echo "FAIL $*"; }
log() { echo "interop: $*"; }

tmp=""
daemon=""
child=""
cleanup() {
    # A step still running (npm ci, send.mjs) when a signal arrived.
    if [ -n "$child" ] && kill -0 "$child" 2>/dev/null; then
        kill -TERM "$child" 2>/dev/null
        wait "$child" 2>/dev/null
    fi
    if [ -n "$daemon" ] && kill -0 "$daemon" 2>/dev/null; then
        kill -TERM "$daemon" 2>/dev/null
        for _ in $(seq 50); do kill -0 "$daemon" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$daemon" 2>/dev/null
        wait "$daemon" 2>/dev/null
    fi
    [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
trap 'echo "interop: interrupted"; exit 130' INT
trap 'echo "interop: interrupted"; exit 143' TERM

# Ends the run: prints the summary and exits (the EXIT trap cleans up).
finish() {
    echo "interop: $passed passed, $failed failed"
    [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ] && exit 0
    exit 1
}
abort() { fail "$*"; finish; }
# Runs a command in DIR in the background and waits for it, so that a SIGTERM/SIGINT to this script is
# handled at once (bash runs traps only between foreground commands) and cleanup stops it.
run_step() { # dir command...
    (cd "$1" && shift && exec "$@") &
    child=$!
    wait "$child"
    local rc=$?
    child=""
    return $rc
}
show_daemon_log() {
    [ -n "$tmp" ] && [ -s "$tmp/daemon.err" ] || return 0
    echo "---- daemon stderr (last 40 lines) ----"
    tail -n 40 "$tmp/daemon.err"
    echo "----"
}

[ -x "$bin" ] || abort "setup: $bin is not an executable (run make first)"

# ---- node and the pinned packages ----
. "$here/../../scripts/nodelib.sh"
command -v node >/dev/null 2>&1 || log "node is missing: installing nodejs and npm with apt-get"
node_ensure || abort "setup: apt-get install nodejs npm failed"
node_version_ok 'a > 20 || (a === 20 && b >= 6) || (a === 18 && b >= 19)' ||
    abort "setup: node $(node --version) is too old: the pinned SDK needs ^18.19 or >=20.6"
command -v curl >/dev/null 2>&1 || abort "setup: curl is missing (scripts/deps.sh installs it)"

if ! npm_lock_current "$here"; then
    log "installing the pinned OpenTelemetry JS packages (npm ci)"
    run_step "$here" timeout 600 npm ci --no-audit --no-fund --loglevel=error ||
        abort "setup: npm ci failed in $here"
fi

# Loopback only: no proxy may see these requests (grpc-js and curl honour the proxy variables).
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY grpc_proxy all_proxy ALL_PROXY
export no_proxy="127.0.0.1,localhost" NO_PROXY="127.0.0.1,localhost" no_grpc_proxy="*"

# ---- start the daemon ----
tmp=$(mktemp -d "${TMPDIR:-/tmp}/miradb-interop.XXXXXX") || abort "setup: mktemp failed"
mkdir -p "$tmp/data"
scheme=http
host=127.0.0.1
curl_tls=()
daemon_tls=()
token_args=()
if [ "$tls" = 1 ]; then
    command -v openssl >/dev/null 2>&1 || abort "setup: openssl is missing (scripts/deps.sh installs it)"
    t=$tmp/tls
    mkdir -p "$t"
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$t/ext"
    { openssl req -x509 -newkey rsa:2048 -nodes -keyout "$t/ca.key" -out "$t/ca.pem" -days 2 \
          -subj /CN=miradb-interop-ca &&
      openssl req -newkey rsa:2048 -nodes -keyout "$t/srv.key" -out "$t/srv.csr" -subj /CN=localhost &&
      openssl x509 -req -in "$t/srv.csr" -CA "$t/ca.pem" -CAkey "$t/ca.key" -set_serial 1 -days 2 \
          -extfile "$t/ext" -out "$t/srv.pem"; } >"$t/openssl.log" 2>&1 ||
        abort "setup: openssl could not make the test certificates: $(tail -n 3 "$t/openssl.log")"
    token="interop-$RANDOM$RANDOM"
    printf '# the interop exporters\n%s\n' "$token" >"$t/ingest.tokens"
    export NODE_EXTRA_CA_CERTS=$t/ca.pem
    # grpc-js builds its own TLS context and ignores NODE_EXTRA_CA_CERTS; this is its own
    # variable for the roots to trust (gRPC's, not OpenTelemetry's: send.mjs drops OTEL_*).
    export GRPC_DEFAULT_SSL_ROOTS_FILE_PATH=$t/ca.pem
    scheme=https
    host=localhost # the name in the certificate
    curl_tls=(--cacert "$t/ca.pem")
    daemon_tls=(--tls-cert "$t/srv.pem" --tls-key "$t/srv.key" --ingest-token-file "$t/ingest.tokens")
    token_args=(--token "$token")
fi
"$bin" serve --data "$tmp/data" --http-listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 "${daemon_tls[@]}" \
    >"$tmp/daemon.out" 2>"$tmp/daemon.err" </dev/null &
daemon=$!

# Polls until the listening line shows up (deadline 20 s) or the daemon dies.
grpc_port=""
http_port=""
deadline=$((SECONDS + 20))
while [ $SECONDS -lt $deadline ]; do
    line=$(grep -m 1 'event=listening' "$tmp/daemon.err" 2>/dev/null)
    if [ -n "$line" ]; then
        grpc_port=$(echo "$line" | sed -n 's/.*[[:space:]]grpc=[^[:space:]]*:\([0-9][0-9]*\).*/\1/p')
        http_port=$(echo "$line" | sed -n 's/.*[[:space:]]http=[^[:space:]]*:\([0-9][0-9]*\).*/\1/p')
        break
    fi
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$grpc_port" ] || [ -z "$http_port" ]; then
    show_daemon_log
    abort "daemon: no 'event=listening grpc=...:PORT http=...:PORT' line on stderr within 20 s"
fi
pass "daemon: listening (grpc :$grpc_port, http :$http_port)"
base="$scheme://$host:$http_port"

# Polls /ready until 200 (deadline 30 s).
ready=""
deadline=$((SECONDS + 30))
while [ $SECONDS -lt $deadline ]; do
    code=$(curl -s "${curl_tls[@]}" -o /dev/null -w '%{http_code}' --max-time 2 --noproxy '*' "$base/ready")
    if [ "$code" = 200 ]; then ready=1; break; fi
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$ready" ]; then
    show_daemon_log
    abort "daemon: /ready did not answer 200 within 30 s (last status ${code:-none})"
fi
pass "daemon: /ready is 200"

# ---- export with every protocol ----
# expected[<metric-series key>] = value the daemon must report, summed over the runs.
declare -A expected
transport_of() {
    case $1 in grpc) echo grpc ;; http/protobuf) echo http_protobuf ;; http/json) echo http_json ;; esac
}
for p in $protocols; do
    transport=$(transport_of "$p")
    if [ "$p" = grpc ]; then endpoint="$scheme://$host:$grpc_port"; else endpoint=$base; fi
    for c in $compressions; do
        what="export $p ($c)"
        out=$tmp/send.out
        run_step "$here" timeout 120 node send.mjs --protocol "$p" --endpoint "$endpoint" \
            --count "$count" --compression "$c" --timeout-ms 10000 --deadline-ms 90000 "${token_args[@]}" \
            >"$out" 2>>"$tmp/send.err"
        rc=$?
        # One line per signal: "signal records requests" from the JSON result; nothing if unparsable.
        fields=$(node -e '
            const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").pop());
            for (const sig of ["logs", "traces", "metrics"]) console.log(sig, r.sent[sig], r.exports[sig].succeeded);
            ' "$out" 2>/dev/null)
        if [ $rc -ne 0 ] || [ -z "$fields" ]; then
            fail "$what: send.mjs exit $rc"
            # What went wrong, short: per-signal export results, errors, partial successes.
            node -e '
                const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8").trim().split("\n").pop());
                for (const [sig, e] of Object.entries(r.exports))
                  console.log(`  ${sig}: ${e.succeeded}/${e.calls} exports ok, ${e.items} of ${r.expected[sig]} items` +
                              (e.errors.length ? `, errors: ${e.errors.join("; ")}` : ""));
                for (const x of [...r.errors, ...r.diag]) console.log(`  ${x}`);
                for (const x of r.partialSuccess) console.log(`  partial success: ${JSON.stringify(x)}`);
                ' "$out" 2>/dev/null || { echo "  stdout:"; cat "$out"; }
            [ -s "$tmp/send.err" ] && { echo "  stderr:"; tail -n 20 "$tmp/send.err"; }
            continue
        fi
        pass "$what: every export succeeded, $(echo $fields | tr '\n' ' ')(signal records exports)"
        while read -r sig records requests; do
            k="records|$sig|$transport"
            expected[$k]=$(( ${expected[$k]:-0} + records ))
            k="requests|$sig|$transport"
            expected[$k]=$(( ${expected[$k]:-0} + requests ))
        done <<<"$fields"
    done
done

# ---- what the daemon counted ----
if ! curl -s -f "${curl_tls[@]}" --max-time 5 --noproxy '*' -o "$tmp/metrics.txt" "$base/metrics"; then
    show_daemon_log
    abort "metrics: GET /metrics failed"
fi
# Prints the value of NAME{signal=S,transport=T} (labels in any order, others ignored); 0 if absent.
series() { # name signal transport
    awk -v name="$1" -v sig="$2" -v tr="$3" '
        index($0, name "{") == 1 {
            lab = substr($0, length(name) + 2); sub(/}.*/, "", lab)
            s = ""; t = ""
            n = split(lab, kv, ",")
            for (i = 1; i <= n; i++) {
                split(kv[i], p, "="); gsub(/"/, "", p[2])
                if (p[1] == "signal") s = p[2]
                if (p[1] == "transport") t = p[2]
            }
            if (s == sig && (tr == "" || t == tr)) { v = $NF; found = 1 }
        }
        END { print found ? v : 0 }' "$tmp/metrics.txt"
}
grep -q '^miradb_otlp_records_total{' "$tmp/metrics.txt" ||
    fail "metrics: no miradb_otlp_records_total series in /metrics"
for p in $protocols; do
    transport=$(transport_of "$p")
    for sig in logs traces metrics; do
        for kind in records requests; do
            want=${expected[$kind|$sig|$transport]:-}
            [ -n "$want" ] || continue # that protocol's runs failed; already reported
            got=$(series "miradb_otlp_${kind}_total" "$sig" "$transport")
            # Compare as numbers: an exposition may write 1000 as 1000.0 or 1e3.
            if awk -v a="$got" -v b="$want" 'BEGIN { exit !(a + 0 == b + 0) }'; then
                pass "metrics: miradb_otlp_${kind}_total{signal=\"$sig\",transport=\"$transport\"} = $want"
            else
                fail "metrics: miradb_otlp_${kind}_total{signal=\"$sig\",transport=\"$transport\"} = $got, sent $want"
            fi
        done
    done
done
# Request bytes cannot be predicted from here (framing, gzip); they must at least have been counted.
for p in $protocols; do
    transport=$(transport_of "$p")
    for sig in logs traces metrics; do
        [ -n "${expected[records|$sig|$transport]:-}" ] || continue
        got=$(series miradb_otlp_bytes_total "$sig" "$transport")
        if awk -v a="$got" 'BEGIN { exit !(a + 0 > 0) }'; then
            pass "metrics: miradb_otlp_bytes_total{signal=\"$sig\",transport=\"$transport\"} = $got (> 0)"
        else
            fail "metrics: miradb_otlp_bytes_total{signal=\"$sig\",transport=\"$transport\"} = $got, want > 0"
        fi
    done
done
for sig in logs traces metrics; do
    got=$(series miradb_otlp_rejected_records_total "$sig" "")
    if awk -v a="$got" 'BEGIN { exit !(a + 0 == 0) }'; then
        pass "metrics: miradb_otlp_rejected_records_total{signal=\"$sig\"} = 0"
    else
        fail "metrics: miradb_otlp_rejected_records_total{signal=\"$sig\"} = $got, want 0"
    fi
done
# A request error of these kinds means the daemon refused something a real exporter sent.
bad=$(grep -E '^miradb_otlp_request_errors_total\{.*reason="(malformed|too_large|unsupported|not_found|bad_method|internal)"' \
    "$tmp/metrics.txt" | awk '$NF + 0 != 0')
if [ -z "$bad" ]; then
    pass "metrics: no malformed/too_large/unsupported/not_found/bad_method/internal request errors"
else
    fail "metrics: request errors: $(echo $bad)"
fi

# Over TLS: every exporter connection completed its handshake and presented the token.
if [ "$tls" = 1 ]; then
    for l in http grpc; do
        got=$(awk -v s="miradb_tls_handshakes_total{listener=\"$l\"}" '$1 == s { print $2 }' "$tmp/metrics.txt")
        if awk -v a="${got:-0}" 'BEGIN { exit !(a + 0 > 0) }'; then
            pass "tls: miradb_tls_handshakes_total{listener=\"$l\"} = $got (> 0)"
        else
            fail "tls: miradb_tls_handshakes_total{listener=\"$l\"} = ${got:-absent}, want > 0"
        fi
    done
    bad=$(grep -E '^miradb_(tls_handshake_failures|auth_refusals)_total' "$tmp/metrics.txt" | awk '$NF + 0 != 0')
    if [ -z "$bad" ]; then
        pass "tls: no handshake failures and no token refusals"
    else
        fail "tls: $(echo $bad)"
    fi
fi

# ---- graceful stop ----
kill -TERM "$daemon"
stopped=""
deadline=$((SECONDS + 20))
while [ $SECONDS -lt $deadline ]; do
    if ! kill -0 "$daemon" 2>/dev/null; then stopped=1; break; fi
    sleep 0.1
done
if [ -z "$stopped" ]; then
    show_daemon_log
    fail "daemon: still running 20 s after SIGTERM"
else
    wait "$daemon"
    rc=$?
    daemon=""
    if [ $rc -eq 0 ]; then
        pass "daemon: SIGTERM -> exit status 0"
    else
        show_daemon_log
        fail "daemon: SIGTERM -> exit status $rc, want 0"
    fi
fi
if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/daemon.err"; then
    grep -E -A 15 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$tmp/daemon.err" | head -n 40
    fail "daemon: sanitizer report on stderr"
fi
finish
