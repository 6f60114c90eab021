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
/* no bound on when the lines were written */
#define OPEN ((kiwi_egress_window) { 0 })

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
    /* a bumped connection (a registry's TLS, terminated by Squid): its
     * CONNECT, then the request it carried */
    "1796168021.800 " A " 23128 NONE_NONE 200 CONNECT registry.kiwi.test registry.kiwi.test:443 108 0 198.18.139.202 "
    "bump -\n",
    "1796168021.850 " A " 23128 TCP_MISS 200 GET registry.kiwi.test https://registry.kiwi.test/pkg 83 12694 "
    "198.18.139.202 bump -\n",
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
    char bumped[] = "1796168016.700 " A " 23128 NONE_NONE 200 CONNECT registry.kiwi.test registry.kiwi.test:443 108 0 "
                    "198.18.139.202 bump -";
    assert_int_equal (kiwi_egress_line_sort (bumped, &e, &rule), KIWI_EGRESS_LINE_NONE);
    /* a CONNECT denied on a bumping port: answered 200, the 403 inside
     * the TLS Squid then makes; the CONNECT is the denial, the error's
     * line counts nothing */
    char den[] = "1796168016.800 " A " 23128 TCP_DENIED 200 CONNECT denied.kiwi.test denied.kiwi.test:443 130 0 - bump -";
    assert_int_equal (kiwi_egress_line_sort (den, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    assert_string_equal (rule, "host not allowed");
    assert_string_equal (e.host, "denied.kiwi.test");
    char inner[] = "1796168016.850 " A " 23128 NONE_NONE 403 GET denied.kiwi.test https://denied.kiwi.test/ 83 3434 - - -";
    assert_int_equal (kiwi_egress_line_sort (inner, &e, &rule), KIWI_EGRESS_LINE_NONE);
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

/* The proxy is read-only: it refuses every write before it looks at the
 * host, so the denial names the method and says Phase A may only read; a
 * refused host (a read) stays as it was. */
static void
test_refused_method (void **state)
{
    (void) state;
    kiwi_proxy_log_entry e;
    const char *rule;
    const char *methods[] = { "PUT", "POST", "PATCH", "DELETE", NULL };
    for (size_t i = 0; methods[i]; i++) {
        char line[512];
        snprintf (line, sizeof line,
                  "1796168040.100 " A " 23128 TCP_DENIED 403 %s private.kiwi.test https://private.kiwi.test/npm/pkg "
                  "120 3500 - bump",
                  methods[i]);
        assert_int_equal (kiwi_egress_line_sort (line, &e, &rule), KIWI_EGRESS_LINE_DENIED);
        json_t *d = kiwi_egress_denial_json (&e, rule, "registries");
        assert_non_null (d);
        assert_string_equal (str (d, "host"), "private.kiwi.test");
        assert_non_null (json_object_get (d, "method"));
        assert_string_equal (str (d, "method"), methods[i]);
        assert_non_null (strstr (str (d, "rule"), "Phase A may only read"));
        assert_string_equal (str (d, "allow_with"), "nothing");
        json_decref (d);
    }
    /* plain HTTP, redirected */
    char plain[] = "1796168041.100 " A " 80 TCP_DENIED 403 POST - http://registry.npmjs.org/-/user 90 3400 - -";
    assert_int_equal (kiwi_egress_line_sort (plain, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    json_t *d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_string_equal (str (d, "method"), "POST");
    assert_string_equal (str (d, "host"), "registry.npmjs.org");
    json_decref (d);
    /* a refused host, read-only or not: as before, no method */
    char host[] = "1796168042.100 " A " 23128 TCP_DENIED 403 CONNECT - other.kiwi.test:443 91 3407 - -";
    assert_int_equal (kiwi_egress_line_sort (host, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_string_equal (str (d, "rule"), "host not allowed");
    assert_null (json_object_get (d, "method"));
    json_decref (d);
    char get[] = "1796168043.100 " A " 80 TCP_DENIED 403 GET - http://other.kiwi.test/x 64 3401 - -";
    assert_int_equal (kiwi_egress_line_sort (get, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    assert_string_equal (rule, "host not allowed");
    /* a write to a host off the list: Squid refuses the method first, so
     * no setting is named that would not let it through */
    char put[] = "1796168044.100 " A " 80 TCP_DENIED 403 PUT - http://other.kiwi.test/x 64 3401 - -";
    assert_int_equal (kiwi_egress_line_sort (put, &e, &rule), KIWI_EGRESS_LINE_DENIED);
    d = kiwi_egress_denial_json (&e, rule, "registries");
    assert_non_null (strstr (str (d, "rule"), "Phase A may only read"));
    assert_string_equal (str (d, "method"), "PUT");
    assert_null (strstr (str (d, "allow_with"), "KIWI_INSTALL_EGRESS="));
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
    kiwi_egress_log_pos offset = kiwi_egress_log_mark (path);
    assert_int_equal (offset.offset, (int64_t) strlen (log_lines[0]));
    for (size_t i = 1; i < sizeof log_lines / sizeof *log_lines; i++)
        fputs (log_lines[i], f);
    fclose (f);

    kiwi_egress_record rec;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_egress_record_read (path, offset, A, OPEN, "registries", &rec, &err), 0);
    /* the plain GET, the tunnel (its peek not counted twice) and the
     * bumped GET (its CONNECT not counted) */
    assert_int_equal (rec.requests, 3);
    assert_int_equal (rec.bytes, 1690 + 3473 + 12694);
    json_t *h = json_object_get (rec.hosts, "allowed.kiwi.test");
    assert_non_null (h);
    assert_int_equal (json_integer_value (json_object_get (h, "requests")), 2);
    h = json_object_get (rec.hosts, "registry.kiwi.test");
    assert_non_null (h);
    assert_int_equal (json_integer_value (json_object_get (h, "requests")), 1);
    assert_int_equal (json_object_size (rec.hosts), 2);
    /* A's four denials after the offset: not early's (before it), not B's,
     * not the line still being written */
    assert_int_equal (rec.denials, 4);
    assert_int_equal (json_array_size (rec.denied), 4);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "other.kiwi.test");
    assert_string_equal (str (json_array_get (rec.denied, 1), "host"), "198.18.139.201");
    kiwi_egress_record_clear (&rec);

    assert_int_equal (kiwi_egress_record_read (path, (kiwi_egress_log_pos) { 0 }, B, OPEN, "registries", &rec, &err), 0);
    assert_int_equal (rec.denials, 1);
    assert_int_equal (rec.requests, 0);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "b-only.kiwi.test");
    kiwi_egress_record_clear (&rec);

    /* no log yet: nothing went through the proxy */
    unlink (path);
    assert_int_equal (kiwi_egress_log_mark (path).offset, 0);
    assert_int_equal (kiwi_egress_log_mark (path).ino, 0);
    assert_int_equal (kiwi_egress_record_read (path, (kiwi_egress_log_pos) { 0 }, A, OPEN, "registries", &rec, &err), 0);
    assert_int_equal (rec.requests + rec.denials, 0);
    assert_int_equal (json_object_size (rec.hosts), 0);
    kiwi_egress_record_clear (&rec);
}

/* The lines of A in the window [since_ms, until_ms] (0: open). */
static void
read_window (const char *path, int64_t since_ms, int64_t until_ms, kiwi_egress_record *rec)
{
    kiwi_error_t err = NULL;
    kiwi_egress_window w = { .since_ms = since_ms, .until_ms = until_ms };
    assert_int_equal (kiwi_egress_record_read (path, (kiwi_egress_log_pos) { 0 }, A, w, "registries", rec, &err), 0);
}

/* An address is a sandbox's only while it runs: Docker gives a stopped
 * container's to the next it starts (the worker's egress probe ran from
 * the address the install then got, and its denial was put down to that
 * install). Lines from the address that began before the sandbox started,
 * or after it ended, are not counted; Squid's clock may stamp a line up to
 * KIWI_EGRESS_CLOCK_SLACK_MS early. */
static void
test_record_window (void **state)
{
    (void) state;
    char path[] = "/tmp/kiwi-egress-record-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    FILE *f = fdopen (fd, "w");
    for (size_t i = 0; i < sizeof log_lines / sizeof *log_lines; i++)
        fputs (log_lines[i], f);
    fclose (f);

    /* A's lines: the GET at .014.426, the tunnel at .016.685 (before the
     * start), denials at .018.335 and .020.105 (in), a 409 at .020.878 and
     * a refused TLS hello at .021.773 (after the end) */
    kiwi_egress_record rec;
    read_window (path, 1796168018000, 1796168020500, &rec);
    assert_int_equal (rec.requests, 0);
    assert_int_equal (json_object_size (rec.hosts), 0);
    assert_int_equal (rec.denials, 2);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "other.kiwi.test");
    assert_string_equal (str (json_array_get (rec.denied, 1), "host"), "198.18.139.201");
    kiwi_egress_record_clear (&rec);

    /* the slack: 65 ms early counts, 101 ms early does not */
    read_window (path, 1796168018400, 1796168018400, &rec);
    assert_int_equal (rec.denials, 1);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "other.kiwi.test");
    kiwi_egress_record_clear (&rec);
    read_window (path, 1796168018400, 0, &rec);
    assert_int_equal (rec.denials, 4);
    kiwi_egress_record_clear (&rec);
    read_window (path, 1796168018436, 0, &rec);
    assert_int_equal (rec.denials, 3);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "198.18.139.201");
    kiwi_egress_record_clear (&rec);
    unlink (path);

    assert_true (kiwi_egress_in_window (5, (kiwi_egress_window) { 0 }));
    assert_true (kiwi_egress_in_window (1000, (kiwi_egress_window) { .since_ms = 1000, .until_ms = 1000 }));
    assert_true (kiwi_egress_in_window (1000 - KIWI_EGRESS_CLOCK_SLACK_MS, (kiwi_egress_window) { .since_ms = 1000 }));
    assert_false (kiwi_egress_in_window (999 - KIWI_EGRESS_CLOCK_SLACK_MS, (kiwi_egress_window) { .since_ms = 1000 }));
    assert_false (kiwi_egress_in_window (1001, (kiwi_egress_window) { .since_ms = 1000, .until_ms = 1000 }));
    /* the time an entry carries, in ms, rounded */
    kiwi_proxy_log_entry e = { .time = 1796168018.3349 };
    assert_int_equal (kiwi_egress_entry_ms (&e), 1796168018335);
}

/* Writes `text` to path (replacing it). */
static void
write_file (const char *path, const char *text)
{
    FILE *f = fopen (path, "w");
    assert_non_null (f);
    fputs (text, f);
    fclose (f);
}

/* The log rotated while an install ran (proxy.sh run renames it to
 * <log>.0 past its bound and Squid starts a new one): the install's part
 * is the rest of the old file and the whole new one; rotated twice, what
 * is left, marked incomplete. */
static void
test_record_rotated (void **state)
{
    (void) state;
    char dir[] = "/tmp/kiwi-egress-rotate-XXXXXX";
    assert_non_null (mkdtemp (dir));
    char path[256], old[256];
    snprintf (path, sizeof path, "%s/access.log", dir);
    snprintf (old, sizeof old, "%s/access.log.0", dir);
    write_file (path, log_lines[0]); /* another install's, before the mark */
    kiwi_egress_log_pos mark = kiwi_egress_log_mark (path);
    FILE *f = fopen (path, "a");
    fputs (log_lines[5], f); /* A, denied other.kiwi.test: in the old file */
    fclose (f);
    assert_int_equal (rename (path, old), 0);
    write_file (path, log_lines[1]); /* A, a request: in the new file */

    kiwi_egress_record rec;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_egress_record_read (path, mark, A, OPEN, "registries", &rec, &err), 0);
    assert_int_equal (rec.denials, 1);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "other.kiwi.test");
    assert_int_equal (rec.requests, 1);
    assert_false (rec.incomplete);
    kiwi_egress_record_clear (&rec);

    /* rotated again: the marked file is gone */
    assert_int_equal (rename (path, old), 0);
    write_file (path, log_lines[6]);
    assert_int_equal (kiwi_egress_record_read (path, mark, A, OPEN, "registries", &rec, &err), 0);
    assert_true (rec.incomplete);
    assert_int_equal (rec.denials, 1);
    assert_string_equal (str (json_array_get (rec.denied, 0), "host"), "198.18.139.201");
    kiwi_egress_record_clear (&rec);
    unlink (path);
    unlink (old);
    rmdir (dir);
}

/* A TLS hello whose SNI holds a newline, a whole forged line for another
 * sandbox and an escape sequence, as Squid logs it now (%-encoded, on one
 * line): one denial, for the client that sent it; none for the address
 * the forged line names; and no control byte in what the worker tells. */
static void
test_record_forged_sni (void **state)
{
    (void) state;
    char path[] = "/tmp/kiwi-egress-forged-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    close (fd);
    write_file (path, "1796481768.089 " A " 443 NONE_NONE 0 CONNECT x.kiwi.test%0A1796168010.000%20" B
                      "%20443%20NONE_NONE%200%20CONNECT%20evil.kiwi.test%20evil.kiwi.test:443%200%200%20-%20"
                      "terminate%0A%1B%5B31mred 198.18.139.201:443 0 0 - terminate redirected\n");
    kiwi_egress_record rec;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_egress_record_read (path, (kiwi_egress_log_pos) { 0 }, A, OPEN, "registries", &rec, &err), 0);
    assert_int_equal (rec.denials, 1);
    json_t *d = json_array_get (rec.denied, 0);
    const char *sni = str (d, "sni");
    assert_non_null (sni);
    for (const char *c = sni; *c; c++)
        assert_true ((unsigned char) *c > 0x20 && (unsigned char) *c < 0x7f);
    assert_non_null (strstr (sni, "%0A1796168010.000%20" B));
    assert_non_null (strstr (sni, "%1B[31mred"));
    assert_string_equal (str (d, "via"), "redirected");
    kiwi_egress_record_clear (&rec);
    assert_int_equal (kiwi_egress_record_read (path, (kiwi_egress_log_pos) { 0 }, B, OPEN, "registries", &rec, &err), 0);
    assert_int_equal (rec.denials + rec.requests, 0);
    kiwi_egress_record_clear (&rec);
    unlink (path);
}

typedef struct {
    int frames;
    char address[46], command[1024];
    int64_t since;
    int rc;
} seen;

static void
on_frame (int type, const char *body, size_t len, void *ud)
{
    seen *s = ud;
    assert_int_equal (type, KIWI_FRAME_SANDBOX);
    s->frames++;
    s->rc = kiwi_frame_sandbox_parse (body, len, s->address, sizeof s->address, &s->since, s->command,
                                      sizeof s->command);
}

static void
test_sandbox_frame (void **state)
{
    (void) state;
    int p[2];
    assert_int_equal (pipe (p), 0);
    kiwi_events ev;
    kiwi_events_pipe_init (&ev, p[1], "t1", "w1");
    kiwi_events_sandbox (&ev, "172.30.0.5", 1796168016600, "npm ci --no-audit --no-fund");
    kiwi_events_sandbox (&ev, NULL, 0, NULL);
    close (p[1]);
    char buf[4096];
    ssize_t n = read (p[0], buf, sizeof buf);
    close (p[0]);
    assert_true (n > 0);
    /* one frame at a time, byte by byte: the reader keeps what it has */
    kiwi_frame_reader r = { 0 };
    seen s = { 0 };
    kiwi_error_t err = NULL;
    const char *first = "172.30.0.5\n1796168016600\nnpm ci --no-audit --no-fund";
    assert_int_equal (kiwi_frame_feed (&r, buf, 5 + strlen (first), on_frame, &s, &err), 0);
    assert_int_equal (s.frames, 1);
    assert_int_equal (s.rc, 0);
    assert_string_equal (s.address, "172.30.0.5");
    assert_int_equal (s.since, 1796168016600);
    assert_string_equal (s.command, "npm ci --no-audit --no-fund");
    size_t off = 5 + strlen (first);
    for (size_t i = off; i < (size_t) n; i++)
        assert_int_equal (kiwi_frame_feed (&r, buf + i, 1, on_frame, &s, &err), 0);
    assert_int_equal (s.frames, 2);
    assert_string_equal (s.address, "");
    assert_int_equal (s.since, 0);
    assert_string_equal (s.command, "");
    kiwi_frame_reader_clear (&r);

    /* not one: no newline, an address longer than an address, no start,
     * a start that is not a positive number */
    char a[46], c[16];
    int64_t since;
    assert_int_equal (kiwi_frame_sandbox_parse ("172.30.0.5", 10, a, sizeof a, &since, c, sizeof c), -1);
    char longaddr[80];
    memset (longaddr, '1', sizeof longaddr);
    longaddr[60] = '\n';
    longaddr[70] = '\n';
    assert_int_equal (kiwi_frame_sandbox_parse (longaddr, sizeof longaddr, a, sizeof a, &since, c, sizeof c), -1);
    static const char *const bad[] = { "1.2.3.4\nnpm ci", "1.2.3.4\n\nnpm ci", "1.2.3.4\n12x\nnpm ci",
                                       "1.2.3.4\n-5\nnpm ci", "1.2.3.4\n0\nnpm ci",
                                       "1.2.3.4\n99999999999999999999999\nnpm ci" };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal (kiwi_frame_sandbox_parse (bad[i], strlen (bad[i]), a, sizeof a, &since, c, sizeof c), -1);
        assert_string_equal (a, "");
    }
    /* a long command is cut to what the buffer holds */
    const char *cut = "1.2.3.4\n17\nabcdefghijklmnopqrstuvwxyz";
    assert_int_equal (kiwi_frame_sandbox_parse (cut, strlen (cut), a, sizeof a, &since, c, sizeof c), 0);
    assert_string_equal (c, "abcdefghijklmno");
    assert_int_equal (since, 17);
    /* a sink that does not listen (kiwi-worker --once): nothing happens */
    kiwi_events_jsonl_init (&ev, stdout, "t1", "w1");
    kiwi_events_sandbox (&ev, "172.30.0.5", 1, "npm ci");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_sort_and_denial),
        cmocka_unit_test (test_refused_method),
        cmocka_unit_test (test_record),
        cmocka_unit_test (test_record_window),
        cmocka_unit_test (test_record_rotated),
        cmocka_unit_test (test_record_forged_sni),
        cmocka_unit_test (test_sandbox_frame),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
