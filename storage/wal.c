/*
 * wal.c - per-shard write-ahead log.
 *
 * A shard's WAL is a directory of segment files, each named after the seq
 * of its first frame, 20 decimal digits zero-padded: 00000000000000000001.wal.
 * Frames are appended to the newest segment; once it holds wal_segment_bytes
 * (WAL_SEGMENT_BYTES, 64 MiB) or more, the next frame starts a new segment.
 * Sealed blocks record the highest seq they hold, and wal_release_upto then
 * deletes the segments they wholly cover: segment i holds seqs
 * [name(i), name(i+1) - 1], so it is covered once name(i+1) - 1 <= upto.
 *
 * FRAME FORMAT (integers little-endian)
 *   0  u32  payload length N, 1 .. WAL_FRAME_MAX
 *   4  u32  crc32 (gzip polynomial, libdeflate_crc32) over bytes 8 .. 20+N
 *   8  u64  seq, strictly increasing per shard, never reused
 *  16  u8   signal (1 logs, 2 traces, 3 metrics)
 *  17  u8   payload format (0 protobuf, 1 OTLP/JSON)
 *  18  u8   payload coding: 0 as decoded, 1 gzip, 2 zstd (below)
 *  19  u8   zero
 *  20  N    payload: the export request body as decoded (after any gunzip)
 *           or, coding 1 or 2, a u32 length L (1 .. WAL_FRAME_MAX) and the
 *           body as it arrived (gzip members, zstd frames), which decodes
 *           to exactly L bytes
 *
 * A compressed export is logged as it arrived when that is smaller
 * (typically a quarter of the decoded size): a quarter of the CRC, of the
 * copy into the page cache and of the disk writes (bench/PERFORMANCE.md,
 * "Compressed bodies in the WAL, zstd, ..."). Replay decodes it before handing it
 * on, so the replay callback sees the body as decoded either way. Such a
 * frame was decoded once already, at ingest; one that does not decode to
 * its L bytes (corruption its CRC missed) is not handed on, counted in
 * frames_undecodable, and replay goes on. A binary from before codings 1
 * and 2 reads byte 18 as non-zero padding and ends the log there.
 *
 * APPEND. One pwritev(2) of header + payload at the end of the segment
 * (continued if short). If it fails, the file is cut back to the frame's
 * start, so the file always ends on a frame boundary and the failed seq is
 * given to the next frame. No fsync: wal_sync() is fdatasync. Creating or
 * deleting segments leaves the directory to be fsynced by the dirsync
 * thread (below), off the appending thread; wal_sync also fsyncs it itself
 * after a creation, so a synced frame cannot lose its file.
 * A segment rotated away before a wal_sync stays open until the next
 * wal_sync syncs it, so one wal_sync covers every frame of a drain even
 * when the drain crossed segment boundaries. Under --ack wal no wal_sync
 * comes, and such segments wait (up to WAL_UNSYNCED_MAX of them, the
 * oldest synced in place past that) until a release deletes them: a
 * rotation never waits for the disk. It did once: it fdatasynced the
 * segment two back when no wal_sync came between two rotations, which
 * held a 64 MiB write-back (24-32 ms) inside an append whenever seals
 * lagged a fast shard (bench/PERFORMANCE.md, "The ack without thread
 * hops"), and such segments are usually deleted before write-back.
 *
 * RECYCLING. A released segment is not unlinked but renamed to SPARE_NAME
 * (at most one spare; further released segments are unlinked), and the
 * next rotation renames the spare (RENAME_NOREPLACE) to the new segment's
 * name and overwrites it from offset 0: overwriting allocated pages costs
 * the writer about a third of the CPU of extending a fresh file (bench/
 * PERFORMANCE.md, "Recycled WAL segments"). Such a segment holds old
 * frames past its logical end (cur_size; the file is cur_size + extra
 * bytes), so before the rotation away from it it is truncated to its last
 * frame, and it is kept unsynced (above) so that the next wal_sync's fdatasync
 * makes the truncation durable before frames of the next segment count as
 * durable; wal_close truncates the newest. The spare has a name that is not
 * a segment's, so a crash can leave only these states, each of which replay
 * handles: old bytes past the end of the newest segment (all of a lower seq
 * than the frame before them, or garbage: cut as a torn tail); a released
 * segment still under its old name (the rename not durable: its frames are
 * at or below |after|, skipped, and it is released again); the spare renamed
 * but not yet written (its first frame's seq is not its name: cut at 0 and
 * removed; it is the newest, so nothing after it is lost); the spare's
 * rename to a segment not durable while frames written into it are (only
 * frames no wal_sync covered: wal_sync fsyncs the directory first). Were
 * the spare kept under its old name instead, that last case would leave
 * new frames in the OLDEST segment's file and replay would cut the log
 * there, removing every later segment.
 *
 * REPLAY (wal_open). Segments are read in seq order through one buffer
 * (WAL_READ_BUF bytes, grown only to hold a frame larger than that), never
 * a whole segment at once. Each frame is checked: a length of 0 or above
 * WAL_FRAME_MAX, a frame running past the end of the file, a CRC mismatch,
 * a seq not above the previous frame's (or, for the first frame of a
 * segment, not equal to the segment's name), an unknown signal, format or coding,
 * or non-zero padding ends the log. The segment is truncated at that
 * frame's start, every later segment is removed, and torn_frames (+1) and
 * torn_bytes count it. A crash can leave only a torn tail (a frame partly
 * written), which this repairs; anything else it cuts is corruption, which
 * is reported through the same counters rather than refusing to start.
 */
#include "storage/wal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <libdeflate.h>

#include "lib/clock.h"
#include "lib/decomp.h"
#include <pthread.h>

#define WAL_HDR 20
#define WAL_READ_BUF (1u << 20)
#define SEG_NAME_LEN 24            /* 20 digits + ".wal" */
#define SPARE_NAME "spare-segment" /* not a segment name, nor "*.wal" */

size_t wal_segment_bytes = WAL_SEGMENT_BYTES;

struct seg {
    uint64_t first; /* seq of its first frame: the file's name */
    uint64_t bytes;
};

/* Used by one thread at a time (see wal.h). segs[nseg - 1] is the newest. */
struct wal {
    int dirfd;
    int fd; /* newest segment, open for appends; -1 until one is needed */
    /* Older segments rotated away with frames (or a truncation) no
     * fdatasync covered, oldest first, with the seq their names hold. */
    struct {
        int fd;
        uint64_t first;
    } unsynced[WAL_UNSYNCED_MAX];
    int n_unsynced;
    bool dirty;     /* fd written since its last fdatasync */
    bool dir_dirty; /* a segment was created since the directory's last fsync by wal_sync */
    bool spare;     /* SPARE_NAME holds a released segment to recycle */
    uint64_t cur_size;
    uint64_t extra;       /* bytes of the newest segment's file past cur_size (recycled) */
    uint64_t spare_bytes; /* the spare's size */
    uint64_t last_seq;
    size_t seg_max;
    struct seg *segs;
    uint32_t nseg, capseg;
    struct wal_stats st;
};

static void put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static void put64(uint8_t *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
    return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void seg_name(char *buf, uint64_t first)
{
    snprintf(buf, SEG_NAME_LEN + 1, "%020" PRIu64 ".wal", first);
}

/* Parses a segment file name; false for anything else in the directory. */
static bool seg_parse(const char *name, uint64_t *first)
{
    uint64_t v = 0;
    for (int i = 0; i < 20; i++) {
        if (name[i] < '0' || name[i] > '9') {
            return false;
        }
        uint64_t d = (uint64_t)(name[i] - '0');
        if (v > (UINT64_MAX - d) / 10) {
            return false;
        }
        v = v * 10 + d;
    }
    if (strcmp(name + 20, ".wal") != 0 || v == 0) {
        return false;
    }
    *first = v;
    return true;
}

/* The stats that follow the segment list (segments, disk_bytes). */
static void seg_stats(wal *w)
{
    uint64_t b = 0;
    for (uint32_t i = 0; i < w->nseg; i++) {
        b += w->segs[i].bytes;
    }
    w->st.segments = w->nseg + (w->spare ? 1 : 0);
    w->st.disk_bytes = b + w->extra + (w->spare ? w->spare_bytes : 0);
}

/* Room for one more segment in w->segs. */
static int seg_reserve(wal *w)
{
    if (w->nseg == w->capseg) {
        uint32_t cap = w->capseg ? w->capseg * 2 : 16;
        struct seg *p = realloc(w->segs, cap * sizeof(*p));
        if (p == NULL) {
            return -ENOMEM;
        }
        w->segs = p;
        w->capseg = cap;
    }
    return 0;
}

static int seg_push(wal *w, uint64_t first, uint64_t bytes)
{
    int rc = seg_reserve(w);
    if (rc < 0) {
        return rc;
    }
    w->segs[w->nseg].first = first;
    w->segs[w->nseg].bytes = bytes;
    w->nseg++;
    seg_stats(w);
    return 0;
}

static void seg_remove_at(wal *w, uint32_t i)
{
    memmove(&w->segs[i], &w->segs[i + 1], (w->nseg - i - 1) * sizeof(w->segs[0]));
    w->nseg--;
    seg_stats(w);
}

static int unlink_seg(wal *w, uint64_t first)
{
    char name[SEG_NAME_LEN + 1];
    seg_name(name, first);
    if (unlinkat(w->dirfd, name, 0) < 0 && errno != ENOENT) {
        return -errno;
    }
    return 0;
}

static int cmp_seg(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    return x->first < y->first ? -1 : x->first > y->first;
}

/* Fills w->segs with the segment files on disk, oldest first. */
static int list_segments(wal *w)
{
    int fd = dup(w->dirfd);
    if (fd < 0) {
        return -errno;
    }
    DIR *d = fdopendir(fd);
    if (d == NULL) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    int rc = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d)) != NULL) {
        uint64_t first;
        if (seg_parse(e->d_name, &first)) {
            rc = seg_push(w, first, 0);
            if (rc < 0) {
                break;
            }
        }
        errno = 0;
    }
    if (rc == 0 && errno != 0) {
        rc = -errno;
    }
    closedir(d);
    if (rc == 0 && w->nseg > 1) {
        qsort(w->segs, w->nseg, sizeof(w->segs[0]), cmp_seg);
    }
    return rc;
}

static int mkdir_p(const char *dir)
{
    char p[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(p)) {
        return -ENAMETOOLONG;
    }
    memcpy(p, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (p[i] == '/' || p[i] == '\0') {
            char c = p[i];
            p[i] = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST) {
                return -errno;
            }
            p[i] = c;
        }
    }
    return 0;
}

/* ---- replay ---- */

/* A window on a segment file: buf holds file bytes [base, base + len). */
struct rbuf {
    uint8_t *p;
    size_t cap;
    size_t len;
    uint64_t base;
};

/* Makes file bytes [off, off + need) resident, reading as far ahead as the
 * buffer allows. The caller has checked that they lie inside the file. */
static int rbuf_need(struct rbuf *rb, int fd, uint64_t fsize, uint64_t off, size_t need)
{
    if (off >= rb->base && off + need <= rb->base + rb->len) {
        return 0;
    }
    size_t keep = 0;
    if (off >= rb->base && off < rb->base + rb->len) {
        keep = (size_t)(rb->base + rb->len - off);
        memmove(rb->p, rb->p + (off - rb->base), keep);
    }
    rb->base = off;
    rb->len = keep;
    if (need > rb->cap) {
        /* Only a frame larger than the buffer gets here; it must be whole in
         * memory to be checked and handed over. */
        uint8_t *p = realloc(rb->p, need);
        if (p == NULL) {
            return -ENOMEM;
        }
        rb->p = p;
        rb->cap = need;
    }
    size_t want = rb->cap;
    if (fsize - off < want) {
        want = (size_t)(fsize - off);
    }
    while (rb->len < want) {
        ssize_t k = pread(fd, rb->p + rb->len, want - rb->len, (off_t)(off + rb->len));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k < 0) {
            return -errno;
        }
        if (k == 0) {
            break; /* the file shrank under us: nobody else may write it */
        }
        rb->len += (size_t)k;
    }
    return rb->len >= need ? 0 : -EIO;
}

struct replay {
    uint64_t after;
    wal_replay_fn fn;
    void *ctx;
    uint64_t last; /* seq of the last intact frame, 0 before the first */
    struct rbuf rb;
    struct decomp *dec; /* coded frames: made at the first */
    uint8_t *plain;     /* what it decoded, plain_cap bytes */
    size_t plain_cap;
};

/* decomp's grow() for replay: the buffer kept for the next frame. */
static int replay_grow(struct decomp_out *o, size_t cap, void *arg)
{
    struct replay *r = arg;
    uint8_t *np = realloc(r->plain, cap);
    if (np == NULL) {
        return -ENOMEM;
    }
    r->plain = o->p = np;
    r->plain_cap = o->cap = cap;
    return 0;
}

/*
 * A coded payload p[0, n) (u32 L, then the body as |coding| has it) decoded
 * into r->plain: 0 with |*out| and |*len| = L when it decodes to exactly L
 * bytes; 1 when it does not (the frame is skipped); -ENOMEM.
 */
static int replay_decode(struct replay *r, int coding, const uint8_t *p, size_t n,
                         const uint8_t **out, size_t *len)
{
    if (n < 4) {
        return 1;
    }
    size_t want = get32(p);
    if (want == 0 || want > WAL_FRAME_MAX) {
        return 1;
    }
    if (r->dec == NULL && (r->dec = decomp_new()) == NULL) {
        return -ENOMEM;
    }
    struct decomp_out o = {r->plain, 0, r->plain_cap, replay_grow, r};
    if (o.cap < want) {
        int rc = replay_grow(&o, want, r);
        if (rc < 0) {
            return rc;
        }
    }
    int rc = decomp_all(r->dec, coding == WAL_CODING_ZSTD ? DECOMP_ZSTD : DECOMP_GZIP, p + 4, n - 4,
                        want, &o);
    if (rc == -ENOMEM) {
        return rc;
    }
    if (rc < 0 || o.len != want) {
        return 1;
    }
    *out = r->plain;
    *len = want;
    return 0;
}

/*
 * Walks one segment. Returns 0 with |*end| = the file size when every frame
 * is intact, or 0 with |*end| < size at the first frame that ends the log;
 * negative for an I/O error or the callback's error.
 */
static int replay_segment(wal *w, struct replay *r, int fd, uint64_t name, uint64_t size,
                          uint64_t *end)
{
    uint64_t off = 0;
    r->rb.base = 0;
    r->rb.len = 0;
    while (off < size) {
        if (size - off < WAL_HDR) {
            break;
        }
        int rc = rbuf_need(&r->rb, fd, size, off, WAL_HDR);
        if (rc < 0) {
            return rc;
        }
        const uint8_t *h = r->rb.p + (off - r->rb.base);
        uint32_t n = get32(h);
        if (n == 0 || n > WAL_FRAME_MAX || n > size - off - WAL_HDR) {
            break;
        }
        rc = rbuf_need(&r->rb, fd, size, off, WAL_HDR + (size_t)n);
        if (rc < 0) {
            return rc;
        }
        h = r->rb.p + (off - r->rb.base);
        uint64_t seq = get64(h + 8);
        uint8_t sig = h[16], fmt = h[17];
        if (libdeflate_crc32(0, h + 8, 12 + (size_t)n) != get32(h + 4)) {
            break;
        }
        if (seq <= r->last || (off == 0 && seq != name)) {
            break;
        }
        if (sig < SIG_LOGS || sig > SIG_METRICS || fmt > OTLP_JSON || h[18] > WAL_CODING_ZSTD ||
            h[19] != 0) {
            break;
        }
        r->last = seq;
        if (seq <= r->after) {
            w->st.frames_skipped++;
        } else {
            w->st.frames_replayed++;
            w->st.bytes_replayed += n;
            const uint8_t *p = h + WAL_HDR;
            size_t pn = n;
            if (h[18] != 0 && r->fn != NULL) {
                rc = replay_decode(r, h[18], h + WAL_HDR, n, &p, &pn);
                if (rc < 0) {
                    return rc;
                }
                if (rc > 0) {
                    w->st.frames_undecodable++;
                    p = NULL;
                }
            }
            if (r->fn != NULL && p != NULL) {
                rc = r->fn(r->ctx, seq, (enum signal)sig, (enum otlp_fmt)fmt, p, pn);
                if (rc < 0) {
                    return rc;
                }
            }
        }
        off += WAL_HDR + (uint64_t)n;
    }
    *end = off;
    return 0;
}

/* Cuts segment |i| (open as |fd|) at |end| and removes every later one. */
static int cut_log(wal *w, uint32_t i, int fd, uint64_t end)
{
    w->st.torn_frames++;
    w->st.torn_bytes += w->segs[i].bytes - end;
    if (ftruncate(fd, (off_t)end) < 0 || fdatasync(fd) < 0) {
        return -errno;
    }
    w->segs[i].bytes = end;
    seg_stats(w);
    while (w->nseg > i + 1) {
        uint32_t last = w->nseg - 1;
        char name[SEG_NAME_LEN + 1];
        struct stat st;
        seg_name(name, w->segs[last].first);
        if (fstatat(w->dirfd, name, &st, 0) == 0) {
            w->st.torn_bytes += (uint64_t)st.st_size;
        }
        int rc = unlink_seg(w, w->segs[last].first);
        if (rc < 0) {
            return rc;
        }
        seg_remove_at(w, last);
    }
    return 0;
}

static int replay_all(wal *w, struct replay *r)
{
    bool removed = false;
    for (uint32_t i = 0; i < w->nseg; i++) {
        char name[SEG_NAME_LEN + 1];
        struct stat st;
        seg_name(name, w->segs[i].first);
        int fd = openat(w->dirfd, name, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            return -errno;
        }
        if (fstat(fd, &st) < 0) {
            int rc = -errno;
            close(fd);
            return rc;
        }
        w->segs[i].bytes = (uint64_t)st.st_size;
        seg_stats(w);
        uint64_t end;
        int rc = replay_segment(w, r, fd, w->segs[i].first, w->segs[i].bytes, &end);
        if (rc == 0 && end < w->segs[i].bytes) {
            removed = removed || i + 1 < w->nseg;
            rc = cut_log(w, i, fd, end);
        }
        if (rc < 0) {
            close(fd);
            return rc;
        }
        if (i + 1 == w->nseg && w->segs[i].bytes > 0 && w->segs[i].bytes < w->seg_max) {
            w->fd = fd; /* the newest segment takes the next frames */
            w->cur_size = w->segs[i].bytes;
        } else {
            close(fd);
        }
    }
    /* Empty segments hold nothing; their names may not match the next seq. */
    for (uint32_t i = 0; i < w->nseg;) {
        if (w->segs[i].bytes == 0) {
            int rc = unlink_seg(w, w->segs[i].first);
            if (rc < 0) {
                return rc;
            }
            seg_remove_at(w, i);
            removed = true;
        } else {
            i++;
        }
    }
    if (removed && fsync(w->dirfd) < 0) {
        return -errno;
    }
    return 0;
}

int wal_open(const char *dir, uint64_t after, wal_replay_fn fn, void *ctx, wal **out)
{
    int rc;
    wal *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        return -ENOMEM;
    }
    w->fd = -1;
    w->seg_max = wal_segment_bytes ? wal_segment_bytes : WAL_SEGMENT_BYTES;
    rc = mkdir_p(dir);
    if (rc < 0) {
        goto fail_free;
    }
    w->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (w->dirfd < 0) {
        rc = -errno;
        goto fail_free;
    }
    rc = list_segments(w);
    if (rc < 0) {
        goto fail_dir;
    }
    struct replay r = {.after = after, .fn = fn, .ctx = ctx};
    r.rb.cap = WAL_READ_BUF;
    r.rb.p = malloc(r.rb.cap);
    if (r.rb.p == NULL) {
        rc = -ENOMEM;
        goto fail_dir;
    }
    rc = replay_all(w, &r);
    free(r.rb.p);
    free(r.plain);
    decomp_free(r.dec);
    if (rc < 0) {
        goto fail_fd;
    }
    w->last_seq = r.last > after ? r.last : after;
    struct stat sst;
    if (fstatat(w->dirfd, SPARE_NAME, &sst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(sst.st_mode)) {
        w->spare = true; /* any bytes: the next rotation overwrites them from 0 */
        w->spare_bytes = (uint64_t)sst.st_size;
        seg_stats(w);
    }
    *out = w;
    return 0;

fail_fd:
    if (w->fd >= 0) {
        close(w->fd);
    }
fail_dir:
    close(w->dirfd);
fail_free:
    free(w->segs);
    free(w);
    return rc;
}

/* ---- the dirsync thread ----
 *
 * A directory fsync on ext4 waits for a journal commit, which in
 * data=ordered mode first writes out the data of every file with newly
 * allocated blocks in the transaction: a block file being sealed, the WAL
 * itself. Done on the shard thread at each rotation and each release, it
 * held up the next export's append for 3-32 ms; the unlink of a released
 * 64 MiB segment can wait for that commit too (5-64 ms seen). One
 * process-wide thread does both instead: it unlinks the released segments
 * and then fsyncs the directory, on a dup of the directory's fd (so
 * wal_close need not wait for it). Nothing acknowledged depends on that
 * under --ack wal; under --ack fsync, wal_sync fsyncs the directory itself
 * after a creation, before it returns. A segment the thread failed to
 * unlink is covered, so the next boot deletes it again after its replay.
 * If the thread cannot be started (or a dup or malloc fails), the work is
 * done in place, as before. */

struct dirsync_job {
    struct dirsync_job *next;
    int fd;
    int n;                          /* segments to unlink first */
    char names[][SEG_NAME_LEN + 1]; /* n of them */
};

static pthread_mutex_t ds_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t ds_wake = PTHREAD_COND_INITIALIZER;
static struct dirsync_job *ds_head, *ds_tail;
static pthread_once_t ds_once = PTHREAD_ONCE_INIT;
static bool ds_running;
static uint64_t ds_queued, ds_done; /* jobs handed over, jobs finished; under ds_lock */

static void dirsync_run(int fd, const struct dirsync_job *j)
{
    for (int i = 0; j != NULL && i < j->n; i++) {
        unlinkat(fd, j->names[i], 0);
    }
    fsync(fd); /* a failure is the next wal_sync's (or boot's) to see */
}

static void *dirsync_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "wal-dirsync");
    pthread_mutex_lock(&ds_lock);
    for (;;) {
        while (ds_head == NULL) {
            pthread_cond_wait(&ds_wake, &ds_lock);
        }
        struct dirsync_job *j = ds_head;
        ds_head = j->next;
        if (ds_head == NULL) {
            ds_tail = NULL;
        }
        pthread_mutex_unlock(&ds_lock);
        dirsync_run(j->fd, j);
        close(j->fd);
        free(j);
        pthread_mutex_lock(&ds_lock);
        ds_done++;
        pthread_cond_broadcast(&ds_wake);
    }
    return NULL;
}

static void dirsync_start(void)
{
    pthread_t t;
    pthread_attr_t a;
    if (pthread_attr_init(&a) != 0) {
        return;
    }
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    ds_running = pthread_create(&t, &a, dirsync_main, NULL) == 0;
    pthread_attr_destroy(&a);
}

/* Has the dirsync thread unlink the segments |firsts[0..n)| of |w| and
 * then fsync its directory. */
static void dirsync_later(wal *w, const uint64_t *firsts, int n)
{
    pthread_once(&ds_once, dirsync_start);
    struct dirsync_job *j =
        ds_running ? malloc(sizeof(*j) + (size_t)n * sizeof(j->names[0])) : NULL;
    int fd = j != NULL ? fcntl(w->dirfd, F_DUPFD_CLOEXEC, 0) : -1;
    if (j != NULL) {
        j->n = n;
        for (int i = 0; i < n; i++) {
            seg_name(j->names[i], firsts[i]);
        }
    }
    if (fd < 0) {
        if (j == NULL) {
            for (int i = 0; i < n; i++) {
                unlink_seg(w, firsts[i]);
            }
        }
        dirsync_run(w->dirfd, j);
        free(j);
        return;
    }
    j->fd = fd;
    j->next = NULL;
    pthread_mutex_lock(&ds_lock);
    if (ds_tail != NULL) {
        ds_tail->next = j;
    } else {
        ds_head = j;
    }
    ds_tail = j;
    ds_queued++;
    pthread_mutex_unlock(&ds_lock);
    pthread_cond_broadcast(&ds_wake);
}

void wal_settle(void)
{
    pthread_mutex_lock(&ds_lock);
    uint64_t want = ds_queued;
    while (ds_done < want) {
        pthread_cond_wait(&ds_wake, &ds_lock);
    }
    pthread_mutex_unlock(&ds_lock);
}

/* ---- append ---- */

/* Closes the oldest unsynced segment and forgets it. */
static void drop_oldest(wal *w)
{
    close(w->unsynced[0].fd);
    w->n_unsynced--;
    memmove(&w->unsynced[0], &w->unsynced[1], (size_t)w->n_unsynced * sizeof(w->unsynced[0]));
}

/* fdatasyncs the oldest unsynced segment, then drops it. */
static int sync_oldest(wal *w)
{
    if (fdatasync(w->unsynced[0].fd) < 0) {
        return -errno;
    }
    w->st.fsyncs++;
    drop_oldest(w);
    return 0;
}

/* Starts segment |first|: the spare renamed, or a new file. The old newest
 * segment, first truncated to its last frame if it was recycled, joins the
 * unsynced ones if it has frames (or a truncation) no fdatasync covered. */
static int rotate(wal *w, uint64_t first)
{
    if (w->fd >= 0) {
        if (w->extra > 0) {
            /* Recycled: the old frames past the last one must not be in a
             * segment that is not the newest (replay would cut the log
             * there). The truncation is synced with the frames, below. */
            if (ftruncate(w->fd, (off_t)w->cur_size) < 0) {
                return -errno;
            }
            w->extra = 0;
            w->dirty = true;
            seg_stats(w);
        }
        if (w->dirty && w->n_unsynced == WAL_UNSYNCED_MAX) {
            int rc = sync_oldest(w); /* seals lag far behind: bound the open files */
            if (rc < 0) {
                return rc;
            }
        }
        if (w->dirty) {
            w->unsynced[w->n_unsynced].fd = w->fd;
            w->unsynced[w->n_unsynced].first = w->segs[w->nseg - 1].first;
            w->n_unsynced++;
        } else {
            close(w->fd);
        }
        w->fd = -1;
        w->dirty = false;
    }
    char name[SEG_NAME_LEN + 1];
    seg_name(name, first);
    int rc = seg_reserve(w);
    if (rc < 0) {
        return rc;
    }
    int fd = -1;
    uint64_t phys = 0;
    if (w->spare) {
        if (renameat2(w->dirfd, SPARE_NAME, w->dirfd, name, RENAME_NOREPLACE) == 0) {
            w->spare = false;
            fd = openat(w->dirfd, name, O_WRONLY | O_CLOEXEC);
            if (fd < 0) {
                rc = -errno;
                if (renameat2(w->dirfd, name, w->dirfd, SPARE_NAME, RENAME_NOREPLACE) == 0) {
                    w->spare = true;
                } else {
                    unlinkat(w->dirfd, name, 0);
                }
                seg_stats(w);
                return rc;
            }
            phys = w->spare_bytes;
        } else if (errno == ENOENT) {
            w->spare = false; /* gone (removed by hand): create instead */
        }
        /* Any other failure (EINVAL: no RENAME_NOREPLACE here) creates the
         * segment instead, and the spare stays for the next try. */
    }
    if (fd < 0) {
        fd = openat(w->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd < 0) {
            seg_stats(w);
            return -errno;
        }
    }
    w->segs[w->nseg].first = first;
    w->segs[w->nseg].bytes = 0;
    w->nseg++;
    w->extra = phys;
    if (!w->spare) {
        w->spare_bytes = 0;
    }
    seg_stats(w);
    w->dir_dirty = true;
    dirsync_later(w, NULL, 0);
    w->fd = fd;
    w->cur_size = 0;
    return 0;
}

static struct lathist append_hist; /* every WAL's appends, any thread */

void wal_append_hist(struct lathist *out)
{
    lathist_sum(out, &append_hist);
}

static int64_t append_frame(wal *w, enum signal sig, enum otlp_fmt fmt, int coding,
                            const void *payload, size_t n, size_t plain);

int64_t wal_append(wal *w, enum signal sig, enum otlp_fmt fmt, const void *payload, size_t n)
{
    uint64_t t0 = clock_mono_ns();
    int64_t r = append_frame(w, sig, fmt, 0, payload, n, 0);
    lathist_add_shared(&append_hist, clock_mono_ns() - t0);
    return r;
}

int64_t wal_append_coded(wal *w, enum signal sig, enum otlp_fmt fmt, int coding, const void *p,
                         size_t n, size_t plain)
{
    uint64_t t0 = clock_mono_ns();
    int64_t r = plain == 0 || (coding != WAL_CODING_GZIP && coding != WAL_CODING_ZSTD)
                    ? -EINVAL
                    : append_frame(w, sig, fmt, coding, p, n, plain);
    lathist_add_shared(&append_hist, clock_mono_ns() - t0);
    return r;
}

/* One frame, coded |coding|: 0, or 1 / 2 with L = |plain| (the u32 written
 * after the header, counted in N). */
static int64_t append_frame(wal *w, enum signal sig, enum otlp_fmt fmt, int coding,
                            const void *payload, size_t n, size_t plain)
{
    if (n > WAL_FRAME_MAX || plain > WAL_FRAME_MAX || (plain != 0 && n > WAL_FRAME_MAX - 4)) {
        return -E2BIG;
    }
    if (n == 0 || sig < SIG_LOGS || sig > SIG_METRICS || (int)fmt < (int)OTLP_PROTOBUF ||
        fmt > OTLP_JSON) {
        return -EINVAL;
    }
    uint64_t seq = w->last_seq + 1;
    if (w->fd < 0 || w->cur_size >= w->seg_max) {
        if (w->fd < 0 && w->nseg > 0 && w->segs[w->nseg - 1].first == seq) {
            /* A rotation that failed after creating this empty file. */
            unlink_seg(w, seq);
            seg_remove_at(w, w->nseg - 1);
        }
        int rc = rotate(w, seq);
        if (rc < 0) {
            return rc;
        }
    }
    /* The header, and for codings 1 and 2 the u32 L that begins the payload. */
    uint8_t hdr[WAL_HDR + 4];
    size_t hl = plain != 0 ? WAL_HDR + 4 : WAL_HDR;
    put32(hdr, (uint32_t)(n + hl - WAL_HDR));
    put64(hdr + 8, seq);
    hdr[16] = (uint8_t)sig;
    hdr[17] = (uint8_t)fmt;
    hdr[18] = (uint8_t)coding;
    hdr[19] = 0;
    put32(hdr + WAL_HDR, (uint32_t)plain);
    put32(hdr + 4, libdeflate_crc32(libdeflate_crc32(0, hdr + 8, hl - 8), payload, n));

    size_t total = hl + n, done = 0;
    uint64_t off = w->cur_size;
    while (done < total) {
        struct iovec iov[2];
        int cnt = 0;
        if (done < hl) {
            iov[cnt++] = (struct iovec){hdr + done, hl - done};
            iov[cnt++] = (struct iovec){(void *)payload, n};
        } else {
            iov[cnt++] = (struct iovec){(uint8_t *)payload + (done - hl), total - done};
        }
        ssize_t k = pwritev(w->fd, iov, cnt, (off_t)(off + done));
        if (k < 0 && errno == EINTR) {
            continue;
        }
        if (k <= 0) {
            int rc = k < 0 ? -errno : -EIO;
            /* Cut the partial frame off so the file ends on a frame
             * boundary; if even that fails, the next append overwrites it
             * from |off| and replay cuts whatever trails the last frame. */
            if (ftruncate(w->fd, (off_t)off) < 0) {
                w->dirty = true;
            } else if (w->extra > 0) {
                w->extra = 0; /* the recycled file's old bytes went with it */
                seg_stats(w);
            }
            return rc;
        }
        done += (size_t)k;
    }
    /* The file is off + extra bytes: an overwrite of a recycled one grows
     * the WAL on disk only by what it writes past that. */
    uint64_t phys = off + w->extra, end = off + total;
    if (end >= phys) {
        w->st.disk_bytes += end - phys;
        w->extra = 0;
    } else {
        w->extra = phys - end;
    }
    w->cur_size = end;
    w->segs[w->nseg - 1].bytes = end;
    w->dirty = true;
    w->last_seq = seq;
    w->st.frames_appended++;
    w->st.bytes_appended += total;
    return (int64_t)seq;
}

int wal_sync(wal *w)
{
    if (w->dir_dirty) {
        /* The newest segment's name, before the frames in it are called durable. */
        if (fsync(w->dirfd) < 0) {
            return -errno;
        }
        w->dir_dirty = false;
    }
    while (w->n_unsynced > 0) {
        int rc = sync_oldest(w);
        if (rc < 0) {
            return rc;
        }
    }
    if (w->fd >= 0 && w->dirty) {
        if (fdatasync(w->fd) < 0) {
            return -errno;
        }
        w->st.fsyncs++;
        w->dirty = false;
    }
    return 0;
}

int wal_release_upto(wal *w, uint64_t upto)
{
    uint64_t firsts[64];
    int deleted = 0, n = 0;
    bool spared = false;
    /* segs[0] is covered when the next segment starts at or below upto + 1. */
    while (w->nseg > 1 && w->segs[1].first - 1 <= upto) {
        if (n == (int)(sizeof(firsts) / sizeof(firsts[0]))) {
            dirsync_later(w, firsts, n);
            n = 0;
        }
        char name[SEG_NAME_LEN + 1];
        seg_name(name, w->segs[0].first);
        if (!w->spare && renameat2(w->dirfd, name, w->dirfd, SPARE_NAME, RENAME_NOREPLACE) == 0) {
            /* Kept to be recycled (a crash before the directory's fsync
             * brings it back under its name, covered, to be released again). */
            w->spare = true;
            w->spare_bytes = w->segs[0].bytes;
            spared = true;
        } else {
            firsts[n++] = w->segs[0].first;
        }
        if (w->n_unsynced > 0 && w->unsynced[0].first == w->segs[0].first) {
            drop_oldest(w); /* its frames are sealed: no need to sync them any more */
        }
        seg_remove_at(w, 0);
        deleted++;
    }
    if (n > 0 || spared) {
        dirsync_later(w, firsts, n); /* unlinked there; one a crash undoes is redone at boot */
    }
    return deleted;
}

uint64_t wal_last_seq(const wal *w)
{
    return w->last_seq;
}

const struct wal_stats *wal_stats(const wal *w)
{
    return &w->st;
}

void wal_close(wal *w)
{
    if (w == NULL) {
        return;
    }
    /* Its released segments are gone before the directory can be opened again. */
    wal_settle();
    if (w->fd >= 0 && w->extra > 0) {
        /* A recycled newest segment ends at its last frame, so the next
         * open does not count its old bytes as a torn tail. */
        if (ftruncate(w->fd, (off_t)w->cur_size) < 0) {
            /* then the next open cuts them, as a torn tail */
        }
    }
    for (int i = 0; i < w->n_unsynced; i++) {
        close(w->unsynced[i].fd);
    }
    if (w->fd >= 0) {
        close(w->fd);
    }
    close(w->dirfd);
    free(w->segs);
    free(w);
}
