/*
 * settings-internal.h: what the parts of the settings engine share
 * (settings.c: the table and its uses; settings-check.c: the validators;
 * settings-load.c: the sources).
 */
#ifndef KIWI_COMMON_SETTINGS_INTERNAL_H
#define KIWI_COMMON_SETTINGS_INTERNAL_H

#include "common/settings.h"

extern const kiwi_setting_def kiwi__settings[KIWI_SETTING__COUNT];

/* The parsers behind the validators: NULL when v is good (then *out is
 * set), else what is wrong with it. */
const char *kiwi__setting_parse_count (const kiwi_setting_def *d, const char *v, uint64_t *out);
const char *kiwi__setting_parse_int (const kiwi_setting_def *d, const char *v, int64_t *out);
const char *kiwi__setting_parse_num (const kiwi_setting_def *d, const char *v, double *out);
const char *kiwi__setting_parse_bool (const char *v, bool *out);


/* Stores a value already checked into its field, and `origin` (adopted,
 * may be NULL) as its origin. */
int kiwi__setting_store (kiwi_settings *s, const kiwi_setting_def *d, const char *value, char *origin,
                         kiwi_error_t *err);


/* kafka.property.NAME = VALUE: appended to s->kafka_props. */
int kiwi__setting_kafka_property (kiwi_settings *s, const char *key, const char *value, const char *origin, int code,
                                  kiwi_error_t *err);

/* settings-env.c: warns once (kiwi_warn) about each KIWI_ variable of
 * envp that is no row of any program, nor a known non-setting variable,
 * nor `token_var` (the git token's, may be NULL), naming the closest row's
 * variable when one is close; never prints a value. */
void kiwi__settings_env_warn (const char *const *envp, const char *token_var);

/* The row variable close to the n-byte `name` (a small typo, or the same
 * words in another order), or NULL. */
const char *kiwi__setting_env_closest (const char *name, size_t n);

#endif
