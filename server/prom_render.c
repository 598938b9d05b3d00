/*
 * prom_render.c - Prometheus API JSON (see prom_render.h).
 *
 * The byte layout follows Prometheus 2.42's encoders: marshalSeriesJSON
 * (a series' float points under "values", its histogram points after them
 * under "histograms", each key only when the series has such points),
 * marshalSampleJSON ("value" or "histogram"), marshalPointJSON,
 * marshalHistogram (buckets from AllBucketIterator: negative buckets from
 * the most negative up, the zero bucket when its count is > 0, positive
 * buckets upwards; empty buckets left out; bounds clipped at the zero
 * threshold) and marshalExemplarJSON; the scalar and string results go
 * through Go's encoding/json (promql.Scalar / promql.String MarshalJSON).
 */
#include "server/prom_render.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "server/prom_params.h"
#include "storage/promname.h"

void prom_jsonw_init(struct jsonw *w, struct evbuffer *out)
{
    jsonw_init(w, out);
    w->html = true; /* jsoniter's standard-library mode escapes HTML */
}

void prom_render_error(struct evbuffer *out, const char *type, const char *msg)
{
    struct jsonw w;
    prom_jsonw_init(&w, out);
    jsonw_obj_begin(&w);
    jsonw_key(&w, "status");
    jsonw_cstr(&w, "error");
    jsonw_key(&w, "errorType");
    jsonw_cstr(&w, type);
    jsonw_key(&w, "error");
    jsonw_cstr(&w, msg);
    jsonw_obj_end(&w);
}

void prom_render_begin(struct jsonw *w)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "status");
    jsonw_cstr(w, "success");
    jsonw_key(w, "data");
}

void prom_render_end(struct jsonw *w, const char *const *warnings, size_t n)
{
    if (n > 0) {
        jsonw_key(w, "warnings");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < n; i++) {
            jsonw_cstr(w, warnings[i]);
        }
        jsonw_arr_end(w);
    }
    jsonw_obj_end(w);
}

void prom_render_labels(struct jsonw *w, const struct pm_labels *ls)
{
    jsonw_obj_begin(w);
    for (uint32_t i = 0; i < ls->n; i++) {
        jsonw_keyn(w, ls->v[i].name, ls->v[i].name_len);
        jsonw_str(w, ls->v[i].value, ls->v[i].value_len);
    }
    jsonw_obj_end(w);
}

/* A timestamp as marshalTimestamp writes it: seconds, then ".mmm" when the
 * milliseconds are not 0 ("-" first for times before the epoch). At most
 * 25 bytes, no NUL. */
static size_t fmt_ts(char *buf, int64_t ms)
{
    size_t n = 0;
    uint64_t t = (uint64_t)ms;
    if (ms < 0) {
        buf[n++] = '-';
        t = 0 - t; /* INT64_MIN stays itself, as in Go */
    }
    uint64_t frac = t % 1000, sec = t / 1000;
    char d[20];
    size_t nd = 0;
    do {
        d[nd++] = (char)('0' + sec % 10);
        sec /= 10;
    } while (sec != 0);
    while (nd != 0) {
        buf[n++] = d[--nd];
    }
    if (frac != 0) {
        buf[n++] = '.';
        buf[n++] = (char)('0' + frac / 100);
        buf[n++] = (char)('0' + frac / 10 % 10);
        buf[n++] = (char)('0' + frac % 10);
    }
    return n;
}

void prom_render_ts(struct jsonw *w, int64_t ms)
{
    char buf[32];
    jsonw_raw(w, buf, fmt_ts(buf, ms));
}

void prom_render_value(struct jsonw *w, double v)
{
    char buf[PROMNAME_FMT_MAX];
    size_t n = promname_fmt_value(v, buf);
    jsonw_str(w, buf, n);
}

/* [t, "v"] into |buf| (FLOAT_POINT_MAX bytes; a value's text never needs
 * escaping: digits, '.', 'e', signs, "NaN", "Inf"). Returns its length. */
#define FLOAT_POINT_MAX (PROMNAME_FMT_MAX + 40)
static size_t float_point_text(char *buf, int64_t t, double v)
{
    size_t n = 0;
    buf[n++] = '[';
    n += fmt_ts(buf + n, t);
    buf[n++] = ',';
    buf[n++] = '"';
    char val[PROMNAME_FMT_MAX];
    size_t vn = promname_fmt_value(v, val);
    memcpy(buf + n, val, vn);
    n += vn;
    buf[n++] = '"';
    buf[n++] = ']';
    return n;
}

/* [t, "v"], written in one piece. */
static void float_point(struct jsonw *w, int64_t t, double v)
{
    char buf[FLOAT_POINT_MAX];
    jsonw_raw(w, buf, float_point_text(buf, t, v));
}

/* A series' float points, comma-separated, in pieces of up to 8 KiB (one
 * buffer add each, not one per point). */
static void float_points(struct jsonw *w, const struct pm_fsample *f, size_t nf)
{
    char buf[8192];
    size_t n = 0;
    for (size_t i = 0; i < nf; i++) {
        if (n + 1 + FLOAT_POINT_MAX > sizeof buf) {
            jsonw_raw(w, buf, n);
            n = 0;
        }
        if (n != 0) {
            buf[n++] = ',';
        }
        n += float_point_text(buf + n, f[i].t, f[i].v);
    }
    if (n != 0) {
        jsonw_raw(w, buf, n);
    }
}

/* [t, {histogram}] */
static void hist_point(struct jsonw *w, int64_t t, const struct pm_hist *h)
{
    jsonw_arr_begin(w);
    prom_render_ts(w, t);
    prom_render_hist(w, h);
    jsonw_arr_end(w);
}

double prom_hist_bound(int32_t idx, int32_t schema)
{
    double lo, hi;
    pm_hist_bounds(schema, idx, false, &lo, &hi);
    return hi;
}

static void bucket(struct jsonw *w, double lo, double hi, bool lo_inc, bool hi_inc, double count)
{
    int b = lo_inc ? (hi_inc ? 3 : 1) : (hi_inc ? 0 : 2);
    jsonw_arr_begin(w);
    jsonw_int(w, b);
    prom_render_value(w, lo);
    prom_render_value(w, hi);
    prom_render_value(w, count);
    jsonw_arr_end(w);
}

void prom_render_hist(struct jsonw *w, const struct pm_hist *h)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "count");
    prom_render_value(w, h->count);
    jsonw_key(w, "sum");
    prom_render_value(w, h->sum);
    bool found = false;
    double zt = h->zero_threshold;
    for (uint32_t k = h->n_neg; k-- > 0;) {
        if (h->neg[k] == 0) {
            continue;
        }
        int32_t i = h->neg_offset + (int32_t)k;
        double lo, hi;
        pm_hist_bounds(h->schema, i, true, &lo, &hi);
        bool lo_inc = (lo < 0), hi_inc = (hi > 0);
        if (hi > -zt) {
            hi = -zt;
        }
        if (!found) {
            jsonw_key(w, "buckets");
            jsonw_arr_begin(w);
            found = true;
        }
        bucket(w, lo, hi, lo_inc, hi_inc, h->neg[k]);
    }
    if (h->zero_count > 0) {
        if (!found) {
            jsonw_key(w, "buckets");
            jsonw_arr_begin(w);
            found = true;
        }
        bucket(w, -zt, zt, true, true, h->zero_count);
    }
    for (uint32_t k = 0; k < h->n_pos; k++) {
        if (h->pos[k] == 0) {
            continue;
        }
        int32_t i = h->pos_offset + (int32_t)k;
        double lo, hi;
        pm_hist_bounds(h->schema, i, false, &lo, &hi);
        bool lo_inc = (lo < 0), hi_inc = (hi > 0);
        if (lo < zt) {
            lo = zt;
        }
        if (!found) {
            jsonw_key(w, "buckets");
            jsonw_arr_begin(w);
            found = true;
        }
        bucket(w, lo, hi, lo_inc, hi_inc, h->pos[k]);
    }
    if (found) {
        jsonw_arr_end(w);
    }
    jsonw_obj_end(w);
}

static void render_series(struct jsonw *w, const struct pm_series *s)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "metric");
    prom_render_labels(w, &s->labels);
    if (s->nf > 0) {
        jsonw_key(w, "values");
        jsonw_arr_begin(w);
        float_points(w, s->f, s->nf);
        jsonw_arr_end(w);
    }
    if (s->nh > 0) {
        jsonw_key(w, "histograms");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < s->nh; i++) {
            hist_point(w, s->h[i].t, s->h[i].h);
        }
        jsonw_arr_end(w);
    }
    jsonw_obj_end(w);
}

static void render_sample(struct jsonw *w, const struct pm_series *s, int64_t t)
{
    jsonw_obj_begin(w);
    jsonw_key(w, "metric");
    prom_render_labels(w, &s->labels);
    if (s->nh > 0 && s->nf == 0) {
        jsonw_key(w, "histogram");
        hist_point(w, s->h[0].t, s->h[0].h);
    } else {
        jsonw_key(w, "value");
        if (s->nf > 0) {
            float_point(w, s->f[0].t, s->f[0].v);
        } else {
            float_point(w, t, NAN); /* not produced by the engine */
        }
    }
    jsonw_obj_end(w);
}

/* [t, "s"] through encoding/json: t as Go prints float64(t) / 1000. */
static void json_ts(struct jsonw *w, int64_t ms)
{
    char buf[PROMNAME_FMT_MAX];
    size_t n = prom_fmt_json_float((double)ms / 1000.0, buf);
    jsonw_raw(w, buf, n);
}

void prom_render_result(struct jsonw *w, const struct pm_result *r)
{
    char buf[PROMNAME_FMT_MAX];
    jsonw_obj_begin(w);
    jsonw_key(w, "resultType");
    switch (r->type) {
    case PM_RES_SCALAR:
        jsonw_cstr(w, "scalar");
        jsonw_key(w, "result");
        jsonw_arr_begin(w);
        json_ts(w, r->t);
        jsonw_str(w, buf, promname_fmt_le(r->v, buf));
        jsonw_arr_end(w);
        break;
    case PM_RES_STRING:
        jsonw_cstr(w, "string");
        jsonw_key(w, "result");
        jsonw_arr_begin(w);
        json_ts(w, r->t);
        jsonw_str(w, r->str.s != NULL ? r->str.s : "", r->str.n);
        jsonw_arr_end(w);
        break;
    case PM_RES_VECTOR:
        jsonw_cstr(w, "vector");
        jsonw_key(w, "result");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < r->set.n; i++) {
            render_sample(w, &r->set.s[i], r->t);
        }
        jsonw_arr_end(w);
        break;
    case PM_RES_MATRIX:
    default:
        jsonw_cstr(w, "matrix");
        jsonw_key(w, "result");
        jsonw_arr_begin(w);
        for (size_t i = 0; i < r->set.n; i++) {
            render_series(w, &r->set.s[i]);
        }
        jsonw_arr_end(w);
        break;
    }
    jsonw_obj_end(w);
}

void prom_render_exemplars(struct jsonw *w, const struct pm_exemplar_series *es, size_t n)
{
    jsonw_arr_begin(w);
    for (size_t i = 0; i < n; i++) {
        jsonw_obj_begin(w);
        jsonw_key(w, "seriesLabels");
        prom_render_labels(w, &es[i].series);
        jsonw_key(w, "exemplars");
        jsonw_arr_begin(w);
        for (size_t k = 0; k < es[i].n; k++) {
            const struct pm_exemplar *e = &es[i].e[k];
            jsonw_obj_begin(w);
            jsonw_key(w, "labels");
            prom_render_labels(w, &e->labels);
            jsonw_key(w, "value");
            prom_render_value(w, e->value);
            jsonw_key(w, "timestamp");
            prom_render_ts(w, e->t);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}
