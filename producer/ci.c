/*
 * ci.c: GitHub workflow_run and check_run failure events to tasks, and
 * X-Hub-Signature-256 verification with OpenSSL's HMAC, and the ring of
 * deliveries already turned into tasks (see ci.h).
 */
#include "producer/ci.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "producer/cli-settings.h"
#include "schemas/task-input.h"
#include "schemas/wire.h"

/* ci_context is at most 262144 bytes (task.md). */
#define CI_CONTEXT_MAX 262144

/* ---------------------------------------------------------------- JSON access */

/* The value at a dotted path ("workflow_run.head_sha"), or NULL. */
static const json_t *
at (const json_t *root, const char *path)
{
    const json_t *v = root;
    char key[128];
    while (*path && v != NULL) {
        const char *dot = strchr (path, '.');
        size_t n = dot ? (size_t) (dot - path) : strlen (path);
        if (n >= sizeof key)
            return NULL;
        memcpy (key, path, n);
        key[n] = '\0';
        v = json_is_object (v) ? json_object_get (v, key) : NULL;
        path += n + (dot ? 1 : 0);
    }
    return v;
}

/* A string at path, or NULL (absent, null or not a string). */
static const char *
str_at (const json_t *root, const char *path)
{
    const json_t *v = at (root, path);
    return json_is_string (v) ? json_string_value (v) : NULL;
}

static int
require_str (const json_t *root, const char *event, const char *path, const char **out, kiwi_error_t *err)
{
    const json_t *v = at (root, path);
    if (v == NULL)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s event: %s: required field missing", event, path);
    if (!json_is_string (v) || *json_string_value (v) == '\0')
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s event: %s: expected a non-empty string", event,
                                     path);
    *out = json_string_value (v);
    return 0;
}

/* Decimal text of an integer at path, or "" when absent. */
static void
int_at (const json_t *root, const char *path, char *buf, size_t cap)
{
    const json_t *v = at (root, path);
    if (json_is_integer (v))
        snprintf (buf, cap, "%lld", (long long) json_integer_value (v));
    else
        buf[0] = '\0';
}

/* ---------------------------------------------------------------- ids */

int
kiwi_ci_task_id (const char *key, size_t key_len, const char *base, const char *clone_url, const char *sha, char *out,
                 size_t cap, kiwi_error_t *err)
{
    static const char domain[] = "kiwi-ci-task-id";
    const char *parts[] = { domain, base, clone_url, sha };
    size_t len = 0;
    for (size_t i = 0; i < 4; i++)
        len += strlen (parts[i]) + 1;
    cleanup_free unsigned char *m = malloc (len);
    if (m == NULL)
        return kiwi_error_make (err, ENOMEM, "deriving the task id");
    size_t at = 0;
    for (size_t i = 0; i < 4; i++) {
        size_t n = strlen (parts[i]) + 1; /* with its NUL: no part can hold one (JSON strings here never do) */
        memcpy (m + at, parts[i], n);
        at += n;
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int md_len = 0;
    int ok = key != NULL ? HMAC (EVP_sha256 (), key, (int) key_len, m, len, md, &md_len) != NULL
                         : EVP_Digest (m, len, md, &md_len, EVP_sha256 (), NULL) == 1;
    if (!ok || md_len < KIWI_CI_ID_TAG_HEX / 2)
        return kiwi_error_make (err, 0, "deriving the task id: %s failed", key != NULL ? "HMAC-SHA256" : "SHA-256");
    static const char hex[] = "0123456789abcdef";
    char tag[KIWI_CI_ID_TAG_HEX + 1];
    for (size_t i = 0; i < KIWI_CI_ID_TAG_HEX / 2; i++) {
        tag[2 * i] = hex[md[i] >> 4];
        tag[2 * i + 1] = hex[md[i] & 15];
    }
    tag[KIWI_CI_ID_TAG_HEX] = '\0';
    int n = snprintf (out, cap, "%s-%s", base, tag);
    if (n < 0 || (size_t) n >= cap)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "task id %s-%s: too long", base, tag);
    return 0;
}

/* ---------------------------------------------------------------- building */

typedef struct ci_fields {
    const char *event;
    const char *clone_url, *sha, *branch, *name, *url, *repo_name;
    char id[160];
    char *context; /* malloc'd */
} ci_fields;

static kiwi_ci_outcome
build (const ci_fields *f, const kiwi_ci_options *o, kiwi_task *out, kiwi_error_t *err)
{
    if (o->base != NULL) {
        if (kiwi_task_copy (out, o->base, err) < 0)
            return KIWI_CI_ERROR;
    } else
        kiwi_task_init (out);
    int r = 0;
    if (out->id == NULL)
        r = kiwi_task_input_set (out, KIWI_TF_ID, f->id, "id", err);
    if (r == 0)
        r = kiwi_task_input_set (out, KIWI_TF_REPO, f->clone_url, "repository.clone_url", err);
    if (r == 0)
        r = kiwi_task_input_set (out, KIWI_TF_REF, f->sha, "head_sha", err);
    if (r == 0 && out->test_command == NULL && o->test_command != NULL && *o->test_command != '\0')
        r = kiwi_task_input_set (out, KIWI_TF_TEST, o->test_command, "test command", err);
    if (r == 0 && out->goal == NULL) {
        kiwi_goal_vars v = { f->name, f->sha, f->branch, f->url, f->repo_name, f->event };
        char *goal = kiwi_goal_expand (o->goal_template ? o->goal_template : KIWI_CI_GOAL_DEFAULT, &v, err);
        if (goal == NULL)
            r = -1;
        else {
            free (out->goal);
            out->goal = goal;
        }
    }
    if (r == 0 && f->context != NULL) {
        free (out->ci_context);
        out->ci_context = strdup (f->context);
        if (out->ci_context == NULL)
            r = kiwi_error_make (err, ENOMEM, "building the task");
    }
    if (r == 0)
        r = kiwi_task_input_finish (out, "ci-event", err);
    if (r < 0) {
        kiwi_task_clear (out);
        return KIWI_CI_ERROR;
    }
    return KIWI_CI_TASK;
}

/* Appends "label: value\n" when value is non-empty. */
static void
line (FILE *f, const char *label, const char *value)
{
    if (value != NULL && *value != '\0')
        fprintf (f, "%s: %s\n", label, value);
}

/* Keeps the last `max` bytes of s (logs end with what failed), starting at
 * a line boundary when one is near. */
static void
keep_tail (char *s, size_t max)
{
    size_t n = strlen (s);
    if (n <= max)
        return;
    static const char mark[] = "[... earlier output cut ...]\n";
    size_t keep = max - (sizeof mark - 1);
    const char *start = s + n - keep;
    const char *nl = memchr (start, '\n', keep < 4096 ? keep : 4096);
    if (nl != NULL)
        start = nl + 1;
    size_t rest = strlen (start);
    memmove (s + sizeof mark - 1, start, rest + 1);
    memcpy (s, mark, sizeof mark - 1);
}

static void
ignored (char **why, const char *fmt, ...) __attribute__ ((format (printf, 2, 3)));

static void
ignored (char **why, const char *fmt, ...)
{
    va_list ap;
    va_start (ap, fmt);
    if (vasprintf (why, fmt, ap) < 0)
        *why = NULL;
    va_end (ap);
}

/* An event other than a completed failure is ignored (*why says so);
 * KIWI_CI_TASK lets it go on. `runs` names what the event is about. */
static kiwi_ci_outcome
completed_failure (const json_t *root, const char *event, const char *runs, char **why)
{
    char path[64];
    snprintf (path, sizeof path, "%s.conclusion", event);
    const char *action = str_at (root, "action");
    const char *conclusion = str_at (root, path);
    if (action == NULL || strcmp (action, "completed") != 0) {
        ignored (why, "%s event with action `%s`: only completed %s are turned into tasks", event,
                 action ? action : "(none)", runs);
        return KIWI_CI_IGNORED;
    }
    if (conclusion == NULL || strcmp (conclusion, "failure") != 0) {
        ignored (why, "%s completed with conclusion `%s`: only failures are turned into tasks", event,
                 conclusion ? conclusion : "(none)");
        return KIWI_CI_IGNORED;
    }
    return KIWI_CI_TASK;
}

/* The fields both events have where they have them: the clone URL, the
 * head commit (EVENT.head_sha), the repository's name. */
static int
common_fields (const json_t *root, ci_fields *f, kiwi_error_t *err)
{
    char sha[64];
    snprintf (sha, sizeof sha, "%s.head_sha", f->event);
    if (require_str (root, f->event, "repository.clone_url", &f->clone_url, err) < 0
        || require_str (root, f->event, sha, &f->sha, err) < 0)
        return -1;
    f->repo_name = str_at (root, "repository.full_name");
    return 0;
}

/* The event's id (an integer at path) in buf, or an error. */
static int
required_id (const json_t *root, const char *event, const char *path, char *buf, size_t cap, kiwi_error_t *err)
{
    int_at (root, path, buf, cap);
    if (buf[0] == '\0')
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s event: %s: required field missing", event, path);
    return 0;
}

/* The task from f, once its CI context (written to m) is complete. */
static kiwi_ci_outcome
finish (ci_fields *f, FILE *m, const kiwi_ci_options *o, kiwi_task *out, kiwi_error_t *err)
{
    fclose (m);
    if (f->context != NULL)
        keep_tail (f->context, CI_CONTEXT_MAX);
    kiwi_ci_outcome r = build (f, o, out, err);
    free (f->context);
    return r;
}

/* A stream for f's CI context, or NULL with *err. */
static FILE *
context_stream (ci_fields *f, kiwi_error_t *err)
{
    size_t len = 0;
    FILE *m = open_memstream (&f->context, &len);
    if (m == NULL)
        kiwi_error_make (err, errno, "building the CI context");
    return m;
}

static kiwi_ci_outcome
workflow_run (const json_t *root, const kiwi_ci_options *o, kiwi_task *out, char **why, kiwi_error_t *err)
{
    if (completed_failure (root, "workflow_run", "runs", why) != KIWI_CI_TASK)
        return KIWI_CI_IGNORED;
    ci_fields f = { .event = "workflow_run" };
    if (common_fields (root, &f, err) < 0)
        return KIWI_CI_ERROR;
    f.branch = str_at (root, "workflow_run.head_branch");
    f.url = str_at (root, "workflow_run.html_url");
    f.name = str_at (root, "workflow_run.name");
    if (f.name == NULL || *f.name == '\0')
        f.name = str_at (root, "workflow.name");
    if (f.name == NULL || *f.name == '\0')
        f.name = "workflow";
    char run_id[32], attempt[32], base[80];
    if (required_id (root, f.event, "workflow_run.id", run_id, sizeof run_id, err) < 0)
        return KIWI_CI_ERROR;
    int_at (root, "workflow_run.run_attempt", attempt, sizeof attempt);
    snprintf (base, sizeof base, "gh-run-%s-%s", run_id, attempt[0] ? attempt : "1");
    if (kiwi_ci_task_id (o->id_key, o->id_key_len, base, f.clone_url, f.sha, f.id, sizeof f.id, err) < 0)
        return KIWI_CI_ERROR;

    FILE *m = context_stream (&f, err);
    if (m == NULL)
        return KIWI_CI_ERROR;
    fprintf (m, "GitHub Actions workflow run failed.\n");
    line (m, "workflow", f.name);
    line (m, "workflow file", str_at (root, "workflow_run.path"));
    line (m, "run", f.url);
    line (m, "attempt", attempt);
    line (m, "event", str_at (root, "workflow_run.event"));
    line (m, "repository", f.repo_name);
    line (m, "branch", f.branch);
    line (m, "commit", f.sha);
    line (m, "commit message", str_at (root, "workflow_run.head_commit.message"));
    line (m, "logs", str_at (root, "workflow_run.logs_url"));
    return finish (&f, m, o, out, err);
}

static kiwi_ci_outcome
check_run (const json_t *root, const kiwi_ci_options *o, kiwi_task *out, char **why, kiwi_error_t *err)
{
    if (completed_failure (root, "check_run", "check runs", why) != KIWI_CI_TASK)
        return KIWI_CI_IGNORED;
    ci_fields f = { .event = "check_run" };
    if (common_fields (root, &f, err) < 0)
        return KIWI_CI_ERROR;
    f.branch = str_at (root, "check_run.check_suite.head_branch");
    f.url = str_at (root, "check_run.html_url");
    f.name = str_at (root, "check_run.name");
    if (f.name == NULL || *f.name == '\0')
        f.name = "check";
    char check_id[32], base[64];
    if (required_id (root, f.event, "check_run.id", check_id, sizeof check_id, err) < 0)
        return KIWI_CI_ERROR;
    snprintf (base, sizeof base, "gh-check-%s", check_id);
    if (kiwi_ci_task_id (o->id_key, o->id_key_len, base, f.clone_url, f.sha, f.id, sizeof f.id, err) < 0)
        return KIWI_CI_ERROR;

    FILE *m = context_stream (&f, err);
    if (m == NULL)
        return KIWI_CI_ERROR;
    fprintf (m, "GitHub check run failed.\n");
    line (m, "check", f.name);
    line (m, "app", str_at (root, "check_run.app.name"));
    line (m, "run", f.url);
    line (m, "details", str_at (root, "check_run.details_url"));
    line (m, "repository", f.repo_name);
    line (m, "branch", f.branch);
    line (m, "commit", f.sha);
    const char *parts[] = { "title", "summary", "text" };
    for (size_t i = 0; i < 3; i++) {
        char path[64];
        snprintf (path, sizeof path, "check_run.output.%s", parts[i]);
        const char *v = str_at (root, path);
        if (v != NULL && *v != '\0')
            fprintf (m, "\n%s\n", v);
    }
    return finish (&f, m, o, out, err);
}

kiwi_ci_outcome
kiwi_ci_event_to_task (const char *event, const char *body, size_t len, const kiwi_ci_options *o, kiwi_task *out,
                       char **why, kiwi_error_t *err)
{
    kiwi_task_init (out);
    *why = NULL;
    json_error_t je;
    json_t *root = json_loadb (body, len, 0, &je);
    if (root == NULL) {
        kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "malformed JSON at line %d column %d: %s", je.line, je.column,
                              je.text);
        return KIWI_CI_ERROR;
    }
    kiwi_ci_outcome r;
    if (!json_is_object (root)) {
        kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "malformed event: expected a JSON object");
        r = KIWI_CI_ERROR;
    } else {
        if (event == NULL || *event == '\0') {
            /* Recognise the event by its payload. */
            if (json_is_object (json_object_get (root, "workflow_run")))
                event = "workflow_run";
            else if (json_is_object (json_object_get (root, "check_run")))
                event = "check_run";
            else if (json_object_get (root, "zen") != NULL && json_object_get (root, "hook_id") != NULL)
                event = "ping";
            else
                event = "unknown";
        }
        if (strcmp (event, "workflow_run") == 0)
            r = workflow_run (root, o, out, why, err);
        else if (strcmp (event, "check_run") == 0)
            r = check_run (root, o, out, why, err);
        else {
            ignored (why, "`%s` event: only workflow_run and check_run failures are turned into tasks", event);
            r = KIWI_CI_IGNORED;
        }
    }
    json_decref (root);
    if (r == KIWI_CI_IGNORED && *why == NULL) {
        kiwi_error_make (err, ENOMEM, "describing an ignored event");
        return KIWI_CI_ERROR;
    }
    return r;
}

/* ---------------------------------------------------------------- signatures */

int
kiwi_ci_sign (const char *secret, size_t secret_len, const char *body, size_t len, char *out, size_t cap)
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (cap < 7 + 64 + 1
        || HMAC (EVP_sha256 (), secret, (int) secret_len, (const unsigned char *) body, len, mac, &mac_len) == NULL
        || mac_len != 32)
        return -1;
    static const char hex[] = "0123456789abcdef";
    memcpy (out, "sha256=", 7);
    for (unsigned i = 0; i < 32; i++) {
        out[7 + 2 * i] = hex[mac[i] >> 4];
        out[7 + 2 * i + 1] = hex[mac[i] & 15];
    }
    out[7 + 64] = '\0';
    return 0;
}

static int
hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char) tolower ((unsigned char) c);
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int
kiwi_ci_verify_signature (const char *secret, size_t secret_len, const char *body, size_t len, const char *header,
                          kiwi_error_t *err)
{
    if (header == NULL || *header == '\0')
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "missing X-Hub-Signature-256 header");
    if (strncmp (header, "sha256=", 7) != 0)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                     "malformed X-Hub-Signature-256 header (expected sha256=<64 hex digits>)");
    const char *h = header + 7;
    unsigned char given[32];
    for (size_t i = 0; i < 32; i++) {
        int hi = hexval (h[2 * i]), lo = hi < 0 ? -1 : hexval (h[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                         "malformed X-Hub-Signature-256 header (expected sha256=<64 hex digits>)");
        given[i] = (unsigned char) (hi << 4 | lo);
    }
    if (h[64] != '\0')
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                     "malformed X-Hub-Signature-256 header (expected sha256=<64 hex digits>)");
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    if (HMAC (EVP_sha256 (), secret, (int) secret_len, (const unsigned char *) body, len, mac, &mac_len) == NULL
        || mac_len != 32)
        return kiwi_error_make (err, 0, "computing HMAC-SHA256 failed");
    if (CRYPTO_memcmp (mac, given, 32) != 0)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "X-Hub-Signature-256 does not match the body");
    return 0;
}

/* ---------------------------------------------------------------- deliveries seen */

int
kiwi_ci_seen_init (kiwi_ci_seen *s, size_t cap)
{
    memset (s, 0, sizeof *s);
    s->cap = cap ? cap : 1;
    s->delivery = calloc (s->cap, sizeof *s->delivery);
    s->task_id = calloc (s->cap, sizeof *s->task_id);
    if (s->delivery == NULL || s->task_id == NULL) {
        kiwi_ci_seen_clear (s);
        return -1;
    }
    return 0;
}

void
kiwi_ci_seen_clear (kiwi_ci_seen *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free (s->delivery[i]);
        free (s->task_id[i]);
    }
    free (s->delivery);
    free (s->task_id);
    memset (s, 0, sizeof *s);
}

const char *
kiwi_ci_seen_find (const kiwi_ci_seen *s, const char *delivery, const char *task_id)
{
    for (size_t i = 0; i < s->n; i++)
        if ((delivery != NULL && s->delivery[i] != NULL && strcmp (s->delivery[i], delivery) == 0)
            || (task_id != NULL && s->task_id[i] != NULL && strcmp (s->task_id[i], task_id) == 0))
            return s->task_id[i];
    return NULL;
}

void
kiwi_ci_seen_add (kiwi_ci_seen *s, const char *delivery, const char *task_id)
{
    if (s->cap == 0)
        return;
    size_t i = s->next;
    if (i < s->n) { /* full: the oldest goes */
        free (s->delivery[i]);
        free (s->task_id[i]);
    } else
        s->n++;
    s->delivery[i] = delivery ? strdup (delivery) : NULL;
    s->task_id[i] = task_id ? strdup (task_id) : NULL;
    s->next = (i + 1) % s->cap;
}
