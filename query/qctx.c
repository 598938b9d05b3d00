/*
 * qctx.c - the query context (see qctx.h).
 */
#include "query/qctx.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "query/pool.h"
#include "query/qlex.h"
#include "storage/adm.h"

/* Bytes every open query holds (qctx_memory_held), and its page windows'
 * file bytes (qctx_window_bytes). */
static int64_t mem_all;
static uint64_t window_all;

uint64_t qctx_window_bytes(void)
{
    return __atomic_load_n(&window_all, __ATOMIC_RELAXED);
}

int qctx_open(struct qctx *q, enum signal sig, const struct qctx_limits *lim, const char *noun)
{
    memset(q, 0, sizeof(*q));
    if (lim != NULL) {
        q->lim = *lim;
    }
    q->noun = noun;
    int rc = catalog_snapshot(sig, &q->snap);
    if (rc < 0) {
        return rc;
    }
    q->n_src = q->snap.n_blocks + q->snap.n_open;
    q->src = calloc(q->n_src + 1, sizeof(*q->src));
    q->pg_cap = q->snap.n_blocks;
    q->pg_ring = calloc(q->pg_cap + 1, sizeof(*q->pg_ring));
    if (q->src == NULL || q->pg_ring == NULL) {
        free(q->src);
        free(q->pg_ring);
        catalog_snap_release(&q->snap);
        return -ENOMEM;
    }
    for (size_t i = 0; i < q->snap.n_blocks; i++) {
        struct qctx_src *s = &q->src[i];
        s->b = q->snap.blocks[i];
        s->rows = blk_rows(s->b);
        blk_time_range(s->b, &s->tmin, &s->tmax);
    }
    for (size_t i = 0; i < q->snap.n_open; i++) {
        struct qctx_src *s = &q->src[q->snap.n_blocks + i];
        s->ob = q->snap.open[i];
        s->rows = q->snap.open_rows[i];
        s->tmin = 0;
        s->tmax = UINT64_MAX;
    }
    q->have_snap = true;
    pthread_mutex_init(&q->lock, NULL);
    return 0;
}

void qctx_close(struct qctx *q)
{
    if (q == NULL || !q->have_snap) {
        return;
    }
    struct qctx_warning *w = q->warnings;
    while (w != NULL) {
        struct qctx_warning *n = w->next;
        free(w);
        w = n;
    }
    q->warnings = NULL;
    for (size_t i = 0; i < q->snap.n_blocks; i++) {
        blk_drop_pages(q->src[i].b);
    }
    adm_demand_add(-(int64_t)q->demand);
    q->demand = 0;
    adm_uncharge(q->pg_bytes);
    __atomic_sub_fetch(&window_all, q->pg_bytes, __ATOMIC_RELAXED);
    q->pg_bytes = 0;
    int64_t held = __atomic_exchange_n(&q->mem, 0, __ATOMIC_RELAXED);
    if (held > 0) {
        __atomic_sub_fetch(&mem_all, held, __ATOMIC_RELAXED);
    }
    adm_uncharge(__atomic_exchange_n(&q->adm, 0, __ATOMIC_RELAXED));
    free(q->pg_ring);
    q->pg_ring = NULL;
    free(q->src);
    q->src = NULL;
    q->n_src = 0;
    catalog_snap_release(&q->snap);
    q->have_snap = false;
    pthread_mutex_destroy(&q->lock);
}

const char *qctx_message(const struct qctx *q)
{
    return q->msg;
}

static void fail_va(struct qctx *q, int rc, enum qctx_cause cause, const char *fmt, va_list ap)
{
    pthread_mutex_lock(&q->lock);
    if (__atomic_load_n(&q->err, __ATOMIC_RELAXED) == 0) {
        vsnprintf(q->msg, sizeof(q->msg), fmt, ap);
        __atomic_store_n(&q->cause, (int)cause, __ATOMIC_RELAXED);
        __atomic_store_n(&q->err, rc, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&q->lock);
}

static void fail_cause(struct qctx *q, int rc, enum qctx_cause cause, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail_cause(struct qctx *q, int rc, enum qctx_cause cause, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_va(q, rc, cause, fmt, ap);
    va_end(ap);
}

void qctx_fail(struct qctx *q, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fail_va(q, rc, QCTX_OTHER, fmt, ap);
    va_end(ap);
}

int qctx_check(struct qctx *q)
{
    if (q->lim.cancel != NULL && __atomic_load_n(q->lim.cancel, __ATOMIC_RELAXED)) {
        fail_cause(q, -ECANCELED, QCTX_CANCEL, "the client closed the connection");
    }
    if (q->lim.deadline_ns > 0 && clock_mono_ns() > q->lim.deadline_ns) {
        fail_cause(q, -ETIMEDOUT, QCTX_DEADLINE,
                   "request timed out (--query-timeout), decrease the duration of the request "
                   "or add more label matchers");
    }
    return qctx_err(q);
}

int qctx_rows(struct qctx *q, uint64_t n)
{
    qctx_add(&q->st.rows_scanned, n);
    uint64_t total = __atomic_add_fetch(&q->rows, n, __ATOMIC_RELAXED);
    if (q->lim.max_rows > 0 && total > q->lim.max_rows) {
        fail_cause(q, -E2BIG, QCTX_ROWS,
                   "the query scanned more than %" PRIu64 " rows (--query-max-rows); narrow the "
                   "time range or the selector",
                   q->lim.max_rows);
    }
    return qctx_check(q);
}

int qctx_tick(struct qctx *q)
{
    if (qlex_re_take_limit_hit()) {
        fail_cause(q, -E2BIG, QCTX_REGEX,
                   "a regular expression of the query needs too much backtracking (PCRE2 match "
                   "limit); simplify it, e.g. avoid nested or overlapping repetitions such as "
                   "(a|aa)+ or (a+)+");
    }
    return qctx_check(q);
}

uint64_t qctx_memory_held(void)
{
    int64_t n = __atomic_load_n(&mem_all, __ATOMIC_RELAXED);
    return n > 0 ? (uint64_t)n : 0;
}

static uint64_t total_cap; /* qctx_set_total_memory */

void qctx_set_total_memory(uint64_t n)
{
    __atomic_store_n(&total_cap, n, __ATOMIC_RELAXED);
}

void qctx_set_test_held(uint64_t n)
{
    static uint64_t held;
    __atomic_add_fetch(&mem_all, (int64_t)n - (int64_t)held, __ATOMIC_RELAXED);
    held = n;
}

uint64_t qctx_total_memory(void)
{
    return __atomic_load_n(&total_cap, __ATOMIC_RELAXED);
}

static uint64_t room_waits, room_wait_ns, shared_waits, shared_wait_ns; /* qctx_wait_stats */

void qctx_wait_stats(struct qctx_wait_stats *out)
{
    out->room_waits = __atomic_load_n(&room_waits, __ATOMIC_RELAXED);
    out->room_wait_ns = __atomic_load_n(&room_wait_ns, __ATOMIC_RELAXED);
    out->shared_waits = __atomic_load_n(&shared_waits, __ATOMIC_RELAXED);
    out->shared_wait_ns = __atomic_load_n(&shared_wait_ns, __ATOMIC_RELAXED);
}

static void nap(void)
{
    struct timespec ts = {0, QCTX_WAIT_STEP_NS};
    nanosleep(&ts, NULL);
}

/* The end of a wait that may last |ns|: sooner if the query's deadline is. */
static uint64_t wait_until(const struct qctx *q, uint64_t ns)
{
    uint64_t t = clock_mono_ns() + ns;
    return q->lim.deadline_ns > 0 && q->lim.deadline_ns < t ? q->lim.deadline_ns : t;
}

/* Adds |n| to what the open queries hold if that stays within |cap|;
 * while it would not and other queries hold memory, waits for them up to
 * QCTX_SHARED_WAIT_NS (they finish, or give blocks up). False: no room. */
static bool shared_take(struct qctx *q, uint64_t n, uint64_t cap)
{
    uint64_t t0 = 0, end = 0;
    for (;;) {
        int64_t all = __atomic_load_n(&mem_all, __ATOMIC_RELAXED);
        while (all + (int64_t)n <= (int64_t)cap) {
            if (__atomic_compare_exchange_n(&mem_all, &all, all + (int64_t)n, true,
                                            __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
                if (t0 != 0) {
                    __atomic_add_fetch(&shared_wait_ns, clock_mono_ns() - t0, __ATOMIC_RELAXED);
                }
                return true;
            }
        }
        int64_t mine = __atomic_load_n(&q->mem, __ATOMIC_RELAXED);
        if (all <= mine || qctx_check(q) != 0) {
            break; /* nobody else to wait for: this query alone is too big */
        }
        if (t0 == 0) {
            t0 = clock_mono_ns();
            end = wait_until(q, QCTX_SHARED_WAIT_NS);
            __atomic_add_fetch(&shared_waits, 1, __ATOMIC_RELAXED);
        } else if (clock_mono_ns() >= end) {
            break;
        }
        nap();
    }
    if (t0 != 0) {
        __atomic_add_fetch(&shared_wait_ns, clock_mono_ns() - t0, __ATOMIC_RELAXED);
    }
    return false;
}

int qctx_charge(struct qctx *q, uint64_t n)
{
    uint64_t cap = qctx_total_memory();
    int64_t mine = __atomic_load_n(&q->mem, __ATOMIC_RELAXED);
    /* over its own bound, the query fails as such (422) without waiting */
    bool own_over =
        n > 0 && q->lim.max_memory > 0 && mine + (int64_t)n > (int64_t)q->lim.max_memory;
    bool taken = !own_over && n > 0 && cap > 0 && shared_take(q, n, cap);
    bool shared_over = !own_over && n > 0 && cap > 0 && !taken;
    if (!taken) {
        /* counted either way: qctx_uncharge and qctx_close return it */
        __atomic_add_fetch(&mem_all, (int64_t)n, __ATOMIC_RELAXED);
    }
    adm_charge(n); /* held already: ingest's admission makes room for it */
    __atomic_add_fetch(&q->adm, n, __ATOMIC_RELAXED);
    __atomic_add_fetch(&q->mem, (int64_t)n, __ATOMIC_RELAXED);
    if (own_over) {
        fail_cause(q, -ENOMEM, QCTX_MEMORY,
                   "the query needs more than %" PRIu64 " bytes of memory (--query-memory); "
                   "narrow the time range or the selector",
                   q->lim.max_memory);
        return -ENOMEM;
    }
    if (shared_over) {
        fail_cause(q, -ENOMEM, QCTX_SHARED,
                   "the queries running now need more than %" PRIu64 " bytes of memory together "
                   "(the server's query share of --memory-budget); retry later",
                   cap);
        return -ENOMEM;
    }
    /* Work the query can do without (a child context: an index build) is
     * charged only while the process stays inside the admission limit:
     * it must not be what takes the process past the budget. */
    if (n > 0 && q->optional && adm_excess() > 0) {
        fail_cause(q, -ENOMEM, QCTX_MEMORY, "no room in the memory budget for optional work");
        return -ENOMEM;
    }
    return 0;
}

void qctx_uncharge(struct qctx *q, uint64_t n)
{
    /* never more than this query holds (qctx_close settles the rest, and
     * an uncharge after it is a no-op), nor, to the budget, more than it
     * charged there (the budget's count is shared) */
    int64_t held = __atomic_load_n(&q->mem, __ATOMIC_RELAXED), m;
    do {
        m = held <= 0 ? 0 : (int64_t)n < held ? (int64_t)n : held;
    } while (m > 0 && !__atomic_compare_exchange_n(&q->mem, &held, held - m, true, __ATOMIC_RELAXED,
                                                   __ATOMIC_RELAXED));
    __atomic_sub_fetch(&mem_all, m, __ATOMIC_RELAXED);
    uint64_t had = __atomic_load_n(&q->adm, __ATOMIC_RELAXED), take;
    do {
        take = n < had ? n : had;
    } while (!__atomic_compare_exchange_n(&q->adm, &had, had - take, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    adm_uncharge(take);
}

static int arena_charge_cb(void *ctx, size_t n)
{
    struct qctx *q = ctx;
    if (qctx_charge(q, n) < 0) {
        qctx_uncharge(q, n); /* the chunk is not allocated */
        return -ENOMEM;
    }
    return 0;
}

static void arena_uncharge_cb(void *ctx, size_t n)
{
    qctx_uncharge(ctx, n);
}

void qctx_arena_bind(struct qctx *q, arena *a)
{
    arena_set_charge(a, arena_charge_cb, arena_uncharge_cb, q);
}

void qctx_warn(struct qctx *q, const char *fmt, ...)
{
    struct qctx_warning *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof(w->msg), fmt, ap);
    va_end(ap);
    pthread_mutex_lock(&q->lock);
    struct qctx_warning **pp = &q->warnings;
    while (*pp != NULL) {
        pp = &(*pp)->next;
    }
    *pp = w;
    pthread_mutex_unlock(&q->lock);
}

void qctx_warnings_join(struct qctx *q, char *out, size_t cap)
{
    out[0] = '\0';
    pthread_mutex_lock(&q->lock);
    for (const struct qctx_warning *w = q->warnings; w != NULL; w = w->next) {
        size_t n = strlen(out);
        if (n + 1 >= cap) {
            break;
        }
        snprintf(out + n, cap - n, "%s%s", n > 0 ? "; " : "", w->msg);
    }
    pthread_mutex_unlock(&q->lock);
}

/* Paths of blocks quarantined by queries, until the server logs them: a
 * small ring (the oldest is overwritten; the count of blocks is on
 * /metrics either way). */
#define QPATH_RING 16
static struct {
    pthread_mutex_t lock;
    char path[QPATH_RING][300];
    unsigned head, n;
} qpaths = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void qpath_put(const char *p)
{
    pthread_mutex_lock(&qpaths.lock);
    unsigned i = (qpaths.head + qpaths.n) % QPATH_RING;
    snprintf(qpaths.path[i], sizeof(qpaths.path[i]), "%s", p);
    if (qpaths.n < QPATH_RING) {
        qpaths.n++;
    } else {
        qpaths.head = (qpaths.head + 1) % QPATH_RING;
    }
    pthread_mutex_unlock(&qpaths.lock);
}

bool qctx_quarantined_next(char *out, size_t cap)
{
    bool got = false;
    pthread_mutex_lock(&qpaths.lock);
    if (qpaths.n > 0) {
        snprintf(out, cap, "%s", qpaths.path[qpaths.head]);
        qpaths.head = (qpaths.head + 1) % QPATH_RING;
        qpaths.n--;
        got = true;
    }
    pthread_mutex_unlock(&qpaths.lock);
    return got;
}

void qctx_src_fail(struct qctx *q, struct qctx_src *s, uint64_t skipped)
{
    if (__atomic_exchange_n(&s->failed, 1, __ATOMIC_RELAXED) != 0) {
        return;
    }
    qpath_put(blk_path(s->b));
    blk_quarantine(s->b);
    catalog_forget(s->b);
    qctx_add(&q->st.blocks_failed, 1);
    /* No path here: warnings reach clients. The server logs it
     * (qctx_quarantined_next). */
    qctx_warn(q,
              "a block failed verification and was quarantined: %" PRIu64
              " %s skipped (the server log names the block)",
              skipped, q->noun);
}

/* Enters sealed source |s| into the page window and lets the oldest
 * leave while it is over its bound (qctx.h). */
static void page_window_add(struct qctx *q, struct qctx_src *s)
{
    if (s < q->src || s >= q->src + q->pg_cap) {
        return; /* not one of this query's sealed sources */
    }
    uint64_t cap = catalog_table_cap(), bytes = blk_file_bytes(s->b);
    size_t keep = qpool_workers() > 1 ? (size_t)qpool_workers() : 1;
    adm_charge(bytes);
    __atomic_add_fetch(&window_all, bytes, __ATOMIC_RELAXED);
    pthread_mutex_lock(&q->lock);
    q->pg_ring[(q->pg_head + q->pg_n++) % q->pg_cap] = (uint32_t)(s - q->src);
    q->pg_bytes += bytes;
    while (((cap > 0 && q->pg_bytes > cap) || adm_excess() > 0) && q->pg_n > keep) {
        struct qctx_src *old = &q->src[q->pg_ring[q->pg_head]];
        q->pg_head = (q->pg_head + 1) % q->pg_cap;
        q->pg_n--;
        uint64_t ob = blk_file_bytes(old->b);
        q->pg_bytes -= ob;
        blk_drop_pages(old->b);
        adm_uncharge(ob);
        __atomic_sub_fetch(&window_all, ob, __ATOMIC_RELAXED);
        __atomic_store_n(&old->paged, 0, __ATOMIC_RELAXED); /* a later load enters it again */
    }
    pthread_mutex_unlock(&q->lock);
}

/*
 * Before a load that adds memory (the block's tables, not loaded yet; its
 * file pages, not in the window yet: each estimated at the file's size),
 * while that would take the process past QCTX_ROOM_LIMIT of the budget:
 * idle tables are dropped, admission leaves the bytes free
 * (adm_demand_add) and the query waits for seals to free ingest's memory,
 * at most QCTX_ROOM_WAIT_NS in all per query. The load then goes on
 * whatever the room: a query is not refused for memory ingest holds.
 */
static void wait_for_room(struct qctx *q, struct qctx_src *s)
{
    uint64_t budget = adm_budget();
    if (budget == 0) {
        return;
    }
    uint64_t file = blk_file_bytes(s->b);
    uint64_t need = (blk_holds_tables(s->b) ? 0 : file) +
                    (__atomic_load_n(&s->paged, __ATOMIC_RELAXED) ? 0 : file);
    uint64_t limit = budget - budget / QCTX_ROOM_DIV;
    if (need == 0 || adm_fits(need, limit)) {
        return;
    }
    catalog_trim_tables();
    if (adm_fits(need, limit)) {
        return;
    }
    /* From the first load that found no room to the query's end,
     * admission keeps room for the query's working set free (one such
     * load per pool worker; qctx_close gives it back): a query under
     * ingest at the limit reads block after block, and without it ingest
     * would take each seal's room back before the next load. */
    uint64_t set = need * (uint64_t)(qpool_workers() > 1 ? qpool_workers() : 1);
    uint64_t keep = set < budget / QCTX_DEMAND_DIV ? set : budget / QCTX_DEMAND_DIV;
    pthread_mutex_lock(&q->lock);
    if (keep > q->demand) {
        adm_demand_add((int64_t)(keep - q->demand));
        q->demand = keep;
    }
    pthread_mutex_unlock(&q->lock);
    uint64_t spent = __atomic_load_n(&q->room_wait_ns, __ATOMIC_RELAXED);
    if (spent >= QCTX_ROOM_WAIT_NS) {
        return;
    }
    uint64_t t0 = clock_mono_ns(), end = wait_until(q, QCTX_ROOM_WAIT_NS - spent);
    __atomic_add_fetch(&room_waits, 1, __ATOMIC_RELAXED);
    while (!adm_fits(need, limit) && clock_mono_ns() < end && qctx_check(q) == 0) {
        nap();
        catalog_trim_tables();
    }
    uint64_t took = clock_mono_ns() - t0;
    __atomic_add_fetch(&q->room_wait_ns, took, __ATOMIC_RELAXED);
    __atomic_add_fetch(&room_wait_ns, took, __ATOMIC_RELAXED);
}

int qctx_load(struct qctx *q, struct qctx_src *s, unsigned want)
{
    if (s->b == NULL) {
        return 0;
    }
    if (qctx_src_failed(s)) {
        return -EBADMSG;
    }
    size_t i = (size_t)(s - q->src);
    if (i < q->snap.n_blocks) {
        pthread_mutex_lock(&q->lock);
        s->users++;
        if (s->unpinned) {
            catalog_snap_pin(&q->snap, i); /* before the load: see catalog.h */
            s->unpinned = false;
        }
        pthread_mutex_unlock(&q->lock);
    }
    if (q->pg_cap > 0) {
        wait_for_room(q, s);
    }
    int rc = blk_load(s->b, want);
    /* a child context (pg_cap 0) leaves the page window to its parent */
    if (rc == 0 && q->pg_cap > 0 && __atomic_exchange_n(&s->paged, 1, __ATOMIC_RELAXED) == 0) {
        page_window_add(q, s);
    }
    if (rc == -EBADMSG) {
        qctx_src_fail(q, s, s->rows);
    } else if (rc < 0) {
        qctx_fail(q, -ENOMEM, "out of memory reading a block");
    }
    return rc;
}

static uint64_t given_up; /* atomic: qctx_blocks_given_up */

uint64_t qctx_blocks_given_up(void)
{
    return __atomic_load_n(&given_up, __ATOMIC_RELAXED);
}

static void done_n(struct qctx *q, struct qctx_src *s, bool all)
{
    size_t i = (size_t)(s - q->src);
    if (s->b == NULL || i >= q->snap.n_blocks) {
        return;
    }
    bool trim = false;
    pthread_mutex_lock(&q->lock);
    if (all && s->users > 1) {
        s->users = 1;
    }
    if (s->users > 0 && --s->users == 0 && !s->unpinned) {
        catalog_snap_unpin(&q->snap, i);
        s->unpinned = true;
        trim = true;
        __atomic_add_fetch(&given_up, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&q->lock);
    if (trim) {
        catalog_trim_tables();
    }
}

void qctx_done(struct qctx *q, struct qctx_src *s)
{
    done_n(q, s, false);
}

void qctx_done_all(struct qctx *q, struct qctx_src *s)
{
    done_n(q, s, true);
}

void qctx_scan_begin(struct qctx_scan *it, struct qctx *q, uint64_t lo, uint64_t hi, bool bwd,
                     uint32_t row_check, bool clock)
{
    it->q = q;
    it->lo = lo;
    it->n = hi > lo ? hi - lo : 0;
    it->k = 0;
    it->bwd = bwd;
    it->since = 0;
    it->row_check = row_check;
    it->clock_mask = clock ? QCTX_CLOCK_ROWS - 1 : UINT32_MAX;
}

bool qctx_scan_limits(struct qctx_scan *it)
{
    if (it->since == it->row_check) {
        uint32_t n = it->since;
        it->since = 0;
        return qctx_rows(it->q, n) == 0;
    }
    return qctx_tick(it->q) == 0;
}

int qctx_scan_end(struct qctx_scan *it)
{
    uint32_t n = it->since;
    it->since = 0;
    int rc = qctx_rows(it->q, n);
    if (it->clock_mask != UINT32_MAX) {
        rc = qctx_tick(it->q);
    }
    return rc;
}

void qctx_sub_open(struct qctx *sub, struct qctx *parent, uint64_t max_memory)
{
    memset(sub, 0, sizeof(*sub));
    sub->lim = parent->lim;
    sub->lim.max_rows = 0; /* counted into the parent's at the close */
    sub->lim.max_memory = max_memory;
    sub->optional = true;
    sub->noun = parent->noun;
    /* the sources, not the snapshot: n_blocks 0, so no pins and no page
     * window (qctx_load, qctx_done), and qctx_close would do nothing */
    sub->src = parent->src;
    sub->n_src = parent->n_src;
    pthread_mutex_init(&sub->lock, NULL);
}

int qctx_sub_close(struct qctx *sub, struct qctx *parent)
{
    int err = qctx_err(sub);
    int64_t held = __atomic_exchange_n(&sub->mem, 0, __ATOMIC_RELAXED);
    if (held > 0) {
        __atomic_sub_fetch(&mem_all, held, __ATOMIC_RELAXED);
    }
    adm_uncharge(__atomic_exchange_n(&sub->adm, 0, __ATOMIC_RELAXED));
    qctx_add(&parent->st.blocks_failed, sub->st.blocks_failed);
    struct qctx_warning *w = sub->warnings;
    sub->warnings = NULL;
    pthread_mutex_lock(&parent->lock);
    struct qctx_warning **pp = &parent->warnings;
    while (*pp != NULL) {
        pp = &(*pp)->next;
    }
    *pp = w;
    pthread_mutex_unlock(&parent->lock);
    (void)qctx_rows(parent, __atomic_load_n(&sub->rows, __ATOMIC_RELAXED));
    if (err != 0 && err != -ENOMEM) {
        fail_cause(parent, err, (enum qctx_cause)qctx_cause(sub), "%s", sub->msg);
    }
    pthread_mutex_destroy(&sub->lock);
    sub->src = NULL;
    sub->n_src = 0;
    return err;
}
