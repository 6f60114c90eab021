/*
 * test_schemas_samples.h: sample messages shared by the schema suites and
 * the cross-implementation tool (tests/schemas/crossimpl/wire-tool.c). The values
 * are mirrored, independently, in tests/schemas/crossimpl/crossimpl.py; change both
 * together.
 */
#ifndef KIWI_TEST_SCHEMAS_SAMPLES_H
#define KIWI_TEST_SCHEMAS_SAMPLES_H

#include <stddef.h>

#include "schemas/deadletter.h"
#include "schemas/heartbeat.h"
#include "schemas/progress.h"
#include "schemas/result.h"
#include "schemas/task.h"

/* Samples. Each fills an initialised struct with owned values; the caller
 * clears it. The values are mirrored in tests/schemas/crossimpl/crossimpl.py. */
void sample_task_full (kiwi_task *t);
void sample_task_min (kiwi_task *t);
void sample_progress_full (kiwi_progress *p);
void sample_progress_min (kiwi_progress *p);
void sample_result_fixed (kiwi_result *r);
void sample_result_not_fixed (kiwi_result *r);
void sample_heartbeat_full (kiwi_heartbeat *h);
void sample_heartbeat_min (kiwi_heartbeat *h);
void sample_deadletter_full (kiwi_deadletter *d);
void sample_deadletter_min (kiwi_deadletter *d);

/* The encoded payload map of sample_progress_full (malloc'd). */
char *sample_payload (size_t *len);

/* strdup that aborts on failure, and a string of n copies of c. */
char *xstrdup (const char *s);
char *repeat (char c, size_t n);

#endif
