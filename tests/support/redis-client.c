/* redis-client.c: see redis-client.h. */
#include "redis-client.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>

#include "need.h"
#include "stack-env.h"

kiwi_test_redis_addr
kiwi_test_redis_address (void)
{
    return (kiwi_test_redis_addr) { .host = kiwi_test_env_or ("KIWI_REDIS_HOST", "127.0.0.1"),
                                    .port = atoi (kiwi_test_env_or ("KIWI_REDIS_PORT", "16379")),
                                    .user = kiwi_test_env ("KIWI_REDIS_USER"),
                                    .password = kiwi_test_env ("KIWI_REDIS_PASSWORD") };
}

redisContext *
kiwi_test_redis_connect (void)
{
    kiwi_test_redis_addr a = kiwi_test_redis_address ();
    struct timeval tv = { 5, 0 };
    redisContext *c = redisConnectWithTimeout (a.host, a.port, tv);
    KIWI_NEED (c != NULL && c->err == 0, "redis at %s:%d: %s", a.host, a.port, c ? c->errstr : "out of memory");
    /* the stack's Redis has a password (ops/stack.sh, KIWI_REDIS_PASSWORD) */
    if (a.password && *a.password) {
        redisReply *r = a.user && *a.user ? redisCommand (c, "AUTH %s %s", a.user, a.password)
                                          : redisCommand (c, "AUTH %s", a.password);
        if (r == NULL || r->type == REDIS_REPLY_ERROR)
            fail_msg ("AUTH with KIWI_REDIS_PASSWORD: %s", r ? r->str : c->errstr);
        freeReplyObject (r);
    }
    return c;
}
