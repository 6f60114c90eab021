/*
 * sandbox-driver.c: see sandbox-driver.h.
 */
#include "sandbox-driver.h"

#include <stdlib.h>

const char *
kiwi_test_sandbox_driver (void)
{
    const char *v = getenv ("KIWI_SANDBOX");
    if (v != NULL && *v != '\0')
        return v;
    v = getenv ("KIWI_SANDBOX_RUNTIME");
    if (v != NULL && *v != '\0')
        return v;
    return "docker";
}
