/*
 * shutdown.c: see shutdown.h.
 */
#include "worker/shutdown.h"

#include <signal.h>

#include "sandbox/sandbox.h"

static volatile int stop_flag;

static void
on_term (int sig)
{
    (void) sig;
    stop_flag = 1;
}

volatile int *
kiwi_shutdown_catch (void)
{
    struct sigaction sa = { 0 };
    sa.sa_handler = on_term;
    sigemptyset (&sa.sa_mask);
    sigaction (SIGTERM, &sa, NULL);
    sigaction (SIGINT, &sa, NULL);
    kiwi_sandbox_set_cancel (&stop_flag);
    return &stop_flag;
}
