/*
 * block.c - sealed block files: the reader with lazy table verification
 * (see block.h for the contract; DESIGN.md "Blocks" for the picture). The
 * file format, constants and shared structs are in block_int.h; the
 * writer is block_write.c.
 */
#include "storage/block_int.h"

#include <errno.h>
#include <fcntl.h>
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
