/*
 * private-registry.h: the operator's private registries, whose credentials
 * the egress proxy alone holds (ops/egress/README.md, "Bumping").
 *
 * KIWI_PRIVATE_REGISTRIES lists them, each HOST[/PREFIX]=@FILE, comma- or
 * space-separated: FILE holds the Authorization value Squid adds to reads
 * of HOST under PREFIX. With one declared, the worker runs `proxy.sh conf`
 * with one --private-registry per entry (the file's path only: proxy.sh
 * reads it) beside --bump-ca KIWI_EGRESS_CA_DIR (given in any case: the
 * public registries are bumped too, kiwi_proxy_conf_argv), Phase A trusts
 * Kiwi's CA (kiwi_egress_phase_ca_bundle) and the install cache key names
 * each registry and its scope (kiwi_private_registries_key_env).
 *
 * The worker reads a credential file for one thing only: its scope hash,
 * SHA-256 over "kiwi-private-registry-scope-v1\n" and the file's bytes. It
 * is a one-way identity of the scope, never the secret: two tenants with
 * different credentials never share a snapshot, and the same credential on
 * any host of the fleet gives the same key. No credential is put in an
 * environment, argv, event or log; an error names the spec and the file's
 * path, never its content.
 *
 * Ownership: kiwi_private_registries owns its strings
 * (kiwi_private_registries_clear).
 */
#ifndef KIWI_WORKER_EGRESS_PRIVATE_REGISTRY_H
#define KIWI_WORKER_EGRESS_PRIVATE_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"
#include "common/strv.h"
#include "worker/config.h"

typedef struct kiwi_private_registry {
    char *spec;   /* as given: HOST[/PREFIX]=@FILE */
    char *host;   /* lower case */
    char *prefix; /* "" or "/seg/seg" */
    char *file;   /* an absolute path */
} kiwi_private_registry;

typedef struct kiwi_private_registries {
    kiwi_private_registry *v;
    size_t n;
} kiwi_private_registries;

/* The label the scope hash starts with. */
#define KIWI_PRIVATE_SCOPE_LABEL "kiwi-private-registry-scope-v1\n"

/* Parses KIWI_PRIVATE_REGISTRIES (NULL or empty: none). An error names the
 * setting and the spec it refused: not HOST[/PREFIX]=@FILE, a host that is
 * not one name, a path with dot segments or other bytes than letters,
 * digits and ._~@+-, a relative or unreadable file, two paths of one host
 * that overlap. */
int kiwi_private_registries_parse (const char *value, kiwi_private_registries *out, kiwi_error_t *err);
void kiwi_private_registries_clear (kiwi_private_registries *r);

/* KIWI_PRIVATE_REGISTRIES checked when the worker starts: it parses, and
 * with a registry declared Phase A is behind the egress proxy
 * (kiwi_install_egress_proxied); KIWI_PRIVATE_REGISTRY_CA and
 * KIWI_EGRESS_HOSTS_FILE, when set, are absolute paths to readable files.
 * An error names the setting and the spec or path. */
int kiwi_private_registries_check (const kiwi_worker_config *cfg, kiwi_error_t *err);

/* The scope hash of a credential file as 64 hex digits (see above). */
int kiwi_private_registry_scope (const char *file, char hex[65], kiwi_error_t *err);

/* Appends "kiwi-private-registry=HOST[/PREFIX] scope-sha256=HEX" per
 * registry to *out (part of the install cache key's kiwi-env); nothing
 * when none is declared. */
int kiwi_private_registries_key_env (const kiwi_private_registries *r, kiwi_strv *out, kiwi_error_t *err);

/* Private Go modules: KIWI_GO_PROXY and KIWI_GO_NOSUMDB, Phase A's GOPROXY
 * and GONOSUMDB behind the egress proxy (a private GOPROXY is a private
 * registry like any other: declared in KIWI_PRIVATE_REGISTRIES, its
 * credential added by the proxy, never in the URL).
 * Checked when the worker starts: GOPROXY entries are `direct`, `off` or
 * https URLs with no userinfo, query or fragment, whose host is one Phase A
 * may reach (a declared private registry, or a host of KIWI_INSTALL_EGRESS)
 * and is behind the proxy; GONOSUMDB is patterns of letters, digits and
 * ._~ / * ? - [ ] separated by commas. An error names the setting and the entry. */
int kiwi_go_private_check (const kiwi_worker_config *cfg, kiwi_error_t *err);

/* Appends GOPROXY=... and GONOSUMDB=... (those set) to Phase A's
 * environment *env. */
int kiwi_go_private_env (const kiwi_worker_config *cfg, kiwi_strv *env, kiwi_error_t *err);

/* Appends "kiwi-go-proxy=..." and "kiwi-go-nosumdb=..." (those set) to the
 * install cache key's kiwi-env: another module source is another install. */
int kiwi_go_private_key_env (const kiwi_worker_config *cfg, kiwi_strv *out, kiwi_error_t *err);

/* KIWI_PRIVATE_REGISTRY_PLACEHOLDERS: each name (a variable name, not
 * KIWI_*) as NAME=KIWI_REGISTRY_PLACEHOLDER into *env (every phase's
 * environment); checked at start by kiwi_go_private_check (which also
 * wants Phase A behind the proxy for them). */
#define KIWI_REGISTRY_PLACEHOLDER "kiwi-placeholder-the-egress-proxy-adds-the-credential"
int kiwi_registry_placeholders_env (const kiwi_worker_config *cfg, kiwi_strv *env, kiwi_error_t *err);

/* Kiwi's CA directory: KIWI_EGRESS_CA_DIR, else <state dir>/egress-ca. */
int kiwi_egress_ca_dir (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err);

/* The CA bundle Phase A gets. Behind the egress proxy (`proxied`), which
 * terminates TLS for the registries with Kiwi's CA: a bundle the worker
 * writes atomically at <state dir>/egress-ca-bundle/<worker id>.pem (into
 * buf), the operator's bundle (KIWI_CA_BUNDLE, else the system's) and then
 * the CA directory's ca.pem (never ca.key). Not behind it: cfg->ca_bundle
 * (NULL: none) as it is, or an error when a private registry is declared.
 * *bundle points to cfg's or to buf. */
int kiwi_egress_phase_ca_bundle (const kiwi_worker_config *cfg, bool proxied, char *buf, size_t cap,
                                 const char **bundle, kiwi_error_t *err);

/* The system's CA bundle, appended to Kiwi's CA when KIWI_CA_BUNDLE is
 * unset. */
#define KIWI_SYSTEM_CA_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

#endif
