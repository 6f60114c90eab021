/*
 * test_cli_http.c: the webhook listener's HTTP server on a loopback socket:
 * a request answered now, one answered later, a chunked body, 413 from the
 * head and while reading, Expect: 100-continue, a client that leaves, many
 * clients at once; the refusals (411, 413, 400, 505, 431), a slow client
 * timed out, the connection limits, the answer to what waits at the end.
 */
#include <setjmp.h>
#include <stdbool.h>
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
#include <time.h>
#include <unistd.h>

#include "producer/http.h"

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

/* Reads until the server closes (or ms pass without a byte). */
static char *
recv_for (int fd, int ms)
{
    size_t cap = 65536, n = 0;
    char *buf = malloc (cap);
    for (;;) {
        struct pollfd p = { fd, POLLIN, 0 };
        if (poll (&p, 1, ms) <= 0)
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
recv_all (int fd)
{
    return recv_for (fd, 5000);
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
    c.srv = kiwi_http_server_new ("127.0.0.1:0", &(kiwi_http_limits) { .max_body = 1024 * 1024 }, handler, &c, &err);
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

    /* a body many times a connection's buffer, within the limit */
    char *body = malloc (600000 + 128);
    int bl = sprintf (body, "POST /big HTTP/1.1\r\nContent-Length: 600000\r\n\r\n");
    memset (body + bl, 'b', 600000);
    resp = exchange (c.srv, body, (size_t) bl + 600000);
    assert_non_null (strstr (resp, "POST /big 600000 -"));
    free (resp);
    free (body);

    /* a chunked body within the limit */
    const char *chunked = "POST /chunked HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\n!!!\r\n0\r\n\r\n";
    resp = exchange (c.srv, chunked, strlen (chunked));
    assert_true (strncmp (resp, "HTTP/1.1 202 Accepted\r\n", 23) == 0);
    assert_non_null (strstr (resp, "POST /chunked 8 -"));
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
    assert_int_equal (c.requests, 5 + N);
    kiwi_http_server_free (c.srv);
}

/* Starts a server with `lim` on its own thread. */
static void
start (srv_ctx *c, pthread_t *th, kiwi_http_limits lim)
{
    kiwi_error_t err = NULL;
    memset (c, 0, sizeof *c);
    c->srv = kiwi_http_server_new ("127.0.0.1:0", &lim, handler, c, &err);
    assert_non_null (c->srv);
    pthread_create (th, NULL, serve, c);
}

static void
finish (srv_ctx *c, pthread_t th)
{
    c->stop = 1;
    pthread_join (th, NULL);
    kiwi_http_server_free (c->srv);
}

static void
assert_status (kiwi_http_server *srv, const char *request, const char *status_line, const char *body)
{
    char *resp = exchange (srv, request, strlen (request));
    if (strncmp (resp, status_line, strlen (status_line)) != 0)
        fail_msg ("for %.40s: %s", request, resp);
    if (body != NULL && strstr (resp, body) == NULL)
        fail_msg ("no %s in %s", body, resp);
    free (resp);
}

/* What the server refuses before the handler sees it. */
static void
test_refusals (void **state)
{
    srv_ctx c;
    pthread_t th;
    start (&c, &th, (kiwi_http_limits) { .max_body = 100 });
    assert_status (c.srv, "POST /github HTTP/1.1\r\n\r\n", "HTTP/1.1 411 ",
                   "{\"error\":\"Content-Length (or a chunked body) required\"}");
    assert_status (c.srv, "POST /github HTTP/1.1\r\nContent-Length: 101\r\n\r\n", "HTTP/1.1 413 Content Too Large\r\n",
                   "{\"error\":\"body of 101 bytes is over the limit of 100 bytes\"}");
    /* a chunked body that grows over the bound: 413 once it does, the rest unread */
    char big[512];
    int n = snprintf (big, sizeof big, "POST /github HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n%064d\r\n40\r\n%064d\r\n",
                      0, 0);
    int fd = connect_to (c.srv);
    send_all (fd, big, (size_t) n); /* no last chunk: the server answers before the end */
    char *resp = recv_all (fd);
    close (fd);
    assert_true (strncmp (resp, "HTTP/1.1 413 ", 13) == 0);
    assert_non_null (strstr (resp, "{\"error\":\"body over the limit of 100 bytes\"}"));
    free (resp);
    /* malformed, a version other than 1.x, a head over 64 KiB */
    assert_status (c.srv, "POST /github\r\n\r\n", "HTTP/1.1 400 ", NULL);
    assert_status (c.srv, "POST /github HTTP/2.0\r\n\r\n", "HTTP/1.1 505 ", NULL);
    char *head = malloc (KIWI_HTTP_HEAD_MAX + 64);
    n = sprintf (head, "GET / HTTP/1.1\r\nX-Big: ");
    memset (head + n, 'a', KIWI_HTTP_HEAD_MAX);
    strcpy (head + n + KIWI_HTTP_HEAD_MAX, "\r\n\r\n");
    assert_status (c.srv, head, "HTTP/1.1 431 ", NULL);
    free (head);
    finish (&c, th);
    assert_int_equal (c.requests, 0);
}

/* A client that does not finish its request is closed after the timeout. */
static void
test_slow_client (void **state)
{
    srv_ctx c;
    pthread_t th;
    start (&c, &th, (kiwi_http_limits) { .max_body = 100, .timeout_s = 1 });
    int fd = connect_to (c.srv);
    const char *half = "POST /github HTTP/1.1\r\nContent-Length: 10\r\n\r\n01234";
    send_all (fd, half, strlen (half));
    struct timespec t0, t1;
    clock_gettime (CLOCK_MONOTONIC, &t0);
    char *resp = recv_all (fd); /* returns when the server closes, or after 5 s */
    clock_gettime (CLOCK_MONOTONIC, &t1);
    close (fd);
    assert_string_equal (resp, "");
    free (resp);
    assert_true (t1.tv_sec - t0.tv_sec < 4);
    finish (&c, th);
    assert_int_equal (c.requests, 0);
}

/* `allowed` connections held open; one more: it waits in the backlog
 * (queued = true: the total limit) or is closed at once (the per-address
 * limit); the held ones are served. */
static void
limit (kiwi_http_limits lim, int allowed, bool queued)
{
    srv_ctx c;
    pthread_t th;
    start (&c, &th, lim);
    int fds[16];
    for (int i = 0; i < allowed; i++)
        fds[i] = connect_to (c.srv);
    usleep (100000);
    int over = connect_to (c.srv);
    send_all (over, "GET / HTTP/1.1\r\n\r\n", 18);
    char *resp = recv_for (over, 500);
    assert_string_equal (resp, "");
    free (resp);
    for (int i = 0; i < allowed; i++) {
        char one[64];
        int n = snprintf (one, sizeof one, "POST /n/%d HTTP/1.1\r\nContent-Length: 1\r\n\r\nx", i);
        send_all (fds[i], one, (size_t) n);
        resp = recv_all (fds[i]);
        assert_true (strncmp (resp, "HTTP/1.1 202 ", 13) == 0);
        free (resp);
        close (fds[i]);
    }
    if (queued) { /* served once there is room */
        resp = recv_all (over);
        assert_non_null (strstr (resp, "GET / 0 -"));
        free (resp);
    }
    close (over);
    finish (&c, th);
    assert_int_equal (c.requests, allowed + queued);
}

static void
test_connection_limits (void **state)
{
    limit ((kiwi_http_limits) { .max_body = 100, .conns_max = 3 }, 3, true);
    limit ((kiwi_http_limits) { .max_body = 100, .conns_max = 10, .per_ip_max = 2 }, 2, false);
}

/* A request still waiting for its answer when the server is freed gets 503. */
static void
test_free_answers_waiting (void **state)
{
    kiwi_error_t err = NULL;
    srv_ctx c = { 0 };
    c.srv = kiwi_http_server_new ("127.0.0.1:0", &(kiwi_http_limits) { .max_body = 100 }, handler, &c, &err);
    assert_non_null (c.srv);
    int fd = connect_to (c.srv);
    send_all (fd, "GET /later HTTP/1.1\r\n\r\n", 23);
    for (int i = 0; i < 50 && c.deferred == 0; i++)
        assert_true (kiwi_http_server_poll (c.srv, -1, -1, 20, &err) >= 0);
    assert_true (c.deferred != 0);
    assert_int_equal (kiwi_http_server_open_connections (c.srv), 1);
    kiwi_http_server_stop_accepting (c.srv);
    kiwi_http_server_free (c.srv);
    char *resp = recv_all (fd);
    close (fd);
    if (*resp != '\0') /* the answer may not be written before the close */
        assert_true (strncmp (resp, "HTTP/1.1 503 ", 13) == 0);
    free (resp);
}

static void
test_listen_addresses (void **state)
{
    const kiwi_http_limits small = { .max_body = 1024 };
    kiwi_error_t err = NULL;
    static const char *bad[] = { "localhost", "127.0.0.1:", "127.0.0.1:http", "127.0.0.1:99999999" };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kiwi_http_server *s = kiwi_http_server_new (bad[i], &small, handler, NULL, &err);
        if (s != NULL)
            fail_msg ("accepted %s", bad[i]);
        assert_non_null (err);
        kiwi_error_free (&err);
    }
    kiwi_http_server *s = kiwi_http_server_new ("[::1]:0", &small, handler, NULL, &err);
    if (s != NULL) { /* IPv6 loopback may be absent in a container */
        assert_true (strncmp (kiwi_http_server_address (s), "[::1]:", 6) == 0);
        kiwi_http_server_free (s);
    }
    kiwi_error_free (&err);
    s = kiwi_http_server_new (":0", &small, handler, NULL, &err);
    assert_non_null (s);
    kiwi_http_server_free (s);
    /* a port in use */
    kiwi_http_server *a = kiwi_http_server_new ("127.0.0.1:0", &small, handler, NULL, &err);
    assert_non_null (a);
    char again[64];
    snprintf (again, sizeof again, "%s", kiwi_http_server_address (a));
    kiwi_http_server *b = kiwi_http_server_new (again, &small, handler, NULL, &err);
    assert_null (b);
    assert_non_null (strstr (kiwi_error_msg (err), "Address already in use"));
    kiwi_error_free (&err);
    kiwi_http_server_free (a);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
         
        cmocka_unit_test (test_server),        cmocka_unit_test (test_refusals),
        cmocka_unit_test (test_slow_client),   cmocka_unit_test (test_connection_limits),
        cmocka_unit_test (test_free_answers_waiting),
        cmocka_unit_test (test_listen_addresses),
    };
    return cmocka_run_group_tests_name ("cli_http", tests, NULL, NULL);
}
