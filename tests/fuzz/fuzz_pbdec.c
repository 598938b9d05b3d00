/*
 * fuzz_pbdec.c - libFuzzer target for the hand-written protobuf decoder.
 *
 * Every input is decoded as each of the three Export requests into one reused
 * batch. A refusal must be -EPROTO with a reason and leave the batch empty.
 * An acceptance must produce well-formed attribute blobs, and protobuf-c must
 * accept the same bytes (pbdec is stricter, never laxer: it refuses deep
 * nesting and invalid UTF-8, which protobuf-c lets through; protobuf-c is only
 * run on accepted input, so its unbounded recursion cannot be reached) and
 * find the same numbers of resources, scopes, metrics and records.
 *
 * Seeds: tests/fuzz/corpus/pbdec/ (the captured vectors and a few hand-made
 * requests).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "proto/pbdec.h"
#include "storage/batch.h"
#include "storage/val.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct counts {
    size_t resources, scopes, metrics, rows;
};

static void die(const char *what, enum signal s)
{
    fprintf(stderr, "fuzz_pbdec: %s (%s)\n", what, signal_name(s));
    abort();
}

static void check_attrs(const struct batch *b, struct attrs a, enum signal s)
{
    if ((size_t)a.blob.off + a.blob.len > b->heap.len) {
        die("attribute blob past the heap", s);
    }
    /* batch_blob() on a never-grown heap is NULL + 0, which UBSan refuses. */
    const uint8_t *p = a.blob.len != 0 ? batch_blob(b, a.blob) : (const uint8_t *)"";
    if (val_check_attrs(p, a.blob.len, a.count) != 0) {
        die("malformed attribute blob", s);
    }
}

static void check_batch(const struct batch *b, enum signal s)
{
    for (uint32_t i = 0; i < b->n_resources; i++) {
        check_attrs(b, b->resources[i].attrs, s);
    }
    for (uint32_t i = 0; i < b->n_scopes; i++) {
        check_attrs(b, b->scopes[i].attrs, s);
        if (b->scopes[i].resource >= b->n_resources) {
            die("scope names a missing resource", s);
        }
    }
    for (uint32_t i = 0; i < b->n_metrics; i++) {
        check_attrs(b, b->metrics[i].metadata, s);
    }
    for (uint32_t i = 0; i < b->n_rows; i++) {
        switch (s) {
        case SIG_LOGS:
            check_attrs(b, b->logs[i].attrs, s);
            if (b->logs[i].scope >= b->n_scopes) {
                die("log names a missing scope", s);
            }
            break;
        case SIG_TRACES:
            check_attrs(b, b->spans[i].attrs, s);
            if (b->spans[i].scope >= b->n_scopes) {
                die("span names a missing scope", s);
            }
            break;
        case SIG_METRICS:
            check_attrs(b, b->points[i].attrs, s);
            if (b->points[i].metric >= b->n_metrics) {
                die("point names a missing metric", s);
            }
            break;
        }
    }
}

static size_t metric_points(const Opentelemetry__Proto__Metrics__V1__Metric *m)
{
    switch (m->data_case) {
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE:
        return m->gauge->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUM:
        return m->sum->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_HISTOGRAM:
        return m->histogram->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_EXPONENTIAL_HISTOGRAM:
        return m->exponential_histogram->n_data_points;
    case OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_SUMMARY:
        return m->summary->n_data_points;
    default:
        return 0;
    }
}

static bool has_oneof(const ProtobufCMessageDescriptor *d)
{
    for (unsigned i = 0; i < d->n_fields; i++) {
        if (d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
            return true;
        }
    }
    return false;
}

static bool rd_varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int i = 0; i < 10 && *p < end; i++) {
        uint8_t c = *(*p)++;
        *v |= (uint64_t)(c & 0x7f) << (7 * i);
        if (c < 0x80) {
            return true;
        }
    }
    return false;
}

/*
 * protobuf-c 1.4.1 refuses valid input in which a singular sub-message that
 * holds a oneof (AnyValue: LogRecord.body, KeyValue.value) occurs more than
 * once and one copy is empty (its merge_messages() fails); pbdec merges
 * such copies as protobuf specifies. True when |p| holds that construct
 * anywhere, found by walking the wire bytes with protobuf-c's descriptors.
 * Only called on input pbdec accepted, so nesting is bounded.
 */
static bool has_merged_oneof_message(const ProtobufCMessageDescriptor *d, const uint8_t *p,
                                     size_t n, int depth)
{
    const uint8_t *end = p + n;
    unsigned seen[32] = {0};

    if (depth > 400) {
        return true;
    }
    while (p < end) {
        uint64_t tag, v;
        if (!rd_varint(&p, end, &tag)) {
            return false;
        }
        switch (tag & 7) {
        case 0:
            if (!rd_varint(&p, end, &v)) {
                return false;
            }
            continue;
        case 1:
            p += 8;
            continue;
        case 5:
            p += 4;
            continue;
        case 2:
            break;
        default:
            return false;
        }
        if (!rd_varint(&p, end, &v) || v > (uint64_t)(end - p)) {
            return false;
        }
        const uint8_t *sub = p;
        p += v;
        const ProtobufCFieldDescriptor *f =
            protobuf_c_message_descriptor_get_field(d, (unsigned)(tag >> 3));
        if (f == NULL || f->type != PROTOBUF_C_TYPE_MESSAGE) {
            continue;
        }
        const ProtobufCMessageDescriptor *sd = f->descriptor;
        unsigned idx = (unsigned)(f - d->fields);
        if (f->label != PROTOBUF_C_LABEL_REPEATED && !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
            idx < 32 && ++seen[idx] > 1 && has_oneof(sd)) {
            return true;
        }
        if (has_merged_oneof_message(sd, sub, (size_t)v, depth + 1)) {
            return true;
        }
    }
    return false;
}

static const ProtobufCMessageDescriptor *request_descriptor(enum signal s)
{
    switch (s) {
    case SIG_LOGS:
        return &opentelemetry__proto__collector__logs__v1__export_logs_service_request__descriptor;
    case SIG_TRACES:
        return &opentelemetry__proto__collector__trace__v1__export_trace_service_request__descriptor;
    case SIG_METRICS:
        return &opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__descriptor;
    }
    return NULL;
}

/* protobuf-c's view of the same bytes; false if it refuses them. */
static bool reference_counts(enum signal s, const uint8_t *data, size_t size, struct counts *c)
{
    memset(c, 0, sizeof(*c));
    switch (s) {
    case SIG_LOGS: {
        Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest *m =
            opentelemetry__proto__collector__logs__v1__export_logs_service_request__unpack(
                NULL, size, data);
        if (m == NULL) {
            return false;
        }
        c->resources = m->n_resource_logs;
        for (size_t i = 0; i < m->n_resource_logs; i++) {
            c->scopes += m->resource_logs[i]->n_scope_logs;
            for (size_t j = 0; j < m->resource_logs[i]->n_scope_logs; j++) {
                c->rows += m->resource_logs[i]->scope_logs[j]->n_log_records;
            }
        }
        opentelemetry__proto__collector__logs__v1__export_logs_service_request__free_unpacked(m,
                                                                                              NULL);
        return true;
    }
    case SIG_TRACES: {
        Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest *m =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(
                NULL, size, data);
        if (m == NULL) {
            return false;
        }
        c->resources = m->n_resource_spans;
        for (size_t i = 0; i < m->n_resource_spans; i++) {
            c->scopes += m->resource_spans[i]->n_scope_spans;
            for (size_t j = 0; j < m->resource_spans[i]->n_scope_spans; j++) {
                c->rows += m->resource_spans[i]->scope_spans[j]->n_spans;
            }
        }
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(
            m, NULL);
        return true;
    }
    case SIG_METRICS: {
        Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest *m =
            opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__unpack(
                NULL, size, data);
        if (m == NULL) {
            return false;
        }
        c->resources = m->n_resource_metrics;
        for (size_t i = 0; i < m->n_resource_metrics; i++) {
            const Opentelemetry__Proto__Metrics__V1__ResourceMetrics *rm = m->resource_metrics[i];
            c->scopes += rm->n_scope_metrics;
            for (size_t j = 0; j < rm->n_scope_metrics; j++) {
                c->metrics += rm->scope_metrics[j]->n_metrics;
                for (size_t k = 0; k < rm->scope_metrics[j]->n_metrics; k++) {
                    c->rows += metric_points(rm->scope_metrics[j]->metrics[k]);
                }
            }
        }
        opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__free_unpacked(
            m, NULL);
        return true;
    }
    }
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct batch *b;
    char err[256];

    if (b == NULL) {
        b = batch_new(SIG_LOGS);
        if (b == NULL) {
            abort();
        }
    }
    for (int si = SIG_LOGS; si <= SIG_METRICS; si++) {
        enum signal s = (enum signal)si;
        batch_reset(b, s);
        int rc = pbdec_decode(s, data, size, b, err, sizeof(err));
        if (rc != 0) {
            if (rc != -EPROTO) {
                die("error other than -EPROTO", s);
            }
            if (err[0] == '\0' || strchr(err, '\n') != NULL) {
                die("refusal without a one-line reason", s);
            }
            if (b->n_rows != 0 || b->n_resources != 0 || b->n_scopes != 0 || b->n_metrics != 0 ||
                b->heap.len != 0) {
                die("a refused request left rows behind", s);
            }
            continue;
        }
        check_batch(b, s);
        struct counts c;
        if (!reference_counts(s, data, size, &c)) {
            if (has_merged_oneof_message(request_descriptor(s), data, size, 0)) {
                continue; /* protobuf-c's bug, not ours (see above) */
            }
            die("pbdec accepted what protobuf-c refuses", s);
        }
        if (c.resources != b->n_resources || c.scopes != b->n_scopes || c.rows != b->n_rows ||
            (s == SIG_METRICS && c.metrics != b->n_metrics)) {
            fprintf(stderr, "pbdec %u/%u/%u/%u protobuf-c %zu/%zu/%zu/%zu\n", b->n_resources,
                    b->n_scopes, b->n_metrics, b->n_rows, c.resources, c.scopes, c.metrics, c.rows);
            die("record counts differ from protobuf-c", s);
        }
    }
    return 0;
}
