/*
 * cli-settings.h: the kiwi command's settings: its rows of the one settings
 * table (common/settings.h, rows in common/settings-rows.def), loaded from
 * the default, the stack env file, the config file, the environment and
 * flags (common/settings.h says how). Only the winning value is checked; a
 * bad one is an error naming the key, where the value came from and what
 * is accepted (code KIWI_CLI_EUSAGE).
 *
 * Ownership: kiwi_cli_settings owns its strings; kiwi_cli_settings_clear()
 * frees them.
 */
#ifndef KIWI_PRODUCER_CLI_SETTINGS_H
#define KIWI_PRODUCER_CLI_SETTINGS_H

#include <stdint.h>
#include <stdio.h>

#include "common/defaults.h"
#include "common/error.h"
#include "common/settings.h"
#include "common/strv.h"

typedef kiwi_settings kiwi_cli_settings;

#define KIWI_CLI_KAFKA_PROPERTY_PREFIX KIWI_KAFKA_PROPERTY_PREFIX

/* Every operator-given librdkafka property, in the order to apply them
 * (the config file's kafka.property.*, then kafka_properties), appended to
 * *pairs. An item that does not parse is an error (its value not shown). */
int kiwi_cli_settings_kafka_props (const kiwi_cli_settings *s, kiwi_strv *pairs, kiwi_error_t *err);

/* kiwi's row of a setting (NULL: none, or kiwi-worker's only), and lookups
 * by flag name and by key among kiwi's rows. */
const kiwi_setting_def *kiwi_setting_def_get (kiwi_setting_id id);
const kiwi_setting_def *kiwi_setting_by_flag (const char *flag);
const kiwi_setting_def *kiwi_setting_by_key (const char *key);

/* Zeroes *s. */
void kiwi_cli_settings_init (kiwi_cli_settings *s);
void kiwi_cli_settings_clear (kiwi_cli_settings *s);

/* Loads the settings from all sources. `flags` holds the flag values by
 * setting id (NULL: not given); `envp` is the environment to read (environ
 * in the program, a fixed list in tests). On failure *err names the key,
 * the origin and what is accepted (code KIWI_CLI_EUSAGE). */
int kiwi_cli_settings_load (kiwi_cli_settings *s, const char *const flags[KIWI_SETTING__COUNT],
                            char *const *envp, kiwi_error_t *err);

/* Expands a goal template: {name} {sha} {branch} {url} {repo} {event} are
 * replaced by the matching argument (NULL: empty). Returns a malloc'd
 * string, or NULL with *err (KIWI_CLI_EUSAGE) on an unknown placeholder. */
char *kiwi_goal_expand (const char *tmpl, const kiwi_goal_vars *v, kiwi_error_t *err);

/* Prints every setting as a config file would hold it ("key = value"),
 * with its environment variable and origin as a comment. Secrets are never
 * printed: only whether they are set. */
void kiwi_cli_settings_dump (const kiwi_cli_settings *s, FILE *out);

/* Prints the configuration flags' names, for a command's --help. */
void kiwi_cli_settings_flags (FILE *out);

/* Prints the table for --help: flag, environment variable, default. */
void kiwi_cli_settings_help (FILE *out);

#endif
