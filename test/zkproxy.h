/* zkproxy.h: a fault-injecting TCP proxy in front of one ZooKeeper server. */
#ifndef ZKLOCK_ZKPROXY_H
#define ZKLOCK_ZKPROXY_H

#include <stdbool.h>
#include <stdint.h>

typedef struct zkproxy zkproxy_t;

/* Listens on a free loopback port and forwards to upstream ("ip:port"). */
zkproxy_t *zkproxy_start(const char *upstream);
/* The same, listening on `listen` ("ip:port"; port 0 = any free one). */
zkproxy_t *zkproxy_start_at(const char *listen, const char *upstream);
/* The connect string of the proxy ("ip:port"). */
const char *zkproxy_hosts(zkproxy_t *p);
/* Closes every connection and refuses new ones until zkproxy_restore. */
void zkproxy_cut(zkproxy_t *p);
void zkproxy_restore(zkproxy_t *p);
/* Arms a lost reply: the next request of this type (ZOO_CREATE2_OP, ...)
 * reaches the server; its reply is dropped and the connection closed. */
void zkproxy_drop_reply(zkproxy_t *p, int optype);
/* The same, and from the drop on, refuses connections until zkproxy_restore:
 * the client stays cut off while the test changes the server behind it. */
void zkproxy_drop_reply_and_cut(zkproxy_t *p, int optype);
/* Arms a refusal: the next request of this type reaches the server, and
 * its reply reaches the client with its error code replaced by err (say
 * ZTHROTTLEDOP, an overloaded server's answer): the connection stays up. */
void zkproxy_fail_reply(zkproxy_t *p, int optype, int err);
/* Replies so rewritten so far. */
int zkproxy_failed(zkproxy_t *p);
/* Requests of this type (ZOO_SETDATA_OP, ...) forwarded so far. */
int zkproxy_sent(zkproxy_t *p, int optype);
/* Delays every message, each way, by min_ms..max_ms (uniformly at random),
 * keeping their order: a message never leaves before the one ahead of it,
 * as on one TCP connection. 0, 0 (the default) forwards at once. Applies to
 * messages that arrive from now on. */
void zkproxy_set_delay(zkproxy_t *p, int min_ms, int max_ms);
/* Replies dropped, connections accepted so far. */
int zkproxy_dropped(zkproxy_t *p);
int zkproxy_accepted(zkproxy_t *p);
void zkproxy_stop(zkproxy_t *p);

#endif
