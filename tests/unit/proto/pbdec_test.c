/*
 * pbdec_test.c - the hand-written protobuf decoder against protobuf-c.
 *
 * The reference is the protobuf-c code generated from our .proto files: the
 * same bytes are unpacked by protobuf-c and decoded by pbdec, and every field
 * of every record is compared (diff_* below walk the protobuf-c tree and the
 * batch rows side by side). Inputs: the captured exporter vectors, requests
 * built here with protobuf-c's pack (every value and metric kind), hand-made
 * wire bytes for what pack never emits (field order, split runs, packed vs
 * unpacked, repeated oneof members), and malformed input.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "proto/pbdec.h"
#include "storage/batch.h"
#include "storage/val.h"

#if defined(__has_include)
#if __has_include("tests/util/manifest.c")
#define HAVE_MANIFEST 1
#include "tests/util/manifest.h"
#endif
#endif

typedef Opentelemetry__Proto__Common__V1__AnyValue PAnyValue;
typedef Opentelemetry__Proto__Common__V1__ArrayValue PArrayValue;
typedef Opentelemetry__Proto__Common__V1__KeyValueList PKvList;
typedef Opentelemetry__Proto__Common__V1__KeyValue PKeyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope PScope;
typedef Opentelemetry__Proto__Resource__V1__Resource PResource;
typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest PLogsReq;
typedef Opentelemetry__Proto__Logs__V1__ResourceLogs PResourceLogs;
typedef Opentelemetry__Proto__Logs__V1__ScopeLogs PScopeLogs;
typedef Opentelemetry__Proto__Logs__V1__LogRecord PLogRecord;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest PTraceReq;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans PResourceSpans;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans PScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__Span PSpan;
typedef Opentelemetry__Proto__Trace__V1__Span__Event PEvent;
typedef Opentelemetry__Proto__Trace__V1__Span__Link PLink;
typedef Opentelemetry__Proto__Trace__V1__Status PStatus;
typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest PMetricsReq;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics PResourceMetrics;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics PScopeMetrics;
typedef Opentelemetry__Proto__Metrics__V1__Metric PMetric;
typedef Opentelemetry__Proto__Metrics__V1__Gauge PGauge;
typedef Opentelemetry__Proto__Metrics__V1__Sum PSum;
typedef Opentelemetry__Proto__Metrics__V1__Histogram PHistogram;
typedef Opentelemetry__Proto__Metrics__V1__ExponentialHistogram PExpHistogram;
typedef Opentelemetry__Proto__Metrics__V1__Summary PSummary;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint PNumberDP;
typedef Opentelemetry__Proto__Metrics__V1__HistogramDataPoint PHistDP;
typedef Opentelemetry__Proto__Metrics__V1__ExponentialHistogramDataPoint PExpDP;
typedef Opentelemetry__Proto__Metrics__V1__ExponentialHistogramDataPoint__Buckets PBuckets;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint PSummaryDP;
typedef Opentelemetry__Proto__Metrics__V1__SummaryDataPoint__ValueAtQuantile PQuantile;
typedef Opentelemetry__Proto__Metrics__V1__Exemplar PExemplar;

#define AV(x) OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_##x

/* ------------------------------------------------------------------ */
/* files                                                               */

static const char *vectors_dir(void)
{
    const char *d = getenv("MIRADB_VECTORS");
    return d != NULL && d[0] != '\0' ? d : "tests/vectors";
}

/* Whole file (gunzipped when the name ends in .gz); owned by the caller. */
static uint8_t *load_vector(const char *name, size_t *len)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", vectors_dir(), name);
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    size_t nl = strlen(name);
    if (nl > 3 && strcmp(name + nl - 3, ".gz") == 0) {
        uint8_t *out;
        size_t outlen = 0;
        size_t isize = (size_t)buf[n - 4] | (size_t)buf[n - 3] << 8 | (size_t)buf[n - 2] << 16 |
                       (size_t)buf[n - 1] << 24;
        struct libdeflate_decompressor *dz = libdeflate_alloc_decompressor();
        out = malloc(isize + 1);
        cr_assert(dz != NULL && out != NULL);
        cr_assert_eq(libdeflate_gzip_decompress(dz, buf, (size_t)n, out, isize, &outlen),
                     LIBDEFLATE_SUCCESS, "gunzip %s", name);
        libdeflate_free_decompressor(dz);
        free(buf);
        buf = out;
        *len = outlen;
    }
    return buf;
}

/* ------------------------------------------------------------------ */
/* comparing a protobuf-c tree with the rows                          */

/* batch_blob(), but never NULL + 0 (a batch whose heap was never grown). */
static const uint8_t *bp(const struct batch *b, struct blob x)
{
    return b->heap.p != NULL ? batch_blob(b, x) : (const uint8_t *)"";
}

static void cmp_mstr(struct mstr m, const char *want, const char *what)
{
    size_t n = strlen(want);
    cr_assert(m.len == n && (n == 0 || memcmp(m.p, want, n) == 0), "%s: got '%.*s', want '%s'",
              what, (int)m.len, m.len ? m.p : "", want);
}

static bool id_valid(ProtobufCBinaryData bd, size_t n)
{
    if (bd.len != n) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (bd.data[i] != 0) {
            return true;
        }
    }
    return false;
}

/* |got| must hold the id when it is valid, zeros otherwise. */
static void cmp_id(ProtobufCBinaryData bd, const uint8_t *got, size_t n, const char *what)
{
    static const uint8_t zero[16];
    if (id_valid(bd, n)) {
        cr_assert(memcmp(got, bd.data, n) == 0, "%s differs", what);
    } else {
        cr_assert(memcmp(got, zero, n) == 0, "%s: invalid id must be stored as zeros", what);
    }
}

static void cmp_value(const PAnyValue *av, const struct val *v, const char *what);

static void cmp_attrs_raw(PKeyValue **kv, size_t n, const uint8_t *p, size_t len, uint32_t count,
                          const char *what)
{
    cr_assert_eq(count, n, "%s: %u attributes, want %zu", what, count, n);
    cr_assert_eq(val_check_attrs(p, len, count), 0, "%s: malformed attribute blob", what);
    struct val_rd r = {p, p + len};
    for (size_t i = 0; i < n; i++) {
        const char *k;
        size_t kn;
        struct val v;
        cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
        const char *wk = kv[i]->key;
        cr_assert(kn == strlen(wk) && memcmp(k, wk, kn) == 0, "%s: key %zu is '%.*s', want '%s'",
                  what, i, (int)kn, k, wk);
        cmp_value(kv[i]->value, &v, wk);
    }
    cr_assert(r.p == r.end, "%s: trailing bytes in attribute blob", what);
}

static void cmp_attrs(PKeyValue **kv, size_t n, const struct batch *b, struct attrs a,
                      const char *what)
{
    cmp_attrs_raw(kv, n, bp(b, a.blob), a.blob.len, a.count, what);
}

static void cmp_value(const PAnyValue *av, const struct val *v, const char *what)
{
    int c = av != NULL ? (int)av->value_case : 0;
    switch (c) {
    case AV(STRING_VALUE): {
        size_t n = strlen(av->string_value);
        cr_assert(v->type == VAL_STR && v->n == n && memcmp(v->s, av->string_value, n) == 0,
                  "%s: string value differs", what);
        break;
    }
    case AV(BOOL_VALUE):
        cr_assert(v->type == VAL_BOOL && v->b == (av->bool_value != 0), "%s: bool differs", what);
        break;
    case AV(INT_VALUE):
        cr_assert(v->type == VAL_INT && v->i == av->int_value, "%s: int differs", what);
        break;
    case AV(DOUBLE_VALUE):
        cr_assert(v->type == VAL_DOUBLE && memcmp(&v->d, &av->double_value, 8) == 0,
                  "%s: double differs", what);
        break;
    case AV(BYTES_VALUE):
        cr_assert(v->type == VAL_BYTES && v->n == av->bytes_value.len &&
                      (v->n == 0 || memcmp(v->s, av->bytes_value.data, v->n) == 0),
                  "%s: bytes differ", what);
        break;
    case AV(ARRAY_VALUE): {
        const PArrayValue *a = av->array_value;
        cr_assert(v->type == VAL_ARRAY && v->count == a->n_values, "%s: array differs", what);
        struct val_rd in = v->inner;
        for (size_t i = 0; i < a->n_values; i++) {
            struct val e;
            cr_assert_eq(val_rd_value(&in, &e), 0);
            cmp_value(a->values[i], &e, what);
        }
        cr_assert(in.p == in.end, "%s: trailing bytes in array", what);
        break;
    }
    case AV(KVLIST_VALUE): {
        const PKvList *l = av->kvlist_value;
        cr_assert(v->type == VAL_KVLIST && v->count == l->n_values, "%s: kvlist differs", what);
        struct val_rd in = v->inner;
        for (size_t i = 0; i < l->n_values; i++) {
            const char *k;
            size_t kn;
            struct val e;
            cr_assert_eq(val_rd_kv(&in, &k, &kn, &e), 0);
            cr_assert(kn == strlen(l->values[i]->key) && memcmp(k, l->values[i]->key, kn) == 0,
                      "%s: kvlist key differs", what);
            cmp_value(l->values[i]->value, &e, what);
        }
        cr_assert(in.p == in.end, "%s: trailing bytes in kvlist", what);
        break;
    }
    default: /* not set, or the profiles-only string_value_strindex */
        cr_assert_eq(v->type, VAL_EMPTY, "%s: want an empty value, got type %d", what, v->type);
        break;
    }
}

static void cmp_resource(const PResource *r, const char *schema_url, const struct batch *b,
                         uint32_t ri)
{
    cr_assert_lt(ri, b->n_resources);
    const struct res_row *rr = &b->resources[ri];
    if (r != NULL) {
        cmp_attrs(r->attributes, r->n_attributes, b, rr->attrs, "resource attributes");
        cr_assert_eq(rr->dropped_attrs, r->dropped_attributes_count);
    } else {
        cr_assert_eq(rr->attrs.count, 0);
        cr_assert_eq(rr->dropped_attrs, 0);
    }
    cmp_mstr(rr->schema_url, schema_url, "resource schema_url");
}

static void cmp_scope(const PScope *s, const char *schema_url, const struct batch *b, uint32_t si,
                      uint32_t ri)
{
    cr_assert_lt(si, b->n_scopes);
    const struct scope_row *sr = &b->scopes[si];
    cr_assert_eq(sr->resource, ri);
    if (s != NULL) {
        cmp_mstr(sr->name, s->name, "scope name");
        cmp_mstr(sr->version, s->version, "scope version");
        cmp_attrs(s->attributes, s->n_attributes, b, sr->attrs, "scope attributes");
        cr_assert_eq(sr->dropped_attrs, s->dropped_attributes_count);
    } else {
        cr_assert_eq(sr->name.len, 0);
        cr_assert_eq(sr->version.len, 0);
        cr_assert_eq(sr->attrs.count, 0);
        cr_assert_eq(sr->dropped_attrs, 0);
    }
    cmp_mstr(sr->schema_url, schema_url, "scope schema_url");
}

static void cmp_log(const PLogRecord *m, const struct batch *b, uint32_t li, uint32_t si)
{
    cr_assert_lt(li, b->n_rows);
    const struct log_row *r = &b->logs[li];
    cr_assert_eq(r->scope, si);
    cr_assert_eq(r->time_ns, m->time_unix_nano);
    cr_assert_eq(r->observed_ns, m->observed_time_unix_nano);
    cr_assert_eq(r->severity_number, (int32_t)m->severity_number);
    cmp_mstr(r->severity_text, m->severity_text, "severity_text");
    cmp_attrs(m->attributes, m->n_attributes, b, r->attrs, "log attributes");
    cr_assert_eq(r->dropped_attrs, m->dropped_attributes_count);
    cr_assert_eq(r->flags, m->flags);
    cr_assert_eq(r->has_trace_id, id_valid(m->trace_id, 16));
    cr_assert_eq(r->has_span_id, id_valid(m->span_id, 8));
    cmp_id(m->trace_id, r->trace_id, 16, "log trace_id");
    cmp_id(m->span_id, r->span_id, 8, "log span_id");
    cmp_mstr(r->event_name, m->event_name, "event_name");
    if (m->body != NULL && m->body->value_case == AV(STRING_VALUE)) {
        cr_assert_eq(r->body_type, VAL_STR);
        cmp_mstr(r->body_str, m->body->string_value, "body");
    } else if (m->body == NULL || m->body->value_case == AV(_NOT_SET) ||
               m->body->value_case == AV(STRING_VALUE_STRINDEX)) {
        cr_assert_eq(r->body_type, VAL_EMPTY);
    } else {
        struct val_rd rd = {bp(b, r->body_val), bp(b, r->body_val) + r->body_val.len};
        struct val v;
        cr_assert_eq(val_rd_value(&rd, &v), 0);
        cr_assert(rd.p == rd.end, "body blob has trailing bytes");
        cr_assert_eq(r->body_type, v.type);
        cmp_value(m->body, &v, "body");
    }
}

/* Walks the whole request; every row must be accounted for. */
static void diff_logs(const PLogsReq *m, const struct batch *b)
{
    uint32_t ri = 0, si = 0, li = 0;
    cr_assert_eq(b->signal, SIG_LOGS);
    for (size_t i = 0; i < m->n_resource_logs; i++, ri++) {
        const PResourceLogs *rl = m->resource_logs[i];
        cmp_resource(rl->resource, rl->schema_url, b, ri);
        for (size_t j = 0; j < rl->n_scope_logs; j++, si++) {
            const PScopeLogs *sl = rl->scope_logs[j];
            cmp_scope(sl->scope, sl->schema_url, b, si, ri);
            for (size_t k = 0; k < sl->n_log_records; k++, li++) {
                cmp_log(sl->log_records[k], b, li, si);
            }
        }
    }
    cr_assert_eq(b->n_resources, ri);
    cr_assert_eq(b->n_scopes, si);
    cr_assert_eq(b->n_rows, li);
}

static void cmp_events(const PSpan *m, const struct batch *b, const struct span_row *r)
{
    cr_assert_eq(r->n_events, m->n_events);
    struct val_rd rd = {bp(b, r->events), bp(b, r->events) + r->events.len};
    for (size_t i = 0; i < m->n_events; i++) {
        const PEvent *e = m->events[i];
        uint64_t t;
        const char *name;
        size_t nl;
        uint32_t dropped, count, nbytes;
        const void *attrs;
        cr_assert_eq(val_rd_u64(&rd, &t), 0);
        cr_assert_eq(val_rd_str(&rd, &name, &nl), 0);
        cr_assert_eq(val_rd_u32(&rd, &dropped), 0);
        cr_assert_eq(val_rd_u32(&rd, &count), 0);
        cr_assert_eq(val_rd_u32(&rd, &nbytes), 0);
        cr_assert_eq(val_rd_bytes(&rd, &attrs, nbytes), 0);
        cr_assert_eq(t, e->time_unix_nano);
        cr_assert(nl == strlen(e->name) && memcmp(name, e->name, nl) == 0, "event name");
        cr_assert_eq(dropped, e->dropped_attributes_count);
        cmp_attrs_raw(e->attributes, e->n_attributes, attrs, nbytes, count, "event attributes");
    }
    cr_assert(rd.p == rd.end, "events blob has trailing bytes");
}

static void cmp_links(const PSpan *m, const struct batch *b, const struct span_row *r)
{
    cr_assert_eq(r->n_links, m->n_links);
    struct val_rd rd = {bp(b, r->links), bp(b, r->links) + r->links.len};
    for (size_t i = 0; i < m->n_links; i++) {
        const PLink *l = m->links[i];
        const void *ids, *attrs;
        const char *ts;
        size_t tsl;
        uint32_t flags, dropped, count, nbytes;
        cr_assert_eq(val_rd_bytes(&rd, &ids, 24), 0);
        cr_assert_eq(val_rd_str(&rd, &ts, &tsl), 0);
        cr_assert_eq(val_rd_u32(&rd, &flags), 0);
        cr_assert_eq(val_rd_u32(&rd, &dropped), 0);
        cr_assert_eq(val_rd_u32(&rd, &count), 0);
        cr_assert_eq(val_rd_u32(&rd, &nbytes), 0);
        cr_assert_eq(val_rd_bytes(&rd, &attrs, nbytes), 0);
        cmp_id(l->trace_id, ids, 16, "link trace_id");
        cmp_id(l->span_id, (const uint8_t *)ids + 16, 8, "link span_id");
        cr_assert(tsl == strlen(l->trace_state) && memcmp(ts, l->trace_state, tsl) == 0,
                  "link trace_state");
        cr_assert_eq(flags, l->flags);
        cr_assert_eq(dropped, l->dropped_attributes_count);
        cmp_attrs_raw(l->attributes, l->n_attributes, attrs, nbytes, count, "link attributes");
    }
    cr_assert(rd.p == rd.end, "links blob has trailing bytes");
}

static void cmp_span(const PSpan *m, const struct batch *b, uint32_t li, uint32_t si)
{
    cr_assert_lt(li, b->n_rows);
    const struct span_row *r = &b->spans[li];
    cr_assert_eq(r->scope, si);
    cmp_id(m->trace_id, r->trace_id, 16, "span trace_id");
    cmp_id(m->span_id, r->span_id, 8, "span span_id");
    cr_assert_eq(r->has_parent, id_valid(m->parent_span_id, 8));
    cmp_id(m->parent_span_id, r->parent_span_id, 8, "parent_span_id");
    cmp_mstr(r->trace_state, m->trace_state, "trace_state");
    cmp_mstr(r->name, m->name, "span name");
    cr_assert_eq(r->kind, (int32_t)m->kind);
    cr_assert_eq(r->flags, m->flags);
    cr_assert_eq(r->start_ns, m->start_time_unix_nano);
    cr_assert_eq(r->end_ns, m->end_time_unix_nano);
    cmp_attrs(m->attributes, m->n_attributes, b, r->attrs, "span attributes");
    cr_assert_eq(r->dropped_attrs, m->dropped_attributes_count);
    cr_assert_eq(r->dropped_events, m->dropped_events_count);
    cr_assert_eq(r->dropped_links, m->dropped_links_count);
    if (m->status != NULL) {
        cr_assert_eq(r->status_code, (int32_t)m->status->code);
        cmp_mstr(r->status_message, m->status->message, "status message");
    } else {
        cr_assert_eq(r->status_code, 0);
        cr_assert_eq(r->status_message.len, 0);
    }
    cmp_events(m, b, r);
    cmp_links(m, b, r);
}

static void diff_traces(const PTraceReq *m, const struct batch *b)
{
    uint32_t ri = 0, si = 0, li = 0;
    cr_assert_eq(b->signal, SIG_TRACES);
    for (size_t i = 0; i < m->n_resource_spans; i++, ri++) {
        const PResourceSpans *rs = m->resource_spans[i];
        cmp_resource(rs->resource, rs->schema_url, b, ri);
        for (size_t j = 0; j < rs->n_scope_spans; j++, si++) {
            const PScopeSpans *ss = rs->scope_spans[j];
            cmp_scope(ss->scope, ss->schema_url, b, si, ri);
            for (size_t k = 0; k < ss->n_spans; k++, li++) {
                cmp_span(ss->spans[k], b, li, si);
            }
        }
    }
    cr_assert_eq(b->n_resources, ri);
    cr_assert_eq(b->n_scopes, si);
    cr_assert_eq(b->n_rows, li);
}

static void cmp_exemplars(PExemplar **ex, size_t n, const struct batch *b,
                          const struct point_row *p)
{
    cr_assert_eq(p->n_exemplars, n);
    struct val_rd rd = {bp(b, p->exemplars), bp(b, p->exemplars) + p->exemplars.len};
    for (size_t i = 0; i < n; i++) {
        const PExemplar *e = ex[i];
        uint64_t t, value;
        uint8_t pv, has_trace, has_span;
        const void *trace, *span, *attrs;
        uint32_t count, nbytes;
        cr_assert_eq(val_rd_u64(&rd, &t), 0);
        cr_assert_eq(val_rd_u8(&rd, &pv), 0);
        cr_assert_eq(val_rd_u64(&rd, &value), 0);
        cr_assert_eq(val_rd_u8(&rd, &has_trace), 0);
        cr_assert_eq(val_rd_bytes(&rd, &trace, 16), 0);
        cr_assert_eq(val_rd_u8(&rd, &has_span), 0);
        cr_assert_eq(val_rd_bytes(&rd, &span, 8), 0);
        cr_assert_eq(val_rd_u32(&rd, &count), 0);
        cr_assert_eq(val_rd_u32(&rd, &nbytes), 0);
        cr_assert_eq(val_rd_bytes(&rd, &attrs, nbytes), 0);
        cr_assert_eq(t, e->time_unix_nano);
        switch (e->value_case) {
        case OPENTELEMETRY__PROTO__METRICS__V1__EXEMPLAR__VALUE_AS_DOUBLE:
            cr_assert_eq(pv, PV_DOUBLE);
            cr_assert(memcmp(&value, &e->as_double, 8) == 0, "exemplar as_double");
            break;
        case OPENTELEMETRY__PROTO__METRICS__V1__EXEMPLAR__VALUE_AS_INT:
            cr_assert_eq(pv, PV_INT);
            cr_assert_eq((int64_t)value, e->as_int);
            break;
        default:
            cr_assert_eq(pv, PV_NONE);
            cr_assert_eq(value, 0);
            break;
        }
        cr_assert_eq(has_trace, id_valid(e->trace_id, 16));
        cr_assert_eq(has_span, id_valid(e->span_id, 8));
        cmp_id(e->trace_id, trace, 16, "exemplar trace_id");
        cmp_id(e->span_id, span, 8, "exemplar span_id");
        cmp_attrs_raw(e->filtered_attributes, e->n_filtered_attributes, attrs, nbytes, count,
                      "exemplar filtered_attributes");
    }
    cr_assert(rd.p == rd.end, "exemplars blob has trailing bytes");
}

static void cmp_number_point(const PNumberDP *m, const struct batch *b, const struct point_row *p)
{
    cr_assert_eq(p->start_ns, m->start_time_unix_nano);
    cr_assert_eq(p->time_ns, m->time_unix_nano);
    cr_assert_eq(p->flags, m->flags);
    cmp_attrs(m->attributes, m->n_attributes, b, p->attrs, "point attributes");
    switch (m->value_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE:
        cr_assert_eq(p->value_type, PV_DOUBLE);
        cr_assert(memcmp(&p->value.d, &m->as_double, 8) == 0, "as_double");
        break;
    case OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT:
        cr_assert_eq(p->value_type, PV_INT);
        cr_assert_eq(p->value.i, m->as_int);
        break;
    default:
        cr_assert_eq(p->value_type, PV_NONE);
        break;
    }
    cr_assert_eq(p->detail.len, 0);
    cmp_exemplars(m->exemplars, m->n_exemplars, b, p);
}

static void cmp_opt(bool has, double got, int want_case, double want, const char *what)
{
    cr_assert_eq(has, want_case != 0, "%s presence", what);
    if (has) {
        cr_assert(memcmp(&got, &want, 8) == 0, "%s value", what);
    }
}

static void cmp_hist_point(const PHistDP *m, const struct batch *b, const struct point_row *p)
{
    cr_assert_eq(p->start_ns, m->start_time_unix_nano);
    cr_assert_eq(p->time_ns, m->time_unix_nano);
    cr_assert_eq(p->flags, m->flags);
    cr_assert_eq(p->count, m->count);
    cmp_attrs(m->attributes, m->n_attributes, b, p->attrs, "point attributes");
    cmp_opt(p->has_sum, p->sum, m->sum_opt_case, m->sum, "sum");
    cmp_opt(p->has_min, p->min, m->min_opt_case, m->min, "min");
    cmp_opt(p->has_max, p->max, m->max_opt_case, m->max, "max");
    struct val_rd rd = {bp(b, p->detail), bp(b, p->detail) + p->detail.len};
    uint32_t n;
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, m->n_bucket_counts);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v;
        cr_assert_eq(val_rd_u64(&rd, &v), 0);
        cr_assert_eq(v, m->bucket_counts[i]);
    }
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, m->n_explicit_bounds);
    for (uint32_t i = 0; i < n; i++) {
        double v;
        cr_assert_eq(val_rd_f64(&rd, &v), 0);
        cr_assert(memcmp(&v, &m->explicit_bounds[i], 8) == 0, "explicit bound %u", i);
    }
    cr_assert(rd.p == rd.end, "histogram detail has trailing bytes");
    cmp_exemplars(m->exemplars, m->n_exemplars, b, p);
}

static void cmp_buckets(struct val_rd *rd, const PBuckets *bk)
{
    uint32_t off, n;
    cr_assert_eq(val_rd_u32(rd, &off), 0);
    cr_assert_eq(val_rd_u32(rd, &n), 0);
    cr_assert_eq((int32_t)off, bk != NULL ? bk->offset : 0);
    cr_assert_eq(n, bk != NULL ? bk->n_bucket_counts : 0);
    for (uint32_t i = 0; i < n; i++) {
        uint64_t v;
        cr_assert_eq(val_rd_u64(rd, &v), 0);
        cr_assert_eq(v, bk->bucket_counts[i]);
    }
}

static void cmp_exp_point(const PExpDP *m, const struct batch *b, const struct point_row *p)
{
    cr_assert_eq(p->start_ns, m->start_time_unix_nano);
    cr_assert_eq(p->time_ns, m->time_unix_nano);
    cr_assert_eq(p->flags, m->flags);
    cr_assert_eq(p->count, m->count);
    cmp_attrs(m->attributes, m->n_attributes, b, p->attrs, "point attributes");
    cmp_opt(p->has_sum, p->sum, m->sum_opt_case, m->sum, "sum");
    cmp_opt(p->has_min, p->min, m->min_opt_case, m->min, "min");
    cmp_opt(p->has_max, p->max, m->max_opt_case, m->max, "max");
    struct val_rd rd = {bp(b, p->detail), bp(b, p->detail) + p->detail.len};
    uint32_t scale;
    uint64_t zc;
    double zt;
    cr_assert_eq(val_rd_u32(&rd, &scale), 0);
    cr_assert_eq(val_rd_u64(&rd, &zc), 0);
    cr_assert_eq(val_rd_f64(&rd, &zt), 0);
    cr_assert_eq((int32_t)scale, m->scale);
    cr_assert_eq(zc, m->zero_count);
    cr_assert(memcmp(&zt, &m->zero_threshold, 8) == 0, "zero_threshold");
    cmp_buckets(&rd, m->positive);
    cmp_buckets(&rd, m->negative);
    cr_assert(rd.p == rd.end, "exp histogram detail has trailing bytes");
    cmp_exemplars(m->exemplars, m->n_exemplars, b, p);
}

static void cmp_summary_point(const PSummaryDP *m, const struct batch *b, const struct point_row *p)
{
    cr_assert_eq(p->start_ns, m->start_time_unix_nano);
    cr_assert_eq(p->time_ns, m->time_unix_nano);
    cr_assert_eq(p->flags, m->flags);
    cr_assert_eq(p->count, m->count);
    cr_assert(p->has_sum && memcmp(&p->sum, &m->sum, 8) == 0, "summary sum");
    cmp_attrs(m->attributes, m->n_attributes, b, p->attrs, "point attributes");
    struct val_rd rd = {bp(b, p->detail), bp(b, p->detail) + p->detail.len};
    uint32_t n;
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, m->n_quantile_values);
    for (uint32_t i = 0; i < n; i++) {
        double q, v;
        cr_assert_eq(val_rd_f64(&rd, &q), 0);
        cr_assert_eq(val_rd_f64(&rd, &v), 0);
        cr_assert(memcmp(&q, &m->quantile_values[i]->quantile, 8) == 0, "quantile");
        cr_assert(memcmp(&v, &m->quantile_values[i]->value, 8) == 0, "quantile value");
    }
    cr_assert(rd.p == rd.end, "summary detail has trailing bytes");
    cr_assert_eq(p->n_exemplars, 0);
}

/* Compares one Metric and its points (rows *pi onwards). */
static void cmp_metric(const PMetric *m, const struct batch *b, uint32_t mi, uint32_t si,
                       uint32_t *pi)
{
    cr_assert_lt(mi, b->n_metrics);
    const struct metric_row *r = &b->metrics[mi];
    cr_assert_eq(r->scope, si);
    cmp_mstr(r->name, m->name, "metric name");
    cmp_mstr(r->description, m->description, "metric description");
    cmp_mstr(r->unit, m->unit, "metric unit");
    cmp_attrs(m->metadata, m->n_metadata, b, r->metadata, "metric metadata");
    size_t n = 0;
    switch (m->data_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
        cr_assert_eq(r->kind, MK_GAUGE);
        cr_assert_eq(r->temporality, 0);
        cr_assert_eq(r->monotonic, false);
        n = m->gauge->n_data_points;
        break;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
        cr_assert_eq(r->kind, MK_SUM);
        cr_assert_eq(r->temporality, (int32_t)m->sum->aggregation_temporality);
        cr_assert_eq(r->monotonic, m->sum->is_monotonic != 0);
        n = m->sum->n_data_points;
        break;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
        cr_assert_eq(r->kind, MK_HISTOGRAM);
        cr_assert_eq(r->temporality, (int32_t)m->histogram->aggregation_temporality);
        n = m->histogram->n_data_points;
        break;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
        cr_assert_eq(r->kind, MK_EXP_HISTOGRAM);
        cr_assert_eq(r->temporality, (int32_t)m->exponential_histogram->aggregation_temporality);
        n = m->exponential_histogram->n_data_points;
        break;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
        cr_assert_eq(r->kind, MK_SUMMARY);
        cr_assert_eq(r->temporality, 0);
        n = m->summary->n_data_points;
        break;
    default:
        cr_assert_eq(r->kind, MK_NONE);
        break;
    }
    for (size_t i = 0; i < n; i++, (*pi)++) {
        cr_assert_lt(*pi, b->n_rows);
        const struct point_row *p = &b->points[*pi];
        cr_assert_eq(p->metric, mi);
        switch (m->data_case) {
        case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
            cmp_number_point(m->gauge->data_points[i], b, p);
            break;
        case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
            cmp_number_point(m->sum->data_points[i], b, p);
            break;
        case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
            cmp_hist_point(m->histogram->data_points[i], b, p);
            break;
        case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
            cmp_exp_point(m->exponential_histogram->data_points[i], b, p);
            break;
        case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
            cmp_summary_point(m->summary->data_points[i], b, p);
            break;
        default:
            break;
        }
    }
}

static void diff_metrics(const PMetricsReq *m, const struct batch *b)
{
    uint32_t ri = 0, si = 0, mi = 0, pi = 0;
    cr_assert_eq(b->signal, SIG_METRICS);
    for (size_t i = 0; i < m->n_resource_metrics; i++, ri++) {
        const PResourceMetrics *rm = m->resource_metrics[i];
        cmp_resource(rm->resource, rm->schema_url, b, ri);
        for (size_t j = 0; j < rm->n_scope_metrics; j++, si++) {
            const PScopeMetrics *sm = rm->scope_metrics[j];
            cmp_scope(sm->scope, sm->schema_url, b, si, ri);
            for (size_t k = 0; k < sm->n_metrics; k++, mi++) {
                cmp_metric(sm->metrics[k], b, mi, si, &pi);
            }
        }
    }
    cr_assert_eq(b->n_resources, ri);
    cr_assert_eq(b->n_scopes, si);
    cr_assert_eq(b->n_metrics, mi);
    cr_assert_eq(b->n_rows, pi);
}

/*
 * Unpacks |body| with protobuf-c and compares it with |b| (already decoded
 * from the same bytes). Returns the number of rows.
 */
static uint32_t diff_with_protobuf_c(enum signal s, const uint8_t *body, size_t len,
                                     const struct batch *b)
{
    switch (s) {
    case SIG_LOGS: {
        PLogsReq *m =
            opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
                NULL, len, body);
        cr_assert_not_null(m, "protobuf-c cannot unpack what pbdec accepted");
        diff_logs(m, b);
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(m,
                                                                                              NULL);
        break;
    }
    case SIG_TRACES: {
        PTraceReq *m =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                NULL, len, body);
        cr_assert_not_null(m, "protobuf-c cannot unpack what pbdec accepted");
        diff_traces(m, b);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            m, NULL);
        break;
    }
    case SIG_METRICS: {
        PMetricsReq *m =
            opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
                NULL, len, body);
        cr_assert_not_null(m, "protobuf-c cannot unpack what pbdec accepted");
        diff_metrics(m, b);
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
            m, NULL);
        break;
    }
    }
    return b->n_rows;
}

/* Decodes |body| (must succeed) and diffs it against protobuf-c. */
static struct batch *decode_and_diff(enum signal s, const uint8_t *body, size_t len)
{
    struct batch *b = batch_new(s);
    char err[256];
    cr_assert_not_null(b);
    int rc = pbdec_decode(s, body, len, b, err, sizeof(err));
    cr_assert_eq(rc, 0, "pbdec_decode: %d %s", rc, err);
    diff_with_protobuf_c(s, body, len, b);
    return b;
}

/* ------------------------------------------------------------------ */
/* the captured vectors                                               */

struct vec {
    const char *file;
    enum signal sig;
    uint32_t rows;
    uint32_t metrics;
    int frame; /* 0 plain, 1 gRPC frame, 2 gzipped gRPC frame */
};

static const struct vec vectors[] = {
    {"grpc-logs.pb", SIG_LOGS, 10, 0, 0},
    {"grpc-traces.pb", SIG_TRACES, 57, 0, 0},
    {"grpc-metrics.pb", SIG_METRICS, 21, 9, 0},
    {"http-protobuf-logs.pb", SIG_LOGS, 10, 0, 0},
    {"http-protobuf-traces.pb", SIG_TRACES, 57, 0, 0},
    {"http-protobuf-metrics.pb", SIG_METRICS, 21, 9, 0},
    {"http-protobuf-logs.pb.gz", SIG_LOGS, 10, 0, 0},
    {"http-protobuf-traces.pb.gz", SIG_TRACES, 57, 0, 0},
    {"http-protobuf-metrics.pb.gz", SIG_METRICS, 21, 9, 0},
    {"grpc-logs.grpc-frame", SIG_LOGS, 10, 0, 1},
    {"grpc-traces.grpc-frame", SIG_TRACES, 57, 0, 1},
    {"grpc-metrics.grpc-frame", SIG_METRICS, 21, 9, 1},
    {"grpc-logs.gzip.grpc-frame", SIG_LOGS, 10, 0, 2},
    {"grpc-traces.gzip.grpc-frame", SIG_TRACES, 57, 0, 2},
    {"grpc-metrics.gzip.grpc-frame", SIG_METRICS, 21, 9, 2},
};

/* The protobuf message of a vector: unframed and gunzipped as needed. */
static uint8_t *vector_message(const struct vec *v, size_t *len)
{
    uint8_t *raw = load_vector(v->file, len);
    if (v->frame == 0) {
        return raw;
    }
    cr_assert_geq(*len, 5);
    uint32_t mlen =
        (uint32_t)raw[1] << 24 | (uint32_t)raw[2] << 16 | (uint32_t)raw[3] << 8 | raw[4];
    cr_assert_eq(mlen, *len - 5, "%s: frame length", v->file);
    cr_assert_eq(raw[0], v->frame == 2 ? 1 : 0, "%s: compressed flag", v->file);
    uint8_t *msg;
    size_t n;
    if (v->frame == 1) {
        msg = malloc(mlen + 1);
        memcpy(msg, raw + 5, mlen);
        n = mlen;
    } else {
        size_t isize = (size_t)raw[*len - 4] | (size_t)raw[*len - 3] << 8 |
                       (size_t)raw[*len - 2] << 16 | (size_t)raw[*len - 1] << 24;
        struct libdeflate_decompressor *dz = libdeflate_alloc_decompressor();
        msg = malloc(isize + 1);
        cr_assert_eq(libdeflate_gzip_decompress(dz, raw + 5, mlen, msg, isize, &n),
                     LIBDEFLATE_SUCCESS);
        libdeflate_free_decompressor(dz);
    }
    free(raw);
    *len = n;
    return msg;
}

Test(pbdec, every_captured_vector_decodes_exactly_like_protobuf_c)
{
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        const struct vec *v = &vectors[i];
        size_t len;
        uint8_t *body = vector_message(v, &len);
        struct batch *b = decode_and_diff(v->sig, body, len);
        cr_assert_eq(b->n_rows, v->rows, "%s: %u rows", v->file, b->n_rows);
        cr_assert_eq(b->n_metrics, v->metrics, "%s: %u metrics", v->file, b->n_metrics);
        cr_assert_eq(b->rejected, 0);
        cr_assert_gt(b->n_resources, 0);
        batch_free(b);
        free(body);
    }
}

Test(pbdec, captured_vectors_carry_the_documented_content)
{
    /* Spot checks that do not go through protobuf-c, so that a shared
     * misunderstanding of the schema cannot pass unnoticed. */
    size_t len;
    uint8_t *body = load_vector("http-protobuf-logs.pb", &len);
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    cr_assert_eq(pbdec_decode(SIG_LOGS, body, len, b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(b->n_resources, 1);
    bool found = false;
    struct val_rd r = {bp(b, b->resources[0].attrs.blob),
                       bp(b, b->resources[0].attrs.blob) + b->resources[0].attrs.blob.len};
    for (uint32_t i = 0; i < b->resources[0].attrs.count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
        if (kn == 12 && memcmp(k, "service.name", 12) == 0) {
            cr_assert(v.type == VAL_STR && v.n == 14 && memcmp(v.s, "acceptance-svc", 14) == 0);
            found = true;
        }
    }
    cr_assert(found, "service.name missing");
    int kinds = 0;
    for (uint32_t i = 0; i < b->n_rows; i++) {
        kinds |= 1 << b->logs[i].body_type;
        cr_assert_gt(b->logs[i].time_ns, 1767225600000000000ull - 1);
    }
    cr_assert(kinds & (1 << VAL_STR), "a string body");
    cr_assert(kinds & (1 << VAL_KVLIST), "a structured body");
    batch_free(b);
    free(body);
}

#ifdef HAVE_MANIFEST
Test(pbdec, captured_vectors_match_their_manifests)
{
    static const struct {
        const char *file, *proto;
        enum signal s;
    } m[] = {
        {"grpc-logs.pb", "grpc", SIG_LOGS},
        {"grpc-traces.pb", "grpc", SIG_TRACES},
        {"grpc-metrics.pb", "grpc", SIG_METRICS},
        {"http-protobuf-logs.pb", "http-protobuf", SIG_LOGS},
        {"http-protobuf-traces.pb", "http-protobuf", SIG_TRACES},
        {"http-protobuf-metrics.pb", "http-protobuf", SIG_METRICS},
        {"http-protobuf-logs.pb.gz", "http-protobuf-gzip", SIG_LOGS},
        {"http-protobuf-traces.pb.gz", "http-protobuf-gzip", SIG_TRACES},
        {"http-protobuf-metrics.pb.gz", "http-protobuf-gzip", SIG_METRICS},
    };
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
        size_t len;
        uint8_t *body = load_vector(m[i].file, &len);
        struct batch *b = batch_new(m[i].s);
        char err[256];
        cr_assert_eq(pbdec_decode(m[i].s, body, len, b, err, sizeof(err)), 0, "%s", err);
        manifest_check(NULL, m[i].proto, m[i].s, b);
        batch_free(b);
        free(body);
    }
}
#endif

Test(pbdec, every_prefix_of_a_vector_is_an_error_or_a_valid_request)
{
    static const struct {
        const char *file;
        enum signal s;
    } v[] = {
        {"grpc-logs.pb", SIG_LOGS},
        {"grpc-traces.pb", SIG_TRACES},
        {"grpc-metrics.pb", SIG_METRICS},
    };
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        size_t len;
        uint8_t *body = load_vector(v[i].file, &len);
        struct batch *b = batch_new(v[i].s);
        char err[256];
        int ok = 0;
        for (size_t n = 0; n < len; n++) {
            /* A copy of exactly n bytes, so ASan catches any read past it. */
            uint8_t *p = malloc(n ? n : 1);
            memcpy(p, body, n);
            batch_reset(b, v[i].s);
            int rc = pbdec_decode(v[i].s, p, n, b, err, sizeof(err));
            if (rc == 0) {
                ok++;
                diff_with_protobuf_c(v[i].s, p, n, b);
            } else {
                cr_assert_eq(rc, -EPROTO, "%s prefix %zu: %d", v[i].file, n, rc);
                cr_assert(strncmp(err, signal_name(v[i].s), strlen(signal_name(v[i].s))) == 0 &&
                              strstr(err, " at offset ") != NULL,
                          "%s prefix %zu: message '%s'", v[i].file, n, err);
                cr_assert(b->n_rows == 0 && b->n_resources == 0 && b->n_scopes == 0 &&
                              b->n_metrics == 0 && b->heap.len == 0,
                          "a failed decode must leave the batch as it was");
            }
            free(p);
        }
        /* Prefixes ending on a top-level field boundary are valid requests. */
        cr_assert_geq(ok, 1, "%s", v[i].file);
        batch_free(b);
        free(body);
    }
}

/* ------------------------------------------------------------------ */
/* requests built with protobuf-c                                     */

static void *pool_ptrs[8192];
static int pool_n;

static void *pool(size_t n)
{
    cr_assert_lt(pool_n, 8192);
    void *p = calloc(1, n);
    cr_assert_not_null(p);
    pool_ptrs[pool_n++] = p;
    return p;
}

static void pool_free(void)
{
    while (pool_n > 0) {
        free(pool_ptrs[--pool_n]);
    }
}

#define NEW(T, init)                                                                               \
    ({                                                                                             \
        T *x_ = pool(sizeof(T));                                                                   \
        init(x_);                                                                                  \
        x_;                                                                                        \
    })

static PAnyValue *av_new(int c)
{
    PAnyValue *a = NEW(PAnyValue, opentelemetry__proto__common__v1__any_value__init);
    a->value_case = c;
    return a;
}

static PAnyValue *av_str(const char *s)
{
    PAnyValue *a = av_new(AV(STRING_VALUE));
    a->string_value = (char *)s;
    return a;
}

static PAnyValue *av_int(int64_t i)
{
    PAnyValue *a = av_new(AV(INT_VALUE));
    a->int_value = i;
    return a;
}

static PAnyValue *av_dbl(double d)
{
    PAnyValue *a = av_new(AV(DOUBLE_VALUE));
    a->double_value = d;
    return a;
}

static PAnyValue *av_bool(bool v)
{
    PAnyValue *a = av_new(AV(BOOL_VALUE));
    a->bool_value = v;
    return a;
}

static PAnyValue *av_bytes(const void *p, size_t n)
{
    PAnyValue *a = av_new(AV(BYTES_VALUE));
    a->bytes_value.data = (uint8_t *)p;
    a->bytes_value.len = n;
    return a;
}

static PAnyValue *av_arr(int n, ...)
{
    PAnyValue *a = av_new(AV(ARRAY_VALUE));
    PArrayValue *arr = NEW(PArrayValue, opentelemetry__proto__common__v1__array_value__init);
    arr->n_values = (size_t)n;
    arr->values = pool(sizeof(PAnyValue *) * (size_t)(n ? n : 1));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        arr->values[i] = va_arg(ap, PAnyValue *);
    }
    va_end(ap);
    a->array_value = arr;
    return a;
}

static PKeyValue *kv(const char *k, PAnyValue *v)
{
    PKeyValue *x = NEW(PKeyValue, opentelemetry__proto__common__v1__key_value__init);
    x->key = (char *)k;
    x->value = v;
    return x;
}

static PKeyValue **kvs(size_t *count, int n, ...)
{
    PKeyValue **a = pool(sizeof(PKeyValue *) * (size_t)(n ? n : 1));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        a[i] = va_arg(ap, PKeyValue *);
    }
    va_end(ap);
    *count = (size_t)n;
    return a;
}

static PAnyValue *av_kvl(int n, ...)
{
    PAnyValue *a = av_new(AV(KVLIST_VALUE));
    PKvList *l = NEW(PKvList, opentelemetry__proto__common__v1__key_value_list__init);
    l->n_values = (size_t)n;
    l->values = pool(sizeof(PKeyValue *) * (size_t)(n ? n : 1));
    va_list ap;
    va_start(ap, n);
    for (int i = 0; i < n; i++) {
        l->values[i] = va_arg(ap, PKeyValue *);
    }
    va_end(ap);
    a->kvlist_value = l;
    return a;
}

/* Every AnyValue kind, nested. */
static PKeyValue **all_kinds(size_t *n)
{
    static const uint8_t bytes[] = {0x00, 0xff, 0x10};
    PAnyValue *strindex = av_new(AV(STRING_VALUE_STRINDEX));
    strindex->string_value_strindex = 7;
    return kvs(n, 11, kv("s", av_str("héllo, wörld €𝄞")), kv("i", av_int(INT64_MIN)),
               kv("i2", av_int(-1)), kv("d", av_dbl(-0.0)), kv("nan", av_dbl(NAN)),
               kv("b", av_bool(true)), kv("y", av_bytes(bytes, 3)), kv("e", NULL),
               kv("e2", av_new(AV(_NOT_SET))), kv("strindex", strindex),
               kv("nested", av_kvl(3, kv("arr", av_arr(3, av_int(1), av_str(""), av_arr(0))),
                                   kv("kv", av_kvl(1, kv("deep", av_arr(1, av_kvl(0))))),
                                   kv("", av_bytes(bytes, 0)))));
}

static uint8_t *pack_logs(PLogsReq *m, size_t *len)
{
    *len =
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__get_packed_size(m);
    uint8_t *buf = pool(*len + 1);
    cr_assert_eq(
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__pack(m, buf), *len);
    return buf;
}

static uint8_t *pack_traces(PTraceReq *m, size_t *len)
{
    *len =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            m);
    uint8_t *buf = pool(*len + 1);
    cr_assert_eq(
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(m, buf),
        *len);
    return buf;
}

static uint8_t *pack_metrics(PMetricsReq *m, size_t *len)
{
    *len =
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(
            m);
    uint8_t *buf = pool(*len + 1);
    cr_assert_eq(
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(m, buf),
        *len);
    return buf;
}

static PResource *resource(void)
{
    PResource *r = NEW(PResource, opentelemetry__proto__resource__v1__resource__init);
    r->attributes = kvs(&r->n_attributes, 2, kv("service.name", av_str("svc")),
                        kv("host", av_kvl(1, kv("arch", av_str("amd64")))));
    r->dropped_attributes_count = 3;
    return r;
}

static PScope *scope(const char *name)
{
    PScope *s = NEW(PScope, opentelemetry__proto__common__v1__instrumentation_scope__init);
    s->name = (char *)name;
    s->version = "1.2.3";
    s->attributes = kvs(&s->n_attributes, 1, kv("scope.attr", av_int(5)));
    s->dropped_attributes_count = 4;
    return s;
}

static const uint8_t TRACE[16] = {0x5b, 0x8e, 0xff, 0xf7, 0x98, 0x03, 0x81, 0x03,
                                  0xd2, 0x69, 0xb6, 0x33, 0x81, 0x3f, 0xc6, 0x0c};
static const uint8_t SPAN[8] = {0xee, 0xe1, 0x9b, 0x7e, 0xc3, 0xc1, 0xb1, 0x74};
static const uint8_t ZERO[16];

static ProtobufCBinaryData bd(const uint8_t *p, size_t n)
{
    ProtobufCBinaryData x = {n, (uint8_t *)p};
    return x;
}

Test(pbdec, logs_built_with_protobuf_c_round_trip)
{
    PLogRecord *l1 = NEW(PLogRecord, opentelemetry__proto__logs__v1__log_record__init);
    l1->time_unix_nano = 1767225600123456789ull;
    l1->observed_time_unix_nano = 1767225600223456789ull;
    l1->severity_number = 17;
    l1->severity_text = "ERROR";
    l1->body = av_kvl(2, kv("msg", av_str("boom")), kv("code", av_int(500)));
    l1->attributes = all_kinds(&l1->n_attributes);
    l1->dropped_attributes_count = 2;
    l1->flags = 0x101;
    l1->trace_id = bd(TRACE, 16);
    l1->span_id = bd(SPAN, 8);
    l1->event_name = "app.crash";

    PLogRecord *l2 = NEW(PLogRecord, opentelemetry__proto__logs__v1__log_record__init);
    l2->body = av_str("plain string body");
    l2->trace_id = bd(ZERO, 16); /* all zero: no trace */
    l2->span_id = bd(SPAN, 7);   /* wrong length: no span */
    l2->severity_number = 99;    /* unknown enum value: kept */

    PLogRecord *l3 = NEW(PLogRecord, opentelemetry__proto__logs__v1__log_record__init);
    l3->body = av_arr(2, av_dbl(1.5), av_bytes(TRACE, 16));
    PLogRecord *l4 = NEW(PLogRecord, opentelemetry__proto__logs__v1__log_record__init);
    PLogRecord *l5 = NEW(PLogRecord, opentelemetry__proto__logs__v1__log_record__init);
    l5->body = av_bool(false);
    PLogRecord *l6 = NEW(PLogRecord, opentelemetry__proto__logs__v1__log_record__init);
    l6->body = av_new(AV(STRING_VALUE_STRINDEX));

    PScopeLogs *sl = NEW(PScopeLogs, opentelemetry__proto__logs__v1__scope_logs__init);
    sl->scope = scope("my.lib");
    sl->schema_url = "https://opentelemetry.io/schemas/1.24.0";
    PLogRecord *recs[] = {l1, l2, l3, l4, l5, l6};
    sl->log_records = recs;
    sl->n_log_records = 6;
    PScopeLogs *empty_scope = NEW(PScopeLogs, opentelemetry__proto__logs__v1__scope_logs__init);

    PResourceLogs *rl = NEW(PResourceLogs, opentelemetry__proto__logs__v1__resource_logs__init);
    rl->resource = resource();
    rl->schema_url = "https://res/1";
    PScopeLogs *sls[] = {sl, empty_scope};
    rl->scope_logs = sls;
    rl->n_scope_logs = 2;
    PResourceLogs *rl2 = NEW(PResourceLogs, opentelemetry__proto__logs__v1__resource_logs__init);
    PScopeLogs *sl2 = NEW(PScopeLogs, opentelemetry__proto__logs__v1__scope_logs__init);
    sl2->log_records = recs; /* no scope message at all */
    sl2->n_log_records = 2;
    PScopeLogs *sls2[] = {sl2};
    rl2->scope_logs = sls2;
    rl2->n_scope_logs = 1;

    PLogsReq req = OPENTELEMETRY__PROTO__COLLECTOR__LOGS__V1__EXPORT_LOGS_SERVICE_REQUEST__INIT;
    PResourceLogs *rls[] = {rl, rl2};
    req.resource_logs = rls;
    req.n_resource_logs = 2;

    size_t len;
    uint8_t *body = pack_logs(&req, &len);
    struct batch *b = decode_and_diff(SIG_LOGS, body, len);
    cr_assert_eq(b->n_rows, 8);
    cr_assert_eq(b->n_scopes, 3);
    cr_assert_eq(b->n_resources, 2);
    /* Explicit values, independent of the differential walk. */
    const struct log_row *r = &b->logs[0];
    cr_assert(r->has_trace_id && r->has_span_id && memcmp(r->trace_id, TRACE, 16) == 0);
    cr_assert_eq(r->body_type, VAL_KVLIST);
    cr_assert_eq(r->attrs.count, 11);
    cr_assert_eq(b->logs[1].body_type, VAL_STR);
    cr_assert(!b->logs[1].has_trace_id && !b->logs[1].has_span_id);
    cr_assert_eq(b->logs[1].severity_number, 99);
    cr_assert_eq(b->logs[2].body_type, VAL_ARRAY);
    cr_assert_eq(b->logs[3].body_type, VAL_EMPTY);
    cr_assert_eq(b->logs[4].body_type, VAL_BOOL);
    cr_assert_eq(b->logs[5].body_type, VAL_EMPTY, "strindex body is empty");
    cr_assert_eq(b->scopes[2].resource, 1);
    cr_assert_eq(b->logs[6].scope, 2);
    batch_free(b);
    pool_free();
}

Test(pbdec, traces_built_with_protobuf_c_round_trip)
{
    PEvent *e1 = NEW(PEvent, opentelemetry__proto__trace__v1__span__event__init);
    e1->time_unix_nano = 42;
    e1->name = "exception";
    e1->attributes = kvs(&e1->n_attributes, 2, kv("exception.type", av_str("E")),
                         kv("exception.stack", av_arr(2, av_str("a"), av_str("b"))));
    e1->dropped_attributes_count = 1;
    PEvent *e2 = NEW(PEvent, opentelemetry__proto__trace__v1__span__event__init);
    e2->name = "";
    PEvent *evs[] = {e1, e2};

    PLink *k1 = NEW(PLink, opentelemetry__proto__trace__v1__span__link__init);
    k1->trace_id = bd(TRACE, 16);
    k1->span_id = bd(SPAN, 8);
    k1->trace_state = "rojo=00f067aa0ba902b7";
    k1->attributes = all_kinds(&k1->n_attributes);
    k1->dropped_attributes_count = 9;
    k1->flags = 0x301;
    PLink *k2 = NEW(PLink, opentelemetry__proto__trace__v1__span__link__init);
    k2->trace_id = bd(TRACE, 15); /* wrong length */
    PLink *lks[] = {k1, k2};

    PSpan *s1 = NEW(PSpan, opentelemetry__proto__trace__v1__span__init);
    s1->trace_id = bd(TRACE, 16);
    s1->span_id = bd(SPAN, 8);
    s1->parent_span_id = bd(TRACE + 8, 8);
    s1->trace_state = "congo=t61rcWkgMzE";
    s1->flags = 0x101;
    s1->name = "GET /api/users/{id}";
    s1->kind = 2;
    s1->start_time_unix_nano = 1767225600000000000ull;
    s1->end_time_unix_nano = 1767225600250000000ull;
    s1->attributes = all_kinds(&s1->n_attributes);
    s1->dropped_attributes_count = 5;
    s1->events = evs;
    s1->n_events = 2;
    s1->dropped_events_count = 6;
    s1->links = lks;
    s1->n_links = 2;
    s1->dropped_links_count = 7;
    PStatus *st = NEW(PStatus, opentelemetry__proto__trace__v1__status__init);
    st->code = 2;
    st->message = "upstream failed";
    s1->status = st;

    PSpan *s2 = NEW(PSpan, opentelemetry__proto__trace__v1__span__init); /* root, minimal */
    s2->trace_id = bd(TRACE, 16);
    s2->span_id = bd(TRACE, 8);
    s2->kind = 42; /* unknown kind: kept */
    PSpan *s3 = NEW(PSpan, opentelemetry__proto__trace__v1__span__init);
    s3->parent_span_id = bd(ZERO, 8); /* all zero parent = root */
    PSpan *spans[] = {s1, s2, s3};

    PScopeSpans *ss = NEW(PScopeSpans, opentelemetry__proto__trace__v1__scope_spans__init);
    ss->scope = scope("tracer");
    ss->schema_url = "https://s";
    ss->spans = spans;
    ss->n_spans = 3;
    PResourceSpans *rs = NEW(PResourceSpans, opentelemetry__proto__trace__v1__resource_spans__init);
    rs->resource = resource();
    PScopeSpans *sss[] = {ss};
    rs->scope_spans = sss;
    rs->n_scope_spans = 1;
    PTraceReq req = OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    PResourceSpans *rss[] = {rs};
    req.resource_spans = rss;
    req.n_resource_spans = 1;

    size_t len;
    uint8_t *body = pack_traces(&req, &len);
    struct batch *b = decode_and_diff(SIG_TRACES, body, len);
    cr_assert_eq(b->n_rows, 3);
    cr_assert_eq(b->spans[0].n_events, 2);
    cr_assert_eq(b->spans[0].n_links, 2);
    cr_assert(b->spans[0].has_parent);
    cr_assert(!b->spans[1].has_parent && !b->spans[2].has_parent);
    cr_assert_eq(b->spans[0].status_code, 2);
    cr_assert_eq(b->spans[1].kind, 42);
    cr_assert_eq(b->spans[1].events.len, 0);
    batch_free(b);
    pool_free();
}

static PNumberDP *ndp(int which, double d, int64_t i)
{
    PNumberDP *p = NEW(PNumberDP, opentelemetry__proto__metrics__v1__number_data_point__init);
    p->start_time_unix_nano = 100;
    p->time_unix_nano = 200;
    if (which == 1) {
        p->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_DOUBLE;
        p->as_double = d;
    } else if (which == 2) {
        p->value_case = OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
        p->as_int = i;
    }
    return p;
}

static PExemplar **exemplars(size_t *n)
{
    PExemplar *x1 = NEW(PExemplar, opentelemetry__proto__metrics__v1__exemplar__init);
    x1->time_unix_nano = 7;
    x1->value_case = OPENTELEMETRY__PROTO__METRICS__V1__EXEMPLAR__VALUE_AS_INT;
    x1->as_int = -12;
    x1->trace_id = bd(TRACE, 16);
    x1->span_id = bd(SPAN, 8);
    x1->filtered_attributes =
        kvs(&x1->n_filtered_attributes, 2, kv("user", av_str("u1")), kv("n", av_dbl(2.5)));
    PExemplar *x2 = NEW(PExemplar, opentelemetry__proto__metrics__v1__exemplar__init);
    x2->value_case = OPENTELEMETRY__PROTO__METRICS__V1__EXEMPLAR__VALUE_AS_DOUBLE;
    x2->as_double = 0.25;
    PExemplar *x3 = NEW(PExemplar, opentelemetry__proto__metrics__v1__exemplar__init);
    PExemplar **a = pool(3 * sizeof(PExemplar *));
    a[0] = x1;
    a[1] = x2;
    a[2] = x3;
    *n = 3;
    return a;
}

static PMetric *metric(const char *name, int data_case)
{
    PMetric *m = NEW(PMetric, opentelemetry__proto__metrics__v1__metric__init);
    m->name = (char *)name;
    m->description = "what it measures";
    m->unit = "ms";
    m->data_case = data_case;
    return m;
}

Test(pbdec, metrics_of_every_kind_built_with_protobuf_c_round_trip)
{
    /* gauge: double, int, no value */
    PMetric *g = metric("g", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
    g->metadata = kvs(&g->n_metadata, 1, kv("meta", av_bool(true)));
    g->gauge = NEW(PGauge, opentelemetry__proto__metrics__v1__gauge__init);
    PNumberDP *gp[] = {ndp(1, -3.25, 0), ndp(2, 0, INT64_MIN), ndp(0, 0, 0)};
    gp[0]->attributes = all_kinds(&gp[0]->n_attributes);
    gp[0]->exemplars = exemplars(&gp[0]->n_exemplars);
    gp[2]->flags = 1;
    g->gauge->data_points = gp;
    g->gauge->n_data_points = 3;

    PMetric *s = metric("s", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM);
    s->sum = NEW(PSum, opentelemetry__proto__metrics__v1__sum__init);
    s->sum->aggregation_temporality = 2;
    s->sum->is_monotonic = 1;
    PNumberDP *sp[] = {ndp(2, 0, 12345)};
    s->sum->data_points = sp;
    s->sum->n_data_points = 1;

    /* histogram: sum absent vs sum 0, min/max, buckets */
    PMetric *h = metric("h", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM);
    h->histogram = NEW(PHistogram, opentelemetry__proto__metrics__v1__histogram__init);
    h->histogram->aggregation_temporality = 1;
    PHistDP *h1 = NEW(PHistDP, opentelemetry__proto__metrics__v1__histogram_data_point__init);
    static uint64_t counts[] = {1, 0, 7, 2};
    static double bounds[] = {-5, 0, 10.5};
    h1->count = 10;
    h1->bucket_counts = counts;
    h1->n_bucket_counts = 4;
    h1->explicit_bounds = bounds;
    h1->n_explicit_bounds = 3;
    h1->min_opt_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__MIN_OPT_MIN;
    h1->min = -7;
    h1->max_opt_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__MAX_OPT_MAX;
    h1->max = 12;
    h1->exemplars = exemplars(&h1->n_exemplars);
    PHistDP *h2 = NEW(PHistDP, opentelemetry__proto__metrics__v1__histogram_data_point__init);
    h2->sum_opt_case = OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__SUM_OPT_SUM;
    h2->sum = 0.0;
    h2->attributes = kvs(&h2->n_attributes, 1, kv("le", av_str("x")));
    PHistDP *hp[] = {h1, h2};
    h->histogram->data_points = hp;
    h->histogram->n_data_points = 2;

    /* exponential histogram with negative buckets */
    PMetric *e = metric("e", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM);
    e->exponential_histogram =
        NEW(PExpHistogram, opentelemetry__proto__metrics__v1__exponential_histogram__init);
    e->exponential_histogram->aggregation_temporality = 2;
    PExpDP *e1 =
        NEW(PExpDP, opentelemetry__proto__metrics__v1__exponential_histogram_data_point__init);
    static uint64_t pos[] = {1, 2, 300000000000ull};
    static uint64_t neg[] = {4, 0, 5};
    e1->count = 300000000012ull;
    e1->scale = -3;
    e1->zero_count = 2;
    e1->zero_threshold = 1e-9;
    e1->positive =
        NEW(PBuckets,
            opentelemetry__proto__metrics__v1__exponential_histogram_data_point__buckets__init);
    e1->positive->offset = 5;
    e1->positive->bucket_counts = pos;
    e1->positive->n_bucket_counts = 3;
    e1->negative =
        NEW(PBuckets,
            opentelemetry__proto__metrics__v1__exponential_histogram_data_point__buckets__init);
    e1->negative->offset = -4;
    e1->negative->bucket_counts = neg;
    e1->negative->n_bucket_counts = 3;
    e1->sum_opt_case =
        OPENTELEMETRY__PROTO__METRICS__V1__EXPONENTIAL_HISTOGRAM_DATA_POINT__SUM_OPT_SUM;
    e1->sum = -12.5;
    e1->min_opt_case =
        OPENTELEMETRY__PROTO__METRICS__V1__EXPONENTIAL_HISTOGRAM_DATA_POINT__MIN_OPT_MIN;
    e1->min = -40;
    e1->max_opt_case =
        OPENTELEMETRY__PROTO__METRICS__V1__EXPONENTIAL_HISTOGRAM_DATA_POINT__MAX_OPT_MAX;
    e1->max = 80;
    e1->exemplars = exemplars(&e1->n_exemplars);
    PExpDP *e2 =
        NEW(PExpDP, opentelemetry__proto__metrics__v1__exponential_histogram_data_point__init);
    PExpDP *ep[] = {e1, e2};
    e->exponential_histogram->data_points = ep;
    e->exponential_histogram->n_data_points = 2;

    /* summary */
    PMetric *q = metric("q", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY);
    q->summary = NEW(PSummary, opentelemetry__proto__metrics__v1__summary__init);
    PSummaryDP *q1 = NEW(PSummaryDP, opentelemetry__proto__metrics__v1__summary_data_point__init);
    q1->count = 4;
    q1->sum = 10;
    PQuantile *qv[3];
    double qs[][2] = {{0, 1}, {0.5, 2.5}, {1, 4}};
    for (int i = 0; i < 3; i++) {
        qv[i] = NEW(PQuantile,
                    opentelemetry__proto__metrics__v1__summary_data_point__value_at_quantile__init);
        qv[i]->quantile = qs[i][0];
        qv[i]->value = qs[i][1];
    }
    q1->quantile_values = qv;
    q1->n_quantile_values = 3;
    PSummaryDP *qp[] = {q1};
    q->summary->data_points = qp;
    q->summary->n_data_points = 1;

    PMetric *none = metric("no.data", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA__NOT_SET);
    PMetric *empty_gauge = metric("empty", OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE);
    empty_gauge->gauge = NEW(PGauge, opentelemetry__proto__metrics__v1__gauge__init);

    PMetric *ms[] = {g, s, h, e, q, none, empty_gauge};
    PScopeMetrics *sm = NEW(PScopeMetrics, opentelemetry__proto__metrics__v1__scope_metrics__init);
    sm->scope = scope("meter");
    sm->metrics = ms;
    sm->n_metrics = 7;
    PResourceMetrics *rm =
        NEW(PResourceMetrics, opentelemetry__proto__metrics__v1__resource_metrics__init);
    rm->resource = resource();
    PScopeMetrics *sms[] = {sm};
    rm->scope_metrics = sms;
    rm->n_scope_metrics = 1;
    PMetricsReq req =
        OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT;
    PResourceMetrics *rms[] = {rm};
    req.resource_metrics = rms;
    req.n_resource_metrics = 1;

    size_t len;
    uint8_t *body = pack_metrics(&req, &len);
    struct batch *b = decode_and_diff(SIG_METRICS, body, len);
    cr_assert_eq(b->n_metrics, 7);
    cr_assert_eq(b->n_rows, 3 + 1 + 2 + 2 + 1);
    cr_assert_eq(b->metrics[5].kind, MK_NONE);
    cr_assert_eq(b->metrics[6].kind, MK_GAUGE);
    cr_assert_eq(b->points[2].value_type, PV_NONE);
    cr_assert_eq(b->points[4].metric, 2);
    cr_assert(!b->points[4].has_sum && b->points[4].has_min && b->points[4].has_max);
    cr_assert(b->points[5].has_sum && b->points[5].sum == 0.0, "sum 0 is present");
    cr_assert_eq(b->points[0].n_exemplars, 3);
    batch_free(b);
    pool_free();
}

/* ------------------------------------------------------------------ */
/* hand-made wire bytes                                               */

struct pbw {
    uint8_t *p;
    size_t n, cap;
};

static void w_raw(struct pbw *w, const void *p, size_t n)
{
    if (n == 0) {
        return; /* an empty message's p may be NULL */
    }
    if (w->n + n > w->cap) {
        w->cap = (w->n + n) * 2 + 64;
        w->p = realloc(w->p, w->cap);
        cr_assert_not_null(w->p);
    }
    memcpy(w->p + w->n, p, n);
    w->n += n;
}

static void w_varint(struct pbw *w, uint64_t v)
{
    uint8_t t[10];
    int n = 0;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    w_raw(w, t, (size_t)n);
}

static void w_tag(struct pbw *w, uint32_t num, uint32_t wt)
{
    w_varint(w, (uint64_t)num << 3 | wt);
}

static void w_uv(struct pbw *w, uint32_t num, uint64_t v)
{
    w_tag(w, num, 0);
    w_varint(w, v);
}

static void w_f64(struct pbw *w, uint32_t num, uint64_t v)
{
    w_tag(w, num, 1);
    uint8_t t[8];
    for (int i = 0; i < 8; i++) {
        t[i] = (uint8_t)(v >> (8 * i));
    }
    w_raw(w, t, 8);
}

static void w_dbl(struct pbw *w, uint32_t num, double d)
{
    uint64_t u;
    memcpy(&u, &d, 8);
    w_f64(w, num, u);
}

static void w_f32(struct pbw *w, uint32_t num, uint32_t v)
{
    w_tag(w, num, 5);
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    w_raw(w, t, 4);
}

static void w_bytes(struct pbw *w, uint32_t num, const void *p, size_t n)
{
    w_tag(w, num, 2);
    w_varint(w, n);
    w_raw(w, p, n);
}

static void w_str(struct pbw *w, uint32_t num, const char *s)
{
    w_bytes(w, num, s, strlen(s));
}

/* Appends |sub| as field |num| and empties it. */
static void w_msg(struct pbw *w, uint32_t num, struct pbw *sub)
{
    w_bytes(w, num, sub->p, sub->n);
    sub->n = 0;
}

static void w_free(struct pbw *w)
{
    free(w->p);
    w->p = NULL;
    w->n = w->cap = 0;
}

/* Request{1: Resource*{2: Scope*{2: item}}}, consuming |item|. */
static struct pbw wrap_item(struct pbw *item)
{
    struct pbw sc = {0}, rs = {0}, req = {0};
    w_msg(&sc, 2, item);
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    w_free(&sc);
    w_free(&rs);
    return req;
}

static int decode(enum signal s, const struct pbw *w, struct batch *b, char *err)
{
    batch_reset(b, s);
    return pbdec_decode(s, w->p, w->n, b, err, 256);
}

/* A KeyValue with a string value. */
static void w_kv_str(struct pbw *w, uint32_t num, const char *k, const char *v)
{
    struct pbw kvw = {0}, av = {0};
    w_str(&av, 1, v);
    w_str(&kvw, 1, k);
    w_msg(&kvw, 2, &av);
    w_msg(w, num, &kvw);
    w_free(&kvw);
    w_free(&av);
}

static void w_kv_int(struct pbw *w, uint32_t num, const char *k, int64_t v)
{
    struct pbw kvw = {0}, av = {0};
    w_uv(&av, 3, (uint64_t)v);
    w_msg(&kvw, 2, &av); /* value before key: any order is legal */
    w_str(&kvw, 1, k);
    w_msg(w, num, &kvw);
    w_free(&kvw);
    w_free(&av);
}

/* The i-th attribute of |a| (simple scalar values). */
static struct val attr_at(const struct batch *b, struct attrs a, uint32_t i, const char **key,
                          size_t *kn)
{
    struct val_rd r = {bp(b, a.blob), bp(b, a.blob) + a.blob.len};
    struct val v;
    cr_assert_lt(i, a.count);
    for (uint32_t k = 0; k <= i; k++) {
        cr_assert_eq(val_rd_kv(&r, key, kn, &v), 0);
    }
    return v;
}

Test(pbdec, log_fields_in_any_order_split_runs_unknown_fields_and_merges)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    struct pbw log = {0}, body = {0};

    w_kv_str(&log, 6, "a", "1");
    w_uv(&log, 99, 12345);             /* unknown varint */
    w_str(&log, 100, "unknown bytes"); /* unknown LEN */
    w_f32(&log, 101, 7);               /* unknown I32 */
    w_f64(&log, 102, 8);               /* unknown I64 */
    w_uv(&log, 4, 1);                  /* reserved (old `name`): skipped */
    w_uv(&body, 3, 5);                 /* body #1: int */
    w_msg(&log, 5, &body);
    w_kv_int(&log, 6, "b", -2); /* attributes again, after the body */
    w_f64(&log, 11, 222);
    w_f64(&log, 1, 111);
    w_f64(&log, 1, 112); /* last scalar wins */
    w_uv(&log, 2, 9);
    w_str(&log, 3, "INFO");
    w_str(&body, 1, "text"); /* body #2: string wins */
    w_msg(&log, 5, &body);
    w_f32(&log, 8, 0x1ff);
    w_bytes(&log, 9, TRACE, 16);
    w_bytes(&log, 10, SPAN, 8);
    w_bytes(&log, 10, TRACE, 9); /* last one has a wrong length: no span */
    w_str(&log, 12, "ev");
    w_uv(&log, 7, 3);
    struct pbw req = wrap_item(&log);
    w_uv(&req, 77, 1); /* unknown top-level field */

    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_rows, 1);
    const struct log_row *r = &b->logs[0];
    cr_assert_eq(r->time_ns, 112);
    cr_assert_eq(r->observed_ns, 222);
    cr_assert_eq(r->severity_number, 9);
    cmp_mstr(r->severity_text, "INFO", "severity_text");
    cr_assert_eq(r->body_type, VAL_STR);
    cmp_mstr(r->body_str, "text", "body");
    cr_assert_eq(r->flags, 0x1ff);
    cr_assert(r->has_trace_id && !r->has_span_id);
    cmp_mstr(r->event_name, "ev", "event_name");
    cr_assert_eq(r->dropped_attrs, 3);
    cr_assert_eq(r->attrs.count, 2);
    cr_assert_eq(val_check_attrs(bp(b, r->attrs.blob), r->attrs.blob.len, 2), 0);
    const char *k;
    size_t kn;
    struct val v = attr_at(b, r->attrs, 0, &k, &kn);
    cr_assert(kn == 1 && k[0] == 'a' && v.type == VAL_STR && v.n == 1 && v.s[0] == '1');
    v = attr_at(b, r->attrs, 1, &k, &kn);
    cr_assert(kn == 1 && k[0] == 'b' && v.type == VAL_INT && v.i == -2);
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
    w_free(&req);

    /* A later body occurrence with no member keeps the earlier value, as
     * protobuf's merge rule says. (protobuf-c 1.4.1 loses a string member in
     * that case, so this one is checked without the differential.) */
    w_str(&body, 1, "kept");
    w_msg(&log, 5, &body);
    w_uv(&body, 99, 1);
    w_msg(&log, 5, &body);
    req = wrap_item(&log);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->logs[0].body_type, VAL_STR);
    cmp_mstr(b->logs[0].body_str, "kept", "merged body");
    w_free(&req);

    /* Two empty copies (protobuf-c 1.4.1 refuses this valid input). */
    w_msg(&log, 5, &body);
    w_msg(&log, 5, &body);
    req = wrap_item(&log);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->logs[0].body_type, VAL_EMPTY);

    w_free(&req);
    w_free(&body);
    w_free(&log);
    batch_free(b);
}

Test(pbdec, anyvalue_oneof_last_member_wins_and_strindex_is_empty)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    struct pbw log = {0}, av = {0}, kvw = {0}, arr = {0};

    /* value: string, then array (wins) */
    w_str(&av, 1, "loser");
    w_uv(&arr, 77, 1);
    w_msg(&av, 5, &arr);
    w_str(&kvw, 1, "k1");
    w_msg(&kvw, 2, &av);
    w_msg(&log, 6, &kvw);
    /* value: int then string_value_strindex (wins: empty) */
    w_uv(&av, 3, 9);
    w_uv(&av, 8, 4);
    w_str(&kvw, 1, "k2");
    w_msg(&kvw, 2, &av);
    w_msg(&log, 6, &kvw);
    /* key_strindex without key: empty key; value given twice, second empty */
    w_uv(&kvw, 3, 11);
    w_dbl(&av, 4, 2.5);
    w_msg(&kvw, 2, &av);
    w_msg(&kvw, 2, &av);
    w_msg(&log, 6, &kvw);
    /* no value at all */
    w_str(&kvw, 1, "k4");
    w_msg(&log, 6, &kvw);
    /* body: array then bytes (wins) */
    w_msg(&av, 5, &arr);
    w_bytes(&av, 7, "\x01\x02", 2);
    w_msg(&log, 5, &av);
    struct pbw req = wrap_item(&log);

    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    const struct log_row *r = &b->logs[0];
    cr_assert_eq(r->attrs.count, 4);
    const char *k;
    size_t kn;
    struct val v = attr_at(b, r->attrs, 0, &k, &kn);
    cr_assert(v.type == VAL_ARRAY && v.count == 0);
    v = attr_at(b, r->attrs, 1, &k, &kn);
    cr_assert_eq(v.type, VAL_EMPTY);
    v = attr_at(b, r->attrs, 2, &k, &kn);
    cr_assert(kn == 0 && v.type == VAL_DOUBLE && v.d == 2.5);
    v = attr_at(b, r->attrs, 3, &k, &kn);
    cr_assert(kn == 2 && v.type == VAL_EMPTY);
    cr_assert_eq(r->body_type, VAL_BYTES);
    cr_assert_eq(r->body_val.len, 4); /* type, len, 2 bytes: the array was rolled back */
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);

    w_free(&req);
    w_free(&log);
    w_free(&av);
    w_free(&kvw);
    w_free(&arr);
    batch_free(b);
}

Test(pbdec, repeated_numbers_accept_packed_and_unpacked_mixed)
{
    struct batch *b = batch_new(SIG_METRICS);
    char err[256];
    struct pbw dp = {0}, hist = {0}, m = {0}, pk = {0}, bk = {0}, exp = {0};

    /* histogram point: bucket_counts packed [1,2] then unpacked 3;
     * explicit_bounds unpacked 1.0 then packed [2.0] */
    uint64_t two[2] = {1, 2};
    w_bytes(&dp, 6, two, 16);
    w_f64(&dp, 6, 3);
    w_dbl(&dp, 7, 1.0);
    double b2 = 2.0;
    w_bytes(&dp, 7, &b2, 8);
    w_f64(&dp, 4, 6);
    w_msg(&hist, 1, &dp);
    w_uv(&hist, 2, 1);
    w_str(&m, 1, "h");
    w_msg(&m, 9, &hist);
    struct pbw req = wrap_item(&m);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_rows, 1);
    struct val_rd rd = {bp(b, b->points[0].detail),
                        bp(b, b->points[0].detail) + b->points[0].detail.len};
    uint32_t n;
    uint64_t u;
    double x;
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, 3);
    for (uint64_t i = 1; i <= 3; i++) {
        cr_assert_eq(val_rd_u64(&rd, &u), 0);
        cr_assert_eq(u, i);
    }
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert(val_rd_f64(&rd, &x) == 0 && x == 1.0);
    cr_assert(val_rd_f64(&rd, &x) == 0 && x == 2.0);
    cr_assert(rd.p == rd.end);
    diff_with_protobuf_c(SIG_METRICS, req.p, req.n, b);
    w_free(&req);

    /* exp histogram: positive counts packed varints + unpacked; negative
     * given twice (merged: counts appended, offset from the last one) */
    w_varint(&pk, 300);
    w_varint(&pk, 0);
    w_varint(&pk, 1ull << 40);
    w_uv(&bk, 1, 9); /* zigzag(9) = -5 */
    w_bytes(&bk, 2, pk.p, pk.n);
    w_uv(&bk, 2, 7);
    w_msg(&dp, 8, &bk);
    w_uv(&bk, 2, 1);
    w_uv(&bk, 1, 2); /* zigzag(2) = 1 */
    w_msg(&dp, 9, &bk);
    w_uv(&bk, 2, 2);
    w_uv(&bk, 1, 3); /* zigzag(3) = -2 */
    w_msg(&dp, 9, &bk);
    w_uv(&dp, 6, 5); /* scale: zigzag(5) = -3 */
    w_msg(&exp, 1, &dp);
    w_str(&m, 1, "e");
    w_msg(&m, 10, &exp);
    req = wrap_item(&m);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    rd.p = bp(b, b->points[0].detail);
    rd.end = rd.p + b->points[0].detail.len;
    uint32_t scale, off;
    cr_assert_eq(val_rd_u32(&rd, &scale), 0);
    cr_assert_eq((int32_t)scale, -3);
    cr_assert_eq(val_rd_u64(&rd, &u), 0);
    cr_assert_eq(val_rd_f64(&rd, &x), 0);
    cr_assert_eq(val_rd_u32(&rd, &off), 0);
    cr_assert_eq((int32_t)off, -5);
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, 4);
    uint64_t want[] = {300, 0, 1ull << 40, 7};
    for (int i = 0; i < 4; i++) {
        cr_assert(val_rd_u64(&rd, &u) == 0 && u == want[i]);
    }
    cr_assert_eq(val_rd_u32(&rd, &off), 0);
    cr_assert_eq((int32_t)off, -2);
    cr_assert_eq(val_rd_u32(&rd, &n), 0);
    cr_assert_eq(n, 2);
    cr_assert(val_rd_u64(&rd, &u) == 0 && u == 1);
    cr_assert(val_rd_u64(&rd, &u) == 0 && u == 2);
    cr_assert(rd.p == rd.end);
    cr_assert_eq(b->metrics[0].kind, MK_EXP_HISTOGRAM);

    w_free(&req);
    w_free(&dp);
    w_free(&hist);
    w_free(&m);
    w_free(&pk);
    w_free(&bk);
    w_free(&exp);
    batch_free(b);
}

Test(pbdec, metric_data_oneof_last_member_wins_and_value_less_points_are_kept)
{
    struct batch *b = batch_new(SIG_METRICS);
    char err[256];
    struct pbw dp = {0}, data = {0}, m = {0};

    /* gauge with 2 points, then a sum with 1 point: only the sum stays */
    w_dbl(&dp, 4, 1.0);
    w_msg(&data, 1, &dp);
    w_msg(&data, 1, &dp);
    w_msg(&m, 5, &data);
    w_f64(&dp, 3, 77); /* no as_double / as_int */
    w_msg(&data, 1, &dp);
    w_uv(&data, 2, 1);
    w_uv(&data, 3, 1);
    w_msg(&m, 7, &data);
    w_str(&m, 1, "m");
    struct pbw req = wrap_item(&m);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_metrics, 1);
    cr_assert_eq(b->metrics[0].kind, MK_SUM);
    cr_assert_eq(b->metrics[0].temporality, 1);
    cr_assert(b->metrics[0].monotonic);
    cr_assert_eq(b->n_rows, 1);
    cr_assert_eq(b->points[0].value_type, PV_NONE);
    cr_assert_eq(b->points[0].time_ns, 77);
    diff_with_protobuf_c(SIG_METRICS, req.p, req.n, b);
    w_free(&req);

    /* as_double then as_int in one point: int wins */
    w_dbl(&dp, 4, 1.5);
    w_f64(&dp, 6, (uint64_t)-9);
    w_msg(&data, 1, &dp);
    w_msg(&m, 5, &data);
    req = wrap_item(&m);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    cr_assert(b->points[0].value_type == PV_INT && b->points[0].value.i == -9);
    w_free(&req);

    /* metric with no data: kept, no points */
    w_str(&m, 1, "nothing");
    req = wrap_item(&m);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    cr_assert(b->n_metrics == 1 && b->n_rows == 0 && b->metrics[0].kind == MK_NONE);
    cmp_mstr(b->metrics[0].name, "nothing", "name");

    w_free(&req);
    w_free(&dp);
    w_free(&data);
    w_free(&m);
    batch_free(b);
}

Test(pbdec, empty_and_envelope_only_requests_succeed)
{
    struct batch *b = batch_new(SIG_TRACES);
    char err[256];
    cr_assert_eq(pbdec_decode(SIG_TRACES, NULL, 0, b, err, sizeof(err)), 0);
    cr_assert_eq(b->n_rows + b->n_resources, 0);
    struct pbw req = {0}, rs = {0}, res = {0};
    w_uv(&req, 5, 1); /* only an unknown field */
    cr_assert_eq(decode(SIG_TRACES, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_resources, 0);
    /* ResourceSpans with a resource given twice (merged) and no scopes */
    w_kv_str(&res, 1, "a", "x");
    w_uv(&res, 2, 4);
    w_msg(&rs, 1, &res);
    w_kv_str(&res, 1, "b", "y");
    w_msg(&rs, 1, &res);
    w_str(&rs, 3, "url");
    w_msg(&req, 1, &rs);
    cr_assert_eq(decode(SIG_TRACES, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_resources, 1);
    cr_assert_eq(b->n_scopes, 0);
    cr_assert_eq(b->resources[0].attrs.count, 2);
    cr_assert_eq(b->resources[0].dropped_attrs, 4);
    cmp_mstr(b->resources[0].schema_url, "url", "schema_url");
    /* No differential here: protobuf-c 1.4.1 merges a repeated singular
     * message by letting every scalar of the later copy win even when it was
     * absent on the wire (dropped_attributes_count would be 0). */
    w_free(&req);
    w_free(&rs);
    w_free(&res);
    batch_free(b);
}

/* ------------------------------------------------------------------ */
/* malformed input                                                    */

static void expect_eproto(enum signal s, const void *p, size_t n, const char *needle)
{
    struct batch *b = batch_new(s);
    char err[256];
    uint8_t *copy = malloc(n ? n : 1); /* exact size: ASan sees any over-read */
    memcpy(copy, p, n);
    int rc = pbdec_decode(s, copy, n, b, err, sizeof(err));
    cr_assert_eq(rc, -EPROTO, "want -EPROTO for '%s', got %d", needle, rc);
    cr_assert(strstr(err, needle) != NULL, "message '%s' lacks '%s'", err, needle);
    cr_assert(strncmp(err, signal_name(s), strlen(signal_name(s))) == 0, "message '%s'", err);
    cr_assert(strchr(err, '\n') == NULL);
    cr_assert_eq(b->n_rows, 0);
    free(copy);
    batch_free(b);
}

static void expect_eproto_w(enum signal s, const struct pbw *w, const char *needle)
{
    expect_eproto(s, w->p, w->n, needle);
}

Test(pbdec, malformed_wire_bytes_are_eproto_with_a_reason)
{
    expect_eproto(SIG_LOGS, "\x80", 1, "truncated varint (tag) at offset 0");
    expect_eproto(SIG_LOGS, "\x0a\x05\x01", 3, "bad length 5");
    expect_eproto(SIG_LOGS, "\x0a\x80", 2, "truncated varint (length)");
    expect_eproto(SIG_LOGS, "\x0d\x00\x00\x00\x00", 5, "wrong wire type 5 for field resource_logs");
    expect_eproto(SIG_TRACES, "\x08\x01", 2, "wrong wire type 0 for field resource_spans");
    expect_eproto(SIG_LOGS, "\x0b", 1, "group wire type 3");
    expect_eproto(SIG_LOGS, "\x0c", 1, "group wire type 4");
    expect_eproto(SIG_LOGS, "\x0e\x00", 2, "unknown wire type 6");
    expect_eproto(SIG_LOGS, "\x0f\x00", 2, "unknown wire type 7");
    expect_eproto(SIG_LOGS, "\x02\x00", 2, "field number 0");
    expect_eproto(SIG_LOGS, "\x19\x01\x02", 3, "truncated fixed64");
    expect_eproto(SIG_LOGS, "\x1d\x01\x02", 3, "truncated fixed32");
    expect_eproto(SIG_LOGS, "\x18\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 12,
                  "varint too long");

    struct pbw log = {0};
    w_tag(&log, 2, 0);
    w_raw(&log, "\xff\xff", 2); /* severity_number: truncated varint */
    struct pbw req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "truncated varint at offset 7");
    w_free(&req);

    w_uv(&log, 1, 5); /* time_unix_nano is fixed64 */
    req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "wrong wire type 0 for field time_unix_nano");
    w_free(&req);

    w_f64(&log, 5, 1); /* body is a message */
    req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "wrong wire type 1 for field body");
    w_free(&req);

    w_str(&log, 9, "x");
    w_uv(&log, 11, 3); /* observed time */
    req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "observed_time_unix_nano");
    w_free(&req);

    /* a sub-message whose bytes are broken deep inside */
    struct pbw kvw = {0}, av = {0};
    w_raw(&av, "\x2a\x03\x0a\x05\x00", 5); /* array_value -> values with a bad length */
    w_msg(&kvw, 2, &av);
    w_msg(&log, 6, &kvw);
    req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "bad length 5");
    w_free(&req);

    /* packed fixed64 whose length is not a multiple of 8 */
    struct pbw dp = {0}, h = {0}, m = {0};
    w_bytes(&dp, 6, "1234567", 7);
    w_msg(&h, 1, &dp);
    w_msg(&m, 9, &h);
    req = wrap_item(&m);
    expect_eproto_w(SIG_METRICS, &req, "packed bucket_counts length 7 is not a multiple of 8");
    w_free(&req);
    /* sint32 scale as fixed32 */
    w_f32(&dp, 6, 1);
    w_msg(&h, 1, &dp);
    w_msg(&m, 10, &h);
    req = wrap_item(&m);
    expect_eproto_w(SIG_METRICS, &req, "wrong wire type 5 for field scale");
    w_free(&req);

    /* span status given as a varint; link flags as a varint */
    struct pbw sp = {0}, lk = {0};
    w_uv(&sp, 15, 1);
    req = wrap_item(&sp);
    expect_eproto_w(SIG_TRACES, &req, "wrong wire type 0 for field status");
    w_free(&req);
    w_uv(&lk, 6, 1);
    w_msg(&sp, 13, &lk);
    req = wrap_item(&sp);
    expect_eproto_w(SIG_TRACES, &req, "link.flags");
    w_free(&req);

    w_free(&log);
    w_free(&kvw);
    w_free(&av);
    w_free(&dp);
    w_free(&h);
    w_free(&m);
    w_free(&sp);
    w_free(&lk);
}

Test(pbdec, strings_must_be_valid_utf8_bytes_need_not)
{
    static const char *const bad[] = {
        "\xff",             /* never valid */
        "ab\x80",           /* lone continuation */
        "\xc0\xaf",         /* overlong '/' */
        "\xe0\x80\xaf",     /* overlong, 3 bytes */
        "\xed\xa0\x80",     /* UTF-16 surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xe2\x82",         /* truncated sequence */
        "abcdefgh\xc3",     /* truncated after the ASCII fast path */
        "\xf8\x88\x80\x80\x80",
    };
    struct pbw log = {0}, kvw = {0}, av = {0};
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        w_str(&log, 3, bad[i]);
        struct pbw req = wrap_item(&log);
        expect_eproto_w(SIG_LOGS, &req, "invalid UTF-8 in string field severity_text");
        w_free(&req);
    }
    /* in a key, in a nested string value, in a scope name */
    w_str(&kvw, 1, "\xc3\x28");
    w_msg(&log, 6, &kvw);
    struct pbw req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "invalid UTF-8 in string field key");
    w_free(&req);
    w_str(&av, 1, "ok\xe2\x28\xa1");
    w_str(&kvw, 1, "k");
    w_msg(&kvw, 2, &av);
    w_msg(&log, 6, &kvw);
    req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "invalid UTF-8 in string field string_value");
    w_free(&req);

    /* valid: every length of sequence, and invalid bytes inside bytes_value */
    w_str(&log, 3, "plain ascii longer than eight bytes, é, €, 𝄞, \xef\xbf\xbf, \xf4\x8f\xbf\xbf");
    w_bytes(&av, 7, "\xff\xfe\x00", 3);
    w_str(&kvw, 1, "bin");
    w_msg(&kvw, 2, &av);
    w_msg(&log, 6, &kvw);
    req = wrap_item(&log);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
    w_free(&req);
    w_free(&log);
    w_free(&kvw);
    w_free(&av);
    batch_free(b);
}

/*
 * Backward writer: builds deeply nested messages in O(n) by writing the
 * innermost bytes first at the end of the buffer and prepending each
 * enclosing tag and length.
 */
struct bw {
    uint8_t *buf;
    size_t cap, pos;
};

static void bw_prepend(struct bw *w, const void *p, size_t n)
{
    cr_assert_geq(w->pos, n);
    w->pos -= n;
    memcpy(w->buf + w->pos, p, n);
}

/* Wraps everything from |mark| (a length measured from the end) as field |num|. */
static void bw_wrap(struct bw *w, uint32_t num, size_t inner_len)
{
    uint8_t t[16];
    int n = 0;
    uint64_t v = inner_len;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    bw_prepend(w, t, (size_t)n);
    n = 0;
    v = (uint64_t)num << 3 | 2;
    while (v >= 0x80) {
        t[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    t[n++] = (uint8_t)v;
    bw_prepend(w, t, (size_t)n);
}

static size_t bw_len(const struct bw *w)
{
    return w->cap - w->pos;
}

/* A logs request whose one attribute value is nested |levels| AnyValues deep. */
static struct bw nested_request(size_t levels)
{
    struct bw w = {.cap = levels * 16 + 256};
    w.buf = malloc(w.cap);
    w.pos = w.cap;
    /* innermost AnyValue: empty (zero bytes) */
    for (size_t i = 1; i < levels; i++) {
        bw_wrap(&w, 1, bw_len(&w)); /* ArrayValue.values */
        bw_wrap(&w, 5, bw_len(&w)); /* AnyValue.array_value */
    }
    bw_wrap(&w, 2, bw_len(&w)); /* KeyValue.value */
    bw_prepend(&w, "\x0a\x01k", 3);
    bw_wrap(&w, 6, bw_len(&w)); /* LogRecord.attributes */
    bw_wrap(&w, 2, bw_len(&w)); /* ScopeLogs.log_records */
    bw_wrap(&w, 2, bw_len(&w)); /* ResourceLogs.scope_logs */
    bw_wrap(&w, 1, bw_len(&w)); /* request.resource_logs */
    return w;
}

Test(pbdec, anyvalue_nesting_is_bounded_without_recursion_blowup)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];

    struct bw ok = nested_request(VAL_MAX_DEPTH);
    cr_assert_eq(pbdec_decode(SIG_LOGS, ok.buf + ok.pos, bw_len(&ok), b, err, sizeof(err)), 0, "%s",
                 err);
    cr_assert_eq(b->logs[0].attrs.count, 1);
    cr_assert_eq(val_check_attrs(bp(b, b->logs[0].attrs.blob), b->logs[0].attrs.blob.len, 1), 0,
                 "64 levels must be a storable value");
    diff_with_protobuf_c(SIG_LOGS, ok.buf + ok.pos, bw_len(&ok), b);
    free(ok.buf);

    struct bw deep = nested_request(VAL_MAX_DEPTH + 1);
    expect_eproto(SIG_LOGS, deep.buf + deep.pos, bw_len(&deep), "nested deeper than 64 levels");
    free(deep.buf);

    /* Hostile: 100 000 levels (protobuf-c itself would overflow the stack). */
    struct bw hostile = nested_request(100000);
    expect_eproto(SIG_LOGS, hostile.buf + hostile.pos, bw_len(&hostile),
                  "nested deeper than 64 levels");
    free(hostile.buf);

    /* A kvlist at the limit whose member has no value is still too deep. */
    struct bw w = {.cap = 4096};
    w.buf = malloc(w.cap);
    w.pos = w.cap;
    bw_prepend(&w, "\x0a\x01x", 3); /* KeyValue{key "x"} with no value */
    bw_wrap(&w, 1, bw_len(&w));     /* KeyValueList.values */
    bw_wrap(&w, 6, bw_len(&w));     /* AnyValue.kvlist_value (level 64) */
    for (int i = 1; i < VAL_MAX_DEPTH; i++) {
        bw_wrap(&w, 1, bw_len(&w));
        bw_wrap(&w, 5, bw_len(&w));
    }
    bw_wrap(&w, 2, bw_len(&w));
    bw_prepend(&w, "\x0a\x01k", 3);
    bw_wrap(&w, 6, bw_len(&w));
    bw_wrap(&w, 2, bw_len(&w));
    bw_wrap(&w, 2, bw_len(&w));
    bw_wrap(&w, 1, bw_len(&w));
    expect_eproto(SIG_LOGS, w.buf + w.pos, bw_len(&w), "nested deeper than 64 levels");
    free(w.buf);
    batch_free(b);
}

Test(pbdec, a_failed_decode_leaves_an_appended_batch_untouched)
{
    size_t len;
    uint8_t *body = load_vector("grpc-traces.pb", &len);
    struct batch *b = batch_new(SIG_TRACES);
    char err[256];
    cr_assert_eq(pbdec_decode(SIG_TRACES, body, len, b, err, sizeof(err)), 0, "%s", err);
    uint32_t rows = b->n_rows, res = b->n_resources, scopes = b->n_scopes;
    size_t heap = b->heap.len;
    /* The same request with its last byte cut off fails half-way through. */
    cr_assert_eq(pbdec_decode(SIG_TRACES, body, len - 1, b, err, sizeof(err)), -EPROTO);
    cr_assert(b->n_rows == rows && b->n_resources == res && b->n_scopes == scopes &&
              b->heap.len == heap);
    /* And a second good decode appends. */
    cr_assert_eq(pbdec_decode(SIG_TRACES, body, len, b, err, sizeof(err)), 0, "%s", err);
    cr_assert_eq(b->n_rows, 2 * rows);
    cr_assert_eq(b->scopes[scopes].resource, res);
    cr_assert_eq(b->spans[rows].scope, scopes);
    batch_free(b);
    free(body);
}

Test(pbdec, bodies_that_balloon_when_decoded_are_refused)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    struct pbw sc = {0}, rs = {0}, req = {0};

    /* 5 000 empty log records (2 bytes each) fit in the fixed slack. */
    for (int i = 0; i < 5000; i++) {
        w_raw(&sc, "\x12\x00", 2);
    }
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_rows, 5000);
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
    w_free(&req);

    /* 100 000 of them: ~200 KB that would become ~14 MB of rows. */
    for (int i = 0; i < 100000; i++) {
        w_raw(&sc, "\x12\x00", 2);
    }
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    expect_eproto_w(SIG_LOGS, &req, "request expands to more than 32 times its size");
    w_free(&req);

    /* The same with empty spans. */
    for (int i = 0; i < 100000; i++) {
        w_raw(&sc, "\x12\x00", 2);
    }
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    expect_eproto_w(SIG_TRACES, &req, "request expands to more than 32 times its size");

    w_free(&req);
    w_free(&rs);
    w_free(&sc);
    batch_free(b);
}

/* ------------------------------------------------------------------ */
/* the fast paths (issue 13): each case below takes an inlined path    */
/* and must come out exactly as the general one or protobuf-c says     */

/* A KeyValue written key first, as encoders do (the inlined dec_kv path). */
static void w_kv_first(struct pbw *w, const char *k, struct pbw *av)
{
    struct pbw kvw = {0};
    w_str(&kvw, 1, k);
    w_msg(&kvw, 2, av);
    w_msg(w, 6, &kvw);
    w_free(&kvw);
}

Test(pbdec, scalar_attributes_encode_exactly_as_the_val_writers)
{
    static const size_t lens[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 125};
    static const int64_t ints[] = {0,  1,         63,        64,        -1,
                                   -2, INT64_MIN, INT64_MAX, 1ll << 62, -(1ll << 40)};
    static const double dbls[] = {0.0, -0.0, 1.5, -1e300, 5e-324};
    struct batch *b = batch_new(SIG_LOGS);
    struct vbuf want;
    struct pbw log = {0}, av = {0};
    char err[256], key[8], str[128];
    uint32_t n = 0;

    vbuf_init(&want);
    memset(str, 'x', sizeof(str));
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        snprintf(key, sizeof(key), "s%zu", i);
        str[lens[i]] = '\0';
        for (size_t j = 0; j < lens[i]; j++) {
            str[j] = (char)('a' + (i + j) % 26);
        }
        w_str(&av, 1, str);
        w_kv_first(&log, key, &av);
        cr_assert_eq(val_put_key(&want, key, strlen(key)), 0);
        cr_assert_eq(val_put_str(&want, str, lens[i]), 0);
        n++;
    }
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        snprintf(key, sizeof(key), "i%zu", i);
        w_uv(&av, 3, (uint64_t)ints[i]); /* negatives: 10-byte varints */
        w_kv_first(&log, key, &av);
        cr_assert_eq(val_put_key(&want, key, strlen(key)), 0);
        cr_assert_eq(val_put_int(&want, ints[i]), 0);
        n++;
    }
    for (size_t i = 0; i < sizeof(dbls) / sizeof(dbls[0]); i++) {
        snprintf(key, sizeof(key), "d%zu", i);
        w_dbl(&av, 4, dbls[i]);
        w_kv_first(&log, key, &av);
        cr_assert_eq(val_put_key(&want, key, strlen(key)), 0);
        cr_assert_eq(val_put_double(&want, dbls[i]), 0);
        n++;
    }
    for (uint64_t v = 0; v < 3; v++) { /* 2 is true too */
        snprintf(key, sizeof(key), "b%u", (unsigned)v);
        w_uv(&av, 2, v);
        w_kv_first(&log, key, &av);
        cr_assert_eq(val_put_key(&want, key, strlen(key)), 0);
        cr_assert_eq(val_put_bool(&want, v != 0), 0);
        n++;
    }
    /* Not scalar-shaped (taken the general way): an int_value with a
     * trailing unknown field, an empty value, a key alone. */
    w_uv(&av, 3, 7);
    w_uv(&av, 99, 1);
    w_kv_first(&log, "g1", &av);
    cr_assert_eq(val_put_key(&want, "g1", 2), 0);
    cr_assert_eq(val_put_int(&want, 7), 0);
    w_kv_first(&log, "g2", &av);
    cr_assert_eq(val_put_key(&want, "g2", 2), 0);
    cr_assert_eq(val_put_empty(&want), 0);
    struct pbw kvw = {0};
    w_str(&kvw, 1, "g3");
    w_msg(&log, 6, &kvw);
    cr_assert_eq(val_put_key(&want, "g3", 2), 0);
    cr_assert_eq(val_put_empty(&want), 0);
    n += 3;

    struct pbw req = wrap_item(&log);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    const struct log_row *r = &b->logs[0];
    cr_assert_eq(r->attrs.count, n);
    cr_assert_eq(r->attrs.blob.len, want.len);
    cr_assert_eq(memcmp(bp(b, r->attrs.blob), want.p, want.len), 0);
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
    w_free(&req);
    w_free(&log);
    w_free(&av);
    w_free(&kvw);
    vbuf_fini(&want);
    batch_free(b);
}

/* Log record: severity_number as |raw| varint bytes, then |tail| more bytes. */
static struct pbw log_with_varint(const char *raw, size_t n, const char *tail, size_t tn)
{
    struct pbw log = {0};
    w_tag(&log, 2, 0);
    w_raw(&log, raw, n);
    w_raw(&log, tail, tn);
    struct pbw req = wrap_item(&log);
    w_free(&log);
    return req;
}

Test(pbdec, varints_at_the_end_of_the_buffer_and_of_every_length)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    static const char ten[] = "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"; /* 2^64 - 1 */
    static const char pad[] = "\x62\x04\x65\x76\x30\x31\x62\x04\x65\x76\x30\x32";

    /* The varint's last byte is the request's last byte (the bounded
     * loop), and the same with room behind it (the unchecked loop). */
    for (int room = 0; room < 2; room++) {
        const char *tail = room ? pad : "";
        size_t tn = room ? sizeof(pad) - 1 : 0;
        struct pbw req = log_with_varint("\x05", 1, tail, tn);
        cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
        cr_assert_eq(b->logs[0].severity_number, 5);
        w_free(&req);
        req = log_with_varint("\x96\x01", 2, tail, tn);
        cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
        cr_assert_eq(b->logs[0].severity_number, 150);
        w_free(&req);
        req = log_with_varint(ten, 10, tail, tn);
        cr_assert_eq(req.p[req.n - 1 - tn], 0x01);
        cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
        cr_assert_eq(b->logs[0].severity_number, -1);
        diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
        w_free(&req);
        /* An 11-byte varint is too long wherever it is; offset 7 is
         * where it starts (after 3 envelope tags and lengths, and its tag). */
        req = log_with_varint("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, tail, tn);
        expect_eproto_w(SIG_LOGS, &req, "varint too long at offset 7");
        w_free(&req);
        /* Ten continuation bytes: too long, whether or not more follows. */
        req = log_with_varint("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 10, tail, tn);
        expect_eproto_w(SIG_LOGS, &req, "varint too long at offset 7");
        w_free(&req);
    }
    /* Two-byte tags (field 16 and up): read inline, cut short, or a field
     * whose length is missing. */
    expect_eproto(SIG_LOGS, "\x82", 1, "truncated varint (tag) at offset 0");
    expect_eproto(SIG_LOGS, "\x82\x01", 2, "truncated varint (length) at offset 2");
    struct pbw sp = {0};
    w_uv(&sp, 16, 1); /* Span.flags, tag 0x80 0x01, is fixed32 */
    struct pbw sreq = wrap_item(&sp);
    expect_eproto_w(SIG_TRACES, &sreq, "wrong wire type 0 for field flags at offset 6");
    w_free(&sreq);
    w_f32(&sp, 16, 0x301);
    sreq = wrap_item(&sp);
    struct batch *tb = batch_new(SIG_TRACES);
    cr_assert_eq(decode(SIG_TRACES, &sreq, tb, err), 0, "%s", err);
    cr_assert_eq(tb->spans[0].flags, 0x301);
    diff_with_protobuf_c(SIG_TRACES, sreq.p, sreq.n, tb);
    batch_free(tb);
    w_free(&sreq);
    w_free(&sp);
    /* Nine continuation bytes and the end of the buffer. */
    struct pbw req = log_with_varint("\xff\xff\xff\xff\xff\xff\xff\xff\xff", 9, "", 0);
    expect_eproto_w(SIG_LOGS, &req, "truncated varint at offset 7");
    w_free(&req);
    batch_free(b);
}

Test(pbdec, two_byte_lengths_are_read_inline_and_checked_against_the_end)
{
    static const size_t lens[] = {127, 128, 200, 16383, 16384, 20000};
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    char *s = malloc(20001);
    cr_assert_not_null(s);

    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        struct pbw log = {0}, body = {0};
        memset(s, 'b', lens[i]);
        s[lens[i]] = '\0';
        w_str(&body, 1, s);
        w_msg(&log, 5, &body);
        w_str(&log, 3, s);
        struct pbw req = wrap_item(&log);
        cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
        cr_assert_eq(b->logs[0].body_str.len, lens[i]);
        cr_assert_eq(b->logs[0].severity_text.len, lens[i]);
        diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
        w_free(&req);
        w_free(&log);
        w_free(&body);
    }
    /* A two-byte length one past the end: 128 announced, 127 there. */
    struct pbw log = {0};
    w_tag(&log, 3, 2);
    w_raw(&log, "\x80\x01", 2);
    memset(s, 'c', 127);
    w_raw(&log, s, 127);
    struct pbw req = wrap_item(&log);
    expect_eproto_w(SIG_LOGS, &req, "bad length 128 in field 3: past the end of the message");
    w_free(&req);
    /* An overlong (non-minimal) two-byte length is still a length: 0x83 0x00 = 3. */
    w_tag(&log, 3, 2);
    w_raw(&log,
          "\x83\x00"
          "ERR",
          5);
    req = wrap_item(&log);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cmp_mstr(b->logs[0].severity_text, "ERR", "severity_text");
    w_free(&req);
    w_free(&log);
    free(s);
    batch_free(b);
}

Test(pbdec, invalid_utf8_right_after_ascii_runs_of_15_16_17_bytes)
{
    static const char *const odd[] = {"\x80", "\xc3\x28", "\xed\xa0\x80", "\xf4\x90\x80\x80"};
    char s[64];
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];

    for (size_t run = 15; run <= 17; run++) {
        for (size_t k = 0; k < sizeof(odd) / sizeof(odd[0]); k++) {
            memset(s, 'a', run);
            strcpy(s + run, odd[k]);
            struct pbw log = {0}, av = {0};
            w_str(&log, 3, s); /* severity_text: get_str */
            struct pbw req = wrap_item(&log);
            expect_eproto_w(SIG_LOGS, &req, "invalid UTF-8 in string field severity_text");
            w_free(&req);
            w_str(&av, 1, s); /* a string body, dec_log's own path */
            w_msg(&log, 5, &av);
            req = wrap_item(&log);
            expect_eproto_w(SIG_LOGS, &req,
                            "invalid UTF-8 in string field string_value at offset 8");
            w_free(&req);
            w_str(&av, 1, "v");
            w_kv_first(&log, s, &av); /* a key, inlined dec_kv */
            req = wrap_item(&log);
            expect_eproto_w(SIG_LOGS, &req, "invalid UTF-8 in string field key at offset 8");
            w_free(&req);
            w_str(&av, 1, s);
            w_kv_first(&log, "k", &av); /* a string value, dec_scalar */
            req = wrap_item(&log);
            expect_eproto_w(SIG_LOGS, &req,
                            "invalid UTF-8 in string field string_value at offset 13");
            w_free(&req);
            /* The same bytes made valid: a run, then é. */
            memset(s, 'a', run);
            strcpy(s + run, "\xc3\xa9");
            w_str(&av, 1, s);
            w_kv_first(&log, s, &av);
            req = wrap_item(&log);
            cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
            diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
            w_free(&req);
            w_free(&log);
            w_free(&av);
        }
    }
    batch_free(b);
}

Test(pbdec, scope_fields_after_the_items_and_errors_keep_the_two_pass_result)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    struct pbw sc = {0}, scope = {0}, log = {0}, rs = {0}, req = {0};

    /* ScopeLogs{log, scope{name, attrs}, log, schema_url}: the scope comes
     * after the first record, so its attributes must still be one blob. */
    w_uv(&log, 2, 9);
    w_kv_str(&log, 6, "rec", "1");
    w_msg(&sc, 2, &log);
    w_str(&scope, 1, "lib");
    w_kv_str(&scope, 3, "scope.attr", "x");
    w_msg(&sc, 1, &scope);
    w_uv(&log, 2, 10);
    w_kv_str(&log, 6, "rec", "2");
    w_msg(&sc, 2, &log);
    w_str(&sc, 3, "https://schema");
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_rows, 2);
    cr_assert_eq(b->n_scopes, 1);
    cmp_mstr(b->scopes[0].name, "lib", "scope name");
    cmp_mstr(b->scopes[0].schema_url, "https://schema", "schema_url");
    cr_assert_eq(b->scopes[0].attrs.count, 1);
    const char *k;
    size_t kn;
    struct val v = attr_at(b, b->scopes[0].attrs, 0, &k, &kn);
    cr_assert(kn == 10 && memcmp(k, "scope.attr", 10) == 0 && v.type == VAL_STR && v.n == 1);
    cr_assert_eq(b->logs[0].severity_number, 9);
    cr_assert_eq(b->logs[1].severity_number, 10);
    v = attr_at(b, b->logs[1].attrs, 0, &k, &kn);
    cr_assert(v.type == VAL_STR && v.n == 1 && v.s[0] == '2');
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
    w_free(&req);

    /* A broken record followed by a broken schema_url: the scope's own
     * fields are checked first, as always. */
    w_uv(&log, 1, 5); /* time_unix_nano as a varint */
    w_msg(&sc, 2, &log);
    w_uv(&sc, 3, 1); /* schema_url as a varint */
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    expect_eproto_w(SIG_LOGS, &req, "wrong wire type 0 for field schema_url");
    w_free(&req);

    /* A failed request appended after a good one leaves the first intact. */
    w_uv(&log, 2, 3);
    w_msg(&sc, 2, &log);
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    batch_reset(b, SIG_LOGS);
    cr_assert_eq(pbdec_decode(SIG_LOGS, req.p, req.n, b, err, sizeof(err)), 0, "%s", err);
    w_free(&req);
    w_uv(&log, 2, 4);
    w_msg(&sc, 2, &log);
    w_uv(&log, 1, 5);
    w_msg(&sc, 2, &log);
    w_msg(&rs, 2, &sc);
    w_msg(&req, 1, &rs);
    cr_assert_eq(pbdec_decode(SIG_LOGS, req.p, req.n, b, err, sizeof(err)), -EPROTO);
    cr_assert(strstr(err, "wrong wire type 0 for field time_unix_nano") != NULL, "%s", err);
    cr_assert(b->n_rows == 1 && b->n_scopes == 1 && b->n_resources == 1);
    cr_assert_eq(b->logs[0].severity_number, 3);

    w_free(&req);
    w_free(&rs);
    w_free(&sc);
    w_free(&scope);
    w_free(&log);
    batch_free(b);
}

/* The offset pbdec reports for |needle|'s message: |back| bytes before
 * where |needle| (unique in the request) starts. */
static size_t offset_of(const struct pbw *w, const char *needle, size_t n, size_t back)
{
    const uint8_t *at = memmem(w->p, w->n, needle, n);
    cr_assert_not_null(at, "needle not in the request");
    return (size_t)(at - w->p) - back;
}

Test(pbdec, attribute_runs_check_utf8_at_every_byte_of_short_keys_and_values)
{
    /* The second attribute of a record is read by the attribute run and its
     * key and value checked from the words that copy it: a byte >= 0x80 at
     * any position of a string of any length class must be found. */
    static const size_t lens[] = {1,  2,  3,  4,  5,  7,  8,  9,  15, 16, 17, 24,  31, 32,
                                  33, 34, 47, 48, 49, 63, 64, 65, 80, 96, 97, 126, 127};
    struct batch *b = batch_new(SIG_LOGS);
    char err[256], s[128], needle[96];

    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        size_t len = lens[li];
        for (size_t pos = 0; pos < len; pos++) {
            for (int in_key = 0; in_key <= 1; in_key++) {
                for (size_t k = 0; k < len; k++) {
                    s[k] = (char)('A' + (len + k) % 26);
                }
                s[len] = '\0';
                s[pos] = (char)0x80; /* a lone continuation byte */
                struct pbw log = {0};
                w_kv_str(&log, 6, "first", "attr");
                w_kv_str(&log, 6, in_key ? s : "key", in_key ? "val" : s);
                struct pbw req = wrap_item(&log);
                /* key: the KeyValue's offset; value: the AnyValue's */
                snprintf(needle, sizeof(needle), "invalid UTF-8 in string field %s at offset %zu",
                         in_key ? "key" : "string_value", offset_of(&req, s, len, 2));
                expect_eproto_w(SIG_LOGS, &req, needle);
                w_free(&req);

                /* valid: é over the same place (or ending there) */
                size_t at = pos + 1 < len ? pos : pos - (pos > 0);
                if (len >= 2) {
                    s[at] = (char)0xc3;
                    s[at + 1] = (char)0xa9;
                    w_kv_str(&log, 6, "first", "attr");
                    w_kv_str(&log, 6, in_key ? s : "key", in_key ? "val" : s);
                    req = wrap_item(&log);
                    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
                    cr_assert_eq(b->logs[0].attrs.count, 2);
                    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
                    w_free(&req);
                }
                w_free(&log);
            }
        }
    }
    batch_free(b);
}

/* Attributes of field |num| as a run broken the ways the run must stop at:
 * a two-byte length, a value-first KeyValue, another field between. Each
 * comes out as protobuf-c reads it. Returns the count written (7). */
static uint32_t w_broken_run(struct pbw *w, uint32_t num, uint32_t other)
{
    char big[201];
    memset(big, 'b', 200);
    big[200] = '\0';
    w_kv_str(w, num, "r1", "one");
    w_kv_str(w, num, "r2", "two");
    w_kv_str(w, num, "r3", big); /* 2-byte length: next_field's */
    w_kv_str(w, num, "r4", "four");
    w_kv_int(w, num, "r5", -5); /* value before key: pbdec_kv_slow */
    w_kv_str(w, num, "r6", "six");
    w_uv(w, other, 1); /* another field between */
    w_kv_str(w, num, "r7", "seven");
    return 7;
}

Test(pbdec, attribute_runs_of_every_record_kind_stop_where_the_run_breaks)
{
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    struct pbw rec = {0}, sub = {0}, data = {0}, m = {0}, sub2 = {0};

    /* log attributes (6; 7 = dropped_attributes_count between) */
    uint32_t n = w_broken_run(&rec, 6, 7);
    struct pbw req = wrap_item(&rec);
    cr_assert_eq(decode(SIG_LOGS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->logs[0].attrs.count, n);
    cr_assert_eq(b->logs[0].dropped_attrs, 1);
    diff_with_protobuf_c(SIG_LOGS, req.p, req.n, b);
    w_free(&req);

    /* span attributes (9), event attributes (3), link attributes (4) */
    w_broken_run(&sub, 3, 4);
    w_msg(&rec, 11, &sub);
    w_broken_run(&sub, 4, 5);
    w_msg(&rec, 13, &sub);
    w_broken_run(&rec, 9, 10);
    req = wrap_item(&rec);
    cr_assert_eq(decode(SIG_TRACES, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->spans[0].attrs.count, n);
    cr_assert(b->spans[0].n_events == 1 && b->spans[0].n_links == 1);
    diff_with_protobuf_c(SIG_TRACES, req.p, req.n, b);
    w_free(&req);

    /* number point (7; exemplar filtered attributes 7), histogram point (9),
     * exponential histogram point (1), summary point (7) */
    static const struct {
        uint32_t data, attrs, other, exemplars;
    } kinds[] = {{5, 7, 8, 5}, {9, 9, 10, 8}, {10, 1, 10, 11}, {11, 7, 8, 0}};
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        w_broken_run(&rec, kinds[k].attrs, kinds[k].other);
        if (kinds[k].exemplars != 0) {
            w_broken_run(&sub2, 7, 15); /* 15: unknown, skipped */
            w_msg(&rec, kinds[k].exemplars, &sub2);
        }
        w_msg(&data, 1, &rec);
        w_str(&m, 1, "m");
        w_msg(&m, kinds[k].data, &data);
        req = wrap_item(&m);
        cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
        cr_assert_eq(b->n_rows, 1);
        cr_assert_eq(b->points[0].attrs.count, n, "kind %zu", k);
        cr_assert_eq(b->points[0].n_exemplars, kinds[k].exemplars != 0);
        diff_with_protobuf_c(SIG_METRICS, req.p, req.n, b);
        w_free(&req);
    }

    /* A run whose last attribute's length passes the record's end: the run
     * leaves it to next_field, which refuses it as before. */
    w_kv_str(&rec, 6, "a", "1");
    w_kv_str(&rec, 6, "b", "2");
    uint8_t cut[] = {0x32, 0x09, 0x0a, 0x01, 'c'};
    w_raw(&rec, cut, sizeof(cut));
    req = wrap_item(&rec);
    expect_eproto_w(SIG_LOGS, &req, "bad length 9 in field 6: past the end of the message");
    w_free(&req);

    w_free(&rec);
    w_free(&sub);
    w_free(&sub2);
    w_free(&data);
    w_free(&m);
    batch_free(b);
}

/* ------------------------------------------------------------------ */
/* tag-byte paths (TAG1 in pbdec_int.h)                                */

/* Record fields as separate byte strings, to be laid out in any order. */
struct flist {
    struct pbw f[24];
    int n;
};

static struct pbw *fl_next(struct flist *l)
{
    cr_assert_lt(l->n, 24);
    return &l->f[l->n++];
}

static void fl_free(struct flist *l)
{
    for (int i = 0; i < l->n; i++) {
        w_free(&l->f[i]);
    }
    l->n = 0;
}

/* Field |i| of the order: rotation |rot|, reversed when |rev|. */
static const struct pbw *fl_at(const struct flist *l, int i, int rot, bool rev)
{
    int k = (i + rot) % l->n;
    return &l->f[rev ? l->n - 1 - k : k];
}

/*
 * Lays the fields of |l| out in every rotation, forwards and backwards,
 * wraps the record as item of |s| (a point of Metric kind field |kind|
 * for metrics), decodes and diffs each against protobuf-c. Every field
 * is thereby first, last (fewer bytes behind it than a tag-byte path
 * wants) and in between; a field listed twice is read twice, the last
 * occurrence winning or the occurrences merging as protobuf-c has it.
 */
static void diff_every_order(enum signal s, uint32_t kind, const struct flist *l)
{
    for (int rev = 0; rev < 2; rev++) {
        for (int rot = 0; rot < l->n; rot++) {
            struct pbw rec = {0}, data = {0}, m = {0};
            for (int i = 0; i < l->n; i++) {
                const struct pbw *f = fl_at(l, i, rot, rev);
                w_raw(&rec, f->p, f->n);
            }
            struct pbw req;
            if (s == SIG_METRICS) {
                w_msg(&data, 1, &rec);
                w_str(&m, 1, "m");
                w_msg(&m, kind, &data);
                req = wrap_item(&m);
            } else {
                req = wrap_item(&rec);
            }
            struct batch *b = decode_and_diff(s, req.p, req.n);
            cr_assert_eq(b->n_rows, 1, "rot %d rev %d", rot, rev);
            batch_free(b);
            w_free(&req);
            w_free(&rec);
            w_free(&data);
            w_free(&m);
        }
    }
}

static void w_exemplar(struct pbw *w, uint32_t num)
{
    struct pbw ex = {0};
    w_f64(&ex, 2, 77);
    w_dbl(&ex, 3, 0.5);
    w_bytes(&ex, 4, SPAN, 8);
    w_bytes(&ex, 5, TRACE, 16);
    w_kv_str(&ex, 7, "user.id", "u1");
    w_msg(w, num, &ex);
    w_free(&ex);
}

Test(pbdec, tag_byte_fields_decode_like_protobuf_c_in_every_order)
{
    struct flist l = {0};
    uint64_t cnt[3] = {4, 0, 9};
    double bnd[2] = {0.5, 2.5};

    /* number point (gauge): both value members, each twice */
    w_f64(fl_next(&l), 2, 11);
    w_f64(fl_next(&l), 3, 12);
    w_dbl(fl_next(&l), 4, 1.25);
    w_f64(fl_next(&l), 6, (uint64_t)-7);
    w_kv_str(fl_next(&l), 7, "http.route", "/a");
    w_kv_int(fl_next(&l), 7, "code", 200);
    w_uv(fl_next(&l), 8, 1);
    w_f64(fl_next(&l), 2, 21);
    w_dbl(fl_next(&l), 4, -3.5);
    w_exemplar(fl_next(&l), 5);
    w_f64(fl_next(&l), 3, 22);
    diff_every_order(SIG_METRICS, 5, &l);
    fl_free(&l);

    /* histogram point: packed counts and bounds, one of them split */
    w_f64(fl_next(&l), 2, 11);
    w_f64(fl_next(&l), 3, 12);
    w_f64(fl_next(&l), 4, 13);
    w_dbl(fl_next(&l), 5, 9.75);
    w_bytes(fl_next(&l), 6, cnt, sizeof cnt);
    w_bytes(fl_next(&l), 7, bnd, sizeof bnd);
    w_kv_str(fl_next(&l), 9, "k", "v");
    w_uv(fl_next(&l), 10, 1);
    w_dbl(fl_next(&l), 11, 0.1);
    w_dbl(fl_next(&l), 12, 7.5);
    w_f64(fl_next(&l), 6, 5);
    w_exemplar(fl_next(&l), 8);
    w_dbl(fl_next(&l), 12, 8.5);
    diff_every_order(SIG_METRICS, 9, &l);
    fl_free(&l);

    /* exponential histogram point */
    struct pbw bk = {0}, pk = {0};
    for (uint64_t i = 0; i < 11; i++) {
        w_varint(&pk, i * 13);
    }
    w_uv(&bk, 1, 7);
    w_bytes(&bk, 2, pk.p, pk.n);
    w_kv_str(fl_next(&l), 1, "k", "v");
    w_f64(fl_next(&l), 2, 11);
    w_f64(fl_next(&l), 3, 12);
    w_f64(fl_next(&l), 4, 13);
    w_dbl(fl_next(&l), 5, 9.75);
    w_uv(fl_next(&l), 6, 3);
    w_f64(fl_next(&l), 7, 2);
    w_msg(fl_next(&l), 8, &bk);
    w_uv(&bk, 1, 1);
    w_uv(&bk, 2, 300);
    w_msg(fl_next(&l), 9, &bk);
    w_uv(fl_next(&l), 10, 1);
    w_dbl(fl_next(&l), 12, 0.1);
    w_dbl(fl_next(&l), 13, 7.5);
    w_dbl(fl_next(&l), 14, 0.001);
    w_f64(fl_next(&l), 7, 3);
    w_exemplar(fl_next(&l), 11);
    diff_every_order(SIG_METRICS, 10, &l);
    fl_free(&l);

    /* summary point: quantiles of the usual shape and others */
    struct pbw q = {0};
    w_f64(fl_next(&l), 2, 11);
    w_f64(fl_next(&l), 3, 12);
    w_f64(fl_next(&l), 4, 13);
    w_dbl(fl_next(&l), 5, 9.75);
    w_dbl(&q, 1, 0.5);
    w_dbl(&q, 2, 1.5);
    w_msg(fl_next(&l), 6, &q);
    w_dbl(&q, 2, 2.5); /* value only: quantile 0 */
    w_msg(fl_next(&l), 6, &q);
    w_dbl(&q, 2, 3.5); /* value first */
    w_dbl(&q, 1, 0.9);
    w_msg(fl_next(&l), 6, &q);
    w_dbl(&q, 1, 0.99); /* quantile only */
    w_msg(fl_next(&l), 6, &q);
    w_kv_str(fl_next(&l), 7, "k", "v");
    w_uv(fl_next(&l), 8, 1);
    w_dbl(fl_next(&l), 5, 1.75);
    diff_every_order(SIG_METRICS, 11, &l);
    fl_free(&l);

    /* span: ids, name, kind (a one- and a two-byte varint), times */
    struct pbw st = {0};
    w_bytes(fl_next(&l), 1, TRACE, 16);
    w_bytes(fl_next(&l), 2, SPAN, 8);
    w_str(fl_next(&l), 3, "a=b");
    w_bytes(fl_next(&l), 4, SPAN, 8);
    w_str(fl_next(&l), 5, "GET /a");
    w_uv(fl_next(&l), 6, 2);
    w_f64(fl_next(&l), 7, 100);
    w_f64(fl_next(&l), 8, 200);
    w_kv_str(fl_next(&l), 9, "http.method", "GET");
    w_kv_int(fl_next(&l), 9, "n", -1);
    w_uv(fl_next(&l), 10, 2);
    w_uv(&st, 3, 2);
    w_msg(fl_next(&l), 15, &st);
    w_f32(fl_next(&l), 16, 0x101);
    w_uv(fl_next(&l), 6, 300);
    w_bytes(fl_next(&l), 4, ZERO, 8); /* all zeros: no parent */
    w_str(fl_next(&l), 5, "GET /b");
    diff_every_order(SIG_TRACES, 0, &l);
    fl_free(&l);

    /* log record */
    w_f64(fl_next(&l), 1, 100);
    w_uv(fl_next(&l), 2, 9);
    w_str(fl_next(&l), 3, "INFO");
    w_str(&q, 1, "a body");
    w_msg(fl_next(&l), 5, &q);
    w_kv_str(fl_next(&l), 6, "k", "v");
    w_uv(fl_next(&l), 7, 1);
    w_f32(fl_next(&l), 8, 1);
    w_bytes(fl_next(&l), 9, TRACE, 16);
    w_bytes(fl_next(&l), 10, SPAN, 8);
    w_f64(fl_next(&l), 11, 101);
    w_str(fl_next(&l), 12, "ev");
    w_uv(fl_next(&l), 2, 200); /* two-byte varint */
    w_str(fl_next(&l), 3, "WARN");
    w_bytes(fl_next(&l), 9, ZERO, 16);
    diff_every_order(SIG_LOGS, 0, &l);
    fl_free(&l);

    w_free(&bk);
    w_free(&pk);
    w_free(&q);
    w_free(&st);
}

Test(pbdec, packed_bucket_counts_of_every_length_with_a_long_varint_anywhere)
{
    /* One-byte counts are widened eight at a time; a count of two bytes or
     * more at position |at| (or none: at == n) stops that at its word. */
    for (uint32_t n = 0; n <= 40; n++) {
        for (uint32_t at = 0; at <= n; at++) {
            struct pbw pk = {0}, bk = {0}, dp = {0}, exp = {0}, m = {0};
            for (uint32_t i = 0; i < n; i++) {
                w_varint(&pk, i == at ? 128 + 1000 * i : (i * 37) % 128);
            }
            w_uv(&bk, 1, 4);
            w_bytes(&bk, 2, n ? pk.p : (uint8_t *)"", pk.n);
            w_msg(&dp, 8, &bk);
            w_msg(&exp, 1, &dp);
            w_str(&m, 1, "e");
            w_msg(&m, 10, &exp);
            struct pbw req = wrap_item(&m);
            struct batch *b = decode_and_diff(SIG_METRICS, req.p, req.n);
            const struct point_row *pt = &b->points[0];
            /* scale, zero_count, zero_threshold, offset, n, then the counts */
            cr_assert_eq(pt->detail.len, 4 + 8 + 8 + 4 + 4 + 8 * n + 8, "n %u at %u", n, at);
            const uint8_t *c = bp(b, pt->detail) + 28;
            for (uint32_t i = 0; i < n; i++) {
                uint64_t v;
                memcpy(&v, c + 8 * i, 8);
                cr_assert_eq(v, i == at ? 128 + 1000 * i : (i * 37) % 128, "n %u at %u i %u", n, at,
                             i);
            }
            batch_free(b);
            w_free(&req);
            w_free(&pk);
            w_free(&bk);
            w_free(&dp);
            w_free(&exp);
            w_free(&m);
        }
    }
}

Test(pbdec, tag_byte_fields_that_do_not_fit_their_path_fail_with_the_usual_reason)
{
    struct pbw r = {0}, dp = {0}, data = {0}, m = {0}, req;

    /* a span name, a severity text: one-byte length, not UTF-8 */
    w_bytes(&r, 1, TRACE, 16);
    w_str(&r, 5, "bad \xc3\x28 name");
    w_f64(&r, 7, 1);
    w_f64(&r, 8, 2);
    req = wrap_item(&r);
    expect_eproto_w(SIG_TRACES, &req, "invalid UTF-8 in string field name");
    w_free(&req);
    w_f64(&r, 1, 1);
    w_str(&r, 3, "\xff");
    w_f64(&r, 11, 2);
    w_bytes(&r, 9, TRACE, 16);
    req = wrap_item(&r);
    expect_eproto_w(SIG_LOGS, &req, "invalid UTF-8 in string field severity_text");
    w_free(&req);

    /* packed explicit_bounds of one-byte length, not a multiple of 8 */
    w_bytes(&dp, 7, "123456789", 9);
    w_f64(&dp, 2, 1);
    w_f64(&dp, 3, 2);
    w_msg(&data, 1, &dp);
    w_msg(&m, 9, &data);
    req = wrap_item(&m);
    expect_eproto_w(SIG_METRICS, &req, "packed explicit_bounds length 9 is not a multiple of 8");
    w_free(&req);

    /* a fixed64 field whose tag byte a tag-byte path takes, cut short
     * with more than 8 bytes of the message left (as a sub-message's
     * length says) is still bounded by the message: truncated */
    w_f64(&dp, 2, 1);
    w_raw(&dp, "\x19\x01\x02\x03", 4); /* time_unix_nano, 3 of its 8 bytes */
    w_msg(&data, 1, &dp);
    w_msg(&m, 5, &data);
    req = wrap_item(&m);
    expect_eproto_w(SIG_METRICS, &req, "truncated fixed64");
    w_free(&req);

    /* the wire type is part of the tag byte: as_double sent as a varint */
    w_f64(&dp, 2, 1);
    w_f64(&dp, 3, 2);
    w_uv(&dp, 4, 1);
    w_msg(&data, 1, &dp);
    w_msg(&m, 5, &data);
    req = wrap_item(&m);
    expect_eproto_w(SIG_METRICS, &req, "wrong wire type 0 for field as_double");
    w_free(&req);

    w_free(&r);
    w_free(&dp);
    w_free(&data);
    w_free(&m);
}

/* Metric "m" with |data| as its member |num| (7 Sum, 10 exponential histogram),
 * as a request; empties |data|. */
static struct pbw data_request(uint32_t num, struct pbw *data)
{
    struct pbw m = {0};
    w_msg(&m, num, data);
    w_str(&m, 1, "m");
    struct pbw req = wrap_item(&m);
    w_free(&m);
    return req;
}

/*
 * The data points are read in one pass (dec_metric_data1): the Sum's own
 * fields before the points and between them, unknown fields, points of
 * one-, two- (minimal and not) and three-byte lengths, an empty point last.
 */
Test(pbdec, data_points_of_every_length_class_around_other_fields)
{
    struct batch *b = batch_new(SIG_METRICS);
    char err[256];
    static char big[20000];
    struct pbw dp = {0}, data = {0};

    w_uv(&data, 2, 2); /* temporality and monotonic before the points */
    w_uv(&data, 3, 1);
    w_uv(&data, 15, 7); /* unknown */
    w_f64(&dp, 3, 11);
    w_dbl(&dp, 4, 0.5);
    w_msg(&data, 1, &dp); /* 18 bytes: a one-byte length */
    w_f64(&dp, 3, 12);
    for (int i = 0; i < 6; i++) {
        w_kv_str(&dp, 7, "key.of.some.length", "value of some length");
    }
    size_t at = data.n;
    w_msg(&data, 1, &dp); /* 285 bytes: a two-byte length */
    cr_assert(data.n - at == 288 && data.p[at] == 0x0a && data.p[at + 1] >= 0x80);
    w_bytes(&data, 4, "x", 1); /* unknown, between points */
    memset(big, 'v', sizeof(big) - 1);
    w_f64(&dp, 3, 13);
    w_kv_str(&dp, 7, "big", big);
    w_msg(&data, 1, &dp);            /* > 16383 bytes: a three-byte length, next_field's way */
    w_raw(&data, "\x0a\x89\x00", 3); /* a two-byte length of 9 (not minimal) */
    w_f64(&dp, 3, 14);
    w_raw(&data, dp.p, dp.n);
    dp.n = 0;
    w_msg(&data, 1, &dp); /* empty, the last two bytes of the Sum */
    struct pbw req = data_request(7, &data);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_metrics, 1);
    cr_assert(b->metrics[0].kind == MK_SUM && b->metrics[0].temporality == 2 &&
              b->metrics[0].monotonic);
    cr_assert_eq(b->n_rows, 5);
    static const uint64_t times[] = {11, 12, 13, 14, 0};
    static const uint32_t counts[] = {0, 6, 1, 0, 0};
    for (uint32_t i = 0; i < 5; i++) {
        cr_assert_eq(b->points[i].time_ns, times[i], "point %u", i);
        cr_assert_eq(b->points[i].attrs.count, counts[i], "point %u", i);
        cr_assert_eq(b->points[i].metric, 0);
    }
    cr_assert(b->points[0].value_type == PV_DOUBLE && b->points[0].value.d == 0.5);
    const char *k;
    size_t kn;
    struct val v = attr_at(b, b->points[2].attrs, 0, &k, &kn);
    cr_assert(kn == 3 && v.type == VAL_STR && v.n == sizeof(big) - 1 && v.s[v.n - 1] == 'v');
    diff_with_protobuf_c(SIG_METRICS, req.p, req.n, b);
    w_free(&req);

    /* 150 bytes, then a point of 126: read as 278 (a length's second byte
     * weighed wrong), the first would hold the second as an unknown field 1. */
    char v60[61], v63[64], v108[109];
    memset(v60, 'a', 60), v60[60] = 0;
    memset(v63, 'b', 63), v63[63] = 0;
    memset(v108, 'c', 108), v108[108] = 0;
    w_f64(&dp, 3, 21);
    w_kv_str(&dp, 7, "x", v60);
    w_kv_str(&dp, 7, "y", v63);
    cr_assert_eq(dp.n, 150);
    w_msg(&data, 1, &dp);
    w_f64(&dp, 3, 22);
    w_kv_str(&dp, 7, "z", v108);
    cr_assert_eq(dp.n, 126);
    w_msg(&data, 1, &dp);
    req = data_request(7, &data);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), 0, "%s", err);
    cr_assert_eq(b->n_rows, 2);
    cr_assert(b->points[0].time_ns == 21 && b->points[0].attrs.count == 2);
    cr_assert(b->points[1].time_ns == 22 && b->points[1].attrs.count == 1);
    diff_with_protobuf_c(SIG_METRICS, req.p, req.n, b);
    w_free(&req);

    w_free(&dp);
    w_free(&data);
    batch_free(b);
}

/*
 * A failing point, field or length inside the points rolls the one pass
 * back: the two-pass walk checks the Sum's own fields before any point, so
 * the error is the one it has always been, and lengths past the end fail
 * before anything reads behind them (expect_eproto's buffer is exact).
 */
Test(pbdec, data_point_errors_keep_the_two_pass_result)
{
    struct pbw dp = {0}, data = {0}, req;

    /* a good point, a broken one, then temporality with the wrong wire type */
    w_f64(&dp, 3, 1);
    w_msg(&data, 1, &dp);
    w_uv(&dp, 3, 5); /* time_unix_nano as a varint */
    w_msg(&data, 1, &dp);
    w_bytes(&data, 2, "", 0);
    req = data_request(7, &data);
    expect_eproto_w(SIG_METRICS, &req, "wrong wire type 2 for field aggregation_temporality");
    w_free(&req);

    /* the broken point alone: its own reason */
    w_f64(&dp, 3, 1);
    w_msg(&data, 1, &dp);
    w_uv(&dp, 3, 5);
    w_msg(&data, 1, &dp);
    req = data_request(7, &data);
    expect_eproto_w(SIG_METRICS, &req, "wrong wire type 0 for field time_unix_nano");
    w_free(&req);

    /* data_points as a varint after a good point (its length in three
     * bytes, so next_field read it last) */
    w_raw(&data, "\x0a\x89\x80\x00", 4);
    w_f64(&data, 3, 1);
    w_uv(&data, 1, 3);
    req = data_request(7, &data);
    expect_eproto_w(SIG_METRICS, &req, "wrong wire type 0 for field data_points");
    w_free(&req);

    /* lengths that do not fit: one-byte, two-byte, and a length cut short */
    static const struct {
        const char *raw;
        size_t n;
        const char *why;
    } cut[] = {
        {"\x0a\x14\x19\x01\x02\x03\x04", 7, "bad length 20"},
        {"\x0a\x85\x01\x19\x01\x02\x03\x04\x05\x06\x07\x08", 12, "bad length 133"},
        {"\x0a\x85", 2, "truncated varint (length)"},
    };
    for (size_t i = 0; i < sizeof(cut) / sizeof(cut[0]); i++) {
        w_f64(&dp, 3, 1);
        w_msg(&data, 1, &dp);
        w_raw(&data, cut[i].raw, cut[i].n);
        req = data_request(7, &data);
        expect_eproto_w(SIG_METRICS, &req, cut[i].why);
        w_free(&req);
    }

    w_free(&dp);
    w_free(&data);
}

/*
 * Buckets of an exponential histogram in every shape: one occurrence of
 * one-byte length with an offset of one byte (or none) and one packed run
 * that ends it is read in place (put_buckets); every other shape - a longer
 * offset, another order, a second run or field, a split occurrence, a
 * two-byte length - walks, and all decode like protobuf-c. Scale as a one-
 * and a two-byte varint.
 */
Test(pbdec, exp_histogram_buckets_of_every_shape_decode_like_protobuf_c)
{
    uint8_t c130[130];
    for (size_t i = 0; i < sizeof c130; i++) {
        c130[i] = (uint8_t)(i % 100);
    }
    static const struct {
        const char *raw;
        size_t n;
    } shapes[] = {
        {"\x08\x0e\x12\x03\x01\x02\x03", 7},                      /* offset 7, 3 counts */
        {"\x12\x0a\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a", 12}, /* no offset, 10 */
        {"\x08\x05\x12\x02\x09\x00", 6},                          /* offset -3 */
        {"\x08\xc8\x01\x12\x02\x01\x02", 7},                      /* offset 100: 2 bytes */
        {"\x12\x02\x01\x02\x08\x0e", 6},                          /* counts, then offset */
        {"\x08\x0e\x12\x02\x01\x02\x08\x10", 8},                  /* a second offset */
        {"\x08\x0e\x12\x02\x01\x02\x12\x01\x05", 9},              /* two packed runs */
        {"\x08\x0e\x10\x04\x10\xac\x02", 7},                      /* unpacked counts */
        {"\x08\x0e\x12\x04\x01\xac\x02\x03", 8},                  /* a count of 300 */
        {"", 0},                                                  /* empty */
        {"\x08\x0e", 2},                                          /* offset only */
        {"\x08\x0e\x12\x00", 4},                                  /* no counts */
        {"\x08\x0e\x12\x02\x01\x02\x18\x01", 8},                  /* unknown field last */
    };
    for (size_t i = 0; i <= sizeof(shapes) / sizeof(shapes[0]) + 2; i++) {
        for (int side = 8; side <= 9; side++) {
            struct pbw bk = {0}, dp = {0}, data = {0};
            if (i < sizeof(shapes) / sizeof(shapes[0])) {
                w_raw(&bk, shapes[i].raw, shapes[i].n);
                w_msg(&dp, (uint32_t)side, &bk);
            } else if (i == sizeof(shapes) / sizeof(shapes[0])) {
                w_uv(&bk, 1, 3); /* a two-byte length: 130 counts */
                w_bytes(&bk, 2, c130, sizeof c130);
                w_msg(&dp, (uint32_t)side, &bk);
            } else if (i == sizeof(shapes) / sizeof(shapes[0]) + 1) {
                w_raw(&bk, "\x08\x02\x12\x02\x01\x02", 6); /* split: merged */
                w_msg(&dp, (uint32_t)side, &bk);
                /* (with its own offset: protobuf-c's merge takes an absent
                 * one as 0, where protobuf and pbdec keep the first) */
                w_raw(&bk, "\x08\x04\x12\x02\x03\x04", 6);
                w_msg(&dp, (uint32_t)side, &bk);
            } else {
                w_raw(&bk, "\x08\x02\x12\x02\x01\x02", 6); /* split by the scale */
                w_msg(&dp, (uint32_t)side, &bk);
                w_uv(&dp, 6, 4);
                w_raw(&bk, "\x08\x04", 2);
                w_msg(&dp, (uint32_t)side, &bk);
            }
            w_uv(&dp, 6, i % 2 ? 199 : 20); /* scale -100 (two bytes) or 10 */
            w_f64(&dp, 3, 5);
            w_msg(&data, 1, &dp);
            struct pbw req = data_request(10, &data);
            struct batch *b = decode_and_diff(SIG_METRICS, req.p, req.n);
            cr_assert_eq(b->n_rows, 1, "shape %zu side %d", i, side);
            batch_free(b);
            w_free(&req);
            w_free(&bk);
            w_free(&dp);
            w_free(&data);
        }
    }

    /* What fails in a Buckets fails with the walk's reason. */
    static const struct {
        const char *raw;
        size_t n;
        const char *why;
    } bad[] = {
        {"\x08\x0e\x12\x02\x01\x85", 6, "truncated packed varint (bucket_counts) at offset 17"},
        {"\x08\x0e\x12\x05\x01\x02", 6, "bad length 5"},
        {"\x0d\x00\x00\x00\x00\x12\x01\x01", 8, "wrong wire type 5 for field buckets.offset"},
        {"\x08\x0e\x15\x00\x00\x00\x00", 7, "wrong wire type 5 for field buckets.bucket_counts"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct pbw bk = {0}, dp = {0}, data = {0};
        w_raw(&bk, bad[i].raw, bad[i].n);
        w_msg(&dp, 8, &bk);
        w_msg(&data, 1, &dp);
        struct pbw req = data_request(10, &data);
        expect_eproto_w(SIG_METRICS, &req, bad[i].why);
        w_free(&req);
        w_free(&bk);
        w_free(&dp);
        w_free(&data);
    }

    /* A run whose length reaches past its Buckets into the point's next
     * fields (valid ones, so the point reads on): still "bad length". */
    struct pbw dp = {0}, data = {0};
    w_raw(&dp, "\x42\x04\x08\x02\x12\x06\x30\x04\x42\x02\x08\x04", 12);
    w_msg(&data, 1, &dp);
    struct pbw req = data_request(10, &data);
    expect_eproto_w(SIG_METRICS, &req, "bad length 6");
    w_free(&req);
    w_free(&dp);
    w_free(&data);
}

/*
 * Empty data points (2 bytes each, a row each) are refused where the
 * general guard refuses them: point_guard's bound folds the resource,
 * scope and metric rows in once per Metric, so the point it stops at - and
 * the offset the reason names - must be heap_guard's.
 */
Test(pbdec, data_points_that_balloon_are_refused_at_the_general_guards_point)
{
    struct batch *b = batch_new(SIG_METRICS);
    char err[256], want[128];
    struct pbw data = {0};

    for (int i = 0; i < 100000; i++) {
        w_raw(&data, "\x0a\x00", 2);
    }
    struct pbw req = data_request(7, &data);
    size_t first = offset_of(&req, "\x0a\x00\x0a\x00", 4, 0);
    size_t limit = req.n * 32 + ((size_t)1 << 20);
    size_t dicts = sizeof(struct res_row) + sizeof(struct scope_row) + sizeof(struct metric_row);
    /* the first point k with k rows + the dicts past the limit (no heap) */
    size_t k = (limit - dicts) / sizeof(struct point_row) + 1;
    cr_assert_lt(k, 100000);
    snprintf(want, sizeof want,
             "request expands to more than 32 times its size when decoded at "
             "offset %zu",
             first + 2 * k + 2);
    cr_assert_eq(decode(SIG_METRICS, &req, b, err), -EPROTO);
    cr_assert(strstr(err, want) != NULL, "'%s' lacks '%s'", err, want);
    expect_eproto_w(SIG_METRICS, &req, want);

    w_free(&req);
    w_free(&data);
    batch_free(b);
}
