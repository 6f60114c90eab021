/*
 * session-internal.h: what the pieces of the Architect/Implementer session
 * share: its state, and the calls between session.c (the rounds and the
 * models), session-verify.c (the round's verify and its sandbox made
 * ahead) and session-tools.c (the Implementer's tools and the round's
 * persistent sandbox).
 */
#ifndef KIWI_WORKER_SESSION_INTERNAL_H
#define KIWI_WORKER_SESSION_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/strv.h"
#include "worker/task/session.h"

#define KIWI__SESSION_OUTPUT_KEPT (256 * 1024) /* what a run or verify keeps of its output (its end) */
#define KIWI__SESSION_OUTPUT_TAIL (16 * 1024) /* what a run's answer shows of it (failout.h) */
#define KIWI__SESSION_N_TOOLS 10              /* tool_defs, session-tools.c */
#define KIWI__SESSION_CALLS_PER_ROUND 40      /* tool calls the Implementer may make in one round */
#define KIWI__SESSION_N_ARCHITECT_TOOLS 3     /* the read-only ones: read_file, search, find_files */
#define KIWI__SESSION_ARCHITECT_CALLS 12      /* tool calls the Architect may make in one round */
#define KIWI__SESSION_RUN_TIMEOUT_S 600       /* the longest one `run` may take */
#define KIWI__SESSION_GIVE_UP_MAX 2000        /* bytes of give_up's reason kept */
#define KIWI__SESSION_MAP_BUDGET (12 * 1024)  /* bytes of the repository map (the Architect's) */
#define KIWI__SESSION_IMPL_MAP_BUDGET (6 * 1024) /* bytes of the Implementer's, each round */
#define KIWI__SESSION_MAP_SYMBOLS 8           /* top-level symbols named per file in the map */

/* One session's state, on kiwi_session_run's stack. */
typedef struct kiwi__session {
    const kiwi_session_env *env;
    const kiwi_task *task;
    kiwi_model_tool tools[KIWI__SESSION_N_TOOLS];
    kiwi_model_tool architect_tools[KIWI__SESSION_N_ARCHITECT_TOOLS]; /* the same, the read-only ones */
    uint64_t tokens_in, tokens_out;
    uint64_t cache_write, cache_read; /* of tokens_in: the provider's prompt cache */
    uint64_t budget_tokens;   /* 0: none */
    uint64_t budget_micros;   /* 0: none */
    double cost;              /* dollars */
    kiwi_sandbox *box;        /* the round's persistent sandbox, created on first use */
    kiwi_strv actions;        /* what the models did this round, for the event (the Architect's prefixed) */
    kiwi_strv plans;          /* the Architect's plans of the rounds so far */
    kiwi_strv impl_calls;     /* the Implementer's tool calls of the last round (names and paths) */
    char *impl_said;          /* the Implementer's last text of the last round, or NULL */
    int tests_requested;
    bool gave_up;             /* give_up was called: the session ends */
    char *give_up_reason;     /* "kind: reason", as the result says it */
    char *run_description;    /* the run tool's, with the task's limits */
    kiwi_exec_result last_verify;
    bool have_verify;
    char *not_carried;        /* the last round passed only in the workspace: what the diff lacked */
    int64_t round_started_ms; /* kiwi_mono_ms at the start of the round, for its duration */
    kiwi_strv creds;          /* the task's test credentials, NULL-terminated */
    struct {
        pthread_t thread;
        bool running;           /* started and not yet joined */
        kiwi_verify_request req;
        kiwi_sandbox *box;      /* what the thread made, or NULL */
        kiwi_error_t err;       /* why it made none */
        bool lent;              /* the sandbox taken last still goes through sandbox_ahead (the
                                   driver cannot hand it over): nothing is made while it is used */
    } ahead;                  /* the round's verify sandbox, made ahead */
} kiwi__session;

/* The task's time left in ms (at least 1), or 0 when it has no deadline. */
int64_t kiwi__session_remaining_ms (const kiwi__session *s);

/* ---- the repository map (session-map.c) ---- */

/* The map of the repository at `root`: files by path, those `output` (the
 * failing run's, or NULL) names first, each with its line count, `[test]`
 * and at most `max_symbols` top-level symbols; within `budget` bytes, then
 * a line saying how many files were left out. Caller frees; NULL when out
 * of memory. */
char *kiwi__session_map (const char *root, const char *output, size_t budget, size_t max_symbols);

/* A test file, by its path (test_*.py, *_test.go, *.test.ts, tests/...). */
bool kiwi__session_is_test_path (const char *path);

/* ---- the round's verify (session-verify.c) ---- */

/* Starts making the round's verify sandbox in a thread, unless there is no
 * env for it or one is made or being made. */
void kiwi__session_ahead_start (kiwi__session *s);

/* Removes a sandbox made ahead that no verify took. */
void kiwi__session_ahead_drop (kiwi__session *s);

/* Phase B over `tree` (the workspace, or the clean tree of the published
 * diff), in the sandbox made ahead when there is one; with `next`, the
 * next verify's sandbox is made while this one runs. Returns < 0 when it
 * could not run. */
int kiwi__session_verify (kiwi__session *s, const char *tree, bool next, kiwi_exec_result *r, kiwi_error_t *err);

/* The deciding verify: the commit checked out afresh plus exactly `diff`.
 * Returns < 0 when it could not run. */
int kiwi__session_verify_published (kiwi__session *s, const char *diff, kiwi_exec_result *r, kiwi_error_t *err);

/* What the diff did not carry, for the model: a sentence. Caller frees. */
char *kiwi__session_not_carried_note (kiwi__session *s);

/* ---- the Implementer's tools (session-tools.c) ---- */

/* Fills s->tools (their parameters parsed); kiwi__session_tools_clear
 * releases them. */
void kiwi__session_tools_init (kiwi__session *s);
void kiwi__session_tools_clear (kiwi__session *s);

/* Runs one tool call; returns its content (caller frees) and sets
 * *is_error. Hostile arguments give an error content, never more; with
 * `read_only` (the Architect's calls), a tool that changes or runs
 * anything is refused. */
char *kiwi__session_run_tool (kiwi__session *s, const char *name, json_t *args, bool read_only, bool *is_error);

/* The tools over the workspace's files (session-files.c), as the table in
 * session-tools.c calls them: content (caller frees), or NULL with *err
 * set (NULL without *err is out of memory); `path` is the call's "path"
 * argument, free of NUL bytes, or NULL. */
char *kiwi__tool_list_files (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);
char *kiwi__tool_read_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);
char *kiwi__tool_write_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);
char *kiwi__tool_edit_file (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);
char *kiwi__tool_insert_lines (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);
char *kiwi__tool_search (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);
char *kiwi__tool_find_files (kiwi__session *s, json_t *args, const char *path, kiwi_error_t *err);

/* Removes the round's persistent sandbox, if any. */
void kiwi__session_box_drop (kiwi__session *s);

#endif
