/*
 * cli-settings.c: the kiwi command's side of the settings table (see
 * cli-settings.h): its lookups, its error code and its flag list.
 */
#include "producer/cli-settings.h"

#include <string.h>

#include "producer/cli-opts.h"

#define K KIWI_PROGRAM_KIWI

const kiwi_setting_def *
kiwi_setting_def_get (kiwi_setting_id id)
{
    const kiwi_setting_def *d = kiwi_setting_get (id);
    return d != NULL && (d->programs & K) ? d : NULL;
}

const kiwi_setting_def *
kiwi_setting_by_flag (const char *flag)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = kiwi_setting_def_get ((kiwi_setting_id) i);
        if (d != NULL && d->flag != NULL && strcmp (d->flag, flag) == 0)
            return d;
    }
    return NULL;
}

const kiwi_setting_def *
kiwi_setting_by_key (const char *key)
{
    const kiwi_setting_def *d = kiwi_setting_find (key, K);
    return d != NULL && strcmp (d->key, key) == 0 ? d : NULL;
}

char *
kiwi_goal_expand (const char *tmpl, const kiwi_goal_vars *v, kiwi_error_t *err)
{
    return kiwi_template_expand (tmpl, v, KIWI_CLI_EUSAGE, err);
}

void
kiwi_cli_settings_init (kiwi_cli_settings *s)
{
    memset (s, 0, sizeof *s);
}

void
kiwi_cli_settings_clear (kiwi_cli_settings *s)
{
    kiwi_settings_clear (s);
}

int
kiwi_cli_settings_kafka_props (const kiwi_cli_settings *s, kiwi_strv *pairs, kiwi_error_t *err)
{
    return kiwi_settings_kafka_props (s, pairs, err);
}

int
kiwi_cli_settings_load (kiwi_cli_settings *s, const char *const flags[KIWI_SETTING__COUNT], char *const *envp,
                        kiwi_error_t *err)
{
    return kiwi_settings_load (s, K, flags, (const char *const *) envp, KIWI_CLI_EUSAGE, err);
}

void
kiwi_cli_settings_flags (FILE *out)
{
    int col = 2;
    fputs ("  ", out);
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = kiwi_setting_def_get ((kiwi_setting_id) i);
        if (d == NULL || d->flag == NULL)
            continue;
        int w = (int) strlen (d->flag) + 3;
        if (col > 2 && col + w > 96) {
            fputs ("\n  ", out);
            col = 2;
        } else if (col > 2)
            fputc (' ', out);
        fprintf (out, "--%s", d->flag);
        col += w;
    }
    fputs ("\n  (each also set by its environment variable or the config file; see `kiwi --help`)\n", out);
}

void
kiwi_cli_settings_dump (const kiwi_cli_settings *s, FILE *out)
{
    kiwi_settings_dump (s, K, out);
}

void
kiwi_cli_settings_help (FILE *out)
{
    kiwi_settings_help (out, K);
}
