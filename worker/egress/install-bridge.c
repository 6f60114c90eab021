/*
 * install-bridge.c: one install bridge per proxying worker on a host (see
 * install-bridge.h).
 */
#include "worker/egress/install-bridge.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fs.h"
#include "common/pidlock.h"
#include "sandbox/sandbox.h"

/* 1: taken, *fd open; 0: held by someone else (who into who); -1: error. */
static int
try_take (const char *dir, const char *bridge, int *fd, char *who, size_t who_cap, kiwi_error_t *err)
{
    char path[4096];
    int n = snprintf (path, sizeof path, "%s/%s.lock", dir, bridge);
    if (n < 0 || (size_t) n >= sizeof path)
        return kiwi_error_make (err, ENAMETOOLONG, "install bridge lock under %s", dir);
    int rc = kiwi_pidlock_take (path, fd, who, who_cap, err);
    return rc < 0 ? kiwi_error_wrap (err, "install bridge") : rc;
}

int
kiwi_install_bridge_claim (const char *dir, const char *wanted, char *name, size_t cap, int *fd, kiwi_error_t *err)
{
    *fd = -1;
    if (kiwi_fs_mkdir_p (dir, 0755) < 0)
        return kiwi_error_make (err, errno, "install bridge locks: creating %s", dir);
    char net[32], who[64];
    if (wanted && *wanted) {
        if (kiwi_install_network_name (wanted, net, sizeof net, NULL, err) < 0)
            return kiwi_error_wrap (err, "KIWI_INSTALL_BRIDGE");
        int rc = try_take (dir, wanted, fd, who, sizeof who, err);
        if (rc < 0)
            return -1;
        if (rc == 0)
            return kiwi_error_make (err, EBUSY,
                                    "KIWI_INSTALL_BRIDGE=%s is held by another worker on this host (%s, lock in %s): "
                                    "each worker with an egress proxy needs a bridge of its own (unset "
                                    "KIWI_INSTALL_BRIDGE to take a free one)",
                                    wanted, who, dir);
        snprintf (name, cap, "%s", wanted);
        return 0;
    }
    for (int i = 0; i < KIWI_INSTALL_BRIDGES; i++) {
        char b[16];
        snprintf (b, sizeof b, KIWI_INSTALL_BRIDGE_PREFIX "%d", i);
        int rc = try_take (dir, b, fd, who, sizeof who, err);
        if (rc < 0)
            return -1;
        if (rc == 1) {
            snprintf (name, cap, "%s", b);
            return 0;
        }
    }
    return kiwi_error_make (err, EBUSY,
                            "all %d install bridges (" KIWI_INSTALL_BRIDGE_PREFIX "0 .. " KIWI_INSTALL_BRIDGE_PREFIX
                            "%d) are held by other workers on this host (locks in %s)",
                            KIWI_INSTALL_BRIDGES, KIWI_INSTALL_BRIDGES - 1, dir);
}
