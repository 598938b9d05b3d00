#!/bin/sh
# Runs MiraDB's test suites and fails on any failing test or sanitizer report.
#   scripts/run-tests.sh ASAN_BUILD_DIR RELEASE_BUILD_DIR [unit|integ|interop|promdiff|deploy|ui ...]
# Criterion writes its summary on stderr; it is kept in build/test-logs/ and
# scanned for AddressSanitizer / LeakSanitizer / UBSan reports, which do not
# always fail a criterion test by themselves (LIBS.md 5).
set -u
asan=$1
rel=$2
shift 2
suites=${*:-unit integ interop promdiff deploy ui}
logs=$asan/../test-logs
mkdir -p "$logs"
passed=0
failed=0
export MIRADB_BIN="$asan/miradb"
export MIRADB_VECTORS="$(pwd)/tests/vectors"
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1}"

run_criterion() { # name binary
    name=$1
    bin=$2
    log=$logs/$name.log
    echo "== $name"
    "$bin" --jobs=2 --timeout 300 >"$log" 2>&1
    rc=$?
    tail -n 1 "$log"
    summary=$(grep 'Synthesis:' "$log" | tail -n 1)
    p=$(echo "$summary" | sed -n 's/.*Passing: \([0-9]*\).*/\1/p')
    f=$(echo "$summary" | sed -n 's/.*Failing: \([0-9]*\).*Crashing: \([0-9]*\).*/\1 \2/p')
    passed=$((passed + ${p:-0}))
    for n in $f; do failed=$((failed + n)); done
    if grep -q -E 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log"; then
        echo "$name: sanitizer report in $log:"
        grep -E -A 15 'ERROR: (AddressSanitizer|LeakSanitizer)|runtime error:' "$log" | head -n 60
        failed=$((failed + 1))
    elif [ $rc -ne 0 ] || [ -z "$summary" ]; then
        grep -E '^\[----\]|\[FAIL\]' "$log" | head -n 60
        [ -z "$f" ] && failed=$((failed + 1))
    fi
}

for s in $suites; do
    case $s in
    unit) run_criterion unit "$asan/unit-tests" ;;
    integ) run_criterion integ "$asan/integ-tests" ;;
    interop)
        # The OpenTelemetry JS exporters, over plain HTTP/gRPC and then over TLS
        # with an ingest token (tests/interop/README.md).
        for mode in plain tls; do
            echo "== interop ($mode)"
            log=$logs/interop-$mode.log
            if INTEROP_TLS=$([ $mode = tls ] && echo 1 || echo 0) \
                tests/interop/run.sh "$rel/miradb" >"$log" 2>&1; then
                passed=$((passed + 1))
                tail -n 5 "$log"
            else
                failed=$((failed + 1))
                tail -n 40 "$log"
            fi
        done
        ;;
    promdiff)
        # PromQL answers against a real Prometheus 2.42 (tests/promdiff/README.md).
        echo "== promdiff"
        if tests/promdiff/run.sh "$rel" >"$logs/promdiff.log" 2>&1; then
            passed=$((passed + 1))
            tail -n 3 "$logs/promdiff.log"
        else
            failed=$((failed + 1))
            tail -n 60 "$logs/promdiff.log"
        fi
        ;;
    deploy)
        # deploy/: the Dockerfile's packages against ldd, the unit, the example config.
        echo "== deploy"
        if scripts/check-deploy.sh "$rel" >"$logs/deploy.log" 2>&1; then
            passed=$((passed + 1))
        else
            failed=$((failed + 1))
        fi
        tail -n 20 "$logs/deploy.log"
        ;;
    ui)
        # The web UI in Debian's chromium, against the ASan daemon (tests/ui/README.md);
        # screenshots in build/ui-test/. Its checks count one by one.
        echo "== ui"
        tests/ui/run.sh "$asan/miradb" "$rel/ui-test" >"$logs/ui.log" 2>&1
        rc=$?
        line=$(grep -E '^ui: [0-9]+ passed, [0-9]+ failed' "$logs/ui.log" | tail -n 1)
        p=$(echo "$line" | sed -n 's/^ui: \([0-9]*\) passed.*/\1/p')
        f=$(echo "$line" | sed -n 's/.* \([0-9]*\) failed.*/\1/p')
        passed=$((passed + ${p:-0}))
        failed=$((failed + ${f:-0}))
        [ $rc -ne 0 ] && [ "${f:-0}" -eq 0 ] && failed=$((failed + 1))
        if [ $rc -eq 0 ]; then echo "$line"; else grep -E '^FAIL|^ui:' "$logs/ui.log" | head -n 40; fi
        ;;
    esac
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
