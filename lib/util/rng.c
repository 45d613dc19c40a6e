#include "rng.h"

#include <math.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sq_rng_seed(sq_rng *r, uint64_t seed, uint64_t stream)
{
    /* Mix the stream id in first so that (seed, stream) pairs never share
     * a splitmix sequence offset. */
    uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull + 0x2545f4914f6cdd1dull);
    for (int i = 0; i < 4; i++)
        r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t sq_rng_u64(sq_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t sq_rng_below(sq_rng *r, uint64_t n)
{
    /* Lemire: multiply-shift with rejection of the biased low range. */
    unsigned __int128 m = (unsigned __int128)sq_rng_u64(r) * n;
    uint64_t lo = (uint64_t)m;
    if (lo < n) {
        uint64_t threshold = -n % n;
        while (lo < threshold) {
            m = (unsigned __int128)sq_rng_u64(r) * n;
            lo = (uint64_t)m;
        }
    }
    return (uint64_t)(m >> 64);
}

double sq_rng_uniform(sq_rng *r)
{
    return (double)(sq_rng_u64(r) >> 11) * 0x1.0p-53;
}

double sq_rng_normal(sq_rng *r)
{
    double u1 = sq_rng_uniform(r), u2 = sq_rng_uniform(r);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
