/*
 * resolv.h: the resolver file Phase A gets under gVisor.
 *
 * On a user-defined Docker network (Kiwi's install bridge) the container's
 * /etc/resolv.conf names Docker's embedded resolver, 127.0.0.11, which
 * dockerd serves on the loopback of the container's network namespace.
 * gVisor's own network stack has a loopback of its own, so that resolver
 * cannot be reached from inside the sandbox (google/gvisor#7469). Phase A
 * under runsc-net therefore gets, read-only at /etc/resolv.conf, a copy of
 * the host's resolver file with what Docker itself keeps for a container on
 * its default bridge: the nameservers that are not loopback addresses, and
 * the search and options lines. Its queries then go where the embedded
 * resolver would have forwarded them, through the same bridge.
 *
 * Hand-written: no Debian library writes a resolver file (libresolv only
 * reads one); this is a line filter.
 */
#ifndef KIWI_SANDBOX_RESOLV_H
#define KIWI_SANDBOX_RESOLV_H

#include "common/error.h"

#define KIWI_RESOLV_HOST "/etc/resolv.conf"
#define KIWI_RESOLV_NAME "gvisor-resolv.conf" /* in the state directory */

/* Writes the filtered copy of `src` to `dst` (atomically: a temporary file
 * beside it, then rename; mode 0644). Returns the number of nameservers
 * written (0 when the host has none but loopback ones: the file is written
 * all the same, and names do not resolve, as under runc), or -1. */
int kiwi_resolv_write_upstream (const char *src, const char *dst, kiwi_error_t *err);

#endif
