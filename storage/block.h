/*
 * block.h - sealed block files: the writer that turns an open block into
 * one immutable file, and the reader that queries, the catalog, `miradb
 * inspect` and `miradb fsck` share. The byte layout is specified in the
 * header comment of block_int.h, the module's private header (the code:
 * block_write.c, block_read.c, block_rows.c, block_inspect.c).
 *
 * A sealed block holds rows in three kinds of tables, each with its own
 * CRC32 and codec: the root table (what nearly every query reads), the
 * attribute table (record attributes) and the detail table (events,
 * links, exemplars, histogram buckets, rarely read fields). Opening a
 * block verifies the trailer, the footer and the root table only; the
 * attribute and detail tables are verified the first time a row access
 * asks for them. Verified tables are remembered process-wide (vcache.h),
 * so reopening a settled file does not hash it again.
 *
 * Rows are stored sorted by time (stable: rows with equal times keep the
 * open block's order), so block row i is not open block row i. The time
 * of a row is: logs time_ns, or observed_ns when time_ns is 0; spans
 * start_ns; points time_ns.
 *
 * Threads: blk_write runs on any thread (the sealer). An open blk is
 * shared: every reader function may be called from any number of threads
 * at once; the lazy verification of a table takes a per-block lock once.
 * Views returned by the row functions point into the block: valid until
 * the caller's reference is dropped (blk_unref), never written through,
 * never NULL (an empty field is a pointer to an empty string).
 */
#ifndef MIRADB_BLOCK_H
#define MIRADB_BLOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/oblock.h"

/* The format this miradb writes; it reads BLK_VERSION_MIN (block_int.h) up
 * to this one and refuses any other. 2: split-block blooms (algorithm 2);
 * 3: delta-coded INT columns, attribute lists as a per-block dictionary;
 * 4: sparse metric values, coded metric detail, a varint stream index;
 * 5: a per-block value dictionary in log and span attribute lists;
 * 6: log and span attribute lists may be stored by key (cold blocks). */
#define BLK_VERSION 6

struct blk_meta {
    uint32_t shard;
    uint64_t wal_seq; /* highest WAL seq whose rows the block holds */
    uint64_t seal_id;
};

/* Table codecs. */
enum blk_codec {
    BLK_CODEC_PLAIN = 0,
    BLK_CODEC_ZSTD = 1,
    /* In files only (format 6, blocks of META flag bit 6, block_int.h
     * "v6 TABLES BY COLUMN"): one zstd frame a column. A writer asks for it
     * with BLK_CODEC_ZSTD and blk_wopts.zstd_cols. */
    BLK_CODEC_ZSTD_COLS = 2,
};

/* One input of a cold block (compact.h): the block it replaced, named by
 * its header's shard and seal id, and the WAL watermark it held. */
#define BLK_COLD_SHARD 65535u /* the header shard of a cold block (no shard's) */
struct blk_source {
    uint32_t shard;
    uint64_t seal_id;
    uint64_t wal_seq;
};

/* The hot seal's default zstd level (sealer.h, the daemon's
 * --hot-zstd-level). Level 1 is the cheapest that keeps all three signals
 * under issue 12's hot target (bench/STORAGE.md, "Hot blocks compressed
 * at the seal"). */
#define BLK_HOT_ZSTD_LEVEL 1

struct blk_wopts {
    enum blk_codec codec; /* for the attribute and detail tables (and root, see below) */
    int zstd_level;       /* 0 = default (3) */
    bool zstd_root;       /* also compress the root table (cold tier) */
    /* Bit t (0 root, 1 attrs, 2 detail): table t stays plain whatever the
     * codec (the hot seal's per-signal choice, blk_hot_wopts). */
    unsigned plain_tables;
    /* n_sources > 0 writes a cold block (footer section 11): the blocks
     * whose rows it holds (borrowed for the call). */
    const struct blk_source *sources;
    uint32_t n_sources;
    /* Logs and spans: store the attribute lists' values by key, each key's
     * values of every row together (block_int.h, "v6 ATTRS"): smaller
     * under zstd (a key's values look alike), one more pass at the write
     * and at each table load. The cold tier's choice (compact.c). */
    bool attrs_by_key;
    /* With attrs_by_key: each key's value stream typed (footer META flag
     * bit 4, block_int.h "v6 TYPED VALUES"): strings of hex digits of one
     * case and length as bytes, strings of a prefix and a decimal as uv
     * zz, doubles of few decimals as byte planes of the mantissa, other
     * streams of one type without the type bytes, whatever rebuilds
     * exactly (checked per key); a table load rebuilds val.h's bytes. The
     * cold tier's choice (compact.c). */
    bool typed_vals;
    /* Spans: code the events and links (block_int.h, "v6 SPAN DETAIL"):
     * event times from the span's start, link ids as references to a
     * span of the block; a table load of the detail rebuilds them (and
     * binds the root first). The cold tier's choice (compact.c). */
    bool span_refs;
    /* Spans, with span_refs: the events by key (block_int.h, "v6 SPAN EVENTS
     * BY KEY", footer META flag bit 5): each distinct key and (name, keys)
     * shape once a block, the values of each key together, the times in a
     * stream of their own; a table load of the detail rebuilds them. The
     * cold tier's choice (compact.c). */
    bool events_by_key;
    /* With codec BLK_CODEC_ZSTD, every signal: each zstd table one frame a
     * column (footer META flag bit 6, block_int.h "v6 TABLES BY COLUMN"):
     * each column gets zstd's tables of its own, ~0.56 B a span, 0.30 a
     * log record and 0.20 a point less on the generator's corpus
     * (bench/STORAGE.md, h-spans4 and the lead's session-12 section). The
     * cold tier's choice (compact.c). */
    bool zstd_cols;
    /* Points: the stream index by row (block_int.h, section 9's codec 2):
     * which stream each row is, ~0.6 B a point less than by stream on
     * the generator's corpus; decoded at open. The cold tier's choice. */
    bool streams_by_row;
    /* Logs: store the bodies by template (block_int.h, "v6 LOG BODIES"):
     * each body's template once a block, its numbers, hex runs and words
     * in streams of their kind; a root table load rebuilds the bodies. The
     * cold tier's choice (compact.c). */
    bool body_tmpl;
    /* Logs, with body_tmpl: templates and words coded by their uses (the
     * most used first), a word as one byte below 255, and each template's
     * variables by slot (footer META flag bit 8, block_int.h "v6 LOG BODY
     * SLOTS"): ~1.6 B a record less under zstd on the generator's corpus.
     * The cold tier's choice (compact.c). */
    bool body_slots;
    /* Points: no stream index in the footer (footer META flag bit 2,
     * block_int.h "v6 STREAMS FROM ROWS"): the reader derives it from the
     * root's metric column and the attribute list codes when the attribute
     * table first loads (blk_n_streams loads it). Overrides streams_by_row.
     * The cold tier's choice (compact.c). */
    bool streams_derived;
    /* zstd roots: the columns of each signal whose steps are small and
     * irregular (metric and log times, span starts and trace id codes,
     * log body offsets) as varint deltas (block_int.h, INT encoding 2)
     * when they are narrower raw; any reader of format 4 on decodes
     * them. The cold tier's choice (compact.c). */
    bool var_seqs;
    /* zstd tables of logs and spans (footer META flag bit 7, block_int.h
     * INT encodings 3 and 4): the root's time column as the byte planes of
     * its deltas, and INT columns of 4 or 8 bytes a value (observed - time,
     * span durations) as byte planes (all low bytes, then the next ...),
     * both over the largest common divisor of the stored values: zstd
     * packs a plane of alike bytes better than interleaved noisy and
     * quiet bytes. Decoded at table load into 8 bytes a value. The cold
     * tier's choice (compact.c). */
    bool int_planes;
    /* The footer's resource, scope and metric dictionaries (sections 5-7)
     * in one zstd frame (section 12, footer META flag bit 3): a block
     * merged from many requests of short-lived processes repeats their
     * resources and metric descriptions; inflated at open into memory the
     * block owns. The cold tier's choice (compact.c). */
    bool dicts_zstd;
    /* Points: the start column by reference (block_int.h, "v6 POINT
     * STARTS", footer META flag bit 9): each row's start, or its time -
     * start, as an entry of a dictionary of those two or more rows hold
     * (a cumulative series' start, a delta series' interval), else
     * literal; a root load decodes it. Used when half the rows find an
     * entry and the coded column is smaller under zstd -3. The cold
     * tier's choice (compact.c). */
    bool point_starts;
};

/* The options of a hot seal of |sig| at zstd |level| (> 0): the cheapest
 * set of zstd tables that reaches issue 12's hot bytes target on the
 * generator's corpus (bench/STORAGE.md, "Hot blocks compressed at the
 * seal"): logs the root (the bodies) and detail, attributes plain; spans
 * attributes and detail, the root plain (what trace lookups read stays
 * in the mapping); points every table. */
static inline struct blk_wopts blk_hot_wopts(int level, enum signal sig)
{
    struct blk_wopts o = {.codec = BLK_CODEC_ZSTD, .zstd_level = level, .zstd_root = true};
    if (sig == SIG_LOGS) {
        o.plain_tables = 1u << 1;
    } else if (sig == SIG_TRACES) {
        o.zstd_root = false;
    }
    return o;
}

/*
 * Writes rows [0, rows) of |ob| (no longer appended to; rows <=
 * oblock_rows(ob)) as DIR/s<shard>-<seal_id, 16 hex>.blk: written to
 * <name>.blk.tmp, fsynced, renamed, DIR fsynced. Returns 0 and the final
 * path in |path| (NUL-terminated), or -errno (-ENAMETOOLONG when |cap| is
 * too small, -EINVAL for rows > oblock_rows, -ENOMEM, -EIO when zstd
 * fails); on failure nothing is left behind (the temporary file is
 * removed). Rows are written sorted by time (see above), with blooms, zone
 * maps and the dictionaries in the footer. Costs about one pass over the
 * rows plus a sort when they are out of time order.
 */
int blk_write(const char *dir, const struct oblock *ob, uint64_t rows, const struct blk_meta *m,
              char *path, size_t cap);
/* As blk_write with codec options (NULL = plain). */
int blk_write_ex(const char *dir, const struct oblock *ob, uint64_t rows, const struct blk_meta *m,
                 const struct blk_wopts *o, char *path, size_t cap);

/*
 * Seal scratch: blk_write's working memory (sorted columns, tables, footer)
 * is kept for the next seal, up to one set per concurrent writer, and is
 * charged to the memory budget (adm.h) while it exists: 2x the
 * oblock_bytes of the largest block the set served, plus BLK_GRAM_SCRATCH
 * once it sealed a log block (the body gram set, bloom.h), charged before
 * the write that may grow it. A set that served a block of more than
 * |max_block_bytes| (oblock_bytes) is freed after that write and its
 * charge returned. The default keeps every set. Any thread.
 */
#define BLK_GRAM_SCRATCH ((1u << 21) / 8) /* 256 KiB */
void blk_scratch_keep(size_t max_block_bytes);
/* Frees the kept sets and returns their charge (after the last blk_write). */
void blk_scratch_release(void);

typedef struct blk blk;

/* blk_open_ex flags. */
#define BLK_OPEN_NO_CACHE 1u /* hash every table verified, ignore and do not feed the cache */
#define BLK_OPEN_LENIENT_ROOT                                                                      \
    2u /* a root table that fails does not fail the open (fsck, inspect) */
/* The root table's CRC is checked at open but it is neither decoded nor
 * bound: its first reader does that (the state blk_drop_tables leaves).
 * The seal's read-back, which would otherwise inflate a zstd root only
 * to drop it (blk_drop_tables) before anyone reads it. */
#define BLK_OPEN_DEFER_ROOT 4u

/*
 * Opens |path|, verifying the trailer, footer and root table. Returns 0
 * and a block with one reference (drop it with blk_unref); -EBADMSG with
 * a one-line reason in |err| for a truncated or corrupt file or an
 * unknown format version ("block format version 7 is newer than this
 * miradb (1)"); -ENOMEM; -errno for I/O.
 */
int blk_open(const char *path, blk **out, char *err, size_t errlen);
int blk_open_ex(const char *path, unsigned flags, blk **out, char *err, size_t errlen);
/*
 * Frees what loading |b|'s tables put on the heap (decoded delta columns,
 * inflated zstd tables: 16 bytes a row for logs; the time column copy and
 * the blk_aux attachment built on it) and marks them unloaded, so the next
 * reader loads (verifies and binds) them again. Readers point into that
 * memory, so the rule is: only while no one else can hold a reference,
 * that is either the caller holds the only one (a freshly opened block
 * before it is published), or the catalog, under the lock every new
 * reference to a published block is taken under (catalog_snapshot), sees
 * blk_sole_ref: its own reference is then the only one and none can be
 * taken until it lets go of the lock. A sealed block that nobody reads
 * then holds no heap for its rows; the mapping's pages are the kernel's.
 * The catalog's cap uses pins instead (blk_drop_tables_unpinned below).
 */
void blk_drop_tables(blk *b);
/* Drops this process's resident pages of |b|'s file mapping (RSS), as
 * MADV_DONTNEED does on a shared read-only mapping of a file nobody
 * writes: the page cache keeps the bytes (the kernel's to evict), the next
 * read faults them back in, so readers running at the same time read the
 * same bytes. Any thread, any time, whoever holds references; never
 * fails. A scan that read a block's tables through the mapping otherwise
 * keeps those pages counted in the process's RSS until the last reference
 * goes. blk_pages_dropped: how many calls, process-wide. */
void blk_drop_pages(blk *b);
uint64_t blk_pages_dropped(void);
/*
 * Pins: a holder that may read |b|'s tables, or keeps pointers into them,
 * pins it (the catalog pins every block of a snapshot for its holder,
 * catalog.h); blk_drop_tables_unpinned frees the tables only while no pin
 * is held. Pin, unpin and that drop take the block's lock, so a reader
 * that pinned and then loads (blk_load) sees either the old tables or
 * loads them again. Any thread.
 */
void blk_pin(blk *b);
void blk_unpin(blk *b);
/* blk_drop_tables when no pin is held and the lock is free (a block being
 * loaded is skipped, never waited for): true when it dropped. */
bool blk_drop_tables_unpinned(blk *b);
/* Whether |b| holds tables blk_drop_tables would free. */
bool blk_holds_tables(const blk *b);
/* Whether the caller's reference is the only one (acquire: what released
 * references did happens before). */
bool blk_sole_ref(const blk *b);
/* When |b| was last read: a process-wide tick taken by blk_load and by
 * each table load (0: never); larger is more recent. */
uint64_t blk_read_stamp(const blk *b);
/* Atomic; any thread. blk_unref accepts NULL; the last one unmaps. */
void blk_ref(blk *b);
void blk_unref(blk *b);

enum signal blk_signal(const blk *b);
uint64_t blk_rows(const blk *b);
const struct blk_meta *blk_meta(const blk *b);
/* The path the block was opened from (after blk_quarantine: its new path). */
const char *blk_path(const blk *b);
/* File size in bytes. */
uint64_t blk_file_bytes(const blk *b);

/* A cold block (written by compaction, footer section 11) names the
 * blocks it replaced: blk_n_sources of them (0: a hot block), source |i|
 * into |*out| (0, or -EINVAL for i out of range). */
uint32_t blk_n_sources(const blk *b);
int blk_source(const blk *b, uint32_t i, struct blk_source *out);
/* The file is unlinked when the last reference goes (a block compaction
 * replaced: queries that hold it keep reading it until they let go). Any
 * thread; once. */
void blk_unlink_on_release(blk *b);

/* ---- pruning sidecars (footer; no table is read) ---- */

/* Zone map of row times. An empty block gives min = UINT64_MAX, max = 0. */
void blk_time_range(const blk *b, uint64_t *min_ns, uint64_t *max_ns);
/* Other zone maps; false when the block has none of that kind (other
 * signal, or no rows). Severity: logs severity_number. Duration: spans
 * end_ns - start_ns (signed). */
bool blk_severity_range(const blk *b, int64_t *min, int64_t *max);
bool blk_duration_range(const blk *b, int64_t *min_ns, int64_t *max_ns);

/* Bloom checks: false = certainly absent, true = maybe present. */
bool blk_may_have_trace(const blk *b, const uint8_t id[16]);
/* |tok| must be one token (bloom.h: a maximal run of [A-Za-z0-9_]); the
 * check folds its case. Anything else, or a block with non-string log
 * bodies, answers true. */
bool blk_may_have_token(const blk *b, const char *tok, size_t n);
/* Could a log body of |b| hold p[0, n) as a substring (bytes, compared as
 * memmem does)? The body gram bloom (footer section 10) answers for a
 * string of 3 or more bytes; it folds ASCII case, so a case-insensitive
 * search may ask with the string in any case (a letter whose other case
 * is outside ASCII, like k and the Kelvin sign, must not be asked about).
 * Shorter strings, blocks without the bloom (sealed before it existed),
 * and blocks with non-string bodies or too many grams answer true. */
bool blk_may_have_substr(const blk *b, const char *p, size_t n);
/* Record attributes, key = value exactly, for string values and for each
 * string element of an array value (not inside kvlists or nested arrays). */
bool blk_may_have_attr(const blk *b, const char *key, size_t kn, const char *val, size_t vn);
/* Resource attributes, likewise. */
bool blk_may_have_resource_value(const blk *b, const char *key, size_t kn, const char *val,
                                 size_t vn);

/* ---- dictionaries (footer) ---- */

uint32_t blk_n_resources(const blk *b);
uint32_t blk_n_scopes(const blk *b);
uint32_t blk_n_metrics(const blk *b);
/* Borrowed while the reference is held; NULL for an id out of range. */
const struct res_view *blk_resource(const blk *b, uint32_t id);
const struct scope_view *blk_scope(const blk *b, uint32_t id);
const struct metric_view *blk_metric(const blk *b, uint32_t id);

/* ---- metric streams (footer; no table is read, but see below) ----
 *
 * A metric block sealed by this release indexes its points by stream: the
 * points of one metric with one attribute list (an OTLP stream; the metric
 * names its scope and resource). Blocks sealed before the index existed
 * have no streams (blk_n_streams 0): a reader scans their rows instead.
 * A cold block written with blk_wopts.streams_derived stores no index:
 * the first blk_n_streams (any thread) loads its root and attribute
 * tables, which derive it (kept while the block is open, as a footer's);
 * when that load fails it answers 0, and the reader's own table load then
 * meets the same error. */

struct blk_stream {
    uint32_t metric_id;
    uint32_t n_rows;
    const uint32_t *rows; /* block rows, ascending (so in time order) */
};

uint32_t blk_n_streams(const blk *b);
/* Stream |i| (streams are sorted by metric id, then first row): 0, or
 * -EINVAL for i out of range. */
int blk_stream(const blk *b, uint32_t i, struct blk_stream *out);
/* The streams of |metric_id|: [*first, *first + *count). */
void blk_streams_of_metric(const blk *b, uint32_t metric_id, uint32_t *first, uint32_t *count);

/* A reader's cache derived from the immutable block (the PromQL label
 * index, query/pmsrc.c), attached once and freed with |free_fn| when the
 * last reference goes. blk_aux: NULL until attached. blk_aux_set: true when
 * |p| was attached, false (nothing changed) when another was first. */
void *blk_aux(const blk *b);
bool blk_aux_set(blk *b, void *p, void (*free_fn)(void *));

/* ---- rows ---- */

#define BLK_ROOT 1u
#define BLK_ATTRS 2u
#define BLK_DETAIL 4u
#define BLK_ALL (BLK_ROOT | BLK_ATTRS | BLK_DETAIL)
/* blk_log with BLK_ROOT: the body left empty (body_type still set), so a
 * block whose bodies are coded by template (format 6) does not rebuild
 * them for a read that decides on other fields first. */
#define BLK_NOBODY 8u

/*
 * Reads row |i| into |*v|. Tables not in |want| are neither read nor
 * verified and their fields come back empty (zero, or an empty string).
 * Root: times, scope/resource/metric, severity, body, ids, names, kind,
 * status, values. Attrs: attrs. Detail: everything else. The first access
 * to a table verifies it (through the verification cache). Returns 0;
 * -EINVAL for another signal or i >= blk_rows; -EBADMSG when a wanted
 * table fails its CRC or structure check (then the caller should
 * blk_quarantine the block; other tables stay readable).
 */
int blk_log(blk *b, uint64_t i, unsigned want, struct log_view *v);
/* The body of row |i| into |*v|, which blk_log read with BLK_ROOT |
 * BLK_NOBODY (its body_type says how to take the bytes). Returns as
 * blk_log; -EBADMSG also when the bodies by template do not rebuild. */
int blk_log_body(blk *b, uint64_t i, struct log_view *v);
/* How many times |b|'s log bodies by template were rebuilt since it was
 * opened (tests: a read with BLK_NOBODY rebuilds nothing). */
unsigned blk_body_rebuilds(const blk *b);
int blk_span(blk *b, uint64_t i, unsigned want, struct span_view *v);
int blk_point(blk *b, uint64_t i, unsigned want, struct point_view *v);

/* The fields one sample of a gauge or sum needs, and only those: time,
 * start, value type and value, flags (the other fields of |*v| are left as
 * they were). Returns as blk_point with want BLK_ROOT | BLK_DETAIL. */
int blk_point_sample(blk *b, uint64_t i, struct point_view *v);

/* The fields one classic histogram row's samples need: time, start, count,
 * sum and has_sum, flags, detail (the other fields of |*v| are left as they
 * were). Returns as blk_point with want BLK_ROOT | BLK_DETAIL. */
int blk_point_hist(blk *b, uint64_t i, struct point_view *v);

/* The time, value and flags of a gauge or sum row (blk_point_values). */
struct blk_value {
    uint64_t time_ns;
    union {
        int64_t i;
        double d;
    } value;
    uint32_t flags;
    uint8_t value_type; /* enum point_value */
};

/* Rows rows[0..n) (a stream's, in any order) into out[0..n): what a
 * gauge or sum sample without a start time needs, the column reads of the
 * rows overlapped. Returns as blk_point with want BLK_ROOT | BLK_DETAIL
 * (-EINVAL for a row past the end). */
int blk_point_values(blk *b, const uint32_t *rows, uint32_t n, struct blk_value *out);

/*
 * Makes the tables of |want| ready (verified, decoded; with BLK_ROOT and
 * not BLK_NOBODY, a log block's bodies too) without reading a row: 0,
 * -EBADMSG, or -ENOMEM. A scan calls it once with the |want| of its reads,
 * then reads rows.
 */
int blk_load(blk *b, unsigned want);

/*
 * Column access for scans (after blk_load of the root table succeeded,
 * else NULL): the time of every row, in row order (sorted), decoded once
 * per open block and kept until the last reference goes. NULL on out of
 * memory.
 */
const uint64_t *blk_col_time(blk *b);
/* First row whose time >= t (rows are sorted by time): rows() if none. */
uint64_t blk_lower_bound(blk *b, uint64_t t);

/*
 * Hot attribute keys: a record attribute key present in at least half the
 * rows of a block (at most 12 per block, most frequent first) has a
 * position column in the attribute table, so a filter on it decodes that
 * one value per row instead of walking the row's attribute list.
 */
uint32_t blk_n_hot_attrs(const blk *b);
/* Key of hot attribute |h| (borrowed; empty when out of range). */
struct mstr blk_hot_attr_key(const blk *b, uint32_t h);
/* Index of |key| among the hot attributes, or -1. Reads no table. */
int blk_hot_attr_find(const blk *b, const char *key, size_t kn);
/*
 * Row |i|'s value of hot attribute |h| (its first occurrence): 1 with the
 * value in |*v| (strings point into the block), 0 when the row lacks the
 * key, -EBADMSG when the attribute table fails (see blk_log), -EINVAL for
 * |h| or |i| out of range. Verifies the attribute table on first use.
 */
int blk_hot_attr(blk *b, uint32_t h, uint64_t i, struct val *v);

/* Moves the file to DATA/quarantine/ (DATA = the parent of the block's
 * directory), keeping it mapped. 0 or -errno. Counted once per block. */
int blk_quarantine(blk *b);

/* ---- introspection (inspect, fsck) ---- */

enum blk_table_kind {
    BLK_T_ROOT = 1,
    BLK_T_ATTRS = 2,
    BLK_T_DETAIL = 3,
};
const char *blk_table_kind_name(enum blk_table_kind k); /* "root", "attrs", "detail" */
const char *blk_codec_name(enum blk_codec c);           /* "plain", "zstd", "zstdc" (by column) */

struct blk_table_info {
    enum blk_table_kind kind;
    enum blk_codec codec;
    uint64_t offset; /* in the file */
    uint64_t length; /* stored bytes */
    uint64_t raw_length;
    uint32_t crc32;
    uint32_t n_columns; /* 0 until the table has been loaded */
    int state;          /* 0 not verified yet, 1 verified ok, -1 failed */
};
uint32_t blk_n_tables(const blk *b);
/* 0, or -EINVAL for an index out of range. */
int blk_table_info(const blk *b, uint32_t i, struct blk_table_info *out);
/* Hashes table |i| now, bypassing the cache (fsck, inspect): 0 when its CRC
 * matches, -EBADMSG when not; -EINVAL for an index out of range. Does not
 * change what the row functions see. */
int blk_verify_table(blk *b, uint32_t i);

enum blk_bloom_kind {
    BLK_BLOOM_TOKENS = 1,
    BLK_BLOOM_TRACE_IDS = 2,
    BLK_BLOOM_ATTRS = 3,
    BLK_BLOOM_RES_ATTRS = 4,
    BLK_BLOOM_GRAMS = 5, /* body trigrams (footer section 10, not 4) */
};
const char *blk_bloom_kind_name(enum blk_bloom_kind k);
struct blk_bloom_info {
    enum blk_bloom_kind kind;
    uint64_t nbits;
    uint64_t n_items; /* distinct hashes inserted */
    uint32_t k;       /* probes per item */
    uint64_t seed;
    uint64_t bits_set;
    bool complete; /* false: answers true for everything */
};
uint32_t blk_n_blooms(const blk *b);
int blk_bloom_info(const blk *b, uint32_t i, struct blk_bloom_info *out);

struct blk_layout {
    uint32_t version;
    uint64_t header_bytes;
    uint64_t footer_offset;
    uint64_t footer_bytes;
    uint64_t dict_bytes[3]; /* resources, scopes, metrics sections */
    uint64_t bloom_bytes;
    uint64_t meta_flags; /* footer META flags (block_int.h, section 1) */
};
void blk_layout(const blk *b, struct blk_layout *out);

/* ---- process-wide counters ---- */

struct blk_stats {
    uint64_t tables_verified; /* CRCs computed (cache misses and forced checks) */
    uint64_t bytes_hashed;
    uint64_t verify_failures;
    uint64_t cache_hits; /* hits and misses count footers as well as tables */
    uint64_t cache_misses;
    uint64_t cache_clears;
    uint64_t quarantined;
    /* heap the open blocks hold outside their mappings: columns decoded
     * and zstd tables inflated at load, attribute lists and metric detail
     * rebuilt, the time column copy (blk_drop_tables returns these), and
     * format 4's decoded stream index (kept while the block is open).
     * Charged to the memory budget (adm.h) while held. */
    uint64_t table_heap_bytes;
    /* of table_heap_bytes, the inflated copies of zstd tables: the bytes a
     * plain table would leave in the file mapping (catalog.h: the cap) */
    uint64_t table_inflated_bytes;
};
void blk_get_stats(struct blk_stats *out);
struct lathist;
/* Adds to |out| how long block files' fsyncs took (blk_write). Any thread. */
void blk_fsync_hist(struct lathist *out);

#endif
