/*
 * wire-check.c: the value rules every validator applies (see
 * wire-internal.h): UTF-8, string length and kind, integer ranges, enum
 * names and the character sets of ids, tokens, locators, environment names
 * and relative paths. Hand-written because the rules are the wire format's
 * own; no Debian library states them.
 */
#include "schemas/wire-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* True if s[0..len) is valid UTF-8; otherwise *bad is the offset of the
 * first invalid byte. */
static bool
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
    kiwi__printable_key (shown, sizeof shown, value, strlen (value));
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
