/* node.c: lock node names and the order of a lock's queue.
 *
 * Every naming zklock knows ends in a tag and the server's sequence number:
 *   Curator  _c_<uuid>-lock-0000000042   _c_<uuid>-__READ__0000000042
 *            _c_<uuid>-__WRIT__0000000042
 *            _c_<uuid>-lease-0000000042   _c_<uuid>-latch-0000000042
 *   kazoo    <32 hex>__lock__0000000042  <32 hex>__rlock__0000000042
 * and one without a sequence: a kazoo semaphore's lease is <32 hex> alone.
 * The sequence is the parent's count of child creations printed with
 * "%010d": a signed 32-bit number, spent once it reaches 2^31 - 1 (it
 * repeats there, or goes negative: zklock__seq_spent).
 * Pure functions only: this file is what the fuzz target exercises. */
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef HAVE_GETRANDOM
#include <sys/random.h>
#endif

static const struct {
    const char *text;
    bool shared;
} tags[ZKL_TAG_COUNT] = {
    [ZKL_TAG_LOCK] = {"lock-", false},
    [ZKL_TAG_WRIT] = {"__WRIT__", false},
    [ZKL_TAG_READ] = {"__READ__", true},
    [ZKL_TAG_KLOCK] = {"__lock__", false},
    [ZKL_TAG_KRLOCK] = {"__rlock__", true},
    [ZKL_TAG_LEASE] = {"lease-", true},
    [ZKL_TAG_KLEASE] = {"", true},
    [ZKL_TAG_LATCH] = {"latch-", false},
};

const char *zklock__tag_text(enum zkl_tag tag)
{
    return tags[tag].text;
}

bool zklock__tag_shared(enum zkl_tag tag)
{
    return tags[tag].shared;
}

/* ---- parsing ------------------------------------------------------------ */

/* Which tag `name[0..len)` ends with, or -1. */
static int tag_ending(const char *name, size_t len)
{
    for (int t = 0; t < ZKL_TAG_COUNT; t++) {
        size_t tl = strlen(tags[t].text);
        if (tl > 0 && len >= tl && memcmp(name + len - tl, tags[t].text, tl) == 0)
            return t;
    }
    return -1;
}

/* The value of the `n` digits at d (n <= 10), as a 64-bit number. */
static int64_t digits_value(const char *d, size_t n)
{
    int64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (d[i] - '0');
    return v;
}

/* Accepts `tag` + sequence where the sequence starts at name[at] and runs to
 * the end (`ndig` digits, negated if `neg`). */
static int accept_entry(const char *name, size_t at, bool neg, size_t ndig,
                        struct zkl_entry *e)
{
    int64_t v = digits_value(name + at + neg, ndig);
    int tag;

    char canonical[16];

    if (neg)
        v = -v;
    if (v < INT32_MIN || v > INT32_MAX)
        return -1;
    /* Only the server's own spelling: "-0010000000" is not a sequence. */
    snprintf(canonical, sizeof canonical, "%010d", (int32_t)v);
    if (strcmp(canonical, name + at) != 0)
        return -1;
    tag = tag_ending(name, at);
    if (tag < 0)
        return -1;
    e->name = name;
    e->seq = (int32_t)v;
    e->key = 0;
    e->tag = (uint8_t)tag;
    e->mine = false;
    return 0;
}

/* kazoo's lease: uuid4().hex, and nothing else. */
static bool kazoo_lease_name(const char *name, size_t len)
{
    if (len != 32)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return false;
    return true;
}

int zklock__parse_name(const char *name, struct zkl_entry *e)
{
    size_t len, ndig = 0;

    if (name == NULL)
        return -1;
    len = strlen(name);
    if (kazoo_lease_name(name, len)) {
        *e = (struct zkl_entry){.name = name, .tag = ZKL_TAG_KLEASE};
        return 0;
    }
    while (ndig < len && name[len - 1 - ndig] >= '0' && name[len - 1 - ndig] <= '9')
        ndig++;
    /* "%010d" of a non-negative number: exactly ten digits after the tag. */
    if (ndig >= 10 && accept_entry(name, len - 10, false, 10, e) == 0)
        return 0;
    /* A negative number: '-' then nine or ten digits (width 10 with the sign). */
    if ((ndig == 9 || ndig == 10) && len > ndig && name[len - ndig - 1] == '-')
        return accept_entry(name, len - ndig - 1, true, ndig, e);
    return -1;
}

/* ---- order -------------------------------------------------------------- */

static int entry_cmp(const void *pa, const void *pb)
{
    const struct zkl_entry *a = pa, *b = pb;

    if (a->key != b->key)
        return a->key < b->key ? -1 : 1;
    if (tags[a->tag].shared != tags[b->tag].shared)
        return tags[a->tag].shared ? 1 : -1;
    return strcmp(a->name, b->name);
}

void zklock__sort(struct zkl_entry *q, size_t n, int32_t ref)
{
    for (size_t i = 0; i < n; i++)
        q[i].key = (int32_t)((uint32_t)q[i].seq - (uint32_t)ref);
    if (n > 1)
        qsort(q, n, sizeof *q, entry_cmp);
}

bool zklock__seq_spent(int32_t seq)
{
    return seq < 0 || seq >= ZKL_SEQ_SPENT;
}

int zklock__blocker(const struct zkl_entry *q, size_t self, int *blockers)
{
    bool shared = tags[q[self].tag].shared;
    int nearest = -1, count = 0;

    for (size_t i = 0; i < self; i++) {
        if (q[i].mine || (shared && tags[q[i].tag].shared))
            continue;
        nearest = (int)i;
        count++;
    }
    *blockers = count;
    return nearest;
}

/* ---- new names ---------------------------------------------------------- */

/* A node's uuid only has to be unique among live contenders: a
 * xorshift128+ stream per session, seeded once from the kernel, does it
 * without a system call per lock. */
int zklock__rng_seed(uint64_t state[2])
{
    ssize_t got = -1;
#ifdef HAVE_GETRANDOM
    got = getrandom(state, 2 * sizeof *state, 0);
#endif
    if (got != (ssize_t)(2 * sizeof *state)) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return ZKLOCK_ESYSTEM;
        got = read(fd, state, 2 * sizeof *state);
        close(fd);
        if (got != (ssize_t)(2 * sizeof *state))
            return ZKLOCK_ESYSTEM;
    }
    if (state[0] == 0 && state[1] == 0)
        state[0] = 1; /* the one state xorshift never leaves */
    return 0;
}

static uint64_t rng_next(uint64_t state[2])
{
    uint64_t x = state[0], y = state[1];
    state[0] = y;
    x ^= x << 23;
    state[1] = x ^ y ^ (x >> 17) ^ (y >> 26);
    return state[1] + y;
}

void zklock__make_prefix(char *buf, int wire, uint64_t rng[2])
{
    unsigned char u[16];
    uint64_t a = rng_next(rng), b = rng_next(rng);

    memcpy(u, &a, 8);
    memcpy(u + 8, &b, 8);
    u[6] = (u[6] & 0x0F) | 0x40; /* version 4 (random) */
    u[8] = (u[8] & 0x3F) | 0x80; /* RFC 4122 variant */
    if (wire == ZKLOCK_WIRE_KAZOO) {
        /* kazoo: uuid4().hex, the tag follows directly. */
        for (int i = 0; i < 16; i++)
            sprintf(buf + 2 * i, "%02x", u[i]);
        return;
    }
    /* Curator: "_c_" + canonical lowercase UUID + "-". */
    snprintf(buf, ZKL_PREFIX_MAX,
             "_c_%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x-",
             u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10],
             u[11], u[12], u[13], u[14], u[15]);
}
