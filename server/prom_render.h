/*
 * prom_render.h - the JSON the Prometheus HTTP API answers with, byte for
 * byte as Prometheus 2.42 writes it (web/api/v1/api.go with jsoniter's
 * ConfigCompatibleWithStandardLibrary, util/jsonutil; PROMQL.md 0.8, A.3):
 *
 *   {"status":"success","data":<data>[,"warnings":[...]]}
 *   {"status":"error","errorType":"<type>","error":"<msg>"}
 *
 * Strings are escaped as Go's encoding/json does (<, > and & as \u003c...,
 * invalid UTF-8 as U+FFFD): the writer passed in must have w->html set
 * (prom_jsonw_init does). Label sets are objects in label order (sorted
 * by name, as Go writes a map). Sample timestamps in vectors, matrices
 * and exemplars are seconds with no fraction or exactly three digits
 * (jsonutil.MarshalTimestamp: 1435781451.781, 1435781451, 1.500); scalar
 * and string results use Go's float printing instead (1.1). Values are
 * strings (promname_fmt_value; a scalar's value in 'f' form).
 *
 * Threads: any; one writer per thread.
 */
#ifndef MIRADB_PROM_RENDER_H
#define MIRADB_PROM_RENDER_H

#include <stddef.h>
#include <stdint.h>

#include "lib/jsonw.h"
#include "query/pmeval.h"
#include "query/pmodel.h"
#include "query/pmsrc.h"

struct evbuffer;

/* jsonw_init with Go's HTML escaping on. */
void prom_jsonw_init(struct jsonw *w, struct evbuffer *out);

/* {"status":"error","errorType":..,"error":..} */
void prom_render_error(struct evbuffer *out, const char *type, const char *msg);

/* The envelope around a success: prom_render_begin writes
 * {"status":"success","data": and the caller writes the data;
 * prom_render_end adds "warnings" (the |n| strings, omitted when n == 0)
 * and closes the object. */
void prom_render_begin(struct jsonw *w);
void prom_render_end(struct jsonw *w, const char *const *warnings, size_t n);

/* {"resultType":..,"result":..} of a query result. */
void prom_render_result(struct jsonw *w, const struct pm_result *r);

/* Pieces (also for the tests). */
void prom_render_labels(struct jsonw *w, const struct pm_labels *ls);
void prom_render_ts(struct jsonw *w, int64_t ms);  /* MarshalTimestamp */
void prom_render_value(struct jsonw *w, double v); /* MarshalValue */
void prom_render_hist(struct jsonw *w, const struct pm_hist *h);
/* [{"seriesLabels":{..},"exemplars":[{"labels":{..},"value":"..","timestamp":..}]}] */
void prom_render_exemplars(struct jsonw *w, const struct pm_exemplar_series *es, size_t n);

/* The upper bound of positive bucket |idx| in |schema| (Prometheus's
 * histogram.getBound, through pm_hist_bounds). */
double prom_hist_bound(int32_t idx, int32_t schema);

#endif
