#define _GNU_SOURCE 1 /* accept4 */
/* zkproxy.c: a TCP proxy between a ZooKeeper client and its server that
 * can cut connections, swallow one reply and delay messages, for fault
 * tests (test/test_faults.c links it; test/partition/zkproxy-run runs it
 * inside the partition rig's network namespaces).
 *
 * It understands just enough of the protocol: every message is a 4-byte
 * big-endian length and a payload. The first message each way is the
 * connect request/response; after that a request starts with (xid, type)
 * and a reply with xid. Swallowing "the reply to the next request of type
 * T" reproduces a request that reached the server and took effect while its
 * answer was lost: the proxy waits for the server's reply (proof that it
 * was applied), drops it and closes the client's connection. A delay holds
 * each whole message for its own random time, never past the one behind it
 * (one TCP connection does not reorder). */
#include "zkproxy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_PAIRS 64
#define OP_TYPES 128 /* request types counted (ZOO_*_OP below it) */
#define BUF_MAX (1 << 20)

struct msg {      /* a whole message waiting for its time */
    struct msg *next;
    int64_t due;  /* CLOCK_MONOTONIC ns */
    size_t len;   /* with its length prefix */
    unsigned char data[];
};

struct stream {   /* one direction of a pair */
    unsigned char *buf; /* what arrived of the next message */
    size_t len;
    bool greeted; /* the connect message has passed */
    bool eof;     /* the sender closed: the pair ends once the queue is out */
    struct msg *head, *tail;
    int64_t last_due;
};

struct pair {
    int client, server;
    bool connecting;        /* the upstream connect is in progress */
    struct stream up, down; /* client->server, server->client */
    int32_t doomed_xid;     /* reply to swallow; 0 = none */
    bool doomed;
    int32_t failing_xid;    /* reply whose error code to replace */
    bool failing;
    int fail_err;
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
    int fail_type, fail_err; /* arm: answer the next request of this type with fail_err */
    int failed;      /* replies rewritten so far */
    int sent[OP_TYPES]; /* requests forwarded so far, by type */
    int accepted;    /* connections accepted so far */
    int delay_min, delay_max; /* ms */
    unsigned seed;
};

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void stream_free(struct stream *st)
{
    while (st->head) {
        struct msg *m = st->head;
        st->head = m->next;
        free(m);
    }
    free(st->buf);
}

static void close_pair(struct zkproxy *p, int i)
{
    close(p->pairs[i].client);
    close(p->pairs[i].server);
    stream_free(&p->pairs[i].up);
    stream_free(&p->pairs[i].down);
    p->pairs[i] = p->pairs[--p->npairs];
}

static void close_all(struct zkproxy *p)
{
    while (p->npairs > 0)
        close_pair(p, 0);
}

/* Starts connecting to the server without waiting for it: a server
 * behind a lossy or silent link must not hold up the other connections. */
static int connect_upstream(struct zkproxy *p, bool *connecting)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), one = 1;
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    *connecting = connect(fd, (struct sockaddr *)&p->upstream, sizeof p->upstream) != 0;
    if (*connecting && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    if (!*connecting)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    return fd;
}

/* The upstream connect finished (poll said so): false if it failed. */
static bool connect_done(struct pair *pr)
{
    int err = 0;
    socklen_t len = sizeof err;

    if (getsockopt(pr->server, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0)
        return false;
    fcntl(pr->server, F_SETFL, fcntl(pr->server, F_GETFL) & ~O_NONBLOCK);
    pr->connecting = false;
    return true;
}

static void accept_one(struct zkproxy *p)
{
    int fd = accept4(p->listener, NULL, NULL, SOCK_CLOEXEC), one = 1, up;
    bool connecting = false;

    if (fd < 0)
        return;
    if (p->refusing || p->npairs == MAX_PAIRS || (up = connect_upstream(p, &connecting)) < 0) {
        close(fd); /* the client sees its connection fail and tries again */
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    memset(&p->pairs[p->npairs], 0, sizeof p->pairs[0]);
    p->pairs[p->npairs].client = fd;
    p->pairs[p->npairs].server = up;
    p->pairs[p->npairs].connecting = connecting;
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
static bool inspect(struct zkproxy *p, struct pair *pr, bool upward, unsigned char *msg,
                    size_t len)
{
    struct stream *st = upward ? &pr->up : &pr->down;

    if (!st->greeted) {
        st->greeted = true;
        return true;
    }
    if (len < 4)
        return true;
    if (upward && len >= 8 && be32(msg + 4) < OP_TYPES)
        p->sent[be32(msg + 4)]++;
    if (upward && len >= 8 && p->drop_type != 0 && (int)be32(msg + 4) == p->drop_type) {
        pr->doomed = true;
        pr->doomed_xid = (int32_t)be32(msg);
        p->drop_type = 0;
    }
    if (upward && len >= 8 && p->fail_type != 0 && (int)be32(msg + 4) == p->fail_type) {
        pr->failing = true;
        pr->failing_xid = (int32_t)be32(msg);
        pr->fail_err = p->fail_err;
        p->fail_type = 0;
    }
    /* A reply header: xid, zxid (8 bytes), err. The body, if any, stays:
     * the client reads none after an error. */
    if (!upward && pr->failing && len >= 16 && (int32_t)be32(msg) == pr->failing_xid) {
        uint32_t err = (uint32_t)pr->fail_err;
        msg[12] = (unsigned char)(err >> 24);
        msg[13] = (unsigned char)(err >> 16);
        msg[14] = (unsigned char)(err >> 8);
        msg[15] = (unsigned char)err;
        pr->failing = false;
        p->failed++;
    }
    if (!upward && pr->doomed && (int32_t)be32(msg) == pr->doomed_xid) {
        p->dropped++;
        p->refusing = p->refusing || p->cut_on_drop;
        p->cut_on_drop = false;
        return false;
    }
    return true;
}

/* Queues one whole message for its time: now plus the delay, but never
 * before the message ahead of it. */
static bool enqueue(struct zkproxy *p, struct stream *st, const unsigned char *b, size_t n)
{
    struct msg *m = malloc(sizeof *m + n);
    int64_t due = now_ns();

    if (!m)
        return false;
    if (p->delay_max > 0)
        due += ((int64_t)p->delay_min +
                rand_r(&p->seed) % (p->delay_max - p->delay_min + 1)) * 1000000;
    if (due < st->last_due)
        due = st->last_due;
    st->last_due = due;
    m->next = NULL;
    m->due = due;
    m->len = n;
    memcpy(m->data, b, n);
    if (st->tail)
        st->tail->next = m;
    else
        st->head = m;
    st->tail = m;
    return true;
}

/* Queues what arrived on one side, message by message. */
static bool relay(struct zkproxy *p, struct pair *pr, bool upward)
{
    struct stream *st = upward ? &pr->up : &pr->down;
    int from = upward ? pr->client : pr->server;
    unsigned char chunk[65536];
    ssize_t n = read(from, chunk, sizeof chunk);
    size_t off = 0;

    if (n == 0) {
        st->eof = true; /* what is queued still goes, then the pair ends */
        return true;
    }
    if (n < 0 || st->len + (size_t)n > BUF_MAX)
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
        if (!enqueue(p, st, st->buf + off, 4 + mlen))
            return false;
        off += 4 + mlen;
    }
    memmove(st->buf, st->buf + off, st->len - off);
    st->len -= off;
    return true;
}

/* Sends the messages whose time has come; false: the pair is over. */
static bool flush(struct pair *pr, bool upward, int64_t now)
{
    struct stream *st = upward ? &pr->up : &pr->down;
    int to = upward ? pr->server : pr->client;

    while (st->head && st->head->due <= now && !(upward && pr->connecting)) {
        struct msg *m = st->head;
        if (!write_all(to, m->data, m->len))
            return false;
        st->head = m->next;
        if (!st->head)
            st->tail = NULL;
        free(m);
    }
    return !(st->eof && !st->head);
}

/* The earliest time a queued message is due, or -1 (none): a poll timeout. */
static int next_due_ms(const struct zkproxy *p, int64_t now)
{
    int64_t first = -1;

    for (int i = 0; i < p->npairs; i++) {
        const struct pair *pr = &p->pairs[i];
        if (pr->up.head && !pr->connecting && (first < 0 || pr->up.head->due < first))
            first = pr->up.head->due;
        if (pr->down.head && (first < 0 || pr->down.head->due < first))
            first = pr->down.head->due;
    }
    if (first < 0)
        return -1;
    return first <= now ? 0 : (int)((first - now + 999999) / 1000000);
}

static void *proxy_main(void *arg)
{
    struct zkproxy *p = arg;
    struct pollfd fds[2 + 2 * MAX_PAIRS];

    for (;;) {
        int n = 0, timeout;
        pthread_mutex_lock(&p->mu);
        if (p->stopping) {
            close_all(p);
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        fds[n++] = (struct pollfd){p->wake[0], POLLIN, 0};
        fds[n++] = (struct pollfd){p->listener, POLLIN, 0};
        for (int i = 0; i < p->npairs; i++) {
            const struct pair *pr = &p->pairs[i];
            /* -1 is ignored by poll: a side that closed is not read again */
            fds[n++] = (struct pollfd){pr->up.eof ? -1 : pr->client, POLLIN, 0};
            fds[n++] = (struct pollfd){pr->down.eof ? -1 : pr->server,
                                       pr->connecting ? POLLOUT : POLLIN, 0};
        }
        timeout = next_due_ms(p, now_ns());
        pthread_mutex_unlock(&p->mu);
        if (poll(fds, (nfds_t)n, timeout) < 0 && errno != EINTR)
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
                if (fds[k].fd == pr->server && pr->connecting ? !connect_done(pr)
                                                              : !relay(p, pr, fds[k].fd == pr->client))
                    close_pair(p, i);
                break;
            }
        }
        {
            int64_t now = now_ns();
            for (int i = p->npairs - 1; i >= 0; i--)
                if (!flush(&p->pairs[i], true, now) || !flush(&p->pairs[i], false, now))
                    close_pair(p, i);
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

/* "ip:port" into *a; false if it is not one. */
static bool parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');

    if (!colon || (size_t)(colon - s) >= sizeof host)
        return false;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)atoi(colon + 1));
    return inet_pton(AF_INET, host, &a->sin_addr) == 1;
}

zkproxy_t *zkproxy_start_at(const char *listen_at, const char *upstream)
{
    struct zkproxy *p = calloc(1, sizeof *p);
    struct sockaddr_in me = {.sin_family = AF_INET};
    socklen_t len = sizeof me;
    char ip[INET_ADDRSTRLEN];
    int one = 1;

    if (!p)
        return NULL;
    p->listener = -1;
    if (!parse_addr(upstream, &p->upstream) || !parse_addr(listen_at, &me))
        goto fail;
    p->listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (p->listener < 0 ||
        setsockopt(p->listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(p->listener, (struct sockaddr *)&me, sizeof me) != 0 ||
        listen(p->listener, 16) != 0 || getsockname(p->listener, (struct sockaddr *)&me, &len) != 0 ||
        pipe(p->wake) != 0)
        goto fail;
    inet_ntop(AF_INET, &me.sin_addr, ip, sizeof ip);
    snprintf(p->hosts, sizeof p->hosts, "%s:%d", ip, ntohs(me.sin_port));
    p->seed = (unsigned)now_ns() ^ (unsigned)getpid() ^ me.sin_port;
    pthread_mutex_init(&p->mu, NULL);
    if (pthread_create(&p->thread, NULL, proxy_main, p) != 0)
        goto fail;
    return p;
fail:
    if (p->listener >= 0)
        close(p->listener);
    free(p);
    return NULL;
}

zkproxy_t *zkproxy_start(const char *upstream)
{
    return zkproxy_start_at("127.0.0.1:0", upstream);
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

void zkproxy_fail_reply(zkproxy_t *p, int optype, int err)
{
    pthread_mutex_lock(&p->mu);
    p->fail_type = optype;
    p->fail_err = err;
    pthread_mutex_unlock(&p->mu);
}

int zkproxy_sent(zkproxy_t *p, int optype)
{
    int n = 0;

    pthread_mutex_lock(&p->mu);
    if (optype >= 0 && optype < OP_TYPES)
        n = p->sent[optype];
    pthread_mutex_unlock(&p->mu);
    return n;
}

int zkproxy_failed(zkproxy_t *p)
{
    int n;

    pthread_mutex_lock(&p->mu);
    n = p->failed;
    pthread_mutex_unlock(&p->mu);
    return n;
}

void zkproxy_set_delay(zkproxy_t *p, int min_ms, int max_ms)
{
    pthread_mutex_lock(&p->mu);
    p->delay_min = min_ms < 0 ? 0 : min_ms;
    p->delay_max = max_ms < p->delay_min ? p->delay_min : max_ms;
    pthread_mutex_unlock(&p->mu);
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
