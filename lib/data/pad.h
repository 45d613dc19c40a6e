/* pad.h - one training sequence into a fixed-length row of n item ids.
 *
 * Used by seqrec-pad and by the training engine (per-epoch RandomPad
 * re-draws), so it only writes into a row the caller owns. Sequences longer
 * than n keep their newest n items. 0 is the padding id. */
#ifndef SQ_PAD_H
#define SQ_PAD_H

#include <stdint.h>
#include "rng.h"

enum sq_pad_policy {
    SQ_PAD_ZERO_LEFT = 0, /* [0 ... 0 s1 ... sk]: the usual, newest item last */
    SQ_PAD_ZERO_RIGHT,    /* [s1 ... sk 0 ... 0] */
    SQ_PAD_RANDOM,        /* Blin's RandomPad: [0 .. 0 S 0 S ... 0 S] */
};

/* The largest number of repeats alpha for which RandomPad's alpha + 1
 * copies of a len-item sequence and the alpha separating zeros fit in n:
 * floor((n - len) / (len + 1)), 0 when len == 0 or 2 * len >= n. */
uint32_t sq_randompad_max(uint32_t len, uint32_t n);

/* Pads seq[len] into row[n] (n > 0) under policy p and returns the span
 * that is not leading/trailing padding (for RandomPad it includes the
 * separating zeros: (alpha + 1) * m + alpha with m = min(len, n)).
 * SQ_PAD_RANDOM draws alpha from rng (one draw, none when no repeat fits);
 * rng is not touched by the zero policies and may then be NULL. */
uint32_t sq_pad_row(uint32_t *row, uint32_t n, const uint32_t *seq, uint32_t len,
                    enum sq_pad_policy p, sq_rng *rng);

/* RandomPad with a given number of repeats: alpha + 1 copies of the newest
 * min(len, n) items joined by single zeros, right-aligned in row[n] and
 * zeros before; alpha is capped at sq_randompad_max. Returns the span as
 * sq_pad_row does. */
uint32_t sq_pad_repeat(uint32_t *row, uint32_t n, const uint32_t *seq, uint32_t len,
                       uint32_t alpha);

/* The rng stream for view `view` of user `user`: seed a generator with
 * sq_rng_seed(&r, seed, sq_pad_stream(user, view)) so that a row depends
 * only on (seed, user, view), not on the order of users or on --copies. */
static inline uint64_t sq_pad_stream(uint32_t user, uint32_t view)
{
    return ((uint64_t)user << 32) | view;
}

/* The --mode names: "zero" (both sides) and "randompad". Parse gives
 * SQ_PAD_ZERO_LEFT or SQ_PAD_RANDOM, -1 for an unknown name. */
const char *sq_pad_policy_name(enum sq_pad_policy p);
int sq_pad_mode_parse(const char *name);

#endif
