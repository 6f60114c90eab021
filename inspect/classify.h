/*
 * classify.h: the step-0 classifier. It reads the output of the first
 * failing verify run (before any model-generated code ran) and says whether
 * the failure is the environment's: a missing runtime, a runtime in the
 * wrong version, a build that needs the network, or a test refused a
 * connection to a local port (a service the repository may declare: step 0
 * asks, decide.h). Anything else is an honest result (KIWI_FAILURE_NONE).
 *
 * The classifier is table-driven: the rules (class, name, POSIX extended
 * regular expression, what to extract) live in inspect/classify.tsv, which
 * is compiled into the library (kiwi_classifier_builtin) and can be replaced
 * by a file of the same format (kiwi_classifier_load). The first rule in
 * table order with a matching line decides. A line counts only if the
 * rule's context conditions hold (before=/after=: the runner's block it sits
 * in failed) and the host it names is not a reserved name (localhost,
 * .localhost, .invalid, .test: no network resolves those); see
 * classify.tsv for the format and docs/inspection.md for what each class
 * leads to. The work per output is bounded (lines a condition looks at,
 * matching lines a rule examines).
 *
 * This module only recognises. Whether a recognised failure swaps the image
 * (is the missing command another runtime's? does the repository ask for a
 * version the image lacks?) is decided by step0.h with the inspection's
 * context.
 *
 * Ownership: a kiwi_classifier is owned by the caller (kiwi_classifier_free)
 * and immutable once built, so one instance may be shared by threads.
 * kiwi_classification is a plain value with fixed-size fields.
 */
#ifndef KIWI_SANDBOX_CLASSIFY_H
#define KIWI_SANDBOX_CLASSIFY_H

#include <stddef.h>

#include "common/error.h"

#define KIWI_FAILURE_CLASSES(X)                                                                              \
    X (KIWI_FAILURE_NONE, "none")                                                                            \
    X (KIWI_FAILURE_MISSING_RUNTIME, "missing_runtime")                                                      \
    X (KIWI_FAILURE_VERSION_MISMATCH, "version_mismatch")                                                    \
    X (KIWI_FAILURE_NEEDS_NETWORK, "needs_network")                                                          \
    X (KIWI_FAILURE_NEEDS_SERVICE, "needs_service")

typedef enum {
#define KIWI__FC_ENUM(name, str) name,
    KIWI_FAILURE_CLASSES (KIWI__FC_ENUM)
#undef KIWI__FC_ENUM
} kiwi_failure_class;

/* "none", "missing_runtime", "version_mismatch", "needs_network",
 * "needs_service". */
const char *kiwi_failure_class_str (kiwi_failure_class c);

/* The inverse. Returns < 0 for anything else. */
int kiwi_failure_class_parse (const char *s, kiwi_failure_class *out);

/* What a rule extracts (the `fields` column of classify.tsv). */
#define KIWI_CLASSIFY_FIELDS(X)                                                                              \
    X (host, 256)    /* the host the run tried to reach */                                                   \
    X (command, 128) /* the command that is not in the image */                                              \
    X (runtime, 32)  /* the runtime whose version is wrong */                                                \
    X (version, 64)  /* the version the output asks for ("1.21", ">=3.12", "classfile:65") */               \
    X (what, 256)    /* the artifact, module, font or package concerned */                                   \
    X (port, 16)     /* the port a refused connection was for */

typedef struct kiwi_classification {
    kiwi_failure_class cls;
    char rule[64];       /* the rule's name; "" for KIWI_FAILURE_NONE */
    char evidence[320];  /* the output line that matched, control characters replaced */
#define KIWI__FC_FIELD(name, size) char name[size];
    KIWI_CLASSIFY_FIELDS (KIWI__FC_FIELD)
#undef KIWI__FC_FIELD
} kiwi_classification;

typedef struct kiwi_classifier kiwi_classifier;

/* The table compiled in from inspect/classify.tsv. */
int kiwi_classifier_builtin (kiwi_classifier **out, kiwi_error_t *err);

/* A table from a file in classify.tsv's format. Errors name the file and
 * line (an unknown class or field, a pattern regcomp refuses). */
int kiwi_classifier_load (const char *path, kiwi_classifier **out, kiwi_error_t *err);

/* A table from memory; `origin` names it in errors. */
int kiwi_classifier_parse (const char *text, size_t len, const char *origin, kiwi_classifier **out,
                           kiwi_error_t *err);

void kiwi_classifier_free (kiwi_classifier *c);

/* The rules, for tests and documentation. */
size_t kiwi_classifier_size (const kiwi_classifier *c);
const char *kiwi_classifier_rule_name (const kiwi_classifier *c, size_t i);
kiwi_failure_class kiwi_classifier_rule_class (const kiwi_classifier *c, size_t i);

/* Classifies `output` (NUL-terminated; NULL is treated as ""). Fills *out
 * (all fields empty for KIWI_FAILURE_NONE) and returns its class. Never
 * fails. ANSI escape sequences are removed from the output first. Extracted
 * values are untrusted text from the sandbox: control characters are
 * replaced by '?' and values are truncated to their field. */
kiwi_failure_class kiwi_classify (const kiwi_classifier *c, const char *output, kiwi_classification *out);

#endif
