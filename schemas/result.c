/*
 * result.c: the Result message (see result.h and result.md): field rules,
 * msgpack encoding and decoding, JSON rendering.
 */
#include "schemas/result.h"

#include <stdlib.h>
#include <string.h>

#include "schemas/task.h"
#include "schemas/wire-internal.h"

static const char *const status_names[] = {
    [KIWI_RESULT_UNSET] = NULL,
#define KIWI__STATUS_NAME(id, s) [KIWI_RESULT_##id] = s,
    KIWI_RESULT_STATUS_MAP (KIWI__STATUS_NAME)
#undef KIWI__STATUS_NAME
};

const char *
kiwi_result_status_name (kiwi_result_status s)
{
    if ((int) s <= KIWI_RESULT_UNSET || s >= KIWI_RESULT__END)
        return NULL;
    return status_names[s];
}

int
kiwi_result_status_parse (const char *s, kiwi_result_status *out)
{
    for (int i = KIWI_RESULT_UNSET + 1; i < KIWI_RESULT__END; i++)
        if (strcmp (s, status_names[i]) == 0) {
            *out = (kiwi_result_status) i;
            return 0;
        }
    return -1;
}

static const kiwi__str_rule R_TASK_ID = { true, 1, KIWI_TASK_ID_MAX, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_REASON = { false, 0, KIWI_RESULT_REASON_MAX, KIWI__RAW, NULL };
static const kiwi__str_rule R_DIFF = { false, 0, KIWI_RESULT_DIFF_MAX, KIWI__RAW, NULL };
static const kiwi__str_rule R_WORKER_ID = { true, 1, 128, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_SHA256 = { false, 64, 64, KIWI__TEXT, NULL };
static const kiwi__str_rule R_LOCATION = { false, 1, KIWI_RESULT_LOCATION_MAX, KIWI__TEXT, NULL };

void
kiwi_result_init (kiwi_result *r)
{
    memset (r, 0, sizeof *r);
}

void
kiwi_result_clear (kiwi_result *r)
{
    free (r->task_id);
    free (r->reason);
    free (r->diff);
    free (r->worker_id);
    free (r->diff_sha256);
    free (r->diff_location);
    free (r->task_sha256);
    kiwi_result_init (r);
}

/* A 64-character field (R_SHA256) in lowercase hex. */
static int
check_sha256 (const char *field, const char *v, kiwi_error_t *err)
{
    if (kiwi__check_str ("result", field, v, &R_SHA256, err) < 0)
        return -1;
    for (const char *p = v; p && *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return kiwi__fail (err, "result", field, "not lowercase hex");
    return 0;
}

/* Checks every rule of result.md, including that diff is present exactly
 * when status is FIXED. */
static int
kiwi_result_validate (const kiwi_result *r, kiwi_error_t *err)
{
    if (kiwi__check_str ("result", "task_id", r->task_id, &R_TASK_ID, err) < 0)
        return -1;
    if (r->status == KIWI_RESULT_UNSET)
        return kiwi__fail (err, "result", "status", "required field missing");
    if (kiwi_result_status_name (r->status) == NULL)
        return kiwi__fail (err, "result", "status", "unknown status %d", (int) r->status);
    if (kiwi__check_str ("result", "reason", r->reason, &R_REASON, err) < 0
        || kiwi__check_str ("result", "diff", r->diff, &R_DIFF, err) < 0)
        return -1;
    if (r->status == KIWI_RESULT_FIXED && r->diff == NULL)
        return kiwi__fail (err, "result", "diff", "required when status is fixed");
    if (r->status != KIWI_RESULT_FIXED && r->diff != NULL)
        return kiwi__fail (err, "result", "diff", "only allowed when status is fixed, status is %s",
                           kiwi_result_status_name (r->status));
    if (kiwi__check_u64 ("result", "rounds", r->rounds, 0, KIWI_TASK_MAX_ROUNDS_MAX, err) < 0
        || kiwi__check_str ("result", "worker_id", r->worker_id, &R_WORKER_ID, err) < 0
        || kiwi__check_i64 ("result", "finished_at", r->finished_at, KIWI__TS_MIN, KIWI__TS_MAX, err) < 0)
        return -1;
    if (check_sha256 ("diff_sha256", r->diff_sha256, err) < 0
        || kiwi__check_str ("result", "diff_location", r->diff_location, &R_LOCATION, err) < 0
        || check_sha256 ("task_sha256", r->task_sha256, err) < 0)
        return -1;
    if (r->diff_truncated && r->diff == NULL)
        return kiwi__fail (err, "result", "diff_truncated", "only allowed with a diff (status fixed)");
    if (r->diff_truncated && r->diff_bytes < strlen (r->diff))
        return kiwi__fail (err, "result", "diff_bytes", "%llu is less than the diff carried (%zu bytes)",
                           (unsigned long long) r->diff_bytes, strlen (r->diff));
    return 0;
}

int
kiwi_result_encode (const kiwi_result *r, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (kiwi_result_validate (r, err) < 0)
        return -1;

    kiwi__enc e;
    kiwi__enc_init (&e);
    kiwi__enc_map_begin (&e);
    kiwi__enc_ku64 (&e, "v", KIWI_WIRE_VERSION);
    kiwi__enc_kstr (&e, "task_id", r->task_id);
    kiwi__enc_kstr (&e, "status", kiwi_result_status_name (r->status));
    kiwi__enc_kstr (&e, "reason", r->reason);
    kiwi__enc_kstr (&e, "diff", r->diff);
    kiwi__enc_ku64 (&e, "rounds", r->rounds);
    kiwi__enc_ku64 (&e, "tokens_in", r->tokens_in);
    kiwi__enc_ku64 (&e, "tokens_out", r->tokens_out);
    kiwi__enc_ku64 (&e, "cost_usd_micros", r->cost_usd_micros);
    kiwi__enc_ku64 (&e, "duration_ms", r->duration_ms);
    kiwi__enc_kstr (&e, "worker_id", r->worker_id);
    kiwi__enc_ki64 (&e, "finished_at", r->finished_at);
    if (r->diff_truncated) {
        kiwi__enc_kbool (&e, "diff_truncated", true);
        kiwi__enc_ku64 (&e, "diff_bytes", r->diff_bytes);
    }
    kiwi__enc_kstr (&e, "diff_sha256", r->diff_sha256);
    kiwi__enc_kstr (&e, "diff_location", r->diff_location);
    kiwi__enc_kstr (&e, "task_sha256", r->task_sha256);
    kiwi__enc_map_end (&e);
    return kiwi__enc_finish (&e, "result", out, out_len, err);
}

static int
decode_fields (const kiwi__map *root, kiwi_result *r, kiwi_error_t *err)
{
    char *status = NULL;
    bool present; /* the optional fields */
    if (kiwi__read_str (root, "task_id", &r->task_id, err) < 0
        || kiwi__read_str (root, "status", &status, err) < 0)
        return -1;
    if (status != NULL) {
        int rc = kiwi_result_status_parse (status, &r->status);
        if (rc < 0)
            kiwi__fail_enum (err, "result", "status", status, status_names,
                             sizeof status_names / sizeof status_names[0]);
        free (status);
        if (rc < 0)
            return -1;
    }
    if (kiwi__read_str (root, "reason", &r->reason, err) < 0
        || kiwi__read_str (root, "diff", &r->diff, err) < 0
        || kiwi__read_u32 (root, "rounds", &r->rounds, NULL, err) < 0
        || kiwi__read_u64 (root, "tokens_in", &r->tokens_in, NULL, err) < 0
        || kiwi__read_u64 (root, "tokens_out", &r->tokens_out, NULL, err) < 0
        || kiwi__read_u64 (root, "cost_usd_micros", &r->cost_usd_micros, NULL, err) < 0
        || kiwi__read_u64 (root, "duration_ms", &r->duration_ms, NULL, err) < 0
        || kiwi__read_str (root, "worker_id", &r->worker_id, err) < 0
        || kiwi__read_i64 (root, "finished_at", &r->finished_at, NULL, err) < 0
        || kiwi__read_bool (root, "diff_truncated", &r->diff_truncated, &present, err) < 0
        || kiwi__read_u64 (root, "diff_bytes", &r->diff_bytes, &present, err) < 0
        || kiwi__read_str (root, "diff_sha256", &r->diff_sha256, err) < 0
        || kiwi__read_str (root, "diff_location", &r->diff_location, err) < 0
        || kiwi__read_str (root, "task_sha256", &r->task_sha256, err) < 0)
        return -1;
    return 0;
}

int
kiwi_result_decode (const char *buf, size_t len, kiwi_result *out, kiwi_error_t *err)
{
    kiwi__msg m;
    kiwi_result_init (out);
    int r = kiwi__msg_open (&m, "result", buf, len, err);
    if (r == 0)
        r = decode_fields (&m.root, out, err);
    kiwi__msg_close (&m);
    if (r == 0)
        r = kiwi_result_validate (out, err);
    if (r < 0)
        kiwi_result_clear (out);
    return r;
}

int
kiwi_result_to_json (const kiwi_result *r, char **out, kiwi_error_t *err)
{
    kiwi__json j;
    kiwi__json_init (&j);
    kiwi__json_object_begin (&j);
    kiwi__json_ku64 (&j, "v", KIWI_WIRE_VERSION);
    kiwi__json_kstr (&j, "task_id", r->task_id);
    kiwi__json_key (&j, "status");
    kiwi__json_str (&j, kiwi_result_status_name (r->status));
    kiwi__json_kstr (&j, "reason", r->reason);
    kiwi__json_kstr (&j, "diff", r->diff);
    kiwi__json_ku64 (&j, "rounds", r->rounds);
    kiwi__json_ku64 (&j, "tokens_in", r->tokens_in);
    kiwi__json_ku64 (&j, "tokens_out", r->tokens_out);
    kiwi__json_ku64 (&j, "cost_usd_micros", r->cost_usd_micros);
    kiwi__json_ku64 (&j, "duration_ms", r->duration_ms);
    kiwi__json_kstr (&j, "worker_id", r->worker_id);
    kiwi__json_ki64 (&j, "finished_at", r->finished_at);
    if (r->diff_truncated) {
        kiwi__json_kbool (&j, "diff_truncated", true);
        kiwi__json_ku64 (&j, "diff_bytes", r->diff_bytes);
    }
    kiwi__json_kstr (&j, "diff_sha256", r->diff_sha256);
    kiwi__json_kstr (&j, "diff_location", r->diff_location);
    kiwi__json_kstr (&j, "task_sha256", r->task_sha256);
    kiwi__json_object_end (&j);
    return kiwi__json_finish (&j, "result", out, err);
}
