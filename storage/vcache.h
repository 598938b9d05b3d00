/*
 * vcache.h - the process-wide verification cache: which tables of which
 * block files have already had their CRC checked.
 *
 * A file is named by what changes when it is replaced (device, inode,
 * length, mtime), so a block rewritten under the same path by compaction
 * never matches an entry of the file it replaced. An entry is only
 * trusted (and only stored) once the file's mtime is older than the
 * settle window: a file written within the window could still change
 * without its mtime moving (coarse timestamps). The cache holds at most
 * VCACHE_CAP entries and is cleared wholesale when full (counted).
 *
 * Threads: any; one mutex, taken once per table verification, never per row.
 */
#ifndef MIRADB_VCACHE_H
#define MIRADB_VCACHE_H

#include <stdbool.h>
#include <stdint.h>

#define VCACHE_CAP 65536
#define VCACHE_SETTLE_NS_DEFAULT 2000000000ll

struct vcache_key {
    uint64_t dev;
    uint64_t ino;
    uint64_t size;
    int64_t mtime_ns;
    uint32_t table; /* table index in the file; UINT32_MAX for the footer */
};

/* True (a hit) when |k| was verified and its file is settled; false (a
 * miss) otherwise. Counts the hit or miss. */
bool vcache_lookup(const struct vcache_key *k);
/* Remembers a verified table if its file is settled (else does nothing).
 * Clears the cache first when it holds VCACHE_CAP entries. */
void vcache_insert(const struct vcache_key *k);
/* Settle window in ns (tests set 0); negative restores the default. */
void vcache_set_settle_ns(int64_t ns);
void vcache_clear(void);
uint32_t vcache_size(void);

struct vcache_stats {
    uint64_t hits;
    uint64_t misses;
    uint64_t clears;
};
void vcache_get_stats(struct vcache_stats *out);

#endif
