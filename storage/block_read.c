/*
 * block_read.c - opening a sealed block: the header, trailer and footer
 * checks, footer parsing, table loading with lazy verification (and the
 * eager check fsck asks for), the pruning sidecars and dictionaries,
 * quarantine, and the process-wide counters all of it bumps. The format
 * and struct blk are in block_int.h, the contract in block.h.
 */
#include "storage/block_int.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "storage/adm.h"
#include "storage/bloom.h"
#include "storage/vcache.h"

/* ---- process-wide counters ---- */

static _Atomic uint64_t st_verified, st_hashed, st_failures, st_quarantined;

/* Bytes of heap the open blocks hold outside their mappings: decoded
 * columns, zstd table copies, rebuilt lists and detail, decoded stream
 * indexes (blk_heap_add; blk_stats.table_heap_bytes). */
static _Atomic uint64_t st_heap;
/* Of st_heap, the inflated copies of zstd tables (b->zbuf): what a plain
 * table leaves in the file mapping (blk_stats.table_inflated_bytes). */
static _Atomic uint64_t st_inflated;

/* The read clock: blk_load and the table loads stamp a block with its next
 * tick (blk_read_stamp), so the catalog can drop the least recently read
 * tables first. One relaxed add per block per query, none per row. */
static _Atomic uint64_t read_clock;

static void stamp(blk *b)
{
    atomic_store_explicit(&b->read_stamp,
                          atomic_fetch_add_explicit(&read_clock, 1, memory_order_relaxed) + 1,
                          memory_order_relaxed);
}

/* The heap is charged to the memory budget as committed memory (adm_charge:
 * a reader cannot wait for ingest to free some); the catalog keeps it under
 * its cap (catalog_set_table_cap) by dropping idle blocks' tables. */
void blk_heap_add(const void *p)
{
    if (p != NULL) {
        size_t n = malloc_usable_size((void *)p);
        atomic_fetch_add(&st_heap, n);
        adm_charge(n);
    }
}

void blk_heap_free(void *p)
{
    if (p != NULL) {
        size_t n = malloc_usable_size(p);
        atomic_fetch_sub(&st_heap, n);
        adm_uncharge(n);
        free(p);
    }
}

/* An inflated table copy: counted in the heap and apart (st_inflated). */
static void zbuf_add(const void *p)
{
    blk_heap_add(p);
    atomic_fetch_add(&st_inflated, malloc_usable_size((void *)p));
}

static void zbuf_free(uint8_t **pp)
{
    if (*pp != NULL) {
        atomic_fetch_sub(&st_inflated, malloc_usable_size(*pp));
        blk_heap_free(*pp);
        *pp = NULL;
    }
}

/* One decompression context per thread that inflates, kept for its next
 * table (ZSTD_decompress would make and free one per call); freed when the
 * thread exits. NULL if none could be made: the caller falls back. */
static pthread_key_t dctx_key;
static pthread_once_t dctx_once = PTHREAD_ONCE_INIT;
static bool dctx_key_ok;

static void dctx_destroy(void *p)
{
    ZSTD_freeDCtx(p);
}

static void dctx_key_make(void)
{
    dctx_key_ok = pthread_key_create(&dctx_key, dctx_destroy) == 0;
}

static ZSTD_DCtx *thread_dctx(void)
{
    pthread_once(&dctx_once, dctx_key_make);
    if (!dctx_key_ok) {
        return NULL;
    }
    ZSTD_DCtx *d = pthread_getspecific(dctx_key);
    if (d == NULL && (d = ZSTD_createDCtx()) != NULL && pthread_setspecific(dctx_key, d) != 0) {
        ZSTD_freeDCtx(d);
        d = NULL;
    }
    return d;
}

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
    out->table_heap_bytes = atomic_load(&st_heap);
    out->table_inflated_bytes = atomic_load(&st_inflated);
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

/* Decodes a delta INT column (format 3): |count| > 0 values, the first
 * at |first|, each next one the previous plus base + the stored value
 * (modulo 2^64), into a fresh array the block owns. 0 or -ENOMEM. */
static int decode_delta(const uint8_t *s, unsigned w, uint64_t base, uint64_t first, uint64_t count,
                        uint64_t **out)
{
    uint64_t *v = malloc(count * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    blk_heap_add(v);
    uint64_t x = first;
    v[0] = x;
    switch (w) {
    case 0:
        for (uint64_t i = 1; i < count; i++) {
            v[i] = x += base;
        }
        break;
    case 1:
        for (uint64_t i = 1; i < count; i++) {
            v[i] = x += base + s[i - 1];
        }
        break;
    case 2:
        for (uint64_t i = 1; i < count; i++) {
            uint16_t d;
            memcpy(&d, s + 2 * (i - 1), 2);
            v[i] = x += base + d;
        }
        break;
    case 4:
        for (uint64_t i = 1; i < count; i++) {
            v[i] = x += base + rd32(s + 4 * (i - 1));
        }
        break;
    default:
        for (uint64_t i = 1; i < count; i++) {
            v[i] = x += base + rd64(s + 8 * (i - 1));
        }
        break;
    }
    *out = v;
    return 0;
}

/* Decodes a varint delta INT column (format 4): |count| > 0 values, the
 * first at |first|, then uv zz deltas that must end exactly at |end|. 0,
 * -EBADMSG or -ENOMEM. */
static int decode_var(const uint8_t *s, const uint8_t *end, uint64_t first, uint64_t count,
                      uint64_t **out)
{
    uint64_t *v = malloc(count * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    uint64_t x = first;
    v[0] = x;
    bool bad = false;
    for (uint64_t i = 1; i < count && !bad; i++) {
        v[i] = x += (uint64_t)unzz(uv_take(&s, end, &bad));
    }
    if (bad || s != end) {
        free(v);
        return -EBADMSG;
    }
    *out = v;
    return 0;
}

/* Decodes a byte-plane INT column (META flag bit 7): |count| > 0 values;
 * |pw| planes of |m| bytes at |s| (m = count, or count - 1 with |delta|
 * after |first|); stored value u = the planes' bytes, value = base + g u
 * (with |delta|: the previous value + base + g u), modulo 2^64. 0 or
 * -ENOMEM. */
static int decode_planes(const uint8_t *s, unsigned pw, uint64_t base, uint64_t g, bool delta,
                         uint64_t first, uint64_t count, uint64_t **out)
{
    uint64_t *v = malloc(count * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    blk_heap_add(v);
    uint64_t m = delta ? count - 1 : count;
    uint64_t *u = delta ? v + 1 : v;
    memset(u, 0, m * sizeof(*u));
    for (unsigned j = 0; j < pw; j++) {
        const uint8_t *pl = s + j * m;
        for (uint64_t i = 0; i < m; i++) {
            u[i] |= (uint64_t)pl[i] << (8 * j);
        }
    }
    if (delta) {
        uint64_t x = first;
        v[0] = x;
        for (uint64_t i = 1; i < count; i++) {
            v[i] = x += base + g * v[i];
        }
    } else {
        for (uint64_t i = 0; i < count; i++) {
            v[i] = base + g * v[i];
        }
    }
    *out = v;
    return 0;
}

/*
 * Binds an INT column of exactly |count| values at p[0, len): 0, -EBADMSG
 * or -ENOMEM. A delta column (format 3) is decoded into |*dec| (freed with
 * the block), which then holds it as plain 8-byte values; its count is
 * bounded by the file size first (a width-0 column could claim any count).
 */
static int bind_int(const blk *b, const uint8_t *p, uint64_t len, uint64_t count, struct icol *c,
                    uint64_t **dec)
{
    if (len < INT_HDR || rd64(p) != count) {
        return -EBADMSG;
    }
    unsigned w = p[16], enc = p[17];
    if ((enc == INT_PLANES || enc == INT_DPLANES) && b->int_planes && count > 0) {
        bool delta = enc == INT_DPLANES;
        uint64_t m = delta ? count - 1 : count, hl = INT_HDR + (delta ? 16 : 8);
        /* pw planes of m bytes exactly, a divisor of 1 or more: the decoded
         * array is 8 bytes a stored byte at most (m of 0: 8 bytes) */
        if (w < 1 || w > 8 || len < hl || m > (len - hl) / w || len != hl + m * w ||
            rd64(p + hl - 8) == 0) {
            return -EBADMSG;
        }
        blk_heap_free(*dec);
        *dec = NULL;
        int rc = decode_planes(p + hl, w, rd64(p + 8), rd64(p + hl - 8), delta, rd64(p + INT_HDR),
                               count, dec);
        if (rc < 0) {
            return rc;
        }
        *c = (struct icol){(const uint8_t *)*dec, 0, 8};
        return 0;
    }
    if (w != 0 && w != 1 && w != 2 && w != 4 && w != 8) {
        return -EBADMSG;
    }
    if (enc == INT_DELTA && b->version >= 3 && count > 0) {
        uint64_t n = count - 1;
        /* The decoded array is bounded by the bytes there are: the file, or
         * a zstd table's raw length (itself bounded, see the format), which
         * a cold block's well-compressed tables exceed the file by. */
        uint64_t bound = b->size;
        for (int t = 0; t < N_TABLES; t++) {
            bound = b->dir[t].raw > bound ? b->dir[t].raw : bound;
        }
        if (count > bound / 8 + 1 || len < INT_HDR + 8 || (w != 0 && n > (len - INT_HDR - 8) / w) ||
            len != INT_HDR + 8 + n * w) {
            return -EBADMSG;
        }
        blk_heap_free(*dec);
        *dec = NULL;
        int rc = decode_delta(p + INT_HDR + 8, w, rd64(p + 8), rd64(p + INT_HDR), count, dec);
        if (rc < 0) {
            return rc;
        }
        *c = (struct icol){(const uint8_t *)*dec, 0, 8};
        return 0;
    }
    if (enc == INT_VAR && b->version >= 4 && count > 0) {
        uint64_t bound = b->size;
        for (int t = 0; t < N_TABLES; t++) {
            bound = b->dir[t].raw > bound ? b->dir[t].raw : bound;
        }
        /* every value past the first takes a byte at least */
        if (w != 0 || rd64(p + 8) != 0 || len < INT_HDR + 8 || count - 1 > len - INT_HDR - 8 ||
            count > bound / 8 + 1) {
            return -EBADMSG;
        }
        blk_heap_free(*dec);
        *dec = NULL;
        int rc = decode_var(p + INT_HDR + 8, p + len, rd64(p + INT_HDR), count, dec);
        if (rc < 0) {
            return rc;
        }
        blk_heap_add(*dec);
        *c = (struct icol){(const uint8_t *)*dec, 0, 8};
        return 0;
    }
    if (enc != INT_FOR) {
        return -EBADMSG;
    }
    if ((w != 0 && count > (len - INT_HDR) / w) || len != INT_HDR + count * w) {
        return -EBADMSG;
    }
    c->p = p + INT_HDR;
    c->base = rd64(p + 8);
    c->width = w;
    return 0;
}

/* Binds the start column of a metric root by reference (format 6, META
 * flag bit 9): INT encoding 5, decoded into |*dec| against the time column
 * bound before it. 0, -EBADMSG or -ENOMEM. */
static int bind_pstart(const blk *b, const uint8_t *p, uint64_t len, struct icol *c, uint64_t **dec)
{
    if (len < INT_HDR || rd64(p) != b->rows || rd64(p + 8) != 0 || p[16] != 0 ||
        p[17] != INT_PSTART) {
        return -EBADMSG;
    }
    blk_heap_free(*dec);
    *dec = NULL;
    int rc = pstart_decode(p + INT_HDR, p + len, &b->I[M_TIME], b->rows, dec);
    if (rc < 0) {
        return rc;
    }
    blk_heap_add(*dec);
    *c = (struct icol){(const uint8_t *)*dec, 0, 8};
    return 0;
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
 * A sparse column (format 4): the bitmap bm[0, bn) of |b->rows| bits (the
 * bits past them zero), then 8 bytes for each bit set, expanded into
 * rows x 8 bytes the block owns (a clear bit: a value of zero bits) and
 * bound as R column |idx|. 0, -EBADMSG, -ENOMEM.
 */
static int bind_sparse(blk *b, unsigned idx, const uint8_t *bm, uint64_t bn, const uint8_t *v,
                       uint64_t vn)
{
    uint64_t rows = b->rows;
    if (bn != rows / 8 + (rows % 8 != 0) || vn % 8 != 0) {
        return -EBADMSG;
    }
    uint64_t set = 0;
    for (uint64_t i = 0; i < bn; i++) {
        set += (uint64_t)__builtin_popcount(bm[i]);
    }
    if (set != vn / 8 || (rows % 8 != 0 && (bm[bn - 1] >> (rows % 8)) != 0)) {
        return -EBADMSG;
    }
    blk_heap_free(b->zfull[idx]);
    b->zfull[idx] = calloc(rows ? rows : 1, 8);
    if (b->zfull[idx] == NULL) {
        return -ENOMEM;
    }
    blk_heap_add(b->zfull[idx]);
    uint8_t *out = b->zfull[idx];
    for (uint64_t i = 0, k = 0; i < rows; i++) {
        if (bm[i >> 3] & (1u << (i & 7))) {
            memcpy(out + 8 * i, v + 8 * k++, 8);
        }
    }
    b->R[idx] = out;
    return 0;
}

/*
 * Binds the columns of table |t| from its raw bytes. Two passes: first
 * every column's size against the row count (cheap, and it bounds the row
 * count by real bytes: a column of width w > 0 holds rows x w bytes), then
 * the value checks that walk the rows.
 */
static int bind_table(blk *b, int t, const uint8_t *p, uint64_t len)
{
    const struct spec *sp = spec_of(b->version, b->sig, t);
    /* v5 logs and spans: a value dictionary, and no hot key columns (found
     * while the lists are rebuilt) */
    bool vd = t == 1 && b->version >= 5 && b->sig != SIG_METRICS;
    unsigned nfixed = phys_cols(sp), nphys = nfixed + (t == 1 && !vd ? b->n_hot : 0);
    uint64_t **dec = b->dec[t];
    int rc;
    if (len < 8 || rd32(p) != nphys || (len - 8) / 16 < nphys) {
        return -EBADMSG;
    }
    const uint8_t *cp[MAX_PHYS];
    uint64_t cl[MAX_PHYS];
    for (unsigned i = 0; i < nphys; i++) {
        uint64_t o = rd64(p + 8 + 16 * i), l = rd64(p + 16 + 16 * i);
        if (o > len || l > len - o || (o & 7) != 0) {
            return -EBADMSG;
        }
        cp[i] = p + o;
        cl[i] = l;
    }
    uint64_t rows = b->rows, n_flists = 0;
    unsigned c = 0;
    for (unsigned i = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        switch (e->type) {
        case 'K':
        case 'V':
        case 'F': {
            /* an S of its own count: the key dictionary (at most KC_MAX
             * keys), (v5) the value dictionary (at most VD_MAX entries of
             * 2 bytes or more), or (v4) the f64 lists (at most one a row,
             * each but one empty with bytes) */
            struct scol *sc = &b->S[e->idx];
            uint64_t n1 = cl[c] >= INT_HDR ? rd64(cp[c]) : 0;
            if (n1 == 0 || (e->type == 'K'   ? n1 > KC_MAX + 1
                            : e->type == 'V' ? n1 > VD_MAX + 1 || n1 - 1 > cl[c + 1] / 2
                                             : n1 > rows + 1 || n1 - 1 > cl[c + 1] / 8 + 1)) {
                return -EBADMSG;
            }
            if ((rc = bind_int(b, cp[c], cl[c], n1, &sc->off, &dec[c])) < 0) {
                return rc;
            }
            if (!check_offsets(&sc->off, n1, cl[c + 1])) {
                return -EBADMSG;
            }
            sc->data = cp[c + 1];
            *(e->type == 'K' ? &b->n_keys : e->type == 'V' ? &b->n_vals : &n_flists) = n1 - 1;
            c += 2;
            break;
        }
        case 'I':
            rc = t == 0 && b->pstart && e->idx == M_START /* after M_TIME */
                     ? bind_pstart(b, cp[c], cl[c], &b->I[M_START], &dec[c])
                     : bind_int(b, cp[c], cl[c], rows, &b->I[e->idx], &dec[c]);
            if (rc < 0) {
                return rc;
            }
            c += 1;
            break;
        case 'S': {
            struct scol *sc = &b->S[e->idx];
            if ((rc = bind_int(b, cp[c], cl[c], rows + 1, &sc->off, &dec[c])) < 0) {
                return rc;
            }
            sc->data = cp[c + 1];
            c += 2;
            break;
        }
        case 'D': {
            struct dcol *dc = &b->D[e->idx];
            if ((rc = bind_int(b, cp[c], cl[c], rows, &dc->codes, &dec[c])) < 0) {
                return rc;
            }
            if (cl[c + 1] < INT_HDR) {
                return -EBADMSG;
            }
            uint64_t nd1 = rd64(cp[c + 1]);
            /* Format 3: no more entries than rows, nor than data bytes + 1
             * (distinct entries, at most one empty): a width-0 offset column
             * claims no count its bytes cannot back. */
            if (nd1 == 0 || (b->version >= 3 && (nd1 > rows + 1 || nd1 - 1 > cl[c + 2] + 1))) {
                return -EBADMSG;
            }
            if ((rc = bind_int(b, cp[c + 1], cl[c + 1], nd1, &dc->dict.off, &dec[c + 1])) < 0) {
                return rc;
            }
            /* format 6, META flag bit 4: the lists' data typed by key, of
             * another length than the offsets' (the rebuild checks theirs) */
            bool typed = t == 1 && e->idx == X_ADICT && b->typed_vals;
            uint64_t dlen = typed ? ic_get(&dc->dict.off, nd1 - 1) : cl[c + 2];
            if (!check_offsets(&dc->dict.off, nd1, dlen)) {
                return -EBADMSG;
            }
            dc->dict.data = cp[c + 2];
            c += 3;
            break;
        }
        case 'R':
            if (cl[c] / e->arg != rows || cl[c] % e->arg != 0) {
                return -EBADMSG;
            }
            b->R[e->idx] = cp[c];
            c += 1;
            break;
        case 'Z':
            if ((rc = bind_sparse(b, e->idx, cp[c], cl[c], cp[c + 1], cl[c + 1])) < 0) {
                return rc;
            }
            c += 2;
            break;
        case 'P': {
            struct icol refs;
            blk_heap_free(b->zfull[e->idx]); /* counted here, expanded by block_parents.c */
            b->zfull[e->idx] = NULL;
            if ((rc = bind_int(b, cp[c], cl[c], rows, &refs, &dec[c])) < 0 ||
                (rc = prefs_expand(b, e->idx, &refs, cp[c + 1], cl[c + 1])) < 0) {
                free(b->zfull[e->idx]);
                b->zfull[e->idx] = NULL;
                return rc;
            }
            blk_heap_add(b->zfull[e->idx]);
            c += 2;
            break;
        }
        case 'T': /* format 6: the lists' stream lengths, checked when they are used */
            b->atrans = cl[c] > 0 ? cp[c] : NULL;
            b->atrans_len = cl[c];
            c += 1;
            break;
        }
    }
    for (unsigned h = 0; c + h < nphys; h++) {
        if ((rc = bind_int(b, cp[c + h], cl[c + h], rows, &b->hot[h], &dec[c + h])) < 0) {
            return rc;
        }
    }
    c = 0;
    for (unsigned i = 0; i < sp->n; i++) {
        const struct ent *e = &sp->e[i];
        switch (e->type) {
        case 'I': {
            uint64_t lim = lim_value(b, (enum lim)e->arg);
            if (lim != UINT64_MAX && !all_below(&b->I[e->idx], rows, lim)) {
                return -EBADMSG;
            }
            c += 1;
            break;
        }
        case 'S':
            if (t == 0 && b->body_tmpl && e->idx == L_BODY) {
                /* Format 6: the bodies by template, rebuilt by the first
                 * read that wants one (blk_body_load): a scan that rejects
                 * rows on their attributes never pays for it. */
                blk_heap_free(b->bbody);
                blk_heap_free(b->bbody_off);
                b->bbody = NULL;
                b->bbody_off = NULL;
                b->benc_len = cl[c + 1];
                atomic_store_explicit(&b->bbody_state, 0, memory_order_relaxed);
            } else if (t == 2 && b->sev_key && e->idx == T_EVENTS) {
                /* by key: offsets all 0, the encoding checked by its rebuild */
                const struct icol *o = &b->S[T_EVENTS].off;
                if (o->width != 0 || o->base != 0) {
                    return -EBADMSG;
                }
                b->sev_len = cl[c + 1];
            } else if (!check_offsets(&b->S[e->idx].off, rows + 1, cl[c + 1])) {
                return -EBADMSG;
            }
            c += 2;
            break;
        case 'D': {
            const struct dcol *dc = &b->D[e->idx];
            if (!all_below(&dc->codes, rows, rd64(cp[c + 1]) - 1)) {
                return -EBADMSG;
            }
            c += 3;
            break;
        }
        case 'K':
        case 'V':
        case 'Z':
        case 'F':
        case 'P':
            c += 2;
            break;
        default:
            c += 1;
            break;
        }
    }
    if (t == 0 && b->version >= 4 && b->sig == SIG_TRACES) {
        /* The trace ids: entries of 16 bytes, each (the views copy 16). */
        const struct scol *d = &b->D[X_TRACES].dict;
        uint64_t nd = rd64(cp[4]) - 1; /* the dictionary's offsets: start, duration,
                                        * scope, then its codes, offsets, data */
        for (uint64_t k = 0; k < nd; k++) {
            if (ic_get(&d->off, k + 1) - ic_get(&d->off, k) != 16) {
                return -EBADMSG;
            }
        }
    }
    if (t == 2 && b->version >= 4 && b->sig == SIG_METRICS) {
        /* The detail entries, rebuilt into batch.h's encoding. */
        blk_heap_free(b->mdet);
        blk_heap_free(b->mdet_off);
        b->mdet = NULL;
        b->mdet_off = NULL;
        rc = mdet_rebuild(&b->S[M_DETAIL], rows, &b->S[X_FLISTS], n_flists, &b->mdet, &b->mdet_off);
        if (rc < 0) {
            return rc;
        }
        blk_heap_add(b->mdet);
        blk_heap_add(b->mdet_off);
    }
    if (t == 2 && b->sdet_coded) {
        /* Format 6: the events and links, rebuilt against the root. */
        for (int k = 0; k < 2; k++) {
            blk_heap_free(b->sdet[k]);
            blk_heap_free(b->sdet_off[k]);
            b->sdet[k] = NULL;
            b->sdet_off[k] = NULL;
            rc = k == 0 && b->sev_key
                     ? sev_rebuild(b, &b->S[T_EVENTS], b->sev_len, &b->sdet[k], &b->sdet_off[k])
                     : sdet_rebuild(b, &b->S[k == 0 ? T_EVENTS : T_LINKS], k, &b->sdet[k],
                                    &b->sdet_off[k]);
            if (rc < 0) {
                return rc;
            }
            blk_heap_add(b->sdet[k]);
            blk_heap_add(b->sdet_off[k]);
        }
    }
    if (t == 1 && b->version >= 3) {
        /* The lists, rebuilt: what the views and the hot positions read. */
        blk_heap_free(b->alists);
        blk_heap_free(b->alists_off);
        b->alists = NULL;
        b->alists_off = NULL;
        /* the count column, then the dictionary's codes, offsets, data */
        uint64_t nd = rd64(cp[2]) - 1;
        if ((uint64_t)(p + len - (cp[3] + cl[3])) < AKEYS_SLACK) {
            return -EBADMSG; /* the key dictionary follows in a file we wrote */
        }
        uint8_t *lists = NULL;
        if (b->typed_vals && b->atrans == NULL) {
            return -EBADMSG; /* META flag bit 4 without lists by key */
        }
        if (b->version >= 6 && b->atrans != NULL) {
            /* Format 6: the lists stored by key, back in their layout for
             * the rebuild (this copy lives only as long as it). */
            rc = akeys_from_keys(cp[3], cl[3], b->atrans, b->atrans_len, b->n_keys,
                                 vd ? b->n_vals : 0, b->typed_vals,
                                 ic_get(&b->D[X_ADICT].dict.off, nd), &lists);
            if (rc < 0) {
                return rc;
            }
            b->D[X_ADICT].dict.data = lists;
        }
        rc = akeys_load(b, nd, vd);
        if (rc < 0 && lists != NULL) {
            b->D[X_ADICT].dict.data = cp[3];
        }
        free(lists);
        if (rc < 0) {
            return rc;
        }
        if (b->streams_derived && !atomic_load(&b->streams_ready)) {
            rc = streams_derive(b, nd); /* format 6: the index from the rows */
            if (rc < 0) {
                return rc;
            }
        }
    }
    if (t == 1 && b->n_hot > 0) {
        /* A value position lies inside its row's attribute list. */
        for (unsigned h = 0; h < b->n_hot; h++) {
            const struct icol *hc = &b->hot[h];
            if (hc->width == 0 && hc->base == 0) {
                continue;
            }
            for (uint64_t r = 0; r < rows; r++) {
                uint64_t at = ic_get(hc, r);
                if (at != 0 && at > attrs_bytes(b, r).len) {
                    return -EBADMSG;
                }
            }
        }
    }
    b->tcols[t] = nphys;
    return 0;
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
    if (d->codec != BLK_CODEC_PLAIN) {
        bool by_col = d->codec == BLK_CODEC_ZSTD_COLS;
        if (d->raw == 0 || (!by_col && ZSTD_getFrameContentSize(raw, d->len) != d->raw)) {
            return -EBADMSG;
        }
        uint8_t *z = malloc(d->raw);
        if (z == NULL) {
            return -ENOMEM;
        }
        zbuf_add(z);
        ZSTD_DCtx *dc = thread_dctx();
        size_t zn = by_col       ? (blk_zcols_inflate(dc, raw, d->len, z, d->raw) == 0 ? d->raw : 0)
                    : dc != NULL ? ZSTD_decompressDCtx(dc, z, d->raw, raw, d->len)
                                 : ZSTD_decompress(z, d->raw, raw, d->len);
        if (ZSTD_isError(zn) || zn != d->raw) {
            zbuf_free(&z);
            return -EBADMSG;
        }
        zbuf_free(&b->zbuf[t]); /* a load that ran out of memory may have left one */
        b->zbuf[t] = z;
        raw = z;
    }
    int rc = 0;
    if ((t == 2 && b->sdet_coded) ||
        (t == 1 && b->streams_derived && !atomic_load(&b->streams_ready))) {
        /* the coded events and links read the root's starts and ids, the
         * derived stream index its metric column */
        int st = atomic_load_explicit(&b->tstate[0], memory_order_relaxed);
        if (st == TS_NONE) {
            rc = do_table_load(b, 0);
            if (rc != -ENOMEM) {
                atomic_store_explicit(&b->tstate[0], rc == 0 ? TS_OK : TS_BAD,
                                      memory_order_release);
            }
        } else if (st != TS_OK) {
            rc = -EBADMSG;
        }
    }
    if (rc == 0) {
        rc = bind_table(b, t, raw, d->raw);
    }
    if (rc < 0) {
        return rc;
    }
    if (use_cache && !cached) {
        vcache_insert(&k);
    }
    return 0;
}

int blk_table_load(blk *b, int t)
{
    stamp(b);
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

int blk_body_load(blk *b)
{
    pthread_mutex_lock(&b->lock);
    int st = atomic_load_explicit(&b->bbody_state, memory_order_relaxed);
    int rc = st == 1 ? 0 : st;
    if (st == 0) {
        uint8_t *buf;
        uint64_t *offs;
        rc = btmpl_rebuild(&b->S[L_BODY], b->benc_len, b->rows, b->body_slots, &buf, &offs);
        if (rc == 0) {
            b->bbody = buf;
            b->bbody_off = offs;
            blk_heap_add(buf);
            blk_heap_add(offs);
            b->body_rebuilds++;
            atomic_store_explicit(&b->bbody_state, 1, memory_order_release);
        } else if (rc != -ENOMEM) {
            atomic_store_explicit(&b->bbody_state, rc, memory_order_release);
        }
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

unsigned blk_body_rebuilds(const blk *b)
{
    return b->body_rebuilds;
}

int blk_load(blk *b, unsigned want)
{
    stamp(b);
    int rc = ready(b, want);
    if (rc == 0 && wants_body(want)) {
        rc = body_ready(b);
    }
    return rc;
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

/* One bloom entry (section 4's layout) at |r|: false when malformed; kind
 * and bits checked, not the kind's range (the caller's). */
static bool parse_bloom_entry(struct rd *r, struct bloom_r *bl, uint8_t *kind)
{
    uint8_t algo, k, flags;
    uint32_t zero;
    if (!rd_u8(r, kind) || !rd_u8(r, &algo) || !rd_u8(r, &k) || !rd_u8(r, &flags) ||
        !rd_u32(r, &zero) || !rd_u64(r, &bl->seed) || !rd_u64(r, &bl->nbits) ||
        !rd_u64(r, &bl->items)) {
        return false;
    }
    if (algo != BLOOM_ALGO_XXH3_SPLIT || k != BLOOM_K || bl->nbits == 0 ||
        bl->nbits % BLOOM_BLOCK_BITS != 0 || bl->nbits / 8 > (uint64_t)(r->end - r->p)) {
        return false;
    }
    bl->kind = (enum blk_bloom_kind) * kind;
    bl->k = k;
    bl->complete = (flags & 1) == 0;
    bl->bits = r->p;
    r->p += bl->nbits / 8;
    return true;
}

static bool parse_blooms(blk *b, struct rd r)
{
    uint32_t n, z;
    if (!rd_u32(&r, &n) || !rd_u32(&r, &z) || n > 64) {
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint8_t kind;
        struct bloom_r bl;
        if (!parse_bloom_entry(&r, &bl, &kind)) {
            return false;
        }
        /* a kind this reader does not know is skipped; of a repeated kind the
         * first counts (bloom_of) */
        bool dup = kind < 1 || kind > BLK_BLOOM_RES_ATTRS;
        for (uint32_t j = 0; j < b->n_blooms && !dup; j++) {
            dup = b->blooms[j].kind == bl.kind;
        }
        if (dup) {
            continue;
        }
        b->blooms[b->n_blooms++] = bl;
        b->bloom_bytes += 32 + bl.nbits / 8;
    }
    return true;
}

/* Section 10: the body gram bloom, one entry of kind 5. */
static bool parse_grams(blk *b, struct rd r)
{
    uint8_t kind;
    struct bloom_r bl;
    if (!parse_bloom_entry(&r, &bl, &kind) || kind != BLK_BLOOM_GRAMS || b->sig != SIG_LOGS) {
        return false;
    }
    b->blooms[b->n_blooms++] = bl;
    b->bloom_bytes += 32 + bl.nbits / 8;
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

static bool parse_sources(blk *b, struct rd r)
{
    uint32_t n, z;
    if (!rd_u32(&r, &n) || !rd_u32(&r, &z) || n == 0 ||
        (uint64_t)(r.end - r.p) != (uint64_t)n * SOURCE_SIZE) {
        return false;
    }
    b->sources = r.p;
    b->n_sources = n;
    return true;
}

/*
 * Format 6's section 12 (META flag bit 3): u64 raw length, then one zstd
 * frame of sections 5, 6 and 7, each once, laid out as in the footer (8-
 * aligned from the frame's start), inflated into b->fdicts (the views of
 * resources, scopes and metrics point into it) and set in |secs|. False
 * when malformed: any other section inside, one missing, or there already.
 */
static bool inflate_dicts(blk *b, struct rd r, struct rd *secs, bool *have)
{
    uint64_t raw;
    if (!rd_u64(&r, &raw) || raw == 0 || raw > ZSTD_RAW_MAX ||
        raw / ZSTD_RATIO_CAP > (uint64_t)(r.end - r.p) ||
        ZSTD_getFrameContentSize(r.p, (size_t)(r.end - r.p)) != raw) {
        return false;
    }
    uint8_t *d = malloc(raw);
    if (d == NULL) {
        return false;
    }
    size_t zn = ZSTD_decompress(d, raw, r.p, (size_t)(r.end - r.p));
    if (ZSTD_isError(zn) || zn != raw) {
        free(d);
        return false;
    }
    blk_heap_add(d);
    b->fdicts = d; /* freed with the block */
    struct rd q = {d, d + raw};
    for (int k = 0; k < 3; k++) {
        uint32_t id, z;
        uint64_t len;
        q.p = d + ((uint64_t)(q.p - d) + 7) / 8 * 8;
        if (q.p > q.end || !rd_u32(&q, &id) || !rd_u32(&q, &z) || !rd_u64(&q, &len) ||
            len > (uint64_t)(q.end - q.p) || id < SEC_RESOURCES || id > SEC_METRICS || have[id]) {
            return false;
        }
        have[id] = true;
        secs[id] = (struct rd){q.p, q.p + len};
        q.p += len;
    }
    return q.p == q.end;
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
        if (!have[id] && id != SEC_ZONES && !(have[SEC_DICTS] && id >= SEC_RESOURCES)) {
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
    /* v6: bit 1 span blocks' coded detail, bit 2 log blocks' bodies by
     * template or metric blocks' streams from the rows, bit 3 any block's
     * dictionaries in section 12, bit 4 log and span blocks' typed value
     * streams, bit 5 span blocks' events by key, bit 6 any block's tables
     * by column, bit 7 log and span blocks' INT byte planes, bit 8 log
     * blocks' bodies by slot, bit 9 metric blocks' starts by reference;
     * any other bit is a newer writer's */
    uint64_t known = 1 | 64 | (b->sig == SIG_TRACES ? 2 | 32 : 0) | (b->sig != SIG_TRACES ? 4 : 0) |
                     8 | (b->sig != SIG_METRICS ? 16 | 128 : 512) | (b->sig == SIG_LOGS ? 256 : 0);
    if (b->version >= 6 && (flags & ~known) != 0) {
        return fail(err, errlen, "footer meta flags %#llx unknown", (unsigned long long)flags);
    }
    if ((b->version >= 6 && (flags & 8) != 0) != have[SEC_DICTS]) {
        return fail(err, errlen, "footer meta flag bit 3 and the dictionary section disagree");
    }
    if (have[SEC_DICTS] && !inflate_dicts(b, secs[SEC_DICTS], secs, have)) {
        return fail(err, errlen, "malformed compressed dictionary section");
    }
    b->sdet_coded = b->version >= 6 && (flags & 2) != 0;
    b->sev_key = b->version >= 6 && (flags & 32) != 0;
    if (b->sev_key && !b->sdet_coded) {
        return fail(err, errlen, "footer meta flag bit 5 without bit 1");
    }
    b->body_tmpl = b->version >= 6 && (flags & 4) != 0 && b->sig == SIG_LOGS;
    b->body_slots = b->version >= 6 && (flags & 256) != 0;
    if (b->body_slots && !b->body_tmpl) {
        return fail(err, errlen, "footer meta flag bit 8 without bit 2");
    }
    b->streams_derived = b->version >= 6 && (flags & 4) != 0 && b->sig == SIG_METRICS;
    b->typed_vals = b->version >= 6 && (flags & 16) != 0;
    b->zcols = b->version >= 6 && (flags & 64) != 0;
    b->int_planes = b->version >= 6 && (flags & 128) != 0;
    b->pstart = b->version >= 6 && (flags & 512) != 0 && b->sig == SIG_METRICS;
    b->meta_flags = flags;

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
        if (d->codec > (b->zcols ? BLK_CODEC_ZSTD_COLS : BLK_CODEC_ZSTD)) {
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
    if (have[SEC_STREAMS] && b->streams_derived) {
        return fail(err, errlen, "metric stream section in a block whose streams are its rows'");
    }
    if (have[SEC_STREAMS] && !streams_parse(b, secs[SEC_STREAMS].p, secs[SEC_STREAMS].end)) {
        return fail(err, errlen, "malformed metric stream section");
    }
    if (have[SEC_GRAMS] && !parse_grams(b, secs[SEC_GRAMS])) {
        return fail(err, errlen, "malformed body gram bloom section");
    }
    if (have[SEC_SOURCES] && !parse_sources(b, secs[SEC_SOURCES])) {
        return fail(err, errlen, "malformed cold block source section");
    }
    return 0;
}

static void blk_destroy(blk *b)
{
    if (b == NULL) {
        return;
    }
    if (atomic_load(&b->unlink_on_release) && b->path != NULL) {
        unlink(b->path); /* compaction replaced it; nobody reads it any more */
    }
    if (b->map != NULL) {
        munmap(b->map, b->size);
    }
    for (int t = 0; t < N_TABLES; t++) {
        zbuf_free(&b->zbuf[t]);
        for (int c = 0; c < MAX_PHYS; c++) {
            blk_heap_free(b->dec[t][c]);
        }
    }
    blk_heap_free(b->alists);
    blk_heap_free(b->alists_off);
    blk_heap_free(b->hotpos);
    for (int i = 0; i < MAX_R; i++) {
        blk_heap_free(b->zfull[i]);
    }
    blk_heap_free(b->mdet);
    blk_heap_free(b->mdet_off);
    for (int k = 0; k < 2; k++) {
        blk_heap_free(b->sdet[k]);
        blk_heap_free(b->sdet_off[k]);
    }
    blk_heap_free(b->bbody);
    blk_heap_free(b->bbody_off);
    blk_heap_free(b->sbuf);
    blk_heap_free(b->fdicts);
    blk_heap_free(atomic_load(&b->col_time));
    if (atomic_load(&b->aux) != NULL) {
        b->aux_free(atomic_load(&b->aux));
    }
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
    if (version < BLK_VERSION_MIN) {
        return fail(err, errlen, "unknown block format version %u (this miradb reads %d to %d)",
                    version, BLK_VERSION_MIN, BLK_VERSION);
    }
    b->version = version;
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
    if (b->flags & BLK_OPEN_DEFER_ROOT) {
        const struct tdir *d = &b->dir[0];
        if (hash_counted(b->map + d->off, d->len, true) != d->crc) {
            atomic_fetch_add(&st_failures, 1);
            return fail(err, errlen, "root table checksum mismatch");
        }
        return 0;
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

void blk_pin(blk *b)
{
    pthread_mutex_lock(&b->lock);
    b->pins++;
    pthread_mutex_unlock(&b->lock);
}

void blk_unpin(blk *b)
{
    pthread_mutex_lock(&b->lock);
    b->pins--;
    pthread_mutex_unlock(&b->lock);
}

/* Frees the tables; b->lock held. Returns the aux attachment to free
 * after unlocking. */
static void *drop_tables_locked(blk *b)
{
    for (int t = 0; t < N_TABLES; t++) {
        if (atomic_load_explicit(&b->tstate[t], memory_order_relaxed) != TS_OK) {
            continue;
        }
        zbuf_free(&b->zbuf[t]);
        for (int c = 0; c < MAX_PHYS; c++) {
            blk_heap_free(b->dec[t][c]);
            b->dec[t][c] = NULL;
        }
        if (t == 0) { /* format 4's expanded sparse columns */
            for (int i = 0; i < MAX_R; i++) {
                blk_heap_free(b->zfull[i]);
                b->zfull[i] = NULL;
            }
            blk_heap_free(b->bbody); /* format 6's rebuilt log bodies */
            blk_heap_free(b->bbody_off);
            b->bbody = NULL;
            b->bbody_off = NULL;
            atomic_store_explicit(&b->bbody_state, 0, memory_order_relaxed);
        }
        if (t == 1) {
            blk_heap_free(b->alists);
            blk_heap_free(b->alists_off);
            blk_heap_free(b->hotpos);
            b->alists = NULL;
            b->alists_off = NULL;
            b->hotpos = NULL;
        }
        if (t == 2) { /* format 4's rebuilt metric detail */
            blk_heap_free(b->mdet);
            blk_heap_free(b->mdet_off);
            b->mdet = NULL;
            b->mdet_off = NULL;
            for (int k = 0; k < 2; k++) { /* format 6's rebuilt span events and links */
                blk_heap_free(b->sdet[k]);
                blk_heap_free(b->sdet_off[k]);
                b->sdet[k] = NULL;
                b->sdet_off[k] = NULL;
            }
        }
        atomic_store_explicit(&b->tstate[t], TS_NONE, memory_order_relaxed);
    }
    blk_heap_free(atomic_exchange(&b->col_time, NULL));
    return atomic_exchange(&b->aux, NULL); /* built on the time column just freed */
}

void blk_drop_tables(blk *b)
{
    pthread_mutex_lock(&b->lock);
    void *aux = drop_tables_locked(b);
    pthread_mutex_unlock(&b->lock);
    if (aux != NULL) {
        b->aux_free(aux);
    }
}

bool blk_drop_tables_unpinned(blk *b)
{
    void *aux = NULL;
    /* Busy: a reader is loading a table (or pinning) under the lock; the
     * catalog calls this under its own lock, which must not wait on that. */
    if (pthread_mutex_trylock(&b->lock) != 0) {
        return false;
    }
    bool drop = b->pins == 0;
    if (drop) {
        aux = drop_tables_locked(b);
    }
    pthread_mutex_unlock(&b->lock);
    if (aux != NULL) {
        b->aux_free(aux);
    }
    return drop;
}

/* Page drops (blk_pages_dropped). */
static _Atomic uint64_t st_page_drops;

void blk_drop_pages(blk *b)
{
    if (b->map != NULL) {
        /* The mapping is shared and read-only, over a file nobody writes:
         * this only clears the process's page-table entries; the page cache
         * keeps the bytes and the next read faults them back in. */
        madvise(b->map, b->size, MADV_DONTNEED);
        atomic_fetch_add_explicit(&st_page_drops, 1, memory_order_relaxed);
    }
}

uint64_t blk_pages_dropped(void)
{
    return atomic_load_explicit(&st_page_drops, memory_order_relaxed);
}

bool blk_holds_tables(const blk *b)
{
    for (int t = 0; t < N_TABLES; t++) {
        if (atomic_load_explicit(&((blk *)b)->tstate[t], memory_order_relaxed) == TS_OK) {
            return true;
        }
    }
    return atomic_load_explicit(&((blk *)b)->col_time, memory_order_relaxed) != NULL ||
           atomic_load_explicit(&((blk *)b)->aux, memory_order_relaxed) != NULL;
}

bool blk_sole_ref(const blk *b)
{
    return atomic_load_explicit(&((blk *)b)->refs, memory_order_acquire) == 1;
}

uint64_t blk_read_stamp(const blk *b)
{
    return atomic_load_explicit(&((blk *)b)->read_stamp, memory_order_relaxed);
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

uint32_t blk_n_sources(const blk *b)
{
    return b->n_sources;
}

int blk_source(const blk *b, uint32_t i, struct blk_source *out)
{
    if (i >= b->n_sources) {
        return -EINVAL;
    }
    const uint8_t *e = b->sources + (size_t)i * SOURCE_SIZE;
    out->shard = rd32(e);
    out->seal_id = rd64(e + 8);
    out->wal_seq = rd64(e + 16);
    return 0;
}

void blk_unlink_on_release(blk *b)
{
    atomic_store(&b->unlink_on_release, true);
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

bool blk_may_have_substr(const blk *b, const char *p, size_t n)
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_GRAMS);
    if (bl == NULL || n < BLOOM_GRAM_N) {
        return true;
    }
    for (size_t i = 0; i + BLOOM_GRAM_N <= n; i++) {
        if (!bloom_test(bl->bits, bl->nbits, bloom_hash_gram(bloom_gram_of(p + i), bl->seed))) {
            return false;
        }
    }
    return true;
}

bool blk_may_have_attr(const blk *b, const char *key, size_t kn, const char *val, size_t vn)
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_ATTRS);
    return bl == NULL || bloom_test(bl->bits, bl->nbits, bloom_hash_kv(key, kn, val, vn, bl->seed));
}

bool blk_may_have_resource_value(const blk *b, const char *key, size_t kn, const char *val,
                                 size_t vn)
{
    const struct bloom_r *bl = bloom_of(b, BLK_BLOOM_RES_ATTRS);
    return bl == NULL || bloom_test(bl->bits, bl->nbits, bloom_hash_kv(key, kn, val, vn, bl->seed));
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
