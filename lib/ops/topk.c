/* topk.c - the top-K heap every host selection uses (eval.c's too), and
 * the CPU twin of the GPU's selection (formulas: topk.h). Float only
 * (selection, no arithmetic): no double build, so the GPU dispatch is
 * written out rather than through ongpu.h. */
#include "topk.h"
#include "gpu.h"

#include <stdlib.h>

void sq_topk_sift(sq_scored *hp, uint32_t n, uint32_t i)
{
    for (;;) {
        uint32_t w = i, l = 2 * i + 1, r = l + 1;
        if (l < n && sq_scored_better(&hp[w], &hp[l]))
            w = l;
        if (r < n && sq_scored_better(&hp[w], &hp[r]))
            w = r;
        if (w == i)
            return;
        sq_scored t = hp[i];
        hp[i] = hp[w];
        hp[w] = t;
        i = w;
    }
}

void sq_topk_order(sq_scored *hp, uint32_t k, uint32_t K)
{
    if (k < K) /* never filled: not a heap yet */
        for (uint32_t j = k / 2; j-- > 0;)
            sq_topk_sift(hp, k, j);
    for (uint32_t n = k; n > 1; n--) { /* the worst to the back: best first */
        sq_scored t = hp[0];
        hp[0] = hp[n - 1];
        hp[n - 1] = t;
        sq_topk_sift(hp, n - 1, 0);
    }
}

/* One row: the heap of the K best so far, its root the worst of them. */
static void tk_row(int *items, float *top, int *k, int *nan, sq_scored *hp, const float *sc,
                   int V1, int K, const unsigned char *ok, const int *ex, int n_ex)
{
    uint32_t n = 0;
    *nan = 0;
    for (int i = 1; i < V1; i++) {
        if (!ok[i] || (ex && sq_sorted_has(ex, n_ex, i)))
            continue;
        if (sc[i] != sc[i])
            *nan = 1;
        else
            sq_topk_add(hp, &n, (uint32_t)K, (sq_scored){sc[i], (uint32_t)i});
    }
    sq_topk_order(hp, n, (uint32_t)K);
    for (uint32_t j = 0; j < n; j++) {
        items[j] = (int)hp[j].item;
        top[j] = hp[j].score;
    }
    *k = (int)n;
}

int sq_topk_rows(const sq_ctx *cx, int *items, float *top, int *k, int *nan, const float *sc,
                 int B, int V1, int K, const unsigned char *ok, const int *excl, const int *eoff,
                 sq_err *e)
{
    if (cx->backend == SQ_BACKEND_CUDA) {
        sq_gpu_topk_rows((sq_gpu *)cx->gpu, items, top, k, nan, sc, B, V1, K, ok, excl, eoff);
        return 0;
    }
    if (K < 1)
        return sq_fail(e, SQ_EX_SOFTWARE, "sq_topk_rows: K %d", K);
    sq_scored *hp = malloc((size_t)K * sizeof *hp);
    if (!hp)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for a top-%d heap", K);
    for (int b = 0; b < B; b++) {
        const int *ex = excl ? excl + eoff[b] : NULL;
        tk_row(items + (size_t)b * K, top + (size_t)b * K, &k[b], &nan[b], hp,
               sc + (size_t)b * V1, V1, K, ok, ex, excl ? eoff[b + 1] - eoff[b] : 0);
    }
    free(hp);
    return 0;
}
