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
 * of the logits shape that bench-sasrec measures.
 * sgemm_peak --rowwise[=ISA] M N K [THREADS [SECONDS]] times the engine's
 * batch-invariant scoring GEMM instead (sq_rowwise_linear, rowwise.h:
 * C[M, N] = A[M, K] B[N, K]^T, the scores of M users over N items) on
 * THREADS threads, with the tile kernel of ISA (avx512f, avx2 or x86-64;
 * default and at most: the widest the host runs), and prints "GFLOP/s best
 * median ISA", ISA the kernel it ran (isa.h sq_isa_name).
 * sgemm_peak --isa prints the vector set the engine's kernels run on in
 * this build on this host (the bench CSVs' vector_isa). */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <time.h>

#include "ops.h"
#include "rowwise.h"
#include "vec.h"

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
                    "       sgemm_peak --rowwise[=ISA] M N K [THREADS [SECONDS]]\n"
                    "       sgemm_peak --ce-rows V1\n"
                    "       sgemm_peak --isa\n");
    return 64;
}

int main(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--isa")) {
        printf("%s\n", sq_isa_name(sq_isa_detect()));
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "--ce-rows")) {
        int v1 = atoi(argv[2]);
        if (v1 < 1)
            return usage();
        printf("%d\n", sq_ce_chunk(INT_MAX, v1));
        return 0;
    }
    int rowwise = argc > 1 && !strncmp(argv[1], "--rowwise", 9);
    sq_isa isa = sq_isa_detect();
    if (rowwise && argv[1][9]) {
        const char *want = argv[1][9] == '=' ? argv[1] + 10 : "";
        if (!strcmp(want, "avx512f"))
            isa = SQ_ISA_AVX512;
        else if (!strcmp(want, "avx2"))
            isa = SQ_ISA_AVX2;
        else if (!strcmp(want, "x86-64"))
            isa = SQ_ISA_BASE;
        else
            return usage();
        isa = sq_isa_clamp(isa);
    }
    if (rowwise) { /* the same argument positions, with N N for TA TB */
        argv++;
        argc--;
        if (argc < 4 || argc > 6)
            return usage();
    }
    if (argc < 4 || argc > 8)
        return usage();
    int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), at = rowwise ? 4 : 6;
    int ta = !rowwise && argc > 4 && argv[4][0] == 'T';
    int tb = rowwise || (argc > 5 && argv[5][0] == 'T');
    int threads = argc > at ? atoi(argv[at]) : 1;
    double budget = argc > at + 1 ? atof(argv[at + 1]) : 2;
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
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = threads;
    cx.rowwise = 1;
/* one call of what is timed: the engine's kernel or OpenBLAS's */
#define CALL()                                                                  \
    do {                                                                        \
        if (rowwise)                                                            \
            sq_rowwise_linear_isa(&cx, isa, c, a, b, NULL, M, K, N);            \
        else                                                                    \
            cblas_sgemm(CblasRowMajor, opa, opb, M, N, K, 1, a, lda, b, ldb, 0, \
                        c, N);                                                  \
    } while (0)
    CALL();
    double flop = 2.0 * M * N * K, t_end = now() + budget;
    int calls = 0;
    while (calls < MAXCALLS && (calls < 3 || now() < t_end)) {
        double t0 = now();
        CALL();
        double dt = now() - t0;
        gf[calls++] = flop / (dt > 0 ? dt : 1e-9) / 1e9;
    }
    qsort(gf, (size_t)calls, sizeof *gf, cmp);
    if (rowwise)
        printf("%.2f %.2f %s\n", gf[calls - 1], gf[calls / 2], sq_isa_name(isa));
    else
        printf("%.2f %.2f\n", gf[calls - 1], gf[calls / 2]);
    free(a);
    free(b);
    free(c);
    free(gf);
    return 0;
}
