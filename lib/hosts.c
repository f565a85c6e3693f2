/* hosts.c: the server list ("host:port,host:port/chroot").
 *
 * ZooKeeper's C client answers a list it cannot use with one NULL from
 * zookeeper_init(), whether the list is malformed (a usage error: nothing
 * will ever fix it) or its names do not resolve now (DNS is down, the name
 * is not published yet: worth trying again). The list is read here first,
 * as the client reads it, so that a failure of zookeeper_init() on a list
 * found well formed means the names: ZKLOCK_ERESOLVE, not ZKLOCK_EINVAL.
 *
 * The client's rules: servers are separated by commas (empty entries are
 * skipped), a chroot starts at the first '/', leading blanks of a host are
 * skipped, the port follows the host's last ':' (so an IPv6 address is
 * written bare: ::1:2181). Stricter here: a port is 1-65535 in decimal, a
 * host has no blank, bracket or slash, and the chroot is a valid path. */
#include "names.h"
#include "session.h"

#include <ctype.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

/* A decimal port, 1-65535. */
static bool port_ok(const char *p, size_t len)
{
    long port = 0;

    if (len == 0 || len > 5)
        return false;
    for (size_t i = 0; i < len; i++) {
        if (!isdigit((unsigned char)p[i]))
            return false;
        port = port * 10 + (p[i] - '0');
    }
    return port >= 1 && port <= 65535;
}

static bool host_ok(const char *h, size_t len)
{
    if (len == 0)
        return false;
    for (size_t i = 0; i < len; i++)
        if (isspace((unsigned char)h[i]) || h[i] == '[' || h[i] == ']')
            return false; /* brackets: the client would ask DNS for "[::1]" */
    return true;
}

/* One entry of the list ("host:port", unparsed). */
struct zkl_server {
    const char *entry;
    size_t entry_len;
};

/* The next entry before end, from *cursor on; false when there is none. */
static bool next_entry(const char **cursor, const char *end, struct zkl_server *server)
{
    const char *p = *cursor;

    while (p < end && *p == ',')
        p++; /* empty entries, as the client skips them */
    if (p >= end)
        return false;
    server->entry = p;
    while (p < end && *p != ',')
        p++;
    server->entry_len = (size_t)(p - server->entry);
    *cursor = p;
    return true;
}

/* Splits one entry into host and port; false if malformed. */
static bool split_entry(const struct zkl_server *e, const char **host, size_t *host_len,
                        const char **port, size_t *port_len)
{
    const char *start = e->entry, *end = e->entry + e->entry_len, *colon = NULL;

    while (start < end && isspace((unsigned char)*start))
        start++;
    for (const char *p = start; p < end; p++)
        if (*p == ':')
            colon = p;
    if (!colon)
        return false;
    *host = start;
    *host_len = (size_t)(colon - start);
    *port = colon + 1;
    *port_len = (size_t)(end - colon - 1);
    return host_ok(*host, *host_len) && port_ok(*port, *port_len);
}

/* Where the servers end: at the chroot, or the end of the list. */
static const char *servers_end(const char *hosts)
{
    const char *slash = strchr(hosts, '/');
    return slash ? slash : hosts + strlen(hosts);
}

int zklock__hosts_check(const char *hosts)
{
    const char *cursor, *end;
    struct zkl_server e;
    int servers = 0;

    if (!hosts)
        return ZKLOCK_EINVAL;
    end = servers_end(hosts);
    /* A chroot "/" is none; any other must be a path zklock would accept. */
    if (*end && strcmp(end, "/") != 0 && zklock__path_check(end) != 0)
        return ZKLOCK_EINVAL;
    for (cursor = hosts; next_entry(&cursor, end, &e); servers++) {
        const char *host, *port;
        size_t host_len, port_len;
        if (!split_entry(&e, &host, &host_len, &port, &port_len))
            return ZKLOCK_EINVAL;
    }
    return servers > 0 ? 0 : ZKLOCK_EINVAL;
}

/* getaddrinfo() as the client calls it: does this entry name an address? */
static int resolve_entry(const struct zkl_server *e)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_protocol = IPPROTO_TCP, .ai_flags = AI_ADDRCONFIG};
    struct addrinfo *res = NULL;
    const char *host, *port;
    size_t host_len, port_len;
    char *h, *p;
    int rc;

    if (!split_entry(e, &host, &host_len, &port, &port_len))
        return ZKLOCK_EINVAL;
    h = strndup(host, host_len);
    p = strndup(port, port_len);
    rc = h && p ? getaddrinfo(h, p, &hints, &res) : EAI_MEMORY;
    if (rc == EAI_BADFLAGS || rc == EAI_ADDRFAMILY) { /* as the client retries */
        hints.ai_flags = 0;
        rc = getaddrinfo(h, p, &hints, &res);
    }
    free(h);
    free(p);
    if (res)
        freeaddrinfo(res);
    if (rc == EAI_MEMORY)
        return ZKLOCK_ENOMEM;
    return rc == 0 ? 0 : ZKLOCK_ERESOLVE;
}

int zklock__hosts_resolve(const char *hosts)
{
    const char *cursor = hosts, *end = servers_end(hosts);
    struct zkl_server e;
    int rc = ZKLOCK_ERESOLVE;

    /* The client uses whichever names resolve: one is enough. */
    while (rc != 0 && rc != ZKLOCK_ENOMEM && next_entry(&cursor, end, &e))
        rc = resolve_entry(&e);
    return rc;
}
