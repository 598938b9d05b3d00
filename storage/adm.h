/*
 * adm.h - the memory budget (--memory-budget) every byte ingest holds is
 * charged to: request bodies being read, gunzipped copies, decoded batches,
 * open blocks. Charge before taking, uncharge where freed, so the two
 * cannot drift apart. Lock-free; any thread.
 */
#ifndef MIRADB_ADM_H
#define MIRADB_ADM_H

#include <stdbool.h>
#include <stdint.h>

void adm_init(uint64_t budget);
/*
 * Keeps the last |n| bytes of the budget out of adm_try_charge's reach:
 * they are for adm_charge (open-block growth, seal scratch, cached chunks)
 * and for what the process holds uncharged (thread stacks, per-thread
 * caches, allocator slack), so that admission filling the budget does not
 * take the process past it. 0 (the default) admits up to the budget.
 */
void adm_set_reserve(uint64_t n);
/* Charges |n| if it fits under the budget less the reserve; false
 * (nothing charged) if not. */
bool adm_try_charge(uint64_t n);
/* Charges |n| even past the budget: only for memory already committed
 * (an open block's growth after its WAL frame was written). */
void adm_charge(uint64_t n);
void adm_uncharge(uint64_t n);
uint64_t adm_in_use(void);
uint64_t adm_budget(void);

#endif
