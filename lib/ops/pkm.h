/* pkm.h - product-key memory retrieval (Lample et al. 2019, "Large memory
 * layers with product keys"), the Interest Memory Retrieval layer of
 * ELASTIC (eq. 5-7, Algorithm 1): forward and backward.
 *
 * SHAPES. B queries q_b in R^d (rows of q [B, d], d even, h = d / 2);
 * sub-keys C1, C2 [n, h]; experts E [n*n, d], expert i*n + j belongs to
 * the pair of sub-keys (C1_i, C2_j), i.e. to the full key [C1_i, C2_j].
 * 1 <= k <= n; n*n must fit an int (n <= 46340); sq_pkm_shape_ok tells,
 * and the caller refuses other shapes (the op does not check them).
 *
 * SELECTION (per query b):
 *     s1_i = q_b[0:h] . C1_i,   s2_j = q_b[h:d] . C2_j        (i, j < n)
 *     I1 = top-k of s1, I2 = top-k of s2
 *     the k best of the k*k sums s1_i + s2_j, (i, j) in I1 x I2:
 *         idx_b[0..k) (expert i*n + j), sc_b[0..k) (s1_i + s2_j)
 * "Best" is the order (score descending, then index ascending): a tie is
 * broken by the smaller index (sub-key index for I1, I2, expert index for
 * the final list), so the selection is deterministic and sorted. Under this
 * order the k experts are exactly the top-k of all n*n full-key scores
 * q_b . [C1_i, C2_j] (Lample et al.'s argument holds with the tie-break
 * too: a better i' gives the better expert (i', j), a better j' gives
 * (i, j')). Scores must be finite.
 *
 * OUTPUT. out [B, k, d], row (b, m):
 *     weighted = 1:  w_b[m] E[idx_b[m]],  w_b = softmax(sc_b) over the k
 *                    (Lample et al.: the keys and the query get gradient)
 *     weighted = 0:  E[idx_b[m]]           (ELASTIC's Algorithm 1: a plain
 *                    gather; q, C1, C2 get no gradient)
 *
 * BACKWARD, from dout [B, k, d], the selection held fixed (top-k is
 * piecewise constant), ADDS into
 *     dE[idx_b[m]] += w_b[m] dout_bm            (weighted; 1 for weighted=0)
 * and, weighted only, with dw_m = dout_bm . E[idx_b[m]],
 *     g_m = w_m (dw_m - sum_l w_l dw_l)          (softmax backward: d sc)
 *     for expert i*n + j:  dq_b[0:h] += g_m C1_i,  dq_b[h:d] += g_m C2_j,
 *                          dC1_i += g_m q_b[0:h],  dC2_j += g_m q_b[h:d].
 * With weighted = 0, dq, dC1, dC2 are not touched (may be NULL).
 *
 * BUFFERS. No function allocates. The caller provides
 *   idx      [B, k] ints, written by the forward (the selection), read by
 *            the backward and by sq_pkm_count
 *   cache    sq_pkm_cache_size(B, k) = 2 B k reals, written by the forward,
 *            read by the backward (leave unchanged): [sc [B, k] | w [B, k]]
 *            (w = softmax(sc) is stored for weighted = 0 too)
 *   scratch  sq_pkm_scratch_size(B, n, k) reals, free between calls
 *            (forward and backward may share one):
 *              forward   G 4k, G = min(B, SQ_PKM_GROUPS) slots: the two
 *                        sub-key top-k lists, scores and indices (the
 *                        indices kept as reals: exact, n < 2^24; the n
 *                        sub-key scores are never stored)
 *              backward  B k (g above; weighted only)
 *            (n does not enter the size; the argument is kept so that a
 *            later kernel, e.g. scores by GEMM, can ask for more)
 *
 * Time: forward O(B (n d + k d)) for the scores and outputs, plus the
 * sorted-list insertions, O(n k + k^3) per query at worst but close to
 * O(n + k^2) in practice (most offers lose to the k-th at once, and the
 * k*k sums stop early: pkm.c); backward O(B k d). The backward reads the
 * forward's idx and cache and the same q, C1, C2, E; not out.
 *
 * CONVENTIONS (ops.h). Op context first; results bitwise the same for any
 * thread count: the forward works per query (work item g takes queries g,
 * g+G, g+2G, ... with slot g); the backward forms g and dq per query in
 * parallel, and scatters into dE, dC1, dC2 over column tiles in parallel,
 * every tile adding the queries in order (b, then m). Every op exists for
 * float and, with the _f64 suffix, for double. */
#ifndef SQ_PKM_H
#define SQ_PKM_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

#define SQ_PKM_GROUPS 64 /* forward work items = scratch slots */

/* 1 when n sub-keys per half, width d and k selected experts are a shape
 * the op takes: d >= 2 even, 1 <= k <= n, n*n <= INT_MAX. */
static inline int sq_pkm_shape_ok(int n, int d, int k)
{
    return d >= 2 && d % 2 == 0 && k >= 1 && k <= n &&
           (long long)n * n <= INT_MAX;
}

/* Reals of the forward->backward cache and of the scratch (see BUFFERS). */
size_t sq_pkm_cache_size(int B, int k);
size_t sq_pkm_scratch_size(int B, int n, int k);

/* count[e] += the number of times expert e is among idx[0 .. B*k) (usage
 * statistics; count has n*n entries). */
void sq_pkm_count(const int *idx, int B, int k, uint64_t *count);

#define SQ_TWICE "pkm.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

void R(sq_pkm_forward)(const sq_ctx *cx, real *out, int *idx, real *cache,
                       real *scratch, const real *q, const real *C1,
                       const real *C2, const real *E, int B, int n, int d,
                       int k, int weighted);
void R(sq_pkm_backward)(const sq_ctx *cx, real *dq, real *dC1, real *dC2,
                        real *dE, real *scratch, const real *dout,
                        const real *q, const real *C1, const real *C2,
                        const real *E, const int *idx, const real *cache,
                        int B, int n, int d, int k, int weighted);

#endif
