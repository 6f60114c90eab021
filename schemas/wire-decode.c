/*
 * wire-decode.c: reading untrusted msgpack (see wire-internal.h): a
 * non-allocating pre-scan that bounds what msgpack-c will allocate, the
 * top-level message open, maps with string keys checked for duplicates, and
 * the typed, path-named field readers the message decoders use.
 */
#include "schemas/wire-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    kiwi__printable_key (shown, sizeof shown, k->ptr, k->size);
    return kiwi__fail (err, m->path, shown, "duplicate key");
}

int
kiwi__map_open (kiwi__map *m, const msgpack_object *o, const char *path, kiwi_error_t *err)
{
    kiwi__path_copy (m->path, path);
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
