/*
 * secrets.c: the worker's and a task's secret values (see secrets.h).
 */
#include "worker/task/secrets.h"

#include <errno.h>
#include <string.h>

#include "sandbox/phases.h"
#include "common/strv.h"

kiwi_mask *
kiwi_worker_mask (const kiwi_worker_config *cfg, const char *const *host_env, const kiwi_task *task,
                  kiwi_error_t *err)
{
    cleanup_strv kiwi_strv extra = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&extra, cfg->model_key_vars, NULL, err) < 0) {
        kiwi_error_wrap (err, "the secret mask");
        return NULL;
    }
    kiwi_mask *m = kiwi_mask_new (err);
    if (m == NULL)
        return NULL;
    int rc = 0;
#define KIWI__MASK_KEY(name) rc = rc < 0 ? rc : kiwi_mask_add_env (m, host_env, name, err);
    KIWI_MODEL_KEYS (KIWI__MASK_KEY)
#undef KIWI__MASK_KEY
    for (size_t i = 0; rc == 0 && i < extra.n; i++)
        rc = kiwi_mask_add_env (m, host_env, extra.v[i], err);
    if (rc == 0 && cfg->git_token_var != NULL && cfg->git_token_var[0] != '\0')
        rc = kiwi_mask_add_env (m, host_env, cfg->git_token_var, err);
    /* the credentials the policy lets into a sandbox: a name it refuses
     * (a model key, Kiwi's own KIWI_* settings) never reaches one, and the
     * secrets among those are in the mask already */
    kiwi_phase_config pc = { .host_env = host_env, .extra_model_keys = kiwi_strv_list (&extra) };
    for (size_t i = 0; rc == 0 && task != NULL && i < task->n_test_credentials; i++)
        if (!kiwi_phase_is_secret_name (&pc, task->test_credentials[i]))
            rc = kiwi_mask_add_env (m, host_env, task->test_credentials[i], err);
    if (rc < 0) {
        kiwi_mask_free (m);
        kiwi_error_wrap (err, "the secret mask");
        return NULL;
    }
    return m;
}
