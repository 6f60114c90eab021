/*
 * kafka-conf.h: librdkafka properties given by the operator, for both
 * programs (kiwi and kiwi-worker): SASL, TLS and whatever else a site's
 * brokers need, passed through to rd_kafka_conf_set as they are.
 *
 * A property list is text: "name=value" items separated by commas, blanks
 * around names and values ignored, empty items skipped; a comma or a
 * backslash inside a value is written "\," or "\\". Example:
 *   security.protocol=SASL_SSL,sasl.mechanism=SCRAM-SHA-512,sasl.username=kiwi,sasl.password=...
 *
 * Some properties hold secrets (sasl.password, ssl.key.password, ...):
 * kiwi_kafka_prop_is_secret() says which; their values are never printed,
 * in errors or in configuration dumps.
 *
 * Ownership: the pairs are appended to a caller-owned kiwi_strv (name,
 * value, name, value, ...).
 */
#ifndef KIWI_COMMON_KAFKA_CONF_H
#define KIWI_COMMON_KAFKA_CONF_H

#include <librdkafka/rdkafka.h>
#include <stdbool.h>

#include "common/error.h"
#include "common/strv.h"

/* Appends the pairs of `spec` to *pairs. An item without '=' or with an
 * empty or malformed name is an error naming the item (the name only, never
 * a value). `origin` says where the list came from, for the message. */
int kiwi_kafka_props_parse (const char *spec, const char *origin, kiwi_strv *pairs, kiwi_error_t *err);

/* Whether a property's value is a secret (never printed). */
bool kiwi_kafka_prop_is_secret (const char *name);

/* Calls rd_kafka_conf_set for each pair, in order. A refusal is an error
 * naming the property and librdkafka's reason (its errstr), and the value
 * unless it is a secret. */
int kiwi_kafka_props_apply (rd_kafka_conf_t *conf, const kiwi_strv *pairs, kiwi_error_t *err);

#endif
