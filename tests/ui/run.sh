#!/bin/bash
# tests/ui/run.sh BIN [OUT] - the web UI in a real browser (tests/ui/README.md): Debian's
# chromium driven headless by playwright-core (pinned in package-lock.json, installed with
# npm ci and no browser download) against a daemon run.mjs starts and fills. Screenshots go
# to OUT (default build/ui-test). Needs node (installed with apt-get when missing, as
# scripts/nodelib.sh), chromium (scripts/deps.sh installs it) and the npm registry the first
# time. Exit 0 only when every check passed; the last line is "ui: N passed, N failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 1 ] || { echo "usage: $0 BIN [OUT]" >&2; exit 64; }
bin=$1
out=${2:-build/ui-test}
case $bin in /*) ;; *) bin=$(pwd)/$bin ;; esac
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
abort() { echo "ui: setup: $*"; echo "ui: 0 passed, 1 failed"; exit 1; }
[ -x "$bin" ] || abort "$bin is not an executable (run make first)"
chromium=${MIRADB_CHROMIUM:-/usr/bin/chromium}
[ -x "$chromium" ] || abort "$chromium is missing: scripts/deps.sh installs Debian's chromium"
. "$here/../../scripts/nodelib.sh"
command -v node >/dev/null 2>&1 || echo "ui: node is missing: installing nodejs and npm with apt-get"
node_ensure || abort "apt-get install nodejs npm failed"
node_version_ok 'a >= 18' ||
    abort "node $(node --version) is too old: playwright-core 1.61 needs 18 or later"
# Never a browser download: the browser is Debian's.
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if ! npm_lock_current "$here"; then
    echo "ui: installing playwright-core from the lockfile (npm ci)"
    (cd "$here" && timeout 600 npm ci --no-audit --no-fund --loglevel=error) || abort "npm ci failed in $here"
fi
# Loopback only: no proxy may see these requests.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export no_proxy="127.0.0.1,localhost" NO_PROXY="127.0.0.1,localhost"
MIRADB_CHROMIUM=$chromium exec timeout 180 node "$here/run.mjs" "$bin" "$out"
