/*
 * pool.c - the query worker pool (see pool.h).
 *
 * One mutex guards two lists: helpers (qpool_parallel fan-out, taken
 * first) and jobs (queries, FIFO, bounded). Workers sleep on |work_cv|;
 * a fan-out caller waits on |done_cv| for the helpers that picked up its
 * group. Helper structs live on the caller's stack: before it returns it
 * unlinks those no worker took yet and waits for those that are running,
 * so none outlives the call.
 *
 * FAIRNESS
 *   A query runs to its end on the worker that took it (nothing preempts
 *   it), so a few long queries could hold every worker while short ones
 *   wait. Two things keep the queue moving:
 *   - a helper leaves a fan-out between two items as soon as a query job
 *     waits: idle workers lend themselves to a running query only while
 *     nobody else needs them (the caller finishes the items alone);
 *   - reserve workers (qpool_start_reserve) sleep on |reserve_cv| and take
 *     a job only when the pool is stalled: jobs have waited QPOOL_STALL_MS
 *     with no worker idle and no job started meanwhile (|starts| did not
 *     move). Each reserve that steps in is itself a start, so the next one
 *     waits another QPOOL_STALL_MS: under an ordinary busy load (jobs keep
 *     starting) they stay asleep and the pool keeps one worker per core.
 */
#include "query/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "lib/clock.h"

/* Helpers per fan-out at most (more workers than this just stay idle). */
#define QPOOL_MAX_HELPERS 64
/* Jobs waiting this long with no job started: a reserve worker takes one. */
#define QPOOL_STALL_MS 200

struct par_group {
    void (*fn)(void *arg, size_t i);
    void *arg;
    size_t n;
    size_t next; /* atomic: next item to hand out */
    int running; /* helpers inside run_items (pool lock) */
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work_cv;
    pthread_cond_t done_cv;
    pthread_cond_t reserve_cv; /* CLOCK_MONOTONIC */
    pthread_t *threads;        /* n_workers workers, then the reserves */
    int n_threads;
    int n_workers;
    int cap;
    int idle; /* workers (not reserves) waiting on work_cv */
    bool stop;
    bool running;
    struct qpool_job *jobs, *jobs_tail;
    int n_jobs;                /* written under the lock; helpers read it without */
    struct qpool_job *helpers; /* LIFO is fine: they are interchangeable */
    uint64_t starts;           /* jobs taken off the queue, ever */
    uint64_t submitted, rejected, active, reserve_runs;
} P = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t reserve_cv_once = PTHREAD_ONCE_INIT;

static void reserve_cv_init(void)
{
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&P.reserve_cv, &a);
    pthread_condattr_destroy(&a);
}

static uint64_t mono_ms(void)
{
    return clock_mono_ns() / 1000000u;
}

static bool jobs_waiting(void)
{
    return __atomic_load_n(&P.n_jobs, __ATOMIC_RELAXED) > 0;
}

/* Lock held: unlinks the first job, runs it unlocked, relocks. */
static void do_run_first_job(void)
{
    struct qpool_job *j = P.jobs;
    P.jobs = j->next;
    if (P.jobs == NULL) {
        P.jobs_tail = NULL;
    }
    __atomic_store_n(&P.n_jobs, P.n_jobs - 1, __ATOMIC_RELAXED);
    P.starts++;
    P.active++;
    pthread_mutex_unlock(&P.lock);
    j->fn(j); /* may free j */
    pthread_mutex_lock(&P.lock);
    P.active--;
}

/* |helper|: leave (the caller finishes alone) once a query job waits. */
static void run_items(struct par_group *g, bool helper)
{
    for (;;) {
        if (helper && jobs_waiting()) {
            return;
        }
        size_t i = __atomic_fetch_add(&g->next, 1, __ATOMIC_RELAXED);
        if (i >= g->n) {
            return;
        }
        g->fn(g->arg, i);
    }
}

static void *worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&P.lock);
    for (;;) {
        if (P.helpers != NULL) {
            struct qpool_job *h = P.helpers;
            struct par_group *g = h->group;
            P.helpers = h->next;
            g->running++;
            pthread_mutex_unlock(&P.lock);
            run_items(g, true);
            pthread_mutex_lock(&P.lock);
            if (--g->running == 0) {
                pthread_cond_broadcast(&P.done_cv);
            }
            continue;
        }
        if (P.jobs != NULL) {
            do_run_first_job();
            continue;
        }
        if (P.stop) {
            break;
        }
        P.idle++;
        pthread_cond_wait(&P.work_cv, &P.lock);
        P.idle--;
    }
    pthread_mutex_unlock(&P.lock);
    return NULL;
}

/* A reserve worker: runs a job only while the pool is stalled (top of file). */
static void *reserve_main(void *arg)
{
    (void)arg;
    uint64_t seen = 0, since = 0; /* since == 0: not watching */
    pthread_mutex_lock(&P.lock);
    while (!P.stop) {
        if (P.jobs == NULL) {
            since = 0;
            pthread_cond_wait(&P.reserve_cv, &P.lock);
            continue;
        }
        uint64_t now = mono_ms();
        /* an idle worker (woken, about to take a job) is progress too */
        if (since == 0 || P.starts != seen || P.idle > 0) {
            seen = P.starts;
            since = now;
        } else if (now - since >= QPOOL_STALL_MS) {
            P.reserve_runs++;
            since = 0;
            /* the other reserves restart their clocks on this start */
            pthread_cond_broadcast(&P.reserve_cv);
            do_run_first_job();
            continue;
        }
        uint64_t due = since + QPOOL_STALL_MS;
        struct timespec dl = {(time_t)(due / 1000u), (long)(due % 1000u) * 1000000L};
        pthread_cond_timedwait(&P.reserve_cv, &P.lock, &dl);
    }
    pthread_mutex_unlock(&P.lock);
    return NULL;
}

int qpool_start(int n, int queue_cap)
{
    return qpool_start_reserve(n, 0, queue_cap);
}

int qpool_start_reserve(int n, int reserve, int queue_cap)
{
    if (n < 1) {
        n = 1;
    }
    if (reserve < 0) {
        reserve = 0;
    }
    if (queue_cap < 1) {
        queue_cap = 1;
    }
    pthread_once(&reserve_cv_once, reserve_cv_init);
    pthread_mutex_lock(&P.lock);
    if (P.running) {
        pthread_mutex_unlock(&P.lock);
        return -EALREADY;
    }
    P.threads = calloc((size_t)(n + reserve), sizeof(*P.threads));
    if (P.threads == NULL) {
        pthread_mutex_unlock(&P.lock);
        return -ENOMEM;
    }
    P.cap = queue_cap;
    P.stop = false;
    P.n_threads = 0;
    P.n_workers = 0;
    P.running = true;
    pthread_mutex_unlock(&P.lock);

    /* The stack the evaluators' depth limits are measured against (the
     * parsers' operator and nesting caps fit in 1 MiB under ASan): set
     * here, not inherited from whatever `ulimit -s` the daemon started with. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, QPOOL_STACK_BYTES);
    for (int i = 0; i < n + reserve; i++) {
        int rc = pthread_create(&P.threads[i], &attr, i < n ? worker_main : reserve_main, NULL);
        if (rc != 0) {
            pthread_attr_destroy(&attr);
            qpool_stop();
            return -rc;
        }
        pthread_setname_np(P.threads[i], i < n ? "query" : "query-reserve");
        pthread_mutex_lock(&P.lock);
        P.n_threads = i + 1;
        P.n_workers = i < n ? i + 1 : n;
        pthread_mutex_unlock(&P.lock);
    }
    pthread_attr_destroy(&attr);
    return 0;
}

void qpool_stop(void)
{
    pthread_mutex_lock(&P.lock);
    if (!P.running) {
        pthread_mutex_unlock(&P.lock);
        return;
    }
    P.stop = true;
    int n = P.n_threads;
    pthread_cond_broadcast(&P.work_cv);
    pthread_cond_broadcast(&P.reserve_cv);
    pthread_mutex_unlock(&P.lock);
    for (int i = 0; i < n; i++) {
        pthread_join(P.threads[i], NULL);
    }
    pthread_mutex_lock(&P.lock);
    /* With no worker started (pthread_create failed at once), queued jobs
     * cannot exist: qpool_submit refuses until n_workers > 0. */
    free(P.threads);
    P.threads = NULL;
    P.n_threads = 0;
    P.n_workers = 0;
    P.running = false;
    P.stop = false;
    pthread_mutex_unlock(&P.lock);
}

/* Lock held: a job was just linked in; wake whoever takes it. */
static void do_queued(void)
{
    __atomic_store_n(&P.n_jobs, P.n_jobs + 1, __ATOMIC_RELAXED);
    if (P.idle > 0) {
        pthread_cond_signal(&P.work_cv);
    } else if (P.n_threads > P.n_workers) {
        /* every worker is busy: the reserves start watching for a stall */
        pthread_cond_broadcast(&P.reserve_cv);
    }
}

int qpool_submit(struct qpool_job *j)
{
    pthread_mutex_lock(&P.lock);
    if (!P.running || P.stop || P.n_workers == 0) {
        pthread_mutex_unlock(&P.lock);
        return -ESHUTDOWN;
    }
    if (P.n_jobs >= P.cap) {
        P.rejected++;
        pthread_mutex_unlock(&P.lock);
        return -EAGAIN;
    }
    j->next = NULL;
    j->group = NULL;
    if (P.jobs_tail != NULL) {
        P.jobs_tail->next = j;
    } else {
        P.jobs = j;
    }
    P.jobs_tail = j;
    do_queued();
    P.submitted++;
    pthread_mutex_unlock(&P.lock);
    return 0;
}

int qpool_submit_urgent(struct qpool_job *j)
{
    pthread_mutex_lock(&P.lock);
    if (!P.running || P.stop || P.n_workers == 0) {
        pthread_mutex_unlock(&P.lock);
        return -ESHUTDOWN;
    }
    j->group = NULL;
    j->next = P.jobs;
    P.jobs = j;
    if (P.jobs_tail == NULL) {
        P.jobs_tail = j;
    }
    do_queued();
    pthread_mutex_unlock(&P.lock);
    return 0;
}

int qpool_workers(void)
{
    pthread_mutex_lock(&P.lock);
    int n = P.running ? P.n_workers : 0;
    pthread_mutex_unlock(&P.lock);
    return n;
}

void qpool_parallel(size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
    struct par_group g = {.fn = fn, .arg = arg, .n = n};
    struct qpool_job helpers[QPOOL_MAX_HELPERS];
    size_t k = 0;

    if (n == 0) {
        return;
    }
    if (n > 1) {
        pthread_mutex_lock(&P.lock);
        if (P.running && !P.stop) {
            size_t want = n - 1;
            if (want > (size_t)P.idle) {
                want = (size_t)P.idle;
            }
            if (want > QPOOL_MAX_HELPERS) {
                want = QPOOL_MAX_HELPERS;
            }
            for (k = 0; k < want; k++) {
                helpers[k].group = &g;
                helpers[k].fn = NULL;
                helpers[k].next = P.helpers;
                P.helpers = &helpers[k];
            }
            if (k == 1) {
                pthread_cond_signal(&P.work_cv);
            } else if (k > 1) {
                pthread_cond_broadcast(&P.work_cv);
            }
        }
        pthread_mutex_unlock(&P.lock);
    }

    run_items(&g, false);

    if (k == 0) {
        return;
    }
    pthread_mutex_lock(&P.lock);
    /* Unlink our helpers nobody took (every item is handed out by now). */
    struct qpool_job **pp = &P.helpers;
    while (*pp != NULL) {
        if ((*pp)->group == &g) {
            *pp = (*pp)->next;
        } else {
            pp = &(*pp)->next;
        }
    }
    while (g.running > 0) {
        pthread_cond_wait(&P.done_cv, &P.lock);
    }
    pthread_mutex_unlock(&P.lock);
}

void qpool_get_stats(struct qpool_stats *out)
{
    pthread_mutex_lock(&P.lock);
    out->submitted = P.submitted;
    out->rejected = P.rejected;
    out->queued = (uint64_t)P.n_jobs;
    out->running = P.active;
    out->reserve_runs = P.reserve_runs;
    pthread_mutex_unlock(&P.lock);
}
