/*
 * log.h: one line per event on stderr:
 *   2026-11-29T22:14:22.123Z kiwi-worker[1234] warn: message
 * The threshold is info until the program sets it (kiwi_log_set_level, from
 * its log.level setting, KIWI_LOG_LEVEL). Safe to call before init.
 *
 * Every line is masked (mask.h) with the process's mask, the one piece of
 * process-wide masking state: the daemon sets it to the worker's own keys
 * and token, a task process to its task's secrets. Everything else that
 * masks is given its mask explicitly.
 */
#ifndef KIWI_COMMON_LOG_H
#define KIWI_COMMON_LOG_H

#include "common/error.h"
#include "common/mask.h"

typedef enum { KIWI_LOG_DEBUG, KIWI_LOG_INFO, KIWI_LOG_WARN, KIWI_LOG_ERROR } kiwi_log_level;

/* Sets the program name shown in each line. */
void kiwi_log_init (const char *program);

/* Parses "debug", "info", "warn" or "error". Returns < 0 on anything else. */
int kiwi_log_level_parse (const char *s, kiwi_log_level *out);

void kiwi_log_set_level (kiwi_log_level level);

/* The mask applied to every line from now on (NULL: none); borrowed, it
 * must outlive its use. Returns the mask it replaces, so a caller can put
 * it back. Set it before starting threads that log. */
const kiwi_mask *kiwi_log_set_mask (const kiwi_mask *m);

void kiwi_log (kiwi_log_level level, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

#define kiwi_debug(...) kiwi_log (KIWI_LOG_DEBUG, __VA_ARGS__)
#define kiwi_info(...) kiwi_log (KIWI_LOG_INFO, __VA_ARGS__)
#define kiwi_warn(...) kiwi_log (KIWI_LOG_WARN, __VA_ARGS__)
#define kiwi_errorf(...) kiwi_log (KIWI_LOG_ERROR, __VA_ARGS__)

#endif
