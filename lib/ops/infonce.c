/* infonce.c - InfoNCE between two views (formulas: infonce.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * infonce_f64.o (see real.h). The similarities come from one GEMM; each
 * row's log-sum-exp runs in double, max-shifted, in column order. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "infonce.h"
#include "l2norm.h"
#include "ops.h"
#include "real.h"
#include "ongpu.h"

#include <math.h>

#if !SQ_REAL_IS_F64
size_t sq_infonce_scratch_size(int U, int C)
{
    size_t M = 2 * (size_t)(U > 0 ? U : 1);
    return 3 * M * (size_t)C + M * M + M;
}
#endif

/* The layout of scratch: z [M, C], dz [M, C], S [M, M], norms [M], and
 * for the cosine the raw states (forward) and their gradient (backward)
 * [M, C]. */
typedef struct {
    real *z, *dz, *S, *nrm, *raw;
} R(nce_parts);

static R(nce_parts) R(parts)(real *scratch, int M, int C)
{
    R(nce_parts) p;
    p.z = scratch;
    p.dz = p.z + (size_t)M * C;
    p.S = p.dz + (size_t)M * C;
    p.nrm = p.S + (size_t)M * M;
    p.raw = p.nrm + M;
    return p;
}

/* F.normalize's floor of the norm, as CORE's cosine (l2norm.h) */
#define NCE_NORM_EPS 1e-12

/* View k's negatives exclude view i's: itself, and with labels a view of
 * another pair with the same label (never the positive). */
static int R(excluded)(const sq_infonce_opt *o, int U, int i, int k)
{
    if (k == i)
        return 1;
    if (!o->label || k == (i < U ? i + U : i - U))
        return 0;
    return o->label[k % U] == o->label[i % U];
}

double R(sq_nce_softmax)(const sq_ctx *cx, real *S, int U, const int *label, double div)
{
    SQ_ON_GPU_RET(cx, nce_softmax, (S, U, label, div));
    (void)cx; /* the double build has no GPU twin */
    int M = 2 * U;
    sq_infonce_opt o = {.label = label};
    double loss = 0;
    for (int i = 0; i < M; i++) {
        real *s = S + (size_t)i * M;
        int p = i < U ? i + U : i - U;
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < M; k++)
            if (!R(excluded)(&o, U, i, k) && s[k] > mx)
                mx = s[k];
        for (int k = 0; k < M; k++)
            if (!R(excluded)(&o, U, i, k))
                sum += exp((double)s[k] - mx);
        double lse = mx + log(sum);
        loss += lse - (double)s[p];
        for (int k = 0; k < M; k++)
            s[k] = R(excluded)(&o, U, i, k) ? 0 : (real)exp((double)s[k] - lse);
    }
    return loss / div;
}

void R(sq_nce_grad)(const sq_ctx *cx, real *S, int U, real g)
{
    SQ_ON_GPU(cx, nce_grad, (S, U, g));
    (void)cx;
    int M = 2 * U;
    for (int i = 0; i < M; i++) {
        int p = i < U ? i + U : i - U;
        for (int k = 0; k < M; k++)
            S[(size_t)i * M + k] = (S[(size_t)i * M + k] - (k == p ? 1 : 0)) * g;
    }
    for (int i = 0; i < M; i++)
        for (int k = i + 1; k < M; k++) {
            real sym = S[(size_t)i * M + k] + S[(size_t)k * M + i];
            S[(size_t)i * M + k] = sym;
            S[(size_t)k * M + i] = sym;
        }
}

double R(sq_infonce_forward)(const sq_ctx *cx, real *scratch, const real *h, const int *ra,
                             const int *rb, int U, int C, const sq_infonce_opt *o)
{
    int M = 2 * U;
    R(nce_parts) sc = R(parts)(scratch, M, C);
    real *z = sc.z, *S = sc.S;
    if (U < 2)
        return 0;
    real *x = o->cosine ? sc.raw : z; /* the states as gathered */
    R(sq_gather_rows)(cx, x, h, ra, U, C);
    R(sq_gather_rows)(cx, x + (size_t)U * C, h, rb, U, C);
    if (o->cosine)
        R(sq_l2norm_forward)(cx, z, sc.nrm, x, M, C, 1, (real)NCE_NORM_EPS);
    R(sq_gemm)(cx, 0, 1, M, M, C, (real)(1 / o->tau), z, C, z, C, 0, S, M);
    /* each row of S becomes P (the softmax over the kept k), the loss summed */
    return R(sq_nce_softmax)(cx, S, U, o->label, M);
}

void R(sq_infonce_backward)(const sq_ctx *cx, real *dh, real *scratch, const int *ra,
                            const int *rb, int U, int C, const sq_infonce_opt *o,
                            real dloss)
{
    int M = 2 * U;
    R(nce_parts) sc = R(parts)(scratch, M, C);
    real *z = sc.z, *dz = sc.dz, *S = sc.S;
    if (U < 2)
        return;
    /* G = (P - onehot(p)) dloss / M, then G + G^T in place (the diagonal
     * stays 0: P_ii = 0 and i is never its own positive) */
    R(sq_nce_grad)(cx, S, U, dloss / (real)M);
    R(sq_gemm)(cx, 0, 0, M, C, M, (real)(1 / o->tau), S, M, z, C, 0, dz, C);
    if (o->cosine) { /* back through z = h / |h| */
        R(sq_zero)(cx, sc.raw, (size_t)M * C);
        R(sq_l2norm_backward)(cx, sc.raw, dz, z, sc.nrm, M, C, 1, (real)NCE_NORM_EPS);
        dz = sc.raw;
    }
    R(sq_scatter_add_rows)(cx, dh, dz, ra, U, C);
    R(sq_scatter_add_rows)(cx, dh, dz + (size_t)U * C, rb, U, C);
}
