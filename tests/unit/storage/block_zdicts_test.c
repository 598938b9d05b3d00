/*
 * block_zdicts_test.c - format 6's compressed footer dictionaries (footer
 * META flag bit 3, section 12; blk_wopts.dicts_zstd): sections 5-7 leave
 * the footer for one zstd frame, every resource, scope and metric reads
 * back as the open block has it, and a flag without its section (or the
 * other way round), a frame cut or damaged, refuse the open.
 */
#include <zstd.h>

#include "tests/unit/storage/blkfile.h"
#include "tests/unit/storage/blkcheck.h"
#include "tests/unit/storage/blkgen.h"

TestSuite(block_zdicts, .init = fresh_dir);

static uint8_t *sealed(const oblock *ob, uint64_t seal, const struct blk_wopts *o, char *path,
                       size_t cap, size_t *n)
{
    write_block(ob, oblock_rows(ob), 0, seal, o, path, cap);
    uint8_t *f = tmpdir_read_file(dir, strrchr(path, '/') + 1, n);
    cr_assert_not_null(f);
    return f;
}

static uint64_t *meta_flags(uint8_t *f, size_t n)
{
    uint64_t len, at = section(f, n, 1, &len);
    cr_assert_neq(at, 0);
    return (uint64_t *)(void *)(f + at + 32);
}

static void open_refused(const uint8_t *f, size_t n, const char *why)
{
    cr_assert_eq(tmpdir_write_file(dir, "forged.blk", f, n), 0);
    char fp[600], err[256];
    snprintf(fp, sizeof(fp), "%s/forged.blk", dir);
    blk *b = NULL;
    cr_assert_eq(blk_open_ex(fp, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), -EBADMSG, "%s", why);
    cr_assert(strstr(err, why) != NULL, "%s: %s", why, err);
}

/*
 * File f[0, n) with section 12's body (at |at|, |len| bytes, the last
 * section but the padding: the writer puts it before the blooms, so the
 * rest of the footer is copied after it) replaced by u64 |rlen| and the
 * zstd frame of raw[0, rlen); the CRCs fixed. Returned malloc'd, its
 * length in *out_n.
 */
static uint8_t *with_frame(const uint8_t *f, size_t n, uint64_t at, uint64_t len,
                           const uint8_t *raw, size_t rlen, size_t *out_n)
{
    size_t cap = ZSTD_compressBound(rlen);
    uint8_t *z = malloc(cap);
    cr_assert_not_null(z);
    size_t zn = ZSTD_compress(z, cap, raw, rlen, 3);
    cr_assert(!ZSTD_isError(zn));
    uint64_t nb = 8 + zn, old_end = at + (len + 7) / 8 * 8, new_end = at + (nb + 7) / 8 * 8;
    size_t m = n - old_end + new_end;
    uint8_t *g = calloc(1, m);
    cr_assert_not_null(g);
    memcpy(g, f, at);
    put64(g + at - 8, nb);
    put64(g + at, rlen);
    memcpy(g + at + 8, z, zn);
    memcpy(g + new_end, f + old_end, n - old_end);
    uint64_t foff = get64(f + n - 40);
    put64(g + m - 32, m - 40 - foff); /* the footer's length */
    free(z);
    fix_crcs(g, m);
    *out_n = m;
    return g;
}

/* Every signal, plain and zstd tables: no sections 5-7, a section 12
 * whose frame holds their bytes as the block without the option has
 * them (each 8-aligned from the frame's start), flag bit 3, and every
 * row, resource, scope and metric back. */
static void round_trip(enum signal s, enum blk_codec codec)
{
    oblock *ob = gen_oblock(s, 40 + (uint64_t)s, 900, 90);
    struct blk_wopts o = {.codec = codec, .zstd_root = true, .zstd_level = 3};
    char p0[512], p1[512];
    size_t n0, n1;
    uint8_t *f0 = sealed(ob, 50 + (uint64_t)s, &o, p0, sizeof(p0), &n0);
    o.dicts_zstd = true;
    uint8_t *f1 = sealed(ob, 60 + (uint64_t)s, &o, p1, sizeof(p1), &n1);
    cr_assert_eq(*meta_flags(f1, n1), *meta_flags(f0, n0) | 8);
    uint64_t len, l5, l6, l7;
    for (uint32_t id = 5; id <= 7; id++) {
        cr_assert_eq(section(f1, n1, id, &len), 0, "section %u", id);
    }
    uint64_t a5 = section(f0, n0, 5, &l5), a6 = section(f0, n0, 6, &l6),
             a7 = section(f0, n0, 7, &l7);
    cr_assert(a5 != 0 && a6 != 0 && a7 != 0);
    uint64_t at = section(f1, n1, 12, &len);
    cr_assert_neq(at, 0);
    /* the frame: sections 5, 6, 7 from the start of 5's header */
    uint64_t raw = get64(f1 + at);
    cr_assert_eq(raw, a7 + l7 - (a5 - 16));
    uint8_t *d = malloc(raw);
    cr_assert_not_null(d);
    cr_assert_eq(ZSTD_decompress(d, raw, f1 + at + 8, len - 8), raw);
    cr_assert_arr_eq(d, f0 + a5 - 16, raw, "the sections' bytes");
    free(d);
    blk *b = open_ok(p1);
    check_block(b, ob, oblock_rows(ob));
    blk_unref(b);
    free(f0);
    free(f1);
    oblock_free(ob);
}

Test(block_zdicts, logs_spans_and_points_read_back_their_dictionaries)
{
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        round_trip((enum signal)s, BLK_CODEC_PLAIN);
        round_trip((enum signal)s, BLK_CODEC_ZSTD);
    }
}

Test(block_zdicts, forged_flags_and_frames_are_refused)
{
    oblock *ob = gen_oblock(SIG_METRICS, 77, 300, 50);
    struct blk_wopts o = {.codec = BLK_CODEC_PLAIN};
    char path[512];
    size_t n;
    uint8_t *f = sealed(ob, 70, &o, path, sizeof(path), &n);
    *meta_flags(f, n) |= 8; /* the flag, no section 12 */
    fix_crcs(f, n);
    open_refused(f, n, "footer meta flag bit 3 and the dictionary section disagree");
    free(f);

    o.dicts_zstd = true;
    f = sealed(ob, 71, &o, path, sizeof(path), &n);
    uint64_t len, at = section(f, n, 12, &len);
    cr_assert_neq(at, 0);
    uint8_t *g = malloc(n);
    cr_assert_not_null(g);
    for (int forge = 0; forge < 4; forge++) {
        memcpy(g, f, n);
        if (forge == 0) { /* the section, no flag */
            *meta_flags(g, n) &= ~(uint64_t)8;
        } else if (forge == 1) { /* the raw length one more than the frame's */
            put64(g + at, get64(g + at) + 1);
        } else if (forge == 2) { /* the frame's last byte (its end) damaged */
            g[at + len - 1] ^= 0x5a;
        } else { /* the section's length short of its frame */
            put64(g + at - 8, len - 1);
        }
        fix_crcs(g, n);
        open_refused(g, n,
                     forge == 0 ? "footer meta flag bit 3 and the dictionary section disagree"
                                : "malformed compressed dictionary section");
    }
    free(g);
    /* frames of other contents (recompressed, the footer rebuilt around
     * them): 8 bytes past the three sections, a section 5 twice, a
     * section 10 inside, section 7 missing */
    uint64_t raw = get64(f + at);
    uint8_t *d = malloc(raw + 8);
    cr_assert_not_null(d);
    cr_assert_eq(ZSTD_decompress(d, raw, f + at + 8, len - 8), raw);
    uint64_t l5 = get64(d + 8), a6 = (16 + l5 + 7) / 8 * 8;
    size_t cn;
    uint8_t *c = with_frame(f, n, at, len, d, raw, &cn); /* the control: as it was */
    cr_assert_eq(tmpdir_write_file(dir, "control.blk", c, cn), 0);
    char cp[600];
    snprintf(cp, sizeof(cp), "%s/control.blk", dir);
    blk *cb = open_ok(cp);
    check_block(cb, ob, oblock_rows(ob));
    blk_unref(cb);
    free(c);
    for (int forge = 0; forge < 4; forge++) {
        uint8_t *e = malloc(raw + 8);
        cr_assert_not_null(e);
        memcpy(e, d, raw);
        size_t elen = raw;
        if (forge == 0) {
            memset(e + raw, 0, 8);
            elen += 8;
        } else if (forge == 1) {
            put32(e + a6, 5);
        } else if (forge == 2) {
            put32(e + a6, 10); /* absent from this footer */
        } else {
            uint64_t l6 = get64(e + a6 + 8);
            elen = a6 + 16 + l6;
        }
        uint8_t *h = with_frame(f, n, at, len, e, elen, &elen);
        open_refused(h, elen, "malformed compressed dictionary section");
        free(h);
        free(e);
    }
    free(d);
    blk *b = open_ok(path);
    check_block(b, ob, oblock_rows(ob));
    blk_unref(b);
    free(f);
    oblock_free(ob);
}
