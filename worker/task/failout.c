/*
 * failout.c: a test run's output as a model needs it (see failout.h).
 */
#include "worker/task/failout.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/cleanup.h"

#define ESC 0x1b
#define BEL 0x07

/* The bytes after an escape sequence that starts at p[0] == ESC. */
static const char *
skip_escape (const char *p)
{
    const unsigned char *q = (const unsigned char *) p + 1;
    if (*q == '[') { /* CSI: parameters and intermediates, then a final byte */
        q++;
        while (*q != '\0' && (*q < 0x40 || *q > 0x7e))
            q++;
        return (const char *) (*q != '\0' ? q + 1 : q);
    }
    if (*q == ']' || *q == 'P' || *q == 'X' || *q == '^' || *q == '_') { /* a string, to BEL or ST */
        q++;
        while (*q != '\0' && *q != BEL && !(*q == ESC && q[1] == '\\'))
            q++;
        if (*q == BEL)
            return (const char *) q + 1;
        return (const char *) (*q == ESC ? q + 2 : q);
    }
    while (*q >= 0x20 && *q <= 0x2f) /* intermediates (ESC ( B), then the final byte */
        q++;
    return (const char *) (*q != '\0' ? q + 1 : q);
}

char *
kiwi_failout_clean (const char *text)
{
    kiwi_buf b = KIWI_BUF_INIT;
    size_t line_start = 0;
    bool overwrite = false; /* a bare \r came: the next text replaces the line */
    const char *p = text ? text : "";
    if (kiwi_buf_reserve (&b, strlen (p), NULL) < 0)
        return NULL;
    while (*p != '\0') {
        if (*p == ESC) {
            p = skip_escape (p);
            continue;
        }
        if (*p == '\r') {
            if (p[1] != '\n')
                overwrite = true;
            p++;
            continue;
        }
        if (*p == '\n') {
            overwrite = false;
            if (kiwi_buf_append (&b, "\n", 1, NULL) < 0)
                goto oom;
            line_start = b.len;
            p++;
            continue;
        }
        if (overwrite) {
            b.len = line_start;
            overwrite = false;
        }
        if (kiwi_buf_append (&b, p, 1, NULL) < 0)
            goto oom;
        p++;
    }
    return kiwi_buf_steal (&b, NULL);
oom:
    kiwi_buf_free (&b);
    return NULL;
}

char *
kiwi_failout_clean_tail (const char *text, size_t max, size_t *cut)
{
    char *clean = kiwi_failout_clean (text);
    size_t l = clean ? strlen (clean) : 0;
    if (cut)
        *cut = 0;
    if (l <= max)
        return clean;
    const char *from = clean + l - max;
    while (*from != '\0' && ((unsigned char) *from & 0xC0) == 0x80)
        from++; /* not in the middle of a character */
    if (cut)
        *cut = (size_t) (from - clean);
    memmove (clean, from, strlen (from) + 1);
    return clean;
}

static const char *const markers[] = {
    "FAIL", "Error", "ERROR", "\xe2\x9c\x96" /* ✖ */, "\xe2\x9c\x97" /* ✗ */, "\xe2\x97\x8f" /* ● */,
    "panicked", "Traceback", "not ok", "Exception", NULL,
};

static bool
has_marker (const char *line, size_t len)
{
    for (size_t k = 0; markers[k]; k++)
        if (memmem (line, len, markers[k], strlen (markers[k])) != NULL)
            return true;
    return false;
}

typedef struct {
    const char *s;
    size_t len;  /* without the newline */
    size_t skip; /* bytes cut from its start when kept */
    bool keep;
} line;

#define GAP_COST 48   /* a "[... N lines ...]" marker line */
#define CUT_NOTE 32   /* a "[... N bytes cut] " prefix */

/* What keeping line l costs (its cut part, a cut's note, the newline). */
static size_t
cost (const line *l)
{
    return l->len - l->skip + 1 + (l->skip ? CUT_NOTE : 0);
}

/* Keeps lines[i] (of n) when it fits in *left; a line longer than
 * `quarter` bytes is first cut to its last `quarter`. Each run of lines
 * left out costs one marker line: keeping a line inside such a run splits
 * it (one marker more), keeping the last line of a run ends it (one less). */
static bool
take (line *lines, size_t n, size_t i, size_t *left, size_t quarter)
{
    line *l = &lines[i];
    if (l->keep)
        return true;
    if (l->len > quarter)
        l->skip = l->len - quarter;
    bool before = i == 0 || lines[i - 1].keep, after = i + 1 == n || lines[i + 1].keep;
    size_t c = cost (l) + (!before && !after ? GAP_COST : 0);
    if (c > *left + (before && after ? GAP_COST : 0))
        return false;
    *left = *left + (before && after ? GAP_COST : 0) - c;
    l->keep = true;
    return true;
}

char *
kiwi_failout_fit (const char *text, size_t budget)
{
    char *c = kiwi_failout_clean (text);
    if (c == NULL || strlen (c) <= budget)
        return c;
    size_t n = 1;
    for (const char *p = c; *p; p++)
        n += *p == '\n';
    cleanup_free line *lines = calloc (n, sizeof *lines);
    if (lines == NULL) {
        free (c);
        return NULL;
    }
    n = 0;
    for (const char *p = c;;) {
        const char *e = strchr (p, '\n');
        lines[n++] = (line) { .s = p, .len = e ? (size_t) (e - p) : strlen (p) };
        if (e == NULL)
            break;
        p = e + 1;
    }
    if (n > 1 && lines[n - 1].len == 0) /* the final newline */
        n--;
    size_t quarter = budget / 4 > 64 ? budget / 4 : 64;
    /* 1. the last lines, up to a third of the budget */
    size_t left = budget / 3 > GAP_COST ? budget / 3 - GAP_COST : 0, first_tail = n; /* all of it one run left out */
    while (first_tail > 0 && take (lines, n, first_tail - 1, &left, quarter))
        first_tail--;
    left += budget - budget / 3;
    /* 2. the failure markers' lines and the lines after them, earliest first */
    bool full = false;
    for (size_t i = 0; i < first_tail && !full; i++) {
        if (!has_marker (lines[i].s, lines[i].len))
            continue;
        for (size_t j = i; j < first_tail && j <= i + KIWI_FAILOUT_AFTER && !full; j++)
            full = !take (lines, n, j, &left, quarter);
    }
    /* 3. what is left, to more of the last lines */
    for (size_t j = first_tail; j > 0 && take (lines, n, j - 1, &left, quarter); j--)
        ;
    kiwi_buf b = KIWI_BUF_INIT;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        if (!lines[i].keep) {
            size_t k = i;
            while (k < n && !lines[k].keep)
                k++;
            rc = kiwi_buf_appendf (&b, NULL, "[... %zu line%s of passing output left out]\n", k - i,
                                   k - i == 1 ? "" : "s");
            i = k;
            continue;
        }
        if (lines[i].skip)
            rc = kiwi_buf_appendf (&b, NULL, "[... %zu bytes cut] ", lines[i].skip);
        if (rc == 0)
            rc = kiwi_buf_appendf (&b, NULL, "%.*s\n", (int) (lines[i].len - lines[i].skip),
                                   lines[i].s + lines[i].skip);
        i++;
    }
    free (c);
    if (rc < 0) {
        kiwi_buf_free (&b);
        return NULL;
    }
    return kiwi_buf_steal (&b, NULL);
}
