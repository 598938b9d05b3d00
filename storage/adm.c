/*
 * adm.c - the memory budget (see adm.h): one atomic counter.
 */
#include "storage/adm.h"

#include <stdbool.h>

static uint64_t budget;
static uint64_t admit_limit; /* budget less the reserve */
static uint64_t in_use;
static int64_t sealing;    /* charged bytes the sealer holds */
static uint64_t uncounted; /* adm_set_uncounted */
static int64_t demand;     /* adm_demand_add */
static int64_t cached;     /* adm_cached_add: part of in_use */
static uint64_t refusals;  /* adm_try_charge that found no room */

/* adm_track_begin: this thread's net charges and their peak. */
static _Thread_local bool track_on;
static _Thread_local int64_t track_net, track_peak;

static inline void track(int64_t n)
{
    if (track_on) {
        track_net += n;
        if (track_net > track_peak) {
            track_peak = track_net;
        }
    }
}

void adm_init(uint64_t b)
{
    budget = b;
    admit_limit = b;
    __atomic_store_n(&in_use, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sealing, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&uncounted, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&demand, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&cached, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&refusals, 0, __ATOMIC_RELAXED);
}

void adm_set_reserve(uint64_t n)
{
    admit_limit = n < budget ? budget - n : 0;
}

/* Where admission stops now: the admission limit less the uncounted
 * part. The reserve stays whole for what lands after admission (an open
 * block's growth past its estimate, seal scratch, the tables and pages a
 * query loads): measured under the rss bench's query arm, those are 30-45
 * MiB at a 256 MiB budget, more than the reserve alone, so the uncounted
 * part cannot share it. */
static uint64_t eff_limit(void)
{
    uint64_t u = adm_uncounted();
    return u < admit_limit ? admit_limit - u : 0;
}

/* eff_limit less what queries wait for. */
static uint64_t admit_room(void)
{
    int64_t d = __atomic_load_n(&demand, __ATOMIC_RELAXED);
    uint64_t lim = eff_limit(), off = d > 0 ? (uint64_t)d : 0;
    return off < lim ? lim - off : 0;
}

bool adm_try_charge(uint64_t n)
{
    uint64_t lim = admit_room();
    uint64_t cur = __atomic_load_n(&in_use, __ATOMIC_RELAXED);
    do {
        if (cur + n > lim) {
            __atomic_add_fetch(&refusals, 1, __ATOMIC_RELAXED);
            return false;
        }
    } while (!__atomic_compare_exchange_n(&in_use, &cur, cur + n, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    track((int64_t)n);
    return true;
}

void adm_charge(uint64_t n)
{
    __atomic_add_fetch(&in_use, n, __ATOMIC_RELAXED);
    track((int64_t)n);
}

void adm_uncharge(uint64_t n)
{
    __atomic_sub_fetch(&in_use, n, __ATOMIC_RELAXED);
    track(-(int64_t)n);
}

uint64_t adm_refusals(void)
{
    return __atomic_load_n(&refusals, __ATOMIC_RELAXED);
}

uint64_t adm_room(void)
{
    uint64_t lim = admit_room(), cur = adm_in_use();
    return cur < lim ? lim - cur : 0;
}

void adm_track_begin(void)
{
    track_on = true;
    track_net = 0;
    track_peak = 0;
}

uint64_t adm_track_peak(void)
{
    return track_peak > 0 ? (uint64_t)track_peak : 0;
}

void adm_track_end(void)
{
    track_on = false;
}

uint64_t adm_in_use(void)
{
    return __atomic_load_n(&in_use, __ATOMIC_RELAXED);
}

uint64_t adm_budget(void)
{
    return budget;
}

uint64_t adm_admit_limit(void)
{
    return admit_limit;
}

void adm_set_uncounted(uint64_t n)
{
    __atomic_store_n(&uncounted, n, __ATOMIC_RELAXED);
}

uint64_t adm_uncounted(void)
{
    return __atomic_load_n(&uncounted, __ATOMIC_RELAXED);
}

void adm_demand_add(int64_t n)
{
    __atomic_add_fetch(&demand, n, __ATOMIC_RELAXED);
}

uint64_t adm_demand(void)
{
    int64_t d = __atomic_load_n(&demand, __ATOMIC_RELAXED);
    return d > 0 ? (uint64_t)d : 0;
}

uint64_t adm_excess(void)
{
    if (budget == 0) {
        return 0; /* no budget set (tests): nothing to give back */
    }
    uint64_t held = adm_in_use(), lim = eff_limit();
    return held > lim ? held - lim : 0;
}

bool adm_fits(uint64_t n, uint64_t limit)
{
    return adm_in_use() + adm_uncounted() + n <= limit;
}

void adm_sealing_add(int64_t n)
{
    __atomic_add_fetch(&sealing, n, __ATOMIC_RELAXED);
}

uint64_t adm_sealing(void)
{
    int64_t n = __atomic_load_n(&sealing, __ATOMIC_RELAXED);
    return n > 0 ? (uint64_t)n : 0;
}

void adm_cached_add(int64_t n)
{
    /* The cache's count first on a charge, last on an uncharge, so that
     * in_use - cached never goes below what else is charged. */
    if (n >= 0) {
        __atomic_add_fetch(&in_use, (uint64_t)n, __ATOMIC_RELAXED);
        __atomic_add_fetch(&cached, n, __ATOMIC_RELAXED);
    } else {
        __atomic_add_fetch(&cached, n, __ATOMIC_RELAXED);
        __atomic_sub_fetch(&in_use, (uint64_t)-n, __ATOMIC_RELAXED);
    }
}

uint64_t adm_cached(void)
{
    int64_t n = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    return n > 0 ? (uint64_t)n : 0;
}

uint64_t adm_pace_ns(void)
{
    uint64_t soft = admit_limit / 2;
    uint64_t cur = adm_in_use(), c = adm_cached();
    cur = cur > c ? cur - c : 0;
    if (cur <= soft || admit_limit <= soft) {
        return 0;
    }
    uint64_t over = cur - soft;
    uint64_t held = adm_sealing();
    if (over > held) {
        over = held; /* what the sealer does not hold is not its lag */
    }
    uint64_t span = admit_limit - soft;
    if (over >= span) {
        return ADM_PACE_MAX_NS;
    }
    double f = (double)over / (double)span;
    return (uint64_t)((double)ADM_PACE_MAX_NS * f * f + 0.5);
}
