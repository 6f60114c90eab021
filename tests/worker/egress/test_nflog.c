/*
 * test_nflog.c: the packets the egress rules log (worker/egress/nflog.h) read from
 * their bytes, hostile ones included, and the `egress_denied` payload they
 * become.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka after the standard headers it needs */
#include <cmocka.h>

#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "worker/egress/nflog.h"

/* An IPv4 header (20 bytes) from 172.30.0.2 to 198.18.7.200, protocol
 * `proto`, then `l4` (len bytes) into buf; returns the length. */
static size_t
ipv4 (uint8_t *buf, uint8_t proto, const uint8_t *l4, size_t len)
{
    memset (buf, 0, 20);
    buf[0] = 0x45;
    buf[9] = proto;
    inet_pton (AF_INET, "172.30.0.2", buf + 12);
    inet_pton (AF_INET, "198.18.7.200", buf + 16);
    memcpy (buf + 20, l4, len);
    return 20 + len;
}

/* A UDP header to port `port` followed by a DNS query for the labels
 * given (NULL-terminated), into l4; returns the length. */
static size_t
dns_query (uint8_t *l4, uint16_t port, const char *const *labels)
{
    memset (l4, 0, 20);
    l4[0] = 0x9c, l4[1] = 0x40; /* source port */
    l4[2] = (uint8_t) (port >> 8), l4[3] = (uint8_t) port;
    uint8_t *m = l4 + 8;
    m[0] = 0x12, m[1] = 0x34, m[2] = 0x01; /* id, RD */
    m[5] = 1;                             /* QDCOUNT */
    size_t o = 12;
    for (const char *const *l = labels; *l; l++) {
        size_t n = strlen (*l);
        m[o++] = (uint8_t) n;
        memcpy (m + o, *l, n);
        o += n;
    }
    m[o++] = 0;
    m[o++] = 0, m[o++] = 1, m[o++] = 0, m[o++] = 1; /* A, IN */
    return 8 + o;
}

static kiwi_nflog_packet
parsed (int family, const uint8_t *b, size_t len, int want_rc)
{
    kiwi_nflog_packet p = { .rule = "only through the egress proxy", .at_ms = 1796393216422 };
    assert_int_equal (kiwi_nflog_parse (family, b, len, &p), want_rc);
    return p;
}

static void
test_udp (void **state)
{
    (void) state;
    uint8_t l4[8] = { 0x9c, 0x40, 0x27, 0x0f }, b[64];
    size_t n = ipv4 (b, 17, l4, sizeof l4);
    kiwi_nflog_packet p = parsed (AF_INET, b, n, 0);
    assert_string_equal (p.src, "172.30.0.2");
    assert_string_equal (p.dst, "198.18.7.200");
    assert_string_equal (p.protocol, "udp");
    assert_int_equal (p.port, 9999);
    assert_string_equal (p.qname, "");
    /* what the caller set is kept */
    assert_string_equal (p.rule, "only through the egress proxy");
    assert_int_equal (p.at_ms, 1796393216422);
}

static void
test_tcp_and_icmp (void **state)
{
    (void) state;
    uint8_t l4[20] = { 0x9c, 0x40, 0x1f, 0x90, [13] = 0x02 }, b[64];
    kiwi_nflog_packet p = parsed (AF_INET, b, ipv4 (b, 6, l4, sizeof l4), 0);
    assert_string_equal (p.protocol, "tcp");
    assert_int_equal (p.port, 8080);
    uint8_t icmp[8] = { 8 };
    p = parsed (AF_INET, b, ipv4 (b, 1, icmp, sizeof icmp), 0);
    assert_string_equal (p.protocol, "icmp");
    assert_int_equal (p.port, -1);
    /* another protocol: its addresses, no port */
    p = parsed (AF_INET, b, ipv4 (b, 47, icmp, sizeof icmp), 0);
    assert_string_equal (p.protocol, "ip");
    assert_int_equal (p.port, -1);
    assert_string_equal (p.dst, "198.18.7.200");
}

static void
test_dns_name (void **state)
{
    (void) state;
    uint8_t l4[300], b[400];
    const char *labels[] = { "leak-c2VjcmV0", "kiwi", "test", NULL };
    kiwi_nflog_packet p = parsed (AF_INET, b, ipv4 (b, 17, l4, dns_query (l4, 53, labels)), 0);
    assert_string_equal (p.protocol, "dns");
    assert_int_equal (p.port, 53);
    assert_string_equal (p.qname, "leak-c2VjcmV0.kiwi.test");
    json_t *j = kiwi_nflog_denial_json (&p);
    assert_non_null (j);
    assert_string_equal (json_string_value (json_object_get (j, "host")), "leak-c2VjcmV0.kiwi.test");
    assert_string_equal (json_string_value (json_object_get (j, "address")), "198.18.7.200");
    assert_int_equal (json_integer_value (json_object_get (j, "port")), 53);
    assert_true (json_is_null (json_object_get (j, "sni")));
    assert_string_equal (json_string_value (json_object_get (j, "protocol")), "dns");
    assert_string_equal (json_string_value (json_object_get (j, "via")), "firewall");
    assert_string_equal (json_string_value (json_object_get (j, "rule")), "only through the egress proxy");
    assert_string_equal (json_string_value (json_object_get (j, "allow_with")), "KIWI_INSTALL_EGRESS=open");
    assert_int_equal (json_integer_value (json_object_get (j, "attempted_at")), 1796393216422);
    json_decref (j);
    /* TCP to 53 is DNS too, with no name (a SYN carries none) */
    uint8_t syn[20] = { 0x9c, 0x40, 0, 53, [13] = 0x02 };
    p = parsed (AF_INET, b, ipv4 (b, 6, syn, sizeof syn), 0);
    assert_string_equal (p.protocol, "dns");
    assert_string_equal (p.qname, "");
    j = kiwi_nflog_denial_json (&p);
    assert_string_equal (json_string_value (json_object_get (j, "host")), "198.18.7.200");
    json_decref (j);
}

/* Names are what a sandbox wrote: bytes outside a host name's alphabet are
 * '?', a compression pointer or a label past the end is no name, and a
 * name longer than the buffer is cut, never overrun. */
static void
test_dns_hostile (void **state)
{
    (void) state;
    uint8_t l4[600], b[700];
    const char *odd[] = { "a\"b\\c\n\x01\xff", "x.y", NULL };
    kiwi_nflog_packet p = parsed (AF_INET, b, ipv4 (b, 17, l4, dns_query (l4, 53, odd)), 0);
    assert_string_equal (p.qname, "a?b?c???.x?y");
    const char *one[] = { "name", NULL };
    size_t n = dns_query (l4, 53, one);
    l4[8 + 12] = 0xc0; /* a pointer where a label belongs */
    p = parsed (AF_INET, b, ipv4 (b, 17, l4, n), 0);
    assert_string_equal (p.qname, "");
    n = dns_query (l4, 53, one);
    l4[8 + 12] = 60; /* a label longer than the message */
    p = parsed (AF_INET, b, ipv4 (b, 17, l4, n), 0);
    assert_string_equal (p.qname, "");
    /* no terminating label within the bytes given */
    n = dns_query (l4, 53, one);
    p = parsed (AF_INET, b, ipv4 (b, 17, l4, 8 + 12 + 3), 0);
    assert_string_equal (p.qname, "");
    /* 8 labels of 63: 511 bytes of name, cut to the buffer */
    char big[8][64];
    const char *many[9];
    for (int i = 0; i < 8; i++) {
        memset (big[i], 'q', 63);
        big[i][63] = '\0';
        many[i] = big[i];
    }
    many[8] = NULL;
    p = parsed (AF_INET, b, ipv4 (b, 17, l4, dns_query (l4, 53, many)), 0);
    assert_int_equal (strlen (p.qname), sizeof p.qname - 1);
    /* no question */
    n = dns_query (l4, 53, one);
    l4[8 + 5] = 0;
    p = parsed (AF_INET, b, ipv4 (b, 17, l4, n), 0);
    assert_string_equal (p.qname, "");
}

static void
test_short_and_wrong (void **state)
{
    (void) state;
    uint8_t l4[8] = { 0x9c, 0x40, 0x27, 0x0f }, b[64];
    size_t n = ipv4 (b, 17, l4, sizeof l4);
    parsed (AF_INET, b, 19, -1);    /* shorter than its header */
    parsed (AF_INET6, b, n, -1);    /* not the family the kernel said */
    parsed (AF_UNIX, b, n, -1);
    b[0] = 0x4f;                    /* a header longer than the packet */
    parsed (AF_INET, b, n, -1);
    b[0] = 0x44;                    /* shorter than the minimum */
    parsed (AF_INET, b, n, -1);
    b[0] = 0x45;
    kiwi_nflog_packet p = parsed (AF_INET, b, 22, 0); /* the UDP header cut: no port */
    assert_string_equal (p.protocol, "udp");
    assert_int_equal (p.port, -1);
    b[6] = 0x00, b[7] = 0x10; /* a later fragment: its first bytes are no header */
    p = parsed (AF_INET, b, n, 0);
    assert_int_equal (p.port, -1);
}

static void
test_ipv6 (void **state)
{
    (void) state;
    uint8_t b[128] = { 0x60 };
    b[6] = 17;
    inet_pton (AF_INET6, "fd00:7::2", b + 8);
    inet_pton (AF_INET6, "2001:db8::1", b + 24);
    b[40 + 2] = 0x27, b[40 + 3] = 0x0f;
    kiwi_nflog_packet p = parsed (AF_INET6, b, 48, 0);
    assert_string_equal (p.src, "fd00:7::2");
    assert_string_equal (p.dst, "2001:db8::1");
    assert_string_equal (p.protocol, "udp");
    assert_int_equal (p.port, 9999);
    /* behind a hop-by-hop header (8 bytes) */
    b[6] = 0;
    memmove (b + 48, b + 40, 8);
    memset (b + 40, 0, 8);
    b[40] = 17;
    p = parsed (AF_INET6, b, 56, 0);
    assert_string_equal (p.protocol, "udp");
    assert_int_equal (p.port, 9999);
    /* an extension header claiming more than the packet: addresses only */
    b[41] = 200;
    p = parsed (AF_INET6, b, 56, 0);
    assert_string_equal (p.protocol, "ip");
    assert_int_equal (p.port, -1);
    parsed (AF_INET6, b, 39, -1);
}

static void
test_rule (void **state)
{
    (void) state;
    assert_string_equal (kiwi_nflog_rule ("kiwi-egress forward"), "only through the egress proxy");
    assert_string_equal (kiwi_nflog_rule ("kiwi-egress host"), "no new connections to the host");
    assert_string_equal (kiwi_nflog_rule ("something else"), "rejected");
    assert_string_equal (kiwi_nflog_rule (NULL), "rejected");
}

int
main (void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test (test_udp),        cmocka_unit_test (test_tcp_and_icmp), cmocka_unit_test (test_dns_name),
        cmocka_unit_test (test_dns_hostile), cmocka_unit_test (test_short_and_wrong), cmocka_unit_test (test_ipv6),
        cmocka_unit_test (test_rule),
    };
    return cmocka_run_group_tests (tests, NULL, NULL);
}
