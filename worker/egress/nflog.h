/*
 * nflog.h: the packets the egress rules reject from an install bridge, as
 * the kernel logs them (netlink log, NFLOG), read for `egress_denied`
 * events.
 *
 * With the egress proxy, egress.sh puts an NFLOG rule before each reject of
 * the install bridge: what Phase A sends that is not for the proxy (UDP,
 * DNS, TCP to other ports, raw addresses, anything to the host itself) is
 * logged to the bridge's group, KIWI_EGRESS_NFLOG_GROUP plus the bridge's
 * number, with the prefix "kiwi-egress forward" (sent beyond the host) or
 * "kiwi-egress host" (to the host itself), at most 20 packets a second per
 * source address. Squid's denials are in its access log (egress-record.h);
 * these are the rest.
 *
 * The packet bytes are what a sandbox sent: hostile. kiwi_nflog_parse reads
 * only within the length the kernel gave and copies no byte of a DNS name
 * it does not recognise.
 *
 * Ownership: a kiwi_nflog is the caller's (kiwi_nflog_close).
 */
#ifndef KIWI_WORKER_NFLOG_H
#define KIWI_WORKER_NFLOG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

/* One rejected packet. */
typedef struct kiwi_nflog_packet {
    char src[46], dst[46];  /* addresses, as inet_ntop writes them */
    const char *protocol;   /* "tcp", "udp", "dns" (either, to port 53), "icmp" or "ip" (static) */
    int port;               /* destination port; -1 for a protocol without one or a fragment */
    char qname[254];        /* a DNS query's name (UDP); "" when none could be read */
    const char *rule;       /* from the prefix: "only through the egress proxy" (forward),
                             * "no new connections to the host" (host) or "rejected" (static) */
    int64_t at_ms;          /* when the kernel logged it (ms since the epoch; now when it gave no time) */
} kiwi_nflog_packet;

/* Reads one packet of address family `family` (AF_INET or AF_INET6), from
 * its network header on, into *p (rule and at_ms left as they were). -1
 * when it is not a packet of that family or too short for its own header. */
int kiwi_nflog_parse (int family, const uint8_t *pkt, size_t len, kiwi_nflog_packet *p);

/* The rule a prefix names (see kiwi_nflog_packet.rule). */
const char *kiwi_nflog_rule (const char *prefix);

/* The packet as an `egress_denied` payload: {host (the DNS name asked
 * for, else the address), address, port (null without one), sni (null),
 * protocol, via ("firewall"), rule, allow_with (KIWI_INSTALL_EGRESS=open:
 * no list lets these through; the proxy resolves names itself),
 * attempted_at}. New reference, NULL without memory. */
json_t *kiwi_nflog_denial_json (const kiwi_nflog_packet *p);

typedef struct kiwi_nflog kiwi_nflog;
typedef void (*kiwi_nflog_cb) (const kiwi_nflog_packet *p, void *userdata);

/* Binds netlink log group `group` (needs CAP_NET_ADMIN; one process per
 * group) and calls cb for each packet kiwi_nflog_read reads. -1 with *err
 * when it cannot (the group held by another process, no permission, no
 * nfnetlink_log in the kernel). */
int kiwi_nflog_open (uint16_t group, kiwi_nflog_cb cb, void *userdata, kiwi_nflog **out, kiwi_error_t *err);

/* Calls cb (with userdata) for the packets read from now on. */
void kiwi_nflog_set_callback (kiwi_nflog *l, kiwi_nflog_cb cb, void *userdata);

/* The socket to poll for reading (non-blocking). */
int kiwi_nflog_fd (const kiwi_nflog *l);

/* Reads what is queued, without waiting, calling cb per packet. Returns
 * the packets read; -1 with *err on a socket error. Packets the kernel
 * dropped because the socket's buffer was full are counted (dropped). */
int kiwi_nflog_read (kiwi_nflog *l, kiwi_error_t *err);

/* The group bound, and the times the kernel reported lost packets. */
uint16_t kiwi_nflog_group (const kiwi_nflog *l);
uint64_t kiwi_nflog_dropped (const kiwi_nflog *l);

/* Unbinds and frees (NULL: nothing). */
void kiwi_nflog_close (kiwi_nflog *l);

#endif
