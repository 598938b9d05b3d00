/*
 * dump.c - the rows of a data directory, read offline (see dump.h).
 *
 * Mirrors the boot path: catalog_load (blocks and their per-shard
 * watermarks), then each shard's wal_open above its watermark with the
 * daemon's decoders (server/ingest.c replay_decode) into an open block.
 */
#include "tests/util/dump.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/wal.h"
#include "tests/util/tmpdir.h"

#define DUMP_MAX_SHARDS 64

struct names {
    char **v;
    size_t n, cap;
};

static int names_add(struct names *ns, const char *s)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        char **v = realloc(ns->v, cap * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        ns->v = v;
        ns->cap = cap;
    }
    ns->v[ns->n] = strdup(s);
    if (ns->v[ns->n] == NULL) {
        return -ENOMEM;
    }
    ns->n++;
    return 0;
}

static void names_free(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        free(ns->v[i]);
    }
    free(ns->v);
    memset(ns, 0, sizeof(*ns));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of |dir| (not "." or ".."), sorted; a missing directory is empty. */
static int list_dir(const char *dir, struct names *out, char *err, size_t errlen)
{
    DIR *dp = opendir(dir);
    if (dp == NULL) {
        if (errno == ENOENT) {
            return 0;
        }
        int rc = -errno;
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return rc;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            rc = names_add(out, e->d_name);
        }
    }
    closedir(dp);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    qsort(out->v, out->n, sizeof(*out->v), cmp_str);
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int copy_file(const char *from, const char *to)
{
    size_t len;
    int rc = 0;
    int fd = open(from, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (len = 0; len < (size_t)n;) {
            ssize_t w = write(out, buf + len, (size_t)n - len);
            if (w < 0) {
                rc = -errno;
                goto out;
            }
            len += (size_t)w;
        }
    }
    if (n < 0) {
        rc = -errno;
    }
out:
    close(fd);
    close(out);
    return rc;
}

/* ---- rows of one source, handed out ---- */

static int emit_block(blk *b, const char *path, dump_fn fn, void *ctx, struct dump_sig_stats *st,
                      char *err, size_t errlen)
{
    enum signal s = blk_signal(b);
    unsigned want = BLK_ROOT;
    if (blk_load(b, BLK_ATTRS) == 0) {
        want |= BLK_ATTRS;
    } else {
        st->tables_bad++;
    }
    if (blk_load(b, BLK_DETAIL) == 0) {
        want |= BLK_DETAIL;
    } else {
        st->tables_bad++;
    }
    uint64_t rows = blk_rows(b);
    st->block_rows += rows;
    if (fn == NULL) {
        return 0;
    }
    struct dump_row r = {
        .sig = s,
        .shard = blk_meta(b)->shard,
        .wal_seq = blk_meta(b)->wal_seq,
        .source = path,
        .tables = want,
    };
    for (uint64_t i = 0; i < rows; i++) {
        struct log_view lv;
        struct span_view sv;
        struct point_view pv;
        int rc = s == SIG_LOGS     ? blk_log(b, i, want, &lv)
                 : s == SIG_TRACES ? blk_span(b, i, want, &sv)
                                   : blk_point(b, i, want, &pv);
        if (rc < 0) {
            snprintf(err, errlen, "%s: row %llu: %s", path, (unsigned long long)i, strerror(-rc));
            return rc;
        }
        r.log = s == SIG_LOGS ? &lv : NULL;
        r.span = s == SIG_TRACES ? &sv : NULL;
        r.point = s == SIG_METRICS ? &pv : NULL;
        rc = fn(ctx, &r);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

struct replay {
    enum signal sig;
    struct batch *batch;
    arena *arena;
    oblock *ob;
    struct dump_sig_stats *st;
    /* frame k's rows end at row ends[k].rows (the open block keeps no seqs) */
    struct frame_end {
        uint64_t rows, seq;
    } * ends;
    size_t n_ends, cap_ends;
};

/* As server/ingest.c replay_decode plus storage/shard.c replay_frame. */
static int on_frame(void *vctx, uint64_t seq, enum signal sig, enum wal_format fmt,
                    const uint8_t *p, size_t n)
{
    struct replay *rp = vctx;
    char why[8];
    int rc;
    batch_reset(rp->batch, rp->sig);
    arena_reset(rp->arena);
    if (sig != rp->sig) {
        rp->st->wal_bad_frames++;
        return 0;
    }
    if (fmt == WAL_FMT_JSON) {
        rc = jsondec_decode(sig, (const char *)p, n, rp->arena, rp->batch, why, sizeof(why));
    } else {
        rc = pbdec_decode(sig, p, n, rp->batch, why, sizeof(why));
    }
    if (rc < 0) {
        rp->st->wal_bad_frames++;
        return 0;
    }
    rc = oblock_append(rp->ob, rp->batch, seq);
    if (rc < 0) {
        return rc;
    }
    if (rp->n_ends == rp->cap_ends) {
        size_t cap = rp->cap_ends ? rp->cap_ends * 2 : 64;
        struct frame_end *v = realloc(rp->ends, cap * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        rp->ends = v;
        rp->cap_ends = cap;
    }
    rp->ends[rp->n_ends++] = (struct frame_end){oblock_rows(rp->ob), seq};
    return 0;
}

static int emit_wal_rows(struct replay *rp, uint32_t shard, const char *dir, dump_fn fn, void *ctx,
                         char *err, size_t errlen)
{
    uint64_t rows = oblock_rows(rp->ob);
    rp->st->wal_rows += rows;
    if (fn == NULL) {
        return 0;
    }
    struct dump_row r = {
        .sig = rp->sig,
        .shard = shard,
        .from_wal = true,
        .source = dir,
        .tables = BLK_ALL,
    };
    size_t k = 0;
    for (uint64_t i = 0; i < rows; i++) {
        struct log_view lv;
        struct span_view sv;
        struct point_view pv;
        while (k < rp->n_ends && rp->ends[k].rows <= i) {
            k++;
        }
        r.wal_seq = k < rp->n_ends ? rp->ends[k].seq : 0;
        int rc = rp->sig == SIG_LOGS     ? oblock_log(rp->ob, i, &lv)
                 : rp->sig == SIG_TRACES ? oblock_span(rp->ob, i, &sv)
                                         : oblock_point(rp->ob, i, &pv);
        if (rc < 0) {
            snprintf(err, errlen, "%s: open block row %llu: %s", dir, (unsigned long long)i,
                     strerror(-rc));
            return rc;
        }
        r.log = rp->sig == SIG_LOGS ? &lv : NULL;
        r.span = rp->sig == SIG_TRACES ? &sv : NULL;
        r.point = rp->sig == SIG_METRICS ? &pv : NULL;
        rc = fn(ctx, &r);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* Replays DATA/wal/<sig>-<shard> (copied to a private directory) above |after|. */
static int dump_wal(const char *data, enum signal s, uint32_t shard, uint64_t after, dump_fn fn,
                    void *ctx, struct dump_sig_stats *st, char *err, size_t errlen)
{
    char dir[600], copy[300], from[900], to[900];
    struct names files = {0};
    struct replay rp = {.sig = s, .st = st};
    wal *w = NULL;
    int rc;

    snprintf(dir, sizeof(dir), "%s/wal/%s-%u", data, signal_name(s), shard);
    const char *tmp = getenv("TMPDIR");
    snprintf(copy, sizeof(copy), "%s/miradb-dump-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(copy) == NULL) {
        rc = -errno;
        snprintf(err, errlen, "mkdtemp %s: %s", copy, strerror(errno));
        return rc;
    }
    rc = list_dir(dir, &files, err, errlen);
    for (size_t i = 0; rc == 0 && i < files.n; i++) {
        struct stat sb;
        snprintf(from, sizeof(from), "%s/%s", dir, files.v[i]);
        snprintf(to, sizeof(to), "%s/%s", copy, files.v[i]);
        if (stat(from, &sb) == 0 && S_ISREG(sb.st_mode)) {
            rc = copy_file(from, to);
            if (rc < 0) {
                snprintf(err, errlen, "cannot copy %s: %s", from, strerror(-rc));
            }
        }
    }
    if (rc < 0) {
        goto out;
    }
    rp.batch = batch_new(s);
    rp.arena = arena_new(0);
    rc = rp.batch == NULL || rp.arena == NULL ? -ENOMEM : oblock_new(s, &rp.ob);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    rc = wal_open(copy, after, on_frame, &rp, &w);
    if (rc < 0) {
        snprintf(err, errlen, "%s: wal_open: %s", dir, strerror(-rc));
        goto out;
    }
    const struct wal_stats *ws = wal_stats(w);
    st->wal_frames += ws->frames_replayed;
    st->wal_skipped += ws->frames_skipped;
    st->wal_torn += ws->torn_frames;
    rc = emit_wal_rows(&rp, shard, dir, fn, ctx, err, errlen);

out:
    wal_close(w);
    oblock_free(rp.ob);
    batch_free(rp.batch);
    arena_free(rp.arena);
    free(rp.ends);
    names_free(&files);
    tmpdir_remove(copy);
    return rc;
}

static int dump_signal(const char *data, enum signal s, dump_fn fn, void *ctx,
                       struct dump_sig_stats *st, char *err, size_t errlen)
{
    char dir[600], path[900];
    struct names files = {0}, wals = {0};
    blk **blocks = NULL;
    size_t n_blocks = 0;
    uint64_t marks[DUMP_MAX_SHARDS] = {0};
    int rc;

    snprintf(dir, sizeof(dir), "%s/%s", data, signal_name(s));
    rc = list_dir(dir, &files, err, errlen);
    if (rc < 0) {
        return rc;
    }
    blocks = calloc(files.n + 1, sizeof(*blocks));
    if (blocks == NULL) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < files.n; i++) {
        if (strstr(files.v[i], ".tmp") != NULL) {
            st->tmp_files++;
            continue;
        }
        if (!ends_with(files.v[i], ".blk")) {
            continue;
        }
        char why[256];
        snprintf(path, sizeof(path), "%s/%s", dir, files.v[i]);
        if (blk_open_ex(path, BLK_OPEN_NO_CACHE, &blocks[n_blocks], why, sizeof(why)) < 0) {
            st->blocks_bad++;
            continue;
        }
        const struct blk_meta *m = blk_meta(blocks[n_blocks]);
        if (m->shard < DUMP_MAX_SHARDS && m->wal_seq > marks[m->shard]) {
            marks[m->shard] = m->wal_seq;
        }
        if (m->wal_seq > st->watermark_max) {
            st->watermark_max = m->wal_seq;
        }
        n_blocks++;
        st->blocks++;
    }
    for (size_t i = 0; i < n_blocks && rc == 0; i++) {
        rc = emit_block(blocks[i], blk_path(blocks[i]), fn, ctx, st, err, errlen);
    }
    if (rc < 0) {
        goto out;
    }

    /* WAL directories are "<signal>-<shard>", replayed in shard order. */
    snprintf(dir, sizeof(dir), "%s/wal", data);
    rc = list_dir(dir, &wals, err, errlen);
    size_t pre = strlen(signal_name(s));
    bool seen[DUMP_MAX_SHARDS] = {false};
    for (size_t i = 0; rc == 0 && i < wals.n; i++) {
        const char *nm = wals.v[i];
        char *end;
        if (strncmp(nm, signal_name(s), pre) != 0 || nm[pre] != '-') {
            continue;
        }
        long sh = strtol(nm + pre + 1, &end, 10);
        if (*end != '\0' || sh < 0 || sh >= DUMP_MAX_SHARDS) {
            continue;
        }
        seen[sh] = true;
    }
    for (uint32_t sh = 0; rc == 0 && sh < DUMP_MAX_SHARDS; sh++) {
        if (seen[sh]) {
            st->wal_shards++;
            rc = dump_wal(data, s, sh, marks[sh], fn, ctx, st, err, errlen);
        }
    }

out:
    for (size_t i = 0; i < n_blocks; i++) {
        blk_unref(blocks[i]);
    }
    free(blocks);
    names_free(&files);
    names_free(&wals);
    return rc;
}

int dump_data_dir(const char *data, dump_fn fn, void *ctx, struct dump_stats *st, char *err,
                  size_t errlen)
{
    struct dump_stats local;
    char qdir[600];
    struct names q = {0};
    if (st == NULL) {
        st = &local;
    }
    memset(st, 0, sizeof(*st));
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        int rc = dump_signal(data, (enum signal)s, fn, ctx, &st->sig[s - 1], err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    snprintf(qdir, sizeof(qdir), "%s/quarantine", data);
    int rc = list_dir(qdir, &q, err, errlen);
    st->quarantined_files = q.n;
    names_free(&q);
    return rc;
}

uint64_t dump_rows(const struct dump_stats *st, enum signal s)
{
    return st->sig[s - 1].block_rows + st->sig[s - 1].wal_rows;
}
