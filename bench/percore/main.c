/*
 * percore - the "per core, no I/O" bench case: decode and append per signal
 * on one thread, the append and seal cost per record, and the cost of one
 * WAL append.
 *
 *   build/percore [--seconds S] [--records-per-request N] [--formats protobuf|all]
 *                 [--block-bytes BYTES] [--seal-blocks N] [--wal-dir DIR] [--blk-dir DIR]
 *                 [--signals all|logs|traces|metrics]
 *
 * Requests come from otlp-load's generator (bench/otlp-load/gen.h), encoded
 * once up front; the timed loops only decode (proto/pbdec.c,
 * proto/jsondec.c) and append (storage/oblock.c).
 *
 * Every rate is given twice: per CPU-second of this thread
 * (CLOCK_THREAD_CPUTIME_ID, the figure that survives a shared machine: time
 * the thread spent waiting for a core is not counted) and per wall second.
 * "cpu_share" is thread CPU time over wall time: well below 1 means other
 * processes took the core and the wall figures understate the code.
 *
 * Sections of the JSON object it prints:
 *   <signal>_<format>  decode alone and decode + append, records/s (the
 *                      open block replaced at --block-bytes, as the daemon
 *                      seals it at --block-target)
 *   append_seal        per signal: batches decoded once, then appended into
 *                      an open block until it holds --block-bytes, then
 *                      sealed with blk_write (plain tables; the file is
 *                      fsynced, so seal wall time includes the disk, seal CPU
 *                      time does not); --seal-blocks blocks, medians; one
 *                      extra zstd seal of the last block gives its size
 *   wal_append_4k      latency of wal_append of a 4 KiB body (one write(2),
 *                      no fsync) on --wal-dir
 * --signals limits the decode and append_seal sections to one signal (to
 * profile or A/B one signal's seal); the default is all three.
 * --wal-dir and --blk-dir must be on a real disk (not tmpfs) for the wall
 * figures to mean anything; the report says which filesystem they were on.
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
#include "storage/block.h"
#include "storage/oblock.h"
#include "storage/wal.h"

#define POOL 16
#define MAX_SEAL_BLOCKS 15
#define TMPFS_MAGIC_ 0x01021994

static const char *const signal_names[] = {"", "logs", "traces", "metrics"};

static double clock_s(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now_s(void)
{
    return clock_s(CLOCK_MONOTONIC);
}

static double cpu_s(void)
{
    return clock_s(CLOCK_THREAD_CPUTIME_ID);
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool on_tmpfs(const char *dir)
{
    struct statfs fs;
    return statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC_;
}

static int fresh_dir(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void remove_dir(const char *dir)
{
    char cmd[700];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        fprintf(stderr, "percore: could not remove %s\n", dir);
    }
}

struct pool {
    struct vbuf req[POOL];
    uint32_t records;
};

static int make_pool(struct pool *p, enum signal s, enum gen_format f, uint32_t records)
{
    struct gen_config gc = {
        .signal = s, .seed = 42, .time_base_ns = 1767225600000000000ull, .records = records};
    for (int i = 0; i < POOL; i++) {
        vbuf_init(&p->req[i]);
        if (gen_request(&gc, (uint64_t)i, f, &p->req[i], NULL) < 0) {
            return -1;
        }
    }
    p->records = records;
    return 0;
}

static void free_pool(struct pool *p)
{
    for (int i = 0; i < POOL; i++) {
        vbuf_fini(&p->req[i]);
    }
}

static void decode_or_die(const struct vbuf *r, enum signal s, enum gen_format f, arena *a,
                          struct batch *b)
{
    char err[200];
    int rc;
    batch_reset(b, s);
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
}

struct rate {
    uint64_t records;
    double wall_s;
    double cpu_s;
};

/* Decode (and append when |append|) for |secs| of wall time. The open
 * block is replaced once it holds |block_bytes|, as the daemon seals it at
 * --block-target: its chunks go back to the chunk cache and are reused, so
 * the append is measured on warm memory, as in the daemon, not on ever
 * fresh pages. */
static struct rate run(struct pool *p, enum signal s, enum gen_format f, bool append, double secs,
                       size_t block_bytes)
{
    struct batch *b = batch_new(s);
    arena *a = arena_new(0);
    oblock *ob = NULL;
    uint64_t records = 0, seq = 0;

    if (b == NULL || a == NULL || (append && oblock_new(s, &ob) < 0)) {
        fprintf(stderr, "percore: out of memory\n");
        exit(1);
    }
    double t0 = now_s(), c0 = cpu_s(), t = t0;
    for (uint64_t i = 0; t - t0 < secs; i++) {
        decode_or_die(&p->req[i % POOL], s, f, a, b);
        if (append) {
            if (oblock_bytes(ob) >= block_bytes) {
                oblock_free(ob);
                if (oblock_new(s, &ob) < 0) {
                    exit(1);
                }
            }
            if (oblock_append(ob, b, ++seq) < 0) {
                fprintf(stderr, "percore: append failed\n");
                exit(1);
            }
        }
        records += b->n_rows;
        if ((i & 7) == 7) {
            t = now_s();
        }
    }
    struct rate r = {.records = records, .wall_s = now_s() - t0, .cpu_s = cpu_s() - c0};
    oblock_free(ob);
    batch_free(b);
    arena_free(a);
    return r;
}

static double per(double n, double d)
{
    return d > 0 ? n / d : 0;
}

/* ---- append and seal ---- */

struct seal_fig {
    int blocks;
    double rows;             /* per block, median */
    double oblock_bytes;     /* open block bytes at seal, median */
    double append_cpu_ns;    /* per record */
    double append_wall_ns;   /* per record */
    double seal_cpu_ns;      /* per record */
    double seal_wall_ns;     /* per record */
    double file_bytes;       /* per record, plain */
    double zstd_file_bytes;  /* per record, zstd (last block) */
    double zstd_seal_cpu_ns; /* per record (last block) */
};

static int seal_once(const char *dir, const oblock *ob, uint64_t seal_id, const struct blk_wopts *o,
                     double *cpu, double *wall, double *bytes)
{
    struct blk_meta m = {.shard = 0, .wal_seq = oblock_max_seq(ob), .seal_id = seal_id};
    char path[700];
    double t0 = now_s(), c0 = cpu_s();
    int rc = blk_write_ex(dir, ob, oblock_rows(ob), &m, o, path, sizeof(path));
    *cpu = cpu_s() - c0;
    *wall = now_s() - t0;
    if (rc < 0) {
        fprintf(stderr, "percore: blk_write in %s failed: %s\n", dir, strerror(-rc));
        return rc;
    }
    struct stat st;
    if (stat(path, &st) < 0) {
        return -errno;
    }
    *bytes = (double)st.st_size;
    unlink(path);
    return 0;
}

static int append_seal(enum signal s, uint32_t rpr, size_t block_bytes, int nblocks,
                       const char *dir, struct seal_fig *out)
{
    struct pool p;
    struct batch *b[POOL];
    arena *a = arena_new(0);
    double rows[MAX_SEAL_BLOCKS], obytes[MAX_SEAL_BLOCKS], acpu[MAX_SEAL_BLOCKS],
        awall[MAX_SEAL_BLOCKS], scpu[MAX_SEAL_BLOCKS], swall[MAX_SEAL_BLOCKS],
        fbytes[MAX_SEAL_BLOCKS];
    uint64_t seq = 0;
    int rc = 0;

    if (a == NULL || make_pool(&p, s, GEN_PROTOBUF, rpr) < 0) {
        return -ENOMEM;
    }
    for (int i = 0; i < POOL; i++) {
        b[i] = batch_new(s);
        if (b[i] == NULL) {
            return -ENOMEM;
        }
        decode_or_die(&p.req[i], s, GEN_PROTOBUF, a, b[i]);
    }
    memset(out, 0, sizeof(*out));
    for (int k = 0; k < nblocks && rc == 0; k++) {
        oblock *ob;
        if (oblock_new(s, &ob) < 0) {
            return -ENOMEM;
        }
        double t0 = now_s(), c0 = cpu_s();
        for (uint64_t i = 0; oblock_bytes(ob) < block_bytes; i++) {
            if (oblock_append(ob, b[i % POOL], ++seq) < 0) {
                fprintf(stderr, "percore: append failed\n");
                exit(1);
            }
        }
        double n = (double)oblock_rows(ob);
        rows[k] = n;
        obytes[k] = (double)oblock_bytes(ob);
        acpu[k] = (cpu_s() - c0) * 1e9 / n;
        awall[k] = (now_s() - t0) * 1e9 / n;
        double c, w, fb;
        rc = seal_once(dir, ob, (uint64_t)k + 1, NULL, &c, &w, &fb);
        scpu[k] = c * 1e9 / n;
        swall[k] = w * 1e9 / n;
        fbytes[k] = fb / n;
        if (rc == 0 && k == nblocks - 1) {
            struct blk_wopts zo = {.codec = BLK_CODEC_ZSTD};
            rc = seal_once(dir, ob, (uint64_t)k + 100, &zo, &c, &w, &fb);
            out->zstd_file_bytes = fb / n;
            out->zstd_seal_cpu_ns = c * 1e9 / n;
        }
        oblock_free(ob);
    }
    if (rc == 0) {
        out->blocks = nblocks;
        out->rows = median(rows, nblocks);
        out->oblock_bytes = median(obytes, nblocks);
        out->append_cpu_ns = median(acpu, nblocks);
        out->append_wall_ns = median(awall, nblocks);
        out->seal_cpu_ns = median(scpu, nblocks);
        out->seal_wall_ns = median(swall, nblocks);
        out->file_bytes = median(fbytes, nblocks);
    }
    for (int i = 0; i < POOL; i++) {
        batch_free(b[i]);
    }
    arena_free(a);
    free_pool(&p);
    return rc;
}

/* ---- main ---- */

static void usage(void)
{
    fprintf(stderr, "usage: percore [--seconds S] [--records-per-request N] "
                    "[--formats protobuf|all] [--block-bytes BYTES] [--seal-blocks N] "
                    "[--wal-dir DIR] [--blk-dir DIR] [--signals all|logs|traces|metrics]\n");
}

int main(int argc, char **argv)
{
    double secs = 2.0;
    uint32_t rpr = 1000;
    bool json = true;
    size_t block_bytes = 32u << 20;
    int seal_blocks = 3;
    const char *wal_dir = "bench/data/percore-wal";
    const char *blk_dir = "bench/data/percore-blk";
    int only = 0; /* 0: every signal, else that one */
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            usage();
            return 2;
        } else if (strcmp(argv[i], "--seconds") == 0) {
            secs = atof(v);
        } else if (strcmp(argv[i], "--records-per-request") == 0) {
            rpr = (uint32_t)atoi(v);
        } else if (strcmp(argv[i], "--formats") == 0) {
            json = strcmp(v, "all") == 0;
        } else if (strcmp(argv[i], "--block-bytes") == 0) {
            block_bytes = (size_t)strtoull(v, NULL, 10);
        } else if (strcmp(argv[i], "--seal-blocks") == 0) {
            seal_blocks = atoi(v);
        } else if (strcmp(argv[i], "--wal-dir") == 0) {
            wal_dir = v;
        } else if (strcmp(argv[i], "--blk-dir") == 0) {
            blk_dir = v;
        } else if (strcmp(argv[i], "--signals") == 0) {
            only = -1;
            for (int k = 0; k <= 3; k++) {
                if (strcmp(v, k == 0 ? "all" : signal_names[k]) == 0) {
                    only = k;
                }
            }
            if (only < 0) {
                usage();
                return 2;
            }
        } else {
            usage();
            return 2;
        }
    }
    if (secs <= 0 || rpr == 0 || block_bytes < (1u << 20) || seal_blocks < 1 ||
        seal_blocks > MAX_SEAL_BLOCKS) {
        usage();
        return 2;
    }
    printf("{\"case\":\"percore\",\"seconds_per_run\":%.2f,\"records_per_request\":%u,"
           "\"rates_per\":\"thread CPU-second and wall second\"",
           secs, rpr);
    for (int s = 1; s <= 3; s++) {
        if (only != 0 && s != only) {
            continue;
        }
        for (int f = 0; f < (json ? 2 : 1); f++) {
            struct pool p;
            if (make_pool(&p, (enum signal)s, (enum gen_format)f, rpr) < 0) {
                fprintf(stderr, "percore: generator failed\n");
                return 1;
            }
            struct rate d = run(&p, (enum signal)s, (enum gen_format)f, false, secs, block_bytes);
            struct rate da = run(&p, (enum signal)s, (enum gen_format)f, true, secs, block_bytes);
            printf(",\"%s_%s\":{\"decode_records_per_cpu_s\":%.0f,"
                   "\"decode_append_records_per_cpu_s\":%.0f,"
                   "\"decode_records_per_s\":%.0f,\"decode_append_records_per_s\":%.0f,"
                   "\"cpu_share\":%.3f,\"records\":%llu,\"cpu_s\":%.3f,\"wall_s\":%.3f}",
                   signal_names[s], f == GEN_PROTOBUF ? "protobuf" : "json",
                   per((double)d.records, d.cpu_s), per((double)da.records, da.cpu_s),
                   per((double)d.records, d.wall_s), per((double)da.records, da.wall_s),
                   per(d.cpu_s + da.cpu_s, d.wall_s + da.wall_s),
                   (unsigned long long)(d.records + da.records), d.cpu_s + da.cpu_s,
                   d.wall_s + da.wall_s);
            free_pool(&p);
        }
    }

    /* Append and seal per record. */
    if (fresh_dir(blk_dir) < 0) {
        return 1;
    }
    printf(",\"append_seal\":{\"block_bytes\":%zu,\"blk_dir_tmpfs\":%s", block_bytes,
           on_tmpfs(blk_dir) ? "true" : "false");
    for (int s = 1; s <= 3; s++) {
        if (only != 0 && s != only) {
            continue;
        }
        struct seal_fig sf;
        int rc = append_seal((enum signal)s, rpr, block_bytes, seal_blocks, blk_dir, &sf);
        if (rc < 0) {
            fprintf(stderr, "percore: append/seal of %s failed: %s\n", signal_names[s],
                    strerror(-rc));
            return 1;
        }
        printf(",\"%s\":{\"blocks\":%d,\"rows_per_block\":%.0f,\"open_block_bytes\":%.0f,"
               "\"append_cpu_ns_per_record\":%.1f,\"append_wall_ns_per_record\":%.1f,"
               "\"seal_cpu_ns_per_record\":%.1f,\"seal_wall_ns_per_record\":%.1f,"
               "\"block_file_bytes_per_record\":%.2f,\"zstd_block_file_bytes_per_record\":%.2f,"
               "\"zstd_seal_cpu_ns_per_record\":%.1f}",
               signal_names[s], sf.blocks, sf.rows, sf.oblock_bytes, sf.append_cpu_ns,
               sf.append_wall_ns, sf.seal_cpu_ns, sf.seal_wall_ns, sf.file_bytes,
               sf.zstd_file_bytes, sf.zstd_seal_cpu_ns);
    }
    printf("}");
    remove_dir(blk_dir);

    /* WAL append of a 4 KiB body: one write(2) each. */
    if (fresh_dir(wal_dir) < 0) {
        return 1;
    }
    bool tmpfs = on_tmpfs(wal_dir);
    wal *w;
    if (wal_open(wal_dir, 0, NULL, NULL, &w) < 0) {
        fprintf(stderr, "percore: cannot open a WAL in %s\n", wal_dir);
        return 1;
    }
    enum { N = 20000 };
    static double lat[N];
    static uint8_t body[4096];
    memset(body, 'x', sizeof(body));
    double c0 = cpu_s();
    for (int i = 0; i < N; i++) {
        double t0 = now_s();
        if (wal_append(w, SIG_LOGS, OTLP_PROTOBUF, body, sizeof(body)) < 0) {
            return 1;
        }
        lat[i] = (now_s() - t0) * 1e6;
    }
    double wal_cpu = cpu_s() - c0;
    wal_close(w);
    qsort(lat, N, sizeof(double), cmp_d);
    printf(",\"wal_append_4k\":{\"samples\":%d,\"p50_us\":%.2f,\"p99_us\":%.2f,\"max_us\":%.2f,"
           "\"cpu_us_per_append\":%.2f,\"tmpfs\":%s}}\n",
           N, lat[N / 2], lat[N * 99 / 100], lat[N - 1], wal_cpu * 1e6 / N,
           tmpfs ? "true" : "false");
    remove_dir(wal_dir);
    return 0;
}
