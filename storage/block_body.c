/*
 * block_body.c - format 6's log bodies by template (cold blocks,
 * blk_wopts.body_tmpl, META flag bit 2), both ways. A log body is mostly a
 * printf template with variables: numbers, hex ids, words from a small
 * vocabulary. zstd codes a vocabulary word as several literals or matches
 * and a number as its digits; split into a template and typed variables,
 * each kind in a stream of its own, the same bodies take about 45% fewer
 * bytes under zstd (bench/STORAGE.md, h-tmpl). The writer recodes the root's
 * body column; a root table load rebuilds every body byte for byte into
 * memory the block owns, so views, filters and queries read the same bytes
 * as from a file without the flag.
 *
 * A body is cut into tokens, the maximal runs of ASCII letters and digits,
 * and the bytes between them. A token is
 *   an int      digits only, no leading zero (or "0"), at most 19 digits:
 *               uv value in the ints stream, template byte BT_INT
 *   a hex run   digits only otherwise (leading zeros, 20 digits or more),
 *               or hex digits of one case with a digit among them, at most
 *               BT_HEX_MAX: uv number of digits n in the lens stream and
 *               ceil(n / 2) bytes in the hex stream (an odd n: the first
 *               byte's high nibble 0), template byte BT_HEXL (lower case
 *               or digits) or BT_HEXU
 *   a word      letters only, or any token longer than BT_HEX_MAX: uv
 *               entry of the word dictionary in the words stream, template
 *               byte BT_WORD
 *   split       any other token (letters and digits, not one hex case):
 *               its runs of digits and of letters, each as above
 * and the rest of the body (separators, bytes >= 0x80) is the template's
 * text. A body that holds a byte BT_INT .. BT_WORD (1 .. 4), and a body
 * that is not a string (the encoded value), is a literal.
 *
 * THE ENCODED COLUMN (the root's S body column under META flag bit 2:
 * its rows + 1 offsets all 0, width 0; the data):
 *   uv rows (the block's), uv templates T, uv words W, uv bytes of the
 *   rebuilt bodies, then uv the byte length of each section below, then
 *   the sections, each used up exactly:
 *     templates  T x { uv length, bytes }, template t is code t + 1
 *     words      W x { uv length, bytes }
 *     codes      rows x uv: 0 a literal, t + 1 template t
 *     directory  T x 4 uv: template t's bytes of each of the next four
 *                sections
 *     word refs  uv word entry, one per BT_WORD
 *     ints       uv value, one per BT_INT
 *     lens       uv digits, one per BT_HEXL / BT_HEXU
 *     hex        the digits' bytes, big-endian nibbles
 *     literals   per literal row, uv length, bytes
 * The four variable sections are grouped by template: template 0's part
 * first (the variables of its rows, rows in order), then template 1's,
 * and so on, the directory giving each part's length: a template's slots
 * sit together (the same word in the same place of every row is a run;
 * the numbers of one slot look alike), 1.4 B a record less under zstd on
 * the generator's corpus than in row order. The rebuild refuses (-EBADMSG)
 * a code or word past its dictionary, a template's part read past its end
 * or not used up, parts that do not add up to their section, a count that
 * does not match, an odd hex run with a high nibble set, more or fewer
 * bytes than announced.
 *
 * META FLAG BIT 8 (blk_wopts.body_slots, with bit 2) changes three things,
 * 1.67 B a record less under zstd on the generator's corpus (bench/
 * STORAGE.md, h-lbody): templates and words are numbered by their uses,
 * the most used first (ties by first use), so the common codes are the
 * small ones; a word reference is one byte below 255, else 255 and uv
 * (code - 255) (a vocabulary of up to 255 words is one byte a word, which
 * zstd's Huffman stage codes near its entropy, where uv's second byte for
 * codes 128 and up broke it); and a template's part of each variable
 * stream holds its variables by slot: the template's first placeholder of
 * that kind in every row of the template (rows in order), then its
 * second, ... (a slot's values alike: the same word, numbers of one range,
 * hex runs of one length). The rebuild counts the rows of each template
 * from the codes and skips each slot's values to find the next slot's
 * start; a slot past its part, a part not used up, a word code past the
 * dictionary are refused.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define XXH_INLINE_ALL
#include "storage/block_wint.h"

enum { BT_INT = 1, BT_HEXL = 2, BT_HEXU = 3, BT_WORD = 4 };
#define BT_HEX_MAX 256 /* digits of one hex variable, at most */
#define BT_INT_MAX 19  /* digits of one int variable (10^19 - 1 < 2^64) */
enum {
    SEC_TPL,
    SEC_WORD,
    SEC_CODE,
    SEC_DIR,
    SEC_WREF,
    SEC_INT,
    SEC_LEN,
    SEC_HEX,
    SEC_LIT,
    BT_NSEC
};

/* Rebuilt bytes a block may claim, at most: 4096 x the encoded column
 * plus 1 MiB, and never above 2 GiB (the writer keeps the plain layout
 * past it). */
static inline bool out_fits(uint64_t out, uint64_t enc)
{
    return out <= (1ull << 31) && out <= 4096 * enc + (1u << 20);
}

/* ---- writer ---- */

static void bt_dict_reset(struct bt_dict *d)
{
    d->n = 0;
    vbuf_reset(&d->data);
    if (d->ht != NULL) {
        memset(d->ht, 0, d->ht_cap * sizeof(*d->ht));
    }
}

static void bt_dict_free(struct bt_dict *d)
{
    free(d->offs);
    free(d->ht);
    vbuf_fini(&d->data);
    memset(d, 0, sizeof(*d));
}

/* The code of |p, n| in |d|, entered when new: >= 0 or -ENOMEM. */
static int64_t bt_intern(struct bt_dict *d, const uint8_t *p, size_t n)
{
    if ((d->n + 1) * 2 > d->ht_cap) {
        int rc = ht_grow(&d->ht, &d->ht_cap, 1024);
        if (rc < 0) {
            return rc;
        }
    }
    uint64_t tag = XXH3_64bits(n ? (const void *)p : empty, n) << 32;
    size_t i = (size_t)(tag >> 32) & (d->ht_cap - 1);
    while (d->ht[i] != 0) {
        uint64_t e = d->ht[i];
        size_t c = (uint32_t)e - 1;
        if ((e & ~0xffffffffull) == tag && d->offs[c + 1] - d->offs[c] == n &&
            (n == 0 || memcmp(d->data.p + d->offs[c], p, n) == 0)) {
            return (int64_t)c;
        }
        i = (i + 1) & (d->ht_cap - 1);
    }
    if (d->n + 2 > d->cap_offs) {
        size_t ncap = d->cap_offs ? d->cap_offs * 2 : 256;
        uint64_t *no = realloc(d->offs, ncap * sizeof(*no));
        if (no == NULL) {
            return -ENOMEM;
        }
        d->offs = no;
        d->cap_offs = ncap;
    }
    if (vbuf_put(&d->data, n ? (const void *)p : empty, n) < 0) {
        return -ENOMEM;
    }
    d->offs[0] = 0;
    d->offs[d->n + 1] = d->data.len;
    d->ht[i] = tag | ((uint64_t)d->n + 1);
    return (int64_t)d->n++;
}

/* Writes into room reserved before (put_body, group). */
static inline void emit_uv(struct vbuf *b, uint64_t v)
{
    b->len = (size_t)(uv_put(b->p + b->len, v) - b->p);
}

static inline void emit_u8(struct vbuf *b, uint8_t v)
{
    b->p[b->len++] = v;
}

void btmpl_free(struct btmpl *t)
{
    bt_dict_free(&t->tpl);
    bt_dict_free(&t->word);
    for (int i = 0; i < BT_NSTREAM; i++) {
        vbuf_fini(&t->s[i]);
    }
    for (int i = 0; i < 4; i++) {
        vbuf_fini(&t->g[i]);
    }
    vbuf_fini(&t->dir);
    vbuf_fini(&t->cur);
    free(t->rat);
    free(t->rcode);
    free(t->order);
    free(t->tpos);
    free(t->rkey);
    free(t->rmap);
    memset(t, 0, sizeof(*t));
}

/* |*p| holds at least |n| elements of |size| bytes (contents not kept). */
static int cap_of(void **p, size_t *cap, size_t n, size_t size)
{
    if (n <= *cap) {
        return 0;
    }
    free(*p);
    *p = malloc(n * size);
    *cap = *p != NULL ? n : 0;
    return *p != NULL ? 0 : -ENOMEM;
}

/* The rows by template code into order (literals first), tpos[c] past
 * the rows of code c; g[] and dir emptied, with room for the streams. */
static int order_rows(struct btmpl *t, uint64_t rows)
{
    size_t nt = t->tpl.n;
    if (cap_of((void **)&t->order, &t->cap_order, rows + 1, sizeof(*t->order)) < 0 ||
        cap_of((void **)&t->tpos, &t->cap_tpos, nt + 2, sizeof(*t->tpos)) < 0) {
        return -ENOMEM;
    }
    uint64_t *pos = t->tpos; /* by code (0 literal): first place in order, then cursor */
    memset(pos, 0, (nt + 2) * sizeof(*pos));
    for (uint64_t j = 0; j < rows; j++) {
        pos[t->rcode[j] + 1]++;
    }
    for (size_t c = 1; c <= nt + 1; c++) {
        pos[c] += pos[c - 1];
    }
    for (uint64_t j = 0; j < rows; j++) {
        t->order[pos[t->rcode[j]]++] = (uint32_t)j;
    }
    vbuf_reset(&t->dir);
    for (int k = 0; k < 4; k++) { /* bit 8's word refs may grow past this */
        vbuf_reset(&t->g[k]);
        if (vbuf_reserve(&t->g[k], t->s[k].len) < 0) {
            return -ENOMEM;
        }
    }
    return vbuf_reserve(&t->dir, 4 * 5 * nt) < 0 ? -ENOMEM : 0;
}

/* Pass 2: the four variable streams of the rows (s[0..3], row j's bytes
 * from rat[4 j + k] on) grouped by template into g[0..3], rows of a
 * template in order, and each template's four lengths into dir. */
static int group(struct btmpl *t, uint64_t rows)
{
    size_t nt = t->tpl.n;
    if (order_rows(t, rows) < 0) {
        return -ENOMEM;
    }
    const uint64_t *pos = t->tpos;
    uint64_t i = pos[0]; /* past the literals (code 0) */
    for (size_t c = 1; c <= nt; c++) {
        size_t at[4];
        for (int k = 0; k < 4; k++) {
            at[k] = t->g[k].len;
        }
        for (; i < pos[c]; i++) {
            const uint64_t *r = t->rat + 4 * (uint64_t)t->order[i];
            for (int k = 0; k < 4; k++) {
                size_t n = (size_t)(r[4 + k] - r[k]);
                if (n > 0) { /* a stream no row uses may have no buffer */
                    memcpy(t->g[k].p + t->g[k].len, t->s[k].p + r[k], n);
                    t->g[k].len += n;
                }
            }
        }
        for (int k = 0; k < 4; k++) {
            emit_uv(&t->dir, t->g[k].len - at[k]);
        }
    }
    return 0;
}

static inline bool is_digit(uint8_t c)
{
    return (uint8_t)(c - '0') < 10;
}

static inline bool is_alnum(uint8_t c)
{
    return is_digit(c) || (uint8_t)((c | 0x20) - 'a') < 26;
}

/* Streams of struct btmpl: word refs, ints, lens, hex. */
enum { S_WREF, S_INT, S_LEN, S_HEX };

static const char hexd[2][16] = {
    {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'a', 'b', 'c', 'd', 'e', 'f'},
    {'0', '1', '2', '3', '4', '5', '6', '7', '8', '9', 'A', 'B', 'C', 'D', 'E', 'F'},
};

static inline unsigned nib(uint8_t c)
{
    return is_digit(c) ? (unsigned)(c - '0') : (unsigned)((c | 0x20) - 'a' + 10);
}

static int put_word(struct btmpl *t, const uint8_t *p, size_t n)
{
    int64_t c = bt_intern(&t->word, p, n);
    if (c < 0) {
        return (int)c;
    }
    emit_uv(&t->s[S_WREF], (uint64_t)c);
    emit_u8(&t->cur, BT_WORD);
    return 0;
}

static int put_hex(struct btmpl *t, const uint8_t *p, size_t n, uint8_t kind)
{
    struct vbuf *h = &t->s[S_HEX];
    emit_uv(&t->s[S_LEN], n);
    emit_u8(&t->cur, kind);
    size_t i = 0;
    if (n & 1) {
        h->p[h->len++] = (uint8_t)nib(p[i++]);
    }
    for (; i < n; i += 2) {
        h->p[h->len++] = (uint8_t)(nib(p[i]) << 4 | nib(p[i + 1]));
    }
    return 0;
}

/* A run of digits. */
static int put_digits(struct btmpl *t, const uint8_t *p, size_t n)
{
    if ((n == 1 || p[0] != '0') && n <= BT_INT_MAX) {
        uint64_t v = 0;
        for (size_t i = 0; i < n; i++) {
            v = v * 10 + (uint64_t)(p[i] - '0');
        }
        emit_uv(&t->s[S_INT], v);
        emit_u8(&t->cur, BT_INT);
        return 0;
    }
    return n <= BT_HEX_MAX ? put_hex(t, p, n, BT_HEXL) : put_word(t, p, n);
}

static int put_token(struct btmpl *t, const uint8_t *p, size_t n)
{
    size_t nd = 0, lo = 0, up = 0;
    for (size_t i = 0; i < n; i++) {
        uint8_t c = p[i];
        nd += is_digit(c);
        lo += (uint8_t)(c - 'a') < 6;
        up += (uint8_t)(c - 'A') < 6;
    }
    if (nd == n) {
        return put_digits(t, p, n);
    }
    if (n > BT_HEX_MAX || nd == 0) {
        return put_word(t, p, n);
    }
    if (nd + lo == n || nd + up == n) {
        return put_hex(t, p, n, nd + lo == n ? BT_HEXL : BT_HEXU);
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        size_t j = i;
        bool d = is_digit(p[i]);
        while (j < n && is_digit(p[j]) == d) {
            j++;
        }
        rc = d ? put_digits(t, p + i, j - i) : put_word(t, p + i, j - i);
        i = j;
    }
    return rc;
}

/* Body p[0, n) into the streams and its template into t->cur: 0, 1 (a
 * literal: the streams as they were), -ENOMEM. */
static int put_body(struct btmpl *t, const uint8_t *p, size_t n)
{
    size_t at[4];
    for (int k = 0; k < 4; k++) {
        at[k] = t->s[k].len;
    }
    vbuf_reset(&t->cur);
    /* Each variable takes a byte of the body or more: its template byte
     * one, an int of d digits at most d bytes of uv, hex digits half a
     * byte each and their count (up to BT_HEX_MAX) 2, a word's code 5. */
    if (vbuf_reserve(&t->cur, n) < 0 || vbuf_reserve(&t->s[S_WREF], 5 * n) < 0 ||
        vbuf_reserve(&t->s[S_INT], n) < 0 || vbuf_reserve(&t->s[S_LEN], 2 * n) < 0 ||
        vbuf_reserve(&t->s[S_HEX], n) < 0) {
        return -ENOMEM;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        uint8_t c = p[i];
        if (!is_alnum(c)) {
            if ((uint8_t)(c - BT_INT) <= BT_WORD - BT_INT) {
                rc = 1;
                break;
            }
            size_t j = i + 1;
            while (j < n && !is_alnum(p[j]) && (uint8_t)(p[j] - BT_INT) > BT_WORD - BT_INT) {
                j++;
            }
            memcpy(t->cur.p + t->cur.len, p + i, j - i);
            t->cur.len += j - i;
            i = j;
            continue;
        }
        size_t j = i + 1;
        while (j < n && is_alnum(p[j])) {
            j++;
        }
        rc = put_token(t, p + i, j - i);
        i = j;
    }
    if (rc == 1) {
        for (int k = 0; k < 4; k++) {
            t->s[k].len = at[k];
        }
    }
    return rc;
}

/* The entries of |d| in the order perm gives (new -> old; NULL: as
 * they are). */
static int put_dict(struct vbuf *o, const struct bt_dict *d, const uint32_t *perm)
{
    for (size_t i = 0; i < d->n; i++) {
        size_t c = perm != NULL ? perm[i] : i;
        uint64_t a = d->offs[c], e = d->offs[c + 1];
        const uint8_t *p = e > a ? d->data.p + a : (const uint8_t *)empty;
        if (vbuf_put_uv(o, e - a) < 0 || vbuf_put(o, p, e - a) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* ---- writer, META flag bit 8: codes by use, variables by slot ---- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* perm[0, n) the codes 0 .. n - 1 by uses (cnt) descending, ties by code:
 * new -> old; inv (when not NULL) old -> new. */
static void rank(uint64_t *key, const uint32_t *cnt, size_t n, uint32_t *perm, uint32_t *inv)
{
    for (size_t c = 0; c < n; c++) {
        key[c] = (uint64_t)(UINT32_MAX - cnt[c]) << 32 | c;
    }
    qsort(key, n, sizeof(*key), cmp_u64);
    for (size_t i = 0; i < n; i++) {
        perm[i] = (uint32_t)key[i];
        if (inv != NULL) {
            inv[perm[i]] = (uint32_t)i;
        }
    }
}

/* A word code as META flag bit 8 stores it: one byte below 255, else
 * 255 and uv (code - 255). */
static int put_esc(struct vbuf *b, uint64_t v)
{
    if (v < 255) {
        return vbuf_put_u8(b, (uint8_t)v);
    }
    return vbuf_put_u8(b, 255) | vbuf_put_uv(b, v - 255) ? -ENOMEM : 0;
}

/* The templates and words ranked by uses (rmap: templates new -> old at
 * 0, words old -> new at nt, new -> old at nt + nw), rcode renumbered,
 * the codes stream rewritten. */
static int rank_codes(struct btmpl *t, uint64_t rows)
{
    size_t nt = t->tpl.n, nw = t->word.n, n = nt > nw ? nt : nw;
    if (cap_of((void **)&t->rkey, &t->cap_rkey, n + 1, sizeof(*t->rkey)) < 0 ||
        cap_of((void **)&t->rmap, &t->cap_rmap, 3 * (nt + nw) + 1, sizeof(*t->rmap)) < 0) {
        return -ENOMEM;
    }
    uint32_t *cnt = t->rmap + nt + 2 * nw, *tnew = cnt + nt + nw; /* scratch past the maps */
    memset(cnt, 0, nw * sizeof(*cnt));
    const struct vbuf *wr = &t->s[S_WREF];
    bool bad = false;
    for (const uint8_t *p = wr->p, *end = wr->len ? p + wr->len : p; p < end;) {
        cnt[uv_take(&p, end, &bad)]++; /* a stream no row uses may have no buffer */
    }
    rank(t->rkey, cnt, nw, t->rmap + nt + nw, t->rmap + nt);
    memset(cnt, 0, nt * sizeof(*cnt));
    for (uint64_t j = 0; j < rows; j++) {
        if (t->rcode[j] != 0) {
            cnt[t->rcode[j] - 1]++;
        }
    }
    rank(t->rkey, cnt, nt, t->rmap, tnew);
    struct vbuf *codes = &t->s[4];
    vbuf_reset(codes);
    for (uint64_t j = 0; j < rows; j++) {
        t->rcode[j] = t->rcode[j] != 0 ? tnew[t->rcode[j] - 1] + 1 : 0;
        if (vbuf_put_uv(codes, t->rcode[j]) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* One variable of kind |k| from row cursor |at| (in s[]) to g[]. */
static int slot_copy(struct btmpl *t, uint8_t k, uint64_t *at)
{
    bool bad = false;
    if (k == BT_WORD) {
        const uint8_t *p = t->s[S_WREF].p + at[S_WREF], *p0 = p;
        uint64_t w = uv_take(&p, p + 10, &bad);
        at[S_WREF] += (uint64_t)(p - p0);
        return put_esc(&t->g[S_WREF], t->rmap[t->tpl.n + w]);
    }
    int s = k == BT_INT ? S_INT : S_LEN;
    const uint8_t *p = t->s[s].p + at[s], *p0 = p;
    uint64_t v = uv_take(&p, p + 10, &bad);
    size_t n = (size_t)(p - p0);
    memcpy(t->g[s].p + t->g[s].len, p0, n);
    t->g[s].len += n;
    at[s] += n;
    if (k != BT_INT) {
        size_t nb = (size_t)(v + 1) / 2;
        memcpy(t->g[S_HEX].p + t->g[S_HEX].len, t->s[S_HEX].p + at[S_HEX], nb);
        t->g[S_HEX].len += nb;
        at[S_HEX] += nb;
    }
    return 0;
}

/* group's layout by slot: within a template's part, its first
 * placeholder's variable of every row (rows in order), then its second
 * placeholder's, and so on; templates in ranked order. */
static int group_slots(struct btmpl *t, uint64_t rows)
{
    size_t nt = t->tpl.n;
    if (order_rows(t, rows) < 0) {
        return -ENOMEM;
    }
    const uint64_t *pos = t->tpos;
    uint64_t i0 = pos[0];
    for (size_t c = 1; c <= nt; c++) {
        size_t at[4];
        for (int k = 0; k < 4; k++) {
            at[k] = t->g[k].len;
        }
        size_t old = t->rmap[c - 1];
        const uint8_t *tb = t->tpl.data.p != NULL ? t->tpl.data.p : (const uint8_t *)empty;
        const uint8_t *tp = tb + t->tpl.offs[old], *te = tb + t->tpl.offs[old + 1];
        for (; tp < te; tp++) {
            if ((uint8_t)(*tp - BT_INT) > BT_WORD - BT_INT) {
                continue;
            }
            for (uint64_t i = i0; i < pos[c]; i++) {
                if (slot_copy(t, *tp, t->rat + 4 * (uint64_t)t->order[i]) < 0) {
                    return -ENOMEM;
                }
            }
        }
        i0 = pos[c];
        for (int k = 0; k < 4; k++) {
            emit_uv(&t->dir, t->g[k].len - at[k]);
        }
    }
    return 0;
}

int btmpl_build(struct btmpl *t, const struct strb *s, const uint64_t *btype, uint64_t rows,
                bool slots, struct strb *x, bool *coded)
{
    *coded = false;
    bt_dict_reset(&t->tpl);
    bt_dict_reset(&t->word);
    for (int i = 0; i < BT_NSTREAM; i++) {
        vbuf_reset(&t->s[i]);
    }
    struct vbuf *codes = &t->s[4], *lit = &t->s[5], *o = &x->data;
    const uint8_t *base = s->data.p != NULL ? s->data.p : (const uint8_t *)empty;
    if (rows >= UINT32_MAX || cap_of((void **)&t->rat, &t->cap_rat, 4 * (rows + 1), 8) < 0 ||
        cap_of((void **)&t->rcode, &t->cap_rcode, rows + 1, sizeof(*t->rcode)) < 0) {
        return -ENOMEM;
    }
    for (uint64_t j = 0; j < rows; j++) {
        const uint8_t *p = base + s->offs[j];
        size_t n = (size_t)(s->offs[j + 1] - s->offs[j]);
        for (int k = 0; k < 4; k++) {
            t->rat[4 * j + k] = t->s[k].len;
        }
        int rc = btype[j] == VAL_STR ? put_body(t, p, n) : 1;
        t->rcode[j] = 0;
        if (rc == 0) {
            int64_t c = bt_intern(&t->tpl, t->cur.p, t->cur.len);
            t->rcode[j] = (uint32_t)(c + 1);
            rc = c < 0 ? (int)c : vbuf_put_uv(codes, (uint64_t)c + 1);
        } else if (rc == 1) {
            rc = vbuf_put_uv(codes, 0) | vbuf_put_uv(lit, n) | vbuf_put(lit, n ? p : base, n)
                     ? -ENOMEM
                     : 0;
        }
        if (rc < 0) {
            return rc;
        }
    }
    for (int k = 0; k < 4; k++) {
        t->rat[4 * rows + k] = t->s[k].len;
    }
    int rc = slots ? rank_codes(t, rows) : 0;
    rc = rc == 0 ? (slots ? group_slots(t, rows) : group(t, rows)) : rc;
    if (rc < 0) {
        return rc;
    }
    const uint32_t *tperm = slots ? t->rmap : NULL;
    const uint32_t *wperm = slots ? t->rmap + t->tpl.n + t->word.n : NULL;
    if (rows + 1 > x->cap_offs) {
        free(x->offs);
        x->offs = malloc((rows + 1) * sizeof(*x->offs));
        x->cap_offs = x->offs != NULL ? rows + 1 : 0;
        if (x->offs == NULL) {
            return -ENOMEM;
        }
    }
    memset(x->offs, 0, (rows + 1) * sizeof(*x->offs));
    vbuf_reset(o);
    size_t tlen = 0, wlen = 0;
    for (size_t c = 0; c < t->tpl.n; c++) {
        uint64_t n = t->tpl.offs[c + 1] - t->tpl.offs[c];
        tlen += (size_t)pbw_varint_size(n) + n;
    }
    for (size_t c = 0; c < t->word.n; c++) {
        uint64_t n = t->word.offs[c + 1] - t->word.offs[c];
        wlen += (size_t)pbw_varint_size(n) + n;
    }
    uint64_t sec[BT_NSEC] = {tlen,
                             wlen,
                             codes->len,
                             t->dir.len,
                             t->g[S_WREF].len,
                             t->g[S_INT].len,
                             t->g[S_LEN].len,
                             t->g[S_HEX].len,
                             lit->len};
    uint64_t out = s->offs[rows];
    rc = vbuf_put_uv(o, rows) | vbuf_put_uv(o, t->tpl.n) | vbuf_put_uv(o, t->word.n) |
         vbuf_put_uv(o, out);
    for (int k = 0; k < BT_NSEC; k++) {
        rc |= vbuf_put_uv(o, sec[k]);
    }
    if (rc != 0 || put_dict(o, &t->tpl, tperm) < 0 || put_dict(o, &t->word, wperm) < 0) {
        return -ENOMEM;
    }
    const struct vbuf *order[] = {codes,        &t->dir, &t->g[S_WREF], &t->g[S_INT], &t->g[S_LEN],
                                  &t->g[S_HEX], lit};
    for (int k = 0; k < 7; k++) {
        if (vbuf_put(o, order[k]->p ? order[k]->p : (const uint8_t *)empty, order[k]->len) < 0) {
            return -ENOMEM;
        }
    }
    *coded = out_fits(out, o->len);
    return 0;
}

/* ---- reader ---- */

struct rd {
    const uint8_t *p, *end;
};

/* Into the rebuild's output: |q| has room for |n| more bytes. */
#define ROOM(n) ((uint64_t)(qend - q) >= (uint64_t)(n))

/* The |n| entries { uv length, bytes } of [p, end) as pointers and
 * lengths (n + 1 offsets into p): false when they do not fill it. */
static bool take_dict(const uint8_t *p, const uint8_t *end, uint64_t n, const uint8_t **at,
                      uint32_t *len)
{
    bool bad = false;
    for (uint64_t c = 0; c < n; c++) {
        uint64_t l = uv_take(&p, end, &bad);
        if (bad || l > (uint64_t)(end - p)) {
            return false;
        }
        at[c] = p;
        len[c] = (uint32_t)l;
        p += l;
    }
    return p == end;
}

/* The rebuild's copies: buffers with SLACK bytes past what they hold, so a
 * short piece (most are) is one 16-byte copy. */
#define SLACK 16
struct seg {
    uint32_t off, len; /* the text before the placeholder, in the dictionary copy */
    uint32_t kind;     /* the placeholder (BT_INT .. BT_WORD), 0 the template's end */
    uint32_t ri;       /* its cursor in cur (a hex run's: ri, its bytes ri + 1) */
};

/* A word code of META flag bit 8 (put_esc). */
static inline uint64_t esc_take(const uint8_t **p, const uint8_t *end, bool *bad)
{
    if (*p >= end) {
        *bad = true;
        return 0;
    }
    uint8_t c = *(*p)++;
    if (c < 255) {
        return c;
    }
    uint64_t v = uv_take(p, end, bad);
    if (v > UINT32_MAX) {
        *bad = true;
    }
    return v + 255;
}

/* Skips |n| variables of kind |k| (META flag bit 8's slot) in the
 * template's parts part[0..3], giving the slot's cursors sl[0] (and a hex
 * run's bytes sl[1]): false when they run past a part. */
static bool slot_take(struct rd *part, uint32_t k, uint64_t n, struct rd *sl)
{
    bool bad = false;
    int s = k == BT_WORD ? S_WREF : k == BT_INT ? S_INT : S_LEN;
    struct rd *r = &part[s];
    const uint8_t *p0 = r->p;
    uint64_t nb = 0;
    for (uint64_t i = 0; i < n && !bad; i++) {
        if (k == BT_WORD) {
            esc_take(&r->p, r->end, &bad);
        } else {
            uint64_t v = uv_take(&r->p, r->end, &bad);
            nb += k == BT_INT || v > BT_HEX_MAX ? 0 : (v + 1) / 2;
        }
    }
    sl[0] = (struct rd){p0, r->p};
    sl[1] = (struct rd){part[S_HEX].p, part[S_HEX].p};
    if (bad || nb > (uint64_t)(part[S_HEX].end - part[S_HEX].p)) {
        return false;
    }
    sl[1].end += nb;
    part[S_HEX].p += nb;
    return true;
}

static inline void copy_slack(uint8_t *q, const uint8_t *s, size_t n)
{
    if (n <= SLACK) {
        memcpy(q, s, SLACK);
    } else {
        memcpy(q, s, n);
    }
}

int btmpl_rebuild(struct scol *enc, uint64_t enc_len, uint64_t rows, bool slots, uint8_t **buf,
                  uint64_t **offs)
{
    const uint8_t *p = enc->data, *end = p + enc_len;
    bool bad = false;
    *buf = NULL;
    *offs = NULL;
    if (enc->off.width != 0 || enc->off.base != 0) {
        return -EBADMSG;
    }
    uint64_t nrows = uv_take(&p, end, &bad), nt = uv_take(&p, end, &bad);
    uint64_t nw = uv_take(&p, end, &bad), out = uv_take(&p, end, &bad);
    const uint8_t *sp[BT_NSEC + 1];
    uint64_t sec[BT_NSEC], total = 0;
    for (int k = 0; k < BT_NSEC; k++) {
        sec[k] = uv_take(&p, end, &bad);
        total += sec[k] > enc_len ? enc_len + 1 : sec[k];
    }
    if (bad || nrows != rows || total != (uint64_t)(end - p) || !out_fits(out, enc_len) ||
        nt > sec[SEC_TPL] || nt > rows || nt > sec[SEC_DIR] / 4 || nw > sec[SEC_WORD]) {
        return -EBADMSG;
    }
    for (int k = 0; k < BT_NSEC; k++) {
        sp[k] = p;
        p += sec[k];
    }
    sp[BT_NSEC] = p;
    int rc = -ENOMEM;
    const uint8_t **at = malloc((nt + nw + 1) * sizeof(*at));
    uint32_t *len = malloc((nt + nw + 1) * sizeof(*len));
    uint64_t *off = malloc((rows + 1) * sizeof(*off));
    uint8_t *o = malloc(out + SLACK);
    struct rd *cur = NULL; /* template t's parts at 4 t, then (bit 8) the slots' cursors */
    uint64_t *tn = NULL;   /* bit 8: rows by code */
    /* the dictionaries, copied with SLACK bytes after them; each template
     * as its pieces of text, each but the last before a placeholder */
    uint64_t dl = sec[SEC_TPL] + sec[SEC_WORD];
    uint8_t *dict = malloc(dl + SLACK);
    struct seg *sg = malloc((sec[SEC_TPL] + nt + 1) * sizeof(*sg));
    uint64_t *tseg = malloc((nt + 1) * sizeof(*tseg));
    if (at == NULL || len == NULL || off == NULL || o == NULL || dict == NULL || sg == NULL ||
        tseg == NULL) {
        goto fail;
    }
    memcpy(dict, sp[SEC_TPL], dl);
    memset(dict + dl, 0, SLACK);
    rc = -EBADMSG;
    if (!take_dict(dict, dict + sec[SEC_TPL], nt, at, len) ||
        !take_dict(dict + sec[SEC_TPL], dict + dl, nw, at + nt, len + nt)) {
        goto fail;
    }
    uint64_t ns = 0, np = 0; /* segments, placeholders */
    for (uint64_t c = 0; c < nt; c++) {
        const uint8_t *tp = at[c], *te = tp + len[c], *r = tp;
        tseg[c] = ns;
        for (;; r++) {
            if (r == te || (uint8_t)(*r - BT_INT) <= BT_WORD - BT_INT) {
                uint32_t k = r == te ? 0 : *r;
                uint64_t ri = slots ? 4 * nt + 2 * np
                                    : 4 * c + (k == BT_WORD  ? S_WREF
                                               : k == BT_INT ? S_INT
                                                             : S_LEN);
                np += k != 0;
                sg[ns++] = (struct seg){(uint32_t)(tp - dict), (uint32_t)(r - tp), k, (uint32_t)ri};
                if (r == te) {
                    break;
                }
                tp = r + 1;
            }
        }
    }
    uint64_t ncur = 4 * nt + (slots ? 2 * np : 0);
    if (ncur >= UINT32_MAX) {
        goto fail;
    }
    rc = -ENOMEM;
    cur = malloc((ncur + 1) * sizeof(*cur));
    tn = slots ? calloc(nt + 1, sizeof(*tn)) : NULL;
    if (cur == NULL || (slots && tn == NULL)) {
        goto fail;
    }
    rc = -EBADMSG;
    /* Each template's part of the four variable streams, in template order. */
    const uint8_t *dp = sp[SEC_DIR], *sat[4];
    for (int k = 0; k < 4; k++) {
        sat[k] = sp[SEC_WREF + k];
    }
    for (uint64_t c = 0; c < nt; c++) {
        for (int k = 0; k < 4; k++) {
            uint64_t l = uv_take(&dp, sp[SEC_DIR + 1], &bad);
            if (bad || l > (uint64_t)(sp[SEC_WREF + k + 1] - sat[k])) {
                goto fail;
            }
            cur[4 * c + k] = (struct rd){sat[k], sat[k] + l};
            sat[k] += l;
        }
    }
    for (int k = 0; k < 4; k++) {
        if (sat[k] != sp[SEC_WREF + k + 1]) {
            goto fail;
        }
    }
    if (dp != sp[SEC_DIR + 1]) {
        goto fail;
    }
    struct rd cd = {sp[SEC_CODE], sp[SEC_CODE + 1]}, li = {sp[SEC_LIT], sp[SEC_LIT + 1]};
    if (slots) { /* each slot's cursors: its rows' variables, in its template's parts */
        for (const uint8_t *cp = cd.p; cp < cd.end;) {
            uint64_t c = uv_take(&cp, cd.end, &bad);
            if (bad || c > nt) {
                goto fail;
            }
            tn[c]++;
        }
        for (uint64_t c = 0; c < nt; c++) {
            for (const struct seg *g = sg + tseg[c]; g->kind != 0; g++) {
                if (!slot_take(cur + 4 * c, g->kind, tn[c + 1], cur + g->ri)) {
                    goto fail;
                }
            }
        } /* a part the slots leave bytes of fails the check of every cursor at the end */
    }
    uint8_t *q = o, *qend = o + out;
    off[0] = 0;
    for (uint64_t j = 0; j < rows; j++) {
        uint64_t c = uv_take(&cd.p, cd.end, &bad);
        if (bad || c > nt) {
            goto fail;
        }
        if (c == 0) {
            uint64_t n = uv_take(&li.p, li.end, &bad);
            if (bad || n > (uint64_t)(li.end - li.p) || !ROOM(n)) {
                goto fail;
            }
            memcpy(q, li.p, n);
            q += n;
            li.p += n;
            off[j + 1] = (uint64_t)(q - o);
            continue;
        }
        for (const struct seg *g = sg + tseg[c - 1];; g++) {
            if (!ROOM(g->len)) {
                goto fail;
            }
            copy_slack(q, dict + g->off, g->len);
            q += g->len;
            if (g->kind == 0) {
                break;
            }
            struct rd *r = cur + g->ri;
            if (g->kind == BT_INT) {
                uint64_t v = uv_take(&r->p, r->end, &bad);
                unsigned nd = 1;
                for (uint64_t x = v; x >= 10; x /= 10) {
                    nd++;
                }
                if (bad || !ROOM(nd)) {
                    goto fail;
                }
                for (unsigned i = nd; i-- > 0; v /= 10) {
                    q[i] = (uint8_t)('0' + v % 10);
                }
                q += nd;
            } else if (g->kind == BT_WORD) {
                uint64_t w = slots ? esc_take(&r->p, r->end, &bad) : uv_take(&r->p, r->end, &bad);
                if (bad || w >= nw || !ROOM(len[nt + w])) {
                    goto fail;
                }
                copy_slack(q, at[nt + w], len[nt + w]);
                q += len[nt + w];
            } else {
                struct rd *hx = r + 1;
                uint64_t n = uv_take(&r->p, r->end, &bad);
                uint64_t nb = (n + 1) / 2;
                if (bad || n == 0 || n > BT_HEX_MAX || nb > (uint64_t)(hx->end - hx->p) ||
                    !ROOM(n)) {
                    goto fail;
                }
                const char *dg = hexd[g->kind == BT_HEXU];
                const uint8_t *h = hx->p;
                hx->p += nb;
                if (n & 1) {
                    if (*h > 15) {
                        goto fail;
                    }
                    *q++ = (uint8_t)dg[*h++];
                }
                for (; h < hx->p; h++) {
                    *q++ = (uint8_t)dg[*h >> 4];
                    *q++ = (uint8_t)dg[*h & 15];
                }
            }
        }
        off[j + 1] = (uint64_t)(q - o);
    }
    if (q != qend || cd.p != cd.end || li.p != li.end) {
        goto fail;
    }
    for (uint64_t k = 0; k < ncur; k++) {
        if (cur[k].p != cur[k].end) {
            goto fail; /* a template's stream (a slot's) not used up */
        }
    }
    free(cur);
    free(tn);
    free(at);
    free(len);
    free(dict);
    free(sg);
    free(tseg);
    *buf = o;
    *offs = off;
    enc->off = (struct icol){(const uint8_t *)off, 0, 8};
    enc->data = out > 0 ? o : (const uint8_t *)empty;
    return 0;

fail:
    free(cur);
    free(tn);
    free(dict);
    free(sg);
    free(tseg);
    free(at);
    free(len);
    free(off);
    free(o);
    return rc;
}
