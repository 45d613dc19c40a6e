/* sampled.h - the bias-variance correction of metrics over sampled
 * candidates (Krichene and Rendle, "On Sampled Metrics for Item
 * Recommendation", KDD 2020, section 5): seqrec-metrics --corrected=bv.
 *
 * A target of full rank R among the N items of the catalogue, ranked among
 * itself and m negatives drawn uniformly without replacement from the
 * other N - 1, gets the sampled rank r = 1 + k with k hypergeometric: the
 * number of the R - 1 items above it that were drawn,
 *   A(R, r) = C(R-1, r-1) C(N-R, m-r+1) / C(N-1, m).
 * The corrected metric gives each sampled rank r a value x(r) instead of
 * M(r); with R uniform on 1..N, x minimises
 *   sum_R [ (E[x(r) | R] - M(R))^2 + gamma Var(x(r) | R) ]
 * whose solution is the linear system
 *   ((1 - gamma) A^T A + gamma diag(c)) x = A^T M,  c(r) = sum_R A(R, r),
 * solved by LAPACK's Cholesky (dposv, OpenBLAS) for every metric of
 * metrics.h at once. gamma = 1 gives each r the mean of M over the R that
 * produce it; gamma -> 0 the least biased and most variable estimate. */
#ifndef SQ_SAMPLED_H
#define SQ_SAMPLED_H

#include <stdint.h>

#include "err.h"
#include "metrics.h"

/* x[(r - 1) * nv + v], r = 1..m+1, v over sq_metrics_nv(mt)'s values:
 * the corrected value of metric v at sampled rank r, for m negatives
 * (1 <= m < N - 1) in a catalogue of N items; 0 < gamma <= 1. */
int sq_bv_weights(const sq_metrics *mt, uint32_t n_items, uint32_t m, double gamma, double *x,
                  sq_err *e);

/* The hypergeometric A(R, r) of the header (for tests). */
double sq_bv_pmf(uint32_t n_items, uint32_t m, uint32_t R, uint32_t r);

#endif
