/* adam.c - Adam / AdamW and gradient clipping (see adam.h). Compiled as
 * float, and as double into adam_f64.o (see real.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "adam.h"
#include "real.h"
#include "vec.h"

/* The norm is summed over a fixed number of contiguous blocks, each in
 * order and in double, then the block sums in order: the result does not
 * depend on the thread count. */
#define NORM_BLOCKS 64

/* The update of elements [0, n) of one chunk: element-wise and exact
 * (IEEE division and square root), so every vector width gives the same
 * bits as the scalar loop. */
SQ_VEC static void R(adam_chunk)(real *restrict param, const real *restrict grad,
                                 real *restrict m, real *restrict v, size_t n,
                                 const real *k)
{
    real b1 = k[0], b2 = k[1], lr = k[2], eps = k[3], bc1 = k[4], bc2_sqrt = k[5];
    real decay = k[6], l2 = k[7];
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        real g = grad[i] + l2 * param[i];
        m[i] = b1 * m[i] + ((real)1 - b1) * g;
        v[i] = b2 * v[i] + ((real)1 - b2) * g * g;
        real mhat = m[i] / bc1;
        real denom = r_sqrt(v[i]) / bc2_sqrt + eps;
        param[i] = param[i] * decay - lr * mhat / denom;
    }
}

void R(sq_adam_update)(const sq_ctx *cx, real *param, const real *grad, real *m,
                       real *v, size_t n, const sq_adam_cfg *cfg, long t)
{
    real lr = (real)cfg->lr, wd = (real)cfg->weight_decay;
    /* b1, b2, lr, eps, the bias corrections 1 - beta^t (in double: beta^t
     * underflows gracefully), the decay factor and the L2 coefficient */
    const real k[8] = {(real)cfg->beta1, (real)cfg->beta2, lr, (real)cfg->eps,
                       (real)(1.0 - pow(cfg->beta1, (double)t)),
                       (real)sqrt(1.0 - pow(cfg->beta2, (double)t)),
                       cfg->decoupled ? (real)1 - lr * wd : (real)1,
                       cfg->decoupled ? (real)0 : wd};
    SQ_FOR_CHUNKS(n, R(adam_chunk)(param + i0, grad + i0, m + i0, v + i0, len, k));
}

double R(sq_grad_norm)(const sq_ctx *cx, const real *g, size_t n)
{
    double part[NORM_BLOCKS];
    size_t bs = (n + NORM_BLOCKS - 1) / NORM_BLOCKS;
    #pragma omp parallel for schedule(static) num_threads(sq_ctx_threads(cx))
    for (int k = 0; k < NORM_BLOCKS; k++) {
        size_t i0 = (size_t)k * bs, i1 = i0 + bs < n ? i0 + bs : n;
        double s = 0;
        for (size_t i = i0; i < i1; i++)
            s += (double)g[i] * (double)g[i];
        part[k] = s;
    }
    double s = 0;
    for (int k = 0; k < NORM_BLOCKS; k++)
        s += part[k];
    return sqrt(s);
}

double R(sq_grad_clip)(const sq_ctx *cx, real *g, size_t n, double max_norm)
{
    double norm = R(sq_grad_norm)(cx, g, n);
    if (!isfinite(norm) || max_norm <= 0 || norm <= max_norm)
        return norm;
    real s = (real)(max_norm / (norm + 1e-6));
    #pragma omp parallel for schedule(static) num_threads(sq_ctx_threads(cx))
    for (size_t i = 0; i < n; i++)
        g[i] *= s;
    return norm;
}
