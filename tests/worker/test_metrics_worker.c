/*
 * test_metrics_worker.c: what kiwi-worker counts (worker/worker-metrics.h)
 * and how it is served (worker/metrics-http.h): every family with its HELP
 * and TYPE from the start, the series a dashboard expects at 0, results
 * counted by status with their duration, observations from a task process
 * carried through the event sink's frames and refused when they are not
 * one, and GET /metrics over loopback (404 elsewhere, 405 for other
 * methods, an address in use an error naming it).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "worker/events.h"
#include "worker/metrics-http.h"
#include "schemas/result.h"
#include "skip.h"
#include "worker/worker-metrics.h"

static char *
text (kiwi_worker_metrics *wm)
{
    char *t = kiwi_worker_metrics_render (wm, NULL);
    assert_non_null (t);
    return t;
}

static void
assert_has (const char *t, const char *want)
{
    if (strstr (t, want) == NULL)
        fail_msg ("no `%s` in:\n%s", want, t);
}

static void
test_families_from_the_start (void **state)
{
    kiwi_error_t err = NULL;
    kiwi_worker_metrics *wm = kiwi_worker_metrics_new ("0.1.0", "w-1", 3, &err);
    assert_non_null (wm);
    char *t = text (wm);
    static const char *const families[][2] = {
        { "kiwi_build_info", "gauge" },
        { "kiwi_tasks_total", "counter" },
        { "kiwi_task_duration_seconds", "histogram" },
        { "kiwi_phase_duration_seconds", "histogram" },
        { "kiwi_cache_hits_total", "counter" },
        { "kiwi_cache_misses_total", "counter" },
        { "kiwi_sandboxes_started_total", "counter" },
        { "kiwi_egress_checks_total", "counter" },
        { "kiwi_egress_check_ok", "gauge" },
        { "kiwi_kafka_delivery_failures_total", "counter" },
        { "kiwi_slots_busy", "gauge" },
        { "kiwi_slots", "gauge" },
        { "kiwi_redis_up", "gauge" },
    };
    for (size_t i = 0; i < sizeof families / sizeof families[0]; i++) {
        char line[160];
        snprintf (line, sizeof line, "# HELP %s ", families[i][0]);
        assert_has (t, line);
        snprintf (line, sizeof line, "# TYPE %s %s\n", families[i][0], families[i][1]);
        assert_has (t, line);
    }
    assert_has (t, "kiwi_build_info{version=\"0.1.0\",worker=\"w-1\"} 1\n");
    static const char *const statuses[] = { "fixed",  "not_fixed",  "install_failed", "needs_network",
                                            "budget_exhausted", "max_rounds", "timed_out", "error", "gave_up" };
    for (size_t i = 0; i < 9; i++) {
        char line[160];
        snprintf (line, sizeof line, "kiwi_tasks_total{status=\"%s\"} 0\n", statuses[i]);
        assert_has (t, line);
    }
    static const char *const phases[] = { "checkout", "install", "step0", "round", "verify" };
    for (size_t i = 0; i < 5; i++) {
        char line[160];
        snprintf (line, sizeof line, "kiwi_phase_duration_seconds_count{phase=\"%s\"} 0\n", phases[i]);
        assert_has (t, line);
    }
    assert_has (t, "kiwi_cache_hits_total{kind=\"install\"} 0\n");
    assert_has (t, "kiwi_cache_misses_total{kind=\"verify\"} 0\n");
    assert_has (t, "kiwi_task_duration_seconds_count 0\n");
    assert_has (t, "kiwi_slots 3\n");
    assert_has (t, "kiwi_slots_busy 0\n");
    assert_has (t, "kiwi_redis_up 0\n");
    free (t);
    kiwi_worker_metrics_free (wm);
}

static void
encode_result (kiwi_result_status st, uint64_t duration_ms, char **buf, size_t *len)
{
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = "t-1";
    r.status = st;
    r.diff = st == KIWI_RESULT_FIXED ? "" : NULL;
    r.worker_id = "w-1";
    r.finished_at = 1;
    r.duration_ms = duration_ms;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_result_encode (&r, buf, len, &err), 0);
}

static void
test_results_and_daemon_side (void **state)
{
    kiwi_worker_metrics *wm = kiwi_worker_metrics_new ("0.1.0", "w-1", 2, NULL);
    char *buf;
    size_t len;
    kiwi_error_t err = NULL;
    encode_result (KIWI_RESULT_FIXED, 2500, &buf, &len);
    assert_int_equal (kiwi_worker_metrics_result (wm, buf, len, &err), 0);
    free (buf);
    encode_result (KIWI_RESULT_NEEDS_NETWORK, 40000, &buf, &len);
    assert_int_equal (kiwi_worker_metrics_result (wm, buf, len, &err), 0);
    free (buf);
    assert_int_equal (kiwi_worker_metrics_result (wm, "\x81\xa1x", 3, &err), -1); /* not a result */
    kiwi_error_free (&err);
    kiwi_worker_metrics_cache (wm, "install", true);
    kiwi_worker_metrics_cache (wm, "verify", false);
    kiwi_worker_metrics_egress (wm, "metadata_blocked", true);
    kiwi_worker_metrics_egress (wm, "metadata_blocked", false);
    kiwi_worker_metrics_delivery_failed (wm, "kiwi.results");
    kiwi_worker_metrics_state (wm, 1, 2, true);
    char *t = text (wm);
    assert_has (t, "kiwi_tasks_total{status=\"fixed\"} 1\n");
    assert_has (t, "kiwi_tasks_total{status=\"needs_network\"} 1\n");
    assert_has (t, "kiwi_tasks_total{status=\"error\"} 0\n");
    assert_has (t, "kiwi_task_duration_seconds_bucket{le=\"1\"} 0\n");
    assert_has (t, "kiwi_task_duration_seconds_bucket{le=\"5\"} 1\n");
    assert_has (t, "kiwi_task_duration_seconds_bucket{le=\"60\"} 2\n");
    assert_has (t, "kiwi_task_duration_seconds_sum 42.5\n");
    assert_has (t, "kiwi_task_duration_seconds_count 2\n");
    assert_has (t, "kiwi_cache_hits_total{kind=\"install\"} 1\n");
    assert_has (t, "kiwi_cache_misses_total{kind=\"verify\"} 1\n");
    assert_has (t, "kiwi_egress_checks_total{check=\"metadata_blocked\",outcome=\"pass\"} 1\n");
    assert_has (t, "kiwi_egress_checks_total{check=\"metadata_blocked\",outcome=\"fail\"} 1\n");
    assert_has (t, "kiwi_egress_check_ok{check=\"metadata_blocked\"} 0\n");
    assert_has (t, "kiwi_kafka_delivery_failures_total{topic=\"kiwi.results\"} 1\n");
    assert_has (t, "kiwi_slots_busy 1\n");
    assert_has (t, "kiwi_redis_up 1\n");
    free (t);
    kiwi_worker_metrics_free (wm);
    /* NULL: no-ops, as the daemon may call them before the registry exists */
    kiwi_worker_metrics_cache (NULL, "install", true);
    kiwi_worker_metrics_state (NULL, 0, 0, false);
}

typedef struct {
    kiwi_worker_metrics *wm;
    int frames, refused;
} feed_ctx;

static void
on_frame (int type, const char *body, size_t len, void *ud)
{
    feed_ctx *c = ud;
    assert_int_equal (type, KIWI_FRAME_OBSERVE);
    c->frames++;
    kiwi_error_t err = NULL;
    if (kiwi_worker_metrics_observation (c->wm, body, len, &err) < 0) {
        c->refused++;
        assert_non_null (strstr (kiwi_error_msg (err), "observation"));
    }
    kiwi_error_free (&err);
}

/* The task process's side: observations through the pipe sink become 'M'
 * frames that the daemon's reader takes and the metrics count. */
static void
test_observations_through_frames (void **state)
{
    int fds[2];
    assert_int_equal (pipe (fds), 0);
    kiwi_events ev;
    kiwi_events_pipe_init (&ev, fds[1], "t-1", "w-1");
    kiwi_events_observe (&ev, KIWI_OBS_PHASE, "install", 1.5);
    kiwi_events_observe (&ev, KIWI_OBS_PHASE, "round", 0.2);
    kiwi_events_observe (&ev, KIWI_OBS_SANDBOX, "gvisor", 1);
    kiwi_events_observe (&ev, KIWI_OBS_SANDBOX, "gvisor", 1);
    kiwi_events_observe (&ev, KIWI_OBS_PHASE, "lunch", 1);       /* no such phase */
    kiwi_events_observe (&ev, KIWI_OBS_SANDBOX, "Bad\"Name", 1); /* not a driver's name */
    kiwi_events_observe (&ev, KIWI_OBS_PHASE, "verify", -1);     /* negative */
    kiwi_events_observe (&ev, "weather", "sunny", 1);            /* unknown */
    close (fds[1]);
    kiwi_events once;
    kiwi_events_jsonl_init (&once, stdout, "t-1", "w-1");
    kiwi_events_observe (&once, KIWI_OBS_PHASE, "install", 1); /* --once: dropped, nothing printed */
    feed_ctx c = { .wm = kiwi_worker_metrics_new ("0.1.0", "w-1", 1, NULL) };
    kiwi_frame_reader r = { 0 };
    char buf[4096];
    ssize_t n;
    kiwi_error_t err = NULL;
    while ((n = read (fds[0], buf, sizeof buf)) > 0)
        assert_int_equal (kiwi_frame_feed (&r, buf, (size_t) n, on_frame, &c, &err), 0);
    close (fds[0]);
    kiwi_frame_reader_clear (&r);
    assert_int_equal (c.frames, 8);
    assert_int_equal (c.refused, 4);
    assert_int_equal (kiwi_worker_metrics_observation (c.wm, "phase install", 13, &err), -1);
    kiwi_error_free (&err);
    assert_int_equal (kiwi_worker_metrics_observation (c.wm, "phase install 1 2", 17, &err), -1);
    kiwi_error_free (&err);
    assert_int_equal (kiwi_worker_metrics_observation (c.wm, "phase install nan", 17, &err), -1);
    kiwi_error_free (&err);
    char big[300];
    memset (big, 'a', sizeof big);
    assert_int_equal (kiwi_worker_metrics_observation (c.wm, big, sizeof big, &err), -1);
    kiwi_error_free (&err);
    char *t = text (c.wm);
    assert_has (t, "kiwi_phase_duration_seconds_bucket{phase=\"install\",le=\"1\"} 0\n");
    assert_has (t, "kiwi_phase_duration_seconds_bucket{phase=\"install\",le=\"2.5\"} 1\n");
    assert_has (t, "kiwi_phase_duration_seconds_sum{phase=\"install\"} 1.5\n");
    assert_has (t, "kiwi_phase_duration_seconds_count{phase=\"round\"} 1\n");
    assert_has (t, "kiwi_phase_duration_seconds_count{phase=\"verify\"} 0\n");
    assert_has (t, "kiwi_sandboxes_started_total{driver=\"gvisor\"} 2\n");
    assert_null (strstr (t, "lunch"));
    assert_null (strstr (t, "Bad"));
    assert_null (strstr (t, "sunny"));
    free (t);
    kiwi_worker_metrics_free (c.wm);
}

/* ---------- the HTTP endpoint ---------- */

static int
free_port (void)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    assert_int_equal (bind (fd, (struct sockaddr *) &a, sizeof a), 0);
    socklen_t l = sizeof a;
    getsockname (fd, (struct sockaddr *) &a, &l);
    close (fd);
    return ntohs (a.sin_port);
}

/* One HTTP/1.0 request to 127.0.0.1:port; the whole response, to free. */
static char *
http (int port, const char *method, const char *path)
{
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    assert_int_equal (connect (fd, (struct sockaddr *) &a, sizeof a), 0);
    char req[256];
    int rl = snprintf (req, sizeof req, "%s %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", method, path);
    assert_int_equal (write (fd, req, (size_t) rl), rl);
    size_t cap = 65536, len = 0;
    char *out = malloc (cap);
    ssize_t n;
    while ((n = read (fd, out + len, cap - len - 1)) > 0) {
        len += (size_t) n;
        if (cap - len < 4096)
            out = realloc (out, cap *= 2);
    }
    out[len] = '\0';
    close (fd);
    return out;
}

static void
test_http_endpoint (void **state)
{
    kiwi_worker_metrics *wm = kiwi_worker_metrics_new ("0.1.0", "w-http", 4, NULL);
    int port = free_port ();
    char addr[64];
    snprintf (addr, sizeof addr, "127.0.0.1:%d", port);
    kiwi_error_t err = NULL;
    kiwi_metrics_server *s = kiwi_worker_metrics_serve (wm, addr, &err);
    if (s == NULL)
        fail_msg ("%s", kiwi_error_msg (err));
    assert_int_equal (kiwi_metrics_server_port (s), port);
    kiwi_worker_metrics_state (wm, 2, 4, true);
    char *r = http (port, "GET", "/metrics");
    assert_has (r, " 200 OK\r\n");
    assert_has (r, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n");
    assert_has (r, "\r\n\r\n# HELP kiwi_build_info ");
    assert_has (r, "kiwi_slots_busy 2\n");
    assert_has (r, "kiwi_build_info{version=\"0.1.0\",worker=\"w-http\"} 1\n");
    free (r);
    r = http (port, "HEAD", "/metrics");
    assert_has (r, " 200 ");
    assert_null (strstr (r, "# HELP"));
    free (r);
    r = http (port, "GET", "/");
    assert_has (r, " 404 ");
    assert_null (strstr (r, "# HELP"));
    free (r);
    r = http (port, "POST", "/metrics");
    assert_has (r, " 405 ");
    assert_has (r, "Allow: GET, HEAD");
    free (r);
    /* the same address again: in use, named */
    kiwi_metrics_server *again = kiwi_worker_metrics_serve (wm, addr, &err);
    assert_null (again);
    assert_has (kiwi_error_msg (err), addr);
    assert_has (kiwi_error_msg (err), "Address already in use");
    kiwi_error_free (&err);
    kiwi_metrics_server_stop (s);
    /* stopped: the port is closed */
    int fd = socket (AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port),
                             .sin_addr.s_addr = htonl (INADDR_LOOPBACK) };
    assert_int_equal (connect (fd, (struct sockaddr *) &a, sizeof a), -1);
    close (fd);
    /* an address that is not this machine's (bind only: nothing is sent) */
    assert_null (kiwi_metrics_server_start ("192.0.2.1:9464", NULL, NULL, &err));
    assert_has (kiwi_error_msg (err), "metrics address `192.0.2.1:9464`: cannot listen there");
    kiwi_error_free (&err);
    assert_null (kiwi_metrics_server_start ("nonsense", NULL, NULL, &err));
    assert_has (kiwi_error_msg (err), "metrics address `nonsense`: no `:PORT`");
    kiwi_error_free (&err);
    kiwi_worker_metrics_free (wm);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_families_from_the_start),
        cmocka_unit_test (test_results_and_daemon_side),
        cmocka_unit_test (test_observations_through_frames),
        cmocka_unit_test (test_http_endpoint),
    };
    return kiwi_run_group ("metrics_worker", tests, NULL, NULL);
}
