/*
 * policy.h: a task's fields under the operator's policy, decided in one
 * place before anything of the task runs.
 *
 * A task message is hostile: each field that could send a secret somewhere
 * or take more of the host than the operator allows passes here. The daemon
 * calls kiwi_policy_apply() when it accepts a task (a refusal ends the task
 * with an `error` result, no task process started) and the pipeline calls it
 * again at its start (so `kiwi-worker --once` is covered too). The rules:
 *
 *   task.model.base_url   only under a prefix of KIWI_MODEL_BASE_URLS
 *                         (scheme, host, port and path compared after
 *                         parsing; empty: tasks cannot choose one)
 *   task.repo.url         a scheme of KIWI_REPO_SCHEMES (https, http, ssh,
 *                         git; ssh:// and user@host:path are ssh); local
 *                         paths and file:// only with KIWI_ALLOW_LOCAL_REPOS,
 *                         and never inside the worker's state directory
 *   the git token         only over https to a host of KIWI_GIT_TOKEN_HOSTS
 *                         (other hosts: fetched without it)
 *   task.limits.*         clamped to the operator's ceilings
 *                         (KIWI_TASK_TIMEOUT, KIWI_MAX_SANDBOX_DISK_MB,
 *                         KIWI_MAX_ROUNDS, KIWI_SESSION_BUDGET); a limit
 *                         left at the schema's default counts as not set
 *                         and gets the operator's value
 *   task.test_credentials each name in KIWI_TEST_CREDENTIALS
 *
 * A refusal is an error (code KIWI_POLICY_E_REFUSED) whose message names
 * the task field and the setting.
 *
 * Ownership: kiwi_task_policy borrows its strings from the config and the
 * task it was decided from; it owns nothing and needs no clean-up.
 */
#ifndef KIWI_WORKER_POLICY_H
#define KIWI_WORKER_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "worker/config.h"
#include "common/error.h"
#include "schemas/task.h"

enum { KIWI_POLICY_E_REFUSED = KIWI_ERR_RANGE_POLICY };

typedef struct kiwi_task_policy {
    kiwi_task_limits limits;    /* the effective limits (has_session_budget_tokens set when any applies) */
    int64_t memory_mb, pids;    /* worker-only */
    int64_t cpus;               /* worker-only: cores per sandbox */
    const char *model_base_url; /* the base URL to call, or NULL: the provider's own */
    bool git_token;             /* the git token may be sent for task.repo.url */
    char git_protocols[64];     /* git's GIT_ALLOW_PROTOCOL form: "https:ssh[:http][:git][:file]" */
    bool local_repo;            /* task.repo.url is a local path or file:// */
} kiwi_task_policy;

/* Checks the policy settings themselves, once at start: known schemes in
 * KIWI_REPO_SCHEMES, URLs in KIWI_MODEL_BASE_URLS, host[:port] entries in
 * KIWI_GIT_TOKEN_HOSTS. Returns 0, or < 0 with *err naming the setting. */
int kiwi_policy_check_config (const kiwi_worker_config *cfg, kiwi_error_t *err);

/* Decides `task` under `cfg`. Returns 0 with *out filled, or < 0 with *err
 * naming the field and the setting (code KIWI_POLICY_E_REFUSED). */
int kiwi_policy_apply (const kiwi_worker_config *cfg, const kiwi_task *task, kiwi_task_policy *out,
                       kiwi_error_t *err);

/* `task` with the effective limits of `pol` written in: a shallow copy that
 * borrows every string of `task` (do not clear it). */
kiwi_task kiwi_policy_task (const kiwi_task *task, const kiwi_task_policy *pol);

/* The effective limits as a JSON object for the accepted event:
 * {timeout_seconds, disk_mb, max_rounds, session_budget_tokens,
 * [session_budget_usd_micros,] memory_mb, pids}, plus git_token (whether
 * the token may be sent). A new reference. */
json_t *kiwi_policy_limits_json (const kiwi_task_policy *pol);

/* The parts of a URL the allow-lists compare. Lower-cased scheme and host;
 * port 0 when the scheme has no known default and none is written. */
typedef struct kiwi_url {
    char scheme[16];
    char host[256];
    int port;
    char path[2048]; /* from the first '/' up to '?' or '#'; "/" when empty */
    bool userinfo;   /* user[:password]@ before the host */
} kiwi_url;

/* Parses "scheme://[userinfo@]host[:port][/path][?query][#fragment]".
 * Returns 0, or < 0 when `s` is not such a URL. */
int kiwi_url_parse (const char *s, kiwi_url *out);

/* True when `url` falls under `prefix`: same scheme, host and port, and the
 * path of `prefix` is a prefix of url's at a segment boundary. A URL with
 * userinfo or dot segments never matches. */
bool kiwi_url_under (const char *url, const char *prefix);

#endif
