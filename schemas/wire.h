/*
 * wire.h: what every Kiwi wire message shares, and the generic msgpack to
 * JSON renderer.
 *
 * Every message on a Kiwi topic is one msgpack map with string keys and an
 * unsigned integer version field `v` (see README.md next to this file). The
 * per-message modules (task.h, progress.h, result.h, heartbeat.h,
 * deadletter.h) encode, decode and validate one message each; this header
 * holds the constants they agree on and kiwi_msgpack_to_json(), which renders
 * any msgpack value as JSON for topics whose message type is not known.
 */
#ifndef KIWI_SCHEMAS_WIRE_H
#define KIWI_SCHEMAS_WIRE_H

#include <stddef.h>

#include "common/error.h"

/* The version every encoder writes in `v`, and the newest one a decoder
 * accepts. A decoder rejects a message without `v`, with `v` = 0, or with a
 * `v` greater than this. */
#define KIWI_WIRE_VERSION 1

/* Maps and arrays nest at most this deep in any message, counting the
 * message's own top-level map as level 1. Deeper input is rejected before it
 * is unpacked, and kiwi_msgpack_to_json() applies the same bound. */
#define KIWI_WIRE_MAX_DEPTH 16

/* kiwi_error_code() of an error caused by the bytes or the values of a
 * message: it is invalid and retrying will not help (a consumer sends it to
 * the dead-letter topic). Errors without this code are resource failures
 * (out of memory: errno_ is ENOMEM). */
#define KIWI_WIRE_EINVALID (KIWI_ERR_RANGE_WIRE + 1)

/* Renders the single msgpack value in buf[0..len) as one line of JSON
 * (no trailing newline).
 *
 * Mapping: nil → null; booleans; integers as JSON integers; floats with 17
 * significant digits and always a '.' or exponent, so they stay floats
 * (3.0, -0.0; NaN and infinities → null); str → JSON string, with
 * quote, backslash, control characters, DEL, U+2028 and U+2029 escaped and
 * each maximal invalid UTF-8 subsequence replaced by one \ufffd (as Python's
 * and browsers' decoders do); bin → base64 string (RFC 4648, padded);
 * ext → {"ext_type": <int>, "data": "<base64>"}; arrays; maps → objects,
 * where a key that is not a string is rendered as JSON and that text used as
 * the key string (integer 1 → "1").
 *
 * Fails (KIWI_WIRE_EINVALID) on an empty, truncated or malformed buffer, on
 * bytes after the value, and on nesting deeper than KIWI_WIRE_MAX_DEPTH.
 *
 * Ownership: on success *out is a malloc'd NUL-terminated string that the
 * caller frees; on failure *out is untouched and *err is set. */
int kiwi_msgpack_to_json (const char *buf, size_t len, char **out, kiwi_error_t *err);

#endif
