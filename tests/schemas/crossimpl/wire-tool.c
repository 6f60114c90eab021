/*
 * wire-tool.c: the C side of the cross-implementation check
 * (crossimpl.py drives it with Debian's python3-msgpack).
 *
 *   wire-tool encode DIR        writes every sample message to DIR/<name>.msgpack
 *   wire-tool decode TYPE FILE  decodes FILE as TYPE (task, progress, result,
 *                               heartbeat, deadletter) and prints its JSON
 *   wire-tool json FILE         prints kiwi_msgpack_to_json of FILE
 *
 * Exit status 0 on success; 1 with the error message on stderr when a
 * decode is refused; 2 on a usage or I/O error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/error.h"
#include "test_schemas_samples.h"
#include "schemas/wire.h"

static int
write_file (const char *dir, const char *name, const char *buf, size_t len, kiwi_error_t *err)
{
    cleanup_free char *path = NULL;
    if (asprintf (&path, "%s/%s.msgpack", dir, name) < 0)
        return kiwi_error_make (err, ENOMEM, "path");
    cleanup_fclose FILE *f = fopen (path, "wb");
    if (f == NULL)
        return kiwi_error_make (err, errno, "opening `%s`", path);
    if (fwrite (buf, 1, len, f) != len || fflush (f) != 0)
        return kiwi_error_make (err, errno, "writing `%s`", path);
    return 0;
}

static int
read_file (const char *path, char **out, size_t *out_len, kiwi_error_t *err)
{
    cleanup_fclose FILE *f = fopen (path, "rb");
    if (f == NULL)
        return kiwi_error_make (err, errno, "opening `%s`", path);
    size_t cap = 4096, len = 0;
    cleanup_free char *buf = malloc (cap);
    if (buf == NULL)
        return kiwi_error_make (err, ENOMEM, "reading `%s`", path);
    for (;;) {
        if (len == cap) {
            char *nb = realloc (buf, cap * 2);
            if (nb == NULL)
                return kiwi_error_make (err, ENOMEM, "reading `%s`", path);
            buf = nb;
            cap *= 2;
        }
        size_t n = fread (buf + len, 1, cap - len, f);
        len += n;
        if (n == 0) {
            if (ferror (f))
                return kiwi_error_make (err, errno, "reading `%s`", path);
            break;
        }
    }
    *out_len = len;
    *out = steal_pointer (&buf);
    return 0;
}

#define ENCODE_SAMPLE(type, fn, name)                                         \
    do {                                                                      \
        kiwi_##type m;                                                        \
        cleanup_free char *buf = NULL;                                        \
        size_t len = 0;                                                       \
        kiwi_##type##_init (&m);                                              \
        fn (&m);                                                              \
        int r = kiwi_##type##_encode (&m, &buf, &len, err);                   \
        kiwi_##type##_clear (&m);                                             \
        if (r < 0 || write_file (dir, name, buf, len, err) < 0)               \
            return kiwi_error_wrap (err, "sample %s", name);                  \
    } while (0)

static int
encode_all (const char *dir, kiwi_error_t *err)
{
    ENCODE_SAMPLE (task, sample_task_full, "task-full");
    ENCODE_SAMPLE (task, sample_task_min, "task-min");
    ENCODE_SAMPLE (progress, sample_progress_full, "progress-full");
    ENCODE_SAMPLE (progress, sample_progress_min, "progress-min");
    ENCODE_SAMPLE (result, sample_result_fixed, "result-fixed");
    ENCODE_SAMPLE (result, sample_result_not_fixed, "result-not-fixed");
    ENCODE_SAMPLE (heartbeat, sample_heartbeat_full, "heartbeat-full");
    ENCODE_SAMPLE (heartbeat, sample_heartbeat_min, "heartbeat-min");
    ENCODE_SAMPLE (deadletter, sample_deadletter_full, "deadletter-full");
    ENCODE_SAMPLE (deadletter, sample_deadletter_min, "deadletter-min");
    return 0;
}

#define DECODE_AS(type)                                                       \
    do {                                                                      \
        kiwi_##type m;                                                        \
        if (kiwi_##type##_decode (buf, len, &m, err) < 0)                     \
            return -1;                                                        \
        int r = kiwi_##type##_to_json (&m, json, err);                        \
        kiwi_##type##_clear (&m);                                             \
        return r;                                                             \
    } while (0)

/* Returns 1 for an unknown type name. */
static int
decode_as (const char *type, const char *buf, size_t len, char **json, kiwi_error_t *err)
{
    if (strcmp (type, "task") == 0)
        DECODE_AS (task);
    if (strcmp (type, "progress") == 0)
        DECODE_AS (progress);
    if (strcmp (type, "result") == 0)
        DECODE_AS (result);
    if (strcmp (type, "heartbeat") == 0)
        DECODE_AS (heartbeat);
    if (strcmp (type, "deadletter") == 0)
        DECODE_AS (deadletter);
    return 1;
}

static int
usage (void)
{
    fprintf (stderr, "usage: wire-tool encode DIR | decode TYPE FILE | json FILE\n");
    return 2;
}

int
main (int argc, char **argv)
{
    kiwi_error_t err = NULL;
    if (argc == 3 && strcmp (argv[1], "encode") == 0) {
        if (encode_all (argv[2], &err) < 0) {
            fprintf (stderr, "wire-tool: %s\n", kiwi_error_msg (err));
            kiwi_error_free (&err);
            return 2;
        }
        return 0;
    }

    const char *type = NULL, *path = NULL;
    if (argc == 4 && strcmp (argv[1], "decode") == 0) {
        type = argv[2];
        path = argv[3];
    } else if (argc == 3 && strcmp (argv[1], "json") == 0) {
        path = argv[2];
    } else {
        return usage ();
    }

    cleanup_free char *buf = NULL;
    cleanup_free char *json = NULL;
    size_t len = 0;
    if (read_file (path, &buf, &len, &err) < 0) {
        fprintf (stderr, "wire-tool: %s\n", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return 2;
    }
    int r = type != NULL ? decode_as (type, buf, len, &json, &err) : kiwi_msgpack_to_json (buf, len, &json, &err);
    if (r == 1)
        return usage ();
    if (r < 0) {
        fprintf (stderr, "%s\n", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return 1;
    }
    printf ("%s\n", json);
    return 0;
}
