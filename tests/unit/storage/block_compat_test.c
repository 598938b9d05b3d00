/*
 * block_compat_test.c - upgrades keep data: block files written by earlier
 * releases (tests/vectors/blocks/vN-*.blk) open with this reader and
 * answer exactly what they held: every row, attribute, resource, scope and
 * metric (against the open block they were written from, regenerated from
 * blkgen.h with the same seed), the counts, and the blooms' answers.
 *
 * The files were written by blk_write of the release named in each entry
 * below from gen_oblock(sig, seed, rows, batch). With MIRADB_BLK_FIXTURE_DIR
 * set, the first test writes the same blocks with this release's writer (the
 * zstd fixtures with their lists by key, as the cold tier writes them) as
 * v<BLK_VERSION>-<name> into that directory (how the files were made): add
 * them to tests/vectors/blocks/ when the format version changes.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "storage/block.h"
#include "storage/bloom.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(block_compat, .init = fresh_dir);

struct fixture {
    const char *name; /* without the "vN-" prefix */
    enum signal sig;
    uint64_t seed, rows;
    uint32_t batch;
    bool string_bodies; /* gen_string_bodies_only: a complete gram bloom */
    bool zstd;          /* every table zstd (root included) */
    /* pinned: what the file holds, so a drift of blkgen.h shows here */
    uint32_t n_res, n_scopes, n_metrics, n_streams, n_hot;
    uint64_t t0;    /* row 0's time */
    uint32_t since; /* the first format with a vector of it (0: 2) */
    bool edge;      /* rows from gen_edge_points (metrics) instead of gen_oblock */
};

static const struct fixture fixtures[] = {
    {"logs-grams-60.blk", SIG_LOGS, 7001, 60, 9, true, false, 17, 19, 0, 0, 0, 23},
    {"logs-zstd-30.blk", SIG_LOGS, 7002, 30, 7, false, true, 13, 21, 0, 0, 2, 473},
    {"traces-40.blk", SIG_TRACES, 7003, 40, 8, false, false, 12, 16, 0, 0, 2, 0},
    {"traces-zstd-20.blk", SIG_TRACES, 7004, 20, 5, false, true, 13, 14, 0, 0, 5, 0},
    {"metrics-streams-50.blk", SIG_METRICS, 7005, 50, 6, false, false, 30, 31, 48, 49, 1, 0},
    /* format 3 vectors written at 9eef27f (main before format 4); format 4
     * vectors of every fixture */
    {"metrics-300.blk", SIG_METRICS, 7006, 300, 40, false, false, 24, 26, 38, 273, 1, 0, 3},
    {"metrics-zstd-200.blk", SIG_METRICS, 7007, 200, 30, false, true, 33, 31, 67, 192, 1, 0, 3},
    {"metrics-edge-400.blk", SIG_METRICS, 7008, 400, 0, false, false, 1, 3, 5, 15, 1,
     1700000000000000719ull, 3, true},
    {"metrics-edge-zstd-150.blk", SIG_METRICS, 7009, 150, 0, false, true, 2, 4, 5, 15, 1,
     1700000000000000796ull, 3, true},
};
#define N_FIXTURES (sizeof(fixtures) / sizeof(fixtures[0]))

static oblock *fixture_oblock(const struct fixture *f)
{
    if (f->edge) {
        return gen_edge_points(f->seed, f->rows);
    }
    gen_string_bodies_only = f->string_bodies;
    oblock *ob = gen_oblock(f->sig, f->seed, f->rows, f->batch);
    gen_string_bodies_only = false;
    return ob;
}

static blk *open_path(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "blk_open %s: %d %s", path, rc, err);
    return b;
}

/* Every string attribute (key=value) of |a| must pass |b|'s record bloom. */
static void attrs_in_bloom(const blk *b, struct oattrs a, bool resource)
{
    struct val_rd r = {a.p, a.p + a.len};
    for (uint32_t i = 0; i < a.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
        if (v.type != VAL_STR) {
            continue;
        }
        bool may = resource ? blk_may_have_resource_value(b, k, kn, v.s, v.n)
                            : blk_may_have_attr(b, k, kn, v.s, v.n);
        cr_assert(may, "%.*s=%.*s", (int)kn, k, (int)v.n, v.s);
    }
}

/* The blooms answer maybe for everything the block holds, and no for
 * these made-up values (fixed bits: the answers are the file's). */
static void check_blooms(const blk *b)
{
    uint64_t rows = blk_rows(b);
    for (uint32_t i = 0; i < blk_n_resources(b); i++) {
        attrs_in_bloom(b, blk_resource(b, i)->attrs, true);
    }
    for (uint64_t j = 0; j < rows; j++) {
        struct log_view lv;
        struct span_view sv;
        struct point_view pv;
        struct oattrs a;
        if (blk_signal(b) == SIG_LOGS) {
            cr_assert_eq(blk_log((blk *)b, j, BLK_ALL, &lv), 0);
            a = lv.attrs;
            if (lv.has_trace_id) {
                cr_assert(blk_may_have_trace(b, lv.trace_id));
            }
            if (lv.body_type == VAL_STR && lv.body_str.len >= 3) {
                cr_assert(blk_may_have_substr(b, lv.body_str.p, lv.body_str.len));
            }
        } else if (blk_signal(b) == SIG_TRACES) {
            cr_assert_eq(blk_span((blk *)b, j, BLK_ALL, &sv), 0);
            a = sv.attrs;
            cr_assert(blk_may_have_trace(b, sv.trace_id));
        } else {
            cr_assert_eq(blk_point((blk *)b, j, BLK_ALL, &pv), 0);
            a = pv.attrs;
        }
        attrs_in_bloom(b, a, false);
    }
    static const uint8_t absent[16] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
    if (blk_signal(b) != SIG_METRICS) {
        cr_assert_not(blk_may_have_trace(b, absent));
    }
    cr_assert_not(blk_may_have_attr(b, "no.such.key", 11, "qqq", 3));
    cr_assert_not(blk_may_have_resource_value(b, "no.such.key", 11, "qqq", 3));
}

static void check_fixture(blk *b, const struct fixture *f, uint32_t version)
{
    struct blk_layout lay;
    blk_layout(b, &lay);
    cr_assert_eq(lay.version, version, "%s", f->name);
    uint64_t t0 = 0;
    if (f->rows > 0) {
        t0 = blk_col_time(b)[0];
    }
    cr_assert(blk_n_resources(b) == f->n_res && blk_n_scopes(b) == f->n_scopes &&
                  blk_n_metrics(b) == f->n_metrics && blk_n_streams(b) == f->n_streams &&
                  blk_n_hot_attrs(b) == f->n_hot && t0 == f->t0,
              "%s: %u resources, %u scopes, %u metrics, %u streams, %u hot keys, t0 %lluull",
              f->name, blk_n_resources(b), blk_n_scopes(b), blk_n_metrics(b), blk_n_streams(b),
              blk_n_hot_attrs(b), (unsigned long long)t0);
    oblock *ob = fixture_oblock(f);
    check_block(b, ob, f->rows);
    oblock_free(ob);
    check_blooms(b);
    if (f->string_bodies) { /* complete token and gram blooms */
        cr_assert_not(blk_may_have_token(b, "zzqx", 4));
        cr_assert_not(blk_may_have_substr(b, "#~#", 3));
        cr_assert(blk_may_have_token(b, "timeout", 7));
        cr_assert(blk_may_have_substr(b, "meou", 4));
    } else if (f->sig == SIG_LOGS) { /* structured bodies: no answer but maybe */
        cr_assert(blk_may_have_token(b, "zzqx", 4));
        cr_assert(blk_may_have_substr(b, "#~#", 3));
    }
}

/* This release's writer over every fixture's rows: the round trip holds,
 * and (MIRADB_BLK_FIXTURE_DIR) the files for tests/vectors/blocks/. */
Test(block_compat, this_release_writes_every_fixture_and_reads_it_back)
{
    const char *out = getenv("MIRADB_BLK_FIXTURE_DIR");
    /* the zstd fixtures as the cold tier writes them (format 6: lists by key) */
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = true, .attrs_by_key = true};
    for (size_t i = 0; i < N_FIXTURES; i++) {
        const struct fixture *f = &fixtures[i];
        oblock *ob = fixture_oblock(f);
        struct blk_meta m = {.shard = 1, .wal_seq = 100 + i, .seal_id = 900 + i};
        char path[512];
        int rc = blk_write_ex(dir, ob, f->rows, &m, f->zstd ? &z : NULL, path, sizeof(path));
        cr_assert_eq(rc, 0, "blk_write: %s", strerror(-rc));
        oblock_free(ob);
        blk *b = open_path(path);
        check_fixture(b, f, BLK_VERSION);
        blk_unref(b);
        if (out != NULL) {
            size_t len;
            char name[128];
            uint8_t *bytes = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
            cr_assert_not_null(bytes);
            snprintf(name, sizeof(name), "v%d-%s", BLK_VERSION, f->name);
            cr_assert_eq(tmpdir_write_file(out, name, bytes, len), 0);
            free(bytes);
        }
    }
    /* the log fixtures with their bodies by template (v6b-*: the cold
     * tier's layout of the zstd one, the plain one as plain tables) */
    struct blk_wopts tz = z, tp = {.codec = BLK_CODEC_PLAIN};
    tz.body_tmpl = tp.body_tmpl = true;
    for (size_t i = 0; i < N_FIXTURES; i++) {
        const struct fixture *f = &fixtures[i];
        if (f->sig != SIG_LOGS) {
            continue;
        }
        oblock *ob = fixture_oblock(f);
        struct blk_meta m = {.shard = 1, .wal_seq = 100 + i, .seal_id = 950 + i};
        char path[512];
        int rc = blk_write_ex(dir, ob, f->rows, &m, f->zstd ? &tz : &tp, path, sizeof(path));
        cr_assert_eq(rc, 0, "blk_write: %s", strerror(-rc));
        oblock_free(ob);
        blk *b = open_path(path);
        check_fixture(b, f, BLK_VERSION);
        struct blk_layout lay;
        blk_layout(b, &lay);
        cr_assert_eq(lay.meta_flags, 5, "%s: bodies by template", f->name);
        blk_unref(b);
        if (out != NULL) {
            size_t len;
            char name[128];
            uint8_t *bytes = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
            cr_assert_not_null(bytes);
            snprintf(name, sizeof(name), "v%db-%s", BLK_VERSION, f->name);
            cr_assert_eq(tmpdir_write_file(out, name, bytes, len), 0);
            free(bytes);
        }
    }
}

/* Vector |prefix|<name> (prefix "v6-", ...) of fixture |f| in format
 * |version|: its META flags. */
static uint64_t open_vector_as(const char *prefix, uint32_t version, const struct fixture *f)
{
    char path[1024];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(path, sizeof(path), "%s/blocks/%s%s", v != NULL ? v : "tests/vectors", prefix,
             f->name);
    blk *b = open_path(path);
    cr_assert_eq(blk_signal(b), f->sig);
    cr_assert_eq(blk_rows(b), f->rows);
    check_fixture(b, f, version);
    struct blk_layout lay;
    blk_layout(b, &lay);
    blk_unref(b);
    return lay.meta_flags;
}

static void open_vector(uint32_t version, const struct fixture *f)
{
    char prefix[16];
    snprintf(prefix, sizeof(prefix), "v%u-", version);
    uint64_t flags = open_vector_as(prefix, version, f);
    if (version >= 6) {
        cr_assert_eq(flags & 4, 0, "%s: bodies as they are", f->name);
    }
}

/* Written by blk_write at 8eccdd4 (format 2, with the stream index and
 * the gram bloom). */
Test(block_compat, format_2_blocks_of_every_signal_read_back_exactly)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        if (fixtures[i].since <= 2) {
            open_vector(2, &fixtures[i]);
        }
    }
}

/* Written by blk_write of the first format 3 release (h-v3 branch). */
Test(block_compat, format_3_blocks_of_every_signal_read_back_exactly)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        if (fixtures[i].since <= 3) {
            open_vector(3, &fixtures[i]);
        }
    }
}

/* Written by blk_write of the first format 4 release (h-fmt4 branch). */
Test(block_compat, format_4_blocks_of_every_signal_read_back_exactly)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        open_vector(4, &fixtures[i]);
    }
}

/* Written by blk_write of the first format 5 release (h-avals branch):
 * the log and span vectors' attribute tables hold value dictionaries (23
 * entries in logs-grams-60, 15 in traces-40). */
Test(block_compat, format_5_blocks_of_every_signal_read_back_exactly)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        open_vector(5, &fixtures[i]);
    }
}

/* Written by blk_write of the first format 6 release (h-cold branch): the
 * zstd log and span vectors hold their attribute lists by key (as the
 * cold tier writes them), the plain ones in format 5's layout. */
Test(block_compat, format_6_blocks_of_every_signal_read_back_exactly)
{
    for (size_t i = 0; i < N_FIXTURES; i++) {
        open_vector(6, &fixtures[i]);
    }
}

/* Written by blk_write of the first release with log bodies by template
 * (h-tmpl branch; META flag bit 2): the log fixtures, the zstd one as the
 * cold tier writes it, the plain one with plain tables. */
Test(block_compat, format_6_log_bodies_by_template_read_back_exactly)
{
    unsigned n = 0;
    for (size_t i = 0; i < N_FIXTURES; i++) {
        if (fixtures[i].sig == SIG_LOGS) {
            cr_assert_eq(open_vector_as("v6b-", 6, &fixtures[i]), 5, "%s", fixtures[i].name);
            n++;
        }
    }
    cr_assert_eq(n, 2);
}
