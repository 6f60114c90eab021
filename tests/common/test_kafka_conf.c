/*
 * test_kafka_conf.c: operator-given librdkafka properties (common/
 * kafka-conf.c): the list syntax, errors that name the item without its
 * value, secrets recognised, and librdkafka's own refusal named.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "common/kafka-conf.h"

static void
test_parse_pairs_in_order (void **state)
{
    kiwi_strv p = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_kafka_props_parse (" security.protocol = SASL_SSL ,sasl.mechanism=SCRAM-SHA-512,,"
                                              "sasl.password=a\\,b\\\\c=d, client.id=kiwi-prop-test,",
                                              "test", &p, &err),
                      0);
    assert_int_equal (p.n, 8);
    assert_string_equal (p.v[0], "security.protocol");
    assert_string_equal (p.v[1], "SASL_SSL");
    assert_string_equal (p.v[2], "sasl.mechanism");
    assert_string_equal (p.v[3], "SCRAM-SHA-512");
    assert_string_equal (p.v[4], "sasl.password");
    assert_string_equal (p.v[5], "a,b\\c=d"); /* escaped comma and backslash; '=' after the first is value */
    assert_string_equal (p.v[6], "client.id");
    assert_string_equal (p.v[7], "kiwi-prop-test");
    kiwi_strv_free (&p);
    assert_int_equal (kiwi_kafka_props_parse ("", "test", &p, &err), 0);
    assert_int_equal (kiwi_kafka_props_parse (NULL, "test", &p, &err), 0);
    assert_int_equal (p.n, 0);
}

static void
test_parse_errors_never_show_values (void **state)
{
    kiwi_strv p = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    /* an item without '=' may be a pasted secret: only its length is shown */
    assert_int_equal (kiwi_kafka_props_parse ("client.id=x,hunter2secret", "KIWI_KAFKA_PROPERTIES", &p, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "KIWI_KAFKA_PROPERTIES: item 2"));
    assert_null (strstr (kiwi_error_msg (err), "hunter2"));
    kiwi_error_free (&err);
    kiwi_strv_free (&p);
    assert_int_equal (kiwi_kafka_props_parse ("Bad Name=hunter2", "X", &p, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "`Bad Name` is not a librdkafka property name"));
    assert_null (strstr (kiwi_error_msg (err), "hunter2"));
    kiwi_error_free (&err);
    assert_int_equal (kiwi_kafka_props_parse ("=v", "X", &p, &err), -1);
    kiwi_error_free (&err);
    kiwi_strv_free (&p);
}

static void
test_secrets (void **state)
{
    assert_true (kiwi_kafka_prop_is_secret ("sasl.password"));
    assert_true (kiwi_kafka_prop_is_secret ("ssl.key.password"));
    assert_true (kiwi_kafka_prop_is_secret ("ssl.keystore.password"));
    assert_true (kiwi_kafka_prop_is_secret ("ssl.key.pem"));
    assert_true (kiwi_kafka_prop_is_secret ("sasl.oauthbearer.client.secret"));
    assert_true (kiwi_kafka_prop_is_secret ("sasl.oauthbearer.config"));
    assert_false (kiwi_kafka_prop_is_secret ("sasl.username"));
    assert_false (kiwi_kafka_prop_is_secret ("security.protocol"));
    assert_false (kiwi_kafka_prop_is_secret ("client.id"));
}

static void
test_apply_names_the_property (void **state)
{
    rd_kafka_conf_t *conf = rd_kafka_conf_new ();
    kiwi_strv p = KIWI_STRV_INIT;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_kafka_props_parse ("client.id=kiwi-prop-test,socket.timeout.ms=1234", "t", &p, &err), 0);
    assert_int_equal (kiwi_kafka_props_apply (conf, &p, &err), 0);
    char v[64];
    size_t vl = sizeof v;
    assert_int_equal (rd_kafka_conf_get (conf, "client.id", v, &vl), RD_KAFKA_CONF_OK);
    assert_string_equal (v, "kiwi-prop-test");
    kiwi_strv_free (&p);
    /* an unknown property: librdkafka's errstr, with the name */
    assert_int_equal (kiwi_kafka_props_parse ("no.such.property=1", "t", &p, &err), 0);
    assert_int_equal (kiwi_kafka_props_apply (conf, &p, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "kafka property no.such.property=1"));
    assert_non_null (strstr (kiwi_error_msg (err), "No such configuration property"));
    kiwi_error_free (&err);
    kiwi_strv_free (&p);
    /* a refused secret: the name and the reason, never the value */
    assert_int_equal (kiwi_kafka_props_parse ("security.protocol=bogus-hunter2", "t", &p, &err), 0);
    assert_int_equal (kiwi_kafka_props_apply (conf, &p, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "security.protocol"));
    kiwi_error_free (&err);
    kiwi_strv_free (&p);
    assert_int_equal (kiwi_kafka_props_parse ("sasl.password.bogus=hunter2", "t", &p, &err), 0);
    assert_int_equal (kiwi_kafka_props_apply (conf, &p, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "kafka property sasl.password.bogus (value not shown)"));
    assert_null (strstr (kiwi_error_msg (err), "hunter2"));
    kiwi_error_free (&err);
    kiwi_strv_free (&p);
    rd_kafka_conf_destroy (conf);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse_pairs_in_order),
        cmocka_unit_test (test_parse_errors_never_show_values),
        cmocka_unit_test (test_secrets),
        cmocka_unit_test (test_apply_names_the_property),
    };
    return cmocka_run_group_tests_name ("kafka_conf", tests, NULL, NULL);
}
