/*
 * logql_tmpl_int.h - what the files of the template module share:
 * logql_tmpl.c (syntax tree, parser, evaluator, JSON access of fromJson
 * values), logql_tmpl_fn.c (the function library, value conversions and
 * printing) and logql_tmpl_time.c (Go time layouts). Nothing else
 * includes it.
 */
#ifndef MIRADB_LOGQL_TMPL_INT_H
#define MIRADB_LOGQL_TMPL_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/logql_tmpl.h"
#include "query/qlex.h"
#include "storage/arena.h"

#define TMPL_MAX_ARGS_FN 17 /* arguments of one call, the piped value included */

enum tv_kind {
    TV_NIL,
    TV_STR,
    TV_INT,
    TV_FLOAT,
    TV_BOOL,
    TV_TIME,   /* i: ns since the epoch */
    TV_JSON,   /* s/n: the text of a JSON object or array */
    TV_LABELS, /* the row's labels (the root dot) */
};

struct tv {
    enum tv_kind k;
    const char *s;
    size_t n;
    int64_t i;
    double f;
    bool b;
};

/* The evaluation state functions see. */
struct tctx {
    const struct logql_tmpl_env *env;
    arena *a;
    char *err;
    size_t errlen;
    bool failed;
};

/* A growing text in the evaluation's arena (the output, and strings the
 * functions build): a put past TMPL_MAX_OUT sets big, a failed allocation
 * oom; later puts do nothing. */
#define TMPL_MAX_OUT (64u << 20)
struct obuf {
    struct tctx *c;
    char *p;
    size_t n, cap;
    bool oom, big;
};
void tmpl_buf_put(struct obuf *b, const char *s, size_t n);

/* Records an error (first one wins) and returns -EINVAL. */
int tmpl_fail(struct tctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Function ids: index into the name table of logql_tmpl_fn.c (-1: none). */
int tmpl_fn_lookup(const char *name, size_t n);
/* Whether the function's first argument is a regex (compiled when the
 * template is: it must be a string literal). */
bool tmpl_fn_takes_regex(int fn);
/* Calls function |fn| on |argc| evaluated arguments (|re|: the compiled
 * regex of a regex function, else NULL). */
int tmpl_fn_call(struct tctx *c, int fn, const qlex_re *re, const struct tv *argv, size_t argc,
                 struct tv *out);

/* Values as the functions take them (Go fmt %v for strings; spf13/cast
 * rules for numbers). */
int tmpl_to_str(struct tctx *c, const struct tv *v, const char **s, size_t *n);
int64_t tmpl_to_int(const struct tv *v);
double tmpl_to_float(const struct tv *v);
bool tmpl_truth(const struct tv *v);
struct tv tmpl_str(const char *s, size_t n);

/* JSON helpers over TV_JSON text: member |key| of an object, element |i|
 * of an array (k TV_NIL when absent). */
int tmpl_json_member(struct tctx *c, const struct tv *obj, const char *key, size_t kn,
                     struct tv *out);
int tmpl_json_index(struct tctx *c, const struct tv *arr, int64_t i, struct tv *out);
/* Turns one JSON value at text p[0..n) into a tv (strings unescaped). */
int tmpl_json_value(struct tctx *c, const char *p, size_t n, struct tv *out);

/* ---- logql_tmpl_time.c: Go time layouts, in UTC ---- */

/* Unix seconds of Go's zero time.Time (0001-01-01 00:00:00 UTC), which
 * toDate gives for a value it cannot parse (a TV_TIME with b set). */
#define GO_ZERO_TIME (-62135596800LL)

/* Time.Format(layout) of the TV_TIME |t|; writes at most cap bytes (no
 * NUL) and returns the length. */
size_t tmpl_go_format(const char *l, size_t n, const struct tv *t, char *out, size_t cap);
/* Go's time.Time String(): "2006-01-02 15:04:05.999999999 -0700 MST". */
size_t tmpl_fmt_time(const struct tv *t, char *out, size_t cap);
/* time.Parse(layout, value): 0 with *ns (a numeric zone in the value is
 * applied), or -EINVAL. */
int tmpl_go_parse(const char *l, size_t ln, const char *s, size_t sn, int64_t *ns);

#endif
