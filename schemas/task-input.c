/*
 * task-input.c: Task fields from flags, TSV cells and JSON (see
 * task-input.h).
 */
#include "schemas/task-input.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/clock.h"
#include "common/cleanup.h"
#include "schemas/wire.h"

static const kiwi_task_field_def field_defs[] = {
    [KIWI_TF_UNSET] = { KIWI_TF_UNSET, NULL, NULL, NULL, NULL },
#define KIWI__TF_DEF(id, flag, meta, path, help) [KIWI_TF_##id] = { KIWI_TF_##id, flag, meta, path, help },
    KIWI_TASK_FIELDS (KIWI__TF_DEF)
#undef KIWI__TF_DEF
};

const kiwi_task_field_def *
kiwi_task_field_get (kiwi_task_field f)
{
    if ((int) f <= KIWI_TF_UNSET || f >= KIWI_TF__END)
        return NULL;
    return &field_defs[f];
}

/* Names compare case-insensitively, with '-' and '_' the same. */
static bool
same_name (const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a == '-' ? '_' : (char) tolower ((unsigned char) *a);
        char y = *b == '-' ? '_' : (char) tolower ((unsigned char) *b);
        if (x != y)
            return false;
    }
    return *a == *b;
}

kiwi_task_field
kiwi_task_field_lookup (const char *name)
{
    static const struct {
        const char *name;
        kiwi_task_field f;
    } aliases[] = {
        { "url", KIWI_TF_REPO },
        { "test_command", KIWI_TF_TEST },
        { "session_budget_tokens", KIWI_TF_BUDGET_TOKENS },
        { "timeout_seconds", KIWI_TF_TIMEOUT },
        { "test_credentials", KIWI_TF_CRED },
        { "model.name", KIWI_TF_MODEL },
        { "name", KIWI_TF_UNSET }, /* ambiguous: model.name must be spelled model */
    };
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (same_name (name, aliases[i].name))
            return aliases[i].f;
    for (int f = KIWI_TF_UNSET + 1; f < KIWI_TF__END; f++) {
        const kiwi_task_field_def *d = &field_defs[f];
        if (same_name (name, d->flag))
            return (kiwi_task_field) f;
        if (f == KIWI_TF_BUDGET_USD)
            continue; /* its schema path is in micros; this field takes dollars */
        const char *last = strrchr (d->path, '.');
        last = last ? last + 1 : d->path;
        if (same_name (name, d->path) || same_name (name, last))
            return (kiwi_task_field) f;
    }
    return KIWI_TF_UNSET;
}

/* ---------------------------------------------------------------- text setters */

static int
oom (kiwi_error_t *err)
{
    return kiwi_error_make (err, ENOMEM, "building the task");
}

static int
set_str (char **slot, const char *value, kiwi_error_t *err)
{
    char *v = strdup (value);
    if (v == NULL)
        return oom (err);
    free (*slot);
    *slot = v;
    return 0;
}

static int
parse_uint (const char *value, const char *what, uint64_t *out, kiwi_error_t *err)
{
    if (!isdigit ((unsigned char) *value))
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: `%s` is not a whole number", what, value);
    errno = 0;
    char *end = NULL;
    unsigned long long n = strtoull (value, &end, 10);
    if (*end != '\0')
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: `%s` is not a whole number", what, value);
    if (errno == ERANGE)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: `%s` is too large", what, value);
    *out = n;
    return 0;
}

/* Limits are uint32 in the struct: larger values are clamped to a value the
 * validator rejects with the field's range. */
static uint32_t
clamp32 (uint64_t n)
{
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t) n;
}

int
kiwi_parse_usd_micros (const char *s, uint64_t *out)
{
    uint64_t whole = 0, frac = 0;
    int digits = 0, frac_digits = 0;
    const char *p = s;
    for (; isdigit ((unsigned char) *p); p++, digits++) {
        if (whole > (UINT64_MAX / 10 - 9) / 1000000)
            return -1;
        whole = whole * 10 + (uint64_t) (*p - '0');
    }
    if (*p == '.') {
        p++;
        for (; isdigit ((unsigned char) *p); p++, frac_digits++) {
            if (frac_digits == 6)
                return -1;
            frac = frac * 10 + (uint64_t) (*p - '0');
        }
    }
    if (*p != '\0' || digits + frac_digits == 0)
        return -1;
    for (int i = frac_digits; i < 6; i++)
        frac *= 10;
    *out = whole * 1000000 + frac;
    return 0;
}

static int
add_cred (kiwi_task *t, const char *name, kiwi_error_t *err)
{
    char **n = realloc (t->test_credentials, (t->n_test_credentials + 1) * sizeof *n);
    if (n == NULL)
        return oom (err);
    t->test_credentials = n;
    if ((n[t->n_test_credentials] = strdup (name)) == NULL)
        return oom (err);
    t->n_test_credentials++;
    return 0;
}

static void
clear_creds (kiwi_task *t)
{
    for (size_t i = 0; i < t->n_test_credentials; i++)
        free (t->test_credentials[i]);
    free (t->test_credentials);
    t->test_credentials = NULL;
    t->n_test_credentials = 0;
}

int
kiwi_task_input_set (kiwi_task *t, kiwi_task_field f, const char *value, const char *what, kiwi_error_t *err)
{
    uint64_t n = 0;
    switch (f) {
    case KIWI_TF_ID:
        return set_str (&t->id, value, err);
    case KIWI_TF_REPO:
        return set_str (&t->repo.url, value, err);
    case KIWI_TF_REF:
        return set_str (&t->repo.ref, value, err);
    case KIWI_TF_SUBDIR:
        return set_str (&t->repo.subdir, value, err);
    case KIWI_TF_TEST:
        return set_str (&t->test_command, value, err);
    case KIWI_TF_GOAL:
        return set_str (&t->goal, value, err);
    case KIWI_TF_CI_CONTEXT:
        return set_str (&t->ci_context, value, err);
    case KIWI_TF_MAX_ROUNDS:
        if (parse_uint (value, what, &n, err) < 0)
            return -1;
        t->limits.max_rounds = clamp32 (n);
        return 0;
    case KIWI_TF_BUDGET_TOKENS:
        if (parse_uint (value, what, &n, err) < 0)
            return -1;
        t->limits.has_session_budget_tokens = true;
        t->limits.session_budget_tokens = n;
        return 0;
    case KIWI_TF_BUDGET_USD:
        if (kiwi_parse_usd_micros (value, &n) < 0)
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                         "%s: `%s` is not an amount of US dollars (accepted: 12, 0.5, 1.250000; at "
                                         "most 6 decimals)",
                                         what, value);
        t->limits.has_session_budget_usd_micros = true;
        t->limits.session_budget_usd_micros = n;
        return 0;
    case KIWI_TF_TIMEOUT:
        if (parse_uint (value, what, &n, err) < 0)
            return -1;
        t->limits.timeout_seconds = clamp32 (n);
        return 0;
    case KIWI_TF_DISK_MB:
        if (parse_uint (value, what, &n, err) < 0)
            return -1;
        t->limits.disk_mb = clamp32 (n);
        return 0;
    case KIWI_TF_PROVIDER: {
        kiwi_provider p;
        if (kiwi_provider_parse (value, &p) < 0)
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                         "%s: unknown provider `%s` (accepted: anthropic, openai, gemini, scripted)",
                                         what, value);
        t->has_model = true;
        t->model.provider = p;
        return 0;
    }
    case KIWI_TF_MODEL:
        t->has_model = true;
        return set_str (&t->model.name, value, err);
    case KIWI_TF_BASE_URL:
        t->has_model = true;
        return set_str (&t->model.base_url, value, err);
    case KIWI_TF_CRED:
        return add_cred (t, value, err);
    case KIWI_TF_UNSET:
    case KIWI_TF__END:
        break;
    }
    return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: not a task field", what);
}

/* ---------------------------------------------------------------- JSON */

static const char *
json_type_name (const json_t *v)
{
    switch (json_typeof (v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number with a fraction";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    case JSON_NULL: return "null";
    }
    return "?";
}

static int
wrong_type (const char *path, const char *want, const json_t *v, kiwi_error_t *err)
{
    return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: expected %s, got %s", path, want, json_type_name (v));
}

static int
json_str (const char *path, const json_t *v, char **slot, kiwi_error_t *err)
{
    if (!json_is_string (v))
        return wrong_type (path, "string", v, err);
    if (strlen (json_string_value (v)) != json_string_length (v))
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: contains a NUL character", path);
    return set_str (slot, json_string_value (v), err);
}

static int
json_uint (const char *path, const json_t *v, uint64_t *out, kiwi_error_t *err)
{
    if (!json_is_integer (v))
        return wrong_type (path, "integer", v, err);
    json_int_t n = json_integer_value (v);
    if (n < 0)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: must not be negative, got %lld", path,
                                     (long long) n);
    *out = (uint64_t) n;
    return 0;
}

/* Keys of one object level, for "unknown field" errors. */
typedef int (*member_fn) (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err);
typedef struct member {
    const char *key;
    member_fn fn;
} member;

static int walk (const char *prefix, const json_t *obj, const member *members, kiwi_task *t, kiwi_error_t *err);

#define STR_MEMBER(name, expr)                                                                                \
    static int name (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)                      \
    {                                                                                                         \
        return json_str (path, v, &(expr), err);                                                              \
    }
STR_MEMBER (m_id, t->id)
STR_MEMBER (m_url, t->repo.url)
STR_MEMBER (m_ref, t->repo.ref)
STR_MEMBER (m_subdir, t->repo.subdir)
STR_MEMBER (m_test, t->test_command)
STR_MEMBER (m_goal, t->goal)
STR_MEMBER (m_ci_context, t->ci_context)
STR_MEMBER (m_model_name, t->model.name)
STR_MEMBER (m_base_url, t->model.base_url)
STR_MEMBER (m_source, t->source)
STR_MEMBER (m_batch_id, t->batch_id)
#undef STR_MEMBER

static int
m_v (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    uint64_t n = 0;
    if (json_uint (path, v, &n, err) < 0)
        return -1;
    if (n != KIWI_WIRE_VERSION)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: version %llu is not supported (accepted: %d)", path,
                                     (unsigned long long) n, KIWI_WIRE_VERSION);
    return 0;
}

#define LIMIT32_MEMBER(name, field)                                                                           \
    static int name (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)                      \
    {                                                                                                         \
        uint64_t n = 0;                                                                                       \
        if (json_uint (path, v, &n, err) < 0)                                                                 \
            return -1;                                                                                        \
        t->limits.field = clamp32 (n);                                                                        \
        return 0;                                                                                             \
    }
LIMIT32_MEMBER (m_max_rounds, max_rounds)
LIMIT32_MEMBER (m_timeout, timeout_seconds)
LIMIT32_MEMBER (m_disk_mb, disk_mb)
#undef LIMIT32_MEMBER

static int
m_budget_tokens (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    if (json_uint (path, v, &t->limits.session_budget_tokens, err) < 0)
        return -1;
    t->limits.has_session_budget_tokens = true;
    return 0;
}

static int
m_budget_usd (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    if (json_uint (path, v, &t->limits.session_budget_usd_micros, err) < 0)
        return -1;
    t->limits.has_session_budget_usd_micros = true;
    return 0;
}

static int
m_provider (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    if (!json_is_string (v))
        return wrong_type (path, "string", v, err);
    kiwi_provider p;
    if (kiwi_provider_parse (json_string_value (v), &p) < 0)
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                     "%s: unknown value \"%s\" (expected anthropic, openai, gemini, scripted)", path,
                                     json_string_value (v));
    t->model.provider = p;
    return 0;
}

static int
m_creds (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    if (!json_is_array (v))
        return wrong_type (path, "array of strings", v, err);
    clear_creds (t);
    size_t i;
    const json_t *e;
    json_array_foreach (v, i, e)
    {
        char p[128];
        snprintf (p, sizeof p, "%s[%zu]", path, i);
        char *name = NULL;
        if (json_str (p, e, &name, err) < 0)
            return -1;
        if (add_cred (t, name, err) < 0) {
            free (name);
            return -1;
        }
        free (name);
    }
    return 0;
}

static int
m_submitted_at (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    if (!json_is_integer (v))
        return wrong_type (path, "integer", v, err);
    t->submitted_at = json_integer_value (v);
    return 0;
}

static const member repo_members[] = {
    { "url", m_url },
    { "ref", m_ref },
    { "subdir", m_subdir },
    { NULL, NULL },
};

static const member limits_members[] = {
    { "max_rounds", m_max_rounds },
    { "session_budget_tokens", m_budget_tokens },
    { "session_budget_usd_micros", m_budget_usd },
    { "timeout_seconds", m_timeout },
    { "disk_mb", m_disk_mb },
    { NULL, NULL },
};

static const member model_members[] = {
    { "provider", m_provider },
    { "name", m_model_name },
    { "base_url", m_base_url },
    { NULL, NULL },
};

static int
m_repo (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    return walk (path, v, repo_members, t, err);
}

static int
m_limits (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    return walk (path, v, limits_members, t, err);
}

static int
m_model (const char *path, const json_t *v, kiwi_task *t, kiwi_error_t *err)
{
    t->has_model = true;
    return walk (path, v, model_members, t, err);
}

static const member task_members[] = {
    { "v", m_v },
    { "id", m_id },
    { "repo", m_repo },
    { "test_command", m_test },
    { "goal", m_goal },
    { "ci_context", m_ci_context },
    { "limits", m_limits },
    { "model", m_model },
    { "test_credentials", m_creds },
    { "submitted_at", m_submitted_at },
    { "source", m_source },
    { "batch_id", m_batch_id },
    { NULL, NULL },
};

static int
walk (const char *prefix, const json_t *obj, const member *members, kiwi_task *t, kiwi_error_t *err)
{
    if (!json_is_object (obj))
        return wrong_type (prefix, "object", obj, err);
    const char *key;
    const json_t *v;
    json_object_foreach ((json_t *) obj, key, v)
    {
        char path[256];
        snprintf (path, sizeof path, "%s.%s", prefix, key);
        const member *m = members;
        while (m->key && strcmp (m->key, key) != 0)
            m++;
        if (m->key == NULL) {
            char known[512];
            size_t n = 0;
            known[0] = '\0';
            for (const member *k = members; k->key; k++)
                n += (size_t) snprintf (known + n, sizeof known - n, "%s%s", n ? ", " : "", k->key);
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "%s: unknown field (known: %s)", path, known);
        }
        if (json_is_null (v))
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID,
                                         "%s: null is not a value; leave the field out instead", path);
        if (m->fn (path, v, t, err) < 0)
            return -1;
    }
    return 0;
}

/* Overlays the fields of a JSON object on *t. */
static int
kiwi_task_input_json (const json_t *obj, kiwi_task *t, kiwi_error_t *err)
{
    return walk ("task", obj, task_members, t, err);
}

int
kiwi_task_input_parse (const char *text, size_t len, kiwi_task *t, kiwi_error_t *err)
{
    json_error_t je;
    json_t *obj = json_loadb (text, len, JSON_REJECT_DUPLICATES, &je);
    if (obj == NULL) {
        if (je.line <= 1) /* one-line input (a batch line): the column says it all */
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "invalid JSON at column %d: %s", je.column, je.text);
        return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "invalid JSON at line %d column %d: %s", je.line,
                                     je.column, je.text);
    }
    int r = kiwi_task_input_json (obj, t, err);
    json_decref (obj);
    return r;
}

/* ---------------------------------------------------------------- copy, finish */

static int
dup_opt (char **dst, const char *src)
{
    if (src == NULL)
        return 0;
    *dst = strdup (src);
    return *dst ? 0 : -1;
}

int
kiwi_task_copy (kiwi_task *dst, const kiwi_task *src, kiwi_error_t *err)
{
    kiwi_task_init (dst);
    dst->limits = src->limits;
    dst->has_model = src->has_model;
    dst->model.provider = src->model.provider;
    dst->submitted_at = src->submitted_at;
    if (dup_opt (&dst->id, src->id) < 0 || dup_opt (&dst->repo.url, src->repo.url) < 0
        || dup_opt (&dst->repo.ref, src->repo.ref) < 0 || dup_opt (&dst->repo.subdir, src->repo.subdir) < 0
        || dup_opt (&dst->test_command, src->test_command) < 0 || dup_opt (&dst->goal, src->goal) < 0
        || dup_opt (&dst->ci_context, src->ci_context) < 0 || dup_opt (&dst->model.name, src->model.name) < 0
        || dup_opt (&dst->model.base_url, src->model.base_url) < 0 || dup_opt (&dst->source, src->source) < 0
        || dup_opt (&dst->batch_id, src->batch_id) < 0)
        goto fail;
    for (size_t i = 0; i < src->n_test_credentials; i++)
        if (add_cred (dst, src->test_credentials[i], err) < 0)
            goto fail;
    return 0;
fail:
    kiwi_task_clear (dst);
    return oom (err);
}

int
kiwi_timed_id_new (const char *prefix, size_t random_bytes, char *buf, size_t cap, kiwi_error_t *err)
{
    unsigned char r[8];
    if (random_bytes == 0 || random_bytes > sizeof r)
        return kiwi_error_make (err, EINVAL, "generating a %s id: %zu random bytes", prefix, random_bytes);
    if (getrandom (r, random_bytes, 0) != (ssize_t) random_bytes)
        return kiwi_error_make (err, errno, "generating a %s id", prefix);
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r (&ts.tv_sec, &tm);
    char when[32], hex[2 * sizeof r + 1];
    strftime (when, sizeof when, "%Y%m%dT%H%M%S", &tm);
    for (size_t i = 0; i < random_bytes; i++)
        snprintf (hex + 2 * i, 3, "%02x", r[i]);
    int n = snprintf (buf, cap, "%s-%s.%03ldZ-%s", prefix, when, ts.tv_nsec / 1000000L, hex);
    if (n < 0 || (size_t) n >= cap)
        return kiwi_error_make (err, ENOSPC, "generating a %s id", prefix);
    return 0;
}

int
kiwi_task_id_new (char *buf, size_t cap, kiwi_error_t *err)
{
    return kiwi_timed_id_new ("kiwi", 8, buf, cap, err);
}

int
kiwi_task_input_finish (kiwi_task *t, const char *source, kiwi_error_t *err)
{
    if (t->id == NULL) {
        char id[64];
        if (kiwi_task_id_new (id, sizeof id, err) < 0 || set_str (&t->id, id, err) < 0)
            return -1;
    }
    if (t->submitted_at == 0)
        t->submitted_at = kiwi_wall_ms ();
    if (t->source == NULL && source != NULL && set_str (&t->source, source, err) < 0)
        return -1;
    return kiwi_task_validate (t, err);
}

/* ---------------------------------------------------------------- files */

int
kiwi_read_file (const char *path, size_t max, char **out, size_t *len, kiwi_error_t *err)
{
    bool is_stdin = strcmp (path, "-") == 0;
    cleanup_close int fd = is_stdin ? dup (STDIN_FILENO) : open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "cannot open `%s`", is_stdin ? "stdin" : path);
    cleanup_buf kiwi_buf b = KIWI_BUF_INIT;
    for (;;) {
        /* 64 KiB first, then doubling; one byte of room always kept for the NUL */
        if (b.cap - b.len <= 1 && kiwi_buf_reserve (&b, b.cap ? b.cap : 65535, NULL) < 0)
            return oom (err);
        ssize_t r = read (fd, b.data + b.len, b.cap - 1 - b.len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return kiwi_error_make (err, errno, "reading `%s`", is_stdin ? "stdin" : path);
        }
        if (r == 0)
            break;
        b.len += (size_t) r;
        if (b.len > max)
            return kiwi_error_make_code (err, KIWI_WIRE_EINVALID, "`%s`: larger than %zu bytes",
                                         is_stdin ? "stdin" : path, max);
    }
    b.data[b.len] = '\0';
    *out = kiwi_buf_steal (&b, len);
    return 0;
}
