/*
 * events.c: progress events and results from the task pipeline (events.h).
 */
#include "worker/events.h"

#include <errno.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

static void
pack_json (msgpack_packer *pk, const json_t *j)
{
    switch (json_typeof (j)) {
    case JSON_OBJECT: {
        msgpack_pack_map (pk, json_object_size (j));
        const char *k;
        json_t *v;
        json_object_foreach ((json_t *) j, k, v)
        {
            size_t kl = strlen (k);
            msgpack_pack_str (pk, kl);
            msgpack_pack_str_body (pk, k, kl);
            pack_json (pk, v);
        }
        break;
    }
    case JSON_ARRAY: {
        msgpack_pack_array (pk, json_array_size (j));
        size_t i;
        json_t *v;
        json_array_foreach ((json_t *) j, i, v) pack_json (pk, v);
        break;
    }
    case JSON_STRING: {
        size_t l = json_string_length (j);
        msgpack_pack_str (pk, l);
        msgpack_pack_str_body (pk, json_string_value (j), l);
        break;
    }
    case JSON_INTEGER:
        msgpack_pack_int64 (pk, json_integer_value (j));
        break;
    case JSON_REAL:
        msgpack_pack_double (pk, json_real_value (j));
        break;
    case JSON_TRUE:
        msgpack_pack_true (pk);
        break;
    case JSON_FALSE:
        msgpack_pack_false (pk);
        break;
    case JSON_NULL:
        msgpack_pack_nil (pk);
        break;
    }
}

int
kiwi_json_to_msgpack (const json_t *j, char **out, size_t *len, kiwi_error_t *err)
{
    if (!json_is_object (j))
        return kiwi_error_make (err, 0, "event payload must be an object");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init (&sb);
    msgpack_packer pk;
    msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
    pack_json (&pk, j);
    *out = sb.data; /* now owned by the caller */
    *len = sb.size;
    return 0;
}

int
kiwi_events_emit (kiwi_events *ev, kiwi_stage stage, const char *kind, uint32_t round, json_t *payload)
{
    kiwi_progress p;
    kiwi_progress_init (&p);
    p.task_id = (char *) ev->task_id;
    p.worker_id = (char *) ev->worker_id;
    p.seq = 1; /* numbered by the receiver */
    p.round = round;
    p.stage = stage;
    p.kind = (char *) kind;
    p.ts = kiwi_wall_ms ();
    int rc = 0;
    if (payload != NULL) {
        kiwi_error_t err = NULL;
        if (kiwi_mask_json (ev->mask, payload) < 0)
            rc = -1; /* not sent at all rather than sent partly masked */
        else if (kiwi_json_to_msgpack (payload, &p.payload, &p.payload_len, &err) < 0) {
            kiwi_error_free (&err);
            rc = -1;
        }
        json_decref (payload);
    }
    if (rc == 0)
        rc = ev->progress (ev, &p);
    free (p.payload);
    return rc;
}

/* Writes one frame to fd (blocking, all or error). */
static int
kiwi_frame_write (int fd, int type, const char *data, size_t len, kiwi_error_t *err)
{
    if (len > KIWI_FRAME_MAX)
        return kiwi_error_make (err, 0, "frame of %zu bytes exceeds the %u limit", len, KIWI_FRAME_MAX);
    unsigned char head[5] = { (unsigned char) type, (unsigned char) (len >> 24), (unsigned char) (len >> 16),
                              (unsigned char) (len >> 8), (unsigned char) len };
    const char *parts[2] = { (const char *) head, data };
    size_t lens[2] = { 5, len };
    for (int i = 0; i < 2; i++) {
        const char *p = parts[i];
        size_t left = lens[i];
        while (left > 0) {
            ssize_t w = write (fd, p, left);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return kiwi_error_make (err, errno, "writing to the daemon");
            }
            p += w;
            left -= (size_t) w;
        }
    }
    return 0;
}

int
kiwi_frame_feed (kiwi_frame_reader *r, const char *data, size_t len,
                 void (*fn) (int type, const char *body, size_t len, void *ud), void *ud, kiwi_error_t *err)
{
    while (len > 0) {
        if (r->head_have < 5) {
            size_t take = 5 - r->head_have < len ? 5 - r->head_have : len;
            memcpy (r->head + r->head_have, data, take);
            r->head_have += take;
            data += take;
            len -= take;
            if (r->head_have < 5)
                return 0;
            if (r->head[0] != KIWI_FRAME_PROGRESS && r->head[0] != KIWI_FRAME_RESULT
                && r->head[0] != KIWI_FRAME_OBSERVE && r->head[0] != KIWI_FRAME_SANDBOX)
                return kiwi_error_make (err, 0, "unknown frame type 0x%02x from the task process", r->head[0]);
            r->body_len = ((size_t) r->head[1] << 24) | ((size_t) r->head[2] << 16) | ((size_t) r->head[3] << 8)
                          | (size_t) r->head[4];
            if (r->body_len > KIWI_FRAME_MAX)
                return kiwi_error_make (err, 0, "frame of %zu bytes from the task process is too large",
                                        r->body_len);
            r->body = malloc (r->body_len ? r->body_len : 1);
            if (r->body == NULL)
                return kiwi_error_make (err, ENOMEM, "frame");
            r->body_have = 0;
        }
        size_t take = r->body_len - r->body_have < len ? r->body_len - r->body_have : len;
        memcpy (r->body + r->body_have, data, take);
        r->body_have += take;
        data += take;
        len -= take;
        if (r->body_have == r->body_len) {
            fn (r->head[0], r->body, r->body_len, ud);
            free (r->body);
            r->body = NULL;
            r->head_have = 0;
        }
    }
    return 0;
}

void
kiwi_frame_reader_clear (kiwi_frame_reader *r)
{
    free (r->body);
    memset (r, 0, sizeof *r);
}

/* *f (owned, may be NULL) masked in place or replaced by a masked copy. */
static int
mask_field (const kiwi_mask *m, char **f)
{
    if (m == NULL || *f == NULL || !kiwi_mask_hits (m, *f, strlen (*f)))
        return 0;
    char *masked = kiwi_mask_apply (m, *f);
    if (masked == NULL) {
        /* no memory for a copy: the field goes whole (never longer) */
        strcpy (*f, KIWI_MASK_REPLACEMENT);
        return -1;
    }
    free (*f);
    *f = masked;
    return 0;
}

int
kiwi_events_mask_result (const kiwi_mask *m, kiwi_result *r)
{
    int a = mask_field (m, &r->reason);
    int b = mask_field (m, &r->diff);
    return a < 0 || b < 0 ? -1 : 0;
}

/* A shallow copy of *r whose free-text fields are masked copies; the
 * copies are freed with masked_result_clear. */
static int
masked_result (const kiwi_mask *m, const kiwi_result *r, kiwi_result *copy)
{
    *copy = *r;
    copy->reason = NULL;
    copy->diff = NULL;
    if ((r->reason != NULL && (copy->reason = kiwi_mask_apply (m, r->reason)) == NULL)
        || (r->diff != NULL && (copy->diff = kiwi_mask_apply (m, r->diff)) == NULL)) {
        free (copy->reason);
        free (copy->diff);
        return -1;
    }
    return 0;
}

static void
masked_result_clear (kiwi_result *copy)
{
    free (copy->reason);
    free (copy->diff);
}

static int
pipe_progress (kiwi_events *ev, const kiwi_progress *p)
{
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    int rc = kiwi_progress_encode (p, &buf, &len, &err);
    if (rc == 0)
        rc = kiwi_frame_write ((int) (intptr_t) ev->userdata, KIWI_FRAME_PROGRESS, buf, len, &err);
    if (rc < 0)
        kiwi_errorf ("event %s not delivered: %s", p->kind, kiwi_error_msg (err));
    kiwi_error_free (&err);
    free (buf);
    return rc;
}

static int
pipe_result (kiwi_events *ev, const kiwi_result *r)
{
    char *buf = NULL;
    size_t len = 0;
    kiwi_error_t err = NULL;
    kiwi_result m;
    if (masked_result (ev->mask, r, &m) < 0) {
        kiwi_errorf ("result not delivered: out of memory masking it");
        return -1;
    }
    int rc = kiwi_result_encode (&m, &buf, &len, &err);
    masked_result_clear (&m);
    if (rc == 0)
        rc = kiwi_frame_write ((int) (intptr_t) ev->userdata, KIWI_FRAME_RESULT, buf, len, &err);
    if (rc < 0)
        kiwi_errorf ("result not delivered: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
    free (buf);
    return rc;
}

static void
pipe_observe (kiwi_events *ev, const char *line)
{
    kiwi_error_t err = NULL;
    if (kiwi_frame_write ((int) (intptr_t) ev->userdata, KIWI_FRAME_OBSERVE, line, strlen (line), &err) < 0)
        kiwi_errorf ("observation not delivered: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
}

static void
pipe_sandbox (kiwi_events *ev, const char *address, int64_t since_ms, const char *command)
{
    char body[4096];
    int n = address ? snprintf (body, sizeof body, "%s\n%lld\n%s", address, (long long) since_ms, command ? command : "")
                    : 0;
    if (n < 0 || (size_t) n >= sizeof body) /* a command that long is cut: the address matters */
        n = snprintf (body, sizeof body, "%s\n%lld\n", address, (long long) since_ms);
    kiwi_error_t err = NULL;
    if (kiwi_frame_write ((int) (intptr_t) ev->userdata, KIWI_FRAME_SANDBOX, body, (size_t) n, &err) < 0)
        kiwi_errorf ("sandbox frame not delivered: %s", kiwi_error_msg (err));
    kiwi_error_free (&err);
}

void
kiwi_events_pipe_init (kiwi_events *ev, int fd, const char *task_id, const char *worker_id)
{
    *ev = (kiwi_events) { .progress = pipe_progress, .result = pipe_result, .observe = pipe_observe,
                          .sandbox = pipe_sandbox, .task_id = task_id, .worker_id = worker_id,
                          .userdata = (void *) (intptr_t) fd };
}

void
kiwi_events_sandbox (kiwi_events *ev, const char *address, int64_t since_ms, const char *command)
{
    if (ev != NULL && ev->sandbox != NULL)
        ev->sandbox (ev, address, since_ms, command);
}

int
kiwi_frame_sandbox_parse (const char *body, size_t len, char *address, size_t acap, int64_t *since_ms,
                          char *command, size_t ccap)
{
    address[0] = command[0] = '\0';
    *since_ms = 0;
    if (len == 0)
        return 0;
    const char *nl = memchr (body, '\n', len);
    if (nl == NULL || (size_t) (nl - body) >= acap)
        return -1;
    const char *t = nl + 1;
    const char *nl2 = memchr (t, '\n', len - (size_t) (t - body));
    char num[24];
    if (nl2 == NULL || nl2 == t || (size_t) (nl2 - t) >= sizeof num)
        return -1;
    memcpy (num, t, (size_t) (nl2 - t));
    num[nl2 - t] = '\0';
    char *end = NULL;
    errno = 0;
    long long since = strtoll (num, &end, 10);
    if (errno != 0 || *end != '\0' || since <= 0)
        return -1;
    memcpy (address, body, (size_t) (nl - body));
    address[nl - body] = '\0';
    *since_ms = since;
    nl = nl2;
    size_t cl = len - (size_t) (nl + 1 - body);
    if (cl >= ccap)
        cl = ccap - 1;
    memcpy (command, nl + 1, cl);
    command[cl] = '\0';
    return 0;
}

void
kiwi_events_observe (kiwi_events *ev, const char *what, const char *label, double value)
{
    if (ev == NULL || ev->observe == NULL)
        return;
    char line[128];
    snprintf (line, sizeof line, "%s %s %.6f", what, label, value);
    ev->observe (ev, line);
}

static int
jsonl_progress (kiwi_events *ev, const kiwi_progress *p)
{
    FILE *f = ev->userdata;
    static uint64_t seq; /* --once runs one task per process */
    kiwi_progress copy = *p;
    copy.seq = ++seq;
    char *json = NULL;
    kiwi_error_t err = NULL;
    if (kiwi_progress_to_json (&copy, &json, &err) < 0) {
        kiwi_error_free (&err);
        return -1;
    }
    fprintf (f, "{\"type\":\"progress\",\"event\":%s}\n", json);
    fflush (f);
    free (json);
    return 0;
}

static int
jsonl_result (kiwi_events *ev, const kiwi_result *r)
{
    FILE *f = ev->userdata;
    char *json = NULL;
    kiwi_error_t err = NULL;
    kiwi_result m;
    if (masked_result (ev->mask, r, &m) < 0) {
        kiwi_errorf ("result: out of memory masking it");
        return -1;
    }
    int rc = kiwi_result_to_json (&m, &json, &err);
    masked_result_clear (&m);
    if (rc < 0) {
        kiwi_errorf ("result: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return -1;
    }
    fprintf (f, "{\"type\":\"result\",\"result\":%s}\n", json);
    fflush (f);
    free (json);
    return 0;
}

void
kiwi_events_jsonl_init (kiwi_events *ev, void *file, const char *task_id, const char *worker_id)
{
    *ev = (kiwi_events) { .progress = jsonl_progress, .result = jsonl_result, .task_id = task_id,
                          .worker_id = worker_id, .userdata = file };
}
