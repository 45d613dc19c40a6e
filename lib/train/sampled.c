/* sampled.c - the bias-variance corrected sampled metrics (sampled.h). */
#include "sampled.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* LAPACK's Cholesky solve, from OpenBLAS (no LAPACKE there; the hidden
 * length of the one-character uplo is not passed, the usual C call of
 * LAPACK: it reads one character) */
void dposv_(const char *uplo, const int *n, const int *nrhs, double *a, const int *lda,
            double *b, const int *ldb, int *info);

static double lchoose(double n, double k)
{
    return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0);
}

double sq_bv_pmf(uint32_t n_items, uint32_t m, uint32_t R, uint32_t r)
{
    double N = n_items, k = (double)r - 1.0;
    if (r < 1 || R < 1 || R > n_items || k > R - 1.0 || m - k > N - R || k > m)
        return 0.0;
    return exp(lchoose(R - 1.0, k) + lchoose(N - R, m - k) - lchoose(N - 1.0, m));
}

/* Row R of A, a[r - 1] for r = 1..m+1: the pmf at its mode from lgamma,
 * the rest by the ratio P(k+1)/P(k) = (R-1-k)(m-k) / ((k+1)(N-R-m+k+1))
 * walking out both ways: one lgamma triple a row instead of m + 1 (a
 * million items, 100 negatives: 2.8 s instead of 21 s on the AMD EPYC
 * of the shared build machine); the sum is renormalised to 1. */
static void pmf_row(uint32_t n_items, uint32_t m, uint32_t R, double *a)
{
    double N = n_items, K = R - 1.0;
    int lo = (double)m > N - R ? (int)(m - (n_items - R)) : 0;
    int hi = (double)m < K ? (int)m : (int)K;
    for (uint32_t r = 0; r <= m; r++)
        a[r] = 0.0;
    int mode = (int)floor(((double)m + 1.0) * (K + 1.0) / (N + 1.0));
    mode = mode < lo ? lo : mode > hi ? hi : mode;
    a[mode] = sq_bv_pmf(n_items, m, R, (uint32_t)mode + 1);
    double s = a[mode];
    for (int k = mode; k < hi; k++) {
        a[k + 1] = a[k] * (K - k) * ((double)m - k) / ((k + 1.0) * (N - R - m + k + 1.0));
        s += a[k + 1];
    }
    for (int k = mode; k > lo; k--) {
        a[k - 1] = a[k] * k * (N - R - m + k) / ((K - k + 1.0) * ((double)m - k + 1.0));
        s += a[k - 1];
    }
    for (int k = lo; k <= hi && s > 0; k++)
        a[k] /= s;
}

/* Rows of A at a time: A^T A and A^T M are summed block by block. */
enum { BLOCK = 2048 };

int sq_bv_weights(const sq_metrics *mt, uint32_t n_items, uint32_t m, double gamma, double *x,
                  sq_err *e)
{
    if (m < 1 || (uint64_t)m + 1 >= n_items || !(gamma > 0.0 && gamma <= 1.0))
        return sq_fail(e, SQ_EX_SOFTWARE, "sq_bv_weights: m %u, N %u, gamma %g", m, n_items,
                       gamma);
    int nr = (int)m + 1, nv = sq_metrics_nv(mt);
    double *g = calloc((size_t)nr * (size_t)nr, sizeof *g);
    double *c = calloc((size_t)nr, sizeof *c);
    double *a = malloc((size_t)BLOCK * (size_t)nr * sizeof *a);
    double *mv = malloc((size_t)BLOCK * (size_t)nv * sizeof *mv);
    if (!g || !c || !a || !mv) {
        free(g), free(c), free(a), free(mv);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the correction of %u negatives", m);
    }
    memset(x, 0, (size_t)nr * (size_t)nv * sizeof *x);
    sq_metrics_opts plain = {0};
    for (uint32_t R0 = 1; R0 <= n_items; R0 += BLOCK) {
        int rows = n_items - R0 + 1 < BLOCK ? (int)(n_items - R0 + 1) : BLOCK;
        for (int i = 0; i < rows; i++) {
            uint32_t R = R0 + (uint32_t)i;
            pmf_row(n_items, m, R, a + (size_t)i * nr);
            for (int r = 0; r < nr; r++)
                c[r] += a[(size_t)i * nr + r];
            sq_rank_rec full = {0, R, n_items, 0};
            sq_metrics_values(mt, &plain, &full, mv + (size_t)i * nv);
        }
        /* g += (1 - gamma) A^T A (upper triangle, row-major), x += A^T M */
        cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, nr, rows, 1.0 - gamma, a, nr, 1.0, g,
                    nr);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, nr, nv, rows, 1.0, a, nr, mv, nv,
                    1.0, x, nv);
    }
    for (int r = 0; r < nr; r++)
        g[(size_t)r * nr + r] += gamma * c[r];
    /* row-major upper = column-major lower; x row-major [nr][nv] is the
     * column-major nv x nr transpose: solve for the transpose's columns */
    double *bt = malloc((size_t)nr * (size_t)nv * sizeof *bt);
    int info = 0, n = nr, nrhs = nv;
    if (bt) {
        for (int r = 0; r < nr; r++)
            for (int v = 0; v < nv; v++)
                bt[(size_t)v * nr + r] = x[(size_t)r * nv + v];
        dposv_("L", &n, &nrhs, g, &n, bt, &n, &info);
        for (int r = 0; r < nr && info == 0; r++)
            for (int v = 0; v < nv; v++)
                x[(size_t)r * nv + v] = bt[(size_t)v * nr + r];
    }
    free(g), free(c), free(a), free(mv), free(bt);
    if (!bt)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the correction of %u negatives", m);
    if (info != 0)
        return sq_fail(e, SQ_EX_SOFTWARE, "the correction of %u negatives in %u items: "
                       "LAPACK dposv info %d (gamma too small?)", m, n_items, info);
    return SQ_OK;
}
