/*
 * cmd-submit.c: `kiwi submit`: one task from flags or a JSON file onto the
 * tasks topic, acknowledged by the broker before the id is printed.
 */
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "producer/cli.h"
#include "common/log.h"
#include "schemas/task-input.h"
#include "schemas/task.h"

/* Largest task file: ci_context (256 KiB) and goal (64 KiB) fit many times. */
#define TASK_FILE_MAX (4 * 1024 * 1024)

enum { OPT_FILE = KIWI_OPT_OWN, OPT_JSON, OPT_DRY_RUN };

static const kiwi_opt submit_opts[] = {
    { OPT_FILE, "file", 0, "TASK.json", "read the task from a JSON object (- for stdin); flags override its fields" },
    { OPT_JSON, "json", 0, NULL,
      "print {\"id\", \"topic\", \"partition\", \"offset\", \"task_sha256\"} instead of the bare id" },
    { OPT_DRY_RUN, "dry-run", 0, NULL, "validate and print the task as JSON; produce nothing" },
    { 0, NULL, 0, NULL, NULL },
};

static const kiwi_exit_doc submit_exits[] = {
    { 0, "the task was acknowledged by the broker; its id was printed" },
    { 1, "not delivered (broker unreachable, timed out, refused)" },
    { 2, "usage or configuration error" },
    { 3, "the task is invalid (the message names the field) or the file is not a JSON task" },
    { -1, NULL },
};

const kiwi_cmd kiwi_cmd_submit_def = {
    .name = "submit",
    .synopsis = "submit --repo URL --ref REF --test CMD --goal TEXT [OPTIONS]\n"
                "submit --file TASK.json [OPTIONS]",
    .summary = "put one task on the tasks topic",
    .description
    = "Builds a task from the flags, or from a JSON object (the Task's own shape, see docs/cli.md)\n"
      "with flags overriding its fields, fills in what is missing (a generated id, submitted_at, source\n"
      "\"submit\"), validates it and produces it to the tasks topic with an idempotent producer\n"
      "(acks=all), keyed by the repository URL. Prints the task id once the broker acknowledged it.",
    .opts = submit_opts,
    .task_fields = KIWI_TASK_FIELDS_ALL,
    .exits = submit_exits,
};

int
kiwi_cmd_submit (int argc, char **argv)
{
    kiwi_args args = { 0 };
    kiwi_cli_settings s;
    kiwi_cli_settings_init (&s);
    kiwi_task t;
    kiwi_task_init (&t);
    kiwi_error_t err = NULL;
    int code = 0;
    if (kiwi_cli_begin (&kiwi_cmd_submit_def, argc, argv, &args, &s, &code) != 0)
        goto out;

    const char *file = NULL;
    bool json = false, dry_run = false;
    for (size_t i = 0; i < args.n_opts; i++)
        switch (args.opts[i].id) {
        case OPT_FILE: file = args.opts[i].value; break;
        case OPT_JSON: json = true; break;
        case OPT_DRY_RUN: dry_run = true; break;
        default: break;
        }
    if (args.n_pos > 0) {
        kiwi_errorf ("submit: unexpected argument `%s` (a task file is given with --file)", args.pos[0]);
        code = KIWI_EXIT_USAGE;
        goto out;
    }

    if (file != NULL) {
        cleanup_free char *text = NULL;
        size_t len = 0;
        if (kiwi_read_file (file, TASK_FILE_MAX, &text, &len, &err) < 0
            || kiwi_task_input_parse (text, len, &t, &err) < 0) {
            kiwi_error_wrap (&err, "%s", strcmp (file, "-") == 0 ? "stdin" : file);
            code = kiwi_cli_fail (&err, "submit");
            goto out;
        }
    }
    if (kiwi_cli_task_options (&args, &t, &err) < 0 || kiwi_task_input_finish (&t, "submit", &err) < 0) {
        code = kiwi_cli_fail (&err, "submit: invalid task");
        goto out;
    }

    if (dry_run) {
        cleanup_free char *j = NULL;
        if (kiwi_task_to_json (&t, &j, &err) < 0) {
            code = kiwi_cli_fail (&err, "submit");
            goto out;
        }
        kiwi_cli_println (j);
        goto out;
    }
    if (kiwi_cli_submit_task (&s, &t, json, &err) < 0)
        code = kiwi_cli_fail (&err, "submit");
out:
    kiwi_task_clear (&t);
    kiwi_args_clear (&args);
    kiwi_cli_settings_clear (&s);
    return code;
}
