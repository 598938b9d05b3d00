/*
 * promql.h - PromQL front end: query text -> typed AST for the PromQL
 * evaluator (issue 11). Lexer, parser, static type checks, literal decoders
 * and a printer; no evaluation here.
 *
 * LANGUAGE: all of PromQL as Prometheus 2.42 parses it (PROMQL.md section B,
 * promql/parser at v2.42.0): number literals (decimal, leading-0 octal, hex,
 * exponent, Inf/NaN), strings ("...", '...' with Go escapes, `raw`),
 * durations with units y w d h m s ms in that order (`1h30m`; no bare
 * numbers, no fractions), selectors `name{l="v", l!="v", l=~"re", l!~"re"}`
 * (names with colons; at least one matcher that does not match ""), range
 * selectors `[5m]`, `offset [-]d`, `@ <ts>` / `@ start()` / `@ end()` (either
 * order), subqueries `[30m:1m]` / `[30m:]`, every 2.42 function with arity and
 * argument types (promql_func_lookup), aggregations with by/without before or
 * after the body and their parameters, binary operators with Prometheus
 * precedence (`^` right-associative and highest; `* / % atan2`; `+ -`;
 * comparisons; `and unless`; `or`), `bool`, `on`/`ignoring`,
 * `group_left`/`group_right` (optional label lists), unary `+`/`-` (binding
 * looser than `^`), parentheses and `#` comments. The same static checks as
 * Prometheus's checkAST run after a successful parse.
 *
 * ERRORS: a failed parse writes Prometheus's form, "L:C: parse error: <msg>",
 * where L and C are the 1-based line and column (column counted in bytes
 * from the last newline) of the first error, exactly as Prometheus's
 * ParseErr prints them; the messages are Prometheus's except for regexes
 * (query/qlex.c's RE2 checks word their own) and the limits below. Like
 * Prometheus, only the first error is reported, and type errors only when
 * the query parsed.
 *
 * LIMITS (hostile input): at most PROMQL_MAX_OPS operators per query
 * (binary and unary operators and subquery brackets together; a left-
 * associative chain 1+1+...+1 does not nest, so this is what bounds the
 * depth of the AST along a chain) and PROMQL_MAX_DEPTH levels of nesting
 * (parentheses, calls, aggregations). The parser itself is iterative along
 * operator chains and recurses only per nesting level; every walk over the
 * AST (check, printer, evaluator) recurses at most about
 * PROMQL_MAX_OPS + 4 * PROMQL_MAX_DEPTH deep. The arena is capped at
 * PROMQL_ARENA_LIMIT bytes. Prometheus has none of these limits.
 *
 * MEMORY: one parse = one arena plus the compiled regexes, all freed by one
 * promql_free() of the root. Every pointer in the AST (strings, arrays, the
 * function table entries are static) is valid until then. Strings are
 * decoded, NUL-terminated and also carry their length (an escape may put a
 * NUL inside). The AST is read-only after parsing and may be shared by
 * threads (regex matching through qlex_re_match is thread-safe).
 */
#ifndef MIRADB_PROMQL_H
#define MIRADB_PROMQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/qlex.h"

#define PROMQL_MAX_OPS 1024
#define PROMQL_MAX_DEPTH 64
#define PROMQL_ARENA_LIMIT (16u << 20)

/* A string from the query (decoded). */
struct promql_str {
    const char *s;
    size_t n;
};

/* Value types (Prometheus ValueType). */
enum promql_type {
    PROMQL_TYPE_NONE,
    PROMQL_TYPE_SCALAR,
    PROMQL_TYPE_VECTOR, /* instant vector */
    PROMQL_TYPE_MATRIX, /* range vector */
    PROMQL_TYPE_STRING,
};

/* "scalar", "instant vector", "range vector", "string", "none"
 * (Prometheus DocumentedType). */
const char *promql_type_name(enum promql_type t);

enum promql_match_op {
    PROMQL_MATCH_EQ,  /* =  */
    PROMQL_MATCH_NEQ, /* != */
    PROMQL_MATCH_RE,  /* =~ */
    PROMQL_MATCH_NRE, /* !~ */
};

/* A label matcher. RE/NRE: |re| is the value compiled as 2.x does,
 * `^(?:value)$` with `.` not matching a newline (PROMQL.md B.12). */
struct promql_matcher {
    struct promql_str name;
    enum promql_match_op op;
    struct promql_str value;
    const qlex_re *re; /* RE/NRE; else NULL */
};

/* Whether |m| matches the label value v/n (a missing label is ""). A regex
 * that hits its match limit counts as not matching (qlex_re_take_limit_hit
 * tells). */
bool promql_matcher_matches(const struct promql_matcher *m, const char *v, size_t n);

/* The @ modifier. */
enum promql_at {
    PROMQL_AT_NONE,
    PROMQL_AT_TIME,  /* @ <at_ms> */
    PROMQL_AT_START, /* @ start() */
    PROMQL_AT_END,   /* @ end() */
};

/* offset and @ of a selector or subquery. */
struct promql_mod {
    int64_t offset_ms; /* 0 = none; negative allowed */
    enum promql_at at;
    int64_t at_ms; /* PROMQL_AT_TIME: round(ts * 1000) */
};

/* --- functions ------------------------------------------------------------ */

enum promql_func_id {
    PROMQL_FN_ABS,
    PROMQL_FN_ABSENT,
    PROMQL_FN_ABSENT_OVER_TIME,
    PROMQL_FN_ACOS,
    PROMQL_FN_ACOSH,
    PROMQL_FN_ASIN,
    PROMQL_FN_ASINH,
    PROMQL_FN_ATAN,
    PROMQL_FN_ATANH,
    PROMQL_FN_AVG_OVER_TIME,
    PROMQL_FN_CEIL,
    PROMQL_FN_CHANGES,
    PROMQL_FN_CLAMP,
    PROMQL_FN_CLAMP_MAX,
    PROMQL_FN_CLAMP_MIN,
    PROMQL_FN_COS,
    PROMQL_FN_COSH,
    PROMQL_FN_COUNT_OVER_TIME,
    PROMQL_FN_DAY_OF_MONTH,
    PROMQL_FN_DAY_OF_WEEK,
    PROMQL_FN_DAY_OF_YEAR,
    PROMQL_FN_DAYS_IN_MONTH,
    PROMQL_FN_DEG,
    PROMQL_FN_DELTA,
    PROMQL_FN_DERIV,
    PROMQL_FN_EXP,
    PROMQL_FN_FLOOR,
    PROMQL_FN_HISTOGRAM_COUNT,
    PROMQL_FN_HISTOGRAM_FRACTION,
    PROMQL_FN_HISTOGRAM_QUANTILE,
    PROMQL_FN_HISTOGRAM_SUM,
    PROMQL_FN_HOLT_WINTERS,
    PROMQL_FN_HOUR,
    PROMQL_FN_IDELTA,
    PROMQL_FN_INCREASE,
    PROMQL_FN_IRATE,
    PROMQL_FN_LABEL_JOIN,
    PROMQL_FN_LABEL_REPLACE,
    PROMQL_FN_LAST_OVER_TIME,
    PROMQL_FN_LN,
    PROMQL_FN_LOG10,
    PROMQL_FN_LOG2,
    PROMQL_FN_MAX_OVER_TIME,
    PROMQL_FN_MIN_OVER_TIME,
    PROMQL_FN_MINUTE,
    PROMQL_FN_MONTH,
    PROMQL_FN_PI,
    PROMQL_FN_PREDICT_LINEAR,
    PROMQL_FN_PRESENT_OVER_TIME,
    PROMQL_FN_QUANTILE_OVER_TIME,
    PROMQL_FN_RAD,
    PROMQL_FN_RATE,
    PROMQL_FN_RESETS,
    PROMQL_FN_ROUND,
    PROMQL_FN_SCALAR,
    PROMQL_FN_SGN,
    PROMQL_FN_SIN,
    PROMQL_FN_SINH,
    PROMQL_FN_SORT,
    PROMQL_FN_SORT_DESC,
    PROMQL_FN_SQRT,
    PROMQL_FN_STDDEV_OVER_TIME,
    PROMQL_FN_STDVAR_OVER_TIME,
    PROMQL_FN_SUM_OVER_TIME,
    PROMQL_FN_TAN,
    PROMQL_FN_TANH,
    PROMQL_FN_TIME,
    PROMQL_FN_TIMESTAMP,
    PROMQL_FN_VECTOR,
    PROMQL_FN_YEAR,
    PROMQL_FN_COUNT_ /* number of functions */
};

/* One row of the function table (Prometheus parser.Functions at 2.42).
 * variadic: 0 = exactly n_args arguments; -1 = at least n_args - 1, no
 * upper bound (label_join); k > 0 = between n_args - 1 and n_args - 1 + k.
 * Arguments past n_args have the type of the last one. */
struct promql_func {
    const char *name;
    enum promql_func_id id;
    enum promql_type args[5];
    unsigned n_args;
    int variadic;
    enum promql_type ret;
};

/* The table entry for a function name (case-sensitive), or NULL. */
const struct promql_func *promql_func_lookup(const char *name, size_t n);

/* The whole table, in name order, PROMQL_FN_COUNT_ entries; entry i has
 * id i. */
const struct promql_func *promql_funcs(void);

/* --- the AST -------------------------------------------------------------- */

enum promql_kind {
    PROMQL_NUMBER,   /* num */
    PROMQL_STRING,   /* str */
    PROMQL_VECTOR,   /* sel: instant vector selector */
    PROMQL_MATRIX,   /* inner (a PROMQL_VECTOR, holding offset/@), range_ms */
    PROMQL_SUBQUERY, /* inner, range_ms, step_ms (0 = default), mod */
    PROMQL_CALL,     /* func, args */
    PROMQL_AGG,      /* agg, param, inner, grouping, without */
    PROMQL_BINARY,   /* op, lhs, rhs, return_bool, vm */
    PROMQL_UNARY,    /* neg, inner (never a NUMBER: -1 is folded into one) */
    PROMQL_PAREN,    /* inner */
};

enum promql_agg_op {
    PROMQL_AGG_AVG,
    PROMQL_AGG_BOTTOMK,
    PROMQL_AGG_COUNT,
    PROMQL_AGG_COUNT_VALUES,
    PROMQL_AGG_GROUP,
    PROMQL_AGG_MAX,
    PROMQL_AGG_MIN,
    PROMQL_AGG_QUANTILE,
    PROMQL_AGG_STDDEV,
    PROMQL_AGG_STDVAR,
    PROMQL_AGG_SUM,
    PROMQL_AGG_TOPK,
};

enum promql_binop {
    PROMQL_OP_ADD,
    PROMQL_OP_SUB,
    PROMQL_OP_MUL,
    PROMQL_OP_DIV,
    PROMQL_OP_MOD,
    PROMQL_OP_POW,
    PROMQL_OP_ATAN2,
    PROMQL_OP_EQLC, /* == */
    PROMQL_OP_NEQ,  /* != */
    PROMQL_OP_LTE,  /* <= */
    PROMQL_OP_LSS,  /* <  */
    PROMQL_OP_GTE,  /* >= */
    PROMQL_OP_GTR,  /* >  */
    PROMQL_OP_AND,
    PROMQL_OP_OR,
    PROMQL_OP_UNLESS,
};

bool promql_op_is_comparison(enum promql_binop op);
bool promql_op_is_set(enum promql_binop op);
const char *promql_op_name(enum promql_binop op);   /* "+", "atan2", "==", "and", ... */
const char *promql_agg_name(enum promql_agg_op op); /* "sum", "count_values", ... */

enum promql_card {
    PROMQL_CARD_ONE_TO_ONE,
    PROMQL_CARD_MANY_TO_ONE,  /* group_left */
    PROMQL_CARD_ONE_TO_MANY,  /* group_right */
    PROMQL_CARD_MANY_TO_MANY, /* set operators */
};

/* Vector matching of a binary expression between two instant vectors. */
struct promql_vm {
    enum promql_card card;
    bool on; /* on(labels); else ignoring(labels) (maybe none) */
    struct promql_str *labels;
    size_t n_labels;
    struct promql_str *include; /* group_left/group_right(include) */
    size_t n_include;
};

/* Vector selector: |name| outside the braces (n == 0 when none), then the
 * matchers in query order, and when a name was given a final
 * __name__="name" matcher (as Prometheus stores it). */
struct promql_sel {
    struct promql_str name;
    struct promql_matcher *matchers;
    size_t n_matchers;
    struct promql_mod mod;
};

/* One node. Only the fields named for its kind are meaningful. [pos, end)
 * is its byte range in the source (Prometheus's PositionRange). */
struct promql_expr {
    enum promql_kind kind;
    enum promql_type type; /* set by the type check for every node */
    size_t pos, end;

    double num;            /* NUMBER */
    struct promql_str str; /* STRING */
    struct promql_sel sel; /* VECTOR */

    struct promql_expr *inner; /* MATRIX, SUBQUERY, AGG, UNARY, PAREN */
    int64_t range_ms;          /* MATRIX, SUBQUERY */
    int64_t step_ms;           /* SUBQUERY; 0 = the default step */
    struct promql_mod mod;     /* SUBQUERY (a MATRIX keeps its in inner->sel.mod) */

    const struct promql_func *func; /* CALL */
    struct promql_expr **args;      /* CALL */
    size_t n_args;

    enum promql_agg_op agg;      /* AGG */
    struct promql_expr *param;   /* AGG: topk/bottomk/quantile/count_values; else NULL */
    struct promql_str *grouping; /* AGG: by/without labels */
    size_t n_grouping;
    bool without; /* AGG: without(...) rather than by(...) */

    enum promql_binop op; /* BINARY */
    struct promql_expr *lhs, *rhs;
    bool return_bool;
    const struct promql_vm *vm; /* NULL unless both sides are instant vectors */

    bool neg; /* UNARY: '-' rather than '+' */
};

/* Parses and type-checks |src| (|len| bytes, need not be NUL-terminated).
 * On success returns 0 and *out, the root, owned by the caller (free with
 * promql_free). On failure *out is NULL and err holds the message
 * (NUL-terminated, truncated to errlen): -EINVAL for a syntax or type error,
 * -E2BIG past PROMQL_MAX_OPS / PROMQL_MAX_DEPTH ("query too complex",
 * "query nested too deeply"), -ENOMEM when out of memory or past
 * PROMQL_ARENA_LIMIT. */
int promql_parse(const char *src, size_t len, struct promql_expr **out, char *err, size_t errlen);

/* Parses a bare vector selector (the API's match[] parameter, Prometheus
 * ParseMetricSelector): `name`, `name{...}` or `{...}`, without the
 * non-empty-matcher check (the caller words its own) and without offset,
 * @ or range. The root is a PROMQL_VECTOR; same results as promql_parse. */
int promql_parse_selector(const char *src, size_t len, struct promql_expr **out, char *err,
                          size_t errlen);

/* Frees a root returned by promql_parse / promql_parse_selector. NULL-safe. */
void promql_free(struct promql_expr *root);

/* Prints |e| in Prometheus's canonical form (its String()): normalised
 * spacing, durations as model.Duration prints them (`1h30m`, `90s` ->
 * `1m30s`), numbers as Go's %v, strings as Go's %q (except that U+FFFD is
 * written `\ufffd`, so the output parses again), matchers sorted, the
 * name matcher folded back into the name. As with Prometheus, the literal
 * Inf prints as "+Inf", so `Inf ^ 2` prints as `+Inf ^ 2`, which reads
 * back as +(Inf ^ 2): the same value, another tree. Writes at most cap bytes
 * (NUL-terminated when cap > 0) and returns the full length, like snprintf. */
size_t promql_format(const struct promql_expr *e, char *buf, size_t cap);

/* --- literal decoders (also for the HTTP API's parameters) -------------- */

/* Prometheus model.ParseDuration as 2.42 uses it: units y w d h m s ms, each
 * at most once and in that order, integers only, "0" allowed. Returns 0 and
 * *ms, -EINVAL on syntax, -ERANGE past int64 nanoseconds. */
int promql_parse_duration(const char *s, size_t n, int64_t *ms);

/* model.Duration String(): "1h30m", "5m", "1y", "0s" (ms >= 0). Returns
 * the length written as snprintf does. */
size_t promql_format_duration(int64_t ms, char *buf, size_t cap);

/* A PromQL number literal as the lexer delimits it ("1", "0x1f", "0755",
 * "1.5e3", ".5", "Inf", "NaN"): Go ParseInt(s, 0, 64) then ParseFloat.
 * Returns 0 and *v, -EINVAL on syntax, -ERANGE when out of range. */
int promql_parse_number(const char *s, size_t n, double *v);

/* Go's %v of a float64 ("1", "0.5", "1e+06", "1e-05", "+Inf", "NaN", "-0").
 * Returns the length as snprintf does. */
size_t promql_format_float(double v, char *buf, size_t cap);

/* Decodes a string literal including its quotes ("...", '...' with Go
 * escapes, `raw`), as Prometheus's strutil.Unquote. Returns the decoded
 * length (<= n - 2) written to out (which holds n bytes), or -EINVAL. */
long promql_unquote(const char *s, size_t n, char *out);

#endif
