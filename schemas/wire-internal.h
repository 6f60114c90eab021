/*
 * wire-internal.h: the helpers the message modules share, not for use
 * outside schemas/.
 *
 * Decoding: kiwi__msg_open() unpacks one top-level map safely (pre-scanned for
 * truncation, trailing bytes, nesting and container sizes before msgpack-c
 * allocates anything) and checks `v`; kiwi__map gives typed, path-named access
 * to a map's fields and rejects non-string and duplicate keys up front.
 *
 * Validation: kiwi__check_* apply value rules (length, UTF-8, character set,
 * range) to the C struct. Decoders check wire types and presence, then run
 * the module's validate function, so the value rules are written once and
 * hold for both directions.
 *
 * Encoding: kiwi__enc packs into a growing buffer; maps and arrays count
 * their own entries, so no caller ever counts fields by hand.
 *
 * JSON: kiwi__json writes one JSON value with correct separators and
 * escaping.
 *
 * Every error carries code KIWI_WIRE_EINVALID (or errno ENOMEM) and a message
 * "<path>: <rule>", where path names the field as in `task.repo.url` or
 * `heartbeat.egress[2].name`.
 */
#ifndef KIWI_SCHEMAS_WIRE_INTERNAL_H
#define KIWI_SCHEMAS_WIRE_INTERNAL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "schemas/wire.h"

#define KIWI__PATH_MAX 192

/* ---------------------------------------------------------------- errors */

/* Sets *err to "<path>[.<key>]: <message>" with code KIWI_WIRE_EINVALID.
 * key may be NULL. Returns -1. */
int kiwi__fail (kiwi_error_t *err, const char *path, const char *key, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

/* Sets *err to "<what>: out of memory" with errno ENOMEM. Returns -1. */
int kiwi__nomem (kiwi_error_t *err, const char *what);

/* Copies path into dst, truncated at KIWI__PATH_MAX - 1 bytes. */
void kiwi__path_copy (char dst[KIWI__PATH_MAX], const char *path);
/* Writes "<path>.<key>" (or "<path>[<index>]" when key is NULL) into dst. */
void kiwi__wire_path_join (char dst[KIWI__PATH_MAX], const char *path, const char *key);
void kiwi__path_index (char dst[KIWI__PATH_MAX], const char *path, size_t index);

/* Copies s[0..n) into dst (cap bytes) fit for an error message: printable
 * ASCII, at most 48 bytes, then "...". */
void kiwi__printable_key (char *dst, size_t cap, const char *s, size_t n);

/* "string", "integer", ... for "expected X, got Y" messages. */
const char *kiwi__type_name (const msgpack_object *o);

/* ---------------------------------------------------------------- scanning */

/* Walks the single msgpack value at the start of buf[0..len) without
 * allocating. Checks that it is complete, well formed, nested at most
 * max_depth containers deep, and that no container declares more entries
 * than there are bytes left (so unpacking it allocates O(len)). On success
 * sets *end to the offset just past the value. Errors are "<what>: ...". */
int kiwi__scan (const char *buf, size_t len, int max_depth, const char *what, size_t *end,
                kiwi_error_t *err);

/* Scans, then unpacks exactly one value filling all of buf[0..len) into *u
 * (initialised here; the caller always calls msgpack_unpacked_destroy). */
int kiwi__unpack_one (msgpack_unpacked *u, const char *buf, size_t len, int max_depth,
                      const char *what, kiwi_error_t *err);

/* ---------------------------------------------------------------- decoding */

typedef struct kiwi__map {
    const msgpack_object_kv *kv; /* borrowed from the unpacked zone */
    uint32_t n;
    char path[KIWI__PATH_MAX];
} kiwi__map;

/* Opens o as a map named path: type must be map, every key a string, no key
 * twice. */
int kiwi__map_open (kiwi__map *m, const msgpack_object *o, const char *path, kiwi_error_t *err);

/* The value under key, or NULL. Borrowed. */
const msgpack_object *kiwi__map_get (const kiwi__map *m, const char *key);

/* One decoded top-level message. */
typedef struct kiwi__msg {
    msgpack_unpacked unpacked;
    kiwi__map root;
} kiwi__msg;

/* Unpacks buf[0..len) as message `name` (also the root path), checks that it
 * is one map with nothing after it and that `v` is present and supported.
 * Always pair with kiwi__msg_close(), also on failure. */
int kiwi__msg_open (kiwi__msg *m, const char *name, const char *buf, size_t len, kiwi_error_t *err);
void kiwi__msg_close (kiwi__msg *m);

/* Typed field readers. An absent field leaves *out untouched; with
 * present == NULL it is required and its absence an error, otherwise
 * *present tells. nil counts as a type error, not as absence. Strings are
 * copied (malloc'd, NUL-terminated, caller owns); a NUL byte inside a string
 * is an error, since the struct holds C strings. Value rules (length, range,
 * character set) are the validators' business, except that integers must fit
 * the C type they are read into. */
int kiwi__read_str (const kiwi__map *m, const char *key, char **out, kiwi_error_t *err);
int kiwi__read_u64 (const kiwi__map *m, const char *key, uint64_t *out, bool *present, kiwi_error_t *err);
int kiwi__read_u32 (const kiwi__map *m, const char *key, uint32_t *out, bool *present, kiwi_error_t *err);
int kiwi__read_i64 (const kiwi__map *m, const char *key, int64_t *out, bool *present, kiwi_error_t *err);
int kiwi__read_i32 (const kiwi__map *m, const char *key, int32_t *out, bool *present, kiwi_error_t *err);
int kiwi__read_bool (const kiwi__map *m, const char *key, bool *out, bool *present, kiwi_error_t *err);
/* A bin field: *out is malloc'd (NULL when empty), *out_len its length. */
int kiwi__read_bin (const kiwi__map *m, const char *key, char **out, size_t *out_len, bool *present,
                    kiwi_error_t *err);
int kiwi__read_map (const kiwi__map *m, const char *key, kiwi__map *sub, bool *present, kiwi_error_t *err);
/* An array field; its length is checked against max_entries here, so callers
 * never allocate for more. */
int kiwi__read_array (const kiwi__map *m, const char *key, size_t max_entries,
                      const msgpack_object_array **out, bool *present, kiwi_error_t *err);
/* The same for a value that is already at hand (an array element). */
int kiwi__obj_str (const msgpack_object *o, const char *path, char **out, kiwi_error_t *err);

/* ---------------------------------------------------------------- validation */

typedef enum {
    KIWI__TEXT, /* valid UTF-8 required */
    KIWI__RAW,  /* any bytes but NUL: program output, diffs, logs */
} kiwi__str_kind;

/* An extra check on a string's bytes; returns < 0 with *err set via
 * kiwi__fail (path, key, ...). */
typedef int (*kiwi__str_check_fn) (const char *s, size_t len, const char *path, const char *key,
                                   kiwi_error_t *err);

typedef struct kiwi__str_rule {
    bool required;
    size_t min, max; /* in bytes */
    kiwi__str_kind kind;
    kiwi__str_check_fn check; /* NULL: none */
} kiwi__str_rule;

/* s == NULL means absent. */
int kiwi__check_str (const char *path, const char *key, const char *s, const kiwi__str_rule *r,
                     kiwi_error_t *err);
int kiwi__check_u64 (const char *path, const char *key, uint64_t v, uint64_t min, uint64_t max,
                     kiwi_error_t *err);
int kiwi__check_i64 (const char *path, const char *key, int64_t v, int64_t min, int64_t max,
                     kiwi_error_t *err);

/* Character-set checks (kiwi__str_check_fn). */
/* [A-Za-z0-9._:-] (task ids) */
int kiwi__chars_id (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err);
/* printable ASCII, no space (worker ids, kinds, topics, versions) */
int kiwi__chars_token (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err);
/* no control characters and not starting with '-' (URLs and refs handed to git) */
int kiwi__chars_locator (const char *s, size_t len, const char *path, const char *key, kiwi_error_t *err);
/* [A-Z_][A-Z0-9_]* (environment variable names) */
int kiwi__chars_env_name (const char *s, size_t len, const char *path, const char *key,
                          kiwi_error_t *err);
/* relative path without '..' components */
int kiwi__chars_rel_path (const char *s, size_t len, const char *path, const char *key,
                          kiwi_error_t *err);

/* Length of the valid UTF-8 sequence starting at p (at most n bytes
 * available): 1..4, or 0 if the bytes there are not valid UTF-8 (overlong
 * forms, surrogates and code points above U+10FFFF are invalid). */
size_t kiwi__utf8_seq (const unsigned char *p, size_t n);

/* "unknown value \"x\" (expected a, b, c)" for a string enum; names[0..n)
 * are the accepted strings, NULL entries skipped. */
int kiwi__fail_enum (kiwi_error_t *err, const char *path, const char *key, const char *value,
                     const char *const *names, size_t n);

/* Common timestamp rule: int64 milliseconds since the epoch, >= 0. */
#define KIWI__TS_MIN 0
#define KIWI__TS_MAX INT64_MAX

/* ---------------------------------------------------------------- encoding */

#define KIWI__ENC_MAX_DEPTH 8

typedef struct kiwi__enc {
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    bool failed; /* sticky: out of memory or misuse */
    bool misuse; /* a key outside a map, unbalanced ends, nesting too deep */
    int depth;
    struct {
        size_t offset; /* where the 5-byte placeholder header starts */
        uint32_t count;
        bool is_map;
    } stack[KIWI__ENC_MAX_DEPTH];
} kiwi__enc;

void kiwi__enc_init (kiwi__enc *e);
void kiwi__enc_map_begin (kiwi__enc *e);
void kiwi__enc_map_end (kiwi__enc *e);
void kiwi__enc_array_begin (kiwi__enc *e);
void kiwi__enc_array_end (kiwi__enc *e);
void kiwi__enc_key (kiwi__enc *e, const char *key);
void kiwi__enc_str (kiwi__enc *e, const char *s);
void kiwi__enc_u64 (kiwi__enc *e, uint64_t v);
void kiwi__enc_i64 (kiwi__enc *e, int64_t v);
void kiwi__enc_bool (kiwi__enc *e, bool v);
void kiwi__enc_bin (kiwi__enc *e, const char *p, size_t n);
/* Key and value at once; an optional string that is NULL is left out. */
void kiwi__enc_kstr (kiwi__enc *e, const char *key, const char *s);
void kiwi__enc_ku64 (kiwi__enc *e, const char *key, uint64_t v);
void kiwi__enc_ki64 (kiwi__enc *e, const char *key, int64_t v);
void kiwi__enc_kbool (kiwi__enc *e, const char *key, bool v);
/* Appends bytes that already are one encoded msgpack value. */
void kiwi__enc_raw (kiwi__enc *e, const char *p, size_t n);
/* Moves the finished buffer to *out / *out_len (caller frees), or fails
 * with ENOMEM. The encoder is empty afterwards either way. */
int kiwi__enc_finish (kiwi__enc *e, const char *what, char **out, size_t *out_len, kiwi_error_t *err);

/* ---------------------------------------------------------------- JSON */

#define KIWI__JSON_MAX_DEPTH (KIWI_WIRE_MAX_DEPTH + 8)

typedef struct kiwi__json {
    kiwi_buf out;
    bool failed; /* sticky: out of memory or nesting beyond KIWI__JSON_MAX_DEPTH */
    int depth;
    bool after_key;
    bool first[KIWI__JSON_MAX_DEPTH + 1];
} kiwi__json;

void kiwi__json_init (kiwi__json *j);
void kiwi__json_destroy (kiwi__json *j);
void kiwi__json_object_begin (kiwi__json *j);
void kiwi__json_object_end (kiwi__json *j);
void kiwi__json_array_begin (kiwi__json *j);
void kiwi__json_array_end (kiwi__json *j);
void kiwi__json_key (kiwi__json *j, const char *key);
void kiwi__json_key_n (kiwi__json *j, const char *key, size_t len);
/* A JSON string from arbitrary bytes (see kiwi_msgpack_to_json for the
 * escaping); NULL → null. */
void kiwi__json_str_n (kiwi__json *j, const char *s, size_t len);
void kiwi__json_str (kiwi__json *j, const char *s);
void kiwi__json_u64 (kiwi__json *j, uint64_t v);
void kiwi__json_i64 (kiwi__json *j, int64_t v);
void kiwi__json_bool (kiwi__json *j, bool v);
void kiwi__json_null (kiwi__json *j);
void kiwi__json_double (kiwi__json *j, double v);
void kiwi__json_base64 (kiwi__json *j, const char *p, size_t n);
/* Any unpacked msgpack value, rendered as kiwi_msgpack_to_json() does;
 * depth is the nesting level of o (1 for a top-level value). */
int kiwi__json_msgpack (kiwi__json *j, const msgpack_object *o, int depth, kiwi_error_t *err);
/* Key and value at once; an optional string that is NULL is left out. */
void kiwi__json_kstr (kiwi__json *j, const char *key, const char *s);
void kiwi__json_ku64 (kiwi__json *j, const char *key, uint64_t v);
void kiwi__json_ki64 (kiwi__json *j, const char *key, int64_t v);
void kiwi__json_kbool (kiwi__json *j, const char *key, bool v);
/* Moves the text to *out (caller frees) or fails with ENOMEM. */
int kiwi__json_finish (kiwi__json *j, const char *what, char **out, kiwi_error_t *err);

/* ---------------------------------------------------------------- keyed writers */

/* Defines the keyed writers of an encoder type T whose functions are named
 * P_key, P_str, P_u64, P_i64, P_bool: P_kstr, P_ku64, P_ki64, P_kbool write
 * a key and its value at once, leaving out an optional string that is NULL.
 * One definition serves the msgpack encoder and the JSON writer alike. */
#define KIWI__KEYED_WRITERS(T, P)                                                                                      \
    void P##_kstr (T *w, const char *key, const char *s)                                                              \
    {                                                                                                                  \
        if (s == NULL)                                                                                                 \
            return;                                                                                                    \
        P##_key (w, key);                                                                                              \
        P##_str (w, s);                                                                                                \
    }                                                                                                                  \
    void P##_ku64 (T *w, const char *key, uint64_t v)                                                                 \
    {                                                                                                                  \
        P##_key (w, key);                                                                                              \
        P##_u64 (w, v);                                                                                                \
    }                                                                                                                  \
    void P##_ki64 (T *w, const char *key, int64_t v)                                                                  \
    {                                                                                                                  \
        P##_key (w, key);                                                                                              \
        P##_i64 (w, v);                                                                                                \
    }                                                                                                                  \
    void P##_kbool (T *w, const char *key, bool v)                                                                    \
    {                                                                                                                  \
        P##_key (w, key);                                                                                              \
        P##_bool (w, v);                                                                                               \
    }

#endif
