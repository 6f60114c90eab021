/*
 * test_cache_mask.c: the verify cache stores outputs masked (worker/task/cache.h)
 * and serves no entry stored unmasked, read back from the real Redis with
 * a client of its own: a credential one task's test printed must not reach
 * another task through kiwi:verify:*.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/task/cache.h"
#include "common/defaults.h"
#include "common/mask.h"
#include "need.h"
#include "redis-client.h"

static const char *host, *user, *password;
static int port;

static redisContext *
raw_client (void)
{
    kiwi_test_redis_addr a = kiwi_test_redis_address ();
    host = a.host, port = a.port, user = a.user, password = a.password;
    return kiwi_test_redis_connect ();
}

static void
test_stored_masked (void **state)
{
    redisContext *rc = raw_client ();
    char *key = kiwi_test_unique ("mask-test");
    char *secret = kiwi_test_unique ("cache-canary");
    kiwi_error_t err = NULL;
    kiwi_mask *m = kiwi_mask_new (&err);
    assert_int_equal (kiwi_mask_add (m, secret, &err), 0);
    kiwi_cache *c = kiwi_cache_open (host, port, user, password, 60, 60);
    assert_true (kiwi_cache_available (c));
    kiwi_cache_set_mask (c, m);
    char *output = NULL;
    assert_true (asprintf (&output, "FAIL test_login\ntoken=%s\n", secret) > 0);
    assert_int_equal (kiwi_cache_put_verify (c, key, 1, output), 0);

    redisReply *r = redisCommand (rc, "HGET %s%s output", KIWI_REDIS_VERIFY_PREFIX, key);
    assert_non_null (r);
    assert_int_equal (r->type, REDIS_REPLY_STRING);
    if (strstr (r->str, secret) != NULL)
        fail_msg ("kiwi:verify:%s holds the secret: %s", key, r->str);
    assert_string_equal (r->str, "FAIL test_login\ntoken=***\n");
    freeReplyObject (r);

    kiwi_verify_entry e;
    assert_int_equal (kiwi_cache_get_verify (c, key, &e), 1);
    assert_int_equal (e.exit_code, 1);
    assert_string_equal (e.output, "FAIL test_login\ntoken=***\n");
    kiwi_verify_entry_clear (&e);

    r = redisCommand (rc, "DEL %s%s", KIWI_REDIS_VERIFY_PREFIX, key);
    freeReplyObject (r);
    kiwi_cache_close (c);
    kiwi_mask_free (m);
    free (output);
    free (secret);
    free (key);
    redisFree (rc);
}

static void
test_unmasked_entry_is_a_miss (void **state)
{
    redisContext *rc = raw_client ();
    char *key = kiwi_test_unique ("mask-test-old");
    /* what a worker from before masking stored: no marker */
    redisReply *r = redisCommand (rc, "HSET %s%s exit 1 output %s", KIWI_REDIS_VERIFY_PREFIX, key,
                                  "token=another-task-secret");
    assert_non_null (r);
    freeReplyObject (r);
    r = redisCommand (rc, "EXPIRE %s%s 60", KIWI_REDIS_VERIFY_PREFIX, key);
    freeReplyObject (r);
    kiwi_cache *c = kiwi_cache_open (host, port, user, password, 60, 60);
    assert_true (kiwi_cache_available (c));
    kiwi_verify_entry e;
    assert_int_equal (kiwi_cache_get_verify (c, key, &e), 0);
    assert_null (e.output);
    r = redisCommand (rc, "DEL %s%s", KIWI_REDIS_VERIFY_PREFIX, key);
    freeReplyObject (r);
    kiwi_cache_close (c);
    free (key);
    redisFree (rc);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_stored_masked),
        cmocka_unit_test (test_unmasked_entry_is_a_miss),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
