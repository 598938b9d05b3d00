/*
 * jsondec_metrics.c - one OTLP/JSON Metric into a metric row and its data
 * points into point rows: gauges, sums, histograms, exponential histograms
 * and summaries; the detail blobs (bucket counts and bounds, exponential
 * buckets, quantiles) read in place when they come in the usual order, else
 * deferred and read at the end of the point; number lists in compact form
 * read straight from the text; exemplars. jsondec.c says how the decoder
 * works.
 */
#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proto/jsondec_counts.h"
#include "proto/jsondec_int.h"
#include "proto/jsondec_num.h"
#include "storage/val.h"

static const char *const temporality_names[] = {
    "AGGREGATION_TEMPORALITY_UNSPECIFIED",
    "AGGREGATION_TEMPORALITY_DELTA",
    "AGGREGATION_TEMPORALITY_CUMULATIVE",
};

/* ---- metrics ---- */

/*
 * The usual bucket counts, "3","20",...: jdcounts_run from the element at
 * |i| (just past the '['), up to 32 at a time into the heap (little-endian
 * u64, as hput_u64 writes them). Adds the count read to |*n| and returns the
 * offset of the ',' or ']' after the last element read (every element it
 * read is in the heap), or |i| unchanged when it read none (also when the
 * heap could not grow). What it does not read is left to num_list's general
 * loops, as before.
 */
static size_t uint_q_run(struct jd *j, size_t i, uint32_t *n)
{
    const char *s = j->lx.s;
    size_t len = j->lx.n, stop = i;
    struct vbuf *h = j->h;
    while (h->cap - h->len >= 8 * 32 || vbuf_reserve(h, 8 * 32) == 0) {
        uint32_t got = j->avx2 ? jdcounts_run_avx2(s, len, i, h->p + h->len, 32, &stop)
                               : jdcounts_run(s, len, i, h->p + h->len, 32, &stop);
        h->len += 8 * (size_t)got;
        *n += got;
        if (got == 0 || s[stop] == ']') {
            break;
        }
        i = stop + 1;
    }
    return stop;
}

/* A list of numbers: u32 n, then n u64 (|dbl| false) or n f64, into the heap. */
static int num_list(struct jd *j, const char *what, bool dbl)
{
    size_t hdr = j->h->len;
    uint32_t n = 0;
    bool first = true;
    int rc;
    if ((rc = hput_u32(j, 0)) < 0) {
        return rc;
    }
    if ((rc = arr_open(j, what)) < 0) {
        return rc;
    }
    const char *s = j->lx.s;
    size_t open = j->lx.pos - 1; /* the '[' */
    if (dbl && j->dl_len != 0 && j->lx.n - open >= j->dl_len &&
        memcmp(s + open, j->dl_text, j->dl_len) == 0) {
        if ((rc = hroom(j, 8 * (size_t)j->dl_n)) < 0) {
            return rc;
        }
        memcpy(j->h->p + j->h->len, j->dl_v, 8 * (size_t)j->dl_n);
        j->h->len += 8 * (size_t)j->dl_n;
        hpatch_u32(j, hdr, j->dl_n);
        j->lx.pos = open + j->dl_len;
        return 0;
    }
    if (!dbl) {
        size_t at = uint_q_run(j, j->lx.pos, &n);
        if (n != 0) {
            first = false;
            j->lx.pos = at; /* the ',' or the ']' */
            if (s[at] == ']') {
                j->lx.pos = at + 1; /* as arr_next leaves it */
                goto done;
            }
        }
    }
    /* the compact form first: numbers and ',' with no blanks, read in place;
     * the general loop takes over at anything else (the cursor then at the
     * ',' before the element it could not read) */
    for (size_t i = j->lx.pos + !first, used; i < j->lx.n && (first || s[i - 1] == ',');
         i = j->lx.pos + 1) {
        uint64_t v;
        bool ok;
        if (dbl) {
            double d;
            ok = jdnum_f64_fast(s + i, j->lx.n - i, &d, &used);
            memcpy(&v, &d, 8);
        } else {
            ok = jdnum_uint_q(s + i, j->lx.n - i, &v, &used);
        }
        if (!ok || i + used >= j->lx.n || (s[i + used] != ',' && s[i + used] != ']')) {
            break;
        }
        if ((rc = hroom(j, 8 * 16)) < 0) {
            return rc;
        }
        hstore_u64(j, v);
        n++;
        first = false;
        j->lx.pos = i + used;
        if (s[j->lx.pos] == ']') {
            break;
        }
    }
    while ((rc = arr_next(j, &first)) > 0) {
        uint64_t v;
        if (dbl) {
            double d;
            if ((rc = rd_f64(j, what, &d)) < 0) {
                return rc;
            }
            memcpy(&v, &d, 8);
        } else if ((rc = rd_u64(j, what, &v)) < 0) {
            return rc;
        }
        if ((rc = hput_u64(j, v)) < 0) {
            return rc;
        }
        n++;
    }
    if (rc < 0) {
        return rc;
    }
done:
    hpatch_u32(j, hdr, n);
    if (dbl && n <= JD_DL_MAX) {
        j->dl_text = s + open;
        j->dl_len = j->lx.pos - open;
        j->dl_n = n;
        memcpy(j->dl_v, j->h->p + hdr + 4, 8 * (size_t)n);
    }
    return 0;
}

/* A number list found at |pos| earlier (or an empty one). */
static int num_list_at(struct jd *j, size_t pos, const char *what, bool dbl)
{
    if (pos == NONE) {
        return hput_u32(j, 0);
    }
    size_t end = j->lx.pos;
    j->lx.pos = pos;
    int rc = num_list(j, what, dbl);
    j->lx.pos = end;
    return rc;
}

enum { BK_OFFSET, BK_COUNTS };
static const struct fdef bucket_fields[] = {
    [BK_OFFSET] = F1("offset"),
    [BK_COUNTS] = F2("bucketCounts", "bucket_counts"),
};

/* ExponentialHistogram Buckets found at |pos|: u32 offset, u32 n, n u64. */
static int buckets_at(struct jd *j, size_t pos, const char *what, bool here)
{
    size_t hdr = j->h->len, end = j->lx.pos;
    int32_t offset = 0;
    bool have_counts = false;
    int rc = 0;
    if (hput_u32(j, 0) < 0) {
        return -ENOMEM;
    }
    if (pos != NONE) {
        const char *s = j->lx.s;
        int prev = -1; /* the member the compares read last */
        bool ended = false;
        j->lx.pos = pos;
        /* the exporters' {"offset":N,"bucketCounts":[...]} by two compares
         * of the member names, read in the order and by the readers the
         * loop below would use, and a '}' after them ends the object as
         * next_field would; the loop goes on from wherever they stop */
        if (j->lx.n - pos >= 32 && memcmp(s + pos, "{\"offset\":", 10) == 0) {
            j->lx.pos = pos + 10;
            prev = BK_OFFSET;
            if (!take_null(j) && (rc = rd_i32(j, "offset", &offset)) < 0) {
                return rc;
            }
            size_t at = j->lx.pos;
            if (j->lx.n - at >= 17 && memcmp(s + at, ",\"bucketCounts\":", 16) == 0) {
                j->lx.pos = at + 16;
                prev = BK_COUNTS;
                if (!take_null(j)) {
                    if ((rc = num_list(j, "bucketCounts", false)) < 0) {
                        return rc;
                    }
                    have_counts = true;
                }
                if (j->lx.pos < j->lx.n && s[j->lx.pos] == '}') {
                    j->lx.pos++;
                    ended = true;
                }
            }
        } else if ((rc = jd_obj_open(j, what)) < 0) {
            return rc;
        }
        if (!ended) { /* the fcur only when next_field is needed */
            struct fcur fc = FCUR(j, bucket_fields);
            if (prev >= 0) { /* as next_field leaves it after those members */
                fc.first = false;
                fc.f = fc.prev = prev;
            }
            while ((rc = next_field(j, &fc)) > 0) {
                int f = fc.f;
                if (f < 0 || take_null(j)) {
                    rc = f < 0 ? skip_value(j) : 0;
                } else if (f == BK_OFFSET) {
                    rc = rd_i32(j, "offset", &offset);
                } else {
                    j->h->len = hdr + 4; /* a repeated list replaces the first */
                    rc = num_list(j, "bucketCounts", false);
                    have_counts = true;
                }
                if (rc < 0) {
                    return rc;
                }
            }
        }
        if (rc < 0) {
            return rc;
        }
        if (!here) {
            j->lx.pos = end;
        }
    }
    if (!have_counts && hput_u32(j, 0) < 0) {
        return -ENOMEM;
    }
    hpatch_u32(j, hdr, (uint32_t)offset);
    return 0;
}

enum { VQ_QUANTILE, VQ_VALUE };
static const struct fdef vaq_fields[] = {
    [VQ_QUANTILE] = F1("quantile"),
    [VQ_VALUE] = F1("value"),
};

/*
 * The ValueAtQuantile objects exporters write, compact and in schema order,
 * back to back from the element at |i| (just past the '['):
 * {"quantile":Q,"value":V} or {"value":V} (a zero quantile left out), both
 * numbers bare, jdnum_f64_fast's. Each read by exact comparison into the
 * heap (f64 quantile, f64 value); returns how many, |*stop| the offset of
 * the ',' or ']' after the last one (unchanged when none, also when the
 * heap could not grow). What it does not read (blanks, other members,
 * duplicates, quoted numbers...) is left to quantiles_at's general loop.
 */
static uint32_t vaq_run(struct jd *j, size_t i, size_t *stop)
{
    const char *s = j->lx.s;
    size_t n = j->lx.n, used, end = *stop;
    struct vbuf *h = j->h;
    uint32_t cnt = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (;;) {
        double qv = 0, vv;
        if (n - i < 32 || (h->cap - h->len < 16 && vbuf_reserve(h, 16) < 0)) {
            break;
        }
        unsigned L = cnt < JD_VQ_MAX ? j->vq_len[cnt] : 0;
        if (L != 0 && cm_eq(s + i, j->vq_text[cnt], (1ull << L) - 1, false)) {
            /* the text the last point had here, through "value": (a
             * number's text ends at its ',', so the same quantile) */
            qv = j->vq_val[cnt];
            i += L;
        } else {
            size_t o = i; /* the '{' */
            if (s[i] != '{') {
                break;
            }
            i++;
            if (memcmp(s + i, "\"quantile\":", 11) == 0) {
                i += 11;
                if (!jdnum_f64_fast(s + i, n - i, &qv, &used) || n - i - used < 16 ||
                    s[i + used] != ',') {
                    break;
                }
                i += used + 1;
            }
            if (memcmp(s + i, "\"value\":", 8) != 0) {
                break;
            }
            i += 8;
            if (cnt < JD_VQ_MAX && i - o <= 32) { /* 32 bytes readable from o */
                memcpy(j->vq_text[cnt], s + o, 32);
                j->vq_len[cnt] = (uint8_t)(i - o);
                j->vq_val[cnt] = qv;
            }
        }
        if (!jdnum_f64_fast(s + i, n - i, &vv, &used) || n - i - used < 2 || s[i + used] != '}' ||
            (s[i + used + 1] != ',' && s[i + used + 1] != ']')) {
            break;
        }
        memcpy(h->p + h->len, &qv, 8); /* little-endian, as hput_f64 */
        memcpy(h->p + h->len + 8, &vv, 8);
        h->len += 16;
        cnt++;
        end = i + used + 1;
        if (s[end] == ']') {
            break;
        }
        i = end + 1;
    }
#else
    (void)s, (void)n, (void)used, (void)h, (void)i;
#endif
    *stop = end;
    return cnt;
}

/* SummaryDataPoint quantile values found at |pos|: u32 n, n x (f64, f64). */
static int quantiles_at(struct jd *j, size_t pos, bool here)
{
    size_t hdr = j->h->len, end = j->lx.pos;
    uint32_t n = 0;
    bool first = true;
    int rc;
    if (hput_u32(j, 0) < 0) {
        return -ENOMEM;
    }
    if (pos == NONE) {
        return 0;
    }
    j->lx.pos = pos;
    if ((rc = arr_open(j, "quantileValues")) < 0) {
        return rc;
    }
    size_t at = j->lx.pos;
    if ((n = vaq_run(j, at, &at)) != 0) {
        first = false;
        j->lx.pos = at; /* the ',' or the ']' */
        if (j->lx.s[at] == ']') {
            j->lx.pos = at + 1; /* as arr_next leaves it */
            goto done;
        }
    }
    while ((rc = arr_next(j, &first)) > 0) {
        double q = 0, v = 0;
        if (!take_null(j)) {
            if ((rc = jd_obj_open(j, "quantileValues")) < 0) {
                return rc;
            }
            for (struct fcur fc = FCUR(j, vaq_fields); (rc = next_field(j, &fc)) > 0;) {
                int f = fc.f;
                if (f < 0 || take_null(j)) {
                    rc = f < 0 ? skip_value(j) : 0;
                } else {
                    rc = rd_f64(j, f == VQ_QUANTILE ? "quantile" : "value",
                                f == VQ_QUANTILE ? &q : &v);
                }
                if (rc < 0) {
                    return rc;
                }
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (hput_f64(j, q) < 0 || hput_f64(j, v) < 0) {
            return -ENOMEM;
        }
        n++;
    }
    if (rc < 0) {
        return rc;
    }
done:
    hpatch_u32(j, hdr, n);
    if (!here) {
        j->lx.pos = end;
    }
    return 0;
}

/* What list_inline reads. */
enum { LI_COUNTS, LI_BOUNDS, LI_POSITIVE, LI_NEGATIVE, LI_QUANTILES };

/*
 * A detail member read where it is (for LI_POSITIVE, after a placeholder
 * for the exponential histogram's scale, zero count and zero threshold),
 * |*pos| set to where its value starts. When that fails the heap and the
 * cursor are put back and the member is deferred (skipped, to be read again
 * at |*pos| later), so that errors are those of the deferred path: returns
 * 1 then, 0 when read in place, or defer's error. Called by point's
 * switch only, with ws run at the cursor (a second would not move it).
 */
static int list_inline(struct jd *j, size_t *pos, int what)
{
    size_t mark = j->h->len;
    int rc;
    *pos = j->lx.pos;
    switch (what) {
    case LI_COUNTS:
        rc = num_list(j, "bucketCounts", false);
        break;
    case LI_BOUNDS:
        rc = num_list(j, "explicitBounds", true);
        break;
    case LI_POSITIVE:
        /* the header's 20 zero bytes (u32, u64, u64) in one write */
        if (vbuf_reserve(j->h, 20) < 0) {
            rc = -ENOMEM;
            break;
        }
        memset(j->h->p + j->h->len, 0, 20);
        j->h->len += 20;
        rc = buckets_at(j, *pos, "positive", true);
        break;
    case LI_NEGATIVE:
        rc = buckets_at(j, *pos, "negative", true);
        break;
    default:
        rc = quantiles_at(j, *pos, true);
        break;
    }
    if (rc == 0) {
        return 0;
    }
    j->h->len = mark;
    j->lx.pos = *pos;
    rc = defer(j, pos);
    return rc < 0 ? rc : 1;
}

enum { EX_ATTRS, EX_TIME, EX_DOUBLE, EX_INT, EX_SPAN, EX_TRACE };
static const struct fdef exemplar_fields[] = {
    [EX_ATTRS] = F2("filteredAttributes", "filtered_attributes"),
    [EX_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [EX_DOUBLE] = F2("asDouble", "as_double"),
    [EX_INT] = F2("asInt", "as_int"),
    [EX_SPAN] = F2("spanId", "span_id"),
    [EX_TRACE] = F2("traceId", "trace_id"),
};

/*
 * One Exemplar: u64 time, u8 point_value, 8 value bytes, u8 has_trace_id,
 * 16 trace id, u8 has_span_id, 8 span id, u32 count, u32 nbytes, attrs.
 */
static int exemplar(struct jd *j)
{
    uint64_t t = 0, raw = 0;
    uint8_t vt = PV_NONE, tid[16] = {0}, sid[8] = {0};
    bool has_t = false, has_s = false;
    size_t attrs = NONE, here = NONE;
    int rc = 0;
    if (!take_null(j)) {
        if ((rc = jd_obj_open(j, "exemplars")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, exemplar_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == EX_ATTRS) { /* read now when it can be, as span events do */
                rc = jd_counted_attrs_now(j, "exemplars.filteredAttributes", &attrs, &here);
            } else if (f == EX_TIME) {
                rc = rd_u64(j, "exemplars.timeUnixNano", &t);
            } else if (f == EX_DOUBLE) {
                double d;
                if ((rc = rd_f64(j, "exemplars.asDouble", &d)) == 0) {
                    memcpy(&raw, &d, 8);
                    vt = PV_DOUBLE;
                }
            } else if (f == EX_INT) {
                int64_t i;
                if ((rc = rd_i64(j, "exemplars.asInt", &i)) == 0) {
                    raw = (uint64_t)i;
                    vt = PV_INT;
                }
            } else if (f == EX_SPAN) {
                rc = rd_id(j, "exemplars.spanId", sid, 8, &has_s);
            } else {
                rc = rd_id(j, "exemplars.traceId", tid, 16, &has_t);
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    size_t fixed = j->h->len;
    if (vbuf_put_u64(j->h, t) < 0 || vbuf_put_u8(j->h, vt) < 0 || vbuf_put_u64(j->h, raw) < 0 ||
        vbuf_put_u8(j->h, has_t) < 0 || vbuf_put(j->h, tid, 16) < 0 ||
        vbuf_put_u8(j->h, has_s) < 0 || vbuf_put(j->h, sid, 8) < 0) {
        return jd_nomem(j);
    }
    if (here != NONE) {
        return jd_counted_attrs_put_first(j, here, fixed);
    }
    return jd_counted_attrs_at(j, attrs, "exemplars.filteredAttributes");
}

enum {
    DP_ATTRS,
    DP_START,
    DP_TIME,
    DP_DOUBLE,
    DP_INT,
    DP_EXEMPLARS,
    DP_FLAGS,
    DP_COUNT,
    DP_SUM,
    DP_BUCKETS,
    DP_BOUNDS,
    DP_MIN,
    DP_MAX,
    DP_SCALE,
    DP_ZERO_COUNT,
    DP_POSITIVE,
    DP_NEGATIVE,
    DP_ZERO_THRESHOLD,
    DP_QUANTILES,
};
static const struct fdef point_fields[] = {
    [DP_ATTRS] = F1("attributes"),
    [DP_START] = F2("startTimeUnixNano", "start_time_unix_nano"),
    [DP_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [DP_DOUBLE] = F2("asDouble", "as_double"),
    [DP_INT] = F2("asInt", "as_int"),
    [DP_EXEMPLARS] = F1("exemplars"),
    [DP_FLAGS] = F1("flags"),
    [DP_COUNT] = F1("count"),
    [DP_SUM] = F1("sum"),
    [DP_BUCKETS] = F2("bucketCounts", "bucket_counts"),
    [DP_BOUNDS] = F2("explicitBounds", "explicit_bounds"),
    [DP_MIN] = F1("min"),
    [DP_MAX] = F1("max"),
    [DP_SCALE] = F1("scale"),
    [DP_ZERO_COUNT] = F2("zeroCount", "zero_count"),
    [DP_POSITIVE] = F1("positive"),
    [DP_NEGATIVE] = F1("negative"),
    [DP_ZERO_THRESHOLD] = F2("zeroThreshold", "zero_threshold"),
    [DP_QUANTILES] = F2("quantileValues", "quantile_values"),
};

/* The members each kind of data point has (bit per DP_*). */
#define B(x) (1u << (x))
#define DP_COMMON (B(DP_ATTRS) | B(DP_START) | B(DP_TIME) | B(DP_FLAGS))
static const uint32_t point_members[] = {
    [MK_NONE] = 0,
    [MK_GAUGE] = DP_COMMON | B(DP_DOUBLE) | B(DP_INT) | B(DP_EXEMPLARS),
    [MK_SUM] = DP_COMMON | B(DP_DOUBLE) | B(DP_INT) | B(DP_EXEMPLARS),
    [MK_HISTOGRAM] = DP_COMMON | B(DP_COUNT) | B(DP_SUM) | B(DP_BUCKETS) | B(DP_BOUNDS) |
                     B(DP_MIN) | B(DP_MAX) | B(DP_EXEMPLARS),
    [MK_EXP_HISTOGRAM] = DP_COMMON | B(DP_COUNT) | B(DP_SUM) | B(DP_SCALE) | B(DP_ZERO_COUNT) |
                         B(DP_POSITIVE) | B(DP_NEGATIVE) | B(DP_MIN) | B(DP_MAX) |
                         B(DP_ZERO_THRESHOLD) | B(DP_EXEMPLARS),
    [MK_SUMMARY] = DP_COMMON | B(DP_COUNT) | B(DP_SUM) | B(DP_QUANTILES),
};

/*
 * A data point's startTimeUnixNano: the points of one collection share it,
 * so a quoted 19-digit text the same as the last one u64_19 read (21 bytes,
 * quotes and all) is that value. Exact: u64_19 looks at those 21 bytes only
 * (and at least 24 to the end, asked for here too). The cursor as point's
 * switch leaves it (ws run).
 */
__attribute__((always_inline)) static inline int rd_start(struct jd *j, uint64_t *out)
{
    size_t at = j->lx.pos;
    const char *p = j->lx.s + at;
    if (j->lx.n - at < 24) {
        return rd_u64(j, "startTimeUnixNano", out);
    }
    uint64_t a, b;
    memcpy(&a, p + 13, 8);
    memcpy(&b, j->st_text + 13, 8);
    if (j->st_ok && a == b && memcmp(p, j->st_text, 16) == 0) { /* bytes 0-15, 13-20 */
        *out = j->st_val;
        j->lx.pos = at + 21;
        return 0;
    }
    if (u64_19(p, j->lx.n - at, out)) {
        memcpy(j->st_text, p, 21);
        j->st_val = *out;
        j->st_ok = true;
        j->lx.pos = at + 21;
        return 0;
    }
    return rd_u64(j, "startTimeUnixNano", out);
}

/*
 * A data point's timeUnixNano: points a few seconds apart share their
 * first 11 digits, so a quoted 19-digit text whose first 12 bytes are those
 * of the last one u64_19 read is that prefix's value plus its last 8 digits.
 * Exact: u64_19 accepts exactly the texts of 24 bytes or more to the end
 * that are a quote, 19 digits (the first not 0), a quote; the 12 bytes
 * equal to ones it accepted are the quote and 11 such digits, and the rest
 * is tested here; its value is the first 11 digits times 10^8 plus the
 * last 8. As rd_start, rd_count and rd_int_value: only point's switch calls
 * it, with ws(j) run at the cursor.
 */
__attribute__((always_inline)) static inline int rd_time(struct jd *j, uint64_t *out)
{
    size_t at = j->lx.pos;
    const char *p = j->lx.s + at;
    if (j->lx.n - at < 24) {
        return rd_u64(j, "timeUnixNano", out);
    }
    uint64_t a, b, c, d, low;
    memcpy(&a, p, 8);
    memcpy(&b, p + 4, 8);
    memcpy(&c, j->tm_text, 8);
    memcpy(&d, j->tm_text + 4, 8);
    if (j->tm_ok && a == c && b == d && p[20] == '"' && jdnum_eight_digits(p + 12, &low)) {
        *out = j->tm_hi + low;
        j->lx.pos = at + 21;
        return 0;
    }
    if (u64_19(p, j->lx.n - at, out)) {
        memcpy(j->tm_text, p, 12);
        j->tm_hi = *out - *out % 100000000u;
        j->tm_ok = true;
        j->lx.pos = at + 21;
        return 0;
    }
    return rd_u64(j, "timeUnixNano", out);
}

/*
 * A point's count, zeroCount or asInt: most are quoted and of 1-7 digits,
 * read by jdnum_uint_q7 as jdnum_int reads them (rd_u64's u64_19 never
 * takes such a text: its 20th byte is not '"'); anything else by rd_u64.
 * The cursor as point's switch leaves it (ws run).
 */
__attribute__((always_inline)) static inline int rd_count(struct jd *j, const char *field,
                                                          uint64_t *out)
{
    size_t at = j->lx.pos, used;
    if (jdnum_uint_q7(j->lx.s + at, j->lx.n - at, out, &used)) {
        j->lx.pos = at + used;
        return 0;
    }
    return rd_u64(j, field, out);
}

/* The same for asInt (7 digits are in range), else rd_i64. */
__attribute__((always_inline)) static inline int rd_int_value(struct jd *j, int64_t *out)
{
    size_t at = j->lx.pos, used;
    uint64_t mag;
    if (jdnum_uint_q7(j->lx.s + at, j->lx.n - at, &mag, &used)) {
        *out = (int64_t)mag;
        j->lx.pos = at + used;
        return 0;
    }
    return rd_i64(j, "asInt", out);
}

/* Member |f| as entry |k| of a point's learned order (the first member's
 * compare from the object's '{'). */
static void pord_learn(struct jd_pm *e, unsigned k, int f)
{
    const struct fdef *d = &point_fields[f];
    bool first = k == 0;
    assert(d->cmwant <= UINT32_MAX); /* names of at most 28 bytes: all of point_fields' */
    e->want = (uint32_t)d->cmwant & ~(uint32_t)first;
    e->back = first;
    e->adv = (uint8_t)(d->cmlen - first);
    e->f = (uint8_t)f;
}

/* Member |f| put in at entry |k| of the learned order |ord| of |*n| entries,
 * those from |k| on moved one place down (the last one dropped when the
 * order is full); false when |k| is past JD_PORD_MAX. */
static bool pord_insert(struct jd_pm *ord, uint8_t *n, unsigned k, int f)
{
    if (k >= JD_PORD_MAX) {
        return false;
    }
    unsigned last = *n < JD_PORD_MAX ? *n : JD_PORD_MAX - 1;
    memmove(ord + k + 1, ord + k, (last - k) * sizeof(*ord));
    pord_learn(&ord[k], k, f);
    if (k == 0 && last > 0) { /* the old first member is now a later one */
        pord_learn(&ord[1], 1, ord[1].f);
    }
    *n = (uint8_t)(last + 1);
    return true;
}

/* The entry of |ord| (|no| entries) after entry |k| >= 1, at most two places
 * on, whose text is at |q| (32 bytes readable): a member the last point had
 * that this one left out before it; -1 when none. */
static int pord_skip(const char *q, const struct jd_pm *ord, unsigned k, unsigned no)
{
    for (unsigned e = k + 1; e < no && e <= k + 2; e++) {
        if (cm_eq(q, point_fields[ord[e].f].cm, ord[e].want, false)) {
            return (int)e;
        }
    }
    return -1;
}

/* What a point's members leave for its detail blob. */
struct pstate {
    /* where a deferred list's value starts (NONE: none) */
    size_t buckets, bounds, pos, neg, quant;
    /* histogram buckets and bounds read in place (the detail blob then is
     * heap[d0, d1)): 0 not yet, 1 buckets, 2 both, -1 deferred instead */
    int hs;
    size_t d0, d1;
    int32_t scale;
    uint64_t zero_count;
    double zero_threshold;
};
#define PSTATE_INIT                                                                                \
    {                                                                                              \
        NONE, NONE, NONE, NONE, NONE, 0, 0, 0, 0, 0, 0                                             \
    }

/* Member |f| of a point of the kind that has it, the cursor at its value
 * (ws run, a second would not move it): its reader's rc (1 from a list
 * read in place that fell back to defer). */
__attribute__((always_inline)) static inline int pmember(struct jd *j, struct point_row *p, int f,
                                                         struct pstate *st)
{
    int rc;
    switch (f) {
    case DP_ATTRS:
        rc = jd_point_attrs(j, &p->attrs);
        break;
    case DP_START:
        rc = rd_start(j, &p->start_ns);
        break;
    case DP_TIME:
        rc = rd_time(j, &p->time_ns);
        break;
    case DP_DOUBLE:
        rc = rd_f64_here(j, "asDouble", &p->value.d);
        p->value_type = PV_DOUBLE;
        break;
    case DP_INT:
        rc = rd_int_value(j, &p->value.i);
        p->value_type = PV_INT;
        break;
    case DP_EXEMPLARS:
        rc = jd_blob_list(j, "exemplars", exemplar, &p->exemplars, &p->n_exemplars);
        break;
    case DP_FLAGS:
        rc = rd_u32(j, "flags", &p->flags);
        break;
    case DP_COUNT:
        rc = rd_count(j, "count", &p->count);
        break;
    case DP_SUM:
        rc = rd_f64_here(j, "sum", &p->sum);
        p->has_sum = true;
        break;
    case DP_MIN:
        rc = rd_f64_here(j, "min", &p->min);
        p->has_min = true;
        break;
    case DP_MAX:
        rc = rd_f64_here(j, "max", &p->max);
        p->has_max = true;
        break;
    case DP_SCALE:
        rc = rd_i32(j, "scale", &st->scale);
        break;
    case DP_ZERO_COUNT:
        rc = rd_count(j, "zeroCount", &st->zero_count);
        break;
    case DP_ZERO_THRESHOLD:
        rc = rd_f64_here(j, "zeroThreshold", &st->zero_threshold);
        break;
    case DP_BUCKETS: /* read in place when it can be the detail's start */
        st->hs = st->hs == 0 && st->bounds == NONE ? 1 : -1;
        st->d0 = j->h->len;
        rc = st->hs == 1 ? list_inline(j, &st->buckets, LI_COUNTS) : defer(j, &st->buckets);
        st->hs = rc == 1 ? -1 : st->hs; /* it fell back to defer */
        st->d1 = j->h->len;
        break;
    case DP_BOUNDS: /* in place right after the buckets read in place */
        st->hs = st->hs == 1 && j->h->len == st->d1 ? 2 : -1;
        rc = st->hs == 2 ? list_inline(j, &st->bounds, LI_BOUNDS) : defer(j, &st->bounds);
        st->hs = rc == 1 ? -1 : st->hs;
        st->d1 = j->h->len;
        break;
    case DP_POSITIVE: /* in place, after a header placeholder */
        st->hs = st->hs == 0 && st->neg == NONE ? 1 : -1;
        st->d0 = j->h->len;
        rc = st->hs == 1 ? list_inline(j, &st->pos, LI_POSITIVE) : defer(j, &st->pos);
        st->hs = rc == 1 ? -1 : st->hs;
        st->d1 = j->h->len;
        break;
    case DP_NEGATIVE: /* in place right after the positive buckets */
        st->hs = st->hs == 1 && j->h->len == st->d1 ? 2 : -1;
        rc = st->hs == 2 ? list_inline(j, &st->neg, LI_NEGATIVE) : defer(j, &st->neg);
        st->hs = rc == 1 ? -1 : st->hs;
        st->d1 = j->h->len;
        break;
    case DP_QUANTILES: /* the whole detail, in place */
        st->hs = st->hs == 0 ? 2 : -1;
        st->d0 = j->h->len;
        rc = st->hs == 2 ? list_inline(j, &st->quant, LI_QUANTILES) : defer(j, &st->quant);
        st->hs = rc == 1 ? -1 : st->hs;
        st->d1 = j->h->len;
        break;
    default: /* f is one of the kind's members */
        __builtin_unreachable();
    }
    return rc;
}

/*
 * The line path's step for member |f|: when the text at the cursor is its
 * camelCase ,"name": (from the '{' when |*first|) and its value begins
 * there (no blank, no null), the member read by pmember. 1 read, 0 not
 * there, -1 anything else (a null or blank, an error): the point is then
 * read again by the general loop.
 */
__attribute__((always_inline)) static inline int pline_one(struct jd *j, struct point_row *p, int f,
                                                           struct pstate *st, bool *first)
{
    const struct fdef *d = &point_fields[f];
    size_t at = j->lx.pos;
    const char *s = j->lx.s;
    if (j->lx.n - at <= FNAME_MAX + 3 || !cm_eq(s + at - *first, d->cm, d->cmwant, *first)) {
        return 0;
    }
    at += d->cmlen - *first;
    unsigned char c = (unsigned char)s[at];
    if (c == 'n' || c <= ' ') {
        return -1;
    }
    j->lx.pos = at;
    *first = false;
    return pmember(j, p, f, st) < 0 ? -1 : 1;
}

/*
 * A point whose members come in the order of their fields in metrics.proto,
 * as protobuf's JSON mapping and the exporters write them, each compact,
 * camelCase, present or not: each one tried by one compare at its place,
 * with no member table, learned order or dispatch (most of the general
 * loop's cost a member). 0 when the point ended at its '}', -1 when the
 * text is anything else (see pline_one).
 */
static int point_line(struct jd *j, struct point_row *p, enum metric_kind kind, struct pstate *st)
{
    bool first = true;
#define PL(f)                                                                                      \
    if (pline_one(j, p, (f), st, &first) < 0) {                                                    \
        return -1;                                                                                 \
    }
    PL(DP_ATTRS);
    PL(DP_START);
    PL(DP_TIME);
    switch (kind) {
    case MK_GAUGE:
    case MK_SUM:
        PL(DP_DOUBLE);
        PL(DP_INT);
        PL(DP_EXEMPLARS);
        PL(DP_FLAGS);
        break;
    case MK_HISTOGRAM:
        PL(DP_COUNT);
        PL(DP_SUM);
        PL(DP_BUCKETS);
        PL(DP_BOUNDS);
        PL(DP_EXEMPLARS);
        PL(DP_FLAGS);
        PL(DP_MIN);
        PL(DP_MAX);
        break;
    case MK_EXP_HISTOGRAM:
        PL(DP_COUNT);
        PL(DP_SUM);
        PL(DP_SCALE);
        PL(DP_ZERO_COUNT);
        PL(DP_POSITIVE);
        PL(DP_NEGATIVE);
        PL(DP_FLAGS);
        PL(DP_EXEMPLARS);
        PL(DP_MIN);
        PL(DP_MAX);
        PL(DP_ZERO_THRESHOLD);
        break;
    case MK_SUMMARY:
        PL(DP_COUNT);
        PL(DP_SUM);
        PL(DP_QUANTILES);
        PL(DP_FLAGS);
        break;
    default:
        return -1;
    }
#undef PL
    size_t at = j->lx.pos;
    if (at < j->lx.n && j->lx.s[at] == '}') {
        j->lx.pos = at + 1;
        return 0;
    }
    return -1;
}

static int point(struct jd *j, uint32_t mi, enum metric_kind kind)
{
    struct point_row *p = batch_add_point(j->b);
    struct pstate st = PSTATE_INIT;
    int rc = 0;
    if (p == NULL) {
        return jd_nomem(j);
    }
    p->metric = mi;
    p->has_sum = kind == MK_SUMMARY;
    const uint32_t members = point_members[kind];
    if (!take_null(j)) {
        if ((rc = jd_obj_open(j, "dataPoints")) < 0) {
            return rc;
        }
        /* the line path first, until a point of this kind fails it; that
         * point is then put back as it began (heap, cursor, row, state) and
         * read by the general loop, as every later one of its kind is */
        if (!j->pline_off[kind]) {
            size_t open = j->lx.pos, mark = j->h->len;
            if (point_line(j, p, kind, &st) == 0) {
                goto detail;
            }
            j->pline_off[kind] = true;
            jd_kvc_drop(j, mark);
            j->h->len = mark;
            j->lx.pos = open;
            *p = (struct point_row){.metric = mi, .has_sum = kind == MK_SUMMARY};
            st = (struct pstate)PSTATE_INIT;
            if (j->err != NULL && j->errlen != 0) {
                j->err[0] = '\0';
            }
        }
        struct jd_pm *ord = j->pord[kind];
        /* k: the learned entries used so far; compares only while k < no
         * and, for entry 0 (from the '{'), only as the first member */
        unsigned k = 0, no = j->pord_n[kind];
        int last = -1; /* the last known member read (next_field's prev) */
        bool first = true;
        struct fcur fc; /* next_field's: set from last and first before each call */
        bool fc_set = false;
        for (;;) {
            int f, e = -1;
            size_t at = j->lx.pos;
            const char *s = j->lx.s;
            /* the k-th member the last point of this kind had, by one
             * compare (cm_eq: the text is exactly its ,"name":, as
             * next_field would read it, and ord holds members the kind has,
             * so no mask test); a '}' ends the point as next_field would
             * end it; else one of the next two learned members (an optional
             * member this point left out); any other text as next_field
             * reads it */
            if (k < no && j->lx.n - at > FNAME_MAX + 3 &&
                cm_eq(s + at - ord[k].back, point_fields[ord[k].f].cm, ord[k].want, false)) {
                e = (int)k;
            } else if (at < j->lx.n && s[at] == '}') {
                j->lx.pos = at + 1;
                break;
            } else if (k != 0 && k < no && j->lx.n - at > FNAME_MAX + 3) {
                e = pord_skip(s + at, ord, k, no);
            }
            if (e >= 0) {
                f = ord[e].f;
                at += ord[e].adv;
                k = (unsigned)e + 1;
                last = f;
                first = false;
                j->lx.pos = at;
                /* the value's first byte is in the text: take_null only for an 'n' or a blank */
                unsigned char c = (unsigned char)s[at];
                if ((c == 'n' || c <= ' ') && take_null(j)) {
                    continue;
                }
            } else {
                if (!fc_set) {
                    fc = (struct fcur)FCUR(j, point_fields);
                    fc_set = true;
                }
                fc.first = first;
                fc.f = fc.prev = last;
                if ((rc = next_field(j, &fc)) <= 0) {
                    break;
                }
                f = fc.f;
                if (k == 0) { /* entry 0 is compared only as the first member */
                    no = 0;
                }
                first = false;
                if (f < 0 || !(members & B(f))) {
                    if ((rc = skip_value(j)) < 0) {
                        return rc;
                    }
                    continue;
                }
                last = f;
                if (pord_insert(ord, &j->pord_n[kind], k, f)) { /* k >= 1 from here */
                    no = j->pord_n[kind];
                    k++;
                }
                if (take_null(j)) {
                    continue;
                }
            }
            /* both ways here ran ws(j) at the cursor (take_null, or the
             * compare's byte test that it is not a blank): the readers below
             * take the cursor as it is (a second ws would not move it) */
            rc = pmember(j, p, f, &st);
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
detail:;
    size_t off = j->h->len, end = NONE; /* the detail: heap[off, end or the heap's end) */
    if (kind == MK_HISTOGRAM && st.hs == 1 && st.bounds == NONE && off == st.d1) {
        if (vbuf_put_u32(j->h, 0) < 0) { /* no bounds */
            return jd_nomem(j);
        }
        off = st.d0;
    } else if (kind == MK_HISTOGRAM && st.hs == 2) {
        off = st.d0;
        end = st.d1;
    } else if (kind == MK_HISTOGRAM) {
        if ((rc = num_list_at(j, st.buckets, "bucketCounts", false)) < 0 ||
            (rc = num_list_at(j, st.bounds, "explicitBounds", true)) < 0) {
            return rc;
        }
    } else if (kind == MK_EXP_HISTOGRAM && st.hs >= 1 &&
               (st.hs == 2 || (st.neg == NONE && off == st.d1))) {
        if (st.hs == 1 && (rc = buckets_at(j, NONE, "negative", false)) < 0) {
            return rc;
        }
        end = st.hs == 2 ? st.d1 : NONE;
        uint64_t zt;
        memcpy(&zt, &st.zero_threshold, 8);
        uint8_t *hd = j->h->p + st.d0; /* a local: the byte stores may alias j->h */
        uint32_t sc = (uint32_t)st.scale;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        /* the header as the vbuf_put calls write it: three stores, not a
         * byte loop (GCC does not merge the loop's) */
        memcpy(hd, &sc, 4);
        memcpy(hd + 4, &st.zero_count, 8);
        memcpy(hd + 12, &zt, 8);
#else
        for (int i = 0; i < 4; i++) { /* the header, little-endian as the vbuf_put calls write */
            hd[i] = (uint8_t)(sc >> (8 * i));
        }
        for (int i = 0; i < 8; i++) {
            hd[4 + i] = (uint8_t)(st.zero_count >> (8 * i));
            hd[12 + i] = (uint8_t)(zt >> (8 * i));
        }
#endif
        off = st.d0;
    } else if (kind == MK_EXP_HISTOGRAM) {
        if (vbuf_put_u32(j->h, (uint32_t)st.scale) < 0 || vbuf_put_u64(j->h, st.zero_count) < 0 ||
            vbuf_put_f64(j->h, st.zero_threshold) < 0) {
            return jd_nomem(j);
        }
        if ((rc = buckets_at(j, st.pos, "positive", false)) < 0 ||
            (rc = buckets_at(j, st.neg, "negative", false)) < 0) {
            return rc;
        }
    } else if (kind == MK_SUMMARY && st.hs == 2) {
        off = st.d0;
        end = st.d1;
    } else if (kind == MK_SUMMARY) {
        if ((rc = quantiles_at(j, st.quant, false)) < 0) {
            return rc;
        }
    }
    p->detail = (struct blob){(uint32_t)off, (uint32_t)((end != NONE ? end : j->h->len) - off)};
    return 0;
}

enum { MD_POINTS, MD_TEMPORALITY, MD_MONOTONIC };
static const struct fdef data_fields[] = {
    [MD_POINTS] = F2("dataPoints", "data_points"),
    [MD_TEMPORALITY] = F2("aggregationTemporality", "aggregation_temporality"),
    [MD_MONOTONIC] = F2("isMonotonic", "is_monotonic"),
};

/* Gauge, Sum, Histogram, ExponentialHistogram or Summary of metric |mi|. */
static int metric_data(struct jd *j, uint32_t mi, enum metric_kind kind, const char *what)
{
    int rc = jd_obj_open(j, what);
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, data_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct metric_row *m = &j->b->metrics[mi];
        bool known = f == MD_POINTS ||
                     (f == MD_TEMPORALITY && kind != MK_GAUGE && kind != MK_SUMMARY) ||
                     (f == MD_MONOTONIC && kind == MK_SUM);
        if (!known || take_null(j)) {
            if (!known && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        if (f == MD_TEMPORALITY) {
            rc = rd_enum(j, "aggregationTemporality", temporality_names, NF(temporality_names),
                         &m->temporality);
        } else if (f == MD_MONOTONIC) {
            rc = jd_rd_bool(j, "isMonotonic", &m->monotonic);
        } else {
            bool efirst = true;
            if ((rc = arr_open(j, "dataPoints")) < 0) {
                return rc;
            }
            while ((rc = arr_next(j, &efirst)) > 0) {
                if ((rc = point(j, mi, kind)) < 0) {
                    return rc;
                }
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum { MT_NAME, MT_DESC, MT_UNIT, MT_GAUGE, MT_SUM, MT_HIST, MT_EXP, MT_SUMMARY, MT_METADATA };
static const struct fdef metric_fields[] = {
    [MT_NAME] = F1("name"),
    [MT_DESC] = F1("description"),
    [MT_UNIT] = F1("unit"),
    [MT_GAUGE] = F1("gauge"),
    [MT_SUM] = F1("sum"),
    [MT_HIST] = F1("histogram"),
    [MT_EXP] = F2("exponentialHistogram", "exponential_histogram"),
    [MT_SUMMARY] = F1("summary"),
    [MT_METADATA] = F1("metadata"),
};

static int metric(struct jd *j, uint32_t si)
{
    uint32_t mi = j->b->n_metrics, rows_mark = j->b->n_rows;
    int rc;
    if (batch_add_metric(j->b) == NULL) {
        return jd_nomem(j);
    }
    j->b->metrics[mi].scope = si;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = jd_obj_open(j, "metrics")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, metric_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct metric_row *m = &j->b->metrics[mi];
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        switch (f) {
        case MT_NAME:
            rc = rd_mstr(j, "name", &m->name);
            break;
        case MT_DESC:
            rc = rd_mstr(j, "description", &m->description);
            break;
        case MT_UNIT:
            rc = rd_mstr(j, "unit", &m->unit);
            break;
        case MT_METADATA:
            rc = jd_attr_list(j, "metadata", &m->metadata);
            break;
        default: {
            static const enum metric_kind kinds[] = {
                [MT_GAUGE] = MK_GAUGE,       [MT_SUM] = MK_SUM,         [MT_HIST] = MK_HISTOGRAM,
                [MT_EXP] = MK_EXP_HISTOGRAM, [MT_SUMMARY] = MK_SUMMARY,
            };
            /* the data oneof: the last member wins, with its points only */
            j->b->n_rows = rows_mark;
            m->kind = kinds[f];
            m->temporality = 0;
            m->monotonic = false;
            rc = metric_data(j, mi, kinds[f], metric_fields[f].camel);
            break;
        }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

int jd_metrics(struct jd *j, uint32_t si)
{
    return record_list(j, "metrics", si, metric);
}
