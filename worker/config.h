/*
 * config.h: kiwi-worker's settings: its rows of the one settings table
 * (common/settings.h, rows in common/settings-rows.def), loaded from the
 * default, the config file (--config FILE or KIWI_CONFIG), the environment
 * and flags. A bad value is an error naming the key, where it came from and
 * what is accepted.
 *
 * Ownership: kiwi_worker_config owns its strings; kiwi_worker_config_clear()
 * frees them.
 */
#ifndef KIWI_WORKER_CONFIG_H
#define KIWI_WORKER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/error.h"
#include "common/settings.h"
#include "common/strv.h"

typedef kiwi_settings kiwi_worker_config;

/* The defaults, worker.id the host name, and sandbox.cpus 0 resolved
 * (kiwi_worker_auto_cpus). */
void kiwi_worker_config_init (kiwi_worker_config *c);
void kiwi_worker_config_clear (kiwi_worker_config *c);

/* sandbox.cpus when it is 0 (its default): KIWI_WORKER_AUTO_CPUS, or the
 * host's `online` CPUs when they are fewer (Docker refuses a quota above
 * them); 1 when `online` is unknown (< 1). Timing-sensitive suites fail
 * with one core where two pass. */
#define KIWI_WORKER_AUTO_CPUS 2
int64_t kiwi_worker_auto_cpus (long online);

/* The path of a script installed with kiwi-worker: `path` when given
 * (a setting), else NAME in ../libexec/kiwi beside the running binary
 * (`cmake --install` puts ops/egress's scripts there, and the build tree
 * has them in the same place). Returns buf, or NULL when the binary's own
 * path cannot be read. */
const char *kiwi_worker_libexec (const char *path, const char *name, char *buf, size_t cap);

/* Loads *c (cleared first) from all sources: the config file is `file`, or
 * --config, or $KIWI_CONFIG, or none; `envp` is the environment; flags are
 * argv[from..argc) ("--key=value" or "--key value"; a bool flag alone is
 * true; single-dash spellings like -sandbox-runtime are accepted too).
 * Unknown flags are errors. *rest_index receives the index of the first
 * non-flag argument (or argc). Then worker.id defaults to the host name,
 * sandbox.cpus 0 to kiwi_worker_auto_cpus of the host's online CPUs,
 * the egress scripts to kiwi_worker_libexec's, and gc.disk_low must be
 * below gc.disk_high. */
int kiwi_worker_config_load (kiwi_worker_config *c, const char *file, const char *const *envp, int argc,
                             char **argv, int from, int *rest_index, kiwi_error_t *err);

/* Sets one key (by config-file key, environment name or flag name) from a
 * string, as a source named `origin` ("flag", "environment", "FILE:LINE"). */
int kiwi_worker_config_set (kiwi_worker_config *c, const char *name, const char *value, const char *origin,
                            kiwi_error_t *err);

/* The librdkafka properties for every Kafka client of the worker, in the
 * order to apply them: the config file's kafka.property.* keys, then
 * KIWI_KAFKA_PROPERTIES. Appended to *pairs (name, value, ...). */
int kiwi_worker_config_kafka_props (const kiwi_worker_config *c, kiwi_strv *pairs, kiwi_error_t *err);

/* --help-config: every setting of kiwi-worker. */
void kiwi_worker_config_help (FILE *out);

/* --print-config: the effective configuration (secrets never printed). */
void kiwi_worker_config_dump (const kiwi_worker_config *c, FILE *out);

#endif
