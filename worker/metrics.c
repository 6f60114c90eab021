/*
 * metrics.c: counters, gauges and histograms in the Prometheus text format
 * (see metrics.h).
 */
#include "worker/metrics.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/strv.h"

typedef struct series {
    struct series *next;
    char **values;     /* one per label of the family */
    double value;      /* counter, gauge */
    uint64_t *buckets; /* histogram: observations per bucket (not cumulative), nbounds + 1 */
    double sum;
    uint64_t count;
} series;

struct kiwi_metric {
    struct kiwi_metric *next;
    kiwi_metrics *reg;
    kiwi_metric_type type;
    char *name, *help;
    char **labels;
    size_t nlabels;
    double *bounds;
    size_t nbounds;
    series *head, **tail;
    size_t nseries;
};

struct kiwi_metrics {
    pthread_mutex_t lock;
    kiwi_metric *head, **tail;
};

kiwi_metrics *
kiwi_metrics_new (void)
{
    kiwi_metrics *m = calloc (1, sizeof *m);
    if (m == NULL)
        return NULL;
    pthread_mutex_init (&m->lock, NULL);
    m->tail = &m->head;
    return m;
}

static void
strings_free (char **v, size_t n)
{
    for (size_t i = 0; v && i < n; i++)
        free (v[i]);
    free (v);
}

static void
family_free (kiwi_metric *f)
{
    while (f->head) {
        series *s = f->head;
        f->head = s->next;
        strings_free (s->values, f->nlabels);
        free (s->buckets);
        free (s);
    }
    strings_free (f->labels, f->nlabels);
    free (f->bounds);
    free (f->name);
    free (f->help);
    free (f);
}

void
kiwi_metrics_free (kiwi_metrics *m)
{
    if (m == NULL)
        return;
    while (m->head) {
        kiwi_metric *f = m->head;
        m->head = f->next;
        family_free (f);
    }
    pthread_mutex_destroy (&m->lock);
    free (m);
}

/* [a-zA-Z_:][a-zA-Z0-9_:]* for metric names; without ':' for labels. */
static bool
valid_name (const char *s, size_t len, bool colon)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':')
                  || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

static int
split_labels (kiwi_metric *f, const char *labels, kiwi_error_t *err)
{
    cleanup_strv kiwi_strv v = KIWI_STRV_INIT;
    if (kiwi_strv_split_list (&v, labels, ",", err) < 0)
        return kiwi_error_wrap (err, "metric %s", f->name);
    for (size_t i = 0; i < v.n; i++) {
        const char *p = v.v[i];
        size_t l = strlen (p);
        if (!valid_name (p, l, false) || (l >= 2 && p[0] == '_' && p[1] == '_')
            || (f->type == KIWI_METRIC_HISTOGRAM && strcmp (p, "le") == 0))
            return kiwi_error_make (err, 0, "metric %s: `%s` is not a label name it may have", f->name, p);
        for (size_t j = 0; j < i; j++)
            if (strcmp (v.v[j], p) == 0)
                return kiwi_error_make (err, 0, "metric %s: label `%s` twice", f->name, p);
    }
    f->nlabels = v.n;
    f->labels = v.v; /* now owned by f (strings_free) */
    v = (kiwi_strv) KIWI_STRV_INIT;
    return 0;
}

kiwi_metric *
kiwi_metrics_register (kiwi_metrics *m, kiwi_metric_type type, const char *name, const char *help,
                       const char *labels, const double *bounds, size_t nbounds, kiwi_error_t *err)
{
    if (name == NULL || !valid_name (name, strlen (name), true)) {
        kiwi_error_make (err, 0, "`%s` is not a metric name", name ? name : "");
        return NULL;
    }
    kiwi_metric *f = calloc (1, sizeof *f);
    if (f == NULL || (f->name = strdup (name)) == NULL || (f->help = strdup (help ? help : "")) == NULL) {
        if (f)
            family_free (f);
        kiwi_error_make (err, ENOMEM, "metric %s", name);
        return NULL;
    }
    f->reg = m;
    f->type = type;
    f->tail = &f->head;
    if (split_labels (f, labels, err) < 0) {
        family_free (f);
        return NULL;
    }
    if (type == KIWI_METRIC_HISTOGRAM) {
        f->bounds = malloc ((nbounds ? nbounds : 1) * sizeof *f->bounds);
        if (f->bounds == NULL) {
            family_free (f);
            kiwi_error_make (err, ENOMEM, "metric %s", name);
            return NULL;
        }
        for (size_t i = 0; i < nbounds; i++) {
            if (!isfinite (bounds[i]) || (i > 0 && bounds[i] <= bounds[i - 1])) {
                family_free (f);
                kiwi_error_make (err, 0, "metric %s: bucket bounds must be finite and strictly increasing", name);
                return NULL;
            }
            f->bounds[i] = bounds[i];
        }
        f->nbounds = nbounds;
    }
    pthread_mutex_lock (&m->lock);
    for (kiwi_metric *o = m->head; o; o = o->next)
        if (strcmp (o->name, name) == 0) {
            pthread_mutex_unlock (&m->lock);
            family_free (f);
            kiwi_error_make (err, 0, "metric %s registered twice", name);
            return NULL;
        }
    *m->tail = f;
    m->tail = &f->next;
    pthread_mutex_unlock (&m->lock);
    return f;
}

/* The series with these values, made if need be. Called with the lock held. */
static series *
series_get (kiwi_metric *f, const char *const *values, kiwi_error_t *err)
{
    for (size_t i = 0; i < f->nlabels; i++)
        if (values == NULL || values[i] == NULL) {
            kiwi_error_make (err, 0, "metric %s: %zu label values needed", f->name, f->nlabels);
            return NULL;
        }
    for (series *s = f->head; s; s = s->next) {
        size_t i = 0;
        while (i < f->nlabels && strcmp (s->values[i], values[i]) == 0)
            i++;
        if (i == f->nlabels)
            return s;
    }
    if (f->nseries >= KIWI_METRIC_MAX_SERIES) {
        kiwi_error_make (err, 0, "metric %s: more than %d series", f->name, KIWI_METRIC_MAX_SERIES);
        return NULL;
    }
    series *s = calloc (1, sizeof *s);
    if (s == NULL)
        goto nomem;
    if (f->nlabels && (s->values = calloc (f->nlabels, sizeof *s->values)) == NULL)
        goto nomem;
    for (size_t i = 0; i < f->nlabels; i++)
        if ((s->values[i] = strdup (values[i])) == NULL)
            goto nomem;
    if (f->type == KIWI_METRIC_HISTOGRAM && (s->buckets = calloc (f->nbounds + 1, sizeof *s->buckets)) == NULL)
        goto nomem;
    *f->tail = s;
    f->tail = &s->next;
    f->nseries++;
    return s;
nomem:
    if (s) {
        strings_free (s->values, f->nlabels);
        free (s);
    }
    kiwi_error_make (err, ENOMEM, "metric %s", f->name);
    return NULL;
}

typedef enum { OP_ADD, OP_SET, OP_OBSERVE, OP_TOUCH } update_op;

static int
update (kiwi_metric *f, const char *const *values, update_op op, double v, kiwi_error_t *err)
{
    static const char *const ops[] = { "add", "set", "observe", "touch" };
    bool fits = op == OP_TOUCH || (op == OP_ADD && f->type != KIWI_METRIC_HISTOGRAM)
                || (op == OP_SET && f->type == KIWI_METRIC_GAUGE)
                || (op == OP_OBSERVE && f->type == KIWI_METRIC_HISTOGRAM);
    if (!fits)
        return kiwi_error_make (err, 0, "metric %s: %s does not apply to its type", f->name, ops[op]);
    if (op != OP_TOUCH && isnan (v))
        return kiwi_error_make (err, 0, "metric %s: NaN", f->name);
    if (op == OP_ADD && f->type == KIWI_METRIC_COUNTER && v < 0)
        return kiwi_error_make (err, 0, "metric %s: a counter only goes up", f->name);
    pthread_mutex_lock (&f->reg->lock);
    series *s = series_get (f, values, err);
    if (s != NULL) {
        if (op == OP_ADD)
            s->value += v;
        else if (op == OP_SET)
            s->value = v;
        else if (op == OP_OBSERVE) {
            size_t b = 0;
            while (b < f->nbounds && v > f->bounds[b])
                b++;
            s->buckets[b]++;
            s->sum += v;
            s->count++;
        }
    }
    pthread_mutex_unlock (&f->reg->lock);
    return s ? 0 : -1;
}

int
kiwi_metric_add (kiwi_metric *f, const char *const *values, double v, kiwi_error_t *err)
{
    return update (f, values, OP_ADD, v, err);
}

int
kiwi_metric_set (kiwi_metric *f, const char *const *values, double v, kiwi_error_t *err)
{
    return update (f, values, OP_SET, v, err);
}

int
kiwi_metric_observe (kiwi_metric *f, const char *const *values, double v, kiwi_error_t *err)
{
    return update (f, values, OP_OBSERVE, v, err);
}

int
kiwi_metric_touch (kiwi_metric *f, const char *const *values, kiwi_error_t *err)
{
    return update (f, values, OP_TOUCH, 0, err);
}

/* ---------- rendering ---------- */

/* A float as the format writes it: +Inf, -Inf, NaN, or the shortest
 * decimal that reads back as the same double. */
static void
put_double (FILE *out, double v)
{
    if (isnan (v)) {
        fputs ("NaN", out);
        return;
    }
    if (isinf (v)) {
        fputs (v > 0 ? "+Inf" : "-Inf", out);
        return;
    }
    char buf[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf (buf, sizeof buf, "%.*g", prec, v);
        if (strtod (buf, NULL) == v)
            break;
    }
    fputs (buf, out);
}

/* HELP text: backslash and line feed escaped. Label values: double quote
 * too. */
static void
put_escaped (FILE *out, const char *s, bool quote)
{
    for (; *s; s++) {
        if (*s == '\\')
            fputs ("\\\\", out);
        else if (*s == '\n')
            fputs ("\\n", out);
        else if (quote && *s == '"')
            fputs ("\\\"", out);
        else
            fputc (*s, out);
    }
}

/* name{l1="v1",...[,le="bound"]} value */
static void
put_sample (FILE *out, const kiwi_metric *f, const series *s, const char *suffix, const double *le, double v)
{
    fputs (f->name, out);
    fputs (suffix, out);
    if (f->nlabels || le) {
        fputc ('{', out);
        for (size_t i = 0; i < f->nlabels; i++) {
            fprintf (out, "%s%s=\"", i ? "," : "", f->labels[i]);
            put_escaped (out, s->values[i], true);
            fputc ('"', out);
        }
        if (le) {
            fprintf (out, "%sle=\"", f->nlabels ? "," : "");
            put_double (out, *le);
            fputc ('"', out);
        }
        fputc ('}', out);
    }
    fputc (' ', out);
    put_double (out, v);
    fputc ('\n', out);
}

char *
kiwi_metrics_render (kiwi_metrics *m, size_t *len)
{
    static const char *const types[] = { "counter", "gauge", "histogram" };
    char *buf = NULL;
    size_t size = 0;
    FILE *out = open_memstream (&buf, &size);
    if (out == NULL)
        return NULL;
    pthread_mutex_lock (&m->lock);
    for (const kiwi_metric *f = m->head; f; f = f->next) {
        fprintf (out, "# HELP %s ", f->name);
        put_escaped (out, f->help, false);
        fprintf (out, "\n# TYPE %s %s\n", f->name, types[f->type]);
        for (const series *s = f->head; s; s = s->next) {
            if (f->type != KIWI_METRIC_HISTOGRAM) {
                put_sample (out, f, s, "", NULL, s->value);
                continue;
            }
            uint64_t cum = 0;
            for (size_t b = 0; b <= f->nbounds; b++) {
                double inf = INFINITY;
                cum += s->buckets[b];
                put_sample (out, f, s, "_bucket", b < f->nbounds ? &f->bounds[b] : &inf, (double) cum);
            }
            put_sample (out, f, s, "_sum", NULL, s->sum);
            put_sample (out, f, s, "_count", NULL, (double) s->count);
        }
    }
    pthread_mutex_unlock (&m->lock);
    if (fclose (out) != 0) {
        free (buf);
        return NULL;
    }
    if (len)
        *len = size;
    return buf;
}
