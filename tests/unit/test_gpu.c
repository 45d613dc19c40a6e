/* The CUDA backend against its CPU twin and tests/ref's definition
 * (skipped, saying so, without a GPU), and its loader (gpu_load.c), which
 * needs no GPU. */
#include <cblas.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cuda_check.h"
#include "gpu.h"
#include "ops.h"
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

/* x rounded to the nearest bf16 (ties to even), kept as a float */
static float to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* The largest |a - b| / max(1, |b|) (a loop of its own: aarch64 gcc 12's
 * vectoriser crashed on two fmax reductions in one) */
static double worst_rel(const float *a, const float *b, int n)
{
    double w = 0;
    for (int i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (d > w)
            w = d;
    }
    return w;
}

/* The batch-invariant GEMM of scoring (cuda/k_gemm.cu, sq_ctx_invariant):
 * its contract is exact, so it is checked bit for bit: every output is
 * alpha * (the fp32 sum of a(i,k) b(k,j) in k order, each product and sum
 * rounded alone) (+ beta c), which this loop computes on the host
 * (-ffp-contract=off); and a row's outputs are the same bits computed
 * alone (M = 1), among 3 rows, or among all M, with any --precision. Shapes
 * off the 64 x 64 tiles and the 16-deep K slices. */
static float inv_entry(int ta, int tb, const float *A, int lda, const float *B, int ldb, int K,
                       int i, int j, float alpha, float beta, float c)
{
    float acc = 0;
    for (int k = 0; k < K; k++) {
        float p = (ta ? A[(size_t)k * lda + i] : A[(size_t)i * lda + k]) *
                  (tb ? B[(size_t)j * ldb + k] : B[(size_t)k * ldb + j]);
        acc = acc + p;
    }
    float v = alpha * acc;
    return beta != 0.0f ? v + beta * c : v;
}

static void inv_case(unit_ctx *t, sq_gpu *g, int ta, int tb, int M, int N, int K, float beta)
{
    sq_err e = {0};
    sq_rng r;
    sq_rng_seed(&r, 7, (uint64_t)(ta * 2 + tb));
    int lda = ta ? M : K, ldb = tb ? K : N;
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *A = malloc(na * sizeof *A), *B = malloc(nb * sizeof *B), *C0 = malloc(nc * sizeof *C0);
    float *G = malloc(nc * sizeof *G), *W = malloc(nc * sizeof *W);
    void *dA = NULL, *dB = NULL, *dC = NULL;
    CHECK(A && B && C0 && G && W);
    if (!A || !B || !C0 || !G || !W)
        goto out;
    for (size_t i = 0; i < na; i++) A[i] = (float)sq_rng_normal(&r);
    for (size_t i = 0; i < nb; i++) B[i] = (float)sq_rng_normal(&r);
    for (size_t i = 0; i < nc; i++) C0[i] = (float)sq_rng_normal(&r);
    CHECK_EQ(sq_gpu_alloc(g, &dA, na * sizeof *A, &e), 0);
    CHECK_EQ(sq_gpu_alloc(g, &dB, nb * sizeof *B, &e), 0);
    CHECK_EQ(sq_gpu_alloc(g, &dC, nc * sizeof *G, &e), 0);
    CHECK_EQ(sq_gpu_upload(g, dA, A, na * sizeof *A, &e), 0);
    CHECK_EQ(sq_gpu_upload(g, dB, B, nb * sizeof *B, &e), 0);
    CHECK_EQ(sq_gpu_upload(g, dC, C0, nc * sizeof *G, &e), 0);
    sq_gpu_invariant(g, 1);
    sq_gpu_gemm(g, ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, beta, dC, N);
    CHECK_EQ(sq_gpu_download(g, G, dC, nc * sizeof *G, &e), 0);
    int bad = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++)
            bad += memcmp(&G[(size_t)i * N + j], &(float){inv_entry(ta, tb, A, lda, B, ldb, K,
                          i, j, 0.5f, beta, C0[(size_t)i * N + j])}, sizeof(float)) != 0;
    CHECK_EQ(bad, 0);
    /* rows alone and three at a time (A's rows at an offset: its columns
     * when transposed), into a fresh C: the full run's bits */
    const int starts[3] = {0, M / 2, M - 1}, counts[3] = {1, 3, 1};
    for (int s = 0; s < 3; s++) {
        int i0 = starts[s], m = counts[s] < M - i0 ? counts[s] : M - i0;
        const float *a = (const float *)dA + (ta ? (size_t)i0 : (size_t)i0 * lda);
        CHECK_EQ(sq_gpu_upload(g, dC, C0 + (size_t)i0 * N, (size_t)m * N * sizeof *G, &e), 0);
        sq_gpu_gemm(g, ta, tb, m, N, K, 0.5f, a, lda, dB, ldb, beta, dC, N);
        CHECK_EQ(sq_gpu_download(g, W, dC, (size_t)m * N * sizeof *W, &e), 0);
        CHECK(memcmp(W, G + (size_t)i0 * N, (size_t)m * N * sizeof *W) == 0);
    }
    /* --precision does not reach it; off, cuBLAS again (within fp32's rounding) */
    CHECK_EQ(sq_gpu_set_precision(g, 2, &e), 0);
    CHECK_EQ(sq_gpu_upload(g, dC, C0, (size_t)N * sizeof *G, &e), 0);
    sq_gpu_gemm(g, ta, tb, 1, N, K, 0.5f, dA, lda, dB, ldb, beta, dC, N);
    CHECK_EQ(sq_gpu_download(g, W, dC, (size_t)N * sizeof *W, &e), 0);
    CHECK(memcmp(W, G, (size_t)N * sizeof *W) == 0);
    CHECK_EQ(sq_gpu_set_precision(g, 0, &e), 0);
    sq_gpu_invariant(g, 0);
    CHECK_EQ(sq_gpu_upload(g, dC, C0, nc * sizeof *G, &e), 0);
    sq_gpu_gemm(g, ta, tb, M, N, K, 0.5f, dA, lda, dB, ldb, beta, dC, N);
    CHECK_EQ(sq_gpu_download(g, W, dC, nc * sizeof *W, &e), 0);
    CHECK(worst_rel(W, G, (int)nc) < 1e-5);
    CHECK_EQ(sq_gpu_sync(g, &e), 0);
out:
    sq_gpu_free(g, dA);
    sq_gpu_free(g, dB);
    sq_gpu_free(g, dC);
    free(A); free(B); free(C0); free(G); free(W);
}

UNIT_TEST(test_gpu_gemm_invariant)
{
    cuda_env g; /* opened in fp32 */
    if (cuda_open(t, &g))
        return;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            inv_case(t, g.gpu, ta, tb, 70, 131, 37, ta == tb ? 0.0f : 1.0f);
    inv_case(t, g.gpu, 0, 1, 5, 64, 16, 1.0f); /* K one slice, N one tile */
    inv_case(t, g.gpu, 0, 1, 2, 3, 1, 0.0f);
    cuda_close(&g);
}

/* --precision bf16: the GEMM rounds its inputs to bf16 and sums in fp32,
 * so each entry lies within bf16's bound of the fp32 GEMM, 2^-7 sum |a b|
 * (an input's rounding is off by at most 2^-8, truncated or rounded), and
 * is measurably off it. The simulated device rounds to nearest, ties to
 * even, so there it also matches cblas on the rounded inputs to summation
 * order; an H200's cuBLAS did not (gpu-check of stop 27: beyond 1e-4), so
 * that is the simulator's rule, not a GPU's. */
UNIT_TEST(test_gpu_gemm_bf16)
{
    char name[256];
    if (!sq_gpu_probe(name, sizeof name))
        SKIP(name);
    sq_err e = {0};
    sq_gpu *g = NULL;
    CHECK_EQ(sq_gpu_open(&g, 0, &e), 0);
    if (!g)
        return;
    CHECK_EQ(sq_gpu_set_precision(g, 2, &e), 0);
    CHECK_EQ(sq_gpu_set_precision(g, 3, &e), SQ_EX_SOFTWARE);
    enum { M = 33, N = 40, K = 64 };
    sq_rng r;
    sq_rng_seed(&r, 2, 0);
    float A[M * K], B[N * K], A16[M * K], B16[N * K], C32[M * N], C16[M * N], G[M * N];
    for (int i = 0; i < M * K; i++) A16[i] = to_bf16(A[i] = (float)sq_rng_normal(&r));
    for (int i = 0; i < N * K; i++) B16[i] = to_bf16(B[i] = (float)sq_rng_normal(&r));
    /* C = A B^T, the shape of the logits and the linear layers */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A, K, B, K, 0.0f, C32, N);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, A16, K, B16, K, 0.0f,
                C16, N);
    void *dA, *dB, *dC;
    CHECK_EQ(sq_gpu_alloc(g, &dA, sizeof A, &e), 0);
    CHECK_EQ(sq_gpu_alloc(g, &dB, sizeof B, &e), 0);
    CHECK_EQ(sq_gpu_alloc(g, &dC, sizeof G, &e), 0);
    CHECK_EQ(sq_gpu_upload(g, dA, A, sizeof A, &e), 0);
    CHECK_EQ(sq_gpu_upload(g, dB, B, sizeof B, &e), 0);
    sq_gpu_gemm(g, 0, 1, M, N, K, 1.0f, dA, K, dB, K, 0.0f, dC, N);
    CHECK_EQ(sq_gpu_sync(g, &e), 0);
    CHECK_EQ(sq_gpu_download(g, G, dC, sizeof G, &e), 0);
    double to16 = worst_rel(G, C16, M * N), to32 = worst_rel(G, C32, M * N), over = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int k = 0; k < K; k++)
                s += fabs((double)A[i * K + k] * B[j * K + k]);
            double bound = (0x1p-7 + K * 0x1p-24) * s;
            double d = fabs((double)G[i * N + j] - C32[i * N + j]);
            if (d / bound > over)
                over = d / bound;
        }
    /* said on every run: what a GPU's cuBLAS does is worth a gpu-check's log */
    fprintf(stderr,
            "  bf16 GEMM: %.3g from cblas on bf16 inputs, %.3g from fp32, %.3g of the bound\n",
            to16, to32, over);
    CHECK(over <= 1);
    CHECK(to32 > 1e-3); /* a 64-term sum of products off by ~2^-9 each */
    if (getenv("SEQREC_SIMULATED_DEVICE"))
        CHECK(to16 < 1e-4);
    sq_gpu_free(g, dA);
    sq_gpu_free(g, dB);
    sq_gpu_free(g, dC);
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

/* mem_used (attn_bench's device_mib): a device allocation raises the
 * device's used bytes by at least its size, and freeing it lowers them (on
 * the simulated device exactly the arena's span; on a GPU the driver's
 * granularity rounds it up). */
UNIT_TEST(test_gpu_mem_used)
{
    char name[256];
    if (!sq_gpu_probe(name, sizeof name))
        SKIP(name);
    sq_err e = {0};
    sq_gpu *g = NULL;
    CHECK_EQ(sq_gpu_open(&g, 0, &e), 0);
    if (!g)
        return;
    enum { BYTES = 8 << 20 };
    size_t u0 = 0, u1 = 0, u2 = 0;
    void *p = NULL;
    CHECK_EQ(sq_gpu_mem_used(g, &u0, &e), 0);
    CHECK(u0 > 0); /* the context's own: cuBLAS's workspace at least */
    CHECK_EQ(sq_gpu_alloc(g, &p, BYTES, &e), 0);
    CHECK_EQ(sq_gpu_mem_used(g, &u1, &e), 0);
    CHECK(u1 >= u0 + BYTES);
    sq_gpu_free(g, p);
    CHECK_EQ(sq_gpu_mem_used(g, &u2, &e), 0);
    CHECK(u2 < u1);
    sq_gpu_close(g);
}

/* The size class alloc.cu rounds a block up to: 256-byte multiples to
 * 4 KiB, then 8 classes an octave. */
static size_t alloc_class(size_t n)
{
    if (n <= 4096)
        return (n + 255) & ~(size_t)255;
    size_t step = 512;
    while (step * 16 < n)
        step *= 2;
    return (n + step - 1) / step * step;
}

/* The cache of freed blocks (cuda/alloc.cu), on a device small enough to
 * fill: the simulated device with SEQREC_SIM_ARENA_GIB=1 (make unit-sim
 * runs this test so; elsewhere it is skipped, saying so). Its name has
 * neither "gpu" nor "cuda": gpu-check's parity part runs those on a GPU
 * and counts a skip there as a failure. A kept block is
 * not "used"; a block too large for what the cache leaves free empties the
 * cache and is allocated; one too large for its class's size gets its
 * exact size. */
UNIT_TEST(test_devmem_cache_small_device)
{
    char name[256];
    if (!sq_gpu_probe(name, sizeof name))
        SKIP(name);
    if (!strstr(name, "simulated device") || !strstr(name, ", 1.0 GiB)"))
        SKIP("needs the simulated device with SEQREC_SIM_ARENA_GIB=1 (make unit-sim)");
    sq_err e = {0};
    sq_gpu *g = NULL;
    CHECK_EQ(sq_gpu_open(&g, 0, &e), 0);
    if (!g)
        return;
    size_t u0 = 0, u = 0, room;
    CHECK_EQ(sq_gpu_mem_used(g, &u0, &e), 0);
    room = ((size_t)1 << 30) - u0;
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    /* a: kept when freed, and not counted as used */
    CHECK_EQ(sq_gpu_alloc(g, &a, room / 100 * 45, &e), 0);
    sq_gpu_free(g, a);
    CHECK_EQ(sq_gpu_mem_used(g, &u, &e), 0);
    CHECK(u < u0 + 4096); /* the simulated device's guard bytes a block */
    /* the same class again: the kept block */
    CHECK_EQ(sq_gpu_alloc(g, &d, room / 100 * 45 + 1000, &e), 0);
    CHECK(d == a);
    sq_gpu_free(g, d);
    /* b: does not fit beside the kept block; fits once it is given back */
    CHECK_EQ(sq_gpu_alloc(g, &b, room / 100 * 70, &e), 0);
    CHECK(b != NULL);
    CHECK_EQ(sq_gpu_mem_used(g, &u, &e), 0);
    CHECK(u >= u0 + room / 100 * 70);
    sq_gpu_free(g, b);
    /* c: its class would not fit in the whole room, its size does */
    size_t n = room - (1u << 20);
    CHECK(alloc_class(n) > room);
    CHECK_EQ(sq_gpu_alloc(g, &c, n, &e), 0);
    CHECK(c != NULL);
    sq_gpu_free(g, c);
    /* past the device: out of memory, the sticky error not set by it */
    void *x = NULL;
    CHECK(sq_gpu_alloc(g, &x, room + (1u << 20), &e) != 0);
    CHECK_EQ(e.code, SQ_EX_OSERR);
    CHECK(x == NULL);
    e.code = 0;
    CHECK(sq_gpu_alloc(g, &x, (size_t)1 << 63, &e) != 0); /* no class: refused at its size */
    CHECK_EQ(e.code, SQ_EX_OSERR);
    sq_err e2 = {0};
    CHECK_EQ(sq_gpu_sync(g, &e2), 0);
    sq_gpu_close(g);
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
    CHECK_EQ(sq_gpu_open(&g, 0, &e), SQ_EX_UNAVAILABLE);
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
    CHECK_EQ(sq_gpu_open(&g, 0, &e), SQ_EX_UNAVAILABLE);
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

/* The staging buffers grow with the batch: a step's integer arrays over
 * the 64 KiB the mirror starts with, then a model's own array added after
 * them (sq_ctx_stage_add, through the op uploads), read by an op. Growing
 * the mirror once freed the op uploads' buffers and event too (a pasted
 * cleanup), so the next upload wrote into freed pinned memory. */
UNIT_TEST(test_gpu_stage_grows)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    enum { C = 3, ROWS = 50, BIG = 40000 };
    float in[ROWS * C], out[ROWS * C];
    for (int i = 0; i < ROWS * C; i++)
        in[i] = (float)i;
    float *d_in = cuda_up(&g, in, ROWS * C), *d_out = cuda_zeros(&g, ROWS * C);
    int *big = malloc(sizeof(int) * BIG), rows[ROWS];
    CHECK(big && d_in && d_out);
    if (!big || !d_in || !d_out) {
        free(big);
        cuda_close(&g);
        return;
    }
    for (int i = 0; i < BIG; i++)
        big[i] = i;
    for (int step = 0; step < 3; step++) {
        /* 8 ints, then BIG (the mirror grows), then BIG again */
        const void *host[1] = {big};
        size_t bytes[1] = {sizeof(int) * (step ? BIG : 8)};
        CHECK_EQ(sq_gpu_stage(g.gpu, host, bytes, 1, &g.e), 0);
        for (int i = 0; i < ROWS; i++)
            rows[i] = (i * 7 + step) % ROWS;
        sq_gpu_stage_add(g.gpu, rows, sizeof rows);
        sq_gather_rows(&g.cx, d_out, d_in, rows, ROWS, C);
        CHECK_EQ(cuda_down(&g, out, d_out, ROWS * C), 0);
        int bad = 0;
        for (int i = 0; i < ROWS; i++)
            for (int c = 0; c < C; c++)
                bad += out[i * C + c] != in[rows[i] * C + c];
        CHECK_EQ(bad, 0);
    }
    free(big);
    cuda_close(&g);
}
