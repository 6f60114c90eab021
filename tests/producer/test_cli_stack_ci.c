/*
 * test_cli_stack_ci.c: `kiwi ci-event` against the real broker: the
 * webhook listener on 127.0.0.1 (ephemeral port) receiving GitHub payloads
 * posted with libcurl, signed (202, the task on the topic), badly signed or
 * unsigned (401), ignored events (200), malformed (400), too large (413),
 * a redelivery (the same X-GitHub-Delivery, or the same task under another
 * delivery id: 200 duplicate, one task on the topic), then stopped with
 * SIGTERM (exit 0); without a secret it refuses to start unless given
 * --insecure-no-secret, then warns and accepts; and the one-shot form from
 * a file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <curl/curl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "need.h"
#include "schemas/task-input.h"
#include "schemas/task.h"
#include "test_cli_util.h"

#define FIXTURES KIWI_SOURCE_DIR "/tests/fixtures/ci/"
#define SECRET "It's a Secret to Everybody"

static void
need_broker (void)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
}

static char *
fixture (const char *name, size_t *len)
{
    char path[512], *text = NULL;
    snprintf (path, sizeof path, "%s%s", FIXTURES, name);
    kiwi_error_t err = NULL;
    if (kiwi_read_file (path, 1 << 20, &text, len, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    return text;
}

/* X-Hub-Signature-256 of body, computed here with OpenSSL's EVP_MAC-free
 * one-shot HMAC (independently of the command's code). */
static void
sign (const char *secret, const char *body, size_t len, char out[80])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    HMAC (EVP_sha256 (), secret, (int) strlen (secret), (const unsigned char *) body, len, mac, &ml);
    int n = sprintf (out, "sha256=");
    for (unsigned i = 0; i < ml; i++)
        n += sprintf (out + n, "%02x", mac[i]);
}

typedef struct reply {
    long status;
    char body[4096];
    size_t len;
} reply;

static size_t
collect (char *p, size_t size, size_t n, void *ud)
{
    reply *r = ud;
    size_t k = size * n;
    size_t room = sizeof r->body - 1 - r->len;
    size_t c = k < room ? k : room;
    memcpy (r->body + r->len, p, c);
    r->len += c;
    r->body[r->len] = '\0';
    return k;
}

/* POSTs body to url with the event, delivery and signature headers (each
 * left out when NULL). */
static reply
post_delivery (const char *url, const char *delivery, const char *event, const char *signature, const char *body,
               size_t len)
{
    reply r = { 0 };
    CURL *c = curl_easy_init ();
    struct curl_slist *h = NULL;
    char line[256];
    h = curl_slist_append (h, "Content-Type: application/json");
    h = curl_slist_append (h, "User-Agent: GitHub-Hookshot/kiwi-test");
    if (delivery) {
        snprintf (line, sizeof line, "X-GitHub-Delivery: %s", delivery);
        h = curl_slist_append (h, line);
    }
    if (event) {
        snprintf (line, sizeof line, "X-GitHub-Event: %s", event);
        h = curl_slist_append (h, line);
    }
    if (signature) {
        snprintf (line, sizeof line, "X-Hub-Signature-256: %s", signature);
        h = curl_slist_append (h, line);
    }
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt (c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt (c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) len);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt (c, CURLOPT_TIMEOUT, 60L);
    curl_easy_setopt (c, CURLOPT_NOPROXY, "*");
    CURLcode e = curl_easy_perform (c);
    if (e != CURLE_OK)
        fail_msg ("POST %s: %s", url, curl_easy_strerror (e));
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_slist_free_all (h);
    curl_easy_cleanup (c);
    return r;
}

/* POSTs with a delivery id of its own (as GitHub gives each delivery). */
static reply
post (const char *url, const char *event, const char *signature, const char *body, size_t len)
{
    static unsigned n;
    char delivery[64];
    snprintf (delivery, sizeof delivery, "72d3162e-cc78-11e3-81ab-%012u", ++n);
    return post_delivery (url, delivery, event, signature, body, len);
}

static reply
get (const char *url)
{
    reply r = { 0 };
    CURL *c = curl_easy_init ();
    curl_easy_setopt (c, CURLOPT_URL, url);
    curl_easy_setopt (c, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt (c, CURLOPT_WRITEDATA, &r);
    curl_easy_setopt (c, CURLOPT_NOPROXY, "*");
    curl_easy_setopt (c, CURLOPT_TIMEOUT, 30L);
    if (curl_easy_perform (c) != CURLE_OK)
        fail_msg ("GET %s", url);
    curl_easy_getinfo (c, CURLINFO_RESPONSE_CODE, &r.status);
    curl_easy_cleanup (c);
    return r;
}

/* Starts the listener; returns its pid and base URL ("http://127.0.0.1:P/"). */
static pid_t
start_listener (const char *topic, const char *secret_file, const char *max_body, bool insecure, char *url,
                size_t cap, int *err_fd)
{
    const char *argv[24];
    int n = 0;
    argv[n++] = "ci-event";
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--brokers";
    argv[n++] = cli_brokers ();
    argv[n++] = "--tasks-topic";
    argv[n++] = topic;
    argv[n++] = "--test";
    argv[n++] = "npm ci && npm test";
    argv[n++] = "--max-rounds";
    argv[n++] = "6";
    if (secret_file) {
        argv[n++] = "--secret-file";
        argv[n++] = secret_file;
    }
    if (max_body) {
        argv[n++] = "--max-body";
        argv[n++] = max_body;
    }
    if (insecure)
        argv[n++] = "--insecure-no-secret";
    argv[n] = NULL;
    int out_fd = -1;
    pid_t pid = cli_spawn (argv, &out_fd, err_fd);
    char line[256];
    if (cli_read_line (out_fd, line, sizeof line, 20000) < 0)
        fail_msg ("the listener did not say where it listens");
    close (out_fd);
    const char *prefix = "listening on http://127.0.0.1:";
    assert_true (strncmp (line, prefix, strlen (prefix)) == 0);
    snprintf (url, cap, "%s", line + strlen ("listening on "));
    return pid;
}

static void
test_listener_with_secret (void **state)
{
    need_broker ();
    curl_global_init (CURL_GLOBAL_DEFAULT);
    char *topic = kiwi_test_unique ("kiwi.test.cli.ci");
    char secret_path[] = "/tmp/kiwi-test-secret-XXXXXX";
    int fd = mkstemp (secret_path);
    assert_int_equal (write (fd, SECRET "\n", strlen (SECRET) + 1), (ssize_t) strlen (SECRET) + 1);
    close (fd);
    char base[128], url[160];
    int err_fd = -1;
    pid_t pid = start_listener (topic, secret_path, "65536", false, base, sizeof base, &err_fd);
    snprintf (url, sizeof url, "%sgithub", base);

    size_t wlen, clen, plen;
    char *wr = fixture ("workflow_run.completed.failure.json", &wlen);
    char *cr = fixture ("check_run.completed.failure.json", &clen);
    char *ping = fixture ("ping.json", &plen);
    char sig[80];

    /* signed workflow_run failure: 202 once the broker has it */
    const char *delivery = "72d3162e-cc78-11e3-81ab-4c9367dc0958";
    sign (SECRET, wr, wlen, sig);
    reply r = post_delivery (url, delivery, "workflow_run", sig, wr, wlen);
    if (r.status != 202)
        fail_msg ("status %ld: %s", r.status, r.body);
    json_t *o = json_loads (r.body, 0, NULL);
    assert_string_equal (json_string_value (json_object_get (o, "status")), "accepted");
    assert_string_equal (json_string_value (json_object_get (o, "id")), "gh-run-7065301437-2-8147e440f255e40a");
    assert_string_equal (json_string_value (json_object_get (o, "topic")), topic);
    assert_true (json_integer_value (json_object_get (o, "partition")) >= 0);
    assert_true (json_is_integer (json_object_get (o, "offset")));
    /* the body's hash, for a follower's kiwi wait --task-sha256 */
    char wr_sha[65];
    assert_non_null (json_string_value (json_object_get (o, "task_sha256")));
    snprintf (wr_sha, sizeof wr_sha, "%s", json_string_value (json_object_get (o, "task_sha256")));
    assert_int_equal (strlen (wr_sha), 64);
    json_decref (o);

    /* the same delivery again (GitHub's redelivery): 200 duplicate, not produced */
    r = post_delivery (url, delivery, "workflow_run", sig, wr, wlen);
    if (r.status != 200)
        fail_msg ("status %ld: %s", r.status, r.body);
    assert_string_equal (r.body, "{\"status\":\"duplicate\",\"reason\":\"duplicate delivery\",\"id\":"
                                 "\"gh-run-7065301437-2-8147e440f255e40a\"}\n");
    /* the same event under another delivery id: the same task, not produced again */
    r = post (url, "workflow_run", sig, wr, wlen);
    assert_int_equal (r.status, 200);
    assert_non_null (strstr (r.body, "\"status\":\"duplicate\""));
    /* a redelivery that is not signed is refused before it is looked up */
    r = post_delivery (url, delivery, "workflow_run", NULL, wr, wlen);
    assert_int_equal (r.status, 401);

    /* signed check_run failure */
    sign (SECRET, cr, clen, sig);
    r = post (url, "check_run", sig, cr, clen);
    assert_int_equal (r.status, 202);
    assert_non_null (strstr (r.body, "\"id\":\"gh-check-19398730211-41757c91f49023de\""));

    /* badly signed: signed with another secret, or a changed body */
    sign ("not the secret", wr, wlen, sig);
    r = post (url, "workflow_run", sig, wr, wlen);
    assert_int_equal (r.status, 401);
    assert_string_equal (r.body, "{\"error\":\"X-Hub-Signature-256 does not match the body\"}\n");
    sign (SECRET, wr, wlen, sig);
    wr[10] = wr[10] == ' ' ? '\t' : ' ';
    r = post (url, "workflow_run", sig, wr, wlen);
    assert_int_equal (r.status, 401);
    wr[10] = wr[10] == ' ' ? '\t' : ' ';

    /* unsigned */
    r = post (url, "workflow_run", NULL, wr, wlen);
    assert_int_equal (r.status, 401);
    assert_string_equal (r.body, "{\"error\":\"missing X-Hub-Signature-256 header\"}\n");

    /* signed but not a failure: 200 ignored */
    sign (SECRET, ping, plen, sig);
    r = post (url, "ping", sig, ping, plen);
    assert_int_equal (r.status, 200);
    o = json_loads (r.body, 0, NULL);
    assert_string_equal (json_string_value (json_object_get (o, "status")), "ignored");
    assert_string_equal (json_string_value (json_object_get (o, "reason")),
                         "`ping` event: only workflow_run and check_run failures are turned into tasks");
    json_decref (o);

    /* signed but malformed: 400 */
    const char bad[] = "{\"action\": \"completed\", \"workflow_run\": ";
    sign (SECRET, bad, sizeof bad - 1, sig);
    r = post (url, "workflow_run", sig, bad, sizeof bad - 1);
    assert_int_equal (r.status, 400);
    assert_non_null (strstr (r.body, "malformed JSON"));

    /* over --max-body: 413 */
    size_t big_len = 100000;
    char *big = malloc (big_len);
    memset (big, ' ', big_len);
    big[0] = '{';
    big[big_len - 1] = '}';
    sign (SECRET, big, big_len, sig);
    r = post (url, "workflow_run", sig, big, big_len);
    assert_int_equal (r.status, 413);
    free (big);

    /* health */
    char health[160];
    snprintf (health, sizeof health, "%shealthz", base);
    r = get (health);
    assert_int_equal (r.status, 200);

    /* SIGTERM: a clean exit */
    kill (pid, SIGTERM);
    assert_int_equal (cli_wait (pid, 20000), 0);
    char *log = cli_slurp (err_fd, 2000);
    close (err_fd);
    assert_null (strstr (log, "NO WEBHOOK SECRET SET"));
    assert_non_null (strstr (log, "stopping on signal 15"));
    assert_null (strstr (log, SECRET));
    free (log);

    /* exactly the two accepted tasks are on the topic */
    assert_int_equal (cli_topic_count (topic), 2);
    cli_msg *m = NULL;
    size_t n = cli_consume (topic, 2, 30000, &m);
    assert_int_equal (n, 2);
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        kiwi_task t;
        kiwi_error_t e = NULL;
        assert_int_equal (kiwi_task_decode (m[i].value, m[i].len, &t, &e), 0);
        assert_string_equal (m[i].key, "https://github.com/acme/widgets.git");
        assert_string_equal (t.repo.ref, "9fceb02d0ae598e95dc970b74767f19372d61af8");
        assert_string_equal (t.test_command, "npm ci && npm test");
        assert_int_equal (t.limits.max_rounds, 6);
        assert_string_equal (t.source, "ci-event");
        if (strcmp (t.id, "gh-run-7065301437-2-8147e440f255e40a") == 0) {
            seen |= 1;
            char sha[65];
            assert_int_equal (kiwi_task_body_sha256 (&t, sha, &e), 0);
            assert_string_equal (sha, wr_sha); /* what the worker will stamp on its result */
        }
        if (strcmp (t.id, "gh-check-19398730211-41757c91f49023de") == 0) {
            seen |= 2;
            assert_non_null (strstr (t.ci_context, "Expected: 3"));
        }
        kiwi_task_clear (&t);
    }
    assert_int_equal (seen, 3);
    cli_msgs_free (m, n);
    unlink (secret_path);
    free (wr), free (cr), free (ping), free (topic);
}

static void
test_listener_without_secret (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.cinosecret");
    unsetenv ("KIWI_CI_WEBHOOK_SECRET");
    /* no secret and no --insecure-no-secret: it does not start */
    const char *argv[] = { "ci-event", "--listen", "127.0.0.1:0", "--brokers", cli_brokers (), "--tasks-topic", topic,
                           "--test", "make", NULL };
    char *out = NULL, *errs = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &errs, 30), 2);
    assert_string_equal (out, "");
    assert_non_null (strstr (errs, "ci-event --listen: no webhook secret (KIWI_CI_WEBHOOK_SECRET or --secret-file)"));
    assert_non_null (strstr (errs, "--insecure-no-secret"));
    free (out), free (errs);

    char base[128];
    int err_fd = -1;
    pid_t pid = start_listener (topic, NULL, NULL, true, base, sizeof base, &err_fd);
    size_t wlen;
    char *wr = fixture ("workflow_run.completed.failure.json", &wlen);
    reply r = post (base, NULL, NULL, wr, wlen); /* no event header: recognised from the payload */
    assert_int_equal (r.status, 202);
    assert_non_null (strstr (r.body, "gh-run-7065301437-2-3562f6b24dc8a23b")); /* unkeyed */
    kill (pid, SIGINT);
    assert_int_equal (cli_wait (pid, 20000), 0);
    char *log = cli_slurp (err_fd, 2000);
    close (err_fd);
    assert_non_null (strstr (log, "NO WEBHOOK SECRET SET"));
    free (log);
    assert_int_equal (cli_topic_count (topic), 1);
    free (wr), free (topic);
}

static void
test_one_event_from_file (void **state)
{
    need_broker ();
    char *topic = kiwi_test_unique ("kiwi.test.cli.cifile");
    const char *argv[] = { "ci-event", "--brokers", cli_brokers (), "--tasks-topic", topic, "--test", "make check",
                           "--json", FIXTURES "check_run.completed.failure.json", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), 0);
    json_t *o = json_loads (out, 0, NULL);
    assert_string_equal (json_string_value (json_object_get (o, "id")), "gh-check-19398730211-49cb0229348f4d1f");
    json_decref (o);
    free (out), free (err);

    /* not a failure: said so, exit 0, nothing produced */
    const char *argv2[] = { "ci-event", "--brokers", cli_brokers (), "--tasks-topic", topic, "--test", "make check",
                            FIXTURES "workflow_run.completed.success.json", NULL };
    assert_int_equal (cli_run (argv2, NULL, 0, &out, &err, 60), 0);
    assert_string_equal (out, "");
    assert_non_null (strstr (err, "kiwi ci-event: ignored: workflow_run completed with conclusion `success`"));
    free (out), free (err);

    /* malformed: exit 3 */
    const char *argv3[] = { "ci-event", "--brokers", cli_brokers (), "--tasks-topic", topic, "--test", "make", "-", NULL };
    assert_int_equal (cli_run (argv3, "{\"workflow_run\": [", 18, &out, &err, 60), 3);
    assert_non_null (strstr (err, "ci-event: stdin: malformed JSON at line 1"));
    free (out), free (err);

    /* the test command from the environment */
    setenv ("KIWI_CI_TEST_COMMAND", "go test ./...", 1);
    const char *argv4[] = { "ci-event", "--dry-run", FIXTURES "workflow_run.completed.failure.json", NULL };
    assert_int_equal (cli_run (argv4, NULL, 0, &out, &err, 60), 0);
    o = json_loads (out, 0, NULL);
    assert_string_equal (json_string_value (json_object_get (o, "test_command")), "go test ./...");
    json_decref (o);
    unsetenv ("KIWI_CI_TEST_COMMAND");
    free (out), free (err);

    assert_int_equal (cli_topic_count (topic), 1);
    free (topic);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_listener_with_secret),
        cmocka_unit_test (test_listener_without_secret),
        cmocka_unit_test (test_one_event_from_file),
    };
    return kiwi_run_group ("cli_stack_ci", tests, NULL, NULL);
}
