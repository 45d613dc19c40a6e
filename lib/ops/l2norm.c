/* l2norm.c - row-wise L2 normalisation (formulas: l2norm.h).
 *
 * Written over `real` and compiled twice (real.h). Each row's sums run in
 * double, in column order. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "l2norm.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <math.h>
#include <omp.h>

void R(sq_l2norm_forward)(const sq_ctx *cx, real *out, real *norm, const real *inp, int T,
                          int C, real s, real eps)
{
    SQ_ON_GPU(cx, l2norm_forward, (out, norm, inp, T, C, s, eps));
SQ_PAR_FOR(int, t, T, 1, {
        const real *x = inp + (size_t)t * C;
        real *y = out + (size_t)t * C;
        double ss = 0;
        for (int c = 0; c < C; c++)
            ss += (double)x[c] * x[c];
        double n = sqrt(ss), d = n > eps ? n : eps;
        norm[t] = (real)n;
        for (int c = 0; c < C; c++)
            y[c] = (real)(s * (double)x[c] / d);
    });
}

void R(sq_l2norm_backward)(const sq_ctx *cx, real *dinp, const real *dout, const real *out,
                           const real *norm, int T, int C, real s, real eps)
{
    SQ_ON_GPU(cx, l2norm_backward, (dinp, dout, out, norm, T, C, s, eps));
SQ_PAR_FOR(int, t, T, 1, {
        const real *y = out + (size_t)t * C, *dy = dout + (size_t)t * C;
        real *dx = dinp + (size_t)t * C;
        double n = norm[t];
        if (!(n > eps)) { /* clamped: y = s x / eps, linear */
            for (int c = 0; c < C; c++)
                dx[c] += (real)(s / eps * (double)dy[c]);
            continue;
        }
        double yd = 0;
        for (int c = 0; c < C; c++)
            yd += (double)y[c] * dy[c];
        double a = s / n, b = yd / (s * n);
        for (int c = 0; c < C; c++)
            dx[c] += (real)(a * dy[c] - b * y[c]);
    });
}
