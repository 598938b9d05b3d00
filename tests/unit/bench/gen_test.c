/*
 * gen_test.c - otlp-load's request generator (bench/otlp-load/gen.c).
 *
 * The generated requests are checked three independent ways: protobuf-c
 * (the reference decoder from build/gen) unpacks them with no unknown field
 * and repacks them to the same size (so the hand encoding is canonical),
 * proto/pbdec decodes them into exactly |records| rows, and jansson reads
 * the OTLP/JSON encoding of the same request to the same records; pbdec and
 * proto/jsondec read the two encodings of a request to identical rows.
 *
 * gen.c lives under bench/ (not in the project library), so it is
 * compiled into this test by inclusion.
 */
#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <libdeflate.h>

#include "bench/otlp-load/gen.c"

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "storage/arena.h"
#include "storage/batch.h"

typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest LogsReq;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest TraceReq;
typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest MetricsReq;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;

#define TIME_BASE 1700000000000000000ULL

static const uint32_t record_counts[] = {1, 2, 5, 7, 100, 1000};

static void gen_one(enum signal s, uint64_t seed, uint32_t records, uint64_t idx, enum gen_format f,
                    struct vbuf *out, struct gen_stats *st)
{
    struct gen_config c = {
        .signal = s, .seed = seed, .time_base_ns = TIME_BASE, .records = records};
    vbuf_reset(out);
    cr_assert_eq(gen_request(&c, idx, f, out, st), 0, "gen_request(%d, %u records, #%llu)", s,
                 records, (unsigned long long)idx);
}

/* Unknown fields anywhere in the tree (they would mean a wrong field number
 * or wire type in the hand encoding). */
static size_t unknown_fields(const ProtobufCMessage *m)
{
    size_t bad = m->n_unknown_fields;
    const ProtobufCMessageDescriptor *d = m->descriptor;
    const char *base = (const char *)m;
    for (unsigned i = 0; i < d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &d->fields[i];
        if (f->type != PROTOBUF_C_TYPE_MESSAGE) {
            continue;
        }
        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
            size_t n = *(const size_t *)(base + f->quantifier_offset);
            ProtobufCMessage *const *arr = *(ProtobufCMessage *const *const *)(base + f->offset);
            for (size_t k = 0; k < n; k++) {
                bad += unknown_fields(arr[k]);
            }
            continue;
        }
        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            *(const uint32_t *)(base + f->quantifier_offset) != f->id) {
            continue;
        }
        const ProtobufCMessage *sub = *(ProtobufCMessage *const *)(base + f->offset);
        if (sub) {
            bad += unknown_fields(sub);
        }
    }
    return bad;
}

/* One of each attribute type among 4..12 attributes. */
static void check_attrs(KeyValue **kv, size_t n, const char *what)
{
    cr_assert(n >= 4 && n <= 12, "%s: %zu attributes", what, n);
    bool seen[16] = {false};
    for (size_t i = 0; i < n; i++) {
        cr_assert_neq(kv[i]->value, NULL);
        seen[kv[i]->value->value_case] = true;
        for (size_t j = 0; j < i; j++) {
            cr_assert_str_neq(kv[i]->key, kv[j]->key, "%s: duplicate key %s", what, kv[i]->key);
        }
    }
    cr_assert(seen[OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE] &&
                  seen[OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE] &&
                  seen[OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_DOUBLE_VALUE] &&
                  seen[OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_BOOL_VALUE],
              "%s: attribute types not mixed", what);
}

static bool has_attr(KeyValue **kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(kv[i]->key, key) == 0) {
            return true;
        }
    }
    return false;
}

static void check_resource(const Opentelemetry__Proto__Resource__V1__Resource *r)
{
    cr_assert_neq(r, NULL);
    cr_assert(has_attr(r->attributes, r->n_attributes, "service.name"));
    cr_assert(has_attr(r->attributes, r->n_attributes, "host.name"));
    cr_assert(has_attr(r->attributes, r->n_attributes, "service.version"));
}

/* Returns the records protobuf-c sees; checks the shape on the way. */
static uint32_t check_logs_pb(const struct vbuf *b, uint32_t *traced)
{
    LogsReq *m = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
        NULL, b->len, b->p);
    cr_assert_neq(m, NULL, "protobuf-c refused a logs request");
    cr_assert_eq(unknown_fields(&m->base), 0);
    cr_assert_eq(
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__get_packed_size(m),
        b->len, "not canonical: repacks to another size");
    uint32_t n = 0;
    for (size_t i = 0; i < m->n_resource_logs; i++) {
        check_resource(m->resource_logs[i]->resource);
        for (size_t j = 0; j < m->resource_logs[i]->n_scope_logs; j++) {
            Opentelemetry__Proto__Logs__V1__ScopeLogs *sl = m->resource_logs[i]->scope_logs[j];
            cr_assert_neq(sl->scope, NULL);
            cr_assert_gt(strlen(sl->scope->name), 0);
            cr_assert_gt(sl->n_log_records, 0, "empty ScopeLogs");
            for (size_t k = 0; k < sl->n_log_records; k++, n++) {
                Opentelemetry__Proto__Logs__V1__LogRecord *r = sl->log_records[k];
                static const char *const sev[] = {"TRACE", "DEBUG", "INFO",
                                                  "WARN",  "ERROR", "FATAL"};
                int s = r->severity_number;
                cr_assert(s == 1 || s == 5 || s == 9 || s == 13 || s == 17 || s == 21, "sev %d", s);
                cr_assert_str_eq(r->severity_text, sev[(s - 1) / 4]);
                cr_assert_geq(r->time_unix_nano, TIME_BASE);
                cr_assert_gt(r->observed_time_unix_nano, r->time_unix_nano);
                cr_assert_eq(r->body->value_case,
                             OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
                cr_assert_gt(strlen(r->body->string_value), 5);
                check_attrs(r->attributes, r->n_attributes, "log");
                cr_assert(r->trace_id.len == 16 || r->trace_id.len == 0);
                cr_assert_eq(r->span_id.len, r->trace_id.len / 2);
                *traced += r->trace_id.len == 16;
            }
        }
    }
    opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(m, NULL);
    return n;
}

static uint32_t check_traces_pb(const struct vbuf *b, uint32_t *events, uint32_t *links,
                                uint32_t *roots)
{
    TraceReq *m = opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
        NULL, b->len, b->p);
    cr_assert_neq(m, NULL, "protobuf-c refused a traces request");
    cr_assert_eq(unknown_fields(&m->base), 0);
    cr_assert_eq(
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            m),
        b->len);
    /* gather every span, then check each parent exists in its trace */
    uint32_t n = 0;
    Opentelemetry__Proto__Trace__V1__Span *all[1000];
    for (size_t i = 0; i < m->n_resource_spans; i++) {
        check_resource(m->resource_spans[i]->resource);
        for (size_t j = 0; j < m->resource_spans[i]->n_scope_spans; j++) {
            Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = m->resource_spans[i]->scope_spans[j];
            cr_assert_gt(ss->n_spans, 0, "empty ScopeSpans");
            for (size_t k = 0; k < ss->n_spans; k++) {
                Opentelemetry__Proto__Trace__V1__Span *s = ss->spans[k];
                cr_assert_lt(n, 1000);
                all[n++] = s;
                cr_assert_eq(s->trace_id.len, 16);
                cr_assert_eq(s->span_id.len, 8);
                cr_assert(s->kind >= 1 && s->kind <= 5);
                cr_assert_geq(s->end_time_unix_nano, s->start_time_unix_nano);
                cr_assert_gt(strlen(s->name), 0);
                check_attrs(s->attributes, s->n_attributes, "span");
                *events += (uint32_t)s->n_events;
                *links += (uint32_t)s->n_links;
                for (size_t e = 0; e < s->n_events; e++) {
                    cr_assert_gt(strlen(s->events[e]->name), 0);
                }
                for (size_t e = 0; e < s->n_links; e++) {
                    cr_assert_eq(s->links[e]->trace_id.len, 16);
                    cr_assert_eq(s->links[e]->span_id.len, 8);
                }
            }
        }
    }
    for (uint32_t i = 0; i < n; i++) {
        if (all[i]->parent_span_id.len == 0) {
            (*roots)++;
            continue;
        }
        cr_assert_eq(all[i]->parent_span_id.len, 8);
        bool found = false;
        for (uint32_t j = 0; j < n && !found; j++) {
            found = memcmp(all[j]->trace_id.data, all[i]->trace_id.data, 16) == 0 &&
                    memcmp(all[j]->span_id.data, all[i]->parent_span_id.data, 8) == 0;
        }
        cr_assert(found, "span %u: parent not in its trace", i);
    }
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(m,
                                                                                            NULL);
    return n;
}

static uint32_t check_metrics_pb(const struct vbuf *b, uint32_t kinds[6])
{
    MetricsReq *m =
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
            NULL, b->len, b->p);
    cr_assert_neq(m, NULL, "protobuf-c refused a metrics request");
    cr_assert_eq(unknown_fields(&m->base), 0);
    cr_assert_eq(
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(
            m),
        b->len);
    uint32_t n = 0;
    for (size_t i = 0; i < m->n_resource_metrics; i++) {
        check_resource(m->resource_metrics[i]->resource);
        for (size_t j = 0; j < m->resource_metrics[i]->n_scope_metrics; j++) {
            Opentelemetry__Proto__Metrics__V1__ScopeMetrics *sm =
                m->resource_metrics[i]->scope_metrics[j];
            for (size_t k = 0; k < sm->n_metrics; k++) {
                Opentelemetry__Proto__Metrics__V1__Metric *mt = sm->metrics[k];
                cr_assert_gt(strlen(mt->name), 0);
                size_t pts = 0;
                switch (mt->data_case) {
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
                    pts = mt->gauge->n_data_points;
                    kinds[MK_GAUGE] += (uint32_t)pts;
                    for (size_t p = 0; p < pts; p++) {
                        cr_assert_neq(mt->gauge->data_points[p]->value_case, 0);
                    }
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
                    pts = mt->sum->n_data_points;
                    kinds[MK_SUM] += (uint32_t)pts;
                    cr_assert_neq(mt->sum->aggregation_temporality, 0);
                    for (size_t p = 0; p < pts; p++) {
                        cr_assert_neq(mt->sum->data_points[p]->value_case, 0);
                    }
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
                    pts = mt->histogram->n_data_points;
                    kinds[MK_HISTOGRAM] += (uint32_t)pts;
                    for (size_t p = 0; p < pts; p++) {
                        Opentelemetry__Proto__Metrics__V1__HistogramDataPoint *d =
                            mt->histogram->data_points[p];
                        uint64_t sum = 0;
                        cr_assert_eq(d->n_bucket_counts, d->n_explicit_bounds + 1);
                        for (size_t q = 0; q < d->n_bucket_counts; q++) {
                            sum += d->bucket_counts[q];
                        }
                        cr_assert_eq(d->count, sum);
                        cr_assert_eq(
                            d->sum_opt_case,
                            OPENTELEMETRY__PROTO__METRICS__V1__HISTOGRAM_DATA_POINT__SUM_OPT_SUM);
                    }
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
                    pts = mt->exponential_histogram->n_data_points;
                    kinds[MK_EXP_HISTOGRAM] += (uint32_t)pts;
                    for (size_t p = 0; p < pts; p++) {
                        Opentelemetry__Proto__Metrics__V1__ExponentialHistogramDataPoint *d =
                            mt->exponential_histogram->data_points[p];
                        uint64_t sum = d->zero_count;
                        cr_assert_neq(d->positive, NULL);
                        for (size_t q = 0; q < d->positive->n_bucket_counts; q++) {
                            sum += d->positive->bucket_counts[q];
                        }
                        for (size_t q = 0; d->negative && q < d->negative->n_bucket_counts; q++) {
                            sum += d->negative->bucket_counts[q];
                        }
                        cr_assert_eq(d->count, sum);
                    }
                    break;
                case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
                    pts = mt->summary->n_data_points;
                    kinds[MK_SUMMARY] += (uint32_t)pts;
                    for (size_t p = 0; p < pts; p++) {
                        cr_assert_eq(mt->summary->data_points[p]->n_quantile_values, 5);
                    }
                    break;
                default:
                    cr_assert_fail("metric without data");
                }
                cr_assert_gt(pts, 0, "metric without points");
                n += (uint32_t)pts;
            }
        }
    }
    opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
        m, NULL);
    return n;
}

Test(loadgen_payload, protobuf_requests_are_canonical_and_hold_exactly_the_records)
{
    struct vbuf b;
    vbuf_init(&b);
    uint32_t traced = 0, logs = 0, events = 0, links = 0, spans = 0, roots = 0;
    uint32_t kinds[6] = {0};
    for (size_t r = 0; r < sizeof(record_counts) / sizeof(record_counts[0]); r++) {
        uint32_t rec = record_counts[r];
        for (uint64_t idx = 0; idx < 4; idx++) {
            struct gen_stats st;
            gen_one(SIG_LOGS, 7, rec, idx, GEN_PROTOBUF, &b, &st);
            cr_assert_eq(check_logs_pb(&b, &traced), rec);
            cr_assert_eq(st.records, rec);
            logs += rec;

            gen_one(SIG_TRACES, 7, rec, idx, GEN_PROTOBUF, &b, &st);
            cr_assert_eq(check_traces_pb(&b, &events, &links, &roots), rec);
            spans += rec;

            uint32_t k[6] = {0};
            gen_one(SIG_METRICS, 7, rec, idx, GEN_PROTOBUF, &b, &st);
            cr_assert_eq(check_metrics_pb(&b, k), rec);
            for (int i = 1; i < 6; i++) {
                cr_assert_eq(k[i], st.by_kind[i], "gen_stats disagrees on kind %d", i);
                kinds[i] += k[i];
                if (rec >= 5) {
                    cr_assert_gt(k[i], 0, "%u points: metric kind %d missing", rec, i);
                }
            }
        }
    }
    /* linkage and trees: most logs carry a trace context; events, links and
     * multi-span traces all occur */
    cr_assert(traced > logs * 8 / 10 && traced < logs * 9 / 10, "%u of %u logs traced", traced,
              logs);
    cr_assert_gt(events, spans / 20);
    cr_assert_gt(links, 0);
    cr_assert(roots < spans / 2, "%u roots among %u spans: trees too flat", roots, spans);
    vbuf_fini(&b);
}

/* Every (trace id, span id) a log record names is a span of the traces
 * request with the same seed and index. */
Test(loadgen_payload, log_records_link_to_generated_spans)
{
    struct vbuf b;
    vbuf_init(&b);
    for (uint64_t idx = 0; idx < 3; idx++) {
        gen_one(SIG_TRACES, 11, 300, idx, GEN_PROTOBUF, &b, NULL);
        TraceReq *t =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                NULL, b.len, b.p);
        cr_assert_neq(t, NULL);
        gen_one(SIG_LOGS, 11, 300, idx, GEN_PROTOBUF, &b, NULL);
        LogsReq *l = opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
            NULL, b.len, b.p);
        cr_assert_neq(l, NULL);
        uint32_t linked = 0;
        for (size_t i = 0; i < l->n_resource_logs; i++) {
            for (size_t j = 0; j < l->resource_logs[i]->n_scope_logs; j++) {
                Opentelemetry__Proto__Logs__V1__ScopeLogs *sl = l->resource_logs[i]->scope_logs[j];
                for (size_t k = 0; k < sl->n_log_records; k++) {
                    Opentelemetry__Proto__Logs__V1__LogRecord *r = sl->log_records[k];
                    if (r->trace_id.len == 0) {
                        continue;
                    }
                    bool found = false;
                    for (size_t a = 0; a < t->n_resource_spans && !found; a++) {
                        for (size_t c = 0; c < t->resource_spans[a]->n_scope_spans && !found; c++) {
                            Opentelemetry__Proto__Trace__V1__ScopeSpans *ss =
                                t->resource_spans[a]->scope_spans[c];
                            for (size_t s = 0; s < ss->n_spans && !found; s++) {
                                found = memcmp(ss->spans[s]->trace_id.data, r->trace_id.data, 16) ==
                                            0 &&
                                        memcmp(ss->spans[s]->span_id.data, r->span_id.data, 8) == 0;
                            }
                        }
                    }
                    cr_assert(found, "request %llu: a log names a span that was never generated",
                              (unsigned long long)idx);
                    linked++;
                }
            }
        }
        cr_assert_gt(linked, 200);
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            t, NULL);
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(l,
                                                                                              NULL);
    }
    vbuf_fini(&b);
}

/* The project's own decoder takes every request whole. */
Test(loadgen_payload, pbdec_decodes_every_request_to_its_record_count)
{
    struct vbuf b;
    vbuf_init(&b);
    struct batch *bt = batch_new(SIG_LOGS);
    cr_assert_neq(bt, NULL);
    for (enum signal s = SIG_LOGS; s <= SIG_METRICS; s++) {
        for (size_t r = 0; r < sizeof(record_counts) / sizeof(record_counts[0]); r++) {
            for (uint64_t idx = 0; idx < 3; idx++) {
                char err[200] = "";
                gen_one(s, 3, record_counts[r], idx, GEN_PROTOBUF, &b, NULL);
                batch_reset(bt, s);
                int rc = pbdec_decode(s, b.p, b.len, bt, err, sizeof(err));
                cr_assert_eq(rc, 0, "pbdec %s: %s", signal_name(s), err);
                cr_assert_eq(bt->n_rows, record_counts[r], "%s: %u rows, %u records",
                             signal_name(s), bt->n_rows, record_counts[r]);
                cr_assert_eq(bt->rejected, 0, "%s: pbdec rejected %u: %s", signal_name(s),
                             bt->rejected, bt->reject_msg);
            }
        }
    }
    batch_free(bt);
    vbuf_fini(&b);
}

static bool mstr_eq(struct mstr a, struct mstr b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool blob_eq(const struct batch *a, struct blob x, const struct batch *b, struct blob y)
{
    return x.len == y.len && (x.len == 0 || memcmp(batch_blob(a, x), batch_blob(b, y), x.len) == 0);
}

/* Row by row, field by field: what pbdec made of the protobuf encoding and
 * what jsondec made of the JSON encoding of the same request. */
static void same_rows(enum signal s, const struct batch *p, const struct batch *j, uint32_t rec)
{
    cr_assert_eq(p->n_rows, rec);
    cr_assert_eq(j->n_rows, rec, "jsondec: %u rows, %u records", j->n_rows, rec);
    cr_assert_eq(p->n_resources, j->n_resources);
    cr_assert_eq(p->n_scopes, j->n_scopes);
    for (uint32_t i = 0; i < p->n_resources; i++) {
        cr_assert_eq(p->resources[i].attrs.count, j->resources[i].attrs.count);
        cr_assert(blob_eq(p, p->resources[i].attrs.blob, j, j->resources[i].attrs.blob),
                  "resource %u attributes differ", i);
    }
    for (uint32_t i = 0; i < p->n_scopes; i++) {
        cr_assert(mstr_eq(p->scopes[i].name, j->scopes[i].name));
        cr_assert(mstr_eq(p->scopes[i].version, j->scopes[i].version));
        cr_assert(blob_eq(p, p->scopes[i].attrs.blob, j, j->scopes[i].attrs.blob));
    }
    for (uint32_t r = 0; r < rec; r++) {
        if (s == SIG_LOGS) {
            const struct log_row *a = &p->logs[r], *b = &j->logs[r];
            cr_assert_eq(a->time_ns, b->time_ns, "log %u", r);
            cr_assert_eq(a->observed_ns, b->observed_ns);
            cr_assert_eq(a->scope, b->scope);
            cr_assert_eq(a->severity_number, b->severity_number);
            cr_assert(mstr_eq(a->severity_text, b->severity_text));
            cr_assert_eq(a->body_type, b->body_type);
            cr_assert(mstr_eq(a->body_str, b->body_str), "log %u body", r);
            cr_assert_eq(a->attrs.count, b->attrs.count);
            cr_assert(blob_eq(p, a->attrs.blob, j, b->attrs.blob), "log %u attributes", r);
            cr_assert_eq(a->flags, b->flags);
            cr_assert_eq(a->has_trace_id, b->has_trace_id);
            cr_assert_eq(memcmp(a->trace_id, b->trace_id, 16), 0);
            cr_assert_eq(memcmp(a->span_id, b->span_id, 8), 0);
            cr_assert(mstr_eq(a->event_name, b->event_name));
        } else if (s == SIG_TRACES) {
            const struct span_row *a = &p->spans[r], *b = &j->spans[r];
            cr_assert_eq(memcmp(a->trace_id, b->trace_id, 16), 0, "span %u", r);
            cr_assert_eq(memcmp(a->span_id, b->span_id, 8), 0);
            cr_assert_eq(a->has_parent, b->has_parent);
            cr_assert_eq(memcmp(a->parent_span_id, b->parent_span_id, 8), 0);
            cr_assert_eq(a->start_ns, b->start_ns);
            cr_assert_eq(a->end_ns, b->end_ns);
            cr_assert(mstr_eq(a->name, b->name));
            cr_assert(mstr_eq(a->trace_state, b->trace_state));
            cr_assert_eq(a->kind, b->kind);
            cr_assert_eq(a->flags, b->flags);
            cr_assert_eq(a->status_code, b->status_code);
            cr_assert(mstr_eq(a->status_message, b->status_message));
            cr_assert(blob_eq(p, a->attrs.blob, j, b->attrs.blob), "span %u attributes", r);
            cr_assert_eq(a->n_events, b->n_events);
            cr_assert(blob_eq(p, a->events, j, b->events), "span %u events", r);
            cr_assert_eq(a->n_links, b->n_links);
            cr_assert(blob_eq(p, a->links, j, b->links), "span %u links", r);
        } else {
            const struct point_row *a = &p->points[r], *b = &j->points[r];
            const struct metric_row *ma = &p->metrics[a->metric], *mb = &j->metrics[b->metric];
            cr_assert(mstr_eq(ma->name, mb->name), "point %u", r);
            cr_assert_eq(ma->kind, mb->kind);
            cr_assert_eq(ma->temporality, mb->temporality);
            cr_assert_eq(ma->monotonic, mb->monotonic);
            cr_assert_eq(a->start_ns, b->start_ns);
            cr_assert_eq(a->time_ns, b->time_ns);
            cr_assert(blob_eq(p, a->attrs.blob, j, b->attrs.blob), "point %u attributes", r);
            cr_assert_eq(a->value_type, b->value_type);
            cr_assert_eq(memcmp(&a->value, &b->value, sizeof(a->value)), 0, "point %u value", r);
            cr_assert_eq(a->count, b->count);
            cr_assert_eq(a->has_sum, b->has_sum);
            cr_assert_eq(a->sum, b->sum, "point %u sum", r);
            cr_assert_eq(a->has_min, b->has_min);
            cr_assert_eq(a->min, b->min);
            cr_assert_eq(a->has_max, b->has_max);
            cr_assert_eq(a->max, b->max);
            cr_assert(blob_eq(p, a->detail, j, b->detail), "point %u buckets/quantiles", r);
            cr_assert_eq(a->n_exemplars, b->n_exemplars);
            cr_assert(blob_eq(p, a->exemplars, j, b->exemplars), "point %u exemplars", r);
        }
    }
}

Test(loadgen_payload, pbdec_and_jsondec_read_the_two_encodings_to_the_same_rows)
{
    struct vbuf pb, js;
    vbuf_init(&pb);
    vbuf_init(&js);
    for (enum signal s = SIG_LOGS; s <= SIG_METRICS; s++) {
        struct batch *bp = batch_new(s), *bj = batch_new(s);
        arena *a = arena_new(0);
        cr_assert(bp && bj && a);
        for (size_t r = 0; r < sizeof(record_counts) / sizeof(record_counts[0]); r++) {
            for (uint64_t idx = 0; idx < 2; idx++) {
                char err[200] = "";
                gen_one(s, 13, record_counts[r], idx, GEN_PROTOBUF, &pb, NULL);
                gen_one(s, 13, record_counts[r], idx, GEN_JSON, &js, NULL);
                batch_reset(bp, s);
                batch_reset(bj, s);
                arena_reset(a);
                cr_assert_eq(pbdec_decode(s, pb.p, pb.len, bp, err, sizeof(err)), 0, "%s", err);
                cr_assert_eq(jsondec_decode(s, (const char *)js.p, js.len, a, bj, err, sizeof(err)),
                             0, "jsondec %s: %s", signal_name(s), err);
                cr_assert_eq(bj->rejected, 0, "jsondec rejected %u: %s", bj->rejected,
                             bj->reject_msg);
                same_rows(s, bp, bj, record_counts[r]);
            }
        }
        batch_free(bp);
        batch_free(bj);
        arena_free(a);
    }
    vbuf_fini(&pb);
    vbuf_fini(&js);
}

/* OTLP/JSON: records found under the signal's path. */
static size_t json_records(json_t *root, enum signal s, json_t **first)
{
    const char *k1 = s == SIG_LOGS     ? "resourceLogs"
                     : s == SIG_TRACES ? "resourceSpans"
                                       : "resourceMetrics";
    const char *k2 = s == SIG_LOGS ? "scopeLogs" : s == SIG_TRACES ? "scopeSpans" : "scopeMetrics";
    const char *k3 = s == SIG_LOGS ? "logRecords" : s == SIG_TRACES ? "spans" : "metrics";
    size_t n = 0, i, j, k;
    json_t *rs, *ss, *rec;
    *first = NULL;
    json_array_foreach(json_object_get(root, k1), i, rs)
    {
        cr_assert(json_is_object(json_object_get(rs, "resource")));
        json_array_foreach(json_object_get(rs, k2), j, ss)
        {
            cr_assert(json_is_object(json_object_get(ss, "scope")));
            json_array_foreach(json_object_get(ss, k3), k, rec)
            {
                if (*first == NULL) {
                    *first = rec;
                }
                if (s != SIG_METRICS) {
                    n++;
                    continue;
                }
                static const char *const data[] = {"gauge", "sum", "histogram",
                                                   "exponentialHistogram", "summary"};
                json_t *d = NULL;
                for (int q = 0; q < 5 && d == NULL; q++) {
                    d = json_object_get(rec, data[q]);
                }
                cr_assert_neq(d, NULL, "metric without data in JSON");
                n += json_array_size(json_object_get(d, "dataPoints"));
            }
        }
    }
    return n;
}

Test(loadgen_payload, json_encoding_carries_the_same_records)
{
    struct vbuf pb, js;
    vbuf_init(&pb);
    vbuf_init(&js);
    for (enum signal s = SIG_LOGS; s <= SIG_METRICS; s++) {
        for (size_t r = 0; r < sizeof(record_counts) / sizeof(record_counts[0]); r++) {
            uint32_t rec = record_counts[r];
            struct gen_stats sp, sj;
            gen_one(s, 5, rec, 2, GEN_PROTOBUF, &pb, &sp);
            gen_one(s, 5, rec, 2, GEN_JSON, &js, &sj);
            cr_assert_eq(memcmp(&sp, &sj, sizeof(sp)), 0, "the two encodings differ in content");
            json_error_t e;
            json_t *root = json_loadb((const char *)js.p, js.len, 0, &e);
            cr_assert_neq(root, NULL, "%s JSON: %s at %d", signal_name(s), e.text, e.position);
            json_t *first;
            cr_assert_eq(json_records(root, s, &first), rec);
            cr_assert_neq(first, NULL);
            if (s == SIG_LOGS) {
                /* the same first record as the protobuf encoding */
                LogsReq *m =
                    opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
                        NULL, pb.len, pb.p);
                Opentelemetry__Proto__Logs__V1__LogRecord *lr =
                    m->resource_logs[0]->scope_logs[0]->log_records[0];
                char t[32];
                snprintf(t, sizeof(t), "%llu", (unsigned long long)lr->time_unix_nano);
                cr_assert_str_eq(json_string_value(json_object_get(first, "timeUnixNano")), t);
                cr_assert_str_eq(json_string_value(json_object_get(json_object_get(first, "body"),
                                                                   "stringValue")),
                                 lr->body->string_value);
                cr_assert_eq(json_integer_value(json_object_get(first, "severityNumber")),
                             lr->severity_number);
                cr_assert_eq(json_array_size(json_object_get(first, "attributes")),
                             lr->n_attributes);
                if (lr->trace_id.len == 16) {
                    char hex[33];
                    for (int i = 0; i < 16; i++) {
                        snprintf(hex + 2 * i, 3, "%02x", lr->trace_id.data[i]);
                    }
                    cr_assert_str_eq(json_string_value(json_object_get(first, "traceId")), hex);
                }
                opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(
                    m, NULL);
            } else if (s == SIG_TRACES) {
                cr_assert_eq(strlen(json_string_value(json_object_get(first, "traceId"))), 32);
                cr_assert_eq(strlen(json_string_value(json_object_get(first, "spanId"))), 16);
                cr_assert(json_is_string(json_object_get(first, "startTimeUnixNano")));
                cr_assert(json_is_integer(json_object_get(first, "kind")));
            }
            json_decref(root);
        }
    }
    vbuf_fini(&pb);
    vbuf_fini(&js);
}

Test(loadgen_payload, same_inputs_same_bytes_other_seed_or_index_other_bytes)
{
    struct vbuf a, b;
    vbuf_init(&a);
    vbuf_init(&b);
    for (enum signal s = SIG_LOGS; s <= SIG_METRICS; s++) {
        for (int f = GEN_PROTOBUF; f <= GEN_JSON; f++) {
            gen_one(s, 9, 50, 4, f, &a, NULL);
            gen_one(s, 9, 50, 4, f, &b, NULL);
            cr_assert_eq(a.len, b.len);
            cr_assert_eq(memcmp(a.p, b.p, a.len), 0, "not deterministic");
            gen_one(s, 10, 50, 4, f, &b, NULL);
            cr_assert(a.len != b.len || memcmp(a.p, b.p, a.len) != 0, "seed ignored");
            gen_one(s, 9, 50, 5, f, &b, NULL);
            cr_assert(a.len != b.len || memcmp(a.p, b.p, a.len) != 0, "index ignored");
        }
    }
    struct gen_config bad = {.signal = SIG_LOGS, .seed = 1, .records = 0};
    cr_assert_eq(gen_request(&bad, 0, GEN_PROTOBUF, &a, NULL), -EINVAL);
    bad.records = 1;
    bad.signal = 9;
    cr_assert_eq(gen_request(&bad, 0, GEN_PROTOBUF, &a, NULL), -EINVAL);
    vbuf_fini(&a);
    vbuf_fini(&b);
}

/* Logs look like logs: severities in realistic shares, varied body
 * lengths, text a compressor and a token bloom can work on. */
Test(loadgen_payload, log_severities_bodies_and_gzip)
{
    struct vbuf b, gz;
    vbuf_init(&b);
    vbuf_init(&gz);
    uint64_t sev[6] = {0}, body = 0, n = 0, max_body = 0;
    for (uint64_t idx = 0; idx < 64; idx++) {
        struct gen_stats st;
        gen_one(SIG_LOGS, 1, 100, idx, GEN_PROTOBUF, &b, &st);
        for (int i = 0; i < 6; i++) {
            sev[i] += st.by_sev[i];
        }
        body += st.body_bytes;
        n += st.records;
        uint64_t avg = st.body_bytes / st.records;
        max_body = avg > max_body ? avg : max_body;
    }
    cr_assert_eq(n, 6400);
    cr_assert(sev[2] > n * 65 / 100 && sev[2] < n * 80 / 100, "INFO %llu",
              (unsigned long long)sev[2]);
    cr_assert(sev[1] > sev[3] && sev[3] > sev[4] && sev[4] > 0, "DEBUG > WARN > ERROR > 0");
    cr_assert(sev[4] < n * 6 / 100, "too many errors");
    cr_assert(body / n > 50 && body / n < 400, "avg body %llu", (unsigned long long)(body / n));

    /* gzip round trip; realistic text compresses but not absurdly */
    gen_one(SIG_LOGS, 1, 1000, 0, GEN_JSON, &b, NULL);
    cr_assert_eq(gen_gzip(b.p, b.len, 6, &gz), 0);
    cr_assert(gz.len < b.len / 3 && gz.len > b.len / 40, "ratio %zu -> %zu", b.len, gz.len);
    struct libdeflate_decompressor *d = libdeflate_alloc_decompressor();
    uint8_t *out = malloc(b.len);
    size_t got = 0;
    cr_assert_eq(libdeflate_gzip_decompress(d, gz.p, gz.len, out, b.len, &got), LIBDEFLATE_SUCCESS);
    cr_assert_eq(got, b.len);
    cr_assert_eq(memcmp(out, b.p, b.len), 0);
    free(out);
    libdeflate_free_decompressor(d);
    vbuf_fini(&b);
    vbuf_fini(&gz);
}

Test(loadgen_payload, trace_plan_sums_to_the_records)
{
    uint32_t sizes[1000];
    for (uint32_t rec = 1; rec <= 1000; rec += 37) {
        uint32_t n = gen_trace_plan(4, rec, rec, sizes), sum = 0;
        cr_assert(n >= 1 && n <= rec);
        for (uint32_t i = 0; i < n; i++) {
            cr_assert(sizes[i] >= 1 && sizes[i] <= GEN_MAX_TRACE_SPANS);
            sum += sizes[i];
        }
        cr_assert_eq(sum, rec);
    }
}
