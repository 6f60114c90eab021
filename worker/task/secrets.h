/*
 * secrets.h: which values of the worker's environment are secrets Kiwi must
 * never publish, as one mask (mask.h).
 *
 *   - every model key: the values of ANTHROPIC_API_KEY, OPENAI_API_KEY,
 *     GEMINI_API_KEY, GOOGLE_API_KEY (KIWI_MODEL_KEYS in phases.h) and of
 *     the names listed in KIWI_MODEL_KEY_VARS;
 *   - the git token: the value of the variable KIWI_GIT_TOKEN_VAR names
 *     (KIWI_GIT_TOKEN by default);
 *   - for a task, the values of its test credentials: every name it lists
 *     that is set in the worker's environment and that the sandbox policy
 *     does not refuse outright (kiwi_phase_is_secret_name: model keys and
 *     Kiwi's own KIWI_* settings never enter a sandbox, so a task cannot
 *     have, say, the worker id masked out of the worker's own log).
 *
 * The task process masks its events, result, logs, verify cache entries and
 * model prompts with the task's mask; the daemon masks its logs and dead
 * letters with the worker's (task NULL).
 */
#ifndef KIWI_WORKER_SECRETS_H
#define KIWI_WORKER_SECRETS_H

#include "worker/config.h"
#include "common/mask.h"
#include "schemas/task.h"

/* The mask for `task` (NULL: the worker's own secrets only) from `host_env`
 * ("K=V" list, e.g. environ). Caller frees with kiwi_mask_free. NULL with
 * *err on allocation failure. */
kiwi_mask *kiwi_worker_mask (const kiwi_worker_config *cfg, const char *const *host_env, const kiwi_task *task,
                             kiwi_error_t *err);

#endif
