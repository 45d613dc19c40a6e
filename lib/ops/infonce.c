/* infonce.c - InfoNCE between two views (formulas: infonce.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * infonce_f64.o (see real.h). The similarities come from one GEMM; each
 * row's log-sum-exp runs in double, max-shifted, in column order. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "infonce.h"
#include "ops.h"
#include "real.h"

#include <math.h>

#if !SQ_REAL_IS_F64
size_t sq_infonce_scratch_size(int U, int C)
{
    size_t M = 2 * (size_t)(U > 0 ? U : 1);
    return 2 * M * (size_t)C + M * M;
}
#endif

/* The layout of scratch: z [M, C], dz [M, C], S [M, M]. */
static void R(parts)(real *scratch, int M, int C, real **z, real **dz, real **S)
{
    *z = scratch;
    *dz = scratch + (size_t)M * C;
    *S = *dz + (size_t)M * C;
}

double R(sq_infonce_forward)(const sq_ctx *cx, real *scratch, const real *h, const int *ra,
                             const int *rb, int U, int C, real tau)
{
    int M = 2 * U;
    real *z, *dz, *S;
    R(parts)(scratch, M, C, &z, &dz, &S);
    if (U < 2)
        return 0;
    R(sq_gather_rows)(cx, z, h, ra, U, C);
    R(sq_gather_rows)(cx, z + (size_t)U * C, h, rb, U, C);
    R(sq_gemm)(cx, 0, 1, M, M, C, (real)1 / tau, z, C, z, C, 0, S, M);
    /* each row of S becomes P (the softmax over k != i), the loss summed */
    double loss = 0;
    for (int i = 0; i < M; i++) {
        real *s = S + (size_t)i * M;
        int p = i < U ? i + U : i - U;
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < M; k++)
            if (k != i && s[k] > mx)
                mx = s[k];
        for (int k = 0; k < M; k++)
            if (k != i)
                sum += exp((double)s[k] - mx);
        double lse = mx + log(sum);
        loss += lse - (double)s[p];
        for (int k = 0; k < M; k++)
            s[k] = k == i ? 0 : (real)exp((double)s[k] - lse);
    }
    return loss / M;
}

void R(sq_infonce_backward)(const sq_ctx *cx, real *dh, real *scratch, const int *ra,
                            const int *rb, int U, int C, real tau, real dloss)
{
    int M = 2 * U;
    real *z, *dz, *S;
    R(parts)(scratch, M, C, &z, &dz, &S);
    if (U < 2)
        return;
    /* G = (P - onehot(p)) dloss / M, then G + G^T in place (the diagonal
     * stays 0: P_ii = 0 and i is never its own positive) */
    real g = dloss / (real)M;
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
    R(sq_gemm)(cx, 0, 0, M, C, M, (real)1 / tau, S, M, z, C, 0, dz, C);
    R(sq_scatter_add_rows)(cx, dh, dz, ra, U, C);
    R(sq_scatter_add_rows)(cx, dh, dz + (size_t)U * C, rb, U, C);
}
