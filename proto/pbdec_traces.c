/*
 * pbdec_traces.c - the protobuf decoder's Span: one span row, its status, and
 * its events and links encoded into the heap (see pbdec.c for the rules).
 */
#include "proto/pbdec_int.h"

static int dec_status(struct dec *d, const uint8_t *p, size_t n, struct span_row *r)
{
    struct cur c = {p, p + n};
    struct fld f;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 2:
            TRY(get_str(d, &f, "status.message", &r->status_message));
            break;
        case 3:
            WANT(f, WT_VARINT, "status.code");
            r->status_code = (int32_t)f.v;
            break;
        default:
            break;
        }
    }
    return rc;
}

/* events blob entry: u64 time, uv+name, u32 dropped, u32 count, u32 nbytes, attrs */
static int dec_event(struct dec *d, const uint8_t *p, size_t n)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range attrs = {0};
    uint64_t time_ns = 0;
    struct mstr name = {"", 0};
    uint32_t dropped = 0, count = 0;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_I64, "event.time_unix_nano");
            time_ns = f.v;
            break;
        case 2:
            TRY(get_str(d, &f, "event.name", &name));
            break;
        case 3:
            WANT(f, WT_LEN, "event.attributes");
            range_add(&attrs, &f, &c);
            break;
        case 4:
            WANT(f, WT_VARINT, "event.dropped_attributes_count");
            dropped = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(put_u64(h, time_ns));
    TRY(put_key(h, name.p, name.len));
    TRY(put_u32(h, dropped));
    long at = put_attr_header(h);
    if (at < 0) {
        return -ENOMEM;
    }
    TRY(dec_attrs_range(d, &attrs, 3, &count));
    patch_attr_header(h, at, count);
    return 0;
}

/* links blob entry: 16 trace_id, 8 span_id, uv+trace_state, u32 flags,
 * u32 dropped, u32 count, u32 nbytes, attrs */
static int dec_link(struct dec *d, const uint8_t *p, size_t n)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range attrs = {0};
    uint8_t ids[24] = {0};
    struct mstr state = {"", 0};
    uint32_t flags = 0, dropped = 0, count = 0;
    int rc;

    while ((rc = next_field(d, &c, &f)) > 0) {
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "link.trace_id");
            get_id(&f, ids, 16);
            break;
        case 2:
            WANT(f, WT_LEN, "link.span_id");
            get_id(&f, ids + 16, 8);
            break;
        case 3:
            TRY(get_str(d, &f, "link.trace_state", &state));
            break;
        case 4:
            WANT(f, WT_LEN, "link.attributes");
            range_add(&attrs, &f, &c);
            break;
        case 5:
            WANT(f, WT_VARINT, "link.dropped_attributes_count");
            dropped = (uint32_t)f.v;
            break;
        case 6:
            WANT(f, WT_I32, "link.flags");
            flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    TRY(put_raw(h, ids, sizeof(ids)));
    TRY(put_key(h, state.p, state.len));
    TRY(put_u32(h, flags));
    TRY(put_u32(h, dropped));
    long at = put_attr_header(h);
    if (at < 0) {
        return -ENOMEM;
    }
    TRY(dec_attrs_range(d, &attrs, 4, &count));
    patch_attr_header(h, at, count);
    return 0;
}

int pbdec_span(struct dec *d, const uint8_t *p, size_t n, uint32_t scope)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range events = {0}, links = {0};
    int rc;

    TRY(heap_guard(d, p));
    struct span_row *r = next_row(d->b, sizeof(*r));
    if (r == NULL) {
        r = batch_add_span(d->b);
    }
    if (r == NULL) {
        return -ENOMEM;
    }
    r->scope = scope;
    size_t astart = h->len;
    for (;;) {
        const uint8_t *q = c.p;
        if (LIKELY(c.end - q > 17)) { /* see TAG1; room for a trace id */
            switch (q[0]) {
            case TAG1(1, WT_LEN):
                if (q[1] == 16) {
                    get_id_at(q + 2, 16, r->trace_id, 16);
                    c.p = q + 18;
                    continue;
                }
                break;
            case TAG1(2, WT_LEN):
                if (q[1] == 8) {
                    get_id_at(q + 2, 8, r->span_id, 8);
                    c.p = q + 10;
                    continue;
                }
                break;
            case TAG1(4, WT_LEN):
                if (q[1] == 8) {
                    r->has_parent = get_id_at(q + 2, 8, r->parent_span_id, 8);
                    c.p = q + 10;
                    continue;
                }
                break;
            case TAG1(5, WT_LEN):
                if (take_str1(&c, q, &r->name)) {
                    continue;
                }
                break;
            case TAG1(6, WT_VARINT):
                if (q[1] < 0x80) {
                    r->kind = q[1];
                    c.p = q + 2;
                    continue;
                }
                break;
            case TAG1(7, WT_I64):
                r->start_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(8, WT_I64):
                r->end_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(9, WT_LEN):
                TRY(dec_attr_run(d, &c, 9, &r->attrs.count));
                if (c.p != q) {
                    continue;
                }
                break;
            default:
                break;
            }
        }
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 1:
            WANT(f, WT_LEN, "trace_id");
            get_id(&f, r->trace_id, 16);
            break;
        case 2:
            WANT(f, WT_LEN, "span_id");
            get_id(&f, r->span_id, 8);
            break;
        case 3:
            TRY(get_str(d, &f, "trace_state", &r->trace_state));
            break;
        case 4:
            WANT(f, WT_LEN, "parent_span_id");
            r->has_parent = get_id(&f, r->parent_span_id, 8);
            break;
        case 5:
            TRY(get_str(d, &f, "name", &r->name));
            break;
        case 6:
            WANT(f, WT_VARINT, "kind");
            r->kind = (int32_t)f.v;
            break;
        case 7:
            WANT(f, WT_I64, "start_time_unix_nano");
            r->start_ns = f.v;
            break;
        case 8:
            WANT(f, WT_I64, "end_time_unix_nano");
            r->end_ns = f.v;
            break;
        case 9:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            r->attrs.count++;
            TRY(dec_attr_run(d, &c, 9, &r->attrs.count));
            break;
        case 10:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            r->dropped_attrs = (uint32_t)f.v;
            break;
        case 11:
            WANT(f, WT_LEN, "events");
            range_add(&events, &f, &c);
            break;
        case 12:
            WANT(f, WT_VARINT, "dropped_events_count");
            r->dropped_events = (uint32_t)f.v;
            break;
        case 13:
            WANT(f, WT_LEN, "links");
            range_add(&links, &f, &c);
            break;
        case 14:
            WANT(f, WT_VARINT, "dropped_links_count");
            r->dropped_links = (uint32_t)f.v;
            break;
        case 15:
            WANT(f, WT_LEN, "status");
            TRY(dec_status(d, f.p, f.len, r));
            break;
        case 16:
            WANT(f, WT_I32, "flags");
            r->flags = (uint32_t)f.v;
            break;
        default:
            break;
        }
    }
    if (rc < 0) {
        return rc;
    }
    r->attrs.blob.off = (uint32_t)astart;
    r->attrs.blob.len = (uint32_t)(h->len - astart);

    r->events.off = (uint32_t)h->len;
    if (events.first != NULL) {
        c.p = events.first;
        c.end = events.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 11) {
                TRY(heap_guard(d, f.at));
                TRY(dec_event(d, f.p, f.len));
                r->n_events++;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    r->events.len = (uint32_t)(h->len - r->events.off);

    r->links.off = (uint32_t)h->len;
    if (links.first != NULL) {
        c.p = links.first;
        c.end = links.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 13) {
                TRY(heap_guard(d, f.at));
                TRY(dec_link(d, f.p, f.len));
                r->n_links++;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    r->links.len = (uint32_t)(h->len - r->links.off);
    return 0;
}
