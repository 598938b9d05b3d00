/*
 * ingest.c - admission, gunzip, decode and the hand-off to shards (see
 * ingest.h for the sequence a listener follows).
 *
 * Admission takes two things before any body byte is read: a slot in one
 * shard's queue (the I/O thread's own shard first, see try_admit) and a first charge
 * on the memory budget: ADMIT_FACTOR times the first ADMIT_AHEAD bytes of
 * the body (fewer if the declared size is smaller), or times the whole
 * declared size when that is at most a WHOLE_DIV-th of the budget, so an
 * export of usual size waits for room instead of failing halfway through
 * its body. A request that cannot have both waits in its I/O thread's
 * FIFO; a timer retries the queue every RETRY_MS and refuses whoever
 * waited --admit-wait. A larger declared size is never charged before its
 * bytes arrive, so a client that declares 64 MiB and sends nothing holds
 * ADMIT_FACTOR * ADMIT_AHEAD, not 192 MiB.
 * As the body arrives its buffer and charge grow in doubling steps (never
 * past the declared size), each step ADMIT_FACTOR times the buffer, so
 * what a decoded batch will need is charged with the bytes that make it;
 * a step the budget cannot hold refuses the request (503) while its body
 * is still being read. After the body, the gunzipped copy and the batch
 * are charged as committed memory (charge_committed). All of it is
 * uncharged when the request ends, so the budget counts exactly what
 * requests hold.
 *
 * An admitted request's body must arrive within --body-timeout of its
 * admission callback; otherwise it fails with IS_TIMEOUT (408 /
 * DEADLINE_EXCEEDED) through the callback, and its charge and queue slot
 * are returned, however the client keeps its connection alive.
 * Within that deadline the body must also keep a pace: every
 * --receive-rate-window from admission it must have brought at least
 * --min-receive-rate bytes a second, or it fails the same way at the end of
 * that window (a client trickling one byte a second gives its slot back
 * after one window, not after the whole --body-timeout).
 *
 * Everything here runs on the request's I/O thread. job_done() runs where
 * the shard drained the job (shard.h): usually on this same thread, within
 * shard_submit_take, else on the shard thread, or the sealer's under --ack
 * seal; it only posts the request back, so the answer is written from the
 * event loop, never from inside the transport callback that submitted it.
 */
#include "server/ingest.h"

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>
#include <event2/event_struct.h>

#include "lib/clock.h"
#include "lib/decomp.h"
#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "server/config.h"
#include "server/iot.h"
#include "server/log.h"
#include "server/promcheck.h"
#include "storage/adm.h"
#include "storage/arena.h"
#include "storage/diskfree.h"
#include "storage/store.h"
#include "storage/wal.h"

#define ADMIT_AHEAD (64u << 10) /* body bytes charged for before they arrive */
#define ADMIT_FACTOR 3          /* body + decoded batch, as a multiple of the body */
#define RETRY_MS 2              /* how often waiters retry admission */
#define BODY_MIN (64u << 10)
#define WHOLE_DIV                                                                                  \
    32 /* a declared body charged whole at admission: up to this share of the budget */
#define CACHE_SLOTS 4
#define CACHE_MAX_BYTES (4u << 20) /* larger buffers go back to malloc */
#define RETRY_AFTER_S 1
/* Disk full or failing: a full disk frees up on an operator's time scale,
 * so exporters are asked to come back less often than after an overload. */
#define STORAGE_RETRY_AFTER_S 5
/* Storage failures are answered per request but logged at most this often
 * per I/O thread, with their cause (the summary line counts them all). */
#define STORAGE_LOG_EVERY_NS (10ull * 1000000000u)

struct buf {
    uint8_t *p;
    size_t len;
    size_t cap;
};

enum rq_state {
    RQ_NEW,
    RQ_WAITING,
    RQ_ADMITTED,
    RQ_SHARD,
    RQ_DONE,
};

struct ingest_req {
    struct iot_msg msg; /* a pending callback or completion */
    struct iot *t;
    enum signal sig;
    enum transport tr;
    ingest_cb cb;
    void *ctx;
    enum rq_state state;
    bool cb_pending;
    bool abandoned; /* freed by the listener while the shard or a callback held it */
    long expected;
    shard *sh; /* reserved slot while admitted, until submitted */
    uint64_t charged;
    size_t body_reserved; /* body bytes the charge covers (ADMIT_FACTOR times) */
    struct event body_ev; /* the --body-timeout deadline, while RQ_ADMITTED */
    struct event rate_ev; /* the end of a --receive-rate-window, while RQ_ADMITTED */
    size_t wire_bytes;
    size_t rate_mark; /* wire_bytes when the current window began */
    struct buf body;
    struct buf plain; /* the gunzipped body */
    struct batch *batch;
    arena *arena;
    struct shard_job job;
    struct ingest_result res;
    struct ingest_req *wnext, *wprev;
    uint64_t wait_start_ns;
    uint64_t pace_until; /* CLOCK_MONOTONIC: not admitted before (adm_pace_ns); 0: no pacing */
    bool waited;         /* counted in admit_waits (it found no room) */
    /* CLOCK_MONOTONIC at ingest_admit, admission, ingest_finish, the
     * hand-off to the shard and the shard's ack (enum ack_phase) */
    uint64_t t_new, t_admitted, t_finish, t_submit, t_done;
};

/* Per I/O thread state; only that thread touches it. */
struct ingest_thr {
    bool init;
    /* Waiting requests, FIFO per signal: a full logs queue does not hold up traces. */
    struct ingest_req *whead[SIG_COUNT], *wtail[SIG_COUNT];
    struct event *retry_ev;
    uint64_t retry_at;             /* CLOCK_MONOTONIC when retry_ev fires, while pending */
    const struct timeval *body_tv; /* --body-timeout, a common timeout of the base */
    const struct timeval *rate_tv; /* --receive-rate-window, likewise */
    struct decomp *dec;            /* bodies' gzip and zstd */
    struct buf bufs[CACHE_SLOTS];
    int n_bufs;
    struct batch *batches[CACHE_SLOTS];
    size_t batch_bytes[CACHE_SLOTS]; /* each one's footprint when cached (charged) */
    int n_batches;
    arena *arenas[CACHE_SLOTS];
    size_t arena_bytes[CACHE_SLOTS];
    int n_arenas;
    uint64_t storage_logged_ns; /* when a storage failure was last logged */
    uint64_t storage_unlogged;  /* storage failures since then */
};

static const struct config *cfg; /* ingest_init's, borrowed until ingest_fini */
static struct ingest_thr thr[IOT_MAX];

static enum reject_reason reason_of(enum ingest_status st)
{
    switch (st) {
    case IS_MALFORMED:
        return RJ_MALFORMED;
    case IS_TOO_LARGE:
        return RJ_TOO_LARGE;
    case IS_UNSUPPORTED:
        return RJ_UNSUPPORTED;
    case IS_OVERLOADED:
        return RJ_OVERLOADED;
    case IS_SHUTTING_DOWN:
        return RJ_SHUTTING_DOWN;
    case IS_STORAGE_FAILED:
        return RJ_STORAGE;
    case IS_TIMEOUT:
        return RJ_TIMEOUT;
    default:
        return RJ_INTERNAL;
    }
}

/* ---- per-thread caches: buffers, batches and arenas are reused, so a
 * steady stream of requests runs without malloc. What a cache keeps is
 * charged to the budget while it is kept (it stays resident: its pages
 * were written by the request before), and the request that takes it
 * charges it from then on (held_bytes), like the open-block chunk cache. */

static struct ingest_thr *thr_of(struct iot *t);

static void retry_waiters(evutil_socket_t fd, short what, void *arg);

static struct ingest_thr *thr_of(struct iot *t)
{
    struct ingest_thr *h = &thr[t->idx];
    if (!h->init) {
        struct timeval tv = {(time_t)(cfg->body_timeout_ms / 1000),
                             (suseconds_t)(cfg->body_timeout_ms % 1000) * 1000};
        h->retry_ev = evtimer_new(t->base, retry_waiters, t);
        h->body_tv = event_base_init_common_timeout(t->base, &tv);
        struct timeval wtv = {(time_t)(cfg->receive_rate_window_ms / 1000),
                              (suseconds_t)(cfg->receive_rate_window_ms % 1000) * 1000};
        h->rate_tv = event_base_init_common_timeout(t->base, &wtv);
        h->dec = decomp_new(); /* or at the first compressed body */
        h->init = true;
    }
    return h;
}

/* |kind|: 0 buffers, 1 batches and arenas (io_stats.cache_bytes). */
static void cache_charge(struct iot *t, int kind, size_t n)
{
    adm_charge(n);
    t->stats.cache_bytes[kind] += n;
}

static void cache_uncharge(struct iot *t, int kind, size_t n)
{
    adm_uncharge(n);
    t->stats.cache_bytes[kind] -= n;
}

static void buf_release(struct iot *t, struct ingest_thr *h, struct buf *b)
{
    if (b->p != NULL && b->cap <= CACHE_MAX_BYTES && h->n_bufs < CACHE_SLOTS) {
        h->bufs[h->n_bufs++] = (struct buf){b->p, 0, b->cap};
        cache_charge(t, 0, b->cap);
    } else {
        free(b->p);
    }
    *b = (struct buf){NULL, 0, 0};
}

static void charge_committed(struct ingest_req *r, uint64_t total);
static uint64_t held_bytes(const struct ingest_req *r);

/* Takes a cached buffer into |b| (if it has none), its charge moving to |r|. */
static void buf_acquire(struct ingest_req *r, struct ingest_thr *h, struct buf *b)
{
    if (b->p == NULL && h->n_bufs > 0) {
        *b = h->bufs[--h->n_bufs];
        cache_uncharge(r->t, 0, b->cap);
        charge_committed(r, held_bytes(r));
    }
}

/* Charges what the request holds now beyond what it had charged. */
static bool charge_to(struct ingest_req *r, uint64_t total)
{
    if (total <= r->charged) {
        return true;
    }
    if (!adm_try_charge(total - r->charged)) {
        return false;
    }
    r->charged = total;
    return true;
}

/*
 * The same for memory an admitted request cannot do without: its gunzipped
 * copy and decoded batch, bounded by --max-request-bytes and the decoder's
 * expansion cap. Admission already reserved an estimate of it; refusing the
 * rest with a 503 after the body was read and decoded would waste that
 * work, so a small overdraft of the budget is taken instead.
 */
static void charge_committed(struct ingest_req *r, uint64_t total)
{
    if (total > r->charged) {
        adm_charge(total - r->charged);
        r->charged = total;
    }
}

static uint64_t held_bytes(const struct ingest_req *r)
{
    uint64_t n = r->body.cap + r->plain.cap;
    if (r->batch != NULL) {
        n += batch_footprint(r->batch);
    }
    if (r->arena != NULL) {
        n += arena_footprint(r->arena);
    }
    return n;
}

/* Returns everything but the request struct itself. */
static void release(struct ingest_req *r)
{
    struct ingest_thr *h = thr_of(r->t);
    event_del(&r->body_ev);
    event_del(&r->rate_ev);
    if (r->sh != NULL) {
        shard_unreserve(r->sh);
        r->sh = NULL;
    }
    buf_release(r->t, h, &r->body);
    buf_release(r->t, h, &r->plain);
    if (r->batch != NULL) {
        size_t fp = batch_footprint(r->batch);
        if (h->n_batches < CACHE_SLOTS && fp <= CACHE_MAX_BYTES) {
            h->batch_bytes[h->n_batches] = fp;
            h->batches[h->n_batches++] = r->batch;
            cache_charge(r->t, 1, fp);
        } else {
            batch_free(r->batch);
        }
        r->batch = NULL;
    }
    if (r->arena != NULL) {
        arena_reset(r->arena);
        if (h->n_arenas < CACHE_SLOTS) {
            size_t fp = arena_footprint(r->arena);
            h->arena_bytes[h->n_arenas] = fp;
            h->arenas[h->n_arenas++] = r->arena;
            cache_charge(r->t, 1, fp);
        } else {
            arena_free(r->arena);
        }
        r->arena = NULL;
    }
    adm_uncharge(r->charged);
    r->charged = 0;
}

/* ---- callbacks, always from the event loop ---- */

static void deliver(struct iot_msg *m)
{
    struct ingest_req *r = (struct ingest_req *)((char *)m - offsetof(struct ingest_req, msg));
    r->cb_pending = false;
    if (r->abandoned) {
        release(r);
        free(r);
        return;
    }
    if (r->state == RQ_ADMITTED) {
        /* The listener reads the body from now on; it has until then. */
        event_add(&r->body_ev, thr_of(r->t)->body_tv);
        if (cfg->min_receive_rate > 0) {
            r->rate_mark = r->wire_bytes;
            event_add(&r->rate_ev, thr_of(r->t)->rate_tv);
        }
    }
    r->cb(r, r->ctx);
}

static void post_cb(struct ingest_req *r)
{
    r->cb_pending = true;
    r->msg.fn = deliver;
    iot_post(r->t, &r->msg);
}

/* Ends the request with a failure: result set, counted, memory returned. */
static void vset_failed(struct ingest_req *r, enum ingest_status st, const char *fmt, va_list ap)
{
    r->res.status = st;
    r->res.retry_after_s = st == IS_STORAGE_FAILED                           ? STORAGE_RETRY_AFTER_S
                           : (st == IS_OVERLOADED || st == IS_SHUTTING_DOWN) ? RETRY_AFTER_S
                                                                             : 0;
    vsnprintf(r->res.message, sizeof(r->res.message), fmt, ap);
    r->t->stats.rejections[reason_of(st)]++;
    r->state = RQ_DONE;
    release(r);
}

/* The same, answered by the listener from the return code (no callback). */
static void set_failed(struct ingest_req *r, enum ingest_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void set_failed(struct ingest_req *r, enum ingest_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_failed(r, st, fmt, ap);
    va_end(ap);
}

/* The same, reported through the callback. */
static void fail(struct ingest_req *r, enum ingest_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void fail(struct ingest_req *r, enum ingest_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset_failed(r, st, fmt, ap);
    va_end(ap);
    post_cb(r);
}

/* ---- admission ---- */

static bool try_admit(struct ingest_req *r)
{
    /* Reserve what the first ADMIT_AHEAD body bytes will hold at their peak,
     * not just the bytes: the decoded batch is about twice the body. The
     * rest is charged as it arrives (ingest_body_append), never on the
     * strength of a declared size alone. */
    size_t ahead = ADMIT_AHEAD;
    if (r->expected >= 0 && (uint64_t)r->expected < ahead) {
        ahead = (size_t)r->expected;
    }
    /* A declared size whose whole charge is at most a WHOLE_DIV-th of the
     * budget is charged whole, here: such a request waits for room before
     * its body is read instead of being admitted and then refused halfway
     * through it (the steps of ingest_body_append) while the sealer holds
     * the memory. A client that declares and sends nothing then pins that
     * much until --receive-rate-window cuts it off; a larger declared size
     * is charged as its bytes arrive (above). */
    if (r->expected > (long)ahead &&
        (uint64_t)r->expected * ADMIT_FACTOR <= adm_budget() / WHOLE_DIV) {
        ahead = (size_t)r->expected;
    }
    uint64_t want = (uint64_t)ahead * ADMIT_FACTOR;
    /* I/O thread i tries shard i (mod the shard count) first: with no more
     * I/O threads than shards (the defaults) no two threads share a shard,
     * so a submit finds its shard idle and drains inline (shard.c) instead
     * of queueing behind another thread's drain for the shard thread. */
    shard *sh = store_reserve(r->sig, (unsigned)r->t->idx);
    if (sh == NULL) {
        return false;
    }
    if (!adm_try_charge(want)) {
        shard_unreserve(sh);
        return false;
    }
    r->charged = want;
    r->body_reserved = ahead;
    r->sh = sh;
    return true;
}

static void waiter_remove(struct ingest_thr *h, struct ingest_req *r)
{
    int g = r->sig - 1;
    if (r->wprev != NULL) {
        r->wprev->wnext = r->wnext;
    } else {
        h->whead[g] = r->wnext;
    }
    if (r->wnext != NULL) {
        r->wnext->wprev = r->wprev;
    } else {
        h->wtail[g] = r->wprev;
    }
    r->wnext = r->wprev = NULL;
}

/* Wakes the waiters at the first queue head's pace, or every RETRY_MS
 * while a head is waiting for room. */
static void arm_retry(struct ingest_thr *h)
{
    uint64_t now = clock_mono_ns();
    uint64_t in = (uint64_t)RETRY_MS * 1000000u;
    bool any = false;
    for (int g = 0; g < SIG_COUNT; g++) {
        const struct ingest_req *r = h->whead[g];
        if (r != NULL) {
            any = true;
            if (r->pace_until > now && r->pace_until - now < in) {
                in = r->pace_until - now;
            }
        }
    }
    /* Never postpone a pending wake-up: arrivals every < RETRY_MS would
     * otherwise keep pushing it out while the head waits for room. */
    if (any && (!evtimer_pending(h->retry_ev, NULL) || now + in < h->retry_at)) {
        struct timeval tv = {(time_t)(in / 1000000000u), (suseconds_t)(in % 1000000000u / 1000)};
        h->retry_at = now + in;
        evtimer_add(h->retry_ev, &tv);
    }
}

/* One waiter: admitted if there is room and nobody before it is still
 * blocked; refused once its wait ran out. */
static void retry_one(struct iot *t, struct ingest_thr *h, struct ingest_req *r, uint64_t now,
                      uint64_t wait_ns, bool *blocked)
{
    if (!*blocked && now < r->pace_until) {
        *blocked = true; /* paced: its turn comes at pace_until */
        return;
    }
    if (!*blocked && try_admit(r)) {
        waiter_remove(h, r);
        if (r->waited) {
            t->stats.admit_wait_ns += now - r->wait_start_ns;
        }
        r->t_admitted = now;
        r->state = RQ_ADMITTED;
        r->res.status = IS_ADMITTED;
        post_cb(r);
        return;
    }
    *blocked = true; /* nobody overtakes an earlier waiter */
    if (!r->waited && now >= r->pace_until) {
        /* Its pace is over but there is no room: from now on a wait. */
        r->waited = true;
        r->wait_start_ns = now;
        t->stats.admit_waits++;
    }
    if ((r->waited && now - r->wait_start_ns >= wait_ns) || iot_stopping()) {
        waiter_remove(h, r);
        if (r->waited) {
            t->stats.admit_wait_ns += now - r->wait_start_ns;
        }
        t->stats.shed++;
        fail(r, IS_OVERLOADED,
             "server busy: %s queue or memory budget stayed full for %d ms; retry later",
             signal_name(r->sig), cfg->admit_wait_ms);
    }
}

/* Admits waiters in arrival order while room lasts; refuses the expired. */
static void retry_waiters(evutil_socket_t fd, short what, void *arg)
{
    struct iot *t = arg;
    struct ingest_thr *h = thr_of(t);
    uint64_t now = clock_mono_ns();
    uint64_t wait_ns = (uint64_t)cfg->admit_wait_ms * 1000000u;
    (void)fd, (void)what;

    for (int g = 0; g < SIG_COUNT; g++) {
        bool blocked = false;
        for (struct ingest_req *r = h->whead[g], *next; r != NULL; r = next) {
            next = r->wnext;
            retry_one(t, h, r, now, wait_ns, &blocked);
        }
    }
    arm_retry(h);
}

/* The body did not all arrive within --body-timeout of admission. */
static void body_expired(evutil_socket_t fd, short what, void *arg)
{
    struct ingest_req *r = arg;
    (void)fd, (void)what;
    if (r->state != RQ_ADMITTED || r->cb_pending) {
        return; /* cannot happen: the deadline is armed only then, and removed after */
    }
    fail(r, IS_TIMEOUT, "the request body did not arrive within %llu ms of admission",
         (unsigned long long)cfg->body_timeout_ms);
}

/* A --receive-rate-window ended: a body that arrived slower than
 * --min-receive-rate over it is cut off (a trickling client must not hold
 * a queue slot and a charge for the whole --body-timeout); otherwise the
 * next window begins. */
static void rate_check(evutil_socket_t fd, short what, void *arg)
{
    struct ingest_req *r = arg;
    (void)fd, (void)what;
    if (r->state != RQ_ADMITTED || r->cb_pending) {
        return; /* cannot happen: armed only then, and removed after */
    }
    uint64_t got = r->wire_bytes - r->rate_mark;
    uint64_t need = cfg->min_receive_rate * cfg->receive_rate_window_ms / 1000;
    if (got < need) {
        fail(r, IS_TIMEOUT,
             "the request body arrived too slowly: %llu bytes in %llu ms, below the minimum "
             "of %llu bytes a second",
             (unsigned long long)got, (unsigned long long)cfg->receive_rate_window_ms,
             (unsigned long long)cfg->min_receive_rate);
        return;
    }
    r->rate_mark = r->wire_bytes;
    event_add(&r->rate_ev, thr_of(r->t)->rate_tv);
}

struct ingest_req *ingest_req_new(struct iot *t, enum signal s, enum transport tr, ingest_cb cb,
                                  void *ctx)
{
    struct ingest_req *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return NULL;
    }
    r->t = t;
    r->sig = s;
    r->tr = tr;
    r->cb = cb;
    r->ctx = ctx;
    r->expected = -1;
    evtimer_assign(&r->body_ev, t->base, body_expired, r);
    evtimer_assign(&r->rate_ev, t->base, rate_check, r);
    return r;
}

void ingest_admit(struct ingest_req *r, long expected_bytes)
{
    struct ingest_thr *h = thr_of(r->t);
    if (iot_stopping()) {
        fail(r, IS_SHUTTING_DOWN, "server is shutting down; retry later");
        return;
    }
    if (expected_bytes > 0 && (uint64_t)expected_bytes > cfg->max_request_bytes) {
        fail(r, IS_TOO_LARGE, "request body of %ld bytes exceeds the limit of %llu bytes",
             expected_bytes, (unsigned long long)cfg->max_request_bytes);
        return;
    }
    r->expected = expected_bytes;
    r->t_new = clock_mono_ns();
    int g = r->sig - 1;
    /* Under --admit-wait 0 nobody waits, so nobody is paced either. */
    uint64_t pace = cfg->admit_wait_ms > 0 ? adm_pace_ns() : 0;
    if (pace > (uint64_t)cfg->admit_wait_ms * 1000000u) {
        pace = (uint64_t)cfg->admit_wait_ms * 1000000u;
    }
    if (pace == 0 && h->whead[g] == NULL && try_admit(r)) {
        r->t_admitted = r->t_new;
        r->state = RQ_ADMITTED;
        r->res.status = IS_ADMITTED;
        post_cb(r);
        return;
    }
    if (cfg->admit_wait_ms == 0) {
        r->t->stats.shed++;
        fail(r, IS_OVERLOADED, "server busy: %s queue or memory budget full; retry later",
             signal_name(r->sig));
        return;
    }
    r->state = RQ_WAITING;
    r->wait_start_ns = clock_mono_ns();
    if (pace > 0) {
        /* Paced: it waits |pace| before trying, behind anyone queued first. */
        r->pace_until = r->t_new + pace;
        r->t->stats.paced++;
        r->t->stats.paced_ns += pace;
    } else {
        r->waited = true;
        r->t->stats.admit_waits++;
    }
    r->wprev = h->wtail[g];
    if (h->wtail[g] != NULL) {
        h->wtail[g]->wnext = r;
    } else {
        h->whead[g] = r;
    }
    h->wtail[g] = r;
    arm_retry(h);
}

/* ---- body ---- */

int ingest_body_append(struct ingest_req *r, const void *p, size_t n)
{
    struct ingest_thr *h = thr_of(r->t);
    size_t need = r->body.len + n;

    if (r->state != RQ_ADMITTED) {
        return -EINVAL;
    }
    r->wire_bytes += n;
    if (need > cfg->max_request_bytes) {
        set_failed(r, IS_TOO_LARGE, "request body exceeds the limit of %llu bytes",
                   (unsigned long long)cfg->max_request_bytes);
        return -E2BIG;
    }
    if (need > r->body_reserved) {
        /* The next step: double what is covered, at least |need|, never past
         * the declared size (unless the body runs past it) or the cap. */
        size_t step = r->body_reserved * 2;
        if (step < BODY_MIN) {
            step = BODY_MIN;
        }
        if (step < need) {
            step = need;
        }
        if (r->expected >= 0 && step > (size_t)r->expected) {
            step = (size_t)r->expected > need ? (size_t)r->expected : need;
        }
        if (step > cfg->max_request_bytes) {
            step = cfg->max_request_bytes;
        }
        uint64_t total = (uint64_t)step * ADMIT_FACTOR;
        if (total < held_bytes(r)) {
            total = held_bytes(r);
        }
        if (!charge_to(r, total)) {
            set_failed(r, IS_OVERLOADED, "server memory budget is full; retry later");
            return -ENOBUFS;
        }
        r->body_reserved = step;
    }
    if (need > r->body.cap) {
        buf_acquire(r, h, &r->body);
    }
    if (need > r->body.cap) {
        size_t cap = r->body_reserved;
        if (!charge_to(r, held_bytes(r) - r->body.cap + cap)) {
            set_failed(r, IS_OVERLOADED, "server memory budget is full; retry later");
            return -ENOBUFS;
        }
        uint8_t *np = realloc(r->body.p, cap);
        if (np == NULL) {
            set_failed(r, IS_OVERLOADED, "out of memory; retry later");
            return -ENOBUFS;
        }
        r->body.p = np;
        r->body.cap = cap;
    }
    memcpy(r->body.p + r->body.len, p, n);
    r->body.len = need;
    return 0;
}

/* ---- finish: gunzip, decode, submit ---- */

static void job_done(struct shard_job *j);

/*
 * The shard could not make the export durable. Everything the shard hands
 * back failed on storage (the WAL's write or fdatasync, or under --ack seal
 * the seal: ENOSPC, EDQUOT, EIO, EMFILE, EROFS...), which may pass, so the
 * answer is 503 + Retry-After / UNAVAILABLE: an OTLP exporter drops data on
 * a 500 but retries a 503. Two exceptions: a frame the WAL can never take
 * (-E2BIG, above WAL_FRAME_MAX) is 413, and -ECANCELED (the shard stopped
 * first) is a shutdown refusal.
 */
static void storage_failed(struct ingest_req *r, int rc)
{
    struct ingest_thr *h = thr_of(r->t);
    const char *what =
        cfg->ack == SHARD_ACK_SEAL ? "seal the block holding" : "write the write-ahead log of";
    r->res.records = 0;
    r->res.rejected = 0;
    if (rc == -E2BIG) {
        set_failed(r, IS_TOO_LARGE, "the %s export is larger than a WAL frame may be (%u bytes)",
                   signal_name(r->sig), WAL_FRAME_MAX);
        return;
    }
    if (rc == -ECANCELED) {
        set_failed(r, IS_SHUTTING_DOWN, "server is shutting down; retry later");
        return;
    }
    if (rc == -ENOSPC && diskfree_low()) {
        /* Refused by --min-free-bytes before anything was written; the
         * transition is logged once (event=disk_low), not per export. */
        set_failed(r, IS_STORAGE_FAILED,
                   "storage unavailable: the data directory's disk has less free space than "
                   "--min-free-bytes, so the %s export was not written; retry later",
                   signal_name(r->sig));
        return;
    }
    set_failed(r, IS_STORAGE_FAILED,
               "storage unavailable: could not %s the %s export: %s; retry later", what,
               signal_name(r->sig), strerror(-rc));
    uint64_t now = clock_mono_ns();
    h->storage_unlogged++;
    if (h->storage_logged_ns == 0 || now - h->storage_logged_ns >= STORAGE_LOG_EVERY_NS) {
        log_error("ingest",
                  "event=storage_failed signal=%s ack=%s error=\"%s\" refused=%llu "
                  "msg=\"exports are answered 503 / UNAVAILABLE with a retry delay until "
                  "storage recovers\"",
                  signal_name(r->sig),
                  cfg->ack == SHARD_ACK_SEAL    ? "seal"
                  : cfg->ack == SHARD_ACK_FSYNC ? "fsync"
                                                : "wal",
                  strerror(-rc), (unsigned long long)h->storage_unlogged);
        h->storage_logged_ns = now;
        h->storage_unlogged = 0;
    }
}

/* An acknowledged export's phases (enum ack_phase). An empty export
 * (no shard) counts its decode up to the ack and no shard time. */
static void count_phases(const struct ingest_req *r, struct io_stats *st)
{
    uint64_t now = clock_mono_ns();
    uint64_t sub = r->t_submit != 0 ? r->t_submit : r->t_done;
    lathist_add(&st->phase[PH_ADMIT], r->t_admitted - r->t_new);
    lathist_add(&st->phase[PH_BODY], r->t_finish - r->t_admitted);
    lathist_add(&st->phase[PH_DECODE], sub - r->t_finish);
    lathist_add(&st->phase[PH_SHARD], r->t_done - sub);
    lathist_add(&st->phase[PH_REPLY], now - r->t_done);
    lathist_add(&st->phase[PH_TOTAL], now - r->t_new);
}

static void completed(struct iot_msg *m)
{
    struct ingest_req *r = (struct ingest_req *)((char *)m - offsetof(struct ingest_req, msg));
    struct io_stats *st = &r->t->stats;
    int si = r->sig - 1;

    if (r->job.result == 0) {
        r->res.status = IS_OK;
        st->requests[si][r->tr]++;
        st->records[si][r->tr] += r->res.records;
        st->bytes[si][r->tr] += r->wire_bytes;
        st->rejected_records[si] += r->res.rejected;
        count_phases(r, st);
    } else {
        storage_failed(r, r->job.result);
    }
    r->state = RQ_DONE;
    release(r);
    r->cb_pending = true;
    deliver(m);
}

static void job_done(struct shard_job *j)
{
    struct ingest_req *r = (struct ingest_req *)((char *)j - offsetof(struct ingest_req, job));
    r->t_done = clock_mono_ns();
    r->cb_pending = true;
    r->msg.fn = completed;
    iot_post(r->t, &r->msg);
}

/* decomp's grow(): r->plain to |cap| bytes, charged first (committed: the
 * body is in, so the request is not refused for it). */
static int plain_grow(struct decomp_out *o, size_t cap, void *arg)
{
    struct ingest_req *r = arg;
    charge_committed(r, held_bytes(r) - r->plain.cap + cap);
    uint8_t *np = realloc(r->plain.p, cap);
    if (np == NULL) {
        return -ENOBUFS;
    }
    r->plain.p = o->p = np;
    r->plain.cap = o->cap = cap;
    return 0;
}

/*
 * The body's gzip members or zstd frames into r->plain, never past
 * --max-request-bytes (a bomb costs at most the cap); bytes after the last
 * member or frame are refused (libdeflate would silently ignore them:
 * LIBS.md 6). 0; -E2BIG; -ENOBUFS; -EBADMSG for anything else.
 */
static int inflate_body(struct ingest_req *r, struct ingest_thr *h, enum body_coding c)
{
    if (h->dec == NULL && (h->dec = decomp_new()) == NULL) {
        return -ENOBUFS;
    }
    buf_acquire(r, h, &r->plain);
    struct decomp_out o = {r->plain.p, 0, r->plain.cap, plain_grow, r};
    int rc = decomp_all(h->dec, c == BODY_ZSTD ? DECOMP_ZSTD : DECOMP_GZIP, r->body.p, r->body.len,
                        cfg->max_request_bytes, &o);
    r->plain.len = o.len;
    return rc == -ENOMEM ? -ENOBUFS : rc;
}

static int decode(struct ingest_req *r, struct ingest_thr *h, enum otlp_fmt f, const uint8_t *p,
                  size_t n, char *err, size_t errlen)
{
    if (r->batch == NULL && h->n_batches > 0) {
        r->batch = h->batches[--h->n_batches];
        cache_uncharge(r->t, 1, h->batch_bytes[h->n_batches]);
    } else if (r->batch == NULL && (r->batch = batch_new(r->sig)) == NULL) {
        return -ENOMEM;
    }
    batch_reset(r->batch, r->sig);
    if (f == OTLP_PROTOBUF) {
        return pbdec_decode(r->sig, p, n, r->batch, err, errlen);
    }
    if (r->arena == NULL && h->n_arenas > 0) {
        r->arena = h->arenas[--h->n_arenas];
        cache_uncharge(r->t, 1, h->arena_bytes[h->n_arenas]);
    } else if (r->arena == NULL && (r->arena = arena_new(0)) == NULL) {
        return -ENOMEM;
    }
    /* Bound what a hostile JSON body can make the decoder allocate. */
    arena_set_limit(r->arena, 8 * n + (1u << 20));
    return jsondec_decode(r->sig, (const char *)p, n, r->arena, r->batch, err, errlen);
}

void ingest_finish(struct ingest_req *r, enum otlp_fmt f, enum body_coding coding)
{
    struct ingest_thr *h = thr_of(r->t);
    char err[200];
    const uint8_t *payload;
    size_t payload_len;
    int rc;

    if (r->state != RQ_ADMITTED) {
        return;
    }
    event_del(&r->body_ev); /* the body is all here */
    event_del(&r->rate_ev);
    r->t_finish = clock_mono_ns();
    if (f == OTLP_JSON && r->tr == TR_HTTP) {
        r->tr = TR_HTTP_JSON;
    }
    if (coding != BODY_IDENTITY) {
        bool zstd = coding == BODY_ZSTD;
        rc = inflate_body(r, h, coding);
        if (rc == -E2BIG) {
            fail(r, IS_TOO_LARGE, "request body exceeds the limit of %llu bytes after %s",
                 (unsigned long long)cfg->max_request_bytes, zstd ? "unzstd" : "gunzip");
            return;
        }
        if (rc == -ENOBUFS) {
            fail(r, IS_OVERLOADED, "server memory budget is full; retry later");
            return;
        }
        if (rc < 0) {
            fail(r, IS_MALFORMED, "request body is not valid %s", zstd ? "zstd" : "gzip");
            return;
        }
        payload = r->plain.p;
        payload_len = r->plain.len;
    } else {
        payload = r->body.p;
        payload_len = r->body.len;
    }
    if (payload == NULL) {
        payload = (const uint8_t *)"";
    }

    err[0] = '\0';
    rc = decode(r, h, f, payload, payload_len, err, sizeof(err));
    if (rc == -ENOMEM) {
        fail(r, IS_OVERLOADED, "out of memory decoding the request; retry later");
        return;
    }
    if (rc < 0) {
        fail(r, IS_MALFORMED, "%s", err[0] ? err : "malformed request");
        return;
    }
    charge_committed(r, held_bytes(r));
    promcheck_batch(r->batch);
    r->res.records = r->batch->n_rows;
    r->res.rejected = r->batch->rejected;
    if (r->batch->rejected > 0) {
        snprintf(r->res.message, sizeof(r->res.message), "%s", r->batch->reject_msg);
    }
    if (r->batch->n_rows == 0) {
        /* Nothing to log (an empty export is a success: FACTS.md 9.16). */
        r->job.result = 0;
        shard_unreserve(r->sh);
        r->sh = NULL;
        r->state = RQ_SHARD;
        job_done(&r->job);
        return;
    }
    r->job.batch = r->batch;
    r->job.payload = payload;
    r->job.payload_len = payload_len;
    r->job.plain_len = 0;
    if (coding != BODY_IDENTITY && r->body.len + r->body.len / 8 < payload_len) {
        /* Logged as it arrived: the WAL writes, checksums and replays a
         * quarter of the bytes for the usual export (bench/PERFORMANCE.md,
         * "Compressed bodies in the WAL, zstd, ..."); not when it saved little. */
        r->job.payload = r->body.p;
        r->job.payload_len = r->body.len;
        r->job.plain_len = payload_len;
        r->job.coding = coding == BODY_ZSTD ? WAL_CODING_ZSTD : WAL_CODING_GZIP;
    }
    r->job.format = f;
    r->job.done = job_done;
    r->state = RQ_SHARD;
    shard *sh = r->sh;
    r->sh = NULL; /* the slot now belongs to the job */
    r->t_submit = clock_mono_ns();
    shard_submit_take(sh, &r->job);
}

void ingest_fail(struct ingest_req *r, enum ingest_status st, const char *msg)
{
    if (r->state == RQ_WAITING) {
        waiter_remove(thr_of(r->t), r);
    }
    if (r->state == RQ_SHARD || r->state == RQ_DONE) {
        return;
    }
    fail(r, st, "%s", msg);
}

const struct ingest_result *ingest_result(const struct ingest_req *r)
{
    return &r->res;
}

void ingest_req_free(struct ingest_req *r)
{
    if (r == NULL) {
        return;
    }
    if (r->state == RQ_WAITING) {
        waiter_remove(thr_of(r->t), r);
    }
    if (r->cb_pending || r->state == RQ_SHARD) {
        r->abandoned = true; /* freed when the shard or the pending callback lets go */
        return;
    }
    release(r);
    free(r);
}

void ingest_count_rejection(struct iot *t, enum reject_reason why)
{
    t->stats.rejections[why]++;
}

/* ---- replay and lifecycle ---- */

int ingest_replay_decode(enum signal sig, enum otlp_fmt fmt, const uint8_t *p, size_t n,
                         struct batch *scratch, arena *a)
{
    char err[8];
    if (fmt == OTLP_JSON) {
        return jsondec_decode(sig, (const char *)p, n, a, scratch, err, sizeof(err));
    }
    return pbdec_decode(sig, p, n, scratch, err, sizeof(err));
}

void ingest_init(const struct config *c)
{
    cfg = c;
}

const struct config *ingest_config(void)
{
    return cfg;
}

void ingest_fini(void)
{
    for (int t = 0; t < IOT_MAX; t++) {
        struct ingest_thr *h = &thr[t];
        if (!h->init) {
            continue;
        }
        for (int i = 0; i < h->n_bufs; i++) {
            adm_uncharge(h->bufs[i].cap);
            free(h->bufs[i].p);
        }
        for (int i = 0; i < h->n_batches; i++) {
            adm_uncharge(h->batch_bytes[i]);
            batch_free(h->batches[i]);
        }
        for (int i = 0; i < h->n_arenas; i++) {
            adm_uncharge(h->arena_bytes[i]);
            arena_free(h->arenas[i]);
        }
        event_free(h->retry_ev);
        decomp_free(h->dec);
        memset(h, 0, sizeof(*h));
    }
}
