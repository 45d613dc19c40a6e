/* The CUDA backend against its CPU twin (skipped, saying so, without a GPU). */
#include <cblas.h>
#include <stdlib.h>

#include "gpu.h"
#include "rng.h"
#include "unit.h"

UNIT_TEST(test_gpu_sgemm_matches_cblas)
{
    char name[256];
    if (!sq_gpu_probe(name, sizeof name))
        SKIP(name);
    sq_err e = {0};
    sq_gpu *g = NULL;
    CHECK_EQ(sq_gpu_open(&g, 0, &e), 0);
    if (!g)
        return;
    enum { M = 37, N = 29, K = 53 };
    sq_rng r;
    sq_rng_seed(&r, 1, 0);
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *G = malloc(sizeof(float) * M * N);
    CHECK(A && B && C && G);
    for (int i = 0; i < M * K; i++) A[i] = (float)sq_rng_normal(&r);
    for (int i = 0; i < K * N; i++) B[i] = (float)sq_rng_normal(&r);
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = ta ? M : K, ldb = tb ? K : N;
            cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
                        M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, N);
            void *dA, *dB, *dC;
            CHECK_EQ(sq_gpu_alloc(g, &dA, sizeof(float) * M * K, &e), 0);
            CHECK_EQ(sq_gpu_alloc(g, &dB, sizeof(float) * K * N, &e), 0);
            CHECK_EQ(sq_gpu_alloc(g, &dC, sizeof(float) * M * N, &e), 0);
            CHECK_EQ(sq_gpu_upload(g, dA, A, sizeof(float) * M * K, &e), 0);
            CHECK_EQ(sq_gpu_upload(g, dB, B, sizeof(float) * K * N, &e), 0);
            CHECK_EQ(sq_gpu_sgemm(g, ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 0.0f, dC, N, &e), 0);
            CHECK_EQ(sq_gpu_download(g, G, dC, sizeof(float) * M * N, &e), 0);
            double worst = 0;
            for (int i = 0; i < M * N; i++) {
                double d = fabs((double)G[i] - C[i]) / fmax(1.0, fabs(C[i]));
                if (d > worst) worst = d;
            }
            CHECK(worst < 1e-4); /* TF32 is off by default for cuBLAS sgemm */
            sq_gpu_free(g, dA);
            sq_gpu_free(g, dB);
            sq_gpu_free(g, dC);
        }
    free(A); free(B); free(C); free(G);
    sq_gpu_close(g);
}
