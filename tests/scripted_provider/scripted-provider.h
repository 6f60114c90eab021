/*
 * scripted-provider.h: starting and stopping the scripted provider
 * (tests/scripted_provider/server.py) from a C test, and reading what it saw.
 *
 * kiwi_scripted_provider_start() forks and execs Debian's /usr/bin/python3
 * (or $KIWI_PYTHON3, or python3 on PATH) with server.py on an ephemeral
 * loopback port, waits until it prints its port, and returns. The server
 * dies with the test process (PR_SET_PDEATHSIG, and it watches its parent),
 * and kiwi_scripted_provider_stop() ends it and waits for it, so nothing is
 * left running. Its request log (one JSON object per request) lives in a
 * temporary directory removed at stop (kept when KIWI_KEEP_TEST_FILES=1).
 *
 * Link kiwi_scripted_provider (defined by tests/scripted_provider/
 * scripted-provider.cmake, which tests/CMakeLists.txt includes).
 */
#ifndef KIWI_TESTS_SCRIPTED_PROVIDER_H
#define KIWI_TESTS_SCRIPTED_PROVIDER_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct kiwi_scripted_provider {
    pid_t pid;      /* the server, or 0 */
    int port;       /* its loopback port */
    char *dir;      /* temporary directory holding the log (owned) */
    char *log_path; /* dir/requests.jsonl (owned) */
} kiwi_scripted_provider;

/* The directory of the fixtures shipped with the server. */
#define KIWI_SCRIPTED_PROVIDER_SCRIPTS KIWI_SOURCE_DIR "/tests/scripted_provider/scripts"

/* Starts the server with scripts from `script_dirs` (NULL-terminated; NULL
 * means KIWI_SCRIPTED_PROVIDER_SCRIPTS alone). Returns 0 once it listens, or
 * < 0 with *err (its stderr quoted) when it does not within 15 s. */
int kiwi_scripted_provider_start (kiwi_scripted_provider *sp, const char *const *script_dirs, kiwi_error_t *err);

/* Starts the server as the model's seat: every request goes to `seat_dir`
 * as NNNN-request.json and NNNN-request.txt, and is answered from the
 * NNNN-answer.json written there (README.md, "The model's seat"). */
int kiwi_scripted_provider_start_seat (kiwi_scripted_provider *sp, const char *seat_dir, kiwi_error_t *err);

/* Ends the server (SIGTERM, then SIGKILL after 3 s), reaps it, removes its
 * directory. Safe on a stopped or never-started one. */
void kiwi_scripted_provider_stop (kiwi_scripted_provider *sp);

/* The base URL a client of `provider` ("anthropic", "openai", "gemini")
 * uses for `script`: http://127.0.0.1:PORT/script/NAME, then /v1 for
 * OpenAI and /v1beta for Gemini. New string, caller frees. */
char *kiwi_scripted_provider_base_url (const kiwi_scripted_provider *sp, const char *provider, const char *script);

/* The fake key the server expects from `provider`'s clients. Static. */
const char *kiwi_scripted_provider_key (const char *provider);

/* Turn counters back to the first turn, for `script` (NULL: all). */
int kiwi_scripted_provider_reset (const kiwi_scripted_provider *sp, const char *script, kiwi_error_t *err);

/* The request log as a JSON array (new reference), entries in arrival order,
 * only those of `script` when not NULL. NULL with *err when unreadable. */
json_t *kiwi_scripted_provider_log (const kiwi_scripted_provider *sp, const char *script, kiwi_error_t *err);

/* Requests the server received for `script`. */
size_t kiwi_scripted_provider_requests (const kiwi_scripted_provider *sp, const char *script);

/* Violations recorded for `script` (NULL: any script); the first one's
 * "kind: message" in *first (caller frees) when first is not NULL. */
size_t kiwi_scripted_provider_violations (const kiwi_scripted_provider *sp, const char *script, char **first);

#endif
