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
/* Charges |n| if it fits under the budget less the reserve, less what the
 * process holds uncounted (adm_set_uncounted) and what queries keep free
 * (adm_demand_add); false (nothing charged) if not. */
bool adm_try_charge(uint64_t n);
/* Charges |n| even past the budget: only for memory already committed
 * (an open block's growth after its WAL frame was written). */
void adm_charge(uint64_t n);
void adm_uncharge(uint64_t n);
uint64_t adm_in_use(void);
uint64_t adm_budget(void);
/* The budget less the reserve (where admission stops). */
uint64_t adm_admit_limit(void);
/*
 * Tracking one thread's charges: between adm_track_begin and adm_track_end
 * every adm_charge, adm_try_charge that succeeds and adm_uncharge made on
 * the calling thread is summed (net), and adm_track_peak returns the
 * highest that sum reached: what one merge held at most (compact.c).
 * Charges another thread returns are not seen (an upper bound then).
 */
void adm_track_begin(void);
uint64_t adm_track_peak(void);
void adm_track_end(void);

/*
 * What the process holds that no charge counts (its RSS less adm_in_use,
 * never below 0: thread stacks, allocator slack, the libraries' buffers,
 * zstd contexts), measured by the caller (the daemon's main loop reads
 * /proc/self/statm every 20 ms): admission leaves it out of what it
 * admits, so the budget compares with the whole process, not only with
 * what was charged. Any thread.
 */
void adm_set_uncounted(uint64_t n);
uint64_t adm_uncounted(void);
/* Bytes a query waits for (n > 0 while it waits, -n when done): admission
 * leaves them free meanwhile, so that ingest does not take the room a
 * seal frees before the query gets it (qctx_load). */
void adm_demand_add(int64_t n);
/* The bytes queries wait for now (0: none waits). */
uint64_t adm_demand(void);
/* The bytes adm_try_charge would admit now (0: none). */
uint64_t adm_room(void);
/* How many adm_try_charge calls found no room, since adm_init: how often
 * admission was refused memory (a request then waits or is shed). Caches
 * watch it to give memory back as soon as admission runs short, the
 * compactor to step back while ingest is short of room. */
uint64_t adm_refusals(void);
/* How far the budget's count is above where admission stops now (as
 * adm_try_charge, without the queries' demand; 0: not): what caches (idle
 * tables, page windows) give back so that they do not hold memory ingest
 * could be admitted to. */
uint64_t adm_excess(void);
/* Whether |n| more bytes keep the count plus the uncounted part within
 * |limit| bytes. */
bool adm_fits(uint64_t n, uint64_t limit);

/*
 * Pacing. The sealer is slower than decode + append, so under a closed loop
 * open blocks waiting to be sealed fill the budget, and admission would
 * then stop every request until a whole block is sealed and freed: a few
 * requests would wait ~100 ms each (the ack p99) while the rest went
 * through. Instead, once the budget is more than half used, each admission
 * is delayed by ADM_PACE_MAX_NS times the square of how far past half it is
 * (as a share of the other half): small steps while the lag is small, and
 * up to ADM_PACE_MAX_NS at the admission limit, enough to hold ingest back
 * when the seal threads get little CPU. The same total slowdown, spread
 * over every request. Only memory the sealer holds counts (open blocks handed to it and
 * not yet sealed, adm_sealing_add), so a budget filled by other charges
 * (query tables, caches) does not slow ingest that the sealer keeps up with.
 */
#define ADM_PACE_MAX_NS (40ull * 1000000u)
/* |n| bytes (already charged) were handed to the sealer, or (negative) sealed. */
void adm_sealing_add(int64_t n);
uint64_t adm_sealing(void);
/* Charges |n| bytes a cache keeps for reuse and gives back on demand (the
 * open blocks' chunk cache), or uncharges -|n|: counted in adm_in_use like
 * any charge, but not by pacing, since it is not the sealer's lag. */
void adm_cached_add(int64_t n);
uint64_t adm_cached(void);
/* How long an admission arriving now should wait first (ns); 0: at once. */
uint64_t adm_pace_ns(void);

#endif
