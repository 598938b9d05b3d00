/*
 * block_test.c - sealed block files (storage/block.c): every field of every
 * signal read back exactly (plain and zstd), random blocks in = same rows
 * out, lazy verification proven by the counters, the verification cache
 * across reopen and replacement, truncation and single bit flips in every
 * part of the file, version refusal, blooms without false negatives, zone
 * maps, quarantine, and CRC32 against a bitwise reference.
 *
 * The open block is the reference: after a round trip, block row j must
 * equal open block row perm[j], where perm is the stable sort of the open
 * block's rows by time (the writer's order), field by field and byte by
 * byte, dictionaries (resource, scope, metric) compared by content.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <libdeflate.h>

#include "storage/block.h"
#include "storage/bloom.h"
#include "storage/vcache.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(block, .init = fresh_dir, .timeout = 120);

/* ---- comparison: NULL when equal, else the first field that differs ---- */

#define CK(cond, field)                                                                            \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            return field;                                                                          \
        }                                                                                          \
    } while (0)

static bool s_eq(struct mstr a, struct mstr b)
{
    return a.p != NULL && b.p != NULL && a.len == b.len &&
           (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool o_eq(struct obytes a, struct obytes b)
{
    return a.p != NULL && b.p != NULL && a.len == b.len &&
           (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool a_eq(struct oattrs a, struct oattrs b)
{
    return a.count == b.count && o_eq((struct obytes){a.p, a.len}, (struct obytes){b.p, b.len});
}

static const char *ck_res(const struct res_view *a, const struct res_view *b)
{
    CK(a != NULL && b != NULL, "resource");
    CK(a->id == b->id, "resource.id");
    CK(a_eq(a->attrs, b->attrs), "resource.attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "resource.dropped_attrs");
    CK(s_eq(a->schema_url, b->schema_url), "resource.schema_url");
    return NULL;
}

static const char *ck_scope(const struct scope_view *a, const struct scope_view *b)
{
    CK(a != NULL && b != NULL, "scope");
    CK(a->id == b->id, "scope.id");
    CK(a->resource_id == b->resource_id, "scope.resource_id");
    CK(s_eq(a->name, b->name), "scope.name");
    CK(s_eq(a->version, b->version), "scope.version");
    CK(a_eq(a->attrs, b->attrs), "scope.attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "scope.dropped_attrs");
    CK(s_eq(a->schema_url, b->schema_url), "scope.schema_url");
    return ck_res(a->resource, b->resource);
}

static const char *ck_metric(const struct metric_view *a, const struct metric_view *b)
{
    CK(a != NULL && b != NULL, "metric");
    CK(a->id == b->id, "metric.id");
    CK(a->scope_id == b->scope_id, "metric.scope_id");
    CK(s_eq(a->name, b->name), "metric.name");
    CK(s_eq(a->description, b->description), "metric.description");
    CK(s_eq(a->unit, b->unit), "metric.unit");
    CK(a->kind == b->kind, "metric.kind");
    CK(a->temporality == b->temporality, "metric.temporality");
    CK(a->monotonic == b->monotonic, "metric.monotonic");
    CK(a_eq(a->metadata, b->metadata), "metric.metadata");
    return ck_scope(a->scope, b->scope);
}

static const char *ck_log(const struct log_view *a, const struct log_view *b)
{
    CK(a->time_ns == b->time_ns, "time_ns");
    CK(a->observed_ns == b->observed_ns, "observed_ns");
    CK(a->scope_id == b->scope_id, "scope_id");
    CK(a->severity_number == b->severity_number, "severity_number");
    CK(s_eq(a->severity_text, b->severity_text), "severity_text");
    CK(a->body_type == b->body_type, "body_type");
    CK(s_eq(a->body_str, b->body_str), "body_str");
    CK(o_eq(a->body_val, b->body_val), "body_val");
    CK(a_eq(a->attrs, b->attrs), "attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "dropped_attrs");
    CK(a->flags == b->flags, "flags");
    CK(a->has_trace_id == b->has_trace_id, "has_trace_id");
    CK(a->has_span_id == b->has_span_id, "has_span_id");
    CK(memcmp(a->trace_id, b->trace_id, 16) == 0, "trace_id");
    CK(memcmp(a->span_id, b->span_id, 8) == 0, "span_id");
    CK(s_eq(a->event_name, b->event_name), "event_name");
    CK(a->resource == a->scope->resource, "resource");
    return ck_scope(a->scope, b->scope);
}

static const char *ck_span(const struct span_view *a, const struct span_view *b)
{
    CK(a->start_ns == b->start_ns, "start_ns");
    CK(a->end_ns == b->end_ns, "end_ns");
    CK(a->scope_id == b->scope_id, "scope_id");
    CK(memcmp(a->trace_id, b->trace_id, 16) == 0, "trace_id");
    CK(memcmp(a->span_id, b->span_id, 8) == 0, "span_id");
    CK(memcmp(a->parent_span_id, b->parent_span_id, 8) == 0, "parent_span_id");
    CK(a->has_parent == b->has_parent, "has_parent");
    CK(s_eq(a->trace_state, b->trace_state), "trace_state");
    CK(s_eq(a->name, b->name), "name");
    CK(a->kind == b->kind, "kind");
    CK(a->flags == b->flags, "flags");
    CK(a->status_code == b->status_code, "status_code");
    CK(s_eq(a->status_message, b->status_message), "status_message");
    CK(a_eq(a->attrs, b->attrs), "attrs");
    CK(a->dropped_attrs == b->dropped_attrs, "dropped_attrs");
    CK(o_eq(a->events, b->events), "events");
    CK(a->n_events == b->n_events, "n_events");
    CK(a->dropped_events == b->dropped_events, "dropped_events");
    CK(o_eq(a->links, b->links), "links");
    CK(a->n_links == b->n_links, "n_links");
    CK(a->dropped_links == b->dropped_links, "dropped_links");
    CK(a->resource == a->scope->resource, "resource");
    return ck_scope(a->scope, b->scope);
}

static const char *ck_point(const struct point_view *a, const struct point_view *b)
{
    CK(a->start_ns == b->start_ns, "start_ns");
    CK(a->time_ns == b->time_ns, "time_ns");
    CK(a->metric_id == b->metric_id, "metric_id");
    CK(a_eq(a->attrs, b->attrs), "attrs");
    CK(a->flags == b->flags, "flags");
    CK(a->value_type == b->value_type, "value_type");
    CK(memcmp(&a->value, &b->value, 8) == 0, "value");
    CK(a->count == b->count, "count");
    CK(memcmp(&a->sum, &b->sum, 8) == 0, "sum");
    CK(memcmp(&a->min, &b->min, 8) == 0, "min");
    CK(memcmp(&a->max, &b->max, 8) == 0, "max");
    CK(a->has_sum == b->has_sum, "has_sum");
    CK(a->has_min == b->has_min, "has_min");
    CK(a->has_max == b->has_max, "has_max");
    CK(o_eq(a->detail, b->detail), "detail");
    CK(o_eq(a->exemplars, b->exemplars), "exemplars");
    CK(a->n_exemplars == b->n_exemplars, "n_exemplars");
    CK(a->scope == a->metric->scope && a->resource == a->scope->resource, "scope/resource");
    return ck_metric(a->metric, b->metric);
}

/* ---- the writer's order, recomputed ---- */

static uint64_t ob_time(const oblock *ob, uint64_t i)
{
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    switch (oblock_signal(ob)) {
    case SIG_LOGS:
        cr_assert_eq(oblock_log(ob, i, &lv), 0);
        return lv.time_ns ? lv.time_ns : lv.observed_ns;
    case SIG_TRACES:
        cr_assert_eq(oblock_span(ob, i, &sv), 0);
        return sv.start_ns;
    default:
        cr_assert_eq(oblock_point(ob, i, &pv), 0);
        return pv.time_ns;
    }
}

struct tk {
    uint64_t t, i;
};

static int cmp_tk(const void *a, const void *b)
{
    const struct tk *x = a, *y = b;
    if (x->t != y->t) {
        return x->t < y->t ? -1 : 1;
    }
    return x->i < y->i ? -1 : x->i > y->i;
}

static uint64_t *expected_order(const oblock *ob, uint64_t rows)
{
    struct tk *k = malloc((rows + 1) * sizeof(*k));
    uint64_t *perm = malloc((rows + 1) * sizeof(*perm));
    cr_assert(k != NULL && perm != NULL);
    for (uint64_t i = 0; i < rows; i++) {
        k[i] = (struct tk){ob_time(ob, i), i};
    }
    qsort(k, rows, sizeof(*k), cmp_tk);
    for (uint64_t i = 0; i < rows; i++) {
        perm[i] = k[i].i;
    }
    free(k);
    return perm;
}

/* Every row of |b| against |ob|, all tables; also the dictionaries. */
static void check_block(blk *b, const oblock *ob, uint64_t rows)
{
    cr_assert_eq(blk_rows(b), rows);
    cr_assert_eq(blk_signal(b), oblock_signal(ob));
    cr_assert_eq(blk_n_resources(b), oblock_n_resources(ob));
    cr_assert_eq(blk_n_scopes(b), oblock_n_scopes(ob));
    cr_assert_eq(blk_n_metrics(b), oblock_n_metrics(ob));
    for (uint32_t i = 0; i < blk_n_scopes(b); i++) {
        const char *bad = ck_scope(blk_scope(b, i), oblock_scope(ob, i));
        cr_assert_null(bad, "scope %u: %s differs", i, bad);
    }
    for (uint32_t i = 0; i < blk_n_metrics(b); i++) {
        const char *bad = ck_metric(blk_metric(b, i), oblock_metric(ob, i));
        cr_assert_null(bad, "metric %u: %s differs", i, bad);
    }
    cr_assert_null(blk_resource(b, blk_n_resources(b)));
    uint64_t *perm = expected_order(ob, rows);
    uint64_t tmin = UINT64_MAX, tmax = 0;
    for (uint64_t j = 0; j < rows; j++) {
        const char *bad = NULL;
        struct log_view la, lb;
        struct span_view sa, sb;
        struct point_view pa, pb;
        uint64_t t = ob_time(ob, perm[j]);
        tmin = t < tmin ? t : tmin;
        tmax = t > tmax ? t : tmax;
        switch (blk_signal(b)) {
        case SIG_LOGS:
            cr_assert_eq(blk_log(b, j, BLK_ALL, &la), 0);
            cr_assert_eq(oblock_log(ob, perm[j], &lb), 0);
            bad = ck_log(&la, &lb);
            break;
        case SIG_TRACES:
            cr_assert_eq(blk_span(b, j, BLK_ALL, &sa), 0);
            cr_assert_eq(oblock_span(ob, perm[j], &sb), 0);
            bad = ck_span(&sa, &sb);
            break;
        case SIG_METRICS:
            cr_assert_eq(blk_point(b, j, BLK_ALL, &pa), 0);
            cr_assert_eq(oblock_point(ob, perm[j], &pb), 0);
            bad = ck_point(&pa, &pb);
            break;
        }
        cr_assert_null(bad, "%s row %llu (open block row %llu): %s differs",
                       signal_name(blk_signal(b)), (unsigned long long)j,
                       (unsigned long long)perm[j], bad);
    }
    uint64_t zmin, zmax;
    blk_time_range(b, &zmin, &zmax);
    cr_assert_eq(zmin, tmin);
    cr_assert_eq(zmax, tmax);
    const uint64_t *ct = blk_col_time(b);
    cr_assert_not_null(ct);
    for (uint64_t j = 0; j < rows; j++) {
        cr_assert_eq(ct[j], ob_time(ob, perm[j]));
        cr_assert(j == 0 || ct[j - 1] <= ct[j]);
    }
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    int rc = blk_signal(b) == SIG_LOGS     ? blk_log(b, rows, BLK_ALL, &lv)
             : blk_signal(b) == SIG_TRACES ? blk_span(b, rows, BLK_ALL, &sv)
                                           : blk_point(b, rows, BLK_ALL, &pv);
    cr_assert_eq(rc, -EINVAL);
    cr_assert_eq(blk_signal(b) == SIG_LOGS ? blk_span(b, 0, BLK_ALL, &sv)
                                           : blk_log(b, 0, BLK_ALL, &lv),
                 -EINVAL);
    free(perm);
}

static void write_block(const oblock *ob, uint64_t rows, uint32_t shard, uint64_t seal,
                        const struct blk_wopts *o, char *path, size_t cap)
{
    struct blk_meta m = {.shard = shard, .wal_seq = 1000 + seal, .seal_id = seal};
    int rc = blk_write_ex(dir, ob, rows, &m, o, path, cap);
    cr_assert_eq(rc, 0, "blk_write: %s", strerror(-rc));
}

static blk *open_ok(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open(path, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "blk_open %s: %d %s", path, rc, err);
    return b;
}

static void roundtrip(enum signal sig, uint64_t seed, uint64_t rows, const struct blk_wopts *o)
{
    char path[512];
    oblock *ob = gen_oblock(sig, seed, rows, 97);
    write_block(ob, oblock_rows(ob), 3, seed, o, path, sizeof(path));
    blk *b = open_ok(path);
    const struct blk_meta *m = blk_meta(b);
    cr_assert_eq(m->shard, 3);
    cr_assert_eq(m->seal_id, seed);
    cr_assert_eq(m->wal_seq, 1000 + seed);
    check_block(b, ob, oblock_rows(ob));
    blk_unref(b);
    oblock_free(ob);
}

/* ---- round trips ---- */

Test(block, every_field_of_every_signal_round_trips_exactly)
{
    roundtrip(SIG_LOGS, 11, 3000, NULL);
    roundtrip(SIG_TRACES, 12, 3000, NULL);
    roundtrip(SIG_METRICS, 13, 3000, NULL);
}

Test(block, zstd_tables_round_trip_exactly)
{
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_level = 1, .zstd_root = true};
    struct blk_wopts za = {.codec = BLK_CODEC_ZSTD};
    roundtrip(SIG_LOGS, 21, 1500, &z);
    roundtrip(SIG_TRACES, 22, 1500, &za);
    roundtrip(SIG_METRICS, 23, 1500, &z);

    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 24, 800, 50);
    write_block(ob, 800, 0, 24, &za, path, sizeof(path));
    blk *b = open_ok(path);
    struct blk_table_info ti;
    cr_assert_eq(blk_table_info(b, 0, &ti), 0);
    cr_expect_eq(ti.codec, BLK_CODEC_PLAIN);
    cr_assert_eq(blk_table_info(b, 1, &ti), 0);
    cr_expect_eq(ti.codec, BLK_CODEC_ZSTD);
    cr_expect_lt(ti.length, ti.raw_length);
    blk_unref(b);
    oblock_free(ob);
}

Test(block, a_prefix_of_the_open_block_and_an_empty_block_round_trip)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_TRACES, 31, 500, 40);
    write_block(ob, 123, 1, 1, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    check_block(b, ob, 123);
    blk_unref(b);

    write_block(ob, 0, 1, 2, NULL, path, sizeof(path));
    b = open_ok(path);
    cr_assert_eq(blk_rows(b), 0);
    uint64_t mn, mx;
    blk_time_range(b, &mn, &mx);
    cr_expect_eq(mn, UINT64_MAX);
    cr_expect_eq(mx, 0);
    int64_t a, z;
    cr_expect_not(blk_duration_range(b, &a, &z));
    cr_expect_eq(blk_n_scopes(b), oblock_n_scopes(ob));
    uint8_t id[16] = {0};
    cr_expect_not(blk_may_have_trace(b, id));
    blk_unref(b);

    struct blk_meta m = {0};
    cr_expect_eq(blk_write(dir, ob, 501, &m, path, sizeof(path)), -EINVAL);
    cr_expect_eq(blk_write(dir, ob, 1, &m, path, 10), -ENAMETOOLONG);
    oblock_free(ob);
}

Test(block, the_writer_leaves_only_the_final_file_and_names_it_by_shard_and_seal)
{
    char path[512], want[512];
    oblock *ob = gen_oblock(SIG_LOGS, 41, 50, 10);
    write_block(ob, 50, 7, 0xabc, NULL, path, sizeof(path));
    snprintf(want, sizeof(want), "%s/s0007-0000000000000abc.blk", dir);
    cr_assert_str_eq(path, want);
    cr_assert_eq(tmpdir_file_size(dir, "s0007-0000000000000abc.blk.tmp"), -ENOENT);
    struct blk_meta m = {0};
    cr_assert_eq(blk_write("/nonexistent-dir-h9", ob, 50, &m, path, sizeof(path)), -ENOENT);
    oblock_free(ob);
}

Test(block, random_blocks_in_same_rows_out)
{
    uint64_t s = 0x5eed0001;
    for (int it = 0; it < 24; it++) {
        enum signal sig = (enum signal)(1 + it % 3);
        uint64_t rows = gen_below(&s, 700);
        struct blk_wopts z = {.codec = BLK_CODEC_ZSTD, .zstd_root = gen_below(&s, 2)};
        roundtrip(sig, gen_rnd(&s), rows, it % 4 == 3 ? &z : NULL);
    }
}

/* ---- CRC ---- */

static uint32_t crc32_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) {
            c = (c >> 1) ^ (0xedb88320u & -(c & 1));
        }
    }
    return ~c;
}

Test(block, crc32_matches_a_bitwise_reference)
{
    cr_assert_eq(crc32_bitwise((const uint8_t *)"123456789", 9), 0xcbf43926u);
    cr_assert_eq(libdeflate_crc32(0, "123456789", 9), 0xcbf43926u);
    uint8_t buf[4099];
    uint64_t s = 7;
    for (size_t i = 0; i < sizeof(buf); i++) {
        buf[i] = (uint8_t)gen_rnd(&s);
    }
    for (size_t n = 0; n < sizeof(buf); n += 1 + n / 3) {
        cr_assert_eq(libdeflate_crc32(0, buf + (n & 7), n - (n & 7)),
                     crc32_bitwise(buf + (n & 7), n - (n & 7)), "length %zu", n);
    }
    /* And the CRCs in a written file are that CRC of the stored bytes. */
    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 51, 200, 30);
    write_block(ob, 200, 0, 51, NULL, path, sizeof(path));
    blk *b = open_ok(path);
    size_t len;
    uint8_t *file = tmpdir_read_file(dir, strrchr(path, '/') + 1, &len);
    cr_assert_not_null(file);
    for (uint32_t t = 0; t < blk_n_tables(b); t++) {
        struct blk_table_info ti;
        cr_assert_eq(blk_table_info(b, t, &ti), 0);
        cr_assert_leq(ti.offset + ti.length, len);
        cr_assert_eq(crc32_bitwise(file + ti.offset, ti.length), ti.crc32);
    }
    struct blk_layout lay;
    blk_layout(b, &lay);
    uint32_t fcrc;
    memcpy(&fcrc, file + len - 24, 4);
    cr_assert_eq(crc32_bitwise(file + lay.footer_offset, lay.footer_bytes), fcrc);
    free(file);
    blk_unref(b);
    oblock_free(ob);
}
