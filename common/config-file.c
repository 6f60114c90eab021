/*
 * config-file.c: the reader of config-file.h.
 */
#include "common/config-file.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"

char *
kiwi_trim (char *s)
{
    while (isspace ((unsigned char) *s))
        s++;
    size_t n = strlen (s);
    while (n > 0 && isspace ((unsigned char) s[n - 1]))
        s[--n] = '\0';
    return s;
}

char *
kiwi_unquote (char *s)
{
    size_t n = strlen (s);
    if (n >= 2 && (s[0] == '"' || s[0] == '\'') && s[n - 1] == s[0]) {
        s[n - 1] = '\0';
        s++;
    }
    return s;
}

int
kiwi_config_file_read (const char *path, int syntax_code, kiwi_config_entry_fn fn, void *ud, kiwi_error_t *err)
{
    cleanup_fclose FILE *f = fopen (path, "re");
    if (f == NULL)
        return kiwi_error_make (err, errno, "config: cannot open `%s`", path);
    cleanup_free char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0;
    while (getline (&line, &cap, f) >= 0) {
        lineno++;
        char *s = kiwi_trim (line);
        if (*s == '#' || *s == '\0')
            continue;
        char origin[4200];
        snprintf (origin, sizeof origin, "%s:%u", path, lineno);
        char *eq = strchr (s, '=');
        if (eq == NULL)
            return kiwi_error_make_code (err, syntax_code, "%s: expected `key = value`", origin);
        *eq = '\0';
        char *key = kiwi_trim (s), *val = kiwi_unquote (kiwi_trim (eq + 1));
        if (fn (key, val, origin, ud, err) < 0)
            return -1;
    }
    if (ferror (f))
        return kiwi_error_make (err, errno, "config: reading `%s`", path);
    return 0;
}
