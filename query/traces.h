/*
 * traces.h - the TraceQL executor and the trace-by-id lookup over a catalog
 * snapshot of the traces signal (sealed + open blocks), rendering Tempo's
 * shapes (FACTS.md D): traces as OTLP JSON (gogo jsonpb: base64 ids, enum
 * names, 64-bit integers as strings) or OTLP protobuf, search results,
 * tag names and tag values.
 *
 * Plan (DESIGN.md "Queries"):
 *   by id:  every block whose trace-id bloom may hold the id (open blocks
 *           have no bloom: always) -> scan the root table -> the rows.
 *   search: time range -> blocks -> skip by zone maps (time, duration) ->
 *           skip by the trace-id bloom (trace:id = ...) and by the block's
 *           resource dictionary (any condition on resource attributes
 *           alone, evaluated exactly on the footer's resources) for the
 *           "seed" filter every matching trace must have a span for ->
 *           scan (query workers, one block per item) -> candidate
 *           traces, newest first -> gather each candidate's whole trace
 *           (trace-id blooms again) -> evaluate the query on the whole
 *           trace -> up to |limit| results.
 * Tables are read only when needed: attributes when the query filters on
 * or renders them, the detail table for events and links.
 *
 * A sealed block failing verification during a query is quarantined and
 * forgotten by the catalog; the query goes on without it and reports it
 * (traces_warnings). Read-your-writes: the snapshot is taken when the query
 * starts, so every span acknowledged before is seen.
 *
 * Threads: every function runs on any thread (a query worker normally);
 * a search fans out through qpool_parallel. A result object is used by
 * one thread at a time.
 */
#ifndef MIRADB_TRACES_H
#define MIRADB_TRACES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/qstats.h"
#include "query/traceql.h"

struct evbuffer;
struct jsonw;

/* Tempo's defaults and caps (FACTS.md D.3). */
#define TRACES_DEFAULT_LIMIT 20
#define TRACES_DEFAULT_SPSS 3
#define TRACES_MAX_SPSS 100

/* What ends a query early. Zero fields mean no limit. */
struct traces_limits {
    uint64_t max_rows;    /* rows scanned before -E2BIG */
    uint64_t max_memory;  /* bytes of query state before -ENOMEM */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC */
    const int *cancel;    /* polled (atomically); nonzero ends with -ECANCELED */
};

/*
 * Parses a trace id as Tempo does: 1 to 32 hex digits (either case),
 * left-padded with zeros to 16 bytes. 0, or -EINVAL.
 */
int traces_parse_id(const char *s, size_t n, uint8_t id[16]);

/* ---- trace by id ---- */

enum traces_fmt {
    TRACES_JSON_V1, /* {"batches":[ResourceSpans...]} */
    TRACES_JSON_V2, /* {"trace":{"resourceSpans":[...]}[,"status":"PARTIAL","message":...]} */
    TRACES_PB_V1,   /* tempopb.Trace{resourceSpans=1} (= OTLP TracesData) */
    TRACES_PB_V2,   /* tempopb.TraceByIDResponse{trace=1, status=3, message=4} */
};

struct traces_trace;

/*
 * Finds every span of trace |id| (all time). 0 and *out (free with
 * traces_trace_free; it holds the snapshot, so render before long), also
 * when no span was found (traces_trace_spans() = 0). Otherwise *out = NULL,
 * a message in err, and -ETIMEDOUT, -ECANCELED, -E2BIG (max_rows),
 * -ENOMEM (max_memory or allocation).
 */
int traces_find(const uint8_t id[16], const struct traces_limits *lim, struct traces_trace **out,
                char *err, size_t errlen);
size_t traces_trace_spans(const struct traces_trace *t);
/* The planner/scan tally (already added to qstats). */
const struct qs_scan *traces_trace_scan(const struct traces_trace *t);
/* Blocks that failed verification during the lookup, as one line ("" if
 * none): their spans are missing from the answer (PARTIAL). */
const char *traces_trace_warning(const struct traces_trace *t);

/*
 * Renders the trace in pieces: each call appends roughly |chunk| bytes (at
 * least one span) to |out| and returns 1 while more remains, 0 when the
 * answer is complete. The first call picks |fmt| (later calls must pass the
 * same). Groups spans by resource, then scope (identical resources and
 * scopes from different blocks merge); spans in start time order inside a
 * scope. -ENOMEM on allocation failure.
 */
int traces_render(struct traces_trace *t, enum traces_fmt fmt, struct evbuffer *out, size_t chunk);

void traces_trace_free(struct traces_trace *t);

/* ---- search ---- */

struct traces_search_req {
    const struct traceql_expr *expr; /* NULL: every trace */
    uint64_t start_ns, end_ns;       /* spans overlapping [start, end]; end 0: no bound */
    uint32_t limit;                  /* traces (>= 1) */
    uint32_t spss;                   /* spans listed per spanset (>= 1) */
    struct traces_limits lim;
};

/*
 * Runs a search and writes Tempo's response object ({"traces":[...],
 * "metrics":{...}}) to |w|, traces ordered by start time, newest first.
 * 0; otherwise nothing useful was written, a message in err, and
 * -ETIMEDOUT, -ECANCELED, -E2BIG, -ENOMEM as for traces_find.
 * |scan| (may be NULL) receives the planner/scan tally.
 */
int traces_search(const struct traces_search_req *rq, struct jsonw *w, struct qs_scan *scan,
                  char *err, size_t errlen);

/* ---- tags ---- */

/* Tag scopes (bit set; 0 = all). */
#define TRACES_SCOPE_RESOURCE 1u
#define TRACES_SCOPE_SPAN 2u
#define TRACES_SCOPE_INTRINSIC 4u
#define TRACES_SCOPE_EVENT 8u
#define TRACES_SCOPE_LINK 16u
#define TRACES_SCOPE_INSTRUMENTATION 32u

struct traces_tags_req {
    unsigned scopes;                 /* 0 = all */
    const struct traceql_expr *expr; /* narrows to spans matching it (may be NULL) */
    uint64_t start_ns, end_ns;       /* end 0: no bound */
    uint32_t limit;                  /* names / values per answer; 0: TRACES_TAGS_MAX */
    bool v2;
    struct traces_limits lim;
};
#define TRACES_TAGS_MAX 10000

/*
 * /api/search/tags (v1: {"tagNames":[...]}) and /api/v2/search/tags
 * ({"scopes":[{"name":..,"tags":[...]}...]}). 0, or an error as search.
 * Tags and tag values read the sources one at a time, newest first; the
 * names and values they collect are copies in an arena charged to the
 * query (max_memory), so each sealed block is given up (qctx_done) once
 * its scan is done: over the table cap, one block's tables at a time.
 */
int traces_tags(const struct traces_tags_req *rq, struct jsonw *w, char *err, size_t errlen);

/*
 * Tag values. v1: |tag| is an unscoped attribute name; values from span
 * and resource attributes, as strings ({"tagValues":["a",...]}). v2: |tag|
 * is a TraceQL identifier (resource.x, span.x, .x, event.x, link.x,
 * instrumentation.x, or an intrinsic such as name, status, kind,
 * span:name, rootServiceName) and values carry their type
 * ({"tagValues":[{"type":"string","value":"a"},...]}). -EINVAL (400) for
 * a v2 tag that is not an identifier; other errors as search.
 */
int traces_tag_values(const struct traces_tags_req *rq, const char *tag, size_t tag_len,
                      struct jsonw *w, char *err, size_t errlen);

#endif
