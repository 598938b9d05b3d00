/*
 * deepval_test.c - AnyValues nested as deep as ingest accepts (VAL_MAX_DEPTH
 * levels, a body or attribute value being level 1) read back from every
 * endpoint that renders them: /api/v1/logs, Loki query_range (the line of a
 * kvlist body), /api/traces/<id> and /api/v2/traces/<id> as JSON and
 * protobuf, and /api/search with select(). Each answer must be 200, parse,
 * and carry the value exactly (depth, keys and leaf); from open blocks and
 * again from sealed ones. One level more is refused at ingest with 400.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "opentelemetry/proto/trace/v1/trace.pb-c.h"
#include "storage/val.h"
#include "tests/util/daemon.h"
#include "tests/util/httpc.h"
#include "tests/util/tclock.h"

typedef Opentelemetry__Proto__Common__V1__AnyValue AnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue KeyValue;
typedef Opentelemetry__Proto__Trace__V1__TracesData TracesData;

#define T0 UINT64_C(1700000000) /* seconds */
#define NS UINT64_C(1000000000)
#define MAXD VAL_MAX_DEPTH

static const char *const ARGS[] = {"--shards", "1", "--io-threads", "1", "--block-max-age",
                                   "1s",       NULL};

/* ---- OTLP/JSON values ---- */

/* A growable string. */
struct sb {
    char *p;
    size_t n, cap;
};

static void sb_add(struct sb *b, const char *s)
{
    size_t k = strlen(s);
    if (b->n + k + 1 > b->cap) {
        b->cap = (b->n + k + 1) * 2;
        b->p = realloc(b->p, b->cap);
        cr_assert_not_null(b->p);
    }
    memcpy(b->p + b->n, s, k + 1);
    b->n += k;
}

/*
 * An AnyValue of |levels| levels: levels - 1 kvlists (or arrays), each
 * holding one member (key "k<level>"), around |leaf| at the last level;
 * leaf NULL: the last level is an empty kvlist (array) itself.
 */
static void json_nest(struct sb *b, int levels, bool kv, const char *leaf)
{
    char key[64];
    for (int i = 1; i < levels; i++) {
        if (kv) {
            snprintf(key, sizeof(key),
                     "{\"kvlistValue\":{\"values\":[{\"key\":\"k%d\",\"value\":", i);
            sb_add(b, key);
        } else {
            sb_add(b, "{\"arrayValue\":{\"values\":[");
        }
    }
    if (leaf != NULL) {
        sb_add(b, leaf);
    } else {
        sb_add(b, kv ? "{\"kvlistValue\":{\"values\":[]}}" : "{\"arrayValue\":{\"values\":[]}}");
    }
    for (int i = 1; i < levels; i++) {
        sb_add(b, kv ? "}]}}" : "]}}");
    }
}

static void json_attr(struct sb *b, const char *key, int levels, bool kv, const char *leaf)
{
    sb_add(b, "{\"key\":\"");
    sb_add(b, key);
    sb_add(b, "\",\"value\":");
    json_nest(b, levels, kv, leaf);
    sb_add(b, "}");
}

/*
 * Walks an OTLP/JSON AnyValue down its only members; returns its levels and
 * sets *leaf to the innermost AnyValue. Every level must be the kind
 * asked for (kvlist members keyed k1, k2, ...) until the innermost.
 */
static int json_walk(json_t *v, bool kv, json_t **leaf)
{
    const char *kind = kv ? "kvlistValue" : "arrayValue";
    int n = 1;
    for (;;) {
        cr_assert(json_is_object(v), "level %d is not an AnyValue object", n);
        json_t *c = json_object_get(v, kind);
        if (c == NULL) {
            break;
        }
        json_t *vals = json_object_get(c, "values");
        if (vals == NULL || json_array_size(vals) == 0) {
            break; /* the empty container at the last level */
        }
        cr_assert_eq(json_array_size(vals), 1, "level %d: one member", n);
        json_t *m = json_array_get(vals, 0);
        if (kv) {
            char key[16];
            snprintf(key, sizeof(key), "k%d", n);
            cr_assert_str_eq(json_string_value(json_object_get(m, "key")), key);
            m = json_object_get(m, "value");
        }
        v = m;
        n++;
    }
    *leaf = v;
    return n;
}

/* The attribute |key| of an OTLP/JSON attribute list, checked to be |levels|
 * deep with |leaf_key| = |leaf_val| (as a string) at the bottom; leaf_key
 * NULL: the bottom is an empty container. */
static void json_expect_attr(json_t *attrs, const char *key, bool kv, const char *leaf_key,
                             const char *leaf_val)
{
    cr_assert(json_is_array(attrs), "attributes are an array");
    size_t i;
    json_t *a;
    json_array_foreach(attrs, i, a)
    {
        if (strcmp(json_string_value(json_object_get(a, "key")), key) != 0) {
            continue;
        }
        json_t *leaf;
        cr_assert_eq(json_walk(json_object_get(a, "value"), kv, &leaf), MAXD, "%s: depth", key);
        if (leaf_key != NULL) {
            cr_assert_str_eq(json_string_value(json_object_get(leaf, leaf_key)), leaf_val,
                             "%s: leaf", key);
        } else {
            json_t *c = json_object_get(leaf, kv ? "kvlistValue" : "arrayValue");
            cr_assert(json_is_object(c), "%s: the last level is an empty container", key);
            cr_assert_eq(json_array_size(json_object_get(c, "values")), 0);
        }
        return;
    }
    cr_assert_fail("attribute %s missing", key);
}

/* ---- HTTP ---- */

static int post(const struct daemon *d, const char *path, const char *ctype, const void *body,
                size_t len, char *msg, size_t cap)
{
    char h[128];
    snprintf(h, sizeof(h), "Content-Type: %s", ctype);
    const char *hdrs[] = {h, NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "POST", path, hdrs, body, len, 0, &r), 0);
    snprintf(msg, cap, "%.*s", (int)r.body_len, r.body ? (char *)r.body : "");
    int st = r.status;
    http_resp_free(&r);
    return st;
}

/* GET |path|: the answer must be 200; returns its body (owned) and length. */
static uint8_t *get_ok(const struct daemon *d, const char *path, const char *hdr, size_t *len)
{
    const char *hdrs[] = {hdr, NULL};
    struct http_resp r;
    cr_assert_eq(httpc_request(d->http_port, "GET", path, hdr ? hdrs : NULL, NULL, 0, 0, &r), 0,
                 "GET %s failed", path);
    uint8_t *b = malloc(r.body_len + 1);
    memcpy(b, r.body ? r.body : (uint8_t *)"", r.body_len);
    b[r.body_len] = 0;
    *len = r.body_len;
    int st = r.status;
    http_resp_free(&r);
    cr_assert_eq(st, 200, "GET %s: %d %.300s", path, st, b);
    return b;
}

static json_t *get_json(const struct daemon *d, const char *path, const char *hdr)
{
    size_t len;
    uint8_t *b = get_ok(d, path, hdr, &len);
    json_error_t je;
    json_t *j = json_loadb((const char *)b, len, 0, &je);
    cr_assert_not_null(j, "GET %s: not JSON (%s at %d): %.300s", path, je.text, je.position, b);
    free(b);
    return j;
}

/* Polls /metrics (deadline 30 s) until |series| reaches |n|. */
static void wait_metric(const struct daemon *d, const char *series, double n)
{
    long long dl = tclock_ms() + 30000;
    double v;
    while ((v = daemon_metric(d, series)) < n) {
        cr_assert_lt(tclock_ms(), dl, "%s stuck at %g, want %g", series, v, n);
        struct timespec ts = {0, 20 * 1000000};
        nanosleep(&ts, NULL);
    }
}

/* ---- logs ---- */

/* One record: a kvlist body and kvlist/array attributes of |levels|. */
static char *log_export(int levels)
{
    struct sb b = {0};
    char ts[64];
    sb_add(&b, "{\"resourceLogs\":[{\"resource\":{\"attributes\":["
               "{\"key\":\"service.name\",\"value\":{\"stringValue\":\"deep\"}},");
    json_attr(&b, "res.kv", levels, true, "{\"stringValue\":\"res-leaf\"}");
    snprintf(ts, sizeof(ts), "%" PRIu64, T0 * NS);
    sb_add(&b, "]},\"scopeLogs\":[{\"scope\":{\"name\":\"s\",\"attributes\":[");
    json_attr(&b, "scope.arr", levels, false, "{\"stringValue\":\"scope-leaf\"}");
    sb_add(&b, "]},\"logRecords\":[{\"timeUnixNano\":\"");
    sb_add(&b, ts);
    sb_add(&b, "\",\"body\":");
    json_nest(&b, levels, true, "{\"stringValue\":\"deep-leaf\"}");
    sb_add(&b, ",\"attributes\":[");
    json_attr(&b, "kv", levels, true, NULL);
    sb_add(&b, ",");
    json_attr(&b, "arr", levels, false, "{\"intValue\":\"42\"}");
    sb_add(&b, ",");
    json_attr(&b, "arr_e", levels, false, NULL);
    sb_add(&b, "]}]}]}]}");
    return b.p;
}

static void check_logs(const struct daemon *d)
{
    char enc[256], path[1024];
    httpc_url_enc(enc, sizeof(enc), "{service_name=\"deep\"}");

    /* native records: the OTLP/JSON values */
    snprintf(path, sizeof(path), "/api/v1/logs?query=%s&start=%" PRIu64 "&end=%" PRIu64, enc,
             (T0 - 60) * NS, (T0 + 60) * NS);
    json_t *j = get_json(d, path, NULL);
    json_t *recs = json_object_get(json_object_get(j, "data"), "records");
    cr_assert_eq(json_array_size(recs), 1);
    json_t *rec = json_array_get(recs, 0);
    json_t *leaf;
    cr_assert_eq(json_walk(json_object_get(rec, "body"), true, &leaf), MAXD, "body depth");
    cr_assert_str_eq(json_string_value(json_object_get(leaf, "stringValue")), "deep-leaf");
    json_t *attrs = json_object_get(rec, "attributes");
    cr_assert_eq(json_array_size(attrs), 3);
    json_expect_attr(attrs, "kv", true, NULL, NULL);
    json_expect_attr(attrs, "arr", false, "intValue", "42");
    json_expect_attr(attrs, "arr_e", false, NULL, NULL);
    json_expect_attr(json_object_get(json_object_get(rec, "resource"), "attributes"), "res.kv",
                     true, "stringValue", "res-leaf");
    json_expect_attr(json_object_get(json_object_get(rec, "scope"), "attributes"), "scope.arr",
                     false, "stringValue", "scope-leaf");
    json_decref(j);

    /* Loki: the line of a kvlist body is its JSON; plain and categorized */
    for (int cat = 0; cat < 2; cat++) {
        snprintf(path, sizeof(path),
                 "/loki/api/v1/query_range?query=%s&start=%" PRIu64 "&end=%" PRIu64
                 "&limit=10&direction=forward",
                 enc, (T0 - 60) * NS, (T0 + 60) * NS);
        j = get_json(d, path, cat ? "X-Loki-Response-Encoding-Flags: categorize-labels" : NULL);
        cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "success");
        json_t *res = json_object_get(json_object_get(j, "data"), "result");
        cr_assert_eq(json_array_size(res), 1);
        json_t *vals = json_object_get(json_array_get(res, 0), "values");
        cr_assert_eq(json_array_size(vals), 1);
        const char *line = json_string_value(json_array_get(json_array_get(vals, 0), 1));
        cr_assert_not_null(line);
        json_error_t je;
        json_t *body = json_loads(line, 0, &je);
        cr_assert_not_null(body, "line is not JSON: %.200s", line);
        json_t *v = body;
        for (int i = 1; i < MAXD; i++) {
            char key[16];
            snprintf(key, sizeof(key), "k%d", i);
            cr_assert_eq(json_object_size(v), 1, "line level %d", i);
            v = json_object_get(v, key);
            cr_assert_not_null(v, "line level %d: key %s", i, key);
        }
        cr_assert_str_eq(json_string_value(v), "deep-leaf");
        json_decref(body);
        json_decref(j);
    }
}

Test(deepval, logs_nested_to_the_limit_read_back_from_every_endpoint)
{
    struct daemon d;
    char msg[512];
    cr_assert_eq(daemon_start(&d, NULL, ARGS), 0);

    /* one level more than the limit: refused, whole */
    char *over = log_export(MAXD + 1);
    cr_assert_eq(post(&d, "/v1/logs", "application/json", over, strlen(over), msg, sizeof(msg)),
                 400, "%s", msg);
    free(over);

    char *body = log_export(MAXD);
    cr_assert_eq(post(&d, "/v1/logs", "application/json", body, strlen(body), msg, sizeof(msg)),
                 200, "%s", msg);
    free(body);
    check_logs(&d); /* open block (or already sealed: either must work) */
    wait_metric(&d, "miradb_block_rows{signal=\"logs\"}", 1);
    check_logs(&d); /* sealed block */
    cr_expect_eq(daemon_stop(&d), 0);
}

/* ---- traces ---- */

/* A protobuf-c AnyValue chain of |levels| (as json_nest); freed by nest_free. */
struct nest {
    AnyValue *v;
    Opentelemetry__Proto__Common__V1__KeyValueList *l;
    Opentelemetry__Proto__Common__V1__ArrayValue *a;
    KeyValue *kv;
    KeyValue **kvp;
    AnyValue **vp;
    char (*keys)[16];
};

static AnyValue *pb_nest(struct nest *n, int levels, bool kv, const char *leaf_str)
{
    n->v = calloc((size_t)levels, sizeof(*n->v));
    n->l = calloc((size_t)levels, sizeof(*n->l));
    n->a = calloc((size_t)levels, sizeof(*n->a));
    n->kv = calloc((size_t)levels, sizeof(*n->kv));
    n->kvp = calloc((size_t)levels, sizeof(*n->kvp));
    n->vp = calloc((size_t)levels, sizeof(*n->vp));
    n->keys = calloc((size_t)levels, sizeof(*n->keys));
    for (int i = 0; i < levels; i++) {
        opentelemetry__proto__common__v1__any_value__init(&n->v[i]);
        opentelemetry__proto__common__v1__key_value_list__init(&n->l[i]);
        opentelemetry__proto__common__v1__array_value__init(&n->a[i]);
        opentelemetry__proto__common__v1__key_value__init(&n->kv[i]);
    }
    for (int i = 0; i < levels; i++) {
        bool last = i == levels - 1;
        if (last && leaf_str != NULL) {
            n->v[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            n->v[i].string_value = (char *)leaf_str;
        } else if (kv) {
            n->v[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE;
            n->v[i].kvlist_value = &n->l[i];
            if (!last) {
                snprintf(n->keys[i], sizeof(n->keys[i]), "k%d", i + 1);
                n->kv[i].key = n->keys[i];
                n->kv[i].value = &n->v[i + 1];
                n->kvp[i] = &n->kv[i];
                n->l[i].n_values = 1;
                n->l[i].values = &n->kvp[i];
            }
        } else {
            n->v[i].value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE;
            n->v[i].array_value = &n->a[i];
            if (!last) {
                n->vp[i] = &n->v[i + 1];
                n->a[i].n_values = 1;
                n->a[i].values = &n->vp[i];
            }
        }
    }
    return &n->v[0];
}

static void nest_free(struct nest *n)
{
    free(n->v);
    free(n->l);
    free(n->a);
    free(n->kv);
    free(n->kvp);
    free(n->vp);
    free(n->keys);
}

/* Walks a protobuf AnyValue as json_walk does. */
static int pb_walk(const AnyValue *v, bool kv, const AnyValue **leaf)
{
    int n = 1;
    for (;;) {
        cr_assert_not_null(v, "level %d: no value", n);
        if (kv &&
            v->value_case == OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE &&
            v->kvlist_value->n_values > 0) {
            cr_assert_eq(v->kvlist_value->n_values, 1);
            char key[16];
            snprintf(key, sizeof(key), "k%d", n);
            cr_assert_str_eq(v->kvlist_value->values[0]->key, key);
            v = v->kvlist_value->values[0]->value;
        } else if (!kv &&
                   v->value_case ==
                       OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE &&
                   v->array_value->n_values > 0) {
            cr_assert_eq(v->array_value->n_values, 1);
            v = v->array_value->values[0];
        } else {
            break;
        }
        n++;
    }
    *leaf = v;
    return n;
}

static void pb_expect_attr(KeyValue **attrs, size_t n, const char *key, bool kv,
                           const char *leaf_str)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(attrs[i]->key, key) != 0) {
            continue;
        }
        const AnyValue *leaf;
        cr_assert_eq(pb_walk(attrs[i]->value, kv, &leaf), MAXD, "%s: depth", key);
        if (leaf_str != NULL) {
            cr_assert_eq(leaf->value_case,
                         OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE);
            cr_assert_str_eq(leaf->string_value, leaf_str);
        } else {
            cr_assert_eq(leaf->value_case,
                         kv ? OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_KVLIST_VALUE
                            : OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_ARRAY_VALUE,
                         "%s: the last level is an empty container", key);
        }
        return;
    }
    cr_assert_fail("attribute %s missing", key);
}

static const uint8_t TID[16] = {0xde, 0xe9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01};
static const uint8_t SID[8] = {0, 0, 0, 0, 0, 0, 0, 0xd1};
#define TID_HEX "dee90000000000000000000000000001"

/* An export of one span whose resource, attributes and event carry values
 * of |levels|; packed into *out (owned). */
static size_t trace_export(int levels, uint8_t **out)
{
    struct nest nr, na, nk, ne;
    KeyValue svc = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    AnyValue svcv = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    svcv.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    svcv.string_value = "deep";
    svc.key = "service.name";
    svc.value = &svcv;
    KeyValue rkv = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    rkv.key = "res.kv";
    rkv.value = pb_nest(&nr, levels, true, "res-leaf");
    KeyValue *rattrs[] = {&svc, &rkv};
    Opentelemetry__Proto__Resource__V1__Resource res =
        OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.n_attributes = 2;
    res.attributes = rattrs;

    KeyValue a1 = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    a1.key = "arr";
    a1.value = pb_nest(&na, levels, false, "arr-leaf");
    KeyValue a2 = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    a2.key = "kv";
    a2.value = pb_nest(&nk, levels, true, NULL);
    KeyValue *sattrs[] = {&a1, &a2};
    KeyValue e1 = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    e1.key = "ev.kv";
    e1.value = pb_nest(&ne, levels, true, "ev-leaf");
    KeyValue *eattrs[] = {&e1};
    Opentelemetry__Proto__Trace__V1__Span__Event ev =
        OPENTELEMETRY__PROTO__TRACE__V1__SPAN__EVENT__INIT;
    ev.name = "e";
    ev.time_unix_nano = T0 * NS + 1000;
    ev.n_attributes = 1;
    ev.attributes = eattrs;
    Opentelemetry__Proto__Trace__V1__Span__Event *evs[] = {&ev};

    Opentelemetry__Proto__Trace__V1__Span sp = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__INIT;
    sp.trace_id.data = (uint8_t *)TID;
    sp.trace_id.len = 16;
    sp.span_id.data = (uint8_t *)SID;
    sp.span_id.len = 8;
    sp.name = "deep-span";
    sp.kind = OPENTELEMETRY__PROTO__TRACE__V1__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    sp.start_time_unix_nano = T0 * NS;
    sp.end_time_unix_nano = T0 * NS + 5000;
    sp.n_attributes = 2;
    sp.attributes = sattrs;
    sp.n_events = 1;
    sp.events = evs;
    Opentelemetry__Proto__Trace__V1__Span *sps[] = {&sp};
    Opentelemetry__Proto__Trace__V1__ScopeSpans ss =
        OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
    ss.n_spans = 1;
    ss.spans = sps;
    Opentelemetry__Proto__Trace__V1__ScopeSpans *sss[] = {&ss};
    Opentelemetry__Proto__Trace__V1__ResourceSpans rs =
        OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = sss;
    Opentelemetry__Proto__Trace__V1__ResourceSpans *rss[] = {&rs};
    Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest rq =
        OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    rq.n_resource_spans = 1;
    rq.resource_spans = rss;

    size_t n =
        opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
            &rq);
    *out = malloc(n);
    opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&rq, *out);
    nest_free(&nr);
    nest_free(&na);
    nest_free(&nk);
    nest_free(&ne);
    return n;
}

/* The one resourceSpans of a JSON trace answer, checked. */
static void check_trace_json(json_t *rss)
{
    cr_assert_eq(json_array_size(rss), 1);
    json_t *rs = json_array_get(rss, 0);
    json_expect_attr(json_object_get(json_object_get(rs, "resource"), "attributes"), "res.kv", true,
                     "stringValue", "res-leaf");
    json_t *sps = json_object_get(json_array_get(json_object_get(rs, "scopeSpans"), 0), "spans");
    cr_assert_eq(json_array_size(sps), 1);
    json_t *sp = json_array_get(sps, 0);
    json_expect_attr(json_object_get(sp, "attributes"), "arr", false, "stringValue", "arr-leaf");
    json_expect_attr(json_object_get(sp, "attributes"), "kv", true, NULL, NULL);
    json_t *ev = json_array_get(json_object_get(sp, "events"), 0);
    json_expect_attr(json_object_get(ev, "attributes"), "ev.kv", true, "stringValue", "ev-leaf");
}

static void check_trace_pb(const uint8_t *b, size_t n)
{
    TracesData *td = opentelemetry__proto__trace__v1__traces_data__unpack(NULL, n, b);
    cr_assert_not_null(td, "protobuf does not parse");
    cr_assert_eq(td->n_resource_spans, 1);
    const Opentelemetry__Proto__Trace__V1__ResourceSpans *rs = td->resource_spans[0];
    pb_expect_attr(rs->resource->attributes, rs->resource->n_attributes, "res.kv", true,
                   "res-leaf");
    cr_assert_eq(rs->n_scope_spans, 1);
    cr_assert_eq(rs->scope_spans[0]->n_spans, 1);
    const Opentelemetry__Proto__Trace__V1__Span *sp = rs->scope_spans[0]->spans[0];
    pb_expect_attr(sp->attributes, sp->n_attributes, "arr", false, "arr-leaf");
    pb_expect_attr(sp->attributes, sp->n_attributes, "kv", true, NULL);
    cr_assert_eq(sp->n_events, 1);
    pb_expect_attr(sp->events[0]->attributes, sp->events[0]->n_attributes, "ev.kv", true,
                   "ev-leaf");
    opentelemetry__proto__trace__v1__traces_data__free_unpacked(td, NULL);
}

static void check_traces(const struct daemon *d)
{
    json_t *j = get_json(d, "/api/traces/" TID_HEX, NULL);
    check_trace_json(json_object_get(j, "batches"));
    json_decref(j);
    j = get_json(d, "/api/v2/traces/" TID_HEX, NULL);
    check_trace_json(json_object_get(json_object_get(j, "trace"), "resourceSpans"));
    json_decref(j);

    size_t n1, n2;
    uint8_t *b1 = get_ok(d, "/api/traces/" TID_HEX, "Accept: application/protobuf", &n1);
    check_trace_pb(b1, n1);
    /* v2: TraceByIDResponse{trace = 1}, the same TracesData inside */
    uint8_t *b2 = get_ok(d, "/api/v2/traces/" TID_HEX, "Accept: application/protobuf", &n2);
    cr_assert_gt(n2, n1);
    cr_assert_eq(b2[0], 0x0a);
    cr_assert_eq(memcmp(b2 + (n2 - n1), b1, n1), 0);
    free(b1);
    free(b2);

    /* search: select() returns the stored values themselves */
    char enc[256], path[512];
    httpc_url_enc(enc, sizeof(enc), "{ name = \"deep-span\" } | select(span.arr, span.kv)");
    snprintf(path, sizeof(path), "/api/search?q=%s", enc);
    j = get_json(d, path, NULL);
    json_t *tr = json_object_get(j, "traces");
    cr_assert_eq(json_array_size(tr), 1);
    json_t *set = json_array_get(json_object_get(json_array_get(tr, 0), "spanSets"), 0);
    json_t *sp = json_array_get(json_object_get(set, "spans"), 0);
    json_expect_attr(json_object_get(sp, "attributes"), "arr", false, "stringValue", "arr-leaf");
    json_expect_attr(json_object_get(sp, "attributes"), "kv", true, NULL, NULL);
    json_decref(j);
}

Test(deepval, traces_nested_to_the_limit_read_back_from_every_endpoint)
{
    struct daemon d;
    char msg[512];
    cr_assert_eq(daemon_start(&d, NULL, ARGS), 0);

    uint8_t *pb;
    size_t n = trace_export(MAXD + 1, &pb);
    cr_assert_eq(post(&d, "/v1/traces", "application/x-protobuf", pb, n, msg, sizeof(msg)), 400,
                 "%s", msg);
    free(pb);
    /* and over JSON: a span attribute one level too deep */
    struct sb b = {0};
    sb_add(&b, "{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[{\"traceId\":\"" TID_HEX
               "\",\"spanId\":\"00000000000000d2\",\"name\":\"x\",\"startTimeUnixNano\":\"1\","
               "\"endTimeUnixNano\":\"2\",\"attributes\":[");
    json_attr(&b, "over", MAXD + 1, false, "{\"intValue\":\"1\"}");
    sb_add(&b, "]}]}]}]}");
    cr_assert_eq(post(&d, "/v1/traces", "application/json", b.p, b.n, msg, sizeof(msg)), 400, "%s",
                 msg);
    free(b.p);

    n = trace_export(MAXD, &pb);
    cr_assert_eq(post(&d, "/v1/traces", "application/x-protobuf", pb, n, msg, sizeof(msg)), 200,
                 "%s", msg);
    free(pb);
    check_traces(&d); /* open block (or already sealed) */
    wait_metric(&d, "miradb_blocks{signal=\"traces\"}", 1);
    check_traces(&d); /* sealed block */
    cr_expect_eq(daemon_stop(&d), 0);
}
