/*
 * util.c: what every part of the tar code shares (archive.h,
 * archive-internal.h): the byte buffer archives are built in, names made
 * safe for messages, the entry-type names, the writer's default options and
 * the name check extraction and the builders apply.
 */
#include "sandbox/archive/archive.h"
#include "sandbox/archive/archive-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/enum.h"
#include "common/cleanup.h"

/* -------------------------------------------------------------------------
 * Names in messages (archive-internal.h).
 */

kiwi__shown
kiwi__show (const char *name)
{
    kiwi__shown out;
    size_t o = 0;
    const size_t cap = sizeof out.s;
    if (name == NULL)
        name = "";
    for (const unsigned char *p = (const unsigned char *) name; *p; p++) {
        if (o + 8 >= cap) {
            memcpy (out.s + o, "...", 4);
            return out;
        }
        if (*p < 0x20 || *p == 0x7f || *p == '\\')
            o += (size_t) snprintf (out.s + o, cap - o, "\\x%02x", *p);
        else
            out.s[o++] = (char) *p;
    }
    out.s[o] = '\0';
    return out;
}

/* A name from a fixed-width header field (not necessarily NUL-terminated). */
kiwi__shown
kiwi__show_field (const unsigned char *f, size_t w)
{
    char tmp[156];
    size_t n = strnlen ((const char *) f, w < sizeof tmp ? w : sizeof tmp - 1);
    memcpy (tmp, f, n);
    tmp[n] = '\0';
    return kiwi__show (tmp);
}

/* -------------------------------------------------------------------------
 * Writer: headers.
 */
KIWI_ENUM_STR_FN (kiwi_tar_type_str, kiwi_tar_type, KIWI_TAR_TYPES)

void
kiwi_archive_opts_init (kiwi_archive_opts *opts)
{
    memset (opts, 0, sizeof *opts);
    opts->uid = 1000;
    opts->gid = 1000;
    opts->max_bytes = KIWI_ARCHIVE_DEFAULT_MAX_BYTES;
    opts->mtime_mode = KIWI_ARCHIVE_MTIME_REAL;
}

const kiwi_archive_opts *
kiwi__archive_opts_or_default (const kiwi_archive_opts *opts, kiwi_archive_opts *storage)
{
    if (opts)
        return opts;
    kiwi_archive_opts_init (storage);
    return storage;
}

/* -------------------------------------------------------------------------
 * Names.
 */
int
kiwi__archive_clean_path (const char *name, unsigned strip, char **out, kiwi_error_t *err)
{
    *out = NULL;
    if (name == NULL || name[0] == '\0')
        return kiwi_error_make (err, 0, "archive entry with an empty name");
    if (name[0] == '/')
        return kiwi_error_make (err, 0, "archive entry `%s`: absolute path", kiwi__show (name).s);
    size_t n = strlen (name);
    cleanup_free char *res = malloc (n + 1);
    if (res == NULL)
        return kiwi_error_make (err, ENOMEM, "archive entry `%s`", kiwi__show (name).s);
    size_t o = 0;
    unsigned skipped = 0;
    const char *p = name;
    while (*p) {
        const char *end = strchr (p, '/');
        size_t len = end ? (size_t) (end - p) : strlen (p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return kiwi_error_make (err, 0, "archive entry `%s`: path contains a `..` component", kiwi__show (name).s);
        if (len > 0 && !(len == 1 && p[0] == '.')) {
            if (skipped < strip) {
                skipped++;
            } else {
                if (o > 0)
                    res[o++] = '/';
                memcpy (res + o, p, len);
                o += len;
            }
        }
        p += len;
        if (*p == '/')
            p++;
    }
    if (o == 0)
        return 0;
    res[o] = '\0';
    *out = steal_pointer (&res);
    return 0;
}
