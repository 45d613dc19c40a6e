/* adam.c - Adam / AdamW and gradient clipping (see adam.h). Compiled as
 * float, and as double into adam_f64.o (see real.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include <string.h>

#include "adam.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

/* The norm is summed over a fixed number of contiguous blocks, each in
 * order and in double, then the block sums in order: the result does not
 * depend on the thread count. */
#define NORM_BLOCKS 64

/* The update of one element with gradient g (constants k: adam_consts);
 * element-wise and exact (IEEE division and square root), so every vector
 * width gives the same bits as the scalar loop. Returns the new parameter. */
static inline real R(adam_one)(real p, real g, real *m, real *v, const real *k)
{
    real b1 = k[0], b2 = k[1], lr = k[2], eps = k[3], bc1 = k[4], bc2_sqrt = k[5];
    real decay = k[6], l2 = k[7];
    g += l2 * p;
    *m = b1 * *m + ((real)1 - b1) * g;
    *v = b2 * *v + ((real)1 - b2) * g * g;
    real mhat = *m / bc1;
    real denom = r_sqrt(*v) / bc2_sqrt + eps;
    return p * decay - lr * mhat / denom;
}

/* Elements [0, n) of one chunk */
SQ_VEC static void R(adam_chunk)(real *restrict param, const real *restrict grad,
                                 real *restrict m, real *restrict v, size_t n,
                                 const real *k)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        param[i] = R(adam_one)(param[i], grad[i], &m[i], &v[i], k);
}

/* Elements [o, e) with gradient wa a + wb b (the last two terms of
 * micro.h's sum; b NULL: a alone, wa not read), a and b zeroed: one pass
 * over memory. Inlined into each vector-width clone of its callers. */
static inline void R(adam_span)(real *restrict param, real *restrict a, real wa,
                                real *restrict b, real wb, real *restrict m,
                                real *restrict v, size_t o, size_t e, const real *k)
{
    if (!b) {
        #pragma omp simd
        for (size_t i = o; i < e; i++) {
            real g = a[i];
            a[i] = 0;
            param[i] = R(adam_one)(param[i], g, &m[i], &v[i], k);
        }
        return;
    }
    #pragma omp simd
    for (size_t i = o; i < e; i++) {
        real g = wa * a[i] + wb * b[i];
        a[i] = 0;
        b[i] = 0;
        param[i] = R(adam_one)(param[i], g, &m[i], &v[i], k);
    }
}

SQ_VEC static void R(adam_chunk2)(real *restrict param, real *restrict a, real wa,
                                  real *restrict b, real wb, real *restrict m,
                                  real *restrict v, size_t n, const real *k)
{
    R(adam_span)(param, a, wa, b, wb, m, v, 0, n, k);
}

/* b1, b2, lr, eps, the bias corrections 1 - beta^t (in double: beta^t
 * underflows gracefully), the decay factor and the L2 coefficient */
static void R(adam_consts)(real k[8], const sq_adam_cfg *cfg, long t)
{
    real lr = (real)cfg->lr, wd = (real)cfg->weight_decay;
    k[0] = (real)cfg->beta1;
    k[1] = (real)cfg->beta2;
    k[2] = lr;
    k[3] = (real)cfg->eps;
    k[4] = (real)(1.0 - pow(cfg->beta1, (double)t));
    k[5] = (real)sqrt(1.0 - pow(cfg->beta2, (double)t));
    k[6] = cfg->decoupled ? (real)1 - lr * wd : (real)1;
    k[7] = cfg->decoupled ? (real)0 : wd;
}

void R(sq_adam_update)(const sq_ctx *cx, real *param, const real *grad, real *m,
                       real *v, size_t n, const sq_adam_cfg *cfg, long t)
{
    SQ_ON_GPU(cx, adam_update,
              (param, grad, m, v, n, cfg->lr, cfg->beta1, cfg->beta2, cfg->eps, cfg->weight_decay, cfg->decoupled, t));
    real k[8];
    R(adam_consts)(k, cfg, t);
    SQ_FOR_CHUNKS(n, R(adam_chunk)(param + i0, grad + i0, m + i0, v + i0, len, k));
}

/* The GPU's: the runs in launches of up to SQ_ADAM_RUNS_GPU, their
 * configs as 6 doubles each (lr, beta1, beta2, eps, weight decay,
 * decoupled); 1 when cx is not a GPU's */
static int R(adam_runs_gpu)(const sq_ctx *cx, real *param, const real *grad, real *m, real *v,
                            const sq_adam_run *runs, int n, long t)
{
#if SQ_REAL_IS_F64
    (void)cx, (void)param, (void)grad, (void)m, (void)v, (void)runs, (void)n, (void)t;
    return 1;
#else
    if (cx->backend != SQ_BACKEND_CUDA)
        return 1;
    for (int r0 = 0; r0 < n; r0 += SQ_ADAM_RUNS_GPU) {
        size_t offs[SQ_ADAM_RUNS_GPU], lens[SQ_ADAM_RUNS_GPU];
        double cfgs[6 * SQ_ADAM_RUNS_GPU];
        int k = n - r0 < SQ_ADAM_RUNS_GPU ? n - r0 : SQ_ADAM_RUNS_GPU;
        for (int i = 0; i < k; i++) {
            const sq_adam_run *u = &runs[r0 + i];
            double *c = cfgs + 6 * i;
            offs[i] = u->off;
            lens[i] = u->len;
            c[0] = u->cfg->lr, c[1] = u->cfg->beta1, c[2] = u->cfg->beta2;
            c[3] = u->cfg->eps, c[4] = u->cfg->weight_decay, c[5] = u->cfg->decoupled;
        }
        sq_gpu_adam_runs((sq_gpu *)cx->gpu, param, grad, m, v, offs, lens, cfgs, k, t);
    }
    return 0;
#endif
}

void R(sq_adam_update_runs)(const sq_ctx *cx, real *param, const real *grad, real *m, real *v,
                            const sq_adam_run *runs, int n, long t)
{
    if (!R(adam_runs_gpu)(cx, param, grad, m, v, runs, n, t))
        return;
    for (int i = 0; i < n; i++)
        R(sq_adam_update)(cx, param + runs[i].off, grad + runs[i].off, m + runs[i].off,
                          v + runs[i].off, runs[i].len, runs[i].cfg, t);
}

void R(sq_adam_update_rows)(const sq_ctx *cx, real *param, const real *grad, real *m,
                            real *v, size_t width, const uint32_t *rows, size_t n,
                            const sq_adam_cfg *cfg, long t)
{
    SQ_ON_GPU(cx, adam_rows,
              (param, grad, m, v, width, rows, n, cfg->lr, cfg->beta1, cfg->beta2, cfg->eps,
               cfg->weight_decay, cfg->decoupled, t));
    real k[8];
    R(adam_consts)(k, cfg, t);
    SQ_PAR_FOR(size_t, i, n, 1, {
        if (rows[i] != SQ_ADAM_NO_ROW) {
            size_t o = (size_t)rows[i] * width;
            R(adam_chunk)(param + o, grad + o, m + o, v + o, width, k);
        }
    });
}

/* g = w g + wk gk over one chunk (gk NULL: g = w g); element-wise, so the
 * same bits at every width */
SQ_VEC static void R(scale_add)(real *restrict g, real w, const real *restrict gk, real wk,
                                size_t n)
{
    if (!gk) {
        #pragma omp simd
        for (size_t i = 0; i < n; i++)
            g[i] *= w;
        return;
    }
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        g[i] = w * g[i] + wk * gk[i];
}

/* Elements [i0, i0 + len) of the sum: grad = w[0] grad, then += w[k]
 * parts[k] in order for k in [1, np_sum), each part zeroed once read */
static void R(sum_chunk)(real *grad, real *const *parts, const real *w, int np_sum, size_t i0,
                         size_t len)
{
    R(scale_add)(grad + i0, w[0], NULL, 0, len);
    for (int k = 1; k < np_sum; k++) {
        R(scale_add)(grad + i0, 1, parts[k] + i0, w[k], len);
        memset(parts[k] + i0, 0, len * sizeof *grad);
    }
}

void R(sq_grad_sum)(const sq_ctx *cx, real *grad, real *const *parts, const real *w, int np,
                    size_t n)
{
    SQ_FOR_CHUNKS(n, R(sum_chunk)(grad, parts, w, np, i0, len));
}

/* A chunk of the fused update: with two parts, g = w0 g0 + w1 g1 in the
 * update's own loop; with more, g0 = w0 g0 + ... + w[np-2] g[np-2] first,
 * then g = 1 g0 + w[np-1] g[np-1] there (1 g0 = g0 exactly: the bits of
 * sq_grad_sum) */
static void R(sum_adam_chunk)(real *param, real *grad, real *const *parts, const real *w,
                              int np, real *m, real *v, size_t i0, size_t len, const real *k)
{
    if (np < 2) {
        R(adam_chunk2)(param + i0, grad + i0, 1, NULL, 0, m + i0, v + i0, len, k);
        return;
    }
    real w0 = w[0];
    if (np > 2) {
        R(sum_chunk)(grad, parts, w, np - 1, i0, len);
        w0 = 1;
    }
    R(adam_chunk2)(param + i0, grad + i0, w0, parts[np - 1] + i0, w[np - 1], m + i0, v + i0,
                   len, k);
}

double R(sq_grad_norm)(const sq_ctx *cx, const real *g, size_t n)
{
    SQ_ON_GPU_RET(cx, grad_norm, (g, n));
    double part[NORM_BLOCKS];
    size_t bs = (n + NORM_BLOCKS - 1) / NORM_BLOCKS;
    SQ_PAR_FOR(int, k, NORM_BLOCKS, 1, {
        size_t i0 = (size_t)k * bs, i1 = i0 + bs < n ? i0 + bs : n;
        double s = 0;
        for (size_t i = i0; i < i1; i++)
            s += (double)g[i] * (double)g[i];
        part[k] = s;
    });
    double s = 0;
    for (int k = 0; k < NORM_BLOCKS; k++)
        s += part[k];
    return sqrt(s);
}

double R(sq_grad_clip)(const sq_ctx *cx, real *g, size_t n, double max_norm)
{
    SQ_ON_GPU_RET(cx, grad_clip, (g, n, max_norm));
    double norm = R(sq_grad_norm)(cx, g, n);
    if (!isfinite(norm) || max_norm <= 0 || norm <= max_norm)
        return norm;
    real s = (real)(max_norm / (norm + 1e-6));
    SQ_PAR_FOR(size_t, i, n, 1, {
        g[i] *= s;
    });
    return norm;
}

/* Rows [0, rows) of widths `width`: a marked row is updated with
 * gradient wa a + wb b (b NULL: a alone), both zeroed, an unmarked one
 * with a zero gradient and nothing read (lazy: left alone); one call a
 * chunk of rows, as runs of a row or two would spend more on calls than
 * on the rows */
SQ_VEC static void R(adam_rows)(real *restrict param, real *restrict a, real wa,
                                real *restrict b, real wb, real *restrict m, real *restrict v,
                                size_t rows, size_t width, const uint32_t *mark,
                                uint32_t stamp, const real *k, int lazy)
{
    for (size_t r = 0; r < rows; r++) {
        size_t o = r * width, e = o + width;
        if (mark[r] == stamp) {
            R(adam_span)(param, a, wa, b, wb, m, v, o, e, k);
            continue;
        }
        if (lazy)
            continue;
        #pragma omp simd
        for (size_t i = o; i < e; i++)
            param[i] = R(adam_one)(param[i], (real)0, &m[i], &v[i], k);
    }
}

/* Rows [r0, r1) of a row-sparse tensor at element `off` of the block: with
 * more than two parts, the marked rows' first np - 1 summed first
 * (sum_adam_chunk's order) */
static void R(rows_chunk)(real *param, real *grad, real *const *parts, const real *w, int np,
                          real *m, real *v, size_t off, size_t r0, size_t r1, size_t width,
                          const uint32_t *mark, uint32_t stamp, const real *k, int lazy)
{
    size_t i0 = off + r0 * width;
    real wa = np > 1 ? w[0] : 1, *b = np > 1 ? parts[np - 1] + i0 : NULL;
    if (np > 2) {
        for (size_t r = r0; r < r1; r++)
            if (mark[r] == stamp)
                R(sum_chunk)(grad, parts, w, np - 1, off + r * width, width);
        wa = 1;
    }
    R(adam_rows)(param + i0, grad + i0, wa, b, np > 1 ? w[np - 1] : 0, m + i0, v + i0,
                 r1 - r0, width, mark + r0, stamp, k, lazy);
}

void R(sq_adam_share_pieces)(real *param, real *grad, real *const *parts, const real *w,
                             int np, real *m, real *v, const sq_adam_piece *pc, int n_pieces,
                             const sq_adam_cfg *const *cfgs, int n_cfgs, const uint32_t *mark,
                             uint32_t stamp, long t)
{
    real k[SQ_ADAM_CFGS][8];
    for (int c = 0; c < n_cfgs && c < SQ_ADAM_CFGS; c++)
        R(adam_consts)(k[c], cfgs[c], t);
    #pragma omp for schedule(static) nowait
    for (int i = 0; i < n_pieces; i++) {
        const sq_adam_piece *q = &pc[i];
        if (q->width)
            R(rows_chunk)(param, grad, parts, w, np, m, v, q->off, q->a, q->b, q->width, mark,
                          stamp, k[q->cfg], cfgs[q->cfg]->lazy);
        else
            R(sum_adam_chunk)(param, grad, parts, w, np, m, v, q->off + q->a, q->b - q->a,
                              k[q->cfg]);
    }
}

void R(sq_adam_update_pieces)(const sq_ctx *cx, real *param, real *grad, real *const *parts,
                              const real *w, int np, real *m, real *v,
                              const sq_adam_piece *pc, int n_pieces,
                              const sq_adam_cfg *const *cfgs, int n_cfgs,
                              const uint32_t *mark, uint32_t stamp, long t)
{
    #pragma omp parallel num_threads(sq_ctx_threads(cx)) if (n_pieces > 1)
    R(sq_adam_share_pieces)(param, grad, parts, w, np, m, v, pc, n_pieces, cfgs, n_cfgs, mark,
                            stamp, t);
}
