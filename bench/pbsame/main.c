/*
 * pbsame - a fixed protobuf corpus through pbdec and the open block, to show
 * that two builds store the same bytes and to count instructions per record.
 *
 *   build/pbsame seal  logs|traces|metrics DIR   seal the corpus (plain, zstd)
 *   build/pbsame heap  logs|traces|metrics       decoded batches' counts + heaps
 *   build/pbsame ir    logs|traces|metrics       for callgrind --toggle-collect=
 *                                                do_decode / do_append
 *   build/pbsame loop  logs|traces|metrics SECONDS ROWS
 *                      decode + append per thread CPU-second; a new open block
 *                      every ROWS rows (0: at 32 MiB, as the daemon seals;
 *                      1: decode only)
 *
 * The corpus is otlp-load's generator, seed 42, 16 requests of 1,000
 * records; or, with PBSAME_PAYLOAD=FILE, that protobuf export request 16
 * times (e.g. peer.py's wrk payload, ../shared/peers/fluent-bit/
 * logs-1000.pb: one request repeated, as wrk sends it). Two builds' `seal`
 * files and `heap` output must `cmp` equal.
 * bench/PERFORMANCE.md "Protobuf decode and append per core" uses it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "bench/otlp-load/gen.h"
#include "proto/pbdec.h"
#include "storage/block.h"
#include "storage/oblock.h"

#define N 16
static struct vbuf req[N];

static struct batch *bt[N];

static void decode_all(enum signal s)
{
    char err[200];
    for (int i = 0; i < N; i++) {
        batch_reset(bt[i], s);
        if (pbdec_decode(s, req[i].p, req[i].len, bt[i], err, sizeof err) < 0) {
            fprintf(stderr, "decode: %s\n", err);
            exit(1);
        }
    }
}

static __attribute__((noinline)) void do_decode(enum signal s)
{
    decode_all(s);
}

static __attribute__((noinline)) void do_append(oblock *ob)
{
    for (int i = 0; i < N; i++) {
        if (oblock_append(ob, bt[i], (uint64_t)i + 1) < 0) {
            exit(2);
        }
    }
}

int main(int argc, char **argv)
{
    if (argc < 3 || (!strcmp(argv[1], "seal") && argc < 4) ||
        (!strcmp(argv[1], "loop") && argc < 5)) {
        fprintf(stderr, "pbsame seal|heap|ir|loop logs|traces|metrics [DIR | SECONDS ROWS]\n");
        return 2;
    }
    enum signal s = !strcmp(argv[2], "logs")     ? SIG_LOGS
                    : !strcmp(argv[2], "traces") ? SIG_TRACES
                                                 : SIG_METRICS;
    struct gen_config gc = {
        .signal = s, .seed = 42, .time_base_ns = 1767225600000000000ull, .records = 1000};
    const char *payload = getenv("PBSAME_PAYLOAD");
    FILE *pf = payload != NULL ? fopen(payload, "rb") : NULL;
    if (payload != NULL && pf == NULL) {
        perror(payload);
        return 1;
    }
    for (int i = 0; i < N; i++) {
        vbuf_init(&req[i]);
        if (pf != NULL) {
            char chunk[65536];
            size_t n;
            rewind(pf);
            while ((n = fread(chunk, 1, sizeof chunk, pf)) > 0) {
                if (vbuf_put(&req[i], chunk, n) < 0)
                    return 1;
            }
        } else if (gen_request(&gc, (uint64_t)i, GEN_PROTOBUF, &req[i], NULL) < 0) {
            return 1;
        }
        bt[i] = batch_new(s);
    }
    if (pf != NULL)
        fclose(pf);
    oblock *ob;
    if (oblock_new(s, &ob) < 0)
        return 1;
    decode_all(s); /* warm: batch arrays grown */
    uint64_t rows = 0;
    for (int i = 0; i < N; i++)
        rows += bt[i]->n_rows;
    if (!strcmp(argv[1], "loop")) {
        double secs = atof(argv[3]);
        uint64_t rot = strtoull(argv[4], NULL, 10), recs = 0;
        struct timespec a, c, w0, w1;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        clock_gettime(CLOCK_MONOTONIC, &w0);
        for (uint64_t it = 0;; it++) {
            char err[200];
            batch_reset(bt[0], s);
            if (pbdec_decode(s, req[it % N].p, req[it % N].len, bt[0], err, sizeof err) < 0)
                return 1;
            if (rot == 1) { /* decode only */
                recs += bt[0]->n_rows;
                clock_gettime(CLOCK_MONOTONIC, &w1);
                if ((double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9 > secs)
                    break;
                continue;
            }
            if (rot ? oblock_rows(ob) > rot : oblock_bytes(ob) >= (32u << 20)) {
                oblock_free(ob);
                if (oblock_new(s, &ob) < 0)
                    return 1;
            }
            if (oblock_append(ob, bt[0], it + 1) < 0)
                return 1;
            recs += bt[0]->n_rows;
            clock_gettime(CLOCK_MONOTONIC, &w1);
            if ((double)(w1.tv_sec - w0.tv_sec) + (w1.tv_nsec - w0.tv_nsec) / 1e9 > secs)
                break;
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c);
        double cpu = (double)(c.tv_sec - a.tv_sec) + (c.tv_nsec - a.tv_nsec) / 1e9;
        printf("%s rot=%s decode+append %.0f records/cpu-s\n", argv[2], argv[4], recs / cpu);
        return 0;
    }
    if (!strcmp(argv[1], "heap")) {
        for (int i = 0; i < N; i++) {
            printf("%u %u %u %u %zu\n", bt[i]->n_rows, bt[i]->n_resources, bt[i]->n_scopes,
                   bt[i]->n_metrics, bt[i]->heap.len);
            fwrite(bt[i]->heap.p, 1, bt[i]->heap.len, stdout);
        }
        return 0;
    }
    if (!strcmp(argv[1], "ir")) {
        do_append(ob);
        do_decode(s);
        do_append(ob);
        printf("records per pass %llu\n", (unsigned long long)rows);
        return 0;
    }
    if (strcmp(argv[1], "seal") != 0) {
        fprintf(stderr, "pbsame: unknown mode %s\n", argv[1]);
        return 2;
    }
    do_append(ob);
    struct blk_meta m = {.shard = 0, .wal_seq = oblock_max_seq(ob), .seal_id = 7};
    char path[700];
    int rc = blk_write_ex(argv[3], ob, oblock_rows(ob), &m, NULL, path, sizeof path);
    if (rc < 0) {
        fprintf(stderr, "seal %d\n", rc);
        return 1;
    }
    struct blk_wopts zo = {.codec = BLK_CODEC_ZSTD};
    m.seal_id = 8;
    rc = blk_write_ex(argv[3], ob, oblock_rows(ob), &m, &zo, path, sizeof path);
    if (rc < 0) {
        fprintf(stderr, "seal %d\n", rc);
        return 1;
    }
    printf("%s %llu rows\n", path, (unsigned long long)oblock_rows(ob));
    return 0;
}
