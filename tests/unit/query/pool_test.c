#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "query/pool.h"

/* ---- pool ---------------------------------------------------------------- */

struct fan {
    size_t n;
    unsigned *hits; /* one per item */
    pthread_mutex_t lock;
    pthread_t seen[8];
    int n_seen;
};

static void fan_item(void *arg, size_t i)
{
    struct fan *f = arg;
    __atomic_fetch_add(&f->hits[i], 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&f->lock);
    bool known = false;
    for (int k = 0; k < f->n_seen; k++) {
        known = known || pthread_equal(f->seen[k], pthread_self());
    }
    if (!known && f->n_seen < 8) {
        f->seen[f->n_seen++] = pthread_self();
    }
    pthread_mutex_unlock(&f->lock);
}

struct qjob {
    struct qpool_job job;
    size_t items;
    unsigned *hits;
    pthread_mutex_t *lock;
    pthread_cond_t *cv;
    int *done;
};

static void nop_item(void *arg, size_t i)
{
    unsigned *hits = arg;
    __atomic_fetch_add(&hits[i], 1, __ATOMIC_RELAXED);
}

/* A query job that fans out itself (jobs nested inside workers). */
static void job_fn(struct qpool_job *j)
{
    struct qjob *q = (struct qjob *)j;
    qpool_parallel(q->items, nop_item, q->hits);
    pthread_mutex_lock(q->lock);
    (*q->done)++;
    pthread_cond_signal(q->cv);
    pthread_mutex_unlock(q->lock);
}

Test(pool, parallel_runs_every_item_once_and_jobs_fan_out_without_deadlock)
{
    cr_assert_eq(qpool_start(3, 16), 0);
    cr_assert_eq(qpool_start(3, 16), -EALREADY);
    cr_assert_eq(qpool_workers(), 3);

    /* From outside the pool. */
    struct fan f = {.n = 1000};
    f.hits = calloc(f.n, sizeof(unsigned));
    pthread_mutex_init(&f.lock, NULL);
    qpool_parallel(f.n, fan_item, &f);
    for (size_t i = 0; i < f.n; i++) {
        cr_assert_eq(f.hits[i], 1, "item %zu ran %u times", i, f.hits[i]);
    }
    cr_assert_geq(f.n_seen, 1);
    free(f.hits);
    qpool_parallel(0, fan_item, &f); /* nothing to do, returns */

    /* Ten queries at once, each fanning out over 200 items: all finish. */
    enum { NJ = 10, NI = 200 };
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    int done = 0;
    struct qjob jobs[NJ];
    unsigned hits[NJ][NI];
    memset(hits, 0, sizeof(hits));
    for (int k = 0; k < NJ; k++) {
        jobs[k] = (struct qjob){.job.fn = job_fn,
                                .items = NI,
                                .hits = hits[k],
                                .lock = &lock,
                                .cv = &cv,
                                .done = &done};
        cr_assert_eq(qpool_submit(&jobs[k].job), 0);
    }
    pthread_mutex_lock(&lock);
    while (done < NJ) {
        pthread_cond_wait(&cv, &lock);
    }
    pthread_mutex_unlock(&lock);
    for (int k = 0; k < NJ; k++) {
        for (int i = 0; i < NI; i++) {
            cr_assert_eq(hits[k][i], 1);
        }
    }
    struct qpool_stats st;
    qpool_get_stats(&st);
    cr_assert_eq(st.submitted, NJ);
    cr_assert_eq(st.rejected, 0);
    qpool_stop();
    cr_assert_eq(qpool_workers(), 0);
    struct qpool_job j = {.fn = NULL};
    cr_assert_eq(qpool_submit(&j), -ESHUTDOWN);
}

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_open, gate_entered, ran;

static void gate_fn(struct qpool_job *j)
{
    (void)j;
    pthread_mutex_lock(&gate_lock);
    gate_entered++;
    pthread_cond_broadcast(&gate_cv);
    while (!gate_open) {
        pthread_cond_wait(&gate_cv, &gate_lock);
    }
    ran++;
    pthread_mutex_unlock(&gate_lock);
}

Test(pool, a_full_queue_refuses_and_stop_runs_what_is_queued)
{
    cr_assert_eq(qpool_start(1, 2), 0);
    struct qpool_job j[4] = {{.fn = gate_fn}, {.fn = gate_fn}, {.fn = gate_fn}, {.fn = gate_fn}};
    cr_assert_eq(qpool_submit(&j[0]), 0);
    pthread_mutex_lock(&gate_lock);
    while (gate_entered < 1) {
        pthread_cond_wait(&gate_cv, &gate_lock); /* the worker holds j[0] */
    }
    pthread_mutex_unlock(&gate_lock);
    cr_assert_eq(qpool_submit(&j[1]), 0);
    cr_assert_eq(qpool_submit(&j[2]), 0);
    cr_assert_eq(qpool_submit(&j[3]), -EAGAIN);
    struct qpool_stats st;
    qpool_get_stats(&st);
    cr_assert_eq(st.queued, 2);
    cr_assert_eq(st.running, 1);
    cr_assert_eq(st.rejected, 1);
    pthread_mutex_lock(&gate_lock);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_lock);
    qpool_stop();
    cr_assert_eq(ran, 3);
}

static int quick_ran;

static void quick_fn(struct qpool_job *j)
{
    (void)j;
    pthread_mutex_lock(&gate_lock);
    quick_ran++;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_lock);
}

Test(pool, a_reserve_worker_runs_a_queued_job_while_long_ones_hold_every_worker)
{
    cr_assert_eq(qpool_start_reserve(1, 1, 8), 0);
    cr_assert_eq(qpool_workers(), 1); /* reserves are not counted */
    struct qpool_job g = {.fn = gate_fn}, q = {.fn = quick_fn};
    cr_assert_eq(qpool_submit(&g), 0);
    pthread_mutex_lock(&gate_lock);
    while (gate_entered < 1) {
        pthread_cond_wait(&gate_cv, &gate_lock); /* the only worker holds g */
    }
    pthread_mutex_unlock(&gate_lock);
    cr_assert_eq(qpool_submit(&q), 0);
    /* the reserve steps in after the stall time (200 ms), with g still held */
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&gate_lock);
    while (quick_ran == 0) {
        cr_assert_eq(pthread_cond_timedwait(&gate_cv, &gate_lock, &dl), 0, "the quick job waited");
    }
    cr_assert_eq(ran, 0);
    gate_open = 1;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_lock);
    struct qpool_stats st;
    qpool_get_stats(&st);
    cr_assert_eq(st.reserve_runs, 1);
    qpool_stop();
    cr_assert_eq(ran, 1);
}
