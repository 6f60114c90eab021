/*
 * config.c: the settings table of kiwi-worker (see config.h).
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config-file.h"
#include "defaults.h"
#include "kafka-conf.h"
#include "log.h"
#include "metrics-http.h"
#include "setting-keys.h"
#include "strv.h"

/* T_LIST: a comma-separated list that may be empty; T_SECRET: a string
 * never printed by --dump or in errors; T_ADDR: HOST:PORT to listen on, or
 * empty for none */
typedef enum { T_STR, T_INT, T_BOOL, T_ENUM, T_NUM, T_LIST, T_SECRET, T_ADDR } setting_type;

typedef struct {
    const char *key;    /* config-file key */
    const char *env;    /* environment variable, or NULL */
    const char *flag;   /* long flag without dashes, or NULL */
    setting_type type;
    size_t offset;
    const char *def;    /* default as text; NULL = unset */
    int64_t min, max;   /* T_INT */
    const char *values; /* T_ENUM: "a|b|c" */
    const char *help;
} setting;

#define OFF(f) offsetof (kiwi_worker_config, f)

static const setting settings[] = {
    { "worker.id", "KIWI_WORKER_ID", "worker-id", T_STR, OFF (worker_id), NULL, 0, 0, NULL,
      "this worker's id in events, leases and sandbox labels (default: the host name); unique per worker" },
    { "worker.slots", "KIWI_SLOTS", "slots", T_INT, OFF (slots), "2", 1, 64, NULL, "tasks run at the same time" },
    { "state.dir", "KIWI_STATE_DIR", "state-dir", T_STR, OFF (state_dir), KIWI_STATE_DIR_DEFAULT, 0, 0, NULL,
      "sandbox disks, snapshots, repository mirrors, workspaces" },
    { "kafka.brokers", "KIWI_KAFKA_BROKERS", "brokers", T_STR, OFF (brokers), KIWI_BROKERS_DEFAULT, 0, 0, NULL,
      "bootstrap servers" },
    { "kafka.group", "KIWI_GROUP", "group", T_STR, OFF (group), KIWI_GROUP_DEFAULT, 0, 0, NULL,
      "consumer group of the worker pool" },
    { "topic.tasks", "KIWI_TOPIC_TASKS", "tasks-topic", T_STR, OFF (topic_tasks), KIWI_TOPIC_TASKS_DEFAULT, 0, 0,
      NULL, "tasks topic" },
    { "topic.progress", "KIWI_TOPIC_PROGRESS", "progress-topic", T_STR, OFF (topic_progress),
      KIWI_TOPIC_PROGRESS_DEFAULT, 0, 0, NULL, "progress events topic" },
    { "topic.results", "KIWI_TOPIC_RESULTS", "results-topic", T_STR, OFF (topic_results), KIWI_TOPIC_RESULTS_DEFAULT,
      0, 0, NULL, "results topic" },
    { "topic.heartbeats", "KIWI_TOPIC_HEARTBEATS", "heartbeats-topic", T_STR, OFF (topic_heartbeats),
      KIWI_TOPIC_HEARTBEATS_DEFAULT, 0, 0, NULL, "heartbeats topic" },
    { "topic.dlq", "KIWI_TOPIC_DLQ", "dlq-topic", T_STR, OFF (topic_dlq), KIWI_TOPIC_DLQ_DEFAULT, 0, 0, NULL,
      "dead-letter topic" },
    { "redis.host", "KIWI_REDIS_HOST", "redis-host", T_STR, OFF (redis_host), "127.0.0.1", 0, 0, NULL,
      "Redis host (leases, finished tasks, the install and verify cache)" },
    { "redis.port", "KIWI_REDIS_PORT", "redis-port", T_INT, OFF (redis_port), "6379", 1, 65535, NULL, "Redis port" },
    { "redis.password", "KIWI_REDIS_PASSWORD", "redis-password", T_SECRET, OFF (redis_password), NULL, 0, 0, NULL,
      "password sent with AUTH on every Redis connection (ops/stack.sh writes it to stack.env; never printed, never "
      "in a sandbox)" },
    { "redis.user", "KIWI_REDIS_USER", "redis-user", T_STR, OFF (redis_user), NULL, 0, 0, NULL,
      "Redis ACL user for AUTH user password (default: the default user)" },
    { "kafka.properties", "KIWI_KAFKA_PROPERTIES", "kafka-properties", T_SECRET, OFF (kafka_properties), NULL, 0, 0,
      NULL,
      "librdkafka properties name=value,... given to every Kafka client as they are (security.protocol, sasl.*, "
      "ssl.*); a `,` inside a value as `\\,`; also config-file keys kafka.property.NAME = VALUE" },
    { "sandbox.install_deny", "KIWI_INSTALL_DENY", "install-deny", T_STR, OFF (install_deny), NULL, 0, 0, NULL,
      "further addresses Phase A may not reach, besides this worker's Redis and Kafka: HOST[:PORT] or CIDR[:PORT], "
      "comma- or space-separated (egress.sh --deny, applied and checked by the worker)" },
    { "sandbox.install_egress", "KIWI_INSTALL_EGRESS", "install-egress", T_STR, OFF (install_egress), "open", 0, 0,
      NULL,
      "what Phase A may reach: open (anything), registries (the package registries, through the worker's egress "
      "proxy; ops/egress/proxy.sh hosts all), or host names, comma- or space-separated (registries may be one)" },
    { "sandbox.install_proxy_ports", "KIWI_INSTALL_PROXY_PORTS", "install-proxy-ports", T_STR,
      OFF (install_proxy_ports), "3128,3129,3130", 0, 0, NULL,
      "the egress proxy's ports on the install bridge's gateway: explicit,HTTP,TLS (egress.sh --proxy)" },
    { "lease.ttl", "KIWI_LEASE_TTL", "lease-ttl", T_INT, OFF (lease_ttl_s), "30", 5, 3600, NULL,
      "seconds a task lease lives unless renewed (renewed every third of it)" },
    { "cache.ttl", "KIWI_CACHE_TTL", "cache-ttl", T_INT, OFF (cache_ttl_s), "604800", 60, 31536000, NULL,
      "seconds an install or verify cache entry lives" },
    { "cache.fail_ttl", "KIWI_CACHE_FAIL_TTL", "cache-fail-ttl", T_INT, OFF (cache_fail_ttl_s), "600", 0, 86400,
      NULL, "seconds a cached install failure is reused (0: never)" },
    { "done.ttl", "KIWI_DONE_TTL", "done-ttl", T_INT, OFF (done_ttl_s), "604800", 60, 31536000, NULL,
      "seconds the record of a finished task is kept (duplicate deliveries within it get the same result)" },
    { "sandbox.driver", "KIWI_SANDBOX", "sandbox", T_ENUM, OFF (sandbox), "docker", 0, 0,
      "docker|runc|gvisor|runsc|firecracker", "sandbox driver (KIWI_SANDBOX_RUNTIME and -sandbox-runtime too)" },
    { "sandbox.docker_socket", "KIWI_DOCKER_SOCKET", "docker-socket", T_STR, OFF (docker_socket),
      "/var/run/docker.sock", 0, 0, NULL, "dockerd's unix socket" },
    { "sandbox.catalog", "KIWI_IMAGE_CATALOG", "image-catalog", T_STR, OFF (image_catalog), NULL, 0, 0, NULL,
      "image catalogue file (default: the public official images)" },
    { "sandbox.registries", "KIWI_IMAGE_REGISTRIES", "image-registries", T_STR, OFF (image_registries), "docker.io",
      0, 0, NULL,
      "registries a missing image may be pulled from, comma- or space-separated (docker.io is also index.docker.io; "
      "an image of any other registry is refused; `none`: never pull)" },
    { "sandbox.registry_auth_file", "KIWI_REGISTRY_AUTH_FILE", "registry-auth-file", T_STR, OFF (registry_auth_file),
      NULL, 0, 0, NULL,
      "Docker config.json-style file with the registries' credentials (\"auths\"), sent to dockerd for a pull only "
      "(never in a sandbox, never logged; default: pull anonymously)" },
    { "sandbox.pull_timeout", "KIWI_IMAGE_PULL_TIMEOUT", "image-pull-timeout", T_INT, OFF (pull_timeout_s), "600", 1,
      86400, NULL, "seconds pulling one image may take" },
    { "sandbox.pull_max_mb", "KIWI_IMAGE_PULL_MAX_MB", "image-pull-max-mb", T_INT, OFF (pull_max_mb), "8192", 1,
      1048576, NULL,
      "ceiling on a pulled image: its layers as the pull reports them, then its size (an image over it is removed)" },
    { "sandbox.ca_bundle", "KIWI_CA_BUNDLE", "ca-bundle", T_STR, OFF (ca_bundle), NULL, 0, 0, NULL,
      "CA bundle given to Phase A (a TLS-intercepting proxy's CA)" },
    { "sandbox.install_timeout", "KIWI_INSTALL_TIMEOUT", "install-timeout", T_INT, OFF (install_timeout_s), "300", 1,
      86400, NULL, "seconds Phase A may take" },
    { "session.allow_test_creds", "KIWI_SESSION_ALLOW_TEST_CREDS", "session-allow-test-creds", T_BOOL,
      OFF (session_allow_test_creds), "false", 0, 0, NULL,
      "give the Implementer's sandbox the task's test credentials" },
    { "sandbox.snapshot_copy", "KIWI_SNAPSHOT_COPY", "snapshot-copy", T_BOOL, OFF (snapshot_copy), "false", 0, 0,
      NULL,
      "copy the dependency snapshot into every verify sandbox instead of laying it read-only under /kiwi (the "
      "drivers that cannot lay it copy anyway)" },
    { "store.url", "KIWI_STORE_URL", "store-url", T_STR, OFF (store_url), NULL, 0, 0, NULL,
      "OCI registry repository the fleet shares install snapshots through, http(s)://host[:port]/repository "
      "(ops/stack.sh writes it to stack.env); unset: each host installs for itself" },
    { "store.user", "KIWI_STORE_USER", "store-user", T_STR, OFF (store_user), NULL, 0, 0, NULL,
      "user for the store's basic authentication" },
    { "store.password", "KIWI_STORE_PASSWORD", "store-password", T_SECRET, OFF (store_password), NULL, 0, 0, NULL,
      "password for the store (never printed, never in a sandbox)" },
    { "sandbox.model_key_vars", "KIWI_MODEL_KEY_VARS", "model-key-vars", T_STR, OFF (model_key_vars), NULL, 0, 0,
      NULL, "further model-key variables to withhold from sandboxes, comma-separated" },
    { "task.timeout", "KIWI_TASK_TIMEOUT", "task-timeout", T_INT, OFF (task_timeout_s), "1800", 1, 86400, NULL,
      "TaskTimeoutSeconds: wall clock per task (a task may ask for less, never more)" },
    { "task.max_disk_mb", "KIWI_MAX_SANDBOX_DISK_MB", "max-sandbox-disk-mb", T_INT, OFF (max_disk_mb), "2048", 16,
      1048576, NULL, "MaxSandboxDiskMB: disk ceiling per sandbox (a task may ask for less, never more)" },
    { "session.max_rounds", "KIWI_MAX_ROUNDS", "max-rounds", T_INT, OFF (max_rounds), "8", 1, 100, NULL,
      "rounds per session (a task may ask for fewer, never more)" },
    { "session.budget_tokens", "KIWI_SESSION_BUDGET", "session-budget", T_INT, OFF (session_budget_tokens), "2000000",
      1, INT64_MAX, NULL, "tokens per session (a task may ask for fewer, never more)" },
    { "sandbox.memory_mb", "KIWI_SANDBOX_MEMORY_MB", "sandbox-memory-mb", T_INT, OFF (memory_mb), "2048", 64, 262144,
      NULL, "memory ceiling per sandbox" },
    { "sandbox.pids", "KIWI_SANDBOX_PIDS", "sandbox-pids", T_INT, OFF (pids), "512", 16, 65536, NULL,
      "process ceiling per sandbox" },
    { "model.provider", "KIWI_MODEL_PROVIDER", "model-provider", T_ENUM, OFF (model_provider), "anthropic", 0, 0,
      "anthropic|openai|gemini", "provider for tasks that do not name one" },
    { "model.name", "KIWI_MODEL", "model", T_STR, OFF (model_name), NULL, 0, 0, NULL,
      "model for tasks that do not name one (default: the provider's default)" },
    { "model.base_url", "KIWI_MODEL_BASE_URL", "model-base-url", T_STR, OFF (model_base_url), NULL, 0, 0, NULL,
      "provider base URL (an OpenAI-compatible gateway, a local server)" },
    { "model.price_input", "KIWI_MODEL_PRICE_INPUT", "model-price-input", T_NUM, OFF (price_input_mtok), "0", 0,
      1000000, NULL, "US dollars per million input tokens, for money budgets (0: unknown)" },
    { "model.price_output", "KIWI_MODEL_PRICE_OUTPUT", "model-price-output", T_NUM, OFF (price_output_mtok), "0", 0,
      1000000, NULL, "US dollars per million output tokens" },
    { "git.token_var", "KIWI_GIT_TOKEN_VAR", "git-token-var", T_STR, OFF (git_token_var), "KIWI_GIT_TOKEN", 0, 0,
      NULL, "variable holding the token for https clones (never enters a sandbox)" },
    { "git.timeout", "KIWI_CLONE_TIMEOUT", "clone-timeout", T_INT, OFF (clone_timeout_s), "600", 5, 86400, NULL,
      "seconds a fetch may take" },
    { "git.max_mb", "KIWI_CLONE_MAX_MB", "clone-max-mb", T_INT, OFF (clone_max_mb), "2048", 1, 1048576, NULL,
      "ceiling on a repository mirror's size" },
    { "git.max_checkout_mb", "KIWI_CHECKOUT_MAX_MB", "checkout-max-mb", T_INT, OFF (checkout_max_mb), "2048", 1,
      1048576, NULL, "ceiling on the bytes of a task's checkout, measured before it is written" },
    { "git.max_checkout_files", "KIWI_CHECKOUT_MAX_FILES", "checkout-max-files", T_INT, OFF (checkout_max_files),
      "200000", 1, 100000000, NULL, "ceiling on the files of a task's checkout, counted before it is written" },
    { "model.base_urls", "KIWI_MODEL_BASE_URLS", "model-base-urls", T_LIST, OFF (model_base_urls), NULL, 0, 0, NULL,
      "base URLs a task's model.base_url may start with (scheme, host, port and path prefix; empty: tasks cannot "
      "choose one, the model key goes only where the operator says)" },
    { "git.token_hosts", "KIWI_GIT_TOKEN_HOSTS", "git-token-hosts", T_LIST, OFF (git_token_hosts), "github.com", 0, 0,
      NULL, "hosts (host or host:port) the git token is sent to, over https only; other hosts are fetched without it" },
    { "repo.schemes", "KIWI_REPO_SCHEMES", "repo-schemes", T_LIST, OFF (repo_schemes), "https,ssh", 0, 0, NULL,
      "repository URL schemes a task may use: https, http, ssh (ssh:// and user@host:path), git" },
    { "repo.allow_local", "KIWI_ALLOW_LOCAL_REPOS", "allow-local-repos", T_BOOL, OFF (allow_local_repos), "false", 0,
      0, NULL, "let tasks name local paths and file:// repositories (never inside the state directory)" },
    { "task.test_credentials", "KIWI_TEST_CREDENTIALS", "test-credentials", T_LIST, OFF (test_credentials), NULL, 0,
      0, NULL, "variables a task may name in test_credentials (empty: none; a task naming another is refused)" },
    { "health.heartbeat_interval", "KIWI_HEARTBEAT_INTERVAL", "heartbeat-interval", T_INT,
      OFF (heartbeat_interval_s), "10", 1, 3600, NULL, "seconds between heartbeats" },
    { "health.egress_interval", "KIWI_EGRESS_INTERVAL", "egress-interval", T_INT, OFF (egress_interval_s), "300", 10,
      86400, NULL, "seconds between egress checks" },
    { "health.egress_stop_when_degraded", "KIWI_EGRESS_STOP_WHEN_DEGRADED", "egress-stop-when-degraded", T_BOOL,
      OFF (egress_stop_when_degraded), "true", 0, 0, NULL, "take no new tasks while an isolation check fails" },
    { "health.egress_apply", "KIWI_EGRESS_APPLY", "egress-apply", T_BOOL, OFF (egress_apply), "false", 0, 0, NULL,
      "apply the egress rules (ops/egress/egress.sh apply) when the worker starts: they do not survive a reboot" },
    { "egress.script", "KIWI_EGRESS_SCRIPT", "egress-script", T_STR, OFF (egress_script), NULL, 0, 0, NULL,
      "the egress rules script run for KIWI_EGRESS_APPLY and the checks (unset: egress.sh in ../libexec/kiwi "
      "beside the kiwi-worker binary, where `cmake --install` puts ops/egress/egress.sh and the build tree has it)" },
    { "egress.proxy_script", "KIWI_EGRESS_PROXY_SCRIPT", "egress-proxy-script", T_STR,
      OFF (egress_proxy_script), NULL, 0, 0, NULL,
      "the egress proxy's script (unset: proxy.sh in ../libexec/kiwi beside the kiwi-worker binary)" },
    { "egress.probe_url", "KIWI_EGRESS_PROBE_URL", "egress-probe-url", T_STR, OFF (egress_probe_url),
      KIWI_EGRESS_PROBE_URL_DEFAULT, 0, 0, NULL,
      "https URL the egress checks fetch: Phase A must reach it, Phase B must not" },
    { "egress.image", "KIWI_EGRESS_IMAGE", "egress-image", T_STR, OFF (egress_image), "kiwi/base:bookworm",
      0, 0, NULL, "image the egress checks' sandboxes run" },
    { "worker.drain_timeout", "KIWI_DRAIN_TIMEOUT", "drain-timeout", T_INT, OFF (drain_timeout_s), "120", 0, 86400,
      NULL, "seconds in-flight tasks may take to finish after SIGTERM" },
    { "kafka.delivery_timeout", "KIWI_DELIVERY_TIMEOUT", "delivery-timeout", T_INT, OFF (delivery_timeout_s), "300", 1,
      86400, NULL,
      "seconds Kafka may take to acknowledge a message (then it failed; a result is produced again, its task's "
      "offset uncommitted until then; kiwi: 30, a person waits on it)" },
    { "log.level", "KIWI_LOG_LEVEL", "log-level", T_ENUM, OFF (log_level), "info", 0, 0, "debug|info|warn|error",
      "log threshold" },
    { "gc.mirror_idle", "KIWI_GC_MIRROR_IDLE", "gc-mirror-idle", T_INT, OFF (gc_mirror_idle_s), "604800", 600,
      31536000, NULL, "seconds a repository mirror may go unused before the clean-up removes it" },
    { "gc.snapshot_idle", "KIWI_GC_SNAPSHOT_IDLE", "gc-snapshot-idle", T_INT, OFF (gc_snapshot_idle_s), "604800", 600,
      31536000, NULL,
      "seconds an install snapshot may go unused before the clean-up removes it (one whose cache entry expired "
      "goes after 10 min)" },
    { "gc.disk_high", "KIWI_GC_DISK_HIGH", "gc-disk-high", T_INT, OFF (gc_disk_high), "85", 1, 100, NULL,
      "percent used of the state dir's filesystem above which the least recently used mirrors and snapshots are "
      "removed (down to KIWI_GC_DISK_LOW)" },
    { "gc.disk_low", "KIWI_GC_DISK_LOW", "gc-disk-low", T_INT, OFF (gc_disk_low), "75", 0, 99, NULL,
      "percent used the watermark clean-up brings the state dir's filesystem down to (below KIWI_GC_DISK_HIGH)" },
    { "metrics.addr", "KIWI_METRICS_ADDR", "metrics-addr", T_ADDR, OFF (metrics_addr), NULL, 0, 0, NULL,
      "where to serve Prometheus metrics (GET /metrics; docs/operations.md), e.g. 127.0.0.1:9464 (unset or "
      "empty: not served)" },
    { "result.max_bytes", "KIWI_RESULT_MAX_BYTES", "result-max-bytes", T_INT, OFF (result_max_bytes), "900000", 4096,
      104857600, NULL,
      "ceiling on an encoded result (keep it below the results topic's max.message.bytes): a larger diff is cut "
      "to what fits and kept whole in Redis kiwi:diff:<task> and <state>/results/<task>.diff" },
};

#define NSETTINGS (sizeof settings / sizeof settings[0])

/* Other names that set an entry: the spec's spellings. */
static const struct {
    const char *alias;
    const char *key;
} aliases[] = {
    { "KIWI_SANDBOX_RUNTIME", "sandbox.driver" },
    { "sandbox-runtime", "sandbox.driver" },
    { "TaskTimeoutSeconds", "task.timeout" },
    { "MaxSandboxDiskMB", "task.max_disk_mb" },
};

static char **
str_field (kiwi_worker_config *c, const setting *s)
{
    return (char **) ((char *) c + s->offset);
}

static int64_t *
int_field (kiwi_worker_config *c, const setting *s)
{
    return (int64_t *) ((char *) c + s->offset);
}

static double *
num_field (kiwi_worker_config *c, const setting *s)
{
    return (double *) ((char *) c + s->offset);
}

static bool *
bool_field (kiwi_worker_config *c, const setting *s)
{
    return (bool *) ((char *) c + s->offset);
}

static const setting *
find (const char *name)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp (name, aliases[i].alias) == 0)
            name = aliases[i].key;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        if (strcmp (name, s->key) == 0 || (s->env && strcmp (name, s->env) == 0)
            || (s->flag && strcmp (name, s->flag) == 0))
            return s;
    }
    return NULL;
}

static void
accepted (const setting *s, char *buf, size_t cap)
{
    switch (s->type) {
    case T_INT:
        snprintf (buf, cap, "an integer from %lld to %lld", (long long) s->min, (long long) s->max);
        break;
    case T_BOOL:
        snprintf (buf, cap, "true, false, 1, 0, yes, no");
        break;
    case T_ENUM:
        snprintf (buf, cap, "%s", s->values);
        break;
    case T_STR:
    case T_SECRET:
        snprintf (buf, cap, "a non-empty string");
        break;
    case T_LIST:
        snprintf (buf, cap, "a comma-separated list, may be empty");
        break;
    case T_ADDR:
        snprintf (buf, cap, "%s, or empty: none", KIWI_METRICS_ADDR_FORM);
        break;
    case T_NUM:
        snprintf (buf, cap, "a number from %lld to %lld", (long long) s->min, (long long) s->max);
        break;
    }
}

static int
enum_ok (const char *values, const char *v)
{
    size_t vl = strlen (v);
    for (const char *p = values; *p;) {
        size_t l = strcspn (p, "|");
        if (l == vl && strncmp (p, v, l) == 0)
            return 1;
        p += l;
        if (*p == '|')
            p++;
    }
    return 0;
}

static int
apply (kiwi_worker_config *c, const setting *s, const char *value, const char *origin, const char *as,
       kiwi_error_t *err)
{
    char acc[160];
    accepted (s, acc, sizeof acc);
    switch (s->type) {
    case T_ADDR: {
        kiwi_error_t why = NULL;
        if (*value != '\0' && kiwi_metrics_addr_check (value, &why) < 0) {
            kiwi_error_make (err, 0, "%s: %s: invalid value `%s`: %s (accepted: %s)", origin, as, value,
                             kiwi_error_msg (why), acc);
            kiwi_error_free (&why);
            return -1;
        }
        char *dup = *value ? strdup (value) : NULL;
        if (*value && dup == NULL)
            return kiwi_error_make (err, ENOMEM, "%s", as);
        free (*str_field (c, s));
        *str_field (c, s) = dup;
        return 0;
    }
    case T_STR:
    case T_SECRET:
    case T_ENUM:
    case T_LIST: {
        if (*value == '\0' && s->type != T_LIST)
            return kiwi_error_make (err, 0, "%s: %s: empty value (accepted: %s)", origin, as, acc);
        if (s->type == T_ENUM && !enum_ok (s->values, value))
            return kiwi_error_make (err, 0, "%s: %s: invalid value `%s` (accepted: %s)", origin, as, value, acc);
        char *dup = strdup (value);
        if (dup == NULL)
            return kiwi_error_make (err, ENOMEM, "%s", as);
        free (*str_field (c, s));
        *str_field (c, s) = dup;
        return 0;
    }
    case T_INT: {
        char *end = NULL;
        errno = 0;
        long long v = strtoll (value, &end, 10);
        if (errno != 0 || end == value || *end != '\0' || v < s->min || v > s->max)
            return kiwi_error_make (err, 0, "%s: %s: invalid value `%s` (accepted: %s)", origin, as, value, acc);
        *int_field (c, s) = v;
        return 0;
    }
    case T_NUM: {
        char *end = NULL;
        errno = 0;
        double v = strtod (value, &end);
        if (errno != 0 || end == value || *end != '\0' || v < (double) s->min || v > (double) s->max)
            return kiwi_error_make (err, 0, "%s: %s: invalid value `%s` (accepted: %s)", origin, as, value, acc);
        *num_field (c, s) = v;
        return 0;
    }
    case T_BOOL: {
        static const char *const yes[] = { "true", "1", "yes", "on" }, *const no[] = { "false", "0", "no", "off" };
        for (size_t i = 0; i < 4; i++) {
            if (strcasecmp (value, yes[i]) == 0) {
                *bool_field (c, s) = true;
                return 0;
            }
            if (strcasecmp (value, no[i]) == 0) {
                *bool_field (c, s) = false;
                return 0;
            }
        }
        return kiwi_error_make (err, 0, "%s: %s: invalid value `%s` (accepted: %s)", origin, as, value, acc);
    }
    }
    return -1;
}

/* kafka.property.NAME = VALUE: one librdkafka property, kept in order. */
static int
set_kafka_property (kiwi_worker_config *c, const char *name, const char *value, const char *origin,
                    kiwi_error_t *err)
{
    const char *prop = name + strlen (KIWI_KAFKA_PROPERTY_PREFIX);
    for (const char *p = prop; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '.' || *p == '_' || *p == '-'))
            return kiwi_error_make (err, 0, "%s: %s: `%s` is not a librdkafka property name", origin, name, prop);
    if (*prop == '\0')
        return kiwi_error_make (err, 0, "%s: %s: no property name after the prefix", origin, name);
    char **grown = realloc (c->kafka_props, (c->n_kafka_props + 3) * sizeof *grown);
    if (grown == NULL)
        return kiwi_error_make (err, ENOMEM, "%s", name);
    c->kafka_props = grown;
    grown[c->n_kafka_props] = strdup (prop);
    grown[c->n_kafka_props + 1] = strdup (value);
    grown[c->n_kafka_props + 2] = NULL;
    if (grown[c->n_kafka_props] == NULL || grown[c->n_kafka_props + 1] == NULL) {
        free (grown[c->n_kafka_props]);
        free (grown[c->n_kafka_props + 1]);
        grown[c->n_kafka_props] = NULL;
        return kiwi_error_make (err, ENOMEM, "%s", name);
    }
    c->n_kafka_props += 2;
    return 0;
}

int
kiwi_worker_config_kafka_props (const kiwi_worker_config *c, kiwi_strv *pairs, kiwi_error_t *err)
{
    for (size_t i = 0; i + 1 < c->n_kafka_props; i += 2)
        if (kiwi_strv_add (pairs, c->kafka_props[i]) < 0 || kiwi_strv_add (pairs, c->kafka_props[i + 1]) < 0)
            return kiwi_error_make (err, ENOMEM, "kafka properties");
    return kiwi_kafka_props_parse (c->kafka_properties, "KIWI_KAFKA_PROPERTIES", pairs, err);
}

int
kiwi_worker_config_set (kiwi_worker_config *c, const char *name, const char *value, const char *origin,
                        kiwi_error_t *err)
{
    if (strncmp (name, KIWI_KAFKA_PROPERTY_PREFIX, strlen (KIWI_KAFKA_PROPERTY_PREFIX)) == 0)
        return set_kafka_property (c, name, value, origin, err);
    const setting *s = find (name);
    if (s == NULL)
        return kiwi_error_make (err, 0, "%s: unknown setting `%s` (kiwi-worker --help-config lists them)", origin,
                                name);
    return apply (c, s, value, origin, name, err);
}

void
kiwi_worker_config_init (kiwi_worker_config *c)
{
    memset (c, 0, sizeof *c);
    for (size_t i = 0; i < NSETTINGS; i++)
        if (settings[i].def != NULL)
            apply (c, &settings[i], settings[i].def, "default", settings[i].key, NULL);
    char host[256] = "worker";
    if (gethostname (host, sizeof host - 1) == 0)
        host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.'
              || *p == '-' || *p == '_'))
            *p = '-';
    c->worker_id = strdup (host);
}

void
kiwi_worker_config_clear (kiwi_worker_config *c)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (settings[i].type == T_STR || settings[i].type == T_ENUM || settings[i].type == T_LIST
            || settings[i].type == T_SECRET || settings[i].type == T_ADDR) {
            free (*str_field (c, &settings[i]));
            *str_field (c, &settings[i]) = NULL;
        }
    for (size_t i = 0; i < c->n_kafka_props; i++)
        free (c->kafka_props[i]);
    free (c->kafka_props);
    c->kafka_props = NULL;
    c->n_kafka_props = 0;
}

/* One entry of the config file (common/config-file.h): a setting of this
 * table or a kafka.property.NAME; a key of kiwi's is ignored (the file may
 * be shared), any other refused (common/setting-keys.h). */
static int
config_entry (const char *key, const char *val, const char *origin, void *ud, kiwi_error_t *err)
{
    kiwi_worker_config *c = ud;
    if (strncmp (key, KIWI_KAFKA_PROPERTY_PREFIX, strlen (KIWI_KAFKA_PROPERTY_PREFIX)) != 0 && find (key) == NULL) {
        if (kiwi_setting_key_foreign (key, KIWI_PROGRAM_WORKER, "kiwi-worker", origin, 0, err) < 0)
            return -1;
        kiwi_debug ("%s: `%s` is kiwi's; ignored", origin, key);
        return 0;
    }
    return kiwi_worker_config_set (c, key, val, origin, err);
}

static int
load_file (kiwi_worker_config *c, const char *path, kiwi_error_t *err)
{
    return kiwi_config_file_read (path, 0, config_entry, c, err);
}

int
kiwi_worker_config_load (kiwi_worker_config *c, const char *file, const char *const *envp, int argc, char **argv,
                         int from, int *rest_index, kiwi_error_t *err)
{
    /* a config file named on the command line or in the environment */
    for (int i = from; i < argc && file == NULL; i++) {
        if (strcmp (argv[i], "--config") == 0 && i + 1 < argc)
            file = argv[i + 1];
        else if (strncmp (argv[i], "--config=", 9) == 0)
            file = argv[i] + 9;
    }
    for (size_t i = 0; file == NULL && envp && envp[i]; i++)
        if (strncmp (envp[i], "KIWI_CONFIG=", 12) == 0)
            file = envp[i] + 12;
    if (file != NULL && *file && load_file (c, file, err) < 0)
        return -1;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *names[2] = { settings[i].env, NULL };
        for (size_t a = 0; a < sizeof aliases / sizeof aliases[0]; a++)
            if (strcmp (aliases[a].key, settings[i].key) == 0 && aliases[a].alias[0] >= 'A'
                && aliases[a].alias[0] <= 'Z' && strncmp (aliases[a].alias, "KIWI_", 5) == 0)
                names[1] = aliases[a].alias;
        /* the primary name wins over its alias: apply the alias first */
        for (int k = 1; k >= 0; k--) {
            const char *name = names[k];
            if (name == NULL)
                continue;
            size_t nl = strlen (name);
            for (size_t e = 0; envp && envp[e]; e++)
                if (strncmp (envp[e], name, nl) == 0 && envp[e][nl] == '=')
                    if (apply (c, &settings[i], envp[e] + nl + 1, "environment", name, err) < 0)
                        return -1;
        }
    }
    int i = from;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || strcmp (a, "-") == 0)
            break;
        if (strcmp (a, "--") == 0) {
            i++;
            break;
        }
        const char *name = a + (a[1] == '-' ? 2 : 1);
        char buf[256];
        const char *value = NULL;
        const char *eq = strchr (name, '=');
        if (eq != NULL) {
            snprintf (buf, sizeof buf, "%.*s", (int) (eq - name), name);
            name = buf;
            value = eq + 1;
        }
        if (strcmp (name, "config") == 0) {
            if (value == NULL)
                i++;
            continue;
        }
        const setting *s = NULL;
        if (strcmp (name, "sandbox-runtime") == 0)
            s = find ("sandbox.driver");
        for (size_t k = 0; s == NULL && k < NSETTINGS; k++)
            if (settings[k].flag && strcmp (settings[k].flag, name) == 0)
                s = &settings[k];
        if (s == NULL)
            return kiwi_error_make (err, 0, "unknown option `%s` (see --help)", a);
        if (value == NULL) {
            if (s->type == T_BOOL && (i + 1 >= argc || argv[i + 1][0] == '-'))
                value = "true";
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return kiwi_error_make (err, 0, "option `%s` needs a value", a);
        }
        if (apply (c, s, value, "command line", a, err) < 0)
            return -1;
    }
    if (rest_index)
        *rest_index = i;
    if (c->gc_disk_low >= c->gc_disk_high)
        return kiwi_error_make (err, 0, "KIWI_GC_DISK_LOW (%lld) must be below KIWI_GC_DISK_HIGH (%lld)",
                                (long long) c->gc_disk_low, (long long) c->gc_disk_high);
    /* the scripts' defaults are where this binary is: --print-config shows them */
    char **scripts[] = { &c->egress_script, &c->egress_proxy_script };
    const char *names[] = { "egress.sh", "proxy.sh" };
    for (int k = 0; k < 2; k++) {
        if (*scripts[k] != NULL && **scripts[k])
            continue;
        char buf[PATH_MAX];
        const char *path = kiwi_worker_libexec (NULL, names[k], buf, sizeof buf);
        if (path == NULL)
            return kiwi_error_make (err, errno, "where kiwi-worker is cannot be read, so neither can %s's default "
                                                "(set %s)", names[k], k ? "KIWI_EGRESS_PROXY_SCRIPT" : "KIWI_EGRESS_SCRIPT");
        free (*scripts[k]);
        if ((*scripts[k] = strdup (path)) == NULL)
            return kiwi_error_make (err, ENOMEM, "settings");
    }
    return 0;
}

void
kiwi_worker_config_help (FILE *out)
{
    fprintf (out, "%-34s %-32s %s\n", "flag", "environment", "default: meaning");
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        char flag[80];
        snprintf (flag, sizeof flag, "--%s", s->flag);
        char acc[160];
        accepted (s, acc, sizeof acc);
        fprintf (out, "%-34s %-32s %s: %s [%s; file key %s]\n", flag, s->env ? s->env : "-",
                 s->def ? s->def : "(unset)", s->help, acc, s->key);
    }
    fprintf (out, "\nAlso accepted: KIWI_SANDBOX_RUNTIME and -sandbox-runtime for the sandbox driver; a config "
                  "file with --config FILE or KIWI_CONFIG (key = value lines); in it, kafka.property.NAME = VALUE "
                  "for any librdkafka property (KIWI_KAFKA_PROPERTIES is applied after them).\n");
}

void
kiwi_worker_config_dump (const kiwi_worker_config *c, FILE *out)
{
    kiwi_worker_config *m = (kiwi_worker_config *) c;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        switch (s->type) {
        case T_STR:
        case T_ENUM:
        case T_LIST:
        case T_ADDR: {
            const char *v = *str_field (m, s);
            fprintf (out, "%s = %s\n", s->key, v ? v : "");
            break;
        }
        case T_SECRET: {
            const char *v = *str_field (m, s);
            fprintf (out, "# %s = %s\n", s->key, v && *v ? "(set, not shown)" : "(unset)");
            break;
        }
        case T_INT:
            fprintf (out, "%s = %lld\n", s->key, (long long) *int_field (m, s));
            break;
        case T_BOOL:
            fprintf (out, "%s = %s\n", s->key, *bool_field (m, s) ? "true" : "false");
            break;
        case T_NUM:
            fprintf (out, "%s = %g\n", s->key, *num_field (m, s));
            break;
        }
    }
    for (size_t i = 0; i + 1 < c->n_kafka_props; i += 2)
        if (kiwi_kafka_prop_is_secret (c->kafka_props[i]))
            fprintf (out, "# %s%s = (set, not shown)\n", KIWI_KAFKA_PROPERTY_PREFIX, c->kafka_props[i]);
        else
            fprintf (out, "%s%s = %s\n", KIWI_KAFKA_PROPERTY_PREFIX, c->kafka_props[i], c->kafka_props[i + 1]);
}

const char *
kiwi_worker_libexec (const char *path, const char *name, char *buf, size_t cap)
{
    if (path != NULL && *path)
        return path;
    char self[PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr (self, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    int w = snprintf (buf, cap, "%s/../libexec/kiwi/%s", self, name);
    if (w < 0 || (size_t) w >= cap) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    return buf;
}

const char *
kiwi_worker_setting_key (size_t i, const char **env)
{
    if (i >= NSETTINGS)
        return NULL;
    if (env)
        *env = settings[i].env;
    return settings[i].key;
}
