/*
 * opts.c: parsing command lines against a command's option table, and the
 * --help text made from the same table (see opts.h).
 */
#include "producer/opts.h"
#include "schemas/task-input.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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

static const kiwi_opt *
find_long (const kiwi_cmd *cmd, const char *name, size_t n)
{
    for (const kiwi_opt *o = cmd->opts; o && o->name; o++)
        if (strlen (o->name) == n && strncmp (o->name, name, n) == 0)
            return o;
    init_task_opts ();
    for (const kiwi_opt *o = task_opts; o->name; o++)
        if (takes_field (cmd, o->id) && strlen (o->name) == n && strncmp (o->name, name, n) == 0)
            return o;
    return NULL;
}

static const kiwi_opt *
find_short (const kiwi_cmd *cmd, char c)
{
    for (const kiwi_opt *o = cmd->opts; o && o->name; o++)
        if (o->short_name == c)
            return o;
    return NULL;
}

static int
add_opt (kiwi_args *a, int id, const char *value, const char *spelling, kiwi_error_t *err)
{
    kiwi_arg *n = realloc (a->opts, (a->n_opts + 1) * sizeof *n);
    if (n == NULL)
        return kiwi_error_make (err, ENOMEM, "parsing options");
    a->opts = n;
    a->opts[a->n_opts++] = (kiwi_arg) { id, value, spelling };
    return 0;
}

static int
add_pos (kiwi_args *a, char *value, kiwi_error_t *err)
{
    char **n = realloc (a->pos, (a->n_pos + 1) * sizeof *n);
    if (n == NULL)
        return kiwi_error_make (err, ENOMEM, "parsing options");
    a->pos = n;
    a->pos[a->n_pos++] = value;
    return 0;
}

int
kiwi_args_parse (const kiwi_cmd *cmd, int argc, char **argv, int from, kiwi_args *out, kiwi_error_t *err)
{
    bool only_pos = false;
    for (int i = from; i < argc; i++) {
        char *a = argv[i];
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (add_pos (out, a, err) < 0)
                return -1;
            continue;
        }
        if (strcmp (a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (a[1] == '-') {
            const char *name = a + 2;
            const char *eq = strchr (name, '=');
            size_t n = eq ? (size_t) (eq - name) : strlen (name);
            if (n == 4 && strncmp (name, "help", 4) == 0) {
                out->help = true;
                continue;
            }
            const kiwi_opt *o = find_long (cmd, name, n);
            const kiwi_setting_def *sd = NULL;
            if (o == NULL) {
                char flag[128];
                snprintf (flag, sizeof flag, "%.*s", (int) n, name);
                sd = kiwi_setting_by_flag (flag);
                if (sd == NULL)
                    return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "unknown option `--%.*s` (see kiwi %s --help)",
                                                 (int) n, name, cmd->name);
            }
            bool takes_value = sd != NULL || o->metavar != NULL;
            const char *value = NULL;
            if (takes_value) {
                if (eq != NULL)
                    value = eq + 1;
                else if (i + 1 < argc)
                    value = argv[++i];
                else
                    return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "option `--%.*s` needs a value", (int) n, name);
            } else if (eq != NULL)
                return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "option `--%.*s` takes no value", (int) n, name);
            if (sd != NULL)
                out->settings[sd->id] = value;
            else if (add_opt (out, o->id, value, a, err) < 0)
                return -1;
            continue;
        }
        /* short options: -f, -n 5, -n5, -fn5 */
        for (const char *p = a + 1; *p; p++) {
            if (*p == 'h') {
                out->help = true;
                continue;
            }
            const kiwi_opt *o = find_short (cmd, *p);
            if (o == NULL)
                return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "unknown option `-%c` (see kiwi %s --help)", *p,
                                             cmd->name);
            if (o->metavar == NULL) {
                if (add_opt (out, o->id, NULL, a, err) < 0)
                    return -1;
                continue;
            }
            const char *value = NULL;
            if (p[1] != '\0')
                value = p + 1;
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "option `-%c` needs a value", *p);
            if (add_opt (out, o->id, value, a, err) < 0)
                return -1;
            break;
        }
    }
    return 0;
}

void
kiwi_args_clear (kiwi_args *a)
{
    free (a->opts);
    free (a->pos);
    memset (a, 0, sizeof *a);
}

static void
print_opt (const kiwi_opt *o, FILE *out)
{
    char left[96];
    int n = 0;
    if (o->short_name)
        n = snprintf (left, sizeof left, "-%c, ", o->short_name);
    snprintf (left + n, sizeof left - (size_t) n, "--%s%s%s", o->name, o->metavar ? " " : "",
              o->metavar ? o->metavar : "");
    if (strlen (left) > 24)
        fprintf (out, "  %s\n  %-24s  %s\n", left, "", o->help);
    else
        fprintf (out, "  %-24s  %s\n", left, o->help);
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
                print_opt (o, out);
    }
    fputs ("\nOptions:\n", out);
    for (const kiwi_opt *o = cmd->opts; o && o->name; o++)
        print_opt (o, out);
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
