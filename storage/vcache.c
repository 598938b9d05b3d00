/*
 * vcache.c - the verification cache (vcache.h): an open-addressing hash set
 * of keys, twice VCACHE_CAP slots so probes stay short, allocated on first
 * insert. Clearing is a memset: the cap makes it rare and bounded (2 MiB).
 */
#include "storage/vcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/clock.h"

#define SLOTS (2 * VCACHE_CAP) /* power of two */

struct slot {
    uint64_t dev, ino, size;
    int64_t mtime_ns;
    uint32_t table;
    uint32_t used;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *slots;
static uint32_t n_used;
static _Atomic int64_t settle_ns = VCACHE_SETTLE_NS_DEFAULT;
static _Atomic uint64_t hits, misses, clears;

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 33;
    return h;
}

static uint32_t slot_of(const struct vcache_key *k)
{
    uint64_t h = mix(k->dev ^ mix(k->ino ^ mix(k->size ^ mix((uint64_t)k->mtime_ns ^ k->table))));
    return (uint32_t)(h & (SLOTS - 1));
}

static bool same(const struct slot *s, const struct vcache_key *k)
{
    return s->used && s->dev == k->dev && s->ino == k->ino && s->size == k->size &&
           s->mtime_ns == k->mtime_ns && s->table == k->table;
}

static bool settled(const struct vcache_key *k)
{
    int64_t now = (int64_t)clock_wall_ns();
    return now - k->mtime_ns >= atomic_load(&settle_ns);
}

bool vcache_lookup(const struct vcache_key *k)
{
    bool found = false;
    if (settled(k)) {
        pthread_mutex_lock(&lock);
        if (slots != NULL) {
            for (uint32_t i = slot_of(k);; i = (i + 1) & (SLOTS - 1)) {
                if (!slots[i].used) {
                    break;
                }
                if (same(&slots[i], k)) {
                    found = true;
                    break;
                }
            }
        }
        pthread_mutex_unlock(&lock);
    }
    atomic_fetch_add(found ? &hits : &misses, 1);
    return found;
}

void vcache_insert(const struct vcache_key *k)
{
    if (!settled(k)) {
        return;
    }
    pthread_mutex_lock(&lock);
    if (slots == NULL) {
        slots = calloc(SLOTS, sizeof(*slots));
        if (slots == NULL) {
            pthread_mutex_unlock(&lock);
            return; /* no cache: every table is hashed, which is only slower */
        }
    }
    uint32_t i = slot_of(k);
    for (;; i = (i + 1) & (SLOTS - 1)) {
        if (!slots[i].used) {
            break;
        }
        if (same(&slots[i], k)) {
            pthread_mutex_unlock(&lock);
            return;
        }
    }
    if (n_used >= VCACHE_CAP) {
        memset(slots, 0, SLOTS * sizeof(*slots));
        n_used = 0;
        atomic_fetch_add(&clears, 1);
        i = slot_of(k);
    }
    slots[i] = (struct slot){k->dev, k->ino, k->size, k->mtime_ns, k->table, 1};
    n_used++;
    pthread_mutex_unlock(&lock);
}

void vcache_set_settle_ns(int64_t ns)
{
    atomic_store(&settle_ns, ns < 0 ? VCACHE_SETTLE_NS_DEFAULT : ns);
}

void vcache_clear(void)
{
    pthread_mutex_lock(&lock);
    if (slots != NULL) {
        memset(slots, 0, SLOTS * sizeof(*slots));
    }
    n_used = 0;
    pthread_mutex_unlock(&lock);
}

uint32_t vcache_size(void)
{
    pthread_mutex_lock(&lock);
    uint32_t n = n_used;
    pthread_mutex_unlock(&lock);
    return n;
}

void vcache_get_stats(struct vcache_stats *out)
{
    out->hits = atomic_load(&hits);
    out->misses = atomic_load(&misses);
    out->clears = atomic_load(&clears);
}
