/*
 * block_wint.h - what the block writer's files share (block_write.c fills
 * the columns, block_wtable.c serializes and writes a table): the column
 * buffers being built and the table being serialized. Only those two
 * include it; the format is block_int.h's.
 */
#ifndef MIRADB_BLOCK_WINT_H
#define MIRADB_BLOCK_WINT_H

#include <errno.h>
#include <stdlib.h>
#include <sys/uio.h>

#include <xxhash.h>

#include "storage/block_int.h"
#include "storage/bloom.h" /* bloom_quick_words: the value table's words */

/* A dictionary column being built: codes per row, distinct strings once. */
struct dictb {
    uint64_t *codes;
    size_t cap_codes;
    uint64_t *offs; /* nd + 1 */
    size_t nd, cap_offs;
    struct vbuf data;
    uint64_t *ht;        /* (low 32 hash bits << 32) | (code + 1); 0 = empty */
    size_t ht_cap;       /* at most 2^32: the stored hash bits place an entry */
    uint64_t empty_code; /* dict_add_run: the empty string's code, or UINT64_MAX */
};

/* A string column being built. */
struct strb {
    uint64_t *offs; /* rows + 1 */
    size_t cap_offs;
    struct vbuf data;
};

/* Format 6: the writer's side of the log bodies by template (block_body.c):
 * strings interned once each, in code order. */
struct bt_dict {
    uint64_t *offs; /* n + 1 */
    size_t n, cap_offs;
    struct vbuf data;
    uint64_t *ht; /* (hash bits 32..63 << 32) | (code + 1); 0 = empty */
    size_t ht_cap;
};
#define BT_NSTREAM 6
struct btmpl {
    struct bt_dict tpl, word;
    struct vbuf s[BT_NSTREAM]; /* word refs, ints, hex lengths, hex (row order), codes, literals */
    struct vbuf g[4];          /* the first four of s grouped by template */
    struct vbuf dir;           /* per template, its bytes of each of g */
    struct vbuf cur;           /* the template of the body being coded */
    uint64_t *rat;             /* (rows + 1) x 4: where row j's bytes of s[k] start */
    uint32_t *rcode;           /* by row: its template code, 0 a literal */
    uint32_t *order;           /* rows by template code */
    uint64_t *tpos;            /* by code: where its rows start in order */
    uint64_t *rkey;            /* slots: (uses, code) sort keys */
    uint32_t *rmap;            /* slots: template new -> old, word old -> new, new -> old */
    size_t cap_rat, cap_rcode, cap_order, cap_tpos, cap_rkey, cap_rmap;
};
/*
 * Codes the log body column |s| (|rows| rows, body types |btype|) into |x|
 * by template (block_int.h, "v6 LOG BODIES"; |slots|: also "v6 LOG BODY
 * SLOTS", META flag bit 8): *coded is set when the block should store |x|
 * (a reader accepts its rebuilt size). |t| is scratch kept between seals.
 * 0 or -ENOMEM.
 */
int btmpl_build(struct btmpl *t, const struct strb *s, const uint64_t *btype, uint64_t rows,
                bool slots, struct strb *x, bool *coded);
void btmpl_free(struct btmpl *t);

/* Format 6: the writer's side of the point start times by reference
 * (block_pstart.c, META flag bit 9): a table of the starts and one of the
 * time - start values seen (each at most PS_DICT keys; one a block past
 * that codes as a literal), and the dictionary being ordered. */
#define PS_DICT 65536
#define PS_SLOTS (2 * PS_DICT)
struct ps_ent {
    uint64_t key;
    uint32_t n;
    bool delta; /* key is zz(time - start), not a start */
};
struct pstw {
    struct ps_slot *t[2];
    struct ps_ent *ent;
    struct vbuf z; /* the trial frames of the two layouts */
};
/*
 * Codes the metric root's start column |dz| (zz(time - start) of |rows|
 * rows at times |time|) by reference into |out| (reset first): the
 * column's bytes after its INT header (block_int.h "v6 POINT STARTS"),
 * or nothing when fewer than half the rows would find an entry or the
 * coded bytes under zstd -3 are no smaller than the column's values (the
 * column is then written as before). |s| is scratch kept between seals.
 * 0 or -ENOMEM.
 */
int pstart_build(struct pstw *s, const uint64_t *time, const uint64_t *dz, uint64_t rows,
                 struct vbuf *out);
void pstw_free(struct pstw *s);

/* Format 6: the writer's side of the span events by key (block_spans.c,
 * META flag bit 5): the keys and shapes seen (pointers into the events
 * column being coded), and the streams. An event past these limits is
 * stored literal. */
#define SEV_KEYS 64
#define SEV_SHAPES 64
#define SEV_SHAPE_KEYS 16
struct sevshape {
    const uint8_t *name;
    uint32_t nl, drop, nk;
    uint8_t k[SEV_SHAPE_KEYS];
};
struct sevw {
    const uint8_t *kp[SEV_KEYS];
    uint32_t kn[SEV_KEYS];
    uint32_t nkeys, nshapes;
    struct sevshape sh[SEV_SHAPES];
    struct vbuf times, codes, lit, val[SEV_KEYS];
};

/* Column buffers; kept across seals (scratch below), so capacities grow to
 * the largest block a sealer saw and a seal touches no fresh pages. */
struct wcols {
    uint64_t rows;
    uint64_t nkeys; /* format 3: entries of the key dictionary (S[X_KEYS]) */
    uint64_t nvals; /* format 5: entries of the value dictionary (S[X_VALS]) */
    uint64_t *I[MAX_I];
    size_t cap_I[MAX_I];
    struct strb S[MAX_S];
    struct dictb D[MAX_D];
    struct vbuf R[MAX_R];
    struct vbuf Zb[MAX_R]; /* format 4: a sparse R column's presence bitmap */
    struct fldict fl;      /* format 4: the metric detail's f64 lists (F[X_FLISTS]) */
    uint64_t *pref;        /* format 4: parent references (block_parents.c) */
    size_t cap_pref;
    struct vbuf praw;
    struct vbuf tdir; /* format 6: the T column (empty: lists not by key) */
    uint32_t *pht;    /* span id -> row + 1 */
    size_t cap_pht;
    struct strb sx[2];        /* format 6: coded span events and links (block_spans.c), or
                               * (sx[0]) log bodies by template (block_body.c) */
    struct btmpl bt;          /* format 6: log bodies by template, the writer's scratch */
    struct sevw ev;           /* format 6: span events by key, the writer's scratch */
    struct pstw ps;           /* format 6: point starts by reference, the writer's scratch */
    struct vbuf pst;          /* ... the coded start column (empty: not coded) */
    const struct ent *pst_at; /* ... the root's start entry when coded, else NULL */
};

/*
 * Format 5: the writer's value table (block_vdict.c). While the rows are
 * walked, each counted key-value of a log or span block is looked up by
 * key id and hash (the attribute bloom's kv_val_hash for strings) and
 * counted; a key whose values look unique (more than half distinct after
 * VD_PROBE of them) is no longer looked up, and the table holds at most
 * VD_WMAX entries and VD_BYTES value bytes (values over VD_VAL_MAX are
 * never entered). VD_WMAX is the writer's choice, below the format's
 * VD_MAX: a full 64 Ki-entry table (about 4.6 MiB of slots, entries and
 * bytes) made every lookup a cache miss, +18-33% seal CPU per log record
 * on a corpus whose values all repeat; 4,096 entries stay in L2. Kept
 * between seals (capacities only). Owned by its sealer thread.
 */
#define VD_PROBE 64
#define VD_WMAX 4096
#define VD_BYTES (1u << 18)
#define VD_VAL_MAX 512
struct vd_ent {
    uint64_t a, b; /* bloom_quick_words of the value: the value itself up to 16 bytes */
    uint64_t kl;   /* key id << 32 | value length */
    uint64_t h;
    uint32_t off, count;
};
struct vd_key {
    uint32_t occ, dist; /* occ UINT32_MAX: the key's values are not entered */
};
struct vdict {
    struct vd_ent *e;
    size_t n, cap;
    uint64_t *slot; /* (high 32 hash bits << 32) | (entry + 1); 0 empty; at
                     * most a quarter full (short probes) */
    size_t scap;
    struct vbuf bytes;       /* the entries' values, as val.h encodes them */
    struct vd_key k[KC_MAX]; /* by key id */
    size_t nk;               /* k[0, nk) may be in use (vdict_reset clears them) */
    uint32_t *code;          /* by entry: its list code, 0 inline (vdict_finish) */
    uint32_t *order;         /* the coded entries, in code order */
};

/* Readies |d| (zeroed once, or used by an earlier seal) for a block: 0 or
 * -ENOMEM. */
int vdict_reset(struct vdict *d);
void vdict_free(struct vdict *d);
/* vdict_add's miss: enters the value at free slot |i|. */
int vdict_insert(struct vdict *d, uint32_t key, uint64_t h, const uint8_t *v, uint32_t n,
                 uint64_t a, uint64_t b, size_t i, uint32_t *ve);

/* x[0, n) == y[0, n) for n >= 8, compared as 8-byte words (the last one
 * overlapping): the writer's key and value tables compare short strings
 * inline rather than through memcmp. */
static inline bool words_eq(const void *x, const void *y, size_t n)
{
    const uint8_t *p = x, *q = y;
    for (size_t i = 0; i + 8 < n; i += 8) {
        if (rd64(p + i) != rd64(q + i)) {
            return false;
        }
    }
    return rd64(p + n - 8) == rd64(q + n - 8);
}

/* Doubles the open-addressing table |*ht| of |*cap| slots (|first| slots
 * when empty): each nonzero slot holds a hash in its high 32 bits, which
 * places it; rehashed in place of the old. 0, or -ENOMEM (the table kept). */
static inline int ht_grow(uint64_t **ht, size_t *cap, size_t first)
{
    size_t ncap = *cap ? *cap * 2 : first;
    uint64_t *nh = ncap > (1ull << 32) ? NULL : calloc(ncap, sizeof(*nh));
    if (nh == NULL) {
        return -ENOMEM;
    }
    for (size_t i = 0; i < *cap; i++) {
        if ((*ht)[i] != 0) {
            size_t j = (size_t)((*ht)[i] >> 32) & (ncap - 1);
            while (nh[j] != 0) {
                j = (j + 1) & (ncap - 1);
            }
            nh[j] = (*ht)[i];
        }
    }
    free(*ht);
    *ht = nh;
    *cap = ncap;
    return 0;
}

/* x[0, n) == y[0, n) for any n, without a call: 8-byte words from 8
 * bytes up (words_eq), else two overlapping 4- or 2-byte loads, else the
 * byte. For record_attrs's short keys and values (never reads past n). */
static inline bool short_eq(const void *x, const void *y, size_t n)
{
    const uint8_t *p = x, *q = y;
    if (n >= 8) {
        return words_eq(p, q, n);
    }
    if (n >= 4) {
        return ((rd32(p) ^ rd32(q)) | (rd32(p + n - 4) ^ rd32(q + n - 4))) == 0;
    }
    if (n >= 2) {
        uint16_t a0, a1, b0, b1;
        memcpy(&a0, p, 2);
        memcpy(&b0, q, 2);
        memcpy(&a1, p + n - 2, 2);
        memcpy(&b1, q + n - 2, 2);
        return ((a0 ^ b0) | (a1 ^ b1)) == 0;
    }
    return n == 0 || *p == *q;
}

/* Whether key id |key|'s values are still entered. */
static inline bool vdict_wants(const struct vdict *d, uint32_t key)
{
    return d->k[key].occ != UINT32_MAX;
}

/*
 * Key-value of one row: key id |key| (< KC_MAX, vdict_wants), the value
 * v[0, n) as val.h encodes it, hashed by |h| when |have_h| (a string: the
 * attribute bloom's kv_val_hash), else here from |kh| (the key's hash).
 * *ve = 1 + its entry, or 0 when not entered (its key's values looked
 * unique, the table is full, the value is too long). 0 or -ENOMEM.
 */
static inline int vdict_add(struct vdict *d, uint32_t key, bool have_h, uint64_t h, uint64_t kh,
                            const uint8_t *v, uint32_t n, uint32_t *ve)
{
    uint64_t a, b;
    bloom_quick_words((const char *)v, n, &a, &b);
    if (!have_h) {
        h = n > 16 ? XXH3_64bits_withSeed(v, n, kh) : bloom_quick_mix(a ^ kh, b, n);
    }
    d->k[key].occ++;
    uint64_t tag = h >> 32, kl = (uint64_t)key << 32 | n;
    size_t mask = d->scap - 1, i = (size_t)h & mask;
    for (uint64_t s; (s = d->slot[i]) != 0; i = (i + 1) & mask) {
        if (s >> 32 != tag) {
            continue;
        }
        struct vd_ent *e = &d->e[(uint32_t)s - 1];
        if (((e->a ^ a) | (e->b ^ b) | (e->kl ^ kl)) == 0 &&
            (n <= 16 || words_eq(d->bytes.p + e->off, v, n))) {
            e->count++;
            *ve = (uint32_t)s;
            return 0;
        }
    }
    return vdict_insert(d, key, h, v, n, a, b, i, ve);
}
/*
 * vdict_add's result for a key-value known to be entry |ve| (>= 1) of key
 * |key|, still entered (vdict_wants): the same counts as the lookup would
 * leave, without the hash or the probe (record_attrs's recent values).
 */
static inline void vdict_count(struct vdict *d, uint32_t key, uint32_t ve)
{
    d->k[key].occ++;
    d->e[ve - 1].count++;
}

/*
 * Gives each entry seen twice or more a code (nkeys + 1 upwards, the most
 * frequent first; d->code) and writes those entries, uv key id then the
 * value, as the value dictionary |out| (*nvals entries). 0 or -ENOMEM.
 */
int vdict_finish(struct vdict *d, uint64_t nkeys, struct strb *out, uint64_t *nvals);

/* Format 4: the parent references of a span block's rows (w->pref, the
 * raw ids in w->praw) from its span and parent id columns: 0 or -ENOMEM. */
int prefs_build(struct wcols *w);
/* After prefs_build: the first row of span id |id|, or -1. */
int64_t prefs_row(const struct wcols *w, uint64_t id);

/* Format 6 (block_spans.c): a span block's events and links columns
 * (w->S[T_EVENTS], w->S[T_LINKS]) coded into xs[0] and xs[1] (kept
 * between seals) after prefs_build, the trace id dictionary and the start
 * column filled; *coded false (and 0) when an entry is not batch.h's
 * bytes: the block then stores them as given. With |links_only|, xs[0] is
 * left as it is (sev_build's). 0 or -ENOMEM. */
int sdet_build(struct wcols *w, struct strb *xs, bool links_only, bool *coded);

/* |*p| (|*cap| u64) holds at least |n| u64, contents not kept: 0 or
 * -ENOMEM (block_write.c). */
int cap_u64(uint64_t **p, size_t *cap, size_t n);

/* As sdet_build for the events only, by key (block_int.h, "v6 SPAN EVENTS
 * BY KEY"): *coded false (and 0) when a row's events are not batch.h's
 * bytes or their count is not the row's event count. 0 or -ENOMEM. */
int sev_build(struct wcols *w, struct strb *x, bool *coded);
void sevw_free(struct sevw *e);

/*
 * A table being serialized as pieces rather than one buffer: the directory
 * and each INT header live here, INT values are narrowed in place in their
 * column array, and string, dictionary and RAW data are the column buffers
 * themselves, so a plain table goes to the file with writev and no copy.
 * Each column starts 8-aligned (a zero piece pads). The column arrays are
 * consumed: an INT column no longer holds its values after emit_int.
 */
/* Where one column of a table by column is cut into parts, each a frame of
 * its own (the attrs table's lists by key: the code stream, then each key's
 * values): column |col|, at n offsets inside it, ascending. */
struct zc_cuts {
    unsigned col, n;
    uint64_t at[ZC_PARTS_MAX - 1];
};
#define TBW_PIECES (2 + 3 * MAX_PHYS)
struct tbw {
    uint8_t dir[8 + 16 * MAX_PHYS];
    uint8_t ihdr[MAX_PHYS][INT_HDR + 16]; /* + a delta column's first value (and multiplier) */
    struct iovec iov[TBW_PIECES];
    unsigned niov, ncols, at;
    size_t len;            /* raw table bytes so far */
    bool no_var;           /* no varint INT columns (a zstd table: they compress worse) */
    uint64_t var_cols;     /* ... but for these physical columns (bit i: column i) */
    bool by_col;           /* a zstd table stored one frame a column (codec 2) */
    struct zc_cuts cut;    /* ... and one column of it cut into parts (n 0: none) */
    bool planes;           /* INT encodings 3 and 4 (META flag bit 7; zstd tables only): */
    uint64_t dplane_cols;  /* these physical columns delta planes, INT columns of 4 bytes
                            * or more a value planes */
    uint8_t *pl[MAX_PHYS]; /* the planes of this table's columns (freed at the next table) */
    unsigned npl;
    struct vbuf out;        /* the table in one buffer, for a zstd table only */
    struct ZSTD_CCtx_s *zc; /* kept between seals (zstd tables; NULL until one) */
};

/* Frees what |t| keeps between seals (its buffer and zstd context). */
void blkw_tbw_fini(struct tbw *t);

/* The table of |sp| from |w|'s columns, then |n_extra| more INT columns of
 * |w->rows| values each (the hot key positions), into |t|'s pieces. The
 * INT column arrays are consumed (narrowed in place). */
void blkw_emit_table(struct tbw *t, const struct spec *sp, struct wcols *w, uint64_t **extra,
                     unsigned n_extra);
/* Writes table |t| at |*off| (advanced, padded to 8), zstd compressed at
 * |level| (0: 3) when |codec| asks; fills |d| but its kind. 0 or -errno
 * (-ENOMEM, -EIO when zstd fails). */
int blkw_write_table(int fd, uint64_t *off, struct tbw *t, enum blk_codec codec, int level,
                     struct tdir *d);
/* Format 6 (block_zcols.c): the stored bytes of raw table |raw, len| by
 * column ("v6 TABLES BY COLUMN": one zstd frame of |level| a column, a
 * column that does not shrink as it is) into *out (returned owned: the
 * caller frees it), *outn bytes. 0, -EINVAL when the table's column
 * directory is not the layout the load rebuilds, -ENOMEM, -EIO. */
int blkw_zcols(struct ZSTD_CCtx_s *zc, int level, const uint8_t *raw, size_t len,
               const struct zc_cuts *cut, uint8_t **out, size_t *outn);
/* write(2) until all of p[0, n) is written: 0 or -errno. */
int blkw_write_all(int fd, const void *p, size_t n);
/*
 * Write-behind for the block file |fd| that the calling thread is about to
 * write from offset 0 with blkw_write_all / the table writer: every
 * WB_STEP bytes written, writeback of them is started (sync_file_range
 * SYNC_FILE_RANGE_WRITE, not waited for), so the file's fsync (blkw_fsync)
 * finds little left to write and holds the filesystem's journal briefly
 * instead of stalling the WAL's writes behind a block's worth of data.
 */
void blkw_writebehind_begin(int fd);
/* fsync(2) of a block file, timed (blk_fsync_hist); 0 or -1 with errno. */
int blkw_fsync(int fd);

#endif
