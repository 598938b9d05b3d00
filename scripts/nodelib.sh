# scripts/nodelib.sh - sourced by the test runners that drive node (tests/interop/run.sh,
# tests/ui/run.sh): node and npm from Debian when missing, a version check, and whether a
# folder's node_modules matches its package-lock.json. Every function returns a status and
# prints nothing on success; the caller words the failure.

# Installs Debian's nodejs and npm when node is missing. 0 when node is there afterwards.
node_ensure() {
    command -v node >/dev/null 2>&1 && return 0
    local sudo=""
    [ "$(id -u)" = 0 ] || sudo=sudo
    DEBIAN_FRONTEND=noninteractive timeout 300 $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive timeout 600 $sudo apt-get install -y -qq \
        --no-install-recommends nodejs npm || return 1
    command -v node >/dev/null 2>&1
}

# node_version_ok EXPR: 0 when the JavaScript expression EXPR, over a (major) and b (minor) of
# the running node, is true: node_version_ok 'a >= 18'.
node_version_ok() {
    node -e "const [a, b] = process.versions.node.split('.').map(Number); process.exit(($1) ? 0 : 1)"
}

# npm_lock_current DIR: 0 when DIR/node_modules holds exactly what DIR/package-lock.json pins
# (npm ls fails on a missing or mismatched package).
npm_lock_current() {
    [ -d "$1/node_modules" ] && (cd "$1" && timeout 60 npm ls --depth=0 >/dev/null 2>&1)
}
