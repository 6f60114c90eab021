/*
 * catalog.c: version ranges (npm, PEP 440, Cargo, Composer, Gem
 * forms reduced to intervals) and the image catalogue: parsing it and
 * choosing a row for a runtime and a requirement (see image.h and
 * docs/inspection.md).
 */
#include "inspect/image/image.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "inspect/inspect-internal.h"

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

int
kiwi__family_cmp (const char *a, const char *b)
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
        if (newest == NULL || kiwi__family_cmp (e->version, newest->version) > 0)
            newest = e;
        if (have_req && kiwi_version_req_allows (requirement, e->version) == 1) {
            int cmp = best ? kiwi__family_cmp (e->version, best->version) : 0;
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
        if (above == NULL || kiwi__family_cmp (e->version, above->version) < 0)
            above = e;
    }
    return above ? above : newest;
}

