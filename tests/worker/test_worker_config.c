/*
 * test_worker_config.c: kiwi-worker's settings table: sources in order, the
 * spec's names, and a bad value named with its key and what is accepted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>

#include "worker/config.h"

static void
test_defaults (void **state)
{
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    assert_int_equal (c.slots, 2);
    assert_string_equal (c.topic_tasks, "kiwi.tasks");
    assert_string_equal (c.topic_progress, "kiwi.progress");
    assert_string_equal (c.topic_results, "kiwi.results");
    assert_string_equal (c.topic_heartbeats, "kiwi.heartbeats");
    assert_string_equal (c.topic_dlq, "kiwi.dlq");
    assert_int_equal (c.install_timeout_s, 300);
    assert_false (c.session_allow_test_creds);
    assert_string_equal (c.sandbox, "docker");
    assert_non_null (c.worker_id);
    kiwi_worker_config_clear (&c);
}

/* sandbox.cpus: 0 (the default) is the smaller of 2 and the host's online
 * CPUs; a number set stays. */
static void
test_sandbox_cpus_auto (void **state)
{
    assert_int_equal (kiwi_worker_auto_cpus (-1), 1);
    assert_int_equal (kiwi_worker_auto_cpus (0), 1);
    assert_int_equal (kiwi_worker_auto_cpus (1), 1);
    assert_int_equal (kiwi_worker_auto_cpus (2), 2);
    assert_int_equal (kiwi_worker_auto_cpus (64), 2);
    long online = sysconf (_SC_NPROCESSORS_ONLN);
    int64_t want = online >= 2 ? 2 : 1;
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    assert_int_equal (c.cpus, want);
    kiwi_worker_config_clear (&c);
    char *argv[] = { "kiwi-worker", NULL };
    const char *none[] = { NULL }, *zero[] = { "KIWI_SANDBOX_CPUS=0", NULL }, *three[] = { "KIWI_SANDBOX_CPUS=3", NULL };
    const char *const *envs[] = { none, zero, three };
    const int64_t got[] = { want, want, 3 };
    for (size_t i = 0; i < 3; i++) {
        kiwi_error_t err = NULL;
        kiwi_worker_config_init (&c);
        assert_int_equal (kiwi_worker_config_load (&c, NULL, envs[i], 1, argv, 1, NULL, &err), 0);
        assert_int_equal (c.cpus, got[i]);
        kiwi_worker_config_clear (&c);
    }
}

static void
test_sources_in_order (void **state)
{
    char path[] = "/tmp/kiwi-config-XXXXXX";
    int fd = mkstemp (path);
    dprintf (fd, "# a comment\nworker.slots = 3\nkafka.group = from-file\nsandbox.install_timeout = \"120\"\n");
    close (fd);
    const char *env[] = { "KIWI_SLOTS=5", "KIWI_SANDBOX_RUNTIME=runsc", "KIWI_SESSION_ALLOW_TEST_CREDS=true",
                          "TaskTimeoutSeconds=60", NULL };
    char *argv[] = { "kiwi-worker", "--slots", "7", "-sandbox-runtime", "gvisor", "extra", NULL };
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    int rest = 0;
    assert_int_equal (kiwi_worker_config_load (&c, path, env, 6, argv, 1, &rest, &err), 0);
    assert_int_equal (c.slots, 7);                      /* flag over env over file */
    assert_string_equal (c.group, "from-file");         /* file over default */
    assert_int_equal (c.install_timeout_s, 120);
    assert_true (c.session_allow_test_creds);           /* env */
    assert_string_equal (c.sandbox, "gvisor");          /* -sandbox-runtime over KIWI_SANDBOX_RUNTIME */
    assert_int_equal (rest, 5);
    kiwi_worker_config_clear (&c);
    unlink (path);
}

static void
test_kiwi_sandbox_wins_over_runtime_alias (void **state)
{
    const char *env[] = { "KIWI_SANDBOX_RUNTIME=runsc", "KIWI_SANDBOX=firecracker", NULL };
    char *argv[] = { "kiwi-worker", NULL };
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_worker_config_load (&c, NULL, env, 1, argv, 1, NULL, &err), 0);
    assert_string_equal (c.sandbox, "firecracker");
    kiwi_worker_config_clear (&c);
}

static void
check_bad (const char *const *env, char **argv, int argc, const char *expect1, const char *expect2)
{
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_worker_config_load (&c, NULL, env, argc, argv, 1, NULL, &err), -1);
    if (strstr (kiwi_error_msg (err), expect1) == NULL || strstr (kiwi_error_msg (err), expect2) == NULL)
        fail_msg ("error `%s` lacks `%s` or `%s`", kiwi_error_msg (err), expect1, expect2);
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&c);
}

static void
test_bad_values_named (void **state)
{
    char *none[] = { "kiwi-worker", NULL };
    const char *e1[] = { "KIWI_SLOTS=many", NULL };
    check_bad (e1, none, 1, "worker.slots: invalid value `many` (from environment KIWI_SLOTS)", "an integer from 1 to 64");
    const char *e2[] = { "KIWI_SANDBOX=lxc", NULL };
    check_bad (e2, none, 1, "sandbox.driver: invalid value `lxc` (from environment KIWI_SANDBOX)", "docker|runc|gvisor|runsc|firecracker");
    const char *e3[] = { "KIWI_SESSION_ALLOW_TEST_CREDS=maybe", NULL };
    check_bad (e3, none, 1, "KIWI_SESSION_ALLOW_TEST_CREDS", "true, false");
    const char *e4[] = { "KIWI_INSTALL_TIMEOUT=0", NULL };
    check_bad (e4, none, 1, "sandbox.install_timeout: invalid value `0` (from environment KIWI_INSTALL_TIMEOUT)", "from 1 to 86400");
    const char *e5[] = { NULL };
    char *a5[] = { "kiwi-worker", "--slots", "0", NULL };
    check_bad (e5, a5, 3, "worker.slots: invalid value `0` (from flag --slots)", "from 1 to 64");
    char *a6[] = { "kiwi-worker", "--no-such-flag", NULL };
    check_bad (e5, a6, 2, "unknown option `--no-such-flag`", "--help");
    char *a7[] = { "kiwi-worker", "--slots", NULL };
    check_bad (e5, a7, 2, "`--slots` needs a value", "");
}

/* KIWI_METRICS_ADDR: off by default, HOST:PORT accepted, anything else
 * refused naming the setting and the accepted form */
/* The egress scripts: unset, they are ../libexec/kiwi beside the running
 * binary (never the checkout's path); set, the setting's value. */
static void
test_egress_scripts_beside_binary (void **state)
{
    char self[4096], want[4200];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    assert_true (n > 0);
    self[n] = '\0';
    *strrchr (self, '/') = '\0';
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    char *none[] = { "kiwi-worker", NULL };
    assert_int_equal (kiwi_worker_config_load (&c, NULL, NULL, 1, none, 1, NULL, &err), 0);
    snprintf (want, sizeof want, "%s/../libexec/kiwi/egress.sh", self);
    assert_string_equal (c.egress_script, want);
    snprintf (want, sizeof want, "%s/../libexec/kiwi/proxy.sh", self);
    assert_string_equal (c.egress_proxy_script, want);
    assert_string_equal (c.egress_image, "kiwi/base:bookworm");
    assert_string_equal (c.egress_probe_url, "https://registry.npmjs.org/");
    const char *env[] = { "KIWI_EGRESS_SCRIPT=/opt/kiwi/egress.sh", NULL };
    char *flag[] = { "kiwi-worker", "--egress-proxy-script", "/opt/kiwi/proxy.sh", NULL };
    assert_int_equal (kiwi_worker_config_load (&c, NULL, env, 3, flag, 1, NULL, &err), 0);
    assert_string_equal (c.egress_script, "/opt/kiwi/egress.sh");
    assert_string_equal (c.egress_proxy_script, "/opt/kiwi/proxy.sh");
    char buf[64];
    assert_string_equal (kiwi_worker_libexec ("/given", "egress.sh", buf, sizeof buf), "/given");
    assert_null (kiwi_worker_libexec (NULL, "a-name-longer-than-the-buffer-can-hold.sh", buf, 8));
    kiwi_worker_config_clear (&c);
}

static void
test_metrics_addr (void **state)
{
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    assert_null (c.metrics_addr);
    kiwi_error_t err = NULL;
    char *none[] = { "kiwi-worker", NULL };
    const char *ok[] = { "KIWI_METRICS_ADDR=127.0.0.1:9464", NULL };
    assert_int_equal (kiwi_worker_config_load (&c, NULL, ok, 1, none, 1, NULL, &err), 0);
    assert_string_equal (c.metrics_addr, "127.0.0.1:9464");
    char *flag[] = { "kiwi-worker", "--metrics-addr", "[::1]:9100", NULL };
    assert_int_equal (kiwi_worker_config_load (&c, NULL, NULL, 3, flag, 1, NULL, &err), 0);
    assert_string_equal (c.metrics_addr, "[::1]:9100");
    const char *off[] = { "KIWI_METRICS_ADDR=", NULL };
    assert_int_equal (kiwi_worker_config_load (&c, NULL, off, 1, none, 1, NULL, &err), 0);
    assert_null (c.metrics_addr);
    kiwi_worker_config_clear (&c);
    const char *form = "HOST:PORT (HOST an IPv4 address, [IPv6 address] or host name; PORT 1-65535)";
    const char *e1[] = { "KIWI_METRICS_ADDR=9464", NULL };
    check_bad (e1, none, 1, "metrics.addr: invalid value `9464` (from environment KIWI_METRICS_ADDR): no `:PORT`", form);
    const char *e2[] = { "KIWI_METRICS_ADDR=127.0.0.1:0", NULL };
    check_bad (e2, none, 1, "metrics.addr: invalid value `127.0.0.1:0` (from environment KIWI_METRICS_ADDR)", "not a port from 1 to 65535");
    const char *e3[] = { "KIWI_METRICS_ADDR=::1:9464", NULL };
    check_bad (e3, none, 1, "metrics.addr: invalid value `::1:9464` (from environment KIWI_METRICS_ADDR)", "an IPv6 address goes in []");
    const char *e4[] = { "KIWI_METRICS_ADDR=[::x]:9464", NULL };
    check_bad (e4, none, 1, "`::x` is not an IPv6 address", form);
    char *a5[] = { "kiwi-worker", "--metrics-addr", ":9464", NULL };
    check_bad (NULL, a5, 3, "metrics.addr: invalid value `:9464` (from flag --metrics-addr): no host before the port", form);
}

static void
test_bad_file_line_named (void **state)
{
    char path[] = "/tmp/kiwi-config-XXXXXX";
    int fd = mkstemp (path);
    dprintf (fd, "worker.slots = 2\nlease.ttl = 1\n");
    close (fd);
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    char *argv[] = { "kiwi-worker", NULL };
    assert_int_equal (kiwi_worker_config_load (&c, path, NULL, 1, argv, 1, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "lease.ttl: invalid value `1` (from "));
    assert_non_null (strstr (kiwi_error_msg (err), ":2): out of range"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&c);
    unlink (path);
}

static void
test_redis_password_is_secret (void **state)
{
    const char *env[] = { "KIWI_REDIS_PASSWORD=hunter2-redis", "KIWI_REDIS_USER=kiwi",
                          "KIWI_KAFKA_PROPERTIES=sasl.password=hunter2-kafka", NULL };
    char *argv[] = { "kiwi-worker", NULL };
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_worker_config_load (&c, NULL, env, 1, argv, 1, NULL, &err), 0);
    assert_string_equal (c.redis_password, "hunter2-redis");
    assert_string_equal (c.redis_user, "kiwi");
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream (&out, &len);
    kiwi_worker_config_dump (&c, m);
    kiwi_worker_config_help (m);
    fclose (m);
    assert_null (strstr (out, "hunter2"));
    assert_non_null (strstr (out, "# redis.password = (set, not shown)"));
    assert_non_null (strstr (out, "redis.user = kiwi"));
    assert_non_null (strstr (out, "KIWI_REDIS_PASSWORD"));
    free (out);
    kiwi_worker_config_clear (&c);
}

static void
test_kafka_properties_file_then_env (void **state)
{
    char path[] = "/tmp/kiwi-config-XXXXXX";
    int fd = mkstemp (path);
    dprintf (fd, "kafka.property.security.protocol = SASL_SSL\nkafka.property.sasl.password = \"hunter2\"\n"
                 "kafka.property.client.id = from-file\n");
    close (fd);
    const char *env[] = { "KIWI_KAFKA_PROPERTIES=client.id=kiwi-prop-test,sasl.mechanism=PLAIN", NULL };
    char *argv[] = { "kiwi-worker", NULL };
    kiwi_worker_config c;
    kiwi_worker_config_init (&c);
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_worker_config_load (&c, path, env, 1, argv, 1, NULL, &err), 0);
    kiwi_strv p = KIWI_STRV_INIT;
    assert_int_equal (kiwi_worker_config_kafka_props (&c, &p, &err), 0);
    assert_int_equal (p.n, 10);
    assert_string_equal (p.v[0], "security.protocol");
    assert_string_equal (p.v[3], "hunter2");
    assert_string_equal (p.v[5], "from-file");
    assert_string_equal (p.v[6], "client.id"); /* the environment's, applied later, wins */
    assert_string_equal (p.v[7], "kiwi-prop-test");
    kiwi_strv_free (&p);
    char *out = NULL;
    size_t len = 0;
    FILE *m = open_memstream (&out, &len);
    kiwi_worker_config_dump (&c, m);
    fclose (m);
    assert_non_null (strstr (out, "kafka.property.security.protocol = SASL_SSL"));
    assert_non_null (strstr (out, "# kafka.property.sasl.password = (set, not shown)"));
    assert_non_null (strstr (out, "# kafka.properties = (set, not shown)"));
    assert_null (strstr (out, "hunter2"));
    free (out);
    kiwi_worker_config_clear (&c);
    /* a bad property name in the file is named with its line */
    fd = open (path, O_WRONLY | O_TRUNC);
    dprintf (fd, "worker.slots = 2\nkafka.property.Bad = 1\n");
    close (fd);
    kiwi_worker_config_init (&c);
    assert_int_equal (kiwi_worker_config_load (&c, path, NULL, 1, argv, 1, NULL, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), ":2: kafka.property.Bad: `Bad` is not a librdkafka property name"));
    kiwi_error_free (&err);
    kiwi_worker_config_clear (&c);
    unlink (path);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_defaults),
        cmocka_unit_test (test_sandbox_cpus_auto),
        cmocka_unit_test (test_sources_in_order),
        cmocka_unit_test (test_kiwi_sandbox_wins_over_runtime_alias),
        cmocka_unit_test (test_bad_values_named),
        cmocka_unit_test (test_metrics_addr),
        cmocka_unit_test (test_egress_scripts_beside_binary),
        cmocka_unit_test (test_bad_file_line_named),
        cmocka_unit_test (test_redis_password_is_secret),
        cmocka_unit_test (test_kafka_properties_file_then_env),
    };
    return cmocka_run_group_tests_name ("worker_config", tests, NULL, NULL);
}
