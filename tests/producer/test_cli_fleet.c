/*
 * test_cli_fleet.c: the fleet from heartbeats (producer/fleet.h): the table
 * with an up, a degraded and a gone worker (slots, counters, cache hit
 * rate, egress checks, the degraded reason and a failed check's detail),
 * the gone-after time (fixed, from the heartbeat interval, the 30 s
 * default), tasks per minute, older heartbeats dropped, control characters
 * from a worker never reaching the terminal (line breaks read as "; "), the
 * JSON document, and the diagnosis of why nothing moves.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "producer/fleet.h"

#define NOW 1796154600000LL

static void
hb (kiwi_heartbeat *h, const char *id, int64_t ts, uint32_t busy, uint32_t total, uint64_t done)
{
    kiwi_heartbeat_init (h);
    h->worker_id = strdup (id);
    h->version = strdup ("0.1.0");
    h->ts = ts;
    h->slots_busy = busy;
    h->slots_total = total;
    h->tasks_done = done;
    h->redis_ok = true;
}

static void
add_egress (kiwi_heartbeat *h, const char *name, bool ok, const char *detail)
{
    h->egress = realloc (h->egress, (h->n_egress + 1) * sizeof *h->egress);
    kiwi_egress_check *e = &h->egress[h->n_egress++];
    memset (e, 0, sizeof *e);
    e->name = strdup (name);
    e->ok = ok;
    e->detail = detail ? strdup (detail) : NULL;
    e->checked_at = NOW - 1000;
}

static void
feed (kiwi_fleet *f, kiwi_heartbeat *h)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_fleet_update (f, h, &err), 0);
    assert_null (h->worker_id); /* moved into the fleet */
}

/* alpha: up, two heartbeats 5 s apart; beta: gone (its last heartbeat 40 s
 * old); gamma: degraded with a failed egress check. */
static void
sample_fleet (kiwi_fleet *f, int64_t gone_after_ms)
{
    kiwi_fleet_init (f, gone_after_ms);
    kiwi_heartbeat h;
    hb (&h, "alpha", NOW - 65000, 1, 4, 10);
    h.cache_hits = 3;
    h.cache_misses = 1;
    feed (f, &h);
    hb (&h, "alpha", NOW - 5000, 2, 4, 16); /* 6 tasks in a minute */
    h.cache_hits = 8;
    h.cache_misses = 2;
    add_egress (&h, "metadata-blocked", true, NULL);
    add_egress (&h, "https-reachable", true, NULL);
    feed (f, &h);
    hb (&h, "beta", NOW - 40000, 3, 8, 100);
    feed (f, &h);
    hb (&h, "gamma", NOW - 2000, 0, 2, 0);
    h.degraded = true;
    h.degraded_reason = strdup ("egress check metadata-blocked failed");
    h.redis_ok = false;
    add_egress (&h, "metadata-blocked", false, "GET http://169.254.169.254/ answered 200");
    feed (f, &h);
}

static void
test_table_with_a_gone_worker (void **state)
{
    kiwi_fleet f;
    sample_fleet (&f, 30000);
    char *t = kiwi_fleet_table (&f, NOW, 0);
    /* the summary counts only the workers that are not gone */
    static const char want[]
        = "workers: 1 up, 1 degraded, 1 gone | slots 2/6 busy | 6.0 tasks/min | cache hits 80%\n"
          "WORKER                   STATE        SLOTS    DONE  FAILED TASKS/MIN CACHE REDIS   SEEN  EGRESS\n"
          "alpha                    up             2/4      16       0       6.0   80%    ok     5s "
          " metadata-blocked ok https-reachable ok\n"
          "beta                     gone           3/8     100       0       0.0     -    ok    40s "
          " (no checks)\n"
          "gamma                    degraded       0/2       0       0       0.0     -  DOWN     2s "
          " metadata-blocked FAIL\n"
          "    degraded: egress check metadata-blocked failed\n"
          "    egress metadata-blocked failed: GET http://169.254.169.254/ answered 200\n";
    assert_string_equal (t, want);
    free (t);
    /* a narrow terminal: rows cut, never wrapped */
    t = kiwi_fleet_table (&f, NOW, 30);
    for (char *line = t, *nl; (nl = strchr (line, '\n')) != NULL; line = nl + 1)
        assert_true (nl - line <= 30);
    free (t);
    /* ten seconds later beta is still gone, alpha not yet (15 s < 30 s) */
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[0], NOW + 10000), "up");
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[0], NOW + 26000), "gone");
    kiwi_fleet_clear (&f);
}

static void
test_gone_after (void **state)
{
    kiwi_fleet f;
    sample_fleet (&f, 0); /* from the heartbeats */
    /* alpha: two heartbeats 60 s apart -> gone after 180 s; beta: one -> 30 s */
    assert_int_equal (kiwi_fleet_gone_after (&f, &f.workers[0]), 180000);
    assert_int_equal (kiwi_fleet_gone_after (&f, &f.workers[1]), KIWI_FLEET_GONE_DEFAULT_MS);
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[1], NOW), "gone");
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[1], NOW - 15000), "up");
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[0], NOW + 170000), "up");
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[0], NOW + 180000), "gone");
    kiwi_fleet_clear (&f);
    sample_fleet (&f, 60000); /* the setting */
    assert_int_equal (kiwi_fleet_gone_after (&f, &f.workers[0]), 60000);
    assert_string_equal (kiwi_fleet_state (&f, &f.workers[1], NOW), "up");
    kiwi_fleet_clear (&f);
}

static void
test_updates (void **state)
{
    kiwi_fleet f;
    sample_fleet (&f, 30000);
    assert_int_equal (f.n, 3);
    /* an older heartbeat of alpha (read out of order) is dropped */
    kiwi_heartbeat h;
    hb (&h, "alpha", NOW - 30000, 4, 4, 12);
    feed (&f, &h);
    assert_int_equal (f.workers[0].hb.slots_busy, 2);
    assert_int_equal (f.workers[0].hb.tasks_done, 16);
    /* workers stay sorted by id */
    hb (&h, "aardvark", NOW, 0, 1, 0);
    feed (&f, &h);
    assert_string_equal (f.workers[0].hb.worker_id, "aardvark");
    assert_string_equal (f.workers[1].hb.worker_id, "alpha");
    assert_true (kiwi_fleet_tasks_per_min (&f.workers[0]) == 0.0); /* one heartbeat */
    double tpm = kiwi_fleet_tasks_per_min (&f.workers[1]);
    assert_true (tpm > 5.99 && tpm < 6.01);
    /* a worker's reason cannot move the terminal's cursor; its line breaks
     * read as "; " */
    hb (&h, "zeta", NOW, 0, 1, 0);
    h.degraded = true;
    h.degraded_reason = strdup ("bad\033[2Jthing\r\nsecond line\n\nthird\tline\r\n");
    feed (&f, &h);
    char *t = kiwi_fleet_table (&f, NOW, 0);
    assert_null (strchr (t, '\033'));
    assert_null (strchr (t, '\r'));
    assert_null (strchr (t, '?'));
    assert_non_null (strstr (t, "    degraded: bad\\x1b[2Jthing; second line; third line\n"));
    free (t);
    kiwi_fleet_clear (&f);
}

static void
test_json (void **state)
{
    kiwi_fleet f;
    sample_fleet (&f, 30000);
    kiwi_error_t err = NULL;
    char *s = kiwi_fleet_json (&f, NOW, &err);
    assert_non_null (s);
    json_t *doc = json_loads (s, 0, NULL);
    assert_non_null (doc);
    json_t *ws = json_object_get (doc, "workers");
    assert_int_equal (json_array_size (ws), 3);
    assert_string_equal (json_string_value (json_object_get (json_array_get (ws, 1), "state")), "gone");
    assert_string_equal (json_string_value (json_object_get (json_array_get (ws, 0), "state")), "up");
    assert_true (json_real_value (json_object_get (json_array_get (ws, 0), "cache_hit_rate")) > 0.79);
    assert_true (json_is_null (json_object_get (json_array_get (ws, 1), "cache_hit_rate")));
    assert_int_equal (json_integer_value (json_object_get (json_array_get (ws, 1), "age_ms")), 40000);
    json_t *hb1 = json_object_get (json_array_get (ws, 2), "heartbeat");
    assert_string_equal (json_string_value (json_object_get (hb1, "worker_id")), "gamma");
    json_t *sum = json_object_get (doc, "summary");
    assert_int_equal (json_integer_value (json_object_get (sum, "gone")), 1);
    assert_int_equal (json_integer_value (json_object_get (sum, "slots_busy")), 2);
    assert_int_equal (json_integer_value (json_object_get (sum, "slots_total")), 6);
    json_decref (doc);
    free (s);
    kiwi_fleet_clear (&f);
}

static char *
diagnose (const kiwi_fleet *f, int64_t now)
{
    char *d = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_fleet_diagnose (f, now, "kiwi.heartbeats", 180000, &d, &err), 0);
    return d;
}

/* Why nothing moves, from the heartbeats at a time: nothing while a worker
 * is up; no heartbeat at all; no worker up (every one seen gone); every
 * worker not gone degraded, each with its reason on one line. */
static void
test_diagnose (void **state)
{
    kiwi_fleet f;
    kiwi_fleet_init (&f, 30000);
    char *d = diagnose (&f, NOW);
    assert_string_equal (d, "no worker heartbeat on kiwi.heartbeats in the last 180s: no kiwi-worker seems to be "
                            "running for these topics");
    free (d);
    kiwi_fleet_clear (&f);

    sample_fleet (&f, 30000); /* alpha up, beta gone, gamma degraded */
    assert_null (diagnose (&f, NOW));
    /* 26 s later alpha is gone too: gamma, degraded, is all there is */
    d = diagnose (&f, NOW + 26000);
    assert_string_equal (d, "every worker is degraded: gamma (egress check metadata-blocked failed)");
    free (d);
    /* a second degraded worker, its reason on several lines */
    kiwi_heartbeat h;
    hb (&h, "delta", NOW + 20000, 0, 2, 0);
    h.degraded = true;
    h.degraded_reason = strdup ("disk full\nredis down\n");
    feed (&f, &h);
    d = diagnose (&f, NOW + 26000);
    assert_string_equal (d, "every worker is degraded: delta (disk full; redis down), gamma (egress check "
                            "metadata-blocked failed)");
    /* the same a second later: the diagnosis holds no age */
    char *d2 = diagnose (&f, NOW + 27000);
    assert_string_equal (d, d2);
    free (d);
    free (d2);
    /* a minute later every worker is gone */
    d = diagnose (&f, NOW + 90000);
    assert_string_equal (d, "no worker is up: the workers seen on kiwi.heartbeats (alpha, beta, delta, gamma) "
                         "stopped sending heartbeats");
    free (d);
    kiwi_fleet_clear (&f);
}

static char *
readers (kiwi_fleet *f, int64_t now, const kiwi_topic_readers *r)
{
    char *d = NULL;
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_fleet_diagnose_readers (f, now, "kiwi.heartbeats", "kiwi.tasks", r, &d, &err), 0);
    return d;
}

static void
test_diagnose_readers (void **state)
{
    (void) state;
    kiwi_fleet f;
    sample_fleet (&f, 30000); /* alpha up, beta gone, gamma degraded */
    kiwi_topic_readers r = KIWI_TOPIC_READERS_INIT;
    char *d = readers (&f, NOW, &r);
    assert_string_equal (d, "no worker reads kiwi.tasks: no consumer group has a member on it, though 1 worker is up "
                            "on kiwi.heartbeats (alpha): they take their tasks from another topic (kiwi-worker's "
                            "KIWI_TOPIC_TASKS against this command's --tasks-topic)");
    free (d);
    /* a group still rebalancing */
    assert_int_equal (kiwi_strv_add (&r.rebalancing, "kiwi-workers"), 0);
    d = readers (&f, NOW, &r);
    assert_string_equal (d, "no consumer group has settled on kiwi.tasks yet: kiwi-workers is rebalancing (worker up "
                            "on kiwi.heartbeats: alpha)");
    free (d);
    /* a member reads it: nothing to say */
    assert_int_equal (kiwi_strv_add (&r.groups, "kiwi-workers"), 0);
    r.members = 1;
    assert_null (readers (&f, NOW, &r));
    kiwi_topic_readers_clear (&r);
    /* no worker up: kiwi_fleet_diagnose speaks, not this */
    assert_null (readers (&f, NOW + 90000, &r));
    kiwi_fleet_clear (&f);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_table_with_a_gone_worker),
        cmocka_unit_test (test_gone_after),
        cmocka_unit_test (test_updates),
        cmocka_unit_test (test_json),
        cmocka_unit_test (test_diagnose),
        cmocka_unit_test (test_diagnose_readers),
    };
    return cmocka_run_group_tests_name ("cli_fleet", tests, NULL, NULL);
}
