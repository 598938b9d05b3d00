/*
 * logql_tmpl.h - the Go text/template subset LogQL's line_format and
 * label_format run, with the functions Loki documents
 * (docs/sources/query/template_functions.md; Loki's pkg/logql/log/fmt.go
 * function map: its own, a part of sprig's, and Go's builtins).
 *
 * Syntax: text, {{ pipeline }} with {{- / -}} trimming, comment actions,
 * pipelines `cmd | cmd` (the value of each is the last argument of the
 * next), operands .label / . / $ / $var / $var.key / "str" / `raw` /
 * numbers / true / false / nil / ( pipeline ), variables ($x := ..., $x =
 * ...), {{ if }} {{ else if }} {{ else }} {{ end }}, {{ range [$i,] [$x :=]
 * pipeline }} (over a fromJson list or object; {{ else }} when empty,
 * break, continue) and {{ with }}. define/template/block are refused.
 *
 * Values: strings, int64, float64, bool, time (ns since the epoch, UTC),
 * nil, and JSON objects/arrays from fromJson (kept as their text; .key and
 * index walk it; printed as JSON text where Go prints map[...]). A missing
 * label is "" (Loki's missingkey=zero over map[string]string). Dates are
 * formatted and parsed in UTC (Go layouts: 2006 01 Jan January 02 _2 15 03
 * 04 05 .000 .999 PM Mon Monday MST Z07:00 -07:00 -0700 002 ...).
 *
 * Memory: logql_tmpl_compile builds the tree in the query's arena (it lives
 * as long as the parsed query); logql_tmpl_render allocates its temporaries and
 * the result in the |scratch| arena, which the caller resets (per row).
 * Rendering does not malloc. A compiled template is read-only and may be
 * shared by threads.
 */
#ifndef MIRADB_LOGQL_TMPL_H
#define MIRADB_LOGQL_TMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "query/qlex.h"
#include "storage/arena.h"

typedef struct logql_tmpl logql_tmpl;

/* Compiles |n| bytes of template text (the decoded string of the query
 * token at |pos|) with the lexer |lx| of the query being parsed: the tree
 * lives in lx's arena, the regexes of regexReplaceAll / count (whose regex
 * must be a string literal; RE2 syntax) join lx->res. Returns 0, or the
 * lexer's error (-EINVAL "template: ...": unknown function, unclosed
 * action, ...; -ENOMEM) recorded at |pos|. */
int logql_tmpl_compile(struct qlex *lx, size_t pos, const char *src, size_t n, logql_tmpl **out);

/* Whether the template is only literal text (no action). */
bool logql_tmpl_is_literal(const logql_tmpl *t);

/* What a template sees of the row: a label lookup (the value, or NULL when
 * the row has no such label; borrowed until the render returns), the i-th
 * label of the row for {{ range $k, $v := . }} (false past the last; may be
 * NULL: then the row ranges as empty), the current line (__line__) and the
 * entry's timestamp (__timestamp__). */
struct logql_tmpl_env {
    const char *(*label)(void *ctx, const char *name, size_t nn, size_t *vn);
    bool (*label_at)(void *ctx, size_t i, const char **name, size_t *nn, const char **v,
                     size_t *vn);
    void *ctx;
    const char *line;
    size_t line_n;
    int64_t ts_ns;
};

/* Renders |t|: 0 with *out / *out_n (in |scratch|), or -EINVAL with the
 * error in err (Loki then sets __error__=TemplateFormatErr), or -ENOMEM. */
int logql_tmpl_render(const logql_tmpl *t, const struct logql_tmpl_env *env, arena *scratch,
                      const char **out, size_t *out_n, char *err, size_t errlen);

#endif
