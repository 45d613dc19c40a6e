/* attnpool.h - softmax-weighted pooling of each packed sequence's rows
 * (CORE's representation-consistent encoder):
 *
 *     alpha_t = softmax over the rows t of sequence b of score_t
 *     out_b   = sum_t alpha_t inp_t
 *
 * for sequence b on rows off[b] .. off[b+1]-1 (a sequence of no rows
 * gives a zero row); score NULL: alpha_t = 1 / len (CORE-ave). Backward,
 * with g_t = inp_t . dout_b:
 *
 *     dinp_t = alpha_t dout_b,   dscore_t = alpha_t (g_t - sum_k alpha_k g_k)
 *
 * Conventions of ops.h: the op context first, dinp ADDED, dscore SET; each
 * sequence on its own, sums in row order (any thread count, same bits). */
#ifndef SQ_ATTNPOOL_H
#define SQ_ATTNPOOL_H

#include "ctx.h"

#define SQ_TWICE "attnpool.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* out [B, C], alpha [T] (the weights, kept for the backward), inp [T, C],
 * score [T] or NULL. */
void R(sq_attnpool_forward)(const sq_ctx *cx, real *out, real *alpha, const real *score,
                            const real *inp, const int *off, int B, int C);
/* dinp [T, C] += ...; dscore [T] = ... (may be NULL). */
void R(sq_attnpool_backward)(const sq_ctx *cx, real *dinp, real *dscore, const real *dout,
                             const real *alpha, const real *inp, const int *off, int B,
                             int C);

#endif
