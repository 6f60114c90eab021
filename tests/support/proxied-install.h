/*
 * proxied-install.h: Phase A as production runs it, for the integration
 * tests that run installs themselves (the corpus): through the worker's
 * own egress proxy (Squid, as `kiwi-worker --once` starts it), on an
 * install network that reaches nothing else.
 *
 * The test leases an install bridge as a worker does (install-bridge.h),
 * makes its install network an internal Docker network (no route out of
 * the bridge: the host's egress rules are never touched, and a client that
 * ignores the proxy settings fails as it does behind those rules), starts
 * the proxy on the bridge's gateway with the default allow-list
 * (KIWI_INSTALL_EGRESS=registries) and hands Phase A the proxy settings and
 * the CA bundle a worker hands it (the registries' TLS is the proxy's, with
 * Kiwi's CA: private-registry.h). Library kiwi_test_proxied_install (links
 * kiwi_worker_lib).
 */
#ifndef KIWI_TESTS_PROXIED_INSTALL_H
#define KIWI_TESTS_PROXIED_INSTALL_H

#include <sys/types.h>

#include "common/strv.h"
#include "sandbox/sandbox.h"

typedef struct kiwi_test_proxied {
    char bridge[32];       /* the leased install bridge */
    int lock;              /* its lease */
    pid_t proxy;           /* the proxy's process (group) */
    char proxy_dir[512];   /* its directory: configuration, log */
    kiwi_strv proxy_env;   /* Phase A's proxy settings ("K=V") */
    char ca_bundle[512];   /* Phase A's CA bundle: KIWI_CA_BUNDLE (or the system's) and Kiwi's CA */
    kiwi_sandbox_env *env; /* driver `name` with Phase A on the bridge */
} kiwi_test_proxied;

/* Sets it all up for driver `name` as worker "`worker_id`-<pid>"; fails the
 * test (cmocka) on any error, naming the step. */
void kiwi_test_proxied_open (kiwi_test_proxied *p, const char *name, const char *worker_id);

/* Stops the proxy, removes the network and its directory, closes the
 * environment and releases the lease. */
void kiwi_test_proxied_close (kiwi_test_proxied *p);

/* The proxy's access log: what Phase A asked of it. */
const char *kiwi_test_proxied_log (const kiwi_test_proxied *p, char *buf, size_t cap);

#endif
