/* rng.h - seeded random numbers (xoshiro256**, seeded by splitmix64).
 *
 * A plain struct so that it can be copied, saved in a checkpoint and
 * restored bit-exactly; no hidden global state. Independent streams for
 * the same seed come from sq_rng_seed(r, seed, stream). */
#ifndef SQ_RNG_H
#define SQ_RNG_H

#include <stdint.h>

typedef struct {
    uint64_t s[4];
} sq_rng;

void sq_rng_seed(sq_rng *r, uint64_t seed, uint64_t stream);
uint64_t sq_rng_u64(sq_rng *r);
/* Uniform integer in [0, n), unbiased (Lemire's method); n > 0. */
uint64_t sq_rng_below(sq_rng *r, uint64_t n);
/* Uniform double in [0, 1) with 53 random bits. */
double sq_rng_uniform(sq_rng *r);
/* Standard normal (Box-Muller, one of the pair). */
double sq_rng_normal(sq_rng *r);

#endif
