/*
 * cli-opts.c: kiwi's commands on the common parser (common/opts.h), and the
 * --help text made from the same table (see cli-opts.h).
 */
#include "producer/cli-opts.h"
#include "schemas/task-input.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "common/cleanup.h"

/* The task fields as options, made once from the field table. */
static kiwi_opt task_opts[KIWI_TF__END + 1];

static void
init_task_opts (void)
{
    if (task_opts[0].name != NULL)
        return;
    size_t n = 0;
    for (int f = KIWI_TF_UNSET + 1; f < KIWI_TF__END; f++) {
        const kiwi_task_field_def *d = kiwi_task_field_get ((kiwi_task_field) f);
        task_opts[n++] = (kiwi_opt) { f, d->flag, 0, d->metavar, d->help };
    }
}

static bool
takes_field (const kiwi_cmd *cmd, int f)
{
    return f > KIWI_TF_UNSET && f < KIWI_TF__END && (cmd->task_fields & KIWI_TASK_FIELD_BIT (f)) != 0;
}

int
kiwi_args_parse (const kiwi_cmd *cmd, int argc, char **argv, int from, kiwi_args *out, kiwi_error_t *err)
{
    /* one table: the command's own options, then the task fields it takes */
    init_task_opts ();
    size_t n = 0;
    for (const kiwi_opt *o = cmd->opts; o && o->name; o++)
        n++;
    for (const kiwi_opt *o = task_opts; o->name; o++)
        n += takes_field (cmd, o->id);
    cleanup_free kiwi_opt *table = calloc (n + 1, sizeof *table);
    if (table == NULL)
        return kiwi_error_make (err, ENOMEM, "parsing options");
    n = 0;
    for (const kiwi_opt *o = cmd->opts; o && o->name; o++)
        table[n++] = *o;
    for (const kiwi_opt *o = task_opts; o->name; o++)
        if (takes_field (cmd, o->id))
            table[n++] = *o;
    char hint[128];
    snprintf (hint, sizeof hint, "kiwi %s --help", cmd->name);
    kiwi_opts_spec spec = { .opts = table, .settings = KIWI_PROGRAM_KIWI, .help_hint = hint,
                            .error_code = KIWI_CLI_EUSAGE, .flags = KIWI_OPTS_HELP };
    return kiwi_opts_parse (&spec, argc, argv, from, out, err);
}

void
kiwi_cmd_help (const kiwi_cmd *cmd, FILE *out)
{
    /* Usage lines */
    const char *s = cmd->synopsis;
    bool first = true;
    while (s && *s) {
        const char *nl = strchr (s, '\n');
        int n = nl ? (int) (nl - s) : (int) strlen (s);
        fprintf (out, "%s kiwi %.*s\n", first ? "Usage:" : "      ", n, s);
        first = false;
        s += n + (nl ? 1 : 0);
    }
    if (cmd->description)
        fprintf (out, "\n%s\n", cmd->description);

    init_task_opts ();
    if (cmd->task_fields != 0) {
        fputs ("\nTask fields:\n", out);
        for (const kiwi_opt *o = task_opts; o->name; o++)
            if (takes_field (cmd, o->id))
                kiwi_opt_help_line (o, out);
    }
    fputs ("\nOptions:\n", out);
    for (const kiwi_opt *o = cmd->opts; o && o->name; o++)
        kiwi_opt_help_line (o, out);
    fprintf (out, "  %-24s  %s\n", "-h, --help", "show this help and exit");

    fputs ("\nConfiguration:\n", out);
    kiwi_cli_settings_flags (out);

    if (cmd->exits != NULL) {
        fputs ("\nExit status:\n", out);
        for (const kiwi_exit_doc *e = cmd->exits; e->meaning; e++)
            fprintf (out, "  %-4d %s\n", e->code, e->meaning);
    }
}

int
kiwi_parse_u64 (const char *what, const char *s, unsigned long long min, unsigned long long max,
                unsigned long long *out, kiwi_error_t *err)
{
    if (s == NULL || !isdigit ((unsigned char) *s))
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: `%s` is not a whole number (accepted: %llu to %llu)",
                                     what, s ? s : "", min, max);
    errno = 0;
    char *end = NULL;
    unsigned long long n = strtoull (s, &end, 10);
    if (*end != '\0')
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: `%s` is not a whole number (accepted: %llu to %llu)",
                                     what, s, min, max);
    if (errno == ERANGE || n < min || n > max)
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: %s is out of range (accepted: %llu to %llu)", what, s,
                                     min, max);
    *out = n;
    return 0;
}
