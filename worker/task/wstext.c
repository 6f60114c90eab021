/*
 * wstext.c: lines of a file's text for the session's tools (wstext.h).
 */
#include "worker/task/wstext.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define NEAREST_MAX 8        /* lines kiwi_text_nearest gives at most */
#define NEAREST_BYTES 400    /* bytes of a line (and of the probe) compared */

size_t
kiwi_text_count_lines (const char *data, size_t len)
{
    size_t n = 0;
    for (const char *p = data, *end = data + len; p < end;) {
        const char *nl = memchr (p, '\n', (size_t) (end - p));
        n++;
        p = nl ? nl + 1 : end;
    }
    return n;
}

size_t
kiwi_text_line_at (const char *data, size_t len, size_t off)
{
    if (off > len)
        off = len;
    size_t n = 1;
    for (const char *p = data, *end = data + off; p < end;) {
        const char *nl = memchr (p, '\n', (size_t) (end - p));
        if (nl == NULL)
            break;
        n++;
        p = nl + 1;
    }
    return n;
}

size_t
kiwi_text_line_start (const char *data, size_t len, size_t n)
{
    size_t off = 0;
    for (size_t i = 1; i < n; i++) {
        const char *nl = memchr (data + off, '\n', len - off);
        if (nl == NULL)
            return len;
        off = (size_t) (nl - data) + 1;
    }
    return n == 0 ? len : off;
}

size_t
kiwi_text_number (kiwi_buf *out, const char *data, size_t len, size_t first, size_t last, size_t cap)
{
    if (first == 0)
        first = 1;
    size_t done = first - 1;
    size_t off = kiwi_text_line_start (data, len, first);
    for (size_t n = first; n <= last && off < len; n++) {
        const char *p = data + off;
        const char *nl = memchr (p, '\n', len - off);
        size_t l = nl ? (size_t) (nl - p) : len - off;
        size_t shown = l > KIWI_TEXT_LINE_SHOWN ? KIWI_TEXT_LINE_SHOWN : l;
        char note[64] = "";
        if (shown < l)
            snprintf (note, sizeof note, " [... %zu more bytes of this line]", l - shown);
        /* the number, a tab, the line, the note, a newline */
        if (out->len + 12 + shown + strlen (note) + 1 > cap)
            break;
        if (kiwi_buf_appendf (out, NULL, "%6zu\t%.*s%s\n", n, (int) shown, p, note) < 0)
            break;
        done = n;
        off += l + (nl ? 1 : 0);
    }
    return done;
}

size_t
kiwi_text_find_all (const char *data, size_t len, const char *needle, size_t nlen, size_t *offs, size_t max)
{
    size_t count = 0;
    if (nlen == 0)
        return 0;
    for (size_t off = 0; off + nlen <= len;) {
        const char *hit = memmem (data + off, len - off, needle, nlen);
        if (hit == NULL)
            break;
        if (count < max)
            offs[count] = (size_t) (hit - data);
        count++;
        off = (size_t) (hit - data) + nlen;
    }
    return count;
}

static void
trim (const char **p, size_t *l)
{
    while (*l > 0 && (**p == ' ' || **p == '\t' || **p == '\r'))
        (*p)++, (*l)--;
    while (*l > 0 && ((*p)[*l - 1] == ' ' || (*p)[*l - 1] == '\t' || (*p)[*l - 1] == '\r'))
        (*l)--;
    if (*l > NEAREST_BYTES)
        *l = NEAREST_BYTES;
}

static unsigned
pair (const char *p)
{
    return (unsigned) (unsigned char) p[0] << 8 | (unsigned char) p[1];
}

size_t
kiwi_text_nearest (const char *data, size_t len, const char *probe, size_t *lines, size_t n)
{
    if (n > NEAREST_MAX)
        n = NEAREST_MAX;
    const char *q = probe;
    size_t ql = strcspn (probe, "\n");
    trim (&q, &ql);
    if (ql < 2 || n == 0)
        return 0;
    /* the probe's pairs of bytes, as a set */
    uint8_t set[65536 / 8];
    memset (set, 0, sizeof set);
    for (size_t i = 0; i + 1 < ql; i++)
        set[pair (q + i) >> 3] |= (uint8_t) (1u << (pair (q + i) & 7));
    double best[NEAREST_MAX];
    size_t best_line[NEAREST_MAX], have = 0;
    size_t ln = 0;
    for (const char *p = data, *end = data + len; p < end;) {
        const char *nl = memchr (p, '\n', (size_t) (end - p));
        size_t l = nl ? (size_t) (nl - p) : (size_t) (end - p);
        const char *t = p;
        ln++;
        p = nl ? nl + 1 : end;
        trim (&t, &l);
        if (l < 2)
            continue;
        size_t common = 0;
        for (size_t i = 0; i + 1 < l; i++)
            if (set[pair (t + i) >> 3] & (1u << (pair (t + i) & 7)))
                common++;
        if (common > ql - 1)
            common = ql - 1;
        if (common == 0)
            continue;
        double score = 2.0 * (double) common / (double) ((ql - 1) + (l - 1));
        /* keep the best n, the earlier line first on a tie */
        size_t at = have;
        while (at > 0 && best[at - 1] < score)
            at--;
        if (at >= n)
            continue;
        size_t keep = have < n ? have : n - 1;
        memmove (best + at + 1, best + at, (keep - at) * sizeof best[0]);
        memmove (best_line + at + 1, best_line + at, (keep - at) * sizeof best_line[0]);
        best[at] = score;
        best_line[at] = ln;
        if (have < n)
            have++;
    }
    /* in the file's order */
    for (size_t i = 1; i < have; i++)
        for (size_t j = i; j > 0 && best_line[j - 1] > best_line[j]; j--) {
            size_t tmp = best_line[j];
            best_line[j] = best_line[j - 1];
            best_line[j - 1] = tmp;
        }
    memcpy (lines, best_line, have * sizeof lines[0]);
    return have;
}
