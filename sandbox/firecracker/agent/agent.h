/*
 * agent.h: the request side of kiwi-fc-agent, the program that runs as
 * init inside a Firecracker guest and does what the host's driver asks
 * over vsock (protocol in proto.h): run a command with streamed output and
 * a deadline, unpack a tar stream into a directory, pack a path as a tar
 * stream.
 *
 * kiwi_agent_serve() answers the one request on a connection. It is
 * written to run in a process of its own per connection (main.c forks
 * one): it may change its own credentials to the sandbox user before
 * unpacking files, and it waits for the commands it starts.
 */
#ifndef KIWI_FC_AGENT_AGENT_H
#define KIWI_FC_AGENT_AGENT_H

#include <stdbool.h>
#include <sys/types.h>

#include "common/error.h"

typedef struct kiwi_agent_config {
    const char *default_user;    /* "uid[:gid]" or a name, when a request names none; NULL = the agent's own */
    const char *default_workdir; /* for exec without a workdir; NULL = "/" */
} kiwi_agent_config;

/* Answers the request waiting on `fd`. Returns 0 when it was answered (an
 * ERROR frame is an answer), < 0 when the connection failed or the host
 * went away. `fd` stays open. */
int kiwi_agent_serve (int fd, const kiwi_agent_config *cfg);

/* Resolves "uid", "uid:gid", "name" or "name:group" against the numbers
 * and /etc/passwd, /etc/group under `root` ("" or NULL for /). A name
 * without a group takes the user's primary group; a bare number takes the
 * same number as group. Returns < 0 with *err naming what is unknown. */
int kiwi_agent_resolve_user (const char *root, const char *spec, uid_t *uid, gid_t *gid, kiwi_error_t *err);

#endif
