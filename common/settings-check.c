/*
 * settings-check.c: the validators of the settings table, one per type
 * (settings.h), with the words each accepts; HOST:PORT addresses; goal
 * templates.
 */
#include "common/settings-internal.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"

const char *
kiwi_setting_accepted (const kiwi_setting_def *d, char *buf, size_t cap)
{
    switch (d->type) {
    case KIWI_SETTING_TYPE_STR:
        return "a non-empty string";
    case KIWI_SETTING_TYPE_PATH:
        return "a file or directory path";
    case KIWI_SETTING_TYPE_TEXT:
        return "text without control characters";
    case KIWI_SETTING_TYPE_LIST:
        return "a comma-separated list, may be empty";
    case KIWI_SETTING_TYPE_SECRET:
        return "any text";
    case KIWI_SETTING_TYPE_ENUM:
        return d->values;
    case KIWI_SETTING_TYPE_ADDR:
        return KIWI_METRICS_ADDR_FORM ", or empty: none";
    case KIWI_SETTING_TYPE_BROKERS:
        return "host:port[,host:port...], e.g. 127.0.0.1:9092";
    case KIWI_SETTING_TYPE_TOPIC:
        return "a Kafka topic name: 1 to 249 characters of A-Z a-z 0-9 . _ -";
    case KIWI_SETTING_TYPE_NAME:
        return "1 to 64 characters of A-Z a-z 0-9 . _ -, the first a letter or digit";
    case KIWI_SETTING_TYPE_TEMPLATE:
        return "text with the placeholders {name} {sha} {branch} {url} {repo} {event}";
    case KIWI_SETTING_TYPE_LOGLEVEL:
        return "debug, info, warn, error";
    case KIWI_SETTING_TYPE_INT:
        snprintf (buf, cap, "an integer from %lld to %lld", (long long) d->min, (long long) d->max);
        return buf;
    case KIWI_SETTING_TYPE_NUM:
        snprintf (buf, cap, "a number from %lld to %lld", (long long) d->min, (long long) d->max);
        return buf;
    case KIWI_SETTING_TYPE_SECONDS:
        snprintf (buf, cap, "whole seconds from %lld to %lld", (long long) d->min, (long long) d->max);
        return buf;
    case KIWI_SETTING_TYPE_BYTES:
        snprintf (buf, cap, "bytes from %lld to %lld, optionally with a K, M or G suffix", (long long) d->min,
                  (long long) d->max);
        return buf;
    case KIWI_SETTING_TYPE_BOOL:
        return "true, false, 1, 0, yes, no";
    }
    return "?";
}

/* ---------------------------------------------------------------- validators */

/* Each returns NULL when the value is good, else what is wrong with it. */

static const char *
check_brokers (const char *v)
{
    if (*v == '\0')
        return "empty";
    const char *p = v;
    while (*p) {
        const char *end = strchr (p, ',');
        size_t n = end ? (size_t) (end - p) : strlen (p);
        if (n == 0)
            return "empty entry";
        const char *colon = NULL;
        for (size_t i = 0; i < n; i++) {
            unsigned char c = (unsigned char) p[i];
            if (isspace (c) || iscntrl (c))
                return "whitespace or control character";
            if (c == ':')
                colon = p + i;
        }
        if (colon == NULL || colon == p)
            return "entry without host:port";
        size_t plen = n - (size_t) (colon + 1 - p);
        if (plen == 0 || plen > 5)
            return "bad port";
        unsigned long port = 0;
        for (size_t i = 0; i < plen; i++) {
            if (!isdigit ((unsigned char) colon[1 + i]))
                return "port is not a number";
            port = port * 10 + (unsigned long) (colon[1 + i] - '0');
        }
        if (port == 0 || port > 65535)
            return "port out of range 1..65535";
        p += n;
        if (*p == ',')
            p++;
    }
    return NULL;
}

static const char *
check_topic (const char *v)
{
    size_t n = strlen (v);
    if (n == 0)
        return "empty";
    if (n > 249)
        return "longer than 249 characters";
    if (strcmp (v, ".") == 0 || strcmp (v, "..") == 0)
        return "\".\" and \"..\" are not topic names";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) v[i];
        if (!(isalnum (c) || c == '.' || c == '_' || c == '-'))
            return "invalid character";
    }
    return NULL;
}

/* A name that goes into file names, container names and labels as it is. */
static const char *
check_name (const char *v)
{
    size_t n = strlen (v);
    if (n == 0)
        return "empty";
    if (n > 64)
        return "longer than 64 characters";
    if (!isalnum ((unsigned char) v[0]))
        return "the first character is not a letter or digit";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char) v[i];
        if (!(isalnum (c) || c == '.' || c == '_' || c == '-'))
            return "invalid character";
    }
    return NULL;
}

static const char *
check_text (const char *v)
{
    for (const unsigned char *p = (const unsigned char *) v; *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return "control character";
    return NULL;
}

static const char *
check_template (const char *v)
{
    const char *t = check_text (v);
    if (t != NULL)
        return t;
    static const kiwi_goal_vars probe = { "", "", "", "", "", "" };
    kiwi_error_t e = NULL;
    char *s = kiwi_template_expand (v, &probe, 0, &e);
    free (s);
    if (e != NULL) {
        kiwi_error_free (&e);
        return "unknown placeholder";
    }
    return NULL;
}

static const char *
check_loglevel (const char *v)
{
    kiwi_log_level l;
    return kiwi_log_level_parse (v, &l) < 0 ? "unknown level" : NULL;
}

/* Parses a number for a numeric setting. */
const char *
kiwi__setting_parse_count (const kiwi_setting_def *d, const char *v, uint64_t *out)
{
    if (*v == '\0')
        return "empty";
    if (!isdigit ((unsigned char) *v))
        return "not a number";
    errno = 0;
    char *end = NULL;
    unsigned long long n = strtoull (v, &end, 10);
    if (errno == ERANGE)
        return "too large";
    unsigned long long mult = 1;
    if (d->type == KIWI_SETTING_TYPE_BYTES && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'K': case 'k': mult = 1024ULL; end++; break;
        case 'M': case 'm': mult = 1024ULL * 1024; end++; break;
        case 'G': case 'g': mult = 1024ULL * 1024 * 1024; end++; break;
        default: break;
        }
    }
    if (*end != '\0')
        return "not a number";
    if (n > UINT64_MAX / mult)
        return "too large";
    n *= mult;
    if (n < (unsigned long long) d->min || n > (unsigned long long) d->max)
        return "out of range";
    *out = n;
    return NULL;
}

static bool
enum_ok (const char *values, const char *v)
{
    size_t vl = strlen (v);
    for (const char *p = values; *p;) {
        size_t l = strcspn (p, "|");
        if (l == vl && strncmp (p, v, l) == 0)
            return true;
        p += l;
        if (*p == '|')
            p++;
    }
    return false;
}

const char *
kiwi__setting_parse_int (const kiwi_setting_def *d, const char *v, int64_t *out)
{
    char *end = NULL;
    errno = 0;
    long long n = strtoll (v, &end, 10);
    if (*v == '\0' || end == v || *end != '\0')
        return "not an integer";
    if (errno != 0 || n < d->min || n > d->max)
        return "out of range";
    *out = n;
    return NULL;
}

const char *
kiwi__setting_parse_num (const kiwi_setting_def *d, const char *v, double *out)
{
    char *end = NULL;
    errno = 0;
    double n = strtod (v, &end);
    if (*v == '\0' || end == v || *end != '\0')
        return "not a number";
    if (errno != 0 || n < (double) d->min || n > (double) d->max)
        return "out of range";
    *out = n;
    return NULL;
}

const char *
kiwi__setting_parse_bool (const char *v, bool *out)
{
    static const char *const yes[] = { "true", "1", "yes", "on" }, *const no[] = { "false", "0", "no", "off" };
    for (size_t i = 0; i < 4; i++) {
        if (strcasecmp (v, yes[i]) == 0) {
            *out = true;
            return NULL;
        }
        if (strcasecmp (v, no[i]) == 0) {
            *out = false;
            return NULL;
        }
    }
    return "not a boolean";
}

/* What is wrong with `value` for row d, or NULL; *why_err receives a
 * detailed error where the check makes one (ADDR). */
static const char *
why_bad (const kiwi_setting_def *d, const char *value, kiwi_error_t *why_err)
{
    uint64_t n;
    int64_t i;
    double x;
    bool b;
    switch (d->type) {
    case KIWI_SETTING_TYPE_STR:
        return *value == '\0' ? "empty" : NULL;
    case KIWI_SETTING_TYPE_PATH:
    case KIWI_SETTING_TYPE_SECRET:
    case KIWI_SETTING_TYPE_LIST:
        return NULL;
    case KIWI_SETTING_TYPE_TEXT:
        return check_text (value);
    case KIWI_SETTING_TYPE_ENUM:
        return enum_ok (d->values, value) ? NULL : "not one of the values";
    case KIWI_SETTING_TYPE_ADDR: {
        char host[256];
        int port;
        bool v6;
        if (*value == '\0' || kiwi_hostport_split (value, host, sizeof host, &port, &v6, why_err) == 0)
            return NULL;
        return kiwi_error_msg (*why_err);
    }
    case KIWI_SETTING_TYPE_BROKERS:
        return check_brokers (value);
    case KIWI_SETTING_TYPE_TOPIC:
        return check_topic (value);
    case KIWI_SETTING_TYPE_NAME:
        return check_name (value);
    case KIWI_SETTING_TYPE_TEMPLATE:
        return check_template (value);
    case KIWI_SETTING_TYPE_LOGLEVEL:
        return check_loglevel (value);
    case KIWI_SETTING_TYPE_INT:
        return kiwi__setting_parse_int (d, value, &i);
    case KIWI_SETTING_TYPE_NUM:
        return kiwi__setting_parse_num (d, value, &x);
    case KIWI_SETTING_TYPE_SECONDS:
    case KIWI_SETTING_TYPE_BYTES:
        return kiwi__setting_parse_count (d, value, &n);
    case KIWI_SETTING_TYPE_BOOL:
        return kiwi__setting_parse_bool (value, &b);
    }
    return "unknown type";
}

int
kiwi_setting_check (const kiwi_setting_def *d, const char *value, const char *origin, int code, kiwi_error_t *err)
{
    kiwi_error_t detail = NULL;
    const char *why = why_bad (d, value, &detail);
    if (why == NULL)
        return 0;
    char buf[160];
    const char *accepted = kiwi_setting_accepted (d, buf, sizeof buf);
    if (d->type == KIWI_SETTING_TYPE_SECRET)
        kiwi_error_make_code (err, code, "%s: invalid value (from %s): %s (accepted: %s)", d->key, origin, why,
                              accepted);
    else
        kiwi_error_make_code (err, code, "%s: invalid value `%s` (from %s): %s (accepted: %s)", d->key, value, origin,
                              why, accepted);
    kiwi_error_free (&detail);
    return -1;
}

/* ---------------------------------------------------------------- HOST:PORT */

int
kiwi_hostport_split (const char *addr, char *host, size_t hcap, int *port, bool *v6, kiwi_error_t *err)
{
    const char *colon;
    size_t hl;
    *v6 = addr[0] == '[';
    if (*v6) {
        const char *close = strchr (addr, ']');
        if (close == NULL || close[1] != ':')
            return kiwi_error_make (err, 0, "an IPv6 address is written [ADDRESS]:PORT");
        colon = close + 1;
        addr++;
        hl = (size_t) (close - addr);
    } else {
        colon = strrchr (addr, ':');
        if (colon == NULL)
            return kiwi_error_make (err, 0, "no `:PORT`");
        hl = (size_t) (colon - addr);
    }
    if (hl == 0 || hl >= hcap)
        return kiwi_error_make (err, 0, "no host before the port");
    memcpy (host, addr, hl);
    host[hl] = '\0';
    if (*v6) {
        struct in6_addr a6;
        if (inet_pton (AF_INET6, host, &a6) != 1)
            return kiwi_error_make (err, 0, "`%s` is not an IPv6 address", host);
    } else if (strspn (host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != hl)
        return kiwi_error_make (err, 0, "`%s` is not an IPv4 address or host name (an IPv6 address goes in [])",
                                host);
    const char *p = colon + 1;
    size_t pl = strlen (p);
    if (pl == 0 || pl > 5 || strspn (p, "0123456789") != pl || atoi (p) < 1 || atoi (p) > 65535)
        return kiwi_error_make (err, 0, "`%s` is not a port from 1 to 65535", p);
    *port = atoi (p);
    return 0;
}

/* ---------------------------------------------------------------- goal template */

char *
kiwi_template_expand (const char *tmpl, const kiwi_goal_vars *v, int code, kiwi_error_t *err)
{
    static const struct {
        const char *name;
        size_t off;
    } vars[] = {
        { "name", offsetof (kiwi_goal_vars, name) },     { "sha", offsetof (kiwi_goal_vars, sha) },
        { "branch", offsetof (kiwi_goal_vars, branch) }, { "url", offsetof (kiwi_goal_vars, url) },
        { "repo", offsetof (kiwi_goal_vars, repo) },     { "event", offsetof (kiwi_goal_vars, event) },
    };
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream (&out, &len);
    if (f == NULL) {
        kiwi_error_make (err, errno, "expanding the goal template");
        return NULL;
    }
    for (const char *p = tmpl; *p;) {
        /* A placeholder is `{` lowercase letters or '_' `}`; any other `{`
         * is literal text. */
        size_t n = p[0] == '{' ? strspn (p + 1, "abcdefghijklmnopqrstuvwxyz_") : 0;
        if (n == 0 || p[1 + n] != '}') {
            fputc (*p++, f);
            continue;
        }
        bool found = false;
        for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
            if (strlen (vars[i].name) == n && strncmp (p + 1, vars[i].name, n) == 0) {
                const char *val = *(const char *const *) ((const char *) v + vars[i].off);
                fputs (val ? val : "", f);
                found = true;
                break;
            }
        if (!found) {
            fclose (f);
            free (out);
            kiwi_error_make_code (err, code,
                                  "goal template: unknown placeholder `%.*s` (known: {name} {sha} {branch} {url} "
                                  "{repo} {event})",
                                  (int) n + 2, p);
            return NULL;
        }
        p += n + 2;
    }
    if (fclose (f) != 0) {
        free (out);
        kiwi_error_make (err, ENOMEM, "expanding the goal template");
        return NULL;
    }
    return out;
}
