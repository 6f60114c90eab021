/*
 * image.c: the image catalogue, version ranges, the test command's
 * executable, devcontainers, version markers and image resolution (see
 * image.h and docs/inspection.md).
 */
#include "image.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "inspect-internal.h"

/* The default catalogue compiled in from ops/images/catalog.default.tsv. */
extern const unsigned char kiwi__catalog_default_tsv[];
extern const size_t kiwi__catalog_default_tsv_len;

/* ================================================================ versions */

typedef struct {
    long p[3];
    int k; /* parts given: 0..3 */
} ver;

typedef struct {
    bool has_lo, lo_inc, has_hi, hi_inc;
    ver lo, hi;
} ival;

#define MAX_ALTS 16

static int
vcmp (const ver *a, const ver *b)
{
    for (int i = 0; i < 3; i++) {
        long x = i < a->k ? a->p[i] : 0, y = i < b->k ? b->p[i] : 0;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return 0;
}

/* v with part k-1 incremented and the rest dropped: the upper end of the
 * family that v names with k parts. */
static ver
bump (ver v, int k)
{
    ver r = { { 0, 0, 0 }, 3 };
    if (k < 1)
        k = 1;
    for (int i = 0; i < k - 1; i++)
        r.p[i] = v.p[i];
    r.p[k - 1] = v.p[k - 1] + 1;
    return r;
}

/* Parses a version at *s: optional "v", up to three numeric parts, a
 * wildcard part (x, X, *) ends it. Advances *s past it. Returns false when
 * there is no version (a lone wildcard is a version with k = 0). */
static bool
parse_ver (const char **s, ver *v)
{
    const char *p = *s;
    memset (v, 0, sizeof *v);
    if (*p == 'v' || *p == 'V')
        p++;
    if (*p == 'x' || *p == 'X' || *p == '*') {
        *s = p + 1;
        return true;
    }
    while (v->k < 3 && isdigit ((unsigned char) *p)) {
        long n = 0;
        while (isdigit ((unsigned char) *p)) {
            if (n < 100000000)
                n = n * 10 + (*p - '0');
            p++;
        }
        v->p[v->k++] = n;
        if (*p == '.' && isdigit ((unsigned char) p[1]))
            p++;
        else if (*p == '.' && (p[1] == 'x' || p[1] == 'X' || p[1] == '*')) {
            p += 2;
            break;
        } else
            break;
    }
    if (v->k == 0)
        return false;
    /* pre-release and build suffixes ("3.11.4rc1", "1.2.3-beta", "+build") are ignored */
    while (*p && !isspace ((unsigned char) *p) && *p != ',' && *p != '|')
        p++;
    *s = p;
    return true;
}

static void
ival_any (ival *iv)
{
    memset (iv, 0, sizeof *iv);
}

static void
ival_and_lo (ival *iv, ver v, bool inc)
{
    int c = iv->has_lo ? vcmp (&v, &iv->lo) : 1;
    if (!iv->has_lo || c > 0 || (c == 0 && !inc)) {
        iv->lo = v;
        iv->lo_inc = inc;
        iv->has_lo = true;
    }
}

static void
ival_and_hi (ival *iv, ver v, bool inc)
{
    int c = iv->has_hi ? vcmp (&v, &iv->hi) : -1;
    if (!iv->has_hi || c < 0 || (c == 0 && !inc)) {
        iv->hi = v;
        iv->hi_inc = inc;
        iv->has_hi = true;
    }
}

static bool
ival_nonempty (const ival *iv)
{
    if (!iv->has_lo || !iv->has_hi)
        return true;
    int c = vcmp (&iv->lo, &iv->hi);
    return c < 0 || (c == 0 && iv->lo_inc && iv->hi_inc);
}

static ival
ival_meet (const ival *a, const ival *b)
{
    ival r = *a;
    if (b->has_lo)
        ival_and_lo (&r, b->lo, b->lo_inc);
    if (b->has_hi)
        ival_and_hi (&r, b->hi, b->hi_inc);
    return r;
}

/* Applies one comparator (op, version) to iv. Returns false when the
 * comparator does not parse. */
static bool
apply_cmp (ival *iv, const char *op, const char *vs)
{
    ver v;
    const char *p = vs;
    if (!parse_ver (&p, &v))
        return false;
    int k = v.k;
    if (strcmp (op, "!=") == 0)
        return true; /* holes are not representable; irrelevant for choosing a family */
    if (k == 0) /* "*", "x", ">=*": anything */
        return true;
    if (*op == '\0' || strcmp (op, "=") == 0 || strcmp (op, "==") == 0 || strcmp (op, "===") == 0) {
        ival_and_lo (iv, v, true);
        if (k == 3)
            ival_and_hi (iv, v, true);
        else
            ival_and_hi (iv, bump (v, k), false);
    } else if (strcmp (op, ">=") == 0) {
        ival_and_lo (iv, v, true);
    } else if (strcmp (op, ">") == 0) {
        if (k < 3)
            ival_and_lo (iv, bump (v, k), true);
        else
            ival_and_lo (iv, v, false);
    } else if (strcmp (op, "<") == 0) {
        ival_and_hi (iv, v, false);
    } else if (strcmp (op, "<=") == 0) {
        if (k < 3)
            ival_and_hi (iv, bump (v, k), false);
        else
            ival_and_hi (iv, v, true);
    } else if (strcmp (op, "^") == 0) {
        ival_and_lo (iv, v, true);
        if (v.p[0] > 0 || k == 1)
            ival_and_hi (iv, bump (v, 1), false);
        else if (v.p[1] > 0 || k == 2)
            ival_and_hi (iv, bump (v, 2), false);
        else
            ival_and_hi (iv, bump (v, 3), false);
    } else if (strcmp (op, "~") == 0) {
        ival_and_lo (iv, v, true);
        ival_and_hi (iv, bump (v, k == 1 ? 1 : 2), false);
    } else if (strcmp (op, "~>") == 0 || strcmp (op, "~=") == 0) {
        /* pessimistic: the last given part may grow */
        ival_and_lo (iv, v, true);
        ival_and_hi (iv, bump (v, k == 1 ? 1 : k - 1), false);
    } else
        return false;
    return true;
}

static bool
is_op_char (char c)
{
    return c == '<' || c == '>' || c == '=' || c == '~' || c == '^' || c == '!';
}

/* Parses one alternative (comparators joined by AND) into *iv. */
static bool
parse_alt (const char *s, size_t n, ival *iv)
{
    ival_any (iv);
    char buf[256];
    if (n >= sizeof buf)
        return false;
    memcpy (buf, s, n);
    buf[n] = '\0';
    /* tokens split on blanks and commas */
    char *tok[32];
    size_t nt = 0;
    for (char *p = buf; *p && nt < 32;) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            *p++ = '\0';
        if (!*p)
            break;
        tok[nt++] = p;
        while (*p && *p != ' ' && *p != '\t' && *p != ',')
            p++;
    }
    if (nt == 0)
        return true; /* empty: anything */
    for (size_t i = 0; i < nt; i++) {
        char *t = tok[i];
        char *at = strchr (t, '@'); /* Composer stability flags: "^1.0@dev" */
        if (at)
            *at = '\0';
        if (*t == '\0')
            continue;
        /* hyphen range: A - B */
        if (i + 2 < nt && strcmp (tok[i + 1], "-") == 0) {
            ver a, b;
            const char *pa = t, *pb = tok[i + 2];
            if (!parse_ver (&pa, &a) || !parse_ver (&pb, &b))
                return false;
            if (a.k > 0)
                ival_and_lo (iv, a, true);
            if (b.k == 3)
                ival_and_hi (iv, b, true);
            else if (b.k > 0)
                ival_and_hi (iv, bump (b, b.k), false);
            i += 2;
            continue;
        }
        char op[4] = "";
        size_t ol = 0;
        while (is_op_char (t[ol]) && ol < 3)
            ol++;
        memcpy (op, t, ol);
        op[ol] = '\0';
        const char *vs = t + ol;
        if (*vs == '\0') { /* ">= 18": operator and version apart */
            if (i + 1 >= nt)
                return false;
            vs = tok[++i];
        }
        if (!apply_cmp (iv, op, vs))
            return false;
    }
    return true;
}

/* Parses a requirement into alternatives. Returns the count, < 0 when it
 * does not parse. */
static int
parse_req (const char *req, ival *alts, int max)
{
    int n = 0;
    const char *p = req;
    for (;;) {
        const char *bar = strchr (p, '|');
        size_t len = bar ? (size_t) (bar - p) : strlen (p);
        if (n >= max)
            return -1;
        if (!parse_alt (p, len, &alts[n]))
            return -1;
        n++;
        if (!bar)
            break;
        p = bar + 1;
        if (*p == '|')
            p++;
    }
    return n;
}

static bool
family_ival (const char *family, ival *iv)
{
    ver v;
    const char *p = family;
    if (!parse_ver (&p, &v) || v.k == 0)
        return false;
    ival_any (iv);
    ival_and_lo (iv, v, true);
    if (v.k == 3)
        ival_and_hi (iv, v, true);
    else
        ival_and_hi (iv, bump (v, v.k), false);
    return true;
}

int
kiwi_version_req_allows (const char *requirement, const char *family)
{
    ival alts[MAX_ALTS], fam;
    int n = parse_req (requirement, alts, MAX_ALTS);
    if (n < 0)
        return -1;
    if (!family_ival (family, &fam))
        return -1;
    for (int i = 0; i < n; i++) {
        ival m = ival_meet (&alts[i], &fam);
        if (ival_nonempty (&m))
            return 1;
    }
    return 0;
}

bool
kiwi_version_req_valid (const char *requirement)
{
    ival alts[MAX_ALTS];
    return requirement != NULL && parse_req (requirement, alts, MAX_ALTS) >= 0;
}

/* The lowest version a requirement allows (k == 0: unbounded below). */
static ver
req_floor (const char *requirement)
{
    ival alts[MAX_ALTS];
    ver lo = { { 0, 0, 0 }, 0 };
    int n = parse_req (requirement, alts, MAX_ALTS);
    bool first = true;
    for (int i = 0; i < n; i++) {
        if (!alts[i].has_lo)
            return (ver) { { 0, 0, 0 }, 0 };
        if (first || vcmp (&alts[i].lo, &lo) < 0)
            lo = alts[i].lo;
        first = false;
    }
    return lo;
}

/* =============================================================== catalogue */

typedef struct {
    char *runtime, *version, *ref;
} row;

struct kiwi_image_catalog {
    row *rows;
    kiwi_image_entry *entries;
    size_t n;
    char *origin;
};

void
kiwi_image_catalog_free (kiwi_image_catalog *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++) {
        free (c->rows[i].runtime);
        free (c->rows[i].version);
        free (c->rows[i].ref);
    }
    free (c->rows);
    free (c->entries);
    free (c->origin);
    free (c);
}

static bool
valid_runtime_name (const char *s)
{
    if (*s == '\0' || strlen (s) >= 32)
        return false;
    for (; *s; s++)
        if (!islower ((unsigned char) *s) && !isdigit ((unsigned char) *s) && *s != '-' && *s != '_')
            return false;
    return true;
}

static bool
valid_ref (const char *s)
{
    if (*s == '\0' || strlen (s) > 255)
        return false;
    for (; *s; s++)
        if (isspace ((unsigned char) *s) || iscntrl ((unsigned char) *s))
            return false;
    return true;
}

int
kiwi_image_catalog_parse (const char *text, size_t len, const char *origin, kiwi_image_catalog **out,
                          kiwi_error_t *err)
{
    *out = NULL;
    kiwi_image_catalog *c = calloc (1, sizeof *c);
    cleanup_free char *copy = strndup (text, len);
    if (c == NULL || copy == NULL || (c->origin = strdup (origin)) == NULL) {
        kiwi_image_catalog_free (c);
        return kiwi_error_make (err, ENOMEM, "image catalogue");
    }
    size_t lineno = 0;
    char *next = NULL;
    for (char *line = copy; line; line = next) {
        char *nl = strchr (line, '\n');
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = '\0';
        lineno++;
        size_t l = strlen (line);
        if (l && line[l - 1] == '\r')
            line[--l] = '\0';
        if (l == 0 || line[0] == '#')
            continue;
        char *f[3];
        char *p = line;
        int nf = 0;
        while (nf < 3 && p) {
            f[nf++] = p;
            char *tab = strchr (p, '\t');
            if (tab)
                *tab = '\0';
            p = tab ? tab + 1 : NULL;
        }
        if (nf != 3 || p != NULL) {
            kiwi_image_catalog_free (c);
            return kiwi_error_make (err, 0, "%s:%zu: expected runtime, version and image separated by TABs", origin,
                                    lineno);
        }
        if (!valid_runtime_name (f[0])) {
            kiwi_image_catalog_free (c);
            return kiwi_error_make (err, 0, "%s:%zu: bad runtime name `%s`", origin, lineno, f[0]);
        }
        ival iv;
        if (strcmp (f[1], "*") != 0 && !family_ival (f[1], &iv)) {
            kiwi_image_catalog_free (c);
            return kiwi_error_make (err, 0, "%s:%zu: bad version `%s` (a major, a major.minor, or *)", origin, lineno,
                                    f[1]);
        }
        if (!valid_ref (f[2])) {
            kiwi_image_catalog_free (c);
            return kiwi_error_make (err, 0, "%s:%zu: bad image reference `%s`", origin, lineno, f[2]);
        }
        row *nr = realloc (c->rows, (c->n + 1) * sizeof *nr);
        if (nr == NULL) {
            kiwi_image_catalog_free (c);
            return kiwi_error_make (err, ENOMEM, "image catalogue");
        }
        c->rows = nr;
        c->rows[c->n] = (row) { strdup (f[0]), strdup (f[1]), strdup (f[2]) };
        c->n++;
        if (!c->rows[c->n - 1].runtime || !c->rows[c->n - 1].version || !c->rows[c->n - 1].ref) {
            kiwi_image_catalog_free (c);
            return kiwi_error_make (err, ENOMEM, "image catalogue");
        }
    }
    if (c->n == 0) {
        kiwi_image_catalog_free (c);
        return kiwi_error_make (err, 0, "%s: the image catalogue has no rows", origin);
    }
    c->entries = calloc (c->n, sizeof *c->entries);
    if (c->entries == NULL) {
        kiwi_image_catalog_free (c);
        return kiwi_error_make (err, ENOMEM, "image catalogue");
    }
    for (size_t i = 0; i < c->n; i++)
        c->entries[i] = (kiwi_image_entry) { c->rows[i].runtime, c->rows[i].version, c->rows[i].ref };
    *out = c;
    return 0;
}

int
kiwi_image_catalog_load (const char *path, kiwi_image_catalog **out, kiwi_error_t *err)
{
    cleanup_free char *text = NULL;
    size_t len = 0;
    if (kiwi__read_file (path, 1 << 20, &text, &len, err) < 0)
        return kiwi_error_wrap (err, "image catalogue");
    return kiwi_image_catalog_parse (text, len, path, out, err);
}

int
kiwi_image_catalog_default (kiwi_image_catalog **out, kiwi_error_t *err)
{
    return kiwi_image_catalog_parse ((const char *) kiwi__catalog_default_tsv, kiwi__catalog_default_tsv_len,
                                     "catalog.default.tsv (built in)", out, err);
}

int
kiwi_image_catalog_open (const char *path, kiwi_image_catalog **out, kiwi_error_t *err)
{
    if (path != NULL && *path != '\0')
        return kiwi_image_catalog_load (path, out, err);
    return kiwi_image_catalog_default (out, err);
}

const char *
kiwi_image_catalog_origin (const kiwi_image_catalog *c)
{
    return c->origin;
}

size_t
kiwi_image_catalog_size (const kiwi_image_catalog *c)
{
    return c->n;
}

const kiwi_image_entry *
kiwi_image_catalog_get (const kiwi_image_catalog *c, size_t i)
{
    return i < c->n ? &c->entries[i] : NULL;
}

const kiwi_image_entry *
kiwi_image_catalog_by_ref (const kiwi_image_catalog *c, const char *ref)
{
    for (size_t i = 0; ref && i < c->n; i++)
        if (strcmp (c->entries[i].ref, ref) == 0)
            return &c->entries[i];
    return NULL;
}

bool
kiwi_image_catalog_has_runtime (const kiwi_image_catalog *c, const char *runtime)
{
    for (size_t i = 0; runtime && i < c->n; i++)
        if (strcmp (c->entries[i].runtime, runtime) == 0)
            return true;
    return false;
}

static int
family_cmp (const char *a, const char *b)
{
    ver x, y;
    const char *pa = a, *pb = b;
    if (!parse_ver (&pa, &x))
        memset (&x, 0, sizeof x);
    if (!parse_ver (&pb, &y))
        memset (&y, 0, sizeof y);
    return vcmp (&x, &y);
}

const kiwi_image_entry *
kiwi_image_catalog_choose (const kiwi_image_catalog *c, const char *runtime, const char *requirement,
                           kiwi_version_prefer prefer, bool *satisfied)
{
    bool sat_dummy;
    if (satisfied == NULL)
        satisfied = &sat_dummy;
    *satisfied = false;
    const kiwi_image_entry *def = NULL, *best = NULL, *newest = NULL;
    bool have_req = requirement != NULL && *requirement != '\0' && kiwi_version_req_valid (requirement);
    for (size_t i = 0; i < c->n; i++) {
        const kiwi_image_entry *e = &c->entries[i];
        if (strcmp (e->runtime, runtime) != 0)
            continue;
        if (strcmp (e->version, "*") == 0) {
            if (def == NULL)
                def = e;
            continue;
        }
        if (newest == NULL || family_cmp (e->version, newest->version) > 0)
            newest = e;
        if (have_req && kiwi_version_req_allows (requirement, e->version) == 1) {
            int cmp = best ? family_cmp (e->version, best->version) : 0;
            if (best == NULL || (prefer == KIWI_PREFER_HIGHEST ? cmp > 0 : cmp < 0))
                best = e;
        }
    }
    if (!have_req) {
        *satisfied = true;
        return def ? def : newest;
    }
    if (best != NULL) {
        *satisfied = true;
        return best;
    }
    if (newest == NULL) /* only a "*" row: take it, it may be any version */
        return def;
    /* nearest: the oldest row at or above the requirement's floor, else the newest */
    ver floor = req_floor (requirement);
    const kiwi_image_entry *above = NULL;
    for (size_t i = 0; i < c->n; i++) {
        const kiwi_image_entry *e = &c->entries[i];
        if (strcmp (e->runtime, runtime) != 0 || strcmp (e->version, "*") == 0)
            continue;
        ver v;
        const char *p = e->version;
        if (!parse_ver (&p, &v) || v.k == 0)
            continue;
        ver top = bump (v, v.k); /* the family lies wholly below the floor */
        if (floor.k > 0 && vcmp (&top, &floor) <= 0)
            continue;
        if (above == NULL || family_cmp (e->version, above->version) < 0)
            above = e;
    }
    return above ? above : newest;
}

/* ============================================================ executables */

static const struct {
    const char *exe;
    const char *runtime;
} executables[] = {
    /* Node.js and the tools its packages install */
    { "node", "node" }, { "nodejs", "node" }, { "npm", "node" }, { "npx", "node" }, { "pnpm", "node" },
    { "pnpx", "node" }, { "yarn", "node" }, { "yarnpkg", "node" }, { "corepack", "node" }, { "tsc", "node" },
    { "ts-node", "node" }, { "tsx", "node" }, { "jest", "node" }, { "vitest", "node" }, { "mocha", "node" },
    { "ava", "node" }, { "tap", "node" }, { "next", "node" }, { "nuxt", "node" }, { "vite", "node" },
    { "webpack", "node" }, { "eslint", "node" }, { "prettier", "node" }, { "playwright", "node" },
    { "cypress", "node" }, { "karma", "node" }, { "jasmine", "node" }, { "lerna", "node" }, { "nx", "node" },
    { "turbo", "node" }, { "ng", "node" },
    /* Python */
    { "python", "python" }, { "python3", "python" }, { "pip", "python" }, { "pip3", "python" },
    { "pytest", "python" }, { "py.test", "python" }, { "uv", "python" }, { "uvx", "python" },
    { "poetry", "python" }, { "pipenv", "python" }, { "tox", "python" }, { "nox", "python" },
    { "hatch", "python" }, { "pdm", "python" }, { "flake8", "python" }, { "ruff", "python" },
    { "mypy", "python" }, { "black", "python" }, { "coverage", "python" }, { "behave", "python" },
    { "django-admin", "python" },
    /* Go */
    { "go", "go" }, { "gofmt", "go" }, { "golangci-lint", "go" }, { "ginkgo", "go" }, { "gotestsum", "go" },
    /* Rust */
    { "cargo", "rust" }, { "rustc", "rust" }, { "rustup", "rust" }, { "cargo-nextest", "rust" },
    /* Ruby */
    { "ruby", "ruby" }, { "bundle", "ruby" }, { "bundler", "ruby" }, { "rake", "ruby" }, { "rspec", "ruby" },
    { "gem", "ruby" }, { "rails", "ruby" }, { "rubocop", "ruby" },
    /* PHP */
    { "php", "php" }, { "composer", "php" }, { "phpunit", "php" }, { "pest", "php" }, { "phpstan", "php" },
    /* Java and its build tools */
    { "java", "java" }, { "javac", "java" }, { "jar", "java" }, { "jshell", "java" }, { "mvn", "maven" },
    { "mvnw", "maven" }, { "gradle", "gradle" }, { "gradlew", "gradle" },
};

static const char *
base_name (const char *path)
{
    const char *s = strrchr (path, '/');
    return s ? s + 1 : path;
}

/* "python3.12" -> "3.12" (also pip3.11, python2.7). Returns true when exe
 * is a versioned Python executable. */
static bool
python_versioned (const char *b, char *ver_out, size_t cap)
{
    const char *rest = NULL;
    if (strncmp (b, "python", 6) == 0)
        rest = b + 6;
    else if (strncmp (b, "pip", 3) == 0)
        rest = b + 3;
    if (rest == NULL || !isdigit ((unsigned char) rest[0]) || rest[1] != '.' || !isdigit ((unsigned char) rest[2]))
        return false;
    for (const char *p = rest + 2; *p; p++)
        if (!isdigit ((unsigned char) *p))
            return false;
    if (ver_out)
        snprintf (ver_out, cap, "%s", rest);
    return true;
}

const char *
kiwi_runtime_of_executable (const char *exe)
{
    if (exe == NULL)
        return NULL;
    const char *b = base_name (exe);
    for (size_t i = 0; i < sizeof executables / sizeof executables[0]; i++)
        if (strcmp (executables[i].exe, b) == 0)
            return executables[i].runtime;
    if (python_versioned (b, NULL, 0))
        return "python";
    return NULL;
}

/* ----- a small shell word splitter ----- */

typedef struct {
    char **w;
    size_t n, cap;
} words;

static void
words_free (words *w)
{
    for (size_t i = 0; i < w->n; i++)
        free (w->w[i]);
    free (w->w);
    memset (w, 0, sizeof *w);
}

static bool
words_push (words *w, char *s)
{
    if (s == NULL)
        return false;
    if (w->n + 1 >= w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        char **nw = realloc (w->w, cap * sizeof *nw);
        if (nw == NULL) {
            free (s);
            return false;
        }
        w->w = nw;
        w->cap = cap;
    }
    w->w[w->n++] = s;
    return true;
}

#define SEP_WORD ((char *) 1) /* never dereferenced: marks a command separator */

/* Splits a shell command into words, with a separator marker (a NULL-like
 * "\x01" word) between simple commands. Quotes and backslashes are honoured,
 * expansions are kept as text. */
static bool
shell_split (const char *s, words *out)
{
    char buf[4096];
    size_t bl = 0;
    bool in_word = false;
    for (const char *p = s;; p++) {
        char c = *p;
        bool end_word = c == '\0' || c == ' ' || c == '\t' || c == '\n' || c == ';' || c == '&' || c == '|'
                        || c == '(' || c == ')';
        if (end_word) {
            if (in_word) {
                buf[bl] = '\0';
                if (!words_push (out, strdup (buf)))
                    return false;
                bl = 0;
                in_word = false;
            }
            if (c == '\0')
                return true;
            if (c != ' ' && c != '\t' && !words_push (out, strdup ("\x01")))
                return false;
            continue;
        }
        if (c == '#' && !in_word) {
            while (p[1] && p[1] != '\n')
                p++;
            continue;
        }
        in_word = true;
        if (c == '\'') {
            for (p++; *p && *p != '\''; p++)
                if (bl + 1 < sizeof buf)
                    buf[bl++] = *p;
            if (!*p)
                p--;
            continue;
        }
        if (c == '"') {
            for (p++; *p && *p != '"'; p++) {
                if (*p == '\\' && (p[1] == '"' || p[1] == '\\' || p[1] == '$' || p[1] == '`'))
                    p++;
                if (bl + 1 < sizeof buf)
                    buf[bl++] = *p;
            }
            if (!*p)
                p--;
            continue;
        }
        if (c == '\\' && p[1]) {
            p++;
            if (*p == '\n')
                continue;
            c = *p;
        }
        if (bl + 1 < sizeof buf)
            buf[bl++] = c;
    }
}

static bool
is_assignment (const char *w)
{
    if (!(isalpha ((unsigned char) *w) || *w == '_'))
        return false;
    for (const char *p = w; *p; p++) {
        if (*p == '=')
            return true;
        if (!isalnum ((unsigned char) *p) && *p != '_')
            return false;
    }
    return false;
}

static bool
is_sep (const char *w)
{
    return w[0] == '\x01' && w[1] == '\0';
}

static bool command_runtime_depth (const char *command, kiwi_command_info *info, int depth);

/* Examines the simple command words[i..end). Returns 1 when it decided, 0
 * when it names no runtime, -1 to stop (cd into a directory is recorded). */
static int
simple_command (char **w, size_t i, size_t end, kiwi_command_info *info, int depth)
{
    while (i < end && is_assignment (w[i]))
        i++;
    while (i < end) {
        const char *b = base_name (w[i]);
        if (strcmp (b, "env") == 0) {
            i++;
            while (i < end && (w[i][0] == '-' || is_assignment (w[i]))) {
                if ((strcmp (w[i], "-u") == 0 || strcmp (w[i], "-C") == 0 || strcmp (w[i], "-S") == 0) && i + 1 < end)
                    i++;
                i++;
            }
            continue;
        }
        if (strcmp (b, "timeout") == 0) {
            i++;
            while (i < end && w[i][0] == '-') {
                if ((strcmp (w[i], "-s") == 0 || strcmp (w[i], "-k") == 0) && i + 1 < end)
                    i++;
                i++;
            }
            if (i < end) /* the duration */
                i++;
            continue;
        }
        if (strcmp (b, "nice") == 0) {
            i++;
            while (i < end && w[i][0] == '-') {
                if (strcmp (w[i], "-n") == 0 && i + 1 < end)
                    i++;
                i++;
            }
            continue;
        }
        if (strcmp (b, "nohup") == 0 || strcmp (b, "time") == 0 || strcmp (b, "exec") == 0
            || strcmp (b, "command") == 0 || strcmp (b, "builtin") == 0 || strcmp (b, "xvfb-run") == 0
            || strcmp (b, "stdbuf") == 0 || strcmp (b, "unbuffer") == 0 || strcmp (b, "chronic") == 0) {
            i++;
            while (i < end && w[i][0] == '-')
                i++;
            continue;
        }
        if (strcmp (b, "bash") == 0 || strcmp (b, "sh") == 0 || strcmp (b, "dash") == 0 || strcmp (b, "zsh") == 0
            || strcmp (b, "ksh") == 0) {
            for (size_t j = i + 1; j < end; j++) {
                if (w[j][0] != '-' && w[j][0] != '+')
                    break; /* a script file: not a runtime */
                bool c_opt = w[j][0] == '-' && w[j][1] != '-' && strchr (w[j], 'c') != NULL;
                if (w[j][1] != '-' && w[j][strlen (w[j]) - 1] == 'o') { /* -o NAME, -euo NAME */
                    if (c_opt && j + 2 < end) /* -co pipefail 'cmd' */
                        return command_runtime_depth (w[j + 2], info, depth + 1) ? 1 : 0;
                    j++;
                    continue;
                }
                if (c_opt && j + 1 < end)
                    return command_runtime_depth (w[j + 1], info, depth + 1) ? 1 : 0;
            }
            return 0;
        }
        if (strcmp (b, "cd") == 0 || strcmp (b, "pushd") == 0) {
            if (i + 1 < end && w[i + 1][0] != '-')
                snprintf (info->dir, sizeof info->dir, "%s", w[i + 1]);
            return 0;
        }
        break;
    }
    if (i >= end)
        return 0;
    const char *rt = kiwi_runtime_of_executable (w[i]);
    if (rt == NULL)
        return 0;
    snprintf (info->runtime, sizeof info->runtime, "%s", rt);
    snprintf (info->exe, sizeof info->exe, "%s", base_name (w[i]));
    python_versioned (base_name (w[i]), info->version, sizeof info->version);
    return 1;
}

static bool
command_runtime_depth (const char *command, kiwi_command_info *info, int depth)
{
    if (command == NULL || depth > 4)
        return false;
    words w = { 0 };
    if (!shell_split (command, &w)) {
        words_free (&w);
        return false;
    }
    bool found = false;
    size_t start = 0;
    for (size_t i = 0; i <= w.n && !found; i++) {
        if (i == w.n || is_sep (w.w[i])) {
            if (i > start && simple_command (w.w, start, i, info, depth) == 1)
                found = true;
            start = i + 1;
        }
    }
    words_free (&w);
    return found;
}

bool
kiwi_command_runtime (const char *command, kiwi_command_info *info)
{
    memset (info, 0, sizeof *info);
    bool r = command_runtime_depth (command, info, 0);
    if (!r) {
        info->runtime[0] = info->exe[0] = info->version[0] = '\0';
    }
    /* a cd into an absolute path or out of the tree tells nothing about it */
    if (info->dir[0] == '/' || strstr (info->dir, "..") != NULL || info->dir[0] == '$' || info->dir[0] == '~')
        info->dir[0] = '\0';
    size_t dl = strlen (info->dir);
    while (dl > 0 && info->dir[dl - 1] == '/')
        info->dir[--dl] = '\0';
    if (strcmp (info->dir, ".") == 0)
        info->dir[0] = '\0';
    return r;
}

/* =========================================================== devcontainers */

int
kiwi_jsonc_to_json (const char *in, size_t len, char **out, size_t *out_len, kiwi_error_t *err)
{
    char *o = malloc (len + 1);
    if (o == NULL)
        return kiwi_error_make (err, ENOMEM, "devcontainer.json");
    size_t n = 0;
    for (size_t i = 0; i < len;) {
        char c = in[i];
        if (c == '"') { /* a string, copied as is */
            o[n++] = in[i++];
            while (i < len && in[i] != '"') {
                if (in[i] == '\\' && i + 1 < len)
                    o[n++] = in[i++];
                o[n++] = in[i++];
            }
            if (i < len)
                o[n++] = in[i++];
            continue;
        }
        if (c == '/' && i + 1 < len && in[i + 1] == '/') {
            while (i < len && in[i] != '\n')
                i++;
            continue;
        }
        if (c == '/' && i + 1 < len && in[i + 1] == '*') {
            i += 2;
            while (i + 1 < len && !(in[i] == '*' && in[i + 1] == '/')) {
                if (in[i] == '\n')
                    o[n++] = '\n'; /* keep line numbers for jansson's errors */
                i++;
            }
            i = i + 2 <= len ? i + 2 : len;
            o[n++] = ' ';
            continue;
        }
        if (c == ',') { /* a trailing comma: the next significant character closes */
            size_t j = i + 1;
            for (;;) {
                while (j < len && isspace ((unsigned char) in[j]))
                    j++;
                if (j + 1 < len && in[j] == '/' && in[j + 1] == '/') {
                    while (j < len && in[j] != '\n')
                        j++;
                    continue;
                }
                if (j + 1 < len && in[j] == '/' && in[j + 1] == '*') {
                    j += 2;
                    while (j + 1 < len && !(in[j] == '*' && in[j + 1] == '/'))
                        j++;
                    j += 2;
                    continue;
                }
                break;
            }
            if (j < len && (in[j] == '}' || in[j] == ']')) {
                i++;
                continue;
            }
        }
        o[n++] = in[i++];
    }
    o[n] = '\0';
    *out = o;
    if (out_len)
        *out_len = n;
    return 0;
}

int
kiwi_devcontainer_image (const char *root, char **image, char **path, char **note, kiwi_error_t *err)
{
    static const char *const paths[] = { ".devcontainer/devcontainer.json", ".devcontainer.json" };
    *image = *path = NULL;
    if (note)
        *note = NULL;
    for (size_t i = 0; i < 2; i++) {
        size_t len = 0;
        cleanup_free char *text = kiwi__read_rel (root, paths[i], &len);
        if (text == NULL)
            continue;
        cleanup_free char *json = NULL;
        size_t jl = 0;
        if (kiwi_jsonc_to_json (text, len, &json, &jl, err) < 0)
            return -1;
        json_error_t je;
        json_t *doc = json_loadb (json, jl, 0, &je);
        if (doc == NULL || !json_is_object (doc)) {
            if (note && asprintf (note, "%s does not parse (line %d: %s)", paths[i], je.line, je.text) < 0)
                *note = NULL;
            json_decref (doc);
            return 0;
        }
        json_t *img = json_object_get (doc, "image");
        if (json_is_string (img) && json_string_length (img) > 0 && json_string_length (img) < 256) {
            *image = strdup (json_string_value (img));
            *path = strdup (paths[i]);
            json_decref (doc);
            if (*image == NULL || *path == NULL) {
                free (*image);
                free (*path);
                *image = *path = NULL;
                return kiwi_error_make (err, ENOMEM, "devcontainer");
            }
            return 1;
        }
        const char *how = json_object_get (doc, "dockerComposeFile") ? "a compose file"
                          : (json_object_get (doc, "build") || json_object_get (doc, "dockerFile")
                             || json_object_get (doc, "dockerfile"))
                              ? "a Dockerfile"
                              : NULL;
        if (note && asprintf (note, "%s %s", paths[i],
                              how ? (strcmp (how, "a Dockerfile") == 0 ? "builds its image from a Dockerfile (not used)"
                                                                        : "uses a compose file (not used)")
                                  : "names no image")
                        < 0)
            *note = NULL;
        json_decref (doc);
        return 0;
    }
    return 0;
}

const char *
kiwi_runtime_of_image_ref (const char *ref)
{
    if (ref == NULL)
        return NULL;
    char name[256];
    const char *slash = strrchr (ref, '/');
    snprintf (name, sizeof name, "%s", slash ? slash + 1 : ref);
    char *cut = strchr (name, '@');
    if (cut)
        *cut = '\0';
    cut = strchr (name, ':');
    if (cut)
        *cut = '\0';
    for (char *p = name; *p; p++)
        *p = (char) tolower ((unsigned char) *p);
    static const struct {
        const char *needle;
        const char *runtime;
    } guesses[] = {
        { "node", "node" },   { "python", "python" }, { "golang", "go" },     { "rust", "rust" },
        { "ruby", "ruby" },   { "rails", "ruby" },    { "php", "php" },       { "maven", "maven" },
        { "gradle", "gradle" }, { "openjdk", "java" }, { "temurin", "java" }, { "corretto", "java" },
        { "zulu", "java" },   { "jdk", "java" },      { "java", "java" },
    };
    for (size_t i = 0; i < sizeof guesses / sizeof guesses[0]; i++)
        if (strstr (name, guesses[i].needle) != NULL)
            return guesses[i].runtime;
    if (strcmp (name, "go") == 0)
        return "go";
    return NULL;
}

/* ========================================================= version markers */

typedef struct {
    char *req;
    char *from;
    kiwi_version_prefer prefer;
} marker;

static bool
marker_set (marker *m, const char *dir, const char *file, const char *req, kiwi_version_prefer prefer)
{
    if (req == NULL || *req == '\0' || !kiwi_version_req_valid (req))
        return false;
    m->req = strdup (req);
    m->from = kiwi__path_join (dir, file);
    m->prefer = prefer;
    return true;
}

/* A version from a .tool-versions line for any of `names` ("nodejs 20.1.0"). */
static bool
tool_versions (const char *root, const char *dir, const char *const *names, char *out, size_t cap)
{
    cleanup_free char *rel = kiwi__path_join (dir, ".tool-versions");
    cleanup_free char *t = rel ? kiwi__read_rel (root, rel, NULL) : NULL;
    if (t == NULL)
        return false;
    for (char *line = t; line && *line;) {
        char *nl = strchr (line, '\n');
        if (nl)
            *nl = '\0';
        char tool[64], v[64];
        if (sscanf (line, " %63s %63s", tool, v) == 2)
            for (size_t i = 0; names[i]; i++)
                if (strcmp (tool, names[i]) == 0) {
                    /* "temurin-17.0.1+12" and the like: from the first digit */
                    const char *d = v;
                    while (*d && !isdigit ((unsigned char) *d))
                        d++;
                    if (*d) {
                        snprintf (out, cap, "%s", d);
                        return true;
                    }
                }
        line = nl ? nl + 1 : NULL;
    }
    return false;
}

static char *
rel_read (const char *root, const char *dir, const char *file)
{
    cleanup_free char *rel = kiwi__path_join (dir, file);
    return rel ? kiwi__read_rel (root, rel, NULL) : NULL;
}

static const struct {
    const char *name;
    const char *major;
} node_lts[] = {
    { "argon", "4" },     { "boron", "6" },    { "carbon", "8" }, { "dubnium", "10" }, { "erbium", "12" },
    { "fermium", "14" },  { "gallium", "16" }, { "hydrogen", "18" }, { "iron", "20" }, { "jod", "22" },
    { "krypton", "24" },
};

/* .nvmrc / .node-version text -> a requirement ("" for "use the newest") */
static void
nvmrc_requirement (const char *line, char *out, size_t cap)
{
    char l[128];
    snprintf (l, sizeof l, "%s", line);
    char *hash = strchr (l, '#');
    if (hash)
        *hash = '\0';
    size_t n = strlen (l);
    while (n && isspace ((unsigned char) l[n - 1]))
        l[--n] = '\0';
    for (char *p = l; *p; p++)
        *p = (char) tolower ((unsigned char) *p);
    out[0] = '\0';
    if (strncmp (l, "lts/", 4) == 0) {
        for (size_t i = 0; i < sizeof node_lts / sizeof node_lts[0]; i++)
            if (strcmp (l + 4, node_lts[i].name) == 0) {
                snprintf (out, cap, "%s", node_lts[i].major);
                return;
            }
        snprintf (out, cap, ">=0"); /* "lts/" followed by a star: the newest */
        return;
    }
    if (strcmp (l, "node") == 0 || strcmp (l, "stable") == 0 || strcmp (l, "latest") == 0
        || strcmp (l, "current") == 0) {
        snprintf (out, cap, ">=0");
        return;
    }
    snprintf (out, cap, "%s", l);
}

static bool
markers_node (const char *root, const char *dir, marker *m)
{
    static const char *const files[] = { ".nvmrc", ".node-version" };
    for (size_t i = 0; i < 2; i++) {
        cleanup_free char *t = rel_read (root, dir, files[i]);
        if (t == NULL)
            continue;
        char line[128], req[128];
        kiwi__first_line (t, line, sizeof line);
        nvmrc_requirement (line, req, sizeof req);
        if (marker_set (m, dir, files[i], req, KIWI_PREFER_HIGHEST))
            return true;
    }
    char v[64];
    static const char *const tv[] = { "nodejs", "node", NULL };
    if (tool_versions (root, dir, tv, v, sizeof v) && marker_set (m, dir, ".tool-versions", v, KIWI_PREFER_HIGHEST))
        return true;
    cleanup_free char *pj = rel_read (root, dir, "package.json");
    if (pj == NULL)
        return false;
    json_t *doc = json_loads (pj, 0, NULL);
    if (doc == NULL)
        return false;
    bool found = false;
    json_t *volta = json_object_get (json_object_get (doc, "volta"), "node");
    json_t *engines = json_object_get (json_object_get (doc, "engines"), "node");
    if (json_is_string (volta))
        found = marker_set (m, dir, "package.json (volta.node)", json_string_value (volta), KIWI_PREFER_HIGHEST);
    if (!found && json_is_string (engines))
        found = marker_set (m, dir, "package.json (engines.node)", json_string_value (engines), KIWI_PREFER_HIGHEST);
    json_decref (doc);
    return found;
}

static bool
markers_python (const char *root, const char *dir, marker *m)
{
    cleanup_free char *pv = rel_read (root, dir, ".python-version");
    if (pv != NULL) {
        char line[128];
        kiwi__first_line (pv, line, sizeof line);
        if (isdigit ((unsigned char) line[0]) && marker_set (m, dir, ".python-version", line, KIWI_PREFER_HIGHEST))
            return true;
    }
    char v[64];
    static const char *const tv[] = { "python", NULL };
    if (tool_versions (root, dir, tv, v, sizeof v) && marker_set (m, dir, ".tool-versions", v, KIWI_PREFER_HIGHEST))
        return true;
    cleanup_free char *pp = rel_read (root, dir, "pyproject.toml");
    if (pp != NULL) {
        cleanup_free char *rp = kiwi__toml_get (pp, "project", "requires-python");
        if (marker_set (m, dir, "pyproject.toml (requires-python)", rp, KIWI_PREFER_HIGHEST))
            return true;
        cleanup_free char *po = kiwi__toml_get (pp, "tool.poetry.dependencies", "python");
        if (marker_set (m, dir, "pyproject.toml (tool.poetry.dependencies.python)", po, KIWI_PREFER_HIGHEST))
            return true;
    }
    cleanup_free char *pf = rel_read (root, dir, "Pipfile");
    if (pf != NULL) {
        cleanup_free char *full = kiwi__toml_get (pf, "requires", "python_full_version");
        cleanup_free char *pyv = kiwi__toml_get (pf, "requires", "python_version");
        if (marker_set (m, dir, "Pipfile (requires)", full ? full : pyv, KIWI_PREFER_HIGHEST))
            return true;
    }
    return false;
}

static bool
markers_go (const char *root, const char *dir, marker *m)
{
    cleanup_free char *gm = rel_read (root, dir, "go.mod");
    if (gm == NULL)
        return false;
    char go[32] = "", tc[32] = "";
    for (char *line = gm; line && *line;) {
        char *nl = strchr (line, '\n');
        if (nl)
            *nl = '\0';
        char a[32], b[32];
        if (sscanf (line, " %31s %31s", a, b) == 2) {
            if (strcmp (a, "go") == 0 && isdigit ((unsigned char) b[0]))
                snprintf (go, sizeof go, "%s", b);
            else if (strcmp (a, "toolchain") == 0 && strncmp (b, "go", 2) == 0 && isdigit ((unsigned char) b[2]))
                snprintf (tc, sizeof tc, "%s", b + 2);
        }
        line = nl ? nl + 1 : NULL;
    }
    const char *pick = go;
    if (tc[0] && (!go[0] || family_cmp (tc, go) > 0))
        pick = tc;
    if (!pick[0])
        return false;
    char req[48];
    snprintf (req, sizeof req, ">=%s", pick);
    return marker_set (m, dir, pick == tc ? "go.mod (toolchain)" : "go.mod (go)", req, KIWI_PREFER_HIGHEST);
}

static bool
markers_rust (const char *root, const char *dir, marker *m)
{
    char req[64];
    cleanup_free char *tt = rel_read (root, dir, "rust-toolchain.toml");
    cleanup_free char *tp = rel_read (root, dir, "rust-toolchain");
    cleanup_free char *chan = NULL;
    const char *from = NULL;
    if (tt != NULL) {
        chan = kiwi__toml_get (tt, "toolchain", "channel");
        from = "rust-toolchain.toml";
    } else if (tp != NULL) {
        chan = kiwi__toml_get (tp, "toolchain", "channel"); /* the old file may be TOML too */
        if (chan == NULL) {
            char line[64];
            kiwi__first_line (tp, line, sizeof line);
            chan = strdup (line);
        }
        from = "rust-toolchain";
    }
    if (chan != NULL && isdigit ((unsigned char) chan[0])) {
        snprintf (req, sizeof req, ">=%s", chan);
        if (marker_set (m, dir, from, req, KIWI_PREFER_HIGHEST))
            return true;
    }
    cleanup_free char *ct = rel_read (root, dir, "Cargo.toml");
    if (ct == NULL)
        return false;
    cleanup_free char *rv = kiwi__toml_get (ct, "package", "rust-version");
    if (rv == NULL)
        rv = kiwi__toml_get (ct, "workspace.package", "rust-version");
    if (rv != NULL && isdigit ((unsigned char) rv[0])) {
        snprintf (req, sizeof req, ">=%s", rv);
        if (marker_set (m, dir, "Cargo.toml (rust-version)", req, KIWI_PREFER_HIGHEST))
            return true;
    }
    cleanup_free char *ed = kiwi__toml_get (ct, "package", "edition");
    if (ed != NULL && strcmp (ed, "2024") == 0)
        return marker_set (m, dir, "Cargo.toml (edition 2024)", ">=1.85", KIWI_PREFER_HIGHEST);
    return false;
}

static bool
markers_ruby (const char *root, const char *dir, marker *m)
{
    cleanup_free char *rv = rel_read (root, dir, ".ruby-version");
    if (rv != NULL) {
        char line[64];
        kiwi__first_line (rv, line, sizeof line);
        const char *v = strncmp (line, "ruby-", 5) == 0 ? line + 5 : line;
        if (isdigit ((unsigned char) v[0]) && marker_set (m, dir, ".ruby-version", v, KIWI_PREFER_HIGHEST))
            return true;
    }
    char v[64];
    static const char *const tv[] = { "ruby", NULL };
    if (tool_versions (root, dir, tv, v, sizeof v) && marker_set (m, dir, ".tool-versions", v, KIWI_PREFER_HIGHEST))
        return true;
    cleanup_free char *gf = rel_read (root, dir, "Gemfile");
    if (gf == NULL)
        return false;
    for (char *line = gf; line && *line;) {
        char *nl = strchr (line, '\n');
        if (nl)
            *nl = '\0';
        char *p = line;
        while (*p == ' ' || *p == '\t')
            p++;
        if (strncmp (p, "ruby", 4) == 0 && (p[4] == ' ' || p[4] == '(')) {
            p += 5;
            while (*p == ' ' || *p == '(')
                p++;
            if (*p == '"' || *p == '\'') {
                char q = *p++;
                char *e = strchr (p, q);
                if (e) {
                    *e = '\0';
                    return marker_set (m, dir, "Gemfile (ruby)", p, KIWI_PREFER_HIGHEST);
                }
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return false;
}

static bool
markers_php (const char *root, const char *dir, marker *m)
{
    cleanup_free char *cj = rel_read (root, dir, "composer.json");
    if (cj == NULL)
        return false;
    json_t *doc = json_loads (cj, 0, NULL);
    if (doc == NULL)
        return false;
    bool found = false;
    json_t *plat = json_object_get (json_object_get (json_object_get (doc, "config"), "platform"), "php");
    json_t *req = json_object_get (json_object_get (doc, "require"), "php");
    if (json_is_string (plat))
        found = marker_set (m, dir, "composer.json (config.platform.php)", json_string_value (plat),
                            KIWI_PREFER_HIGHEST);
    if (!found && json_is_string (req))
        found = marker_set (m, dir, "composer.json (require.php)", json_string_value (req), KIWI_PREFER_HIGHEST);
    json_decref (doc);
    return found;
}

/* The text between <tag> and </tag> in an XML document, or "". */
static void
xml_text (const char *doc, const char *tag, char *out, size_t cap)
{
    char open[96], close[96];
    snprintf (open, sizeof open, "<%s>", tag);
    snprintf (close, sizeof close, "</%s>", tag);
    out[0] = '\0';
    const char *s = strstr (doc, open);
    if (s == NULL)
        return;
    s += strlen (open);
    const char *e = strstr (s, close);
    if (e == NULL)
        return;
    while (s < e && isspace ((unsigned char) *s))
        s++;
    size_t n = (size_t) (e - s);
    while (n > 0 && isspace ((unsigned char) s[n - 1]))
        n--;
    if (n >= cap)
        n = cap - 1;
    memcpy (out, s, n);
    out[n] = '\0';
}

/* "1.8" -> "8", "17" -> "17". */
static void
java_major (const char *v, char *out, size_t cap)
{
    if (strncmp (v, "1.", 2) == 0 && isdigit ((unsigned char) v[2]))
        v += 2;
    size_t n = strspn (v, "0123456789");
    if (n >= cap)
        n = cap - 1;
    memcpy (out, v, n);
    out[n] = '\0';
}

static bool
markers_java (const char *root, const char *dir, marker *m)
{
    char maj[16] = "", req[32];
    const char *from = NULL;
    cleanup_free char *pom = rel_read (root, dir, "pom.xml");
    if (pom != NULL) {
        static const char *const tags[] = { "maven.compiler.release", "release", "maven.compiler.source",
                                            "maven.compiler.target", "java.version" };
        char javav[32];
        xml_text (pom, "java.version", javav, sizeof javav);
        for (size_t i = 0; i < sizeof tags / sizeof tags[0] && !maj[0]; i++) {
            char v[64];
            xml_text (pom, tags[i], v, sizeof v);
            if (strcmp (v, "${java.version}") == 0)
                snprintf (v, sizeof v, "%s", javav);
            java_major (v, maj, sizeof maj);
            from = "pom.xml";
        }
    }
    static const char *const gradle_files[] = { "build.gradle", "build.gradle.kts" };
    for (size_t g = 0; g < 2 && !maj[0]; g++) {
        cleanup_free char *gb = rel_read (root, dir, gradle_files[g]);
        if (gb == NULL)
            continue;
        static const char *const needles[] = { "JavaLanguageVersion.of(", "jvmToolchain(", "JavaVersion.VERSION_",
                                               "sourceCompatibility" };
        for (size_t i = 0; i < sizeof needles / sizeof needles[0] && !maj[0]; i++) {
            const char *p = strstr (gb, needles[i]);
            if (p == NULL)
                continue;
            p += strlen (needles[i]);
            while (*p && !isdigit ((unsigned char) *p) && *p != '\n')
                p++;
            char v[32];
            size_t n = strspn (p, "0123456789._");
            snprintf (v, sizeof v, "%.*s", (int) (n < 31 ? n : 31), p);
            for (char *q = v; *q; q++)
                if (*q == '_')
                    *q = '.';
            java_major (v, maj, sizeof maj);
            from = gradle_files[g];
        }
    }
    if (!maj[0]) {
        cleanup_free char *jv = rel_read (root, dir, ".java-version");
        if (jv != NULL) {
            char line[64];
            kiwi__first_line (jv, line, sizeof line);
            java_major (line, maj, sizeof maj);
            from = ".java-version";
        }
    }
    if (!maj[0]) {
        char v[64];
        static const char *const tv[] = { "java", NULL };
        if (tool_versions (root, dir, tv, v, sizeof v)) {
            java_major (v, maj, sizeof maj);
            from = ".tool-versions";
        }
    }
    if (!maj[0])
        return false;
    snprintf (req, sizeof req, ">=%s", maj);
    return marker_set (m, dir, from, req, KIWI_PREFER_LOWEST);
}

/* A wrapper's distribution version: "apache-maven-3.9.6-bin.zip" -> "3",
 * "gradle-8.5-bin.zip" -> "8". */
static bool
markers_wrapper (const char *root, const char *dir, const char *file, const char *stem, marker *m)
{
    cleanup_free char *t = rel_read (root, dir, file);
    if (t == NULL)
        return false;
    const char *p = strstr (t, stem);
    if (p == NULL)
        return false;
    p += strlen (stem);
    char v[16];
    size_t n = strspn (p, "0123456789");
    if (n == 0 || n > 8)
        return false;
    snprintf (v, sizeof v, "%.*s", (int) n, p);
    return marker_set (m, dir, file, v, KIWI_PREFER_HIGHEST);
}

static bool
markers_for (const char *root, const char *dir, const char *runtime, marker *m)
{
    if (strcmp (runtime, "node") == 0)
        return markers_node (root, dir, m);
    if (strcmp (runtime, "python") == 0)
        return markers_python (root, dir, m);
    if (strcmp (runtime, "go") == 0)
        return markers_go (root, dir, m);
    if (strcmp (runtime, "rust") == 0)
        return markers_rust (root, dir, m);
    if (strcmp (runtime, "ruby") == 0)
        return markers_ruby (root, dir, m);
    if (strcmp (runtime, "php") == 0)
        return markers_php (root, dir, m);
    if (strcmp (runtime, "java") == 0)
        return markers_java (root, dir, m);
    if (strcmp (runtime, "maven") == 0)
        return markers_wrapper (root, dir, ".mvn/wrapper/maven-wrapper.properties", "apache-maven-", m);
    if (strcmp (runtime, "gradle") == 0)
        return markers_wrapper (root, dir, "gradle/wrapper/gradle-wrapper.properties", "gradle-", m);
    return false;
}

int
kiwi_version_markers (const char *root, const char *dir, const char *runtime, char **requirement, char **from,
                      kiwi_version_prefer *prefer, kiwi_error_t *err)
{
    *requirement = *from = NULL;
    *prefer = strcmp (runtime, "java") == 0 ? KIWI_PREFER_LOWEST : KIWI_PREFER_HIGHEST;
    marker m = { NULL, NULL, KIWI_PREFER_HIGHEST };
    bool found = (dir != NULL && *dir != '\0' && markers_for (root, dir, runtime, &m))
                 || markers_for (root, "", runtime, &m);
    if (!found)
        return 0;
    if (m.req == NULL || m.from == NULL) {
        free (m.req);
        free (m.from);
        return kiwi_error_make (err, ENOMEM, "version markers");
    }
    *requirement = m.req;
    *from = m.from;
    *prefer = m.prefer;
    return 1;
}

/* ============================================================= resolution */

const char *
kiwi_image_source_str (kiwi_image_source s)
{
    switch (s) {
#define KIWI__IS_CASE(name, str)                                                                             \
    case name:                                                                                               \
        return str;
        KIWI_IMAGE_SOURCES (KIWI__IS_CASE)
#undef KIWI__IS_CASE
    }
    return "unknown";
}

void
kiwi_image_resolution_clear (kiwi_image_resolution *r)
{
    free (r->image);
    free (r->runtime);
    free (r->requirement);
    free (r->requirement_from);
    free (r->project_dir);
    free (r->reason);
    memset (r, 0, sizeof *r);
}

/* Marker files that say a directory holds a project of a runtime, in the
 * order they are tried (docs/inspection.md says why Node.js comes last). */
static const struct {
    const char *runtime;
    const char *files[8];
} runtime_markers[] = {
    { "go", { "go.mod", NULL } },
    { "rust", { "Cargo.toml", NULL } },
    { "maven", { "pom.xml", NULL } },
    { "gradle", { "build.gradle", "build.gradle.kts", "settings.gradle", "settings.gradle.kts", "gradlew", NULL } },
    { "ruby", { "Gemfile", ".ruby-version", NULL } },
    { "php", { "composer.json", NULL } },
    { "python",
      { "pyproject.toml", "requirements.txt", "setup.py", "setup.cfg", "Pipfile", "uv.lock", ".python-version",
        NULL } },
    { "node", { "package.json", ".nvmrc", ".node-version", NULL } },
};

static const char *
dir_runtime (const char *root, const char *dir, const char **which)
{
    for (size_t r = 0; r < sizeof runtime_markers / sizeof runtime_markers[0]; r++)
        for (size_t f = 0; runtime_markers[r].files[f]; f++) {
            cleanup_free char *rel = kiwi__path_join (dir, runtime_markers[r].files[f]);
            if (rel && kiwi__has_file (root, rel)) {
                if (which)
                    *which = runtime_markers[r].files[f];
                return runtime_markers[r].runtime;
            }
        }
    return NULL;
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
set_str (char **dst, const char *s, kiwi_error_t *err)
{
    free (*dst);
    *dst = strdup (s ? s : "");
    if (*dst == NULL)
        return kiwi_error_make (err, ENOMEM, "image resolution");
    return 0;
}

/* Picks the catalogue row for a runtime with the repository's markers (or
 * `forced` as the requirement) and fills out. Returns 1, or 0 when the
 * catalogue has no row for the runtime. */
static int
choose_for_runtime (const char *root, const char *dir, const char *runtime, const char *forced,
                    const char *forced_from, const kiwi_image_catalog *cat, kiwi_image_resolution *out,
                    kiwi_error_t *err)
{
    if (!kiwi_image_catalog_has_runtime (cat, runtime))
        return 0;
    cleanup_free char *req = NULL, *from = NULL;
    kiwi_version_prefer prefer = strcmp (runtime, "java") == 0 ? KIWI_PREFER_LOWEST : KIWI_PREFER_HIGHEST;
    if (forced != NULL && *forced != '\0') {
        req = strdup (forced);
        from = strdup (forced_from ? forced_from : "");
        if (req == NULL || from == NULL)
            return kiwi_error_make (err, ENOMEM, "image resolution");
    } else if (kiwi_version_markers (root, dir, runtime, &req, &from, &prefer, err) < 0)
        return -1;
    bool sat = true;
    const kiwi_image_entry *e = kiwi_image_catalog_choose (cat, runtime, req, prefer, &sat);
    if (e == NULL)
        return 0;
    if (set_str (&out->image, e->ref, err) < 0 || set_str (&out->runtime, runtime, err) < 0
        || set_str (&out->requirement, req, err) < 0 || set_str (&out->requirement_from, from, err) < 0
        || set_str (&out->project_dir, dir, err) < 0)
        return -1;
    out->satisfied = sat;
    return 1;
}

static int
set_reason (kiwi_image_resolution *out, kiwi_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

static int
set_reason (kiwi_image_resolution *out, kiwi_error_t *err, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    free (out->reason);
    int n = vasprintf (&out->reason, fmt, ap);
    va_end (ap);
    if (n < 0) {
        out->reason = NULL;
        return kiwi_error_make (err, ENOMEM, "image resolution");
    }
    return 0;
}

/* "; .nvmrc asks for 22" / "; no image satisfies go.mod (go) >=1.21, nearest" */
static void
version_note (const kiwi_image_resolution *r, char *buf, size_t cap)
{
    if (r->requirement == NULL || r->requirement[0] == '\0')
        snprintf (buf, cap, "no version declared, the runtime's default");
    else if (r->satisfied)
        snprintf (buf, cap, "%s asks for %s", r->requirement_from, r->requirement);
    else
        snprintf (buf, cap, "%s asks for %s, which no image in the catalogue has: the nearest", r->requirement_from,
                  r->requirement);
}

/* True if `dir` holds a marker file of `runtime`. */
static bool
has_runtime_marker (const char *root, const char *dir, const char *runtime)
{
    for (size_t r = 0; r < sizeof runtime_markers / sizeof runtime_markers[0]; r++) {
        if (strcmp (runtime_markers[r].runtime, runtime) != 0)
            continue;
        for (size_t f = 0; runtime_markers[r].files[f]; f++) {
            cleanup_free char *rel = kiwi__path_join (dir, runtime_markers[r].files[f]);
            if (rel && kiwi__has_file (root, rel))
                return true;
        }
    }
    return false;
}

int
kiwi_image_for_runtime (const char *root, const char *dir, const char *runtime, const char *requirement,
                        const kiwi_image_catalog *cat, kiwi_image_resolution *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    /* the runtime's own project: `dir`, the root, or the first directory
     * one level down with its markers (a frontend in web/) */
    cleanup_free char *found = NULL;
    if (dir == NULL || !has_runtime_marker (root, dir, runtime)) {
        if (!has_runtime_marker (root, "", runtime)) {
            char **subs = kiwi__subdirs (root);
            for (size_t i = 0; subs && subs[i] && found == NULL; i++)
                if (has_runtime_marker (root, subs[i], runtime))
                    found = strdup (subs[i]);
            kiwi__strv_free_raw (subs);
        }
        dir = found ? found : "";
    }
    int rc = choose_for_runtime (root, dir, runtime, requirement, "the failure", cat, out, err);
    if (rc <= 0) {
        kiwi_image_resolution_clear (out);
        return rc;
    }
    out->source = KIWI_IMAGE_FROM_SWAP;
    char note[512];
    version_note (out, note, sizeof note);
    if (set_reason (out, err, "swap to %s: %s", runtime, note) < 0) {
        kiwi_image_resolution_clear (out);
        return -1;
    }
    return 1;
}

/* Resolution in the spec's order; `refused` (non-NULL) skips the
 * devcontainer and says why in the reason. */
static int
resolve (const char *root, const char *test_command, const kiwi_image_catalog *cat, const char *refused,
         kiwi_image_resolution *out, kiwi_error_t *err)
{
    memset (out, 0, sizeof *out);
    char note[512];
    cleanup_free char *dir = NULL;
    /* 1. the devcontainer */
    cleanup_free char *dc_image = NULL, *dc_path = NULL, *dc_note = NULL;
    int dc = refused ? 0 : kiwi_devcontainer_image (root, &dc_image, &dc_path, &dc_note, err);
    if (dc < 0)
        return -1;
    if (refused != NULL && (dc_note = strdup (refused)) == NULL)
        return kiwi_error_make (err, ENOMEM, "image resolution");
    if (dc == 1) {
        const kiwi_image_entry *e = kiwi_image_catalog_by_ref (cat, dc_image);
        const char *rt = e ? e->runtime : kiwi_runtime_of_image_ref (dc_image);
        if (set_str (&out->image, dc_image, err) < 0 || set_str (&out->runtime, rt, err) < 0
            || set_str (&out->requirement, "", err) < 0 || set_str (&out->requirement_from, "", err) < 0
            || set_str (&out->project_dir, "", err) < 0
            || set_reason (out, err, "%s names %s (runtime %s)", dc_path, dc_image, rt ? rt : "unknown") < 0)
            goto fail;
        out->source = KIWI_IMAGE_FROM_DEVCONTAINER;
        out->satisfied = true;
        return 0;
    }
    const char *skipped_dc = dc_note ? dc_note : NULL;
    /* 2. the test command's executable */
    kiwi_command_info ci;
    if (kiwi_command_runtime (test_command, &ci)) {
        const char *forced = ci.version[0] ? ci.version : NULL;
        int rc = choose_for_runtime (root, ci.dir, ci.runtime, forced, "the command", cat, out, err);
        if (rc < 0)
            goto fail;
        if (rc == 1) {
            out->source = KIWI_IMAGE_FROM_COMMAND;
            version_note (out, note, sizeof note);
            if (set_reason (out, err, "the test command runs `%s` (%s)%s%s; %s%s%s", ci.exe, ci.runtime,
                            ci.dir[0] ? " in " : "", ci.dir, note, skipped_dc ? "; " : "",
                            skipped_dc ? skipped_dc : "")
                < 0)
                goto fail;
            return 0;
        }
        /* a runtime the catalogue lacks (deno, bun): the markers decide */
    }
    /* 3. marker files: the root, then one directory down */
    const char *which = NULL;
    const char *rt = dir_runtime (root, "", &which);
    if (rt == NULL) {
        char **subs = kiwi__subdirs (root);
        for (size_t i = 0; subs && subs[i] && rt == NULL; i++) {
            rt = dir_runtime (root, subs[i], &which);
            if (rt != NULL)
                dir = strdup (subs[i]);
        }
        kiwi__strv_free_raw (subs);
    }
    if (rt != NULL) {
        int rc = choose_for_runtime (root, dir ? dir : "", rt, NULL, NULL, cat, out, err);
        if (rc < 0)
            goto fail;
        if (rc == 1) {
            out->source = KIWI_IMAGE_FROM_MARKERS;
            version_note (out, note, sizeof note);
            if (set_reason (out, err, "marker %s%s%s (%s); %s%s%s", dir ? dir : "", dir ? "/" : "", which, rt, note,
                            skipped_dc ? "; " : "", skipped_dc ? skipped_dc : "")
                < 0)
                goto fail;
            return 0;
        }
    }
    /* 4. the base image */
    {
        bool sat;
        const kiwi_image_entry *e = kiwi_image_catalog_choose (cat, "base", NULL, KIWI_PREFER_HIGHEST, &sat);
        if (e == NULL)
            e = kiwi_image_catalog_get (cat, 0);
        if (set_str (&out->image, e->ref, err) < 0 || set_str (&out->runtime, e->runtime, err) < 0
            || set_str (&out->requirement, "", err) < 0 || set_str (&out->requirement_from, "", err) < 0
            || set_str (&out->project_dir, "", err) < 0
            || set_reason (out, err, "no devcontainer, command or marker names a runtime the catalogue has: %s%s%s",
                           e->ref, skipped_dc ? "; " : "", skipped_dc ? skipped_dc : "")
                   < 0)
            goto fail;
        out->source = KIWI_IMAGE_FROM_DEFAULT;
        out->satisfied = true;
    }
    return 0;
fail:
    kiwi_image_resolution_clear (out);
    return -1;
}

int
kiwi_image_resolve (const char *root, const char *test_command, const kiwi_image_catalog *cat,
                    kiwi_image_resolution *out, kiwi_error_t *err)
{
    return resolve (root, test_command, cat, NULL, out, err);
}

int
kiwi_image_resolve_past_devcontainer (const char *root, const char *test_command, const kiwi_image_catalog *cat,
                                      const char *why, kiwi_image_resolution *out, kiwi_error_t *err)
{
    return resolve (root, test_command, cat, why ? why : "the devcontainer image cannot be used", out, err);
}

char *
kiwi_image_wish_note (const kiwi_image_resolution *r)
{
    if (r->requirement == NULL || r->requirement[0] == '\0' || r->satisfied || r->image == NULL)
        return NULL;
    char *s = NULL;
    if (asprintf (&s, "%s asks for %s %s, which no image in the catalogue has; %s ran instead",
                  r->requirement_from && r->requirement_from[0] ? r->requirement_from : "the repository",
                  r->runtime && r->runtime[0] ? r->runtime : "its runtime", r->requirement, r->image)
        < 0)
        return NULL;
    return s;
}
