/*
 * test_metrics.c: the metrics registry (worker/metrics.h) and its text
 * format: HELP and TYPE lines, label values escaped, histograms as
 * cumulative buckets with +Inf, _sum and _count, numbers as Prometheus
 * reads them, refused updates leaving the registry unchanged, and updates
 * from several threads.
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "worker/metrics.h"
#include "skip.h"

static char *
render (kiwi_metrics *m)
{
    size_t len = 0;
    char *t = kiwi_metrics_render (m, &len);
    assert_non_null (t);
    assert_int_equal (strlen (t), len);
    return t;
}

static void
assert_renders (kiwi_metrics *m, const char *want)
{
    char *t = render (m);
    if (strcmp (t, want) != 0)
        fail_msg ("rendered:\n%s\nwanted:\n%s", t, want);
    free (t);
}

static void
test_counter_and_gauge (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    kiwi_metric *c = kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "kiwi_tasks_total", "Tasks finished", "status",
                                            NULL, 0, &err);
    kiwi_metric *g = kiwi_metrics_register (m, KIWI_METRIC_GAUGE, "kiwi_slots_busy", "Slots busy", NULL, NULL, 0,
                                            &err);
    assert_non_null (c);
    assert_non_null (g);
    const char *fixed[] = { "fixed" }, *error[] = { "error" };
    assert_int_equal (kiwi_metric_touch (c, error, &err), 0);
    assert_int_equal (kiwi_metric_add (c, fixed, 1, &err), 0);
    assert_int_equal (kiwi_metric_add (c, fixed, 2, &err), 0);
    assert_int_equal (kiwi_metric_set (g, NULL, 3, &err), 0);
    assert_int_equal (kiwi_metric_add (g, NULL, -1, &err), 0);
    assert_renders (m, "# HELP kiwi_tasks_total Tasks finished\n"
                       "# TYPE kiwi_tasks_total counter\n"
                       "kiwi_tasks_total{status=\"error\"} 0\n"
                       "kiwi_tasks_total{status=\"fixed\"} 3\n"
                       "# HELP kiwi_slots_busy Slots busy\n"
                       "# TYPE kiwi_slots_busy gauge\n"
                       "kiwi_slots_busy 2\n");
    kiwi_metrics_free (m);
}

/* Label values: backslash, double quote and line feed escaped, other bytes
 * as they are. HELP: backslash and line feed. */
static void
test_escaping (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    kiwi_metric *c = kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "x_total", "a \\ help\nline \"quoted\"",
                                            "a,b", NULL, 0, &err);
    assert_non_null (c);
    const char *v[] = { "back\\slash \"quote\"\nnew line", "ünï {c}=,ode" };
    assert_int_equal (kiwi_metric_add (c, v, 1, &err), 0);
    assert_renders (m, "# HELP x_total a \\\\ help\\nline \"quoted\"\n"
                       "# TYPE x_total counter\n"
                       "x_total{a=\"back\\\\slash \\\"quote\\\"\\nnew line\",b=\"ünï {c}=,ode\"} 1\n");
    kiwi_metrics_free (m);
}

/* Buckets are cumulative, an observation equal to a bound falls in it,
 * +Inf holds every observation, then _sum and _count. */
static void
test_histogram (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    const double bounds[] = { 0.5, 1, 2.5 };
    kiwi_metric *h = kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "kiwi_phase_duration_seconds", "Phases",
                                            "phase", bounds, 3, &err);
    kiwi_metric *plain = kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "t_seconds", "T", NULL, bounds, 1, &err);
    assert_non_null (h);
    assert_non_null (plain);
    const char *inst[] = { "install" }, *co[] = { "checkout" };
    assert_int_equal (kiwi_metric_touch (h, co, &err), 0);
    double obs[] = { 0.25, 1, 1.5, 7 };
    for (size_t i = 0; i < 4; i++)
        assert_int_equal (kiwi_metric_observe (h, inst, obs[i], &err), 0);
    assert_int_equal (kiwi_metric_observe (plain, NULL, 0.1, &err), 0);
    assert_renders (m, "# HELP kiwi_phase_duration_seconds Phases\n"
                       "# TYPE kiwi_phase_duration_seconds histogram\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"checkout\",le=\"0.5\"} 0\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"checkout\",le=\"1\"} 0\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"checkout\",le=\"2.5\"} 0\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"checkout\",le=\"+Inf\"} 0\n"
                       "kiwi_phase_duration_seconds_sum{phase=\"checkout\"} 0\n"
                       "kiwi_phase_duration_seconds_count{phase=\"checkout\"} 0\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"install\",le=\"0.5\"} 1\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"install\",le=\"1\"} 2\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"install\",le=\"2.5\"} 3\n"
                       "kiwi_phase_duration_seconds_bucket{phase=\"install\",le=\"+Inf\"} 4\n"
                       "kiwi_phase_duration_seconds_sum{phase=\"install\"} 9.75\n"
                       "kiwi_phase_duration_seconds_count{phase=\"install\"} 4\n"
                       "# HELP t_seconds T\n"
                       "# TYPE t_seconds histogram\n"
                       "t_seconds_bucket{le=\"0.5\"} 1\n"
                       "t_seconds_bucket{le=\"+Inf\"} 1\n"
                       "t_seconds_sum 0.1\n"
                       "t_seconds_count 1\n");
    kiwi_metrics_free (m);
}

/* Numbers: the shortest decimal that reads back the same; infinities and
 * NaN as the format spells them. */
static void
test_numbers (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    kiwi_metric *g = kiwi_metrics_register (m, KIWI_METRIC_GAUGE, "g", "", "k", NULL, 0, &err);
    const char *a[] = { "a" }, *b[] = { "b" }, *c[] = { "c" }, *d[] = { "d" }, *e[] = { "e" };
    kiwi_metric_set (g, a, 0.1 + 0.2, &err);
    kiwi_metric_set (g, b, 1e-7, &err);
    kiwi_metric_set (g, c, 123456789012, &err);
    kiwi_metric_set (g, d, INFINITY, &err);
    kiwi_metric_set (g, e, -INFINITY, &err);
    assert_renders (m, "# HELP g \n# TYPE g gauge\n"
                       "g{k=\"a\"} 0.30000000000000004\n"
                       "g{k=\"b\"} 1e-07\n"
                       "g{k=\"c\"} 123456789012\n"
                       "g{k=\"d\"} +Inf\n"
                       "g{k=\"e\"} -Inf\n");
    kiwi_metrics_free (m);
}

static void
expect_refused (int rc, kiwi_error_t *err, const char *what)
{
    assert_int_equal (rc, -1);
    if (strstr (kiwi_error_msg (*err), what) == NULL)
        fail_msg ("error `%s` lacks `%s`", kiwi_error_msg (*err), what);
    kiwi_error_free (err);
}

static void
test_refused_registrations (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    const double up[] = { 1, 2 }, down[] = { 2, 1 }, inf[] = { 1, INFINITY };
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "9lives", "", NULL, NULL, 0, &err));
    expect_refused (-1, &err, "`9lives` is not a metric name");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "a-b", "", NULL, NULL, 0, &err));
    expect_refused (-1, &err, "not a metric name");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "ok", "", "a,b-c", NULL, 0, &err));
    expect_refused (-1, &err, "`b-c` is not a label name");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "ok", "", "__x", NULL, 0, &err));
    expect_refused (-1, &err, "`__x`");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "ok", "", "a,a", NULL, 0, &err));
    expect_refused (-1, &err, "twice");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "h", "", "le", up, 2, &err));
    expect_refused (-1, &err, "`le`");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "h", "", NULL, down, 2, &err));
    expect_refused (-1, &err, "strictly increasing");
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "h", "", NULL, inf, 2, &err));
    expect_refused (-1, &err, "finite");
    assert_non_null (kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "ok_total", "", "le", NULL, 0, &err));
    assert_null (kiwi_metrics_register (m, KIWI_METRIC_GAUGE, "ok_total", "", NULL, NULL, 0, &err));
    expect_refused (-1, &err, "registered twice");
    kiwi_metrics_free (m);
}

/* A refused update changes nothing. */
static void
test_refused_updates (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    const double b[] = { 1 };
    kiwi_metric *c = kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "c_total", "", "k", NULL, 0, &err);
    kiwi_metric *h = kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "h", "", NULL, b, 1, &err);
    const char *v[] = { "v" };
    assert_int_equal (kiwi_metric_add (c, v, 1, &err), 0);
    expect_refused (kiwi_metric_add (c, v, -1, &err), &err, "only goes up");
    expect_refused (kiwi_metric_add (c, v, NAN, &err), &err, "NaN");
    expect_refused (kiwi_metric_set (c, v, 5, &err), &err, "set does not apply");
    expect_refused (kiwi_metric_observe (c, v, 5, &err), &err, "observe does not apply");
    expect_refused (kiwi_metric_add (h, NULL, 1, &err), &err, "add does not apply");
    expect_refused (kiwi_metric_add (c, NULL, 1, &err), &err, "1 label values needed");
    assert_int_equal (kiwi_metric_add (c, v, 1, NULL), 0); /* err may be NULL */
    assert_int_equal (kiwi_metric_add (c, v, -1, NULL), -1);
    assert_renders (m, "# HELP c_total \n# TYPE c_total counter\nc_total{k=\"v\"} 2\n"
                       "# HELP h \n# TYPE h histogram\n");
    kiwi_metrics_free (m);
}

/* A label whose values are unbounded cannot grow a family past
 * KIWI_METRIC_MAX_SERIES; existing series still count. */
static void
test_series_limit (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    kiwi_error_t err = NULL;
    kiwi_metric *c = kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "c_total", "", "k", NULL, 0, &err);
    char name[32];
    const char *v[] = { name };
    for (int i = 0; i < KIWI_METRIC_MAX_SERIES; i++) {
        snprintf (name, sizeof name, "s%d", i);
        assert_int_equal (kiwi_metric_add (c, v, 1, &err), 0);
    }
    snprintf (name, sizeof name, "one-too-many");
    expect_refused (kiwi_metric_add (c, v, 1, &err), &err, "more than 512 series");
    snprintf (name, sizeof name, "s7");
    assert_int_equal (kiwi_metric_add (c, v, 1, &err), 0);
    char *t = render (m);
    assert_non_null (strstr (t, "c_total{k=\"s7\"} 2\n"));
    assert_null (strstr (t, "one-too-many"));
    free (t);
    kiwi_metrics_free (m);
}

typedef struct {
    kiwi_metric *c, *h;
} pair;

static void *
hammer (void *arg)
{
    pair *p = arg;
    const char *v[] = { "x" };
    for (int i = 0; i < 20000; i++) {
        kiwi_metric_add (p->c, v, 1, NULL);
        kiwi_metric_observe (p->h, NULL, 0.5, NULL);
    }
    return NULL;
}

/* Updates from two threads while a third renders: nothing lost. */
static void
test_threads (void **state)
{
    kiwi_metrics *m = kiwi_metrics_new ();
    const double b[] = { 1 };
    pair p = { kiwi_metrics_register (m, KIWI_METRIC_COUNTER, "c_total", "", "k", NULL, 0, NULL),
               kiwi_metrics_register (m, KIWI_METRIC_HISTOGRAM, "h", "", NULL, b, 1, NULL) };
    pthread_t t1, t2;
    pthread_create (&t1, NULL, hammer, &p);
    pthread_create (&t2, NULL, hammer, &p);
    for (int i = 0; i < 50; i++)
        free (render (m));
    pthread_join (t1, NULL);
    pthread_join (t2, NULL);
    char *t = render (m);
    assert_non_null (strstr (t, "c_total{k=\"x\"} 40000\n"));
    assert_non_null (strstr (t, "h_bucket{le=\"1\"} 40000\n"));
    assert_non_null (strstr (t, "h_sum 20000\n"));
    assert_non_null (strstr (t, "h_count 40000\n"));
    free (t);
    kiwi_metrics_free (m);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_counter_and_gauge),   cmocka_unit_test (test_escaping),
        cmocka_unit_test (test_histogram),           cmocka_unit_test (test_numbers),
        cmocka_unit_test (test_refused_registrations), cmocka_unit_test (test_refused_updates),
        cmocka_unit_test (test_series_limit),        cmocka_unit_test (test_threads),
    };
    return kiwi_run_group ("metrics", tests, NULL, NULL);
}
