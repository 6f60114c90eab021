/*
 * cli.c: what every kiwi command shares (see cli.h), the command table and
 * `kiwi config`.
 */
#include "producer/cli.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/cleanup.h"
#include "producer/kafka.h"
#include "common/log.h"
#include "schemas/task-input.h"
#include "schemas/task.h"
#include "schemas/wire.h"

extern char **environ;

int
kiwi_wait_exit_code (kiwi_result_status s)
{
    switch (s) {
#define KIWI__WAIT_CASE(id, code)                                                                             \
    case KIWI_RESULT_##id:                                                                                    \
        return code;
        KIWI_WAIT_EXIT_MAP (KIWI__WAIT_CASE)
#undef KIWI__WAIT_CASE
    case KIWI_RESULT_UNSET:
    case KIWI_RESULT__END:
        break;
    }
    return KIWI_EXIT_FAILURE;
}

int
kiwi_exit_for (kiwi_error_t err)
{
    switch (kiwi_error_code (err)) {
    case KIWI_CLI_EUSAGE:
        return KIWI_EXIT_USAGE;
    case KIWI_WIRE_EINVALID:
        return KIWI_EXIT_INVALID;
    default:
        return KIWI_EXIT_FAILURE;
    }
}

int
kiwi_cli_fail (kiwi_error_t *err, const char *what)
{
    int code = kiwi_exit_for (*err);
    if (what != NULL)
        kiwi_errorf ("%s: %s", what, kiwi_error_msg (*err));
    else
        kiwi_errorf ("%s", kiwi_error_msg (*err));
    kiwi_error_free (err);
    return code;
}

void
kiwi_cli_println (const char *line)
{
    fputs (line, stdout);
    fputc ('\n', stdout);
    fflush (stdout);
}

int
kiwi_cli_begin (const kiwi_cmd *cmd, int argc, char **argv, kiwi_args *args, kiwi_cli_settings *s, int *exit_code)
{
    kiwi_error_t err = NULL;
    if (kiwi_args_parse (cmd, argc, argv, 1, args, &err) < 0) {
        *exit_code = kiwi_cli_fail (&err, cmd->name);
        return 1;
    }
    if (args->help) {
        kiwi_cmd_help (cmd, stdout);
        *exit_code = KIWI_EXIT_OK;
        return 1;
    }
    if (kiwi_cli_settings_load (s, args->settings, environ, &err) < 0) {
        *exit_code = kiwi_cli_fail (&err, "configuration");
        return 1;
    }
    kiwi_log_level level;
    if (kiwi_log_level_parse (s->log_level, &level) == 0)
        kiwi_log_set_level (level);
    return 0;
}

/* ---------------------------------------------------------------- tasks */

/* ci_context is at most 262144 bytes (task.md). */
#define CI_CONTEXT_MAX 262144

int
kiwi_cli_task_options (const kiwi_args *args, kiwi_task *t, kiwi_error_t *err)
{
    for (size_t i = 0; i < args->n_opts; i++) {
        const kiwi_arg *a = &args->opts[i];
        if (a->id >= KIWI_OPT_OWN)
            continue;
        if (a->id == KIWI_TF_CI_CONTEXT) {
            cleanup_free char *text = NULL;
            size_t len = 0;
            if (kiwi_read_file (a->value, CI_CONTEXT_MAX, &text, &len, err) < 0)
                return kiwi_error_wrap (err, "%s", a->spelling);
            if (strlen (text) != len)
                return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: `%s` contains NUL bytes", a->spelling,
                                             a->value);
            if (kiwi_task_input_set (t, KIWI_TF_CI_CONTEXT, text, a->spelling, err) < 0)
                return -1;
            continue;
        }
        if (kiwi_task_input_set (t, (kiwi_task_field) a->id, a->value, a->spelling, err) < 0)
            return -1;
    }
    return 0;
}

int
kiwi_cli_submit_task (const kiwi_cli_settings *s, const kiwi_task *t, bool json, kiwi_error_t *err)
{
    cleanup_free char *buf = NULL;
    size_t len = 0;
    if (kiwi_task_encode (t, &buf, &len, err) < 0)
        return -1;
    rd_kafka_t *rk = kiwi_cli_producer_new (s, NULL, err);
    if (rk == NULL)
        return -1;
    kiwi_delivery d = { 0 };
    int r = kiwi_cli_produce (rk, s->topic_tasks, t->repo.url, strlen (t->repo.url), buf, len, &d, err);
    if (r == 0)
        r = kiwi_cli_produce_wait (rk, &d, (int) (s->delivery_timeout * 1000 + 5000), err);
    if (r == 0 && !d.done)
        r = kiwi_error_make (err, 0, "not delivered");
    if (r < 0) {
        /* The message may still sit in the queue: purge it so destroy does
         * not wait for it. */
        rd_kafka_purge (rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll (rk, 0);
        kiwi_error_wrap (err, "task %s to topic %s at %s", t->id, s->topic_tasks, s->brokers);
    }
    rd_kafka_destroy (rk);
    if (r < 0)
        return -1;
    char sha[65];
    if (json && kiwi_task_body_sha256 (t, sha, err) < 0)
        return -1;
    if (json) {
        json_t *o = json_pack ("{s:s, s:s, s:i, s:I, s:s}", "id", t->id, "topic", s->topic_tasks, "partition",
                               (int) d.partition, "offset", (json_int_t) d.offset, "task_sha256", sha);
        cleanup_free char *line = o ? json_dumps (o, JSON_COMPACT) : NULL;
        json_decref (o);
        if (line == NULL)
            return kiwi_error_make (err, ENOMEM, "printing the delivery");
        kiwi_cli_println (line);
    } else
        kiwi_cli_println (t->id);
    kiwi_debug ("task %s delivered to %s [%d] at offset %lld", t->id, s->topic_tasks, (int) d.partition,
                (long long) d.offset);
    return 0;
}

/* ---------------------------------------------------------------- kiwi config */

static const kiwi_exit_doc config_exits[] = {
    { 0, "the settings are valid (and were printed)" },
    { 2, "a setting has a bad value (named with its key, origin and what is accepted)" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_config_def = {
    .name = "config",
    .synopsis = "config [OPTIONS]",
    .summary = "print the effective settings and where each came from",
    .description = "Loads the settings as every command does (flags, environment, config file, stack env file,\n"
                   "defaults), checks them and prints one line per setting: key, environment variable, value\n"
                   "and origin. Secrets are printed as (set) or (empty).",
    .opts = NULL,
    .exits = config_exits,
};

static int
kiwi_cmd_config (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_config_def, argc, argv, &args, &s, &code) == 0) {
        if (args.n_pos > 0) {
            kiwi_errorf ("config: unexpected argument `%s`", args.pos[0]);
            code = KIWI_EXIT_USAGE;
        } else
            kiwi_cli_settings_dump (&s, stdout);
    }
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}

/* ---------------------------------------------------------------- the table */

const kiwi_command kiwi_commands[] = {
    { &kiwi_cmd_submit_def, kiwi_cmd_submit },     { &kiwi_cmd_batch_def, kiwi_cmd_batch },
    { &kiwi_cmd_ci_event_def, kiwi_cmd_ci_event }, { &kiwi_cmd_tail_def, kiwi_cmd_tail },
    { &kiwi_cmd_wait_def, kiwi_cmd_wait },         { &kiwi_cmd_watch_def, kiwi_cmd_watch },
    { &kiwi_cmd_fleet_def, kiwi_cmd_fleet },       { &kiwi_cmd_config_def, kiwi_cmd_config },
    { NULL, NULL },
};

void
kiwi_cli_help (FILE *out)
{
    fputs ("Usage: kiwi COMMAND [OPTIONS] [ARGS]\n"
           "       kiwi COMMAND --help\n"
           "       kiwi --help-config   (the settings below alone)\n"
           "       kiwi --version\n"
           "\n"
           "The command line of Kiwi: put tasks on the tasks topic and read what the workers say.\n"
           "\n"
           "Commands:\n",
           out);
    for (const kiwi_command *c = kiwi_commands; c->cmd; c++)
        fprintf (out, "  %-10s %s\n", c->cmd->name, c->cmd->summary);
    fputs ("\nConfiguration (every command; flag, else environment, else config file, else stack env file,\n"
           "else default):\n",
           out);
    kiwi_cli_settings_help (out);
    fputs ("\nExit status (every command; `kiwi wait` adds one per result status):\n", out);
#define KIWI__EXIT_DOC(id, code, meaning) fprintf (out, "  %-4d %s\n", code, meaning);
    KIWI_EXIT_MAP (KIWI__EXIT_DOC)
#undef KIWI__EXIT_DOC
}
