/*
 * traces_int.h - what the files of the traces module share; nothing
 * outside query/traces*.c includes this file. traces.h is the module's
 * public surface.
 *
 * THE FILES
 *   traces.c         the query context of a trace query (query/qctx.h) and
 *                    Tempo's wording of its errors; trace id parsing
 *   traces_byid.c    trace by id: the lookup and its rendering (OTLP
 *                    protobuf or JSON, in pieces)
 *   traces_eval.c    TraceQL evaluation over one assembled trace, spansets
 *   traces_search.c  search: planning (seeds, blooms), candidate traces,
 *                    gathering and evaluating whole traces
 *   traces_tags.c    tags and tag values
 * The OTLP encoders of stored spans are proto/otlpenc.h; the protobuf
 * writer is lib/pbw.h.
 */
#ifndef MIRADB_TRACES_INT_H
#define MIRADB_TRACES_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/oblock.h"
#include "storage/val.h"

#include "lib/hex.h"
#include "lib/pbw.h"
#include "proto/otlpenc.h"

/* ---- what the executor's files share ---- */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/jsonw.h"
#include "query/qctx.h"
#include "query/traceql.h"
#include "query/traces.h"
#include "storage/arena.h"

/* Rows between two limit checks in a scan. */
#define SCAN_STRIDE 4096
/* Rows between two looks at the clock where each row runs the query's
 * filters (a regex near its match limit can take milliseconds a row). */
#define CLOCK_STRIDE 16

/* ---- trace by id ---- */

struct tref {
    uint32_t src;
    uint32_t pb_size; /* Span message bytes (protobuf sizing pass) */
    uint64_t row;
    uint64_t start;
    const struct scope_view *sc;
    uint32_t tix;       /* search: the candidate trace the row belongs to */
    uint8_t span_id[8]; /* by id: duplicates (an export retried) go out once */
    int32_t kind;
};

/* Per-source hits of a scan (each item writes only its own). */
struct hits {
    struct tref *v;
    size_t n, cap;
};

/* ---- TraceQL evaluation over one assembled trace ---- */

struct espan {
    struct span_view v;
    uint32_t src;
    uint64_t row;
    int32_t parent; /* index in the trace, -1: none (or not in the trace) */
    uint32_t children;
    /* Tempo's nested set numbers (nestedSetLeft/Right/Parent); 0 for a span
     * not under a root */
    int32_t ns_left, ns_right, ns_parent;
};

struct etrace {
    uint8_t id[16];
    struct espan *s; /* sorted by start time */
    uint32_t n;
    int32_t root; /* first span without a parent, -1 */
    uint64_t start, end;
    bool whole; /* false: a lone span (seed scan): no trace-level values */
};

/* One value: the static types of the parser, NIL when absent. */
struct tv {
    enum traceql_type t;
    int64_t i;
    double f;
    const char *s;
    size_t n;
};

struct ectx {
    const struct etrace *tr;
    arena *a; /* spansets, reset per trace */
    char hex[4][40];
    unsigned hexi;
};

static const struct tv tv_nil = {.t = TRACEQL_T_NIL};

/* Visits the values of a leaf: false from |fn| stops. Returns the number
 * visited. Arrays give their scalar elements. */
typedef bool (*tv_fn)(void *ctx, const struct tv *v);

struct visit {
    tv_fn fn;
    void *ctx;
    size_t n;
    bool stop;
};

/* ---- spansets ---- */

struct sset {
    uint32_t *idx; /* ascending span indexes */
    uint32_t n;
};

struct slist {
    struct sset *v;
    size_t n, cap;
};

/* ---- search: planning ---- */

/* Seed filters: every matching trace has a span (in the time range) that
 * satisfies one of them, judged on the span alone; |all| when some branch
 * cannot be judged that way (then every span seeds its trace). */
#define MAX_SEEDS 16
struct seeds {
    const struct traceql_field *f[MAX_SEEDS];
    size_t n;
    bool all;
};

enum { MAY = 0, NO_ZONE = 1, NO_BLOOM = 2, NO_DICT = 3 };

/* ---- search: candidate traces ---- */

struct cand {
    uint8_t id[16];
    uint64_t start; /* newest seed span start (phase 1); candidate index (phase 2) */
    bool used;
};

/* ---- traces.c: the query context and error wording ---- */

int traces_query_open(struct qctx *q, const struct traces_limits *lim);
void traces_set_err(char *err, size_t errlen, int rc);
/* ... and returns the code to answer (qctx_answer_rc: -EBUSY for the open
 * queries' bound). */
int traces_err_msg(struct qctx *q, char *err, size_t errlen, int rc);
int traces_parse_id(const char *s, size_t n, uint8_t id[16]);

/* ---- traces_byid.c: trace by id ---- */

int traces_hits_push(struct qctx *q, struct hits *h, const struct tref *r);

/* ---- traces_eval.c: TraceQL evaluation ---- */

bool traces_attrs_find(const struct oattrs *a, const char *k, size_t kn, struct val *out);
bool traces_visit_attrs(struct visit *vi, const struct oattrs *a, const struct traceql_field *f);
size_t traces_leaf_each(struct ectx *e, const struct traceql_field *f, const struct espan *sp,
                        tv_fn fn, void *ctx);
struct tv traces_intrinsic(struct ectx *e, enum traceql_intrinsic i, const struct espan *sp);
struct tv traces_eval_val(struct ectx *e, const struct traceql_field *f, const struct espan *sp);
bool traces_eval_bool(struct ectx *e, const struct traceql_field *f, const struct espan *sp);
uint8_t *traces_mark_new(struct ectx *e);
int traces_eval_trace(struct ectx *e, const struct traceql_expr *q, struct slist *out);

/* ---- traces_search.c: search ---- */

void traces_seeds_of(const struct traceql_node *nd, struct seeds *s);
unsigned traces_field_tables(const struct traceql_field *f);
void traces_row_window(const struct qctx *q, const struct traces_search_req *rq, size_t si,
                       uint64_t *lo, uint64_t *hi);
int traces_source_may(const struct qctx *q, const struct traces_search_req *rq,
                      const struct seeds *sd, size_t si);
/* Whether evaluating |f| needs the span's whole trace (trace-level and
 * structural intrinsics); for query/tqmx_scan.c. */
bool traces_field_needs_trace(const struct traceql_field *f);
/* qsort order of an assembled trace's spans (start, span id, source, row). */
int traces_espan_cmp(const void *pa, const void *pb);
/* Parent links, child counts, root and time span of an assembled trace
 * (sorted by traces_espan_cmp); 0 or -ENOMEM. Also for query/tqmx_scan.c. */
int traces_link_trace(struct ectx *e, struct etrace *tr);
/* Every block table evaluating |nd| may read (BLK_* bits). */
unsigned traces_node_tables(const struct traceql_node *nd);
/* |v| as an OTLP AnyValue object ({"stringValue": ...}; status and kind as
 * their words; nil as {}). */
void traces_json_tv(struct jsonw *w, const struct tv *v);

/* ---- small helpers, inline (they run per row or per byte) ---- */

static inline int mstr_cmp(const struct mstr *a, const struct mstr *b)
{
    if (a->len != b->len) {
        return a->len < b->len ? -1 : 1;
    }
    return a->len ? memcmp(a->p, b->p, a->len) : 0;
}

static inline struct tv tv_str(const char *s, size_t n)
{
    return (struct tv){.t = TRACEQL_T_STRING, .s = s, .n = n};
}

static inline bool is_multi(const struct traceql_field *f)
{
    if (f->kind == TRACEQL_F_ATTR) {
        return true;
    }
    if (f->kind != TRACEQL_F_INTRINSIC) {
        return false;
    }
    switch (f->intrinsic) {
    case TRACEQL_I_EVENT_NAME:
    case TRACEQL_I_EVENT_TIME_SINCE_START:
    case TRACEQL_I_LINK_TRACE_ID:
    case TRACEQL_I_LINK_SPAN_ID:
        return true;
    default:
        return false;
    }
}

static inline bool service_name(const struct res_view *r, struct mstr *out)
{
    struct val v;
    if (traces_attrs_find(&r->attrs, "service.name", 12, &v) && v.type == VAL_STR) {
        out->p = v.s;
        out->len = (uint32_t)v.n;
        return true;
    }
    return false;
}

static inline bool in_range(const struct traces_search_req *rq, const struct span_view *v)
{
    if (rq->end_ns != 0 && v->start_ns > rq->end_ns) {
        return false;
    }
    uint64_t end = v->end_ns > v->start_ns ? v->end_ns : v->start_ns;
    return rq->start_ns == 0 || end >= rq->start_ns;
}

#endif
