/*
 * dump.c - otlp-load generator's request 0 (seed 42, 1,000 records, as
 * jsdiff ir uses) as OTLP/JSON on stdout, its protobuf size on stderr: the
 * input of tests/jsdiff/stage1.c. Built as run.sh builds jsdiff:
 *   cc -O2 -I. -Ibuild/gen -D_GNU_SOURCE -o dump tests/jsdiff/dump.c \
 *      build/rel/bench/otlp-load/gen.o build/rel/libmiradb.a <run.sh's libraries>
 *   ./dump logs|traces|metrics > FILE
 */
#include <stdio.h>
#include <string.h>
#include "bench/otlp-load/gen.h"
int main(int argc, char **argv)
{
    enum signal s = !strcmp(argv[1], "logs")     ? SIG_LOGS
                    : !strcmp(argv[1], "traces") ? SIG_TRACES
                                                 : SIG_METRICS;
    struct gen_config gc = {
        .signal = s, .seed = 42, .time_base_ns = 1767225600000000000ull, .records = 1000};
    struct vbuf v;
    vbuf_init(&v);
    gen_request(&gc, 0, GEN_JSON, &v, NULL);
    fwrite(v.p, 1, v.len, stdout);
    vbuf_init(&v);
    gen_request(&gc, 0, GEN_PROTOBUF, &v, NULL);
    fprintf(stderr, "pb %zu\n", v.len);
    return 0;
}
