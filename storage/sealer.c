/*
 * sealer.c - the seal threads (see sealer.h), plus retention once a second.
 *
 * SEALER_THREADS threads take jobs from one FIFO. A job whose shard already
 * has a seal running waits for it: a shard's blocks are published in the
 * order they were handed over, so its sealed watermark never passes a block
 * that is not yet on disk. Different shards seal in parallel, which keeps
 * one shard's fsync from holding up the others.
 */
#include "storage/sealer.h"

#include <errno.h>
#include <stdint.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/clock.h"
#include "storage/diskfree.h"
#include "storage/oblock.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct seal_job *head, *tail;
#define SEALER_THREADS 2
#define SEALER_NICE 10 /* the seal threads' nice value (sealer_main) */
static bool stopping;
static int n_started;
static pthread_t threads[SEALER_THREADS];
static struct busy {
    const void *owner;
} busy[SEALER_THREADS]; /* shards with a seal running, under |lock| */
static struct sealer_stats stats;
static uint64_t ret_age_ns, ret_bytes;
static uint64_t give_up_ns;                     /* CLOCK_MONOTONIC; 0: retry until sealer_stop */
static sealer_failure_fn failure_hook;          /* under |lock| */
static bool background;                         /* sealer_background() was called; under |lock| */
static int test_delay_ms;                       /* sealer_test_delay */
static _Atomic int zlevel = BLK_HOT_ZSTD_LEVEL; /* sealer_set_zstd_level */

void sealer_set_zstd_level(int zstd_level)
{
    atomic_store_explicit(&zlevel, zstd_level, memory_order_relaxed);
}

/* Shards whose seal failed for good (at shutdown), under |lock|. */
#define FAILED_MAX 256
static const void *failed[FAILED_MAX];
static int n_failed;

static bool owner_failed(const void *owner)
{
    for (int i = 0; i < n_failed; i++) {
        if (failed[i] == owner) {
            return true;
        }
    }
    return false;
}

/* One attempt. On failure |f| says which step failed and why. */
static int write_and_publish(struct seal_job *j, struct seal_failure *f)
{
    blk *b = NULL;
    /* blk_write charges its scratch to the budget (block.h). */
    const oblock *ob = catalog_open_block(j->h);
    f->signal = oblock_signal(ob);
    f->path[0] = '\0';
    f->detail[0] = '\0';
    f->step = "write";
    int zl = atomic_load_explicit(&zlevel, memory_order_relaxed);
    struct blk_wopts o = blk_hot_wopts(zl, f->signal);
    int rc =
        blk_write_ex(j->dir, ob, j->rows, &j->meta, zl > 0 ? &o : NULL, f->path, sizeof(f->path));
    if (rc == 0) {
        f->step = "open";
        /* Read back: the header, footer and the root's CRC; the root is
         * decoded by its first reader (a zstd root inflated here would be
         * dropped again below). */
        rc = blk_open_ex(f->path, BLK_OPEN_DEFER_ROOT, &b, f->detail, sizeof(f->detail));
    }
    if (rc == 0) {
        /* Read back and verified; until a query reads it the block need not
         * keep its decoded root table on the heap (block.h). */
        blk_drop_tables(b);
        f->step = "publish";
        rc = catalog_publish(j->h, b, f->path);
        if (rc < 0) {
            blk_unref(b);
        }
    }
    if (rc < 0 && f->path[0] == '\0') {
        snprintf(f->path, sizeof(f->path), "%s", j->dir);
    }
    return rc;
}

/* Past the shutdown deadline (sealer_give_up_at), or stopping? Under |lock|. */
static bool do_giving_up(void)
{
    return stopping || (give_up_ns != 0 && clock_mono_ns() >= give_up_ns);
}

/*
 * A failed seal (disk full, I/O error, no fd) is retried with a growing
 * pause (1, 2, 4, 8, 16, then every 30 s) until it succeeds: later blocks
 * of the same shard wait behind it, because publishing one would move the
 * shard's watermark past rows that are on no disk but the WAL. Meanwhile
 * the open blocks hold memory and admission pushes back. Every failed
 * attempt is reported to the failure hook. Only at shutdown does the
 * sealer give up: once sealer_give_up_at's deadline has passed (or
 * sealer_stop began) a failed seal is not retried, the shard is marked
 * failed and none of its later blocks is published either, so no
 * watermark passes the failed block and the WAL keeps its rows.
 */
static void seal_one(struct seal_job *j)
{
    uint64_t t0 = clock_mono_ns();
    int rc;
    if (test_delay_ms > 0) {
        struct timespec ts = {test_delay_ms / 1000, (long)(test_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    for (unsigned attempt = 1;; attempt++) {
        struct seal_failure f = {.shard = j->meta.shard,
                                 .seal_id = j->meta.seal_id,
                                 .rows = j->rows,
                                 .attempt = attempt};
        pthread_mutex_lock(&lock);
        bool give_up = owner_failed(j->owner);
        pthread_mutex_unlock(&lock);
        if (give_up) {
            rc = -ECANCELED;
            break;
        }
        rc = write_and_publish(j, &f);
        if (rc == 0) {
            break;
        }
        f.error = rc;
        pthread_mutex_lock(&lock);
        stats.seal_failures++;
        bool last = do_giving_up();
        if (last && n_failed < FAILED_MAX) {
            failed[n_failed++] = j->owner;
        }
        sealer_failure_fn hook = failure_hook;
        pthread_mutex_unlock(&lock);
        unsigned pause_s = attempt <= 5 ? 1u << (attempt - 1) : 30;
        f.retry_in_s = last ? -1 : (int)pause_s;
        diskfree_kick(); /* a seal that failed may have found the disk full */
        if (hook != NULL) {
            hook(&f);
        }
        if (last) {
            break;
        }
        /* Sleep the pause, but wake for sealer_give_up_at / sealer_stop. */
        uint64_t until = clock_mono_ns() + (uint64_t)pause_s * 1000000000u;
        pthread_mutex_lock(&lock);
        while (!stopping && clock_mono_ns() < until &&
               (give_up_ns == 0 || clock_mono_ns() < give_up_ns)) {
            uint64_t wake_at = until;
            if (give_up_ns != 0 && give_up_ns < wake_at) {
                wake_at = give_up_ns;
            }
            struct timespec dl = clock_after(CLOCK_REALTIME, wake_at - clock_mono_ns());
            pthread_cond_timedwait(&wake, &lock, &dl);
        }
        pthread_mutex_unlock(&lock);
    }
    pthread_mutex_lock(&lock);
    if (rc == 0) {
        stats.seals++;
        stats.rows_sealed += j->rows;
    } else {
        stats.seals_abandoned++;
    }
    stats.seal_ns += clock_mono_ns() - t0;
    pthread_mutex_unlock(&lock);
    j->sealed(j, rc);
}

static bool owner_busy(const void *owner)
{
    for (int i = 0; i < SEALER_THREADS; i++) {
        if (busy[i].owner == owner) {
            return true;
        }
    }
    return false;
}

/* Under |lock|: unlinks the first job whose shard has no seal running. */
static struct seal_job *take_job(void)
{
    for (struct seal_job **pp = &head, *prev = NULL; *pp != NULL; prev = *pp, pp = &(*pp)->next) {
        struct seal_job *j = *pp;
        if (!owner_busy(j->owner)) {
            *pp = j->next;
            if (tail == j) {
                tail = prev;
            }
            return j;
        }
    }
    return NULL;
}

static void *sealer_main(void *arg)
{
    int me = (int)(intptr_t)arg;
    uint64_t last_retain = 0;
    pthread_setname_np(pthread_self(), "sealer");
    bool niced = false;
    pthread_mutex_lock(&lock);
    for (;;) {
        if (background && !niced) {
            /* Best effort: an error leaves the thread where it was. */
            setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), SEALER_NICE);
            niced = true;
        }
        struct seal_job *j = take_job();
        if (j == NULL) {
            if (stopping && head == NULL) {
                break;
            }
            struct timespec dl = clock_after(CLOCK_REALTIME, 1000000000u);
            pthread_cond_timedwait(&wake, &lock, &dl);
        } else {
            busy[me].owner = j->owner;
            pthread_mutex_unlock(&lock);
            seal_one(j);
            pthread_mutex_lock(&lock);
            busy[me].owner = NULL;
            pthread_cond_broadcast(&wake); /* the shard's next block may go now */
        }
        uint64_t now = clock_mono_ns();
        if (me == 0 && (ret_age_ns != 0 || ret_bytes != 0) && now - last_retain >= 1000000000u) {
            last_retain = now;
            stats.retention_runs++;
            pthread_mutex_unlock(&lock);
            catalog_retain(clock_wall_ns(), ret_age_ns, ret_bytes);
            pthread_mutex_lock(&lock);
        }
    }
    pthread_mutex_unlock(&lock);
    return NULL;
}

int sealer_start(uint64_t retention_age_ns, uint64_t retention_bytes)
{
    ret_age_ns = retention_age_ns;
    ret_bytes = retention_bytes;
    stopping = false;
    give_up_ns = 0;
    n_failed = 0;
    for (int i = 0; i < SEALER_THREADS; i++) {
        int rc = pthread_create(&threads[i], NULL, sealer_main, (void *)(intptr_t)i);
        if (rc != 0) {
            return -rc;
        }
        n_started = i + 1;
    }
    return 0;
}

void sealer_submit_take(struct seal_job *j)
{
    j->next = NULL;
    pthread_mutex_lock(&lock);
    if (tail != NULL) {
        tail->next = j;
    } else {
        head = j;
    }
    tail = j;
    pthread_mutex_unlock(&lock);
    pthread_cond_broadcast(&wake);
}

void sealer_test_delay(int ms)
{
    test_delay_ms = ms;
}

void sealer_background(void)
{
    pthread_mutex_lock(&lock);
    background = true;
    pthread_mutex_unlock(&lock);
    pthread_cond_broadcast(&wake);
}

void sealer_set_failure_hook(sealer_failure_fn fn)
{
    pthread_mutex_lock(&lock);
    failure_hook = fn;
    pthread_mutex_unlock(&lock);
}

void sealer_give_up_at(uint64_t deadline_ns)
{
    pthread_mutex_lock(&lock);
    give_up_ns = deadline_ns != 0 ? deadline_ns : 1;
    pthread_mutex_unlock(&lock);
    pthread_cond_broadcast(&wake);
}

void sealer_stop(void)
{
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_mutex_unlock(&lock);
    pthread_cond_broadcast(&wake);
    for (int i = 0; i < n_started; i++) {
        pthread_join(threads[i], NULL);
    }
    n_started = 0;
    blk_scratch_release();
}

void sealer_get_stats(struct sealer_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}
