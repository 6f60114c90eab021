/*
 * test_fetch_digest.c: kiwi-fetch-digest's ICAP side
 * (worker/egress/fetch-digest.h) spoken to as Squid speaks to it, over a
 * socket pair: OPTIONS; a RESPMOD whose response comes back byte for byte
 * and whose body's SHA-256 is logged; a HEAD's null body; a body cut
 * short (logged "cut", never a digest of a part); several transactions on
 * one connection; and hostile input (a URL with spaces and newlines, a
 * forged client address, broken chunks, a bad Encapsulated header,
 * another protocol), each refused or encoded, never a log line out of
 * shape.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/sha256.h"
#include "worker/egress/fetch-digest.h"

static char log_path[64];

static int
setup (void **state)
{
    (void) state;
    snprintf (log_path, sizeof log_path, "/tmp/kiwi-digest-test.XXXXXX");
    int fd = mkstemp (log_path);
    assert_true (fd >= 0);
    close (fd);
    return 0;
}

static int
teardown (void **state)
{
    (void) state;
    unlink (log_path);
    return 0;
}

/* What kiwi_digest_serve answered to `in` (the peer then closes), its
 * return value in *rc; the log's whole text in *logged. Caller frees. */
static char *
serve (const char *in, size_t in_len, int *rc, char **logged)
{
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal (write (sv[1], in, in_len), (ssize_t) in_len);
    shutdown (sv[1], SHUT_WR);
    kiwi_digest_log log = { .fd = open (log_path, O_WRONLY | O_APPEND | O_TRUNC) };
    assert_true (log.fd >= 0);
    *rc = kiwi_digest_serve (sv[0], &log, "test");
    close (log.fd);
    close (sv[0]);
    size_t cap = 1 << 20, n = 0;
    char *out = malloc (cap + 1);
    ssize_t r;
    while ((r = read (sv[1], out + n, cap - n)) > 0)
        n += (size_t) r;
    out[n] = '\0';
    close (sv[1]);
    FILE *f = fopen (log_path, "r");
    char *text = calloc (1, 65536);
    size_t got = fread (text, 1, 65535, f);
    text[got] = '\0';
    fclose (f);
    *logged = text;
    return out;
}

static const char REQ[] = "GET https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz HTTP/1.1\r\n"
                          "Host: registry.npmjs.org\r\n\r\n";
static const char RES[] = "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: 11\r\n\r\n";

/* A RESPMOD of REQ and RES with the body in the given chunks ("" ends). */
static char *
respmod (const char *client, const char *req, const char *res, const char *const *chunks, bool has_body, size_t *len)
{
    char *out = NULL;
    size_t n = 0;
    FILE *f = open_memstream (&out, &n);
    fprintf (f, "RESPMOD icap://127.0.0.1:1344/digest ICAP/1.0\r\nHost: 127.0.0.1:1344\r\n");
    if (client)
        fprintf (f, "X-Client-IP: %s\r\n", client);
    fprintf (f, "Encapsulated: req-hdr=0, res-hdr=%zu, %s=%zu\r\n\r\n", strlen (req),
             has_body ? "res-body" : "null-body", strlen (req) + strlen (res));
    fputs (req, f);
    fputs (res, f);
    for (size_t i = 0; has_body && chunks && chunks[i]; i++) {
        fprintf (f, "%zx\r\n", strlen (chunks[i]));
        fputs (chunks[i], f);
        fputs ("\r\n", f);
    }
    if (has_body && chunks)
        fputs ("0\r\n\r\n", f);
    fclose (f);
    *len = n;
    return out;
}

static void
sha_hex (const char *s, char out[65])
{
    kiwi_sha256_hex (s, out);
}

static void
test_options (void **state)
{
    (void) state;
    const char *in = "OPTIONS icap://127.0.0.1:1344/digest ICAP/1.0\r\nHost: 127.0.0.1:1344\r\n\r\n";
    int rc;
    char *logged;
    char *out = serve (in, strlen (in), &rc, &logged);
    assert_int_equal (rc, 0);
    assert_non_null (strstr (out, "ICAP/1.0 200 OK\r\n"));
    assert_non_null (strstr (out, "\r\nMethods: RESPMOD\r\n"));
    assert_non_null (strstr (out, "\r\nISTag: \""));
    assert_non_null (strstr (out, "\r\nMax-Connections: 64\r\n"));
    assert_null (strstr (out, "Preview"));
    assert_string_equal (logged, "");
    free (out);
    free (logged);
}

static void
test_respmod_echoed_and_hashed (void **state)
{
    (void) state;
    const char *chunks[] = { "hello ", "world", NULL };
    size_t len;
    char *in = respmod ("10.200.0.5", REQ, RES, chunks, true, &len);
    int rc;
    char *logged;
    char *out = serve (in, len, &rc, &logged);
    assert_int_equal (rc, 1);
    /* the same response headers and chunks, behind the ICAP answer */
    char want[1024];
    snprintf (want, sizeof want,
              "ICAP/1.0 200 OK\r\nISTag: \"kiwi-digest-1\"\r\nEncapsulated: res-hdr=0, res-body=%zu\r\n\r\n%s"
              "6\r\nhello \r\n5\r\nworld\r\n0\r\n\r\n",
              strlen (RES), RES);
    assert_string_equal (out, want);
    char hex[65], line[512];
    sha_hex ("hello world", hex);
    kiwi_digest_entry e;
    assert_int_equal (kiwi_digest_parse (strcpy (line, logged), &e), 0);
    assert_string_equal (e.client, "10.200.0.5");
    assert_string_equal (e.method, "GET");
    assert_int_equal (e.status, 200);
    assert_int_equal (e.size, 11);
    assert_non_null (e.sha256);
    assert_string_equal (e.sha256, hex);
    assert_false (e.cut);
    assert_string_equal (e.url, "https://registry.npmjs.org/left-pad/-/left-pad-1.3.0.tgz");
    assert_int_equal (strchr (logged, '\n') - logged + 1, (long) strlen (logged)); /* one line */
    free (in);
    free (out);
    free (logged);
}

static void
test_head_null_body (void **state)
{
    (void) state;
    size_t len;
    const char *res = "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n";
    char *in = respmod ("10.200.0.5", "HEAD https://pypi.org/simple/six/ HTTP/1.1\r\nHost: pypi.org\r\n\r\n", res, NULL,
                        false, &len);
    int rc;
    char *logged;
    char *out = serve (in, len, &rc, &logged);
    assert_int_equal (rc, 1);
    char want[512];
    snprintf (want, sizeof want, "ICAP/1.0 200 OK\r\nISTag: \"kiwi-digest-1\"\r\nEncapsulated: res-hdr=0, null-body=%zu\r\n\r\n%s",
              strlen (res), res);
    assert_string_equal (out, want);
    kiwi_digest_entry e;
    assert_int_equal (kiwi_digest_parse (logged, &e), 0);
    assert_string_equal (e.method, "HEAD");
    assert_int_equal (e.status, 304);
    assert_int_equal (e.size, 0);
    assert_null (e.sha256);
    assert_false (e.cut);
    free (in);
    free (out);
    free (logged);
}

/* A body that stops inside a chunk: no digest of a part, "cut" and the
 * bytes that passed. */
static void
test_body_cut (void **state)
{
    (void) state;
    size_t len;
    const char *chunks[] = { "abcdef", NULL };
    char *in = respmod ("10.200.0.5", REQ, RES, chunks, true, &len);
    /* drop the last chunk, its CRLF and 3 bytes of the data */
    size_t cut = len - strlen ("0\r\n\r\n") - 2 - 3;
    int rc;
    char *logged;
    char *out = serve (in, cut, &rc, &logged);
    assert_int_equal (rc, -1);
    kiwi_digest_entry e;
    assert_int_equal (kiwi_digest_parse (logged, &e), 0);
    assert_true (e.cut);
    assert_null (e.sha256);
    assert_int_equal (e.size, 3);
    assert_int_equal (e.status, 200);
    free (in);
    free (out);
    free (logged);
}

static void
test_persistent (void **state)
{
    (void) state;
    const char *a[] = { "first", NULL }, *b[] = { "second body", "!", NULL };
    size_t la, lb;
    char *ia = respmod ("10.200.0.5", REQ, RES, a, true, &la);
    char *ib = respmod ("10.200.0.6", REQ, RES, b, true, &lb);
    char *in = malloc (la + lb);
    memcpy (in, ia, la);
    memcpy (in + la, ib, lb);
    int rc;
    char *logged;
    char *out = serve (in, la + lb, &rc, &logged);
    assert_int_equal (rc, 2);
    char ha[65], hb[65];
    sha_hex ("first", ha);
    sha_hex ("second body!", hb);
    char *second = strchr (logged, '\n');
    assert_non_null (second);
    *second++ = '\0';
    kiwi_digest_entry e;
    assert_int_equal (kiwi_digest_parse (logged, &e), 0);
    assert_string_equal (e.sha256, ha);
    assert_string_equal (e.client, "10.200.0.5");
    assert_int_equal (kiwi_digest_parse (second, &e), 0);
    assert_string_equal (e.sha256, hb);
    assert_int_equal (e.size, 12);
    assert_string_equal (e.client, "10.200.0.6");
    free (ia);
    free (ib);
    free (in);
    free (out);
    free (logged);
}

/* What the sandbox chose (the URL) is encoded; a forged client address is
 * not taken; the line keeps its seven fields. */
static void
test_hostile_fields (void **state)
{
    (void) state;
    const char *chunks[] = { "x", NULL };
    size_t len;
    char *in = respmod ("10.0.0.1 1.2.3.4\r\nX: y", "GET http://r.example/a\x01\xff%zz b HTTP/1.1\r\nHost: r\r\n\r\n",
                        RES, chunks, true, &len);
    int rc;
    char *logged;
    char *out = serve (in, len, &rc, &logged);
    assert_int_equal (rc, 1);
    kiwi_digest_entry e;
    assert_int_equal (kiwi_digest_parse (logged, &e), 0);
    assert_string_equal (e.client, "-");
    /* the request line's second word, its bytes encoded */
    assert_string_equal (e.url, "http://r.example/a%01%FF%25zz");
    free (in);
    free (out);
    free (logged);
    char enc[64];
    kiwi_digest_encode ("a b\n%\x01\xff", 7, enc, sizeof enc);
    assert_string_equal (enc, "a%20b%0A%25%01%FF");
    kiwi_digest_encode ("abcdef", 6, enc, 4);
    assert_string_equal (enc, "abc");
    kiwi_digest_encode ("a\n", 2, enc, 4); /* an escape is never split */
    assert_string_equal (enc, "a");
    kiwi_digest_encode ("", 0, enc, sizeof enc);
    assert_string_equal (enc, "-");
}

static void
refused (const char *in, size_t len, const char *answer)
{
    int rc;
    char *logged;
    char *out = serve (in, len, &rc, &logged);
    assert_int_equal (rc, -1);
    if (answer)
        assert_non_null (strstr (out, answer));
    /* a line only for a response that began; never one out of shape */
    for (char *l = logged, *nl; *l; l = nl + 1) {
        nl = strchr (l, '\n');
        assert_non_null (nl);
        *nl = '\0';
        kiwi_digest_entry e;
        assert_int_equal (kiwi_digest_parse (l, &e), 0);
        assert_null (e.sha256);
    }
    free (out);
    free (logged);
}

static void
test_refused (void **state)
{
    (void) state;
    const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    refused (http, strlen (http), "ICAP/1.0 400");
    const char *reqmod = "REQMOD icap://127.0.0.1/digest ICAP/1.0\r\nEncapsulated: req-hdr=0, null-body=10\r\n\r\n";
    refused (reqmod, strlen (reqmod), "ICAP/1.0 405");
    const char *noenc = "RESPMOD icap://127.0.0.1/digest ICAP/1.0\r\nHost: x\r\n\r\n";
    refused (noenc, strlen (noenc), NULL);
    const char *badenc = "RESPMOD icap://127.0.0.1/digest ICAP/1.0\r\nEncapsulated: res-hdr=50, req-hdr=0, res-body=9\r\n\r\n";
    refused (badenc, strlen (badenc), NULL);
    const char *huge = "RESPMOD icap://127.0.0.1/digest ICAP/1.0\r\nEncapsulated: res-hdr=0, res-body=99999999\r\n\r\n";
    refused (huge, strlen (huge), NULL);
    /* a chunk size that is not hex, and one past any registry's file */
    size_t len;
    const char *chunks[] = { "abc", NULL };
    char *in = respmod ("10.1.1.1", REQ, RES, chunks, true, &len);
    char *p = strstr (in + strlen (REQ), "\r\n3\r\n");
    assert_non_null (p);
    p[2] = 'z';
    refused (in, len, NULL);
    free (in);
    const char *big = "ffffffffffffff\r\n";
    in = respmod ("10.1.1.1", REQ, RES, NULL, true, &len);
    char *in2 = malloc (len + strlen (big));
    memcpy (in2, in, len);
    memcpy (in2 + len, big, strlen (big));
    refused (in2, len + strlen (big), NULL);
    free (in);
    free (in2);
    /* a header block that never ends */
    char *endless = malloc (70000);
    memset (endless, 'A', 70000);
    memcpy (endless, "RESPMOD icap://x/ ICAP/1.0\r\nX: ", 31);
    refused (endless, 70000, NULL);
    free (endless);
}

/* A private registry's redirect to its storage is noted (before the answer
 * goes back), one of another host's or of another shape is not; the helper
 * then allows exactly that URL to that client. */
static void
test_redirects (void **state)
{
    (void) state;
    char rpath[96];
    snprintf (rpath, sizeof rpath, "%s.redirects", log_path);
    const char *from[] = { "npm.acme.test", NULL };
    struct {
        const char *req, *location;
        bool noted;
    } cases[] = {
        { "GET https://npm.acme.test/@acme/x/-/x-1.tgz HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n",
          "https://CDN.acme.test/blob/ab%2Fc?sig=1&t=2", true },
        { "GET https://npm.acme.test/y HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "https://cdn.acme.test:443/y", true },
        { "GET https://registry.npmjs.org/x HTTP/1.1\r\nHost: registry.npmjs.org\r\n\r\n", "https://cdn.acme.test/z",
          false }, /* not a private registry's */
        { "GET http://npm.acme.test/x HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "https://cdn.acme.test/z", false },
        { "GET https://npm.acme.test/x HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "http://cdn.acme.test/z", false },
        { "GET https://npm.acme.test/x HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "https://10.0.0.9/z", false },
        { "GET https://npm.acme.test/x HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "https://cdn.acme.test:8443/z", false },
        { "GET https://npm.acme.test/x HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "/relative", false },
        { "GET https://npm.acme.test/x HTTP/1.1\r\nHost: npm.acme.test\r\n\r\n", "https://cdn.acme.test/a b", true },
    };
    int lines = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char res[512];
        snprintf (res, sizeof res, "HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n", cases[i].location);
        size_t len;
        char *in = respmod ("10.200.0.5", cases[i].req, res, NULL, false, &len);
        int sv[2];
        assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
        assert_int_equal (write (sv[1], in, len), (ssize_t) len);
        shutdown (sv[1], SHUT_WR);
        kiwi_digest_log log = { .fd = -1, .redirect_fd = open (rpath, O_WRONLY | O_APPEND | O_CREAT, 0644),
                                .redirect_from = from };
        assert_int_equal (kiwi_digest_serve (sv[0], &log, "test"), 1);
        close (log.redirect_fd);
        close (sv[0]);
        close (sv[1]);
        free (in);
        FILE *f = fopen (rpath, "r");
        int n = 0;
        char line[512];
        while (fgets (line, sizeof line, f))
            n++;
        fclose (f);
        if (n != lines + (cases[i].noted ? 1 : 0))
            fail_msg ("case %zu (%s): %d line(s), not %d", i, cases[i].location, n, lines + (cases[i].noted ? 1 : 0));
        lines = n;
    }
    FILE *f = fopen (rpath, "r");
    char text[4096];
    size_t n = fread (text, 1, sizeof text - 1, f);
    fclose (f);
    text[n] = '\0';
    unlink (rpath);
    double now = strtod (text, NULL);
    /* the host lower-cased, the path and query as they were (%-encoded as the log's fields) */
    assert_non_null (strstr (text, " 10.200.0.5 cdn.acme.test /blob/ab%252Fc?sig=1&t=2\n"));
    assert_non_null (strstr (text, " 10.200.0.5 cdn.acme.test /y\n"));
    const char *q = "/blob/ab%2Fc?sig=1&t=2";
    assert_true (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "GET", q, "cdn.acme.test"));
    assert_true (kiwi_redirect_allowed (text, now, "10.200.0.5", "CDN.acme.test", "HEAD", q, "cdn.acme.test"));
    assert_true (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "CONNECT", NULL, NULL));
    assert_true (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "CONNECT", NULL, "cdn.acme.test"));
    /* a Location is read up to its first space, as the request line is */
    assert_true (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "GET", "/a", "cdn.acme.test"));
    /* another client, another path or query, another SNI, no SNI, another host, too late */
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.6", "cdn.acme.test", "GET", q, "cdn.acme.test"));
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "GET", "/blob/ab%2Fc", "cdn.acme.test"));
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "GET", "/blob/other", "cdn.acme.test"));
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "GET", q, "npm.acme.test"));
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "GET", q, NULL));
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.5", "cdn.acme.test", "CONNECT", NULL, "npm.acme.test"));
    assert_false (kiwi_redirect_allowed (text, now, "10.200.0.5", "other.acme.test", "CONNECT", NULL, NULL));
    assert_false (kiwi_redirect_allowed (text, now + KIWI_REDIRECT_TTL_S + 1, "10.200.0.5", "cdn.acme.test", "GET", q,
                                         "cdn.acme.test"));
    assert_false (kiwi_redirect_allowed ("", now, "10.200.0.5", "cdn.acme.test", "CONNECT", NULL, NULL));
    assert_false (kiwi_redirect_allowed ("garbage\n1 2\n", now, "10.200.0.5", "cdn.acme.test", "CONNECT", NULL, NULL));
}

/* serve_redirect: one RESPMOD from client for req, answered by a redirect
 * to location, through log; whether a line was added to log's file */
static bool
serve_redirect (kiwi_digest_log *log, const char *client, const char *req, const char *location)
{
    struct stat before;
    if (stat (log->redirect_path, &before) < 0)
        before.st_size = 0;
    char res[512];
    snprintf (res, sizeof res, "HTTP/1.1 307 Temporary Redirect\r\nLocation: %s\r\nContent-Length: 0\r\n\r\n",
              location);
    size_t len;
    char *in = respmod (client, req, res, NULL, false, &len);
    int sv[2];
    assert_int_equal (socketpair (AF_UNIX, SOCK_STREAM, 0, sv), 0);
    assert_int_equal (write (sv[1], in, len), (ssize_t) len);
    shutdown (sv[1], SHUT_WR);
    log->redirect_fd = open (log->redirect_path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    assert_int_equal (kiwi_digest_serve (sv[0], log, "test"), 1);
    close (log->redirect_fd);
    close (sv[0]);
    close (sv[1]);
    free (in);
    struct stat after;
    assert_int_equal (stat (log->redirect_path, &after), 0);
    return after.st_size > before.st_size;
}

/* A followed registry's redirect (services.gradle.org's to GitHub's
 * release page) and that page's own (to its storage): each hop noted when
 * its request was the URL the previous hop named to that client, up to
 * KIWI_REDIRECT_HOPS_MAX; never a redirect of another URL of the same
 * host, nor another client's. */
static void
test_redirect_chain (void **state)
{
    (void) state;
    char rpath[96];
    snprintf (rpath, sizeof rpath, "%s.chain", log_path);
    unlink (rpath);
    const char *from[] = { "services.gradle.org", NULL };
    kiwi_digest_log log = { .fd = -1, .redirect_from = from, .redirect_path = rpath };
    const char *c = "10.200.0.5";
#define GET(u) "GET " u " HTTP/1.1\r\nHost: x\r\n\r\n"
    assert_true (serve_redirect (&log, c, GET ("https://services.gradle.org/distributions/g-9-bin.zip"),
                                 "https://github.com/gradle/dists/releases/download/v9/g-9-bin.zip"));
    /* the release page's redirect of another path, or to another client: not noted */
    assert_false (serve_redirect (&log, c, GET ("https://github.com/other/repo"), "https://assets.test/evil"));
    assert_false (serve_redirect (&log, "10.200.0.6", GET ("https://github.com/gradle/dists/releases/download/v9/g-9-bin.zip"),
                                  "https://assets.test/evil"));
    /* the named URL's redirect: hop 2 */
    assert_true (serve_redirect (&log, c, GET ("https://github.com/gradle/dists/releases/download/v9/g-9-bin.zip"),
                                 "https://assets.test/blob/1?sig=a"));
    assert_true (serve_redirect (&log, c, GET ("https://assets.test/blob/1?sig=a"), "https://more.test/z"));
    /* a fourth hop: not noted */
    assert_false (serve_redirect (&log, c, GET ("https://more.test/z"), "https://last.test/w"));
    char *text = kiwi_redirects_read (rpath);
    assert_non_null (text);
    double now = strtod (text, NULL);
    assert_non_null (strstr (text, " 10.200.0.5 github.com /gradle/dists/releases/download/v9/g-9-bin.zip\n"));
    assert_non_null (strstr (text, " 10.200.0.5 assets.test /blob/1?sig=a 2\n"));
    assert_non_null (strstr (text, " 10.200.0.5 more.test /z 3\n"));
    assert_true (kiwi_redirect_allowed (text, now, c, "assets.test", "GET", "/blob/1?sig=a", "assets.test"));
    assert_true (kiwi_redirect_allowed (text, now, c, "more.test", "GET", "/z", "more.test"));
    assert_false (kiwi_redirect_allowed (text, now, c, "last.test", "CONNECT", NULL, NULL));
    assert_false (kiwi_redirect_allowed (text, now, c, "assets.test", "GET", "/evil", "assets.test"));
    /* a line whose hop is past the bound allows nothing */
    assert_false (kiwi_redirect_allowed ("1000.000 10.200.0.5 far.test /f 4\n", 1000.0, c, "far.test", "GET", "/f", "far.test"));
    free (text);
    unlink (rpath);
#undef GET
}

static void
test_parse_rejects (void **state)
{
    (void) state;
    const char *bad[] = {
        "",
        "1.0 10.0.0.1 GET 200 5",
        "x 10.0.0.1 GET 200 5 - http://a/",
        "1.0 10.0.0.1 GET 200 -5 - http://a/",
        "1.0 10.0.0.1 GET 200 5 abc http://a/",
        "1.0 10.0.0.1 GET 2000 5 - http://a/",
        "1.0 10.0.0.1 GET 200 5 - http://a/ extra",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char line[256];
        snprintf (line, sizeof line, "%s", bad[i]);
        kiwi_digest_entry e;
        assert_int_equal (kiwi_digest_parse (line, &e), -1);
    }
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown (test_options, setup, teardown),
        cmocka_unit_test_setup_teardown (test_respmod_echoed_and_hashed, setup, teardown),
        cmocka_unit_test_setup_teardown (test_head_null_body, setup, teardown),
        cmocka_unit_test_setup_teardown (test_body_cut, setup, teardown),
        cmocka_unit_test_setup_teardown (test_persistent, setup, teardown),
        cmocka_unit_test_setup_teardown (test_hostile_fields, setup, teardown),
        cmocka_unit_test_setup_teardown (test_refused, setup, teardown),
        cmocka_unit_test_setup_teardown (test_redirects, setup, teardown),
        cmocka_unit_test_setup_teardown (test_redirect_chain, setup, teardown),
        cmocka_unit_test (test_parse_rejects),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
