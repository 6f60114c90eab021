/*
 * batch.h: the lines of a `kiwi batch` file, one task each.
 *
 * Two formats, decided by the first line that is not blank (or by
 * --format):
 *
 *   JSON lines: each line one JSON object in the Task's shape
 *     (task-input.h), e.g. {"repo":{"url":"https://...","ref":"main"},
 *     "test_command":"make test","goal":"..."}.
 *   TSV: tab-separated cells. Without a header the columns are
 *     url, ref, test_command, goal (trailing ones may be left out when a
 *     default is given as a flag). A first line whose first cell is `url`
 *     (or `repo`, `repo.url`) is a header naming the columns, in any order,
 *     with the names of the task fields: url, ref, subdir, test_command
 *     (test), goal, id, max_rounds, budget_tokens, budget_usd, timeout,
 *     disk_mb, provider, model, base_url, cred (comma-separated names),
 *     ci_context ('-' and '_' are the same). Cells cannot hold tabs or
 *     newlines (use JSON lines for those); an empty cell leaves the
 *     field to its default; a trailing CR is dropped.
 *
 * Blank lines and lines starting with '#' are skipped in both formats. Every task starts from the
 * defaults (the flags), the line overlays them, then the task is completed
 * (id, submitted_at, source "batch") and validated. An id given twice in
 * one file is rejected the second time.
 *
 * Ownership: the parser borrows the defaults; kiwi_batch_parser_clear()
 * frees what it allocated.
 */
#ifndef KIWI_PRODUCER_BATCH_H
#define KIWI_PRODUCER_BATCH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "schemas/task-input.h"
#include "schemas/task.h"

#define KIWI_BATCH_LINE_MAX (4 * 1024 * 1024)

typedef enum {
    KIWI_BATCH_AUTO = 0,
    KIWI_BATCH_JSONL,
    KIWI_BATCH_TSV,
} kiwi_batch_format;

/* Parses "auto", "jsonl" (or "json"), "tsv". */
int kiwi_batch_format_parse (const char *s, kiwi_batch_format *out);

typedef struct kiwi_batch_parser {
    kiwi_batch_format format;   /* AUTO until the first significant line */
    const kiwi_task *defaults;  /* borrowed; NULL: schema defaults only */
    kiwi_task_field columns[32];
    size_t n_columns;           /* 0 until known */
    bool has_header;
    /* ids given explicitly so far, for duplicates: open addressing */
    struct kiwi__batch_id *ids;
    size_t n_ids, cap_ids;
} kiwi_batch_parser;

void kiwi_batch_parser_init (kiwi_batch_parser *p, kiwi_batch_format format, const kiwi_task *defaults);
void kiwi_batch_parser_clear (kiwi_batch_parser *p);

/* What kiwi_batch_line() made of a line. */
typedef enum {
    KIWI_BATCH_LINE_SKIP = 0,  /* blank, comment or header */
    KIWI_BATCH_LINE_TASK = 1,  /* *out holds a finished, valid task */
    KIWI_BATCH_LINE_REJECT = -1, /* *err says why (without "line N: ") */
    KIWI_BATCH_LINE_FATAL = -2,  /* the file cannot be read as a batch (a bad header): stop */
} kiwi_batch_line_kind;

/* Parses line number `lineno` (1-based; text without its newline, may be
 * modified). On TASK the caller owns *out (kiwi_task_clear); otherwise *out
 * holds nothing to free. */
kiwi_batch_line_kind kiwi_batch_line (kiwi_batch_parser *p, unsigned long lineno, char *line, size_t len,
                                      kiwi_task *out, kiwi_error_t *err);

#endif
