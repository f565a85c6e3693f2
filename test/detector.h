/* detector.h: catches an overlap of critical sections across threads and
 * processes (the struct lives in a MAP_SHARED file).
 *
 * Exclusive holders must find nobody inside; shared holders must find no
 * exclusive holder. With sequentially consistent atomics, of two holders
 * that overlap at least one sees the other. Exclusive holders also check
 * that fencing tokens only grow. */
#ifndef ZKLOCK_DETECTOR_H
#define ZKLOCK_DETECTOR_H

#include <stdbool.h>
#include <stdint.h>

struct detector {
    int inside_excl;
    int inside_shared;
    int max_shared;     /* most shared holders seen inside at once */
    long overlaps;      /* violations seen */
    long entries;       /* critical sections entered */
    int64_t last_token; /* highest token of an exclusive holder */
    long stale_tokens;  /* exclusive tokens that did not grow */
    int errors;         /* lock calls that failed */
};

#define DET_ADD(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define DET_LOAD(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)

static inline void detector_enter(struct detector *d, bool shared, int64_t token)
{
    if (shared) {
        int n = DET_ADD(&d->inside_shared, 1);
        int max = DET_LOAD(&d->max_shared);
        if (DET_LOAD(&d->inside_excl) != 0)
            DET_ADD(&d->overlaps, 1);
        while (n > max && !__atomic_compare_exchange_n(&d->max_shared, &max, n, false,
                                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST))
            ;
    } else {
        if (DET_ADD(&d->inside_excl, 1) != 1 || DET_LOAD(&d->inside_shared) != 0)
            DET_ADD(&d->overlaps, 1);
        if (token <= DET_LOAD(&d->last_token))
            DET_ADD(&d->stale_tokens, 1);
        __atomic_store_n(&d->last_token, token, __ATOMIC_SEQ_CST);
    }
    DET_ADD(&d->entries, 1);
}

static inline void detector_leave(struct detector *d, bool shared)
{
    DET_ADD(shared ? &d->inside_shared : &d->inside_excl, -1);
}

#endif
