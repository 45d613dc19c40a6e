/* rank.c - the CPU twin of the GPU's ranking of each row's target
 * (formulas: rank.h). Float only (comparisons, no arithmetic): no double
 * build, so the GPU dispatch is written out rather than through ongpu.h. */
#include "rank.h"
#include "gpu.h"
#include "topk.h"

static void rk_row(int *cnt, const float *sc, int V1, int tgt, const unsigned char *ok,
                   const int *ex, int n_ex)
{
    float st = sc[tgt];
    int above = 0, equal = 0, n = 0, nan = st != st;
    for (int i = 1; i < V1; i++) {
        if (i == tgt || !ok[i] || (ex && sq_sorted_has(ex, n_ex, i)))
            continue;
        float x = sc[i];
        above += x > st;
        equal += x == st;
        nan |= x != x;
        n++;
    }
    cnt[SQ_RANK_ABOVE] = above;
    cnt[SQ_RANK_EQUAL] = equal;
    cnt[SQ_RANK_N] = n;
    cnt[SQ_RANK_NAN] = nan;
}

int sq_rank_rows(const sq_ctx *cx, int *cnt, const float *sc, int B, int V1, const int *tgt,
                 const unsigned char *ok, const int *excl, const int *eoff, sq_err *e)
{
    (void)e;
    if (cx->backend == SQ_BACKEND_CUDA) {
        sq_gpu_rank_rows((sq_gpu *)cx->gpu, cnt, sc, B, V1, tgt, ok, excl, eoff);
        return 0;
    }
    for (int b = 0; b < B; b++)
        rk_row(cnt + (size_t)b * SQ_RANK_COUNTS, sc + (size_t)b * V1, V1, tgt[b], ok,
               excl ? excl + eoff[b] : NULL, excl ? eoff[b + 1] - eoff[b] : 0);
    return 0;
}

int sq_rank_lists(const sq_ctx *cx, int *cnt, const float *sc, int B, int V1, const int *tgt,
                  const int *cand, const int *coff, sq_err *e)
{
    (void)e;
    if (cx->backend == SQ_BACKEND_CUDA) {
        sq_gpu_rank_lists((sq_gpu *)cx->gpu, cnt, sc, B, V1, tgt, cand, coff);
        return 0;
    }
    for (int b = 0; b < B; b++) {
        const float *row = sc + (size_t)b * V1;
        float st = row[tgt[b]];
        int above = 0, equal = 0, nan = st != st;
        for (int j = coff[b]; j < coff[b + 1]; j++) {
            float x = row[cand[j]];
            above += x > st;
            equal += x == st;
            nan |= x != x;
        }
        int *k = cnt + (size_t)b * SQ_RANK_COUNTS;
        k[SQ_RANK_ABOVE] = above;
        k[SQ_RANK_EQUAL] = equal;
        k[SQ_RANK_N] = coff[b + 1] - coff[b];
        k[SQ_RANK_NAN] = nan;
    }
    return 0;
}
