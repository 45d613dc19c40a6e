/* score_rows.h - rows of scores and excluded lists for the tests of the
 * selections over a catalogue (test_cuda_topk.c, test_cuda_rank.c): scores
 * from 23 values (ties), with -inf, -0 and +0 in every row; every 7th item
 * filtered out (ok[i] 0 for i % 7 == 3); row b excludes b % 5 items (one
 * repeated from two on), sorted ascending. The callers add their own NaN
 * and targets. */
#ifndef SCORE_ROWS_H
#define SCORE_ROWS_H

#include <math.h>
#include <stdlib.h>

#include "rng.h"

typedef struct {
    int B, V1;
    float *sc;         /* [B x V1] */
    unsigned char *ok; /* [V1] */
    int *ex, *eoff;    /* row b's excluded items: ex[eoff[b] .. eoff[b + 1]) */
} score_rows;

static inline int score_rows_in(const int *x, int n, int v)
{
    for (int j = 0; j < n; j++)
        if (x[j] == v)
            return 1;
    return 0;
}

static inline void score_rows_sort(int *x, int n)
{
    for (int a = 1; a < n; a++) /* insertion sort: a few items */
        for (int b = a; b > 0 && x[b - 1] > x[b]; b--) {
            int t = x[b];
            x[b] = x[b - 1];
            x[b - 1] = t;
        }
}

static inline int score_rows_make(score_rows *c, int B, int V1, sq_rng *r)
{
    c->B = B;
    c->V1 = V1;
    c->sc = malloc((size_t)B * V1 * sizeof *c->sc);
    c->ok = malloc((size_t)V1);
    c->eoff = malloc(((size_t)B + 1) * sizeof *c->eoff);
    c->ex = malloc((size_t)B * 6 * sizeof *c->ex);
    if (!c->sc || !c->ok || !c->eoff || !c->ex)
        return -1;
    for (int i = 0; i < V1; i++)
        c->ok[i] = i % 7 != 3;
    for (size_t j = 0; j < (size_t)B * V1; j++)
        c->sc[j] = (float)sq_rng_below(r, 23) * 0.25f - 2.0f;
    int at = 0;
    for (int b = 0; b < B; b++) {
        float *row = c->sc + (size_t)b * V1;
        row[1 + b % (V1 - 1)] = -INFINITY;
        row[1 + (b + 3) % (V1 - 1)] = -0.0f;
        row[1 + (b + 5) % (V1 - 1)] = 0.0f;
        c->eoff[b] = at;
        int n = b % 5;
        for (int j = 0; j < n; j++)
            c->ex[at + j] = 1 + (int)sq_rng_below(r, (uint64_t)(V1 - 1));
        if (n >= 2)
            c->ex[at + n++] = c->ex[at]; /* a repeat */
        score_rows_sort(c->ex + at, n);
        at += n;
    }
    c->eoff[B] = at;
    return 0;
}

static inline void score_rows_free(score_rows *c)
{
    free(c->sc);
    free(c->ok);
    free(c->ex);
    free(c->eoff);
}

#endif
