#!/bin/sh
# Installs the Debian packages MiraDB builds, tests and benches with; runs
# apt-get only when one of them is missing, so a second run costs nothing.
#
# `prometheus` (2.42, /usr/bin/prometheus and /usr/bin/promtool) is what the
# differential suite (tests/promdiff/) compares MiraDB's PromQL answers with.
# Its maintainer scripts would start a system service on :9090; the suite
# starts its own Prometheus instead, so that one install runs under a
# policy-rc.d that forbids starting anything (an existing policy-rc.d is left
# as it is), and afterwards no new prometheus process may exist.
set -eu
PKGS="build-essential pkg-config clang libevent-dev libnghttp2-dev libprotobuf-c-dev
protobuf-c-compiler libzstd-dev libxxhash-dev libjansson-dev libcriterion-dev libdeflate-dev
libpcre2-dev libhttp-parser-dev curl nghttp2-client libssl-dev openssl"
# bench/cases/peer.sh: wrk (an HTTP client that is not MiraDB's code) and the libraries the
# Fluent Bit peer binary needs.
PKGS="$PKGS wrk libyaml-0-2 libssl3"
# tests/ui/: the browser Playwright drives (Debian's; Playwright downloads none).
PKGS="$PKGS chromium"
installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "ok installed"; }
missing=""
for p in $PKGS; do
    installed "$p" || missing="$missing $p"
done
prom_missing=""
installed prometheus || prom_missing=1
[ -z "$missing" ] && [ -z "$prom_missing" ] && exit 0
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
if [ -n "$missing" ]; then
    echo "deps: installing$missing" >&2
    $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
[ -z "$prom_missing" ] && exit 0

# ---- prometheus, without its service ----
policy=/usr/sbin/policy-rc.d
made_policy=""
# The ids of running prometheus processes, one per line (listed, never signalled); from /proc,
# since a minbase root has no ps.
prom_pids() {
    for c in /proc/[0-9]*/comm; do
        [ "$(cat "$c" 2>/dev/null)" = prometheus ] && echo "${c#/proc/}" | cut -d/ -f1
    done | sort
}
before=$(prom_pids)
# An existing policy-rc.d is somebody else's: left as it is (the check below still runs).
if [ ! -e "$policy" ]; then
    trap '$SUDO rm -f "$policy"' EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    # 101 = "action forbidden by policy": invoke-rc.d then starts nothing.
    printf '#!/bin/sh\n# Written by MiraDB scripts/deps.sh for one apt-get install; removed after it.\nexit 101\n' |
        $SUDO tee "$policy" >/dev/null
    $SUDO chmod 755 "$policy"
    made_policy=1
fi
rc=0
echo "deps: installing prometheus (its service is not started)" >&2
$SUDO apt-get install -y -qq --no-install-recommends prometheus || rc=$?
if [ -n "$made_policy" ]; then
    $SUDO rm -f "$policy"
    trap - EXIT
fi
[ $rc -eq 0 ] || exit $rc
after=$(prom_pids)
started=$(printf '%s\n' "$after" | grep -v -x -F "$before" | grep . || true)
[ -z "$before" ] && started=$after
if [ -n "$started" ]; then
    echo "deps: installing prometheus started a prometheus process (pid $(echo $started));" \
        "it was left running: stop it yourself (e.g. service prometheus stop)" >&2
    exit 1
fi
