/*
 * dump.c - the rows of a data directory, read offline (see dump.h).
 *
 * Mirrors the boot path: catalog_load (blocks and their per-shard
 * watermarks), then each shard's wal_open above its watermark with the
 * daemon's decoders (server/ingest.c replay_decode) into an open block.
 */
#include "tests/util/dump.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "opentelemetry/proto/collector/logs/v1/logs_service.pb-c.h"
#include "opentelemetry/proto/collector/metrics/v1/metrics_service.pb-c.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb-c.h"
#include "proto/jsondec.h"
#include "proto/pbdec.h"
#include "storage/arena.h"
#include "storage/block.h"
#include "storage/val.h"
#include "storage/wal.h"
#include "tests/util/tmpdir.h"

#define DUMP_MAX_SHARDS 64

struct names {
    char **v;
    size_t n, cap;
};

static int names_add(struct names *ns, const char *s)
{
    if (ns->n == ns->cap) {
        size_t cap = ns->cap ? ns->cap * 2 : 16;
        char **v = realloc(ns->v, cap * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        ns->v = v;
        ns->cap = cap;
    }
    ns->v[ns->n] = strdup(s);
    if (ns->v[ns->n] == NULL) {
        return -ENOMEM;
    }
    ns->n++;
    return 0;
}

static void names_free(struct names *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        free(ns->v[i]);
    }
    free(ns->v);
    memset(ns, 0, sizeof(*ns));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of |dir| (not "." or ".."), sorted; a missing directory is empty. */
static int list_dir(const char *dir, struct names *out, char *err, size_t errlen)
{
    DIR *dp = opendir(dir);
    if (dp == NULL) {
        if (errno == ENOENT) {
            return 0;
        }
        int rc = -errno;
        snprintf(err, errlen, "cannot read %s: %s", dir, strerror(errno));
        return rc;
    }
    struct dirent *e;
    int rc = 0;
    while (rc == 0 && (e = readdir(dp)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            rc = names_add(out, e->d_name);
        }
    }
    closedir(dp);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        return rc;
    }
    if (out->n > 1) {
        qsort(out->v, out->n, sizeof(*out->v), cmp_str);
    }
    return 0;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static int copy_file(const char *from, const char *to)
{
    size_t len;
    int rc = 0;
    int fd = open(from, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return -errno;
    }
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (out < 0) {
        rc = -errno;
        close(fd);
        return rc;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        for (len = 0; len < (size_t)n;) {
            ssize_t w = write(out, buf + len, (size_t)n - len);
            if (w < 0) {
                rc = -errno;
                goto out;
            }
            len += (size_t)w;
        }
    }
    if (n < 0) {
        rc = -errno;
    }
out:
    close(fd);
    close(out);
    return rc;
}

/* ---- rows of one source, handed out ---- */

static int emit_block(blk *b, const char *path, dump_fn fn, void *ctx, struct dump_sig_stats *st,
                      char *err, size_t errlen)
{
    enum signal s = blk_signal(b);
    unsigned want = BLK_ROOT;
    if (blk_load(b, BLK_ATTRS) == 0) {
        want |= BLK_ATTRS;
    } else {
        st->tables_bad++;
    }
    if (blk_load(b, BLK_DETAIL) == 0) {
        want |= BLK_DETAIL;
    } else {
        st->tables_bad++;
    }
    uint64_t rows = blk_rows(b);
    st->block_rows += rows;
    if (fn == NULL) {
        return 0;
    }
    struct dump_row r = {
        .sig = s,
        .shard = blk_meta(b)->shard,
        .wal_seq = blk_meta(b)->wal_seq,
        .source = path,
        .tables = want,
    };
    for (uint64_t i = 0; i < rows; i++) {
        struct log_view lv;
        struct span_view sv;
        struct point_view pv;
        int rc = s == SIG_LOGS     ? blk_log(b, i, want, &lv)
                 : s == SIG_TRACES ? blk_span(b, i, want, &sv)
                                   : blk_point(b, i, want, &pv);
        if (rc < 0) {
            snprintf(err, errlen, "%s: row %llu: %s", path, (unsigned long long)i, strerror(-rc));
            return rc;
        }
        r.log = s == SIG_LOGS ? &lv : NULL;
        r.span = s == SIG_TRACES ? &sv : NULL;
        r.point = s == SIG_METRICS ? &pv : NULL;
        rc = fn(ctx, &r);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

struct replay {
    enum signal sig;
    struct batch *batch;
    arena *arena;
    oblock *ob;
    struct dump_sig_stats *st;
    /* frame k's rows end at row ends[k].rows (the open block keeps no seqs) */
    struct frame_end {
        uint64_t rows, seq;
    } * ends;
    size_t n_ends, cap_ends;
};

/* As server/ingest.c replay_decode plus storage/shard.c replay_frame. */
static int on_frame(void *vctx, uint64_t seq, enum signal sig, enum otlp_fmt fmt, const uint8_t *p,
                    size_t n)
{
    struct replay *rp = vctx;
    char why[8];
    int rc;
    batch_reset(rp->batch, rp->sig);
    arena_reset(rp->arena);
    if (sig != rp->sig) {
        rp->st->wal_bad_frames++;
        return 0;
    }
    if (fmt == OTLP_JSON) {
        rc = jsondec_decode(sig, (const char *)p, n, rp->arena, rp->batch, why, sizeof(why));
    } else {
        rc = pbdec_decode(sig, p, n, rp->batch, why, sizeof(why));
    }
    if (rc < 0) {
        rp->st->wal_bad_frames++;
        return 0;
    }
    rc = oblock_append(rp->ob, rp->batch, seq);
    if (rc < 0) {
        return rc;
    }
    if (rp->n_ends == rp->cap_ends) {
        size_t cap = rp->cap_ends ? rp->cap_ends * 2 : 64;
        struct frame_end *v = realloc(rp->ends, cap * sizeof(*v));
        if (v == NULL) {
            return -ENOMEM;
        }
        rp->ends = v;
        rp->cap_ends = cap;
    }
    rp->ends[rp->n_ends++] = (struct frame_end){oblock_rows(rp->ob), seq};
    return 0;
}

static int emit_wal_rows(struct replay *rp, uint32_t shard, const char *dir, dump_fn fn, void *ctx,
                         char *err, size_t errlen)
{
    uint64_t rows = oblock_rows(rp->ob);
    rp->st->wal_rows += rows;
    if (fn == NULL) {
        return 0;
    }
    struct dump_row r = {
        .sig = rp->sig,
        .shard = shard,
        .from_wal = true,
        .source = dir,
        .tables = BLK_ALL,
    };
    size_t k = 0;
    for (uint64_t i = 0; i < rows; i++) {
        struct log_view lv;
        struct span_view sv;
        struct point_view pv;
        while (k < rp->n_ends && rp->ends[k].rows <= i) {
            k++;
        }
        r.wal_seq = k < rp->n_ends ? rp->ends[k].seq : 0;
        int rc = rp->sig == SIG_LOGS     ? oblock_log(rp->ob, i, &lv)
                 : rp->sig == SIG_TRACES ? oblock_span(rp->ob, i, &sv)
                                         : oblock_point(rp->ob, i, &pv);
        if (rc < 0) {
            snprintf(err, errlen, "%s: open block row %llu: %s", dir, (unsigned long long)i,
                     strerror(-rc));
            return rc;
        }
        r.log = rp->sig == SIG_LOGS ? &lv : NULL;
        r.span = rp->sig == SIG_TRACES ? &sv : NULL;
        r.point = rp->sig == SIG_METRICS ? &pv : NULL;
        rc = fn(ctx, &r);
        if (rc < 0) {
            return rc;
        }
    }
    return 0;
}

/* Replays DATA/wal/<sig>-<shard> (copied to a private directory) above |after|. */
static int dump_wal(const char *data, enum signal s, uint32_t shard, uint64_t after, dump_fn fn,
                    void *ctx, struct dump_sig_stats *st, char *err, size_t errlen)
{
    char dir[600], copy[300], from[900], to[900];
    struct names files = {0};
    struct replay rp = {.sig = s, .st = st};
    wal *w = NULL;
    int rc;

    snprintf(dir, sizeof(dir), "%s/wal/%s-%u", data, signal_name(s), shard);
    const char *tmp = getenv("TMPDIR");
    snprintf(copy, sizeof(copy), "%s/miradb-dump-XXXXXX", tmp != NULL && *tmp ? tmp : "/tmp");
    if (mkdtemp(copy) == NULL) {
        rc = -errno;
        snprintf(err, errlen, "mkdtemp %s: %s", copy, strerror(errno));
        return rc;
    }
    rc = list_dir(dir, &files, err, errlen);
    for (size_t i = 0; rc == 0 && i < files.n; i++) {
        struct stat sb;
        snprintf(from, sizeof(from), "%s/%s", dir, files.v[i]);
        snprintf(to, sizeof(to), "%s/%s", copy, files.v[i]);
        if (stat(from, &sb) == 0 && S_ISREG(sb.st_mode)) {
            rc = copy_file(from, to);
            if (rc < 0) {
                snprintf(err, errlen, "cannot copy %s: %s", from, strerror(-rc));
            }
        }
    }
    if (rc < 0) {
        goto out;
    }
    rp.batch = batch_new(s);
    rp.arena = arena_new(0);
    rc = rp.batch == NULL || rp.arena == NULL ? -ENOMEM : oblock_new(s, &rp.ob);
    if (rc < 0) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    rc = wal_open(copy, after, on_frame, &rp, &w);
    if (rc < 0) {
        snprintf(err, errlen, "%s: wal_open: %s", dir, strerror(-rc));
        goto out;
    }
    const struct wal_stats *ws = wal_stats(w);
    st->wal_frames += ws->frames_replayed;
    st->wal_skipped += ws->frames_skipped;
    st->wal_torn += ws->torn_frames;
    st->wal_bad_frames += ws->frames_undecodable; /* gzip'd frames that did not inflate */
    rc = emit_wal_rows(&rp, shard, dir, fn, ctx, err, errlen);

out:
    wal_close(w);
    oblock_free(rp.ob);
    batch_free(rp.batch);
    arena_free(rp.arena);
    free(rp.ends);
    names_free(&files);
    tmpdir_remove(copy);
    return rc;
}

/* A hot block that a cold block names as its source (a compaction that
 * died before removing its inputs): the cold block holds its rows
 * (storage/compact.h). */
static bool compacted(const blk *b, blk *const *all, size_t n)
{
    const struct blk_meta *m = blk_meta(b);
    if (blk_n_sources(b) != 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        struct blk_source src;
        for (uint32_t k = 0; blk_source(all[i], k, &src) == 0; k++) {
            if (src.shard == m->shard && src.seal_id == m->seal_id) {
                return true;
            }
        }
    }
    return false;
}

static int dump_signal(const char *data, enum signal s, dump_fn fn, void *ctx,
                       struct dump_sig_stats *st, char *err, size_t errlen)
{
    char dir[600], path[900];
    struct names files = {0}, wals = {0};
    blk **blocks = NULL;
    size_t n_blocks = 0;
    uint64_t marks[DUMP_MAX_SHARDS] = {0};
    int rc;

    snprintf(dir, sizeof(dir), "%s/%s", data, signal_name(s));
    rc = list_dir(dir, &files, err, errlen);
    if (rc < 0) {
        return rc;
    }
    blocks = calloc(files.n + 1, sizeof(*blocks));
    if (blocks == NULL) {
        snprintf(err, errlen, "out of memory");
        rc = -ENOMEM;
        goto out;
    }
    for (size_t i = 0; i < files.n; i++) {
        unsigned shard;
        if (sscanf(files.v[i], "retained-%u.seq", &shard) == 1 && !ends_with(files.v[i], ".tmp")) {
            /* what retention deleted stays deleted (storage/catalog.c) */
            unsigned long long seq = 0;
            snprintf(path, sizeof(path), "%s/%s", dir, files.v[i]);
            FILE *f = fopen(path, "r");
            if (f != NULL && fscanf(f, "%llu", &seq) == 1 && shard < DUMP_MAX_SHARDS &&
                seq > marks[shard]) {
                marks[shard] = seq;
            }
            if (f != NULL) {
                fclose(f);
            }
            continue;
        }
        if (strstr(files.v[i], ".tmp") != NULL) {
            st->tmp_files++;
            continue;
        }
        if (!ends_with(files.v[i], ".blk")) {
            continue;
        }
        char why[256];
        snprintf(path, sizeof(path), "%s/%s", dir, files.v[i]);
        if (blk_open_ex(path, BLK_OPEN_NO_CACHE, &blocks[n_blocks], why, sizeof(why)) < 0) {
            st->blocks_bad++;
            continue;
        }
        const struct blk_meta *m = blk_meta(blocks[n_blocks]);
        if (m->shard < DUMP_MAX_SHARDS && m->wal_seq > marks[m->shard]) {
            marks[m->shard] = m->wal_seq;
        }
        struct blk_source src; /* a cold block holds its sources' watermarks */
        for (uint32_t k = 0; blk_source(blocks[n_blocks], k, &src) == 0; k++) {
            if (src.shard < DUMP_MAX_SHARDS && src.wal_seq > marks[src.shard]) {
                marks[src.shard] = src.wal_seq;
            }
        }
        if (m->wal_seq > st->watermark_max) {
            st->watermark_max = m->wal_seq;
        }
        n_blocks++;
        st->blocks++;
    }
    for (size_t i = 0; i < n_blocks && rc == 0; i++) {
        if (compacted(blocks[i], blocks, n_blocks)) {
            st->compacted_inputs++; /* the daemon's boot removes it */
            continue;
        }
        rc = emit_block(blocks[i], blk_path(blocks[i]), fn, ctx, st, err, errlen);
    }
    if (rc < 0) {
        goto out;
    }

    /* WAL directories are "<signal>-<shard>", replayed in shard order. */
    snprintf(dir, sizeof(dir), "%s/wal", data);
    rc = list_dir(dir, &wals, err, errlen);
    size_t pre = strlen(signal_name(s));
    bool seen[DUMP_MAX_SHARDS] = {false};
    for (size_t i = 0; rc == 0 && i < wals.n; i++) {
        const char *nm = wals.v[i];
        char *end;
        if (strncmp(nm, signal_name(s), pre) != 0 || nm[pre] != '-') {
            continue;
        }
        long sh = strtol(nm + pre + 1, &end, 10);
        if (*end != '\0' || sh < 0 || sh >= DUMP_MAX_SHARDS) {
            continue;
        }
        seen[sh] = true;
    }
    for (uint32_t sh = 0; rc == 0 && sh < DUMP_MAX_SHARDS; sh++) {
        if (seen[sh]) {
            st->wal_shards++;
            rc = dump_wal(data, s, sh, marks[sh], fn, ctx, st, err, errlen);
        }
    }

out:
    for (size_t i = 0; i < n_blocks; i++) {
        blk_unref(blocks[i]);
    }
    free(blocks);
    names_free(&files);
    names_free(&wals);
    return rc;
}

int dump_data_dir(const char *data, dump_fn fn, void *ctx, struct dump_stats *st, char *err,
                  size_t errlen)
{
    struct dump_stats local;
    char qdir[600];
    struct names q = {0};
    if (st == NULL) {
        st = &local;
    }
    memset(st, 0, sizeof(*st));
    for (int s = SIG_LOGS; s <= SIG_METRICS; s++) {
        int rc = dump_signal(data, (enum signal)s, fn, ctx, &st->sig[s - 1], err, errlen);
        if (rc < 0) {
            return rc;
        }
    }
    snprintf(qdir, sizeof(qdir), "%s/quarantine", data);
    int rc = list_dir(qdir, &q, err, errlen);
    st->quarantined_files = q.n;
    names_free(&q);
    return rc;
}

uint64_t dump_rows(const struct dump_stats *st, enum signal s)
{
    return st->sig[s - 1].block_rows + st->sig[s - 1].wal_rows;
}

/* ---- test records ---- */

typedef Opentelemetry__Proto__Common__V1__AnyValue PAnyValue;
typedef Opentelemetry__Proto__Common__V1__KeyValue PKeyValue;
typedef Opentelemetry__Proto__Common__V1__InstrumentationScope PScope;
typedef Opentelemetry__Proto__Resource__V1__Resource PResource;
typedef Opentelemetry__Proto__Logs__V1__LogRecord PLogRecord;
typedef Opentelemetry__Proto__Logs__V1__ScopeLogs PScopeLogs;
typedef Opentelemetry__Proto__Logs__V1__ResourceLogs PResourceLogs;
typedef Opentelemetry__Proto__Collector__Logs__V1__ExportLogsServiceRequest PLogsReq;
typedef Opentelemetry__Proto__Trace__V1__Span PSpan;
typedef Opentelemetry__Proto__Trace__V1__ScopeSpans PScopeSpans;
typedef Opentelemetry__Proto__Trace__V1__ResourceSpans PResourceSpans;
typedef Opentelemetry__Proto__Collector__Trace__V1__ExportTraceServiceRequest PTraceReq;
typedef Opentelemetry__Proto__Metrics__V1__NumberDataPoint PNumberDP;
typedef Opentelemetry__Proto__Metrics__V1__Gauge PGauge;
typedef Opentelemetry__Proto__Metrics__V1__Metric PMetric;
typedef Opentelemetry__Proto__Metrics__V1__ScopeMetrics PScopeMetrics;
typedef Opentelemetry__Proto__Metrics__V1__ResourceMetrics PResourceMetrics;
typedef Opentelemetry__Proto__Collector__Metrics__V1__ExportMetricsServiceRequest PMetricsReq;

static const char trace_prefix[8] = {'M', 'i', 'r', 'a', 'T', 'e', 's', 't'};

static void be64(uint8_t *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--) {
        p[i] = (uint8_t)v;
        v >>= 8;
    }
}

static uint64_t rd_be64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) {
        v = v << 8 | p[i];
    }
    return v;
}

/* Per record: the rec.id attribute and the ids, kept alive until packed. */
struct pb_rec {
    PAnyValue av;
    PKeyValue kv;
    PKeyValue *kvp[1];
    PAnyValue body;
    char text[24];
    uint8_t trace_id[16];
    uint8_t span_id[8];
    union {
        PLogRecord log;
        PSpan span;
        PNumberDP point;
    };
};

static uint8_t *pb_request(enum signal s, uint64_t id0, uint32_t n, size_t *len)
{
    struct pb_rec *recs = calloc(n, sizeof(*recs));
    void **rows = calloc(n, sizeof(*rows));
    uint8_t *out = NULL;
    if (recs == NULL || rows == NULL) {
        goto out;
    }
    PAnyValue svc_v = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__INIT;
    svc_v.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
    svc_v.string_value = "miradb-test";
    PKeyValue svc = OPENTELEMETRY__PROTO__COMMON__V1__KEY_VALUE__INIT;
    svc.key = "service.name";
    svc.value = &svc_v;
    PKeyValue *svcp[] = {&svc};
    PResource res = OPENTELEMETRY__PROTO__RESOURCE__V1__RESOURCE__INIT;
    res.attributes = svcp;
    res.n_attributes = 1;
    PScope scope = OPENTELEMETRY__PROTO__COMMON__V1__INSTRUMENTATION_SCOPE__INIT;
    scope.name = "rec";

    for (uint32_t i = 0; i < n; i++) {
        struct pb_rec *r = &recs[i];
        uint64_t id = id0 + i;
        opentelemetry__proto__common__v1__any_value__init(&r->av);
        r->av.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_INT_VALUE;
        r->av.int_value = (int64_t)id;
        opentelemetry__proto__common__v1__key_value__init(&r->kv);
        r->kv.key = "rec.id";
        r->kv.value = &r->av;
        r->kvp[0] = &r->kv;
        if (s == SIG_LOGS) {
            snprintf(r->text, sizeof(r->text), "rec-%016llx", (unsigned long long)id);
            opentelemetry__proto__common__v1__any_value__init(&r->body);
            r->body.value_case = OPENTELEMETRY__PROTO__COMMON__V1__ANY_VALUE__VALUE_STRING_VALUE;
            r->body.string_value = r->text;
            opentelemetry__proto__logs__v1__log_record__init(&r->log);
            r->log.time_unix_nano = DUMP_T0 + id;
            r->log.observed_time_unix_nano = DUMP_T0 + id + 7;
            r->log.severity_number = 9;
            r->log.body = &r->body;
            r->log.attributes = r->kvp;
            r->log.n_attributes = 1;
            rows[i] = &r->log;
        } else if (s == SIG_TRACES) {
            memcpy(r->trace_id, trace_prefix, 8);
            be64(r->trace_id + 8, id);
            be64(r->span_id, id);
            opentelemetry__proto__trace__v1__span__init(&r->span);
            r->span.trace_id = (ProtobufCBinaryData){16, r->trace_id};
            r->span.span_id = (ProtobufCBinaryData){8, r->span_id};
            r->span.trace_state = "rec";
            r->span.name = "rec-span";
            r->span.kind = 1;
            r->span.start_time_unix_nano = DUMP_T0 + id;
            r->span.end_time_unix_nano = DUMP_T0 + id + 1000;
            r->span.attributes = r->kvp;
            r->span.n_attributes = 1;
            rows[i] = &r->span;
        } else {
            opentelemetry__proto__metrics__v1__number_data_point__init(&r->point);
            r->point.start_time_unix_nano = DUMP_T0 + id - 5;
            r->point.time_unix_nano = DUMP_T0 + id;
            r->point.value_case =
                OPENTELEMETRY__PROTO__METRICS__V1__NUMBER_DATA_POINT__VALUE_AS_INT;
            r->point.as_int = (int64_t)id;
            r->point.attributes = r->kvp;
            r->point.n_attributes = 1;
            rows[i] = &r->point;
        }
    }

    if (s == SIG_LOGS) {
        PScopeLogs sl = OPENTELEMETRY__PROTO__LOGS__V1__SCOPE_LOGS__INIT;
        sl.scope = &scope;
        sl.log_records = (PLogRecord **)rows;
        sl.n_log_records = n;
        PScopeLogs *slp[] = {&sl};
        PResourceLogs rl = OPENTELEMETRY__PROTO__LOGS__V1__RESOURCE_LOGS__INIT;
        rl.resource = &res;
        rl.scope_logs = slp;
        rl.n_scope_logs = 1;
        PResourceLogs *rlp[] = {&rl};
        PLogsReq req = OPENTELEMETRY__PROTO__COLLECTOR__LOGS__V1__EXPORT_LOGS_SERVICE_REQUEST__INIT;
        req.resource_logs = rlp;
        req.n_resource_logs = 1;
        *len =
            opentelemetry__proto__collector__logs__v1__export_logs_service_request__get_packed_size(
                &req);
        out = malloc(*len + 1);
        if (out != NULL) {
            opentelemetry__proto__collector__logs__v1__export_logs_service_request__pack(&req, out);
        }
    } else if (s == SIG_TRACES) {
        PScopeSpans ss = OPENTELEMETRY__PROTO__TRACE__V1__SCOPE_SPANS__INIT;
        ss.scope = &scope;
        ss.spans = (PSpan **)rows;
        ss.n_spans = n;
        PScopeSpans *ssp[] = {&ss};
        PResourceSpans rs = OPENTELEMETRY__PROTO__TRACE__V1__RESOURCE_SPANS__INIT;
        rs.resource = &res;
        rs.scope_spans = ssp;
        rs.n_scope_spans = 1;
        PResourceSpans *rsp[] = {&rs};
        PTraceReq req =
            OPENTELEMETRY__PROTO__COLLECTOR__TRACE__V1__EXPORT_TRACE_SERVICE_REQUEST__INIT;
        req.resource_spans = rsp;
        req.n_resource_spans = 1;
        *len =
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__get_packed_size(
                &req);
        out = malloc(*len + 1);
        if (out != NULL) {
            opentelemetry__proto__collector__trace__v1__export_trace_service_request__pack(&req,
                                                                                           out);
        }
    } else {
        PGauge g = OPENTELEMETRY__PROTO__METRICS__V1__GAUGE__INIT;
        g.data_points = (PNumberDP **)rows;
        g.n_data_points = n;
        PMetric m = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__INIT;
        m.name = "rec.gauge";
        m.data_case = OPENTELEMETRY__PROTO__METRICS__V1__METRIC__DATA_GAUGE;
        m.gauge = &g;
        PMetric *mp[] = {&m};
        PScopeMetrics sm = OPENTELEMETRY__PROTO__METRICS__V1__SCOPE_METRICS__INIT;
        sm.scope = &scope;
        sm.metrics = mp;
        sm.n_metrics = 1;
        PScopeMetrics *smp[] = {&sm};
        PResourceMetrics rm = OPENTELEMETRY__PROTO__METRICS__V1__RESOURCE_METRICS__INIT;
        rm.resource = &res;
        rm.scope_metrics = smp;
        rm.n_scope_metrics = 1;
        PResourceMetrics *rmp[] = {&rm};
        PMetricsReq req =
            OPENTELEMETRY__PROTO__COLLECTOR__METRICS__V1__EXPORT_METRICS_SERVICE_REQUEST__INIT;
        req.resource_metrics = rmp;
        req.n_resource_metrics = 1;
        *len =
            opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__get_packed_size(
                &req);
        out = malloc(*len + 1);
        if (out != NULL) {
            opentelemetry__proto__collector__metrics__v1__export_metrics_service_request__pack(&req,
                                                                                               out);
        }
    }
out:
    free(recs);
    free(rows);
    return out;
}

struct sbuf {
    char *p;
    size_t len, cap;
    bool oom;
};

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        if (b->oom) {
            return;
        }
        va_start(ap, fmt);
        int n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < b->cap - b->len) {
            b->len += (size_t)n;
            return;
        }
        size_t cap = (b->cap + (size_t)(n < 0 ? 0 : n)) * 2 + 256;
        char *p = realloc(b->p, cap);
        if (p == NULL || n < 0) {
            free(p);
            b->p = NULL;
            b->oom = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
}

static uint8_t *json_request(enum signal s, uint64_t id0, uint32_t n, size_t *len)
{
    struct sbuf b = {0};
    static const char res[] = "{\"resource\":{\"attributes\":[{\"key\":\"service.name\","
                              "\"value\":{\"stringValue\":\"miradb-test\"}}]},";
    static const char *const open[] = {
        "{\"resourceLogs\":[%s\"scopeLogs\":[{\"scope\":{\"name\":\"rec\"},\"logRecords\":[",
        "{\"resourceSpans\":[%s\"scopeSpans\":[{\"scope\":{\"name\":\"rec\"},\"spans\":[",
        "{\"resourceMetrics\":[%s\"scopeMetrics\":[{\"scope\":{\"name\":\"rec\"},\"metrics\":"
        "[{\"name\":\"rec.gauge\",\"gauge\":{\"dataPoints\":[",
    };
    sb_printf(&b, open[s - 1], res);
    for (uint32_t i = 0; i < n; i++) {
        unsigned long long id = (unsigned long long)(id0 + i);
        unsigned long long t = (unsigned long long)DUMP_T0 + id;
        const char *sep = i ? "," : "";
        if (s == SIG_LOGS) {
            sb_printf(&b,
                      "%s{\"timeUnixNano\":\"%llu\",\"observedTimeUnixNano\":\"%llu\","
                      "\"severityNumber\":9,\"body\":{\"stringValue\":\"rec-%016llx\"},"
                      "\"attributes\":[{\"key\":\"rec.id\",\"value\":{\"intValue\":\"%llu\"}}]}",
                      sep, t, t + 7, id, id);
        } else if (s == SIG_TRACES) {
            sb_printf(&b,
                      "%s{\"traceId\":\"4d69726154657374%016llx\",\"spanId\":\"%016llx\","
                      "\"traceState\":\"rec\",\"name\":\"rec-span\",\"kind\":1,"
                      "\"startTimeUnixNano\":\"%llu\",\"endTimeUnixNano\":\"%llu\","
                      "\"attributes\":[{\"key\":\"rec.id\",\"value\":{\"intValue\":\"%llu\"}}]}",
                      sep, id, id, t, t + 1000, id);
        } else {
            sb_printf(&b,
                      "%s{\"startTimeUnixNano\":\"%llu\",\"timeUnixNano\":\"%llu\","
                      "\"asInt\":\"%llu\","
                      "\"attributes\":[{\"key\":\"rec.id\",\"value\":{\"intValue\":\"%llu\"}}]}",
                      sep, t - 5, t, id, id);
        }
    }
    sb_printf(&b, s == SIG_METRICS ? "]}}]}]}]}" : "]}]}]}");
    if (b.oom) {
        return NULL;
    }
    *len = b.len;
    return (uint8_t *)b.p;
}

uint8_t *dump_request(enum signal s, bool json, uint64_t id0, uint32_t n, size_t *len)
{
    if (n == 0 || s < SIG_LOGS || s > SIG_METRICS || id0 + n > DUMP_ID_MAX) {
        return NULL;
    }
    return json ? json_request(s, id0, n, len) : pb_request(s, id0, n, len);
}

/* Fails with a reason when |ok| is false. */
static bool check(bool ok, char *why, size_t whylen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static bool check(bool ok, char *why, size_t whylen, const char *fmt, ...)
{
    if (!ok) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, whylen, fmt, ap);
        va_end(ap);
    }
    return ok;
}

/* The attributes are exactly { rec.id: id }. */
static bool attrs_ok(const struct oattrs *a, uint64_t id, char *why, size_t whylen)
{
    struct val_rd rd = {a->p, a->p + a->len};
    const char *key;
    size_t kn;
    struct val v;
    if (!check(a->count == 1, why, whylen, "%u attributes, want 1", a->count)) {
        return false;
    }
    if (!check(val_rd_kv(&rd, &key, &kn, &v) == 0 && rd.p == rd.end, why, whylen,
               "attributes do not decode")) {
        return false;
    }
    return check(kn == 6 && memcmp(key, "rec.id", 6) == 0 && v.type == VAL_INT &&
                     (uint64_t)v.i == id,
                 why, whylen, "attribute is not rec.id = %llu", (unsigned long long)id);
}

int64_t dump_row_id(const struct dump_row *r, char *why, size_t whylen)
{
    uint64_t id;
    if (r->log != NULL) {
        const struct log_view *v = r->log;
        char text[24];
        if (!check(v->body_type == VAL_STR && v->body_str.len == 20 &&
                       memcmp(v->body_str.p, "rec-", 4) == 0,
                   why, whylen, "log body is not a record id")) {
            return -1;
        }
        memcpy(text, v->body_str.p + 4, 16);
        text[16] = '\0';
        char *end;
        id = strtoull(text, &end, 16);
        if (!check(*end == '\0' && id < DUMP_ID_MAX, why, whylen, "log body is not a record id") ||
            !check(v->time_ns == DUMP_T0 + id && v->severity_number == 9, why, whylen,
                   "log %llu: time or severity differ", (unsigned long long)id)) {
            return -1;
        }
        if ((r->tables & BLK_DETAIL) &&
            !check(v->observed_ns == DUMP_T0 + id + 7, why, whylen,
                   "log %llu: observed time differs", (unsigned long long)id)) {
            return -1;
        }
        if ((r->tables & BLK_ATTRS) && !attrs_ok(&v->attrs, id, why, whylen)) {
            return -1;
        }
        return (int64_t)id;
    }
    if (r->span != NULL) {
        const struct span_view *v = r->span;
        id = rd_be64(v->span_id);
        if (!check(memcmp(v->trace_id, trace_prefix, 8) == 0 && rd_be64(v->trace_id + 8) == id &&
                       id < DUMP_ID_MAX,
                   why, whylen, "span ids are not a record id") ||
            !check(v->start_ns == DUMP_T0 + id && v->end_ns == DUMP_T0 + id + 1000 &&
                       v->name.len == 8 && memcmp(v->name.p, "rec-span", 8) == 0,
                   why, whylen, "span %llu: times or name differ", (unsigned long long)id)) {
            return -1;
        }
        if ((r->tables & BLK_DETAIL) &&
            !check(v->trace_state.len == 3 && memcmp(v->trace_state.p, "rec", 3) == 0, why, whylen,
                   "span %llu: trace_state differs", (unsigned long long)id)) {
            return -1;
        }
        if ((r->tables & BLK_ATTRS) && !attrs_ok(&v->attrs, id, why, whylen)) {
            return -1;
        }
        return (int64_t)id;
    }
    if (r->point != NULL) {
        const struct point_view *v = r->point;
        if (!check(v->value_type == PV_INT && v->value.i >= 0 && (uint64_t)v->value.i < DUMP_ID_MAX,
                   why, whylen, "point value is not a record id")) {
            return -1;
        }
        id = (uint64_t)v->value.i;
        if (!check(v->time_ns == DUMP_T0 + id && v->start_ns == DUMP_T0 + id - 5 &&
                       v->metric != NULL && v->metric->name.len == 9 &&
                       memcmp(v->metric->name.p, "rec.gauge", 9) == 0,
                   why, whylen, "point %llu: times or metric differ", (unsigned long long)id)) {
            return -1;
        }
        if ((r->tables & BLK_ATTRS) && !attrs_ok(&v->attrs, id, why, whylen)) {
            return -1;
        }
        return (int64_t)id;
    }
    check(false, why, whylen, "empty row");
    return -1;
}
