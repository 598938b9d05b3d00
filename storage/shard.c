/*
 * shard.c - shard threads (see shard.h).
 *
 * The queue is a mutex-protected singly linked list plus an eventfd-like
 * wake-up (a condition variable here: the shard thread has no event loop).
 * The producer signals only when the queue was empty; the shard swaps the
 * whole list out under the lock and works on it unlocked (memcached's
 * thread.c shape). The slot count covers reservations too, so the queue
 * bound holds from admission to completion.
 */
#include "storage/shard.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "storage/adm.h"
#include "storage/oblock.h"

struct shard {
    struct shard_cfg cfg;
    char wal_dir[512];
    pthread_t thread;
    bool started;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct shard_job *head, *tail; /* queued, in arrival order */
    uint32_t slots;                /* reserved + queued + being processed */
    bool stopping;
    struct shard_stats pub; /* published copy, under |lock| */
    int start_rc;

    /* Owned by the shard thread. */
    wal *wal;
    struct oblock *ob;
    size_t ob_charged;
    struct batch *scratch;
    arena *scratch_arena;
    uint64_t replay_bad_frames;
    uint64_t append_failures;
};

bool shard_reserve(shard *s)
{
    bool ok;
    pthread_mutex_lock(&s->lock);
    ok = !s->stopping && s->slots < (uint32_t)s->cfg.queue_cap;
    if (ok) {
        s->slots++;
    }
    pthread_mutex_unlock(&s->lock);
    return ok;
}

void shard_unreserve(shard *s)
{
    pthread_mutex_lock(&s->lock);
    s->slots--;
    pthread_mutex_unlock(&s->lock);
}

void shard_submit_take(shard *s, struct shard_job *j)
{
    bool was_empty;
    j->next = NULL;
    pthread_mutex_lock(&s->lock);
    was_empty = s->head == NULL;
    if (s->tail != NULL) {
        s->tail->next = j;
    } else {
        s->head = j;
    }
    s->tail = j;
    pthread_mutex_unlock(&s->lock);
    if (was_empty) {
        pthread_cond_signal(&s->wake);
    }
}

void shard_get_stats(shard *s, struct shard_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->pub;
    out->queue_depth = s->slots;
    pthread_mutex_unlock(&s->lock);
}

const struct oblock *shard_oblock(shard *s)
{
    return s->ob;
}

/* Keeps the budget charge equal to what the open block holds. */
static void charge_block(shard *s)
{
    size_t now = oblock_bytes(s->ob);
    if (now > s->ob_charged) {
        adm_charge(now - s->ob_charged);
    } else {
        adm_uncharge(s->ob_charged - now);
    }
    s->ob_charged = now;
}

static void publish(shard *s, bool replayed)
{
    pthread_mutex_lock(&s->lock);
    s->pub.wal = *wal_stats(s->wal);
    s->pub.replay_bad_frames = s->replay_bad_frames;
    s->pub.append_failures = s->append_failures;
    s->pub.block_rows = oblock_rows(s->ob);
    s->pub.block_bytes = oblock_bytes(s->ob);
    s->pub.replayed = replayed;
    s->pub.error = s->start_rc;
    pthread_mutex_unlock(&s->lock);
}

static int replay_frame(void *ctx, uint64_t seq, enum signal sig, enum wal_format fmt,
                        const uint8_t *p, size_t n)
{
    shard *s = ctx;
    batch_reset(s->scratch, s->cfg.signal);
    arena_reset(s->scratch_arena);
    if (sig != s->cfg.signal || s->cfg.decode(sig, fmt, p, n, s->scratch, s->scratch_arena) < 0) {
        s->replay_bad_frames++;
        return 0;
    }
    if (oblock_append(s->ob, s->scratch, seq) < 0) {
        return -ENOMEM;
    }
    return 0;
}

/* One drain: log and append every job, one barrier, then hand them back. */
static void drain(shard *s, struct shard_job *list)
{
    bool any_ok = false;
    if (s->cfg.delay_ms > 0) {
        struct timespec ts = {s->cfg.delay_ms / 1000, (long)(s->cfg.delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (struct shard_job *j = list; j != NULL; j = j->next) {
        int64_t seq = wal_append(s->wal, s->cfg.signal, j->format, j->payload, j->payload_len);
        if (seq < 0) {
            j->result = (int)seq;
            continue;
        }
        j->result = 0;
        any_ok = true;
        if (oblock_append(s->ob, j->batch, (uint64_t)seq) < 0) {
            /* Logged but not visible until a replay: report it, count it. */
            s->append_failures++;
            j->result = -ENOMEM;
        }
    }
    if (s->cfg.fsync && any_ok) {
        int rc = wal_sync(s->wal);
        if (rc < 0) {
            for (struct shard_job *j = list; j != NULL; j = j->next) {
                j->result = rc;
            }
        }
    }
    charge_block(s);
    publish(s, true);

    uint32_t n = 0;
    while (list != NULL) {
        struct shard_job *next = list->next;
        list->done(list);
        list = next;
        n++;
    }
    pthread_mutex_lock(&s->lock);
    s->slots -= n;
    pthread_mutex_unlock(&s->lock);
}

static void *shard_main(void *arg)
{
    shard *s = arg;
    char name[16];
    snprintf(name, sizeof(name), "shard-%s-%d", signal_name(s->cfg.signal), s->cfg.index);
    name[15] = '\0';
    pthread_setname_np(pthread_self(), name);

    int rc = wal_open(s->wal_dir, 0, replay_frame, s, &s->wal);
    if (rc < 0) {
        pthread_mutex_lock(&s->lock);
        s->start_rc = rc;
        s->pub.error = rc;
        pthread_mutex_unlock(&s->lock);
        return NULL;
    }
    charge_block(s);
    publish(s, true);

    for (;;) {
        pthread_mutex_lock(&s->lock);
        while (s->head == NULL && !s->stopping) {
            pthread_cond_wait(&s->wake, &s->lock);
        }
        struct shard_job *list = s->head;
        bool stop = s->stopping && list == NULL;
        s->head = s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        if (stop) {
            break;
        }
        drain(s, list);
    }
    wal_sync(s->wal);
    publish(s, true);
    return NULL;
}

int shard_start(const struct shard_cfg *c, shard **out)
{
    int rc;
    shard *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->cfg = *c;
    snprintf(s->wal_dir, sizeof(s->wal_dir), "%s", c->wal_dir);
    s->cfg.wal_dir = s->wal_dir;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->scratch = batch_new(c->signal);
    s->scratch_arena = arena_new(0);
    if (s->scratch == NULL || s->scratch_arena == NULL) {
        rc = -ENOMEM;
        goto fail_free;
    }
    rc = oblock_new(c->signal, &s->ob);
    if (rc < 0) {
        goto fail_batch;
    }
    rc = pthread_create(&s->thread, NULL, shard_main, s);
    if (rc != 0) {
        rc = -rc;
        goto fail_block;
    }
    s->started = true;
    *out = s;
    return 0;

fail_block:
    oblock_free(s->ob);
fail_batch:
    batch_free(s->scratch);
    arena_free(s->scratch_arena);
fail_free:
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return rc;
}

void shard_stop(shard *s)
{
    if (s == NULL) {
        return;
    }
    pthread_mutex_lock(&s->lock);
    s->stopping = true;
    pthread_mutex_unlock(&s->lock);
    pthread_cond_signal(&s->wake);
    if (s->started) {
        pthread_join(s->thread, NULL);
    }
    /* Jobs queued after a failed start never ran: hand them back failed. */
    for (struct shard_job *j = s->head, *next; j != NULL; j = next) {
        next = j->next;
        j->result = s->start_rc < 0 ? s->start_rc : -ECANCELED;
        j->done(j);
    }
    adm_uncharge(s->ob_charged);
    wal_close(s->wal);
    oblock_free(s->ob);
    batch_free(s->scratch);
    arena_free(s->scratch_arena);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
