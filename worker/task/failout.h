/*
 * failout.h: a test run's output as a model needs it.
 *
 * kiwi_failout_clean() drops what a terminal would interpret and a model
 * would read as noise: ANSI escape sequences (CSI `ESC [ ... final`, OSC
 * `ESC ] ... BEL` or `ESC ] ... ESC \`, and two-byte `ESC x`), and the
 * progress a carriage return overwrites (of a line's `\r`-separated parts
 * only the last non-empty one is kept; `\r\n` is a line end).
 *
 * kiwi_failout_fit() cleans, then fits the output into `budget` bytes by one
 * rule (docs/session.md, "What the models are shown of a test run"):
 *   1. the output's last lines, up to a third of the budget (the summary);
 *   2. before them, each line holding a failure marker (FAIL, Error, ERROR, ✖, ✗,
 *      ●, panicked, Traceback, not ok, Exception) with the
 *      KIWI_FAILOUT_AFTER lines after it, the earliest first, while the
 *      budget lasts;
 *   3. what the budget still holds goes to more of the last lines.
 * The lines kept stay in their order; each run of lines left out becomes
 * one line `[... N lines of passing output left out]`. A line longer than
 * what is left is cut to its end. Output within the budget is only
 * cleaned.
 */
#ifndef KIWI_WORKER_TASK_FAILOUT_H
#define KIWI_WORKER_TASK_FAILOUT_H

#include <stddef.h>

#define KIWI_FAILOUT_AFTER 20 /* lines kept after a failure marker's line */

/* `text` without escape sequences and overwritten progress. New string
 * (NULL text gives ""), NULL when out of memory. */
char *kiwi_failout_clean (const char *text);

/* The last `max` bytes of `text` cleaned (from a character's first byte),
 * for an event's output_tail: what a dashboard shows, like what a model
 * reads, holds no escape sequence. *cut (optional) gets the cleaned bytes
 * left out before it. New string, NULL when out of memory. */
char *kiwi_failout_clean_tail (const char *text, size_t max, size_t *cut);

/* `text` cleaned and fitted into about `budget` bytes (the markers added
 * for left-out lines count too). New string, NULL when out of memory. */
char *kiwi_failout_fit (const char *text, size_t budget);

#endif
