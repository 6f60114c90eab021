/*
 * test_stack_redis.c: hiredis reads back from the real Redis what it wrote,
 * binary-safe, with expiry; the stack's Redis wants its password
 * (KIWI_REDIS_PASSWORD from stack.env, made by ops/stack.sh).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "need.h"

static redisContext *
connect_plain (void)
{
    const char *host = kiwi_test_env_or ("KIWI_REDIS_HOST", "127.0.0.1");
    int port = atoi (kiwi_test_env_or ("KIWI_REDIS_PORT", "16379"));
    struct timeval tv = { 5, 0 };
    redisContext *c = redisConnectWithTimeout (host, port, tv);
    KIWI_NEED (c != NULL && c->err == 0, "redis at %s:%d: %s", host, port, c ? c->errstr : "out of memory");
    return c;
}

/* Connected and authenticated as every client of the stack is. */
static redisContext *
connect_or_skip (void)
{
    redisContext *c = connect_plain ();
    const char *pw = kiwi_test_env ("KIWI_REDIS_PASSWORD"), *user = kiwi_test_env ("KIWI_REDIS_USER");
    if (pw && *pw) {
        redisReply *r = user && *user ? redisCommand (c, "AUTH %s %s", user, pw) : redisCommand (c, "AUTH %s", pw);
        assert_non_null (r);
        if (r->type == REDIS_REPLY_ERROR)
            fail_msg ("AUTH with KIWI_REDIS_PASSWORD: %s", r->str);
        freeReplyObject (r);
    }
    return c;
}

static void
test_password_required (void **state)
{
    /* ops/stack.sh gives its Redis a password and writes it to stack.env;
     * without it, nothing is served */
    const char *pw = kiwi_test_env ("KIWI_REDIS_PASSWORD");
    KIWI_NEED (pw && *pw, "KIWI_REDIS_PASSWORD in the stack's env file: Redis runs without a password (ops/stack.sh "
                          "up sets one)");
    redisContext *c = connect_plain ();
    redisReply *r = redisCommand (c, "GET kiwi:test:no-auth");
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_ERROR);
    assert_non_null (strstr (r->str, "NOAUTH"));
    freeReplyObject (r);
    r = redisCommand (c, "AUTH %s", "not-the-password");
    assert_int_equal (r->type, REDIS_REPLY_ERROR);
    freeReplyObject (r);
    redisFree (c);
    c = connect_or_skip ();
    r = redisCommand (c, "PING");
    assert_int_equal (r->type, REDIS_REPLY_STATUS);
    assert_string_equal (r->str, "PONG");
    freeReplyObject (r);
    redisFree (c);
}

static void
test_set_get_binary (void **state)
{
    redisContext *c = connect_or_skip ();
    char *key = kiwi_test_unique ("kiwi:test:redis");
    const char value[] = { 'k', 0, 'i', (char) 0xff, 'w', 'i' };
    redisReply *r = redisCommand (c, "SET %s %b EX 60", key, value, sizeof value);
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_STATUS);
    assert_string_equal (r->str, "OK");
    freeReplyObject (r);
    r = redisCommand (c, "GET %s", key);
    assert_int_equal (r->type, REDIS_REPLY_STRING);
    assert_int_equal (r->len, sizeof value);
    assert_memory_equal (r->str, value, sizeof value);
    freeReplyObject (r);
    r = redisCommand (c, "TTL %s", key);
    assert_int_equal (r->type, REDIS_REPLY_INTEGER);
    assert_true (r->integer > 0 && r->integer <= 60);
    freeReplyObject (r);
    r = redisCommand (c, "DEL %s", key);
    assert_int_equal (r->integer, 1);
    freeReplyObject (r);
    r = redisCommand (c, "GET %s", key);
    assert_int_equal (r->type, REDIS_REPLY_NIL);
    freeReplyObject (r);
    free (key);
    redisFree (c);
}

static void
test_set_nx_is_exclusive (void **state)
{
    /* the primitive a task lease rests on: only one SET NX wins */
    redisContext *c = connect_or_skip ();
    char *key = kiwi_test_unique ("kiwi:test:lease");
    redisReply *a = redisCommand (c, "SET %s worker-a NX PX 5000", key);
    redisReply *b = redisCommand (c, "SET %s worker-b NX PX 5000", key);
    assert_int_equal (a->type, REDIS_REPLY_STATUS);
    assert_int_equal (b->type, REDIS_REPLY_NIL);
    freeReplyObject (a);
    freeReplyObject (b);
    redisReply *g = redisCommand (c, "GET %s", key);
    assert_string_equal (g->str, "worker-a");
    freeReplyObject (g);
    freeReplyObject (redisCommand (c, "DEL %s", key));
    free (key);
    redisFree (c);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_set_get_binary),
        cmocka_unit_test (test_set_nx_is_exclusive),
        cmocka_unit_test (test_password_required),
    };
    return kiwi_run_group ("stack_redis", tests, NULL, NULL);
}
