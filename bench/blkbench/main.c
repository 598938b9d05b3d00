/*
 * blkbench - the storage measurements of issue 3, on sealed block files
 * and WAL segments on a real disk, in one process (no daemon):
 *
 *   build/blkbench [--dir DIR] [--block-bytes BYTES] [--records-per-request N]
 *                  [--seal-reps N] [--open-reps N] [--wal-frames N] [--replay-reps N]
 *                  [--keep 0|1] [--open-only 0|1] [--cold-level N] [--hot-level N]
 *
 * Rows come from otlp-load's generator (bench/otlp-load/gen.h): request i,
 * i = 0, 1, ... (distinct requests, times ascending as on a live shard), is
 * encoded as protobuf, decoded (proto/pbdec.c) and appended to one open
 * block per signal until the block holds --block-bytes. Generation and
 * append are not timed. Then, per signal:
 *
 *   seal     blk_write of that open block, --seal-reps times plain and once
 *            zstd (attrs and detail tables; root plain), and --seal-reps times
 *            as the daemon seals (block.h's blk_hot_wopts: the signal's zstd
 *            tables at --hot-level, default BLK_HOT_ZSTD_LEVEL: "hot"): CPU ns
 *            per record of this thread (CLOCK_THREAD_CPUTIME_ID; the fsync
 *            waits are not CPU) and wall ns per record; medians.
 *   cold     the plain file compacted alone into a cold block (compact_merge:
 *            every table zstd at --cold-level, default 3, root included): CPU and wall ns per
 *            record, and its bytes as below ("cold")
 *   bytes    the plain and the zstd file of that block, per record, split
 *            by table kind (root / attrs / detail, from blk_table_info), the
 *            footer (dictionaries, blooms, zone maps: blk_layout) and the
 *            rest (header, trailer).
 *   open     four arms, each one open of the block file (and blk_load when
 *            it says so), the reference dropped outside the timing:
 *              split_cold    blk_open_ex(BLK_OPEN_NO_CACHE): trailer, footer
 *                            and root table hashed (the lazy split)
 *              full_cold     the same, then blk_load(BLK_ALL): every table
 *                            hashed and decoded at open (no split)
 *              split_warm    blk_open on a settled file whose tables the
 *                            verification cache already holds
 *              full_warm     blk_open + blk_load(BLK_ALL), cache warm
 *            The arms alternate inside each pass (the order rotates pass by
 *            pass); --open-reps passes; medians of CPU and wall microseconds,
 *            the tables and bytes hashed per open (from blk_get_stats: proves
 *            what each arm did), and per-pass ratios (median and how many
 *            passes had the ratio above 1). The page cache is warm in every
 *            arm (the file was just written): the arms differ in hashing
 *            and decoding, not in disk reads. The files are left to settle
 *            past the verification cache's default window (2 s) first.
 *   replay   --wal-frames frames (request i, encoded) appended with wal.h to
 *            a fresh WAL, fdatasynced and closed; then wal_open replays it
 *            through pbdec decode + oblock_append into a fresh open block
 *            (as storage/shard.c does, without sealing), --replay-reps times
 *            in pairs: page cache warm, then cold (posix_fadvise DONTNEED on
 *            every segment first, so the frames are read from the disk).
 *            frames/s, MB/s (frame bytes with headers, wal_stats) and
 *            records/s per CPU-second and per wall second; medians. The
 *            rows replayed are checked against frames x records.
 *
 * One JSON object on stdout; progress and errors on stderr. DIR (default
 * bench/data/blkbench) must not be tmpfs (refused); it is emptied first and
 * removed at the end (unless --keep 1). --open-only 1: see open_only_main.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include "bench/otlp-load/gen.h"
#include "proto/pbdec.h"
#include "storage/block.h"
#include "storage/compact.h"
#include "storage/oblock.h"
#include "storage/vcache.h"
#include "storage/wal.h"

#define MAX_REPS 101
#define TMPFS_MAGIC_ 0x01021994
#define TIME_BASE_NS 1767225600000000000ull
#define SEED 42

static const char *const signal_names[] = {"", "logs", "traces", "metrics"};

/* ---- clocks, statistics, files ---- */

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

/* Median of v[0..n) (sorts a copy). */
static double median(const double *v, int n)
{
    double t[MAX_REPS];
    if (n <= 0) {
        return 0;
    }
    memcpy(t, v, (size_t)n * sizeof(double));
    qsort(t, (size_t)n, sizeof(double), cmp_d);
    return n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
}

static int count_above(const double *v, int n, double x)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        k += v[i] > x;
    }
    return k;
}

static double per(double n, double d)
{
    return d > 0 ? n / d : 0;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "blkbench: %s: %s\n", what, rc < 0 ? strerror(-rc) : "failed");
    exit(1);
}

static int run_cmd(const char *fmt, const char *dir)
{
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), fmt, dir, dir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ---- rows: generated requests, decoded ---- */

struct gen {
    enum signal sig;
    uint32_t rpr;
    struct vbuf req;
    struct batch *b;
};

static void gen_init(struct gen *g, enum signal s, uint32_t rpr)
{
    g->sig = s;
    g->rpr = rpr;
    vbuf_init(&g->req);
    g->b = batch_new(s);
    if (g->b == NULL) {
        die("batch_new", -ENOMEM);
    }
}

static void gen_fini(struct gen *g)
{
    vbuf_fini(&g->req);
    batch_free(g->b);
}

/* Encodes request |idx| into g->req (replacing it). */
static void gen_encode(struct gen *g, uint64_t idx)
{
    struct gen_config gc = {
        .signal = g->sig, .seed = SEED, .time_base_ns = TIME_BASE_NS, .records = g->rpr};
    g->req.len = 0;
    int rc = gen_request(&gc, idx, GEN_PROTOBUF, &g->req, NULL);
    if (rc < 0) {
        die("gen_request", rc);
    }
}

static int decode(enum signal s, const uint8_t *p, size_t n, struct batch *b)
{
    char err[200];
    batch_reset(b, s);
    int rc = pbdec_decode(s, p, n, b, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "blkbench: decode failed: %s\n", err);
    }
    return rc;
}

/* An open block of signal |s| holding at least |bytes|. */
static oblock *fill_block(struct gen *g, size_t bytes)
{
    oblock *ob;
    if (oblock_new(g->sig, &ob) < 0) {
        die("oblock_new", -ENOMEM);
    }
    for (uint64_t i = 0; oblock_bytes(ob) < bytes; i++) {
        gen_encode(g, i);
        if (decode(g->sig, g->req.p, g->req.len, g->b) < 0) {
            exit(1);
        }
        int rc = oblock_append(ob, g->b, i + 1);
        if (rc < 0) {
            die("oblock_append", rc);
        }
    }
    return ob;
}

/* ---- seal ---- */

struct seal_fig {
    uint64_t rows;
    size_t oblock_bytes;
    int reps;
    double cpu_ns[MAX_REPS], wall_ns[MAX_REPS]; /* per record */
    double zstd_cpu_ns, zstd_wall_ns;
    double hot_cpu_ns[MAX_REPS], hot_wall_ns[MAX_REPS];  /* the seal's default */
    char plain_path[600], zstd_path[600], hot_path[600]; /* the files kept for bytes and open */
};

static void seal_one(const char *dir, const oblock *ob, uint64_t id, const struct blk_wopts *o,
                     double *cpu_ns, double *wall_ns, char *path, size_t cap)
{
    struct blk_meta m = {.shard = 0, .wal_seq = oblock_max_seq(ob), .seal_id = id};
    double n = (double)oblock_rows(ob);
    double t0 = now_s(), c0 = cpu_s();
    int rc = blk_write_ex(dir, ob, oblock_rows(ob), &m, o, path, cap);
    *cpu_ns = (cpu_s() - c0) * 1e9 / n;
    *wall_ns = (now_s() - t0) * 1e9 / n;
    if (rc < 0) {
        die("blk_write", rc);
    }
}

static int hot_level = BLK_HOT_ZSTD_LEVEL; /* --hot-level */

static void seal_bench(const char *dir, const oblock *ob, int reps, struct seal_fig *f)
{
    char path[600];
    f->rows = oblock_rows(ob);
    f->oblock_bytes = oblock_bytes(ob);
    f->reps = reps;
    for (int r = 0; r < reps; r++) {
        seal_one(dir, ob, (uint64_t)r + 1, NULL, &f->cpu_ns[r], &f->wall_ns[r], path, sizeof(path));
        if (r < reps - 1) {
            unlink(path);
        } else {
            snprintf(f->plain_path, sizeof(f->plain_path), "%s", path);
        }
    }
    struct blk_wopts zo = {.codec = BLK_CODEC_ZSTD};
    seal_one(dir, ob, 1000, &zo, &f->zstd_cpu_ns, &f->zstd_wall_ns, f->zstd_path,
             sizeof(f->zstd_path));
    /* The daemon's seal (storage/sealer.c): every table zstd at hot_level. */
    struct blk_wopts ho = blk_hot_wopts(hot_level, oblock_signal(ob));
    for (int r = 0; r < reps; r++) {
        seal_one(dir, ob, 2000 + (uint64_t)r, &ho, &f->hot_cpu_ns[r], &f->hot_wall_ns[r],
                 f->hot_path, sizeof(f->hot_path));
        if (r < reps - 1) {
            unlink(f->hot_path);
        }
    }
}

/* ---- the cold tier: the plain block compacted (storage/compact.h) ---- */

struct cold_fig {
    double cpu_ns, wall_ns; /* per record */
    char path[700];
};

static int cold_level = 3; /* --cold-level */

static void cold_bench(const char *dir, const char *plain_path, struct cold_fig *f)
{
    char err[200];
    blk *b;
    int rc = blk_open_ex(plain_path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "blkbench: open %s: %s\n", plain_path, err);
        exit(1);
    }
    double n = (double)blk_rows(b), t0 = now_s(), c0 = cpu_s();
    rc = compact_merge(dir, &b, 1, 1, cold_level, NULL, NULL, f->path, sizeof(f->path));
    f->cpu_ns = (cpu_s() - c0) * 1e9 / n;
    f->wall_ns = (now_s() - t0) * 1e9 / n;
    blk_unref(b);
    if (rc < 0) {
        die("compact_merge", rc);
    }
}

/* ---- bytes by table kind ---- */

struct bytes_fig {
    uint64_t rows, file;
    uint64_t table[4], raw[4]; /* by enum blk_table_kind */
    uint32_t n_tables[4];
    uint64_t footer, dicts, blooms, other;
};

static void bytes_of(const char *path, struct bytes_fig *f)
{
    char err[200];
    blk *b;
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "blkbench: open %s: %s\n", path, err);
        exit(1);
    }
    memset(f, 0, sizeof(*f));
    f->rows = blk_rows(b);
    f->file = blk_file_bytes(b);
    uint64_t in_tables = 0;
    for (uint32_t i = 0; i < blk_n_tables(b); i++) {
        struct blk_table_info ti;
        if (blk_table_info(b, i, &ti) < 0 || ti.kind < BLK_T_ROOT || ti.kind > BLK_T_DETAIL) {
            die("blk_table_info", -EINVAL);
        }
        f->table[ti.kind] += ti.length;
        f->raw[ti.kind] += ti.raw_length;
        f->n_tables[ti.kind]++;
        in_tables += ti.length;
    }
    struct blk_layout l;
    blk_layout(b, &l);
    f->footer = l.footer_bytes;
    f->dicts = l.dict_bytes[0] + l.dict_bytes[1] + l.dict_bytes[2];
    f->blooms = l.bloom_bytes;
    f->other = f->file - in_tables - f->footer;
    blk_unref(b);
}

static void print_bytes(const char *name, const struct bytes_fig *f)
{
    double n = (double)f->rows;
    printf("\"%s\":{\"file_bytes\":%llu,\"per_record\":{\"total\":%.2f,\"root\":%.2f,"
           "\"attrs\":%.2f,\"detail\":%.2f,\"footer\":%.2f,\"footer_dicts\":%.2f,"
           "\"footer_blooms\":%.2f,\"header_trailer\":%.2f},"
           "\"raw_per_record\":{\"root\":%.2f,\"attrs\":%.2f,\"detail\":%.2f},"
           "\"tables\":{\"root\":%u,\"attrs\":%u,\"detail\":%u}}",
           name, (unsigned long long)f->file, (double)f->file / n, (double)f->table[1] / n,
           (double)f->table[2] / n, (double)f->table[3] / n, (double)f->footer / n,
           (double)f->dicts / n, (double)f->blooms / n, (double)f->other / n, (double)f->raw[1] / n,
           (double)f->raw[2] / n, (double)f->raw[3] / n, f->n_tables[1], f->n_tables[2],
           f->n_tables[3]);
}

/* ---- open ---- */

enum { ARM_SPLIT_COLD, ARM_FULL_COLD, ARM_SPLIT_WARM, ARM_FULL_WARM, N_ARMS };
static const char *const arm_names[N_ARMS] = {"split_cold", "full_cold", "split_warm", "full_warm"};

struct open_fig {
    int reps;
    double cpu_us[N_ARMS][MAX_REPS], wall_us[N_ARMS][MAX_REPS];
    double tables[N_ARMS][MAX_REPS], hashed[N_ARMS][MAX_REPS];
    double minflt[N_ARMS][MAX_REPS]; /* minor page faults of this thread */
};

static double minor_faults(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_THREAD, &ru) == 0 ? (double)ru.ru_minflt : 0;
}

/* Each arm must hash exactly the tables it claims to (the footer is hashed
 * too but not counted as a table), and open the block it was given. */
static const double arm_tables[N_ARMS] = {1, 3, 0, 0};

static void open_arm(const char *path, uint64_t rows, int arm, struct open_fig *f, int r)
{
    char err[200];
    blk *b;
    struct blk_stats s0, s1;
    unsigned flags = arm == ARM_SPLIT_COLD || arm == ARM_FULL_COLD ? BLK_OPEN_NO_CACHE : 0;
    bool full = arm == ARM_FULL_COLD || arm == ARM_FULL_WARM;
    blk_get_stats(&s0);
    double f0 = minor_faults();
    double t0 = now_s(), c0 = cpu_s();
    int rc = blk_open_ex(path, flags, &b, err, sizeof(err));
    if (rc == 0 && full) {
        rc = blk_load(b, BLK_ALL);
        snprintf(err, sizeof(err), "blk_load failed");
    }
    double c1 = cpu_s(), t1 = now_s();
    double f1 = minor_faults();
    blk_get_stats(&s1);
    if (rc < 0) {
        fprintf(stderr, "blkbench: %s %s: %s\n", arm_names[arm], path, err);
        exit(1);
    }
    uint64_t got = blk_rows(b);
    blk_unref(b);
    double tables = (double)(s1.tables_verified - s0.tables_verified);
    if (got != rows || (f != NULL && tables != arm_tables[arm])) {
        fprintf(stderr,
                "blkbench: %s %s: %llu rows (wanted %llu), %.0f tables hashed (wanted %.0f)\n",
                arm_names[arm], path, (unsigned long long)got, (unsigned long long)rows, tables,
                arm_tables[arm]);
        exit(1);
    }
    if (f == NULL) {
        return;
    }
    f->cpu_us[arm][r] = (c1 - c0) * 1e6;
    f->wall_us[arm][r] = (t1 - t0) * 1e6;
    f->tables[arm][r] = tables;
    f->minflt[arm][r] = f1 - f0;
    f->hashed[arm][r] = (double)(s1.bytes_hashed - s0.bytes_hashed);
}

static void open_bench(const char *path, uint64_t rows, int reps, struct open_fig *f)
{
    /* Fill the cache for the warm arms (the file has settled by now). */
    open_arm(path, rows, ARM_FULL_WARM, NULL, 0);
    f->reps = reps;
    for (int r = 0; r < reps; r++) {
        for (int k = 0; k < N_ARMS; k++) {
            open_arm(path, rows, (k + r) % N_ARMS, f, r);
        }
    }
}

static void print_ratio(const char *name, const double *num, const double *den, int n)
{
    double q[MAX_REPS];
    for (int i = 0; i < n; i++) {
        q[i] = den[i] > 0 ? num[i] / den[i] : 0;
    }
    printf(",\"%s\":{\"median\":%.3f,\"passes_above_1\":%d,\"passes\":%d}", name, median(q, n),
           count_above(q, n, 1.0), n);
}

static void print_open(const char *name, const struct open_fig *f, uint64_t rows)
{
    int n = f->reps;
    printf("\"%s\":{\"passes\":%d", name, n);
    for (int a = 0; a < N_ARMS; a++) {
        printf(",\"%s\":{\"cpu_us\":%.1f,\"wall_us\":%.1f,\"cpu_ns_per_record\":%.2f,"
               "\"tables_hashed\":%.0f,\"bytes_hashed\":%.0f,\"minor_faults\":%.0f}",
               arm_names[a], median(f->cpu_us[a], n), median(f->wall_us[a], n),
               median(f->cpu_us[a], n) * 1e3 / (double)rows, median(f->tables[a], n),
               median(f->hashed[a], n), median(f->minflt[a], n));
    }
    printf(",\"cpu_ratios\":{");
    printf("\"note\":\"per-pass CPU ratios, median; passes_above_1 counts passes where the "
           "first arm cost more\"");
    print_ratio("full_cold_over_split_cold", f->cpu_us[ARM_FULL_COLD], f->cpu_us[ARM_SPLIT_COLD],
                n);
    print_ratio("split_cold_over_split_warm", f->cpu_us[ARM_SPLIT_COLD], f->cpu_us[ARM_SPLIT_WARM],
                n);
    print_ratio("full_warm_over_split_warm", f->cpu_us[ARM_FULL_WARM], f->cpu_us[ARM_SPLIT_WARM],
                n);
    print_ratio("full_cold_over_full_warm", f->cpu_us[ARM_FULL_COLD], f->cpu_us[ARM_FULL_WARM], n);
    printf("}}");
}

/* ---- replay ---- */

struct replay_ctx {
    enum signal sig;
    oblock *ob;
    struct batch *b;
    int failed;
};

static int replay_fn(void *ctx, uint64_t seq, enum signal sig, enum otlp_fmt fmt, const uint8_t *p,
                     size_t n)
{
    struct replay_ctx *c = ctx;
    if (sig != c->sig || fmt != OTLP_PROTOBUF || decode(sig, p, n, c->b) < 0) {
        c->failed++;
        return 0;
    }
    return oblock_append(c->ob, c->b, seq) < 0 ? -ENOMEM : 0;
}

/* Drops the page cache's copy of every file in |dir| (clean pages only:
 * the segments were fdatasynced). */
static void evict_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    if (d == NULL) {
        die("opendir", -errno);
    }
    while ((e = readdir(d)) != NULL) {
        char p[1100];
        if (e->d_name[0] == '.') {
            continue;
        }
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            fdatasync(fd);
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
            close(fd);
        }
    }
    closedir(d);
}

struct replay_fig {
    uint64_t frames, bytes, records;
    int reps; /* per cache state */
    /* [0] warm, [1] cold */
    double cpu_s[2][MAX_REPS], wall_s[2][MAX_REPS];
    double write_wall_s;
};

static void replay_bench(const char *root, struct gen *g, uint32_t frames, int reps,
                         struct replay_fig *f)
{
    char dir[700];
    wal *w;
    snprintf(dir, sizeof(dir), "%s/wal-%s", root, signal_names[g->sig]);
    memset(f, 0, sizeof(*f));
    int rc = wal_open(dir, 0, NULL, NULL, &w);
    if (rc < 0) {
        die("wal_open (write)", rc);
    }
    double t0 = now_s();
    for (uint32_t i = 0; i < frames; i++) {
        gen_encode(g, i);
        int64_t seq = wal_append(w, g->sig, OTLP_PROTOBUF, g->req.p, g->req.len);
        if (seq < 0) {
            die("wal_append", (int)seq);
        }
    }
    rc = wal_sync(w);
    if (rc < 0) {
        die("wal_sync", rc);
    }
    f->write_wall_s = now_s() - t0;
    wal_close(w);
    f->reps = reps;
    for (int r = 0; r < reps; r++) {
        for (int cold = 0; cold < 2; cold++) {
            struct replay_ctx c = {.sig = g->sig, .b = g->b};
            if (oblock_new(g->sig, &c.ob) < 0) {
                die("oblock_new", -ENOMEM);
            }
            if (cold) {
                evict_dir(dir);
            }
            double w0 = now_s(), c0 = cpu_s();
            rc = wal_open(dir, 0, replay_fn, &c, &w);
            f->cpu_s[cold][r] = cpu_s() - c0;
            f->wall_s[cold][r] = now_s() - w0;
            if (rc < 0) {
                die("wal_open (replay)", rc);
            }
            const struct wal_stats *st = wal_stats(w);
            f->frames = st->frames_replayed;
            f->bytes = st->bytes_replayed;
            f->records = oblock_rows(c.ob);
            if (c.failed != 0 || st->torn_frames != 0 || f->frames != frames ||
                f->records != (uint64_t)frames * g->rpr) {
                fprintf(stderr,
                        "blkbench: replay of %s: %llu frames, %llu rows, %d undecodable, "
                        "%llu torn (wanted %u frames, %llu rows)\n",
                        signal_names[g->sig], (unsigned long long)f->frames,
                        (unsigned long long)f->records, c.failed,
                        (unsigned long long)st->torn_frames, frames,
                        (unsigned long long)frames * g->rpr);
                exit(1);
            }
            wal_close(w);
            oblock_free(c.ob);
        }
    }
}

static void print_replay(const char *name, const struct replay_fig *f)
{
    printf("\"%s\":{\"frames\":%llu,\"frame_bytes\":%llu,\"records\":%llu,\"reps\":%d,"
           "\"write_s\":%.3f",
           name, (unsigned long long)f->frames, (unsigned long long)f->bytes,
           (unsigned long long)f->records, f->reps, f->write_wall_s);
    for (int cold = 0; cold < 2; cold++) {
        double c = median(f->cpu_s[cold], f->reps), w = median(f->wall_s[cold], f->reps);
        printf(",\"%s\":{\"cpu_s\":%.4f,\"wall_s\":%.4f,\"frames_per_cpu_s\":%.0f,"
               "\"mb_per_cpu_s\":%.1f,\"records_per_cpu_s\":%.0f,\"frames_per_s\":%.0f,"
               "\"mb_per_s\":%.1f,\"records_per_s\":%.0f}",
               cold ? "page_cache_cold" : "page_cache_warm", c, w, per((double)f->frames, c),
               per((double)f->bytes / 1e6, c), per((double)f->records, c),
               per((double)f->frames, w), per((double)f->bytes / 1e6, w),
               per((double)f->records, w));
    }
    printf("}");
}

/* ---- main ---- */

static double loadavg(void)
{
    double load = -1;
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp != NULL) {
        if (fscanf(fp, "%lf", &load) != 1) {
            load = -1;
        }
        fclose(fp);
    }
    return load;
}

static void print_machine(const char *dir, double load0, int argc, char **argv)
{
    char model[200] = "unknown", line[512];
    FILE *fp = fopen("/proc/cpuinfo", "r");
    while (fp != NULL && fgets(line, sizeof(line), fp) != NULL) {
        if (strncmp(line, "model name", 10) == 0) {
            const char *c = strchr(line, ':');
            snprintf(model, sizeof(model), "%s", c != NULL ? c + 2 : "?");
            model[strcspn(model, "\n\"\\")] = 0;
            break;
        }
    }
    if (fp != NULL) {
        fclose(fp);
    }
    struct statfs fs;
    unsigned long fstype = statfs(dir, &fs) == 0 ? (unsigned long)fs.f_type : 0;
    printf(",\"machine\":{\"cpu_model\":\"%s\",\"nproc\":%ld,\"loadavg_1m_start\":%.2f,"
           "\"loadavg_1m_end\":%.2f,\"dir_fs_magic\":\"0x%lx\"}",
           model, sysconf(_SC_NPROCESSORS_ONLN), load0, loadavg(), fstype);
    printf(",\"command\":\"build/blkbench");
    for (int i = 1; i < argc; i++) {
        printf(" %s", argv[i]);
    }
    printf("\"");
}

/*
 * --open-only 1: only the open arms, on the blocks a run with --keep 1 (and
 * the same --seal-reps) left in DIR, in a process that has sealed nothing:
 * tells the cost of the reader's code from the state a seal leaves behind,
 * and lets two builds open the very same files.
 */
static int open_only_main(const char *dir, int seal_reps, int open_reps, int argc, char **argv)
{
    static struct open_fig opn[4], opn_z[4];
    uint64_t rows[4];
    char plain[4][700], zstd[4][700];
    double load0 = loadavg();
    for (int s = 1; s <= 3; s++) {
        char err[200];
        blk *b;
        snprintf(plain[s], sizeof(plain[s]), "%s/%s/s0000-%016llx.blk", dir, signal_names[s],
                 (unsigned long long)seal_reps);
        snprintf(zstd[s], sizeof(zstd[s]), "%s/%s/s0000-%016llx.blk", dir, signal_names[s],
                 1000ull);
        if (blk_open_ex(plain[s], BLK_OPEN_NO_CACHE, &b, err, sizeof(err)) < 0) {
            fprintf(stderr, "blkbench: %s: %s (run with --keep 1 first)\n", plain[s], err);
            return 1;
        }
        rows[s] = blk_rows(b);
        blk_unref(b);
    }
    for (int s = 1; s <= 3; s++) {
        fprintf(stderr, "blkbench: %s: open\n", signal_names[s]);
        open_bench(plain[s], rows[s], open_reps, &opn[s]);
        open_bench(zstd[s], rows[s], open_reps, &opn_z[s]);
    }
    printf("{\"case\":\"storage_open_only\",\"cpu\":\"thread CPU time (CLOCK_THREAD_CPUTIME_ID)\"");
    print_machine(dir, load0, argc, argv);
    printf(",\"open\":{\"page_cache\":\"warm\"");
    for (int s = 1; s <= 3; s++) {
        printf(",\"%s\":{", signal_names[s]);
        print_open("plain", &opn[s], rows[s]);
        printf(",");
        print_open("zstd", &opn_z[s], rows[s]);
        printf("}");
    }
    printf("}}\n");
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: blkbench [--dir DIR] [--block-bytes BYTES] [--records-per-request N] "
                    "[--seal-reps N] [--open-reps N] [--wal-frames N] [--replay-reps N] "
                    "[--keep 0|1] [--open-only 0|1] [--cold-level N] [--hot-level N]\n");
}

int main(int argc, char **argv)
{
    const char *dir = "bench/data/blkbench";
    size_t block_bytes = 32u << 20;
    uint32_t rpr = 1000, wal_frames = 100;
    int seal_reps = 3, open_reps = 21, replay_reps = 5, keep = 0, open_only = 0;
    for (int i = 1; i < argc; i += 2) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v == NULL) {
            usage();
            return 2;
        } else if (strcmp(argv[i], "--dir") == 0) {
            dir = v;
        } else if (strcmp(argv[i], "--block-bytes") == 0) {
            block_bytes = (size_t)strtoull(v, NULL, 10);
        } else if (strcmp(argv[i], "--records-per-request") == 0) {
            rpr = (uint32_t)atoi(v);
        } else if (strcmp(argv[i], "--seal-reps") == 0) {
            seal_reps = atoi(v);
        } else if (strcmp(argv[i], "--open-reps") == 0) {
            open_reps = atoi(v);
        } else if (strcmp(argv[i], "--wal-frames") == 0) {
            wal_frames = (uint32_t)atoi(v);
        } else if (strcmp(argv[i], "--replay-reps") == 0) {
            replay_reps = atoi(v);
        } else if (strcmp(argv[i], "--cold-level") == 0) {
            cold_level = atoi(v);
        } else if (strcmp(argv[i], "--hot-level") == 0) {
            hot_level = atoi(v);
        } else if (strcmp(argv[i], "--keep") == 0) {
            keep = atoi(v);
        } else if (strcmp(argv[i], "--open-only") == 0) {
            open_only = atoi(v);
        } else {
            usage();
            return 2;
        }
    }
    if (block_bytes < (64u << 10) || rpr == 0 || seal_reps < 1 || seal_reps > MAX_REPS ||
        open_reps < 1 || open_reps > MAX_REPS || wal_frames < 1 || replay_reps < 1 ||
        replay_reps > MAX_REPS) {
        usage();
        return 2;
    }
    if (open_only) {
        return open_only_main(dir, seal_reps, open_reps, argc, argv);
    }
    if (run_cmd("rm -rf '%s' && mkdir -p '%s'", dir) < 0) {
        fprintf(stderr, "blkbench: cannot create %s\n", dir);
        return 1;
    }
    struct statfs fs;
    if (statfs(dir, &fs) == 0 && fs.f_type == TMPFS_MAGIC_) {
        fprintf(stderr, "blkbench: %s is tmpfs: fsync and cold reads would mean nothing\n", dir);
        return 1;
    }

    double load0 = loadavg();
    static struct seal_fig seal[4];
    static struct bytes_fig plain[4], zstd[4], hot[4], cold[4];
    static struct cold_fig cf[4];
    static struct open_fig opn[4], opn_z[4], opn_h[4];
    static struct replay_fig rep[4];
    double settle_from = 0;

    for (int s = 1; s <= 3; s++) {
        struct gen g;
        gen_init(&g, (enum signal)s, rpr);
        fprintf(stderr, "blkbench: %s: fill and seal\n", signal_names[s]);
        oblock *ob = fill_block(&g, block_bytes);
        /* DIR/<signal>/, as the daemon lays blocks out: the file names
         * (shard, seal id) repeat across signals. */
        char sdir[700];
        snprintf(sdir, sizeof(sdir), "%s/%s", dir, signal_names[s]);
        if (mkdir(sdir, 0755) < 0) {
            die("mkdir", -errno);
        }
        seal_bench(sdir, ob, seal_reps, &seal[s]);
        oblock_free(ob);
        settle_from = now_s();
        bytes_of(seal[s].plain_path, &plain[s]);
        bytes_of(seal[s].zstd_path, &zstd[s]);
        bytes_of(seal[s].hot_path, &hot[s]);
        cold_bench(sdir, seal[s].plain_path, &cf[s]);
        bytes_of(cf[s].path, &cold[s]);
        gen_fini(&g);
    }
    /* Let the last files settle past the cache's default window. */
    double wait = (double)VCACHE_SETTLE_NS_DEFAULT / 1e9 + 0.2 - (now_s() - settle_from);
    if (wait > 0) {
        struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
        nanosleep(&ts, NULL);
    }
    for (int s = 1; s <= 3; s++) {
        fprintf(stderr, "blkbench: %s: open\n", signal_names[s]);
        open_bench(seal[s].plain_path, seal[s].rows, open_reps, &opn[s]);
        open_bench(seal[s].zstd_path, seal[s].rows, open_reps, &opn_z[s]);
        open_bench(seal[s].hot_path, seal[s].rows, open_reps, &opn_h[s]);
    }
    for (int s = 1; s <= 3; s++) {
        struct gen g;
        gen_init(&g, (enum signal)s, rpr);
        fprintf(stderr, "blkbench: %s: replay\n", signal_names[s]);
        replay_bench(dir, &g, wal_frames, replay_reps, &rep[s]);
        gen_fini(&g);
    }

    printf("{\"case\":\"storage\",\"block_bytes\":%zu,\"records_per_request\":%u,"
           "\"generator\":\"otlp-load gen.h seed %d, protobuf, requests 0,1,2,...\","
           "\"cpu\":\"thread CPU time (CLOCK_THREAD_CPUTIME_ID)\"",
           block_bytes, rpr, SEED);
    print_machine(dir, load0, argc, argv);
    printf(",\"seal\":{\"fsync\":true");
    for (int s = 1; s <= 3; s++) {
        const struct seal_fig *f = &seal[s];
        printf(",\"%s\":{\"rows\":%llu,\"open_block_bytes\":%zu,\"reps\":%d,"
               "\"cpu_ns_per_record\":%.1f,\"wall_ns_per_record\":%.1f,"
               "\"zstd_cpu_ns_per_record\":%.1f,\"zstd_wall_ns_per_record\":%.1f,"
               "\"hot_level\":%d,\"hot_cpu_ns_per_record\":%.1f,\"hot_wall_ns_per_record\":%.1f}",
               signal_names[s], (unsigned long long)f->rows, f->oblock_bytes, f->reps,
               median(f->cpu_ns, f->reps), median(f->wall_ns, f->reps), f->zstd_cpu_ns,
               f->zstd_wall_ns, hot_level, median(f->hot_cpu_ns, f->reps),
               median(f->hot_wall_ns, f->reps));
    }
    printf("},\"bytes\":{");
    for (int s = 1; s <= 3; s++) {
        printf("%s\"%s\":{", s > 1 ? "," : "", signal_names[s]);
        print_bytes("plain", &plain[s]);
        printf(",");
        print_bytes("zstd", &zstd[s]);
        printf(",");
        print_bytes("hot", &hot[s]);
        printf(",");
        print_bytes("cold", &cold[s]);
        printf(",\"cold_merge\":{\"cpu_ns_per_record\":%.1f,\"wall_ns_per_record\":%.1f}",
               cf[s].cpu_ns, cf[s].wall_ns);
        printf("}");
    }
    printf("},\"open\":{\"page_cache\":\"warm (files just written)\"");
    for (int s = 1; s <= 3; s++) {
        printf(",\"%s\":{", signal_names[s]);
        print_open("plain", &opn[s], seal[s].rows);
        printf(",");
        print_open("zstd", &opn_z[s], seal[s].rows);
        printf(",");
        print_open("hot", &opn_h[s], seal[s].rows);
        printf("}");
    }
    printf("},\"replay\":{\"decode\":\"pbdec + oblock_append, no seal\"");
    for (int s = 1; s <= 3; s++) {
        printf(",");
        print_replay(signal_names[s], &rep[s]);
    }
    printf("}}\n");
    if (!keep) {
        run_cmd("rm -rf '%s' # %s", dir);
    }
    return 0;
}
