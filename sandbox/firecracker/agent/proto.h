/*
 * proto.h: the wire protocol between Kiwi's firecracker driver (the host)
 * and kiwi-fc-agent (the guest), one request per vsock connection.
 *
 * Every message is a frame: an 8-byte header {type, 0, 0, 0, length as a
 * big-endian uint32} and `length` bytes of payload, at most
 * KIWI_FCP_MAX_PAYLOAD. The payload of a request, of EXIT, OK and ERROR is
 * a list of fields: {tag, length as a big-endian uint32, bytes}; a tag
 * that repeats forms a list (argv, env); numbers are decimal text. Unknown
 * tags are ignored, so either side can grow fields.
 *
 *   hello  host: HELLO                     agent: OK (version)
 *   exec   host: EXEC (arg..., env..., workdir, user, timeout_ms, nproc)
 *          agent: STDOUT / STDERR chunks as they come, then
 *                 EXIT (code, signal, timed_out, oom)
 *   put    host: PUT (dir, user), DATA chunks, an empty DATA frame
 *          agent: OK, or ERROR
 *   get    host: GET (path)
 *          agent: DATA chunks of a tar stream, an empty DATA frame; or ERROR
 *
 * An ERROR frame (message, errno) ends any request. The host closing its
 * end during an exec kills the command's process group.
 *
 * Both sides link this file: the driver in kiwi_sandbox and the static
 * agent in the guest.
 */
#ifndef KIWI_FC_AGENT_PROTO_H
#define KIWI_FC_AGENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/archive/archive.h"
#include "common/error.h"

#define KIWI_FCP_VERSION "1"
#define KIWI_FCP_HEADER 8
#define KIWI_FCP_MAX_PAYLOAD ((size_t) 1 << 20)
#define KIWI_FCP_CHUNK ((size_t) 64 * 1024) /* DATA and output chunks the sides send */

/* The vsock port the agent listens on inside the guest. */
#define KIWI_FCP_PORT 5252

#define KIWI_FCP_FRAMES(X)                                                                                   \
    X (KIWI_FCP_HELLO, 'h', "hello")                                                                         \
    X (KIWI_FCP_EXEC, 'x', "exec")                                                                           \
    X (KIWI_FCP_PUT, 'p', "put")                                                                             \
    X (KIWI_FCP_GET, 'g', "get")                                                                             \
    X (KIWI_FCP_DATA, 'd', "data")                                                                           \
    X (KIWI_FCP_STDOUT, '1', "stdout")                                                                       \
    X (KIWI_FCP_STDERR, '2', "stderr")                                                                       \
    X (KIWI_FCP_EXIT, 'q', "exit")                                                                           \
    X (KIWI_FCP_OK, 'k', "ok")                                                                               \
    X (KIWI_FCP_ERROR, 'r', "error")

typedef enum {
#define KIWI__FCP_ENUM(name, ch, str) name = ch,
    KIWI_FCP_FRAMES (KIWI__FCP_ENUM)
#undef KIWI__FCP_ENUM
} kiwi_fcp_type;

#define KIWI_FCP_FIELDS(X)                                                                                   \
    X (KIWI_FCF_ARG, 'a', "arg")                                                                             \
    X (KIWI_FCF_ENV, 'e', "env")                                                                             \
    X (KIWI_FCF_WORKDIR, 'w', "workdir")                                                                     \
    X (KIWI_FCF_USER, 'u', "user")                                                                           \
    X (KIWI_FCF_TIMEOUT_MS, 't', "timeout_ms")                                                               \
    X (KIWI_FCF_NPROC, 'n', "nproc")                                                                         \
    X (KIWI_FCF_PATH, 'p', "path")                                                                           \
    X (KIWI_FCF_CODE, 'c', "code")                                                                           \
    X (KIWI_FCF_SIGNAL, 's', "signal")                                                                       \
    X (KIWI_FCF_TIMED_OUT, 'T', "timed_out")                                                                 \
    X (KIWI_FCF_OOM, 'o', "oom")                                                                             \
    X (KIWI_FCF_MESSAGE, 'm', "message")                                                                     \
    X (KIWI_FCF_ERRNO, 'E', "errno")                                                                         \
    X (KIWI_FCF_VERSION, 'v', "version")

typedef enum {
#define KIWI__FCF_ENUM(name, ch, str) name = ch,
    KIWI_FCP_FIELDS (KIWI__FCF_ENUM)
#undef KIWI__FCF_ENUM
} kiwi_fcp_field;

/* Error code (kiwi_error_code) of a read that hit its deadline. */
#define KIWI_FCP_ETIMEDOUT (KIWI_ERR_RANGE_FC_AGENT + 1)
/* Error code of a peer that sent something that is not this protocol. */
#define KIWI_FCP_EPROTO (KIWI_ERR_RANGE_FC_AGENT + 2)

const char *kiwi_fcp_type_str (int type);
const char *kiwi_fcp_field_str (int tag);

/* One received frame. `payload` points into `store`, which the frame owns
 * and the next read into it reuses; kiwi_fcp_frame_clear() frees it. */
typedef struct kiwi_fcp_frame {
    int type;
    char *payload; /* store.data: NUL-terminated for convenience (not counted in len) */
    size_t len;
    kiwi_buf store;
} kiwi_fcp_frame;

void kiwi_fcp_frame_clear (kiwi_fcp_frame *f);

/* Milliseconds on the monotonic clock. */
int64_t kiwi_fcp_now_ms (void);

/* Sends one frame (the whole of it, retrying short writes; no SIGPIPE).
 * Returns < 0 with *err on a write failure or a payload over the maximum. */
int kiwi_fcp_send (int fd, int type, const void *payload, size_t len, kiwi_error_t *err);

/* Reads one frame. `deadline_ms` is an absolute kiwi_fcp_now_ms() time, 0
 * for none. Returns 1 with *f filled, 0 on a clean end of stream before a
 * header, < 0 with *err: KIWI_FCP_ETIMEDOUT at the deadline, KIWI_FCP_EPROTO
 * for a bad header or a stream cut inside a frame, else an I/O error. */
int kiwi_fcp_recv (int fd, int64_t deadline_ms, kiwi_fcp_frame *f, kiwi_error_t *err);

/* Field encoding into a buffer (appending). Return < 0 on allocation
 * failure. */
int kiwi_fcp_put_field (kiwi_buf *b, int tag, const void *data, size_t len, kiwi_error_t *err);
int kiwi_fcp_put_str (kiwi_buf *b, int tag, const char *s, kiwi_error_t *err);
int kiwi_fcp_put_int (kiwi_buf *b, int tag, int64_t v, kiwi_error_t *err);

/* Walks the fields of a payload: returns 1 with the next field (value
 * borrowed from the payload), 0 at the end, < 0 with *err for a field that
 * runs past the payload. Start with *pos = 0. */
int kiwi_fcp_next_field (const char *payload, size_t len, size_t *pos, int *tag, const char **val, size_t *vlen,
                         kiwi_error_t *err);

/* The first field `tag` as a new NUL-terminated string (NULL if absent or
 * on allocation failure), or as a number (`dflt` if absent or not a
 * number). */
char *kiwi_fcp_get_str (const kiwi_fcp_frame *f, int tag);
int64_t kiwi_fcp_get_int (const kiwi_fcp_frame *f, int tag, int64_t dflt);

/* Sends ERROR with a message and an errno value (0 for none). Best effort:
 * the result of the send is returned, no error is made. */
int kiwi_fcp_send_error (int fd, int errno_, const char *fmt, ...) __attribute__ ((format (printf, 3, 4)));

#endif
