/* rowwise.h - a linear layer whose every output is the same sum whatever
 * the rows beside it: the batch-invariant GEMM of scoring.
 *
 *     out[t][o] = (sum over c = 0, 1, ..., C-1 in that order of
 *                  inp[t][c] * w[o][c]) + b[o]
 *
 * each product rounded, then added (no fused multiply-add:
 * -ffp-contract=off), the bias added last (b NULL: none). A user's scores
 * must not depend on the users it is scored with, or on the thread count
 * (sasrec_model.c, BATCH INVARIANCE); OpenBLAS picks kernels and blocking
 * by the shape, so the same row summed in another order changed in its last
 * bits with the batch. Here the sum of an element is fixed by (C, the
 * element) alone, so the rows of a whole batch of histories go through one
 * call, on every thread of cx, and give the bits each row would alone.
 *
 * The CPU kernel (rowwise.c) scores tiles of rows x outputs with vector
 * accumulators over a copy of w packed into panels, the tile shaped for
 * the instruction set's registers (rowwise_tile.h); when that copy cannot
 * be allocated it falls back to a plain loop with the same sums (slower,
 * the same bits). Compiled as float and as double (real.h). */
#ifndef SQ_ROWWISE_H
#define SQ_ROWWISE_H

#include "ctx.h"
#include "isa.h"

#define SQ_TWICE "rowwise.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* out[T, OC] = inp[T, C] w[OC, C]^T + b (b NULL: no bias), every element
 * the fixed sum above, on the threads of cx (CPU). */
void R(sq_rowwise_linear)(const sq_ctx *cx, real *out, const real *inp, const real *w,
                          const real *b, int T, int C, int OC);
/* The same with the tile kernel of isa (at most the widest this process
 * can run: sq_isa_clamp), for the tests and benchmarks that compare the
 * kernels of every set on one host. */
void R(sq_rowwise_linear_isa)(const sq_ctx *cx, sq_isa isa, real *out, const real *inp,
                              const real *w, const real *b, int T, int C, int OC);

#endif
