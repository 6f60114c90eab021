/*
 * test_schemas_samples.c: the sample messages (see test_schemas_samples.h).
 * Full samples exercise every field, including non-ASCII text, raw bytes
 * that are not UTF-8, and integers at the ends of their types; minimal
 * samples carry only the required fields.
 */
#include "test_schemas_samples.h"

#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *
xstrdup (const char *s)
{
    char *c = strdup (s);
    if (c == NULL)
        abort ();
    return c;
}

char *
repeat (char c, size_t n)
{
    char *s = malloc (n + 1);
    if (s == NULL)
        abort ();
    memset (s, c, n);
    s[n] = '\0';
    return s;
}

static char *
xmemdup (const char *p, size_t n)
{
    char *c = malloc (n > 0 ? n : 1);
    if (c == NULL)
        abort ();
    memcpy (c, p, n);
    return c;
}

void
sample_task_full (kiwi_task *t)
{
    t->id = xstrdup ("task-0001:retry.2_x");
    t->repo.url = xstrdup ("https://git.example.com/acme/widgets.git");
    t->repo.ref = xstrdup ("feature/fix-ci");
    t->repo.subdir = xstrdup ("packages/core");
    t->test_command = xstrdup ("npm test -- --ci");
    /* "Ünïcödé ✓" */
    t->goal = xstrdup ("Make the tests pass. \xc3\x9c" "n" "\xc3\xaf" "c" "\xc3\xb6" "d" "\xc3\xa9"
                       " \xe2\x9c\x93 \"quoted\"\nsecond line\ttab");
    t->ci_context = xstrdup ("FAIL src/a.test.js\n\x1b[31mred\x1b[0m \xff raw byte");
    t->limits.max_rounds = 12;
    t->limits.has_session_budget_tokens = true;
    t->limits.session_budget_tokens = 500000;
    t->limits.has_session_budget_usd_micros = true;
    t->limits.session_budget_usd_micros = 2500000;
    t->limits.timeout_seconds = 3600;
    t->limits.disk_mb = 4096;
    t->has_model = true;
    t->model.provider = KIWI_PROVIDER_ANTHROPIC;
    t->model.name = xstrdup ("claude-sonnet-4-5");
    t->model.base_url = xstrdup ("http://127.0.0.1:8089/v1");
    t->n_test_credentials = 3;
    t->test_credentials = calloc (3, sizeof (char *));
    if (t->test_credentials == NULL)
        abort ();
    t->test_credentials[0] = xstrdup ("NPM_TOKEN");
    t->test_credentials[1] = xstrdup ("DATABASE_URL");
    t->test_credentials[2] = xstrdup ("_PRIVATE2");
    t->submitted_at = 1764454462123;
    t->source = xstrdup ("ci-event");
}

void
sample_task_min (kiwi_task *t)
{
    t->id = xstrdup ("t1");
    t->repo.url = xstrdup ("https://example.org/r.git");
    t->repo.ref = xstrdup ("main");
    t->test_command = xstrdup ("make test");
    t->goal = xstrdup ("fix the tests");
    t->submitted_at = 0;
}

char *
sample_payload (size_t *len)
{
    msgpack_sbuffer sb;
    msgpack_packer pk;
    msgpack_sbuffer_init (&sb);
    msgpack_packer_init (&pk, &sb, msgpack_sbuffer_write);
#define KEY(s) (msgpack_pack_str (&pk, strlen (s)), msgpack_pack_str_body (&pk, s, strlen (s)))
    msgpack_pack_map (&pk, 10);
    KEY ("tool");
    KEY ("run");
    KEY ("argv");
    msgpack_pack_array (&pk, 2);
    KEY ("npm");
    KEY ("test");
    KEY ("exit");
    msgpack_pack_int64 (&pk, -1);
    KEY ("ok");
    msgpack_pack_false (&pk);
    KEY ("ratio");
    msgpack_pack_double (&pk, 0.5);
    KEY ("blob");
    msgpack_pack_bin (&pk, 3);
    msgpack_pack_bin_body (&pk, "\x00\x01\xff", 3);
    KEY ("nested");
    msgpack_pack_map (&pk, 1);
    KEY ("a");
    msgpack_pack_map (&pk, 1);
    KEY ("b");
    msgpack_pack_array (&pk, 3);
    msgpack_pack_uint64 (&pk, 1);
    msgpack_pack_uint64 (&pk, 2);
    msgpack_pack_nil (&pk);
    KEY ("big");
    msgpack_pack_uint64 (&pk, UINT64_MAX);
    KEY ("neg");
    msgpack_pack_int64 (&pk, INT64_MIN);
    KEY ("text");
    KEY ("\xc3\xa9\n\x01");
#undef KEY
    *len = sb.size;
    return msgpack_sbuffer_release (&sb);
}

void
sample_progress_full (kiwi_progress *p)
{
    p->task_id = xstrdup ("task-0001:retry.2_x");
    p->seq = 42;
    p->attempt = 2;
    p->round = 3;
    p->stage = KIWI_STAGE_ROUND;
    p->kind = xstrdup ("tool_call");
    p->ts = 1764454470000;
    p->worker_id = xstrdup ("worker-a:7");
    p->payload = sample_payload (&p->payload_len);
}

void
sample_progress_min (kiwi_progress *p)
{
    p->task_id = xstrdup ("t1");
    p->seq = 1;
    p->round = 0;
    p->stage = KIWI_STAGE_ACCEPTED;
    p->kind = xstrdup ("accepted");
    p->ts = 1;
    p->worker_id = xstrdup ("w1");
}

void
sample_result_fixed (kiwi_result *r)
{
    r->task_id = xstrdup ("task-0001:retry.2_x");
    r->status = KIWI_RESULT_FIXED;
    r->reason = xstrdup ("tests pass after 2 rounds");
    r->diff = xstrdup ("diff --git a/x.c b/x.c\n--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-int x = 1;\n"
                       "+int x = 2; /* caf\xe9 latin-1 */\n");
    r->rounds = 2;
    r->tokens_in = 123456;
    r->tokens_out = 7890;
    r->cost_usd_micros = 431000;
    r->duration_ms = 98765;
    r->worker_id = xstrdup ("worker-a:7");
    r->finished_at = 1764454562123;
}

void
sample_result_not_fixed (kiwi_result *r)
{
    r->task_id = xstrdup ("t1");
    r->status = KIWI_RESULT_NEEDS_NETWORK;
    r->reason = xstrdup ("npm install tried to reach registry.npmjs.org:443 (ENETUNREACH)");
    r->rounds = 0;
    r->tokens_in = 0;
    r->tokens_out = 0;
    r->cost_usd_micros = 0;
    r->duration_ms = UINT64_MAX;
    r->worker_id = xstrdup ("w1");
    r->finished_at = INT64_MAX;
}

void
sample_heartbeat_full (kiwi_heartbeat *h)
{
    h->worker_id = xstrdup ("worker-a:7");
    h->version = xstrdup ("0.1.0+g1a2b3c");
    h->ts = 1764454480000;
    h->slots_total = 4;
    h->slots_busy = 3;
    h->tasks_done = 1000;
    h->tasks_failed = 7;
    h->cache_hits = 50;
    h->cache_misses = 12;
    h->degraded = true;
    h->degraded_reason = xstrdup ("egress check metadata-blocked failed");
    h->redis_ok = false;
    h->n_egress = 2;
    h->egress = calloc (2, sizeof *h->egress);
    if (h->egress == NULL)
        abort ();
    h->egress[0].name = xstrdup ("metadata-blocked");
    h->egress[0].ok = false;
    h->egress[0].detail = xstrdup ("GET http://169.254.169.254/ answered 200");
    h->egress[0].checked_at = 1764454479000;
    h->egress[1].name = xstrdup ("https-reachable");
    h->egress[1].ok = true;
    h->egress[1].checked_at = 1764454479500;
}

void
sample_heartbeat_min (kiwi_heartbeat *h)
{
    h->worker_id = xstrdup ("w1");
    h->version = xstrdup ("0.1.0");
    h->ts = 2;
    h->redis_ok = true;
}

void
sample_deadletter_full (kiwi_deadletter *d)
{
    static const char original[] = "\x82\xa1v\x01\xa2id\xa3t-1";
    static const char key[] = "https://git.example.com/acme/widgets.git";
    d->reason = xstrdup ("task.repo: required field missing");
    d->topic = xstrdup ("kiwi.tasks");
    d->partition = 3;
    d->offset = 1234567890123;
    d->original_len = sizeof original - 1;
    d->original = xmemdup (original, d->original_len);
    d->has_key = true;
    d->key_len = sizeof key - 1;
    d->key = xmemdup (key, d->key_len);
    d->ts = 1764454490000;
    d->worker_id = xstrdup ("worker-a:7");
}

void
sample_deadletter_min (kiwi_deadletter *d)
{
    d->reason = xstrdup ("task: empty message");
    d->topic = xstrdup ("kiwi.tasks");
    d->partition = -1;
    d->offset = -1;
    d->ts = 3;
    d->worker_id = xstrdup ("w1");
}
