/* segs.h - random packed batches for the op tests (ops.h: PACKED LAYOUT). */
#ifndef SQ_TEST_SEGS_H
#define SQ_TEST_SEGS_H

#include <stdint.h>

#include "ops.h"
#include "rng.h"

typedef struct {
    int B, T;
    int len[8], off[9];
} segs;

/* B in 1..maxb (<= 8) sequences of lengths 1..maxlen. */
static inline void segs_random(sq_rng *r, segs *s, int maxb, int maxlen)
{
    s->B = 1 + (int)sq_rng_below(r, (uint64_t)maxb);
    for (int b = 0; b < s->B; b++)
        s->len[b] = 1 + (int)sq_rng_below(r, (uint64_t)maxlen);
    s->T = sq_pack_offsets(s->off, s->len, s->B);
}

/* B in 2..maxb (<= 8) segments of lengths 1..7, one of length 1 (the first
 * on even trials, the last on odd ones) and one of length 7 at the other
 * end: the edge cases of a kernel that sweeps segments. */
static inline void segs_edges(sq_rng *r, segs *s, int trial, int maxb)
{
    s->B = 2 + (int)sq_rng_below(r, (uint64_t)(maxb - 1));
    for (int b = 0; b < s->B; b++)
        s->len[b] = 1 + (int)sq_rng_below(r, 7);
    s->len[trial % 2 ? s->B - 1 : 0] = 1;
    s->len[trial % 2 ? 0 : s->B - 1] = 7;
    s->T = sq_pack_offsets(s->off, s->len, s->B);
}

#endif
