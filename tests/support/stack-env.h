/*
 * stack-env.h: what integration tests know about the running stack.
 *
 * ops/stack.sh writes one env file (KEY=VALUE lines) with the addresses of
 * Kafka, Redis (with KIWI_REDIS_PASSWORD, which every test connecting to
 * Redis sends with AUTH) and dockerd; tests read it from $KIWI_STACK_ENV, else
 * $KIWI_STATE_DIR/stack.env, else /var/lib/kiwi/stack.env. Variables already
 * set in the environment win over the file.
 *
 * kiwi_test_need(): a service that is absent fails the test when
 * KIWI_REQUIRE_SERVICES=1 (the full suite, tests/run.sh) and skips it
 * visibly otherwise (a developer running one suite by hand).
 */
#ifndef KIWI_TESTS_STACK_ENV_H
#define KIWI_TESTS_STACK_ENV_H

#include <stdbool.h>
#include <stddef.h>

/* Loads the env file once; later calls are no-ops. Returns the value of
 * `key`, or NULL. Borrowed (process lifetime). */
const char *kiwi_test_env (const char *key);

/* Like kiwi_test_env(), with a default. */
const char *kiwi_test_env_or (const char *key, const char *fallback);

/* True when the full suite demands every service. */
bool kiwi_test_services_required (void);

/* A unique name for this run: prefix + pid + time. Caller frees. */
char *kiwi_test_unique (const char *prefix);

/* Runs `cmd` with /bin/sh, captures up to `cap`-1 bytes of stdout in `out`
 * (NUL-terminated); returns the exit status, or -1. */
int kiwi_test_sh (const char *cmd, char *out, size_t cap);

#endif
