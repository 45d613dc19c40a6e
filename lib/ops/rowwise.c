/* rowwise.c - the batch-invariant linear layer (rowwise.h): tiles of
 * SQ_ROWS rows x SQ_COLS outputs, each output summed over the channels in
 * order. Compiled as float and as double (real.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "rowwise.h"
#include "real.h"
#include "vec.h"

#include <omp.h>
#include <stdlib.h>
#include <string.h>

#define SQ_ROWS 8    /* rows scored together (the tile names 8) */
#define SQ_COLS 16   /* outputs scored together: one vector */
#define SQ_RBLK 256  /* rows per task */
#define SQ_CBLK 256  /* outputs per task (the copy of w: SQ_CBLK x C) */

/* Sixteen reals, element by element (GCC/Clang vector extension): one
 * AVX-512 register of floats, two AVX ones or four SSE ones, as the clone
 * the processor gets (vec.h) compiles it. Only ever a local. */
typedef real R(sq_vrow) __attribute__((vector_size(SQ_COLS * sizeof(real))));

/* o[r][j] = x[r] . wt[., j] (+ b[j]) for SQ_ROWS rows and SQ_COLS outputs
 * of the transposed block wt (row c at wt + c * ld), j < ncols: each the
 * sum over c = 0 .. C-1 of a product then an add, then the bias. Rows r >=
 * nrows are computed (x repeats a row) and dropped. */
SQ_VEC static void R(row_tile)(const real *const *x, const real *wt, int ld, int C,
                               const real *b, real *const *o, int nrows, int ncols)
{
    /* eight named accumulators: an array of them would live in memory */
    R(sq_vrow) a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0}, a4 = {0}, a5 = {0}, a6 = {0}, a7 = {0};
    const real *x0 = x[0], *x1 = x[1], *x2 = x[2], *x3 = x[3];
    const real *x4 = x[4], *x5 = x[5], *x6 = x[6], *x7 = x[7];
    for (int c = 0; c < C; c++) {
        R(sq_vrow) e;
        memcpy(&e, wt + (size_t)c * ld, sizeof e);
        a0 += x0[c] * e;
        a1 += x1[c] * e;
        a2 += x2[c] * e;
        a3 += x3[c] * e;
        a4 += x4[c] * e;
        a5 += x5[c] * e;
        a6 += x6[c] * e;
        a7 += x7[c] * e;
    }
    real bias[SQ_COLS] = {0}, tile[SQ_ROWS][SQ_COLS];
    if (b)
        memcpy(bias, b, (size_t)ncols * sizeof *bias);
    const R(sq_vrow) *acc[SQ_ROWS] = {&a0, &a1, &a2, &a3, &a4, &a5, &a6, &a7};
    for (int r = 0; r < SQ_ROWS; r++)
        memcpy(tile[r], acc[r], sizeof tile[r]);
    for (int r = 0; r < nrows; r++) {
        #pragma omp simd
        for (int j = 0; j < SQ_COLS; j++)
            tile[r][j] += bias[j];
        if (ncols == SQ_COLS) /* a constant size: a vector store, no call */
            memcpy(o[r], tile[r], sizeof tile[r]);
        else
            memcpy(o[r], tile[r], (size_t)ncols * sizeof *o[r]);
    }
}

/* One task: rows [t0, t1) x outputs [o0, o0 + n) through wt, the block
 * transposed (SQ_CBLK columns, zero past n). Rows missing from the last
 * group of SQ_ROWS repeat its first row. */
static void R(row_task)(real *out, const real *inp, const real *wt, const real *b, int t0,
                        int t1, int C, int OC, int o0, int n)
{
    for (int g = t0; g < t1; g += SQ_ROWS) {
        const real *xr[SQ_ROWS];
        real *orow[SQ_ROWS];
        int nrows = t1 - g < SQ_ROWS ? t1 - g : SQ_ROWS;
        for (int r = 0; r < SQ_ROWS; r++) {
            int t = g + (r < nrows ? r : 0);
            xr[r] = inp + (size_t)t * C;
            orow[r] = out + (size_t)t * OC + o0;
        }
        for (int j0 = 0; j0 < n; j0 += SQ_COLS) {
            real *oj[SQ_ROWS];
            for (int r = 0; r < SQ_ROWS; r++)
                oj[r] = orow[r] + j0;
            R(row_tile)(xr, wt + j0, SQ_CBLK, C, b ? b + o0 + j0 : NULL, oj, nrows,
                        n - j0 < SQ_COLS ? n - j0 : SQ_COLS);
        }
    }
}

/* The same sums without the copy of w (no memory for it): one element at
 * a time, in the same order. */
static void R(row_plain)(const sq_ctx *cx, real *out, const real *inp, const real *w,
                         const real *b, int T, int C, int OC)
{
    SQ_PAR_FOR(int, t, T, 1, {
        for (int o = 0; o < OC; o++) {
            real s = 0;
            for (int c = 0; c < C; c++)
                s += inp[(size_t)t * C + c] * w[(size_t)o * C + c];
            out[(size_t)t * OC + o] = b ? s + b[o] : s + (real)0;
        }
    });
}

void R(sq_rowwise_linear)(const sq_ctx *cx, real *out, const real *inp, const real *w,
                          const real *b, int T, int C, int OC)
{
    if (T <= 0 || OC <= 0)
        return;
    int n_cblk = (OC + SQ_CBLK - 1) / SQ_CBLK, n_rblk = (T + SQ_RBLK - 1) / SQ_RBLK;
    int nt = sq_ctx_threads(cx);
    real *wt_all = malloc((size_t)nt * C * SQ_CBLK * sizeof *wt_all);
    if (!wt_all) {
        R(row_plain)(cx, out, inp, w, b, T, C, OC);
        return;
    }
    /* tasks in output-block-major order: a thread's copy of a block of w
     * serves the row blocks that follow it */
    #pragma omp parallel num_threads(nt)
    {
        real *wt = wt_all + (size_t)omp_get_thread_num() * C * SQ_CBLK;
        int have = -1;
        #pragma omp for schedule(dynamic, 1)
        for (long k = 0; k < (long)n_cblk * n_rblk; k++) {
            int kb = (int)(k / n_rblk), kr = (int)(k % n_rblk);
            int o0 = kb * SQ_CBLK, n = OC - o0 < SQ_CBLK ? OC - o0 : SQ_CBLK;
            if (kb != have) {
                for (int c = 0; c < C; c++)
                    for (int j = 0; j < SQ_CBLK; j++)
                        wt[(size_t)c * SQ_CBLK + j] = j < n ? w[(size_t)(o0 + j) * C + c] : 0;
                have = kb;
            }
            int t0 = kr * SQ_RBLK, t1 = t0 + SQ_RBLK < T ? t0 + SQ_RBLK : T;
            R(row_task)(out, inp, wt, b, t0, t1, C, OC, o0, n);
        }
    }
    free(wt_all);
}
