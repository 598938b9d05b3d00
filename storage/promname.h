/*
 * promname.h - OTLP metric points as Prometheus series: metric and label
 * names, label values, job/instance/target_info, the classic series a
 * histogram or summary point becomes, and Go's float formatting.
 *
 * Pure functions over caller-provided buffers: nothing here allocates, logs
 * or keeps state between calls, so any thread may call anything. The
 * sealer's series dictionary and the metric ingest path call it (issue 11);
 * the Prometheus API uses the formatters.
 *
 * WHICH PROMETHEUS (../shared/query/PROMQL.md section C)
 * We follow Prometheus' own OTLP receiver on main (storage/remote/
 * otlptranslator/prometheusremotewrite) with the otlptranslator v1.0.0 it
 * vendors, in its default configuration:
 *   translation_strategy              UnderscoreEscapingWithSuffixes
 *   label_name_underscore_sanitization       true   ("_x" -> "key_x")
 *   label_name_preserve_multiple_underscores true   ("a..b" -> "a__b")
 *   promote_resource_attributes  none; promote_scope_metadata  false
 *   keep_identifying_resource_attributes false; target_info enabled
 * Prometheus 2.42 (what the differential suite runs) has no OTLP receiver at
 * all; the first one (2.47) differed: its name tokeniser kept Unicode
 * letters and split on ':', and label names kept Unicode letters and never
 * got the "key" prefix for a leading '_'. We do not follow 2.47. Where the
 * OTel specification differs from the receiver (it collapses "__" in label
 * names, it adds otel_scope_name/version by default, it wants _created
 * series), we follow the receiver, as the issue says.
 *
 * Attribute values become label values as pdata's Value.AsString renders
 * them (pdata v1.63, what Prometheus main uses): strings as they are, ints
 * decimal, bools true/false, doubles as ES6 numbers (encoding/json's float
 * form: 'f' unless the magnitude is below 1e-6 or from 1e21, then 'e' with
 * no exponent padding, "1e-7", "1e+21"; NaN and infinities render as
 * "json: unsupported value: NaN" / "+Inf" / "-Inf"), bytes as standard
 * base64, arrays and maps as compact JSON (map keys sorted bytewise, the last
 * of duplicate keys wins, no HTML escaping, invalid UTF-8 as \ufffd, a NaN or
 * infinity anywhere inside makes the whole value ""), empty as "". A label
 * whose value is "" is absent.
 */
#ifndef MIRADB_PROMNAME_H
#define MIRADB_PROMNAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/batch.h"
#include "storage/val.h"

/* ---- floats ---- */

/* Bytes any of the formatters below may write, the NUL included. */
#define PROMNAME_FMT_MAX 352

/* The staleness marker Prometheus writes (value.StaleNaN). */
#define PROMNAME_STALE_NAN_BITS 0x7ff0000000000002ULL
double promname_stale_nan(void);
bool promname_is_stale_nan(double v);

/* Go strconv.FormatFloat(v, 'f', -1, 64): the shortest digits that read
 * back as |v|, in fixed notation ("1", "0.005", "1000000000000000000000",
 * "-0", "NaN", "+Inf", "-Inf"). This is how `le`, `quantile` and
 * count_values labels are written. Returns the length written to |out|
 * (NUL-terminated). */
size_t promname_fmt_le(double v, char out[PROMNAME_FMT_MAX]);

/* A sample value as the Prometheus HTTP API writes it (jsonutil): the
 * shortest digits, 'f' form unless 0 < |v| < 1e-6 or |v| >= 1e21, then Go's
 * 'e' form ("1e-07", "1e+21", "1.5e-300"); "NaN", "+Inf", "-Inf", "-0". */
size_t promname_fmt_value(double v, char out[PROMNAME_FMT_MAX]);

/* A double attribute as pdata AsString renders it (see the file comment). */
size_t promname_fmt_attr_double(double v, char out[PROMNAME_FMT_MAX]);

/* Go strconv.FormatFloat(v, 'e', -1, 64): "1e+21", "1.25e-07", "0e+00". */
size_t promname_fmt_e(double v, char out[PROMNAME_FMT_MAX]);

/* ---- metric kinds ---- */

enum promname_type {
    PROMNAME_GAUGE = 1,
    PROMNAME_COUNTER = 2,          /* monotonic sum */
    PROMNAME_NONMONOTONIC_SUM = 3, /* a gauge to PromQL, named as one */
    PROMNAME_HISTOGRAM = 4,
    PROMNAME_EXP_HISTOGRAM = 5,
    PROMNAME_SUMMARY = 6,
};

/* The naming type of a Metric; a monotonic sum is a counter whatever its
 * temporality. -EINVAL for MK_NONE (a Metric with no data). */
int promname_type_of(enum metric_kind kind, bool monotonic);

enum promname_temporality {
    PROMNAME_T_NONE = 0,       /* gauge, summary: no temporality */
    PROMNAME_T_CUMULATIVE = 1, /* written as is */
    PROMNAME_T_DELTA = 2,   /* Prometheus refuses these by default; the caller converts or counts */
    PROMNAME_T_INVALID = 3, /* UNSPECIFIED or unknown on a sum/histogram: Prometheus refuses it */
};
enum promname_temporality promname_temporality(enum metric_kind kind, int32_t temporality);

/* The metadata TYPE: "gauge", "counter", "histogram" (also exponential),
 * "summary"; "unknown" for any delta. A non-monotonic sum is "gauge". */
const char *promname_meta_type(enum promname_type t, enum promname_temporality tp);

/* ---- names ---- */

/*
 * The Prometheus metric name of an OTLP metric (PROMQL.md C.1): the name
 * split into tokens on every byte outside [A-Za-z0-9:]; the unit's main part
 * (before the first '/') and "per_" part appended unless already a token;
 * counters end in "total", gauges with unit exactly "1" in "ratio" (the
 * token removed elsewhere); a leading digit gets "_". Histograms and
 * summaries get their _bucket/_sum/_count from promname_expand_next().
 * Writes the name NUL-terminated to |out|; returns its length, -EINVAL when
 * the result is empty or all underscores (Prometheus rejects the metric),
 * -ENOBUFS unless |cap| >= len + ulen + 32 (checked up front).
 */
int promname_metric(const char *name, size_t len, const char *unit, size_t ulen,
                    enum promname_type t, char *out, size_t cap);

/* The metadata UNIT of an OTLP unit ("s" -> "seconds", "By/s" ->
 * "bytes_per_second", "1" and "{req}" -> ""). Same returns as above (never
 * -EINVAL; -ENOBUFS unless cap >= ulen + 32). */
int promname_unit(const char *unit, size_t ulen, char *out, size_t cap);

/*
 * The label name of an attribute key (PROMQL.md C.2): every character (UTF-8
 * rune, or byte of invalid UTF-8) outside [A-Za-z0-9] becomes one '_', runs
 * kept; a leading digit gets "key_", a single leading '_' gets "key". Returns
 * the length written NUL-terminated to |out|, -EINVAL for an empty key or
 * one that becomes only underscores ("__", ".."; Prometheus then fails the
 * point's metric), -ENOBUFS (len + 5 suffices).
 */
int promname_label_name(const char *key, size_t len, char *out, size_t cap);

/* An attribute value as its label value (file comment). Returns the length
 * written to |out| (not NUL-terminated; 0 = the label is absent), -ENOBUFS,
 * or -EBADMSG for a malformed encoding. |out| also serves as sort scratch
 * for maps, so a map may need more room than its rendering. */
int promname_label_value(const struct val *v, char *out, size_t cap);

/* ---- label sets ---- */

/* One label. Both strings are borrowed: they point into the attribute
 * blob, into the set's byte buffer, or at what the caller passed to
 * promname_lset_set(); valid while those are. */
struct promname_label {
    const char *name;
    const char *value;
    uint32_t name_len;
    uint32_t value_len;
    const char *key; /* the attribute key it came from; NULL if set by name */
    uint32_t key_len;
};

/*
 * A label set kept sorted by name (bytewise, as Prometheus sorts labels),
 * over caller-provided arrays: |lab| (cap entries) and |buf| (bytes for
 * sanitised names, rendered values and joined values). A full array or
 * buffer makes a call return -ENOBUFS and leaves the set unusable until
 * reset. Owned by one thread.
 */
struct promname_lset {
    struct promname_label *lab;
    uint32_t n, cap;
    char *buf;
    size_t len, buf_cap;
};

void promname_lset_init(struct promname_lset *ls, struct promname_label *lab, uint32_t cap,
                        char *buf, size_t buf_cap);
void promname_lset_reset(struct promname_lset *ls);
/* The label named |name|, or NULL. */
const struct promname_label *promname_lset_get(const struct promname_lset *ls, const char *name,
                                               size_t nlen);
/* Sets (replaces) a label; an empty value removes it (labels.Builder.Set).
 * |name| and |value| are borrowed, not copied. 0 or -ENOBUFS. */
int promname_lset_set(struct promname_lset *ls, const char *name, size_t nlen, const char *value,
                      size_t vlen);

/* Which attributes promname_lset_add_attrs() leaves out. */
#define PROMNAME_SKIP_NAME 1u        /* "__name__" (data points) */
#define PROMNAME_SKIP_IDENTIFYING 2u /* service.name/.namespace/.instance.id (target_info) */

/*
 * Adds the labels of an attribute list (|count| kv in |p|, val.h) to an
 * EMPTY set: names sanitised, values rendered, empty values absent; keys
 * that sanitise to the same name have their values joined with ';' in
 * bytewise order of the original keys (as Prometheus folds them: leading
 * empty values are skipped, later ones kept, "a;" / "a;;b"). 0, -EINVAL (a
 * key Prometheus refuses, see promname_label_name, or a set not empty),
 * -ENOBUFS, -EBADMSG.
 */
int promname_lset_add_attrs(struct promname_lset *ls, const uint8_t *p, size_t n, uint32_t count,
                            unsigned skip);

/* What a resource contributes (PROMQL.md C.3). */
struct promname_resource {
    const char *job; /* namespace "/" name, or name; NULL = no job label */
    uint32_t job_len;
    const char *instance; /* service.instance.id; NULL = none */
    uint32_t instance_len;
    uint32_t n_other; /* attributes besides the identifying three (empty ones counted) */
};

/* Reads job/instance from a resource's attributes (the first occurrence of
 * each key; non-string values rendered). Strings point into the blob or
 * into |buf|. A value rendering as "" gives no label (an empty name with a
 * namespace still gives "ns/"). 0, -ENOBUFS, -EBADMSG. */
int promname_resource_init(struct promname_resource *r, const uint8_t *p, size_t n, uint32_t count,
                           char *buf, size_t cap);

/* Sets job and instance on a set built by promname_lset_add_attrs(); they
 * replace attributes of those names. 0 or -ENOBUFS. */
int promname_lset_add_resource(struct promname_lset *ls, const struct promname_resource *r);

/*
 * Builds the target_info series of a resource into the empty |ls|: every
 * resource attribute but the identifying three, plus job/instance and
 * __name__="target_info". Returns 1 when the series exists, 0 when
 * Prometheus writes none (no attribute besides the identifying ones, or
 * neither job nor instance), or the errors of promname_lset_add_attrs().
 * The caller writes it (value 1) only for a ResourceMetrics with points.
 */
int promname_target_info(struct promname_lset *ls, const uint8_t *p, size_t n, uint32_t count,
                         const struct promname_resource *r);

/*
 * Scope labels: only with Prometheus' promote_scope_metadata (off by
 * default, so the default path never calls this). Builds into the empty
 * |scope_ls| what a scope adds: otel_scope_<attr> per scope attribute (the
 * last of equal names wins), otel_scope_name, otel_scope_version,
 * otel_scope_schema_url; an entry with an empty value there means "remove"
 * when merged. Returns 0 with an empty set for a scope without a name.
 * Apply it with promname_lset_merge(). 0, -EINVAL, -ENOBUFS, -EBADMSG.
 */
int promname_scope_labels(struct promname_lset *scope_ls, const struct scope_row *s,
                          const uint8_t *attrs, size_t attrs_len);
/* promname_lset_set() of every label of |from| into |ls|. */
int promname_lset_merge(struct promname_lset *ls, const struct promname_lset *from);

/* ---- points ---- */

/* Milliseconds as Prometheus computes them: int64(ns) / 1e6, truncated. */
int64_t promname_ts_ms(uint64_t time_ns);

/* The OTLP DataPointFlags bit that makes every sample of a point the
 * staleness marker (PROMQL.md C.7). */
#define PROMNAME_FLAG_NO_RECORDED_VALUE 1u

enum promname_suffix {
    PROMNAME_SFX_NONE = 0,
    PROMNAME_SFX_BUCKET = 1,
    PROMNAME_SFX_SUM = 2,
    PROMNAME_SFX_COUNT = 3,
};

/* One sample a point produces: series = metric name + |suffix|, the point's
 * labels, plus |extra_name|=|extra| when extra_name is not NULL. */
struct promname_sample {
    enum promname_suffix suffix;
    const char *suffix_str; /* "", "_bucket", "_sum", "_count" */
    uint32_t suffix_len;
    const char *extra_name; /* "le", "quantile" or NULL */
    uint32_t extra_len;
    char extra[PROMNAME_FMT_MAX];
    double value;
};

/* Iterator over the samples of one gauge, sum, histogram or summary point,
 * in the receiver's order. Borrows the point's detail blob. */
struct promname_expand {
    enum metric_kind kind;
    uint32_t state;
    uint32_t i, n;
    struct val_rd counts, bounds, quantiles;
    uint64_t cum;
    uint64_t count;
    double sum, number;
    bool has_sum, stale;
};

/*
 * Starts the expansion of |pt| of a metric of |kind|; |detail| is the
 * point's detail blob (batch.h) of |len| bytes. Samples:
 *   gauge, sum  one, value as_double or (double)as_int (0 when neither, as
 *               Prometheus writes it)
 *   histogram   _sum (only when has_sum), _count, then _bucket{le=bound_i}
 *               with the running sum of bucket_counts[0..i] for i below
 *               min(bounds, counts), then _bucket{le="+Inf"} = count
 *   summary     _sum, _count, then {quantile=q} per quantile
 * With NO_RECORDED_VALUE every value is the staleness marker. No _created.
 * -EINVAL for an exponential histogram (a native histogram, not classic
 * series) or MK_NONE, -EBADMSG for a malformed detail blob.
 */
int promname_expand_init(struct promname_expand *x, enum metric_kind kind,
                         const struct point_row *pt, const uint8_t *detail, size_t len);
/* 1 with |out| filled, 0 when done. */
int promname_expand_next(struct promname_expand *x, struct promname_sample *out);

#endif
