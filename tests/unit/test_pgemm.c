/* Unit tests for lib/ops/pgemm.c: the GEMM cut over the OpenMP team gives
 * the product for every transpose and split side, and the same bits for a
 * thread count every time. */
#include <stdlib.h>
#include <string.h>
#include <omp.h>

#include "ref_ops.h"
#include "rng.h"
#include "unit.h"

#define SQ_REAL float
#include "real.h"

/* C = op(A) op(B) + beta C0 in double, the reference (tests/ref) on the
 * float inputs */
static void ref_of(int ta, int tb, int M, int N, int K, const float *A, const float *B,
                   float beta, const float *C0, double *out)
{
    double *dA = malloc((size_t)M * K * sizeof *dA), *dB = malloc((size_t)K * N * sizeof *dB);
    for (size_t i = 0; i < (size_t)M * K; i++)
        dA[i] = A[i];
    for (size_t i = 0; i < (size_t)K * N; i++)
        dB[i] = B[i];
    for (size_t i = 0; i < (size_t)M * N; i++)
        out[i] = C0[i];
    ref_gemm(ta, tb, M, N, K, 1, dA, ta ? M : K, dB, tb ? K : N, beta, out, N);
    free(dA);
    free(dB);
}

UNIT_TEST(test_pgemm_split)
{
    /* tall (split rows), wide (split columns), and small (one call) */
    int shapes[3][3] = {{517, 40, 70}, {33, 700, 45}, {20, 30, 10}};
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    int nt0 = omp_get_max_threads(), ok_ref = 1, ok_same = 1;
    for (int s = 0; s < 3; s++)
        for (int tr = 0; tr < 4; tr++) {
            int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], ta = tr & 1, tb = tr >> 1;
            float *A = malloc((size_t)M * K * sizeof *A), *B = malloc((size_t)K * N * sizeof *B);
            float *C0 = malloc((size_t)M * N * sizeof *C0), *C = malloc((size_t)M * N * sizeof *C);
            float *C2 = malloc((size_t)M * N * sizeof *C2);
            double *ref = malloc((size_t)M * N * sizeof *ref);
            for (size_t i = 0; i < (size_t)M * K; i++)
                A[i] = (float)sq_rng_uniform(&r) - 0.5f;
            for (size_t i = 0; i < (size_t)K * N; i++)
                B[i] = (float)sq_rng_uniform(&r) - 0.5f;
            for (size_t i = 0; i < (size_t)M * N; i++)
                C0[i] = (float)sq_rng_uniform(&r);
            ref_of(ta, tb, M, N, K, A, B, 0.5f, C0, ref);
            for (int nt = 1; nt <= 3; nt++) {
                omp_set_num_threads(nt);
                for (int rep = 0; rep < 2; rep++) {
                    float *dst = rep ? C2 : C;
                    memcpy(dst, C0, (size_t)M * N * sizeof *dst);
                    sq_blas_gemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                                 tb ? CblasTrans : CblasNoTrans, M, N, K, 1.0f, A,
                                 ta ? M : K, B, tb ? K : N, 0.5f, dst, N);
                }
                for (size_t i = 0; i < (size_t)M * N; i++)
                    ok_ref &= fabs(C[i] - ref[i]) < 1e-4 * (1 + fabs(ref[i]));
                ok_same &= memcmp(C, C2, (size_t)M * N * sizeof *C) == 0;
            }
            free(A); free(B); free(C0); free(C); free(C2); free(ref);
        }
    omp_set_num_threads(nt0);
    CHECK(ok_ref);
    CHECK(ok_same);
}
