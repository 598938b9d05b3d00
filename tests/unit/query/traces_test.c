/*
 * traces_test.c - the traces module (query/traces.h) over a small
 * hand-made corpus in the catalog: one sealed block and one open block, a
 * trace split across both. Every intrinsic, attribute scope and operator,
 * spanset operators, structural operators and pipelines are checked against
 * the exact set of traces a reader computes by hand from the table below;
 * then result shapes (FACTS.md D.3), limits, time ranges, pruning counters,
 * tags and tag values, traces by id, and a damaged block quarantined while
 * the query goes on.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <event2/buffer.h>
#include <jansson.h>

#include "lib/jsonw.h"
#include "query/qctx.h"
#include "query/traceql.h"
#include "query/traces.h"
#include "storage/batch.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/oblock.h"
#include "storage/val.h"
#include "tests/util/blkflip.h"
#include "tests/util/tmpdir.h"

#define T0 UINT64_C(1700000000) /* seconds */
#define MS UINT64_C(1000000)

/*
 * The corpus. Resources: 0 api/prod, 1 db/prod, 2 web/dev.
 *
 * trace 1 (sealed)         trace 2 (sealed, s3 open)   trace 3 (open)     trace 4 (open)
 *  a1 api GET /users S ok   b1 web GET /home S error    c1 api POST /orders d1 api orphan
 *     1000ms +100ms            2000 +300                   S unset 3000 +5   consumer 4000 +1
 *   a2 api auth I 1010 +10   b2 api GET /users C ok      ratio=0.5          parent missing
 *   a3 db SELECT users C       2010 +200                 retry=true
 *      error 1020 +50          b3 db SELECT users C
 *      db.system=postgres        unset 2020 +20
 *      tags=[a,b]                db.system=mysql
 */
struct sspec {
    int trace;
    const char *span, *parent;
    int res;
    const char *name;
    int kind, status;
    uint64_t start_ms, dur_ms;
    const char *attrs; /* key=<t>value;...  t: s string, i int, d double, b bool, a array */
};

static const struct sspec sealed_spans[] = {
    {1, "00000000000000a1", NULL, 0, "GET /users", 2, 1, 1000, 100,
     "http.status_code=i200;http.method=sGET"},
    {1, "00000000000000a2", "00000000000000a1", 0, "auth", 1, 0, 1010, 10, ""},
    {1, "00000000000000a3", "00000000000000a1", 1, "SELECT users", 3, 2, 1020, 50,
     "db.system=spostgres;tags=aa,b"},
    {2, "00000000000000b1", NULL, 2, "GET /home", 2, 2, 2000, 300,
     "http.status_code=i500;http.method=sGET"},
    {2, "00000000000000b2", "00000000000000b1", 0, "GET /users", 3, 1, 2010, 200,
     "http.status_code=i200"},
};

static const struct sspec open_spans[] = {
    {2, "00000000000000b3", "00000000000000b2", 1, "SELECT users", 3, 0, 2020, 20,
     "db.system=smysql"},
    {3, "00000000000000c1", NULL, 0, "POST /orders", 2, 0, 3000, 5,
     "http.method=sPOST;ratio=d0.5;retry=btrue"},
    {4, "00000000000000d1", "ffffffffffffffff", 0, "orphan", 5, 0, 4000, 1, ""},
};

static const char *const svc[] = {"api", "db", "web"};
static const char *const env[] = {"prod", "prod", "dev"};

static char dir[256];

static void hexbytes(const char *h, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        cr_assert_eq(sscanf(h + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void put_attrs(struct batch *b, const char *spec, struct attrs *out)
{
    struct vbuf *h = &b->heap;
    size_t off = h->len;
    uint32_t n = 0;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save = NULL, *kv = strtok_r(buf, ";", &save); kv; kv = strtok_r(NULL, ";", &save)) {
        char *eq = strchr(kv, '=');
        cr_assert_not_null(eq);
        *eq = 0;
        const char *v = eq + 2;
        cr_assert_eq(val_put_key(h, kv, strlen(kv)), 0);
        switch (eq[1]) {
        case 's':
            cr_assert_eq(val_put_str(h, v, strlen(v)), 0);
            break;
        case 'i':
            cr_assert_eq(val_put_int(h, strtoll(v, NULL, 10)), 0);
            break;
        case 'd':
            cr_assert_eq(val_put_double(h, strtod(v, NULL)), 0);
            break;
        case 'b':
            cr_assert_eq(val_put_bool(h, strcmp(v, "true") == 0), 0);
            break;
        case 'a': {
            long at = val_open(h, VAL_ARRAY);
            uint32_t k = 0;
            char tmp[64];
            snprintf(tmp, sizeof(tmp), "%s", v);
            for (char *s2 = NULL, *e = strtok_r(tmp, ",", &s2); e; e = strtok_r(NULL, ",", &s2)) {
                cr_assert_eq(val_put_str(h, e, strlen(e)), 0);
                k++;
            }
            val_close(h, at, k);
            break;
        }
        default:
            cr_assert_fail("bad attr spec %s", spec);
        }
        n++;
    }
    out->blob = (struct blob){(uint32_t)off, (uint32_t)(h->len - off)};
    out->count = n;
}

static oblock *make_block(const struct sspec *sp, size_t n)
{
    struct batch *b = batch_new(SIG_TRACES);
    cr_assert_not_null(b);
    for (int r = 0; r < 3; r++) {
        struct res_row *rr = batch_add_resource(b);
        char spec[64];
        snprintf(spec, sizeof(spec), "service.name=s%s;env=s%s", svc[r], env[r]);
        put_attrs(b, spec, &rr->attrs);
        struct scope_row *sc = batch_add_scope(b);
        sc->resource = (uint32_t)r;
        sc->name = (struct mstr){"lib", 3};
        sc->version = (struct mstr){"1.0", 3};
    }
    for (size_t i = 0; i < n; i++) {
        struct span_row *s = batch_add_span(b);
        memset(s->trace_id, 0, 16);
        s->trace_id[15] = (uint8_t)sp[i].trace;
        hexbytes(sp[i].span, s->span_id, 8);
        if (sp[i].parent != NULL) {
            hexbytes(sp[i].parent, s->parent_span_id, 8);
            s->has_parent = true;
        }
        s->scope = (uint32_t)sp[i].res;
        s->name = (struct mstr){sp[i].name, (uint32_t)strlen(sp[i].name)};
        s->kind = sp[i].kind;
        s->status_code = sp[i].status;
        s->start_ns = T0 * 1000000000u + sp[i].start_ms * MS;
        s->end_ns = s->start_ns + sp[i].dur_ms * MS;
        put_attrs(b, sp[i].attrs, &s->attrs);
    }
    oblock *ob;
    cr_assert_eq(oblock_new(SIG_TRACES, &ob), 0);
    cr_assert_eq(oblock_append(ob, b, 1), 0);
    batch_free(b);
    return ob;
}

/* Seals |ob| as DATA/traces/<name>.blk; with |damage|, one byte of its
 * attribute table is flipped first (the root table stays intact). */
static void seal_ex(oblock *ob, uint64_t seal_id, bool damage)
{
    struct cat_open *h = catalog_open_add(SIG_TRACES, ob);
    cr_assert_not_null(h);
    struct blk_meta m = {.shard = 0, .wal_seq = seal_id, .seal_id = seal_id};
    char sub[300], path[512], err[256];
    cr_assert_eq(tmpdir_join(sub, sizeof(sub), dir, "traces"), 0);
    mkdir(sub, 0755);
    cr_assert_eq(blk_write(sub, ob, oblock_rows(ob), &m, path, sizeof(path)), 0);
    blk *b;
    cr_assert_eq(blk_open(path, &b, err, sizeof(err)), 0, "%s", err);
    if (damage) {
        blk_unref(b);
        cr_assert_eq(blkflip_table(path, BLK_T_ATTRS), 0);
        cr_assert_eq(blk_open_ex(path, BLK_OPEN_NO_CACHE, &b, err, sizeof(err)), 0, "%s", err);
    }
    cr_assert_eq(catalog_publish(h, b, path), 0);
}

static void seal(oblock *ob, uint64_t seal_id)
{
    seal_ex(ob, seal_id, false);
}

static void corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    seal(make_block(sealed_spans, sizeof(sealed_spans) / sizeof(sealed_spans[0])), 1);
    cr_assert_not_null(catalog_open_add(
        SIG_TRACES, make_block(open_spans, sizeof(open_spans) / sizeof(open_spans[0]))));
}

static void teardown(void)
{
    catalog_fini();
}

TestSuite(traces_search, .init = corpus, .fini = teardown);

/* Runs a search; returns the JSON answer (caller decrefs). */
static json_t *run(const char *q, uint64_t start_s, uint64_t end_s, uint32_t limit, uint32_t spss,
                   struct qs_scan *scan)
{
    struct traceql_expr *e = NULL;
    char err[256];
    if (q != NULL) {
        cr_assert_eq(traceql_parse(q, strlen(q), &e, err, sizeof(err)), 0, "%s: %s", q, err);
    }
    struct traces_search_req rq = {
        .expr = e,
        .start_ns = start_s * 1000000000u,
        .end_ns = end_s * 1000000000u,
        .limit = limit,
        .spss = spss,
    };
    struct evbuffer *out = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, out);
    cr_assert_eq(traces_search(&rq, &w, scan, err, sizeof(err)), 0, "%s: %s", q, err);
    size_t len = evbuffer_get_length(out);
    json_error_t je;
    json_t *j = json_loadb((const char *)evbuffer_pullup(out, (ssize_t)len), len, 0, &je);
    cr_assert_not_null(j, "%s: not JSON", q);
    evbuffer_free(out);
    traceql_free(e);
    return j;
}

/* The traceIDs of an answer joined by ','. */
static void ids(json_t *j, char *out, size_t cap)
{
    size_t i;
    json_t *t;
    out[0] = 0;
    json_t *traces = json_object_get(j, "traces");
    cr_assert(json_is_array(traces), "traces is always an array");
    json_array_foreach(traces, i, t)
    {
        strncat(out, json_string_value(json_object_get(t, "traceID")), cap - strlen(out) - 2);
        if (i + 1 < json_array_size(traces)) {
            strcat(out, ",");
        }
    }
}

static void expect(const char *q, const char *want)
{
    char got[256];
    json_t *j = run(q, 0, 0, 20, 3, NULL);
    ids(j, got, sizeof(got));
    cr_expect_str_eq(got, want, "%s", q);
    json_decref(j);
}

Test(traces_search, intrinsics)
{
    expect("{}", "4,3,2,1");
    expect("{ name = \"GET /users\" }", "2,1");
    expect("{ name != \"GET /users\" }", "4,3,2,1");
    expect("{ name =~ \"GET\" }", ""); /* fully anchored */
    expect("{ name =~ \"GET.*\" }", "2,1");
    expect("{ name !~ \".*s\" }", "4,2,1");
    expect("{ status = error }", "2,1");
    expect("{ status = ok }", "2,1");
    expect("{ status = unset }", "4,3,2,1");
    expect("{ status != unset }", "2,1");
    expect("{ kind = client }", "2,1");
    expect("{ kind = consumer }", "4");
    expect("{ kind = internal }", "1");
    expect("{ duration > 100ms }", "2");
    expect("{ duration >= 100ms }", "2,1");
    expect("{ duration < 5ms }", "4");
    expect("{ duration <= 5ms }", "4,3");
    expect("{ duration = 10ms }", "1");
    expect("{ span:duration > 0.25s }", "2");
    expect("{ rootName = \"GET /home\" }", "2");
    expect("{ rootServiceName = \"api\" }", "3,1");
    expect("{ trace:rootService = \"web\" }", "2");
    expect("{ traceDuration > 250ms }", "2");
    expect("{ traceDuration >= 100ms }", "2,1");
    expect("{ traceDuration < 2ms }", "4");
    expect("{ span:childCount = 2 }", "1");
    expect("{ span:childCount = 1 }", "2");
    expect("{ span:id = \"00000000000000c1\" }", "3");
    expect("{ span:parentID = \"00000000000000b2\" }", "2");
    expect("{ trace:id = \"00000000000000000000000000000004\" }", "4");
    expect("{ instrumentation:name = \"lib\" && name = \"auth\" }", "1");
}

Test(traces_search, attributes_scopes_and_types)
{
    expect("{ span.http.status_code = 200 }", "2,1");
    expect("{ span.http.status_code >= 500 }", "2");
    expect("{ span.http.status_code != 200 }", "2");
    expect("{ span.http.status_code = \"200\" }", ""); /* int is not string */
    expect("{ .http.status_code = 200 }", "2,1");
    expect("{ span.service.name = \"api\" }", ""); /* a resource attribute */
    expect("{ resource.service.name = \"db\" }", "2,1");
    expect("{ .service.name = \"web\" }", "2");
    expect("{ resource.env != \"prod\" }", "2");
    expect("{ resource.env = \"dev\" && name = \"GET /users\" }", ""); /* same span */
    expect("{ span.http.method =~ \"P.*\" }", "3");
    expect("{ span.http.method !~ \"G.*\" }", "3"); /* spans without it do not match */
    expect("{ span.ratio > 0.4 }", "3");
    expect("{ span.ratio < 0.4 }", "");
    expect("{ span.ratio = 0.5 }", "3");
    expect("{ span.retry = true }", "3");
    expect("{ span.retry = false }", "");
    expect("{ span.tags = \"b\" }", "1");  /* an array matches by any element */
    expect("{ span.tags != \"c\" }", "1"); /* ... and != needs every element */
    expect("{ span.tags != \"a\" }", "");
    expect("{ span.nope = nil }", "4,3,2,1");
    expect("{ span.db.system != nil }", "2,1");
    expect("{ instrumentation.nope = nil && name = \"orphan\" }", "4");
    expect("{ span.http.status_code - 100 = 100 }", "2,1");
    expect("{ span.http.status_code / 2 > 200 }", "2");
}

Test(traces_search, spanset_and_structural_operators)
{
    expect("{ span.db.system = \"postgres\" && kind = client }", "1");
    expect("{ span.db.system = \"postgres\" } && { resource.service.name = \"web\" }", "");
    expect("{ span.db.system = \"mysql\" } && { resource.service.name = \"web\" }", "2");
    expect("{ span.db.system = \"postgres\" } || { status = error && resource.service.name = "
           "\"web\" }",
           "2,1");
    expect("{ kind = server } && { kind = client }", "2,1");
    expect("({ kind = consumer } || { name = \"auth\" }) && { }", "4,1");
    expect("{ name = \"x\" || kind = consumer }", "4");
    expect("{ !(kind = server) && status = ok }", "2");
    expect("{ resource.service.name = \"web\" } > { resource.service.name = \"api\" }", "2");
    expect("{ resource.service.name = \"api\" } > { resource.service.name = \"web\" }", "");
    expect("{ name = \"GET /home\" } >> { name = \"SELECT users\" }", "2");
    expect("{ name = \"GET /home\" } > { name = \"SELECT users\" }", "");
    expect("{ kind = server } > { kind = client }", "2,1");
    expect("{ name = \"auth\" } ~ { name = \"SELECT users\" }", "1");
    expect("{ name = \"SELECT users\" } < { name = \"GET /users\" }", "2,1");
    expect("{ name = \"SELECT users\" } << { name = \"GET /home\" }", "2");
    expect("{ kind = server } !> { kind = client }", "2");
}

Test(traces_search, pipelines)
{
    expect("{ } | count() > 2", "2,1");
    expect("{ kind = client } | count() = 1", "1");
    expect("{ } | avg(duration) > 100ms", "2");
    expect("{ } | max(duration) >= 300ms", "2");
    expect("{ } | min(duration) < 2ms", "4");
    expect("{ } | sum(duration) = 160ms", "1");
    expect("{ } | by(resource.service.name) | count() = 2", "1");
    expect("{ } | by(resource.service.name) | coalesce() | count() = 3", "2,1");
    expect("{ status = error } | { kind = client }", "1");
}

static json_t *trace_of(json_t *j, const char *id)
{
    size_t i;
    json_t *t;
    json_array_foreach(json_object_get(j, "traces"), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "traceID")), id) == 0) {
            return t;
        }
    }
    cr_assert_fail("trace %s missing", id);
    return NULL;
}

Test(traces_search, result_shape)
{
    json_t *j = run("{ kind = client }", 0, 0, 20, 1, NULL);
    json_t *t = trace_of(j, "2");
    cr_assert_str_eq(json_string_value(json_object_get(t, "rootServiceName")), "web");
    cr_assert_str_eq(json_string_value(json_object_get(t, "rootTraceName")), "GET /home");
    char ts[32];
    snprintf(ts, sizeof(ts), "%" PRIu64, T0 * 1000000000u + 2000 * MS);
    cr_assert_str_eq(json_string_value(json_object_get(t, "startTimeUnixNano")), ts);
    cr_assert_eq(json_integer_value(json_object_get(t, "durationMs")), 300);
    json_t *sets = json_object_get(t, "spanSets");
    cr_assert_eq(json_array_size(sets), 1);
    json_t *ss = json_array_get(sets, 0);
    cr_assert(json_equal(ss, json_object_get(t, "spanSet")));
    cr_assert_eq(json_integer_value(json_object_get(ss, "matched")), 2);
    json_t *spans = json_object_get(ss, "spans");
    cr_assert_eq(json_array_size(spans), 1, "spss = 1");
    json_t *sp = json_array_get(spans, 0);
    cr_assert_str_eq(json_string_value(json_object_get(sp, "spanID")), "00000000000000b2");
    cr_assert_str_eq(json_string_value(json_object_get(sp, "name")), "GET /users");
    cr_assert_str_eq(json_string_value(json_object_get(sp, "durationNanos")), "200000000");
    json_t *attrs = json_object_get(sp, "attributes");
    cr_assert_eq(json_array_size(attrs), 1);
    cr_assert_str_eq(json_string_value(json_object_get(json_array_get(attrs, 0), "key")), "kind");
    cr_assert_str_eq(json_string_value(json_object_get(
                         json_object_get(json_array_get(attrs, 0), "value"), "stringValue")),
                     "client");
    json_t *stats = json_object_get(t, "serviceStats");
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(stats, "web"), "spanCount")),
                 1);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(stats, "web"), "errorCount")),
                 1);
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(stats, "api"), "spanCount")),
                 1);
    cr_assert_null(json_object_get(json_object_get(stats, "api"), "errorCount"));
    cr_assert_eq(json_integer_value(json_object_get(json_object_get(stats, "db"), "spanCount")), 1);
    cr_assert(json_is_object(json_object_get(j, "metrics")));
    json_decref(j);

    /* no root span: Tempo's placeholder, no rootTraceName; 1 ms rounds to 1 */
    j = run("{ name = \"orphan\" }", 0, 0, 20, 3, NULL);
    t = trace_of(j, "4");
    cr_assert_str_eq(json_string_value(json_object_get(t, "rootServiceName")),
                     "<root span not yet received>");
    cr_assert_null(json_object_get(t, "rootTraceName"));
    cr_assert_eq(json_integer_value(json_object_get(t, "durationMs")), 1);
    json_decref(j);

    /* select() adds attributes; typed values as OTLP AnyValue JSON */
    j = run("{ name = \"POST /orders\" } | select(span.ratio, span.retry, status)", 0, 0, 20, 3,
            NULL);
    sp = json_array_get(json_object_get(json_object_get(trace_of(j, "3"), "spanSet"), "spans"), 0);
    attrs = json_object_get(sp, "attributes");
    char *dump = json_dumps(attrs, JSON_COMPACT);
    cr_assert_str_eq(dump,
                     "[{\"key\":\"ratio\",\"value\":{\"doubleValue\":0.5}},{\"key\":\"retry\","
                     "\"value\":{\"boolValue\":true}},{\"key\":\"status\",\"value\":{"
                     "\"stringValue\":\"unset\"}}]");
    free(dump);
    json_decref(j);

    /* by(): one spanset per group */
    j = run("{ } | by(resource.service.name)", 0, 0, 20, 3, NULL);
    cr_assert_eq(json_array_size(json_object_get(trace_of(j, "2"), "spanSets")), 3);
    cr_assert_eq(json_array_size(json_object_get(trace_of(j, "1"), "spanSets")), 2);
    json_decref(j);
}

Test(traces_search, limit_and_time_range)
{
    char got[128];
    json_t *j = run("{}", 0, 0, 2, 3, NULL);
    ids(j, got, sizeof(got));
    cr_expect_str_eq(got, "4,3", "the newest traces within the limit");
    json_decref(j);
    /* spans overlapping [T0+2, T0+3] s */
    j = run("{}", T0 + 2, T0 + 3, 20, 3, NULL);
    ids(j, got, sizeof(got));
    cr_expect_str_eq(got, "3,2");
    json_decref(j);
    /* a trace is judged whole even when only a part lies in the range:
     * trace 2's client span b3 is in the open block, b1 (root) in range */
    j = run("{ name = \"GET /home\" } >> { span.db.system = \"mysql\" }", T0 + 2, T0 + 3, 20, 3,
            NULL);
    ids(j, got, sizeof(got));
    cr_expect_str_eq(got, "2");
    json_decref(j);
    j = run("{}", T0 + 5, T0 + 6, 20, 3, NULL);
    ids(j, got, sizeof(got));
    cr_expect_str_eq(got, "");
    json_decref(j);
}

Test(traces_search, pruning_by_zone_maps_and_blooms)
{
    struct qs_scan sc;
    /* the sealed block has no "nosuch" service: its resource dictionary
     * (in the footer: no table read) says so */
    json_t *j = run("{ resource.service.name = \"nosuch\" }", 0, 0, 20, 3, &sc);
    cr_assert_eq(json_array_size(json_object_get(j, "traces")), 0);
    cr_assert_eq(sc.blocks_considered, 2);
    cr_assert_eq(sc.blocks_skipped_dict, 1);
    cr_assert_eq(sc.blocks_scanned, 1, "the open block has no bloom");
    cr_assert_eq(sc.rows_scanned, 3);
    json_decref(j);
    /* any resource operator works on the dictionary, exactly */
    j = run("{ resource.env =~ \"d.*\" && name = \"x\" }", 0, 0, 20, 3, &sc);
    cr_assert_eq(sc.blocks_skipped_dict, 0, "the sealed block holds a dev resource");
    json_decref(j);
    j = run("{ resource.env =~ \"q.*\" }", 0, 0, 20, 3, &sc);
    cr_assert_eq(sc.blocks_skipped_dict, 1);
    json_decref(j);
    /* no span of the sealed block lasts 310 ms or more: its zone map says so */
    j = run("{ duration >= 310ms }", 0, 0, 20, 3, &sc);
    cr_assert_eq(sc.blocks_skipped_zone, 1);
    cr_assert_eq(sc.blocks_scanned, 1);
    json_decref(j);
    /* outside the sealed block's time range */
    j = run("{}", T0 + 3, T0 + 5, 20, 3, &sc);
    cr_assert_eq(sc.blocks_skipped_zone, 1);
    json_decref(j);
}

/* ---- tags ---- */

static json_t *tags(bool v2, unsigned scopes, const char *q)
{
    struct traceql_expr *e = NULL;
    char err[256];
    if (q != NULL) {
        cr_assert_eq(traceql_parse(q, strlen(q), &e, err, sizeof(err)), 0);
    }
    struct traces_tags_req rq = {.scopes = scopes, .expr = e, .v2 = v2};
    struct evbuffer *out = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, out);
    cr_assert_eq(traces_tags(&rq, &w, err, sizeof(err)), 0, "%s", err);
    size_t len = evbuffer_get_length(out);
    json_t *j = json_loadb((const char *)evbuffer_pullup(out, (ssize_t)len), len, 0, NULL);
    cr_assert_not_null(j);
    evbuffer_free(out);
    traceql_free(e);
    return j;
}

static char *dumps(json_t *j)
{
    return json_dumps(j, JSON_COMPACT);
}

Test(traces_search, tag_names)
{
    json_t *j = tags(false, 0, NULL);
    char *s = dumps(json_object_get(j, "tagNames"));
    cr_assert_str_eq(s, "[\"db.system\",\"env\",\"http.method\",\"http.status_code\",\"ratio\","
                        "\"retry\",\"service.name\",\"tags\"]");
    free(s);
    json_decref(j);

    j = tags(true, 0, NULL);
    s = dumps(json_object_get(j, "scopes"));
    static const char prefix[] =
        "[{\"name\":\"resource\",\"tags\":[\"env\",\"service.name\"]},{\"name\":"
        "\"span\",\"tags\":[\"db.system\",\"http.method\",\"http.status_code\","
        "\"ratio\",\"retry\",\"tags\"]},{\"name\":\"intrinsic\",\"tags\":["
        "\"duration\",";
    cr_assert(strncmp(s, prefix, strlen(prefix)) == 0, "%s", s);
    cr_assert_eq(
        json_array_size(json_object_get(json_array_get(json_object_get(j, "scopes"), 2), "tags")),
        26);
    cr_assert_eq(json_array_size(json_object_get(j, "scopes")), 3,
                 "event, link and instrumentation scopes only when they have tags");
    free(s);
    json_decref(j);

    /* narrowed by q: only spans of the db service */
    j = tags(true, TRACES_SCOPE_SPAN, "{ resource.service.name = \"db\" }");
    s = dumps(json_object_get(j, "scopes"));
    cr_assert_str_eq(s, "[{\"name\":\"span\",\"tags\":[\"db.system\",\"tags\"]}]");
    free(s);
    json_decref(j);
}

static char *values(bool v2, const char *tag, const char *q)
{
    struct traceql_expr *e = NULL;
    char err[256];
    if (q != NULL) {
        cr_assert_eq(traceql_parse(q, strlen(q), &e, err, sizeof(err)), 0);
    }
    struct traces_tags_req rq = {.expr = e, .v2 = v2};
    struct evbuffer *out = evbuffer_new();
    struct jsonw w;
    jsonw_init(&w, out);
    int rc = traces_tag_values(&rq, tag, strlen(tag), &w, err, sizeof(err));
    traceql_free(e);
    if (rc < 0) {
        evbuffer_free(out);
        cr_assert_eq(rc, -EINVAL);
        return strdup("EINVAL");
    }
    size_t len = evbuffer_get_length(out);
    json_t *j = json_loadb((const char *)evbuffer_pullup(out, (ssize_t)len), len, 0, NULL);
    cr_assert_not_null(j);
    evbuffer_free(out);
    char *s = dumps(json_object_get(j, "tagValues"));
    json_decref(j);
    return s;
}

static void expect_values(bool v2, const char *tag, const char *q, const char *want)
{
    char *s = values(v2, tag, q);
    cr_expect_str_eq(s, want, "%s", tag);
    free(s);
}

Test(traces_search, tag_values)
{
    expect_values(false, "service.name", NULL, "[\"api\",\"db\",\"web\"]");
    expect_values(false, "http.status_code", NULL, "[\"200\",\"500\"]");
    expect_values(true, "resource.service.name", NULL,
                  "[{\"type\":\"string\",\"value\":\"api\"},{\"type\":\"string\",\"value\":"
                  "\"db\"},{\"type\":\"string\",\"value\":\"web\"}]");
    expect_values(true, "span.http.status_code", NULL,
                  "[{\"type\":\"int\",\"value\":\"200\"},{\"type\":\"int\",\"value\":\"500\"}]");
    expect_values(true, ".ratio", NULL, "[{\"type\":\"float\",\"value\":\"0.5\"}]");
    expect_values(true, "span.retry", NULL, "[{\"type\":\"bool\",\"value\":\"true\"}]");
    expect_values(true, "span.tags", NULL,
                  "[{\"type\":\"string\",\"value\":\"a\"},{\"type\":\"string\",\"value\":\"b\"}]");
    expect_values(true, "status", NULL,
                  "[{\"type\":\"keyword\",\"value\":\"error\"},{\"type\":\"keyword\",\"value\":"
                  "\"ok\"},{\"type\":\"keyword\",\"value\":\"unset\"}]");
    expect_values(true, "kind", NULL,
                  "[{\"type\":\"keyword\",\"value\":\"client\"},{\"type\":\"keyword\",\"value\":"
                  "\"consumer\"},{\"type\":\"keyword\",\"value\":\"internal\"},{\"type\":"
                  "\"keyword\",\"value\":\"producer\"},{\"type\":\"keyword\",\"value\":"
                  "\"server\"},{\"type\":\"keyword\",\"value\":\"unspecified\"}]");
    expect_values(true, "duration", NULL, "[]");
    expect_values(true, "name", "{ resource.service.name = \"db\" }",
                  "[{\"type\":\"string\",\"value\":\"SELECT users\"}]");
    expect_values(true, "rootName", NULL,
                  "[{\"type\":\"string\",\"value\":\"GET /home\"},{\"type\":\"string\",\"value\":"
                  "\"GET /users\"},{\"type\":\"string\",\"value\":\"POST /orders\"}]");
    expect_values(true, "rootServiceName", NULL,
                  "[{\"type\":\"string\",\"value\":\"api\"},{\"type\":\"string\",\"value\":"
                  "\"web\"}]");
    expect_values(true, "instrumentation:name", NULL, "[{\"type\":\"string\",\"value\":\"lib\"}]");
    expect_values(true, "not an identifier", NULL, "EINVAL");
}

/* MB_BLOCKS more sealed blocks, block k with two spans: span.shard a
 * value of its own (and one every block shares), span.block_<k> a key of
 * its own. */
#define MB_BLOCKS 8

static void many_blocks(void)
{
    for (int k = 0; k < MB_BLOCKS; k++) {
        static char ids[MB_BLOCKS][2][17], attrs[MB_BLOCKS][2][128];
        struct sspec sp[2];
        for (int j = 0; j < 2; j++) {
            snprintf(ids[k][j], sizeof(ids[k][j]), "00000000000010%02x", k * 2 + j);
            snprintf(attrs[k][j], sizeof(attrs[k][j]),
                     "shard=sthe value only block %d holds;shared=severy block;block_%d=i%d", k, k,
                     j);
            sp[j] = (struct sspec){10 + k, ids[k][j],  NULL, k % 3,
                                   "mb",   2,          1,    5000 + (uint64_t)k * 10 + j,
                                   1,      attrs[k][j]};
        }
        seal(make_block(sp, 2), 10 + (uint64_t)k);
    }
}

/* Tag values and tag names over many blocks give each sealed block up as
 * soon as its scan is done (qctx_done: the sets hold copies in the query's
 * arena). Over the table cap each block's tables go right then, while the
 * query reads the next ones; the answers are exact and the same as with
 * every block kept. */
Test(traces_search, tag_scans_give_each_block_up_and_answer_the_same)
{
    many_blocks();
    const int sealed = MB_BLOCKS + 1; /* and the corpus's */
    char want[2048] = "[";
    for (int k = 0; k < MB_BLOCKS; k++) {
        char one[96];
        snprintf(one, sizeof(one),
                 "%s{\"type\":\"string\",\"value\":\"the value only block %d holds\"}",
                 k ? "," : "", k);
        strcat(want, one);
    }
    strcat(want, "]");
    char *kept[2] = {NULL, NULL};
    for (int cap = 0; cap < 2; cap++) {
        catalog_set_table_cap((uint64_t)cap); /* 1: every idle block's tables go */
        uint64_t given = qctx_blocks_given_up();
        char *s = values(true, "span.shard", NULL);
        cr_expect_str_eq(s, want, "cap %d", cap);
        cr_expect_eq(qctx_blocks_given_up() - given, (uint64_t)sealed, "cap %d: one per block",
                     cap);
        if (cap == 0) {
            kept[0] = s;
        } else {
            cr_expect_str_eq(s, kept[0]);
            free(s);
        }

        given = qctx_blocks_given_up();
        s = values(false, "shared", NULL);
        cr_expect_str_eq(s, "[\"every block\"]", "cap %d", cap);
        cr_expect_eq(qctx_blocks_given_up() - given, (uint64_t)sealed, "cap %d: v1", cap);
        free(s);

        given = qctx_blocks_given_up();
        json_t *j = tags(true, TRACES_SCOPE_SPAN, NULL);
        s = dumps(json_object_get(j, "scopes"));
        json_decref(j);
        cr_expect_eq(qctx_blocks_given_up() - given, (uint64_t)sealed, "cap %d: tag names", cap);
        if (cap == 0) {
            kept[1] = s;
            char names[1024] = "[{\"name\":\"span\",\"tags\":[";
            for (int k = 0; k < MB_BLOCKS; k++) {
                char one[32];
                snprintf(one, sizeof(one), "\"block_%d\",", k);
                strcat(names, one);
            }
            strcat(names, "\"db.system\",\"http.method\",\"http.status_code\",\"ratio\",\"retry\","
                          "\"shard\",\"shared\",\"tags\"]}]");
            cr_expect_str_eq(s, names);
        } else {
            cr_expect_str_eq(s, kept[1], "cap 1");
            free(s);
        }
    }
    catalog_set_table_cap(0);
    free(kept[0]);
    free(kept[1]);
}

Test(traces_search, trace_by_id_across_sealed_and_open)
{
    uint8_t id[16] = {0};
    id[15] = 2;
    struct traces_trace *t;
    char err[128];
    cr_assert_eq(traces_find(id, NULL, &t, err, sizeof(err)), 0);
    cr_assert_eq(traces_trace_spans(t), 3);
    cr_assert_eq(traces_trace_scan(t)->blocks_scanned, 2);
    struct evbuffer *out = evbuffer_new();
    int rc;
    size_t pieces = 0;
    /* tiny chunks: one span per call, the answer still parses whole */
    while ((rc = traces_render(t, TRACES_JSON_V1, out, 1)) == 1) {
        pieces++;
    }
    cr_assert_eq(rc, 0);
    cr_assert_eq(pieces, 3, "a piece per span, then the closing one");
    size_t len = evbuffer_get_length(out);
    json_t *j = json_loadb((const char *)evbuffer_pullup(out, (ssize_t)len), len, 0, NULL);
    cr_assert_not_null(j);
    /* three resources (web, api, db), one scope each */
    json_t *b = json_object_get(j, "batches");
    cr_assert_eq(json_array_size(b), 3);
    json_decref(j);
    evbuffer_free(out);
    traces_trace_free(t);

    id[15] = 9;
    cr_assert_eq(traces_find(id, NULL, &t, err, sizeof(err)), 0);
    cr_assert_eq(traces_trace_spans(t), 0);
    cr_assert_eq(traces_trace_scan(t)->blocks_skipped_bloom, 1);
    traces_trace_free(t);
}

Test(traces_search, parse_ids_as_tempo)
{
    uint8_t id[16], want[16] = {0};
    want[14] = 0xab;
    want[15] = 0xcd;
    cr_assert_eq(traces_parse_id("abcd", 4, id), 0);
    cr_assert_eq(memcmp(id, want, 16), 0);
    cr_assert_eq(traces_parse_id("ABCD", 4, id), 0);
    cr_assert_eq(memcmp(id, want, 16), 0);
    want[14] = 0x0b;
    cr_assert_eq(traces_parse_id("bcd", 3, id), 0);
    cr_assert_eq(memcmp(id, want, 16), 0);
    cr_assert_eq(traces_parse_id("", 0, id), -EINVAL);
    cr_assert_eq(traces_parse_id("xyz", 3, id), -EINVAL);
    cr_assert_eq(traces_parse_id("000000000000000000000000000000000", 33, id), -EINVAL);
}

/* ---- a damaged block: quarantined, reported, the query goes on ---- */

static void damaged_corpus(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
    catalog_init(dir);
    seal_ex(make_block(sealed_spans, sizeof(sealed_spans) / sizeof(sealed_spans[0])), 1, true);
    cr_assert_not_null(catalog_open_add(
        SIG_TRACES, make_block(open_spans, sizeof(open_spans) / sizeof(open_spans[0]))));
}

TestSuite(traces_damaged, .init = damaged_corpus, .fini = teardown);

Test(traces_damaged, block_failing_verification_is_quarantined_and_reported)
{
    /* trace 2 spans the damaged block (b1, b2) and the open one (b3): the
     * lookup reads the root table fine, then every table before rendering */
    uint8_t id[16] = {0};
    id[15] = 2;
    struct traces_trace *t;
    char err[128];
    cr_assert_eq(traces_find(id, NULL, &t, err, sizeof(err)), 0);
    cr_assert_eq(traces_trace_spans(t), 1, "only the open block's span is left");
    cr_assert(strstr(traces_trace_warning(t), "quarantined") != NULL, "%s",
              traces_trace_warning(t));
    cr_assert(strstr(traces_trace_warning(t), "5 spans skipped") != NULL, "%s",
              traces_trace_warning(t));
    cr_assert_eq(traces_trace_scan(t)->blocks_failed, 1);
    struct evbuffer *out = evbuffer_new();
    cr_assert_eq(traces_render(t, TRACES_JSON_V2, out, 1 << 20), 0);
    size_t len = evbuffer_get_length(out);
    json_t *j = json_loadb((const char *)evbuffer_pullup(out, (ssize_t)len), len, 0, NULL);
    cr_assert_not_null(j);
    cr_assert_str_eq(json_string_value(json_object_get(j, "status")), "PARTIAL");
    cr_assert(strstr(json_string_value(json_object_get(j, "message")), "quarantined") != NULL);
    json_decref(j);
    evbuffer_free(out);
    traces_trace_free(t);

    /* moved to DATA/quarantine/ and out of the catalog: later queries do
     * not see it and keep serving the open block */
    char q[300];
    cr_assert_eq(tmpdir_join(q, sizeof(q), dir, "quarantine"), 0);
    struct stat st;
    cr_assert_eq(stat(q, &st), 0, "quarantine directory");
    struct qs_scan sc;
    json_t *r = run("{ span.db.system = \"mysql\" }", 0, 0, 20, 3, &sc);
    char got[64];
    ids(r, got, sizeof(got));
    cr_assert_str_eq(got, "2");
    /* one source (the open block), looked at by both passes */
    cr_assert_eq(sc.blocks_considered, 2, "the catalog forgot the block");
    cr_assert_eq(sc.blocks_failed, 0);
    json_decref(r);
}

Test(traces_damaged, search_reports_the_block_and_goes_on)
{
    struct qs_scan sc;
    /* the filter needs the attribute table: the damaged block fails */
    json_t *j = run("{ span.db.system != nil }", 0, 0, 20, 3, &sc);
    char got[64];
    ids(j, got, sizeof(got));
    cr_assert_str_eq(got, "2", "trace 2 through its open span b3");
    cr_assert_eq(sc.blocks_failed, 1);
    json_t *w = json_object_get(j, "warnings");
    cr_assert_eq(json_array_size(w), 1);
    cr_assert(strstr(json_string_value(json_array_get(w, 0)), "quarantined") != NULL);
    json_decref(j);
}
