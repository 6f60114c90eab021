/*
 * settings.c: the kiwi command's settings table, its sources and its
 * validators (see settings.h).
 */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "config-file.h"
#include "kafka-conf.h"
#include "log.h"
#include "opts.h"
#include "setting-keys.h"

/* Each setting's config-file key: the same spelling as kiwi-worker's where
 * both read it (common/setting-keys.h). */
#define KIWI__FILE_KEY_CONFIG "config"
#define KIWI__FILE_KEY_STATE_DIR "state.dir"
#define KIWI__FILE_KEY_STACK_ENV "stack.env"
#define KIWI__FILE_KEY_BROKERS "kafka.brokers"
#define KIWI__FILE_KEY_KAFKA_PROPERTIES "kafka.properties"
#define KIWI__FILE_KEY_TOPIC_TASKS "topic.tasks"
#define KIWI__FILE_KEY_TOPIC_PROGRESS "topic.progress"
#define KIWI__FILE_KEY_TOPIC_RESULTS "topic.results"
#define KIWI__FILE_KEY_TOPIC_HEARTBEATS "topic.heartbeats"
#define KIWI__FILE_KEY_TOPIC_DLQ "topic.dlq"
#define KIWI__FILE_KEY_DELIVERY_TIMEOUT "kafka.delivery_timeout"
#define KIWI__FILE_KEY_CI_TEST_COMMAND "ci.test_command"
#define KIWI__FILE_KEY_CI_GOAL "ci.goal"
#define KIWI__FILE_KEY_CI_WEBHOOK_SECRET "ci.webhook_secret"
#define KIWI__FILE_KEY_CI_MAX_BODY "ci.max_body"
#define KIWI__FILE_KEY_LOG_LEVEL "log.level"
#define KIWI__FILE_KEY_BATCH_DIR "batch.dir"
#define KIWI__FILE_KEY_PROGRESS_INTERVAL "batch.progress_interval"
#define KIWI__FILE_KEY_REFRESH "cli.refresh"
#define KIWI__FILE_KEY_CLOCK_SKEW "cli.clock_skew"
#define KIWI__FILE_KEY_GONE_AFTER "fleet.gone_after"

static const kiwi_setting_def defs[KIWI_SETTING__COUNT] = {
#define KIWI__SETTING_DEF(id_, field, env_, flag_, type_, def_, min_, max_, help_)                             \
    [KIWI_SETTING_##id_] = { .id = KIWI_SETTING_##id_, .key = KIWI__FILE_KEY_##id_, .env = env_, .flag = flag_, \
                             .type = KIWI_SETTING_TYPE_##type_, .def = def_, .min = min_, .max = max_,          \
                             .help = help_ },
    KIWI_CLI_SETTINGS (KIWI__SETTING_DEF)
#undef KIWI__SETTING_DEF
};

/* Where each value lives in the struct. */
static const size_t field_offset[KIWI_SETTING__COUNT] = {
#define KIWI__SETTING_OFF(id, field, env, flag, type, def, min, max, help)                                    \
    [KIWI_SETTING_##id] = offsetof (kiwi_cli_settings, field),
    KIWI_CLI_SETTINGS (KIWI__SETTING_OFF)
#undef KIWI__SETTING_OFF
};

static bool
is_number_type (kiwi_setting_type t)
{
    return t == KIWI_SETTING_TYPE_SECONDS || t == KIWI_SETTING_TYPE_BYTES;
}

const kiwi_setting_def *
kiwi_setting_def_get (kiwi_setting_id id)
{
    if ((int) id < 0 || id >= KIWI_SETTING__COUNT)
        return NULL;
    return &defs[id];
}

const kiwi_setting_def *
kiwi_setting_by_flag (const char *flag)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++)
        if (defs[i].flag != NULL && strcmp (defs[i].flag, flag) == 0)
            return &defs[i];
    return NULL;
}

const kiwi_setting_def *
kiwi_setting_by_key (const char *key)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++)
        if (strcmp (defs[i].key, key) == 0)
            return &defs[i];
    return NULL;
}

const char *
kiwi_setting_accepted (const kiwi_setting_def *d, char *buf, size_t cap)
{
    switch (d->type) {
    case KIWI_SETTING_TYPE_PATH:
        return "a file or directory path";
    case KIWI_SETTING_TYPE_BROKERS:
        return "host:port[,host:port...], e.g. 127.0.0.1:9092";
    case KIWI_SETTING_TYPE_TOPIC:
        return "a Kafka topic name: 1 to 249 characters of A-Z a-z 0-9 . _ -";
    case KIWI_SETTING_TYPE_TEXT:
        return "text without control characters";
    case KIWI_SETTING_TYPE_TEMPLATE:
        return "text with the placeholders {name} {sha} {branch} {url} {repo} {event}";
    case KIWI_SETTING_TYPE_SECRET:
        return "any text";
    case KIWI_SETTING_TYPE_LOGLEVEL:
        return "debug, info, warn, error";
    case KIWI_SETTING_TYPE_SECONDS:
        snprintf (buf, cap, "whole seconds from %llu to %llu", (unsigned long long) d->min,
                  (unsigned long long) d->max);
        return buf;
    case KIWI_SETTING_TYPE_BYTES:
        snprintf (buf, cap, "bytes from %llu to %llu, optionally with a K, M or G suffix",
                  (unsigned long long) d->min, (unsigned long long) d->max);
        return buf;
    }
    return "?";
}

/* ---------------------------------------------------------------- validators */

/* Each returns NULL when the value is good, else what is wrong with it. */

static const char *
check_brokers (const char *v)
{
    if (*v == '\0')
        return "empty";
    const char *p = v;
    while (*p) {
        const char *end = strchr (p, ',');
        size_t n = end ? (size_t) (end - p) : strlen (p);
        if (n == 0)
            return "empty entry";
        const char *colon = NULL;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char) p[i];
            if (isspace (c) || iscntrl (c))
                return "whitespace or control character";
            if (c == ':')
                colon = p + i;
        }
        if (colon == NULL || colon == p)
            return "entry without host:port";
        size_t plen = n - (size_t) (colon + 1 - p);
        if (plen == 0 || plen > 5)
            return "bad port";
        unsigned long port = 0;
        for (size_t i = 0; i < plen; i++) {
            if (!isdigit ((unsigned char) colon[1 + i]))
                return "port is not a number";
            port = port * 10 + (unsigned long) (colon[1 + i] - '0');
        }
        if (port == 0 || port > 65535)
            return "port out of range 1..65535";
        p += n;
        if (*p == ',')
            p++;
    }
    return NULL;
}

static const char *
check_topic (const char *v)
{
    size_t n = strlen (v);
    if (n == 0)
        return "empty";
    if (n > 249)
        return "longer than 249 characters";
    if (strcmp (v, ".") == 0 || strcmp (v, "..") == 0)
        return "\".\" and \"..\" are not topic names";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) v[i];
        if (!(isalnum (c) || c == '.' || c == '_' || c == '-'))
            return "invalid character";
    }
    return NULL;
}

static const char *
check_text (const char *v)
{
    for (const unsigned char *p = (const unsigned char *) v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "control character";
    return NULL;
}

static const char *
check_template (const char *v)
{
    const char *t = check_text (v);
    if (t != NULL)
        return t;
    static const kiwi_goal_vars probe = { "", "", "", "", "", "" };
    kiwi_error_t e = NULL;
    char *s = kiwi_goal_expand (v, &probe, &e);
    free (s);
    if (e != NULL) {
        kiwi_error_free (&e);
        return "unknown placeholder";
    }
    return NULL;
}

static const char *
check_loglevel (const char *v)
{
    kiwi_log_level l;
    return kiwi_log_level_parse (v, &l) < 0 ? "unknown level" : NULL;
}

/* Parses a number for a numeric setting. */
static const char *
parse_number (const kiwi_setting_def *d, const char *v, uint64_t *out)
{
    if (*v == '\0')
        return "empty";
    if (!isdigit ((unsigned char) *v))
        return "not a number";
    errno = 0;
    char *end = NULL;
    unsigned long long n = strtoull (v, &end, 10);
    if (errno == ERANGE)
        return "too large";
    unsigned long long mult = 1;
    if (d->type == KIWI_SETTING_TYPE_BYTES && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'K': case 'k': mult = 1024ULL; end++; break;
        case 'M': case 'm': mult = 1024ULL * 1024; end++; break;
        case 'G': case 'g': mult = 1024ULL * 1024 * 1024; end++; break;
        default: break;
        }
    }
    if (*end != '\0')
        return "not a number";
    if (n > UINT64_MAX / mult)
        return "too large";
    n *= mult;
    if (n < d->min || n > d->max)
        return "out of range";
    *out = n;
    return NULL;
}

int
kiwi_setting_check (const kiwi_setting_def *d, const char *value, const char *origin, kiwi_error_t *err)
{
    const char *why = NULL;
    uint64_t n;
    switch (d->type) {
    case KIWI_SETTING_TYPE_PATH:
    case KIWI_SETTING_TYPE_SECRET:
        break;
    case KIWI_SETTING_TYPE_BROKERS:
        why = check_brokers (value);
        break;
    case KIWI_SETTING_TYPE_TOPIC:
        why = check_topic (value);
        break;
    case KIWI_SETTING_TYPE_TEXT:
        why = check_text (value);
        break;
    case KIWI_SETTING_TYPE_TEMPLATE:
        why = check_template (value);
        break;
    case KIWI_SETTING_TYPE_LOGLEVEL:
        why = check_loglevel (value);
        break;
    case KIWI_SETTING_TYPE_SECONDS:
    case KIWI_SETTING_TYPE_BYTES:
        why = parse_number (d, value, &n);
        break;
    }
    if (why == NULL)
        return 0;
    char buf[160];
    const char *accepted = kiwi_setting_accepted (d, buf, sizeof buf);
    if (d->type == KIWI_SETTING_TYPE_SECRET)
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: invalid value (from %s): %s (accepted: %s)", d->key,
                                     origin, why, accepted);
    return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: invalid value `%s` (from %s): %s (accepted: %s)", d->key,
                                 value, origin, why, accepted);
}

/* ---------------------------------------------------------------- goal template */

char *
kiwi_goal_expand (const char *tmpl, const kiwi_goal_vars *v, kiwi_error_t *err)
{
    static const struct {
        const char *name;
        size_t off;
    } vars[] = {
        { "name", offsetof (kiwi_goal_vars, name) },     { "sha", offsetof (kiwi_goal_vars, sha) },
        { "branch", offsetof (kiwi_goal_vars, branch) }, { "url", offsetof (kiwi_goal_vars, url) },
        { "repo", offsetof (kiwi_goal_vars, repo) },     { "event", offsetof (kiwi_goal_vars, event) },
    };
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    if (f == NULL) {
        kiwi_error_make (err, errno, "expanding the goal template");
        return NULL;
    }
    for (const char *p = tmpl; *p;) {
        /* A placeholder is `{` lowercase letters or '_' `}`; any other `{`
         * is literal text. */
        size_t n = p[0] == '{' ? strspn (p + 1, "abcdefghijklmnopqrstuvwxyz_") : 0;
        if (n == 0 || p[1 + n] != '}') {
            fputc (*p++, f);
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
            if (strlen (vars[i].name) == n && strncmp (p + 1, vars[i].name, n) == 0) {
                const char *val = *(const char *const *) ((const char *) v + vars[i].off);
                fputs (val ? val : "", f);
                found = true;
                break;
            }
        if (!found) {
            fclose (f);
            free (out);
            kiwi_error_make_code (err, KIWI_CLI_EUSAGE,
                                  "goal template: unknown placeholder `%.*s` (known: {name} {sha} {branch} {url} "
                                  "{repo} {event})",
                                  (int) n + 2, p);
            return NULL;
        }
        p += n + 2;
    }
    if (fclose (f) != 0) {
        free (out);
        kiwi_error_make (err, ENOMEM, "expanding the goal template");
        return NULL;
    }
    return out;
}

/* ---------------------------------------------------------------- sources */

void
kiwi_cli_settings_init (kiwi_cli_settings *s)
{
    memset (s, 0, sizeof *s);
}

void
kiwi_cli_settings_clear (kiwi_cli_settings *s)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        if (!is_number_type (defs[i].type)) {
            char **p = (char **) ((char *) s + field_offset[i]);
            free (*p);
        }
        free (s->origin[i]);
    }
    kiwi_strv_free (&s->kafka_props);
    kiwi_cli_settings_init (s);
}

int
kiwi_cli_settings_kafka_props (const kiwi_cli_settings *s, kiwi_strv *pairs, kiwi_error_t *err)
{
    for (size_t i = 0; i + 1 < s->kafka_props.n; i += 2)
        if (kiwi_strv_add (pairs, s->kafka_props.v[i]) < 0 || kiwi_strv_add (pairs, s->kafka_props.v[i + 1]) < 0)
            return kiwi_error_make (err, ENOMEM, "kafka properties");
    if (kiwi_kafka_props_parse (s->kafka_properties, "kafka_properties", pairs, err) < 0)
        return kiwi_error_wrap (err, "from %s", s->origin[KIWI_SETTING_KAFKA_PROPERTIES]);
    return 0;
}

/* One candidate value per setting while the sources are layered. */
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
env_get (char *const *envp, const char *name)
{
    size_t n = strlen (name);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp (*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* Strips one pair of matching quotes. */
static char *
unquote (char *v)
{
    size_t n = strlen (v);
    if (n >= 2 && (v[0] == '"' || v[0] == '\'') && v[n - 1] == v[0]) {
        v[n - 1] = '\0';
        v++;
    }
    return v;
}

/* The stack env file: KEY=VALUE lines (shell syntax without expansion). A
 * setting whose environment variable is a key of the file takes its value. */
static int
read_stack_env (layer *l, const char *path, kiwi_error_t *err)
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
        const char *val = unquote (eq + 1);
        for (int i = 0; i < KIWI_SETTING__COUNT; i++)
            if (strcmp (defs[i].env, s) == 0 && i != KIWI_SETTING_STACK_ENV && i != KIWI_SETTING_CONFIG
                && i != KIWI_SETTING_STATE_DIR
                && layer_set (l, i, val, fmt ("stack env file %s", path), err) < 0)
                return -1;
    }
    return 0;
}

/* One entry of the config file (common/config-file.h): a setting of this
 * table, a kafka.property.NAME, or a key of kiwi-worker's (ignored: the
 * file may be shared); any other key is refused (common/setting-keys.h). */
typedef struct {
    layer *l;
    kiwi_strv *kafka_props;
} config_ctx;

static int
config_entry (const char *key, const char *val, const char *origin, void *ud, kiwi_error_t *err)
{
    config_ctx *c = ud;
    size_t pl = strlen (KIWI_CLI_KAFKA_PROPERTY_PREFIX);
    if (strncmp (key, KIWI_CLI_KAFKA_PROPERTY_PREFIX, pl) == 0) {
        const char *name = key + pl;
        if (*name == '\0' || strspn (name, "abcdefghijklmnopqrstuvwxyz0123456789._-") != strlen (name))
            return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: `%s` is not a librdkafka property name", origin,
                                         name);
        if (kiwi_strv_add (c->kafka_props, name) < 0 || kiwi_strv_add (c->kafka_props, val) < 0)
            return kiwi_error_make (err, ENOMEM, "%s", origin);
        return 0;
    }
    const kiwi_setting_def *d = kiwi_setting_by_key (key);
    if (d == NULL) {
        if (kiwi_setting_key_foreign (key, KIWI_PROGRAM_KIWI, "kiwi", origin, KIWI_CLI_EUSAGE, err) < 0)
            return -1;
        kiwi_debug ("%s: `%s` is kiwi-worker's; ignored", origin, key);
        return 0;
    }
    if (d->id == KIWI_SETTING_CONFIG)
        return kiwi_error_make_code (err, KIWI_CLI_EUSAGE, "%s: `config` cannot be set in a config file", origin);
    return layer_set (c->l, d->id, val, strdup (origin), err);
}

static int
read_config (layer *l, kiwi_strv *kafka_props, const char *path, kiwi_error_t *err)
{
    config_ctx c = { l, kafka_props };
    return kiwi_config_file_read (path, KIWI_CLI_EUSAGE, config_entry, &c, err);
}

/* The winning value of setting i among the layers, highest first. */
static int
top (layer *const *ls, size_t n, int i)
{
    for (size_t k = n; k-- > 0;)
        if (ls[k]->value[i] != NULL)
            return (int) k;
    return -1;
}

int
kiwi_cli_settings_load (kiwi_cli_settings *s, const char *const flags[KIWI_SETTING__COUNT], char *const *envp,
                        kiwi_error_t *err)
{
    layer dflt = { 0 }, stack = { 0 }, conf = { 0 }, env = { 0 }, flag = { 0 };
    kiwi_strv file_props = KIWI_STRV_INIT;
    layer *ls[] = { &dflt, &stack, &conf, &env, &flag };
    const size_t nl = sizeof ls / sizeof ls[0];
    cleanup_free char *stack_path = NULL;
    int ret = -1;

    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        if (layer_set (&dflt, i, defs[i].def, strdup ("default"), err) < 0)
            goto out;
        const char *e = env_get (envp, defs[i].env);
        if (e != NULL && layer_set (&env, i, e, fmt ("environment %s", defs[i].env), err) < 0)
            goto out;
        if (flags != NULL && flags[i] != NULL
            && layer_set (&flag, i, flags[i], fmt ("flag --%s", defs[i].flag), err) < 0)
            goto out;
    }

    /* The config file is named by a flag or the environment only. */
    int k = top (ls, nl, KIWI_SETTING_CONFIG);
    const char *config = ls[k]->value[KIWI_SETTING_CONFIG];
    if (*config != '\0' && read_config (&conf, &file_props, config, err) < 0)
        goto out;

    /* The stack env file: its path, or the state directory's, may come from
     * any source above it. */
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
    if (read_stack_env (&stack, stack_env, err) < 0)
        goto out;

    kiwi_cli_settings_clear (s);
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        k = top (ls, nl, i);
        const char *v = ls[k]->value[i];
        if (kiwi_setting_check (&defs[i], v, ls[k]->origin[i], err) < 0)
            goto out;
        if (is_number_type (defs[i].type)) {
            uint64_t n = 0;
            parse_number (&defs[i], v, &n);
            *(uint64_t *) ((char *) s + field_offset[i]) = n;
        } else {
            char *copy = strdup (v);
            if (copy == NULL) {
                kiwi_error_make (err, ENOMEM, "loading settings");
                goto out;
            }
            *(char **) ((char *) s + field_offset[i]) = copy;
        }
        s->origin[i] = steal_pointer (&ls[k]->origin[i]);
    }
    s->kafka_props = file_props; /* now owned by s */
    file_props = (kiwi_strv) KIWI_STRV_INIT;
    ret = 0;
out:
    kiwi_strv_free (&file_props);
    for (size_t i = 0; i < nl; i++)
        layer_clear (ls[i]);
    if (ret < 0)
        kiwi_cli_settings_clear (s);
    return ret;
}

/* ---------------------------------------------------------------- printing */

void
kiwi_cli_settings_flags (FILE *out)
{
    int col = 2;
    fputs ("  ", out);
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        if (defs[i].flag == NULL)
            continue;
        int w = (int) strlen (defs[i].flag) + 3;
        if (col > 2 && col + w > 96) {
            fputs ("\n  ", out);
            col = 2;
        } else if (col > 2)
            fputc (' ', out);
        fprintf (out, "--%s", defs[i].flag);
        col += w;
    }
    fputs ("\n  (each also set by its environment variable or the config file; see `kiwi --help`)\n", out);
}

void
kiwi_cli_settings_dump (const kiwi_cli_settings *s, FILE *out)
{
    /* The output is itself a config file: each "key = value" after a
     * comment naming its environment variable and origin. */
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &defs[i];
        fprintf (out, "# %s, from %s\n", d->env, s->origin[i] ? s->origin[i] : "unset");
        if (is_number_type (d->type)) {
            fprintf (out, "%s = %llu\n", d->key,
                     (unsigned long long) *(const uint64_t *) ((const char *) s + field_offset[i]));
            continue;
        }
        const char *v = *(char *const *) ((const char *) s + field_offset[i]);
        if (d->type == KIWI_SETTING_TYPE_SECRET)
            fprintf (out, "# %s = %s\n", d->key, v && *v ? "(set, not shown)" : "(empty)");
        else if (d->id == KIWI_SETTING_CONFIG) /* a config file cannot name one */
            fprintf (out, "# %s = %s\n", d->key, v ? v : "");
        else
            fprintf (out, "%s = %s\n", d->key, v ? v : "");
    }
    for (size_t i = 0; i + 1 < s->kafka_props.n; i += 2)
        if (kiwi_kafka_prop_is_secret (s->kafka_props.v[i]))
            fprintf (out, "# %s%s = (set, not shown)\n", KIWI_CLI_KAFKA_PROPERTY_PREFIX, s->kafka_props.v[i]);
        else
            fprintf (out, "%s%s = %s\n", KIWI_CLI_KAFKA_PROPERTY_PREFIX, s->kafka_props.v[i], s->kafka_props.v[i + 1]);
}

void
kiwi_cli_settings_help (FILE *out)
{
    for (int i = 0; i < KIWI_SETTING__COUNT; i++) {
        const kiwi_setting_def *d = &defs[i];
        if (d->flag != NULL)
            fprintf (out, "  --%s=VALUE  (%s; config key %s)\n", d->flag, d->env, d->key);
        else
            fprintf (out, "  %s  (config key %s; no flag)\n", d->env, d->key);
        fprintf (out, "        %s", d->help);
        if (d->type == KIWI_SETTING_TYPE_SECRET || *d->def == '\0')
            fputs (".\n", out);
        else
            fprintf (out, ". Default: %s\n", d->def);
    }
}
