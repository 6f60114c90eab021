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

#include "common/opts.h"

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
    host[64] = '\0'; /* worker.id is at most 64 characters */
    if ((c->worker_id = strdup (host)) == NULL)
        return kiwi_error_make (err, ENOMEM, "settings");
    return 0;
}

int64_t
kiwi_worker_auto_cpus (long online)
{
    if (online < 1)
        return 1;
    return online < KIWI_WORKER_AUTO_CPUS ? online : KIWI_WORKER_AUTO_CPUS;
}

/* sandbox.cpus 0: kiwi_worker_auto_cpus of the host's online CPUs. */
static void
default_cpus (kiwi_worker_config *c)
{
    if (c->cpus == 0)
        c->cpus = kiwi_worker_auto_cpus (sysconf (_SC_NPROCESSORS_ONLN));
}

void
kiwi_worker_config_init (kiwi_worker_config *c)
{
    if (kiwi_settings_defaults (c, W, NULL) < 0)
        return;
    default_worker_id (c, NULL);
    default_cpus (c);
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

/* -sandbox-runtime (and --sandbox-runtime): the sandbox driver's old flag. */
static const kiwi_opt flag_aliases[] = {
    { KIWI_OPT_SETTING (KIWI_SETTING_SANDBOX), "sandbox-runtime", 0, "NAME", NULL },
    { 0, NULL, 0, NULL, NULL },
};

int
kiwi_worker_config_load (kiwi_worker_config *c, const char *file, const char *const *envp, int argc, char **argv,
                         int from, int *rest_index, kiwi_error_t *err)
{
    static const kiwi_opts_spec spec = {
        .opts = flag_aliases, .settings = W, .help_hint = "--help",
        .flags = KIWI_OPTS_STOP | KIWI_OPTS_ONE_DASH | KIWI_OPTS_BOOL_ALONE | KIWI_OPTS_QUOTE_ARG,
    };
    kiwi_args args = { 0 };
    if (kiwi_opts_parse (&spec, argc, argv, from, &args, err) < 0) {
        kiwi_args_clear (&args);
        return -1;
    }
    if (file != NULL)
        args.settings[KIWI_SETTING_CONFIG] = file;
    int rc = kiwi_settings_load (c, W, args.settings, envp, 0, err);
    int rest = args.end;
    kiwi_args_clear (&args);
    if (rc < 0 || default_worker_id (c, err) < 0)
        return -1;
    default_cpus (c);
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
