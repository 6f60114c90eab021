/*
 * egress-proxy.h: Phase A's egress proxy as the worker runs it.
 *
 * KIWI_INSTALL_EGRESS says what Phase A may reach:
 *   registries   the default: the package registries of every ecosystem
 *                Kiwi installs (ops/egress/proxy.sh hosts), through the
 *                worker's Squid (`kiwi-worker --once` starts its own for
 *                the run)
 *   open         the whole internet, no proxy (the spec's minimum)
 *   a list       comma- or space-separated host names ("registries" may be
 *                one of them, ".example.org" = a domain and its
 *                subdomains): only those, through the proxy
 *
 * With a proxy, the worker writes Squid's configuration with
 * `ops/egress/proxy.sh conf` (listening on the install bridge's gateway,
 * KIWI_INSTALL_PROXY_PORTS E,H,S), runs `proxy.sh run` as its child (both
 * with an environment of PATH and LANG only: no worker secret reaches the
 * process Phase A talks to),
 * restarts it when it dies, gives Phase A HTTP_PROXY and friends and a CA
 * bundle with Kiwi's CA (Squid terminates the registries' TLS: Phase A may
 * only read, GET and HEAD, from every registry), and
 * passes `--proxy E,H,S` to egress.sh apply/check, which redirects the
 * bridge's 80/443 to Squid and rejects everything else (DNS included).
 *
 * Squid's access log (DIR/access.log; fields in ops/egress/README.md) is
 * parsed line by line with kiwi_proxy_log_parse().
 */
#ifndef KIWI_WORKER_EGRESS_PROXY_H
#define KIWI_WORKER_EGRESS_PROXY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "worker/config.h"
#include "worker/egress/nflog.h"
#include "common/error.h"
#include "common/strv.h"

/* KIWI_INSTALL_EGRESS, parsed. `hosts` holds the operator's names;
 * `registries` whether the ecosystems' registries are allowed. Owns its
 * strings: kiwi_install_egress_clear(). */
typedef struct kiwi_install_egress {
    bool open;
    bool registries;
    kiwi_strv hosts;
} kiwi_install_egress;

/* A host name: labels of letters, digits and inner hyphens, the last one
 * not all digits (that is an address, which the proxy never matches); a
 * leading "." (a domain) is accepted. */
bool kiwi_proxy_valid_host (const char *h);

/* Parses `value` (NULL or empty = "registries"). An error names the
 * setting and the entry it refused ("open" mixed with hosts; a name that
 * is not a host name). */
int kiwi_install_egress_parse (const char *value, kiwi_install_egress *out, kiwi_error_t *err);
void kiwi_install_egress_clear (kiwi_install_egress *e);

/* Whether cfg's KIWI_INSTALL_EGRESS puts Phase A behind the egress proxy
 * (anything but open, under the docker and gvisor drivers: the Firecracker
 * driver's Phase A has a bridge of its own) into *proxied; -1 with *err
 * when it does not parse. */
int kiwi_install_egress_proxied (const kiwi_worker_config *cfg, bool *proxied, kiwi_error_t *err);

/* KIWI_INSTALL_PROXY_PORTS "E,H,S" into three distinct ports. */
int kiwi_proxy_ports_parse (const char *value, int ports[3], kiwi_error_t *err);

/* What a proxy for cfg would run with: *on false when Phase A is not behind
 * it (kiwi_install_egress_proxied; nothing else set); otherwise *e parsed
 * (the caller clears it) and the three ports. -1 with *err (nothing to
 * clear) when either setting does not parse. */
int kiwi_proxy_setting (const kiwi_worker_config *cfg, bool *on, kiwi_install_egress *e, int ports[3],
                        kiwi_error_t *err);

/* The IPv4 address of interface `bridge` (the install bridge's gateway)
 * into addr (INET_ADDRSTRLEN). An error when it has none or is missing. */
int kiwi_proxy_gateway (const char *bridge, char *addr, size_t cap, kiwi_error_t *err);

/* This worker's install bridge: KIWI_INSTALL_BRIDGE, or KIWI_INSTALL_BRIDGE
 * (sandbox.h) when unset (the daemon sets it: install-bridge.h). */
const char *kiwi_proxy_bridge (const kiwi_worker_config *cfg);

/* Opens the netlink log group of this worker's install bridge: what the
 * egress rules reject from it (nflog.h), group KIWI_EGRESS_NFLOG_GROUP plus
 * the bridge's number, as egress.sh --nflog-group numbers them. */
int kiwi_proxy_nflog_open (const kiwi_worker_config *cfg, kiwi_nflog_cb cb, void *userdata, kiwi_nflog **out,
                           kiwi_error_t *err);

/* The proxy settings Phase A gets ("K=V", appended to *env) for a proxy at
 * http://GATEWAY:PORT: HTTP(S)_PROXY in both cases, npm's, and the JVM's
 * (Maven and Gradle read no environment variable); NO_PROXY empty. */
int kiwi_proxy_env (const char *gateway, int port, kiwi_strv *env, kiwi_error_t *err);

/* Phase A's proxy settings for this worker's configuration: *on false
 * (and nothing added) with KIWI_INSTALL_EGRESS=open; otherwise the
 * kiwi_proxy_env() of the install bridge's gateway and the explicit port.
 * An error names the setting or the missing bridge. */
int kiwi_proxy_phase_env (const kiwi_worker_config *cfg, kiwi_strv *env, bool *on, kiwi_error_t *err);

/* The proxy's directory under the worker's state dir ("<state>/egress-proxy/<worker id>"). */
int kiwi_proxy_dir (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err);
/* Its access log, "<proxy dir>/access.log". */
int kiwi_proxy_log_path (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err);

/* The fetch digest's log, "<proxy dir>/fetch.log" (fetch-digest.h). */
int kiwi_proxy_fetch_log_path (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err);

/* `proxy.sh conf`'s argv for cfg (appended to *conf): --dir, --listen
 * gateway, --ports, --ecosystem all with registries, an --allow per host,
 * --bump-ca (kiwi_egress_ca_dir: the proxy is read-only), with registries
 * --bump-registries (Squid terminates their TLS, so it sees and refuses a
 * write to any of them), and a --private-registry per
 * KIWI_PRIVATE_REGISTRIES spec (the credential file's path, never its
 * content). An error names a spec KIWI_PRIVATE_REGISTRIES refuses. */
int kiwi_proxy_conf_argv (const kiwi_worker_config *cfg, const kiwi_install_egress *e, const char *dir,
                          const char *gateway, kiwi_strv *conf, kiwi_error_t *err);

/* Finds the gateway of this worker's install bridge (kiwi_proxy_bridge)
 * into `gateway` (INET_ADDRSTRLEN), writes the configuration (proxy.sh
 * conf) in `dir` for it and starts `proxy.sh run` as a child of this
 * process in its own process group; *pid receives it, and the start is
 * logged. The caller reaps it (ev_child) and calls this again to restart. */
int kiwi_proxy_start (const kiwi_worker_config *cfg, const kiwi_install_egress *e, const char *dir, char *gateway,
                      pid_t *pid, kiwi_error_t *err);

/* Stops a proxy kiwi_proxy_start() started: SIGTERM to its process group,
 * SIGKILL after 5 s; reaps it. Nothing for pid <= 0. */
void kiwi_proxy_stop (pid_t pid);

/* `kiwi-worker --once`, where no daemon runs the proxy: the configuration
 * written and Squid started (kiwi_proxy_start) on the gateway of this
 * worker's install bridge, and waited for until its explicit port accepts
 * a connection (at most 30 s). *pid receives it, 0 with
 * KIWI_INSTALL_EGRESS=open (nothing started). No restarts: the caller
 * stops it with kiwi_proxy_stop() when the run ends. An error names the
 * setting and, when Squid exited, its status and its log. */
int kiwi_proxy_start_once (const kiwi_worker_config *cfg, pid_t *pid, kiwi_error_t *err);

/* Whether this worker's egress proxy can carry Phase A now: the Squid
 * that <proxy dir>/squid.pid names runs this worker's configuration (not
 * a zombie, not stopped) and accepts connections on its explicit port on
 * the install bridge's gateway. 0 with its pid in *pid, or -1 with *err
 * saying what is missing (a dead or absent proxy is Kiwi's fault, never a
 * repository's: pipeline-install.c). */
int kiwi_proxy_alive (const kiwi_worker_config *cfg, pid_t *pid, kiwi_error_t *err);

/* One line of the access log. Strings point into the caller's buffer
 * (kiwi_proxy_log_parse writes NULs into it); "-" fields are NULL. Squid
 * %-encodes every field a client chooses (method, SNI, URL): the parser
 * decodes printable bytes and leaves the others escaped, so no string
 * holds a space or a control byte, and a line is one request however its
 * SNI or URL was made. */
typedef struct kiwi_proxy_log_entry {
    double time;          /* when the request began (Squid's %tS), seconds since the epoch */
    const char *client;   /* the sandbox's address */
    int local_port;       /* the explicit proxy's port, or 80/443 for a redirected connection */
    const char *squid_status; /* TCP_MISS, TCP_TUNNEL, TCP_DENIED, NONE_NONE, ... */
    int http_status;
    const char *method;
    const char *sni;
    const char *url;      /* http://host/path, host:443 (CONNECT), ADDR:443 (intercepted TLS) */
    int64_t bytes_in, bytes_out;
    const char *server;   /* the address Squid connected to */
    const char *bump;     /* peek, splice, terminate */
    bool redirected;      /* caught by the nat rules (a client that ignored the proxy settings) */
    char host[256];       /* the host the request was for (SNI, URL host, CONNECT target) */
    int port;             /* its port */
} kiwi_proxy_log_entry;

/* Parses one line (modified in place): the twelve fields of
 * ops/egress/README.md and an optional thirteenth, "redirected" or "-".
 * -1 when it is not one. */
int kiwi_proxy_log_parse (char *line, kiwi_proxy_log_entry *e);

/* The rule of a write refused by a read-only proxy. */
#define KIWI_PROXY_RULE_METHOD "method not allowed: Phase A may only read"
/* the rule of a host that is not on the list */
#define KIWI_PROXY_RULE_HOST "host not allowed"

/* Whether `method` is anything but GET, HEAD or CONNECT (what a read-only
 * proxy refuses on every request it sees). */
bool kiwi_proxy_log_write_method (const char *method);

/* Whether the entry is a denied attempt; *rule (when non-NULL) names the
 * rule that denied it: "host not allowed", "Host does not match the
 * address", "TLS SNI not allowed", "TLS without SNI", and a write
 * method's denial is KIWI_PROXY_RULE_METHOD, whatever its host (the proxy
 * is read-only: Squid refuses those methods first). */
bool kiwi_proxy_log_denied (const kiwi_proxy_log_entry *e, const char **rule);

#endif
