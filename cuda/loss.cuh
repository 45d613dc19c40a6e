// loss.cuh - what the loss kernels (k_loss.cu, k_sampled.cu) share: sums
// of a loss in double, counts of targets, the gather of an entry's row of
// h, and the deterministic scatter of sampled pairs' gradients into rows
// of E and h (CSRs bucketed on the host, one writer a destination row, no
// float atomics). Static: each kernel file has its own copy.
#ifndef SQ_CUDA_LOSS_CUH
#define SQ_CUDA_LOSS_CUH

#include <cmath>
#include <cstdlib>

#include "common.cuh"

#define LOSS_THREADS 256

// Entries with a non-zero id, for ids that live on the device only.
static __global__ __launch_bounds__(LOSS_THREADS) void count_kernel(double *out,
                                                                    const int *ids, int n)
{
    __shared__ double sh[LOSS_THREADS];
    double s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += ids[i] != 0;
    s = be_block_sum_d(s, sh);
    if (threadIdx.x == 0)
        out[0] = s;
}

// The entries with a non-zero id: counted on the host from the staged
// array, else on the device (one wait).
static inline int count_nonzero(sq_gpu_be *be, const int *ids, int n)
{
    const int *hids = be_host_ints(be, ids);
    if (hids) {
        int c = 0;
        for (int i = 0; i < n; i++)
            c += hids[i] != 0;
        return c;
    }
    SQ_LAUNCH(be, count_kernel, 1, LOSS_THREADS, 0, be->red, be_ints(be, ids), n);
    double c = be_download_red(be, 0);
    return std::isfinite(c) ? (int)c : 0;
}

// hc[r] = h[rows[e0 + r]] (rows NULL: h[e0 + r]) for the m entries of the
// chunk; zero for ignored entries, whose rows are never read (the CPU's).
// H: hc's type, float or be_bf16 (the full CE's bf16 GEMMs' operand,
// rounded to nearest).
template <class H>
static __global__ __launch_bounds__(LOSS_THREADS) void gather_kernel(H *hc, const float *h,
                                                                     const int *rows,
                                                                     const int *targets,
                                                                     int e0, int m, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)m * C)
        return;
    int r = (int)(i / C), c = (int)(i % C), e = e0 + r;
    be_stf(hc + i, targets[e] ? h[(size_t)(rows ? rows[e] : e) * C + c] : 0.0f);
}

// Launches gather_kernel for the m entries from e0 (named as the trace and
// the profile know it).
template <class H>
static inline void gather_rows(sq_gpu_be *be, H *hc, const float *h, const int *rows,
                               const int *targets, int e0, int m, int C)
{
    be_launch(be, std::is_same<H, float>::value ? "gather_kernel" : "gather_bf16_kernel",
              gather_kernel<H>, dim3(be_blocks((size_t)m * C, LOSS_THREADS)), dim3(LOSS_THREADS),
              0, hc, h, rows, targets, e0, m, C);
}

// 1 when the host rows of the entries with a target are strictly
// increasing (so distinct): the usual batch, whose rows list the positions
// with a target in order. Ignored entries' rows are never read.
static inline int rows_increasing(const int *hrows, const int *htargets, int n)
{
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (!htargets[i])
            continue;
        if (hrows[i] <= last)
            return 0;
        last = hrows[i];
    }
    return 1;
}

// real.h's softplus and sigmoid (real.h itself is C, not C++).
static __device__ inline float softplus_f(float x)
{
    return (x > 0 ? x : 0.0f) + log1pf(expf(-fabsf(x)));
}
static __device__ inline float sigmoid_f(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

// One block per bucket b < *nb (destination row dest[b]): dst[dest] +=
// coef[q] src[srcrow[q]] (coef NULL: src alone) over the bucket's pairs q
// in order (the CPU's), one thread a column: every destination row has one
// writer; with dbias, dbias[dest] += bcoef[q] likewise (thread 0). The
// count is read on the device: a CUDA graph's grid is the batch's most
// buckets.
static __global__ __launch_bounds__(LOSS_THREADS) void bucket_kernel(float *dst, float *dbias,
                                                                     const float *src,
                                                                     const float *coef,
                                                                     const float *bcoef,
                                                                     const int *start,
                                                                     const int *dest,
                                                                     const int *pair,
                                                                     const int *srcrow,
                                                                     const int *nb, int C)
{
    int b = blockIdx.x;
    if (b >= *nb)
        return;
    int q0 = start[b], q1 = start[b + 1];
    float *d = dst + (size_t)dest[b] * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = d[c];
        for (int q = q0; q < q1; q++) {
            float x = src[(size_t)srcrow[q] * C + c];
            acc += coef ? coef[pair[q]] * x : x;
        }
        d[c] = acc;
    }
    if (dbias && threadIdx.x == 0) {
        float acc = dbias[dest[b]];
        for (int q = q0; q < q1; q++)
            acc += bcoef[pair[q]];
        dbias[dest[b]] = acc;
    }
}

// A CSR of the live pairs by destination row, as laid out in the upload
// for at most M pairs (fixed offsets, whatever the batch's nb and L):
// start [M + 1], dest [M], pair [M], src [M], then nb. Counting sort on
// the key: stable, so a bucket lists its pairs in (entry, k) order.
struct bucketing {
    int nb, L;
    int *start, *dest, *pair, *src;
};

// keys[q] / srcs[q] of the L <= M live pairs q (ids lp[q]), keys in
// [0, nkey).
static inline int bucket_pairs(bucketing *bk, const int *keys, const int *srcs, const int *lp, int L,
                        int M, int nkey, int *space)
{
    int *cnt = (int *)calloc((size_t)nkey + 1, sizeof(int));
    if (!cnt)
        return -1;
    for (int q = 0; q < L; q++)
        cnt[keys[q] + 1]++;
    int nb = 0;
    for (int k = 0; k < nkey; k++)
        nb += cnt[k + 1] != 0;
    bk->nb = nb;
    bk->L = L;
    bk->start = space;
    bk->dest = space + M + 1;
    bk->pair = bk->dest + M;
    bk->src = bk->pair + M;
    bk->src[M] = nb;
    for (int k = 0, b = 0; k < nkey; k++) { // cnt[k] = first slot of key k
        int c = cnt[k + 1];
        cnt[k + 1] = cnt[k] + c;
        if (c) {
            bk->start[b] = cnt[k];
            bk->dest[b++] = k;
        }
    }
    bk->start[nb] = L;
    for (int q = 0; q < L; q++) {
        int at = cnt[keys[q]]++;
        bk->pair[at] = lp[q];
        bk->src[at] = srcs[q];
    }
    free(cnt);
    return 0;
}

// Ints of a bucketing of at most M pairs (bucket_pairs' layout).
static inline size_t bucket_ints(int M)
{
    return (size_t)M * 4 + 2;
}

// a . b over C floats on one warp: lane's columns lane, lane + 32, ...,
// then the warp's sum (every lane has it)
static __device__ __forceinline__ float warp_dot(const float *a, const float *b, int C, int lane)
{
    float s = 0.0f;
    for (int c = lane; c < C; c += 32)
        s += a[c] * b[c];
    return be_warp_sum(s);
}

// The host copy of an integer array: the staged one itself, else
// downloaded into *own (freed by the caller).
static inline const int *host_ids(sq_gpu_be *be, const int *p, size_t n, int **own)
{
    *own = NULL;
    if (!p)
        return NULL;
    const int *h = be_host_ints(be, p);
    if (h)
        return h;
    if (be_graph_no_read(be, "a device array of ids read back to the host"))
        return NULL;
    *own = (int *)malloc(n * sizeof(int) + 1);
    if (!*own || be_note(be, cudaMemcpyAsync(*own, p, n * sizeof(int), cudaMemcpyDeviceToHost,
                                             be->stream), "download") ||
        be_wait(be, NULL, "download"))
        return NULL;
    return *own;
}

// An op's upload words in the op upload's pinned space (be_op_space), no
// buffer of its own: the host words, their device copy in *dev; NULL (the
// sticky error) when there is no room.
static inline int *op_words(sq_gpu_be *be, size_t words, int **dev)
{
    char *d = NULL;
    int *h = (int *)be_op_space(be, words * sizeof(int), &d);
    *dev = (int *)d;
    return h;
}

// Sends words [at_g, words) of op_words' hbuf: the scale g at at_g, the
// nlq corrections lq after it, then what the caller wrote (the plans). The
// words before at_g are the op's kernels' outputs, each written before it
// is read, so they are neither cleared nor sent. 0, or 1 (the sticky
// error) when bad (host buffers that could not be made) or the copy fails.
static inline int op_send_words(sq_gpu_be *be, int *hbuf, int *dev, size_t words, int bad,
                                size_t at_g, float g, const float *lq, size_t nlq)
{
    if (bad) {
        be_note(be, cudaErrorMemoryAllocation, "sampled loss: host buffers");
        return 1;
    }
    memcpy(hbuf + at_g, &g, sizeof g);
    if (nlq)
        memcpy(hbuf + at_g + 1, lq, nlq * sizeof(float));
    return be_op_send(be, (const char *)(hbuf + at_g), (char *)(dev + at_g),
                      (words - at_g) * sizeof(int)) != 0;
}

// The scatter of both gradients of the pairs p = i (K + 1) + k + 1 of n
// entries (k = -1: the positive pos[i], else neg[i K + k]): the live
// pairs' keys and sources bucketed on the host, the CSRs in `ints`
// (uploaded by the caller's one be_op_upload, at its device offset).
struct pair_plan {
    bucketing e, h; // dE by item (source: the entry's row of h), dh by row
};

// Ints of a pair_plan of n entries of K negatives (both CSRs).
static inline size_t pair_plan_ints(int n, int K)
{
    return 2 * bucket_ints(n * (K + 1));
}

// A pair is live when its entry has a target and its item is not 0;
// mask_hits: nor a negative equal to the positive (the masked hits of
// ops.h 10c and 10d).
static inline int pair_plan_make(pair_plan *pl, int *ints, const int *hrows, const int *hpos,
                                 const int *hneg, int n, int K, int mask_hits)
{
    int P = n * (K + 1), L = 0, maxitem = 0, maxrow = 0;
    int *buf = (int *)malloc(sizeof(int) * ((size_t)P * 3 + 1));
    if (!buf)
        return -1;
    int *lp = buf, *item = buf + P, *row = buf + 2 * (size_t)P;
    for (int i = 0; i < n; i++) {
        if (!hpos[i])
            continue;
        int ri = hrows ? hrows[i] : i;
        for (int k = -1; k < K; k++) {
            int it = k < 0 ? hpos[i] : hneg[(size_t)i * K + k];
            if (!it || (mask_hits && k >= 0 && it == hpos[i]))
                continue;
            lp[L] = i * (K + 1) + k + 1;
            item[L] = it;
            row[L++] = ri;
            maxitem = it > maxitem ? it : maxitem;
            maxrow = ri > maxrow ? ri : maxrow;
        }
    }
    int rc = bucket_pairs(&pl->e, item, row, lp, L, P, maxitem + 1, ints);
    if (!rc)
        rc = bucket_pairs(&pl->h, row, item, lp, L, P, maxrow + 1, ints + bucket_ints(P));
    free(buf);
    return rc;
}

// pair_plan_make on the host twins of a step's ids (host_ids): 0, or 1
// when an array cannot be read or the plan fails. own[3] holds what was
// downloaded (free_ids).
static inline int pair_plan_ids(sq_gpu_be *be, pair_plan *pl, int *ints, const int *rows,
                                const int *pos, const int *neg, int n, int K, int mask_hits,
                                int *own[3])
{
    const int *hrows = host_ids(be, rows, (size_t)n, &own[0]);
    const int *hpos = host_ids(be, pos, (size_t)n, &own[1]);
    const int *hneg = host_ids(be, neg, (size_t)n * K, &own[2]);
    return (rows && !hrows) || !hpos || (K && !hneg) ||
           pair_plan_make(pl, ints, hrows, hpos, hneg, n, K, mask_hits) != 0;
}

static inline void free_ids(int *own[3])
{
    for (int i = 0; i < 3; i++)
        free(own[i]);
}

// Queues both scatters (dE and dbias by item, dh by row) of a plan whose
// CSRs were uploaded at dev (the host copy at hints): P = n (K + 1) pairs,
// coef their coefficients on the device; a graph's grid the most buckets.
static inline void pair_plan_scatter(sq_gpu_be *be, const pair_plan *pl, const int *hints,
                                     const int *dev, int P, float *dh, float *dE, float *dbias,
                                     const float *h, const float *E, const float *coef, int C)
{
    int graph = be->gmode != BE_G_EAGER;
    if (pl->e.nb == 0 && !graph)
        return;
#define DEV(p) (dev + ((p) - hints))
    SQ_LAUNCH(be, bucket_kernel, graph ? P : pl->e.nb, LOSS_THREADS, 0, dE, dbias, h, coef,
              coef, DEV(pl->e.start), DEV(pl->e.dest), DEV(pl->e.pair), DEV(pl->e.src),
              DEV(pl->e.src + P), C);
    SQ_LAUNCH(be, bucket_kernel, graph ? P : pl->h.nb, LOSS_THREADS, 0, dh, (float *)NULL, E,
              coef, (const float *)NULL, DEV(pl->h.start), DEV(pl->h.dest), DEV(pl->h.pair),
              DEV(pl->h.src), DEV(pl->h.src + P), C);
#undef DEV
}

#endif
