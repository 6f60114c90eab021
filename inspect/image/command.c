/*
 * command.c: which runtime a test command runs (a small shell word
 * splitter, the wrappers it looks through, the runtime table's
 * executables) and which runtime an image's name tells (see image.h and
 * docs/inspection.md).
 */
#include "inspect/image/image.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"
#include "inspect/runtime.h"

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
    for (size_t r = 0; r < kiwi__n_runtimes; r++)
        for (const char *const *e = kiwi__runtimes[r].executables; *e; e++)
            if (strcmp (*e, b) == 0)
                return kiwi__runtimes[r].name;
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

/* Splits a shell command into words, with a separator marker between
 * simple commands: "\x02" after one run in the background (a lone `&`, not
 * `&&`, `&>`, `>&` or `|&`), "\x01" after any other. Quotes and
 * backslashes are honoured, expansions are kept as text. */
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
            bool background = c == '&' && p[1] != '&' && p[1] != '>' && !(p > s && strchr ("<>&|", p[-1]) != NULL);
            if (c != ' ' && c != '\t' && !words_push (out, strdup (background ? "\x02" : "\x01")))
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
    return (w[0] == '\x01' || w[0] == '\x02') && w[1] == '\0';
}

static bool
is_background_sep (const char *w)
{
    return w[0] == '\x02' && w[1] == '\0';
}

/* What a search for an executable looks for: one of `exes` (base names),
 * given one of `args` as a word after it when `args` is not NULL. */
typedef struct {
    const char *const *exes;
    const char *const *args;
} seek_t;

static bool
seek_matches (char **w, size_t i, size_t end, const seek_t *seek)
{
    if (!kiwi_str_listed (seek->exes, base_name (w[i])))
        return false;
    if (seek->args == NULL)
        return true;
    for (size_t k = i + 1; k < end; k++)
        if (kiwi_str_listed (seek->args, w[k]))
            return true;
    return false;
}

static bool command_runtime_depth (const char *command, kiwi_command_info *info, int depth, const seek_t *seek);

/* Examines the simple command words[i..end). Returns 1 when it decided, 0
 * when it names no runtime, -1 to stop (cd into a directory is recorded).
 * With `seek`, it decides when it runs what `seek` looks for, whatever
 * runtime that is; `sh SCRIPT` then runs SCRIPT. */
static int
simple_command (char **w, size_t i, size_t end, kiwi_command_info *info, int depth, const seek_t *seek)
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
            size_t j = i + 1;
            for (; j < end; j++) {
                if (w[j][0] != '-' && w[j][0] != '+')
                    break; /* a script file */
                bool c_opt = w[j][0] == '-' && w[j][1] != '-' && strchr (w[j], 'c') != NULL;
                if (w[j][1] != '-' && w[j][strlen (w[j]) - 1] == 'o') { /* -o NAME, -euo NAME */
                    if (c_opt && j + 2 < end) /* -co pipefail 'cmd' */
                        return command_runtime_depth (w[j + 2], info, depth + 1, seek) ? 1 : 0;
                    j++;
                    continue;
                }
                if (c_opt && j + 1 < end)
                    return command_runtime_depth (w[j + 1], info, depth + 1, seek) ? 1 : 0;
            }
            if (seek == NULL || j >= end)
                return 0; /* a script file is not a runtime */
            i = j;        /* but it is what `sh SCRIPT` runs */
            break;
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
    if (seek != NULL)
        return seek_matches (w, i, end, seek) ? 1 : 0;
    const char *rt = kiwi_runtime_of_executable (w[i]);
    if (rt == NULL)
        return 0;
    snprintf (info->runtime, sizeof info->runtime, "%s", rt);
    snprintf (info->exe, sizeof info->exe, "%s", base_name (w[i]));
    python_versioned (base_name (w[i]), info->version, sizeof info->version);
    return 1;
}

static bool
command_runtime_depth (const char *command, kiwi_command_info *info, int depth, const seek_t *seek)
{
    if (command == NULL || depth > 4)
        return false;
    words w = { 0 };
    if (!shell_split (command, &w)) {
        words_free (&w);
        return false;
    }
    /* A command sent to the background (`node tests/server.js & phpunit`)
     * is a service the test needs, not the test: its runtime is taken only
     * when no command in the foreground names one. A search for an
     * executable (seek) counts every command. */
    bool found = false, background_found = false;
    kiwi_command_info background = { 0 };
    size_t start = 0;
    for (size_t i = 0; i <= w.n && !found; i++) {
        if (i == w.n || is_sep (w.w[i])) {
            if (i > start && simple_command (w.w, start, i, info, depth, seek) == 1) {
                if (seek == NULL && i < w.n && is_background_sep (w.w[i])) {
                    if (!background_found)
                        background = *info;
                    background_found = true;
                    info->runtime[0] = info->exe[0] = info->version[0] = '\0';
                } else {
                    found = true;
                }
            }
            start = i + 1;
        }
    }
    words_free (&w);
    if (!found && background_found) {
        snprintf (info->runtime, sizeof info->runtime, "%s", background.runtime);
        snprintf (info->exe, sizeof info->exe, "%s", background.exe);
        snprintf (info->version, sizeof info->version, "%s", background.version);
        found = true;
    }
    return found;
}

bool
kiwi_command_runtime (const char *command, kiwi_command_info *info)
{
    memset (info, 0, sizeof *info);
    bool r = command_runtime_depth (command, info, 0, NULL);
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

bool
kiwi_command_runs_with (const char *command, const char *const *exes, const char *const *args)
{
    if (exes == NULL || exes[0] == NULL)
        return false;
    kiwi_command_info scratch;
    memset (&scratch, 0, sizeof scratch);
    seek_t seek = { exes, args };
    return command_runtime_depth (command, &scratch, 0, &seek);
}

bool
kiwi_command_runs (const char *command, const char *exe)
{
    if (exe == NULL || *exe == '\0')
        return false;
    const char *const exes[] = { base_name (exe), NULL };
    return kiwi_command_runs_with (command, exes, NULL);
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
    /* the runtime table's image names, the lowest rank first; whole names last */
    for (int rank = 1; rank <= (int) kiwi__n_runtimes; rank++)
        for (size_t r = 0; r < kiwi__n_runtimes; r++)
            for (const char *const *n = kiwi__runtimes[r].image_names; kiwi__runtimes[r].image_rank == rank && *n; n++)
                if ((*n)[0] != '=' && strstr (name, *n) != NULL)
                    return kiwi__runtimes[r].name;
    for (size_t r = 0; r < kiwi__n_runtimes; r++)
        for (const char *const *n = kiwi__runtimes[r].image_names; *n; n++)
            if ((*n)[0] == '=' && strcmp (name, *n + 1) == 0)
                return kiwi__runtimes[r].name;
    return NULL;
}
