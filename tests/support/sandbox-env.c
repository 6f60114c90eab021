/*
 * sandbox-env.c: see sandbox-env.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "sandbox-env.h"

#include "need.h"

#include <stdio.h>
#include <unistd.h>

kiwi_sandbox_env *
kiwi_test_sandbox_env (const char *name, const char *worker_id)
{
    kiwi_error_t err = NULL;
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (name, &err);
    assert_non_null (drv);
    /* the env keeps its own copy of the id (kiwi_sandbox_env_open) */
    char id[128];
    snprintf (id, sizeof id, "%s-%d", worker_id, (int) getpid ());
    kiwi_sandbox_config cfg = {
        .docker_socket = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock"),
        .state_dir = kiwi_test_env_or ("KIWI_STATE_DIR", "/var/lib/kiwi"),
        .worker_id = id,
        /* the catalogue the tests resolve with: its images are used as
         * dockerd holds them (any other is pulled, ensure_image) */
        .image_catalog = kiwi_test_env_or ("KIWI_IMAGE_CATALOG", KIWI_SOURCE_DIR "/ops/images/catalog.local.tsv"),
    };
    kiwi_sandbox_env *env = NULL;
    int rc = kiwi_sandbox_env_open (drv, &cfg, &env, &err);
    KIWI_NEED (rc == 0, "%s driver: %s", name, kiwi_error_msg (err));
    return env;
}
