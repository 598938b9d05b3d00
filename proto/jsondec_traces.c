/*
 * jsondec_traces.c - one OTLP/JSON Span into a span row: its members, the
 * status, and the events and links as blobs in the heap (the attributes of
 * each read last, after its fixed-size part). jsondec.c says how the
 * decoder works.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proto/jsondec_int.h"
#include "proto/otlpnames.h"
#include "storage/val.h"

/* ---- traces ---- */

enum { EV_TIME, EV_NAME, EV_ATTRS, EV_DROPPED };
static const struct fdef event_fields[] = {
    [EV_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [EV_NAME] = F1("name"),
    [EV_ATTRS] = F1("attributes"),
    [EV_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
};

/* One Span.Event: u64 time, uv name, u32 dropped, u32 count, u32 nbytes, attrs. */
static int event(struct jd *j)
{
    uint64_t t = 0;
    uint32_t dropped = 0;
    struct jsonlex_str name = {0};
    size_t attrs = NONE, here = NONE;
    int rc = 0;
    if (!take_null(j)) {
        if ((rc = jd_obj_open(j, "events")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, event_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == EV_TIME) {
                rc = rd_u64(j, "events.timeUnixNano", &t);
            } else if (f == EV_NAME) {
                rc = rd_jstr(j, "events.name", &name);
            } else if (f == EV_ATTRS) {
                rc = jd_counted_attrs_now(j, "events.attributes", &attrs, &here);
            } else {
                rc = rd_u32(j, "events.droppedAttributesCount", &dropped);
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    size_t fixed = j->h->len;
    if (hroom(j, 8 + 10 + name.len + 4) < 0) {
        return -ENOMEM;
    }
    hstore_u64(j, t);
    if (name.esc) {
        j->h->len = (size_t)(put_uv(j->h->p + j->h->len, name.len) - j->h->p);
        unescape(j, &name, (char *)j->h->p + j->h->len);
    } else { /* a zeroed jstr (no name member) writes "" */
        uint8_t *d = put_uv(j->h->p + j->h->len, name.len);
        if (name.len != 0) {
            memcpy(d, j->lx.s + name.at, name.len);
        }
        j->h->len = (size_t)(d - j->h->p);
    }
    j->h->len += name.len;
    hstore_u32(j, dropped);
    if (here != NONE) {
        return jd_counted_attrs_put_first(j, here, fixed);
    }
    return jd_counted_attrs_at(j, attrs, "events.attributes");
}

enum { LK_TRACE, LK_SPAN, LK_STATE, LK_ATTRS, LK_DROPPED, LK_FLAGS };
static const struct fdef link_fields[] = {
    [LK_TRACE] = F2("traceId", "trace_id"),
    [LK_SPAN] = F2("spanId", "span_id"),
    [LK_STATE] = F2("traceState", "trace_state"),
    [LK_ATTRS] = F1("attributes"),
    [LK_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
    [LK_FLAGS] = F1("flags"),
};

/* One Span.Link: 16 trace id, 8 span id, uv trace state, u32 flags, u32 dropped, attrs. */
static int link(struct jd *j)
{
    uint8_t tid[16] = {0}, sid[8] = {0};
    uint32_t flags = 0, dropped = 0;
    struct jsonlex_str state = {0};
    size_t attrs = NONE, here = NONE;
    bool has;
    int rc = 0;
    if (!take_null(j)) {
        if ((rc = jd_obj_open(j, "links")) < 0) {
            return rc;
        }
        for (struct fcur fc = FCUR(j, link_fields); (rc = next_field(j, &fc)) > 0;) {
            int f = fc.f;
            if (f < 0 || take_null(j)) {
                rc = f < 0 ? skip_value(j) : 0;
            } else if (f == LK_TRACE) {
                rc = rd_id(j, "links.traceId", tid, 16, &has);
            } else if (f == LK_SPAN) {
                rc = rd_id(j, "links.spanId", sid, 8, &has);
            } else if (f == LK_STATE) {
                rc = jd_rd_jstr(j, "links.traceState", &state);
            } else if (f == LK_ATTRS) {
                rc = jd_counted_attrs_now(j, "links.attributes", &attrs, &here);
            } else if (f == LK_DROPPED) {
                rc = rd_u32(j, "links.droppedAttributesCount", &dropped);
            } else {
                rc = rd_u32(j, "links.flags", &flags);
            }
            if (rc < 0) {
                return rc;
            }
        }
        if (rc < 0) {
            return rc;
        }
    }
    size_t fixed = j->h->len;
    if (vbuf_put(j->h, tid, 16) < 0 || vbuf_put(j->h, sid, 8) < 0 || jd_heap_jstr(j, &state) < 0 ||
        vbuf_put_u32(j->h, flags) < 0 || vbuf_put_u32(j->h, dropped) < 0) {
        return jd_nomem(j);
    }
    if (here != NONE) {
        return jd_counted_attrs_put_first(j, here, fixed);
    }
    return jd_counted_attrs_at(j, attrs, "links.attributes");
}

enum { ST_MESSAGE, ST_CODE };
static const struct fdef status_fields[] = {
    [ST_MESSAGE] = F1("message"),
    [ST_CODE] = F1("code"),
};

static int status_msg(struct jd *j, struct span_row *sp)
{
    int rc = jd_obj_open(j, "status");
    if (rc < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, status_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            rc = f < 0 ? skip_value(j) : 0;
        } else if (f == ST_MESSAGE) {
            rc = rd_mstr(j, "status.message", &sp->status_message);
        } else {
            rc = rd_enum(j, "status.code", otlp_status_names, NF(otlp_status_names),
                         &sp->status_code);
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

enum {
    SP_TRACE,
    SP_SPAN,
    SP_STATE,
    SP_PARENT,
    SP_FLAGS,
    SP_NAME,
    SP_KIND,
    SP_START,
    SP_END,
    SP_ATTRS,
    SP_DROPPED_ATTRS,
    SP_EVENTS,
    SP_DROPPED_EVENTS,
    SP_LINKS,
    SP_DROPPED_LINKS,
    SP_STATUS,
};
static const struct fdef span_fields[] = {
    [SP_TRACE] = F2("traceId", "trace_id"),
    [SP_SPAN] = F2("spanId", "span_id"),
    [SP_STATE] = F2("traceState", "trace_state"),
    [SP_PARENT] = F2("parentSpanId", "parent_span_id"),
    [SP_FLAGS] = F1("flags"),
    [SP_NAME] = F1("name"),
    [SP_KIND] = F1("kind"),
    [SP_START] = F2("startTimeUnixNano", "start_time_unix_nano"),
    [SP_END] = F2("endTimeUnixNano", "end_time_unix_nano"),
    [SP_ATTRS] = F1("attributes"),
    [SP_DROPPED_ATTRS] = F2("droppedAttributesCount", "dropped_attributes_count"),
    [SP_EVENTS] = F1("events"),
    [SP_DROPPED_EVENTS] = F2("droppedEventsCount", "dropped_events_count"),
    [SP_LINKS] = F1("links"),
    [SP_DROPPED_LINKS] = F2("droppedLinksCount", "dropped_links_count"),
    [SP_STATUS] = F1("status"),
};

static int span(struct jd *j, uint32_t si)
{
    struct span_row *sp = batch_add_span(j->b);
    bool has;
    int rc;
    if (sp == NULL) {
        return jd_nomem(j);
    }
    sp->scope = si;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = jd_obj_open(j, "spans")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, span_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        switch (f) {
        case SP_TRACE:
            rc = rd_id(j, "traceId", sp->trace_id, 16, &has);
            break;
        case SP_SPAN:
            rc = rd_id(j, "spanId", sp->span_id, 8, &has);
            break;
        case SP_STATE:
            rc = rd_mstr(j, "traceState", &sp->trace_state);
            break;
        case SP_PARENT:
            rc = rd_id(j, "parentSpanId", sp->parent_span_id, 8, &has);
            sp->has_parent = has;
            break;
        case SP_FLAGS:
            rc = rd_u32(j, "flags", &sp->flags);
            break;
        case SP_NAME:
            rc = rd_mstr(j, "name", &sp->name);
            break;
        case SP_KIND:
            rc = rd_enum(j, "kind", otlp_span_kind_names, NF(otlp_span_kind_names), &sp->kind);
            break;
        case SP_START:
            rc = rd_u64(j, "startTimeUnixNano", &sp->start_ns);
            break;
        case SP_END:
            rc = rd_u64(j, "endTimeUnixNano", &sp->end_ns);
            break;
        case SP_ATTRS:
            rc = jd_attr_list(j, "attributes", &sp->attrs);
            break;
        case SP_DROPPED_ATTRS:
            rc = rd_u32(j, "droppedAttributesCount", &sp->dropped_attrs);
            break;
        case SP_EVENTS:
            rc = jd_blob_list(j, "events", event, &sp->events, &sp->n_events);
            break;
        case SP_DROPPED_EVENTS:
            rc = rd_u32(j, "droppedEventsCount", &sp->dropped_events);
            break;
        case SP_LINKS:
            rc = jd_blob_list(j, "links", link, &sp->links, &sp->n_links);
            break;
        case SP_DROPPED_LINKS:
            rc = rd_u32(j, "droppedLinksCount", &sp->dropped_links);
            break;
        default:
            rc = status_msg(j, sp);
            break;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

int jd_spans(struct jd *j, uint32_t si)
{
    return record_list(j, "spans", si, span);
}
