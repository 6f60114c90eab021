/*
 * nflog.c: the egress rules' rejected packets from the netlink log (see
 * nflog.h).
 *
 * The netlink side is Debian's libnetfilter-log. The packet headers are
 * read here by hand: libnetfilter-log hands over the bytes and no Debian
 * library parses an IP header and a DNS question out of a packet capture
 * without pulling in a capture framework; what is read is only the fixed
 * fields below, each checked against the length first.
 */
#include "worker/egress/nflog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <libnetfilter_log/libnetfilter_log.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/clock.h"
#include "worker/events.h"

/* ------------------------------------------------------------ packets --- */

static uint16_t
be16 (const uint8_t *b)
{
    return (uint16_t) ((b[0] << 8) | b[1]);
}

/* The question's name of a DNS message (its first question) into
 * out[cap]: labels of letters, digits, '-' and '_' joined by '.'; any other
 * byte is written as '?'. "" when the message has no readable question. */
static void
dns_qname (const uint8_t *m, size_t len, char *out, size_t cap)
{
    out[0] = '\0';
    if (len < 12 || be16 (m + 4) == 0) /* header; QDCOUNT */
        return;
    size_t i = 12, o = 0;
    while (i < len) {
        uint8_t l = m[i++];
        if (l == 0) {
            out[o] = '\0';
            return;
        }
        if (l > 63 || i + l > len) /* a pointer (none belongs in a query's first name) or past the end */
            break;
        if (o && o + 1 < cap)
            out[o++] = '.';
        for (uint8_t k = 0; k < l && o + 1 < cap; k++) {
            uint8_t c = m[i + k];
            bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'
                         || c == '_';
            out[o++] = plain ? (char) c : '?';
        }
        i += l;
    }
    out[0] = '\0'; /* no terminating label: not a name */
}

int
kiwi_nflog_parse (int family, const uint8_t *pkt, size_t len, kiwi_nflog_packet *p)
{
    const char *rule = p->rule;
    int64_t at = p->at_ms;
    memset (p, 0, sizeof *p);
    p->rule = rule;
    p->at_ms = at;
    p->port = -1;
    p->protocol = "ip";
    size_t off;
    int proto;
    bool first_fragment = true;
    if (family == AF_INET) {
        if (len < 20 || (pkt[0] >> 4) != 4)
            return -1;
        off = (size_t) (pkt[0] & 0x0f) * 4;
        if (off < 20 || off > len)
            return -1;
        proto = pkt[9];
        first_fragment = (be16 (pkt + 6) & 0x1fff) == 0;
        inet_ntop (AF_INET, pkt + 12, p->src, sizeof p->src);
        inet_ntop (AF_INET, pkt + 16, p->dst, sizeof p->dst);
    } else if (family == AF_INET6) {
        if (len < 40 || (pkt[0] >> 4) != 6)
            return -1;
        inet_ntop (AF_INET6, pkt + 8, p->src, sizeof p->src);
        inet_ntop (AF_INET6, pkt + 24, p->dst, sizeof p->dst);
        proto = pkt[6];
        off = 40;
        /* extension headers: hop-by-hop, routing, destination options
         * (8-byte units after the first 8), fragment (8 bytes) */
        for (int n = 0; n < 8 && off + 8 <= len; n++) {
            if (proto == 0 || proto == 43 || proto == 60) {
                size_t ext = ((size_t) pkt[off + 1] + 1) * 8;
                proto = pkt[off];
                off += ext;
            } else if (proto == 44) {
                first_fragment = (be16 (pkt + off + 2) & 0xfff8) == 0;
                proto = pkt[off];
                off += 8;
            } else
                break;
        }
        if (off > len)
            return 0; /* the addresses, and no more */
    } else
        return -1;
    if (proto == IPPROTO_ICMP || proto == IPPROTO_ICMPV6) {
        p->protocol = "icmp";
        return 0;
    }
    if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
        return 0;
    p->protocol = proto == IPPROTO_TCP ? "tcp" : "udp";
    if (!first_fragment || off + 4 > len)
        return 0;
    p->port = be16 (pkt + off + 2);
    if (p->port == 53) {
        p->protocol = "dns";
        if (proto == IPPROTO_UDP && off + 8 <= len)
            dns_qname (pkt + off + 8, len - off - 8, p->qname, sizeof p->qname);
    }
    return 0;
}

const char *
kiwi_nflog_rule (const char *prefix)
{
    if (prefix && strcmp (prefix, "kiwi-egress forward") == 0)
        return "only through the egress proxy";
    if (prefix && strcmp (prefix, "kiwi-egress host") == 0)
        return "no new connections to the host";
    return "rejected";
}

json_t *
kiwi_nflog_denial_json (const kiwi_nflog_packet *p)
{
    return json_pack ("{s:s,s:s,s:o,s:n,s:s,s:s,s:s,s:s,s:I}", "host", p->qname[0] ? p->qname : p->dst, "address",
                      p->dst, "port", p->port >= 0 ? json_integer (p->port) : json_null (), "sni", "protocol",
                      p->protocol, "via", "firewall", "rule", p->rule ? p->rule : "rejected", "allow_with",
                      "KIWI_INSTALL_EGRESS=open", "attempted_at", (json_int_t) p->at_ms);
}

/* ------------------------------------------------------------ netlink --- */

struct kiwi_nflog {
    struct nflog_handle *h;
    struct nflog_g_handle *gh;
    uint16_t group;
    kiwi_nflog_cb cb;
    void *userdata;
    int read_now; /* packets handled by the current kiwi_nflog_read */
    uint64_t dropped;
};

static int
on_packet (struct nflog_g_handle *gh, struct nfgenmsg *nfmsg, struct nflog_data *nfd, void *data)
{
    (void) gh;
    kiwi_nflog *l = data;
    char *payload = NULL;
    int n = nflog_get_payload (nfd, &payload);
    if (n <= 0 || payload == NULL)
        return 0;
    kiwi_nflog_packet p = { .rule = kiwi_nflog_rule (nflog_get_prefix (nfd)) };
    struct timeval tv;
    p.at_ms = nflog_get_timestamp (nfd, &tv) == 0 && tv.tv_sec > 0
                  ? (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000
                  : kiwi_wall_ms ();
    if (kiwi_nflog_parse (nfmsg->nfgen_family, (const uint8_t *) payload, (size_t) n, &p) < 0)
        return 0;
    l->read_now++;
    if (l->cb)
        l->cb (&p, l->userdata);
    return 0;
}

int
kiwi_nflog_open (uint16_t group, kiwi_nflog_cb cb, void *userdata, kiwi_nflog **out, kiwi_error_t *err)
{
    *out = NULL;
    kiwi_nflog *l = calloc (1, sizeof *l);
    if (l == NULL)
        return kiwi_error_make (err, ENOMEM, "netlink log group %u", group);
    l->group = group;
    l->cb = cb;
    l->userdata = userdata;
    errno = 0;
    if ((l->h = nflog_open ()) == NULL) {
        int e = errno ? errno : EIO;
        free (l);
        return kiwi_error_make (err, e, "netlink log group %u: opening a netfilter netlink socket", group);
    }
    /* a no-op on kernels since 3.8; older ones need the families bound */
    (void) nflog_bind_pf (l->h, AF_INET);
    (void) nflog_bind_pf (l->h, AF_INET6);
    errno = 0;
    if ((l->gh = nflog_bind_group (l->h, group)) == NULL) {
        int e = errno ? errno : EBUSY;
        kiwi_nflog_close (l);
        return kiwi_error_make (err, e,
                                "netlink log group %u: cannot bind it (another process holds it, or this one lacks "
                                "CAP_NET_ADMIN)",
                                group);
    }
    /* the headers (and a DNS question) are all that is read; each packet
     * is sent at once (a queue of 1, no timer), not batched for a second */
    if (nflog_set_mode (l->gh, NFULNL_COPY_PACKET, 512) < 0 || nflog_set_qthresh (l->gh, 1) < 0
        || nflog_set_timeout (l->gh, 0) < 0) {
        int e = errno ? errno : EIO;
        kiwi_nflog_close (l);
        return kiwi_error_make (err, e, "netlink log group %u: setting its copy mode", group);
    }
    nflog_callback_register (l->gh, on_packet, l);
    int fd = nflog_fd (l->h);
    int fl = fcntl (fd, F_GETFL);
    if (fl < 0 || fcntl (fd, F_SETFL, fl | O_NONBLOCK) < 0 || fcntl (fd, F_SETFD, FD_CLOEXEC) < 0) {
        int e = errno;
        kiwi_nflog_close (l);
        return kiwi_error_make (err, e, "netlink log group %u: its socket", group);
    }
    *out = l;
    return 0;
}

void
kiwi_nflog_set_callback (kiwi_nflog *l, kiwi_nflog_cb cb, void *userdata)
{
    l->cb = cb;
    l->userdata = userdata;
}

int
kiwi_nflog_fd (const kiwi_nflog *l)
{
    return nflog_fd (l->h);
}

int
kiwi_nflog_read (kiwi_nflog *l, kiwi_error_t *err)
{
    char buf[65536] __attribute__ ((aligned));
    int fd = nflog_fd (l->h);
    l->read_now = 0;
    for (;;) {
        ssize_t n = recv (fd, buf, sizeof buf, 0);
        if (n > 0) {
            nflog_handle_packet (l->h, buf, (int) n);
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == ENOBUFS) { /* the kernel dropped some: the buffer was full */
            l->dropped++;
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return l->read_now;
        if (n == 0)
            return l->read_now;
        return kiwi_error_make (err, errno, "netlink log group %u: reading", l->group);
    }
}

uint16_t
kiwi_nflog_group (const kiwi_nflog *l)
{
    return l->group;
}

uint64_t
kiwi_nflog_dropped (const kiwi_nflog *l)
{
    return l->dropped;
}

void
kiwi_nflog_close (kiwi_nflog *l)
{
    if (l == NULL)
        return;
    if (l->gh)
        nflog_unbind_group (l->gh);
    if (l->h)
        nflog_close (l->h);
    free (l);
}

