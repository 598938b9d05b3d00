/*
 * percore - the "per core, no I/O" bench case: decode and append per signal
 * on one thread, and the cost of one WAL append.
 *
 *   build/percore [--seconds S] [--records-per-request N] [--wal-dir DIR]
 *
 * Requests come from otlp-load's generator (bench/otlp-load/gen.h), encoded
 * once up front; the timed loops only decode (proto/pbdec.c, proto/jsondec.c)
 * and append (storage/oblock.c). Prints one JSON object: records/s per
 * signal for decode alone and decode + append, and WAL append latency
 * percentiles for a 4 KiB body (write(2) only, no fsync) on --wal-dir,
 * which must not be tmpfs for the number to mean anything.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "bench/otlp-load/gen.h"
#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "storage/arena.h"
#include "storage/oblock.h"
#include "storage/wal.h"

#define POOL 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

struct pool {
    struct vbuf req[POOL];
    uint32_t records;
};

static int make_pool(struct pool *p, enum signal s, enum gen_format f, uint32_t records)
{
    struct gen_config gc = {.signal = s, .seed = 42, .time_base_ns = 1767225600000000000ull,
                            .records = records};
    for (int i = 0; i < POOL; i++) {
        vbuf_init(&p->req[i]);
        if (gen_request(&gc, (uint64_t)i, f, &p->req[i], NULL) < 0) {
            return -1;
        }
    }
    p->records = records;
    return 0;
}

/* Runs decode (and append when |append|) for |secs|; returns records/s. */
static double run(struct pool *p, enum signal s, enum gen_format f, bool append, double secs,
                  uint64_t *records_out)
{
    struct batch *b = batch_new(s);
    arena *a = arena_new(0);
    oblock *ob = NULL;
    char err[200];
    uint64_t records = 0, seq = 0;
    double t0 = now_s(), t = t0;

    if (append && oblock_new(s, &ob) < 0) {
        return -1;
    }
    for (uint64_t i = 0; t - t0 < secs; i++) {
        struct vbuf *r = &p->req[i % POOL];
        batch_reset(b, s);
        int rc;
        if (f == GEN_PROTOBUF) {
            rc = pbdec_decode(s, r->p, r->len, b, err, sizeof(err));
        } else {
            arena_reset(a);
            rc = jsondec_decode(s, (const char *)r->p, r->len, a, b, err, sizeof(err));
        }
        if (rc < 0) {
            fprintf(stderr, "percore: decode failed: %s\n", err);
            exit(1);
        }
        if (append) {
            if (oblock_rows(ob) > 2000000) { /* bound memory: start a new block */
                oblock_free(ob);
                oblock_new(s, &ob);
            }
            if (oblock_append(ob, b, ++seq) < 0) {
                fprintf(stderr, "percore: append failed\n");
                exit(1);
            }
        }
        records += b->n_rows;
        if ((i & 15) == 15) {
            t = now_s();
        }
    }
    t = now_s();
    oblock_free(ob);
    batch_free(b);
    arena_free(a);
    *records_out = records;
    return (double)records / (t - t0);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double secs = 2.0;
    uint32_t rpr = 1000;
    const char *wal_dir = "bench/data/percore-wal";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--seconds") == 0) {
            secs = atof(argv[i + 1]);
        } else if (strcmp(argv[i], "--records-per-request") == 0) {
            rpr = (uint32_t)atoi(argv[i + 1]);
        } else if (strcmp(argv[i], "--wal-dir") == 0) {
            wal_dir = argv[i + 1];
        } else {
            fprintf(stderr, "usage: percore [--seconds S] [--records-per-request N] "
                            "[--wal-dir DIR]\n");
            return 2;
        }
    }
    printf("{\"case\":\"percore\",\"seconds_per_run\":%.1f,\"records_per_request\":%u", secs, rpr);
    static const char *const names[] = {"logs", "traces", "metrics"};
    for (int s = 1; s <= 3; s++) {
        for (int f = 0; f < 2; f++) {
            struct pool p;
            uint64_t n1, n2;
            if (make_pool(&p, (enum signal)s, (enum gen_format)f, rpr) < 0) {
                fprintf(stderr, "percore: generator failed\n");
                return 1;
            }
            double dec = run(&p, (enum signal)s, (enum gen_format)f, false, secs, &n1);
            double both = run(&p, (enum signal)s, (enum gen_format)f, true, secs, &n2);
            printf(",\"%s_%s\":{\"decode_records_per_s\":%.0f,\"decode_append_records_per_s\":%.0f,"
                   "\"records\":%llu}",
                   names[s - 1], f == GEN_PROTOBUF ? "protobuf" : "json", dec, both,
                   (unsigned long long)(n1 + n2));
            for (int i = 0; i < POOL; i++) {
                vbuf_fini(&p.req[i]);
            }
        }
    }

    /* WAL append of a 4 KiB body: one write(2) each. */
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", wal_dir, wal_dir);
    if (system(cmd) != 0) {
        return 1;
    }
    struct statfs fs;
    bool tmpfs = statfs(wal_dir, &fs) == 0 && fs.f_type == 0x01021994;
    wal *w;
    if (wal_open(wal_dir, 0, NULL, NULL, &w) < 0) {
        fprintf(stderr, "percore: cannot open a WAL in %s\n", wal_dir);
        return 1;
    }
    enum { N = 20000 };
    static double lat[N];
    static uint8_t body[4096];
    memset(body, 'x', sizeof(body));
    for (int i = 0; i < N; i++) {
        double t0 = now_s();
        if (wal_append(w, SIG_LOGS, WAL_FMT_PROTOBUF, body, sizeof(body)) < 0) {
            return 1;
        }
        lat[i] = (now_s() - t0) * 1e6;
    }
    wal_close(w);
    qsort(lat, N, sizeof(double), cmp_d);
    printf(",\"wal_append_4k\":{\"samples\":%d,\"p50_us\":%.2f,\"p99_us\":%.2f,\"max_us\":%.2f,"
           "\"tmpfs\":%s}}\n",
           N, lat[N / 2], lat[N * 99 / 100], lat[N - 1], tmpfs ? "true" : "false");
    system(cmd);
    return 0;
}
