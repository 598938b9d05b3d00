/*
 * block_grams_test.c - the body gram bloom of sealed log blocks (footer
 * section 10; storage/block_write.c, block_read.c, bloom.c): no false
 * negatives for any substring of any body (starts, ends, case folded, cut
 * inside UTF-8), few false positives, the exact distinct gram count, the
 * cap, "maybe" for structured bodies and for blocks without the section
 * (a real block sealed before it, and a forged one), refusal of a
 * malformed section, and unknown bloom kinds in section 4 skipped.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#include "storage/block.h"
#include "storage/bloom.h"
#include "tests/unit/storage/blkgen.h"
#include "tests/util/tmpdir.h"

static char dir[256];

static void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(block_grams, .init = fresh_dir);

static void write_block(const oblock *ob, uint64_t seal, char *path, size_t cap)
{
    struct blk_meta m = {.shard = 0, .wal_seq = 1000 + seal, .seal_id = seal};
    int rc = blk_write_ex(dir, ob, oblock_rows(ob), &m, NULL, path, cap);
    cr_assert_eq(rc, 0, "blk_write: %s", strerror(-rc));
}

static blk *open_ok(const char *path)
{
    blk *b = NULL;
    char err[256];
    int rc = blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
    cr_assert_eq(rc, 0, "blk_open %s: %d %s", path, rc, err);
    return b;
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* Offset of footer section |id|'s header (block_int.h's layout); 0 if absent. */
static uint64_t section_hdr(const uint8_t *f, size_t n, uint32_t id, uint64_t *len)
{
    uint64_t foff = get64(f + n - 40), p = foff + 8;
    uint32_t nsec;
    memcpy(&nsec, f + foff, 4);
    for (uint32_t i = 0; i < nsec; i++) {
        uint32_t sid;
        p = (p + 7) / 8 * 8;
        memcpy(&sid, f + p, 4);
        *len = get64(f + p + 8);
        if (sid == id) {
            return p;
        }
        p += 16 + *len;
    }
    return 0;
}

/* The footer CRC, then the trailer's (the tables are untouched). */
static void fix_footer_crc(uint8_t *f, size_t n)
{
    uint64_t foff = get64(f + n - 40), flen = get64(f + n - 32);
    put32(f + n - 24, libdeflate_crc32(0, f + foff, flen));
    put32(f + n - 16, libdeflate_crc32(0, f + n - 40, 24));
}

static const struct blk_bloom_info *gram_info(const blk *b, struct blk_bloom_info *bi)
{
    for (uint32_t i = 0; i < blk_n_blooms(b); i++) {
        cr_assert_eq(blk_bloom_info(b, i, bi), 0);
        if (bi->kind == BLK_BLOOM_GRAMS) {
            return bi;
        }
    }
    return NULL;
}

static char fold(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c + 32) : c;
}

/* The gram code of a byte, as section 10's format defines it. */
static uint32_t code(char ch)
{
    unsigned char c = (unsigned char)ch;
    return c >= 0x80 ? 'A' + (c - 0x80u) % 26 : (unsigned char)fold(ch);
}

Test(block_grams, every_substring_of_every_body_may_be_there_and_few_others)
{
    char path[512];
    gen_string_bodies_only = true;
    oblock *ob = gen_oblock(SIG_LOGS, 201, 2000, 100);
    gen_string_bodies_only = false;
    write_block(ob, 201, path, sizeof(path));
    blk *b = open_ok(path);

    /* the distinct grams, counted here with a plain bitmap */
    uint8_t *seen = calloc(1u << 18, 1);
    cr_assert_not_null(seen);
    uint64_t distinct = 0, probes = 0, utf8 = 0, edges = 0;
    uint64_t s = 77;
    for (uint64_t i = 0; i < 2000; i++) {
        struct log_view v;
        cr_assert_eq(blk_log(b, i, BLK_ALL, &v), 0);
        cr_assert_eq(v.body_type, VAL_STR);
        const char *p = v.body_str.p;
        size_t n = v.body_str.len;
        for (size_t k = 0; k + 3 <= n; k++) {
            uint32_t g = code(p[k]) << 14 | code(p[k + 1]) << 7 | code(p[k + 2]);
            if (!(seen[g >> 3] & (1u << (g & 7)))) {
                seen[g >> 3] |= (uint8_t)(1u << (g & 7));
                distinct++;
            }
        }
        if (n < 3) {
            continue;
        }
        /* the whole body, its first and last 3 bytes, and random cuts */
        cr_assert(blk_may_have_substr(b, p, n), "row %llu body missed", (unsigned long long)i);
        cr_assert(blk_may_have_substr(b, p, 3));
        cr_assert(blk_may_have_substr(b, p + n - 3, 3));
        edges += 3;
        for (int r = 0; r < 8; r++) {
            size_t len = 3 + (size_t)gen_below(&s, (n - 3) + 1);
            size_t at = (size_t)gen_below(&s, n - len + 1);
            char up[4096], lo[4096];
            for (size_t c = 0; c < len; c++) {
                char ch = p[at + c];
                up[c] = ch >= 'a' && ch <= 'z' ? (char)(ch - 32) : ch;
                lo[c] = fold(ch);
                utf8 += (unsigned char)ch >= 0x80;
            }
            cr_assert(blk_may_have_substr(b, p + at, len), "missed %.*s", (int)len, p + at);
            cr_assert(blk_may_have_substr(b, up, len), "missed upper %.*s", (int)len, up);
            cr_assert(blk_may_have_substr(b, lo, len), "missed lower %.*s", (int)len, lo);
            probes++;
        }
    }
    free(seen);
    cr_assert_gt(probes, 10000);
    cr_assert_gt(utf8, 100, "needles cut across UTF-8 bytes");
    cr_assert_gt(edges, 3000);

    struct blk_bloom_info bi;
    cr_assert_not_null(gram_info(b, &bi));
    cr_assert(bi.complete);
    cr_assert_eq(bi.n_items, distinct, "items %llu, distinct %llu", (unsigned long long)bi.n_items,
                 (unsigned long long)distinct);
    cr_assert_eq(bi.nbits, bloom_nbits_for(distinct));
    cr_assert_eq(blk_n_blooms(b), 5);

    /* needles of bytes no body holds ('#' and '~' are in no gen word) */
    int fp = 0;
    const int tries = 20000;
    for (int t = 0; t < tries; t++) {
        char nd[8];
        for (int c = 0; c < 6; c++) {
            nd[c] = "#~qjvwQJ"[gen_below(&s, 8)];
        }
        nd[(size_t)gen_below(&s, 6)] = '#';
        fp += blk_may_have_substr(b, nd, 6);
    }
    cr_expect_lt(fp, tries / 100, "false positives %d of %d", fp, tries);
    /* one absent gram is enough, wherever it is */
    cr_assert_not(blk_may_have_substr(b, "timeout#~#", 10));
    cr_assert_not(blk_may_have_substr(b, "#~#timeout", 10));
    /* fewer than 3 bytes: no answer but maybe */
    cr_assert(blk_may_have_substr(b, "#~", 2));
    cr_assert(blk_may_have_substr(b, "", 0));
    blk_unref(b);
    oblock_free(ob);
}

Test(block_grams, structured_bodies_leave_the_bloom_incomplete)
{
    char path[512];
    oblock *ob = gen_oblock(SIG_LOGS, 202, 600, 100); /* every body type */
    write_block(ob, 202, path, sizeof(path));
    blk *b = open_ok(path);
    struct blk_bloom_info bi;
    cr_assert_not_null(gram_info(b, &bi));
    cr_assert_not(bi.complete);
    cr_assert_eq(bi.nbits, 512);
    cr_assert_eq(bi.bits_set, 0);
    cr_assert(blk_may_have_substr(b, "#~#~#", 5));
    blk_unref(b);
    oblock_free(ob);
}

/* Bodies of random bytes: well over 2^18 distinct grams, past the cap. */
Test(block_grams, too_many_grams_leave_the_bloom_incomplete)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    struct batch *bt = batch_new(SIG_LOGS);
    arena *a = arena_new(0);
    cr_assert(bt != NULL && a != NULL);
    uint64_t s = 9;
    for (int k = 0; k < 11; k++) {
        gen_batch(bt, a, SIG_LOGS, &s, 0);
        for (int r = 0; r < 200; r++) {
            struct log_row *row = batch_add_log(bt);
            cr_assert_not_null(row);
            row->time_ns = 1000 + (uint64_t)(k * 200 + r);
            row->body_type = VAL_STR;
            char *p = arena_alloc(a, 1000);
            cr_assert_not_null(p);
            for (int c = 0; c < 1000; c++) {
                p[c] = (char)gen_rnd(&s);
            }
            row->body_str = (struct mstr){p, 1000};
        }
        cr_assert_eq(oblock_append(ob, bt, (uint64_t)k + 1), 0);
    }
    char path[512];
    write_block(ob, 203, path, sizeof(path));
    blk *b = open_ok(path);
    struct blk_bloom_info bi;
    cr_assert_not_null(gram_info(b, &bi));
    cr_assert_not(bi.complete);
    cr_assert(blk_may_have_substr(b, "\x01\x02\x03\x04", 4));
    blk_unref(b);
    /* the writer's gram set is empty again: the next block is exact */
    oblock_free(ob);
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    gen_batch(bt, a, SIG_LOGS, &s, 0);
    struct log_row *row = batch_add_log(bt);
    row->time_ns = 5;
    row->body_type = VAL_STR;
    row->body_str = (struct mstr){"abcdABCD", 8};
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    write_block(ob, 204, path, sizeof(path));
    b = open_ok(path);
    cr_assert_not_null(gram_info(b, &bi));
    cr_assert(bi.complete);
    cr_assert_eq(bi.n_items, 4, "abc bcd cda dab: %llu", (unsigned long long)bi.n_items);
    cr_assert(blk_may_have_substr(b, "DABC", 4));
    cr_assert_not(blk_may_have_substr(b, "\x01\x02\x03\x04", 4));
    blk_unref(b);
    oblock_free(ob);
    batch_free(bt);
    arena_free(a);
}

/* A log block sealed by the release before the gram bloom (kept as
 * tests/vectors/blocks/v2-logs-before-grams.blk: four records "legacy
 * record K: Connection Timeout ÅÄÖ end") opens and answers maybe. */
Test(block_grams, blocks_sealed_before_the_gram_bloom_answer_maybe)
{
    char path[1024];
    const char *v = getenv("MIRADB_VECTORS");
    snprintf(path, sizeof(path), "%s/blocks/v2-logs-before-grams.blk",
             v != NULL ? v : "tests/vectors");
    blk *b = open_ok(path);
    cr_assert_eq(blk_rows(b), 4);
    cr_assert_eq(blk_n_blooms(b), 4);
    struct blk_bloom_info bi;
    cr_assert_null(gram_info(b, &bi));
    struct log_view lv;
    cr_assert_eq(blk_log(b, 2, BLK_ALL, &lv), 0);
    cr_assert_eq(lv.body_str.len, strlen("legacy record 2: Connection Timeout ÅÄÖ end"));
    cr_assert(
        memcmp(lv.body_str.p, "legacy record 2: Connection Timeout ÅÄÖ end", lv.body_str.len) == 0);
    cr_assert_not(blk_may_have_token(b, "zzqx", 4), "its token bloom still works");
    cr_assert(blk_may_have_substr(b, "zzqx", 4));
    cr_assert(blk_may_have_substr(b, "#~#", 3));
    blk_unref(b);
}

Test(block_grams, an_unknown_section_in_its_place_answers_maybe_and_a_bad_one_fails)
{
    char path[512];
    gen_string_bodies_only = true;
    oblock *ob = gen_oblock(SIG_LOGS, 205, 300, 50);
    gen_string_bodies_only = false;
    write_block(ob, 205, path, sizeof(path));
    size_t n;
    uint8_t *orig = tmpdir_read_file(dir, strrchr(path, '/') + 1, &n);
    cr_assert_not_null(orig);
    uint64_t len, at = section_hdr(orig, n, 10, &len);
    cr_assert_neq(at, 0);
    {
        blk *b = open_ok(path);
        cr_assert_not(blk_may_have_substr(b, "#~#", 3));
        blk_unref(b);
    }
    for (int forge = 0; forge < 4; forge++) {
        uint8_t *f = malloc(n);
        memcpy(f, orig, n);
        const char *want = NULL;
        if (forge == 0) {
            put32(f + at, 99); /* a section id from the future: skipped */
        } else if (forge == 1) {
            f[at + 16] = 3; /* a gram section claiming another kind */
            want = "malformed body gram bloom section";
        } else if (forge == 2) {
            f[at + 16 + 16] = 7; /* nbits not a multiple of 512 */
            want = "malformed body gram bloom section";
        } else {
            /* section 4's first bloom (body tokens) given a kind from the
             * future: skipped, the others still read */
            uint64_t l4, b4 = section_hdr(f, n, 4, &l4);
            cr_assert_neq(b4, 0);
            f[b4 + 16 + 8] = 9;
        }
        fix_footer_crc(f, n);
        cr_assert_eq(tmpdir_write_file(dir, "forged-grams.blk", f, n), 0);
        char fp[600], err[256];
        snprintf(fp, sizeof(fp), "%s/forged-grams.blk", dir);
        blk *b = NULL;
        int rc = blk_open_ex(fp, BLK_OPEN_NO_CACHE, &b, err, sizeof(err));
        if (want != NULL) {
            cr_assert_eq(rc, -EBADMSG, "forge %d", forge);
            cr_assert(strstr(err, want) != NULL, "forge %d: %s", forge, err);
        } else {
            cr_assert_eq(rc, 0, "forge %d: %s", forge, err);
            struct blk_bloom_info bi;
            if (forge == 0) {
                cr_assert_null(gram_info(b, &bi));
                cr_assert(blk_may_have_substr(b, "#~#", 3));
                cr_assert_not(blk_may_have_token(b, "zzqx", 4));
            } else {
                cr_assert_eq(blk_n_blooms(b), 4);
                cr_assert(blk_may_have_token(b, "zzqx", 4), "no token bloom: maybe");
                cr_assert_not(blk_may_have_substr(b, "#~#", 3));
            }
            blk_unref(b);
        }
        free(f);
    }
    free(orig);
    oblock_free(ob);
}

/* Log rows with bodies |bodies[order[i]]|, appended in one batch. */
static oblock *bodies_oblock(const char *const *bodies, const uint32_t *order, uint32_t n)
{
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_LOGS, &ob), 0);
    struct batch *bt = batch_new(SIG_LOGS);
    arena *a = arena_new(0);
    cr_assert(bt != NULL && a != NULL);
    uint64_t s = 31;
    gen_batch(bt, a, SIG_LOGS, &s, 0);
    for (uint32_t i = 0; i < n; i++) {
        struct log_row *row = batch_add_log(bt);
        cr_assert_not_null(row);
        row->time_ns = 1000 + i;
        row->body_type = VAL_STR;
        const char *p = bodies[order[i]];
        row->body_str = gen_copy(a, p, strlen(p));
    }
    cr_assert_eq(oblock_append(ob, bt, 1), 0);
    batch_free(bt);
    arena_free(a);
    return ob;
}

/* The exact number of distinct grams of |bodies[0, n)|. */
static uint64_t distinct_grams(const char *const *bodies, uint32_t n)
{
    uint8_t *seen = calloc(1u << 18, 1);
    cr_assert_not_null(seen);
    uint64_t distinct = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *p = bodies[i];
        for (size_t k = 0; k + 3 <= strlen(p); k++) {
            uint32_t g = code(p[k]) << 14 | code(p[k + 1]) << 7 | code(p[k + 2]);
            distinct += !(seen[g >> 3] & (1u << (g & 7)));
            seen[g >> 3] |= (uint8_t)(1u << (g & 7));
        }
    }
    free(seen);
    return distinct;
}

/*
 * The writer skips a body equal to one it indexed earlier in the block
 * (bloom.h's recent bodies). Every body's tokens and grams must still be
 * in the filters: a body repeated many times, bodies that share the
 * table's slot (same length, same first, middle and last 8 bytes) but
 * differ elsewhere, and the same bodies sealed again in later blocks (the
 * writer's scratch is reused: what it remembered of the last block must
 * not count).
 */
Test(block_grams, repeated_bodies_keep_their_tokens_and_grams)
{
    enum { NB = 201, NROWS = 1200 };
    static char text[NB][64];
    const char *bodies[NB];
    /* body 0 repeats; bodies 1..200 collide in one slot: 40 bytes,
     * "aaaaaaaa uNNNNx mmmmmmmm vNNNNy zzzzzzzz" */
    snprintf(text[0], sizeof(text[0]), "Repeated body with Onlyrepeatedqz inside");
    for (int k = 1; k < NB; k++) {
        snprintf(text[k], sizeof(text[k]), "aaaaaaaa u%04dx mmmmmmmm v%04dy zzzzzzzz", k, k);
        cr_assert_eq(strlen(text[k]), 40);
    }
    for (int k = 0; k < NB; k++) {
        bodies[k] = text[k];
    }
    uint32_t order[NROWS];
    for (uint32_t i = 0; i < NROWS; i++) {
        /* 0, 1, 0, 2, 0, 3, ... : each colliding body three times, apart */
        order[i] = i % 2 == 0 ? 0 : 1 + (i / 2) % (NB - 1);
    }
    uint64_t want = distinct_grams(bodies, NB);
    oblock *ob = NULL;
    for (int blk_n = 0; blk_n < 3; blk_n++) {
        /* blocks 0 and 1 seal one open block twice; block 2 a new one
         * whose bodies are the same bytes at other addresses */
        if (blk_n != 1) {
            if (ob != NULL) {
                oblock_free(ob);
            }
            ob = bodies_oblock(bodies, order, NROWS);
        }
        char path[512];
        write_block(ob, 300 + (uint64_t)blk_n, path, sizeof(path));
        blk *b = open_ok(path);
        cr_assert_eq(blk_rows(b), NROWS);
        cr_assert(blk_may_have_token(b, "onlyrepeatedqz", 14), "block %d", blk_n);
        cr_assert(blk_may_have_substr(b, "ONLYREPEATED", 12), "block %d", blk_n);
        for (int k = 1; k < NB; k++) {
            char tok[16], sub[48];
            snprintf(tok, sizeof(tok), "u%04dx", k);
            cr_assert(blk_may_have_token(b, tok, 6), "block %d: %s", blk_n, tok);
            snprintf(tok, sizeof(tok), "v%04dy", k);
            cr_assert(blk_may_have_token(b, tok, 6), "block %d: %s", blk_n, tok);
            snprintf(sub, sizeof(sub), "%04dx mmmmmmmm v%04d", k, k);
            cr_assert(blk_may_have_substr(b, sub, strlen(sub)), "block %d: %s", blk_n, sub);
        }
        struct blk_bloom_info bi;
        cr_assert_not_null(gram_info(b, &bi));
        cr_assert(bi.complete);
        cr_assert_eq(bi.n_items, want, "block %d: items %llu, distinct %llu", blk_n,
                     (unsigned long long)bi.n_items, (unsigned long long)want);
        int fp = 0;
        for (int t = 0; t < 50; t++) {
            char tok[16];
            snprintf(tok, sizeof(tok), "w%04dq", t);
            fp += blk_may_have_token(b, tok, 6);
        }
        cr_assert_leq(fp, 5, "absent tokens: %d of 50 maybe", fp);
        blk_unref(b);
    }
    oblock_free(ob);
}

/*
 * The writer's token cache (bloom.h) skips a short token it added earlier
 * in the block. Every token of every body must still pass the block's
 * token filter, in any case, and every substring of 3 or more bytes its
 * gram filter: bodies that share words in mixed case, tokens around the
 * cache's 16-byte cap and over BLOOM_TOKEN_MAX, thousands of distinct
 * short tokens (slots evicted), UTF-8, empty bodies. Three blocks in turn
 * reuse the writer's scratch: a later block whose bodies reuse the earlier
 * blocks' tokens must still hold them (the cache is emptied per seal).
 */
Test(block_grams, every_token_and_substring_passes_with_the_token_cache)
{
    enum { NROWS = 1500 };
    static char text[NROWS][200];
    const char *bodies[NROWS];
    uint32_t order[NROWS];
    static const char *const words[] = {
        "Timeout",           "error",      "GET", "user_id", "a", "x9", "pool", "SIXTEEN_BYTES_16",
        "seventeen_bytes17", "caf\xc3\xa9"};
    uint64_t s = 4242;
    for (int blkn = 0; blkn < 3; blkn++) {
        for (uint32_t i = 0; i < NROWS; i++) {
            char *p = text[i];
            size_t n = 0;
            int nw = i % 11 == 0 ? 0 : 1 + (int)gen_below(&s, 12);
            for (int w = 0; w < nw; w++) {
                char tok[160];
                uint64_t r = gen_below(&s, 10);
                if (r < 5) {
                    snprintf(tok, sizeof(tok), "%s", words[gen_below(&s, 10)]);
                    for (char *q = tok; *q; q++) { /* a random case per letter */
                        if (*q >= 'a' && *q <= 'z' && gen_below(&s, 2)) {
                            *q = (char)(*q - 32);
                        } else if (*q >= 'A' && *q <= 'Z' && gen_below(&s, 2)) {
                            *q = (char)(*q + 32);
                        }
                    }
                } else if (r < 8) { /* distinct short tokens: evictions */
                    snprintf(tok, sizeof(tok), "t%u_%d", i * 13 + (uint32_t)w, blkn % 2);
                } else if (r < 9) {
                    snprintf(tok, sizeof(tok), "%llu", (unsigned long long)gen_below(&s, 100));
                } else { /* over BLOOM_TOKEN_MAX */
                    memset(tok, 'L', 140);
                    snprintf(tok + 140, sizeof(tok) - 140, "%d", (int)gen_below(&s, 50));
                }
                size_t tn = strlen(tok);
                if (n + tn + 2 >= sizeof(text[i])) {
                    break;
                }
                memcpy(p + n, tok, tn);
                n += tn;
                p[n++] = " =:,/"[gen_below(&s, 5)];
            }
            p[n] = '\0';
            bodies[i] = p;
            order[i] = i;
        }
        oblock *ob = bodies_oblock(bodies, order, NROWS);
        char path[512];
        write_block(ob, 400 + (uint64_t)blkn, path, sizeof(path));
        blk *b = open_ok(path);
        uint64_t tokens = 0, subs = 0;
        for (uint32_t i = 0; i < NROWS; i++) {
            const char *p = bodies[i];
            size_t n = strlen(p), pos = 0, st, tl;
            while (bloom_next_token(p, n, &pos, &st, &tl)) {
                char up[200], lo[200];
                for (size_t k = 0; k < tl; k++) {
                    up[k] =
                        p[st + k] >= 'a' && p[st + k] <= 'z' ? (char)(p[st + k] - 32) : p[st + k];
                    lo[k] = fold(p[st + k]);
                }
                cr_assert(blk_may_have_token(b, p + st, tl), "block %d row %u: %.*s", blkn, i,
                          (int)tl, p + st);
                cr_assert(blk_may_have_token(b, up, tl), "block %d: upper %.*s", blkn, (int)tl, up);
                cr_assert(blk_may_have_token(b, lo, tl), "block %d: lower %.*s", blkn, (int)tl, lo);
                tokens++;
            }
            for (size_t at = 0; at + 3 <= n; at++) {
                for (size_t len = 3; at + len <= n && len <= 12; len++) {
                    cr_assert(blk_may_have_substr(b, p + at, len), "block %d row %u: %.*s", blkn, i,
                              (int)len, p + at);
                    subs++;
                }
            }
            cr_assert(n < 3 || blk_may_have_substr(b, p, n), "block %d row %u", blkn, i);
        }
        cr_assert_gt(tokens, 5000);
        cr_assert_gt(subs, 100000);
        /* absent short tokens: the filter is sized for the distinct ones */
        int fp = 0;
        for (int t = 0; t < 2000; t++) {
            char tok[24];
            snprintf(tok, sizeof(tok), "absent%dq", t);
            fp += blk_may_have_token(b, tok, strlen(tok));
        }
        cr_assert_lt(fp, 60, "block %d: absent tokens %d of 2000 maybe", blkn, fp);
        blk_unref(b);
        oblock_free(ob);
    }
}
