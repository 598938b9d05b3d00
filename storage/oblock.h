/*
 * oblock.h - the open block: the in-memory block a shard appends rows to
 * and queries read while it grows.
 *
 * Threads: one writer (the owning shard thread) calls oblock_append; any
 * number of readers on other threads call the read functions at the same
 * time, without a lock. A reader first takes a snapshot with oblock_rows()
 * and reads rows [0, n): those rows, and the resources, scopes and metrics
 * they name, are complete and never change or move while the block lives.
 * oblock_free must wait until no reader holds the block (the caller's job).
 *
 * Rows live in column chunks of OBLOCK_CHUNK_ROWS; strings, attribute
 * lists and other encoded values are copied into a chunked byte area.
 * Resources and scopes are stored once per distinct content in the block
 * (and metric descriptions once per distinct metric), so rows name them by
 * block-level id. Pointers in the views below point into the block: valid
 * while it lives, never written through, not NUL-terminated; a pointer is
 * never NULL, even for an empty value.
 */
#ifndef MIRADB_OBLOCK_H
#define MIRADB_OBLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"

typedef struct oblock oblock;

/* Rows per column chunk. */
#define OBLOCK_CHUNK_ROWS 4096
/* Most rows one block can hold; oblock_append refuses more with -E2BIG. */
#define OBLOCK_MAX_ROWS (1ull << 30)

/* Bytes in the block (a blob of a batch, resolved). */
struct obytes {
    const uint8_t *p;
    uint32_t len;
};

/* An attribute list: |count| entries in |len| bytes (val.h "attrs"). */
struct oattrs {
    const uint8_t *p;
    uint32_t len;
    uint32_t count;
};

struct res_view {
    uint32_t id;
    struct oattrs attrs;
    uint32_t dropped_attrs;
    struct mstr schema_url;
};

struct scope_view {
    uint32_t id;
    uint32_t resource_id;
    const struct res_view *resource;
    struct mstr name;
    struct mstr version;
    struct oattrs attrs;
    uint32_t dropped_attrs;
    struct mstr schema_url;
};

struct metric_view {
    uint32_t id;
    uint32_t scope_id;
    const struct scope_view *scope;
    struct mstr name;
    struct mstr description;
    struct mstr unit;
    enum metric_kind kind;
    int32_t temporality;
    bool monotonic;
    struct oattrs metadata;
};

/* The fields of struct log_row, resolved; body_str is set when body_type is
 * VAL_STR, body_val (the encoded value) otherwise. */
struct log_view {
    uint64_t time_ns;
    uint64_t observed_ns;
    uint32_t scope_id;
    const struct scope_view *scope;
    const struct res_view *resource;
    int32_t severity_number;
    struct mstr severity_text;
    enum val_type body_type;
    struct mstr body_str;
    struct obytes body_val;
    struct oattrs attrs;
    uint32_t dropped_attrs;
    uint32_t flags;
    bool has_trace_id;
    bool has_span_id;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    struct mstr event_name;
};

/* The fields of struct span_row; events and links in batch.h's encoding. */
struct span_view {
    uint64_t start_ns;
    uint64_t end_ns;
    uint32_t scope_id;
    const struct scope_view *scope;
    const struct res_view *resource;
    uint8_t trace_id[16];
    uint8_t span_id[8];
    uint8_t parent_span_id[8];
    bool has_parent;
    struct mstr trace_state;
    struct mstr name;
    int32_t kind;
    uint32_t flags;
    int32_t status_code;
    struct mstr status_message;
    struct oattrs attrs;
    uint32_t dropped_attrs;
    struct obytes events;
    uint32_t n_events;
    uint32_t dropped_events;
    struct obytes links;
    uint32_t n_links;
    uint32_t dropped_links;
};

/* The fields of struct point_row; detail and exemplars in batch.h's encoding. */
struct point_view {
    uint64_t start_ns;
    uint64_t time_ns;
    uint32_t metric_id;
    const struct metric_view *metric;
    const struct scope_view *scope;
    const struct res_view *resource;
    struct oattrs attrs;
    uint32_t flags;
    enum point_value value_type;
    union {
        double d;
        int64_t i;
    } value;
    uint64_t count;
    double sum;
    double min;
    double max;
    bool has_sum;
    bool has_min;
    bool has_max;
    struct obytes detail;
    struct obytes exemplars;
    uint32_t n_exemplars;
};

/* ---- writer (the owning shard thread) ---- */

/* 0, -EINVAL for a |sig| that is not a signal, or -ENOMEM. The block is
 * returned owned: free it with oblock_free. */
int oblock_new(enum signal sig, oblock **out);
/* Accepts NULL. No reader may hold the block any more. Any thread. */
void oblock_free(oblock *b);

/*
 * Copies every resource, scope, metric and row of |batch| into the block
 * (nothing of the batch is referenced afterwards) and makes the rows
 * visible to readers at once: either all of them or none. |wal_seq| is the
 * WAL frame the batch came from (0 if none); see oblock_max_seq.
 * Returns 0; -ENOMEM; -EINVAL if the batch is of another signal or
 * inconsistent (an index or blob out of range, a NULL string with a
 * length); -E2BIG if the block would pass OBLOCK_MAX_ROWS (seal it).
 * After a failure no row of the batch is visible, but resources, scopes
 * and metrics it added may stay in the dictionaries, unreferenced.
 */
int oblock_append(oblock *b, const struct batch *batch, uint64_t wal_seq);

/*
 * The row chunks and byte chunks of freed blocks are kept, process-wide, for
 * the next blocks to reuse (fresh memory costs a page fault and a kernel
 * zeroing per page on first touch: about half of the append time). At most
 * |bytes| are kept (default OBLOCK_CACHE_DEFAULT; 0 keeps none). Memory in
 * the cache belongs to no block's oblock_bytes; it is charged to the memory
 * budget while it is cached (adm_cached_add: admission counts it, pacing
 * does not), and handed over uncharged to the block that takes it (whose
 * owner charges oblock_bytes). The daemon sizes the cache to one block per
 * shard and empties it when memory runs short or ingest stops
 * (store_memory_tick). Any thread.
 */
#define OBLOCK_CACHE_DEFAULT (64u << 20)
void oblock_cache_limit(size_t bytes);
size_t oblock_cache_bytes(void);
/* A freed block's chunk is cached only while admission has at least
 * |bytes| of room left (adm_room; default 0: no such rule), so that the
 * cache does not fill when memory is short. Any thread. */
void oblock_cache_keep_room(size_t bytes);
/* Frees cached chunks (and uncharges them) until |bytes| are freed or the
 * cache is empty; returns the bytes freed. Any thread. */
size_t oblock_cache_trim(size_t bytes);

/* Counts since the process started, for tests, benches and the idle trim:
 * |reused| chunks a block took from the cache, |fresh| cacheable chunks it
 * had to allocate instead (each costs a page fault per page on first
 * touch), |dropped| chunks a freed block could not cache (over the limit)
 * and |trimmed| ones oblock_cache_trim or a lower limit freed. */
struct oblock_cache_stats {
    size_t bytes;
    size_t limit;
    uint64_t reused;
    uint64_t fresh;
    uint64_t dropped;
    uint64_t trimmed;
};
void oblock_cache_get_stats(struct oblock_cache_stats *out);

/* ---- any thread ---- */

enum signal oblock_signal(const oblock *b);
/* Rows visible now (acquire load): rows [0, n) may be read. */
uint64_t oblock_rows(const oblock *b);
/* Memory the block holds, in bytes (what the memory budget charges). */
size_t oblock_bytes(const oblock *b);
/* The highest wal_seq appended so far: the WAL watermark the block holds. */
uint64_t oblock_max_seq(const oblock *b);

/* Distinct resources, scopes and metrics visible now; ids run from 0. */
uint32_t oblock_n_resources(const oblock *b);
uint32_t oblock_n_scopes(const oblock *b);
uint32_t oblock_n_metrics(const oblock *b);
/* Borrowed (valid while the block lives); NULL if |id| is not visible. */
const struct res_view *oblock_resource(const oblock *b, uint32_t id);
const struct scope_view *oblock_scope(const oblock *b, uint32_t id);
const struct metric_view *oblock_metric(const oblock *b, uint32_t id);

/* Reads row |i| into |*v|. 0, or -EINVAL if the block holds another signal
 * or |i| >= oblock_rows(). */
int oblock_log(const oblock *b, uint64_t i, struct log_view *v);
int oblock_span(const oblock *b, uint64_t i, struct span_view *v);
int oblock_point(const oblock *b, uint64_t i, struct point_view *v);
/*
 * Column reads for the seal, which reads rows in time order: that puts
 * rows of different requests side by side, so reading whole rows touches a
 * cache line of every column (15 of them) for each row, and between two
 * rows of one request (which share those lines) the lines of all the other
 * requests' rows pass through L1. A few columns at a time, the lines in use
 * are a few per request and stay. |rows| are row numbers, each below
 * oblock_rows() (unchecked: the seal's own permutation of [0, rows)).
 * Logs (the block holds logs, unchecked):
 */
struct log_cols {
    uint64_t *time;      /* time_ns */
    uint64_t *observed;  /* observed_ns */
    uint64_t *scope;     /* scope_id */
    uint64_t *severity;  /* severity_number, sign-extended */
    uint64_t *body_type; /* body_type */
    uint64_t *ids;       /* has_trace_id | has_span_id << 1 */
    uint64_t *nattrs;    /* attrs.count */
    uint64_t *dropped;   /* dropped_attrs */
    uint64_t *flags;     /* flags */
    uint8_t *trace;      /* trace_id, 16 bytes a row */
    uint8_t *span;       /* span_id, 8 bytes a row */
};
/* Row rows[j]'s fixed-width fields to element j of each of |out|'s
 * arrays, for j < n (a few columns a pass). */
void oblock_log_cols(const oblock *b, const uint64_t *rows, uint64_t n, const struct log_cols *out);
/* Row |i|'s variable-length fields, as oblock_log gives them (body: body_str
 * or body_val, by the row's body type). */
struct log_strs {
    struct obytes severity_text;
    struct obytes body;
    struct obytes attrs;
    struct obytes event_name;
};
void oblock_log_strs(const oblock *b, uint64_t i, struct log_strs *out);

/* The same for spans (the block holds spans, unchecked). */
struct span_cols {
    uint64_t *start;          /* start_ns */
    uint64_t *end;            /* end_ns */
    uint64_t *scope;          /* scope_id */
    uint64_t *kind;           /* kind, sign-extended */
    uint64_t *status_code;    /* status_code, sign-extended */
    uint64_t *flags;          /* flags */
    uint64_t *has_parent;     /* has_parent */
    uint64_t *nattrs;         /* attrs.count */
    uint64_t *dropped_attrs;  /* dropped_attrs */
    uint64_t *n_events;       /* n_events */
    uint64_t *dropped_events; /* dropped_events */
    uint64_t *n_links;        /* n_links */
    uint64_t *dropped_links;  /* dropped_links */
    uint8_t *span;            /* span_id, 8 bytes a row */
    uint8_t *parent;          /* parent_span_id, 8 bytes a row */
};
void oblock_span_cols(const oblock *b, const uint64_t *rows, uint64_t n,
                      const struct span_cols *out);
/* Row |i|'s variable-length fields and where its trace id is (16 bytes). */
struct span_strs {
    const uint8_t *trace_id;
    struct obytes trace_state;
    struct obytes name;
    struct obytes status_message;
    struct obytes attrs;
    struct obytes events;
    struct obytes links;
};
void oblock_span_strs(const oblock *b, uint64_t i, struct span_strs *out);

/* The same for data points (the block holds points, unchecked). */
struct point_cols {
    uint64_t *time;        /* time_ns */
    uint64_t *start;       /* start_ns */
    uint64_t *metric;      /* metric_id */
    uint64_t *value_type;  /* value_type */
    uint64_t *count;       /* count */
    uint64_t *has;         /* has_sum | has_min << 1 | has_max << 2 */
    uint64_t *nattrs;      /* attrs.count */
    uint64_t *flags;       /* flags */
    uint64_t *n_exemplars; /* n_exemplars */
    uint8_t *value;        /* value's 8 bytes a row */
    uint8_t *sum;          /* sum, 8 bytes a row */
    uint8_t *min;          /* min, 8 bytes a row */
    uint8_t *max;          /* max, 8 bytes a row */
};
void oblock_point_cols(const oblock *b, const uint64_t *rows, uint64_t n,
                       const struct point_cols *out);
struct point_strs {
    struct obytes attrs;
    struct obytes detail;
    struct obytes exemplars;
};
void oblock_point_strs(const oblock *b, uint64_t i, struct point_strs *out);

/* Row |i|'s time as the seal orders rows (logs: time, or observed time
 * when the time is 0; spans: start; points: time) without reading the
 * rest of the row; 0 if |i| >= oblock_rows(). */
uint64_t oblock_time(const oblock *b, uint64_t i);

#endif
