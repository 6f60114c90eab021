/*
 * egress.h: the worker's own egress checks, published in every heartbeat.
 *
 *   phase_b_isolated   a Phase B sandbox has no interface but loopback and
 *                      cannot reach a registry                  (isolation)
 *   metadata_blocked   the host's rules that reject container traffic to
 *                      169.254.169.254 are in place (ops/egress/egress.sh
 *                      check)                                    (isolation)
 *   phase_a_https      a Phase A sandbox reaches a registry over HTTPS
 *                      (through the CA bundle when one is configured)
 *
 * A failed isolation check marks the worker degraded; by default it then
 * takes no new tasks until the checks pass again.
 *
 * The checks run in a process of their own (kiwi-worker --egress-check),
 * which prints one JSON object per line: {"name","ok","detail","checked_at"}.
 */
#ifndef KIWI_WORKER_EGRESS_H
#define KIWI_WORKER_EGRESS_H

#include <stdbool.h>

#include "config.h"

#define KIWI_EGRESS_PROBE_URL_DEFAULT "https://registry.npmjs.org/"

/* Whether a check's failure means isolation is broken (vs. degraded service). */
bool kiwi_egress_is_isolation_check (const char *name);

/* The --egress-check process: runs the checks, prints the lines, returns
 * 0 when all held, 1 otherwise. */
int kiwi_egress_check_main (const kiwi_worker_config *cfg);

#endif
