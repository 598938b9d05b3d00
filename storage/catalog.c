/*
 * catalog.c - the per-signal list of readable blocks (see catalog.h).
 *
 * One mutex guards all lists; it is taken by a snapshot, a publish, a
 * retention pass and at boot — never by the ingest hot path (a shard
 * appends to its open block without it).
 */
#include "storage/catalog.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "storage/adm.h"

struct cat_open {
    struct cat_open *next;
    enum signal sig;
    oblock *ob;
    size_t charged;
    int refs; /* under the catalog lock */
};

struct cat_blk {
    struct cat_blk *next;
    blk *b;
    char path[600];
    uint64_t bytes;
    uint64_t max_ns;
};

struct cat_sig {
    struct cat_open *open;
    struct cat_blk *blocks; /* oldest first */
    struct cat_stats st;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t retained_lock = PTHREAD_MUTEX_INITIALIZER; /* retained-<i>.seq files */
static struct cat_sig sigs[SIG_COUNT];
static uint64_t cold_next_id = 1; /* under |lock| */
static char data_dir[512];
static _Atomic uint64_t table_cap;      /* catalog_set_table_cap; 0: none */
static _Atomic uint64_t tables_dropped; /* catalog_tables_dropped */

void catalog_init(const char *dir)
{
    snprintf(data_dir, sizeof(data_dir), "%s", dir);
}

static void open_unref_locked(struct cat_open *h, struct cat_open **to_free)
{
    if (--h->refs == 0) {
        h->next = *to_free;
        *to_free = h;
    }
}

/* Frees outside the lock: freeing a large block takes a while. */
static void free_handles(struct cat_open *h)
{
    while (h != NULL) {
        struct cat_open *next = h->next;
        oblock_free(h->ob);
        adm_uncharge(h->charged);
        free(h);
        h = next;
    }
}

void catalog_fini(void)
{
    struct cat_open *to_free = NULL;
    pthread_mutex_lock(&lock);
    for (int s = 0; s < SIG_COUNT; s++) {
        for (struct cat_blk *cb = sigs[s].blocks, *next; cb != NULL; cb = next) {
            next = cb->next;
            blk_unref(cb->b);
            free(cb);
        }
        for (struct cat_open *h = sigs[s].open, *next; h != NULL; h = next) {
            next = h->next;
            open_unref_locked(h, &to_free);
        }
        memset(&sigs[s], 0, sizeof(sigs[s]));
    }
    cold_next_id = 1;
    pthread_mutex_unlock(&lock);
    free_handles(to_free);
}

/* Inserts in time order (oldest newest-row first), so retention pops the head. */
static int add_block_locked(enum signal s, blk *b, const char *path, uint64_t bytes)
{
    struct cat_blk *cb = calloc(1, sizeof(*cb));
    uint64_t min_ns;
    if (cb == NULL) {
        return -ENOMEM;
    }
    cb->b = b;
    cb->bytes = bytes;
    snprintf(cb->path, sizeof(cb->path), "%s", path);
    blk_time_range(b, &min_ns, &cb->max_ns);
    struct cat_blk **pp = &sigs[s - 1].blocks;
    while (*pp != NULL && (*pp)->max_ns <= cb->max_ns) {
        pp = &(*pp)->next;
    }
    cb->next = *pp;
    *pp = cb;
    sigs[s - 1].st.blocks++;
    sigs[s - 1].st.block_bytes += bytes;
    sigs[s - 1].st.rows += blk_rows(b);
    return 0;
}

static uint64_t file_bytes(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
}

/*
 * A block in quarantine (DATA/quarantine/<signal>-<name>) keeps the seal id
 * of its name (block_write.c: s<shard>-<seal id>.blk) reserved: a new block under
 * the same name would make a second quarantine of that name overwrite it.
 */
static void reserve_seal_id(const char *name, int n_shards, uint64_t *next_seal_ids)
{
    unsigned sh;
    unsigned long long sid;
    if (sscanf(name, "s%u-%16llx.blk", &sh, &sid) == 2 && sh < (unsigned)n_shards &&
        sid >= next_seal_ids[sh]) {
        next_seal_ids[sh] = (uint64_t)sid + 1;
    }
}

static uint64_t read_retained(enum signal s, uint32_t shard);

/* Is |hot| one of cold block |cold|'s sources? */
static bool is_source_of(const blk *hot, const blk *cold)
{
    struct blk_source src;
    const struct blk_meta *m = blk_meta(hot);
    for (uint32_t i = 0; blk_source(cold, i, &src) == 0; i++) {
        if (src.shard == m->shard && src.seal_id == m->seal_id) {
            return true;
        }
    }
    return false;
}

/*
 * After a crash between a cold block's rename and its inputs' unlink, both
 * are on disk: the cold block wins (it is complete, fsynced and renamed
 * whole, and the watermarks its inputs held were made durable before the
 * rename), each input it names is unlinked.
 */
static void remove_compacted(enum signal s)
{
    struct cat_blk *gone = NULL;
    pthread_mutex_lock(&lock);
    for (struct cat_blk *c = sigs[s - 1].blocks; c != NULL; c = c->next) {
        if (blk_n_sources(c->b) == 0) {
            continue;
        }
        for (struct cat_blk **pp = &sigs[s - 1].blocks; *pp != NULL;) {
            struct cat_blk *h = *pp;
            if (blk_n_sources(h->b) == 0 && is_source_of(h->b, c->b)) {
                *pp = h->next;
                sigs[s - 1].st.blocks--;
                sigs[s - 1].st.block_bytes -= h->bytes;
                sigs[s - 1].st.rows -= blk_rows(h->b);
                sigs[s - 1].st.cold_inputs_removed++;
                h->next = gone;
                gone = h;
            } else {
                pp = &h->next;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    while (gone != NULL) {
        struct cat_blk *next = gone->next;
        unlink(gone->path);
        blk_unref(gone->b);
        free(gone);
        gone = next;
    }
}

int catalog_load(enum signal s, int n_shards, uint64_t *watermarks, uint64_t *next_seal_ids,
                 uint64_t *quarantined, char *err, size_t errlen)
{
    char dir[600], path[900], qdir[600], qpath[900];
    snprintf(dir, sizeof(dir), "%s/%s", data_dir, signal_name(s));
    snprintf(qdir, sizeof(qdir), "%s/quarantine", data_dir);
    for (int i = 0; i < n_shards; i++) {
        watermarks[i] = read_retained(s, (uint32_t)i); /* blocks retention deleted */
        next_seal_ids[i] = 1;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", dir, strerror(errno));
        return -errno;
    }
    struct dirent *e;
    DIR *dp = opendir(qdir);
    if (dp != NULL) {
        size_t pl = strlen(signal_name(s));
        while ((e = readdir(dp)) != NULL) {
            if (strncmp(e->d_name, signal_name(s), pl) == 0 && e->d_name[pl] == '-') {
                reserve_seal_id(e->d_name + pl + 1, n_shards, next_seal_ids);
            }
        }
        closedir(dp);
    }
    dp = opendir(dir);
    if (dp == NULL) {
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return -errno;
    }
    while ((e = readdir(dp)) != NULL) {
        size_t nl = strlen(e->d_name);
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (strstr(e->d_name, ".tmp") != NULL) {
            unlink(path); /* a seal that did not finish: its rows are still in the WAL */
            continue;
        }
        if (nl < 5 || strcmp(e->d_name + nl - 4, ".blk") != 0) {
            continue;
        }
        blk *b;
        char why[256];
        int rc = blk_open(path, &b, why, sizeof(why));
        if (rc < 0) {
            reserve_seal_id(e->d_name, n_shards, next_seal_ids);
            mkdir(qdir, 0755);
            snprintf(qpath, sizeof(qpath), "%s/%s-%s", qdir, signal_name(s), e->d_name);
            rename(path, qpath);
            (*quarantined)++;
            pthread_mutex_lock(&lock);
            sigs[s - 1].st.quarantined_at_boot++;
            pthread_mutex_unlock(&lock);
            continue;
        }
        const struct blk_meta *m = blk_meta(b);
        struct blk_source src;
        for (uint32_t i = 0; blk_source(b, i, &src) == 0; i++) {
            if (src.shard >= (uint32_t)n_shards) {
                continue;
            }
            if (src.wal_seq > watermarks[src.shard]) {
                watermarks[src.shard] = src.wal_seq;
            }
            /* A new block under an input's name would pass for that input
             * at the next boot (and be removed as compacted). */
            if (src.seal_id >= next_seal_ids[src.shard]) {
                next_seal_ids[src.shard] = src.seal_id + 1;
            }
        }
        if (m->shard == BLK_COLD_SHARD) {
            pthread_mutex_lock(&lock);
            if (m->seal_id >= cold_next_id) {
                cold_next_id = m->seal_id + 1;
            }
            pthread_mutex_unlock(&lock);
        }
        if ((int)m->shard < n_shards) {
            if (m->wal_seq > watermarks[m->shard]) {
                watermarks[m->shard] = m->wal_seq;
            }
            if (m->seal_id >= next_seal_ids[m->shard]) {
                next_seal_ids[m->shard] = m->seal_id + 1;
            }
        }
        blk_drop_tables(b); /* verified; loaded again by its first reader (block.h) */
        blk_drop_pages(b);  /* what the checks touched (see catalog_publish) */
        pthread_mutex_lock(&lock);
        rc = add_block_locked(s, b, path, file_bytes(path));
        pthread_mutex_unlock(&lock);
        if (rc < 0) {
            blk_unref(b);
            closedir(dp);
            snprintf(err, errlen, "out of memory");
            return rc;
        }
    }
    closedir(dp);
    remove_compacted(s);
    return 0;
}

struct cat_open *catalog_open_add(enum signal s, oblock *ob)
{
    struct cat_open *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        return NULL;
    }
    h->sig = s;
    h->ob = ob;
    h->refs = 1;
    pthread_mutex_lock(&lock);
    h->next = sigs[s - 1].open;
    sigs[s - 1].open = h;
    pthread_mutex_unlock(&lock);
    return h;
}

oblock *catalog_open_block(struct cat_open *h)
{
    return h->ob;
}

void catalog_open_set_charged(struct cat_open *h, size_t charged)
{
    h->charged = charged;
}

static void unlink_open_locked(struct cat_open *h)
{
    for (struct cat_open **pp = &sigs[h->sig - 1].open; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == h) {
            *pp = h->next;
            h->next = NULL;
            return;
        }
    }
}

int catalog_publish(struct cat_open *h, blk *b, const char *path)
{
    struct cat_open *to_free = NULL;
    int rc = 0;
    uint64_t bytes = b != NULL ? file_bytes(path) : 0;
    if (b != NULL) {
        /* The pages the seal's checks touched through the mapping (and the
         * kernel's fault-around neighbours, in the page cache since the
         * write) would stay in RSS for the block's life: 4-5 MiB a block.
         * Before the lock: once published, |b| is the catalog's. */
        blk_drop_pages(b);
    }
    pthread_mutex_lock(&lock);
    if (b != NULL) {
        rc = add_block_locked(h->sig, b, path, bytes);
        if (rc < 0) {
            pthread_mutex_unlock(&lock);
            return rc; /* the open block stays readable */
        }
    }
    unlink_open_locked(h);
    open_unref_locked(h, &to_free);
    pthread_mutex_unlock(&lock);
    free_handles(to_free);
    return 0;
}

void catalog_open_drop(struct cat_open *h)
{
    catalog_publish(h, NULL, NULL);
}

int catalog_snapshot(enum signal s, struct cat_snap *out)
{
    memset(out, 0, sizeof(*out));
    out->sig = s;
    pthread_mutex_lock(&lock);
    size_t nb = 0, no = 0;
    for (struct cat_blk *cb = sigs[s - 1].blocks; cb != NULL; cb = cb->next) {
        nb++;
    }
    for (struct cat_open *h = sigs[s - 1].open; h != NULL; h = h->next) {
        no++;
    }
    out->blocks = calloc(nb + 1, sizeof(*out->blocks));
    out->open = calloc(no + 1, sizeof(*out->open));
    out->open_rows = calloc(no + 1, sizeof(*out->open_rows));
    out->handles = calloc(no + 1, sizeof(*out->handles));
    out->pinned = calloc(nb + 1, sizeof(*out->pinned));
    if (out->blocks == NULL || out->open == NULL || out->open_rows == NULL ||
        out->handles == NULL || out->pinned == NULL) {
        pthread_mutex_unlock(&lock);
        catalog_snap_release(out);
        return -ENOMEM;
    }
    for (struct cat_blk *cb = sigs[s - 1].blocks; cb != NULL; cb = cb->next) {
        blk_ref(cb->b);
        blk_pin(cb->b);
        out->pinned[out->n_blocks] = 1;
        out->blocks[out->n_blocks++] = cb->b;
    }
    for (struct cat_open *h = sigs[s - 1].open; h != NULL; h = h->next) {
        h->refs++;
        out->handles[out->n_open] = h;
        out->open[out->n_open] = h->ob;
        out->open_rows[out->n_open] = oblock_rows(h->ob);
        out->n_open++;
    }
    pthread_mutex_unlock(&lock);
    return 0;
}

void catalog_snap_release(struct cat_snap *sn)
{
    struct cat_open *to_free = NULL;
    for (size_t i = 0; i < sn->n_blocks; i++) {
        if (sn->pinned[i]) {
            blk_unpin(sn->blocks[i]);
        }
        blk_unref(sn->blocks[i]);
    }
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < sn->n_open; i++) {
        open_unref_locked(sn->handles[i], &to_free);
    }
    pthread_mutex_unlock(&lock);
    free_handles(to_free);
    free(sn->blocks);
    free(sn->open);
    free(sn->open_rows);
    free(sn->handles);
    free(sn->pinned);
    memset(sn, 0, sizeof(*sn));
    catalog_trim_tables();
}

void catalog_snap_unpin(struct cat_snap *sn, size_t i)
{
    if (i < sn->n_blocks && sn->pinned[i]) {
        sn->pinned[i] = 0;
        blk_unpin(sn->blocks[i]);
    }
}

void catalog_snap_pin(struct cat_snap *sn, size_t i)
{
    if (i < sn->n_blocks && !sn->pinned[i]) {
        blk_pin(sn->blocks[i]);
        sn->pinned[i] = 1;
    }
}

void catalog_set_table_cap(uint64_t bytes)
{
    atomic_store(&table_cap, bytes);
}

uint64_t catalog_table_cap(void)
{
    return atomic_load(&table_cap);
}

uint64_t catalog_tables_dropped(void)
{
    return atomic_load(&tables_dropped);
}

/* The cap bounds what the loaded tables build on the heap (decoded
 * columns, rebuilt lists, ...); the inflated copies of zstd tables, which
 * stand in for the file mapping a plain table is read from, have an
 * allowance of their own, half the cap (catalog.h). */
static bool over_cap(uint64_t cap)
{
    struct blk_stats bs;
    blk_get_stats(&bs);
    uint64_t z = bs.table_inflated_bytes; /* read apart: may run ahead of the heap */
    return (bs.table_heap_bytes > z ? bs.table_heap_bytes - z : 0) > cap || z > cap / 2;
}

static int by_stamp(const void *x, const void *y)
{
    uint64_t a = blk_read_stamp(*(blk *const *)x), b = blk_read_stamp(*(blk *const *)y);
    return (a > b) - (a < b);
}

/* Under the lock: the listed blocks holding tables, at most |cap| of them
 * into |out| (NULL: only counted); the drop skips those pinned
 * (catalog.h). A query may load a table between the count and the fill
 * (tables load under the block's lock, not this one), so the fill is
 * bounded by what was counted. */
static size_t idle_loaded_locked(blk **out, size_t cap)
{
    size_t n = 0;
    for (int s = 0; s < SIG_COUNT; s++) {
        for (struct cat_blk *cb = sigs[s].blocks; cb != NULL; cb = cb->next) {
            if (blk_holds_tables(cb->b)) {
                if (out != NULL) {
                    if (n == cap) {
                        return n;
                    }
                    out[n] = cb->b;
                }
                n++;
            }
        }
    }
    return n;
}

/* Over the cap, or the process over the admission limit while tables are
 * loaded: idle tables are a cache, and a cache gives its memory back
 * before ingest is kept waiting or committed charges take the process
 * past the budget (adm_excess; each drop lowers it at once). */
static bool trim_due(uint64_t cap)
{
    if (cap > 0 && over_cap(cap)) {
        return true;
    }
    if (adm_excess() == 0) {
        return false;
    }
    struct blk_stats bs;
    blk_get_stats(&bs);
    return bs.table_heap_bytes > 0;
}

int catalog_trim_tables(void)
{
    uint64_t cap = atomic_load(&table_cap);
    /* The open blocks' chunk cache gives way before tables a query may read
     * again: it costs only page faults to refill. */
    uint64_t over = adm_excess();
    if (over > 0) {
        oblock_cache_trim(over);
    }
    if (!trim_due(cap)) {
        return 0;
    }
    int dropped = 0;
    pthread_mutex_lock(&lock);
    size_t n = idle_loaded_locked(NULL, 0);
    blk **v = n > 0 ? malloc(n * sizeof(*v)) : NULL;
    if (v != NULL) {
        n = idle_loaded_locked(v, n);
        qsort(v, n, sizeof(*v), by_stamp);
        for (size_t i = 0; i < n && trim_due(cap); i++) {
            dropped += blk_drop_tables_unpinned(v[i]);
        }
        free(v);
    } else {
        /* Out of memory for the order: oldest data first, still only idle
         * blocks. */
        for (int s = 0; s < SIG_COUNT; s++) {
            for (struct cat_blk *cb = sigs[s].blocks; cb != NULL && trim_due(cap); cb = cb->next) {
                if (blk_holds_tables(cb->b)) {
                    dropped += blk_drop_tables_unpinned(cb->b);
                }
            }
        }
    }
    pthread_mutex_unlock(&lock);
    atomic_fetch_add(&tables_dropped, (uint64_t)dropped);
    return dropped;
}

static void delete_block(struct cat_blk *cb, enum signal s)
{
    sigs[s - 1].st.blocks--;
    sigs[s - 1].st.block_bytes -= cb->bytes;
    sigs[s - 1].st.rows -= blk_rows(cb->b);
    sigs[s - 1].st.retention_deleted++;
    sigs[s - 1].st.retention_bytes_deleted += cb->bytes;
}

/*
 * RETAINED FILES: DATA/<signal>/retained-<shard>.seq holds, as decimal
 * text, the highest WAL seq of any block retention deleted for that shard.
 * Without it, deleting a shard's newest block would lower its watermark and
 * the next boot would replay WAL frames whose rows retention removed. It is
 * written (temp file, fsync, rename, directory fsync) before any block it
 * covers is unlinked. Quarantine does not write it: a damaged block's rows
 * are recovered from the WAL where they still are.
 */
static uint64_t read_retained(enum signal s, uint32_t shard)
{
    char path[700];
    unsigned long long v = 0;
    snprintf(path, sizeof(path), "%s/%s/retained-%u.seq", data_dir, signal_name(s), shard);
    FILE *f = fopen(path, "r");
    if (f != NULL) {
        if (fscanf(f, "%llu", &v) != 1) {
            v = 0;
        }
        fclose(f);
    }
    return v;
}

static int write_retained(enum signal s, uint32_t shard, uint64_t seq)
{
    char dir[600], path[700], tmp[720];
    snprintf(dir, sizeof(dir), "%s/%s", data_dir, signal_name(s));
    snprintf(path, sizeof(path), "%s/retained-%u.seq", dir, shard);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        return -errno;
    }
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%llu\n", (unsigned long long)seq);
    int rc = write(fd, buf, (size_t)n) == n && fsync(fd) == 0 ? 0 : -EIO;
    close(fd);
    if (rc == 0 && rename(tmp, path) < 0) {
        rc = -errno;
    }
    if (rc == 0) {
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fsync(dfd);
            close(dfd);
        }
    }
    return rc;
}

/* retained-<shard>.seq = max(itself, seq): 0 or -errno. Retention and
 * compaction run on different threads, hence the lock. */
static int raise_retained(enum signal s, uint32_t shard, uint64_t seq)
{
    int rc = 0;
    pthread_mutex_lock(&retained_lock);
    if (seq > read_retained(s, shard)) {
        rc = write_retained(s, shard, seq);
    }
    pthread_mutex_unlock(&retained_lock);
    return rc;
}

/* Records the deleted blocks' watermarks before their files go. Returns
 * false if that could not be made durable (then nothing is unlinked). */
static bool persist_retained(struct cat_blk *gone)
{
    for (struct cat_blk *a = gone; a != NULL; a = a->next) {
        const struct blk_meta *m = blk_meta(a->b);
        enum signal s = blk_signal(a->b);
        uint64_t seq = m->wal_seq;
        bool first = true;
        for (struct cat_blk *b = gone; b != a; b = b->next) {
            if (blk_signal(b->b) == s && blk_meta(b->b)->shard == m->shard) {
                first = false; /* this shard was written already */
            }
        }
        if (!first) {
            continue;
        }
        for (struct cat_blk *b = a->next; b != NULL; b = b->next) {
            if (blk_signal(b->b) == s && blk_meta(b->b)->shard == m->shard &&
                blk_meta(b->b)->wal_seq > seq) {
                seq = blk_meta(b->b)->wal_seq;
            }
        }
        if (raise_retained(s, m->shard, seq) < 0) {
            return false;
        }
    }
    return true;
}

int catalog_retain(uint64_t now_ns, uint64_t max_age_ns, uint64_t max_bytes)
{
    struct cat_blk *gone = NULL;
    int n = 0;
    pthread_mutex_lock(&lock);
    for (;;) {
        uint64_t total = 0;
        struct cat_blk *oldest = NULL;
        int oldest_sig = 0;
        for (int s = 0; s < SIG_COUNT; s++) {
            total += sigs[s].st.block_bytes;
            struct cat_blk *h = sigs[s].blocks;
            if (h != NULL && (oldest == NULL || h->max_ns < oldest->max_ns)) {
                oldest = h;
                oldest_sig = s + 1;
            }
        }
        if (oldest == NULL) {
            break;
        }
        bool too_old = max_age_ns != 0 && oldest->max_ns + max_age_ns < now_ns;
        bool too_big = max_bytes != 0 && total > max_bytes;
        if (!too_old && !too_big) {
            break;
        }
        sigs[oldest_sig - 1].blocks = oldest->next;
        delete_block(oldest, oldest_sig);
        oldest->next = gone;
        gone = oldest;
        n++;
    }
    pthread_mutex_unlock(&lock);
    bool durable = persist_retained(gone);
    while (gone != NULL) {
        struct cat_blk *next = gone->next;
        if (durable) {
            unlink(gone->path); /* readers keep their mapping until they let go */
        }
        blk_unref(gone->b);
        free(gone);
        gone = next;
    }
    return n;
}

uint64_t catalog_cold_id_take(void)
{
    pthread_mutex_lock(&lock);
    uint64_t id = cold_next_id++;
    pthread_mutex_unlock(&lock);
    return id;
}

int catalog_persist_watermarks(enum signal s, const struct blk_source *src, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        if (src[i].shard == BLK_COLD_SHARD || src[i].wal_seq == 0) {
            continue;
        }
        int rc = raise_retained(s, src[i].shard, src[i].wal_seq);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

int catalog_replace(enum signal s, blk *const *in, size_t n, blk *out, const char *path)
{
    struct cat_blk *gone = NULL;
    uint64_t bytes = file_bytes(path);
    blk_drop_pages(out); /* what compaction's checks touched (see catalog_publish) */
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n; i++) {
        struct cat_blk *cb = sigs[s - 1].blocks;
        while (cb != NULL && cb->b != in[i]) {
            cb = cb->next;
        }
        if (cb == NULL) {
            pthread_mutex_unlock(&lock);
            return -ESTALE;
        }
    }
    int rc = add_block_locked(s, out, path, bytes);
    if (rc < 0) {
        pthread_mutex_unlock(&lock);
        return rc;
    }
    for (size_t i = 0; i < n; i++) {
        for (struct cat_blk **pp = &sigs[s - 1].blocks; *pp != NULL; pp = &(*pp)->next) {
            struct cat_blk *cb = *pp;
            if (cb->b == in[i]) {
                *pp = cb->next;
                sigs[s - 1].st.blocks--;
                sigs[s - 1].st.block_bytes -= cb->bytes;
                sigs[s - 1].st.rows -= blk_rows(cb->b);
                cb->next = gone;
                gone = cb;
                break;
            }
        }
    }
    pthread_mutex_unlock(&lock);
    while (gone != NULL) {
        struct cat_blk *next = gone->next;
        blk_unlink_on_release(gone->b); /* when the last query holding it lets go */
        blk_unref(gone->b);
        free(gone);
        gone = next;
    }
    return 0;
}

void catalog_get_tiers(enum signal s, struct cat_tier out[2])
{
    memset(out, 0, 2 * sizeof(*out));
    pthread_mutex_lock(&lock);
    for (struct cat_blk *cb = sigs[s - 1].blocks; cb != NULL; cb = cb->next) {
        struct cat_tier *t = &out[blk_n_sources(cb->b) > 0 ? 1 : 0];
        t->blocks++;
        t->bytes += cb->bytes;
        t->rows += blk_rows(cb->b);
    }
    pthread_mutex_unlock(&lock);
}

void catalog_forget(blk *b)
{
    struct cat_blk *found = NULL;
    pthread_mutex_lock(&lock);
    enum signal s = blk_signal(b);
    for (struct cat_blk **pp = &sigs[s - 1].blocks; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->b == b) {
            found = *pp;
            *pp = found->next;
            sigs[s - 1].st.blocks--;
            sigs[s - 1].st.block_bytes -= found->bytes;
            sigs[s - 1].st.rows -= blk_rows(b);
            break;
        }
    }
    pthread_mutex_unlock(&lock);
    if (found != NULL) {
        blk_unref(found->b);
        free(found);
    }
}

void catalog_get_stats(enum signal s, struct cat_stats *out)
{
    pthread_mutex_lock(&lock);
    *out = sigs[s - 1].st;
    out->unsealed_rows = out->unsealed_blocks = 0;
    for (struct cat_open *h = sigs[s - 1].open; h != NULL; h = h->next) {
        out->unsealed_rows += oblock_rows(h->ob);
        out->unsealed_blocks++;
    }
    pthread_mutex_unlock(&lock);
}
