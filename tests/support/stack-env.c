/*
 * stack-env.c: reading ops/stack.sh's env file for integration tests.
 */
#include "stack-env.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int loaded;

static void
load (void)
{
    if (loaded)
        return;
    loaded = 1;
    const char *path = getenv ("KIWI_STACK_ENV");
    char buf[4096];
    if (path == NULL) {
        const char *state = getenv ("KIWI_STATE_DIR");
        snprintf (buf, sizeof buf, "%s/stack.env", state ? state : "/var/lib/kiwi");
        path = buf;
    }
    FILE *f = fopen (path, "r");
    if (f == NULL)
        return;
    char line[4096];
    while (fgets (line, sizeof line, f)) {
        line[strcspn (line, "\r\n")] = '\0';
        if (line[0] == '#' || line[0] == '\0')
            continue;
        char *eq = strchr (line, '=');
        if (eq == NULL)
            continue;
        *eq = '\0';
        char *val = eq + 1;
        size_t vl = strlen (val);
        if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
            val[vl - 1] = '\0';
            val++;
        }
        setenv (line, val, 0); /* the environment wins */
    }
    fclose (f);
}

const char *
kiwi_test_env (const char *key)
{
    load ();
    return getenv (key);
}

const char *
kiwi_test_env_or (const char *key, const char *fallback)
{
    const char *v = kiwi_test_env (key);
    return v && *v ? v : fallback;
}

bool
kiwi_test_services_required (void)
{
    const char *v = getenv ("KIWI_REQUIRE_SERVICES");
    return v != NULL && strcmp (v, "1") == 0;
}

char *
kiwi_test_unique (const char *prefix)
{
    char *s = NULL;
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    if (asprintf (&s, "%s-%d-%ld%03ld", prefix, (int) getpid (), (long) ts.tv_sec, ts.tv_nsec / 1000000L) < 0)
        return NULL;
    return s;
}

int
kiwi_test_sh (const char *cmd, char *out, size_t cap)
{
    FILE *p = popen (cmd, "r");
    if (p == NULL)
        return -1;
    size_t n = 0;
    if (out && cap) {
        size_t r;
        while (n + 1 < cap && (r = fread (out + n, 1, cap - 1 - n, p)) > 0)
            n += r;
        out[n] = '\0';
    }
    char sink[4096];
    while (fread (sink, 1, sizeof sink, p) > 0)
        ;
    int st = pclose (p);
    return WIFEXITED (st) ? WEXITSTATUS (st) : -1;
}
