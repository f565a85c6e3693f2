#define _GNU_SOURCE 1 /* accept4 */
/* zkproxy.c: a TCP proxy between a ZooKeeper client and its server that
 * can cut connections and swallow one reply, for fault tests.
 *
 * It understands just enough of the protocol: every message is a 4-byte
 * big-endian length and a payload. The first message each way is the
 * connect request/response; after that a request starts with (xid, type)
 * and a reply with xid. Swallowing "the reply to the next request of type
 * T" reproduces a request that reached the server and took effect while its
 * answer was lost: the proxy waits for the server's reply (proof that it
 * was applied), drops it and closes the client's connection. */
#include "zkproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_PAIRS 64
#define BUF_MAX (1 << 20)

struct stream {   /* one direction of a pair */
    unsigned char *buf;
    size_t len;
    bool greeted; /* the connect message has passed */
};

struct pair {
    int client, server;
    struct stream up, down; /* client->server, server->client */
    int32_t doomed_xid;     /* reply to swallow; 0 = none */
    bool doomed;
};

struct zkproxy {
    pthread_t thread;
    pthread_mutex_t mu;
    int listener, wake[2];
    struct sockaddr_in upstream;
    char hosts[64];
    struct pair pairs[MAX_PAIRS];
    int npairs;
    bool refusing, stopping;
    int drop_type;   /* arm: swallow the reply to the next request of this type */
    bool cut_on_drop; /* ... and refuse connections from then on */
    int dropped;     /* replies swallowed so far */
    int accepted;    /* connections accepted so far */
};

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void close_pair(struct zkproxy *p, int i)
{
    close(p->pairs[i].client);
    close(p->pairs[i].server);
    free(p->pairs[i].up.buf);
    free(p->pairs[i].down.buf);
    p->pairs[i] = p->pairs[--p->npairs];
}

static void close_all(struct zkproxy *p)
{
    while (p->npairs > 0)
        close_pair(p, 0);
}

static int connect_upstream(struct zkproxy *p)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&p->upstream, sizeof p->upstream) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void accept_one(struct zkproxy *p)
{
    int fd = accept4(p->listener, NULL, NULL, SOCK_CLOEXEC), one = 1, up;

    if (fd < 0)
        return;
    if (p->refusing || p->npairs == MAX_PAIRS || (up = connect_upstream(p)) < 0) {
        close(fd); /* the client sees its connection fail and tries again */
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(&p->pairs[p->npairs], 0, sizeof p->pairs[0]);
    p->pairs[p->npairs].client = fd;
    p->pairs[p->npairs].server = up;
    p->npairs++;
    p->accepted++;
}

static bool write_all(int fd, const unsigned char *b, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
    }
    return true;
}

/* Looks at one whole message; false: swallow it and cut the pair. */
static bool inspect(struct zkproxy *p, struct pair *pr, bool upward, const unsigned char *msg,
                    size_t len)
{
    struct stream *st = upward ? &pr->up : &pr->down;

    if (!st->greeted) {
        st->greeted = true;
        return true;
    }
    if (len < 4)
        return true;
    if (upward && len >= 8 && p->drop_type != 0 && (int)be32(msg + 4) == p->drop_type) {
        pr->doomed = true;
        pr->doomed_xid = (int32_t)be32(msg);
        p->drop_type = 0;
    }
    if (!upward && pr->doomed && (int32_t)be32(msg) == pr->doomed_xid) {
        p->dropped++;
        p->refusing = p->refusing || p->cut_on_drop;
        p->cut_on_drop = false;
        return false;
    }
    return true;
}

/* Moves what arrived on `from` to `to`, message by message. */
static bool relay(struct zkproxy *p, struct pair *pr, bool upward)
{
    struct stream *st = upward ? &pr->up : &pr->down;
    int from = upward ? pr->client : pr->server, to = upward ? pr->server : pr->client;
    unsigned char chunk[65536];
    ssize_t n = read(from, chunk, sizeof chunk);
    size_t off = 0;

    if (n <= 0 || st->len + (size_t)n > BUF_MAX)
        return false;
    st->buf = realloc(st->buf, st->len + (size_t)n);
    memcpy(st->buf + st->len, chunk, (size_t)n);
    st->len += (size_t)n;
    while (st->len - off >= 4) {
        size_t mlen = be32(st->buf + off);
        if (st->len - off < 4 + mlen)
            break;
        if (!inspect(p, pr, upward, st->buf + off + 4, mlen))
            return false;
        if (!write_all(to, st->buf + off, 4 + mlen))
            return false;
        off += 4 + mlen;
    }
    memmove(st->buf, st->buf + off, st->len - off);
    st->len -= off;
    return true;
}

static void *proxy_main(void *arg)
{
    struct zkproxy *p = arg;
    struct pollfd fds[2 + 2 * MAX_PAIRS];

    for (;;) {
        int n = 0;
        pthread_mutex_lock(&p->mu);
        if (p->stopping) {
            close_all(p);
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        fds[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
        fds[n++] = (struct pollfd){p->listener, POLLIN, 0};
        for (int i = 0; i < p->npairs; i++) {
            fds[n++] = (struct pollfd){p->pairs[i].client, POLLIN, 0};
            fds[n++] = (struct pollfd){p->pairs[i].server, POLLIN, 0};
        }
        pthread_mutex_unlock(&p->mu);
        if (poll(fds, (nfds_t)n, -1) < 0 && errno != EINTR)
            return NULL;
        pthread_mutex_lock(&p->mu);
        if (fds[0].revents) {
            char c[64];
            if (read(p->wake[0], c, sizeof c) < 0)
                c[0] = 0;
        }
        /* pairs may have changed under a control call: match fds again */
        for (int k = 2; k < n; k++) {
            if (!fds[k].revents)
                continue;
            for (int i = 0; i < p->npairs; i++) {
                struct pair *pr = &p->pairs[i];
                if (fds[k].fd != pr->client && fds[k].fd != pr->server)
                    continue;
                if (!relay(p, pr, fds[k].fd == pr->client))
                    close_pair(p, i);
                break;
            }
        }
        if (fds[1].revents)
            accept_one(p);
        pthread_mutex_unlock(&p->mu);
    }
}

static void poke(struct zkproxy *p)
{
    if (write(p->wake[1], "x", 1) < 0)
        return;
}

zkproxy_t *zkproxy_start(const char *upstream)
{
    struct zkproxy *p = calloc(1, sizeof *p);
    struct sockaddr_in me = {.sin_family = AF_INET};
    socklen_t len = sizeof me;
    char host[64];
    const char *colon = strrchr(upstream, ':');

    if (!p || !colon || (size_t)(colon - upstream) >= sizeof host)
        goto fail;
    memcpy(host, upstream, (size_t)(colon - upstream));
    host[colon - upstream] = '\0';
    p->upstream.sin_family = AF_INET;
    p->upstream.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &p->upstream.sin_addr) != 1)
        goto fail;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    p->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->listener < 0 || bind(p->listener, (struct sockaddr *)&me, sizeof me) != 0 ||
        listen(p->listener, 16) != 0 || getsockname(p->listener, (struct sockaddr *)&me, &len) != 0 ||
        pipe(p->wake) != 0)
        goto fail;
    snprintf(p->hosts, sizeof p->hosts, "127.0.0.1:%d", ntohs(me.sin_port));
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, proxy_main, p) != 0)
        goto fail;
    return p;
fail:
    free(p);
    return NULL;
}

const char *zkproxy_hosts(zkproxy_t *p)
{
    return p->hosts;
}

void zkproxy_cut(zkproxy_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->refusing = true;
    close_all(p);
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

void zkproxy_restore(zkproxy_t *p)
{
    pthread_mutex_lock(&p->mu);
    p->refusing = false;
    pthread_mutex_unlock(&p->mu);
    poke(p);
}

static void arm_drop(zkproxy_t *p, int optype, bool cut)
{
    pthread_mutex_lock(&p->mu);
    p->drop_type = optype;
    p->cut_on_drop = cut;
    pthread_mutex_unlock(&p->mu);
}

void zkproxy_drop_reply(zkproxy_t *p, int optype)
{
    arm_drop(p, optype, false);
}

void zkproxy_drop_reply_and_cut(zkproxy_t *p, int optype)
{
    arm_drop(p, optype, true);
}

int zkproxy_dropped(zkproxy_t *p)
{
    int n;
    pthread_mutex_lock(&p->mu);
    n = p->dropped;
    pthread_mutex_unlock(&p->mu);
    return n;
}

int zkproxy_accepted(zkproxy_t *p)
{
    int n;
    pthread_mutex_lock(&p->mu);
    n = p->accepted;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void zkproxy_stop(zkproxy_t *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_mutex_unlock(&p->mu);
    poke(p);
    pthread_join(p->thread, NULL);
    close(p->listener);
    close(p->wake[0]);
    close(p->wake[1]);
    pthread_mutex_destroy(&p->mu);
    free(p);
}
