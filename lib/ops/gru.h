/* gru.h - one GRU layer over packed sequences (GRU4Rec's recurrence), with
 * PyTorch's nn.GRU gate equations:
 *
 *     r_t = sigmoid(W_ir x_t + b_ir + W_hr h_{t-1} + b_hr)
 *     z_t = sigmoid(W_iz x_t + b_iz + W_hz h_{t-1} + b_hz)
 *     n_t = tanh(W_in x_t + b_in + r_t * (W_hn h_{t-1} + b_hn))
 *     h_t = (1 - z_t) * n_t + z_t * h_{t-1}
 *
 * (b_hn sits inside the reset gate's product, as in PyTorch and cuDNN.)
 * Each sequence of the packed batch (ops.h PACKED LAYOUT, off[0..B]) is
 * scanned oldest to newest from h_0 = 0, so h [T, H] holds the state after
 * every row: row off[b] + t is the state of sequence b having read its
 * steps 0..t (causal; a sequence never sees another's rows).
 *
 * Shapes (PyTorch's layout, gates stacked r, z, n): x [T, In], w_ih [3H, In],
 * w_hh [3H, H], b_ih and b_hh [3H] (NULL: no bias, as RecBole's
 * bias=False), h [T, H]. cache [T, 4H] keeps, per row, r, z, n and
 * W_hn h_{t-1} + b_hn for the backward; scratch holds
 * sq_gru_scratch_size(B, T, H) reals.
 *
 * The input projection of every row is one GEMM; the recurrence steps t =
 * 0, 1, ... over the sequences still running at t, each step one GEMM of
 * their previous states (gathered) against W_hh. The backward runs the
 * steps in reverse (backpropagation through time) and ADDS into dx (NULL:
 * not wanted), dw_ih, dw_hh, db_ih, db_hh (NULL when the bias is). It
 * needs x, h and cache as the forward left them. Every sum runs in a fixed
 * order: results are bitwise the same for any thread count. */
#ifndef SQ_GRU_H
#define SQ_GRU_H

#include <stddef.h>

#include "ctx.h"

/* Reals of the cache and of the scratch (forward and backward). */
static inline size_t sq_gru_cache_size(int T, int H)
{
    return (size_t)T * 4 * H;
}

static inline size_t sq_gru_scratch_size(int B, int T, int H)
{
    return (size_t)T * 4 * H + (size_t)B * (5 * (size_t)H + 1); /* + B ints */
}

#define SQ_TWICE "gru.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

void R(sq_gru_forward)(const sq_ctx *cx, real *h, real *cache, real *scratch, const real *x,
                       const real *w_ih, const real *w_hh, const real *b_ih,
                       const real *b_hh, const int *off, int B, int In, int H);
void R(sq_gru_backward)(const sq_ctx *cx, real *dx, real *dw_ih, real *dw_hh, real *db_ih,
                        real *db_hh, real *scratch, const real *dh, const real *x,
                        const real *h, const real *cache, const real *w_ih,
                        const real *w_hh, const int *off, int B, int In, int H);

#endif
