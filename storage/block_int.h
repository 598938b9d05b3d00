/*
 * block_int.h - what the files of the sealed block module share: the file
 * format, its constants, the logical column specs, the little helpers,
 * struct blk and the column readers. Only storage/block*.c include this
 * file; block.h is the module's public surface.
 *
 * The files, one job each:
 *   block_write.c    the writer: an open block sealed into one file
 *   block_wtable.c   the writer's table serializer (block_wint.h)
 *   block_keys.c     format 3's key-coded attribute lists, both ways, and
 *                    (format 5) the load's hot key columns
 *   block_bykey.c    format 6's attribute lists by key and their typed value
 *                    streams, both ways
 *   block_vdict.c    format 5's value dictionary, the writer's side
 *   block_body.c     format 6's log bodies by template, both ways
 *   block_zcols.c    format 6's span tables one zstd frame a column, both
 *                    ways
 *   block_read.c     open, footer parsing, table loading with lazy
 *                    verification, sidecars, quarantine, counters
 *   block_rows.c     row views and column access over loaded tables
 *   block_inspect.c  introspection (`miradb inspect`, `miradb fsck`)
 *
 * FILE FORMAT, version 6 (this miradb writes 6 and reads 2, 3, 4, 5 and
 * 6; what format 3 changed is marked "v3", what format 4 changed "v4"
 * (metric blocks and the span root), what format 5 changed "v5" (the log
 * and span attribute tables), what format 6 changed "v6" (the same
 * tables, by key), and a reader of an older format refuses a newer file
 * at open with "block format version 6 is newer than this miradb (5)")
 * (integers little-endian; "zz" = zigzag of a two's-complement int64:
 * (x << 1) ^ (x >> 63); "uv" = unsigned LEB128; every table, column and
 * footer section starts at a multiple of 8 bytes, padding is zero)
 *
 *   HEADER (64 bytes, at 0)
 *     0  8   magic "MiraBlk\0"
 *     8  u32 format version (6; 5, 4, 3 and 2 for files of earlier releases)
 *    12  u32 header size (64)
 *    16  u8  signal (1 logs, 2 traces, 3 metrics), then 3 zero bytes
 *    20  u32 shard
 *    24  u64 rows
 *    32  u64 seal id
 *    40  u64 WAL watermark: the highest WAL seq whose rows the block holds
 *    48  u64 zero (reserved)
 *    56  u32 crc32 of bytes 0..56
 *    60  u32 zero
 *
 *   TABLES, from 64 on: root, then attrs, then detail (each located by the
 *   footer's table directory). A table's stored bytes are its raw bytes
 *   (codec 0) or one zstd frame of them (codec 1, raw length at most 256 MiB
 *   and 4096 x stored + 1 MiB); the CRC covers the
 *   stored bytes. Raw table:
 *     0  u32 ncols
 *     4  u32 zero
 *     8  ncols x { u64 offset from the table start, u64 length }
 *        then the columns
 *   A column is either
 *     INT  24-byte header { u64 count, u64 base, u8 width (0,1,2,4,8),
 *          u8 encoding (0 in v2), 6 zero }, then by encoding:
 *          0 frame of reference: count values of |width| bytes, value =
 *            base + stored (width 0: every value is base)
 *          1 delta (v3; count > 0): u64 first, then count - 1 values of
 *            |width| bytes: value 0 = first, value i = value i-1 + base +
 *            stored i (modulo 2^64). The writer takes it when it is
 *            smaller (sorted times, string offsets, whose deltas are
 *            lengths); the reader decodes it at table load into 8-byte
 *            values in memory the block owns (freed with it), so row i
 *            stays O(1), and bounds its count by the file size first
 *          2 varint delta (v4; count > 0, base 0, width 0): u64 first,
 *            then count - 1 x uv zz(value i - value i-1), the column's
 *            bytes exactly; decoded at load as delta. The writer takes it
 *            when it is at least a quarter smaller than 0 and 1 (times
 *            whose gaps vary: a block of 100 s of points needs 8-byte
 *            deltas for the gaps between requests, and 2 bytes of uv for
 *            the points inside one). zstd tables take it only for the
 *            root columns blk_wopts.var_seqs names (the compactor's:
 *            metric and log times, span starts and trace id codes, log
 *            body offsets), whenever narrower: zstd packs those varints
 *            better than fixed-width deltas; any reader of format 4 on
 *            decodes it
 *          3 planes (v6, META flag bit 7; count > 0, width pw 1 .. 8):
 *            u64 g (>= 1), then pw planes of count bytes: value i = base
 *            + g x u_i (modulo 2^64), u_i = sum of plane j's byte i << 8 j
 *            (plane 0 the low bytes)
 *          4 delta planes (v6, META flag bit 7; count > 0, width pw 1 ..
 *            8): u64 first, u64 g (>= 1), then pw planes of count - 1
 *            bytes: value 0 = first, value i = value i-1 + base + g x u_i
 *            (modulo 2^64). The writer (blk_wopts.int_planes, the
 *            compactor's, zstd log and span blocks) takes 4 for the root's
 *            first column (time, span start) and 3 for any other INT
 *            column of 4 or 8 bytes a value that deltas do not narrow
 *            (observed - time, span durations), g the stored values'
 *            largest common divisor; zstd packs planes of alike bytes
 *            better than interleaved noisy low and quiet high bytes. The
 *            reader decodes them at load into 8-byte values in memory the
 *            block owns; planes not exactly pw x their count of bytes, pw
 *            0 or past 8, g 0, or either encoding without the bit fail
 *            the load with -EBADMSG (0.90 B a log record, 0.58 a span less
 *            on the generator's corpus; bench/STORAGE.md, h-lattrs)
 *     RAW  plain bytes (fixed-size ids and doubles: rows x size)
 *   and logical columns are made of physical ones:
 *     I  one INT of |rows| values
 *     R  one RAW of rows x size bytes
 *     S  (strings, encoded values) INT of rows+1 offsets (0 first, non-
 *        decreasing, last = data length), then RAW data: row i is
 *        data[off[i], off[i+1])
 *     D  (low-cardinality strings) INT of |rows| codes, then the dictionary
 *        as an S of ndict entries: row i is dictionary entry codes[i]
 *        (v3: ndict <= rows + 1, checked)
 *     K  (v3, the key dictionary) INT of nkeys + 1 offsets (1 <= nkeys + 1
 *        <= 4097), then RAW data, as an S of its own count
 *     Z  (v4, sparse 8-byte values) RAW bitmap of ceil(rows / 8) bytes
 *        (bit i % 8 of byte i / 8 set: value i's bits are not all zero;
 *        bits past the rows zero), then RAW of 8 bytes per set bit, in row
 *        order; a clear bit reads as 8 zero bytes (an absent sum, min,
 *        max, a histogram's value: they cost one bit). Expanded at load
 *        into rows x 8 bytes the block owns, so row i stays O(1)
 *     F  (v4, the f64 list dictionary) INT of n + 1 offsets (1 <= n + 1
 *        <= rows + 1), then RAW data, as an S of its own count; entry k
 *        is list code k (8 bytes an element)
 *
 *   Logical columns of each table, in order (names in the enums below):
 *   LOGS    root   I time (time_ns, or observed_ns when time_ns is 0),
 *                  I scope id, I zz(severity_number), D severity_text,
 *                  I body type (val.h), S body (the string for VAL_STR,
 *                  the encoded value otherwise), I id flags (bit 0
 *                  has_trace_id, bit 1 has_span_id, bit 2 time_ns was 0),
 *                  R trace_id (16), R span_id (8), D event_name
 *           attrs  I attribute count, S attributes (val.h attrs), then one
 *                  I per hot key (footer section 8): 1 + the offset of
 *                  the key's (first) value in the row's attributes, 0
 *                  when the row lacks the key. Every table kind's attrs
 *                  table ends with these columns.
 *           detail I zz(observed_ns - time), I dropped_attrs, I flags
 *   TRACES  root   I start_ns, I zz(end_ns - start_ns), I scope id,
 *                  R trace_id (16), R span_id (8), R parent_span_id (8),
 *                  I has_parent, D name, I zz(kind), I zz(status_code),
 *                  S status_message
 *           attrs  I attribute count, S attributes
 *           detail S trace_state, I flags, I dropped_attrs, S events,
 *                  I n_events, I dropped_events, S links, I n_links,
 *                  I dropped_links (events and links in batch.h's encoding)
 *   METRICS root   I time_ns, I zz(time_ns - start_ns), I metric id,
 *                  I value type, R value (8: f64 or i64 bits), I count,
 *                  R sum (8), R min (8), R max (8), I has (bit 0 sum,
 *                  bit 1 min, bit 2 max)
 *           attrs  I attribute count, S attributes
 *           detail I flags, S detail (batch.h), S exemplars, I n_exemplars
 *   v4 TRACES  root   as above but R trace_id is a D column (each distinct
 *                  trace id of the block once, every entry 16 bytes:
 *                  checked at load) and R parent_span_id is a P column:
 *     P  (v4, parent span ids) INT of |rows| references, then RAW of 8
 *        bytes per reference 1, in row order. Reference 0: eight zero
 *        bytes (no parent); 1: the next raw id; r >= 2: the span id of
 *        block row j - unzz(r - 2) (j: this row; it must be inside the
 *        block). The writer references a span of the block with that id
 *        when it is near enough for 1-byte references (or 2-byte: its
 *        choice, the smaller column), else stores the id raw. Expanded at
 *        load into rows x 8 bytes the block owns
 *   v4 METRICS root   as above but R value, sum, min and max are Z columns
 *           detail I flags, S detail entries (below), S exemplars,
 *                  I n_exemplars, F lists
 *     A v4 detail entry is empty (an empty detail) or a form byte, then
 *       0 verbatim   the detail's bytes as batch.h has them (a detail
 *                    that does not parse as its metric's kind, or a kind
 *                    without a form: gauges and sums have no detail)
 *       1 histogram  uv n, n x uv bucket count, uv list code (bounds)
 *       2 exp. hist. uv zz(scale), uv zero_count, 8 bytes zero_threshold,
 *                    uv zz(positive offset), uv n, n x uv count,
 *                    uv zz(negative offset), uv m, m x uv count
 *       3 summary    uv n, uv list code (the n quantiles), n x 8 bytes
 *                    value
 *     (scales and offsets are int32). A table load rebuilds every entry
 *     into batch.h's bytes in memory the block owns (block_detail.c), so
 *     views hand out the same detail as from a v2/v3 file; an entry that
 *     does not decode exactly (a code past F, a uv past the entry, bytes
 *     left over) fails the load.
 *   Rows are sorted by time (the first root column), ties in append order.
 *   v3 ATTRS of every signal: I attribute count, D attributes, K keys, then
 *   the hot key columns. The D dictionary holds each distinct attribute
 *   list of the block once (a metric stream's list repeats for all its
 *   points), key-coded: each key-value as uv (key id + 1) then the value
 *   as val.h encodes it, or uv 0 then the whole key-value as val.h
 *   encodes it (a key the writer did not count: more than 4096 distinct
 *   keys); key id k is entry k of K. A table load rebuilds the lists
 *   byte for byte into memory the block owns (block_keys.c), so views
 *   hand out the same bytes as from a v2 file, and the hot positions are
 *   offsets into the rebuilt lists. Rebuilding parses every value: a code
 *   past K or a value that does not parse fails the load.
 *   v5 ATTRS of logs and traces (metric blocks keep v3's: their lists
 *   are a dictionary of whole lists already): I attribute count, D
 *   attributes, K keys, V values, and no hot key columns: a table load
 *   finds each row's hot key positions (section 8's keys) while it
 *   rebuilds the lists, into memory the block owns (1, 2 or 4 bytes a
 *   row and hot key), so readers see the same columns as from a v4 file.
 *     V  (v5, the value dictionary) INT of nvals + 1 offsets (1 <= nvals
 *        + 1 <= VD_MAX + 1), then RAW data, as an S of its own count;
 *        entry v is uv key id (below nkeys) then one value as val.h
 *        encodes it, exactly filling the entry
 *   A list key-value is then uv code: 0 a literal key-value, 1 .. nkeys a
 *   key (its value follows, as in v3), nkeys + 1 + v the whole key-value
 *   of value entry v (nothing follows). Codes take at most 3 bytes. The
 *   writer puts a key-value in V when it occurs in two rows or more and
 *   its key's values repeat (block_vdict.c), the most frequent first so
 *   that they take the shortest codes. A code past V, an entry whose key
 *   is past K or whose value does not fill it exactly, fails the load.
 *   v6 ATTRS of logs and traces: as v5, then one more column:
 *     T  (v6, the lists by key) RAW of 0 bytes: the D data is laid out
 *        as in v5 (the hot seal); or of nkeys x u64: the D data (the same
 *        bytes, the same offsets) is stored by key, the byte at a time
 *        permuted: first the code stream (every list's codes in dictionary
 *        entry order, each literal key-value after its code 0), then for
 *        key id k = 0 .. nkeys - 1 the values of code k + 1, in the same
 *        order, T's u64 k bytes of them. The load walks the code stream
 *        and takes each value from its key's stream (val.h says where it
 *        ends) back into v5's layout; a value past its stream, a stream
 *        not used up, or lengths over the data fail the load. zstd finds
 *        a key's values alike (4.8 B a log record, 3.0 a span less on the
 *        generator's corpus; bench/STORAGE.md, h-cold).
 *   v6 TYPED VALUES (logs and traces, META flag bit 4; the compactor's,
 *   blk_wopts.typed_vals; only with T's streams by key): T holds nkeys x
 *   9 bytes { u64 key k's stored stream length, u8 tag } and each key's
 *   stream is its tag's encoding of the values by key above; the D offsets
 *   stay the lists' own (the data column's length is the streams'). Tags
 *   (block_bykey.c; zz and uv as at the top):
 *     0 TV_RAW   the values as val.h encodes them (as without the bit)
 *     1 TV_ONE   u8 type t (1 .. 7), then each value's bytes after its
 *                type byte (every value of the key of type t)
 *     2 TV_HEXL  uv n (1 .. 63), then n bytes a value: a string of 2n
 *                lower-case hex digits, two a byte, the first the high
 *                nibble (rebuilt: VAL_STR, u8 2n, the digits)
 *     3 TV_HEXU  the same, upper-case digits
 *     4 TV_DEC   uv p (0 .. 64), p bytes of prefix, then a value is uv
 *                zz(x): the string prefix then x in decimal ('-' first
 *                when negative, no leading zero; at most 84 bytes: a
 *                one-byte length)
 *     5 TV_DBL   u8 e (0 .. 9), u8 w (1 .. 8), u8 z (0 .. 1), then w
 *                planes of n bytes (the stream's rest, n x w bytes: n
 *                values): value i is u = sum of plane j's byte i << 8 j
 *                (plane 0 the low byte), m = z ? unzz(u) : u as an int64,
 *                the double (double)m / 10^e (the writer's |m| below
 *                2^53, z 1 only when an m is negative)
 *   The writer picks one tag a key from its values (a string key hex,
 *   decimal or TV_ONE, a double key TV_DBL, any other of one type TV_ONE,
 *   mixed types or VAL_EMPTY raw), encodes the stream, decodes it back
 *   and keeps the tag only when that gives the same bytes; otherwise the
 *   key is raw. The load takes each value from its key's stream through
 *   its tag into v5's layout (the memory format 6 fills without the bit),
 *   so every reader sees the same lists: an unknown tag or head (n 0 or
 *   past 63, p past 64 or past the stream, e past 9, w not 1 .. 8, z past
 *   1, planes not n x w bytes, t not 1 .. 7), a value past its stream, a
 *   stream not used up, or lists rebuilt to other than the D offsets'
 *   last fail the load with -EBADMSG, as does the bit set without T or
 *   with T of other than 9 bytes a key (2.9 B a log record, 1.6 a span
 *   less on the generator's corpus; bench/STORAGE.md, h-vals).
 *   v6 SPAN DETAIL (META flag bit 1; the compactor's, blk_wopts.span_refs):
 *   the S events and S links entries are coded (block_spans.c): event
 *   times as uv zz(time - the span's start), link ids as uv 1 + zz(j -
 *   row) of a block row with both the same trace and span id (0: the 24
 *   bytes follow), the u32 fields as uv. A table load (which binds the
 *   root first) rebuilds batch.h's bytes into memory the block owns; an
 *   entry that does not rebuild exactly fails the load. Without the flag
 *   the entries are batch.h's bytes, as in v2-v5.
 *   v6 SPAN EVENTS BY KEY (META flag bit 5, span blocks with bit 1 only;
 *   the compactor's, blk_wopts.events_by_key): the S events column holds
 *   rows + 1 offsets all 0 (one INT header, width 0) and, as its data, every
 *   row's events at once (block_spans.c):
 *     uv rows, uv nkeys, uv nshapes, uv out (the bytes of the rebuilt
 *     column), then 5 + nkeys x uv part length (they add up to the rest of
 *     the data exactly), then the parts in that order:
 *     0 keys    nkeys x { uv length, key bytes }
 *     1 shapes  nshapes x { uv name length, name, uv dropped_attrs, uv n,
 *               n x uv key id (below nkeys) }
 *     2 times   per event uv zz(time_ns - its span's start_ns)
 *     3 codes   per event uv c: 0 literal, 1 .. nshapes shape c - 1
 *     4 literal per literal event uv length, then its batch.h bytes after
 *               the time (name length onward), as they were
 *     5 + k     the values (val.h) of key k of every shaped event, in event
 *               order
 *   Events in row order, each row taking as many as its T_NEV count. A
 *   shaped event rebuilds as time, uv name length, name, u32 dropped, u32 n,
 *   u32 attr bytes, then per key id uv key length, key, the next value of
 *   that key's part (val.h says where it ends). The writer stores an event
 *   literal when its attributes do not parse into its count of key-values
 *   filling its bytes, a key length is not minimal, or a limit is reached
 *   (64 keys, 64 shapes, 16 attributes an event; block_wint.h); when a row's
 *   bytes do not parse into events or their number is not the row's count,
 *   the block stores the events as "v6 SPAN DETAIL" does, without the bit.
 *   The load of the detail (which binds the root first) rebuilds batch.h's
 *   bytes: a code past the shapes, a key id past the keys, a value or
 *   literal past its part, a part not used up, parts that do not add up to
 *   the data, nonzero offsets, or a rebuilt length other than out fail it
 *   with -EBADMSG. The links column is bit 1's.
 *   v6 TABLES BY COLUMN (META flag bit 6, blocks of any signal; the
 *   compactor's, blk_wopts.zstd_cols): a table of codec 2 (allowed only
 *   with the bit) is stored one zstd frame a column part (block_zcols.c):
 *   uv ncols (1 .. MAX_PHYS), then per column uv nparts (1 .. ZC_PARTS_MAX)
 *   and nparts x { uv raw length, uv stored length }, then every part's
 *   stored bytes in order, filling the table's stored length exactly:
 *   stored = raw, the part's bytes as they are (0 with 0: an empty column,
 *   its one part); stored < raw, one zstd frame of the raw bytes. A
 *   column's bytes are its parts' in order (the writer cuts the span attrs
 *   table's lists by key after the code stream and each key's values). The
 *   raw table is the layout above with nothing else in it: the column
 *   directory, then column i at the next multiple of 8 after column i - 1
 *   (the first right after the directory), zero padding, the last column
 *   ending the table; its length must be the table directory's raw length.
 *   The load checks every length first, then inflates each column into its
 *   place, and binds the table as one of codec 1; lengths that do not fill
 *   the stored bytes or the raw length exactly, an empty part beside
 *   others, or a frame that does not inflate to its part's length, fail it
 *   with -EBADMSG. One frame a table shares its literal and sequence tables
 *   between columns of unlike bytes (0.74 B a span less by column and part
 *   on the generator's corpus; bench/STORAGE.md, h-spans4).
 *   v6 LOG BODIES (META flag bit 2, log blocks only; the compactor's,
 *   blk_wopts.body_tmpl): the root's S body column holds rows + 1 offsets
 *   all 0 (one INT header, width 0) and, as its data, the bodies by
 *   template (block_body.c says it byte by byte): each body cut into
 *   tokens (runs of ASCII letters and digits); canonical decimal ints up
 *   to 19 digits, hex runs of one case (and digit runs with leading
 *   zeros) and words (letter runs) replaced in the body's template by a
 *   placeholder byte 1 .. 4 and stored in a stream of their kind (ints as
 *   uv, hex as nibbles, words as uv codes into a word dictionary), the
 *   streams grouped by template (a directory gives each template's part);
 *   each distinct template once, one uv template code a row; a body that is
 *   not a string or holds a byte 1 .. 4 is a literal (code 0). The first
 *   read that wants a body (after the root's load; blk_body_load) rebuilds
 *   every body byte for byte into memory the block owns, so views,
 *   filters and queries read what a file without the flag gives; an
 *   encoding that does not rebuild exactly (a code or word past its
 *   dictionary, a stream overrun or not used up, a byte count that does
 *   not match) fails that read and every later one with -EBADMSG.
 *   Blooms and grams are built from the bodies before coding. Without
 *   the flag the column is v2-v5's.
 *   v6 LOG BODY SLOTS (META flag bit 8, log blocks with bit 2 only; the
 *   compactor's, blk_wopts.body_slots): "v6 LOG BODIES" with three
 *   changes (block_body.c): the templates and the words stored in order of
 *   their uses (the most used first: the small codes are the common ones),
 *   each word reference one byte below 255 (else 255 and uv (code - 255))
 *   instead of uv, and within each template's part of a variable stream
 *   its variables by slot (the template's first placeholder of that kind
 *   in every row of the template, rows in order, then its second, ...)
 *   instead of by row. The rebuild finds each slot's start by counting the
 *   template's rows (its codes) and skipping; a slot running past its
 *   template's part or a part not used up by the slots is -EBADMSG.
 *   v6 STREAMS FROM ROWS (metric blocks, META flag bit 2; the compactor's,
 *   blk_wopts.streams_derived): no section 9. A stream is a (root metric
 *   id, attribute list dictionary code) pair: the writer's list
 *   dictionary holds each distinct list once, so that is the (metric,
 *   list bytes) of section 9. The first load of the attrs table (which
 *   binds the root first) derives the index from the rows into the
 *   layout section 9 decodes to (block_streams.c; blk_n_streams asks for
 *   that load), kept while the block is open; a dictionary holding one
 *   list twice fails the load (1.7 B a point less than codec 3 on the
 *   generator's corpus; bench/STORAGE.md, h-cold3).
 *   v6 POINT STARTS (metric blocks, META flag bit 9; the compactor's,
 *   blk_wopts.point_starts): the root's I zz(time_ns - start_ns) column
 *   is INT encoding 5 (header count rows, base 0, width 0), then exactly:
 *     u64 n (n <= rows), n x u64 entries, ceil(n / 8) bytes of kinds (bit
 *     c % 8 of byte c / 8: entry c is a zz(time - start) value, else a
 *     start; bits past n zero), then per row a uv code c: c < n is entry
 *     c (a start s gives the row zz(time - s)), c == n is followed by the
 *     row's zz(time - start) as a uv.
 *   Cumulative series share a start, and delta series a time - start
 *   (the interval): the writer keeps the values of either kind that two
 *   rows or more hold, most held first, and codes a row by whichever of
 *   its two entries has the smaller code (block_pstart.c). The root load
 *   decodes the column into 8-byte values (so every reader is v2-v5's);
 *   a code past n, entries or kinds past the column, or bytes left over
 *   fail it with -EBADMSG. Without the flag the column is INT 0-2, with
 *   it always 5 (the writer sets the flag only when at least half the
 *   rows find an entry and the coded column, compressed alone with zstd
 *   -3, is smaller than the values').
 *   Integers are frame-of-reference (or, v3, delta decoded at load) so
 *   that row i is read in O(1). Attributes stay one encoded list per row
 *   to the reader (what the views hand out, byte for byte); keys in most
 *   rows are indexed by the hot key columns rather than split into typed
 *   columns.
 *
 *   FOOTER (at the offset the trailer gives)
 *     0  u32 section count, 4 u32 zero, then sections:
 *        { u32 id, u32 zero, u64 length, length bytes, zero pad to 8 }
 *     Unknown section ids are skipped. Sections:
 *     1 META      u8 signal, 3 zero, u32 shard, u64 rows, u64 wal seq,
 *                 u64 seal id, u64 flags (bit 0: rows sorted by time;
 *                 bit 1, v6 span blocks: "v6 SPAN DETAIL" above; bit 2,
 *                 v6 log blocks: "v6 LOG BODIES" above; bit 2, v6 metric
 *                 blocks: "v6 STREAMS FROM ROWS" above; bit 3, v6 blocks
 *                 of any signal: sections 5-7 are in section 12; bit 4,
 *                 v6 log and span blocks: "v6 TYPED VALUES" above; bit 5,
 *                 v6 span blocks with bit 1: "v6 SPAN EVENTS BY KEY"
 *                 above; bit 6, v6 blocks: "v6 TABLES BY COLUMN"
 *                 above; bit 7, v6 log and span blocks: INT encodings 3
 *                 and 4 may occur; bit 8, v6 log blocks with bit 2: "v6
 *                 LOG BODY SLOTS" above; bit 9, v6 metric blocks: "v6
 *                 POINT STARTS" above; other bits zero from v6)
 *                 (must equal the header)
 *     2 TABLES    u32 n, u32 zero, n x 32 bytes { u8 kind (1 root, 2 attrs,
 *                 3 detail), u8 codec (0 plain, 1 zstd, 2 zstd by column:
 *                 META flag bit 6), u16 zero, u32 crc32
 *                 of the stored bytes, u64 file offset, u64 stored length,
 *                 u64 raw length }
 *     3 ZONES     u32 n, u32 zero, n x 24 bytes { u32 id (1 time, 2
 *                 severity_number as int64, 3 span duration as int64),
 *                 u32 zero, u64 min, u64 max }; absent for an empty block
 *     4 BLOOMS    u32 n, u32 zero, n x { u8 kind (1 body tokens, 2 trace
 *                 ids, 3 record attribute key=value, 4 resource attribute
 *                 key=value; values are strings and the string elements
 *                 of arrays), u8 algorithm (2: bloom.h's split block
 *                 filter), u8 k (8), u8 flags (bit 0: incomplete, answer
 *                 "maybe" to everything), u32 zero, u64 seed, u64 nbits
 *                 (multiple of 512), u64 items (the distinct items, as
 *                 estimated by the writer's HyperLogLog: the filter was
 *                 sized from it), nbits / 8 bytes of bits }
 *     5 RESOURCES u32 n, n x { u32 dropped_attrs, u32 attr count,
 *                 u32 attr bytes, u32 schema_url bytes, attrs, schema_url }
 *     6 SCOPES    u32 n, n x { u32 resource id, u32 dropped_attrs, u32 attr
 *                 count, u32 name bytes, u32 version bytes, u32 attr bytes,
 *                 u32 schema_url bytes, name, version, attrs, schema_url }
 *     7 METRICS   u32 n, n x { u32 scope id, u8 kind, u8 monotonic, u16 zero,
 *                 i32 temporality, u32 metadata count, u32 name bytes,
 *                 u32 description bytes, u32 unit bytes, u32 metadata bytes,
 *                 name, description, unit, metadata }
 *     8 HOTKEYS   u32 n (at most 12), n x { u32 key bytes, key }: the record
 *                 attribute keys present in at least half the rows, most
 *                 frequent first (ties by key bytes); optional
 *     9 STREAMS   metric blocks (optional: blocks sealed before it have
 *                 none, v6 blocks of META flag bit 2 must have none;
 *                 older readers skip it): u32 n, u32 zero, n x
 *                 { u32 metric id, u32 row count (> 0), u32 offset into
 *                 rows[], u32 zero } sorted by metric id, then by first
 *                 row; then rows[]: u32 x block rows, each stream's block
 *                 row numbers ascending, streams in order (offsets
 *                 consecutive, counts adding up to the block's rows). A
 *                 stream = one metric's points with one attribute list,
 *                 byte for byte (block_streams.c).
 *                 v4: u32 n, u32 codec (0 plain, 1 zstd: the writer's
 *                 choice when the tables are zstd and it pays), u64 body
 *                 length, then the body (codec 1: one zstd frame of it,
 *                 the rest of the section): n x { uv metric id less the
 *                 previous stream's (the first: the id), uv row count },
 *                 then per stream its first row as uv and each next row
 *                 as uv (row - previous row - 1). Same order and rules
 *                 as above; decoded at open into the v3 layout in memory
 *                 the block owns (4 bytes a row, 16 a stream)
 *                 v6 also codec 2 (3: one zstd frame of it), by row (the
 *                 compactor's, blk_wopts.streams_by_row): n x uv metric id
 *                 of the streams in order of first row, then per block row
 *                 uv 0 (its stream is the next new one) or c >= 1 (the
 *                 stream opened c streams before the next new one); every
 *                 stream opened, decoded at open into the same layout
 *                 (streams by metric, then first row)
 *    10 GRAMS     log blocks (optional: blocks sealed before it have none
 *                 and answer "maybe"; older readers skip the section, and
 *                 it is not in section 4, whose readers refuse a kind they
 *                 do not know): one bloom entry laid out as in section 4,
 *                 kind 5, over the distinct 3-byte grams of the string
 *                 bodies (bloom.h: bytes mapped to 7-bit codes by
 *                 bloom_gram_byte, ASCII letters folded; bloom_hash_gram),
 *                 items exact; flags bit 0 (incomplete) when a body is
 *                 not a string (the executor matches its JSON rendering)
 *                 or the block has more than GRAM_MAX_ITEMS grams, and
 *                 then nbits is 512 and the bits are zero
 *    11 SOURCES   cold blocks only (compaction, storage/compact.h; hot
 *                 blocks have none, and readers before it skip it): u32 n
 *                 (> 0), u32 zero, n x { u32 shard, u32 zero, u64 seal id,
 *                 u64 WAL watermark } of the blocks whose rows this block
 *                 holds (so a boot that finds one of them beside this block
 *                 after a crash removes it). Its presence is what makes a
 *                 block cold: compaction never takes a cold block again.
 *    12 DICTS     v6, META flag bit 3 (the compactor's, blk_wopts.dicts_zstd;
 *                 present exactly when the bit is): u64 raw length, then
 *                 one zstd frame of sections 5, 6 and 7, each once, laid
 *                 out as in the footer (header, body, zero pad to 8 from
 *                 the frame's start), which the footer then lacks;
 *                 inflated at open into memory the block owns (the views
 *                 of resources, scopes and metrics point into it). Any
 *                 other section inside, one missing, or bytes past them
 *                 fail the open. A block merged from the requests of many
 *                 short-lived processes repeats their resources and metric
 *                 descriptions (the JS exporters' corpus: 18 KB of footer
 *                 for 5,140 points; bench/STORAGE.md, h-cold3)
 *     Resources, scopes and metrics are block-level ids (the open block's).
 *
 *   TRAILER (40 bytes, the end of the file)
 *     0  u64 footer offset
 *     8  u64 footer length (the footer ends where the trailer starts)
 *    16  u32 crc32 of the footer
 *    20  u32 format version (as the header's)
 *    24  u32 crc32 of trailer bytes 0..24
 *    28  u32 zero
 *    32  8   magic "MiraEnd\0"
 *
 * CRC32 is the gzip polynomial (libdeflate_crc32, start value 0).
 *
 * Reading: the file is mapped read-only. Open checks header, trailer,
 * footer and the root table; the other tables are checked on first use.
 * Checking a table is: CRC (unless the verification cache knows it), zstd
 * decode if any, then the structure: column count and bounds, INT widths
 * and encodings (delta columns decoded), offsets non-decreasing and
 * inside their data, codes inside their dictionary, ids inside the
 * dictionaries, key-coded lists rebuilt (v3). After that a row access reads
 * without any bounds check of its own, so a file that passes its CRCs but
 * was crafted cannot make a reader run off its mapping.
 */
#ifndef MIRADB_BLOCK_INT_H
#define MIRADB_BLOCK_INT_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <libdeflate.h>

#include "lib/pbw.h" /* pbw_varint_size: a LEB128's length */
#include "storage/block.h"
#include "storage/vcache.h"

#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "storage/block*.c read little-endian integers in place"
#endif

#define HDR_SIZE 64
#define TRL_SIZE 40
#define SOURCE_SIZE 24 /* one SEC_SOURCES entry */
static const char hdr_magic[8] = "MiraBlk";
static const char trl_magic[8] = "MiraEnd";

enum {
    SEC_META = 1,
    SEC_TABLES = 2,
    SEC_ZONES = 3,
    SEC_BLOOMS = 4,
    SEC_RESOURCES = 5,
    SEC_SCOPES = 6,
    SEC_METRICS = 7,
    SEC_HOTKEYS = 8,
    SEC_STREAMS = 9,
    SEC_GRAMS = 10,
    SEC_SOURCES = 11,
    SEC_DICTS = 12,
    SEC_MAX = 12,
};

enum { ZONE_TIME = 1, ZONE_SEVERITY = 2, ZONE_DURATION = 3, ZONE_MAX = 3 };

#define N_TABLES 3
#define HOT_MAX 12  /* hot attribute keys per block, at most */
#define KC_MAX 4096 /* distinct attribute keys counted per block, at most */
#define TDIR_SIZE 32
#define INT_HDR 24
/* INT header byte 17 (format 3; 0 in format 2; INT_VAR from format 4) */
/* (INT_PLANES and INT_DPLANES: format 6, META flag bit 7 only; INT_PSTART:
 * format 6, META flag bit 9, the metric root's start column only) */
enum { INT_FOR = 0, INT_DELTA = 1, INT_VAR = 2, INT_PLANES = 3, INT_DPLANES = 4, INT_PSTART = 5 };
#define MAX_PHYS (24 + HOT_MAX)
/* A zstd table's raw length may pass neither stored x ZSTD_RATIO_CAP nor
 * ZSTD_RAW_MAX (the reader allocates it whole); the writer stores a table
 * over ZSTD_RAW_MAX plain. */
#define ZSTD_RATIO_CAP 4096
/* A column of a table by column (codec 2) is stored in at most this many
 * parts ("v6 TABLES BY COLUMN") */
#define ZC_PARTS_MAX 64
#define ZSTD_RAW_MAX (256ull << 20)

/* ---- logical columns per signal (the index spaces of the arrays below) ---- */

enum { L_TIME, L_SCOPE, L_SEV, L_BTYPE, L_IDF, L_ACOUNT, L_OBS, L_DROP, L_FLAGS };
enum { L_BODY, L_ATTRS };
enum { L_SEVTEXT, L_EVNAME };
enum { L_TRACE, L_SPAN };

enum {
    T_START,
    T_DUR,
    T_SCOPE,
    T_HASPAR,
    T_KIND,
    T_STATUS,
    T_ACOUNT,
    T_FLAGS,
    T_DROP,
    T_NEV,
    T_DROPEV,
    T_NLINK,
    T_DROPLINK
};
enum { T_STATMSG, T_ATTRS, T_TSTATE, T_EVENTS, T_LINKS };
enum { T_NAME };
enum { T_TRACE, T_SPAN, T_PARENT };

enum { M_TIME, M_START, M_METRIC, M_VTYPE, M_COUNT, M_HAS, M_ACOUNT, M_FLAGS, M_NEX };
enum { M_ATTRS, M_DETAIL, M_EXEMPLARS };
enum { M_VALUE, M_SUM, M_MIN, M_MAX };

/* Format 3: every signal's record attribute lists are a dictionary column
 * (D slot X_ADICT) instead of the S column of format 2. */
enum { X_ADICT = 2 };
/* Format 3: the attribute table's key dictionary (S slot X_KEYS). */
enum { X_KEYS = 5 };
/* Format 4: the metric detail table's f64 list dictionary (S slot X_FLISTS). */
enum { X_FLISTS = 4 };
/* Format 5: the attribute table's value dictionary (S slot X_VALS). */
enum { X_VALS = 6 };
/* Value dictionary entries per block, at most (block_int.h, "v5 ATTRS"). */
#define VD_MAX 65536

#define MAX_I 13
#define MAX_S 7
#define MAX_D 3
#define MAX_R 4

/* Range limits a column's values are checked against at load. */
enum lim { LIM_NONE, LIM_SCOPES, LIM_METRICS, LIM_VALTYPE, LIM_PV, LIM_BITS2, LIM_BITS3, LIM_BOOL };

struct ent {
    char type; /* 'I', 'S', 'D', 'R', 'K' (the key dictionary: an S of its own count),
                * 'Z' (v4: sparse R), 'F' (v4: the f64 list dictionary, an S of its own count),
                * 'P' (v4: parent span ids as row references), 'V' (v5: the value
                * dictionary, an S of its own count), 'T' (v6: the attribute
                * lists' stream lengths when stored by key, one RAW) */
    uint8_t idx;
    uint8_t arg; /* R: element size; I: enum lim */
};

struct spec {
    const struct ent *e;
    unsigned n;
};

static const struct ent logs_root[] = {
    {'I', L_TIME, 0},        {'I', L_SCOPE, LIM_SCOPES},  {'I', L_SEV, 0},
    {'D', L_SEVTEXT, 0},     {'I', L_BTYPE, LIM_VALTYPE}, {'S', L_BODY, 0},
    {'I', L_IDF, LIM_BITS3}, {'R', L_TRACE, 16},          {'R', L_SPAN, 8},
    {'D', L_EVNAME, 0},
};
static const struct ent logs_attrs[] = {{'I', L_ACOUNT, 0}, {'S', L_ATTRS, 0}};
static const struct ent logs_detail[] = {{'I', L_OBS, 0}, {'I', L_DROP, 0}, {'I', L_FLAGS, 0}};

static const struct ent spans_root[] = {
    {'I', T_START, 0}, {'I', T_DUR, 0},    {'I', T_SCOPE, LIM_SCOPES}, {'R', T_TRACE, 16},
    {'R', T_SPAN, 8},  {'R', T_PARENT, 8}, {'I', T_HASPAR, LIM_BOOL},  {'D', T_NAME, 0},
    {'I', T_KIND, 0},  {'I', T_STATUS, 0}, {'S', T_STATMSG, 0},
};
static const struct ent spans_attrs[] = {{'I', T_ACOUNT, 0}, {'S', T_ATTRS, 0}};
static const struct ent spans_detail[] = {
    {'S', T_TSTATE, 0}, {'I', T_FLAGS, 0}, {'I', T_DROP, 0},  {'S', T_EVENTS, 0},   {'I', T_NEV, 0},
    {'I', T_DROPEV, 0}, {'S', T_LINKS, 0}, {'I', T_NLINK, 0}, {'I', T_DROPLINK, 0},
};

static const struct ent points_root[] = {
    {'I', M_TIME, 0},        {'I', M_START, 0}, {'I', M_METRIC, LIM_METRICS},
    {'I', M_VTYPE, LIM_PV},  {'R', M_VALUE, 8}, {'I', M_COUNT, 0},
    {'R', M_SUM, 8},         {'R', M_MIN, 8},   {'R', M_MAX, 8},
    {'I', M_HAS, LIM_BITS3},
};
static const struct ent points_attrs[] = {{'I', M_ACOUNT, 0}, {'S', M_ATTRS, 0}};
static const struct ent points_detail[] = {
    {'I', M_FLAGS, 0}, {'S', M_DETAIL, 0}, {'S', M_EXEMPLARS, 0}, {'I', M_NEX, 0}};

/* Format 3's attribute tables: the count, then the list as a dictionary. */
static const struct ent logs_attrs3[] = {{'I', L_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}};
static const struct ent spans_attrs3[] = {{'I', T_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}};
static const struct ent points_attrs3[] = {{'I', M_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}};
/* Format 5's log and span attribute tables: a value dictionary after the keys. */
static const struct ent logs_attrs5[] = {
    {'I', L_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}, {'V', X_VALS, 0}};
static const struct ent spans_attrs5[] = {
    {'I', T_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}, {'V', X_VALS, 0}};
/* Format 6's: the lists' stream lengths (empty: not by key) at the end. */
static const struct ent logs_attrs6[] = {
    {'I', L_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}, {'V', X_VALS, 0}, {'T', 0, 0}};
static const struct ent spans_attrs6[] = {
    {'I', T_ACOUNT, 0}, {'D', X_ADICT, 0}, {'K', X_KEYS, 0}, {'V', X_VALS, 0}, {'T', 0, 0}};

#define SPEC(a)                                                                                    \
    {                                                                                              \
        a, sizeof(a) / sizeof(a[0])                                                                \
    }
/* Format 4: the span root's trace id dictionary (D slot X_TRACES). */
enum { X_TRACES = 1 };

/* Format 4's span root: trace ids as a dictionary, the parent span id as
 * a reference ('P'). */
static const struct ent spans_root4[] = {
    {'I', T_START, 0}, {'I', T_DUR, 0},    {'I', T_SCOPE, LIM_SCOPES}, {'D', X_TRACES, 0},
    {'R', T_SPAN, 8},  {'P', T_PARENT, 8}, {'I', T_HASPAR, LIM_BOOL},  {'D', T_NAME, 0},
    {'I', T_KIND, 0},  {'I', T_STATUS, 0}, {'S', T_STATMSG, 0},
};

/* Format 4's metric tables: value, sum, min and max sparse (only the
 * values whose bits are not all zero stored), the detail entries coded
 * (block_detail.c) against an f64 list dictionary. */
static const struct ent points_root4[] = {
    {'I', M_TIME, 0},        {'I', M_START, 0}, {'I', M_METRIC, LIM_METRICS},
    {'I', M_VTYPE, LIM_PV},  {'Z', M_VALUE, 8}, {'I', M_COUNT, 0},
    {'Z', M_SUM, 8},         {'Z', M_MIN, 8},   {'Z', M_MAX, 8},
    {'I', M_HAS, LIM_BITS3},
};
static const struct ent points_detail4[] = {{'I', M_FLAGS, 0},
                                            {'S', M_DETAIL, 0},
                                            {'S', M_EXEMPLARS, 0},
                                            {'I', M_NEX, 0},
                                            {'F', X_FLISTS, 0}};

/* By format version - 2 (2, 3, 4, 5 or 6), signal - 1, table. */
static const struct spec specs[5][SIG_COUNT][N_TABLES] = {
    {
        {SPEC(logs_root), SPEC(logs_attrs), SPEC(logs_detail)},
        {SPEC(spans_root), SPEC(spans_attrs), SPEC(spans_detail)},
        {SPEC(points_root), SPEC(points_attrs), SPEC(points_detail)},
    },
    {
        {SPEC(logs_root), SPEC(logs_attrs3), SPEC(logs_detail)},
        {SPEC(spans_root), SPEC(spans_attrs3), SPEC(spans_detail)},
        {SPEC(points_root), SPEC(points_attrs3), SPEC(points_detail)},
    },
    {
        {SPEC(logs_root), SPEC(logs_attrs3), SPEC(logs_detail)},
        {SPEC(spans_root4), SPEC(spans_attrs3), SPEC(spans_detail)},
        {SPEC(points_root4), SPEC(points_attrs3), SPEC(points_detail4)},
    },
    {
        {SPEC(logs_root), SPEC(logs_attrs5), SPEC(logs_detail)},
        {SPEC(spans_root4), SPEC(spans_attrs5), SPEC(spans_detail)},
        {SPEC(points_root4), SPEC(points_attrs3), SPEC(points_detail4)},
    },
    {
        {SPEC(logs_root), SPEC(logs_attrs6), SPEC(logs_detail)},
        {SPEC(spans_root4), SPEC(spans_attrs6), SPEC(spans_detail)},
        {SPEC(points_root4), SPEC(points_attrs3), SPEC(points_detail4)},
    },
};

static inline const struct spec *spec_of(unsigned version, enum signal sig, int t)
{
    return &specs[version >= 6   ? 4
                  : version >= 5 ? 3
                  : version >= 4 ? 2
                  : version >= 3 ? 1
                                 : 0][sig - 1][t];
}

/* The oldest format this miradb reads. */
#define BLK_VERSION_MIN 2

static inline unsigned phys_cols(const struct spec *sp)
{
    unsigned n = 0;
    for (unsigned i = 0; i < sp->n; i++) {
        char ty = sp->e[i].type;
        n += ty == 'S' || ty == 'K' || ty == 'Z' || ty == 'F' || ty == 'P' || ty == 'V' ? 2
             : ty == 'D'                                                                ? 3
                                                                                        : 1;
    }
    return n;
}

/* ---- little helpers ---- */

static const char empty[1] = "";

static inline uint64_t zz(int64_t x)
{
    return ((uint64_t)x << 1) ^ (uint64_t)(x >> 63);
}

static inline int64_t unzz(uint64_t u)
{
    return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
}

/* LEB128 of v at q (at most 10 bytes); returns the byte after it. */
static inline uint8_t *uv_put(uint8_t *q, uint64_t v)
{
    while (v >= 0x80) {
        *q++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *q++ = (uint8_t)v;
    return q;
}

/* The LEB128 at *p (advanced) before |end|; sets *bad (and returns 0)
 * when it runs past end or 10 bytes. */
static inline uint64_t uv_take(const uint8_t **p, const uint8_t *end, bool *bad)
{
    uint64_t v = 0;
    for (unsigned sh = 0; sh < 64 && *p < end; sh += 7) {
        uint8_t c = *(*p)++;
        v |= (uint64_t)(c & 0x7f) << sh;
        if ((c & 0x80) == 0) {
            return v;
        }
    }
    *bad = true;
    return 0;
}

static inline uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static inline uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

static inline void wr64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static inline uint32_t crc32_of(const void *p, size_t n)
{
    return libdeflate_crc32(0, p, n);
}

static inline int pad8(struct vbuf *b)
{
    static const uint8_t zeros[8];
    size_t r = b->len & 7;
    return r ? vbuf_put(b, zeros, 8 - r) : 0;
}

/* ---- the reader's block (block_read.c opens it) ---- */

/* A table directory entry (footer section 2). */
struct tdir {
    uint8_t kind, codec;
    uint32_t crc;
    uint64_t off, len, raw;
};

struct icol {
    const uint8_t *p;
    uint64_t base;
    unsigned width;
};

struct scol {
    struct icol off;
    const uint8_t *data;
};

struct dcol {
    struct icol codes;
    struct scol dict;
};

struct bloom_r {
    enum blk_bloom_kind kind;
    unsigned k;
    bool complete;
    uint64_t seed, nbits, items;
    const uint8_t *bits;
};

enum { TS_NONE = 0, TS_OK = 1, TS_BAD = 2 };

struct blk {
    _Atomic int refs;
    int pins;                    /* blk_pin (block.h); under lock */
    _Atomic uint64_t read_stamp; /* blk_read_stamp */
    char *path;
    char *old_path; /* freed at the last unref (a reader may still hold it) */
    uint8_t *map;
    uint64_t size;
    struct vcache_key key;
    unsigned flags;
    enum signal sig;
    uint32_t version; /* the file's format, BLK_VERSION_MIN .. BLK_VERSION */
    uint64_t rows;
    struct blk_meta meta;
    uint64_t foot_off, foot_len;
    uint64_t dict_bytes[3], bloom_bytes;

    struct tdir dir[N_TABLES];
    _Atomic int tstate[N_TABLES];
    uint32_t tcols[N_TABLES];
    uint8_t *zbuf[N_TABLES];           /* decoded zstd tables */
    uint64_t *dec[N_TABLES][MAX_PHYS]; /* format 3: delta INT columns, decoded at load */
    uint8_t *alists;                   /* format 3: the attribute lists, rebuilt at load */
    uint64_t *alists_off;
    uint8_t *hotpos;       /* format 5: the hot key columns, found at load (hot[] points here) */
    uint64_t n_keys;       /* entries of the key dictionary (S[X_KEYS]) */
    uint64_t n_vals;       /* format 5: entries of the value dictionary (S[X_VALS]) */
    const uint8_t *atrans; /* format 6: the T column (in the attrs table), or NULL */
    uint64_t atrans_len;
    bool typed_vals;       /* format 6: META flag bit 4, the T column's streams typed */
    bool int_planes;       /* format 6: META flag bit 7, INT encodings 3 and 4 allowed */
    uint8_t *zfull[MAX_R]; /* format 4: sparse columns expanded at load (R[] points here) */
    uint8_t *mdet;         /* format 4: the metric detail entries, rebuilt at load */
    uint64_t *mdet_off;
    bool sdet_coded;  /* format 6: META flag bit 1, span events and links coded */
    bool sev_key;     /* format 6: META flag bit 5, the events by key ... */
    bool zcols;       /* format 6: META flag bit 6, zstd tables may be by column (codec 2) */
    uint64_t sev_len; /* ... their encoding's bytes (the column's offsets are all 0) */
    uint8_t *sdet[2]; /* ... and rebuilt at load (events, links) */
    uint64_t *sdet_off[2];
    uint64_t meta_flags; /* footer section 1's flags */
    bool body_slots;     /* format 6: META flag bit 8 (with bit 2), "v6 LOG BODY SLOTS" */
    bool body_tmpl;      /* format 6: META flag bit 2, log bodies by template ... */
    uint8_t *bbody;      /* ... rebuilt by the first read that wants one (blk_body_load) */
    uint64_t *bbody_off;
    uint64_t benc_len;       /* ... from the encoding S[L_BODY] holds until then, */
    _Atomic int bbody_state; /* ... 0 not rebuilt, 1 rebuilt (S[L_BODY] the bodies), < 0 the
                              * rebuild's error, kept (set under lock, read acquire) */
    unsigned body_rebuilds;  /* ... how many times (blk_body_rebuilds) */
    uint8_t *sbuf;        /* format 4: the stream index, decoded at open (streams, stream_rows) */
    uint8_t *fdicts;      /* format 6: sections 5-7 inflated from section 12 (views point here) */
    bool streams_derived; /* format 6: META flag bit 2, no section 9: sbuf derived from the rows */
    bool pstart;          /* format 6: META flag bit 9, the start column by reference */
    atomic_bool streams_ready; /* ... once the attrs table's first load derived it */
    pthread_mutex_t lock;      /* table loads, column decodes, quarantine */

    /* Columns, by the per-signal logical indexes; set by a table load
     * before its state is published (release), read after (acquire). */
    struct icol I[MAX_I];
    struct scol S[MAX_S];
    struct dcol D[MAX_D];
    const uint8_t *R[MAX_R];

    uint64_t zmin[ZONE_MAX + 1], zmax[ZONE_MAX + 1];
    bool zhave[ZONE_MAX + 1];
    struct bloom_r blooms[5]; /* section 4's, then section 10's gram bloom */
    uint32_t n_blooms;

    uint32_t n_hot;
    struct mstr hot_key[HOT_MAX];
    struct icol hot[HOT_MAX]; /* attrs table: 1 + value offset in the row's attrs, 0 absent */

    uint32_t n_res, n_scopes, n_metrics;
    struct res_view *res;
    struct scope_view *scopes;
    struct metric_view *metrics;

    _Atomic(uint64_t *) col_time;
    bool quarantined;

    const uint8_t *streams; /* SEC_STREAMS entries (16 bytes each), or NULL */
    uint32_t n_streams;
    const uint32_t *stream_rows;

    const uint8_t *sources; /* SEC_SOURCES entries (24 bytes each), or NULL */
    uint32_t n_sources;
    atomic_bool unlink_on_release;

    _Atomic(void *) aux; /* blk_aux_set (block_streams.c); freed by blk_destroy */
    void (*aux_free)(void *);
};

/* ---- key-coded attribute lists (block_keys.c) ---- */

/* One counted attribute of a row as the writer walked it: its key's id
 * (block_write.c's key count), 1 + where its value starts in the list,
 * and (format 5) 1 + its entry in the writer's value table (0: none). */
struct kc_pos {
    uint32_t id, off, ve;
};

/*
 * Appends list p[0, len) (|count| attributes; AKEYS_SLACK bytes past
 * p + len must be readable) to |out| key-coded: each
 * key-value as uv (key id + 1) then the value's bytes, or (format 5, a
 * |vcode| map given) as the uv code vcode[ve - 1] alone when that is not
 * 0, when |ap| (nap entries) names every attribute, each key id's length
 * in |klen|; else each as uv 0 then the key-value's bytes. 0, -EINVAL (a
 * list that does not parse), -ENOMEM.
 */
int akeys_encode(struct vbuf *out, const uint8_t *p, uint32_t len, uint32_t count,
                 const struct kc_pos *ap, uint64_t nap, const uint32_t *klen,
                 const uint32_t *vcode);
/* The end of the val.h value at p before |end|, or NULL when it runs past
 * it (containers skipped by their byte length). */
/* The end of the value of type |t| whose bytes after the type start at
 * p[0, end - p) (val.h): a container is skipped by its byte length, its
 * members copied as they are (a reader walks them with val.h's bounded
 * reader); NULL when it runs past |end| or |t| is no type. */
static inline const uint8_t *value_end_t(uint8_t t, const uint8_t *p, const uint8_t *end)
{
    uint64_t n = 0;
    unsigned sh = 0;
    switch (t) {
    case VAL_EMPTY:
        return p;
    case VAL_BOOL:
        return end - p >= 1 ? p + 1 : NULL;
    case VAL_DOUBLE:
        return end - p >= 8 ? p + 8 : NULL;
    case VAL_INT:
        for (unsigned k = 0; k < 10 && p < end; k++) {
            if ((*p++ & 0x80) == 0) {
                return p;
            }
        }
        return NULL;
    case VAL_STR:
    case VAL_BYTES:
        for (unsigned k = 0; k < 10 && p < end; k++, sh += 7) {
            uint8_t c = *p++;
            n |= (uint64_t)(c & 0x7f) << sh;
            if ((c & 0x80) == 0) {
                return n <= (uint64_t)(end - p) ? p + n : NULL;
            }
        }
        return NULL;
    case VAL_ARRAY:
    case VAL_KVLIST:
        if (end - p < 8) {
            return NULL;
        }
        n = rd32(p);
        p += 8;
        return n <= (uint64_t)(end - p) ? p + n : NULL;
    default:
        return NULL;
    }
}

/* The end of the value (type byte first) at p[0, end - p), as above. */
static inline const uint8_t *value_end(const uint8_t *p, const uint8_t *end)
{
    return p < end ? value_end_t(*p, p + 1, end) : NULL;
}

/* Format 5: the hot key positions akeys_rebuild finds (the file has no
 * hot key columns). Borrowed from the caller. */
struct akeys_hot {
    unsigned n;             /* hot keys */
    const struct mstr *key; /* their bytes */
    const int8_t *kslot;    /* key id -> hot slot, -1 none (nkeys entries) */
    uint32_t *pos;          /* nd x n, zeroed: 1 + where entry c's (first) value of
                             * hot key h starts, at pos[c * n + h]; 0 absent */
};

/*
 * Rebuilds the |nd| key-coded dictionary entries of |dc| with the key
 * dictionary |keys| (nkeys entries) and (format 5) the value dictionary
 * |vals| (nvals entries; 0 before format 5) into a fresh buffer and
 * offsets (*buf, NULL when all are empty, and *offs: the caller frees
 * both) and rebinds dc's dictionary to them; with |hp| (format 5, else
 * NULL) it notes where each entry's hot key values start. 0, -EBADMSG (a
 * code out of range, a value or value entry that does not parse),
 * -ENOMEM.
 */
int akeys_rebuild(struct dcol *dc, uint64_t nd, const struct scol *keys, uint64_t nkeys,
                  const struct scol *vals, uint64_t nvals, const struct akeys_hot *hp,
                  uint8_t **buf, uint64_t **offs);
/*
 * The attribute table's lists of |b| (|nd| dictionary entries, bound),
 * rebuilt into b->alists (akeys_rebuild), and with |vd| (format 5's logs
 * and spans) its hot key columns found and bound (b->hotpos). The caller
 * freed the previous ones. 0, -EBADMSG, -ENOMEM.
 */
int akeys_load(blk *b, uint64_t nd, bool vd);
/* ---- format 6's lists by key, typed value streams (block_bykey.c) ---- */

/*
 * Format 6: the key-coded lists data[0, len) (nkeys keys, nvals value
 * entries: the D data as akeys_encode made it) by key into |out| (reset
 * first; len bytes), their stream lengths into |dir| (reset first; nkeys
 * u64, nothing when nkeys is 0: then |out| is data as it is). 0, -EINVAL
 * (a list that does not parse), -ENOMEM.
 */
int akeys_by_key(const uint8_t *data, size_t len, uint64_t nkeys, uint64_t nvals, struct vbuf *out,
                 struct vbuf *dir);
/*
 * The inverse: data[0, len) stored by key with stream lengths dir[0,
 * dirlen) back into the lists' layout, |want| bytes (the list offsets'
 * last), into a fresh buffer of want + AKEYS_SLACK bytes (*out; the
 * caller frees it). |typed| (META flag bit 4, "v6 TYPED VALUES"): dir
 * holds nkeys x (u64 length, u8 tag) and each key's stream is its tag's
 * encoding. 0, -EBADMSG (dirlen not 8 (9) x nkeys, want over
 * AKEYS_GROWTH x len, lengths over len, a code or value out of place, a
 * tag or stream head unknown, a stream not used up, a rebuilt length other
 * than want), -ENOMEM.
 */
int akeys_from_keys(const uint8_t *data, size_t len, const uint8_t *dir, size_t dirlen,
                    uint64_t nkeys, uint64_t nvals, bool typed, uint64_t want, uint8_t **out);
/* Format 6, META flag bit 4: the tags of a key's value stream ("v6 TYPED
 * VALUES"). */
enum { TV_RAW, TV_ONE, TV_HEXL, TV_HEXU, TV_DEC, TV_DBL, TV_NTAGS };
#define TV_HEX_MAX 63 /* bytes of one TV_HEXL / TV_HEXU value, at most (2 x 63 < 128) */
#define TV_PRE_MAX 64 /* bytes of a TV_DEC stream's prefix, at most */
#define TV_E_MAX 9    /* a TV_DBL stream's decimal exponent, at most */
/* Bytes of lists one stored byte rebuilds into, at most: a TV_DEC value is
 * a code byte and a stream byte rebuilt into the code, a type, a length,
 * the prefix and 20 digits (under 44 a byte); every other tag and a raw
 * value less. akeys_from_keys refuses a |want| past it before allocating. */
#define AKEYS_GROWTH (TV_PRE_MAX + 32)
/*
 * The lists by key data[0, len) with their u64 stream lengths dir (nkeys,
 * as akeys_by_key made them) with each key's stream in the tag that
 * round-trips it exactly (TV_RAW when none does) into |out| (reset first)
 * and the T column (nkeys x (u64 length, u8 tag)) into |tdir| (reset
 * first); |scratch| is the round trip's buffer. 0, -EINVAL (a stream
 * that does not parse), -ENOMEM.
 */
int akeys_typed(const uint8_t *data, size_t len, const uint8_t *dir, uint64_t nkeys,
                struct vbuf *out, struct vbuf *tdir, struct vbuf *scratch);
/* Bytes the table must hold past the end of the list dictionary's data
 * for akeys_rebuild (it copies in 16-byte blocks): checked at load. */
#define AKEYS_SLACK 16

/*
 * Keys and values are mostly short: copied 16 bytes at a time, the last
 * block whole. Reads up to COPY_SLACK - 1 bytes past |src + n| and writes
 * as far past |dst + n|: the key encodings carry that much padding, a
 * value in a list dictionary is followed by the key dictionary's INT
 * column (at least 24 bytes), the writer's lists by AKEYS_SLACK spare
 * bytes (akeys_encode's caller), and the output keeps that much spare.
 */
#define COPY_SLACK AKEYS_SLACK
static inline void copy16(uint8_t *dst, const uint8_t *src, size_t n)
{
    for (size_t i = 0; i < n; i += 16) {
        memcpy(dst + i, src + i, 16);
    }
}

/* ---- format 4's metric detail entries (block_detail.c) ---- */

/* The writer's f64 list dictionary (histogram bounds, summary quantiles):
 * each distinct list once, kept between seals. */
struct fldict {
    uint64_t *offs; /* n + 1 */
    size_t n, cap_offs;
    struct vbuf data;
    uint32_t *ht; /* code + 1; 0 = empty */
    size_t ht_cap;
};

void fldict_reset(struct fldict *d);
void fldict_free(struct fldict *d);
/*
 * Appends the format 4 entry of detail p[0, len) (batch.h's encoding for a
 * metric of |kind|) to |out|, its lists into |d|: 0 or -ENOMEM.
 */
int mdet_encode(struct vbuf *out, struct fldict *d, enum metric_kind kind, const uint8_t *p,
                uint32_t len);
/*
 * Rebuilds the |rows| entries of |enc| with the list dictionary |fl| (nfl
 * entries) into batch.h's encoding, into a fresh buffer and offsets (*buf,
 * NULL when all are empty, and *offs: the caller frees both) and rebinds
 * enc to them. 0, -EBADMSG (an entry that does not decode), -ENOMEM.
 */
int mdet_rebuild(struct scol *enc, uint64_t rows, const struct scol *fl, uint64_t nfl,
                 uint8_t **buf, uint64_t **offs);

/*
 * Format 6 (block_spans.c): rebuilds span detail column |enc| (c 0 the
 * events, 1 the links, coded: META flag bit 1) of |b| into batch.h's
 * bytes, as mdet_rebuild; reads b's root table (bound by the caller).
 * 0, -EBADMSG (an entry that does not decode exactly, a link reference
 * outside the block), -ENOMEM.
 */
int sdet_rebuild(blk *b, struct scol *enc, int c, uint8_t **buf, uint64_t **offs);

/* Format 6 (block_spans.c): rebuilds the events column |enc| by key (META
 * flag bit 5: offsets all 0, checked at the bind, |enc_len| bytes of encoding; block_int.h "v6
 * SPAN EVENTS BY KEY") of |b| into batch.h's bytes, as sdet_rebuild, each
 * row's events by its event count (the detail's T_NEV, bound). 0, -EBADMSG
 * (an encoding that does not rebuild exactly), -ENOMEM. */
int sev_rebuild(blk *b, struct scol *enc, uint64_t enc_len, uint8_t **buf, uint64_t **offs);

/* Format 6 (block_zcols.c): inflates the |n| stored bytes at |p| of a table
 * by column (codec 2, META flag bit 6; block_int.h "v6 TABLES BY COLUMN")
 * into |raw|, |rawlen| bytes (the table directory's raw length): the column
 * directory, each column at its place, the padding zero. |dc| may be NULL.
 * 0, or -EBADMSG for lengths that do not fill both exactly or a frame that
 * does not inflate to its column's length. */
struct ZSTD_DCtx_s;
int blk_zcols_inflate(struct ZSTD_DCtx_s *dc, const uint8_t *p, uint64_t n, uint8_t *raw,
                      uint64_t rawlen);

/*
 * Format 6 (block_body.c): rebuilds the log body column |enc| (META flag
 * bit 2: its offsets width 0, its data the enc_len bytes "v6 LOG BODIES"
 * describe) of a block of |rows| rows into a fresh buffer and offsets
 * (*buf, *offs: the caller frees both) and rebinds enc to them. 0,
 * -EBADMSG (an encoding that does not rebuild exactly), -ENOMEM.
 */
int btmpl_rebuild(struct scol *enc, uint64_t enc_len, uint64_t rows, bool slots, uint8_t **buf,
                  uint64_t **offs);

/* ---- format 4's parent span ids (block_parents.c) ---- */

/* Expands a 'P' column (references |refs|, raw ids raw[0, raw_len)) into
 * rows x 8 bytes the block owns and binds it as R column |idx|; the span
 * ids (R[T_SPAN]) are bound already. 0, -EBADMSG, -ENOMEM. */
int prefs_expand(blk *b, unsigned idx, const struct icol *refs, const uint8_t *raw,
                 uint64_t raw_len);

/* ---- the metric stream index (block_streams.c) ---- */

struct sidx_stream {
    uint32_t metric;
    uint32_t count;
};

struct sidx_slot {
    uint64_t h1;   /* hash bits 0..63 */
    uint32_t h2;   /* hash bits 64..95 */
    uint32_t sid1; /* stream index + 1; 0: empty */
};

/* Writer scratch, kept between seals. */
struct sidx {
    struct sidx_slot *slot; /* open addressing, at most half full */
    size_t cap_slot, mask;
    uint32_t *row_sid; /* block row -> stream index */
    size_t cap_rows;
    uint64_t rows; /* rows added (0 .. rows-1, in order) */
    struct sidx_stream *st;
    uint32_t n, cap_st;
    uint32_t *order; /* 2 x cap_order: sort order, then per-stream cursors */
    uint32_t cap_order;
    uint32_t *srows; /* format 4: the rows, stream by stream */
    size_t cap_srows;
    struct vbuf body; /* format 4: the varint body (and its zstd frame in zbody) */
    struct vbuf zbody;
};

/* For a block of |rows| rows: 0 or -ENOMEM. */
int sidx_prepare(struct sidx *x, uint64_t rows);
/* Block row |row| (rows come in order from 0): 0 or -ENOMEM. */
int sidx_add(struct sidx *x, uint64_t row, uint32_t metric_id, const uint8_t *attrs, uint32_t len);
/* Appends the STREAMS section body to |f| in format |version|'s layout,
 * (format 4) zstd compressed at |zlevel| when it is not 0, (format 6)
 * by row when |by_row| (codec 2, 3): 0 or -ENOMEM (-EIO when zstd
 * fails). */
int sidx_put(struct sidx *x, struct vbuf *f, unsigned version, int zlevel, bool by_row);
void sidx_free(struct sidx *x);
/* Checks a STREAMS section body [p, end) against the block (rows, metric
 * dictionary) and keeps it in |b|: false when malformed. */
bool streams_parse(blk *b, const uint8_t *p, const uint8_t *end);
/*
 * Format 6, META flag bit 2: the stream index of |b| derived from its
 * rows (the root's metric column, the attribute list codes of the |nd|
 * entries of D[X_ADICT], rebuilt: both bound by the caller, under the
 * block's lock) into the layout section 9 decodes to, kept in |b| as
 * streams_parse keeps it (then b->streams_ready is set). 0, -EBADMSG (two
 * dictionary entries hold the same list: a writer never writes that, and
 * the two streams would be one), -ENOMEM.
 */
int streams_derive(blk *b, uint64_t nd);
/*
 * Format 6, META flag bit 9 (block_pstart.c): the start column's bytes
 * p[0, end) after its INT header, for |rows| rows at times |time|, decoded
 * into a fresh array of zz(time - start) values (*out; the caller owns
 * it). 0, -EBADMSG, -ENOMEM.
 */
int pstart_decode(const uint8_t *p, const uint8_t *end, const struct icol *time, uint64_t rows,
                  uint64_t **out);

static inline uint64_t ic_get(const struct icol *c, uint64_t i)
{
    const uint8_t *p = c->p;
    switch (c->width) {
    case 0:
        return c->base;
    case 1:
        return c->base + p[i];
    case 2: {
        uint16_t x;
        memcpy(&x, p + 2 * i, 2);
        return c->base + x;
    }
    case 4:
        return c->base + rd32(p + 4 * i);
    default:
        return c->base + rd64(p + 8 * i);
    }
}

static inline struct mstr sc_get(const struct scol *c, uint64_t i)
{
    uint64_t a = ic_get(&c->off, i), b = ic_get(&c->off, i + 1);
    return (struct mstr){b > a ? (const char *)c->data + a : empty, (uint32_t)(b - a)};
}

static inline struct mstr dc_get(const struct dcol *c, uint64_t i)
{
    return sc_get(&c->dict, ic_get(&c->codes, i));
}

/* Row |i|'s record attribute list (its bytes; the count is a column of
 * its own): format 3's dictionary entry, format 2's string. */
static inline struct mstr attrs_bytes(const struct blk *b, uint64_t i)
{
    if (b->version >= 3) {
        return dc_get(&b->D[X_ADICT], i);
    }
    return sc_get(&b->S[spec_of(2, b->sig, 1)->e[1].idx], i);
}

static inline struct obytes ob_of(struct mstr s)
{
    return (struct obytes){(const uint8_t *)s.p, s.len};
}

/*
 * Verifies and binds table |t| once, under the block's lock (block_read.c):
 * 0, or -EBADMSG (remembered: the table stays failed), or -ENOMEM (not
 * remembered: the next access tries again).
 */
int blk_table_load(blk *b, int t);

/* 0 once the tables of |want| are loaded, else blk_table_load's error. The
 * row functions call it for every row: one acquire load per wanted table. */
static inline int ready(blk *b, unsigned want)
{
    static const unsigned bit[N_TABLES] = {BLK_ROOT, BLK_ATTRS, BLK_DETAIL};
    for (int t = 0; t < N_TABLES; t++) {
        if ((want & bit[t]) && atomic_load_explicit(&b->tstate[t], memory_order_acquire) != TS_OK) {
            int rc = blk_table_load(b, t);
            if (rc < 0) {
                return rc;
            }
        }
    }
    return 0;
}

/* Format 6's log bodies by template, rebuilt once (block_read.c): 0 when
 * S[L_BODY] holds the bodies, -EBADMSG when the encoding does not rebuild
 * (kept: every later read says so), -ENOMEM (tried again on the next
 * read). The root table loaded. */
int blk_body_load(blk *b);

/* A read of |want| (blk_log, blk_load) that wants the log body. */
static inline bool wants_body(unsigned want)
{
    return (want & (BLK_ROOT | BLK_NOBODY)) == BLK_ROOT;
}

static inline int body_ready(blk *b)
{
    if (!b->body_tmpl || atomic_load_explicit(&b->bbody_state, memory_order_acquire) == 1) {
        return 0;
    }
    return blk_body_load(b);
}

/* Heap a block owns outside its mapping (decoded columns, rebuilt lists
 * and detail, the decoded stream index), counted in blk_stats'
 * table_heap_bytes: blk_heap_add after allocating, blk_heap_free to free
 * (NULL ignored by both). */
void blk_heap_add(const void *p);
void blk_heap_free(void *p);

/*
 * What mdet_rebuild and sdet_rebuild share: each of the |rows| entries of
 * |enc| re-encoded by |row| (which appends entry |i|, bytes [p, end), to
 * |o|) into a fresh buffer and offsets (*buf, NULL when all are empty, and
 * *offs: the caller frees both), then |enc| rebound to them. An output
 * past |out_max| bytes is -EBADMSG; |row|'s error is returned as it is,
 * with nothing allocated left behind. Inline, so that |row| is a direct
 * call in each caller.
 */
typedef int (*det_row_fn)(const void *ctx, uint64_t i, const uint8_t *p, const uint8_t *end,
                          struct vbuf *o);
static inline __attribute__((always_inline)) int det_rebuild(struct scol *enc, uint64_t rows,
                                                             det_row_fn row, const void *ctx,
                                                             size_t out_max, uint8_t **buf,
                                                             uint64_t **offs)
{
    *buf = NULL;
    *offs = malloc((rows + 1) * sizeof(**offs));
    if (*offs == NULL) {
        return -ENOMEM;
    }
    struct vbuf o;
    vbuf_init(&o);
    uint64_t *off = *offs;
    off[0] = 0;
    int rc = 0;
    for (uint64_t i = 0; i < rows && rc == 0; i++) {
        uint64_t a = ic_get(&enc->off, i), e = ic_get(&enc->off, i + 1);
        rc = row(ctx, i, enc->data + a, enc->data + e, &o);
        if (rc == 0 && o.len > out_max) {
            rc = -EBADMSG;
        }
        off[i + 1] = o.len;
    }
    if (rc < 0) {
        vbuf_fini(&o);
        free(*offs);
        *offs = NULL;
        return rc;
    }
    *buf = o.p;
    enc->off = (struct icol){(const uint8_t *)off, 0, 8};
    enc->data = o.p != NULL ? o.p : (const uint8_t *)empty;
    return 0;
}

#endif
