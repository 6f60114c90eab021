/*
 * services.h: the services a repository declares for its tests, and the
 * host ports it gives them: a Compose file's `services:` (docker-compose.yml,
 * docker-compose.yaml, compose.yml, compose.yaml, docker-compose.test.yml
 * and .yaml at the root) and a GitHub Actions workflow's job `services:`
 * (.github/workflows/, its .yml and .yaml files). Step 0 asks which service a refused
 * connection to a loopback port was meant for (decide.h): Phase B starts
 * no services.
 *
 * Ports are read in the common forms: a short "HOST:CONTAINER" string or
 * number pair ("5432:5432", 6379:6379, "127.0.0.1:5432:5432",
 * "8000-8001:8000-8001", "/tcp" or "/udp" after it) and the long form's
 * `published:` (a number or a string). A container port alone publishes
 * nothing at a known host port and is not counted.
 *
 * The files are the repository's, hostile: each is read only when it is a
 * regular file (no symlink) of at most 1 MiB, at most 64 workflows are
 * read, a file whose brackets and braces nest deeper than 64 is not parsed
 * (libyaml's time grows with the square of that depth), and YAML aliases
 * are not followed (libyaml's document loader keeps them as references;
 * nothing here recurses).
 *
 * Pure: reads files, runs nothing.
 */
#ifndef KIWI_INSPECT_SERVICES_H
#define KIWI_INSPECT_SERVICES_H

#include <stdbool.h>

typedef struct kiwi_service_port {
    char file[256];    /* the file that declares it, relative to the root */
    char service[128]; /* the service's name ("db") */
    char image[256];   /* its image ("postgres:16"), or "" */
    int published;     /* the host port asked about */
} kiwi_service_port;

/* The service the repository at `root` publishes host port `port` for.
 * Returns true with *out filled, false when none does (or nothing can be
 * read). */
bool kiwi_service_for_port (const char *root, int port, kiwi_service_port *out);

/* The same, over one file's text (`origin` names it in *out); `workflow`:
 * a GitHub Actions workflow (jobs.*.services), else a Compose file. */
bool kiwi_service_for_port_in (const char *text, const char *origin, bool workflow, int port, kiwi_service_port *out);

#endif
