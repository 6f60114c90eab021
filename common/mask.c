/*
 * mask.c: the secret set and its application (see mask.h).
 *
 * Every value is expanded into its printed forms when it is added; applying
 * the mask marks the bytes each form covers in a work array, then copies the
 * text over itself with each marked run replaced by "***".
 */
#include "common/mask.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/cleanup.h"

typedef struct form {
    char *s;
    size_t n;
    bool value; /* a value added, not only an encoding of one */
} form;

/* A loose form: a skeleton matched with separators allowed between its
 * units (a character of a value, two hex digits of its hex form), so the
 * value spaced out ("s 3 c r"), listed ("'s', '3'") or in a hex dump
 * ("73 33", "7333:6372", "\x73\x33", "0x73, 0x33", "%73%33") is
 * caught. Hex skeletons are lower case and matched in any case. */
typedef struct loose {
    char *s;
    size_t n;
    bool hex;
} loose;

/* At most this many separator bytes between two units: enough for "  " in
 * a hex dump's middle, ", 0x", or a line break and an indent. */
#define LOOSE_SEP_MAX 8

struct kiwi_mask {
    form *forms; /* longest first */
    size_t nforms, cap;
    loose *loose;
    size_t nloose;
    size_t nvalues;
};

kiwi_mask *
kiwi_mask_new (kiwi_error_t *err)
{
    kiwi_mask *m = calloc (1, sizeof *m);
    if (m == NULL)
        kiwi_error_make (err, ENOMEM, "allocating the secret mask");
    return m;
}

void
kiwi_mask_free (kiwi_mask *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->nforms; i++) {
        explicit_bzero (m->forms[i].s, m->forms[i].n);
        free (m->forms[i].s);
    }
    free (m->forms);
    for (size_t i = 0; i < m->nloose; i++) {
        explicit_bzero (m->loose[i].s, m->loose[i].n);
        free (m->loose[i].s);
    }
    free (m->loose);
    free (m);
}

size_t
kiwi_mask_count (const kiwi_mask *m)
{
    return m ? m->nvalues : 0;
}

/* Adds one form (copied) unless it is too short or already there.
 * 1 added, 0 not needed, -1 out of memory. */
static int
add_form (kiwi_mask *m, const char *s, size_t n)
{
    if (n < KIWI_MASK_MIN_LEN)
        return 0;
    for (size_t i = 0; i < m->nforms; i++)
        if (m->forms[i].n == n && memcmp (m->forms[i].s, s, n) == 0)
            return 0;
    if (m->nforms == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 16;
        form *f = realloc (m->forms, cap * sizeof *f);
        if (f == NULL)
            return -1;
        m->forms = f;
        m->cap = cap;
    }
    char *c = malloc (n);
    if (c == NULL)
        return -1;
    memcpy (c, s, n);
    /* keep longest first: the '*' fallback then covers overlaps fully */
    size_t at = m->nforms;
    while (at > 0 && m->forms[at - 1].n < n)
        at--;
    memmove (m->forms + at + 1, m->forms + at, (m->nforms - at) * sizeof *m->forms);
    m->forms[at] = (form) { c, n, false };
    m->nforms++;
    return 1;
}

/* A base64 form and, when it differs, its URL-safe spelling (-_ for +/,
 * no padding). */
static int
add_b64_form (kiwi_mask *m, char *s, size_t n)
{
    if (add_form (m, s, n) < 0)
        return -1;
    bool differs = false;
    size_t k = n;
    while (k > 0 && s[k - 1] == '=') {
        k--;
        differs = true;
    }
    for (size_t i = 0; i < k; i++)
        if (s[i] == '+' || s[i] == '/') {
            s[i] = s[i] == '+' ? '-' : '_';
            differs = true;
        }
    return differs ? add_form (m, s, k) : 0;
}

/* base64 of prefix + value (+ suffix), whole. */
static int
add_b64_whole (kiwi_mask *m, const char *prefix, const char *v, size_t vn, const char *suffix)
{
    size_t pl = strlen (prefix), sl = strlen (suffix);
    cleanup_free unsigned char *in = malloc (pl + vn + sl);
    if (in == NULL)
        return -1;
    memcpy (in, prefix, pl);
    memcpy (in + pl, v, vn);
    memcpy (in + pl + vn, suffix, sl);
    size_t on = 0;
    cleanup_free char *o = kiwi_base64_form (in, pl + vn + sl, false, true, &on);
    if (o == NULL)
        return -1;
    return add_b64_form (m, o, on);
}

/* The base64 characters of the value that do not depend on its neighbours
 * when it starts `shift` bytes (0..2) into a 3-byte group: the characters
 * carrying bits of the shift bytes before it (2 for shift 1, 3 for shift 2)
 * and those of a trailing partial group are left out. */
static int
add_b64_core (kiwi_mask *m, const char *v, size_t vn, int shift)
{
    size_t total = (size_t) shift + vn;
    cleanup_free unsigned char *in = calloc (total ? total : 1, 1);
    if (in == NULL)
        return -1;
    memcpy (in + shift, v, vn);
    size_t on = 0;
    cleanup_free char *o = kiwi_base64_form (in, total, false, true, &on);
    if (o == NULL)
        return -1;
    size_t from = shift == 0 ? 0 : (size_t) shift + 1;
    size_t to = total / 3 * 4;
    if (to <= from)
        return 0;
    o[to] = '\0';
    return add_b64_form (m, o + from, to - from);
}

static bool
unreserved (unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'
           || c == '_' || c == '~';
}

static int
add_url_forms (kiwi_mask *m, const char *v, size_t vn)
{
    bool any = false;
    for (size_t i = 0; i < vn; i++)
        any |= !unreserved ((unsigned char) v[i]);
    if (!any)
        return 0;
    cleanup_free char *up = malloc (vn * 3 + 1), *lo = malloc (vn * 3 + 1);
    if (up == NULL || lo == NULL)
        return -1;
    size_t j = 0;
    for (size_t i = 0; i < vn; i++) {
        unsigned char c = (unsigned char) v[i];
        if (unreserved (c)) {
            up[j] = lo[j] = (char) c;
            j++;
        } else {
            snprintf (up + j, 4, "%%%02X", c);
            snprintf (lo + j, 4, "%%%02x", c);
            j += 3;
        }
    }
    if (add_form (m, up, j) < 0 || add_form (m, lo, j) < 0)
        return -1;
    return 0;
}

/* The value as it appears inside a JSON string (jansson's escapes; \u
 * escapes in both cases of hex). */
static int
add_json_forms (kiwi_mask *m, const char *v, size_t vn)
{
    bool any = false;
    for (size_t i = 0; i < vn; i++)
        any |= (unsigned char) v[i] < 0x20 || v[i] == '"' || v[i] == '\\';
    if (!any)
        return 0;
    cleanup_free char *up = malloc (vn * 6 + 1), *lo = malloc (vn * 6 + 1);
    if (up == NULL || lo == NULL)
        return -1;
    size_t j = 0;
    for (size_t i = 0; i < vn; i++) {
        unsigned char c = (unsigned char) v[i];
        const char *e = NULL;
        switch (c) {
        case '"': e = "\\\""; break;
        case '\\': e = "\\\\"; break;
        case '\b': e = "\\b"; break;
        case '\f': e = "\\f"; break;
        case '\n': e = "\\n"; break;
        case '\r': e = "\\r"; break;
        case '\t': e = "\\t"; break;
        default: break;
        }
        if (e != NULL) {
            memcpy (up + j, e, 2);
            memcpy (lo + j, e, 2);
            j += 2;
        } else if (c < 0x20) {
            snprintf (up + j, 7, "\\u%04X", c);
            snprintf (lo + j, 7, "\\u%04x", c);
            j += 6;
        } else {
            up[j] = lo[j] = (char) c;
            j++;
        }
    }
    if (add_form (m, up, j) < 0 || add_form (m, lo, j) < 0)
        return -1;
    return 0;
}

/* Adds a loose skeleton (copied). -1 out of memory. */
static int
add_loose (kiwi_mask *m, const char *s, size_t n, bool hex)
{
    loose *l = realloc (m->loose, (m->nloose + 1) * sizeof *l);
    if (l == NULL)
        return -1;
    m->loose = l;
    char *c = malloc (n);
    if (c == NULL)
        return -1;
    memcpy (c, s, n);
    m->loose[m->nloose++] = (loose) { c, n, hex };
    return 0;
}

/* The value spaced out, and its bytes in hex (any case, any separators). */
static int
add_loose_forms (kiwi_mask *m, const char *v, size_t vn)
{
    cleanup_free char *hex = malloc (vn * 2 + 1);
    if (hex == NULL)
        return -1;
    for (size_t i = 0; i < vn; i++)
        snprintf (hex + 2 * i, 3, "%02x", (unsigned char) v[i]);
    if (add_loose (m, v, vn, false) < 0 || add_loose (m, hex, vn * 2, true) < 0)
        return -1;
    explicit_bzero (hex, vn * 2);
    return 0;
}

int
kiwi_mask_add (kiwi_mask *m, const char *value, kiwi_error_t *err)
{
    if (value == NULL)
        return 0;
    size_t vn = strlen (value);
    if (vn < KIWI_MASK_MIN_LEN)
        return 0;
    for (size_t i = 0; i < m->nforms; i++)
        if (m->forms[i].value && m->forms[i].n == vn && memcmp (m->forms[i].s, value, vn) == 0)
            return 0; /* already there, and so are its encodings */
    if (add_form (m, value, vn) < 0)
        return kiwi_error_make (err, ENOMEM, "adding a secret to the mask");
    /* marked as a value even when it was there as another one's encoding */
    for (size_t i = 0; i < m->nforms; i++)
        if (m->forms[i].n == vn && memcmp (m->forms[i].s, value, vn) == 0)
            m->forms[i].value = true;
    m->nvalues++;
    if (add_b64_whole (m, "", value, vn, "") < 0 || add_b64_whole (m, "", value, vn, "\n") < 0
        || add_b64_whole (m, "x-access-token:", value, vn, "") < 0 || add_b64_core (m, value, vn, 0) < 0
        || add_b64_core (m, value, vn, 1) < 0 || add_b64_core (m, value, vn, 2) < 0
        || add_url_forms (m, value, vn) < 0 || add_json_forms (m, value, vn) < 0
        || add_loose_forms (m, value, vn) < 0)
        return kiwi_error_make (err, ENOMEM, "adding a secret's encodings to the mask");
    return 0;
}

int
kiwi_mask_add_env (kiwi_mask *m, const char *const *envp, const char *name, kiwi_error_t *err)
{
    if (envp == NULL || name == NULL)
        return 0;
    size_t nl = strlen (name);
    for (size_t i = 0; envp[i] != NULL; i++)
        if (strncmp (envp[i], name, nl) == 0 && envp[i][nl] == '=')
            return kiwi_mask_add (m, envp[i] + nl + 1, err);
    return 0;
}

/* How many bytes at the start of buf are the end of form f (a tail cut
 * inside it), at least KIWI_MASK_MIN_PARTIAL; 0 when none. */
static size_t
edge_head (const form *f, const char *buf, size_t len)
{
    size_t k = f->n - 1 < len ? f->n - 1 : len;
    for (; k >= KIWI_MASK_MIN_PARTIAL; k--)
        if (memcmp (buf, f->s + f->n - k, k) == 0)
            return k;
    return 0;
}

/* The same for the end of buf and the start of f (a head cut inside it). */
static size_t
edge_tail (const form *f, const char *buf, size_t len)
{
    size_t k = f->n - 1 < len ? f->n - 1 : len;
    for (; k >= KIWI_MASK_MIN_PARTIAL; k--)
        if (memcmp (buf + len - k, f->s, k) == 0)
            return k;
    return 0;
}

static bool
loose_same (const loose *l, unsigned char c, char want)
{
    if (l->hex && c >= 'A' && c <= 'F')
        c = (unsigned char) (c - 'A' + 'a');
    return c == (unsigned char) want;
}

/* How many bytes at t[p] are one separator: a space, a line break or a
 * punctuation mark that lists or groups characters, an escaped line break
 * ("\n" inside a JSON string); in hex also a byte's "0x", "\x" or "%". */
static size_t
loose_sep (const loose *l, const unsigned char *t, size_t p, size_t len)
{
    if (p + 1 < len && t[p] == '\\' && (t[p + 1] == 'n' || t[p + 1] == 'r' || t[p + 1] == 't'))
        return 2;
    if (l->hex && p + 1 < len && (t[p] == '0' || t[p] == '\\') && (t[p + 1] == 'x' || t[p + 1] == 'X'))
        return 2;
    if (l->hex && t[p] == '%')
        return 1;
    return t[p] != '\0' && strchr (" \t\r\n:,;.-_|/\\'\"", t[p]) != NULL ? 1 : 0;
}

/* The end of a loose match of l starting at t[at] (whose first byte is the
 * skeleton's), or 0 when there is none. Between units the skeleton's next
 * byte is taken before a separator, so a value holding separator bytes
 * ("ab-cd") still matches; in hex a "0x" is always a separator ("0x0a"). */
static size_t
loose_match (const loose *l, const unsigned char *t, size_t len, size_t at)
{
    size_t unit = l->hex ? 2 : 1, p = at;
    for (size_t k = 0; k < l->n; k++) {
        if (k > 0 && k % unit == 0) {
            size_t skipped = 0;
            while (p < len) {
                bool prefix = l->hex && p + 1 < len && (t[p + 1] == 'x' || t[p + 1] == 'X');
                if (!prefix && loose_same (l, t[p], l->s[k]))
                    break;
                size_t w = loose_sep (l, t, p, len);
                if (w == 0 || skipped + w > LOOSE_SEP_MAX)
                    return 0;
                p += w;
                skipped += w;
            }
        }
        if (p >= len || !loose_same (l, t[p], l->s[k]))
            return 0;
        p++;
    }
    return p;
}

/* Calls mark(buf, from, to, arg) for every loose match of every skeleton;
 * stops at the first when mark is NULL. Whether there was one. */
static bool
loose_each (const kiwi_mask *m, const char *buf, size_t len, void (*mark) (size_t, size_t, void *), void *arg)
{
    const unsigned char *t = (const unsigned char *) buf;
    bool any = false;
    for (size_t i = 0; i < m->nloose; i++) {
        const loose *l = &m->loose[i];
        /* the skeleton's first byte, in both cases for a hex letter: the
         * candidates, each case's next one found by memchr once */
        unsigned char c0 = (unsigned char) l->s[0];
        unsigned char c1 = l->hex && c0 >= 'a' && c0 <= 'f' ? (unsigned char) (c0 - 'a' + 'A') : c0;
        const unsigned char *n0 = memchr (t, c0, len), *n1 = c1 != c0 ? memchr (t, c1, len) : NULL;
        while (n0 != NULL || n1 != NULL) {
            bool first = n0 != NULL && (n1 == NULL || n0 < n1);
            size_t at = (size_t) ((first ? n0 : n1) - t);
            if (at + l->n > len)
                break;
            const unsigned char *next = at + 1 < len ? memchr (t + at + 1, first ? c0 : c1, len - at - 1) : NULL;
            if (first)
                n0 = next;
            else
                n1 = next;
            size_t end = loose_match (l, t, len, at);
            if (end == 0)
                continue;
            if (mark == NULL)
                return true;
            any = true;
            mark (at, end, arg);
        }
    }
    return any;
}

bool
kiwi_mask_hits (const kiwi_mask *m, const char *buf, size_t len)
{
    if (m == NULL || buf == NULL)
        return false;
    for (size_t i = 0; i < m->nforms; i++)
        if (memmem (buf, len, m->forms[i].s, m->forms[i].n) != NULL || edge_head (&m->forms[i], buf, len) > 0
            || edge_tail (&m->forms[i], buf, len) > 0)
            return true;
    return loose_each (m, buf, len, NULL, NULL);
}

static void
mark_stars (size_t from, size_t to, void *buf)
{
    memset ((char *) buf + from, '*', to - from);
}

static void
mark_cov (size_t from, size_t to, void *cov)
{
    memset ((unsigned char *) cov + from, 1, to - from);
}

/* Overwrites each occurrence with '*' (length kept), longest form first:
 * the fallback when there is no memory for the work array. */
static size_t
overwrite (const kiwi_mask *m, char *buf, size_t len)
{
    for (size_t f = 0; f < m->nforms; f++) {
        size_t h = edge_head (&m->forms[f], buf, len), t = edge_tail (&m->forms[f], buf, len);
        memset (buf, '*', h);
        memset (buf + len - t, '*', t);
        char *p = buf, *end = buf + len, *hit;
        while ((hit = memmem (p, (size_t) (end - p), m->forms[f].s, m->forms[f].n)) != NULL) {
            memset (hit, '*', m->forms[f].n);
            p = hit + m->forms[f].n;
        }
    }
    loose_each (m, buf, len, mark_stars, buf);
    return len;
}

size_t
kiwi_mask_apply_buf (const kiwi_mask *m, char *buf, size_t len)
{
    if (m == NULL || m->nforms == 0 || buf == NULL || len < KIWI_MASK_MIN_LEN || !kiwi_mask_hits (m, buf, len))
        return len;
    unsigned char *cov = calloc (len, 1);
    if (cov == NULL)
        return overwrite (m, buf, len);
    for (size_t f = 0; f < m->nforms; f++) {
        const char *s = m->forms[f].s;
        size_t n = m->forms[f].n;
        memset (cov, 1, edge_head (&m->forms[f], buf, len));
        size_t t = edge_tail (&m->forms[f], buf, len);
        memset (cov + len - t, 1, t);
        char *p = buf, *end = buf + len, *hit;
        while ((size_t) (end - p) >= n && (hit = memmem (p, (size_t) (end - p), s, n)) != NULL) {
            memset (cov + (hit - buf), 1, n);
            p = hit + 1; /* overlapping occurrences of the same form too */
        }
    }
    loose_each (m, buf, len, mark_cov, cov);
    /* every run is at least KIWI_MASK_MIN_LEN (> 3) bytes long, so the
     * write position never passes the read position */
    size_t w = 0, r = 0;
    while (r < len) {
        if (!cov[r]) {
            buf[w++] = buf[r++];
            continue;
        }
        while (r < len && cov[r])
            r++;
        memcpy (buf + w, KIWI_MASK_REPLACEMENT, sizeof KIWI_MASK_REPLACEMENT - 1);
        w += sizeof KIWI_MASK_REPLACEMENT - 1;
    }
    free (cov);
    return w;
}

char *
kiwi_mask_apply (const kiwi_mask *m, const char *text)
{
    if (text == NULL)
        return NULL;
    char *c = strdup (text);
    if (c == NULL)
        return NULL;
    c[kiwi_mask_apply_buf (m, c, strlen (c))] = '\0';
    return c;
}
