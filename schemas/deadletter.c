/*
 * deadletter.c: the DeadLetter message (see deadletter.h and
 * deadletter.md): field rules, msgpack encoding and decoding, JSON
 * rendering.
 */
#include "schemas/deadletter.h"

#include <stdlib.h>
#include <string.h>

#include "schemas/wire-internal.h"

static const kiwi__str_rule R_REASON = { true, 1, KIWI_DEADLETTER_REASON_MAX, KIWI__RAW, NULL };
static const kiwi__str_rule R_TOPIC = { true, 1, 249, KIWI__TEXT, kiwi__chars_id };
static const kiwi__str_rule R_WORKER_ID = { true, 1, 128, KIWI__TEXT, kiwi__chars_id };

void
kiwi_deadletter_init (kiwi_deadletter *d)
{
    memset (d, 0, sizeof *d);
}

void
kiwi_deadletter_clear (kiwi_deadletter *d)
{
    free (d->reason);
    free (d->topic);
    free (d->original);
    free (d->key);
    free (d->worker_id);
    kiwi_deadletter_init (d);
}

static int
kiwi_deadletter_validate (const kiwi_deadletter *d, kiwi_error_t *err)
{
    if (kiwi__check_str ("deadletter", "reason", d->reason, &R_REASON, err) < 0
        || kiwi__check_str ("deadletter", "topic", d->topic, &R_TOPIC, err) < 0
        || kiwi__check_i64 ("deadletter", "partition", d->partition, -1, INT32_MAX, err) < 0
        || kiwi__check_i64 ("deadletter", "offset", d->offset, -1, INT64_MAX, err) < 0)
        return -1;
    if (d->original_len > KIWI_DEADLETTER_ORIGINAL_MAX)
        return kiwi__fail (err, "deadletter", "original", "longer than %d bytes", KIWI_DEADLETTER_ORIGINAL_MAX);
    if (d->original_len > 0 && d->original == NULL)
        return kiwi__fail (err, "deadletter", "original", "length %zu but no buffer", d->original_len);
    if (d->has_key) {
        if (d->key_len > KIWI_DEADLETTER_KEY_MAX)
            return kiwi__fail (err, "deadletter", "key", "longer than %d bytes", KIWI_DEADLETTER_KEY_MAX);
        if (d->key_len > 0 && d->key == NULL)
            return kiwi__fail (err, "deadletter", "key", "length %zu but no buffer", d->key_len);
    }
    if (kiwi__check_i64 ("deadletter", "ts", d->ts, KIWI__TS_MIN, KIWI__TS_MAX, err) < 0
        || kiwi__check_str ("deadletter", "worker_id", d->worker_id, &R_WORKER_ID, err) < 0)
        return -1;
    return 0;
}

int
kiwi_deadletter_encode (const kiwi_deadletter *d, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (kiwi_deadletter_validate (d, err) < 0)
        return -1;

    kiwi__enc e;
    kiwi__enc_init (&e);
    kiwi__enc_map_begin (&e);
    kiwi__enc_ku64 (&e, "v", KIWI_WIRE_VERSION);
    kiwi__enc_kstr (&e, "reason", d->reason);
    kiwi__enc_kstr (&e, "topic", d->topic);
    kiwi__enc_ki64 (&e, "partition", d->partition);
    kiwi__enc_ki64 (&e, "offset", d->offset);
    kiwi__enc_key (&e, "original");
    kiwi__enc_bin (&e, d->original, d->original_len);
    if (d->has_key) {
        kiwi__enc_key (&e, "key");
        kiwi__enc_bin (&e, d->key, d->key_len);
    }
    kiwi__enc_ki64 (&e, "ts", d->ts);
    kiwi__enc_kstr (&e, "worker_id", d->worker_id);
    kiwi__enc_map_end (&e);
    return kiwi__enc_finish (&e, "deadletter", out, out_len, err);
}

static int
decode_fields (const kiwi__map *root, kiwi_deadletter *d, kiwi_error_t *err)
{
    const msgpack_object *o;
    if (kiwi__read_str (root, "reason", &d->reason, err) < 0
        || kiwi__read_str (root, "topic", &d->topic, err) < 0
        || kiwi__read_i32 (root, "partition", &d->partition, NULL, err) < 0
        || kiwi__read_i64 (root, "offset", &d->offset, NULL, err) < 0)
        return -1;
    /* Bound the copies before making them. */
    o = kiwi__map_get (root, "original");
    if (o != NULL && o->type == MSGPACK_OBJECT_BIN && o->via.bin.size > KIWI_DEADLETTER_ORIGINAL_MAX)
        return kiwi__fail (err, "deadletter", "original", "longer than %d bytes", KIWI_DEADLETTER_ORIGINAL_MAX);
    o = kiwi__map_get (root, "key");
    if (o != NULL && o->type == MSGPACK_OBJECT_BIN && o->via.bin.size > KIWI_DEADLETTER_KEY_MAX)
        return kiwi__fail (err, "deadletter", "key", "longer than %d bytes", KIWI_DEADLETTER_KEY_MAX);
    if (kiwi__read_bin (root, "original", &d->original, &d->original_len, NULL, err) < 0
        || kiwi__read_bin (root, "key", &d->key, &d->key_len, &d->has_key, err) < 0
        || kiwi__read_i64 (root, "ts", &d->ts, NULL, err) < 0
        || kiwi__read_str (root, "worker_id", &d->worker_id, err) < 0)
        return -1;
    return 0;
}

int
kiwi_deadletter_decode (const char *buf, size_t len, kiwi_deadletter *out, kiwi_error_t *err)
{
    kiwi__msg m;
    kiwi_deadletter_init (out);
    int r = kiwi__msg_open (&m, "deadletter", buf, len, err);
    if (r == 0)
        r = decode_fields (&m.root, out, err);
    kiwi__msg_close (&m);
    if (r == 0)
        r = kiwi_deadletter_validate (out, err);
    if (r < 0)
        kiwi_deadletter_clear (out);
    return r;
}

int
kiwi_deadletter_to_json (const kiwi_deadletter *d, char **out, kiwi_error_t *err)
{
    kiwi__json j;
    kiwi__json_init (&j);
    kiwi__json_object_begin (&j);
    kiwi__json_ku64 (&j, "v", KIWI_WIRE_VERSION);
    kiwi__json_kstr (&j, "reason", d->reason);
    kiwi__json_kstr (&j, "topic", d->topic);
    kiwi__json_ki64 (&j, "partition", d->partition);
    kiwi__json_ki64 (&j, "offset", d->offset);
    kiwi__json_key (&j, "original");
    kiwi__json_base64 (&j, d->original, d->original_len);
    if (d->has_key) {
        kiwi__json_key (&j, "key");
        kiwi__json_base64 (&j, d->key, d->key_len);
    }
    kiwi__json_ki64 (&j, "ts", d->ts);
    kiwi__json_kstr (&j, "worker_id", d->worker_id);

    /* The original as JSON too, when it is one well-formed msgpack value. */
    if (d->original_len > 0) {
        msgpack_unpacked u;
        kiwi_error_t ignored = NULL;
        if (kiwi__unpack_one (&u, d->original, d->original_len, KIWI_WIRE_MAX_DEPTH - 1, "original",
                              &ignored)
            == 0) {
            kiwi__json_key (&j, "original_decoded");
            if (kiwi__json_msgpack (&j, &u.data, 2, &ignored) < 0)
                j.failed = true;
        }
        kiwi_error_free (&ignored);
        msgpack_unpacked_destroy (&u);
    }
    kiwi__json_object_end (&j);
    return kiwi__json_finish (&j, "deadletter", out, err);
}
