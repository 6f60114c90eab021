/*
 * test_image_pull.c: image references as Docker normalises them, the
 * registry allow-list, X-Registry-Auth from a config.json, and the pull's
 * progress stream under every split of its input.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/docker/image-pull.h"

static void
expect_ref (const char *ref, const char *domain, const char *path, const char *tag, const char *digest)
{
    kiwi_image_ref r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_ref_parse (ref, &r, &err), 0);
    assert_string_equal (r.domain, domain);
    assert_string_equal (r.path, path);
    assert_string_equal (r.tag, tag);
    assert_string_equal (r.digest, digest);
}

static void
expect_bad_ref (const char *ref, const char *msg)
{
    kiwi_image_ref r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_ref_parse (ref, &r, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), msg));
    kiwi_error_free (&err);
}

static void
test_refs (void **state)
{
    (void) state;
    expect_ref ("node:22", "docker.io", "library/node", "22", "");
    expect_ref ("node", "docker.io", "library/node", "latest", "");
    expect_ref ("docker.io/library/node:22", "docker.io", "library/node", "22", "");
    expect_ref ("index.docker.io/library/node:22", "docker.io", "library/node", "22", "");
    expect_ref ("docker.io/node:22", "docker.io", "library/node", "22", "");
    expect_ref ("kiwi/base:bookworm", "docker.io", "kiwi/base", "bookworm", "");
    expect_ref ("mcr.microsoft.com/devcontainers/typescript-node:20", "mcr.microsoft.com",
                "devcontainers/typescript-node", "20", "");
    expect_ref ("127.0.0.1:5000/kiwi/test:1", "127.0.0.1:5000", "kiwi/test", "1", "");
    expect_ref ("localhost/x", "localhost", "x", "latest", "");
    expect_ref ("localhost:5000/x", "localhost:5000", "x", "latest", "");
    expect_ref ("ghcr.io/o/r@sha256:abc123", "ghcr.io", "o/r", "", "sha256:abc123");
    expect_ref ("ghcr.io/o/r:1.0@sha256:abc123", "ghcr.io", "o/r", "1.0", "sha256:abc123");
    expect_bad_ref ("", "empty");
    expect_bad_ref ("Node:22", "`N` in the repository");
    expect_bad_ref ("node:", "empty tag");
    expect_bad_ref ("node:2$2", "in the tag");
    expect_bad_ref ("node 22", "space");
    expect_bad_ref ("x@nodigest", "algorithm:hex");
    /* nothing that moves within or out of the Engine API's paths */
    expect_bad_ref ("127.0.0.1:5000/a/../../containers/x:1", "a repository component `..`");
    expect_bad_ref ("ghcr.io/./x:1", "a repository component `.`");
    expect_bad_ref ("ghcr.io/a//b:1", "a repository component ``");
    expect_bad_ref ("ghcr.io/a/:1", "an empty repository component");
    expect_bad_ref ("ghcr.io/-a:1", "a repository component `-a`");
    expect_bad_ref ("evil?x=1.example/a:1", "`?` in the registry");
    expect_bad_ref ("evil%2f.example/a:1", "`%` in the registry");
    char name[600];
    kiwi_image_ref r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_ref_parse ("python:3.12", &r, &err), 0);
    assert_string_equal (kiwi_image_ref_name (&r, name, sizeof name), "docker.io/library/python");
}

static void
test_allow_list (void **state)
{
    (void) state;
    assert_true (kiwi_registry_allowed ("docker.io", "docker.io"));
    assert_true (kiwi_registry_allowed ("docker.io", "index.docker.io"));
    assert_true (kiwi_registry_allowed ("index.docker.io", "docker.io"));
    assert_true (kiwi_registry_allowed ("ghcr.io, docker.io", "docker.io"));
    assert_true (kiwi_registry_allowed ("ghcr.io docker.io", "ghcr.io"));
    assert_true (kiwi_registry_allowed ("GHCR.io", "ghcr.io"));
    assert_true (kiwi_registry_allowed ("docker.io,127.0.0.1:5000", "127.0.0.1:5000"));
    assert_false (kiwi_registry_allowed ("docker.io,127.0.0.1:5000", "127.0.0.1:5001"));
    assert_false (kiwi_registry_allowed ("docker.io,127.0.0.1:5000", "127.0.0.1"));
    assert_false (kiwi_registry_allowed ("docker.io", "docker.io.evil.example"));
    assert_false (kiwi_registry_allowed ("docker.io", "ghcr.io"));
    assert_false (kiwi_registry_allowed ("", "docker.io"));
    assert_false (kiwi_registry_allowed (NULL, "docker.io"));
    /* the reference decides the registry: node:22 is docker.io's */
    kiwi_image_ref r;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_image_ref_parse ("node:22", &r, &err), 0);
    assert_true (kiwi_registry_allowed ("docker.io", r.domain));
    assert_int_equal (kiwi_image_ref_parse ("quay.io/node:22", &r, &err), 0);
    assert_false (kiwi_registry_allowed ("docker.io", r.domain));
}

static json_t *
decode_header (const char *v)
{
    char *t = strdup (v);
    size_t n = strlen (t);
    for (size_t i = 0; i < n; i++)
        t[i] = t[i] == '-' ? '+' : t[i] == '_' ? '/' : t[i];
    unsigned char *out = calloc (1, n);
    int got = EVP_DecodeBlock (out, (unsigned char *) t, (int) n);
    assert_true (got > 0);
    json_error_t je;
    json_t *j = json_loads ((char *) out, JSON_DISABLE_EOF_CHECK, &je);
    free (out);
    free (t);
    return j;
}

static int
auth_for (const char *file, const char *ref, bool operator_image, char **v, kiwi_error_t *err)
{
    kiwi_image_ref r;
    assert_int_equal (kiwi_image_ref_parse (ref, &r, err), 0);
    return kiwi_registry_auth_header (file, &r, operator_image, v, err);
}

static void
test_auth (void **state)
{
    (void) state;
    char path[] = "/tmp/kiwi-auth-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    /* "u1:p:1" and username/password and a token */
    const char *text = "{\"auths\":{\"https://index.docker.io/v1/\":{\"auth\":\"dTE6cDox\"},"
                       "\"127.0.0.1:5000\":{\"username\":\"u2\",\"password\":\"p2\"},"
                       "\"ghcr.io\":{\"identitytoken\":\"tok\"},\"bad.example\":{\"auth\":\"!!!!\"}}}";
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    kiwi_error_t err = NULL;
    char *v = NULL;
    /* registry-wide entries: the operator's (catalogue) images only */
    assert_int_equal (auth_for (path, "node:22", true, &v, &err), 1);
    json_t *j = decode_header (v);
    assert_string_equal (json_string_value (json_object_get (j, "username")), "u1");
    assert_string_equal (json_string_value (json_object_get (j, "password")), "p:1");
    assert_string_equal (json_string_value (json_object_get (j, "serveraddress")), "docker.io");
    json_decref (j);
    kiwi_registry_auth_free (v);
    assert_int_equal (auth_for (path, "127.0.0.1:5000/kiwi/x:1", true, &v, &err), 1);
    j = decode_header (v);
    assert_string_equal (json_string_value (json_object_get (j, "username")), "u2");
    json_decref (j);
    kiwi_registry_auth_free (v);
    assert_int_equal (auth_for (path, "ghcr.io/a/b:1", true, &v, &err), 1);
    j = decode_header (v);
    assert_string_equal (json_string_value (json_object_get (j, "identitytoken")), "tok");
    json_decref (j);
    kiwi_registry_auth_free (v);
    /* ... and never for a reference a repository chose */
    assert_int_equal (auth_for (path, "node:22", false, &v, &err), 0);
    assert_null (v);
    assert_int_equal (auth_for (path, "127.0.0.1:5000/kiwi/x:1", false, &v, &err), 0);
    assert_null (v);
    assert_int_equal (auth_for (path, "quay.io/x:1", true, &v, &err), 0);
    assert_null (v);
    assert_int_equal (auth_for (path, "bad.example/x:1", true, &v, &err), -1);
    assert_null (strstr (kiwi_error_msg (err), "!!!!"));
    kiwi_error_free (&err);
    unlink (path);
    assert_int_equal (auth_for (path, "node:22", true, &v, &err), -1);
    kiwi_error_free (&err);
}

/* Entries scoped to a repository path prefix: sent for the references under
 * it (the longest wins), whoever chose them, never beside it. */
static void
test_auth_scoped (void **state)
{
    (void) state;
    char path[] = "/tmp/kiwi-auth-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    const char *text = "{\"auths\":{\"127.0.0.1:5000\":{\"username\":\"host\",\"password\":\"p\"},"
                       "\"127.0.0.1:5000/acme\":{\"username\":\"acme\",\"password\":\"p\"},"
                       "\"127.0.0.1:5000/acme/ci/\":{\"username\":\"ci\",\"password\":\"p\"},"
                       "\"https://ghcr.io/team\":{\"username\":\"team\",\"password\":\"p\"}}}";
    assert_int_equal (write (fd, text, strlen (text)), (ssize_t) strlen (text));
    close (fd);
    struct {
        const char *ref;
        bool operator_image;
        const char *user; /* NULL: none */
    } cases[] = {
        { "127.0.0.1:5000/acme/app:1", false, "acme" },
        { "127.0.0.1:5000/acme:1", false, "acme" },
        { "127.0.0.1:5000/acme/ci/runner:1", false, "ci" },
        { "127.0.0.1:5000/acme/ci/runner:1", true, "ci" },
        { "127.0.0.1:5000/acme-other/app:1", false, NULL },
        { "127.0.0.1:5000/acme-other/app:1", true, "host" },
        { "127.0.0.1:5000/other/app@sha256:0123", false, NULL },
        { "127.0.0.1:5001/acme/app:1", false, NULL },
        { "ghcr.io/team/x:1", false, "team" },
        { "ghcr.io/teams/x:1", false, NULL },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiwi_error_t err = NULL;
        char *v = NULL;
        int rc = auth_for (path, cases[i].ref, cases[i].operator_image, &v, &err);
        if (cases[i].user == NULL) {
            assert_int_equal (rc, 0);
            assert_null (v);
            continue;
        }
        assert_int_equal (rc, 1);
        json_t *j = decode_header (v);
        assert_string_equal (json_string_value (json_object_get (j, "username")), cases[i].user);
        json_decref (j);
        kiwi_registry_auth_free (v);
    }
    unlink (path);
}

/* The allow-list's entries: a registry, or a registry and a repository
 * path prefix at a component boundary. */
static void
test_image_allow_list (void **state)
{
    (void) state;
    struct {
        const char *list, *ref;
        bool allowed;
    } cases[] = {
        { "docker.io", "node:22", true },
        { "docker.io", "quay.io/x:1", false },
        { "ghcr.io/acme", "ghcr.io/acme/app:1", true },
        { "ghcr.io/acme", "ghcr.io/acme:1", true },
        { "ghcr.io/acme/", "ghcr.io/acme/x/y@sha256:00", true },
        { "ghcr.io/acme", "ghcr.io/acme-other/app:1", false },
        { "ghcr.io/acme", "ghcr.io/other/app:1", false },
        { "ghcr.io/acme", "ghcr.io.evil.example/acme/app:1", false },
        { "docker.io/library", "node:22", true },
        { "docker.io/library", "kiwi/base:bookworm", false },
        { "ghcr.io/acme, 127.0.0.1:5000", "127.0.0.1:5000/any/thing:1", true },
        { "none", "none/x:1", false },
        { "", "node:22", false },
        { "ghcr.io/", "ghcr.io/acme/app:1", false },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        kiwi_image_ref r;
        kiwi_error_t err = NULL;
        assert_int_equal (kiwi_image_ref_parse (cases[i].ref, &r, &err), 0);
        if (kiwi_image_allowed (cases[i].list, &r) != cases[i].allowed)
            fail_msg ("allow-list `%s`, %s: expected %s", cases[i].list, cases[i].ref,
                      cases[i].allowed ? "allowed" : "refused");
    }
    assert_false (kiwi_image_allowed (NULL, NULL));
}

/* What dockerd sends for a two-layer pull (shape of the Engine API's
 * /images/create stream), then an error stream. */
static const char pull_ok[]
    = "{\"status\":\"Pulling from kiwi/test\",\"id\":\"1\"}\r\n"
      "{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"aaa\"}\r\n"
      "{\"status\":\"Pulling fs layer\",\"progressDetail\":{},\"id\":\"bbb\"}\r\n"
      "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":100,\"total\":1000},\"progress\":\"[>  ]\","
      "\"id\":\"aaa\"}\r\n"
      "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":50,\"total\":5000},\"id\":\"bbb\"}\r\n"
      "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":900,\"total\":1000},\"id\":\"aaa\"}\r\n"
      "{\"status\":\"Download complete\",\"progressDetail\":{},\"id\":\"aaa\"}\r\n"
      "{\"status\":\"Extracting\",\"progressDetail\":{\"current\":1000,\"total\":1000},\"id\":\"aaa\"}\r\n"
      "{\"status\":\"Pull complete\",\"progressDetail\":{},\"id\":\"aaa\"}\r\n"
      "{\"status\":\"Digest: sha256:0123\"}\r\n"
      "{\"status\":\"Status: Downloaded newer image for 127.0.0.1:5000/kiwi/test:1\"}\r\n";

static void
test_stream_every_split (void **state)
{
    (void) state;
    size_t n = strlen (pull_ok);
    for (size_t cut = 0; cut <= n; cut++) {
        kiwi_pull_stream s;
        kiwi_pull_stream_init (&s);
        assert_int_equal (kiwi_pull_stream_feed (&s, pull_ok, cut), 0);
        assert_int_equal (kiwi_pull_stream_feed (&s, pull_ok + cut, n - cut), 0);
        kiwi_pull_stream_finish (&s);
        assert_false (s.bad);
        assert_int_equal (s.n_layers, 2);
        assert_int_equal (s.bytes_total, 6000);
        assert_int_equal (s.bytes_done, 1050);
        assert_string_equal (s.error, "");
        assert_string_equal (s.status, "Status: Downloaded newer image for 127.0.0.1:5000/kiwi/test:1");
        kiwi_pull_stream_clear (&s);
    }
}

static void
test_stream_error (void **state)
{
    (void) state;
    const char *t = "{\"status\":\"Pulling from x\",\"id\":\"1\"}\n"
                    "{\"errorDetail\":{\"message\":\"manifest unknown: manifest unknown\"},"
                    "\"error\":\"manifest unknown\"}";
    kiwi_pull_stream s;
    kiwi_pull_stream_init (&s);
    kiwi_pull_stream_feed (&s, t, strlen (t));
    assert_string_equal (s.error, "");
    kiwi_pull_stream_finish (&s); /* the last line had no newline */
    assert_string_equal (s.error, "manifest unknown: manifest unknown");
    kiwi_pull_stream_clear (&s);
    /* garbage and an over-long line are marked, not fatal */
    kiwi_pull_stream_init (&s);
    kiwi_pull_stream_feed (&s, "not json\n", 9);
    assert_true (s.bad);
    char *big = malloc (70000);
    memset (big, 'x', 70000);
    kiwi_pull_stream_feed (&s, big, 70000);
    kiwi_pull_stream_feed (&s, "\n{\"error\":\"late\"}\n", 18);
    assert_string_equal (s.error, "late");
    free (big);
    kiwi_pull_stream_clear (&s);
}

static void
test_stream_layer_bound (void **state)
{
    (void) state;
    kiwi_pull_stream s;
    kiwi_pull_stream_init (&s);
    char line[200];
    for (int i = 0; i < KIWI_PULL_MAX_LAYERS + 10; i++) {
        int n = snprintf (line, sizeof line,
                          "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":1,\"total\":10},"
                          "\"id\":\"l%d\"}\n",
                          i);
        kiwi_pull_stream_feed (&s, line, (size_t) n);
    }
    assert_int_equal (s.n_layers, KIWI_PULL_MAX_LAYERS);
    assert_int_equal (s.bytes_total, 10 * KIWI_PULL_MAX_LAYERS);
    /* a current beyond the total counts as the total */
    const char *over = "{\"status\":\"Downloading\",\"progressDetail\":{\"current\":99,\"total\":10},\"id\":\"l0\"}\n";
    kiwi_pull_stream_feed (&s, over, strlen (over));
    assert_int_equal (s.layers[0].current, 10);
    kiwi_pull_stream_clear (&s);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_refs),
        cmocka_unit_test (test_allow_list),
        cmocka_unit_test (test_auth),
        cmocka_unit_test (test_auth_scoped),
        cmocka_unit_test (test_image_allow_list),
        cmocka_unit_test (test_stream_every_split),
        cmocka_unit_test (test_stream_error),
        cmocka_unit_test (test_stream_layer_bound),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
