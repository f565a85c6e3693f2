/*
 * wire.c: the real wire (wire.h): libzookeeper_mt, clock_gettime and
 * pthreads. The only file of the library that names a ZooKeeper call, a
 * clock or a thread call; what each function promises is wire.h's
 * contract, which is libzookeeper_mt's own.
 */
#include "names.h"
#include "wire.h"

#include <errno.h>

#if defined(HAVE_ZOOKEEPER_TLS) && !defined(HAVE_OPENSSL_H)
/* zookeeper.h declares it only for its own build's HAVE_OPENSSL_H. */
zhandle_t *zookeeper_init_ssl(const char *host, const char *cert, watcher_fn fn,
                              int recv_timeout, const clientid_t *clientid, void *context,
                              int flags);
#endif

static zhandle_t *real_init(void *env, const char *host, watcher_fn fn, int recv_timeout,
                            const clientid_t *clientid, void *context, int flags)
{
    (void)env;
    return zookeeper_init(host, fn, recv_timeout, clientid, context, flags);
}

#ifdef HAVE_ZOOKEEPER_TLS
static zhandle_t *real_init_ssl(void *env, const char *host, const char *cert, watcher_fn fn,
                                int recv_timeout, const clientid_t *clientid, void *context,
                                int flags)
{
    (void)env;
    return zookeeper_init_ssl(host, cert, fn, recv_timeout, clientid, context, flags);
}
#endif

static int real_resolve(void *env, const char *hosts)
{
    (void)env;
    return zklock__hosts_resolve(hosts);
}

static void real_clock(void *env, clockid_t which, struct timespec *ts)
{
    (void)env;
    clock_gettime(which, ts);
}

static int real_cond_wait(void *env, pthread_cond_t *cond, pthread_mutex_t *mu,
                          const struct timespec *at)
{
    (void)env;
    if (!at)
        return pthread_cond_wait(cond, mu);
    return pthread_cond_timedwait(cond, mu, at) == ETIMEDOUT ? ETIMEDOUT : 0;
}

static int real_thread_start(void *env, pthread_t *t, void *(*run)(void *), void *arg)
{
    (void)env;
    return pthread_create(t, NULL, run, arg);
}

static void real_thread_join(void *env, pthread_t t)
{
    (void)env;
    pthread_join(t, NULL);
}

const struct zkl_wire zklock__real_wire = {
    .init = real_init,
#ifdef HAVE_ZOOKEEPER_TLS
    .init_ssl = real_init_ssl,
#endif
    .resolve = real_resolve,
    .close = zookeeper_close,
    .state = zoo_state,
    .recv_timeout = zoo_recv_timeout,
    .client_id = zoo_client_id,
    .add_auth = zoo_add_auth,
    .set_servers_resolution_delay = zoo_set_servers_resolution_delay,
    .acreate = zoo_acreate,
    .acreate2 = zoo_acreate2,
    .adelete = zoo_adelete,
    .aexists = zoo_aexists,
    .awexists = zoo_awexists,
    .aget = zoo_aget,
    .awget = zoo_awget,
    .aset = zoo_aset,
    .aget_children = zoo_aget_children,
    .aget_children2 = zoo_aget_children2,
    .awget_children2 = zoo_awget_children2,
    .async = zoo_async,
    .amulti = zoo_amulti,
    .remove_watches = zoo_remove_watches,
    .clock = real_clock,
    .cond_wait = real_cond_wait,
    .thread_start = real_thread_start,
    .thread_join = real_thread_join,
    .in_completion = NULL,
    .seed = NULL, /* getrandom (zklock__rng_seed) */
};
