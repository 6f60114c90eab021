/*
 * client.c: the provider selector and the HTTP client every provider shares:
 * one libcurl handle per client, bounded response bodies, retries with
 * exponential backoff and jitter honouring retry-after, named failures, and
 * the key kept out of every message. With a redaction mask in the config,
 * every request body is masked before it is sent (the system prompt, the
 * conversation, tool calls and tool results: whatever a test printed), and
 * every error message before it is returned or logged.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/cleanup.h"
#include "common/log.h"
#include "models/models-internal.h"
#include "common/buf.h"

/* ------------------------------------------------------------ selector --- */

static const kiwi_model_provider *const providers[] = {
    &kiwi__model_anthropic,
    &kiwi__model_openai,
    &kiwi__model_gemini,
};

#define N_PROVIDERS (sizeof providers / sizeof providers[0])

const kiwi_model_provider *
kiwi_model_provider_find (const char *name, kiwi_error_t *err)
{
    for (size_t i = 0; name != NULL && i < N_PROVIDERS; i++)
        if (strcmp (providers[i]->name, name) == 0)
            return providers[i];
    kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "unknown model provider '%s' (known: anthropic, openai, gemini)",
                          name != NULL ? name : "(none)");
    return NULL;
}

const char *
kiwi_model_provider_key_env (const kiwi_model_provider *p)
{
    return p->key_env;
}

const char *
kiwi_model_provider_default_base_url (const kiwi_model_provider *p)
{
    return p->default_base_url;
}

extern char **environ;

const char *
kiwi_model_key_from_env (const kiwi_model_provider *p, const char *const *envp, kiwi_error_t *err)
{
    if (envp == NULL)
        envp = (const char *const *) environ;
    size_t kl = strlen (p->key_env);
    for (size_t i = 0; envp != NULL && envp[i] != NULL; i++)
        if (strncmp (envp[i], p->key_env, kl) == 0 && envp[i][kl] == '=') {
            const char *v = envp[i] + kl + 1;
            if (*v == '\0')
                break;
            return v;
        }
    kiwi_error_make_code (err, KIWI_MODEL_E_AUTH, "%s: %s is not set in the worker's environment", p->name,
                          p->key_env);
    return NULL;
}

/* ------------------------------------------------------- retry helpers --- */

static bool
parse_number (const char *s, double *out)
{
    while (*s == ' ' || *s == '\t')
        s++;
    if (!isdigit ((unsigned char) *s))
        return false;
    char *end = NULL;
    errno = 0;
    double v = strtod (s, &end);
    if (errno != 0 || end == s || !isfinite (v) || v < 0)
        return false;
    while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
        end++;
    if (*end != '\0')
        return false;
    *out = v;
    return true;
}

static long
clamp_ms (double ms)
{
    if (ms > 86400000.0)
        return 86400000L;
    return (long) ceil (ms);
}

long
kiwi__model_retry_after_ms (const char *retry_after, const char *retry_after_ms, time_t now)
{
    double v;
    if (retry_after_ms != NULL && parse_number (retry_after_ms, &v))
        return clamp_ms (v);
    if (retry_after == NULL)
        return -1;
    if (parse_number (retry_after, &v))
        return clamp_ms (v * 1000.0);
    time_t t = curl_getdate (retry_after, NULL);
    if (t == (time_t) -1)
        return -1;
    if (t <= now)
        return 0;
    return clamp_ms ((double) (t - now) * 1000.0);
}

long
kiwi__model_duration_ms (const char *s)
{
    if (s == NULL)
        return -1;
    size_t n = strlen (s);
    if (n < 2 || s[n - 1] != 's')
        return -1;
    char buf[64];
    if (n - 1 >= sizeof buf)
        return -1;
    memcpy (buf, s, n - 1);
    buf[n - 1] = '\0';
    double v;
    if (!parse_number (buf, &v))
        return -1;
    return clamp_ms (v * 1000.0);
}

long
kiwi__model_backoff_ms (long base_ms, long max_ms, int retry, double rnd)
{
    if (retry < 1)
        retry = 1;
    double d = (double) base_ms;
    for (int i = 1; i < retry && d < (double) max_ms; i++)
        d *= 2;
    if (d > (double) max_ms)
        d = (double) max_ms;
    if (rnd < 0)
        rnd = 0;
    if (rnd > 1)
        rnd = 1;
    return (long) (d / 2 + rnd * d / 2);
}

kiwi_model_failure
kiwi__model_classify_status (long status, const kiwi__model_error_info *info, bool *retryable)
{
    *retryable = false;
    if (status == 401 || status == 403 || (info != NULL && info->auth))
        return KIWI_MODEL_E_AUTH;
    switch (status) {
    case 429:
        *retryable = info == NULL || !info->quota;
        return KIWI_MODEL_E_RATE_LIMITED;
    case 529:
    case 503:
        *retryable = true;
        return KIWI_MODEL_E_OVERLOADED;
    case 500:
    case 502:
    case 504:
        *retryable = true;
        return KIWI_MODEL_E_SERVER_ERROR;
    case 408:
        *retryable = true;
        return KIWI_MODEL_E_TIMEOUT;
    default:
        break;
    }
    if (status >= 500 && status <= 599)
        return KIWI_MODEL_E_SERVER_ERROR;
    if (status >= 400 && status <= 499)
        return KIWI_MODEL_E_BAD_REQUEST;
    return KIWI_MODEL_E_MALFORMED_RESPONSE;
}

void
kiwi__model_scrub (char **msg, const char *secret)
{
    if (msg == NULL || *msg == NULL || secret == NULL)
        return;
    size_t sl = strlen (secret);
    if (sl < 4)
        return;
    static const char repl[] = "[redacted]";
    char *p;
    while ((p = strstr (*msg, secret)) != NULL) {
        size_t pre = (size_t) (p - *msg), rest = strlen (p + sl);
        char *n = malloc (pre + sizeof repl - 1 + rest + 1);
        if (n == NULL) {
            memset (p, '*', sl); /* no memory for the nicer form: still never show it */
            continue;
        }
        memcpy (n, *msg, pre);
        memcpy (n + pre, repl, sizeof repl - 1);
        memcpy (n + pre + sizeof repl - 1, p + sl, rest + 1);
        free (*msg);
        *msg = n;
    }
}

void
kiwi__model_error_info_clear (kiwi__model_error_info *info)
{
    free (info->type);
    free (info->code);
    free (info->message);
    free (info->request_id);
    memset (info, 0, sizeof *info);
    info->retry_after_ms = -1;
}

/* -------------------------------------------------------------- client --- */

#define DEFAULT_CONNECT_TIMEOUT_MS 10000L
#define DEFAULT_REQUEST_TIMEOUT_MS 300000L
#define DEFAULT_MAX_ATTEMPTS 5
#define DEFAULT_BACKOFF_BASE_MS 1000L
#define DEFAULT_BACKOFF_MAX_MS 60000L
#define DEFAULT_MAX_RESPONSE (8u << 20)
#define MAX_ERROR_QUOTE 600

struct kiwi_model_client {
    const kiwi_model_provider *p;
    kiwi_model_config cfg; /* base_url and api_key point at the copies below */
    char *base_url;
    char *api_key;
    bool native;
    CURL *curl;
    uint64_t rng;
    kiwi_model_usage usage;
    uint64_t calls;
    uint64_t attempts;
};

static int
default_sleep (void *ctx, long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
        ;
    return 0;
}

static double
next_random (kiwi_model_client *c)
{
    /* xorshift64*: jitter only, no secrecy needed */
    uint64_t x = c->rng;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    c->rng = x;
    return (double) ((x * 2685821657736338717ULL) >> 11) / (double) (1ULL << 53);
}

kiwi_model_client *
kiwi_model_client_open (const kiwi_model_provider *p, const kiwi_model_config *cfg, kiwi_error_t *err)
{
    if (p == NULL || cfg == NULL) {
        kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "no provider or no config");
        return NULL;
    }
    const char *base = cfg->base_url != NULL && cfg->base_url[0] != '\0' ? cfg->base_url : p->default_base_url;
    if (strncmp (base, "http://", 7) != 0 && strncmp (base, "https://", 8) != 0) {
        kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "%s: base URL '%s' is not http:// or https://", p->name, base);
        return NULL;
    }
    bool has_key = cfg->api_key != NULL && cfg->api_key[0] != '\0';
    if (!has_key && (cfg->base_url == NULL || cfg->base_url[0] == '\0')) {
        kiwi_error_make_code (err, KIWI_MODEL_E_AUTH, "%s: no API key (set %s in the worker's environment)", p->name,
                              p->key_env);
        return NULL;
    }
    if (has_key && strpbrk (cfg->api_key, "\r\n") != NULL) {
        kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "%s: the API key contains a line break", p->name);
        return NULL;
    }
    if (curl_global_init (CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        kiwi_error_make_code (err, KIWI_MODEL_E_TRANSPORT, "%s: curl_global_init failed", p->name);
        return NULL;
    }
    kiwi_model_client *c = calloc (1, sizeof *c);
    if (c == NULL) {
        kiwi_error_make (err, ENOMEM, "%s: allocating a client", p->name);
        return NULL;
    }
    c->p = p;
    c->cfg = *cfg;
    c->base_url = strdup (base);
    c->api_key = has_key ? strdup (cfg->api_key) : NULL;
    c->curl = curl_easy_init ();
    if (c->base_url == NULL || (has_key && c->api_key == NULL) || c->curl == NULL) {
        kiwi_model_client_close (c);
        kiwi_error_make (err, ENOMEM, "%s: allocating a client", p->name);
        return NULL;
    }
    size_t bl = strlen (c->base_url);
    while (bl > 0 && c->base_url[bl - 1] == '/')
        c->base_url[--bl] = '\0';
    c->native = strcmp (c->base_url, p->default_base_url) == 0;
    c->cfg.base_url = c->base_url;
    c->cfg.api_key = c->api_key;
    if (c->cfg.connect_timeout_ms <= 0)
        c->cfg.connect_timeout_ms = DEFAULT_CONNECT_TIMEOUT_MS;
    if (c->cfg.request_timeout_ms <= 0)
        c->cfg.request_timeout_ms = DEFAULT_REQUEST_TIMEOUT_MS;
    if (c->cfg.max_attempts <= 0)
        c->cfg.max_attempts = DEFAULT_MAX_ATTEMPTS;
    if (c->cfg.backoff_base_ms <= 0)
        c->cfg.backoff_base_ms = DEFAULT_BACKOFF_BASE_MS;
    if (c->cfg.backoff_max_ms <= 0)
        c->cfg.backoff_max_ms = DEFAULT_BACKOFF_MAX_MS;
    if (c->cfg.backoff_max_ms < c->cfg.backoff_base_ms)
        c->cfg.backoff_max_ms = c->cfg.backoff_base_ms;
    if (c->cfg.max_response_bytes == 0)
        c->cfg.max_response_bytes = DEFAULT_MAX_RESPONSE;
    if (c->cfg.sleep == NULL) {
        c->cfg.sleep = default_sleep;
        c->cfg.sleep_ctx = NULL;
    }
    uint64_t seed = 0;
    if (getrandom (&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t) sizeof seed || seed == 0) {
        struct timespec ts;
        clock_gettime (CLOCK_MONOTONIC, &ts);
        seed = ((uint64_t) ts.tv_nsec << 20) ^ (uint64_t) ts.tv_sec ^ (uint64_t) (uintptr_t) c;
    }
    c->rng = seed != 0 ? seed : 0x9e3779b97f4a7c15ULL;
    return c;
}

void
kiwi_model_client_close (kiwi_model_client *c)
{
    if (c == NULL)
        return;
    if (c->curl != NULL)
        curl_easy_cleanup (c->curl);
    free (c->base_url);
    if (c->api_key != NULL) {
        explicit_bzero (c->api_key, strlen (c->api_key));
        free (c->api_key);
    }
    free (c);
}

kiwi_model_usage
kiwi_model_client_usage (const kiwi_model_client *c)
{
    return c->usage;
}

uint64_t
kiwi_model_client_calls (const kiwi_model_client *c)
{
    return c->calls;
}

uint64_t
kiwi_model_client_attempts (const kiwi_model_client *c)
{
    return c->attempts;
}

double
kiwi_model_client_cost (const kiwi_model_client *c, kiwi_model_usage usage)
{
    uint64_t cached = usage.cache_write_tokens + usage.cache_read_tokens;
    uint64_t plain = usage.input_tokens > cached ? usage.input_tokens - cached : 0;
    double in = (double) plain + (double) usage.cache_write_tokens * c->p->cache_write_factor
                + (double) usage.cache_read_tokens * c->p->cache_read_factor;
    return in * c->cfg.price_input_per_mtok / 1e6 + (double) usage.output_tokens * c->cfg.price_output_per_mtok / 1e6;
}

/* One HTTP exchange: what came back. */
typedef struct exchange {
    kiwi_buf body;    /* at most body.max bytes: more is too_large */
    bool too_large;
    char *retry_after;
    char *retry_after_ms;
    char *request_id;
    const char *request_id_header;
} exchange;

static void
exchange_clear (exchange *x)
{
    kiwi_buf_free (&x->body);
    free (x->retry_after);
    free (x->retry_after_ms);
    free (x->request_id);
    x->retry_after = x->retry_after_ms = x->request_id = NULL;
    x->too_large = false;
}

static size_t
on_body (char *data, size_t size, size_t nmemb, void *userdata)
{
    exchange *x = userdata;
    size_t n = size * nmemb;
    if (n > x->body.max - x->body.len) {
        x->too_large = true;
        return 0; /* aborts the transfer: CURLE_WRITE_ERROR */
    }
    return kiwi_buf_append (&x->body, data, n, NULL) < 0 ? 0 : n;
}

/* If the header line is `name: value`, a copy of the trimmed value. */
static char *
header_value (const char *line, size_t n, const char *name)
{
    size_t nl = strlen (name);
    if (n <= nl || strncasecmp (line, name, nl) != 0 || line[nl] != ':')
        return NULL;
    const char *v = line + nl + 1, *end = line + n;
    while (v < end && (*v == ' ' || *v == '\t'))
        v++;
    while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' ' || end[-1] == '\t'))
        end--;
    return strndup (v, (size_t) (end - v));
}

static size_t
on_header (char *data, size_t size, size_t nmemb, void *userdata)
{
    exchange *x = userdata;
    size_t n = size * nmemb;
    char *v;
    if (n >= 5 && strncmp (data, "HTTP/", 5) == 0) {
        /* a new response (after a 100 Continue, say): forget the old headers */
        free (x->retry_after);
        free (x->retry_after_ms);
        free (x->request_id);
        x->retry_after = x->retry_after_ms = x->request_id = NULL;
    } else if ((v = header_value (data, n, "retry-after-ms")) != NULL) {
        free (x->retry_after_ms);
        x->retry_after_ms = v;
    } else if ((v = header_value (data, n, "retry-after")) != NULL) {
        free (x->retry_after);
        x->retry_after = v;
    } else if (x->request_id_header != NULL && (v = header_value (data, n, x->request_id_header)) != NULL) {
        free (x->request_id);
        x->request_id = v;
    }
    return n;
}

/* A printable, bounded quote of `s` (new string). */
static char *
quote (const char *s, size_t max)
{
    size_t n = strlen (s);
    bool cut = n > max;
    if (cut)
        n = max;
    char *q = malloc (n + 4);
    if (q == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char) s[i];
        q[i] = (ch < 0x20 && ch != '\t') || ch == 0x7f ? ' ' : (char) ch;
    }
    strcpy (q + n, cut ? "..." : "");
    return q;
}

/* The outcome of one attempt. */
typedef struct attempt {
    kiwi_model_failure failure; /* 0 on success */
    bool retryable;
    long status;
    long retry_after_ms; /* -1: no hint */
    char *detail;        /* what to say about it (owned) */
} attempt;

static void
attempt_clear (attempt *a)
{
    free (a->detail);
    memset (a, 0, sizeof *a);
    a->retry_after_ms = -1;
}

static void
attempt_set (attempt *a, kiwi_model_failure f, bool retryable, const char *fmt, ...)
    __attribute__ ((format (printf, 4, 5)));

static void
attempt_set (attempt *a, kiwi_model_failure f, bool retryable, const char *fmt, ...)
{
    a->failure = f;
    a->retryable = retryable;
    va_list ap;
    va_start (ap, fmt);
    kiwi_str_vset (&a->detail, fmt, ap);
    va_end (ap);
}

/* Sends `payload` once; fills *a (failure 0 on a decoded success). */
static void
attempt_once (kiwi_model_client *c, const char *url, struct curl_slist *headers, const char *payload,
              kiwi_model_response *resp, attempt *a)
{
    exchange x = { .body = { .max = c->cfg.max_response_bytes }, .request_id_header = c->p->request_id_header };
    char errbuf[CURL_ERROR_SIZE] = "";
    CURL *h = c->curl;
    curl_easy_reset (h);
    curl_easy_setopt (h, CURLOPT_URL, url);
    curl_easy_setopt (h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt (h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt (h, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt (h, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt (h, CURLOPT_POSTFIELDS, payload);
    curl_easy_setopt (h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t) strlen (payload));
    curl_easy_setopt (h, CURLOPT_CONNECTTIMEOUT_MS, c->cfg.connect_timeout_ms);
    curl_easy_setopt (h, CURLOPT_TIMEOUT_MS, c->cfg.request_timeout_ms);
    curl_easy_setopt (h, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt (h, CURLOPT_USERAGENT, "kiwi/" KIWI_VERSION);
    curl_easy_setopt (h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt (h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt (h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt (h, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt (h, CURLOPT_ERRORBUFFER, errbuf);

    CURLcode rc = curl_easy_perform (h);
    long status = 0;
    curl_easy_getinfo (h, CURLINFO_RESPONSE_CODE, &status);
    a->status = status;
    a->retry_after_ms = kiwi__model_retry_after_ms (x.retry_after, x.retry_after_ms, time (NULL));

    if (rc != CURLE_OK) {
        const char *why = errbuf[0] != '\0' ? errbuf : curl_easy_strerror (rc);
        if (x.too_large)
            attempt_set (a, KIWI_MODEL_E_MALFORMED_RESPONSE, false, "HTTP %ld: response body larger than %zu bytes",
                         status, c->cfg.max_response_bytes);
        else if (rc == CURLE_OPERATION_TIMEDOUT)
            attempt_set (a, KIWI_MODEL_E_TIMEOUT, true, "no complete response within %ld ms (connect %ld ms): %s",
                         c->cfg.request_timeout_ms, c->cfg.connect_timeout_ms, why);
        else
            attempt_set (a, KIWI_MODEL_E_TRANSPORT, true, "%s (curl error %d)", why, (int) rc);
        exchange_clear (&x);
        return;
    }

    json_error_t jerr;
    json_t *body = x.body.len > 0 ? json_loadb (x.body.data, x.body.len, JSON_DECODE_ANY, &jerr) : NULL;

    if (status >= 200 && status <= 299) {
        if (body == NULL) {
            cleanup_free char *q = quote (kiwi_buf_str (&x.body), 120);
            attempt_set (a, KIWI_MODEL_E_MALFORMED_RESPONSE, false, "HTTP %ld: body is not JSON (%s): \"%s\"", status,
                         x.body.len > 0 ? jerr.text : "empty", q != NULL ? q : "");
        } else {
            kiwi_error_t derr = NULL;
            if (c->p->decode (body, resp, &derr) < 0) {
                attempt_set (a, KIWI_MODEL_E_MALFORMED_RESPONSE, false, "HTTP %ld: %s", status,
                             kiwi_error_msg (derr));
                kiwi_error_free (&derr);
                kiwi_model_response_clear (resp);
            } else {
                if (x.request_id != NULL) {
                    free (resp->request_id);
                    resp->request_id = steal_pointer (&x.request_id);
                }
                a->failure = KIWI_MODEL_OK;
            }
        }
        if (body != NULL)
            json_decref (body);
        exchange_clear (&x);
        return;
    }

    kiwi__model_error_info info = { .retry_after_ms = -1 };
    c->p->error_info (body, &info);
    if (a->retry_after_ms < 0 && info.retry_after_ms >= 0)
        a->retry_after_ms = info.retry_after_ms;
    bool retryable;
    kiwi_model_failure f = kiwi__model_classify_status (status, &info, &retryable);
    const char *rid = x.request_id != NULL ? x.request_id : info.request_id;
    cleanup_free char *said = NULL;
    if (info.message != NULL)
        said = quote (info.message, MAX_ERROR_QUOTE);
    else if (x.body.len > 0)
        said = quote (x.body.data, MAX_ERROR_QUOTE);
    char kind[256] = "";
    if (info.type != NULL && info.code != NULL)
        snprintf (kind, sizeof kind, " %s/%s", info.type, info.code);
    else if (info.type != NULL || info.code != NULL)
        snprintf (kind, sizeof kind, " %s", info.type != NULL ? info.type : info.code);
    attempt_set (a, f, retryable, "HTTP %ld%s: \"%s\"%s%s%s%s", status, kind, said != NULL ? said : "(no message)",
                 rid != NULL ? " (request id " : "", rid != NULL ? rid : "", rid != NULL ? ")" : "",
                 info.quota ? " (quota or spend limit reached: not retried)" : "");
    kiwi__model_error_info_clear (&info);
    if (body != NULL)
        json_decref (body);
    exchange_clear (&x);
}

/* *msg masked with the client's redaction mask, if any. */
static void
redact (kiwi_model_client *c, char **msg)
{
    if (c->cfg.redact == NULL || msg == NULL || *msg == NULL)
        return;
    (*msg)[kiwi_mask_apply_buf (c->cfg.redact, *msg, strlen (*msg))] = '\0';
}

int
kiwi_model_client_call (kiwi_model_client *c, const kiwi_model_request *req, kiwi_model_response *resp,
                        kiwi_error_t *err)
{
    const char *pname = c->p->name;
    kiwi_model_response_clear (resp);
    c->calls++;
    if (kiwi__model_request_check (req, err) < 0)
        return kiwi_error_wrap (err, "%s: request", pname);

    kiwi__model_encode_opts opts = { .native = c->native };
    json_t *payload_json = c->p->encode (req, &opts, err);
    if (payload_json == NULL)
        return kiwi_error_wrap (err, "%s: request", pname);
    if (kiwi_mask_json (c->cfg.redact, payload_json) < 0) {
        json_decref (payload_json);
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "%s: out of memory masking the request", pname);
    }
    cleanup_free char *payload = json_dumps (payload_json, JSON_COMPACT);
    json_decref (payload_json);
    cleanup_free char *url = c->p->url (c->base_url, req, err);
    if (url == NULL)
        return kiwi_error_wrap (err, "%s: request", pname);
    if (payload == NULL)
        return kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "%s: out of memory encoding the request", pname);

    struct curl_slist *headers = NULL;
    headers = curl_slist_append (headers, "Content-Type: application/json");
    headers = curl_slist_append (headers, "Accept: application/json");
    headers = curl_slist_append (headers, "Expect:");
    if (headers == NULL || c->p->headers (&headers, c->api_key, err) < 0) {
        curl_slist_free_all (headers);
        if (err != NULL && *err == NULL)
            kiwi_error_make_code (err, KIWI_MODEL_E_INVALID, "%s: out of memory building headers", pname);
        return -1;
    }

    attempt a = { .retry_after_ms = -1 };
    int n = 0;
    int rc = -1;
    char stopped[200] = "";
    for (;;) {
        n++;
        c->attempts++;
        attempt_clear (&a);
        attempt_once (c, url, headers, payload, resp, &a);
        if (a.failure == KIWI_MODEL_OK) {
            resp->attempts = n;
            c->usage.input_tokens += resp->usage.input_tokens;
            c->usage.output_tokens += resp->usage.output_tokens;
            c->usage.cache_write_tokens += resp->usage.cache_write_tokens;
            c->usage.cache_read_tokens += resp->usage.cache_read_tokens;
            rc = 0;
            break;
        }
        kiwi__model_scrub (&a.detail, c->api_key);
        redact (c, &a.detail);
        if (!a.retryable || n >= c->cfg.max_attempts)
            break;
        long wait = kiwi__model_backoff_ms (c->cfg.backoff_base_ms, c->cfg.backoff_max_ms, n, next_random (c));
        if (a.retry_after_ms >= 0) {
            if (a.retry_after_ms > c->cfg.backoff_max_ms) {
                snprintf (stopped, sizeof stopped, "; not retried: the provider asked for %ld ms, over the %ld ms limit",
                          a.retry_after_ms, c->cfg.backoff_max_ms);
                break;
            }
            wait = a.retry_after_ms;
        }
        kiwi_warn ("%s: attempt %d/%d failed: %s: %s; retrying in %ld ms%s", pname, n, c->cfg.max_attempts,
                   kiwi_model_failure_name (a.failure), a.detail != NULL ? a.detail : "", wait,
                   a.retry_after_ms >= 0 ? " (as the provider asked)" : "");
        if (c->cfg.sleep (c->cfg.sleep_ctx, wait) < 0) {
            snprintf (stopped, sizeof stopped, "; retry cancelled while waiting");
            a.failure = KIWI_MODEL_E_CANCELLED;
            break;
        }
    }
    curl_slist_free_all (headers);
    if (rc == 0) {
        attempt_clear (&a);
        return 0;
    }
    kiwi_model_response_clear (resp);
    kiwi_error_make_code (err, (int) a.failure, "%s: %s: %s%s", pname, kiwi_model_failure_name (a.failure),
                          a.detail != NULL ? a.detail : "(no detail)", stopped);
    if (n > 1 && err != NULL && *err != NULL) {
        char *full = NULL;
        if (asprintf (&full, "%s (after %d attempts)", (*err)->msg, n) >= 0) {
            free ((*err)->msg);
            (*err)->msg = full;
        }
    }
    if (err != NULL && *err != NULL) {
        kiwi__model_scrub (&(*err)->msg, c->api_key);
        redact (c, &(*err)->msg);
    }
    attempt_clear (&a);
    return -1;
}
