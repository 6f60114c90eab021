/*
 * config-file.h: the config file both programs read (kiwi --config,
 * kiwi-worker --config; KIWI_CONFIG): `key = value` lines; a line whose
 * first non-blank character is `#` is a comment; blank lines are skipped;
 * blanks around the key and the value are dropped, then one pair of
 * matching quotes (" or ') around the value. What a key means, and the rule
 * for one a program does not read, is the caller's (common/settings.h).
 */
#ifndef KIWI_COMMON_CONFIG_FILE_H
#define KIWI_COMMON_CONFIG_FILE_H

#include "common/error.h"

/* Called for each entry in file order; origin is "PATH:LINE". Returns 0 to
 * go on, < 0 (with *err) to stop the read. */
typedef int (*kiwi_config_entry_fn) (const char *key, const char *value, const char *origin, void *ud,
                                     kiwi_error_t *err);

/* Reads the file at path, calling fn for each entry. Returns 0, or -1 with
 * *err: the file cannot be opened ("config: cannot open `PATH`: why"), a
 * line is not `key = value` ("PATH:LINE: expected `key = value`", with
 * error code syntax_code), or fn's error. */
int kiwi_config_file_read (const char *path, int syntax_code, kiwi_config_entry_fn fn, void *ud, kiwi_error_t *err);

/* s without its leading and trailing blanks (isspace): trailing ones are
 * overwritten with NULs; the result points into s. */
char *kiwi_trim (char *s);

/* s without one pair of matching quotes (" or ') around it: the closing
 * one is overwritten with a NUL; the result points into s. */
char *kiwi_unquote (char *s);

#endif
