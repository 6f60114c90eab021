/*
 * ci.h: turning a CI failure event into a task, and checking the signature
 * GitHub puts on its webhooks.
 *
 * Events (GitHub's webhook payloads; the event name is the X-GitHub-Event
 * header, or is recognised from the payload when not given):
 *
 *   workflow_run  action "completed", workflow_run.conclusion "failure":
 *                 repo.url = repository.clone_url, ref = workflow_run.head_sha;
 *                 ci_context names the workflow, run URL, branch, commit and
 *                 commit message; id "gh-run-<run id>-<run attempt>-<tag>".
 *   check_run     action "completed", check_run.conclusion "failure":
 *                 repo.url = repository.clone_url, ref = check_run.head_sha;
 *                 ci_context holds check_run.output.title, summary and text
 *                 (the tail, if longer than the field allows); id
 *                 "gh-check-<check run id>-<tag>".
 *
 * The ids are derived from the event, so a webhook GitHub delivers twice
 * becomes the same task twice, which the workers' idempotency absorbs. The
 * tag (kiwi_ci_task_id) binds the id to the repository and commit and,
 * given the webhook secret, makes it one nobody without the secret can
 * compute: a producer cannot take a CI event's id before the event comes.
 * Every other event, action or conclusion is ignored (with the reason).
 * The goal comes from a template (settings.h: {name} {sha} {branch} {url}
 * {repo} {event}) unless one is given.
 */
#ifndef KIWI_PRODUCER_CI_H
#define KIWI_PRODUCER_CI_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "schemas/task.h"

typedef struct kiwi_ci_options {
    const char *test_command;  /* required */
    const char *goal_template; /* used when the base task has no goal */
    const kiwi_task *base;     /* fields given as flags (limits, model, ...); may be NULL */
    const char *id_key;        /* keys the id's tag: the webhook secret, or NULL (an unkeyed tag) */
    size_t id_key_len;
} kiwi_ci_options;

typedef enum {
    KIWI_CI_ERROR = -1,   /* *err: malformed event (KIWI_WIRE_EINVALID) or other failure */
    KIWI_CI_IGNORED = 0,  /* *why says why (caller frees) */
    KIWI_CI_TASK = 1,     /* *out holds a finished, valid task */
} kiwi_ci_outcome;

/* Maps one event. `event` is the X-GitHub-Event name, or NULL to recognise
 * it from the payload. On TASK the caller owns *out (kiwi_task_clear);
 * otherwise *out holds nothing to free. */
kiwi_ci_outcome kiwi_ci_event_to_task (const char *event, const char *body, size_t len, const kiwi_ci_options *o,
                                       kiwi_task *out, char **why, kiwi_error_t *err);

/* The id of a CI event's task: `base` ("gh-run-<run id>-<attempt>",
 * "gh-check-<check run id>"), a dash and 16 hex digits, the first 64 bits
 * of HMAC-SHA256(key, M), or of SHA-256(M) when key is NULL, where M is
 * "kiwi-ci-task-id", base, clone_url and sha, each ended by a NUL byte.
 * The same event (a redelivery) gives the same id; another repository or
 * commit another id; without the key nobody can compute it. Writes it to
 * out (cap bytes). Returns 0, or < 0 with *err. */
#define KIWI_CI_ID_TAG_HEX 16
int kiwi_ci_task_id (const char *key, size_t key_len, const char *base, const char *clone_url, const char *sha,
                     char *out, size_t cap, kiwi_error_t *err);

/* Checks an X-Hub-Signature-256 header ("sha256=<64 hex digits>") against
 * HMAC-SHA256(secret, body), in constant time. Returns 0 when it matches,
 * < 0 with *err saying what is wrong (missing, malformed, mismatch). */
int kiwi_ci_verify_signature (const char *secret, size_t secret_len, const char *body, size_t len,
                              const char *header, kiwi_error_t *err);

/* Writes "sha256=<hex>" for body into out (at least 72 bytes). */
int kiwi_ci_sign (const char *secret, size_t secret_len, const char *body, size_t len, char *out, size_t cap);

/* The webhook receiver's memory of the deliveries it turned into tasks: the
 * last `cap` (X-GitHub-Delivery, task id) pairs in a ring, the oldest
 * forgotten first, so a redelivered webhook (the same delivery id, or an
 * event mapping to a task id already produced) does not produce a second
 * task. Ownership: the ring owns its copies; kiwi_ci_seen_clear frees them. */
#define KIWI_CI_SEEN_DEFAULT 4096

typedef struct kiwi_ci_seen {
    size_t cap, n, next;
    char **delivery; /* NULL where a request carried none */
    char **task_id;
} kiwi_ci_seen;

/* Returns 0, or < 0 when out of memory. */
int kiwi_ci_seen_init (kiwi_ci_seen *s, size_t cap);
void kiwi_ci_seen_clear (kiwi_ci_seen *s);

/* The task id recorded for `delivery` (when not NULL) or `task_id` (when not
 * NULL), or NULL when neither was seen. Borrowed from the ring. */
const char *kiwi_ci_seen_find (const kiwi_ci_seen *s, const char *delivery, const char *task_id);

/* Records a delivery (may be NULL) and the task it produced, replacing the
 * oldest entry when full. */
void kiwi_ci_seen_add (kiwi_ci_seen *s, const char *delivery, const char *task_id);

#endif
