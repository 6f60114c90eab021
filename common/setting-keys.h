/*
 * setting-keys.h: one spelling per setting across Kiwi's two programs.
 *
 * kiwi and kiwi-worker may share one config file; each reads its own keys
 * from it. This is the list of every key either reads, with its
 * environment variable (the same in both) and which programs read it, so
 * that one rule holds for a key a program's own table lacks: another
 * program's key is ignored, a key of neither is refused (naming the new
 * spelling when it is one of kiwi's earlier ones). kafka.property.NAME keys
 * are read by both and are not listed. test_setting_keys keeps the list
 * equal to both programs' tables.
 */
#ifndef KIWI_COMMON_SETTING_KEYS_H
#define KIWI_COMMON_SETTING_KEYS_H

#include <stddef.h>

#include "error.h"

enum { KIWI_PROGRAM_KIWI = 1, KIWI_PROGRAM_WORKER = 2 };

typedef struct kiwi_setting_key {
    const char *key;   /* in a config file */
    const char *env;   /* its environment variable, or NULL */
    unsigned programs; /* KIWI_PROGRAM_* that read it */
    const char *was;   /* kiwi's earlier spelling of the key, or NULL */
} kiwi_setting_key;

extern const kiwi_setting_key kiwi_setting_keys[];
extern const size_t kiwi_n_setting_keys;

/* The row of `key`, or NULL. */
const kiwi_setting_key *kiwi_setting_key_find (const char *key);

/* The rule for a config-file key that program `self` (its name: "kiwi",
 * "kiwi-worker") does not have in its table: 0 when another program reads
 * it (ignored), else -1 with *err (error code `code`) naming origin
 * ("file:line") and the key. */
int kiwi_setting_key_foreign (const char *key, unsigned self, const char *program, const char *origin, int code,
                              kiwi_error_t *err);

#endif
