/*
 * progress.c: the ProgressEvent message (see progress.h and progress.md):
 * field rules, msgpack encoding and decoding, JSON rendering. The payload is
 * an arbitrary msgpack map that travels as bytes; this module only checks
 * that it is one well-formed, bounded map.
 */
#include "schemas/progress.h"

#include <stdlib.h>
#include <string.h>

#include "schemas/task.h"
#include "schemas/wire-internal.h"

static const char *const phase_names[] = {
    [KIWI_STAGE_UNSET] = NULL,
#define KIWI__STAGE_NAME(id, s) [KIWI_STAGE_##id] = s,
    KIWI_STAGE_MAP (KIWI__STAGE_NAME)
#undef KIWI__STAGE_NAME
};

const char *
kiwi_stage_name (kiwi_stage p)
{
    if ((int) p <= KIWI_STAGE_UNSET || p >= KIWI_STAGE__END)
        return NULL;
    return phase_names[p];
}

int
kiwi_stage_parse (const char *s, kiwi_stage *out)
{
    for (int p = KIWI_STAGE_UNSET + 1; p < KIWI_STAGE__END; p++)
        if (strcmp (s, phase_names[p]) == 0) {
            *out = (kiwi_stage) p;
            return 0;
        }
    return -1;
}

static const kiwi__str_rule R_TASK_ID = { true, 1, KIWI_TASK_ID_MAX, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_KIND = { true, 1, 64, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_WORKER_ID = { true, 1, 128, KIWI__TEXT, kiwi__chars_id };

void
kiwi_progress_init (kiwi_progress *p)
{
    memset (p, 0, sizeof *p);
}

void
kiwi_progress_clear (kiwi_progress *p)
{
    free (p->task_id);
    free (p->kind);
    free (p->worker_id);
    free (p->payload);
    kiwi_progress_init (p);
}

static int
validate_payload (const char *payload, size_t len, kiwi_error_t *err)
{
    if (len > KIWI_PROGRESS_PAYLOAD_MAX)
        return kiwi__fail (err, "progress", "payload", "larger than %d bytes", KIWI_PROGRESS_PAYLOAD_MAX);
    if (len == 0)
        return kiwi__fail (err, "progress", "payload", "empty buffer (leave payload NULL when absent)");
    size_t end = 0;
    if (kiwi__scan (payload, len, KIWI_WIRE_MAX_DEPTH - 1, "progress.payload", &end, err) < 0)
        return -1;
    if (end != len)
        return kiwi__fail (err, "progress", "payload", "trailing bytes after the map");
    unsigned char b = (unsigned char) payload[0];
    if (!((b >= 0x80 && b <= 0x8f) || b == 0xde || b == 0xdf))
        return kiwi__fail (err, "progress", "payload", "expected map");
    return 0;
}

/* Checks every rule of progress.md, including that payload, when present,
 * is exactly one msgpack map nested at most KIWI_WIRE_MAX_DEPTH - 1 deep. */
static int
kiwi_progress_validate (const kiwi_progress *p, kiwi_error_t *err)
{
    if (kiwi__check_str ("progress", "task_id", p->task_id, &R_TASK_ID, err) < 0
        || kiwi__check_u64 ("progress", "seq", p->seq, 1, UINT64_MAX, err) < 0
        || kiwi__check_u64 ("progress", "round", p->round, 0, KIWI_TASK_MAX_ROUNDS_MAX, err) < 0)
        return -1;
    if (p->stage == KIWI_STAGE_UNSET)
        return kiwi__fail (err, "progress", "phase", "required field missing");
    if (kiwi_stage_name (p->stage) == NULL)
        return kiwi__fail (err, "progress", "phase", "unknown phase %d", (int) p->stage);
    if (kiwi__check_str ("progress", "kind", p->kind, &R_KIND, err) < 0
        || kiwi__check_i64 ("progress", "ts", p->ts, KIWI__TS_MIN, KIWI__TS_MAX, err) < 0
        || kiwi__check_str ("progress", "worker_id", p->worker_id, &R_WORKER_ID, err) < 0)
        return -1;
    if (p->payload == NULL) {
        if (p->payload_len != 0)
            return kiwi__fail (err, "progress", "payload", "length %zu but no buffer", p->payload_len);
        return 0;
    }
    return validate_payload (p->payload, p->payload_len, err);
}

int
kiwi_progress_encode (const kiwi_progress *p, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (kiwi_progress_validate (p, err) < 0)
        return -1;

    kiwi__enc e;
    kiwi__enc_init (&e);
    kiwi__enc_map_begin (&e);
    kiwi__enc_ku64 (&e, "v", KIWI_WIRE_VERSION);
    kiwi__enc_kstr (&e, "task_id", p->task_id);
    kiwi__enc_ku64 (&e, "seq", p->seq);
    kiwi__enc_ku64 (&e, "attempt", p->attempt);
    kiwi__enc_ku64 (&e, "round", p->round);
    kiwi__enc_kstr (&e, "phase", kiwi_stage_name (p->stage));
    kiwi__enc_kstr (&e, "kind", p->kind);
    kiwi__enc_ki64 (&e, "ts", p->ts);
    kiwi__enc_kstr (&e, "worker_id", p->worker_id);
    if (p->payload != NULL) {
        kiwi__enc_key (&e, "payload");
        kiwi__enc_raw (&e, p->payload, p->payload_len);
    }
    kiwi__enc_map_end (&e);
    return kiwi__enc_finish (&e, "progress", out, out_len, err);
}

/* Re-encodes the payload value into an owned buffer. */
static int
copy_payload (const msgpack_object *o, kiwi_progress *p, kiwi_error_t *err)
{
    if (o->type != MSGPACK_OBJECT_MAP)
        return kiwi__fail (err, "progress", "payload", "expected map, got %s", kiwi__type_name (o));
    msgpack_sbuffer sbuf;
    msgpack_packer pk;
    msgpack_sbuffer_init (&sbuf);
    msgpack_packer_init (&pk, &sbuf, msgpack_sbuffer_write);
    if (msgpack_pack_object (&pk, *o) < 0) {
        msgpack_sbuffer_destroy (&sbuf);
        return kiwi__nomem (err, "progress.payload");
    }
    p->payload_len = sbuf.size;
    p->payload = msgpack_sbuffer_release (&sbuf);
    return 0;
}

static int
decode_fields (const kiwi__map *root, kiwi_progress *p, kiwi_error_t *err)
{
    char *phase = NULL;
    bool attempt_present = false; /* absent (an older producer): 0, unknown */
    if (kiwi__read_str (root, "task_id", &p->task_id, err) < 0
        || kiwi__read_u64 (root, "seq", &p->seq, NULL, err) < 0
        || kiwi__read_u32 (root, "attempt", &p->attempt, &attempt_present, err) < 0
        || kiwi__read_u32 (root, "round", &p->round, NULL, err) < 0
        || kiwi__read_str (root, "phase", &phase, err) < 0)
        return -1;
    if (phase != NULL) {
        int r = kiwi_stage_parse (phase, &p->stage);
        if (r < 0)
            kiwi__fail_enum (err, "progress", "phase", phase, phase_names,
                             sizeof phase_names / sizeof phase_names[0]);
        free (phase);
        if (r < 0)
            return -1;
    }
    if (kiwi__read_str (root, "kind", &p->kind, err) < 0
        || kiwi__read_i64 (root, "ts", &p->ts, NULL, err) < 0
        || kiwi__read_str (root, "worker_id", &p->worker_id, err) < 0)
        return -1;
    const msgpack_object *payload = kiwi__map_get (root, "payload");
    if (payload != NULL && copy_payload (payload, p, err) < 0)
        return -1;
    return 0;
}

int
kiwi_progress_decode (const char *buf, size_t len, kiwi_progress *out, kiwi_error_t *err)
{
    kiwi__msg m;
    kiwi_progress_init (out);
    int r = kiwi__msg_open (&m, "progress", buf, len, err);
    if (r == 0)
        r = decode_fields (&m.root, out, err);
    kiwi__msg_close (&m);
    if (r == 0)
        r = kiwi_progress_validate (out, err);
    if (r < 0)
        kiwi_progress_clear (out);
    return r;
}

int
kiwi_progress_to_json (const kiwi_progress *p, char **out, kiwi_error_t *err)
{
    kiwi__json j;
    msgpack_unpacked u;
    int r = 0;

    msgpack_unpacked_init (&u);
    kiwi__json_init (&j);
    kiwi__json_object_begin (&j);
    kiwi__json_ku64 (&j, "v", KIWI_WIRE_VERSION);
    kiwi__json_kstr (&j, "task_id", p->task_id);
    kiwi__json_ku64 (&j, "seq", p->seq);
    kiwi__json_ku64 (&j, "attempt", p->attempt);
    kiwi__json_ku64 (&j, "round", p->round);
    kiwi__json_key (&j, "phase");
    kiwi__json_str (&j, kiwi_stage_name (p->stage));
    kiwi__json_kstr (&j, "kind", p->kind);
    kiwi__json_ki64 (&j, "ts", p->ts);
    kiwi__json_kstr (&j, "worker_id", p->worker_id);
    if (p->payload != NULL) {
        msgpack_unpacked_destroy (&u);
        r = kiwi__unpack_one (&u, p->payload, p->payload_len, KIWI_WIRE_MAX_DEPTH - 1,
                              "progress.payload", err);
        if (r == 0) {
            kiwi__json_key (&j, "payload");
            r = kiwi__json_msgpack (&j, &u.data, 2, err);
        }
    }
    kiwi__json_object_end (&j);
    msgpack_unpacked_destroy (&u);
    if (r == 0)
        r = kiwi__json_finish (&j, "progress", out, err);
    kiwi__json_destroy (&j);
    return r;
}
