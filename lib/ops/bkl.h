/* bkl.h - the bidirectional KL term between two views' next-item
 * distributions (Blin, eq. 17-18):
 *
 *     L_bkl = 1/2 (KL(P||Q) + KL(Q||P)) = 1/2 sum_x (P(x) - Q(x)) (log P(x) - log Q(x))
 *
 * with P = softmax(h_a E^T), Q = softmax(h_b E^T) for the states h_a, h_b of
 * the two views of one user, over tied item embeddings E [V1, C] (item 0 =
 * padding, never in the softmax). Full: over items 1..V1-1; sampled: over a
 * support listed per pair (the positive and K negatives, the same support
 * for both views).
 *
 * With a, b the two views' logits, delta = a - b, lza, lzb their
 * log-normalisers (log sum exp):
 *     KL(P||Q) = E_P[delta] - (lza - lzb),  KL(Q||P) = E_Q[-delta] + (lza - lzb)
 *     KL(P||Q) + KL(Q||P) = E_P[delta] - E_Q[delta]
 * so the loss needs one pass of sums (normalisers cancel), exactly 0 when the
 * views are identical. Gradients w.r.t. the logits, lp = log P, lq = log Q:
 *     d KL(P||Q) / d a_k = P_k (lp_k - lq_k - KL(P||Q)),  d KL(P||Q) / d b_k = Q_k - P_k
 * and symmetrically for KL(Q||P).
 *
 * Conventions of ops.h: the op context first, gradients ADDED, results
 * bitwise the same for any thread count. */
#ifndef SQ_BKL_H
#define SQ_BKL_H

#include <stddef.h>

#include "ctx.h"

/* Reals of scratch sq_bkl needs (full mode) for chunks of `chunk` pairs. */
size_t sq_bkl_scratch_size(int chunk, int V1, int C);

/* The declarations, expanded once for float and once for double. */
#define SQ_TWICE "bkl.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* Pair i compares rows ra[i] and rb[i] of h [*, C] (ra[i] != rb[i]; rows
 * may be shared between pairs).
 * cand == NULL: P, Q over items 1..V1-1 (logits h E^T, chunked GEMMs like
 *   sq_ce_full, memory O(chunk * V1): scratch holds sq_bkl_scratch_size
 *   reals); cand != NULL: the support of pair i is the entries of
 *   cand[i*S .. i*S+S-1] (item ids, 0 = not in the support; at least one
 *   non-zero; an item listed twice is two entries; a host array),
 *   logits h . E[item], sequential, O(n S C); scratch is not used on the
 *   CPU (may be NULL), its GPU twin needs the full mode's for `chunk`
 *   pairs (S <= V1 + C).
 * Returns the mean over the n pairs of 1/2 (KL(P||Q) + KL(Q||P)) (0 when
 * n = 0); when dh and dE are not NULL ADDS the gradients of dloss * that
 * mean to dh (rows ra[i], rb[i]) and dE. */
double R(sq_bkl)(const sq_ctx *cx, real *dh, real *dE, real *scratch, const real *h,
                 const real *E, const int *ra, const int *rb, const int *cand, int S,
                 int n, int C, int V1, int chunk, real dloss);

#endif
