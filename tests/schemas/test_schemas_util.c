/*
 * test_schemas_util.c: helpers for the schema suites (see
 * test_schemas_util.h). wire_edit() unpacks an encoded message with
 * msgpack-c, re-packs it with one field changed, and so lets a test break
 * exactly one rule of an otherwise valid message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "test_schemas_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

msgpack_object
obj_str (const char *s)
{
    return obj_strn (s, strlen (s));
}

msgpack_object
obj_strn (const char *s, size_t n)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_STR };
    o.via.str.ptr = s;
    o.via.str.size = (uint32_t) n;
    return o;
}

msgpack_object
obj_uint (uint64_t v)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_POSITIVE_INTEGER };
    o.via.u64 = v;
    return o;
}

msgpack_object
obj_int (int64_t v)
{
    if (v >= 0)
        return obj_uint ((uint64_t) v);
    msgpack_object o = { .type = MSGPACK_OBJECT_NEGATIVE_INTEGER };
    o.via.i64 = v;
    return o;
}

msgpack_object
obj_nil (void)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_NIL };
    return o;
}

msgpack_object
obj_bool (bool v)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_BOOLEAN };
    o.via.boolean = v;
    return o;
}

msgpack_object
obj_float (double v)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_FLOAT64 };
    o.via.f64 = v;
    return o;
}

msgpack_object
obj_bin (const char *p, size_t n)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_BIN };
    o.via.bin.ptr = p;
    o.via.bin.size = (uint32_t) n;
    return o;
}

msgpack_object
obj_array (msgpack_object *items, uint32_t n)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_ARRAY };
    o.via.array.ptr = items;
    o.via.array.size = n;
    return o;
}

msgpack_object
obj_map (msgpack_object_kv *kv, uint32_t n)
{
    msgpack_object o = { .type = MSGPACK_OBJECT_MAP };
    o.via.map.ptr = kv;
    o.via.map.size = n;
    return o;
}

static bool
key_is (const msgpack_object *k, const char *seg, size_t seglen)
{
    return k->type == MSGPACK_OBJECT_STR && k->via.str.size == seglen
           && memcmp (k->via.str.ptr, seg, seglen) == 0;
}

static void
pack_key (msgpack_packer *pk, const char *seg, size_t seglen)
{
    msgpack_pack_str (pk, seglen);
    msgpack_pack_str_body (pk, seg, seglen);
}

static void
pack_edited (msgpack_packer *pk, const msgpack_object *o, const char *path, edit_op op,
             const msgpack_object *value)
{
    const char *dot = strchr (path, '.');
    size_t seglen = dot != NULL ? (size_t) (dot - path) : strlen (path);
    const char *rest = dot != NULL ? dot + 1 : NULL;

    if (o->type == MSGPACK_OBJECT_MAP) {
        uint32_t n = o->via.map.size, found = 0;
        for (uint32_t i = 0; i < o->via.map.size; i++)
            if (key_is (&o->via.map.ptr[i].key, path, seglen))
                found++;
        uint32_t total = n;
        if (rest == NULL) {
            if (op == EDIT_DEL)
                total -= found;
            else if (op == EDIT_ADD || found == 0)
                total++;
        } else {
            assert_true (found > 0); /* the path must exist down to its last part */
        }
        msgpack_pack_map (pk, total);
        for (uint32_t i = 0; i < n; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            bool hit = key_is (&kv->key, path, seglen);
            if (hit && rest == NULL && op == EDIT_DEL)
                continue;
            msgpack_pack_object (pk, kv->key);
            if (!hit)
                msgpack_pack_object (pk, kv->val);
            else if (rest != NULL)
                pack_edited (pk, &kv->val, rest, op, value);
            else if (op == EDIT_SET)
                msgpack_pack_object (pk, *value);
            else
                msgpack_pack_object (pk, kv->val);
        }
        if (rest == NULL && (op == EDIT_ADD || (op == EDIT_SET && found == 0))) {
            pack_key (pk, path, seglen);
            msgpack_pack_object (pk, *value);
        }
        return;
    }

    assert_int_equal (o->type, MSGPACK_OBJECT_ARRAY);
    uint32_t index = (uint32_t) strtoul (path, NULL, 10);
    uint32_t n = o->via.array.size;
    uint32_t total = n;
    if (rest == NULL && op == EDIT_DEL)
        total--;
    if (rest == NULL && op == EDIT_ADD)
        total++;
    msgpack_pack_array (pk, total);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *item = &o->via.array.ptr[i];
        if (i != index)
            msgpack_pack_object (pk, *item);
        else if (rest != NULL)
            pack_edited (pk, item, rest, op, value);
        else if (op == EDIT_SET)
            msgpack_pack_object (pk, *value);
        else if (op == EDIT_ADD)
            msgpack_pack_object (pk, *item);
    }
    if (rest == NULL && op == EDIT_ADD)
        msgpack_pack_object (pk, *value);
}

char *
wire_edit (const char *buf, size_t len, const char *path, edit_op op, const msgpack_object *value,
           size_t *out_len)
{
    msgpack_unpacked u;
    msgpack_unpacked_init (&u);
    size_t off = 0;
    assert_int_equal (msgpack_unpack_next (&u, buf, len, &off), MSGPACK_UNPACK_SUCCESS);

    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init (&sb);
    msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
    pack_edited (&pk, &u.data, path, op, value);
    msgpack_unpacked_destroy (&u);
    *out_len = sb.size;
    return msgpack_sbuffer_release (&sb);
}

void
expect_invalid (int rc, kiwi_error_t *err, const char *msg)
{
    if (rc >= 0 || *err == NULL)
        fail_msg ("expected failure \"%s\", got success", msg);
    if (strcmp (kiwi_error_msg (*err), msg) != 0)
        fail_msg ("expected error \"%s\"\n          got \"%s\"", msg, kiwi_error_msg (*err));
    assert_int_equal (kiwi_error_code (*err), KIWI_WIRE_EINVALID);
    kiwi_error_free (err);
}

void
expect_ok (int rc, kiwi_error_t *err)
{
    if (rc < 0)
        fail_msg ("unexpected error: %s", kiwi_error_msg (*err));
    assert_null (*err);
}

#define ROUNDTRIP(name, type)                                                   \
    void roundtrip_##name (const type *in)                                      \
    {                                                                           \
        kiwi_error_t err = NULL;                                                \
        char *buf = NULL, *json_in = NULL, *json_out = NULL;                    \
        size_t len = 0;                                                         \
        type out;                                                               \
        expect_ok (kiwi_##name##_encode (in, &buf, &len, &err), &err);          \
        expect_ok (kiwi_##name##_decode (buf, len, &out, &err), &err);          \
        expect_ok (kiwi_##name##_to_json (in, &json_in, &err), &err);           \
        expect_ok (kiwi_##name##_to_json (&out, &json_out, &err), &err);        \
        assert_string_equal (json_in, json_out);                                \
        /* Encoding the decoded value gives the same bytes. */                  \
        char *again = NULL;                                                     \
        size_t again_len = 0;                                                   \
        expect_ok (kiwi_##name##_encode (&out, &again, &again_len, &err), &err); \
        assert_int_equal (again_len, len);                                      \
        assert_memory_equal (again, buf, len);                                  \
        free (again);                                                           \
        free (json_in);                                                         \
        free (json_out);                                                        \
        free (buf);                                                             \
        kiwi_##name##_clear (&out);                                             \
    }

ROUNDTRIP (task, kiwi_task)
ROUNDTRIP (progress, kiwi_progress)
ROUNDTRIP (result, kiwi_result)
ROUNDTRIP (heartbeat, kiwi_heartbeat)
ROUNDTRIP (deadletter, kiwi_deadletter)

#define ENCODE_REFUSED(name, type)                                              \
    void expect_encode_refused_##name (const type *in, const char *msg)         \
    {                                                                           \
        kiwi_error_t err = NULL;                                                \
        char *out = NULL;                                                       \
        size_t len = 0;                                                         \
        expect_invalid (kiwi_##name##_encode (in, &out, &len, &err), &err, msg); \
        free (out);                                                             \
    }

ENCODE_REFUSED (task, kiwi_task)
ENCODE_REFUSED (progress, kiwi_progress)
ENCODE_REFUSED (result, kiwi_result)
ENCODE_REFUSED (heartbeat, kiwi_heartbeat)
ENCODE_REFUSED (deadletter, kiwi_deadletter)

#define DECODER(name, type)                                                     \
    int decode_##name (const char *buf, size_t len, kiwi_error_t *err)          \
    {                                                                           \
        type out;                                                               \
        int r = kiwi_##name##_decode (buf, len, &out, err);                     \
        kiwi_##name##_clear (&out);                                             \
        return r;                                                               \
    }

DECODER (task, kiwi_task)
DECODER (progress, kiwi_progress)
DECODER (result, kiwi_result)
DECODER (heartbeat, kiwi_heartbeat)
DECODER (deadletter, kiwi_deadletter)

void
expect_edit (decode_fn dec, const char *buf, size_t len, const char *path, edit_op op,
             msgpack_object value, const char *msg)
{
    kiwi_error_t err = NULL;
    size_t elen = 0;
    char *edited = wire_edit (buf, len, path, op, &value, &elen);
    int r = dec (edited, elen, &err);
    free (edited);
    if (msg == NULL) {
        if (r < 0)
            fail_msg ("edit of %s: unexpected error: %s", path, kiwi_error_msg (err));
        return;
    }
    expect_invalid (r, &err, msg);
}

char *base;
size_t base_len;
static decode_fn base_decode;

#define BASE_SETUP(name, type, sample)                                          \
    int base_setup_##name (void **state)                                        \
    {                                                                           \
        (void) state;                                                           \
        type m;                                                                 \
        kiwi_error_t err = NULL;                                                \
        kiwi_##name##_init (&m);                                                \
        sample (&m);                                                            \
        int r = kiwi_##name##_encode (&m, &base, &base_len, &err);              \
        kiwi_##name##_clear (&m);                                               \
        kiwi_error_free (&err);                                                 \
        base_decode = decode_##name;                                            \
        return r;                                                               \
    }

BASE_SETUP (task, kiwi_task, sample_task_full)
BASE_SETUP (progress, kiwi_progress, sample_progress_full)
BASE_SETUP (result, kiwi_result, sample_result_fixed)
BASE_SETUP (heartbeat, kiwi_heartbeat, sample_heartbeat_full)
BASE_SETUP (deadletter, kiwi_deadletter, sample_deadletter_full)

int
base_teardown (void **state)
{
    (void) state;
    free (base);
    base = NULL;
    base_len = 0;
    return 0;
}

void
edit (const char *path, edit_op op, msgpack_object value, const char *msg)
{
    expect_edit (base_decode, base, base_len, path, op, value, msg);
}
