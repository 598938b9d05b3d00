#!/bin/sh
# Checks the deploy/ files against the build, without Docker or a running systemd:
#   scripts/check-deploy.sh BUILD_DIR      (BUILD_DIR/miradb: the release binary)
# 1. every shared library `ldd miradb` resolves belongs to a Debian package that the
#    runtime stage of deploy/Dockerfile installs (libc6 comes with the base image);
# 2. the build stage installs every -dev package scripts/deps.sh builds with (the test
#    framework aside) and the tools make needs;
# 3. deploy/miradb.conf is accepted by the binary, and deploy/miradb.service waits
#    longer (TimeoutStopSec) than the daemon's shutdown-timeout from that file, keeps
#    its sandbox lines, and allows writes where the file's data directory is;
# 4. systemd-analyze verify accepts deploy/miradb.service (skipped where absent).
# Prints one line per failure and exits 1 if there was any.
set -u
build=${1:-build}
bin=$build/miradb
fail=0
bad() {
    echo "check-deploy: $*"
    fail=1
}
[ -x "$bin" ] || {
    echo "check-deploy: no binary at $bin"
    exit 1
}

# The packages of the apt-get install in one stage of the Dockerfile: stage 1 = build,
# 2 = runtime (counted by FROM lines), backslash-continued lines joined.
stage_pkgs() {
    sed -e ':a' -e '/\\$/N; s/\\\n//; ta' deploy/Dockerfile |
        awk -v want="$1" '/^FROM /{n++} n==want && /apt-get install/ {
            sub(/.*apt-get install/, ""); sub(/&&.*/, "");
            for (i = 1; i <= NF; i++) if ($i !~ /^-/) print $i }'
}
runtime=$(stage_pkgs 2)
buildpk=$(stage_pkgs 1)
[ -n "$runtime" ] || bad "no apt-get install found in the runtime stage of deploy/Dockerfile"
[ -n "$buildpk" ] || bad "no apt-get install found in the build stage of deploy/Dockerfile"

# 1. ldd -> file -> package. Debian 12 merges /lib into /usr/lib, and dpkg knows a file
# under the name its package shipped, so both spellings are asked.
libs=$(ldd "$bin" | awk '/=>/ && $3 ~ /^\// {print $3} /^[ \t]*\/[^ ]+ \(/ {print $1}')
[ -n "$libs" ] || bad "ldd $bin listed no libraries"
for l in $libs; do
    real=$(readlink -f "$l")
    pkg=""
    for cand in "$l" "$real" "/usr${real#/usr}" "${real#/usr}"; do
        pkg=$(dpkg -S "$cand" 2>/dev/null | head -n 1 | cut -d: -f1)
        [ -n "$pkg" ] && break
    done
    if [ -z "$pkg" ]; then
        bad "$l: no Debian package owns it"
        continue
    fi
    [ "$pkg" = libc6 ] && continue
    echo "$runtime" | grep -qx "$pkg" || bad "$bin links $l from $pkg, which the runtime stage of deploy/Dockerfile does not install"
done

# 2. -dev packages of scripts/deps.sh (criterion is for the tests only).
devs=$(sed -n '/^PKGS="/,/"/p' scripts/deps.sh | tr ' "' '\n\n' | grep -- '-dev$' | grep -vx libcriterion-dev)
for p in $devs build-essential pkg-config protobuf-c-compiler; do
    echo "$buildpk" | grep -qx "$p" || bad "the build stage of deploy/Dockerfile does not install $p"
done

# 3. the example configuration, and the stop timeout around it.
cfg=$("$bin" serve --config deploy/miradb.conf --print-config 2>&1) || bad "deploy/miradb.conf refused: $cfg"
to=$(echo "$cfg" | sed -n 's/^shutdown-timeout = \([0-9]*\)\(ms\|s\|m\)$/\1 \2/p')
ms=""
case "$to" in
*" ms") ms=${to% ms} ;;
*" s") ms=$((${to% s} * 1000)) ;;
*" m") ms=$((${to% m} * 60000)) ;;
esac
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)$/\1/p' deploy/miradb.service)
if [ -z "$ms" ] || [ -z "$stop" ]; then
    bad "cannot read shutdown-timeout ($to) or TimeoutStopSec ($stop)"
elif [ $((stop * 1000)) -le $((ms + 5000)) ]; then
    bad "TimeoutStopSec=$stop is not above shutdown-timeout ${ms}ms plus a seal attempt (5 s)"
fi

# The unit's sandbox and readiness lines, each as written (dropping one fails here).
for line in Type=notify User=miradb NoNewPrivileges=yes ProtectSystem=strict \
    ReadWritePaths=/var/lib/miradb ProtectHome=yes PrivateTmp=yes CapabilityBoundingSet= \
    "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX" SystemCallFilter=@system-service \
    LimitNOFILE=65536 'ExecReload=/bin/kill -HUP $MAINPID'; do
    grep -qxF "$line" deploy/miradb.service || bad "deploy/miradb.service lacks the line $line"
done
grep -q '^ExecStart=/usr/local/bin/miradb serve --config /etc/miradb/miradb.conf$' deploy/miradb.service ||
    bad "deploy/miradb.service does not start miradb serve --config /etc/miradb/miradb.conf"
[ "$(echo "$cfg" | sed -n 's/^data = "\(.*\)"$/\1/p')" = /var/lib/miradb ] ||
    bad "the data key of deploy/miradb.conf is not the unit's ReadWritePaths=/var/lib/miradb"

# 4. the unit, with ExecStart pointed at this build so verify finds the binary.
if command -v systemd-analyze >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    sed "s|/usr/local/bin/miradb|$(readlink -f "$bin")|" deploy/miradb.service >"$tmp/miradb.service"
    out=$(systemd-analyze verify "$tmp/miradb.service" 2>&1) || bad "systemd-analyze verify: $out"
    [ -z "$out" ] || bad "systemd-analyze verify warns: $out"
    rm -rf "$tmp"
else
    echo "check-deploy: systemd-analyze not installed, unit not verified"
fi

[ $fail -eq 0 ] && echo "check-deploy: ok ($(echo "$libs" | wc -w) libraries, runtime stage: $(echo $runtime))"
exit $fail
