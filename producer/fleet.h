/*
 * fleet.h: the fleet as its heartbeats tell it (`kiwi fleet`): each
 * worker's last heartbeat, whether it is up, degraded or gone, its slots,
 * tasks per minute, cache hit rate and egress checks, rendered as a table
 * for a terminal and as one JSON document for scripts.
 *
 * A worker is gone when its last heartbeat is older than the gone-after
 * time: the setting when it is given (> 0), else three times the interval
 * seen between its last two heartbeats (heartbeats do not carry their
 * interval), else 30 s until two were seen.
 *
 * Ownership: a kiwi_fleet owns its workers and their heartbeats;
 * kiwi_fleet_clear() frees them.
 */
#ifndef KIWI_PRODUCER_FLEET_H
#define KIWI_PRODUCER_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "producer/readers.h"
#include "schemas/heartbeat.h"

#define KIWI_FLEET_GONE_DEFAULT_MS 30000

typedef struct kiwi_fleet_worker {
    kiwi_heartbeat hb;     /* the newest heartbeat */
    int64_t interval_ms;   /* between its last two heartbeats; 0: one seen */
    int64_t first_ts;      /* the oldest heartbeat read, with its counter: */
    uint64_t first_done;   /*   tasks per minute is measured from it */
} kiwi_fleet_worker;

typedef struct kiwi_fleet {
    kiwi_fleet_worker *workers; /* sorted by worker id */
    size_t n, cap;
    int64_t gone_after_ms;      /* > 0: fixed; 0: from the heartbeat interval */
} kiwi_fleet;

void kiwi_fleet_init (kiwi_fleet *f, int64_t gone_after_ms);
void kiwi_fleet_clear (kiwi_fleet *f);

/* Takes a heartbeat (its contents are moved into the fleet and *hb is left
 * initialised). An older heartbeat than the one held is dropped. Returns 0,
 * or < 0 with *err (out of memory). */
int kiwi_fleet_update (kiwi_fleet *f, kiwi_heartbeat *hb, kiwi_error_t *err);

/* How long after its last heartbeat worker w counts as gone, in ms. */
int64_t kiwi_fleet_gone_after (const kiwi_fleet *f, const kiwi_fleet_worker *w);

/* "up", "degraded" or "gone" at now_ms. */
const char *kiwi_fleet_state (const kiwi_fleet *f, const kiwi_fleet_worker *w, int64_t now_ms);

/* Tasks finished per minute by w (from its oldest to its newest heartbeat
 * read); 0 with a single heartbeat. */
double kiwi_fleet_tasks_per_min (const kiwi_fleet_worker *w);

/* The table, lines ending in '\n': a summary line (workers up, degraded,
 * gone; slots busy of total over the workers not gone; tasks per minute;
 * cache hit rate), a header, then one row per worker with its state,
 * slots, counters, tasks per minute, cache hit rate, Redis, age of its last
 * heartbeat and each egress check ("name ok" or "name FAIL"), and under a
 * degraded worker's row its reason, under a failed check its detail (each
 * as kiwi_fleet_oneline renders it). Rows
 * are cut to `width` columns (0: no cut). Returns a malloc'd string, or
 * NULL when out of memory. */
char *kiwi_fleet_table (const kiwi_fleet *f, int64_t now_ms, unsigned width);

/* `text` (a worker's reason or a check's detail) on one line a terminal
 * shows as it is: each run of line breaks between lines becomes "; " (at
 * either end it is dropped), a tab a space, any other control character
 * \xNN. Returns a malloc'd string, or NULL when out of memory. */
char *kiwi_fleet_oneline (const char *text);

/* One JSON document (no newline): {"ts", "workers": [{"worker_id", "state",
 * "age_ms", "gone_after_ms", "tasks_per_min", "cache_hit_rate" (null when no
 * lookups), "heartbeat": {the heartbeat as kiwi tail prints it}}], "summary":
 * {"up", "degraded", "gone", "slots_busy", "slots_total", "tasks_per_min"}}.
 * Returns a malloc'd string, or NULL with *err. */
char *kiwi_fleet_json (const kiwi_fleet *f, int64_t now_ms, kiwi_error_t *err);

/* Why no task moves, as far as the heartbeats tell (kiwi wait, watch and
 * batch --wait say it when nothing moved for a while): *out is NULL when a
 * worker is up; else a malloc'd line: no heartbeat on `topic` at all (read
 * back `window_ms`), no worker up (every one seen is gone, named), or every
 * worker not gone degraded (each named with its reason, on one line). It
 * holds no age, so it changes only when the diagnosis does. Returns 0, or
 * < 0 with *err (out of memory). */
int kiwi_fleet_diagnose (const kiwi_fleet *f, int64_t now_ms, const char *topic, int64_t window_ms, char **out,
                         kiwi_error_t *err);

/* Why no task moves although a worker is up (kiwi_fleet_diagnose said
 * nothing), from the broker's consumer groups (readers.h): *out is NULL
 * when a group has a member on `tasks_topic` (r->members > 0) or no worker
 * is up; else a malloc'd line: the groups with members that are still
 * rebalancing (named), or that no group reads tasks_topic although workers
 * are up on `hb_topic` (named): they consume another tasks topic. Like
 * kiwi_fleet_diagnose, it holds no age. Returns 0, or < 0 with *err. */
int kiwi_fleet_diagnose_readers (const kiwi_fleet *f, int64_t now_ms, const char *hb_topic, const char *tasks_topic,
                                 const kiwi_topic_readers *r, char **out, kiwi_error_t *err);

#endif
