/*
 * pbdec_logs.c - the protobuf decoder's LogRecord: one log row (see pbdec.c for
 * the rules every message follows).
 */
#include "proto/pbdec_int.h"

int pbdec_log(struct dec *d, const uint8_t *p, size_t n, uint32_t scope)
{
    struct vbuf *h = &d->b->heap;
    struct cur c = {p, p + n};
    struct fld f;
    struct range body = {0};
    const uint8_t *bp = NULL; /* the last body occurrence, and how many */
    size_t bn = 0;
    uint32_t nbody = 0;
    int rc;

    TRY(heap_guard(d, p));
    struct log_row *r = next_row(d->b, sizeof(*r));
    if (r == NULL) {
        r = batch_add_log(d->b);
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
            case TAG1(1, WT_I64):
                r->time_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            case TAG1(2, WT_VARINT):
                if (q[1] < 0x80) {
                    r->severity_number = q[1];
                    c.p = q + 2;
                    continue;
                }
                break;
            case TAG1(3, WT_LEN):
                if (take_str1(&c, q, &r->severity_text)) {
                    continue;
                }
                break;
            case TAG1(6, WT_LEN):
                TRY(dec_attr_run(d, &c, 6, &r->attrs.count));
                if (c.p != q) {
                    continue;
                }
                break;
            case TAG1(8, WT_I32):
                r->flags = le32(q + 1);
                c.p = q + 5;
                continue;
            case TAG1(9, WT_LEN):
                if (q[1] == 16) {
                    r->has_trace_id = get_id_at(q + 2, 16, r->trace_id, 16);
                    c.p = q + 18;
                    continue;
                }
                break;
            case TAG1(10, WT_LEN):
                if (q[1] == 8) {
                    r->has_span_id = get_id_at(q + 2, 8, r->span_id, 8);
                    c.p = q + 10;
                    continue;
                }
                break;
            case TAG1(11, WT_I64):
                r->observed_ns = le64(q + 1);
                c.p = q + 9;
                continue;
            default:
                break;
            }
        }
        if ((rc = next_field(d, &c, &f)) <= 0) {
            break;
        }
        switch (f.num) {
        case 1:
            WANT(f, WT_I64, "time_unix_nano");
            r->time_ns = f.v;
            break;
        case 2:
            WANT(f, WT_VARINT, "severity_number");
            r->severity_number = (int32_t)f.v;
            break;
        case 3:
            TRY(get_str(d, &f, "severity_text", &r->severity_text));
            break;
        case 5:
            WANT(f, WT_LEN, "body");
            range_add(&body, &f, &c);
            bp = f.p;
            bn = f.len;
            nbody++;
            break;
        case 6:
            WANT(f, WT_LEN, "attributes");
            TRY(dec_kv(d, f.p, f.len, 1));
            r->attrs.count++;
            TRY(dec_attr_run(d, &c, 6, &r->attrs.count));
            break;
        case 7:
            WANT(f, WT_VARINT, "dropped_attributes_count");
            r->dropped_attrs = (uint32_t)f.v;
            break;
        case 8:
            WANT(f, WT_I32, "flags");
            r->flags = (uint32_t)f.v;
            break;
        case 9:
            WANT(f, WT_LEN, "trace_id");
            r->has_trace_id = get_id(&f, r->trace_id, 16);
            break;
        case 10:
            WANT(f, WT_LEN, "span_id");
            r->has_span_id = get_id(&f, r->span_id, 8);
            break;
        case 11:
            WANT(f, WT_I64, "observed_time_unix_nano");
            r->observed_ns = f.v;
            break;
        case 12:
            TRY(get_str(d, &f, "event_name", &r->event_name));
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

    struct av_state st = {.type = VAL_EMPTY, .start = h->len};
    /* The usual body, one AnyValue that is exactly a string_value (one- or
     * two-byte length), is taken as it is; anything else the general way. */
    size_t sl = SIZE_MAX, hl = 0;
    if (nbody == 1 && bn >= 2 && bp[0] == 0x0a) {
        if (bp[1] < 0x80) {
            sl = bp[1];
            hl = 2;
        } else if (bn >= 3 && bp[2] < 0x80) {
            sl = ((size_t)bp[2] << 7) | (bp[1] & 0x7f);
            hl = 3;
        }
    }
    if (sl != SIZE_MAX && hl + sl == bn) {
        if (UNLIKELY(!utf8_valid(bp + hl, sl))) {
            return pbdec_fail(d, bp, "invalid UTF-8 in string field string_value");
        }
        st.type = VAL_STR;
        st.str.p = (const char *)(bp + hl);
        st.str.len = (uint32_t)sl;
    } else if (body.first != NULL) {
        c.p = body.first;
        c.end = body.end;
        while ((rc = next_field(d, &c, &f)) > 0) {
            if (f.num == 5) {
                TRY(pbdec_anyvalue(d, f.p, f.len, 1, AV_BODY, &st));
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    r->body_type = st.type;
    if (st.type == VAL_STR) {
        r->body_str = st.str;
        r->body_val.off = (uint32_t)st.start;
    } else if (st.type != VAL_EMPTY) {
        r->body_val.off = (uint32_t)st.start;
        r->body_val.len = (uint32_t)(h->len - st.start);
    } else {
        h->len = st.start; /* a strindex body leaves nothing behind */
        r->body_val.off = (uint32_t)st.start;
    }
    return 0;
}
