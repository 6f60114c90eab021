/*
 * strv.c: NULL-terminated string vectors (see strv.h).
 */
#include "common/strv.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
kiwi_strv_take (kiwi_strv *s, char *str)
{
    if (str == NULL)
        return -1;
    if (s->n + 2 > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 8;
        char **nv = realloc (s->v, cap * sizeof *nv);
        if (nv == NULL) {
            free (str);
            return -1;
        }
        s->v = nv;
        s->cap = cap;
    }
    s->v[s->n++] = str;
    s->v[s->n] = NULL;
    return 0;
}

int
kiwi_strv_add (kiwi_strv *s, const char *str)
{
    return kiwi_strv_take (s, strdup (str));
}

int
kiwi_strv_addf (kiwi_strv *s, const char *fmt, ...)
{
    char *str = NULL;
    va_list ap;
    va_start (ap, fmt);
    int n = vasprintf (&str, fmt, ap);
    va_end (ap);
    if (n < 0)
        return -1;
    return kiwi_strv_take (s, str);
}

const char *const *
kiwi_strv_list (const kiwi_strv *s)
{
    static const char *const empty[] = { NULL };
    return s->v ? (const char *const *) s->v : empty;
}

bool
kiwi_strv_contains (const kiwi_strv *s, const char *str)
{
    return kiwi_str_listed (kiwi_strv_list (s), str);
}

bool
kiwi_str_listed (const char *const *list, const char *str)
{
    for (; list != NULL && *list != NULL; list++)
        if (strcmp (*list, str) == 0)
            return true;
    return false;
}

const char *
kiwi_strv_env_get (const kiwi_strv *s, const char *key)
{
    size_t kl = strlen (key);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp (s->v[i], key, kl) == 0 && s->v[i][kl] == '=')
            return s->v[i];
    return NULL;
}

char *
kiwi_strv_join_lines (const kiwi_strv *s)
{
    size_t total = 1;
    for (size_t i = 0; i < s->n; i++)
        total += strlen (s->v[i]) + 1;
    char *out = malloc (total);
    if (out == NULL)
        return NULL;
    char *p = out;
    for (size_t i = 0; i < s->n; i++) {
        size_t l = strlen (s->v[i]);
        memcpy (p, s->v[i], l);
        p[l] = '\n';
        p += l + 1;
    }
    *p = '\0';
    return out;
}

int
kiwi_strv_split_list (kiwi_strv *out, const char *list, const char *seps, kiwi_error_t *err)
{
    if (seps == NULL)
        seps = ",";
    size_t before = out->n;
    for (const char *p = list ? list : ""; *p != '\0';) {
        size_t n = strcspn (p, seps);
        const char *b = p, *e = p + n;
        while (b < e && isspace ((unsigned char) *b))
            b++;
        while (e > b && isspace ((unsigned char) e[-1]))
            e--;
        if (e > b && kiwi_strv_take (out, strndup (b, (size_t) (e - b))) < 0) {
            while (out->n > before)
                free (out->v[--out->n]);
            if (out->v != NULL)
                out->v[out->n] = NULL;
            return kiwi_error_make (err, ENOMEM, "splitting a list");
        }
        p += n;
        if (*p != '\0')
            p++;
    }
    return (int) (out->n - before);
}

void
kiwi_strv_free (kiwi_strv *s)
{
    for (size_t i = 0; i < s->n; i++)
        free (s->v[i]);
    free (s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}
