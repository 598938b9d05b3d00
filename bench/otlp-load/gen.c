/*
 * gen.c - otlp-load's deterministic OTLP request generator (see gen.h).
 *
 * The generator walks one request's structure once and speaks to an
 * emitter, which writes either the protobuf wire format or OTLP/JSON, so
 * both encodings of a request carry the same records. Protobuf is written
 * by hand: a nested message reserves 5 bytes for its length, and when it
 * ends the length is written in its shortest form and the content moved
 * down; integer scalars at their proto3 default are omitted (oneof members,
 * whose presence matters, are written by callers that always emit). The
 * output is canonical: protobuf-c repacks it to the same size.
 *
 * Every random choice comes from a splitmix64 stream seeded by (seed,
 * purpose, index): a span's attributes depend only on (seed, trace, span),
 * never on what was generated before it.
 */
#include "bench/otlp-load/gen.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libdeflate.h>

/* ---------------------------------------------------------------- rng */

struct rng {
    uint64_t s;
};

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t rng_next(struct rng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return mix64(r->s);
}

/* Stream names, so two purposes never share a sequence. */
enum {
    ST_REQUEST = 1,
    ST_PLAN = 2,
    ST_TRACE_ID = 3,
    ST_SPAN_ID = 4,
    ST_SPAN = 5,
    ST_LOG = 6,
    ST_POINT = 7,
    ST_TRACE = 8,
};

static void rng_init(struct rng *r, uint64_t seed, uint64_t stream, uint64_t a, uint64_t b)
{
    r->s = mix64(seed ^ mix64(stream * 0x632be59bd9b4e019ULL ^ mix64(a + 0x1234567ULL) ^
                              mix64(b * 0x9e3779b97f4a7c15ULL + 77)));
}

/* Uniform in [0, n); n > 0. */
static uint32_t rng_below(struct rng *r, uint32_t n)
{
    return (uint32_t)(((rng_next(r) >> 32) * (uint64_t)n) >> 32);
}

/* Uniform in [0, 1). */
static double rng_unit(struct rng *r)
{
    return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

static bool rng_chance(struct rng *r, uint32_t per_mille)
{
    return rng_below(r, 1000) < per_mille;
}

/* ------------------------------------------------------------ emitter */

#define EM_DEPTH 16

struct em_level {
    size_t start; /* protobuf: where the content starts (after 5 reserved bytes) */
    uint32_t fno; /* arrays: the repeated field's number */
    bool array;
    bool first; /* JSON: nothing written in this level yet */
};

struct em {
    enum gen_format f;
    struct vbuf *b;
    int depth;
    int err;
    struct em_level st[EM_DEPTH];
};

static void em_put(struct em *e, const void *p, size_t n)
{
    if (e->err == 0 && vbuf_put(e->b, p, n) < 0) {
        e->err = -ENOMEM;
    }
}

static void em_puts(struct em *e, const char *s)
{
    em_put(e, s, strlen(s));
}

static size_t uv_encode(uint8_t *out, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        out[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    out[n++] = (uint8_t)v;
    return n;
}

static void pb_uv(struct em *e, uint64_t v)
{
    uint8_t tmp[10];
    em_put(e, tmp, uv_encode(tmp, v));
}

static void pb_tag(struct em *e, uint32_t fno, uint32_t wt)
{
    pb_uv(e, ((uint64_t)fno << 3) | wt);
}

static void pb_le(struct em *e, uint64_t v, size_t n)
{
    uint8_t tmp[8];
    for (size_t i = 0; i < n; i++) {
        tmp[i] = (uint8_t)(v >> (8 * i));
    }
    em_put(e, tmp, n);
}

static struct em_level *em_top(struct em *e)
{
    return &e->st[e->depth - 1];
}

/* JSON: the comma before a member or element, and the key of a member. */
static void js_key(struct em *e, const char *name)
{
    struct em_level *t = em_top(e);
    if (!t->first) {
        em_puts(e, ",");
    }
    t->first = false;
    if (!t->array) {
        em_puts(e, "\"");
        em_puts(e, name);
        em_puts(e, "\":");
    }
}

static uint32_t em_fno(struct em *e, uint32_t fno)
{
    struct em_level *t = em_top(e);
    return t->array ? t->fno : fno;
}

static void em_push(struct em *e, size_t start, uint32_t fno, bool array)
{
    if (e->depth == EM_DEPTH) {
        e->err = -EINVAL; /* a generator bug, not an input */
        return;
    }
    e->st[e->depth++] =
        (struct em_level){.start = start, .fno = fno, .array = array, .first = true};
}

/* A nested message: a member |fno|/|name|, or an element when the
 * enclosing level is an array. */
static void em_obj(struct em *e, uint32_t fno, const char *name)
{
    if (e->err) {
        return;
    }
    if (e->f == GEN_PROTOBUF) {
        static const uint8_t hole[5];
        pb_tag(e, em_fno(e, fno), 2);
        em_put(e, hole, sizeof(hole));
        em_push(e, e->b->len, 0, false);
    } else {
        js_key(e, name);
        em_puts(e, "{");
        em_push(e, 0, 0, false);
    }
}

static void em_arr(struct em *e, uint32_t fno, const char *name)
{
    if (e->err) {
        return;
    }
    if (e->f == GEN_JSON) {
        js_key(e, name);
        em_puts(e, "[");
    }
    em_push(e, 0, fno, true);
}

static void em_end(struct em *e)
{
    if (e->err) {
        return;
    }
    struct em_level t = e->st[--e->depth];
    if (e->f == GEN_JSON) {
        em_puts(e, t.array ? "]" : "}");
        return;
    }
    if (t.array) {
        return;
    }
    size_t len = e->b->len - t.start;
    uint8_t tmp[10];
    size_t n = uv_encode(tmp, len);
    uint8_t *hole = e->b->p + t.start - 5;
    memcpy(hole, tmp, n);
    if (n < 5) {
        memmove(hole + n, e->b->p + t.start, len);
        e->b->len -= 5 - n;
    }
}

static void js_escaped(struct em *e, const char *s, size_t n)
{
    size_t run = 0;
    em_puts(e, "\"");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') {
            continue;
        }
        em_put(e, s + run, i - run);
        run = i + 1;
        char esc[8];
        if (c == '"' || c == '\\') {
            snprintf(esc, sizeof(esc), "\\%c", c);
        } else if (c == '\n') {
            snprintf(esc, sizeof(esc), "\\n");
        } else if (c == '\t') {
            snprintf(esc, sizeof(esc), "\\t");
        } else {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
        }
        em_puts(e, esc);
    }
    em_put(e, s + run, n - run);
    em_puts(e, "\"");
}

static void em_strn(struct em *e, uint32_t fno, const char *name, const char *s, size_t n)
{
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 2);
        pb_uv(e, n);
        em_put(e, s, n);
    } else {
        js_key(e, name);
        js_escaped(e, s, n);
    }
}

static void em_str(struct em *e, uint32_t fno, const char *name, const char *s)
{
    em_strn(e, fno, name, s, strlen(s));
}

/* uint32, int32 and enums: a varint; a JSON number. */
static void em_u32(struct em *e, uint32_t fno, const char *name, int64_t v)
{
    if (v == 0 && !em_top(e)->array) {
        return; /* proto3 default: omitted (none of these fields is in a oneof) */
    }
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 0);
        pb_uv(e, (uint64_t)v);
    } else {
        char tmp[24];
        js_key(e, name);
        snprintf(tmp, sizeof(tmp), "%lld", (long long)v);
        em_puts(e, tmp);
    }
}

/* sint32: a zigzag varint; a JSON number. */
static void em_sint32(struct em *e, uint32_t fno, const char *name, int32_t v)
{
    if (v == 0 && !em_top(e)->array) {
        return; /* proto3 default: omitted (none of these fields is in a oneof) */
    }
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 0);
        pb_uv(e, ((uint32_t)v << 1) ^ (uint32_t)(v >> 31));
    } else {
        em_u32(e, fno, name, v);
    }
}

static void js_u64_string(struct em *e, const char *name, uint64_t v, bool neg)
{
    char tmp[32];
    js_key(e, name);
    snprintf(tmp, sizeof(tmp), neg ? "\"%lld\"" : "\"%llu\"", (unsigned long long)v);
    em_puts(e, tmp);
}

/* int64: a varint; a JSON decimal string. */
static void em_i64(struct em *e, uint32_t fno, const char *name, int64_t v)
{
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 0);
        pb_uv(e, (uint64_t)v);
    } else {
        js_u64_string(e, name, (uint64_t)v, v < 0);
    }
}

/* fixed64 (timestamps, counts): 8 bytes; a JSON decimal string. */
static void em_fixed64(struct em *e, uint32_t fno, const char *name, uint64_t v)
{
    if (v == 0 && !em_top(e)->array) {
        return; /* proto3 default: omitted (none of these fields is in a oneof) */
    }
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 1);
        pb_le(e, v, 8);
    } else {
        js_u64_string(e, name, v, false);
    }
}

/* sfixed64 (as_int): 8 bytes; a JSON decimal string. */
static void em_sfixed64(struct em *e, uint32_t fno, const char *name, int64_t v)
{
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 1);
        pb_le(e, (uint64_t)v, 8);
    } else {
        js_u64_string(e, name, (uint64_t)v, v < 0);
    }
}

/* fixed32 (flags): 4 bytes; a JSON number. */
static void em_fixed32(struct em *e, uint32_t fno, const char *name, uint32_t v)
{
    if (v == 0 && !em_top(e)->array) {
        return; /* proto3 default: omitted (none of these fields is in a oneof) */
    }
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 5);
        pb_le(e, v, 4);
    } else {
        em_u32(e, fno, name, v);
    }
}

static void js_double(struct em *e, double v)
{
    char tmp[40];
    snprintf(tmp, sizeof(tmp), "%.15g", v);
    if (strtod(tmp, NULL) != v) {
        snprintf(tmp, sizeof(tmp), "%.17g", v);
    }
    em_puts(e, tmp);
}

static void em_double(struct em *e, uint32_t fno, const char *name, double v)
{
    if (e->f == GEN_PROTOBUF) {
        uint64_t u;
        memcpy(&u, &v, 8);
        pb_tag(e, em_fno(e, fno), 1);
        pb_le(e, u, 8);
    } else {
        js_key(e, name);
        js_double(e, v);
    }
}

static void em_bool(struct em *e, uint32_t fno, const char *name, bool v)
{
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, em_fno(e, fno), 0);
        pb_uv(e, v);
    } else {
        js_key(e, name);
        em_puts(e, v ? "true" : "false");
    }
}

/* trace and span ids: bytes; lowercase hex in OTLP/JSON. */
static void em_id(struct em *e, uint32_t fno, const char *name, const uint8_t *id, size_t n)
{
    if (e->f == GEN_PROTOBUF) {
        em_strn(e, fno, name, (const char *)id, n);
        return;
    }
    char hex[33];
    for (size_t i = 0; i < n; i++) {
        snprintf(hex + 2 * i, 3, "%02x", id[i]);
    }
    em_strn(e, fno, name, hex, 2 * n);
}

static void em_packed_fixed64(struct em *e, uint32_t fno, const char *name, const uint64_t *v,
                              size_t n)
{
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, fno, 2);
        pb_uv(e, 8 * n);
        for (size_t i = 0; i < n; i++) {
            pb_le(e, v[i], 8);
        }
        return;
    }
    em_arr(e, fno, name);
    for (size_t i = 0; i < n; i++) {
        em_fixed64(e, 0, NULL, v[i]);
    }
    em_end(e);
}

static void em_packed_uv(struct em *e, uint32_t fno, const char *name, const uint64_t *v, size_t n)
{
    if (e->f == GEN_PROTOBUF) {
        size_t len = 0;
        uint8_t tmp[10];
        for (size_t i = 0; i < n; i++) {
            len += uv_encode(tmp, v[i]);
        }
        pb_tag(e, fno, 2);
        pb_uv(e, len);
        for (size_t i = 0; i < n; i++) {
            pb_uv(e, v[i]);
        }
        return;
    }
    em_arr(e, fno, name);
    for (size_t i = 0; i < n; i++) {
        em_fixed64(e, 0, NULL, v[i]); /* uint64: a decimal string, like fixed64 */
    }
    em_end(e);
}

static void em_packed_double(struct em *e, uint32_t fno, const char *name, const double *v,
                             size_t n)
{
    if (e->f == GEN_PROTOBUF) {
        pb_tag(e, fno, 2);
        pb_uv(e, 8 * n);
        for (size_t i = 0; i < n; i++) {
            uint64_t u;
            memcpy(&u, &v[i], 8);
            pb_le(e, u, 8);
        }
        return;
    }
    em_arr(e, fno, name);
    for (size_t i = 0; i < n; i++) {
        em_double(e, 0, NULL, v[i]);
    }
    em_end(e);
}

/* KeyValue elements of an attributes array (the array level is open). */
static void kv_begin(struct em *e, const char *key)
{
    em_obj(e, 0, NULL);
    em_str(e, 1, "key", key);
    em_obj(e, 2, "value");
}

static void kv_end(struct em *e)
{
    em_end(e);
    em_end(e);
}

static void kv_str(struct em *e, const char *key, const char *v)
{
    kv_begin(e, key);
    em_str(e, 1, "stringValue", v);
    kv_end(e);
}

static void kv_int(struct em *e, const char *key, int64_t v)
{
    kv_begin(e, key);
    em_i64(e, 3, "intValue", v);
    kv_end(e);
}

static void kv_double(struct em *e, const char *key, double v)
{
    kv_begin(e, key);
    em_double(e, 4, "doubleValue", v);
    kv_end(e);
}

static void kv_bool(struct em *e, const char *key, bool v)
{
    kv_begin(e, key);
    em_bool(e, 2, "boolValue", v);
    kv_end(e);
}

/* ------------------------------------------------------ vocabularies */

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

static const char *const services[] = {
    "frontend", "cart",   "checkout",       "payment", "shipping", "inventory",
    "auth",     "search", "recommendation", "email",   "ad",       "currency",
};
static const char *const languages[] = {"go", "java", "python", "nodejs", "dotnet", "rust"};
static const char *const regions[] = {"eu-west-1", "us-east-1", "ap-south-1"};
static const char *const libs[] = {
    "go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp",
    "io.opentelemetry.jdbc",
    "io.opentelemetry.logback-appender-1.0",
    "opentelemetry.instrumentation.sqlalchemy",
    "@opentelemetry/instrumentation-pino",
    "go.opentelemetry.io/contrib/bridges/otelslog",
};
static const char *const lib_versions[] = {"0.49.0", "2.1.0-alpha", "1.32.0",
                                           "0.45b0", "0.41.0",      "0.2.0"};

static const char *const words[] = {
    "the",        "request",    "user",        "cart",       "order",      "payment",
    "session",    "token",      "cache",       "database",   "query",      "timeout",
    "connection", "pool",       "retry",       "upstream",   "downstream", "service",
    "handler",    "worker",     "queue",       "message",    "batch",      "flush",
    "commit",     "rollback",   "transaction", "lock",       "index",      "shard",
    "replica",    "leader",     "follower",    "election",   "heartbeat",  "lease",
    "snapshot",   "compaction", "segment",     "checkpoint", "offset",     "partition",
    "consumer",   "producer",   "topic",       "subscriber", "publisher",  "event",
    "stream",     "buffer",     "socket",      "listener",   "accepted",   "closed",
    "opened",     "started",    "stopped",     "ready",      "healthy",    "degraded",
    "unhealthy",  "latency",    "throughput",  "bytes",      "records",    "items",
    "products",   "inventory",  "shipment",    "address",    "currency",   "conversion",
    "discount",   "coupon",     "invoice",     "receipt",    "customer",   "account",
    "profile",    "settings",   "feature",     "flag",       "experiment", "variant",
    "rendering",  "template",   "page",        "image",      "thumbnail",  "upload",
    "download",   "storage",    "bucket",      "object",     "metadata",   "schema",
    "migration",  "version",    "deploy",      "rollout",    "config",     "reload",
    "signal",     "shutdown",   "graceful",    "forced",     "memory",     "cpu",
    "disk",       "network",    "packet",      "dropped",    "slow",       "fast",
    "from",       "to",         "with",        "for",        "after",      "before",
    "while",      "during",     "because",     "of",         "on",         "in",
    "is",         "was",        "has",         "been",       "not",        "found",
    "invalid",    "expired",    "missing",     "duplicate",  "unexpected", "successfully",
};
static const char *const paths[] = {
    "/api/v1/cart",     "/api/v1/cart/items", "/api/v1/checkout",
    "/api/v1/products", "/api/v1/products/*", "/api/v1/orders",
    "/api/v1/orders/*", "/api/v1/users/me",   "/login",
    "/health",          "/api/v1/search",     "/api/v1/recommend",
};
static const char *const methods[] = {"GET", "GET", "GET", "POST", "PUT", "DELETE"};
static const char *const tables[] = {"orders", "order_items", "users",     "products",
                                     "carts",  "payments",    "shipments", "sessions"};
static const char *const errors[] = {
    "connection refused",
    "context deadline exceeded",
    "i/o timeout",
    "no such host",
    "broken pipe",
    "deadlock detected",
    "card declined",
    "insufficient stock",
    "unique constraint violated",
    "TLS handshake timeout",
};
static const char *const queues[] = {"orders.created", "payments.pending", "emails.outbox",
                                     "inventory.reserve"};
static const char *const classes[] = {"OrderService",        "CartController", "PaymentGateway",
                                      "InventoryRepository", "SessionFilter",  "RetryTemplate"};
static const char *const sev_text[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL"};

/* ------------------------------------------------------------ resources */

static void emit_resource(struct em *e, uint32_t r)
{
    uint32_t svc = r % NELEM(services);
    uint32_t host = r / NELEM(services);
    char tmp[96];

    em_obj(e, 1, "resource");
    em_arr(e, 1, "attributes");
    kv_str(e, "service.name", services[svc]);
    kv_str(e, "service.namespace", "shop");
    snprintf(tmp, sizeof(tmp), "1.%u.%u", svc + 2, host * 3 + 1);
    kv_str(e, "service.version", tmp);
    uint64_t h = mix64(r * 0x51ed27ULL + 3);
    snprintf(tmp, sizeof(tmp), "%08x-%04x-4%03x-a%03x-%012llx", (unsigned)(h >> 32),
             (unsigned)(h >> 16) & 0xffff, (unsigned)h & 0xfff, (unsigned)(h >> 20) & 0xfff,
             (unsigned long long)(mix64(h) & 0xffffffffffffULL));
    kv_str(e, "service.instance.id", tmp);
    snprintf(tmp, sizeof(tmp), "ip-10-0-%u-%u.ec2.internal", svc + 1, 10 + host * 17);
    kv_str(e, "host.name", tmp);
    kv_str(e, "host.arch", "amd64");
    kv_str(e, "os.type", "linux");
    kv_str(e, "deployment.environment", host == 0 ? "production" : "staging");
    kv_str(e, "telemetry.sdk.name", "opentelemetry");
    kv_str(e, "telemetry.sdk.language", languages[svc % NELEM(languages)]);
    kv_str(e, "telemetry.sdk.version", "1.32.0");
    kv_int(e, "process.pid", 1000 + (int64_t)(h % 30000));
    snprintf(tmp, sizeof(tmp), "%s-%06llx-%05llx", services[svc], (unsigned long long)(h >> 40),
             (unsigned long long)(h & 0xfffff));
    kv_str(e, "k8s.pod.name", tmp);
    kv_str(e, "cloud.region", regions[r % NELEM(regions)]);
    em_end(e);
    em_end(e);
}

static void emit_scope(struct em *e, uint32_t r, uint32_t s)
{
    char name[96];
    em_obj(e, 1, "scope");
    if (s == 0) {
        snprintf(name, sizeof(name), "com.shop.%s", services[r % NELEM(services)]);
        em_str(e, 1, "name", name);
        em_str(e, 2, "version", "1.0.0");
    } else {
        uint32_t l = r % NELEM(libs);
        em_str(e, 1, "name", libs[l]);
        em_str(e, 2, "version", lib_versions[l]);
        em_arr(e, 3, "attributes");
        kv_bool(e, "instrumentation.auto", l % 2 == 0);
        em_end(e);
    }
    em_end(e);
}

/* One request's resources and scopes, with the records of each (resource,
 * scope) group. */
#define MAX_GROUPS 6

struct layout {
    uint32_t n_res;
    uint32_t res[3];
    uint32_t n_scopes[3];
    uint32_t n_groups;
    uint32_t count[MAX_GROUPS]; /* records of group g, in resource then scope order */
};

static void make_layout(struct rng *r, uint32_t records, struct layout *l)
{
    l->n_res = 1 + rng_below(r, 3);
    uint32_t start = rng_below(r, GEN_RESOURCES);
    for (uint32_t i = 0; i < l->n_res; i++) {
        l->res[i] = (start + i * 7) % GEN_RESOURCES; /* 7 is coprime to 24: distinct */
        l->n_scopes[i] = 1 + rng_below(r, 2);
    }
    /* Fewer records than groups: drop scopes, then resources. */
    for (;;) {
        l->n_groups = 0;
        for (uint32_t i = 0; i < l->n_res; i++) {
            l->n_groups += l->n_scopes[i];
        }
        if (l->n_groups <= records) {
            break;
        }
        if (l->n_scopes[l->n_res - 1] > 1) {
            l->n_scopes[l->n_res - 1]--;
        } else {
            l->n_res--;
        }
    }
    uint32_t w[MAX_GROUPS], wsum = 0;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        w[g] = 1 + rng_below(r, 4);
        wsum += w[g];
    }
    uint32_t spare = records - l->n_groups, given = 0;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        l->count[g] = 1 + (uint32_t)((uint64_t)spare * w[g] / wsum);
        given += l->count[g];
    }
    l->count[0] += records - given;
}

/* -------------------------------------------------------------- attributes */

enum attr_type { AT_STR, AT_INT, AT_DOUBLE, AT_BOOL };

struct attr_def {
    const char *key;
    enum attr_type type;
};

/* Grouped by type; each record takes one of each type, then more. */
static const struct attr_def log_attrs[] = {
    {"http.request.method", AT_STR},
    {"http.route", AT_STR},
    {"user.id", AT_STR},
    {"thread.name", AT_STR},
    {"code.function", AT_STR},
    {"net.peer.name", AT_STR},
    {"session.id", AT_STR},
    {"http.response.status_code", AT_INT},
    {"thread.id", AT_INT},
    {"code.lineno", AT_INT},
    {"db.rows_affected", AT_INT},
    {"duration_ms", AT_DOUBLE},
    {"server.load", AT_DOUBLE},
    {"cache.hit", AT_BOOL},
    {"retry", AT_BOOL},
    {"feature_flag.enabled", AT_BOOL},
};
static const struct attr_def span_attrs[] = {
    {"http.request.method", AT_STR},
    {"http.route", AT_STR},
    {"url.path", AT_STR},
    {"db.system", AT_STR},
    {"db.statement", AT_STR},
    {"rpc.service", AT_STR},
    {"server.address", AT_STR},
    {"http.response.status_code", AT_INT},
    {"server.port", AT_INT},
    {"http.request.body.size", AT_INT},
    {"messaging.batch.message_count", AT_INT},
    {"sampling.ratio", AT_DOUBLE},
    {"queue.wait_ms", AT_DOUBLE},
    {"cache.hit", AT_BOOL},
    {"error.retryable", AT_BOOL},
    {"user.authenticated", AT_BOOL},
};

static void attr_value_str(struct rng *r, const char *key, char *out, size_t cap)
{
    if (strcmp(key, "http.request.method") == 0) {
        snprintf(out, cap, "%s", methods[rng_below(r, NELEM(methods))]);
    } else if (strcmp(key, "http.route") == 0 || strcmp(key, "url.path") == 0) {
        snprintf(out, cap, "%s", paths[rng_below(r, NELEM(paths))]);
    } else if (strcmp(key, "user.id") == 0) {
        snprintf(out, cap, "user_%u", rng_below(r, 1000000));
    } else if (strcmp(key, "thread.name") == 0) {
        snprintf(out, cap, "worker-%u", rng_below(r, 32));
    } else if (strcmp(key, "code.function") == 0) {
        snprintf(out, cap, "%s.%s", classes[rng_below(r, NELEM(classes))],
                 words[rng_below(r, NELEM(words))]);
    } else if (strcmp(key, "net.peer.name") == 0 || strcmp(key, "server.address") == 0) {
        snprintf(out, cap, "%s.shop.svc.cluster.local", services[rng_below(r, NELEM(services))]);
    } else if (strcmp(key, "session.id") == 0) {
        snprintf(out, cap, "%016llx", (unsigned long long)rng_next(r));
    } else if (strcmp(key, "db.system") == 0) {
        snprintf(out, cap, "%s", rng_chance(r, 700) ? "postgresql" : "redis");
    } else if (strcmp(key, "db.statement") == 0) {
        snprintf(out, cap, "SELECT * FROM %s WHERE id = $1 LIMIT %u",
                 tables[rng_below(r, NELEM(tables))], 1 + rng_below(r, 100));
    } else if (strcmp(key, "rpc.service") == 0) {
        snprintf(out, cap, "oteldemo.%sService", services[rng_below(r, NELEM(services))]);
    } else {
        snprintf(out, cap, "%s", words[rng_below(r, NELEM(words))]);
    }
}

static int64_t attr_value_int(struct rng *r, const char *key)
{
    if (strstr(key, "status_code")) {
        static const int codes[] = {200, 200, 200, 200, 200, 201, 204, 302, 400, 404, 500, 503};
        return codes[rng_below(r, NELEM(codes))];
    }
    if (strcmp(key, "server.port") == 0) {
        return rng_chance(r, 500) ? 8080 : 5432;
    }
    return (int64_t)rng_below(r, 1u << (4 + rng_below(r, 16)));
}

/* Emits 4-12 attributes from |defs| (16 entries: 7 str, 4 int, 2 double,
 * 3 bool) into an open array; returns how many. */
static uint32_t emit_attrs(struct em *e, struct rng *r, const struct attr_def *defs)
{
    uint32_t n = 4 + rng_below(r, 9);
    bool used[16] = {false};
    uint32_t pick[12];
    /* one of each type first: str 0-6, int 7-10, double 11-12, bool 13-15 */
    pick[0] = rng_below(r, 7);
    pick[1] = 7 + rng_below(r, 4);
    pick[2] = 11 + rng_below(r, 2);
    pick[3] = 13 + rng_below(r, 3);
    for (uint32_t i = 0; i < 4; i++) {
        used[pick[i]] = true;
    }
    for (uint32_t i = 4; i < n; i++) {
        uint32_t k = rng_below(r, 16);
        while (used[k]) {
            k = (k + 1) % 16;
        }
        used[k] = true;
        pick[i] = k;
    }
    char tmp[128];
    for (uint32_t i = 0; i < n; i++) {
        const struct attr_def *d = &defs[pick[i]];
        switch (d->type) {
        case AT_STR:
            attr_value_str(r, d->key, tmp, sizeof(tmp));
            kv_str(e, d->key, tmp);
            break;
        case AT_INT:
            kv_int(e, d->key, attr_value_int(r, d->key));
            break;
        case AT_DOUBLE:
            kv_double(e, d->key, (double)rng_below(r, 100000) / 100.0);
            break;
        case AT_BOOL:
            kv_bool(e, d->key, rng_chance(r, 500));
            break;
        }
    }
    return n;
}

/* ------------------------------------------------------------ ids */

void gen_trace_id(uint64_t seed, uint64_t t, uint8_t out[16])
{
    struct rng r;
    rng_init(&r, seed, ST_TRACE_ID, t, 0);
    uint64_t a = rng_next(&r), b = rng_next(&r);
    memcpy(out, &a, 8);
    memcpy(out + 8, &b, 8);
    out[0] |= 1; /* never all zero */
}

void gen_span_id(uint64_t seed, uint64_t t, uint32_t k, uint8_t out[8])
{
    struct rng r;
    rng_init(&r, seed, ST_SPAN_ID, t, k);
    uint64_t a = rng_next(&r);
    memcpy(out, &a, 8);
    out[7] |= 1;
}

uint32_t gen_trace_plan(uint64_t seed, uint64_t idx, uint32_t records, uint32_t *sizes)
{
    struct rng r;
    rng_init(&r, seed, ST_PLAN, idx, records);
    uint32_t n = 0, left = records;
    while (left > 0) {
        /* mostly small traces, some wide ones */
        uint32_t s =
            rng_chance(&r, 800) ? 1 + rng_below(&r, 8) : 8 + rng_below(&r, GEN_MAX_TRACE_SPANS - 7);
        if (s > left) {
            s = left;
        }
        sizes[n++] = s;
        left -= s;
    }
    return n;
}

/* ------------------------------------------------------------ logs */

/* Appends to |b| (a NUL-terminated body of capacity |cap|). */
static void body_add(char *b, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void body_add(char *b, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(b);
    if (len + 1 >= cap) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(b + len, cap - len, fmt, ap);
    va_end(ap);
}

static const char *word(struct rng *r)
{
    return words[rng_below(r, NELEM(words))];
}

static void make_body(struct rng *r, int sev, char *b, size_t cap)
{
    b[0] = 0;
    uint64_t rid = rng_next(r);
    uint32_t ms = 1 + rng_below(r, 1u << rng_below(r, 12));
    switch (sev) {
    case 0:
    case 1: /* TRACE, DEBUG */
        switch (rng_below(r, 4)) {
        case 0:
            body_add(b, cap, "entering %s.%s with args=%u,%u",
                     classes[rng_below(r, NELEM(classes))], word(r), rng_below(r, 1000),
                     rng_below(r, 10));
            break;
        case 1:
            body_add(b, cap, "sql: SELECT * FROM %s WHERE id = %u",
                     tables[rng_below(r, NELEM(tables))], rng_below(r, 10000000));
            break;
        case 2:
            body_add(b, cap, "connection pool stats active=%u idle=%u waiting=%u", rng_below(r, 64),
                     rng_below(r, 64), rng_below(r, 4));
            break;
        default:
            body_add(b, cap, "cache %s for key %s:%u", rng_chance(r, 600) ? "hit" : "miss", word(r),
                     rng_below(r, 100000));
        }
        break;
    case 2: /* INFO */
        switch (rng_below(r, 7)) {
        case 0:
            body_add(b, cap, "%s %s 200 in %ums", methods[rng_below(r, NELEM(methods))],
                     paths[rng_below(r, NELEM(paths))], ms);
            break;
        case 1:
            body_add(b, cap, "request req-%016llx completed for user_%u in %ums",
                     (unsigned long long)rid, rng_below(r, 1000000), ms);
            break;
        case 2:
            body_add(b, cap, "processed %u items from queue %s", rng_below(r, 500),
                     queues[rng_below(r, NELEM(queues))]);
            break;
        case 3:
            body_add(b, cap, "user user_%u logged in from 10.%u.%u.%u", rng_below(r, 1000000),
                     rng_below(r, 256), rng_below(r, 256), rng_below(r, 256));
            break;
        case 4:
            body_add(b, cap, "order ord-%012llx placed by user_%u total %u.%02u USD",
                     (unsigned long long)(rid >> 16), rng_below(r, 1000000), rng_below(r, 900),
                     rng_below(r, 100));
            break;
        case 5:
            body_add(b, cap, "flushed %u rows to %s in %ums", rng_below(r, 5000),
                     tables[rng_below(r, NELEM(tables))], ms);
            break;
        default:
            for (uint32_t i = 0, n = 4 + rng_below(r, 10); i < n; i++) {
                body_add(b, cap, i ? " %s" : "%s", word(r));
            }
        }
        break;
    case 3: /* WARN */
        switch (rng_below(r, 3)) {
        case 0:
            body_add(b, cap, "slow query on %s took %ums (threshold 500ms)",
                     tables[rng_below(r, NELEM(tables))], 500 + ms);
            break;
        case 1:
            body_add(b, cap, "retrying request req-%016llx to %s (attempt %u)",
                     (unsigned long long)rid, services[rng_below(r, NELEM(services))],
                     2 + rng_below(r, 3));
            break;
        default:
            body_add(b, cap, "deprecated API %s called by user_%u",
                     paths[rng_below(r, NELEM(paths))], rng_below(r, 1000000));
        }
        break;
    default: /* ERROR, FATAL: some with a stack trace */
        if (rng_chance(r, 500)) {
            body_add(b, cap, "failed to process order ord-%012llx: %s",
                     (unsigned long long)(rid >> 16), errors[rng_below(r, NELEM(errors))]);
        } else {
            body_add(b, cap, "upstream %s returned 503 after %ums: %s",
                     services[rng_below(r, NELEM(services))], ms,
                     errors[rng_below(r, NELEM(errors))]);
        }
        if (rng_chance(r, 400)) {
            for (uint32_t i = 0, n = 5 + rng_below(r, 11); i < n; i++) {
                const char *c = classes[rng_below(r, NELEM(classes))];
                body_add(b, cap, "\n\tat com.shop.%s.%s(%s.java:%u)", c, word(r), c,
                         10 + rng_below(r, 900));
            }
        }
    }
    /* Some records carry a long tail of free text (varied lengths). */
    if (rng_chance(r, 150)) {
        body_add(b, cap, " details:");
        for (uint32_t i = 0, n = 10 + rng_below(r, 60); i < n; i++) {
            body_add(b, cap, " %s", word(r));
        }
    }
}

static int severity(struct rng *r)
{
    uint32_t u = rng_below(r, 1000);
    return u < 5 ? 0 : u < 150 ? 1 : u < 870 ? 2 : u < 960 ? 3 : u < 995 ? 4 : 5;
}

static void emit_log(struct em *e, const struct gen_config *c, uint64_t idx, uint32_t j,
                     const uint32_t *sizes, uint32_t n_traces, struct gen_stats *st)
{
    struct rng r;
    uint64_t gj = idx * c->records + j;
    rng_init(&r, c->seed, ST_LOG, idx, j);
    uint64_t t = c->time_base_ns + gj * 1000000ULL + rng_below(&r, 1000000);
    int sev = severity(&r);
    static const int sev_num[] = {1, 5, 9, 13, 17, 21};
    char body[4096];
    make_body(&r, sev, body, sizeof(body));

    em_obj(e, 0, NULL);
    em_fixed64(e, 1, "timeUnixNano", t);
    em_fixed64(e, 11, "observedTimeUnixNano", t + 100000 + rng_below(&r, 5000000));
    em_u32(e, 2, "severityNumber", sev_num[sev]);
    em_str(e, 3, "severityText", sev_text[sev]);
    em_obj(e, 5, "body");
    em_str(e, 1, "stringValue", body);
    em_end(e);
    em_arr(e, 6, "attributes");
    uint32_t na = emit_attrs(e, &r, log_attrs);
    em_end(e);
    if (rng_chance(&r, 850)) {
        uint32_t i = rng_below(&r, n_traces);
        uint32_t k = rng_below(&r, sizes[i]);
        uint64_t tn = idx * c->records + i;
        uint8_t tid[16], sid[8];
        gen_trace_id(c->seed, tn, tid);
        gen_span_id(c->seed, tn, k, sid);
        em_fixed32(e, 8, "flags", 1);
        em_id(e, 9, "traceId", tid, 16);
        em_id(e, 10, "spanId", sid, 8);
    }
    if (rng_chance(&r, 20)) {
        em_str(e, 12, "eventName", rng_chance(&r, 500) ? "session.start" : "browser.page_view");
    }
    em_end(e);
    if (st) {
        st->attrs += na;
        st->body_bytes += strlen(body);
        st->by_sev[sev]++;
    }
}

static int gen_logs(struct em *e, const struct gen_config *c, uint64_t idx, const struct layout *l,
                    struct gen_stats *st)
{
    uint32_t *sizes = malloc(sizeof(*sizes) * c->records);
    if (sizes == NULL) {
        return -ENOMEM;
    }
    uint32_t n_traces = gen_trace_plan(c->seed, idx, c->records, sizes);
    em_arr(e, 1, "resourceLogs");
    uint32_t g = 0, j = 0;
    for (uint32_t i = 0; i < l->n_res; i++) {
        em_obj(e, 0, NULL);
        emit_resource(e, l->res[i]);
        em_arr(e, 2, "scopeLogs");
        for (uint32_t s = 0; s < l->n_scopes[i]; s++, g++) {
            em_obj(e, 0, NULL);
            emit_scope(e, l->res[i], s);
            em_arr(e, 2, "logRecords");
            for (uint32_t k = 0; k < l->count[g]; k++, j++) {
                emit_log(e, c, idx, j, sizes, n_traces, st);
            }
            em_end(e);
            em_end(e);
        }
        em_end(e);
        em_str(e, 3, "schemaUrl", "https://opentelemetry.io/schemas/1.26.0");
        em_end(e);
    }
    em_end(e);
    free(sizes);
    return 0;
}

/* ------------------------------------------------------------ traces */

struct span_desc {
    uint64_t t;      /* trace number */
    uint32_t k;      /* span number inside the trace */
    uint32_t parent; /* span number of the parent; UINT32_MAX for a root */
    uint64_t start, end;
    uint8_t res;   /* index into layout.res */
    uint8_t scope; /* scope of that resource */
    uint8_t kind;
};

static const char *span_name(struct rng *r, int kind, char *tmp, size_t cap)
{
    static const char *const internal[] = {"render", "compute_total", "validate_cart", "serialize",
                                           "authorize"};
    switch (kind) {
    case 2: /* SERVER */
        if (rng_chance(r, 700)) {
            snprintf(tmp, cap, "%s %s", methods[rng_below(r, NELEM(methods))],
                     paths[rng_below(r, NELEM(paths))]);
        } else {
            snprintf(tmp, cap, "oteldemo.%sService/%s", services[rng_below(r, NELEM(services))],
                     rng_chance(r, 500) ? "Get" : "Update");
        }
        break;
    case 3: /* CLIENT */
        if (rng_chance(r, 500)) {
            snprintf(tmp, cap, "SELECT shop.%s", tables[rng_below(r, NELEM(tables))]);
        } else if (rng_chance(r, 500)) {
            snprintf(tmp, cap, "redis %s", rng_chance(r, 600) ? "GET" : "SET");
        } else {
            snprintf(tmp, cap, "HTTP %s", methods[rng_below(r, NELEM(methods))]);
        }
        break;
    case 4:
    case 5: /* PRODUCER, CONSUMER */
        snprintf(tmp, cap, "%s %s", queues[rng_below(r, NELEM(queues))],
                 kind == 4 ? "publish" : "process");
        break;
    default:
        snprintf(tmp, cap, "%s", internal[rng_below(r, NELEM(internal))]);
    }
    return tmp;
}

static void emit_span(struct em *e, const struct gen_config *c, const struct span_desc *d,
                      struct gen_stats *st)
{
    struct rng r;
    uint8_t tid[16], sid[8], pid[8];
    char tmp[160];
    rng_init(&r, c->seed, ST_SPAN, d->t, d->k);
    gen_trace_id(c->seed, d->t, tid);
    gen_span_id(c->seed, d->t, d->k, sid);

    em_obj(e, 0, NULL);
    em_id(e, 1, "traceId", tid, 16);
    em_id(e, 2, "spanId", sid, 8);
    if (rng_chance(&r, 100)) {
        em_str(e, 3, "traceState", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    }
    if (d->parent != UINT32_MAX) {
        gen_span_id(c->seed, d->t, d->parent, pid);
        em_id(e, 4, "parentSpanId", pid, 8);
    }
    em_str(e, 5, "name", span_name(&r, d->kind, tmp, sizeof(tmp)));
    em_u32(e, 6, "kind", d->kind);
    em_fixed64(e, 7, "startTimeUnixNano", d->start);
    em_fixed64(e, 8, "endTimeUnixNano", d->end);
    em_arr(e, 9, "attributes");
    uint32_t na = emit_attrs(e, &r, span_attrs);
    em_end(e);

    bool error = rng_chance(&r, 30);
    uint32_t n_events = 0, n_links = 0;
    if (error || rng_chance(&r, 200)) {
        n_events = error ? 1 : 1 + rng_below(&r, 3);
        em_arr(e, 11, "events");
        for (uint32_t i = 0; i < n_events; i++) {
            uint64_t dur = d->end - d->start;
            em_obj(e, 0, NULL);
            em_fixed64(e, 1, "timeUnixNano", d->start + (dur ? rng_next(&r) % dur : 0));
            em_arr(e, 3, "attributes");
            if (error) {
                const char *err = errors[rng_below(&r, NELEM(errors))];
                kv_str(e, "exception.type", "java.io.IOException");
                kv_str(e, "exception.message", err);
                snprintf(tmp, sizeof(tmp),
                         "java.io.IOException: %s\n\tat com.shop.%s.call(%s.java:%u)", err,
                         classes[rng_below(&r, NELEM(classes))], "Client", 10 + rng_below(&r, 500));
                kv_str(e, "exception.stacktrace", tmp);
            } else {
                kv_int(e, "attempt", 1 + rng_below(&r, 3));
                kv_str(e, "message.id", word(&r));
            }
            em_end(e);
            em_str(e, 2, "name",
                   error                 ? "exception"
                   : rng_chance(&r, 500) ? "cache.miss"
                                         : "retry");
            em_end(e);
        }
        em_end(e);
    }
    if (d->t > 0 && rng_chance(&r, 50)) {
        uint64_t back = 1 + rng_below(&r, (uint32_t)(d->t < 100 ? d->t : 100));
        uint8_t ltid[16], lsid[8];
        gen_trace_id(c->seed, d->t - back, ltid);
        gen_span_id(c->seed, d->t - back, 0, lsid);
        n_links = 1;
        em_arr(e, 13, "links");
        em_obj(e, 0, NULL);
        em_id(e, 1, "traceId", ltid, 16);
        em_id(e, 2, "spanId", lsid, 8);
        em_arr(e, 4, "attributes");
        kv_str(e, "link.kind", "follows_from");
        em_end(e);
        em_fixed32(e, 6, "flags", 0x101);
        em_end(e);
        em_end(e);
    }
    if (error) {
        em_obj(e, 15, "status");
        em_str(e, 2, "message", errors[rng_below(&r, NELEM(errors))]);
        em_u32(e, 3, "code", 2);
        em_end(e);
    } else if (rng_chance(&r, 300)) {
        em_obj(e, 15, "status");
        em_u32(e, 3, "code", 1);
        em_end(e);
    }
    em_fixed32(e, 16, "flags", 0x101);
    em_end(e);
    if (st) {
        st->attrs += na;
        st->events += n_events;
        st->links += n_links;
    }
}

static int gen_traces(struct em *e, const struct gen_config *c, uint64_t idx,
                      const struct layout *l, struct gen_stats *st)
{
    uint32_t *sizes = malloc(sizeof(*sizes) * c->records);
    struct span_desc *sp = malloc(sizeof(*sp) * c->records);
    if (sizes == NULL || sp == NULL) {
        free(sizes);
        free(sp);
        return -ENOMEM;
    }
    uint32_t n_traces = gen_trace_plan(c->seed, idx, c->records, sizes);
    uint32_t n = 0;
    for (uint32_t i = 0; i < n_traces; i++) {
        struct rng tr;
        uint64_t tn = idx * c->records + i;
        rng_init(&tr, c->seed, ST_TRACE, tn, 0);
        struct span_desc *root = &sp[n];
        for (uint32_t k = 0; k < sizes[i]; k++) {
            struct span_desc *d = &sp[n + k];
            d->t = tn;
            d->k = k;
            if (k == 0) {
                d->parent = UINT32_MAX;
                d->kind = 2;
                d->start =
                    c->time_base_ns + (idx * c->records + n) * 1000000ULL + rng_below(&tr, 1000000);
                /* 0.1 ms to ~2 s, log-uniform */
                d->end = d->start + (uint64_t)(100000.0 * pow(2.0, 14.3 * rng_unit(&tr)));
                d->res = (uint8_t)rng_below(&tr, l->n_res);
            } else {
                const struct span_desc *p = &root[rng_below(&tr, k)];
                uint32_t u = rng_below(&tr, 100);
                d->parent = p->k;
                d->kind = u < 40 ? 3 : u < 70 ? 1 : u < 90 ? 2 : u < 95 ? 4 : 5;
                uint64_t pd = p->end - p->start;
                d->start = p->start + (uint64_t)((double)pd * 0.5 * rng_unit(&tr));
                d->end = d->start + 1000 + (uint64_t)((double)(p->end - d->start) * rng_unit(&tr));
                if (d->end > p->end && p->end > d->start + 1000) {
                    d->end = p->end;
                }
                d->res = rng_chance(&tr, 600) ? p->res : (uint8_t)rng_below(&tr, l->n_res);
            }
            d->scope = (uint8_t)rng_below(&tr, l->n_scopes[d->res]);
        }
        n += sizes[i];
    }
    em_arr(e, 1, "resourceSpans");
    for (uint32_t i = 0; i < l->n_res; i++) {
        bool any = false;
        for (uint32_t k = 0; k < n && !any; k++) {
            any = sp[k].res == i;
        }
        if (!any) {
            continue;
        }
        em_obj(e, 0, NULL);
        emit_resource(e, l->res[i]);
        em_arr(e, 2, "scopeSpans");
        for (uint32_t s = 0; s < l->n_scopes[i]; s++) {
            uint32_t cnt = 0;
            for (uint32_t k = 0; k < n; k++) {
                cnt += sp[k].res == i && sp[k].scope == s;
            }
            if (cnt == 0) {
                continue;
            }
            em_obj(e, 0, NULL);
            emit_scope(e, l->res[i], s);
            em_arr(e, 2, "spans");
            for (uint32_t k = 0; k < n; k++) {
                if (sp[k].res == i && sp[k].scope == s) {
                    emit_span(e, c, &sp[k], st);
                }
            }
            em_end(e);
            em_end(e);
            if (st) {
                st->scopes++;
            }
        }
        em_end(e);
        em_end(e);
        if (st) {
            st->resources++;
        }
    }
    em_end(e);
    free(sizes);
    free(sp);
    return 0;
}

/* ------------------------------------------------------------ metrics */

struct metric_def {
    const char *name;
    const char *desc;
    const char *unit;
    enum metric_kind kind;
    bool is_int;
    int temporality; /* 1 delta, 2 cumulative */
    bool monotonic;
};

/* Indexed so that q % 5 walks the kinds: entry 5*i + k has kind k+1. */
static const struct metric_def metric_defs[] = {
    {"system.cpu.utilization", "CPU time fraction", "1", MK_GAUGE, false, 0, false},
    {"http.server.request.count", "Requests served", "{request}", MK_SUM, true, 2, true},
    {"http.server.request.duration", "Duration of HTTP server requests", "s", MK_HISTOGRAM, false,
     2, false},
    {"rpc.server.duration", "Duration of RPCs", "ms", MK_EXP_HISTOGRAM, false, 2, false},
    {"jvm.gc.pause", "GC pause times", "ms", MK_SUMMARY, false, 0, false},
    {"process.runtime.memory.heap", "Heap in use", "By", MK_GAUGE, true, 0, false},
    {"messaging.process.bytes", "Bytes processed", "By", MK_SUM, false, 1, true},
    {"db.client.operation.duration", "Duration of database operations", "s", MK_HISTOGRAM, false, 1,
     false},
    {"http.client.request.body.size", "Request body sizes", "By", MK_EXP_HISTOGRAM, false, 1,
     false},
    {"http.server.queue.wait", "Queueing delay", "ms", MK_SUMMARY, false, 0, false},
    {"http.server.active_requests", "Requests in flight", "{request}", MK_GAUGE, true, 0, false},
    {"db.client.connections.usage", "Connections in use", "{connection}", MK_SUM, true, 2, false},
};

/* Series attributes of a data point; the field number differs by point type
 * (HistogramDataPoint 9, ExponentialHistogramDataPoint 1, the others 7). */
static void emit_point_attrs(struct em *e, enum metric_kind k, uint32_t series, uint32_t n)
{
    static const char *const states[] = {"idle", "used", "pending"};
    static const int codes[] = {200, 404, 500, 503};
    uint32_t fno = k == MK_HISTOGRAM ? 9 : k == MK_EXP_HISTOGRAM ? 1 : 7;
    em_arr(e, fno, "attributes");
    kv_str(e, "http.request.method", methods[series % NELEM(methods)]);
    kv_str(e, "http.route", paths[(series / NELEM(methods)) % NELEM(paths)]);
    if (n > 2) {
        kv_int(e, "http.response.status_code", codes[(series / 72) % NELEM(codes)]);
    }
    if (n > 3) {
        kv_str(e, "state", states[series % NELEM(states)]);
    }
    if (n > 4) {
        kv_bool(e, "internal", series % 5 == 0);
    }
    em_end(e);
}

static void emit_exemplar(struct em *e, const struct gen_config *c, uint64_t idx, struct rng *r,
                          uint32_t fno, uint64_t t, double v)
{
    uint8_t tid[16], sid[8];
    uint64_t tn = idx * c->records + rng_below(r, c->records);
    gen_trace_id(c->seed, tn, tid);
    gen_span_id(c->seed, tn, 0, sid);
    em_arr(e, fno, "exemplars");
    em_obj(e, 0, NULL);
    em_fixed64(e, 2, "timeUnixNano", t - rng_below(r, 1000000000));
    em_double(e, 3, "asDouble", v);
    em_id(e, 4, "spanId", sid, 8);
    em_id(e, 5, "traceId", tid, 16);
    em_arr(e, 7, "filteredAttributes");
    kv_str(e, "user.id", "user_42");
    em_end(e);
    em_end(e);
    em_end(e);
}

static void emit_point(struct em *e, const struct gen_config *c, uint64_t idx,
                       const struct metric_def *m, uint32_t metric_no, uint32_t series,
                       uint32_t n_attrs)
{
    struct rng r;
    rng_init(&r, c->seed, ST_POINT, idx, ((uint64_t)metric_no << 32) | series);
    uint64_t t = c->time_base_ns + idx * 10000000000ULL + rng_below(&r, 1000000);
    uint64_t start = m->temporality == 1 ? t - 10000000000ULL : c->time_base_ns - 60000000000ULL;

    em_obj(e, 0, NULL);
    emit_point_attrs(e, m->kind, series, n_attrs);
    em_fixed64(e, 2, "startTimeUnixNano", start);
    em_fixed64(e, 3, "timeUnixNano", t);
    switch (m->kind) {
    case MK_GAUGE:
    case MK_SUM:
        if (m->is_int) {
            int64_t v = m->monotonic ? (int64_t)((idx + 1) * 100 + series * 7 + rng_below(&r, 50))
                                     : (int64_t)rng_below(&r, 1u << 20);
            em_sfixed64(e, 6, "asInt", v);
        } else {
            em_double(e, 4, "asDouble", m->kind == MK_GAUGE ? rng_unit(&r) : rng_unit(&r) * 1e6);
        }
        break;
    case MK_HISTOGRAM: {
        static const double bounds[] = {0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25,
                                        0.5,   0.75, 1.0,   2.5,  5.0,   7.5, 10.0};
        uint64_t counts[NELEM(bounds) + 1], total = 0;
        double sum = 0;
        uint32_t lo = NELEM(counts), hi = 0;
        for (uint32_t i = 0; i < NELEM(counts); i++) {
            /* a hump around the 100 ms buckets */
            uint32_t dist = i > 6 ? i - 6 : 6 - i;
            counts[i] = dist > 6 ? 0 : rng_below(&r, 1 + (200u >> dist));
            total += counts[i];
            sum += (double)counts[i] * (i < NELEM(bounds) ? bounds[i] * 0.7 : 12.0);
            if (counts[i]) {
                lo = i < lo ? i : lo;
                hi = i;
            }
        }
        em_fixed64(e, 4, "count", total);
        em_double(e, 5, "sum", sum);
        em_packed_fixed64(e, 6, "bucketCounts", counts, NELEM(counts));
        em_packed_double(e, 7, "explicitBounds", bounds, NELEM(bounds));
        if (rng_chance(&r, 100) && total) {
            emit_exemplar(e, c, idx, &r, 8, t, bounds[lo < NELEM(bounds) ? lo : 0]);
        }
        if (total) {
            em_double(e, 11, "min", lo == 0 ? 0.001 : bounds[lo - 1] + 0.0005);
            em_double(e, 12, "max", hi < NELEM(bounds) ? bounds[hi] - 0.0005 : 14.5);
        }
        break;
    }
    case MK_EXP_HISTOGRAM: {
        uint64_t pos[40], neg[4], total = 0;
        uint32_t np = 8 + rng_below(&r, 33), nn = rng_chance(&r, 200) ? 4 : 0;
        int32_t scale = (int32_t)rng_below(&r, 6), off = (int32_t)rng_below(&r, 20);
        for (uint32_t i = 0; i < np; i++) {
            pos[i] = rng_below(&r, 50);
            total += pos[i];
        }
        for (uint32_t i = 0; i < nn; i++) {
            neg[i] = rng_below(&r, 5);
            total += neg[i];
        }
        uint64_t zero = rng_below(&r, 3);
        total += zero;
        double base = pow(2.0, pow(2.0, -scale));
        em_fixed64(e, 4, "count", total);
        em_double(e, 5, "sum", (double)total * pow(base, off + np / 2.0));
        em_sint32(e, 6, "scale", scale);
        em_fixed64(e, 7, "zeroCount", zero);
        em_obj(e, 8, "positive");
        em_sint32(e, 1, "offset", off);
        em_packed_uv(e, 2, "bucketCounts", pos, np);
        em_end(e);
        if (nn) {
            em_obj(e, 9, "negative");
            em_sint32(e, 1, "offset", 0);
            em_packed_uv(e, 2, "bucketCounts", neg, nn);
            em_end(e);
        }
        em_double(e, 12, "min", nn ? -pow(base, 4) : pow(base, off));
        em_double(e, 13, "max", pow(base, off + np));
        break;
    }
    case MK_SUMMARY: {
        static const double qs[] = {0.0, 0.5, 0.9, 0.99, 1.0};
        uint64_t cnt = 1 + rng_below(&r, 1000);
        double v = 0.1 + rng_unit(&r);
        em_fixed64(e, 4, "count", cnt);
        em_double(e, 5, "sum", v * 2.5 * (double)cnt);
        em_arr(e, 6, "quantileValues");
        for (uint32_t i = 0; i < NELEM(qs); i++) {
            em_obj(e, 0, NULL);
            if (qs[i] != 0.0) { /* proto3 JSON omits the default 0 */
                em_double(e, 1, "quantile", qs[i]);
            }
            em_double(e, 2, "value", v * (1.0 + 8.0 * qs[i] * qs[i]));
            em_end(e);
        }
        em_end(e);
        break;
    }
    default:
        break;
    }
    em_end(e);
}

static int gen_metrics(struct em *e, const struct gen_config *c, uint64_t idx, struct rng *r,
                       const struct layout *l, struct gen_stats *st)
{
    uint32_t g = 0, q = rng_below(r, 5);
    em_arr(e, 1, "resourceMetrics");
    for (uint32_t i = 0; i < l->n_res; i++) {
        em_obj(e, 0, NULL);
        emit_resource(e, l->res[i]);
        em_arr(e, 2, "scopeMetrics");
        for (uint32_t s = 0; s < l->n_scopes[i]; s++, g++) {
            uint32_t pts = l->count[g];
            uint32_t nm = 5 + rng_below(r, 4);
            if (nm > pts) {
                nm = pts;
            }
            em_obj(e, 0, NULL);
            emit_scope(e, l->res[i], s);
            em_arr(e, 2, "metrics");
            uint32_t given = 0;
            for (uint32_t m = 0; m < nm; m++, q++) {
                /* kind walks with q; which metric of that kind is random */
                uint32_t kind_ix = q % 5;
                uint32_t variants = (NELEM(metric_defs) - kind_ix + 4) / 5;
                const struct metric_def *md = &metric_defs[kind_ix + 5 * rng_below(r, variants)];
                uint32_t np = m + 1 == nm ? pts - given : 1 + (pts - nm) / nm;
                given += np;
                em_obj(e, 0, NULL);
                em_str(e, 1, "name", md->name);
                em_str(e, 2, "description", md->desc);
                em_str(e, 3, "unit", md->unit);
                static const uint32_t data_fno[] = {0, 5, 7, 9, 10, 11};
                static const char *const data_name[] = {
                    "", "gauge", "sum", "histogram", "exponentialHistogram", "summary"};
                em_obj(e, data_fno[md->kind], data_name[md->kind]);
                uint32_t pts_fno = 1;
                em_arr(e, pts_fno, "dataPoints");
                uint32_t series0 = rng_below(r, 200);
                uint32_t n_attrs = 2 + (uint32_t)(md - metric_defs) % 4;
                for (uint32_t p = 0; p < np; p++) {
                    emit_point(e, c, idx, md, q, series0 + p, n_attrs);
                }
                em_end(e);
                if (md->temporality) {
                    em_u32(e, 2, "aggregationTemporality", md->temporality);
                }
                if (md->kind == MK_SUM && md->monotonic) {
                    em_bool(e, 3, "isMonotonic", true);
                }
                em_end(e);
                em_end(e);
                if (st) {
                    st->by_kind[md->kind] += np;
                    st->attrs += (uint64_t)np * (n_attrs > 5 ? 5 : n_attrs);
                }
            }
            em_end(e);
            em_end(e);
        }
        em_end(e);
        em_end(e);
    }
    em_end(e);
    return 0;
}

/* ------------------------------------------------------------ entry */

int gen_request(const struct gen_config *c, uint64_t idx, enum gen_format f, struct vbuf *out,
                struct gen_stats *st)
{
    if (c->records == 0 || c->signal < SIG_LOGS || c->signal > SIG_METRICS ||
        (f != GEN_PROTOBUF && f != GEN_JSON)) {
        return -EINVAL;
    }
    struct em e = {.f = f, .b = out};
    struct rng r;
    struct layout l;
    rng_init(&r, c->seed, ST_REQUEST, idx, c->signal);
    make_layout(&r, c->records, &l);
    if (st) {
        memset(st, 0, sizeof(*st));
        st->records = c->records;
        if (c->signal != SIG_TRACES) {
            st->resources = l.n_res;
            st->scopes = l.n_groups;
        }
    }
    em_push(&e, out->len, 0, false);
    if (f == GEN_JSON) {
        em_puts(&e, "{");
    }
    int rc;
    switch (c->signal) {
    case SIG_LOGS:
        rc = gen_logs(&e, c, idx, &l, st);
        break;
    case SIG_TRACES:
        rc = gen_traces(&e, c, idx, &l, st);
        break;
    default:
        rc = gen_metrics(&e, c, idx, &r, &l, st);
        break;
    }
    if (f == GEN_JSON) {
        em_puts(&e, "}");
    }
    if (rc == 0) {
        rc = e.err;
    }
    if (rc == 0 && e.depth != 1) {
        rc = -EINVAL; /* unbalanced begin/end: a generator bug */
    }
    return rc;
}

uint64_t gen_time_span_ns(const struct gen_config *c, uint64_t n)
{
    if (c->signal == SIG_METRICS) {
        return n * 10000000000ULL;
    }
    return n * c->records * 1000000ULL;
}

int gen_gzip(const uint8_t *in, size_t len, int level, struct vbuf *out)
{
    struct libdeflate_compressor *z = libdeflate_alloc_compressor(level);
    if (z == NULL) {
        return -ENOMEM;
    }
    size_t bound = libdeflate_gzip_compress_bound(z, len);
    vbuf_reset(out);
    if (vbuf_reserve(out, bound) < 0) {
        libdeflate_free_compressor(z);
        return -ENOMEM;
    }
    size_t n = libdeflate_gzip_compress(z, in, len, out->p, bound);
    libdeflate_free_compressor(z);
    if (n == 0) {
        return -ENOMEM; /* cannot happen with the bound; treated as out of room */
    }
    out->len = n;
    return 0;
}
