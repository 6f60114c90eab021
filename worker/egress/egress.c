/*
 * egress.c: the egress checks of the worker (see egress.h).
 */
#include "worker/egress/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/cleanup.h"
#include "common/defaults.h"
#include "common/log.h"
#include "worker/egress/egress-proxy.h"
#include "worker/egress/private-registry.h"
#include "worker/events.h"
#include "sandbox/phases.h"
#include "common/proc.h"
#include "common/strv.h"
#include "sandbox/sandbox.h"
#include "worker/shutdown.h"

extern char **environ;

bool
kiwi_egress_is_isolation_check (const char *name)
{
    return strcmp (name, "phase_b_isolated") == 0 || strcmp (name, "metadata_blocked") == 0
           || strcmp (name, "fleet_services_blocked") == 0 || strcmp (name, "install_denied_host") == 0
           || strcmp (name, "install_dns_closed") == 0;
}

/* ---------- the fleet's own services ---------- */

static bool
is_loopback (const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl (((const struct sockaddr_in *) sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *) sa)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK (a))
            return true;
        if (IN6_IS_ADDR_V4MAPPED (a))
            return a->s6_addr[12] == 127;
    }
    return false;
}

/* Adds every address `host` resolves to, with `port` (NULL: all ports), to
 * the lists: "ADDR[:PORT]" / "[ADDR6][:PORT]". */
static int
add_host (kiwi_egress_targets *t, const char *host, const char *port, const char *what, kiwi_error_t *err)
{
    struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *res = NULL;
    int rc = getaddrinfo (host, NULL, &hints, &res);
    if (rc != 0)
        return kiwi_error_make (err, 0, "%s: cannot resolve `%s`: %s", what, host, gai_strerror (rc));
    int added = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        char a[INET6_ADDRSTRLEN];
        const void *src = ai->ai_family == AF_INET ? (const void *) &((struct sockaddr_in *) ai->ai_addr)->sin_addr
                                                   : (const void *) &((struct sockaddr_in6 *) ai->ai_addr)->sin6_addr;
        if ((ai->ai_family != AF_INET && ai->ai_family != AF_INET6) || !inet_ntop (ai->ai_family, src, a, sizeof a))
            continue;
        char spec[INET6_ADDRSTRLEN + 16];
        bool v6 = ai->ai_family == AF_INET6;
        snprintf (spec, sizeof spec, "%s%s%s%s%s", v6 ? "[" : "", a, v6 ? "]" : "", port ? ":" : "", port ? port : "");
        added++;
        if (kiwi_strv_contains (&t->deny, spec) || kiwi_strv_contains (&t->probe, spec))
            continue;
        /* a container's loopback is its own: nothing there to close */
        if (!is_loopback (ai->ai_addr) && kiwi_strv_add (&t->deny, spec) < 0) {
            freeaddrinfo (res);
            return kiwi_error_make (err, ENOMEM, "%s", what);
        }
        if (port && kiwi_strv_add (&t->probe, spec) < 0) {
            freeaddrinfo (res);
            return kiwi_error_make (err, ENOMEM, "%s", what);
        }
    }
    freeaddrinfo (res);
    if (added == 0)
        return kiwi_error_make (err, 0, "%s: `%s` resolves to no IPv4 or IPv6 address", what, host);
    return 0;
}

/* One "HOST[:PORT]" / "[V6][:PORT]" / "V6" / "CIDR[:PORT]" entry. */
static int
add_entry (kiwi_egress_targets *t, const char *entry, bool port_required, const char *what, kiwi_error_t *err)
{
    char buf[512];
    snprintf (buf, sizeof buf, "%s", entry);
    char *host = buf, *port = NULL;
    char *scheme = strstr (buf, "://"); /* librdkafka's PLAINTEXT://host:port */
    if (scheme)
        host = scheme + 3;
    if (*host == '[') {
        char *close = strchr (host, ']');
        if (close == NULL)
            return kiwi_error_make (err, 0, "%s: `%s`: no closing ]", what, entry);
        *close = '\0';
        host++;
        if (close[1] == ':')
            port = close + 2;
        else if (close[1] != '\0')
            return kiwi_error_make (err, 0, "%s: `%s`: expected [ADDRESS]:PORT", what, entry);
    } else {
        char *colon = strrchr (host, ':');
        if (colon && strchr (host, ':') == colon) { /* one colon: host:port; more: a bare IPv6 address */
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (port) {
        char *end = NULL;
        long n = strtol (port, &end, 10);
        if (*port == '\0' || *end != '\0' || n < 1 || n > 65535)
            return kiwi_error_make (err, 0, "%s: `%s`: bad port", what, entry);
    } else if (port_required)
        return kiwi_error_make (err, 0, "%s: `%s`: expected HOST:PORT", what, entry);
    if (*host == '\0')
        return kiwi_error_make (err, 0, "%s: `%s`: no host", what, entry);
    if (strchr (host, '/')) { /* a CIDR: egress.sh checks it; no probe */
        bool v6 = strchr (host, ':') != NULL;
        char spec[600];
        snprintf (spec, sizeof spec, "%s%s%s%s%s", v6 ? "[" : "", host, v6 ? "]" : "", port ? ":" : "",
                  port ? port : "");
        for (const char *p = host; *p; p++)
            if (!strchr ("0123456789abcdefABCDEF.:/", *p))
                return kiwi_error_make (err, 0, "%s: `%s`: not a CIDR", what, entry);
        if (!kiwi_strv_contains (&t->deny, spec) && kiwi_strv_add (&t->deny, spec) < 0)
            return kiwi_error_make (err, ENOMEM, "%s", what);
        return 0;
    }
    return add_host (t, host, port, what, err);
}

int
kiwi_egress_targets_collect (const kiwi_worker_config *cfg, kiwi_egress_targets *t, kiwi_error_t *err)
{
    char port[16];
    snprintf (port, sizeof port, "%lld", (long long) cfg->redis_port);
    if (add_host (t, cfg->redis_host, port, "KIWI_REDIS_HOST", err) < 0)
        return -1;
    /* the snapshot store: Phase A must neither plant a snapshot there nor
     * read another key's */
    if (cfg->store_url != NULL && *cfg->store_url != '\0') {
        const char *url = cfg->store_url, *scheme = strstr (url, "://");
        const char *auth = scheme ? scheme + 3 : url;
        size_t n = strcspn (auth, "/?#");
        const char *at = memchr (auth, '@', n);
        if (at != NULL) {
            n -= (size_t) (at + 1 - auth);
            auth = at + 1;
        }
        const char *close = n > 0 && auth[0] == '[' ? memchr (auth, ']', n) : NULL;
        const char *colon = close ? (close + 1 < auth + n && close[1] == ':' ? close + 1 : NULL) : memchr (auth, ':', n);
        char entry[512];
        snprintf (entry, sizeof entry, "%.*s%s", (int) n, auth,
                  colon ? "" : strncmp (url, "https://", 8) == 0 ? ":443" : ":80");
        if (add_entry (t, entry, true, "KIWI_STORE_URL", err) < 0)
            return -1;
    }
    const char *lists[2] = { cfg->brokers, cfg->install_deny };
    const char *names[2] = { "KIWI_KAFKA_BROKERS", "KIWI_INSTALL_DENY" };
    for (int l = 0; l < 2; l++) {
        cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
        if (kiwi_strv_split_list (&items, lists[l], ", \t", err) < 0)
            return kiwi_error_wrap (err, "%s", names[l]);
        for (size_t i = 0; i < items.n; i++) {
            char entry[512];
            snprintf (entry, sizeof entry, "%s", items.v[i]);
            if (add_entry (t, entry, l == 0, names[l], err) < 0)
                return -1;
        }
    }
    return 0;
}

void
kiwi_egress_targets_clear (kiwi_egress_targets *t)
{
    kiwi_strv_free (&t->deny);
    kiwi_strv_free (&t->probe);
}

/* bash ops/egress/egress.sh COMMAND --deny A ... for this worker's services. */
static int
egress_argv (const kiwi_worker_config *cfg, const char *command, kiwi_strv *argv, kiwi_egress_targets *t,
             kiwi_error_t *err)
{
    char buf[PATH_MAX];
    const char *script = kiwi_worker_libexec (cfg->egress_script, "egress.sh", buf, sizeof buf);
    if (script == NULL)
        return kiwi_error_make (err, errno, "egress.sh %s: where kiwi-worker is installed cannot be read "
                                            "(set KIWI_EGRESS_SCRIPT)", command);
    if (kiwi_strv_add (argv, "bash") < 0 || kiwi_strv_add (argv, script) < 0 || kiwi_strv_add (argv, command) < 0)
        return kiwi_error_make (err, ENOMEM, "egress.sh %s", command);
    if (kiwi_egress_targets_collect (cfg, t, err) < 0)
        return -1;
    for (size_t i = 0; i < t->deny.n; i++)
        if (kiwi_strv_add (argv, "--deny") < 0 || kiwi_strv_add (argv, t->deny.v[i]) < 0)
            return kiwi_error_make (err, ENOMEM, "egress.sh %s", command);
    bool proxied;
    if (kiwi_install_egress_proxied (cfg, &proxied, err) < 0)
        return -1;
    /* every install bridge of the host (one per proxying worker,
     * install-bridge.h), since the rules are the host's and each worker
     * applies them whole */
    if (proxied
        && (kiwi_strv_add (argv, "--proxy") < 0 || kiwi_strv_add (argv, cfg->install_proxy_ports) < 0
            || kiwi_strv_add (argv, "--install-bridge") < 0
            || kiwi_strv_add (argv, KIWI_INSTALL_BRIDGE_PREFIX "+") < 0 || kiwi_strv_add (argv, "--nflog-group") < 0
            || kiwi_strv_addf (argv, "%lld", (long long) cfg->egress_nflog_group) < 0))
        return kiwi_error_make (err, ENOMEM, "egress.sh %s", command);
    return 0;
}

int
kiwi_egress_apply_rules (const kiwi_worker_config *cfg, kiwi_error_t *err)
{
    cleanup_strv kiwi_strv argv = KIWI_STRV_INIT;
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    int rc = egress_argv (cfg, "apply", &argv, &t, err);
    if (rc == 0)
        rc = kiwi_proc_check (kiwi_strv_list (&argv), NULL, NULL, 120000, err);
    kiwi_egress_targets_clear (&t);
    return rc;
}

void
kiwi_egress_apply_if_set (const kiwi_worker_config *cfg)
{
    if (!cfg->egress_apply)
        return;
    kiwi_error_t e = NULL;
    if (kiwi_egress_apply_rules (cfg, &e) < 0)
        kiwi_errorf ("applying the egress rules: %s (the egress checks will report it)", kiwi_error_msg (e));
    else
        kiwi_info ("egress rules applied");
    kiwi_error_free (&e);
}

static void
report (const char *name, bool ok, const char *detail)
{
    json_t *j = json_pack ("{s:s,s:b,s:s,s:I}", "name", name, "ok", ok, "detail", detail ? detail : "",
                           "checked_at", (json_int_t) kiwi_wall_ms ());
    char *s = json_dumps (j, JSON_COMPACT);
    printf ("%s\n", s);
    fflush (stdout);
    free (s);
    json_decref (j);
}

static const char *
probe_url (const kiwi_worker_config *cfg)
{
    const char *u = cfg->egress_probe_url;
    return u && *u ? u : KIWI_EGRESS_PROBE_URL_DEFAULT;
}

static const char *
check_image (const kiwi_worker_config *cfg)
{
    return cfg->egress_image && *cfg->egress_image ? cfg->egress_image : "kiwi/base:bookworm";
}

static void
trim (char *s)
{
    size_t l = s ? strlen (s) : 0;
    while (l && (s[l - 1] == '\n' || s[l - 1] == ' '))
        s[--l] = '\0';
}

/* One Phase B sandbox, sealed (the verify's runtime) or not (the
 * Implementer's), has only lo and reaches nothing. */
static bool
phase_b_one (kiwi_sandbox_env *env, const kiwi_worker_config *cfg, bool sealed, char *detail, size_t cap)
{
    char script[512];
    snprintf (script, sizeof script,
              "ifs=$(cut -d: -f1 /proc/net/dev | tail -n +3 | tr -d ' ' | tr '\\n' ' '); echo \"interfaces: $ifs\"; "
              "if command -v curl >/dev/null; then curl -sS -m 5 -o /dev/null %s 2>&1 && echo REACHED; fi; true",
              probe_url (cfg));
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_sandbox_spec spec = { .image = check_image (cfg),
                               .network = KIWI_NET_NONE, .task_id = "egress-check", .phase = "verify",
                               .limits = { .disk_mb = 64 }, .files_sealed = sealed };
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 60000, .output_cap = 2048 };
    kiwi_exec_result r;
    kiwi_error_t err = NULL;
    if (kiwi_sandbox_run_once (env, &spec, NULL, 0, &x, &r, &err) < 0) {
        snprintf (detail, cap, "could not run a Phase B sandbox: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return false;
    }
    trim (r.output);
    /* the first line is exactly "interfaces: lo" (trailing blank trimmed) */
    bool only_lo = r.output && strncmp (r.output, "interfaces: lo", 14) == 0
                   && (r.output[14] == '\0' || r.output[14] == '\n'
                       || (r.output[14] == ' ' && (r.output[15] == '\0' || r.output[15] == '\n')));
    bool reached = r.output && strstr (r.output, "REACHED") != NULL;
    bool ok = only_lo && !reached;
    snprintf (detail, cap, "%s%s", reached ? "a Phase B sandbox reached the network! " : "",
              r.output ? r.output : "");
    kiwi_exec_result_clear (&r);
    return ok;
}

/* Every runtime Phase B has: the Implementer's sandbox's, and the verify's
 * where the driver gives it one of its own (runsc-verify). */
static bool
phase_b (kiwi_sandbox_env *env, const kiwi_worker_config *cfg, char *detail, size_t cap)
{
    bool ok = phase_b_one (env, cfg, false, detail, cap);
    if (!ok || !kiwi_sandbox_seals_files (env))
        return ok;
    char sealed[1024];
    ok = phase_b_one (env, cfg, true, sealed, sizeof sealed);
    size_t l = strlen (detail);
    snprintf (detail + l, cap - l, "; the verify's runtime: %s", sealed);
    return ok;
}

/* Appends the n bytes of s to out[*len..cap), as far as they fit (out
 * stays terminated). */
static void
put (char *out, size_t cap, size_t *len, const char *s, size_t n)
{
    if (*len + 1 >= cap)
        return;
    if (n > cap - 1 - *len)
        n = cap - 1 - *len;
    memcpy (out + *len, s, n);
    *len += n;
    out[*len] = '\0';
}

/* Appends s as one shell word: as is when plain, else in single quotes. */
static void
sh_word (char *out, size_t cap, size_t *len, const char *s)
{
    bool plain = *s != '\0'
                 && strspn (s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./:,+=@%-") == strlen (s);
    if (!plain)
        put (out, cap, len, "'", 1);
    for (const char *c = s; *c; c++)
        if (!plain && *c == '\'')
            put (out, cap, len, "'\\''", 4);
        else
            put (out, cap, len, c, 1);
    if (!plain)
        put (out, cap, len, "'", 1);
}

/* "; fix: as root, run `bash .../egress.sh apply ...` (the apply whose
 * rules this worker checks), or start kiwi-worker with
 * KIWI_EGRESS_APPLY=true": a hint that works as printed. */
static void
fix_command (const kiwi_worker_config *cfg, char *out, size_t cap)
{
    cleanup_strv kiwi_strv argv = KIWI_STRV_INIT;
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    kiwi_error_t err = NULL;
    int rc = egress_argv (cfg, "apply", &argv, &t, &err);
    kiwi_egress_targets_clear (&t);
    if (rc < 0) {
        kiwi_error_free (&err);
        snprintf (out, cap, "; fix: start kiwi-worker with KIWI_EGRESS_APPLY=true");
        return;
    }
    char line[900];
    size_t len = 0;
    line[0] = '\0';
    for (size_t i = 0; i < argv.n; i++) {
        if (i)
            put (line, sizeof line, &len, " ", 1);
        sh_word (line, sizeof line, &len, argv.v[i]);
    }
    snprintf (out, cap, "; fix: as root, run `%s`, or start kiwi-worker with KIWI_EGRESS_APPLY=true", line);
}

static bool
metadata (const kiwi_worker_config *cfg, char *detail, size_t cap)
{
    cleanup_strv kiwi_strv argv = KIWI_STRV_INIT;
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    kiwi_proc_result r;
    kiwi_error_t err = NULL;
    int rc = egress_argv (cfg, "check", &argv, &t, &err);
    kiwi_egress_targets_clear (&t);
    if (rc < 0 || kiwi_proc_run (kiwi_strv_list (&argv), NULL, NULL, 60000, 2048, &r, &err) < 0) {
        snprintf (detail, cap, "cannot run egress.sh check: %s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        return false;
    }
    trim (r.output);
    bool ok = r.exit_code == 0;
    /* the fix first, so that a long check output cuts nothing of it */
    char fix[1024] = "";
    if (!ok)
        fix_command (cfg, fix, sizeof fix);
    snprintf (detail, cap, "%s (egress.sh check exit %d)%s%s%s%s", ok ? "rules in place" : "rules missing or changed",
              r.exit_code, fix, *fix ? "; " : "", r.output && *r.output ? "check says: " : "", r.output ? r.output : "");
    kiwi_proc_result_clear (&r);
    return ok;
}

bool
kiwi_egress_rules_hold (const kiwi_worker_config *cfg, char *detail, size_t cap)
{
    return metadata (cfg, detail, cap);
}

/* The fleet probe's part of the Phase A script: a TCP connection to each
 * target (numeric addresses only, from getaddrinfo), one line each:
 * "fleet ADDR:PORT blocked" or "fleet ADDR:PORT REACHED". */
static int
fleet_script (const kiwi_strv *probe, char *out, size_t cap)
{
    size_t l = 0;
    for (size_t i = 0; i < probe->n && l < cap; i++) {
        char host[INET6_ADDRSTRLEN + 2];
        const char *spec = probe->v[i], *colon = strrchr (spec, ':');
        snprintf (host, sizeof host, "%.*s", (int) (colon - spec), spec);
        if (host[0] == '[') { /* bash's /dev/tcp takes a bare IPv6 address */
            memmove (host, host + 1, strlen (host));
            host[strlen (host) - 1] = '\0';
        }
        int n = snprintf (out + l, cap - l,
                          "if timeout 5 bash -c 'exec 3<>/dev/tcp/%s/%s' 2>/dev/null; then echo 'fleet %s REACHED'; "
                          "else echo 'fleet %s blocked'; fi; ",
                          host, colon + 1, spec, spec);
        if (n < 0 || (size_t) n >= cap - l)
            return -1;
        l += (size_t) n;
    }
    return 0;
}

/* The fleet check's verdict from the probe's lines: every target blocked. */
static bool
fleet_verdict (const kiwi_strv *probe, const char *output, char *detail, size_t cap)
{
    size_t blocked = 0, l = 0;
    bool reached = false;
    detail[0] = '\0';
    for (size_t i = 0; i < probe->n; i++) {
        char b[600], r[600];
        snprintf (b, sizeof b, "fleet %s blocked", probe->v[i]);
        snprintf (r, sizeof r, "fleet %s REACHED", probe->v[i]);
        const char *what = "not probed";
        if (output && strstr (output, r)) {
            what = "REACHED from the install network!";
            reached = true;
        } else if (output && strstr (output, b)) {
            what = "unreachable";
            blocked++;
        }
        int n = snprintf (detail + l, cap - l, "%s%s %s", l ? "; " : "", probe->v[i], what);
        if (n > 0 && (size_t) n < cap - l)
            l += (size_t) n;
    }
    if (probe->n == 0)
        snprintf (detail, cap, "nothing to probe");
    return !reached && blocked == probe->n;
}

/* With the egress proxy: a host not on the list is refused by it (CONNECT
 * answered 403, or, since the proxy bumps TLS on that port, answered 200
 * and Squid's own 403, ERR_ACCESS_DENIED, inside the TLS it then makes
 * with Kiwi's CA: `$ca` is curl's --cacert; the name is under .invalid,
 * so nothing could ever answer it), and a name resolves nowhere in Phase
 * A: curl without the proxy exits
 * 6 ("could not resolve host": the resolver answered no) or 28 while still
 * resolving (Docker's embedded resolver, its upstream queries rejected by
 * the rules, answers nothing until curl gives up; a 28 after the name
 * resolved, connecting, is no pass). Lines "DENIED <code>" and "DNS rc=<n>"
 * or "DNS rc=28 (resolving timed out)". */
#define PROXY_PROBES                                                                                                \
    "h=$(curl -sS -m 10 $ca -D - -o /dev/null -w 'CONNECT %{http_connect}' https://denied.kiwi.invalid/ 2>/dev/null); " \
    "case $h in *'CONNECT 403'|*'X-Squid-Error: ERR_ACCESS_DENIED'*) echo 'DENIED 403' ;; "                         \
    "*) echo \"DENIED ${h##*CONNECT }\" ;; esac; "                                                                \
    "e=$(curl --noproxy '*' -sS -m 10 -o /dev/null http://registry.npmjs.org/ 2>&1); rc=$?; "                        \
    "case $e in *'Resolving timed out'*) rc=\"$rc (resolving timed out)\" ;; esac; echo \"DNS rc=$rc\"; "

/* The "DNS rc=..." line's verdict: no name resolved. */
static bool
dns_closed (const char *n)
{
    static const char *const closed[] = { "DNS rc=6", "DNS rc=28 (resolving timed out)" };
    for (size_t i = 0; n && i < sizeof closed / sizeof closed[0]; i++) {
        size_t l = strlen (closed[i]);
        if (strncmp (n, closed[i], l) == 0 && (n[l] == '\0' || n[l] == '\n'))
            return true;
    }
    return false;
}

typedef struct proxy_probe {
    bool ran, denied_ok, dns_ok;
    char denied[256], dns[256];
} proxy_probe;

static void
proxy_verdict (const char *output, proxy_probe *pp)
{
    pp->ran = true;
    const char *d = output ? strstr (output, "DENIED ") : NULL, *n = output ? strstr (output, "DNS rc=") : NULL;
    pp->denied_ok = d && strncmp (d, "DENIED 403", 10) == 0;
    pp->dns_ok = dns_closed (n);
    snprintf (pp->denied, sizeof pp->denied, "%s (a CONNECT to denied.kiwi.invalid:443 %s)",
              pp->denied_ok ? "refused by the proxy" : "NOT refused by the proxy",
              d ? (strncmp (d, "DENIED 000", 10) == 0 ? "got no answer" : "was answered") : "did not run");
    snprintf (pp->dns, sizeof pp->dns, "%s (curl without the proxy: %.*s)",
              pp->dns_ok ? "no name resolves in Phase A" : "a name RESOLVED in Phase A (DNS open)",
              n ? (int) strcspn (n, "\n") : 9, n ? n : "did not run");
}

static bool
phase_a (kiwi_sandbox_env *env, const kiwi_worker_config *cfg, char *detail, size_t cap, bool *fleet_ok,
         char *fleet_detail, size_t fleet_cap, proxy_probe *pp)
{
    *fleet_ok = false;
    kiwi_egress_targets t = { KIWI_STRV_INIT, KIWI_STRV_INIT };
    char fleet[4096] = "";
    kiwi_error_t terr = NULL;
    if (kiwi_egress_targets_collect (cfg, &t, &terr) < 0 || fleet_script (&t.probe, fleet, sizeof fleet) < 0) {
        snprintf (fleet_detail, fleet_cap, "%s", terr ? kiwi_error_msg (terr) : "too many addresses to probe");
        kiwi_error_free (&terr);
        fleet[0] = '\0';
    } else
        snprintf (fleet_detail, fleet_cap, "the Phase A sandbox did not run");
    kiwi_phase_config pc = { .host_env = (const char *const *) environ };
    kiwi_strv e = KIWI_STRV_INIT;
    cleanup_strv kiwi_strv proxy_env = KIWI_STRV_INIT;
    bool proxied = false;
    kiwi_error_t err = NULL;
    /* the CA bundle a task's Phase A gets: behind the proxy, with Kiwi's
     * CA (the registries' TLS is Squid's) */
    char phase_ca[PATH_MAX];
    int prc = kiwi_proxy_phase_env (cfg, &proxy_env, &proxied, &err);
    if (prc == 0)
        prc = kiwi_egress_phase_ca_bundle (cfg, proxied, phase_ca, sizeof phase_ca, &pc.ca_bundle, &err);
    pc.proxy_env = proxied ? kiwi_strv_list (&proxy_env) : NULL;
    if (prc < 0 || kiwi_phase_install_env (&pc, NULL, &e, &err) < 0) {
        snprintf (detail, cap, "%s", kiwi_error_msg (err));
        kiwi_error_free (&err);
        kiwi_strv_free (&e);
        kiwi_egress_targets_clear (&t);
        snprintf (fleet_detail, fleet_cap, "the Phase A sandbox did not run: %s", detail);
        return false;
    }
    char script[6144];
    snprintf (script, sizeof script,
              "ca='%s%s'; curl -sS -m 20 -o /dev/null -w 'HTTP %%{http_code}' $ca %s 2>&1; echo; %s%s",
              pc.ca_bundle ? "--cacert " : "", pc.ca_bundle ? KIWI_SANDBOX_CA_FILE : "", probe_url (cfg),
              proxied ? PROXY_PROBES : "", fleet);
    const char *argv[] = { "/bin/sh", "-c", script, NULL };
    kiwi_sandbox_spec spec = { .image = check_image (cfg),
                               .network = KIWI_NET_INSTALL, .env = kiwi_strv_list (&e), .task_id = "egress-check",
                               .phase = "install", .limits = { .disk_mb = 64 } };
    kiwi_sandbox *sb = NULL;
    bool ok = false;
    if (kiwi_sandbox_create (env, &spec, &sb, &err) < 0) {
        snprintf (detail, cap, "could not start a Phase A sandbox: %s", kiwi_error_msg (err));
        goto out;
    }
    if (pc.ca_bundle && kiwi_phase_put_ca_bundle (sb, pc.ca_bundle, &err) < 0) {
        snprintf (detail, cap, "%s", kiwi_error_msg (err));
        goto out;
    }
    kiwi_exec_spec x = { .argv = argv, .timeout_ms = 60000, .output_cap = 2048 };
    kiwi_exec_result r;
    if (kiwi_sandbox_exec (sb, &x, &r, &err) < 0) {
        snprintf (detail, cap, "%s", kiwi_error_msg (err));
        goto out;
    }
    trim (r.output);
    ok = r.exit_code == 0 && r.output && strncmp (r.output, "HTTP 2", 6) == 0;
    snprintf (detail, cap, "%s: %.*s", probe_url (cfg), r.output ? (int) strcspn (r.output, "\n") : 0,
              r.output ? r.output : "");
    if (fleet[0])
        *fleet_ok = fleet_verdict (&t.probe, r.output, fleet_detail, fleet_cap);
    if (proxied)
        proxy_verdict (r.output, pp);
    kiwi_exec_result_clear (&r);
out:
    kiwi_error_free (&err);
    if (sb) {
        kiwi_sandbox_destroy (sb, &err);
        kiwi_error_free (&err);
    }
    kiwi_strv_free (&e);
    kiwi_egress_targets_clear (&t);
    if (!*fleet_ok && strcmp (fleet_detail, "the Phase A sandbox did not run") == 0)
        snprintf (fleet_detail, fleet_cap, "the Phase A sandbox did not run: %s", detail);
    return ok;
}

static volatile int *stop_flag;

/* SIGTERM (the worker stopping, or gone: PR_SET_PDEATHSIG) cancels the
 * check in flight; its sandbox is still destroyed on the way out, and no
 * further check starts. A report to a worker that is gone fails quietly
 * (SIGPIPE ignored) rather than killing the process before the clean-up. */
static void
install_signals (void)
{
    stop_flag = kiwi_shutdown_catch ();
    signal (SIGPIPE, SIG_IGN);
    prctl (PR_SET_PDEATHSIG, SIGTERM);
}

int
kiwi_egress_check_main (const kiwi_worker_config *cfg)
{
    install_signals ();
    kiwi_error_t err = NULL;
    const kiwi_sandbox_driver *drv = kiwi_sandbox_driver_find (cfg->sandbox, &err);
    kiwi_sandbox_config sc = { .docker_socket = cfg->docker_socket, .state_dir = cfg->state_dir,
                               .worker_id = cfg->worker_id,
                               .install_bridge = cfg->install_bridge, .firecracker = &cfg->fc };
    kiwi_sandbox_env *env = NULL;
    char detail[2048];
    if (drv == NULL || kiwi_sandbox_env_open (drv, &sc, &env, &err) < 0) {
        snprintf (detail, sizeof detail, "sandbox driver: %s", kiwi_error_msg (err));
        report ("phase_b_isolated", false, detail);
        report ("phase_a_https", false, detail);
        report ("fleet_services_blocked", false, detail);
        bool m = metadata (cfg, detail, sizeof detail);
        report ("metadata_blocked", m, detail);
        kiwi_error_free (&err);
        return 1;
    }
    bool b = false, m = false, a = false, f = false;
    if (!*stop_flag) {
        b = phase_b (env, cfg, detail, sizeof detail);
        report ("phase_b_isolated", b, detail);
    }
    if (!*stop_flag) {
        m = metadata (cfg, detail, sizeof detail);
        report ("metadata_blocked", m, detail);
    }
    if (!*stop_flag) {
        char fdetail[2048];
        proxy_probe pp = { .ran = false };
        a = phase_a (env, cfg, detail, sizeof detail, &f, fdetail, sizeof fdetail, &pp);
        report ("phase_a_https", a, detail);
        report ("fleet_services_blocked", f, fdetail);
        if (pp.ran) {
            report ("install_denied_host", pp.denied_ok, pp.denied);
            report ("install_dns_closed", pp.dns_ok, pp.dns);
            f = f && pp.denied_ok && pp.dns_ok;
        }
    }
    kiwi_sandbox_env_close (env);
    if (*stop_flag)
        return 75; /* cancelled: the sandbox in flight was destroyed */
    return b && m && a && f ? 0 : 1;
}
