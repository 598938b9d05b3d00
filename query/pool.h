/*
 * pool.h - the query worker pool: N threads and one bounded job queue,
 * shared by every query endpoint (LogQL, TraceQL, ...).
 *
 * A query is one job (qpool_submit). A job may fan out over blocks with
 * qpool_parallel: the calling worker runs items itself and idle workers
 * help, so a job never waits on a queue behind other queries and fan-out
 * cannot deadlock however many queries run at once. A helper goes back to
 * the queue between two items as soon as a query waits there, so one
 * query's fan-out never keeps others from starting; and reserve workers
 * (qpool_start_reserve) step in when every worker is held by long queries
 * while others wait (pool.c, FAIRNESS).
 *
 * One process-wide pool. Threads: qpool_start/qpool_stop from one thread
 * (main, or a test); the rest from any thread.
 */
#ifndef MIRADB_QPOOL_H
#define MIRADB_QPOOL_H

#include <stddef.h>
#include <stdint.h>

/* Stack of every query thread: 8 MiB, whatever `ulimit -s` says. */
#define QPOOL_STACK_BYTES ((size_t)8 << 20)

/* A job: embed it in the caller's own struct (container_of style). |fn|
 * runs once on a worker; the job's memory is the submitter's until |fn|
 * starts, then |fn|'s. */
struct qpool_job {
    struct qpool_job *next;
    void (*fn)(struct qpool_job *j);
    void *group; /* internal (qpool_parallel helpers) */
};

/* Starts |n| (>= 1) workers with room for |queue_cap| (>= 1) queued jobs.
 * 0; -EALREADY if running; -errno from pthread_create (then nothing runs). */
int qpool_start(int n, int queue_cap);

/* As qpool_start, plus |reserve| (>= 0) reserve workers: each takes a
 * queued job only when jobs have waited 200 ms with every worker busy and
 * no job started meanwhile (long queries hold them all), so short queries
 * are not starved; they are not counted by qpool_workers() and never help
 * a fan-out. Same returns. */
int qpool_start_reserve(int n, int reserve, int queue_cap);

/* The reserve the query endpoints start the pool with. */
#define QPOOL_RESERVE 4

/* Runs the jobs still queued, then joins the workers. A no-op if not
 * running. No qpool_submit may race with it. */
void qpool_stop(void);

/* Queues |j| (its fn must be set). 0; -EAGAIN when the queue is full
 * (answer 503: too many queries); -ESHUTDOWN when the pool is not running. */
int qpool_submit(struct qpool_job *j);

/* As qpool_submit, but ahead of every queued job and never refused for
 * room: the continuation of a query already admitted (the next piece of a
 * streamed answer). 0, or -ESHUTDOWN. */
int qpool_submit_urgent(struct qpool_job *j);

/* Workers running, reserves not counted (0 when stopped). */
int qpool_workers(void);

/*
 * Calls fn(arg, i) for every i in [0, n), on the calling thread and on up
 * to qpool_workers() - 1 idle workers at once, and returns when all calls
 * have returned. Items are handed out in increasing i, one at a time, so
 * fn may stop early by checking a flag of its own. Any thread (a worker
 * running a job, or a thread outside the pool: then it runs alone if no
 * worker is idle). Never fails: with no helper available the caller runs
 * every item itself.
 */
void qpool_parallel(size_t n, void (*fn)(void *arg, size_t i), void *arg);

struct qpool_stats {
    uint64_t submitted;
    uint64_t rejected;     /* queue full */
    uint64_t queued;       /* now */
    uint64_t running;      /* jobs being run now (helpers not counted) */
    uint64_t reserve_runs; /* jobs a reserve worker took (the pool was stalled) */
};
void qpool_get_stats(struct qpool_stats *out);

#endif
