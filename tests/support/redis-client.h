/*
 * redis-client.h: a connection to the stack's Redis as every client of the
 * stack makes it: the address from the env file (stack-env.h), then AUTH
 * with KIWI_REDIS_PASSWORD (and KIWI_REDIS_USER) when the stack has one.
 * An absent Redis skips the test, or fails it in the full suite (need.h);
 * a refused AUTH fails it. Call from inside a cmocka test or setup.
 */
#ifndef KIWI_TESTS_REDIS_CLIENT_H
#define KIWI_TESTS_REDIS_CLIENT_H

#include <hiredis/hiredis.h>

typedef struct kiwi_test_redis_addr {
    const char *host;     /* borrowed (process lifetime) */
    int port;
    const char *user;     /* or NULL */
    const char *password; /* or NULL */
} kiwi_test_redis_addr;

/* The stack's Redis address and credentials. */
kiwi_test_redis_addr kiwi_test_redis_address (void);

/* Connected and authenticated; the caller frees it with redisFree. */
redisContext *kiwi_test_redis_connect (void);

#endif
