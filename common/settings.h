/*
 * settings.h: every setting of kiwi and kiwi-worker in one table.
 *
 * Each row (settings-rows.def) has one spelling per setting: its config-file
 * key, environment variable and flag; a type, which brings the validator and
 * the "accepted" text of errors; a default (kiwi's own where the two programs
 * differ); a help line; and the programs that read it. The Firecracker
 * driver's rows (firecracker.*, KIWI_FC_*) are kiwi-worker's; the driver gets
 * them in kiwi_sandbox_config (sandbox.h).
 *
 * Sources, lowest first:
 *   1. the default;
 *   2. kiwi only: the stack env file (KEY=VALUE lines written by
 *      ops/stack.sh): stack.env, else <state.dir>/stack.env; a setting takes
 *      the value of its environment variable there; a missing file is no
 *      error;
 *   3. the config file (config: --config FILE or KIWI_CONFIG; common/
 *      config-file.h), which both programs may share: a key of the other
 *      program is ignored, a key of neither refused, kiwi's earlier
 *      spellings refused naming the new one; kafka.property.NAME = VALUE
 *      keys are librdkafka properties for both;
 *   4. the environment (a KIWI_ variable that is no setting of either
 *      program nor a known non-setting variable is warned about, with the
 *      closest setting's variable when one is close; settings-env.c);
 *   5. flags.
 * Only the winning value is checked; a bad one is an error naming the key,
 * the value (never a secret's), where it came from and what is accepted.
 *
 * Derived when loaded: kiwi-worker's git_token (the variable git.token_var
 * names) and kiwi's batch_dir default ($HOME/.kiwi/batches).
 *
 * Ownership: kiwi_settings owns its strings; kiwi_settings_clear() frees
 * them.
 */
#ifndef KIWI_COMMON_SETTINGS_H
#define KIWI_COMMON_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/defaults.h"
#include "common/error.h"
#include "common/strv.h"

#define KIWI_CI_GOAL_DEFAULT "CI run {name} failed on {sha}: make it pass"
#define KIWI_KAFKA_PROPERTY_PREFIX "kafka.property."
#define KIWI_METRICS_ADDR_FORM "HOST:PORT (HOST an IPv4 address, [IPv6 address] or host name; PORT 1-65535)"

enum { KIWI_PROGRAM_KIWI = 1, KIWI_PROGRAM_WORKER = 2 };

typedef enum {
#define ROW(id, ...) KIWI_SETTING_##id,
#include "common/settings-rows.def"
#undef ROW
    KIWI_SETTING__COUNT
} kiwi_setting_id;

typedef enum {
    KIWI_SETTING_TYPE_STR,      /* a non-empty string */
    KIWI_SETTING_TYPE_PATH,     /* a path; empty allowed (then a default applies) */
    KIWI_SETTING_TYPE_TEXT,     /* text without control characters; empty allowed */
    KIWI_SETTING_TYPE_LIST,     /* a comma-separated list; empty allowed */
    KIWI_SETTING_TYPE_SECRET,   /* any text; never printed */
    KIWI_SETTING_TYPE_ENUM,     /* one of values ("a|b|c") */
    KIWI_SETTING_TYPE_ADDR,     /* HOST:PORT to listen on; empty: none (stored NULL) */
    KIWI_SETTING_TYPE_BROKERS,  /* host:port[,host:port...] */
    KIWI_SETTING_TYPE_TOPIC,    /* a Kafka topic name */
    KIWI_SETTING_TYPE_NAME,     /* a name in files, containers and labels: 1 to 64 of A-Z a-z 0-9 . _ - */
    KIWI_SETTING_TYPE_TEMPLATE, /* text with known {placeholders} only */
    KIWI_SETTING_TYPE_LOGLEVEL, /* debug, info, warn, error */
    KIWI_SETTING_TYPE_INT,      /* int64_t in [min, max] */
    KIWI_SETTING_TYPE_NUM,      /* double in [min, max] */
    KIWI_SETTING_TYPE_SECONDS,  /* uint64_t in [min, max] */
    KIWI_SETTING_TYPE_BYTES,    /* uint64_t in [min, max], optional K/M/G suffix (powers of 1024) */
    KIWI_SETTING_TYPE_BOOL,     /* true/false, 1/0, yes/no, on/off */
} kiwi_setting_type;

typedef struct kiwi_setting_def {
    kiwi_setting_id id;
    const char *key;      /* config-file key */
    const char *env;      /* environment variable */
    const char *flag;     /* flag without "--", or NULL */
    kiwi_setting_type type;
    size_t offset;        /* of the field in kiwi_settings */
    const char *def;      /* default as text, or NULL: unset */
    const char *def_kiwi; /* kiwi's default where it differs, or NULL */
    int64_t min, max;     /* numbers */
    const char *values;   /* ENUM: "a|b|c" */
    unsigned programs;    /* KIWI_PROGRAM_* that read it */
    const char *was;      /* kiwi's earlier spelling of the key, or NULL */
    const char *help;
} kiwi_setting_def;

/* The Firecracker driver's settings (firecracker.*, KIWI_FC_*). */
typedef struct kiwi_fc_settings {
    char *bin;               /* the firecracker executable */
    char *kernel;            /* uncompressed guest kernel (vmlinux) */
    char *initrd;            /* optional initrd ("" none) */
    char *images;            /* directory of root filesystem images */
    char *boot_args;         /* appended to Kiwi's own */
    char *kvm_device;
    char *install_bridge;    /* bridge for Phase A taps; "" refuses Phase A */
    char *install_net;       /* "a.b.c.0/24": gateway .1, guests .2-.254 */
    char *install_dns;       /* resolver for Phase A guests ("" the gateway) */
    int64_t boot_timeout_ms;
    bool skip_kvm_check;     /* go to Firecracker even without /dev/kvm (tests) */
} kiwi_fc_settings;

typedef struct kiwi_settings {
    char *config;           /* the config file read, or "" / NULL */
    /* kiwi-worker: identity and capacity */
    char *worker_id;
    int64_t slots;
    char *state_dir;
    /* Kafka (both) */
    char *brokers;
    char *group;
    char *topic_tasks, *topic_progress, *topic_results, *topic_heartbeats, *topic_dlq;
    char *kafka_properties;  /* secret: "name=value,..." as given */
    uint64_t delivery_timeout; /* seconds: kiwi 30, kiwi-worker 300 */
    char *log_level;
    /* Redis */
    char *redis_host;
    int64_t redis_port;
    char *redis_password;   /* secret: AUTH on every connection */
    char *redis_user;       /* ACL user, or NULL: the default user */
    /* what Phase A may (not) reach, its bridge and the egress proxy's ports */
    char *install_deny;
    char *install_egress;
    char *install_bridge;   /* kiwi-installN, or NULL: worker/egress/install-bridge.h decides */
    char *install_proxy_ports;
    int64_t install_proxy_log_mb; /* the egress proxy's logs rotated past this (proxy.sh run --log-max-mb) */
    int64_t egress_nflog_group; /* netlink log group of kiwi-install0; kiwi-installN's is this + N */
    char *private_registries; /* HOST[/PREFIX]=@FILE ... (worker/egress/private-registry.h) */
    char *egress_ca_dir;      /* Kiwi's CA for them, or NULL: <state_dir>/egress-ca */
    char *private_registry_ca; /* CAs Squid also trusts for registries (proxy.sh --upstream-ca), or NULL */
    char *egress_hosts_file;  /* names Squid resolves first (proxy.sh --hosts-file), or NULL: /etc/hosts */
    char *private_registry_placeholders; /* variable names given a placeholder in every phase, or NULL */
    char *go_proxy;           /* GOPROXY for Phase A (private Go modules), or NULL: Go's own */
    char *go_nosumdb;         /* GONOSUMDB for Phase A, or NULL */
    int64_t lease_ttl_s, cache_ttl_s, cache_fail_ttl_s, done_ttl_s;
    /* sandbox */
    char *sandbox;          /* driver name */
    char *docker_socket;
    char *image_catalog;
    char *image_registries;
    char *registry_auth_file;
    int64_t pull_timeout_s;
    int64_t pull_max_mb;
    char *ca_bundle;
    int64_t install_timeout_s;
    bool session_allow_test_creds;
    bool snapshot_copy;
    kiwi_fc_settings fc;
    /* the shared snapshot store (worker/task/store.h) */
    char *store_url;
    char *store_user;
    char *store_password;   /* secret */
    char *model_key_vars;
    /* task limits (defaults for tasks that do not set them) */
    int64_t task_timeout_s, max_disk_mb, max_rounds, session_budget_tokens, memory_mb, pids, cpus;
    /* model */
    char *session_agents;   /* "two" (Architect and Implementer) or "one" */
    char *model_provider;
    char *model_name;
    char *model_base_url;
    double price_input_mtok, price_output_mtok; /* USD per million tokens */
    /* repositories */
    char *git_token_var;    /* name of the variable holding the git token */
    char *git_token;        /* secret: its value when loaded, or NULL */
    int64_t clone_timeout_s, clone_max_mb, checkout_max_mb, checkout_max_files;
    /* the operator's policy over task fields (worker/task/policy.h) */
    char *model_base_urls, *git_token_hosts, *repo_schemes;
    bool allow_local_repos;
    char *test_credentials;
    /* health and egress */
    int64_t heartbeat_interval_s, egress_interval_s;
    bool egress_stop_when_degraded, egress_apply, once_egress_unchecked;
    char *egress_script, *egress_proxy_script, *egress_probe_url, *egress_image;
    int64_t drain_timeout_s;
    /* host resources */
    int64_t gc_mirror_idle_s, gc_snapshot_idle_s, gc_image_idle_s, gc_disk_high, gc_disk_low, result_max_bytes;
    char *metrics_addr;     /* HOST:PORT of GET /metrics, or NULL */
    /* kiwi */
    char *stack_env;
    char *ci_test_command, *ci_goal, *ci_webhook_secret;
    uint64_t ci_max_body;
    char *batch_dir;        /* when loaded: the setting, else $HOME/.kiwi/batches, or "" */
    uint64_t progress_interval, refresh, clock_skew, gone_after, stall_after;
    /* Where each value came from: "default", "environment KIWI_X", "flag
     * --x", "FILE:LINE", "stack env file PATH"; NULL for the other
     * program's rows. Owned. */
    char *origin[KIWI_SETTING__COUNT];
    /* The config file's kafka.property.NAME = VALUE keys: name, value, ...
     * in file order. */
    kiwi_strv kafka_props;
} kiwi_settings;

/* The row of a setting; by key, environment name or flag among `programs`'
 * rows (0: any); NULL when there is none. */
const kiwi_setting_def *kiwi_setting_get (kiwi_setting_id id);
const kiwi_setting_def *kiwi_setting_find (const char *name, unsigned programs);

/* A row's default for `program` (NULL: unset). */
const char *kiwi_setting_default (const kiwi_setting_def *d, unsigned program);

/* What a row accepts, in words. Returns buf or static text. */
const char *kiwi_setting_accepted (const kiwi_setting_def *d, char *buf, size_t cap);

/* Checks one value. Returns 0, or < 0 with *err (code `code`): "KEY:
 * invalid value `V` (from ORIGIN): WHY (accepted: ...)", V left out for a
 * secret. */
int kiwi_setting_check (const kiwi_setting_def *d, const char *value, const char *origin, int code,
                        kiwi_error_t *err);

/* Zeroes *s, then sets every row of `program` to its default. */
int kiwi_settings_defaults (kiwi_settings *s, unsigned program, kiwi_error_t *err);
void kiwi_settings_clear (kiwi_settings *s);

/* Sets one setting (by key, environment name or flag of `program`'s rows,
 * or a kafka.property.NAME) from a value given by `origin`. */
int kiwi_settings_set (kiwi_settings *s, unsigned program, const char *name, const char *value, const char *origin,
                       int code, kiwi_error_t *err);

/* Loads every row of `program` from the sources above into *s (cleared
 * first). `flags` holds flag values by id (NULL: none given); `envp` is the
 * environment (environ, or a fixed list in tests). Errors carry `code`. */
int kiwi_settings_load (kiwi_settings *s, unsigned program, const char *const flags[KIWI_SETTING__COUNT],
                        const char *const *envp, int code, kiwi_error_t *err);

/* The rule for a config-file key none of program `self`'s rows has: 0 when
 * another program reads it (ignored), else -1 with *err (code `code`). */
int kiwi_setting_key_foreign (const char *key, unsigned self, const char *origin, int code, kiwi_error_t *err);

/* The librdkafka properties, in the order to apply them: the config file's
 * kafka.property.*, then kafka.properties; appended to *pairs. */
int kiwi_settings_kafka_props (const kiwi_settings *s, kiwi_strv *pairs, kiwi_error_t *err);

/* --help-config: every row of `program`: flag, environment variable, key,
 * help, accepted values and default. */
void kiwi_settings_help (FILE *out, unsigned program);

/* The effective configuration as a config file ("key = value" after a
 * comment naming the variable and the origin); secrets never printed. */
void kiwi_settings_dump (const kiwi_settings *s, unsigned program, FILE *out);

/* The placeholders of a goal template (ci.goal): {name} {sha} {branch}
 * {url} {repo} {event}, replaced by the matching field (NULL: empty). */
typedef struct kiwi_goal_vars {
    const char *name, *sha, *branch, *url, *repo, *event;
} kiwi_goal_vars;

/* Expands a template. Returns a malloc'd string, or NULL with *err (code
 * `code`) on an unknown placeholder. */
char *kiwi_template_expand (const char *tmpl, const kiwi_goal_vars *v, int code, kiwi_error_t *err);

/* HOST:PORT to listen on: host (cap bytes), port and whether HOST was an
 * [IPv6] address. Returns < 0 with *err saying what is wrong. */
int kiwi_hostport_split (const char *addr, char *host, size_t cap, int *port, bool *v6, kiwi_error_t *err);

#endif
