/*
 * tempo_test.c - the Tempo HTTP API against the real daemon: traces
 * exported through the OTLP listeners (the captured vectors and requests
 * built here), then trace by id (OTLP JSON and protobuf, v1 and v2, 404,
 * 400, a trace spread over sealed and open blocks, bloom pruning seen in
 * /metrics), TraceQL searches with exact expected trace sets, tags and tag
 * values, response shapes (FACTS.md D), parse errors.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"
#include "tests/util/daemon.h"
#include "tests/util/httpc.h"

typedef Opentelemetry__Proto__Trace__V1__TracesData TracesData;
typedef Opentelemetry__Proto__Trace__V1__Span Span;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest ExportReq;

/* ---- helpers ---- */

static void post(const struct daemon *d, const char *ctype, const void *body, size_t len)
{
    char h[128];
    snprintf(h, sizeof(h), "Content-Type: %s", ctype);
    const char *hdrs[] = {h, NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", "/v1/traces", hdrs, body, len, 0, &r), 0);
    cr_assert_eq(r.status, 200, "export: %d %s", r.status, r.body ? (char *)r.body : "");
    http_resp_free(&r);
}

static void post_json(const struct daemon *d, const char *json)
{
    post(d, "application/json", json, strlen(json));
}

/* GET |path| with an optional header: status, body (owned, NUL-terminated). */
static int get(const struct daemon *d, const char *path, const char *hdr, uint8_t **body,
               size_t *len)
{
    const char *hdrs[] = {hdr, NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, hdr ? hdrs : NULL, NULL, 0, 0, &r), 0,
                 "GET %s failed", path);
    *len = r.body_len;
    *body = malloc(r.body_len + 1);
    memcpy(*body, r.body ? r.body : (uint8_t *)"", r.body_len);
    (*body)[r.body_len] = 0;
    int st = r.status;
    http_resp_free(&r);
    return st;
}

static json_t *get_json(const struct daemon *d, const char *path)
{
    uint8_t *body;
    size_t len;
    int st = get(d, path, NULL, &body, &len);
    cr_assert_eq(st, 200, "GET %s: %d %s", path, st, body);
    json_error_t je;
    json_t *j = json_loadb((const char *)body, len, 0, &je);
    cr_assert_not_null(j, "GET %s: not JSON: %s", path, body);
    free(body);
    return j;
}

static void hex(const uint8_t *p, size_t n, char *out)
{
    static const char hx[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hx[p[i] >> 4];
        out[2 * i + 1] = hx[p[i] & 15];
    }
    out[2 * n] = 0;
}

static size_t unb64(const char *s, uint8_t *out, size_t cap)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    uint32_t acc = 0;
    int bits = 0;
    size_t o = 0;
    for (; *s && *s != '='; s++) {
        const char *p = strchr(tab, *s);
        cr_assert_not_null(p, "base64 character %c", *s);
        acc = acc << 6 | (uint32_t)(p - tab);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            cr_assert_lt(o, cap);
            out[o++] = (uint8_t)(acc >> bits);
        }
    }
    return o;
}

static uint64_t metric(const struct daemon *d, const char *series)
{
    double v = daemon_metric(d, series);
    cr_assert_geq(v, 0, "metric %s missing", series);
    return (uint64_t)v;
}

/* Polls until miradb_blocks{signal="traces"} reaches |n| (deadline 30 s). */
static void wait_blocks(const struct daemon *d, uint64_t n)
{
    for (int i = 0; i < 3000; i++) {
        if (metric(d, "miradb_blocks{signal=\"traces\"}") >= n) {
            return;
        }
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
    cr_assert_fail("blocks never reached %" PRIu64, n);
}

/* A span's canonical bytes. An empty Status message (code unset, no
 * message; the JS exporter always sends one) means the same as none, and
 * the store keeps no difference between the two. */
static void span_bytes(const Span *s, uint8_t **out, size_t *n)
{
    Span c = *s;
    if (c.status != NULL && c.status->code == 0 &&
        (c.status->message == NULL || c.status->message[0] == 0)) {
        c.status = NULL;
    }
    *n = opentelemetry__proto__trace__v1__span__get_packed_size(&c);
    *out = malloc(*n + 1);
    opentelemetry__proto__trace__v1__span__pack(&c, *out);
}

/* ---- trace by id over the captured vector ---- */

/* The request's spans of trace |id|, in request order. */
static size_t req_spans(const ExportReq *rq, const uint8_t *id, const Span **out, size_t cap)
{
    size_t n = 0;
    for (size_t i = 0; i < rq->n_resource_spans; i++) {
        for (size_t k = 0; k < rq->resource_spans[i]->n_scope_spans; k++) {
            const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss =
                rq->resource_spans[i]->scope_spans[k];
            for (size_t s = 0; s < ss->n_spans; s++) {
                if (memcmp(ss->spans[s]->trace_id.data, id, 16) == 0) {
                    cr_assert_lt(n, cap);
                    out[n++] = ss->spans[s];
                }
            }
        }
    }
    return n;
}

/* Every span of |got| equals (byte for byte, re-packed) one span of |want|,
 * each used once; resources and scopes equal the request's. */
static void same_spans(const TracesData *got, const ExportReq *rq, const Span **want, size_t n)
{
    bool used[128] = {false};
    size_t seen = 0;
    for (size_t i = 0; i < got->n_resource_spans; i++) {
        const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = got->resource_spans[i];
        cr_assert_not_null(rs->resource);
        /* the vector has one resource: its bytes must come back */
        size_t a = opentelemetry__proto__resource__v1__resource__get_packed_size(rs->resource);
        size_t b = opentelemetry__proto__resource__v1__resource__get_packed_size(
            rq->resource_spans[0]->resource);
        cr_assert_eq(a, b, "resource size");
        uint64_t prev = 0;
        for (size_t k = 0; k < rs->n_scope_spans; k++) {
            const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss = rs->scope_spans[k];
            cr_assert_not_null(ss->scope);
            prev = 0;
            for (size_t s = 0; s < ss->n_spans; s++) {
                const Span *sp = ss->spans[s];
                cr_assert_geq(sp->start_time_unix_nano, prev, "spans in start order");
                prev = sp->start_time_unix_nano;
                uint8_t *gb, *wb;
                size_t gn, wn;
                span_bytes(sp, &gb, &gn);
                bool found = false;
                for (size_t w = 0; w < n && !found; w++) {
                    if (used[w] || memcmp(want[w]->span_id.data, sp->span_id.data, 8) != 0) {
                        continue;
                    }
                    span_bytes(want[w], &wb, &wn);
                    cr_assert_eq(gn, wn, "span %s: size %zu, sent %zu", sp->name, gn, wn);
                    cr_assert_eq(memcmp(gb, wb, gn), 0, "span %s differs", sp->name);
                    free(wb);
                    /* and it sits under the scope it was sent under */
                    used[w] = true;
                    found = true;
                }
                cr_assert(found, "span %s not sent", sp->name);
                free(gb);
                seen++;
            }
        }
    }
    cr_assert_eq(seen, n, "spans: %zu, sent %zu", seen, n);
}

Test(tempo, trace_by_id_returns_every_span_as_sent_in_json_and_protobuf)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    char path[512];
    snprintf(path, sizeof(path), "%s/http-protobuf-traces.pb", httpc_vectors_dir());
    size_t blen;
    uint8_t *body = httpc_read_file(path, &blen);
    cr_assert_not_null(body);
    post(&d, "application/x-protobuf", body, blen);
    /* a client retry: the same export acknowledged twice; each span still
     * comes back once (Tempo's combiner drops such repeats too) */
    post(&d, "application/x-protobuf", body, blen);
    ExportReq *rq =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__unpack(NULL, blen,
                                                                                         body);
    cr_assert_not_null(rq);

    /* distinct trace ids, in request order */
    uint8_t ids[64][16];
    size_t nid = 0, total = 0;
    for (size_t i = 0; i < rq->n_resource_spans; i++) {
        for (size_t k = 0; k < rq->resource_spans[i]->n_scope_spans; k++) {
            const Opentelemetry__Proto__Trace__V1__ScopeSpans *ss =
                rq->resource_spans[i]->scope_spans[k];
            for (size_t s = 0; s < ss->n_spans; s++) {
                total++;
                size_t j = 0;
                while (j < nid && memcmp(ids[j], ss->spans[s]->trace_id.data, 16) != 0) {
                    j++;
                }
                if (j == nid) {
                    memcpy(ids[nid++], ss->spans[s]->trace_id.data, 16);
                }
            }
        }
    }
    cr_assert_eq(nid, 10);
    cr_assert_eq(total, 57);

    size_t found = 0;
    for (size_t t = 0; t < nid; t++) {
        char h[33], p1[128], p2[128];
        hex(ids[t], 16, h);
        const Span *want[128];
        size_t n = req_spans(rq, ids[t], want, 128);

        /* v1 protobuf: TracesData */
        snprintf(p1, sizeof(p1), "/api/traces/%s", h);
        uint8_t *b1, *b2;
        size_t l1, l2;
        cr_assert_eq(get(&d, p1, "Accept: application/protobuf", &b1, &l1), 200);
        TracesData *td = opentelemetry__proto__trace__v1__traces_data__unpack(NULL, l1, b1);
        cr_assert_not_null(td, "v1 protobuf does not parse");
        same_spans(td, rq, want, n);
        found += n;
        opentelemetry__proto__trace__v1__traces_data__free_unpacked(td, NULL);

        /* v2 protobuf: TraceByIDResponse{trace = 1} wraps the same bytes */
        snprintf(p2, sizeof(p2), "/api/v2/traces/%s", h);
        cr_assert_eq(get(&d, p2, "Accept: application/protobuf", &b2, &l2), 200);
        uint8_t hdr[16];
        size_t hn = 0;
        hdr[hn++] = 0x0a;
        for (size_t v = l1;; v >>= 7) {
            hdr[hn++] = (uint8_t)(v >= 0x80 ? (v & 0x7f) | 0x80 : v);
            if (v < 0x80) {
                break;
            }
        }
        cr_assert_eq(l2, hn + l1);
        cr_assert_eq(memcmp(b2, hdr, hn), 0);
        cr_assert_eq(memcmp(b2 + hn, b1, l1), 0);
        free(b1);
        free(b2);

        /* JSON v1 {"batches":[...]} and v2 {"trace":{"resourceSpans":[...]}} agree */
        json_t *j1 = get_json(&d, p1);
        json_t *j2 = get_json(&d, p2);
        json_t *batches = json_object_get(j1, "batches");
        cr_assert(json_is_array(batches));
        cr_assert(
            json_equal(batches, json_object_get(json_object_get(j2, "trace"), "resourceSpans")));
        cr_assert_null(json_object_get(j2, "status"), "COMPLETE is omitted");
        size_t nj = 0, i;
        json_t *rs;
        json_array_foreach(batches, i, rs)
        {
            json_t *attrs = json_object_get(json_object_get(rs, "resource"), "attributes");
            cr_assert_eq(json_array_size(attrs), 14);
            cr_assert_str_eq(
                json_string_value(json_object_get(
                    json_object_get(json_array_get(attrs, 0), "value"), "stringValue")),
                "acceptance-svc");
            size_t k;
            json_t *ss;
            json_array_foreach(json_object_get(rs, "scopeSpans"), k, ss)
            {
                size_t s;
                json_t *sp;
                json_array_foreach(json_object_get(ss, "spans"), s, sp)
                {
                    uint8_t tid[32], sid[32];
                    cr_assert_eq(unb64(json_string_value(json_object_get(sp, "traceId")), tid, 32),
                                 16, "traceId is base64 of 16 bytes");
                    cr_assert_eq(memcmp(tid, ids[t], 16), 0);
                    cr_assert_eq(unb64(json_string_value(json_object_get(sp, "spanId")), sid, 32),
                                 8);
                    const Span *w = NULL;
                    for (size_t x = 0; x < n; x++) {
                        if (memcmp(want[x]->span_id.data, sid, 8) == 0) {
                            w = want[x];
                        }
                    }
                    cr_assert_not_null(w);
                    cr_assert_str_eq(json_string_value(json_object_get(sp, "name")), w->name);
                    char ts[32];
                    snprintf(ts, sizeof(ts), "%" PRIu64, w->start_time_unix_nano);
                    cr_assert_str_eq(json_string_value(json_object_get(sp, "startTimeUnixNano")),
                                     ts, "uint64 as a string");
                    static const char *const kinds[] = {NULL,
                                                        "SPAN_KIND_INTERNAL",
                                                        "SPAN_KIND_SERVER",
                                                        "SPAN_KIND_CLIENT",
                                                        "SPAN_KIND_PRODUCER",
                                                        "SPAN_KIND_CONSUMER"};
                    if (w->kind == 0) {
                        cr_assert_null(json_object_get(sp, "kind"));
                    } else {
                        cr_assert_str_eq(json_string_value(json_object_get(sp, "kind")),
                                         kinds[w->kind]);
                    }
                    cr_assert_eq(json_array_size(json_object_get(sp, "attributes")),
                                 w->n_attributes);
                    cr_assert_eq(json_array_size(json_object_get(sp, "events")), w->n_events);
                    cr_assert_eq(json_array_size(json_object_get(sp, "links")), w->n_links);
                    if (w->status != NULL && w->status->code == 2) {
                        cr_assert_str_eq(json_string_value(json_object_get(
                                             json_object_get(sp, "status"), "code")),
                                         "STATUS_CODE_ERROR");
                    }
                    nj++;
                }
            }
        }
        cr_assert_eq(nj, n);
        json_decref(j1);
        json_decref(j2);
    }
    cr_assert_eq(found, 57);

    /* unknown: 404 on both versions and both formats */
    uint8_t *b;
    size_t l;
    cr_assert_eq(get(&d, "/api/traces/0123456789abcdef0123456789abcdef", NULL, &b, &l), 404);
    free(b);
    cr_assert_eq(get(&d, "/api/v2/traces/0123456789abcdef0123456789abcdef",
                     "Accept: application/protobuf", &b, &l),
                 404);
    free(b);
    /* not hex, too long, empty: 400 */
    cr_assert_eq(get(&d, "/api/traces/xyz", NULL, &b, &l), 400);
    free(b);
    cr_assert_eq(get(&d, "/api/traces/0123456789abcdef0123456789abcdef0", NULL, &b, &l), 400);
    free(b);
    cr_assert_eq(get(&d, "/api/v2/traces/", NULL, &b, &l), 400);
    free(b);
    cr_assert_eq(metric(&d, "miradb_queries_total{endpoint=\"tempo_trace\",outcome=\"ok\"}"),
                 10 * 4 + 2);
    cr_assert_eq(
        metric(&d, "miradb_queries_total{endpoint=\"tempo_trace\",outcome=\"bad_request\"}"), 3);

    opentelemetry__proto__collector__trace__v1__export_trace_service_request__free_unpacked(rq,
                                                                                            NULL);
    free(body);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* ---- a trace spread over sealed and open blocks; bloom pruning ---- */

/* One OTLP/JSON request: |n| spans "trace span name start_s dur_ms" of
 * service |svc|. */
static void post_spans(const struct daemon *d, const char *svc, const char *const *spans, size_t n)
{
    char *buf = malloc(65536);
    size_t o = 0;
    o += (size_t)snprintf(buf + o, 65536 - o,
                          "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
                          "\"service.name\",\"value\":{\"stringValue\":\"%s\"}}]},"
                          "\"scopeSpans\":[{\"scope\":{\"name\":\"t\"},\"spans\":[",
                          svc);
    for (size_t i = 0; i < n; i++) {
        char tid[40], sid[20], name[64];
        unsigned long long st, dur;
        cr_assert_eq(sscanf(spans[i], "%39s %19s %63s %llu %llu", tid, sid, name, &st, &dur), 5);
        o += (size_t)snprintf(buf + o, 65536 - o,
                              "%s{\"traceId\":\"%s\",\"spanId\":\"%s\",\"name\":\"%s\","
                              "\"kind\":2,\"startTimeUnixNano\":\"%llu000000000\","
                              "\"endTimeUnixNano\":\"%llu\"}",
                              i ? "," : "", tid, sid, name, st,
                              st * 1000000000ull + dur * 1000000ull);
    }
    o += (size_t)snprintf(buf + o, 65536 - o, "]}]}]}");
    post_json(d, buf);
    free(buf);
}

static size_t count_json_spans(json_t *batches, char *names, size_t cap)
{
    size_t n = 0, i, k, s;
    json_t *rs, *ss, *sp;
    names[0] = 0;
    json_array_foreach(batches, i, rs)
    {
        json_array_foreach(json_object_get(rs, "scopeSpans"), k, ss)
        {
            json_array_foreach(json_object_get(ss, "spans"), s, sp)
            {
                strncat(names, json_string_value(json_object_get(sp, "name")),
                        cap - strlen(names) - 2);
                strcat(names, ",");
                n++;
            }
        }
    }
    return n;
}

Test(tempo, trace_spread_over_sealed_and_open_blocks_and_bloom_pruning)
{
    struct daemon d;
    const char *args[] = {"--block-max-age", "1s", "--shards", "1", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    static const char X[] = "00000000000000000000000000c0ffee";
    char tids[5][33];
    for (int i = 0; i < 5; i++) {
        char s0[128], s1[128], s2[128];
        snprintf(tids[i], sizeof(tids[i]), "5eed%028d", i + 1);
        snprintf(s0, sizeof(s0), "%s 10000000000000%02d a%d %d 5", tids[i], i, i, 1700000000 + i);
        snprintf(s1, sizeof(s1), "%s 20000000000000%02d b%d %d 5", tids[i], i, i, 1700000000 + i);
        snprintf(s2, sizeof(s2), "%s 30000000000000%02d x%d %d 7", X, i, i, 1700000000 + i);
        const char *sp[] = {s0, s1, s2};
        post_spans(&d, "svc", sp, 3);
        wait_blocks(&d, (uint64_t)i + 1); /* each export is sealed in a block of its own */
    }
    char s5[128];
    snprintf(s5, sizeof(s5), "%s 3000000000000005 x5 1700000010 1", X);
    const char *sp5[] = {s5};
    post_spans(&d, "svc", sp5, 1); /* stays in the open block: read-your-writes */

    char names[512];
    json_t *j = get_json(&d, "/api/traces/c0ffee"); /* leading zeros may be left out */
    cr_assert_eq(count_json_spans(json_object_get(j, "batches"), names, sizeof(names)), 6);
    cr_assert_str_eq(names, "x0,x1,x2,x3,x4,x5,", "one resource, one scope, in start order");
    cr_assert_eq(json_array_size(json_object_get(j, "batches")), 1,
                 "the same resource from six blocks is one ResourceSpans");
    json_decref(j);

    /* trace 3 lives in one sealed block: the trace-id blooms of the other
     * four say no; the open block (no bloom) is scanned */
    uint64_t c0 = metric(&d, "miradb_query_blocks_considered_total");
    uint64_t k0 = metric(&d, "miradb_query_blocks_skipped_bloom_total");
    uint64_t s0 = metric(&d, "miradb_query_blocks_scanned_total");
    uint64_t r0 = metric(&d, "miradb_query_rows_scanned_total");
    char p[96];
    snprintf(p, sizeof(p), "/api/traces/%s", tids[2]);
    j = get_json(&d, p);
    cr_assert_eq(count_json_spans(json_object_get(j, "batches"), names, sizeof(names)), 2);
    cr_assert_str_eq(names, "a2,b2,");
    json_decref(j);
    uint64_t considered = metric(&d, "miradb_query_blocks_considered_total") - c0;
    uint64_t skipped = metric(&d, "miradb_query_blocks_skipped_bloom_total") - k0;
    uint64_t scanned = metric(&d, "miradb_query_blocks_scanned_total") - s0;
    uint64_t rows = metric(&d, "miradb_query_rows_scanned_total") - r0;
    uint64_t n_open = considered - 5;
    cr_assert_geq(n_open, 1);
    cr_assert_eq(skipped, 4, "four sealed blocks skipped by their trace-id bloom");
    cr_assert_eq(scanned, 1 + n_open, "one sealed block and the open ones scanned");
    cr_assert_eq(rows, 3 + 1, "the sealed block's 3 rows and the open block's 1");
    cr_assert_eq(daemon_stop(&d), 0);
}

/* ---- search, tags and the small endpoints over HTTP ---- */

/* Three traces: 1 = api GET /users (server, ok) -> db SELECT (client, error);
 * 2 = web GET /home (server) -> api GET /users (client); 3 = api POST (server). */
static const char CORPUS[] =
    "{\"resourceSpans\":["
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"api\"}}]"
    "},"
    " \"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "  {\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"00000000000000a1\","
    "   \"name\":\"GET /users\",\"kind\":2,\"startTimeUnixNano\":\"1700000001000000000\","
    "   \"endTimeUnixNano\":\"1700000001100000000\",\"status\":{\"code\":1},"
    "   \"attributes\":[{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"200\"}}]},"
    "  {\"traceId\":\"00000000000000000000000000000002\",\"spanId\":\"00000000000000b2\","
    "   \"parentSpanId\":\"00000000000000b1\",\"name\":\"GET /users\",\"kind\":3,"
    "   \"startTimeUnixNano\":\"1700000002010000000\",\"endTimeUnixNano\":\"1700000002210000000\","
    "   \"attributes\":[{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"200\"}}]},"
    "  {\"traceId\":\"00000000000000000000000000000003\",\"spanId\":\"00000000000000c1\","
    "   \"name\":\"POST /orders\",\"kind\":2,\"startTimeUnixNano\":\"1700000003000000000\","
    "   \"endTimeUnixNano\":\"1700000003005000000\","
    "   \"attributes\":[{\"key\":\"http.method\",\"value\":{\"stringValue\":\"POST\"}}]}]}]},"
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"db\"}}]}"
    ","
    " \"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "  {\"traceId\":\"00000000000000000000000000000001\",\"spanId\":\"00000000000000a3\","
    "   \"parentSpanId\":\"00000000000000a1\",\"name\":\"SELECT users\",\"kind\":3,"
    "   \"startTimeUnixNano\":\"1700000001020000000\",\"endTimeUnixNano\":\"1700000001070000000\","
    "   \"status\":{\"code\":2,\"message\":\"boom\"},"
    "   \"attributes\":[{\"key\":\"db.system\",\"value\":{\"stringValue\":\"postgres\"}}]}]}]},"
    "{\"resource\":{\"attributes\":[{\"key\":\"service.name\",\"value\":{\"stringValue\":\"web\"}}]"
    "},"
    " \"scopeSpans\":[{\"scope\":{\"name\":\"lib\"},\"spans\":["
    "  {\"traceId\":\"00000000000000000000000000000002\",\"spanId\":\"00000000000000b1\","
    "   \"name\":\"GET /home\",\"kind\":2,\"startTimeUnixNano\":\"1700000002000000000\","
    "   \"endTimeUnixNano\":\"1700000002300000000\",\"status\":{\"code\":2},"
    "   \"attributes\":[{\"key\":\"http.status_code\",\"value\":{\"intValue\":\"500\"}}]}]}]}"
    "]}";

/* traceIDs of /api/search?q=<q>&<extra> joined by ','. */
static void search_ids(const struct daemon *d, const char *q, const char *extra, char *out,
                       size_t cap)
{
    char enc[1024], path[1400];
    httpc_url_enc(enc, sizeof(enc), q);
    snprintf(path, sizeof(path), "/api/search?q=%s%s%s", enc, extra ? "&" : "", extra ? extra : "");
    json_t *j = get_json(d, path);
    json_t *traces = json_object_get(j, "traces");
    cr_assert(json_is_array(traces), "%s: traces must be an array", q);
    out[0] = 0;
    size_t i;
    json_t *t;
    json_array_foreach(traces, i, t)
    {
        json_t *sets = json_object_get(t, "spanSets");
        cr_assert(json_is_array(sets));
        size_t k;
        json_t *ss;
        json_array_foreach(sets, k, ss)
        {
            cr_assert(json_is_array(json_object_get(ss, "spans")), "spans always present");
        }
        strncat(out, json_string_value(json_object_get(t, "traceID")), cap - strlen(out) - 2);
        if (i + 1 < json_array_size(traces)) {
            strcat(out, ",");
        }
    }
    json_decref(j);
}

static void expect_search(const struct daemon *d, const char *q, const char *extra,
                          const char *want)
{
    char got[256];
    search_ids(d, q, extra, got, sizeof(got));
    cr_expect_str_eq(got, want, "q=%s %s", q, extra ? extra : "");
}

static void expect_status(const struct daemon *d, const char *path, int status,
                          const char *body_has)
{
    uint8_t *b;
    size_t l;
    int st = get(d, path, NULL, &b, &l);
    cr_expect_eq(st, status, "%s: %d %s", path, st, b);
    if (body_has != NULL) {
        cr_expect(strstr((char *)b, body_has) != NULL, "%s: %s lacks %s", path, b, body_has);
    }
    free(b);
}

Test(tempo, search_tags_and_errors_over_http)
{
    struct daemon d;
    cr_assert_eq(daemon_start(&d, NULL, NULL), 0);
    /* read-your-writes: searched right after the export is acknowledged */
    post_json(&d, CORPUS);
    expect_search(&d, "{}", NULL, "3,2,1");
    expect_search(&d, "{ status = error }", NULL, "2,1");
    expect_search(&d, "{ kind = client && span.http.status_code = 200 }", NULL, "2");
    expect_search(&d, "{ resource.service.name = \"db\" }", NULL, "1");
    expect_search(&d, "{ .db.system =~ \"post.*\" }", NULL, "1");
    expect_search(&d, "{ duration > 250ms }", NULL, "2");
    expect_search(&d, "{ rootServiceName = \"web\" }", NULL, "2");
    expect_search(&d, "{ rootName = \"GET /users\" }", NULL, "1");
    expect_search(&d, "{ traceDuration < 10ms }", NULL, "3");
    expect_search(&d, "{ kind = server } > { kind = client }", NULL, "2,1");
    expect_search(&d, "{ } | count() > 1", NULL, "2,1");
    expect_search(&d, "{}", "limit=1", "3");
    expect_search(&d, "{}", "start=1700000002&end=1700000003", "3,2");
    expect_search(&d, "", "start=1700000000&end=1700000002", "2,1"); /* no q: every trace */

    /* legacy parameters: tags (case-insensitive substring, regex characters
     * literal), minDuration/maxDuration */
    expect_search(&d, "", "tags=db.system%3DPOSTGRES", "1");
    expect_search(&d, "", "tags=service.name%3D%22EB%22", "2");
    expect_search(&d, "", "tags=service.name%3D.%2A", "");
    expect_search(&d, "", "minDuration=100ms&maxDuration=250ms", "2,1");
    expect_status(&d, "/api/search?minDuration=2s&maxDuration=1s", 400, "maxDuration");

    /* shape */
    json_t *j = get_json(&d, "/api/search?q=%7B%20name%20%3D%20%22GET%20%2Fhome%22%20%7D&spss=2");
    json_t *t = json_array_get(json_object_get(j, "traces"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(t, "traceID")), "2");
    cr_assert_str_eq(json_string_value(json_object_get(t, "rootServiceName")), "web");
    cr_assert_str_eq(json_string_value(json_object_get(t, "rootTraceName")), "GET /home");
    cr_assert_str_eq(json_string_value(json_object_get(t, "startTimeUnixNano")),
                     "1700000002000000000");
    cr_assert_eq(json_integer_value(json_object_get(t, "durationMs")), 300);
    json_t *sp = json_array_get(json_object_get(json_object_get(t, "spanSet"), "spans"), 0);
    cr_assert_str_eq(json_string_value(json_object_get(sp, "spanID")), "00000000000000b1");
    cr_assert_str_eq(json_string_value(json_object_get(sp, "durationNanos")), "300000000");
    cr_assert(json_is_object(json_object_get(j, "metrics")));
    json_decref(j);

    /* errors: 400 with the position, plain text */
    expect_status(&d, "/api/search?q=%7B%20name%20%3D%20%7D", 400, "parse error at line 1, col");
    expect_status(&d, "/api/search?q=%7B%7D&limit=0", 400, "limit");
    expect_status(&d, "/api/search?q=%7B%7D&spss=101", 400, "spss");
    expect_status(&d, "/api/search?q=%7B%7D&start=1700000000", 400, "start");
    expect_status(&d, "/api/search?q=%7B%7D&start=1700000002&end=1700000001", 400, "end");
    expect_status(&d, "/api/search?q=%7B%7D&tags=a%3Db", 400, "exclusive");

    /* tags */
    j = get_json(&d, "/api/search/tags");
    char *s = json_dumps(json_object_get(j, "tagNames"), JSON_COMPACT);
    cr_assert_str_eq(s, "[\"db.system\",\"http.method\",\"http.status_code\",\"service.name\"]");
    free(s);
    json_decref(j);
    j = get_json(&d, "/api/v2/search/tags?scope=resource");
    s = json_dumps(json_object_get(j, "scopes"), JSON_COMPACT);
    cr_assert_str_eq(s, "[{\"name\":\"resource\",\"tags\":[\"service.name\"]}]");
    free(s);
    json_decref(j);
    expect_status(&d, "/api/v2/search/tags?scope=nope", 400, "scope");
    j = get_json(&d, "/api/search/tag/service.name/values");
    s = json_dumps(json_object_get(j, "tagValues"), JSON_COMPACT);
    cr_assert_str_eq(s, "[\"api\",\"db\",\"web\"]");
    free(s);
    json_decref(j);
    /* Grafana double-encodes the name; an unparsable q is ignored */
    j = get_json(&d, "/api/v2/search/tag/resource%252Eservice%252Ename/values?q=%7B%20name%20%3D");
    s = json_dumps(json_object_get(j, "tagValues"), JSON_COMPACT);
    cr_assert_str_eq(s, "[{\"type\":\"string\",\"value\":\"api\"},{\"type\":\"string\",\"value\":"
                        "\"db\"},{\"type\":\"string\",\"value\":\"web\"}]");
    free(s);
    json_decref(j);
    j = get_json(&d, "/api/v2/search/tag/span.http.status_code/values?q=%7Bkind%3Dclient%7D");
    s = json_dumps(json_object_get(j, "tagValues"), JSON_COMPACT);
    cr_assert_str_eq(s, "[{\"type\":\"int\",\"value\":\"200\"}]");
    free(s);
    json_decref(j);
    expect_status(&d, "/api/v2/search/tag/not%20one/values", 400, "identifier");

    /* health check and build info */
    expect_status(&d, "/api/echo", 200, "echo");
    j = get_json(&d, "/api/status/buildinfo");
    cr_assert_str_eq(json_string_value(json_object_get(j, "version")), "2.7.0");
    json_decref(j);

    /* /metrics: queries by endpoint and outcome */
    cr_assert_eq(metric(&d, "miradb_queries_total{endpoint=\"tempo_search\",outcome=\"ok\"}"), 19);
    cr_assert_eq(
        metric(&d, "miradb_queries_total{endpoint=\"tempo_search\",outcome=\"bad_request\"}"), 7);
    cr_assert_eq(metric(&d, "miradb_queries_total{endpoint=\"tempo_tags\",outcome=\"ok\"}"), 5);
    cr_assert_eq(
        metric(&d, "miradb_queries_total{endpoint=\"tempo_tags\",outcome=\"bad_request\"}"), 2);
    cr_assert_eq(metric(&d, "miradb_query_duration_seconds_count{endpoint=\"tempo_search\"}"), 26);
    cr_assert_eq(daemon_stop(&d), 0);
}

/* ---- a large trace streams out; limits end queries with clear errors ---- */

Test(tempo, large_trace_streams_in_pieces_and_limits_answer_clearly)
{
    struct daemon d;
    /* A generous timeout: under ASan on a loaded 2-core machine the 20000
     * spans can take longer to render than the 30 s default allows. */
    const char *args[] = {"--query-max-rows", "25000", "--query-timeout", "300s", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    /* 4 exports x 5000 spans of one trace, each span ~150 bytes of JSON out */
    size_t cap = 5000 * 400 + 1024;
    char *buf = malloc(cap);
    for (int r = 0; r < 4; r++) {
        size_t o = (size_t)snprintf(buf, cap,
                                    "{\"resourceSpans\":[{\"resource\":{\"attributes\":[{\"key\":"
                                    "\"service.name\",\"value\":{\"stringValue\":\"big\"}}]},"
                                    "\"scopeSpans\":[{\"scope\":{\"name\":\"s\"},\"spans\":[");
        for (int i = 0; i < 5000; i++) {
            o += (size_t)snprintf(
                buf + o, cap - o,
                "%s{\"traceId\":\"0000000000000000000000000000b16b\",\"spanId\":\"%016x\","
                "\"name\":\"op-%d\",\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
                "\"attributes\":[{\"key\":\"pad\",\"value\":{\"stringValue\":"
                "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}}]}",
                i ? "," : "", r * 5000 + i + 1, i,
                1700000000000000000ull + (unsigned)(r * 5000 + i),
                1700000000000000100ull + (unsigned)(r * 5000 + i));
        }
        snprintf(buf + o, cap - o, "]}]}]}");
        post_json(&d, buf);
    }
    free(buf);

    /* JSON: chunked, 20000 spans, in start order */
    struct http_resp r;
    cr_assert_eq(httpc_request(d.http_port, "GET", "/api/traces/b16b", NULL, NULL, 0, 0, &r), 0);
    cr_assert_eq(r.status, 200);
    char hv[64];
    cr_assert_not_null(http_resp_header(&r, "Transfer-Encoding", hv, sizeof(hv)),
                       "a large trace is streamed (chunked), not sent whole");
    cr_assert_gt(r.body_len, 2u << 20);
    json_t *j = json_loadb((const char *)r.body, r.body_len, 0, NULL);
    cr_assert_not_null(j, "the pieces join into one JSON document");
    json_t *spans = json_object_get(
        json_array_get(
            json_object_get(json_array_get(json_object_get(j, "batches"), 0), "scopeSpans"), 0),
        "spans");
    cr_assert_eq(json_array_size(json_object_get(j, "batches")), 1);
    cr_assert_eq(json_array_size(spans), 20000);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(spans, 19999), "name")),
                     "op-4999");
    json_decref(j);
    http_resp_free(&r);

    /* protobuf v2 streams too; the length prefix written first is right */
    const char *pb[] = {"Accept: application/protobuf", NULL};
    cr_assert_eq(httpc_request(d.http_port, "GET", "/api/v2/traces/b16b", pb, NULL, 0, 0, &r), 0);
    cr_assert_eq(r.status, 200);
    size_t hn = 1, len = 0;
    for (int sh = 0;; sh += 7) {
        uint8_t b = r.body[hn++];
        len |= (size_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) {
            break;
        }
    }
    cr_assert_eq(r.body[0], 0x0a);
    cr_assert_eq(hn + len, r.body_len);
    TracesData *td = opentelemetry__proto__trace__v1__traces_data__unpack(NULL, len, r.body + hn);
    cr_assert_not_null(td);
    cr_assert_eq(td->n_resource_spans, 1);
    cr_assert_eq(td->resource_spans[0]->scope_spans[0]->n_spans, 20000);
    opentelemetry__proto__trace__v1__traces_data__free_unpacked(td, NULL);
    http_resp_free(&r);

    /* --query-max-rows 25000: trace by id read 20000 rows; a search reads
     * them twice (seed spans, then the whole candidate trace): ended */
    expect_status(&d, "/api/search?q=%7B%20name%20%3D%20%22op-1%22%20%7D", 422, "--query-max-rows");
    cr_assert_eq(metric(&d, "miradb_queries_total{endpoint=\"tempo_search\",outcome=\"limit\"}"),
                 1);
    cr_assert_eq(daemon_stop(&d), 0);
}

Test(tempo, query_memory_limit_ends_a_search_clearly)
{
    struct daemon d;
    const char *args[] = {"--query-memory", "1MiB", NULL};
    cr_assert_eq(daemon_start(&d, NULL, args), 0);
    /* 20000 traces of one span: a search for all of them needs a candidate
     * table far above 1 MiB; a trace by id needs a few bytes */
    size_t cap = 20000 * 200 + 1024;
    char *buf = malloc(cap);
    size_t o = (size_t)snprintf(buf, cap,
                                "{\"resourceSpans\":[{\"resource\":{},\"scopeSpans\":[{"
                                "\"spans\":[");
    for (int i = 0; i < 20000; i++) {
        o += (size_t)snprintf(buf + o, cap - o,
                              "%s{\"traceId\":\"%032x\",\"spanId\":\"0000000000000001\","
                              "\"name\":\"n\",\"startTimeUnixNano\":\"%d\",\"endTimeUnixNano\":"
                              "\"%d\"}",
                              i ? "," : "", i + 1, 1000 + i, 2000 + i);
    }
    snprintf(buf + o, cap - o, "]}]}]}");
    post_json(&d, buf);
    free(buf);
    expect_status(&d, "/api/search?q=%7B%7D", 422, "--query-memory");
    cr_assert_eq(metric(&d, "miradb_queries_total{endpoint=\"tempo_search\",outcome=\"limit\"}"),
                 1);
    json_t *j = get_json(&d, "/api/traces/4e20"); /* trace 20000 */
    char names[64];
    cr_assert_eq(count_json_spans(json_object_get(j, "batches"), names, sizeof(names)), 1);
    json_decref(j);
    cr_assert_eq(daemon_stop(&d), 0);
}
