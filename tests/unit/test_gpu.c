/* The CUDA backend against its CPU twin and tests/ref's definition
 * (skipped, saying so, without a GPU), and its loader (gpu_load.c), which
 * needs no GPU. */
#include <cblas.h>
#include <stdlib.h>
#include <unistd.h>

#include "cuda_check.h"
#include "gpu.h"
#include "ref_ops.h"
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
    /* fp32: the context opens in TF32 (--precision's default), whose
     * 10-bit mantissa would miss the 1e-4 below */
    CHECK_EQ(sq_gpu_set_precision(g, 0, &e), 0);
    enum { M = 37, N = 29, K = 53 };
    sq_rng r;
    sq_rng_seed(&r, 1, 0);
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *G = malloc(sizeof(float) * M * N);
    CHECK(A && B && C && G);
    for (int i = 0; i < M * K; i++) A[i] = (float)sq_rng_normal(&r);
    for (int i = 0; i < K * N; i++) B[i] = (float)sq_rng_normal(&r);
    /* the definition (tests/ref) in double from the same inputs */
    double *Ad = cuda_to_double(A, M * K), *Bd = cuda_to_double(B, K * N);
    double *Rd = malloc(sizeof(double) * M * N);
    CHECK(Ad && Bd && Rd);
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
            sq_gpu_gemm(g, ta, tb, M, N, K, 1.0f, dA, lda, dB, ldb, 0.0f, dC, N);
            CHECK_EQ(sq_gpu_sync(g, &e), 0);
            CHECK_EQ(sq_gpu_download(g, G, dC, sizeof(float) * M * N, &e), 0);
            double worst = 0;
            for (int i = 0; i < M * N; i++) {
                double d = fabs((double)G[i] - C[i]) / fmax(1.0, fabs(C[i]));
                if (d > worst) worst = d;
            }
            CHECK(worst < 1e-4);
            /* 1e-4, looser than an element-wise op's 1e-5: each entry
             * accumulates 53 float products (partial sums up to ~20), a few
             * 1e-6 of rounding; a wrong transpose or ld is off by O(1) */
            if (Ad && Bd && Rd) {
                ref_gemm(ta, tb, M, N, K, 1, Ad, lda, Bd, ldb, 0, Rd, N);
                CHECK(cuda_close_to_ref(G, Rd, M * N, 1e-4, 1e-4, "sgemm vs tests/ref"));
            }
            sq_gpu_free(g, dA);
            sq_gpu_free(g, dB);
            sq_gpu_free(g, dC);
        }
    free(A); free(B); free(C); free(G); free(Ad); free(Bd); free(Rd);
    sq_gpu_close(g);
}

/* Sets SEQREC_CUDA_LIB to value (NULL: unsets it) and returns the old value
 * (a copy, or NULL) for env_restore: the tests leave the environment as
 * they found it. */
static char *env_set(const char *value)
{
    const char *old = getenv("SEQREC_CUDA_LIB");
    char *copy = old ? strdup(old) : NULL;
    if (value)
        setenv("SEQREC_CUDA_LIB", value, 1);
    else
        unsetenv("SEQREC_CUDA_LIB");
    return copy;
}

static void env_restore(char *old)
{
    if (old)
        setenv("SEQREC_CUDA_LIB", old, 1);
    else
        unsetenv("SEQREC_CUDA_LIB");
    free(old);
}

/* A SEQREC_CUDA_LIB that names no file: probe says so, naming the path,
 * and open is a usage error (no fallback to the object beside the runner). */
UNIT_TEST(test_gpu_load_missing_lib)
{
    const char *path = "/nonexistent/seqrec/libseqrec-cuda.so";
    char *old = env_set(path);
    char name[512] = "";
    CHECK_EQ(sq_gpu_probe(name, sizeof name), 0);
    CHECK(strstr(name, "no CUDA backend") != NULL);
    CHECK(strstr(name, path) != NULL);
    sq_err e = {0};
    sq_gpu *g = (sq_gpu *)&e; /* open must clear it */
    CHECK_EQ(sq_gpu_open(&g, 0, &e), SQ_EX_USAGE);
    CHECK(g == NULL);
    CHECK(strstr(e.msg, path) != NULL);
    env_restore(old);
}

/* A shared object without the backend's table is refused (dlsym checked). */
UNIT_TEST(test_gpu_load_not_a_backend)
{
    char *old = env_set("libm.so.6");
    char name[512] = "";
    CHECK_EQ(sq_gpu_probe(name, sizeof name), 0);
    CHECK(strstr(name, "not a seqrec CUDA backend") != NULL);
    sq_err e = {0};
    sq_gpu *g = NULL;
    CHECK_EQ(sq_gpu_open(&g, 0, &e), SQ_EX_USAGE);
    CHECK(g == NULL);
    env_restore(old);
}

/* The object built beside the runner (CUDA=1) is found without
 * SEQREC_CUDA_LIB: probe answers with the CUDA runtime's reason (or a
 * device), not the loader's. */
UNIT_TEST(test_gpu_load_finds_backend)
{
    char exe[4096], so[4200];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    CHECK(len > 0);
    if (len <= 0)
        return;
    exe[len] = '\0';
    *strrchr(exe, '/') = '\0';
    snprintf(so, sizeof so, "%s/lib/libseqrec-cuda.so", exe);
    if (access(so, F_OK) != 0)
        SKIP("no libseqrec-cuda.so beside the runner (built with CUDA=0)");
    char *old = env_set(NULL);
    char name[512] = "";
    int found = sq_gpu_probe(name, sizeof name);
    CHECK(strstr(name, "no CUDA backend") == NULL);
    if (!found) {
        CHECK(strstr(name, "no CUDA device") != NULL);
        sq_err e = {0};
        sq_gpu *g = NULL;
        CHECK(sq_gpu_open(&g, 0, &e) != 0); /* the runtime's error, object closed */
        CHECK(g == NULL);
        CHECK(strstr(e.msg, "CUDA") != NULL);
    }
    env_restore(old);
}
