/*
 * oblock.c - the open block (see oblock.h): columns in chunks that never
 * move, so readers on other threads need no lock.
 *
 * LAYOUT
 *   rows       Chunks of OBLOCK_CHUNK_ROWS rows. A chunk is one allocation
 *              holding one array per column (struct log_grp, span_grp,
 *              point_grp below): fixed-width values inline, variable-length
 *              ones as a (pointer, length) into the byte area.
 *   bytes      Chunks of BYTES_CHUNK bytes, filled front to back; a value
 *              larger than a quarter chunk gets a chunk of its own (so a big
 *              body wastes at most a quarter chunk of the current one).
 *   dicts      Resources, scopes and metrics: the public view structs
 *              themselves (struct res_view, ...), in chunks of DICT_CHUNK,
 *              one per distinct content. A writer-only open-addressing table
 *              per dict maps an XXH3 of the content to the id; equal hashes
 *              are confirmed by comparing the content.
 *   cache      Row chunks and regular byte chunks of a freed block go to a
 *              bounded process-wide cache that new blocks allocate from.
 *   directory  Each of the above is found through a two-level directory:
 *              a fixed array of DIR_L1 pointers inside struct oblock, each
 *              to an array of DIR_L2 chunk pointers allocated once. Nothing
 *              a reader can reach is ever reallocated or moved.
 *
 * PUBLICATION
 *   The writer fills rows past the published count, adds what the batch
 *   needs to the dicts, and only then stores the new dict counts and row
 *   count with release semantics. A reader loads the row count with acquire
 *   semantics, so every byte of rows [0, n) - the directory entries, the
 *   column values, the bytes they point to and the dict entries they name -
 *   was written before it and is never written again. A failed append
 *   simply does not publish: its half-written rows past the count are
 *   overwritten by the next append.
 *
 * COST
 *   Per row: stores into the columns and one memcpy per non-empty variable
 *   field; no malloc (chunks are amortized over 4096 rows or 1 MiB, and
 *   usually come warm from the cache). Per
 *   batch resource, scope and metric: one hash and one probe.
 */
#include "storage/oblock.h"

#include "storage/adm.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#define CH OBLOCK_CHUNK_ROWS
#define DIR_L2 1024u
#define DIR_L1 256u /* DIR_L1 * DIR_L2 * CH == OBLOCK_MAX_ROWS */
#define DICT_CHUNK 256u
#define DICT_MAX (DIR_L1 * DIR_L2 * DICT_CHUNK)
#define BYTES_CHUNK (1u << 20)

_Static_assert((uint64_t)DIR_L1 *DIR_L2 *CH == OBLOCK_MAX_ROWS, "directory covers the rows");

/* A variable-length value in the byte area. p is never NULL. */
struct sref {
    const uint8_t *p;
    uint32_t n;
};

struct log_grp {
    uint64_t time_ns[CH];
    uint64_t observed_ns[CH];
    uint32_t scope[CH];
    int32_t severity_number[CH];
    uint32_t flags[CH];
    uint32_t dropped_attrs[CH];
    uint32_t n_attrs[CH];
    uint8_t body_type[CH];
    uint8_t bits[CH]; /* LB_* */
    uint8_t trace_id[CH][16];
    uint8_t span_id[CH][8];
    struct sref severity_text[CH];
    struct sref body[CH]; /* body_str for VAL_STR, body_val otherwise */
    struct sref attrs[CH];
    struct sref event_name[CH];
};
#define LB_TRACE 1u
#define LB_SPAN 2u

struct span_grp {
    uint64_t start_ns[CH];
    uint64_t end_ns[CH];
    uint32_t scope[CH];
    int32_t kind[CH];
    uint32_t flags[CH];
    int32_t status_code[CH];
    uint32_t n_attrs[CH];
    uint32_t dropped_attrs[CH];
    uint32_t n_events[CH];
    uint32_t dropped_events[CH];
    uint32_t n_links[CH];
    uint32_t dropped_links[CH];
    uint8_t has_parent[CH];
    uint8_t trace_id[CH][16];
    uint8_t span_id[CH][8];
    uint8_t parent_span_id[CH][8];
    struct sref trace_state[CH];
    struct sref name[CH];
    struct sref status_message[CH];
    struct sref attrs[CH];
    struct sref events[CH];
    struct sref links[CH];
};

struct point_grp {
    uint64_t start_ns[CH];
    uint64_t time_ns[CH];
    uint64_t value[CH]; /* the union's bits */
    uint64_t count[CH];
    double sum[CH];
    double min[CH];
    double max[CH];
    uint32_t metric[CH];
    uint32_t n_attrs[CH];
    uint32_t flags[CH];
    uint32_t n_exemplars[CH];
    uint8_t value_type[CH];
    uint8_t bits[CH]; /* PB_* */
    struct sref attrs[CH];
    struct sref detail[CH];
    struct sref exemplars[CH];
};
#define PB_SUM 1u
#define PB_MIN 2u
#define PB_MAX 4u

struct dir {
    void **l1[DIR_L1];
};

struct bchunk {
    struct bchunk *next;
    size_t size; /* of data[] */
    uint8_t data[];
};

/* Writer-only hash table: id + 1 (0 = empty slot) by content hash. */
struct hent {
    uint64_t h;
    uint32_t id1;
};

struct htab {
    struct hent *e;
    uint32_t mask; /* capacity - 1; capacity a power of two, or 0 */
    uint32_t n;
};

/*
 * Written by its shard thread only (oblock_append); read by any thread
 * through the published counts (atomics) and what they cover.
 */
struct oblock {
    enum signal sig;
    _Atomic uint64_t n_rows;
    _Atomic uint32_t n_res, n_scopes, n_metrics;
    _Atomic size_t bytes;
    _Atomic uint64_t max_seq;

    /* writer side */
    uint64_t w_rows;
    uint32_t w_res, w_scopes, w_metrics;
    size_t w_bytes;
    size_t grp_size;
    uint8_t *bcur;
    size_t bleft;
    struct bchunk *bchunks;
    struct htab ht_res, ht_scope, ht_metric;
    uint32_t *map_res, *map_scope, *map_metric; /* batch index -> block id */
    uint32_t cap_res, cap_scope, cap_metric;

    struct dir rows, res, scopes, metrics;
};

static const uint8_t empty[1];

/* ---- chunk cache (process-wide) ---- */

/*
 * Fresh memory costs a page fault and a kernel zeroing per 4 KiB on first
 * touch, which measured at about half of the append time. So the row chunks
 * and regular byte chunks of freed blocks are kept (up to a limit) and handed
 * to the next blocks; their old contents are simply overwritten. One list
 * per size class, under a mutex taken once per chunk (every 4096 rows or
 * 1 MiB), never per row.
 */
enum { CC_BYTES = 0, CC_LOGS = SIG_LOGS, CC_SPANS = SIG_TRACES, CC_POINTS = SIG_METRICS, CC_N };

struct cached {
    struct cached *next;
};

static struct {
    pthread_mutex_t lock;
    struct cached *head[CC_N];
    size_t bytes;
    size_t limit;
    size_t keep_room;                         /* oblock_cache_keep_room */
    uint64_t reused, fresh, dropped, trimmed; /* struct oblock_cache_stats */
} cache = {.lock = PTHREAD_MUTEX_INITIALIZER, .limit = OBLOCK_CACHE_DEFAULT};

/* Under ASan a cached chunk is poisoned (but for its list link), so a view
 * still used after its block was freed is reported as it would be after a
 * free(). */
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define CACHE_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define CACHE_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define CACHE_POISON(p, n) ((void)(p), (void)(n))
#define CACHE_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

static void *cache_get(int cls, size_t size)
{
    pthread_mutex_lock(&cache.lock);
    struct cached *c = cache.head[cls];
    if (c != NULL) {
        cache.head[cls] = c->next;
        cache.bytes -= size;
        cache.reused++;
        adm_cached_add(-(int64_t)size); /* the block taking it charges it from here on */
    } else {
        cache.fresh++;
    }
    pthread_mutex_unlock(&cache.lock);
    if (c == NULL) {
        return malloc(size);
    }
    CACHE_UNPOISON((char *)c + sizeof(*c), size - sizeof(*c));
    return c;
}

/* Called with cache.lock held. */
static void do_cache_put(int cls, void *p, size_t size)
{
    if (cache.bytes + size > cache.limit || (cache.keep_room > 0 && adm_room() < cache.keep_room)) {
        cache.dropped++;
        free(p);
        return;
    }
    struct cached *c = p;
    c->next = cache.head[cls];
    cache.head[cls] = c;
    cache.bytes += size;
    adm_cached_add((int64_t)size);
    CACHE_POISON((char *)c + sizeof(*c), size - sizeof(*c));
}

static size_t class_size(int cls)
{
    switch (cls) {
    case CC_LOGS:
        return sizeof(struct log_grp);
    case CC_SPANS:
        return sizeof(struct span_grp);
    case CC_POINTS:
        return sizeof(struct point_grp);
    }
    return sizeof(struct bchunk) + BYTES_CHUNK;
}

/* Frees cached chunks until the cache holds at most |keep| bytes; returns
 * the bytes freed. Called with cache.lock held. */
static size_t do_cache_shrink(size_t keep)
{
    size_t freed = 0;
    for (int cls = 0; cls < CC_N && cache.bytes > keep; cls++) {
        while (cache.head[cls] != NULL && cache.bytes > keep) {
            struct cached *c = cache.head[cls];
            cache.head[cls] = c->next;
            cache.bytes -= class_size(cls);
            cache.trimmed++;
            freed += class_size(cls);
            adm_cached_add(-(int64_t)class_size(cls));
            CACHE_UNPOISON((char *)c + sizeof(*c), class_size(cls) - sizeof(*c));
            free(c);
        }
    }
    return freed;
}

void oblock_cache_limit(size_t bytes)
{
    pthread_mutex_lock(&cache.lock);
    cache.limit = bytes;
    do_cache_shrink(bytes);
    pthread_mutex_unlock(&cache.lock);
}

void oblock_cache_keep_room(size_t bytes)
{
    pthread_mutex_lock(&cache.lock);
    cache.keep_room = bytes;
    pthread_mutex_unlock(&cache.lock);
}

size_t oblock_cache_trim(size_t bytes)
{
    pthread_mutex_lock(&cache.lock);
    size_t freed = do_cache_shrink(bytes < cache.bytes ? cache.bytes - bytes : 0);
    pthread_mutex_unlock(&cache.lock);
    return freed;
}

void oblock_cache_get_stats(struct oblock_cache_stats *out)
{
    pthread_mutex_lock(&cache.lock);
    *out = (struct oblock_cache_stats){
        .bytes = cache.bytes,
        .limit = cache.limit,
        .reused = cache.reused,
        .fresh = cache.fresh,
        .dropped = cache.dropped,
        .trimmed = cache.trimmed,
    };
    pthread_mutex_unlock(&cache.lock);
}

size_t oblock_cache_bytes(void)
{
    pthread_mutex_lock(&cache.lock);
    size_t n = cache.bytes;
    pthread_mutex_unlock(&cache.lock);
    return n;
}

/* ---- directory ---- */

static inline void *dir_get(const struct dir *d, uint64_t c)
{
    return d->l1[c / DIR_L2][c % DIR_L2];
}

/* The chunk at |c|, allocated (|size| bytes; from the cache for row
 * chunks, class |cls| > 0) if it is not there yet. */
static void *dir_chunk(oblock *b, struct dir *d, uint64_t c, size_t size, int cls)
{
    void **l2 = d->l1[c / DIR_L2];
    if (l2 == NULL) {
        l2 = calloc(DIR_L2, sizeof(void *));
        if (l2 == NULL) {
            return NULL;
        }
        b->w_bytes += DIR_L2 * sizeof(void *);
        d->l1[c / DIR_L2] = l2;
    }
    void *p = l2[c % DIR_L2];
    if (p == NULL) {
        p = cls > 0 ? cache_get(cls, size) : malloc(size);
        if (p == NULL) {
            return NULL;
        }
        b->w_bytes += size;
        l2[c % DIR_L2] = p;
    }
    return p;
}

/* Frees a directory and its chunks; row chunks (class |cls| > 0) go to the
 * cache, whose lock the caller holds. */
static void dir_free(struct dir *d, int cls)
{
    for (uint32_t i = 0; i < DIR_L1; i++) {
        if (d->l1[i] != NULL) {
            for (uint32_t j = 0; j < DIR_L2 && d->l1[i][j] != NULL; j++) {
                if (cls > 0) {
                    do_cache_put(cls, d->l1[i][j], class_size(cls));
                } else {
                    free(d->l1[i][j]);
                }
            }
            free(d->l1[i]);
        }
    }
}

/* ---- byte area ---- */

static uint8_t *bytes_slow(oblock *b, size_t n)
{
    bool own = n > BYTES_CHUNK / 4;
    size_t size = own ? n : BYTES_CHUNK;
    struct bchunk *c = own ? malloc(sizeof(*c) + size) : cache_get(CC_BYTES, sizeof(*c) + size);
    if (c == NULL) {
        return NULL;
    }
    c->size = size;
    b->w_bytes += sizeof(*c) + size;
    c->next = b->bchunks;
    b->bchunks = c;
    if (own) {
        return c->data;
    }
    b->bcur = c->data + n;
    b->bleft = size - n;
    return c->data;
}

/* Copies |n| bytes into the byte area; NULL when out of memory. */
static inline const uint8_t *bytes_put(oblock *b, const void *src, size_t n)
{
    uint8_t *p;
    if (n == 0) {
        return empty;
    }
    if (n <= b->bleft) {
        p = b->bcur;
        b->bcur += n;
        b->bleft -= n;
    } else {
        p = bytes_slow(b, n);
        if (p == NULL) {
            return NULL;
        }
    }
    memcpy(p, src, n);
    return p;
}

/* A checked blob's first byte (never NULL + offset: an empty heap has no buffer). */
static inline const uint8_t *blob_ptr(const struct batch *bt, struct blob x)
{
    return x.len ? bt->heap.p + x.off : empty;
}

static inline int put_str(oblock *b, struct sref *dst, struct mstr s)
{
    if (s.p == NULL && s.len != 0) {
        return -EINVAL;
    }
    dst->p = bytes_put(b, s.p, s.len);
    dst->n = s.len;
    return dst->p != NULL ? 0 : -ENOMEM;
}

static inline int put_blob(oblock *b, struct sref *dst, const struct batch *bt, struct blob x)
{
    if ((uint64_t)x.off + x.len > bt->heap.len) {
        return -EINVAL;
    }
    dst->p = bytes_put(b, blob_ptr(bt, x), x.len);
    dst->n = x.len;
    return dst->p != NULL ? 0 : -ENOMEM;
}

static inline struct mstr as_mstr(struct sref s)
{
    return (struct mstr){(const char *)s.p, s.n};
}

static inline struct obytes as_bytes(struct sref s)
{
    return (struct obytes){s.p, s.n};
}

static inline struct oattrs as_attrs(struct sref s, uint32_t count)
{
    return (struct oattrs){s.p, s.n, count};
}

/* ---- dictionaries ---- */

static inline void *dict_at(const struct dir *d, uint32_t id, size_t esz)
{
    return (char *)dir_get(d, id / DICT_CHUNK) + (size_t)(id % DICT_CHUNK) * esz;
}

/* Room for one more entry at at most half load. */
static int ht_reserve(oblock *b, struct htab *t)
{
    if (t->mask != 0 && (t->n + 1) * 2 <= t->mask + 1) {
        return 0;
    }
    uint32_t cap = t->mask ? (t->mask + 1) * 2 : 64;
    struct hent *e = calloc(cap, sizeof(*e));
    if (e == NULL) {
        return -ENOMEM;
    }
    for (uint32_t i = 0; t->mask != 0 && i <= t->mask; i++) {
        if (t->e[i].id1 != 0) {
            uint32_t k = (uint32_t)t->e[i].h & (cap - 1);
            while (e[k].id1 != 0) {
                k = (k + 1) & (cap - 1);
            }
            e[k] = t->e[i];
        }
    }
    if (t->mask != 0) {
        b->w_bytes -= (size_t)(t->mask + 1) * sizeof(*e);
    }
    b->w_bytes += (size_t)cap * sizeof(*e);
    free(t->e);
    t->e = e;
    t->mask = cap - 1;
    return 0;
}

static inline bool bytes_eq(const uint8_t *a, uint32_t alen, const void *bp, uint32_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, bp, alen) == 0);
}

static inline bool str_eq(struct mstr a, struct mstr s)
{
    return bytes_eq((const uint8_t *)a.p, a.len, s.p, s.len);
}

static inline bool attrs_eq(struct oattrs a, const struct batch *bt, struct attrs x)
{
    return a.count == x.count && bytes_eq(a.p, a.len, blob_ptr(bt, x.blob), x.blob.len);
}

static inline uint64_t hash_mix(const void *p, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(n ? p : empty, n, seed);
}

static inline uint64_t hash_str(struct mstr s, uint64_t seed)
{
    return hash_mix(s.p, s.len, seed);
}

static inline uint64_t hash_attrs(const struct batch *bt, struct attrs a, uint64_t seed)
{
    return hash_mix(blob_ptr(bt, a.blob), a.blob.len, seed ^ a.count);
}

static bool blob_ok(const struct batch *bt, struct blob x)
{
    return (uint64_t)x.off + x.len <= bt->heap.len;
}

static bool str_ok(struct mstr s)
{
    return s.p != NULL || s.len == 0;
}

/* The first entry of |t| with hash |h| whose content |eq| accepts, or -1;
 * |*slot| is then the empty slot where it belongs. */
#define HT_FIND(t, h, view_t, d, EQ, slot)                                                         \
    ({                                                                                             \
        int64_t found_ = -1;                                                                       \
        uint32_t k_ = (uint32_t)(h) & (t)->mask;                                                   \
        while ((t)->e[k_].id1 != 0) {                                                              \
            if ((t)->e[k_].h == (h)) {                                                             \
                const view_t *v = dict_at((d), (t)->e[k_].id1 - 1, sizeof(view_t));                \
                if (EQ) {                                                                          \
                    found_ = (t)->e[k_].id1 - 1;                                                   \
                    break;                                                                         \
                }                                                                                  \
            }                                                                                      \
            k_ = (k_ + 1) & (t)->mask;                                                             \
        }                                                                                          \
        *(slot) = k_;                                                                              \
        found_;                                                                                    \
    })

static int ensure_map(uint32_t **map, uint32_t *cap, uint32_t n, oblock *b)
{
    if (n <= *cap) {
        return 0;
    }
    uint32_t ncap = *cap ? *cap : 16;
    while (ncap < n) {
        ncap *= 2;
    }
    uint32_t *p = realloc(*map, (size_t)ncap * sizeof(*p));
    if (p == NULL) {
        return -ENOMEM;
    }
    b->w_bytes += (size_t)(ncap - *cap) * sizeof(*p);
    *map = p;
    *cap = ncap;
    return 0;
}

static int add_resources(oblock *b, const struct batch *bt)
{
    int rc = ensure_map(&b->map_res, &b->cap_res, bt->n_resources, b);
    for (uint32_t i = 0; rc == 0 && i < bt->n_resources; i++) {
        const struct res_row *r = &bt->resources[i];
        if (!blob_ok(bt, r->attrs.blob) || !str_ok(r->schema_url)) {
            return -EINVAL;
        }
        uint64_t h = hash_str(r->schema_url, r->dropped_attrs);
        h = hash_attrs(bt, r->attrs, h);
        if ((rc = ht_reserve(b, &b->ht_res)) < 0) {
            return rc;
        }
        uint32_t slot;
        int64_t id =
            HT_FIND(&b->ht_res, h, struct res_view, &b->res,
                    v->dropped_attrs == r->dropped_attrs && str_eq(v->schema_url, r->schema_url) &&
                        attrs_eq(v->attrs, bt, r->attrs),
                    &slot);
        if (id < 0) {
            if (b->w_res == DICT_MAX) {
                return -E2BIG;
            }
            struct res_view *v =
                dir_chunk(b, &b->res, b->w_res / DICT_CHUNK, DICT_CHUNK * sizeof(*v), 0);
            struct sref a, s;
            if (v == NULL) {
                return -ENOMEM;
            }
            if ((rc = put_blob(b, &a, bt, r->attrs.blob)) < 0 ||
                (rc = put_str(b, &s, r->schema_url)) < 0) {
                return rc;
            }
            v += b->w_res % DICT_CHUNK;
            *v = (struct res_view){.id = b->w_res,
                                   .attrs = as_attrs(a, r->attrs.count),
                                   .dropped_attrs = r->dropped_attrs,
                                   .schema_url = as_mstr(s)};
            id = b->w_res++;
            b->ht_res.e[slot] = (struct hent){h, (uint32_t)id + 1};
            b->ht_res.n++;
        }
        b->map_res[i] = (uint32_t)id;
    }
    return rc;
}

static int add_scopes(oblock *b, const struct batch *bt)
{
    int rc = ensure_map(&b->map_scope, &b->cap_scope, bt->n_scopes, b);
    for (uint32_t i = 0; rc == 0 && i < bt->n_scopes; i++) {
        const struct scope_row *r = &bt->scopes[i];
        if (r->resource >= bt->n_resources || !blob_ok(bt, r->attrs.blob) || !str_ok(r->name) ||
            !str_ok(r->version) || !str_ok(r->schema_url)) {
            return -EINVAL;
        }
        uint32_t res = b->map_res[r->resource];
        uint64_t h = hash_str(r->name, ((uint64_t)res << 32) | r->dropped_attrs);
        h = hash_str(r->version, h);
        h = hash_str(r->schema_url, h);
        h = hash_attrs(bt, r->attrs, h);
        if ((rc = ht_reserve(b, &b->ht_scope)) < 0) {
            return rc;
        }
        uint32_t slot;
        int64_t id =
            HT_FIND(&b->ht_scope, h, struct scope_view, &b->scopes,
                    v->resource_id == res && v->dropped_attrs == r->dropped_attrs &&
                        str_eq(v->name, r->name) && str_eq(v->version, r->version) &&
                        str_eq(v->schema_url, r->schema_url) && attrs_eq(v->attrs, bt, r->attrs),
                    &slot);
        if (id < 0) {
            if (b->w_scopes == DICT_MAX) {
                return -E2BIG;
            }
            struct scope_view *v =
                dir_chunk(b, &b->scopes, b->w_scopes / DICT_CHUNK, DICT_CHUNK * sizeof(*v), 0);
            struct sref name, version, a, s;
            if (v == NULL) {
                return -ENOMEM;
            }
            if ((rc = put_str(b, &name, r->name)) < 0 ||
                (rc = put_str(b, &version, r->version)) < 0 ||
                (rc = put_blob(b, &a, bt, r->attrs.blob)) < 0 ||
                (rc = put_str(b, &s, r->schema_url)) < 0) {
                return rc;
            }
            v += b->w_scopes % DICT_CHUNK;
            *v = (struct scope_view){.id = b->w_scopes,
                                     .resource_id = res,
                                     .resource = dict_at(&b->res, res, sizeof(struct res_view)),
                                     .name = as_mstr(name),
                                     .version = as_mstr(version),
                                     .attrs = as_attrs(a, r->attrs.count),
                                     .dropped_attrs = r->dropped_attrs,
                                     .schema_url = as_mstr(s)};
            id = b->w_scopes++;
            b->ht_scope.e[slot] = (struct hent){h, (uint32_t)id + 1};
            b->ht_scope.n++;
        }
        b->map_scope[i] = (uint32_t)id;
    }
    return rc;
}

static int add_metrics(oblock *b, const struct batch *bt)
{
    int rc = ensure_map(&b->map_metric, &b->cap_metric, bt->n_metrics, b);
    for (uint32_t i = 0; rc == 0 && i < bt->n_metrics; i++) {
        const struct metric_row *r = &bt->metrics[i];
        if (r->scope >= bt->n_scopes || !blob_ok(bt, r->metadata.blob) || !str_ok(r->name) ||
            !str_ok(r->description) || !str_ok(r->unit)) {
            return -EINVAL;
        }
        uint32_t sc = b->map_scope[r->scope];
        uint64_t h = hash_str(r->name, ((uint64_t)sc << 32) ^ ((uint64_t)r->kind << 8) ^
                                           ((uint64_t)(uint32_t)r->temporality << 12) ^
                                           (uint64_t)r->monotonic);
        h = hash_str(r->description, h);
        h = hash_str(r->unit, h);
        h = hash_attrs(bt, r->metadata, h);
        if ((rc = ht_reserve(b, &b->ht_metric)) < 0) {
            return rc;
        }
        uint32_t slot;
        int64_t id =
            HT_FIND(&b->ht_metric, h, struct metric_view, &b->metrics,
                    v->scope_id == sc && v->kind == r->kind && v->temporality == r->temporality &&
                        v->monotonic == r->monotonic && str_eq(v->name, r->name) &&
                        str_eq(v->description, r->description) && str_eq(v->unit, r->unit) &&
                        attrs_eq(v->metadata, bt, r->metadata),
                    &slot);
        if (id < 0) {
            if (b->w_metrics == DICT_MAX) {
                return -E2BIG;
            }
            struct metric_view *v =
                dir_chunk(b, &b->metrics, b->w_metrics / DICT_CHUNK, DICT_CHUNK * sizeof(*v), 0);
            struct sref name, desc, unit, md;
            if (v == NULL) {
                return -ENOMEM;
            }
            if ((rc = put_str(b, &name, r->name)) < 0 ||
                (rc = put_str(b, &desc, r->description)) < 0 ||
                (rc = put_str(b, &unit, r->unit)) < 0 ||
                (rc = put_blob(b, &md, bt, r->metadata.blob)) < 0) {
                return rc;
            }
            v += b->w_metrics % DICT_CHUNK;
            *v = (struct metric_view){
                .id = b->w_metrics,
                .scope_id = sc,
                .scope = dict_at(&b->scopes, sc, sizeof(struct scope_view)),
                .name = as_mstr(name),
                .description = as_mstr(desc),
                .unit = as_mstr(unit),
                .kind = r->kind,
                .temporality = r->temporality,
                .monotonic = r->monotonic,
                .metadata = as_attrs(md, r->metadata.count),
            };
            id = b->w_metrics++;
            b->ht_metric.e[slot] = (struct hent){h, (uint32_t)id + 1};
            b->ht_metric.n++;
        }
        b->map_metric[i] = (uint32_t)id;
    }
    return rc;
}

/* ---- rows ---- */

/* Calls BODY for each row of the batch with g (the chunk), j (index in it)
 * and i (index in the batch); BODY may `return` an error. */
#define FOR_ROWS(grp_t, BODY)                                                                      \
    do {                                                                                           \
        uint64_t row_ = b->w_rows;                                                                 \
        uint32_t i = 0;                                                                            \
        while (i < bt->n_rows) {                                                                   \
            grp_t *g = dir_chunk(b, &b->rows, row_ / CH, sizeof(grp_t), (int)b->sig);              \
            if (g == NULL) {                                                                       \
                return -ENOMEM;                                                                    \
            }                                                                                      \
            uint32_t j = (uint32_t)(row_ % CH);                                                    \
            uint32_t end_ = bt->n_rows - i < CH - j ? j + (bt->n_rows - i) : CH;                   \
            for (; j < end_; j++, i++, row_++) {                                                   \
                BODY                                                                               \
            }                                                                                      \
        }                                                                                          \
    } while (0)

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_ < 0) {                                                                             \
            return rc_;                                                                            \
        }                                                                                          \
    } while (0)

static int put_logs(oblock *b, const struct batch *bt)
{
    FOR_ROWS(struct log_grp, {
        const struct log_row *r = &bt->logs[i];
        if (r->scope >= bt->n_scopes) {
            return -EINVAL;
        }
        g->time_ns[j] = r->time_ns;
        g->observed_ns[j] = r->observed_ns;
        g->scope[j] = b->map_scope[r->scope];
        g->severity_number[j] = r->severity_number;
        g->flags[j] = r->flags;
        g->dropped_attrs[j] = r->dropped_attrs;
        g->n_attrs[j] = r->attrs.count;
        g->body_type[j] = (uint8_t)r->body_type;
        g->bits[j] = (r->has_trace_id ? LB_TRACE : 0) | (r->has_span_id ? LB_SPAN : 0);
        memcpy(g->trace_id[j], r->trace_id, 16);
        memcpy(g->span_id[j], r->span_id, 8);
        TRY(put_str(b, &g->severity_text[j], r->severity_text));
        if (r->body_type == VAL_STR) {
            TRY(put_str(b, &g->body[j], r->body_str));
        } else {
            TRY(put_blob(b, &g->body[j], bt, r->body_val));
        }
        TRY(put_blob(b, &g->attrs[j], bt, r->attrs.blob));
        TRY(put_str(b, &g->event_name[j], r->event_name));
    });
    return 0;
}

static int put_spans(oblock *b, const struct batch *bt)
{
    FOR_ROWS(struct span_grp, {
        const struct span_row *r = &bt->spans[i];
        if (r->scope >= bt->n_scopes) {
            return -EINVAL;
        }
        g->start_ns[j] = r->start_ns;
        g->end_ns[j] = r->end_ns;
        g->scope[j] = b->map_scope[r->scope];
        g->kind[j] = r->kind;
        g->flags[j] = r->flags;
        g->status_code[j] = r->status_code;
        g->n_attrs[j] = r->attrs.count;
        g->dropped_attrs[j] = r->dropped_attrs;
        g->n_events[j] = r->n_events;
        g->dropped_events[j] = r->dropped_events;
        g->n_links[j] = r->n_links;
        g->dropped_links[j] = r->dropped_links;
        g->has_parent[j] = r->has_parent;
        memcpy(g->trace_id[j], r->trace_id, 16);
        memcpy(g->span_id[j], r->span_id, 8);
        memcpy(g->parent_span_id[j], r->parent_span_id, 8);
        TRY(put_str(b, &g->trace_state[j], r->trace_state));
        TRY(put_str(b, &g->name[j], r->name));
        TRY(put_str(b, &g->status_message[j], r->status_message));
        TRY(put_blob(b, &g->attrs[j], bt, r->attrs.blob));
        TRY(put_blob(b, &g->events[j], bt, r->events));
        TRY(put_blob(b, &g->links[j], bt, r->links));
    });
    return 0;
}

static int put_points(oblock *b, const struct batch *bt)
{
    FOR_ROWS(struct point_grp, {
        const struct point_row *r = &bt->points[i];
        if (r->metric >= bt->n_metrics) {
            return -EINVAL;
        }
        uint64_t bits;
        memcpy(&bits, &r->value, sizeof(bits));
        g->start_ns[j] = r->start_ns;
        g->time_ns[j] = r->time_ns;
        g->value[j] = bits;
        g->count[j] = r->count;
        g->sum[j] = r->sum;
        g->min[j] = r->min;
        g->max[j] = r->max;
        g->metric[j] = b->map_metric[r->metric];
        g->n_attrs[j] = r->attrs.count;
        g->flags[j] = r->flags;
        g->n_exemplars[j] = r->n_exemplars;
        g->value_type[j] = (uint8_t)r->value_type;
        g->bits[j] =
            (r->has_sum ? PB_SUM : 0) | (r->has_min ? PB_MIN : 0) | (r->has_max ? PB_MAX : 0);
        TRY(put_blob(b, &g->attrs[j], bt, r->attrs.blob));
        TRY(put_blob(b, &g->detail[j], bt, r->detail));
        TRY(put_blob(b, &g->exemplars[j], bt, r->exemplars));
    });
    return 0;
}

/* ---- public ---- */

static size_t grp_size(enum signal sig)
{
    switch (sig) {
    case SIG_LOGS:
        return sizeof(struct log_grp);
    case SIG_TRACES:
        return sizeof(struct span_grp);
    case SIG_METRICS:
        return sizeof(struct point_grp);
    }
    return 0;
}

int oblock_new(enum signal sig, oblock **out)
{
    if (grp_size(sig) == 0) {
        return -EINVAL;
    }
    oblock *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return -ENOMEM;
    }
    b->sig = sig;
    b->grp_size = grp_size(sig);
    b->w_bytes = sizeof(*b);
    atomic_init(&b->n_rows, 0);
    atomic_init(&b->n_res, 0);
    atomic_init(&b->n_scopes, 0);
    atomic_init(&b->n_metrics, 0);
    atomic_init(&b->bytes, b->w_bytes);
    atomic_init(&b->max_seq, 0);
    *out = b;
    return 0;
}

void oblock_free(oblock *b)
{
    if (b == NULL) {
        return;
    }
    pthread_mutex_lock(&cache.lock);
    dir_free(&b->rows, (int)b->sig);
    dir_free(&b->res, 0);
    dir_free(&b->scopes, 0);
    dir_free(&b->metrics, 0);
    while (b->bchunks != NULL) {
        struct bchunk *next = b->bchunks->next;
        if (b->bchunks->size == BYTES_CHUNK) {
            do_cache_put(CC_BYTES, b->bchunks, sizeof(struct bchunk) + BYTES_CHUNK);
        } else {
            free(b->bchunks);
        }
        b->bchunks = next;
    }
    pthread_mutex_unlock(&cache.lock);
    free(b->ht_res.e);
    free(b->ht_scope.e);
    free(b->ht_metric.e);
    free(b->map_res);
    free(b->map_scope);
    free(b->map_metric);
    free(b);
}

static int append_all(oblock *b, const struct batch *bt)
{
    TRY(add_resources(b, bt));
    TRY(add_scopes(b, bt));
    switch (b->sig) {
    case SIG_LOGS:
        return put_logs(b, bt);
    case SIG_TRACES:
        return put_spans(b, bt);
    case SIG_METRICS:
        TRY(add_metrics(b, bt));
        return put_points(b, bt);
    }
    return -EINVAL;
}

int oblock_append(oblock *b, const struct batch *bt, uint64_t wal_seq)
{
    if (bt->signal != b->sig) {
        return -EINVAL;
    }
    if (bt->n_rows > OBLOCK_MAX_ROWS - b->w_rows) {
        return -E2BIG;
    }
    int rc = append_all(b, bt);
    atomic_store_explicit(&b->bytes, b->w_bytes, memory_order_relaxed);
    if (rc < 0) {
        return rc;
    }
    b->w_rows += bt->n_rows;
    /* Dicts first: a reader that sees a row must see what it names. */
    atomic_store_explicit(&b->n_res, b->w_res, memory_order_release);
    atomic_store_explicit(&b->n_scopes, b->w_scopes, memory_order_release);
    atomic_store_explicit(&b->n_metrics, b->w_metrics, memory_order_release);
    atomic_store_explicit(&b->n_rows, b->w_rows, memory_order_release);
    if (wal_seq > atomic_load_explicit(&b->max_seq, memory_order_relaxed)) {
        atomic_store_explicit(&b->max_seq, wal_seq, memory_order_relaxed);
    }
    return 0;
}

enum signal oblock_signal(const oblock *b)
{
    return b->sig;
}

uint64_t oblock_rows(const oblock *b)
{
    return atomic_load_explicit(&b->n_rows, memory_order_acquire);
}

size_t oblock_bytes(const oblock *b)
{
    return atomic_load_explicit(&b->bytes, memory_order_relaxed);
}

uint64_t oblock_max_seq(const oblock *b)
{
    return atomic_load_explicit(&b->max_seq, memory_order_relaxed);
}

uint32_t oblock_n_resources(const oblock *b)
{
    return atomic_load_explicit(&b->n_res, memory_order_acquire);
}

uint32_t oblock_n_scopes(const oblock *b)
{
    return atomic_load_explicit(&b->n_scopes, memory_order_acquire);
}

uint32_t oblock_n_metrics(const oblock *b)
{
    return atomic_load_explicit(&b->n_metrics, memory_order_acquire);
}

const struct res_view *oblock_resource(const oblock *b, uint32_t id)
{
    if (id >= oblock_n_resources(b)) {
        return NULL;
    }
    return dict_at(&b->res, id, sizeof(struct res_view));
}

const struct scope_view *oblock_scope(const oblock *b, uint32_t id)
{
    if (id >= oblock_n_scopes(b)) {
        return NULL;
    }
    return dict_at(&b->scopes, id, sizeof(struct scope_view));
}

const struct metric_view *oblock_metric(const oblock *b, uint32_t id)
{
    if (id >= oblock_n_metrics(b)) {
        return NULL;
    }
    return dict_at(&b->metrics, id, sizeof(struct metric_view));
}

int oblock_log(const oblock *b, uint64_t i, struct log_view *v)
{
    if (b->sig != SIG_LOGS || i >= oblock_rows(b)) {
        return -EINVAL;
    }
    const struct log_grp *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    v->time_ns = g->time_ns[j];
    v->observed_ns = g->observed_ns[j];
    v->scope_id = g->scope[j];
    v->scope = dict_at(&b->scopes, v->scope_id, sizeof(struct scope_view));
    v->resource = v->scope->resource;
    v->severity_number = g->severity_number[j];
    v->severity_text = as_mstr(g->severity_text[j]);
    v->body_type = (enum val_type)g->body_type[j];
    if (v->body_type == VAL_STR) {
        v->body_str = as_mstr(g->body[j]);
        v->body_val = (struct obytes){empty, 0};
    } else {
        v->body_str = (struct mstr){(const char *)empty, 0};
        v->body_val = as_bytes(g->body[j]);
    }
    v->attrs = as_attrs(g->attrs[j], g->n_attrs[j]);
    v->dropped_attrs = g->dropped_attrs[j];
    v->flags = g->flags[j];
    v->has_trace_id = (g->bits[j] & LB_TRACE) != 0;
    v->has_span_id = (g->bits[j] & LB_SPAN) != 0;
    memcpy(v->trace_id, g->trace_id[j], 16);
    memcpy(v->span_id, g->span_id[j], 8);
    v->event_name = as_mstr(g->event_name[j]);
    return 0;
}

/*
 * A pass reads at most four columns, so that the lines in use (one per
 * column per request whose rows the sort put side by side) stay in L1
 * between the rows that share them.
 */
void oblock_log_cols(const oblock *b, const uint64_t *rows, uint64_t n, const struct log_cols *out)
{
    _Static_assert(LB_TRACE == 1 && LB_SPAN == 2, "log_cols.ids as the bits column has them");
    const struct dir *d = &b->rows;
    for (uint64_t j = 0; j < n; j++) {
        const struct log_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->time[j] = g->time_ns[k];
        out->observed[j] = g->observed_ns[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct log_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->scope[j] = g->scope[k];
        out->severity[j] = (uint64_t)(int64_t)g->severity_number[k];
        out->nattrs[j] = g->n_attrs[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct log_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->body_type[j] = g->body_type[k];
        out->ids[j] = g->bits[k];
        out->dropped[j] = g->dropped_attrs[k];
        out->flags[j] = g->flags[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct log_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        memcpy(out->trace + 16 * j, g->trace_id[k], 16);
        memcpy(out->span + 8 * j, g->span_id[k], 8);
    }
}

void oblock_log_strs(const oblock *b, uint64_t i, struct log_strs *out)
{
    const struct log_grp *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    out->severity_text = as_bytes(g->severity_text[j]);
    out->body = as_bytes(g->body[j]);
    out->attrs = as_bytes(g->attrs[j]);
    out->event_name = as_bytes(g->event_name[j]);
}

void oblock_span_cols(const oblock *b, const uint64_t *rows, uint64_t n,
                      const struct span_cols *out)
{
    const struct dir *d = &b->rows;
    for (uint64_t j = 0; j < n; j++) {
        const struct span_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->start[j] = g->start_ns[k];
        out->end[j] = g->end_ns[k];
        out->scope[j] = g->scope[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct span_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->kind[j] = (uint64_t)(int64_t)g->kind[k];
        out->status_code[j] = (uint64_t)(int64_t)g->status_code[k];
        out->flags[j] = g->flags[k];
        out->has_parent[j] = g->has_parent[k] != 0;
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct span_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->nattrs[j] = g->n_attrs[k];
        out->dropped_attrs[j] = g->dropped_attrs[k];
        out->n_events[j] = g->n_events[k];
        out->dropped_events[j] = g->dropped_events[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct span_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->n_links[j] = g->n_links[k];
        out->dropped_links[j] = g->dropped_links[k];
        memcpy(out->span + 8 * j, g->span_id[k], 8);
        memcpy(out->parent + 8 * j, g->parent_span_id[k], 8);
    }
}

void oblock_span_strs(const oblock *b, uint64_t i, struct span_strs *out)
{
    const struct span_grp *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    out->trace_id = g->trace_id[j];
    out->trace_state = as_bytes(g->trace_state[j]);
    out->name = as_bytes(g->name[j]);
    out->status_message = as_bytes(g->status_message[j]);
    out->attrs = as_bytes(g->attrs[j]);
    out->events = as_bytes(g->events[j]);
    out->links = as_bytes(g->links[j]);
}

void oblock_point_cols(const oblock *b, const uint64_t *rows, uint64_t n,
                       const struct point_cols *out)
{
    _Static_assert(PB_SUM == 1 && PB_MIN == 2 && PB_MAX == 4, "point_cols.has as bits has them");
    const struct dir *d = &b->rows;
    for (uint64_t j = 0; j < n; j++) {
        const struct point_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->time[j] = g->time_ns[k];
        out->start[j] = g->start_ns[k];
        out->metric[j] = g->metric[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct point_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->value_type[j] = g->value_type[k];
        out->count[j] = g->count[k];
        out->has[j] = g->bits[k];
        out->nattrs[j] = g->n_attrs[k];
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct point_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        out->flags[j] = g->flags[k];
        out->n_exemplars[j] = g->n_exemplars[k];
        memcpy(out->value + 8 * j, &g->value[k], 8);
    }
    for (uint64_t j = 0; j < n; j++) {
        const struct point_grp *g = dir_get(d, rows[j] / CH);
        uint32_t k = (uint32_t)(rows[j] % CH);
        memcpy(out->sum + 8 * j, &g->sum[k], 8);
        memcpy(out->min + 8 * j, &g->min[k], 8);
        memcpy(out->max + 8 * j, &g->max[k], 8);
    }
}

void oblock_point_strs(const oblock *b, uint64_t i, struct point_strs *out)
{
    const struct point_grp *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    out->attrs = as_bytes(g->attrs[j]);
    out->detail = as_bytes(g->detail[j]);
    out->exemplars = as_bytes(g->exemplars[j]);
}

uint64_t oblock_time(const oblock *b, uint64_t i)
{
    if (i >= oblock_rows(b)) {
        return 0;
    }
    const void *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    switch (b->sig) {
    case SIG_LOGS: {
        const struct log_grp *lg = g;
        return lg->time_ns[j] ? lg->time_ns[j] : lg->observed_ns[j];
    }
    case SIG_TRACES:
        return ((const struct span_grp *)g)->start_ns[j];
    default:
        return ((const struct point_grp *)g)->time_ns[j];
    }
}

int oblock_span(const oblock *b, uint64_t i, struct span_view *v)
{
    if (b->sig != SIG_TRACES || i >= oblock_rows(b)) {
        return -EINVAL;
    }
    const struct span_grp *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    v->start_ns = g->start_ns[j];
    v->end_ns = g->end_ns[j];
    v->scope_id = g->scope[j];
    v->scope = dict_at(&b->scopes, v->scope_id, sizeof(struct scope_view));
    v->resource = v->scope->resource;
    memcpy(v->trace_id, g->trace_id[j], 16);
    memcpy(v->span_id, g->span_id[j], 8);
    memcpy(v->parent_span_id, g->parent_span_id[j], 8);
    v->has_parent = g->has_parent[j] != 0;
    v->trace_state = as_mstr(g->trace_state[j]);
    v->name = as_mstr(g->name[j]);
    v->kind = g->kind[j];
    v->flags = g->flags[j];
    v->status_code = g->status_code[j];
    v->status_message = as_mstr(g->status_message[j]);
    v->attrs = as_attrs(g->attrs[j], g->n_attrs[j]);
    v->dropped_attrs = g->dropped_attrs[j];
    v->events = as_bytes(g->events[j]);
    v->n_events = g->n_events[j];
    v->dropped_events = g->dropped_events[j];
    v->links = as_bytes(g->links[j]);
    v->n_links = g->n_links[j];
    v->dropped_links = g->dropped_links[j];
    return 0;
}

int oblock_point(const oblock *b, uint64_t i, struct point_view *v)
{
    if (b->sig != SIG_METRICS || i >= oblock_rows(b)) {
        return -EINVAL;
    }
    const struct point_grp *g = dir_get(&b->rows, i / CH);
    uint32_t j = (uint32_t)(i % CH);
    v->start_ns = g->start_ns[j];
    v->time_ns = g->time_ns[j];
    v->metric_id = g->metric[j];
    v->metric = dict_at(&b->metrics, v->metric_id, sizeof(struct metric_view));
    v->scope = v->metric->scope;
    v->resource = v->scope->resource;
    v->attrs = as_attrs(g->attrs[j], g->n_attrs[j]);
    v->flags = g->flags[j];
    v->value_type = (enum point_value)g->value_type[j];
    memcpy(&v->value, &g->value[j], sizeof(v->value));
    v->count = g->count[j];
    v->sum = g->sum[j];
    v->min = g->min[j];
    v->max = g->max[j];
    v->has_sum = (g->bits[j] & PB_SUM) != 0;
    v->has_min = (g->bits[j] & PB_MIN) != 0;
    v->has_max = (g->bits[j] & PB_MAX) != 0;
    v->detail = as_bytes(g->detail[j]);
    v->exemplars = as_bytes(g->exemplars[j]);
    v->n_exemplars = g->n_exemplars[j];
    return 0;
}
