/*
 * config.c: kiwi-worker's side of the settings table (see config.h): its
 * flags, and what it derives after loading.
 */
#include "worker/config.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define W KIWI_PROGRAM_WORKER

/* worker.id's default: the host name, in the characters a label takes. */
static int
default_worker_id (kiwi_worker_config *c, kiwi_error_t *err)
{
    if (c->worker_id != NULL)
        return 0;
    char host[256] = "worker";
    if (gethostname (host, sizeof host - 1) == 0)
        host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '.'
              || *p == '-' || *p == '_'))
            *p = '-';
    if ((c->worker_id = strdup (host)) == NULL)
        return kiwi_error_make (err, ENOMEM, "settings");
    return 0;
}

void
kiwi_worker_config_init (kiwi_worker_config *c)
{
    if (kiwi_settings_defaults (c, W, NULL) < 0)
        return;
    default_worker_id (c, NULL);
}

void
kiwi_worker_config_clear (kiwi_worker_config *c)
{
    kiwi_settings_clear (c);
}

int
kiwi_worker_config_set (kiwi_worker_config *c, const char *name, const char *value, const char *origin,
                        kiwi_error_t *err)
{
    return kiwi_settings_set (c, W, name, value, origin, 0, err);
}

int
kiwi_worker_config_kafka_props (const kiwi_worker_config *c, kiwi_strv *pairs, kiwi_error_t *err)
{
    return kiwi_settings_kafka_props (c, pairs, err);
}

/* argv[from..) flags into flags[] by row (pointing into argv); returns the
 * index of the first argument that is not one, or -1 with *err. */
static int
parse_flags (const char *flags[KIWI_SETTING__COUNT], int argc, char **argv, int from, kiwi_error_t *err)
{
    int i = from;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || strcmp (a, "-") == 0)
            break;
        if (strcmp (a, "--") == 0)
            return i + 1;
        const char *name = a + (a[1] == '-' ? 2 : 1);
        char buf[256];
        const char *value = NULL;
        const char *eq = strchr (name, '=');
        if (eq != NULL) {
            snprintf (buf, sizeof buf, "%.*s", (int) (eq - name), name);
            name = buf;
            value = eq + 1;
        }
        const kiwi_setting_def *d = NULL;
        for (int k = 0; k < KIWI_SETTING__COUNT && d == NULL; k++) {
            const kiwi_setting_def *r = kiwi_setting_get ((kiwi_setting_id) k);
            if ((r->programs & W) && r->flag && strcmp (r->flag, name) == 0)
                d = r;
        }
        if (d == NULL && strcmp (name, "sandbox-runtime") == 0)
            d = kiwi_setting_get (KIWI_SETTING_SANDBOX);
        if (d == NULL)
            return kiwi_error_make (err, 0, "unknown option `%s` (see --help)", a);
        if (value == NULL) {
            if (d->type == KIWI_SETTING_TYPE_BOOL && (i + 1 >= argc || argv[i + 1][0] == '-'))
                value = "true";
            else if (i + 1 < argc)
                value = argv[++i];
            else
                return kiwi_error_make (err, 0, "option `%s` needs a value", a);
        }
        flags[d->id] = value;
    }
    return i;
}

int
kiwi_worker_config_load (kiwi_worker_config *c, const char *file, const char *const *envp, int argc, char **argv,
                         int from, int *rest_index, kiwi_error_t *err)
{
    const char *flags[KIWI_SETTING__COUNT] = { 0 };
    int rest = parse_flags (flags, argc, argv, from, err);
    if (rest < 0)
        return -1;
    if (file != NULL)
        flags[KIWI_SETTING_CONFIG] = file;
    if (kiwi_settings_load (c, W, flags, envp, 0, err) < 0 || default_worker_id (c, err) < 0)
        return -1;
    if (rest_index)
        *rest_index = rest;
    if (c->gc_disk_low >= c->gc_disk_high)
        return kiwi_error_make (err, 0, "KIWI_GC_DISK_LOW (%lld) must be below KIWI_GC_DISK_HIGH (%lld)",
                                (long long) c->gc_disk_low, (long long) c->gc_disk_high);
    /* the scripts' defaults are where this binary is: --print-config shows them */
    char **scripts[] = { &c->egress_script, &c->egress_proxy_script };
    const char *names[] = { "egress.sh", "proxy.sh" };
    for (int k = 0; k < 2; k++) {
        if (*scripts[k] != NULL && **scripts[k])
            continue;
        char buf[PATH_MAX];
        const char *path = kiwi_worker_libexec (NULL, names[k], buf, sizeof buf);
        if (path == NULL)
            return kiwi_error_make (err, errno, "where kiwi-worker is cannot be read, so neither can %s's default "
                                                "(set %s)", names[k], k ? "KIWI_EGRESS_PROXY_SCRIPT" : "KIWI_EGRESS_SCRIPT");
        free (*scripts[k]);
        if ((*scripts[k] = strdup (path)) == NULL)
            return kiwi_error_make (err, ENOMEM, "settings");
    }
    return 0;
}

void
kiwi_worker_config_help (FILE *out)
{
    kiwi_settings_help (out, W);
    fprintf (out, "\nAlso accepted: KIWI_SANDBOX_RUNTIME and -sandbox-runtime for the sandbox driver; a config "
                  "file with --config FILE or KIWI_CONFIG (key = value lines); in it, kafka.property.NAME = VALUE "
                  "for any librdkafka property (KIWI_KAFKA_PROPERTIES is applied after them).\n");
}

void
kiwi_worker_config_dump (const kiwi_worker_config *c, FILE *out)
{
    kiwi_settings_dump (c, W, out);
}

const char *
kiwi_worker_libexec (const char *path, const char *name, char *buf, size_t cap)
{
    if (path != NULL && *path)
        return path;
    char self[PATH_MAX];
    ssize_t n = readlink ("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return NULL;
    self[n] = '\0';
    char *slash = strrchr (self, '/');
    if (slash == NULL)
        return NULL;
    *slash = '\0';
    int w = snprintf (buf, cap, "%s/../libexec/kiwi/%s", self, name);
    if (w < 0 || (size_t) w >= cap) {
        errno = ENAMETOOLONG;
        return NULL;
    }
    return buf;
}
