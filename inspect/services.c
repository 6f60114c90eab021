/*
 * services.c: the host ports a repository's Compose files and GitHub
 * Actions workflows give their services (see services.h).
 */
#include "inspect/services.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "common/cleanup.h"
#include "inspect/inspect-internal.h"

#define KIWI__SERVICES_FILE_MAX ((size_t) 1 << 20)

/* A scalar node's text, copied into buf; false for any other node. */
static bool
scalar (const yaml_node_t *n, char *buf, size_t cap)
{
    if (n == NULL || n->type != YAML_SCALAR_NODE)
        return false;
    size_t l = n->data.scalar.length < cap - 1 ? n->data.scalar.length : cap - 1;
    memcpy (buf, n->data.scalar.value, l);
    buf[l] = '\0';
    return true;
}

/* A mapping's value under `key`, or NULL. */
static yaml_node_t *
map_get (yaml_document_t *doc, const yaml_node_t *map, const char *key)
{
    if (map == NULL || map->type != YAML_MAPPING_NODE)
        return NULL;
    size_t kl = strlen (key);
    for (const yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = yaml_document_get_node (doc, p->key);
        if (k != NULL && k->type == YAML_SCALAR_NODE && k->data.scalar.length == kl
            && memcmp (k->data.scalar.value, key, kl) == 0)
            return yaml_document_get_node (doc, p->value);
    }
    return NULL;
}

/* Whether "N" or "N-M" (digits only) holds `port`. */
static bool
range_holds (const char *s, size_t n, int port)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf)
        return false;
    memcpy (buf, s, n);
    buf[n] = '\0';
    char *end;
    long lo = strtol (buf, &end, 10), hi = lo;
    if (end == buf)
        return false;
    if (*end == '-') {
        char *e2;
        hi = strtol (end + 1, &e2, 10);
        if (e2 == end + 1 || *e2 != '\0')
            return false;
    } else if (*end != '\0')
        return false;
    return port >= lo && port <= hi;
}

/* Whether a short port entry ("5432:5432", "127.0.0.1:5432:5432/tcp",
 * "8000-8001:8000-8001") publishes `port` on the host: the part before the
 * container's (the last ':'-separated one). A container port alone
 * publishes nothing known. */
static bool
short_publishes (const char *s, int port)
{
    size_t n = strcspn (s, "/");
    const char *last = NULL;
    for (size_t i = 0; i < n; i++)
        if (s[i] == ':')
            last = s + i;
    if (last == NULL)
        return false;
    const char *start = last;
    while (start > s && start[-1] != ':')
        start--;
    return range_holds (start, (size_t) (last - start), port);
}

/* Whether one `ports:` entry (short or long form) publishes `port`. */
static bool
entry_publishes (yaml_document_t *doc, const yaml_node_t *e, int port)
{
    char buf[128];
    if (scalar (e, buf, sizeof buf))
        return short_publishes (buf, port);
    return scalar (map_get (doc, e, "published"), buf, sizeof buf) && range_holds (buf, strlen (buf), port);
}

/* Looks through a `services:` mapping for the service publishing `port`. */
static bool
in_services (yaml_document_t *doc, const yaml_node_t *services, const char *origin, int port, kiwi_service_port *out)
{
    if (services == NULL || services->type != YAML_MAPPING_NODE)
        return false;
    for (const yaml_node_pair_t *p = services->data.mapping.pairs.start; p < services->data.mapping.pairs.top; p++) {
        const yaml_node_t *svc = yaml_document_get_node (doc, p->value);
        const yaml_node_t *ports = map_get (doc, svc, "ports");
        if (ports == NULL || ports->type != YAML_SEQUENCE_NODE)
            continue;
        for (const yaml_node_item_t *it = ports->data.sequence.items.start; it < ports->data.sequence.items.top;
             it++) {
            if (!entry_publishes (doc, yaml_document_get_node (doc, *it), port))
                continue;
            memset (out, 0, sizeof *out);
            snprintf (out->file, sizeof out->file, "%s", origin);
            if (!scalar (yaml_document_get_node (doc, p->key), out->service, sizeof out->service))
                snprintf (out->service, sizeof out->service, "?");
            scalar (map_get (doc, svc, "image"), out->image, sizeof out->image);
            out->published = port;
            return true;
        }
    }
    return false;
}

/* libyaml's scanner takes time quadratic in the depth of flow collections
 * ("[[[[..." of 1 MiB: minutes): a file nested deeper than this, counting
 * every bracket and brace, quoted or not, declares nothing. Block nesting
 * (indentation) does not cost so. */
#define KIWI__FLOW_DEPTH_MAX 64

static bool
shallow (const char *text)
{
    int depth = 0;
    for (const char *p = text; *p; p++) {
        if (*p == '[' || *p == '{') {
            if (++depth > KIWI__FLOW_DEPTH_MAX)
                return false;
        } else if ((*p == ']' || *p == '}') && depth > 0)
            depth--;
    }
    return true;
}

bool
kiwi_service_for_port_in (const char *text, const char *origin, bool workflow, int port, kiwi_service_port *out)
{
    if (text == NULL || port <= 0 || !shallow (text))
        return false;
    yaml_parser_t parser;
    if (!yaml_parser_initialize (&parser))
        return false;
    yaml_parser_set_input_string (&parser, (const unsigned char *) text, strlen (text));
    yaml_document_t doc;
    if (!yaml_parser_load (&parser, &doc)) {
        yaml_parser_delete (&parser);
        return false; /* not YAML: declares nothing */
    }
    bool found = false;
    yaml_node_t *root = yaml_document_get_root_node (&doc);
    if (!workflow)
        found = in_services (&doc, map_get (&doc, root, "services"), origin, port, out);
    else {
        const yaml_node_t *jobs = map_get (&doc, root, "jobs");
        if (jobs != NULL && jobs->type == YAML_MAPPING_NODE)
            for (const yaml_node_pair_t *p = jobs->data.mapping.pairs.start; !found && p < jobs->data.mapping.pairs.top;
                 p++)
                found = in_services (&doc, map_get (&doc, yaml_document_get_node (&doc, p->value), "services"), origin,
                                     port, out);
    }
    yaml_document_delete (&doc);
    yaml_parser_delete (&parser);
    return found;
}

/* Reads root/rel (a regular file, not a symlink, at most 1 MiB) and looks in it. */
static bool
in_file (const char *root, const char *rel, bool workflow, int port, kiwi_service_port *out)
{
    cleanup_free char *text = kiwi__read_rel_max (root, rel, KIWI__SERVICES_FILE_MAX, NULL);
    return text != NULL && kiwi_service_for_port_in (text, rel, workflow, port, out);
}

bool
kiwi_service_for_port (const char *root, int port, kiwi_service_port *out)
{
    static const char *const compose[] = { "docker-compose.yml", "docker-compose.yaml", "compose.yml",
                                           "compose.yaml", "docker-compose.test.yml", "docker-compose.test.yaml" };
    for (size_t i = 0; i < sizeof compose / sizeof compose[0]; i++)
        if (in_file (root, compose[i], false, port, out))
            return true;
    char *names[KIWI__WORKFLOWS_MAX];
    size_t n = kiwi__workflow_names (root, names, KIWI__WORKFLOWS_MAX);
    bool found = false;
    for (size_t i = 0; i < n; i++) {
        char rel[512];
        snprintf (rel, sizeof rel, ".github/workflows/%s", names[i]);
        if (!found)
            found = in_file (root, rel, true, port, out);
        free (names[i]);
    }
    return found;
}
