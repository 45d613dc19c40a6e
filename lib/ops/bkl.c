/* bkl.c - the bidirectional KL term of two views (formulas: bkl.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * bkl_f64.o (see real.h). Sums over the support run in double (in item
 * order), per pair; the full mode parallelises over the pairs of a chunk
 * and reduces in pair order, so results are bitwise the same for any
 * thread count. No BLAS call inside a parallel region (ops.c). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "bkl.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <math.h>
#include <string.h>

#if !SQ_REAL_IS_F64
size_t sq_bkl_scratch_size(int chunk, int V1, int C)
{
    /* logits/dlogits [2 chunk, V1], gathered h [2 chunk, C], its gradient
     * [2 chunk, C], per-pair loss [chunk] */
    return (size_t)chunk * (2 * (size_t)V1 + 4 * (size_t)C + 1);
}
#endif

/* Max-shifted sums over one pair's support: za = sum e^(a - ma),
 * wa = sum e^(a - ma) (a - b), zb, wb the same for b with b - a. */
typedef struct {
    double ma, mb, za, zb, wa, wb;
} bkl_sums;

/* What the gradient of a pair needs. */
typedef struct {
    double lza, lzb;  /* log-normalisers (log sum exp) of the two views */
    double kpq, kqp;  /* KL(P||Q), KL(Q||P) */
    double d;         /* KL(P||Q) + KL(Q||P) */
} bkl_stats;

static inline void bkl_add(bkl_sums *s, double ea, double eb, double delta)
{
    s->za += ea;
    s->zb += eb;
    s->wa += ea * delta;
    s->wb -= eb * delta;
}

/* The same with the max found on the way (the sampled support is not
 * stored): a new max rescales what was summed so far. */
static inline void bkl_add_online(bkl_sums *s, double a, double b)
{
    if (a > s->ma) {
        double f = exp(s->ma - a);
        s->za *= f;
        s->wa *= f;
        s->ma = a;
    }
    if (b > s->mb) {
        double f = exp(s->mb - b);
        s->zb *= f;
        s->wb *= f;
        s->mb = b;
    }
    bkl_add(s, exp(a - s->ma), exp(b - s->mb), a - b);
}

static bkl_stats bkl_finish(const bkl_sums *s)
{
    bkl_stats st;
    st.lza = s->ma + log(s->za);
    st.lzb = s->mb + log(s->zb);
    double epa = s->wa / s->za, eqb = s->wb / s->zb; /* E_P[a - b], E_Q[b - a] */
    st.kpq = epa - (st.lza - st.lzb);
    st.kqp = eqb + (st.lza - st.lzb);
    st.d = epa + eqb; /* the normalisers cancel: 0 for identical views */
    return st;
}

/* g d(KL(P||Q) + KL(Q||P)) / d a_k and / d b_k at logits a, b of item k.
 * lp - lq is taken in double from the logits, so that identical views give
 * exactly 0 and float keeps the small differences. */
static inline void R(bkl_dlogit)(real *da, real *db, real a, real b, const bkl_stats *st,
                                 real g)
{
    double lp = (double)a - st->lza, lq = (double)b - st->lzb;
    real p = r_exp((real)lp), q = r_exp((real)lq), d = (real)(lp - lq);
    *da = g * (p * (d - (real)st->kpq) + (p - q));
    *db = g * (q * (-d - (real)st->kqp) + (q - p));
}

/* One pair of logit rows over items 1..V1-1: returns KL(P||Q) + KL(Q||P)
 * and, when grad, overwrites the rows with g times its gradient (item 0,
 * out of the softmax: 0). */
static double R(bkl_rows)(real *a, real *b, int V1, real g, int grad)
{
    real ma = a[1], mb = b[1];
    for (int j = 2; j < V1; j++) {
        if (a[j] > ma)
            ma = a[j];
        if (b[j] > mb)
            mb = b[j];
    }
    bkl_sums s = {ma, mb, 0, 0, 0, 0};
    for (int j = 1; j < V1; j++)
        bkl_add(&s, r_exp(a[j] - ma), r_exp(b[j] - mb), (double)a[j] - b[j]);
    bkl_stats st = bkl_finish(&s);
    if (grad) {
        a[0] = b[0] = 0;
        for (int j = 1; j < V1; j++)
            R(bkl_dlogit)(a + j, b + j, a[j], b[j], &st, g);
    }
    return st.d;
}

/* Full mode: chunks of m pairs, one GEMM for their 2m rows (view a rows
 * 0..m-1, view b rows m..2m-1), as sq_ce_full. Returns the sum of the
 * pairs' KL(P||Q) + KL(Q||P). */
static double R(bkl_full)(const sq_ctx *cx, real *dh, real *dE, real *scratch, const real *h,
                          const real *E, const int *ra, const int *rb, int n, int C, int V1,
                          int chunk, real g, int grad)
{
    real *logits = scratch;                        /* [2 chunk, V1] */
    real *hc = logits + 2 * (size_t)chunk * V1;    /* [2 chunk, C] */
    real *dhc = hc + 2 * (size_t)chunk * C;        /* [2 chunk, C] */
    real *rowloss = dhc + 2 * (size_t)chunk * C;   /* [chunk] */
    double total = 0;
    for (int e0 = 0; e0 < n; e0 += chunk) {
        int m = n - e0 < chunk ? n - e0 : chunk; /* pairs e0 .. e0+m-1 */
        for (int r = 0; r < m; r++) {
            memcpy(hc + (size_t)r * C, h + (size_t)ra[e0 + r] * C, (size_t)C * sizeof *hc);
            memcpy(hc + (size_t)(m + r) * C, h + (size_t)rb[e0 + r] * C,
                   (size_t)C * sizeof *hc);
        }
        /* logits[2m, V1] = hc[2m, C] E[V1, C]^T */
        r_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, 2 * m, V1, C,
               1, hc, C, E, C, 0, logits, V1);
        SQ_PAR_FOR(int, r, m, 1, {
            rowloss[r] = (real)R(bkl_rows)(logits + (size_t)r * V1,
                                           logits + (size_t)(m + r) * V1, V1, g, grad);
        });
        for (int r = 0; r < m; r++) /* fixed order */
            total += rowloss[r];
        if (!grad)
            continue;
        /* dhc[2m, C] = dlogits[2m, V1] E[V1, C] */
        r_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, 2 * m, C, V1,
               1, logits, V1, E, C, 0, dhc, C);
        /* dE[V1, C] += dlogits^T[V1, 2m] hc[2m, C] */
        r_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, V1, C, 2 * m,
               1, logits, V1, hc, C, 1, dE, C);
        /* back to the rows of h in dhc's order, view a's rows then view
         * b's (rows may be shared): the GPU's buckets add in that order */
        for (int r = 0; r < m; r++)
            sq_axpy(dh + (size_t)ra[e0 + r] * C, 1, dhc + (size_t)r * C, C);
        for (int r = 0; r < m; r++)
            sq_axpy(dh + (size_t)rb[e0 + r] * C, 1, dhc + (size_t)(m + r) * C, C);
    }
    return total;
}

/* Sampled mode: two sweeps of dot products per pair (the sums, then the
 * gradient), sequential as sq_bce_sampled: the rows of E that pairs share
 * take their sums in pair order. Returns the sum as bkl_full. */
static double R(bkl_sampled)(real *dh, real *dE, const real *h, const real *E, const int *ra,
                             const int *rb, const int *cand, int S, int n, int C, real g,
                             int grad)
{
    double total = 0;
    for (int i = 0; i < n; i++) {
        const real *ha = h + (size_t)ra[i] * C, *hb = h + (size_t)rb[i] * C;
        const int *ci = cand + (size_t)i * S;
        bkl_sums s = {-HUGE_VAL, -HUGE_VAL, 0, 0, 0, 0};
        for (int k = 0; k < S; k++) {
            if (!ci[k])
                continue;
            const real *e = E + (size_t)ci[k] * C;
            bkl_add_online(&s, sq_dot(ha, e, C), sq_dot(hb, e, C));
        }
        bkl_stats st = bkl_finish(&s);
        total += st.d;
        if (!grad)
            continue;
        real *dha = dh + (size_t)ra[i] * C, *dhb = dh + (size_t)rb[i] * C;
        for (int k = 0; k < S; k++) {
            if (!ci[k])
                continue;
            const real *e = E + (size_t)ci[k] * C;
            real *de = dE + (size_t)ci[k] * C;
            real da, db;
            R(bkl_dlogit)(&da, &db, sq_dot(ha, e, C), sq_dot(hb, e, C), &st, g);
            for (int c = 0; c < C; c++) {
                dha[c] += da * e[c];
                dhb[c] += db * e[c];
                de[c] += da * ha[c] + db * hb[c];
            }
        }
    }
    return total;
}

double R(sq_bkl)(const sq_ctx *cx, real *dh, real *dE, real *scratch, const real *h,
                 const real *E, const int *ra, const int *rb, const int *cand, int S,
                 int n, int C, int V1, int chunk, real dloss)
{
    SQ_ON_GPU_RET(cx, bkl, (dh, dE, scratch, h, E, ra, rb, cand, S, n, C, V1, chunk, dloss));
    if (n <= 0)
        return 0;
    int grad = dh && dE;
    /* loss = (1/n) sum_i D_i / 2, D_i = KL(P||Q) + KL(Q||P) */
    real g = dloss / (real)(2 * n);
    double total = cand ? R(bkl_sampled)(dh, dE, h, E, ra, rb, cand, S, n, C, g, grad)
                        : R(bkl_full)(cx, dh, dE, scratch, h, E, ra, rb, n, C, V1, chunk, g,
                                      grad);
    return 0.5 * total / n;
}
