/* topk.c - the CPU twin of the top-K selection (formulas: topk.h). Float
 * only (selection, no arithmetic): no double build, so the GPU dispatch is
 * written out rather than through ongpu.h. */
#include "topk.h"
#include "gpu.h"

#include <stdlib.h>

typedef struct {
    float s;
    int i;
} tk_entry;

/* a before b: the higher score, then the lower item (eval.c's better) */
static int tk_better(const tk_entry *a, const tk_entry *b)
{
    return a->s > b->s || (a->s == b->s && a->i < b->i);
}

/* Sift down in a heap whose root is the worst kept entry. */
static void tk_sift(tk_entry *hp, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, w = i;
        if (l < n && tk_better(&hp[w], &hp[l]))
            w = l;
        if (r < n && tk_better(&hp[w], &hp[r]))
            w = r;
        if (w == i)
            return;
        tk_entry t = hp[i];
        hp[i] = hp[w];
        hp[w] = t;
        i = w;
    }
}

static int tk_excluded(const int *ex, int n, int item)
{
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (ex[mid] < item)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ex[lo] == item;
}

/* One row: the heap of the K best so far, its root the worst of them. */
static void tk_row(int *items, float *top, int *k, int *nan, tk_entry *hp, const float *sc,
                   int V1, int K, const unsigned char *ok, const int *ex, int n_ex)
{
    int n = 0;
    *nan = 0;
    for (int i = 1; i < V1; i++) {
        if (!ok[i] || (ex && tk_excluded(ex, n_ex, i)))
            continue;
        tk_entry x = {sc[i], i};
        if (x.s != x.s) {
            *nan = 1;
            continue;
        }
        if (n < K) {
            hp[n++] = x;
            if (n == K)
                for (int j = K / 2; j-- > 0;)
                    tk_sift(hp, K, j);
        } else if (tk_better(&x, &hp[0])) {
            hp[0] = x;
            tk_sift(hp, K, 0);
        }
    }
    if (n < K)
        for (int j = n / 2; j-- > 0;)
            tk_sift(hp, n, j);
    for (int m = n; m > 1; m--) { /* the worst to the back: best first */
        tk_entry t = hp[0];
        hp[0] = hp[m - 1];
        hp[m - 1] = t;
        tk_sift(hp, m - 1, 0);
    }
    for (int j = 0; j < n; j++) {
        items[j] = hp[j].i;
        top[j] = hp[j].s;
    }
    *k = n;
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
    tk_entry *hp = malloc((size_t)K * sizeof *hp);
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
