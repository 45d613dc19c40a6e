/* The ranking of each row's target (lib/ops/rank.h): the CPU twin against
 * the definition (every item looked at, the excluded list searched
 * linearly), and the GPU's (cuda/k_rank.cu) against the twin, count for
 * count (comparisons only: they must be equal). Rows with ties (scores
 * from few values, -0 and +0), -inf, a NaN that is excluded, a candidate's
 * NaN and a target's NaN, an item filter, a target in its own excluded
 * list and one filtered out, repeated excluded items, no excluded lists,
 * and rows of one item and of thousands. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "rank.h"
#include "rng.h"
#include "unit.h"

typedef struct {
    int B, V1;
    float *sc;
    unsigned char *ok;
    int *tgt, *ex, *eoff;
} rank_case;

static int in_list(const int *x, int n, int v)
{
    for (int j = 0; j < n; j++)
        if (x[j] == v)
            return 1;
    return 0;
}

/* The definition, one row: cnt = above, equal, candidates, NaN. */
static void naive_row(int *cnt, const float *sc, int V1, int tgt, const unsigned char *ok,
                      const int *ex, int n_ex)
{
    memset(cnt, 0, SQ_RANK_COUNTS * sizeof *cnt);
    cnt[SQ_RANK_NAN] = isnan(sc[tgt]);
    for (int i = 1; i < V1; i++) {
        if (i == tgt || !ok[i] || in_list(ex, n_ex, i))
            continue;
        cnt[SQ_RANK_ABOVE] += sc[i] > sc[tgt];
        cnt[SQ_RANK_EQUAL] += sc[i] == sc[tgt];
        cnt[SQ_RANK_NAN] |= isnan(sc[i]);
        cnt[SQ_RANK_N]++;
    }
}

static void sort_ints(int *x, int n)
{
    for (int a = 1; a < n; a++) /* insertion sort: a few items */
        for (int b = a; b > 0 && x[b - 1] > x[b]; b--) {
            int t = x[b];
            x[b] = x[b - 1];
            x[b - 1] = t;
        }
}

/* Scores from 23 values (ties), -inf, -0 and +0 in each row; every 7th
 * item filtered out; row b's target drawn, its excluded list b % 5 items
 * (one repeated, row 3's holding its target), sorted. Row 1: an excluded
 * NaN (no count); row 2: a candidate's NaN; row 4: its target's NaN;
 * row 5: its target filtered out (still ranked: eval.c's targets are). */
static int make_case(rank_case *c, int B, int V1, sq_rng *r)
{
    c->B = B;
    c->V1 = V1;
    c->sc = malloc((size_t)B * V1 * sizeof *c->sc);
    c->ok = malloc((size_t)V1);
    c->tgt = malloc((size_t)B * sizeof *c->tgt);
    c->eoff = malloc(((size_t)B + 1) * sizeof *c->eoff);
    c->ex = malloc((size_t)B * 6 * sizeof *c->ex);
    if (!c->sc || !c->ok || !c->tgt || !c->eoff || !c->ex)
        return -1;
    for (int i = 0; i < V1; i++)
        c->ok[i] = i % 7 != 3;
    for (size_t j = 0; j < (size_t)B * V1; j++)
        c->sc[j] = (float)sq_rng_below(r, 23) * 0.25f - 2.0f;
    int at = 0;
    for (int b = 0; b < B; b++) {
        float *row = c->sc + (size_t)b * V1;
        row[1 + b % (V1 - 1)] = -INFINITY;
        row[1 + (b + 3) % (V1 - 1)] = -0.0f;
        row[1 + (b + 5) % (V1 - 1)] = 0.0f;
        c->tgt[b] = 1 + (int)sq_rng_below(r, (uint64_t)(V1 - 1));
        c->eoff[b] = at;
        int n = b % 5;
        for (int j = 0; j < n; j++)
            c->ex[at + j] = 1 + (int)sq_rng_below(r, (uint64_t)(V1 - 1));
        if (n >= 2)
            c->ex[at + n++] = c->ex[at]; /* a repeat */
        if (b == 3)
            c->ex[at] = c->tgt[b];
        sort_ints(c->ex + at, n);
        at += n;
    }
    c->eoff[B] = at;
    if (B > 5 && V1 > 8) {
        c->sc[(size_t)1 * V1 + c->ex[c->eoff[1]]] = NAN; /* excluded (unless the target) */
        int i = 1;                                       /* row 2's first candidate */
        while (i < V1 && (i == c->tgt[2] || !c->ok[i] ||
                          in_list(c->ex + c->eoff[2], c->eoff[3] - c->eoff[2], i)))
            i++;
        if (i < V1)
            c->sc[(size_t)2 * V1 + i] = NAN;
        c->sc[(size_t)4 * V1 + c->tgt[4]] = NAN;
        c->tgt[5] = 3; /* 3 % 7 == 3: filtered */
    }
    return 0;
}

static void free_case(rank_case *c)
{
    free(c->sc);
    free(c->ok);
    free(c->tgt);
    free(c->ex);
    free(c->eoff);
}

/* The GPU's counts of the case (excluded lists or not) against want */
static void gpu_against(unit_ctx *t, cuda_env *g, const float *dsc, int *dc, int *gc,
                        const int *want, const rank_case *c, int with_ex)
{
    size_t n = (size_t)c->B * SQ_RANK_COUNTS;
    for (int run = 0; run < 2; run++) { /* twice: the same counts */
        CHECK_EQ(sq_rank_rows(&g->cx, dc, dsc, c->B, c->V1, c->tgt, c->ok,
                              with_ex ? c->ex : NULL, with_ex ? c->eoff : NULL, &g->e), 0);
        CHECK_EQ(cuda_down_bytes(g, gc, dc, n * sizeof *gc), 0);
        CHECK(memcmp(gc, want, n * sizeof *gc) == 0);
    }
}

static void rank_check(unit_ctx *t, int B, int V1)
{
    sq_rng r;
    sq_rng_seed(&r, 13, (uint64_t)V1 * 1000 + (uint64_t)B);
    rank_case c;
    memset(&c, 0, sizeof c);
    size_t n = (size_t)B * SQ_RANK_COUNTS;
    int *cc = malloc(n * sizeof *cc), *nc = malloc(n * sizeof *nc), *gc = malloc(n * sizeof *gc);
    int *cn = malloc(n * sizeof *cn);
    int ok = make_case(&c, B, V1, &r) == 0 && cc && nc && gc && cn;
    CHECK(ok);
    if (!ok)
        goto out;
    /* the CPU twin against the definition, with and without excluded lists */
    sq_ctx cpu = sq_ctx_cpu();
    sq_err e = {0};
    CHECK_EQ(sq_rank_rows(&cpu, cc, c.sc, B, V1, c.tgt, c.ok, c.ex, c.eoff, &e), 0);
    CHECK_EQ(sq_rank_rows(&cpu, cn, c.sc, B, V1, c.tgt, c.ok, NULL, NULL, &e), 0);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        int *x = nc + (size_t)b * SQ_RANK_COUNTS, d = c.eoff[b + 1] - c.eoff[b];
        naive_row(x, c.sc + (size_t)b * V1, V1, c.tgt[b], c.ok, c.ex + c.eoff[b], d);
        bad += memcmp(x, cc + (size_t)b * SQ_RANK_COUNTS, SQ_RANK_COUNTS * sizeof *x) != 0;
        naive_row(x, c.sc + (size_t)b * V1, V1, c.tgt[b], c.ok, NULL, 0);
        bad += memcmp(x, cn + (size_t)b * SQ_RANK_COUNTS, SQ_RANK_COUNTS * sizeof *x) != 0;
    }
    CHECK_EQ(bad, 0);
    if (B > 5 && V1 > 8) {
        CHECK_EQ(cc[1 * SQ_RANK_COUNTS + SQ_RANK_NAN], c.ex[c.eoff[1]] == c.tgt[1]);
        CHECK_EQ(cc[2 * SQ_RANK_COUNTS + SQ_RANK_NAN], 1);
        CHECK_EQ(cc[4 * SQ_RANK_COUNTS + SQ_RANK_NAN], 1);
        CHECK(cc[5 * SQ_RANK_COUNTS + SQ_RANK_N] > 0);
    }
    /* the GPU against the twin */
    cuda_env g;
    if (cuda_open(t, &g))
        goto out;
    float *dsc = cuda_up(&g, c.sc, (size_t)B * V1);
    int *dc = cuda_alloc(&g, n * sizeof *dc);
    if (dsc && dc) {
        gpu_against(t, &g, dsc, dc, gc, cc, &c, 1);
        gpu_against(t, &g, dsc, dc, gc, cn, &c, 0);
    }
    cuda_close(&g);
out:
    free_case(&c);
    free(cc);
    free(nc);
    free(gc);
    free(cn);
}

UNIT_TEST(cuda_rank_rows)
{
    rank_check(t, 9, 40);   /* every special row */
    rank_check(t, 3, 2);    /* one item: the target alone */
    rank_check(t, 7, 3001); /* many strides of a block */
    rank_check(t, 1, 257);
}
