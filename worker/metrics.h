/*
 * metrics.h: a registry of counters, gauges and histograms, rendered in
 * the Prometheus text exposition format (version 0.0.4).
 *
 * A family (kiwi_metric) has a name, a help line, a type and the names of
 * its labels; each combination of label values is one series, made on its
 * first use (or beforehand with kiwi_metric_touch, so that a series shows
 * as 0 before anything happened). Histograms have fixed upper bounds; the
 * text shows cumulative _bucket lines (le="+Inf" last), _sum and _count.
 *
 * Hand-written: Debian 12 ships no C client library for Prometheus (the
 * format is a few lines of text; libprom is not packaged).
 *
 * Threads: every call may come from any thread; one mutex per registry
 * guards all of it (updates come from the daemon's loop, rendering from
 * the HTTP server's thread).
 *
 * Ownership: the registry owns its families (freed with it); a kiwi_metric
 * pointer stays valid until kiwi_metrics_free. Strings passed in are
 * copied.
 */
#ifndef KIWI_WORKER_METRICS_H
#define KIWI_WORKER_METRICS_H

#include <stddef.h>

#include "common/error.h"

typedef enum { KIWI_METRIC_COUNTER, KIWI_METRIC_GAUGE, KIWI_METRIC_HISTOGRAM } kiwi_metric_type;

typedef struct kiwi_metrics kiwi_metrics;
typedef struct kiwi_metric kiwi_metric;

/* Series per family at most: a label value that would make more is
 * refused (an unbounded label would exhaust the worker and the server). */
#define KIWI_METRIC_MAX_SERIES 512

/* A new, empty registry, or NULL (out of memory). */
kiwi_metrics *kiwi_metrics_new (void);
void kiwi_metrics_free (kiwi_metrics *m);

/* Registers a family. `labels`: the label names, comma-separated ("status",
 * "check,outcome"), or NULL / "" for none. `bounds` (histograms only): the
 * upper bounds of the buckets, strictly increasing and finite, `nbounds` of
 * them (+Inf is implied). Returns NULL with *err on a name that is not a
 * metric name, a label name that is not one (or is reserved: `le` for a
 * histogram, a leading `__`), a name already registered, bad bounds. */
kiwi_metric *kiwi_metrics_register (kiwi_metrics *m, kiwi_metric_type type, const char *name, const char *help,
                                    const char *labels, const double *bounds, size_t nbounds, kiwi_error_t *err);

/* The label values of one series are given as an array of as many strings
 * as the family has labels (NULL when it has none); any byte string is a
 * value (escaped when rendered).
 *
 * Each returns < 0 with *err (err may be NULL) on a wrong kind of update
 * (inc on a histogram, a negative or NaN counter increment), too many
 * series, or no memory; the registry is unchanged then. */

/* Counter or gauge: adds `v` (a counter takes v >= 0 only). */
int kiwi_metric_add (kiwi_metric *f, const char *const *values, double v, kiwi_error_t *err);
/* Gauge: sets the value. */
int kiwi_metric_set (kiwi_metric *f, const char *const *values, double v, kiwi_error_t *err);
/* Histogram: one observation. */
int kiwi_metric_observe (kiwi_metric *f, const char *const *values, double v, kiwi_error_t *err);
/* Makes the series if it does not exist yet (value 0, empty buckets). */
int kiwi_metric_touch (kiwi_metric *f, const char *const *values, kiwi_error_t *err);

/* The whole registry in the text format: families in the order they were
 * registered, each with its # HELP and # TYPE lines, then its series in
 * the order they were made. Returns a NUL-terminated string the caller
 * frees (its length in *len when len is not NULL), or NULL (no memory). */
char *kiwi_metrics_render (kiwi_metrics *m, size_t *len);

/* The content type of kiwi_metrics_render's text. */
#define KIWI_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

#endif
