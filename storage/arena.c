/*
 * arena.c - chunked bump allocator (see arena.h).
 *
 * Chunks form a singly linked list, newest first. An allocation larger than
 * a quarter of the chunk size gets a chunk of its own, so a big string does
 * not waste the rest of the current chunk.
 */
#include "storage/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct chunk {
    struct chunk *next;
    size_t size; /* usable bytes after the header */
    size_t used;
    max_align_t pad[]; /* data follows, 16-byte aligned */
};

struct arena {
    struct chunk *head;
    size_t chunk_size;
    size_t footprint;
    size_t limit;
    int (*charge)(void *ctx, size_t n); /* arena_set_charge, or NULL */
    void (*uncharge)(void *ctx, size_t n);
    void *charge_ctx;
};

#define ALIGN16(n) (((n) + 15u) & ~(size_t)15u)

arena *arena_new(size_t chunk)
{
    arena *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        return NULL;
    }
    a->chunk_size = chunk ? chunk : 64u << 10;
    return a;
}

static void chunk_free(arena *a, struct chunk *c)
{
    if (a->uncharge != NULL) {
        a->uncharge(a->charge_ctx, sizeof(struct chunk) + c->size);
    }
    free(c);
}

void arena_free(arena *a)
{
    if (a == NULL) {
        return;
    }
    struct chunk *c = a->head;
    while (c != NULL) {
        struct chunk *next = c->next;
        chunk_free(a, c);
        c = next;
    }
    free(a);
}

static struct chunk *chunk_new(arena *a, size_t size)
{
    size_t total = sizeof(struct chunk) + size;
    if (a->limit != 0 && a->footprint + total > a->limit) {
        return NULL;
    }
    if (a->charge != NULL && a->charge(a->charge_ctx, total) != 0) {
        return NULL;
    }
    struct chunk *c = aligned_alloc(16, ALIGN16(total));
    if (c == NULL) {
        if (a->uncharge != NULL) {
            a->uncharge(a->charge_ctx, total);
        }
        return NULL;
    }
    c->size = size;
    c->used = 0;
    a->footprint += total;
    return c;
}

void *arena_alloc(arena *a, size_t n)
{
    n = ALIGN16(n ? n : 1);
    struct chunk *c = a->head;
    if (c != NULL && c->size - c->used >= n) {
        void *p = (char *)c->pad + c->used;
        c->used += n;
        return p;
    }
    if (n > a->chunk_size / 4) {
        /* Own chunk, linked behind the current one so its space stays in use. */
        struct chunk *big = chunk_new(a, n);
        if (big == NULL) {
            return NULL;
        }
        big->used = n;
        if (c == NULL) {
            a->head = big;
            big->next = NULL;
        } else {
            big->next = c->next;
            c->next = big;
        }
        return big->pad;
    }
    c = chunk_new(a, a->chunk_size);
    if (c == NULL) {
        return NULL;
    }
    c->next = a->head;
    a->head = c;
    c->used = n;
    return c->pad;
}

char *arena_strndup(arena *a, const char *s, size_t n)
{
    char *p = arena_alloc(a, n + 1);
    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

void arena_reset(arena *a)
{
    struct chunk *keep = NULL;
    /* Keep the oldest regular-sized chunk: it is the one every request uses. */
    for (struct chunk *c = a->head; c != NULL; c = c->next) {
        if (c->size == a->chunk_size) {
            keep = c;
        }
    }
    struct chunk *c = a->head;
    while (c != NULL) {
        struct chunk *next = c->next;
        if (c != keep) {
            chunk_free(a, c);
        }
        c = next;
    }
    a->head = keep;
    a->footprint = 0;
    if (keep != NULL) {
        keep->next = NULL;
        keep->used = 0;
        a->footprint = sizeof(struct chunk) + keep->size;
    }
}

size_t arena_footprint(const arena *a)
{
    return a->footprint;
}

void arena_set_limit(arena *a, size_t limit)
{
    a->limit = limit;
}

void arena_set_charge(arena *a, int (*charge)(void *ctx, size_t n),
                      void (*uncharge)(void *ctx, size_t n), void *ctx)
{
    a->charge = charge;
    a->uncharge = uncharge;
    a->charge_ctx = ctx;
}
