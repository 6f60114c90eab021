/*
 * render.c: one Kafka message, one JSON line (see render.h).
 */
#include "producer/render.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "schemas/deadletter.h"
#include "schemas/heartbeat.h"
#include "schemas/progress.h"
#include "schemas/result.h"
#include "schemas/task.h"
#include "schemas/wire.h"

static const struct {
    const char *name, *short_topic;
} types[] = {
    [KIWI_MSG_RAW] = { "raw", NULL },
#define KIWI__MSG_NAME(id, name, topic) [KIWI_MSG_##id] = { name, topic },
    KIWI_MSG_TYPE_MAP (KIWI__MSG_NAME)
#undef KIWI__MSG_NAME
};

/* "task" ... "deadletter", "raw". */
static const char *
kiwi_msg_type_name (kiwi_msg_type t)
{
    return (int) t >= 0 && t < KIWI_MSG__END ? types[t].name : NULL;
}

int
kiwi_msg_type_parse (const char *s, kiwi_msg_type *out)
{
    for (int t = 0; t < KIWI_MSG__END; t++)
        if (strcmp (types[t].name, s) == 0) {
            *out = (kiwi_msg_type) t;
            return 0;
        }
    return -1;
}

int
kiwi_msg_type_from_short (const char *s, kiwi_msg_type *out)
{
    for (int t = 1; t < KIWI_MSG__END; t++)
        if (strcmp (types[t].short_topic, s) == 0) {
            *out = (kiwi_msg_type) t;
            return 0;
        }
    return -1;
}

/* Decodes with the type's schema: JSON and task id, or < 0 with *err. */
static int
decode (kiwi_msg_type type, const void *buf, size_t len, char **json, char **task_id, kiwi_error_t *err)
{
    int r = -1;
    switch (type) {
    case KIWI_MSG_TASK: {
        kiwi_task t;
        if (kiwi_task_decode (buf, len, &t, err) < 0)
            return -1;
        r = kiwi_task_to_json (&t, json, err);
        if (r == 0 && task_id && (*task_id = strdup (t.id)) == NULL)
            r = kiwi_error_make (err, ENOMEM, "rendering");
        kiwi_task_clear (&t);
        return r;
    }
    case KIWI_MSG_PROGRESS: {
        kiwi_progress p;
        if (kiwi_progress_decode (buf, len, &p, err) < 0)
            return -1;
        r = kiwi_progress_to_json (&p, json, err);
        if (r == 0 && task_id && (*task_id = strdup (p.task_id)) == NULL)
            r = kiwi_error_make (err, ENOMEM, "rendering");
        kiwi_progress_clear (&p);
        return r;
    }
    case KIWI_MSG_RESULT: {
        kiwi_result res;
        if (kiwi_result_decode (buf, len, &res, err) < 0)
            return -1;
        r = kiwi_result_to_json (&res, json, err);
        if (r == 0 && task_id && (*task_id = strdup (res.task_id)) == NULL)
            r = kiwi_error_make (err, ENOMEM, "rendering");
        kiwi_result_clear (&res);
        return r;
    }
    case KIWI_MSG_HEARTBEAT: {
        kiwi_heartbeat h;
        if (kiwi_heartbeat_decode (buf, len, &h, err) < 0)
            return -1;
        r = kiwi_heartbeat_to_json (&h, json, err);
        kiwi_heartbeat_clear (&h);
        return r;
    }
    case KIWI_MSG_DEADLETTER: {
        kiwi_deadletter d;
        if (kiwi_deadletter_decode (buf, len, &d, err) < 0)
            return -1;
        r = kiwi_deadletter_to_json (&d, json, err);
        kiwi_deadletter_clear (&d);
        if (r == 0 && task_id) {
            /* the original's own id, if it is a map that has one */
            json_t *o = json_loads (*json, 0, NULL);
            const json_t *orig = o ? json_object_get (o, "original_decoded") : NULL;
            const char *tid = json_string_value (json_object_get (orig, "id"));
            if (tid == NULL)
                tid = json_string_value (json_object_get (orig, "task_id"));
            if (tid != NULL && (*task_id = strdup (tid)) == NULL)
                r = kiwi_error_make (err, ENOMEM, "rendering");
            json_decref (o);
        }
        return r;
    }
    case KIWI_MSG_RAW:
    case KIWI_MSG__END:
        break;
    }
    if (kiwi_msgpack_to_json (buf, len, json, err) < 0)
        return -1;
    if (task_id) {
        json_t *o = json_loads (*json, 0, NULL);
        const char *tid = json_string_value (json_object_get (o, "task_id"));
        if (tid == NULL)
            tid = json_string_value (json_object_get (o, "id"));
        if (tid != NULL && (*task_id = strdup (tid)) == NULL)
            r = kiwi_error_make (err, ENOMEM, "rendering");
        else
            r = 0;
        json_decref (o);
        return r;
    }
    return 0;
}

/* The key as a JSON value: a string when it is UTF-8, else {"base64": ...}. */
static json_t *
key_json (const kiwi_msg_meta *m)
{
    if (m == NULL || m->key == NULL)
        return json_null ();
    json_t *s = json_stringn (m->key, m->key_len);
    if (s != NULL)
        return s;
    cleanup_free char *b = kiwi_base64 (m->key, m->key_len);
    return json_pack ("{s:s}", "base64", b ? b : "");
}

static void
set_meta (json_t *o, const kiwi_msg_meta *m)
{
    if (m == NULL)
        return;
    if (m->topic != NULL)
        json_object_set_new (o, "topic", json_string (m->topic));
    json_object_set_new (o, "partition", json_integer (m->partition));
    json_object_set_new (o, "offset", json_integer (m->offset));
    if (m->timestamp >= 0)
        json_object_set_new (o, "timestamp", json_integer (m->timestamp));
    json_object_set_new (o, "key", key_json (m));
}

int
kiwi_render_message (kiwi_msg_type type, const kiwi_msg_meta *m, const void *buf, size_t len, bool wrap, char **json,
                     char **task_id, bool *decoded, kiwi_error_t *err)
{
    if (task_id)
        *task_id = NULL;
    *decoded = false;
    kiwi_error_t why = NULL;
    char *body = NULL;
    if (decode (type, buf, len, &body, task_id, &why) == 0) {
        *decoded = true;
        if (!wrap) {
            *json = body;
            return 0;
        }
        json_t *o = json_object ();
        set_meta (o, m);
        char *head = json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_decref (o);
        if (head == NULL) {
            free (body);
            return kiwi_error_make (err, ENOMEM, "rendering a message");
        }
        size_t hl = strlen (head);
        head[hl - 1] = '\0'; /* drop the closing brace */
        int n = asprintf (json, "%s,\"message\":%s}", head, body);
        free (head);
        free (body);
        if (n < 0)
            return kiwi_error_make (err, ENOMEM, "rendering a message");
        return 0;
    }
    if (task_id) {
        free (*task_id);
        *task_id = NULL;
    }
    if (why != NULL && kiwi_error_code (why) != KIWI_WIRE_EINVALID && why->errno_ == ENOMEM) {
        kiwi_error_free (&why);
        return kiwi_error_make (err, ENOMEM, "rendering a message");
    }

    /* Undecodable: say why and keep the bytes. */
    json_t *o = json_object ();
    json_object_set_new (o, "error", json_string (kiwi_error_msg (why)) ?: json_string ("undecodable message"));
    kiwi_error_free (&why);
    json_object_set_new (o, "type", json_string (kiwi_msg_type_name (type)));
    set_meta (o, m);
    cleanup_free char *b64 = kiwi_base64 (buf, len);
    json_object_set_new (o, "raw_base64", json_string (b64 ? b64 : ""));
    if (type != KIWI_MSG_RAW) {
        cleanup_free char *generic = NULL;
        kiwi_error_t e2 = NULL;
        if (kiwi_msgpack_to_json (buf, len, &generic, &e2) == 0) {
            json_t *g = json_loads (generic, JSON_DECODE_ANY, NULL);
            if (g != NULL)
                json_object_set_new (o, "raw_msgpack", g);
        }
        kiwi_error_free (&e2);
    }
    *json = json_dumps (o, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref (o);
    if (*json == NULL)
        return kiwi_error_make (err, ENOMEM, "rendering a message");
    return 0;
}
