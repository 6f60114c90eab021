/*
 * test_stack_docker.c: the Docker Engine API answers over its unix socket
 * through our libcurl client, and a container runs under runsc with no
 * network (only the loopback interface exists inside it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/docker/docker-api.h"
#include "common/tail.h"
#include "sandbox/docker/docker-stream.h"
#include "need.h"

static const char *
image (void)
{
    return kiwi_test_env_or ("KIWI_TEST_IMAGE", "kiwi/base:bookworm");
}

static kiwi_docker *
connect_or_skip (void)
{
    const char *sock = kiwi_test_env_or ("KIWI_DOCKER_SOCKET", "/var/run/docker.sock");
    kiwi_docker *d = NULL;
    kiwi_error_t err = NULL;
    int rc = kiwi_docker_open (sock, &d, &err);
    KIWI_NEED (rc == 0, "dockerd at %s: %s", sock, kiwi_error_msg (err));
    return d;
}

static void
test_ping_and_version (void **state)
{
    kiwi_docker *d = connect_or_skip ();
    kiwi_docker_response r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_docker_request (d, "GET", "//_ping", NULL, NULL, 0, 5000, &r, &err), 0);
    assert_int_equal (r.status, 200);
    assert_string_equal (r.body, "OK");
    kiwi_docker_response_clear (&r);
    /* negotiated: at least the minimum we support */
    assert_true (strlen (kiwi_docker_api_version (d)) >= 4);
    /* a versioned call works */
    json_t *info = NULL;
    assert_int_equal (kiwi_docker_call (d, "GET", "/info", NULL, 10000, &info, NULL, &err), 0);
    json_t *runtimes = json_object_get (info, "Runtimes");
    assert_non_null (json_object_get (runtimes, "runsc"));
    json_decref (info);
    kiwi_docker_close (d);
}

static void
test_unknown_path_is_named_error (void **state)
{
    kiwi_docker *d = connect_or_skip ();
    kiwi_error_t err = NULL;
    long status = 0;
    assert_int_equal (kiwi_docker_call (d, "GET", "/containers/kiwi-no-such-container/json", NULL, 5000, NULL,
                                        &status, &err),
                      -1);
    assert_int_equal (status, 404);
    assert_non_null (strstr (kiwi_error_msg (err), "404"));
    assert_non_null (strstr (kiwi_error_msg (err), "kiwi-no-such-container"));
    kiwi_error_free (&err);
    kiwi_docker_close (d);
}

typedef struct {
    kiwi_demux demux;
    kiwi_tailbuf out, errb;
} logs_ctx;

static int
emit (int stream, const char *data, size_t len, void *userdata)
{
    logs_ctx *c = userdata;
    kiwi_tailbuf_write (stream == KIWI_STREAM_STDERR ? &c->errb : &c->out, data, len);
    return 0;
}

static int
sink (const char *data, size_t len, void *userdata)
{
    logs_ctx *c = userdata;
    return kiwi_demux_feed (&c->demux, data, len);
}

static void
test_runsc_no_network (void **state)
{
    kiwi_docker *d = connect_or_skip ();
    kiwi_error_t err = NULL;
    json_t *body = json_pack ("{s:s, s:[s,s,s], s:{s:s, s:s, s:b}, s:{s:s}}", "Image", image (), "Cmd", "sh", "-c",
                              "cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | tr '\\n' ','; echo; "
                              "dmesg 2>/dev/null | grep -c gVisor; echo to-stderr >&2",
                              "HostConfig", "Runtime", "runsc", "NetworkMode", "none", "AutoRemove", 0, "Labels",
                              "org.kiwi.test", "stack");
    json_t *created = NULL;
    int rc = kiwi_docker_call (d, "POST", "/containers/create", body, 30000, &created, NULL, &err);
    json_decref (body);
    KIWI_NEED (rc == 0 || strstr (kiwi_error_msg (err), "No such image") == NULL, "create: %s",
               kiwi_error_msg (err));
    assert_int_equal (rc, 0);
    char path[512];
    const char *id = json_string_value (json_object_get (created, "Id"));
    assert_non_null (id);
    snprintf (path, sizeof path, "/containers/%s/start", id);
    assert_int_equal (kiwi_docker_call (d, "POST", path, NULL, 30000, NULL, NULL, &err), 0);
    snprintf (path, sizeof path, "/containers/%s/wait", id);
    json_t *waited = NULL;
    assert_int_equal (kiwi_docker_call (d, "POST", path, NULL, 60000, &waited, NULL, &err), 0);
    assert_int_equal (json_integer_value (json_object_get (waited, "StatusCode")), 0);
    json_decref (waited);

    logs_ctx c;
    kiwi_demux_init (&c.demux, emit, &c);
    kiwi_tailbuf_init (&c.out, 4096);
    kiwi_tailbuf_init (&c.errb, 4096);
    snprintf (path, sizeof path, "/containers/%s/logs?stdout=1&stderr=1", id);
    assert_int_equal (kiwi_docker_request_stream (d, "GET", path, NULL, NULL, 0, 30000, sink, &c, NULL, &err), 0);
    assert_true (kiwi_demux_complete (&c.demux));
    char *out = kiwi_tailbuf_dup (&c.out), *errs = kiwi_tailbuf_dup (&c.errb);
    /* only loopback: no interface that could route anywhere */
    assert_string_equal (out, "lo,\n1\n");
    assert_string_equal (errs, "to-stderr\n");
    free (out);
    free (errs);
    kiwi_tailbuf_clear (&c.out);
    kiwi_tailbuf_clear (&c.errb);

    snprintf (path, sizeof path, "/containers/%s?force=1", id);
    assert_int_equal (kiwi_docker_call (d, "DELETE", path, NULL, 30000, NULL, NULL, &err), 0);
    json_decref (created);
    kiwi_docker_close (d);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_ping_and_version),
        cmocka_unit_test (test_unknown_path_is_named_error),
        cmocka_unit_test (test_runsc_no_network),
    };
    return kiwi_run_group ("stack_docker", tests, NULL, NULL);
}
