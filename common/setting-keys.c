/*
 * setting-keys.c: every config-file key of kiwi and kiwi-worker, with its
 * environment variable and the programs that read it (setting-keys.h).
 * Kept equal to the two programs' tables by test_setting_keys.
 */
#include "setting-keys.h"

#include <string.h>

const kiwi_setting_key kiwi_setting_keys[] = {
    { "worker.id", "KIWI_WORKER_ID", KIWI_PROGRAM_WORKER, NULL },
    { "worker.slots", "KIWI_SLOTS", KIWI_PROGRAM_WORKER, NULL },
    { "state.dir", "KIWI_STATE_DIR", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "state_dir" },
    { "kafka.brokers", "KIWI_KAFKA_BROKERS", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "brokers" },
    { "kafka.group", "KIWI_GROUP", KIWI_PROGRAM_WORKER, NULL },
    { "topic.tasks", "KIWI_TOPIC_TASKS", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "topic_tasks" },
    { "topic.progress", "KIWI_TOPIC_PROGRESS", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "topic_progress" },
    { "topic.results", "KIWI_TOPIC_RESULTS", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "topic_results" },
    { "topic.heartbeats", "KIWI_TOPIC_HEARTBEATS", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "topic_heartbeats" },
    { "topic.dlq", "KIWI_TOPIC_DLQ", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "topic_dlq" },
    { "redis.host", "KIWI_REDIS_HOST", KIWI_PROGRAM_WORKER, NULL },
    { "redis.port", "KIWI_REDIS_PORT", KIWI_PROGRAM_WORKER, NULL },
    { "redis.password", "KIWI_REDIS_PASSWORD", KIWI_PROGRAM_WORKER, NULL },
    { "redis.user", "KIWI_REDIS_USER", KIWI_PROGRAM_WORKER, NULL },
    { "kafka.properties", "KIWI_KAFKA_PROPERTIES", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "kafka_properties" },
    { "sandbox.install_deny", "KIWI_INSTALL_DENY", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.install_egress", "KIWI_INSTALL_EGRESS", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.install_proxy_ports", "KIWI_INSTALL_PROXY_PORTS", KIWI_PROGRAM_WORKER, NULL },
    { "lease.ttl", "KIWI_LEASE_TTL", KIWI_PROGRAM_WORKER, NULL },
    { "cache.ttl", "KIWI_CACHE_TTL", KIWI_PROGRAM_WORKER, NULL },
    { "cache.fail_ttl", "KIWI_CACHE_FAIL_TTL", KIWI_PROGRAM_WORKER, NULL },
    { "done.ttl", "KIWI_DONE_TTL", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.driver", "KIWI_SANDBOX", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.docker_socket", "KIWI_DOCKER_SOCKET", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.catalog", "KIWI_IMAGE_CATALOG", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.registries", "KIWI_IMAGE_REGISTRIES", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.registry_auth_file", "KIWI_REGISTRY_AUTH_FILE", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.pull_timeout", "KIWI_IMAGE_PULL_TIMEOUT", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.pull_max_mb", "KIWI_IMAGE_PULL_MAX_MB", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.ca_bundle", "KIWI_CA_BUNDLE", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.install_timeout", "KIWI_INSTALL_TIMEOUT", KIWI_PROGRAM_WORKER, NULL },
    { "session.allow_test_creds", "KIWI_SESSION_ALLOW_TEST_CREDS", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.snapshot_copy", "KIWI_SNAPSHOT_COPY", KIWI_PROGRAM_WORKER, NULL },
    { "store.url", "KIWI_STORE_URL", KIWI_PROGRAM_WORKER, NULL },
    { "store.user", "KIWI_STORE_USER", KIWI_PROGRAM_WORKER, NULL },
    { "store.password", "KIWI_STORE_PASSWORD", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.model_key_vars", "KIWI_MODEL_KEY_VARS", KIWI_PROGRAM_WORKER, NULL },
    { "task.timeout", "KIWI_TASK_TIMEOUT", KIWI_PROGRAM_WORKER, NULL },
    { "task.max_disk_mb", "KIWI_MAX_SANDBOX_DISK_MB", KIWI_PROGRAM_WORKER, NULL },
    { "session.max_rounds", "KIWI_MAX_ROUNDS", KIWI_PROGRAM_WORKER, NULL },
    { "session.budget_tokens", "KIWI_SESSION_BUDGET", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.memory_mb", "KIWI_SANDBOX_MEMORY_MB", KIWI_PROGRAM_WORKER, NULL },
    { "sandbox.pids", "KIWI_SANDBOX_PIDS", KIWI_PROGRAM_WORKER, NULL },
    { "model.provider", "KIWI_MODEL_PROVIDER", KIWI_PROGRAM_WORKER, NULL },
    { "model.name", "KIWI_MODEL", KIWI_PROGRAM_WORKER, NULL },
    { "model.base_url", "KIWI_MODEL_BASE_URL", KIWI_PROGRAM_WORKER, NULL },
    { "model.price_input", "KIWI_MODEL_PRICE_INPUT", KIWI_PROGRAM_WORKER, NULL },
    { "model.price_output", "KIWI_MODEL_PRICE_OUTPUT", KIWI_PROGRAM_WORKER, NULL },
    { "git.token_var", "KIWI_GIT_TOKEN_VAR", KIWI_PROGRAM_WORKER, NULL },
    { "git.timeout", "KIWI_CLONE_TIMEOUT", KIWI_PROGRAM_WORKER, NULL },
    { "git.max_mb", "KIWI_CLONE_MAX_MB", KIWI_PROGRAM_WORKER, NULL },
    { "git.max_checkout_mb", "KIWI_CHECKOUT_MAX_MB", KIWI_PROGRAM_WORKER, NULL },
    { "git.max_checkout_files", "KIWI_CHECKOUT_MAX_FILES", KIWI_PROGRAM_WORKER, NULL },
    { "model.base_urls", "KIWI_MODEL_BASE_URLS", KIWI_PROGRAM_WORKER, NULL },
    { "git.token_hosts", "KIWI_GIT_TOKEN_HOSTS", KIWI_PROGRAM_WORKER, NULL },
    { "repo.schemes", "KIWI_REPO_SCHEMES", KIWI_PROGRAM_WORKER, NULL },
    { "repo.allow_local", "KIWI_ALLOW_LOCAL_REPOS", KIWI_PROGRAM_WORKER, NULL },
    { "task.test_credentials", "KIWI_TEST_CREDENTIALS", KIWI_PROGRAM_WORKER, NULL },
    { "health.heartbeat_interval", "KIWI_HEARTBEAT_INTERVAL", KIWI_PROGRAM_WORKER, NULL },
    { "health.egress_interval", "KIWI_EGRESS_INTERVAL", KIWI_PROGRAM_WORKER, NULL },
    { "health.egress_stop_when_degraded", "KIWI_EGRESS_STOP_WHEN_DEGRADED", KIWI_PROGRAM_WORKER, NULL },
    { "health.egress_apply", "KIWI_EGRESS_APPLY", KIWI_PROGRAM_WORKER, NULL },
    { "egress.script", "KIWI_EGRESS_SCRIPT", KIWI_PROGRAM_WORKER, NULL },
    { "egress.proxy_script", "KIWI_EGRESS_PROXY_SCRIPT", KIWI_PROGRAM_WORKER, NULL },
    { "egress.probe_url", "KIWI_EGRESS_PROBE_URL", KIWI_PROGRAM_WORKER, NULL },
    { "egress.image", "KIWI_EGRESS_IMAGE", KIWI_PROGRAM_WORKER, NULL },
    { "worker.drain_timeout", "KIWI_DRAIN_TIMEOUT", KIWI_PROGRAM_WORKER, NULL },
    { "kafka.delivery_timeout", "KIWI_DELIVERY_TIMEOUT", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "delivery_timeout" },
    { "log.level", "KIWI_LOG_LEVEL", KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER, "log_level" },
    { "gc.mirror_idle", "KIWI_GC_MIRROR_IDLE", KIWI_PROGRAM_WORKER, NULL },
    { "gc.snapshot_idle", "KIWI_GC_SNAPSHOT_IDLE", KIWI_PROGRAM_WORKER, NULL },
    { "gc.disk_high", "KIWI_GC_DISK_HIGH", KIWI_PROGRAM_WORKER, NULL },
    { "gc.disk_low", "KIWI_GC_DISK_LOW", KIWI_PROGRAM_WORKER, NULL },
    { "metrics.addr", "KIWI_METRICS_ADDR", KIWI_PROGRAM_WORKER, NULL },
    { "result.max_bytes", "KIWI_RESULT_MAX_BYTES", KIWI_PROGRAM_WORKER, NULL },
    { "stack.env", "KIWI_STACK_ENV", KIWI_PROGRAM_KIWI, "stack_env" },
    { "ci.test_command", "KIWI_CI_TEST_COMMAND", KIWI_PROGRAM_KIWI, "ci_test_command" },
    { "ci.goal", "KIWI_CI_GOAL", KIWI_PROGRAM_KIWI, "ci_goal" },
    { "ci.webhook_secret", "KIWI_CI_WEBHOOK_SECRET", KIWI_PROGRAM_KIWI, "ci_webhook_secret" },
    { "ci.max_body", "KIWI_CI_MAX_BODY", KIWI_PROGRAM_KIWI, "ci_max_body" },
    { "batch.dir", "KIWI_BATCH_DIR", KIWI_PROGRAM_KIWI, "batch_dir" },
    { "batch.progress_interval", "KIWI_PROGRESS_INTERVAL", KIWI_PROGRAM_KIWI, "progress_interval" },
    { "cli.refresh", "KIWI_REFRESH", KIWI_PROGRAM_KIWI, "refresh" },
    { "cli.clock_skew", "KIWI_CLOCK_SKEW", KIWI_PROGRAM_KIWI, "clock_skew" },
    { "fleet.gone_after", "KIWI_GONE_AFTER", KIWI_PROGRAM_KIWI, "gone_after" },
};

const size_t kiwi_n_setting_keys = sizeof kiwi_setting_keys / sizeof kiwi_setting_keys[0];

const kiwi_setting_key *
kiwi_setting_key_find (const char *key)
{
    for (size_t i = 0; i < kiwi_n_setting_keys; i++)
        if (strcmp (kiwi_setting_keys[i].key, key) == 0)
            return &kiwi_setting_keys[i];
    return NULL;
}

int
kiwi_setting_key_foreign (const char *key, unsigned self, const char *program, const char *origin, int code,
                          kiwi_error_t *err)
{
    const kiwi_setting_key *k = kiwi_setting_key_find (key);
    if (k != NULL && !(k->programs & self))
        return 0; /* the other program's: the file is shared */
    if (k != NULL) /* this program's own: the caller should have known it */
        return kiwi_error_make_code (err, code, "%s: `%s` is not a setting of %s", origin, key, program);
    for (size_t i = 0; i < kiwi_n_setting_keys; i++)
        if (kiwi_setting_keys[i].was != NULL && strcmp (kiwi_setting_keys[i].was, key) == 0)
            return kiwi_error_make_code (err, code, "%s: unknown key `%s`: it is spelled `%s` now (the same key in kiwi "
                                            "and kiwi-worker)",
                                    origin, key, kiwi_setting_keys[i].key);
    return kiwi_error_make_code (err, code,
                                 "%s: unknown key `%s`: neither kiwi nor kiwi-worker reads it (`kiwi --help-config` and "
                            "`kiwi-worker --help-config` list their settings)",
                            origin, key);
}
