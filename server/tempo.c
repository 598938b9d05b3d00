/*
 * tempo.c - Tempo HTTP endpoints (see tempo.h; shapes in FACTS.md D).
 *
 * A handler checks the parameters on the I/O thread and answers bad
 * requests at once; a valid query becomes a job for the query runner
 * (qhttp.h), which runs it on the pool, keeps the timeout and the client
 * abort, streams a trace in pieces (each rendered on a worker), counts it,
 * and answers errors by its table in Tempo's column.
 */
#include "server/tempo.h"

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>

#include "lib/jsonw.h"
#include "query/qlex.h"
#include "query/qstats.h"
#include "query/tqmx.h"
#include "query/traceql.h"
#include "query/traces.h"
#include "server/config.h"
#include "server/http1.h"
#include "server/log.h"
#include "server/qhttp.h"

/* Bytes of a trace rendered per pool job. */
#define TRACE_CHUNK (256u << 10)

enum treq_kind {
    TK_TRACE,
    TK_SEARCH,
    TK_TAGS,
    TK_TAG_VALUES,
    TK_METRICS, /* /api/metrics/query_range and /api/metrics/query */
};

struct treq {
    struct qhttp_job q; /* first */
    enum treq_kind kind;
    /* trace by id */
    uint8_t id[16];
    enum traces_fmt fmt;
    struct traces_trace *trace;
    /* search and tags */
    struct traceql_expr *expr;
    struct traces_search_req sreq;
    struct traces_tags_req treq;
    char *tag;
    size_t tag_len;
    /* metrics */
    struct tqmx_expr *mexpr;
    struct tqmx_req mreq;
};

/* |q| is the first member */
static struct treq *treq_of(struct qhttp_job *q)
{
    return (struct treq *)q;
}

/* ---- the query, on a worker ---- */

/* Any thread. */
static void treq_free(struct qhttp_job *q)
{
    struct treq *t = treq_of(q);
    traces_trace_free(t->trace);
    traceql_free(t->expr);
    tqmx_free(t->mexpr);
    free(t->tag);
    free(t);
}

static struct traces_limits make_limits(struct treq *t)
{
    struct traces_limits l = {
        .max_rows = qhttp_limits()->max_rows,
        .max_memory = qhttp_limits()->max_memory,
        .deadline_ns = qhttp_deadline_ns(&t->q),
        .cancel = &t->q.cancel,
    };
    return l;
}

/* The next piece of the trace: 1 more follow, 0 done, -errno. */
static int render_trace(struct treq *t, struct evbuffer *body)
{
    int rc = traces_render(t->trace, t->fmt, body, TRACE_CHUNK);
    if (rc <= 0) {
        traces_trace_free(t->trace); /* here, not on the I/O thread */
        t->trace = NULL;
    }
    return rc;
}

static int run_trace(struct treq *t, struct qhttp_answer *a)
{
    struct traces_limits l = make_limits(t);
    int rc = traces_find(t->id, &l, &t->trace, a->err, sizeof(a->err));
    if (rc < 0) {
        return rc;
    }
    if (traces_trace_spans(t->trace) == 0) {
        snprintf(a->err, sizeof(a->err), "trace not found");
        return -ENOENT;
    }
    snprintf(a->warning, sizeof(a->warning), "%s", traces_trace_warning(t->trace));
    a->ctype = (t->fmt == TRACES_PB_V1 || t->fmt == TRACES_PB_V2) ? "application/protobuf"
                                                                  : "application/json";
    rc = render_trace(t, a->body);
    if (rc < 0) {
        /* nothing sent yet: an error, not the part rendered so far */
        snprintf(a->err, sizeof(a->err), "could not render the trace: %s", strerror(-rc));
    }
    return rc;
}

/* Search and tags: JSON, written whole. */
static int run_json(struct treq *t, struct qhttp_answer *a)
{
    struct jsonw w;
    jsonw_init(&w, a->body);
    int rc;
    if (t->kind == TK_METRICS) {
        struct traces_limits l = make_limits(t);
        t->mreq.expr = t->mexpr;
        t->mreq.max_rows = l.max_rows;
        t->mreq.max_memory = l.max_memory;
        t->mreq.deadline_ns = l.deadline_ns;
        t->mreq.cancel = l.cancel;
        rc = tqmx_eval(&t->mreq, &w, a->err, sizeof(a->err));
    } else if (t->kind == TK_SEARCH) {
        t->sreq.lim = make_limits(t);
        t->sreq.expr = t->expr;
        rc = traces_search(&t->sreq, &w, NULL, a->err, sizeof(a->err));
    } else {
        t->treq.lim = make_limits(t);
        t->treq.expr = t->expr;
        rc = t->kind == TK_TAGS
                 ? traces_tags(&t->treq, &w, a->err, sizeof(a->err))
                 : traces_tag_values(&t->treq, t->tag, t->tag_len, &w, a->err, sizeof(a->err));
    }
    if (rc == 0 && w.err != 0) {
        rc = w.err;
        snprintf(a->err, sizeof(a->err), "out of memory writing the answer");
    }
    return rc;
}

/* Worker: the query and the first piece of its answer. */
static int job_run(struct qhttp_job *q, struct qhttp_answer *a)
{
    struct treq *t = treq_of(q);
    return t->kind == TK_TRACE ? run_trace(t, a) : run_json(t, a);
}

/* Mid-answer: a failure cuts the answer (the runner does). */
static int job_more(struct qhttp_job *q, struct evbuffer *body)
{
    return render_trace(treq_of(q), body);
}

static const struct qhttp_dialect tempo_dialect = {
    .api = QHTTP_TEMPO, /* the executor's timeout text is the table's */
};

static const struct qhttp_ops tempo_ops = {
    .dialect = &tempo_dialect,
    .run = job_run,
    .more = job_more,
    .free = treq_free,
};

static struct treq *treq_new(enum treq_kind k, enum qs_endpoint ep)
{
    struct treq *t = calloc(1, sizeof(*t));
    if (t != NULL) {
        t->kind = k;
        qhttp_job_init(&t->q, &tempo_ops, ep);
    }
    return t;
}

/* A job for |r| with its parameters in |ps|; NULL (answered) when out of memory. */
static struct treq *treq_begin(struct http1_req *r, enum treq_kind k, enum qs_endpoint ep,
                               struct qhttp_params *ps)
{
    struct treq *t = treq_new(k, ep);
    if (t == NULL) {
        qhttp_fail(r, &tempo_dialect, ep, -ENOBUFS, NULL);
        return NULL;
    }
    if (qhttp_params_of_req(ps, r) < 0) {
        qhttp_refuse(r, &t->q, -ENOBUFS, NULL);
        return NULL;
    }
    return t;
}

/* Runs |t|, or answers 400 with |msg| when it is not empty. Takes |t|. */
static void treq_finish(struct http1_req *r, struct treq *t, struct qhttp_params *ps,
                        const char *msg)
{
    qhttp_params_fini(ps);
    if (msg[0] != '\0') {
        qhttp_refuse(r, &t->q, -EINVAL, msg);
    } else {
        qhttp_submit(r, &t->q);
    }
}

/* ---- handlers ---- */

static void h_echo(struct http1_req *r)
{
    http1_resp_start(r, 200, "text/plain; charset=utf-8");
    evbuffer_add(http1_resp_body(r), "echo", 4);
    http1_resp_end(r);
}

static void h_buildinfo(struct http1_req *r)
{
    http1_resp_start(r, 200, "application/json");
    evbuffer_add_printf(http1_resp_body(r),
                        "{\"version\":\"" TEMPO_COMPAT_VERSION "\",\"revision\":\"miradb\","
                        "\"branch\":\"main\",\"buildUser\":\"miradb\",\"buildDate\":\"\","
                        "\"goVersion\":\"none\"}");
    http1_resp_end(r);
}

static void trace_by_id(struct http1_req *r, const char *prefix, bool v2)
{
    const char *path = http1_req_path(r);
    char idtext[128];
    size_t n = strlen(path) - strlen(prefix);
    if (n >= sizeof(idtext)) {
        qhttp_fail(r, &tempo_dialect, QS_EP_TRACE_BY_ID, -EINVAL,
                   "invalid trace id: more than 32 hex digits");
        return;
    }
    memcpy(idtext, path + strlen(prefix), n);
    n = qhttp_url_decode(idtext, n, false);
    struct treq *t = treq_new(TK_TRACE, QS_EP_TRACE_BY_ID);
    if (t == NULL) {
        qhttp_fail(r, &tempo_dialect, QS_EP_TRACE_BY_ID, -ENOBUFS, NULL);
        return;
    }
    if (traces_parse_id(idtext, n, t->id) < 0) {
        qhttp_refuse(r, &t->q, -EINVAL, "invalid trace id: expected 1 to 32 hexadecimal digits");
        return;
    }
    const char *accept = http1_req_header(r, "Accept");
    bool pb = accept != NULL && strstr(accept, "application/protobuf") != NULL;
    t->fmt = pb ? (v2 ? TRACES_PB_V2 : TRACES_PB_V1) : (v2 ? TRACES_JSON_V2 : TRACES_JSON_V1);
    qhttp_submit(r, &t->q);
}

static void h_trace_v1(struct http1_req *r)
{
    trace_by_id(r, "/api/traces/", false);
}

static void h_trace_v2(struct http1_req *r)
{
    trace_by_id(r, "/api/v2/traces/", true);
}

/* start/end in Unix seconds: both or neither, end > start. 0 or -1 (msg set). */
static int time_range(const struct qhttp_params *ps, uint64_t *start_ns, uint64_t *end_ns,
                      char *msg, size_t cap)
{
    uint64_t s = 0, e = 0;
    int hs = qhttp_param_u64(ps, "start", &s);
    int he = qhttp_param_u64(ps, "end", &e);
    if (hs < 0 || he < 0) {
        snprintf(msg, cap, "invalid start or end: expected Unix seconds");
        return -1;
    }
    if (hs != he) {
        snprintf(msg, cap, "invalid start and end: give both or neither");
        return -1;
    }
    if (hs == 0) {
        *start_ns = 0;
        *end_ns = 0;
        return 0;
    }
    if (e <= s) {
        snprintf(msg, cap, "invalid start and end: end must be after start");
        return -1;
    }
    if (s > UINT32_MAX || e > UINT32_MAX) {
        snprintf(msg, cap, "invalid start or end: expected Unix seconds");
        return -1;
    }
    *start_ns = s * 1000000000u;
    *end_ns = e * 1000000000u;
    return 0;
}

/* Parses TraceQL |q| into t->expr; on error fills msg (the 400 text). */
static int parse_q(struct treq *t, const char *q, size_t n, char *msg, size_t cap)
{
    char err[256];
    if (traceql_parse(q, n, &t->expr, err, sizeof(err)) < 0) {
        snprintf(msg, cap, "invalid TraceQL query: %s", err);
        return -1;
    }
    return 0;
}

static bool blank(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\n' && s[i] != '\r') {
            return false;
        }
    }
    return true;
}

/* Appends |s| to |b| as the body of a TraceQL string literal holding a
 * regex that matches |s| literally. */
static void add_re_literal(struct evbuffer *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c != '\0' && strchr("\\.+*?()|[]{}^$", c) != NULL) {
            evbuffer_add(b, "\\\\", 2); /* regex escape, itself escaped in the string */
        }
        if (c == '"' || c == '\\') {
            evbuffer_add(b, "\\", 1);
        }
        evbuffer_add(b, &c, 1);
    }
}

/*
 * The legacy search parameters (FACTS.md D.3) as one TraceQL spanset:
 * tags "k=v k2=\"v 2\"" (logfmt) become case-insensitive substring matches
 * on the attribute (span first, then resource), minDuration/maxDuration
 * (Go durations) bounds on the span duration. Returns the query text
 * (owned, free), or NULL with msg set.
 */
static char *legacy_query(const char *tags, size_t tn, const char *minq, const char *maxq,
                          char *msg, size_t cap)
{
    struct evbuffer *b = evbuffer_new();
    if (b == NULL) {
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    int64_t mn = -1, mx = -1;
    if ((minq != NULL && qlex_parse_duration(minq, strlen(minq), false, &mn) < 0) ||
        (maxq != NULL && qlex_parse_duration(maxq, strlen(maxq), false, &mx) < 0)) {
        snprintf(msg, cap, "invalid minDuration or maxDuration: expected a duration such as 100ms");
        evbuffer_free(b);
        return NULL;
    }
    if (mn >= 0 && mx >= 0 && mn > mx) {
        snprintf(msg, cap, "invalid maxDuration: must not be less than minDuration");
        evbuffer_free(b);
        return NULL;
    }
    evbuffer_add_printf(b, "{ true");
    size_t i = 0;
    while (tags != NULL && i < tn) {
        while (i < tn && tags[i] == ' ') {
            i++;
        }
        if (i == tn) {
            break;
        }
        size_t k0 = i;
        while (i < tn && tags[i] != '=' && tags[i] != ' ') {
            i++;
        }
        size_t k1 = i;
        const char *v = "";
        size_t vn = 0;
        if (i < tn && tags[i] == '=') {
            i++;
            if (i < tn && tags[i] == '"') {
                v = tags + ++i;
                while (i < tn && tags[i] != '"') {
                    i++;
                }
                vn = (size_t)(tags + i - v);
                i += i < tn;
            } else {
                v = tags + i;
                while (i < tn && tags[i] != ' ') {
                    i++;
                }
                vn = (size_t)(tags + i - v);
            }
        }
        if (k1 == k0) {
            continue;
        }
        evbuffer_add_printf(b, " && .\"");
        for (size_t k = k0; k < k1; k++) {
            if (tags[k] == '"' || tags[k] == '\\') {
                evbuffer_add(b, "\\", 1);
            }
            evbuffer_add(b, tags + k, 1);
        }
        evbuffer_add_printf(b, "\" =~ \"(?i).*");
        add_re_literal(b, v, vn);
        evbuffer_add_printf(b, ".*\"");
    }
    if (mn >= 0) {
        evbuffer_add_printf(b, " && duration >= %lldns", (long long)mn);
    }
    if (mx >= 0) {
        evbuffer_add_printf(b, " && duration <= %lldns", (long long)mx);
    }
    evbuffer_add_printf(b, " }");
    size_t len = evbuffer_get_length(b);
    char *out = malloc(len + 1);
    if (out != NULL) {
        evbuffer_remove(b, out, len);
        out[len] = '\0';
    }
    evbuffer_free(b);
    return out;
}

static void h_search(struct http1_req *r)
{
    struct qhttp_params ps;
    char msg[400];
    struct treq *t = treq_begin(r, TK_SEARCH, QS_EP_TRACE_SEARCH, &ps);
    if (t == NULL) {
        return;
    }
    size_t qn = 0, tn = 0;
    const char *q = qhttp_param(&ps, "q", &qn);
    const char *tags = qhttp_param(&ps, "tags", &tn);
    uint64_t limit = TRACES_DEFAULT_LIMIT, spss = TRACES_DEFAULT_SPSS;
    int lr = qhttp_param_u64(&ps, "limit", &limit);
    int sr = qhttp_param_u64(&ps, "spss", &spss);
    msg[0] = '\0';
    if (q != NULL && tags != NULL && !blank(q, qn) && !blank(tags, tn)) {
        snprintf(msg, sizeof(msg), "invalid request: q and tags are mutually exclusive");
    } else if (lr < 0 || (lr > 0 && limit == 0)) {
        snprintf(msg, sizeof(msg), "invalid limit: expected a positive integer");
    } else if (sr < 0 || spss > TRACES_MAX_SPSS) {
        snprintf(msg, sizeof(msg), "invalid spss: expected an integer up to %d", TRACES_MAX_SPSS);
    } else if (time_range(&ps, &t->sreq.start_ns, &t->sreq.end_ns, msg, sizeof(msg)) == 0) {
        const char *minq = qhttp_param(&ps, "minDuration", NULL);
        const char *maxq = qhttp_param(&ps, "maxDuration", NULL);
        if (q != NULL && !blank(q, qn)) {
            parse_q(t, q, qn, msg, sizeof(msg));
        } else if ((tags != NULL && !blank(tags, tn)) || minq != NULL || maxq != NULL) {
            char *lq = legacy_query(tags, tn, minq, maxq, msg, sizeof(msg));
            if (lq != NULL) {
                parse_q(t, lq, strlen(lq), msg, sizeof(msg));
                free(lq);
            }
        }
    }
    t->sreq.limit = limit > UINT32_MAX ? UINT32_MAX : (uint32_t)limit;
    t->sreq.spss = spss == 0 ? TRACES_DEFAULT_SPSS : (uint32_t)spss;
    treq_finish(r, t, &ps, msg);
}

static unsigned scope_bits(const char *s)
{
    static const struct {
        const char *name;
        unsigned bit;
    } tab[] = {
        {"resource", TRACES_SCOPE_RESOURCE},   {"span", TRACES_SCOPE_SPAN},
        {"intrinsic", TRACES_SCOPE_INTRINSIC}, {"event", TRACES_SCOPE_EVENT},
        {"link", TRACES_SCOPE_LINK},           {"instrumentation", TRACES_SCOPE_INSTRUMENTATION},
    };
    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++) {
        if (strcmp(s, tab[i].name) == 0) {
            return tab[i].bit;
        }
    }
    return 0;
}

/* Common parameters of the tag endpoints. 0, or -1 with msg set. */
static int tags_params(struct treq *t, const struct qhttp_params *ps, bool v2, char *msg,
                       size_t cap)
{
    uint64_t limit = 0;
    if (qhttp_param_u64(ps, "limit", &limit) < 0) {
        snprintf(msg, cap, "invalid limit: expected a positive integer");
        return -1;
    }
    t->treq.limit = limit > TRACES_TAGS_MAX ? TRACES_TAGS_MAX : (uint32_t)limit;
    t->treq.v2 = v2;
    if (time_range(ps, &t->treq.start_ns, &t->treq.end_ns, msg, cap) < 0) {
        return -1;
    }
    size_t n;
    const char *scope = qhttp_param(ps, "scope", &n);
    if (scope != NULL && n > 0 && strcmp(scope, "all") != 0) {
        t->treq.scopes = scope_bits(scope);
        if (t->treq.scopes == 0) {
            snprintf(msg, cap, "invalid scope: %.64s", scope);
            return -1;
        }
    }
    const char *q = qhttp_param(ps, "q", &n);
    if (q != NULL && !blank(q, n)) {
        char ignored[8];
        /* Grafana sends partial queries while typing: an unparsable q is
         * ignored, never an error (FACTS.md D.4). */
        if (parse_q(t, q, n, ignored, sizeof(ignored)) < 0) {
            t->expr = NULL;
        }
    }
    return 0;
}

static void tags(struct http1_req *r, bool v2)
{
    struct qhttp_params ps;
    char msg[300] = "";
    struct treq *t = treq_begin(r, TK_TAGS, QS_EP_TRACE_TAGS, &ps);
    if (t == NULL) {
        return;
    }
    tags_params(t, &ps, v2, msg, sizeof(msg));
    treq_finish(r, t, &ps, msg);
}

static void h_tags_v1(struct http1_req *r)
{
    tags(r, false);
}

static void h_tags_v2(struct http1_req *r)
{
    tags(r, true);
}

static void tag_values(struct http1_req *r, const char *prefix, bool v2)
{
    const char *path = http1_req_path(r) + strlen(prefix);
    const char *slash = strstr(path, "/values");
    struct qhttp_params ps;
    char msg[300] = "";
    if (slash == NULL || strcmp(slash, "/values") != 0 || slash == path) {
        qhttp_fail(r, &tempo_dialect, QS_EP_TRACE_TAGS, -EINVAL,
                   "invalid path: expected /tag/<name>/values");
        return;
    }
    struct treq *t = treq_begin(r, TK_TAG_VALUES, QS_EP_TRACE_TAGS, &ps);
    if (t == NULL) {
        return;
    }
    if ((t->tag = strndup(path, (size_t)(slash - path))) == NULL) {
        qhttp_params_fini(&ps);
        qhttp_refuse(r, &t->q, -ENOBUFS, NULL);
        return;
    }
    /* Grafana double-encodes the name: decode until stable. */
    size_t n = (size_t)(slash - path);
    for (int i = 0; i < 4; i++) {
        size_t m = qhttp_url_decode(t->tag, n, false);
        if (m == n) {
            break;
        }
        n = m;
    }
    t->tag_len = n;
    tags_params(t, &ps, v2, msg, sizeof(msg));
    treq_finish(r, t, &ps, msg);
}

static void h_tag_values_v1(struct http1_req *r)
{
    tag_values(r, "/api/search/tag/", false);
}

static void h_tag_values_v2(struct http1_req *r)
{
    tag_values(r, "/api/v2/search/tag/", true);
}

/* ---- TraceQL metrics ---- */

/* Series per answer unless maxSeries says otherwise (Tempo's default). */
#define METRICS_MAX_SERIES 1000
/* Buckets per range query. */
#define METRICS_MAX_BUCKETS 11000
/* Exemplars per query at most, and when the request names none (Tempo's max_exemplars). */
#define METRICS_MAX_EXEMPLARS 100

/* Tempo's timestamps: Unix seconds (up to 10 digits), Unix nanoseconds,
 * fractional seconds, or RFC 3339. 0 or -1. */
static int parse_ts(const char *s, uint64_t *ns)
{
    char *end;
    if (*s == '\0') {
        return -1;
    }
    if (strchr(s, '.') != NULL && strchr(s, '-') == NULL) {
        double d = strtod(s, &end);
        if (*end != '\0' || !(d >= 0) || d > 9e9) {
            return -1;
        }
        *ns = (uint64_t)(d * 1e3 + 0.5) * 1000000u; /* Tempo rounds to milliseconds */
        return 0;
    }
    if (strspn(s, "0123456789") == strlen(s)) {
        unsigned long long v = strtoull(s, &end, 10);
        if (strlen(s) > 19) {
            return -1;
        }
        *ns = strlen(s) <= 10 ? (uint64_t)v * 1000000000u : (uint64_t)v;
        return 0;
    }
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    const char *p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (p == NULL) {
        return -1;
    }
    uint64_t frac = 0, scale = 1000000000u;
    if (*p == '.') {
        for (p++; *p >= '0' && *p <= '9'; p++) {
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
        }
    }
    long off = 0;
    if (*p == 'Z' || *p == 'z') {
        p++;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        off = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;
        off = *p == '-' ? -off : off;
        p += 6;
    } else {
        return -1;
    }
    time_t t = timegm(&tm);
    if (*p != '\0' || t < 0 || (long)t - off < 0) {
        return -1;
    }
    *ns = (uint64_t)((long)t - off) * 1000000000u + frac;
    return 0;
}

/* A step or since: seconds (a number) or a Go duration. 0 or -1. */
static int parse_secs_or_dur(const char *s, uint64_t *ns)
{
    char *end;
    double d = strtod(s, &end);
    if (*s != '\0' && *end == '\0') {
        if (!(d > 0) || d > 9.2e9) {
            return -1;
        }
        *ns = (uint64_t)(d * 1e9);
        return 0;
    }
    int64_t v;
    if (qlex_parse_duration(s, strlen(s), true, &v) < 0 || v <= 0) {
        return -1;
    }
    *ns = (uint64_t)v;
    return 0;
}

static void metrics(struct http1_req *r, bool instant)
{
    struct qhttp_params ps;
    char msg[400];
    struct treq *t = treq_begin(r, TK_METRICS, QS_EP_TRACE_METRICS, &ps);
    if (t == NULL) {
        return;
    }
    msg[0] = '\0';
    size_t qn = 0;
    const char *q = qhttp_param(&ps, "query", &qn);
    if (qhttp_param(&ps, "q", NULL) != NULL) {
        q = qhttp_param(&ps, "q", &qn);
    }
    const char *start = qhttp_param(&ps, "start", NULL);
    const char *end = qhttp_param(&ps, "end", NULL);
    const char *since = qhttp_param(&ps, "since", NULL);
    const char *step = qhttp_param(&ps, "step", NULL);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    uint64_t s_ns = 0, e_ns = now_ns, since_ns = 3600ull * 1000000000u, step_ns = 0;
    uint64_t ex = 0, maxs = METRICS_MAX_SERIES;
    if (q == NULL || blank(q, qn)) {
        snprintf(msg, sizeof(msg), "invalid TraceQL query: a metrics query is required (q)");
    } else if (since != NULL && *since != '\0' && parse_secs_or_dur(since, &since_ns) < 0) {
        snprintf(msg, sizeof(msg), "could not parse 'since' parameter: expected a duration");
    } else if (end != NULL && *end != '\0' && parse_ts(end, &e_ns) < 0) {
        snprintf(msg, sizeof(msg),
                 "could not parse 'end' parameter: expected Unix seconds, "
                 "nanoseconds or RFC 3339");
    } else if (start != NULL && *start != '\0' && parse_ts(start, &s_ns) < 0) {
        snprintf(msg, sizeof(msg),
                 "could not parse 'start' parameter: expected Unix seconds, "
                 "nanoseconds or RFC 3339");
    } else if (!instant && step != NULL && *step != '\0' && parse_secs_or_dur(step, &step_ns) < 0) {
        snprintf(msg, sizeof(msg), "invalid step: expected a positive duration or seconds");
    } else if (qhttp_param_u64(&ps, "exemplars", &ex) < 0 ||
               qhttp_param_u64(&ps, "maxSeries", &maxs) < 0) {
        snprintf(msg, sizeof(msg), "invalid exemplars or maxSeries: expected an integer");
    }
    if (msg[0] == '\0') {
        if (start == NULL || *start == '\0') {
            uint64_t base = e_ns < now_ns ? e_ns : now_ns;
            s_ns = base > since_ns ? base - since_ns : 0;
        }
        if (step_ns == 0) {
            step_ns = tqmx_default_step(s_ns, e_ns);
        }
        int rc = tqmx_range_init(&t->mreq.range, s_ns, e_ns, step_ns, instant, METRICS_MAX_BUCKETS);
        if (rc == -E2BIG) {
            snprintf(msg, sizeof(msg),
                     "invalid step: more than %d points per series; use a larger step",
                     METRICS_MAX_BUCKETS);
        } else if (rc < 0) {
            snprintf(msg, sizeof(msg), "invalid start and end: end must be after start");
        }
    }
    if (msg[0] == '\0') {
        char err[256];
        if (tqmx_parse(q, qn, &t->mexpr, err, sizeof(err)) < 0) {
            snprintf(msg, sizeof(msg), "invalid TraceQL query: %s", err);
        }
    }
    /* a with(exemplars=...) hint wins over the parameter; none or 0 means the maximum */
    int64_t hint = t->mexpr != NULL ? t->mexpr->exemplars_hint : -1;
    if (hint >= 0) {
        ex = (uint64_t)hint;
    } else if (ex == 0) {
        ex = METRICS_MAX_EXEMPLARS;
    }
    t->mreq.exemplars = ex > METRICS_MAX_EXEMPLARS ? METRICS_MAX_EXEMPLARS : (uint32_t)ex;
    t->mreq.max_series = maxs == 0           ? METRICS_MAX_SERIES
                         : maxs > UINT32_MAX ? UINT32_MAX
                                             : (uint32_t)maxs;
    treq_finish(r, t, &ps, msg);
}

static void h_metrics_range(struct http1_req *r)
{
    metrics(r, false);
}

static void h_metrics_instant(struct http1_req *r)
{
    metrics(r, true);
}

int tempo_register(const struct config *c)
{
    static const struct qhttp_route routes[] = {
        {"/api/echo", false, h_echo},
        {"/api/status/buildinfo", false, h_buildinfo},
        {"/api/traces/", true, h_trace_v1},
        {"/api/v2/traces/", true, h_trace_v2},
        {"/api/search", false, h_search},
        {"/api/search/tags", false, h_tags_v1},
        {"/api/search/tag/", true, h_tag_values_v1},
        {"/api/v2/search/tags", false, h_tags_v2},
        {"/api/v2/search/tag/", true, h_tag_values_v2},
        {"/api/metrics/query_range", false, h_metrics_range},
        {"/api/metrics/query", false, h_metrics_instant},
    };
    return qhttp_register(c, routes, sizeof(routes) / sizeof(routes[0]), false);
}
