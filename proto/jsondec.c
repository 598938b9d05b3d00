/*
 * jsondec.c - OTLP/JSON request bodies into the row model (proto3 JSON
 * mapping with OTLP's deviations, FACTS.md section 7).
 *
 * This file holds the entry, the errors, the request, resource and scope
 * envelopes and the general member-name lookup; the values, each signal's
 * records and the numbers have files of their own (jsondec_int.h lists
 * them). What follows describes the whole decoder.
 *
 * WHY A HAND-WRITTEN PARSER, NOT JANSSON
 *   jansson would build a whole tree (a dozen allocations per record, every
 *   string copied, hash tables per object) only for us to walk it once and
 *   copy again; it rejects integers above INT64_MAX (fixed64 timestamps and
 *   counts can be larger) and turns bare numbers above 2^53 into lossy doubles;
 *   and its allocator hook is process-global. This file instead reads the
 *   body with a cursor and writes straight into the batch: scalars into the
 *   rows, values into batch->heap (val.h encoding), and the strings a row
 *   points at (struct mstr) into the request arena, unescaped. No tree, no
 *   malloc per record (only the batch's geometric arrays and heap grow), each
 *   integer parsed exactly from its digits.
 *
 * SHAPE
 *   One function per OTLP message, driven by the schema. Members are handled
 *   in the order they arrive; the few blob layouts that put a variable-length
 *   part before the attributes (span events and links, exemplars) or fix an
 *   order the JSON need not follow (histogram buckets and bounds, exponential
 *   histogram buckets) remember where those members start, skip them, and
 *   parse them at the end of the object by moving the cursor back. A
 *   KeyValue whose "value" precedes its "key" is handled the same way.
 *   Proto3 JSON forbids a member given twice; we accept it as protobuf does
 *   a field repeated on the wire: lists of resources, scopes, records and
 *   data points append, any other member is replaced by its last occurrence
 *   (the oneofs of AnyValue, data point values and Metric data included).
 *
 * FAST PATHS (issue 13: within 2x of protobuf per CPU-second)
 *   Each is taken only for input it reads exactly, and gives up with nothing
 *   consumed or written otherwise, so the general path above still decides
 *   every refusal and its message: member names matched in place against
 *   the member the previous object of that kind had next (struct fcur); the
 *   compact KeyValue (kv_fast); integers, doubles and hex ids read from the
 *   text (jsondec_num.h); number lists in compact form; histogram, exponential
 *   histogram and summary details read in place when they come in the usual
 *   order (list_inline) instead of skipped and read again. Round 3: names
 *   matched on compact text with SSE2 compares; quoted 19-digit timestamps,
 *   short quoted list integers and short doubles read by 8-byte runs inline;
 *   strings with no escape (or only the short escapes, unescaped in one
 *   pass) carved straight into the string block; the usual log body read
 *   without the AnyValue loop; event and link attributes read in place
 *   (a failed read is put back and deferred as before); the UTF-8 pre-pass
 *   64 bytes per step. Round 4: quoted bucket counts by a loop of their own
 *   (num_list's uint_q_run); doubles with m > 2^53 and e < 0 by a multiply
 *   with a truncated 10^e, the exact division only near a midpoint
 *   (jsondec_num.c); quoted intValue attributes of 1-7 digits by one load;
 *   an event's plain name found inline and its fixed part written after
 *   one reserve.
 *
 * DEPTH
 *   The schema bounds the nesting of messages; AnyValue nesting is bounded by
 *   VAL_MAX_DEPTH (an attribute or body value is level 1, as in
 *   val_check_attrs), deeper is -EPROTO. Values of unknown members are skipped
 *   by an iterative scanner that validates them and refuses nesting deeper
 *   than JSONLEX_SKIP_DEPTH. So the C stack stays small whatever the input.
 *
 * ACCEPTED (FACTS.md section 7): lowerCamelCase or snake_case keys; unknown
 * keys ignored; null = absent (a null element of a list of messages is an
 * empty message; a null element of a list of numbers is an error); 64-bit
 * integers as JSON numbers or decimal strings (exponent and zero fraction
 * allowed when the value is integral); enums as integers or their names;
 * doubles as numbers, numeric strings, "NaN", "Infinity", "-Infinity"; bytes
 * as base64, standard or URL-safe, padded or not; trace/span ids as hex of
 * the exact length, any case ("" = absent; wrong length or non-hex is
 * -EPROTO naming the field; all zero = absent, as in the protobuf decoder).
 * The whole body must be valid UTF-8 and one JSON object; \u escapes must not
 * leave a lone surrogate.
 */
#include "proto/jsondec.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "lib/ascii.h"
#include "lib/cpu.h"
#include "lib/utf8.h"
#include "proto/jsondec_int.h"

/* ---- errors ---- */

__attribute__((format(printf, 3, 4))) int jd_fail(struct jd *j, size_t at, const char *fmt, ...)
{
    if (j->err != NULL && j->errlen != 0) {
        int k = snprintf(j->err, j->errlen, "%s json: ", signal_name(j->sig));
        if (k < 0 || (size_t)k >= j->errlen) {
            return -EPROTO;
        }
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(j->err + k, j->errlen - (size_t)k, fmt, ap);
        va_end(ap);
        if (m >= 0 && (size_t)(k + m) < j->errlen) {
            snprintf(j->err + k + m, j->errlen - (size_t)(k + m), " at offset %zu", at);
        }
    }
    return -EPROTO;
}

int jd_nomem(struct jd *j)
{
    if (j->err != NULL && j->errlen != 0) {
        snprintf(j->err, j->errlen, "%s json: out of memory at offset %zu", signal_name(j->sig),
                 j->lx.pos);
    }
    return -ENOMEM;
}

/* ---- objects and arrays ---- */

int jd_obj_open_rest(struct jd *j, const char *what)
{
    if (peekc(j) != '{') {
        return jd_fail(j, j->lx.pos, "%s: expected an object", what);
    }
    j->lx.pos++;
    return 0;
}

/* ---- member names ---- */

/* Index of the member |k| in |t|, or -1 (unknown: skip it). */
static int field_of(const struct jd *j, const struct jsonlex_str *k, const struct fdef *t, int nt)
{
    char buf[48];
    const char *p;
    if (!str_bytes(j, k, buf, sizeof(buf), &p)) {
        return -1;
    }
    for (int i = 0; i < nt; i++) {
        if ((k->len == t[i].clen && p[0] == t[i].camel[0] && memcmp(p, t[i].camel, k->len) == 0) ||
            (t[i].snake != NULL && k->len == t[i].slen && p[0] == t[i].snake[0] &&
             memcmp(p, t[i].snake, k->len) == 0)) {
            return i;
        }
    }
    return -1;
}

/* After the guess |h| (its camelCase name already tried): the camelCase
 * names from |h| on, then the snake_case ones (producers write one form;
 * most share their first byte with the other form's name). */
int jd_name_find_all(const char *p, const struct fdef *t, int nt, int h, size_t *len)
{
    int k = h;
    for (int i = 0; i < nt; i++, k = k + 1 == nt ? 0 : k + 1) {
        const struct fdef *d = &t[k];
        if (p[0] == d->cq[0] && name_eq(p, d->cq, d->clen + 1u)) {
            *len = d->clen;
            return k;
        }
    }
    for (int i = 0; i < nt; i++, k = k + 1 == nt ? 0 : k + 1) {
        const struct fdef *d = &t[k];
        if (d->slen != 0 && p[0] == d->sq[0] && name_eq(p, d->sq, d->slen + 1u)) {
            *len = d->slen;
            return k;
        }
    }
    return -1;
}

int jd_next_field_miss(struct jd *j, struct fcur *c, int h)
{
#ifdef __SSE2__
    struct jsonlex *x = &j->lx;
    int h2 = c->succ2[c->prev + 1] - 1;
    if (h2 >= 0 && h2 != h && x->n - x->pos > FNAME_MAX + 3) {
        int p = c->prev;
        if (fc_take_cm(x, c, h2)) { /* the second guess: now the first */
            c->succ2[p + 1] = (uint8_t)(h + 1);
            c->succ[p + 1] = (uint8_t)(h2 + 1);
            return 1;
        }
    }
#endif
    return next_field_rest(j, c, h);
}

__attribute__((noinline)) int jd_next_field_slow(struct jd *j, struct fcur *c)
{
    struct jsonlex_str k;
    int rc = obj_next(j, &k, &c->first);
    if (rc <= 0) {
        return rc;
    }
    c->f = field_of(j, &k, c->t, c->nt);
    if (c->f >= 0) {
        fc_learn(c, c->f);
        c->prev = c->f;
    }
    return 1;
}

/* ---- resource and scope ---- */

enum { SC_NAME, SC_VERSION, SC_ATTRS, SC_DROPPED };
static const struct fdef scope_fields[] = {
    [SC_NAME] = F1("name"),
    [SC_VERSION] = F1("version"),
    [SC_ATTRS] = F1("attributes"),
    [SC_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
};

static int scope_msg(struct jd *j, uint32_t si)
{
    int rc = jd_obj_open(j, "scope");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, scope_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct scope_row *sc = &j->b->scopes[si];
        if (f < 0 || take_null(j)) {
            rc = f < 0 ? skip_value(j) : 0;
        } else if (f == SC_NAME) {
            rc = rd_mstr(j, "scope.name", &sc->name);
        } else if (f == SC_VERSION) {
            rc = rd_mstr(j, "scope.version", &sc->version);
        } else if (f == SC_ATTRS) {
            rc = jd_attr_list(j, "scope.attributes", &sc->attrs);
        } else {
            rc = rd_u32(j, "scope.droppedAttributesCount", &sc->dropped_attrs);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum { RS_ATTRS, RS_DROPPED };
static const struct fdef resource_fields[] = {
    [RS_ATTRS] = F1("attributes"),
    [RS_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
};

static int resource_msg(struct jd *j, uint32_t ri)
{
    int rc = jd_obj_open(j, "resource");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, resource_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        struct res_row *r = &j->b->resources[ri];
        if (f < 0 || take_null(j)) {
            rc = f < 0 ? skip_value(j) : 0; /* entityRefs and unknown */
        } else if (f == RS_ATTRS) {
            rc = jd_attr_list(j, "resource.attributes", &r->attrs);
        } else {
            rc = rd_u32(j, "resource.droppedAttributesCount", &r->dropped_attrs);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- envelopes ---- */

enum { SE_SCOPE, SE_LOGS, SE_SPANS, SE_METRICS, SE_SCHEMA };
static const struct fdef scope_env_fields[] = {
    [SE_SCOPE] = F1("scope"),
    [SE_LOGS] = F2("logRecords", "log_records"),
    [SE_SPANS] = F1("spans"),
    [SE_METRICS] = F1("metrics"),
    [SE_SCHEMA] = F2("schemaUrl", "schema_url"),
};

static int scope_env(struct jd *j, uint32_t ri)
{
    uint32_t si = j->b->n_scopes;
    int items = j->sig == SIG_LOGS ? SE_LOGS : j->sig == SIG_TRACES ? SE_SPANS : SE_METRICS;
    int rc;
    if (batch_add_scope(j->b) == NULL) {
        return jd_nomem(j);
    }
    j->b->scopes[si].resource = ri;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = jd_obj_open(j, "scope envelope")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, scope_env_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        bool known = f == SE_SCOPE || f == SE_SCHEMA || f == items;
        if (!known || take_null(j)) {
            if (!known && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        if (f == SE_SCOPE) {
            rc = scope_msg(j, si);
        } else if (f == SE_SCHEMA) {
            rc = rd_mstr(j, "schemaUrl", &j->b->scopes[si].schema_url);
        } else {
            rc = j->sig == SIG_LOGS     ? jd_log_records(j, si)
                 : j->sig == SIG_TRACES ? jd_spans(j, si)
                                        : jd_metrics(j, si);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum { RE_RESOURCE, RE_LOGS, RE_SPANS, RE_METRICS, RE_SCHEMA };
static const struct fdef resource_env_fields[] = {
    [RE_RESOURCE] = F1("resource"),
    [RE_LOGS] = F2("scopeLogs", "scope_logs"),
    [RE_SPANS] = F2("scopeSpans", "scope_spans"),
    [RE_METRICS] = F2("scopeMetrics", "scope_metrics"),
    [RE_SCHEMA] = F2("schemaUrl", "schema_url"),
};

static int resource_env(struct jd *j)
{
    uint32_t ri = j->b->n_resources;
    int items = j->sig == SIG_LOGS ? RE_LOGS : j->sig == SIG_TRACES ? RE_SPANS : RE_METRICS;
    int rc;
    if (batch_add_resource(j->b) == NULL) {
        return jd_nomem(j);
    }
    if (take_null(j)) {
        return 0;
    }
    if ((rc = jd_obj_open(j, "resource envelope")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, resource_env_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        bool known = f == RE_RESOURCE || f == RE_SCHEMA || f == items;
        if (!known || take_null(j)) {
            if (!known && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        if (f == RE_RESOURCE) {
            rc = resource_msg(j, ri);
        } else if (f == RE_SCHEMA) {
            rc = rd_mstr(j, "schemaUrl", &j->b->resources[ri].schema_url);
        } else {
            bool efirst = true;
            if ((rc = arr_open(j, resource_env_fields[f].camel)) < 0) {
                return rc;
            }
            while ((rc = arr_next(j, &efirst)) > 0) {
                if ((rc = scope_env(j, ri)) < 0) {
                    return rc;
                }
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

static const struct fdef request_fields[] = {
    [SIG_LOGS - 1] = F2("resourceLogs", "resource_logs"),
    [SIG_TRACES - 1] = F2("resourceSpans", "resource_spans"),
    [SIG_METRICS - 1] = F2("resourceMetrics", "resource_metrics"),
};

static int request(struct jd *j)
{
    int rc = jd_obj_open(j, "request");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, request_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f != (int)j->sig - 1 || take_null(j)) {
            if (f != (int)j->sig - 1 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        bool efirst = true;
        if ((rc = arr_open(j, request_fields[f].camel)) < 0) {
            return rc;
        }
        while ((rc = arr_next(j, &efirst)) > 0) {
            if ((rc = resource_env(j)) < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

/* ---- entry ---- */

/* utf8_check's answer (the offset of the first byte not part of valid
 * UTF-8, or |n|): ASCII skipped by ascii_span (a request body is almost
 * all ASCII), then up to 32 bytes one sequence at a time before the next
 * span, so that a text of many short non-ASCII runs is not a call each. */
static size_t body_utf8_check(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while ((i += ascii_span(s + i, n - i)) < n) {
        size_t end = n - i >= 32 ? i + 32 : n;
        while (i < end) { /* a sequence may run past |end| */
            if (s[i] < 0x80) {
                i++;
                continue;
            }
            size_t k = utf8_seq(s + i, n - i);
            if (k == 0) {
                return i;
            }
            i += k;
        }
    }
    return n;
}

int jsondec_decode(enum signal s, const char *body, size_t len, arena *a, struct batch *out,
                   char *err, size_t errlen)
{
    struct jd j = {
        .lx = {.s = body, .n = len},
        .a = a,
        .b = out,
        .h = &out->heap,
        .sig = s,
        .err = err,
        .errlen = errlen,
        .avx2 = cpu_avx2(),
    };
    if (err != NULL && errlen != 0) {
        err[0] = '\0';
    }
    assert(out->signal == s && s >= SIG_LOGS && s <= SIG_METRICS); /* the caller's batch */
    /* on failure the batch is put back as it was, as pbdec does */
    uint32_t n_res = out->n_resources, n_scopes = out->n_scopes, n_metrics = out->n_metrics,
             n_rows = out->n_rows;
    size_t heap_len = out->heap.len;
    int rc;
    size_t bad = body_utf8_check((const uint8_t *)body, len);
    if (bad < len) {
        rc = jd_fail(&j, bad, "invalid UTF-8");
    } else if (peekc(&j) != '{') {
        rc = jd_fail(&j, j.lx.pos,
                     j.lx.pos < len ? "expected '{' (an export request object)"
                                    : "empty body (expected an export request object)");
    } else if ((rc = request(&j)) == 0 && peekc(&j) >= 0) {
        rc = jd_fail(&j, j.lx.pos, "trailing characters after the request object");
    }
    if (rc == 0 && out->heap.len > UINT32_MAX) {
        if (err != NULL && errlen != 0) {
            snprintf(err, errlen, "%s json: decoded values exceed 4 GiB", signal_name(s));
        }
        rc = -ENOMEM; /* a limit, like the arena's */
    }
    if (rc < 0) {
        out->n_resources = n_res;
        out->n_scopes = n_scopes;
        out->n_metrics = n_metrics;
        out->n_rows = n_rows;
        out->heap.len = heap_len;
    }
    return rc;
}
