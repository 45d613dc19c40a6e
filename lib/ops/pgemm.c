/* pgemm.c - the GEMM every op calls (real.h's r_gemm): OpenBLAS, with the
 * threads of the program's one OpenMP team.
 *
 * OpenBLAS's own pthread pool and the OpenMP team of the element-wise ops
 * made three busy threads on two cores (issue 16: a third of the samples
 * in sched_yield, 2 threads only 1.19x faster than 1). So OpenBLAS runs
 * single-threaded (sq_threads_set) and a large GEMM is cut here into one
 * block of output rows or columns per OpenMP thread, each a
 * single-threaded OpenBLAS call. Inside a parallel region (a thread that
 * scores its own users) a GEMM is one call. Each output element is
 * computed by one call over all of K, so a thread count gives one result,
 * every time. Compiled as float and as double into pgemm_f64.o. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "real.h"

#include <omp.h>

#if SQ_REAL_IS_F64
#define blas_gemm cblas_dgemm
#else
#define blas_gemm cblas_sgemm
#endif

/* Below this many multiply-adds a GEMM is not worth a parallel region. */
#define PGEMM_MIN_MACS (1L << 18)
/* Blocks are cut at multiples of this (a cache line of floats). */
#define PGEMM_ALIGN 16

void R(sq_blas_gemm)(CBLAS_ORDER order, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int M,
                     int N, int K, real alpha, const real *A, int lda, const real *B,
                     int ldb, real beta, real *C, int ldc)
{
    int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
    long macs = (long)M * N * K;
    int split_m = M >= N; /* cut the longer side: the other operand is
                             packed by every block, keep it the small one */
    int len = split_m ? M : N;
    if (order != CblasRowMajor || nt <= 1 || macs < PGEMM_MIN_MACS || len < 2 * PGEMM_ALIGN) {
        blas_gemm(order, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    int blocks = (len + PGEMM_ALIGN - 1) / PGEMM_ALIGN;
    if (nt > blocks)
        nt = blocks;
    #pragma omp parallel for schedule(static) num_threads(nt)
    for (int k = 0; k < nt; k++) {
        /* block k: [i0, i1) of the split side, whole PGEMM_ALIGN units */
        int i0 = (int)((long)blocks * k / nt) * PGEMM_ALIGN;
        int i1 = (int)((long)blocks * (k + 1) / nt) * PGEMM_ALIGN;
        if (i1 > len)
            i1 = len;
        if (split_m) /* rows of C and of op(A) */
            blas_gemm(order, ta, tb, i1 - i0, N, K, alpha,
                      A + (ta == CblasNoTrans ? (size_t)i0 * lda : (size_t)i0), lda, B, ldb,
                      beta, C + (size_t)i0 * ldc, ldc);
        else /* columns of C and of op(B) */
            blas_gemm(order, ta, tb, M, i1 - i0, K, alpha, A, lda,
                      B + (tb == CblasNoTrans ? (size_t)i0 : (size_t)i0 * ldb), ldb,
                      beta, C + i0, ldc);
    }
}
