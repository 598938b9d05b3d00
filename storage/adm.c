/*
 * adm.c - the memory budget (see adm.h): one atomic counter.
 */
#include "storage/adm.h"

static uint64_t budget;
static uint64_t admit_limit; /* budget less the reserve */
static uint64_t in_use;

void adm_init(uint64_t b)
{
    budget = b;
    admit_limit = b;
    __atomic_store_n(&in_use, 0, __ATOMIC_RELAXED);
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
