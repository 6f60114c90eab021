/*
 * inspect-util.c: bounded file reading, a minimal TOML reader, a streaming
 * SHA-256 and the directories one level down, for repository inspection
 * (see inspect-internal.h).
 */
#include "inspect/inspect-internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"

/* Opens a regular file (not a symlink) for reading; *st is its status.
 * Returns the descriptor, or < 0 with *err. */
static int
open_regular (const char *path, struct stat *st, kiwi_error_t *err)
{
    int fd = open (path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK);
    if (fd < 0)
        return kiwi_error_make (err, errno, "opening %s", path);
    if (fstat (fd, st) < 0) {
        int e = errno;
        close (fd);
        return kiwi_error_make (err, e, "reading %s", path);
    }
    if (!S_ISREG (st->st_mode)) {
        close (fd);
        return kiwi_error_make (err, 0, "%s is not a regular file", path);
    }
    return fd;
}

int
kiwi__read_file (const char *path, size_t max, char **out, size_t *len, kiwi_error_t *err)
{
    *out = NULL;
    if (len)
        *len = 0;
    struct stat st;
    cleanup_close int fd = open_regular (path, &st, err);
    if (fd < 0)
        return -1;
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
    return kiwi__read_rel_max (root, rel, KIWI__MANIFEST_MAX, len);
}

char *
kiwi__read_rel_max (const char *root, const char *rel, size_t max, size_t *len)
{
    cleanup_free char *p = kiwi__path_join (root, rel);
    if (p == NULL)
        return NULL;
    char *out = NULL;
    kiwi_error_t err = NULL;
    if (kiwi__read_file (p, max, &out, len, &err) < 0) {
        kiwi_error_free (&err);
        return NULL;
    }
    return out;
}

/* True if root/rel is of the file type `type` (S_IFREG, S_IFDIR), not
 * following a symlink. */
static bool
has_type (const char *root, const char *rel, mode_t type)
{
    cleanup_free char *p = kiwi__path_join (root, rel);
    struct stat st;
    return p != NULL && lstat (p, &st) == 0 && (st.st_mode & S_IFMT) == type;
}

bool
kiwi__has_file (const char *root, const char *rel)
{
    return has_type (root, rel, S_IFREG);
}

bool
kiwi__has_dir (const char *root, const char *rel)
{
    return has_type (root, rel, S_IFDIR);
}

bool
kiwi__has_in (const char *root, const char *dir, const char *file)
{
    cleanup_free char *rel = kiwi__path_join (dir, file);
    return rel && kiwi__has_file (root, rel);
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
/* `depth` after the line's n bytes: its '[' and '{' opened, ']' and '}'
 * closed, outside strings and comments (multi-line arrays and tables). */
static int
toml_bracket_depth (const char *line, size_t n, int depth)
{
    char q = 0;
    for (size_t i = 0; i < n; i++) {
        char c = line[i];
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
    return depth;
}

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
        else
            depth = toml_bracket_depth (p, n, depth); /* multi-line arrays */
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
    k->depth = toml_bracket_depth (line, n, k->depth);
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

int
kiwi__sha256_file (kiwi_sha256 *s, const char *path, uint64_t *size, kiwi_error_t *err)
{
    struct stat st;
    cleanup_close int fd = open_regular (path, &st, err);
    if (fd < 0)
        return -1;
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
        kiwi_sha256_update (s, buf, (size_t) r);
        total += (uint64_t) r;
    }
    if (size)
        *size = total;
    return 0;
}

static int
cmp_str (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

char **
kiwi__subdirs (const char *root)
{
    static const char *const skip[] = { "node_modules", "vendor", "target", "build", "dist", "out", "venv",
                                        "__pycache__", "bin", "obj", "tmp", NULL };
    DIR *d = opendir (root);
    char **v = calloc (1, sizeof *v);
    size_t n = 0;
    if (v == NULL) {
        if (d)
            closedir (d);
        return NULL;
    }
    if (d == NULL)
        return v;
    struct dirent *e;
    while ((e = readdir (d)) != NULL && n < 256) {
        if (e->d_name[0] == '.')
            continue;
        bool skipped = false;
        for (size_t i = 0; skip[i]; i++)
            skipped = skipped || strcmp (e->d_name, skip[i]) == 0;
        if (skipped || !kiwi__has_dir (root, e->d_name))
            continue;
        char **nv = realloc (v, (n + 2) * sizeof *nv);
        if (nv == NULL)
            break;
        v = nv;
        v[n] = strdup (e->d_name);
        if (v[n] == NULL)
            break;
        v[++n] = NULL;
    }
    closedir (d);
    qsort (v, n, sizeof *v, cmp_str);
    return v;
}

static int
by_name (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

size_t
kiwi__workflow_names (const char *root, char **names, size_t max)
{
    if (!kiwi__has_dir (root, ".github") || !kiwi__has_dir (root, ".github/workflows"))
        return 0;
    cleanup_free char *wdir = kiwi__path_join (root, ".github/workflows");
    DIR *d = wdir ? opendir (wdir) : NULL;
    if (d == NULL)
        return 0;
    size_t n = 0;
    struct dirent *e;
    while (n < max && (e = readdir (d)) != NULL) {
        size_t l = strlen (e->d_name);
        bool yml = (l > 4 && strcmp (e->d_name + l - 4, ".yml") == 0) || (l > 5 && strcmp (e->d_name + l - 5, ".yaml") == 0);
        if (yml && e->d_name[0] != '.' && (names[n] = strdup (e->d_name)) != NULL)
            n++;
    }
    closedir (d);
    qsort (names, n, sizeof names[0], by_name); /* the same answer whatever readdir's order */
    return n;
}
