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
#include "score_rows.h"
#include "unit.h"

typedef struct {
    score_rows r;
    int *tgt; /* [B] */
} rank_case;

/* The definition, one row: cnt = above, equal, candidates, NaN. */
static void naive_row(int *cnt, const float *sc, int V1, int tgt, const unsigned char *ok,
                      const int *ex, int n_ex)
{
    memset(cnt, 0, SQ_RANK_COUNTS * sizeof *cnt);
    cnt[SQ_RANK_NAN] = isnan(sc[tgt]);
    for (int i = 1; i < V1; i++) {
        if (i == tgt || !ok[i] || score_rows_in(ex, n_ex, i))
            continue;
        cnt[SQ_RANK_ABOVE] += sc[i] > sc[tgt];
        cnt[SQ_RANK_EQUAL] += sc[i] == sc[tgt];
        cnt[SQ_RANK_NAN] |= isnan(sc[i]);
        cnt[SQ_RANK_N]++;
    }
}

/* score_rows.h's rows and a target drawn for each; row 3's excluded list
 * holds its target. Row 1: an excluded NaN (no count); row 2: a
 * candidate's NaN; row 4: its target's NaN; row 5: its target filtered
 * out (still ranked: eval.c's targets are). */
static int make_case(rank_case *k, int B, int V1, sq_rng *rng)
{
    score_rows *c = &k->r;
    k->tgt = malloc((size_t)B * sizeof *k->tgt);
    if (score_rows_make(c, B, V1, rng) || !k->tgt)
        return -1;
    for (int b = 0; b < B; b++)
        k->tgt[b] = 1 + (int)sq_rng_below(rng, (uint64_t)(V1 - 1));
    if (B > 5 && V1 > 8) {
        c->ex[c->eoff[3]] = k->tgt[3];
        score_rows_sort(c->ex + c->eoff[3], c->eoff[4] - c->eoff[3]);
        c->sc[(size_t)1 * V1 + c->ex[c->eoff[1]]] = NAN; /* excluded (unless the target) */
        int i = 1;                                       /* row 2's first candidate */
        while (i < V1 && (i == k->tgt[2] || !c->ok[i] ||
                          score_rows_in(c->ex + c->eoff[2], c->eoff[3] - c->eoff[2], i)))
            i++;
        if (i < V1)
            c->sc[(size_t)2 * V1 + i] = NAN;
        c->sc[(size_t)4 * V1 + k->tgt[4]] = NAN;
        k->tgt[5] = 3; /* 3 % 7 == 3: filtered */
    }
    return 0;
}

/* The GPU's counts of the case (excluded lists or not) against want */
static void gpu_against(unit_ctx *t, cuda_env *g, const float *dsc, int *dc, int *gc,
                        const int *want, const rank_case *c, int with_ex)
{
    size_t n = (size_t)c->r.B * SQ_RANK_COUNTS;
    for (int run = 0; run < 2; run++) { /* twice: the same counts */
        CHECK_EQ(sq_rank_rows(&g->cx, dc, dsc, c->r.B, c->r.V1, c->tgt, c->r.ok,
                              with_ex ? c->r.ex : NULL, with_ex ? c->r.eoff : NULL, &g->e), 0);
        CHECK_EQ(cuda_down_bytes(g, gc, dc, n * sizeof *gc), 0);
        CHECK(memcmp(gc, want, n * sizeof *gc) == 0);
    }
}

static void rank_check(unit_ctx *t, int B, int V1, int gpu)
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
    CHECK_EQ(sq_rank_rows(&cpu, cc, c.r.sc, B, V1, c.tgt, c.r.ok, c.r.ex, c.r.eoff, &e), 0);
    CHECK_EQ(sq_rank_rows(&cpu, cn, c.r.sc, B, V1, c.tgt, c.r.ok, NULL, NULL, &e), 0);
    int bad = 0;
    for (int b = 0; b < B; b++) {
        int *x = nc + (size_t)b * SQ_RANK_COUNTS, d = c.r.eoff[b + 1] - c.r.eoff[b];
        naive_row(x, c.r.sc + (size_t)b * V1, V1, c.tgt[b], c.r.ok, c.r.ex + c.r.eoff[b], d);
        bad += memcmp(x, cc + (size_t)b * SQ_RANK_COUNTS, SQ_RANK_COUNTS * sizeof *x) != 0;
        naive_row(x, c.r.sc + (size_t)b * V1, V1, c.tgt[b], c.r.ok, NULL, 0);
        bad += memcmp(x, cn + (size_t)b * SQ_RANK_COUNTS, SQ_RANK_COUNTS * sizeof *x) != 0;
    }
    CHECK_EQ(bad, 0);
    if (B > 5 && V1 > 8) {
        CHECK_EQ(cc[1 * SQ_RANK_COUNTS + SQ_RANK_NAN], c.r.ex[c.r.eoff[1]] == c.tgt[1]);
        CHECK_EQ(cc[2 * SQ_RANK_COUNTS + SQ_RANK_NAN], 1);
        CHECK_EQ(cc[4 * SQ_RANK_COUNTS + SQ_RANK_NAN], 1);
        CHECK(cc[5 * SQ_RANK_COUNTS + SQ_RANK_N] > 0);
    }
    /* the GPU against the twin */
    cuda_env g;
    if (!gpu || cuda_open(t, &g))
        goto out;
    float *dsc = cuda_up(&g, c.r.sc, (size_t)B * V1);
    int *dc = cuda_alloc(&g, n * sizeof *dc);
    if (dsc && dc) {
        gpu_against(t, &g, dsc, dc, gc, cc, &c, 1);
        gpu_against(t, &g, dsc, dc, gc, cn, &c, 0);
    }
    cuda_close(&g);
out:
    score_rows_free(&c.r);
    free(c.tgt);
    free(cc);
    free(nc);
    free(gc);
    free(cn);
}

static void rank_cases(unit_ctx *t, int gpu)
{
    rank_check(t, 9, 40, gpu);   /* every special row */
    rank_check(t, 3, 2, gpu);    /* one item: the target alone */
    rank_check(t, 7, 3001, gpu); /* many strides of a block */
    rank_check(t, 1, 257, gpu);
}

/* The CPU twin alone (no GPU needed), then with the GPU */
UNIT_TEST(test_rank_rows_twin) { rank_cases(t, 0); }
UNIT_TEST(cuda_rank_rows) { rank_cases(t, 1); }

/* Given candidates (sampled, rank.h's sq_rank_lists): row b lists every
 * third item from b + 1 on but its target (row 0 none at all), so NaN,
 * ties and -inf land in some lists and not in others. The twin against
 * the definition, the GPU against the twin. */
static void lists_check(unit_ctx *t, int B, int V1, int gpu)
{
    sq_rng r;
    sq_rng_seed(&r, 17, (uint64_t)V1 * 1000 + (uint64_t)B);
    rank_case c;
    memset(&c, 0, sizeof c);
    size_t n = (size_t)B * SQ_RANK_COUNTS;
    int *cand = malloc(((size_t)B * V1 + 1) * sizeof *cand), *coff = malloc((B + 1) * sizeof *coff);
    int *cc = malloc(n * sizeof *cc), *gc = malloc(n * sizeof *gc);
    int ok = make_case(&c, B, V1, &r) == 0 && cand && coff && cc && gc;
    CHECK(ok);
    if (!ok)
        goto out;
    coff[0] = 0;
    for (int b = 0; b < B; b++) {
        coff[b + 1] = coff[b];
        for (int i = 1 + b; b > 0 && i < V1; i += 3)
            if (i != c.tgt[b])
                cand[coff[b + 1]++] = i;
    }
    sq_ctx cpu = sq_ctx_cpu();
    sq_err e = {0};
    CHECK_EQ(sq_rank_lists(&cpu, cc, c.r.sc, B, V1, c.tgt, cand, coff, &e), 0);
    int bad = 0, seen_nan = 0;
    for (int b = 0; b < B; b++) {
        const float *row = c.r.sc + (size_t)b * V1;
        float st = row[c.tgt[b]];
        int want[SQ_RANK_COUNTS] = {0, 0, coff[b + 1] - coff[b], isnan(st)};
        for (int j = coff[b]; j < coff[b + 1]; j++) {
            want[SQ_RANK_ABOVE] += row[cand[j]] > st;
            want[SQ_RANK_EQUAL] += row[cand[j]] == st;
            want[SQ_RANK_NAN] |= isnan(row[cand[j]]);
        }
        bad += memcmp(want, cc + (size_t)b * SQ_RANK_COUNTS, sizeof want) != 0;
        seen_nan += want[SQ_RANK_NAN];
    }
    CHECK_EQ(bad, 0);
    CHECK(B < 6 || seen_nan > 0);
    cuda_env g;
    if (!gpu || cuda_open(t, &g))
        goto out;
    float *dsc = cuda_up(&g, c.r.sc, (size_t)B * V1);
    int *dc = cuda_alloc(&g, n * sizeof *dc);
    for (int run = 0; run < 2 && dsc && dc; run++) {
        CHECK_EQ(sq_rank_lists(&g.cx, dc, dsc, B, V1, c.tgt, cand, coff, &g.e), 0);
        CHECK_EQ(cuda_down_bytes(&g, gc, dc, n * sizeof *gc), 0);
        CHECK(memcmp(gc, cc, n * sizeof *gc) == 0);
    }
    cuda_close(&g);
out:
    score_rows_free(&c.r);
    free(c.tgt);
    free(cand);
    free(coff);
    free(cc);
    free(gc);
}

static void lists_cases(unit_ctx *t, int gpu)
{
    lists_check(t, 9, 40, gpu);
    lists_check(t, 5, 3001, gpu); /* lists longer than a block */
    lists_check(t, 2, 2, gpu);    /* one item, the target: empty lists */
}

UNIT_TEST(test_rank_lists_twin) { lists_cases(t, 0); }
UNIT_TEST(cuda_rank_lists) { lists_cases(t, 1); }
