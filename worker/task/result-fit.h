/*
 * result-fit.h: a Result that fits the results topic (schemas/result.md,
 * "A result too large for the topic").
 *
 *   kiwi_result_fit      a result over KIWI_RESULT_MAX_BYTES: the whole
 *                        diff kept elsewhere (the caller's `keep`), the
 *                        result carrying the diff's first whole lines that
 *                        fit, with diff_truncated, diff_bytes, diff_sha256,
 *                        diff_location, and a reason saying so
 *   kiwi_result_minimal  the result the broker refused as too large: the
 *                        same task, status, counters and times, the diff
 *                        and the reason left out; a few hundred bytes
 *                        whatever the task printed or changed
 *
 * Both work on encoded results (as the task process sends them) and return
 * a new encoding that the caller owns.
 */
#ifndef KIWI_WORKER_RESULT_FIT_H
#define KIWI_WORKER_RESULT_FIT_H

#include <stddef.h>

#include "common/error.h"
#include "schemas/result.h"

/* Keeps the whole diff of task `task_id` (`len` bytes) and writes where it
 * went into loc ("redis:<key> file://<host><path>", space-separated; empty
 * when it could be kept nowhere). */
typedef void (*kiwi_diff_keep_fn) (const char *task_id, const char *diff, size_t len, char *loc, size_t cap,
                                   void *userdata);

/* Returns 0 and leaves *out NULL when `in` fits within `max` bytes; 1 with
 * the fitted encoding in *out; < 0 when `in` cannot be decoded. */
int kiwi_result_fit (const char *in, size_t in_len, size_t max, kiwi_diff_keep_fn keep, void *userdata, char **out,
                     size_t *out_len, kiwi_error_t *err);

/* The minimal result for `in`, which the broker refused at `refused_len`
 * bytes. A diff not kept yet is kept with `keep`. */
int kiwi_result_minimal (const char *in, size_t in_len, size_t refused_len, kiwi_diff_keep_fn keep, void *userdata,
                         char **out, size_t *out_len, kiwi_error_t *err);

/* A diff longer than `max_diff` (KIWI_RESULT_DIFF_MAX: the most a Result
 * may carry) is written to <state_dir>/results/<task>.diff and r keeps its
 * first whole lines within max_diff, with diff_truncated, diff_bytes,
 * diff_sha256 and diff_location (file://<host><path>). Returns 1 when it
 * cut, 0 when the diff fits, < 0 when the file cannot be written (r then
 * holds no diff: its status becomes error, naming why). */
int kiwi_result_keep_oversized (kiwi_result *r, const char *state_dir, size_t max_diff, kiwi_error_t *err);

/* Writes the whole diff to <state_dir>/results/<task_id>.diff (through a
 * .partial file, renamed when complete) and its path into path. */
int kiwi_diff_keep_file (const char *state_dir, const char *task_id, const char *diff, size_t len, char *path,
                         size_t cap, kiwi_error_t *err);

#endif
