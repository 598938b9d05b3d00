/*
 * block_spandet_test.c - format 6's coded span events and links
 * (block_int.h, "v6 SPAN DETAIL"; blk_wopts.span_refs): the exact bytes
 * the writer stores (event times from the span's start, link ids as
 * references to a row with both ids, the u32 fields as varints), the same
 * views as without the option, and forged entries refused at the load of
 * the detail table.
 */
#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_spandet, .init = fresh_dir);

#define ROWS 3
#define SEC 1000000000ull

static const uint8_t tid_a[16] = {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
                                  0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11};
static const uint8_t tid_b[16] = {0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
                                  0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12};
static const uint8_t sid[ROWS][8] = {{0x21, 0x21, 0x21, 0x21, 0x21, 0x21, 0x21, 0x21},
                                     {0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22, 0x22},
                                     {0x23, 0x23, 0x23, 0x23, 0x23, 0x23, 0x23, 0x23}};

static void put_event(struct vbuf *h, uint64_t t, const char *name, uint32_t drop)
{
    cr_assert_eq(vbuf_put_u64(h, t), 0);
    cr_assert_eq(vbuf_put_str(h, name, strlen(name)), 0);
    cr_assert_eq(vbuf_put_u32(h, drop) | vbuf_put_u32(h, 0) | vbuf_put_u32(h, 0), 0);
}

/* A link to (tid, span) with flags 0x101 and, when |attr|, k="v". */
static void put_link(struct vbuf *h, const uint8_t *tid, const uint8_t *span, bool attr)
{
    cr_assert_eq(vbuf_put(h, tid, 16) | vbuf_put(h, span, 8), 0);
    cr_assert_eq(vbuf_put_str(h, "", 0), 0);
    cr_assert_eq(vbuf_put_u32(h, 0x101) | vbuf_put_u32(h, 0), 0);
    cr_assert_eq(vbuf_put_u32(h, attr ? 1 : 0), 0);
    size_t at = h->len;
    cr_assert_eq(vbuf_put_u32(h, 0), 0);
    if (attr) {
        cr_assert_eq(val_put_key(h, "k", 1) | val_put_str(h, "v", 1), 0);
        vbuf_patch_u32(h, at, (uint32_t)(h->len - at - 4));
    }
}

/*
 * Rows 0..2 start at 1, 2, 3 s (trace a, b, a; spans 0x21.., 0x22..,
 * 0x23..). Row 0: an event "e" 5 ns after its start. Row 1: a link to
 * row 0 (trace a, span 0x21.., with k="v") and one to trace b with span
 * 0x21.. (no row has both: stored raw). Row 2: an event 2 ns before its
 * start with 300 dropped attributes, a link to row 1 and one to itself.
 */
static struct batch *three_spans(void)
{
    struct batch *bt = batch_new(SIG_TRACES);
    cr_assert_not_null(bt);
    cr_assert_not_null(batch_add_resource(bt));
    batch_add_scope(bt)->resource = 0;
    for (uint32_t i = 0; i < ROWS; i++) {
        struct span_row *r = batch_add_span(bt);
        cr_assert_not_null(r);
        r->start_ns = (uint64_t)(i + 1) * SEC;
        r->end_ns = r->start_ns + 1000;
        memcpy(r->trace_id, i == 1 ? tid_b : tid_a, 16);
        memcpy(r->span_id, sid[i], 8);
        struct vbuf *h = &bt->heap;
        size_t off = h->len;
        if (i == 0) {
            put_event(h, r->start_ns + 5, "e", 0);
            r->n_events = 1;
        } else if (i == 2) {
            put_event(h, r->start_ns - 2, "", 300);
            r->n_events = 1;
        }
        r->events = (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
        off = h->len;
        if (i == 1) {
            put_link(h, tid_a, sid[0], true);
            put_link(h, tid_b, sid[0], false);
            r->n_links = 2;
        } else if (i == 2) {
            put_link(h, tid_b, sid[1], false);
            put_link(h, tid_a, sid[2], false);
            r->n_links = 2;
        }
        r->links = (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
    }
    return bt;
}

/* |bt| sealed at |path| (plain tables, coded or not); the file's bytes,
 * malloc'd. */
static uint8_t *seal(struct batch *bt, bool refs, uint64_t seal_id, oblock **ob, char *path,
                     size_t cap, size_t *n)
{
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN, .span_refs = refs};
    cr_assert_eq(oblock_new(SIG_TRACES, ob), 0);
    cr_assert_eq(oblock_append(*ob, bt, 1), 0);
    write_block(*ob, ROWS, 0, seal_id, &o, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    cr_assert_eq(f[8], 6, "format 6");
    return f;
}

/* The META section's flags. */
static uint64_t meta_flags(const uint8_t *f, size_t n)
{
    uint64_t len, m = section(f, n, 1, &len);
    cr_assert_neq(m, 0);
    return get64(f + m + 32);
}

/* What the writer stores for three_spans, coded. */
static const uint8_t events_coded[] = {
    10, 1, 'e',  0,    0, 0, /* row 0: zz(5), "e", 0 dropped, 0 attrs, 0 bytes */
    3,  0, 0xac, 0x02, 0, 0, /* row 2: zz(-2), "", 300 dropped */
};

Test(block_spandet, span_refs_code_event_times_and_link_ids_exactly)
{
    struct batch *bt = three_spans();
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal(bt, true, 71, &ob, path, sizeof(path), &n);
    cr_assert_eq(meta_flags(f, n), 3, "sorted, span detail coded");
    const char *corpus = getenv("MIRADB_BLK_CORPUS_DIR"); /* a fuzz seed (block_test.c) */
    if (corpus != NULL) {
        cr_assert_eq(tmpdir_write_file(corpus, "v6-span-refs-3.blk", f, n), 0);
    }
    uint64_t elen, ev = column_at(f, n, 2, 5, &elen);
    cr_assert_eq(elen, sizeof(events_coded));
    cr_assert_eq(memcmp(f + ev, events_coded, elen), 0);

    /* The links: row 1's to row 0 (1 + zz(1)), k="v" as val.h puts it;
     * the raw one; row 2's to row 1 (1 + zz(1)) and to itself (1). */
    struct vbuf x;
    vbuf_init(&x);
    struct vbuf kv;
    vbuf_init(&kv);
    cr_assert_eq(val_put_key(&kv, "k", 1) | val_put_str(&kv, "v", 1), 0);
    const uint8_t head1[] = {3, 0, 0x81, 0x02, 0, 1};
    cr_assert_eq(vbuf_put(&x, head1, sizeof(head1)) | vbuf_put_u8(&x, (uint8_t)kv.len), 0);
    cr_assert_eq(vbuf_put(&x, kv.p, kv.len), 0);
    cr_assert_eq(vbuf_put_u8(&x, 0) | vbuf_put(&x, tid_b, 16) | vbuf_put(&x, sid[0], 8), 0);
    const uint8_t tail[] = {0, 0x81, 0x02, 0, 0, 0};
    cr_assert_eq(vbuf_put(&x, tail, sizeof(tail)), 0);
    cr_assert_eq(vbuf_put_u8(&x, 3) | vbuf_put(&x, tail, sizeof(tail)), 0);
    cr_assert_eq(vbuf_put_u8(&x, 1) | vbuf_put(&x, tail, sizeof(tail)), 0);
    uint64_t llen, lk = column_at(f, n, 2, 9, &llen);
    cr_assert_eq(llen, x.len, "%llu vs %zu", (unsigned long long)llen, x.len);
    cr_assert_eq(memcmp(f + lk, x.p, x.len), 0);
    cr_assert_eq(span_detail_matches(path, ob, ROWS), 0);

    /* Without the option: batch.h's bytes, flag bit 1 clear. */
    oblock *ob2;
    char p2[512];
    size_t n2;
    uint8_t *g = seal(bt, false, 72, &ob2, p2, sizeof(p2), &n2);
    cr_assert_eq(meta_flags(g, n2), 1);
    struct span_view w0, w2;
    oblock_span(ob2, 0, &w0);
    oblock_span(ob2, 2, &w2);
    ev = column_at(g, n2, 2, 5, &elen);
    cr_assert_eq(elen, (uint64_t)w0.events.len + w2.events.len);
    cr_assert_eq(memcmp(g + ev, w0.events.p, w0.events.len), 0);
    cr_assert_eq(span_detail_matches(p2, ob2, ROWS), 0);

    vbuf_fini(&x);
    vbuf_fini(&kv);
    free(g);
    free(f);
    oblock_free(ob2);
    oblock_free(ob);
    batch_free(bt);
}

Test(block_spandet, forged_coded_entries_fail_the_detail_load)
{
    struct batch *bt = three_spans();
    oblock *ob;
    char path[512];
    size_t n;
    uint8_t *f = seal(bt, true, 73, &ob, path, sizeof(path), &n);
    uint64_t elen, ev = column_at(f, n, 2, 5, &elen), llen, lk = column_at(f, n, 2, 9, &llen);
    uint64_t ml, m = section(f, n, 1, &ml);
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);
    memcpy(g, f, n);
    fix_crcs(g, n);
    put_file(path, g, n);
    cr_assert_eq(span_detail_matches(path, ob, ROWS), 0, "unforged");
    for (int forge = 0; forge < 5; forge++) {
        memcpy(g, f, n);
        if (forge == 0) {
            g[lk + llen - 7] = 7; /* row 2's self link: row 2 - unzz(6) = -1 */
        } else if (forge == 1) {
            g[ev + 1] = 5; /* row 0's name past its entry */
        } else if (forge == 2) {
            g[ev + 5] = 1; /* row 0's attribute bytes past its entry */
        } else if (forge == 3) {
            g[lk + 6] = 0x7f; /* row 1's first link: 127 bytes of attributes */
        } else {
            g[ev + 5] = 0x80; /* row 0's attribute bytes: a varint cut short */
        }
        fix_crcs(g, n);
        put_file(path, g, n);
        cr_assert_eq(span_detail_matches(path, ob, ROWS), -EBADMSG, "forge %d", forge);
    }
    /* Unknown META flags refuse the open; bit 1 in a log block too. */
    memcpy(g, f, n);
    put64(g + m + 32, 7);
    fix_crcs(g, n);
    put_file(path, g, n);
    blk *b = NULL;
    char err[256];
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), -EBADMSG);
    free(g);
    free(f);
    oblock_free(ob);
    batch_free(bt);
}

/* The generator's spans (random link ids: raw) in a zstd block of the
 * cold tier's options read back exactly, coded. */
Test(block_spandet, generated_spans_read_back_coded)
{
    oblock *ob = gen_oblock(SIG_TRACES, 7007, 400, 40);
    struct blk_wopts z = {
        .codec = BLK_CODEC_ZSTD, .zstd_root = true, .attrs_by_key = true, .span_refs = true};
    char p[512];
    write_block(ob, 400, 0, 74, &z, p, sizeof(p));
    size_t n;
    uint8_t *f = tmpdir_read_file(dir, strrchr(p, '/') + 1, &n);
    cr_assert_not_null(f);
    cr_assert_eq(meta_flags(f, n), 3);
    blk *b = open_ok(p);
    check_block(b, ob, 400);
    blk_unref(b);
    free(f);
    oblock_free(ob);
}
