/*
 * batch.h - the storage row model: what one decoded export request becomes.
 *
 * A batch holds the resources and scopes of one request and one row per log
 * record, span or metric data point, each naming its scope (and through it
 * its resource) by index. Every OTLP field is kept. Strings that the decoder
 * can point at in the request body (or in the decode arena) are `struct
 * mstr`; values that needed encoding (AnyValue, attribute lists, span events
 * and links, buckets, exemplars) are `struct blob`s inside batch->heap, in the
 * encoding of val.h.
 *
 * Lifetime: a batch borrows the request body and the decode arena; both must
 * outlive it. It is filled on an I/O thread, then handed whole to one shard
 * thread, which appends (copies) its rows into the open block and hands it
 * back. Arrays grow geometrically and keep their capacity across
 * batch_reset(), so a reused batch decodes without malloc.
 */
#ifndef MIRADB_BATCH_H
#define MIRADB_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/val.h"

enum signal {
    SIG_LOGS = 1,
    SIG_TRACES = 2,
    SIG_METRICS = 3,
};
#define SIG_COUNT 3
/* "logs", "traces", "metrics"; "?" otherwise. */
const char *signal_name(enum signal s);

/* How an OTLP message is encoded. One enum for every place that says it:
 * an export request's body, a WAL frame's payload (wal.c, frame byte 17:
 * the body as received, after gunzip, so replay knows which decoder to
 * use) and the answer's body (proto/resp.h). The values are on disk. */
enum otlp_fmt {
    OTLP_PROTOBUF = 0,
    OTLP_JSON = 1,
};

/* Borrowed bytes (not NUL-terminated). */
struct mstr {
    const char *p;
    uint32_t len;
};

/* An attribute list: |count| kv entries in |blob| (val.h "attrs"). */
struct attrs {
    struct blob blob;
    uint32_t count;
};

struct res_row {
    struct attrs attrs;
    uint32_t dropped_attrs;
    struct mstr schema_url;
};

struct scope_row {
    uint32_t resource; /* index into batch->resources */
    struct mstr name;
    struct mstr version;
    struct attrs attrs;
    uint32_t dropped_attrs;
    struct mstr schema_url; /* the ScopeLogs/ScopeSpans/ScopeMetrics schema_url */
};

struct log_row {
    uint64_t time_ns;
    uint64_t observed_ns;
    uint32_t scope; /* index into batch->scopes */
    int32_t severity_number;
    struct mstr severity_text;
    /* The body: a string body stays a string (|body_str|); any other kind
     * is an encoded value in |body_val|. VAL_EMPTY when absent. */
    enum val_type body_type;
    struct mstr body_str;
    struct blob body_val;
    struct attrs attrs;
    uint32_t dropped_attrs;
    uint32_t flags;
    bool has_trace_id; /* false for absent, wrong length or all-zero */
    bool has_span_id;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    struct mstr event_name;
};

/*
 * events blob: per event
 *   u64 time_ns, uv namelen + name, u32 dropped_attrs, u32 attr count,
 *   u32 attr nbytes, attrs
 * links blob: per link
 *   16 trace_id, 8 span_id, uv len + trace_state, u32 flags, u32 dropped_attrs,
 *   u32 attr count, u32 attr nbytes, attrs
 */
struct span_row {
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t scope;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    bool has_parent; /* parent_span_id present, 8 bytes and not all zero */
    struct mstr trace_state;
    struct mstr name;
    int32_t kind;
    uint32_t flags;
    int32_t status_code;
    struct mstr status_message;
    struct attrs attrs;
    uint32_t dropped_attrs;
    struct blob events;
    uint32_t n_events;
    uint32_t dropped_events;
    struct blob links;
    uint32_t n_links;
    uint32_t dropped_links;
};

enum metric_kind {
    MK_NONE = 0, /* a Metric with no data oneof set: kept, has no points */
    MK_GAUGE = 1,
    MK_SUM = 2,
    MK_HISTOGRAM = 3,
    MK_EXP_HISTOGRAM = 4,
    MK_SUMMARY = 5,
};

/* One Metric message: the description its points share. */
struct metric_row {
    uint32_t scope;
    struct mstr name;
    struct mstr description;
    struct mstr unit;
    enum metric_kind kind;
    int32_t temporality; /* AggregationTemporality; 0 for gauge and summary */
    bool monotonic;
    struct attrs metadata;
};

enum point_value {
    PV_NONE = 0, /* number point with neither as_double nor as_int */
    PV_DOUBLE = 1,
    PV_INT = 2,
};

/*
 * detail blob by kind:
 *   HISTOGRAM      u32 n, n x u64 bucket_counts, u32 m, m x f64 explicit_bounds
 *   EXP_HISTOGRAM  u32 scale (as int32), u64 zero_count, f64 zero_threshold,
 *                  u32 positive.offset (int32), u32 n, n x u64,
 *                  u32 negative.offset (int32), u32 m, m x u64
 *   SUMMARY        u32 n, n x (f64 quantile, f64 value)
 *   GAUGE/SUM      empty
 * exemplars blob: per exemplar
 *   u64 time_ns, u8 point_value, 8 bytes (f64 or i64), u8 has_trace_id,
 *   16 trace_id, u8 has_span_id, 8 span_id, u32 attr count, u32 attr nbytes,
 *   filtered attributes
 */
struct point_row {
    uint64_t start_ns;
    uint64_t time_ns;
    uint32_t metric; /* index into batch->metrics */
    struct attrs attrs;
    uint32_t flags;
    enum point_value value_type; /* gauge and sum */
    union {
        double d;
        int64_t i;
    } value;
    uint64_t count; /* histogram, exp histogram, summary */
    double sum;
    double min;
    double max;
    bool has_sum; /* always true for a summary */
    bool has_min;
    bool has_max;
    struct blob detail;
    struct blob exemplars;
    uint32_t n_exemplars;
};

struct batch {
    enum signal signal;
    struct res_row *resources;
    uint32_t n_resources, cap_resources;
    struct scope_row *scopes;
    uint32_t n_scopes, cap_scopes;
    struct metric_row *metrics; /* SIG_METRICS only */
    uint32_t n_metrics, cap_metrics;
    union {
        struct log_row *logs;
        struct span_row *spans;
        struct point_row *points;
        void *rows;
    };
    uint32_t n_rows, cap_rows;
    struct vbuf heap; /* every struct blob points in here */
    /* Records the decoder refused but the request survived (partial success). */
    uint32_t rejected;
    char reject_msg[160];
};

/* Returns NULL on out of memory. */
struct batch *batch_new(enum signal s);
void batch_free(struct batch *b);
/* Empties the batch for reuse, keeping capacity; may change the signal. */
void batch_reset(struct batch *b, enum signal s);

/* Append a zeroed element and return it, or NULL on out of memory. The
 * pointer is valid until the next add of the same kind. */
struct res_row *batch_add_resource(struct batch *b);
struct scope_row *batch_add_scope(struct batch *b);
struct metric_row *batch_add_metric(struct batch *b);
struct log_row *batch_add_log(struct batch *b);
struct span_row *batch_add_span(struct batch *b);
struct point_row *batch_add_point(struct batch *b);

/* Memory the batch holds (arrays + heap): what the budget charges. */
size_t batch_footprint(const struct batch *b);

/* Pointer to a blob's first byte (valid until the heap next grows). */
static inline const uint8_t *batch_blob(const struct batch *b, struct blob x)
{
    static const uint8_t none[1];
    return b->heap.p != NULL ? b->heap.p + x.off : none; /* NULL + 0 is undefined */
}

/* Records a partial-success rejection (the first message is kept). */
void batch_reject(struct batch *b, uint32_t n, const char *msg);

#endif
