/*
 * shard.c - shard threads (see shard.h).
 *
 * The queue is a mutex-protected singly linked list plus a condition
 * variable (the shard thread has no event loop). The producer signals only
 * when the queue was empty; the shard swaps the whole list out under the
 * lock and works on it unlocked (memcached's thread.c shape). The slot
 * count covers reservations too, so the queue bound holds from admission to
 * completion.
 *
 * Who drains: the WAL, the open block and the counters the shard owns are
 * touched only by the thread that holds |busy| (set under |lock|). A job
 * submitted to an idle shard with an empty queue is drained at once by the
 * submitting thread (RocksDB's write-group leader, with a group of one), so
 * its ack costs no wake-up of the shard thread and no wake-up of the I/O
 * thread afterwards; a job that finds the shard busy queues, and the shard
 * thread drains it. Not under --ack fsync (the I/O thread would wait for
 * the disk's barrier) nor with a test delay. The shard thread keeps the
 * rest: replay, the age-based seal, deleting WAL segments the sealer
 * covered, and every queued job.
 *
 * Sealing: when the open block reaches its target size or age the shard
 * registers a fresh one in the catalog and hands the full one to the sealer,
 * which writes it, publishes it in its place and reports the WAL seq it
 * covers back through |sealed_seq|; the shard then deletes the WAL segments
 * at or below it. The WAL stays bounded by what is unsealed.
 */
#include "storage/shard.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"
#include "storage/adm.h"
#include "storage/catalog.h"
#include "storage/diskfree.h"
#include "storage/oblock.h"
#include "storage/sealer.h"

struct shard {
    struct shard_cfg cfg;
    char wal_dir[512];
    char block_dir[512];
    pthread_t thread;
    bool started;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct shard_job *head, *tail; /* queued, in arrival order */
    uint32_t slots;                /* reserved + queued + being processed */
    bool stopping;
    bool busy;              /* a thread owns the fields below (set by the shard thread at start) */
    bool drain_inline;      /* a submit to an idle shard drains on the submitting thread */
    bool waits_for_busy;    /* the shard thread woke to work and found |busy| held */
    uint64_t due_ns;        /* when the open block is due by age (0: empty), for the shard thread */
    struct shard_stats pub; /* published copy, under |lock| */
    int start_rc;
    uint64_t sealed_seq; /* written by the sealer, under |lock| */
    uint32_t seals_in_flight;

    /* Owned by the thread holding |busy|. */
    wal *wal;
    struct cat_open *cur; /* the open block being appended to */
    uint64_t cur_born_ns; /* when its first row arrived (0: empty) */
    size_t ob_charged;
    struct shard_job *seal_acks, *seal_acks_tail; /* --ack seal: waiting for cur's seal */
    uint64_t released_seq;
    uint64_t next_seal_id;
    uint64_t seals_started;
    struct batch *scratch;
    arena *scratch_arena;
    uint64_t replay_bad_frames;
    uint64_t replay_frames, replay_bytes;
    uint64_t append_failures;
    /* A frame is in the WAL but its rows could not be appended even to a
     * fresh block: every later request is refused, so no sealed block's
     * watermark ever passes that frame and the next boot replays it. */
    bool broken;
};

/* A seal this shard handed to the sealer, with the exports waiting for it
 * (--ack seal): the sealer sees only |job|, so it needs nothing of shards. */
struct shard_seal {
    struct seal_job job; /* first: on_sealed gets &job back */
    struct shard_job *acks;
    size_t charged; /* the block's budget charge, counted as the sealer's (adm_sealing_add) */
};

static oblock *cur_block(shard *s)
{
    return catalog_open_block(s->cur);
}

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

static void drain(shard *s, struct shard_job *list);
static void seal_if_due(shard *s);

/* Gives up |busy|; wakes the shard thread only when it has work or a new
 * deadline (a job queued meanwhile, a stop, WAL segments to delete, an
 * open block that was empty), so an inline drain usually costs no wake. */
static void release_busy(shard *s)
{
    uint64_t due =
        s->cur_born_ns != 0 ? s->cur_born_ns + (uint64_t)s->cfg.block_max_age_ms * 1000000u : 0;
    pthread_mutex_lock(&s->lock);
    bool wake = s->head != NULL || s->stopping || s->sealed_seq > s->released_seq ||
                (due != 0 && s->due_ns == 0) || s->waits_for_busy;
    s->due_ns = due;
    s->busy = false;
    s->pub.replayed = true; /* the shard thread held |busy| from its start through replay */
    pthread_mutex_unlock(&s->lock);
    if (wake) {
        pthread_cond_signal(&s->wake);
    }
}

void shard_submit_take(shard *s, struct shard_job *j)
{
    bool signal;
    j->next = NULL;
    pthread_mutex_lock(&s->lock);
    if (s->drain_inline && !s->busy && s->head == NULL && !s->stopping) {
        s->busy = true;
        pthread_mutex_unlock(&s->lock);
        drain(s, j);
        seal_if_due(s);
        release_busy(s);
        return;
    }
    /* The busy thread looks at the queue before it lets go (release_busy,
     * shard_main), so only an idle shard's thread needs the signal. */
    signal = s->head == NULL && !s->busy;
    if (s->tail != NULL) {
        s->tail->next = j;
    } else {
        s->head = j;
    }
    s->tail = j;
    pthread_mutex_unlock(&s->lock);
    if (signal) {
        pthread_cond_signal(&s->wake);
    }
}

void shard_get_stats(shard *s, struct shard_stats *out)
{
    pthread_mutex_lock(&s->lock);
    *out = s->pub;
    out->queue_depth = s->slots;
    out->sealed_seq = s->sealed_seq;
    pthread_mutex_unlock(&s->lock);
}

/* Keeps the budget charge equal to what the open block holds. */
static void charge_block(shard *s)
{
    size_t now = oblock_bytes(cur_block(s));
    if (now > s->ob_charged) {
        adm_charge(now - s->ob_charged);
    } else {
        adm_uncharge(s->ob_charged - now);
    }
    s->ob_charged = now;
}

static void publish(shard *s)
{
    oblock *ob = cur_block(s);
    pthread_mutex_lock(&s->lock);
    if (s->wal != NULL) {
        s->pub.wal = *wal_stats(s->wal);
    }
    s->pub.replay_bad_frames = s->replay_bad_frames;
    s->pub.append_failures = s->append_failures;
    s->pub.block_rows = oblock_rows(ob);
    s->pub.block_bytes = oblock_bytes(ob);
    s->pub.seals_started = s->seals_started;
    s->pub.replay_frames = s->replay_frames;
    s->pub.replay_bytes = s->replay_bytes;
    s->pub.error = s->start_rc;
    pthread_mutex_unlock(&s->lock);
}

/* Sealer thread: the block is published (rc 0) or could not be (rc < 0). */
static void on_sealed(struct seal_job *j, int rc)
{
    shard *s = j->owner;
    struct shard_seal *ss = (struct shard_seal *)j;
    for (struct shard_job *a = ss->acks, *next; a != NULL; a = next) {
        next = a->next;
        a->result = rc;
        a->done(a);
    }
    /* A seal fails only once the sealer gave up retrying (at shutdown); it
     * then publishes no later block of this shard, so no watermark passes
     * the failed block and its rows stay in the WAL for the next boot. */
    uint64_t seq = j->meta.wal_seq;
    adm_sealing_add(-(int64_t)ss->charged);
    free(ss);
    /* Last touch of |s|: shard_stop waits for seals_in_flight to reach 0
     * under this lock, and the signal is sent before the unlock. */
    pthread_mutex_lock(&s->lock);
    if (rc == 0 && seq > s->sealed_seq) {
        s->sealed_seq = seq;
    }
    s->seals_in_flight--;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
}

/* Swaps in a fresh open block and hands the full one to the sealer. */
static int seal_now(shard *s)
{
    oblock *fresh;
    int rc = oblock_new(s->cfg.signal, &fresh);
    if (rc < 0) {
        return rc;
    }
    struct cat_open *h = catalog_open_add(s->cfg.signal, fresh);
    struct shard_seal *ss = calloc(1, sizeof(*ss));
    if (h == NULL || ss == NULL) {
        if (h != NULL) {
            catalog_open_drop(h);
        } else {
            oblock_free(fresh);
        }
        free(ss);
        return -ENOMEM;
    }
    struct seal_job *j = &ss->job;
    oblock *full = cur_block(s);
    j->h = s->cur;
    j->rows = oblock_rows(full);
    j->meta.shard = (uint32_t)s->cfg.index;
    j->meta.wal_seq = oblock_max_seq(full);
    j->meta.seal_id = s->next_seal_id++;
    snprintf(j->dir, sizeof(j->dir), "%s", s->block_dir);
    ss->acks = s->seal_acks;
    j->sealed = on_sealed;
    j->owner = s;
    catalog_open_set_charged(s->cur, s->ob_charged);
    ss->charged = s->ob_charged;
    adm_sealing_add((int64_t)ss->charged);
    s->ob_charged = 0;
    s->cur = h;
    s->cur_born_ns = 0;
    s->seal_acks = s->seal_acks_tail = NULL;
    s->seals_started++;
    charge_block(s);
    pthread_mutex_lock(&s->lock);
    s->seals_in_flight++;
    pthread_mutex_unlock(&s->lock);
    sealer_submit_take(j);
    return 0;
}

static bool block_due(shard *s, uint64_t now)
{
    oblock *ob = cur_block(s);
    if (oblock_rows(ob) == 0) {
        return false;
    }
    return oblock_bytes(ob) >= s->cfg.block_target ||
           now - s->cur_born_ns >= (uint64_t)s->cfg.block_max_age_ms * 1000000u;
}

/* After a drain, by whoever holds |busy|: the open block to the sealer if
 * it is full or old, and the stats showing the fresh one. */
static void seal_if_due(shard *s)
{
    if (block_due(s, clock_mono_ns()) && seal_now(s) == 0) {
        publish(s);
    }
}

static int replay_frame(void *ctx, uint64_t seq, enum signal sig, enum otlp_fmt fmt,
                        const uint8_t *p, size_t n)
{
    shard *s = ctx;
    s->replay_frames++;
    s->replay_bytes += n;
    if ((s->replay_frames & 255) == 0) { /* progress for the boot log */
        pthread_mutex_lock(&s->lock);
        s->pub.replay_frames = s->replay_frames;
        s->pub.replay_bytes = s->replay_bytes;
        pthread_mutex_unlock(&s->lock);
    }
    batch_reset(s->scratch, s->cfg.signal);
    arena_reset(s->scratch_arena);
    if (sig != s->cfg.signal || s->cfg.decode(sig, fmt, p, n, s->scratch, s->scratch_arena) < 0) {
        s->replay_bad_frames++;
        return 0;
    }
    if (oblock_append(cur_block(s), s->scratch, seq) < 0) {
        return -ENOMEM;
    }
    if (s->cur_born_ns == 0) {
        s->cur_born_ns = clock_mono_ns();
    }
    charge_block(s);
    /* A long WAL replays into several blocks, as the live path would. */
    if (oblock_bytes(cur_block(s)) >= s->cfg.block_target) {
        return seal_now(s) < 0 ? -ENOMEM : 0;
    }
    return 0;
}

/* One drain: log and append every job, one barrier, then hand them back. */
static void drain(shard *s, struct shard_job *list)
{
    bool any_ok = false;
    oblock *ob = cur_block(s);
    if (s->cfg.delay_ms > 0) {
        struct timespec ts = {s->cfg.delay_ms / 1000, (long)(s->cfg.delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (struct shard_job *j = list; j != NULL; j = j->next) {
        uint64_t seq = 0;
        if (s->broken) {
            j->result = -EIO;
            continue;
        }
        /* Below --min-free-bytes: refused before anything is written, so
         * the room left goes to the seals that free WAL space. */
        if (diskfree_low()) {
            diskfree_refused();
            j->result = -ENOSPC;
            continue;
        }
        if (s->cfg.ack != SHARD_ACK_SEAL) {
            int64_t r =
                j->plain_len != 0
                    ? wal_append_coded(s->wal, s->cfg.signal, j->format, j->coding, j->payload,
                                       j->payload_len, j->plain_len)
                    : wal_append(s->wal, s->cfg.signal, j->format, j->payload, j->payload_len);
            if (r < 0) {
                diskfree_kick(); /* a full disk shows at once, not at the next tick */
                j->result = (int)r;
                continue;
            }
            seq = (uint64_t)r;
        }
        j->result = 0;
        any_ok = true;
        if (oblock_append(ob, j->batch, seq) < 0) {
            /* A full block (or no memory): seal it and try a fresh one. */
            s->append_failures++;
            if (seal_now(s) < 0 || oblock_append(ob = cur_block(s), j->batch, seq) < 0) {
                s->broken = true;
                j->result = -EIO;
                continue;
            }
        }
        if (s->cur_born_ns == 0) {
            s->cur_born_ns = clock_mono_ns();
        }
    }
    if (s->cfg.ack == SHARD_ACK_FSYNC && any_ok) {
        int rc = wal_sync(s->wal);
        if (rc < 0) {
            diskfree_kick();
            for (struct shard_job *j = list; j != NULL; j = j->next) {
                j->result = rc;
            }
        }
    }
    charge_block(s);
    /* The stats show these rows before anyone is acked: a client that reads
     * /metrics after its ack sees them counted. */
    publish(s);

    uint32_t n = 0;
    while (list != NULL) {
        struct shard_job *next = list->next;
        n++;
        if (s->cfg.ack == SHARD_ACK_SEAL && list->result == 0) {
            /* Acked by the sealer once this block is published. */
            list->next = NULL;
            if (s->seal_acks_tail != NULL) {
                s->seal_acks_tail->next = list;
            } else {
                s->seal_acks = list;
            }
            s->seal_acks_tail = list;
        } else {
            list->done(list);
        }
        list = next;
    }
    pthread_mutex_lock(&s->lock);
    s->slots -= n;
    pthread_mutex_unlock(&s->lock);
}

/* Deletes WAL segments that published blocks cover. */
static void release_wal(shard *s)
{
    pthread_mutex_lock(&s->lock);
    uint64_t sealed = s->sealed_seq;
    pthread_mutex_unlock(&s->lock);
    if (s->wal != NULL && sealed > s->released_seq) {
        if (wal_release_upto(s->wal, sealed) >= 0) {
            s->released_seq = sealed;
        }
    }
}

static void *shard_main(void *arg)
{
    shard *s = arg;
    char name[16];
    snprintf(name, sizeof(name), "shard-%s-%d", signal_name(s->cfg.signal), s->cfg.index);
    name[15] = '\0';
    pthread_setname_np(pthread_self(), name);

    if (s->cfg.ack != SHARD_ACK_SEAL) {
        sealer_background(); /* nobody's ack waits for a seal */
        int rc = wal_open(s->wal_dir, s->cfg.wal_after, replay_frame, s, &s->wal);
        if (rc < 0) {
            pthread_mutex_lock(&s->lock);
            s->start_rc = rc;
            s->pub.error = rc;
            pthread_mutex_unlock(&s->lock);
            return NULL;
        }
        /* gzip'd frames that did not inflate were skipped as undecodable ones are */
        s->replay_bad_frames += wal_stats(s->wal)->frames_undecodable;
        release_wal(s);
    }
    charge_block(s);
    publish(s);
    release_busy(s);

    for (;;) {
        pthread_mutex_lock(&s->lock);
        for (;;) {
            if (s->busy) { /* an I/O thread is draining: it signals when done */
                s->waits_for_busy = true;
                pthread_cond_wait(&s->wake, &s->lock);
                s->waits_for_busy = false;
                continue;
            }
            if (s->head != NULL || s->stopping || s->sealed_seq > s->released_seq) {
                break;
            }
            /* Sleep until the open block is due by age, or until woken. */
            uint64_t now = clock_mono_ns();
            if (s->due_ns == 0) {
                pthread_cond_wait(&s->wake, &s->lock);
            } else if (s->due_ns > now) {
                struct timespec dl = clock_after(CLOCK_REALTIME, s->due_ns - now);
                pthread_cond_timedwait(&s->wake, &s->lock, &dl);
            } else {
                break;
            }
        }
        struct shard_job *list = s->head;
        bool stop = s->stopping && list == NULL;
        s->head = s->tail = NULL;
        s->busy = true; /* this thread's now (at a stop: for good) */
        pthread_mutex_unlock(&s->lock);
        if (stop) {
            break;
        }
        if (list != NULL) {
            drain(s, list);
        }
        seal_if_due(s);
        release_wal(s);
        publish(s);
        release_busy(s);
    }
    if (s->cfg.ack == SHARD_ACK_SEAL && oblock_rows(cur_block(s)) > 0) {
        seal_now(s); /* every pending ack gets its answer */
    }
    if (s->wal != NULL) {
        wal_sync(s->wal);
    }
    publish(s);
    return NULL;
}

int shard_start(const struct shard_cfg *c, shard **out)
{
    int rc;
    oblock *ob;
    shard *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        return -ENOMEM;
    }
    s->cfg = *c;
    snprintf(s->wal_dir, sizeof(s->wal_dir), "%s", c->wal_dir);
    snprintf(s->block_dir, sizeof(s->block_dir), "%s", c->block_dir);
    s->cfg.wal_dir = s->wal_dir;
    s->cfg.block_dir = s->block_dir;
    s->next_seal_id = c->next_seal_id;
    /* Before the thread starts: seals during replay may raise it. */
    s->sealed_seq = c->wal_after;
    s->released_seq = 0;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    s->busy = true; /* the shard thread's until it has replayed */
    s->drain_inline = c->ack != SHARD_ACK_FSYNC && c->delay_ms == 0;
    s->scratch = batch_new(c->signal);
    s->scratch_arena = arena_new(0);
    if (s->scratch == NULL || s->scratch_arena == NULL) {
        rc = -ENOMEM;
        goto fail_free;
    }
    rc = oblock_new(c->signal, &ob);
    if (rc < 0) {
        goto fail_free;
    }
    s->cur = catalog_open_add(c->signal, ob);
    if (s->cur == NULL) {
        oblock_free(ob);
        rc = -ENOMEM;
        goto fail_free;
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
    catalog_open_drop(s->cur);
fail_free:
    batch_free(s->scratch);
    arena_free(s->scratch_arena);
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
    /* The sealer may still be finishing this shard's blocks. */
    pthread_mutex_lock(&s->lock);
    while (s->seals_in_flight > 0) {
        pthread_cond_wait(&s->wake, &s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    /* Jobs queued after a failed start never ran: hand them back failed. */
    for (struct shard_job *j = s->head, *next; j != NULL; j = next) {
        next = j->next;
        j->result = s->start_rc < 0 ? s->start_rc : -ECANCELED;
        j->done(j);
    }
    /* The open block stays in the catalog (readable until catalog_fini),
     * carrying its budget charge with it. */
    catalog_open_set_charged(s->cur, s->ob_charged);
    wal_close(s->wal);
    batch_free(s->scratch);
    arena_free(s->scratch_arena);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
