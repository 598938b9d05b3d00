#!/bin/sh
# Runs every bench case (bench/cases/*.sh), each printing one JSON object on
# one line, then compares the run with bench/baseline.json (bench/compare).
#
#   bench/run-all.sh BUILD_DIR        (make bench runs it on build/)
#
# Output: stdout gets one JSON line per case, after a first "meta" line (the
# commit, the machine, the mode); the same lines go to bench/data/last-run.jsonl.
# Progress goes to stderr.
#
# The binaries (miradb, otlp-load, percore, and any other bench/<tool> built)
# are copied from BUILD_DIR into
# bench/data/bin/ first, so a rebuild by someone else during the run cannot
# mix two builds. Every case runs under `timeout` (BENCH_CASE_TIMEOUT s,
# default 1500).
#
# Environment:
#   BENCH_QUICK=1       a smoke run: trimmed grids, short runs (about 3 min);
#                       not compared with the baseline (different settings)
#   BENCH_CASES="a b"   run only these cases (names of bench/cases/*.sh)
#   BENCH_COMPARE=0     skip the comparison
#   BENCH_COMMIT=REV    the commit the binaries were built from (for the record)
# Time: a full run takes about 13-15 min here (2 cores, shared) once the
# query corpus exists; the first full run also builds the 10M + 10M record
# query corpus (bench/data/query-corpus-10000000, about 7 GB, kept). The promql
# case adds about 13 min (it builds its 11,200-series dataset for MiraDB and a
# backfilled Prometheus 2.42 every run; MiraDB's range rate over 10,000 series
# alone took ~2 x 112 s on 2026-12-01).
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
cd "$root" || exit 2
data=${BENCH_DATA:-bench/data}
mkdir -p "$data" || exit 2

bin="$data/bin"
rm -rf "$bin" && mkdir -p "$bin" || exit 2
for t in miradb otlp-load percore blkbench; do
    if [ ! -x "$build/$t" ]; then
        echo "run-all: $build/$t is not built (make all)" >&2
        exit 2
    fi
    cp "$build/$t" "$bin/$t" || exit 2
done
# Other bench tools (bench/<tool>/main.c), when built.
for d in bench/*/main.c; do
    t=$(basename "$(dirname "$d")")
    if [ -x "$build/$t" ] && [ ! -e "$bin/$t" ]; then
        cp "$build/$t" "$bin/$t" || exit 2
    fi
done
bin=$(cd "$bin" && pwd)

out="$data/last-run.jsonl"
# The commit the binaries were built from: BENCH_COMMIT when they come from
# elsewhere (a snapshot of another commit), else this checkout's HEAD, with
# source_dirty when its sources differ from HEAD.
commit=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
dirty=false
if [ -z "${BENCH_COMMIT:-}" ] &&
    [ -n "$(git status --porcelain -- storage proto query server bench/percore bench/otlp-load 2>/dev/null)" ]; then
    dirty=true
fi
quick=false
[ "${BENCH_QUICK:-0}" != 0 ] && [ -n "${BENCH_QUICK:-}" ] && quick=true
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
printf '{"case":"meta","commit":"%s","source_dirty":%s,"build":"%s","quick":%s,"nproc":%s,"cpu_model":"%s","started":"%s"}\n' \
    "$commit" "$dirty" "$build" "$quick" "$(nproc)" "$model" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" | tee "$out"

status=0
t_all=$(date +%s)
for c in bench/cases/*.sh; do
    [ -e "$c" ] || { echo '{"note":"no bench cases yet"}'; exit 0; }
    name=$(basename "$c" .sh)
    if [ -n "${BENCH_CASES:-}" ]; then
        case " $BENCH_CASES " in
        *" $name "*) ;;
        *) continue ;;
        esac
    fi
    t0=$(date +%s)
    echo "run-all: $name ..." >&2
    line=$(timeout "${BENCH_CASE_TIMEOUT:-1500}" sh "$c" "$bin")
    rc=$?
    if [ -z "$line" ]; then
        line=$(printf '{"case":"%s","error":"no output (exit status %s)"}' "$name" "$rc")
    fi
    printf '%s\n' "$line" | tee -a "$out"
    echo "run-all: $name exit $rc in $(($(date +%s) - t0)) s" >&2
    [ "$rc" -eq 0 ] || status=1
done
echo "run-all: all cases in $(($(date +%s) - t_all)) s; results in $out" >&2

if [ "$quick" = false ] && [ "${BENCH_COMPARE:-1}" != 0 ] && [ -f bench/baseline.json ]; then
    if [ -n "${BENCH_CASES:-}" ]; then
        python3 -B bench/compare --allow-missing "$out" >&2 || status=1
    else
        python3 -B bench/compare "$out" >&2 || status=1
    fi
fi
exit $status
