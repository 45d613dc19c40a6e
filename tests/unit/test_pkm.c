/* Unit tests for lib/ops/pkm.c (product-key memory retrieval).
 *
 * The selection against a brute-force top-k over all n*n full keys (random
 * scores, and integer data full of ties: the tie-break of pkm.h); the
 * forward against a long-double reference; the gradients of the _f64 build
 * against finite differences with the selection held fixed (queries drawn
 * so that every top-k margin is far wider than what a step can move, and
 * every evaluation of the objective checked to select the same experts),
 * starting from non-zero gradient buffers (backward adds); the float build
 * against the double one; 1 and 2 threads bitwise; sq_pkm_count. Set
 * SQ_TEST_VERBOSE=1 to print the measured errors. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "pkm.h"
#include "rng.h"
#include "unit.h"

#define GRAD_TOL 1e-6 /* finite differences vs backward, double build */
#define F32_TOL 1e-5  /* float build vs double build, normwise */
#define MARGIN 0.02   /* top-k score gaps of the gradient problems */

#define CHECK_WORST(err, tol, worst) do { \
    double e_ = (err); \
    CHECK(e_ < (tol)); \
    if (!(e_ <= (worst))) (worst) = e_; \
    } while (0)

typedef struct {
    int B, n, d, k, weighted;
    double *q, *C1, *C2, *E, *W; /* W [B, k, d]: objective sum(out * W) */
    double *out, *cache, *scratch;
    int *idx, *ref;  /* ref: the selection the finite differences must keep */
    int changed;     /* objective evaluations that selected otherwise */
} pkm_ctx;

static size_t qn(const pkm_ctx *c) { return (size_t)c->B * c->d; }
static size_t cn(const pkm_ctx *c) { return (size_t)c->n * (c->d / 2); }
static size_t en(const pkm_ctx *c) { return (size_t)c->n * c->n * c->d; }
static size_t on(const pkm_ctx *c) { return (size_t)c->B * c->k * c->d; }
static size_t kn(const pkm_ctx *c) { return (size_t)c->B * c->k; }

static void pkm_alloc(pkm_ctx *c)
{
    c->out = gc_zeros(on(c));
    c->cache = gc_zeros(sq_pkm_cache_size(c->B, c->k));
    c->scratch = gc_zeros(sq_pkm_scratch_size(c->B, c->n, c->k));
    c->idx = calloc(kn(c), sizeof *c->idx);
    c->ref = calloc(kn(c), sizeof *c->ref);
}

static void pkm_free(pkm_ctx *c)
{
    free(c->q); free(c->C1); free(c->C2); free(c->E); free(c->W);
    free(c->out); free(c->cache); free(c->scratch); free(c->idx); free(c->ref);
}

static void pkm_fwd(pkm_ctx *c, int threads)
{
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = threads;
    sq_pkm_forward_f64(&cx, c->out, c->idx, c->cache, c->scratch, c->q, c->C1, c->C2, c->E,
                       c->B, c->n, c->d, c->k, c->weighted);
}

static double pkm_obj(void *p)
{
    pkm_ctx *c = p;
    pkm_fwd(c, 0);
    if (memcmp(c->idx, c->ref, kn(c) * sizeof *c->idx) != 0)
        c->changed++;
    return gc_dot(c->out, c->W, on(c));
}

/* Full-key score of expert (i, j) for query qb, in long double. */
static long double full_score(const pkm_ctx *c, const double *qb, int i, int j)
{
    int h = c->d / 2;
    long double s = 0;
    for (int x = 0; x < h; x++)
        s += (long double)qb[x] * c->C1[(size_t)i * h + x];
    for (int x = 0; x < h; x++)
        s += (long double)qb[h + x] * c->C2[(size_t)j * h + x];
    return s;
}

/* Brute force: the k best of all n*n experts of query b, (score desc,
 * index asc), into ix [k] and sc [k]. */
static void brute_select(const pkm_ctx *c, int b, int *ix, long double *sc)
{
    int N = c->n * c->n;
    long double *s = malloc((size_t)N * sizeof *s);
    char *taken = calloc((size_t)N, 1);
    for (int e = 0; e < N; e++)
        s[e] = full_score(c, c->q + (size_t)b * c->d, e / c->n, e % c->n);
    for (int m = 0; m < c->k; m++) {
        int best = -1;
        for (int e = 0; e < N; e++)
            if (!taken[e] && (best < 0 || s[e] > s[best]))
                best = e; /* ascending e: the first of equals wins */
        taken[best] = 1;
        ix[m] = best;
        sc[m] = s[best];
    }
    free(s);
    free(taken);
}

/* The reference forward in long double from the brute-force selection:
 * out, and the selection into ref. */
static void ref_forward(const pkm_ctx *c, double *out, int *ref, double *sc)
{
    long double *s = malloc((size_t)c->k * sizeof *s);
    for (int b = 0; b < c->B; b++) {
        int *ix = ref + (size_t)b * c->k;
        brute_select(c, b, ix, s);
        long double z = 0;
        for (int m = 0; m < c->k; m++)
            z += expl(s[m] - s[0]);
        for (int m = 0; m < c->k; m++) {
            long double w = c->weighted ? expl(s[m] - s[0]) / z : 1;
            sc[(size_t)b * c->k + m] = (double)s[m];
            for (int x = 0; x < c->d; x++)
                out[((size_t)b * c->k + m) * c->d + x] =
                    (double)(w * c->E[(size_t)ix[m] * c->d + x]);
        }
    }
    free(s);
}

static int cmp_desc(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}

/* Sorts v[0..len) descending; 1 when v[i] - v[i+1] > MARGIN for every i in
 * [from, to) with i + 1 < len. */
static int gaps_ok(double *v, int len, int from, int to)
{
    qsort(v, (size_t)len, sizeof *v, cmp_desc);
    for (int i = from; i < to && i + 1 < len; i++)
        if (!(v[i] - v[i + 1] > MARGIN))
            return 0;
    return 1;
}

/* 1 when query b's selection is safe from a finite-difference step: the
 * k-th and (k+1)-th sub-scores of each half, and the k+1 best full scores,
 * all at least MARGIN apart. */
static int margins_ok(const pkm_ctx *c, int b)
{
    int n = c->n, h = c->d / 2, k = c->k, ok;
    const double *qb = c->q + (size_t)b * c->d;
    double *v = malloc((size_t)n * n * sizeof *v);
    for (int i = 0; i < n; i++)
        v[i] = gc_dot(qb, c->C1 + (size_t)i * h, (size_t)h);
    ok = gaps_ok(v, n, k - 1, k);
    for (int j = 0; j < n; j++)
        v[j] = gc_dot(qb + h, c->C2 + (size_t)j * h, (size_t)h);
    ok = ok && gaps_ok(v, n, k - 1, k);
    for (int e = 0; e < n * n; e++)
        v[e] = (double)full_score(c, qb, e / n, e % n);
    ok = ok && gaps_ok(v, n * n, 0, k);
    free(v);
    return ok;
}

/* A random problem; margins: redraw each query until margins_ok. */
static int pkm_setup(sq_rng *r, pkm_ctx *c, int margins)
{
    c->C1 = gc_normal(r, cn(c), 1);
    c->C2 = gc_normal(r, cn(c), 1);
    c->E = gc_normal(r, en(c), 1);
    c->W = gc_normal(r, on(c), 1);
    c->q = gc_normal(r, qn(c), 1);
    pkm_alloc(c);
    for (int b = 0; margins && b < c->B; b++) {
        int tries = 0;
        while (!margins_ok(c, b)) {
            if (++tries > 100000)
                return 0;
            for (int x = 0; x < c->d; x++)
                c->q[(size_t)b * c->d + x] = sq_rng_normal(r);
        }
    }
    return 1;
}

/* Float build: forward and backward (gradients from zero) of c's problem. */
typedef struct {
    float *out, *cache, *dq, *dC1, *dC2, *dE;
    int *idx;
} pkm_fres;

static void pkm_float(const pkm_ctx *c, int threads, pkm_fres *f)
{
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = threads;
    float *fq = gc_to_float(c->q, qn(c)), *f1 = gc_to_float(c->C1, cn(c));
    float *f2 = gc_to_float(c->C2, cn(c)), *fE = gc_to_float(c->E, en(c));
    float *fW = gc_to_float(c->W, on(c));
    float *fs = calloc(sq_pkm_scratch_size(c->B, c->n, c->k), sizeof *fs);
    f->out = calloc(on(c), sizeof *f->out);
    f->cache = calloc(sq_pkm_cache_size(c->B, c->k), sizeof *f->cache);
    f->idx = calloc(kn(c), sizeof *f->idx);
    f->dq = calloc(qn(c), sizeof *f->dq);
    f->dC1 = calloc(cn(c), sizeof *f->dC1);
    f->dC2 = calloc(cn(c), sizeof *f->dC2);
    f->dE = calloc(en(c), sizeof *f->dE);
    sq_pkm_forward(&cx, f->out, f->idx, f->cache, fs, fq, f1, f2, fE, c->B, c->n, c->d, c->k,
                   c->weighted);
    sq_pkm_backward(&cx, f->dq, f->dC1, f->dC2, f->dE, fs, fW, fq, f1, f2, fE, f->idx,
                    f->cache, c->B, c->n, c->d, c->k, c->weighted);
    free(fq); free(f1); free(f2); free(fE); free(fW); free(fs);
}

static void pkm_ffree(pkm_fres *f)
{
    free(f->out); free(f->cache); free(f->dq); free(f->dC1); free(f->dC2); free(f->dE);
    free(f->idx);
}

/* ------------------------------------------------------------------------ */

/* Product keys select exactly the brute-force top-k of all n*n full keys,
 * sorted; the forward matches the long-double reference. */
UNIT_TEST(test_pkm_select)
{
    static const int shapes[][3] = { /* n, k, d */
        {1, 1, 2}, {5, 1, 4}, {5, 5, 6}, {8, 3, 10}, {16, 16, 8}, {24, 7, 34}, {12, 12, 2},
        {40, 8, 72},
    };
    sq_rng r;
    sq_rng_seed(&r, 60, 0);
    double sworst = 0, oworst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (int weighted = 0; weighted < 2; weighted++) {
            pkm_ctx c = {0};
            c.B = 6, c.n = shapes[s][0], c.k = shapes[s][1], c.d = shapes[s][2];
            c.weighted = weighted;
            CHECK(sq_pkm_shape_ok(c.n, c.d, c.k));
            pkm_setup(&r, &c, 0);
            double *out = gc_zeros(on(&c)), *sc = gc_zeros(kn(&c));
            ref_forward(&c, out, c.ref, sc);
            pkm_fwd(&c, 0);
            CHECK(memcmp(c.idx, c.ref, kn(&c) * sizeof *c.idx) == 0);
            CHECK_WORST(gc_rel_diff_f64(c.cache, sc, kn(&c)), 1e-12, sworst);
            CHECK_WORST(gc_rel_diff_f64(c.out, out, on(&c)), 1e-12, oworst);
            free(out);
            free(sc);
            pkm_free(&c);
        }
    gc_note(t->name, "scores vs brute force", sworst);
    gc_note(t->name, "out vs long double", oworst);
}

/* Integer data (sub-keys in {-1, 0, 1}: many equal scores, all sums
 * exact): ties go to the smaller index, as in the brute force, in both
 * builds. */
UNIT_TEST(test_pkm_ties)
{
    sq_rng r;
    sq_rng_seed(&r, 61, 0);
    for (int trial = 0; trial < 6; trial++) {
        pkm_ctx c = {0};
        c.B = 8, c.n = 3 + trial, c.k = 1 + trial % c.n, c.d = 2 * (1 + trial % 3);
        c.weighted = 1;
        pkm_setup(&r, &c, 0);
        for (size_t i = 0; i < cn(&c); i++) {
            c.C1[i] = (double)sq_rng_below(&r, 3) - 1;
            c.C2[i] = (double)sq_rng_below(&r, 3) - 1;
        }
        for (size_t i = 0; i < qn(&c); i++)
            c.q[i] = (double)sq_rng_below(&r, 3) - 1;
        double *out = gc_zeros(on(&c)), *sc = gc_zeros(kn(&c));
        ref_forward(&c, out, c.ref, sc);
        pkm_fwd(&c, 0);
        CHECK(memcmp(c.idx, c.ref, kn(&c) * sizeof *c.idx) == 0);
        CHECK(gc_rel_diff_f64(c.out, out, on(&c)) < 1e-12);
        /* the float build selects the same */
        pkm_fres f;
        pkm_float(&c, 0, &f);
        CHECK(memcmp(f.idx, c.ref, kn(&c) * sizeof *f.idx) == 0);
        pkm_ffree(&f);
        free(out);
        free(sc);
        pkm_free(&c);
    }
}

/* d = the gradient added to d0's copy (copy - d0, in place). */
static void sub_base(double *d, const double *d0, size_t n)
{
    for (size_t i = 0; i < n; i++)
        d[i] -= d0[i];
}

static double *copy_of(const double *x, size_t n)
{
    double *y = gc_zeros(n);
    memcpy(y, x, n * sizeof *y);
    return y;
}

/* Backward of the double build from non-zero gradients; returns the added
 * parts in g[0..3] = dq, dC1, dC2, dE (each checked against finite
 * differences by the caller). weighted = 0: dq, dC1, dC2 must come back
 * untouched. */
static void pkm_grads(unit_ctx *t, sq_rng *r, pkm_ctx *c, double *g[4])
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    size_t sz[4] = {qn(c), cn(c), cn(c), en(c)};
    double *g0[4];
    for (int a = 0; a < 4; a++) {
        g0[a] = gc_normal(r, sz[a], 1);
        g[a] = copy_of(g0[a], sz[a]);
    }
    pkm_fwd(c, 0);
    sq_pkm_backward_f64(cx, g[0], g[1], g[2], g[3], c->scratch, c->W, c->q, c->C1, c->C2, c->E,
                        c->idx, c->cache, c->B, c->n, c->d, c->k, c->weighted);
    for (int a = 0; a < 4; a++) {
        if (!c->weighted && a < 3)
            CHECK(memcmp(g[a], g0[a], sz[a] * sizeof *g[a]) == 0);
        sub_base(g[a], g0[a], sz[a]);
        free(g0[a]);
    }
}

static void pkm_grad_trials(unit_ctx *t, int weighted)
{
    static const int shapes[][4] = { /* B, n, k, d */
        {3, 4, 2, 4}, {2, 5, 1, 6}, {3, 3, 3, 2}, {2, 6, 4, 8}, {4, 2, 2, 4},
        {2, 3, 2, 70}, /* three scatter tiles, the second across h = 35 */
    };
    sq_rng r;
    sq_rng_seed(&r, 62 + (uint64_t)weighted, 0);
    double gworst = 0, fworst = 0;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        pkm_ctx c = {0};
        c.B = shapes[s][0], c.n = shapes[s][1], c.k = shapes[s][2], c.d = shapes[s][3];
        c.weighted = weighted;
        int found = pkm_setup(&r, &c, 1);
        CHECK(found);
        if (!found) {
            pkm_free(&c);
            continue;
        }
        double *out = gc_zeros(on(&c)), *sc = gc_zeros(kn(&c));
        ref_forward(&c, out, c.ref, sc);
        double *g[4];
        pkm_grads(t, &r, &c, g);
        CHECK(memcmp(c.idx, c.ref, kn(&c) * sizeof *c.idx) == 0);
        c.changed = 0;
        CHECK_WORST(gc_check(pkm_obj, &c, c.q, g[0], qn(&c)), GRAD_TOL, gworst);
        CHECK_WORST(gc_check(pkm_obj, &c, c.C1, g[1], cn(&c)), GRAD_TOL, gworst);
        CHECK_WORST(gc_check(pkm_obj, &c, c.C2, g[2], cn(&c)), GRAD_TOL, gworst);
        CHECK_WORST(gc_check(pkm_obj, &c, c.E, g[3], en(&c)), GRAD_TOL, gworst);
        CHECK_EQ(c.changed, 0); /* no step moved the selection */
        /* the float build */
        pkm_fres f;
        pkm_float(&c, 0, &f);
        CHECK(memcmp(f.idx, c.ref, kn(&c) * sizeof *f.idx) == 0);
        CHECK_WORST(gc_rel_diff(f.out, out, on(&c)), F32_TOL, fworst);
        CHECK_WORST(gc_rel_diff(f.cache, c.cache, sq_pkm_cache_size(c.B, c.k)), F32_TOL,
                    fworst);
        /* normwise over the whole gradient (dq, dC1, dC2, dE): one of them
         * may cancel to 0 (dC2 when the k experts of every query share
         * their j, as the g sum to 0), leaving float round-off alone */
        const float *fg[4] = {f.dq, f.dC1, f.dC2, f.dE};
        size_t sz[4] = {qn(&c), cn(&c), cn(&c), en(&c)};
        double dmax = 0, gmax = 0;
        for (int a = 0; a < 4; a++) {
            double ga = 0;
            for (size_t i = 0; i < sz[a]; i++)
                ga = fmax(ga, fabs(g[a][i]));
            dmax = fmax(dmax, gc_rel_diff(fg[a], g[a], sz[a]) * ga);
            gmax = fmax(gmax, ga);
        }
        CHECK_WORST(dmax / gmax, F32_TOL, fworst);
        pkm_ffree(&f);
        for (int a = 0; a < 4; a++)
            free(g[a]);
        free(out);
        free(sc);
        pkm_free(&c);
    }
    gc_note(t->name, "grad q, C1, C2, E", gworst);
    gc_note(t->name, "float vs double", fworst);
}

UNIT_TEST(test_pkm_grad_weighted)
{
    pkm_grad_trials(t, 1);
}

/* Algorithm 1's plain gather: only E gets gradient (dq, dC1, dC2 are
 * checked untouched, and their finite differences against zero). */
UNIT_TEST(test_pkm_grad_gather)
{
    pkm_grad_trials(t, 0);
}

/* Bitwise the same for 1 and 2 threads (the forward forks, the backward's
 * h = 36 straddles a 32-column tile). */
UNIT_TEST(test_pkm_threads)
{
    sq_rng r;
    sq_rng_seed(&r, 64, 0);
    for (int weighted = 0; weighted < 2; weighted++) {
        pkm_ctx c = {0};
        c.B = 150, c.n = 40, c.k = 8, c.d = 72, c.weighted = weighted;
        pkm_setup(&r, &c, 0);
        pkm_fres f1, f2;
        pkm_float(&c, 1, &f1);
        pkm_float(&c, 2, &f2);
        CHECK(memcmp(f1.idx, f2.idx, kn(&c) * sizeof *f1.idx) == 0);
        CHECK(memcmp(f1.out, f2.out, on(&c) * sizeof *f1.out) == 0);
        CHECK(memcmp(f1.cache, f2.cache, sq_pkm_cache_size(c.B, c.k) * sizeof *f1.cache) == 0);
        CHECK(memcmp(f1.dq, f2.dq, qn(&c) * sizeof *f1.dq) == 0);
        CHECK(memcmp(f1.dC1, f2.dC1, cn(&c) * sizeof *f1.dC1) == 0);
        CHECK(memcmp(f1.dC2, f2.dC2, cn(&c) * sizeof *f1.dC2) == 0);
        CHECK(memcmp(f1.dE, f2.dE, en(&c) * sizeof *f1.dE) == 0);
        pkm_ffree(&f1);
        pkm_ffree(&f2);
        pkm_free(&c);
    }
}

UNIT_TEST(test_pkm_count)
{
    int idx[2 * 3] = {4, 0, 8, 0, 4, 3};
    uint64_t count[9] = {1, 0, 0, 0, 0, 0, 0, 0, 7};
    sq_pkm_count(idx, 2, 3, count);
    static const uint64_t want[9] = {3, 0, 0, 1, 2, 0, 0, 0, 8};
    CHECK(memcmp(count, want, sizeof want) == 0);
    sq_pkm_count(idx, 0, 3, count); /* nothing */
    CHECK(memcmp(count, want, sizeof want) == 0);
    /* the shapes the op takes, and its buffer sizes */
    CHECK(sq_pkm_shape_ok(1, 2, 1));
    CHECK(sq_pkm_shape_ok(46340, 64, 32));
    CHECK(!sq_pkm_shape_ok(46341, 64, 32)); /* n*n over INT_MAX */
    CHECK(!sq_pkm_shape_ok(8, 7, 2));       /* odd d */
    CHECK(!sq_pkm_shape_ok(8, 8, 9));       /* k > n */
    CHECK(!sq_pkm_shape_ok(8, 8, 0));
    CHECK_EQ(sq_pkm_cache_size(5, 3), 30);
    CHECK_EQ(sq_pkm_scratch_size(5, 100, 3), 60); /* 5 slots of 4k */
    CHECK_EQ(sq_pkm_scratch_size(300, 100, 3), 900); /* backward: B k */
}
