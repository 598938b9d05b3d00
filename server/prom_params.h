/*
 * prom_params.h - the parameter values of the Prometheus HTTP API
 * (server/prom.c), read as Prometheus 2.42's web/api/v1 reads them
 * (PROMQL.md A.2): timestamps, durations, label names, integers, and the
 * Go-style quoting its error messages use.
 *
 * Times are kept as Go's time.Time would hold them (seconds and
 * nanoseconds), because the API compares and subtracts them at that
 * precision (end < start, the 11,000-point limit) before it truncates
 * them to milliseconds for the engine.
 *
 * Threads: pure functions.
 */
#ifndef MIRADB_PROM_PARAMS_H
#define MIRADB_PROM_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A point in time: Unix seconds and 0 <= nsec < 1e9. */
struct prom_time {
    int64_t sec;
    int32_t nsec;
};

/* The default start / end of the metadata endpoints (Prometheus's
 * minTime / maxTime, as timestamp.FromTime gives them in ms). */
#define PROM_MIN_TIME_MS (-9223309901258974000LL)
#define PROM_MAX_TIME_MS 9223309901257974999LL

/*
 * Prometheus parseTime: a Go float ("1700000000", "1.5", "1e9"; the
 * fraction rounded to ms), else RFC3339 with optional fraction
 * ("2015-07-01T20:10:51.781Z", offsets allowed), else one of the two
 * formatted min/max sentinels. 0 and *out, or -EINVAL.
 */
int prom_parse_time(const char *s, size_t n, struct prom_time *out);

/* timestamp.FromTime: milliseconds, truncated. Saturates at int64. */
int64_t prom_time_ms(const struct prom_time *t);

/* time.Time Sub in nanoseconds, saturating at the int64 range as Go does. */
int64_t prom_time_sub_ns(const struct prom_time *a, const struct prom_time *b);

/* a before b (time.Time Before). */
bool prom_time_before(const struct prom_time *a, const struct prom_time *b);

/* The time |ms| milliseconds after the epoch. */
struct prom_time prom_time_of_ms(int64_t ms);

/*
 * Prometheus parseDuration: a Go float of seconds ("15", "0.5"), else a
 * Prometheus duration ("1m30s"). 0 and *ns; else -EINVAL and the message
 * Prometheus gives (`cannot parse "1.5s" to a valid duration`, or `... It
 * overflows int64`) in err.
 */
int prom_parse_duration(const char *s, size_t n, int64_t *ns, char *err, size_t errlen);

/* model.LabelNameRE: [a-zA-Z_][a-zA-Z0-9_]* */
bool prom_label_name_valid(const char *s, size_t n);

/* strconv.Atoi: optional sign, decimal digits, within int64. 0 or -EINVAL. */
int prom_parse_int(const char *s, size_t n, int64_t *out);

/*
 * Go's %q of |s| (strconv.Quote): double quotes, \" \\ \a \b \f \n \r \t
 * \v, other control bytes and invalid UTF-8 as \xNN, valid UTF-8 as is.
 * Writes at most cap bytes (NUL-terminated when cap > 0); returns the full
 * length like snprintf.
 */
size_t prom_go_quote(const char *s, size_t n, char *out, size_t cap);

/* A float64 as Go's encoding/json writes it (the scalar and string result
 * timestamps): shortest digits, 'f' form, 'e' form below 1e-6 or from
 * 1e21 ("1e-07" becomes "1e-7"). |out| holds 352 bytes (PROMNAME_FMT_MAX).
 * Returns the length. */
size_t prom_fmt_json_float(double v, char *out);

#endif
