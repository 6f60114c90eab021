/*
 * cmd-ci-event.c: `kiwi ci-event`: a GitHub CI failure event (workflow_run
 * or check_run) from a file, stdin or a webhook becomes a task on the
 * tasks topic. The mapping is ci.c; this file is the command and the
 * webhook listener around it.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "producer/ci.h"
#include "common/cleanup.h"
#include "producer/cli.h"
#include "common/clock.h"
#include "producer/http.h"
#include "producer/kafka.h"
#include "common/log.h"
#include "schemas/task-input.h"
#include "schemas/task.h"
#include "schemas/wire.h"

enum { OPT_EVENT = KIWI_OPT_OWN, OPT_LISTEN, OPT_SECRET_FILE, OPT_INSECURE, OPT_JSON, OPT_DRY_RUN };

static const kiwi_opt ci_opts[] = {
    { OPT_EVENT, "event", 0, "NAME", "the event name (X-GitHub-Event): workflow_run, check_run (default: from the payload)" },
    { OPT_LISTEN, "listen", 0, "ADDR:PORT", "receive GitHub webhooks over HTTP instead (port 0: any free port)" },
    { OPT_SECRET_FILE, "secret-file", 0, "FILE", "webhook secret from a file (default: KIWI_CI_WEBHOOK_SECRET)" },
    { OPT_INSECURE, "insecure-no-secret", 0, NULL,
      "with --listen and no secret: accept unsigned webhooks (anyone who can reach the port submits tasks)" },
    { OPT_JSON, "json", 0, NULL,
      "print {\"id\", \"topic\", \"partition\", \"offset\", \"task_sha256\"} (or {\"status\": \"ignored\", ...})" },
    { OPT_DRY_RUN, "dry-run", 0, NULL, "print the task as JSON; produce nothing (not with --listen)" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc ci_exits[] = {
    { 0, "the task was delivered, or the event is not a completed failure and was ignored (said on stderr), "
         "or the listener stopped on SIGTERM/SIGINT" },
    { 1, "not delivered, or the listener could not start" },
    { 2, "usage or configuration error (no test command, bad --listen address, unreadable secret file, --listen "
         "without a secret or --insecure-no-secret)" },
    { 3, "malformed event: not JSON, or a failure event without the fields a task needs" },
    { -1, NULL },
};

#define CI_TASK_FIELDS                                                                                        \
    (KIWI_TASK_FIELD_BIT (KIWI_TF_ID) | KIWI_TASK_FIELD_BIT (KIWI_TF_SUBDIR) | KIWI_TASK_FIELD_BIT (KIWI_TF_TEST) \
     | KIWI_TASK_FIELD_BIT (KIWI_TF_GOAL) | KIWI_TASK_FIELD_BIT (KIWI_TF_MAX_ROUNDS)                           \
     | KIWI_TASK_FIELD_BIT (KIWI_TF_BUDGET_TOKENS) | KIWI_TASK_FIELD_BIT (KIWI_TF_BUDGET_USD)                  \
     | KIWI_TASK_FIELD_BIT (KIWI_TF_TIMEOUT) | KIWI_TASK_FIELD_BIT (KIWI_TF_DISK_MB)                           \
     | KIWI_TASK_FIELD_BIT (KIWI_TF_PROVIDER) | KIWI_TASK_FIELD_BIT (KIWI_TF_MODEL)                            \
     | KIWI_TASK_FIELD_BIT (KIWI_TF_BASE_URL) | KIWI_TASK_FIELD_BIT (KIWI_TF_CRED))

const kiwi_cmd kiwi_cmd_ci_event_def = {
    .name = "ci-event",
    .synopsis = "ci-event [OPTIONS] [FILE|-]\n"
                "ci-event --listen ADDR:PORT [OPTIONS]",
    .summary = "turn a GitHub CI failure event (file, stdin or webhook) into a task",
    .description
    = "Reads one GitHub webhook payload (FILE, or stdin) and, when it is a workflow_run or check_run\n"
      "that completed with conclusion \"failure\", produces a task: repository.clone_url at the head\n"
      "commit, the CI details as ci_context, the test command from --test (else KIWI_CI_TEST_COMMAND),\n"
      "the goal from --goal (else KIWI_CI_GOAL, default \"" KIWI_CI_GOAL_DEFAULT "\").\n"
      "The task id comes from the event (gh-run-<run id>-<attempt>-<tag>, gh-check-<check run id>-<tag>),\n"
      "so a redelivered webhook is the same task; the tag is keyed with the webhook secret (given one)\n"
      "and binds the id to the repository and commit, so that no producer can take the id first.\n"
      "--json prints the task's task_sha256 too, for kiwi wait --task-sha256. Any other event is\n"
      "ignored, said so on stderr, exit 0.\n"
      "\n"
      "With --listen it serves HTTP/1.1: POST (any path) with the payload as the body and the\n"
      "X-GitHub-Event header. The X-Hub-Signature-256 header must match the secret\n"
      "(KIWI_CI_WEBHOOK_SECRET or --secret-file; else 401); without a secret the listener does not\n"
      "start unless --insecure-no-secret is given (then a warning is logged). A delivery already\n"
      "turned into a task (the same X-GitHub-Delivery, or the same task id, among the last\n"
      "4096) is not produced again. Answers:\n"
      "202 {\"status\":\"accepted\",\"id\",...,\"task_sha256\"} once the broker acknowledged the task, 200\n"
      "{\"status\":\"duplicate\",\"reason\":\"duplicate delivery\",\"id\"} for a redelivery, 200\n"
      "{\"status\":\"ignored\",\"reason\"} for other events, 400 malformed, 401 bad signature, 413 body\n"
      "over KIWI_CI_MAX_BODY, 503 not delivered. GET /healthz answers 200. The first line on stdout\n"
      "is \"listening on http://ADDR:PORT/\". SIGTERM or SIGINT stops it: no new connections, tasks\n"
      "in flight are answered, then it exits 0.",
    .opts = ci_opts,
    .task_fields = CI_TASK_FIELDS,
    .exits = ci_exits,
};

/* ---------------------------------------------------------------- shared */

typedef struct ci_cmd {
    kiwi_cli_settings *s;
    kiwi_task base;       /* task fields given as flags */
    kiwi_ci_options opts;
    char *secret;         /* NULL: signatures are not checked */
    size_t secret_len;
    rd_kafka_t *rk;
    kiwi_http_server *srv;
    size_t pending;       /* tasks produced, delivery report outstanding */
    bool insecure;        /* --insecure-no-secret */
    kiwi_ci_seen seen;    /* deliveries already turned into tasks */
} ci_cmd;

static char *
json_line (json_t *o)
{
    char *s = o ? json_dumps (o, JSON_COMPACT) : NULL;
    json_decref (o);
    return s;
}

/* ---------------------------------------------------------------- one event */

static int
one_event (ci_cmd *cc, const char *path, const char *event, bool json, bool dry_run)
{
    kiwi_error_t err = NULL;
    cleanup_free char *body = NULL;
    size_t len = 0;
    if (kiwi_read_file (path, cc->s->ci_max_body, &body, &len, &err) < 0)
        return kiwi_cli_fail (&err, "ci-event");
    kiwi_task t;
    cleanup_free char *why = NULL;
    kiwi_ci_outcome o = kiwi_ci_event_to_task (event, body, len, &cc->opts, &t, &why, &err);
    const char *src = strcmp (path, "-") == 0 ? "stdin" : path;
    if (o == KIWI_CI_ERROR) {
        kiwi_error_wrap (&err, "%s", src);
        return kiwi_cli_fail (&err, "ci-event");
    }
    if (o == KIWI_CI_IGNORED) {
        fprintf (stderr, "kiwi ci-event: ignored: %s\n", why);
        if (json) {
            cleanup_free char *line = json_line (json_pack ("{s:s, s:s}", "status", "ignored", "reason", why));
            if (line != NULL)
                kiwi_cli_println (line);
        }
        return KIWI_EXIT_OK;
    }
    if (cc->secret == NULL && cc->base.id == NULL)
        kiwi_warn ("ci-event: no webhook secret (KIWI_CI_WEBHOOK_SECRET or --secret-file): task id %s is derived from "
                   "the event alone, so a producer who knows the run, the repository and the commit can take it first",
                   t.id);
    int code = KIWI_EXIT_OK;
    if (dry_run) {
        cleanup_free char *j = NULL;
        if (kiwi_task_to_json (&t, &j, &err) < 0)
            code = kiwi_cli_fail (&err, "ci-event");
        else
            kiwi_cli_println (j);
    } else if (kiwi_cli_submit_task (cc->s, &t, json, &err) < 0)
        code = kiwi_cli_fail (&err, "ci-event");
    kiwi_task_clear (&t);
    return code;
}

/* ---------------------------------------------------------------- the listener */

/* A produced task waiting for its delivery report, then its response. */
typedef struct ci_pending {
    kiwi_delivery d; /* first: the report's pointer is this record's */
    ci_cmd *cc;
    uint64_t conn;
    char *delivery;  /* X-GitHub-Delivery, or NULL; owned */
    char sha[65];    /* the task's body (kiwi_task_body_sha256): its result's task_sha256 */
    char id[];
} ci_pending;

static void
answer_json (kiwi_http_server *srv, uint64_t conn, int status, json_t *o)
{
    cleanup_free char *body = json_line (o);
    if (body == NULL) {
        static const char oom[] = "{\"error\":\"out of memory\"}\n";
        kiwi_http_respond (srv, conn, 500, "application/json", oom, sizeof oom - 1);
        return;
    }
    size_t n = strlen (body);
    body[n] = '\n'; /* the terminating NUL becomes a newline; length n + 1 */
    if (kiwi_http_respond (srv, conn, status, "application/json", body, n + 1) < 0)
        kiwi_debug ("connection %llu went away before its answer", (unsigned long long) conn);
    body[n] = '\0';
}

static void
on_delivery (kiwi_delivery *d, void *ctx)
{
    ci_pending *p = (ci_pending *) d;
    ci_cmd *cc = p->cc;
    cc->pending--;
    if (d->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        kiwi_info ("task %s delivered to %s [%d] at offset %lld", p->id, cc->s->topic_tasks, (int) d->partition,
                   (long long) d->offset);
        kiwi_ci_seen_add (&cc->seen, p->delivery, p->id);
        answer_json (cc->srv, p->conn, 202,
                     json_pack ("{s:s, s:s, s:s, s:i, s:I, s:s}", "status", "accepted", "id", p->id, "topic",
                                cc->s->topic_tasks, "partition", (int) d->partition, "offset", (json_int_t) d->offset,
                                "task_sha256", p->sha));
    } else {
        kiwi_warn ("task %s not delivered: %s", p->id, rd_kafka_err2str (d->err));
        char msg[512];
        snprintf (msg, sizeof msg, "task %s not delivered: %s", p->id, rd_kafka_err2str (d->err));
        answer_json (cc->srv, p->conn, 503, json_pack ("{s:s}", "error", msg));
    }
    free (p->delivery);
    free (p);
}

/* A delivery already turned into task `id`: 200, nothing produced. */
static void
answer_duplicate (kiwi_http_server *srv, const kiwi_http_request *req, const char *delivery, const char *id)
{
    kiwi_info ("%s: delivery %s: duplicate of task %s; not produced again", req->peer, delivery ? delivery : "(none)",
               id);
    answer_json (srv, req->conn, 200,
                 json_pack ("{s:s,s:s,s:s}", "status", "duplicate", "reason", "duplicate delivery", "id", id));
}

static void
on_request (kiwi_http_server *srv, const kiwi_http_request *req, void *ctx)
{
    ci_cmd *cc = ctx;
    kiwi_error_t err = NULL;
    const char *event = kiwi_http_header_get (req, "X-GitHub-Event");
    const char *delivery = kiwi_http_header_get (req, "X-GitHub-Delivery");
    kiwi_info ("%s %s from %s: event %s, delivery %s, %zu bytes", req->method, req->target, req->peer,
               event ? event : "(none)", delivery ? delivery : "(none)", req->body_len);

    if (strcmp (req->method, "GET") == 0 || strcmp (req->method, "HEAD") == 0) {
        if (strcmp (req->target, "/healthz") == 0)
            answer_json (srv, req->conn, 200, json_pack ("{s:s}", "status", "ok"));
        else
            answer_json (srv, req->conn, 405, json_pack ("{s:s}", "error", "send webhooks with POST"));
        return;
    }
    if (strcmp (req->method, "POST") != 0) {
        answer_json (srv, req->conn, 405, json_pack ("{s:s}", "error", "send webhooks with POST"));
        return;
    }
    if (cc->secret != NULL
        && kiwi_ci_verify_signature (cc->secret, cc->secret_len, req->body, req->body_len,
                                     kiwi_http_header_get (req, "X-Hub-Signature-256"), &err)
               < 0) {
        kiwi_warn ("%s: rejected (401): %s", req->peer, kiwi_error_msg (err));
        answer_json (srv, req->conn, 401, json_pack ("{s:s}", "error", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        return;
    }

    const char *dup = delivery != NULL ? kiwi_ci_seen_find (&cc->seen, delivery, NULL) : NULL;
    if (dup != NULL) {
        answer_duplicate (srv, req, delivery, dup);
        return;
    }

    kiwi_task t;
    cleanup_free char *why = NULL;
    kiwi_ci_outcome o = kiwi_ci_event_to_task (event, req->body, req->body_len, &cc->opts, &t, &why, &err);
    if (o == KIWI_CI_TASK && (dup = kiwi_ci_seen_find (&cc->seen, NULL, t.id)) != NULL) {
        answer_duplicate (srv, req, delivery, dup);
        kiwi_task_clear (&t);
        return;
    }
    if (o == KIWI_CI_IGNORED) {
        kiwi_info ("%s: ignored: %s", req->peer, why);
        answer_json (srv, req->conn, 200, json_pack ("{s:s, s:s}", "status", "ignored", "reason", why));
        return;
    }
    if (o == KIWI_CI_ERROR) {
        int status = kiwi_error_code (err) == KIWI_WIRE_EINVALID ? 400 : 500;
        kiwi_warn ("%s: rejected (%d): %s", req->peer, status, kiwi_error_msg (err));
        json_t *j = json_pack ("{s:s}", "error", kiwi_error_msg (err));
        if (j == NULL) /* the message echoed bytes that are not UTF-8 */
            j = json_pack ("{s:s}", "error", "malformed event");
        answer_json (srv, req->conn, status, j);
        kiwi_error_free (&err);
        return;
    }

    cleanup_free char *buf = NULL;
    size_t len = 0;
    size_t idlen = strlen (t.id);
    ci_pending *p = calloc (1, sizeof *p + idlen + 1);
    if (p == NULL || kiwi_task_encode (&t, &buf, &len, &err) < 0 || kiwi_task_body_sha256 (&t, p->sha, &err) < 0) {
        answer_json (srv, req->conn, 500, json_pack ("{s:s}", "error", p ? kiwi_error_msg (err) : "out of memory"));
        kiwi_error_free (&err);
        free (p);
        kiwi_task_clear (&t);
        return;
    }
    p->cc = cc;
    p->conn = req->conn;
    p->delivery = delivery ? strdup (delivery) : NULL;
    memcpy (p->id, t.id, idlen + 1);
    if (kiwi_cli_produce (cc->rk, cc->s->topic_tasks, t.repo.url, strlen (t.repo.url), buf, len, &p->d, &err) < 0) {
        kiwi_warn ("task %s not produced: %s", p->id, kiwi_error_msg (err));
        answer_json (srv, req->conn, 503, json_pack ("{s:s}", "error", kiwi_error_msg (err)));
        kiwi_error_free (&err);
        free (p->delivery);
        free (p);
    } else {
        cc->pending++; /* p is now owned by the delivery report */
        kiwi_info ("%s: task %s for %s at %s produced; answering after the broker's acknowledgement", req->peer, t.id,
                   t.repo.url, t.repo.ref);
    }
    kiwi_task_clear (&t);
}

static void
drain (int fd)
{
    char buf[64];
    while (fd >= 0 && read (fd, buf, sizeof buf) > 0)
        ;
}

static int
listen_loop (ci_cmd *cc, const char *addr)
{
    kiwi_error_t err = NULL;
    int code = KIWI_EXIT_OK;
    int sigfd = -1, wake[2] = { -1, -1 };
    rd_kafka_queue_t *mainq = NULL;
    kiwi_delivery_cb cb = { on_delivery, cc };

    if (kiwi_ci_seen_init (&cc->seen, KIWI_CI_SEEN_DEFAULT) < 0) {
        kiwi_error_make (&err, ENOMEM, "the delivery ring");
        goto fail;
    }
    if ((sigfd = kiwi_cli_signals_install (&err)) < 0)
        goto fail;
    cc->rk = kiwi_cli_producer_new (cc->s, &cb, &err);
    if (cc->rk == NULL)
        goto fail;
    /* librdkafka writes a byte to wake[1] when a delivery report is ready:
     * the listener's poll() wakes up for it. */
    if (pipe2 (wake, O_CLOEXEC | O_NONBLOCK) < 0) {
        kiwi_error_make (&err, errno, "creating the wake-up pipe");
        goto fail;
    }
    mainq = rd_kafka_queue_get_main (cc->rk);
    rd_kafka_queue_io_event_enable (mainq, wake[1], "1", 1);
    kiwi_http_limits lim = { .max_body = cc->s->ci_max_body };
    cc->srv = kiwi_http_server_new (addr, &lim, on_request, cc, &err);
    if (cc->srv == NULL)
        goto fail;

    if (cc->secret == NULL) /* only with --insecure-no-secret */
        kiwi_warn ("NO WEBHOOK SECRET SET (KIWI_CI_WEBHOOK_SECRET or --secret-file) and --insecure-no-secret given: "
                   "X-Hub-Signature-256 is NOT verified and anyone who can reach %s can submit tasks",
                   kiwi_http_server_address (cc->srv));
    printf ("listening on http://%s/\n", kiwi_http_server_address (cc->srv));
    fflush (stdout);
    kiwi_info ("listening on %s; tasks go to %s at %s", kiwi_http_server_address (cc->srv), cc->s->topic_tasks,
               cc->s->brokers);

    while (!kiwi_cli_stop) {
        if (kiwi_http_server_poll (cc->srv, sigfd, wake[0], 1000, &err) < 0)
            goto fail;
        drain (wake[0]);
        rd_kafka_poll (cc->rk, 0);
    }
    kiwi_info ("stopping on signal %d: no new connections; answering %zu tasks in flight", (int) kiwi_cli_stop,
               cc->pending);
    kiwi_http_server_stop_accepting (cc->srv);
    int64_t until = kiwi_mono_ms () + (int64_t) cc->s->delivery_timeout * 1000 + 5000;
    while ((cc->pending > 0 || kiwi_http_server_open_connections (cc->srv) > 0) && kiwi_mono_ms () < until) {
        if (kiwi_http_server_poll (cc->srv, -1, wake[0], 200, &err) < 0)
            goto fail;
        drain (wake[0]);
        rd_kafka_poll (cc->rk, 0);
    }
    if (cc->pending > 0)
        kiwi_warn ("%zu tasks still without a delivery report at exit", cc->pending);
    goto out;
fail:
    code = kiwi_cli_fail (&err, "ci-event --listen");
out:
    if (cc->rk != NULL) {
        rd_kafka_flush (cc->rk, 2000);
        if (mainq != NULL) {
            rd_kafka_queue_io_event_enable (mainq, -1, NULL, 0);
            rd_kafka_queue_destroy (mainq);
        }
        rd_kafka_destroy (cc->rk);
        cc->rk = NULL;
    }
    kiwi_http_server_free (cc->srv);
    cc->srv = NULL;
    kiwi_ci_seen_clear (&cc->seen);
    if (wake[0] >= 0) {
        close (wake[0]);
        close (wake[1]);
    }
    if (sigfd >= 0)
        close (sigfd);
    return code;
}

/* ---------------------------------------------------------------- the command */

int
kiwi_cmd_ci_event (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    ci_cmd cc = { .s = &s };
    kiwi_task_init (&cc.base);
    kiwi_error_t err = NULL;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_ci_event_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    const char *event = NULL, *listen_on = NULL, *secret_file = NULL;
    bool json = false, dry_run = false, has_id = false;
    for (size_t i = 0; i < args.n_opts; i++)
        switch (args.opts[i].id) {
        case OPT_EVENT: event = args.opts[i].value; break;
        case OPT_LISTEN: listen_on = args.opts[i].value; break;
        case OPT_SECRET_FILE: secret_file = args.opts[i].value; break;
        case OPT_INSECURE: cc.insecure = true; break;
        case OPT_JSON: json = true; break;
        case OPT_DRY_RUN: dry_run = true; break;
        case KIWI_TF_ID: has_id = true; break;
        default: break;
        }
    code = KIWI_EXIT_USAGE;
    if (listen_on != NULL && (args.n_pos > 0 || dry_run || has_id || event != NULL)) {
        kiwi_errorf ("ci-event: --listen takes no FILE, --dry-run, --id or --event (each request names its event)");
        goto out;
    }
    if (args.n_pos > 1) {
        kiwi_errorf ("ci-event: expected at most one FILE (or - for stdin), got %zu", args.n_pos);
        goto out;
    }
    if (kiwi_cli_task_options (&args, &cc.base, &err) < 0) {
        code = kiwi_cli_fail (&err, "ci-event");
        goto out;
    }
    if (cc.base.test_command == NULL && *s.ci_test_command == '\0') {
        kiwi_errorf ("ci-event: no test command: give --test CMD or set KIWI_CI_TEST_COMMAND (config key "
                     "ci_test_command)");
        goto out;
    }
    cc.opts.test_command = s.ci_test_command;
    cc.opts.goal_template = s.ci_goal;
    cc.opts.base = &cc.base;

    if (secret_file != NULL) {
        size_t n = 0;
        if (kiwi_read_file (secret_file, 65536, &cc.secret, &n, &err) < 0) {
            kiwi_error_wrap (&err, "--secret-file");
            kiwi_errorf ("ci-event: %s", kiwi_error_msg (err));
            kiwi_error_free (&err);
            goto out;
        }
        while (n > 0 && (cc.secret[n - 1] == '\n' || cc.secret[n - 1] == '\r'))
            cc.secret[--n] = '\0';
        cc.secret_len = n;
    } else if (*s.ci_webhook_secret != '\0') {
        cc.secret = strdup (s.ci_webhook_secret);
        cc.secret_len = strlen (s.ci_webhook_secret);
    }
    if (cc.secret != NULL && cc.secret_len == 0) {
        kiwi_errorf ("ci-event: the webhook secret is empty");
        goto out;
    }

    if (listen_on != NULL && cc.secret == NULL && !cc.insecure) {
        kiwi_errorf ("ci-event --listen: no webhook secret (KIWI_CI_WEBHOOK_SECRET or --secret-file): refusing to "
                     "turn unsigned webhooks from anyone who can reach %s into tasks (--insecure-no-secret to do so "
                     "anyway)",
                     listen_on);
        goto out;
    }
    if (listen_on == NULL && cc.insecure) {
        kiwi_errorf ("ci-event: --insecure-no-secret goes with --listen");
        goto out;
    }

    cc.opts.id_key = cc.secret; /* NULL: the ids' tags are unkeyed */
    cc.opts.id_key_len = cc.secret_len;

    if (listen_on != NULL)
        code = listen_loop (&cc, listen_on);
    else
        code = one_event (&cc, args.n_pos == 1 ? args.pos[0] : "-", event, json, dry_run);
out:
    if (cc.secret != NULL)
        explicit_bzero (cc.secret, cc.secret_len);
    free (cc.secret);
    kiwi_task_clear (&cc.base);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
