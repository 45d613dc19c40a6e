/* attnpool.c - softmax-weighted pooling of packed sequences (formulas:
 * attnpool.h).
 *
 * Written over `real` and compiled twice (real.h). The softmax of a
 * sequence is max-shifted and summed in double in row order; sequences run
 * in parallel, each on its own. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attnpool.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <math.h>
#include <omp.h>

void R(sq_attnpool_forward)(const sq_ctx *cx, real *out, real *alpha, const real *score,
                            const real *inp, const int *off, int B, int C)
{
    SQ_ON_GPU(cx, attnpool_forward, (out, alpha, score, inp, off, B, C));
SQ_PAR_FOR(int, b, B, 1, {
        int t0 = off[b], t1 = off[b + 1];
        real *o = out + (size_t)b * C;
        for (int c = 0; c < C; c++)
            o[c] = 0;
        if (t1 <= t0)
            continue;
        if (score) {
            double mx = -INFINITY, z = 0;
            for (int t = t0; t < t1; t++)
                mx = score[t] > mx ? score[t] : mx;
            for (int t = t0; t < t1; t++)
                z += exp((double)score[t] - mx);
            for (int t = t0; t < t1; t++)
                alpha[t] = (real)(exp((double)score[t] - mx) / z);
        } else {
            for (int t = t0; t < t1; t++)
                alpha[t] = (real)(1.0 / (t1 - t0));
        }
        for (int t = t0; t < t1; t++) {
            const real *x = inp + (size_t)t * C;
            for (int c = 0; c < C; c++)
                o[c] += alpha[t] * x[c];
        }
    });
}

void R(sq_attnpool_backward)(const sq_ctx *cx, real *dinp, real *dscore, const real *dout,
                             const real *alpha, const real *inp, const int *off, int B,
                             int C)
{
    SQ_ON_GPU(cx, attnpool_backward, (dinp, dscore, dout, alpha, inp, off, B, C));
SQ_PAR_FOR(int, b, B, 1, {
        int t0 = off[b], t1 = off[b + 1];
        const real *d = dout + (size_t)b * C;
        double mean = 0;
        for (int t = t0; t < t1; t++) {
            const real *x = inp + (size_t)t * C;
            real *dx = dinp + (size_t)t * C;
            double g = 0;
            for (int c = 0; c < C; c++) {
                g += (double)x[c] * d[c];
                dx[c] += alpha[t] * d[c];
            }
            if (dscore)
                dscore[t] = (real)g; /* g_t for now */
            mean += alpha[t] * g;
        }
        if (dscore)
            for (int t = t0; t < t1; t++)
                dscore[t] = (real)(alpha[t] * ((double)dscore[t] - mean));
    });
}
