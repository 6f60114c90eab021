/*
 * wire.c: what every part of the wire machinery reports with (see
 * wire-internal.h): the "<path>: <rule>" errors, the field paths they name,
 * and the names of msgpack types for "expected X, got Y". The pre-scan and
 * field readers are in wire-decode.c, the value rules in wire-check.c, the
 * encoder in wire-encode.c.
 */
#include "schemas/wire-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ errors */

int
kiwi__fail (kiwi_error_t *err, const char *path, const char *key, const char *fmt, ...)
{
    char *m = NULL;
    va_list ap;
    va_start (ap, fmt);
    int r = vasprintf (&m, fmt, ap);
    va_end (ap);
    if (r < 0)
        return kiwi__nomem (err, path);
    if (key != NULL)
        kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s.%s: %s", path, key, m);
    else
        kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: %s", path, m);
    free (m);
    return -1;
}

int
kiwi__nomem (kiwi_error_t *err, const char *what)
{
    return kiwi_error_make (err, ENOMEM, "%s", what);
}

/* Appends src to dst (holding *len bytes), truncating at KIWI__PATH_MAX - 1. */
static void
path_append (char dst[KIWI__PATH_MAX], size_t *len, const char *src)
{
    size_t n = strlen (src);
    if (n > KIWI__PATH_MAX - 1 - *len)
        n = KIWI__PATH_MAX - 1 - *len;
    memcpy (dst + *len, src, n);
    *len += n;
    dst[*len] = '\0';
}

void
kiwi__path_copy (char dst[KIWI__PATH_MAX], const char *path)
{
    size_t len = 0;
    dst[0] = '\0';
    path_append (dst, &len, path);
}

void
kiwi__wire_path_join (char dst[KIWI__PATH_MAX], const char *path, const char *key)
{
    size_t len = 0;
    dst[0] = '\0';
    path_append (dst, &len, path);
    path_append (dst, &len, ".");
    path_append (dst, &len, key);
}

void
kiwi__path_index (char dst[KIWI__PATH_MAX], const char *path, size_t index)
{
    char num[32];
    size_t len = 0;
    snprintf (num, sizeof num, "[%zu]", index);
    dst[0] = '\0';
    path_append (dst, &len, path);
    path_append (dst, &len, num);
}

const char *
kiwi__type_name (const msgpack_object *o)
{
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        return "nil";
    case MSGPACK_OBJECT_BOOLEAN:
        return "boolean";
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return "integer";
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return "float";
    case MSGPACK_OBJECT_STR:
        return "string";
    case MSGPACK_OBJECT_BIN:
        return "binary";
    case MSGPACK_OBJECT_ARRAY:
        return "array";
    case MSGPACK_OBJECT_MAP:
        return "map";
    case MSGPACK_OBJECT_EXT:
        return "extension";
    }
    return "unknown type";
}

/* A key fit for an error message: printable ASCII, at most 48 bytes. */
void
kiwi__printable_key (char *dst, size_t cap, const char *s, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 4 < cap; i++) {
        if (i == 48) {
            memcpy (dst + o, "...", 3);
            o += 3;
            break;
        }
        unsigned char c = (unsigned char) s[i];
        dst[o++] = (c >= 0x20 && c < 0x7f) ? (char) c : '?';
    }
    dst[o] = '\0';
}
