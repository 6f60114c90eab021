/*
 * sandbox-env.h: a sandbox environment of one driver on the stack's dockerd
 * (KIWI_DOCKER_SOCKET, KIWI_STATE_DIR from the stack's env file), for the
 * integration tests that run phases and sandboxes themselves. Library
 * kiwi_test_sandbox_env (links kiwi_sandbox).
 */
#ifndef KIWI_TESTS_SANDBOX_ENV_H
#define KIWI_TESTS_SANDBOX_ENV_H

#include "sandbox/sandbox.h"

/* Opens driver `name`'s environment as worker "`worker_id`-<pid>": tests run
 * side by side (ctest -j), and a worker id of their own per process keeps
 * one test's sandboxes, disks and reaping apart from another's (the same
 * test in two stages or two corpus shards included). An unknown driver fails the test; one that cannot open is an absent
 * service (KIWI_NEED: fails the full suite, skips otherwise). The caller
 * closes it with kiwi_sandbox_env_close. */
kiwi_sandbox_env *kiwi_test_sandbox_env (const char *name, const char *worker_id);

#endif
