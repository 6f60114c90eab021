/*
 * opts.c: parsing command lines against an option table and the settings
 * flags (see opts.h).
 */
#include "common/opts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const kiwi_opt *
find_long (const kiwi_opt *opts, const char *name, size_t n)
{
    for (const kiwi_opt *o = opts; o && o->name; o++)
        if (strlen (o->name) == n && strncmp (o->name, name, n) == 0)
            return o;
    return NULL;
}

static const kiwi_opt *
find_short (const kiwi_opt *opts, char c)
{
    for (const kiwi_opt *o = opts; o && o->name; o++)
        if (o->short_name == c)
            return o;
    return NULL;
}

/* The setting whose flag is name[0..n) among `programs`' rows, or NULL. */
static const kiwi_setting_def *
setting_by_flag (unsigned programs, const char *name, size_t n)
{
    for (int k = 0; programs != 0 && k < KIWI_SETTING__COUNT; k++) {
        const kiwi_setting_def *d = kiwi_setting_get ((kiwi_setting_id) k);
        if (d != NULL && (d->programs & programs) && d->flag && strlen (d->flag) == n
            && strncmp (d->flag, name, n) == 0)
            return d;
    }
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

/* A long option (or, with KIWI_OPTS_ONE_DASH, a single-dash one): a is the
 * argument, name[0..n) its name, eq its "=" or NULL. Returns 0 (KEEP: also
 * for an argument it kept), < 0 with *err. */
static int
long_opt (const kiwi_opts_spec *spec, int argc, char **argv, int *i, kiwi_args *out, kiwi_error_t *err)
{
    char *a = argv[*i];
    bool keep = (spec->flags & KIWI_OPTS_KEEP) != 0, quote = (spec->flags & KIWI_OPTS_QUOTE_ARG) != 0;
    const char *name = a + (a[1] == '-' ? 2 : 1);
    const char *eq = strchr (name, '=');
    size_t n = eq ? (size_t) (eq - name) : strlen (name);
    /* what errors quote: the argument as given, or "--" and the name */
    const char *qd = quote ? "" : "--", *qs = quote ? a : name;
    int qn = quote ? (int) strlen (a) : (int) n;
    const kiwi_opt *o = find_long (spec->opts, name, n);
    const kiwi_setting_def *sd = NULL;
    if (o == NULL && (spec->flags & KIWI_OPTS_HELP) && n == 4 && strncmp (name, "help", 4) == 0) {
        out->help = true;
        return 0;
    }
    if (o != NULL && o->id < 0) {
        sd = kiwi_setting_get ((kiwi_setting_id) (-1 - o->id));
        o = NULL;
    } else if (o == NULL)
        sd = setting_by_flag (spec->settings, name, n);
    if (o == NULL && sd == NULL) {
        if (keep)
            return add_pos (out, a, err);
        return kiwi_error_make_code (err, spec->error_code, "unknown option `%s%.*s` (see %s)", qd,
                                     qn, qs, spec->help_hint);
    }
    const char *value = NULL;
    if (sd != NULL || o->metavar != NULL) {
        if (eq != NULL)
            value = eq + 1;
        else if (sd != NULL && (spec->flags & KIWI_OPTS_BOOL_ALONE) && sd->type == KIWI_SETTING_TYPE_BOOL
                 && (*i + 1 >= argc || argv[*i + 1][0] == '-'))
            value = "true";
        else if (*i + 1 < argc)
            value = argv[++*i];
        else if (keep)
            return add_pos (out, a, err);
        else
            return kiwi_error_make_code (err, spec->error_code, "option `%s%.*s` needs a value", qd,
                                         qn, qs);
    } else if (eq != NULL) {
        if (keep)
            return add_pos (out, a, err);
        return kiwi_error_make_code (err, spec->error_code, "option `%s%.*s` takes no value", qd,
                                     qn, qs);
    }
    if (sd != NULL) {
        out->settings[sd->id] = value;
        return 0;
    }
    return add_opt (out, o->id, value, a, err);
}

/* Single-letter options: -f, -n 5, -n5, -fn5. */
static int
short_opts (const kiwi_opts_spec *spec, int argc, char **argv, int *i, kiwi_args *out, kiwi_error_t *err)
{
    char *a = argv[*i];
    bool keep = (spec->flags & KIWI_OPTS_KEEP) != 0;
    if (keep && (a[2] != '\0' || find_short (spec->opts, a[1]) == NULL))
        return add_pos (out, a, err);
    for (const char *p = a + 1; *p; p++) {
        if (*p == 'h' && (spec->flags & KIWI_OPTS_HELP)) {
            out->help = true;
            continue;
        }
        const kiwi_opt *o = find_short (spec->opts, *p);
        if (o == NULL)
            return kiwi_error_make_code (err, spec->error_code, "unknown option `-%c` (see %s)", *p,
                                         spec->help_hint);
        if (o->metavar == NULL) {
            if (add_opt (out, o->id, NULL, a, err) < 0)
                return -1;
            continue;
        }
        const char *value = NULL;
        if (p[1] != '\0')
            value = p + 1;
        else if (*i + 1 < argc)
            value = argv[++*i];
        else if (keep)
            return add_pos (out, a, err);
        else
            return kiwi_error_make_code (err, spec->error_code, "option `-%c` needs a value", *p);
        return add_opt (out, o->id, value, a, err);
    }
    return 0;
}

int
kiwi_opts_parse (const kiwi_opts_spec *spec, int argc, char **argv, int from, kiwi_args *out, kiwi_error_t *err)
{
    bool only_pos = false, stop = (spec->flags & KIWI_OPTS_STOP) != 0, keep = (spec->flags & KIWI_OPTS_KEEP) != 0;
    out->end = argc;
    for (int i = from; i < argc; i++) {
        char *a = argv[i];
        int rc;
        if (only_pos || a[0] != '-' || a[1] == '\0') {
            if (stop) {
                out->end = i;
                break;
            }
            rc = add_pos (out, a, err);
        } else if (strcmp (a, "--") == 0) {
            if (stop) {
                out->end = i + 1;
                break;
            }
            if (keep)
                rc = add_pos (out, a, err);
            else {
                only_pos = true;
                rc = 0;
            }
        } else if (a[1] == '-' || (spec->flags & KIWI_OPTS_ONE_DASH))
            rc = long_opt (spec, argc, argv, &i, out, err);
        else
            rc = short_opts (spec, argc, argv, &i, out, err);
        if (rc < 0)
            return -1;
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

void
kiwi_opt_help_line (const kiwi_opt *o, FILE *out)
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
