/* conv.h - Caser's two convolutions over windows of L embedded items
 * (Tang and Wang, WSDM 2018, section 3.2).
 *
 * Input: n windows x [n, L, C] (window i is rows i*L .. i*L+L-1, oldest
 * first, each row an item's embedding of C reals).
 *
 * HORIZONTAL filters, fused with their relu and the max-pool over time:
 * for every height h = 1..L, F filters w_h [F, h, C] and biases b [L, F];
 * filter f of height h slides over the L - h + 1 windows of h consecutive
 * rows, and
 *     a[i, h, f, p] = b[h-1, f] + sum_{k<h} sum_c w_h[f, k, c] x[i, p+k, c]
 *     out[i, (h-1) F + f] = max_p relu(a[i, h, f, p]) = relu(max_p a)
 * (relu is monotone, so it commutes with the max). The weights of all
 * heights lie in one array, height after height: w_h starts at
 * F C h (h - 1) / 2 (sq_hconv_offset), sq_hconv_size(L, F, C) reals in all.
 * arg [n, L F] records the p of each max (the first on a tie), or -1 when
 * the max is <= 0 (relu: output 0, no gradient, as PyTorch's relu'(0) = 0).
 *
 * VERTICAL filters: F filters w [F, L] (a weighted sum of the L rows) and
 * biases b [F] (NULL: none):
 *     out[i, f C + c] = b[f] + sum_k w[f, k] x[i, k, c].
 *
 * Both write their n rows of output at stride ldo (Caser concatenates the
 * two into one feature row: the vertical at column 0, the horizontal after
 * it) and read dout at the same stride.
 *
 * CONVENTIONS (ops.h). The forwards overwrite their output columns; the
 * backwards ADD into dx [n, L, C], dw and db. The horizontal backward reads
 * arg (not out): the gradient of each output goes to the window rows of its
 * recorded maximum. Results are bitwise the same for any thread count: dx
 * rows are each written by one thread; dw and db are summed per filter, each
 * filter by one thread over the windows in ascending order. */
#ifndef SQ_CONV_H
#define SQ_CONV_H

#include <stddef.h>

#include "ctx.h"

/* Where the weights of height h (1..L) start, and the reals of all. */
static inline size_t sq_hconv_offset(int h, int F, int C)
{
    return (size_t)F * C * (size_t)h * (size_t)(h - 1) / 2;
}

static inline size_t sq_hconv_size(int L, int F, int C)
{
    return sq_hconv_offset(L + 1, F, C);
}

#define SQ_TWICE "conv.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

void R(sq_hconv_forward)(const sq_ctx *cx, real *out, int ldo, int *arg, const real *x,
                         const real *w, const real *b, int n, int L, int C, int F);
void R(sq_hconv_backward)(const sq_ctx *cx, real *dx, real *dw, real *db, const real *dout,
                          int ldo, const int *arg, const real *x, const real *w, int n, int L,
                          int C, int F);

void R(sq_vconv_forward)(const sq_ctx *cx, real *out, int ldo, const real *x, const real *w,
                         const real *b, int n, int L, int C, int F);
void R(sq_vconv_backward)(const sq_ctx *cx, real *dx, real *dw, real *db, const real *dout,
                          int ldo, const real *x, const real *w, int n, int L, int C, int F);

#endif
