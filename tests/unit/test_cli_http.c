/*
 * test_cli_http.c: the webhook listener's HTTP/1.1 server: the head parser
 * (what it accepts and the status of each refusal), and the server on a
 * loopback socket: a request answered now, one answered later, 413 from the
 * head, Expect: 100-continue, a client that leaves, many clients at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"

/* ---------------------------------------------------------------- parser */

static int
parse (const char *text, kiwi_http_request *req, int *status, char **msg)
{
    static char buf[KIWI_HTTP_HEAD_MAX + 16];
    size_t n = strlen (text);
    memcpy (buf, text, n + 1);
    kiwi_error_t err = NULL;
    *status = 0;
    int r = kiwi_http_parse_head (buf, n, req, status, &err);
    if (msg)
        *msg = err ? strdup (kiwi_error_msg (err)) : NULL;
    kiwi_error_free (&err);
    return r;
}

static void
test_parse_ok (void **state)
{
    kiwi_http_request req;
    int status;
    const char *text = "POST /github?x=1 HTTP/1.1\r\n"
                       "Host: kiwi.example.test\r\n"
                       "X-GitHub-Event:   workflow_run  \r\n"
                       "x-hub-signature-256: sha256=abc\r\n"
                       "Content-Length: 12\r\n"
                       "\r\n"
                       "{\"a\": true}\n";
    int r = parse (text, &req, &status, NULL);
    assert_int_equal (r, (int) (strlen (text) - 12));
    assert_string_equal (req.method, "POST");
    assert_string_equal (req.target, "/github?x=1");
    assert_int_equal (req.minor_version, 1);
    assert_int_equal (req.content_length, 12);
    assert_int_equal (req.n_headers, 4);
    assert_string_equal (kiwi_http_header_get (&req, "x-github-event"), "workflow_run");
    assert_string_equal (kiwi_http_header_get (&req, "X-Hub-Signature-256"), "sha256=abc");
    assert_null (kiwi_http_header_get (&req, "X-GitHub-Delivery"));

    /* bare LF line ends, leading empty line, HTTP/1.0, GET without a length */
    r = parse ("\r\nGET /healthz HTTP/1.0\nUser-Agent: t\n\n", &req, &status, NULL);
    assert_true (r > 0);
    assert_string_equal (req.method, "GET");
    assert_int_equal (req.minor_version, 0);
    assert_int_equal (req.content_length, -1);
}

static void
test_parse_incomplete (void **state)
{
    kiwi_http_request req;
    int status;
    assert_int_equal (parse ("POST /github HTTP/1.1\r\nContent-Length: 3\r\n", &req, &status, NULL), 0);
    assert_int_equal (parse ("", &req, &status, NULL), 0);
    assert_int_equal (parse ("GET / HTTP/1.1\r\n\r", &req, &status, NULL), 0);
}

static void
refused (const char *text, int want_status, const char *want_msg)
{
    kiwi_http_request req;
    int status;
    char *msg = NULL;
    int r = parse (text, &req, &status, &msg);
    if (r >= 0)
        fail_msg ("accepted: %s", text);
    assert_int_equal (status, want_status);
    assert_string_equal (msg, want_msg);
    free (msg);
}

static void
test_parse_refusals (void **state)
{
    refused ("POST /github HTTP/1.1\r\n\r\n", 411, "Content-Length required");
    refused ("POST /github HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400, "malformed Content-Length");
    refused ("POST /github HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400, "malformed Content-Length");
    refused ("POST /github HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400,
             "conflicting Content-Length headers");
    refused ("POST /github HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
             "Transfer-Encoding is not supported; send Content-Length");
    refused ("POST /github HTTP/2.0\r\n\r\n", 505, "only HTTP/1.x is supported");
    refused ("POST /github\r\n\r\n", 400, "malformed request line");
    refused ("POST  /github HTTP/1.1\r\n\r\n", 400, "malformed request line");
    refused ("POST /github HTTP/1.1 extra\r\n\r\n", 400, "malformed request line");
    refused ("PO(ST /github HTTP/1.1\r\n\r\n", 400, "malformed method");
    refused ("POST /github HTTP/1.x\r\n\r\n", 400, "malformed HTTP version");
    refused ("GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "malformed header");
    refused ("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "malformed header name");
    refused ("GET / HTTP/1.1\r\nA: b\r\n  folded\r\n\r\n", 400, "obsolete header line folding");
    refused ("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", 400, "control character in a header value");

    /* a head that never ends within 64 KiB */
    char *big = malloc (KIWI_HTTP_HEAD_MAX + 8);
    strcpy (big, "GET / HTTP/1.1\r\nX-Big: ");
    size_t n = strlen (big);
    memset (big + n, 'a', KIWI_HTTP_HEAD_MAX - n);
    big[KIWI_HTTP_HEAD_MAX] = '\0';
    refused (big, 431, "request head larger than 64 KiB");
    free (big);

    /* more than 100 headers */
    char many[8192];
    size_t m = (size_t) snprintf (many, sizeof many, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 101; i++)
        m += (size_t) snprintf (many + m, sizeof many - m, "H%d: v\r\n", i);
    snprintf (many + m, sizeof many - m, "\r\n");
    refused (many, 431, "more than 100 headers");
}

/* ---------------------------------------------------------------- server */

typedef struct srv_ctx {
    kiwi_http_server *srv;
    volatile int stop;
    uint64_t deferred;       /* a request answered by the loop, later */
    int deferred_countdown;
    int requests;
} srv_ctx;

static void
handler (kiwi_http_server *srv, const kiwi_http_request *req, void *ctx)
{
    srv_ctx *c = ctx;
    c->requests++;
    if (strcmp (req->target, "/later") == 0) {
        c->deferred = req->conn;
        c->deferred_countdown = 3;
        return;
    }
    char body[256];
    int n = snprintf (body, sizeof body, "%s %s %zu %s", req->method, req->target, req->body_len,
                      kiwi_http_header_get (req, "X-GitHub-Event") ?: "-");
    kiwi_http_respond (srv, req->conn, 202, "text/plain", body, (size_t) n);
}

static void *
serve (void *arg)
{
    srv_ctx *c = arg;
    while (!c->stop) {
        kiwi_error_t err = NULL;
        if (kiwi_http_server_poll (c->srv, -1, -1, 20, &err) < 0)
            fail_msg ("poll: %s", kiwi_error_msg (err));
        if (c->deferred && --c->deferred_countdown <= 0) {
            kiwi_http_respond (c->srv, c->deferred, 200, "text/plain", "later", 5);
            c->deferred = 0;
        }
    }
    return NULL;
}

static int
connect_to (kiwi_http_server *srv)
{
    const char *addr = kiwi_http_server_address (srv);
    const char *colon = strrchr (addr, ':');
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) atoi (colon + 1)) };
    inet_pton (AF_INET, "127.0.0.1", &sa.sin_addr);
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    assert_true (fd >= 0);
    assert_int_equal (connect (fd, (struct sockaddr *) &sa, sizeof sa), 0);
    return fd;
}

static void
send_all (int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = send (fd, buf, len, MSG_NOSIGNAL);
        assert_true (w > 0);
        buf += w;
        len -= (size_t) w;
    }
}

/* Reads until the server closes (or 5 s pass). */
static char *
recv_all (int fd)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc (cap);
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll (&p, 1, 5000) <= 0)
            break;
        ssize_t r = recv (fd, buf + n, cap - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t) r;
        if (n + 1 >= cap)
            buf = realloc (buf, cap *= 2);
    }
    buf[n] = '\0';
    return buf;
}

static char *
exchange (kiwi_http_server *srv, const char *request, size_t len)
{
    int fd = connect_to (srv);
    send_all (fd, request, len);
    char *resp = recv_all (fd);
    close (fd);
    return resp;
}

static void
test_server (void **state)
{
    srv_ctx c = { 0 };
    kiwi_error_t err = NULL;
    c.srv = kiwi_http_server_new ("127.0.0.1:0", 1024 * 1024, handler, &c, &err);
    assert_non_null (c.srv);
    assert_true (strncmp (kiwi_http_server_address (c.srv), "127.0.0.1:", 10) == 0);
    assert_true (atoi (strrchr (kiwi_http_server_address (c.srv), ':') + 1) > 0);
    pthread_t th;
    pthread_create (&th, NULL, serve, &c);

    /* an ordinary webhook, the body in two pieces */
    const char *req = "POST /github HTTP/1.1\r\nHost: x\r\nX-GitHub-Event: ping\r\nContent-Length: 10\r\n\r\n01234";
    int fd = connect_to (c.srv);
    send_all (fd, req, strlen (req));
    usleep (50000);
    send_all (fd, "56789", 5);
    char *resp = recv_all (fd);
    close (fd);
    assert_true (strncmp (resp, "HTTP/1.1 202 Accepted\r\n", 23) == 0);
    assert_non_null (strstr (resp, "Connection: close\r\n"));
    assert_non_null (strstr (resp, "Content-Length: 20\r\n"));
    assert_non_null (strstr (resp, "\r\n\r\nPOST /github 10 ping"));
    free (resp);

    /* answered later, from the loop */
    const char *later = "GET /later HTTP/1.1\r\n\r\n";
    resp = exchange (c.srv, later, strlen (later));
    assert_true (strncmp (resp, "HTTP/1.1 200 OK\r\n", 17) == 0);
    assert_non_null (strstr (resp, "\r\n\r\nlater"));
    free (resp);

    /* too large: 413 from the head, the body never read */
    const char *huge = "POST /github HTTP/1.1\r\nContent-Length: 2000000\r\nExpect: 100-continue\r\n\r\n";
    resp = exchange (c.srv, huge, strlen (huge));
    assert_true (strncmp (resp, "HTTP/1.1 413 Content Too Large\r\n", 32) == 0);
    assert_non_null (strstr (resp, "{\"error\":\"body of 2000000 bytes is over the limit of 1048576 bytes\"}"));
    free (resp);

    /* 413 while the client is already sending the body: the answer arrives, not a reset */
    char *big = malloc (1200000 + 128);
    int hl = sprintf (big, "POST /github HTTP/1.1\r\nContent-Length: 1200000\r\n\r\n");
    memset (big + hl, 'x', 1200000);
    fd = connect_to (c.srv);
    size_t sent = 0;
    while (sent < (size_t) hl + 1200000) {
        ssize_t w = send (fd, big + sent, (size_t) hl + 1200000 - sent, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        sent += (size_t) w;
    }
    resp = recv_all (fd);
    close (fd);
    assert_true (strncmp (resp, "HTTP/1.1 413 ", 13) == 0);
    free (resp);
    free (big);

    /* Expect: 100-continue within the limit */
    const char *cont = "POST /x HTTP/1.1\r\nContent-Length: 4\r\nExpect: 100-continue\r\n\r\n";
    fd = connect_to (c.srv);
    send_all (fd, cont, strlen (cont));
    char first[64] = { 0 };
    struct pollfd p = { fd, POLLIN, 0 };
    assert_int_equal (poll (&p, 1, 2000), 1);
    ssize_t r = recv (fd, first, 25, 0);
    assert_int_equal (r, 25);
    assert_string_equal (first, "HTTP/1.1 100 Continue\r\n\r\n");
    send_all (fd, "body", 4);
    resp = recv_all (fd);
    close (fd);
    assert_true (strncmp (resp, "HTTP/1.1 202 ", 13) == 0);
    assert_non_null (strstr (resp, "POST /x 4 -"));
    free (resp);

    /* malformed */
    const char *bad = "POST /github HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
    resp = exchange (c.srv, bad, strlen (bad));
    assert_true (strncmp (resp, "HTTP/1.1 501 Not Implemented\r\n", 30) == 0);
    free (resp);

    /* a client that leaves half way is dropped; the server goes on */
    fd = connect_to (c.srv);
    send_all (fd, "POST /github HTTP/1.1\r\nContent-Len", 34);
    close (fd);

    /* many at once */
    enum { N = 40 };
    int fds[N];
    for (int i = 0; i < N; i++) {
        fds[i] = connect_to (c.srv);
        char one[128];
        int n = snprintf (one, sizeof one, "POST /n/%d HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", i);
        send_all (fds[i], one, (size_t) n);
    }
    for (int i = 0; i < N; i++) {
        resp = recv_all (fds[i]);
        char want[64];
        snprintf (want, sizeof want, "POST /n/%d 1 -", i);
        assert_non_null (strstr (resp, want));
        free (resp);
        close (fds[i]);
    }

    c.stop = 1;
    pthread_join (th, NULL);
    assert_int_equal (c.requests, 3 + N);
    kiwi_http_server_free (c.srv);
}

static void
test_listen_addresses (void **state)
{
    kiwi_error_t err = NULL;
    static const char *bad[] = { "localhost", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:99999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kiwi_http_server *s = kiwi_http_server_new (bad[i], 1024, handler, NULL, &err);
        if (s != NULL)
            fail_msg ("accepted %s", bad[i]);
        assert_non_null (err);
        kiwi_error_free (&err);
    }
    kiwi_http_server *s = kiwi_http_server_new ("[::1]:0", 1024, handler, NULL, &err);
    if (s != NULL) { /* IPv6 loopback may be absent in a container */
        assert_true (strncmp (kiwi_http_server_address (s), "[::1]:", 6) == 0);
        kiwi_http_server_free (s);
    }
    kiwi_error_free (&err);
    s = kiwi_http_server_new (":0", 1024, handler, NULL, &err);
    assert_non_null (s);
    kiwi_http_server_free (s);
    /* a port in use */
    kiwi_http_server *a = kiwi_http_server_new ("127.0.0.1:0", 1024, handler, NULL, &err);
    assert_non_null (a);
    char again[64];
    snprintf (again, sizeof again, "%s", kiwi_http_server_address (a));
    kiwi_http_server *b = kiwi_http_server_new (again, 1024, handler, NULL, &err);
    assert_null (b);
    assert_non_null (strstr (kiwi_error_msg (err), "Address already in use"));
    kiwi_error_free (&err);
    kiwi_http_server_free (a);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_parse_ok),      cmocka_unit_test (test_parse_incomplete),
        cmocka_unit_test (test_parse_refusals), cmocka_unit_test (test_server),
        cmocka_unit_test (test_listen_addresses),
    };
    return cmocka_run_group_tests_name ("cli_http", tests, NULL, NULL);
}
