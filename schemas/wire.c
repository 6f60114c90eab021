/*
 * wire.c: the shared machinery of the message modules (see wire-internal.h):
 * a non-allocating pre-scan of untrusted msgpack, typed and path-named field
 * reading on top of msgpack-c, the value rules used by every validator, and
 * an encoder whose maps and arrays count their own entries.
 */
#include "wire-internal.h"

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

/* ------------------------------------------------------------------ scanning */

static uint64_t
be_uint (const unsigned char *p, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = (v << 8) | p[i];
    return v;
}

int
kiwi__scan (const char *buf, size_t len, int max_depth, const char *what, size_t *end,
            kiwi_error_t *err)
{
    const unsigned char *p = (const unsigned char *) buf;
    uint64_t remaining[KIWI_WIRE_MAX_DEPTH]; /* entries still to come in each open container */
    int depth = 0;
    size_t pos = 0;

    if (max_depth > KIWI_WIRE_MAX_DEPTH)
        max_depth = KIWI_WIRE_MAX_DEPTH;
    if (len == 0 || p == NULL)
        return kiwi__fail (err, what, NULL, "empty message");

    for (;;) {
        if (pos >= len)
            return kiwi__fail (err, what, NULL, "truncated message (%zu bytes)", len);

        unsigned b = p[pos];
        size_t len_bytes = 0; /* size of a length field after the type byte */
        uint64_t body = 0;    /* payload bytes after the header */
        bool container = false, is_map = false, ext = false;
        uint64_t count = 0;   /* entries of a container; a map's pair is 2 */

        if (b <= 0x7f || b >= 0xe0) {
            /* positive or negative fixint */
        } else if (b <= 0x8f) {
            container = is_map = true;
            count = 2 * (b & 0x0f);
        } else if (b <= 0x9f) {
            container = true;
            count = b & 0x0f;
        } else if (b <= 0xbf) {
            body = b & 0x1f;
        } else {
            switch (b) {
            case 0xc0: case 0xc2: case 0xc3:
                break;
            case 0xc4: case 0xd9: len_bytes = 1; break;
            case 0xc5: case 0xda: len_bytes = 2; break;
            case 0xc6: case 0xdb: len_bytes = 4; break;
            case 0xc7: len_bytes = 1; ext = true; break;
            case 0xc8: len_bytes = 2; ext = true; break;
            case 0xc9: len_bytes = 4; ext = true; break;
            case 0xca: body = 4; break;
            case 0xcb: body = 8; break;
            case 0xcc: case 0xd0: body = 1; break;
            case 0xcd: case 0xd1: body = 2; break;
            case 0xce: case 0xd2: body = 4; break;
            case 0xcf: case 0xd3: body = 8; break;
            case 0xd4: body = 2; break;
            case 0xd5: body = 3; break;
            case 0xd6: body = 5; break;
            case 0xd7: body = 9; break;
            case 0xd8: body = 17; break;
            case 0xdc: len_bytes = 2; container = true; break;
            case 0xdd: len_bytes = 4; container = true; break;
            case 0xde: len_bytes = 2; container = is_map = true; break;
            case 0xdf: len_bytes = 4; container = is_map = true; break;
            default: /* 0xc1, never used */
                return kiwi__fail (err, what, NULL, "invalid msgpack: byte 0x%02x at offset %zu", b, pos);
            }
        }

        if (len_bytes > 0) {
            if (len - pos < 1 + len_bytes)
                return kiwi__fail (err, what, NULL, "truncated message (%zu bytes)", len);
            uint64_t n = be_uint (p + pos + 1, len_bytes);
            if (container)
                count = is_map ? 2 * n : n;
            else
                body = n + (ext ? 1 : 0);
        }
        size_t start = pos;
        pos += 1 + len_bytes;

        if (container) {
            if (depth + 1 > max_depth)
                return kiwi__fail (err, what, NULL, "nested deeper than %d levels", max_depth);
            if (count > len - pos)
                return kiwi__fail (err, what, NULL,
                                   "truncated message: %s at offset %zu declares %" PRIu64
                                   " entries but only %zu bytes follow",
                                   is_map ? "map" : "array", start, is_map ? count / 2 : count,
                                   len - pos);
            if (count > 0) {
                remaining[depth++] = count;
                continue;
            }
        } else {
            if (body > len - pos)
                return kiwi__fail (err, what, NULL, "truncated message (%zu bytes)", len);
            pos += body;
        }

        /* A value is complete: close every container it completes. */
        for (;;) {
            if (depth == 0) {
                *end = pos;
                return 0;
            }
            if (--remaining[depth - 1] > 0)
                break;
            depth--;
        }
    }
}

int
kiwi__unpack_one (msgpack_unpacked *u, const char *buf, size_t len, int max_depth, const char *what,
                  kiwi_error_t *err)
{
    size_t end = 0;
    msgpack_unpacked_init (u);
    if (kiwi__scan (buf, len, max_depth, what, &end, err) < 0)
        return -1;
    if (end != len)
        return kiwi__fail (err, what, NULL, "trailing bytes after message (%zu of %zu bytes used)", end,
                           len);

    size_t off = 0;
    msgpack_unpack_return r = msgpack_unpack_next (u, buf, len, &off);
    switch (r) {
    case MSGPACK_UNPACK_SUCCESS:
        if (off != len)
            return kiwi__fail (err, what, NULL, "trailing bytes after message (%zu of %zu bytes used)",
                               off, len);
        return 0;
    case MSGPACK_UNPACK_EXTRA_BYTES:
        return kiwi__fail (err, what, NULL, "trailing bytes after message");
    case MSGPACK_UNPACK_CONTINUE:
        return kiwi__fail (err, what, NULL, "truncated message (%zu bytes)", len);
    case MSGPACK_UNPACK_NOMEM_ERROR:
        return kiwi__nomem (err, what);
    case MSGPACK_UNPACK_PARSE_ERROR:
    default:
        return kiwi__fail (err, what, NULL, "invalid msgpack");
    }
}

/* ------------------------------------------------------------------ decoding */

/* A key fit for an error message: printable ASCII, at most 48 bytes. */
static void
printable_key (char *dst, size_t cap, const char *s, size_t n)
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

static int
cmp_key (const void *a, const void *b)
{
    const msgpack_object_str *x = &(*(const msgpack_object_kv *const *) a)->key.via.str;
    const msgpack_object_str *y = &(*(const msgpack_object_kv *const *) b)->key.via.str;
    if (x->size != y->size)
        return x->size < y->size ? -1 : 1;
    return x->size == 0 ? 0 : memcmp (x->ptr, y->ptr, x->size);
}

static bool
same_key (const msgpack_object_str *x, const msgpack_object_str *y)
{
    return x->size == y->size && (x->size == 0 || memcmp (x->ptr, y->ptr, x->size) == 0);
}

static int
duplicate_key (const kiwi__map *m, const msgpack_object_str *k, kiwi_error_t *err)
{
    char shown[64];
    printable_key (shown, sizeof shown, k->ptr, k->size);
    return kiwi__fail (err, m->path, shown, "duplicate key");
}

int
kiwi__map_open (kiwi__map *m, const msgpack_object *o, const char *path, kiwi_error_t *err)
{
    size_t plen = 0;
    m->path[0] = '\0';
    path_append (m->path, &plen, path);
    m->kv = NULL;
    m->n = 0;
    if (o->type != MSGPACK_OBJECT_MAP)
        return kiwi__fail (err, path, NULL, "expected map, got %s", kiwi__type_name (o));
    m->kv = o->via.map.ptr;
    m->n = o->via.map.size;

    for (uint32_t i = 0; i < m->n; i++)
        if (m->kv[i].key.type != MSGPACK_OBJECT_STR)
            return kiwi__fail (err, path, NULL, "key #%" PRIu32 " is %s, expected string", i,
                               kiwi__type_name (&m->kv[i].key));

    if (m->n <= 16) {
        for (uint32_t i = 1; i < m->n; i++)
            for (uint32_t k = 0; k < i; k++)
                if (same_key (&m->kv[i].key.via.str, &m->kv[k].key.via.str))
                    return duplicate_key (m, &m->kv[i].key.via.str, err);
        return 0;
    }

    /* Large maps: sort pointers and compare neighbours, O(n log n). */
    const msgpack_object_kv **sorted = malloc (m->n * sizeof *sorted);
    if (sorted == NULL)
        return kiwi__nomem (err, path);
    for (uint32_t i = 0; i < m->n; i++)
        sorted[i] = &m->kv[i];
    qsort (sorted, m->n, sizeof *sorted, cmp_key);
    for (uint32_t i = 1; i < m->n; i++)
        if (same_key (&sorted[i]->key.via.str, &sorted[i - 1]->key.via.str)) {
            int r = duplicate_key (m, &sorted[i]->key.via.str, err);
            free (sorted);
            return r;
        }
    free (sorted);
    return 0;
}

const msgpack_object *
kiwi__map_get (const kiwi__map *m, const char *key)
{
    size_t n = strlen (key);
    for (uint32_t i = 0; i < m->n; i++) {
        const msgpack_object_str *k = &m->kv[i].key.via.str;
        if (k->size == n && memcmp (k->ptr, key, n) == 0)
            return &m->kv[i].val;
    }
    return NULL;
}

int
kiwi__msg_open (kiwi__msg *m, const char *name, const char *buf, size_t len, kiwi_error_t *err)
{
    memset (&m->root, 0, sizeof m->root);
    if (kiwi__unpack_one (&m->unpacked, buf, len, KIWI_WIRE_MAX_DEPTH, name, err) < 0)
        return -1;
    if (kiwi__map_open (&m->root, &m->unpacked.data, name, err) < 0)
        return -1;

    uint64_t v = 0;
    if (kiwi__read_u64 (&m->root, "v", &v, NULL, err) < 0)
        return -1;
    if (v == 0)
        return kiwi__fail (err, name, "v", "unsupported version 0");
    if (v > KIWI_WIRE_VERSION)
        return kiwi__fail (err, name, "v", "version %" PRIu64 " is newer than supported version %d", v,
                           KIWI_WIRE_VERSION);
    return 0;
}

void
kiwi__msg_close (kiwi__msg *m)
{
    msgpack_unpacked_destroy (&m->unpacked);
}

/* 1: found; 0: absent and optional; -1: absent and required. */
static int
lookup (const kiwi__map *m, const char *key, bool *present, const msgpack_object **o, kiwi_error_t *err)
{
    *o = kiwi__map_get (m, key);
    if (present != NULL)
        *present = *o != NULL;
    if (*o != NULL)
        return 1;
    if (present == NULL)
        return kiwi__fail (err, m->path, key, "required field missing");
    return 0;
}

static int
expected (const kiwi__map *m, const char *key, const char *want, const msgpack_object *o,
          kiwi_error_t *err)
{
    return kiwi__fail (err, m->path, key, "expected %s, got %s", want, kiwi__type_name (o));
}

int
kiwi__obj_str (const msgpack_object *o, const char *path, char **out, kiwi_error_t *err)
{
    if (o->type != MSGPACK_OBJECT_STR)
        return kiwi__fail (err, path, NULL, "expected string, got %s", kiwi__type_name (o));
    const msgpack_object_str *s = &o->via.str;
    const char *nul = s->size > 0 ? memchr (s->ptr, '\0', s->size) : NULL;
    if (nul != NULL)
        return kiwi__fail (err, path, NULL, "contains a NUL byte at byte %zu", (size_t) (nul - s->ptr));
    char *copy = malloc ((size_t) s->size + 1);
    if (copy == NULL)
        return kiwi__nomem (err, path);
    if (s->size > 0)
        memcpy (copy, s->ptr, s->size);
    copy[s->size] = '\0';
    *out = copy;
    return 0;
}

int
kiwi__read_str (const kiwi__map *m, const char *key, char **out, kiwi_error_t *err)
{
    const msgpack_object *o;
    bool present;
    if (lookup (m, key, &present, &o, err) <= 0)
        return 0;
    char path[KIWI__PATH_MAX];
    kiwi__wire_path_join (path, m->path, key);
    return kiwi__obj_str (o, path, out, err);
}

int
kiwi__read_u64 (const kiwi__map *m, const char *key, uint64_t *out, bool *present, kiwi_error_t *err)
{
    const msgpack_object *o;
    int r = lookup (m, key, present, &o, err);
    if (r <= 0)
        return r;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return kiwi__fail (err, m->path, key, "must not be negative, got %" PRId64, o->via.i64);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return expected (m, key, "integer", o, err);
    *out = o->via.u64;
    return 0;
}

int
kiwi__read_u32 (const kiwi__map *m, const char *key, uint32_t *out, bool *present, kiwi_error_t *err)
{
    uint64_t v = 0;
    bool here = false;
    if (kiwi__read_u64 (m, key, &v, present != NULL ? &here : NULL, err) < 0)
        return -1;
    if (present != NULL) {
        *present = here;
        if (!here)
            return 0;
    }
    if (v > UINT32_MAX)
        return kiwi__fail (err, m->path, key, "out of range: %" PRIu64 " is greater than %" PRIu32, v,
                           UINT32_MAX);
    *out = (uint32_t) v;
    return 0;
}

int
kiwi__read_i64 (const kiwi__map *m, const char *key, int64_t *out, bool *present, kiwi_error_t *err)
{
    const msgpack_object *o;
    int r = lookup (m, key, present, &o, err);
    if (r <= 0)
        return r;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return 0;
    }
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return expected (m, key, "integer", o, err);
    if (o->via.u64 > INT64_MAX)
        return kiwi__fail (err, m->path, key, "out of range: %" PRIu64 " is greater than %" PRId64,
                           o->via.u64, INT64_MAX);
    *out = (int64_t) o->via.u64;
    return 0;
}

int
kiwi__read_i32 (const kiwi__map *m, const char *key, int32_t *out, bool *present, kiwi_error_t *err)
{
    int64_t v = 0;
    bool here = false;
    if (kiwi__read_i64 (m, key, &v, present != NULL ? &here : NULL, err) < 0)
        return -1;
    if (present != NULL) {
        *present = here;
        if (!here)
            return 0;
    }
    if (v > INT32_MAX || v < INT32_MIN)
        return kiwi__fail (err, m->path, key, "out of range: %" PRId64 " does not fit in 32 bits", v);
    *out = (int32_t) v;
    return 0;
}

int
kiwi__read_bool (const kiwi__map *m, const char *key, bool *out, bool *present, kiwi_error_t *err)
{
    const msgpack_object *o;
    int r = lookup (m, key, present, &o, err);
    if (r <= 0)
        return r;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return expected (m, key, "boolean", o, err);
    *out = o->via.boolean;
    return 0;
}

int
kiwi__read_bin (const kiwi__map *m, const char *key, char **out, size_t *out_len, bool *present,
                kiwi_error_t *err)
{
    const msgpack_object *o;
    int r = lookup (m, key, present, &o, err);
    if (r <= 0)
        return r;
    if (o->type != MSGPACK_OBJECT_BIN)
        return expected (m, key, "binary", o, err);
    *out = NULL;
    *out_len = o->via.bin.size;
    if (o->via.bin.size == 0)
        return 0;
    char *copy = malloc (o->via.bin.size);
    if (copy == NULL)
        return kiwi__nomem (err, m->path);
    memcpy (copy, o->via.bin.ptr, o->via.bin.size);
    *out = copy;
    return 0;
}

int
kiwi__read_map (const kiwi__map *m, const char *key, kiwi__map *sub, bool *present, kiwi_error_t *err)
{
    const msgpack_object *o;
    int r = lookup (m, key, present, &o, err);
    if (r <= 0)
        return r;
    char path[KIWI__PATH_MAX];
    kiwi__wire_path_join (path, m->path, key);
    return kiwi__map_open (sub, o, path, err);
}

int
kiwi__read_array (const kiwi__map *m, const char *key, size_t max_entries,
                  const msgpack_object_array **out, bool *present, kiwi_error_t *err)
{
    const msgpack_object *o;
    int r = lookup (m, key, present, &o, err);
    if (r <= 0)
        return r;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return expected (m, key, "array", o, err);
    if (o->via.array.size > max_entries)
        return kiwi__fail (err, m->path, key, "more than %zu entries", max_entries);
    *out = &o->via.array;
    return 0;
}

/* ------------------------------------------------------------------ validation */

size_t
kiwi__utf8_seq (const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    if (c < 0xc2)
        return 0; /* continuation byte, or overlong 2-byte lead */
    if (c < 0xe0) {
        if (n < 2 || (p[1] & 0xc0) != 0x80)
            return 0;
        return 2;
    }
    if (c < 0xf0) {
        if (n < 3 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80)
            return 0;
        if (c == 0xe0 && p[1] < 0xa0)
            return 0; /* overlong */
        if (c == 0xed && p[1] >= 0xa0)
            return 0; /* UTF-16 surrogate */
        return 3;
    }
    if (c < 0xf5) {
        if (n < 4 || (p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80)
            return 0;
        if (c == 0xf0 && p[1] < 0x90)
            return 0; /* overlong */
        if (c == 0xf4 && p[1] >= 0x90)
            return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

bool
kiwi__utf8_valid (const char *s, size_t len, size_t *bad)
{
    const unsigned char *p = (const unsigned char *) s;
    size_t i = 0;
    while (i < len) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        size_t k = kiwi__utf8_seq (p + i, len - i);
        if (k == 0) {
            if (bad != NULL)
                *bad = i;
            return false;
        }
        i += k;
    }
    return true;
}

int
kiwi__check_str (const char *path, const char *key, const char *s, const kiwi__str_rule *r,
                 kiwi_error_t *err)
{
    if (s == NULL) {
        if (r->required)
            return kiwi__fail (err, path, key, "required field missing");
        return 0;
    }
    size_t len = strlen (s);
    if (len < r->min) {
        if (r->min == 1)
            return kiwi__fail (err, path, key, "must not be empty");
        return kiwi__fail (err, path, key, "shorter than %zu bytes", r->min);
    }
    if (len > r->max)
        return kiwi__fail (err, path, key, "longer than %zu bytes", r->max);
    size_t bad = 0;
    if (r->kind == KIWI__TEXT && !kiwi__utf8_valid (s, len, &bad))
        return kiwi__fail (err, path, key, "invalid UTF-8 at byte %zu", bad);
    if (r->check != NULL)
        return r->check (s, len, path, key, err);
    return 0;
}

int
kiwi__check_u64 (const char *path, const char *key, uint64_t v, uint64_t min, uint64_t max,
                 kiwi_error_t *err)
{
    if (v >= min && v <= max)
        return 0;
    if (max == UINT64_MAX)
        return kiwi__fail (err, path, key, "must be at least %" PRIu64 ", got %" PRIu64, min, v);
    return kiwi__fail (err, path, key, "must be between %" PRIu64 " and %" PRIu64 ", got %" PRIu64, min,
                       max, v);
}

int
kiwi__check_i64 (const char *path, const char *key, int64_t v, int64_t min, int64_t max,
                 kiwi_error_t *err)
{
    if (v >= min && v <= max)
        return 0;
    if (max == INT64_MAX)
        return kiwi__fail (err, path, key, "must be at least %" PRId64 ", got %" PRId64, min, v);
    return kiwi__fail (err, path, key, "must be between %" PRId64 " and %" PRId64 ", got %" PRId64, min,
                       max, v);
}

int
kiwi__fail_enum (kiwi_error_t *err, const char *path, const char *key, const char *value,
                 const char *const *names, size_t n)
{
    char shown[64];
    char list[256];
    size_t o = 0;
    printable_key (shown, sizeof shown, value, strlen (value));
    list[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (names[i] == NULL)
            continue;
        int w = snprintf (list + o, sizeof list - o, "%s%s", o > 0 ? ", " : "", names[i]);
        if (w < 0 || (size_t) w >= sizeof list - o)
            break;
        o += (size_t) w;
    }
    return kiwi__fail (err, path, key, "unknown value \"%s\" (expected %s)", shown, list);
}

static int
bad_char (const char *path, const char *key, unsigned char c, size_t at, const char *allowed,
          kiwi_error_t *err)
{
    if (c > 0x20 && c < 0x7f)
        return kiwi__fail (err, path, key, "invalid character '%c' at byte %zu (allowed: %s)", c, at,
                           allowed);
    return kiwi__fail (err, path, key, "invalid character 0x%02x at byte %zu (allowed: %s)", c, at,
                       allowed);
}

static bool
is_alnum (unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

int
kiwi__chars_id (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (!is_alnum (c) && c != '.' && c != '_' && c != ':' && c != '-')
            return bad_char (path, key, c, i, "A-Z a-z 0-9 . _ : -", err);
    }
    return 0;
}

int
kiwi__chars_token (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c <= 0x20 || c >= 0x7f)
            return bad_char (path, key, c, i, "printable ASCII without spaces", err);
    }
    return 0;
}

static int
no_controls (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        if (c < 0x20 || c == 0x7f)
            return kiwi__fail (err, path, key, "control character 0x%02x at byte %zu", c, i);
    }
    return 0;
}

int
kiwi__chars_locator (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err)
{
    if (len > 0 && s[0] == '-')
        return kiwi__fail (err, path, key, "must not start with '-'");
    return no_controls (s, len, path, key, err);
}

int
kiwi__chars_env_name (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char) s[i];
        bool ok = (c >= 'A' && c <= 'Z') || c == '_' || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return bad_char (path, key, c, i, i == 0 ? "A-Z _" : "A-Z 0-9 _", err);
    }
    return 0;
}

int
kiwi__chars_rel_path (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err)
{
    if (len > 0 && s[0] == '/')
        return kiwi__fail (err, path, key, "must be a relative path");
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i == len || s[i] == '/') {
            if (i - start == 2 && s[start] == '.' && s[start + 1] == '.')
                return kiwi__fail (err, path, key, "must not contain a '..' component");
            start = i + 1;
        }
    }
    return no_controls (s, len, path, key, err);
}

/* ------------------------------------------------------------------ encoding */

void
kiwi__enc_init (kiwi__enc *e)
{
    memset (e, 0, sizeof *e);
    msgpack_sbuffer_init (&e->sbuf);
    msgpack_packer_init (&e->pk, &e->sbuf, msgpack_sbuffer_write);
}

void
kiwi__enc_destroy (kiwi__enc *e)
{
    msgpack_sbuffer_destroy (&e->sbuf);
    memset (&e->sbuf, 0, sizeof e->sbuf);
}

static void
check (kiwi__enc *e, int r)
{
    if (r < 0)
        e->failed = true;
}

/* A value is about to be written: inside an array it is one more entry. */
static void
count_value (kiwi__enc *e)
{
    if (e->depth > 0 && !e->stack[e->depth - 1].is_map)
        e->stack[e->depth - 1].count++;
}

static void
container_begin (kiwi__enc *e, bool is_map)
{
    static const char placeholder[5] = { 0 };
    if (e->failed)
        return;
    count_value (e);
    if (e->depth >= KIWI__ENC_MAX_DEPTH) {
        e->failed = e->misuse = true;
        return;
    }
    e->stack[e->depth].offset = e->sbuf.size;
    e->stack[e->depth].count = 0;
    e->stack[e->depth].is_map = is_map;
    e->depth++;
    check (e, msgpack_sbuffer_write (&e->sbuf, placeholder, sizeof placeholder));
}

/* Replaces the 5-byte placeholder by the shortest header for the count. */
static void
container_end (kiwi__enc *e, bool is_map)
{
    if (e->failed)
        return;
    if (e->depth == 0 || e->stack[e->depth - 1].is_map != is_map) {
        e->failed = e->misuse = true;
        return;
    }
    e->depth--;
    size_t offset = e->stack[e->depth].offset;
    uint32_t n = e->stack[e->depth].count;
    unsigned char hdr[5];
    size_t hl;
    if (n <= 15) {
        hdr[0] = (unsigned char) ((is_map ? 0x80 : 0x90) | n);
        hl = 1;
    } else if (n <= 0xffff) {
        hdr[0] = is_map ? 0xde : 0xdc;
        hdr[1] = (unsigned char) (n >> 8);
        hdr[2] = (unsigned char) n;
        hl = 3;
    } else {
        hdr[0] = is_map ? 0xdf : 0xdd;
        hdr[1] = (unsigned char) (n >> 24);
        hdr[2] = (unsigned char) (n >> 16);
        hdr[3] = (unsigned char) (n >> 8);
        hdr[4] = (unsigned char) n;
        hl = 5;
    }
    char *base = e->sbuf.data + offset;
    memcpy (base, hdr, hl);
    memmove (base + hl, base + 5, e->sbuf.size - offset - 5);
    e->sbuf.size -= 5 - hl;
}

void
kiwi__enc_map_begin (kiwi__enc *e)
{
    container_begin (e, true);
}

void
kiwi__enc_map_end (kiwi__enc *e)
{
    container_end (e, true);
}

void
kiwi__enc_array_begin (kiwi__enc *e)
{
    container_begin (e, false);
}

void
kiwi__enc_array_end (kiwi__enc *e)
{
    container_end (e, false);
}

void
kiwi__enc_key (kiwi__enc *e, const char *key)
{
    if (e->failed)
        return;
    if (e->depth == 0 || !e->stack[e->depth - 1].is_map) {
        e->failed = e->misuse = true;
        return;
    }
    e->stack[e->depth - 1].count++;
    size_t n = strlen (key);
    check (e, msgpack_pack_str (&e->pk, n));
    check (e, msgpack_pack_str_body (&e->pk, key, n));
}

void
kiwi__enc_str (kiwi__enc *e, const char *s)
{
    if (e->failed)
        return;
    count_value (e);
    size_t n = strlen (s);
    check (e, msgpack_pack_str (&e->pk, n));
    if (n > 0)
        check (e, msgpack_pack_str_body (&e->pk, s, n));
}

void
kiwi__enc_u64 (kiwi__enc *e, uint64_t v)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, msgpack_pack_uint64 (&e->pk, v));
}

void
kiwi__enc_i64 (kiwi__enc *e, int64_t v)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, msgpack_pack_int64 (&e->pk, v));
}

void
kiwi__enc_bool (kiwi__enc *e, bool v)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, v ? msgpack_pack_true (&e->pk) : msgpack_pack_false (&e->pk));
}

void
kiwi__enc_bin (kiwi__enc *e, const char *p, size_t n)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, msgpack_pack_bin (&e->pk, n));
    if (n > 0)
        check (e, msgpack_pack_bin_body (&e->pk, p, n));
}

void
kiwi__enc_raw (kiwi__enc *e, const char *p, size_t n)
{
    if (e->failed)
        return;
    count_value (e);
    if (n > 0)
        check (e, msgpack_sbuffer_write (&e->sbuf, p, n));
}

void
kiwi__enc_kstr (kiwi__enc *e, const char *key, const char *s)
{
    if (s == NULL)
        return;
    kiwi__enc_key (e, key);
    kiwi__enc_str (e, s);
}

void
kiwi__enc_ku64 (kiwi__enc *e, const char *key, uint64_t v)
{
    kiwi__enc_key (e, key);
    kiwi__enc_u64 (e, v);
}

void
kiwi__enc_ki64 (kiwi__enc *e, const char *key, int64_t v)
{
    kiwi__enc_key (e, key);
    kiwi__enc_i64 (e, v);
}

void
kiwi__enc_kbool (kiwi__enc *e, const char *key, bool v)
{
    kiwi__enc_key (e, key);
    kiwi__enc_bool (e, v);
}

int
kiwi__enc_finish (kiwi__enc *e, const char *what, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (e->misuse || e->depth != 0) {
        kiwi__enc_destroy (e);
        return kiwi_error_make (err, 0, "%s: internal error: unbalanced maps or arrays in encoder", what);
    }
    if (e->failed) {
        kiwi__enc_destroy (e);
        return kiwi_error_make (err, ENOMEM, "%s: encoding", what);
    }
    *out_len = e->sbuf.size;
    *out = msgpack_sbuffer_release (&e->sbuf);
    return 0;
}
