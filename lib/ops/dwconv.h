/* dwconv.h - depthwise 1-D convolution along the rows of packed segments
 * (Blin's DWC term, eq. 11, after FLatten's depthwise conv of the values).
 *
 * Each of the C channels has its own K taps w[k, c] and bias b[c]:
 *     out[t, c] += b[c] + sum_{k=0}^{K-1} w[k, c] x[t + k - lo, c]
 * where a row outside the segment of row t counts as zero (a window never
 * crosses a segment boundary: the same zero padding as a Conv1d over each
 * sequence alone), and
 *     causal         lo = K - 1         row t sees rows t-K+1 .. t
 *     bidirectional  lo = (K - 1) / 2   rows t-lo .. t+K-1-lo
 * (odd K: centred; even K: one row more on the right than on the left, as
 * PyTorch's padding="same" pads). w[K - 1 - lo, c] is the tap of row t itself.
 *
 * Shapes: x rows of stride ld >= C (the V slice of a fused buffer may be
 * passed), out [T, C] of stride C, w [K, C], b [C] (NULL: no bias),
 * packed segments off[0..B] (ops.h), K >= 1; K may exceed a segment's
 * length (the taps that fall outside see zeros).
 *
 * CONVENTIONS (ops.h). The forward ADDS into out (the mixer adds the
 * convolution onto the attention output it already wrote). The backward
 * ADDS into dx (stride ld), dw and db (db may be NULL: no bias) from dout
 * [T, C]; it reads x but not out. Time O(T C K), no buffers.
 *
 * Results are bitwise the same for any thread count: out and dx rows are
 * each written by one thread; dw and db are reduced per channel block, each
 * block by one thread, over the rows in ascending order. */
#ifndef SQ_DWCONV_H
#define SQ_DWCONV_H

#include "ctx.h"

/* The rows left of t that its window reaches (lo above). */
static inline int sq_dwconv_lo(int K, int causal)
{
    return causal ? K - 1 : (K - 1) / 2;
}

#define SQ_TWICE "dwconv.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

void R(sq_dwconv_forward)(const sq_ctx *cx, real *out, const real *x, int ld, const real *w,
                          const real *b, int K, const int *off, int B, int C, int causal);
void R(sq_dwconv_backward)(const sq_ctx *cx, real *dx, real *dw, real *db, const real *dout,
                           const real *x, int ld, const real *w, int K, const int *off, int B,
                           int C, int causal);

#endif
