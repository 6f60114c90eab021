/*
 * settings-load.c: the one loader of settings.h: the sources layered,
 * lowest first (default, kiwi's stack env file, the config file, the
 * environment, flags), the winner of each row checked and stored. The only
 * place below main that reads the environment, through the envp it is
 * given; a KIWI_ variable there that is no setting is warned about
 * (settings-env.c).
 */
#include "common/settings-internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/config-file.h"
#include "common/log.h"

/* One candidate value per row while the sources are layered. */
typedef struct layer {
    char *value[KIWI_SETTING__COUNT];
    char *origin[KIWI_SETTING__COUNT];
} layer;

static void
layer_clear (layer *l)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        free (l->value[i]);
        free (l->origin[i]);
    }
}

static int
layer_set (layer *l, int i, const char *value, char *origin /* adopted */, kiwi_error_t *err)
{
    char *v = strdup (value);
    if (v == NULL || origin == NULL) {
        free (v);
        free (origin);
        return kiwi_error_make (err, ENOMEM, "loading settings");
    }
    free (l->value[i]);
    free (l->origin[i]);
    l->value[i] = v;
    l->origin[i] = origin;
    return 0;
}

static char *
fmt (const char *f, ...) __attribute__ ((format (printf, 1, 2)));

static char *
fmt (const char *f, ...)
{
    char *s = NULL;
    va_list ap;
    va_start (ap, f);
    if (vasprintf (&s, f, ap) < 0)
        s = NULL;
    va_end (ap);
    return s;
}

static const char *
env_get (const char *const *envp, const char *name)
{
    size_t n = strlen (name);
    for (const char *const *e = envp; e && *e; e++)
        if (strncmp (*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* The stack env file: KEY=VALUE lines (shell syntax without expansion). A
 * row of `program` whose environment variable is a key of the file takes
 * its value (not the rows that locate the file). */
static int
read_stack_env (layer *l, unsigned program, const char *path, kiwi_error_t *err)
{
    cleanup_fclose FILE *f = fopen (path, "r");
    if (f == NULL) {
        if (errno == ENOENT || errno == EACCES || errno == ENOTDIR)
            return 0; /* no stack here: defaults apply */
        return kiwi_error_make (err, errno, "reading the stack env file `%s`", path);
    }
    cleanup_free char *line = NULL;
    size_t cap = 0;
    while (getline (&line, &cap, f) >= 0) {
        char *s = kiwi_trim (line);
        if (*s == '#' || *s == '\0')
            continue;
        if (strncmp (s, "export ", 7) == 0)
            s = kiwi_trim (s + 7);
        char *eq = strchr (s, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        const char *val = kiwi_unquote (eq + 1);
        for (int i = 0; i < KIWI_SETTING__COUNT; i++)
            if ((kiwi__settings[i].programs & program) && strcmp (kiwi__settings[i].env, s) == 0
                && i != KIWI_SETTING_STACK_ENV && i != KIWI_SETTING_CONFIG && i != KIWI_SETTING_STATE_DIR
                && layer_set (l, i, val, fmt ("stack env file %s", path), err) < 0)
                return -1;
    }
    return 0;
}

typedef struct {
    layer *l;
    kiwi_settings *s;
    unsigned program;
    int code;
} config_ctx;

/* One entry of the config file: a row of this program, a kafka.property.NAME,
 * or a key of the other program's (ignored: the file may be shared); any
 * other key is refused (kiwi_setting_key_foreign). */
static int
config_entry (const char *key, const char *val, const char *origin, void *ud, kiwi_error_t *err)
{
    config_ctx *c = ud;
    if (strncmp (key, KIWI_KAFKA_PROPERTY_PREFIX, strlen (KIWI_KAFKA_PROPERTY_PREFIX)) == 0)
        return kiwi__setting_kafka_property (c->s, key, val, origin, c->code, err);
    const kiwi_setting_def *d = kiwi_setting_find (key, c->program);
    if (d == NULL || strcmp (d->key, key) != 0) {
        if (kiwi_setting_key_foreign (key, c->program, origin, c->code, err) < 0)
            return -1;
        kiwi_debug ("%s: `%s` is the other program's; ignored", origin, key);
        return 0;
    }
    if (d->id == KIWI_SETTING_CONFIG)
        return kiwi_error_make_code (err, c->code, "%s: `config` cannot be set in a config file", origin);
    return layer_set (c->l, d->id, val, strdup (origin), err);
}

/* The winning value of row i among the layers, highest first. */
static int
top (layer *const *ls, size_t n, int i)
{
    for (size_t k = n; k-- > 0;)
        if (ls[k]->value[i] != NULL)
            return (int) k;
    return -1;
}

/* What the loader derives: kiwi-worker's git token (the variable
 * git.token_var names), kiwi's batch directory default. */
static int
derive (kiwi_settings *s, unsigned program, const char *const *envp, kiwi_error_t *err)
{
    if (program == KIWI_PROGRAM_WORKER && s->git_token_var != NULL) {
        const char *t = env_get (envp, s->git_token_var);
        if (t != NULL && (s->git_token = strdup (t)) == NULL)
            return kiwi_error_make (err, ENOMEM, "loading settings");
    }
    if (program == KIWI_PROGRAM_KIWI && (s->batch_dir == NULL || *s->batch_dir == '\0')) {
        const char *home = env_get (envp, "HOME");
        char *d = home && *home ? fmt ("%s/.kiwi/batches", home) : NULL;
        if (home && *home && d == NULL)
            return kiwi_error_make (err, ENOMEM, "loading settings");
        if (d != NULL) {
            free (s->batch_dir);
            s->batch_dir = d;
        }
    }
    return 0;
}

int
kiwi_settings_load (kiwi_settings *s, unsigned program, const char *const flags[KIWI_SETTING__COUNT],
                    const char *const *envp, int code, kiwi_error_t *err)
{
    layer dflt = { 0 }, stack = { 0 }, conf = { 0 }, env = { 0 }, flag = { 0 };
    layer *ls[] = { &dflt, &stack, &conf, &env, &flag };
    const size_t nl = sizeof ls / sizeof ls[0];
    cleanup_free char *stack_path = NULL;
    int ret = -1;

    kiwi_settings_clear (s);
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &kiwi__settings[i];
        if (!(d->programs & program))
            continue;
        const char *def = kiwi_setting_default (d, program);
        if (def != NULL && layer_set (&dflt, i, def, strdup ("default"), err) < 0)
            goto out;
        /* the runtime's alias first: the primary name wins over it */
        const char *e = NULL;
        if (i == KIWI_SETTING_SANDBOX && (e = env_get (envp, "KIWI_SANDBOX_RUNTIME")) != NULL
            && layer_set (&env, i, e, strdup ("environment KIWI_SANDBOX_RUNTIME"), err) < 0)
            goto out;
        if ((e = env_get (envp, d->env)) != NULL && layer_set (&env, i, e, fmt ("environment %s", d->env), err) < 0)
            goto out;
        if (flags != NULL && flags[i] != NULL
            && layer_set (&flag, i, flags[i], fmt ("flag --%s", d->flag ? d->flag : d->key), err) < 0)
            goto out;
    }

    /* The config file is named by a flag or the environment only. */
    int k = top (ls, nl, KIWI_SETTING_CONFIG);
    const char *config = k >= 0 ? ls[k]->value[KIWI_SETTING_CONFIG] : "";
    config_ctx cc = { &conf, s, program, code };
    if (*config != '\0' && kiwi_config_file_read (config, code, config_entry, &cc, err) < 0)
        goto out;

    /* kiwi's stack env file: its path, or the state directory's, may come
     * from any source above it. */
    if (program == KIWI_PROGRAM_KIWI) {
        k = top (ls, nl, KIWI_SETTING_STACK_ENV);
        const char *stack_env = ls[k]->value[KIWI_SETTING_STACK_ENV];
        if (*stack_env == '\0') {
            k = top (ls, nl, KIWI_SETTING_STATE_DIR);
            stack_path = fmt ("%s/stack.env", ls[k]->value[KIWI_SETTING_STATE_DIR]);
            if (stack_path == NULL) {
                kiwi_error_make (err, ENOMEM, "loading settings");
                goto out;
            }
            stack_env = stack_path;
        }
        if (read_stack_env (&stack, program, stack_env, err) < 0)
            goto out;
    }

    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        k = top (ls, nl, i);
        if (k < 0)
            continue;
        const char *v = ls[k]->value[i];
        if (kiwi_setting_check (&kiwi__settings[i], v, ls[k]->origin[i], code, err) < 0)
            goto out;
        char *origin = ls[k]->origin[i];
        ls[k]->origin[i] = NULL; /* now owned by s */
        if (kiwi__setting_store (s, &kiwi__settings[i], v, origin, err) < 0)
            goto out;
    }
    ret = derive (s, program, envp, err);
    if (ret == 0)
        kiwi__settings_env_warn (envp, s->git_token_var ? s->git_token_var : env_get (envp, "KIWI_GIT_TOKEN_VAR"));
out:
    for (size_t i = 0; i < nl; i++)
        layer_clear (ls[i]);
    if (ret < 0)
        kiwi_settings_clear (s);
    return ret;
}
