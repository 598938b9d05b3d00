/*
 * block.c - sealed block files: writer, reader with lazy table verification
 * (see block.h for the contract; DESIGN.md "Blocks" for the picture). The
 * file format, constants and shared structs are in block_int.h.
 */
#include "storage/block_int.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <libdeflate.h>
#define XXH_INLINE_ALL /* keys and dictionary strings are short: the hash inlines */
#include <xxhash.h>
#include <zstd.h>

#include "storage/bloom.h"
#include "storage/vcache.h"

/* ---- process-wide counters ---- */

static _Atomic uint64_t st_verified, st_hashed, st_failures, st_quarantined;

void blk_get_stats(struct blk_stats *out)
{
    struct vcache_stats vs;
    vcache_get_stats(&vs);
    out->tables_verified = atomic_load(&st_verified);
    out->bytes_hashed = atomic_load(&st_hashed);
    out->verify_failures = atomic_load(&st_failures);
    out->cache_hits = vs.hits;
    out->cache_misses = vs.misses;
    out->cache_clears = vs.clears;
    out->quarantined = atomic_load(&st_quarantined);
}

/* |table|: a table (counted as verified) rather than the footer. */
static uint32_t hash_counted(const uint8_t *p, size_t n, bool table)
{
    if (table) {
        atomic_fetch_add(&st_verified, 1);
    }
    atomic_fetch_add(&st_hashed, n);
    return crc32_of(p, n);
}

/* =====================================================================
 * Writer
 * ===================================================================== */

/* A dictionary column being built: codes per row, distinct strings once. */
struct dictb {
    uint64_t *codes;
    size_t cap_codes;
    uint64_t *offs; /* nd + 1 */
    size_t nd, cap_offs;
    struct vbuf data;
    uint32_t *ht; /* code + 1, 0 = empty */
    size_t ht_cap;
};

/* A string column being built. */
struct strb {
    uint64_t *offs; /* rows + 1 */
    size_t cap_offs;
    struct vbuf data;
};

/* Column buffers; kept across seals (scratch below), so capacities grow to
 * the largest block a sealer saw and a seal touches no fresh pages. */
struct wcols {
    uint64_t rows;
    uint64_t *I[MAX_I];
    size_t cap_I[MAX_I];
    struct strb S[MAX_S];
    struct dictb D[MAX_D];
    struct vbuf R[MAX_R];
};

static int dict_add(struct dictb *d, uint64_t row, const char *p, size_t n)
{
    if ((d->nd + 1) * 2 > d->ht_cap) {
        size_t ncap = d->ht_cap ? d->ht_cap * 2 : 256;
        uint32_t *nh = calloc(ncap, sizeof(*nh));
        if (nh == NULL) {
            return -ENOMEM;
        }
        for (size_t c = 0; c < d->nd; c++) {
            const uint8_t *s = d->data.p + d->offs[c];
            uint64_t h = XXH3_64bits(s, d->offs[c + 1] - d->offs[c]);
            size_t i = (size_t)h & (ncap - 1);
            while (nh[i] != 0) {
                i = (i + 1) & (ncap - 1);
            }
            nh[i] = (uint32_t)c + 1;
        }
        free(d->ht);
        d->ht = nh;
        d->ht_cap = ncap;
    }
    uint64_t h = XXH3_64bits(n ? p : empty, n);
    size_t i = (size_t)h & (d->ht_cap - 1);
    while (d->ht[i] != 0) {
        size_t c = d->ht[i] - 1;
        if (d->offs[c + 1] - d->offs[c] == n &&
            (n == 0 || memcmp(d->data.p + d->offs[c], p, n) == 0)) {
            d->codes[row] = c;
            return 0;
        }
        i = (i + 1) & (d->ht_cap - 1);
    }
    if (d->nd + 2 > d->cap_offs) {
        size_t ncap = d->cap_offs ? d->cap_offs * 2 : 64;
        uint64_t *no = realloc(d->offs, ncap * sizeof(*no));
        if (no == NULL) {
            return -ENOMEM;
        }
        d->offs = no;
        d->cap_offs = ncap;
    }
    if (vbuf_put(&d->data, n ? p : empty, n) < 0) {
        return -ENOMEM;
    }
    d->offs[0] = 0;
    d->offs[d->nd + 1] = d->data.len;
    d->ht[i] = (uint32_t)d->nd + 1;
    d->codes[row] = d->nd++;
    return 0;
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
    }
}

/* |*p| holds at least |n| u64 (contents not kept). */
static int cap_u64(uint64_t **p, size_t *cap, size_t n)
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
        const struct spec *sp = &specs[sig - 1][t];
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
                if (d->ht != NULL) {
                    memset(d->ht, 0, d->ht_cap * sizeof(*d->ht));
                }
                vbuf_reset(&d->data);
                break;
            }
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

/*
 * A table being serialized as pieces rather than one buffer: the directory
 * and each INT header live here, INT values are narrowed in place in their
 * column array, and string, dictionary and RAW data are the column buffers
 * themselves, so a plain table goes to the file with writev and no copy.
 * Each column starts 8-aligned (a zero piece pads). The column arrays are
 * consumed: an INT column no longer holds its values after emit_int.
 */
#define TBW_PIECES (2 + 3 * MAX_PHYS)
struct tbw {
    uint8_t dir[8 + 16 * MAX_PHYS];
    uint8_t ihdr[MAX_PHYS][INT_HDR];
    struct iovec iov[TBW_PIECES];
    unsigned niov, ncols, at;
    size_t len;      /* raw table bytes so far */
    struct vbuf out; /* the table in one buffer, for a zstd table only */
};

static const uint8_t zeros8[8];

static void tbw_piece(struct tbw *t, const void *p, size_t n)
{
    assert(t->niov < TBW_PIECES);
    t->iov[t->niov++] = (struct iovec){(void *)p, n};
    t->len += n;
}

static void tbw_begin(struct tbw *t, unsigned ncols)
{
    assert(ncols <= MAX_PHYS);
    t->ncols = ncols;
    t->at = 0;
    t->niov = 0;
    t->len = 0;
    memset(t->dir, 0, 8 + 16 * (size_t)ncols);
    wr32(t->dir, ncols);
    tbw_piece(t, t->dir, 8 + 16 * (size_t)ncols);
}

static size_t tbw_col_start(struct tbw *t)
{
    if (t->len & 7) {
        tbw_piece(t, zeros8, 8 - (t->len & 7));
    }
    return t->len;
}

static void tbw_col_end(struct tbw *t, size_t start)
{
    uint8_t *d = t->dir + 8 + 16 * (size_t)t->at;
    wr64(d, start);
    wr64(d + 8, t->len - start);
    t->at++;
}

/* |v| (n values) is narrowed in place to the column's width. */
static void emit_int(struct tbw *t, uint64_t *v, uint64_t n)
{
    size_t start = tbw_col_start(t);
    uint64_t mn = n ? UINT64_MAX : 0, mx = 0;
    for (uint64_t i = 0; i < n; i++) {
        mn = v[i] < mn ? v[i] : mn;
        mx = v[i] > mx ? v[i] : mx;
    }
    uint64_t r = mx - mn;
    unsigned w = r == 0 ? 0 : r <= 0xff ? 1 : r <= 0xffff ? 2 : r <= 0xffffffffu ? 4 : 8;
    uint8_t *h = t->ihdr[t->at];
    memset(h, 0, INT_HDR);
    wr64(h, n);
    wr64(h + 8, mn);
    h[16] = (uint8_t)w;
    tbw_piece(t, h, INT_HDR);
    /* Value i is read before bytes [i*w, (i+1)*w) are written, and those
     * bytes lie below value i + 1: narrowing in place is safe. */
    uint8_t *p = (uint8_t *)v;
    switch (w) {
    case 1:
        for (uint64_t i = 0; i < n; i++) {
            p[i] = (uint8_t)(v[i] - mn);
        }
        break;
    case 2:
        for (uint64_t i = 0; i < n; i++) {
            uint16_t x = (uint16_t)(v[i] - mn);
            memcpy(p + 2 * i, &x, 2);
        }
        break;
    case 4:
        for (uint64_t i = 0; i < n; i++) {
            wr32(p + 4 * i, (uint32_t)(v[i] - mn));
        }
        break;
    case 8:
        for (uint64_t i = 0; i < n; i++) {
            wr64(p + 8 * i, v[i] - mn);
        }
        break;
    default:
        break;
    }
    if (n * w > 0) {
        tbw_piece(t, p, n * w);
    }
    tbw_col_end(t, start);
}

static void emit_raw(struct tbw *t, const void *p, size_t n)
{
    size_t start = tbw_col_start(t);
    if (n > 0) {
        tbw_piece(t, p, n);
    }
    tbw_col_end(t, start);
}

/* The table of |sp|, then |n_extra| more INT columns of |rows| values. */
static void emit_table(struct tbw *t, const struct spec *sp, struct wcols *w, uint64_t **extra,
                       unsigned n_extra)
{
    tbw_begin(t, phys_cols(sp) + n_extra);
    for (unsigned i = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        switch (e->type) {
        case 'I':
            emit_int(t, w->I[e->idx], w->rows);
            break;
        case 'S':
            emit_int(t, w->S[e->idx].offs, w->rows + 1);
            emit_raw(t, w->S[e->idx].data.p, w->S[e->idx].data.len);
            break;
        case 'D': {
            struct dictb *d = &w->D[e->idx];
            emit_int(t, d->codes, w->rows);
            if (d->nd) {
                emit_int(t, d->offs, d->nd + 1);
            } else {
                uint64_t zero = 0; /* width 0: no piece points at it */
                emit_int(t, &zero, 1);
            }
            emit_raw(t, d->data.p, d->data.len);
            break;
        }
        case 'R':
            emit_raw(t, w->R[e->idx].p, w->R[e->idx].len);
            break;
        }
    }
    for (unsigned i = 0; i < n_extra; i++) {
        emit_int(t, extra[i], w->rows);
    }
}

/* Record attribute keys counted while the rows are walked (once per row). */
struct kc_ent {
    uint64_t h;
    uint32_t off, len;
    uint64_t count, last_row;
    uint32_t id; /* order of first sight: stable across rehashes */
};

/* One attribute of a row as it was walked: its key's id and where its
 * value starts in the row's list, so hot_build need not walk the lists again. */
struct kc_pos {
    uint32_t id, off;
};

struct keycount {
    struct kc_ent *t;
    size_t cap, n;
    struct vbuf keys;
    struct kc_pos *ap; /* every counted attribute, rows in order */
    size_t an, acap;
    uint64_t *arow; /* rows + 1: row j's attributes are ap[arow[j], arow[j + 1]) */
};

/* Counts key |k| in |row|; its id goes to |*id| (UINT32_MAX: not counted). */
static int kc_add(struct keycount *kc, uint64_t row, const char *k, size_t kn, uint32_t *id)
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
            }
        }
        free(kc->t);
        kc->t = nt;
        kc->cap = ncap;
    }
find_only:;
    uint64_t h = XXH3_64bits(kn ? k : empty, kn);
    size_t i = (size_t)h & (kc->cap - 1);
    while (kc->t[i].count != 0) {
        struct kc_ent *e = &kc->t[i];
        if (e->h == h && e->len == kn && memcmp(kc->keys.p + e->off, k, kn) == 0) {
            if (e->last_row != row) {
                e->count++;
                e->last_row = row;
            }
            *id = e->id;
            return 0;
        }
        i = (i + 1) & (kc->cap - 1);
    }
    if (kc->n >= KC_MAX || (kc->n + 1) * 2 > kc->cap) {
        return 0; /* too many distinct keys: the rest cannot be hot anyway */
    }
    size_t off = kc->keys.len;
    if (kn > 0 && vbuf_put(&kc->keys, k, kn) < 0) {
        return -ENOMEM;
    }
    kc->t[i] = (struct kc_ent){h, (uint32_t)off, (uint32_t)kn, 1, row, (uint32_t)kc->n};
    *id = (uint32_t)kc->n++;
    return 0;
}

/* Blooms and zones gathered while the rows are walked. */
struct wside {
    struct keycount kc;
    struct bloom_acc set[4]; /* by bloom kind - 1 */
    bool incomplete[4];
    bool present[4];
    uint64_t zmin[ZONE_MAX + 1], zmax[ZONE_MAX + 1];
    bool zsigned[ZONE_MAX + 1];
    bool zhave[ZONE_MAX + 1];
};

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

/* key=value into the bloom for a string value, and for each string element
 * of an array value (a filter on an array attribute matches an element). */
static int bloom_kv(struct bloom_acc *set, const char *k, size_t kn, const struct val *v,
                    uint64_t seed)
{
    if (v->type == VAL_STR) {
        return bloom_acc_add(set, bloom_hash_kv(k, kn, v->s, v->n, seed));
    }
    if (v->type == VAL_ARRAY) {
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            struct val e;
            if (val_rd_value(&r, &e) < 0) {
                break;
            }
            if (e.type == VAL_STR && bloom_acc_add(set, bloom_hash_kv(k, kn, e.s, e.n, seed)) < 0) {
                return -ENOMEM;
            }
        }
    }
    return 0;
}

/* A record's attributes: keys counted, string values into the bloom. */
static int record_attrs(struct wside *s, uint64_t row, struct oattrs a)
{
    uint64_t seed = bloom_seed(BLK_BLOOM_ATTRS);
    struct keycount *kc = &s->kc;
    struct val_rd r = {a.p, a.p + a.len};
    kc->arow[row] = kc->an;
    for (uint32_t i = 0; i < a.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        uint32_t id;
        if (val_rd_str(&r, &k, &kn) < 0) {
            return 0; /* the open block checked its blobs; nothing more to index */
        }
        uint32_t off = (uint32_t)(r.p - a.p) + 1;
        if (val_rd_value(&r, &v) < 0) {
            return 0;
        }
        if (kc_add(kc, row, k, kn, &id) < 0) {
            return -ENOMEM;
        }
        if (id != UINT32_MAX) {
            if (kc->an == kc->acap) {
                size_t ncap = kc->acap ? kc->acap * 2 : 4096;
                struct kc_pos *np = realloc(kc->ap, ncap * sizeof(*np));
                if (np == NULL) {
                    return -ENOMEM;
                }
                kc->ap = np;
                kc->acap = ncap;
            }
            kc->ap[kc->an++] = (struct kc_pos){id, off};
        }
        if (bloom_kv(&s->set[BLK_BLOOM_ATTRS - 1], k, kn, &v, seed) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
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
        if (bloom_kv(set, k, kn, &v, seed) < 0) {
            return -ENOMEM;
        }
    }
    return 0;
}


struct sortkey {
    uint64_t t;
    uint64_t i;
};

static uint64_t row_time(const oblock *ob, enum signal sig, uint64_t i)
{
    struct log_view lv;
    struct span_view sv;
    struct point_view pv;
    switch (sig) {
    case SIG_LOGS:
        oblock_log(ob, i, &lv);
        return lv.time_ns ? lv.time_ns : lv.observed_ns;
    case SIG_TRACES:
        oblock_span(ob, i, &sv);
        return sv.start_ns;
    default:
        oblock_point(ob, i, &pv);
        return pv.time_ns;
    }
}

#define SORT_DIGIT 11
#define SORT_BUCKETS (1u << SORT_DIGIT)

/*
 * Rows in time order (stable: ties in append order) into |perm|, using |k|
 * and |tmp| (all |rows| long). Out of order rows are sorted by LSD radix on
 * the time less the block's earliest, SORT_DIGIT bits a pass, only over the
 * bits the block's time span uses, and a pass whose digit is the same in
 * every row is skipped.
 */
static void sort_rows(const oblock *ob, enum signal sig, uint64_t rows, uint64_t *perm,
                      struct sortkey *k, struct sortkey *tmp)
{
    bool sorted = true;
    uint64_t prev = 0, mn = UINT64_MAX, mx = 0;
    for (uint64_t i = 0; i < rows; i++) {
        uint64_t t = row_time(ob, sig, i);
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

static int fill_logs(const oblock *ob, const uint64_t *perm, struct wcols *w, struct wside *s)
{
    uint64_t seed_tr = bloom_seed(BLK_BLOOM_TRACE_IDS);
    s->present[BLK_BLOOM_TOKENS - 1] = s->present[BLK_BLOOM_TRACE_IDS - 1] = true;
    s->present[BLK_BLOOM_ATTRS - 1] = true;
    for (uint64_t j = 0; j < w->rows; j++) {
        struct log_view v;
        oblock_log(ob, perm[j], &v);
        uint64_t t = v.time_ns ? v.time_ns : v.observed_ns;
        w->I[L_TIME][j] = t;
        w->I[L_SCOPE][j] = v.scope_id;
        w->I[L_SEV][j] = zz(v.severity_number);
        w->I[L_BTYPE][j] = (uint64_t)v.body_type;
        w->I[L_IDF][j] =
            (v.has_trace_id ? 1u : 0) | (v.has_span_id ? 2u : 0) | (v.time_ns == 0 ? 4u : 0);
        w->I[L_ACOUNT][j] = v.attrs.count;
        w->I[L_OBS][j] = zz((int64_t)(v.observed_ns - t));
        w->I[L_DROP][j] = v.dropped_attrs;
        w->I[L_FLAGS][j] = v.flags;
        zone_add(s, ZONE_TIME, t, false);
        zone_add(s, ZONE_SEVERITY, (uint64_t)(int64_t)v.severity_number, true);
        int rc = dict_add(&w->D[L_SEVTEXT], j, v.severity_text.p, v.severity_text.len);
        if (rc == 0) {
            rc = dict_add(&w->D[L_EVNAME], j, v.event_name.p, v.event_name.len);
        }
        if (rc == 0) {
            rc = v.body_type == VAL_STR ? str_add(&w->S[L_BODY], j, v.body_str.p, v.body_str.len)
                                        : str_add(&w->S[L_BODY], j, v.body_val.p, v.body_val.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[L_ATTRS], j, v.attrs.p, v.attrs.len);
        }
        memcpy(w->R[L_TRACE].p + 16 * j, v.trace_id, 16);
        memcpy(w->R[L_SPAN].p + 8 * j, v.span_id, 8);
        if (rc == 0 && v.has_trace_id) {
            rc = bloom_acc_add(&s->set[BLK_BLOOM_TRACE_IDS - 1],
                               bloom_hash_bytes(v.trace_id, 16, seed_tr));
        }
        if (rc == 0 && v.body_type == VAL_STR) {
            rc = bloom_acc_tokens(&s->set[BLK_BLOOM_TOKENS - 1], v.body_str.p, v.body_str.len,
                                  bloom_seed(BLK_BLOOM_TOKENS));
        } else if (v.body_type != VAL_EMPTY) {
            /* A structured body renders as JSON: its tokens are not indexed. */
            s->incomplete[BLK_BLOOM_TOKENS - 1] = true;
        }
        if (rc == 0) {
            rc = record_attrs(s, j, v.attrs);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static int fill_spans(const oblock *ob, const uint64_t *perm, struct wcols *w, struct wside *s)
{
    uint64_t seed_tr = bloom_seed(BLK_BLOOM_TRACE_IDS);
    s->present[BLK_BLOOM_TRACE_IDS - 1] = s->present[BLK_BLOOM_ATTRS - 1] = true;
    for (uint64_t j = 0; j < w->rows; j++) {
        struct span_view v;
        oblock_span(ob, perm[j], &v);
        int64_t dur = (int64_t)(v.end_ns - v.start_ns);
        w->I[T_START][j] = v.start_ns;
        w->I[T_DUR][j] = zz(dur);
        w->I[T_SCOPE][j] = v.scope_id;
        w->I[T_HASPAR][j] = v.has_parent;
        w->I[T_KIND][j] = zz(v.kind);
        w->I[T_STATUS][j] = zz(v.status_code);
        w->I[T_ACOUNT][j] = v.attrs.count;
        w->I[T_FLAGS][j] = v.flags;
        w->I[T_DROP][j] = v.dropped_attrs;
        w->I[T_NEV][j] = v.n_events;
        w->I[T_DROPEV][j] = v.dropped_events;
        w->I[T_NLINK][j] = v.n_links;
        w->I[T_DROPLINK][j] = v.dropped_links;
        zone_add(s, ZONE_TIME, v.start_ns, false);
        zone_add(s, ZONE_DURATION, (uint64_t)dur, true);
        int rc = dict_add(&w->D[T_NAME], j, v.name.p, v.name.len);
        if (rc == 0) {
            rc = str_add(&w->S[T_STATMSG], j, v.status_message.p, v.status_message.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[T_ATTRS], j, v.attrs.p, v.attrs.len);
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
        memcpy(w->R[T_TRACE].p + 16 * j, v.trace_id, 16);
        memcpy(w->R[T_SPAN].p + 8 * j, v.span_id, 8);
        memcpy(w->R[T_PARENT].p + 8 * j, v.parent_span_id, 8);
        if (rc == 0) {
            rc = bloom_acc_add(&s->set[BLK_BLOOM_TRACE_IDS - 1],
                               bloom_hash_bytes(v.trace_id, 16, seed_tr));
        }
        if (rc == 0) {
            rc = record_attrs(s, j, v.attrs);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

static int fill_points(const oblock *ob, const uint64_t *perm, struct wcols *w, struct wside *s)
{
    s->present[BLK_BLOOM_ATTRS - 1] = true;
    for (uint64_t j = 0; j < w->rows; j++) {
        struct point_view v;
        oblock_point(ob, perm[j], &v);
        w->I[M_TIME][j] = v.time_ns;
        w->I[M_START][j] = zz((int64_t)(v.time_ns - v.start_ns));
        w->I[M_METRIC][j] = v.metric_id;
        w->I[M_VTYPE][j] = (uint64_t)v.value_type;
        w->I[M_COUNT][j] = v.count;
        w->I[M_HAS][j] = (v.has_sum ? 1u : 0) | (v.has_min ? 2u : 0) | (v.has_max ? 4u : 0);
        w->I[M_ACOUNT][j] = v.attrs.count;
        w->I[M_FLAGS][j] = v.flags;
        w->I[M_NEX][j] = v.n_exemplars;
        zone_add(s, ZONE_TIME, v.time_ns, false);
        memcpy(w->R[M_VALUE].p + 8 * j, &v.value, 8);
        memcpy(w->R[M_SUM].p + 8 * j, &v.sum, 8);
        memcpy(w->R[M_MIN].p + 8 * j, &v.min, 8);
        memcpy(w->R[M_MAX].p + 8 * j, &v.max, 8);
        int rc = str_add(&w->S[M_ATTRS], j, v.attrs.p, v.attrs.len);
        if (rc == 0) {
            rc = str_add(&w->S[M_DETAIL], j, v.detail.p, v.detail.len);
        }
        if (rc == 0) {
            rc = str_add(&w->S[M_EXEMPLARS], j, v.exemplars.p, v.exemplars.len);
        }
        if (rc == 0) {
            rc = record_attrs(s, j, v.attrs);
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
 * that value alone instead of walking the list.
 */
static int hot_build(struct hot *hot, struct keycount *kc, struct wcols *w)
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
        if (cap_u64(&hot->pos[hot->n], &hot->cap[hot->n], w->rows) < 0) {
            return -ENOMEM;
        }
        memset(hot->pos[hot->n], 0, w->rows * sizeof(uint64_t));
        hot->n++;
    }
    /* Key id -> hot slot; the rows' attributes as record_attrs saw them. */
    int8_t *slot = hot->slot;
    memset(slot, -1, sizeof(hot->slot));
    for (unsigned h = 0; h < hot->n; h++) {
        slot[hot->id[h]] = (int8_t)h;
    }
    const struct kc_pos *ap = kc->ap;
    for (uint64_t j = 0; j < w->rows; j++) {
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

/* ---- file output ---- */

static int write_all(int fd, const void *p, size_t n)
{
    const uint8_t *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Writes all of iov[0, n) (consumed: the entries are advanced). */
static int writev_all(int fd, struct iovec *iov, unsigned n)
{
    while (n > 0) {
        ssize_t w = writev(fd, iov, n > IOV_MAX ? IOV_MAX : (int)n);
        if (w < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -errno;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            if (w == 0 && iov->iov_len > 0) {
                return -EIO;
            }
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

/* Writes table |t| (compressing it if asked) at |*off|; pads to 8. A plain
 * table is written from its pieces, its CRC chained over them. */
static int write_table(int fd, uint64_t *off, struct tbw *t, enum blk_codec codec, int level,
                       struct tdir *d)
{
    d->codec = BLK_CODEC_PLAIN;
    d->raw = t->len;
    d->off = *off;
    if (codec == BLK_CODEC_ZSTD && t->len > 0 && t->len <= ZSTD_RAW_MAX) {
        vbuf_reset(&t->out);
        if (vbuf_reserve(&t->out, t->len) < 0) {
            return -ENOMEM;
        }
        for (unsigned i = 0; i < t->niov; i++) {
            memcpy(t->out.p + t->out.len, t->iov[i].iov_base, t->iov[i].iov_len);
            t->out.len += t->iov[i].iov_len;
        }
        size_t cap = ZSTD_compressBound(t->len);
        void *z = malloc(cap);
        if (z == NULL) {
            return -ENOMEM;
        }
        size_t zn = ZSTD_compress(z, cap, t->out.p, t->out.len, level ? level : 3);
        if (ZSTD_isError(zn)) {
            free(z);
            return -EIO;
        }
        d->codec = BLK_CODEC_ZSTD;
        d->len = zn;
        d->crc = crc32_of(z, zn);
        size_t padn = (8 - (zn & 7)) & 7;
        struct iovec v[2] = {{z, zn}, {(void *)zeros8, padn}};
        int rc = writev_all(fd, v, 2);
        free(z);
        *off += zn + padn;
        return rc;
    }
    uint32_t crc = 0;
    for (unsigned i = 0; i < t->niov; i++) {
        crc = libdeflate_crc32(crc, t->iov[i].iov_base, t->iov[i].iov_len);
    }
    d->len = t->len;
    d->crc = crc;
    if (t->len & 7) {
        assert(t->niov < TBW_PIECES);
        t->iov[t->niov++] = (struct iovec){(void *)zeros8, 8 - (t->len & 7)};
    }
    *off += (t->len + 7) & ~(uint64_t)7;
    return writev_all(fd, t->iov, t->niov);
}

/*
 * A seal's working memory, kept for the next seal: a block's columns, table
 * and footer buffers are tens of MiB, and fresh ones cost a page fault per
 * 4 KiB (zeroed by the kernel) every seal. Up to SCRATCH_KEEP sets are kept
 * (one per concurrent sealer); each grows to the largest block it served.
 */
struct scratch {
    struct wcols w;
    struct wside side;
    struct tbw tb;
    struct vbuf foot;
    struct hot hot;
    uint64_t *perm;
    struct sortkey *keys, *keys2;
    size_t cap_rows;
};

#define SCRATCH_KEEP 2 /* the sealer runs two threads (storage/sealer.c) */
static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct scratch *scratch_pool[SCRATCH_KEEP];
static unsigned scratch_n;

static void scratch_free(struct scratch *sc)
{
    wcols_free(&sc->w);
    for (int k = 0; k < 4; k++) {
        bloom_acc_fini(&sc->side.set[k]);
    }
    free(sc->side.kc.t);
    free(sc->side.kc.ap);
    free(sc->side.kc.arow);
    vbuf_fini(&sc->side.kc.keys);
    hot_free(&sc->hot);
    vbuf_fini(&sc->tb.out);
    vbuf_fini(&sc->foot);
    free(sc->perm);
    free(sc->keys);
    free(sc->keys2);
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
        }
    }
    return sc;
}

static void scratch_put(struct scratch *sc)
{
    pthread_mutex_lock(&scratch_lock);
    if (scratch_n < SCRATCH_KEEP) {
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
    s->kc.n = 0;
    s->kc.an = 0;
    vbuf_reset(&s->kc.keys);
    for (int k = 0; k < 4; k++) {
        bloom_acc_reset(&s->set[k]);
        s->incomplete[k] = s->present[k] = false;
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
    sort_rows(ob, sig, rows, perm, sc->keys, sc->keys2);
    rc = sig == SIG_LOGS     ? fill_logs(ob, perm, w, side)
         : sig == SIG_TRACES ? fill_spans(ob, perm, w, side)
                             : fill_points(ob, perm, w, side);
    if (rc == 0) {
        side->kc.arow[rows] = side->kc.an;
        rc = hot_build(hot, &side->kc, w);
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
    rc = write_all(fd, hdr, HDR_SIZE);
    if (rc < 0) {
        goto out;
    }
    uint64_t off = HDR_SIZE;
    for (int t = 0; t < N_TABLES; t++) {
        if (t == 1) {
            emit_table(tb, &specs[sig - 1][t], w, hot->pos, hot->n);
        } else {
            emit_table(tb, &specs[sig - 1][t], w, NULL, 0);
        }
        enum blk_codec codec = BLK_CODEC_PLAIN;
        if (o != NULL && o->codec == BLK_CODEC_ZSTD && (t > 0 || o->zstd_root)) {
            codec = BLK_CODEC_ZSTD;
        }
        rc = write_table(fd, &off, tb, codec, o ? o->zstd_level : 0, &dir[t]);
        if (rc < 0) {
            goto out;
        }
        dir[t].kind = (uint8_t)(t + 1);
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
    rc |= vbuf_put_u64(foot, 1); /* sorted by time */
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
        rc = sec_dicts(foot, ob, side); /* before the blooms: feeds the resource bloom */
    }
    if (rc == 0) {
        rc = sec_blooms(foot, side);
    }
    if (rc == 0) {
        rc = sec_hotkeys(foot, hot);
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
    rc = write_all(fd, foot->p, foot->len);
    if (rc == 0) {
        rc = write_all(fd, trl, TRL_SIZE);
    }

out:
    scratch_put(sc);
    return rc;
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
    int rc = build_and_write(fd, ob, rows, m, o);
    if (rc == 0 && fsync(fd) < 0) {
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

/* =====================================================================
 * Reader
 * ===================================================================== */

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EBADMSG;
}

/* ---- table loading ---- */

/* Binds an INT column of exactly |count| values at p[0, len). */
static bool bind_int(const uint8_t *p, uint64_t len, uint64_t count, struct icol *c)
{
    if (len < INT_HDR || rd64(p) != count) {
        return false;
    }
    unsigned w = p[16];
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8) {
        return false;
    }
    if ((w != 0 && count > (len - INT_HDR) / w) || len != INT_HDR + count * w) {
        return false;
    }
    c->p = p + INT_HDR;
    c->base = rd64(p + 8);
    c->width = w;
    return true;
}

/* Loops over the stored values of |c| with the width known, so the checks
 * below (run at every table load, over every row) do not switch per value. */
#define IC_EACH(c, n, T, body)                                                                     \
    do {                                                                                           \
        const uint8_t *ic_p_ = (c)->p;                                                             \
        for (uint64_t r_ = 0; r_ < (n); r_++) {                                                    \
            T x_;                                                                                  \
            memcpy(&x_, ic_p_ + r_ * sizeof(T), sizeof(T));                                        \
            uint64_t v = (c)->base + x_;                                                           \
            body                                                                                   \
        }                                                                                          \
    } while (0)

#define IC_SWITCH(c, n, body)                                                                      \
    do {                                                                                           \
        switch ((c)->width) {                                                                      \
        case 1:                                                                                    \
            IC_EACH(c, n, uint8_t, body);                                                          \
            break;                                                                                 \
        case 2:                                                                                    \
            IC_EACH(c, n, uint16_t, body);                                                         \
            break;                                                                                 \
        case 4:                                                                                    \
            IC_EACH(c, n, uint32_t, body);                                                         \
            break;                                                                                 \
        default:                                                                                   \
            IC_EACH(c, n, uint64_t, body);                                                         \
            break;                                                                                 \
        }                                                                                          \
    } while (0)

/* Offsets start at 0, never decrease and end at the data length. */
static bool check_offsets(const struct icol *c, uint64_t n, uint64_t data_len)
{
    if (ic_get(c, 0) != 0) {
        return false;
    }
    if (c->width == 0) {
        return data_len == 0; /* every offset is 0: O(1), whatever n claims */
    }
    uint64_t prev = 0;
    bool ok = true;
    IC_SWITCH(c, n, {
        ok &= v >= prev;
        prev = v;
    });
    return ok && prev == data_len;
}

/* Every value of |c| (n of them) is below |lim|. A width-0 column holds
 * no data whatever count it claims, so it is checked once. */
static bool all_below(const struct icol *c, uint64_t n, uint64_t lim)
{
    if (c->width == 0 || n == 0) {
        return n == 0 || c->base < lim;
    }
    uint64_t mx = 0;
    IC_SWITCH(c, n, { mx = v > mx ? v : mx; });
    return mx < lim;
}

static uint64_t lim_value(const blk *b, enum lim l)
{
    switch (l) {
    case LIM_SCOPES:
        return b->n_scopes;
    case LIM_METRICS:
        return b->n_metrics;
    case LIM_VALTYPE:
        return VAL_BYTES + 1;
    case LIM_PV:
        return PV_INT + 1;
    case LIM_BITS2:
        return 4;
    case LIM_BITS3:
        return 8;
    case LIM_BOOL:
        return 2;
    default:
        return UINT64_MAX;
    }
}

/*
 * Binds the columns of table |t| from its raw bytes. Two passes: first
 * every column's size against the row count (cheap, and it bounds the row
 * count by real bytes: a column of width w > 0 holds rows x w bytes), then
 * the value checks that walk the rows.
 */
static bool bind_table(blk *b, int t, const uint8_t *p, uint64_t len)
{
    const struct spec *sp = &specs[b->sig - 1][t];
    unsigned nfixed = phys_cols(sp), nphys = nfixed + (t == 1 ? b->n_hot : 0);
    if (len < 8 || rd32(p) != nphys || (len - 8) / 16 < nphys) {
        return false;
    }
    const uint8_t *cp[MAX_PHYS];
    uint64_t cl[MAX_PHYS];
    for (unsigned i = 0; i < nphys; i++) {
        uint64_t o = rd64(p + 8 + 16 * i), l = rd64(p + 16 + 16 * i);
        if (o > len || l > len - o || (o & 7) != 0) {
            return false;
        }
        cp[i] = p + o;
        cl[i] = l;
    }
    uint64_t rows = b->rows;
    unsigned c = 0;
    for (unsigned i = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        switch (e->type) {
        case 'I':
            if (!bind_int(cp[c], cl[c], rows, &b->I[e->idx])) {
                return false;
            }
            c += 1;
            break;
        case 'S': {
            struct scol *sc = &b->S[e->idx];
            if (!bind_int(cp[c], cl[c], rows + 1, &sc->off)) {
                return false;
            }
            sc->data = cp[c + 1];
            c += 2;
            break;
        }
        case 'D': {
            struct dcol *dc = &b->D[e->idx];
            if (!bind_int(cp[c], cl[c], rows, &dc->codes) || cl[c + 1] < INT_HDR) {
                return false;
            }
            uint64_t nd1 = rd64(cp[c + 1]);
            if (nd1 == 0 || !bind_int(cp[c + 1], cl[c + 1], nd1, &dc->dict.off) ||
                !check_offsets(&dc->dict.off, nd1, cl[c + 2])) {
                return false;
            }
            dc->dict.data = cp[c + 2];
            c += 3;
            break;
        }
        case 'R':
            if (cl[c] / e->arg != rows || cl[c] % e->arg != 0) {
                return false;
            }
            b->R[e->idx] = cp[c];
            c += 1;
            break;
        }
    }
    for (unsigned h = 0; c + h < nphys; h++) {
        if (!bind_int(cp[c + h], cl[c + h], rows, &b->hot[h])) {
            return false;
        }
    }
    c = 0;
    for (unsigned i = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        switch (e->type) {
        case 'I': {
            uint64_t lim = lim_value(b, (enum lim)e->arg);
            if (lim != UINT64_MAX && !all_below(&b->I[e->idx], rows, lim)) {
                return false;
            }
            c += 1;
            break;
        }
        case 'S':
            if (!check_offsets(&b->S[e->idx].off, rows + 1, cl[c + 1])) {
                return false;
            }
            c += 2;
            break;
        case 'D': {
            const struct dcol *dc = &b->D[e->idx];
            if (!all_below(&dc->codes, rows, rd64(cp[c + 1]) - 1)) {
                return false;
            }
            c += 3;
            break;
        }
        default:
            c += 1;
            break;
        }
    }
    if (t == 1 && b->n_hot > 0) {
        /* A value position lies inside its row's attribute list. */
        const struct scol *sa = &b->S[sp->e[1].idx];
        for (unsigned h = 0; h < b->n_hot; h++) {
            const struct icol *hc = &b->hot[h];
            if (hc->width == 0 && hc->base == 0) {
                continue;
            }
            for (uint64_t r = 0; r < rows; r++) {
                uint64_t at = ic_get(hc, r);
                if (at != 0 && at > ic_get(&sa->off, r + 1) - ic_get(&sa->off, r)) {
                    return false;
                }
            }
        }
    }
    b->tcols[t] = nphys;
    return true;
}

/*
 * Verifies table |t|: its CRC (unless the cache holds it), then its
 * structure (bind_table). The structure is checked even on a cache hit:
 * the cache spares the hashing, but a bit that rotted since must still not
 * send a reader outside the mapping. An entry is stored only after both
 * passed.
 */
static int do_table_load(blk *b, int t)
{
    const struct tdir *d = &b->dir[t];
    bool use_cache = (b->flags & BLK_OPEN_NO_CACHE) == 0;
    struct vcache_key k = b->key;
    k.table = (uint32_t)t;
    bool cached = use_cache && vcache_lookup(&k);
    if (cached) {
        /* Not read by a CRC: start reading it ahead for the scan to come. */
        uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), start = d->off / pg * pg;
        madvise(b->map + start, d->off + d->len - start, MADV_WILLNEED);
    } else if (hash_counted(b->map + d->off, d->len, true) != d->crc) {
        atomic_fetch_add(&st_failures, 1);
        return -EBADMSG;
    }
    const uint8_t *raw = b->map + d->off;
    if (d->codec == BLK_CODEC_ZSTD) {
        unsigned long long fs = ZSTD_getFrameContentSize(raw, d->len);
        if (fs != d->raw || d->raw == 0) {
            return -EBADMSG;
        }
        uint8_t *z = malloc(d->raw);
        if (z == NULL) {
            return -ENOMEM;
        }
        size_t zn = ZSTD_decompress(z, d->raw, raw, d->len);
        if (ZSTD_isError(zn) || zn != d->raw) {
            free(z);
            return -EBADMSG;
        }
        b->zbuf[t] = z;
        raw = z;
    }
    if (!bind_table(b, t, raw, d->raw)) {
        return -EBADMSG;
    }
    if (use_cache && !cached) {
        vcache_insert(&k);
    }
    return 0;
}

int blk_table_load(blk *b, int t)
{
    pthread_mutex_lock(&b->lock);
    int st = atomic_load_explicit(&b->tstate[t], memory_order_relaxed);
    int rc = st == TS_OK ? 0 : -EBADMSG;
    if (st == TS_NONE) {
        rc = do_table_load(b, t);
        if (rc != -ENOMEM) {
            atomic_store_explicit(&b->tstate[t], rc == 0 ? TS_OK : TS_BAD, memory_order_release);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

int blk_load(blk *b, unsigned want)
{
    return ready(b, want);
}

/* ---- footer parsing ---- */

struct rd {
    const uint8_t *p, *end;
};

static bool rd_u32(struct rd *r, uint32_t *v)
{
    if (r->end - r->p < 4) {
        return false;
    }
    *v = rd32(r->p);
    r->p += 4;
    return true;
}

static bool rd_u64(struct rd *r, uint64_t *v)
{
    if (r->end - r->p < 8) {
        return false;
    }
    *v = rd64(r->p);
    r->p += 8;
    return true;
}

static bool rd_u8(struct rd *r, uint8_t *v)
{
    if (r->end - r->p < 1) {
        return false;
    }
    *v = *r->p++;
    return true;
}

static bool rd_str(struct rd *r, uint32_t n, struct mstr *s)
{
    if ((uint64_t)(r->end - r->p) < n) {
        return false;
    }
    s->p = n ? (const char *)r->p : empty;
    s->len = n;
    r->p += n;
    return true;
}

static bool rd_attrs(struct rd *r, uint32_t n, uint32_t count, struct oattrs *a)
{
    struct mstr s;
    if (!rd_str(r, n, &s) || val_check_attrs((const uint8_t *)s.p, n, count) != 0) {
        return false;
    }
    *a = (struct oattrs){(const uint8_t *)s.p, n, count};
    return true;
}

/* A count of records each at least |min| bytes must fit in what is left. */
static bool count_fits(const struct rd *r, uint32_t n, size_t min)
{
    return (uint64_t)n <= (uint64_t)(r->end - r->p) / min;
}

static bool parse_resources(blk *b, struct rd r)
{
    uint32_t n;
    if (!rd_u32(&r, &n) || !count_fits(&r, n, 16)) {
        return false;
    }
    b->res = calloc(n ? n : 1, sizeof(*b->res));
    if (b->res == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct res_view *v = &b->res[i];
        uint32_t cnt, alen, slen;
        if (!rd_u32(&r, &v->dropped_attrs) || !rd_u32(&r, &cnt) || !rd_u32(&r, &alen) ||
            !rd_u32(&r, &slen) || !rd_attrs(&r, alen, cnt, &v->attrs) ||
            !rd_str(&r, slen, &v->schema_url)) {
            return false;
        }
        v->id = i;
    }
    b->n_res = n;
    return true;
}

static bool parse_scopes(blk *b, struct rd r)
{
    uint32_t n;
    if (!rd_u32(&r, &n) || !count_fits(&r, n, 28)) {
        return false;
    }
    b->scopes = calloc(n ? n : 1, sizeof(*b->scopes));
    if (b->scopes == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct scope_view *v = &b->scopes[i];
        uint32_t cnt, nl, vl, al, sl;
        if (!rd_u32(&r, &v->resource_id) || !rd_u32(&r, &v->dropped_attrs) || !rd_u32(&r, &cnt) ||
            !rd_u32(&r, &nl) || !rd_u32(&r, &vl) || !rd_u32(&r, &al) || !rd_u32(&r, &sl) ||
            !rd_str(&r, nl, &v->name) || !rd_str(&r, vl, &v->version) ||
            !rd_attrs(&r, al, cnt, &v->attrs) || !rd_str(&r, sl, &v->schema_url) ||
            v->resource_id >= b->n_res) {
            return false;
        }
        v->id = i;
        v->resource = &b->res[v->resource_id];
    }
    b->n_scopes = n;
    return true;
}

static bool parse_metrics(blk *b, struct rd r)
{
    uint32_t n;
    if (!rd_u32(&r, &n) || !count_fits(&r, n, 32)) {
        return false;
    }
    b->metrics = calloc(n ? n : 1, sizeof(*b->metrics));
    if (b->metrics == NULL) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        struct metric_view *v = &b->metrics[i];
        uint8_t kind, mono, z;
        uint32_t temp, cnt, nl, dl, ul, ml;
        if (!rd_u32(&r, &v->scope_id) || !rd_u8(&r, &kind) || !rd_u8(&r, &mono) || !rd_u8(&r, &z) ||
            !rd_u8(&r, &z) || !rd_u32(&r, &temp) || !rd_u32(&r, &cnt) || !rd_u32(&r, &nl) ||
            !rd_u32(&r, &dl) || !rd_u32(&r, &ul) || !rd_u32(&r, &ml) || !rd_str(&r, nl, &v->name) ||
            !rd_str(&r, dl, &v->description) || !rd_str(&r, ul, &v->unit) ||
            !rd_attrs(&r, ml, cnt, &v->metadata) || v->scope_id >= b->n_scopes ||
            kind > MK_SUMMARY || mono > 1) {
            return false;
        }
        v->id = i;
        v->kind = (enum metric_kind)kind;
        v->monotonic = mono != 0;
        v->temporality = (int32_t)temp;
        v->scope = &b->scopes[v->scope_id];
    }
    b->n_metrics = n;
    return true;
}

static bool parse_blooms(blk *b, struct rd r)
{
    uint32_t n, z;
    if (!rd_u32(&r, &n) || !rd_u32(&r, &z) || n > 4) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t kind, algo, k, flags;
        uint32_t zero;
        struct bloom_r *bl = &b->blooms[i];
        if (!rd_u8(&r, &kind) || !rd_u8(&r, &algo) || !rd_u8(&r, &k) || !rd_u8(&r, &flags) ||
            !rd_u32(&r, &zero) || !rd_u64(&r, &bl->seed) || !rd_u64(&r, &bl->nbits) ||
            !rd_u64(&r, &bl->items)) {
            return false;
        }
        if (kind < 1 || kind > 4 || algo != BLOOM_ALGO_XXH3_SPLIT || k != BLOOM_K ||
            bl->nbits == 0 || bl->nbits % BLOOM_BLOCK_BITS != 0 ||
            bl->nbits / 8 > (uint64_t)(r.end - r.p)) {
            return false;
        }
        bl->kind = (enum blk_bloom_kind)kind;
        bl->k = k;
        bl->complete = (flags & 1) == 0;
        bl->bits = r.p;
        r.p += bl->nbits / 8;
        b->bloom_bytes += 32 + bl->nbits / 8;
    }
    b->n_blooms = n;
    return true;
}

static bool parse_zones(blk *b, struct rd r)
{
    uint32_t n, z;
    if (!rd_u32(&r, &n) || !rd_u32(&r, &z) || !count_fits(&r, n, 24)) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint32_t id;
        uint64_t mn, mx;
        if (!rd_u32(&r, &id) || !rd_u32(&r, &z) || !rd_u64(&r, &mn) || !rd_u64(&r, &mx)) {
            return false;
        }
        if (id >= 1 && id <= ZONE_MAX) {
            b->zhave[id] = true;
            b->zmin[id] = mn;
            b->zmax[id] = mx;
        }
    }
    return true;
}

static bool parse_hotkeys(blk *b, struct rd r)
{
    uint32_t n;
    if (!rd_u32(&r, &n) || n > HOT_MAX) {
        return false;
    }
    for (uint32_t h = 0; h < n; h++) {
        uint32_t len;
        if (!rd_u32(&r, &len) || !rd_str(&r, len, &b->hot_key[h])) {
            return false;
        }
    }
    b->n_hot = n;
    return true;
}

static int parse_footer(blk *b, char *err, size_t errlen)
{
    struct rd r = {b->map + b->foot_off, b->map + b->foot_off + b->foot_len};
    uint32_t nsec, z;
    struct rd secs[SEC_MAX + 1] = {{0}};
    bool have[SEC_MAX + 1] = {false};
    if (!rd_u32(&r, &nsec) || !rd_u32(&r, &z)) {
        return fail(err, errlen, "footer too short");
    }
    for (uint32_t i = 0; i < nsec; i++) {
        uint32_t id;
        uint64_t len;
        r.p = b->map + ((uint64_t)(r.p - b->map) + 7) / 8 * 8;
        if (r.p > r.end || !rd_u32(&r, &id) || !rd_u32(&r, &z) || !rd_u64(&r, &len) ||
            len > (uint64_t)(r.end - r.p)) {
            return fail(err, errlen, "footer section %u runs past the footer", i);
        }
        if (id <= SEC_MAX) {
            if (have[id]) {
                return fail(err, errlen, "footer section %u appears twice", id);
            }
            have[id] = true;
            secs[id] = (struct rd){r.p, r.p + len};
        }
        r.p += len;
    }
    for (int id = SEC_META; id <= SEC_METRICS; id++) { /* zones and hot keys are optional */
        if (!have[id] && id != SEC_ZONES) {
            return fail(err, errlen, "footer lacks section %d", id);
        }
    }

    struct rd m = secs[SEC_META];
    uint32_t sig, shard;
    uint64_t rows, wal_seq, seal_id, flags;
    if (!rd_u32(&m, &sig) || !rd_u32(&m, &shard) || !rd_u64(&m, &rows) || !rd_u64(&m, &wal_seq) ||
        !rd_u64(&m, &seal_id) || !rd_u64(&m, &flags)) {
        return fail(err, errlen, "footer meta too short");
    }
    if (sig != b->sig || shard != b->meta.shard || rows != b->rows || wal_seq != b->meta.wal_seq ||
        seal_id != b->meta.seal_id) {
        return fail(err, errlen, "footer meta disagrees with the header");
    }

    struct rd t = secs[SEC_TABLES];
    uint32_t nt = 0;
    if (!rd_u32(&t, &nt) || !rd_u32(&t, &z) || nt != N_TABLES ||
        (uint64_t)(t.end - t.p) < (uint64_t)nt * TDIR_SIZE) {
        return fail(err, errlen, "table directory holds %u tables, expected %d", nt, N_TABLES);
    }
    uint64_t prev_end = HDR_SIZE;
    for (int i = 0; i < N_TABLES; i++) {
        const uint8_t *e = t.p + TDIR_SIZE * i;
        struct tdir *d = &b->dir[i];
        d->kind = e[0];
        d->codec = e[1];
        d->crc = rd32(e + 4);
        d->off = rd64(e + 8);
        d->len = rd64(e + 16);
        d->raw = rd64(e + 24);
        if (d->kind != i + 1) {
            return fail(err, errlen, "table %d has kind %u, expected %d", i, d->kind, i + 1);
        }
        if (d->codec > BLK_CODEC_ZSTD) {
            return fail(err, errlen, "table %d has unknown codec %u", i, d->codec);
        }
        if (d->off < prev_end || d->off > b->foot_off || d->len > b->foot_off - d->off) {
            return fail(err, errlen, "table %d lies outside the table area", i);
        }
        if (d->codec == BLK_CODEC_PLAIN
                ? d->raw != d->len
                : (d->raw > d->len * ZSTD_RATIO_CAP + (1u << 20) || d->raw > ZSTD_RAW_MAX)) {
            return fail(err, errlen, "table %d has an implausible raw length", i);
        }
        prev_end = d->off + d->len;
    }

    if (!parse_resources(b, secs[SEC_RESOURCES]) || !parse_scopes(b, secs[SEC_SCOPES]) ||
        !parse_metrics(b, secs[SEC_METRICS])) {
        return fail(err, errlen, "malformed resource, scope or metric dictionary");
    }
    b->dict_bytes[0] = (uint64_t)(secs[SEC_RESOURCES].end - secs[SEC_RESOURCES].p);
    b->dict_bytes[1] = (uint64_t)(secs[SEC_SCOPES].end - secs[SEC_SCOPES].p);
    b->dict_bytes[2] = (uint64_t)(secs[SEC_METRICS].end - secs[SEC_METRICS].p);
    if (!parse_blooms(b, secs[SEC_BLOOMS])) {
        return fail(err, errlen, "malformed bloom section");
    }
    if (have[SEC_ZONES] && !parse_zones(b, secs[SEC_ZONES])) {
        return fail(err, errlen, "malformed zone map section");
    }
    if (have[SEC_HOTKEYS] && !parse_hotkeys(b, secs[SEC_HOTKEYS])) {
        return fail(err, errlen, "malformed hot attribute key section");
    }
    return 0;
}

static void blk_destroy(blk *b)
{
    if (b == NULL) {
        return;
    }
    if (b->map != NULL) {
        munmap(b->map, b->size);
    }
    for (int t = 0; t < N_TABLES; t++) {
        free(b->zbuf[t]);
    }
    free(atomic_load(&b->col_time));
    free(b->res);
    free(b->scopes);
    free(b->metrics);
    free(b->path);
    free(b->old_path);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static int open_checked(blk *b, char *err, size_t errlen)
{
    const uint8_t *h = b->map;
    if (b->size < HDR_SIZE + TRL_SIZE) {
        return fail(err, errlen, "truncated: %llu bytes is shorter than a header and trailer",
                    (unsigned long long)b->size);
    }
    if (memcmp(h, hdr_magic, 8) != 0) {
        return fail(err, errlen, "not a miradb block (bad magic)");
    }
    uint32_t version = rd32(h + 8);
    if (version > BLK_VERSION) {
        return fail(err, errlen, "block format version %u is newer than this miradb (%d)", version,
                    BLK_VERSION);
    }
    if (version != BLK_VERSION) {
        return fail(err, errlen, "unknown block format version %u (this miradb reads %d)", version,
                    BLK_VERSION);
    }
    if (rd32(h + 56) != crc32_of(h, 56) || rd32(h + 12) != HDR_SIZE || rd32(h + 60) != 0) {
        return fail(err, errlen, "header checksum mismatch");
    }
    if (h[16] < SIG_LOGS || h[16] > SIG_METRICS) {
        return fail(err, errlen, "unknown signal %u", h[16]);
    }
    b->sig = (enum signal)h[16];
    b->meta.shard = rd32(h + 20);
    b->rows = rd64(h + 24);
    b->meta.seal_id = rd64(h + 32);
    b->meta.wal_seq = rd64(h + 40);
    if (b->rows > OBLOCK_MAX_ROWS) {
        return fail(err, errlen, "row count %llu is over the limit", (unsigned long long)b->rows);
    }

    const uint8_t *t = b->map + b->size - TRL_SIZE;
    if (memcmp(t + 32, trl_magic, 8) != 0) {
        return fail(err, errlen, "truncated or corrupt: no trailer at the end of the file");
    }
    if (rd32(t + 24) != crc32_of(t, 24) || rd32(t + 28) != 0) {
        return fail(err, errlen, "trailer checksum mismatch");
    }
    if (rd32(t + 20) != version) {
        return fail(err, errlen, "trailer version %u differs from the header's %u", rd32(t + 20),
                    version);
    }
    b->foot_off = rd64(t);
    b->foot_len = rd64(t + 8);
    if (b->foot_off < HDR_SIZE || b->foot_off > b->size - TRL_SIZE ||
        b->foot_len != b->size - TRL_SIZE - b->foot_off) {
        return fail(err, errlen, "truncated or corrupt: the footer does not end at the trailer");
    }
    struct vcache_key k = b->key;
    k.table = UINT32_MAX;
    bool use_cache = (b->flags & BLK_OPEN_NO_CACHE) == 0;
    if (!(use_cache && vcache_lookup(&k))) {
        if (hash_counted(b->map + b->foot_off, b->foot_len, false) != rd32(t + 16)) {
            atomic_fetch_add(&st_failures, 1);
            return fail(err, errlen, "footer checksum mismatch");
        }
        if (use_cache) {
            vcache_insert(&k);
        }
    }
    int rc = parse_footer(b, err, errlen);
    if (rc < 0) {
        return rc;
    }
    rc = blk_table_load(b, 0);
    if (rc == -ENOMEM) {
        return rc;
    }
    if (rc < 0 && (b->flags & BLK_OPEN_LENIENT_ROOT) == 0) {
        return fail(err, errlen, "root table fails its checksum or structure check");
    }
    return 0;
}

int blk_open_ex(const char *path, unsigned flags, blk **out, char *err, size_t errlen)
{
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    blk *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    pthread_mutex_init(&b->lock, NULL);
    atomic_init(&b->refs, 1);
    b->flags = flags;
    b->path = strdup(path);
    if (b->path == NULL) {
        blk_destroy(b);
        return -ENOMEM;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        snprintf(err, errlen, "%s", strerror(errno));
        blk_destroy(b);
        return rc;
    }
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        close(fd);
        blk_destroy(b);
        return rc;
    }
    b->size = (uint64_t)st.st_size;
    b->key = (struct vcache_key){(uint64_t)st.st_dev, (uint64_t)st.st_ino, b->size,
                                 (int64_t)st.st_mtim.tv_sec * 1000000000ll + st.st_mtim.tv_nsec, 0};
    if (b->size >= HDR_SIZE + TRL_SIZE) {
        void *m = mmap(NULL, b->size, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            int rc = -errno;
            close(fd);
            blk_destroy(b);
            return rc;
        }
        b->map = m;
    }
    close(fd);
    int rc = open_checked(b, err, errlen);
    if (rc < 0) {
        if (rc == -ENOMEM) {
            snprintf(err, errlen, "out of memory");
        }
        blk_destroy(b);
        return rc;
    }
    *out = b;
    return 0;
}

int blk_open(const char *path, blk **out, char *err, size_t errlen)
{
    return blk_open_ex(path, 0, out, err, errlen);
}

void blk_ref(blk *b)
{
    atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

void blk_unref(blk *b)
{
    if (b != NULL && atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        blk_destroy(b);
    }
}

enum signal blk_signal(const blk *b)
{
    return b->sig;
}

uint64_t blk_rows(const blk *b)
{
    return b->rows;
}

const struct blk_meta *blk_meta(const blk *b)
{
    return &b->meta;
}

const char *blk_path(const blk *b)
{
    return b->path;
}

uint64_t blk_file_bytes(const blk *b)
{
    return b->size;
}

/* ---- sidecars ---- */

void blk_time_range(const blk *b, uint64_t *min_ns, uint64_t *max_ns)
{
    if (b->zhave[ZONE_TIME]) {
        *min_ns = b->zmin[ZONE_TIME];
        *max_ns = b->zmax[ZONE_TIME];
    } else {
        *min_ns = UINT64_MAX;
        *max_ns = 0;
    }
}

static bool zone_signed(const blk *b, int id, int64_t *mn, int64_t *mx)
{
    if (!b->zhave[id]) {
        return false;
    }
    *mn = (int64_t)b->zmin[id];
    *mx = (int64_t)b->zmax[id];
    return true;
}

bool blk_severity_range(const blk *b, int64_t *min, int64_t *max)
{
    return zone_signed(b, ZONE_SEVERITY, min, max);
}

bool blk_duration_range(const blk *b, int64_t *min_ns, int64_t *max_ns)
{
    return zone_signed(b, ZONE_DURATION, min_ns, max_ns);
}

static const struct bloom_r *bloom_of(const blk *b, enum blk_bloom_kind k)
{
    for (uint32_t i = 0; i < b->n_blooms; i++) {
        if (b->blooms[i].kind == k) {
            return b->blooms[i].complete ? &b->blooms[i] : NULL;
        }
    }
    return NULL;
}

bool blk_may_have_trace(const blk *b, const uint8_t id[16])
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_TRACE_IDS);
    return bl == NULL || bloom_test(bl->bits, bl->nbits, bloom_hash_bytes(id, 16, bl->seed));
}

bool blk_may_have_token(const blk *b, const char *tok, size_t n)
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_TOKENS);
    if (bl == NULL || n == 0) {
        return true;
    }
    for (size_t i = 0; i < n; i++) {
        if (!bloom_is_token_char((unsigned char)tok[i])) {
            return true;
        }
    }
    return bloom_test(bl->bits, bl->nbits, bloom_hash_token(tok, n, bl->seed));
}

bool blk_may_have_attr(const blk *b, const char *key, size_t kn, const char *val, size_t vn)
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_ATTRS);
    return bl == NULL ||
           bloom_test(bl->bits, bl->nbits, bloom_hash_kv(key, kn, val, vn, bl->seed));
}

bool blk_may_have_resource_value(const blk *b, const char *key, size_t kn, const char *val,
                                 size_t vn)
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_RES_ATTRS);
    return bl == NULL ||
           bloom_test(bl->bits, bl->nbits, bloom_hash_kv(key, kn, val, vn, bl->seed));
}

uint32_t blk_n_resources(const blk *b)
{
    return b->n_res;
}

uint32_t blk_n_scopes(const blk *b)
{
    return b->n_scopes;
}

uint32_t blk_n_metrics(const blk *b)
{
    return b->n_metrics;
}

const struct res_view *blk_resource(const blk *b, uint32_t id)
{
    return id < b->n_res ? &b->res[id] : NULL;
}

const struct scope_view *blk_scope(const blk *b, uint32_t id)
{
    return id < b->n_scopes ? &b->scopes[id] : NULL;
}

const struct metric_view *blk_metric(const blk *b, uint32_t id)
{
    return id < b->n_metrics ? &b->metrics[id] : NULL;
}

/* ---- rows ---- */

static const struct mstr mempty = {empty, 0};
static const struct obytes bempty = {(const uint8_t *)empty, 0};
static const struct oattrs aempty = {(const uint8_t *)empty, 0, 0};

static inline struct oattrs attrs_get(const blk *b, unsigned ci, unsigned si, uint64_t i)
{
    struct mstr s = sc_get(&b->S[si], i);
    return (struct oattrs){(const uint8_t *)s.p, s.len, (uint32_t)ic_get(&b->I[ci], i)};
}

/*
 * The row functions write every field once (no memset of the view first:
 * on a scan the clear-then-write cost as much as the reads).
 */
int blk_log(blk *b, uint64_t i, unsigned want, struct log_view *v)
{
    if (b->sig != SIG_LOGS || i >= b->rows) {
        return -EINVAL;
    }
    /* observed_ns is stored relative to the root's time column. */
    int rc = ready(b, (want & BLK_DETAIL) ? want | BLK_ROOT : want);
    if (rc < 0) {
        return rc;
    }
    uint64_t t = (want & (BLK_ROOT | BLK_DETAIL)) ? ic_get(&b->I[L_TIME], i) : 0;
    if (want & BLK_ROOT) {
        unsigned idf = (unsigned)ic_get(&b->I[L_IDF], i);
        uint32_t sc = (uint32_t)ic_get(&b->I[L_SCOPE], i);
        enum val_type bt = (enum val_type)ic_get(&b->I[L_BTYPE], i);
        struct mstr body = sc_get(&b->S[L_BODY], i);
        v->time_ns = (idf & 4) ? 0 : t;
        v->scope_id = sc;
        v->scope = &b->scopes[sc];
        v->resource = b->scopes[sc].resource;
        v->severity_number = (int32_t)unzz(ic_get(&b->I[L_SEV], i));
        v->severity_text = dc_get(&b->D[L_SEVTEXT], i);
        v->body_type = bt;
        v->body_str = bt == VAL_STR ? body : mempty;
        v->body_val = bt == VAL_STR ? bempty : ob_of(body);
        v->has_trace_id = (idf & 1) != 0;
        v->has_span_id = (idf & 2) != 0;
        memcpy(v->trace_id, b->R[L_TRACE] + 16 * i, 16);
        memcpy(v->span_id, b->R[L_SPAN] + 8 * i, 8);
        v->event_name = dc_get(&b->D[L_EVNAME], i);
    } else {
        v->time_ns = 0;
        v->scope_id = 0;
        v->scope = NULL;
        v->resource = NULL;
        v->severity_number = 0;
        v->severity_text = v->body_str = v->event_name = mempty;
        v->body_type = VAL_EMPTY;
        v->body_val = bempty;
        v->has_trace_id = v->has_span_id = false;
        memset(v->trace_id, 0, 16);
        memset(v->span_id, 0, 8);
    }
    v->attrs = (want & BLK_ATTRS) ? attrs_get(b, L_ACOUNT, L_ATTRS, i) : aempty;
    if (want & BLK_DETAIL) {
        v->observed_ns = t + (uint64_t)unzz(ic_get(&b->I[L_OBS], i));
        v->dropped_attrs = (uint32_t)ic_get(&b->I[L_DROP], i);
        v->flags = (uint32_t)ic_get(&b->I[L_FLAGS], i);
    } else {
        v->observed_ns = 0;
        v->dropped_attrs = 0;
        v->flags = 0;
    }
    return 0;
}

int blk_span(blk *b, uint64_t i, unsigned want, struct span_view *v)
{
    if (b->sig != SIG_TRACES || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, want);
    if (rc < 0) {
        return rc;
    }
    if (want & BLK_ROOT) {
        uint32_t sc = (uint32_t)ic_get(&b->I[T_SCOPE], i);
        v->start_ns = ic_get(&b->I[T_START], i);
        v->end_ns = v->start_ns + (uint64_t)unzz(ic_get(&b->I[T_DUR], i));
        v->scope_id = sc;
        v->scope = &b->scopes[sc];
        v->resource = b->scopes[sc].resource;
        memcpy(v->trace_id, b->R[T_TRACE] + 16 * i, 16);
        memcpy(v->span_id, b->R[T_SPAN] + 8 * i, 8);
        memcpy(v->parent_span_id, b->R[T_PARENT] + 8 * i, 8);
        v->has_parent = ic_get(&b->I[T_HASPAR], i) != 0;
        v->name = dc_get(&b->D[T_NAME], i);
        v->kind = (int32_t)unzz(ic_get(&b->I[T_KIND], i));
        v->status_code = (int32_t)unzz(ic_get(&b->I[T_STATUS], i));
        v->status_message = sc_get(&b->S[T_STATMSG], i);
    } else {
        v->start_ns = v->end_ns = 0;
        v->scope_id = 0;
        v->scope = NULL;
        v->resource = NULL;
        memset(v->trace_id, 0, 16);
        memset(v->span_id, 0, 8);
        memset(v->parent_span_id, 0, 8);
        v->has_parent = false;
        v->name = v->status_message = mempty;
        v->kind = v->status_code = 0;
    }
    v->attrs = (want & BLK_ATTRS) ? attrs_get(b, T_ACOUNT, T_ATTRS, i) : aempty;
    if (want & BLK_DETAIL) {
        v->trace_state = sc_get(&b->S[T_TSTATE], i);
        v->flags = (uint32_t)ic_get(&b->I[T_FLAGS], i);
        v->dropped_attrs = (uint32_t)ic_get(&b->I[T_DROP], i);
        v->events = ob_of(sc_get(&b->S[T_EVENTS], i));
        v->n_events = (uint32_t)ic_get(&b->I[T_NEV], i);
        v->dropped_events = (uint32_t)ic_get(&b->I[T_DROPEV], i);
        v->links = ob_of(sc_get(&b->S[T_LINKS], i));
        v->n_links = (uint32_t)ic_get(&b->I[T_NLINK], i);
        v->dropped_links = (uint32_t)ic_get(&b->I[T_DROPLINK], i);
    } else {
        v->trace_state = mempty;
        v->flags = v->dropped_attrs = 0;
        v->events = v->links = bempty;
        v->n_events = v->dropped_events = v->n_links = v->dropped_links = 0;
    }
    return 0;
}

int blk_point(blk *b, uint64_t i, unsigned want, struct point_view *v)
{
    if (b->sig != SIG_METRICS || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, want);
    if (rc < 0) {
        return rc;
    }
    if (want & BLK_ROOT) {
        uint32_t m = (uint32_t)ic_get(&b->I[M_METRIC], i);
        unsigned has = (unsigned)ic_get(&b->I[M_HAS], i);
        v->time_ns = ic_get(&b->I[M_TIME], i);
        v->start_ns = v->time_ns - (uint64_t)unzz(ic_get(&b->I[M_START], i));
        v->metric_id = m;
        v->metric = &b->metrics[m];
        v->scope = b->metrics[m].scope;
        v->resource = b->metrics[m].scope->resource;
        v->value_type = (enum point_value)ic_get(&b->I[M_VTYPE], i);
        memcpy(&v->value, b->R[M_VALUE] + 8 * i, 8);
        v->count = ic_get(&b->I[M_COUNT], i);
        memcpy(&v->sum, b->R[M_SUM] + 8 * i, 8);
        memcpy(&v->min, b->R[M_MIN] + 8 * i, 8);
        memcpy(&v->max, b->R[M_MAX] + 8 * i, 8);
        v->has_sum = (has & 1) != 0;
        v->has_min = (has & 2) != 0;
        v->has_max = (has & 4) != 0;
    } else {
        v->time_ns = v->start_ns = 0;
        v->metric_id = 0;
        v->metric = NULL;
        v->scope = NULL;
        v->resource = NULL;
        v->value_type = PV_NONE;
        v->value.i = 0;
        v->count = 0;
        v->sum = v->min = v->max = 0;
        v->has_sum = v->has_min = v->has_max = false;
    }
    v->attrs = (want & BLK_ATTRS) ? attrs_get(b, M_ACOUNT, M_ATTRS, i) : aempty;
    if (want & BLK_DETAIL) {
        v->flags = (uint32_t)ic_get(&b->I[M_FLAGS], i);
        v->detail = ob_of(sc_get(&b->S[M_DETAIL], i));
        v->exemplars = ob_of(sc_get(&b->S[M_EXEMPLARS], i));
        v->n_exemplars = (uint32_t)ic_get(&b->I[M_NEX], i);
    } else {
        v->flags = 0;
        v->detail = v->exemplars = bempty;
        v->n_exemplars = 0;
    }
    return 0;
}

const uint64_t *blk_col_time(blk *b)
{
    uint64_t *t = atomic_load_explicit(&b->col_time, memory_order_acquire);
    if (t != NULL) {
        return t;
    }
    if (ready(b, BLK_ROOT) < 0) {
        return NULL;
    }
    pthread_mutex_lock(&b->lock);
    t = atomic_load_explicit(&b->col_time, memory_order_relaxed);
    if (t == NULL) {
        t = malloc((b->rows ? b->rows : 1) * sizeof(*t));
        if (t != NULL) {
            const struct icol *c = &b->I[0]; /* L_TIME, T_START, M_TIME */
            for (uint64_t i = 0; i < b->rows; i++) {
                t[i] = ic_get(c, i);
            }
            atomic_store_explicit(&b->col_time, t, memory_order_release);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return t;
}

uint64_t blk_lower_bound(blk *b, uint64_t t)
{
    if (ready(b, BLK_ROOT) < 0) {
        return b->rows;
    }
    uint64_t lo = 0, hi = b->rows;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (ic_get(&b->I[0], mid) < t) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return lo;
}

/* ---- hot attribute keys ---- */

uint32_t blk_n_hot_attrs(const blk *b)
{
    return b->n_hot;
}

struct mstr blk_hot_attr_key(const blk *b, uint32_t h)
{
    return h < b->n_hot ? b->hot_key[h] : mempty;
}

int blk_hot_attr_find(const blk *b, const char *key, size_t kn)
{
    for (uint32_t h = 0; h < b->n_hot; h++) {
        if (b->hot_key[h].len == kn && (kn == 0 || memcmp(b->hot_key[h].p, key, kn) == 0)) {
            return (int)h;
        }
    }
    return -1;
}

int blk_hot_attr(blk *b, uint32_t h, uint64_t i, struct val *v)
{
    if (h >= b->n_hot || i >= b->rows) {
        return -EINVAL;
    }
    int rc = ready(b, BLK_ATTRS);
    if (rc < 0) {
        return rc;
    }
    uint64_t at = ic_get(&b->hot[h], i);
    if (at == 0) {
        return 0;
    }
    const struct scol *sa = &b->S[specs[b->sig - 1][1].e[1].idx];
    const uint8_t *p = sa->data + ic_get(&sa->off, i);
    struct val_rd r = {p + at - 1, sa->data + ic_get(&sa->off, i + 1)};
    return val_rd_value(&r, v) == 0 ? 1 : -EBADMSG;
}

/* ---- quarantine ---- */

int blk_quarantine(blk *b)
{
    pthread_mutex_lock(&b->lock);
    if (b->quarantined) {
        pthread_mutex_unlock(&b->lock);
        return 0;
    }
    const char *path = b->path;
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    size_t dlen = slash ? (size_t)(slash - path) : 0;
    char dir[4096], data[4096], qdir[4096], target[4096];
    int rc = 0;
    if (dlen >= sizeof(dir)) {
        rc = -ENAMETOOLONG;
        goto out;
    }
    if (slash) {
        memcpy(dir, path, dlen);
        dir[dlen] = '\0';
    } else {
        strcpy(dir, ".");
    }
    const char *ds = strrchr(dir, '/');
    if (ds == NULL) {
        snprintf(data, sizeof(data), "%s", strcmp(dir, ".") == 0 ? ".." : ".");
    } else if (ds == dir) {
        snprintf(data, sizeof(data), "/");
    } else {
        snprintf(data, sizeof(data), "%.*s", (int)(ds - dir), dir);
    }
    if ((size_t)snprintf(qdir, sizeof(qdir), "%s/quarantine", data) >= sizeof(qdir) ||
        (size_t)snprintf(target, sizeof(target), "%s/%s-%s", qdir, signal_name(b->sig), base) >=
            sizeof(target)) {
        rc = -ENAMETOOLONG;
        goto out;
    }
    if (mkdir(qdir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        goto out;
    }
    if (rename(path, target) < 0) {
        rc = -errno;
        goto out;
    }
    char *np = strdup(target);
    if (np != NULL) {
        free(b->old_path);
        b->old_path = b->path;
        b->path = np;
    }
    b->quarantined = true;
    atomic_fetch_add(&st_quarantined, 1);
out:
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* ---- introspection ---- */

const char *blk_table_kind_name(enum blk_table_kind k)
{
    switch (k) {
    case BLK_T_ROOT:
        return "root";
    case BLK_T_ATTRS:
        return "attrs";
    case BLK_T_DETAIL:
        return "detail";
    }
    return "?";
}

const char *blk_bloom_kind_name(enum blk_bloom_kind k)
{
    switch (k) {
    case BLK_BLOOM_TOKENS:
        return "body_tokens";
    case BLK_BLOOM_TRACE_IDS:
        return "trace_ids";
    case BLK_BLOOM_ATTRS:
        return "attr_values";
    case BLK_BLOOM_RES_ATTRS:
        return "resource_values";
    }
    return "?";
}

uint32_t blk_n_tables(const blk *b)
{
    (void)b;
    return N_TABLES;
}

int blk_table_info(const blk *b, uint32_t i, struct blk_table_info *out)
{
    if (i >= N_TABLES) {
        return -EINVAL;
    }
    const struct tdir *d = &b->dir[i];
    int st = atomic_load_explicit(&((blk *)b)->tstate[i], memory_order_acquire);
    *out = (struct blk_table_info){
        .kind = (enum blk_table_kind)d->kind,
        .codec = (enum blk_codec)d->codec,
        .offset = d->off,
        .length = d->len,
        .raw_length = d->raw,
        .crc32 = d->crc,
        .n_columns = st == TS_OK ? b->tcols[i] : 0,
        .state = st == TS_OK    ? 1
                 : st == TS_BAD ? -1
                                : 0,
    };
    return 0;
}

int blk_verify_table(blk *b, uint32_t i)
{
    if (i >= N_TABLES) {
        return -EINVAL;
    }
    if (hash_counted(b->map + b->dir[i].off, b->dir[i].len, true) != b->dir[i].crc) {
        atomic_fetch_add(&st_failures, 1);
        return -EBADMSG;
    }
    return 0;
}

uint32_t blk_n_blooms(const blk *b)
{
    return b->n_blooms;
}

int blk_bloom_info(const blk *b, uint32_t i, struct blk_bloom_info *out)
{
    if (i >= b->n_blooms) {
        return -EINVAL;
    }
    const struct bloom_r *bl = &b->blooms[i];
    uint64_t set = 0;
    for (uint64_t w = 0; w < bl->nbits / 64; w++) {
        set += (uint64_t)__builtin_popcountll(rd64(bl->bits + 8 * w));
    }
    *out =
        (struct blk_bloom_info){bl->kind, bl->nbits, bl->items, bl->k, bl->seed, set, bl->complete};
    return 0;
}

void blk_layout(const blk *b, struct blk_layout *out)
{
    *out = (struct blk_layout){
        .version = BLK_VERSION,
        .header_bytes = HDR_SIZE,
        .footer_offset = b->foot_off,
        .footer_bytes = b->foot_len,
        .dict_bytes = {b->dict_bytes[0], b->dict_bytes[1], b->dict_bytes[2]},
        .bloom_bytes = b->bloom_bytes,
    };
}
