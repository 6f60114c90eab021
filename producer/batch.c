/*
 * batch.c: parsing `kiwi batch` lines, JSON lines or TSV, into tasks (see
 * batch.h).
 */
#include "producer/batch.h"

#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/strv.h"
#include "schemas/wire.h"

struct kiwi__batch_id {
    char *id;              /* NULL: empty slot */
    unsigned long lineno;
};

int
kiwi_batch_format_parse (const char *s, kiwi_batch_format *out)
{
    if (strcmp (s, "auto") == 0)
        *out = KIWI_BATCH_AUTO;
    else if (strcmp (s, "jsonl") == 0 || strcmp (s, "json") == 0)
        *out = KIWI_BATCH_JSONL;
    else if (strcmp (s, "tsv") == 0)
        *out = KIWI_BATCH_TSV;
    else
        return -1;
    return 0;
}

void
kiwi_batch_parser_init (kiwi_batch_parser *p, kiwi_batch_format format, const kiwi_task *defaults)
{
    memset (p, 0, sizeof *p);
    p->format = format;
    p->defaults = defaults;
}

void
kiwi_batch_parser_clear (kiwi_batch_parser *p)
{
    for (size_t i = 0; i < p->cap_ids; i++)
        free (p->ids[i].id);
    free (p->ids);
    kiwi_batch_parser_init (p, KIWI_BATCH_AUTO, NULL);
}

/* ---------------------------------------------------------------- duplicate ids */

static uint64_t
hash (const char *s)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (; *s; s++) {
        h ^= (unsigned char) *s;
        h *= 1099511628211ULL;
    }
    return h;
}

/* Returns the line of an earlier use of `id`, or 0 after recording it. */
static int
id_seen (kiwi_batch_parser *p, const char *id, unsigned long lineno, unsigned long *earlier, kiwi_error_t *err)
{
    if ((p->n_ids + 1) * 2 > p->cap_ids) {
        size_t cap = p->cap_ids ? p->cap_ids * 2 : 1024;
        struct kiwi__batch_id *n = calloc (cap, sizeof *n);
        if (n == NULL)
            return kiwi_error_make (err, ENOMEM, "tracking task ids");
        for (size_t i = 0; i < p->cap_ids; i++)
            if (p->ids[i].id != NULL) {
                size_t j = hash (p->ids[i].id) & (cap - 1);
                while (n[j].id != NULL)
                    j = (j + 1) & (cap - 1);
                n[j] = p->ids[i];
            }
        free (p->ids);
        p->ids = n;
        p->cap_ids = cap;
    }
    size_t j = hash (id) & (p->cap_ids - 1);
    while (p->ids[j].id != NULL) {
        if (strcmp (p->ids[j].id, id) == 0) {
            *earlier = p->ids[j].lineno;
            return 0;
        }
        j = (j + 1) & (p->cap_ids - 1);
    }
    if ((p->ids[j].id = strdup (id)) == NULL)
        return kiwi_error_make (err, ENOMEM, "tracking task ids");
    p->ids[j].lineno = lineno;
    p->n_ids++;
    *earlier = 0;
    return 0;
}

/* ---------------------------------------------------------------- TSV */

static const kiwi_task_field default_columns[] = { KIWI_TF_REPO, KIWI_TF_REF, KIWI_TF_TEST, KIWI_TF_GOAL };

/* Splits at tabs in place; returns the number of cells (at most max). */
static size_t
split_tabs (char *line, char **cells, size_t max, size_t *total)
{
    size_t n = 0, all = 0;
    char *p = line;
    for (;;) {
        char *tab = strchr (p, '\t');
        if (n < max)
            cells[n++] = p;
        all++;
        if (tab == NULL)
            break;
        *tab = '\0';
        p = tab + 1;
    }
    *total = all;
    return n;
}

static const char *
column_name (kiwi_task_field f)
{
    switch (f) {
    case KIWI_TF_REPO: return "url";
    case KIWI_TF_TEST: return "test_command";
    default: return kiwi_task_field_get (f)->path;
    }
}

static kiwi_batch_line_kind
tsv_header (kiwi_batch_parser *p, char **cells, size_t n, kiwi_error_t *err)
{
    if (n > sizeof p->columns / sizeof p->columns[0]) {
        kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "header: %zu columns, at most %zu", n,
                              sizeof p->columns / sizeof p->columns[0]);
        return KIWI_BATCH_LINE_FATAL;
    }
    for (size_t i = 0; i < n; i++) {
        char *name = cells[i];
        size_t l = strlen (name);
        while (l > 0 && isspace ((unsigned char) name[l - 1]))
            name[--l] = '\0';
        kiwi_task_field f = kiwi_task_field_lookup (name);
        if (f == KIWI_TF_UNSET) {
            kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                  "header: unknown column `%s` (known: url, ref, subdir, test_command, goal, id, "
                                  "ci_context, max_rounds, budget_tokens, budget_usd, timeout, disk_mb, provider, "
                                  "model, base_url, cred)",
                                  name);
            return KIWI_BATCH_LINE_FATAL;
        }
        for (size_t j = 0; j < i; j++)
            if (p->columns[j] == f) {
                kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "header: column `%s` named twice", name);
                return KIWI_BATCH_LINE_FATAL;
            }
        p->columns[i] = f;
    }
    p->n_columns = n;
    p->has_header = true;
    return KIWI_BATCH_LINE_SKIP;
}

static int
tsv_cell (kiwi_task *t, kiwi_task_field f, char *cell, kiwi_error_t *err)
{
    char what[96];
    snprintf (what, sizeof what, "column %s", column_name (f));
    if (f != KIWI_TF_CRED)
        return kiwi_task_input_set (t, f, cell, what, err);
    /* cred: comma-separated names replace the defaults' */
    for (size_t i = 0; i < t->n_test_credentials; i++)
        free (t->test_credentials[i]);
    free (t->test_credentials);
    t->test_credentials = NULL;
    t->n_test_credentials = 0;
    cleanup_strv kiwi_strv names = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&names, cell, ",", err) < 0)
        return kiwi_error_wrap (err, "%s", what);
    for (size_t i = 0; i < names.n; i++)
        if (kiwi_task_input_set (t, KIWI_TF_CRED, names.v[i], what, err) < 0)
            return -1;
    return 0;
}

static kiwi_batch_line_kind
tsv_line (kiwi_batch_parser *p, char *line, kiwi_task *t, kiwi_error_t *err)
{
    char *cells[33];
    size_t total = 0;
    size_t n = split_tabs (line, cells, 33, &total);
    if (p->n_columns == 0) {
        const char *first = cells[0];
        if (strcasecmp (first, "url") == 0 || strcasecmp (first, "repo") == 0 || strcasecmp (first, "repo.url") == 0)
            return tsv_header (p, cells, total > 32 ? 33 : n, err);
        memcpy (p->columns, default_columns, sizeof default_columns);
        p->n_columns = sizeof default_columns / sizeof default_columns[0];
    }
    if (total > p->n_columns) {
        if (p->has_header)
            kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%zu cells, but the header names %zu columns", total,
                                  p->n_columns);
        else
            kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                  "%zu cells, but without a header the columns are url, ref, test_command, goal",
                                  total);
        return KIWI_BATCH_LINE_REJECT;
    }
    for (size_t i = 0; i < n; i++) {
        if (cells[i][0] == '\0')
            continue; /* empty: the default stays */
        if (tsv_cell (t, p->columns[i], cells[i], err) < 0)
            return KIWI_BATCH_LINE_REJECT;
    }
    return KIWI_BATCH_LINE_TASK;
}

/* ---------------------------------------------------------------- lines */

static bool
blank (const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++)
        if (!isspace ((unsigned char) s[i]))
            return false;
    return true;
}

kiwi_batch_line_kind
kiwi_batch_line (kiwi_batch_parser *p, unsigned long lineno, char *line, size_t len, kiwi_task *out,
                 kiwi_error_t *err)
{
    kiwi_task_init (out);
    if (len > 0 && line[len - 1] == '\r')
        line[--len] = '\0';
    if (blank (line, len))
        return KIWI_BATCH_LINE_SKIP;
    if (memchr (line, '\0', len) != NULL) {
        kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "line contains a NUL byte");
        return KIWI_BATCH_LINE_REJECT;
    }
    const char *first = line;
    while (isspace ((unsigned char) *first))
        first++;
    if (*first == '#')
        return KIWI_BATCH_LINE_SKIP;
    if (p->format == KIWI_BATCH_AUTO)
        p->format = *first == '{' ? KIWI_BATCH_JSONL : KIWI_BATCH_TSV;

    if (p->defaults != NULL) {
        if (kiwi_task_copy (out, p->defaults, err) < 0)
            return KIWI_BATCH_LINE_REJECT;
    }
    kiwi_batch_line_kind k;
    if (p->format == KIWI_BATCH_JSONL)
        k = kiwi_task_input_parse (line, len, out, err) < 0 ? KIWI_BATCH_LINE_REJECT : KIWI_BATCH_LINE_TASK;
    else
        k = tsv_line (p, line, out, err);
    if (k != KIWI_BATCH_LINE_TASK) {
        kiwi_task_clear (out);
        return k;
    }

    bool explicit_id = out->id != NULL;
    if (kiwi_task_input_finish (out, "batch", err) < 0) {
        kiwi_task_clear (out);
        return KIWI_BATCH_LINE_REJECT;
    }
    if (explicit_id) {
        unsigned long earlier = 0;
        if (id_seen (p, out->id, lineno, &earlier, err) < 0) {
            kiwi_task_clear (out);
            return KIWI_BATCH_LINE_FATAL;
        }
        if (earlier != 0) {
            kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "task.id: `%s` already used on line %lu", out->id, earlier);
            kiwi_task_clear (out);
            return KIWI_BATCH_LINE_REJECT;
        }
    }
    return KIWI_BATCH_LINE_TASK;
}
