/*
 * pmsrc_out.c - the series source's output side: exponential histograms as
 * native histograms, folding a series' collected samples (delta
 * accumulation, stable sort, last-ingested-wins at one millisecond, the
 * time range), exemplar blobs, and /api/v1/metadata from the metric
 * dictionaries (pmsrc.h, pmsrc_int.h).
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "lib/hex.h"
#include "query/pmsrc_int.h"
#include "storage/promname.h"

/* Prometheus's receiver ignores the OTLP zero threshold and uses this. */
#define PMS_ZERO_THRESHOLD 1e-128

/* ---- exponential histograms ---- */

/* floor(x / 2^d) */
static int64_t shr_floor(int64_t x, int d)
{
    return x >= 0 ? x >> d : -((-x - 1) >> d) - 1;
}

/* Reads |n| u64 counts at |r| into the dense array of Prometheus indexes
 * starting at |first| (OTLP index offset + i, downscaled by |d|, + 1). */
static int read_buckets(struct val_rd *r, int32_t off, uint32_t n, int d, arena *a, double **out,
                        int32_t *out_off, uint32_t *out_n)
{
    *out = NULL;
    *out_n = 0;
    *out_off = 0;
    if (n == 0) {
        return 0;
    }
    if ((size_t)(r->end - r->p) / 8 < n) {
        return -EBADMSG;
    }
    int64_t first = shr_floor(off, d) + 1;
    int64_t last = shr_floor((int64_t)off + n - 1, d) + 1;
    uint64_t len = (uint64_t)(last - first + 1);
    double *v = arena_alloc(a, len * sizeof(*v));
    if (v == NULL) {
        return -ENOMEM;
    }
    memset(v, 0, len * sizeof(*v));
    for (uint32_t i = 0; i < n; i++) {
        uint64_t c;
        if (val_rd_u64(r, &c) < 0) {
            return -EBADMSG;
        }
        v[shr_floor((int64_t)off + i, d) + 1 - first] += (double)c;
    }
    *out = v;
    *out_off = (int32_t)first;
    *out_n = (uint32_t)len;
    return 0;
}

int pms_exp_hist(arena *a, const uint8_t *detail, size_t len, uint64_t count, double sum,
                 bool has_sum, bool stale, bool gauge, struct pm_hist **out)
{
    struct val_rd r = {detail, detail + len};
    uint32_t scale_u, poff, noff, n, m;
    uint64_t zc;
    double zt;
    if (val_rd_u32(&r, &scale_u) < 0 || val_rd_u64(&r, &zc) < 0 || val_rd_f64(&r, &zt) < 0 ||
        val_rd_u32(&r, &poff) < 0 || val_rd_u32(&r, &n) < 0) {
        return -EBADMSG;
    }
    int32_t scale = (int32_t)scale_u;
    if (scale < -4) {
        return -EINVAL;
    }
    int d = scale > 8 ? scale - 8 : 0;
    if (d > 62) {
        return -EINVAL;
    }
    struct pm_hist *h = arena_alloc(a, sizeof(*h));
    if (h == NULL) {
        return -ENOMEM;
    }
    memset(h, 0, sizeof(*h));
    h->schema = scale - d;
    h->zero_threshold = PMS_ZERO_THRESHOLD;
    h->zero_count = (double)zc;
    int rc = read_buckets(&r, (int32_t)poff, n, d, a, &h->pos, &h->pos_offset, &h->n_pos);
    if (rc < 0) {
        return rc;
    }
    if (val_rd_u32(&r, &noff) < 0 || val_rd_u32(&r, &m) < 0) {
        return -EBADMSG;
    }
    rc = read_buckets(&r, (int32_t)noff, m, d, a, &h->neg, &h->neg_offset, &h->n_neg);
    if (rc < 0) {
        return rc;
    }
    if (stale) {
        h->count = h->sum = promname_stale_nan();
    } else {
        h->count = (double)count;
        h->sum = has_sum ? sum : 0;
    }
    h->reset_hint = gauge ? 3 : 0;
    *out = h;
    return 0;
}

/* ---- stable sorts (bottom-up merge) ---- */

#define PMS_MSORT(fn, T, KEY)                                                                      \
    static int fn(arena *tmp, T *v, uint32_t n)                                                    \
    {                                                                                              \
        uint32_t i;                                                                                \
        for (i = 1; i < n && KEY(v[i - 1]) <= KEY(v[i]); i++) {                                    \
        }                                                                                          \
        if (i >= n) {                                                                              \
            return 0;                                                                              \
        }                                                                                          \
        T *buf = arena_alloc(tmp, (size_t)n * sizeof(T));                                          \
        if (buf == NULL) {                                                                         \
            return -ENOMEM;                                                                        \
        }                                                                                          \
        T *src = v, *dst = buf;                                                                    \
        for (uint32_t w = 1; w < n; w *= 2) {                                                      \
            for (uint32_t lo = 0; lo < n; lo += 2 * w) {                                           \
                uint32_t mid = lo + w < n ? lo + w : n;                                            \
                uint32_t hi = lo + 2 * w < n ? lo + 2 * w : n;                                     \
                uint32_t a = lo, b = mid, k = lo;                                                  \
                while (a < mid && b < hi) {                                                        \
                    dst[k++] = KEY(src[b]) < KEY(src[a]) ? src[b++] : src[a++];                    \
                }                                                                                  \
                while (a < mid) {                                                                  \
                    dst[k++] = src[a++];                                                           \
                }                                                                                  \
                while (b < hi) {                                                                   \
                    dst[k++] = src[b++];                                                           \
                }                                                                                  \
            }                                                                                      \
            T *t = src;                                                                            \
            src = dst;                                                                             \
            dst = t;                                                                               \
            if (w > UINT32_MAX / 2) {                                                              \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
        if (src != v) {                                                                            \
            memcpy(v, src, (size_t)n * sizeof(T));                                                 \
        }                                                                                          \
        return 0;                                                                                  \
    }

#define KEY_T(x) ((x).t)
#define KEY_TNS(x) ((x).tns)
PMS_MSORT(sort_f, struct pm_fsample, KEY_T)
PMS_MSORT(sort_h, struct pm_hsample, KEY_T)
PMS_MSORT(sort_d, struct pms_dsample, KEY_TNS)
PMS_MSORT(sort_e, struct pms_ex, KEY_T)

/* ---- folding a series ---- */

/* Delta samples (sorted by time) accumulated into cumulative ones appended
 * to s->f: a retry at the same nanosecond counts once (the last ingested),
 * a point whose start is not the previous point's time starts a new run,
 * a staleness marker stays one and ends the run. */
static int accumulate(arena *tmp, struct pms_series *s)
{
    if (sort_d(tmp, s->d, s->nd) < 0) {
        return -ENOMEM;
    }
    double run = 0;
    uint64_t prev = 0;
    bool open = false;
    for (uint32_t i = 0; i < s->nd; i++) {
        const struct pms_dsample *d = &s->d[i];
        if (i + 1 < s->nd && s->d[i + 1].tns == d->tns) {
            continue; /* the same point again: the later copy wins */
        }
        double out;
        if (promname_is_stale_nan(d->v)) {
            out = d->v;
            open = false;
        } else {
            if (!open || d->sns != prev) {
                run = 0;
            }
            run += d->v;
            out = run;
            open = true;
        }
        prev = d->tns;
        if (pms_grow_f(tmp, s) < 0) {
            return -ENOMEM;
        }
        s->f[s->nf++] = (struct pm_fsample){promname_ts_ms(d->tns), out};
    }
    return 0;
}

int pms_series_finish(arena *a, arena *tmp, struct pms_series *s, int64_t mint, int64_t maxt,
                      struct pm_series *out)
{
    memset(out, 0, sizeof(*out));
    out->labels = s->labels;
    if (s->nd > 0 && accumulate(tmp, s) < 0) {
        return -ENOMEM;
    }
    if (s->nf > 0) {
        if (sort_f(tmp, s->f, s->nf) < 0) {
            return -ENOMEM;
        }
        /* compacted in place when already in |a| (k <= i) */
        struct pm_fsample *f = s->f_res ? s->f : arena_alloc(a, s->nf * sizeof(*f));
        if (f == NULL) {
            return -ENOMEM;
        }
        size_t k = 0;
        for (uint32_t i = 0; i < s->nf; i++) {
            if (i + 1 < s->nf && s->f[i + 1].t == s->f[i].t) {
                continue; /* last ingested wins */
            }
            if (s->f[i].t >= mint && s->f[i].t <= maxt) {
                f[k++] = s->f[i];
            }
        }
        out->f = f;
        out->nf = k;
    }
    if (s->nh > 0) {
        if (sort_h(tmp, s->h, s->nh) < 0) {
            return -ENOMEM;
        }
        struct pm_hsample *h = arena_alloc(a, s->nh * sizeof(*h));
        if (h == NULL) {
            return -ENOMEM;
        }
        size_t k = 0;
        for (uint32_t i = 0; i < s->nh; i++) {
            if (i + 1 < s->nh && s->h[i + 1].t == s->h[i].t) {
                continue;
            }
            if (s->h[i].t >= mint && s->h[i].t <= maxt) {
                h[k++] = s->h[i];
            }
        }
        out->h = h;
        out->nh = k;
    }
    return 0;
}

int pms_ex_finish(arena *tmp, struct pms_ex *e, uint32_t n, int64_t mint, int64_t maxt,
                  uint32_t *n_out)
{
    if (sort_e(tmp, e, n) < 0) {
        return -ENOMEM;
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (e[i].t >= mint && e[i].t <= maxt) {
            e[k++] = e[i];
        }
    }
    *n_out = k;
    return 0;
}

/* ---- exemplars ---- */

int pms_hist_bucket_of(const uint8_t *detail, size_t len, double v, char le[PROMNAME_FMT_MAX],
                       size_t *le_len)
{
    struct val_rd r = {detail, detail + len};
    uint32_t n, m;
    if (val_rd_u32(&r, &n) < 0 || (size_t)(r.end - r.p) / 8 < n) {
        return -2;
    }
    r.p += (size_t)n * 8;
    if (val_rd_u32(&r, &m) < 0) {
        return -2;
    }
    uint32_t lim = n < m ? n : m;
    for (uint32_t i = 0; i < lim; i++) {
        double b;
        if (val_rd_f64(&r, &b) < 0) {
            return -2;
        }
        if (b >= v) {
            *le_len = promname_fmt_le(b, le);
            return (int)i;
        }
    }
    return -1;
}

static size_t runes(const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        k += ((uint8_t)s[i] & 0xC0) != 0x80;
    }
    return k;
}

static bool all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (p[i] != 0) {
            return false;
        }
    }
    return true;
}

/* The receiver keeps an exemplar's filtered attributes only while its
 * labels' names and values (trace_id and span_id included) total at most
 * this many runes; attribute keys are label names as they are, not
 * sanitised (PROMQL.md C.8, prometheusremotewrite's exemplar conversion). */
#define PMS_EX_MAX_RUNES 128

static int ex_labels(arena *a, const uint8_t *trace, bool has_trace, const uint8_t *span,
                     bool has_span, const uint8_t *ap, size_t alen, uint32_t acount,
                     struct pm_labels *out)
{
    struct pm_lb lb;
    pm_lb_init(&lb, a, NULL);
    size_t total = 0;
    char hex[33];
    bool tr = has_trace && !all_zero(trace, 16), sp = has_span && !all_zero(span, 8);
    if (tr) {
        for (int i = 0; i < 16; i++) {
            hex[2 * i] = hex_lower[trace[i] >> 4];
            hex[2 * i + 1] = hex_lower[trace[i] & 15];
        }
        pm_lb_set_copy(&lb, "trace_id", 8, hex, 32);
        total += 8 + 32;
    }
    if (sp) {
        for (int i = 0; i < 8; i++) {
            hex[2 * i] = hex_lower[span[i] >> 4];
            hex[2 * i + 1] = hex_lower[span[i] & 15];
        }
        pm_lb_set_copy(&lb, "span_id", 7, hex, 16);
        total += 7 + 16;
    }
    if (acount > 0) {
        /* rendered values back to back, then added if the total fits */
        size_t cap = alen * 8 + 256;
        char *buf = arena_alloc(a, cap);
        struct {
            const char *k, *v;
            size_t kn, vn;
        } *kv = arena_alloc(a, acount * sizeof(*kv));
        if (buf == NULL || kv == NULL) {
            return -ENOMEM;
        }
        struct val_rd r = {ap, ap + alen};
        size_t used = 0;
        uint32_t n = 0;
        for (uint32_t i = 0; i < acount; i++) {
            struct val v;
            const char *k;
            size_t kn;
            if (val_rd_kv(&r, &k, &kn, &v) < 0) {
                n = 0; /* malformed: no attributes */
                break;
            }
            int vl = promname_label_value(&v, buf + used, cap - used);
            if (vl < 0) {
                n = 0;
                break;
            }
            if ((kn == 8 && memcmp(k, "trace_id", 8) == 0 && tr) ||
                (kn == 7 && memcmp(k, "span_id", 7) == 0 && sp)) {
                continue; /* the ids win */
            }
            total += runes(k, kn) + runes(buf + used, (size_t)vl);
            kv[n].k = k;
            kv[n].kn = kn;
            kv[n].v = buf + used;
            kv[n].vn = (size_t)vl;
            n++;
            used += (size_t)vl;
        }
        for (uint32_t i = 0; total <= PMS_EX_MAX_RUNES && i < n; i++) {
            pm_lb_set_copy(&lb, kv[i].k, kv[i].kn, kv[i].v, kv[i].vn);
        }
    }
    return pm_lb_done(&lb, out);
}

int pms_exemplars_walk(arena *a, const uint8_t *p, size_t len, uint32_t n, pms_ex_fn fn, void *ctx)
{
    struct val_rd r = {p, p + len};
    for (uint32_t i = 0; i < n; i++) {
        uint64_t tns, bits;
        uint8_t pv, ht, hs;
        uint32_t ac, an;
        if (val_rd_u64(&r, &tns) < 0 || val_rd_u8(&r, &pv) < 0 || val_rd_u64(&r, &bits) < 0 ||
            val_rd_u8(&r, &ht) < 0 || r.end - r.p < 16) {
            return -EBADMSG;
        }
        const uint8_t *trace = r.p;
        r.p += 16;
        if (val_rd_u8(&r, &hs) < 0 || r.end - r.p < 8) {
            return -EBADMSG;
        }
        const uint8_t *span = r.p;
        r.p += 8;
        if (val_rd_u32(&r, &ac) < 0 || val_rd_u32(&r, &an) < 0 || (size_t)(r.end - r.p) < an) {
            return -EBADMSG;
        }
        const uint8_t *ap = r.p;
        r.p += an;
        double v = 0;
        if (pv == PV_DOUBLE) {
            memcpy(&v, &bits, 8);
        } else if (pv == PV_INT) {
            int64_t iv;
            memcpy(&iv, &bits, 8);
            v = (double)iv;
        }
        struct pm_labels ls;
        int rc = ex_labels(a, trace, ht != 0, span, hs != 0, ap, an, ac, &ls);
        if (rc < 0) {
            return rc;
        }
        rc = fn(ctx, promname_ts_ms(tns), v, &ls);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* ---- metadata ---- */

static int meta_cmp(const void *x, const void *y)
{
    const struct pm_meta *a = x, *b = y;
    int c = strcmp(a->name, b->name);
    if (c == 0) {
        c = strcmp(a->type, b->type);
    }
    if (c == 0) {
        c = strcmp(a->help, b->help);
    }
    if (c == 0) {
        c = strcmp(a->unit, b->unit);
    }
    return c;
}

static const struct metric_view *src_metric(const struct qctx_src *s, uint32_t id)
{
    return s->b != NULL ? blk_metric(s->b, id) : oblock_metric(s->ob, id);
}

static bool src_has_target_info(const struct qctx_src *s)
{
    uint32_t n = qctx_n_resources(s);
    for (uint32_t i = 0; i < n; i++) {
        const struct res_view *rv = qctx_resource(s, i);
        if (rv == NULL) {
            continue;
        }
        char rbuf[1024];
        struct promname_resource pr;
        if (promname_resource_init(&pr, rv->attrs.p, rv->attrs.len, rv->attrs.count, rbuf,
                                   sizeof(rbuf)) < 0) {
            continue;
        }
        /* promname_target_info's rule without building the set */
        if (pr.n_other > 0 && (pr.job != NULL || pr.instance != NULL)) {
            return true;
        }
    }
    return false;
}

int pmsrc_metadata(struct pmsrc *s, const char *metric, size_t len, struct pm_meta **out, size_t *n)
{
    struct qctx *q = s->q;
    *out = NULL;
    *n = 0;
    struct pm_meta *v = NULL;
    uint32_t nv = 0, cv = 0;
    bool ti = false;
    for (size_t i = 0; i < q->n_src; i++) {
        struct qctx_src *qs = &q->src[i];
        if (qctx_src_failed(qs)) {
            continue;
        }
        uint32_t nm = qs->b != NULL ? blk_n_metrics(qs->b) : oblock_n_metrics(qs->ob);
        for (uint32_t k = 0; k < nm; k++) {
            const struct metric_view *mv = src_metric(qs, k);
            if (mv == NULL || mv->kind == MK_NONE) {
                continue;
            }
            enum promname_temporality tp = promname_temporality(mv->kind, mv->temporality);
            int pt = promname_type_of(mv->kind, mv->monotonic);
            if (tp == PROMNAME_T_INVALID || pt < 0) {
                continue;
            }
            size_t cap = (size_t)mv->name.len + mv->unit.len + 48;
            char *nb = arena_alloc(s->a, cap);
            char *ub = arena_alloc(s->a, (size_t)mv->unit.len + 40);
            char *help = arena_strndup(s->a, mv->description.p, mv->description.len);
            if (nb == NULL || ub == NULL || help == NULL) {
                goto oom;
            }
            int nl = promname_metric(mv->name.p, mv->name.len, mv->unit.p, mv->unit.len,
                                     (enum promname_type)pt, nb, cap);
            if (nl < 0 || (len > 0 && ((size_t)nl != len || memcmp(nb, metric, len) != 0))) {
                continue;
            }
            if (promname_unit(mv->unit.p, mv->unit.len, ub, (size_t)mv->unit.len + 40) < 0) {
                ub[0] = '\0';
            }
            if (pms_grow(s->a, (void **)&v, &cv, nv, sizeof(*v)) < 0) {
                goto oom;
            }
            v[nv++] =
                (struct pm_meta){nb, promname_meta_type((enum promname_type)pt, tp), help, ub};
        }
        ti = ti || src_has_target_info(qs);
    }
    if (ti && (len == 0 || (len == 11 && memcmp(metric, "target_info", 11) == 0))) {
        if (pms_grow(s->a, (void **)&v, &cv, nv, sizeof(*v)) < 0) {
            goto oom;
        }
        v[nv++] = (struct pm_meta){"target_info", "gauge", "Target metadata", ""};
    }
    if (nv > 0) {
        qsort(v, nv, sizeof(*v), meta_cmp);
    }
    uint32_t k = 0;
    for (uint32_t i = 0; i < nv; i++) {
        if (k > 0 && meta_cmp(&v[k - 1], &v[i]) == 0) {
            continue;
        }
        v[k++] = v[i];
    }
    *out = v;
    *n = k;
    return 0;
oom:
    qctx_fail(q, -ENOMEM, "out of memory");
    return -ENOMEM;
}
