/* topk.h - the best K items of each row of scores: seqrec-score --topk and
 * the nightly job, selected where the scores are.
 *
 * Row b of sc[B, V1] scores items 1 .. V1 - 1 (column 0 is the padding
 * item, never a candidate). The candidates of row b are the items i with
 * ok[i] != 0 that are not in its excluded list excl[eoff[b] .. eoff[b+1])
 * (sorted ascending, repeats allowed; excl NULL: none). The op writes the
 * best k[b] = min(K, candidates) of them, best first, into items[b K ..]
 * and top[b K ..]: the higher score first, equal scores by the lower item
 * id (eval.c's order, so the same list as seqrec-score's host selection
 * from the same scores), and nan[b] = 1 when a candidate's score is NaN
 * (its list then unspecified), else 0.
 *
 * On a CUDA context sc, items, top, k and nan are device arrays and ok,
 * excl and eoff host arrays the op uploads; K is at most SQ_TOPK_GPU_MAX
 * there (one block's buffer a row: a larger K selects on the host). The
 * CPU twin selects with a heap, row by row. */
#ifndef SQ_TOPK_H
#define SQ_TOPK_H

#include <stdint.h>

#include "ctx.h"

#define SQ_TOPK_GPU_MAX 256

#ifndef SQ_HD /* host and device under nvcc, as real.h's */
#ifdef __CUDACC__
#define SQ_HD __host__ __device__
#else
#define SQ_HD
#endif
#endif

/* Whether v is in x[0, n) (sorted ascending, repeats allowed): a row's
 * excluded list, searched by the selections here and the ranking (rank.h)
 * on the host and the device. */
static inline SQ_HD int sq_sorted_has(const int *x, int n, int v)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (x[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && x[lo] == v;
}

/* An item and its score. a ranks before b: the higher score, then the
 * lower item id (the order of every top-K list). */
typedef struct {
    float score;
    uint32_t item;
} sq_scored;

static inline int sq_scored_better(const sq_scored *a, const sq_scored *b)
{
    return a->score > b->score || (a->score == b->score && a->item < b->item);
}

/* The selection's heap: hp[0, *k) holds the best of the entries added so
 * far, at most K, its root the worst kept once full. sq_topk_add takes
 * one more (no NaN: the caller's check); sq_topk_order then sorts the kept
 * best first. eval.c's host selection and the CPU twin below share them. */
void sq_topk_sift(sq_scored *hp, uint32_t n, uint32_t i);
static inline void sq_topk_add(sq_scored *hp, uint32_t *k, uint32_t K, sq_scored x)
{
    if (*k < K) { /* fill, then heapify once full */
        hp[(*k)++] = x;
        if (*k == K)
            for (uint32_t j = K / 2; j-- > 0;)
                sq_topk_sift(hp, K, j);
    } else if (sq_scored_better(&x, &hp[0])) {
        hp[0] = x;
        sq_topk_sift(hp, K, 0);
    }
}
void sq_topk_order(sq_scored *hp, uint32_t k, uint32_t K);

/* 0, or SQ_EX_OSERR (the CPU's heap); a GPU's failure is the context's
 * sticky error, reported by the download of the results. */
int sq_topk_rows(const sq_ctx *cx, int *items, float *top, int *k, int *nan, const float *sc,
                 int B, int V1, int K, const unsigned char *ok, const int *excl, const int *eoff,
                 sq_err *e);

#endif
