/*
 * inspect-util.c: bounded file reading, a minimal TOML reader and a
 * streaming SHA-256 for repository inspection (see inspect-internal.h).
 */
#include "inspect-internal.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cleanup.h"

int
kiwi__read_file (const char *path, size_t max, char **out, size_t *len, kiwi_error_t *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening %s", path);
    struct stat st;
    if (fstat (fd, &st) < 0)
        return kiwi_error_make (err, errno, "reading %s", path);
    if (!S_ISREG (st.st_mode))
        return kiwi_error_make (err, 0, "%s is not a regular file", path);
    if ((uint64_t) st.st_size > max)
        return kiwi_error_make (err, 0, "%s is larger than %zu bytes", path, max);
    size_t cap = (size_t) st.st_size + 1;
    cleanup_free char *buf = malloc (cap);
    if (buf == NULL)
        return kiwi_error_make (err, ENOMEM, "reading %s", path);
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = read (fd, buf + n, cap - 1 - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return kiwi_error_make (err, errno, "reading %s", path);
        }
        if (r == 0)
            break;
        n += (size_t) r;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    *out = steal_pointer (&buf);
    return 0;
}

char *
kiwi__path_join (const char *a, const char *b)
{
    char *p = NULL;
    if (a == NULL || *a == '\0' || strcmp (a, ".") == 0)
        return strdup (b);
    if (asprintf (&p, "%s/%s", a, b) < 0)
        return NULL;
    return p;
}

char *
kiwi__read_rel (const char *root, const char *rel, size_t *len)
{
    cleanup_free char *p = kiwi__path_join (root, rel);
    if (p == NULL)
        return NULL;
    char *out = NULL;
    kiwi_error_t err = NULL;
    if (kiwi__read_file (p, KIWI__MANIFEST_MAX, &out, len, &err) < 0) {
        kiwi_error_free (&err);
        return NULL;
    }
    return out;
}

bool
kiwi__has_file (const char *root, const char *rel)
{
    cleanup_free char *p = kiwi__path_join (root, rel);
    struct stat st;
    return p != NULL && lstat (p, &st) == 0 && S_ISREG (st.st_mode);
}

bool
kiwi__has_dir (const char *root, const char *rel)
{
    cleanup_free char *p = kiwi__path_join (root, rel);
    struct stat st;
    return p != NULL && lstat (p, &st) == 0 && S_ISDIR (st.st_mode);
}

void
kiwi__first_line (const char *s, char *dst, size_t cap)
{
    dst[0] = '\0';
    if (s == NULL || cap == 0)
        return;
    while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n' || *s == '\xef' || *s == '\xbb' || *s == '\xbf')
        s++; /* blanks, empty lines and a UTF-8 byte order mark */
    size_t n = strcspn (s, "\r\n");
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy (dst, s, n);
    dst[n] = '\0';
}

/* ------------------------------------------------------------------ TOML */

/* The header of a table line "[a.b]" (blanks and quotes removed), written
 * into dst; "[[a]]" (an array of tables) becomes "[[a]]". Returns false for
 * a line that is not a header. */
static bool
toml_header (const char *line, size_t n, char *dst, size_t cap)
{
    size_t i = 0;
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i >= n || line[i] != '[')
        return false;
    bool array = i + 1 < n && line[i + 1] == '[';
    size_t o = 0;
    if (array && cap > 2) {
        dst[o++] = '[';
        dst[o++] = '[';
        i++;
    }
    i++;
    for (; i < n && line[i] != ']' && o + 3 < cap; i++) {
        if (line[i] == ' ' || line[i] == '\t' || line[i] == '"' || line[i] == '\'')
            continue;
        dst[o++] = line[i];
    }
    if (array && o + 2 < cap) {
        dst[o++] = ']';
        dst[o++] = ']';
    }
    dst[o] = '\0';
    return true;
}

/* If the line starts with `key =` (key bare or quoted), returns the value's
 * start, else NULL. */
static const char *
toml_key_value (const char *line, size_t n, const char *key)
{
    size_t i = 0, kl = strlen (key);
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    char q = 0;
    if (i < n && (line[i] == '"' || line[i] == '\'')) {
        q = line[i];
        i++;
    }
    if (n - i < kl || strncmp (line + i, key, kl) != 0)
        return NULL;
    i += kl;
    if (q) {
        if (i >= n || line[i] != q)
            return NULL;
        i++;
    }
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (i >= n || line[i] != '=')
        return NULL;
    i++;
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    return line + i;
}

/* A value's text from `v`: a string without its quotes, an array or inline
 * table up to its matching bracket, or a bare value up to a comment. */
static char *
toml_value (const char *v)
{
    if (*v == '"' || *v == '\'') {
        char q = *v;
        if (strncmp (v, q == '"' ? "\"\"\"" : "'''", 3) == 0) {
            const char *e = strstr (v + 3, q == '"' ? "\"\"\"" : "'''");
            return e ? strndup (v + 3, (size_t) (e - v - 3)) : NULL;
        }
        const char *s = v + 1, *e = s;
        while (*e && *e != q && *e != '\n') {
            if (q == '"' && *e == '\\' && e[1])
                e++;
            e++;
        }
        return strndup (s, (size_t) (e - s));
    }
    if (*v == '[' || *v == '{') {
        int depth = 0;
        char q = 0;
        const char *e = v;
        for (; *e; e++) {
            if (q) {
                if (*e == '\\' && q == '"' && e[1])
                    e++;
                else if (*e == q)
                    q = 0;
                continue;
            }
            if (*e == '#') { /* a comment inside a multi-line array */
                while (*e && *e != '\n')
                    e++;
                if (!*e)
                    break;
                continue;
            }
            if (*e == '"' || *e == '\'')
                q = *e;
            else if (*e == '[' || *e == '{')
                depth++;
            else if (*e == ']' || *e == '}') {
                if (--depth == 0) {
                    e++;
                    break;
                }
            }
        }
        return strndup (v, (size_t) (e - v));
    }
    size_t n = strcspn (v, "#\r\n");
    while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    return strndup (v, n);
}

typedef bool (*toml_visit) (const char *line, size_t n, void *ud);

/* Calls visit for each line of table `section` (after its header, until
 * the next header); stops when visit returns false. */
static void
toml_walk (const char *text, const char *section, toml_visit visit, void *ud)
{
    if (text == NULL)
        return;
    char cur[256] = "";
    bool in = section[0] == '\0';
    const char *p = text;
    /* a multi-line value must not be mistaken for headers: skip inside [..] */
    int depth = 0;
    while (*p) {
        size_t n = strcspn (p, "\n");
        if (depth == 0 && toml_header (p, n, cur, sizeof cur))
            in = strcmp (cur, section) == 0;
        else if (in && !visit (p, n, ud))
            return;
        else {
            /* track open brackets of multi-line arrays outside strings */
            char q = 0;
            for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (q) {
                    if (c == '\\' && q == '"')
                        i++;
                    else if (c == q)
                        q = 0;
                    continue;
                }
                if (c == '#')
                    break;
                if (c == '"' || c == '\'')
                    q = c;
                else if (c == '[' || c == '{')
                    depth++;
                else if ((c == ']' || c == '}') && depth > 0)
                    depth--;
            }
        }
        p += n;
        if (*p == '\n')
            p++;
    }
}

typedef struct {
    const char *key;
    char *value;
} get_ctx;

static bool
get_visit (const char *line, size_t n, void *ud)
{
    get_ctx *g = ud;
    const char *v = toml_key_value (line, n, g->key);
    if (v == NULL)
        return true;
    g->value = toml_value (v);
    return false;
}

char *
kiwi__toml_get (const char *text, const char *section, const char *key)
{
    get_ctx g = { key, NULL };
    toml_walk (text, section, get_visit, &g);
    return g.value;
}

typedef struct {
    char **v;
    size_t n;
    bool failed;
    int depth; /* inside a multi-line value of a previous key */
} keys_ctx;

static bool
keys_visit (const char *line, size_t n, void *ud)
{
    keys_ctx *k = ud;
    size_t i = 0;
    while (i < n && (line[i] == ' ' || line[i] == '\t'))
        i++;
    if (k->depth == 0 && i < n && line[i] != '#' && line[i] != '\r') {
        size_t s = i;
        char q = 0;
        if (line[i] == '"' || line[i] == '\'') {
            q = line[i++];
            s = i;
            while (i < n && line[i] != q)
                i++;
        } else
            while (i < n && line[i] != '=' && line[i] != ' ' && line[i] != '\t')
                i++;
        size_t e = i;
        if (q && i < n)
            i++;
        while (i < n && (line[i] == ' ' || line[i] == '\t'))
            i++;
        if (i < n && line[i] == '=' && e > s) {
            char **nv = realloc (k->v, (k->n + 2) * sizeof *nv);
            if (nv == NULL) {
                k->failed = true;
                return false;
            }
            k->v = nv;
            k->v[k->n] = strndup (line + s, e - s);
            if (k->v[k->n] == NULL) {
                k->failed = true;
                return false;
            }
            k->v[++k->n] = NULL;
        }
    }
    /* brackets opened on this line and not closed continue the value */
    char q = 0;
    for (size_t j = 0; j < n; j++) {
        char c = line[j];
        if (q) {
            if (c == '\\' && q == '"')
                j++;
            else if (c == q)
                q = 0;
            continue;
        }
        if (c == '#')
            break;
        if (c == '"' || c == '\'')
            q = c;
        else if (c == '[' || c == '{')
            k->depth++;
        else if ((c == ']' || c == '}') && k->depth > 0)
            k->depth--;
    }
    return true;
}

char **
kiwi__toml_keys (const char *text, const char *section)
{
    keys_ctx k = { NULL, 0, false, 0 };
    toml_walk (text, section, keys_visit, &k);
    if (k.failed) {
        kiwi__strv_free_raw (k.v);
        return NULL;
    }
    if (k.v == NULL)
        k.v = calloc (1, sizeof *k.v);
    return k.v;
}

void
kiwi__strv_free_raw (char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        free (v[i]);
    free (v);
}

bool
kiwi__toml_table_nonempty (const char *text, const char *section)
{
    char **k = kiwi__toml_keys (text, section);
    bool r = k != NULL && k[0] != NULL;
    kiwi__strv_free_raw (k);
    return r;
}

bool
kiwi__toml_array_nonempty (const char *a)
{
    if (a == NULL || *a != '[')
        return false;
    for (const char *p = a + 1; *p; p++) {
        if (*p == '#') {
            while (*p && *p != '\n')
                p++;
            if (!*p)
                break;
            continue;
        }
        if (*p == ']')
            return false;
        if (!isspace ((unsigned char) *p) && *p != ',')
            return true;
    }
    return false;
}

/* --------------------------------------------------------------- SHA-256 */

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void
sha256_block (kiwi__sha256 *s, const unsigned char *b)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t) b[4 * i] << 24 | (uint32_t) b[4 * i + 1] << 16 | (uint32_t) b[4 * i + 2] << 8
               | (uint32_t) b[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR (w[i - 15], 7) ^ ROR (w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR (w[i - 2], 17) ^ ROR (w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = s->h[0], bb = s->h[1], c = s->h[2], d = s->h[3], e = s->h[4], f = s->h[5], g = s->h[6],
             h = s->h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ROR (e, 6) ^ ROR (e, 11) ^ ROR (e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + S1 + ch + K[i] + w[i];
        uint32_t S0 = ROR (a, 2) ^ ROR (a, 13) ^ ROR (a, 22);
        uint32_t mj = (a & bb) ^ (a & c) ^ (bb & c);
        uint32_t t2 = S0 + mj;
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = bb;
        bb = a;
        a = t1 + t2;
    }
    s->h[0] += a;
    s->h[1] += bb;
    s->h[2] += c;
    s->h[3] += d;
    s->h[4] += e;
    s->h[5] += f;
    s->h[6] += g;
    s->h[7] += h;
}

void
kiwi__sha256_init (kiwi__sha256 *s)
{
    static const uint32_t iv[8] = { 0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19 };
    memcpy (s->h, iv, sizeof iv);
    s->len = 0;
    s->nbuf = 0;
}

void
kiwi__sha256_update (kiwi__sha256 *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    s->len += n;
    while (n > 0) {
        size_t take = 64 - s->nbuf < n ? 64 - s->nbuf : n;
        memcpy (s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        n -= take;
        if (s->nbuf == 64) {
            sha256_block (s, s->buf);
            s->nbuf = 0;
        }
    }
}

void
kiwi__sha256_final (kiwi__sha256 *s, unsigned char out[32])
{
    uint64_t bits = s->len * 8;
    unsigned char pad = 0x80;
    kiwi__sha256_update (s, &pad, 1);
    unsigned char zero = 0;
    while (s->nbuf != 56)
        kiwi__sha256_update (s, &zero, 1);
    unsigned char l[8];
    for (int i = 0; i < 8; i++)
        l[i] = (unsigned char) (bits >> (56 - 8 * i));
    kiwi__sha256_update (s, l, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (unsigned char) (s->h[i] >> 24);
        out[4 * i + 1] = (unsigned char) (s->h[i] >> 16);
        out[4 * i + 2] = (unsigned char) (s->h[i] >> 8);
        out[4 * i + 3] = (unsigned char) s->h[i];
    }
}

void
kiwi__sha256_hex (const unsigned char d[32], char out[65])
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = hex[d[i] >> 4];
        out[2 * i + 1] = hex[d[i] & 15];
    }
    out[64] = '\0';
}

int
kiwi__sha256_file (kiwi__sha256 *s, const char *path, uint64_t *size, kiwi_error_t *err)
{
    cleanup_close int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening %s", path);
    struct stat st;
    if (fstat (fd, &st) < 0)
        return kiwi_error_make (err, errno, "reading %s", path);
    if (!S_ISREG (st.st_mode))
        return kiwi_error_make (err, 0, "%s is not a regular file", path);
    char buf[65536];
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read (fd, buf, sizeof buf);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return kiwi_error_make (err, errno, "reading %s", path);
        }
        if (r == 0)
            break;
        kiwi__sha256_update (s, buf, (size_t) r);
        total += (uint64_t) r;
    }
    if (size)
        *size = total;
    return 0;
}
