/*
 * secrets.c: the worker's and a task's secret values (see secrets.h).
 */
#include "secrets.h"

#include <string.h>

#include "phases.h"

kiwi_mask *
kiwi_worker_mask (const kiwi_worker_config *cfg, const char *const *host_env, const kiwi_task *task,
                  kiwi_error_t *err)
{
    kiwi_mask *m = kiwi_mask_new (err);
    if (m == NULL)
        return NULL;
    int rc = 0;
#define KIWI__MASK_KEY(name) rc = rc < 0 ? rc : kiwi_mask_add_env (m, host_env, name, err);
    KIWI_MODEL_KEYS (KIWI__MASK_KEY)
#undef KIWI__MASK_KEY
    for (const char *k = cfg->model_key_vars; rc == 0 && k != NULL && *k != '\0';) {
        size_t l = strcspn (k, ",");
        char name[256];
        if (l > 0 && l < sizeof name) {
            memcpy (name, k, l);
            name[l] = '\0';
            rc = kiwi_mask_add_env (m, host_env, name, err);
        }
        k += l;
        if (*k == ',')
            k++;
    }
    if (rc == 0 && cfg->git_token_var != NULL && cfg->git_token_var[0] != '\0')
        rc = kiwi_mask_add_env (m, host_env, cfg->git_token_var, err);
    for (size_t i = 0; rc == 0 && task != NULL && i < task->n_test_credentials; i++)
        rc = kiwi_mask_add_env (m, host_env, task->test_credentials[i], err);
    if (rc < 0) {
        kiwi_mask_free (m);
        kiwi_error_wrap (err, "the secret mask");
        return NULL;
    }
    return m;
}
