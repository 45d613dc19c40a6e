/* pad.c - zero padding and Blin's RandomPad (see pad.h). */
#include "pad.h"

#include <string.h>

uint32_t sq_randompad_max(uint32_t len, uint32_t n)
{
    /* Blin, eq. (4): RandomPad(alpha, S) = [S | 0 | S | 0 | ... | 0 | S],
     * alpha + 1 copies of S joined by alpha single zeros, which needs
     * (alpha + 1) |S| + alpha <= n. The paper writes max = floor(n / |S|),
     * which ignores the separators (for |S| = 3, n = 10 it allows alpha = 3,
     * 15 positions) and contradicts its own section 5.2 (no repeat once
     * |S| >= n / 2; floor(n / |S|) is still 2 at |S| = n / 2). Counting the
     * separators gives the largest alpha that fits, and it is >= 1 exactly
     * when 2 |S| < n, as section 5.2 says. */
    if (len == 0 || len >= n)
        return 0;
    return (n - len) / (len + 1);
}

uint32_t sq_pad_row(uint32_t *row, uint32_t n, const uint32_t *seq, uint32_t len,
                    enum sq_pad_policy p, sq_rng *rng)
{
    /* Longer than the row: keep the newest n items (Blin eq. (2)). */
    uint32_t m = len < n ? len : n;
    const uint32_t *s = seq + (len - m);

    if (p == SQ_PAD_ZERO_RIGHT) {
        memcpy(row, s, (size_t)m * sizeof *row);
        memset(row + m, 0, (size_t)(n - m) * sizeof *row);
        return m;
    }
    uint32_t alpha = 0;
    if (p == SQ_PAD_RANDOM) {
        /* alpha uniform in [1, max]; no draw when nothing fits, so a long
         * sequence costs no randomness. */
        uint32_t max = sq_randompad_max(m, n);
        if (max > 0)
            alpha = 1 + (uint32_t)sq_rng_below(rng, max);
    }
    return sq_pad_repeat(row, n, seq, len, alpha);
}

uint32_t sq_pad_repeat(uint32_t *row, uint32_t n, const uint32_t *seq, uint32_t len,
                       uint32_t alpha)
{
    uint32_t m = len < n ? len : n;
    const uint32_t *s = seq + (len - m);
    uint32_t max = sq_randompad_max(m, n);
    alpha = alpha < max ? alpha : max;
    /* Fill from the right so that the original sequence always ends at
     * n - 1 (the position that predicts the next item). */
    uint32_t pos = n;
    for (uint32_t c = 0; c <= alpha; c++) {
        if (c > 0)
            row[--pos] = 0; /* the separator: the tail must not predict the head */
        pos -= m;
        memcpy(row + pos, s, (size_t)m * sizeof *row);
    }
    memset(row, 0, (size_t)pos * sizeof *row);
    return n - pos;
}

const char *sq_pad_policy_name(enum sq_pad_policy p)
{
    return p == SQ_PAD_RANDOM ? "randompad" : "zero";
}

int sq_pad_mode_parse(const char *name)
{
    if (strcmp(name, "zero") == 0)
        return SQ_PAD_ZERO_LEFT;
    if (strcmp(name, "randompad") == 0)
        return SQ_PAD_RANDOM;
    return -1;
}
