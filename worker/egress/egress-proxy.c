/*
 * egress-proxy.c: Phase A's egress proxy as the worker runs it (see
 * egress-proxy.h). The proxy itself is Debian's Squid; its configuration is
 * written by ops/egress/proxy.sh, the one place that knows Squid's syntax
 * and the ecosystems' registry hosts. The access-log parser is Kiwi's own:
 * the format is Kiwi's (a logformat in that configuration), one line of
 * space-separated fields, which no library parses.
 */
#include "worker/egress/egress-proxy.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/proc.h"
#include "common/strv.h"
#include "sandbox/sandbox.h"
#include "worker/egress/private-registry.h"

/* The whole environment of proxy.sh and of the Squid it runs: none of the
 * worker's variables (model keys, the git token, the Redis and store
 * passwords) reaches the one process Phase A talks to. */
static const char *const proxy_env[] = { "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C", NULL };

/* ---------- settings ---------- */

bool
kiwi_proxy_valid_host (const char *h)
{
    size_t n = strlen (h), label = 0;
    bool digits = true;
    if (n == 0 || n > 253)
        return false;
    for (size_t i = h[0] == '.' ? 1 : 0; i < n; i++) {
        unsigned char c = (unsigned char) h[i];
        if (c == '.') {
            if (label == 0)
                return false;
            label = 0;
            digits = true;
        } else if (isalnum (c) || (c == '-' && label > 0)) {
            if (++label > 63)
                return false;
            digits = digits && isdigit (c);
        } else
            return false;
    }
    return label > 0 && !digits;
}

int
kiwi_install_egress_parse (const char *value, kiwi_install_egress *out, kiwi_error_t *err)
{
    *out = (kiwi_install_egress) { .hosts = KIWI_STRV_INIT };
    bool any = false;
    cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&items, value, ", \t", err) < 0)
        return kiwi_error_wrap (err, "KIWI_INSTALL_EGRESS");
    for (size_t i = 0; i < items.n; i++) {
        const char *tok = items.v[i];
        if (strlen (tok) >= 300) {
            kiwi_install_egress_clear (out);
            return kiwi_error_make (err, 0, "KIWI_INSTALL_EGRESS: entry `%.40s...` too long", tok);
        }
        any = true;
        if (strcmp (tok, "open") == 0)
            out->open = true;
        else if (strcmp (tok, "registries") == 0)
            out->registries = true;
        else if (!kiwi_proxy_valid_host (tok)) {
            kiwi_install_egress_clear (out);
            return kiwi_error_make (err, 0,
                                    "KIWI_INSTALL_EGRESS: `%s` is not a host name (want registries, open, or "
                                    "host names)",
                                    tok);
        } else if (!kiwi_strv_contains (&out->hosts, tok) && kiwi_strv_add (&out->hosts, tok) < 0) {
            kiwi_install_egress_clear (out);
            return kiwi_error_make (err, ENOMEM, "KIWI_INSTALL_EGRESS");
        }
    }
    if (!any)
        out->registries = true;
    if (out->open && (out->registries || out->hosts.n > 0)) {
        kiwi_install_egress_clear (out);
        return kiwi_error_make (err, 0, "KIWI_INSTALL_EGRESS: `open` stands alone (it turns the proxy off)");
    }
    return 0;
}

void
kiwi_install_egress_clear (kiwi_install_egress *e)
{
    kiwi_strv_free (&e->hosts);
}

int
kiwi_proxy_ports_parse (const char *value, int ports[3], kiwi_error_t *err)
{
    const char *p = value ? value : "";
    for (int i = 0; i < 3; i++) {
        char *end = NULL;
        long n = strtol (p, &end, 10);
        if (end == p || n < 1 || n > 65535 || (i < 2 ? *end != ',' : *end != '\0'))
            return kiwi_error_make (err, 0, "KIWI_INSTALL_PROXY_PORTS: `%s`: want three ports E,H,S",
                                    value ? value : "");
        ports[i] = (int) n;
        p = end + 1;
    }
    if (ports[0] == ports[1] || ports[0] == ports[2] || ports[1] == ports[2])
        return kiwi_error_make (err, 0, "KIWI_INSTALL_PROXY_PORTS: `%s`: the three ports must differ", value);
    return 0;
}

int
kiwi_proxy_gateway (const char *bridge, char *addr, size_t cap, kiwi_error_t *err)
{
    struct ifaddrs *ifs = NULL;
    if (getifaddrs (&ifs) < 0)
        return kiwi_error_make (err, errno, "reading the interfaces' addresses");
    bool found = false;
    for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next)
        found = i->ifa_addr && i->ifa_addr->sa_family == AF_INET && strcmp (i->ifa_name, bridge) == 0
                && inet_ntop (AF_INET, &((struct sockaddr_in *) i->ifa_addr)->sin_addr, addr, (socklen_t) cap);
    freeifaddrs (ifs);
    if (!found)
        return kiwi_error_make (err, 0, "the install bridge %s has no IPv4 address (is its Docker network there?)",
                                bridge);
    return 0;
}

int
kiwi_proxy_env (const char *gateway, int port, kiwi_strv *env, kiwi_error_t *err)
{
    static const char *const url_vars[] = {
        "HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy",
        "YARN_HTTP_PROXY", "YARN_HTTPS_PROXY", NULL,
    };
    for (size_t i = 0; url_vars[i]; i++)
        if (kiwi_strv_addf (env, "%s=http://%s:%d", url_vars[i], gateway, port) < 0)
            return kiwi_error_make (err, ENOMEM, "proxy environment");
    /* Node's own fetch (corepack's downloads) reads the URLs above only
     * when told to */
    if (kiwi_strv_add (env, "NO_PROXY=") < 0 || kiwi_strv_add (env, "no_proxy=") < 0
        || kiwi_strv_add (env, "NODE_USE_ENV_PROXY=1") < 0
        || kiwi_strv_addf (env,
                           "JAVA_TOOL_OPTIONS=-Dhttp.proxyHost=%s -Dhttp.proxyPort=%d -Dhttps.proxyHost=%s "
                           "-Dhttps.proxyPort=%d",
                           gateway, port, gateway, port)
               < 0)
        return kiwi_error_make (err, ENOMEM, "proxy environment");
    return 0;
}

int
kiwi_install_egress_proxied (const kiwi_worker_config *cfg, bool *proxied, kiwi_error_t *err)
{
    kiwi_install_egress e;
    if (kiwi_install_egress_parse (cfg->install_egress, &e, err) < 0)
        return -1;
    /* the proxy listens on a Docker install bridge; the Firecracker driver's
     * Phase A leaves by its own tap bridge (ops/firecracker/README.md) */
    *proxied = !e.open && strcmp (cfg->sandbox ? cfg->sandbox : "", "firecracker") != 0;
    kiwi_install_egress_clear (&e);
    return 0;
}

int
kiwi_proxy_setting (const kiwi_worker_config *cfg, bool *on, kiwi_install_egress *e, int ports[3], kiwi_error_t *err)
{
    if (kiwi_install_egress_proxied (cfg, on, err) < 0)
        return -1;
    if (!*on)
        return 0;
    if (kiwi_install_egress_parse (cfg->install_egress, e, err) < 0)
        return -1;
    if (kiwi_proxy_ports_parse (cfg->install_proxy_ports, ports, err) < 0) {
        kiwi_install_egress_clear (e);
        return -1;
    }
    return 0;
}

int
kiwi_proxy_phase_env (const kiwi_worker_config *cfg, kiwi_strv *env, bool *on, kiwi_error_t *err)
{
    if (kiwi_install_egress_proxied (cfg, on, err) < 0)
        return -1;
    if (!*on)
        return 0;
    int ports[3];
    char gw[INET_ADDRSTRLEN];
    if (kiwi_proxy_ports_parse (cfg->install_proxy_ports, ports, err) < 0
        || kiwi_proxy_gateway (kiwi_proxy_bridge (cfg), gw, sizeof gw, err) < 0)
        return kiwi_error_wrap (err, "KIWI_INSTALL_EGRESS=%s: the egress proxy", cfg->install_egress);
    if (kiwi_proxy_env (gw, ports[0], env, err) < 0)
        return -1;
    /* where Go reads private modules from, behind this proxy */
    return kiwi_go_private_env (cfg, env, err);
}

const char *
kiwi_proxy_bridge (const kiwi_worker_config *cfg)
{
    return kiwi_install_bridge_or_default (cfg->install_bridge);
}

int
kiwi_proxy_nflog_open (const kiwi_worker_config *cfg, kiwi_nflog_cb cb, void *userdata, kiwi_nflog **out,
                       kiwi_error_t *err)
{
    char net[32];
    int index = 0;
    if (kiwi_install_network_name (kiwi_proxy_bridge (cfg), net, sizeof net, &index, err) < 0)
        return -1;
    if (kiwi_nflog_open ((uint16_t) (cfg->egress_nflog_group + index), cb, userdata, out, err) < 0)
        return -1;
    kiwi_info ("egress rules: reading what they reject from %s (netlink log group %u)", kiwi_proxy_bridge (cfg),
               kiwi_nflog_group (*out));
    return 0;
}

int
kiwi_proxy_dir (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err)
{
    int n = snprintf (buf, cap, "%s/egress-proxy/%s", cfg->state_dir, cfg->worker_id ? cfg->worker_id : "worker");
    if (n < 0 || (size_t) n >= cap)
        return kiwi_error_make (err, ENAMETOOLONG, "the egress proxy's directory");
    return 0;
}

static int
proxy_file (const kiwi_worker_config *cfg, const char *name, char *buf, size_t cap, kiwi_error_t *err)
{
    if (kiwi_proxy_dir (cfg, buf, cap, err) < 0)
        return -1;
    size_t n = strlen (buf);
    if (snprintf (buf + n, cap - n, "/%s", name) >= (int) (cap - n))
        return kiwi_error_make (err, ENAMETOOLONG, "the egress proxy's %s", name);
    return 0;
}

int
kiwi_proxy_log_path (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err)
{
    return proxy_file (cfg, "access.log", buf, cap, err);
}

int
kiwi_proxy_fetch_log_path (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err)
{
    return proxy_file (cfg, "fetch.log", buf, cap, err);
}

/* ---------- the process ---------- */

static int
script_argv (const kiwi_worker_config *cfg, kiwi_strv *argv, const char *command, const char *dir, kiwi_error_t *err)
{
    char buf[PATH_MAX];
    const char *script = kiwi_worker_libexec (cfg->egress_proxy_script, "proxy.sh", buf, sizeof buf);
    if (script == NULL)
        return kiwi_error_make (err, errno, "proxy.sh %s: where kiwi-worker is installed cannot be read (set "
                                            "KIWI_EGRESS_PROXY_SCRIPT)", command);
    if (kiwi_strv_add (argv, "bash") < 0 || kiwi_strv_add (argv, script) < 0 || kiwi_strv_add (argv, command) < 0
        || kiwi_strv_add (argv, "--dir") < 0 || kiwi_strv_add (argv, dir) < 0)
        return kiwi_error_make (err, ENOMEM, "proxy.sh %s", command);
    return 0;
}

/* kiwi-fetch-digest, installed beside kiwi-worker (../libexec/kiwi). */
static const char *
digest_bin (char *buf, size_t cap, kiwi_error_t *err)
{
    const char *digest = kiwi_worker_libexec (NULL, "kiwi-fetch-digest", buf, cap);
    if (digest == NULL || access (digest, X_OK) < 0) {
        kiwi_error_make (err, errno, "the egress proxy's fetch digest: %s is missing (it is installed with "
                                     "kiwi-worker, in ../libexec/kiwi beside its binary)",
                         digest ? digest : "kiwi-fetch-digest");
        return NULL;
    }
    return digest;
}

int
kiwi_proxy_conf_argv (const kiwi_worker_config *cfg, const kiwi_install_egress *e, const char *dir,
                      const char *gateway, kiwi_strv *conf, kiwi_error_t *err)
{
    char dbuf[PATH_MAX];
    const char *digest = digest_bin (dbuf, sizeof dbuf, err);
    if (digest == NULL || script_argv (cfg, conf, "conf", dir, err) < 0)
        return -1;
    /* --digest: every response Squid sees in the clear is hashed by
     * kiwi-fetch-digest (the install's fetch manifest) */
    if (kiwi_strv_add (conf, "--listen") < 0 || kiwi_strv_add (conf, gateway) < 0
        || kiwi_strv_add (conf, "--ports") < 0 || kiwi_strv_add (conf, cfg->install_proxy_ports) < 0
        || kiwi_strv_add (conf, "--digest") < 0 || kiwi_strv_add (conf, digest) < 0
        || (e->registries && (kiwi_strv_add (conf, "--ecosystem") < 0 || kiwi_strv_add (conf, "all") < 0)))
        return kiwi_error_make (err, ENOMEM, "proxy.sh conf");
    for (size_t i = 0; i < e->hosts.n; i++)
        if (kiwi_strv_add (conf, "--allow") < 0 || kiwi_strv_add (conf, e->hosts.v[i]) < 0)
            return kiwi_error_make (err, ENOMEM, "proxy.sh conf");
    /* Kiwi's CA, always: the registries are bumped (read-only: Squid sees
     * and refuses a write to any of them), and each private registry's
     * spec, the credential file's path only (proxy.sh reads it into
     * squid.conf) */
    kiwi_private_registries pr;
    if (kiwi_private_registries_parse (cfg->private_registries, &pr, err) < 0)
        return -1;
    int rc = 0;
    char ca[PATH_MAX];
    if (kiwi_egress_ca_dir (cfg, ca, sizeof ca, err) < 0)
        rc = -1;
    else if (kiwi_strv_add (conf, "--bump-ca") < 0 || kiwi_strv_add (conf, ca) < 0
             || (e->registries && kiwi_strv_add (conf, "--bump-registries") < 0))
        rc = kiwi_error_make (err, ENOMEM, "proxy.sh conf");
    for (size_t i = 0; rc == 0 && i < pr.n; i++)
        if (kiwi_strv_add (conf, "--private-registry") < 0 || kiwi_strv_add (conf, pr.v[i].spec) < 0)
            rc = kiwi_error_make (err, ENOMEM, "proxy.sh conf");
    kiwi_private_registries_clear (&pr);
    /* the operator's CAs for registries' own certificates and pinned names
     * (kiwi_private_registries_check has checked both paths) */
    const char *upstream = cfg->private_registry_ca, *hosts = cfg->egress_hosts_file;
    if (rc == 0 && upstream && *upstream
        && (kiwi_strv_add (conf, "--upstream-ca") < 0 || kiwi_strv_add (conf, upstream) < 0))
        rc = kiwi_error_make (err, ENOMEM, "proxy.sh conf");
    if (rc == 0 && hosts && *hosts && (kiwi_strv_add (conf, "--hosts-file") < 0 || kiwi_strv_add (conf, hosts) < 0))
        rc = kiwi_error_make (err, ENOMEM, "proxy.sh conf");
    return rc;
}

int
kiwi_proxy_start (const kiwi_worker_config *cfg, const kiwi_install_egress *e, const char *dir, char *gateway,
                  pid_t *pid, kiwi_error_t *err)
{
    cleanup_strv kiwi_strv conf = KIWI_STRV_INIT;
    if (kiwi_proxy_gateway (kiwi_proxy_bridge (cfg), gateway, INET_ADDRSTRLEN, err) < 0
        || kiwi_proxy_conf_argv (cfg, e, dir, gateway, &conf, err) < 0)
        return -1;
    if (kiwi_proc_check (kiwi_strv_list (&conf), proxy_env, NULL, 60000, err) < 0)
        return kiwi_error_wrap (err, "writing the egress proxy's configuration");
    cleanup_strv kiwi_strv run = KIWI_STRV_INIT;
    if (script_argv (cfg, &run, "run", dir, err) < 0)
        return -1;
    char dbuf[PATH_MAX];
    const char *digest = digest_bin (dbuf, sizeof dbuf, err);
    if (digest == NULL)
        return -1;
    if (kiwi_strv_add (&run, "--log-max-mb") < 0
        || kiwi_strv_addf (&run, "%lld", (long long) cfg->install_proxy_log_mb) < 0
        || kiwi_strv_add (&run, "--digest") < 0 || kiwi_strv_add (&run, digest) < 0)
        return kiwi_error_make (err, ENOMEM, "proxy.sh run");
    posix_spawnattr_t at;
    posix_spawnattr_init (&at);
    posix_spawnattr_setflags (&at, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup (&at, 0);
    int rc = posix_spawnp (pid, "bash", NULL, &at, run.v, (char *const *) proxy_env);
    posix_spawnattr_destroy (&at);
    if (rc != 0)
        return kiwi_error_make (err, rc, "starting the egress proxy (proxy.sh run)");
    kiwi_info ("egress proxy: squid (pid %d) on %s (%s) ports %s, %s", (int) *pid, gateway, kiwi_proxy_bridge (cfg),
               cfg->install_proxy_ports, cfg->install_egress);
    return 0;
}

static void
sleep_ms (long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep (&ts, NULL);
}

void
kiwi_proxy_stop (pid_t pid)
{
    if (pid <= 0)
        return;
    kill (-pid, SIGTERM);
    int st;
    for (int i = 0; waitpid (pid, &st, WNOHANG) == 0; i++) {
        if (i == 50) { /* 5 s */
            kill (-pid, SIGKILL);
            waitpid (pid, &st, 0);
            return;
        }
        sleep_ms (100);
    }
}

/* Whether something accepts a TCP connection on addr:port. */
static bool
accepts (const char *addr, int port)
{
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons ((uint16_t) port) };
    if (inet_pton (AF_INET, addr, &sa.sin_addr) != 1)
        return false;
    int fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool ok = connect (fd, (struct sockaddr *) &sa, sizeof sa) == 0;
    close (fd);
    return ok;
}

int
kiwi_proxy_start_once (const kiwi_worker_config *cfg, pid_t *pid, kiwi_error_t *err)
{
    *pid = 0;
    bool on;
    kiwi_install_egress e;
    int ports[3];
    if (kiwi_proxy_setting (cfg, &on, &e, ports, err) < 0)
        return -1;
    if (!on)
        return 0;
    char gw[INET_ADDRSTRLEN], dir[PATH_MAX];
    int rc = -1;
    if (kiwi_proxy_dir (cfg, dir, sizeof dir, err) < 0 || kiwi_proxy_start (cfg, &e, dir, gw, pid, err) < 0)
        goto out;
    for (int64_t until = kiwi_mono_ms () + 30000;;) {
        if (accepts (gw, ports[0])) {
            rc = 0;
            break;
        }
        int st;
        if (waitpid (*pid, &st, WNOHANG) == *pid) {
            kiwi_error_make (err, 0, "squid %s %d before it listened on %s:%d (its log: %s/cache.log)",
                             WIFSIGNALED (st) ? "was killed by signal" : "exited with status",
                             WIFSIGNALED (st) ? WTERMSIG (st) : WEXITSTATUS (st), gw, ports[0], dir);
            *pid = 0;
            break;
        }
        if (kiwi_mono_ms () >= until) {
            kiwi_error_make (err, 0, "squid (pid %d) does not listen on %s:%d after 30 s (its log: %s/cache.log)",
                             (int) *pid, gw, ports[0], dir);
            kiwi_proxy_stop (*pid);
            *pid = 0;
            break;
        }
        sleep_ms (100);
    }
out:
    kiwi_install_egress_clear (&e);
    return rc < 0 ? kiwi_error_wrap (err, "KIWI_INSTALL_EGRESS=%s: the egress proxy", cfg->install_egress) : 0;
}

/* The Squid <dir>/squid.pid names, when it runs this configuration (its
 * command line has `-f <dir>/squid.conf`) and is neither a zombie nor
 * stopped; 0 with what is wrong in why[cap] otherwise. */
static pid_t
squid_of (const char *dir, char *why, size_t cap)
{
    char path[PATH_MAX + 32], conf[PATH_MAX + 16];
    snprintf (path, sizeof path, "%s/squid.pid", dir);
    snprintf (conf, sizeof conf, "%s/squid.conf", dir);
    FILE *f = fopen (path, "re");
    long pid = 0;
    if (f == NULL || fscanf (f, "%ld", &pid) != 1 || pid <= 0) {
        snprintf (why, cap, "%s names no process", path);
        if (f)
            fclose (f);
        return 0;
    }
    fclose (f);
    char cmd[PATH_MAX + 64] = "";
    snprintf (path, sizeof path, "/proc/%ld/cmdline", pid);
    f = fopen (path, "re");
    size_t n = f ? fread (cmd, 1, sizeof cmd - 1, f) : 0;
    if (f)
        fclose (f);
    cmd[n] = '\0';
    bool ours = false;
    for (size_t i = 0; i < n; i += strlen (cmd + i) + 1)
        if (strcmp (cmd + i, "-f") == 0 && i + 3 < n && strcmp (cmd + i + 3, conf) == 0)
            ours = true;
    if (!ours) {
        snprintf (why, cap, "squid (pid %ld, from %s/squid.pid) is not running %s", pid, dir, conf);
        return 0;
    }
    char stat[512] = "";
    snprintf (path, sizeof path, "/proc/%ld/stat", pid);
    f = fopen (path, "re");
    n = f ? fread (stat, 1, sizeof stat - 1, f) : 0;
    if (f)
        fclose (f);
    stat[n] = '\0';
    const char *close_paren = strrchr (stat, ')');
    char state = close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
    if (state == 'Z' || state == 'X' || state == 'T' || state == 't' || state == '?') {
        snprintf (why, cap, "squid (pid %ld) is %s", pid,
                  state == 'T' || state == 't' ? "stopped" : state == '?' ? "gone" : "dead");
        return 0;
    }
    return (pid_t) pid;
}

int
kiwi_proxy_alive (const kiwi_worker_config *cfg, pid_t *pid, kiwi_error_t *err)
{
    *pid = 0;
    int ports[3];
    char gw[INET_ADDRSTRLEN], dir[PATH_MAX], why[PATH_MAX + 128];
    if (kiwi_proxy_ports_parse (cfg->install_proxy_ports, ports, err) < 0 || kiwi_proxy_dir (cfg, dir, sizeof dir, err) < 0
        || kiwi_proxy_gateway (kiwi_proxy_bridge (cfg), gw, sizeof gw, err) < 0)
        return kiwi_error_wrap (err, "the egress proxy");
    pid_t p = squid_of (dir, why, sizeof why);
    if (p == 0)
        return kiwi_error_make (err, ESRCH, "the egress proxy of worker %s is not running: %s", cfg->worker_id, why);
    if (!accepts (gw, ports[0]))
        return kiwi_error_make (err, ECONNREFUSED, "the egress proxy of worker %s (squid pid %d) does not accept "
                                                   "connections on %s:%d",
                                cfg->worker_id, (int) p, gw, ports[0]);
    *pid = p;
    return 0;
}

/* ---------- the access log ---------- */

static const char *
field (char **p)
{
    char *s = *p;
    while (*s == ' ')
        s++;
    if (*s == '\0' || *s == '\n')
        return NULL;
    char *end = s + strcspn (s, " \n");
    if (*end)
        *end++ = '\0';
    *p = end;
    return s;
}

static int
hexval (char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A field as Squid %-encoded it, decoded in place where the byte is
 * printable and not a space; every other escape stays as written, and a
 * raw byte outside the printable range (a log of another format) becomes
 * '?': no field ever holds a control byte or a space. */
static const char *
clean (char *s)
{
    char *out = s;
    for (const char *in = s; *in; in++) {
        unsigned char c = (unsigned char) *in;
        int hi, lo;
        if (c == '%' && (hi = hexval (in[1])) >= 0 && (lo = hexval (in[2])) >= 0 && hi * 16 + lo > 0x20
            && hi * 16 + lo < 0x7f) {
            *out++ = (char) (hi * 16 + lo);
            in += 2;
        } else
            *out++ = c > 0x20 && c < 0x7f ? (char) c : '?';
    }
    *out = '\0';
    return s;
}

static const char *
dash (const char *s)
{
    return s && strcmp (s, "-") != 0 ? s : NULL;
}

/* host[:port] of "http://host[:port]/...", "host:port" or "[v6]:port" */
static void
url_host (const char *url, char *host, size_t cap, int *port)
{
    const char *s = url;
    int def = 0;
    if (strncmp (s, "http://", 7) == 0) {
        s += 7;
        def = 80;
    } else if (strncmp (s, "https://", 8) == 0) {
        s += 8;
        def = 443;
    }
    size_t n = strcspn (s, "/?#");
    const char *colon = NULL;
    if (s[0] == '[') {
        const char *close = memchr (s, ']', n);
        colon = close && close + 1 < s + n && close[1] == ':' ? close + 1 : NULL;
    } else {
        colon = memchr (s, ':', n);
    }
    size_t hl = colon ? (size_t) (colon - s) : n;
    snprintf (host, cap, "%.*s", (int) hl, s);
    *port = colon ? atoi (colon + 1) : def;
}

int
kiwi_proxy_log_parse (char *line, kiwi_proxy_log_entry *e)
{
    memset (e, 0, sizeof *e);
    char *p = line;
    const char *f[13];
    for (int i = 0; i < 13; i++)
        if ((f[i] = field (&p)) == NULL && i < 12)
            return -1;
    for (int i = 0; i < 13 && f[i]; i++)
        clean ((char *) f[i]);
    char *end = NULL;
    e->time = strtod (f[0], &end);
    if (end == f[0])
        return -1;
    e->client = dash (f[1]);
    e->local_port = atoi (f[2]);
    e->squid_status = dash (f[3]);
    e->http_status = atoi (f[4]);
    e->method = dash (f[5]);
    e->sni = dash (f[6]);
    e->url = dash (f[7]);
    e->bytes_in = strtoll (f[8], NULL, 10);
    e->bytes_out = strtoll (f[9], NULL, 10);
    e->server = dash (f[10]);
    e->bump = dash (f[11]);
    e->redirected = f[12] && strcmp (f[12], "redirected") == 0;
    if (e->url)
        url_host (e->url, e->host, sizeof e->host, &e->port);
    if (e->sni)
        snprintf (e->host, sizeof e->host, "%s", e->sni);
    return 0;
}

bool
kiwi_proxy_log_write_method (const char *method)
{
    return method && strcmp (method, "GET") != 0 && strcmp (method, "HEAD") != 0 && strcmp (method, "CONNECT") != 0;
}

bool
kiwi_proxy_log_denied (const kiwi_proxy_log_entry *e, const char **rule)
{
    const char *r = NULL;
    if (e->bump && strcmp (e->bump, "terminate") == 0)
        r = e->sni ? "TLS SNI not allowed" : "TLS without SNI";
    else if (e->squid_status && strcmp (e->squid_status, "TCP_DENIED") == 0)
        /* read-only refuses every other method before it looks at the host */
        r = kiwi_proxy_log_write_method (e->method) ? KIWI_PROXY_RULE_METHOD : KIWI_PROXY_RULE_HOST;
    else if (e->http_status == 409)
        r = "Host does not match the address";
    if (rule)
        *rule = r;
    return r != NULL;
}
