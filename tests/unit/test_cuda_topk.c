/* The top-K selection (lib/ops/topk.h): the CPU twin against a naive
 * definition (every candidate sorted), and the GPU's (cuda/k_topk.cu)
 * against the twin bit for bit: selection does no arithmetic, so the lists
 * must be the same. Rows with ties, NaN (a candidate's and an excluded
 * item's), -inf and both zeros, an item filter, repeated excluded items,
 * fewer candidates than K, and rows long enough for many of the GPU's cuts. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "rng.h"
#include "score_rows.h"
#include "topk.h"
#include "unit.h"

typedef struct {
    float s;
    int i;
} cand;

static int worse_first(const void *a, const void *b) /* qsort: best first */
{
    const cand *x = a, *y = b;
    if (x->s != y->s)
        return x->s > y->s ? -1 : 1;
    return (x->i > y->i) - (x->i < y->i);
}

/* The definition: the candidates sorted, the first K. */
static int naive_row(int *items, float *top, int *nan, const float *sc, int V1, int K,
                     const unsigned char *ok, const int *ex, int n_ex, cand *all)
{
    int n = 0;
    *nan = 0;
    for (int i = 1; i < V1; i++) {
        if (!ok[i] || score_rows_in(ex, n_ex, i))
            continue;
        if (isnan(sc[i]))
            *nan = 1;
        else
            all[n++] = (cand){sc[i], i};
    }
    qsort(all, (size_t)n, sizeof *all, worse_first);
    int k = n < K ? n : K;
    for (int j = 0; j < k; j++) {
        items[j] = all[j].i;
        top[j] = all[j].s;
    }
    return k;
}

/* score_rows.h's rows, with a NaN in rows 1 (excluded: harmless) and 2
 * (a candidate: flagged). */
static int make_case(score_rows *c, int B, int V1, sq_rng *r)
{
    if (score_rows_make(c, B, V1, r))
        return -1;
    if (B > 2) { /* row 1 excludes one item (1 % 5): a NaN there is no candidate's */
        c->sc[(size_t)1 * V1 + c->ex[c->eoff[1]]] = NAN;
        int i = 1; /* row 2's first candidate gets a NaN */
        while (i < V1 && (!c->ok[i] || score_rows_in(c->ex + c->eoff[2], c->eoff[3] - c->eoff[2], i)))
            i++;
        if (i < V1)
            c->sc[(size_t)2 * V1 + i] = NAN;
    }
    return 0;
}

static void topk_check(unit_ctx *t, int B, int V1, int K)
{
    sq_rng r;
    sq_rng_seed(&r, 11, (uint64_t)V1 * 1000 + (uint64_t)K);
    score_rows c;
    memset(&c, 0, sizeof c);
    size_t nk = (size_t)B * K;
    int *ci = malloc(nk * sizeof *ci), *ck = malloc(2 * (size_t)B * sizeof *ck);
    int *ni = malloc(nk * sizeof *ni), *gi = malloc(nk * sizeof *gi);
    int *gk = malloc(2 * (size_t)B * sizeof *gk);
    float *ct = malloc(nk * sizeof *ct), *nt = malloc(nk * sizeof *nt), *gt = malloc(nk * sizeof *gt);
    cand *all = malloc((size_t)V1 * sizeof *all);
    int ok = make_case(&c, B, V1, &r) == 0 && ci && ck && ni && gi && gk && ct && nt && gt && all;
    CHECK(ok);
    if (!ok)
        goto out;
    /* the CPU twin against the definition */
    sq_ctx cpu = sq_ctx_cpu();
    sq_err e = {0};
    CHECK_EQ(sq_topk_rows(&cpu, ci, ct, ck, ck + B, c.sc, B, V1, K, c.ok, c.ex, c.eoff, &e), 0);
    for (int b = 0; b < B; b++) {
        int nn, k = naive_row(ni + (size_t)b * K, nt + (size_t)b * K, &nn, c.sc + (size_t)b * V1,
                              V1, K, c.ok, c.ex + c.eoff[b], c.eoff[b + 1] - c.eoff[b], all);
        CHECK_EQ(ck[B + b], nn);
        if (nn)
            continue; /* a NaN row's list is unspecified */
        CHECK_EQ(ck[b], k);
        CHECK(memcmp(ci + (size_t)b * K, ni + (size_t)b * K, (size_t)k * sizeof *ci) == 0);
        CHECK(memcmp(ct + (size_t)b * K, nt + (size_t)b * K, (size_t)k * sizeof *ct) == 0);
    }
    CHECK_EQ(ck[B + 2], B > 2);     /* the candidate NaN is said */
    CHECK_EQ(ck[B + 1], 0);         /* the excluded one is not */
    /* the GPU against the twin, twice (the same bits) */
    cuda_env g;
    if (cuda_open(t, &g))
        goto out;
    float *dsc = cuda_up(&g, c.sc, (size_t)B * V1), *dt = cuda_zeros(&g, nk);
    int *di = cuda_alloc(&g, nk * sizeof *di), *dk = cuda_alloc(&g, 2 * (size_t)B * sizeof *dk);
    for (int run = 0; run < 2 && dsc && dt && di && dk; run++) {
        CHECK_EQ(sq_topk_rows(&g.cx, di, dt, dk, dk + B, dsc, B, V1, K, c.ok, c.ex, c.eoff, &g.e),
                 0);
        CHECK_EQ(cuda_down_bytes(&g, gi, di, nk * sizeof *gi), 0);
        CHECK_EQ(cuda_down_bytes(&g, gt, dt, nk * sizeof *gt), 0);
        CHECK_EQ(cuda_down_bytes(&g, gk, dk, 2 * (size_t)B * sizeof *gk), 0);
        int bad = 0;
        for (int b = 0; b < B; b++) {
            bad += gk[B + b] != ck[B + b];
            if (ck[B + b])
                continue;
            bad += gk[b] != ck[b] ||
                   memcmp(gi + (size_t)b * K, ci + (size_t)b * K, (size_t)ck[b] * sizeof *gi) ||
                   memcmp(gt + (size_t)b * K, ct + (size_t)b * K, (size_t)ck[b] * sizeof *gt);
        }
        CHECK_EQ(bad, 0);
    }
    /* no excluded lists at all (--include-history) */
    CHECK_EQ(sq_topk_rows(&cpu, ci, ct, ck, ck + B, c.sc, B, V1, K, c.ok, NULL, NULL, &e), 0);
    if (dsc && dt && di && dk) {
        CHECK_EQ(sq_topk_rows(&g.cx, di, dt, dk, dk + B, dsc, B, V1, K, c.ok, NULL, NULL, &g.e),
                 0);
        CHECK_EQ(cuda_down_bytes(&g, gi, di, nk * sizeof *gi), 0);
        CHECK_EQ(cuda_down_bytes(&g, gk, dk, 2 * (size_t)B * sizeof *gk), 0);
        for (int b = 0; b < B; b++)
            if (!ck[B + b])
                CHECK(gk[b] == ck[b] && !memcmp(gi + (size_t)b * K, ci + (size_t)b * K,
                                                 (size_t)ck[b] * sizeof *gi));
    }
    cuda_close(&g);
out:
    score_rows_free(&c);
    free(ci); free(ck); free(ni); free(gi); free(gk); free(ct); free(nt); free(gt); free(all);
}

UNIT_TEST(cuda_topk_rows)
{
    topk_check(t, 6, 40, 10);            /* K near the candidates */
    topk_check(t, 5, 12, 20);            /* fewer candidates than K */
    topk_check(t, 4, 3001, 7);           /* many rounds, few cuts */
    topk_check(t, 3, 2000, SQ_TOPK_GPU_MAX); /* the largest K: a cut every round */
    topk_check(t, 4, 257, 1);
}
