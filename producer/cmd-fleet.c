/*
 * cmd-fleet.c: `kiwi fleet`: the live fleet from the heartbeats topic, like
 * top: on a terminal the table (fleet.h) is redrawn in place every refresh
 * seconds until q or SIGINT; --json prints one JSON document per refresh;
 * --once prints the fleet as it is now and exits. The topic is read from
 * a recent time only (now minus three times the gone-after time, at least
 * 60 s; 180 s when it is 0), with rd_kafka_offsets_for_times, never from
 * its beginning.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "producer/cli.h"
#include "common/clock.h"
#include "producer/fleet.h"
#include "schemas/heartbeat.h"
#include "producer/kafka.h"
#include "common/log.h"

enum { OPT_JSON = KIWI_OPT_OWN, OPT_ONCE };

static const kiwi_opt fleet_opts[] = {
    { OPT_JSON, "json", 0, NULL, "one JSON document per refresh (with --once: one)" },
    { OPT_ONCE, "once", 0, NULL, "print the fleet as the topic holds it now, then exit" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc fleet_exits[] = {
    { 0, "quit with q or SIGINT/SIGTERM, or printed once (--once)" },
    { 1, "the broker could not be reached" },
    { 2, "usage or configuration error" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_fleet_def = {
    .name = "fleet",
    .synopsis = "fleet [OPTIONS]",
    .summary = "the live fleet from heartbeats, like top",
    .description
    = "Reads the heartbeats topic from a recent time (now minus three times gone_after, at least\n"
      "60 s; 180 s when it is 0) and shows one row per worker: up, degraded or gone; slots busy of\n"
      "total; tasks done and failed; tasks per minute; install-cache hit rate; whether Redis\n"
      "answers; the age of its last heartbeat; each egress check. A degraded worker's reason and a\n"
      "failed check's detail follow its row. A worker is gone when its last heartbeat is older than\n"
      "gone_after seconds (0: three times the interval between its heartbeats, else 30 s). On a\n"
      "terminal the table is redrawn every refresh seconds until q (or SIGINT); otherwise it is\n"
      "printed every refresh seconds.",
    .opts = fleet_opts,
    .exits = fleet_exits,
};

/* The terminal's columns and rows (0: unknown). */
static void
term_size (unsigned *cols, unsigned *rows)
{
    struct winsize ws;
    *cols = *rows = 0;
    if (ioctl (STDOUT_FILENO, TIOCGWINSZ, &ws) == 0) {
        *cols = ws.ws_col;
        *rows = ws.ws_row;
    }
}

/* Cuts text after `keep` lines, saying how many were left out. */
static void
put_lines (const char *text, unsigned keep)
{
    unsigned n = 0, total = 0;
    for (const char *p = text; *p; p++)
        total += *p == '\n';
    const char *p = text;
    for (; *p && (keep == 0 || total <= keep || n + 1 < keep); p++) {
        fputc (*p, stdout);
        n += *p == '\n';
    }
    if (*p)
        printf ("(%u more lines: a taller terminal, or kiwi fleet --json)\n", total - n);
}

static void
draw (const kiwi_fleet *f, bool tty, bool json, const char *topic)
{
    int64_t now = kiwi_wall_ms ();
    if (json) {
        kiwi_error_t err = NULL;
        cleanup_free char *j = kiwi_fleet_json (f, now, &err);
        if (j == NULL) {
            kiwi_errorf ("fleet: %s", kiwi_error_msg (err));
            kiwi_error_free (&err);
            return;
        }
        kiwi_cli_println (j);
        return;
    }
    unsigned cols = 0, rows = 0;
    if (tty)
        term_size (&cols, &rows);
    cleanup_free char *table = kiwi_fleet_table (f, now, cols);
    if (table == NULL)
        return;
    char when[32];
    time_t t = (time_t) (now / 1000);
    struct tm tm;
    gmtime_r (&t, &tm);
    strftime (when, sizeof when, "%Y-%m-%d %H:%M:%SZ", &tm);
    if (tty) {
        /* The screen holds the title and rows - 2 lines of the table: the
         * last line stays free so that the screen never scrolls. */
        char title[512];
        snprintf (title, sizeof title, "kiwi fleet  %s  topic %s  (q to quit)", when, topic);
        if (cols > 0 && strlen (title) > cols)
            title[cols] = '\0';
        printf ("\033[H\033[2J%s\n", title);
        put_lines (table, rows > 3 ? rows - 2 : 0);
    } else
        printf ("kiwi fleet  %s  topic %s\n%s\n", when, topic, table);
    fflush (stdout);
}

int
kiwi_cmd_fleet (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    kiwi_error_t err = NULL;
    rd_kafka_t *rk = NULL;
    kiwi_fleet f;
    kiwi_fleet_init (&f, 0);
    bool *caught = NULL;
    int sigfd = -1;
    struct termios saved;
    bool raw = false, alt = false;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_fleet_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    bool json = false, once = false;
    for (size_t i = 0; i < args.n_opts; i++) {
        if (args.opts[i].id == OPT_JSON)
            json = true;
        else if (args.opts[i].id == OPT_ONCE)
            once = true;
    }
    if (args.n_pos > 0) {
        kiwi_errorf ("fleet: unexpected argument `%s`", args.pos[0]);
        code = KIWI_EXIT_USAGE;
        goto out;
    }
    kiwi_fleet_init (&f, (int64_t) s.gone_after * 1000);
    /* Far enough back that a worker gone lately is shown as gone. */
    int64_t window = s.gone_after > 0 ? 3 * (int64_t) s.gone_after * 1000 : 180000;
    if (window < 60000)
        window = 60000;
    if ((sigfd = kiwi_cli_signals_install (&err)) < 0 || (rk = kiwi_cli_consumer_new (&s, &err)) == NULL) {
        code = kiwi_cli_fail (&err, "fleet");
        goto out;
    }
    bool tty = isatty (STDOUT_FILENO) && !json && !once;
    if (tty && isatty (STDIN_FILENO) && tcgetattr (STDIN_FILENO, &saved) == 0) {
        struct termios t = saved;
        t.c_lflag &= (tcflag_t) ~(ICANON | ECHO);
        t.c_cc[VMIN] = 0;
        t.c_cc[VTIME] = 0;
        raw = tcsetattr (STDIN_FILENO, TCSANOW, &t) == 0;
    }
    if (tty) {
        fputs ("\033[?1049h\033[?25l", stdout); /* the alternate screen, no cursor: like top */
        alt = true;
    }

    int n_parts = 0, n_caught = 0;
    bool ready = false; /* read up to the end the topic had: the first draw */
    int64_t start = kiwi_mono_ms (), next_assign = 0, next_draw = 0;
    int64_t every = (int64_t) s.refresh * 1000;
    code = KIWI_EXIT_OK;
    while (!kiwi_cli_stop) {
        int64_t now = kiwi_mono_ms ();
        if (n_parts == 0 && now >= next_assign) {
            int64_t *from = NULL;
            n_parts = kiwi_cli_assign_topic_since (rk, s.topic_heartbeats, kiwi_wall_ms () - window, 5000, &from, &err);
            if (n_parts < 0) {
                if (once) {
                    code = kiwi_cli_fail (&err, "fleet");
                    break;
                }
                kiwi_warn ("fleet: %s (retrying)", kiwi_error_msg (err));
                kiwi_error_free (&err);
                n_parts = 0;
            } else if (n_parts > 0) {
                caught = calloc ((size_t) n_parts, sizeof *caught);
                if (caught == NULL) {
                    free (from);
                    kiwi_errorf ("fleet: out of memory");
                    code = KIWI_EXIT_FAILURE;
                    break;
                }
                for (int p = 0; p < n_parts; p++) {
                    int64_t lo = 0, hi = 0;
                    if (rd_kafka_query_watermark_offsets (rk, s.topic_heartbeats, p, &lo, &hi, 5000)
                            == RD_KAFKA_RESP_ERR_NO_ERROR
                        && from[p] >= hi) {
                        caught[p] = true;
                        n_caught++;
                    }
                }
            } else if (once) {
                ready = true; /* no topic: an empty fleet */
            }
            free (from);
            next_assign = now + 1000;
        }
        if (!ready && n_parts > 0 && n_caught >= n_parts)
            ready = true;
        if (!ready && now - start > 5000)
            ready = true; /* draw what there is */
        if (ready && once) {
            draw (&f, false, json, s.topic_heartbeats);
            break;
        }
        if (ready && now >= next_draw) {
            draw (&f, tty, json, s.topic_heartbeats);
            next_draw = now + every;
        }
        if (raw) {
            char c;
            ssize_t r;
            bool quit = false;
            while ((r = read (STDIN_FILENO, &c, 1)) == 1)
                if (c == 'q' || c == 'Q')
                    quit = true;
                else if (c == ' ')
                    next_draw = 0;
            if (quit)
                break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll (rk, 100);
        if (m == NULL)
            continue;
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (caught != NULL && m->partition < n_parts && !caught[m->partition]) {
                caught[m->partition] = true;
                n_caught++;
            }
        } else if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR)
            kiwi_warn ("fleet: %s", rd_kafka_message_errstr (m));
        else {
            kiwi_heartbeat hb;
            if (kiwi_heartbeat_decode (m->payload, m->len, &hb, &err) < 0) {
                kiwi_debug ("fleet: %s [%d] at %lld: %s", s.topic_heartbeats, (int) m->partition,
                            (long long) m->offset, kiwi_error_msg (err));
                kiwi_error_free (&err);
            } else if (kiwi_fleet_update (&f, &hb, &err) < 0) {
                kiwi_heartbeat_clear (&hb);
                rd_kafka_message_destroy (m);
                code = kiwi_cli_fail (&err, "fleet");
                break;
            }
        }
        rd_kafka_message_destroy (m);
    }
out:
    if (alt) {
        fputs ("\033[?25h\033[?1049l", stdout);
        fflush (stdout);
    }
    if (raw)
        tcsetattr (STDIN_FILENO, TCSANOW, &saved);
    kiwi_cli_consumer_free (rk);
    if (sigfd >= 0)
        close (sigfd);
    free (caught);
    kiwi_fleet_clear (&f);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
