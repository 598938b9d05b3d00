/*
 * jsondec_logs.c - one OTLP/JSON LogRecord into a log row: its members,
 * severity as a number or a name, the body (a string body into the arena,
 * any other value into the heap). jsondec.c says how the decoder works.
 */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "proto/jsondec_int.h"
#include "storage/val.h"

static const char *const severity_names[] = {
    "SEVERITY_NUMBER_UNSPECIFIED", "SEVERITY_NUMBER_TRACE",  "SEVERITY_NUMBER_TRACE2",
    "SEVERITY_NUMBER_TRACE3",      "SEVERITY_NUMBER_TRACE4", "SEVERITY_NUMBER_DEBUG",
    "SEVERITY_NUMBER_DEBUG2",      "SEVERITY_NUMBER_DEBUG3", "SEVERITY_NUMBER_DEBUG4",
    "SEVERITY_NUMBER_INFO",        "SEVERITY_NUMBER_INFO2",  "SEVERITY_NUMBER_INFO3",
    "SEVERITY_NUMBER_INFO4",       "SEVERITY_NUMBER_WARN",   "SEVERITY_NUMBER_WARN2",
    "SEVERITY_NUMBER_WARN3",       "SEVERITY_NUMBER_WARN4",  "SEVERITY_NUMBER_ERROR",
    "SEVERITY_NUMBER_ERROR2",      "SEVERITY_NUMBER_ERROR3", "SEVERITY_NUMBER_ERROR4",
    "SEVERITY_NUMBER_FATAL",       "SEVERITY_NUMBER_FATAL2", "SEVERITY_NUMBER_FATAL3",
    "SEVERITY_NUMBER_FATAL4",
};

/* ---- logs ---- */

enum {
    LR_TIME,
    LR_OBSERVED,
    LR_SEVNUM,
    LR_SEVTEXT,
    LR_BODY,
    LR_ATTRS,
    LR_DROPPED,
    LR_FLAGS,
    LR_TRACE,
    LR_SPAN,
    LR_EVENT,
};
static const struct fdef log_fields[] = {
    [LR_TIME] = F2("timeUnixNano", "time_unix_nano"),
    [LR_OBSERVED] = F2("observedTimeUnixNano", "observed_time_unix_nano"),
    [LR_SEVNUM] = F2("severityNumber", "severity_number"),
    [LR_SEVTEXT] = F2("severityText", "severity_text"),
    [LR_BODY] = F1("body"),
    [LR_ATTRS] = F1("attributes"),
    [LR_DROPPED] = F2("droppedAttributesCount", "dropped_attributes_count"),
    [LR_FLAGS] = F1("flags"),
    [LR_TRACE] = F2("traceId", "trace_id"),
    [LR_SPAN] = F2("spanId", "span_id"),
    [LR_EVENT] = F2("eventName", "event_name"),
};

static int log_body(struct jd *j, struct log_row *l)
{
    struct body_sink sink;
    struct jsonlex *x = &j->lx;
    /* {"stringValue":"..."} with nothing else, the usual body: the string
     * carved here (jd_arena_str_now), as jd_any_value would; anything else,
     * with that carve undone, is read by jd_any_value */
    jd_ws(x);
    if (x->n - x->pos > 15 && memcmp(x->s + x->pos, "{\"stringValue\":", 15) == 0) {
        size_t save = x->pos;
        x->pos += 15;
        if (jd_arena_str_now(j, &sink.str)) {
            if (x->pos < x->n && x->s[x->pos] == '}') {
                x->pos++;
                l->body_type = VAL_STR;
                l->body_str = sink.str;
                l->body_val = (struct blob){0};
                return 0;
            }
            if (sink.str.len != 0) { /* the last carve: given back */
                j->sp -= sink.str.len;
                j->sleft += sink.str.len;
            }
        }
        x->pos = save;
    }
    size_t mark = j->h->len;
    int rc = jd_any_value(j, 1, &sink);
    if (rc < 0) {
        return rc;
    }
    l->body_str = (struct mstr){0};
    l->body_val = (struct blob){0};
    if (sink.is_str) {
        l->body_type = VAL_STR;
        l->body_str = sink.str;
    } else if (j->h->p[mark] == VAL_EMPTY) {
        l->body_type = VAL_EMPTY;
        j->h->len = mark;
    } else {
        l->body_type = (enum val_type)j->h->p[mark];
        l->body_val = (struct blob){(uint32_t)mark, (uint32_t)(j->h->len - mark)};
    }
    return 0;
}

static int log_record(struct jd *j, uint32_t si)
{
    struct log_row *l = batch_add_log(j->b);
    bool has;
    int rc;
    if (l == NULL) {
        return jd_nomem(j);
    }
    l->scope = si;
    if (take_null(j)) {
        return 0;
    }
    if ((rc = jd_obj_open(j, "logRecords")) < 0) {
        return rc;
    }
    for (struct fcur fc = FCUR(j, log_fields); (rc = next_field(j, &fc)) > 0;) {
        int f = fc.f;
        if (f < 0 || take_null(j)) {
            if (f < 0 && (rc = skip_value(j)) < 0) {
                return rc;
            }
            continue;
        }
        switch (f) {
        case LR_TIME:
            rc = rd_u64(j, "timeUnixNano", &l->time_ns);
            break;
        case LR_OBSERVED:
            rc = rd_u64(j, "observedTimeUnixNano", &l->observed_ns);
            break;
        case LR_SEVNUM:
            rc = rd_enum(j, "severityNumber", severity_names, NF(severity_names),
                         &l->severity_number);
            break;
        case LR_SEVTEXT:
            rc = rd_mstr(j, "severityText", &l->severity_text);
            break;
        case LR_BODY:
            rc = log_body(j, l);
            break;
        case LR_ATTRS:
            rc = jd_attr_list(j, "attributes", &l->attrs);
            break;
        case LR_DROPPED:
            rc = rd_u32(j, "droppedAttributesCount", &l->dropped_attrs);
            break;
        case LR_FLAGS:
            rc = rd_u32(j, "flags", &l->flags);
            break;
        case LR_TRACE:
            rc = rd_id(j, "traceId", l->trace_id, 16, &has);
            l->has_trace_id = has;
            break;
        case LR_SPAN:
            rc = rd_id(j, "spanId", l->span_id, 8, &has);
            l->has_span_id = has;
            break;
        default:
            rc = rd_mstr(j, "eventName", &l->event_name);
            break;
        }
        if (rc < 0) {
            return rc;
        }
    }
    return rc;
}

int jd_log_records(struct jd *j, uint32_t si)
{
    return record_list(j, "logRecords", si, log_record);
}
