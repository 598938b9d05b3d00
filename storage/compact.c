/*
 * compact.c - the cold tier (see compact.h): the merge of sealed blocks
 * into one cold block, and the thread that picks settled windows and swaps
 * their blocks for the merged one.
 */
#include "storage/compact.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/clock.h"
#include "storage/adm.h"
#include "storage/catalog.h"
#include "storage/oblock.h"

#define MERGE_CHUNK 4096 /* rows per batch appended to the merged open block */
#define NO_ID UINT32_MAX
/*
 * What a merge holds at its peak (charged: the inputs' loaded tables, the
 * open block, then the writer's scratch at twice the open block) per input
 * file byte, in sixteenths, per signal: measured by every merge
 * (adm_track_peak), MERGE_RATIO_START until the first. bench/STORAGE.md
 * (h-merge) has the figures: 8x on blkgen's rows, 14x to 24x on bench/ab's
 * corpora (which compress better, and an open block starts at 1.6 MiB).
 */
#define MERGE_RATIO_START (16u * 16u)
static _Atomic uint64_t merge_ratio16[SIG_COUNT];

static uint64_t merge_need(enum signal s, uint64_t in_bytes)
{
    uint64_t r = atomic_load(&merge_ratio16[s - 1]);
    return (r == 0 ? MERGE_RATIO_START : r) * in_bytes / 16;
}

/* ---- stepping back while admission is short of room ---- */

/* How long a pass waits for room before its snapshot (and compact_merge
 * called alone before it starts: it holds nothing yet); once a merge holds
 * rows it waits for nothing: a refusal, pacing or too little room for its
 * next step, and it gives everything back (-EAGAIN). The step is how often
 * it looks again. */
#define ROOM_WAIT_NS (1000ull * 1000000u)
/* After ingest was short of room, how long it must not be before a merge
 * starts: a burst of ingest between two looks is not taken for room. */
#define ROOM_QUIET_NS (200ull * 1000000u)
#define ROOM_STEP_NS (10ull * 1000000u)

static _Atomic uint64_t st_deferrals, st_deferred_ns, st_yields;

/*
 * Whether ingest is short of room now: admission refused memory since
 * *seen (adm_refusals), admission is being paced (the sealer lags with
 * the budget more than half full, adm_pace_ns: a closed-loop load fills
 * whatever room the merge leaves), or fewer than |need| bytes are left
 * before admission stops. No budget (tests, tools): never.
 */
static bool room_short(uint64_t need, uint64_t *seen)
{
    if (adm_budget() == 0) {
        return false;
    }
    uint64_t r = adm_refusals();
    bool refused = r != *seen;
    *seen = r;
    return refused || adm_pace_ns() > 0 || adm_room() < need;
}

/*
 * Waits while ingest is short of room (room_short) for a merge that needs
 * |need| more bytes: 0 once there is room; -EAGAIN when it waited |max_ns|
 * without (the caller gives up what it holds and the window is retried on
 * a later pass); -ECANCELED on stop. Never holds a lock, so ingest is
 * never blocked by it.
 */
static int wait_room(uint64_t need, uint64_t max_ns, const _Atomic int *stop, uint64_t *seen)
{
    if (!room_short(need, seen)) {
        return 0;
    }
    uint64_t t0 = clock_mono_ns(), waited = 0, quiet = 0;
    int rc = -EAGAIN;
    atomic_fetch_add(&st_deferrals, 1);
    while (waited < max_ns) {
        if (stop != NULL && atomic_load(stop)) {
            rc = -ECANCELED;
            break;
        }
        struct timespec ts = {0, (long)ROOM_STEP_NS};
        nanosleep(&ts, NULL);
        uint64_t now = clock_mono_ns() - t0;
        quiet = room_short(need, seen) ? 0 : quiet + (now - waited);
        waited = now;
        if (quiet >= ROOM_QUIET_NS) {
            rc = 0; /* room, and no refusal or pacing, for ROOM_QUIET_NS */
            break;
        }
    }
    atomic_fetch_add(&st_deferred_ns, waited);
    return rc;
}

static pthread_mutex_t peak_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t st_peak, st_peak_in, st_last_peak, st_last_in; /* under peak_lock */

/* A merge of |in_bytes| held |peak| at most: the stats, and (for one that
 * completed: an abandoned one stopped short of its peak) the ratio. */
static void note_peak(enum signal s, uint64_t peak, uint64_t in_bytes, bool done)
{
    pthread_mutex_lock(&peak_lock);
    st_last_peak = peak;
    st_last_in = in_bytes;
    if (peak > st_peak) {
        st_peak = peak;
        st_peak_in = in_bytes;
    }
    pthread_mutex_unlock(&peak_lock);
    if (done) {
        uint64_t r = peak * 16 / in_bytes;
        atomic_store(&merge_ratio16[s - 1], r < 16 ? 16 : r);
    }
}

/* ---- the merge: rows of sealed blocks into one open block ---- */

/* Block-level id -> index in the batch being filled, per dictionary. */
struct idmap {
    uint32_t *res, *scope, *metric;
    uint32_t n_res, n_scope, n_metric;
};

static void idmap_free(struct idmap *m)
{
    free(m->res);
    free(m->scope);
    free(m->metric);
    memset(m, 0, sizeof(*m));
}

static int idmap_init(struct idmap *m, const blk *b)
{
    m->n_res = blk_n_resources(b);
    m->n_scope = blk_n_scopes(b);
    m->n_metric = blk_n_metrics(b);
    m->res = malloc(((size_t)m->n_res + 1) * sizeof(uint32_t));
    m->scope = malloc(((size_t)m->n_scope + 1) * sizeof(uint32_t));
    m->metric = malloc(((size_t)m->n_metric + 1) * sizeof(uint32_t));
    if (m->res == NULL || m->scope == NULL || m->metric == NULL) {
        idmap_free(m);
        return -ENOMEM;
    }
    return 0;
}

static void idmap_reset(struct idmap *m)
{
    memset(m->res, 0xff, (size_t)m->n_res * sizeof(uint32_t));
    memset(m->scope, 0xff, (size_t)m->n_scope * sizeof(uint32_t));
    memset(m->metric, 0xff, (size_t)m->n_metric * sizeof(uint32_t));
}

static int put_blob(struct batch *bt, const uint8_t *p, uint32_t len, struct blob *out)
{
    out->off = (uint32_t)bt->heap.len;
    out->len = len;
    return vbuf_put(&bt->heap, p, len);
}

static int put_attrs(struct batch *bt, struct oattrs a, struct attrs *out)
{
    out->count = a.count;
    return put_blob(bt, a.p, a.len, &out->blob);
}

/* The batch index of resource |id| of |b|, added on first use: NO_ID on
 * out of memory or a bad id. */
static uint32_t map_res(struct batch *bt, struct idmap *m, const blk *b, uint32_t id)
{
    if (id >= m->n_res) {
        return NO_ID;
    }
    if (m->res[id] == NO_ID) {
        const struct res_view *v = blk_resource(b, id);
        struct res_row *r = batch_add_resource(bt);
        if (r == NULL || put_attrs(bt, v->attrs, &r->attrs) < 0) {
            return NO_ID;
        }
        r->dropped_attrs = v->dropped_attrs;
        r->schema_url = v->schema_url;
        m->res[id] = bt->n_resources - 1;
    }
    return m->res[id];
}

static uint32_t map_scope(struct batch *bt, struct idmap *m, const blk *b, uint32_t id)
{
    if (id >= m->n_scope) {
        return NO_ID;
    }
    if (m->scope[id] == NO_ID) {
        const struct scope_view *v = blk_scope(b, id);
        uint32_t res = map_res(bt, m, b, v->resource_id);
        if (res == NO_ID) {
            return NO_ID;
        }
        struct scope_row *r = batch_add_scope(bt);
        if (r == NULL || put_attrs(bt, v->attrs, &r->attrs) < 0) {
            return NO_ID;
        }
        r->resource = res;
        r->name = v->name;
        r->version = v->version;
        r->dropped_attrs = v->dropped_attrs;
        r->schema_url = v->schema_url;
        m->scope[id] = bt->n_scopes - 1;
    }
    return m->scope[id];
}

static uint32_t map_metric(struct batch *bt, struct idmap *m, const blk *b, uint32_t id)
{
    if (id >= m->n_metric) {
        return NO_ID;
    }
    if (m->metric[id] == NO_ID) {
        const struct metric_view *v = blk_metric(b, id);
        uint32_t scope = map_scope(bt, m, b, v->scope_id);
        if (scope == NO_ID) {
            return NO_ID;
        }
        struct metric_row *r = batch_add_metric(bt);
        if (r == NULL || put_attrs(bt, v->metadata, &r->metadata) < 0) {
            return NO_ID;
        }
        r->scope = scope;
        r->name = v->name;
        r->description = v->description;
        r->unit = v->unit;
        r->kind = v->kind;
        r->temporality = v->temporality;
        r->monotonic = v->monotonic;
        m->metric[id] = bt->n_metrics - 1;
    }
    return m->metric[id];
}

/* Row |i| of |b| appended to |bt|: 0, -EBADMSG (a table fails), -ENOMEM. */
static int add_log(struct batch *bt, struct idmap *m, blk *b, uint64_t i)
{
    struct log_view v;
    int rc = blk_log(b, i, BLK_ALL, &v);
    if (rc < 0) {
        return rc;
    }
    uint32_t scope = map_scope(bt, m, b, v.scope_id);
    struct log_row *r = scope == NO_ID ? NULL : batch_add_log(bt);
    if (r == NULL) {
        return -ENOMEM;
    }
    r->time_ns = v.time_ns;
    r->observed_ns = v.observed_ns;
    r->scope = scope;
    r->severity_number = v.severity_number;
    r->severity_text = v.severity_text;
    r->body_type = v.body_type;
    r->body_str = v.body_str;
    r->dropped_attrs = v.dropped_attrs;
    r->flags = v.flags;
    r->has_trace_id = v.has_trace_id;
    r->has_span_id = v.has_span_id;
    memcpy(r->trace_id, v.trace_id, 16);
    memcpy(r->span_id, v.span_id, 8);
    r->event_name = v.event_name;
    if (put_blob(bt, v.body_val.p, v.body_val.len, &r->body_val) < 0 ||
        put_attrs(bt, v.attrs, &r->attrs) < 0) {
        return -ENOMEM;
    }
    return 0;
}

static int add_span(struct batch *bt, struct idmap *m, blk *b, uint64_t i)
{
    struct span_view v;
    int rc = blk_span(b, i, BLK_ALL, &v);
    if (rc < 0) {
        return rc;
    }
    uint32_t scope = map_scope(bt, m, b, v.scope_id);
    struct span_row *r = scope == NO_ID ? NULL : batch_add_span(bt);
    if (r == NULL) {
        return -ENOMEM;
    }
    r->start_ns = v.start_ns;
    r->end_ns = v.end_ns;
    r->scope = scope;
    memcpy(r->trace_id, v.trace_id, 16);
    memcpy(r->span_id, v.span_id, 8);
    memcpy(r->parent_span_id, v.parent_span_id, 8);
    r->has_parent = v.has_parent;
    r->trace_state = v.trace_state;
    r->name = v.name;
    r->kind = v.kind;
    r->flags = v.flags;
    r->status_code = v.status_code;
    r->status_message = v.status_message;
    r->dropped_attrs = v.dropped_attrs;
    r->n_events = v.n_events;
    r->dropped_events = v.dropped_events;
    r->n_links = v.n_links;
    r->dropped_links = v.dropped_links;
    if (put_attrs(bt, v.attrs, &r->attrs) < 0 ||
        put_blob(bt, v.events.p, v.events.len, &r->events) < 0 ||
        put_blob(bt, v.links.p, v.links.len, &r->links) < 0) {
        return -ENOMEM;
    }
    return 0;
}

static int add_point(struct batch *bt, struct idmap *m, blk *b, uint64_t i)
{
    struct point_view v;
    int rc = blk_point(b, i, BLK_ALL, &v);
    if (rc < 0) {
        return rc;
    }
    uint32_t metric = map_metric(bt, m, b, v.metric_id);
    struct point_row *r = metric == NO_ID ? NULL : batch_add_point(bt);
    if (r == NULL) {
        return -ENOMEM;
    }
    r->start_ns = v.start_ns;
    r->time_ns = v.time_ns;
    r->metric = metric;
    r->flags = v.flags;
    r->value_type = v.value_type;
    if (v.value_type == PV_INT) {
        r->value.i = v.value.i;
    } else {
        r->value.d = v.value.d;
    }
    r->count = v.count;
    r->sum = v.sum;
    r->min = v.min;
    r->max = v.max;
    r->has_sum = v.has_sum;
    r->has_min = v.has_min;
    r->has_max = v.has_max;
    r->n_exemplars = v.n_exemplars;
    if (put_attrs(bt, v.attrs, &r->attrs) < 0 ||
        put_blob(bt, v.detail.p, v.detail.len, &r->detail) < 0 ||
        put_blob(bt, v.exemplars.p, v.exemplars.len, &r->exemplars) < 0) {
        return -ENOMEM;
    }
    return 0;
}

/* Appends every row of |b| to |ob|, MERGE_CHUNK rows a batch. The merged
 * block's growth is charged to the budget as it happens (*charged); before
 * each chunk it gives up (-EAGAIN) if ingest is short of room for about
 * what the last chunk took (wait_room). */
static int append_block(oblock *ob, struct batch *bt, blk *b, const _Atomic int *stop,
                        size_t *charged, uint64_t *seen)
{
    enum signal sig = blk_signal(b);
    struct idmap m;
    int rc = blk_load(b, BLK_ALL);
    if (rc < 0) {
        return rc;
    }
    rc = idmap_init(&m, b);
    if (rc < 0) {
        return rc;
    }
    /* room is looked at before each chunk: the first just after the load */
    uint64_t rows = blk_rows(b), step = 0;
    for (uint64_t start = 0; start < rows && rc == 0; start += MERGE_CHUNK) {
        if (stop != NULL && atomic_load(stop)) {
            rc = -ECANCELED;
            break;
        }
        rc = wait_room(step, 0, stop, seen);
        if (rc < 0) {
            break;
        }
        uint64_t end = start + MERGE_CHUNK < rows ? start + MERGE_CHUNK : rows;
        batch_reset(bt, sig);
        idmap_reset(&m);
        for (uint64_t i = start; i < end && rc == 0; i++) {
            rc = sig == SIG_LOGS     ? add_log(bt, &m, b, i)
                 : sig == SIG_TRACES ? add_span(bt, &m, b, i)
                                     : add_point(bt, &m, b, i);
        }
        if (rc == 0) {
            rc = oblock_append(ob, bt, 0);
        }
        size_t now = oblock_bytes(ob);
        if (now > *charged) {
            step = now - *charged;
            adm_charge(step);
            *charged = now;
        }
    }
    idmap_free(&m);
    return rc;
}

/* Whether the calling thread's merge inputs carry one pin of its own (a
 * catalog snapshot's: compact_group sets it), which give_back_tables lifts
 * for its drop. */
static _Thread_local bool inputs_pinned;

/* Frees the tables the merge loaded of |b| once its rows are in the
 * merged block (they are charged to the budget ingest is admitted
 * against), unless a reader other than the merge pins it. */
static void give_back_tables(blk *b)
{
    if (inputs_pinned) {
        blk_unpin(b);
    }
    blk_drop_tables_unpinned(b);
    if (inputs_pinned) {
        blk_pin(b);
    }
}

static void sources_of(blk *const *in, size_t n, struct blk_source *src)
{
    for (size_t i = 0; i < n; i++) {
        const struct blk_meta *m = blk_meta(in[i]);
        src[i] =
            (struct blk_source){.shard = m->shard, .seal_id = m->seal_id, .wal_seq = m->wal_seq};
    }
}

int compact_merge(const char *dir, blk *const *in, size_t n, uint64_t cold_id, int zstd_level,
                  const _Atomic int *stop, size_t *bad, char *path, size_t cap)
{
    if (n == 0 || n > UINT32_MAX) {
        return -EINVAL;
    }
    enum signal sig = blk_signal(in[0]);
    for (size_t i = 1; i < n; i++) {
        if (blk_signal(in[i]) != sig) {
            return -EINVAL;
        }
    }
    int rc;
    oblock *ob = NULL;
    struct batch *bt = NULL;
    size_t charged = 0;
    uint64_t in_bytes = 0;
    bool started = false; /* past the wait for room */
    struct blk_source *src = calloc(n, sizeof(*src));
    if (src == NULL) {
        return -ENOMEM;
    }
    rc = oblock_new(sig, &ob);
    if (rc < 0) {
        goto out;
    }
    bt = batch_new(sig);
    if (bt == NULL) {
        rc = -ENOMEM;
        goto out;
    }
    sources_of(in, n, src);
    uint64_t seen = adm_refusals();
    for (size_t i = 0; i < n; i++) {
        in_bytes += blk_file_bytes(in[i]);
    }
    in_bytes = in_bytes == 0 ? 1 : in_bytes;
    adm_track_begin();
    /* The pass waits for room before its snapshot (compact_signal): a wait
     * here would keep every block of it pinned, its tables out of the
     * catalog's reach when admission needs them trimmed. */
    rc = wait_room(merge_need(sig, in_bytes), inputs_pinned ? 0 : ROOM_WAIT_NS, stop, &seen);
    started = rc == 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bool had = blk_holds_tables(in[i]);
        rc = append_block(ob, bt, in[i], stop, &charged, &seen);
        if (rc == -EBADMSG && bad != NULL) {
            *bad = i;
        }
        if (!had) {
            give_back_tables(in[i]);
        }
    }
    if (rc == 0) {
        /* the writer's scratch (block.h: 2x the open block) */
        rc = wait_room(2 * (uint64_t)charged, 0, stop, &seen);
    }
    if (rc < 0) {
        goto out;
    }
    struct blk_meta meta = {.shard = BLK_COLD_SHARD, .wal_seq = 0, .seal_id = cold_id};
    struct blk_wopts o = {.codec = BLK_CODEC_ZSTD,
                          .zstd_level = zstd_level,
                          .zstd_root = true,
                          .sources = src,
                          .n_sources = (uint32_t)n,
                          .attrs_by_key = true,
                          .typed_vals = true,
                          .span_refs = true,
                          .events_by_key = true,
                          .zstd_cols = true,
                          .streams_by_row = true,
                          .streams_derived = true,
                          .var_seqs = true,
                          .int_planes = true,
                          .dicts_zstd = true,
                          .point_starts = true,
                          .body_tmpl = true,
                          .body_slots = true};
    rc = blk_write_ex(dir, ob, oblock_rows(ob), &meta, &o, path, cap);

out:
    batch_free(bt);
    oblock_free(ob);
    adm_uncharge(charged);
    free(src);
    if (rc == -EAGAIN && started) {
        atomic_fetch_add(&st_yields, 1);
    }
    if (in_bytes > 0) { /* past the start */
        uint64_t peak = adm_track_peak();
        adm_track_end();
        note_peak(sig, peak, in_bytes, rc == 0);
    }
    return rc;
}

/* ---- the compaction thread ---- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static pthread_t thread;
static bool running;
static _Atomic int stopping;
static struct compact_cfg cfg;
static char data_dir[512];
static struct compact_stats stats; /* under |lock| */

static uint64_t block_max_ns(const blk *b)
{
    uint64_t mn, mx;
    blk_time_range(b, &mn, &mx);
    return mx;
}

/* Merges in[0, n) and swaps them for the result: 0, -EAGAIN (it stepped
 * back for ingest: nothing changed), or another failure. */
static int compact_group(enum signal s, blk *const *in, size_t n)
{
    char dir[600], path[700];
    uint64_t t0 = clock_mono_ns(), bytes_in = 0, rows = 0;
    size_t bad = SIZE_MAX;
    blk *out = NULL;
    snprintf(dir, sizeof(dir), "%s/%s", data_dir, signal_name(s));
    struct blk_source *src = calloc(n, sizeof(*src));
    int rc = src == NULL ? -ENOMEM : 0;
    if (rc == 0) {
        sources_of(in, n, src);
    }
    for (size_t i = 0; i < n && rc == 0; i++) {
        bytes_in += blk_file_bytes(in[i]);
        rows += blk_rows(in[i]);
    }
    /* The watermark rule (compact.h): durable before the rename. */
    if (rc == 0) {
        rc = catalog_persist_watermarks(s, src, (uint32_t)n);
    }
    if (rc == 0) {
        inputs_pinned = true; /* by the pass's snapshot */
        rc = compact_merge(dir, in, n, catalog_cold_id_take(), cfg.zstd_level, &stopping, &bad,
                           path, sizeof(path));
        inputs_pinned = false;
    }
    if (rc == -EBADMSG && bad < n) {
        blk_quarantine(in[bad]); /* as a query that found it damaged does */
        catalog_forget(in[bad]);
    }
    if (rc == 0) {
        char why[256];
        rc = blk_open(path, &out, why, sizeof(why));
        if (rc == 0) {
            blk_drop_tables(out); /* verified; loaded again by its first reader, as a seal's */
            rc = catalog_replace(s, in, n, out, path);
        }
        if (rc < 0) {
            blk_unref(out);
            unlink(path); /* the inputs stay as they were */
        }
    }
    free(src);
    pthread_mutex_lock(&lock);
    if (rc == 0) {
        stats.compactions++;
        stats.blocks_in += n;
        stats.bytes_in += bytes_in;
        stats.bytes_out += blk_file_bytes(out);
        stats.rows += rows;
    } else if (rc != -ECANCELED && rc != -ESTALE && rc != -EAGAIN) {
        stats.failures++;
    }
    stats.ns += clock_mono_ns() - t0;
    pthread_mutex_unlock(&lock);
    return rc;
}

uint64_t compact_group_cap(enum signal s, uint64_t cold_target, uint64_t budget)
{
    if (budget == 0) {
        return cold_target;
    }
    uint64_t r = atomic_load(&merge_ratio16[s - 1]);
    uint64_t cap = budget / COMPACT_MEM_DIV * 16 / (r == 0 ? MERGE_RATIO_START : r);
    return cap < cold_target ? cap : cold_target;
}

bool compact_window_settled(uint64_t max_ns, uint64_t after_ns, uint64_t now_ns)
{
    if (after_ns == 0 || now_ns < after_ns) {
        return false;
    }
    /* (window + 1) * after <= now - after, without overflow */
    return max_ns / after_ns + 1 <= (now_ns - after_ns) / after_ns;
}

/* One pass over one signal: every settled window, oldest first. */
static void compact_signal(enum signal s)
{
    struct cat_snap sn;
    uint64_t seen = adm_refusals();
    if (wait_room(0, ROOM_WAIT_NS, &stopping, &seen) < 0) {
        return; /* ingest is short of room: no snapshot (its pins), no merge */
    }
    if (catalog_snapshot(s, &sn) < 0) {
        return;
    }
    uint64_t after = cfg.compact_after_ms * 1000000u, now = clock_wall_ns(), backlog = 0;
    for (size_t i = 0; i < sn.n_blocks; i++) {
        if (blk_n_sources(sn.blocks[i]) == 0 && now > after &&
            block_max_ns(sn.blocks[i]) < now - after) {
            backlog++;
        }
    }
    pthread_mutex_lock(&lock);
    stats.backlog[s - 1] = backlog;
    pthread_mutex_unlock(&lock);
    uint64_t cap = compact_group_cap(s, cfg.cold_target_bytes, adm_budget());
    blk **group = calloc(sn.n_blocks + 1, sizeof(*group));
    /* Blocks come in the catalog's order: by newest row, oldest first. */
    for (size_t i = 0; group != NULL && i < sn.n_blocks && !atomic_load(&stopping);) {
        blk *b = sn.blocks[i];
        uint64_t w = block_max_ns(b) / after;
        if (blk_n_sources(b) != 0 || !compact_window_settled(block_max_ns(b), after, now)) {
            i++;
            continue; /* cold already, or its window is not settled */
        }
        size_t n = 0;
        uint64_t bytes = 0;
        while (i < sn.n_blocks) {
            blk *c = sn.blocks[i];
            if (blk_n_sources(c) != 0) {
                i++;
                continue;
            }
            if (block_max_ns(c) / after != w || (n > 0 && bytes + blk_file_bytes(c) > cap)) {
                break;
            }
            group[n++] = c;
            bytes += blk_file_bytes(c);
            i++;
        }
        if (compact_group(s, group, n) == -EAGAIN) {
            break; /* ingest is short of room: the next pass retries */
        }
    }
    free(group);
    catalog_snap_release(&sn); /* the last reference to a replaced input unlinks it */
}

static void *compact_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "compact");
    struct sched_param sp = {0};
    if (pthread_setschedparam(pthread_self(), SCHED_IDLE, &sp) != 0) {
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    }
    uint64_t tick = cfg.compact_after_ms / 4;
    tick = tick < 100 ? 100 : tick > 60000 ? 60000 : tick;
    pthread_mutex_lock(&lock);
    while (!atomic_load(&stopping)) {
        struct timespec dl = clock_after(CLOCK_REALTIME, tick * 1000000u);
        pthread_cond_timedwait(&wake, &lock, &dl);
        if (atomic_load(&stopping)) {
            break;
        }
        pthread_mutex_unlock(&lock);
        for (int s = 1; s <= SIG_COUNT && !atomic_load(&stopping); s++) {
            compact_signal((enum signal)s);
        }
        pthread_mutex_lock(&lock);
        stats.passes++;
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int compact_start(const struct compact_cfg *c)
{
    cfg = *c;
    if (cfg.cold_target_bytes == 0) {
        cfg.cold_target_bytes = COMPACT_TARGET_DEFAULT;
    }
    if (cfg.zstd_level == 0) {
        cfg.zstd_level = 3;
    }
    snprintf(data_dir, sizeof(data_dir), "%s", c->data_dir);
    cfg.data_dir = data_dir;
    memset(&stats, 0, sizeof(stats));
    atomic_store(&stopping, 0);
    if (cfg.compact_after_ms == 0) {
        return 0;
    }
    int rc = pthread_create(&thread, NULL, compact_main, NULL);
    if (rc != 0) {
        return -rc;
    }
    running = true;
    return 0;
}

void compact_stop(void)
{
    if (!running) {
        return;
    }
    pthread_mutex_lock(&lock);
    atomic_store(&stopping, 1);
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&lock);
    pthread_join(thread, NULL);
    running = false;
}

void compact_get_stats(struct compact_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
    pthread_mutex_lock(&peak_lock);
    out->peak_bytes = st_peak;
    out->peak_bytes_in = st_peak_in;
    out->last_peak_bytes = st_last_peak;
    out->last_bytes_in = st_last_in;
    pthread_mutex_unlock(&peak_lock);
    out->deferrals = atomic_load(&st_deferrals);
    out->deferred_ns = atomic_load(&st_deferred_ns);
    out->yields = atomic_load(&st_yields);
}
