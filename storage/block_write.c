/*
 * block_write.c - the block writer: blk_write seals rows of an open block
 * into one immutable file. One pass over the rows (sorted by time first
 * when they are out of order) fills the columns and gathers the blooms,
 * zone maps and hot attribute keys; then the tables (serialized by
 * block_wtable.c), the footer sections and the trailer go to the file.
 * The format is in block_int.h, the contract in block.h.
 */
#include "storage/block_wint.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define XXH_INLINE_ALL /* keys and dictionary strings are short: the hash inlines */
#include <xxhash.h>
#include <zstd.h>

#include "storage/adm.h"
#include "storage/bloom.h"

/* =====================================================================
 * Writer
 * ===================================================================== */

/* Appends |p, n| as dictionary entry d->nd (its code, or -ENOMEM). */
static int64_t dict_push(struct dictb *d, const char *p, size_t n)
{
    if (d->nd + 2 > d->cap_offs) {
        size_t ncap = d->cap_offs ? d->cap_offs * 2 : 64;
        uint64_t *no = realloc(d->offs, ncap * sizeof(*no));
        if (no == NULL) {
            return -ENOMEM;
        }
        d->offs = no;
        d->cap_offs = ncap;
    }
    struct vbuf *v = &d->data;
    if (n > v->cap - v->len && vbuf_reserve(v, n) < 0) {
        return -ENOMEM;
    }
    if (n > 0) {
        memcpy(v->p + v->len, p, n);
        v->len += n;
    }
    d->offs[0] = 0;
    d->offs[d->nd + 1] = v->len;
    return (int64_t)d->nd++;
}

/* dict_add past the previous row's entry: the hash table. */
static int dict_add_hash(struct dictb *d, uint64_t row, const char *p, size_t n)
{
    if ((d->nd + 1) * 2 > d->ht_cap) {
        int rc = ht_grow(&d->ht, &d->ht_cap, 256);
        if (rc < 0) {
            return rc;
        }
    }
    uint64_t tag = XXH3_64bits(n ? p : empty, n) << 32;
    size_t i = (size_t)(tag >> 32) & (d->ht_cap - 1);
    while (d->ht[i] != 0) {
        uint64_t e = d->ht[i];
        size_t c = (uint32_t)e - 1;
        if ((e & ~0xffffffffull) == tag && d->offs[c + 1] - d->offs[c] == n &&
            (n == 0 || memcmp(d->data.p + d->offs[c], p, n) == 0)) {
            d->codes[row] = c;
            return 0;
        }
        i = (i + 1) & (d->ht_cap - 1);
    }
    int64_t c = dict_push(d, p, n);
    if (c < 0) {
        return (int)c;
    }
    d->ht[i] = tag | ((uint64_t)c + 1);
    d->codes[row] = (uint64_t)c;
    return 0;
}

/* |p, n| as row |row|'s string (rows in order from 0): the code of an
 * equal entry (the previous row's checked first, inline: columns like
 * severity text and span names repeat row after row), else a new entry.
 * 0 or -ENOMEM. */
static inline int dict_add(struct dictb *d, uint64_t row, const char *p, size_t n)
{
    if (row > 0) {
        uint64_t c = d->codes[row - 1];
        if (d->offs[c + 1] - d->offs[c] == n &&
            (n <= 32 ? short_eq(d->data.p + d->offs[c], p, n)
                     : memcmp(d->data.p + d->offs[c], p, n) == 0)) {
            d->codes[row] = c;
            return 0;
        }
    }
    return dict_add_hash(d, row, p, n);
}

/* dict_add_run's new entry (the empty string's first, or any other). */
static int dict_add_new(struct dictb *d, uint64_t row, const char *p, size_t n)
{
    int64_t c = dict_push(d, p, n);
    if (c < 0) {
        return (int)c;
    }
    if (n == 0) {
        d->empty_code = (uint64_t)c;
    }
    d->codes[row] = (uint64_t)c;
    return 0;
}

/*
 * dict_add without the hash table, for strings that are mostly distinct
 * (log and span attribute lists: a table lookup per row is a cache miss
 * per row): a string equal to the previous row's shares its entry, the
 * empty string has one entry, any other gets a new one. Rows in order
 * from 0. Inline: a repeat costs its compare, not a call.
 */
static inline int dict_add_run(struct dictb *d, uint64_t row, const char *p, size_t n)
{
    if (n == 0 && d->empty_code != UINT64_MAX) {
        d->codes[row] = d->empty_code;
        return 0;
    }
    if (row > 0 && n > 0) {
        uint64_t c = d->codes[row - 1];
        if (d->offs[c + 1] - d->offs[c] == n && memcmp(d->data.p + d->offs[c], p, n) == 0) {
            d->codes[row] = c;
            return 0;
        }
    }
    return dict_add_new(d, row, p, n);
}

static inline int str_add(struct strb *s, uint64_t row, const void *p, size_t n)
{
    struct vbuf *d = &s->data;
    if (n > d->cap - d->len && vbuf_reserve(d, n) < 0) {
        return -ENOMEM;
    }
    if (n > 0) {
        memcpy(d->p + d->len, p, n);
        d->len += n;
    }
    s->offs[row + 1] = d->len;
    return 0;
}

static void wcols_free(struct wcols *w)
{
    for (int i = 0; i < MAX_I; i++) {
        free(w->I[i]);
    }
    for (int i = 0; i < MAX_S; i++) {
        free(w->S[i].offs);
        vbuf_fini(&w->S[i].data);
    }
    for (int i = 0; i < MAX_D; i++) {
        free(w->D[i].codes);
        free(w->D[i].offs);
        free(w->D[i].ht);
        vbuf_fini(&w->D[i].data);
    }
    for (int i = 0; i < MAX_R; i++) {
        vbuf_fini(&w->R[i]);
        vbuf_fini(&w->Zb[i]);
    }
    fldict_free(&w->fl);
    free(w->pref);
    free(w->pht);
    vbuf_fini(&w->praw);
    vbuf_fini(&w->tdir);
    for (int i = 0; i < 2; i++) {
        free(w->sx[i].offs);
        vbuf_fini(&w->sx[i].data);
    }
    btmpl_free(&w->bt);
    sevw_free(&w->ev);
    pstw_free(&w->ps);
    vbuf_fini(&w->pst);
}

int cap_u64(uint64_t **p, size_t *cap, size_t n)
{
    if (n <= *cap) {
        return 0;
    }
    size_t ncap = n + n / 8;
    free(*p);
    *p = malloc(ncap * sizeof(uint64_t));
    if (*p == NULL) {
        *cap = 0;
        return -ENOMEM;
    }
    *cap = ncap;
    return 0;
}

/* Readies |w| (zeroed once, or used by an earlier seal) for |rows| rows of
 * |sig|: every I and D code is written by the fill before it is read. */
static int wcols_prepare(struct wcols *w, enum signal sig, uint64_t rows)
{
    w->rows = rows;
    for (int t = 0; t < N_TABLES; t++) {
        const struct spec *sp = spec_of(BLK_VERSION, sig, t);
        for (unsigned i = 0; i < sp->n; i++) {
            const struct ent *e = &sp->e[i];
            switch (e->type) {
            case 'I':
                if (cap_u64(&w->I[e->idx], &w->cap_I[e->idx], rows ? rows : 1) < 0) {
                    return -ENOMEM;
                }
                break;
            case 'S':
                if (cap_u64(&w->S[e->idx].offs, &w->S[e->idx].cap_offs, rows + 1) < 0) {
                    return -ENOMEM;
                }
                w->S[e->idx].offs[0] = 0;
                vbuf_reset(&w->S[e->idx].data);
                break;
            case 'D': {
                struct dictb *d = &w->D[e->idx];
                if (cap_u64(&d->codes, &d->cap_codes, rows ? rows : 1) < 0) {
                    return -ENOMEM;
                }
                d->nd = 0;
                d->empty_code = UINT64_MAX;
                if (d->ht != NULL) {
                    memset(d->ht, 0, d->ht_cap * sizeof(*d->ht));
                }
                vbuf_reset(&d->data);
                break;
            }
            case 'K': /* filled by akeys_build */
                if (cap_u64(&w->S[e->idx].offs, &w->S[e->idx].cap_offs, KC_MAX + 1) < 0) {
                    return -ENOMEM;
                }
                w->S[e->idx].offs[0] = 0;
                vbuf_reset(&w->S[e->idx].data);
                w->nkeys = 0;
                break;
            case 'V': /* filled by vdict_finish */
                w->nvals = 0;
                break;
            case 'F': /* filled by mdet_encode */
                fldict_reset(&w->fl);
                break;
            case 'Z':
                vbuf_reset(&w->Zb[e->idx]);
                if (vbuf_reserve(&w->Zb[e->idx], rows / 8 + 1) < 0) {
                    return -ENOMEM;
                }
                /* the values are an R column until emitted */
                __attribute__((fallthrough));
            case 'P': /* the ids too (prefs_build codes them) */
            case 'R': /* every row's slot is written by the fill */
                vbuf_reset(&w->R[e->idx]);
                if (vbuf_reserve(&w->R[e->idx], rows * e->arg + 1) < 0) {
                    return -ENOMEM;
                }
                w->R[e->idx].len = rows * e->arg;
                break;
            }
        }
    }
    return 0;
}

/* bloom_hash_kv in two steps: the key's part (once per key, kept by the
 * caller), then the value's. Equal to bloom_hash_kv(k, kn, v, vn, seed). */
static inline uint64_t kv_key_hash(const char *k, size_t kn, uint64_t seed)
{
    return XXH3_64bits_withSeed(kn ? k : empty, kn, seed);
}

static inline uint64_t kv_val_hash(uint64_t kh, const char *v, size_t vn)
{
    return XXH3_64bits_withSeed(vn ? v : empty, vn, kh);
}

/* Record attribute keys counted while the rows are walked (once per row). */
struct kc_ent {
    uint64_t h;    /* bloom_quick_hash */
    uint64_t a, b; /* its words: the key itself when it is 16 bytes or shorter */
    uint64_t kh;   /* kv_key_hash of the attribute bloom */
    uint32_t off, len;
    uint64_t count, last_row;
    uint32_t id; /* order of first sight: stable across rehashes */
};

struct keycount {
    struct kc_ent *t;
    size_t cap, n;
    struct vbuf keys;
    struct kc_pos *ap; /* every counted attribute, rows in order */
    size_t an, acap;
    uint64_t *arow;        /* rows + 1: row j's attributes are ap[arow[j], arow[j + 1]) */
    uint32_t slot[KC_MAX]; /* key id -> its entry's index in t (kc_count) */
};

/* Counts key |k| in |row|; its id goes to |*id| (UINT32_MAX: not counted),
 * its kv_key_hash under |seed| to |*kh| (kept in the key's entry: one per
 * distinct key, not per attribute). */
static int kc_add(struct keycount *kc, uint64_t row, const char *k, size_t kn, uint64_t seed,
                  uint64_t *kh, uint32_t *id)
{
    *id = UINT32_MAX;
    if ((kc->n + 1) * 2 > kc->cap) {
        if (kc->n >= KC_MAX) {
            goto find_only;
        }
        size_t ncap = kc->cap ? kc->cap * 2 : 64;
        struct kc_ent *nt = calloc(ncap, sizeof(*nt));
        if (nt == NULL) {
            return -ENOMEM;
        }
        for (size_t i = 0; i < kc->cap; i++) {
            if (kc->t[i].count != 0) {
                size_t j = (size_t)kc->t[i].h & (ncap - 1);
                while (nt[j].count != 0) {
                    j = (j + 1) & (ncap - 1);
                }
                nt[j] = kc->t[i];
                kc->slot[nt[j].id] = (uint32_t)j;
            }
        }
        free(kc->t);
        kc->t = nt;
        kc->cap = ncap;
    }
find_only:;
    uint64_t wa, wb;
    bloom_quick_words(k, kn, &wa, &wb);
    uint64_t h = bloom_quick_mix(wa, wb, kn);
    size_t i = (size_t)h & (kc->cap - 1);
    while (kc->t[i].count != 0) {
        struct kc_ent *e = &kc->t[i];
        if (e->h == h && e->len == kn && e->a == wa && e->b == wb &&
            (kn <= 16 || words_eq(kc->keys.p + e->off, k, kn))) {
            if (e->last_row != row) {
                e->count++;
                e->last_row = row;
            }
            *id = e->id;
            *kh = e->kh;
            return 0;
        }
        i = (i + 1) & (kc->cap - 1);
    }
    *kh = kv_key_hash(k, kn, seed);
    if (kc->n >= KC_MAX || (kc->n + 1) * 2 > kc->cap) {
        return 0; /* too many distinct keys: the rest cannot be hot anyway */
    }
    size_t off = kc->keys.len;
    if (kn > 0 && vbuf_put(&kc->keys, k, kn) < 0) {
        return -ENOMEM;
    }
    kc->t[i] =
        (struct kc_ent){h, wa, wb, *kh, (uint32_t)off, (uint32_t)kn, 1, row, (uint32_t)kc->n};
    kc->slot[kc->n] = (uint32_t)i;
    *id = (uint32_t)kc->n++;
    return 0;
}

/* kc_add's count for key id |id| (< kc->n), known without the lookup. */
static inline void kc_count(struct keycount *kc, uint64_t row, uint32_t id)
{
    struct kc_ent *e = &kc->t[kc->slot[id]];
    if (e->last_row != row) {
        e->count++;
        e->last_row = row;
    }
}

/*
 * What record_attrs remembers between rows, so that a key or key-value it
 * saw recently costs a compare rather than hashes and table probes
 * (exporters write a call site's keys in one order, and most values of a
 * counted key repeat: methods, routes, status codes, bools):
 *   pos  the previous rows' key at each list position: its bytes (in the
 *        open block), id and kv_key_hash
 *   val  by key id, its last AV_WAYS distinct values (most recent first):
 *        the bytes (in the open block), kv_val_hash for a string, and the
 *        value table entry (1 + entry, 0 none)
 *   rhv  the last row walked: the string values' kv_val_hash in list
 *        order (rok: it had at most AK_ROW attributes, no array values,
 *        and parsed to the end), for attrs_repeat
 *   rall the last row was an attrs_repeat (so each of its counted values
 *        has an entry or a key no longer entered): a key stops being
 *        entered, never starts again within a block, so the next repeat's
 *        check that no value may be entered now holds without its loop
 *   rb   where the last row walked has its positions in kc->ap (a repeat
 *        adds none: its positions are that row's, see hot_build)
 *   run  rows repeated since that walk whose counts are not added yet
 *        (attrs_flush adds them, before anything reads a count), the last
 *        of them run_row
 *   rbfix the last repeat added no hash to the bloom: every one of them
 *        was in its recent slot and nothing has written the set since, so
 *        the next repeat would add none either
 * A hit gives what the lookups would (the same bytes have the same hash,
 * id and entry), and the counts are kept the same way (kc_count,
 * vdict_count), so the block is byte for byte what it was without it. A
 * cached value whose entry is 0 while its key is still entered goes the
 * slow way (the lookup may enter it now). Cleared per block: the pointers
 * are into the block being sealed.
 */
#define AK_POS 16
#define AK_ROW 64
#define AV_WAYS 2
struct av_way {
    const uint8_t *v;
    uint32_t n, ve; /* n 0: empty (a value takes a byte at least) */
    uint64_t hv;
};
struct akmem {
    struct {
        const char *k;
        uint64_t kn; /* UINT64_MAX: empty */
        uint32_t id;
        uint64_t kh;
    } pos[AK_POS];
    struct av_way val[KC_MAX][AV_WAYS];
    uint64_t rhv[AK_ROW];
    uint32_t nrhv;
    bool rok;
    bool rall;
    bool rbfix;
    uint64_t rb;
    uint64_t run, run_row;
};

/* Blooms and zones gathered while the rows are walked. */
struct wside {
    struct keycount kc;
    struct akmem *am; /* record_attrs's recent keys and values (scratch_prepare) */
    struct vdict vd;  /* format 5: log and span attribute values */
    bool vd_on;
    struct bloom_acc set[4]; /* by bloom kind - 1 */
    bool incomplete[4];
    bool present[4];
    struct bloom_grams grams; /* logs: the string bodies' grams (section 10) */
    struct bloom_seen seen;   /* logs: recent string bodies, already in the token and gram sets */
    struct bloom_tokc tokc;   /* logs: short tokens already in the token set */
    /* logs: bit j set when row j's body goes to the gram set (grams_rows):
     * a string body not in |seen|; rows / 8 bytes, grown with the rows
     * (under 0.1% of a block: inside SCRATCH_FACTOR's margin) */
    uint64_t *gram_rows;
    size_t gram_rows_cap; /* words */
    bool grams_incomplete;
    uint64_t zmin[ZONE_MAX + 1], zmax[ZONE_MAX + 1];
    bool zsigned[ZONE_MAX + 1];
    bool zhave[ZONE_MAX + 1];
    struct sidx streams; /* metric blocks */
};

/* Distinct body grams a block's gram bloom holds at most (320 KiB of bits;
 * an eighth of all grams: past it most needles would pass anyway); past it
 * the bloom is written incomplete. */
#define GRAM_MAX_ITEMS (1u << 18)
/* The gram set's bitmaps (block.h's BLK_GRAM_SCRATCH). */
_Static_assert(BLK_GRAM_SCRATCH == BLOOM_GRAM_SPACE / 8, "the gram set's charge is its bitmap");

static uint64_t bloom_seed(enum blk_bloom_kind k)
{
    return 0x4d69726144420000ull + (uint64_t)k; /* "MiraDB" + kind */
}

static void zone_add(struct wside *s, int id, uint64_t v, bool is_signed)
{
    s->zsigned[id] = is_signed;
    if (!s->zhave[id]) {
        s->zhave[id] = true;
        s->zmin[id] = s->zmax[id] = v;
        return;
    }
    if (is_signed) {
        if ((int64_t)v < (int64_t)s->zmin[id]) {
            s->zmin[id] = v;
        }
        if ((int64_t)v > (int64_t)s->zmax[id]) {
            s->zmax[id] = v;
        }
    } else {
        s->zmin[id] = v < s->zmin[id] ? v : s->zmin[id];
        s->zmax[id] = v > s->zmax[id] ? v : s->zmax[id];
    }
}

/* bloom_kv of an array value: its string elements. */
static int bloom_kv_array(struct bloom_acc *set, uint64_t kh, const struct val *v)
{
    struct val_rd r = v->inner;
    for (uint32_t i = 0; i < v->count; i++) {
        struct val e;
        if (val_rd_value(&r, &e) < 0) {
            break;
        }
        if (e.type == VAL_STR && bloom_acc_add(set, kv_val_hash(kh, e.s, e.n)) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

/* key=value into the bloom for a string value, and for each string element
 * of an array value (a filter on an array attribute matches an element);
 * |kh| is the key's kv_key_hash. */
static inline int bloom_kv(struct bloom_acc *set, uint64_t kh, const struct val *v)
{
    if (v->type == VAL_STR) {
        return bloom_acc_add(set, kv_val_hash(kh, v->s, v->n));
    }
    return v->type == VAL_ARRAY ? bloom_kv_array(set, kh, v) : 0;
}

/*
 * val_rd_value_in for record_attrs, which reads a scalar's type and where
 * it ends, never its number: a double (8 bytes) and an int of up to 9
 * varint bytes (what val_rd_value would accept) are skipped here instead
 * of through val_rd_value's call. *out's number is not set for them.
 */
static inline int attr_value(struct val_rd *r, struct val *out)
{
    const uint8_t *p = r->p;
    if (r->end - p >= 9 && p[0] == VAL_DOUBLE) {
        out->type = VAL_DOUBLE;
        out->count = 0;
        r->p = p + 9;
        return 0;
    }
    if (r->end - p >= 3 && p[0] == VAL_INT && p[1] >= 0x80) {
        size_t lim = (size_t)(r->end - p) - 1;
        lim = lim < 9 ? lim : 9;
        for (size_t k = 1; k < lim; k++) {
            if (p[1 + k] < 0x80) {
                out->type = VAL_INT;
                out->count = 0;
                r->p = p + 2 + k;
                return 0;
            }
        }
    }
    return val_rd_value_in(r, out);
}

/* kc->ap's growth (ap_reserve). */
static int ap_grow(struct keycount *kc, uint32_t count)
{
    size_t ncap = kc->acap ? kc->acap * 2 : 4096;
    while (ncap < kc->an + count) {
        ncap *= 2;
    }
    struct kc_pos *np = realloc(kc->ap, ncap * sizeof(*np));
    if (np == NULL) {
        return -ENOMEM;
    }
    kc->ap = np;
    kc->acap = ncap;
    return 0;
}

/* Room in kc->ap for |count| more (one per counted attribute at most). */
static inline int ap_reserve(struct keycount *kc, uint32_t count)
{
    return kc->an + count <= kc->acap ? 0 : ap_grow(kc, count);
}

/*
 * The counts of the rows attrs_repeat took since the last walk (am->run of
 * them, the last am->run_row): each counted key of the walked row once a
 * row (kc_count's rule: a list may hold a key twice) and each value entry
 * whose key is still entered, as the repeats would have counted them one
 * by one. Nothing enters or stops entering between a walk and the next,
 * so whether a key is entered is the same for every row of the run. Called
 * before a walk (it reads and adds counts) and once the rows are in.
 */
static __attribute__((noinline)) void attrs_flush_run(struct wside *s)
{
    struct akmem *am = s->am;
    uint64_t run = am->run;
    am->run = 0;
    struct keycount *kc = &s->kc;
    struct vd_key *vk = s->vd.k;
    for (uint64_t x = am->rb; x < kc->an; x++) {
        struct kc_pos p = kc->ap[x];
        struct kc_ent *e = &kc->t[kc->slot[p.id]];
        if (e->last_row != am->run_row) {
            e->count += run;
            e->last_row = am->run_row;
        }
        if (p.ve != 0 &&
            vk[p.id].occ != UINT32_MAX) { /* vd_on: only the value table gives entries */
            vk[p.id].occ += (uint32_t)run;
            s->vd.e[p.ve - 1].count += (uint32_t)run;
        }
    }
}

static inline void attrs_flush(struct wside *s)
{
    if (s->am->run != 0) {
        attrs_flush_run(s);
    }
}

/*
 * record_attrs of row |row| (> 0) whose list is byte for byte row - 1's
 * (the attribute dictionary gave both one code): the counts of the walked
 * row's counted attributes again (added by attrs_flush, a run at a time)
 * and its string hashes into the bloom in the same order, with no parse,
 * hash or probe; no positions of its own (hot_build takes row - 1's).
 * 1 when it cannot (the walked row not rok, or a counted value had no
 * entry while its key is still entered: the walk may enter it now), and
 * then nothing was changed; 0 or -ENOMEM.
 */
static __attribute__((noinline)) int attrs_repeat_slow(struct wside *s, uint64_t row)
{
    struct keycount *kc = &s->kc;
    struct akmem *am = s->am;
    if (!am->rok) {
        return 1;
    }
    if (!am->rall) {
        const struct kc_pos *src = kc->ap + am->rb;
        uint64_t n = kc->an - am->rb;
        struct vd_key *vk = s->vd.k;
        bool vd = s->vd_on;
        for (uint64_t x = 0; x < n; x++) {
            if (src[x].ve == 0 && vd && vk[src[x].id].occ != UINT32_MAX) {
                return 1;
            }
        }
    }
    kc->arow[row] = kc->an;
    am->run++;
    am->run_row = row;
    am->rall = true; /* each value has its entry, or its key is not entered */
    if (am->rbfix) {
        return 0;
    }
    /* A hash its recent slot still holds was added by row - 1: adding it
     * again would change nothing (bloom_acc_add: not fresh, the sketch
     * already at least its rank), so only the others are added. */
    struct bloom_acc *set = &s->set[BLK_BLOOM_ATTRS - 1];
    bool added = false;
    for (uint32_t i = 0; i < am->nrhv; i++) {
        uint64_t h = am->rhv[i];
        if (set->recent[h & (BLOOM_RECENT - 1)] != h) {
            if (bloom_acc_add(set, h) < 0) {
                return -ENOMEM;
            }
            added = true;
        }
    }
    am->rbfix = !added;
    return 0;
}

/* attrs_repeat: inline for a repeat after a repeat that added no hash
 * (rall and rbfix, so the walked row was rok): its row and its count. */
static inline int attrs_repeat(struct wside *s, uint64_t row)
{
    struct akmem *am = s->am;
    if (!am->rall || !am->rbfix) {
        return attrs_repeat_slow(s, row);
    }
    s->kc.arow[row] = s->kc.an;
    am->run++;
    am->run_row = row;
    return 0;
}

/* A record's attributes: keys counted, string values into the bloom, and
 * (format 5's log and span blocks) values into the value table, the
 * strings by the bloom's hash; keys and values seen recently through
 * s->am (struct akmem). The walk of record_attrs. */
static __attribute__((noinline)) int attrs_walk(struct wside *s, uint64_t row, struct oattrs a)
{
    uint64_t seed = bloom_seed(BLK_BLOOM_ATTRS);
    struct keycount *kc = &s->kc;
    struct akmem *am = s->am;
    struct val_rd r = {a.p, a.p + a.len};
    attrs_flush(s);
    kc->arow[row] = kc->an;
    if (ap_reserve(kc, a.count) < 0) {
        return -ENOMEM;
    }
    am->rb = kc->an;
    am->rok = false;
    am->rall = false;
    am->rbfix = false;
    am->nrhv = 0;
    bool rok = a.count <= AK_ROW;
    for (uint32_t i = 0; i < a.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        uint32_t id;
        uint64_t kh;
        if (val_rd_str_in(&r, &k, &kn) < 0) {
            return 0; /* the open block checked its blobs; nothing more to index */
        }
        uint32_t off = (uint32_t)(r.p - a.p) + 1;
        if (attr_value(&r, &v) < 0) {
            return 0;
        }
        if (i < AK_POS && am->pos[i].kn == kn && short_eq(am->pos[i].k, k, kn)) {
            id = am->pos[i].id;
            kh = am->pos[i].kh;
            if (id != UINT32_MAX) {
                kc_count(kc, row, id);
            }
        } else {
            if (kc_add(kc, row, k, kn, seed, &kh, &id) < 0) {
                return -ENOMEM;
            }
            if (i < AK_POS) {
                am->pos[i].k = k;
                am->pos[i].kn = kn;
                am->pos[i].id = id;
                am->pos[i].kh = kh;
            }
        }
        uint64_t hv;
        if (id != UINT32_MAX && s->vd_on && vdict_wants(&s->vd, id)) {
            const uint8_t *vb = a.p + off - 1;
            uint32_t vn = (uint32_t)(r.p - vb), ve = 0;
            struct av_way *w = am->val[id];
            int hit = w[0].n == vn && short_eq(w[0].v, vb, vn)   ? 0
                      : w[1].n == vn && short_eq(w[1].v, vb, vn) ? 1
                                                                 : -1;
            if (hit >= 0 && w[hit].ve != 0) {
                hv = w[hit].hv;
                ve = w[hit].ve;
                vdict_count(&s->vd, id, ve);
                if (hit == 1) {
                    struct av_way t = w[0];
                    w[0] = w[1];
                    w[1] = t;
                }
            } else {
                hv = v.type == VAL_STR ? kv_val_hash(kh, v.s, v.n) : 0;
                if (vdict_add(&s->vd, id, v.type == VAL_STR, hv, kh, vb, vn, &ve) < 0) {
                    return -ENOMEM;
                }
                if (hit < 0) {
                    w[1] = w[0];
                    hit = 0;
                }
                w[hit] = (struct av_way){vb, vn, ve, hv};
            }
            kc->ap[kc->an++] = (struct kc_pos){id, off, ve};
        } else {
            hv = v.type == VAL_STR ? kv_val_hash(kh, v.s, v.n) : 0;
            if (id != UINT32_MAX) {
                kc->ap[kc->an++] = (struct kc_pos){id, off, 0};
            }
        }
        int rc = 0;
        if (v.type == VAL_STR) {
            if (rok) {
                am->rhv[am->nrhv++] = hv;
            }
            rc = bloom_acc_add(&s->set[BLK_BLOOM_ATTRS - 1], hv);
        } else if (v.type == VAL_ARRAY) {
            rok = false;
            rc = bloom_kv_array(&s->set[BLK_BLOOM_ATTRS - 1], kh, &v);
        }
        if (rc < 0) {
            return -ENOMEM;
        }
    }
    am->rok = rok;
    return 0;
}

/* attrs_walk of row |row|, or when |same| (the list is row - 1's) the
 * repeat of row - 1's (attrs_repeat) where it can: inline, so that a repeat
 * costs no call into the walk's frame. 0 or -ENOMEM. */
static inline int record_attrs(struct wside *s, uint64_t row, struct oattrs a, bool same)
{
    if (same && row > 0) {
        int rc = attrs_repeat(s, row);
        if (rc <= 0) {
            return rc;
        }
    }
    return attrs_walk(s, row, a);
}

/* String-valued top-level attributes go to the bloom as key=value. */
static int bloom_attrs(struct bloom_acc *set, const uint8_t *p, uint32_t len, uint32_t count,
                       uint64_t seed)
{
    struct val_rd r = {p, p + len};
    for (uint32_t i = 0; i < count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            return 0; /* the open block checked its blobs; nothing more to index */
        }
        if (bloom_kv(set, kv_key_hash(k, kn, seed), &v) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}

struct sortkey {
    uint64_t t;
    uint64_t i;
};

#define SORT_DIGIT 11
#define SORT_BUCKETS (1u << SORT_DIGIT)

/*
 * Rows in time order (stable: ties in append order) into |perm|, using |k|
 * and |tmp| (all |rows| long). Out of order rows are sorted by LSD radix on
 * the time less the block's earliest, SORT_DIGIT bits a pass, only over the
 * bits the block's time span uses, and a pass whose digit is the same in
 * every row is skipped.
 */
static void sort_rows(const oblock *ob, uint64_t rows, uint64_t *perm, struct sortkey *k,
                      struct sortkey *tmp)
{
    bool sorted = true;
    uint64_t prev = 0, mn = UINT64_MAX, mx = 0;
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t t = oblock_time(ob, i);
        k[i].t = t;
        k[i].i = i;
        sorted = sorted && t >= prev;
        prev = t;
        mn = t < mn ? t : mn;
        mx = t > mx ? t : mx;
    }
    if (sorted) {
        for (uint64_t i = 0; i < rows; i++) {
            perm[i] = i;
        }
        return;
    }
    uint64_t span = mx - mn;
    uint32_t cnt[SORT_BUCKETS];
    for (unsigned shift = 0; shift < 64 && (span >> shift) != 0; shift += SORT_DIGIT) {
        memset(cnt, 0, sizeof(cnt));
        for (uint64_t i = 0; i < rows; i++) {
            cnt[((k[i].t - mn) >> shift) & (SORT_BUCKETS - 1)]++;
        }
        if (cnt[((k[0].t - mn) >> shift) & (SORT_BUCKETS - 1)] == rows) {
            continue; /* one digit for every row: the pass would not move anything */
        }
        uint32_t sum = 0;
        for (unsigned d = 0; d < SORT_BUCKETS; d++) {
            uint32_t c = cnt[d];
            cnt[d] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < rows; i++) {
            tmp[cnt[((k[i].t - mn) >> shift) & (SORT_BUCKETS - 1)]++] = k[i];
        }
        struct sortkey *x = k;
        k = tmp;
        tmp = x;
    }
    for (uint64_t i = 0; i < rows; i++) {
        perm[i] = k[i].i;
    }
}

/* Row |row|'s string body p[0, n): its tokens into their set and the row
 * marked for grams_rows, unless an equal body is there already (s->seen).
 * 0 or -ENOMEM. */
static int body_index(struct wside *s, uint64_t row, const char *p, size_t n)
{
    if (bloom_seen_check(&s->seen, p, n)) {
        return 0;
    }
    if (n >= BLOOM_GRAM_N) {
        s->gram_rows[row >> 6] |= 1ull << (row & 63);
    }
    return bloom_acc_body(&s->set[BLK_BLOOM_TOKENS - 1], NULL, &s->tokc, p, n,
                          bloom_seed(BLK_BLOOM_TOKENS));
}

/*
 * The grams of the bodies body_index marked, read back from the body
 * column, once every row is in. A pass of their own rather than one with
 * the tokens: the gram set's 256 KiB bitmap, written at random, then no
 * longer evicts the token cache and the accumulators' tables (what the
 * row loop reads) from L1 at every row; the set is the same, so the filter
 * is. 0 (a set that cannot be allocated leaves the block without a gram
 * bloom).
 */
static int grams_rows(const struct strb *body, uint64_t rows, struct wside *s)
{
    if (s->grams_incomplete) {
        return 0;
    }
    if (bloom_grams_ready(&s->grams) < 0) {
        s->grams_incomplete = true; /* no room for the set: no gram bloom */
        return 0;
    }
    for (uint64_t w = 0; w < (rows + 63) / 64; w++) {
        for (uint64_t m = s->gram_rows[w]; m != 0; m &= m - 1) {
            uint64_t j = w * 64 + (uint64_t)__builtin_ctzll(m);
            uint64_t a = body->offs[j];
            (void)bloom_grams_add(&s->grams, (const char *)body->data.p + a, body->offs[j + 1] - a);
        }
    }
    return 0;
}

/*
 * The fixed-width columns first, a few at a time in time order
 * (oblock_log_cols: the lines in use are a few per request whose rows the
 * sort put side by side), then their zones and codings in order, then a
 * row at a time what needs a row's variable-length fields.
 */
static int fill_logs(const oblock *ob, const uint64_t *perm, struct wcols *w, struct wside *s)
{
    uint64_t seed_tr = bloom_seed(BLK_BLOOM_TRACE_IDS);
    s->present[BLK_BLOOM_TOKENS - 1] = s->present[BLK_BLOOM_TRACE_IDS - 1] = true;
    s->present[BLK_BLOOM_ATTRS - 1] = true;
    uint64_t rows = w->rows;
    uint64_t *tm = w->I[L_TIME], *obs = w->I[L_OBS], *sev = w->I[L_SEV], *idf = w->I[L_IDF];
    struct log_cols c = {.time = tm,
                         .observed = obs,
                         .scope = w->I[L_SCOPE],
                         .severity = sev,
                         .body_type = w->I[L_BTYPE],
                         .ids = idf,
                         .nattrs = w->I[L_ACOUNT],
                         .dropped = w->I[L_DROP],
                         .flags = w->I[L_FLAGS],
                         .trace = w->R[L_TRACE].p,
                         .span = w->R[L_SPAN].p};
    oblock_log_cols(ob, perm, rows, &c);
    for (uint64_t j = 0; j < rows; j++) {
        /* the row's time as the sort took it: time, or observed time */
        uint64_t t = tm[j] ? tm[j] : obs[j];
        idf[j] |= tm[j] == 0 ? 4u : 0;
        obs[j] = zz((int64_t)(obs[j] - t));
        tm[j] = t;
        zone_add(s, ZONE_TIME, t, false);
    }
    for (uint64_t j = 0; j < rows; j++) {
        zone_add(s, ZONE_SEVERITY, sev[j], true);
        sev[j] = zz((int64_t)sev[j]);
    }
    const uint64_t *btype = w->I[L_BTYPE], *acount = w->I[L_ACOUNT];
    const uint8_t *tr = w->R[L_TRACE].p;
    for (uint64_t j = 0; j < rows; j++) {
        struct log_strs v;
        oblock_log_strs(ob, perm[j], &v);
        int rc =
            dict_add(&w->D[L_SEVTEXT], j, (const char *)v.severity_text.p, v.severity_text.len);
        if (rc == 0) {
            rc = dict_add(&w->D[L_EVNAME], j, (const char *)v.event_name.p, v.event_name.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[L_BODY], j, (const char *)v.body.p, v.body.len);
        }
        if (rc == 0) {
            rc = dict_add_run(&w->D[X_ADICT], j, (const char *)v.attrs.p, v.attrs.len);
        }
        /* The previous row's trace id again: its hash was the last one
         * added to this set, so adding it again would change nothing. */
        bool has_tr = (idf[j] & 1u) != 0;
        bool same_tr =
            j > 0 && (idf[j - 1] & 1u) != 0 && memcmp(tr + 16 * (j - 1), tr + 16 * j, 16) == 0;
        if (rc == 0 && has_tr && !same_tr) {
            rc = bloom_acc_add(&s->set[BLK_BLOOM_TRACE_IDS - 1],
                               bloom_hash_bytes(tr + 16 * j, 16, seed_tr));
        }
        if (rc == 0 && btype[j] == VAL_STR) {
            rc = body_index(s, j, (const char *)v.body.p, v.body.len);
        } else if (btype[j] != VAL_EMPTY) {
            /* A structured body renders as JSON: its tokens and grams are
             * not indexed. */
            s->incomplete[BLK_BLOOM_TOKENS - 1] = true;
            s->grams_incomplete = true;
        }
        if (rc == 0) {
            struct oattrs a = {v.attrs.p, v.attrs.len, (uint32_t)acount[j]};
            rc = record_attrs(s, j, a,
                              j > 0 && w->D[X_ADICT].codes[j] == w->D[X_ADICT].codes[j - 1]);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return grams_rows(&w->S[L_BODY], w->rows, s);
}

/* fill_logs' order for spans. */
static int fill_spans(const oblock *ob, const uint64_t *perm, struct wcols *w, struct wside *s)
{
    uint64_t seed_tr = bloom_seed(BLK_BLOOM_TRACE_IDS);
    s->present[BLK_BLOOM_TRACE_IDS - 1] = s->present[BLK_BLOOM_ATTRS - 1] = true;
    uint64_t rows = w->rows;
    uint64_t *st = w->I[T_START], *dur = w->I[T_DUR], *kind = w->I[T_KIND];
    uint64_t *status = w->I[T_STATUS];
    struct span_cols c = {.start = st,
                          .end = dur,
                          .scope = w->I[T_SCOPE],
                          .kind = kind,
                          .status_code = status,
                          .flags = w->I[T_FLAGS],
                          .has_parent = w->I[T_HASPAR],
                          .nattrs = w->I[T_ACOUNT],
                          .dropped_attrs = w->I[T_DROP],
                          .n_events = w->I[T_NEV],
                          .dropped_events = w->I[T_DROPEV],
                          .n_links = w->I[T_NLINK],
                          .dropped_links = w->I[T_DROPLINK],
                          .span = w->R[T_SPAN].p,
                          .parent = w->R[T_PARENT].p};
    oblock_span_cols(ob, perm, rows, &c);
    for (uint64_t j = 0; j < rows; j++) {
        int64_t d = (int64_t)(dur[j] - st[j]); /* the end read into the duration's column */
        zone_add(s, ZONE_TIME, st[j], false);
        zone_add(s, ZONE_DURATION, (uint64_t)d, true);
        dur[j] = zz(d);
        kind[j] = zz((int64_t)kind[j]);
        status[j] = zz((int64_t)status[j]);
    }
    const uint64_t *acount = w->I[T_ACOUNT];
    for (uint64_t j = 0; j < rows; j++) {
        struct span_strs v;
        oblock_span_strs(ob, perm[j], &v);
        int rc = dict_add(&w->D[T_NAME], j, (const char *)v.name.p, v.name.len);
        if (rc == 0) {
            rc = str_add(&w->S[T_STATMSG], j, v.status_message.p, v.status_message.len);
        }
        if (rc == 0) {
            rc = dict_add_run(&w->D[X_ADICT], j, (const char *)v.attrs.p, v.attrs.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[T_TSTATE], j, v.trace_state.p, v.trace_state.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[T_EVENTS], j, v.events.p, v.events.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[T_LINKS], j, v.links.p, v.links.len);
        }
        if (rc == 0) { /* format 4: the trace id dictionary */
            rc = dict_add(&w->D[X_TRACES], j, (const char *)v.trace_id, 16);
        }
        /* The previous row's trace (one dictionary code): its hash was the
         * last one added to this set, adding it again would change nothing. */
        if (rc == 0 && (j == 0 || w->D[X_TRACES].codes[j] != w->D[X_TRACES].codes[j - 1])) {
            rc = bloom_acc_add(&s->set[BLK_BLOOM_TRACE_IDS - 1],
                               bloom_hash_bytes(v.trace_id, 16, seed_tr));
        }
        if (rc == 0) {
            struct oattrs a = {v.attrs.p, v.attrs.len, (uint32_t)acount[j]};
            rc = record_attrs(s, j, a,
                              j > 0 && w->D[X_ADICT].codes[j] == w->D[X_ADICT].codes[j - 1]);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* fill_logs' order for data points. */
static int fill_points(const oblock *ob, const uint64_t *perm, struct wcols *w, struct wside *s)
{
    s->present[BLK_BLOOM_ATTRS - 1] = true;
    uint64_t rows = w->rows;
    uint64_t *tm = w->I[M_TIME], *start = w->I[M_START], *metric = w->I[M_METRIC];
    struct point_cols c = {.time = tm,
                           .start = start,
                           .metric = metric,
                           .value_type = w->I[M_VTYPE],
                           .count = w->I[M_COUNT],
                           .has = w->I[M_HAS],
                           .nattrs = w->I[M_ACOUNT],
                           .flags = w->I[M_FLAGS],
                           .n_exemplars = w->I[M_NEX],
                           .value = w->R[M_VALUE].p,
                           .sum = w->R[M_SUM].p,
                           .min = w->R[M_MIN].p,
                           .max = w->R[M_MAX].p};
    oblock_point_cols(ob, perm, rows, &c);
    for (uint64_t j = 0; j < rows; j++) {
        zone_add(s, ZONE_TIME, tm[j], false);
        start[j] = zz((int64_t)(tm[j] - start[j]));
    }
    const uint64_t *acount = w->I[M_ACOUNT];
    for (uint64_t j = 0; j < rows; j++) {
        struct point_strs v;
        oblock_point_strs(ob, perm[j], &v);
        int rc = dict_add(&w->D[X_ADICT], j, (const char *)v.attrs.p, v.attrs.len);
        if (rc == 0) { /* format 4: the entry coded */
            struct strb *sd = &w->S[M_DETAIL];
            enum metric_kind kind = oblock_metric(ob, (uint32_t)metric[j])->kind;
            rc = mdet_encode(&sd->data, &w->fl, kind, v.detail.p, v.detail.len);
            sd->offs[j + 1] = sd->data.len;
        }
        if (rc == 0) {
            rc = str_add(&w->S[M_EXEMPLARS], j, v.exemplars.p, v.exemplars.len);
        }
        struct oattrs a = {v.attrs.p, v.attrs.len, (uint32_t)acount[j]};
        if (rc == 0) {
            rc = record_attrs(s, j, a,
                              j > 0 && w->D[X_ADICT].codes[j] == w->D[X_ADICT].codes[j - 1]);
        }
        if (rc == 0) {
            rc = sidx_add(&s->streams, j, (uint32_t)metric[j], a.p, a.len);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- footer sections ---- */

static int sec_begin(struct vbuf *f, uint32_t id, size_t *at)
{
    if (pad8(f) < 0 || vbuf_put_u32(f, id) < 0 || vbuf_put_u32(f, 0) < 0) {
        return -ENOMEM;
    }
    *at = f->len;
    return vbuf_put_u64(f, 0);
}

static void sec_end(struct vbuf *f, size_t at)
{
    wr64(f->p + at, f->len - at - 8);
}

static int put_mstr_len(struct vbuf *f, struct mstr s)
{
    return vbuf_put_u32(f, s.len);
}

static int put_bytes(struct vbuf *f, const void *p, size_t n)
{
    return n ? vbuf_put(f, p, n) : 0;
}

static int sec_dicts(struct vbuf *f, const oblock *ob, struct wside *s)
{
    size_t at;
    int rc = 0;
    uint32_t nr = oblock_n_resources(ob), ns = oblock_n_scopes(ob), nm = oblock_n_metrics(ob);
    uint64_t seed = bloom_seed(BLK_BLOOM_RES_ATTRS);
    s->present[BLK_BLOOM_RES_ATTRS - 1] = true;

    rc |= sec_begin(f, SEC_RESOURCES, &at);
    rc |= vbuf_put_u32(f, nr);
    for (uint32_t i = 0; i < nr && rc == 0; i++) {
        const struct res_view *r = oblock_resource(ob, i);
        rc |= vbuf_put_u32(f, r->dropped_attrs);
        rc |= vbuf_put_u32(f, r->attrs.count);
        rc |= vbuf_put_u32(f, r->attrs.len);
        rc |= put_mstr_len(f, r->schema_url);
        rc |= put_bytes(f, r->attrs.p, r->attrs.len);
        rc |= put_bytes(f, r->schema_url.p, r->schema_url.len);
        if (rc == 0) {
            rc = bloom_attrs(&s->set[BLK_BLOOM_RES_ATTRS - 1], r->attrs.p, r->attrs.len,
                             r->attrs.count, seed);
        }
    }
    if (rc != 0) {
        return -ENOMEM;
    }
    sec_end(f, at);

    rc |= sec_begin(f, SEC_SCOPES, &at);
    rc |= vbuf_put_u32(f, ns);
    for (uint32_t i = 0; i < ns && rc == 0; i++) {
        const struct scope_view *c = oblock_scope(ob, i);
        rc |= vbuf_put_u32(f, c->resource_id);
        rc |= vbuf_put_u32(f, c->dropped_attrs);
        rc |= vbuf_put_u32(f, c->attrs.count);
        rc |= put_mstr_len(f, c->name);
        rc |= put_mstr_len(f, c->version);
        rc |= vbuf_put_u32(f, c->attrs.len);
        rc |= put_mstr_len(f, c->schema_url);
        rc |= put_bytes(f, c->name.p, c->name.len);
        rc |= put_bytes(f, c->version.p, c->version.len);
        rc |= put_bytes(f, c->attrs.p, c->attrs.len);
        rc |= put_bytes(f, c->schema_url.p, c->schema_url.len);
    }
    if (rc != 0) {
        return -ENOMEM;
    }
    sec_end(f, at);

    rc |= sec_begin(f, SEC_METRICS, &at);
    rc |= vbuf_put_u32(f, nm);
    for (uint32_t i = 0; i < nm && rc == 0; i++) {
        const struct metric_view *m = oblock_metric(ob, i);
        rc |= vbuf_put_u32(f, m->scope_id);
        rc |= vbuf_put_u8(f, (uint8_t)m->kind);
        rc |= vbuf_put_u8(f, m->monotonic ? 1 : 0);
        rc |= vbuf_put_u8(f, 0);
        rc |= vbuf_put_u8(f, 0);
        rc |= vbuf_put_u32(f, (uint32_t)m->temporality);
        rc |= vbuf_put_u32(f, m->metadata.count);
        rc |= put_mstr_len(f, m->name);
        rc |= put_mstr_len(f, m->description);
        rc |= put_mstr_len(f, m->unit);
        rc |= vbuf_put_u32(f, m->metadata.len);
        rc |= put_bytes(f, m->name.p, m->name.len);
        rc |= put_bytes(f, m->description.p, m->description.len);
        rc |= put_bytes(f, m->unit.p, m->unit.len);
        rc |= put_bytes(f, m->metadata.p, m->metadata.len);
    }
    if (rc != 0) {
        return -ENOMEM;
    }
    sec_end(f, at);
    return 0;
}

/*
 * Format 6 (META flag bit 3, blk_wopts.dicts_zstd): sections 5, 6 and 7
 * as sec_dicts lays them out, each 8-aligned from the start, in section
 * 12's one zstd frame at |level| after their u64 length.
 */
static int sec_zdicts(struct vbuf *f, const oblock *ob, struct wside *s, int level)
{
    struct vbuf d;
    vbuf_init(&d);
    size_t at;
    int rc = sec_dicts(&d, ob, s);
    if (rc == 0) {
        rc = sec_begin(f, SEC_DICTS, &at) | vbuf_put_u64(f, d.len);
        size_t cap = ZSTD_compressBound(d.len);
        rc = rc != 0 || vbuf_reserve(f, cap) < 0 ? -ENOMEM : 0;
        if (rc == 0) {
            size_t zn = ZSTD_compress(f->p + f->len, cap, d.p, d.len, level);
            rc = ZSTD_isError(zn) ? -EIO : 0;
            f->len += rc == 0 ? zn : 0;
        }
        if (rc == 0) {
            sec_end(f, at);
        }
    }
    vbuf_fini(&d);
    return rc;
}

static int sec_blooms(struct vbuf *f, struct wside *s)
{
    size_t at;
    uint32_t n = 0;
    for (int k = 0; k < 4; k++) {
        n += s->present[k];
    }
    if (sec_begin(f, SEC_BLOOMS, &at) < 0 || vbuf_put_u32(f, n) < 0 || vbuf_put_u32(f, 0) < 0) {
        return -ENOMEM;
    }
    for (int k = 0; k < 4; k++) {
        if (!s->present[k]) {
            continue;
        }
        uint64_t items = bloom_acc_count(&s->set[k]);
        uint64_t nbits = bloom_nbits_for(items);
        int rc = 0;
        rc |= vbuf_put_u8(f, (uint8_t)(k + 1));
        rc |= vbuf_put_u8(f, BLOOM_ALGO_XXH3_SPLIT);
        rc |= vbuf_put_u8(f, BLOOM_K);
        rc |= vbuf_put_u8(f, s->incomplete[k] ? 1 : 0);
        rc |= vbuf_put_u32(f, 0);
        rc |= vbuf_put_u64(f, bloom_seed((enum blk_bloom_kind)(k + 1)));
        rc |= vbuf_put_u64(f, nbits);
        rc |= vbuf_put_u64(f, items);
        if (rc != 0 || vbuf_reserve(f, nbits / 8) < 0) {
            return -ENOMEM;
        }
        uint8_t *bits = f->p + f->len;
        memset(bits, 0, nbits / 8);
        bloom_fill(bits, nbits, &s->set[k]);
        f->len += nbits / 8;
    }
    sec_end(f, at);
    return 0;
}

/* Section 10 (logs): the body gram bloom, sized from the exact count of
 * distinct grams; the gram set is left empty. */
static int sec_grams(struct vbuf *f, struct wside *s)
{
    uint64_t items = s->grams_incomplete ? 0 : bloom_grams_count(&s->grams);
    bool incomplete = s->grams_incomplete || items > GRAM_MAX_ITEMS;
    uint64_t nbits = incomplete ? BLOOM_BLOCK_BITS : bloom_nbits_for(items);
    size_t at;
    int rc = sec_begin(f, SEC_GRAMS, &at);
    rc |= vbuf_put_u8(f, BLK_BLOOM_GRAMS);
    rc |= vbuf_put_u8(f, BLOOM_ALGO_XXH3_SPLIT);
    rc |= vbuf_put_u8(f, BLOOM_K);
    rc |= vbuf_put_u8(f, incomplete ? 1 : 0);
    rc |= vbuf_put_u32(f, 0);
    rc |= vbuf_put_u64(f, bloom_seed(BLK_BLOOM_GRAMS));
    rc |= vbuf_put_u64(f, nbits);
    rc |= vbuf_put_u64(f, incomplete ? 0 : items);
    if (rc != 0 || vbuf_reserve(f, nbits / 8) < 0) {
        bloom_grams_drain(&s->grams, NULL, 0, 0);
        return -ENOMEM;
    }
    uint8_t *bits = f->p + f->len;
    memset(bits, 0, nbits / 8);
    bloom_grams_drain(&s->grams, incomplete ? NULL : bits, nbits, bloom_seed(BLK_BLOOM_GRAMS));
    f->len += nbits / 8;
    sec_end(f, at);
    return 0;
}

static int sec_zones(struct vbuf *f, struct wside *s)
{
    size_t at;
    uint32_t n = 0;
    for (int z = 1; z <= ZONE_MAX; z++) {
        n += s->zhave[z];
    }
    if (n == 0) {
        return 0;
    }
    int rc = sec_begin(f, SEC_ZONES, &at);
    rc |= vbuf_put_u32(f, n);
    rc |= vbuf_put_u32(f, 0);
    for (int z = 1; z <= ZONE_MAX; z++) {
        if (s->zhave[z]) {
            rc |= vbuf_put_u32(f, (uint32_t)z);
            rc |= vbuf_put_u32(f, 0);
            rc |= vbuf_put_u64(f, s->zmin[z]);
            rc |= vbuf_put_u64(f, s->zmax[z]);
        }
    }
    if (rc != 0) {
        return -ENOMEM;
    }
    sec_end(f, at);
    return 0;
}

/* ---- hot attribute keys ---- */

struct hot {
    unsigned n;
    const char *key[HOT_MAX];
    uint32_t len[HOT_MAX];
    uint64_t *pos[HOT_MAX]; /* per row: 1 + offset of the value in the row's attrs, 0 absent */
    size_t cap[HOT_MAX];    /* kept across seals */
    uint32_t id[HOT_MAX];   /* keycount ids */
    int8_t slot[KC_MAX];    /* keycount id -> hot slot, -1 none */
    struct kc_ent *cand;
    size_t cap_cand;
};

static int cmp_hot(const void *a, const void *b, void *arg)
{
    const struct kc_ent *x = a, *y = b;
    const uint8_t *keys = arg;
    if (x->count != y->count) {
        return x->count > y->count ? -1 : 1;
    }
    int c = memcmp(keys + x->off, keys + y->off, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

/*
 * Keys present in at least half the rows (most frequent first, then by
 * bytes; at most HOT_MAX) get a position column: where in each row's
 * attribute list the key's value starts, so a filter on the key decodes
 * that value alone instead of walking the list. The columns are written
 * when |positions| (format 5's log and span readers find them at load).
 */
static int hot_build(struct hot *hot, struct keycount *kc, struct wcols *w, bool positions)
{
    hot->n = 0;
    if (w->rows == 0 || kc->n == 0) {
        return 0;
    }
    if (kc->n > hot->cap_cand) {
        free(hot->cand);
        hot->cand = malloc(kc->n * sizeof(*hot->cand));
        hot->cap_cand = hot->cand ? kc->n : 0;
        if (hot->cand == NULL) {
            return -ENOMEM;
        }
    }
    struct kc_ent *cand = hot->cand;
    size_t nc = 0;
    for (size_t i = 0; i < kc->cap; i++) {
        if (kc->t[i].count != 0 && kc->t[i].count * 2 >= w->rows) {
            cand[nc++] = kc->t[i];
        }
    }
    qsort_r(cand, nc, sizeof(*cand), cmp_hot, kc->keys.p);
    for (size_t i = 0; i < nc && hot->n < HOT_MAX; i++) {
        hot->key[hot->n] = (const char *)kc->keys.p + cand[i].off;
        hot->len[hot->n] = cand[i].len;
        hot->id[hot->n] = cand[i].id;
        if (positions) {
            if (cap_u64(&hot->pos[hot->n], &hot->cap[hot->n], w->rows) < 0) {
                return -ENOMEM;
            }
            memset(hot->pos[hot->n], 0, w->rows * sizeof(uint64_t));
        }
        hot->n++;
    }
    if (!positions) {
        return 0;
    }
    /* Key id -> hot slot; the rows' attributes as record_attrs saw them. */
    int8_t *slot = hot->slot;
    memset(slot, -1, sizeof(hot->slot));
    for (unsigned h = 0; h < hot->n; h++) {
        slot[hot->id[h]] = (int8_t)h;
    }
    const struct kc_pos *ap = kc->ap;
    const uint64_t *code = w->D[X_ADICT].codes;
    for (uint64_t j = 0; j < w->rows; j++) {
        if (j > 0 && kc->arow[j] == kc->arow[j + 1] && code[j] == code[j - 1]) {
            /* attrs_repeat's row (or a walk of the same bytes, which
             * counted the same keys at the same places): row - 1's */
            for (unsigned h = 0; h < hot->n; h++) {
                hot->pos[h][j] = hot->pos[h][j - 1];
            }
            continue;
        }
        for (uint64_t e = kc->arow[j]; e < kc->arow[j + 1]; e++) {
            int h = slot[ap[e].id];
            if (h >= 0 && hot->pos[h][j] == 0) {
                hot->pos[h][j] = ap[e].off;
            }
        }
    }
    return 0;
}

static void hot_free(struct hot *hot)
{
    for (unsigned h = 0; h < HOT_MAX; h++) {
        free(hot->pos[h]);
    }
    free(hot->cand);
}

static int sec_hotkeys(struct vbuf *f, const struct hot *hot)
{
    size_t at;
    int rc = sec_begin(f, SEC_HOTKEYS, &at) | vbuf_put_u32(f, hot->n);
    for (unsigned h = 0; h < hot->n; h++) {
        rc |= vbuf_put_u32(f, hot->len[h]);
        rc |= put_bytes(f, hot->key[h], hot->len[h]);
    }
    if (rc != 0) {
        return -ENOMEM;
    }
    sec_end(f, at);
    return 0;
}

/*
 * A seal's working memory, kept for the next seal: a block's columns, table
 * and footer buffers are tens of MiB, and fresh ones cost a page fault per
 * 4 KiB (zeroed by the kernel) every seal. Up to SCRATCH_KEEP sets are kept
 * (one per concurrent sealer); each grows to the largest block it served.
 *
 * Each set is charged to the memory budget (adm.h) at SCRATCH_FACTOR times
 * the oblock_bytes of the largest block it served (one set measured at 1-2x
 * the block), before the seal that may grow it, so admission makes room
 * for it instead of the process growing past the budget. A set that served
 * a block above scratch_keep_max is freed after that seal and its charge
 * returned: one oversized export must not leave its seal's scratch (and its
 * charge) behind for good.
 */
#define SCRATCH_FACTOR 2
struct scratch {
    struct wcols w;
    struct wside side;
    struct tbw tb;
    struct vbuf foot;
    struct hot hot;
    uint64_t *perm;
    struct sortkey *keys, *keys2;
    size_t cap_rows;
    uint64_t charged; /* to the budget, for this set */
    /* akeys_build: the key-coded lists, each list's first row, key spans */
    struct vbuf ak_data;
    struct vbuf tv_dir, tv_chk; /* akeys_typed: the T column, the round trip's */
    uint64_t *ak_offs, *ak_first;
    size_t cap_ak_offs, cap_ak_first;
    uint32_t klen[KC_MAX], koff[KC_MAX];
};

#define SCRATCH_KEEP 2 /* the sealer runs two threads (storage/sealer.c) */
static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct scratch *scratch_pool[SCRATCH_KEEP];
static unsigned scratch_n;
static size_t scratch_keep_max = SIZE_MAX; /* under scratch_lock */

static void scratch_free(struct scratch *sc)
{
    adm_uncharge(sc->charged);
    wcols_free(&sc->w);
    for (int k = 0; k < 4; k++) {
        bloom_acc_fini(&sc->side.set[k]);
    }
    bloom_grams_fini(&sc->side.grams);
    free(sc->side.gram_rows);
    free(sc->side.kc.t);
    free(sc->side.am);
    free(sc->side.kc.ap);
    free(sc->side.kc.arow);
    vbuf_fini(&sc->side.kc.keys);
    vdict_free(&sc->side.vd);
    sidx_free(&sc->side.streams);
    hot_free(&sc->hot);
    blkw_tbw_fini(&sc->tb);
    vbuf_fini(&sc->foot);
    free(sc->perm);
    free(sc->keys);
    free(sc->keys2);
    vbuf_fini(&sc->ak_data);
    vbuf_fini(&sc->tv_dir);
    vbuf_fini(&sc->tv_chk);
    free(sc->ak_offs);
    free(sc->ak_first);
    free(sc);
}

static struct scratch *scratch_get(void)
{
    struct scratch *sc = NULL;
    pthread_mutex_lock(&scratch_lock);
    if (scratch_n > 0) {
        sc = scratch_pool[--scratch_n];
    }
    pthread_mutex_unlock(&scratch_lock);
    if (sc == NULL) {
        sc = calloc(1, sizeof(*sc)); /* zeroed: every buffer empty */
        if (sc != NULL) {
            for (int k = 0; k < 4; k++) {
                bloom_acc_init(&sc->side.set[k]);
            }
            bloom_grams_init(&sc->side.grams);
        }
    }
    return sc;
}

/* Charges |sc| for a seal of |ob| (see struct scratch). */
static void scratch_charge(struct scratch *sc, const oblock *ob)
{
    uint64_t want = SCRATCH_FACTOR * (uint64_t)oblock_bytes(ob);
    if (oblock_signal(ob) == SIG_LOGS || sc->side.grams.bits != NULL) {
        want += BLK_GRAM_SCRATCH;
    }
    if (want > sc->charged) {
        adm_charge(want - sc->charged);
        sc->charged = want;
    }
}

/* Keeps |sc| for the next seal, or frees it (pool full, or it served a
 * block of |block_bytes| above scratch_keep_max). */
static void scratch_put(struct scratch *sc, size_t block_bytes)
{
    pthread_mutex_lock(&scratch_lock);
    if (scratch_n < SCRATCH_KEEP && block_bytes <= scratch_keep_max) {
        scratch_pool[scratch_n++] = sc;
        sc = NULL;
    }
    pthread_mutex_unlock(&scratch_lock);
    if (sc != NULL) {
        scratch_free(sc);
    }
}

/* Readies |sc| for a block of |rows| rows of |sig|. */
static int scratch_prepare(struct scratch *sc, enum signal sig, uint64_t rows)
{
    struct wside *s = &sc->side;
    if (s->kc.t != NULL) {
        memset(s->kc.t, 0, s->kc.cap * sizeof(*s->kc.t));
    }
    if (s->am == NULL) {
        s->am = calloc(1, sizeof(*s->am));
        if (s->am == NULL) {
            return -ENOMEM;
        }
    } else { /* the key ids the last block used (kc.n, not reset yet) */
        memset(s->am->val, 0, s->kc.n * sizeof(s->am->val[0]));
    }
    memset(s->am->pos, 0xff, sizeof(s->am->pos)); /* kn UINT64_MAX: empty */
    s->am->rok = false;
    s->am->rall = false;
    s->am->run = 0;
    s->kc.n = 0;
    s->kc.an = 0;
    vbuf_reset(&s->kc.keys);
    /* format 5: a value dictionary in the attribute table (logs, spans) */
    const struct spec *as = spec_of(BLK_VERSION, sig, 1);
    s->vd_on = false;
    for (unsigned i = 0; i < as->n; i++) {
        s->vd_on = s->vd_on || as->e[i].type == 'V';
    }
    if (s->vd_on && vdict_reset(&s->vd) < 0) {
        return -ENOMEM;
    }
    for (int k = 0; k < 4; k++) {
        bloom_acc_reset(&s->set[k]);
        s->incomplete[k] = s->present[k] = false;
    }
    bloom_grams_drain(&s->grams, NULL, 0, 0); /* a failed seal may have left grams */
    s->grams_incomplete = false;
    bloom_seen_reset(&s->seen);
    bloom_tokc_reset(&s->tokc);
    if (sig == SIG_LOGS) {
        size_t words = (size_t)(rows + 63) / 64;
        if (s->gram_rows == NULL || words > s->gram_rows_cap) {
            free(s->gram_rows);
            s->gram_rows_cap = 0;
            s->gram_rows = malloc((words + words / 8 + 1) * sizeof(uint64_t));
            if (s->gram_rows == NULL) {
                return -ENOMEM;
            }
            s->gram_rows_cap = words + words / 8 + 1;
        }
        memset(s->gram_rows, 0, words * sizeof(uint64_t));
    }
    memset(s->zhave, 0, sizeof(s->zhave));
    vbuf_reset(&sc->foot);
    sc->hot.n = 0;
    if (rows > sc->cap_rows || sc->perm == NULL) {
        size_t n = rows + rows / 8 + 1;
        free(sc->perm);
        free(sc->keys);
        free(sc->keys2);
        free(s->kc.arow);
        sc->perm = malloc(n * sizeof(*sc->perm));
        sc->keys = malloc(n * sizeof(*sc->keys));
        sc->keys2 = malloc(n * sizeof(*sc->keys2));
        s->kc.arow = malloc((n + 1) * sizeof(*s->kc.arow));
        sc->cap_rows = n;
        if (sc->perm == NULL || sc->keys == NULL || sc->keys2 == NULL || s->kc.arow == NULL) {
            sc->cap_rows = 0;
            return -ENOMEM;
        }
    }
    return wcols_prepare(&sc->w, sig, rows);
}

/*
 * The root's physical columns that blk_wopts.var_seqs lets take varint
 * deltas in a zstd table whenever they are narrower (bit i: column i):
 * each signal's columns of small and irregular steps, where zstd finds
 * the varints' bytes more alike than fixed-width deltas (bench/STORAGE.md,
 * h-cold3): metric and log times and span starts (sorted, gaps from 0 to
 * a request's spacing), a span root's trace id codes (numbered by first
 * row: mostly a step of 0 or 1, sometimes back), a log root's body
 * offsets (their steps are the bodies' lengths).
 */
static uint64_t seq_cols(const struct spec *sp)
{
    uint64_t m = 0;
    for (unsigned i = 0, at = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        if ((e->type == 'I' && e->idx == M_TIME && sp->e == points_root4) ||
            (e->type == 'I' && e->idx == T_START && sp->e == spans_root4) ||
            (e->type == 'I' && e->idx == L_TIME && sp->e == logs_root) ||
            (e->type == 'D' && e->idx == X_TRACES && sp->e == spans_root4) ||
            (e->type == 'S' && e->idx == L_BODY && sp->e == logs_root)) {
            m |= 1ull << at; /* the codes of a D, the offsets of an S */
        }
        struct spec one = {e, 1};
        at += phys_cols(&one);
    }
    return m;
}

/*
 * Format 6, a log or span attrs table by column (META flag bit 6): the lists by
 * key (w->tdir, typed or not) cut into parts at the end of the code stream
 * and of each key's values, each part a frame of its own: a key's values
 * are alike and unlike the codes' (bench/STORAGE.md, h-spans4). Past
 * ZC_PARTS_MAX parts the last holds the rest.
 */
static void attrs_cuts(struct zc_cuts *cut, const struct spec *sp, const struct wcols *w,
                       bool typed)
{
    unsigned at = 0;
    for (unsigned i = 0; i < sp->n && !(sp->e[i].type == 'D' && sp->e[i].idx == X_ADICT); i++) {
        struct spec one = {&sp->e[i], 1};
        at += phys_cols(&one);
    }
    cut->col = at + 2; /* a D's codes, offsets, then its data */
    size_t es = typed ? 9 : 8;
    uint64_t nk = w->tdir.len / es, sum = 0;
    for (uint64_t k = 0; k < nk; k++) {
        sum += rd64(w->tdir.p + es * k);
    }
    uint64_t pos = w->D[X_ADICT].data.len - sum; /* the code stream's end */
    cut->n = 0;
    for (uint64_t k = 0; k <= nk && cut->n < ZC_PARTS_MAX - 1; k++) {
        cut->at[cut->n++] = pos;
        pos += k < nk ? rd64(w->tdir.p + es * k) : 0;
    }
}

/*
 * Format 3: the attribute list dictionary (D[X_ADICT], distinct lists as
 * the rows gave them) becomes key-coded (block_keys.c) against a key
 * dictionary of the keys counted while the rows were walked, their ids in
 * order of first sight. Each distinct list is encoded from the first row
 * that had it, whose value positions the walk recorded.
 */
static int akeys_build(struct scratch *sc, enum signal sig)
{
    struct wcols *w = &sc->w;
    struct keycount *kc = &sc->side.kc;
    struct dictb *d = &w->D[X_ADICT];
    struct strb *ks = &w->S[X_KEYS];
    const uint64_t *count = w->I[spec_of(3, sig, 1)->e[0].idx];
    for (size_t i = 0; i < kc->cap; i++) {
        if (kc->t[i].count != 0) {
            sc->klen[kc->t[i].id] = kc->t[i].len;
            sc->koff[kc->t[i].id] = kc->t[i].off;
        }
    }
    for (size_t id = 0; id < kc->n; id++) {
        if (str_add(ks, id, kc->keys.p + sc->koff[id], sc->klen[id]) < 0) {
            return -ENOMEM;
        }
    }
    w->nkeys = kc->n;
    w->nvals = 0;
    if (sc->side.vd_on && vdict_finish(&sc->side.vd, kc->n, &w->S[X_VALS], &w->nvals) < 0) {
        return -ENOMEM;
    }
    const uint32_t *vcode = sc->side.vd_on ? sc->side.vd.code : NULL;
    if (cap_u64(&sc->ak_first, &sc->cap_ak_first, d->nd + 1) < 0 ||
        cap_u64(&sc->ak_offs, &sc->cap_ak_offs, d->nd + 2) < 0) {
        return -ENOMEM;
    }
    uint64_t next = 0;
    for (uint64_t j = 0; j < w->rows && next < d->nd; j++) {
        if (d->codes[j] == next) {
            sc->ak_first[next++] = j;
        }
    }
    vbuf_reset(&sc->ak_data);
    if (vbuf_reserve(&d->data, AKEYS_SLACK) < 0) { /* akeys_encode reads past a list */
        return -ENOMEM;
    }
    sc->ak_offs[0] = 0;
    for (uint64_t c = 0; c < d->nd; c++) {
        uint64_t j = sc->ak_first[c];
        int rc = akeys_encode(&sc->ak_data, d->data.p + d->offs[c],
                              (uint32_t)(d->offs[c + 1] - d->offs[c]), (uint32_t)count[j],
                              kc->ap + kc->arow[j], kc->arow[j + 1] - kc->arow[j], sc->klen, vcode);
        if (rc < 0) {
            return rc;
        }
        sc->ak_offs[c + 1] = sc->ak_data.len;
    }
    /* The coded lists take the dictionary's place (both kept for the next seal). */
    struct vbuf tv = d->data;
    d->data = sc->ak_data;
    sc->ak_data = tv;
    uint64_t *to = d->offs;
    size_t tc = d->cap_offs;
    d->offs = sc->ak_offs;
    d->cap_offs = sc->cap_ak_offs;
    sc->ak_offs = to;
    sc->cap_ak_offs = tc;
    return 0;
}

static int build_and_write(int fd, const oblock *ob, uint64_t rows, const struct blk_meta *m,
                           const struct blk_wopts *o)
{
    enum signal sig = oblock_signal(ob);
    struct scratch *sc = scratch_get();
    struct tdir dir[N_TABLES];
    int rc;

    if (sc == NULL) {
        return -ENOMEM;
    }
    scratch_charge(sc, ob);
    struct wcols *w = &sc->w;
    struct wside *side = &sc->side;
    struct tbw *tb = &sc->tb;
    struct vbuf *foot = &sc->foot;
    struct hot *hot = &sc->hot;
    uint64_t *perm = sc->perm;
    rc = scratch_prepare(sc, sig, rows);
    if (rc < 0) {
        goto out;
    }
    perm = sc->perm;
    sort_rows(ob, rows, perm, sc->keys, sc->keys2);
    if (sig == SIG_METRICS) {
        rc = sidx_prepare(&side->streams, rows);
        if (rc < 0) {
            goto out;
        }
    }
    rc = sig == SIG_LOGS     ? fill_logs(ob, perm, w, side)
         : sig == SIG_TRACES ? fill_spans(ob, perm, w, side)
                             : fill_points(ob, perm, w, side);
    attrs_flush(side);
    bool sdet = false;
    if (rc == 0 && sig == SIG_TRACES) {
        rc = prefs_build(w);
    }
    bool sevk = false;
    if (rc == 0 && sig == SIG_TRACES && o != NULL && o->span_refs) {
        if (o->events_by_key) { /* first: sdet_build then codes the links alone */
            rc = sev_build(w, &w->sx[0], &sevk);
        }
        if (rc == 0) {
            rc = sdet_build(w, w->sx, sevk, &sdet);
        }
        sevk = sevk && sdet;                  /* bit 5 only beside bit 1 */
        for (int i = 0; i < 2 && sdet; i++) { /* the coded columns take their place */
            struct strb tv = w->S[i == 0 ? T_EVENTS : T_LINKS];
            w->S[i == 0 ? T_EVENTS : T_LINKS] = w->sx[i];
            w->sx[i] = tv;
        }
    }
    bool btmpl = false;
    if (rc == 0 && sig == SIG_LOGS && o != NULL && o->body_tmpl) {
        rc = btmpl_build(&w->bt, &w->S[L_BODY], w->I[L_BTYPE], rows, o->body_slots, &w->sx[0],
                         &btmpl);
        if (btmpl) { /* the coded bodies take their place (the blooms are built) */
            struct strb tv = w->S[L_BODY];
            w->S[L_BODY] = w->sx[0];
            w->sx[0] = tv;
        }
    }
    vbuf_reset(&w->pst);
    if (rc == 0 && sig == SIG_METRICS && o != NULL && o->point_starts) {
        rc = pstart_build(&w->ps, w->I[M_TIME], w->I[M_START], rows, &w->pst);
    }
    bool pstart = w->pst.len > 0;
    /* the table writer takes it for the start column, the root's second
     * entry (of this file's copy of the format's tables: the pointer is
     * compared) */
    w->pst_at = pstart ? &spec_of(BLK_VERSION, SIG_METRICS, 0)->e[1] : NULL;
    if (rc == 0) {
        side->kc.arow[rows] = side->kc.an;
        rc = hot_build(hot, &side->kc, w, !side->vd_on);
    }
    if (rc == 0) {
        rc = akeys_build(sc, sig);
    }
    vbuf_reset(&w->tdir);
    if (rc == 0 && o != NULL && o->attrs_by_key && sig != SIG_METRICS) {
        struct dictb *d = &w->D[X_ADICT];
        /* into the buffer of the lists before akeys_build coded them (not
         * read again): the same bytes by key take the coded lists' place */
        rc = akeys_by_key(d->data.p, d->data.len, w->nkeys, w->nvals, &sc->ak_data, &w->tdir);
        if (rc == 0) {
            struct vbuf tv = d->data;
            d->data = sc->ak_data;
            sc->ak_data = tv;
        }
    }
    bool tvals = false;
    if (rc == 0 && o != NULL && o->typed_vals && w->tdir.len > 0) {
        /* each key's stream in the tag that rebuilds it (META flag bit 4) */
        struct dictb *d = &w->D[X_ADICT];
        rc = akeys_typed(d->data.p, d->data.len, w->tdir.p, w->nkeys, &sc->ak_data, &sc->tv_dir,
                         &sc->tv_chk);
        if (rc == 0) {
            struct vbuf tv = d->data, td = w->tdir;
            d->data = sc->ak_data;
            sc->ak_data = tv;
            w->tdir = sc->tv_dir;
            sc->tv_dir = td;
            tvals = true;
        }
    }
    if (rc < 0) {
        goto out;
    }

    uint8_t hdr[HDR_SIZE] = {0};
    memcpy(hdr, hdr_magic, 8);
    wr32(hdr + 8, BLK_VERSION);
    wr32(hdr + 12, HDR_SIZE);
    hdr[16] = (uint8_t)sig;
    wr32(hdr + 20, m->shard);
    wr64(hdr + 24, rows);
    wr64(hdr + 32, m->seal_id);
    wr64(hdr + 40, m->wal_seq);
    wr32(hdr + 56, crc32_of(hdr, 56));
    rc = blkw_write_all(fd, hdr, HDR_SIZE);
    if (rc < 0) {
        goto out;
    }
    uint64_t off = HDR_SIZE;
    bool zcols = false; /* a table by column: META flag bit 6 */
    /* INT encodings 3 and 4 (META flag bit 7) in the tables of zstd log
     * and span blocks (a table plain_tables keeps plain too: tests) */
    bool iplanes = o != NULL && o->int_planes && o->codec == BLK_CODEC_ZSTD && sig != SIG_METRICS;
    for (int t = 0; t < N_TABLES; t++) {
        enum blk_codec codec = BLK_CODEC_PLAIN;
        if (o != NULL && o->codec == BLK_CODEC_ZSTD && (t > 0 || o->zstd_root) &&
            (o->plain_tables & (1u << t)) == 0) {
            codec = BLK_CODEC_ZSTD;
        }
        tb->no_var = codec == BLK_CODEC_ZSTD; /* zstd packs fixed widths better */
        tb->by_col = codec == BLK_CODEC_ZSTD && o->zstd_cols;
        tb->var_cols =
            t == 0 && o != NULL && o->var_seqs ? seq_cols(spec_of(BLK_VERSION, sig, 0)) : 0;
        tb->planes = iplanes;
        tb->dplane_cols = t == 0 ? 1 : 0; /* the time (logs) or start (spans) column */
        if (t == 1 && !side->vd_on) {     /* format 5's logs and spans: found at load */
            blkw_emit_table(tb, spec_of(BLK_VERSION, sig, t), w, hot->pos, hot->n);
        } else {
            blkw_emit_table(tb, spec_of(BLK_VERSION, sig, t), w, NULL, 0);
        }
        if (t == 1 && tb->by_col && w->tdir.len > 0) {
            attrs_cuts(&tb->cut, spec_of(BLK_VERSION, sig, t), w, tvals);
        }
        rc = blkw_write_table(fd, &off, tb, codec, o ? o->zstd_level : 0, &dir[t]);
        if (rc < 0) {
            goto out;
        }
        dir[t].kind = (uint8_t)(t + 1);
        zcols |= dir[t].codec == BLK_CODEC_ZSTD_COLS;
    }

    size_t at;
    uint32_t nsec = 8;
    rc = vbuf_put_u32(foot, nsec) | vbuf_put_u32(foot, 0);
    rc |= sec_begin(foot, SEC_META, &at);
    rc |= vbuf_put_u8(foot, (uint8_t)sig);
    rc |= vbuf_put_u8(foot, 0) | vbuf_put_u8(foot, 0) | vbuf_put_u8(foot, 0);
    rc |= vbuf_put_u32(foot, m->shard);
    rc |= vbuf_put_u64(foot, rows);
    rc |= vbuf_put_u64(foot, m->wal_seq);
    rc |= vbuf_put_u64(foot, m->seal_id);
    /* v6: the index from the rows (the list dictionary holds each distinct
     * list once: dict_add compares the bytes) */
    bool sderived = sig == SIG_METRICS && o != NULL && o->streams_derived;
    bool zdicts = o != NULL && o->dicts_zstd;
    /* sorted by time, (v6) span detail coded, log bodies by template or
     * streams from the rows, dictionaries in one zstd frame, value streams
     * typed, (v6) span events by key, tables by column, INT byte planes,
     * log bodies by slot, point starts by reference */
    rc |= vbuf_put_u64(foot, 1 | (sdet ? 2 : 0) | (btmpl || sderived ? 4 : 0) | (zdicts ? 8 : 0) |
                                 (tvals ? 16 : 0) | (sevk ? 32 : 0) | (zcols ? 64 : 0) |
                                 (iplanes ? 128 : 0) | (btmpl && o->body_slots ? 256 : 0) |
                                 (pstart ? 512 : 0));
    if (rc != 0) {
        rc = -ENOMEM;
        goto out;
    }
    sec_end(foot, at);
    rc = sec_begin(foot, SEC_TABLES, &at) | vbuf_put_u32(foot, N_TABLES) | vbuf_put_u32(foot, 0);
    for (int t = 0; t < N_TABLES; t++) {
        rc |= vbuf_put_u8(foot, dir[t].kind);
        rc |= vbuf_put_u8(foot, dir[t].codec);
        rc |= vbuf_put_u8(foot, 0) | vbuf_put_u8(foot, 0);
        rc |= vbuf_put_u32(foot, dir[t].crc);
        rc |= vbuf_put_u64(foot, dir[t].off);
        rc |= vbuf_put_u64(foot, dir[t].len);
        rc |= vbuf_put_u64(foot, dir[t].raw);
    }
    if (rc != 0) {
        rc = -ENOMEM;
        goto out;
    }
    sec_end(foot, at);
    if (!side->zhave[ZONE_TIME]) {
        nsec--; /* no zone section for an empty block */
    }
    rc = sec_zones(foot, side);
    if (rc == 0) {
        /* before the blooms: feeds the resource bloom */
        rc = zdicts ? sec_zdicts(foot, ob, side, o->zstd_level ? o->zstd_level : 3)
                    : sec_dicts(foot, ob, side);
        nsec -= zdicts ? 2 : 0; /* section 12 for 5, 6 and 7 */
    }
    if (rc == 0) {
        rc = sec_blooms(foot, side);
    }
    if (rc == 0 && sig == SIG_LOGS) {
        nsec++;
        rc = sec_grams(foot, side);
    }
    if (rc == 0) {
        rc = sec_hotkeys(foot, hot);
    }
    if (rc == 0 && sig == SIG_METRICS && !sderived) {
        nsec++;
        rc = sec_begin(foot, SEC_STREAMS, &at);
        if (rc == 0) {
            /* zstd with the tables (cold blocks: compaction asks for it) */
            int zl =
                o != NULL && o->codec == BLK_CODEC_ZSTD ? (o->zstd_level ? o->zstd_level : 3) : 0;
            rc = sidx_put(&side->streams, foot, BLK_VERSION, zl, o != NULL && o->streams_by_row);
        }
        if (rc == 0) {
            sec_end(foot, at);
        }
    }
    if (rc == 0 && o != NULL && o->n_sources > 0) {
        nsec++;
        rc = sec_begin(foot, SEC_SOURCES, &at) | vbuf_put_u32(foot, o->n_sources) |
             vbuf_put_u32(foot, 0);
        for (uint32_t i = 0; i < o->n_sources && rc == 0; i++) {
            rc = vbuf_put_u32(foot, o->sources[i].shard) | vbuf_put_u32(foot, 0) |
                 vbuf_put_u64(foot, o->sources[i].seal_id) |
                 vbuf_put_u64(foot, o->sources[i].wal_seq);
        }
        rc = rc != 0 ? -ENOMEM : 0;
        if (rc == 0) {
            sec_end(foot, at);
        }
    }
    if (rc == 0) {
        rc = pad8(foot);
    }
    if (rc < 0) {
        goto out;
    }
    wr32(foot->p, nsec);

    uint8_t trl[TRL_SIZE] = {0};
    wr64(trl, off);
    wr64(trl + 8, foot->len);
    wr32(trl + 16, crc32_of(foot->p, foot->len));
    wr32(trl + 20, BLK_VERSION);
    wr32(trl + 24, crc32_of(trl, 24));
    memcpy(trl + 32, trl_magic, 8);
    rc = blkw_write_all(fd, foot->p, foot->len);
    if (rc == 0) {
        rc = blkw_write_all(fd, trl, TRL_SIZE);
    }

out:
    scratch_put(sc, oblock_bytes(ob));
    return rc;
}

void blk_scratch_keep(size_t max_block_bytes)
{
    pthread_mutex_lock(&scratch_lock);
    scratch_keep_max = max_block_bytes;
    pthread_mutex_unlock(&scratch_lock);
}

void blk_scratch_release(void)
{
    pthread_mutex_lock(&scratch_lock);
    unsigned n = scratch_n;
    struct scratch *kept[SCRATCH_KEEP];
    memcpy(kept, scratch_pool, sizeof(kept));
    scratch_n = 0;
    pthread_mutex_unlock(&scratch_lock);
    for (unsigned i = 0; i < n; i++) {
        scratch_free(kept[i]);
    }
}

int blk_write_ex(const char *dir, const struct oblock *ob, uint64_t rows, const struct blk_meta *m,
                 const struct blk_wopts *o, char *path, size_t cap)
{
    char tmp[4096];
    if (rows > oblock_rows(ob)) {
        return -EINVAL;
    }
    int n = snprintf(path, cap, "%s/s%04u-%016llx.blk", dir, (unsigned)m->shard,
                     (unsigned long long)m->seal_id);
    if (n < 0 || (size_t)n >= cap ||
        (size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp)) {
        return -ENAMETOOLONG;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    blkw_writebehind_begin(fd);
    int rc = build_and_write(fd, ob, rows, m, o);
    if (rc == 0 && blkw_fsync(fd) < 0) {
        rc = -errno;
    }
    if (close(fd) < 0 && rc == 0) {
        rc = -errno;
    }
    if (rc == 0 && rename(tmp, path) < 0) {
        rc = -errno;
    }
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return -errno;
    }
    rc = fsync(dfd) < 0 ? -errno : 0;
    close(dfd);
    return rc;
}

int blk_write(const char *dir, const struct oblock *ob, uint64_t rows, const struct blk_meta *m,
              char *path, size_t cap)
{
    return blk_write_ex(dir, ob, rows, m, NULL, path, cap);
}
