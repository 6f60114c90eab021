/*
 * config.h: every setting of kiwi-worker in one table.
 *
 * Each entry has a key (as written in the config file), the environment
 * variable and the command-line flag that set it, a type with its accepted
 * values, a default and a help line. Sources, lowest first: the default,
 * the config file (--config FILE or KIWI_CONFIG; "key = value" lines, '#'
 * comments), the environment, then flags. A bad value is an error naming
 * where it came from, the key and what is accepted.
 *
 * Ownership: kiwi_worker_config owns its strings; kiwi_worker_config_clear()
 * frees them.
 */
#ifndef KIWI_WORKER_CONFIG_H
#define KIWI_WORKER_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "error.h"
#include "strv.h"

/* Config-file keys kafka.property.NAME = VALUE set librdkafka's NAME. */
#define KIWI_KAFKA_PROPERTY_PREFIX "kafka.property."

typedef struct kiwi_worker_config {
    /* identity and capacity */
    char *worker_id;
    int64_t slots;
    char *state_dir;
    /* Kafka */
    char *brokers;
    char *group;
    char *topic_tasks, *topic_progress, *topic_results, *topic_heartbeats, *topic_dlq;
    /* Redis */
    char *redis_host;
    int64_t redis_port;
    char *redis_password;   /* secret: AUTH on every connection */
    char *redis_user;       /* ACL user, or NULL: the default user */
    /* Kafka client properties (KIWI_KAFKA_PROPERTIES and kafka.property.* keys) */
    char *kafka_properties; /* secret: "name=value,..." as given */
    char **kafka_props;     /* name, value, name, value, ..., NULL: the config file's kafka.property.* keys */
    size_t n_kafka_props;
    /* addresses Phase A may not reach besides Redis and Kafka (KIWI_INSTALL_DENY) */
    char *install_deny;
    /* what Phase A may reach (KIWI_INSTALL_EGRESS; egress-proxy.h) and the egress proxy's ports */
    char *install_egress;
    char *install_proxy_ports;
    int64_t lease_ttl_s;
    int64_t cache_ttl_s;
    int64_t cache_fail_ttl_s;
    int64_t done_ttl_s;
    /* sandbox */
    char *sandbox;          /* driver name */
    char *docker_socket;
    char *image_catalog;
    char *image_registries;   /* KIWI_IMAGE_REGISTRIES: where a missing image may be pulled from */
    char *registry_auth_file; /* KIWI_REGISTRY_AUTH_FILE: their credentials (config.json), or NULL */
    int64_t pull_timeout_s;
    int64_t pull_max_mb;
    char *ca_bundle;
    int64_t install_timeout_s;
    bool session_allow_test_creds;
    bool snapshot_copy;     /* KIWI_SNAPSHOT_COPY */
    /* the shared snapshot store (store.h) */
    char *store_url;
    char *store_user;
    char *store_password;   /* secret */
    char *model_key_vars;   /* extra model-key variable names, comma-separated */
    /* task limits (defaults for tasks that do not set them) */
    int64_t task_timeout_s;  /* TaskTimeoutSeconds */
    int64_t max_disk_mb;     /* MaxSandboxDiskMB */
    int64_t max_rounds;
    int64_t session_budget_tokens;
    int64_t memory_mb;
    int64_t pids;
    /* model */
    char *model_provider;
    char *model_name;
    char *model_base_url;
    double price_input_mtok;   /* USD per million input tokens (money budgets) */
    double price_output_mtok;  /* USD per million output tokens */
    /* repositories */
    char *git_token_var;     /* name of the variable holding the git token */
    int64_t clone_timeout_s;
    int64_t clone_max_mb;
    int64_t checkout_max_mb;
    int64_t checkout_max_files;
    /* the operator's policy over task fields (worker/policy.h); lists are
     * comma-separated, NULL or "" for none */
    char *model_base_urls;   /* base URLs a task may name (prefixes) */
    char *git_token_hosts;   /* hosts the git token may be sent to, over https */
    char *repo_schemes;      /* repository URL schemes: https, http, ssh, git */
    bool allow_local_repos;  /* local paths and file:// (never into state_dir) */
    char *test_credentials;  /* variable names a task may ask for as test credentials */
    /* health */
    int64_t heartbeat_interval_s;
    int64_t egress_interval_s;
    bool egress_stop_when_degraded;
    bool egress_apply;       /* apply ops/egress rules at start */
    /* the egress scripts (NULL: the installed ones, kiwi_worker_libexec),
     * the URL the checks fetch and the image they run in */
    char *egress_script;
    char *egress_proxy_script;
    char *egress_probe_url;
    char *egress_image;
    int64_t drain_timeout_s;
    int64_t delivery_timeout_s; /* Kafka delivery attempts of one produce; a failed result is produced again */
    char *log_level;
    /* host resources: the clean-up (kiwi-worker --gc) and the result ceiling */
    int64_t gc_mirror_idle_s;   /* KIWI_GC_MIRROR_IDLE */
    int64_t gc_snapshot_idle_s; /* KIWI_GC_SNAPSHOT_IDLE */
    int64_t gc_disk_high;       /* KIWI_GC_DISK_HIGH, percent */
    int64_t gc_disk_low;        /* KIWI_GC_DISK_LOW, percent, < gc_disk_high */
    int64_t result_max_bytes;   /* KIWI_RESULT_MAX_BYTES: encoded result ceiling */
    /* Prometheus metrics: HOST:PORT of GET /metrics, or NULL: not served */
    char *metrics_addr;
} kiwi_worker_config;

void kiwi_worker_config_init (kiwi_worker_config *c);

/* The i-th setting's config-file key and (in *env, may be NULL) its
 * environment variable, or NULL past the last one. */
const char *kiwi_worker_setting_key (size_t i, const char **env);

/* The path of a script installed with kiwi-worker: `path` when given
 * (a setting), else NAME in ../libexec/kiwi beside the running binary
 * (`cmake --install` puts ops/egress's scripts there, and the build tree
 * has them in the same place). Returns buf, or NULL when the binary's own
 * path cannot be read. */
const char *kiwi_worker_libexec (const char *path, const char *name, char *buf, size_t cap);
void kiwi_worker_config_clear (kiwi_worker_config *c);

/* Loads defaults, then the config file (`file`, or $KIWI_CONFIG, or none),
 * then `envp`, then argv[from..argc) flags ("--key=value" or "--key value";
 * single-dash spellings like -sandbox-runtime are accepted too). Unknown
 * flags are errors. Stops at the first error. *rest_index receives the index
 * of the first non-flag argument (or argc). */
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

/* Prints the table: key, environment variable, flag, default, meaning. */
void kiwi_worker_config_help (FILE *out);

/* Prints the effective configuration (secrets never printed). */
void kiwi_worker_config_dump (const kiwi_worker_config *c, FILE *out);

#endif
