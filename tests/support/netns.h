/*
 * netns.h: network namespaces for tests that must send packets to addresses
 * such as 169.254.169.254 without any packet leaving the machine.
 *
 * kiwi_netns_create() makes a namespace joined to the host by a veth pair
 * (a /30 link in 198.18.0.0/15, the benchmarking range). Addresses added with
 * kiwi_netns_add_address() live on the namespace's lo and are routed from the
 * host (/32) into the veth, so a container on a Docker bridge that sends to
 * one of them reaches the namespace through the host's FORWARD chain, exactly
 * the path a packet to the real metadata server would take. The namespace
 * itself has no default route: it can answer its peers and reach nothing
 * else.
 *
 * The rule: call kiwi_netns_route_check() for every such address before
 * sending anything to it (from the host, and from the container's address on
 * its bridge), and stop the test if it fails.
 *
 * Fake services (kiwi_netns_serve_http, kiwi_netns_serve_dns) are forked
 * children that enter the namespace; they count what they serve
 * (kiwi_netns_hits), so a test can prove that nothing arrived.
 *
 * Everything runs as root and uses `ip` (iproute2) for set-up. While any
 * namespace of this process exists, the process holds flock(KIWI_NETNS_LOCK)
 * (also taken by tests/ops/egress/test_egress.sh), so two tests that route
 * the same address never overlap. kiwi_netns_destroy() undoes everything and
 * is safe on a half-created namespace; namespaces still alive at exit() are
 * destroyed by an atexit handler. Not thread-safe: one thread per process.
 *
 * Example (the hostile suite's "Phase A cannot reach the metadata server"):
 *
 *     struct kiwi_netns ns;
 *     if (kiwi_netns_create (&ns, "meta") != 0) fail_msg ("%s", ns.err);
 *     assert_int_equal (kiwi_netns_add_address (&ns, "169.254.169.254"), 0);
 *     assert_int_equal (kiwi_netns_serve_http (&ns, "169.254.169.254", 80, "token=FAKE\n"), 0);
 *     ...start the container, learn its address CIP on bridge kiwi-install0...
 *     if (kiwi_netns_route_check (&ns, "169.254.169.254", CIP, "kiwi-install0") != 0)
 *         fail_msg ("route safety: %s", ns.err);      // nothing sent
 *     ...curl from the container; assert it failed...
 *     assert_int_equal (kiwi_netns_hits (&ns), 0);
 *     kiwi_netns_destroy (&ns);
 */
#ifndef KIWI_TESTS_NETNS_H
#define KIWI_TESTS_NETNS_H

#include <stddef.h>
#include <sys/types.h>

#define KIWI_NETNS_LOCK "/run/kiwi-netns.lock"
#define KIWI_NETNS_MAX_ADDRS 8
#define KIWI_NETNS_MAX_PIDS 16

struct kiwi_netns {
    char name[64];      /* `ip netns` name: kiwi-<tag>-<pid>-<n> */
    char veth_host[16]; /* host end of the veth pair */
    char veth_ns[16];   /* namespace end */
    char host_addr[16]; /* host end's address on the /30 link */
    char ns_addr[16];   /* namespace end's address; the host routes go via it */
    char addrs[KIWI_NETNS_MAX_ADDRS][16]; /* added with kiwi_netns_add_address */
    int n_addrs;
    int n_routes; /* how many of addrs have a host route (for cleanup) */
    pid_t pids[KIWI_NETNS_MAX_PIDS]; /* spawned children, killed by destroy */
    int n_pids;
    long *hits; /* shared with the fake services */
    int state;  /* internal: what exists, for destroy */
    char err[512];
};

/* Creates the namespace, the veth pair and the link addresses; takes the
 * lock (waits up to 15 minutes). 0, or -1 with ns->err (everything already
 * made is undone). `tag`: a few letters, [a-z0-9]. */
int kiwi_netns_create (struct kiwi_netns *ns, const char *tag);

/* Puts addr (IPv4) on the namespace's lo and adds the host route addr/32
 * via the veth. Refuses, -1, if addr is already an address of the host or
 * the host already has a route for exactly addr/32 (someone else's). Ends
 * with kiwi_netns_route_check(ns, addr, NULL, NULL). */
int kiwi_netns_add_address (struct kiwi_netns *ns, const char *addr);

/* The route-safety check. 0 iff `ip route get addr` on the host, and, when
 * from/iif are given (a container's address and its bridge, e.g.
 * "172.18.0.2", "kiwi-install0"), `ip route get addr from FROM iif IIF`, both
 * leave through ns->veth_host. Otherwise -1 with the routes in ns->err. */
int kiwi_netns_route_check (struct kiwi_netns *ns, const char *addr, const char *from, const char *iif);

/* Runs argv (execvp) inside the namespace and waits. Captures stdout and
 * stderr into out (NUL-terminated, truncated to cap-1) when out is not NULL.
 * Returns the exit status, 128+signal, or -1. */
int kiwi_netns_run (struct kiwi_netns *ns, char *const argv[], char *out, size_t cap);

/* Starts argv inside the namespace in the background; destroy kills it.
 * Returns its pid, or -1. */
pid_t kiwi_netns_spawn (struct kiwi_netns *ns, char *const argv[]);

/* A fake HTTP server on addr:port inside the namespace (addr must be one of
 * its addresses): every request gets "200 OK" with `body`. Plain TCP, also
 * on 443: a TLS client then fails its handshake, which still proves the
 * connection was made. Returns once it listens; 0 or -1. */
int kiwi_netns_serve_http (struct kiwi_netns *ns, const char *addr, int port, const char *body);

/* A DNS responder on addr:port (UDP and TCP): A queries are answered with
 * `answer` (IPv4), anything else with an empty NOERROR. 0 or -1. */
int kiwi_netns_serve_dns (struct kiwi_netns *ns, const char *addr, int port, const char *answer);

/* HTTP requests and DNS queries served so far by this namespace's fakes. */
long kiwi_netns_hits (const struct kiwi_netns *ns);

/* Kills the children, deletes the host routes, the veth pair and the
 * namespace, releases the lock when no namespace of this process is left.
 * Idempotent. */
void kiwi_netns_destroy (struct kiwi_netns *ns);

#endif
