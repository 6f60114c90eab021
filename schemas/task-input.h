/*
 * task-input.h: building a Task from what people write — command-line
 * flags, TSV cells and JSON objects — for `kiwi submit`, `kiwi batch` and
 * `kiwi ci-event`, and for `kiwi-worker --once` (it lives with the wire format
 * so that both programs read people's tasks the same way).
 *
 * The JSON shape is the Task's own (schemas/task.md, and what `kiwi tail
 * tasks` prints): {"id", "repo": {"url", "ref", "subdir"}, "test_command",
 * "goal", "ci_context", "limits": {...}, "model": {...},
 * "test_credentials": [...], "submitted_at", "source", "batch_id"}, plus an optional
 * "v" that must be 1. Unlike the wire decoder, input from people refuses
 * unknown keys, so a typo ("max_round") is an error, not a silent default.
 *
 * Input is applied on top of what the task already holds (an overlay):
 * `kiwi batch` starts each line from the defaults given as flags, and
 * `kiwi submit --file` lets flags override the file.
 *
 * Errors name the field as the schema does ("task.limits.max_rounds:
 * expected integer, got string") with code KIWI_WIRE_EINVALID.
 */
#ifndef KIWI_SCHEMAS_TASK_INPUT_H
#define KIWI_SCHEMAS_TASK_INPUT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "schemas/task.h"

/* The task fields that flags and TSV columns set. Columns: ID, flag name
 * (also the TSV column name), metavar, schema path, help. */
#define KIWI_TASK_FIELDS(X)                                                                                  \
    X (ID, "id", "ID", "id", "task id (default: generated from the time and 64 random bits)")              \
    X (REPO, "repo", "URL", "repo.url", "repository clone URL (also the message key)")                     \
    X (REF, "ref", "REF", "repo.ref", "branch, tag or commit to fix")                                      \
    X (SUBDIR, "subdir", "DIR", "repo.subdir", "directory inside the repository where the test runs")      \
    X (TEST, "test", "CMD", "test_command", "the repository's own test command")                           \
    X (GOAL, "goal", "TEXT", "goal", "what to achieve, in words, for the Architect")                       \
    X (CI_CONTEXT, "ci-context", "FILE|-", "ci_context", "file (or - for stdin) with the CI failure output") \
    X (MAX_ROUNDS, "max-rounds", "N", "limits.max_rounds", "session rounds at most, 1..100 (default 8)")   \
    X (BUDGET_TOKENS, "budget-tokens", "N", "limits.session_budget_tokens", "model tokens the session may spend") \
    X (BUDGET_USD, "budget-usd", "X", "limits.session_budget_usd_micros",                                  \
       "US dollars the session may spend, up to 6 decimals (1.25)")                                        \
    X (TIMEOUT, "timeout", "S", "limits.timeout_seconds", "wall-clock limit of the task, 1..86400 s (default 1800)") \
    X (DISK_MB, "disk-mb", "N", "limits.disk_mb", "sandbox disk ceiling, 16..1048576 MiB (default 2048)") \
    X (PROVIDER, "provider", "P", "model.provider", "model provider: anthropic, openai, gemini, scripted")  \
    X (MODEL, "model", "M", "model.name", "model name as the provider spells it")                          \
    X (BASE_URL, "base-url", "U", "model.base_url", "provider API base URL")                               \
    X (CRED, "cred", "NAME", "test_credentials", "worker environment variable the test needs (repeatable)")

typedef enum {
    KIWI_TF_UNSET = 0,
#define KIWI__TF_ENUM(id, flag, meta, path, help) KIWI_TF_##id,
    KIWI_TASK_FIELDS (KIWI__TF_ENUM)
#undef KIWI__TF_ENUM
    KIWI_TF__END
} kiwi_task_field;

typedef struct kiwi_task_field_def {
    kiwi_task_field id;
    const char *flag;    /* "max-rounds" */
    const char *metavar; /* "N" */
    const char *path;    /* "limits.max_rounds" */
    const char *help;
} kiwi_task_field_def;

const kiwi_task_field_def *kiwi_task_field_get (kiwi_task_field f);

/* Finds a field by flag name, schema path or last path component
 * ("max-rounds", "limits.max_rounds", "max_rounds"), plus the TSV
 * spellings "url" and "test_command". Returns KIWI_TF_UNSET if unknown. */
kiwi_task_field kiwi_task_field_lookup (const char *name);

/* Sets one field from text, as a flag or a TSV cell gives it. Numbers are
 * checked for form here and for range by kiwi_task_validate. CRED appends
 * one name; CI_CONTEXT takes the text itself (not a path). `what` names
 * the source in errors ("--max-rounds", "column max_rounds"). */
int kiwi_task_input_set (kiwi_task *t, kiwi_task_field f, const char *value, const char *what, kiwi_error_t *err);

/* Parses text as one JSON object and overlays it on *t. Invalid JSON is an
 * error naming the line and column. */
int kiwi_task_input_parse (const char *text, size_t len, kiwi_task *t, kiwi_error_t *err);

/* Deep copy: *dst is initialised here. */
int kiwi_task_copy (kiwi_task *dst, const kiwi_task *src, kiwi_error_t *err);

/* Completes a task before it is produced: a generated id when it has none,
 * submitted_at = now when it is 0, `source` when it has none; then
 * kiwi_task_validate(). */
int kiwi_task_input_finish (kiwi_task *t, const char *source, kiwi_error_t *err);

/* A new unique task id: "kiwi-<UTC time to the ms>-<16 hex digits of
 * randomness>", e.g. kiwi-20261129T221422.123Z-9f3a0c51d2e4b786. `buf`
 * holds at least 64 bytes. */
int kiwi_task_id_new (char *buf, size_t cap, kiwi_error_t *err);

/* PREFIX-<UTC time to the millisecond>Z-<random_bytes (1..8) of random hex>,
 * e.g. kiwi-20261201T213115.351Z-a1b80a12f4491812: task and batch ids. */
int kiwi_timed_id_new (const char *prefix, size_t random_bytes, char *buf, size_t cap, kiwi_error_t *err);

/* "1.25" → 1250000. Up to six decimals; no sign, no exponent. */
int kiwi_parse_usd_micros (const char *s, uint64_t *out);

/* Reads a whole file ("-": stdin) of at most `max` bytes; more is an
 * error. The result is NUL-terminated; *len excludes the NUL. */
int kiwi_read_file (const char *path, size_t max, char **out, size_t *len, kiwi_error_t *err);

#endif
