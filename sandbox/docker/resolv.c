/*
 * resolv.c: see resolv.h.
 */
#include "sandbox/docker/resolv.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The address of a "nameserver ADDR" line, or NULL for another line. */
static const char *
nameserver_addr (const char *line, char *buf, size_t cap)
{
    if (strncmp (line, "nameserver", 10) != 0 || (line[10] != ' ' && line[10] != '\t'))
        return NULL;
    if (sscanf (line + 10, " %63s", buf) != 1 || cap < 64)
        return NULL;
    return buf;
}

static bool
is_loopback (const char *addr)
{
    return strncmp (addr, "127.", 4) == 0 || strcmp (addr, "::1") == 0 || strncmp (addr, "::ffff:127.", 11) == 0;
}

/* "search ..." and "options ...": kept as they are. */
static bool
kept_other (const char *line)
{
    static const char *const keys[] = { "search", "options" };
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        size_t k = strlen (keys[i]);
        if (strncmp (line, keys[i], k) == 0 && (line[k] == ' ' || line[k] == '\t'))
            return true;
    }
    return false;
}

int
kiwi_resolv_write_upstream (const char *src, const char *dst, kiwi_error_t *err)
{
    FILE *in = fopen (src, "re");
    if (in == NULL)
        return kiwi_error_make (err, errno, "reading %s", src);
    char tmp[4096];
    if (snprintf (tmp, sizeof tmp, "%s.tmp.%d", dst, (int) getpid ()) >= (int) sizeof tmp) {
        fclose (in);
        return kiwi_error_make (err, ENAMETOOLONG, "resolver file path %s", dst);
    }
    FILE *out = fopen (tmp, "we");
    if (out == NULL) {
        int e = errno;
        fclose (in);
        return kiwi_error_make (err, e, "writing %s", tmp);
    }
    fputs ("# Phase A's resolvers under gVisor: the host's, without loopback ones (written by kiwi)\n", out);
    char line[1024], addr[64];
    int n = 0;
    while (fgets (line, sizeof line, in) != NULL) {
        const char *a = nameserver_addr (line, addr, sizeof addr);
        if (a != NULL) {
            if (!is_loopback (a)) {
                fprintf (out, "nameserver %s\n", a);
                n++;
            }
        } else if (kept_other (line))
            fputs (line, out);
    }
    int e = ferror (in) ? EIO : 0;
    fclose (in);
    if (e == 0 && fchmod (fileno (out), 0644) < 0)
        e = errno;
    if (fclose (out) != 0 && e == 0)
        e = errno;
    if (e != 0) {
        unlink (tmp);
        return kiwi_error_make (err, e, "writing %s", tmp);
    }
    if (rename (tmp, dst) < 0) {
        e = errno;
        unlink (tmp);
        return kiwi_error_make (err, e, "renaming %s to %s", tmp, dst);
    }
    return n;
}
