/*
 * traceql.h - TraceQL parser: query text -> AST for the trace search
 * executor.
 *
 * Tempo's search language (FACTS.md section E; tests/conformance/
 * traceql.cases): spanset filters `{ ... }` (and `{}`) over intrinsics (name,
 * status, statusMessage, kind, duration, rootName, rootServiceName,
 * traceDuration, nestedSetLeft/Right/Parent and the scoped span:/trace:/
 * event:/link:/instrumentation: forms) and attributes (span., resource.,
 * event., link., instrumentation., unscoped `.x`, quoted parts anywhere in a
 * name: `span."a b"`, `.foo."bar baz".x`), with
 * = != > >= < <= =~ !~, arithmetic + - * / % ^, ! and unary minus, && and ||
 * (Tempo gives && and || the same precedence, left to right); literals:
 * strings, integers, floats, durations, true/false, nil, status and kind
 * words, minInt/maxInt. Spanset operators && || > >> < << ~, their &-forms
 * (both sides) and !-forms (negated). Pipelines: | {filter}, | select(...),
 * | by(...), | coalesce(), | count()/avg()/min()/max()/sum() comparisons, and
 * the `with (most_recent=true)` hint. TraceQL metrics (| rate() ...) are
 * refused here (search); query/tqmx.h parses them, with
 * traceql_parse_metrics_input for their input pipeline.
 *
 * Tempo's validations (its ast_validate.go) hold too, each refused with
 * Tempo's reason: a filter must be a condition or attribute-typed
 * (`{ .a + .b }` parses and matches nothing; `{ 1 }` does not parse), an
 * intrinsic or resource.service.name is never `= nil`, aggregates and by()
 * must read a span field, a scalar filter is one aggregate compared with a
 * number, and coalesce() cannot start a pipeline. `nil = nil` and
 * `nil != nil` fold to false.
 *
 * Memory: one parse = one arena plus compiled regexes, all released by
 * traceql_free() of the root. Read-only after parsing; shareable by threads.
 */
#ifndef MIRADB_TRACEQL_H
#define MIRADB_TRACEQL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/qlex.h"

enum traceql_type {
    TRACEQL_T_ANY, /* attribute: type known only per span */
    TRACEQL_T_NIL,
    TRACEQL_T_BOOL,
    TRACEQL_T_INT,
    TRACEQL_T_FLOAT,
    TRACEQL_T_DURATION, /* nanoseconds */
    TRACEQL_T_STRING,
    TRACEQL_T_STATUS, /* OTLP Status.code: 0 unset, 1 ok, 2 error */
    TRACEQL_T_KIND,   /* OTLP SpanKind: 0 unspecified, 1 internal, 2 server, 3 client,
                         4 producer, 5 consumer */
};

struct traceql_static {
    enum traceql_type type;
    int64_t i;     /* INT, DURATION (ns), BOOL (0/1), STATUS, KIND */
    double f;      /* FLOAT */
    const char *s; /* STRING (NUL-terminated, length n) */
    size_t n;
};

enum traceql_intrinsic {
    TRACEQL_I_NAME,                   /* name, span:name */
    TRACEQL_I_STATUS,                 /* status, span:status */
    TRACEQL_I_STATUS_MESSAGE,         /* statusMessage, span:statusMessage */
    TRACEQL_I_KIND,                   /* kind, span:kind */
    TRACEQL_I_DURATION,               /* duration, span:duration */
    TRACEQL_I_SPAN_ID,                /* span:id (hex string) */
    TRACEQL_I_PARENT_ID,              /* span:parentID */
    TRACEQL_I_CHILD_COUNT,            /* span:childCount */
    TRACEQL_I_ROOT_NAME,              /* rootName, trace:rootName */
    TRACEQL_I_ROOT_SERVICE,           /* rootServiceName, trace:rootService */
    TRACEQL_I_TRACE_DURATION,         /* traceDuration, trace:duration */
    TRACEQL_I_TRACE_ID,               /* trace:id */
    TRACEQL_I_EVENT_NAME,             /* event:name */
    TRACEQL_I_EVENT_TIME_SINCE_START, /* event:timeSinceStart */
    TRACEQL_I_LINK_TRACE_ID,          /* link:traceID */
    TRACEQL_I_LINK_SPAN_ID,           /* link:spanID */
    TRACEQL_I_INSTR_NAME,             /* instrumentation:name */
    TRACEQL_I_INSTR_VERSION,          /* instrumentation:version */
    /* Tempo's nested set model of the span tree: a depth-first walk numbers
     * each span on the way down (left) and up (right); parent = the
     * parent's left, -1 for a root; 0s for a span not under a root. */
    TRACEQL_I_NESTED_SET_LEFT,   /* nestedSetLeft */
    TRACEQL_I_NESTED_SET_RIGHT,  /* nestedSetRight */
    TRACEQL_I_NESTED_SET_PARENT, /* nestedSetParent */
};

enum traceql_scope {
    TRACEQL_SCOPE_ANY, /* .x: span, then resource, event, link, instrumentation */
    TRACEQL_SCOPE_SPAN,
    TRACEQL_SCOPE_RESOURCE,
    TRACEQL_SCOPE_EVENT,
    TRACEQL_SCOPE_LINK,
    TRACEQL_SCOPE_INSTRUMENTATION,
};

enum traceql_op {
    TRACEQL_OP_NOT, /* unary ! */
    TRACEQL_OP_NEG, /* unary - (on a non-literal) */
    TRACEQL_OP_AND,
    TRACEQL_OP_OR,
    TRACEQL_OP_EQ,
    TRACEQL_OP_NE,
    TRACEQL_OP_GT,
    TRACEQL_OP_GE,
    TRACEQL_OP_LT,
    TRACEQL_OP_LE,
    TRACEQL_OP_RE,  /* fully anchored */
    TRACEQL_OP_NRE, /* fully anchored */
    TRACEQL_OP_ADD,
    TRACEQL_OP_SUB,
    TRACEQL_OP_MUL,
    TRACEQL_OP_DIV,
    TRACEQL_OP_MOD,
    TRACEQL_OP_POW,
};

enum traceql_field_kind {
    TRACEQL_F_STATIC,
    TRACEQL_F_INTRINSIC,
    TRACEQL_F_ATTR,
    TRACEQL_F_BINARY,
    TRACEQL_F_UNARY,
};

/* A field expression, evaluated against one span (with its resource, scope
 * and trace). */
struct traceql_field {
    enum traceql_field_kind kind;
    enum traceql_type type;           /* inferred result type; ANY when it depends on attributes */
    size_t pos;                       /* byte offset (operator for BINARY) */
    struct traceql_static st;         /* STATIC */
    enum traceql_intrinsic intrinsic; /* INTRINSIC */
    enum traceql_scope scope;         /* ATTR */
    const char *name;                 /* ATTR: attribute key, NUL-terminated */
    size_t name_len;
    enum traceql_op op;          /* BINARY, UNARY */
    struct traceql_field *l, *r; /* BINARY: both; UNARY: l */
    const qlex_re *re;           /* BINARY RE/NRE: compiled r (a static string) */
};

enum traceql_node_kind {
    TRACEQL_N_FILTER,     /* { field } */
    TRACEQL_N_SPANSET_OP, /* l op r */
    TRACEQL_N_PIPELINE,   /* input | stage | stage ... */
};

enum traceql_sop {
    TRACEQL_SOP_AND,      /* {A} && {B}: both non-empty, A u B */
    TRACEQL_SOP_UNION,    /* {A} || {B} */
    TRACEQL_SOP_CHILD,    /* {A} > {B}: B spans whose parent is in A */
    TRACEQL_SOP_DESC,     /* {A} >> {B}: B spans with an ancestor in A */
    TRACEQL_SOP_PARENT,   /* {A} < {B}: B spans that are the parent of an A span */
    TRACEQL_SOP_ANCESTOR, /* {A} << {B}: B spans that are an ancestor of an A span */
    TRACEQL_SOP_SIBLING,  /* {A} ~ {B}: B spans with a sibling in A */
    /* &-forms: same relation, matches from both sides */
    TRACEQL_SOP_UNION_CHILD,
    TRACEQL_SOP_UNION_DESC,
    TRACEQL_SOP_UNION_PARENT,
    TRACEQL_SOP_UNION_ANCESTOR,
    TRACEQL_SOP_UNION_SIBLING,
    /* !-forms: B spans for which the relation does not hold */
    TRACEQL_SOP_NOT_CHILD,
    TRACEQL_SOP_NOT_DESC,
    TRACEQL_SOP_NOT_PARENT,
    TRACEQL_SOP_NOT_ANCESTOR,
    TRACEQL_SOP_NOT_SIBLING,
};

enum traceql_agg {
    TRACEQL_AGG_COUNT,
    TRACEQL_AGG_AVG,
    TRACEQL_AGG_MIN,
    TRACEQL_AGG_MAX,
    TRACEQL_AGG_SUM,
};

enum traceql_scalar_kind {
    TRACEQL_S_AGG,    /* count() / avg(field) ... over the spanset */
    TRACEQL_S_STATIC, /* a literal */
    TRACEQL_S_BINARY, /* arithmetic */
};

struct traceql_scalar {
    enum traceql_scalar_kind kind;
    enum traceql_agg agg;         /* AGG */
    struct traceql_field *field;  /* AGG (NULL for count) */
    struct traceql_static st;     /* STATIC */
    enum traceql_op op;           /* BINARY: ADD..POW */
    struct traceql_scalar *l, *r; /* BINARY */
};

enum traceql_stage_kind {
    TRACEQL_STAGE_SPANSET,       /* | {filter} (or a spanset expression) */
    TRACEQL_STAGE_SCALAR_FILTER, /* | count() > 2 */
    TRACEQL_STAGE_SELECT,        /* | select(a, b) */
    TRACEQL_STAGE_BY,            /* | by(field) */
    TRACEQL_STAGE_COALESCE,      /* | coalesce() */
};

struct traceql_stage {
    enum traceql_stage_kind kind;
    size_t pos;
    struct traceql_node *node;        /* SPANSET */
    struct traceql_scalar *lhs, *rhs; /* SCALAR_FILTER */
    enum traceql_op cmp;              /* SCALAR_FILTER: EQ NE GT GE LT LE */
    struct traceql_field **fields;    /* SELECT (attributes/intrinsics), BY (one) */
    size_t n_fields;
};

struct traceql_node {
    enum traceql_node_kind kind;
    size_t pos;
    struct traceql_field *filter; /* FILTER: NULL for {} (every span) */
    enum traceql_sop sop;         /* SPANSET_OP */
    struct traceql_node *l, *r;   /* SPANSET_OP */
    struct traceql_node *input;   /* PIPELINE */
    struct traceql_stage *stages; /* PIPELINE */
    size_t n_stages;
};

/* Pruning facts: conditions every matching trace satisfies, so a block that
 * cannot satisfy one of them can be skipped. A fact holds on SOME span of
 * the trace (or on the trace itself for ROOT_* / TRACE_*). */
enum traceql_fact_kind {
    TRACEQL_FACT_ATTR_EQ,         /* an attribute (scope, name) = value (string/int/float/bool) */
    TRACEQL_FACT_NAME_EQ,         /* a span named value */
    TRACEQL_FACT_STATUS_EQ,       /* a span with this status (value STATUS) */
    TRACEQL_FACT_KIND_EQ,         /* a span of this kind (value KIND) */
    TRACEQL_FACT_DURATION,        /* a span whose duration op value (EQ GT GE LT LE) */
    TRACEQL_FACT_ROOT_NAME_EQ,    /* the root span's name = value */
    TRACEQL_FACT_ROOT_SERVICE_EQ, /* the root span's service.name = value */
    TRACEQL_FACT_TRACE_DURATION,  /* trace duration op value (EQ GT GE LT LE) */
    TRACEQL_FACT_TRACE_ID_EQ,     /* trace:id = "hex" */
};

struct traceql_fact {
    enum traceql_fact_kind kind;
    enum traceql_scope scope; /* ATTR_EQ */
    const char *name;         /* ATTR_EQ */
    size_t name_len;
    enum traceql_op op; /* EQ, or GT/GE/LT/LE for the duration facts */
    struct traceql_static value;
};

struct traceql_expr {
    struct traceql_node *root;
    bool most_recent; /* with (most_recent=true) */
    struct traceql_fact *facts;
    size_t n_facts;
};

/* Parses |len| bytes of |src|. On success *out is the query (free with
 * traceql_free) and 0 is returned; on failure -EINVAL (syntax, type or
 * "not supported" error) or -ENOMEM, with "parse error at line L, col C:
 * <what>" in err and *out = NULL. More than 64 levels of nesting, or more
 * than 1024 operators (field, spanset and scalar operators together), is
 * -EINVAL ("query nested too deeply" / "query too complex"), so the
 * executor's recursion stays within a small, fixed stack. */
int traceql_parse(const char *src, size_t len, struct traceql_expr **out, char *err, size_t errlen);

/* The input pipeline of a metrics query (query/tqmx.c): parses |src| from
 * byte |off| as traceql_parse does, but stops without error before the
 * first "|" that is followed by a metrics function (rate, count_over_time,
 * ..., compare, topk, bottomk) and at any token that cannot continue the
 * pipeline (")", ",", an operator, the end); *end is that token's offset.
 * No hints (with (...)) are read. Errors, positions and *out as
 * traceql_parse. */
int traceql_parse_metrics_input(const char *src, size_t len, size_t off, struct traceql_expr **out,
                                size_t *end, char *err, size_t errlen);

/* Whether the |n| bytes at |s| name a metrics function: with |first_stage|
 * only those that begin a metrics query (rate ... compare), else also the
 * second stages topk and bottomk. */
bool traceql_is_metrics_fn(const char *s, size_t n, bool first_stage);

/* NULL-safe. */
void traceql_free(struct traceql_expr *q);

/* The pruning facts (valid until traceql_free); *n set to their count. */
const struct traceql_fact *traceql_facts(const struct traceql_expr *q, size_t *n);

/* Regex test for a BINARY RE/NRE field on a string value: true when the
 * comparison holds (=~ matches / !~ does not). A regex that hits the match
 * limit counts as not matching. Per-thread match data. */
bool traceql_regex_match(const struct traceql_field *f, const char *v, size_t n);

/* A bare TraceQL identifier, as in /api/v2/search/tag/<tag>/values:
 * "resource.service.name", "span.http.method", ".foo", "span.\"a b\"",
 * "name", "status", "span:name", "trace:rootService". On success *f is an
 * ATTR field (scope; name copied NUL-terminated into name_buf, f->name points
 * there) or an INTRINSIC field, and 0 is returned; -EINVAL when s is not
 * exactly one identifier, -ENOSPC when the name does not fit name_cap. */
int traceql_parse_identifier(const char *s, size_t n, struct traceql_field *f, char *name_buf,
                             size_t name_cap);

/* Lower-case name of an intrinsic as written unscoped where one exists
 * ("duration"), else its scoped spelling ("span:id"). */
const char *traceql_intrinsic_name(enum traceql_intrinsic i);
/* The words of a status (0 unset, 1 ok, 2 error) and a kind (0 unspecified
 * .. 5 consumer, OTLP's numbering) as TraceQL writes them; "unset" and
 * "unspecified" for a number out of range. */
const char *traceql_status_word(int64_t v);
const char *traceql_kind_word(int64_t v);
/* The comparison operator token |k| stands for (= != > >= < <= =~ !~):
 * true with it in |*op|, false for any other token. */
bool traceql_cmp_op(enum qtok k, enum traceql_op *op);

#endif
