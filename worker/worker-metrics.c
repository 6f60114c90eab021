/*
 * worker-metrics.c: kiwi-worker's metric families and what feeds them (see
 * worker-metrics.h).
 */
#include "worker/worker-metrics.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "worker/metrics.h"
#include "schemas/result.h"

struct kiwi_worker_metrics {
    kiwi_metrics *reg;
    kiwi_metric *build_info, *tasks, *task_seconds, *phase_seconds, *cache_hits, *cache_misses, *sandboxes,
        *egress_checks, *egress_ok, *delivery_failures, *slots_busy, *slots_total, *redis_up;
};

static const double task_bounds[] = { 1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600 };
static const double phase_bounds[] = { 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800 };

#define KIWI__PHASE_NAME(p) #p,
static const char *const phases[] = { KIWI_METRIC_PHASES (KIWI__PHASE_NAME) };
#undef KIWI__PHASE_NAME
#define NPHASES (sizeof phases / sizeof phases[0])

void
kiwi_worker_metrics_free (kiwi_worker_metrics *wm)
{
    if (wm == NULL)
        return;
    kiwi_metrics_free (wm->reg);
    free (wm);
}

kiwi_worker_metrics *
kiwi_worker_metrics_new (const char *version, const char *worker_id, int slots, kiwi_error_t *err)
{
    kiwi_worker_metrics *wm = calloc (1, sizeof *wm);
    if (wm == NULL || (wm->reg = kiwi_metrics_new ()) == NULL) {
        free (wm);
        kiwi_error_make (err, ENOMEM, "metrics");
        return NULL;
    }
    static const struct {
        size_t field;
        kiwi_metric_type type;
        const char *name, *labels, *help;
        const double *bounds;
        size_t nbounds;
    } fams[] = {
#define F(field) offsetof (kiwi_worker_metrics, field)
        { F (build_info), KIWI_METRIC_GAUGE, "kiwi_build_info", "version,worker",
          "The worker's version and id (always 1)", NULL, 0 },
        { F (tasks), KIWI_METRIC_COUNTER, "kiwi_tasks_total", "status",
          "Tasks finished by this worker, by the status of their result", NULL, 0 },
        { F (task_seconds), KIWI_METRIC_HISTOGRAM, "kiwi_task_duration_seconds", NULL,
          "How long a finished task ran, from its start in a slot to its result", task_bounds,
          sizeof task_bounds / sizeof task_bounds[0] },
        { F (phase_seconds), KIWI_METRIC_HISTOGRAM, "kiwi_phase_duration_seconds", "phase",
          "How long one phase of a task took: checkout, install (Phase A or its cached snapshot), step0 (the "
          "first verify, install excluded), round (one Architect/Implementer round with its verify), verify (one "
          "Phase B run of the session)",
          phase_bounds, sizeof phase_bounds / sizeof phase_bounds[0] },
        { F (cache_hits), KIWI_METRIC_COUNTER, "kiwi_cache_hits_total", "kind",
          "Cache look-ups that found an entry: install (a snapshot of an identical install), verify (step 0's "
          "result on the same tree and command)",
          NULL, 0 },
        { F (cache_misses), KIWI_METRIC_COUNTER, "kiwi_cache_misses_total", "kind",
          "Cache look-ups that found none (or ran without Redis)", NULL, 0 },
        { F (sandboxes), KIWI_METRIC_COUNTER, "kiwi_sandboxes_started_total", "driver",
          "Sandboxes the task processes started, by driver", NULL, 0 },
        { F (egress_checks), KIWI_METRIC_COUNTER, "kiwi_egress_checks_total", "check,outcome",
          "Egress checks run, by check and outcome (pass, fail)", NULL, 0 },
        { F (egress_ok), KIWI_METRIC_GAUGE, "kiwi_egress_check_ok", "check",
          "The last outcome of each egress check: 1 passed, 0 failed", NULL, 0 },
        { F (delivery_failures), KIWI_METRIC_COUNTER, "kiwi_kafka_delivery_failures_total", "topic",
          "Messages Kafka did not take: refused by the producer or reported failed by the broker", NULL, 0 },
        { F (slots_busy), KIWI_METRIC_GAUGE, "kiwi_slots_busy", NULL, "Slots running a task", NULL, 0 },
        { F (slots_total), KIWI_METRIC_GAUGE, "kiwi_slots", NULL, "Slots of this worker (KIWI_SLOTS)", NULL,
          0 },
        { F (redis_up), KIWI_METRIC_GAUGE, "kiwi_redis_up", NULL,
          "1 when Redis is connected and authenticated, 0 when tasks run uncached and without leases", NULL, 0 },
#undef F
    };
    for (size_t i = 0; i < sizeof fams / sizeof fams[0]; i++) {
        kiwi_metric *f = kiwi_metrics_register (wm->reg, fams[i].type, fams[i].name, fams[i].help, fams[i].labels,
                                                fams[i].bounds, fams[i].nbounds, err);
        if (f == NULL) {
            kiwi_worker_metrics_free (wm);
            return NULL;
        }
        *(kiwi_metric **) ((char *) wm + fams[i].field) = f;
    }
    /* every series a dashboard expects is there from the start, at 0 */
    const char *info[] = { version, worker_id };
    kiwi_metric_set (wm->build_info, info, 1, NULL);
    for (int s = KIWI_RESULT_UNSET + 1; s < KIWI_RESULT__END; s++) {
        const char *v[] = { kiwi_result_status_name ((kiwi_result_status) s) };
        kiwi_metric_touch (wm->tasks, v, NULL);
    }
    kiwi_metric_touch (wm->task_seconds, NULL, NULL);
    for (size_t i = 0; i < NPHASES; i++)
        kiwi_metric_touch (wm->phase_seconds, &phases[i], NULL);
    static const char *const kinds[] = { "install", "verify" };
    for (size_t i = 0; i < 2; i++) {
        kiwi_metric_touch (wm->cache_hits, &kinds[i], NULL);
        kiwi_metric_touch (wm->cache_misses, &kinds[i], NULL);
    }
    kiwi_worker_metrics_state (wm, 0, slots, false);
    return wm;
}

char *
kiwi_worker_metrics_render (kiwi_worker_metrics *wm, size_t *len)
{
    return wm ? kiwi_metrics_render (wm->reg, len) : NULL;
}

static char *
render_cb (void *ud, size_t *len)
{
    return kiwi_worker_metrics_render (ud, len);
}

kiwi_metrics_server *
kiwi_worker_metrics_serve (kiwi_worker_metrics *wm, const char *addr, kiwi_error_t *err)
{
    return kiwi_metrics_server_start (addr, render_cb, wm, err);
}

/* Updates that cannot fail but for a full registry or no memory: logged,
 * never fatal. */
static void
checked (int rc, kiwi_error_t *err)
{
    if (rc < 0)
        kiwi_debug ("metrics: %s", kiwi_error_msg (*err));
    kiwi_error_free (err);
}

int
kiwi_worker_metrics_result (kiwi_worker_metrics *wm, const char *buf, size_t len, kiwi_error_t *err)
{
    if (wm == NULL)
        return 0;
    kiwi_result r;
    if (kiwi_result_decode (buf, len, &r, err) < 0)
        return -1;
    const char *status[] = { kiwi_result_status_name (r.status) };
    kiwi_error_t e = NULL;
    checked (kiwi_metric_add (wm->tasks, status, 1, &e), &e);
    checked (kiwi_metric_observe (wm->task_seconds, NULL, (double) r.duration_ms / 1000.0, &e), &e);
    kiwi_result_clear (&r);
    return 0;
}

void
kiwi_worker_metrics_cache (kiwi_worker_metrics *wm, const char *kind, bool hit)
{
    if (wm == NULL)
        return;
    kiwi_error_t e = NULL;
    checked (kiwi_metric_add (hit ? wm->cache_hits : wm->cache_misses, &kind, 1, &e), &e);
}

/* A driver's name as a label: 1..32 bytes of [a-z0-9_-]. */
static bool
plain_word (const char *s)
{
    size_t n = strlen (s);
    return n > 0 && n <= 32 && strspn (s, "abcdefghijklmnopqrstuvwxyz0123456789_-") == n;
}

int
kiwi_worker_metrics_observation (kiwi_worker_metrics *wm, const char *body, size_t len, kiwi_error_t *err)
{
    char line[128], what[16], label[40];
    if (len >= sizeof line)
        return kiwi_error_make (err, 0, "observation of %zu bytes: too long", len);
    memcpy (line, body, len);
    line[len] = '\0';
    double v;
    int used = 0;
    if (sscanf (line, "%15s %39s %lf%n", what, label, &v, &used) != 3 || line[used] != '\0' || !isfinite (v)
        || v < 0)
        return kiwi_error_make (err, 0, "observation `%s`: not `WHAT LABEL VALUE`", line);
    if (wm == NULL)
        return 0;
    const char *values[] = { label };
    if (strcmp (what, KIWI_OBS_PHASE) == 0) {
        for (size_t i = 0; i < NPHASES; i++)
            if (strcmp (label, phases[i]) == 0)
                return kiwi_metric_observe (wm->phase_seconds, values, v, err);
        return kiwi_error_make (err, 0, "observation `%s`: no such phase", line);
    }
    if (strcmp (what, KIWI_OBS_SANDBOX) == 0 && plain_word (label))
        return kiwi_metric_add (wm->sandboxes, values, v, err);
    return kiwi_error_make (err, 0, "observation `%s`: unknown", line);
}

void
kiwi_worker_metrics_egress (kiwi_worker_metrics *wm, const char *check, bool ok)
{
    if (wm == NULL || check == NULL)
        return;
    const char *v[] = { check, ok ? "pass" : "fail" };
    kiwi_error_t e = NULL;
    checked (kiwi_metric_add (wm->egress_checks, v, 1, &e), &e);
    checked (kiwi_metric_set (wm->egress_ok, v, ok ? 1 : 0, &e), &e);
}

void
kiwi_worker_metrics_delivery_failed (kiwi_worker_metrics *wm, const char *topic)
{
    if (wm == NULL)
        return;
    kiwi_error_t e = NULL;
    checked (kiwi_metric_add (wm->delivery_failures, &topic, 1, &e), &e);
}

void
kiwi_worker_metrics_state (kiwi_worker_metrics *wm, int slots_busy, int slots_total, bool redis_up)
{
    if (wm == NULL)
        return;
    kiwi_metric_set (wm->slots_busy, NULL, slots_busy, NULL);
    kiwi_metric_set (wm->slots_total, NULL, slots_total, NULL);
    kiwi_metric_set (wm->redis_up, NULL, redis_up ? 1 : 0, NULL);
}
