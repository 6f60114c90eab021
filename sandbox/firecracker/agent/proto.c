/*
 * proto.c: frames and fields of the host <-> guest agent protocol (see
 * proto.h).
 */
#include "sandbox/firecracker/agent/proto.h"
#include "common/enum.h"

#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

KIWI_ENUM_STR_FN3 (kiwi_fcp_type_str, int, KIWI_FCP_FRAMES)

KIWI_ENUM_STR_FN3 (kiwi_fcp_field_str, int, KIWI_FCP_FIELDS)

static bool
known_type (int type)
{
    return strcmp (kiwi_fcp_type_str (type), "unknown") != 0;
}

int64_t
kiwi_fcp_now_ms (void)
{
    struct timespec ts;
    clock_gettime (CLOCK_MONOTONIC, &ts);
    return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void
kiwi_fcp_frame_clear (kiwi_fcp_frame *f)
{
    kiwi_buf_free (&f->store);
    memset (f, 0, sizeof *f);
}

static int
write_all (int fd, const void *data, size_t len, kiwi_error_t *err)
{
    const char *p = data;
    while (len > 0) {
        ssize_t w = send (fd, p, len, MSG_NOSIGNAL);
        if (w < 0 && errno == ENOTSOCK)
            w = write (fd, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return kiwi_error_make (err, errno, "agent protocol: sending");
        }
        p += w;
        len -= (size_t) w;
    }
    return 0;
}

int
kiwi_fcp_send (int fd, int type, const void *payload, size_t len, kiwi_error_t *err)
{
    if (len > KIWI_FCP_MAX_PAYLOAD)
        return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "agent protocol: a %s frame of %zu bytes is over the %zu "
                                     "byte maximum", kiwi_fcp_type_str (type), len, KIWI_FCP_MAX_PAYLOAD);
    unsigned char h[KIWI_FCP_HEADER] = { (unsigned char) type, 0, 0, 0, (unsigned char) (len >> 24),
                                         (unsigned char) (len >> 16), (unsigned char) (len >> 8),
                                         (unsigned char) len };
    /* one write for small frames: fewer packets over vsock */
    if (len <= 4096) {
        unsigned char one[KIWI_FCP_HEADER + 4096];
        memcpy (one, h, sizeof h);
        if (len)
            memcpy (one + sizeof h, payload, len);
        return write_all (fd, one, sizeof h + len, err);
    }
    if (write_all (fd, h, sizeof h, err) < 0)
        return -1;
    return write_all (fd, payload, len, err);
}

/* Reads exactly len bytes. Returns 1, 0 on EOF before the first byte, < 0. */
static int
read_full (int fd, void *buf, size_t len, int64_t deadline_ms, kiwi_error_t *err)
{
    char *p = buf;
    size_t have = 0;
    while (have < len) {
        if (deadline_ms > 0) {
            int64_t left = deadline_ms - kiwi_fcp_now_ms ();
            if (left <= 0)
                return kiwi_error_make_code (err, KIWI_FCP_ETIMEDOUT, "agent protocol: no answer in time");
            struct pollfd pfd = { .fd = fd, .events = POLLIN };
            int n = poll (&pfd, 1, left > 1000 ? 1000 : (int) left);
            if (n < 0 && errno != EINTR)
                return kiwi_error_make (err, errno, "agent protocol: waiting");
            if (n <= 0)
                continue;
        }
        ssize_t r = read (fd, p + have, len - have);
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return kiwi_error_make (err, errno, "agent protocol: receiving");
        }
        if (r == 0) {
            if (have == 0)
                return 0;
            return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "agent protocol: the stream ended inside a frame");
        }
        have += (size_t) r;
    }
    return 1;
}

int
kiwi_fcp_recv (int fd, int64_t deadline_ms, kiwi_fcp_frame *f, kiwi_error_t *err)
{
    unsigned char h[KIWI_FCP_HEADER];
    int rc = read_full (fd, h, sizeof h, deadline_ms, err);
    if (rc <= 0)
        return rc;
    uint32_t len = (uint32_t) h[4] << 24 | (uint32_t) h[5] << 16 | (uint32_t) h[6] << 8 | h[7];
    if (!known_type (h[0]) || h[1] || h[2] || h[3])
        return kiwi_error_make_code (err, KIWI_FCP_EPROTO,
                                     "agent protocol: bad frame header %02x %02x %02x %02x (not a Kiwi agent?)", h[0],
                                     h[1], h[2], h[3]);
    if (len > KIWI_FCP_MAX_PAYLOAD)
        return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "agent protocol: a %s frame of %" PRIu32
                                     " bytes is over the maximum", kiwi_fcp_type_str (h[0]), len);
    kiwi_buf_reset (&f->store);
    if (kiwi_buf_reserve (&f->store, len, NULL) < 0)
        return kiwi_error_make (err, ENOMEM, "agent protocol: frame of %" PRIu32 " bytes", len);
    f->payload = f->store.data;
    f->type = h[0];
    f->len = len;
    if (len > 0) {
        rc = read_full (fd, f->payload, len, deadline_ms, err);
        if (rc == 0)
            return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "agent protocol: the stream ended inside a frame");
        if (rc < 0)
            return -1;
    }
    f->payload[len] = '\0';
    return 1;
}

int
kiwi_fcp_put_field (kiwi_buf *b, int tag, const void *data, size_t len, kiwi_error_t *err)
{
    if (len > UINT32_MAX)
        return kiwi_error_make (err, EOVERFLOW, "agent protocol: field %s", kiwi_fcp_field_str (tag));
    unsigned char h[5] = { (unsigned char) tag, (unsigned char) (len >> 24), (unsigned char) (len >> 16),
                           (unsigned char) (len >> 8), (unsigned char) len };
    if (kiwi_buf_reserve (b, sizeof h + len, err) < 0)
        return -1;
    if (kiwi_buf_append (b, h, sizeof h, err) < 0)
        return -1;
    return kiwi_buf_append (b, data, len, err);
}

int
kiwi_fcp_put_str (kiwi_buf *b, int tag, const char *s, kiwi_error_t *err)
{
    return kiwi_fcp_put_field (b, tag, s, strlen (s), err);
}

int
kiwi_fcp_put_int (kiwi_buf *b, int tag, int64_t v, kiwi_error_t *err)
{
    char num[32];
    int n = snprintf (num, sizeof num, "%" PRId64, v);
    return kiwi_fcp_put_field (b, tag, num, (size_t) n, err);
}

int
kiwi_fcp_next_field (const char *payload, size_t len, size_t *pos, int *tag, const char **val, size_t *vlen,
                     kiwi_error_t *err)
{
    if (*pos >= len)
        return 0;
    if (len - *pos < 5)
        return kiwi_error_make_code (err, KIWI_FCP_EPROTO, "agent protocol: a field header is cut at byte %zu",
                                     *pos);
    const unsigned char *h = (const unsigned char *) payload + *pos;
    size_t n = (size_t) h[1] << 24 | (size_t) h[2] << 16 | (size_t) h[3] << 8 | h[4];
    if (n > len - *pos - 5)
        return kiwi_error_make_code (err, KIWI_FCP_EPROTO,
                                     "agent protocol: field %s of %zu bytes runs past its frame",
                                     kiwi_fcp_field_str (h[0]), n);
    *tag = h[0];
    *val = payload + *pos + 5;
    *vlen = n;
    *pos += 5 + n;
    return 1;
}

static bool
find_field (const kiwi_fcp_frame *f, int want, const char **val, size_t *vlen)
{
    size_t pos = 0;
    int tag = 0;
    kiwi_error_t e = NULL;
    int rc;
    while ((rc = kiwi_fcp_next_field (f->payload, f->len, &pos, &tag, val, vlen, &e)) == 1)
        if (tag == want)
            return true;
    kiwi_error_free (&e);
    return false;
}

char *
kiwi_fcp_get_str (const kiwi_fcp_frame *f, int tag)
{
    const char *v = NULL;
    size_t n = 0;
    if (!find_field (f, tag, &v, &n))
        return NULL;
    return strndup (v, n);
}

int64_t
kiwi_fcp_get_int (const kiwi_fcp_frame *f, int tag, int64_t dflt)
{
    const char *v = NULL;
    size_t n = 0;
    if (!find_field (f, tag, &v, &n) || n == 0 || n >= 32)
        return dflt;
    char num[32];
    memcpy (num, v, n);
    num[n] = '\0';
    char *end = NULL;
    errno = 0;
    long long x = strtoll (num, &end, 10);
    if (errno != 0 || *end != '\0')
        return dflt;
    return x;
}

int
kiwi_fcp_send_error (int fd, int errno_, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start (ap, fmt);
    vsnprintf (msg, sizeof msg, fmt, ap);
    va_end (ap);
    kiwi_buf b = KIWI_BUF_INIT;
    kiwi_error_t e = NULL;
    int rc = -1;
    if (kiwi_fcp_put_str (&b, KIWI_FCF_MESSAGE, msg, &e) == 0 && kiwi_fcp_put_int (&b, KIWI_FCF_ERRNO, errno_, &e) == 0)
        rc = kiwi_fcp_send (fd, KIWI_FCP_ERROR, b.data, b.len, &e);
    kiwi_error_free (&e);
    kiwi_buf_free (&b);
    return rc;
}
