/*
 * test_egress_record.c: what the egress proxy's access log says about one
 * sandbox: its lines sorted, a denial told as the egress_denied event
 * tells it (the setting that would allow it: a host listed, an address or
 * a lying Host only with the proxy off), one client's part of a log shared
 * by several sandboxes from an offset on, and the sandbox frame the task
 * process sends the daemon, through the frame reader. The log lines are
 * the ones tests/worker/egress/test_install_egress.c takes from Squid.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "worker/egress/egress-record.h"
#include "worker/events.h"

#define A "198.18.139.66"
#define B "198.18.139.67"

static const char *log_lines[] = {
    /* before the offset: another install's */
    "1796168010.000 " A " 23128 TCP_DENIED 403 CONNECT - early.kiwi.test:443 91 3407 - -\n",
    /* from the offset */
    "1796168014.426 " A " 23128 TCP_MISS 200 GET - http://allowed.kiwi.test/ 91 1690 198.18.139.200 -\n",
    "1796168016.600 " A " 443 NONE_NONE 0 CONNECT allowed.kiwi.test 198.18.139.200:443 0 0 - splice\n",
    "1796168016.685 " A " 443 TCP_TUNNEL 200 CONNECT allowed.kiwi.test allowed.kiwi.test:443 1739 3473 198.18.139.200 "
    "splice\n",
    "1796168017.000 " B " 23128 TCP_DENIED 403 CONNECT - b-only.kiwi.test:443 91 3407 - -\n",
    "1796168018.335 " A " 23128 TCP_DENIED 403 CONNECT - other.kiwi.test:443 91 3407 - -\n",
    "1796168020.105 " A " 80 TCP_DENIED 403 GET - http://198.18.139.201/ 64 3401 - -\n",
    "1796168020.878 " A " 80 NONE_NONE 409 GET - http://allowed.kiwi.test/ 67 3640 - -\n",
    "1796168021.773 " A " 443 NONE_NONE 0 CONNECT other.kiwi.test 198.18.139.201:443 0 0 - terminate\n",
    "not a log line\n",
    /* being written when it was read: not counted */
    "1796168030.000 " A " 23128 TCP_DENIED 403 CONNECT - partial.kiwi.test:443",
};

static const char *
str (json_t *o, const char *k)
{
    return json_string_value (json_object_get (o, k));
}

static void
test_sort_and_denial (void **state)
{
    (void) state;
    kiwi_proxy_log_entry e;
    const char *rule;
    char peek[] = "1796168016.600 " A " 443 NONE_NONE 0 CONNECT allowed.kiwi.test 198.18.139.200:443 0 0 - splice";
    assert_int_equal (kiwi_egress_line_sort (peek, &e, &rule), KIWI_EGRESS_LINE_NONE);
    char bad[] = "garbage";
    assert_int_equal (kiwi_egress_line_sort (bad, &e, &rule), KIWI_EGRESS_LINE_NONE);
    char ok[] = "1796168014.426 " A " 23128 TCP_MISS 200 GET - http://allowed.kiwi.test/ 91 1690 198.18.139.200 -";
    assert_int_equal (kiwi_egress_line_sort (ok, &e, &rule), KIWI_EGRESS_LINE_REQUEST);

    char connect[] = "1796168018.335 " A " 23128 TCP_DENIED 403 CONNECT - other.kiwi.test:443 91 3407 - -";
    assert_int_equal (kiwi_egress_line_sort (connect, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    json_t *d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_non_null (d);
    assert_string_equal (str (d, "host"), "other.kiwi.test");
    assert_int_equal (json_integer_value (json_object_get (d, "port")), 443);
    assert_string_equal (str (d, "protocol"), "connect");
    assert_string_equal (str (d, "via"), "proxy");
    assert_string_equal (str (d, "rule"), "host not allowed");
    assert_string_equal (str (d, "allow_with"), "KIWI_INSTALL_EGRESS=registries,other.kiwi.test");
    assert_true (json_is_null (json_object_get (d, "sni"))); /* no TLS seen */
    assert_int_equal (json_integer_value (json_object_get (d, "attempted_at")), 1796168018335LL);
    json_decref (d);

    char tls[] = "1796168021.773 " A " 443 NONE_NONE 0 CONNECT other.kiwi.test 198.18.139.201:443 0 0 - terminate";
    assert_int_equal (kiwi_egress_line_sort (tls, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    d = kiwi_egress_denial_json (&e, rule, "registries,npm.mirror.corp");
    assert_string_equal (str (d, "protocol"), "tls");
    assert_string_equal (str (d, "via"), "redirected");
    assert_string_equal (str (d, "sni"), "other.kiwi.test");
    assert_string_equal (str (d, "rule"), "TLS SNI not allowed");
    assert_string_equal (str (d, "allow_with"), "KIWI_INSTALL_EGRESS=registries,npm.mirror.corp,other.kiwi.test");
    json_decref (d);

    /* an address, a TLS connection without a name, a Host that lies: no
     * list lets them through */
    char ip[] = "1796168020.105 " A " 80 TCP_DENIED 403 GET - http://198.18.139.201/ 64 3401 - -";
    assert_int_equal (kiwi_egress_line_sort (ip, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_string_equal (str (d, "protocol"), "http");
    assert_string_equal (str (d, "via"), "redirected");
    assert_string_equal (str (d, "allow_with"), "KIWI_INSTALL_EGRESS=open");
    json_decref (d);
    char nosni[] = "1796168022.586 " A " 443 NONE_NONE 0 CONNECT - 198.18.139.201:443 0 0 - terminate";
    assert_int_equal (kiwi_egress_line_sort (nosni, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_string_equal (str (d, "allow_with"), "KIWI_INSTALL_EGRESS=open");
    json_decref (d);
    char lie[] = "1796168020.878 " A " 80 NONE_NONE 409 GET - http://allowed.kiwi.test/ 67 3640 - -";
    assert_int_equal (kiwi_egress_line_sort (lie, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_string_equal (str (d, "rule"), "Host does not match the address");
    assert_string_equal (str (d, "allow_with"), "KIWI_INSTALL_EGRESS=open");
    json_decref (d);
}

static void
test_record (void **state)
{
    (void) state;
    char path[] = "/tmp/kiwi-egress-record-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    FILE *f = fdopen (fd, "w");
    fputs (log_lines[0], f);
    fflush (f);
    int64_t offset = kiwi_egress_log_mark (path);
    assert_int_equal (offset, (int64_t) strlen (log_lines[0]));
    for (size_t i = 1; i < sizeof log_lines / sizeof *log_lines; i++)
        fputs (log_lines[i], f);
    fclose (f);

    kiwi_egress_record rec;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_egress_record_read (path, offset, A, "registries", &rec, &err), 0);
    /* the plain GET and the tunnel (its peek not counted twice) */
    assert_int_equal (rec.requests, 2);
    assert_int_equal (rec.bytes, 1690 + 3473);
    json_t *h = json_object_get (rec.hosts, "allowed.kiwi.test");
    assert_non_null (h);
    assert_int_equal (json_integer_value (json_object_get (h, "requests")), 2);
    assert_int_equal (json_object_size (rec.hosts), 1);
    /* A's four denials after the offset: not early's (before it), not B's,
     * not the line still being written */
    assert_int_equal (rec.denials, 4);
    assert_int_equal (json_array_size (rec.denied), 4);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "other.kiwi.test");
    assert_string_equal (str (json_array_get (rec.denied, 1), "host"), "198.18.139.201");
    kiwi_egress_record_clear (&rec);

    assert_int_equal (kiwi_egress_record_read (path, 0, B, "registries", &rec, &err), 0);
    assert_int_equal (rec.denials, 1);
    assert_int_equal (rec.requests, 0);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "b-only.kiwi.test");
    kiwi_egress_record_clear (&rec);

    /* no log yet: nothing went through the proxy */
    unlink (path);
    assert_int_equal (kiwi_egress_log_mark (path), 0);
    assert_int_equal (kiwi_egress_record_read (path, 0, A, "registries", &rec, &err), 0);
    assert_int_equal (rec.requests + rec.denials, 0);
    assert_int_equal (json_object_size (rec.hosts), 0);
    kiwi_egress_record_clear (&rec);
}

typedef struct {
    int frames;
    char address[46], command[1024];
    int rc;
} seen;

static void
on_frame (int type, const char *body, size_t len, void *ud)
{
    seen *s = ud;
    assert_int_equal (type, KIWI_FRAME_SANDBOX);
    s->frames++;
    s->rc = kiwi_frame_sandbox_parse (body, len, s->address, sizeof s->address, s->command, sizeof s->command);
}

static void
test_sandbox_frame (void **state)
{
    (void) state;
    int p[2];
    assert_int_equal (pipe (p), 0);
    kiwi_events ev;
    kiwi_events_pipe_init (&ev, p[1], "t1", "w1");
    kiwi_events_sandbox (&ev, "172.30.0.5", "npm ci --no-audit --no-fund");
    kiwi_events_sandbox (&ev, NULL, NULL);
    close (p[1]);
    char buf[4096];
    ssize_t n = read (p[0], buf, sizeof buf);
    close (p[0]);
    assert_true (n > 0);
    /* one frame at a time, byte by byte: the reader keeps what it has */
    kiwi_frame_reader r = { 0 };
    seen s = { 0 };
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_frame_feed (&r, buf, 5 + strlen ("172.30.0.5\nnpm ci --no-audit --no-fund"), on_frame, &s,
                                       &err),
                      0);
    assert_int_equal (s.frames, 1);
    assert_int_equal (s.rc, 0);
    assert_string_equal (s.address, "172.30.0.5");
    assert_string_equal (s.command, "npm ci --no-audit --no-fund");
    size_t off = 5 + strlen ("172.30.0.5\nnpm ci --no-audit --no-fund");
    for (size_t i = off; i < (size_t) n; i++)
        assert_int_equal (kiwi_frame_feed (&r, buf + i, 1, on_frame, &s, &err), 0);
    assert_int_equal (s.frames, 2);
    assert_string_equal (s.address, "");
    assert_string_equal (s.command, "");
    kiwi_frame_reader_clear (&r);

    /* not one: no newline, an address longer than an address */
    char a[46], c[16];
    assert_int_equal (kiwi_frame_sandbox_parse ("172.30.0.5", 10, a, sizeof a, c, sizeof c), -1);
    char longaddr[80];
    memset (longaddr, '1', sizeof longaddr);
    longaddr[60] = '\n';
    assert_int_equal (kiwi_frame_sandbox_parse (longaddr, sizeof longaddr, a, sizeof a, c, sizeof c), -1);
    /* a long command is cut to what the buffer holds */
    assert_int_equal (kiwi_frame_sandbox_parse ("1.2.3.4\nabcdefghijklmnopqrstuvwxyz", 34, a, sizeof a, c, sizeof c), 0);
    assert_string_equal (c, "abcdefghijklmno");
    /* a sink that does not listen (kiwi-worker --once): nothing happens */
    kiwi_events_jsonl_init (&ev, stdout, "t1", "w1");
    kiwi_events_sandbox (&ev, "172.30.0.5", "npm ci");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_sort_and_denial),
        cmocka_unit_test (test_record),
        cmocka_unit_test (test_sandbox_frame),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
