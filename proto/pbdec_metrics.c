/*
 * pbdec_metrics.c - the protobuf decoder's Metric: one metric row and a point row
 * per data point of each kind (number, histogram, exponential histogram,
 * summary), with exemplars, buckets and quantiles encoded into the heap
 * (see pbdec.c for the rules).
 */
#include "proto/pbdec_int.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* exemplars blob entry: u64 time, u8 point_value, 8 value bytes, u8 has_trace_id,
 * 16 trace_id, u8 has_span_id, 8 span_id, u32 count, u32 nbytes, attrs */
static int dec_exemplar(struct dec *d, const uint8_t *p, size_t n)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range attrs = {0};
    uint64_t time_ns = 0, value = 0;
    uint8_t pv = PV_NONE;
    uint8_t trace[16] = {0}, span[8] = {0};
    bool has_trace = false, has_span = false;
    uint32_t count = 0;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "exemplar.time_unix_nano");
            time_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "exemplar.as_double");
            pv = PV_DOUBLE;
            value = f.v;
            break;
        case 4:
            WANT(f, WT_LEN, "exemplar.span_id");
            has_span = get_id(&f, span, 8);
            break;
        case 5:
            WANT(f, WT_LEN, "exemplar.trace_id");
            has_trace = get_id(&f, trace, 16);
            break;
        case 6:
            WANT(f, WT_I64, "exemplar.as_int");
            pv = PV_INT;
            value = f.v;
            break;
        case 7:
            WANT(f, WT_LEN, "exemplar.filtered_attributes");
            range_add(&attrs, &f, &c);
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(hreserve(h, 8 + 1 + 8 + 1 + 16 + 1 + 8));
    put_u64(h, time_ns);
    put_u8(h, pv);
    put_u64(h, value);
    put_u8(h, has_trace);
    put_raw(h, trace, 16);
    put_u8(h, has_span);
    put_raw(h, span, 8);
    long at = put_attr_header(h);
    if (at < 0) {
        return -ENOMEM;
    }
    TRY(dec_attrs_range(d, &attrs, 7, &count));
    patch_attr_header(h, at, count);
    return 0;
}

static int dec_exemplars_slow(struct dec *d, const struct range *r, uint32_t num,
                              struct point_row *pt)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f;
    int rc = 0;

    pt->exemplars.off = (uint32_t)h->len;
    if (r->first != NULL) {
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == num) {
                TRY(heap_guard(d, f.at));
                TRY(dec_exemplar(d, f.p, f.len));
                pt->n_exemplars++;
            }
        }
    }
    pt->exemplars.len = (uint32_t)(h->len - pt->exemplars.off);
    return rc;
}

/* A point without exemplars (nearly all) costs two stores, not a call. */
static inline int dec_exemplars(struct dec *d, const struct range *r, uint32_t num,
                                struct point_row *pt)
{
    if (LIKELY(r->first == NULL)) {
        pt->exemplars.off = (uint32_t)d->b->heap.len;
        pt->exemplars.len = 0;
        return 0;
    }
    return dec_exemplars_slow(d, r, num, pt);
}

/* Checks a repeated fixed64/double occurrence: one I64 value or a packed run. */
static int check_rep64(struct dec *d, const struct fld *f, const char *name)
{
    if (f->wt == WT_LEN) {
        if (UNLIKELY(f->len % 8 != 0)) {
            return pbdec_fail(d, f->at, "packed %s length %zu is not a multiple of 8", name,
                              f->len);
        }
        return 0;
    }
    WANT(*f, WT_I64, name);
    return 0;
}

/* put_rep64 by walking |r| and picking |num|'s occurrences out. */
static int put_rep64_walk(struct dec *d, const struct range *r, uint32_t num)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f;
    uint32_t count = 0;
    int rc = 0;

    size_t at = h->len;
    TRY(put_u32(h, 0));
    if (r->first != NULL) {
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num != num) {
                continue;
            }
            if (f.wt == WT_LEN) {
                /* Wire and blob are both little-endian 8-byte values. */
                TRY(put_raw(h, f.p, f.len));
                count += (uint32_t)(f.len / 8);
            } else {
                TRY(put_u64(h, f.v));
                count++;
            }
        }
    }
    hpatch_u32(h, at, count);
    return rc;
}

/*
 * u32 n, then n 8-byte values from every occurrence of |num| in |r|; |first|
 * is the first occurrence. A single packed occurrence (how encoders write
 * it) is copied without walking the range again, inlined (two per
 * histogram point).
 */
static inline __attribute__((always_inline)) int put_rep64(struct dec *d, const struct range *r,
                                                           const struct fld *first, uint32_t num)
{
    struct vbuf *h = &d->b->heap;

    if (LIKELY(r->first != NULL && first->wt == WT_LEN && r->end == first->p + first->len)) {
        TRY(hreserve(h, 4 + first->len));
        hput_u32(h, (uint32_t)(first->len / 8));
        memcpy(h->p + h->len, first->p, first->len);
        h->len += first->len;
        return 0;
    }
    return put_rep64_walk(d, r, num);
}

/* Eight bytes (|w|, little-endian) stored as eight little-endian u64s at |dst|. */
static inline void widen8(uint8_t *dst, uint64_t w)
{
#if defined(__SSE2__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const __m128i z = _mm_setzero_si128();
    __m128i b = _mm_cvtsi64_si128((long long)w);
    __m128i h16 = _mm_unpacklo_epi8(b, z);
    __m128i lo32 = _mm_unpacklo_epi16(h16, z), hi32 = _mm_unpackhi_epi16(h16, z);
    _mm_storeu_si128((__m128i *)(void *)dst, _mm_unpacklo_epi32(lo32, z));
    _mm_storeu_si128((__m128i *)(void *)(dst + 16), _mm_unpackhi_epi32(lo32, z));
    _mm_storeu_si128((__m128i *)(void *)(dst + 32), _mm_unpacklo_epi32(hi32, z));
    _mm_storeu_si128((__m128i *)(void *)(dst + 48), _mm_unpackhi_epi32(hi32, z));
#else
    for (int i = 0; i < 8; i++) {
        uint64_t v = (w >> (8 * i)) & 0xff;
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        v = __builtin_bswap64(v);
#endif
        memcpy(dst + 8 * i, &v, 8);
    }
#endif
}

/* Packed bucket counts [q, qend) appended as u64s (room for them reserved
 * here), |*count| advanced by how many. */
static inline __attribute__((always_inline)) int
put_packed_counts(struct dec *d, const uint8_t *q, const uint8_t *qend, uint32_t *count)
{
    struct vbuf *h = &d->b->heap;
    TRY(hreserve(h, (size_t)(qend - q) * 8));
    /* Counts below 128 are one byte each: eight at a time while all eight
     * are (no varint continues in them). */
    while (qend - q >= 8) {
        uint64_t w = le64(q);
        if ((w & 0x8080808080808080ull) != 0) {
            break;
        }
        widen8(h->p + h->len, w);
        h->len += 64;
        q += 8;
        *count += 8;
    }
    while (q < qend) {
        uint64_t v = 0;
        TRY(rd_varint(d, &q, qend, 10, &v, "packed varint (bucket_counts)"));
        hput_u64(h, v);
        (*count)++;
    }
    return 0;
}

/* Buckets: u32 offset, u32 n, n x u64 (merged over every occurrence of |num|). */
static int put_buckets_some(struct dec *d, const struct range *r, uint32_t num)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f, g;
    int32_t offset = 0;
    uint32_t count = 0;
    int rc = 0;

    size_t at = h->len;
    TRY(put_u32(h, 0));
    TRY(put_u32(h, 0));
    /* One Buckets occurrence of one-byte length as encoders write it: an
     * offset of one byte (or none, 0 being the default), then one packed
     * bucket_counts that ends the message (its length is one byte too, the
     * message's being one). What the walk below gives, without it; anything
     * else takes the walk. */
    const uint8_t *p = r->first;
    if (LIKELY(p[0] == (uint8_t)(num << 3 | WT_LEN) && p[1] < 0x80 && p + 2 + p[1] == r->end)) {
        const uint8_t *q = p + 2;
        if (r->end - q >= 2 && q[0] == TAG1(1, WT_VARINT) && q[1] < 0x80) {
            offset = unzigzag32(q[1]);
            q += 2;
        }
        if (r->end - q >= 2 && q[0] == TAG1(2, WT_LEN) && q + 2 + q[1] == r->end) {
            TRY(put_packed_counts(d, q + 2, r->end, &count));
            hpatch_u32(h, at, (uint32_t)offset);
            hpatch_u32(h, at + 4, count);
            return 0;
        }
        offset = 0;
    }
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num != num) {
            continue;
        }
        struct cur bc = {f.p, f.p + f.len};
        while ((rc = next_field(d, &bc, &g)) > 0) {
            if (g.num == 1) {
                WANT(g, WT_VARINT, "buckets.offset");
                offset = unzigzag32(g.v);
            } else if (g.num == 2) {
                if (g.wt == WT_VARINT) {
                    TRY(put_u64(h, g.v));
                    count++;
                    continue;
                }
                WANT(g, WT_LEN, "buckets.bucket_counts");
                TRY(put_packed_counts(d, g.p, g.p + g.len, &count));
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    hpatch_u32(h, at, (uint32_t)offset);
    hpatch_u32(h, at + 4, count);
    return rc;
}

/* The same; absent (nearly every negative), two zero words without a call. */
static inline __attribute__((always_inline)) int put_buckets(struct dec *d, const struct range *r,
                                                             uint32_t num)
{
    if (r->first == NULL) {
        return put_u64(&d->b->heap, 0);
    }
    return put_buckets_some(d, r, num);
}

/* Summary: u32 n, n x (f64 quantile, f64 value). */
static int put_quantiles(struct dec *d, const struct range *r)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {r->first, r->end};
    struct fld f, g;
    uint32_t count = 0;
    int rc = 0;

    size_t at = h->len;
    TRY(put_u32(h, 0));
    if (r->first != NULL) {
        for (;;) {
            /* A ValueAtQuantile as encoders write it, `1: quantile` then
             * `2: value` (or the value alone, quantile 0 being the
             * default): its 8-byte values are the blob's, in that order. */
            const uint8_t *p = c.p;
            if (LIKELY(c.end - p >= 20 && p[0] == TAG1(6, WT_LEN) && p[1] == 18 &&
                       p[2] == TAG1(1, WT_I64) && p[11] == TAG1(2, WT_I64))) {
                TRY(hreserve(h, 16));
                hput_u64(h, le64(p + 3));
                hput_u64(h, le64(p + 12));
                c.p = p + 20;
                count++;
                continue;
            }
            if (c.end - p >= 11 && p[0] == TAG1(6, WT_LEN) && p[1] == 9 &&
                p[2] == TAG1(2, WT_I64)) {
                TRY(hreserve(h, 16));
                hput_u64(h, 0);
                hput_u64(h, le64(p + 3));
                c.p = p + 11;
                count++;
                continue;
            }
            if ((rc = next_field(d, &c, &f)) <= 0) {
                break;
            }
            if (f.num != 6) {
                continue;
            }
            uint64_t q = 0, v = 0;
            struct cur qc = {f.p, f.p + f.len};
            while ((rc = next_field(d, &qc, &g)) > 0) {
                if (g.num == 1) {
                    WANT(g, WT_I64, "quantile");
                    q = g.v;
                } else if (g.num == 2) {
                    WANT(g, WT_I64, "value");
                    v = g.v;
                }
            }
            if (rc < 0) {
                return rc;
            }
            TRY(put_u64(h, q));
            TRY(put_u64(h, v));
            count++;
        }
    }
    hpatch_u32(h, at, count);
    return rc;
}

/*
 * heap_guard for a data point: within one Metric's data the resource, scope
 * and metric rows do not change, so dec_metric_data folds them into
 * d->pt_cap once (set_point_cap) and a point compares rows + heap with it.
 * True exactly when heap_guard fails, which then says why.
 */
static inline void set_point_cap(struct dec *d)
{
    const struct batch *b = d->b;
    size_t dicts = (size_t)b->n_resources * sizeof(struct res_row) +
                   (size_t)b->n_scopes * sizeof(struct scope_row) +
                   (size_t)b->n_metrics * sizeof(struct metric_row);
    d->pt_cap = (int64_t)(d->used0 + d->limit) - (int64_t)dicts;
}

static inline int point_guard(struct dec *d, const uint8_t *at)
{
    const struct batch *b = d->b;
    if (UNLIKELY((int64_t)((size_t)b->n_rows * d->row_size + b->heap.len) > d->pt_cap ||
                 b->heap.len > HEAP_SOFT_MAX)) {
        return heap_guard(d, at);
    }
    return 0;
}

static inline __attribute__((always_inline)) int new_point(struct dec *d, const uint8_t *at,
                                                           uint32_t metric, struct point_row **out)
{
    TRY(point_guard(d, at));
    struct point_row *pt = next_row(d->b, sizeof(*pt));
    if (pt == NULL) {
        pt = batch_add_point(d->b);
    }
    if (pt == NULL) {
        return -ENOMEM;
    }
    pt->metric = metric;
    *out = pt;
    return 0;
}

static int dec_number_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range ex = {0};
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    size_t astart = h->len;
    for (;;) {
        const uint8_t *q = c.p;
        if (LIKELY(c.end - q > 8)) { /* see TAG1 */
            switch (q[0]) {
            case TAG1(2, WT_I64):
                pt->start_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(3, WT_I64):
                pt->time_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(4, WT_I64):
                pt->value_type = PV_DOUBLE;
                pt->value.d = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(6, WT_I64):
                pt->value_type = PV_INT;
                pt->value.i = (int64_t)le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(7, WT_LEN):
                TRY(dec_attr_run(d, &c, 7, &pt->attrs.count));
                if (c.p != q) {
                    continue;
                }
                break;
            default:
                break;
            }
        }
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "as_double");
            pt->value_type = PV_DOUBLE;
            pt->value.d = u64_to_f64(f.v);
            break;
        case 5:
            WANT(f, WT_LEN, "exemplars");
            range_add(&ex, &f, &c);
            break;
        case 6:
            WANT(f, WT_I64, "as_int");
            pt->value_type = PV_INT;
            pt->value.i = (int64_t)f.v;
            break;
        case 7:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            TRY(dec_attr_run(d, &c, 7, &pt->attrs.count));
            break;
        case 8:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    pt->detail.off = (uint32_t)h->len;
    return dec_exemplars(d, &ex, 5, pt);
}

static int dec_histogram_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range ex = {0}, counts = {0}, bounds = {0};
    struct fld counts1 = {0}, bounds1 = {0}; /* the first occurrence of each */
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    size_t astart = h->len;
    for (;;) {
        const uint8_t *q = c.p;
        if (LIKELY(c.end - q > 8)) { /* see TAG1 */
            switch (q[0]) {
            case TAG1(2, WT_I64):
                pt->start_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(3, WT_I64):
                pt->time_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(4, WT_I64):
                pt->count = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(5, WT_I64):
                pt->has_sum = true;
                pt->sum = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(6, WT_LEN):
            case TAG1(7, WT_LEN): {
                /* Packed bucket_counts / explicit_bounds, one-byte length:
                 * what the generic case does (check_rep64, range_add). */
                size_t len = q[1];
                if (q[1] < 0x80 && len % 8 == 0 && len <= (size_t)(c.end - q - 2)) {
                    struct range *r = q[0] == TAG1(6, WT_LEN) ? &counts : &bounds;
                    struct fld *one = q[0] == TAG1(6, WT_LEN) ? &counts1 : &bounds1;
                    c.p = q + 2 + len;
                    if (r->first == NULL) {
                        r->first = q;
                        one->wt = WT_LEN;
                        one->p = q + 2;
                        one->len = len;
                    }
                    r->end = c.p;
                    continue;
                }
                break;
            }
            case TAG1(9, WT_LEN):
                TRY(dec_attr_run(d, &c, 9, &pt->attrs.count));
                if (c.p != q) {
                    continue;
                }
                break;
            case TAG1(11, WT_I64):
                pt->has_min = true;
                pt->min = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(12, WT_I64):
                pt->has_max = true;
                pt->max = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            default:
                break;
            }
        }
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "count");
            pt->count = f.v;
            break;
        case 5:
            WANT(f, WT_I64, "sum");
            pt->has_sum = true;
            pt->sum = u64_to_f64(f.v);
            break;
        case 6:
            TRY(check_rep64(d, &f, "bucket_counts"));
            if (counts.first == NULL) {
                counts1 = f;
            }
            range_add(&counts, &f, &c);
            break;
        case 7:
            TRY(check_rep64(d, &f, "explicit_bounds"));
            if (bounds.first == NULL) {
                bounds1 = f;
            }
            range_add(&bounds, &f, &c);
            break;
        case 8:
            WANT(f, WT_LEN, "exemplars");
            range_add(&ex, &f, &c);
            break;
        case 9:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            TRY(dec_attr_run(d, &c, 9, &pt->attrs.count));
            break;
        case 10:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        case 11:
            WANT(f, WT_I64, "min");
            pt->has_min = true;
            pt->min = u64_to_f64(f.v);
            break;
        case 12:
            WANT(f, WT_I64, "max");
            pt->has_max = true;
            pt->max = u64_to_f64(f.v);
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    size_t dstart = h->len;
    TRY(put_rep64(d, &counts, &counts1, 6));
    TRY(put_rep64(d, &bounds, &bounds1, 7));
    pt->detail.off = (uint32_t)dstart;
    pt->detail.len = (uint32_t)(h->len - dstart);
    return dec_exemplars(d, &ex, 8, pt);
}

static int dec_exp_histogram_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range ex = {0}, pos = {0}, neg = {0};
    int32_t scale = 0;
    uint64_t zero_count = 0, zero_threshold = 0;
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    size_t astart = h->len;
    for (;;) {
        const uint8_t *q = c.p;
        if (LIKELY(c.end - q > 8)) { /* see TAG1 */
            switch (q[0]) {
            case TAG1(1, WT_LEN):
                TRY(dec_attr_run(d, &c, 1, &pt->attrs.count));
                if (c.p != q) {
                    continue;
                }
                break;
            case TAG1(2, WT_I64):
                pt->start_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(3, WT_I64):
                pt->time_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(4, WT_I64):
                pt->count = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(5, WT_I64):
                pt->has_sum = true;
                pt->sum = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(6, WT_VARINT):
                if (q[1] < 0x80) {
                    scale = unzigzag32(q[1]);
                    c.p = q + 2;
                    continue;
                }
                break;
            case TAG1(7, WT_I64):
                zero_count = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(8, WT_LEN):
            case TAG1(9, WT_LEN): {
                /* positive / negative, one-byte length: its range only. */
                if (q[1] < 0x80 && (size_t)q[1] <= (size_t)(c.end - q - 2)) {
                    struct range *r = q[0] == TAG1(8, WT_LEN) ? &pos : &neg;
                    if (r->first == NULL) {
                        r->first = q;
                    }
                    c.p = q + 2 + q[1];
                    r->end = c.p;
                    continue;
                }
                break;
            }
            case TAG1(12, WT_I64):
                pt->has_min = true;
                pt->min = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(13, WT_I64):
                pt->has_max = true;
                pt->max = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(14, WT_I64):
                zero_threshold = le64(q + 1);
                c.p = q + 9;
                continue;
            default:
                break;
            }
        }
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            TRY(dec_attr_run(d, &c, 1, &pt->attrs.count));
            break;
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "count");
            pt->count = f.v;
            break;
        case 5:
            WANT(f, WT_I64, "sum");
            pt->has_sum = true;
            pt->sum = u64_to_f64(f.v);
            break;
        case 6:
            WANT(f, WT_VARINT, "scale");
            scale = unzigzag32(f.v);
            break;
        case 7:
            WANT(f, WT_I64, "zero_count");
            zero_count = f.v;
            break;
        case 8:
            WANT(f, WT_LEN, "positive");
            range_add(&pos, &f, &c);
            break;
        case 9:
            WANT(f, WT_LEN, "negative");
            range_add(&neg, &f, &c);
            break;
        case 10:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        case 11:
            WANT(f, WT_LEN, "exemplars");
            range_add(&ex, &f, &c);
            break;
        case 12:
            WANT(f, WT_I64, "min");
            pt->has_min = true;
            pt->min = u64_to_f64(f.v);
            break;
        case 13:
            WANT(f, WT_I64, "max");
            pt->has_max = true;
            pt->max = u64_to_f64(f.v);
            break;
        case 14:
            WANT(f, WT_I64, "zero_threshold");
            zero_threshold = f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    size_t dstart = h->len;
    TRY(put_u32(h, (uint32_t)scale));
    TRY(put_u64(h, zero_count));
    TRY(put_u64(h, zero_threshold));
    TRY(put_buckets(d, &pos, 8));
    TRY(put_buckets(d, &neg, 9));
    pt->detail.off = (uint32_t)dstart;
    pt->detail.len = (uint32_t)(h->len - dstart);
    return dec_exemplars(d, &ex, 11, pt);
}

static int dec_summary_point(struct dec *d, const uint8_t *p, size_t n, uint32_t metric)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range qs = {0};
    int rc;

    struct point_row *pt;
    TRY(new_point(d, p, metric, &pt));
    pt->has_sum = true;
    size_t astart = h->len;
    for (;;) {
        const uint8_t *q = c.p;
        if (LIKELY(c.end - q > 8)) { /* see TAG1 */
            switch (q[0]) {
            case TAG1(2, WT_I64):
                pt->start_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(3, WT_I64):
                pt->time_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(4, WT_I64):
                pt->count = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(5, WT_I64):
                pt->sum = u64_to_f64(le64(q + 1));
                c.p = q + 9;
                continue;
            case TAG1(6, WT_LEN):
                /* A quantile: its range only (put_quantiles reads it). */
                if (q[1] < 0x80 && (size_t)q[1] <= (size_t)(c.end - q - 2)) {
                    if (qs.first == NULL) {
                        qs.first = q;
                    }
                    c.p = q + 2 + q[1];
                    qs.end = c.p;
                    continue;
                }
                break;
            case TAG1(7, WT_LEN):
                TRY(dec_attr_run(d, &c, 7, &pt->attrs.count));
                if (c.p != q) {
                    continue;
                }
                break;
            default:
                break;
            }
        }
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 2:
            WANT(f, WT_I64, "start_time_unix_nano");
            pt->start_ns = f.v;
            break;
        case 3:
            WANT(f, WT_I64, "time_unix_nano");
            pt->time_ns = f.v;
            break;
        case 4:
            WANT(f, WT_I64, "count");
            pt->count = f.v;
            break;
        case 5:
            WANT(f, WT_I64, "sum");
            pt->sum = u64_to_f64(f.v);
            break;
        case 6:
            WANT(f, WT_LEN, "quantile_values");
            range_add(&qs, &f, &c);
            break;
        case 7:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            pt->attrs.count++;
            TRY(dec_attr_run(d, &c, 7, &pt->attrs.count));
            break;
        case 8:
            WANT(f, WT_VARINT, "flags");
            pt->flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&pt->attrs, astart, h);
    size_t dstart = h->len;
    TRY(put_quantiles(d, &qs));
    pt->detail.off = (uint32_t)dstart;
    pt->detail.len = (uint32_t)(h->len - dstart);
    pt->exemplars.off = (uint32_t)h->len;
    return 0;
}

/* One data point of |kind| of metric |mi|. */
static inline __attribute__((always_inline)) int dec_point(struct dec *d, enum metric_kind kind,
                                                           const uint8_t *p, size_t n, uint32_t mi)
{
    switch (kind) {
    case MK_GAUGE:
    case MK_SUM:
        return dec_number_point(d, p, n, mi);
    case MK_HISTOGRAM:
        return dec_histogram_point(d, p, n, mi);
    case MK_EXP_HISTOGRAM:
        return dec_exp_histogram_point(d, p, n, mi);
    case MK_SUMMARY:
        return dec_summary_point(d, p, n, mi);
    case MK_NONE:
        break;
    }
    return 0;
}

/*
 * Gauge / Sum / ... in one pass: each data point is decoded where it is met,
 * so the points are read once, not hopped over first and walked again; a
 * point that comes as encoders write it (tag 0x0a, a one- or two-byte length
 * that fits) is taken without next_field. The points never read
 * temporality or monotonic, so the field order does not change the rows.
 * 0, or 1 when anything fails: the caller then rolls the points back and
 * takes dec_metric_data2, whose first pass checks the other fields before
 * any point, so an error keeps its text and order.
 */
static int dec_metric_data1(struct dec *d, enum metric_kind kind, const uint8_t *p, size_t n,
                            uint32_t mi)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    for (;;) {
        const uint8_t *q = c.p;
        if (LIKELY(c.end - q >= 3 && q[0] == TAG1(1, WT_LEN))) {
            size_t len;
            const uint8_t *v;
            if (q[1] < 0x80) {
                len = q[1];
                v = q + 2;
            } else if (q[2] < 0x80) {
                len = ((size_t)q[2] << 7) | (q[1] & 0x7f);
                v = q + 3;
            } else {
                goto general;
            }
            if (LIKELY(len <= (size_t)(c.end - v))) {
                c.p = v + len;
                if (dec_point(d, kind, v, len, mi) < 0) {
                    return 1;
                }
                continue;
            }
        }
    general:
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 1:
            if (f.wt != WT_LEN || dec_point(d, kind, f.p, f.len, mi) < 0) {
                return 1;
            }
            break;
        case 2:
            if (kind == MK_SUM || kind == MK_HISTOGRAM || kind == MK_EXP_HISTOGRAM) {
                if (f.wt != WT_VARINT) {
                    return 1;
                }
                d->b->metrics[mi].temporality = (int32_t)f.v;
            }
            break;
        case 3:
            if (kind == MK_SUM) {
                if (f.wt != WT_VARINT) {
                    return 1;
                }
                d->b->metrics[mi].monotonic = f.v != 0;
            }
            break;
        default:
            break;
        }
    }
    return rc < 0 ? 1 : 0;
}

/* The same in two passes: the fields first, then the points' range again. */
static int dec_metric_data2(struct dec *d, enum metric_kind kind, const uint8_t *p, size_t n,
                            uint32_t mi)
{
    struct cur c = {p, p + n};
    struct fld f;
    struct range dps = {0};
    struct metric_row *m = &d->b->metrics[mi];
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "data_points");
            range_add(&dps, &f, &c);
            break;
        case 2:
            if (kind == MK_SUM || kind == MK_HISTOGRAM || kind == MK_EXP_HISTOGRAM) {
                WANT(f, WT_VARINT, "aggregation_temporality");
                m->temporality = (int32_t)f.v;
            }
            break;
        case 3:
            if (kind == MK_SUM) {
                WANT(f, WT_VARINT, "is_monotonic");
                m->monotonic = f.v != 0;
            }
            break;
        default:
            break;
        }
    }
    if (rc < 0 || dps.first == NULL) {
        return rc;
    }
    c.p = dps.first;
    c.end = dps.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 1) {
            TRY(dec_point(d, kind, f.p, f.len, mi));
        }
    }
    return rc;
}

/* Gauge / Sum / Histogram / ExponentialHistogram / Summary of metric |mi|. */
static int dec_metric_data(struct dec *d, enum metric_kind kind, const uint8_t *p, size_t n,
                           uint32_t mi)
{
    struct batch *b = d->b;
    uint32_t rows0 = b->n_rows;
    size_t heap0 = b->heap.len;

    set_point_cap(d);
    if (LIKELY(dec_metric_data1(d, kind, p, n, mi) == 0)) {
        return 0;
    }
    b->n_rows = rows0;
    b->heap.len = heap0;
    b->metrics[mi].temporality = 0;
    b->metrics[mi].monotonic = false;
    if (d->err != NULL && d->errlen > 0) {
        d->err[0] = '\0';
    }
    return dec_metric_data2(d, kind, p, n, mi);
}

static enum metric_kind data_kind(uint32_t num)
{
    switch (num) {
    case 5:
        return MK_GAUGE;
    case 7:
        return MK_SUM;
    case 9:
        return MK_HISTOGRAM;
    case 10:
        return MK_EXP_HISTOGRAM;
    case 11:
        return MK_SUMMARY;
    }
    return MK_NONE;
}

int pbdec_metric(struct dec *d, const uint8_t *p, size_t n, uint32_t scope)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range data = {0};
    int rc;

    TRY(heap_guard(d, p));
    uint32_t mi = b->n_metrics;
    struct metric_row *m = batch_add_metric(b);
    if (m == NULL) {
        return -ENOMEM;
    }
    m->scope = scope;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            TRY(get_str(d, &f, "name", &m->name));
            break;
        case 2:
            TRY(get_str(d, &f, "description", &m->description));
            break;
        case 3:
            TRY(get_str(d, &f, "unit", &m->unit));
            break;
        case 5:
        case 7:
        case 9:
        case 10:
        case 11:
            WANT(f, WT_LEN, "data");
            range_add(&data, &f, &c);
            break;
        case 12:
            WANT(f, WT_LEN, "metadata");
            TRY(dec_kv(d, f.p, f.len, 1));
            m->metadata.count++;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&m->metadata, astart, h);
    if (data.first == NULL) {
        return 0;
    }
    /* oneof data: every member is decoded (and so checked), the last one
     * stays; an earlier member's points and heap bytes are rolled back. */
    uint32_t rows0 = b->n_rows;
    size_t heap0 = h->len;
    c.p = data.first;
    c.end = data.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        enum metric_kind kind = data_kind(f.num);
        if (kind == MK_NONE) {
            continue;
        }
        b->n_rows = rows0;
        h->len = heap0;
        m = &b->metrics[mi];
        m->kind = kind;
        m->temporality = 0;
        m->monotonic = false;
        TRY(dec_metric_data(d, kind, f.p, f.len, mi));
    }
    return rc;
}
