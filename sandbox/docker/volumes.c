/*
 * volumes.c: which of an image's volumes get a mount of the sandbox's disk,
 * and which images are refused (see volumes.h).
 */
#include "sandbox/docker/volumes.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"
#include "sandbox/sandbox.h"

/* The kernel's filesystems: a mount there is the runtime's, never an
 * image's. */
static const char *const kernel_dirs[] = { "/proc", "/sys", "/dev", NULL };

/* A hostile key as an error message may show it: control characters as
 * `?`, cut after 80 bytes. */
static const char *
shown (const char *key, char *buf, size_t size)
{
    size_t n = 0;
    for (; key[n] != '\0' && n < 80 && n + 4 < size; n++)
        buf[n] = (unsigned char) key[n] < 0x20 || key[n] == 0x7f ? '?' : key[n];
    snprintf (buf + n, size - n, "%s", key[n] != '\0' ? "..." : "");
    return buf;
}

/* True when `path` is `dir` or lies inside it (both clean). */
static bool
within (const char *path, const char *dir)
{
    size_t n = strlen (dir);
    return strncmp (path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Writes the clean form of the absolute `key` into `out` (size at least
 * strlen (key) + 2): repeated slashes, trailing slashes and `.` components
 * dropped, as Go's path.Clean does to a path without `..`. Returns the
 * reason it cannot, or NULL. */
static const char *
clean (const char *key, char *out)
{
    if (key[0] != '/')
        return "is not an absolute path";
    size_t o = 0;
    for (const char *p = key; *p != '\0';) {
        while (*p == '/')
            p++;
        const char *end = p + strcspn (p, "/");
        size_t len = (size_t) (end - p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return "names `..`";
        if (len > 0 && !(len == 1 && p[0] == '.')) {
            out[o++] = '/';
            memcpy (out + o, p, len);
            o += len;
        }
        p = end;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    return NULL;
}

/* The reason the clean path `path` cannot be masked, or NULL. */
static const char *
refusal (const char *path, const char *root)
{
    if (strcmp (path, "/") == 0)
        return "is the root: a mount there would replace the whole image";
    for (size_t i = 0; kernel_dirs[i] != NULL; i++)
        if (within (path, kernel_dirs[i]))
            return "lies in the kernel's /proc, /sys or /dev";
    if (root != NULL && within (path, root) && strcmp (path, root) != 0)
        return "lies inside the sandbox's disk, whose workspace it would hide";
    return NULL;
}

void
kiwi_volumes_free (char **masks)
{
    for (size_t i = 0; masks != NULL && masks[i] != NULL; i++)
        free (masks[i]);
    free (masks);
}

int
kiwi_volumes_plan (json_t *volumes, const char *root, const char *const *covered, char ***masks,
                   kiwi_error_t *err)
{
    *masks = NULL;
    size_t total = json_is_object (volumes) ? json_object_size (volumes) : 0;
    if (volumes != NULL && !json_is_object (volumes) && !json_is_null (volumes))
        return kiwi_error_make_code (err, KIWI_SBE_INVALID, "the image's Config.Volumes is not an object");
    if (total > KIWI_VOLUMES_MAX)
        return kiwi_error_make_code (err, KIWI_SBE_INVALID,
                                     "the image declares %zu volumes; at most %d are masked by the sandbox's disk",
                                     total, KIWI_VOLUMES_MAX);
    char **out = calloc (total + 1, sizeof *out);
    if (out == NULL)
        return kiwi_error_make (err, ENOMEM, "image volumes");
    size_t n = 0;
    const char *key;
    json_t *value;
    json_object_foreach (volumes, key, value) {
        (void) value;
        char buf[100];
        size_t len = strlen (key);
        const char *why = NULL;
        if (len > KIWI_VOLUME_PATH_MAX) {
            kiwi_volumes_free (out);
            return kiwi_error_make_code (err, KIWI_SBE_INVALID, "the image's volume `%s` is longer than %d bytes",
                                         shown (key, buf, sizeof buf), KIWI_VOLUME_PATH_MAX);
        }
        for (size_t i = 0; why == NULL && i < len; i++)
            if ((unsigned char) key[i] < 0x20 || key[i] == 0x7f)
                why = "holds a control character";
        char path[KIWI_VOLUME_PATH_MAX + 2];
        if (why == NULL)
            why = clean (key, path);
        if (why == NULL)
            why = refusal (path, root);
        if (why != NULL) {
            kiwi_volumes_free (out);
            return kiwi_error_make_code (err, KIWI_SBE_INVALID, "the image's volume `%s` %s",
                                         shown (key, buf, sizeof buf), why);
        }
        /* out stays NULL-terminated: calloc'd one longer than the keys */
        if (kiwi_str_listed (covered, path) || kiwi_str_listed ((const char *const *) out, path))
            continue;
        if ((out[n] = strdup (path)) == NULL) {
            kiwi_volumes_free (out);
            return kiwi_error_make (err, ENOMEM, "image volumes");
        }
        n++;
    }
    *masks = out;
    return 0;
}
