/*
 * logql.h - LogQL parser: query text -> AST for the log query executor.
 *
 * Subset (issue 4, FACTS.md section C): stream selectors; line filters
 * |= != |~ !~ |> !> (with `or` alternatives); | json, | logfmt (flags and
 * parameters), | regexp, | pattern, | unpack, | decolorize, | line_format,
 * | label_format, | drop, | keep, | unwrap; label filter expressions (string,
 * number, duration, bytes, ip()) with and/or/,/parentheses; range
 * aggregations (count_over_time, rate, bytes_over_time, bytes_rate,
 * absent_over_time and the unwrapped ones) with [range] and offset; vector
 * aggregations with by/without and topk/bottomk; sort/sort_desc;
 * label_replace; number literals, vector(N) and binary operators with PromQL
 * precedence (^; * / %; + -; comparisons [bool]; and unless; or) and on /
 * ignoring / group_left / group_right.
 *
 * Memory: one parse = one arena plus the compiled regexes; every pointer in
 * the AST (strings included) is valid until logql_free() of the root. Strings
 * are NUL-terminated and also carry their length (a Go escape may put a NUL
 * inside). The AST is read-only after parsing and may be shared by threads.
 */
#ifndef MIRADB_LOGQL_H
#define MIRADB_LOGQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/qlex.h"

struct logql_tmpl; /* query/logql_tmpl.h */

/* A string from the query (decoded). */
struct logql_str {
    const char *s;
    size_t n;
};

enum logql_match_op {
    LOGQL_MATCH_EQ,  /* =  */
    LOGQL_MATCH_NEQ, /* != */
    LOGQL_MATCH_RE,  /* =~ (anchored) */
    LOGQL_MATCH_NRE, /* !~ (anchored) */
};

/* A label matcher: stream selectors, string label filters, drop/keep. */
struct logql_matcher {
    struct logql_str name;
    enum logql_match_op op;
    struct logql_str value;
    const qlex_re *re; /* RE/NRE: compiled fully anchored; else NULL */
};

/* --- pipeline stages ----------------------------------------------------- */

enum logql_filter_op {
    LOGQL_FILTER_CONTAINS,     /* |= */
    LOGQL_FILTER_NOT_CONTAINS, /* != */
    LOGQL_FILTER_RE,           /* |~ (unanchored search) */
    LOGQL_FILTER_NOT_RE,       /* !~ */
    LOGQL_FILTER_PATTERN,      /* |> (<_> wildcards) */
    LOGQL_FILTER_NOT_PATTERN,  /* !> */
};

/* One literal run of a pattern (| pattern, |>): text, then capture `name`
 * (NULL name = <_>, n == 0 for a pattern that ends in literal text). */
struct logql_pattern_part {
    struct logql_str lit;     /* literal before the capture (may be empty) */
    struct logql_str capture; /* s == NULL: no capture after lit */
    bool named;               /* capture has a name (not <_>) */
};

struct logql_pattern {
    struct logql_pattern_part *parts;
    size_t n_parts;
};

struct logql_filter_alt {
    struct logql_str value;       /* the string, or the argument of ip("...") */
    bool ip;                      /* ip("..."): |= / != only, value is the pattern */
    const qlex_re *re;            /* RE/NOT_RE */
    struct logql_pattern pattern; /* PATTERN/NOT_PATTERN */
};

/* Label filter expression tree. */
enum logql_lf_kind {
    LOGQL_LF_AND,
    LOGQL_LF_OR,
    LOGQL_LF_STRING,   /* m: = != =~ !~ "value" (missing label = "") */
    LOGQL_LF_NUMBER,   /* name cmp num (label parsed as float64) */
    LOGQL_LF_DURATION, /* name cmp dur_ns (label parsed as Go duration) */
    LOGQL_LF_BYTES,    /* name cmp num (label parsed as humanized bytes) */
    LOGQL_LF_IP,       /* name (=|!=) ip("value") */
};

enum logql_cmp {
    LOGQL_CMP_EQ, /* == or = */
    LOGQL_CMP_NE,
    LOGQL_CMP_GT,
    LOGQL_CMP_GE,
    LOGQL_CMP_LT,
    LOGQL_CMP_LE,
};

struct logql_lf {
    enum logql_lf_kind kind;
    struct logql_lf *left, *right; /* AND / OR */
    struct logql_matcher m;        /* STRING; for the others m.name is the label */
    enum logql_cmp cmp;            /* NUMBER, DURATION, BYTES, IP (EQ/NE) */
    double num;                    /* NUMBER, BYTES */
    int64_t dur_ns;                /* DURATION */
    struct logql_str ip;           /* IP: the argument of ip("...") */
};

/* | json a="path", b   /   | logfmt a, b="key"   /   | label_format a=b, c="tmpl" */
struct logql_param {
    struct logql_str name;  /* label to set */
    struct logql_str value; /* json: path text; logfmt: key; label_format: template or source */
    bool is_template;       /* label_format: value was a string (template), not a label name */
    const struct logql_tmpl *tmpl; /* label_format: the compiled template */
    struct logql_json_step *path;  /* json: parsed path (n_path steps) */
    size_t n_path;
};

/* One step of a json path: x.y -> {key "x"},{key "y"}; list[0] -> index. */
struct logql_json_step {
    struct logql_str key; /* s == NULL for an index step */
    int64_t index;
};

enum logql_unwrap_conv {
    LOGQL_CONV_NONE,             /* unwrap x */
    LOGQL_CONV_BYTES,            /* unwrap bytes(x) */
    LOGQL_CONV_DURATION,         /* unwrap duration(x) */
    LOGQL_CONV_DURATION_SECONDS, /* unwrap duration_seconds(x) */
};

enum logql_stage_kind {
    LOGQL_STAGE_LINE_FILTER,
    LOGQL_STAGE_JSON,
    LOGQL_STAGE_LOGFMT,
    LOGQL_STAGE_REGEXP,
    LOGQL_STAGE_PATTERN,
    LOGQL_STAGE_UNPACK,
    LOGQL_STAGE_DECOLORIZE,
    LOGQL_STAGE_LABEL_FILTER,
    LOGQL_STAGE_LINE_FORMAT,
    LOGQL_STAGE_LABEL_FORMAT,
    LOGQL_STAGE_DROP,
    LOGQL_STAGE_KEEP,
    LOGQL_STAGE_UNWRAP,
};

struct logql_stage {
    enum logql_stage_kind kind;
    size_t pos; /* byte offset in the query (for executor messages) */

    /* LINE_FILTER: op over alternatives (|= "a" or "b"): a positive op
     * keeps a line when any alternative matches, a negative op drops it
     * when any matches. */
    enum logql_filter_op filter_op;
    struct logql_filter_alt *alts;
    size_t n_alts;

    /* JSON, LOGFMT (empty = all), LABEL_FORMAT */
    struct logql_param *params;
    size_t n_params;
    bool logfmt_strict, logfmt_keep_empty;

    /* REGEXP (unanchored, named groups), PATTERN, LINE_FORMAT template */
    struct logql_str text;
    const struct logql_tmpl *tmpl; /* LINE_FORMAT: compiled (logql_tmpl.h) */
    const qlex_re *re;
    struct logql_pattern pattern;

    /* LABEL_FILTER */
    struct logql_lf *lf;

    /* DROP, KEEP: names (op EQ with s == NULL value: plain name) */
    struct logql_matcher *labels;
    size_t n_labels;

    /* UNWRAP */
    struct logql_str unwrap_label;
    enum logql_unwrap_conv unwrap_conv;
};

/* The substrings one positive line filter stage requires of the original
 * line (logql_log_substrs): the stage can keep a line only when, for some
 * alternative, every literal of that alternative is a substring of it.
 * Each literal is at least 3 bytes; a literal from a (?i) part of a regex
 * holds no character whose case variants are not ASCII (so a search that
 * folds ASCII case is sound for it). */
struct logql_subalt {
    struct logql_str *lits;
    size_t n_lits;
};
struct logql_substage {
    struct logql_subalt *alts;
    size_t n_alts;
};

/* A log expression: selector + pipeline (also the argument of a range
 * aggregation). */
struct logql_log {
    struct logql_matcher *matchers;
    size_t n_matchers;
    struct logql_stage *stages;
    size_t n_stages;
    /* Lower-case whole-token needles for the body-token bloom (see
     * logql_log_needles). */
    struct logql_str *needles;
    size_t n_needles;
    /* Required substrings per line filter stage (logql_log_substrs). */
    struct logql_substage *substages;
    size_t n_substages;
};

/* --- metric expressions ---------------------------------------------------- */

enum logql_expr_kind {
    LOGQL_EXPR_LOG,           /* log query (only as the root) */
    LOGQL_EXPR_RANGE,         /* count_over_time(<log> [5m]) ... */
    LOGQL_EXPR_VECTOR_AGG,    /* sum by (x) (...) */
    LOGQL_EXPR_BINARY,        /* a + b */
    LOGQL_EXPR_NUMBER,        /* 2, -1.5 (a scalar) */
    LOGQL_EXPR_VECTOR,        /* vector(2) */
    LOGQL_EXPR_LABEL_REPLACE, /* label_replace(v, "dst", "repl", "src", "re") */
};

enum logql_range_op {
    LOGQL_RANGE_COUNT_OVER_TIME,
    LOGQL_RANGE_RATE,
    LOGQL_RANGE_BYTES_OVER_TIME,
    LOGQL_RANGE_BYTES_RATE,
    LOGQL_RANGE_ABSENT_OVER_TIME,
    /* unwrapped: need | unwrap in the pipeline */
    LOGQL_RANGE_RATE_COUNTER,
    LOGQL_RANGE_SUM_OVER_TIME,
    LOGQL_RANGE_AVG_OVER_TIME,
    LOGQL_RANGE_MIN_OVER_TIME,
    LOGQL_RANGE_MAX_OVER_TIME,
    LOGQL_RANGE_FIRST_OVER_TIME,
    LOGQL_RANGE_LAST_OVER_TIME,
    LOGQL_RANGE_STDVAR_OVER_TIME,
    LOGQL_RANGE_STDDEV_OVER_TIME,
    LOGQL_RANGE_QUANTILE_OVER_TIME,
};

enum logql_agg_op {
    LOGQL_AGG_SUM,
    LOGQL_AGG_AVG,
    LOGQL_AGG_MIN,
    LOGQL_AGG_MAX,
    LOGQL_AGG_COUNT,
    LOGQL_AGG_STDDEV,
    LOGQL_AGG_STDVAR,
    LOGQL_AGG_TOPK,
    LOGQL_AGG_BOTTOMK,
    LOGQL_AGG_SORT,
    LOGQL_AGG_SORT_DESC,
    LOGQL_AGG_APPROX_TOPK, /* approx_topk(k, v): answered exactly, as topk; no grouping */
};

enum logql_bin_op {
    LOGQL_BIN_ADD,
    LOGQL_BIN_SUB,
    LOGQL_BIN_MUL,
    LOGQL_BIN_DIV,
    LOGQL_BIN_MOD,
    LOGQL_BIN_POW,
    LOGQL_BIN_EQ,
    LOGQL_BIN_NE,
    LOGQL_BIN_GT,
    LOGQL_BIN_GE,
    LOGQL_BIN_LT,
    LOGQL_BIN_LE,
    LOGQL_BIN_AND,
    LOGQL_BIN_UNLESS,
    LOGQL_BIN_OR,
};

/* by (...) / without (...); none: has == false. */
struct logql_grouping {
    bool has;
    bool without;
    struct logql_str *labels;
    size_t n_labels;
};

struct logql_expr {
    enum logql_expr_kind kind;
    size_t pos; /* byte offset where the expression starts */

    /* LOG, RANGE */
    struct logql_log log;

    /* RANGE */
    enum logql_range_op range_op;
    int64_t range_ns;               /* [5m] */
    int64_t offset_ns;              /* offset 1h (0 when absent) */
    double param;                   /* quantile_over_time's phi; topk/bottomk's k */
    struct logql_grouping grouping; /* RANGE (unwrapped only) and VECTOR_AGG */

    /* VECTOR_AGG */
    enum logql_agg_op agg_op;
    struct logql_expr *inner;

    /* BINARY */
    enum logql_bin_op bin_op;
    struct logql_expr *lhs, *rhs;
    bool return_bool;  /* comparison with `bool` */
    bool has_matching; /* on(...) / ignoring(...) given */
    bool on;           /* on (true) or ignoring (false) */
    struct logql_str *match_labels;
    size_t n_match_labels;
    int group_side;                   /* 0 none, -1 group_left, +1 group_right */
    struct logql_str *include_labels; /* group_left(a, b) */
    size_t n_include_labels;

    /* NUMBER, VECTOR */
    double value;

    /* LABEL_REPLACE (inner = the vector) */
    struct logql_str dst, replacement, src, regex_text;
    const qlex_re *regex; /* anchored */
};

/* Parses |len| bytes of |src|. On success *out is the root (free it with
 * logql_free) and 0 is returned. On failure returns -EINVAL (syntax or
 * semantic error) or -ENOMEM (query too large / out of memory), writes
 * "parse error at line L, col C: <what was expected>" (or the semantic error
 * Loki gives, e.g. the empty-compatible selector message) to err, and sets
 * *out = NULL. A query nested more than 64 levels, or with more than 1024
 * binary operators or more than 1024 label filter and/or, is -EINVAL ("query
 * nested too deeply" / "query too complex"): the executor evaluates any tree
 * this accepts within a small, fixed stack. */
int logql_parse(const char *src, size_t len, struct logql_expr **out, char *err, size_t errlen);

/* A bare stream selector, as in /loki/api/v1/series match[] and the query
 * parameter of labels / label values / index endpoints: no pipeline. With
 * allow_empty, `{}` and empty-compatible matchers (a=~".*") are accepted
 * (series: all streams); otherwise Loki's rule applies. Returns and frees as
 * logql_parse; the result is a LOGQL_EXPR_LOG with no stages. */
int logql_parse_selector(const char *src, size_t len, bool allow_empty, struct logql_expr **out,
                         char *err, size_t errlen);

/* Frees a root returned by logql_parse (only the root). NULL-safe. */
void logql_free(struct logql_expr *root);

/* True for metric queries (anything but LOGQL_EXPR_LOG). */
bool logql_is_metric(const struct logql_expr *e);

/* Prometheus matcher semantics on one value (missing label: pass "", 0). A
 * regex that hits the match limit counts as not matching. */
bool logql_match_label(const struct logql_matcher *m, const char *v, size_t n);

/* Does |line| pass this LINE_FILTER stage? Per-thread match data. */
bool logql_line_filter_match(const struct logql_stage *st, const char *line, size_t n);

/* Loki's |> test: literal runs in order (first occurrence), <_> = one or
 * more bytes, a trailing literal must end the line. */
bool logql_pattern_match(const struct logql_pattern *p, const char *s, size_t n);

/* Leaf label filters on one label value (LOGQL_LF_STRING/NUMBER/DURATION/
 * BYTES/IP): 1 passes, 0 fails, -EINVAL when the value does not parse as
 * the filter's type (Loki keeps the line with __error__=LabelFilterErr). A
 * missing label: pass v == NULL (string filters see "", others fail). */
int logql_lf_test(const struct logql_lf *lf, const char *v, size_t n);

/* Loki's ip("pat") on one value: pat is an address, a CIDR prefix or a
 * range "a-b" (IPv4 compared as ::ffff:a.b.c.d). 1 match, 0 no match (or v
 * is not an address; v == NULL allowed), -EINVAL when pat is none of the
 * three forms. */
int logql_ip_match(const struct logql_str *pat, const char *v, size_t vn);

/* The ip("pat") line filter: does some address in |line| (found as Loki
 * scans for them) match? 1, 0, or -EINVAL for a bad pattern. */
int logql_ip_line_match(const struct logql_str *pat, const char *line, size_t n);

/* Go's Regexp.Expand of template |t| (tn bytes) for a match of |re| in
 * |subject| (group offsets ovec, |pairs| groups, SIZE_MAX = did not take
 * part): $1, ${1}, $name, ${name} (a name is the longest run of letters,
 * digits and '_', so "$1x" is the group named "1x"), "$$" is a '$'; an
 * unknown group is empty; a '$' not followed by a name is kept. Writes at
 * most cap-1 bytes and a NUL when out is not NULL; returns the full
 * length. For label_replace and the templates' regexReplaceAll. */
size_t logql_re_expand(const qlex_re *re, const char *t, size_t tn, const char *subject,
                       const size_t *ovec, unsigned pairs, char *out, size_t cap);

/* Body-token needles every line of the result must contain as a whole
 * token (DESIGN.md "Blocks": maximal runs of [A-Za-z0-9_], lower-cased).
 * Taken from positive single-alternative |= and |> filters that act on the
 * original line (before any line_format/decolorize). Only tokens bounded by
 * non-token bytes inside the filter text itself count: `|= "error"` can match
 * inside "errors", so it yields none, while `|= " error "` and
 * `|= "level=error "` yield "error", and `|> "<_> level=error <_>"` yields
 * "level" and "error". Returns the array (valid until logql_free), *n set. */
const struct logql_str *logql_log_needles(const struct logql_log *log, size_t *n);

/* The substrings every line of the result must contain, per stage (struct
 * logql_substage): from the positive |=, |~ and |> filters that act on the
 * original line (before any line_format, decolorize or unpack), when every
 * alternative of the stage yields one of 3 or more bytes. Returns the array
 * (valid until logql_free), *n set. */
const struct logql_substage *logql_log_substrs(const struct logql_log *log, size_t *n);

/* The literals of 3 or more bytes a regex |p| (Go RE2 syntax, unanchored
 * search) provably requires in any text it matches: runs of literal
 * characters of its top-level concatenation (see logql_lits.c for what ends
 * a run; a top-level alternation yields none). Writes at most |max| into
 * |out|, pointing into |buf| (capacity n bytes), and returns how many. */
size_t logql_re_literals(const char *p, size_t n, char *buf, struct logql_str *out, size_t max);

#endif
