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
 *   fleet_services_blocked  the same Phase A sandbox cannot open a TCP
 *                      connection to this worker's Redis, any Kafka
 *                      bootstrap broker or a KIWI_INSTALL_DENY HOST:PORT
 *                      (every address each name resolves to)  (isolation)
 *
 * The rules (egress.sh apply at start with KIWI_EGRESS_APPLY, egress.sh
 * check in metadata_blocked) are given --deny ADDR:PORT for each of those
 * addresses that is not loopback (a container's loopback is its own), so
 * that Phase A reaches them on no host of the fleet.
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
#include <stddef.h>

#include "worker/config.h"
#include "common/error.h"
#include "common/strv.h"

/* Whether a check's failure means isolation is broken (vs. degraded service). */
bool kiwi_egress_is_isolation_check (const char *name);

/* The fleet's own services as egress.sh --deny arguments and as probe
 * targets: "ADDR:PORT" or "[ADDR6]:PORT" (an operator's CIDR or port-less
 * entry is in `deny` only; loopback addresses in `probe` only). */
typedef struct kiwi_egress_targets {
    kiwi_strv deny;
    kiwi_strv probe;
} kiwi_egress_targets;

/* Resolves KIWI_REDIS_HOST:PORT, every KIWI_KAFKA_BROKERS entry and every
 * KIWI_INSTALL_DENY entry (names to all their addresses) into *t. An entry
 * that does not parse or resolve is an error naming its setting. */
int kiwi_egress_targets_collect (const kiwi_worker_config *cfg, kiwi_egress_targets *t, kiwi_error_t *err);
void kiwi_egress_targets_clear (kiwi_egress_targets *t);

/* egress.sh apply with --deny for the fleet's services (KIWI_EGRESS_APPLY). */
int kiwi_egress_apply_rules (const kiwi_worker_config *cfg, kiwi_error_t *err);

/* KIWI_EGRESS_APPLY where a worker starts (the daemon; --once before its
 * first Phase A): with it set, the rules applied and the outcome logged (a
 * failure is left for the check to report); without it, nothing. */
void kiwi_egress_apply_if_set (const kiwi_worker_config *cfg);

/* egress.sh check with the same arguments as kiwi_egress_apply_rules
 * (metadata_blocked): whether the host's rules are in place, with what the
 * check said and, when they are not, the command that fixes it, in detail. */
bool kiwi_egress_rules_hold (const kiwi_worker_config *cfg, char *detail, size_t cap);

/* The --egress-check process: runs the checks, prints the lines, returns
 * 0 when all held, 1 otherwise. */
int kiwi_egress_check_main (const kiwi_worker_config *cfg);

#endif
