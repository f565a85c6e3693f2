/*
 * request.h: the one way the engine talks to ZooKeeper (request.c): a contender's
 * requests, whose answers its step reads (zklock__send, zklock__send_beside,
 * zklock__may_send: recipe.h, with the request's vocabulary). zklock__send
 * counts it (c->ops; c->busy for all but the requests beside the chain),
 * stamps the generation, and registers the completion that records its
 * answer in c->answer for c's step; a refusal by the client is recorded
 * (c->refused, for the step) and c marked. A contender may send in a
 * generation if it has a ticket of it, or one free: only one whose requests
 * of ZKL_TICKETS - 1 older generations are all still unanswered waits.
 */
#ifndef ZKLOCK_REQUEST_H
#define ZKLOCK_REQUEST_H

#include "contender.h"

/* The handle is closed: none of c's answers will come. */
void zklock__requests_gone(zkl_contender_t *c);
/* The watcher of a kind of watch (s->doors'; NULL for none). */
watcher_fn zklock__watcher(const zklock_session_t *s, enum zkl_watch watch);
/* An answer's door (doors.c): the session of the request whose completion
 * data is `slot` (read without s->mu: the contender lives while its
 * request is in flight), and then, with s->mu held, the answer counted off
 * and recorded for its contender's step (unless it is of an older
 * generation): the contender, to mark. */
zklock_session_t *zklock__answer_session(const void *slot);
zkl_contender_t *zklock__answer_record(const void *slot, struct zkl_answer *a);

#endif
