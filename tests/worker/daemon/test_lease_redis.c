/*
 * test_lease_redis.c: the lease and finished-record scripts (worker/daemon/lease.h)
 * run against the stack's real Redis, each rule the daemon relies on: only
 * the holder releases or extends a lease; a lease lost while its task is
 * unfinished is taken again, never once the task finished; attempts count
 * from 1 and expire; the look-up returns the finished record with the
 * lease's holder.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <stdlib.h>
#include <string.h>

#include "common/defaults.h"
#include "worker/daemon/lease.h"
#include "redis-client.h"
#include "stack-env.h"

static redisContext *rc;
static char *id, *lease, *done, *attempt;

static int
setup (void **state)
{
    rc = kiwi_test_redis_connect ();
    id = kiwi_test_unique ("lease-test");
    assert_true (asprintf (&lease, "%s%s", KIWI_REDIS_LEASE_PREFIX, id) > 0);
    assert_true (asprintf (&done, "%s%s", KIWI_REDIS_DONE_PREFIX, id) > 0);
    assert_true (asprintf (&attempt, "%s%s", KIWI_REDIS_ATTEMPT_PREFIX, id) > 0);
    return 0;
}

static int
teardown (void **state)
{
    if (rc) {
        freeReplyObject (redisCommand (rc, "DEL %s %s %s", lease, done, attempt));
        redisFree (rc);
    }
    free (id);
    free (lease);
    free (done);
    free (attempt);
    return 0;
}

/* The reply of a command, checked to be one; the caller frees it. */
static redisReply *
cmd (const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    redisReply *r = redisvCommand (rc, fmt, ap);
    va_end (ap);
    if (r == NULL)
        fail_msg ("redis: %s", rc->errstr);
    if (r->type == REDIS_REPLY_ERROR)
        fail_msg ("redis: %s", r->str);
    return r;
}

static long long
integer (redisReply *r)
{
    assert_int_equal (r->type, REDIS_REPLY_INTEGER);
    long long v = r->integer;
    freeReplyObject (r);
    return v;
}

/* The lease's holder, or "" when there is none. Static buffer. */
static const char *
holder (void)
{
    static char buf[128];
    redisReply *r = cmd ("GET %s", lease);
    snprintf (buf, sizeof buf, "%s", r->type == REDIS_REPLY_STRING ? r->str : "");
    freeReplyObject (r);
    return buf;
}

static void
reset (void)
{
    freeReplyObject (cmd ("DEL %s %s %s", lease, done, attempt));
}

static void
test_release_only_by_holder (void **state)
{
    reset ();
    freeReplyObject (cmd ("SET %s worker-a PX 60000", lease));
    assert_int_equal (integer (cmd ("EVAL %s 1 %s %s", kiwi_lua_lease_release, lease, "worker-b")), 0);
    assert_string_equal (holder (), "worker-a");
    assert_int_equal (integer (cmd ("EVAL %s 1 %s %s", kiwi_lua_lease_release, lease, "worker-a")), 1);
    assert_string_equal (holder (), "");
    /* releasing what nobody holds is a no-op */
    assert_int_equal (integer (cmd ("EVAL %s 1 %s %s", kiwi_lua_lease_release, lease, "worker-a")), 0);
}

static void
test_renew (void **state)
{
    reset ();
    /* the holder extends it */
    freeReplyObject (cmd ("SET %s worker-a PX 1000", lease));
    assert_int_equal (integer (cmd ("EVAL %s 2 %s %s %s %s", kiwi_lua_lease_renew, lease, done, "worker-a", "60000")),
                      1);
    assert_true (integer (cmd ("PTTL %s", lease)) > 30000);
    /* another worker neither extends nor takes it */
    assert_int_equal (integer (cmd ("EVAL %s 2 %s %s %s %s", kiwi_lua_lease_renew, lease, done, "worker-b", "60000")),
                      0);
    assert_string_equal (holder (), "worker-a");
    /* lost while the task is unfinished (Redis restarted): taken again */
    freeReplyObject (cmd ("DEL %s", lease));
    assert_int_equal (integer (cmd ("EVAL %s 2 %s %s %s %s", kiwi_lua_lease_renew, lease, done, "worker-b", "60000")),
                      1);
    assert_string_equal (holder (), "worker-b");
    assert_true (integer (cmd ("PTTL %s", lease)) > 30000);
    /* lost after the task finished: not taken again */
    freeReplyObject (cmd ("DEL %s", lease));
    freeReplyObject (cmd ("HSET %s result x published 0 hash h", done));
    assert_int_equal (integer (cmd ("EVAL %s 2 %s %s %s %s", kiwi_lua_lease_renew, lease, done, "worker-a", "60000")),
                      0);
    assert_string_equal (holder (), "");
}

static void
test_attempts_count_and_expire (void **state)
{
    reset ();
    assert_int_equal (integer (cmd ("EVAL %s 1 %s %s", kiwi_lua_attempt, attempt, "600")), 1);
    assert_int_equal (integer (cmd ("EVAL %s 1 %s %s", kiwi_lua_attempt, attempt, "600")), 2);
    long long ttl = integer (cmd ("TTL %s", attempt));
    assert_true (ttl > 0 && ttl <= 600);
}

static void
test_done_look (void **state)
{
    reset ();
    /* nothing: four nils */
    redisReply *r = cmd ("EVAL %s 2 %s %s", kiwi_lua_done_look, done, lease);
    assert_int_equal (r->type, REDIS_REPLY_ARRAY);
    assert_int_equal (r->elements, 4);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal (r->element[i]->type, REDIS_REPLY_NIL);
    freeReplyObject (r);
    /* finished, not yet published, its lease still held by the finisher */
    freeReplyObject (cmd ("HSET %s result the-result published 0 hash the-hash", done));
    freeReplyObject (cmd ("SET %s worker-a PX 60000", lease));
    r = cmd ("EVAL %s 2 %s %s", kiwi_lua_done_look, done, lease);
    assert_int_equal (r->elements, 4);
    assert_string_equal (r->element[0]->str, "the-result");
    assert_string_equal (r->element[1]->str, "0");
    assert_string_equal (r->element[2]->str, "the-hash");
    assert_int_equal (r->element[3]->type, REDIS_REPLY_STRING);
    assert_string_equal (r->element[3]->str, "worker-a");
    freeReplyObject (r);
    /* acknowledged: published, the lease released */
    freeReplyObject (cmd ("HSET %s published 1", done));
    assert_int_equal (integer (cmd ("EVAL %s 1 %s %s", kiwi_lua_lease_release, lease, "worker-a")), 1);
    r = cmd ("EVAL %s 2 %s %s", kiwi_lua_done_look, done, lease);
    assert_int_equal (r->elements, 4);
    assert_string_equal (r->element[1]->str, "1");
    assert_int_equal (r->element[3]->type, REDIS_REPLY_NIL);
    freeReplyObject (r);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_release_only_by_holder),
        cmocka_unit_test (test_renew),
        cmocka_unit_test (test_attempts_count_and_expire),
        cmocka_unit_test (test_done_look),
    };
    return cmocka_run_group_tests_name ("lease_redis", tests, setup, teardown);
}
