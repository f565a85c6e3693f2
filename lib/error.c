/* error.c: version, error codes and state names. */
#include "common.h"

const char *zklock_version(void)
{
    return PACKAGE_VERSION;
}

const char *zklock_strerror(int rc)
{
    switch (rc) {
    case ZKLOCK_OK:
        return "ok";
#define ZKL_STRERROR_CASE_(name, value, msg) \
    case ZKLOCK_##name:                      \
        return msg;
        ZKLOCK_ERRNO_MAP(ZKL_STRERROR_CASE_)
#undef ZKL_STRERROR_CASE_
    /* Where ZooKeeper's own text misleads a lock user: */
    case ZNOAUTH: /* zerror: "not authenticated", whoever one is */
        return "not allowed by the ACL (of the lock path, or of the parent of a "
               "level zklock had to create)";
    case ZAUTHFAILED:
        return "the server rejected the session's credentials";
    case ZINVALIDACL: /* the creator ACL names no identity without credentials */
        return "invalid ACL (ZKLOCK_ACL_CREATOR needs a session with credentials)";
    }
    if (rc < 0 && rc > ZKLOCK_ERRNO_BASE) {
        /* zerror() knows every ZOO_ERRORS code; its text for others is
         * "unknown error" too. */
        return zerror(rc);
    }
    return "unknown error";
}

/* ZooKeeper's codes by name (zookeeper.h has no such table). */
#define ZKL_ZOO_ERRORS(X)                                                     \
    X(ZSYSTEMERROR) X(ZRUNTIMEINCONSISTENCY) X(ZDATAINCONSISTENCY)            \
    X(ZCONNECTIONLOSS) X(ZMARSHALLINGERROR) X(ZUNIMPLEMENTED)                 \
    X(ZOPERATIONTIMEOUT) X(ZBADARGUMENTS) X(ZINVALIDSTATE)                    \
    X(ZNEWCONFIGNOQUORUM) X(ZRECONFIGINPROGRESS) X(ZSSLCONNECTIONERROR)       \
    X(ZAPIERROR) X(ZNONODE) X(ZNOAUTH) X(ZBADVERSION)                         \
    X(ZNOCHILDRENFOREPHEMERALS) X(ZNODEEXISTS) X(ZNOTEMPTY)                   \
    X(ZSESSIONEXPIRED) X(ZINVALIDCALLBACK) X(ZINVALIDACL) X(ZAUTHFAILED)      \
    X(ZCLOSING) X(ZNOTHING) X(ZSESSIONMOVED) X(ZNOTREADONLY)                  \
    X(ZEPHEMERALONLOCALSESSION) X(ZNOWATCHER) X(ZRECONFIGDISABLED)            \
    X(ZSESSIONCLOSEDREQUIRESASLAUTH) X(ZTHROTTLEDOP)

const char *zklock_err_name(int rc)
{
    switch (rc) {
    case ZKLOCK_OK:
        return "ZKLOCK_OK";
#define ZKL_NAME_CASE_(name, value, msg) \
    case ZKLOCK_##name:                  \
        return "ZKLOCK_" #name;
        ZKLOCK_ERRNO_MAP(ZKL_NAME_CASE_)
#undef ZKL_NAME_CASE_
#define ZKL_ZOO_CASE_(name) \
    case name:              \
        return #name;
        ZKL_ZOO_ERRORS(ZKL_ZOO_CASE_)
#undef ZKL_ZOO_CASE_
    }
    return "UNKNOWN";
}

const char *zklock_state_name(int state)
{
    switch (state) {
    case ZKLOCK_CONNECTED:
        return "CONNECTED";
    case ZKLOCK_SUSPENDED:
        return "SUSPENDED";
    case ZKLOCK_RECONNECTED:
        return "RECONNECTED";
    case ZKLOCK_EXPIRED:
        return "EXPIRED";
    }
    return "UNKNOWN";
}
