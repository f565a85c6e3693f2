/*
 * rng.h: the simulator's one pseudo-random generator (xoshiro256**, seeded
 * through splitmix64). Everything the simulator chooses comes from it, so a
 * seed names one schedule. Header-only: the world and the scenario each own
 * a stream (struct sim_rng), split from the seed.
 */
#ifndef SIM_RNG_H
#define SIM_RNG_H

#include <stdbool.h>
#include <stdint.h>

struct sim_rng {
    uint64_t s[4];
};

static inline uint64_t sim_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Stream `stream` of seed `seed`: independent streams of one seed. */
static inline void sim_rng_seed(struct sim_rng *r, uint64_t seed, uint64_t stream)
{
    uint64_t x = seed ^ (stream * 0xd1b54a32d192ed03ULL);
    for (int i = 0; i < 4; i++)
        r->s[i] = sim_splitmix(&x);
}

static inline uint64_t sim_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t sim_rng_next(struct sim_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = sim_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;

    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = sim_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, n); n > 0. The modulo bias is far below anything a schedule
 * could show. */
static inline uint64_t sim_below(struct sim_rng *r, uint64_t n)
{
    return sim_rng_next(r) % n;
}

/* Uniform in [lo, hi]. */
static inline int64_t sim_between(struct sim_rng *r, int64_t lo, int64_t hi)
{
    return lo + (int64_t)sim_below(r, (uint64_t)(hi - lo + 1));
}

/* True with probability per_mille / 1000. */
static inline bool sim_chance(struct sim_rng *r, unsigned per_mille)
{
    return sim_below(r, 1000) < per_mille;
}

#endif
