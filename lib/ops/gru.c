/* gru.c - one GRU layer over packed sequences, forward and backward
 * through time (equations, shapes and conventions: gru.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * gru_f64.o (see real.h). The input projections of all rows are one GEMM;
 * the recurrence goes step by step, t = 0, 1, ..., over the sequences
 * still running at step t: their previous states are gathered into a
 * compact [nb, H] block so that W_hh meets them in one GEMM, and the gate
 * arithmetic runs over those nb sequences (each row written by one thread).
 * Sums over rows (bias gradients) run sequentially in row order, so results
 * do not depend on the thread count. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "gru.h"
#include "ops.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <string.h>

/* Below this many elements a step's gate loop runs on one thread. */
#define PAR_MIN_WORK 16384

#if SQ_REAL_IS_F64
#define r_tanh tanh
#else
#define r_tanh tanhf
#endif

/* The longest sequence of the batch: the number of steps. */
static int longest(const int *off, int B)
{
    int n = 0;
    for (int b = 0; b < B; b++)
        if (off[b + 1] - off[b] > n)
            n = off[b + 1] - off[b];
    return n;
}

/* The sequences still running at step t into idx (in b order), and their
 * previous states h_{t-1} into the rows of P (zeros at t = 0). Returns
 * their number. */
static int R(gather_prev)(int *idx, real *P, const real *h, const int *off, int B, int t,
                          int H)
{
    int nb = 0;
    for (int b = 0; b < B; b++) {
        if (off[b + 1] - off[b] <= t)
            continue;
        real *p = P + (size_t)nb * H;
        if (t == 0)
            memset(p, 0, (size_t)H * sizeof *p);
        else
            memcpy(p, h + (size_t)(off[b] + t - 1) * H, (size_t)H * sizeof *p);
        idx[nb++] = b;
    }
    return nb;
}

/* The gates of step t for the nb running sequences: the cache row holds
 * the input projections W_i x + b_i (written by the forward's GEMM) and
 * becomes r, z, n, W_hn h + b_hn; q = W_hh h_{t-1} + b_hh. */
static void R(step_forward)(const sq_ctx *cx, real *h, real *cache, const real *P,
                            const real *Q, const int *idx, const int *off, int nb, int t,
                            int H)
{
    SQ_PAR_LOOP(static, (long)nb * H >= PAR_MIN_WORK, int, i, nb, 1, {
        int row = off[idx[i]] + t;
        real *c = cache + (size_t)row * 4 * H, *ht = h + (size_t)row * H;
        const real *q = Q + (size_t)i * 3 * H, *hp = P + (size_t)i * H;
        for (int j = 0; j < H; j++) {
            real r = sq_sigmoid(c[j] + q[j]);
            real z = sq_sigmoid(c[H + j] + q[H + j]);
            real hn = q[2 * H + j];
            real n = r_tanh(c[2 * H + j] + r * hn);
            c[j] = r;
            c[H + j] = z;
            c[2 * H + j] = n;
            c[3 * H + j] = hn;
            ht[j] = ((real)1 - z) * n + z * hp[j];
        }
    });
}

void R(sq_gru_forward)(const sq_ctx *cx, real *h, real *cache, real *scratch, const real *x,
                       const real *w_ih, const real *w_hh, const real *b_ih,
                       const real *b_hh, const int *off, int B, int In, int H)
{
    SQ_ON_GPU(cx, gru_forward, (h, cache, scratch, x, w_ih, w_hh, b_ih, b_hh, off, B, In, H));
    int T = off[B], G = 3 * H, N = longest(off, B);
    if (T == 0)
        return;
    real *P = scratch, *Q = P + (size_t)B * H;
    int *idx = (int *)(void *)(Q + (size_t)B * G); /* B reals hold B ints */
    /* the input projections of every row, into the cache's r, z, n columns */
    R(sq_gemm)(cx, 0, 1, T, G, In, 1, x, In, w_ih, In, 0, cache, 4 * H);
    if (b_ih)
        R(sq_add2d)(cx, cache, 4 * H, b_ih, 0, T, G);
    for (int t = 0; t < N; t++) {
        int nb = R(gather_prev)(idx, P, h, off, B, t, H);
        if (b_hh)
            R(sq_copy2d)(cx, Q, G, b_hh, 0, nb, G);
        R(sq_gemm)(cx, 0, 1, nb, G, H, 1, P, H, w_hh, H, b_hh ? 1 : 0, Q, G);
        R(step_forward)(cx, h, cache, P, Q, idx, off, nb, t, H);
    }
}

/* Step t backward for the nb running sequences, from dH (d loss / d h_t,
 * complete once the steps after t have added theirs): the gradients of
 * the input pre-activations into the rows of dA, those of q = W_hh h_{t-1}
 * + b_hh into dQ, and the direct path z * dh into dP. */
static void R(step_backward)(const sq_ctx *cx, real *dA, real *dQ, real *dP, const real *dH,
                             const real *cache, const real *P, const int *idx,
                             const int *off, int nb, int t, int H)
{
    SQ_PAR_LOOP(static, (long)nb * H >= PAR_MIN_WORK, int, i, nb, 1, {
        int row = off[idx[i]] + t;
        const real *c = cache + (size_t)row * 4 * H, *dh = dH + (size_t)row * H;
        const real *hp = P + (size_t)i * H;
        real *da = dA + (size_t)row * 3 * H, *dq = dQ + (size_t)i * 3 * H;
        real *dp = dP + (size_t)i * H;
        for (int j = 0; j < H; j++) {
            real r = c[j], z = c[H + j], n = c[2 * H + j], hn = c[3 * H + j];
            real dan = dh[j] * ((real)1 - z) * ((real)1 - n * n);
            real daz = dh[j] * (hp[j] - n) * z * ((real)1 - z);
            real dar = dan * hn * r * ((real)1 - r);
            da[j] = dar;
            da[H + j] = daz;
            da[2 * H + j] = dan;
            dq[j] = dar;
            dq[H + j] = daz;
            dq[2 * H + j] = dan * r;
            dp[j] = dh[j] * z;
        }
    });
}

/* db[0, G) += the sum of the rows of d [rows, G], in row order. */
static void R(add_colsums)(real *db, const real *d, int rows, int G)
{
    for (int i = 0; i < rows; i++)
        sq_axpy(db, 1, d + (size_t)i * G, G);
}

void R(sq_gru_backward)(const sq_ctx *cx, real *dx, real *dw_ih, real *dw_hh, real *db_ih,
                        real *db_hh, real *scratch, const real *dh, const real *x,
                        const real *h, const real *cache, const real *w_ih,
                        const real *w_hh, const int *off, int B, int In, int H)
{
    SQ_ON_GPU(cx, gru_backward,
              (dx, dw_ih, dw_hh, db_ih, db_hh, scratch, dh, x, h, cache, w_ih, w_hh, off, B, In, H));
    int T = off[B], G = 3 * H, N = longest(off, B);
    if (T == 0)
        return;
    real *dH = scratch, *dA = dH + (size_t)T * H, *P = dA + (size_t)T * G;
    real *dQ = P + (size_t)B * H, *dP = dQ + (size_t)B * G;
    int *idx = (int *)(void *)(dP + (size_t)B * H);
    R(sq_copy)(cx, dH, dh, (size_t)T * H);
    for (int t = N - 1; t >= 0; t--) {
        int nb = R(gather_prev)(idx, P, h, off, B, t, H);
        R(step_backward)(cx, dA, dQ, dP, dH, cache, P, idx, off, nb, t, H);
        if (db_hh)
            R(add_colsums)(db_hh, dQ, nb, G);
        if (t == 0) /* h_0 = 0: no weight gradient, nothing before */
            break;
        R(sq_gemm)(cx, 1, 0, G, H, nb, 1, dQ, G, P, H, 1, dw_hh, H);
        R(sq_gemm)(cx, 0, 0, nb, H, G, 1, dQ, G, w_hh, H, 1, dP, H);
        for (int i = 0; i < nb; i++)
            sq_axpy(dH + (size_t)(off[idx[i]] + t - 1) * H, 1, dP + (size_t)i * H, H);
    }
    if (dx)
        R(sq_gemm)(cx, 0, 0, T, In, G, 1, dA, G, w_ih, In, 1, dx, In);
    R(sq_gemm)(cx, 1, 0, G, In, T, 1, dA, G, x, In, 1, dw_ih, In);
    if (db_ih)
        R(add_colsums)(db_ih, dA, T, G);
}
