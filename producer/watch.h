/*
 * watch.h: following a batch of tasks (`kiwi batch --wait`, `kiwi watch`):
 * the batch's task ids and how far each got, the counts by result status,
 * the rate and the estimate of the time left, the results file, and the
 * two renderings a user sees (the progress line and the outcome table).
 *
 * Everything here is pure bookkeeping over what the caller hands in
 * (cmd-watch.c reads the topics): a task id set with open addressing, so a
 * batch of 10,000 tasks costs O(1) per message, never a scan.
 *
 * The results file holds one JSON line per task of the batch (the Result as
 * `kiwi tail results` prints it). Opening it reads what an earlier watch
 * wrote: those tasks count as done and are never written twice, so a watch
 * that was interrupted and started again loses nothing and repeats nothing.
 * A last line cut short (the process was killed mid-write) is dropped.
 *
 * Ownership: a kiwi_watch owns its ids, its strings and the results file;
 * kiwi_watch_clear() releases them all.
 */
#ifndef KIWI_PRODUCER_WATCH_H
#define KIWI_PRODUCER_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "schemas/result.h"

#define KIWI_BATCH_ID_MAX 128

/* Checks a batch id: 1..128 bytes of [A-Za-z0-9._:-] (schemas/task.md).
 * Returns 0, or < 0 with *err (code KIWI_WIRE_EINVALID). */
int kiwi_batch_id_check (const char *id, kiwi_error_t *err);

/* A new batch id: "batch-<UTC time to the ms>-<8 hex digits>", e.g.
 * batch-20261201T195000.123Z-9f3a0c51. `buf` holds at least 64 bytes. */
int kiwi_batch_id_new (char *buf, size_t cap, kiwi_error_t *err);

/* The time written in an id made by kiwi ("kiwi-20261129T221422.123Z-...",
 * "batch-20261201T195000.123Z-..."), in ms since the epoch; -1 when the id
 * does not carry one (it was chosen by someone else). */
int64_t kiwi_id_time_ms (const char *id);

/* Parses a time for --since: ms since the epoch (digits), or UTC ISO 8601
 * "2026-12-01T19:50:00Z" / "2026-12-01T19:50:00.123Z" / "20261201T195000Z".
 * Returns 0 and sets *out, or < 0. */
int kiwi_time_parse (const char *s, int64_t *out);

/* Formats ms since the epoch as "2026-12-01T19:50:00.123Z" (buf >= 32). */
char *kiwi_time_format (int64_t ms, char *buf, size_t cap);

/* How far a task of the batch got. */
typedef enum {
    KIWI_WATCH_SUBMITTED = 0, /* on the tasks topic, nothing heard since */
    KIWI_WATCH_RUNNING,       /* a worker took it (progress events), no result yet */
    KIWI_WATCH_DONE,          /* its result was recorded */
} kiwi_watch_state;

/* Results per minute over a sliding window of their finished_at times. */
#define KIWI_RATE_BUCKETS 60
#define KIWI_RATE_BUCKET_MS 10000 /* 60 x 10 s: a ten-minute window */
typedef struct kiwi_rate {
    int64_t bucket_at[KIWI_RATE_BUCKETS]; /* which 10 s slot each counts (finished_at / BUCKET_MS) */
    uint32_t count[KIWI_RATE_BUCKETS];
} kiwi_rate;

void kiwi_rate_add (kiwi_rate *r, int64_t finished_at_ms);

/* Results per minute in the window ending at now_ms, which starts no earlier
 * than since_ms (the batch's submission; < 0: no bound). 0 when nothing
 * finished in it. */
double kiwi_rate_per_min (const kiwi_rate *r, int64_t now_ms, int64_t since_ms);

/* Seconds left for `remaining` tasks at `per_min` tasks a minute, rounded
 * up; -1 when unknown (rate 0 with tasks left); 0 when nothing is left. */
int64_t kiwi_eta_seconds (uint64_t remaining, double per_min);

/* "42s", "12m05s", "3h28m", "2d04h"; "--" for a negative value. */
char *kiwi_duration_format (int64_t seconds, char *buf, size_t cap);

typedef struct kiwi__watch_task kiwi__watch_task;

typedef struct kiwi_watch {
    char *batch_id;
    int64_t submitted_at; /* ms since the epoch; < 0 unknown */
    /* the batch's tasks: open addressing on the id */
    kiwi__watch_task *tasks;
    size_t cap, n_tasks;
    uint64_t total;    /* tasks in the batch, when known (total_final) */
    bool total_final;  /* false: the total is the tasks seen so far */
    uint64_t done, running;
    uint64_t by_status[KIWI_RESULT__END];
    uint64_t from_file; /* of done: read back from the results file */
    kiwi_rate rate;
    FILE *results;     /* the results file, appended to; NULL: none */
    char *results_path;
} kiwi_watch;

/* Sets up an empty watch of batch_id (copied). */
int kiwi_watch_init (kiwi_watch *w, const char *batch_id, int64_t submitted_at, kiwi_error_t *err);
void kiwi_watch_clear (kiwi_watch *w);

/* Adds a task id of the batch. Returns 1 when it is new, 0 when known,
 * < 0 with *err (out of memory). */
int kiwi_watch_add (kiwi_watch *w, const char *id, size_t len, kiwi_error_t *err);

/* The state of a task of the batch, or -1 when the id is not one of it. */
int kiwi_watch_state_of (const kiwi_watch *w, const char *id, size_t len);

/* A progress event of task `id`: a submitted task of the batch becomes
 * running. Returns true when the state changed. */
bool kiwi_watch_progress (kiwi_watch *w, const char *id, size_t len);

/* Records the result of a task of the batch: counts it, adds it to the rate
 * and appends `json` (one line, without its newline) to the results file.
 * The first result of a task wins. Returns 1 when recorded, 0 when the task
 * is not of the batch or already done, < 0 with *err (the file could not be
 * written). */
int kiwi_watch_result (kiwi_watch *w, const kiwi_result *r, const char *json, kiwi_error_t *err);

/* Opens (creating it when absent) the results file at `path` for appending,
 * after reading the lines it already holds: each names a task (task_id) and
 * its status; those tasks are added to the batch as done. A cut-short last
 * line is removed from the file; other lines that are not a result are
 * skipped with a warning. Returns the number of results read, or < 0. */
long kiwi_watch_open_results (kiwi_watch *w, const char *path, kiwi_error_t *err);

/* The total the progress line uses: the final total, else the tasks seen. */
uint64_t kiwi_watch_total (const kiwi_watch *w);

/* True when the total is final and every task of it has a result. */
bool kiwi_watch_complete (const kiwi_watch *w);

/* The progress line, without newline:
 *   batch-...: 1234/10000 done (12.3%) | running 16 | 42.0/min | ETA 3h28m | fixed 800, not_fixed 300
 * A total that is not final is written "1234/2000+" (more may come). With
 * `tty`, it is prefixed with "\r\033[K" (back to the start of the line,
 * clear it) and cut to width - 1 columns (width 0: no cut) so it never
 * wraps; without, it is prefixed with the UTC time and ends in '\n'.
 * Returns a malloc'd string, or NULL when out of memory. */
char *kiwi_watch_line (const kiwi_watch *w, int64_t now_ms, bool tty, unsigned width);

/* Prints the outcome table: one row per result status (every status of
 * result.h, zeros included) with its count and share of the results, then
 * the rows "done", "running", "waiting" (not taken yet) and "total". */
void kiwi_watch_table (const kiwi_watch *w, FILE *out);

#endif
