#!/usr/bin/env bash
# Proves the README's two set-up commands the way a new user meets the project:
# on a brand-new Debian 12 root with nothing in it but git, make and
# ca-certificates, `make test` must pass on its first run and `make run` must
# serve (/ready 200 on the README's ports, one OTLP/HTTP export accepted).
#
#   scripts/fresh-check.sh          (make fresh-check; needs root for debootstrap and chroot)
#
# Steps, each under its own deadline (seconds; FRESH_<STEP>_SECS overrides):
#   debootstrap  300  debootstrap --variant=minbase bookworm into build/fresh-check/root, from
#                     the Debian archive this machine's own apt sources name
#   base         300  apt-get install git make ca-certificates in the root; the host's extra CA
#                     certificates (SSL_CERT_FILE, SSL_CERT_DIR, NODE_EXTRA_CA_CERTS,
#                     CURL_CA_BUNDLE) and ~/.npmrc are carried over, since package traffic may
#                     pass through a proxy with a certificate of its own
#   clone         60  the repository's committed HEAD, cloned into /root/miradb in the root
#   test        1800  `make test` in a chroot with /proc, /dev, /dev/pts and a tmpfs /dev/shm
#                     (the first `make test` also installs every Debian package, chromium and
#                     node included, and the npm packages: that is most of the time)
#   run          300  `make run`, then /ready and one export on 127.0.0.1:4318
# On any exit every process inside the root is stopped by pid, the mounts are undone and the
# root is removed; logs stay in build/fresh-check/. A failure prints one line naming the step
# and why, then the end of that step's log.
set -u
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$repo/build/fresh-check
root=$work/root
step=setup

say() { echo "fresh-check: $*"; }
die() { # why [log]
    say "FAILED at step '$step': $1"
    if [ -n "${2:-}" ] && [ -s "$2" ]; then
        echo "---- last 40 lines of $2 ----"
        tail -n 40 "$2"
        echo "----"
    fi
    exit 1
}
secs() { # step default
    local v="FRESH_$(echo "$1" | tr a-z A-Z)_SECS"
    echo "${!v:-$2}"
}

# Every process whose root directory is the fresh root: the chroot's commands and what they
# started (make, the daemon, npm). Nothing outside the root is touched.
root_pids() {
    local p r
    for p in /proc/[0-9]*; do
        r=$(readlink "$p/root" 2>/dev/null) || continue
        case $r in "$root" | "$root"/*) echo "${p#/proc/}" ;; esac
    done
}
stop_root_pids() {
    local pids i
    pids=$(root_pids)
    [ -z "$pids" ] && return 0
    kill -TERM $pids 2>/dev/null
    for i in $(seq 100); do
        pids=$(root_pids)
        [ -z "$pids" ] && return 0
        sleep 0.1
    done
    kill -KILL $pids 2>/dev/null
    sleep 0.5
}
mounts_under_root() {
    awk -v r="$root" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts | sort -r
}
teardown() {
    local m
    [ -d "$root" ] || return 0
    stop_root_pids
    for m in $(mounts_under_root); do
        umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
    done
    # Never remove a tree that still has a mount in it: /dev is the host's own.
    if [ -n "$(mounts_under_root)" ]; then
        say "left $root in place: still mounted: $(mounts_under_root | tr '\n' ' ')"
        return 1
    fi
    rm -rf --one-file-system "$root"
}
trap 'teardown' EXIT
trap 'say "interrupted at step $step"; exit 130' INT
trap 'say "terminated at step $step"; exit 143' TERM

# Runs a command inside the root with a clean environment and a deadline.
in_root() { # seconds command-string
    local t=$1
    shift
    timeout --kill-after=10 "$t" chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin TERM=dumb \
        DEBIAN_FRONTEND=noninteractive $ca_env /bin/bash -c "$1"
}

[ "$(id -u)" = 0 ] || die "needs root (debootstrap and chroot); run it as root"
mkdir -p "$work" || die "cannot create $work"
teardown || die "a previous root under $root could not be removed"

# ---- the archive this machine uses, from its own apt sources ----
# Prints "URI SUITE" for every Debian bookworm entry, one-line and deb822 formats alike.
apt_entries() {
    local f
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -r "$f" ] || continue
        sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2, $3 }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -r "$f" ] || continue
        awk 'function flush() { if (types ~ /(^| )deb( |$)/) { n = split(uris, u, " "); m = split(suites, s, " ");
                 for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j] } types = uris = suites = "" }
             /^[ \t]*#/ { next }
             /^[ \t]*$/ { flush(); next }
             /^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
             /^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
             /^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
             END { flush() }' "$f"
    done
}
entries=$(apt_entries | awk '$2 ~ /^bookworm(-updates|-security)?$/' | sort -u)
mirror=$(echo "$entries" | awk '$2 == "bookworm" { print $1; exit }')
[ -n "$mirror" ] || die "no 'bookworm' entry in this machine's apt sources (/etc/apt/sources.list*) to take the archive from"

# ---- 1. a brand-new Debian 12 root ----
step=debootstrap
log=$work/debootstrap.log
if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap on this machine"
    { timeout 120 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 300 \
        apt-get install -y -qq --no-install-recommends debootstrap; } >"$log" 2>&1 ||
        die "apt-get install debootstrap failed" "$log"
fi
say "debootstrap --variant=minbase bookworm from $mirror"
timeout --kill-after=10 "$(secs debootstrap 300)" debootstrap --variant=minbase bookworm "$root" "$mirror" \
    >>"$log" 2>&1 || die "debootstrap failed or ran past its deadline" "$log"

# ---- 2. git, make and ca-certificates, and this machine's way to the archive ----
step=base
log=$work/base.log
echo "$entries" | awk '{ print "deb", $1, $2, "main" }' >"$root/etc/apt/sources.list"
rm -f "$root"/etc/apt/sources.list.d/*
# apt settings of this machine's that concern reaching the archive (a proxy, a snapshot's
# validity dates), not what to install.
for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    [ -f "$f" ] && grep -q -i -E '^[[:space:]]*Acquire::' "$f" && cp "$f" "$root/etc/apt/apt.conf.d/"
done
cp /etc/resolv.conf "$root/etc/resolv.conf" 2>/dev/null
cp /etc/hosts "$root/etc/hosts" 2>/dev/null
mount -t proc proc "$root/proc" || die "cannot mount /proc in the root"
mount --bind /dev "$root/dev" || die "cannot bind-mount /dev in the root"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" || die "cannot mount /dev/pts in the root"
mount -t tmpfs -o mode=1777 tmpfs "$root/dev/shm" || die "cannot mount a tmpfs /dev/shm in the root"
ca_env=""
say "installing git make ca-certificates in the root"
in_root "$(secs base 300)" 'apt-get update -qq && apt-get install -y -qq --no-install-recommends git make ca-certificates' \
    >"$log" 2>&1 || die "apt-get install git make ca-certificates failed inside the root" "$log"
# Certificates the environment names, at the same paths inside the root; the root's own
# bundle is kept where the host has nothing of the same name.
for v in SSL_CERT_FILE SSL_CERT_DIR NODE_EXTRA_CA_CERTS CURL_CA_BUNDLE; do
    p=${!v:-}
    [ -n "$p" ] && [ -e "$p" ] || continue
    mkdir -p "$root$(dirname "$p")"
    if [ -d "$p" ]; then
        cp -a -n "$p"/. "$root$p/" 2>/dev/null
    else
        cp -L "$p" "$root$p"
    fi
    ca_env="$ca_env $v=$p"
done
[ -f "$HOME/.npmrc" ] && cp "$HOME/.npmrc" "$root/root/.npmrc"

# ---- 3. the committed HEAD, and the README's test command ----
step=clone
log=$work/clone.log
head=$(git -C "$repo" rev-parse HEAD 2>/dev/null) || die "cannot read the repository's HEAD"
{ timeout "$(secs clone 60)" git clone -q --no-checkout "$repo" "$root/root/miradb" &&
    git -C "$root/root/miradb" checkout -q --detach "$head"; } >"$log" 2>&1 ||
    die "git clone of $head failed" "$log"
say "cloned $head"

step="make test"
log=$work/test.log
say "make test (first run, nothing but git and make installed)"
in_root "$(secs test 1800)" 'cd /root/miradb && make test' >"$log" 2>&1 ||
    die "make test failed on its first run, or ran past its deadline" "$log"
say "make test: $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)"

# ---- 4. the README's run command ----
step="make run"
log=$work/run.log
say "make run"
in_root "$(secs run 300)" 'cd /root/miradb && exec make run' >"$log" 2>&1 &
ready=""
deadline=$((SECONDS + $(secs run 300)))
while [ $SECONDS -lt $deadline ]; do
    code=$(in_root 5 'curl -s -o /dev/null -w "%{http_code}" --max-time 2 --noproxy "*" http://127.0.0.1:4318/ready')
    [ "$code" = 200 ] && { ready=1; break; }
    [ -z "$(jobs -r)" ] && break
    sleep 0.5
done
[ -n "$ready" ] || die "/ready on 127.0.0.1:4318 did not answer 200 (last: ${code:-no answer})" "$log"
body='{"resourceLogs":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"fresh-check"}}]},"scopeLogs":[{"logRecords":[{"timeUnixNano":"1700000000000000000","body":{"stringValue":"hello from a fresh root"}}]}]}]}'
code=$(in_root 15 "curl -s -o /dev/null -w '%{http_code}' --max-time 10 --noproxy '*' -H 'Content-Type: application/json' \
    --data-binary '$body' http://127.0.0.1:4318/v1/logs")
[ "$code" = 200 ] || die "an OTLP/HTTP export to 127.0.0.1:4318/v1/logs answered ${code:-nothing}, want 200" "$log"
say "make run: /ready 200, export 200"
step=teardown
stop_root_pids
wait 2>/dev/null
teardown || die "could not undo the mounts under $root"
trap - EXIT
say "passed: make test and make run work on a brand-new Debian 12 root"
