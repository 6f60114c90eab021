/*
 * test_egress_targets.c: which addresses kiwi-worker closes to Phase A
 * (egress.sh --deny) and probes (fleet_services_blocked): its Redis, every
 * Kafka bootstrap broker and KIWI_INSTALL_DENY, names resolved to every
 * address, loopback probed but never a rule. Numeric addresses and
 * /etc/hosts names only: no lookup leaves the machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <stdlib.h>

#include "worker/config.h"
#include "worker/egress/egress.h"

static int
collect (const char *redis_host, int port, const char *brokers, const char *deny, kiwi_egress_targets *t,
         kiwi_error_t *err)
{
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_worker_config_set (&c, "KIWI_REDIS_HOST", redis_host, "test", NULL);
    c.redis_port = port;
    /* as given, past the settings table's brokers check (which refuses an
     * entry without a port before egress sees it): egress checks again */
    free (c.brokers);
    c.brokers = strdup (brokers);
    if (deny)
        kiwi_worker_config_set (&c, "KIWI_INSTALL_DENY", deny, "test", NULL);
    int rc = kiwi_egress_targets_collect (&c, t, err);
    kiwi_worker_config_clear (&c);
    return rc;
}

static void
test_services_and_operator_list (void **state)
{
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    kiwi_error_t err = NULL;
    assert_int_equal (collect ("198.18.0.5", 6379, "198.18.0.6:9092,PLAINTEXT://198.18.0.7:9093,[2001:db8::9]:9094",
                               "198.18.1.0/24, 198.18.0.8:443 [2001:db8::10] 198.18.0.5:6379", &t, &err),
                      0);
    const char *want[] = { "198.18.0.5:6379", "198.18.0.6:9092", "198.18.0.7:9093", "[2001:db8::9]:9094",
                           "198.18.1.0/24",   "198.18.0.8:443",  "[2001:db8::10]" };
    assert_int_equal (t.deny.n, 7); /* the repeated Redis address once */
    for (size_t i = 0; i < 7; i++)
        assert_string_equal (t.deny.v[i], want[i]);
    /* probed: everything with a port */
    assert_int_equal (t.probe.n, 5);
    assert_true (kiwi_strv_contains (&t.probe, "198.18.0.8:443"));
    assert_false (kiwi_strv_contains (&t.probe, "198.18.1.0/24"));
    kiwi_egress_targets_clear (&t);
}

static void
test_loopback_probed_not_denied (void **state)
{
    /* the stack on one host: Redis and Kafka on loopback, which inside a
     * container is the container's own; no rule, but still probed */
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    kiwi_error_t err = NULL;
    assert_int_equal (collect ("localhost", 16379, "127.0.0.1:19092,[::1]:19092", NULL, &t, &err), 0);
    assert_int_equal (t.deny.n, 0);
    assert_true (kiwi_strv_contains (&t.probe, "127.0.0.1:16379"));
    assert_true (kiwi_strv_contains (&t.probe, "127.0.0.1:19092"));
    assert_true (kiwi_strv_contains (&t.probe, "[::1]:19092"));
    kiwi_egress_targets_clear (&t);
}

/* The snapshot store is closed to Phase A like Redis and Kafka: its host
 * and port from KIWI_STORE_URL (the scheme's port when it names none). */
static void
test_store_denied (void **state)
{
    static const struct {
        const char *url, *want;
    } cases[] = {
        { "http://198.18.0.20:5000/kiwi/snapshots", "198.18.0.20:5000" },
        { "https://198.18.0.21/kiwi/snapshots", "198.18.0.21:443" },
        { "http://robot:pw@198.18.0.22/kiwi", "198.18.0.22:80" },
        { "https://[2001:db8::20]:8443/kiwi", "[2001:db8::20]:8443" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
        kiwi_error_t err = NULL;
        kiwi_worker_config c;
        kiwi_worker_config_init (&c);
        kiwi_worker_config_set (&c, "KIWI_REDIS_HOST", "127.0.0.1", "test", NULL);
        kiwi_worker_config_set (&c, "KIWI_KAFKA_BROKERS", "127.0.0.1:9092", "test", NULL);
        kiwi_worker_config_set (&c, "KIWI_STORE_URL", cases[i].url, "test", NULL);
        assert_int_equal (kiwi_egress_targets_collect (&c, &t, &err), 0);
        if (!kiwi_strv_contains (&t.deny, cases[i].want))
            fail_msg ("%s: %s not denied", cases[i].url, cases[i].want);
        kiwi_worker_config_clear (&c);
        kiwi_egress_targets_clear (&t);
    }
}

static void
test_bad_entries_named (void **state)
{
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    kiwi_error_t err = NULL;
    assert_int_equal (collect ("127.0.0.1", 6379, "198.18.0.6", NULL, &t, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_KAFKA_BROKERS: `198.18.0.6`: expected HOST:PORT"));
    kiwi_error_free (&err);
    kiwi_egress_targets_clear (&t);
    assert_int_equal (collect ("127.0.0.1", 6379, "127.0.0.1:9092", "198.18.0.9:99999", &t, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_INSTALL_DENY: `198.18.0.9:99999`: bad port"));
    kiwi_error_free (&err);
    kiwi_egress_targets_clear (&t);
    assert_int_equal (collect ("127.0.0.1", 6379, "127.0.0.1:9092", "198.18.0.0/16;rm", &t, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "not a CIDR"));
    kiwi_error_free (&err);
    kiwi_egress_targets_clear (&t);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_services_and_operator_list),
        cmocka_unit_test (test_loopback_probed_not_denied),
        cmocka_unit_test (test_bad_entries_named),
        cmocka_unit_test (test_store_denied),
    };
    return cmocka_run_group_tests_name ("egress_targets", tests, NULL, NULL);
}
