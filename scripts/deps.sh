#!/bin/sh
# Installs the Debian packages MiraDB builds, tests and benches with; runs
# apt-get only when one of them is missing, so a second run costs nothing.
set -eu
PKGS="build-essential pkg-config clang libevent-dev libnghttp2-dev libprotobuf-c-dev
protobuf-c-compiler libzstd-dev libxxhash-dev libjansson-dev libcriterion-dev libdeflate-dev
libpcre2-dev libhttp-parser-dev curl nghttp2-client"
missing=""
for p in $PKGS; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends $missing
