/*
 * pool.c - the query worker pool (see pool.h).
 *
 * One mutex guards two lists: helpers (qpool_parallel fan-out, taken
 * first) and jobs (queries, FIFO, bounded). Workers sleep on |work_cv|;
 * a fan-out caller waits on |done_cv| for the helpers that picked up its
 * group. Helper structs live on the caller's stack: before it returns it
 * unlinks those no worker took yet and waits for those that are running,
 * so none outlives the call.
 */
#include "query/pool.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* Helpers per fan-out at most (more workers than this just stay idle). */
#define QPOOL_MAX_HELPERS 64

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
    pthread_t *threads;
    int n_threads;
    int cap;
    int idle;
    bool stop;
    bool running;
    struct qpool_job *jobs, *jobs_tail;
    int n_jobs;
    struct qpool_job *helpers; /* LIFO is fine: they are interchangeable */
    uint64_t submitted, rejected, active;
} P = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work_cv = PTHREAD_COND_INITIALIZER,
    .done_cv = PTHREAD_COND_INITIALIZER,
};

static void run_items(struct par_group *g)
{
    for (;;) {
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
            run_items(g);
            pthread_mutex_lock(&P.lock);
            if (--g->running == 0) {
                pthread_cond_broadcast(&P.done_cv);
            }
            continue;
        }
        if (P.jobs != NULL) {
            struct qpool_job *j = P.jobs;
            P.jobs = j->next;
            if (P.jobs == NULL) {
                P.jobs_tail = NULL;
            }
            P.n_jobs--;
            P.active++;
            pthread_mutex_unlock(&P.lock);
            j->fn(j); /* may free j */
            pthread_mutex_lock(&P.lock);
            P.active--;
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

int qpool_start(int n, int queue_cap)
{
    if (n < 1) {
        n = 1;
    }
    if (queue_cap < 1) {
        queue_cap = 1;
    }
    pthread_mutex_lock(&P.lock);
    if (P.running) {
        pthread_mutex_unlock(&P.lock);
        return -EALREADY;
    }
    P.threads = calloc((size_t)n, sizeof(*P.threads));
    if (P.threads == NULL) {
        pthread_mutex_unlock(&P.lock);
        return -ENOMEM;
    }
    P.cap = queue_cap;
    P.stop = false;
    P.n_threads = 0;
    P.running = true;
    pthread_mutex_unlock(&P.lock);

    for (int i = 0; i < n; i++) {
        int rc = pthread_create(&P.threads[i], NULL, worker_main, NULL);
        if (rc != 0) {
            qpool_stop();
            return -rc;
        }
        pthread_setname_np(P.threads[i], "query");
        pthread_mutex_lock(&P.lock);
        P.n_threads = i + 1;
        pthread_mutex_unlock(&P.lock);
    }
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
    pthread_mutex_unlock(&P.lock);
    for (int i = 0; i < n; i++) {
        pthread_join(P.threads[i], NULL);
    }
    pthread_mutex_lock(&P.lock);
    /* With no worker started (pthread_create failed at once), queued jobs
     * cannot exist: qpool_submit refuses until n_threads > 0. */
    free(P.threads);
    P.threads = NULL;
    P.n_threads = 0;
    P.running = false;
    P.stop = false;
    pthread_mutex_unlock(&P.lock);
}

int qpool_submit(struct qpool_job *j)
{
    pthread_mutex_lock(&P.lock);
    if (!P.running || P.stop || P.n_threads == 0) {
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
    P.n_jobs++;
    P.submitted++;
    pthread_cond_signal(&P.work_cv);
    pthread_mutex_unlock(&P.lock);
    return 0;
}

int qpool_submit_urgent(struct qpool_job *j)
{
    pthread_mutex_lock(&P.lock);
    if (!P.running || P.stop || P.n_threads == 0) {
        pthread_mutex_unlock(&P.lock);
        return -ESHUTDOWN;
    }
    j->group = NULL;
    j->next = P.jobs;
    P.jobs = j;
    if (P.jobs_tail == NULL) {
        P.jobs_tail = j;
    }
    P.n_jobs++;
    pthread_cond_signal(&P.work_cv);
    pthread_mutex_unlock(&P.lock);
    return 0;
}

int qpool_workers(void)
{
    pthread_mutex_lock(&P.lock);
    int n = P.running ? P.n_threads : 0;
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

    run_items(&g);

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
    pthread_mutex_unlock(&P.lock);
}
