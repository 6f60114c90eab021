/*
 * worker-metrics.h: what kiwi-worker counts for Prometheus, and from what.
 *
 * The families (every name starts with kiwi_; docs/operations.md says what
 * each means):
 *   kiwi_build_info{version,worker}                 gauge, 1
 *   kiwi_tasks_total{status}                        counter: results, by status
 *   kiwi_task_duration_seconds                      histogram: a task's run, as its result says
 *   kiwi_phase_duration_seconds{phase}              histogram: checkout, install, step0, round, verify
 *   kiwi_cache_hits_total{kind}                     counter: install (snapshot), verify (step 0's cache)
 *   kiwi_cache_misses_total{kind}                   counter
 *   kiwi_sandboxes_started_total{driver}            counter
 *   kiwi_egress_checks_total{check,outcome}         counter: pass, fail
 *   kiwi_egress_check_ok{check}                     gauge: the last outcome, 1 or 0
 *   kiwi_kafka_delivery_failures_total{topic}       counter
 *   kiwi_slots_busy, kiwi_slots               gauges
 *   kiwi_redis_up                                   gauge, 1 or 0
 *
 * The daemon feeds what it sees itself (results, the cache flags in the
 * progress events, egress checks, delivery reports, its slots and Redis);
 * the task process measures the rest (phase durations, sandboxes) and sends
 * each measurement as an observation frame (events.h,
 * kiwi_events_observe), which kiwi_worker_metrics_observation takes.
 *
 * Every function may be called from the daemon's loop while the HTTP
 * server's thread renders (metrics.h locks). NULL `wm` is a no-op
 * everywhere, so a caller need not check.
 *
 * Ownership: kiwi_worker_metrics_new returns an object the caller frees
 * with kiwi_worker_metrics_free.
 */
#ifndef KIWI_WORKER_WORKER_METRICS_H
#define KIWI_WORKER_WORKER_METRICS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "worker/metrics-http.h"

typedef struct kiwi_worker_metrics kiwi_worker_metrics;

/* The phases of kiwi_phase_duration_seconds, from one X-macro. */
#define KIWI_METRIC_PHASES(X) X (checkout) X (install) X (step0) X (round) X (verify)

/* Observations (the body of a task process's observation frame):
 *   "phase NAME SECONDS"    NAME one of KIWI_METRIC_PHASES
 *   "sandbox DRIVER COUNT"  DRIVER a driver's name, COUNT >= 0 */
#define KIWI_OBS_PHASE "phase"
#define KIWI_OBS_SANDBOX "sandbox"

kiwi_worker_metrics *kiwi_worker_metrics_new (const char *version, const char *worker_id, int slots,
                                              kiwi_error_t *err);
void kiwi_worker_metrics_free (kiwi_worker_metrics *wm);

/* The text format (metrics.h); caller frees. */
char *kiwi_worker_metrics_render (kiwi_worker_metrics *wm, size_t *len);

/* Serves the text at http://ADDR/metrics from a thread of its own
 * (metrics-http.h); stopped with kiwi_metrics_server_stop before `wm` is
 * freed. NULL with *err when it cannot listen there. */
kiwi_metrics_server *kiwi_worker_metrics_serve (kiwi_worker_metrics *wm, const char *addr, kiwi_error_t *err);

/* A result the daemon publishes (an encoded kiwi_result): its status
 * counted, its duration observed. Returns < 0 if it does not decode. */
int kiwi_worker_metrics_result (kiwi_worker_metrics *wm, const char *buf, size_t len, kiwi_error_t *err);

/* A cache look-up: kind "install" or "verify". */
void kiwi_worker_metrics_cache (kiwi_worker_metrics *wm, const char *kind, bool hit);

/* One observation from a task process (see above); < 0 with *err when it is
 * not one (the frame is then ignored: nothing counted). */
int kiwi_worker_metrics_observation (kiwi_worker_metrics *wm, const char *body, size_t len, kiwi_error_t *err);

void kiwi_worker_metrics_egress (kiwi_worker_metrics *wm, const char *check, bool ok);
void kiwi_worker_metrics_delivery_failed (kiwi_worker_metrics *wm, const char *topic);
void kiwi_worker_metrics_state (kiwi_worker_metrics *wm, int slots_busy, int slots_total, bool redis_up);

#endif
