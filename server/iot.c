/*
 * iot.c - I/O threads (see iot.h).
 *
 * Each thread runs its own event_base. Messages from other threads arrive
 * on a mutex-protected list plus an eventfd: the poster writes the eventfd
 * only when the list was empty, the loop swaps the whole list out and runs
 * it unlocked. No evthread locking is needed, because nothing but the
 * eventfd crosses threads. A message a thread posts to itself (the ack of
 * a job its own shard drain finished: shard.c) skips the eventfd: an
 * event made active runs the list on this loop pass, with no system call.
 */
#include "server/iot.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "lib/clock.h"
#include "server/addr.h"
#include "server/log.h"

struct iot_internal {
    pthread_t thread;
    int efd;
    struct event *wake_ev;
    struct event *self_ev; /* made active by a post from this thread */
    struct event *stop_timer;
    pthread_mutex_t lock;
    struct iot_msg *head, *tail;
    struct iot_msg stop_msg;
    struct timespec stop_deadline;
};

static struct iot *threads;
static int n_threads;
static bool stopping;
static __thread struct iot *self;
static void (*stop_quiesce)(struct iot *t);
static int (*stop_active)(struct iot *t);

static void run_posted(struct iot *t)
{
    pthread_mutex_lock(&t->in->lock);
    struct iot_msg *m = t->in->head;
    t->in->head = t->in->tail = NULL;
    pthread_mutex_unlock(&t->in->lock);
    while (m != NULL) {
        struct iot_msg *next = m->next;
        m->fn(m);
        m = next;
    }
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    uint64_t v;
    (void)what;
    if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN) {
        log_warn("iot", "event=eventfd_read_failed errno=%d", errno);
    }
    run_posted(arg);
}

static void on_self(evutil_socket_t fd, short what, void *arg)
{
    (void)fd, (void)what;
    run_posted(arg);
}

void iot_post(struct iot *t, struct iot_msg *m)
{
    bool was_empty;
    m->next = NULL;
    pthread_mutex_lock(&t->in->lock);
    was_empty = t->in->head == NULL;
    if (t->in->tail != NULL) {
        t->in->tail->next = m;
    } else {
        t->in->head = m;
    }
    t->in->tail = m;
    pthread_mutex_unlock(&t->in->lock);
    if (t == self) {
        event_active(t->in->self_ev, 0, 0);
    } else if (was_empty) {
        uint64_t one = 1;
        while (write(t->in->efd, &one, sizeof(one)) < 0 && errno == EINTR) {
        }
    }
}

/*
 * A base whose timers fire when they are due. By default libevent reads
 * CLOCK_MONOTONIC_COARSE, which advances once a kernel tick (4 ms at
 * HZ=250): every timer shorter than a tick then fired a tick or more
 * late. The admission pace (ingest.c) and the waiters' retry are timers
 * of 0.01-2 ms, so a request paced 10 us waited a median 3.3 ms in
 * admission: most of the acks over 5 ms at one connection
 * (bench/PERFORMANCE.md, "The ack tail at one connection"). The precise
 * clock costs a vDSO clock_gettime where the coarse one cost a memory
 * read, and a timerfd_settime per loop pass with a timer pending (~6 a
 * 1,000-record request).
 */
static struct event_base *new_base(void)
{
    struct event_config *cfg = event_config_new();
    if (cfg == NULL) {
        return NULL;
    }
    struct event_base *b = NULL;
    if (event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER) == 0) {
        b = event_base_new_with_config(cfg);
    }
    event_config_free(cfg);
    return b;
}

int iot_init(int n)
{
    threads = calloc((size_t)n, sizeof(*threads));
    if (threads == NULL) {
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++) {
        struct iot *t = &threads[i];
        t->idx = i;
        t->in = calloc(1, sizeof(*t->in));
        if (t->in == NULL) {
            return -ENOMEM;
        }
        pthread_mutex_init(&t->in->lock, NULL);
        t->base = new_base();
        t->in->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (t->base == NULL || t->in->efd < 0) {
            return -ENOMEM;
        }
        t->in->wake_ev = event_new(t->base, t->in->efd, EV_READ | EV_PERSIST, on_wake, t);
        t->in->self_ev = event_new(t->base, -1, 0, on_self, t);
        if (t->in->wake_ev == NULL || t->in->self_ev == NULL ||
            event_add(t->in->wake_ev, NULL) < 0) {
            return -ENOMEM;
        }
        n_threads = i + 1;
    }
    return 0;
}

int iot_count(void)
{
    return n_threads;
}

struct iot *iot_get(int i)
{
    return &threads[i];
}

struct iot *iot_self(void)
{
    return self;
}

bool iot_stopping(void)
{
    return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

static void *iot_main(void *arg)
{
    struct iot *t = arg;
    char name[16];
    self = t;
    snprintf(name, sizeof(name), "io-%d", t->idx);
    pthread_setname_np(pthread_self(), name);
    event_base_dispatch(t->base);
    return NULL;
}

int iot_start(void)
{
    for (int i = 0; i < n_threads; i++) {
        int rc = pthread_create(&threads[i].in->thread, NULL, iot_main, &threads[i]);
        if (rc != 0) {
            return -rc;
        }
    }
    return 0;
}

/* Polls until the thread's connections are gone or the grace period ends. */
static void on_stop_tick(evutil_socket_t fd, short what, void *arg)
{
    struct iot *t = arg;
    struct timespec now;
    (void)fd, (void)what;
    clock_gettime(CLOCK_MONOTONIC, &now);
    bool late =
        now.tv_sec > t->in->stop_deadline.tv_sec ||
        (now.tv_sec == t->in->stop_deadline.tv_sec && now.tv_nsec >= t->in->stop_deadline.tv_nsec);
    int active = stop_active != NULL ? stop_active(t) : 0;
    if (active == 0 || late) {
        if (active != 0) {
            log_warn("iot", "event=stop_grace_expired thread=%d connections=%d", t->idx, active);
        }
        event_base_loopbreak(t->base);
        return;
    }
    struct timeval tv = {0, 10000};
    evtimer_add(t->in->stop_timer, &tv);
}

static void on_stop_msg(struct iot_msg *m)
{
    struct iot *t = iot_self();
    (void)m;
    if (stop_quiesce != NULL) {
        stop_quiesce(t);
    }
    t->in->stop_timer = evtimer_new(t->base, on_stop_tick, t);
    on_stop_tick(-1, 0, t);
}

void iot_stop_and_join(void (*quiesce)(struct iot *t), int (*active)(struct iot *t), int grace_ms)
{
    struct timespec dl = clock_after(CLOCK_MONOTONIC, (uint64_t)grace_ms * 1000000u); /* >= 0 */
    stop_quiesce = quiesce;
    stop_active = active;
    __atomic_store_n(&stopping, true, __ATOMIC_RELEASE);
    for (int i = 0; i < n_threads; i++) {
        threads[i].in->stop_deadline = dl;
        threads[i].in->stop_msg.fn = on_stop_msg;
        iot_post(&threads[i], &threads[i].in->stop_msg);
    }
    for (int i = 0; i < n_threads; i++) {
        pthread_join(threads[i].in->thread, NULL);
    }
}

void iot_run_pending(void)
{
    for (int i = 0; i < n_threads; i++) {
        self = &threads[i];
        run_posted(&threads[i]);
    }
    self = NULL;
}

void iot_fini(void)
{
    for (int i = 0; i < n_threads; i++) {
        struct iot *t = &threads[i];
        if (t->in->stop_timer != NULL) {
            event_free(t->in->stop_timer);
        }
        event_free(t->in->wake_ev);
        event_free(t->in->self_ev);
        close(t->in->efd);
        event_base_free(t->base);
        pthread_mutex_destroy(&t->in->lock);
        free(t->in);
    }
    free(threads);
    threads = NULL;
    n_threads = 0;
}

void iot_peer_name(int fd, char *buf, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (cap == 0) {
        return;
    }
    if (getpeername(fd, (struct sockaddr *)&ss, &len) != 0) {
        snprintf(buf, cap, "?");
        return;
    }
    addr_format(&ss, buf, cap);
}
