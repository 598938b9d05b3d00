/*
 * wal_test.c - the write-ahead log (storage/wal.c): frame format, replay,
 * torn and corrupt tails, segments, failed writes.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <libdeflate.h>

#include "storage/wal.h"
#include "tests/util/tmpdir.h"
#include "tests/util/zbody.h"

static char dir[256];

static void fresh_dir(void)
{
    cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
}

TestSuite(wal, .init = fresh_dir);

/* ---- expected frames: seq s carries signal/format/payload derived from s ---- */

#define MAXSEQ 512
static size_t expect_n[MAXSEQ];
static const uint8_t *expect_p[MAXSEQ]; /* set: this exact payload (borrowed) */

static enum signal sig_of(uint64_t s)
{
    return (enum signal)(1 + s % 3);
}

static enum otlp_fmt fmt_of(uint64_t s)
{
    return (enum otlp_fmt)(s % 2);
}

static uint8_t byte_of(uint64_t s, size_t i)
{
    return (uint8_t)(((s * 2654435761u) >> 7) ^ (i * 31) ^ (i >> 9));
}

static uint8_t *gen(uint64_t s, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        p[i] = byte_of(s, i);
    }
    return p;
}

/* Appends the frame expected at seq |s| with an |n|-byte payload. */
static int64_t put(wal *w, uint64_t s, size_t n)
{
    uint8_t *p = gen(s, n);
    int64_t rc = wal_append(w, sig_of(s), fmt_of(s), p, n);
    free(p);
    if (rc > 0) {
        cr_assert_lt(rc, MAXSEQ);
        expect_n[rc] = n;
        expect_p[rc] = NULL;
    }
    return rc;
}

struct seen {
    uint64_t seq;
    bool ok; /* signal, format, length and every payload byte as expected */
};

struct col {
    struct seen f[MAXSEQ];
    int n;
    uint64_t fail_at; /* return -ECANCELED at this seq */
};

static int collect(void *ctx, uint64_t seq, enum signal sig, enum otlp_fmt fmt, const uint8_t *p,
                   size_t n)
{
    struct col *c = ctx;
    if (c->fail_at != 0 && seq == c->fail_at) {
        return -ECANCELED;
    }
    cr_assert_lt(c->n, MAXSEQ);
    cr_assert_lt(seq, MAXSEQ);
    bool ok = sig == sig_of(seq) && fmt == fmt_of(seq) && n == expect_n[seq];
    if (ok && expect_p[seq] != NULL) {
        ok = memcmp(p, expect_p[seq], n) == 0;
    } else {
        for (size_t i = 0; ok && i < n; i++) {
            ok = p[i] == byte_of(seq, i);
        }
    }
    c->f[c->n++] = (struct seen){seq, ok};
    return 0;
}

/* Asserts that |c| saw exactly seqs first..last, each intact. */
static void expect_range(const struct col *c, uint64_t first, uint64_t last)
{
    cr_assert_eq(c->n, (int)(last + 1 - first), "saw %d frames, want %d", c->n,
                 (int)(last + 1 - first));
    for (int i = 0; i < c->n; i++) {
        cr_assert_eq(c->f[i].seq, first + (uint64_t)i);
        cr_assert(c->f[i].ok, "frame %llu differs", (unsigned long long)c->f[i].seq);
    }
}

static wal *reopen(uint64_t after, struct col *c)
{
    wal *w = NULL;
    memset(c, 0, sizeof(*c));
    cr_assert_eq(wal_open(dir, after, collect, c, &w), 0);
    cr_assert_not_null(w);
    return w;
}

static const char *seg(uint64_t first)
{
    static char name[4][32];
    static int k;
    k = (k + 1) % 4;
    snprintf(name[k], sizeof(name[k]), "%020llu.wal", (unsigned long long)first);
    return name[k];
}

#define SPARE "spare-segment"

/* Renames |from| to |to| in the WAL directory, as a crash may leave it. */
static void mv(const char *from, const char *to)
{
    char a[512], b[512];
    snprintf(a, sizeof(a), "%s/%s", dir, from);
    snprintf(b, sizeof(b), "%s/%s", dir, to);
    cr_assert_eq(rename(a, b), 0, "%s -> %s", from, to);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* A frame built by hand, with a correct CRC over whatever fields it has. */
static size_t craft(uint8_t *out, uint32_t len, uint64_t seq, uint8_t sig, uint8_t fmt, uint8_t pad,
                    const uint8_t *payload)
{
    memset(out, 0, 20);
    for (int i = 0; i < 4; i++) {
        out[i] = (uint8_t)(len >> (8 * i));
    }
    for (int i = 0; i < 8; i++) {
        out[8 + i] = (uint8_t)(seq >> (8 * i));
    }
    out[16] = sig;
    out[17] = fmt;
    out[18] = pad;
    memcpy(out + 20, payload, len);
    uint32_t crc = libdeflate_crc32(0, out + 8, 12 + len);
    for (int i = 0; i < 4; i++) {
        out[4 + i] = (uint8_t)(crc >> (8 * i));
    }
    return 20 + len;
}

/* ---- tests ---- */

Test(wal, appends_replay_exact_payloads_seqs_and_bytes_after_reopen)
{
    /* One real export body (the JS SDK's gRPC logs request) among synthetic
     * payloads, including one larger than the 1 MiB replay buffer. */
    const char *vdir = getenv("MIRADB_VECTORS");
    size_t vlen = 0;
    uint8_t *vec = tmpdir_read_file(vdir ? vdir : "tests/vectors", "grpc-logs.pb", &vlen);
    cr_assert_not_null(vec, "tests/vectors/grpc-logs.pb: %s", strerror(errno));
    cr_assert_gt(vlen, 100);

    char base[200];
    cr_assert_lt(strlen(dir), sizeof(base));
    strcpy(base, dir);
    snprintf(dir, sizeof(dir), "%s/a/b", base); /* created if missing, parents too */

    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    cr_expect_eq(wal_last_seq(w), 0);
    cr_expect_eq(wal_stats(w)->segments, 0);

    static const size_t sizes[] = {1, 19, 20, 21, 100, 4095, 65536, 3u << 20, 7, 1000};
    uint64_t bytes = 0, payload_bytes = 0;
    for (uint64_t s = 1; s <= 40; s++) {
        size_t n = sizes[s % 10];
        int64_t got;
        if (s == 17) {
            got = wal_append(w, sig_of(s), fmt_of(s), vec, vlen);
            expect_n[s] = vlen;
            expect_p[s] = vec;
            n = vlen;
        } else {
            got = put(w, s, n);
        }
        cr_assert_eq(got, (int64_t)s);
        bytes += 20 + n;
        payload_bytes += n;
    }
    cr_expect_eq(wal_last_seq(w), 40);
    cr_expect_eq(wal_stats(w)->frames_appended, 40);
    cr_expect_eq(wal_stats(w)->bytes_appended, bytes);
    cr_expect_eq(wal_stats(w)->segments, 1);
    cr_expect_eq(wal_stats(w)->fsyncs, 0, "append never syncs");
    wal_close(w);

    /* The bytes on disk follow the frame format in wal.c exactly. */
    cr_assert_eq(tmpdir_file_size(dir, seg(1)), (int64_t)bytes);
    size_t flen;
    uint8_t *f = tmpdir_read_file(dir, seg(1), &flen);
    cr_assert_not_null(f);
    size_t off = 0;
    for (uint64_t s = 1; s <= 40; s++) {
        const uint8_t *h = f + off;
        uint32_t n = le32(h);
        cr_assert_eq(n, expect_n[s]);
        cr_assert_eq(le32(h + 4), libdeflate_crc32(0, h + 8, 12 + n));
        cr_assert_eq(le64(h + 8), s);
        cr_assert_eq(h[16], (uint8_t)sig_of(s));
        cr_assert_eq(h[17], (uint8_t)fmt_of(s));
        cr_assert_eq(h[18], 0);
        cr_assert_eq(h[19], 0);
        off += 20 + n;
    }
    cr_assert_eq(off, flen);
    free(f);

    static struct col c;
    w = reopen(0, &c);
    expect_range(&c, 1, 40);
    cr_expect_eq(wal_stats(w)->frames_replayed, 40);
    cr_expect_eq(wal_stats(w)->bytes_replayed, payload_bytes);
    cr_expect_eq(wal_stats(w)->frames_skipped, 0);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    cr_expect_eq(wal_stats(w)->torn_bytes, 0);
    cr_expect_eq(wal_last_seq(w), 40);

    /* Appends go on in the same segment, with the next seq. */
    cr_assert_eq(put(w, 41, 333), 41);
    cr_expect_eq(wal_stats(w)->segments, 1);
    wal_close(w);
    cr_expect_eq(tmpdir_file_size(dir, seg(1)), (int64_t)(bytes + 20 + 333));

    w = reopen(0, &c);
    expect_range(&c, 1, 41);
    wal_close(w);
    free(vec);
}

Test(wal, torn_last_frame_is_cut_at_every_offset_and_earlier_frames_kept)
{
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    cr_assert_eq(put(w, 1, 30), 1);
    cr_assert_eq(put(w, 2, 50), 2);
    cr_assert_eq(put(w, 3, 70), 3);
    wal_close(w);
    const size_t s1 = 50, s2 = 120, s3 = 210;
    size_t flen;
    uint8_t *f = tmpdir_read_file(dir, seg(1), &flen);
    cr_assert_not_null(f);
    cr_assert_eq(flen, s3);

    static struct col c;
    for (size_t t = s2; t < s3; t++) {
        cr_assert_eq(tmpdir_write_file(dir, seg(1), f, t), 0);
        w = reopen(0, &c);
        expect_range(&c, 1, 2);
        cr_assert_eq(wal_stats(w)->torn_frames, t > s2 ? 1 : 0, "cut at %zu", t);
        cr_assert_eq(wal_stats(w)->torn_bytes, t - s2);
        cr_assert_eq(wal_stats(w)->disk_bytes, s2, "cut at %zu", t);
        cr_assert_eq(wal_last_seq(w), 2);
        cr_assert_eq(tmpdir_file_size(dir, seg(1)), (int64_t)s2);
        wal_close(w);
    }

    /* After the cut, the next frame takes seq 3 and the log reads whole. */
    w = reopen(0, &c);
    cr_assert_eq(put(w, 3, 10), 3);
    wal_close(w);
    w = reopen(0, &c);
    expect_range(&c, 1, 3);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);

    /* Cut inside the first frame: nothing is left, the empty segment goes. */
    for (size_t t = 1; t < s1; t += 7) {
        cr_assert_eq(tmpdir_write_file(dir, seg(1), f, t), 0);
        w = reopen(0, &c);
        cr_assert_eq(c.n, 0);
        cr_assert_eq(wal_stats(w)->torn_frames, 1);
        cr_assert_eq(wal_stats(w)->torn_bytes, t);
        cr_assert_eq(wal_stats(w)->segments, 0);
        cr_assert_eq(tmpdir_file_size(dir, seg(1)), -ENOENT);
        cr_assert_eq(wal_last_seq(w), 0);
        wal_close(w);
    }
    w = reopen(0, &c);
    cr_assert_eq(put(w, 1, 5), 1);
    wal_close(w);
    cr_expect_eq(tmpdir_file_size(dir, seg(1)), 25);
    free(f);
}

Test(wal, corrupt_byte_in_a_middle_frame_ends_replay_there)
{
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 5; s++) {
        cr_assert_eq(put(w, s, 40 + s), (int64_t)s);
    }
    wal_close(w);
    size_t flen;
    uint8_t *f = tmpdir_read_file(dir, seg(1), &flen);
    cr_assert_not_null(f);
    const size_t o3 = (20 + 41) + (20 + 42);
    static struct col c;
    /* Every header byte of frame 3 and a few payload bytes; two bits each. */
    static const size_t pos[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                 12, 13, 14, 15, 16, 17, 18, 19, 20, 33, 62};
    for (size_t k = 0; k < sizeof(pos) / sizeof(pos[0]); k++) {
        for (int bit = 0; bit < 8; bit += 7) {
            f[o3 + pos[k]] ^= (uint8_t)(1u << bit);
            cr_assert_eq(tmpdir_write_file(dir, seg(1), f, flen), 0);
            f[o3 + pos[k]] ^= (uint8_t)(1u << bit);
            w = reopen(0, &c);
            expect_range(&c, 1, 2);
            cr_assert_eq(wal_stats(w)->torn_frames, 1, "byte %zu bit %d", pos[k], bit);
            cr_assert_eq(wal_stats(w)->torn_bytes, flen - o3);
            cr_assert_eq(tmpdir_file_size(dir, seg(1)), (int64_t)o3);
            cr_assert_eq(wal_last_seq(w), 2);
            wal_close(w);
        }
    }
    free(f);
}

Test(wal, corrupt_frame_in_an_early_segment_removes_the_later_segments)
{
    wal_segment_bytes = 250; /* rotates once a segment holds 250+: three 120-byte frames */
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 9; s++) {
        cr_assert_eq(put(w, s, 100), (int64_t)s);
    }
    cr_assert_eq(wal_stats(w)->segments, 3); /* 1-3, 4-6, 7-9: 360 bytes each */
    wal_close(w);
    cr_assert_eq(tmpdir_file_size(dir, seg(4)), 360);
    cr_assert_eq(tmpdir_file_size(dir, seg(7)), 360);

    /* The middle frame (seq 5) of the middle segment gets a bad payload byte. */
    size_t flen;
    uint8_t *f = tmpdir_read_file(dir, seg(4), &flen);
    cr_assert_not_null(f);
    f[120 + 20 + 50] ^= 0x40;
    cr_assert_eq(tmpdir_write_file(dir, seg(4), f, flen), 0);
    free(f);

    static struct col c;
    w = reopen(0, &c);
    expect_range(&c, 1, 4);
    cr_expect_eq(wal_stats(w)->torn_frames, 1);
    cr_expect_eq(wal_stats(w)->torn_bytes, 240 + 360);
    cr_expect_eq(wal_stats(w)->segments, 2);
    cr_expect_eq(tmpdir_file_size(dir, seg(4)), 120);
    cr_expect_eq(tmpdir_file_size(dir, seg(7)), -ENOENT);
    cr_expect_eq(wal_last_seq(w), 4);
    cr_assert_eq(put(w, 5, 10), 5); /* continues in segment 4 */
    wal_close(w);
    cr_expect_eq(tmpdir_file_size(dir, seg(4)), 150);
    w = reopen(0, &c);
    expect_range(&c, 1, 5);
    wal_close(w);
}

Test(wal, frames_with_a_valid_crc_but_bad_fields_end_the_log)
{
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    cr_assert_eq(put(w, 1, 10), 1);
    cr_assert_eq(put(w, 2, 10), 2);
    wal_close(w);
    size_t blen;
    uint8_t *base = tmpdir_read_file(dir, seg(1), &blen);
    cr_assert_not_null(base);
    cr_assert_eq(blen, 60);

    uint8_t *p3 = gen(3, 10);
    struct {
        uint32_t len;
        uint64_t seq;
        uint8_t sig, fmt, pad;
    } bad[] = {
        {0, 3, 1, 1, 0},  /* zero length */
        {10, 2, 1, 1, 0}, /* seq repeated */
        {10, 1, 1, 1, 0}, /* seq going back */
        {10, 3, 0, 1, 0}, /* signal 0 */
        {10, 3, 4, 1, 0}, /* signal 4 */
        {10, 3, 1, 2, 0}, /* unknown format */
        {10, 3, 1, 1, 3}, /* unknown coding (1 gzip and 2 zstd: the tests below) */
        {10, 3, 1, 1, 0}, /* control: intact, so seq 3 is replayed */
    };
    static struct col c;
    uint8_t buf[200];
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        memcpy(buf, base, blen);
        size_t n = blen;
        n += craft(buf + n, bad[k].len, bad[k].seq, bad[k].sig, bad[k].fmt, bad[k].pad, p3);
        size_t tail = n - blen;
        /* An intact frame after the bad one is not read either. */
        uint8_t *p4 = gen(4, 10);
        n += craft(buf + n, 10, 4, (uint8_t)sig_of(4), (uint8_t)fmt_of(4), 0, p4);
        free(p4);
        expect_n[3] = 10;
        expect_n[4] = 10;
        cr_assert_eq(tmpdir_write_file(dir, seg(1), buf, n), 0);
        w = reopen(0, &c);
        if (k + 1 < sizeof(bad) / sizeof(bad[0])) {
            expect_range(&c, 1, 2);
            cr_assert_eq(wal_stats(w)->torn_frames, 1, "case %zu", k);
            cr_assert_eq(wal_stats(w)->torn_bytes, n - blen);
            cr_assert_eq(tmpdir_file_size(dir, seg(1)), (int64_t)blen);
        } else {
            cr_assert_eq(tail, 30);
            expect_range(&c, 1, 4);
            cr_assert_eq(wal_stats(w)->torn_frames, 0);
        }
        wal_close(w);
    }

    /* A segment whose first frame is not the seq in its name is cut whole. */
    uint8_t *p6 = gen(6, 10);
    size_t n = craft(buf, 10, 6, (uint8_t)sig_of(6), (uint8_t)fmt_of(6), 0, p6);
    free(p6);
    expect_n[6] = 10;
    cr_assert_eq(tmpdir_write_file(dir, seg(5), buf, n), 0);
    w = reopen(0, &c);
    expect_range(&c, 1, 4);
    cr_expect_eq(wal_stats(w)->torn_frames, 1);
    cr_expect_eq(wal_stats(w)->torn_bytes, 30);
    cr_expect_eq(tmpdir_file_size(dir, seg(5)), -ENOENT);
    cr_expect_eq(wal_stats(w)->segments, 1);
    wal_close(w);

    /* Files that are not segments are left alone. */
    cr_assert_eq(tmpdir_write_file(dir, "notes.txt", "x", 1), 0);
    cr_assert_eq(tmpdir_write_file(dir, "0001.wal", "x", 1), 0);
    w = reopen(0, &c);
    expect_range(&c, 1, 4);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);
    cr_expect_eq(tmpdir_file_size(dir, "notes.txt"), 1);
    cr_expect_eq(tmpdir_file_size(dir, "0001.wal"), 1);
    free(p3);
    free(base);
}

/* |n| bytes of text that gzip shrinks, different for each |s|. */
static uint8_t *text(uint64_t s, size_t n)
{
    uint8_t *p = malloc(n);
    cr_assert_not_null(p);
    for (size_t i = 0; i < n; i++) {
        p[i] = (uint8_t)("abcdefgh"[(i / 7 + s) % 8] + (i % 97 == 0 ? 1 : 0));
    }
    return p;
}

/* p[0, n) gzip'd as |members| members back to back (the split evenly). */
static uint8_t *gz_of(const uint8_t *p, size_t n, int members, size_t *out)
{
    uint8_t *g = NULL;
    size_t at = 0, len = 0;
    for (int m = 0; m < members; m++) {
        size_t part = m + 1 == members ? n - at : n / (size_t)members, k;
        uint8_t *one = zbody_gzip(p + at, part, &k);
        g = realloc(g, len + k);
        cr_assert_not_null(g);
        memcpy(g + len, one, k);
        free(one);
        at += part;
        len += k;
    }
    *out = len;
    return g;
}

Test(wal, a_gzip_frame_replays_inflated_and_one_that_does_not_inflate_is_skipped)
{
    wal *w;
    static struct col c;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    size_t n[7] = {0, 300, 20000, 50001, 4000, 100, 64}, g[7] = {0};
    uint8_t *pl[7] = {NULL}, *gz[7] = {NULL};
    for (int s = 1; s <= 6; s++) {
        pl[s] = text((uint64_t)s, n[s]);
        expect_n[s] = n[s];
        expect_p[s] = pl[s];
    }
    gz[2] = gz_of(pl[2], n[2], 1, &g[2]);
    gz[3] = gz_of(pl[3], n[3], 3, &g[3]); /* three members, as some exporters send */
    gz[4] = gz_of(pl[4], n[4], 1, &g[4]);
    cr_assert_lt(g[2] * 4, n[2], "the text compresses");
    cr_assert_eq(wal_append(w, sig_of(1), fmt_of(1), pl[1], n[1]), 1);
    cr_assert_eq(wal_append_coded(w, sig_of(2), fmt_of(2), WAL_CODING_GZIP, gz[2], g[2], n[2]), 2);
    cr_assert_eq(wal_append_coded(w, sig_of(3), fmt_of(3), WAL_CODING_GZIP, gz[3], g[3], n[3]), 3);
    /* A length that is not what the members inflate to (one byte more), and
     * bytes that are not gzip at all: written, then skipped by replay. */
    cr_assert_eq(wal_append_coded(w, sig_of(4), fmt_of(4), WAL_CODING_GZIP, gz[4], g[4], n[4] + 1),
                 4);
    cr_assert_eq(wal_append_coded(w, sig_of(5), fmt_of(5), WAL_CODING_GZIP, pl[5], n[5], n[5]), 5);
    cr_assert_eq(wal_append(w, sig_of(6), fmt_of(6), pl[6], n[6]), 6);
    /* Refused without writing: no length, a length past the frame limit. */
    cr_assert_eq(wal_append_coded(w, sig_of(7), fmt_of(7), WAL_CODING_GZIP, gz[2], g[2], 0),
                 -EINVAL);
    cr_assert_eq(wal_append_coded(w, sig_of(7), fmt_of(7), WAL_CODING_GZIP, gz[2], g[2],
                                  WAL_FRAME_MAX + 1ul),
                 -E2BIG);
    /* Each gzip'd frame is its 20-byte header, the u32 length and the bytes as given. */
    uint64_t bytes =
        (20 + n[1]) + (24 + g[2]) + (24 + g[3]) + (24 + g[4]) + (24 + n[5]) + (20 + n[6]);
    cr_assert_eq(wal_stats(w)->bytes_appended, bytes);
    cr_assert_eq(wal_stats(w)->frames_appended, 6);
    wal_close(w);
    cr_assert_eq(tmpdir_file_size(dir, seg(1)), (int64_t)bytes);

    w = reopen(0, &c);
    cr_assert_eq(c.n, 4, "replayed %d frames, want 1, 2, 3 and 6", c.n);
    const uint64_t want[4] = {1, 2, 3, 6};
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(c.f[i].seq, want[i]);
        cr_assert(c.f[i].ok, "frame %llu is not the body as decoded",
                  (unsigned long long)c.f[i].seq);
    }
    cr_assert_eq(wal_stats(w)->frames_undecodable, 2);
    cr_assert_eq(wal_stats(w)->frames_replayed, 6);
    cr_assert_eq(wal_stats(w)->torn_frames, 0);
    /* Appends go on after them. */
    cr_assert_eq(wal_append_coded(w, sig_of(7), fmt_of(7), WAL_CODING_GZIP, gz[2], g[2], n[2]), 7);
    wal_close(w);
    for (int s = 1; s <= 6; s++) {
        free(pl[s]);
        free(gz[s]);
        expect_p[s] = NULL;
    }
}

Test(wal, a_zstd_frame_replays_decoded_sized_or_not_and_a_wrong_length_is_skipped)
{
    wal *w;
    static struct col c;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    size_t n = 30000;
    uint8_t *pl[4] = {NULL};
    for (int s = 1; s <= 3; s++) {
        pl[s] = text((uint64_t)s, n);
        expect_n[s] = n;
        expect_p[s] = pl[s];
    }
    size_t zn[4] = {0};
    uint8_t *z[4] = {NULL};
    /* 1: the size in the frame header (decoded in one call); 2: a stream that
     * pledged none (decoded streaming); 3: one byte short of its length. */
    z[1] = zbody_zstd(pl[1], n, true, &zn[1]);
    z[2] = zbody_zstd(pl[2], n, false, &zn[2]);
    z[3] = zbody_zstd(pl[3], n - 1, true, &zn[3]);
    for (int s = 1; s <= 3; s++) {
        cr_assert_lt(zn[s] * 4, n);
        cr_assert_eq(wal_append_coded(w, sig_of(s), fmt_of(s), WAL_CODING_ZSTD, z[s], zn[s], n), s);
    }
    cr_assert_eq(wal_append_coded(w, sig_of(4), fmt_of(4), 3, z[1], zn[1], n), -EINVAL);
    cr_assert_eq(wal_stats(w)->bytes_appended, 3 * 24 + zn[1] + zn[2] + zn[3]);
    wal_close(w);

    w = reopen(0, &c);
    cr_assert_eq(c.n, 2, "replayed %d frames, want 1 and 2", c.n);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(c.f[i].seq, (uint64_t)i + 1);
        cr_assert(c.f[i].ok, "frame %d is not the body as decoded", i + 1);
    }
    cr_assert_eq(wal_stats(w)->frames_undecodable, 1);
    wal_close(w);
    for (int s = 1; s <= 3; s++) {
        free(pl[s]);
        free(z[s]);
        expect_p[s] = NULL;
    }
}

Test(wal, segments_rotate_and_release_deletes_only_wholly_covered_ones)
{
    wal_segment_bytes = 300; /* three 100-byte frames per segment */
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 20; s++) {
        cr_assert_eq(put(w, s, 80), (int64_t)s);
    }
    static const uint64_t firsts[] = {1, 4, 7, 10, 13, 16, 19};
    cr_assert_eq(wal_stats(w)->segments, 7);
    for (int i = 0; i < 7; i++) {
        cr_assert_eq(tmpdir_file_size(dir, seg(firsts[i])), i < 6 ? 300 : 200);
    }
    cr_expect_eq(wal_stats(w)->disk_bytes, 6 * 300 + 200);
    cr_expect_eq(wal_stats(w)->fsyncs, 0, "no rotation waited for the disk");
    /* Frames on both sides of rotations are durable after one wal_sync:
     * the 6 rotated-away segments and the current one are all synced. */
    cr_assert_eq(wal_sync(w), 0);
    cr_expect_eq(wal_stats(w)->fsyncs, 6 + 1);
    cr_assert_eq(wal_sync(w), 0);
    cr_expect_eq(wal_stats(w)->fsyncs, 7, "nothing new to sync");

    cr_assert_eq(wal_release_upto(w, 2), 0);
    cr_assert_eq(tmpdir_file_size(dir, SPARE), -ENOENT);
    cr_assert_eq(wal_release_upto(w, 3), 1);
    wal_settle(); /* the unlinks run on the dirsync thread */
    cr_assert_eq(tmpdir_file_size(dir, seg(1)), -ENOENT);
    cr_assert_eq(tmpdir_file_size(dir, SPARE), 300, "the first released one is kept");
    cr_assert_eq(tmpdir_file_size(dir, seg(4)), 300);
    cr_expect_eq(wal_stats(w)->segments, 7, "the spare counts");
    cr_expect_eq(wal_stats(w)->disk_bytes, 6 * 300 + 200);
    cr_assert_eq(wal_release_upto(w, 8), 1);
    cr_assert_eq(tmpdir_file_size(dir, seg(7)), 300);
    cr_assert_eq(wal_release_upto(w, 1000), 4, "never the newest segment");
    wal_settle();
    cr_assert_eq(wal_stats(w)->segments, 2, "the newest and the spare");
    cr_expect_eq(wal_stats(w)->disk_bytes, 200 + 300, "only the spare's bytes stay");
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(tmpdir_file_size(dir, seg(firsts[i])), -ENOENT);
    }
    cr_assert_eq(tmpdir_file_size(dir, seg(19)), 200);
    cr_assert_eq(tmpdir_file_size(dir, SPARE), 300, "one spare at most: the others unlinked");
    cr_assert_eq(wal_release_upto(w, 1000), 0);
    wal_close(w);

    static struct col c;
    w = reopen(0, &c);
    expect_range(&c, 19, 20);
    cr_expect_eq(wal_last_seq(w), 20);
    cr_expect_eq(wal_stats(w)->disk_bytes, 200 + 300, "counted from the files at open");
    cr_expect_eq(wal_stats(w)->segments, 2);
    cr_assert_eq(put(w, 21, 80), 21); /* fills segment 19 to 300 */
    cr_assert_eq(put(w, 22, 80), 22); /* segment 22 is the spare, overwritten from 0 */
    cr_expect_eq(wal_stats(w)->segments, 2);
    cr_expect_eq(tmpdir_file_size(dir, seg(19)), 300);
    cr_expect_eq(tmpdir_file_size(dir, seg(22)), 300, "in place: the file did not grow");
    cr_expect_eq(tmpdir_file_size(dir, SPARE), -ENOENT);
    cr_expect_eq(wal_stats(w)->disk_bytes, 600);
    cr_assert_eq(wal_release_upto(w, 21), 1);
    cr_expect_eq(wal_stats(w)->disk_bytes, 600, "segment 19 is the spare now");
    cr_expect_eq(tmpdir_file_size(dir, SPARE), 300);
    wal_close(w);
    cr_expect_eq(tmpdir_file_size(dir, seg(22)), 100, "a clean close cuts the old frames");
    w = reopen(0, &c);
    expect_range(&c, 22, 22);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);

    /* A full newest segment is not appended to after a reopen. */
    wal_segment_bytes = 100;
    w = reopen(0, &c);
    cr_assert_eq(put(w, 23, 80), 23);
    cr_expect_eq(tmpdir_file_size(dir, seg(22)), 100);
    cr_expect_eq(tmpdir_file_size(dir, seg(23)), 300, "the spare (frames 19-21)");
    wal_close(w);
    cr_expect_eq(tmpdir_file_size(dir, seg(23)), 100);
    w = reopen(0, &c);
    expect_range(&c, 22, 23);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);
}

Test(wal, unsynced_segments_are_bounded_and_a_release_drops_them_unsynced)
{
    wal_segment_bytes = 100; /* one 100-byte frame per segment */
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 10; s++) {
        cr_assert_eq(put(w, s, 80), (int64_t)s);
    }
    cr_assert_eq(wal_stats(w)->segments, 10);
    /* 9 rotations: WAL_UNSYNCED_MAX (8) segments wait, the 9th rotation
     * synced the oldest (segment 1) to keep to that bound. */
    cr_expect_eq(wal_stats(w)->fsyncs, 9 - WAL_UNSYNCED_MAX);
    /* Segments 1-5 are covered: 2-5 leave unsynced (their frames are in
     * blocks), so the wal_sync after syncs only 6-9 and the newest. */
    cr_assert_eq(wal_release_upto(w, 5), 5);
    cr_expect_eq(wal_stats(w)->fsyncs, 1, "a release syncs nothing");
    cr_assert_eq(wal_sync(w), 0);
    cr_expect_eq(wal_stats(w)->fsyncs, 1 + 4 + 1);
    wal_close(w);
    wal_settle();
    static struct col c;
    w = reopen(5, &c);
    expect_range(&c, 6, 10);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);
    wal_segment_bytes = WAL_SEGMENT_BYTES;
}

Test(wal, seqs_continue_after_reopen_and_after_skips_frames)
{
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 10; s++) {
        cr_assert_eq(put(w, s, 10 * s), (int64_t)s);
    }
    wal_close(w);

    static struct col c;
    w = reopen(6, &c);
    expect_range(&c, 7, 10);
    cr_expect_eq(wal_stats(w)->frames_skipped, 6);
    cr_expect_eq(wal_stats(w)->frames_replayed, 4);
    cr_expect_eq(wal_stats(w)->bytes_replayed, 70 + 80 + 90 + 100);
    cr_expect_eq(wal_last_seq(w), 10);
    cr_assert_eq(put(w, 11, 5), 11);
    wal_close(w);

    /* |after| above everything on disk: nothing replayed, seqs jump past it. */
    w = reopen(50, &c);
    cr_expect_eq(c.n, 0);
    cr_expect_eq(wal_stats(w)->frames_skipped, 11);
    cr_expect_eq(wal_last_seq(w), 50);
    cr_assert_eq(put(w, 51, 5), 51);
    wal_close(w);

    w = reopen(0, &c);
    cr_assert_eq(c.n, 12);
    for (int i = 0; i < 11; i++) {
        cr_assert_eq(c.f[i].seq, (uint64_t)i + 1);
        cr_assert(c.f[i].ok);
    }
    cr_assert_eq(c.f[11].seq, 51);
    cr_assert(c.f[11].ok);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);

    /* The callback's error stops the replay and is returned. */
    memset(&c, 0, sizeof(c));
    c.fail_at = 4;
    w = (wal *)&c; /* must stay untouched */
    cr_assert_eq(wal_open(dir, 0, collect, &c, &w), -ECANCELED);
    cr_assert_eq(w, (wal *)&c);
    expect_range(&c, 1, 3);
    /* ... and the log is still whole. */
    w = reopen(0, &c);
    cr_expect_eq(c.n, 12);
    wal_close(w);
}

Test(wal, failed_write_is_cut_back_and_the_log_stays_well_formed)
{
    /* RLIMIT_FSIZE makes the kernel stop a write at the limit: a write that
     * crosses it comes back short, the next one fails with EFBIG. */
    signal(SIGXFSZ, SIG_IGN);
    struct rlimit old;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);

    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 3; s++) {
        cr_assert_eq(put(w, s, 100), (int64_t)s);
    }
    struct rlimit lim = {.rlim_cur = 500, .rlim_max = old.rlim_max};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);

    /* 360 + 320 crosses 500: 140 bytes land, then EFBIG; they are cut off. */
    cr_assert_eq(put(w, 4, 300), -EFBIG);
    cr_assert_eq(tmpdir_file_size(dir, seg(1)), 360);
    cr_expect_eq(wal_stats(w)->frames_appended, 3);
    cr_expect_eq(wal_last_seq(w), 3);

    /* The seq was not used up; a frame that fits goes right after frame 3. */
    cr_assert_eq(put(w, 4, 100), 4);
    cr_assert_eq(tmpdir_file_size(dir, seg(1)), 480);
    /* At the limit exactly: the first write fails outright. */
    lim.rlim_cur = 480;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cr_assert_eq(put(w, 5, 1), -EFBIG);
    cr_assert_eq(tmpdir_file_size(dir, seg(1)), 480);

    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_eq(put(w, 5, 7), 5);
    wal_close(w);

    static struct col c;
    w = reopen(0, &c);
    expect_range(&c, 1, 5);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    cr_expect_eq(wal_stats(w)->torn_bytes, 0);
    wal_close(w);
}

Test(wal, append_refuses_bad_arguments_without_writing)
{
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    uint8_t b[8] = {0};
    cr_expect_eq(wal_append(w, SIG_LOGS, OTLP_PROTOBUF, b, 0), -EINVAL);
    cr_expect_eq(wal_append(w, (enum signal)0, OTLP_PROTOBUF, b, 8), -EINVAL);
    cr_expect_eq(wal_append(w, (enum signal)4, OTLP_PROTOBUF, b, 8), -EINVAL);
    cr_expect_eq(wal_append(w, SIG_LOGS, (enum otlp_fmt)2, b, 8), -EINVAL);
    /* The size is checked before the payload is touched. */
    cr_expect_eq(wal_append(w, SIG_LOGS, OTLP_PROTOBUF, b, (size_t)WAL_FRAME_MAX + 1), -E2BIG);
    cr_expect_eq(wal_stats(w)->frames_appended, 0);
    cr_expect_eq(wal_stats(w)->segments, 0);
    cr_expect_eq(tmpdir_file_size(dir, seg(1)), -ENOENT);
    cr_expect_eq(wal_sync(w), 0);
    cr_expect_eq(wal_stats(w)->fsyncs, 0);

    cr_assert_eq(wal_append(w, SIG_METRICS, OTLP_JSON, b, 8), 1);
    cr_expect_eq(wal_sync(w), 0);
    cr_expect_eq(wal_stats(w)->fsyncs, 1);
    wal_close(w);
    wal_close(NULL);
}

/* ---- recycled segments ---- */

/* Frames 1-6 of 100 bytes in 300-byte segments 1 and 4; segment 1 released
 * to the spare (its frames 1-3 still in it). Left open. */
static wal *two_segments_and_a_spare(void)
{
    wal_segment_bytes = 300;
    wal *w;
    cr_assert_eq(wal_open(dir, 0, NULL, NULL, &w), 0);
    for (uint64_t s = 1; s <= 6; s++) {
        cr_assert_eq(put(w, s, 80), (int64_t)s);
    }
    cr_assert_eq(wal_release_upto(w, 3), 1);
    wal_settle();
    cr_assert_eq(tmpdir_file_size(dir, SPARE), 300);
    return w;
}

Test(wal, old_frames_past_the_end_of_a_recycled_newest_segment_are_a_torn_tail)
{
    /* Frame 7 ends exactly where old frame 2 (intact, CRC valid) starts;
     * frame 7 of 50 bytes ends inside old frame 1. Both: cut there. */
    static const size_t len7[] = {80, 30};
    for (int k = 0; k < 2; k++) {
        cr_assert_eq(tmpdir_make(dir, sizeof(dir)), 0);
        wal *w = two_segments_and_a_spare();
        cr_assert_eq(put(w, 7, len7[k]), 7); /* segment 7 is the spare */
        cr_assert_eq(tmpdir_file_size(dir, SPARE), -ENOENT);
        cr_assert_eq(tmpdir_file_size(dir, seg(7)), 300);
        cr_expect_eq(wal_stats(w)->disk_bytes, 600);
        cr_expect_eq(wal_stats(w)->segments, 2);
        /* The crash: the files as they are before the close cuts segment 7. */
        size_t flen;
        uint8_t *f = tmpdir_read_file(dir, seg(7), &flen);
        cr_assert_not_null(f);
        cr_assert_eq(flen, 300);
        wal_close(w);
        cr_assert_eq(tmpdir_file_size(dir, seg(7)), (int64_t)(20 + len7[k]));
        cr_assert_eq(tmpdir_write_file(dir, seg(7), f, flen), 0);
        free(f);

        static struct col c;
        w = reopen(0, &c);
        expect_range(&c, 4, 7);
        cr_expect_eq(wal_stats(w)->torn_frames, 1, "case %d", k);
        cr_expect_eq(wal_stats(w)->torn_bytes, 300 - 20 - len7[k]);
        cr_expect_eq(tmpdir_file_size(dir, seg(7)), (int64_t)(20 + len7[k]));
        cr_expect_eq(wal_stats(w)->disk_bytes, 300 + 20 + len7[k]);
        cr_assert_eq(put(w, 8, 80), 8);
        wal_close(w);
        w = reopen(0, &c);
        expect_range(&c, 4, 8);
        cr_expect_eq(wal_stats(w)->torn_frames, 0);
        wal_close(w);
    }
}

Test(wal, rotation_away_from_a_recycled_segment_cuts_its_old_frames_first)
{
    wal *w = two_segments_and_a_spare();
    for (uint64_t s = 7; s <= 9; s++) {
        cr_assert_eq(put(w, s, 80), (int64_t)s); /* segment 7: the spare, overwritten whole */
    }
    cr_assert_eq(tmpdir_file_size(dir, seg(7)), 300);
    cr_assert_eq(wal_release_upto(w, 6), 1); /* segment 4 is the spare now */
    wal_close(w);

    /* Smaller segments from now on: the recycled one (300 bytes) is full
     * at 200, with old frame 6 (intact) right after its last frame. */
    wal_segment_bytes = 200;
    static struct col c;
    w = reopen(6, &c);
    expect_range(&c, 7, 9);
    cr_assert_eq(put(w, 10, 80), 10); /* segment 10: the spare (frames 4-6) */
    cr_assert_eq(put(w, 11, 80), 11);
    cr_assert_eq(tmpdir_file_size(dir, seg(10)), 300);
    cr_assert_eq(wal_sync(w), 0);
    uint64_t fs = wal_stats(w)->fsyncs;
    cr_assert_eq(put(w, 12, 80), 12); /* rotates: segment 10 cut, 12 created */
    cr_assert_eq(tmpdir_file_size(dir, seg(10)), 200, "cut before the rotation");
    cr_assert_eq(tmpdir_file_size(dir, seg(12)), 100);
    cr_expect_eq(wal_stats(w)->disk_bytes, 300 + 200 + 100);
    /* Segment 10 had no unsynced frame, but its cut must be durable before
     * frame 12 is: this wal_sync syncs both. */
    cr_assert_eq(wal_sync(w), 0);
    cr_expect_eq(wal_stats(w)->fsyncs, fs + 2);
    for (uint64_t s = 13; s <= 14; s++) {
        cr_assert_eq(put(w, s, 80), (int64_t)s);
    }
    /* No close: every file as a crash leaves it. */
    size_t n10, n12, n14;
    uint8_t *f10 = tmpdir_read_file(dir, seg(10), &n10);
    uint8_t *f12 = tmpdir_read_file(dir, seg(12), &n12);
    uint8_t *f14 = tmpdir_read_file(dir, seg(14), &n14);
    cr_assert(f10 != NULL && f12 != NULL && f14 != NULL);
    wal_close(w);
    cr_assert_eq(tmpdir_write_file(dir, seg(10), f10, n10), 0);
    cr_assert_eq(tmpdir_write_file(dir, seg(12), f12, n12), 0);
    cr_assert_eq(tmpdir_write_file(dir, seg(14), f14, n14), 0);
    free(f10);
    free(f12);
    free(f14);
    w = reopen(6, &c);
    expect_range(&c, 7, 14);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    cr_expect_eq(wal_last_seq(w), 14);
    wal_close(w);
    wal_segment_bytes = WAL_SEGMENT_BYTES;
}

Test(wal, a_crash_around_the_spare_renames_loses_no_frame)
{
    /* The spare's release not durable: segment 1 is back under its name. */
    wal *w = two_segments_and_a_spare();
    wal_close(w);
    mv(SPARE, seg(1));
    static struct col c;
    w = reopen(3, &c);
    expect_range(&c, 4, 6);
    cr_expect_eq(wal_stats(w)->frames_skipped, 3);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    cr_assert_eq(wal_release_upto(w, 3), 1, "released again");
    wal_settle();
    cr_expect_eq(tmpdir_file_size(dir, seg(1)), -ENOENT);
    cr_expect_eq(tmpdir_file_size(dir, SPARE), 300);
    wal_close(w);

    /* Renamed to segment 7 but not yet written: frame 1 in it, cut at 0. */
    mv(SPARE, seg(7));
    w = reopen(3, &c);
    expect_range(&c, 4, 6);
    cr_expect_eq(wal_stats(w)->torn_frames, 1);
    cr_expect_eq(wal_stats(w)->torn_bytes, 300);
    cr_expect_eq(tmpdir_file_size(dir, seg(7)), -ENOENT);
    cr_expect_eq(tmpdir_file_size(dir, seg(4)), 300);
    cr_expect_eq(wal_stats(w)->segments, 1);
    cr_expect_eq(wal_stats(w)->disk_bytes, 300);
    cr_assert_eq(put(w, 7, 80), 7); /* no spare now: a fresh segment 7 */
    cr_expect_eq(tmpdir_file_size(dir, seg(7)), 100);
    wal_close(w);
    w = reopen(3, &c);
    expect_range(&c, 4, 7);
    cr_expect_eq(wal_stats(w)->torn_frames, 0);
    wal_close(w);
    wal_segment_bytes = WAL_SEGMENT_BYTES;
}
