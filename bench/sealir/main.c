/*
 * sealir - one open block filled from otlp-load's generator and sealed,
 * for callgrind (--toggle-collect=blk_write_ex) and for the seal's CPU time
 * alone; the files it keeps let two builds be `cmp`-ed.
 *
 *   build/sealir logs|traces|metrics RECORDS MIB SEALS DIR [keep] [hot] [uniq]
 *                [cold] [file=PATH]
 *
 * 16 requests of RECORDS records each (seed 42) are decoded and appended,
 * cycled, until the block holds MIB MiB; it is then sealed SEALS times
 * into DIR (plain codec; with "hot", as the daemon seals: blk_hot_wopts at
 * BLK_HOT_ZSTD_LEVEL). Prints the thread CPU ns per record of each seal
 * and their median. Without "keep" the files are removed after each seal.
 * With "uniq" every request appended is a fresh one (request i for append
 * i, as blkbench fills its blocks and otlp-load's pool is larger than a
 * block): the 16 cycled requests repeat rows the time sort puts side by
 * side, which zstd compresses as no live corpus does.
 * With "cold" 128 MiB of other memory is written and read before each seal
 * (outside the timing), so the seal reads the open block from memory, not
 * from the caches its append left warm: as the daemon's sealer does, whose
 * block was written while requests, WAL writes and socket buffers went
 * through the caches.
 * With "file=PATH" the block is filled from one protobuf Export*ServiceRequest
 * instead (RECORDS is then ignored): decoded once and appended over and
 * over, its timestamps as the request has them, as the daemon's blocks hold
 * a peer's fixed payload (/work/shared/peers/fluent-bit/logs-1000.pb).
 * bench/PERFORMANCE.md "The body pass" uses it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "bench/otlp-load/gen.h"
#include "proto/pbdec.h"
#include "storage/block.h"
#include "storage/oblock.h"

#define N 16
#define MAX_SEALS 64

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* The whole of |path| into |out|: 0, or -1 with a message. */
static int read_file(const char *path, struct vbuf *out)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        fprintf(stderr, "sealir: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (vbuf_put(out, buf, n) < 0) {
            rc = -1;
            break;
        }
    }
    if (ferror(f)) {
        rc = -1;
    }
    fclose(f);
    if (rc < 0) {
        fprintf(stderr, "sealir: %s: read failed\n", path);
    }
    return rc;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

#define EVICT_BYTES (128u << 20)

/* Writes then reads |p|'s EVICT_BYTES, a line at a time: what the caches
 * held before is gone. */
static void flush_caches(uint8_t *p)
{
    memset(p, 1, EVICT_BYTES);
    volatile uint64_t sum = 0;
    for (size_t i = 0; i < EVICT_BYTES; i += 64) {
        sum += p[i];
    }
    (void)sum;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "sealir logs|traces|metrics RECORDS MIB SEALS DIR [keep] [hot] [uniq]\n");
        return 2;
    }
    enum signal s = !strcmp(argv[1], "logs")     ? SIG_LOGS
                    : !strcmp(argv[1], "traces") ? SIG_TRACES
                                                 : SIG_METRICS;
    uint32_t records = (uint32_t)strtoul(argv[2], NULL, 10);
    uint64_t limit = strtoull(argv[3], NULL, 10) << 20;
    int seals = atoi(argv[4]);
    bool keep = false, hot = false, uniq = false, cold = false;
    const char *file = NULL;
    for (int i = 6; i < argc; i++) {
        keep |= !strcmp(argv[i], "keep");
        hot |= !strcmp(argv[i], "hot");
        uniq |= !strcmp(argv[i], "uniq");
        cold |= !strcmp(argv[i], "cold");
        if (!strncmp(argv[i], "file=", 5)) {
            file = argv[i] + 5;
        }
    }
    struct blk_wopts ho = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, s);
    if (records == 0 || limit == 0 || seals < 1 || seals > MAX_SEALS) {
        fprintf(stderr, "sealir: bad arguments\n");
        return 2;
    }
    struct gen_config gc = {
        .signal = s, .seed = 42, .time_base_ns = 1767225600000000000ull, .records = records};
    static struct batch *bt[N];
    static struct vbuf req[N]; /* the batches point into them */
    int nreq = N;
    if (file != NULL) { /* one request, appended over and over */
        char err[200];
        nreq = 1;
        uniq = false;
        vbuf_init(&req[0]);
        bt[0] = batch_new(s);
        if (read_file(file, &req[0]) < 0) {
            return 1;
        }
        if (pbdec_decode(s, req[0].p, req[0].len, bt[0], err, sizeof err) < 0) {
            fprintf(stderr, "sealir: %s: %s\n", file, err);
            return 1;
        }
    }
    for (int i = 0; i < nreq && file == NULL; i++) {
        char err[200];
        vbuf_init(&req[i]);
        bt[i] = batch_new(s);
        if (gen_request(&gc, (uint64_t)i, GEN_PROTOBUF, &req[i], NULL) < 0 ||
            pbdec_decode(s, req[i].p, req[i].len, bt[i], err, sizeof err) < 0) {
            fprintf(stderr, "sealir: request %d\n", i);
            return 1;
        }
    }
    oblock *ob;
    if (oblock_new(s, &ob) < 0) {
        return 1;
    }
    for (uint64_t i = 0; oblock_bytes(ob) < limit && i < 100000; i++) {
        if (uniq && i >= N) {
            char err[200];
            struct batch *b = bt[i % N];
            req[i % N].len = 0;
            batch_reset(b, s);
            if (gen_request(&gc, i, GEN_PROTOBUF, &req[i % N], NULL) < 0 ||
                pbdec_decode(s, req[i % N].p, req[i % N].len, b, err, sizeof err) < 0) {
                fprintf(stderr, "sealir: request %llu\n", (unsigned long long)i);
                return 1;
            }
        }
        if (oblock_append(ob, bt[i % (uint64_t)nreq], i + 1) < 0) {
            fprintf(stderr, "sealir: append\n");
            return 1;
        }
    }
    uint64_t rows = oblock_rows(ob);
    double ns[MAX_SEALS];
    uint8_t *evict = cold ? malloc(EVICT_BYTES) : NULL;
    if (cold && evict == NULL) {
        return 1;
    }
    for (int k = 0; k < seals; k++) {
        struct blk_meta m = {.shard = 0, .wal_seq = oblock_max_seq(ob), .seal_id = (uint64_t)k + 1};
        char path[700];
        if (evict != NULL) {
            flush_caches(evict);
        }
        double t0 = cpu_now();
        int rc = blk_write_ex(argv[5], ob, rows, &m, hot ? &ho : NULL, path, sizeof path);
        double t1 = cpu_now();
        if (rc < 0) {
            fprintf(stderr, "sealir: seal %d\n", rc);
            return 1;
        }
        ns[k] = (t1 - t0) / (double)rows;
        printf("seal %d %s %.0f ns/record\n", k, path, ns[k]);
        if (!keep) {
            unlink(path);
        }
    }
    qsort(ns, (size_t)seals, sizeof ns[0], cmp_d);
    printf("%s %llu rows, median seal %.0f ns/record\n", argv[1], (unsigned long long)rows,
           ns[seals / 2]);
    free(evict);
    oblock_free(ob);
    return 0;
}
