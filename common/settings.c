/*
 * settings.c: the settings table of kiwi and kiwi-worker (settings.h, rows
 * in settings-rows.def), its lookups, defaults, the rule for a key of
 * another program, --help-config and the dump.
 */
#include "common/settings-internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/kafka-conf.h"

#define K KIWI_PROGRAM_KIWI
#define W KIWI_PROGRAM_WORKER
#define KW (KIWI_PROGRAM_KIWI | KIWI_PROGRAM_WORKER)

const kiwi_setting_def kiwi__settings[KIWI_SETTING__COUNT] = {
#define ROW(id_, field, key_, env_, flag_, type_, def_, kdef, min_, max_, values_, programs_, was_, help_)       \
    [KIWI_SETTING_##id_] = { .id = KIWI_SETTING_##id_, .key = key_, .env = env_, .flag = flag_,                  \
                             .type = KIWI_SETTING_TYPE_##type_, .offset = offsetof (kiwi_settings, field),       \
                             .def = def_, .def_kiwi = kdef, .min = min_, .max = max_, .values = values_,         \
                             .programs = programs_, .was = was_, .help = help_ },
#include "common/settings-rows.def"
#undef ROW
};

/* Other names of a row: the spec's spellings and the runtime's alias. */
static const struct {
    const char *alias;
    kiwi_setting_id id;
} aliases[] = {
    { "KIWI_SANDBOX_RUNTIME", KIWI_SETTING_SANDBOX },
    { "sandbox-runtime", KIWI_SETTING_SANDBOX },
    { "TaskTimeoutSeconds", KIWI_SETTING_TASK_TIMEOUT },
    { "MaxSandboxDiskMB", KIWI_SETTING_MAX_SANDBOX_DISK_MB },
};

const kiwi_setting_def *
kiwi_setting_get (kiwi_setting_id id)
{
    if ((int) id < 0 || id >= KIWI_SETTING__COUNT)
        return NULL;
    return &kiwi__settings[id];
}

const kiwi_setting_def *
kiwi_setting_find (const char *name, unsigned programs)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &kiwi__settings[i];
        if (programs != 0 && !(d->programs & programs))
            continue;
        if (strcmp (d->key, name) == 0 || strcmp (d->env, name) == 0 || (d->flag && strcmp (d->flag, name) == 0))
            return d;
    }
    return NULL;
}

/* The row named `name` (key, environment variable, flag or one of the
 * spec's other spellings) among `programs`' rows. */
static const kiwi_setting_def *
setting_lookup (const char *name, unsigned programs)
{
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (strcmp (name, aliases[i].alias) == 0 && (kiwi__settings[aliases[i].id].programs & programs))
            return &kiwi__settings[aliases[i].id];
    return kiwi_setting_find (name, programs);
}

/* Whether a row's field is a string (char *). */
static bool
setting_is_string (const kiwi_setting_def *d)
{
    switch (d->type) {
    case KIWI_SETTING_TYPE_INT:
    case KIWI_SETTING_TYPE_NUM:
    case KIWI_SETTING_TYPE_SECONDS:
    case KIWI_SETTING_TYPE_BYTES:
    case KIWI_SETTING_TYPE_BOOL:
        return false;
    default:
        return true;
    }
}

const char *
kiwi_setting_default (const kiwi_setting_def *d, unsigned program)
{
    if (program == KIWI_PROGRAM_KIWI && d->def_kiwi != NULL)
        return d->def_kiwi;
    /* kiwi's strings are never NULL: unset is empty */
    if (program == KIWI_PROGRAM_KIWI && d->def == NULL && setting_is_string (d))
        return "";
    return d->def;
}

int
kiwi__setting_store (kiwi_settings *s, const kiwi_setting_def *d, const char *value, char *origin,
                     kiwi_error_t *err)
{
    void *field = (char *) s + d->offset;
    const char *why = NULL;
    switch (d->type) {
    case KIWI_SETTING_TYPE_INT:
        why = kiwi__setting_parse_int (d, value, field);
        break;
    case KIWI_SETTING_TYPE_NUM:
        why = kiwi__setting_parse_num (d, value, field);
        break;
    case KIWI_SETTING_TYPE_SECONDS:
    case KIWI_SETTING_TYPE_BYTES:
        why = kiwi__setting_parse_count (d, value, field);
        break;
    case KIWI_SETTING_TYPE_BOOL:
        why = kiwi__setting_parse_bool (value, field);
        break;
    default: {
        /* an empty address is none */
        char *copy = d->type == KIWI_SETTING_TYPE_ADDR && *value == '\0' ? NULL : strdup (value);
        if (copy == NULL && !(d->type == KIWI_SETTING_TYPE_ADDR && *value == '\0')) {
            free (origin);
            return kiwi_error_make (err, ENOMEM, "settings: %s", d->key);
        }
        free (*(char **) field);
        *(char **) field = copy;
        break;
    }
    }
    if (why != NULL) {
        free (origin);
        return kiwi_error_make (err, EINVAL, "settings: %s: `%s`: %s", d->key, value, why);
    }
    free (s->origin[d->id]);
    s->origin[d->id] = origin;
    return 0;
}

int
kiwi_settings_defaults (kiwi_settings *s, unsigned program, kiwi_error_t *err)
{
    memset (s, 0, sizeof *s);
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &kiwi__settings[i];
        const char *def = kiwi_setting_default (d, program);
        if (!(d->programs & program) || def == NULL)
            continue;
        char *origin = strdup ("default");
        if (origin == NULL || kiwi__setting_store (s, d, def, origin, err) < 0) {
            if (origin == NULL)
                kiwi_error_make (err, ENOMEM, "settings");
            kiwi_settings_clear (s);
            return -1;
        }
    }
    return 0;
}

void
kiwi_settings_clear (kiwi_settings *s)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        if (setting_is_string (&kiwi__settings[i]))
            free (*(char **) ((char *) s + kiwi__settings[i].offset));
        free (s->origin[i]);
    }
    free (s->git_token);
    kiwi_strv_free (&s->kafka_props);
    memset (s, 0, sizeof *s);
}

int
kiwi__setting_kafka_property (kiwi_settings *s, const char *key, const char *value, const char *origin, int code,
                              kiwi_error_t *err)
{
    const char *name = key + strlen (KIWI_KAFKA_PROPERTY_PREFIX);
    if (*name == '\0' || strspn (name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen (name))
        return kiwi_error_make_code (err, code, "%s: %s: `%s` is not a librdkafka property name", origin, key, name);
    if (kiwi_strv_add (&s->kafka_props, name) < 0 || kiwi_strv_add (&s->kafka_props, value) < 0)
        return kiwi_error_make (err, ENOMEM, "%s", origin);
    return 0;
}

int
kiwi_settings_set (kiwi_settings *s, unsigned program, const char *name, const char *value, const char *origin,
                   int code, kiwi_error_t *err)
{
    if (strncmp (name, KIWI_KAFKA_PROPERTY_PREFIX, strlen (KIWI_KAFKA_PROPERTY_PREFIX)) == 0)
        return kiwi__setting_kafka_property (s, name, value, origin, code, err);
    const kiwi_setting_def *d = setting_lookup (name, program);
    if (d == NULL)
        return kiwi_error_make_code (err, code, "%s: unknown setting `%s` (%s --help-config lists them)", origin,
                                     name, program == KIWI_PROGRAM_KIWI ? "kiwi" : "kiwi-worker");
    if (kiwi_setting_check (d, value, origin, code, err) < 0)
        return -1;
    char *o = strdup (origin);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "settings");
    return kiwi__setting_store (s, d, value, o, err);
}

int
kiwi_setting_key_foreign (const char *key, unsigned self, const char *origin, int code, kiwi_error_t *err)
{
    const kiwi_setting_def *d = kiwi_setting_find (key, 0);
    if (d != NULL && strcmp (d->key, key) == 0 && !(d->programs & self))
        return 0; /* the other program's: the file is shared */
    if (d != NULL && strcmp (d->key, key) == 0)
        return kiwi_error_make_code (err, code, "%s: `%s` is not a setting of %s", origin, key,
                                     self == KIWI_PROGRAM_KIWI ? "kiwi" : "kiwi-worker");
    for (int i = 0; i < KIWI_SETTING__COUNT; i++)
        if (kiwi__settings[i].was != NULL && strcmp (kiwi__settings[i].was, key) == 0)
            return kiwi_error_make_code (err, code,
                                         "%s: unknown key `%s`: it is spelled `%s` now (the same key in kiwi and "
                                         "kiwi-worker)",
                                         origin, key, kiwi__settings[i].key);
    return kiwi_error_make_code (err, code,
                                 "%s: unknown key `%s`: neither kiwi nor kiwi-worker reads it (`kiwi --help-config` "
                                 "and `kiwi-worker --help-config` list their settings)",
                                 origin, key);
}

int
kiwi_settings_kafka_props (const kiwi_settings *s, kiwi_strv *pairs, kiwi_error_t *err)
{
    for (size_t i = 0; i + 1 < s->kafka_props.n; i += 2)
        if (kiwi_strv_add (pairs, s->kafka_props.v[i]) < 0 || kiwi_strv_add (pairs, s->kafka_props.v[i + 1]) < 0)
            return kiwi_error_make (err, ENOMEM, "kafka properties");
    if (kiwi_kafka_props_parse (s->kafka_properties, "kafka.properties", pairs, err) < 0) {
        const char *o = s->origin[KIWI_SETTING_KAFKA_PROPERTIES];
        return o ? kiwi_error_wrap (err, "from %s", o) : -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- printing */

void
kiwi_settings_help (FILE *out, unsigned program)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &kiwi__settings[i];
        if (!(d->programs & program))
            continue;
        if (d->flag != NULL)
            fprintf (out, "  --%s=VALUE  (%s; config key %s)\n", d->flag, d->env, d->key);
        else
            fprintf (out, "  %s  (config key %s; no flag)\n", d->env, d->key);
        char buf[160];
        fprintf (out, "        %s [%s]", d->help, kiwi_setting_accepted (d, buf, sizeof buf));
        const char *def = kiwi_setting_default (d, program);
        if (d->type == KIWI_SETTING_TYPE_SECRET || def == NULL || *def == '\0')
            fputs (".\n", out);
        else
            fprintf (out, ". Default: %s\n", def);
    }
}

void
kiwi_settings_dump (const kiwi_settings *s, unsigned program, FILE *out)
{
    /* The output is itself a config file: each "key = value" after a
     * comment naming its environment variable and origin. */
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &kiwi__settings[i];
        if (!(d->programs & program))
            continue;
        fprintf (out, "# %s, from %s\n", d->env, s->origin[i] ? s->origin[i] : "unset");
        const void *field = (const char *) s + d->offset;
        switch (d->type) {
        case KIWI_SETTING_TYPE_INT:
            fprintf (out, "%s = %lld\n", d->key, (long long) *(const int64_t *) field);
            continue;
        case KIWI_SETTING_TYPE_NUM:
            fprintf (out, "%s = %g\n", d->key, *(const double *) field);
            continue;
        case KIWI_SETTING_TYPE_SECONDS:
        case KIWI_SETTING_TYPE_BYTES:
            fprintf (out, "%s = %llu\n", d->key, (unsigned long long) *(const uint64_t *) field);
            continue;
        case KIWI_SETTING_TYPE_BOOL:
            fprintf (out, "%s = %s\n", d->key, *(const bool *) field ? "true" : "false");
            continue;
        default:
            break;
        }
        const char *v = *(char *const *) field;
        if (d->type == KIWI_SETTING_TYPE_SECRET)
            fprintf (out, "# %s = %s\n", d->key, v && *v ? "(set, not shown)" : "(empty)");
        else if (d->id == KIWI_SETTING_CONFIG) /* a config file cannot name one */
            fprintf (out, "# %s = %s\n", d->key, v ? v : "");
        else
            fprintf (out, "%s = %s\n", d->key, v ? v : "");
    }
    for (size_t i = 0; i + 1 < s->kafka_props.n; i += 2)
        if (kiwi_kafka_prop_is_secret (s->kafka_props.v[i]))
            fprintf (out, "# %s%s = (set, not shown)\n", KIWI_KAFKA_PROPERTY_PREFIX, s->kafka_props.v[i]);
        else
            fprintf (out, "%s%s = %s\n", KIWI_KAFKA_PROPERTY_PREFIX, s->kafka_props.v[i], s->kafka_props.v[i + 1]);
}
