/*
 * task.c: the Task message (see task.h and task.md): field rules, msgpack
 * encoding and decoding, and the JSON rendering used by `kiwi tail`.
 *
 * Decoding checks wire types and presence, fills the struct, then runs
 * kiwi_task_validate(), so the value rules below are stated once.
 */
#include "schemas/task.h"

#include <stdlib.h>
#include <string.h>

#include "common/sha256.h"
#include "schemas/wire-internal.h"

static const char *const provider_names[] = {
    [KIWI_PROVIDER_UNSET] = NULL,
#define KIWI__PROVIDER_NAME(id, s) [KIWI_PROVIDER_##id] = s,
    KIWI_PROVIDER_MAP (KIWI__PROVIDER_NAME)
#undef KIWI__PROVIDER_NAME
};

const char *
kiwi_provider_name (kiwi_provider p)
{
    if ((int) p <= KIWI_PROVIDER_UNSET || p >= KIWI_PROVIDER__END)
        return NULL;
    return provider_names[p];
}

int
kiwi_provider_parse (const char *s, kiwi_provider *out)
{
    for (int p = KIWI_PROVIDER_UNSET + 1; p < KIWI_PROVIDER__END; p++)
        if (strcmp (s, provider_names[p]) == 0) {
            *out = (kiwi_provider) p;
            return 0;
        }
    return -1;
}

/* ---------------------------------------------------------------- rules */

static const kiwi__str_rule R_ID = { true, 1, KIWI_TASK_ID_MAX, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_URL = { true, 1, 4096, KIWI__TEXT, kiwi__chars_locator };
static const kiwi__str_rule R_REF = { true, 1, 256, KIWI__TEXT, kiwi__chars_locator };
static const kiwi__str_rule R_SUBDIR = { false, 1, 1024, KIWI__TEXT, kiwi__chars_rel_path };
static const kiwi__str_rule R_TEST_COMMAND = { true, 1, 8192, KIWI__TEXT, NULL };
static const kiwi__str_rule R_GOAL = { true, 1, 65536, KIWI__TEXT, NULL };
static const kiwi__str_rule R_CI_CONTEXT = { false, 0, 262144, KIWI__RAW, NULL };
static const kiwi__str_rule R_MODEL_NAME = { true, 1, 256, KIWI__TEXT, kiwi__chars_token };
static const kiwi__str_rule R_BASE_URL = { false, 1, 2048, KIWI__TEXT, kiwi__chars_locator };
static const kiwi__str_rule R_CREDENTIAL = { true, 1, 128, KIWI__TEXT, kiwi__chars_env_name };
static const kiwi__str_rule R_SOURCE = { false, 1, 64, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_BATCH_ID = { false, 1, KIWI_TASK_BATCH_ID_MAX, KIWI__TEXT, kiwi__chars_id };

void
kiwi_task_init (kiwi_task *t)
{
    memset (t, 0, sizeof *t);
    t->limits.max_rounds = KIWI_TASK_MAX_ROUNDS_DEFAULT;
    t->limits.timeout_seconds = KIWI_TASK_TIMEOUT_DEFAULT;
    t->limits.disk_mb = KIWI_TASK_DISK_MB_DEFAULT;
}

void
kiwi_task_clear (kiwi_task *t)
{
    free (t->id);
    free (t->repo.url);
    free (t->repo.ref);
    free (t->repo.subdir);
    free (t->test_command);
    free (t->goal);
    free (t->ci_context);
    free (t->model.name);
    free (t->model.base_url);
    for (size_t i = 0; i < t->n_test_credentials; i++)
        free (t->test_credentials[i]);
    free (t->test_credentials);
    free (t->source);
    free (t->batch_id);
    kiwi_task_init (t);
}

int
kiwi_task_validate (const kiwi_task *t, kiwi_error_t *err)
{
    if (kiwi__check_str ("task", "id", t->id, &R_ID, err) < 0
        || kiwi__check_str ("task.repo", "url", t->repo.url, &R_URL, err) < 0
        || kiwi__check_str ("task.repo", "ref", t->repo.ref, &R_REF, err) < 0
        || kiwi__check_str ("task.repo", "subdir", t->repo.subdir, &R_SUBDIR, err) < 0
        || kiwi__check_str ("task", "test_command", t->test_command, &R_TEST_COMMAND, err) < 0
        || kiwi__check_str ("task", "goal", t->goal, &R_GOAL, err) < 0
        || kiwi__check_str ("task", "ci_context", t->ci_context, &R_CI_CONTEXT, err) < 0)
        return -1;

    const kiwi_task_limits *l = &t->limits;
    if (kiwi__check_u64 ("task.limits", "max_rounds", l->max_rounds, KIWI_TASK_MAX_ROUNDS_MIN,
                         KIWI_TASK_MAX_ROUNDS_MAX, err) < 0
        || (l->has_session_budget_tokens
            && kiwi__check_u64 ("task.limits", "session_budget_tokens", l->session_budget_tokens, 1,
                                UINT64_MAX, err) < 0)
        || (l->has_session_budget_usd_micros
            && kiwi__check_u64 ("task.limits", "session_budget_usd_micros",
                                l->session_budget_usd_micros, 1, UINT64_MAX, err) < 0)
        || kiwi__check_u64 ("task.limits", "timeout_seconds", l->timeout_seconds, KIWI_TASK_TIMEOUT_MIN,
                            KIWI_TASK_TIMEOUT_MAX, err) < 0
        || kiwi__check_u64 ("task.limits", "disk_mb", l->disk_mb, KIWI_TASK_DISK_MB_MIN,
                            KIWI_TASK_DISK_MB_MAX, err) < 0)
        return -1;

    if (t->has_model) {
        if (t->model.provider == KIWI_PROVIDER_UNSET)
            return kiwi__fail (err, "task.model", "provider", "required field missing");
        if (kiwi_provider_name (t->model.provider) == NULL)
            return kiwi__fail (err, "task.model", "provider", "unknown provider %d", (int) t->model.provider);
        if (kiwi__check_str ("task.model", "name", t->model.name, &R_MODEL_NAME, err) < 0
            || kiwi__check_str ("task.model", "base_url", t->model.base_url, &R_BASE_URL, err) < 0)
            return -1;
    }

    if (t->n_test_credentials > KIWI_TASK_CREDENTIALS_MAX)
        return kiwi__fail (err, "task", "test_credentials", "more than %d entries",
                           KIWI_TASK_CREDENTIALS_MAX);
    if (t->n_test_credentials > 0 && t->test_credentials == NULL)
        return kiwi__fail (err, "task", "test_credentials", "%zu entries but no array",
                           t->n_test_credentials);
    for (size_t i = 0; i < t->n_test_credentials; i++) {
        char path[KIWI__PATH_MAX];
        kiwi__path_index (path, "task.test_credentials", i);
        if (kiwi__check_str (path, NULL, t->test_credentials[i], &R_CREDENTIAL, err) < 0)
            return -1;
    }

    if (kiwi__check_i64 ("task", "submitted_at", t->submitted_at, KIWI__TS_MIN, KIWI__TS_MAX, err) < 0
        || kiwi__check_str ("task", "source", t->source, &R_SOURCE, err) < 0
        || kiwi__check_str ("task", "batch_id", t->batch_id, &R_BATCH_ID, err) < 0)
        return -1;
    return 0;
}

/* ---------------------------------------------------------------- encoding */

int
kiwi_task_encode (const kiwi_task *t, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (kiwi_task_validate (t, err) < 0)
        return -1;

    kiwi__enc e;
    kiwi__enc_init (&e);
    kiwi__enc_map_begin (&e);
    kiwi__enc_ku64 (&e, "v", KIWI_WIRE_VERSION);
    kiwi__enc_kstr (&e, "id", t->id);

    kiwi__enc_key (&e, "repo");
    kiwi__enc_map_begin (&e);
    kiwi__enc_kstr (&e, "url", t->repo.url);
    kiwi__enc_kstr (&e, "ref", t->repo.ref);
    kiwi__enc_kstr (&e, "subdir", t->repo.subdir);
    kiwi__enc_map_end (&e);

    kiwi__enc_kstr (&e, "test_command", t->test_command);
    kiwi__enc_kstr (&e, "goal", t->goal);
    kiwi__enc_kstr (&e, "ci_context", t->ci_context);

    kiwi__enc_key (&e, "limits");
    kiwi__enc_map_begin (&e);
    kiwi__enc_ku64 (&e, "max_rounds", t->limits.max_rounds);
    if (t->limits.has_session_budget_tokens)
        kiwi__enc_ku64 (&e, "session_budget_tokens", t->limits.session_budget_tokens);
    if (t->limits.has_session_budget_usd_micros)
        kiwi__enc_ku64 (&e, "session_budget_usd_micros", t->limits.session_budget_usd_micros);
    kiwi__enc_ku64 (&e, "timeout_seconds", t->limits.timeout_seconds);
    kiwi__enc_ku64 (&e, "disk_mb", t->limits.disk_mb);
    kiwi__enc_map_end (&e);

    if (t->has_model) {
        kiwi__enc_key (&e, "model");
        kiwi__enc_map_begin (&e);
        kiwi__enc_kstr (&e, "provider", kiwi_provider_name (t->model.provider));
        kiwi__enc_kstr (&e, "name", t->model.name);
        kiwi__enc_kstr (&e, "base_url", t->model.base_url);
        kiwi__enc_map_end (&e);
    }

    if (t->n_test_credentials > 0) {
        kiwi__enc_key (&e, "test_credentials");
        kiwi__enc_array_begin (&e);
        for (size_t i = 0; i < t->n_test_credentials; i++)
            kiwi__enc_str (&e, t->test_credentials[i]);
        kiwi__enc_array_end (&e);
    }

    kiwi__enc_ki64 (&e, "submitted_at", t->submitted_at);
    kiwi__enc_kstr (&e, "source", t->source);
    kiwi__enc_kstr (&e, "batch_id", t->batch_id);
    kiwi__enc_map_end (&e);
    return kiwi__enc_finish (&e, "task", out, out_len, err);
}

/* ---------------------------------------------------------------- decoding */

static int
decode_model (const kiwi__map *root, kiwi_task *t, kiwi_error_t *err)
{
    kiwi__map m;
    if (kiwi__read_map (root, "model", &m, &t->has_model, err) < 0)
        return -1;
    if (!t->has_model)
        return 0;

    char *provider = NULL;
    if (kiwi__read_str (&m, "provider", &provider, err) < 0)
        return -1;
    if (provider == NULL)
        return kiwi__fail (err, m.path, "provider", "required field missing");
    int r = kiwi_provider_parse (provider, &t->model.provider);
    if (r < 0)
        kiwi__fail_enum (err, m.path, "provider", provider, provider_names,
                         sizeof provider_names / sizeof provider_names[0]);
    free (provider);
    if (r < 0)
        return -1;

    if (kiwi__read_str (&m, "name", &t->model.name, err) < 0
        || kiwi__read_str (&m, "base_url", &t->model.base_url, err) < 0)
        return -1;
    return 0;
}

static int
decode_fields (const kiwi__map *root, kiwi_task *t, kiwi_error_t *err)
{
    kiwi__map repo;
    if (kiwi__read_str (root, "id", &t->id, err) < 0
        || kiwi__read_map (root, "repo", &repo, NULL, err) < 0
        || kiwi__read_str (&repo, "url", &t->repo.url, err) < 0
        || kiwi__read_str (&repo, "ref", &t->repo.ref, err) < 0
        || kiwi__read_str (&repo, "subdir", &t->repo.subdir, err) < 0
        || kiwi__read_str (root, "test_command", &t->test_command, err) < 0
        || kiwi__read_str (root, "goal", &t->goal, err) < 0
        || kiwi__read_str (root, "ci_context", &t->ci_context, err) < 0)
        return -1;

    kiwi__map limits;
    bool has_limits = false;
    if (kiwi__read_map (root, "limits", &limits, &has_limits, err) < 0)
        return -1;
    if (has_limits) {
        kiwi_task_limits *l = &t->limits;
        bool present;
        if (kiwi__read_u32 (&limits, "max_rounds", &l->max_rounds, &present, err) < 0
            || kiwi__read_u64 (&limits, "session_budget_tokens", &l->session_budget_tokens,
                               &l->has_session_budget_tokens, err) < 0
            || kiwi__read_u64 (&limits, "session_budget_usd_micros", &l->session_budget_usd_micros,
                               &l->has_session_budget_usd_micros, err) < 0
            || kiwi__read_u32 (&limits, "timeout_seconds", &l->timeout_seconds, &present, err) < 0
            || kiwi__read_u32 (&limits, "disk_mb", &l->disk_mb, &present, err) < 0)
            return -1;
    }

    if (decode_model (root, t, err) < 0)
        return -1;

    const msgpack_object_array *creds = NULL;
    bool has_creds = false;
    if (kiwi__read_array (root, "test_credentials", KIWI_TASK_CREDENTIALS_MAX, &creds, &has_creds, err) < 0)
        return -1;
    if (has_creds && creds->size > 0) {
        t->test_credentials = calloc (creds->size, sizeof *t->test_credentials);
        if (t->test_credentials == NULL)
            return kiwi__nomem (err, "task.test_credentials");
        t->n_test_credentials = creds->size;
        for (uint32_t i = 0; i < creds->size; i++) {
            char path[KIWI__PATH_MAX];
            kiwi__path_index (path, "task.test_credentials", i);
            if (kiwi__obj_str (&creds->ptr[i], path, &t->test_credentials[i], err) < 0)
                return -1;
        }
    }

    if (kiwi__read_i64 (root, "submitted_at", &t->submitted_at, NULL, err) < 0
        || kiwi__read_str (root, "source", &t->source, err) < 0
        || kiwi__read_str (root, "batch_id", &t->batch_id, err) < 0)
        return -1;
    return 0;
}

int
kiwi_task_decode (const char *buf, size_t len, kiwi_task *out, kiwi_error_t *err)
{
    kiwi__msg m;
    kiwi_task_init (out);
    int r = kiwi__msg_open (&m, "task", buf, len, err);
    if (r == 0)
        r = decode_fields (&m.root, out, err);
    kiwi__msg_close (&m);
    if (r == 0)
        r = kiwi_task_validate (out, err);
    if (r < 0)
        kiwi_task_clear (out);
    return r;
}

/* ---------------------------------------------------------------- JSON */

int
kiwi_task_to_json (const kiwi_task *t, char **out, kiwi_error_t *err)
{
    kiwi__json j;
    kiwi__json_init (&j);
    kiwi__json_object_begin (&j);
    kiwi__json_ku64 (&j, "v", KIWI_WIRE_VERSION);
    kiwi__json_kstr (&j, "id", t->id);

    kiwi__json_key (&j, "repo");
    kiwi__json_object_begin (&j);
    kiwi__json_kstr (&j, "url", t->repo.url);
    kiwi__json_kstr (&j, "ref", t->repo.ref);
    kiwi__json_kstr (&j, "subdir", t->repo.subdir);
    kiwi__json_object_end (&j);

    kiwi__json_kstr (&j, "test_command", t->test_command);
    kiwi__json_kstr (&j, "goal", t->goal);
    kiwi__json_kstr (&j, "ci_context", t->ci_context);

    kiwi__json_key (&j, "limits");
    kiwi__json_object_begin (&j);
    kiwi__json_ku64 (&j, "max_rounds", t->limits.max_rounds);
    if (t->limits.has_session_budget_tokens)
        kiwi__json_ku64 (&j, "session_budget_tokens", t->limits.session_budget_tokens);
    if (t->limits.has_session_budget_usd_micros)
        kiwi__json_ku64 (&j, "session_budget_usd_micros", t->limits.session_budget_usd_micros);
    kiwi__json_ku64 (&j, "timeout_seconds", t->limits.timeout_seconds);
    kiwi__json_ku64 (&j, "disk_mb", t->limits.disk_mb);
    kiwi__json_object_end (&j);

    if (t->has_model) {
        kiwi__json_key (&j, "model");
        kiwi__json_object_begin (&j);
        kiwi__json_key (&j, "provider");
        kiwi__json_str (&j, kiwi_provider_name (t->model.provider));
        kiwi__json_kstr (&j, "name", t->model.name);
        kiwi__json_kstr (&j, "base_url", t->model.base_url);
        kiwi__json_object_end (&j);
    }

    kiwi__json_key (&j, "test_credentials");
    kiwi__json_array_begin (&j);
    for (size_t i = 0; i < t->n_test_credentials && t->test_credentials != NULL; i++)
        kiwi__json_str (&j, t->test_credentials[i]);
    kiwi__json_array_end (&j);

    kiwi__json_ki64 (&j, "submitted_at", t->submitted_at);
    kiwi__json_kstr (&j, "source", t->source);
    kiwi__json_kstr (&j, "batch_id", t->batch_id);
    kiwi__json_object_end (&j);
    return kiwi__json_finish (&j, "task", out, err);
}

int
kiwi_task_body_sha256 (const kiwi_task *t, char out[65], kiwi_error_t *err)
{
    kiwi_task body = *t; /* borrows every string; not cleared */
    body.submitted_at = 0;
    body.source = NULL;
    char *json = NULL;
    if (kiwi_task_to_json (&body, &json, err) < 0)
        return -1;
    kiwi_sha256_hex (json, out);
    free (json);
    return 0;
}
