/*
 * promcheck.c - counting and logging metric points PromQL leaves out
 * (promcheck.h).
 */
#include "server/promcheck.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <string.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "query/pmsrc.h"
#include "server/log.h"
#include "storage/promname.h"

#define LOGGED_MAX 4096         /* names remembered as logged (open addressing, 2x slots) */
#define MAX_CHECKED_METRICS 256 /* per batch; a batch with more checks the rest one by one */

static uint64_t counts[PROMCHECK_COUNT_];
static pthread_mutex_t logged_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t logged[2 * LOGGED_MAX]; /* name hashes | 1 (0 = empty slot) */
static unsigned n_logged;

const char *promcheck_reason_name(enum promcheck_reason r)
{
    return r == PROMCHECK_TEMPORALITY ? "invalid_temporality" : "invalid_name";
}

uint64_t promcheck_count(enum promcheck_reason r)
{
    return (unsigned)r < PROMCHECK_COUNT_ ? __atomic_load_n(&counts[r], __ATOMIC_RELAXED) : 0;
}

/* True the first time |name| is seen (while the set has room). */
static bool first_time(const char *name, size_t n)
{
    uint64_t h = XXH3_64bits(name, n) | 1;
    bool first = false;
    pthread_mutex_lock(&logged_lock);
    size_t slots = sizeof logged / sizeof logged[0];
    for (size_t i = h % slots;; i = (i + 1) % slots) {
        if (logged[i] == h) {
            break;
        }
        if (logged[i] == 0) {
            if (n_logged < LOGGED_MAX) {
                logged[i] = h;
                n_logged++;
                first = true;
            }
            break;
        }
    }
    pthread_mutex_unlock(&logged_lock);
    return first;
}

/* Why Prometheus would refuse metric |m|, or -1 when it maps. */
static int reason_of(const struct metric_row *m)
{
    int t = promname_type_of(m->kind, m->monotonic);
    if (t < 0) {
        return -1; /* a Metric without data has no points to lose */
    }
    if (promname_temporality(m->kind, m->temporality) == PROMNAME_T_INVALID) {
        return PROMCHECK_TEMPORALITY;
    }
    char name[512];
    if (m->name.len + m->unit.len + 32 > sizeof name) {
        return -1; /* too long to check here; the read side counts it */
    }
    if (promname_metric(m->name.p, m->name.len, m->unit.p, m->unit.len, (enum promname_type)t, name,
                        sizeof name) == -EINVAL) {
        return PROMCHECK_NAME;
    }
    return -1;
}

void promcheck_batch(const struct batch *b)
{
    if (b->signal != SIG_METRICS || b->n_metrics == 0) {
        return;
    }
    int8_t bad[MAX_CHECKED_METRICS];
    uint32_t nm = b->n_metrics < MAX_CHECKED_METRICS ? b->n_metrics : MAX_CHECKED_METRICS;
    bool any = false;
    for (uint32_t i = 0; i < nm; i++) {
        bad[i] = (int8_t)reason_of(&b->metrics[i]);
        any |= bad[i] >= 0;
    }
    if (!any && b->n_metrics <= MAX_CHECKED_METRICS) {
        return;
    }
    uint64_t n[PROMCHECK_COUNT_] = {0};
    uint32_t pts[MAX_CHECKED_METRICS] = {0};
    for (uint32_t r = 0; r < b->n_rows; r++) {
        uint32_t mi = b->points[r].metric;
        int why = mi < nm ? bad[mi] : mi < b->n_metrics ? reason_of(&b->metrics[mi]) : -1;
        if (why >= 0) {
            n[why]++;
            if (mi < nm) {
                pts[mi]++;
            }
        }
    }
    for (int k = 0; k < PROMCHECK_COUNT_; k++) {
        if (n[k] != 0) {
            __atomic_fetch_add(&counts[k], n[k], __ATOMIC_RELAXED);
        }
    }
    for (uint32_t i = 0; i < nm; i++) {
        const struct metric_row *m = &b->metrics[i];
        if (bad[i] < 0 || !first_time(m->name.p, m->name.len)) {
            continue;
        }
        log_warn("ingest",
                 "metric \"%.*s\": %u points stored but not visible to PromQL (%s); "
                 "further points of this metric are only counted "
                 "(miradb_promql_unmapped_points_total)",
                 (int)(m->name.len > 200 ? 200 : m->name.len), m->name.p, pts[i],
                 bad[i] == PROMCHECK_TEMPORALITY ? "aggregation temporality is unspecified"
                                                 : "its name has no character Prometheus allows");
    }
}

void promcheck_reads(void)
{
    static uint64_t seen; /* pmsrc_unmapped() at the last look */
    uint64_t now = pmsrc_unmapped();
    uint64_t was = __atomic_load_n(&seen, __ATOMIC_RELAXED);
    if (now == was ||
        !__atomic_compare_exchange_n(&seen, &was, now, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        return;
    }
    char name[128];
    size_t n = pmsrc_unmapped_last(name, sizeof name);
    if (n == 0 || !first_time(name, n)) {
        return;
    }
    log_warn("query",
             "metric \"%s\": some of its points or series are not visible to PromQL (an "
             "attribute key Prometheus refuses, an unspecified temporality or an exponential "
             "histogram scale below -4); counted in miradb_promql_unmapped_reads_total",
             name);
}
