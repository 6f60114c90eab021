/*
 * private-registry.c: KIWI_PRIVATE_REGISTRIES parsed, each registry's
 * scope hash, Kiwi's CA directory and the CA bundle Phase A gets with it
 * (private-registry.h). Squid's side is ops/egress/proxy.sh's.
 */
#include "worker/egress/private-registry.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "common/fs.h"
#include "common/sha256.h"
#include "worker/egress/egress-proxy.h"

void
kiwi_private_registries_clear (kiwi_private_registries *r)
{
    for (size_t i = 0; i < r->n; i++) {
        free (r->v[i].spec);
        free (r->v[i].host);
        free (r->v[i].prefix);
        free (r->v[i].file);
    }
    free (r->v);
    *r = (kiwi_private_registries) { 0 };
}

/* "" or segments "/seg" of letters, digits and ._~@+-, none "." or "..". */
static bool
valid_prefix (const char *p)
{
    if (*p == '\0')
        return true;
    while (*p == '/') {
        const char *seg = ++p;
        while (*p && *p != '/' && (isalnum ((unsigned char) *p) || strchr ("._~@+-", *p)))
            p++;
        size_t n = (size_t) (p - seg);
        if (n == 0 || (n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.'))
            return false;
    }
    return *p == '\0';
}

/* Whether two prefixes of one host overlap (one is the other or under it). */
static bool
overlap (const char *a, const char *b)
{
    size_t na = strlen (a), nb = strlen (b);
    const char *s = na <= nb ? a : b, *l = na <= nb ? b : a;
    size_t ns = na <= nb ? na : nb;
    return strncmp (s, l, ns) == 0 && (l[ns] == '\0' || l[ns] == '/');
}

static int
parse_one (const char *spec, kiwi_private_registry *r, kiwi_error_t *err)
{
    const char *eq = strstr (spec, "=@");
    if (eq == NULL || eq == spec || eq[2] == '\0')
        return kiwi_error_make (err, 0, "KIWI_PRIVATE_REGISTRIES: `%s`: want HOST[/PREFIX]=@FILE", spec);
    const char *slash = memchr (spec, '/', (size_t) (eq - spec));
    size_t hn = (size_t) ((slash ? slash : eq) - spec);
    r->spec = strdup (spec);
    r->host = strndup (spec, hn);
    r->prefix = slash ? strndup (slash, (size_t) (eq - slash)) : strdup ("");
    r->file = strdup (eq + 2);
    if (!r->spec || !r->host || !r->prefix || !r->file)
        return kiwi_error_make (err, ENOMEM, "KIWI_PRIVATE_REGISTRIES");
    for (char *c = r->host; *c; c++)
        *c = (char) tolower ((unsigned char) *c);
    size_t pn = strlen (r->prefix);
    if (pn > 0 && r->prefix[pn - 1] == '/')
        r->prefix[pn - 1] = '\0'; /* "/npm/" is "/npm", as proxy.sh reads it */
    if (r->host[0] == '.' || !kiwi_proxy_valid_host (r->host))
        return kiwi_error_make (err, 0, "KIWI_PRIVATE_REGISTRIES: `%s`: `%s` is not one host name", spec, r->host);
    if (!valid_prefix (r->prefix))
        return kiwi_error_make (err, 0,
                                "KIWI_PRIVATE_REGISTRIES: `%s`: the path `%s` is not segments of letters, digits "
                                "and ._~@+- (no . or ..)",
                                spec, r->prefix);
    if (r->file[0] != '/')
        return kiwi_error_make (err, 0, "KIWI_PRIVATE_REGISTRIES: `%s`: the credential file must be an absolute path",
                                spec);
    struct stat st;
    if (stat (r->file, &st) < 0 || !S_ISREG (st.st_mode) || access (r->file, R_OK) < 0)
        return kiwi_error_make (err, errno ? errno : EINVAL,
                                "KIWI_PRIVATE_REGISTRIES: `%s`: cannot read the credential file %s", spec, r->file);
    return 0;
}

int
kiwi_private_registries_parse (const char *value, kiwi_private_registries *out, kiwi_error_t *err)
{
    *out = (kiwi_private_registries) { 0 };
    cleanup_strv kiwi_strv items = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&items, value, ", \t", err) < 0)
        return kiwi_error_wrap (err, "KIWI_PRIVATE_REGISTRIES");
    if (items.n == 0)
        return 0;
    out->v = calloc (items.n, sizeof *out->v);
    if (out->v == NULL)
        return kiwi_error_make (err, ENOMEM, "KIWI_PRIVATE_REGISTRIES");
    for (size_t i = 0; i < items.n; i++) {
        errno = 0;
        int rc = parse_one (items.v[i], &out->v[out->n++], err);
        for (size_t j = 0; rc == 0 && j + 1 < out->n; j++)
            if (strcmp (out->v[j].host, out->v[i].host) == 0 && overlap (out->v[j].prefix, out->v[i].prefix))
                rc = kiwi_error_make (err, 0,
                                      "KIWI_PRIVATE_REGISTRIES: `%s` and `%s`: the paths of %s overlap (one "
                                      "credential per request)",
                                      out->v[j].spec, out->v[i].spec, out->v[i].host);
        if (rc < 0) {
            kiwi_private_registries_clear (out);
            return -1;
        }
    }
    return 0;
}

/* How many registries cfg declares (KIWI_PRIVATE_REGISTRIES parsed and
 * checked, then let go); -1 with *err when it is refused. */
static int
declared_count (const kiwi_worker_config *cfg, size_t *n, kiwi_error_t *err)
{
    kiwi_private_registries r;
    if (kiwi_private_registries_parse (cfg->private_registries, &r, err) < 0)
        return -1;
    *n = r.n;
    kiwi_private_registries_clear (&r);
    return 0;
}

static int
not_proxied (kiwi_error_t *err)
{
    return kiwi_error_make (err, 0,
                            "KIWI_PRIVATE_REGISTRIES needs Phase A behind the egress proxy (KIWI_INSTALL_EGRESS "
                            "other than open, the docker or gvisor driver): only the proxy holds their "
                            "credentials");
}

/* An operator's file setting: unset, or an absolute path to a readable
 * file. */
static int
check_file_setting (const char *name, const char *path, kiwi_error_t *err)
{
    if (path == NULL || *path == '\0')
        return 0;
    if (path[0] != '/')
        return kiwi_error_make (err, 0, "%s=%s: an absolute path, please", name, path);
    if (access (path, R_OK) < 0)
        return kiwi_error_make (err, errno, "%s=%s: cannot read it", name, path);
    return 0;
}

int
kiwi_private_registries_check (const kiwi_worker_config *cfg, kiwi_error_t *err)
{
    if (check_file_setting ("KIWI_PRIVATE_REGISTRY_CA", cfg->private_registry_ca, err) < 0
        || check_file_setting ("KIWI_EGRESS_HOSTS_FILE", cfg->egress_hosts_file, err) < 0)
        return -1;
    size_t declared = 0;
    if (declared_count (cfg, &declared, err) < 0)
        return -1;
    bool proxied = false;
    if (declared == 0)
        return 0;
    if (kiwi_install_egress_proxied (cfg, &proxied, err) < 0)
        return -1;
    if (!proxied)
        return not_proxied (err);
    return 0;
}

static bool
set (const char *v)
{
    return v != NULL && *v != '\0';
}

/* One GOPROXY entry: `direct`, `off`, or https://HOST[:PORT][/PATH]
 * without userinfo, query or fragment; *host gets HOST for a URL. */
static bool
go_proxy_entry (const char *e, char *host, size_t cap)
{
    host[0] = '\0';
    if (strcmp (e, "direct") == 0 || strcmp (e, "off") == 0)
        return true;
    if (strncmp (e, "https://", 8) != 0)
        return false;
    const char *h = e + 8;
    size_t hn = strcspn (h, ":/");
    if (hn == 0 || hn >= cap)
        return false;
    memcpy (host, h, hn);
    host[hn] = '\0';
    for (char *c = host; *c; c++)
        *c = (char) tolower ((unsigned char) *c);
    const char *rest = h + hn;
    if (*rest == ':') {
        size_t pn = strspn (rest + 1, "0123456789");
        if (pn == 0 || pn > 5)
            return false;
        rest += 1 + pn;
    }
    if (*rest != '\0') {
        if (*rest != '/')
            return false;
        for (const char *c = rest; *c; c++)
            if (!isalnum ((unsigned char) *c) && strchr ("._~@+/-", *c) == NULL)
                return false;
        size_t rl = strlen (rest);
        if (strstr (rest, "/../") || strstr (rest, "/./") || strstr (rest, "//")
            || (rl >= 3 && strcmp (rest + rl - 3, "/..") == 0) || (rl >= 2 && strcmp (rest + rl - 2, "/.") == 0))
            return false;
    }
    return kiwi_proxy_valid_host (host) && host[0] != '.';
}

int
kiwi_registry_placeholders_env (const kiwi_worker_config *cfg, kiwi_strv *env, kiwi_error_t *err)
{
    if (!set (cfg->private_registry_placeholders))
        return 0;
    cleanup_free char *copy = strdup (cfg->private_registry_placeholders);
    if (copy == NULL)
        return kiwi_error_make (err, ENOMEM, "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS");
    char *save = NULL;
    for (char *n = strtok_r (copy, ", ", &save); n; n = strtok_r (NULL, ", ", &save)) {
        bool ok = (isalpha ((unsigned char) n[0]) || n[0] == '_') && strlen (n) < 100 && strncmp (n, "KIWI_", 5) != 0;
        for (const char *c = n; ok && *c; c++)
            ok = isalnum ((unsigned char) *c) || *c == '_';
        if (!ok)
            return kiwi_error_make (err, 0, "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS: `%s` is not a variable name (letters, "
                                            "digits and _, not KIWI_*)", n);
        if (kiwi_strv_addf (env, "%s=%s", n, KIWI_REGISTRY_PLACEHOLDER) < 0)
            return kiwi_error_make (err, ENOMEM, "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS");
    }
    return 0;
}

int
kiwi_go_private_check (const kiwi_worker_config *cfg, kiwi_error_t *err)
{
    if (set (cfg->private_registry_placeholders)) {
        kiwi_strv names = KIWI_STRV_INIT;
        int prc = kiwi_registry_placeholders_env (cfg, &names, err);
        kiwi_strv_free (&names);
        if (prc < 0)
            return -1;
        bool on = false;
        if (kiwi_install_egress_proxied (cfg, &on, err) < 0)
            return -1;
        if (!on)
            return kiwi_error_make (err, 0, "KIWI_PRIVATE_REGISTRY_PLACEHOLDERS is set but Phase A is not behind the "
                                            "egress proxy, which replaces them (KIWI_INSTALL_EGRESS=open)");
    }
    if (set (cfg->go_nosumdb)) {
        const char *v = cfg->go_nosumdb;
        if (strspn (v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~/*?-[],") != strlen (v)
            || v[0] == ',' || v[strlen (v) - 1] == ',' || strstr (v, ",,"))
            return kiwi_error_make (err, 0, "KIWI_GO_NOSUMDB: `%s`: want module path patterns (letters, digits, "
                                            "._~/*?-[]) separated by commas", v);
    }
    if (!set (cfg->go_proxy))
        return 0;
    bool proxied = false;
    if (kiwi_install_egress_proxied (cfg, &proxied, err) < 0)
        return -1;
    if (!proxied)
        return kiwi_error_make (err, 0, "KIWI_GO_PROXY is set but Phase A is not behind the egress proxy "
                                        "(KIWI_INSTALL_EGRESS=open): unset one of them");
    kiwi_private_registries pr;
    if (kiwi_private_registries_parse (cfg->private_registries, &pr, err) < 0)
        return -1;
    kiwi_install_egress eg;
    if (kiwi_install_egress_parse (cfg->install_egress, &eg, err) < 0) {
        kiwi_private_registries_clear (&pr);
        return -1;
    }
    cleanup_free char *copy = strdup (cfg->go_proxy);
    int rc = copy ? 0 : kiwi_error_make (err, ENOMEM, "KIWI_GO_PROXY");
    char *save = NULL;
    size_t n = 0;
    for (char *e = copy ? strtok_r (copy, ",|", &save) : NULL; rc == 0 && e; e = strtok_r (NULL, ",|", &save)) {
        char host[256];
        n++;
        if (!go_proxy_entry (e, host, sizeof host)) {
            rc = kiwi_error_make (err, 0, "KIWI_GO_PROXY: `%s`: want `direct`, `off` or https://HOST[:PORT][/PATH] "
                                          "(no credentials: declare them in KIWI_PRIVATE_REGISTRIES)", e);
            break;
        }
        if (host[0] == '\0')
            continue;
        bool reach = false;
        for (size_t i = 0; !reach && i < pr.n; i++)
            reach = strcmp (pr.v[i].host, host) == 0;
        for (size_t i = 0; !reach && i < eg.hosts.n; i++) {
            const char *a = eg.hosts.v[i];
            size_t al = strlen (a), hl = strlen (host);
            reach = strcasecmp (a, host) == 0
                    || (a[0] == '.' && hl >= al && strcasecmp (host + hl - al, a) == 0);
        }
        if (!reach && eg.registries)
            reach = strcmp (host, "proxy.golang.org") == 0;
        if (!reach)
            rc = kiwi_error_make (err, 0, "KIWI_GO_PROXY: Phase A may not reach %s: declare it in "
                                          "KIWI_PRIVATE_REGISTRIES (with its credential) or add it to "
                                          "KIWI_INSTALL_EGRESS", host);
    }
    if (rc == 0 && n == 0)
        rc = kiwi_error_make (err, 0, "KIWI_GO_PROXY: `%s` names no proxy", cfg->go_proxy);
    kiwi_install_egress_clear (&eg);
    kiwi_private_registries_clear (&pr);
    return rc;
}

int
kiwi_go_private_env (const kiwi_worker_config *cfg, kiwi_strv *env, kiwi_error_t *err)
{
    if ((set (cfg->go_proxy) && kiwi_strv_addf (env, "GOPROXY=%s", cfg->go_proxy) < 0)
        || (set (cfg->go_nosumdb) && kiwi_strv_addf (env, "GONOSUMDB=%s", cfg->go_nosumdb) < 0))
        return kiwi_error_make (err, ENOMEM, "Phase A's environment");
    return 0;
}

int
kiwi_go_private_key_env (const kiwi_worker_config *cfg, kiwi_strv *out, kiwi_error_t *err)
{
    if ((set (cfg->private_registry_placeholders)
         && kiwi_strv_addf (out, "kiwi-registry-placeholders=%s", cfg->private_registry_placeholders) < 0)
        || (set (cfg->go_proxy) && kiwi_strv_addf (out, "kiwi-go-proxy=%s", cfg->go_proxy) < 0)
        || (set (cfg->go_nosumdb) && kiwi_strv_addf (out, "kiwi-go-nosumdb=%s", cfg->go_nosumdb) < 0))
        return kiwi_error_make (err, ENOMEM, "install cache key");
    return 0;
}

int
kiwi_private_registry_scope (const char *file, char hex[65], kiwi_error_t *err)
{
    kiwi_sha256 h;
    kiwi_sha256_init (&h);
    kiwi_sha256_update (&h, KIWI_PRIVATE_SCOPE_LABEL, strlen (KIWI_PRIVATE_SCOPE_LABEL));
    cleanup_close int fd = open (file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0)
        return kiwi_error_make (err, errno, "KIWI_PRIVATE_REGISTRIES: cannot read the credential file %s", file);
    unsigned char chunk[4096];
    ssize_t n;
    while ((n = read (fd, chunk, sizeof chunk)) > 0)
        kiwi_sha256_update (&h, chunk, (size_t) n);
    explicit_bzero (chunk, sizeof chunk);
    if (n < 0)
        return kiwi_error_make (err, errno, "KIWI_PRIVATE_REGISTRIES: cannot read the credential file %s", file);
    unsigned char d[32];
    kiwi_sha256_final (&h, d);
    explicit_bzero (&h, sizeof h);
    kiwi_sha256_digest_hex (d, hex);
    return 0;
}

int
kiwi_private_registries_key_env (const kiwi_private_registries *r, kiwi_strv *out, kiwi_error_t *err)
{
    for (size_t i = 0; i < r->n; i++) {
        char hex[65];
        if (kiwi_private_registry_scope (r->v[i].file, hex, err) < 0)
            return -1;
        if (kiwi_strv_addf (out, "kiwi-private-registry=%s%s scope-sha256=%s", r->v[i].host, r->v[i].prefix, hex)
            < 0)
            return kiwi_error_make (err, ENOMEM, "install cache key");
    }
    return 0;
}

int
kiwi_egress_ca_dir (const kiwi_worker_config *cfg, char *buf, size_t cap, kiwi_error_t *err)
{
    int n = cfg->egress_ca_dir && *cfg->egress_ca_dir ? snprintf (buf, cap, "%s", cfg->egress_ca_dir)
                                                      : snprintf (buf, cap, "%s/egress-ca", cfg->state_dir);
    if (n < 0 || (size_t) n >= cap)
        return kiwi_error_make (err, ENAMETOOLONG, "KIWI_EGRESS_CA_DIR");
    return 0;
}

/* Appends the file at `path` to fd; an error names it. */
static int
append_file (int fd, const char *path, const char *what, kiwi_error_t *err)
{
    cleanup_close int in = open (path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (in < 0)
        return kiwi_error_make (err, errno, "reading %s %s", what, path);
    char chunk[65536];
    ssize_t n;
    bool nl = true;
    while ((n = read (in, chunk, sizeof chunk)) > 0) {
        if (write (fd, chunk, (size_t) n) != n)
            return kiwi_error_make (err, errno ? errno : EIO, "writing Phase A's CA bundle");
        nl = chunk[n - 1] == '\n';
    }
    if (n < 0)
        return kiwi_error_make (err, errno, "reading %s %s", what, path);
    if (!nl && write (fd, "\n", 1) != 1)
        return kiwi_error_make (err, errno ? errno : EIO, "writing Phase A's CA bundle");
    return 0;
}

int
kiwi_egress_phase_ca_bundle (const kiwi_worker_config *cfg, bool proxied, char *buf, size_t cap,
                              const char **bundle, kiwi_error_t *err)
{
    *bundle = cfg->ca_bundle;
    size_t declared = 0;
    if (declared_count (cfg, &declared, err) < 0)
        return -1;
    if (!proxied)
        return declared ? not_proxied (err) : 0;
    char ca_dir[PATH_MAX], ca_pem[PATH_MAX + 16], dir[PATH_MAX], tmp[PATH_MAX + 16];
    if (kiwi_egress_ca_dir (cfg, ca_dir, sizeof ca_dir, err) < 0)
        return -1;
    snprintf (ca_pem, sizeof ca_pem, "%s/ca.pem", ca_dir);
    int n = snprintf (dir, sizeof dir, "%s/egress-ca-bundle", cfg->state_dir);
    if (n < 0 || (size_t) n >= sizeof dir
        || snprintf (buf, cap, "%s/%s.pem", dir, cfg->worker_id ? cfg->worker_id : "worker") >= (int) cap)
        return kiwi_error_make (err, ENAMETOOLONG, "Phase A's CA bundle");
    if (kiwi_fs_mkdir_p (dir, 0755) < 0)
        return kiwi_error_make (err, errno, "creating %s", dir);
    snprintf (tmp, sizeof tmp, "%s.XXXXXX", buf);
    int fd = mkostemp (tmp, O_CLOEXEC);
    if (fd < 0)
        return kiwi_error_make (err, errno, "writing Phase A's CA bundle %s", buf);
    const char *ours = cfg->ca_bundle ? cfg->ca_bundle : KIWI_SYSTEM_CA_BUNDLE;
    int rc = append_file (fd, ours, cfg->ca_bundle ? "the CA bundle (KIWI_CA_BUNDLE)" : "the system's CA bundle",
                          err);
    if (rc == 0)
        rc = append_file (fd, ca_pem, "Kiwi's egress CA (KIWI_EGRESS_CA_DIR)", err);
    if (rc == 0 && (fchmod (fd, 0644) < 0 || fsync (fd) < 0))
        rc = kiwi_error_make (err, errno, "writing Phase A's CA bundle %s", buf);
    close (fd);
    if (rc == 0 && rename (tmp, buf) < 0)
        rc = kiwi_error_make (err, errno, "writing Phase A's CA bundle %s", buf);
    if (rc < 0) {
        unlink (tmp);
        return -1;
    }
    *bundle = buf;
    return 0;
}
