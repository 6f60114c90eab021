/*
 * heartbeat.c: the Heartbeat message (see heartbeat.h and heartbeat.md):
 * field rules, msgpack encoding and decoding, JSON rendering.
 */
#include "schemas/heartbeat.h"

#include <stdlib.h>
#include <string.h>

#include "schemas/wire-internal.h"

static const kiwi__str_rule R_WORKER_ID = { true, 1, 128, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_VERSION = { true, 1, 64, KIWI__TEXT, kiwi__chars_token };
static const kiwi__str_rule R_REASON = { false, 0, 4096, KIWI__RAW, NULL };
static const kiwi__str_rule R_EGRESS_NAME = { true, 1, 64, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_EGRESS_DETAIL = { false, 0, 4096, KIWI__RAW, NULL };

void
kiwi_heartbeat_init (kiwi_heartbeat *h)
{
    memset (h, 0, sizeof *h);
}

void
kiwi_heartbeat_clear (kiwi_heartbeat *h)
{
    free (h->worker_id);
    free (h->version);
    free (h->degraded_reason);
    for (size_t i = 0; i < h->n_egress && h->egress != NULL; i++) {
        free (h->egress[i].name);
        free (h->egress[i].detail);
    }
    free (h->egress);
    kiwi_heartbeat_init (h);
}

static int
kiwi_heartbeat_validate (const kiwi_heartbeat *h, kiwi_error_t *err)
{
    if (kiwi__check_str ("heartbeat", "worker_id", h->worker_id, &R_WORKER_ID, err) < 0
        || kiwi__check_str ("heartbeat", "version", h->version, &R_VERSION, err) < 0
        || kiwi__check_i64 ("heartbeat", "ts", h->ts, KIWI__TS_MIN, KIWI__TS_MAX, err) < 0
        || kiwi__check_u64 ("heartbeat", "slots_total", h->slots_total, 0, KIWI_HEARTBEAT_SLOTS_MAX, err) < 0)
        return -1;
    if (h->slots_busy > h->slots_total)
        return kiwi__fail (err, "heartbeat", "slots_busy", "%u is greater than slots_total %u",
                           h->slots_busy, h->slots_total);
    if (kiwi__check_str ("heartbeat", "degraded_reason", h->degraded_reason, &R_REASON, err) < 0)
        return -1;

    if (h->n_egress > KIWI_HEARTBEAT_EGRESS_MAX)
        return kiwi__fail (err, "heartbeat", "egress", "more than %d entries", KIWI_HEARTBEAT_EGRESS_MAX);
    if (h->n_egress > 0 && h->egress == NULL)
        return kiwi__fail (err, "heartbeat", "egress", "%zu entries but no array", h->n_egress);
    for (size_t i = 0; i < h->n_egress; i++) {
        char path[KIWI__PATH_MAX];
        kiwi__path_index (path, "heartbeat.egress", i);
        const kiwi_egress_check *c = &h->egress[i];
        if (kiwi__check_str (path, "name", c->name, &R_EGRESS_NAME, err) < 0
            || kiwi__check_str (path, "detail", c->detail, &R_EGRESS_DETAIL, err) < 0
            || kiwi__check_i64 (path, "checked_at", c->checked_at, KIWI__TS_MIN, KIWI__TS_MAX, err) < 0)
            return -1;
    }
    return 0;
}

int
kiwi_heartbeat_encode (const kiwi_heartbeat *h, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (kiwi_heartbeat_validate (h, err) < 0)
        return -1;

    kiwi__enc e;
    kiwi__enc_init (&e);
    kiwi__enc_map_begin (&e);
    kiwi__enc_ku64 (&e, "v", KIWI_WIRE_VERSION);
    kiwi__enc_kstr (&e, "worker_id", h->worker_id);
    kiwi__enc_kstr (&e, "version", h->version);
    kiwi__enc_ki64 (&e, "ts", h->ts);
    kiwi__enc_ku64 (&e, "slots_total", h->slots_total);
    kiwi__enc_ku64 (&e, "slots_busy", h->slots_busy);
    kiwi__enc_ku64 (&e, "tasks_done", h->tasks_done);
    kiwi__enc_ku64 (&e, "tasks_failed", h->tasks_failed);
    kiwi__enc_ku64 (&e, "cache_hits", h->cache_hits);
    kiwi__enc_ku64 (&e, "cache_misses", h->cache_misses);
    kiwi__enc_kbool (&e, "degraded", h->degraded);
    kiwi__enc_kstr (&e, "degraded_reason", h->degraded_reason);
    kiwi__enc_kbool (&e, "redis_ok", h->redis_ok);
    kiwi__enc_key (&e, "egress");
    kiwi__enc_array_begin (&e);
    for (size_t i = 0; i < h->n_egress; i++) {
        const kiwi_egress_check *c = &h->egress[i];
        kiwi__enc_map_begin (&e);
        kiwi__enc_kstr (&e, "name", c->name);
        kiwi__enc_kbool (&e, "ok", c->ok);
        kiwi__enc_kstr (&e, "detail", c->detail);
        kiwi__enc_ki64 (&e, "checked_at", c->checked_at);
        kiwi__enc_map_end (&e);
    }
    kiwi__enc_array_end (&e);
    kiwi__enc_map_end (&e);
    return kiwi__enc_finish (&e, "heartbeat", out, out_len, err);
}

static int
decode_egress (const msgpack_object *o, const char *path, kiwi_egress_check *c, kiwi_error_t *err)
{
    kiwi__map m;
    if (kiwi__map_open (&m, o, path, err) < 0
        || kiwi__read_str (&m, "name", &c->name, err) < 0
        || kiwi__read_bool (&m, "ok", &c->ok, NULL, err) < 0
        || kiwi__read_str (&m, "detail", &c->detail, err) < 0
        || kiwi__read_i64 (&m, "checked_at", &c->checked_at, NULL, err) < 0)
        return -1;
    return 0;
}

static int
decode_fields (const kiwi__map *root, kiwi_heartbeat *h, kiwi_error_t *err)
{
    if (kiwi__read_str (root, "worker_id", &h->worker_id, err) < 0
        || kiwi__read_str (root, "version", &h->version, err) < 0
        || kiwi__read_i64 (root, "ts", &h->ts, NULL, err) < 0
        || kiwi__read_u32 (root, "slots_total", &h->slots_total, NULL, err) < 0
        || kiwi__read_u32 (root, "slots_busy", &h->slots_busy, NULL, err) < 0
        || kiwi__read_u64 (root, "tasks_done", &h->tasks_done, NULL, err) < 0
        || kiwi__read_u64 (root, "tasks_failed", &h->tasks_failed, NULL, err) < 0
        || kiwi__read_u64 (root, "cache_hits", &h->cache_hits, NULL, err) < 0
        || kiwi__read_u64 (root, "cache_misses", &h->cache_misses, NULL, err) < 0
        || kiwi__read_bool (root, "degraded", &h->degraded, NULL, err) < 0
        || kiwi__read_str (root, "degraded_reason", &h->degraded_reason, err) < 0
        || kiwi__read_bool (root, "redis_ok", &h->redis_ok, NULL, err) < 0)
        return -1;

    const msgpack_object_array *egress = NULL;
    bool present = false;
    if (kiwi__read_array (root, "egress", KIWI_HEARTBEAT_EGRESS_MAX, &egress, &present, err) < 0)
        return -1;
    if (!present || egress->size == 0)
        return 0;
    h->egress = calloc (egress->size, sizeof *h->egress);
    if (h->egress == NULL)
        return kiwi__nomem (err, "heartbeat.egress");
    h->n_egress = egress->size;
    for (uint32_t i = 0; i < egress->size; i++) {
        char path[KIWI__PATH_MAX];
        kiwi__path_index (path, "heartbeat.egress", i);
        if (decode_egress (&egress->ptr[i], path, &h->egress[i], err) < 0)
            return -1;
    }
    return 0;
}

int
kiwi_heartbeat_decode (const char *buf, size_t len, kiwi_heartbeat *out, kiwi_error_t *err)
{
    kiwi__msg m;
    kiwi_heartbeat_init (out);
    int r = kiwi__msg_open (&m, "heartbeat", buf, len, err);
    if (r == 0)
        r = decode_fields (&m.root, out, err);
    kiwi__msg_close (&m);
    if (r == 0)
        r = kiwi_heartbeat_validate (out, err);
    if (r < 0)
        kiwi_heartbeat_clear (out);
    return r;
}

int
kiwi_heartbeat_to_json (const kiwi_heartbeat *h, char **out, kiwi_error_t *err)
{
    kiwi__json j;
    kiwi__json_init (&j);
    kiwi__json_object_begin (&j);
    kiwi__json_ku64 (&j, "v", KIWI_WIRE_VERSION);
    kiwi__json_kstr (&j, "worker_id", h->worker_id);
    kiwi__json_kstr (&j, "version", h->version);
    kiwi__json_ki64 (&j, "ts", h->ts);
    kiwi__json_ku64 (&j, "slots_total", h->slots_total);
    kiwi__json_ku64 (&j, "slots_busy", h->slots_busy);
    kiwi__json_ku64 (&j, "tasks_done", h->tasks_done);
    kiwi__json_ku64 (&j, "tasks_failed", h->tasks_failed);
    kiwi__json_ku64 (&j, "cache_hits", h->cache_hits);
    kiwi__json_ku64 (&j, "cache_misses", h->cache_misses);
    kiwi__json_kbool (&j, "degraded", h->degraded);
    kiwi__json_kstr (&j, "degraded_reason", h->degraded_reason);
    kiwi__json_kbool (&j, "redis_ok", h->redis_ok);
    kiwi__json_key (&j, "egress");
    kiwi__json_array_begin (&j);
    for (size_t i = 0; i < h->n_egress && h->egress != NULL; i++) {
        const kiwi_egress_check *c = &h->egress[i];
        kiwi__json_object_begin (&j);
        kiwi__json_kstr (&j, "name", c->name);
        kiwi__json_kbool (&j, "ok", c->ok);
        kiwi__json_kstr (&j, "detail", c->detail);
        kiwi__json_ki64 (&j, "checked_at", c->checked_at);
        kiwi__json_object_end (&j);
    }
    kiwi__json_array_end (&j);
    kiwi__json_object_end (&j);
    return kiwi__json_finish (&j, "heartbeat", out, err);
}
