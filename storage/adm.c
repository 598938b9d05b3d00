/*
 * adm.c - the memory budget (see adm.h): one atomic counter.
 */
#include "storage/adm.h"

static uint64_t budget;
static uint64_t admit_limit; /* budget less the reserve */
static uint64_t in_use;
static int64_t sealing; /* charged bytes the sealer holds */

void adm_init(uint64_t b)
{
    budget = b;
    admit_limit = b;
    __atomic_store_n(&in_use, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&sealing, 0, __ATOMIC_RELAXED);
}

void adm_set_reserve(uint64_t n)
{
    admit_limit = n < budget ? budget - n : 0;
}

bool adm_try_charge(uint64_t n)
{
    uint64_t cur = __atomic_load_n(&in_use, __ATOMIC_RELAXED);
    do {
        if (cur + n > admit_limit) {
            return false;
        }
    } while (!__atomic_compare_exchange_n(&in_use, &cur, cur + n, true, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return true;
}

void adm_charge(uint64_t n)
{
    __atomic_add_fetch(&in_use, n, __ATOMIC_RELAXED);
}

void adm_uncharge(uint64_t n)
{
    __atomic_sub_fetch(&in_use, n, __ATOMIC_RELAXED);
}

uint64_t adm_in_use(void)
{
    return __atomic_load_n(&in_use, __ATOMIC_RELAXED);
}

uint64_t adm_budget(void)
{
    return budget;
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

uint64_t adm_pace_ns(void)
{
    uint64_t soft = admit_limit / 2;
    uint64_t cur = adm_in_use();
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
