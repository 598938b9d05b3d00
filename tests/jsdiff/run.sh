#!/bin/sh
# tests/jsdiff/run.sh CONTROL_TREE [OUT_DIR]
# Builds tests/jsdiff/jsdiff.c against this tree's build/rel/libmiradb.a and
# against CONTROL_TREE's (a tree built with `make -j2 all`, e.g. main's from
# `git archive main`), runs `jsdiff all` over the shared OTLP vectors, the
# committed vectors and the fuzz seeds with each, and compares the outputs.
set -eu
ctl=$1
out=${2:-build/jsdiff}
mkdir -p "$out"
libs=$(pkg-config --libs libevent libnghttp2 libprotobuf-c libzstd libxxhash jansson) 
for t in . "$ctl"; do
    n=$( [ "$t" = . ] && echo new || echo old )
    cc -O2 -g -I. -Ibuild/gen -D_GNU_SOURCE -o "$out/jsdiff-$n" tests/jsdiff/jsdiff.c \
        "$t/build/rel/bench/otlp-load/gen.o" "$t/build/rel/libmiradb.a" \
        $libs -ldeflate -lpcre2-8 -lssl -lcrypto -lhttp_parser -pthread -lm
done
files=$(ls ../shared/otlp/vectors/*.json tests/vectors/*.json tests/fuzz/corpus/jsondec/* 2>/dev/null)
"$out/jsdiff-old" all $files >"$out/old.txt"
"$out/jsdiff-new" all $files >"$out/new.txt"
if cmp "$out/old.txt" "$out/new.txt"; then
    echo "jsdiff: identical ($(wc -c <"$out/new.txt") bytes of output)"
else
    echo "jsdiff: DIFFERENT (diff $out/old.txt $out/new.txt)"
    exit 1
fi
