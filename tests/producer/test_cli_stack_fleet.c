/*
 * test_cli_stack_fleet.c: `kiwi fleet` in a real terminal (tmux) against
 * the real broker. The test produces the heartbeats of two workers itself
 * (schemas/ encoder); the pane, read with tmux capture-pane, shows both
 * with their slots; when one stops sending it is shown as gone after the
 * gone-after time while the other stays up; q ends the command with exit
 * status 0. Also `kiwi fleet --once --json` on the same topic.
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

#include "schemas/heartbeat.h"
#include "need.h"
#include "test_cli_util.h"

static char sock[64];

/* Runs `tmux -L sock ARGS`; returns its stdout (malloc'd). */
static char *
tmux (const char *args)
{
    char cmd[4096];
    snprintf (cmd, sizeof cmd, "tmux -L %s %s 2>/dev/null", sock, args);
    FILE *p = popen (cmd, "r");
    assert_non_null (p);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc (cap);
    size_t r;
    while ((r = fread (buf + n, 1, cap - 1 - n, p)) > 0)
        n += r;
    buf[n] = '\0';
    pclose (p);
    return buf;
}

static void
send_heartbeat (const char *topic, const char *id, uint32_t busy, uint32_t total, uint64_t done)
{
    kiwi_heartbeat h;
    kiwi_heartbeat_init (&h);
    h.worker_id = (char *) id;
    h.version = (char *) "0.1.0";
    h.ts = cli_wall_ms ();
    h.slots_busy = busy;
    h.slots_total = total;
    h.tasks_done = done;
    h.cache_hits = 4;
    h.cache_misses = 1;
    h.redis_ok = true;
    kiwi_egress_check checks[2] = {
        { (char *) "metadata-blocked", true, NULL, h.ts },
        { (char *) "https-reachable", true, NULL, h.ts },
    };
    h.egress = checks;
    h.n_egress = 2;
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    if (kiwi_heartbeat_encode (&h, &buf, &len, &err) < 0)
        fail_msg ("%s", kiwi_error_msg (err));
    cli_producer *p = cli_producer_new ();
    cli_producer_send (p, topic, id, buf, len, 0);
    cli_producer_done (p);
    free (buf);
}

/* The pane's line that starts with `worker`, or NULL. */
static char *
row (const char *pane, const char *worker, char *out, size_t cap)
{
    size_t wl = strlen (worker);
    for (const char *l = pane; l && *l; l = strchr (l, '\n') ? strchr (l, '\n') + 1 : NULL)
        if (strncmp (l, worker, wl) == 0 && l[wl] == ' ') {
            const char *e = strchr (l, '\n');
            size_t n = e ? (size_t) (e - l) : strlen (l);
            if (n >= cap)
                n = cap - 1;
            memcpy (out, l, n);
            out[n] = '\0';
            return out;
        }
    return NULL;
}

static bool
row_has (const char *pane, const char *worker, const char *a, const char *b)
{
    char r[512];
    if (row (pane, worker, r, sizeof r) == NULL)
        return false;
    return strstr (r, a) != NULL && strstr (r, b) != NULL;
}

static void
test_fleet_in_a_terminal (void **state)
{
    KIWI_NEED (cli_broker_up (), "kafka at %s", cli_brokers ());
    KIWI_NEED (system ("tmux -V >/dev/null 2>&1") == 0, "tmux (ops/setup.sh installs it)");
    char *topic = kiwi_test_unique ("kiwi.test.cli.fleet");
    snprintf (sock, sizeof sock, "kiwi-test-fleet-%d", (int) getpid ());
    char status[128];
    snprintf (status, sizeof status, "/tmp/kiwi-test-fleet-%d.status", (int) getpid ());
    unlink (status);
    /* the topic exists before the fleet starts, with both workers on it */
    send_heartbeat (topic, "worker-a", 2, 4, 10);
    send_heartbeat (topic, "worker-b", 1, 2, 3);

    char cmd[2048];
    snprintf (cmd, sizeof cmd,
              "new-session -d -s fleet -x 160 -y 30 \"%s fleet --brokers %s --heartbeats-topic %s --gone-after 4 "
              "--refresh 1; echo exit=\\$? > %s\"",
              KIWI_CLI_BIN, cli_brokers (), topic, status);
    free (tmux (cmd));

    /* both workers, with their slots */
    char *pane = NULL;
    int64_t until = cli_now_ms () + 30000;
    bool both = false;
    while (!both && cli_now_ms () < until) {
        send_heartbeat (topic, "worker-a", 2, 4, 11);
        send_heartbeat (topic, "worker-b", 1, 2, 3);
        usleep (500000);
        free (pane);
        pane = tmux ("capture-pane -p -t fleet");
        both = row_has (pane, "worker-a", " up ", " 2/4 ") && row_has (pane, "worker-b", " up ", " 1/2 ");
    }
    if (!both)
        fail_msg ("the pane never showed both workers up:\n%s", pane);
    assert_non_null (strstr (pane, "(q to quit)"));
    assert_non_null (strstr (pane, "workers: 2 up, 0 degraded, 0 gone | slots 3/6 busy"));
    print_message ("kiwi fleet, both up:\n%s\n", pane);

    /* worker-b stops: gone after 4 s, worker-a stays up */
    int64_t stopped = cli_now_ms ();
    bool gone = false;
    until = cli_now_ms () + 20000;
    while (!gone && cli_now_ms () < until) {
        send_heartbeat (topic, "worker-a", 2, 4, 12);
        usleep (500000);
        free (pane);
        pane = tmux ("capture-pane -p -t fleet");
        gone = row_has (pane, "worker-b", " gone ", " 1/2 ") && row_has (pane, "worker-a", " up ", " 2/4 ");
        if (!gone && cli_now_ms () - stopped < 3000)
            assert_true (row_has (pane, "worker-b", " up ", " 1/2 ")); /* not before its time */
    }
    if (!gone)
        fail_msg ("worker-b was never shown as gone:\n%s", pane);
    assert_non_null (strstr (pane, "workers: 1 up, 0 degraded, 1 gone | slots 2/4 busy"));
    print_message ("kiwi fleet, worker-b gone:\n%s\n", pane);
    free (pane);

    /* q ends it, with status 0 */
    free (tmux ("send-keys -t fleet q"));
    until = cli_now_ms () + 10000;
    char got[64] = "";
    while (cli_now_ms () < until) {
        FILE *f = fopen (status, "r");
        if (f != NULL) {
            if (fgets (got, sizeof got, f) == NULL)
                got[0] = '\0';
            fclose (f);
            if (got[0])
                break;
        }
        usleep (100000);
    }
    free (tmux ("kill-server"));
    unlink (status);
    assert_string_equal (got, "exit=0\n");

    /* --once --json: one document with both workers, worker-b gone */
    const char *argv[] = { "fleet", "--brokers", cli_brokers (), "--heartbeats-topic", topic, "--gone-after", "4",
                           "--once", "--json", NULL };
    char *out = NULL, *err = NULL;
    assert_int_equal (cli_run (argv, NULL, 0, &out, &err, 60), 0);
    assert_non_null (strstr (out, "\"worker_id\":\"worker-a\",\"state\":\"up\""));
    assert_non_null (strstr (out, "\"worker_id\":\"worker-b\",\"state\":\"gone\""));
    assert_int_equal (strchr (out, '\n') - out + 1, (long) strlen (out)); /* one line */
    free (out), free (err), free (topic);
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_fleet_in_a_terminal),
    };
    return cmocka_run_group_tests_name ("cli_stack_fleet", tests, NULL, NULL);
}
