/*
 * qctx.h - the query context every executor runs on (logs, traces; a
 * metrics executor next): one catalog snapshot of a signal and its
 * sources, the limits (rows scanned, memory held, deadline, client
 * abort), the first error and the warnings, quarantine of a block that
 * fails verification mid-query, typed row reads and the row cursor of a
 * block scan.
 *
 * SHAPE
 *   qctx_open takes the snapshot: src[] holds its sealed blocks (in the
 *   snapshot's order) and then its open blocks, each with the rows the
 *   query may read. An executor plans over src[] (zone maps, blooms,
 *   dictionaries: its own business), fans the survivors out one source
 *   per qpool_parallel item, and in each item:
 *
 *       if (qctx_load(q, s, want) < 0) return;       (-EBADMSG: quarantined)
 *       struct qctx_scan it;
 *       qctx_scan_begin(&it, q, lo, hi, backward, ROWS_BETWEEN_CHECKS, true);
 *       uint64_t row;
 *       while (qctx_scan_next(&it, &row)) {
 *           int rc = qctx_read_log(s, row, want, &v);
 *           if (rc == -EBADMSG) { qctx_src_fail(q, s, qctx_scan_left(&it)); break; }
 *           ... evaluate the row ...
 *       }
 *       qctx_scan_end(&it);
 *
 *   Per row only static inline code runs (qctx_scan_next, qctx_read_*); the
 *   cursor calls out of line every |row_check| rows to add them to the
 *   query's count and look at the limits, and with |clock| every
 *   QCTX_CLOCK_ROWS rows to look at the deadline, the cancel flag and the
 *   regex match-limit note (qctx_tick): one row can cost milliseconds (a
 *   regex near its match limit, | json over 100,000 keys).
 *
 * ERRORS
 *   The first error wins and stops every item (qctx_err turns nonzero):
 *   -E2BIG (rows, or a regex's match limit: qctx_cause tells), -ENOMEM
 *   (memory), -ETIMEDOUT, -ECANCELED, or whatever an executor passes to
 *   qctx_fail. Each comes with a message (qctx_message); limits set one in
 *   Loki's wording, a dialect that words them otherwise maps qctx_err and
 *   qctx_cause to its own.
 *
 * QUARANTINE
 *   A sealed source whose tables or rows fail verification is quarantined
 *   (blk_quarantine, catalog_forget) once per query, counted in
 *   st.blocks_failed and reported as a warning ("a block failed
 *   verification and was quarantined: N <noun> skipped (the server log
 *   names the block)": no path, warnings reach clients); the query goes
 *   on without it, and the path waits for the server to log it.
 *
 * Threads: qctx_open and qctx_close on the query's thread; the rest from
 * any number of scan items at once (atomics; one mutex for the message
 * and the warnings, never taken per row). Planning may bump st's counters
 * directly while no item runs; items use qctx_add.
 */
#ifndef MIRADB_QCTX_H
#define MIRADB_QCTX_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/qstats.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/catalog.h"
#include "storage/oblock.h"

/* Rows between two looks at the clock in a cursor started with |clock|. */
#define QCTX_CLOCK_ROWS 16

struct qctx_limits {
    uint64_t max_rows;    /* rows scanned before -E2BIG (0: none) */
    uint64_t max_memory;  /* bytes held before -ENOMEM (0: none) */
    uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0: none */
    const int *cancel;    /* polled: nonzero ends the query with -ECANCELED (may be NULL) */
};

/* Why the query stopped. */
enum qctx_cause {
    QCTX_RUNNING = 0,
    QCTX_ROWS,     /* -E2BIG: max_rows */
    QCTX_REGEX,    /* -E2BIG: a regex hit its PCRE2 match limit */
    QCTX_MEMORY,   /* -ENOMEM: max_memory */
    QCTX_SHARED,   /* -ENOMEM: the open queries together (qctx_set_total_memory) */
    QCTX_DEADLINE, /* -ETIMEDOUT */
    QCTX_CANCEL,   /* -ECANCELED */
    QCTX_OTHER,    /* qctx_fail */
};

struct qctx_src {
    blk *b;              /* sealed (referenced by the snapshot), or NULL */
    const oblock *ob;    /* open */
    uint64_t rows;       /* sealed: blk_rows; open: rows visible in the snapshot */
    uint64_t tmin, tmax; /* sealed: the zone map; open: 0, UINT64_MAX */
    int failed;          /* atomic: quarantined during this query */
    int paged;           /* atomic: in the query's page window (see qctx_load) */
    int users;           /* under lock: items between qctx_load and qctx_done */
    bool unpinned;       /* under lock: the snapshot's pin given up (qctx_done) */
};

struct qctx_warning {
    struct qctx_warning *next;
    char msg[256];
};

/* Memory waits (qctx_load's room in the budget, qctx_charge's shared
 * bound): how long each may last, and the step. */
#define QCTX_ROOM_WAIT_NS (200ull * 1000000u) /* per query, all loads together */
#define QCTX_SHARED_WAIT_NS (250ull * 1000000u)
#define QCTX_WAIT_STEP_NS (2 * 1000000)
/* qctx_load waits while a load would take the process past the budget
 * less 1/QCTX_ROOM_DIV of it (room for ingest's committed growth). */
#define QCTX_ROOM_DIV 16
/* ... and from then on until it closes, admission keeps the largest load's
 * estimate free once per pool worker, at most 1/QCTX_DEMAND_DIV of the
 * budget. */
#define QCTX_DEMAND_DIV 8

struct qctx {
    struct cat_snap snap;
    bool have_snap;
    struct qctx_src *src; /* sealed blocks, then open blocks */
    size_t n_src;
    struct qctx_limits lim;
    const char *noun; /* what a quarantine warning counts: "rows", "spans" */
    uint64_t rows;    /* atomic: rows scanned by the whole query */
    int64_t mem;      /* atomic: bytes held */
    uint64_t adm;     /* atomic: of those, charged to the memory budget (adm.h) */
    int err;          /* atomic: the first error */
    int cause;        /* atomic: enum qctx_cause of err */
    pthread_mutex_t lock;
    char msg[256];                 /* err's message (under lock until err is set) */
    struct qctx_warning *warnings; /* in order of arrival (under lock) */
    struct qs_scan st;             /* the planner/scan tally */
    /* The page window (qctx_load), under lock: a ring of the sealed
     * sources loaded whose mapped pages may be resident, oldest first,
     * and the file bytes they stand for (charged to the memory budget). */
    uint32_t *pg_ring;
    size_t pg_head, pg_n, pg_cap;
    uint64_t pg_bytes;
    uint64_t room_wait_ns; /* atomic: qctx_load's waits for room so far */
    uint64_t demand;       /* under lock: bytes admission keeps free for it (adm_demand_add) */
    bool optional;         /* a child context (qctx_sub_open) */
};

/*
 * Takes a snapshot of |sig| and lists its sources. |lim| may be NULL (no
 * limits); |noun| names the rows in quarantine warnings. 0, or -ENOMEM
 * (nothing to close then).
 */
int qctx_open(struct qctx *q, enum signal sig, const struct qctx_limits *lim, const char *noun);
/* Releases the snapshot, the sources and the warnings. NULL-safe; once. */
void qctx_close(struct qctx *q);

/* The first error (0 while the query may go on). */
static inline int qctx_err(struct qctx *q)
{
    return __atomic_load_n(&q->err, __ATOMIC_ACQUIRE);
}
static inline enum qctx_cause qctx_cause(struct qctx *q)
{
    return (enum qctx_cause)__atomic_load_n(&q->cause, __ATOMIC_ACQUIRE);
}
/* The code an executor answers for error |rc| of |q|: -EBUSY when the
 * query stopped at the open queries' bound (QCTX_SHARED: other queries'
 * memory is the cause, so the server answers 503 with Retry-After, not
 * the per-query 422), else |rc|. */
static inline int qctx_answer_rc(struct qctx *q, int rc)
{
    return rc == -ENOMEM && qctx_cause(q) == QCTX_SHARED ? -EBUSY : rc;
}
/* Its message ("" for none); stable once qctx_err is nonzero. */
const char *qctx_message(const struct qctx *q);

/* Records |rc| (< 0) as the query's error if it is the first. */
void qctx_fail(struct qctx *q, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Adds |n| scanned rows; the row limit, the cancel flag and the deadline.
 * Returns qctx_err. */
int qctx_rows(struct qctx *q, uint64_t n);
/* The cancel flag and the deadline. Returns qctx_err. */
int qctx_check(struct qctx *q);
/* qctx_check, and a regex on this thread that hit its match limit since
 * the last look (the query ends with -E2BIG rather than running that
 * limit out row after row until the deadline). Returns qctx_err. */
int qctx_tick(struct qctx *q);

/* Charges |n| bytes of query state, to the query and to the memory budget
 * (adm_charge: the ingest admission then makes room): 0, or -ENOMEM (the
 * query's error then) over max_memory (QCTX_MEMORY), over the open
 * queries' bound once other queries held on to their memory for
 * QCTX_SHARED_WAIT_NS (QCTX_SHARED; no wait when this query alone is
 * over it), or, on a child context, when the process is over the
 * admission limit (QCTX_MEMORY: the optional work is dropped). May sleep
 * (the shared wait). qctx_uncharge returns at most what the query
 * charged; qctx_close the rest. */
int qctx_charge(struct qctx *q, uint64_t n);
void qctx_uncharge(struct qctx *q, uint64_t n);
/*
 * Charges arena |a|'s chunks to the query as they are allocated and
 * freed (arena_set_charge): a chunk that would take the query past
 * max_memory, or the open queries together past qctx_set_total_memory's
 * bound, is not allocated (arena_alloc returns NULL) and the query has
 * its -ENOMEM. Bind a fresh arena; free it before qctx_close, or after
 * (the late uncharges are then no-ops: qctx_close settled them).
 */
void qctx_arena_bind(struct qctx *q, arena *a);
/*
 * The bound on what the open queries hold together by their qctx_charge
 * counts (0, the default: none). A charge that takes the total past it
 * fails like max_memory (-ENOMEM, the query's error) with a message that
 * says it is the server's share, not this query's. Set before the first
 * query; any thread.
 */
void qctx_set_total_memory(uint64_t n);
/* Tests only: |n| bytes counted as held by some other query against that
 * bound (not charged to the budget), so that one query meets it. Set
 * before the first query. */
void qctx_set_test_held(uint64_t n);
uint64_t qctx_total_memory(void);
/* Totals of the memory waits, for /metrics. Any thread. */
struct qctx_wait_stats {
    uint64_t room_waits, room_wait_ns;     /* qctx_load: room in the budget */
    uint64_t shared_waits, shared_wait_ns; /* qctx_charge: the open queries' bound */
};
void qctx_wait_stats(struct qctx_wait_stats *out);
/* What the open queries hold by their qctx_charge counts, together; and
 * the file bytes their page windows charge (qctx_load). */
uint64_t qctx_memory_held(void);
uint64_t qctx_window_bytes(void);

/*
 * A child context for work a query may do without, run on the query's
 * thread: |sub| reads |parent|'s sources (the caller keeps the one it
 * reads pinned and loaded through |parent|: the child neither pins nor
 * pages, nor waits for room) under |parent|'s deadline and cancel flag,
 * with its own max_memory (0: none); its charges count in the budget and
 * the open queries' total like any query's, and fail while the process
 * is over the admission limit (adm_excess). qctx_sub_close folds it back: its rows
 * into |parent|'s (and limit), its warnings and quarantined blocks, and
 * its error unless that was a memory one (-ENOMEM: the work is dropped,
 * the query goes on); it returns the child's error. Free what the child
 * charged (bound arenas) before closing it.
 */
void qctx_sub_open(struct qctx *sub, struct qctx *parent, uint64_t max_memory);
int qctx_sub_close(struct qctx *sub, struct qctx *parent);

/* Appends a warning (dropped if it cannot be allocated). */
void qctx_warn(struct qctx *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The warnings joined by "; " into out (cap > 0), truncated where full. */
void qctx_warnings_join(struct qctx *q, char *out, size_t cap);

/* Quarantines sealed source |s| (once per query) and warns that |skipped|
 * rows were left out. The warning names no path (it reaches clients); the
 * block's path is kept for qctx_quarantined_next. */
void qctx_src_fail(struct qctx *q, struct qctx_src *s, uint64_t skipped);
/* The path of a block a query quarantined, oldest first, into |out|; false
 * when none is left (the last 16 are kept). For the server's log. Any thread. */
bool qctx_quarantined_next(char *out, size_t cap);

/* Loads the tables |want| of a sealed source (open: nothing to do): 0;
 * -EBADMSG when they fail verification or |s| failed already (then it is
 * quarantined and the query goes on); or blk_load's other errors (-ENOMEM,
 * which is the query's error then).
 *
 * PAGE WINDOW: the rows a scan reads are in the block's file mapping, so
 * its pages count in the process's RSS once read. A loaded source enters
 * the query's window, its file size charged to the memory budget
 * (adm_charge: an upper bound on what it can make resident); when the
 * window's bytes exceed catalog_table_cap() (a quarter of the budget in
 * the daemon; 0: no bound) the oldest sources leave it, their pages
 * dropped (blk_drop_pages: safe whoever reads them; a later read of the
 * source faults them back in), while more than qpool_workers() remain;
 * so do they while the process is over the admission limit (adm_excess).
 * ROOM: a load that adds memory first waits for room in the budget
 * (wait_for_room in qctx.c: at most QCTX_ROOM_WAIT_NS per query), then
 * loads whatever the room; from the first load that found none until
 * qctx_close, ingest admission keeps that load's estimate free per pool
 * worker (QCTX_DEMAND_DIV).
 * qctx_close drops the pages of every sealed source (planning reads the
 * footers too) and returns the charge. */
int qctx_load(struct qctx *q, struct qctx_src *s, unsigned want);

/*
 * An item that called qctx_load on sealed source |s| is done with it: once
 * every item that loaded it is, the query gives up the snapshot's pin on
 * the block (catalog.h) and the table cap may drop its tables, which it
 * does at once when over (catalog_trim_tables), so a query scanning many
 * blocks holds about one block's tables per item running, not all of
 * them. The caller promises that the query keeps no pointer into the
 * block's tables (row views, strings) and reads none of its rows again
 * without a qctx_load first (which pins it again). Open sources: nothing.
 */
void qctx_done(struct qctx *q, struct qctx_src *s);
/* qctx_done for every qctx_load of |s| so far, however many: for an
 * executor that reads sources one at a time on one thread (PromQL's
 * source, whose label index build loads a block inside its own load). */
void qctx_done_all(struct qctx *q, struct qctx_src *s);
/* How many times, in total, qctx_done gave up a block's pin before its
 * query closed (tests: an executor lets go of the blocks it is done with).
 * Any thread. */
uint64_t qctx_blocks_given_up(void);

/* Counter bump from a scan item. */
static inline void qctx_add(uint64_t *counter, uint64_t n)
{
    __atomic_fetch_add(counter, n, __ATOMIC_RELAXED);
}

static inline bool qctx_src_failed(const struct qctx_src *s)
{
    return __atomic_load_n(&s->failed, __ATOMIC_RELAXED) != 0;
}

/* ---- typed row reads (tables |want| loaded by qctx_load) ---- */

/* Row |row| of a source: 0, or the errors of blk_log / oblock_log
 * (-EBADMSG: the row failed verification; quarantining is the caller's). */
static inline int qctx_read_log(const struct qctx_src *s, uint64_t row, unsigned want,
                                struct log_view *v)
{
    return s->b != NULL ? blk_log(s->b, row, want, v) : oblock_log(s->ob, row, v);
}

/* The body of a row qctx_read_log read with BLK_ROOT | BLK_NOBODY (an
 * open block's view already has it). */
static inline int qctx_read_log_body(const struct qctx_src *s, uint64_t row, struct log_view *v)
{
    return s->b != NULL ? blk_log_body(s->b, row, v) : 0;
}

static inline int qctx_read_span(const struct qctx_src *s, uint64_t row, unsigned want,
                                 struct span_view *v)
{
    return s->b != NULL ? blk_span(s->b, row, want, v) : oblock_span(s->ob, row, v);
}

/* The dictionaries of a source: resources (by id) and scopes. */
static inline const struct res_view *qctx_resource(const struct qctx_src *s, uint32_t id)
{
    return s->b != NULL ? blk_resource(s->b, id) : oblock_resource(s->ob, id);
}

static inline uint32_t qctx_n_resources(const struct qctx_src *s)
{
    return s->b != NULL ? blk_n_resources(s->b) : oblock_n_resources(s->ob);
}

static inline uint32_t qctx_n_scopes(const struct qctx_src *s)
{
    return s->b != NULL ? blk_n_scopes(s->b) : oblock_n_scopes(s->ob);
}

static inline const struct scope_view *qctx_scope(const struct qctx_src *s, uint32_t id)
{
    return s->b != NULL ? blk_scope(s->b, id) : oblock_scope(s->ob, id);
}

/* As qctx_read_span (the root table always), and a row failing
 * verification quarantines the source, all of its rows skipped. */
static inline int qctx_span(struct qctx *q, struct qctx_src *s, uint64_t row, unsigned want,
                            struct span_view *v)
{
    if (s->b != NULL) {
        int rc = blk_span(s->b, row, want | BLK_ROOT, v);
        if (rc == -EBADMSG) {
            qctx_src_fail(q, s, s->rows);
        }
        return rc;
    }
    return oblock_span(s->ob, row, v);
}

/* ---- the row cursor of a block scan ---- */

struct qctx_scan {
    struct qctx *q;
    uint64_t lo, n;      /* rows lo .. lo + n */
    uint64_t k;          /* rows handed out so far */
    bool bwd;            /* from the last row down */
    uint32_t since;      /* rows since the last qctx_rows */
    uint32_t row_check;  /* rows between two qctx_rows */
    uint32_t clock_mask; /* QCTX_CLOCK_ROWS - 1, or ~0 (no clock) */
};

/* Rows [lo, hi) of one source, |bwd| from hi - 1 down. Every |row_check|
 * rows (> 1) the cursor adds them to the query (qctx_rows); with |clock|
 * every QCTX_CLOCK_ROWS rows it calls qctx_tick (forget a regex note an
 * earlier request left on this thread before the scan's first regex:
 * qlex_re_take_limit_hit). */
void qctx_scan_begin(struct qctx_scan *it, struct qctx *q, uint64_t lo, uint64_t hi, bool bwd,
                     uint32_t row_check, bool clock);

/* Slow path of qctx_scan_next: true while the query may go on. */
bool qctx_scan_limits(struct qctx_scan *it);

/* The next row into *row: true, or false at the end or when the query
 * stopped (the current row is not to be read then). */
static inline bool qctx_scan_next(struct qctx_scan *it, uint64_t *row)
{
    if (it->k == it->n) {
        return false;
    }
    uint64_t k = it->k++;
    *row = it->bwd ? it->lo + it->n - 1 - k : it->lo + k;
    if (++it->since == it->row_check || (it->since & it->clock_mask) == 0) {
        return qctx_scan_limits(it);
    }
    return true;
}

/* Rows not yet done, the current one included. */
static inline uint64_t qctx_scan_left(const struct qctx_scan *it)
{
    return it->n - it->k + 1;
}

/* Adds the rows not yet added; with |clock| a last qctx_tick. Returns
 * qctx_err. */
int qctx_scan_end(struct qctx_scan *it);

#endif
