/*
 * diskfree.h - the free-space watch on the data directory's filesystem
 * (--min-free-bytes): one thread calls statvfs(2) every DISKFREE_EVERY_MS
 * and at once after a write error (diskfree_kick), and keeps one flag that
 * the shards read before each WAL append. While the flag is set the shards
 * refuse exports with -ENOSPC (retryable: 503 / UNAVAILABLE upstream), so
 * the seals that free WAL space still find room; queries and seals go on.
 *
 * The flag sets when the free bytes fall below the minimum and clears when
 * they are back above it by a sixteenth (at least 1 MiB), so a filesystem
 * hovering at the threshold does not flap. Each change calls the hook (on
 * the watch thread): storage never logs, server/ does.
 */
#ifndef MIRADB_DISKFREE_H
#define MIRADB_DISKFREE_H

#include <stdbool.h>
#include <stdint.h>

#define DISKFREE_EVERY_MS 1000

/* A change of the flag: |low| is the new state, |free_bytes| what statvfs
 * said (a failing statvfs changes nothing). */
typedef void (*diskfree_fn)(bool low, uint64_t free_bytes, uint64_t min_free);

struct diskfree_stats {
    uint64_t free_bytes; /* at the last check */
    uint64_t min_free;   /* --min-free-bytes; 0: the watch is off */
    uint64_t refusals;   /* exports refused while low */
    uint64_t checks;     /* statvfs calls made */
    bool low;
};

/*
 * Starts the watch on |dir| (copied), after one check done on the caller's
 * thread (so a daemon started on a nearly full disk refuses from its first
 * export). With |min_free| 0 the free bytes are still watched (/metrics)
 * but diskfree_low() stays false. 0 or -errno.
 */
int diskfree_start(const char *dir, uint64_t min_free, diskfree_fn hook);
/* Stops and joins the thread; safe when none was started. The hook is
 * not called after this returns. */
void diskfree_stop(void);
/* True while free space is below the minimum. Any thread; one atomic load. */
bool diskfree_low(void);
/* Counts one export refused because diskfree_low() was true. */
void diskfree_refused(void);
/* Asks for a check now (a write failed); returns at once. Any thread. */
void diskfree_kick(void);
void diskfree_get_stats(struct diskfree_stats *out);

#endif
