/*
 * kafka-conf.c: parsing and applying operator-given librdkafka properties
 * (see kafka-conf.h).
 */
#include "common/kafka-conf.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/cleanup.h"
#include "common/config-file.h"

static bool
name_ok (const char *n)
{
    if (*n == '\0')
        return false;
    for (const char *p = n; *p; p++)
        if (!(islower ((unsigned char) *p) || isdigit ((unsigned char) *p) || *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

/* One item ("name=value", escapes already resolved) into the pairs. */
static int
add_item (char *item, const char *origin, unsigned index, kiwi_strv *pairs, kiwi_error_t *err)
{
    char *eq = strchr (item, '=');
    if (eq == NULL) {
        /* no '=': the whole item might be a value; show its length only */
        return kiwi_error_make (err, 0, "%s: item %u (%zu characters) is not name=value", origin, index,
                                strlen (kiwi_trim (item)));
    }
    *eq = '\0';
    char *name = kiwi_trim (item), *value = kiwi_trim (eq + 1);
    if (!name_ok (name))
        return kiwi_error_make (err, 0,
                                "%s: item %u: `%.64s` is not a librdkafka property name (lower-case letters, "
                                "digits, '.', '_', '-')",
                                origin, index, name);
    if (kiwi_strv_add (pairs, name) < 0 || kiwi_strv_add (pairs, value) < 0)
        return kiwi_error_make (err, ENOMEM, "%s", origin);
    return 0;
}

int
kiwi_kafka_props_parse (const char *spec, const char *origin, kiwi_strv *pairs, kiwi_error_t *err)
{
    if (spec == NULL)
        return 0;
    size_t len = strlen (spec);
    cleanup_free char *item = malloc (len + 1);
    if (item == NULL)
        return kiwi_error_make (err, ENOMEM, "%s", origin);
    size_t n = 0;
    unsigned index = 0;
    for (const char *p = spec;; p++) {
        if (*p == '\\' && (p[1] == ',' || p[1] == '\\')) {
            item[n++] = *++p;
            continue;
        }
        if (*p != ',' && *p != '\0') {
            item[n++] = *p;
            continue;
        }
        item[n] = '\0';
        index++;
        if (*kiwi_trim (item) != '\0' && add_item (item, origin, index, pairs, err) < 0)
            return -1;
        n = 0;
        if (*p == '\0')
            break;
    }
    return 0;
}

bool
kiwi_kafka_prop_is_secret (const char *name)
{
    static const char *const words[] = { "password", "secret", "jaas", "key.pem", "oauthbearer.config", "token" };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
        if (strstr (name, words[i]) != NULL)
            return true;
    return false;
}

int
kiwi_kafka_props_apply (rd_kafka_conf_t *conf, const kiwi_strv *pairs, kiwi_error_t *err)
{
    for (size_t i = 0; i + 1 < pairs->n; i += 2) {
        const char *name = pairs->v[i], *value = pairs->v[i + 1];
        char errstr[512] = "";
        if (rd_kafka_conf_set (conf, name, value, errstr, sizeof errstr) == RD_KAFKA_CONF_OK)
            continue;
        if (kiwi_kafka_prop_is_secret (name))
            return kiwi_error_make (err, 0, "kafka property %s (value not shown): %s", name, errstr);
        return kiwi_error_make (err, 0, "kafka property %s=%s: %s", name, value, errstr);
    }
    return 0;
}
