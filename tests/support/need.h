/*
 * need.h: KIWI_NEED(cond, fmt, ...) inside a cmocka test: when the service
 * check `cond` is false, fail (full suite, KIWI_REQUIRE_SERVICES=1) or skip
 * with a visible, counted line (KIWI_SKIP, see skip.h).
 */
#ifndef KIWI_TESTS_NEED_H
#define KIWI_TESTS_NEED_H

#include <stdio.h>

#include "skip.h"
#include "stack-env.h"

#define KIWI_NEED(cond, ...)                                                                                 \
    do {                                                                                                     \
        if (!(cond)) {                                                                                       \
            char kiwi__need_msg[1024];                                                                       \
            snprintf (kiwi__need_msg, sizeof kiwi__need_msg, __VA_ARGS__);                                   \
            if (kiwi_test_services_required ())                                                              \
                fail_msg ("required service absent: %s (the full suite never skips)", kiwi__need_msg);      \
            KIWI_SKIP ("service absent: %s (set KIWI_REQUIRE_SERVICES=1 to fail instead)", kiwi__need_msg);  \
        }                                                                                                    \
    } while (0)

#endif
