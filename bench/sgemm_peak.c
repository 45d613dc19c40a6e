/* bench/sgemm_peak.c - OpenBLAS's single-precision GEMM throughput on one
 * shape, the yardstick of bench-sasrec's achieved GEMM GFLOP/s.
 *
 * Usage: sgemm_peak M N K [TA TB [THREADS [SECONDS]]]
 *   C[M, N] = op(A) op(B), row-major, op = transpose when TA / TB is "T"
 *   (A is M x K and B is K x N after op). Repeats the call for about SECONDS
 *   (default 2) after one warm-up call on THREADS OpenBLAS threads (default
 *   1) and prints "GFLOP/s best median" (2 M N K per call; best and median
 *   over the calls). The inputs are uniform in [-1, 1), fixed seed.
 * sgemm_peak --ce-rows V1 prints the rows of logits the engine's full CE
 * takes per GEMM call over V1 columns (sq_ce_chunk, lib/ops/ops.c): the M
 * of the logits shape that bench-sasrec measures. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <time.h>

#include "ops.h"

void openblas_set_num_threads(int num_threads);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int usage(void)
{
    fprintf(stderr, "usage: sgemm_peak M N K [N|T N|T [THREADS [SECONDS]]]\n"
                    "       sgemm_peak --ce-rows V1\n");
    return 64;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--ce-rows")) {
        int v1 = atoi(argv[2]);
        if (v1 < 1)
            return usage();
        printf("%d\n", sq_ce_chunk(INT_MAX, v1));
        return 0;
    }
    if (argc < 4 || argc > 8)
        return usage();
    int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]);
    int ta = argc > 4 && argv[4][0] == 'T', tb = argc > 5 && argv[5][0] == 'T';
    int threads = argc > 6 ? atoi(argv[6]) : 1;
    double budget = argc > 7 ? atof(argv[7]) : 2;
    if (M < 1 || N < 1 || K < 1 || threads < 1 || !(budget > 0))
        return usage();
    openblas_set_num_threads(threads);
    size_t na = (size_t)M * K, nb = (size_t)K * N, nc = (size_t)M * N;
    float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b), *c = malloc(nc * sizeof *c);
    enum { MAXCALLS = 100000 };
    double *gf = malloc(MAXCALLS * sizeof *gf);
    if (!a || !b || !c || !gf) {
        fprintf(stderr, "sgemm_peak: out of memory\n");
        return 71;
    }
    unsigned long long s = 88172645463325252ull; /* xorshift64 */
    float *bufs[2] = {a, b};
    size_t lens[2] = {na, nb};
    for (int j = 0; j < 2; j++)
        for (size_t i = 0; i < lens[j]; i++) {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            bufs[j][i] = (float)((double)(s >> 11) / 4503599627370496.0 - 1.0);
        }
    /* row-major leading dimensions of the stored (pre-op) matrices */
    int lda = ta ? M : K, ldb = tb ? K : N;
    enum CBLAS_TRANSPOSE opa = ta ? CblasTrans : CblasNoTrans;
    enum CBLAS_TRANSPOSE opb = tb ? CblasTrans : CblasNoTrans;
    cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, 1, a, lda, b, ldb, 0, c, N);
    double flop = 2.0 * M * N * K, t_end = now() + budget;
    int calls = 0;
    while (calls < MAXCALLS && (calls < 3 || now() < t_end)) {
        double t0 = now();
        cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, 1, a, lda, b, ldb, 0, c, N);
        double dt = now() - t0;
        gf[calls++] = flop / (dt > 0 ? dt : 1e-9) / 1e9;
    }
    qsort(gf, (size_t)calls, sizeof *gf, cmp);
    printf("%.2f %.2f\n", gf[calls - 1], gf[calls / 2]);
    free(a);
    free(b);
    free(c);
    free(gf);
    return 0;
}
