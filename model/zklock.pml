/*
 * model/zklock.pml: a Promela model of zklock's queue engine (lib/step.c,
 * rules.c, contender.c, fastpath.c, watch.c, stale.c, the lease's "told
 * first"; engine.c and judge.c when it was written), checked with spin. docs/design.md, "A model of the protocol",
 * says what is modelled, what is abstracted away and how to run it
 * (model/check.sh).
 *
 * One server (a linearizable ZooKeeper) and NK client processes, each with
 * one session at a time and one or two contenders. Every step of a process
 * is one atomic block: a request served, an answer or watch event handled,
 * an owner's call, a timer, a fault. Scenarios (SCEN): 1 a mutex (or a
 * queue of exclusive and shared nodes), 2 the read/write lock with its
 * downgrade heirs, 3 two multi-locks on two lock paths and a plain holder
 * (recipes/multi.c: one transaction makes a multi-lock's nodes), 4 the
 * mutex with the previous holder's record (lib/previous.c, record.c).
 *
 * Properties (checked after every step, and when nothing can move):
 *  P1  mutual exclusion: no two holders of different owners whose nodes are
 *      on the server, unless both are shared (p1_mutex); and a holder
 *      believes without its node only after an operator deleted that node
 *      (the own-watch window of design.md) (p1_belief).
 *  P2  no orphan node blocks the queue forever: when nothing can move, every
 *      node left is one a contender queues, holds or releases by (p2_orphan).
 *  P3  progress: when nothing can move, every owner did all its rounds
 *      (p3_progress); `ltl progress` (spin -a -f) also rules out cycles.
 *      Two multi-locks waiting for each other (SCEN 3) are such a state.
 *  P4  (SCEN 4) the verdict is sound: NONE only if no hold was its
 *      owner's before, CLEAN (UNCLEAN) only if the last such hold is the
 *      one the record names, over, and ended by its owner's release (or
 *      not; or a "held" never its owner's, left as its node went)
 *      (p4_sound).
 *  P5  (SCEN 4) the verdict is definite: UNKNOWN only if a node no record
 *      can explain (an untracked contender's, a tracking one's gone without
 *      a word) was made between the record's holder's and ours
 *      (p5_definite): never when every contender tracks and none dies
 *      before it holds.
 *
 * Switches (-D): the scenario (SCEN, NK, NSHARED, READER; SCEN 4:
 * UNTRACKED, TRYONCE, DELAY), the owners' rounds (ROUNDS0, ROUNDS), a
 * budget per fault (LOSSES, OPDELS, EXPIRES, LEXPIRES, REAPS, GIVEUPS,
 * LIMBOS, DOWNGRADES, CRASHES). Deliberately broken
 * variants, each must fail (check.sh): BROKEN_FAST_PATH (no zxid gap
 * check), BROKEN_SOLE_BLOCKER (the handoff without a listing whatever the
 * count of blockers), BROKEN_HEIR_RELIST (no second look behind a writer),
 * BROKEN_HEIR (a heir without its writer's check), BROKEN_OWNER_CHECK (an
 * adoption without the ephemeralOwner check; STICKY_PREFIX keeps a name
 * prefix for the owner's life, which that check then needs),
 * BROKEN_LEASE_CLEANUP (a hold lost by the lease keeps its node),
 * BROKEN_HEIR_ORPHAN (a heir lost with its writer keeps its node),
 * BROKEN_WATCH_NONODE (a predecessor gone before its watch is ignored),
 * BROKEN_HEIR_REQUEUE (a heir whose own node went queues as a reader even
 * while its writer holds: the engine's defect the model found, fixed),
 * BROKEN_MULTI_REQUEUE (SCEN 3: a multi-lock queues a member that lost its
 * place again alone, while the other keeps its place: issue 21's deadlock);
 * SCEN 4: BROKEN_GIVEUP_SILENT (a tracking contender that never held
 * deletes its node without a word), BROKEN_TRUST_GAPS (the judge vouches
 * for the record whatever the numbers between), BROKEN_UNCOUNTED_RECORD
 * (the record's own creation explains no number), BROKEN_DROP_NEVER (a
 * holder's write forgets the give-ups after it), BROKEN_STALE_READ (a read
 * answered after its contender's node went counts as fresh for its next
 * turn: previous.c's on_read, which the model found: design.md),
 * BROKEN_GIVEUP_RELEASES (a give-up whose "held" landed as it gave up
 * writes "released" in its own name, as the record's engine first did).
 */

/* ---- configuration --------------------------------------------------------- */

#ifndef SCEN
#define SCEN 1
#endif

#if SCEN == 1 || SCEN == 3 || SCEN == 4
/* A mutex (or, with NSHARED, a queue of exclusive and shared nodes without
 * heirs): client k has contender k. (SCEN 3 redefines the layout below;
 * SCEN 4 is this mutex with the previous holder's record.) */
#ifndef NK
#define NK 3
#endif
#define NC NK
#ifndef NSHARED
#define NSHARED 0
#endif
#define CL(c) (c)
#define FIRST(k) (k)
#define NCK(k) 1
#define EX(c) ((c) < NC - NSHARED)
#define WRITER_TAG 0 /* "lock-" nodes: no downgrade heirs behind them */
#else
/* A read/write lock: client 0 owns a write view (c0) and a read view (c1,
 * which takes downgrade heirs); client 1 a writer (c2); with READER,
 * client 2 a reader (c3). */
#ifdef READER
#define NK 3
#define NC 4
#else
#define NK 2
#define NC 3
#endif
#define CL(c) ((c) < 2 -> 0 : (c) - 1)
#define FIRST(k) ((k) == 0 -> 0 : (k) + 1)
#define NCK(k) ((k) == 0 -> 2 : 1)
#define EX(c) ((c) == 0 || (c) == 2)
#define WRITER_TAG 1 /* __WRIT__ nodes: a heir may appear behind them */
#define RW 1
#endif
#if SCEN == 3
/* Two multi-locks (recipes/multi.c) on two lock paths, and (NK=3) a plain
 * holder: client 0 is the multi-lock M0, its members c0 (path 0) and c1
 * (path 1); client 1 is M1, members c2 (path 0) and c3 (path 1); client 2
 * takes path 1 (c4, a mutex). A member is an ordinary contender, but its
 * node is made by its multi-lock's transaction (one server step, the nodes
 * of both), never by itself. */
#ifndef NK
#define NK 3
#endif
#undef NC
#undef CL
#undef FIRST
#undef NCK
#undef EX
#undef WRITER_TAG
#undef RW
#define NC (NK + 2)
#define CL(c) ((c) / 2)
#define FIRST(k) (2 * (k))
#define NCK(k) (2 - (k) / 2)
#define EX(c) 1
#define WRITER_TAG 0
#define MULTI 1
#define NPATHS 2
#define PATH_OF(c) (((c) & 1) | ((c) >> 2)) /* c0, c2: 0; c1, c3, c4: 1 */
#define BYP(c) ((c) < 4) /* a multi-lock's member: its node is its multi-lock's to make */
#define ISM(k) ((k) < 2) /* client k is a multi-lock's owner */
#define MA(k) (2 * (k)) /* its members */
#define MB(k) (2 * (k) + 1)
#if REAPS > 0 || GIVEUPS > 0 || LIMBOS > 0 || DOWNGRADES > 0 || NK < 2
#error "SCEN 3: two multi-locks (NK 2 or 3), no reaps, give-ups, late creates or downgrades"
#endif
#else
#define NPATHS 1
#define PATH_OF(c) 0
#define BYP(c) 0
#define ISM(k) 0
#endif
#if SCEN == 4
/* A tracking mutex (lib/previous.c, record.c: design.md, "The previous
 * holder's fate"): every contender keeps the record but, with UNTRACKED,
 * the last client's (a Curator or kazoo peer, a zklock mutex without
 * tracking). TRYONCE: a mask of the clients that acquire with a zero
 * timeout (they give up when their listing shows a blocker, and, with
 * DELAY, at their turn after an unclean or unknown end: the lock-delay
 * does not fit in their call). CRASHES: a client dies (kill -9), its
 * session expires at once. */
#define TRACK 1
#ifndef UNTRACKED
#define UNTRACKED 0
#endif
#ifndef TRYONCE
#define TRYONCE 0
#endif
#ifndef DELAY
#define DELAY 0
#endif
#define TRACKS(c) (!UNTRACKED || (c) != NC - 1)
#define TRY1(c) ((TRYONCE >> CL(c)) & 1)
#if MAXHOLDS > 0 || LEXPIRES > 0 || REAPS > 0 || LIMBOS > 0 || NSHARED > 0
#error "SCEN 4: a mutex; faults: give-ups, crashes, operator deletes, losses and expiries"
#endif
#endif
#ifndef CRASHES
#define CRASHES 0 /* SCEN 4: a client dies, its session expires */
#endif

/* acquisitions: contender 0's, everyone else's (client 0's read view in
 * SCEN 2 only queues as a downgrade heir, DOWNGRADES times) */
#ifndef ROUNDS0
#define ROUNDS0 2
#endif
#ifndef ROUNDS
#define ROUNDS 1
#endif
/* faults, each a budget for the whole run */
#ifndef LOSSES
#define LOSSES 0 /* connection losses: requests unanswered, replies lost */
#endif
#ifndef OPDELS
#define OPDELS 0 /* an operator deletes a node */
#endif
#ifndef MAXHOLDS
#define MAXHOLDS 0 /* a hold reaches opts.max_hold_ms while connected (issue 25) */
#endif
#ifndef EXPIRES
#define EXPIRES 0 /* the server expires a disconnected client's session */
#endif
#ifndef LEXPIRES
#define LEXPIRES 0 /* a disconnected client gives its session up (local expiry) */
#endif
#ifndef REAPS
#define REAPS 0 /* the server removes the empty lock path (a container) */
#endif
#ifndef GIVEUPS
#define GIVEUPS 0 /* a waiter gives up (deadline, cancel) */
#endif
#ifndef LIMBOS
#define LIMBOS 0 /* a create of a given-up session is applied late */
#endif
#ifndef DOWNGRADES
#define DOWNGRADES 0 /* SCEN 2: the write holder takes the read side (a heir) */
#endif

/* Feature n is reached (an assignment to a hidden variable: nothing of the
 * state changes). check.sh reads pan's list of unreached statements (spin
 * -o3 keeps the assignment a statement of its own) and asks that the correct
 * runs reach every feature: a property that holds only because its case
 * never happens proves nothing. With -DWITNESS=n, reaching it fails (a
 * trace to it). */
#ifndef WITNESS
#define WITNESS 0
#endif
#define REACHED(n) wit = n; assert(WITNESS != n)

#define MAXN 14 /* node slots; never reused */
#define QCAP 8 /* channel capacity */

/* ---- the server ---------------------------------------------------------------- */

/* Node slot s (1..MAXN): its sequence number, its name (the creating
 * contender, that contender's name prefix, heir, exclusive), its owner
 * session (k * 8 + incarnation). A slot is used once: a deleted node's
 * attributes stay (clients may still name it), only `live` changes. */
byte nseq[MAXN + 1];
byte nnm[MAXN + 1];
byte nsess[MAXN + 1];
byte wp[MAXN + 1]; /* contenders with a getData watch for the node that blocks them */
int live;          /* bit s: node s exists */
int opdel;         /* bit s: node s was deleted by an operator (ghost) */
byte nslots;
bool path = 1;     /* the lock path (a container) exists */
byte cre[NPATHS];  /* creations under it: cversion as ZooKeeper numbers children */
#ifdef MULTI
int onp1;          /* bit s: node s is in lock path 1 (else 0) */
#define PMASK(p) (onp1 ^ ((p) - 1)) /* the nodes of path p (1: onp1, 0: the others) */
#else
#define PMASK(p) (~0)
#endif
byte hgap[NC];     /* transactions since this handle's last create (saturating at 3) */

#define N_C(s) (nnm[s] & 7)
#define N_PFX(s) ((nnm[s] >> 3) & 7)
#define N_HEIR(s) ((nnm[s] >> 6) & 1)
#define N_EX(s) ((nnm[s] >> 7) & 1)
#define NAME(c, p, h, x) ((c) | ((p) << 3) | ((h) << 6) | ((x) << 7))
#define LIVE(s) ((live >> (s)) & 1)
#define BIT(x) (1 << (x))
#define KEY(s) (nseq[s] * 2 + 1 - N_EX(s)) /* queue order: sequence, exclusive first */

/* sessions: client k's current incarnation; alive and given-up ones (bits) */
byte sinc[NK];
byte salive[NK];
byte saband[NK];
bool conn[NK];
#define SID(k) ((k) * 8 + sinc[k])

/* A create (or heir multi) of a session the client then gave up, not yet
 * applied by a lagging server: it may still be, while that session lives. */
byte lim_c[NK];   /* contender + 1, or 0 */
byte lim_pfx[NK];
byte lim_heir[NK];
byte lim_hof[NK];
byte lim_hseq[NK];
byte lim_inc[NK];

byte b_loss = LOSSES, b_opdel = OPDELS, b_exp = EXPIRES, b_lexp = LEXPIRES;
byte b_reap = REAPS, b_give = GIVEUPS, b_limbo = LIMBOS, b_down = DOWNGRADES;
byte b_maxhold = MAXHOLDS;
byte b_crash = CRASHES;

#ifdef TRACK
/* The record, "zklock.previous" (record.c): a persistent child of the lock
 * path. Its holder's node's sequence number stands for its token too (both
 * count creations under the one path); its own creation takes a number
 * (rcre) like any child's. never: bit n, the contender of number n gave up
 * without ever holding. rcur, bit c: the version c read (or wrote) last is
 * the record's current one (a write with the version read fails otherwise). */
#define R_NONE 0
#define R_HELD 1
#define R_RELEASED 2
#define END_NEVER 0    /* a tracking contender's end: its number among those that never held */
#define END_RELEASED 1 /* ... "released" */
#define END_UNDO 2     /* ... the record its "held" replaced put back, then END_NEVER */
bool rpres;
byte rstate;
byte rhseq;
short rnever;
byte rcre;
byte rcur;
/* Ghost truth: the node of the last hold that was its owner's (0: nobody
 * held yet: a tracking hold is its owner's once its "held" is written and
 * its owner told, an untracked one at its grant), whether it goes on,
 * whether it ended by its owner's release (its node deleted by its own
 * contender, not by the end of its session, nor an operator). dark, bit n:
 * node n can leave a gap no record explains (an untracked contender's, or a
 * tracking one's gone without a word before it held). */
byte t_slot;
bool t_open;
bool t_clean;
short dark;
short wvan; /* bit n: node n's "held" was written, never its owner's, and it went without a word */
hidden byte own_del; /* the deletion under way is its contender's own doing */
#endif

/* ---- messages ------------------------------------------------------------------ */

mtype = { CREATE, PARENTS, LIST, GETW, OWNW, OWNER, DELETE, HEIR, STALE, STRAY,
          EV_PRED, EV_OWN, ENQUEUE, RREAD, RWRITE, REND };
/* answers */
#define OK 0
#define NONODE 1
#define EXISTS 2
#define ERR 3     /* connection loss: the request may or may not have been applied */
#define NOCHECK 4 /* a heir's multi: its writer's node is gone */
#define BADVERSION 5 /* a record's write: it changed since it was read */

/* requests: op, contender, a, b. Answers and events: op, contender, rc,
 * a (a slot, or a listing's bit set), b, d. One FIFO pair per client: a
 * session's requests are answered in order, a watch event comes before the
 * answer of a later request. */
chan req[NK] = [QCAP] of { mtype, byte, byte, byte };
chan rep[NK] = [QCAP] of { mtype, byte, byte, short, byte, byte };

/* ---- contenders ---------------------------------------------------------------- */

#define IDLE 0    /* no call: the owner may acquire (a fresh contender) */
#define QUEUING 1
#define HELD 2
#define LOST 3
#define LEAVING 4
#define GONE 5    /* finished; becomes IDLE once nothing of it is in flight */
#define GRANTING 6 /* SCEN 4: its turn; reads the record, writes "held" */
#define WANTS(c) (C[c].ph == QUEUING || C[c].ph == GRANTING)

typedef Cont {
    unsigned ph : 3;
    unsigned node : 4;    /* our node's slot, 0: none */
    unsigned seq : 4;
    unsigned pfx : 3;     /* the name prefix (a uuid per contender in zklock) */
    unsigned busy : 3;    /* requests of the current chain in flight */
    unsigned cu : 1;      /* create_unknown */
    unsigned nl : 1;      /* need_list */
    unsigned np : 1;      /* need_parents */
    unsigned fast : 1;    /* our create went out without a listing */
    unsigned fseq : 4;    /* ... relying on this alone node */
    unsigned alone : 1;
    unsigned heir : 1;
    unsigned hseq : 4;    /* heir: the writer's sequence number */
    unsigned hof : 4;     /* heir: the writer's node */
    unsigned watched : 4; /* the node that blocks us */
    unsigned sole : 1;    /* sole_blocker */
    unsigned wwant : 1;
    unsigned wpend : 1;
    unsigned wreg : 1;    /* pred_watches */
    unsigned olate : 1;   /* an operator deleted our node before its own watch was set */
    unsigned opend : 1;   /* the own watch's getData in flight */
    unsigned known : 1;   /* the handle's alone_known */
    unsigned kseq : 4;    /* the handle's alone_seq */
    unsigned stale : 8;   /* stale.c: prefixes of our nodes of given-up sessions */
    unsigned ssent : 8;   /* ... whose delete is in flight */
    unsigned rounds : 2;
#ifdef TRACK
    unsigned wb : 1;      /* was_blocked: a node blocked it (watch.c) ... */
    unsigned bseq : 4;    /* ... this one, last (blocker_seq) */
    unsigned tfresh : 1;  /* it read the record since its last failed write ... */
    unsigned vnever : 15; /* ... this: the give-ups, */
    unsigned vpk : 7;     /* its presence, state, holder's number, */
    unsigned vcre : 4;    /* its creation's number */
    unsigned tjudged : 1; /* its turn's verdict is made */
    unsigned twritten : 1; /* its "held" is written ... */
    unsigned towned : 1;  /* ... and the hold became its owner's: its end says "released" */
    unsigned bpk : 7;     /* the record its "held" replaced (a give-up as it */
    unsigned bnever : 15; /* landed puts it back): as vpk, vnever */
    unsigned twu : 1;     /* write_unknown: that write's reply was lost, a read decides */
    unsigned former : 15; /* bit n: its node n of this acquisition went, never held */
#endif
};
Cont C[NC];
byte ndone; /* clients that did all their rounds */
#ifdef MULTI
/* The multi-locks (client k > 0): its phase (IDLE, QUEUING, HELD,
 * LEAVING), its transaction in flight, its round sent (the transaction went
 * out: its members' nodes were made, or may have been), its acquisitions. */
byte mph[NK];
bool mbusy[NK];
bool msent[NK];
byte mrounds[NK];
#define MDONE(k) (!ISM(k) || (mrounds[k] == 0 && mph[k] == IDLE))
#else
#define MDONE(k) 1
#endif

/* properties (the names spin prints) */
hidden byte p1_mutex, p1_belief, p2_orphan, p3_progress;
#ifdef TRACK
hidden byte p4_sound, p5_definite;
hidden short tfrom, tgaps, tknown, tnever, tmask;
hidden mtype tverdict;
hidden byte tvouched;
#endif

/* scratch, never kept between steps */
hidden byte ti, tk, tq, ts, tj, tn, tw, tr, tx, wit;
hidden byte tm;
hidden mtype top;
hidden byte tc, trc, tb, td;
hidden short ta;

/* ---- the server's side ----------------------------------------------------------- */

/* Every write, failed ones too, is a transaction (zxid). A handle's gap
 * matters only from its create (while queuing) through an alone hold, its
 * delete (known) to the fast create that reads it. */
#define HGAP_USED(c) (!BYP(c) && (C[c].known || C[c].fast || C[c].alone || C[c].ph == QUEUING))
inline txn() {
    for (ti : 0 .. NC - 1) {
        if
        :: !HGAP_USED(ti) -> hgap[ti] = 3 /* canonical: no later fast create reads it */
        :: HGAP_USED(ti) && hgap[ti] < 3 -> hgap[ti]++
        :: else
        fi
    }
}

inline answer(k, op, c, rc, a, b, d) {
    assert(len(rep[k]) < QCAP);
    rep[k]!op, c, rc, a, b, d
}

/* Deletes node s, firing its watches (one-shot). */
inline zdel(s) {
    printf("    node %d deleted\n", s);
    live = live & ~BIT(s);
#ifdef TRACK
    if
    :: t_open && s == t_slot -> t_open = 0; t_clean = own_del /* the last hold ends */
    :: !own_del && s != t_slot && TRACKS(N_C(s)) ->
        dark = dark | BIT(nseq[s]); /* no hold's, no word */
        if
        :: rpres && rstate == R_HELD && rhseq == nseq[s] -> wvan = wvan | BIT(nseq[s]) /* its "held" stays */
        :: else
        fi
    :: else
    fi;
#endif
    for (tj : 0 .. NC - 1) {
        if
        :: (wp[s] >> tj) & 1 -> answer(CL(tj), EV_PRED, tj, OK, s, 0, 0)
        :: else
        fi
    }
    wp[s] = 0
}

/* Creates a node; ts is its slot. */
inline zcreate(c, p, h, x, sq, sid) {
    assert(nslots < MAXN);
    nslots++;
    ts = nslots;
    nseq[ts] = sq;
    nnm[ts] = NAME(c, p, h, x);
    nsess[ts] = sid;
    live = live | BIT(ts);
#ifdef MULTI
    if
    :: PATH_OF(c) -> onp1 = onp1 | BIT(ts)
    :: else
    fi;
#endif
    printf("    node %d created: c%d's, seq %d, exclusive %d, heir %d, session %d\n", ts, c, sq, x, h, sid);
#ifdef TRACK
    assert(sq < 15);
    if
    :: !TRACKS(c) -> dark = dark | BIT(sq)
    :: else
    fi;
#endif
    cre[PATH_OF(c)]++ /* any child creation counts, a non-sequential heir's too */
}

/* A live node named as this heir would be (0: none). */
inline heir_named(c, p, sq) {
    tn = 0;
    for (tj : 1 .. MAXN) {
        if
        :: LIVE(tj) && nnm[tj] == NAME(c, p, 1, 0) && nseq[tj] == sq -> tn = tj
        :: else
        fi
    }
}

/* Ends session (k, incarnation i): its nodes go, its watches too. */
inline zexpire(k, i) {
    salive[k] = salive[k] & ~BIT(i);
    for (tq : 1 .. MAXN) {
        if
        :: LIVE(tq) && nsess[tq] == (k) * 8 + (i) -> zdel(tq)
        :: else
        fi
    }
    for (tq : 0 .. NC - 1) {
        if
        :: CL(tq) == k && sinc[k] == i ->
            for (tj : 1 .. MAXN) {
                wp[tj] = wp[tj] & ~BIT(tq)
            }
        :: else
        fi
    }
    if
    :: lim_c[k] && lim_inc[k] == i -> lim_c[k] = 0
    :: else
    fi;
    txn()
}

#ifdef TRACK
/* The record's node is made by the first write that finds none: a child
 * creation, it takes the next number. */
inline record_made() {
    if
    :: !rpres -> rpres = 1; rstate = R_NONE; rcre = cre[0]; assert(cre[0] < 15); cre[0]++
    :: else
    fi
}

/* zklock__record_hold: held (or released) by node s of c, the give-ups
 * after it kept (BROKEN_DROP_NEVER: none kept). */
inline record_write(c, s, st) {
    record_made();
    rstate = st;
    rhseq = nseq[s];
#ifdef BROKEN_DROP_NEVER
    rnever = 0;
#else
    rnever = rnever & ~(BIT(rhseq + 1) - 1);
#endif
    rcur = BIT(c)
}

/* zklock__record_undo: c's "held", never its owner's, gives way to the
 * record it replaced (c's bpk, bnever), with the give-ups written since. */
inline record_undo(c) {
    tmask = rnever;
    if
    :: (C[c].bpk & 1) && ((C[c].bpk >> 1) & 3) != R_NONE ->
        rstate = (C[c].bpk >> 1) & 3;
        rhseq = C[c].bpk >> 3;
        rnever = C[c].bnever | (tmask & ~(BIT(rhseq + 1) - 1))
    :: else -> /* no record, or "none": every give-up counts */
        rstate = R_NONE;
        rnever = C[c].bnever | tmask
    fi
}

/* zklock__record_give_up: the number of node s among those that never
 * held (if after the holder's: an earlier one is no gap of anyone's). */
inline record_give_up(c, s) {
    record_made();
    tmask = (rstate == R_NONE -> 0 : BIT(rhseq + 1) - 1); /* the holder's number and those before */
    /* its number, and those of its former nodes (the request carries them) */
    rnever = rnever | ((C[c].former | BIT(nseq[s])) & ~tmask);
    rcur = BIT(c)
}
#define OWN_DEL(del) own_del = 1; del; own_del = 0
#else
#define OWN_DEL(del) del
#endif

inline serve(k) {
    req[k]?top, tc, tb, td;
    printf("@ server serves %e of c%d (a=%d)\n", top, tc, tb);
    if
    :: top == CREATE -> /* tb: prefix */
        if
        :: !path -> txn(); answer(k, CREATE, tc, NONODE, 0, 0, 0)
        :: else ->
            zcreate(tc, tb, 0, EX(tc), cre[PATH_OF(tc)], SID(k));
            tw = hgap[tc];
            txn();
            hgap[tc] = 0;
            answer(k, CREATE, tc, OK, ts, nseq[ts], tw)
        fi
    :: top == PARENTS ->
        if
        :: !path -> path = 1; cre[PATH_OF(tc)] = 0
        :: else /* "node exists": fine */
        fi;
        txn();
        answer(k, PARENTS, tc, OK, 0, 0, 0)
    :: top == LIST ->
        if
        :: path -> answer(k, LIST, tc, OK, live & PMASK(PATH_OF(tc)), cre[PATH_OF(tc)], 0)
        :: else -> answer(k, LIST, tc, NONODE, 0, 0, 0)
        fi
    :: top == GETW || top == OWNW -> /* tb: the node */
        if
        :: LIVE(tb) && top == GETW -> wp[tb] = wp[tb] | BIT(tc); answer(k, GETW, tc, OK, tb, 0, 0)
        :: LIVE(tb) && top == OWNW -> assert(0) /* sent only for a deleted node, see OWN WATCH */
        :: else -> answer(k, top, tc, NONODE, tb, 0, 0)
        fi
    :: top == OWNER -> /* getData: is its ephemeralOwner our session? */
        if
        :: LIVE(tb) && nsess[tb] == SID(k) -> answer(k, OWNER, tc, OK, tb, 0, 0)
        :: else -> answer(k, OWNER, tc, NONODE, tb, 0, 0)
        fi
    :: top == DELETE ->
        if
        :: LIVE(tb) -> OWN_DEL(zdel(tb)); txn(); answer(k, DELETE, tc, OK, tb, 0, 0)
        :: else -> txn(); answer(k, DELETE, tc, NONODE, tb, 0, 0)
        fi
    :: top == HEIR -> /* multi: check the writer's node tb, create the heir (td: pfx | hseq << 3) */
        tk = td & 7;
        tr = td >> 3;
        heir_named(tc, tk, tr);
        if
#ifndef BROKEN_HEIR
        :: !LIVE(tb) -> txn(); answer(k, HEIR, tc, NOCHECK, 0, 0, 0)
#endif
        :: !path -> txn(); answer(k, HEIR, tc, NONODE, 0, 0, 0)
        :: else ->
            if
            :: tn -> txn(); answer(k, HEIR, tc, EXISTS, tn, 0, 0)
            :: else ->
                zcreate(tc, tk, 1, 0, tr, SID(k));
                txn();
                hgap[tc] = 0;
                answer(k, HEIR, tc, OK, ts, 0, 0)
            fi
        fi
    :: top == STALE -> /* stale.c: delete the nodes of that prefix (tb) */
        for (tq : 1 .. MAXN) {
            if
            :: LIVE(tq) && N_C(tq) == tc && N_PFX(tq) == tb -> REACHED(5); zdel(tq); txn()
            :: else
            fi
        }
        answer(k, STALE, tc, OK, tb, 0, 0)
    :: top == STRAY ->
        if
        :: LIVE(tb) -> zdel(tb)
        :: else
        fi;
        txn()
#ifdef TRACK
    :: top == RREAD -> /* getData of the record */
        rcur = rcur | BIT(tc);
        answer(k, RREAD, tc, OK, rnever, rpres | (rstate << 1) | (rhseq << 3), rcre)
    :: top == RWRITE -> /* multi {check our node tb, "held" by it} */
        if
        :: !LIVE(tb) -> txn(); answer(k, RWRITE, tc, NONODE, 0, 0, 0)
        :: LIVE(tb) && !((rcur >> tc) & 1) -> txn(); answer(k, RWRITE, tc, BADVERSION, 0, 0, 0)
        :: else ->
            record_write(tc, tb, R_HELD);
            txn();
            answer(k, RWRITE, tc, OK, 0, 0, 0)
        fi
    :: top == REND -> /* multi {delete our node tb, the record's word td: END_*} */
        if
        :: !LIVE(tb) -> txn(); answer(k, REND, tc, NONODE, 0, 0, 0)
        :: LIVE(tb) && !((rcur >> tc) & 1) -> txn(); answer(k, REND, tc, BADVERSION, 0, 0, 0)
        :: else ->
            if
            :: td == END_RELEASED -> record_write(tc, tb, R_RELEASED)
            :: td == END_UNDO -> REACHED(25); record_undo(tc); record_give_up(tc, tb)
            :: td == END_NEVER -> record_give_up(tc, tb)
            fi;
            OWN_DEL(zdel(tb));
            txn();
            answer(k, REND, tc, OK, 0, 0, 0)
        fi
#endif
#ifdef MULTI
    :: top == ENQUEUE -> /* one transaction: a node for each member in tb (bit 0: c, bit 1: c + 1), td their prefixes */
        assert(path);
        tw = 0;
        tr = 0;
        if
        :: tb & 1 -> zcreate(tc, td & 7, 0, 1, cre[PATH_OF(tc)], SID(k)); tw = ts
        :: else
        fi;
        if
        :: tb & 2 -> zcreate(tc + 1, td >> 3, 0, 1, cre[PATH_OF(tc + 1)], SID(k)); tr = ts
        :: else
        fi;
        txn();
        answer(k, ENQUEUE, tc, OK, tw, tr, tb)
#endif
    fi
}

/* ---- the engine: sending ----------------------------------------------------------- */

inline rq(op, c, a, b) {
    assert(len(req[CL(c)]) < QCAP);
    req[CL(c)]!op, c, a, b
}

inline set_node(c, s) {
    C[c].node = s;
    C[c].olate = 0; /* a new node: its own-watch delay starts again */
#ifdef TRACK
    C[c].wb = 0; /* a new place in the queue: nothing blocked it yet */
#endif
    C[c].alone = 0
}

inline watch_over(c) {
    C[c].watched = 0;
    C[c].wwant = 0
}

/* zklock__forget_blocker: a registration whose event is not on its way
 * yet is taken back locally. */
inline forget_blocker(c) {
    C[c].wwant = 0;
    if
    :: C[c].wpend
    :: else ->
        if
        :: C[c].wreg && C[c].watched && ((wp[C[c].watched] >> c) & 1) ->
            wp[C[c].watched] = wp[C[c].watched] & ~BIT(c);
            C[c].wreg = 0
        :: else
        fi;
        if
        :: !C[c].wreg -> watch_over(c)
        :: else
        fi
    fi
}

inline send_list(c) {
    C[c].nl = 0;
    C[c].busy++;
    rq(LIST, c, 0, 0)
}

inline send_create(c) {
    if
    :: C[c].heir ->
        C[c].busy++;
        rq(HEIR, c, C[c].hof, C[c].pfx | (C[c].hseq << 3))
    :: else ->
        C[c].fast = 0;
        if
        :: !C[c].np -> /* zklock__fast_take */
            if
            :: C[c].known -> C[c].fast = 1; C[c].fseq = C[c].kseq
            :: else
            fi;
            C[c].known = 0
        :: else
        fi;
        if
        :: C[c].np -> C[c].busy++; rq(PARENTS, c, 0, 0)
        :: else
        fi;
        C[c].np = 0;
        C[c].busy++;
        rq(CREATE, c, C[c].pfx, 0);
        if
        :: !C[c].fast -> send_list(c)
        :: else
        fi
    fi
}

inline finish(c) {
    C[c].ph = GONE
}

#ifdef TRACK
/* zklock__track_end: a tracking contender leaves with its node in one
 * multi with the record's word, "released" by a hold its owner had, else
 * its number among those that never held; against the version it read
 * (it reads first). BROKEN_GIVEUP_SILENT: a give-up deletes its node
 * without a word. */
#ifdef BROKEN_GIVEUP_SILENT
#define ENDS_WITH_WORD(c) (TRACKS(c) && C[c].towned)
#else
#define ENDS_WITH_WORD(c) TRACKS(c)
#endif
/* The end's word: "released" by a hold its owner had; else its number among
 * those that never held, after putting back what its "held" replaced if
 * that landed as it gave up (BROKEN_GIVEUP_RELEASES: "released" in its own
 * name, as the record's engine first did: CLEAN after an unclean end). */
#ifdef BROKEN_GIVEUP_RELEASES
#define END_KIND(c) (C[c].twritten -> END_RELEASED : END_NEVER)
#else
#define END_KIND(c) (C[c].towned -> END_RELEASED : (C[c].twritten -> END_UNDO : END_NEVER))
#endif
#else
#define ENDS_WITH_WORD(c) 0
#endif

inline step_leaving(c) {
    forget_blocker(c);
    if
    :: C[c].busy > 0
    :: C[c].busy == 0 && !C[c].node && !C[c].cu -> finish(c)
    :: C[c].busy == 0 && (C[c].node || C[c].cu) && conn[CL(c)] ->
        if
        :: C[c].cu -> send_list(c) /* recovery: sync + list */
#ifdef TRACK
        :: !C[c].cu && ENDS_WITH_WORD(c) && !C[c].tfresh -> C[c].busy++; rq(RREAD, c, 0, 0)
        :: !C[c].cu && ENDS_WITH_WORD(c) && C[c].tfresh -> C[c].busy++; rq(REND, c, C[c].node, END_KIND(c))
#endif
        :: else -> C[c].busy++; rq(DELETE, c, C[c].node, 0)
        fi
    :: else
    fi
}

#ifdef TRACK
/* zklock__track_grant: its turn; the record read (again after a failed
 * write), the verdict made on the record as read (once a turn), the
 * lock-delay waited (no clock here: a try-once may give up), then "held"
 * written with a check that its node stands. */
inline step_record(c) {
    if
    :: !C[c].tfresh -> C[c].busy++; rq(RREAD, c, 0, 0)
    :: else ->
        if
        :: !C[c].tjudged ->
            C[c].tjudged = 1;
            previous_judge(c, C[c].vnever, C[c].vpk, C[c].vcre);
            lock_delay(c)
        :: else
        fi;
        if
        :: C[c].ph == GRANTING ->
            C[c].bpk = C[c].vpk; /* what it replaces */
            C[c].bnever = C[c].vnever;
            C[c].busy++;
            rq(RWRITE, c, C[c].node, 0)
        :: else -> step_leaving(c) /* gave up: marked, stepped again */
        fi
    fi
}

/* A write failed: read again before the next one. */
inline unfresh(c) {
    C[c].tfresh = 0;
    C[c].vnever = 0;
    C[c].vpk = 0;
    C[c].vcre = 0
}
#endif

/* zklock__step: idempotent; sends what c needs next. */
inline step(c) {
    if
    :: C[c].ph == LEAVING -> step_leaving(c)
    :: C[c].ph != LEAVING && conn[CL(c)] ->
        if
        :: C[c].busy == 0 && C[c].ph == QUEUING ->
            if
            :: C[c].cu -> send_list(c) /* recovery: sync + list */
            :: !C[c].cu && !C[c].node && !BYP(c) -> send_create(c)
            :: !C[c].cu && C[c].node && C[c].nl -> send_list(c)
            :: else
            fi
#ifdef TRACK
        :: C[c].busy == 0 && C[c].ph == GRANTING -> step_record(c)
#endif
        :: else
        fi
    :: else
    fi
}

inline newpfx(c) {
#ifndef STICKY_PREFIX
    assert(C[c].pfx < 7);
    C[c].pfx++
#else
    skip /* a name prefix for the owner's life (not zklock: its uuid is per contender) */
#endif
}

/* ---- the engine: outcomes ---------------------------------------------------------- */

#ifdef TRACK
/* The hold is its owner's (zklock__track_hold_begins): a hold begins, unless
 * an operator deleted its node already (the own-watch window: the owner
 * believes, but the lock went on without it). */
inline owner_holds(c) {
    C[c].ph = HELD;
    C[c].towned = TRACKS(c);
    if
    :: LIVE(C[c].node) -> t_slot = C[c].node; t_open = 1
    :: else
    fi
}
#endif

inline become_holder(c) {
    forget_blocker(c);
#ifdef TRACK
    if
    :: TRACKS(c) -> C[c].ph = GRANTING /* the hold is its owner's once "held" is written */
    :: else -> owner_holds(c)
    fi
#else
    C[c].ph = HELD
#endif
}

#ifdef RW
#define HEIR_WRITER_HOLDS(c) ((c) == 1 && C[0].ph == HELD && C[0].node == C[1].hof)
#else
#define HEIR_WRITER_HOLDS(c) 0
#endif
#ifdef BROKEN_HEIR_REQUEUE
#define KEEP_HEIR 0
#else
#define KEEP_HEIR 1
#endif
/* zklock__requeue: our place is gone, a heir's writer's place too (a
 * session's end, the lock path gone, a recovery without the writer's node) */
#define requeue(c) requeue_(c, 0)
/* zklock__requeue_own: only our own node went (an operator deleted it, or
 * it was not ours after all) */
#define requeue_own(c) requeue_(c, KEEP_HEIR)

/* keep: only our own node is gone. A heir whose writer still holds by the
 * node it was made beside makes a heir again, whose multi checks that node
 * as the first time. BROKEN_HEIR_REQUEUE (the engine before the fix)
 * queues it as a reader: behind its own owner's write node, for ever. */
inline requeue_(c, keep) {
#ifdef TRACK
    /* zklock__track_node_lost: a node that never held went without a
     * word: its number is kept for its next judge (former); a new node, a
     * new turn */
    if
    :: TRACKS(c) && !C[c].twritten && C[c].node -> C[c].former = C[c].former | BIT(C[c].seq)
    :: else
    fi;
    unfresh(c);
    C[c].tjudged = 0;
    C[c].twritten = 0;
    C[c].towned = 0;
    C[c].bpk = 0;
    C[c].bnever = 0;
    C[c].twu = 0;
#endif
    set_node(c, 0);
    forget_blocker(c);
    C[c].cu = 0;
    C[c].fast = 0;
    if
    :: C[c].ph != LEAVING ->
        C[c].ph = QUEUING;
        C[c].nl = 0;
        if
        :: keep && C[c].heir && HEIR_WRITER_HOLDS(c) -> REACHED(12) /* a heir again */
        :: else ->
            C[c].heir = 0; /* its writer's place is gone too: queue as a reader */
            C[c].hof = 0;
            C[c].hseq = 0
        fi;
        newpfx(c)
    :: else
    fi
}

inline stale_add(c) {
    if
    :: C[c].node || C[c].cu || C[c].busy > 0 -> C[c].stale = C[c].stale | BIT(C[c].pfx)
    :: else
    fi
}

inline stale_sweep(k) {
    if
    :: conn[k] ->
        for (tr : 0 .. NC - 1) {
            if
            :: CL(tr) == k ->
                for (tw : 0 .. 7) {
                    if
                    :: ((C[tr].stale >> tw) & 1) && !((C[tr].ssent >> tw) & 1) ->
                        C[tr].ssent = C[tr].ssent | BIT(tw);
                        rq(STALE, tr, tw, 0)
                    :: else
                    fi
                }
            :: else
            fi
        }
    :: else
    fi
}

/* A downgrade heir holds by its writer's place: lost with it, its node
 * deleted as a stale one (contender.c, lose_heirs_of). */
inline lose_heirs(w) {
#ifdef RW
    if
    :: w == 0 && C[1].heir && C[1].ph == HELD ->
#ifndef BROKEN_HEIR_ORPHAN
        stale_add(1);
#endif
        set_node(1, 0);
        C[1].ph = LOST;
        stale_sweep(0)
    :: else
    fi
#else
    skip
#endif
}

inline lose(c) {
    set_node(c, 0);
    C[c].ph = LOST;
    lose_heirs(c)
}

inline give_up(c) {
    C[c].ph = LEAVING /* the step that ends every client step sends its delete */
}

/* ---- the engine: what a listing means (rules.c) ---------------------------------------- */

/* read_queue's `mine`: a stray of ours (our prefix, not our node), or a
 * node of a session we gave up. */
inline mine(c, s) {
    tm = (N_C(s) == c && N_PFX(s) == C[c].pfx && s != C[c].node) ||
         (CL(N_C(s)) == CL(c) && ((C[N_C(s)].stale >> N_PFX(s)) & 1))
}

inline writer_listed(mask) {
#ifdef RW
    tm = C[0].ph == HELD && C[0].node && ((mask >> C[0].node) & 1)
#else
    tm = 0
#endif
}

inline watch_blocker(c, s, count) {
    if
    :: C[c].watched -> forget_blocker(c)
    :: else
    fi;
    if
    :: C[c].watched -> C[c].nl = 1
    :: else ->
        C[c].watched = s;
#ifdef TRACK
        C[c].wb = 1; /* previous.c: who held before us */
        C[c].bseq = nseq[s];
#endif
#if defined(BROKEN_SOLE_BLOCKER)
        C[c].sole = !(EX(c) && WRITER_TAG && N_EX(s)) /* the count of blockers ignored */
#elif defined(BROKEN_HEIR_RELIST)
        C[c].sole = (count == 1) /* no second look behind a writer */
#else
        C[c].sole = (count == 1) && !(EX(c) && WRITER_TAG && N_EX(s))
#endif
        ;
        C[c].busy++;
        C[c].wpend = 1;
        C[c].wwant = 1;
        rq(GETW, c, s, 0)
    fi
}

/* After a lost create reply: adopt our node if the listing has it, if our
 * session owns it. */
inline recover_from(c, mask) {
    C[c].cu = 0;
    tn = 0;
    for (tq : 1 .. MAXN) {
        if
        :: ((mask >> tq) & 1) && N_C(tq) == c && N_PFX(tq) == C[c].pfx && tn == 0 -> tn = tq
        :: else
        fi
    }
    if
    :: tn ->
        set_node(c, tn);
        C[c].seq = nseq[tn];
#ifdef BROKEN_OWNER_CHECK
        if
        :: C[c].heir && C[c].ph == QUEUING -> become_holder(c)
        :: else -> C[c].nl = 1
        fi
#else
        C[c].busy++;
        rq(OWNER, c, tn, 0)
#endif
    :: else ->
        writer_listed(mask);
        if
        :: C[c].heir && !tm -> requeue(c)
        :: else
        fi
    fi
}

inline judge(c, mask, creations) {
    if
    :: C[c].cu -> recover_from(c, mask)
    :: else ->
        for (tq : 1 .. MAXN) {
            if
            :: (mask >> tq) & 1 ->
                mine(c, tq);
                if
                :: tm -> rq(STRAY, c, tq, 0)
                :: else
                fi
            :: else
            fi
        }
        if
        :: C[c].ph != QUEUING
        :: C[c].ph == QUEUING && !((mask >> C[c].node) & 1) -> requeue_own(c) /* our node vanished */
        :: else ->
            tn = 0; /* blockers */
            tw = 0; /* the nearest */
            for (tq : 1 .. MAXN) {
                if
                :: ((mask >> tq) & 1) && tq != C[c].node && KEY(tq) < KEY(C[c].node) ->
                    mine(c, tq);
                    if
                    :: !tm && (EX(c) || N_EX(tq)) ->
                        tn++;
                        if
                        :: tw == 0 || KEY(tq) > KEY(tw) -> tw = tq
                        :: else
                        fi;
                        if
                        :: N_HEIR(tq) && EX(c) -> REACHED(10) /* a writer finds a heir ahead */
                        :: else
                        fi
                    :: else
                    fi
                :: else
                fi
            }
            if
            :: tn == 0 ->
                become_holder(c);
                /* fastpath.c: alone, with nothing created after us */
                C[c].alone = (!BYP(c) && mask != 0 && (mask & (mask - 1)) == 0 && creations == C[c].seq + 1)
#ifdef TRACK
            :: tn > 0 && TRY1(c) -> give_up(c) /* try-once: busy */
            :: tn > 0 && !TRY1(c) -> watch_blocker(c, tw, tn)
#else
            :: else -> watch_blocker(c, tw, tn)
#endif
            fi
        fi
    fi
}

/* ---- the engine: answers and events ---------------------------------------------------- */

inline predecessor_gone(c) {
    if
    :: C[c].sole -> REACHED(2); become_holder(c) /* no extra read on handoff */
    :: else -> C[c].nl = 1
    fi
}

#ifdef TRACK
mtype = { V_NONE, V_CLEAN, V_UNCLEAN, V_UNKNOWN }; /* ZKLOCK_PREV_* */

/* zklock__previous_judge (record.c) on the record as c read it: pk its
 * presence, state and holder's number, nv its give-ups, rcr the number its
 * own creation took. The record speaks for the hold before ours if c was
 * blocked last by its holder's node, or if every number after the
 * holder's (all of them: no holder) and before ours is accounted for: a
 * give-up's, one of c's own former nodes, or the record's own creation.
 * BROKEN_TRUST_GAPS: whatever the gaps; BROKEN_UNCOUNTED_RECORD: the
 * record's creation is no gap's explanation. Then the properties:
 *  P4  soundness (p4_sound): NONE only if no hold was its owner's yet;
 *      CLEAN (or UNCLEAN) only if the last such hold is the record's
 *      holder's, over, and ended by its owner's release (or not); or
 *      UNCLEAN of a "held" never its owner's that a node left as it went;
 *  P5  definiteness (p5_definite): UNKNOWN only if a node no record
 *      explains (dark) was made between the record's holder's and ours:
 *      when every contender tracks and none dies before it holds, never. */
inline previous_judge(c, nv, pk, rcr) {
    if
    :: (pk & 1) && ((pk >> 1) & 3) != R_NONE -> tfrom = pk >> 3
    :: else -> tfrom = -1
    fi;
    tgaps = C[c].seq - tfrom - 1; /* the numbers between */
    tknown = 0; /* ... accounted for */
    for (tq : tfrom + 1 .. C[c].seq - 1) {
        if
        :: ((nv | C[c].former) >> tq) & 1 -> tknown++
        :: else
        fi
    }
    tnever = tknown;
#ifndef BROKEN_UNCOUNTED_RECORD
    if
    :: (pk & 1) && rcr > tfrom && rcr < C[c].seq -> REACHED(16); tknown++
    :: else
    fi;
#endif
    if
    :: tnever > 0 && tknown == tgaps -> REACHED(15) /* give-ups counted */
    :: else
    fi;
    tvouched = (tfrom >= 0 && C[c].wb && C[c].bseq == tfrom) || (tgaps >= 0 && tknown == tgaps);
    if
    :: tfrom >= 0 && C[c].wb && C[c].bseq == tfrom && tknown != tgaps ->
        REACHED(17) /* the last blocker vouches where the count cannot */
    :: else
    fi;
#ifdef BROKEN_TRUST_GAPS
    tvouched = 1;
#endif
    if
    :: !tvouched -> tverdict = V_UNKNOWN
    :: tvouched && tfrom < 0 -> tverdict = V_NONE
    :: tvouched && tfrom >= 0 && ((pk >> 1) & 3) == R_RELEASED -> tverdict = V_CLEAN
    :: else -> tverdict = V_UNCLEAN
    fi;
    printf("@ c%d (number %d) judges %e: the record's holder is number %d, %d numbers between, %d accounted for, blocked last by %d\n",
           c, C[c].seq, tverdict, tfrom, tgaps, tknown, (C[c].wb -> C[c].bseq : -1));
    /* (a turn whose node an operator deleted already is over: its write
     * will fail, its verdict speaks of nothing) */
    p4_sound = !LIVE(C[c].node) || (tverdict == V_UNKNOWN) || (tverdict == V_NONE && t_slot == 0) ||
               (tverdict != V_NONE && t_slot && !t_open && nseq[t_slot] == tfrom &&
                t_clean == (tverdict == V_CLEAN)) ||
               /* the safe side: a "held" never its owner's, left by a node that went */
               (tverdict == V_UNCLEAN && ((wvan >> tfrom) & 1) && (!t_slot || tfrom > nseq[t_slot]));
    if
    :: !p4_sound -> printf("c%d's verdict %e is false: the last hold is number %d's (over %d, released %d)\n",
                           c, tverdict, (t_slot -> nseq[t_slot] : -1), !t_open, t_clean)
    :: else
    fi;
    assert(p4_sound);
    p5_definite = !LIVE(C[c].node) || tverdict != V_UNKNOWN ||
                  (dark & ~C[c].former & ~(BIT(tfrom + 1) - 1) & (BIT(C[c].seq) - 1)) != 0;
    if
    :: !p5_definite -> printf("c%d's verdict is unknown though a record accounts for every number between\n", c)
    :: else
    fi;
    assert(p5_definite);
    if
    :: tverdict == V_UNCLEAN -> REACHED(18)
    :: tverdict == V_UNKNOWN -> REACHED(19)
    :: else
    fi;
    if
    :: tvouched && (C[c].former & ~(BIT(tfrom + 1) - 1) & (BIT(C[c].seq) - 1)) -> REACHED(22) /* its own node */
    :: else
    fi
}

/* The lock-delay after an unclean or unknown end: a try-once cannot wait
 * for it, and gives up at its turn (an unclean end's delay may be over
 * already: it runs from that end). */
inline lock_delay(c) {
#if DELAY
    if
    :: TRY1(c) && tverdict == V_UNKNOWN -> REACHED(21); give_up(c)
    :: TRY1(c) && tverdict == V_UNCLEAN ->
        if
        :: REACHED(21); give_up(c)
        :: skip
        fi
    :: else
    fi
#else
    skip
#endif
}
#endif

inline dec_busy(c) {
    assert(C[c].busy > 0);
    C[c].busy--
}

/* An answer (rc) or event for contender c. */
inline handle(op, c, rc, a, b, d) {
    if
    :: op == CREATE ->
        tm = C[c].fast;
        C[c].fast = 0;
        dec_busy(c);
        if
        :: rc == OK ->
            set_node(c, a);
            C[c].seq = b;
            if
            :: C[c].ph == QUEUING && tm ->
                /* zklock__fast_holds: the very next number, and our delete
                 * the only transaction between our two creates */
#ifdef BROKEN_FAST_PATH
                if
                :: b == C[c].fseq + 1 && b > 0 ->
#else
                if
                :: b == C[c].fseq + 1 && b > 0 && d + 1 <= 2 ->
#endif
                    REACHED(1); /* a hold without a listing: the fast path */
                    C[c].alone = 1;
                    become_holder(c)
                :: else ->
                    if
                    :: b == C[c].fseq + 1 && b > 0 -> REACHED(11) /* the next number, but a gap */
                    :: else
                    fi;
                    C[c].nl = 1
                fi
            :: else
            fi
        :: rc == NONODE -> C[c].np = 1
        :: rc == ERR -> C[c].cu = 1
        fi
    :: op == PARENTS -> dec_busy(c)
    :: op == LIST ->
        dec_busy(c);
        if
        :: rc == OK ->
            if
            :: C[c].node || C[c].cu -> judge(c, a, b)
            :: else
            fi
        :: rc == NONODE ->
            if
            :: C[c].cu && C[c].heir -> requeue(c)
            :: C[c].cu && !C[c].heir -> C[c].cu = 0; C[c].np = 1
            :: !C[c].cu && C[c].node -> requeue(c)
            :: else
            fi
        :: rc == ERR -> C[c].nl = (C[c].node != 0)
        fi
    :: op == GETW ->
        dec_busy(c);
        C[c].wpend = 0;
        if
        :: rc == OK ->
            C[c].wreg = 1;
            if
            :: !C[c].wwant -> forget_blocker(c)
            :: else
            fi
        :: else ->
            if
            :: C[c].wwant && C[c].ph == QUEUING ->
                if
#ifndef BROKEN_WATCH_NONODE
                :: rc == NONODE -> predecessor_gone(c) /* went before the watch was set */
#else
                :: rc == NONODE
#endif
                :: rc == ERR -> C[c].nl = 1
                fi
            :: else
            fi;
            watch_over(c)
        fi
    :: op == OWNW ->
        C[c].opend = 0;
        if
        :: rc == NONODE && C[c].ph == HELD -> lose(c)
        :: rc == NONODE && WANTS(c) && C[c].node -> requeue_own(c)
        :: else
        fi
    :: op == OWNER ->
        dec_busy(c);
        if
        :: rc == OK ->
            REACHED(4); /* our node found after a lost reply, and ours */
            if
            :: C[c].heir && C[c].ph == QUEUING -> become_holder(c)
            :: else -> C[c].nl = 1
            fi
        :: rc == ERR -> C[c].cu = 1; set_node(c, 0)
        :: else ->
            if
            :: LIVE(a) -> REACHED(9) /* there, but another session's */
            :: else
            fi;
            requeue_own(c) /* gone, or not ours: never touch it */
        fi
    :: op == DELETE ->
        dec_busy(c);
        if
        :: rc == OK || rc == NONODE ->
            if
            :: rc == OK && C[c].alone -> C[c].known = 1; C[c].kseq = C[c].seq /* fast_remember */
            :: else
            fi;
            set_node(c, 0)
        :: else
        fi
    :: op == HEIR ->
        dec_busy(c);
        if
        :: rc == OK ->
            set_node(c, a);
            C[c].seq = C[c].hseq;
            if
            :: C[c].ph == QUEUING -> REACHED(3); become_holder(c) /* a downgrade heir */
            :: else
            fi
        :: rc == NOCHECK -> REACHED(8); requeue(c) /* its writer's node is gone: a reader */
        :: rc == EXISTS -> set_node(c, a); C[c].busy++; rq(OWNER, c, a, 0)
        :: rc == ERR -> C[c].cu = 1
        :: rc == NONODE -> give_up(c) /* BROKEN_HEIR only: a raw error */
        fi
    :: op == STALE ->
        C[c].stale = C[c].stale & ~BIT(a);
        C[c].ssent = C[c].ssent & ~BIT(a)
#ifdef TRACK
    :: op == RREAD -> /* a: its give-ups, b: presence, state, holder, d: its creation's number */
        dec_busy(c);
        if
#ifndef BROKEN_STALE_READ
        :: C[c].ph == QUEUING -> REACHED(24) /* read for a turn that is over: its node went meanwhile */
#endif
        :: else ->
            C[c].tfresh = 1;
            C[c].vnever = a;
            C[c].vpk = b;
            C[c].vcre = d;
            if
            :: C[c].twu && b == 1 + (R_HELD << 1) + (C[c].seq << 3) ->
                REACHED(23); /* the "held" whose reply was lost was written */
                C[c].twritten = 1;
                if
                :: C[c].ph == GRANTING -> owner_holds(c)
                :: else
                fi
            :: else
            fi;
            C[c].twu = 0
        fi
    :: op == RWRITE ->
        dec_busy(c);
        if
        :: rc == OK ->
            C[c].twritten = 1;
            if
            :: C[c].ph == GRANTING -> owner_holds(c)
            :: else /* given up meanwhile: its end puts back what it replaced */
            fi
        :: rc == BADVERSION -> REACHED(20); unfresh(c) /* read again, write again */
        :: rc == NONODE -> requeue_own(c) /* not here: only its session's end takes its node */
        fi
    :: op == REND ->
        dec_busy(c);
        if
        :: rc == OK || rc == NONODE -> set_node(c, 0)
        :: rc == BADVERSION -> REACHED(20); unfresh(c)
        fi
#endif
    :: op == EV_PRED ->
        C[c].wreg = 0;
        if
        :: a == C[c].watched && C[c].wwant && C[c].ph == QUEUING && C[c].busy == 0 ->
            watch_over(c);
            predecessor_gone(c)
        :: else ->
            if
            :: !C[c].wpend ->
                tm = C[c].wwant && C[c].ph == QUEUING;
                watch_over(c);
                if
                :: tm -> C[c].nl = 1
                :: else
                fi
            :: else
            fi
        fi
    :: op == EV_OWN ->
        if
        :: a == C[c].node && C[c].ph == HELD -> lose(c)
        :: a == C[c].node && WANTS(c) -> requeue_own(c) /* someone deleted our place */
        :: else
        fi
#ifdef MULTI
    :: op == ENQUEUE -> /* c: the first member; a, b: the members' nodes (d: which were in it) */
        mbusy[CL(c)] = 0;
        if
        :: d & 1 -> dec_busy(c); set_node(c, a); C[c].seq = nseq[a]
        :: else
        fi;
        if
        :: d & 2 -> dec_busy(c + 1); set_node(c + 1, b); C[c + 1].seq = nseq[b]
        :: else
        fi
#endif
    fi
}

/* A connection loss: every answer not yet read is lost, every request not
 * yet served is dropped (a lagging server may still apply a create, see
 * LIMBOS); the client fails each with "connection loss", in order. Watch
 * events are not lost: the client sets its watches again on reconnection. */
inline on_err(k, op, c, a) {
    if
    :: op == STALE -> C[c].ssent = C[c].ssent & ~BIT(a)
    :: op == STRAY
    :: op == OWNW -> C[c].opend = 0
    :: op == CREATE -> C[c].fast = 0; dec_busy(c); C[c].cu = 1
    :: op == HEIR -> dec_busy(c); C[c].cu = 1
    :: op == PARENTS -> dec_busy(c)
    :: op == LIST -> dec_busy(c); C[c].nl = (C[c].node != 0)
    :: op == GETW ->
        dec_busy(c);
        C[c].wpend = 0;
        if
        :: C[c].wwant && C[c].ph == QUEUING -> C[c].nl = 1
        :: else
        fi;
        watch_over(c)
    :: op == OWNER -> dec_busy(c); C[c].cu = 1; set_node(c, 0)
    :: op == DELETE -> dec_busy(c)
#ifdef TRACK
    :: op == RREAD -> dec_busy(c) /* read again */
    :: op == RWRITE -> dec_busy(c); unfresh(c); C[c].twu = 1 /* a read decides */
    :: op == REND -> dec_busy(c); unfresh(c) /* read, and send it again: "no node" if it was applied */
#endif
#ifdef MULTI
    :: op == ENQUEUE -> /* a: which members were in it; each looks for its node by its prefix */
        mbusy[CL(c)] = 0;
        if
        :: a & 1 -> dec_busy(c); C[c].cu = 1
        :: else
        fi;
        if
        :: a & 2 -> dec_busy(c + 1); C[c + 1].cu = 1
        :: else
        fi
#endif
    fi
}

inline conn_loss(k) {
    conn[k] = 0;
    tn = len(rep[k]);
    do
    :: tn > 0 ->
        rep[k]?top, tc, trc, ta, tb, td;
        if
        :: top == EV_PRED || top == EV_OWN -> rep[k]!top, tc, trc, ta, tb, td
        :: top == ENQUEUE -> on_err(k, top, tc, td)
        :: else -> on_err(k, top, tc, ta)
        fi;
        tn--
    :: else -> break
    od;
    do
    :: nempty(req[k]) ->
        req[k]?top, tc, tb, td;
        if
        :: (top == CREATE || top == HEIR) && b_limbo > 0 && lim_c[k] == 0 ->
            if
            :: b_limbo--; /* a lagging server may still apply it */
                lim_c[k] = tc + 1;
                lim_pfx[k] = (top == CREATE -> tb : td & 7);
                lim_heir[k] = (top == HEIR);
                lim_hof[k] = (top == HEIR -> tb : 0);
                lim_hseq[k] = (top == HEIR -> td >> 3 : 0);
                lim_inc[k] = sinc[k]
            :: skip
            fi
        :: else
        fi;
        on_err(k, top, tc, tb)
    :: empty(req[k]) -> break
    od
}

/* ---- the session's changes ------------------------------------------------------------- */

inline resume(k) {
    stale_sweep(k) /* first: then every contender's step (engine_resumed) */
}

/* engine_ended + engine_handle_closed: the session is over (unconf: given
 * up by us, it may live on). Answers and events of the old handle are
 * dropped; its watches are gone; the handle's fast-path knowledge too. */
inline ended(k, unconf) {
    for (tk : 0 .. NC - 1) {
        if
        :: CL(tk) == k ->
            if
            :: unconf && C[tk].ph != IDLE && C[tk].ph != GONE -> stale_add(tk)
            :: else
            fi;
            C[tk].busy = 0;
            C[tk].nl = 0;
            C[tk].np = 0;
            C[tk].cu = 0;
            C[tk].opend = 0;
            C[tk].wpend = 0;
            C[tk].wwant = 0;
            if
            :: C[tk].ph == HELD -> lose(tk)
            :: WANTS(tk) -> requeue(tk)
            :: C[tk].ph == LEAVING -> set_node(tk, 0); finish(tk)
            :: else
            fi;
            C[tk].olate = 0;
            C[tk].wreg = 0;
            watch_over(tk);
            C[tk].known = 0;
            C[tk].ssent = 0;
#ifdef MULTI
            mbusy[k] = 0;
#endif
            for (tj : 1 .. MAXN) {
                wp[tj] = wp[tj] & ~BIT(tk)
            }
        :: else
        fi
    }
    do
    :: nempty(rep[k]) -> rep[k]?top, tc, trc, ta, tb, td
    :: empty(rep[k]) -> break
    od
}

inline new_session(k) {
    assert(sinc[k] < 7);
    sinc[k]++;
    salive[k] = salive[k] | BIT(sinc[k]);
    txn(); /* createSession */
    conn[k] = 1
}

/* The lease ran out while cut off (lease.c, belief_over): every hold of
 * the session is over, told before the server can expire the session, and
 * its node is deleted as a stale one when the session is heard from again. */
inline lease_out(k) {
    for (tk : 0 .. NC - 1) {
        if
        :: CL(tk) == k && C[tk].ph == HELD ->
#ifndef BROKEN_LEASE_CLEANUP
            stale_add(tk);
#endif
            lose(tk)
        :: else
        fi
    }
}

/* The contender may be reused for the owner's next call once nothing of it
 * is in flight (the driver frees it: zklock__drive). */
inline reset_gone(k) {
    for (tk : 0 .. NC - 1) {
        if
        :: CL(tk) == k && C[tk].ph == GONE && C[tk].busy == 0 && !C[tk].opend &&
           !C[tk].wreg && !C[tk].wpend ->
            C[tk].ph = IDLE;
            C[tk].seq = 0;
            C[tk].cu = 0;
            C[tk].nl = 0;
            C[tk].np = 0;
            C[tk].fast = 0;
            C[tk].fseq = 0;
            C[tk].heir = 0;
            C[tk].hseq = 0;
            C[tk].hof = 0;
            C[tk].watched = 0;
            C[tk].sole = 0;
            C[tk].wwant = 0;
#ifdef TRACK
            C[tk].bseq = 0;
            unfresh(tk);
            C[tk].tjudged = 0;
            C[tk].twritten = 0;
            C[tk].towned = 0;
            C[tk].bpk = 0;
            C[tk].bnever = 0;
            C[tk].twu = 0;
            C[tk].former = 0;
#endif
            C[tk].olate = 0
        :: else
        fi
    }
}

/* ---- properties ------------------------------------------------------------------------ */

inline check() {
    for (ti : 0 .. NC - 1) {
        if
        :: C[ti].ph == HELD ->
            p1_belief = C[ti].node && (LIVE(C[ti].node) || ((opdel >> C[ti].node) & 1));
            if
            :: !p1_belief -> printf("c%d believes it holds by node %d, which is gone\n", ti, C[ti].node)
            :: else
            fi;
            if
            :: !LIVE(C[ti].node) -> REACHED(7) /* the own-watch window */
            :: else
            fi;
            assert(p1_belief);
            for (tj : 0 .. NC - 1) {
                if
                :: tj != ti && CL(tj) != CL(ti) && C[tj].ph == HELD && LIVE(C[ti].node) &&
                   C[tj].node && LIVE(C[tj].node) && PATH_OF(ti) == PATH_OF(tj) ->
                    p1_mutex = !EX(ti) && !EX(tj);
                    if
                    :: !p1_mutex -> printf("c%d (node %d) and c%d (node %d) both hold\n", ti, C[ti].node, tj, C[tj].node)
                    :: else
                    fi;
                    assert(p1_mutex)
                :: else
                fi
            }
        :: else
        fi
    }
}

#define HELD_IN(k) ((C[FIRST(k)].ph == HELD) || (NCK(k) > 1 && C[FIRST(k) + 1].ph == HELD))
#define CALL_IN(k, p) ((C[FIRST(k)].ph == p) || (NCK(k) > 1 && C[FIRST(k) + 1].ph == p))
#ifdef RW
#define OWNER_MAY_WRITE(k) ((k) != 0 || C[1].ph == IDLE) /* rw_prepare: no upgrade */
#else
#define OWNER_MAY_WRITE(k) 1
#endif

/* ---- the multi-lock (recipes/multi.c) ----------------------------------------------------- */

#ifdef MULTI
/* zklock__let_go: a member M no longer wants. A hold is released, a place
 * given up (its node deleted, or looked for after a lost reply); a lost hold
 * has nothing left. Its slot takes a new contender once it is IDLE. */
inline let_go(m) {
    if
    :: C[m].ph == HELD || C[m].ph == QUEUING -> give_up(m)
    :: C[m].ph == LOST -> finish(m)
    :: else
    fi
}

/* A member lost the place M's round gave it: its hold (LOST), or its node
 * while it waited, once the round's transaction went out. */
#define LOST_PLACE(k, m) (C[m].ph == LOST || (msent[k] && C[m].ph == QUEUING && !C[m].node && !C[m].cu))
#define HAS_PLACE(m) (C[m].ph == HELD || C[m].node || C[m].cu)
/* Its members wait for M's transaction (nothing of an old round left). */
#define FRESH(m) (C[m].ph == QUEUING && !C[m].node && !C[m].cu && C[m].busy == 0)
#define SETTLED(m) ((C[m].ph == QUEUING || C[m].ph == HELD) && !C[m].cu && C[m].busy == 0)

/* multi_step, as step.c steps M whenever the driver finds it marked (a
 * member's change marks it), here at the end of every event of its client
 * (connected, no transaction in flight). */
inline mstep(k) {
    /* A member's hold went while M holds: M's is lost (its owner's release
     * answers at once), the other member is released. */
    if
    :: mph[k] == HELD && (C[MA(k)].ph != HELD || C[MB(k)].ph != HELD) ->
        printf("@ M%d's hold is lost with a member's\n", k);
        mph[k] = LEAVING;
        let_go(MA(k));
        let_go(MB(k))
    :: else
    fi;
    /* A member's place went while M waits (not known while one still looks
     * for its node after a lost reply). */
    if
    :: mph[k] == QUEUING && conn[k] && !mbusy[k] && !C[MA(k)].cu && !C[MB(k)].cu &&
       (LOST_PLACE(k, MA(k)) || LOST_PLACE(k, MB(k))) ->
#ifdef BROKEN_MULTI_REQUEUE
        /* the engine before the fix: a lost member is replaced, a member
         * without its node stays, and the next transaction makes the nodes
         * of those alone, while the other keeps its place */
        printf("@ M%d queues a member again alone\n", k);
        if
        :: C[MA(k)].ph == LOST -> let_go(MA(k))
        :: else
        fi;
        if
        :: C[MB(k)].ph == LOST -> let_go(MB(k))
        :: else
        fi
#else
        /* requeue_all: every member with a place lets go of it, a new
         * contender takes over; one with nothing on the server stays */
        printf("@ M%d: a member lost its place: every member queues again\n", k);
        if
        :: (HAS_PLACE(MA(k)) && C[MA(k)].ph != LOST) || (HAS_PLACE(MB(k)) && C[MB(k)].ph != LOST) ->
            REACHED(13) /* another member had a place: all let go */
        :: else
        fi;
        if
        :: C[MA(k)].ph == LOST || HAS_PLACE(MA(k)) -> let_go(MA(k))
        :: else
        fi;
        if
        :: C[MB(k)].ph == LOST || HAS_PLACE(MB(k)) -> let_go(MB(k))
        :: else
        fi;
        msent[k] = 0
#endif
    :: else
    fi;
    step(MA(k)); /* the deletes of those let go */
    step(MB(k));
    reset_gone(k);
    /* new contenders in the places of those let go, once gone */
    if
    :: mph[k] == QUEUING && C[MA(k)].ph == IDLE -> newpfx(MA(k)); C[MA(k)].ph = QUEUING
    :: else
    fi;
    if
    :: mph[k] == QUEUING && C[MB(k)].ph == IDLE -> newpfx(MB(k)); C[MB(k)].ph = QUEUING
    :: else
    fi;
    /* the transaction, for the members without a node (fixed: both) */
    if
    :: mph[k] == QUEUING && conn[k] && !mbusy[k] && (FRESH(MA(k)) || FRESH(MB(k))) &&
       (FRESH(MA(k)) || SETTLED(MA(k))) && (FRESH(MB(k)) || SETTLED(MB(k))) ->
        tw = (FRESH(MA(k)) -> 1 : 0) | (FRESH(MB(k)) -> 2 : 0);
#ifndef BROKEN_MULTI_REQUEUE
        assert(tw == 3); /* never a member alone */
#endif
        printf("@ M%d sends its transaction (members %d)\n", k, tw);
        if
        :: tw & 1 -> C[MA(k)].busy++
        :: else
        fi;
        if
        :: tw & 2 -> C[MB(k)].busy++
        :: else
        fi;
        mbusy[k] = 1;
        msent[k] = 1;
        rq(ENQUEUE, MA(k), tw, C[MA(k)].pfx | (C[MB(k)].pfx << 3));
        if
        :: tw & 1 -> send_list(MA(k)) /* pipelined: answered after the transaction */
        :: else
        fi;
        if
        :: tw & 2 -> send_list(MB(k))
        :: else
        fi
    :: else
    fi;
    /* M holds once both members hold */
    if
    :: mph[k] == QUEUING && C[MA(k)].ph == HELD && C[MB(k)].ph == HELD ->
        printf("@ M%d holds\n", k);
        REACHED(14);
        mph[k] = HELD
    :: else
    fi;
    /* released (or lost): over once both members are gone */
    if
    :: mph[k] == LEAVING && C[MA(k)].ph == IDLE && C[MB(k)].ph == IDLE -> mph[k] = IDLE
    :: else
    fi
}
#endif

/* ---- processes ------------------------------------------------------------------------- */

/* OWN WATCH (watch.c): a contender watches its own node once the node is
 * 50 ms old. Only an operator deletes a node that its contender still
 * queues or holds by (anything else is the contender's own doing or the end
 * of its session), so the model leaves the watch out until then: when an
 * operator deletes node s, its watch was either set already (the event goes
 * out with the deletion) or not (the delay was not over: olate, and the
 * watch's getData, sent when the timer fires, answers "no node"). This is
 * the engine's behaviour for every node that matters, without a timer per
 * node. */
inline own_watch(s) {
    for (tj : 0 .. NC - 1) {
        if
        :: C[tj].node == s && (C[tj].ph == HELD || WANTS(tj)) ->
            if
            :: answer(CL(tj), EV_OWN, tj, OK, s, 0, 0)
            :: C[tj].olate = 1
            fi
        :: else
        fi
    }
}

inline late_own_watch(c) {
    C[c].olate = 0;
    C[c].opend = 1;
    rq(OWNW, c, C[c].node, 0)
}

inline abandoned_expires() {
    printf("@ the server expires a session client %d gave up\n", tk);
    tq = 0;
    do
    :: ((salive[tk] & saband[tk]) >> tq) & 1 -> break
    :: else -> tq++
    od;
    tr = tq;
    zexpire(tk, tr)
}

inline limbo_applies() {
    printf("@ a lagging server applies client %d's create of a session it gave up\n", tk);
    tc = lim_c[tk] - 1;
    lim_c[tk] = 0;
    if
    :: path && (!lim_heir[tk] || LIVE(lim_hof[tk])) ->
        REACHED(6);
        tw = (lim_heir[tk] -> lim_hseq[tk] : cre[PATH_OF(tc)]);
        tr = tk * 8 + lim_inc[tk];
        tq = EX(tc) && !lim_heir[tk];
        zcreate(tc, lim_pfx[tk], lim_heir[tk], tq, tw, tr)
    :: else
    fi;
    txn()
}

active proctype server() {
end:
    do
    :: atomic {
        if
        :: nempty(req[0]) -> serve(0)
#if NK > 1
        :: nempty(req[1]) -> serve(1)
#endif
#if NK > 2
        :: nempty(req[2]) -> serve(2)
#endif
        :: b_opdel > 0 && live != 0 -> /* an operator deletes any node */
            printf("@ an operator deletes a node\n");
            b_opdel--;
            ts = 0;
            tw = 0;
            do
            :: ts < nslots ->
                ts++;
                if
                :: LIVE(ts) ->
                    tw = ts;
                    if
                    :: break
                    :: skip
                    fi
                :: else
                fi
            :: else -> break
            od;
            opdel = opdel | BIT(tw);
            zdel(tw);
            txn();
            own_watch(tw)
        :: b_reap > 0 && path && live == 0 && ndone < NK -> /* the container is reaped */
            printf("@ the server reaps the empty lock path\n");
            b_reap--;
            path = 0;
            txn()
        /* a session whose client is cut off expires: not before the
         * client's lease ran out (its holds are over: "told first") */
        :: b_exp > 0 && !conn[0] && !HELD_IN(0) && ((salive[0] >> sinc[0]) & 1) ->
            printf("@ the server expires client 0's session\n");
            b_exp--;
            zexpire(0, sinc[0])
#if NK > 1
        :: b_exp > 0 && !conn[1] && !HELD_IN(1) && ((salive[1] >> sinc[1]) & 1) ->
            printf("@ the server expires client 1's session\n");
            b_exp--;
            zexpire(1, sinc[1])
#endif
#if NK > 2
        :: b_exp > 0 && !conn[2] && !HELD_IN(2) && ((salive[2] >> sinc[2]) & 1) ->
            printf("@ the server expires client 2's session\n");
            b_exp--;
            zexpire(2, sinc[2])
#endif
        /* a session a client gave up expires in the end */
        :: salive[0] & saband[0] -> tk = 0; abandoned_expires()
#if NK > 1
        :: salive[1] & saband[1] -> tk = 1; abandoned_expires()
#endif
#if NK > 2
        :: salive[2] & saband[2] -> tk = 2; abandoned_expires()
#endif
        /* a lagging server applies a create of a given-up session */
        :: lim_c[0] && ((salive[0] & saband[0]) >> lim_inc[0]) & 1 -> tk = 0; limbo_applies()
#if NK > 1
        :: lim_c[1] && ((salive[1] & saband[1]) >> lim_inc[1]) & 1 -> tk = 1; limbo_applies()
#endif
#if NK > 2
        :: lim_c[2] && ((salive[2] & saband[2]) >> lim_inc[2]) & 1 -> tk = 2; limbo_applies()
#endif
        fi;
        check()
    }
    od
}

#if CRASHES > 0
/* Client k is gone for good: its session's nodes go, nothing of it is
 * served or handled any more, its owner counts as done. */
inline crash(k) {
    zexpire(k, sinc[k]);
    for (tk : 0 .. NC - 1) {
        if
        :: CL(tk) == k ->
            C[tk].ph = GONE;
            C[tk].rounds = 0;
            set_node(tk, 0);
            C[tk].busy = 0;
            C[tk].opend = 0;
            C[tk].wpend = 0;
            C[tk].wreg = 0
        :: else
        fi
    };
    reset_gone(k);
    conn[k] = 0;
    do
    :: nempty(rep[k]) -> rep[k]?top, tc, trc, ta, tb, td
    :: nempty(req[k]) -> req[k]?top, tc, tb, td
    :: empty(rep[k]) && empty(req[k]) -> break
    od;
    ndone++
}
#endif

proctype client(byte k) {
    mtype op;
    byte c, rc, b, d;
    short a;

    do
    :: atomic {
        if
        :: conn[k] && nempty(rep[k]) ->
            rep[k]?op, c, rc, a, b, d;
            printf("@ c%d handles %e rc=%d a=%d b=%d d=%d\n", c, op, rc, a, b, d);
            handle(op, c, rc, a, b, d)

        /* the owner: one call at a time (acquire, release, give up) */
        :: !ISM(k) && !CALL_IN(k, QUEUING) && !CALL_IN(k, LEAVING) && C[FIRST(k)].ph == IDLE &&
           C[FIRST(k)].rounds > 0 && OWNER_MAY_WRITE(k) ->
            printf("@ owner %d acquires c%d\n", k, FIRST(k));
            C[FIRST(k)].rounds--;
            newpfx(FIRST(k));
            C[FIRST(k)].ph = QUEUING
#ifdef RW
        :: k == 0 && !CALL_IN(0, QUEUING) && !CALL_IN(0, LEAVING) && C[0].ph == HELD &&
           C[1].ph == IDLE && b_down > 0 -> /* downgrade: the read side as a heir */
            printf("@ owner 0 downgrades: c1 queues as the heir of node %d\n", C[0].node);
            b_down--;
            newpfx(1);
            C[1].heir = 1;
            C[1].hseq = C[0].seq;
            C[1].hof = C[0].node;
            C[1].ph = QUEUING
        :: k == 0 && !CALL_IN(0, QUEUING) && !CALL_IN(0, LEAVING) &&
           (C[1].ph == HELD || C[1].ph == LOST) -> /* release the read side */
            printf("@ owner 0 releases c1\n");
            give_up(1)
#endif
        :: !ISM(k) && !CALL_IN(k, QUEUING) && !CALL_IN(k, LEAVING) &&
           (C[FIRST(k)].ph == HELD || C[FIRST(k)].ph == LOST) -> /* release */
            printf("@ owner %d releases c%d\n", k, FIRST(k));
            give_up(FIRST(k))
        :: !ISM(k) && b_give > 0 && (CALL_IN(k, QUEUING) || CALL_IN(k, GRANTING)) ->
            /* a deadline, a cancel (a free, inside the lock-delay) */
            printf("@ owner %d gives up\n", k);
            b_give--;
            if
            :: C[FIRST(k)].ph == QUEUING || C[FIRST(k)].ph == GRANTING -> give_up(FIRST(k))
            :: else -> give_up(FIRST(k) + 1)
            fi

#if OPDELS > 0
        /* OWN WATCH: the timer that ends the own-watch delay of a node an
         * operator deleted first; the own watch's getData finds it gone */
        :: conn[k] && C[FIRST(k)].olate && !C[FIRST(k)].opend &&
           (C[FIRST(k)].ph == HELD || WANTS(FIRST(k))) ->
            printf("@ c%d: own-watch delay over: it looks at its node\n", FIRST(k));
            late_own_watch(FIRST(k))
#ifdef RW
        :: k == 0 && conn[0] && C[1].olate && !C[1].opend && (C[1].ph == HELD || C[1].ph == QUEUING) ->
            printf("@ c1: own-watch delay over: it looks at its node\n");
            late_own_watch(1)
#endif
#ifdef MULTI
        :: ISM(k) && conn[k] && C[MB(k)].olate && !C[MB(k)].opend &&
           (C[MB(k)].ph == HELD || C[MB(k)].ph == QUEUING) ->
            printf("@ c%d: own-watch delay over: it looks at its node\n", MB(k));
            late_own_watch(MB(k))
#endif
#endif
#ifdef MULTI
        /* a multi-lock's owner: acquire (M's step makes its members
         * contend), release */
        :: ISM(k) && mph[k] == IDLE && mrounds[k] > 0 && C[MA(k)].ph == IDLE && C[MB(k)].ph == IDLE ->
            printf("@ owner %d acquires M%d\n", k, k);
            mrounds[k]--;
            msent[k] = 0;
            mph[k] = QUEUING
        :: ISM(k) && mph[k] == HELD ->
            printf("@ owner %d releases M%d\n", k, k);
            mph[k] = LEAVING;
            let_go(MA(k));
            let_go(MB(k))
#endif

        /* faults and the session's life */
        :: conn[k] && b_loss > 0 && ndone < NK ->
            printf("@ client %d loses its connection\n", k);
            b_loss--;
            conn_loss(k)
        :: !conn[k] && HELD_IN(k) -> /* the lease runs out */
            printf("@ client %d: the lease runs out, holds are lost\n", k);
            lease_out(k)
        :: conn[k] && HELD_IN(k) && b_maxhold > 0 -> /* a maximum hold (owner.c, step.c
             * read_max_hold): the hold ends as a run-out lease's does, its
             * node a stale one, but connected: its delete goes at once */
            printf("@ client %d: the maximum hold passes, holds are lost\n", k);
            b_maxhold--;
            lease_out(k);
            stale_sweep(k)
        :: !conn[k] && !HELD_IN(k) && b_lexp > 0 -> /* local expiry: give the session up */
            printf("@ client %d gives its session up (local expiry)\n", k);
            b_lexp--;
            ended(k, 1);
            saband[k] = saband[k] | BIT(sinc[k]);
            new_session(k);
            resume(k)
        :: !conn[k] -> /* reconnected: the same session, or told it expired */
            printf("@ client %d reconnects\n", k);
            if
            :: (salive[k] >> sinc[k]) & 1 ->
                conn[k] = 1;
                if
                :: lim_c[k] && lim_inc[k] == sinc[k] -> lim_c[k] = 0 /* revalidated: the old server's requests fail */
                :: else
                fi
            :: else ->
                ended(k, 0);
                new_session(k)
            fi;
            resume(k)
        fi;
        /* the driver: every contender takes its next step */
        for (tx : FIRST(k) .. FIRST(k) + NCK(k) - 1) {
            step(tx)
        }
        reset_gone(k);
#ifdef MULTI
        if
        :: ISM(k) -> mstep(k)
        :: else
        fi;
#endif
        check()
    }
#if CRASHES > 0
    /* the client dies (kill -9) with a node on the server: its session
     * expires (at once: nothing else happens meanwhile that could not
     * happen before), its node goes without a word */
    :: atomic { b_crash > 0 && C[FIRST(k)].node && LIVE(C[FIRST(k)].node) ->
        printf("@ client %d dies: its session expires\n", k);
        b_crash--;
        crash(k);
        check();
        break }
#endif
    :: atomic { conn[k] && C[FIRST(k)].rounds == 0 && C[FIRST(k)].ph == IDLE && MDONE(k) &&
                (NCK(k) == 1 || C[FIRST(k) + 1].ph == IDLE) && empty(rep[k]) && empty(req[k]) &&
                C[FIRST(k)].stale == 0 && (NCK(k) == 1 || C[FIRST(k) + 1].stale == 0) ->
        printf("@ owner %d is done\n", k);
        ndone++;
        break }
    od
}

/* When nothing can move any more: no node is left, every owner is done. */
active proctype final() {
    atomic {
    timeout ->
    /* an orphan: a node no contender queues, holds or releases by */
    p2_orphan = 1;
    for (ts : 1 .. MAXN) {
        tm = 0;
        for (ti : 0 .. NC - 1) {
            if
            :: C[ti].node == ts && (C[ti].ph == QUEUING || C[ti].ph == HELD || C[ti].ph == LEAVING ||
                                    C[ti].ph == GRANTING) -> tm = 1
            :: else
            fi
        }
        if
        :: LIVE(ts) && !tm -> p2_orphan = 0; printf("node %d (session %d) is left, nobody's\n", ts, nsess[ts])
        :: else
        fi
    }
    assert(p2_orphan);
    p3_progress = (ndone == NK);
    for (ti : 0 .. NC - 1) {
        if
        :: C[ti].ph == QUEUING || C[ti].ph == GRANTING -> printf("c%d waits for ever (node %d)\n", ti, C[ti].node)
        :: else
        fi
    }
    assert(p3_progress)
    }
}

init {
    atomic {
        for (ti : 0 .. NK - 1) {
            salive[ti] = 1;
            conn[ti] = 1
        }
        for (ti : 0 .. NC - 1) {
            C[ti].rounds = (ti == 0 -> ROUNDS0 : ROUNDS)
        }
#ifdef RW
        C[1].rounds = 0;
#endif
#ifdef MULTI
        for (ti : 0 .. 3) {
            C[ti].rounds = 0; /* members: their multi-lock's rounds */
            mrounds[ti / 2] = (ti < 2 -> ROUNDS0 : ROUNDS)
        }
        C[NC - 1].rounds = (NK > 2 -> ROUNDS : 0); /* the plain holder's, if any */
#endif
        for (ti : 0 .. NK - 1) {
            run client(ti)
        }
    }
}

#define alldone (ndone == NK)
ltl progress { <> alldone }
