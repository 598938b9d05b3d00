/*
 * block_wtable_test.c - the writer's INT column encodings in zstd tables
 * (block_wtable.c): frame of reference or delta, never varint, except for
 * the root's columns of small irregular steps with blk_wopts.var_seqs (the
 * cold tier's): metric and log times, span starts and trace id codes, log
 * body offsets take varint deltas (INT encoding 2) when narrower, and read
 * back exactly.
 */
#include <zstd.h>

#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_wtable, .init = fresh_dir);

/* The root table of file f[0, n) (zstd), decompressed: malloc'd. */
static uint8_t *root_of(const uint8_t *f, size_t n, size_t *raw)
{
    uint64_t len, d = section(f, n, 2, &len);
    cr_assert_neq(d, 0);
    const uint8_t *e = f + d + 8; /* the directory's first entry: root */
    cr_assert_eq(e[0], 1);
    cr_assert_eq(e[1], BLK_CODEC_ZSTD);
    *raw = get64(e + 24);
    uint8_t *t = malloc(*raw);
    cr_assert_not_null(t);
    cr_assert_eq(ZSTD_decompress(t, *raw, f + get64(e + 8), get64(e + 16)), *raw);
    return t;
}

/* The encoding byte (INT header byte 17) of INT column c of table t. */
static unsigned encoding_of(const uint8_t *t, unsigned c)
{
    return t[get64(t + 8 + 16 * c) + 17];
}

/* The seq columns (physical) of each signal's root, bit i column i:
 * metric times (0), span starts (0) and trace id codes (3: start,
 * duration, scope, then the dictionary's codes), log times (0) and body
 * offsets (7: time, scope, severity, severity text's codes, offsets,
 * data, body type, then the body's offsets). */
static const uint64_t seq_cols[SIG_COUNT + 1] = {0, 1 | 1u << 7, 1 | 1u << 3, 1};
/* Root INT columns compared (physical), per signal: logs time, scope,
 * severity, body type, body offsets, id flags; spans start, duration,
 * scope, trace codes, has parent, name codes; points time, start,
 * metric, value type, count, has. */
static const unsigned int_cols[SIG_COUNT + 1][6] = {
    {0}, {0, 1, 2, 6, 7, 9}, {0, 1, 2, 3, 9, 10}, {0, 1, 2, 3, 6, 13}};

#define N 4000

/* The i-th time: steps of 5 us, every third of 10 ns: 2-byte deltas,
 * varints of 1 and 2 bytes (narrower, but by less than a quarter: what
 * a plain table's writer would not take). */
static uint64_t time_of(uint32_t i)
{
    uint64_t t = 1000000;
    for (uint32_t k = 1; k <= i; k++) {
        t += k % 3 == 0 ? 10 : 5000;
    }
    return t;
}

/* Spans at time_of(i) of traces i / 4 (four spans a trace, codes
 * stepping by 0 or 1), every tenth span of the trace 300 back: steps
 * that need 2-byte deltas though most take a 1-byte varint. */
static oblock *crafted_spans(void)
{
    struct batch *bt = batch_new(SIG_TRACES);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (uint32_t i = 0; i < N; i++) {
        struct span_row *r = batch_add_span(bt);
        cr_assert_not_null(r);
        r->start_ns = time_of(i);
        r->end_ns = r->start_ns + 100;
        uint32_t tr = i % 10 == 9 && i / 4 >= 300 ? i / 4 - 300 : i / 4;
        r->trace_id[0] = 1;
        memcpy(r->trace_id + 4, &tr, 4);
        uint32_t sp = i + 1;
        memcpy(r->span_id, &sp, 4);
        r->name = (struct mstr){"s", 1};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_TRACES, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    return ob;
}

/* Log records at time_of(i) with string bodies of 1-100 bytes, every tenth 300-349:
 * offsets whose steps need 2-byte deltas, most a 1-byte varint. */
static oblock *crafted_logs(void)
{
    static char text[400];
    memset(text, 'w', sizeof(text));
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (uint32_t i = 0; i < N; i++) {
        struct log_row *r = batch_add_log(bt);
        cr_assert_not_null(r);
        r->time_ns = r->observed_ns = time_of(i);
        r->body_type = VAL_STR;
        r->body_str = (struct mstr){text, i % 10 == 9 ? 300 + i % 50 : 1 + (i * 37) % 100};
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    return ob;
}

static void seq_cols_of(enum signal s, uint64_t seed)
{
    oblock *ob = s == SIG_METRICS  ? gen_oblock(s, seed, 5000, 1000)
                 : s == SIG_TRACES ? crafted_spans()
                                   : crafted_logs();
    uint64_t rows = oblock_rows(ob);
    struct blk_wopts o = {.codec = BLK_CODEC_ZSTD, .zstd_root = true};
    char p0[512], p1[512];
    size_t n0, n1, r0, r1;
    write_block(ob, rows, 0, 10 + seed, &o, p0, sizeof(p0));
    o.var_seqs = true;
    write_block(ob, rows, 0, 20 + seed, &o, p1, sizeof(p1));
    uint8_t *f0 = tmpdir_read_file(dir, strrchr(p0, '/') + 1, &n0);
    uint8_t *f1 = tmpdir_read_file(dir, strrchr(p1, '/') + 1, &n1);
    cr_assert(f0 != NULL && f1 != NULL);
    uint8_t *t0 = root_of(f0, n0, &r0), *t1 = root_of(f1, n1, &r1);
    cr_assert_eq(get64(t0), get64(t1), "same columns");
    for (unsigned k = 0; k < 6; k++) {
        unsigned c = int_cols[s][k];
        unsigned want0 = encoding_of(t0, c);
        cr_assert_neq(want0, 2, "signal %d column %u: no varint in a zstd table", s, c);
        cr_assert_eq(encoding_of(t1, c), (seq_cols[s] >> c) & 1 ? 2u : want0, "signal %d column %u",
                     s, c);
    }
    cr_assert_lt(r1, r0, "varints are narrower raw");
    free(t0);
    free(t1);
    free(f0);
    free(f1);
    blk *b = open_ok(p1);
    check_block(b, ob, rows);
    blk_unref(b);
    oblock_free(ob);
}

Test(block_wtable, var_seqs_code_metric_times_as_varint_deltas)
{
    seq_cols_of(SIG_METRICS, 3);
}

Test(block_wtable, var_seqs_code_span_trace_codes_as_varint_deltas)
{
    seq_cols_of(SIG_TRACES, 4);
}

Test(block_wtable, var_seqs_code_log_body_offsets_as_varint_deltas)
{
    seq_cols_of(SIG_LOGS, 5);
}
