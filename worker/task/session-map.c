/*
 * session-map.c: the repository map the Architect reads (see
 * session-internal.h): one line a file, sorted by path, the files the
 * failing output names first; each with its line count, `[test]` when its
 * path says it is a test, and the first top-level symbols of a source file
 * of a common language, found by line-anchored patterns (no parser). The
 * whole map stays within a byte budget and says how many files it left
 * out.
 */
#include "worker/task/session-internal.h"

#include <ctype.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "worker/task/wspath.h"
#include "worker/task/wstext.h"

#define MAP_FILES_MAX 20000           /* paths listed before the map is made */
#define MAP_READ_MAX (1024 * 1024)    /* bytes of a file read for its lines and symbols */
#define MAP_SYMBOL_MAX 48             /* bytes of one symbol's name */

/* ---------- tests, by path ---------- */

bool
kiwi__session_is_test_path (const char *path)
{
    static const char *const names[] = { "test_*.py", "*_test.py", "*_test.go",  "*.test.[jt]s", "*.test.[jt]sx",
                                         "*.spec.[jt]s", "*.spec.[jt]sx", "*.test.mjs", "*.test.cjs", "*Test.java",
                                         "*Test.kt", "*_spec.rb", "*_test.rb", "*_test.rs", NULL };
    static const char *const dirs[] = { "tests/", "test/", "__tests__/", "spec/", "src/test/", NULL };
    const char *base = strrchr (path, '/');
    base = base ? base + 1 : path;
    for (size_t i = 0; names[i]; i++)
        if (fnmatch (names[i], base, 0) == 0)
            return true;
    for (size_t i = 0; dirs[i]; i++)
        for (const char *p = path; (p = strstr (p, dirs[i])) != NULL; p++)
            if (p == path || p[-1] == '/')
                return true;
    return false;
}

/* ---------- top-level symbols, by line-anchored patterns ---------- */

typedef struct {
    const char *ext[6];     /* the file name's ends */
    const char *kw[8];      /* a symbol's line starts with one of these (after the modifiers), then a space */
    bool modifiers;         /* export, pub, public... may come first */
    bool const_exported;    /* `const` counts only after `export` (JS/TS) */
} lang;

static const lang langs[] = {
    { { ".py", NULL }, { "def", "class", "async def", NULL }, false, false },
    { { ".go", NULL }, { "func", "type", NULL }, false, false },
    { { ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx" }, { "function", "class", "const", "async function", NULL },
      true, true },
    { { ".rs", NULL }, { "fn", "struct", "impl", "enum", "trait", NULL }, true, false },
    { { ".java", ".kt", NULL }, { "class", "interface", "enum", "record", "object", "fun", NULL }, true, false },
};

static const lang *
lang_of (const char *path)
{
    size_t pl = strlen (path);
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
        for (size_t j = 0; j < 6 && langs[i].ext[j]; j++) {
            size_t el = strlen (langs[i].ext[j]);
            if (pl > el && strcmp (path + pl - el, langs[i].ext[j]) == 0)
                return &langs[i];
        }
    return NULL;
}

/* `line` (not NUL-terminated, `len` bytes) starts with `word` and a space
 * (or, for Rust's impl, its generics): the rest, or NULL. */
static const char *
starts (const char *line, size_t len, const char *word)
{
    size_t wl = strlen (word);
    if (len > wl && memcmp (line, word, wl) == 0 && (line[wl] == ' ' || line[wl] == '\t'))
        return line + wl + 1;
    if (len > wl && memcmp (line, word, wl) == 0 && line[wl] == '<' && strcmp (word, "impl") == 0)
        return line + wl; /* impl<T> ... */
    return NULL;
}

/* The symbol a line declares at column 0, into out (NUL-terminated), or
 * false. */
static bool
symbol (const lang *lg, const char *line, size_t len, char *out, size_t cap)
{
    static const char *const mods[] = { "export", "default", "pub", "pub(crate)", "public", "private", "protected",
                                        "internal", "abstract", "final", "static", "sealed", "data", "open",
                                        "unsafe", "declare", NULL };
    const char *end = line + len, *p = line;
    bool exported = false;
    for (bool again = lg->modifiers; again;) {
        again = false;
        for (size_t i = 0; mods[i]; i++) {
            const char *r = starts (p, (size_t) (end - p), mods[i]);
            if (r != NULL) {
                exported = exported || strcmp (mods[i], "export") == 0;
                p = r;
                again = true;
                break;
            }
        }
    }
    const char *rest = NULL, *kw = NULL;
    for (size_t i = 0; lg->kw[i] && rest == NULL; i++)
        if ((rest = starts (p, (size_t) (end - p), lg->kw[i])) != NULL)
            kw = lg->kw[i];
    if (rest == NULL || (lg->const_exported && strcmp (kw, "const") == 0 && !exported))
        return false;
    while (rest < end && (*rest == ' ' || *rest == '*'))
        rest++;
    if (strcmp (kw, "func") == 0 && rest < end && *rest == '(') { /* a Go method: (r *T) Name */
        const char *close = memchr (rest, ')', (size_t) (end - rest));
        if (close == NULL)
            return false;
        rest = close + 1;
        while (rest < end && *rest == ' ')
            rest++;
    }
    size_t n = 0;
    if (strcmp (kw, "impl") == 0) /* `impl<T> Trait for Type`: up to the brace */
        while (rest + n < end && rest[n] != '{' && n + 1 < cap && n < MAP_SYMBOL_MAX)
            n++;
    else
        while (rest + n < end && (isalnum ((unsigned char) rest[n]) || rest[n] == '_' || rest[n] == '$')
               && n + 1 < cap && n < MAP_SYMBOL_MAX)
            n++;
    while (n > 0 && rest[n - 1] == ' ')
        n--;
    if (n == 0)
        return false;
    memcpy (out, rest, n);
    out[n] = '\0';
    return true;
}

/* One file's line: "path (N lines) [test]: sym, sym" (and " [named in the
 * failing output]"). */
static void
file_line (const char *root, const char *path, bool named, size_t max_symbols, kiwi_buf *line)
{
    kiwi_buf_reset (line);
    kiwi_buf_append_str (line, path, NULL);
    if (strstr (path, " -> ") != NULL) { /* a symlink, as kiwi_ws_find names it */
        kiwi_buf_append_str (line, "\n", NULL);
        return;
    }
    cleanup_free char *data = NULL;
    size_t len = 0;
    int truncated = 0;
    kiwi_error_t err = NULL;
    if (kiwi_ws_read (root, path, 0, MAP_READ_MAX, &data, &len, &truncated, &err) < 0) {
        kiwi_error_free (&err);
        kiwi_buf_append_str (line, " (unreadable)\n", NULL);
        return;
    }
    bool binary = memchr (data, '\0', len < 8192 ? len : 8192) != NULL;
    if (binary)
        kiwi_buf_appendf (line, NULL, " (binary%s)", truncated ? ", over 1 MiB" : "");
    else
        kiwi_buf_appendf (line, NULL, " (%zu%s lines)", kiwi_text_count_lines (data, len), truncated ? "+" : "");
    if (kiwi__session_is_test_path (path))
        kiwi_buf_append_str (line, " [test]", NULL);
    if (named)
        kiwi_buf_append_str (line, " [in the failing output]", NULL);
    const lang *lg = binary ? NULL : lang_of (path);
    size_t found = 0, more = 0;
    for (size_t off = 0; lg != NULL && off < len;) {
        const char *nl = memchr (data + off, '\n', len - off);
        size_t ll = nl ? (size_t) (nl - (data + off)) : len - off;
        char name[MAP_SYMBOL_MAX + 1];
        if (ll > 0 && !isspace ((unsigned char) data[off]) && symbol (lg, data + off, ll, name, sizeof name)) {
            if (found < max_symbols)
                kiwi_buf_appendf (line, NULL, "%s%s", found ? ", " : ": ", name);
            else
                more++;
            found++;
        }
        off += ll + 1;
    }
    if (more)
        kiwi_buf_appendf (line, NULL, ", ... %zu more", more);
    kiwi_buf_append_str (line, "\n", NULL);
}

/* `word` in `output` as a whole name: not inside a longer identifier, nor
 * after a dot (the tail of a longer dotted name). */
static bool
has_word (const char *output, const char *word)
{
    size_t wl = strlen (word);
    for (const char *p = output; (p = strstr (p, word)) != NULL; p++) {
        bool before = p == output || !(isalnum ((unsigned char) p[-1]) || p[-1] == '_' || p[-1] == '.');
        bool after = !(isalnum ((unsigned char) p[wl]) || p[wl] == '_');
        if (before && after)
            return true;
    }
    return false;
}

/* A Python file named by its module: "billing/price.py" as "billing.price"
 * (pytest's and logging's way, an ImportError's), or by any longer dotted
 * tail of its path ("src/billing/price.py": "billing.price"); a package's
 * __init__.py by the package. Two parts at least: a lone module name is
 * too common a word. */
static bool
module_named_in (const char *output, const char *path)
{
    size_t l = strlen (path);
    if (l < 4 || strcmp (path + l - 3, ".py") != 0 || l >= 512)
        return false;
    char mod[512];
    memcpy (mod, path, l - 3);
    mod[l - 3] = '\0';
    size_t ml = strlen (mod);
    if (ml >= 9 && strcmp (mod + ml - 9, "/__init__") == 0)
        mod[ml - 9] = '\0';
    for (char *p = mod; *p; p++) {
        if (*p == '/')
            *p = '.';
        else if (!(isalnum ((unsigned char) *p) || *p == '_'))
            return false; /* not a name Python imports */
    }
    /* each tail from a part on, while it has two parts */
    for (const char *t = mod; t != NULL && strchr (t, '.') != NULL; t = strchr (t, '.'), t = t ? t + 1 : NULL)
        if (has_word (output, t))
            return true;
    return false;
}

/* The output names `path`: the whole path, or its base name after a
 * separator (a traceback's absolute path, a Go test's file:line), or for
 * Python its dotted module. */
static bool
named_in (const char *output, const char *path)
{
    if (output == NULL || *output == '\0' || strstr (path, " -> ") != NULL)
        return false;
    if (strstr (output, path) != NULL || module_named_in (output, path))
        return true;
    const char *base = strrchr (path, '/');
    if (base == NULL || strlen (base + 1) < 5)
        return false;
    return has_word (output, base + 1);
}

static int
by_path (const void *a, const void *b)
{
    return strcmp (*(char *const *) a, *(char *const *) b);
}

char *
kiwi__session_map (const char *root, const char *output, size_t budget, size_t max_symbols)
{
    cleanup_strv kiwi_strv files = KIWI_STRV_INIT;
    int cut = 0;
    kiwi_error_t err = NULL;
    if (kiwi_ws_find (root, "", "*", MAP_FILES_MAX, &files, &cut, &err) < 0) {
        char *out = NULL;
        if (asprintf (&out, "(no map: %s)\n", kiwi_error_msg (err)) < 0)
            out = NULL;
        kiwi_error_free (&err);
        return out;
    }
    if (files.n > 1)
        qsort (files.v, files.n, sizeof files.v[0], by_path);
    /* the files the failing output names, then the others, each in path order */
    bool *named = calloc (files.n ? files.n : 1, sizeof *named);
    if (named == NULL)
        return NULL;
    for (size_t i = 0; i < files.n; i++)
        named[i] = named_in (output, files.v[i]);
    kiwi_buf out = KIWI_BUF_INIT, line = KIWI_BUF_INIT;
    kiwi_buf_appendf (&out, NULL,
                      "%zu files%s, by path (the failing output's first); `(N lines)`, `[test]` for a test file, "
                      "and top-level symbols after ':'\n",
                      files.n, cut ? " or more" : "");
    size_t shown = 0;
    bool full = false;
    for (int pass = 0; pass < 2 && !full; pass++)
        for (size_t i = 0; i < files.n && !full; i++) {
            if (named[i] != (pass == 0))
                continue;
            file_line (root, files.v[i], named[i], max_symbols, &line);
            /* room kept for the cut line */
            if (out.len + line.len + 80 > budget) {
                full = true;
                break;
            }
            kiwi_buf_append (&out, line.data, line.len, NULL);
            shown++;
        }
    if (shown < files.n || cut)
        kiwi_buf_appendf (&out, NULL, "... %zu%s more files not shown; use find_files\n", files.n - shown,
                          cut ? " or more" : "");
    free (named);
    kiwi_buf_free (&line);
    return kiwi_buf_steal (&out, NULL);
}
