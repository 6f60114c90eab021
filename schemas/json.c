/*
 * json.c: a small JSON writer for the messages' to_json functions, and
 * kiwi_msgpack_to_json(), which renders any msgpack value for `kiwi tail`.
 *
 * Strings are escaped so that any bytes give valid JSON: quote, backslash and
 * control characters (including DEL) are escaped, U+2028 and U+2029 too (for
 * JavaScript consumers), and each maximal invalid UTF-8 subsequence becomes
 * one \ufffd (the Unicode recommendation, as Python and browsers decode).
 */
#include "schemas/wire-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"

void
kiwi__json_init (kiwi__json *j)
{
    memset (j, 0, sizeof *j);
}

void
kiwi__json_destroy (kiwi__json *j)
{
    kiwi_buf_free (&j->out);
}

static void
put (kiwi__json *j, const char *s, size_t n)
{
    if (!j->failed && kiwi_buf_append (&j->out, s, n, NULL) < 0)
        j->failed = true;
}

static void
puts_ (kiwi__json *j, const char *s)
{
    put (j, s, strlen (s));
}

/* Separator before a value: none after a key, a comma between array items. */
static void
pre_value (kiwi__json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth > 0) {
        if (!j->first[j->depth])
            put (j, ",", 1);
        j->first[j->depth] = false;
    }
}

static void
open_ (kiwi__json *j, const char *c)
{
    pre_value (j);
    put (j, c, 1);
    if (j->depth >= KIWI__JSON_MAX_DEPTH) {
        j->failed = true;
        return;
    }
    j->depth++;
    j->first[j->depth] = true;
}

static void
close_ (kiwi__json *j, const char *c)
{
    put (j, c, 1);
    if (j->depth > 0)
        j->depth--;
}

void
kiwi__json_object_begin (kiwi__json *j)
{
    open_ (j, "{");
}

void
kiwi__json_object_end (kiwi__json *j)
{
    close_ (j, "}");
}

void
kiwi__json_array_begin (kiwi__json *j)
{
    open_ (j, "[");
}

void
kiwi__json_array_end (kiwi__json *j)
{
    close_ (j, "]");
}

/* How many bytes one U+FFFD replaces at an invalid sequence: the longest
 * prefix of a well-formed sequence (at least 1), as the Unicode standard
 * recommends and Python's and browsers' decoders do. */
static size_t
invalid_run (const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    size_t need;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        need = 1;
    } else if (c >= 0xe0 && c <= 0xef) {
        need = 2;
        if (c == 0xe0)
            lo = 0xa0;
        if (c == 0xed)
            hi = 0x9f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        need = 3;
        if (c == 0xf0)
            lo = 0x90;
        if (c == 0xf4)
            hi = 0x8f;
    } else {
        return 1;
    }
    if (n < 2 || p[1] < lo || p[1] > hi)
        return 1;
    size_t i = 2;
    while (i <= need && i < n && (p[i] & 0xc0) == 0x80)
        i++;
    return i;
}

static void
escaped (kiwi__json *j, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *) s;
    size_t run = 0; /* start of bytes to copy verbatim */
    size_t i = 0;

    put (j, "\"", 1);
    while (i < n) {
        unsigned char c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = kiwi__utf8_seq (p + i, n - i);
            bool line_sep = k == 3 && c == 0xe2 && p[i + 1] == 0x80 && (p[i + 2] == 0xa8 || p[i + 2] == 0xa9);
            if (k > 0 && !line_sep) {
                i += k;
                continue;
            }
            put (j, s + run, i - run);
            if (line_sep) {
                puts_ (j, p[i + 2] == 0xa8 ? "\\u2028" : "\\u2029");
                i += 3;
            } else {
                puts_ (j, "\\ufffd");
                i += invalid_run (p + i, n - i);
            }
            run = i;
            continue;
        }
        put (j, s + run, i - run);
        switch (c) {
        case '"': puts_ (j, "\\\""); break;
        case '\\': puts_ (j, "\\\\"); break;
        case '\n': puts_ (j, "\\n"); break;
        case '\r': puts_ (j, "\\r"); break;
        case '\t': puts_ (j, "\\t"); break;
        case '\b': puts_ (j, "\\b"); break;
        case '\f': puts_ (j, "\\f"); break;
        default: {
            char u[7] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15], 0 };
            put (j, u, 6);
        }
        }
        i++;
        run = i;
    }
    put (j, s + run, i - run);
    put (j, "\"", 1);
}

void
kiwi__json_key_n (kiwi__json *j, const char *key, size_t len)
{
    if (j->depth > 0) {
        if (!j->first[j->depth])
            put (j, ",", 1);
        j->first[j->depth] = false;
    }
    escaped (j, key, len);
    put (j, ":", 1);
    j->after_key = true;
}

void
kiwi__json_key (kiwi__json *j, const char *key)
{
    kiwi__json_key_n (j, key, strlen (key));
}

void
kiwi__json_str_n (kiwi__json *j, const char *s, size_t len)
{
    pre_value (j);
    if (s == NULL)
        puts_ (j, "null");
    else
        escaped (j, s, len);
}

void
kiwi__json_str (kiwi__json *j, const char *s)
{
    kiwi__json_str_n (j, s, s != NULL ? strlen (s) : 0);
}

/* One integer value, written as printf writes it. */
static void number (kiwi__json *j, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
number (kiwi__json *j, const char *fmt, ...)
{
    char b[24];
    va_list ap;
    pre_value (j);
    va_start (ap, fmt);
    int n = vsnprintf (b, sizeof b, fmt, ap);
    va_end (ap);
    put (j, b, (size_t) n);
}

void
kiwi__json_u64 (kiwi__json *j, uint64_t v)
{
    number (j, "%" PRIu64, v);
}

void
kiwi__json_i64 (kiwi__json *j, int64_t v)
{
    number (j, "%" PRId64, v);
}

void
kiwi__json_bool (kiwi__json *j, bool v)
{
    pre_value (j);
    puts_ (j, v ? "true" : "false");
}

void
kiwi__json_null (kiwi__json *j)
{
    pre_value (j);
    puts_ (j, "null");
}

void
kiwi__json_double (kiwi__json *j, double v)
{
    char b[40];
    pre_value (j);
    if (!isfinite (v)) {
        puts_ (j, "null");
        return;
    }
    int n = snprintf (b, sizeof b, "%.17g", v);
    /* Keep it a float for JSON readers: 3 → 3.0, -0 → -0.0. */
    if (strpbrk (b, ".e") == NULL && n + 2 < (int) sizeof b) {
        memcpy (b + n, ".0", 3);
        n += 2;
    }
    put (j, b, (size_t) n);
}

void
kiwi__json_base64 (kiwi__json *j, const char *p, size_t n)
{
    /* in pieces of 189 bytes: 252 characters each */
    char chunk[256];
    pre_value (j);
    put (j, "\"", 1);
    for (size_t i = 0; i < n; i += 189) {
        size_t k = n - i < 189 ? n - i : 189;
        put (j, chunk, kiwi_base64_into (chunk, p + i, k));
    }
    put (j, "\"", 1);
}

KIWI__KEYED_WRITERS (kiwi__json, kiwi__json)

int
kiwi__json_msgpack (kiwi__json *j, const msgpack_object *o, int depth, kiwi_error_t *err)
{
    /* Only containers count as levels, as in kiwi__scan(). */
    if ((o->type == MSGPACK_OBJECT_ARRAY || o->type == MSGPACK_OBJECT_MAP) && depth > KIWI_WIRE_MAX_DEPTH)
        return kiwi__fail (err, "msgpack", NULL, "nested deeper than %d levels", KIWI_WIRE_MAX_DEPTH);

    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        kiwi__json_null (j);
        return 0;
    case MSGPACK_OBJECT_BOOLEAN:
        kiwi__json_bool (j, o->via.boolean);
        return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        kiwi__json_u64 (j, o->via.u64);
        return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        kiwi__json_i64 (j, o->via.i64);
        return 0;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        kiwi__json_double (j, o->via.f64);
        return 0;
    case MSGPACK_OBJECT_STR:
        kiwi__json_str_n (j, o->via.str.size > 0 ? o->via.str.ptr : "", o->via.str.size);
        return 0;
    case MSGPACK_OBJECT_BIN:
        kiwi__json_base64 (j, o->via.bin.ptr, o->via.bin.size);
        return 0;
    case MSGPACK_OBJECT_EXT:
        kiwi__json_object_begin (j);
        kiwi__json_ki64 (j, "ext_type", o->via.ext.type);
        kiwi__json_key (j, "data");
        kiwi__json_base64 (j, o->via.ext.ptr, o->via.ext.size);
        kiwi__json_object_end (j);
        return 0;
    case MSGPACK_OBJECT_ARRAY:
        kiwi__json_array_begin (j);
        for (uint32_t i = 0; i < o->via.array.size; i++)
            if (kiwi__json_msgpack (j, &o->via.array.ptr[i], depth + 1, err) < 0)
                return -1;
        kiwi__json_array_end (j);
        return 0;
    case MSGPACK_OBJECT_MAP:
        kiwi__json_object_begin (j);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            if (k->type == MSGPACK_OBJECT_STR) {
                kiwi__json_key_n (j, k->via.str.size > 0 ? k->via.str.ptr : "", k->via.str.size);
            } else {
                /* JSON keys are strings: use the key's own JSON text. */
                kiwi__json sub;
                kiwi__json_init (&sub);
                if (kiwi__json_msgpack (&sub, k, depth + 1, err) < 0) {
                    kiwi__json_destroy (&sub);
                    return -1;
                }
                if (sub.failed)
                    j->failed = true;
                else
                    kiwi__json_key_n (j, sub.out.data, sub.out.len);
                kiwi__json_destroy (&sub);
            }
            if (kiwi__json_msgpack (j, &o->via.map.ptr[i].val, depth + 1, err) < 0)
                return -1;
        }
        kiwi__json_object_end (j);
        return 0;
    }
    return kiwi__fail (err, "msgpack", NULL, "unknown msgpack type %d", (int) o->type);
}

int
kiwi__json_finish (kiwi__json *j, const char *what, char **out, kiwi_error_t *err)
{
    if (j->failed || j->out.data == NULL) {
        kiwi__json_destroy (j);
        return kiwi_error_make (err, ENOMEM, "%s: rendering JSON", what);
    }
    *out = kiwi_buf_steal (&j->out, NULL);
    return 0;
}

int
kiwi_msgpack_to_json (const char *buf, size_t len, char **out, kiwi_error_t *err)
{
    msgpack_unpacked u;
    kiwi__json j;
    kiwi__json_init (&j);
    int r = kiwi__unpack_one (&u, buf, len, KIWI_WIRE_MAX_DEPTH, "msgpack", err);
    if (r == 0)
        r = kiwi__json_msgpack (&j, &u.data, 1, err);
    if (r == 0)
        r = kiwi__json_finish (&j, "msgpack", out, err);
    kiwi__json_destroy (&j);
    msgpack_unpacked_destroy (&u);
    return r;
}
