/*
 * wire-encode.c: the msgpack encoder the message modules write with (see
 * wire-internal.h): a growing msgpack-c buffer whose maps and arrays count
 * their own entries, so no caller counts fields by hand.
 */
#include "schemas/wire-internal.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ encoding */

void
kiwi__enc_init (kiwi__enc *e)
{
    memset (e, 0, sizeof *e);
    msgpack_sbuffer_init (&e->sbuf);
    msgpack_packer_init (&e->pk, &e->sbuf, msgpack_sbuffer_write);
}

static void
kiwi__enc_destroy (kiwi__enc *e)
{
    msgpack_sbuffer_destroy (&e->sbuf);
    memset (&e->sbuf, 0, sizeof e->sbuf);
}

static void
check (kiwi__enc *e, int r)
{
    if (r < 0)
        e->failed = true;
}

/* A value is about to be written: inside an array it is one more entry. */
static void
count_value (kiwi__enc *e)
{
    if (e->depth > 0 && !e->stack[e->depth - 1].is_map)
        e->stack[e->depth - 1].count++;
}

static void
container_begin (kiwi__enc *e, bool is_map)
{
    static const char placeholder[5] = { 0 };
    if (e->failed)
        return;
    count_value (e);
    if (e->depth >= KIWI__ENC_MAX_DEPTH) {
        e->failed = e->misuse = true;
        return;
    }
    e->stack[e->depth].offset = e->sbuf.size;
    e->stack[e->depth].count = 0;
    e->stack[e->depth].is_map = is_map;
    e->depth++;
    check (e, msgpack_sbuffer_write (&e->sbuf, placeholder, sizeof placeholder));
}

/* Replaces the 5-byte placeholder by the shortest header for the count. */
static void
container_end (kiwi__enc *e, bool is_map)
{
    if (e->failed)
        return;
    if (e->depth == 0 || e->stack[e->depth - 1].is_map != is_map) {
        e->failed = e->misuse = true;
        return;
    }
    e->depth--;
    size_t offset = e->stack[e->depth].offset;
    uint32_t n = e->stack[e->depth].count;
    unsigned char hdr[5];
    size_t hl;
    if (n <= 15) {
        hdr[0] = (unsigned char) ((is_map ? 0x80 : 0x90) | n);
        hl = 1;
    } else if (n <= 0xffff) {
        hdr[0] = is_map ? 0xde : 0xdc;
        hdr[1] = (unsigned char) (n >> 8);
        hdr[2] = (unsigned char) n;
        hl = 3;
    } else {
        hdr[0] = is_map ? 0xdf : 0xdd;
        hdr[1] = (unsigned char) (n >> 24);
        hdr[2] = (unsigned char) (n >> 16);
        hdr[3] = (unsigned char) (n >> 8);
        hdr[4] = (unsigned char) n;
        hl = 5;
    }
    char *base = e->sbuf.data + offset;
    memcpy (base, hdr, hl);
    memmove (base + hl, base + 5, e->sbuf.size - offset - 5);
    e->sbuf.size -= 5 - hl;
}

void
kiwi__enc_map_begin (kiwi__enc *e)
{
    container_begin (e, true);
}

void
kiwi__enc_map_end (kiwi__enc *e)
{
    container_end (e, true);
}

void
kiwi__enc_array_begin (kiwi__enc *e)
{
    container_begin (e, false);
}

void
kiwi__enc_array_end (kiwi__enc *e)
{
    container_end (e, false);
}

void
kiwi__enc_key (kiwi__enc *e, const char *key)
{
    if (e->failed)
        return;
    if (e->depth == 0 || !e->stack[e->depth - 1].is_map) {
        e->failed = e->misuse = true;
        return;
    }
    e->stack[e->depth - 1].count++;
    size_t n = strlen (key);
    check (e, msgpack_pack_str (&e->pk, n));
    check (e, msgpack_pack_str_body (&e->pk, key, n));
}

void
kiwi__enc_str (kiwi__enc *e, const char *s)
{
    if (e->failed)
        return;
    count_value (e);
    size_t n = strlen (s);
    check (e, msgpack_pack_str (&e->pk, n));
    if (n > 0)
        check (e, msgpack_pack_str_body (&e->pk, s, n));
}

void
kiwi__enc_u64 (kiwi__enc *e, uint64_t v)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, msgpack_pack_uint64 (&e->pk, v));
}

void
kiwi__enc_i64 (kiwi__enc *e, int64_t v)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, msgpack_pack_int64 (&e->pk, v));
}

void
kiwi__enc_bool (kiwi__enc *e, bool v)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, v ? msgpack_pack_true (&e->pk) : msgpack_pack_false (&e->pk));
}

void
kiwi__enc_bin (kiwi__enc *e, const char *p, size_t n)
{
    if (e->failed)
        return;
    count_value (e);
    check (e, msgpack_pack_bin (&e->pk, n));
    if (n > 0)
        check (e, msgpack_pack_bin_body (&e->pk, p, n));
}

void
kiwi__enc_raw (kiwi__enc *e, const char *p, size_t n)
{
    if (e->failed)
        return;
    count_value (e);
    if (n > 0)
        check (e, msgpack_sbuffer_write (&e->sbuf, p, n));
}

KIWI__KEYED_WRITERS (kiwi__enc, kiwi__enc)

int
kiwi__enc_finish (kiwi__enc *e, const char *what, char **out, size_t *out_len, kiwi_error_t *err)
{
    if (e->misuse || e->depth != 0) {
        kiwi__enc_destroy (e);
        return kiwi_error_make (err, 0, "%s: internal error: unbalanced maps or arrays in encoder", what);
    }
    if (e->failed) {
        kiwi__enc_destroy (e);
        return kiwi_error_make (err, ENOMEM, "%s: encoding", what);
    }
    *out_len = e->sbuf.size;
    *out = msgpack_sbuffer_release (&e->sbuf);
    return 0;
}
