/*
 * torn_test.c - torn and corrupt files at boot (issue 3, "Proof that it
 * survives"): a WAL cut at random offsets or with a flipped bit, a block
 * file truncated or with one flipped bit in its header, each table kind
 * (root, attributes, detail), its footer and its trailer. Every case boots
 * the real daemon on a damaged copy of one data directory and checks that
 * the boot succeeds, the damage is reported (log line, /metrics counters,
 * DATA/quarantine/) and exactly the undamaged records stay readable, by
 * the daemon's row counts and by an offline dump (tests/util/dump.h).
 *
 * The random offsets come from a seed, printed; MIRADB_TORN_SEED replays it.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "storage/batch.h"
#include "storage/block.h"
#include "tests/util/daemon.h"
#include "tests/util/dump.h"
#include "tests/util/httpc.h"
#include "tests/util/tmpdir.h"
#include "tests/util/tclock.h"

#define MAX_IDS 8192

static const char *const http_paths[] = {"/v1/logs", "/v1/traces", "/v1/metrics"};

/* ---- helpers ---- */

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t torn_seed(void)
{
    const char *e = getenv("MIRADB_TORN_SEED");
    if (e != NULL && *e != '\0') {
        return strtoull(e, NULL, 0);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t s = (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ (uint64_t)getpid();
    return rnd(&s);
}

/* Exports records id0 .. id0 + n - 1 of |s| over OTLP/HTTP protobuf; asserts 200. */
static void export_ok(const struct daemon *d, enum signal s, uint64_t id0, uint32_t n)
{
    size_t len;
    uint8_t *body = dump_request(s, false, id0, n, &len);
    cr_assert_not_null(body);
    const char *hdrs[] = {"Content-Type: application/x-protobuf", NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", http_paths[s - 1], hdrs, body, len, 0, &r), 0,
                 "export of %u %s records got no answer", n, signal_name(s));
    cr_assert_eq(r.status, 200, "export of %s records: status %d", signal_name(s), r.status);
    http_resp_free(&r);
    free(body);
}

static double metric(const struct daemon *d, const char *name, enum signal s)
{
    char series[160];
    if (s == 0) {
        return daemon_metric(d, name);
    }
    snprintf(series, sizeof(series), "%s{signal=\"%s\"}", name, signal_name(s));
    return daemon_metric(d, series);
}

/* Polls /metrics until |name|{signal} reaches |want| (deadline 30 s). */
static void wait_metric(const struct daemon *d, const char *name, enum signal s, double want)
{
    long long deadline = tclock_ms() + 30000;
    while (metric(d, name, s) < want && tclock_ms() < deadline) {
        tclock_nap_ms(10);
    }
    cr_assert_eq(metric(d, name, s), want, "%s{%s} never reached %.0f", name, signal_name(s), want);
}

static bool log_has(const struct daemon *d, const char *needle)
{
    size_t len;
    char *log = (char *)httpc_read_file(d->log_path, &len);
    bool yes = log != NULL && strstr(log, needle) != NULL;
    free(log);
    return yes;
}

/* The log lines are written by the daemon's main loop, which may run a
 * moment after /ready turned 200: poll (deadline 10 s). */
static bool wait_log(const struct daemon *d, const char *needle)
{
    long long deadline = tclock_ms() + 10000;
    while (!log_has(d, needle)) {
        if (tclock_ms() > deadline) {
            return false;
        }
        tclock_nap_ms(10);
    }
    return true;
}

static void stop_clean(struct daemon *d)
{
    cr_assert_eq(daemon_stop(d), 0, "the daemon did not stop cleanly");
    cr_assert(!log_has(d, "AddressSanitizer") && !log_has(d, "LeakSanitizer") &&
                  !log_has(d, "runtime error"),
              "sanitizer report in the daemon's log");
}

/* Copies the tree |from| into the existing directory |to|. */
static void copy_tree(const char *from, const char *to)
{
    DIR *dp = opendir(from);
    cr_assert_not_null(dp, "cannot read %s", from);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL) {
        char src[900], dst[900];
        struct stat st;
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        snprintf(src, sizeof(src), "%s/%s", from, e->d_name);
        snprintf(dst, sizeof(dst), "%s/%s", to, e->d_name);
        cr_assert_eq(lstat(src, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            cr_assert_eq(mkdir(dst, 0755), 0, "mkdir %s: %s", dst, strerror(errno));
            copy_tree(src, dst);
        } else if (S_ISREG(st.st_mode)) {
            size_t len;
            uint8_t *p = httpc_read_file(src, &len);
            cr_assert(p != NULL || st.st_size == 0, "cannot read %s", src);
            cr_assert_eq(tmpdir_write_file(to, e->d_name, p != NULL ? p : (uint8_t *)"", len), 0);
            free(p);
        }
    }
    closedir(dp);
}

/* A fresh copy of |pristine|; its path goes to |out|. */
static void fresh_copy(const char *pristine, char *out, size_t cap)
{
    cr_assert_eq(tmpdir_make(out, cap), 0);
    copy_tree(pristine, out);
}

/* The only file in |dir| whose name ends with |suffix|, or the |nth| in name order. */
static void nth_file(const char *dir, const char *suffix, int nth, char *name, size_t cap)
{
    char *names[256];
    int n = 0;
    DIR *dp = opendir(dir);
    cr_assert_not_null(dp, "cannot read %s", dir);
    struct dirent *e;
    while ((e = readdir(dp)) != NULL && n < 256) {
        size_t nl = strlen(e->d_name), sl = strlen(suffix);
        if (nl > sl && strcmp(e->d_name + nl - sl, suffix) == 0) {
            names[n++] = strdup(e->d_name);
        }
    }
    closedir(dp);
    for (int i = 0; i < n; i++) { /* insertion sort: a handful of names */
        for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
            char *t = names[j];
            names[j] = names[j - 1];
            names[j - 1] = t;
        }
    }
    cr_assert_lt(nth, n, "%s holds %d *%s files, wanted number %d", dir, n, suffix, nth);
    snprintf(name, cap, "%s", names[nth]);
    for (int i = 0; i < n; i++) {
        free(names[i]);
    }
}

static int count_files(const char *dir, const char *suffix)
{
    int n = 0;
    DIR *dp = opendir(dir);
    struct dirent *e;
    while (dp != NULL && (e = readdir(dp)) != NULL) {
        size_t nl = strlen(e->d_name), sl = strlen(suffix);
        n += nl > sl && strcmp(e->d_name + nl - sl, suffix) == 0;
    }
    if (dp != NULL) {
        closedir(dp);
    }
    return n;
}

static void truncate_to(const char *path, off_t size)
{
    cr_assert_eq(truncate(path, size), 0, "truncate %s: %s", path, strerror(errno));
}

static void flip_bit(const char *path, uint64_t off, int bit)
{
    int fd = open(path, O_RDWR | O_CLOEXEC);
    uint8_t b;
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    cr_assert_eq(pread(fd, &b, 1, (off_t)off), 1, "%s has no byte %llu", path,
                 (unsigned long long)off);
    b ^= (uint8_t)(1u << bit);
    cr_assert_eq(pwrite(fd, &b, 1, (off_t)off), 1);
    close(fd);
}

/* ---- what a dump holds ---- */

struct seen {
    uint8_t count[SIG_COUNT][MAX_IDS];
    unsigned tables[SIG_COUNT][MAX_IDS];
    uint64_t bad;
    char first_bad[256];
};

static int note_row(void *ctx, const struct dump_row *r)
{
    struct seen *sn = ctx;
    char why[200];
    int64_t id = dump_row_id(r, why, sizeof(why));
    if (id < 0 || id >= MAX_IDS) {
        if (sn->bad++ == 0) {
            snprintf(sn->first_bad, sizeof(sn->first_bad), "%s", id < 0 ? why : "id too large");
        }
        return 0;
    }
    if (sn->count[r->sig - 1][id] < 255) {
        sn->count[r->sig - 1][id]++;
    }
    sn->tables[r->sig - 1][id] = r->tables;
    return 0;
}

static struct seen *dump_seen(const char *data, struct dump_stats *st)
{
    char err[300];
    struct seen *sn = calloc(1, sizeof(*sn));
    cr_assert_not_null(sn);
    cr_assert_eq(dump_data_dir(data, note_row, sn, st, err, sizeof(err)), 0, "dump: %s", err);
    cr_assert_eq(sn->bad, 0, "%llu rows that are no record of this test: %s",
                 (unsigned long long)sn->bad, sn->first_bad);
    return sn;
}

/* A set of record ids, as [lo, hi) ranges. */
struct idset {
    uint64_t lo[32], hi[32];
    int n;
};

static void ids_add(struct idset *s, uint64_t lo, uint64_t n)
{
    cr_assert_lt(s->n, 32);
    s->lo[s->n] = lo;
    s->hi[s->n] = lo + n;
    s->n++;
}

static bool ids_has(const struct idset *s, uint64_t id)
{
    for (int i = 0; i < s->n; i++) {
        if (id >= s->lo[i] && id < s->hi[i]) {
            return true;
        }
    }
    return false;
}

static uint64_t ids_count(const struct idset *s)
{
    uint64_t n = 0;
    for (int i = 0; i < s->n; i++) {
        n += s->hi[i] - s->lo[i];
    }
    return n;
}

/* Exactly the ids of |want| are present in signal |s|, once each. */
static void expect_exactly(const struct seen *sn, enum signal s, const struct idset *want,
                           const char *what)
{
    for (uint64_t id = 0; id < MAX_IDS; id++) {
        unsigned c = sn->count[s - 1][id];
        if (ids_has(want, id)) {
            cr_assert_eq(c, 1, "%s: %s record %llu present %u times, want once", what,
                         signal_name(s), (unsigned long long)id, c);
        } else {
            cr_assert_eq(c, 0, "%s: %s record %llu present %u times, want none", what,
                         signal_name(s), (unsigned long long)id, c);
        }
    }
}

/* ---- WAL: cut at random offsets, or a bit flipped ---- */

struct frame {
    uint64_t off, size, seq;
};

/* Walks the frames of a WAL segment by its documented format (storage/wal.c):
 * u32 payload length, u32 crc, u64 seq, u8 signal, u8 format, u16 zero, payload. */
static int parse_frames(const uint8_t *p, size_t len, struct frame *out, int cap)
{
    int n = 0;
    for (size_t o = 0; o + 20 <= len && n < cap; n++) {
        uint32_t pl;
        uint64_t seq;
        memcpy(&pl, p + o, 4);
        memcpy(&seq, p + o + 8, 8);
        cr_assert_leq(o + 20 + pl, len, "frame %d runs past the segment", n);
        out[n] = (struct frame){o, 20 + (uint64_t)pl, seq};
        o += 20 + pl;
    }
    return n;
}

#define WAL_FRAMES 12

enum wal_damage { CUT, FLIP };

struct wal_case {
    const char *what;
    enum wal_damage how;
    uint64_t at;   /* byte offset in the segment */
    int survivors; /* whole frames before the damage */
    int torn;      /* torn_frames the boot reports */
};

Test(torn, wal_cut_or_flipped_keeps_every_frame_before_the_damage_and_appends_go_on)
{
    uint64_t seed = torn_seed();
    fprintf(stderr, "torn WAL: seed %llu (replay with MIRADB_TORN_SEED=%llu)\n",
            (unsigned long long)seed, (unsigned long long)seed);
    uint64_t rng = seed;
    const char *args[] = {"--shards", "1", "--io-threads", "1", NULL};
    struct daemon d;

    /* Frame k holds records [100 k, 100 k + n_k): sizes differ frame to frame. */
    uint32_t nrec[WAL_FRAMES];
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    for (int k = 0; k < WAL_FRAMES; k++) {
        nrec[k] = 1 + (uint32_t)(rnd(&rng) % 40);
        export_ok(&d, SIG_LOGS, 100u * (uint64_t)k, nrec[k]);
    }
    stop_clean(&d);
    char pristine[256];
    snprintf(pristine, sizeof(pristine), "%s", d.data_dir);

    char waldir[600], seg[300], segpath[900];
    snprintf(waldir, sizeof(waldir), "%s/wal/logs-0", pristine);
    nth_file(waldir, ".wal", 0, seg, sizeof(seg));
    cr_assert_eq(count_files(waldir, ".wal"), 1, "one segment expected");
    size_t seglen;
    uint8_t *segbytes = tmpdir_read_file(waldir, seg, &seglen);
    cr_assert_not_null(segbytes);
    struct frame fr[WAL_FRAMES + 1];
    cr_assert_eq(parse_frames(segbytes, seglen, fr, WAL_FRAMES + 1), WAL_FRAMES);
    free(segbytes);
    for (int k = 0; k < WAL_FRAMES; k++) {
        cr_assert_eq(fr[k].seq, (uint64_t)k + 1, "frame %d has seq %llu", k,
                     (unsigned long long)fr[k].seq);
    }
    cr_assert_eq(fr[WAL_FRAMES - 1].off + fr[WAL_FRAMES - 1].size, seglen);

    /* The cases: cuts inside a header, inside a payload, on a boundary, one
     * byte short of the end, at 0, anywhere; bit flips in a header's length,
     * a payload and a seq. */
    struct wal_case cases[10];
    int nc = 0;
    int j = 1 + (int)(rnd(&rng) % (WAL_FRAMES - 1));
    cases[nc++] =
        (struct wal_case){"cut inside a frame header", CUT, fr[j].off + 1 + rnd(&rng) % 19, j, 1};
    j = (int)(rnd(&rng) % WAL_FRAMES);
    cases[nc++] = (struct wal_case){"cut inside a payload", CUT,
                                    fr[j].off + 20 + rnd(&rng) % (fr[j].size - 20), j, 1};
    j = 1 + (int)(rnd(&rng) % (WAL_FRAMES - 1));
    cases[nc++] = (struct wal_case){"cut on a frame boundary", CUT, fr[j].off, j, 0};
    cases[nc++] = (struct wal_case){"cut one byte short", CUT, seglen - 1, WAL_FRAMES - 1, 1};
    cases[nc++] = (struct wal_case){"cut to nothing", CUT, 0, 0, 0};
    uint64_t any = rnd(&rng) % seglen;
    for (j = 0; j < WAL_FRAMES && fr[j].off + fr[j].size <= any; j++) {
    }
    cases[nc++] = (struct wal_case){"cut anywhere", CUT, any, j, any == fr[j].off ? 0 : 1};
    j = (int)(rnd(&rng) % WAL_FRAMES);
    cases[nc++] = (struct wal_case){"bit flipped in a payload", FLIP,
                                    fr[j].off + 20 + rnd(&rng) % (fr[j].size - 20), j, 1};
    j = (int)(rnd(&rng) % WAL_FRAMES);
    cases[nc++] = (struct wal_case){"bit flipped in a length", FLIP, fr[j].off + 1, j, 1};
    j = (int)(rnd(&rng) % WAL_FRAMES);
    cases[nc++] = (struct wal_case){"bit flipped in a seq", FLIP, fr[j].off + 8, j, 1};

    for (int c = 0; c < nc; c++) {
        const struct wal_case *wc = &cases[c];
        char dir[256], what[200];
        snprintf(what, sizeof(what), "%s (offset %llu of %zu)", wc->what,
                 (unsigned long long)wc->at, seglen);
        fresh_copy(pristine, dir, sizeof(dir));
        snprintf(segpath, sizeof(segpath), "%s/wal/logs-0/%s", dir, seg);
        if (wc->how == CUT) {
            truncate_to(segpath, (off_t)wc->at);
        } else {
            flip_bit(segpath, wc->at, (int)(rnd(&rng) % 8));
        }
        struct idset want = {0};
        for (int k = 0; k < wc->survivors; k++) {
            ids_add(&want, 100u * (uint64_t)k, nrec[k]);
        }

        /* Offline: exactly the frames before the damage. */
        struct dump_stats st;
        struct seen *sn = dump_seen(dir, &st);
        expect_exactly(sn, SIG_LOGS, &want, what);
        cr_assert_eq(st.sig[0].wal_frames, (uint64_t)wc->survivors, "%s", what);
        cr_assert_eq(st.sig[0].wal_torn, (uint64_t)wc->torn, "%s", what);
        free(sn);

        /* The daemon boots, says what it cut, and holds the same rows. */
        cr_assert_eq(daemon_start(&d, dir, args), 0, "%s: boot failed", what);
        char ready[96];
        snprintf(ready, sizeof(ready), "torn_frames=%d ", wc->torn);
        cr_assert(wait_log(&d, ready), "%s: no ready line with %s", what, ready);
        cr_assert_eq(metric(&d, "miradb_wal_torn_frames_total", SIG_LOGS), wc->torn, "%s", what);
        cr_assert_eq(metric(&d, "miradb_wal_replayed_frames_total", SIG_LOGS), wc->survivors, "%s",
                     what);
        cr_assert_eq(metric(&d, "miradb_open_block_rows", SIG_LOGS), (double)ids_count(&want), "%s",
                     what);
        cr_assert_eq(metric(&d, "miradb_wal_replay_bad_frames_total", SIG_LOGS), 0, "%s", what);

        /* The repaired log takes new frames after the survivors. */
        export_ok(&d, SIG_LOGS, 5000, 3);
        ids_add(&want, 5000, 3);
        stop_clean(&d);
        sn = dump_seen(dir, &st);
        expect_exactly(sn, SIG_LOGS, &want, what);
        cr_assert_eq(st.sig[0].wal_torn, 0, "%s: the boot left a torn tail", what);
        cr_assert_eq(st.sig[0].wal_frames, (uint64_t)wc->survivors + 1, "%s", what);
        free(sn);
    }
}

/* ---- the operator's views: miradb fsck, and a Loki query ---- */

/* Runs `miradb fsck DATA`; returns its exit status, stdout in |out|. */
static int run_fsck(const char *data, char *out, size_t cap)
{
    const char *bin = getenv("MIRADB_BIN");
    char cmd[1200];
    snprintf(cmd, sizeof(cmd), "'%s' fsck '%s' 2>/dev/null",
             bin != NULL && *bin ? bin : "build/asan/miradb", data);
    FILE *f = popen(cmd, "r");
    cr_assert_not_null(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static int count_substr(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) {
        n++;
    }
    return n;
}

/* Every log line of the test's records through /loki/api/v1/query_range
 * (the query renders every label, so it reads the attribute and detail
 * tables too): marks the ids in |count|, returns the warnings joined. */
static void loki_lines(const struct daemon *d, uint8_t count[MAX_IDS], char *warnings, size_t cap)
{
    char path[512];
    struct http_resp r;
    snprintf(path, sizeof(path),
             "/loki/api/v1/query_range?query=%%7Bservice_name%%3D%%22miradb-test%%22%%7D"
             "&start=%llu&end=%llu&limit=5000&direction=forward",
             (unsigned long long)(DUMP_T0 - 1000000000ull),
             (unsigned long long)(DUMP_T0 + 3600000000000ull));
    cr_assert_eq(httpc_request(d->http_port, "GET", path, NULL, NULL, 0, 0, &r), 0);
    cr_assert_eq(r.status, 200, "query_range: %d %s", r.status, (char *)r.body);
    json_error_t je;
    json_t *root = json_loadb((const char *)r.body, r.body_len, 0, &je);
    cr_assert_not_null(root, "query_range answer is not JSON: %s", je.text);
    memset(count, 0, MAX_IDS);
    warnings[0] = '\0';
    size_t i, k, wl = 0;
    json_t *w, *stream;
    json_array_foreach(json_object_get(root, "warnings"), i, w)
    {
        wl += (size_t)snprintf(warnings + wl, cap - wl, "%s;", json_string_value(w));
        if (wl >= cap) {
            wl = cap - 1;
        }
    }
    json_t *result = json_object_get(json_object_get(root, "data"), "result");
    cr_assert(json_is_array(result), "query_range answer without data.result");
    json_array_foreach(result, i, stream)
    {
        json_t *v;
        json_array_foreach(json_object_get(stream, "values"), k, v)
        {
            const char *line = json_string_value(json_array_get(v, 1));
            unsigned long long id;
            cr_assert(line != NULL && sscanf(line, "rec-%16llx", &id) == 1 && id < MAX_IDS,
                      "unexpected line %s", line);
            if (count[id] < 255) {
                count[id]++;
            }
        }
    }
    json_decref(root);
    http_resp_free(&r);
}

/* ---- blocks: truncated, or one bit flipped in each part ---- */

enum blk_part { P_HEADER, P_ROOT, P_ATTRS, P_DETAIL, P_FOOTER, P_TRAILER, P_CUT_HALF, P_CUT_ONE };

static const char *const part_names[] = {
    "bit flipped in the header",
    "bit flipped in the root table",
    "bit flipped in the attribute table",
    "bit flipped in the detail table",
    "bit flipped in the footer",
    "bit flipped in the trailer",
    "truncated to half",
    "truncated by one byte",
};

#define LOG_BLOCKS 4
#define RECS_PER_BLOCK 50

/* Byte range of one part of a block file. */
static void part_range(const char *path, enum blk_part p, uint64_t *off, uint64_t *len)
{
    blk *b;
    char err[256];
    cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s: %s", path,
                 err);
    struct blk_layout lay;
    blk_layout(b, &lay);
    uint64_t size = blk_file_bytes(b);
    *off = 0;
    *len = 0;
    /* Header and trailer: the bytes their CRCs cover, and the CRC itself
     * (block_int.h: header 0..56 + crc at 56; trailer 0..24 + crc at 24). */
    if (p == P_HEADER) {
        cr_assert_eq(lay.header_bytes, 64);
        *len = 60;
    } else if (p == P_FOOTER) {
        *off = lay.footer_offset;
        *len = lay.footer_bytes;
    } else if (p == P_TRAILER) {
        *off = lay.footer_offset + lay.footer_bytes;
        cr_assert_eq(size - *off, 40);
        *len = 28;
    } else {
        enum blk_table_kind want = p == P_ROOT    ? BLK_T_ROOT
                                   : p == P_ATTRS ? BLK_T_ATTRS
                                                  : BLK_T_DETAIL;
        for (uint32_t i = 0; i < blk_n_tables(b); i++) {
            struct blk_table_info ti;
            cr_assert_eq(blk_table_info(b, i, &ti), 0);
            if (ti.kind == want) {
                *off = ti.offset;
                *len = ti.length;
            }
        }
    }
    blk_unref(b);
    cr_assert_gt(*len, 0, "%s: no %s", path, part_names[p]);
}

Test(torn, damaged_blocks_are_quarantined_or_fail_lazily_and_the_rest_stays_readable)
{
    uint64_t seed = torn_seed();
    fprintf(stderr, "torn blocks: seed %llu (replay with MIRADB_TORN_SEED=%llu)\n",
            (unsigned long long)seed, (unsigned long long)seed);
    uint64_t rng = seed;
    /* --ack seal: an export is answered once its block is sealed, so each of
     * these sequential exports is one block of its own. */
    const char *args[] = {"--shards", "1", "--io-threads", "1", "--ack", "seal", "--block-max-age",
                          "20ms",     NULL};
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    for (int k = 0; k < LOG_BLOCKS; k++) {
        export_ok(&d, SIG_LOGS, 1000u * (uint64_t)k, RECS_PER_BLOCK);
    }
    export_ok(&d, SIG_TRACES, 0, 30);
    export_ok(&d, SIG_METRICS, 0, 20);
    stop_clean(&d);
    char pristine[256], logdir[600];
    snprintf(pristine, sizeof(pristine), "%s", d.data_dir);
    snprintf(logdir, sizeof(logdir), "%s/logs", pristine);
    cr_assert_eq(count_files(logdir, ".blk"), LOG_BLOCKS);

    /* The pristine directory: every record once, every table intact. */
    struct dump_stats st;
    struct seen *sn = dump_seen(pristine, &st);
    struct idset all = {0}, tr = {0}, me = {0};
    for (int k = 0; k < LOG_BLOCKS; k++) {
        ids_add(&all, 1000u * (uint64_t)k, RECS_PER_BLOCK);
    }
    ids_add(&tr, 0, 30);
    ids_add(&me, 0, 20);
    expect_exactly(sn, SIG_LOGS, &all, "pristine");
    expect_exactly(sn, SIG_TRACES, &tr, "pristine");
    expect_exactly(sn, SIG_METRICS, &me, "pristine");
    cr_assert_eq(st.sig[0].blocks, LOG_BLOCKS);
    free(sn);
    char fsck_out[8192];
    cr_assert_eq(run_fsck(pristine, fsck_out, sizeof(fsck_out)), 0, "fsck of the pristine copy: %s",
                 fsck_out);
    cr_assert(strstr(fsck_out, "0 failures") != NULL, "%s", fsck_out);

    /* The damaged block is one of the middle ones; which ids does it hold? */
    int victim = 1 + (int)(rnd(&rng) % (LOG_BLOCKS - 2));
    char vname[300], vpath[900];
    nth_file(logdir, ".blk", victim, vname, sizeof(vname));
    snprintf(vpath, sizeof(vpath), "%s/%s", logdir, vname);
    uint64_t vid0;
    {
        blk *b;
        char err[256];
        struct log_view lv;
        struct dump_row row = {.sig = SIG_LOGS, .tables = BLK_ROOT, .log = &lv};
        cr_assert_eq(blk_open_ex(vpath, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(blk_rows(b), RECS_PER_BLOCK);
        cr_assert_eq(blk_log(b, 0, BLK_ROOT, &lv), 0);
        int64_t id = dump_row_id(&row, err, sizeof(err));
        cr_assert_geq(id, 0, "%s", err);
        vid0 = (uint64_t)id;
        blk_unref(b);
    }
    struct idset rest = {0};
    for (int k = 0; k < LOG_BLOCKS; k++) {
        if (1000u * (uint64_t)k != vid0) {
            ids_add(&rest, 1000u * (uint64_t)k, RECS_PER_BLOCK);
        }
    }
    cr_assert_eq(ids_count(&rest), (LOG_BLOCKS - 1) * RECS_PER_BLOCK);

    for (int p = P_HEADER; p <= P_CUT_ONE; p++) {
        char dir[256], path[900], qpath[900], what[400];
        uint64_t off = 0, len = 0;
        fresh_copy(pristine, dir, sizeof(dir));
        snprintf(path, sizeof(path), "%s/logs/%s", dir, vname);
        struct stat sb;
        cr_assert_eq(stat(path, &sb), 0);
        if (p == P_CUT_HALF) {
            off = (uint64_t)sb.st_size / 2;
            truncate_to(path, (off_t)off);
        } else if (p == P_CUT_ONE) {
            off = (uint64_t)sb.st_size - 1;
            truncate_to(path, (off_t)off);
        } else {
            part_range(path, (enum blk_part)p, &off, &len);
            off += rnd(&rng) % len;
            flip_bit(path, off, (int)(rnd(&rng) % 8));
        }
        snprintf(what, sizeof(what), "%s (%s, byte %llu)", part_names[p], vname,
                 (unsigned long long)off);
        /* Attribute and detail tables are verified when first read, not at
         * open: the block stays in service and only that table fails. */
        bool lazy = p == P_ATTRS || p == P_DETAIL;

        sn = dump_seen(dir, &st);
        expect_exactly(sn, SIG_LOGS, lazy ? &all : &rest, what);
        expect_exactly(sn, SIG_TRACES, &tr, what);
        expect_exactly(sn, SIG_METRICS, &me, what);
        cr_assert_eq(st.sig[0].blocks_bad, lazy ? 0 : 1, "%s", what);
        cr_assert_eq(st.sig[0].tables_bad, lazy ? 1 : 0, "%s", what);
        for (uint64_t id = 0; id < MAX_IDS; id++) {
            if (sn->count[0][id] == 0) {
                continue;
            }
            unsigned want = BLK_ALL;
            if (lazy && id >= vid0 && id < vid0 + RECS_PER_BLOCK) {
                want = BLK_ALL & ~(unsigned)(p == P_ATTRS ? BLK_ATTRS : BLK_DETAIL);
            }
            cr_assert_eq(sn->tables[0][id], want, "%s: record %llu read from tables %#x", what,
                         (unsigned long long)id, sn->tables[0][id]);
        }
        free(sn);

        /* fsck names the block, and the table when a table is damaged. */
        cr_assert_eq(run_fsck(dir, fsck_out, sizeof(fsck_out)), 1, "%s: fsck: %s", what, fsck_out);
        cr_assert_eq(count_substr(fsck_out, "FAIL "), 1, "%s: fsck: %s", what, fsck_out);
        cr_assert(strstr(fsck_out, vname) != NULL, "%s: fsck: %s", what, fsck_out);
        if (p == P_ROOT || p == P_ATTRS || p == P_DETAIL) {
            const char *table = p == P_ROOT    ? "root table"
                                : p == P_ATTRS ? "attrs table"
                                               : "detail table";
            cr_assert(strstr(fsck_out, table) != NULL, "%s: fsck: %s", what, fsck_out);
        }

        /* Boot: succeeds; a block that does not open is quarantined and
         * reported; the rest is served; new exports are taken. */
        cr_assert_eq(daemon_start(&d, dir, args), 0, "%s: boot failed", what);
        snprintf(qpath, sizeof(qpath), "%s/quarantine/logs-%s", dir, vname);
        if (lazy) {
            cr_assert_eq(access(path, F_OK), 0, "%s: the block left its place", what);
            cr_assert(!log_has(&d, "event=blocks_quarantined"), "%s", what);
        } else {
            cr_assert_eq(access(path, F_OK), -1, "%s: the block is still in place", what);
            cr_assert_eq(access(qpath, F_OK), 0, "%s: not in quarantine/", what);
            cr_assert(wait_log(&d, "event=blocks_quarantined signal=logs count=1"),
                      "%s: no log line", what);
        }
        double want_blocks = lazy ? LOG_BLOCKS : LOG_BLOCKS - 1;
        cr_assert_eq(metric(&d, "miradb_blocks", SIG_LOGS), want_blocks, "%s", what);
        cr_assert_eq(metric(&d, "miradb_block_rows", SIG_LOGS),
                     (double)ids_count(lazy ? &all : &rest), "%s", what);
        cr_assert_eq(metric(&d, "miradb_block_rows", SIG_TRACES), 30, "%s", what);
        cr_assert_eq(metric(&d, "miradb_block_rows", SIG_METRICS), 20, "%s", what);

        /* A query reads every table: the lazily damaged block fails then, is
         * named in the answer, quarantined and counted; every other record
         * is answered once. */
        uint8_t lines[MAX_IDS];
        char warn[1024];
        loki_lines(&d, lines, warn, sizeof(warn));
        for (uint64_t id = 0; id < MAX_IDS; id++) {
            cr_assert_eq(lines[id], ids_has(&rest, id) ? 1 : 0,
                         "%s: the query answered record %llu %u times", what,
                         (unsigned long long)id, lines[id]);
        }
        if (lazy) {
            /* the answer says a block was skipped but names no path; the
             * log names the block */
            cr_assert(strstr(warn, "a block failed verification") != NULL, "%s: %s", what, warn);
            cr_assert(strchr(warn, '/') == NULL && strstr(warn, vname) == NULL,
                      "%s: a path reached the client: %s", what, warn);
            char logline[1000];
            snprintf(logline, sizeof(logline), "event=block_quarantined path=%s", path);
            cr_assert(wait_log(&d, logline), "%s: the log does not name %s", what, path);
            cr_assert_eq(access(path, F_OK), -1, "%s: the block is still in place", what);
            cr_assert_eq(access(qpath, F_OK), 0, "%s: not in quarantine/", what);
            cr_assert_eq(metric(&d, "miradb_blocks_quarantined_total", 0), 1, "%s", what);
            cr_assert_eq(metric(&d, "miradb_blocks", SIG_LOGS), LOG_BLOCKS - 1, "%s", what);
        } else {
            cr_assert_eq(warn[0], '\0', "%s: warnings %s", what, warn);
        }
        export_ok(&d, SIG_LOGS, 7000, 5);
        stop_clean(&d);

        /* After the boot: the quarantined block is out of the dump, the new
         * records are in, nothing doubled. */
        struct idset after = rest;
        ids_add(&after, 7000, 5);
        sn = dump_seen(dir, &st);
        expect_exactly(sn, SIG_LOGS, &after, what);
        cr_assert_eq(st.sig[0].blocks_bad, 0, "%s: a bad block is still in logs/", what);
        cr_assert_eq(st.sig[0].tables_bad, 0, "%s: a bad table is still in logs/", what);
        cr_assert_eq(st.quarantined_files, 1, "%s", what);
        free(sn);
    }
}

/* ---- a quarantined block under --ack wal: the WAL gives back what it can ---- */

Test(torn, quarantined_newest_block_is_replayed_from_the_wal_exactly_once)
{
    const char *args[] = {"--shards", "1", "--io-threads", "1", "--block-max-age", "50ms", NULL};
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    for (int k = 0; k < 3; k++) {
        export_ok(&d, SIG_LOGS, 1000u * (uint64_t)k, 40);
        wait_metric(&d, "miradb_blocks", SIG_LOGS, k + 1);
    }
    wait_metric(&d, "miradb_block_rows", SIG_LOGS, 120);
    stop_clean(&d);
    char pristine[256], logdir[600];
    snprintf(pristine, sizeof(pristine), "%s", d.data_dir);
    snprintf(logdir, sizeof(logdir), "%s/logs", pristine);
    cr_assert_eq(count_files(logdir, ".blk"), 3);

    /* Blocks are named by seal id, so name order is seal order. Cases: the
     * newest block's root damaged (quarantined at boot), a middle block's
     * root damaged, the newest block's attribute table damaged (found and
     * quarantined by a query, then the daemon restarts). */
    for (int c = 0; c < 3; c++) {
        int victim = c == 1 ? 1 : 2;
        bool by_query = c == 2;
        char dir[256], name[300], path[900], what[96];
        uint64_t off, len;
        snprintf(what, sizeof(what), "block %d of 3 %s", victim + 1,
                 by_query ? "fails a query" : "fails at boot");
        fresh_copy(pristine, dir, sizeof(dir));
        nth_file(logdir, ".blk", victim, name, sizeof(name));
        snprintf(path, sizeof(path), "%s/logs/%s", dir, name);
        part_range(path, by_query ? P_ATTRS : P_ROOT, &off, &len);
        flip_bit(path, off + len / 2, 3);

        /* The newest block's frames are above the remaining watermark and
         * come back from the WAL; a middle block's are below it and stay
         * lost (the WAL after them is what the newer block already holds). */
        struct idset want = {0};
        ids_add(&want, 0, 40);
        ids_add(&want, victim == 2 ? 1000 : 2000, 40);
        if (victim == 2) {
            ids_add(&want, 2000, 40);
        }
        struct dump_stats st;
        struct seen *sn;
        uint8_t lines[MAX_IDS];
        char warn[1024];
        if (by_query) {
            cr_assert_eq(daemon_start(&d, dir, args), 0, "%s: boot failed", what);
            cr_assert_eq(metric(&d, "miradb_blocks", SIG_LOGS), 3, "%s", what);
            loki_lines(&d, lines, warn, sizeof(warn));
            /* the answer names no path; the log names the block */
            cr_assert(strstr(warn, "a block failed verification") != NULL, "%s: %s", what, warn);
            cr_assert(strchr(warn, '/') == NULL && strstr(warn, name) == NULL,
                      "%s: a path reached the client: %s", what, warn);
            char logline[1000];
            snprintf(logline, sizeof(logline), "event=block_quarantined path=%s", path);
            cr_assert(wait_log(&d, logline), "%s: the log does not name %s", what, path);
            for (uint64_t id = 0; id < MAX_IDS; id++) {
                cr_assert_eq(lines[id], id < 2000 && ids_has(&want, id) ? 1 : 0,
                             "%s: the query answered record %llu %u times", what,
                             (unsigned long long)id, lines[id]);
            }
            cr_assert_eq(metric(&d, "miradb_blocks_quarantined_total", 0), 1, "%s", what);
            cr_assert_eq(metric(&d, "miradb_blocks", SIG_LOGS), 2, "%s", what);
            stop_clean(&d);
        }
        sn = dump_seen(dir, &st);
        expect_exactly(sn, SIG_LOGS, &want, what);
        free(sn);

        cr_assert_eq(daemon_start(&d, dir, args), 0, "%s: boot failed", what);
        cr_assert_eq(metric(&d, "miradb_wal_replayed_frames_total", SIG_LOGS), victim == 2 ? 1 : 0,
                     "%s", what);
        wait_metric(&d, "miradb_blocks", SIG_LOGS, victim == 2 ? 3 : 2);
        cr_assert_eq(metric(&d, "miradb_block_rows", SIG_LOGS), (double)ids_count(&want), "%s",
                     what);
        loki_lines(&d, lines, warn, sizeof(warn));
        cr_assert_eq(warn[0], '\0', "%s: warnings %s", what, warn);
        for (uint64_t id = 0; id < MAX_IDS; id++) {
            cr_assert_eq(lines[id], ids_has(&want, id) ? 1 : 0,
                         "%s: the query answered record %llu %u times", what,
                         (unsigned long long)id, lines[id]);
        }
        stop_clean(&d);
        sn = dump_seen(dir, &st);
        expect_exactly(sn, SIG_LOGS, &want, what);
        cr_assert_eq(st.quarantined_files, 1, "%s", what);
        free(sn);
        /* A new seal never takes the seal id (the file name) of a block in
         * quarantine: a second failure would overwrite the first's evidence. */
        char logs_now[600];
        snprintf(logs_now, sizeof(logs_now), "%s/logs", dir);
        for (int k = 0; k < count_files(logs_now, ".blk"); k++) {
            char other[300];
            nth_file(logs_now, ".blk", k, other, sizeof(other));
            cr_assert_str_neq(other, name, "%s: a new block reused the name %s", what, name);
        }
    }
}
