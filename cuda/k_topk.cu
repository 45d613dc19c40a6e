// k_topk.cu - the best K items of each row of scores (lib/ops/topk.h), on
// the device, so that seqrec-score --topk downloads K items a user rather
// than every item's score.
//
// A block a row. Its buffer (shared memory, TK_BUF entries) holds the best
// entries found so far; the block walks the row's items TK_THREADS at a
// time, each thread testing its item: a candidate (ok, not excluded, not
// NaN) that beats the buffer's threshold (its K-th best, once it has K) is
// appended. When the buffer could not take another round, it is sorted
// (bitonic, best first) and cut to K, which sets the threshold. So after
// the first rounds few items enter and few sorts run: a row of a million
// items costs about one read of its scores.
//
// The result is the K best under a total order (the higher score, then the
// lower item: eval.c's better), so it is one list whatever order the
// entries arrived in; the append slots come from a shared-memory integer
// atomicAdd for that reason (no float atomics, and the same bits every
// run). The excluded list of a row is sorted (the caller's), searched only
// for an item that would enter or is NaN. A NaN candidate sets nan[b].
//
// Budget: __launch_bounds__(256), 4 KiB of static shared memory.
#include "common.cuh"
#include "topk.h"

#define TK_THREADS 256
#define TK_MAX SQ_TOPK_GPU_MAX
#define TK_BUF (2 * TK_MAX) // K kept + one round's candidates

static __device__ __forceinline__ int tk_better(float as, int ai, float bs, int bi)
{
    return as > bs || (as == bs && ai < bi);
}

// Sorts s/it[0, TK_BUF) best first (n real entries, the rest padded with
// the worst), every thread of the block taking part.
static __device__ void tk_sort(float *s, int *it, int n)
{
    for (int j = n + (int)threadIdx.x; j < TK_BUF; j += TK_THREADS) {
        s[j] = -INFINITY;
        it[j] = 0x7fffffff; // after every real item, even one scored -inf
    }
    __syncthreads();
    for (int size = 2; size <= TK_BUF; size <<= 1)
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            for (int t = threadIdx.x; t < TK_BUF / 2; t += TK_THREADS) {
                int lo = t / stride * 2 * stride + t % stride, hi = lo + stride;
                int best_first = (lo & size) == 0;
                int swap = best_first ? tk_better(s[hi], it[hi], s[lo], it[lo])
                                      : tk_better(s[lo], it[lo], s[hi], it[hi]);
                if (swap) {
                    float ts = s[lo];
                    int ti = it[lo];
                    s[lo] = s[hi];
                    it[lo] = it[hi];
                    s[hi] = ts;
                    it[hi] = ti;
                }
            }
            __syncthreads();
        }
}

static __global__ __launch_bounds__(TK_THREADS) void k_topk(int *items, float *top, int *kout,
                                                            int *nan, const float *sc, int V1,
                                                            int K, const unsigned char *ok,
                                                            const int *excl, const int *eoff)
{
    __shared__ float bs[TK_BUF];
    __shared__ int bi[TK_BUF];
    __shared__ int n_buf, have_t, bad;
    int b = blockIdx.x, tid = threadIdx.x;
    const float *row = sc + (size_t)b * V1;
    const int *ex = excl ? excl + eoff[b] : NULL;
    int n_ex = excl ? eoff[b + 1] - eoff[b] : 0;
    if (tid == 0) {
        n_buf = 0;
        have_t = 0;
        bad = 0;
    }
    __syncthreads();
    for (int base = 1; base < V1; base += TK_THREADS) {
        int i = base + tid;
        float ts = have_t ? bs[K - 1] : 0.0f;
        int ti = have_t ? bi[K - 1] : 0;
        if (i < V1 && ok[i]) {
            float s = row[i];
            if (s != s) {
                if (!sq_sorted_has(ex, n_ex, i))
                    atomicAdd(&bad, 1);
            } else if ((!have_t || tk_better(s, i, ts, ti)) && !sq_sorted_has(ex, n_ex, i)) {
                int at = atomicAdd(&n_buf, 1); // any slot: the sort orders them
                bs[at] = s;
                bi[at] = i;
            }
        }
        __syncthreads();
        if (n_buf > TK_BUF - TK_THREADS) { // no room for another round: cut to K
            int n = n_buf;
            tk_sort(bs, bi, n);
            if (tid == 0) {
                n_buf = n < K ? n : K;
                have_t = n_buf == K;
            }
        }
        __syncthreads();
    }
    int n = n_buf;
    tk_sort(bs, bi, n);
    int k = n < K ? n : K;
    for (int j = tid; j < k; j += TK_THREADS) {
        items[(size_t)b * K + j] = bi[j];
        top[(size_t)b * K + j] = bs[j];
    }
    if (tid == 0) {
        kout[b] = k;
        nan[b] = bad > 0;
    }
}

int be_upload_filter(sq_gpu_be *be, const unsigned char *ok, int V1, const int *excl,
                     const int *eoff, int B, const unsigned char **dok, const int **dex,
                     const int **doff)
{
    *dok = (const unsigned char *)be_op_upload(be, ok, (size_t)V1);
    *dex = *doff = NULL;
    if (excl && eoff[B] > 0) { // else nothing excluded in any row
        *doff = (const int *)be_op_upload(be, eoff, (size_t)(B + 1) * sizeof *eoff);
        *dex = (const int *)be_op_upload(be, excl, (size_t)eoff[B] * sizeof *excl);
        if (!*doff || !*dex)
            return -1;
    }
    return *dok ? 0 : -1;
}

void be_topk_rows(sq_gpu_be *be, int *items, float *top, int *k, int *nan, const float *sc,
                  int B, int V1, int K, const unsigned char *ok, const int *excl,
                  const int *eoff)
{
    if (B <= 0)
        return;
    if (K < 1 || K > TK_MAX || V1 < 1) {
        if (!be->failed) {
            be->failed = 1;
            sq_fail(&be->err, SQ_EX_SOFTWARE, "top-K on the GPU: K %d (1 .. %d), %d items", K,
                    TK_MAX, V1 - 1);
        }
        return;
    }
    const unsigned char *dok;
    const int *dex, *doff;
    if (be_upload_filter(be, ok, V1, excl, eoff, B, &dok, &dex, &doff))
        return; // the sticky error says which
    SQ_LAUNCH(be, k_topk, (unsigned)B, TK_THREADS, 0, items, top, k, nan, sc, V1, K, dok, dex,
              doff);
}
