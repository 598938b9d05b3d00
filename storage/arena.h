/*
 * arena.h - chunked bump allocator: many small allocations, one reset.
 *
 * A decode allocates everything it needs (jansson nodes, protobuf-c
 * messages, scratch) from the request's arena and frees it all with one
 * arena_reset(). Chunks never move, so pointers stay valid until the reset.
 * Not thread-safe: an arena belongs to whoever holds the request.
 */
#ifndef MIRADB_ARENA_H
#define MIRADB_ARENA_H

#include <stddef.h>

typedef struct arena arena;

/* Returns NULL on out of memory. |chunk| is the usual chunk size (0: 64 KiB). */
arena *arena_new(size_t chunk);
void arena_free(arena *a);

/* 16-byte aligned; NULL when out of memory or when the allocation would
 * take the arena past its limit (arena_set_limit). Valid until arena_reset. */
void *arena_alloc(arena *a, size_t n);

/* Copies |n| bytes and adds a NUL. */
char *arena_strndup(arena *a, const char *s, size_t n);

/* Frees everything allocated; keeps the first chunk for reuse. */
void arena_reset(arena *a);

/* Bytes of chunk memory held right now (what a budget charges). */
size_t arena_footprint(const arena *a);

/* Caps arena_footprint(); 0 means no cap. */
void arena_set_limit(arena *a, size_t limit);

/*
 * Charges the arena's chunks to an account as they come and go: |charge|
 * is called with a chunk's bytes before the chunk is allocated (nonzero:
 * the allocation fails, nothing held, nothing to uncharge), |uncharge|
 * with the bytes of every chunk freed (arena_reset, arena_free). Set it on
 * a fresh arena (the chunks held already are not charged); NULL functions
 * turn it off (the chunks charged so far then stay charged: the account's
 * owner settles them). One call per chunk, never per allocation.
 */
void arena_set_charge(arena *a, int (*charge)(void *ctx, size_t n),
                      void (*uncharge)(void *ctx, size_t n), void *ctx);

#endif
