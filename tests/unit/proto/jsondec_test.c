/*
 * jsondec_test.c - the OTLP/JSON decoder: captured vectors against their
 * manifests, every quirk of FACTS.md section 7, malformed and hostile input.
 *
 * Test JSON is written with single quotes (q() turns them into double
 * quotes) so it stays readable; expectations are canonical manifest
 * documents (tests/util/manifest.h) checked with manifest_check_doc().
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "storage/arena.h"
#include "storage/batch.h"
#include "storage/val.h"
#include "tests/util/manifest.h"

/* ---- helpers ---- */

struct dec {
    arena *a;
    struct batch *b;
    int rc;
    char err[256];
};

/* A copy of |s| with ' turned into ", returned owned. */
static char *q(const char *s)
{
    char *t = strdup(s);
    cr_assert(t != NULL);
    for (char *c = t; *c; c++) {
        if (*c == '\'') {
            *c = '"';
        }
    }
    return t;
}

/*
 * Decodes |n| bytes of |body| from a private copy that is overwritten and
 * freed right after the call, so nothing in the batch may point into it.
 */
static void run(struct dec *d, enum signal s, const char *body, size_t n)
{
    d->a = arena_new(0);
    d->b = batch_new(s);
    cr_assert(d->a != NULL && d->b != NULL);
    char *copy = malloc(n ? n : 1);
    memcpy(copy, body, n);
    d->err[0] = '\0';
    d->rc = jsondec_decode(s, copy, n, d->a, d->b, d->err, sizeof(d->err));
    memset(copy, 'X', n);
    free(copy);
}

static void done(struct dec *d)
{
    batch_free(d->b);
    arena_free(d->a);
}

/* Decodes single-quoted JSON that must be accepted. */
static void ok(struct dec *d, enum signal s, const char *json)
{
    char *body = q(json);
    run(d, s, body, strlen(body));
    cr_assert_eq(d->rc, 0, "refused (%d): %s\n  input: %s", d->rc, d->err, body);
    free(body);
}

/* Checks the batch against a single-quoted canonical document. */
static void expect(struct dec *d, enum signal s, const char *doc)
{
    char *t = q(doc);
    json_error_t e;
    json_t *j = json_loads(t, 0, &e);
    cr_assert(j != NULL, "bad expectation: %s at %d: %s", e.text, e.position, t);
    manifest_check_doc(j, "inline expectation", s, d->b);
    json_decref(j);
    free(t);
}

/* |n| raw bytes that must be refused with -EPROTO and an error naming |needle|. */
static void bad_raw(enum signal s, const char *body, size_t n, const char *needle)
{
    struct dec d;
    run(&d, s, body, n);
    cr_expect_eq(d.rc, -EPROTO, "accepted (%d) %.*s", d.rc, (int)(n > 300 ? 300 : n), body);
    cr_expect(strstr(d.err, needle) != NULL, "error \"%s\" does not mention \"%s\" (input %.*s)",
              d.err, needle, (int)(n > 300 ? 300 : n), body);
    cr_expect(strstr(d.err, "offset") != NULL, "error \"%s\" gives no offset", d.err);
    cr_expect(d.b->n_rows == 0 && d.b->n_resources == 0 && d.b->heap.len == 0,
              "a refused request left rows or heap bytes behind");
    done(&d);
}

static void bad(enum signal s, const char *json, const char *needle)
{
    char *body = q(json);
    bad_raw(s, body, strlen(body), needle);
    free(body);
}

/* One log record inside a whole request. */
static char *log_req(const char *record)
{
    static const char pre[] = "{'resourceLogs':[{'scopeLogs':[{'logRecords':[";
    static const char post[] = "]}]}]}";
    char *s = malloc(strlen(pre) + strlen(record) + strlen(post) + 1);
    strcpy(s, pre);
    strcat(s, record);
    strcat(s, post);
    return s;
}

static void log_ok(struct dec *d, const char *record)
{
    char *s = log_req(record);
    ok(d, SIG_LOGS, s);
    free(s);
}

static void log_bad(const char *record, const char *needle)
{
    char *s = log_req(record);
    bad(SIG_LOGS, s, needle);
    free(s);
}

/* Expected logs: one record given in canonical form. */
static void log_expect(struct dec *d, const char *rec)
{
    char *doc = malloc(strlen(rec) + 64);
    sprintf(doc, "{'expected':{'logs':{'records':[%s]}}}", rec);
    expect(d, SIG_LOGS, doc);
    free(doc);
}

static void attr_is(const char *value_json, const char *canon)
{
    struct dec d;
    char *rec = malloc(strlen(value_json) + 64);
    sprintf(rec, "{'attributes':[{'key':'a','value':%s}]}", value_json);
    log_ok(&d, rec);
    char *doc = malloc(strlen(canon) + 64);
    sprintf(doc, "{'attributes':{'a':%s}}", canon);
    log_expect(&d, doc);
    free(doc);
    free(rec);
    done(&d);
}

static void attr_bad(const char *value_json, const char *needle)
{
    char *rec = malloc(strlen(value_json) + 64);
    sprintf(rec, "{'attributes':[{'key':'a','value':%s}]}", value_json);
    log_bad(rec, needle);
    free(rec);
}

/* ---- captured vectors ---- */

static void check_vector(const char *file, const char *proto, enum signal s)
{
    size_t len;
    uint8_t *body = manifest_load_vector(file, &len);
    arena *a = arena_new(0);
    struct batch *b = batch_new(s);
    char err[256];
    cr_assert_eq(jsondec_decode(s, (const char *)body, len, a, b, err, sizeof(err)), 0, "%s: %s",
                 file, err);
    memset(body, 0, len); /* nothing may point into the body */
    free(body);
    manifest_check(NULL, proto, s, b);
    batch_free(b);
    arena_free(a);
}

Test(jsondec, captured_vectors_match_their_manifests)
{
    check_vector("http-json-logs.json", "http-json", SIG_LOGS);
    check_vector("http-json-traces.json", "http-json", SIG_TRACES);
    check_vector("http-json-metrics.json", "http-json", SIG_METRICS);
}

Test(jsondec, gzipped_vectors_match_their_manifests)
{
    check_vector("http-json-logs.json.gz", "http-json-gzip", SIG_LOGS);
    check_vector("http-json-traces.json.gz", "http-json-gzip", SIG_TRACES);
    check_vector("http-json-metrics.json.gz", "http-json-gzip", SIG_METRICS);
}

Test(jsondec, appends_to_a_batch_and_a_failure_leaves_it_unchanged)
{
    size_t len;
    uint8_t *body = manifest_load_vector("http-json-logs.json", &len);
    arena *a = arena_new(0);
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    cr_assert_eq(jsondec_decode(SIG_LOGS, (const char *)body, len, a, b, err, sizeof(err)), 0);
    uint32_t rows = b->n_rows, scopes = b->n_scopes, res = b->n_resources;
    size_t heap = b->heap.len;
    cr_assert_eq(rows, 10);

    /* a body that fails late, after rows were added, rolls them back */
    body[len - 1] = ','; /* replaces the final '}' */
    cr_assert_eq(jsondec_decode(SIG_LOGS, (const char *)body, len, a, b, err, sizeof(err)),
                 -EPROTO);
    cr_expect(b->n_rows == rows && b->n_scopes == scopes && b->n_resources == res &&
              b->heap.len == heap);
    manifest_check(NULL, "http-json", SIG_LOGS, b);

    /* a second good decode appends, with its own scopes and resources */
    free(body);
    body = manifest_load_vector("http-json-logs.json", &len);
    cr_assert_eq(jsondec_decode(SIG_LOGS, (const char *)body, len, a, b, err, sizeof(err)), 0);
    cr_expect_eq(b->n_rows, 2 * rows);
    cr_expect_eq(b->n_scopes, 2 * scopes);
    cr_expect_eq(b->n_resources, 2 * res);
    for (uint32_t i = rows; i < b->n_rows; i++) {
        cr_expect_geq(b->logs[i].scope, scopes);
        cr_expect_eq(b->scopes[b->logs[i].scope].resource, res);
    }
    batch_free(b);
    arena_free(a);
    free(body);
}

Test(jsondec, arena_limit_is_enomem)
{
    size_t len;
    uint8_t *body = manifest_load_vector("http-json-logs.json", &len);
    arena *a = arena_new(1024);
    arena_set_limit(a, 2048);
    struct batch *b = batch_new(SIG_LOGS);
    char err[256];
    cr_expect_eq(jsondec_decode(SIG_LOGS, (const char *)body, len, a, b, err, sizeof(err)),
                 -ENOMEM);
    cr_expect(strstr(err, "out of memory") != NULL, "%s", err);
    cr_expect_eq(b->n_rows, 0);
    batch_free(b);
    arena_free(a);
    free(body);
}

/* ---- quirks ---- */

Test(jsondec, snake_case_keys_decode_like_camel_case)
{
    static const char *const logs[2] = {
        "{'resource_logs':[{'resource':{'attributes':[{'key':'service.name','value':{'string_value'"
        ":"
        "'svc'}}],'dropped_attributes_count':2},'schema_url':'https://r','scope_logs':[{'scope':{'"
        "name':'sc','version':'1','attributes':[{'key':'a','value':{'int_value':'7'}}],'dropped_"
        "attributes_count':1},'schema_url':'https://s','log_records':[{'time_unix_nano':'"
        "1767225600000162796','observed_time_unix_nano':1767225600000412796,'severity_number':9,'"
        "severity_text':'INFO','body':{'string_value':'hello'},'attributes':[{'key':'k','value':{'"
        "bool_value':true}},{'key':'d','value':{'double_value':1.5}},{'key':'b','value':{'bytes_"
        "value':'AQID'}},{'key':'arr','value':{'array_value':{'values':[{'int_value':1}]}}},{'key':"
        "'kv','value':{'kvlist_value':{'values':[{'key':'x','value':{'string_value':'y'}}]}}}],'"
        "dropped_attributes_count':3,'flags':1,'trace_id':'07df2818e033050913054e6abfd15df9','span_"
        "id':'c16120de5f22c43d','event_name':'ev'}]}]}]}",
        "{'resourceLogs':[{'resource':{'attributes':[{'key':'service.name','value':{'stringValue':"
        "'svc'}}],'droppedAttributesCount':2},'schemaUrl':'https://r','scopeLogs':[{'scope':{'"
        "name':'sc','version':'1','attributes':[{'key':'a','value':{'intValue':'7'}}],'dropped"
        "AttributesCount':1},'schemaUrl':'https://s','logRecords':[{'timeUnixNano':'"
        "1767225600000162796','observedTimeUnixNano':1767225600000412796,'severityNumber':9,'"
        "severityText':'INFO','body':{'stringValue':'hello'},'attributes':[{'key':'k','value':{'"
        "boolValue':true}},{'key':'d','value':{'doubleValue':1.5}},{'key':'b','value':{'bytes"
        "Value':'AQID'}},{'key':'arr','value':{'arrayValue':{'values':[{'intValue':1}]}}},{'key':"
        "'kv','value':{'kvlistValue':{'values':[{'key':'x','value':{'stringValue':'y'}}]}}}],'"
        "droppedAttributesCount':3,'flags':1,'traceId':'07df2818e033050913054e6abfd15df9','span"
        "Id':'c16120de5f22c43d','eventName':'ev'}]}]}]}",
    };
    for (int i = 0; i < 2; i++) {
        struct dec d;
        ok(&d, SIG_LOGS, logs[i]);
        expect(&d, SIG_LOGS,
               "{'resource':{'attributes':{'service.name':{'string':'svc'}},'schemaUrl':'https://"
               "r','droppedAttributesCount':2},'expected':{'logs':{'records':[{'timeUnixNano':'"
               "1767225600000162796','observedTimeUnixNano':'1767225600000412796','severityNumber'"
               ":9,'severityText':'INFO','body':{'string':'hello'},'attributes':{'k':{'bool':true}"
               ",'d':{'double':1.5},'b':{'bytes':'010203'},'arr':{'array':[{'int':'1'}]},'kv':{'"
               "kvlist':{'x':{'string':'y'}}}},'droppedAttributesCount':3,'flags':1,'traceId':'"
               "07df2818e033050913054e6abfd15df9','spanId':'c16120de5f22c43d','eventName':'ev','"
               "scope':{'name':'sc','version':'1','attributes':{'a':{'int':'7'}},'"
               "droppedAttributesCount':1,'schemaUrl':'https://s'}}]}}}");
        done(&d);
    }

    struct dec d;
    ok(&d, SIG_TRACES,
       "{'resource_spans':[{'scope_spans':[{'spans':[{'trace_id':'07df2818e033050913054e6abfd15df9'"
       ",'span_id':'c16120de5f22c43d','parent_span_id':'6811cc453eef5b8a','trace_state':'a=b','"
       "name':'op','kind':3,'start_time_unix_nano':'10','end_time_unix_nano':'20','dropped_"
       "attributes_count':1,'events':[{'time_unix_nano':'15','name':'e','attributes':[],'dropped_"
       "attributes_count':4}],'dropped_events_count':5,'links':[{'trace_id':'"
       "cc6916554202aea1aa61438dcd1f7b0a','span_id':'73ead5ab29fb97af','trace_state':'x=y','"
       "dropped_attributes_count':6,'flags':257}],'dropped_links_count':7,'status':{'code':2,'"
       "message':'boom'}}]}]}]}");
    expect(&d, SIG_TRACES,
           "{'expected':{'traces':{'spans':[{'traceId':'07df2818e033050913054e6abfd15df9','spanId'"
           ":'c16120de5f22c43d','parentSpanId':'6811cc453eef5b8a','traceState':'a=b','name':'op',"
           "'kind':3,'startTimeUnixNano':'10','endTimeUnixNano':'20','droppedAttributesCount':1,"
           "'attributes':{},'events':[{'timeUnixNano':'15','name':'e','attributes':{},'"
           "droppedAttributesCount':4}],'droppedEventsCount':5,'links':[{'traceId':'"
           "cc6916554202aea1aa61438dcd1f7b0a','spanId':'73ead5ab29fb97af','traceState':'x=y','"
           "droppedAttributesCount':6,'flags':257,'attributes':{}}],'droppedLinksCount':7,'status'"
           ":{'code':2,'message':'boom'}}]}}}");
    done(&d);

    ok(&d, SIG_METRICS,
       "{'resource_metrics':[{'scope_metrics':[{'metrics':[{'name':'s','sum':{'data_points':[{'"
       "start_time_unix_nano':'1','time_unix_nano':'2','as_int':'-3','exemplars':[{'filtered_"
       "attributes':[{'key':'f','value':{'bool_value':false}}],'time_unix_nano':'3','as_double':"
       "0.5,'span_id':'c16120de5f22c43d','trace_id':'07df2818e033050913054e6abfd15df9'}]}],'"
       "aggregation_temporality':1,'is_monotonic':true}},{'name':'h','histogram':{'aggregation_"
       "temporality':2,'data_points':[{'count':'3','sum':1.5,'bucket_counts':[1,2],'explicit_"
       "bounds':[0.5],'min':0,'max':1}]}},{'name':'e','exponential_histogram':{'data_points':[{'"
       "zero_count':'1','zero_threshold':0.25,'scale':-2,'positive':{'offset':3,'bucket_counts':["
       "'4']}}]}},{'name':'q','summary':{'data_points':[{'quantile_values':[{'quantile':0.5,'"
       "value':9}]}]}}]}]}]}");
    expect(&d, SIG_METRICS,
           "{'expected':{'metrics':{'metrics':["
           "{'name':'s','type':'sum','temporality':1,'monotonic':true,'dataPoints':[{'"
           "startTimeUnixNano':'1','timeUnixNano':'2','value':{'int':'-3'},'exemplars':[{'"
           "timeUnixNano':'3','value':{'double':0.5},'spanId':'c16120de5f22c43d','traceId':'"
           "07df2818e033050913054e6abfd15df9','filteredAttributes':{'f':{'bool':false}}}]}]},"
           "{'name':'h','type':'histogram','temporality':2,'dataPoints':[{'count':3,'sum':1.5,'"
           "bucketCounts':[1,2],'explicitBounds':[0.5],'min':0,'max':1}]},"
           "{'name':'e','type':'exponential_histogram','temporality':0,'dataPoints':[{'zeroCount'"
           ":1,'zeroThreshold':0.25,'scale':-2,'positive':{'offset':3,'bucketCounts':[4]},'"
           "negative':{'offset':0,'bucketCounts':[]}}]},"
           "{'name':'q','type':'summary','dataPoints':[{'quantileValues':[{'quantile':0.5,'value'"
           ":9}],'sum':0}]}]}}}");
    done(&d);
}

Test(jsondec, hex_ids_any_case_exact_length_else_refused)
{
    struct dec d;
    log_ok(&d, "{'traceId':'07DF2818E033050913054E6ABFD15DF9','spanId':'C16120de5F22c43D'}");
    log_expect(&d, "{'traceId':'07df2818e033050913054e6abfd15df9','spanId':'c16120de5f22c43d'}");
    cr_expect(d.b->logs[0].has_trace_id && d.b->logs[0].has_span_id);
    cr_expect_eq(d.b->logs[0].trace_id[0], 0x07);
    cr_expect_eq(d.b->logs[0].trace_id[15], 0xf9);
    cr_expect_eq(d.b->logs[0].span_id[7], 0x3d);
    done(&d);

    /* "" and all-zero ids are absent */
    log_ok(&d, "{'traceId':'','spanId':'0000000000000000'}");
    cr_expect(!d.b->logs[0].has_trace_id && !d.b->logs[0].has_span_id);
    done(&d);
    ok(&d, SIG_TRACES,
       "{'resourceSpans':[{'scopeSpans':[{'spans':[{'traceId':'07df2818e033050913054e6abfd15df9',"
       "'spanId':'c16120de5f22c43d','parentSpanId':''},{'parentSpanId':'0000000000000000'},{'"
       "parentSpanId':'6811CC453EEF5B8A'}]}]}]}");
    cr_assert_eq(d.b->n_rows, 3);
    cr_expect(!d.b->spans[0].has_parent && !d.b->spans[1].has_parent && d.b->spans[2].has_parent);
    cr_expect_eq(d.b->spans[2].parent_span_id[0], 0x68);
    done(&d);

    log_bad("{'traceId':'07df2818e033050913054e6abfd15df'}", "traceId: 31 hex digits, want 32");
    log_bad("{'traceId':'07df2818e033050913054e6abfd15df900'}", "traceId: 34 hex digits");
    log_bad("{'traceId':'07df2818e033050913054e6abfd15dfg'}", "traceId: not a hex string");
    log_bad("{'spanId':'c16120de5f22c43'}", "spanId: 15 hex digits, want 16");
    log_bad("{'spanId':'B64+AAAAAAA='}", "spanId: 12 hex digits");
    bad(SIG_TRACES, "{'resourceSpans':[{'scopeSpans':[{'spans':[{'parentSpanId':'abc'}]}]}]}",
        "parentSpanId: 3 hex digits");
    bad(SIG_TRACES, "{'resourceSpans':[{'scopeSpans':[{'spans':[{'links':[{'traceId':'00'}]}]}]}]}",
        "links.traceId: 2 hex digits");
    bad(SIG_METRICS,
        "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'gauge':{'dataPoints':[{'exemplars':"
        "[{'spanId':'1234'}]}]}}]}]}]}",
        "exemplars.spanId: 4 hex digits");
}

Test(jsondec, integers_as_numbers_or_strings_exactly)
{
    struct dec d;
    /* above 2^53 as a bare number, and as a string */
    log_ok(&d, "{'timeUnixNano':1767225600000162797,'observedTimeUnixNano':'1767225600000162799'}");
    cr_expect_eq(d.b->logs[0].time_ns, 1767225600000162797ull);
    cr_expect_eq(d.b->logs[0].observed_ns, 1767225600000162799ull);
    done(&d);
    log_ok(&d,
           "{'timeUnixNano':18446744073709551615,'observedTimeUnixNano':'18446744073709551615'}");
    cr_expect_eq(d.b->logs[0].time_ns, UINT64_MAX);
    cr_expect_eq(d.b->logs[0].observed_ns, UINT64_MAX);
    done(&d);
    /* exponent and zero fraction when the value is integral */
    log_ok(&d, "{'timeUnixNano':'1767225600.000162796e9','observedTimeUnixNano':1.5e3,"
               "'severityNumber':'9','flags':3.0,'droppedAttributesCount':'4294967295'}");
    cr_expect_eq(d.b->logs[0].time_ns, 1767225600000162796ull);
    cr_expect_eq(d.b->logs[0].observed_ns, 1500);
    cr_expect_eq(d.b->logs[0].severity_number, 9);
    cr_expect_eq(d.b->logs[0].flags, 3);
    cr_expect_eq(d.b->logs[0].dropped_attrs, UINT32_MAX);
    done(&d);

    /* fixed64 counts and buckets at the top of the range */
    ok(&d, SIG_METRICS,
       "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'histogram':{'dataPoints':[{'count':"
       "18446744073709551615,'bucketCounts':[18446744073709551615,'18446744073709551614',0]}]}},"
       "{'gauge':{'dataPoints':[{'asInt':-9223372036854775808},{'asInt':'9223372036854775807'}]}}"
       "]}]}]}");
    expect(&d, SIG_METRICS,
           "{'expected':{'metrics':{'metrics':[{'type':'histogram','dataPoints':[{'count':'"
           "18446744073709551615','bucketCounts':['18446744073709551615','18446744073709551614',"
           "0],'explicitBounds':[],'sum':null}]},{'type':'gauge','dataPoints':[{'value':{'int':'-"
           "9223372036854775808'}},{'value':{'int':'9223372036854775807'}}]}]}}}");
    done(&d);

    attr_is("{'intValue':'-9223372036854775808'}", "{'int':'-9223372036854775808'}");
    attr_is("{'intValue':9223372036854775807}", "{'int':'9223372036854775807'}");
    attr_is("{'intValue':'1e3'}", "{'int':'1000'}");
    attr_is("{'intValue':-0}", "{'int':'0'}");
    attr_is("{'intValue':'12000e-3'}", "{'int':'12'}");

    attr_bad("{'intValue':9223372036854775808}", "intValue: not a 64-bit signed integer");
    attr_bad("{'intValue':'-9223372036854775809'}", "intValue");
    attr_bad("{'intValue':3.5}", "intValue");
    attr_bad("{'intValue':'+5'}", "intValue");
    attr_bad("{'intValue':' 5'}", "intValue");
    attr_bad("{'intValue':'0x10'}", "intValue");
    attr_bad("{'intValue':''}", "intValue");
    attr_bad("{'intValue':'1e400'}", "intValue");
    log_bad("{'timeUnixNano':18446744073709551616}", "timeUnixNano: not an integer in range");
    log_bad("{'timeUnixNano':'-1'}", "timeUnixNano: negative");
    log_bad("{'flags':-1}", "flags: negative");
    log_bad("{'droppedAttributesCount':4294967296}", "droppedAttributesCount: out of range");
    log_bad("{'severityNumber':2147483648}", "severityNumber: out of range");
}

Test(jsondec, enums_by_name_or_number)
{
    struct dec d;
    static const struct {
        char name[32];
        int32_t v;
    } sev[] = {{"SEVERITY_NUMBER_UNSPECIFIED", 0}, {"SEVERITY_NUMBER_TRACE", 1},
               {"SEVERITY_NUMBER_DEBUG2", 6},      {"SEVERITY_NUMBER_INFO", 9},
               {"SEVERITY_NUMBER_WARN3", 15},      {"SEVERITY_NUMBER_ERROR", 17},
               {"SEVERITY_NUMBER_FATAL4", 24}};
    for (size_t i = 0; i < sizeof(sev) / sizeof(sev[0]); i++) {
        char rec[96];
        snprintf(rec, sizeof(rec), "{'severityNumber':'%s'}", sev[i].name);
        log_ok(&d, rec);
        cr_expect_eq(d.b->logs[0].severity_number, sev[i].v, "%s", sev[i].name);
        done(&d);
    }
    ok(&d, SIG_TRACES,
       "{'resourceSpans':[{'scopeSpans':[{'spans':[{'kind':'SPAN_KIND_SERVER','status':{'code':"
       "'STATUS_CODE_ERROR'}},{'kind':'SPAN_KIND_CONSUMER','status':{'code':'STATUS_CODE_OK'}},{"
       "'kind':42,'status':{'code':7}},{'kind':'SPAN_KIND_UNSPECIFIED'}]}]}]}");
    cr_assert_eq(d.b->n_rows, 4);
    cr_expect_eq(d.b->spans[0].kind, 2);
    cr_expect_eq(d.b->spans[0].status_code, 2);
    cr_expect_eq(d.b->spans[1].kind, 5);
    cr_expect_eq(d.b->spans[1].status_code, 1);
    cr_expect_eq(d.b->spans[2].kind, 42, "unknown enum numbers are kept");
    cr_expect_eq(d.b->spans[2].status_code, 7);
    cr_expect_eq(d.b->spans[3].kind, 0);
    done(&d);
    ok(&d, SIG_METRICS,
       "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'sum':{'aggregationTemporality':'"
       "AGGREGATION_TEMPORALITY_CUMULATIVE'}},{'histogram':{'aggregationTemporality':'"
       "AGGREGATION_TEMPORALITY_DELTA'}},{'exponentialHistogram':{'aggregationTemporality':2}}]}"
       "]}]}");
    cr_assert_eq(d.b->n_metrics, 3);
    cr_expect_eq(d.b->metrics[0].temporality, 2);
    cr_expect_eq(d.b->metrics[1].temporality, 1);
    cr_expect_eq(d.b->metrics[2].temporality, 2);
    done(&d);

    bad(SIG_TRACES, "{'resourceSpans':[{'scopeSpans':[{'spans':[{'kind':'SPAN_KIND_BOGUS'}]}]}]}",
        "kind: unknown enum value");
    bad(SIG_TRACES, "{'resourceSpans':[{'scopeSpans':[{'spans':[{'kind':'span_kind_server'}]}]}]}",
        "kind: unknown enum value");
    log_bad("{'severityNumber':'INFO'}", "severityNumber: unknown enum value");
    log_bad("{'severityNumber':true}", "severityNumber");
}

Test(jsondec, doubles_as_numbers_strings_and_special_values)
{
    attr_is("{'doubleValue':'NaN'}", "{'double':'NaN'}");
    attr_is("{'doubleValue':'Infinity'}", "{'double':'Infinity'}");
    attr_is("{'doubleValue':'-Infinity'}", "{'double':'-Infinity'}");
    attr_is("{'doubleValue':'2.5'}", "{'double':2.5}");
    attr_is("{'doubleValue':'-1e-3'}", "{'double':-0.001}");
    attr_is("{'doubleValue':1e300}", "{'double':1e300}");
    attr_is("{'doubleValue':5}", "{'double':5}");
    attr_is("{'doubleValue':0.1}", "{'double':0.1}");

    struct dec d;
    ok(&d, SIG_METRICS,
       "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'gauge':{'dataPoints':[{'asDouble':'"
       "NaN'}]}},{'histogram':{'dataPoints':[{'sum':'Infinity','min':'-Infinity','max':'1e2','"
       "explicitBounds':['-Infinity',0,1.5,'10']}]}}]}]}]}");
    expect(&d, SIG_METRICS,
           "{'expected':{'metrics':{'metrics':[{'type':'gauge','dataPoints':[{'value':{'double':'"
           "NaN'}}]},{'type':'histogram','dataPoints':[{'sum':'Infinity','min':'-Infinity','max'"
           ":100,'explicitBounds':['-Infinity',0,1.5,10],'bucketCounts':[]}]}]}}}");
    done(&d);

    attr_bad("{'doubleValue':1e400}", "doubleValue: number out of range");
    attr_bad("{'doubleValue':'nan'}", "doubleValue: not a number");
    attr_bad("{'doubleValue':'inf'}", "doubleValue: not a number");
    attr_bad("{'doubleValue':'1.5x'}", "doubleValue: not a number");
    attr_bad("{'doubleValue':true}", "doubleValue");
}

Test(jsondec, bytes_as_base64_standard_or_url_safe_padded_or_not)
{
    attr_is("{'bytesValue':'AQID'}", "{'bytes':'010203'}");
    attr_is("{'bytesValue':'AQI='}", "{'bytes':'0102'}");
    attr_is("{'bytesValue':'AQI'}", "{'bytes':'0102'}");
    attr_is("{'bytesValue':'AQ=='}", "{'bytes':'01'}");
    attr_is("{'bytesValue':'AQ'}", "{'bytes':'01'}");
    attr_is("{'bytesValue':'+/8='}", "{'bytes':'fbff'}");
    attr_is("{'bytesValue':'-_8'}", "{'bytes':'fbff'}");
    attr_is("{'bytesValue':'+/+/'}", "{'bytes':'fbffbf'}");
    attr_is("{'bytesValue':''}", "{'bytes':''}");
    attr_bad("{'bytesValue':'A'}", "bytesValue: bad base64 length");
    attr_bad("{'bytesValue':'AQ=I'}", "bytesValue: not base64");
    attr_bad("{'bytesValue':'A*=='}", "bytesValue: not base64");
    attr_bad("{'bytesValue':'AQ I'}", "bytesValue: not base64");
    attr_bad("{'bytesValue':5}", "bytesValue: expected a string");
}

Test(jsondec, null_means_absent)
{
    struct dec d;
    log_ok(&d, "{'timeUnixNano':null,'observedTimeUnixNano':null,'severityNumber':null,'"
               "severityText':null,'body':null,'attributes':null,'droppedAttributesCount':null,'"
               "flags':null,'traceId':null,'spanId':null,'eventName':null}");
    log_expect(&d, "{'timeUnixNano':'0','observedTimeUnixNano':'0','severityNumber':0,'"
                   "severityText':'','body':{},'attributes':{},'flags':0,'traceId':'','spanId':'"
                   "','eventName':''}");
    done(&d);

    /* null envelopes, members, list elements and values */
    ok(&d, SIG_LOGS,
       "{'resourceLogs':[{'resource':null,'schemaUrl':null,'scopeLogs':[{'scope':null,'"
       "logRecords':[null,{'attributes':[null,{'key':'k','value':null},{'key':'v','value':{'"
       "stringValue':null}}],'body':{'stringValue':null}}]},null]},null]}");
    cr_expect_eq(d.b->n_resources, 2);
    cr_expect_eq(d.b->n_scopes, 2);
    expect(&d, SIG_LOGS,
           "{'resource':{'attributes':{},'schemaUrl':''},'expected':{'logs':{'records':[{'body':"
           "{},'attributes':{},'scope':{'name':'','version':'','attributes':{}}},{'body':{},'"
           "attributes':{'':{},'k':{},'v':{}}}]}}}");
    done(&d);

    /* a null key and an empty one are the same: both entries are kept */
    log_ok(&d, "{'attributes':[{'key':null,'value':{'intValue':1}},{'value':{'intValue':2}}]}");
    cr_expect_eq(d.b->logs[0].attrs.count, 2);
    done(&d);

    ok(&d, SIG_METRICS,
       "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'name':null,'histogram':{'dataPoints':"
       "[{'sum':null,'min':null,'max':null,'bucketCounts':null,'explicitBounds':null,'count':"
       "null}],'aggregationTemporality':null}},{'gauge':null},{'sum':{'dataPoints':null}}]}]}]}");
    expect(&d, SIG_METRICS,
           "{'expected':{'metrics':{'metrics':[{'name':'','type':'histogram','temporality':0,'"
           "dataPoints':[{'sum':null,'min':null,'max':null,'count':0,'bucketCounts':[],'"
           "explicitBounds':[]}]},{'type':'none','dataPoints':[]},{'type':'sum','dataPoints':[]}]}"
           "}}");
    done(&d);

    bad(SIG_METRICS,
        "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'histogram':{'dataPoints':[{'"
        "bucketCounts':[1,null]}]}}]}]}]}",
        "bucketCounts: expected a number");
}

Test(jsondec, unknown_keys_are_skipped_at_every_level)
{
    struct dec d;
    ok(&d, SIG_LOGS,
       "{'zero':{'a':[1,{'b':null},[[],{}],'s',-2.5e-3,true,false]},'resourceSpans':[{'x':1}],'"
       "resourceLogs':[{'u1':[{'deep':[[[{'k':'v'}]]]}],'resource':{'u2':{},'attributes':[{'key':"
       "'r','value':{'stringValue':'R','u3':[1]},'u4':{}}],'entityRefs':[{'type':'service','"
       "idKeys':['r']}]},'instrumentationLibraryLogs':[{'logRecords':[{}]}],'scopeLogs':[{'u5':"
       "null,'scope':{'name':'s','u6':[]},'logRecords':[{'u7':{'x':{'y':{'z':[]}}},'"
       "severityText':'W','body':{'u8':1,'kvlistValue':{'u9':2,'values':[{'key':'k','u10':3,'"
       "value':{'arrayValue':{'u11':[],'values':[{'boolValue':true,'u12':'x'}]}}}]}}}],'"
       "spans':[{}],'metrics':[{}]}],'scopeSpans':[{}]}]}");
    expect(&d, SIG_LOGS,
           "{'resource':{'attributes':{'r':{'string':'R'}}},'expected':{'logs':{'records':[{'"
           "severityText':'W','body':{'kvlist':{'k':{'array':[{'bool':true}]}}},'attributes':{},'"
           "scope':{'name':'s'}}]}}}");
    cr_expect_eq(d.b->n_resources, 1);
    cr_expect_eq(d.b->n_scopes, 1);
    done(&d);

    /* the other signals' keys are unknown here: no rows */
    ok(&d, SIG_TRACES, "{'resourceLogs':[{'scopeLogs':[{'logRecords':[{}]}]}]}");
    cr_expect_eq(d.b->n_rows, 0);
    cr_expect_eq(d.b->n_resources, 0);
    done(&d);
}

Test(jsondec, empty_requests_succeed_with_no_rows)
{
    static const char *const sig_keys[3] = {"resourceLogs", "resourceSpans", "resourceMetrics"};
    static const char *const scope_keys[3] = {"scopeLogs", "scopeSpans", "scopeMetrics"};
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        struct dec d;
        char body[160];
        ok(&d, (enum signal)s, " \n\t{ } \r\n");
        cr_expect(d.b->n_rows == 0 && d.b->n_resources == 0 && d.b->heap.len == 0);
        done(&d);
        snprintf(body, sizeof(body), "{'%s':[]}", sig_keys[s - 1]);
        ok(&d, (enum signal)s, body);
        cr_expect(d.b->n_rows == 0 && d.b->n_resources == 0);
        done(&d);
        snprintf(body, sizeof(body), "{'%s':[{}]}", sig_keys[s - 1]);
        ok(&d, (enum signal)s, body);
        cr_expect(d.b->n_rows == 0 && d.b->n_resources == 1 && d.b->n_scopes == 0);
        done(&d);
        snprintf(body, sizeof(body), "{'%s':[{'%s':[{},{}]}]}", sig_keys[s - 1], scope_keys[s - 1]);
        ok(&d, (enum signal)s, body);
        cr_expect(d.b->n_rows == 0 && d.b->n_resources == 1 && d.b->n_scopes == 2);
        done(&d);
    }
}

Test(jsondec, every_anyvalue_kind_nested_and_as_body)
{
    struct dec d;
    log_ok(&d,
           "{'attributes':[{'key':'all','value':{'arrayValue':{'values':[{'stringValue':'s'},{'"
           "intValue':'-7'},{'doubleValue':2.25},{'boolValue':false},{'bytesValue':'AAEC'},{},{'"
           "arrayValue':{'values':[{'kvlistValue':{'values':[{'key':'in','value':{'arrayValue':{}"
           "}},{'key':'e','value':{}}]}}]}},{'kvlistValue':{}},{'arrayValue':{'values':[]}}]}}},{"
           "'key':'empty','value':{}},{'key':'kv','value':{'kvlistValue':{'values':[{'key':'n','"
           "value':{'kvlistValue':{'values':[{'key':'m','value':{'bytesValue':''}}]}}}]}}}],'body'"
           ":{'kvlistValue':{'values':[{'key':'b','value':{'boolValue':true}}]}}}");
    log_expect(&d, "{'attributes':{'all':{'array':[{'string':'s'},{'int':'-7'},{'double':2.25},{"
                   "'bool':false},{'bytes':'000102'},{},{'array':[{'kvlist':{'in':{'array':[]},'e'"
                   ":{}}}]},{'kvlist':{}},{'array':[]}]},'empty':{},'kv':{'kvlist':{'n':{'kvlist':"
                   "{'m':{'bytes':''}}}}}},'body':{'kvlist':{'b':{'bool':true}}}}");
    cr_expect_eq(d.b->logs[0].body_type, VAL_KVLIST);
    done(&d);

    static const struct {
        char json[64], canon[64];
        enum val_type t;
    } bodies[] = {
        {"{'stringValue':'text'}", "{'string':'text'}", VAL_STR},
        {"{'intValue':42}", "{'int':'42'}", VAL_INT},
        {"{'doubleValue':'NaN'}", "{'double':'NaN'}", VAL_DOUBLE},
        {"{'boolValue':true}", "{'bool':true}", VAL_BOOL},
        {"{'bytesValue':'AQID'}", "{'bytes':'010203'}", VAL_BYTES},
        {"{'arrayValue':{'values':[{'intValue':1}]}}", "{'array':[{'int':'1'}]}", VAL_ARRAY},
        {"{}", "{}", VAL_EMPTY},
        {"{'stringValueStrindex':3}", "{}", VAL_EMPTY},
    };
    for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
        char rec[128], canon[128];
        snprintf(rec, sizeof(rec), "{'body':%s}", bodies[i].json);
        log_ok(&d, rec);
        snprintf(canon, sizeof(canon), "{'body':%s}", bodies[i].canon);
        log_expect(&d, canon);
        cr_expect_eq(d.b->logs[0].body_type, bodies[i].t, "%s", bodies[i].json);
        if (bodies[i].t == VAL_STR) {
            cr_expect_eq(d.b->heap.len, 0, "a string body stays out of the heap");
        }
        done(&d);
    }
    log_ok(&d, "{}");
    cr_expect_eq(d.b->logs[0].body_type, VAL_EMPTY);
    done(&d);
}

Test(jsondec, strings_are_unescaped_into_the_arena)
{
    struct dec d;
    log_ok(&d, "{'severityText':'\\u0057ARN','body':{'stringValue':'a\\nb\\u00e9\\ud83d\\ude00"
               "\\/\\\"\\\\\\t\\b\\f\\r'},'attributes':[{'key':'k\\u00e9y','value':{'"
               "stringValue':'\\u2713 ok'}}],'event\\u004eame':'ev'}");
    log_expect(&d, "{'severityText':'WARN','body':{'string':'a\\nb\\u00e9\\ud83d\\ude00/\\\""
                   "\\\\\\t\\b\\f\\r'},'attributes':{'k\\u00e9y':{'string':'\\u2713 ok'}},'"
                   "eventName':'ev'}");
    cr_expect_eq(d.b->logs[0].body_str.len, 16);
    done(&d);
    /* raw UTF-8 passes through unchanged */
    log_ok(&d, "{'body':{'stringValue':'na\xc3\xafve \xe2\x9c\x93 \xf0\x9f\x98\x80'}}");
    log_expect(&d, "{'body':{'string':'na\\u00efve \\u2713 \\ud83d\\ude00'}}");
    done(&d);
}

Test(jsondec, every_metric_kind)
{
    struct dec d;
    ok(&d, SIG_METRICS,
       "{'resourceMetrics':[{'resource':{'attributes':[{'key':'svc','value':{'stringValue':'m'}}"
       "]},'scopeMetrics':[{'scope':{'name':'meter','version':'2'},'schemaUrl':'https://sc','"
       "metrics':["
       "{'name':'g','description':'gauge','unit':'1','metadata':[{'key':'md','value':{'intValue'"
       ":1}}],'gauge':{'dataPoints':[{'asInt':'5','timeUnixNano':'100','startTimeUnixNano':'90',"
       "'flags':1,'attributes':[{'key':'a','value':{'stringValue':'x'}}]},{'asDouble':0.5},{}]}},"
       "{'name':'s','sum':{'aggregationTemporality':1,'isMonotonic':true,'dataPoints':[{'"
       "asDouble':-1.25,'exemplars':[{'timeUnixNano':'7','asInt':3,'traceId':'"
       "07df2818e033050913054e6abfd15df9','spanId':'c16120de5f22c43d','filteredAttributes':[{'"
       "key':'f','value':{'intValue':9}}]},{'asDouble':'Infinity'},{'traceId':'"
       "00000000000000000000000000000000'}]}]}},"
       "{'name':'h0','histogram':{'aggregationTemporality':2,'dataPoints':[{'count':'0','sum':0"
       ",'bucketCounts':[],'explicitBounds':[]},{'count':'4','bucketCounts':['1',2,0,1],'"
       "explicitBounds':[-10,0,10],'min':-12.5,'max':11}]}},"
       "{'name':'eh','exponentialHistogram':{'aggregationTemporality':1,'dataPoints':[{'count':"
       "'9','sum':-3.5,'scale':-3,'zeroCount':'2','zeroThreshold':1e-9,'positive':{'offset':-2"
       ",'bucketCounts':['1','2']},'negative':{'offset':5,'bucketCounts':['3',0,'1']},'min':-"
       "40,'max':4,'flags':1}]}},"
       "{'name':'sm','summary':{'dataPoints':[{'count':'10','sum':55,'quantileValues':[{'"
       "quantile':0,'value':1},{'quantile':0.5,'value':5.5},{'quantile':1,'value':10}]},{'count"
       "':'0'}]}},"
       "{'name':'nodata','description':'no data oneof'}"
       "]}]}]}");
    expect(&d, SIG_METRICS,
           "{'resource':{'attributes':{'svc':{'string':'m'}}},'expected':{'metrics':{'metricCount'"
           ":6,'dataPointCount':9,'metrics':["
           "{'name':'g','description':'gauge','unit':'1','type':'gauge','temporality':0,'"
           "monotonic':null,'metadata':{'md':{'int':'1'}},'scope':{'name':'meter','version':'2','"
           "schemaUrl':'https://sc'},'dataPoints':[{'value':{'int':'5'},'timeUnixNano':'100','"
           "startTimeUnixNano':'90','flags':1,'attributes':{'a':{'string':'x'}},'exemplars':[]},"
           "{'value':{'double':0.5},'attributes':{}},{'value':{},'flags':0}]},"
           "{'name':'s','type':'sum','temporality':1,'monotonic':true,'dataPoints':[{'value':{'"
           "double':-1.25},'exemplars':[{'timeUnixNano':'7','value':{'int':'3'},'traceId':'"
           "07df2818e033050913054e6abfd15df9','spanId':'c16120de5f22c43d','filteredAttributes':{"
           "'f':{'int':'9'}}},{'timeUnixNano':'0','value':{'double':'Infinity'},'traceId':'','"
           "spanId':'','filteredAttributes':{}},{'value':{},'traceId':''}]}]},"
           "{'name':'h0','type':'histogram','temporality':2,'dataPoints':[{'count':0,'sum':0,'"
           "min':null,'max':null,'bucketCounts':[],'explicitBounds':[]},{'count':4,'sum':null,'"
           "bucketCounts':[1,2,0,1],'explicitBounds':[-10,0,10],'min':-12.5,'max':11}]},"
           "{'name':'eh','type':'exponential_histogram','temporality':1,'dataPoints':[{'count':9,'"
           "sum':-3.5,'scale':-3,'zeroCount':2,'zeroThreshold':1e-9,'positive':{'offset':-2,'"
           "bucketCounts':[1,2]},'negative':{'offset':5,'bucketCounts':[3,0,1]},'min':-40,'max':4"
           ",'flags':1}]},"
           "{'name':'sm','type':'summary','temporality':0,'dataPoints':[{'count':10,'sum':55,'"
           "quantileValues':[{'quantile':0,'value':1},{'quantile':0.5,'value':5.5},{'quantile':1,"
           "'value':10}]},{'count':0,'sum':0,'quantileValues':[]}]},"
           "{'name':'nodata','description':'no data oneof','type':'none','dataPoints':[]}"
           "]}}}");
    /* a histogram's absent sum and its zero sum differ */
    for (uint32_t i = 0; i < d.b->n_rows; i++) {
        const struct point_row *p = &d.b->points[i];
        if (d.b->metrics[p->metric].kind == MK_HISTOGRAM) {
            cr_expect_eq(p->has_sum, p->count == 0, "point %u", i);
        }
    }
    done(&d);
}

Test(jsondec, members_in_any_order_and_the_last_one_wins)
{
    struct dec d;
    /* value before key, keys given twice, values given twice */
    log_ok(&d, "{'attributes':[{'value':{'intValue':1},'key':'late'},{'key':'a','key':'b','value'"
               ":{'intValue':2}},{'key':'c','value':{'intValue':3},'value':{'stringValue':'4'}},{"
               "'value':{'intValue':5},'key':'d','value':{'intValue':6}},{'key':'e','value':{'"
               "intValue':7},'key':'f'}],'severityText':'x','timeUnixNano':'5','body':{'"
               "stringValue':'s','intValue':8},'traceId':'07df2818e033050913054e6abfd15df9','"
               "traceId':''}");
    log_expect(&d, "{'attributes':{'late':{'int':'1'},'b':{'int':'2'},'c':{'string':'4'},'d':{'"
                   "int':'6'},'f':{'int':'7'}},'severityText':'x','timeUnixNano':'5','body':{'int'"
                   ":'8'},'traceId':''}");
    done(&d);
    attr_is("{'stringValue':'a','intValue':5}", "{'int':'5'}");
    attr_is("{'intValue':5,'stringValue':'a'}", "{'string':'a'}");
    attr_is("{'intValue':5,'kvlistValue':{'values':[{'key':'x','value':{}}]}}",
            "{'kvlist':{'x':{}}}");
    attr_is("{'intValue':5,'stringValueStrindex':2}", "{}");
    attr_is("{'arrayValue':{'values':[{'intValue':1}],'values':[{'intValue':2}]}}",
            "{'array':[{'int':'2'}]}");
    log_ok(&d, "{'body':{'kvlistValue':{'values':[]},'stringValue':'last'}}");
    log_expect(&d, "{'body':{'string':'last'}}");
    done(&d);
    log_ok(&d, "{'body':{'stringValue':'first','arrayValue':{'values':[]}}}");
    log_expect(&d, "{'body':{'array':[]}}");
    done(&d);

    /* blob layouts whose JSON order differs from the stored order */
    ok(&d, SIG_TRACES,
       "{'resourceSpans':[{'scopeSpans':[{'spans':[{'status':{'message':'m','code':1},'events':"
       "[{'attributes':[{'key':'x','value':{'intValue':1}}],'droppedAttributesCount':2,'name':"
       "'ev','timeUnixNano':'9'}],'links':[{'attributes':[{'key':'y','value':{}}],'flags':3,'"
       "traceState':'t=1','spanId':'c16120de5f22c43d','droppedAttributesCount':4,'traceId':'"
       "07df2818e033050913054e6abfd15df9'}],'name':'n','events':[{'name':'second'}]}]}]}]}");
    expect(&d, SIG_TRACES,
           "{'expected':{'traces':{'spans':[{'name':'n','status':{'code':1,'message':'m'},'events'"
           ":[{'name':'second','timeUnixNano':'0','attributes':{}}],'links':[{'traceId':'"
           "07df2818e033050913054e6abfd15df9','spanId':'c16120de5f22c43d','traceState':'t=1','"
           "flags':3,'droppedAttributesCount':4,'attributes':{'y':{}}}]}]}}}");
    done(&d);

    ok(&d, SIG_METRICS,
       "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[{'gauge':{'dataPoints':[{'asInt':1},{'"
       "asInt':2}]},'sum':{'dataPoints':[{'asInt':3,'asDouble':3.5}],'isMonotonic':true,'"
       "dataPoints':[{'asInt':4}]},'name':"
       "'m'},{'histogram':{'dataPoints':[{'explicitBounds':[1,2],'bucketCounts':[4,5,6],'"
       "exemplars':[{'filteredAttributes':[{'key':'q','value':{}}],'asDouble':1,'asInt':2}]}]}}"
       ",{'exponentialHistogram':{'dataPoints':[{'negative':{'bucketCounts':[1],'offset':-1},'"
       "positive':{'bucketCounts':[2,3],'offset':4,'bucketCounts':[7]},'scale':1}]}}]}]}]}");
    expect(&d, SIG_METRICS,
           "{'expected':{'metrics':{'metrics':[{'name':'m','type':'sum','monotonic':true,'"
           "dataPoints':[{'value':{'double':3.5}},{'value':{'int':'4'}}]},{'type':'histogram','"
           "dataPoints':[{'"
           "bucketCounts':[4,5,6],'explicitBounds':[1,2],'exemplars':[{'value':{'int':'2'},'"
           "filteredAttributes':{'q':{}}}]}]},{'type':'exponential_histogram','dataPoints':[{'"
           "scale':1,'positive':{'offset':4,'bucketCounts':[7]},'negative':{'offset':-1,'"
           "bucketCounts':[1]}}]}]}}}");
    done(&d);
}

/* ---- malformed input ---- */

Test(jsondec, syntax_errors_are_refused_with_the_offset)
{
    static const struct {
        char json[96];
        char needle[48];
    } cases[] = {
        {"", "empty body"},
        {"  ", "empty body"},
        {"[]", "expected '{'"},
        {"null", "expected '{'"},
        {"'str'", "expected '{'"},
        {"{", "unexpected end of input"},
        {"}", "expected '{'"},
        {"{'resourceLogs':[}", "resource envelope: expected an object"},
        {"{'resourceLogs' []}", "expected ':'"},
        {"{'resourceLogs':[],}", "expected a member name"},
        {"{'resourceLogs':[{},]}", "resource envelope: expected an object"},
        {"{} {}", "trailing characters"},
        {"{'a':01}", "expected ',' or '}' at offset 6"},
        {"{'a':1.}", "malformed number"},
        {"{'a':.5}", "unexpected character"},
        {"{'a':-}", "malformed number"},
        {"{'a':1e}", "malformed number"},
        {"{'a':tru}", "unexpected characters"},
        {"{'a':nul}", "unexpected characters"},
        {"{'a':'\\x'}", "bad escape"},
        {"{'a':'\\u12'}", "bad \\u escape"},
        {"{'a':'\\u12G4'}", "bad \\u escape"},
        {"{'a':'\\ud800'}", "lone high surrogate"},
        {"{'a':'\\ud800\\u0041'}", "lone high surrogate"},
        {"{'a':'\\udc00'}", "lone low surrogate"},
        {"{'a':'unterminated}", "unterminated string"},
        {"{'a':[1 2]}", "expected ',' or ']'"},
        {"{'a':{'b':1 'c':2}}", "expected ',' or '}'"},
        {"{'a'}", "expected ':'"},
        {"{1:2}", "expected a member name"},
        {"/* c */{}", "expected '{'"},
        {"{'resourceLogs':[{'scopeLogs':[{'logRecords':[{}]}]}]", "unexpected end of input"},
        {"{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'body':{'stringValue':'x'}}]}]}]}}",
         "trailing characters"},
        {"{'resourceLogs':[{'scopeLogs':[{'logRecords':[{'severityText':'x' 'y'}]}]}]}",
         "expected ',' or '}'"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        bad(SIG_LOGS, cases[i].json, cases[i].needle);
    }
    /* control characters, a BOM, raw quotes that are not JSON */
    bad_raw(SIG_LOGS, "{\"a\":\"tab\there\"}", 16, "control character 0x09");
    bad_raw(SIG_LOGS, "{\"a\":\"nul\0\"}", 12, "control character 0x00");
    bad_raw(SIG_LOGS, "\xef\xbb\xbf{}", 5, "expected '{'");
    bad_raw(SIG_LOGS, "{'a':1}", 7, "expected a member name");
}

Test(jsondec, every_prefix_of_a_vector_is_refused_and_never_crashes)
{
    static const struct {
        char file[40];
        enum signal s;
    } v[] = {{"http-json-metrics.json", SIG_METRICS}, {"http-json-logs.json", SIG_LOGS}};
    for (size_t f = 0; f < sizeof(v) / sizeof(v[0]); f++) {
        size_t len;
        uint8_t *body = manifest_load_vector(v[f].file, &len);
        size_t end = len;
        while (end > 0 && body[end - 1] != '}') {
            end--; /* trailing whitespace: prefixes past the '}' are complete */
        }
        arena *a = arena_new(0);
        struct batch *b = batch_new(v[f].s);
        char err[256];
        for (size_t k = 0; k <= len; k++) {
            arena_reset(a);
            batch_reset(b, v[f].s);
            /* an exact-size copy, so ASan sees any read past the prefix */
            char *p = malloc(k ? k : 1);
            memcpy(p, body, k);
            int rc = jsondec_decode(v[f].s, p, k, a, b, err, sizeof(err));
            free(p);
            if (k < end) {
                cr_assert_eq(rc, -EPROTO, "%s: prefix of %zu bytes: rc %d", v[f].file, k, rc);
                cr_assert_eq(b->n_rows, 0);
            } else {
                cr_assert_eq(rc, 0, "%s: %zu bytes: %s", v[f].file, k, err);
            }
        }
        batch_free(b);
        arena_free(a);
        free(body);
    }
}

/* Builds an attribute value nested |levels| arrays (or kvlists) deep around an int. */
static char *nested(int levels, bool kvlist)
{
    const char *open =
        kvlist ? "{'kvlistValue':{'values':[{'key':'k','value':" : "{'arrayValue':{'values':[";
    const char *close = kvlist ? "}]}}" : "]}}";
    size_t n = (size_t)levels * (strlen(open) + strlen(close)) + 64;
    char *s = malloc(n), *p = s;
    for (int i = 0; i < levels; i++) {
        p = stpcpy(p, open);
    }
    p = stpcpy(p, "{'intValue':1}");
    for (int i = 0; i < levels; i++) {
        p = stpcpy(p, close);
    }
    return s;
}

static void nested_case(int levels, bool kvlist, bool accepted)
{
    char *v = nested(levels, kvlist);
    char *rec = malloc(strlen(v) + 64);
    sprintf(rec, "{'attributes':[{'key':'a','value':%s}]}", v);
    char *req = log_req(rec);
    char *body = q(req);
    struct dec d;
    run(&d, SIG_LOGS, body, strlen(body));
    if (accepted) {
        cr_expect_eq(d.rc, 0, "%d levels of %s: %s", levels, kvlist ? "kvlist" : "array", d.err);
        cr_expect_eq(val_check_attrs(batch_blob(d.b, d.b->logs[0].attrs.blob),
                                     d.b->logs[0].attrs.blob.len, 1),
                     0, "the encoding stays within what readers accept");
    } else {
        cr_expect_eq(d.rc, -EPROTO, "%d levels of %s accepted", levels,
                     kvlist ? "kvlist" : "array");
        cr_expect(strstr(d.err, "nested deeper than 64") != NULL, "%s", d.err);
    }
    done(&d);
    free(body);
    free(req);
    free(rec);
    free(v);
}

Test(jsondec, anyvalue_nesting_limit_and_hostile_depth)
{
    /* the attribute value is level 1: 63 containers put the int at level 64 */
    nested_case(63, false, true);
    nested_case(64, false, false);
    nested_case(63, true, true);
    nested_case(64, true, false);
    nested_case(100000, false, false);
    nested_case(100000, true, false);

    /* 100 000 levels under an unknown key and in a deferred value */
    size_t n = 100000;
    char *s = malloc(2 * n + 64), *p = s;
    p = stpcpy(p, "{\"x\":");
    memset(p, '[', n);
    p += n;
    memset(p, ']', n);
    p += n;
    strcpy(p, "}");
    bad_raw(SIG_LOGS, s, strlen(s), "nesting deeper than 1024");
    /* 1000 levels of unknown value are fine */
    p = s + 5;
    memset(p, '[', 1000);
    memset(p + 1000, ']', 1000);
    strcpy(p + 2000, "}");
    struct dec d;
    run(&d, SIG_LOGS, s, strlen(s));
    cr_expect_eq(d.rc, 0, "%s", d.err);
    done(&d);
    free(s);

    char *v = nested(100000, false);
    char *rec = malloc(strlen(v) + 64);
    sprintf(rec, "{'attributes':[{'value':%s,'key':'k'}]}", v);
    log_bad(rec, "nesting deeper than 1024");
    free(rec);
    free(v);
}

Test(jsondec, invalid_utf8_is_refused)
{
    static const struct {
        char bytes[8];
        size_t n;
    } badseq[] = {
        {"\xff", 1},
        {"\xc0\xaf", 2},
        {"\xc3", 1},
        {"\xe2\x82", 2},
        {"\xed\xa0\x80", 3},
        {"\xf4\x90\x80\x80", 4},
        {"\xf8\x88\x80\x80", 4},
        {"\x80", 1},
    };
    for (size_t i = 0; i < sizeof(badseq) / sizeof(badseq[0]); i++) {
        char body[96];
        int k = snprintf(body, sizeof(body),
                         "{\"resourceLogs\":[{\"scopeLogs\":[{\"logRecords\":"
                         "[{\"severityText\":\"a");
        memcpy(body + k, badseq[i].bytes, badseq[i].n);
        k += (int)badseq[i].n;
        k += snprintf(body + k, sizeof(body) - (size_t)k, "\"}]}]}]}");
        bad_raw(SIG_LOGS, body, (size_t)k, "invalid UTF-8 at offset 64");
    }
    bad_raw(SIG_LOGS, "{\"\xff\":1}", 7, "invalid UTF-8 at offset 2");
    bad_raw(SIG_LOGS, "{}\xc3", 3, "invalid UTF-8 at offset 2");
}

Test(jsondec, wrong_json_types_are_refused)
{
    bad(SIG_LOGS, "{'resourceLogs':{}}", "resourceLogs: expected an array");
    bad(SIG_LOGS, "{'resourceLogs':[{'resource':'x'}]}", "resource: expected an object");
    bad(SIG_LOGS, "{'resourceLogs':[{'resource':{'attributes':{}}}]}", "expected an array");
    bad(SIG_LOGS, "{'resourceLogs':[{'scopeLogs':{}}]}", "scopeLogs: expected an array");
    bad(SIG_LOGS, "{'resourceLogs':[{'scopeLogs':[{'scope':[]}]}]}", "scope: expected an object");
    bad(SIG_LOGS, "{'resourceLogs':[{'scopeLogs':[{'logRecords':{}}]}]}",
        "logRecords: expected an array");
    bad(SIG_LOGS, "{'resourceLogs':[{'scopeLogs':[{'logRecords':['x']}]}]}",
        "logRecords: expected an object");
    bad(SIG_LOGS, "{'resourceLogs':[{'schemaUrl':5}]}", "schemaUrl: expected a string");
    log_bad("{'attributes':{}}", "attributes: expected an array");
    log_bad("{'attributes':['x']}", "KeyValue: expected an object");
    log_bad("{'attributes':[{'key':5}]}", "key: expected a string");
    log_bad("{'body':'text'}", "AnyValue: expected an object");
    log_bad("{'timeUnixNano':true}", "timeUnixNano: expected a number");
    log_bad("{'timeUnixNano':{}}", "timeUnixNano: expected a number");
    log_bad("{'severityText':5}", "severityText: expected a string");
    log_bad("{'traceId':5}", "traceId: expected a string");
    attr_bad("{'boolValue':'true'}", "boolValue: expected true or false");
    attr_bad("{'stringValue':1}", "stringValue: expected a string");
    attr_bad("{'arrayValue':[]}", "arrayValue: expected an object");
    attr_bad("{'kvlistValue':{'values':{}}}", "values: expected an array");
    attr_bad("{'kvlistValue':{'values':[1]}}", "KeyValue: expected an object");
    static const char *const spans[][2] = {
        {"{'events':'x'}", "events: expected an array"},
        {"{'events':[1]}", "events: expected an object"},
        {"{'links':{}}", "links: expected an array"},
        {"{'status':2}", "status: expected an object"},
        {"{'status':{'message':[]}}", "status.message: expected a string"},
        {"{'name':null,'kind':[]}", "kind: expected a number"},
    };
    for (size_t i = 0; i < sizeof(spans) / sizeof(spans[0]); i++) {
        char body[200];
        snprintf(body, sizeof(body), "{'resourceSpans':[{'scopeSpans':[{'spans':[%s]}]}]}",
                 spans[i][0]);
        bad(SIG_TRACES, body, spans[i][1]);
    }
    static const char *const metrics[][2] = {
        {"{'gauge':[]}", "gauge: expected an object"},
        {"{'sum':{'dataPoints':{}}}", "dataPoints: expected an array"},
        {"{'sum':{'isMonotonic':'true'}}", "isMonotonic: expected true or false"},
        {"{'histogram':{'dataPoints':[{'bucketCounts':'1,2'}]}}",
         "bucketCounts: expected an array"},
        {"{'exponentialHistogram':{'dataPoints':[{'positive':[]}]}}",
         "positive: expected an object"},
        {"{'summary':{'dataPoints':[{'quantileValues':[1]}]}}",
         "quantileValues: expected an object"},
        {"{'gauge':{'dataPoints':[{'exemplars':[{'filteredAttributes':{}}]}]}}",
         "exemplars.filteredAttributes: expected an array"},
        {"{'name':{}}", "name: expected a string"},
    };
    for (size_t i = 0; i < sizeof(metrics) / sizeof(metrics[0]); i++) {
        char body[200];
        snprintf(body, sizeof(body), "{'resourceMetrics':[{'scopeMetrics':[{'metrics':[%s]}]}]}",
                 metrics[i][0]);
        bad(SIG_METRICS, body, metrics[i][1]);
    }
}

/* ---- the manifest checker itself must be able to fail ---- */

Test(manifest, comparisons_detect_differences)
{
    struct dec d;
    char why[512];
    log_ok(&d, "{'attributes':[{'key':'i','value':{'intValue':5}},{'key':'s','value':{'"
               "stringValue':'x'}},{'key':'arr','value':{'arrayValue':{'values':[{'doubleValue':"
               "1.5},{'bytesValue':'AQ=='}]}}},{'key':'kv','value':{'kvlistValue':{'values':[{'"
               "key':'b','value':{'boolValue':true}}]}}}]}");
    const struct batch *b = d.b;
    struct attrs at = b->logs[0].attrs;
    static const char *const right =
        "{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},'kv'"
        ":{'kvlist':{'b':{'bool':true}}}}";
    static const char *const wrong[][2] = {
        {"{'i':{'int':'6'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},'kv'"
         ":{'kvlist':{'b':{'bool':true}}}}",
         "[\"i\"]: expected {\"int\":\"6\"}, got {\"int\":\"5\"}"},
        {"{'i':{'string':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},"
         "'kv':{'kvlist':{'b':{'bool':true}}}}",
         "(int)"},
        {"{'i':{'int':'5'},'s':{'string':'y'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},'kv'"
         ":{'kvlist':{'b':{'bool':true}}}}",
         "[\"s\"]"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.25},{'bytes':'01'}]},'"
         "kv':{'kvlist':{'b':{'bool':true}}}}",
         "[\"arr\"]: [0]"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'02'}]},'kv'"
         ":{'kvlist':{'b':{'bool':true}}}}",
         "[1]"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5}]},'kv':{'kvlist':{'b'"
         ":{'bool':true}}}}",
         "[\"arr\"]"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},'kv'"
         ":{'kvlist':{'b':{'bool':false}}}}",
         "[\"kv\"]: [\"b\"]"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},'kv'"
         ":{'kvlist':{'c':{'bool':true}}}}",
         "key \"c\" missing"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]}}",
         "4 entries, want 3"},
        {"{'i':{'int':'5'},'s':{'string':'x'},'arr':{'array':[{'double':1.5},{'bytes':'01'}]},'kv'"
         ":{'kvlist':{'b':{'bool':true}}},'extra':{}}",
         "4 entries, want 5"},
    };
    char *t = q(right);
    json_t *j = json_loads(t, 0, NULL);
    free(t);
    cr_assert(j != NULL);
    cr_expect(manifest_attrs_eq(j, b, at, why, sizeof(why)), "%s", why);
    json_decref(j);
    for (size_t i = 0; i < sizeof(wrong) / sizeof(wrong[0]); i++) {
        t = q(wrong[i][0]);
        j = json_loads(t, 0, NULL);
        free(t);
        cr_assert(j != NULL, "case %zu", i);
        why[0] = '\0';
        cr_expect(!manifest_attrs_eq(j, b, at, why, sizeof(why)), "case %zu passed", i);
        cr_expect(strstr(why, wrong[i][1]) != NULL, "case %zu: \"%s\" lacks \"%s\"", i, why,
                  wrong[i][1]);
        json_decref(j);
    }
    /* empty vs absent value kinds */
    struct val e = {.type = VAL_EMPTY}, s = {.type = VAL_STR, .s = "", .n = 0};
    json_t *empty = json_object(), *str = json_pack("{s:s}", "string", "");
    cr_expect(manifest_anyvalue_eq(empty, &e, NULL, 0));
    cr_expect(manifest_anyvalue_eq(json_null(), &e, NULL, 0));
    cr_expect(!manifest_anyvalue_eq(empty, &s, NULL, 0));
    cr_expect(!manifest_anyvalue_eq(str, &e, NULL, 0));
    cr_expect(manifest_anyvalue_eq(str, &s, NULL, 0));
    json_decref(empty);
    json_decref(str);
    done(&d);
}

/* ---- the same records through both decoders ---- */

static bool same_bytes(const struct batch *x, struct blob a, const struct batch *y, struct blob b)
{
    return a.len == b.len &&
           (a.len == 0 || memcmp(x->heap.p + a.off, y->heap.p + b.off, a.len) == 0);
}

static bool same_str(struct mstr a, struct mstr b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool same_attrs(const struct batch *x, struct attrs a, const struct batch *y, struct attrs b)
{
    return a.count == b.count && same_bytes(x, a.blob, y, b.blob);
}

/* Resources differ only in "acceptance.protocol", which names the capture. */
static void same_resource(const struct batch *j, const struct res_row *a, const struct batch *p,
                          const struct res_row *b)
{
    json_t *ja =
        manifest_attrs_to_json(batch_blob(j, a->attrs.blob), a->attrs.blob.len, a->attrs.count);
    json_t *jb =
        manifest_attrs_to_json(batch_blob(p, b->attrs.blob), b->attrs.blob.len, b->attrs.count);
    cr_assert(ja != NULL && jb != NULL);
    cr_expect_eq(json_object_del(ja, "acceptance.protocol"), 0);
    cr_expect_eq(json_object_del(jb, "acceptance.protocol"), 0);
    cr_expect(json_equal(ja, jb), "resource attributes differ");
    cr_expect(same_str(a->schema_url, b->schema_url) && a->dropped_attrs == b->dropped_attrs);
    json_decref(ja);
    json_decref(jb);
}

static void same_scope(const struct batch *j, uint32_t sa, const struct batch *p, uint32_t sb)
{
    const struct scope_row *a = &j->scopes[sa], *b = &p->scopes[sb];
    cr_expect(same_str(a->name, b->name) && same_str(a->version, b->version) &&
                  same_attrs(j, a->attrs, p, b->attrs) && a->dropped_attrs == b->dropped_attrs &&
                  same_str(a->schema_url, b->schema_url),
              "scope %u differs", sa);
}

Test(jsondec, maps_records_exactly_as_the_protobuf_decoder)
{
    static const struct {
        char json[32], pb[32];
        enum signal s;
    } v[] = {
        {"http-json-logs.json", "http-protobuf-logs.pb", SIG_LOGS},
        {"http-json-traces.json", "http-protobuf-traces.pb", SIG_TRACES},
        {"http-json-metrics.json", "http-protobuf-metrics.pb", SIG_METRICS},
    };
    for (size_t f = 0; f < sizeof(v) / sizeof(v[0]); f++) {
        size_t jn, pn;
        uint8_t *jbody = manifest_load_vector(v[f].json, &jn);
        uint8_t *pbody = manifest_load_vector(v[f].pb, &pn);
        arena *a = arena_new(0);
        struct batch *j = batch_new(v[f].s), *p = batch_new(v[f].s);
        char err[256];
        cr_assert_eq(jsondec_decode(v[f].s, (const char *)jbody, jn, a, j, err, sizeof(err)), 0,
                     "%s", err);
        cr_assert_eq(pbdec_decode(v[f].s, pbody, pn, p, err, sizeof(err)), 0, "%s", err);
        cr_assert_eq(j->n_resources, p->n_resources, "%s", v[f].json);
        cr_assert_eq(j->n_scopes, p->n_scopes, "%s", v[f].json);
        cr_assert_eq(j->n_metrics, p->n_metrics, "%s", v[f].json);
        cr_assert_eq(j->n_rows, p->n_rows, "%s", v[f].json);
        for (uint32_t i = 0; i < j->n_resources; i++) {
            same_resource(j, &j->resources[i], p, &p->resources[i]);
        }
        for (uint32_t i = 0; i < j->n_scopes; i++) {
            cr_expect_eq(j->scopes[i].resource, p->scopes[i].resource);
            same_scope(j, i, p, i);
        }
        for (uint32_t i = 0; i < j->n_metrics; i++) {
            const struct metric_row *x = &j->metrics[i], *y = &p->metrics[i];
            cr_expect(x->scope == y->scope && same_str(x->name, y->name) &&
                          same_str(x->description, y->description) && same_str(x->unit, y->unit) &&
                          x->kind == y->kind && x->temporality == y->temporality &&
                          x->monotonic == y->monotonic &&
                          same_attrs(j, x->metadata, p, y->metadata),
                      "metric %u differs", i);
        }
        for (uint32_t i = 0; i < j->n_rows; i++) {
            if (v[f].s == SIG_LOGS) {
                const struct log_row *x = &j->logs[i], *y = &p->logs[i];
                cr_expect(
                    x->time_ns == y->time_ns && x->observed_ns == y->observed_ns &&
                        x->scope == y->scope && x->severity_number == y->severity_number &&
                        same_str(x->severity_text, y->severity_text) &&
                        x->body_type == y->body_type &&
                        (x->body_type == VAL_STR ? same_str(x->body_str, y->body_str)
                                                 : same_bytes(j, x->body_val, p, y->body_val)) &&
                        same_attrs(j, x->attrs, p, y->attrs) &&
                        x->dropped_attrs == y->dropped_attrs && x->flags == y->flags &&
                        x->has_trace_id == y->has_trace_id && x->has_span_id == y->has_span_id &&
                        memcmp(x->trace_id, y->trace_id, 16) == 0 &&
                        memcmp(x->span_id, y->span_id, 8) == 0 &&
                        same_str(x->event_name, y->event_name),
                    "log row %u differs", i);
            } else if (v[f].s == SIG_TRACES) {
                const struct span_row *x = &j->spans[i], *y = &p->spans[i];
                cr_expect(x->start_ns == y->start_ns && x->end_ns == y->end_ns &&
                              x->scope == y->scope && memcmp(x->trace_id, y->trace_id, 16) == 0 &&
                              memcmp(x->span_id, y->span_id, 8) == 0 &&
                              x->has_parent == y->has_parent &&
                              memcmp(x->parent_span_id, y->parent_span_id, 8) == 0 &&
                              same_str(x->trace_state, y->trace_state) &&
                              same_str(x->name, y->name) && x->kind == y->kind &&
                              x->flags == y->flags && x->status_code == y->status_code &&
                              same_str(x->status_message, y->status_message) &&
                              same_attrs(j, x->attrs, p, y->attrs) &&
                              x->dropped_attrs == y->dropped_attrs && x->n_events == y->n_events &&
                              same_bytes(j, x->events, p, y->events) &&
                              x->dropped_events == y->dropped_events && x->n_links == y->n_links &&
                              same_bytes(j, x->links, p, y->links) &&
                              x->dropped_links == y->dropped_links,
                          "span row %u differs", i);
            } else {
                /* metric timestamps are taken at export time: each capture has its own */
                const struct point_row *x = &j->points[i], *y = &p->points[i];
                cr_expect(x->metric == y->metric && same_attrs(j, x->attrs, p, y->attrs) &&
                              x->flags == y->flags && x->value_type == y->value_type &&
                              memcmp(&x->value, &y->value, sizeof(x->value)) == 0 &&
                              x->count == y->count && x->has_sum == y->has_sum &&
                              x->has_min == y->has_min && x->has_max == y->has_max &&
                              (!x->has_sum || x->sum == y->sum) &&
                              (!x->has_min || x->min == y->min) &&
                              (!x->has_max || x->max == y->max) &&
                              same_bytes(j, x->detail, p, y->detail) &&
                              x->n_exemplars == y->n_exemplars &&
                              same_bytes(j, x->exemplars, p, y->exemplars),
                          "point row %u differs", i);
            }
        }
        batch_free(j);
        batch_free(p);
        arena_free(a);
        free(jbody);
        free(pbody);
    }
}

/* Decimal text in many shapes: the decoder must read each as strtod does. */
Test(jsondec, doubles_read_exactly_as_strtod_does)
{
    enum { N = 3000 };
    static char num[N][40];
    uint64_t x = 0x9e3779b97f4a7c15ull;
    size_t cap = N * 80 + 128, len = 0;
    char *rec = malloc(cap);
    len += (size_t)snprintf(rec + len, cap - len, "{'attributes':[");
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int digits = 1 + (int)(x % 19), frac = (int)((x >> 8) % (digits + 1));
        int exp = (int)((x >> 16) % 61) - 30;
        char d[24];
        uint64_t m = x >> 20;
        for (int k = 0; k < digits; k++, m /= 10) {
            d[k] = (char)('0' + m % 10);
        }
        d[0] = d[0] == '0' ? '1' : d[0]; /* no leading zero */
        int n =
            snprintf(num[i], sizeof(num[i]), "%s%.*s", (x >> 40) & 1 ? "-" : "", digits - frac, d);
        if (frac != 0) {
            n += snprintf(num[i] + n, sizeof(num[i]) - (size_t)n, "%s%.*s",
                          digits == frac ? "0." : ".", frac, d + digits - frac);
        }
        if ((x >> 50) & 1) {
            snprintf(num[i] + n, sizeof(num[i]) - (size_t)n, "e%d", exp);
        }
        len += (size_t)snprintf(rec + len, cap - len, "%s{'key':'%d','value':{'doubleValue':%s}}",
                                i ? "," : "", i, num[i]);
    }
    snprintf(rec + len, cap - len, "]}");
    struct dec d;
    log_ok(&d, rec);
    const struct attrs *at = &d.b->logs[0].attrs;
    cr_assert_eq(at->count, N);
    struct val_rd r = {batch_blob(d.b, at->blob), batch_blob(d.b, at->blob) + at->blob.len};
    int bad_n = 0;
    for (int i = 0; i < N; i++) {
        const char *k;
        size_t kn;
        struct val v;
        cr_assert_eq(val_rd_kv(&r, &k, &kn, &v), 0);
        cr_assert_eq(v.type, VAL_DOUBLE);
        double want = strtod(num[i], NULL);
        if (memcmp(&want, &v.d, sizeof(double)) != 0 && bad_n++ < 10) {
            cr_expect(false, "%s: read %.17g, strtod says %.17g", num[i], v.d, want);
        }
    }
    cr_expect_eq(bad_n, 0);
    free(rec);
    done(&d);
}
