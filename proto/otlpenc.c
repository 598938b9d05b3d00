/*
 * otlpenc.c - OTLP encoders of stored spans for the Tempo endpoints
 * (otlpenc.h): protobuf (opentelemetry/proto/trace/v1/trace.proto
 * field numbers, hand-encoded so a trace streams out without building
 * protobuf-c messages) and gogo jsonpb JSON (FACTS.md D.2: trace/span ids
 * in base64, enums by name, 64-bit integers as strings, zero and empty
 * fields omitted).
 *
 * Stored values are trusted to be well formed (the decoders and the block
 * CRCs vouch for them); a malformed nested value ends its list early
 * rather than failing the answer.
 */
#include "proto/otlpenc.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "lib/base64.h"
#include "lib/jsonw.h"
#include "lib/pbw.h"
#include "proto/otlpnames.h"

/* lib/jsonw.h cannot see storage/val.h: its depth must hold the deepest
 * AnyValue the decoders accept, at 4 JSON levels per value level, plus an
 * answer's envelope (lib/jsonw.h). */
_Static_assert(JSONW_MAX_DEPTH == 4 * VAL_MAX_DEPTH + 64,
               "JSONW_MAX_DEPTH out of step with VAL_MAX_DEPTH");

/* ---- values ---- */

static void pb_anyvalue(struct pbw *s, const void *arg);

static void pb_array(struct pbw *s, const void *arg)
{
    const struct val *v = arg;
    struct val_rd r = v->inner;
    for (uint32_t i = 0; i < v->count; i++) {
        struct val m;
        if (val_rd_value(&r, &m) < 0) {
            return;
        }
        pbw_sub(s, 1, pb_anyvalue, &m);
    }
}

struct pb_kv {
    const char *k;
    size_t kn;
    struct val v;
};

static void pb_keyvalue(struct pbw *s, const void *arg)
{
    const struct pb_kv *kv = arg;
    pbw_str_field(s, 1, kv->k, kv->kn);
    pbw_sub(s, 2, pb_anyvalue, &kv->v);
}

static void pb_kvlist(struct pbw *s, const void *arg)
{
    const struct val *v = arg;
    struct val_rd r = v->inner;
    for (uint32_t i = 0; i < v->count; i++) {
        struct pb_kv kv;
        if (val_rd_kv(&r, &kv.k, &kv.kn, &kv.v) < 0) {
            return;
        }
        pbw_sub(s, 1, pb_keyvalue, &kv);
    }
}

static void pb_anyvalue(struct pbw *s, const void *arg)
{
    const struct val *v = arg;
    switch (v->type) {
    case VAL_STR:
        pbw_bytes(s, 1, v->s, v->n);
        break;
    case VAL_BOOL:
        pbw_tag(s, 2, PBW_VARINT);
        pbw_varint(s, v->b ? 1 : 0);
        break;
    case VAL_INT:
        pbw_tag(s, 3, PBW_VARINT);
        pbw_varint(s, (uint64_t)v->i);
        break;
    case VAL_DOUBLE: {
        uint64_t u;
        memcpy(&u, &v->d, 8);
        pbw_fixed64(s, 4, u);
        break;
    }
    case VAL_ARRAY:
        pbw_sub(s, 5, pb_array, v);
        break;
    case VAL_KVLIST:
        pbw_sub(s, 6, pb_kvlist, v);
        break;
    case VAL_BYTES:
        pbw_bytes(s, 7, v->s, v->n);
        break;
    default:
        break;
    }
}

/* Repeated KeyValue |field| from an attribute blob. */
static void pb_attrs(struct pbw *s, uint32_t field, const uint8_t *p, uint32_t len, uint32_t count)
{
    struct val_rd r = {p, p + len};
    for (uint32_t i = 0; i < count; i++) {
        struct pb_kv kv;
        if (val_rd_kv(&r, &kv.k, &kv.kn, &kv.v) < 0) {
            return;
        }
        pbw_sub(s, field, pb_keyvalue, &kv);
    }
}

void otlpenc_pb_resource(struct pbw *s, const struct res_view *r)
{
    pb_attrs(s, 1, r->attrs.p, r->attrs.len, r->attrs.count);
    pbw_uint_field(s, 2, r->dropped_attrs);
}

void otlpenc_pb_scope(struct pbw *s, const struct scope_view *sc)
{
    pbw_str_field(s, 1, sc->name.p, sc->name.len);
    pbw_str_field(s, 2, sc->version.p, sc->version.len);
    pb_attrs(s, 3, sc->attrs.p, sc->attrs.len, sc->attrs.count);
    pbw_uint_field(s, 4, sc->dropped_attrs);
}

/* ---- events and links (batch.h encodings) ---- */

struct tev {
    uint64_t time_ns;
    const char *name;
    size_t name_len;
    uint32_t dropped;
    uint32_t count;
    const uint8_t *attrs;
    uint32_t attrs_len;
};

static int ev_next(struct val_rd *r, struct tev *e)
{
    uint32_t nbytes;
    if (val_rd_u64(r, &e->time_ns) < 0 || val_rd_str(r, &e->name, &e->name_len) < 0 ||
        val_rd_u32(r, &e->dropped) < 0 || val_rd_u32(r, &e->count) < 0 ||
        val_rd_u32(r, &nbytes) < 0 || (size_t)(r->end - r->p) < nbytes) {
        return -1;
    }
    e->attrs = r->p;
    e->attrs_len = nbytes;
    r->p += nbytes;
    return 0;
}

struct tln {
    const uint8_t *trace_id;
    const uint8_t *span_id;
    const char *state;
    size_t state_len;
    uint32_t flags;
    uint32_t dropped;
    uint32_t count;
    const uint8_t *attrs;
    uint32_t attrs_len;
};

static int ln_next(struct val_rd *r, struct tln *l)
{
    uint32_t nbytes;
    if (r->end - r->p < 24) {
        return -1;
    }
    l->trace_id = r->p;
    l->span_id = r->p + 16;
    r->p += 24;
    if (val_rd_str(r, &l->state, &l->state_len) < 0 || val_rd_u32(r, &l->flags) < 0 ||
        val_rd_u32(r, &l->dropped) < 0 || val_rd_u32(r, &l->count) < 0 ||
        val_rd_u32(r, &nbytes) < 0 || (size_t)(r->end - r->p) < nbytes) {
        return -1;
    }
    l->attrs = r->p;
    l->attrs_len = nbytes;
    r->p += nbytes;
    return 0;
}

static void pb_event(struct pbw *s, const void *arg)
{
    const struct tev *e = arg;
    if (e->time_ns != 0) {
        pbw_fixed64(s, 1, e->time_ns);
    }
    pbw_str_field(s, 2, e->name, e->name_len);
    pb_attrs(s, 3, e->attrs, e->attrs_len, e->count);
    pbw_uint_field(s, 4, e->dropped);
}

static void pb_link(struct pbw *s, const void *arg)
{
    const struct tln *l = arg;
    pbw_bytes(s, 1, l->trace_id, 16);
    pbw_bytes(s, 2, l->span_id, 8);
    pbw_str_field(s, 3, l->state, l->state_len);
    pb_attrs(s, 4, l->attrs, l->attrs_len, l->count);
    pbw_uint_field(s, 5, l->dropped);
    if (l->flags != 0) {
        pbw_fixed32(s, 6, l->flags);
    }
}

static void pb_status(struct pbw *s, const void *arg)
{
    const struct span_view *v = arg;
    pbw_str_field(s, 2, v->status_message.p, v->status_message.len);
    pbw_uint_field(s, 3, (uint64_t)(int64_t)v->status_code);
}

void otlpenc_pb_span(struct pbw *s, const struct span_view *v)
{
    pbw_bytes(s, 1, v->trace_id, 16);
    pbw_bytes(s, 2, v->span_id, 8);
    pbw_str_field(s, 3, v->trace_state.p, v->trace_state.len);
    if (v->has_parent) {
        pbw_bytes(s, 4, v->parent_span_id, 8);
    }
    pbw_str_field(s, 5, v->name.p, v->name.len);
    pbw_uint_field(s, 6, (uint64_t)(int64_t)v->kind);
    if (v->start_ns != 0) {
        pbw_fixed64(s, 7, v->start_ns);
    }
    if (v->end_ns != 0) {
        pbw_fixed64(s, 8, v->end_ns);
    }
    pb_attrs(s, 9, v->attrs.p, v->attrs.len, v->attrs.count);
    pbw_uint_field(s, 10, v->dropped_attrs);
    struct val_rd r = {v->events.p, v->events.p + v->events.len};
    for (uint32_t i = 0; i < v->n_events; i++) {
        struct tev e;
        if (ev_next(&r, &e) < 0) {
            break;
        }
        pbw_sub(s, 11, pb_event, &e);
    }
    pbw_uint_field(s, 12, v->dropped_events);
    r = (struct val_rd){v->links.p, v->links.p + v->links.len};
    for (uint32_t i = 0; i < v->n_links; i++) {
        struct tln l;
        if (ln_next(&r, &l) < 0) {
            break;
        }
        pbw_sub(s, 13, pb_link, &l);
    }
    pbw_uint_field(s, 14, v->dropped_links);
    if (v->status_code != 0 || v->status_message.len > 0) {
        pbw_sub(s, 15, pb_status, v);
    }
    if (v->flags != 0) {
        pbw_fixed32(s, 16, v->flags);
    }
}

size_t otlpenc_pb_span_size(const struct span_view *v)
{
    struct pbw c;
    pbw_init(&c, NULL);
    otlpenc_pb_span(&c, v);
    return c.n;
}

/* ---- JSON ---- */

static void json_b64(struct jsonw *w, const uint8_t *p, size_t n)
{
    char small[BASE64_ENCODED_LEN(48) + 1]; /* a piece and its NUL */
    if (n <= 45) {
        size_t k = base64_encode(small, p, n, true);
        jsonw_str(w, small, k);
        return;
    }
    /* bytesValue of any size: encode in pieces of 48 bytes (64 chars). */
    struct evbuffer *tmp = evbuffer_new();
    if (tmp == NULL) {
        w->err = -ENOMEM;
        return;
    }
    for (size_t i = 0; i < n; i += 48) {
        size_t k = base64_encode(small, p + i, n - i < 48 ? n - i : 48, true);
        evbuffer_add(tmp, small, k);
    }
    size_t len = evbuffer_get_length(tmp);
    const char *all = (const char *)evbuffer_pullup(tmp, (ssize_t)len);
    jsonw_str(w, all != NULL ? all : "", all != NULL ? len : 0);
    evbuffer_free(tmp);
}

/* jsonpb writes non-finite doubles as "NaN", "Infinity", "-Infinity". */
static void json_double(struct jsonw *w, double d)
{
    if (d != d) {
        jsonw_cstr(w, "NaN");
    } else if (d > 1.7976931348623157e308) {
        jsonw_cstr(w, "Infinity");
    } else if (d < -1.7976931348623157e308) {
        jsonw_cstr(w, "-Infinity");
    } else {
        jsonw_double(w, d);
    }
}

static void json_kvs(struct jsonw *w, struct val_rd r, uint32_t count);

void otlpenc_json_value(struct jsonw *w, const struct val *v)
{
    jsonw_obj_begin(w);
    switch (v->type) {
    case VAL_STR:
        jsonw_key(w, "stringValue");
        jsonw_str(w, v->s, v->n);
        break;
    case VAL_BOOL:
        jsonw_key(w, "boolValue");
        jsonw_bool(w, v->b);
        break;
    case VAL_INT: {
        char b[24];
        int n = snprintf(b, sizeof(b), "%lld", (long long)v->i);
        jsonw_key(w, "intValue");
        jsonw_str(w, b, (size_t)n);
        break;
    }
    case VAL_DOUBLE:
        jsonw_key(w, "doubleValue");
        json_double(w, v->d);
        break;
    case VAL_ARRAY: {
        jsonw_key(w, "arrayValue");
        jsonw_obj_begin(w);
        jsonw_key(w, "values");
        jsonw_arr_begin(w);
        struct val_rd r = v->inner;
        for (uint32_t i = 0; i < v->count; i++) {
            struct val m;
            if (val_rd_value(&r, &m) < 0) {
                break;
            }
            otlpenc_json_value(w, &m);
        }
        jsonw_arr_end(w);
        jsonw_obj_end(w);
        break;
    }
    case VAL_KVLIST:
        jsonw_key(w, "kvlistValue");
        jsonw_obj_begin(w);
        jsonw_key(w, "values");
        json_kvs(w, v->inner, v->count);
        jsonw_obj_end(w);
        break;
    case VAL_BYTES:
        jsonw_key(w, "bytesValue");
        json_b64(w, (const uint8_t *)v->s, v->n);
        break;
    default:
        break;
    }
    jsonw_obj_end(w);
}

/* An array of {"key":..,"value":{..}}. */
static void json_kvs(struct jsonw *w, struct val_rd r, uint32_t count)
{
    jsonw_arr_begin(w);
    for (uint32_t i = 0; i < count; i++) {
        const char *k;
        size_t kn;
        struct val v;
        if (val_rd_kv(&r, &k, &kn, &v) < 0) {
            break;
        }
        jsonw_obj_begin(w);
        jsonw_key(w, "key");
        jsonw_str(w, k, kn);
        jsonw_key(w, "value");
        otlpenc_json_value(w, &v);
        jsonw_obj_end(w);
    }
    jsonw_arr_end(w);
}

static void json_attrs_members(struct jsonw *w, const uint8_t *p, uint32_t len, uint32_t count,
                               uint32_t dropped)
{
    if (count > 0) {
        jsonw_key(w, "attributes");
        json_kvs(w, (struct val_rd){p, p + len}, count);
    }
    if (dropped > 0) {
        jsonw_key(w, "droppedAttributesCount");
        jsonw_uint(w, dropped);
    }
}

void otlpenc_json_attrs(struct jsonw *w, const struct oattrs *a)
{
    json_kvs(w, (struct val_rd){a->p, a->p + a->len}, a->count);
}

void otlpenc_json_resource(struct jsonw *w, const struct res_view *r)
{
    jsonw_obj_begin(w);
    json_attrs_members(w, r->attrs.p, r->attrs.len, r->attrs.count, r->dropped_attrs);
    jsonw_obj_end(w);
}

void otlpenc_json_scope(struct jsonw *w, const struct scope_view *sc)
{
    jsonw_obj_begin(w);
    if (sc->name.len > 0) {
        jsonw_key(w, "name");
        jsonw_str(w, sc->name.p, sc->name.len);
    }
    if (sc->version.len > 0) {
        jsonw_key(w, "version");
        jsonw_str(w, sc->version.p, sc->version.len);
    }
    json_attrs_members(w, sc->attrs.p, sc->attrs.len, sc->attrs.count, sc->dropped_attrs);
    jsonw_obj_end(w);
}

static void json_u64s(struct jsonw *w, const char *key, uint64_t v)
{
    if (v != 0) {
        jsonw_key(w, key);
        jsonw_uint_str(w, v);
    }
}

static void json_id(struct jsonw *w, const char *key, const uint8_t *p, size_t n)
{
    char b[32];
    size_t k = base64_encode(b, p, n, true);
    jsonw_key(w, key);
    jsonw_str(w, b, k);
}

void otlpenc_json_span(struct jsonw *w, const struct span_view *v)
{
    jsonw_obj_begin(w);
    json_id(w, "traceId", v->trace_id, 16);
    json_id(w, "spanId", v->span_id, 8);
    if (v->trace_state.len > 0) {
        jsonw_key(w, "traceState");
        jsonw_str(w, v->trace_state.p, v->trace_state.len);
    }
    if (v->has_parent) {
        json_id(w, "parentSpanId", v->parent_span_id, 8);
    }
    if (v->flags != 0) {
        jsonw_key(w, "flags");
        jsonw_uint(w, v->flags);
    }
    if (v->name.len > 0) {
        jsonw_key(w, "name");
        jsonw_str(w, v->name.p, v->name.len);
    }
    if (v->kind != 0) {
        jsonw_key(w, "kind");
        if (v->kind > 0 && v->kind < OTLP_SPAN_KINDS) {
            jsonw_cstr(w, otlp_span_kind_names[v->kind]);
        } else {
            jsonw_int(w, v->kind); /* jsonpb: an unknown enum value as its number */
        }
    }
    json_u64s(w, "startTimeUnixNano", v->start_ns);
    json_u64s(w, "endTimeUnixNano", v->end_ns);
    json_attrs_members(w, v->attrs.p, v->attrs.len, v->attrs.count, v->dropped_attrs);
    if (v->n_events > 0) {
        jsonw_key(w, "events");
        jsonw_arr_begin(w);
        struct val_rd r = {v->events.p, v->events.p + v->events.len};
        for (uint32_t i = 0; i < v->n_events; i++) {
            struct tev e;
            if (ev_next(&r, &e) < 0) {
                break;
            }
            jsonw_obj_begin(w);
            json_u64s(w, "timeUnixNano", e.time_ns);
            if (e.name_len > 0) {
                jsonw_key(w, "name");
                jsonw_str(w, e.name, e.name_len);
            }
            json_attrs_members(w, e.attrs, e.attrs_len, e.count, e.dropped);
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    if (v->dropped_events > 0) {
        jsonw_key(w, "droppedEventsCount");
        jsonw_uint(w, v->dropped_events);
    }
    if (v->n_links > 0) {
        jsonw_key(w, "links");
        jsonw_arr_begin(w);
        struct val_rd r = {v->links.p, v->links.p + v->links.len};
        for (uint32_t i = 0; i < v->n_links; i++) {
            struct tln l;
            if (ln_next(&r, &l) < 0) {
                break;
            }
            jsonw_obj_begin(w);
            json_id(w, "traceId", l.trace_id, 16);
            json_id(w, "spanId", l.span_id, 8);
            if (l.state_len > 0) {
                jsonw_key(w, "traceState");
                jsonw_str(w, l.state, l.state_len);
            }
            json_attrs_members(w, l.attrs, l.attrs_len, l.count, l.dropped);
            if (l.flags != 0) {
                jsonw_key(w, "flags");
                jsonw_uint(w, l.flags);
            }
            jsonw_obj_end(w);
        }
        jsonw_arr_end(w);
    }
    if (v->dropped_links > 0) {
        jsonw_key(w, "droppedLinksCount");
        jsonw_uint(w, v->dropped_links);
    }
    if (v->status_code != 0 || v->status_message.len > 0) {
        jsonw_key(w, "status");
        jsonw_obj_begin(w);
        if (v->status_message.len > 0) {
            jsonw_key(w, "message");
            jsonw_str(w, v->status_message.p, v->status_message.len);
        }
        if (v->status_code != 0) {
            jsonw_key(w, "code");
            if (v->status_code > 0 && v->status_code < OTLP_STATUS_CODES) {
                jsonw_cstr(w, otlp_status_names[v->status_code]);
            } else {
                jsonw_int(w, v->status_code);
            }
        }
        jsonw_obj_end(w);
    }
    jsonw_obj_end(w);
}

/* Events and links for the TraceQL evaluator (query/traces.c). */
int otlpenc_event_next(struct val_rd *r, uint64_t *time_ns, const char **name, size_t *name_len,
                       struct oattrs *attrs)
{
    struct tev e;
    if (ev_next(r, &e) < 0) {
        return -1;
    }
    *time_ns = e.time_ns;
    *name = e.name;
    *name_len = e.name_len;
    *attrs = (struct oattrs){e.attrs, e.attrs_len, e.count};
    return 0;
}

int otlpenc_link_next(struct val_rd *r, const uint8_t **trace_id, const uint8_t **span_id,
                      struct oattrs *attrs)
{
    struct tln l;
    if (ln_next(r, &l) < 0) {
        return -1;
    }
    *trace_id = l.trace_id;
    *span_id = l.span_id;
    *attrs = (struct oattrs){l.attrs, l.attrs_len, l.count};
    return 0;
}
