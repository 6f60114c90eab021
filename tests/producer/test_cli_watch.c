/*
 * test_cli_watch.c: following a batch (producer/watch.h): batch ids (the
 * Task's batch_id field included) and the times in kiwi's ids, the
 * progress line on a terminal and off it, the outcome table, the rate and
 * ETA arithmetic, the results file kept free of duplicates across a
 * re-attach (a cut-short last line included), and a set of 10,000 ids.
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

#include "schemas/task-input.h"
#include "schemas/task.h"
#include "producer/watch.h"

static void
test_batch_id (void **state)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_batch_id_check ("batch-1", &err), 0);
    assert_int_equal (kiwi_batch_id_check ("nightly:2026.12_01-x", &err), 0);
    assert_int_equal (kiwi_batch_id_check ("", &err), -1);
    assert_string_equal (kiwi_error_msg (err), "batch id: empty");
    kiwi_error_free (&err);
    assert_int_equal (kiwi_batch_id_check ("two words", &err), -1);
    assert_string_equal (kiwi_error_msg (err), "batch id: character 4 is not one of A-Z a-z 0-9 . _ : -");
    kiwi_error_free (&err);
    assert_int_equal (kiwi_batch_id_check ("a/b", &err), -1);
    kiwi_error_free (&err);
    char longest[130];
    memset (longest, 'b', 128);
    longest[128] = '\0';
    assert_int_equal (kiwi_batch_id_check (longest, &err), 0);
    longest[128] = 'b';
    longest[129] = '\0';
    assert_int_equal (kiwi_batch_id_check (longest, &err), -1);
    assert_string_equal (kiwi_error_msg (err), "batch id: longer than 128 bytes");
    kiwi_error_free (&err);

    /* generated ids are valid and carry their time */
    char id[64];
    assert_int_equal (kiwi_batch_id_new (id, sizeof id, &err), 0);
    assert_int_equal (kiwi_batch_id_check (id, &err), 0);
    assert_true (strncmp (id, "batch-", 6) == 0);
    assert_true (kiwi_id_time_ms (id) > 1700000000000LL);
    assert_int_equal (kiwi_id_time_ms ("batch-20261201T195000.123Z-9f3a0c51"), 1796154600123LL);
    assert_int_equal (kiwi_id_time_ms ("kiwi-20261129T221422.123Z-9f3a0c51d2e4b786"), 1795990462123LL);
    assert_int_equal (kiwi_id_time_ms ("w-fixed"), -1);
    assert_int_equal (kiwi_id_time_ms ("kiwi-2026-x"), -1);
    assert_int_equal (kiwi_id_time_ms ("kiwi-20261301T000000.000Z-1"), -1); /* month 13 */

    int64_t t = 0;
    assert_int_equal (kiwi_time_parse ("1796154600123", &t), 0);
    assert_int_equal (t, 1796154600123LL);
    assert_int_equal (kiwi_time_parse ("2026-12-01T19:50:00Z", &t), 0);
    assert_int_equal (t, 1796154600000LL);
    assert_int_equal (kiwi_time_parse ("2026-12-01T19:50:00.123Z", &t), 0);
    assert_int_equal (t, 1796154600123LL);
    assert_int_equal (kiwi_time_parse ("20261201T195000Z", &t), 0);
    assert_int_equal (t, 1796154600000LL);
    assert_int_equal (kiwi_time_parse ("yesterday", &t), -1);
    assert_int_equal (kiwi_time_parse ("2026-12-01T19:50:00", &t), -1); /* no zone: refused */
    char buf[32];
    assert_string_equal (kiwi_time_format (1796154600123LL, buf, sizeof buf), "2026-12-01T19:50:00.123Z");
}

/* The Task's batch_id: validated, encoded, decoded, rendered, accepted as
 * JSON input. */
static void
test_task_batch_id (void **state)
{
    kiwi_error_t err = NULL;
    kiwi_task t;
    kiwi_task_init (&t);
    static const char line[] = "{\"repo\":{\"url\":\"https://e.example/r.git\",\"ref\":\"main\"},"
                               "\"test_command\":\"make test\",\"goal\":\"g\",\"batch_id\":\"nightly-7\"}";
    assert_int_equal (kiwi_task_input_parse (line, strlen (line), &t, &err), 0);
    assert_int_equal (kiwi_task_input_finish (&t, "batch", &err), 0);
    assert_string_equal (t.batch_id, "nightly-7");
    char *buf = NULL, *json = NULL;
    size_t len = 0;
    assert_int_equal (kiwi_task_encode (&t, &buf, &len, &err), 0);
    kiwi_task back;
    assert_int_equal (kiwi_task_decode (buf, len, &back, &err), 0);
    assert_string_equal (back.batch_id, "nightly-7");
    assert_int_equal (kiwi_task_to_json (&back, &json, &err), 0);
    assert_non_null (strstr (json, ",\"batch_id\":\"nightly-7\"}"));
    kiwi_task copy;
    assert_int_equal (kiwi_task_copy (&copy, &back, &err), 0);
    assert_string_equal (copy.batch_id, "nightly-7");
    kiwi_task_clear (&copy);
    kiwi_task_clear (&back);
    free (buf);
    free (json);

    free (t.batch_id);
    t.batch_id = strdup ("bad id");
    assert_int_equal (kiwi_task_validate (&t, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "task.batch_id"));
    kiwi_error_free (&err);
    free (t.batch_id);
    t.batch_id = strdup ("");
    assert_int_equal (kiwi_task_encode (&t, &buf, &len, &err), -1);
    assert_non_null (strstr (kiwi_error_msg (err), "task.batch_id"));
    kiwi_error_free (&err);
    free (t.batch_id);
    t.batch_id = NULL; /* optional */
    assert_int_equal (kiwi_task_validate (&t, &err), 0);
    kiwi_task_clear (&t);
}

static void
test_eta (void **state)
{
    assert_int_equal (kiwi_eta_seconds (0, 0.0), 0);
    assert_int_equal (kiwi_eta_seconds (5, 0.0), -1);
    assert_int_equal (kiwi_eta_seconds (10, 4.0), 150);
    assert_int_equal (kiwi_eta_seconds (1, 7.0), 9); /* 8.57 s, rounded up */
    assert_int_equal (kiwi_eta_seconds (9000, 60.0), 9000);
    char b[32];
    assert_string_equal (kiwi_duration_format (-1, b, sizeof b), "--");
    assert_string_equal (kiwi_duration_format (42, b, sizeof b), "42s");
    assert_string_equal (kiwi_duration_format (725, b, sizeof b), "12m05s");
    assert_string_equal (kiwi_duration_format (3 * 3600 + 28 * 60 + 59, b, sizeof b), "3h28m");
    assert_string_equal (kiwi_duration_format (2 * 86400 + 4 * 3600 + 1, b, sizeof b), "2d04h");

    /* the rate: results in the last ten minutes, no earlier than the submission */
    kiwi_rate r;
    memset (&r, 0, sizeof r);
    int64_t now = 1796154600000LL;
    for (int i = 0; i < 30; i++)
        kiwi_rate_add (&r, now - 60000 - i * 1000); /* 30 in the minute before the last one */
    kiwi_rate_add (&r, now - 3600000); /* an hour ago: outside */
    double per_min = kiwi_rate_per_min (&r, now, -1);
    assert_true (per_min > 2.99 && per_min < 3.01); /* 30 over ten minutes */
    per_min = kiwi_rate_per_min (&r, now, now - 120000); /* submitted two minutes ago */
    assert_true (per_min > 14.99 && per_min < 15.01);
    assert_true (kiwi_rate_per_min (&r, now + 3600000, -1) == 0.0);
}

/* A watch of 10 tasks, 3 done (fixed 2, not_fixed 1), 2 running,
 * submitted ten minutes before `now`, results one to three minutes old. */
static void
sample_watch (kiwi_watch *w, int64_t now)
{
    kiwi_error_t err = NULL;
    assert_int_equal (kiwi_watch_init (w, "batch-x", now - 600000, &err), 0);
    for (int i = 0; i < 10; i++) {
        char id[16];
        snprintf (id, sizeof id, "t%d", i);
        assert_int_equal (kiwi_watch_add (w, id, strlen (id), &err), 1);
    }
    assert_int_equal (kiwi_watch_add (w, "t3", 2, &err), 0);
    static const kiwi_result_status st[] = { KIWI_RESULT_FIXED, KIWI_RESULT_FIXED, KIWI_RESULT_NOT_FIXED };
    for (int i = 0; i < 3; i++) {
        kiwi_result r;
        kiwi_result_init (&r);
        char id[16];
        snprintf (id, sizeof id, "t%d", i);
        r.task_id = id;
        r.status = st[i];
        r.finished_at = now - 60000 * (i + 1);
        assert_int_equal (kiwi_watch_result (w, &r, "{}", &err), 1);
        assert_int_equal (kiwi_watch_result (w, &r, "{}", &err), 0); /* the first result wins */
    }
    assert_true (kiwi_watch_progress (w, "t5", 2));
    assert_true (kiwi_watch_progress (w, "t6", 2));
    assert_false (kiwi_watch_progress (w, "t6", 2));    /* already running */
    assert_false (kiwi_watch_progress (w, "t0", 2));    /* done */
    assert_false (kiwi_watch_progress (w, "other", 5)); /* not of the batch */
}

static void
test_progress_line (void **state)
{
    int64_t now = 1796154600000LL;
    kiwi_watch w;
    sample_watch (&w, now);
    /* 3 results over the 10 minutes since submission: 0.3/min; 7 left: 1400 s */
    char *line = kiwi_watch_line (&w, now, false, 0);
    assert_string_equal (line, "2026-12-01T19:50:00.000Z batch-x: 3/10+ done (30.0%) | running 2 | 0.3/min | "
                               "ETA 23m20s | fixed 2, not_fixed 1\n");
    free (line);
    w.total = 10;
    w.total_final = true;
    line = kiwi_watch_line (&w, now, false, 0);
    assert_string_equal (line, "2026-12-01T19:50:00.000Z batch-x: 3/10 done (30.0%) | running 2 | 0.3/min | "
                               "ETA 23m20s | fixed 2, not_fixed 1\n");
    free (line);
    /* a terminal: back to the start, clear the line, no newline, no time */
    line = kiwi_watch_line (&w, now, true, 0);
    assert_string_equal (line, "\r\033[Kbatch-x: 3/10 done (30.0%) | running 2 | 0.3/min | ETA 23m20s | "
                               "fixed 2, not_fixed 1");
    free (line);
    /* ... cut to the terminal's width minus one, so it never wraps */
    line = kiwi_watch_line (&w, now, true, 21);
    assert_string_equal (line, "\r\033[Kbatch-x: 3/10 done (");
    free (line);
    /* nothing finished lately: no rate, no estimate */
    line = kiwi_watch_line (&w, now + 3600000, true, 0);
    assert_non_null (strstr (line, "| 0.0/min | ETA --"));
    free (line);
    kiwi_watch_clear (&w);
}

static void
test_outcome_table (void **state)
{
    int64_t now = 1796154600000LL;
    kiwi_watch w;
    sample_watch (&w, now);
    w.total = 12; /* two more than seen: waiting */
    w.total_final = true;
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    kiwi_watch_table (&w, f);
    fclose (f);
    assert_string_equal (out, "outcome               tasks   share\n"
                              "fixed                     2   66.7%\n"
                              "not_fixed                 1   33.3%\n"
                              "install_failed            0    0.0%\n"
                              "needs_network             0    0.0%\n"
                              "budget_exhausted          0    0.0%\n"
                              "max_rounds                0    0.0%\n"
                              "timed_out                 0    0.0%\n"
                              "error                     0    0.0%\n"
                              "gave_up                   0    0.0%\n"
                              "done                      3\n"
                              "running                   2\n"
                              "waiting                   7\n"
                              "total                    12\n");
    free (out);
    assert_false (kiwi_watch_complete (&w));
    kiwi_watch_clear (&w);
}

static char *
slurp (const char *path)
{
    FILE *f = fopen (path, "r");
    assert_non_null (f);
    char *buf = calloc (1, 1 << 16);
    size_t n = fread (buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose (f);
    return buf;
}

static void
record (kiwi_watch *w, const char *id, kiwi_result_status s, int want)
{
    kiwi_error_t err = NULL;
    kiwi_result r;
    kiwi_result_init (&r);
    r.task_id = (char *) id;
    r.status = s;
    r.finished_at = 1796154600000LL;
    char json[256];
    snprintf (json, sizeof json, "{\"task_id\":\"%s\",\"status\":\"%s\",\"finished_at\":1796154600000}", id,
              kiwi_result_status_name (s));
    assert_int_equal (kiwi_watch_result (w, &r, json, &err), want);
}

static void
test_results_file_across_reattach (void **state)
{
    char path[] = "/tmp/kiwi-test-watch-XXXXXX";
    int fd = mkstemp (path);
    assert_true (fd >= 0);
    close (fd);
    unlink (path); /* the first watch creates it */
    kiwi_error_t err = NULL;

    /* the first watch: a, b done, then it is killed mid-write of c */
    kiwi_watch w;
    assert_int_equal (kiwi_watch_init (&w, "b1", -1, &err), 0);
    assert_int_equal (kiwi_watch_open_results (&w, path, &err), 0);
    for (const char *const *id = (const char *const[]) { "a", "b", "c", NULL }; *id; id++)
        assert_int_equal (kiwi_watch_add (&w, *id, 1, &err), 1);
    record (&w, "a", KIWI_RESULT_FIXED, 1);
    record (&w, "b", KIWI_RESULT_TIMED_OUT, 1);
    kiwi_watch_clear (&w);
    FILE *f = fopen (path, "a");
    fputs ("{\"task_id\":\"c\",\"sta", f);
    fclose (f);

    /* re-attached: a and b are done already, c's cut line is gone */
    assert_int_equal (kiwi_watch_init (&w, "b1", -1, &err), 0);
    assert_int_equal (kiwi_watch_open_results (&w, path, &err), 2);
    assert_int_equal (w.done, 2);
    assert_int_equal (w.by_status[KIWI_RESULT_FIXED], 1);
    assert_int_equal (w.by_status[KIWI_RESULT_TIMED_OUT], 1);
    for (const char *const *id = (const char *const[]) { "a", "b", "c", NULL }; *id; id++)
        kiwi_watch_add (&w, *id, 1, &err);
    assert_int_equal (w.n_tasks, 3);
    w.total = 3;
    w.total_final = true;
    assert_false (kiwi_watch_complete (&w));
    /* the topic is read again from the batch's start: a and b come again */
    record (&w, "a", KIWI_RESULT_FIXED, 0);
    record (&w, "b", KIWI_RESULT_TIMED_OUT, 0);
    record (&w, "c", KIWI_RESULT_ERROR, 1);
    assert_true (kiwi_watch_complete (&w));
    kiwi_watch_clear (&w);

    char *text = slurp (path);
    assert_string_equal (text, "{\"task_id\":\"a\",\"status\":\"fixed\",\"finished_at\":1796154600000}\n"
                               "{\"task_id\":\"b\",\"status\":\"timed_out\",\"finished_at\":1796154600000}\n"
                               "{\"task_id\":\"c\",\"status\":\"error\",\"finished_at\":1796154600000}\n");
    free (text);

    /* a third watch finds all three and writes nothing */
    assert_int_equal (kiwi_watch_init (&w, "b1", -1, &err), 0);
    assert_int_equal (kiwi_watch_open_results (&w, path, &err), 3);
    record (&w, "c", KIWI_RESULT_ERROR, 0);
    kiwi_watch_clear (&w);
    text = slurp (path);
    assert_int_equal (strlen (text), 61 + 65 + 61); /* unchanged */
    free (text);
    unlink (path);
}

static void
test_ten_thousand_ids (void **state)
{
    kiwi_error_t err = NULL;
    kiwi_watch w;
    assert_int_equal (kiwi_watch_init (&w, "big", -1, &err), 0);
    char id[64];
    for (int i = 0; i < 10000; i++) {
        int n = snprintf (id, sizeof id, "kiwi-20261201T195000.000Z-%016x", (unsigned) i * 2654435761u);
        assert_int_equal (kiwi_watch_add (&w, id, (size_t) n, &err), 1);
    }
    assert_int_equal (w.n_tasks, 10000);
    for (int i = 0; i < 10000; i++) {
        int n = snprintf (id, sizeof id, "kiwi-20261201T195000.000Z-%016x", (unsigned) i * 2654435761u);
        assert_int_equal (kiwi_watch_state_of (&w, id, (size_t) n), KIWI_WATCH_SUBMITTED);
        if (i % 2 == 0)
            assert_true (kiwi_watch_progress (&w, id, (size_t) n));
    }
    assert_int_equal (w.running, 5000);
    assert_int_equal (kiwi_watch_state_of (&w, "kiwi-none", 9), -1);
    kiwi_watch_clear (&w);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_batch_id),
        cmocka_unit_test (test_task_batch_id),
        cmocka_unit_test (test_eta),
        cmocka_unit_test (test_progress_line),
        cmocka_unit_test (test_outcome_table),
        cmocka_unit_test (test_results_file_across_reattach),
        cmocka_unit_test (test_ten_thousand_ids),
    };
    return cmocka_run_group_tests_name ("cli_watch", tests, NULL, NULL);
}
