/*
 * settings.h: every setting of the kiwi command in one table.
 *
 * Each entry names its config-file key, environment variable and flag, its
 * type (which brings the validator and the "accepted" text used in errors),
 * its default and a help line. Sources, lowest first:
 *
 *   1. the default;
 *   2. the stack env file (KEY=VALUE lines written by ops/stack.sh):
 *      $KIWI_STACK_ENV, else <state_dir>/stack.env; a setting is taken from
 *      it when its environment variable is one of the file's keys
 *      (KIWI_KAFKA_BROKERS); a missing file is no error;
 *   3. the config file (--config FILE or KIWI_CONFIG; "key = value" lines,
 *      '#' comments), which may be shared with kiwi-worker: keys this table
 *      does not know are ignored;
 *   4. the environment;
 *   5. flags.
 *
 * Only the winning value is validated; a bad one is an error naming the
 * key, where the value came from and what is accepted.
 *
 * Ownership: kiwi_cli_settings owns its strings; kiwi_cli_settings_clear()
 * frees them.
 */
#ifndef KIWI_PRODUCER_SETTINGS_H
#define KIWI_PRODUCER_SETTINGS_H

#include <stdint.h>
#include <stdio.h>

#include "defaults.h"
#include "error.h"
#include "strv.h"

#define KIWI_CI_GOAL_DEFAULT "CI run {name} failed on {sha}: make it pass"

/* The table. Columns: ID, struct field and config-file key, environment
 * variable, flag (without "--", or NULL: no flag), type, default, minimum and
 * maximum (numbers only), help. */
#define KIWI_CLI_SETTINGS(X)                                                                                  \
    X (CONFIG, config, "KIWI_CONFIG", "config", PATH, "", 0, 0,                                               \
       "configuration file of key = value lines (empty: none)")                                              \
    X (STATE_DIR, state_dir, "KIWI_STATE_DIR", "state-dir", PATH, KIWI_STATE_DIR_DEFAULT, 0, 0,               \
       "state directory of the stack; its stack.env supplies the broker address")                            \
    X (STACK_ENV, stack_env, "KIWI_STACK_ENV", "stack-env", PATH, "", 0, 0,                                   \
       "stack env file (empty: <state_dir>/stack.env)")                                                      \
    X (BROKERS, brokers, "KIWI_KAFKA_BROKERS", "brokers", BROKERS, KIWI_BROKERS_DEFAULT, 0, 0,                \
       "Kafka bootstrap brokers")                                                                            \
    X (KAFKA_PROPERTIES, kafka_properties, "KIWI_KAFKA_PROPERTIES", "kafka-properties", SECRET, "", 0, 0,     \
       "librdkafka properties name=value,... for every Kafka client (SASL, TLS; `\\,` for a comma in a "     \
       "value), applied after the config file's kafka.property.NAME = VALUE keys")                           \
    X (TOPIC_TASKS, topic_tasks, "KIWI_TOPIC_TASKS", "tasks-topic", TOPIC, KIWI_TOPIC_TASKS_DEFAULT, 0, 0,    \
       "topic of tasks (key: repository URL)")                                                               \
    X (TOPIC_PROGRESS, topic_progress, "KIWI_TOPIC_PROGRESS", "progress-topic", TOPIC,                        \
       KIWI_TOPIC_PROGRESS_DEFAULT, 0, 0, "topic of progress events (key: task id)")                         \
    X (TOPIC_RESULTS, topic_results, "KIWI_TOPIC_RESULTS", "results-topic", TOPIC, KIWI_TOPIC_RESULTS_DEFAULT, \
       0, 0, "topic of results (key: task id)")                                                              \
    X (TOPIC_HEARTBEATS, topic_heartbeats, "KIWI_TOPIC_HEARTBEATS", "heartbeats-topic", TOPIC,                \
       KIWI_TOPIC_HEARTBEATS_DEFAULT, 0, 0, "topic of worker heartbeats (key: worker id)")                   \
    X (TOPIC_DLQ, topic_dlq, "KIWI_TOPIC_DLQ", "dlq-topic", TOPIC, KIWI_TOPIC_DLQ_DEFAULT, 0, 0,              \
       "dead-letter topic")                                                                                  \
    X (DELIVERY_TIMEOUT, delivery_timeout, "KIWI_DELIVERY_TIMEOUT", "delivery-timeout", SECONDS, "30", 1,     \
       86400, "seconds a produced task may take to be acknowledged by the broker (kiwi-worker: 300)")        \
    X (CI_TEST_COMMAND, ci_test_command, "KIWI_CI_TEST_COMMAND", NULL, TEXT, "", 0, 0,                        \
       "test command of tasks made from CI events (ci-event --test overrides)")                              \
    X (CI_GOAL, ci_goal, "KIWI_CI_GOAL", NULL, TEMPLATE, KIWI_CI_GOAL_DEFAULT, 0, 0,                          \
       "goal of tasks made from CI events; {name} {sha} {branch} {url} {repo} {event} are replaced")         \
    X (CI_WEBHOOK_SECRET, ci_webhook_secret, "KIWI_CI_WEBHOOK_SECRET", NULL, SECRET, "", 0, 0,                \
       "GitHub webhook secret for ci-event --listen (empty: it needs --insecure-no-secret)")                 \
    X (CI_MAX_BODY, ci_max_body, "KIWI_CI_MAX_BODY", "max-body", BYTES, "26214400", 1024, 1073741824,         \
       "largest webhook body ci-event --listen accepts, bytes")                                              \
    X (LOG_LEVEL, log_level, "KIWI_LOG_LEVEL", "log-level", LOGLEVEL, "info", 0, 0,                           \
       "threshold of log lines on stderr")                                                                   \
    X (BATCH_DIR, batch_dir, "KIWI_BATCH_DIR", "batch-dir", PATH, "", 0, 0,                                   \
       "directory of batch manifests written by kiwi batch, read by kiwi watch (empty: ~/.kiwi/batches)")   \
    X (PROGRESS_INTERVAL, progress_interval, "KIWI_PROGRESS_INTERVAL", "progress-interval", SECONDS, "10", 1, \
       86400, "seconds between the progress lines of kiwi batch --wait and kiwi watch off a terminal")      \
    X (REFRESH, refresh, "KIWI_REFRESH", "refresh", SECONDS, "1", 1, 3600,                                    \
       "seconds between redraws on a terminal (kiwi fleet, the progress line)")                             \
    X (CLOCK_SKEW, clock_skew, "KIWI_CLOCK_SKEW", "clock-skew", SECONDS, "60", 0, 86400,                      \
       "seconds read before a submission time (kiwi wait, kiwi watch), for clocks that disagree")           \
    X (GONE_AFTER, gone_after, "KIWI_GONE_AFTER", "gone-after", SECONDS, "0", 0, 86400,                       \
       "seconds without a heartbeat before kiwi fleet shows a worker as gone (0: 3 heartbeat intervals, else 30)")

typedef enum {
#define KIWI__SETTING_ENUM(id, field, env, flag, type, def, min, max, help) KIWI_SETTING_##id,
    KIWI_CLI_SETTINGS (KIWI__SETTING_ENUM)
#undef KIWI__SETTING_ENUM
    KIWI_SETTING__COUNT
} kiwi_setting_id;

/* Types: the C type of the field and how a value is checked. */
#define KIWI__SETTING_CTYPE_PATH char *
#define KIWI__SETTING_CTYPE_BROKERS char *
#define KIWI__SETTING_CTYPE_TOPIC char *
#define KIWI__SETTING_CTYPE_TEXT char *
#define KIWI__SETTING_CTYPE_TEMPLATE char *
#define KIWI__SETTING_CTYPE_SECRET char *
#define KIWI__SETTING_CTYPE_LOGLEVEL char *
#define KIWI__SETTING_CTYPE_SECONDS uint64_t
#define KIWI__SETTING_CTYPE_BYTES uint64_t

typedef enum {
    KIWI_SETTING_TYPE_PATH,     /* any text; empty allowed */
    KIWI_SETTING_TYPE_BROKERS,  /* host:port[,host:port...] */
    KIWI_SETTING_TYPE_TOPIC,    /* a Kafka topic name */
    KIWI_SETTING_TYPE_TEXT,     /* any text without control characters; empty allowed */
    KIWI_SETTING_TYPE_TEMPLATE, /* text with known {placeholders} only */
    KIWI_SETTING_TYPE_SECRET,   /* any text; never printed */
    KIWI_SETTING_TYPE_LOGLEVEL, /* debug, info, warn, error */
    KIWI_SETTING_TYPE_SECONDS,  /* integer in [min, max] */
    KIWI_SETTING_TYPE_BYTES,    /* integer in [min, max], with an optional K/M/G suffix (powers of 1024) */
} kiwi_setting_type;

typedef struct kiwi_setting_def {
    kiwi_setting_id id;
    const char *key;   /* config-file key, also the struct field name */
    const char *env;   /* environment variable */
    const char *flag;  /* flag without "--", or NULL */
    kiwi_setting_type type;
    const char *def;   /* default, as text */
    uint64_t min, max; /* numbers only */
    const char *help;
} kiwi_setting_def;

typedef struct kiwi_cli_settings {
#define KIWI__SETTING_FIELD(id, field, env, flag, type, def, min, max, help) KIWI__SETTING_CTYPE_##type field;
    KIWI_CLI_SETTINGS (KIWI__SETTING_FIELD)
#undef KIWI__SETTING_FIELD
    /* Where each value came from: "default", "environment KIWI_X", "flag
     * --x", "FILE:LINE". Owned. */
    char *origin[KIWI_SETTING__COUNT];
    /* The config file's kafka.property.NAME = VALUE keys: name, value, ...
     * in file order (the same keys as kiwi-worker's). */
    kiwi_strv kafka_props;
} kiwi_cli_settings;

#define KIWI_CLI_KAFKA_PROPERTY_PREFIX "kafka.property."

/* Every operator-given librdkafka property, in the order to apply them
 * (the config file's kafka.property.*, then kafka_properties), appended to
 * *pairs. An item that does not parse is an error (its value not shown). */
int kiwi_cli_settings_kafka_props (const kiwi_cli_settings *s, kiwi_strv *pairs, kiwi_error_t *err);

/* The table entry of a setting, and lookups by flag name and by key. */
const kiwi_setting_def *kiwi_setting_def_get (kiwi_setting_id id);
const kiwi_setting_def *kiwi_setting_by_flag (const char *flag);
const kiwi_setting_def *kiwi_setting_by_key (const char *key);

/* What a setting of this entry accepts, in words ("an integer from 1 to
 * 3600 (seconds)"). Static or per-entry storage; borrowed. */
const char *kiwi_setting_accepted (const kiwi_setting_def *d, char *buf, size_t cap);

/* Zeroes *s. */
void kiwi_cli_settings_init (kiwi_cli_settings *s);
void kiwi_cli_settings_clear (kiwi_cli_settings *s);

/* Loads the settings from all sources (see above). `flags` holds the flag
 * values by setting id (NULL: not given); `envp` is the environment to read
 * (environ in the program, a fixed list in tests). On failure *err names
 * the key, the origin and what is accepted (code KIWI_CLI_EUSAGE). */
int kiwi_cli_settings_load (kiwi_cli_settings *s, const char *const flags[KIWI_SETTING__COUNT],
                            char *const *envp, kiwi_error_t *err);

/* Checks one value for a setting. Returns 0, or < 0 with *err naming the
 * key, `origin` and what is accepted. */
int kiwi_setting_check (const kiwi_setting_def *d, const char *value, const char *origin, kiwi_error_t *err);

/* Expands a goal template: {name} {sha} {branch} {url} {repo} {event} are
 * replaced by the matching argument (NULL: empty). Returns a malloc'd
 * string, or NULL with *err on an unknown placeholder. */
typedef struct kiwi_goal_vars {
    const char *name, *sha, *branch, *url, *repo, *event;
} kiwi_goal_vars;
char *kiwi_goal_expand (const char *tmpl, const kiwi_goal_vars *v, kiwi_error_t *err);

/* Prints every setting as a config file would hold it ("key = value"),
 * with its environment variable and origin as a comment. Secrets are never
 * printed: only whether they are set. */
void kiwi_cli_settings_dump (const kiwi_cli_settings *s, FILE *out);

/* Prints the configuration flags' names, for a command's --help. */
void kiwi_cli_settings_flags (FILE *out);

/* Prints the table for --help: flag, environment variable, default. */
void kiwi_cli_settings_help (FILE *out);

#endif
