// k_silu.cu - HSTU's pointwise SiLU attention over packed segments
// (attn_silu.h): for rows j <= i of one segment and head h,
//   s_ij = q_i . k_j + rab[h, i - j],  a_ij = scale silu(s_ij),
//   out_i = sum_{j <= i} a_ij v_j,
// forward and backward, the GPU twins of attn_silu.c's
// sq_attn_silu_forward/backward.
//
// A warp per (row, head), as k_attn.cu: each lane holds the head's
// dimensions lane, lane + 32, ... (heads of up to 32 SL_M dimensions, in
// registers), dot products are warp sums in a fixed tree. Nothing is
// cached: the backward recomputes s (as the CPU does). With
// ds_ij = scale silu'(s_ij) (dout_i . v_j):
//   dq_i += sum_j ds_ij k_j                 a warp per query row, keys in order
//   dk_j += sum_i ds_ij q_i,                a warp per key row, queries in order
//   dv_j += sum_i a_ij dout_i
//   drab[h, d] += sum_b sum_{i - j = d} ds_ij   a warp per (segment, head,
//                 distance) into the caller's scratch (attn_silu.h's B H
//                 max_len), rows ascending as the CPU's, then a thread per
//                 (head, distance) adds the segments' sums in order.
// Every sum in a fixed order, no atomics: two runs give the same bits;
// equal to the CPU's to float rounding (expf here, the CPU's exp; warp
// trees here, 8 partial sums there).
//
// Budget: __launch_bounds__(256) (8 warps), no shared memory, about 30
// registers of head data a thread.
#include "common.cuh"

#define SL_WARPS 8
#define SL_M 4 // dimensions a lane holds: heads of up to 128
#define SL_MAXHS (32 * SL_M)

#ifdef SQ_SIM
#define SL_UNROLL
#else
#define SL_UNROLL _Pragma("unroll")
#endif

// real.h's sq_sigmoid: evaluated on the side where exp cannot overflow
static __device__ __forceinline__ float sl_sigmoid(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

// r[m] = p[lane + 32 m] (0 past n)
static __device__ __forceinline__ void sl_load(float *r, const float *p, int n, int lane)
{
    SL_UNROLL
    for (int m = 0; m < SL_M; m++) {
        int d = lane + 32 * m;
        r[m] = d < n ? p[d] : 0.0f;
    }
}

// p[lane + 32 m] += r[m] (d < n)
static __device__ __forceinline__ void sl_add(float *p, const float *r, int n, int lane)
{
    SL_UNROLL
    for (int m = 0; m < SL_M; m++) {
        int d = lane + 32 * m;
        if (d < n)
            p[d] += r[m];
    }
}

// a . b over the lanes' dimensions (every lane gets it)
static __device__ __forceinline__ float sl_dot(const float *a, const float *b)
{
    float s = 0;
    SL_UNROLL
    for (int m = 0; m < SL_M; m++)
        s += a[m] * b[m];
    return be_warp_sum(s);
}

// acc += a x
static __device__ __forceinline__ void sl_axpy(float *acc, float a, const float *x)
{
    SL_UNROLL
    for (int m = 0; m < SL_M; m++)
        acc[m] += a * x[m];
}

// The shapes every kernel takes.
struct sl_args {
    int ld, B, T, H, dqk, dv, max_len;
    float scale;
};

// The pair (i, j)'s score s and, with dout_i . v_j = da, ds; *coef = a_ij
static __device__ __forceinline__ float sl_ds(float s, float da, float scale, float *coef)
{
    float sg = sl_sigmoid(s);
    *coef = scale * s * sg;
    return scale * da * sg * (1.0f + s * (1.0f - sg));
}

static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_fwd(
    float *out, const float *q, const float *k, const float *v, const float *rab,
    const int *off, sl_args a)
{
    int w = blockIdx.x * SL_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= a.T * a.H) // whole warps leave together: the shuffles stay full
        return;
    int i = w / a.H, h = w % a.H, s0 = off[be_seg_of(off, a.B, i)];
    const float *bias = rab + (size_t)h * a.max_len;
    float qi[SL_M], kj[SL_M], vj[SL_M], acc[SL_M] = {0};
    sl_load(qi, q + (size_t)i * a.ld + (size_t)h * a.dqk, a.dqk, lane);
    for (int j = s0; j <= i; j++) {
        size_t rj = (size_t)j * a.ld;
        sl_load(kj, k + rj + (size_t)h * a.dqk, a.dqk, lane);
        sl_load(vj, v + rj + (size_t)h * a.dv, a.dv, lane);
        float s = sl_dot(qi, kj) + bias[i - j];
        sl_axpy(acc, a.scale * s * sl_sigmoid(s), vj);
    }
    float *oi = out + (size_t)i * a.H * a.dv + (size_t)h * a.dv;
    SL_UNROLL
    for (int m = 0; m < SL_M; m++) {
        int d = lane + 32 * m;
        if (d < a.dv)
            oi[d] = acc[m];
    }
}

// dq_i += sum_{j <= i} ds_ij k_j
static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_dq(
    float *dq, const float *dout, const float *q, const float *k, const float *v,
    const float *rab, const int *off, sl_args a)
{
    int w = blockIdx.x * SL_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= a.T * a.H)
        return;
    int i = w / a.H, h = w % a.H, s0 = off[be_seg_of(off, a.B, i)];
    const float *bias = rab + (size_t)h * a.max_len;
    float qi[SL_M], gi[SL_M], kj[SL_M], vj[SL_M], r[SL_M] = {0}, coef;
    size_t ri = (size_t)i * a.ld;
    sl_load(qi, q + ri + (size_t)h * a.dqk, a.dqk, lane);
    sl_load(gi, dout + (size_t)i * a.H * a.dv + (size_t)h * a.dv, a.dv, lane);
    for (int j = s0; j <= i; j++) {
        size_t rj = (size_t)j * a.ld;
        sl_load(kj, k + rj + (size_t)h * a.dqk, a.dqk, lane);
        sl_load(vj, v + rj + (size_t)h * a.dv, a.dv, lane);
        float s = sl_dot(qi, kj) + bias[i - j];
        sl_axpy(r, sl_ds(s, sl_dot(gi, vj), a.scale, &coef), kj);
    }
    sl_add(dq + ri + (size_t)h * a.dqk, r, a.dqk, lane);
}

// dk_j += sum_{i >= j} ds_ij q_i, dv_j += sum_{i >= j} a_ij dout_i (either
// may be NULL)
static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_dkv(
    float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
    const float *rab, const int *off, sl_args a)
{
    int w = blockIdx.x * SL_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= a.T * a.H)
        return;
    int j = w / a.H, h = w % a.H, s1 = off[be_seg_of(off, a.B, j) + 1];
    const float *bias = rab + (size_t)h * a.max_len;
    float kj[SL_M], vj[SL_M], qi[SL_M], gi[SL_M], ak[SL_M] = {0}, av[SL_M] = {0}, coef;
    size_t rj = (size_t)j * a.ld;
    sl_load(kj, k + rj + (size_t)h * a.dqk, a.dqk, lane);
    sl_load(vj, v + rj + (size_t)h * a.dv, a.dv, lane);
    for (int i = j; i < s1; i++) {
        sl_load(qi, q + (size_t)i * a.ld + (size_t)h * a.dqk, a.dqk, lane);
        sl_load(gi, dout + (size_t)i * a.H * a.dv + (size_t)h * a.dv, a.dv, lane);
        float s = sl_dot(qi, kj) + bias[i - j];
        float ds = sl_ds(s, sl_dot(gi, vj), a.scale, &coef);
        sl_axpy(ak, ds, qi);
        sl_axpy(av, coef, gi);
    }
    if (dk)
        sl_add(dk + rj + (size_t)h * a.dqk, ak, a.dqk, lane);
    if (dv)
        sl_add(dv + rj + (size_t)h * a.dv, av, a.dv, lane);
}

// part[(b H + h) max_len + d] = sum over rows i ascending of segment b of
// ds(i, i - d) (0 for d >= its length): the CPU's per-pair partial sums
static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_drab_part(
    float *part, const float *dout, const float *q, const float *k, const float *v,
    const float *rab, const int *off, sl_args a)
{
    int w = blockIdx.x * SL_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= a.B * a.H * a.max_len)
        return;
    int d = w % a.max_len, bh = w / a.max_len, b = bh / a.H, h = bh % a.H;
    int o = off[b], L = off[b + 1] - o;
    float bias = rab[(size_t)h * a.max_len + d];
    float qi[SL_M], gi[SL_M], kj[SL_M], vj[SL_M], acc = 0, coef;
    for (int i = d; i < L; i++) {
        size_t ri = (size_t)(o + i) * a.ld, rj = (size_t)(o + i - d) * a.ld;
        sl_load(qi, q + ri + (size_t)h * a.dqk, a.dqk, lane);
        sl_load(kj, k + rj + (size_t)h * a.dqk, a.dqk, lane);
        sl_load(gi, dout + (size_t)(o + i) * a.H * a.dv + (size_t)h * a.dv, a.dv, lane);
        sl_load(vj, v + rj + (size_t)h * a.dv, a.dv, lane);
        float s = sl_dot(qi, kj) + bias;
        acc += sl_ds(s, sl_dot(gi, vj), a.scale, &coef);
    }
    if (lane == 0)
        part[w] = acc;
}

// drab[h, d] += sum_b part[b, h, d], segments in order
static __global__ __launch_bounds__(256) void k_silu_drab_sum(float *drab, const float *part,
                                                             int B, int H, int max_len)
{
    int hd = blockIdx.x * blockDim.x + threadIdx.x;
    if (hd >= H * max_len)
        return;
    int h = hd / max_len, d = hd % max_len;
    float acc = 0;
    for (int b = 0; b < B; b++)
        acc += part[((size_t)b * H + h) * max_len + d];
    drab[hd] += acc;
}

// The shapes, T = off[B] from the staged host offsets; -1 (and the sticky
// error) when off is not a staged host array, a head is over SL_MAXHS
// dimensions or a segment is longer than max_len (rab has no such
// distance).
static int sl_setup(sq_gpu_be *be, sl_args *a, const int *off, int B, int H, int dqk, int dv,
                    int ld, int max_len, float scale, const char *what)
{
    const int *h = be_host_ints(be, off);
    int ok = h && B >= 0 && H >= 1 && dqk >= 1 && dqk <= SL_MAXHS && dv >= 1 &&
             dv <= SL_MAXHS && max_len >= 1;
    for (int b = 0; ok && b < B; b++)
        ok = h[b + 1] - h[b] <= max_len;
    if (!ok) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    *a = sl_args{ld, B, h[B], H, dqk, dv, max_len, scale};
    return a->T > 0 ? 0 : -1;
}

static unsigned sl_blocks(size_t warps)
{
    return be_blocks(warps, SL_WARPS);
}

void be_attn_silu_forward(sq_gpu_be *be, float *out, const float *q, const float *k,
                          const float *v, int ld, const float *rab, const int *off, int B,
                          int H, int qk_dim, int v_dim, int max_len, float scale)
{
    sl_args a;
    if (sl_setup(be, &a, off, B, H, qk_dim, v_dim, ld, max_len, scale,
                 "attn_silu_forward: off not staged, heads over 128 or a segment over max_len"))
        return;
    SQ_LAUNCH(be, k_silu_fwd, sl_blocks((size_t)a.T * H), SL_WARPS * 32, 0, out, q, k, v, rab,
              be_ints(be, off), a);
}

void be_attn_silu_backward(sq_gpu_be *be, float *dq, float *dk, float *dv, float *drab,
                           float *scratch, const float *dout, const float *q, const float *k,
                           const float *v, int ld, const float *rab, const int *off, int B,
                           int H, int qk_dim, int v_dim, int max_len, float scale)
{
    sl_args a;
    if (sl_setup(be, &a, off, B, H, qk_dim, v_dim, ld, max_len, scale,
                 "attn_silu_backward: off not staged, heads over 128 or a segment over max_len"))
        return;
    const int *doff = be_ints(be, off);
    unsigned blocks = sl_blocks((size_t)a.T * H);
    if (dq)
        SQ_LAUNCH(be, k_silu_dq, blocks, SL_WARPS * 32, 0, dq, dout, q, k, v, rab, doff, a);
    if (dk || dv)
        SQ_LAUNCH(be, k_silu_dkv, blocks, SL_WARPS * 32, 0, dk, dv, dout, q, k, v, rab, doff, a);
    if (!drab)
        return;
    size_t nhd = (size_t)H * max_len;
    SQ_LAUNCH(be, k_silu_drab_part, sl_blocks((size_t)B * nhd), SL_WARPS * 32, 0, scratch,
              dout, q, k, v, rab, doff, a);
    SQ_LAUNCH(be, k_silu_drab_sum, be_blocks(nhd, 256), 256, 0, drab, scratch, B, H, max_len);
}
