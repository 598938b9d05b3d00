/*
 * block_spanev_test.c - format 6's span events by key (block_int.h, "v6
 * SPAN EVENTS BY KEY"; blk_wopts.events_by_key, META flag bit 5): the
 * exact encoding the writer stores (keys and shapes once, times, codes, a
 * literal event, each key's values together), the same events and links
 * as the hot block's, the block without the bit where a row does not code,
 * and forged encodings refused at the load of the detail table.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_spanev, .init = fresh_dir);

#define ROWS 3
#define SEC 1000000000ull

/* An event of |cnt| attributes, the |nb| bytes at |attrs|. */
static void put_ev(struct vbuf *h, uint64_t t, const char *name, uint32_t drop, uint32_t cnt,
                   const struct vbuf *attrs)
{
    cr_assert_eq(vbuf_put_u64(h, t) | vbuf_put_str(h, name, strlen(name)), 0);
    cr_assert_eq(vbuf_put_u32(h, drop) | vbuf_put_u32(h, cnt), 0);
    cr_assert_eq(vbuf_put_u32(h, (uint32_t)attrs->len), 0);
    cr_assert_eq(attrs->len == 0 ? 0 : vbuf_put(h, attrs->p, attrs->len), 0);
}

/* attempt=|n| (an int), id=|id| (a string). */
static void retry_attrs(struct vbuf *a, int64_t n, const char *id)
{
    vbuf_reset(a);
    cr_assert_eq(val_put_key(a, "attempt", 7) | val_put_int(a, n), 0);
    cr_assert_eq(val_put_key(a, "id", 2) | val_put_str(a, id, strlen(id)), 0);
}

/*
 * Rows 0..2 start at 1, 2, 3 s. Row 0: "retry" 5 ns after its start
 * (attempt=1, id="a"); "x" 7 ns after with one attribute (k="v") and a
 * byte after it: stored literal. Row 1: no events. Row 2: "retry" 2 ns
 * before its start (attempt=2, id="b"); "" 1 ns after with 300 dropped
 * attributes and none; "x" 4 ns after claiming 2 attributes where its
 * bytes hold one (k="v"): literal. |nev0| is row 0's event count (2: as
 * given).
 */
static struct batch *three_spans(uint32_t nev0)
{
    struct batch *bt = batch_new(SIG_TRACES);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    struct vbuf a;
    vbuf_init(&a);
    for (uint32_t i = 0; i < ROWS; i++) {
        struct span_row *r = batch_add_span(bt);
        cr_assert_not_null(r);
        r->start_ns = (uint64_t)(i + 1) * SEC;
        r->end_ns = r->start_ns + 1000;
        memset(r->trace_id, 0x11, 16);
        memset(r->span_id, 0x21 + (int)i, 8);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        if (i == 0) {
            retry_attrs(&a, 1, "a");
            put_ev(h, r->start_ns + 5, "retry", 0, 2, &a);
            vbuf_reset(&a);
            cr_assert_eq(val_put_key(&a, "k", 1) | val_put_str(&a, "v", 1), 0);
            cr_assert_eq(vbuf_put_u8(&a, 0), 0);
            put_ev(h, r->start_ns + 7, "x", 0, 1, &a);
            r->n_events = nev0;
        } else if (i == 2) {
            retry_attrs(&a, 2, "b");
            put_ev(h, r->start_ns - 2, "retry", 0, 2, &a);
            vbuf_reset(&a);
            put_ev(h, r->start_ns + 1, "", 300, 0, &a);
            cr_assert_eq(val_put_key(&a, "k", 1) | val_put_str(&a, "v", 1), 0);
            put_ev(h, r->start_ns + 4, "x", 0, 2, &a);
            r->n_events = 3;
        }
        r->events = (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
    }
    vbuf_fini(&a);
    return bt;
}

/* |bt| sealed with plain tables (coded by key or not) at seal |seal_id|:
 * the file's bytes, malloc'd, and its META flags. */
static uint8_t *seal(struct batch *bt, bool by_key, uint64_t seal_id, oblock **ob, char *path,
                     size_t cap, size_t *n, uint64_t *flags)
{
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .span_refs = true, .events_by_key = by_key};
    cr_assert_eq(oblock_new(SIG_TRACES, ob), 0);
    cr_assert_eq(oblock_append(*ob, bt, 1), 0);
    write_block(*ob, ROWS, 0, seal_id, &o, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    uint64_t len, m = f != NULL ? section(f, *n, 1, &len) : 0;
    cr_assert_neq(m, 0);
    *flags = get64(f + m + 32);
    return f;
}

/* What the writer stores for three_spans(2), by key (block_int.h), part by
 * part: the header (rows, keys, shapes, 160 bytes rebuilt, then the parts'
 * lengths); keys 0 "attempt", 1 "id"; shape 0 ("retry", 0 dropped, keys 0
 * 1), shape 1 ("", 300 dropped, no keys); the times zz(5), zz(7), zz(-2),
 * zz(1), zz(4); the codes (shape 0, literal, shape 0, shape 1, literal);
 * the two literals (row 0's "x", row 2's), batch.h's bytes after the time;
 * attempt's values (int 1, int 2); id's ("a", "b"). */
static const uint8_t ev_head[] = {3, 2, 2, 0xa0, 0x01, 11, 14, 5, 5, 41, 4, 6};
static const uint8_t ev_keys[] = {7, 'a', 't', 't', 'e', 'm', 'p', 't', 2, 'i', 'd'};
static const uint8_t ev_shapes[] = {5, 'r', 'e', 't', 'r', 'y', 0, 2, 0, 1, 0, 0xac, 0x02, 0};
static const uint8_t ev_times_codes[] = {10, 14, 3, 2, 8, 1, 0, 1, 2, 0};
static const uint8_t ev_lit[] = {20, 1, 'x', 0, 0, 0,   0, 1,  0, 0,   0, 6, 0,  0,
                                 0,  1, 'k', 1, 1, 'v', 0, 19, 1, 'x', 0, 0, 0,  0,
                                 2,  0, 0,   0, 5, 0,   0, 0,  1, 'k', 1, 1, 'v'};
static const uint8_t ev_vals[] = {3, 2, 3, 4, 1, 1, 'a', 1, 1, 'b'};
#define EV_LIT 68 /* where row 2's literal starts */
#define EV_LEN 98

static void expect_events_by_key(const uint8_t *p)
{
    const uint8_t *part[] = {ev_head, ev_keys, ev_shapes, ev_times_codes, ev_lit, ev_vals};
    size_t len[] = {sizeof(ev_head),        sizeof(ev_keys), sizeof(ev_shapes),
                    sizeof(ev_times_codes), sizeof(ev_lit),  sizeof(ev_vals)};
    for (int k = 0; k < 6; k++) {
        cr_assert_eq(memcmp(p, part[k], len[k]), 0, "part %d", k);
        p += len[k];
    }
}

/* three_spans(2) sealed by key at |seal_id| (flags 35): the file, and
 * where its events column (EV_LEN bytes) starts. */
static uint8_t *crafted(uint64_t seal_id, struct batch **bt, oblock **ob, char *path, size_t cap,
                        size_t *n, uint64_t *ev)
{
    uint64_t flags, elen;
    *bt = three_spans(2);
    uint8_t *f = seal(*bt, true, seal_id, ob, path, cap, n, &flags);
    cr_assert_eq(flags, 35, "sorted, span detail coded, events by key");
    *ev = column_at(f, *n, 2, 5, &elen);
    cr_assert_eq(elen, EV_LEN, "%llu", (unsigned long long)elen);
    return f;
}

/* |bt| sealed without the option at |seal_id|: META flags |flags|, every
 * event and link read back; the file's bytes, malloc'd. */
static uint8_t *without_the_option(struct batch *bt, uint64_t seal_id, uint64_t flags, size_t *n)
{
    oblock *ob;
    char path[512];
    uint64_t fl;
    uint8_t *g = seal(bt, false, seal_id, &ob, path, sizeof(path), n, &fl);
    cr_assert_eq(fl, flags);
    cr_assert_eq(span_detail_matches(path, ob, ROWS), 0);
    oblock_free(ob);
    return g;
}

Test(block_spanev, events_by_key_store_keys_shapes_and_values_exactly)
{
    struct batch *bt;
    oblock *ob;
    char path[512];
    size_t n;
    uint64_t ev;
    uint8_t *f = crafted(81, &bt, &ob, path, sizeof(path), &n, &ev);
    const char *corpus = getenv("MIRADB_BLK_CORPUS_DIR"); /* a fuzz seed (block_test.c) */
    if (corpus != NULL) {
        cr_assert_eq(tmpdir_write_file(corpus, "v6-span-events-by-key-3.blk", f, n), 0);
    }
    expect_events_by_key(f + ev);
    cr_assert_eq(f[ev + EV_LIT], 19);
    cr_assert_eq(span_detail_matches(path, ob, ROWS), 0);
    struct span_view w0, w2;
    oblock_span(ob, 0, &w0);
    oblock_span(ob, 2, &w2);
    cr_assert_eq(w0.events.len + w2.events.len, 160, "the stated length");

    size_t n2;
    free(without_the_option(bt, 82, 3, &n2)); /* bit 1's coding */
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* |bt| sealed with the option and without it, at seal |seal_id| both: the
 * same file byte for byte, META flags |flags|. */
static void as_without_the_option(struct batch *bt, uint64_t seal_id, uint64_t flags)
{
    oblock *ob;
    char path[512];
    size_t n, n2;
    uint64_t fl;
    uint8_t *f = seal(bt, true, seal_id, &ob, path, sizeof(path), &n, &fl);
    uint8_t *g = without_the_option(bt, seal_id, flags, &n2);
    cr_assert_eq(fl, flags);
    cr_assert_eq(n, n2);
    cr_assert_eq(memcmp(f, g, n), 0);
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* A row whose event count is not the number of its events: the block is
 * written as without the option (bit 1's events, flags 3). */
Test(block_spanev, a_row_that_does_not_code_leaves_the_block_as_without_the_bit)
{
    as_without_the_option(three_spans(3), 83, 3);
}

/* Links that are not batch.h's bytes (row 1: 5 bytes for a link of at
 * least 41): bit 1 does not apply, so neither does bit 5 (flags 1), and
 * the events, by key or not, are stored as given. */
Test(block_spanev, links_that_do_not_code_leave_the_events_as_given)
{
    struct batch *bt = three_spans(2);
    struct span_row *r = &bt->spans[1];
    r->links = (struct blob){(uint32_t)bt->heap.len, 5};
    r->n_links = 1;
    cr_assert_eq(vbuf_put(&bt->heap, "\1\2\3\4\5", 5), 0);
    as_without_the_option(bt, 87, 1);
}

Test(block_spanev, forged_encodings_fail_the_detail_load)
{
    struct batch *bt;
    oblock *ob;
    char path[512];
    size_t n;
    uint64_t ev, ml;
    uint8_t *f = crafted(84, &bt, &ob, path, sizeof(path), &n, &ev);
    uint64_t m = section(f, n, 1, &ml);
    uint64_t olen, oc = column_at(f, n, 2, 4, &olen); /* the offsets: an INT header, width 0 */
    cr_assert_eq(olen, 24);
    cr_assert_eq(get64(f + oc), ROWS + 1);
    cr_assert_eq(get64(f + oc + 8), 0);
    cr_assert_eq(f[oc + 16], 0);
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);
    for (int forge = -1; forge < 13; forge++) { /* -1: unforged, it reads */
        uint8_t *e = g + ev;
        memcpy(g, f, n);
        if (forge == 0) {
            e[42] = 3; /* the first code past the two shapes */
        } else if (forge == 1) {
            e[32] = 2; /* shape 0's second key past the two keys */
        } else if (forge == 2) {
            e[88] = VAL_STR; /* attempt's first value a string of 2: the second past */
        } else if (forge == 3) {
            e[EV_LIT] = 18; /* row 2's literal one short: its part not used up */
            e[3] = 0x9f;    /* (and the stated length what the rebuild gives) */
        } else if (forge == 4) {
            e[3] = 0xa1; /* the stated length one over */
        } else if (forge == 5) {
            e[3] = 0x9f; /* ... one under */
        } else if (forge == 6) {
            e[5] = 12; /* the parts one byte over the data */
        } else if (forge == 7) {
            e[0] = 4; /* the rows */
        } else if (forge == 8) {
            put64(g + oc + 8, 1); /* the offsets all 1 */
        } else if (forge == 12) {
            /* Every part reads, and the data holds 2 bytes after them: id's
             * part 4 bytes ("a", then an empty value for row 2's), the
             * stated length 2 under. */
            e[11] = 4;
            e[95] = VAL_EMPTY;
            e[3] = 0x9e;
        } else if (forge > 8) {
            /* The stated length far under (uv in two bytes, as 160 is): the
             * rebuild stops at the field that does not fit, row 0's first
             * event's head (20), its first key-value (30), the literal
             * after it (50), rather than write past its buffer. */
            e[3] = (uint8_t)(0x80 | (forge == 9 ? 20 : forge == 10 ? 30 : 50));
            e[4] = 0;
        }
        fix_crcs(g, n);
        put_file(path, g, n);
        cr_assert_eq(span_detail_matches(path, ob, ROWS), forge < 0 ? 0 : -EBADMSG, "forge %d",
                     forge);
    }
    /* Bit 5 without bit 1 refuses the open; so does bit 10 (unknown). */
    for (int k = 0; k < 2; k++) {
        memcpy(g, f, n);
        put64(g + m + 32, k == 0 ? 33 : 35 | 1024);
        fix_crcs(g, n);
        put_file(path, g, n);
        blk *b = NULL;
        char err[256];
        cr_assert_eq(blk_open(path, &b, err, sizeof(err)), -EBADMSG, "flags %d", k);
    }
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* The generator's spans (many names and keys: some shapes, some events
 * past the limits, literal) in a zstd block of the cold tier's options:
 * every span's events and links equal the hot block's. */
Test(block_spanev, generated_spans_read_back_by_key_as_the_hot_block)
{
    oblock *ob = gen_oblock(SIG_TRACES, 7007, 400, 40);
    struct blk_wopts z = {.codec = BLK_CODEC_ZSTD,
                          .zstd_root = true,
                          .attrs_by_key = true,
                          .span_refs = true,
                          .events_by_key = true};
    struct blk_wopts hot = blk_hot_wopts(BLK_HOT_ZSTD_LEVEL, SIG_TRACES);
    char p[512], ph[512];
    write_block(ob, 400, 0, 85, &z, p, sizeof(p));
    write_block(ob, 400, 0, 86, &hot, ph, sizeof(ph));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(p, '/') + 1, &n);
    cr_assert_not_null(f);
    uint64_t ml, m = section(f, n, 1, &ml);
    cr_assert_eq(get64(f + m + 32), 35);
    blk *b = open_ok(p), *h = open_ok(ph);
    check_block(b, ob, 400);
    uint64_t nev = 0;
    for (uint64_t i = 0; i < 400; i++) {
        struct span_view v, w;
        cr_assert_eq(blk_span(b, i, BLK_ALL, &v), 0);
        cr_assert_eq(blk_span(h, i, BLK_ALL, &w), 0);
        cr_assert_eq(v.events.len, w.events.len, "row %llu", (unsigned long long)i);
        cr_assert_eq(memcmp(v.events.p, w.events.p, w.events.len), 0);
        cr_assert_eq(v.links.len, w.links.len, "row %llu", (unsigned long long)i);
        cr_assert_eq(memcmp(v.links.p, w.links.p, w.links.len), 0);
        nev += v.n_events;
    }
    cr_assert_gt(nev, 300);
    blk_unref(h);
    blk_unref(b);
    free(f);
    oblock_free(ob);
}
