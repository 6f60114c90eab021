/*
 * session-files.c: the Implementer's tools over the workspace's files
 * (see session-internal.h): list, read (numbered, by line range), write,
 * edit (by text, with the result shown around it), insert lines, search
 * and find files. Paths go through wspath.h, text through wstext.h.
 *
 * Every argument comes from the model and is hostile: numbers are checked
 * for their type and range, texts for their size, and every output is
 * bounded, with a line saying how to read on when it is cut.
 */
#include "worker/task/session-internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/cleanup.h"
#include "worker/task/wspath.h"
#include "worker/task/wstext.h"

#define READ_MAX (64 * 1024)   /* bytes read_file shows */
#define SNIPPET_MAX (4 * 1024) /* bytes of the result an edit shows */
#define SNIPPET_AROUND 3       /* lines shown either side of an edit */
#define NEAREST_SHOWN 3        /* lines shown when old_text is not found */
#define MATCHES_NAMED 20       /* line numbers named when old_text occurs more than once */
#define LIST_MAX 500
#define FOUND_MAX 200          /* hits of search and find_files */

/* An optional integer argument within lo..hi: absent or null gives dflt. */
static int
arg_int (json_t *args, const char *key, long long lo, long long hi, long long dflt, long long *out, kiwi_error_t *err)
{
    json_t *v = json_object_get (args, key);
    if (v == NULL || json_is_null (v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer (v))
        return kiwi_error_make (err, 0, "`%s` must be an integer", key);
    long long n = (long long) json_integer_value (v);
    if (n < lo || n > hi)
        return kiwi_error_make (err, 0, "`%s` is %lld; it must be within %lld..%lld", key, n, lo, hi);
    *out = n;
    return 0;
}

/* An optional boolean argument: absent or null gives false. */
static int
arg_bool (json_t *args, const char *key, bool *out, kiwi_error_t *err)
{
    json_t *v = json_object_get (args, key);
    *out = false;
    if (v == NULL || json_is_null (v))
        return 0;
    if (!json_is_boolean (v))
        return kiwi_error_make (err, 0, "`%s` must be true or false", key);
    *out = json_is_true (v);
    return 0;
}

/* A string argument that holds no NUL byte and at most `max` bytes. */
static int
arg_text (json_t *args, const char *key, size_t max, const char **out, kiwi_error_t *err)
{
    json_t *v = json_object_get (args, key);
    *out = NULL;
    if (v == NULL || json_is_null (v))
        return 0;
    if (!json_is_string (v))
        return kiwi_error_make (err, 0, "`%s` must be a string", key);
    if (strlen (json_string_value (v)) != json_string_length (v))
        return kiwi_error_make (err, 0, "`%s` holds a NUL byte", key);
    if (json_string_length (v) > max)
        return kiwi_error_make (err, 0, "`%s` is longer than %zu bytes", key, max);
    *out = json_string_value (v);
    return 0;
}

/* The whole file, at most KIWI_WS_FILE_MAX bytes. Caller frees *data. */
static int
read_whole (kiwi__session *s, const char *tool, const char *path, char **data, size_t *len, kiwi_error_t *err)
{
    int truncated = 0;
    if (kiwi_ws_read (s->env->workspace, path, 0, KIWI_WS_FILE_MAX, data, len, &truncated, err) < 0)
        return -1;
    if (truncated) {
        free (*data);
        *data = NULL;
        return kiwi_error_make (err, 0, "%s of `%s`: the file is larger than %u bytes", tool, path,
                                KIWI_WS_FILE_MAX);
    }
    return 0;
}

char *
kiwi__tool_list_files (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    long long depth = 2;
    if (arg_int (args, "depth", 1, 8, 2, &depth, err) < 0)
        return NULL;
    cleanup_strv kiwi_strv files = KIWI_STRV_INIT;
    if (kiwi_ws_list (s->env->workspace, path ? path : "", (int) depth, LIST_MAX, &files, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "list %s", path && *path ? path : ".");
    if (files.n >= LIST_MAX)
        kiwi_strv_addf (&files, "... cut at %d entries; list a directory or a smaller depth", LIST_MAX);
    return files.n ? kiwi_strv_join_lines (&files) : strdup ("(empty directory)\n");
}

char *
kiwi__tool_read_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    long long start = 1, end = KIWI_WS_FILE_MAX;
    if (path == NULL)
        return kiwi_error_make (err, 0, "read_file needs a path"), NULL;
    if (arg_int (args, "start_line", 1, KIWI_WS_FILE_MAX, 1, &start, err) < 0
        || arg_int (args, "end_line", 1, KIWI_WS_FILE_MAX, KIWI_WS_FILE_MAX, &end, err) < 0)
        return NULL;
    if (end < start)
        return kiwi_error_make (err, 0, "read_file: end_line (%lld) is before start_line (%lld)", end, start), NULL;
    cleanup_free char *data = NULL;
    size_t len = 0;
    if (read_whole (s, "read_file", path, &data, &len, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "read %s", path);
    if (memchr (data, '\0', len) != NULL) {
        char *out = NULL;
        if (asprintf (&out, "[%s: a binary file of %zu bytes; not shown]", path, len) < 0)
            return NULL;
        return out;
    }
    size_t total = kiwi_text_count_lines (data, len);
    if (total == 0) {
        char *out = NULL;
        if (asprintf (&out, "[%s: 0 lines (an empty file)]", path) < 0)
            return NULL;
        return out;
    }
    if ((size_t) start > total)
        return kiwi_error_make (err, 0, "read_file: start_line %lld is past the end of `%s` (%zu lines)", start,
                                path, total),
               NULL;
    size_t last = (size_t) end > total ? total : (size_t) end;
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    size_t shown = kiwi_text_number (&b, data, len, (size_t) start, last, READ_MAX);
    kiwi_buf out = KIWI_BUF_INIT;
    if (kiwi_buf_appendf (&out, err, "[%s: %zu lines; showing %lld-%zu]\n%s", path, total, start, shown,
                          kiwi_buf_str (&b))
        < 0)
        return NULL;
    if (shown < last && kiwi_buf_appendf (&out, err,
                                          "[... cut at %d KiB after line %zu of %zu: read on with start_line %zu]\n",
                                          READ_MAX / 1024, shown, total, shown + 1)
                            < 0) {
        kiwi_buf_free (&out);
        return NULL;
    }
    return kiwi_buf_steal (&out, NULL);
}

char *
kiwi__tool_write_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *content = NULL;
    char *out = NULL;
    if (arg_text (args, "content", KIWI_WS_FILE_MAX, &content, err) < 0)
        return NULL;
    if (path == NULL || content == NULL)
        return kiwi_error_make (err, 0, "write_file needs path and content"), NULL;
    if (kiwi_ws_write (s->env->workspace, path, content, strlen (content), err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "write %s", path);
    if (asprintf (&out, "wrote %zu bytes (%zu lines) to %s", strlen (content),
                  kiwi_text_count_lines (content, strlen (content)), path)
        < 0)
        out = NULL;
    return out;
}

/* The tool's answer after a change: `head`, then lines first..last of the
 * result, numbered, a few either side. */
static char *
show_result (const char *head, const char *path, const char *data, size_t len, size_t first, size_t last,
             kiwi_error_t *err)
{
    size_t total = kiwi_text_count_lines (data, len);
    first = first > SNIPPET_AROUND ? first - SNIPPET_AROUND : 1;
    last = last + SNIPPET_AROUND < total ? last + SNIPPET_AROUND : total;
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    size_t shown = kiwi_text_number (&b, data, len, first, last, SNIPPET_MAX);
    kiwi_buf out = KIWI_BUF_INIT;
    if (kiwi_buf_appendf (&out, err, "%s\n[%s: %zu lines; showing %zu-%zu of the result]\n%s", head, path, total,
                          first, shown, kiwi_buf_str (&b))
        < 0)
        return NULL;
    if (shown < last && kiwi_buf_appendf (&out, err, "[... cut at %d KiB: read on with read_file, start_line %zu]\n",
                                          SNIPPET_MAX / 1024, shown + 1)
                            < 0) {
        kiwi_buf_free (&out);
        return NULL;
    }
    return kiwi_buf_steal (&out, NULL);
}

/* The error for an old_text found nowhere: the lines most like its first. */
static char *
not_found (const char *path, const char *data, size_t len, const char *old, kiwi_error_t *err)
{
    size_t lines[NEAREST_SHOWN];
    size_t n = kiwi_text_nearest (data, len, old, lines, NEAREST_SHOWN);
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    kiwi_buf_appendf (&b, NULL, "edit of `%s`: old_text was not found in `%s` (%zu lines).", path, path,
                      kiwi_text_count_lines (data, len));
    if (n == 0)
        kiwi_buf_append_str (&b, " No line is like its first line; read the file with read_file.", NULL);
    else {
        kiwi_buf_append_str (&b, " The lines most like its first line (whitespace and every byte count):\n", NULL);
        for (size_t i = 0; i < n; i++)
            kiwi_text_number (&b, data, len, lines[i], lines[i], b.len + SNIPPET_MAX / NEAREST_SHOWN);
    }
    kiwi_error_make (err, 0, "%s", kiwi_buf_str (&b));
    return NULL;
}

char *
kiwi__tool_edit_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *old = NULL, *nw = NULL;
    bool all = false;
    if (arg_text (args, "old_text", KIWI_WS_FILE_MAX, &old, err) < 0
        || arg_text (args, "new_text", KIWI_WS_FILE_MAX, &nw, err) < 0 || arg_bool (args, "replace_all", &all, err) < 0)
        return NULL;
    if (path == NULL || old == NULL || nw == NULL)
        return kiwi_error_make (err, 0, "edit_file needs path, old_text and new_text"), NULL;
    if (*old == '\0')
        return kiwi_error_make (err, 0, "edit of `%s`: old_text is empty (to add lines, use insert_lines)", path),
               NULL;
    if (strcmp (old, nw) == 0)
        return kiwi_error_make (err, 0, "edit of `%s`: old_text and new_text are the same; nothing to change", path),
               NULL;
    cleanup_free char *data = NULL;
    size_t len = 0;
    if (read_whole (s, "edit", path, &data, &len, err) < 0)
        return NULL;
    size_t ol = strlen (old), nl = strlen (nw);
    size_t offs[MATCHES_NAMED];
    size_t count = kiwi_text_find_all (data, len, old, ol, offs, MATCHES_NAMED);
    if (count == 0)
        return not_found (path, data, len, old, err);
    if (count > 1 && !all) {
        cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
        for (size_t i = 0; i < count && i < MATCHES_NAMED; i++)
            kiwi_buf_appendf (&b, NULL, "%s%zu", i ? ", " : "", kiwi_text_line_at (data, len, offs[i]));
        if (count > MATCHES_NAMED)
            kiwi_buf_append_str (&b, ", ...", NULL);
        return kiwi_error_make (err, 0,
                                "edit of `%s`: old_text occurs %zu times, at lines %s; add lines around it so it "
                                "occurs once, or set replace_all to true to replace every one",
                                path, count, kiwi_buf_str (&b)),
               NULL;
    }
    if (nl > ol && count > (KIWI_WS_FILE_MAX - len) / (nl - ol))
        return kiwi_error_make (err, 0, "edit of `%s`: the result would be larger than %u bytes", path,
                                KIWI_WS_FILE_MAX),
               NULL;
    size_t rlen = len - count * ol + count * nl;
    cleanup_free char *res = malloc (rlen + 1);
    if (res == NULL)
        return kiwi_error_make (err, ENOMEM, "edit of `%s`", path), NULL;
    size_t at = 0, r = 0, first_new = 0;
    for (size_t i = 0; i < count; i++) {
        const char *hit = memmem (data + at, len - at, old, ol); /* found above */
        size_t pre = (size_t) (hit - data) - at;
        memcpy (res + r, data + at, pre);
        r += pre;
        if (i == 0)
            first_new = r;
        memcpy (res + r, nw, nl);
        r += nl;
        at = (size_t) (hit - data) + ol;
    }
    memcpy (res + r, data + at, len - at);
    res[rlen] = '\0';
    if (kiwi_ws_write (s->env->workspace, path, res, rlen, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "edit %s", path);
    char head[256];
    snprintf (head, sizeof head, "edited %s: %zu replacement%s%s", path, count, count == 1 ? "" : "s",
              count > 1 ? " (the first shown)" : "");
    size_t l1 = kiwi_text_line_at (res, rlen, first_new);
    size_t l2 = kiwi_text_line_at (res, rlen, nl ? first_new + nl - 1 : first_new);
    return show_result (head, path, res, rlen, l1, l2, err);
}

char *
kiwi__tool_insert_lines (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *text = NULL;
    long long after = -1;
    if (arg_text (args, "text", KIWI_WS_FILE_MAX, &text, err) < 0
        || arg_int (args, "line", 0, KIWI_WS_FILE_MAX, -1, &after, err) < 0)
        return NULL;
    if (path == NULL || text == NULL || after < 0)
        return kiwi_error_make (err, 0, "insert_lines needs path, line and text"), NULL;
    if (*text == '\0')
        return kiwi_error_make (err, 0, "insert into `%s`: text is empty", path), NULL;
    cleanup_free char *data = NULL;
    size_t len = 0;
    if (read_whole (s, "insert", path, &data, &len, err) < 0)
        return NULL;
    size_t total = kiwi_text_count_lines (data, len);
    if ((size_t) after > total)
        return kiwi_error_make (err, 0,
                                "insert into `%s`: line %lld is past the end: the file has %zu lines (0 inserts at "
                                "the top, %zu at the end)",
                                path, after, total, total),
               NULL;
    size_t tl = strlen (text);
    bool add_nl = text[tl - 1] != '\n';
    size_t at = after == 0 ? 0 : kiwi_text_line_start (data, len, (size_t) after + 1);
    bool lead_nl = at == len && len > 0 && data[len - 1] != '\n'; /* after a last line without its newline */
    if (tl + 2 > KIWI_WS_FILE_MAX - len)
        return kiwi_error_make (err, 0, "insert into `%s`: the result would be larger than %u bytes", path,
                                KIWI_WS_FILE_MAX),
               NULL;
    size_t rlen = len + tl + add_nl + lead_nl;
    cleanup_free char *res = malloc (rlen + 1);
    if (res == NULL)
        return kiwi_error_make (err, ENOMEM, "insert into `%s`", path), NULL;
    size_t r = 0;
    memcpy (res, data, at);
    r = at;
    if (lead_nl)
        res[r++] = '\n';
    memcpy (res + r, text, tl);
    r += tl;
    if (add_nl)
        res[r++] = '\n';
    memcpy (res + r, data + at, len - at);
    res[rlen] = '\0';
    if (kiwi_ws_write (s->env->workspace, path, res, rlen, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "insert %s:%lld", path, after);
    size_t added = kiwi_text_count_lines (text, tl);
    char head[256];
    snprintf (head, sizeof head, "inserted %zu line%s into %s after line %lld", added, added == 1 ? "" : "s", path,
              after);
    return show_result (head, path, res, rlen, (size_t) after + 1, (size_t) after + added, err);
}

char *
kiwi__tool_search (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    kiwi_ws_search_opts o = { .max = FOUND_MAX };
    if (arg_text (args, "pattern", KIWI_WS_PATTERN_MAX, &o.pattern, err) < 0
        || arg_text (args, "glob", KIWI_WS_PATTERN_MAX, &o.glob, err) < 0
        || arg_bool (args, "regex", &o.regex, err) < 0 || arg_bool (args, "ignore_case", &o.ignore_case, err) < 0)
        return NULL;
    if (o.pattern == NULL)
        return kiwi_error_make (err, 0, "search needs a pattern"), NULL;
    cleanup_strv kiwi_strv hits = KIWI_STRV_INIT;
    int cut = 0;
    if (kiwi_ws_search (s->env->workspace, path ? path : "", &o, &hits, &cut, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "search %.60s", o.pattern);
    if (cut)
        kiwi_strv_addf (&hits, "... cut at %zu matches; narrow with path or glob", hits.n);
    return hits.n ? kiwi_strv_join_lines (&hits) : strdup ("no matches\n");
}

char *
kiwi__tool_find_files (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err)
{
    const char *glob = NULL;
    if (arg_text (args, "glob", KIWI_WS_PATTERN_MAX, &glob, err) < 0)
        return NULL;
    if (glob == NULL)
        return kiwi_error_make (err, 0, "find_files needs a glob"), NULL;
    cleanup_strv kiwi_strv found = KIWI_STRV_INIT;
    int cut = 0;
    if (kiwi_ws_find (s->env->workspace, path ? path : "", glob, FOUND_MAX, &found, &cut, err) < 0)
        return NULL;
    kiwi_strv_addf (&s->actions, "find %.60s", glob);
    if (cut)
        kiwi_strv_addf (&found, "... cut at %zu files; narrow with path or glob", found.n);
    return found.n ? kiwi_strv_join_lines (&found) : strdup ("no files match\n");
}
