/*
 * connlim.c - connection caps (see connlim.h).
 *
 * One mutex guards the total and a table of per-address counts: accept is
 * not a hot path (one lock per connection, never per request). The table
 * is open addressing with linear probing, sized at start to twice the
 * most distinct addresses that can be open (--max-connections), so it
 * never grows; an address whose count drops to 0 is removed by shifting
 * back the entries after it (no tombstones).
 */
#include "server/connlim.h"

#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "lib/clock.h"
#include "server/addr.h"
#include "server/config.h"
#include "server/log.h"

#define FD_RESERVE 64 /* descriptors kept for WAL, blocks, listeners, logs */

enum refuse_reason { RR_TOTAL = 0, RR_PER_CLIENT = 1, RR_COUNT };
static const char *const rr_names[RR_COUNT] = {"max_connections", "max_connections_per_client"};
static const char *const listener_names[CL_LISTENERS] = {"http", "grpc"};

struct slot {
    struct connlim_key k;
    uint32_t n; /* 0 = empty */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct slot *tab;
static size_t tab_mask;
static uint64_t max_total, max_per_client;
static uint64_t open_total;
static _Atomic uint64_t open_by[CL_LISTENERS];
static _Atomic uint64_t refused[RR_COUNT];
static uint64_t logged_ns, unlogged; /* under mu */

static size_t hash_key(const struct connlim_key *k)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (int i = 0; i < 16; i++) {
        h = (h ^ k->addr[i]) * 1099511628211ull;
    }
    return (size_t)(h ^ (h >> 29) ^ k->family);
}

static bool key_eq(const struct connlim_key *a, const struct connlim_key *b)
{
    return a->family == b->family && memcmp(a->addr, b->addr, 16) == 0;
}

static bool key_of(const struct sockaddr *sa, struct connlim_key *k)
{
    memset(k, 0, sizeof(*k));
    if (sa != NULL && sa->sa_family == AF_INET) {
        memcpy(k->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
        k->family = 4;
        return true;
    }
    if (sa != NULL && sa->sa_family == AF_INET6) {
        memcpy(k->addr, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
        k->family = 6;
        return true;
    }
    return false;
}

int connlim_init(const struct config *c)
{
    pthread_mutex_lock(&mu);
    if (tab != NULL) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    size_t cap = 16;
    while (cap < c->max_connections * 2) {
        cap <<= 1;
    }
    tab = calloc(cap, sizeof(*tab));
    if (tab == NULL) {
        pthread_mutex_unlock(&mu);
        return -ENOMEM;
    }
    tab_mask = cap - 1;
    max_total = c->max_connections;
    max_per_client = c->max_connections_per_client;
    pthread_mutex_unlock(&mu);

    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t want = (rlim_t)(max_total + FD_RESERVE);
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
            struct rlimit up = rl;
            up.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > want ? want : rl.rlim_max;
            if (setrlimit(RLIMIT_NOFILE, &up) == 0) {
                rl = up;
            }
        }
        log_info("connlim",
                 "event=connection_limits max_connections=%llu per_client=%llu "
                 "rlimit_nofile=%llu",
                 (unsigned long long)max_total, (unsigned long long)max_per_client,
                 (unsigned long long)rl.rlim_cur);
        if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
            log_warn("connlim",
                     "event=max_connections_above_rlimit max_connections=%llu "
                     "rlimit_nofile=%llu reserve=%d: lower --max-connections or raise the "
                     "descriptor limit (LimitNOFILE=)",
                     (unsigned long long)max_total, (unsigned long long)rl.rlim_cur, FD_RESERVE);
        }
    }
    return 0;
}

void connlim_fini(void)
{
    pthread_mutex_lock(&mu);
    free(tab);
    tab = NULL;
    open_total = 0;
    pthread_mutex_unlock(&mu);
}

/* The slot of |k|, or the empty one where it would go. Under mu. */
static struct slot *find(const struct connlim_key *k)
{
    size_t i = hash_key(k) & tab_mask;
    while (tab[i].n != 0 && !key_eq(&tab[i].k, k)) {
        i = (i + 1) & tab_mask;
    }
    return &tab[i];
}

/* Empties |s| and moves back the entries of its probe run. Under mu. */
static void remove_slot(struct slot *s)
{
    size_t i = (size_t)(s - tab);
    size_t j = i;
    tab[i].n = 0;
    for (;;) {
        j = (j + 1) & tab_mask;
        if (tab[j].n == 0) {
            return;
        }
        size_t home = hash_key(&tab[j].k) & tab_mask;
        /* |j| may move to |i| unless its home lies cyclically in (i, j]. */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (!stays) {
            tab[i] = tab[j];
            tab[j].n = 0;
            i = j;
        }
    }
}

static void log_refusal(enum refuse_reason why, const struct sockaddr *sa)
{
    uint64_t now = clock_mono_ns();
    if (logged_ns != 0 && now - logged_ns < 1000000000ull) {
        unlogged++;
        return;
    }
    char peer[64] = "?";
    if (sa != NULL) {
        struct sockaddr_storage ss;
        memset(&ss, 0, sizeof(ss));
        memcpy(&ss, sa,
               sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                         : sizeof(struct sockaddr_in));
        addr_format(&ss, peer, sizeof(peer));
    }
    log_warn("connlim", "event=connection_refused reason=%s peer=%s unlogged_before=%llu",
             rr_names[why], peer, (unsigned long long)unlogged);
    logged_ns = now;
    unlogged = 0;
}

bool connlim_acquire(enum connlim_listener l, const struct sockaddr *sa, struct connlim_key *key)
{
    struct connlim_key k;
    bool counted = key_of(sa, &k);
    memset(key, 0, sizeof(*key));
    pthread_mutex_lock(&mu);
    if (tab == NULL) {
        pthread_mutex_unlock(&mu);
        return true; /* no caps set up (unit tests of a listener) */
    }
    enum refuse_reason why = RR_COUNT;
    struct slot *s = counted ? find(&k) : NULL;
    if (open_total >= max_total) {
        why = RR_TOTAL;
    } else if (s != NULL && s->n >= max_per_client) {
        why = RR_PER_CLIENT;
    }
    if (why != RR_COUNT) {
        atomic_fetch_add(&refused[why], 1);
        log_refusal(why, sa);
        pthread_mutex_unlock(&mu);
        return false;
    }
    open_total++;
    if (s != NULL) {
        if (s->n == 0) {
            s->k = k;
        }
        s->n++;
        *key = k;
    } else {
        key->family = 0xff; /* counted in the total only */
    }
    atomic_fetch_add(&open_by[l], 1);
    pthread_mutex_unlock(&mu);
    return true;
}

void connlim_release(enum connlim_listener l, struct connlim_key *key)
{
    if (key->family == 0) {
        return;
    }
    pthread_mutex_lock(&mu);
    if (tab != NULL) {
        if (key->family != 0xff) {
            struct slot *s = find(key);
            if (s->n > 0 && --s->n == 0) {
                remove_slot(s);
            }
        }
        open_total--;
        atomic_fetch_sub(&open_by[l], 1);
    }
    pthread_mutex_unlock(&mu);
    key->family = 0;
}

void connlim_metrics_text(struct evbuffer *o)
{
    evbuffer_add_printf(o, "# HELP miradb_connections_open Open client connections, by "
                           "listener.\n# TYPE miradb_connections_open gauge\n");
    for (int l = 0; l < CL_LISTENERS; l++) {
        evbuffer_add_printf(o, "miradb_connections_open{listener=\"%s\"} %llu\n", listener_names[l],
                            (unsigned long long)atomic_load(&open_by[l]));
    }
    evbuffer_add_printf(o, "# HELP miradb_connections_refused_total Connections closed at accept "
                           "by a connection cap, by reason.\n"
                           "# TYPE miradb_connections_refused_total counter\n");
    for (int r = 0; r < RR_COUNT; r++) {
        evbuffer_add_printf(o, "miradb_connections_refused_total{reason=\"%s\"} %llu\n",
                            rr_names[r], (unsigned long long)atomic_load(&refused[r]));
    }
}
