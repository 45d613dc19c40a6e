/* dwconv.c - depthwise 1-D convolution along packed segments (equation,
 * windows and conventions: dwconv.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * dwconv_f64.o (see real.h). The forward and the input gradient are
 * gathers: each output row reads the rows its window covers, so rows go to
 * threads independently. The weight and bias gradients are sums over all
 * rows; they are split by channel blocks instead, and each block sums its
 * rows in ascending order, so the order of every sum is fixed whatever the
 * thread count. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "dwconv.h"
#include "ops.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

/* Below this many multiply-adds an op runs on one thread (as in
 * attn_linear.c: a fork costs more than a few microseconds of work). */
#define PAR_MIN_WORK 16384
/* Channels per work item of the weight gradient: the block's partial sums
 * stay in registers, its rows are contiguous. */
#define CBLOCK 16

static int par_worth(int T, int C, int K)
{
    return (double)T * C * K >= PAR_MIN_WORK;
}

static inline int imax(int a, int b) { return a > b ? a : b; }
static inline int imin(int a, int b) { return a < b ? a : b; }

/* out_t += b + sum_k w_k (.) x_{t+k-lo}: tap k reads row t + k - lo, so
 * only the k whose row lies in [o, e) contribute (the rest are zeros). */
void R(sq_dwconv_forward)(const sq_ctx *cx, real *out, const real *x, int ld, const real *w,
                          const real *b, int K, const int *off, int B, int C, int causal)
{
    SQ_ON_GPU(cx, dwconv_forward, (out, x, ld, w, b, K, off, B, C, causal));
    int T = off[B], lo = sq_dwconv_lo(K, causal);
    SQ_PAR_LOOP(static, par_worth(T, C, K), int, t, T, 1, {
        int s = sq_seg_of(off, B, t), o = off[s], e = off[s + 1];
        real *y = out + (size_t)t * C;
        if (b)
            sq_axpy(y, 1, b, C);
        int k0 = imax(0, o - t + lo), k1 = imin(K, e - t + lo);
        for (int k = k0; k < k1; k++) {
            const real *wk = w + (size_t)k * C, *xj = x + (size_t)(t + k - lo) * ld;
            for (int c = 0; c < C; c++)
                y[c] += wk[c] * xj[c];
        }
    });
}

/* dx_j += sum_k w_k (.) dout_{j-k+lo}: the transpose of the forward's
 * gather, again one row per iteration (row j received tap k from output
 * row j - k + lo, when that row is in j's segment). */
static void dx_rows(const sq_ctx *cx, real *dx, const real *dout, int ld, const real *w,
                       int K, int lo, const int *off, int B, int C)
{
    int T = off[B];
    SQ_PAR_LOOP(static, par_worth(T, C, K), int, j, T, 1, {
        int s = sq_seg_of(off, B, j), o = off[s], e = off[s + 1];
        real *d = dx + (size_t)j * ld;
        int k0 = imax(0, j + lo - e + 1), k1 = imin(K, j + lo - o + 1);
        for (int k = k0; k < k1; k++) {
            const real *wk = w + (size_t)k * C, *g = dout + (size_t)(j - k + lo) * C;
            for (int c = 0; c < C; c++)
                d[c] += wk[c] * g[c];
        }
    });
}

/* dw_k[c] += sum_t dout_t[c] x_{t+k-lo}[c] and db[c] += sum_t dout_t[c] over
 * the channels [c0, c0 + n): segment by segment, rows ascending, into
 * partial sums added to dw and db once. */
static void dw_block(real *dw, real *db, const real *dout, const real *x, int ld, int K,
                        int lo, const int *off, int B, int C, int c0, int n)
{
    real acc[CBLOCK];
    for (int k = 0; k < K; k++) {
        for (int c = 0; c < n; c++)
            acc[c] = 0;
        for (int s = 0; s < B; s++) {
            /* rows t of the segment whose tap-k row t + k - lo is in it too */
            int o = off[s], e = off[s + 1];
            int t0 = imax(o, o + lo - k), t1 = imin(e, e + lo - k);
            for (int t = t0; t < t1; t++) {
                const real *g = dout + (size_t)t * C + c0;
                const real *xj = x + (size_t)(t + k - lo) * ld + c0;
                for (int c = 0; c < n; c++)
                    acc[c] += g[c] * xj[c];
            }
        }
        sq_axpy(dw + (size_t)k * C + c0, 1, acc, n);
    }
    if (!db)
        return;
    for (int c = 0; c < n; c++)
        acc[c] = 0;
    for (int t = 0; t < off[B]; t++)
        sq_axpy(acc, 1, dout + (size_t)t * C + c0, n);
    sq_axpy(db + c0, 1, acc, n);
}

void R(sq_dwconv_backward)(const sq_ctx *cx, real *dx, real *dw, real *db, const real *dout,
                           const real *x, int ld, const real *w, int K, const int *off, int B,
                           int C, int causal)
{
    SQ_ON_GPU(cx, dwconv_backward, (dx, dw, db, dout, x, ld, w, K, off, B, C, causal));
    int T = off[B], lo = sq_dwconv_lo(K, causal), nb = (C + CBLOCK - 1) / CBLOCK;
    dx_rows(cx, dx, dout, ld, w, K, lo, off, B, C);
    SQ_PAR_LOOP(dynamic, par_worth(T, C, K), int, i, nb, 1, {
        int c0 = i * CBLOCK;
        dw_block(dw, db, dout, x, ld, K, lo, off, B, C, c0, imin(CBLOCK, C - c0));
    });
}
