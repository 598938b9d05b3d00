/*
 * pbdec.c - hand-written OTLP protobuf decoder (see pbdec.h).
 *
 * Reads an Export{Logs,Trace,Metrics}ServiceRequest straight off the wire
 * into the row model of storage/batch.h. No message tree is built: strings
 * stay pointers into the body, everything that needs encoding is written
 * once into batch->heap with the val.h writers, and nothing is malloc'ed per
 * record (only the batch's arrays and heap grow, geometrically).
 *
 * HOW A MESSAGE IS READ
 * A message's fields may arrive in any order, a repeated field may be split
 * into several runs, and a blob in the heap must be contiguous. So every
 * message is read in one pass that sets the scalar fields and encodes at most
 * ONE repeated field into the heap as it goes (normally the attributes);
 * every other heap-producing field is only remembered as the byte range from
 * its first to its last occurrence, and encoded after the pass by walking that
 * range again and picking that field's occurrences out. Children that become
 * rows of their own (scope_logs, log_records, data points, ...) are deferred
 * the same way, so a resource or scope row is complete before its children
 * name it.
 *
 * The record decoders (log record, span, the four data points) first look
 * at a field's tag byte itself: a one-byte tag whose wire type is the
 * field's, with its fixed value, one-byte length or attribute run there, is
 * read in place (TAG1 in pbdec_int.h). Everything else, including every
 * field that would fail, takes the general reader and its checks, so
 * results and error texts are those of the general path.
 *
 * PROTOBUF RULES FOLLOWED
 * - Unknown fields with a valid wire type are skipped (reserved numbers too).
 * - Wrong wire type for a known field, wire types 3/4 (groups) and 6/7,
 *   field number 0, truncated varints and fixed values, lengths past the
 *   end, varints longer than 10 bytes (tags and lengths: 5, as protobuf-c)
 *   are -EPROTO with a one-line reason naming the byte offset.
 * - Scalars: the last occurrence wins. Repeated numeric fields accept packed
 *   and unpacked encodings, mixed. A singular sub-message that occurs more
 *   than once is merged (its occurrences are read one after the other into
 *   the same row), as protobuf specifies.
 * - oneof: the last member on the wire wins, whole: a message member that
 *   occurs twice (array_value, Metric.gauge, ...) is replaced, not merged, as
 *   protobuf-c does. A singular AnyValue field occurring twice (body,
 *   KeyValue.value) is merged as protobuf specifies: a later copy with no
 *   member keeps the earlier value (protobuf-c 1.4.1 gets this case wrong or
 *   refuses it). Losing members are still decoded (and so validated), then
 *   their heap bytes / rows are rolled back.
 * - Enum values outside the enum are kept as they are.
 * - `string` fields must be valid UTF-8 (proto3 requires it): anything else is
 *   -EPROTO. `bytes` are not checked.
 * - AnyValue nesting deeper than VAL_MAX_DEPTH (a body or attribute value is
 *   depth 1) is -EPROTO; this is also what bounds the recursion, so a hostile
 *   body cannot exhaust the stack. All other message nesting is fixed by the
 *   schema.
 * - string_value_strindex / key_strindex (profiles only) are read and
 *   ignored: the value becomes empty, the key is whatever `key` says.
 * - trace/span ids of the wrong length or all zero: has_* = false (logs,
 *   exemplars, span parents); span and link ids are then stored as zeros.
 * - Resource.entity_refs is validated and dropped (the row model has no
 *   place for it).
 * - A body that would decode into more than EXPANSION_MAX times its size in
 *   rows and heap (+ 1 MiB) is refused, so hostile input made of tiny
 *   records cannot balloon memory before admission charges the batch.
 *
 * On any error the batch is restored to what it held before the call.
 *
 * FILES
 * This file: errors, the field reader's slow path, AnyValue / ArrayValue /
 * KeyValueList and the general KeyValue, Resource, InstrumentationScope and
 * the envelopes (request, ResourceX, ScopeX) the three signals share.
 * pbdec_logs.c, pbdec_traces.c, pbdec_metrics.c: one signal's record decoder
 * each. pbdec_int.h: what they share, the hot reader and writers inline.
 */
#include "proto/pbdec.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "proto/pbdec_int.h"

int pbdec_fail(struct dec *d, const uint8_t *at, const char *fmt, ...)
{
    if (d->err != NULL && d->errlen > 0) {
        int n = snprintf(d->err, d->errlen, "%s: ", d->sig);
        if (n >= 0 && (size_t)n < d->errlen) {
            va_list ap;
            va_start(ap, fmt);
            int m = vsnprintf(d->err + n, d->errlen - (size_t)n, fmt, ap);
            va_end(ap);
            if (m >= 0 && (size_t)(n + m) < d->errlen) {
                snprintf(d->err + n + m, d->errlen - (size_t)(n + m), " at offset %zu",
                         (size_t)(at - d->base));
            }
        }
    }
    return -EPROTO;
}

int pbdec_fail_nomem(struct dec *d, const char *what)
{
    if (d->err != NULL && d->errlen > 0) {
        snprintf(d->err, d->errlen, "%s: %s", d->sig, what);
    }
    return -ENOMEM;
}

int pbdec_wrong_wt(struct dec *d, const struct fld *f, const char *name)
{
    return pbdec_fail(d, f->at, "wrong wire type %u for field %s", f->wt, name);
}

/* 1 and |f| filled; 0 at the end of the message; -EPROTO. Any encoding. */
__attribute__((noinline)) int pbdec_next_field_slow(struct dec *d, struct cur *c, struct fld *f)
{
    const uint8_t *p = c->p;
    const uint8_t *end = c->end;
    uint64_t tag = 0;

    if (p == end) {
        return 0;
    }
    f->at = p;
    TRY(rd_varint(d, &p, end, 5, &tag, "varint (tag)"));
    if (UNLIKELY(tag > UINT32_MAX)) {
        return pbdec_fail(d, f->at, "bad tag");
    }
    f->num = (uint32_t)(tag >> 3);
    f->wt = (uint32_t)(tag & 7);
    if (UNLIKELY(f->num == 0)) {
        return pbdec_fail(d, f->at, "field number 0");
    }
    switch (f->wt) {
    case WT_VARINT:
        TRY(rd_varint(d, &p, end, 10, &f->v, "varint"));
        break;
    case WT_I64:
        if (UNLIKELY(end - p < 8)) {
            return pbdec_fail(d, f->at, "truncated fixed64 in field %u", f->num);
        }
        f->v = le64(p);
        p += 8;
        break;
    case WT_LEN: {
        uint64_t n = 0;
        TRY(rd_varint(d, &p, end, 5, &n, "varint (length)"));
        if (UNLIKELY(n > (uint64_t)(end - p))) {
            return pbdec_fail(d, f->at, "bad length %llu in field %u: past the end of the message",
                              (unsigned long long)n, f->num);
        }
        f->p = p;
        f->len = (size_t)n;
        p += n;
        break;
    }
    case WT_I32:
        if (UNLIKELY(end - p < 4)) {
            return pbdec_fail(d, f->at, "truncated fixed32 in field %u", f->num);
        }
        f->v = le32(p);
        p += 4;
        break;
    case 3:
    case 4:
        return pbdec_fail(d, f->at, "group wire type %u in field %u", f->wt, f->num);
    default:
        return pbdec_fail(d, f->at, "unknown wire type %u in field %u", f->wt, f->num);
    }
    c->p = p;
    return 1;
}

/* ---- AnyValue and key-value lists ---- */

static int dec_array(struct dec *d, const uint8_t *p, size_t n, int depth);
static int dec_kvlist(struct dec *d, const uint8_t *p, size_t n, int depth);

/*
 * Decodes one occurrence of an AnyValue at |depth| into |st|. A member
 * replaces whatever the state held (heap rolled back to st->start); an
 * occurrence without members leaves it as it was.
 */
int pbdec_anyvalue(struct dec *d, const uint8_t *p, size_t n, int depth, enum av_mode mode,
                   struct av_state *st)
{
    if (UNLIKELY(depth > VAL_MAX_DEPTH)) {
        return pbdec_fail(d, p, "AnyValue nested deeper than %d levels", VAL_MAX_DEPTH);
    }
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1: { /* string_value */
            struct mstr s;
            TRY(get_str(d, &f, "string_value", &s));
            h->len = st->start;
            st->type = VAL_STR;
            if (mode == AV_BODY) {
                st->str = s;
            } else {
                TRY(put_lenval(h, VAL_STR, s.p, s.len));
            }
            break;
        }
        case 2: /* bool_value */
            WANT(f, WT_VARINT, "bool_value");
            h->len = st->start;
            st->type = VAL_BOOL;
            TRY(put_boolval(h, f.v != 0));
            break;
        case 3: /* int_value */
            WANT(f, WT_VARINT, "int_value");
            h->len = st->start;
            st->type = VAL_INT;
            TRY(put_intval(h, (int64_t)f.v));
            break;
        case 4: /* double_value */
            WANT(f, WT_I64, "double_value");
            h->len = st->start;
            st->type = VAL_DOUBLE;
            TRY(put_f64val(h, f.v));
            break;
        case 5: /* array_value */
            WANT(f, WT_LEN, "array_value");
            h->len = st->start;
            st->type = VAL_ARRAY;
            TRY(dec_array(d, f.p, f.len, depth));
            break;
        case 6: /* kvlist_value */
            WANT(f, WT_LEN, "kvlist_value");
            h->len = st->start;
            st->type = VAL_KVLIST;
            TRY(dec_kvlist(d, f.p, f.len, depth));
            break;
        case 7: /* bytes_value */
            WANT(f, WT_LEN, "bytes_value");
            h->len = st->start;
            st->type = VAL_BYTES;
            TRY(put_lenval(h, VAL_BYTES, f.p, f.len));
            break;
        case 8: /* string_value_strindex: profiles only, value is empty */
            WANT(f, WT_VARINT, "string_value_strindex");
            h->len = st->start;
            st->type = VAL_EMPTY;
            break;
        default:
            break;
        }
    }
    return rc;
}

/* ArrayValue of a value at |depth|: its elements are at depth + 1. */
static int dec_array(struct dec *d, const uint8_t *p, size_t n, int depth)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    uint32_t count = 0;
    int rc;

    long at = val_open(h, VAL_ARRAY);
    if (at < 0) {
        return -ENOMEM;
    }
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 1) {
            WANT(f, WT_LEN, "values");
            struct av_state es = {.type = VAL_EMPTY, .start = h->len};
            TRY(pbdec_anyvalue(d, f.p, f.len, depth + 1, AV_HEAP, &es));
            if (h->len == es.start) {
                TRY(val_put_empty(h));
            }
            count++;
        }
    }
    if (rc < 0) {
        return rc;
    }
    val_close(h, at, count);
    return 0;
}

static int dec_kvlist(struct dec *d, const uint8_t *p, size_t n, int depth)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    uint32_t count = 0;
    int rc;

    long at = val_open(h, VAL_KVLIST);
    if (at < 0) {
        return -ENOMEM;
    }
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 1) {
            WANT(f, WT_LEN, "values");
            TRY(dec_kv(d, f.p, f.len, depth + 1));
            count++;
        }
    }
    if (rc < 0) {
        return rc;
    }
    val_close(h, at, count);
    return 0;
}

/* dec_kv for any encoding of a KeyValue. */
__attribute__((noinline)) int pbdec_kv_slow(struct dec *d, const uint8_t *p, size_t n, int depth)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct mstr key = {"", 0};
    struct range val = {0};
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            TRY(get_str(d, &f, "key", &key));
            break;
        case 2:
            WANT(f, WT_LEN, "value");
            range_add(&val, &f, &c);
            break;
        case 3: /* key_strindex: profiles only */
            WANT(f, WT_VARINT, "key_strindex");
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(put_key(h, key.p, key.len));
    struct av_state st = {.type = VAL_EMPTY, .start = h->len};
    if (val.first != NULL) {
        c.p = val.first;
        c.end = val.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 2) {
                TRY(pbdec_anyvalue(d, f.p, f.len, depth, AV_HEAP, &st));
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    if (h->len == st.start) {
        TRY(val_put_empty(h));
    }
    return 0;
}

/* ---- resource and scope ---- */

static int dec_entity_ref(struct dec *d, const uint8_t *p, size_t n)
{
    static const char *const names[] = {NULL, "schema_url", "type", "id_keys", "description_keys"};
    struct cur c = {p, p + n};
    struct fld f;
    struct mstr s;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num >= 1 && f.num <= 4) {
            TRY(get_str(d, &f, names[f.num], &s));
        }
    }
    return rc;
}

/* One occurrence of Resource; attributes are appended to the heap. */
static int dec_resource(struct dec *d, const uint8_t *p, size_t n, uint32_t *nattrs,
                        uint32_t *dropped)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            (*nattrs)++;
            break;
        case 2:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            *dropped = (uint32_t)f.v;
            break;
        case 3:
            WANT(f, WT_LEN, "entity_refs");
            TRY(dec_entity_ref(d, f.p, f.len));
            break;
        default:
            break;
        }
    }
    return rc;
}

/* One occurrence of InstrumentationScope; attributes are appended to the heap. */
static int dec_scope(struct dec *d, const uint8_t *p, size_t n, struct scope_row *sr)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            TRY(get_str(d, &f, "name", &sr->name));
            break;
        case 2:
            TRY(get_str(d, &f, "version", &sr->version));
            break;
        case 3:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            sr->attrs.count++;
            break;
        case 4:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            sr->dropped_attrs = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    return rc;
}

/* ---- envelopes, shared by the three signals ---- */

typedef int (*item_fn)(struct dec *d, const uint8_t *p, size_t n, uint32_t scope);

struct shape {
    const char *resources; /* ExportXServiceRequest field 1 */
    const char *scopes;    /* ResourceX field 2 */
    const char *items;     /* ScopeX field 2 */
    item_fn item;
};

/* ScopeX in two passes: the scope row first, then the items (any field order). */
static int dec_scope_x2(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n,
                        uint32_t ri)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range items = {0};
    int rc;

    TRY(heap_guard(d, p));
    uint32_t si = b->n_scopes;
    struct scope_row *sr = batch_add_scope(b);
    if (sr == NULL) {
        return -ENOMEM;
    }
    sr->resource = ri;
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "scope");
            TRY(dec_scope(d, f.p, f.len, sr));
            break;
        case 2:
            WANT(f, WT_LEN, sh->items);
            range_add(&items, &f, &c);
            break;
        case 3:
            TRY(get_str(d, &f, "schema_url", &sr->schema_url));
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&sr->attrs, astart, h);
    if (items.first == NULL) {
        return 0;
    }
    c.p = items.first;
    c.end = items.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 2) {
            TRY(sh->item(d, f.p, f.len, si));
        }
    }
    return rc;
}

/*
 * ScopeX in one pass, for the field order every encoder writes (the scope's
 * own fields, then the items): each item is decoded as it comes, so the
 * request is read front to back once. Two passes would first hop from one
 * item's length to the next, a dependent cache miss per item when the body
 * is not in cache. 0, or 1 when the message is not in that order or
 * anything in it fails: the caller then rolls the batch back and takes
 * dec_scope_x2, which also gives any error its usual text.
 */
static int dec_scope_x1(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n,
                        uint32_t ri)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    bool any_item = false;
    int rc;

    if (heap_guard(d, p) < 0) {
        return 1;
    }
    uint32_t si = b->n_scopes;
    struct scope_row *sr = batch_add_scope(b);
    if (sr == NULL) {
        return 1;
    }
    sr->resource = ri;
    size_t astart = h->len, aend = 0;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            /* The scope's attributes must precede every item's heap bytes. */
            if (any_item || f.wt != WT_LEN || dec_scope(d, f.p, f.len, sr) < 0) {
                return 1;
            }
            break;
        case 2:
            if (f.wt != WT_LEN) {
                return 1;
            }
            if (!any_item) {
                any_item = true;
                aend = h->len;
            }
            /* Items add rows and metrics, never scopes: |sr| stays put. */
            if (sh->item(d, f.p, f.len, si) < 0) {
                return 1;
            }
            break;
        case 3:
            if (get_str(d, &f, "schema_url", &sr->schema_url) < 0) {
                return 1;
            }
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return 1;
    }
    sr = &b->scopes[si];
    sr->attrs.blob.off = (uint32_t)astart;
    sr->attrs.blob.len = (uint32_t)((any_item ? aend : h->len) - astart);
    return 0;
}

static int dec_scope_x(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n,
                       uint32_t ri)
{
    struct batch *b = d->b;
    uint32_t scopes0 = b->n_scopes, metrics0 = b->n_metrics, rows0 = b->n_rows;
    size_t heap0 = b->heap.len;

    if (LIKELY(dec_scope_x1(d, sh, p, n, ri) == 0)) {
        return 0;
    }
    b->n_scopes = scopes0;
    b->n_metrics = metrics0;
    b->n_rows = rows0;
    b->heap.len = heap0;
    if (d->err != NULL && d->errlen > 0) {
        d->err[0] = '\0';
    }
    return dec_scope_x2(d, sh, p, n, ri);
}

static int dec_resource_x(struct dec *d, const struct shape *sh, const uint8_t *p, size_t n)
{
    struct batch *b = d->b;
    struct vbuf *h = &b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range scopes = {0};
    int rc;

    TRY(heap_guard(d, p));
    uint32_t ri = b->n_resources;
    struct res_row *rr = batch_add_resource(b);
    if (rr == NULL) {
        return -ENOMEM;
    }
    size_t astart = h->len;
    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "resource");
            TRY(dec_resource(d, f.p, f.len, &rr->attrs.count, &rr->dropped_attrs));
            break;
        case 2:
            WANT(f, WT_LEN, sh->scopes);
            range_add(&scopes, &f, &c);
            break;
        case 3:
            TRY(get_str(d, &f, "schema_url", &rr->schema_url));
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    set_attrs(&rr->attrs, astart, h);
    if (scopes.first == NULL) {
        return 0;
    }
    c.p = scopes.first;
    c.end = scopes.end;
    while ((rc = next_field(d, &c, &f)) > 0) {
        if (f.num == 2) {
            TRY(dec_scope_x(d, sh, f.p, f.len, ri));
        }
    }
    return rc;
}

static const struct shape shapes[] = {
    [SIG_LOGS] = {"resource_logs", "scope_logs", "log_records", pbdec_log},
    [SIG_TRACES] = {"resource_spans", "scope_spans", "spans", pbdec_span},
    [SIG_METRICS] = {"resource_metrics", "scope_metrics", "metrics", pbdec_metric},
};

int pbdec_decode(enum signal s, const uint8_t *body, size_t len, struct batch *out, char *err,
                 size_t errlen)
{
    struct dec d = {.b = out, .base = body, .err = err, .errlen = errlen, .sig = signal_name(s)};
    static const size_t row_sizes[] = {
        [SIG_LOGS] = sizeof(struct log_row),
        [SIG_TRACES] = sizeof(struct span_row),
        [SIG_METRICS] = sizeof(struct point_row),
    };

    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (s != SIG_LOGS && s != SIG_TRACES && s != SIG_METRICS) {
        return pbdec_fail(&d, body, "unknown signal %d", (int)s);
    }
    if (out->signal != s) {
        batch_reset(out, s);
    }
    if (len == 0) {
        return 0; /* an empty request is a valid one */
    }
    if (len > UINT32_MAX) {
        return pbdec_fail(&d, body, "body of %zu bytes is too large", len);
    }

    const struct shape *sh = &shapes[s];
    d.row_size = row_sizes[s];
    d.used0 = batch_used(out, d.row_size);
    d.limit = len * EXPANSION_MAX + EXPANSION_SLACK;
    uint32_t n_res = out->n_resources, n_scopes = out->n_scopes, n_metrics = out->n_metrics;
    uint32_t n_rows = out->n_rows;
    size_t heap = out->heap.len;
    struct cur c = {body, body + len};
    struct fld f;
    int rc;

    while ((rc = next_field(&d, &c, &f)) > 0) {
        if (f.num == 1) {
            if (f.wt != WT_LEN) {
                rc = pbdec_wrong_wt(&d, &f, sh->resources);
                break;
            }
            rc = dec_resource_x(&d, sh, f.p, f.len);
            if (rc < 0) {
                break;
            }
        }
    }
    if (rc < 0) {
        if (rc == -ENOMEM && err != NULL && errlen > 0 && err[0] == '\0') {
            pbdec_fail_nomem(&d, "out of memory");
        }
        out->n_resources = n_res;
        out->n_scopes = n_scopes;
        out->n_metrics = n_metrics;
        out->n_rows = n_rows;
        out->heap.len = heap;
        return rc;
    }
    return 0;
}
