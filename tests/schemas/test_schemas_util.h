/*
 * test_schemas_util.h: helpers for the cmocka schema suites: an editor that
 * changes one field of an encoded message by path, msgpack value builders,
 * error assertions and round-trip checks. Samples are in
 * test_schemas_samples.h.
 */
#ifndef KIWI_TEST_SCHEMAS_UTIL_H
#define KIWI_TEST_SCHEMAS_UTIL_H

#include <msgpack.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "test_schemas_samples.h"

/* Edits of an encoded message. path is dotted; array entries by index
 * ("egress.1.name"). SET replaces the value (or adds the key if absent), DEL
 * removes the key or entry, ADD appends the key even if present (making a
 * duplicate) or appends an array entry. Returns a malloc'd buffer. */
typedef enum { EDIT_SET, EDIT_DEL, EDIT_ADD } edit_op;
char *wire_edit (const char *buf, size_t len, const char *path, edit_op op, const msgpack_object *value,
                 size_t *out_len);

/* msgpack_object builders (values point at the arguments; keep them alive). */
msgpack_object obj_str (const char *s);
msgpack_object obj_strn (const char *s, size_t n);
msgpack_object obj_uint (uint64_t v);
msgpack_object obj_int (int64_t v);
msgpack_object obj_nil (void);
msgpack_object obj_bool (bool v);
msgpack_object obj_float (double v);
msgpack_object obj_bin (const char *p, size_t n);
msgpack_object obj_array (msgpack_object *items, uint32_t n);
msgpack_object obj_map (msgpack_object_kv *kv, uint32_t n);

/* Asserts rc < 0, *err set with code KIWI_WIRE_EINVALID and message equal to
 * msg; frees *err. */
void expect_invalid (int rc, kiwi_error_t *err, const char *msg);
/* Asserts rc == 0; on failure prints the error. */
void expect_ok (int rc, kiwi_error_t *err);

/* A decoder that frees what it decoded: for tests of acceptance. */
typedef int (*decode_fn) (const char *buf, size_t len, kiwi_error_t *err);
int decode_task (const char *buf, size_t len, kiwi_error_t *err);
int decode_progress (const char *buf, size_t len, kiwi_error_t *err);
int decode_result (const char *buf, size_t len, kiwi_error_t *err);
int decode_heartbeat (const char *buf, size_t len, kiwi_error_t *err);
int decode_deadletter (const char *buf, size_t len, kiwi_error_t *err);

/* Applies one wire_edit to buf and decodes the result with dec: with msg
 * NULL the decode must succeed, otherwise fail with exactly msg. */
void expect_edit (decode_fn dec, const char *buf, size_t len, const char *path, edit_op op,
                  msgpack_object value, const char *msg);

/* The suite's base message: the encoding of one kind's full sample (for
 * results, sample_result_fixed), made by that kind's base_setup_* (a cmocka
 * group set-up; nonzero when the encoder refused) and freed by base_teardown.
 * base is owned here; tests read it and never free it. */
extern char *base;
extern size_t base_len;
int base_setup_task (void **state);
int base_setup_progress (void **state);
int base_setup_result (void **state);
int base_setup_heartbeat (void **state);
int base_setup_deadletter (void **state);
int base_teardown (void **state);
/* expect_edit on base with the decoder of the kind base_setup_* encoded. */
void edit (const char *path, edit_op op, msgpack_object value, const char *msg);

/* Asserts that the encoder refuses *in with exactly msg (expect_invalid). */
void expect_encode_refused_task (const kiwi_task *in, const char *msg);
void expect_encode_refused_progress (const kiwi_progress *in, const char *msg);
void expect_encode_refused_result (const kiwi_result *in, const char *msg);
void expect_encode_refused_heartbeat (const kiwi_heartbeat *in, const char *msg);
void expect_encode_refused_deadletter (const kiwi_deadletter *in, const char *msg);

/* Encodes *t, decodes again, and asserts the JSON renderings are equal. */
void roundtrip_task (const kiwi_task *t);
void roundtrip_progress (const kiwi_progress *p);
void roundtrip_result (const kiwi_result *r);
void roundtrip_heartbeat (const kiwi_heartbeat *h);
void roundtrip_deadletter (const kiwi_deadletter *d);

#endif
