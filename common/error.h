/*
 * error.h: errors as values.
 *
 * A function that can fail takes `kiwi_error_t *err` as its last parameter and
 * returns < 0 (or NULL). The message is made once, where the failure happens,
 * with kiwi_error_make(); callers on the way up add context with
 * kiwi_error_wrap(), which prefixes "context: ". The top level (main) logs the
 * message and frees it with kiwi_error_free().
 *
 * Ownership: *err is owned by the caller that passed it; it must be NULL on
 * entry to a failing call and is freed (and reset to NULL) by kiwi_error_free.
 */
#ifndef KIWI_COMMON_ERROR_H
#define KIWI_COMMON_ERROR_H

#include <stdarg.h>

/* Error-code ranges. kiwi_error_code() carries a module-specific code; each
 * module numbers its codes from the base of its range here, so that codes of
 * two modules never meet and a code names its module. A module's header
 * defines its first code from its base (KIWI_REPO_E_FETCH =
 * KIWI_ERR_RANGE_REPO, KIWI_DOCKER_ABORTED = KIWI_ERR_RANGE_DOCKER + 1). A
 * new module takes a new base here; the values never change (tests and
 * logs know them).
 *
 *   range         base    codes                     header
 *   MODEL         0       KIWI_MODEL_OK, _E_* 1..   models/models.h (index a name table: keep at 0)
 *   SANDBOX       100     KIWI_SBE_* (OK is 100)    sandbox/sandbox.h
 *   REPO          200     KIWI_REPO_E_*             worker/task/repo.h
 *   POLICY        300     KIWI_POLICY_E_REFUSED     worker/task/policy.h
 *   DOCKER        1000    KIWI_DOCKER_ABORTED 1001  sandbox/docker/docker-api.h
 *   FC_AGENT      2000    KIWI_FCP_E* 2001, 2002    sandbox/firecracker/agent/proto.h
 *   FC_API        3000    KIWI_FC_API_HTTP 3001     sandbox/firecracker/fc-api.h
 *   CLI           0x4300  KIWI_CLI_EUSAGE 0x4301    producer/opts.h
 *   WIRE          0x5700  KIWI_WIRE_EINVALID 0x5701 schemas/wire.h
 *
 * Not a range: an error of kiwi_docker_call() (sandbox/docker) may carry a
 * CURLcode (below 100) or an HTTP status (100-599) as its code, which its
 * callers in the Docker driver read beside the call and nowhere else. */
#define KIWI_ERROR_RANGES(X)                                                                                 \
    X (MODEL, 0)                                                                                             \
    X (SANDBOX, 100)                                                                                         \
    X (REPO, 200)                                                                                            \
    X (POLICY, 300)                                                                                          \
    X (DOCKER, 1000)                                                                                         \
    X (FC_AGENT, 2000)                                                                                       \
    X (FC_API, 3000)                                                                                         \
    X (CLI, 0x4300)                                                                                          \
    X (WIRE, 0x5700)

typedef enum {
#define KIWI__ERR_RANGE_ENUM(name, base) KIWI_ERR_RANGE_##name = (base),
    KIWI_ERROR_RANGES (KIWI__ERR_RANGE_ENUM)
#undef KIWI__ERR_RANGE_ENUM
} kiwi_err_range;

typedef struct kiwi_error_s {
    int errno_;   /* errno at the failure, or 0 */
    int code;     /* module-specific code, or 0 */
    char *msg;    /* human-readable, owned */
} kiwi_error_s;

typedef kiwi_error_s *kiwi_error_t;

/* Sets *err to a new error. With errno_ != 0, ": strerror(errno_)" is appended.
 * Always returns -1, so failures can `return kiwi_error_make (...)`.
 * If *err is already set, the old error is freed first. */
int kiwi_error_make (kiwi_error_t *err, int errno_, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Same, with a module-specific code (see kiwi_error_code). */
int kiwi_error_make_code (kiwi_error_t *err, int code, const char *fmt, ...)
    __attribute__ ((format (printf, 3, 4)));

/* Prefixes the message in *err with "context: ". Returns -1.
 * If *err is NULL, makes a new error with just the context. */
int kiwi_error_wrap (kiwi_error_t *err, const char *fmt, ...)
    __attribute__ ((format (printf, 2, 3)));

/* The message, or "" for NULL. Borrowed: valid until the error is freed. */
const char *kiwi_error_msg (kiwi_error_t err);

/* The module-specific code, or 0. */
int kiwi_error_code (kiwi_error_t err);

/* Frees *err and sets it to NULL. Safe on NULL. */
void kiwi_error_free (kiwi_error_t *err);

/* Moves the error out of *err (leaving NULL) into the return value. */
kiwi_error_t kiwi_error_steal (kiwi_error_t *err);

#endif
