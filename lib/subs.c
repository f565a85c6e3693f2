/*
 * subs.c: sub-acquisitions, the one module the semaphore (its acquisition
 * lock) and the multi-lock (its members) share.
 *
 * A sub is an ordinary contender of another handle whose owner is a
 * contender, its parent: the lease contender that queues for the
 * acquisition lock, the multi-lock that queues in each member's queue. A
 * sub never calls its parent: its phase changes mark the parent
 * (zklock__set_phase), whose step reads them (zklock__subs_read: a hold
 * taken, a failed acquisition, a lost hold). A parent lets a sub go by
 * marking it (zklock__let_go); the sub's own step then releases it or gives
 * it up. A parent is neither finished nor freed while a sub of it has
 * something on the server: a failed acquisition returns only once every
 * node it made is gone.
 */
#include "owner.h"
#include "subs.h"

/* ---- a parent's subs ---------------------------------------------------------- */

static void adopt(zkl_contender_t *c, zkl_contender_t *m)
{
    m->parent = c;
    m->next_sub = c->subs;
    c->subs = m;
}

zkl_contender_t *zklock__sub_new(zkl_contender_t *c, zklock_t *l, bool by_parent)
{
    zkl_contender_t *m = zklock__contender_new(l);

    if (!m)
        return NULL;
    m->owner = c->owner; /* while c holds, it holds for c's owner (zklock_fence(member)) */
    m->by_parent = by_parent;
    adopt(c, m);
    return m;
}

void zklock__sub_start(zkl_contender_t *c, zkl_contender_t *m)
{
    zklock__acquire_start(m, c->try_once ? 0 : -1, NULL, NULL);
}

zkl_contender_t *zklock__sub_of(const zkl_contender_t *c, const zklock_t *l)
{
    for (zkl_contender_t *m = c->subs; m; m = m->next_sub)
        if (m->l == l && !m->let_go)
            return m;
    return NULL;
}

bool zklock__sub_started(const zkl_contender_t *m)
{
    return m->waiting || m->phase != ZKL_QUEUING;
}


void zklock__disown(zkl_contender_t *c, zkl_contender_t *m)
{
    zkl_contender_t **p = &c->subs;

    while (*p && *p != m)
        p = &(*p)->next_sub;
    if (*p)
        *p = m->next_sub;
    m->next_sub = NULL;
    m->parent = NULL;
    zklock__abandon(m); /* the driver frees it once it can */
}

/* ---- letting go ---------------------------------------------------------------- */

void zklock__let_go(zkl_contender_t *c, zkl_contender_t *m)
{
    if (m->let_go)
        return;
    m->let_go = true;
    m->by_parent = false; /* a node made for it is its own to delete */
    zklock__mark(m);
    zklock__mark(c); /* one finished already is disowned in c's step */
}

void zklock__let_go_step(zkl_contender_t *m)
{
    if (!m->let_go)
        return;
    if (m->phase == ZKL_HELD && !m->releasing) {
        m->holds = 0;
        zklock__release_start(m, NULL, NULL);
    } else if (m->waiting) {
        m->canceled = true; /* its step gives it up */
    } else if (m->phase == ZKL_QUEUING) {
        zklock__give_up(m, ZKLOCK_ECANCELED); /* never started */
    }
}

/* ---- a parent's step: what became of its subs ------------------------------------ */

/* A sub let go is finished: disowned, its release's outcome counted in c's
 * own if `releases_count` (a multi-lock's members: its hold is theirs). */
static void collect_let_go(zkl_contender_t *c, zkl_contender_t *m, bool releases_count)
{
    if (releases_count && c->releasing && m->result != ZKLOCK_OK &&
        m->result != ZKLOCK_ECANCELED && c->result == ZKLOCK_OK)
        c->result = m->result; /* a sub's hold was gone: the release says so */
    zklock__disown(c, m);
}

void zklock__subs_read(zkl_contender_t *c, bool releases_count, struct zkl_subs_news *news)
{
    bool connected = zklock__connected(session_of(c));
    zkl_contender_t *m, *next;

    memset(news, 0, sizeof *news);
    for (m = c->subs; m; m = next) {
        next = m->next_sub;
        if (m->let_go) {
            if (m->phase == ZKL_LOST || m->phase == ZKL_GONE)
                collect_let_go(c, m, releases_count);
        } else if (m->waiting && m->phase == ZKL_HELD) {
            m->waiting = false; /* its parent holds it now */
            m->holds = 1;
        } else if (m->waiting &&
                   (m->phase == ZKL_GONE || (m->phase == ZKL_LEAVING && !connected))) {
            if (!news->failed) {
                news->failed = true;
                news->rc = m->result;
            }
        } else if (m->phase == ZKL_LOST && !news->lost) {
            news->lost = true;
            news->unconfirmed = m->loss_unconfirmed;
            news->why = m->loss_unconfirmed ? m->loss_fallback : m->lost_why;
        }
    }
}

void zklock__subs_let_go(zkl_contender_t *c)
{
    for (zkl_contender_t *m = c->subs, *next; m; m = next) {
        next = m->next_sub;
        zklock__let_go(c, m);
    }
}

bool zklock__subs_replace_lost(zkl_contender_t *c)
{
    for (zkl_contender_t *m = c->subs, *next; m; m = next) {
        zklock_t *l = m->l;
        bool by_parent = m->by_parent;
        next = m->next_sub;
        if (m->let_go || m->waiting || (m->phase != ZKL_LOST && m->phase != ZKL_GONE))
            continue; /* (a failed acquisition gives c up: zklock__subs_read) */
        zklock__disown(c, m);
        if (!zklock__sub_new(c, l, by_parent)) {
            zklock__give_up(c, ZKLOCK_ENOMEM);
            return false;
        }
    }
    return true;
}
