/*
 * sealer.c - the seal thread (see sealer.h), plus retention once a second.
 */
#include "storage/sealer.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
static struct seal_job *head, *tail;
static bool stopping, started;
static pthread_t thread;
static struct sealer_stats stats;
static uint64_t ret_age_ns, ret_bytes;

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void seal_one(struct seal_job *j)
{
    char path[700];
    uint64_t t0 = mono_ns();
    int rc;
    blk *b = NULL;

    rc = blk_write(j->dir, catalog_open_block(j->h), j->rows, &j->meta, path, sizeof(path));
    if (rc == 0) {
        char err[200];
        rc = blk_open(path, &b, err, sizeof(err));
    }
    if (rc == 0) {
        rc = catalog_publish(j->h, b, path);
        if (rc < 0) {
            blk_unref(b);
        }
    }
    pthread_mutex_lock(&lock);
    if (rc == 0) {
        stats.seals++;
        stats.rows_sealed += j->rows;
    } else {
        stats.seal_failures++;
    }
    stats.seal_ns += mono_ns() - t0;
    pthread_mutex_unlock(&lock);
    j->sealed(j, rc);
}

static void *sealer_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sealer");
    uint64_t last_retain = 0;
    for (;;) {
        pthread_mutex_lock(&lock);
        while (head == NULL && !stopping) {
            struct timespec dl;
            clock_gettime(CLOCK_REALTIME, &dl);
            dl.tv_sec += 1;
            if (pthread_cond_timedwait(&wake, &lock, &dl) == ETIMEDOUT) {
                break;
            }
        }
        struct seal_job *list = head;
        bool stop = stopping && head == NULL;
        head = tail = NULL;
        pthread_mutex_unlock(&lock);
        while (list != NULL) {
            struct seal_job *next = list->next;
            seal_one(list);
            list = next;
        }
        uint64_t now = mono_ns();
        if ((ret_age_ns != 0 || ret_bytes != 0) && now - last_retain >= 1000000000u) {
            catalog_retain(real_ns(), ret_age_ns, ret_bytes);
            last_retain = now;
            pthread_mutex_lock(&lock);
            stats.retention_runs++;
            pthread_mutex_unlock(&lock);
        }
        if (stop) {
            return NULL;
        }
    }
}

int sealer_start(uint64_t retention_age_ns, uint64_t retention_bytes)
{
    ret_age_ns = retention_age_ns;
    ret_bytes = retention_bytes;
    stopping = false;
    int rc = pthread_create(&thread, NULL, sealer_main, NULL);
    if (rc != 0) {
        return -rc;
    }
    started = true;
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
    pthread_cond_signal(&wake);
}

void sealer_stop(void)
{
    if (!started) {
        return;
    }
    pthread_mutex_lock(&lock);
    stopping = true;
    pthread_mutex_unlock(&lock);
    pthread_cond_signal(&wake);
    pthread_join(thread, NULL);
    started = false;
}

void sealer_get_stats(struct sealer_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
}
