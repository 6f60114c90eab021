/*
 * install-bridge.h: which install bridge (sandbox.h, kiwi-install0 ..
 * kiwi-install15) this worker's Phase A uses.
 *
 * A worker with an egress proxy (KIWI_INSTALL_EGRESS other than open) binds
 * Squid to its bridge's gateway on KIWI_INSTALL_PROXY_PORTS, and egress.sh
 * redirects the bridge's 80 and 443 to those ports on the address the packet
 * came in on: two such workers on one host need two bridges, or the second
 * one's Squid cannot bind and its installs land in the first one's log. So
 * each takes a bridge of its own for as long as it runs: an exclusive
 * flock(2) on <dir>/<bridge>.lock (dir: KIWI_INSTALL_BRIDGE_LOCK_DIR in
 * production), released by the kernel when the process ends, however it
 * ends. KIWI_INSTALL_BRIDGE names the one to take; unset, the first free
 * one is taken. Workers in open mode share kiwi-install0 (nothing of
 * theirs listens on it) and take no lock.
 *
 * The daemon claims before anything opens the sandbox driver and exports
 * the choice as KIWI_INSTALL_BRIDGE, so that its task and egress-check
 * processes, which inherit the environment, use the same bridge.
 */
#ifndef KIWI_WORKER_INSTALL_BRIDGE_H
#define KIWI_WORKER_INSTALL_BRIDGE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define KIWI_INSTALL_BRIDGE_LOCK_DIR "/run/kiwi/install-bridges"

/* Takes `wanted` (kiwi-installN; NULL or "": the first free one) under
 * `dir` (created when missing): its name into name[cap], and *fd the open
 * lock (close-on-exec; the caller keeps it open while it uses the bridge
 * and closes it after). -1 with *err saying which bridge is held and by
 * whom, or that all are, or that `wanted` is not a bridge's name. */
int kiwi_install_bridge_claim (const char *dir, const char *wanted, char *name, size_t cap, int *fd,
                               kiwi_error_t *err);

#endif
