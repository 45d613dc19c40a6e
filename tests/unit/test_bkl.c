/* Unit tests for lib/ops/bkl.c (sq_bkl) and sq_ce_sampled (lib/ops/ops.c).
 *
 * The losses against naive long-double references (tests/ref); the
 * gradients of the _f64 build against finite differences (gradcheck.h),
 * starting from non-zero gradient buffers (backward adds); the float build
 * against the double one. Set SQ_TEST_VERBOSE=1 to print the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bkl.h"
#include "gradcheck.h"
#include "ops.h"
#include "ref_ops.h"
#include "rng.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define TRIALS 4      /* random shapes per mode */

static int rand_int(sq_rng *r, int lo, int hi) /* inclusive */
{
    return lo + (int)sq_rng_below(r, (uint64_t)(hi - lo + 1));
}

static double max_abs(const double *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs(x[i]));
    return m;
}

static double max_absf(const float *x, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, fabs((double)x[i]));
    return m;
}

static int all_finite(const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i]))
            return 0;
    return 1;
}

#define CHECK_WORST(err, tol, worst) do { \
    double e_ = (err); \
    CHECK(e_ < (tol)); \
    if (!(e_ <= (worst))) (worst) = e_; \
    } while (0)

/* ------------------------------------------------------------------------ */
/* sq_bkl                                                                   */

typedef struct {
    int n, T, C, V1, chunk, S;
    int *ra, *rb, *cand; /* cand NULL: full mode */
    double *h, *E, *scratch;
} bkl_ctx;

static double bkl_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    bkl_ctx *c = p;
    return sq_bkl_f64(cx, NULL, NULL, c->scratch, c->h, c->E, c->ra, c->rb, c->cand, c->S,
                      c->n, c->C, c->V1, c->chunk, 1);
}

/* A random problem: pairs on random distinct rows of h among unrelated
 * ones (T = 3n + 1 rows), one row shared by two pairs when share; the
 * support of a sampled pair has zeros but never only zeros. */
static void bkl_setup(sq_rng *r, bkl_ctx *c, int sampled, int share)
{
    c->T = 3 * c->n + 1;
    int *perm = malloc((size_t)c->T * sizeof *perm);
    for (int i = 0; i < c->T; i++)
        perm[i] = i;
    for (int i = c->T - 1; i > 0; i--) {
        int j = rand_int(r, 0, i), x = perm[i];
        perm[i] = perm[j], perm[j] = x;
    }
    c->ra = malloc((size_t)c->n * sizeof *c->ra);
    c->rb = malloc((size_t)c->n * sizeof *c->rb);
    for (int i = 0; i < c->n; i++)
        c->ra[i] = perm[2 * i], c->rb[i] = perm[2 * i + 1];
    if (share && c->n > 1)
        c->ra[1] = c->rb[0];
    free(perm);
    c->cand = NULL;
    if (sampled) {
        c->cand = malloc((size_t)c->n * c->S * sizeof *c->cand);
        for (int i = 0; i < c->n * c->S; i++)
            c->cand[i] = i % c->S && rand_int(r, 0, 3) == 0 ? 0 : rand_int(r, 1, c->V1 - 1);
    }
    c->h = gc_normal(r, (size_t)c->T * c->C, 1);
    c->E = gc_normal(r, (size_t)c->V1 * c->C, 1);
    for (int d = 0; d < c->C; d++)
        c->E[d] = 0; /* padding row, as the embedding keeps it */
    c->scratch = gc_zeros(sq_bkl_scratch_size(c->chunk, c->V1, c->C));
}

static void bkl_free(bkl_ctx *c)
{
    free(c->ra); free(c->rb); free(c->cand); free(c->h); free(c->E); free(c->scratch);
}

/* Float build: loss and gradients (from zero) with dloss. */
static double bkl_float(const bkl_ctx *c, const int *ra, const int *rb, float *fdh, float *fdE,
                        float dloss, int threads)
{
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = threads;
    size_t hn = (size_t)c->T * c->C, en = (size_t)c->V1 * c->C;
    float *fh = gc_to_float(c->h, hn), *fE = gc_to_float(c->E, en);
    float *fs = calloc(sq_bkl_scratch_size(c->chunk, c->V1, c->C), sizeof *fs);
    double l = sq_bkl(&cx, fdh, fdE, fs, fh, fE, ra, rb, c->cand, c->S, c->n, c->C, c->V1,
                      c->chunk, dloss);
    free(fh); free(fE); free(fs);
    return l;
}

static void bkl_trials(unit_ctx *t, int sampled)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 40 + (uint64_t)sampled, 0);
    double gworst = 0, fworst = 0, lworst = 0, sworst = 0;
    for (int trial = 0; trial < TRIALS; trial++) {
        bkl_ctx c = {0};
        c.n = rand_int(&r, 3, 7);
        c.C = trial == 0 ? 5 : rand_int(&r, 1, 6);
        c.V1 = rand_int(&r, 5, 14);
        c.chunk = rand_int(&r, 1, c.n - 1); /* several chunks */
        c.S = rand_int(&r, 1, 6); /* S = 1: single-item supports, D = 0 */
        bkl_setup(&r, &c, sampled, trial % 2);
        size_t hn = (size_t)c.T * c.C, en = (size_t)c.V1 * c.C;
        /* backward adds: start from non-zero gradients */
        double *dh0 = gc_normal(&r, hn, 1), *dE0 = gc_normal(&r, en, 1);
        double *dh = gc_zeros(hn), *dE = gc_zeros(en);
        memcpy(dh, dh0, hn * sizeof *dh);
        memcpy(dE, dE0, en * sizeof *dE);
        double loss = sq_bkl_f64(cx, dh, dE, c.scratch, c.h, c.E, c.ra, c.rb, c.cand, c.S,
                                 c.n, c.C, c.V1, c.chunk, 1);
        for (size_t i = 0; i < hn; i++)
            dh[i] -= dh0[i];
        for (size_t i = 0; i < en; i++)
            dE[i] -= dE0[i];
        double ref = ref_bkl(c.h, c.E, c.ra, c.rb, c.cand, c.S, c.n, c.C, c.V1);
        CHECK(loss >= 0);
        lworst = fmax(lworst, fabs(loss - ref) / fmax(ref, 1e-300));
        CHECK_NEAR(loss, ref, 1e-12);
        CHECK_WORST(gc_check(bkl_obj, &c, c.h, dh, hn), GRAD_TOL, gworst);
        CHECK_WORST(gc_check(bkl_obj, &c, c.E, dE, en), GRAD_TOL, gworst);
        CHECK(max_abs(dE, (size_t)c.C) == 0); /* padding item: no gradient */
        /* symmetric: swapping the views changes neither loss nor gradients */
        double *sdh = gc_zeros(hn), *sdE = gc_zeros(en);
        double sloss = sq_bkl_f64(cx, sdh, sdE, c.scratch, c.h, c.E, c.rb, c.ra, c.cand, c.S,
                                  c.n, c.C, c.V1, c.chunk, 1);
        sworst = fmax(sworst, fabs(sloss - loss) / fmax(loss, 1e-300));
        CHECK_NEAR(sloss, loss, 1e-14);
        CHECK_WORST(gc_rel_diff_f64(sdh, dh, hn), 1e-12, sworst);
        CHECK_WORST(gc_rel_diff_f64(sdE, dE, en), 1e-12, sworst);
        /* the float build; dloss scales the gradients */
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        double floss = bkl_float(&c, c.ra, c.rb, fdh, fdE, 2.0f, 0);
        CHECK_WORST(fabs(floss - loss) / fmax(loss, 1e-3), F32_TOL, fworst);
        for (size_t i = 0; i < hn; i++)
            dh[i] *= 2;
        for (size_t i = 0; i < en; i++)
            dE[i] *= 2;
        CHECK_WORST(gc_rel_diff(fdh, dh, hn), F32_TOL, fworst);
        CHECK_WORST(gc_rel_diff(fdE, dE, en), F32_TOL, fworst);
        free(fdh); free(fdE); free(sdh); free(sdE);
        free(dh0); free(dE0); free(dh); free(dE);
        bkl_free(&c);
    }
    gc_note(t->name, "grad h, E", gworst);
    gc_note(t->name, "loss vs long double", lworst);
    gc_note(t->name, "views swapped", sworst);
    gc_note(t->name, "float vs double", fworst);
}

UNIT_TEST(test_bkl_full)
{
    bkl_trials(t, 0);
}

UNIT_TEST(test_bkl_sampled)
{
    bkl_trials(t, 1);
}

/* Blin: the term vanishes when the two views are identical. */
UNIT_TEST(test_bkl_identical_views)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 42, 0);
    for (int sampled = 0; sampled < 2; sampled++) {
        bkl_ctx c = {0};
        c.n = 9, c.C = 7, c.V1 = 23, c.chunk = 4, c.S = 5;
        bkl_setup(&r, &c, sampled, 1);
        /* in pair order: the shared row ra[1] = rb[0] is set before it is read */
        for (int i = 0; i < c.n; i++)
            memcpy(c.h + (size_t)c.rb[i] * c.C, c.h + (size_t)c.ra[i] * c.C,
                   (size_t)c.C * sizeof *c.h);
        size_t hn = (size_t)c.T * c.C, en = (size_t)c.V1 * c.C;
        double *dh = gc_zeros(hn), *dE = gc_zeros(en);
        double loss = sq_bkl_f64(cx, dh, dE, c.scratch, c.h, c.E, c.ra, c.rb, c.cand, c.S,
                                 c.n, c.C, c.V1, c.chunk, 1);
        CHECK(fabs(loss) <= 1e-12);
        CHECK(max_abs(dh, hn) <= 1e-12);
        CHECK(max_abs(dE, en) <= 1e-12);
        gc_note(t->name, sampled ? "sampled |loss|" : "full |loss|", fabs(loss));
        gc_note(t->name, sampled ? "sampled max |grad|" : "full max |grad|",
                fmax(max_abs(dh, hn), max_abs(dE, en)));
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        double floss = bkl_float(&c, c.ra, c.rb, fdh, fdE, 1.0f, 0);
        CHECK(fabs(floss) <= 1e-6);
        CHECK(max_absf(fdh, hn) <= 1e-6);
        CHECK(max_absf(fdE, en) <= 1e-6);
        free(fdh); free(fdE); free(dh); free(dE);
        bkl_free(&c);
    }
}

UNIT_TEST(test_bkl_threads)
{
    sq_rng r;
    sq_rng_seed(&r, 43, 0);
    for (int sampled = 0; sampled < 2; sampled++) {
        bkl_ctx c = {0};
        c.n = 61, c.C = 24, c.V1 = 301, c.chunk = 16, c.S = 33;
        bkl_setup(&r, &c, sampled, 1);
        size_t hn = (size_t)c.T * c.C, en = (size_t)c.V1 * c.C;
        float *dh1 = calloc(hn, sizeof *dh1), *dE1 = calloc(en, sizeof *dE1);
        float *dh2 = calloc(hn, sizeof *dh2), *dE2 = calloc(en, sizeof *dE2);
        double l1 = bkl_float(&c, c.ra, c.rb, dh1, dE1, 1.0f, 1);
        double l2 = bkl_float(&c, c.ra, c.rb, dh2, dE2, 1.0f, 2);
        CHECK(memcmp(&l1, &l2, sizeof l1) == 0);
        CHECK(memcmp(dh1, dh2, hn * sizeof *dh1) == 0);
        CHECK(memcmp(dE1, dE2, en * sizeof *dE1) == 0);
        free(dh1); free(dE1); free(dh2); free(dE2);
        bkl_free(&c);
    }
}

/* Logits of magnitude 80..100 (e^100 overflows float): finite, and the
 * same as the long-double reference. */
UNIT_TEST(test_bkl_large_logits)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 44, 0);
    for (int sampled = 0; sampled < 2; sampled++) {
        bkl_ctx c = {0};
        c.n = 5, c.C = 2, c.V1 = 17, c.chunk = 2, c.S = 6;
        bkl_setup(&r, &c, sampled, 0);
        /* h[ra] = (1, 0), h[rb] = (0, 1): logits are E's columns, exactly,
         * multiples of 1/64 in +-[80, 100] (float holds them exactly) */
        memset(c.h, 0, (size_t)c.T * c.C * sizeof *c.h);
        for (int i = 0; i < c.n; i++) {
            c.h[(size_t)c.ra[i] * c.C] = 1;
            c.h[(size_t)c.rb[i] * c.C + 1] = 1;
        }
        for (int j = 1; j < c.V1; j++)
            for (int d = 0; d < c.C; d++) {
                double v = 80 + rand_int(&r, 0, 20 * 64) / 64.0;
                c.E[j * c.C + d] = rand_int(&r, 0, 1) ? v : -v;
            }
        size_t hn = (size_t)c.T * c.C, en = (size_t)c.V1 * c.C;
        double *dh = gc_zeros(hn), *dE = gc_zeros(en);
        double loss = sq_bkl_f64(cx, dh, dE, c.scratch, c.h, c.E, c.ra, c.rb, c.cand, c.S,
                                 c.n, c.C, c.V1, c.chunk, 1);
        double ref = ref_bkl(c.h, c.E, c.ra, c.rb, c.cand, c.S, c.n, c.C, c.V1);
        CHECK(isfinite(loss));
        CHECK_NEAR(loss, ref, 1e-12);
        CHECK(all_finite(dh, hn) && all_finite(dE, en));
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        double floss = bkl_float(&c, c.ra, c.rb, fdh, fdE, 1.0f, 0);
        CHECK(isfinite(floss));
        CHECK_NEAR(floss, loss, 1e-5);
        CHECK(gc_rel_diff(fdh, dh, hn) < F32_TOL);
        CHECK(gc_rel_diff(fdE, dE, en) < F32_TOL);
        gc_note(t->name, sampled ? "sampled loss" : "full loss", loss);
        gc_note(t->name, "float vs double", fabs(floss - loss) / loss);
        free(fdh); free(fdE); free(dh); free(dE);
        bkl_free(&c);
    }
}

/* ------------------------------------------------------------------------ */
/* sq_ce_sampled                                                            */

typedef struct {
    int n, K, C;
    const int *rows, *pos, *neg;
    double *h, *E;
} ces_ctx;

static double ces_obj(void *p)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    ces_ctx *c = p;
    int count;
    return sq_ce_sampled_f64(cx, NULL, NULL, c->h, c->E, c->rows, c->pos, c->neg, c->n, c->K,
                             c->C, 1, &count);
}

UNIT_TEST(test_ce_sampled)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 45, 0);
    double gworst = 0, fworst = 0, lworst = 0;
    for (int trial = 0; trial < TRIALS + 2; trial++) {
        int n = rand_int(&r, 3, 9), C = trial == 0 ? 5 : rand_int(&r, 1, 6), V1 = 12;
        int K = rand_int(&r, 1, 4), use_rows = trial % 2, T = use_rows ? 2 * n : n;
        int rows[32], pos[16], neg[16 * 4];
        for (int i = 0; i < n; i++) {
            rows[i] = 2 * i + 1; /* every other row: the rest unrelated */
            pos[i] = rand_int(&r, 1, V1 - 1);
            for (int k = 0; k < K; k++)
                neg[i * K + k] = rand_int(&r, 1, V1 - 1);
        }
        pos[1] = 0;     /* ignored entry */
        neg[2 * K] = 0; /* a missing negative */
        size_t hn = (size_t)T * C, en = (size_t)V1 * C;
        ces_ctx c = {n, K, C, use_rows ? rows : NULL, pos, neg, gc_normal(&r, hn, 1),
                     gc_normal(&r, en, 1)};
        double *dh0 = gc_normal(&r, hn, 1), *dE0 = gc_normal(&r, en, 1);
        double *dh = gc_zeros(hn), *dE = gc_zeros(en);
        memcpy(dh, dh0, hn * sizeof *dh);
        memcpy(dE, dE0, en * sizeof *dE);
        int count, ncount;
        double loss = sq_ce_sampled_f64(cx, dh, dE, c.h, c.E, c.rows, pos, neg, n, K, C, 1,
                                        &count);
        for (size_t i = 0; i < hn; i++)
            dh[i] -= dh0[i];
        for (size_t i = 0; i < en; i++)
            dE[i] -= dE0[i];
        double ref = ref_ce_sampled(c.h, c.E, c.rows, pos, neg, n, K, C, &ncount);
        CHECK_EQ(count, n - 1);
        CHECK_EQ(count, ncount);
        lworst = fmax(lworst, fabs(loss - ref) / ref);
        CHECK_NEAR(loss, ref, 1e-12);
        CHECK_WORST(gc_check(ces_obj, &c, c.h, dh, hn), GRAD_TOL, gworst);
        CHECK_WORST(gc_check(ces_obj, &c, c.E, dE, en), GRAD_TOL, gworst);
        /* the ignored entry's row gets nothing */
        int row1 = use_rows ? rows[1] : 1;
        CHECK(max_abs(dh + (size_t)row1 * C, (size_t)C) == 0);
        float *fh = gc_to_float(c.h, hn), *fE = gc_to_float(c.E, en);
        float *fdh = calloc(hn, sizeof *fdh), *fdE = calloc(en, sizeof *fdE);
        int fcount;
        double floss = sq_ce_sampled(cx, fdh, fdE, fh, fE, c.rows, pos, neg, n, K, C, 1.0f,
                                     &fcount);
        CHECK_EQ(fcount, count);
        CHECK_WORST(fabs(floss - loss) / loss, F32_TOL, fworst);
        CHECK_WORST(gc_rel_diff(fdh, dh, hn), F32_TOL, fworst);
        CHECK_WORST(gc_rel_diff(fdE, dE, en), F32_TOL, fworst);
        free(fh); free(fE); free(fdh); free(fdE);
        free(c.h); free(c.E); free(dh0); free(dE0); free(dh); free(dE);
    }
    /* nothing to score; huge scores stay finite */
    int zero[1] = {0}, p1[1] = {1}, n1[1] = {2}, count = -1;
    double h1[1] = {1000}, E1[3] = {0, 1, -1};
    CHECK(sq_ce_sampled_f64(cx, NULL, NULL, h1, E1, NULL, zero, n1, 1, 1, 1, 1, &count) == 0);
    CHECK_EQ(count, 0);
    double l = sq_ce_sampled_f64(cx, NULL, NULL, h1, E1, NULL, n1, p1, 1, 1, 1, 1, &count);
    CHECK(isfinite(l));
    CHECK_NEAR(l, 2000, 1e-12);
    gc_note(t->name, "grad h, E", gworst);
    gc_note(t->name, "loss vs long double", lworst);
    gc_note(t->name, "float vs double", fworst);
}

/* With every other item as a negative, the sampled softmax is the full one. */
UNIT_TEST(test_ce_sampled_is_full)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    sq_rng r;
    sq_rng_seed(&r, 46, 0);
    int n = 7, C = 5, V1 = 15, K = V1 - 2, chunk = 3;
    int rows[7], targets[7], neg[7 * 13];
    for (int i = 0; i < n; i++) {
        rows[i] = n - 1 - i;
        targets[i] = i == 2 ? 0 : rand_int(&r, 1, V1 - 1);
        for (int j = 1, k = 0; j < V1; j++)
            if (j != targets[i])
                neg[i * K + k++] = j;
        if (!targets[i])
            memset(neg + i * K, 0, (size_t)K * sizeof *neg);
    }
    size_t hn = (size_t)n * C, en = (size_t)V1 * C;
    double *h = gc_normal(&r, hn, 1), *E = gc_normal(&r, en, 1);
    double *dh = gc_zeros(hn), *dE = gc_zeros(en), *dhf = gc_zeros(hn), *dEf = gc_zeros(en);
    double *scratch = gc_zeros(sq_ce_scratch_size(chunk, V1, C));
    int count, fcount;
    double loss = sq_ce_sampled_f64(cx, dh, dE, h, E, rows, targets, neg, n, K, C, 1, &count);
    double full = sq_ce_full_f64(cx, dhf, dEf, scratch, h, E, rows, targets, n, C, V1, chunk, 1,
                                 &fcount);
    CHECK_EQ(count, fcount);
    CHECK_NEAR(loss, full, 1e-12);
    CHECK(gc_rel_diff_f64(dh, dhf, hn) < 1e-12);
    CHECK(gc_rel_diff_f64(dE, dEf, en) < 1e-12);
    gc_note(t->name, "loss vs sq_ce_full", fabs(loss - full) / full);
    gc_note(t->name, "grad vs sq_ce_full", fmax(gc_rel_diff_f64(dh, dhf, hn), gc_rel_diff_f64(dE, dEf, en)));
    free(h); free(E); free(dh); free(dE); free(dhf); free(dEf); free(scratch);
}
