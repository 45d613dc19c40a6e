// k_silu.cu - HSTU's pointwise SiLU attention over packed segments
// (attn_silu.h): for rows j <= i of one segment and head h,
//   s_ij = q_i . k_j + rab[h, i - j],  a_ij = scale silu(s_ij),
//   out_i = sum_{j <= i} a_ij v_j,
// forward and backward, the GPU twins of attn_silu.c's
// sq_attn_silu_forward/backward.
//
// Tiles, as k_attn.cu: a block takes 8 rows of one segment (a warp a row)
// and one head, and the other side's rows pass through shared memory 32 at
// a time from the segment's start, read once for the block's 8 rows; for
// a tile's pairs the lanes are its rows, for the sums into a row the
// lanes hold the head's dimensions lane, lane + 32, ... (heads of up to
// 32 SL_M dimensions). Nothing is cached: the backward recomputes s (as
// the CPU does). With ds_ij = scale silu'(s_ij) (dout_i . v_j):
//   dq_i += sum_j ds_ij k_j                 a block a query tile, keys in order
//   dk_j += sum_i ds_ij q_i,                a block a key tile, queries in order
//   dv_j += sum_i a_ij dout_i
//   drab[h, d] += sum_b sum_{i - j = d} ds_ij   a warp per (segment, head,
//                 distance) into the caller's scratch (attn_silu.h's B H
//                 max_len), a lane a row (rows l, l + 32, ...), then a
//                 thread per (head, distance) adds the segments' sums in
//                 order.
// Every sum in a fixed order, no atomics: two runs give the same bits;
// equal to the CPU's to float rounding (expf here, the CPU's exp; other
// orders of the dot products' terms). Tiles counted from each segment's
// start keep scoring batch-invariant.
//
// Budget: __launch_bounds__(256) (8 warps); static shared memory 36 KiB
// (forward) and 40 KiB (dq, dk/dv); no spills. drab's kernels: no shared
// memory, 48 registers (sm_90).
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

// ---- the tiled forward, dq and dk/dv ------------------------------------
// A block takes SL_ROWS rows of one segment (a warp a row) and one head;
// the other side's rows pass through shared memory SL_KEYS at a time from
// the segment's start, each read once for the block's rows (the first
// form, a warp a row, read them once a row and waited on two warp sums a
// pair). For the pairs the lanes are the other side's rows (lane j, row
// k0 + j); for the sums into a row the lanes are its dimensions (lane +
// 32 m), the pairs' coefficients passed by shuffles.
#define SL_ROWS SL_WARPS // a block's own rows: a warp each
#define SL_KEYS 32       // the other side's rows a tile: a warp's lanes
#define SL_PAD (SL_MAXHS + 1)

// rows [r0, r0 + n) of x (stride ld, columns col .. col + w - 1) into
// s[.][ldsm], zeros past n rows and w columns, for `rows` rows
static __device__ void sl_tile(float *s, int ldsm, int rows, const float *x, size_t ld,
                               size_t col, int r0, int n, int w)
{
    for (int e = threadIdx.x; e < rows * SL_MAXHS; e += SL_WARPS * 32) {
        int i = e / SL_MAXHS, d = e % SL_MAXHS;
        s[i * ldsm + d] = i < n && d < w ? x[(size_t)(r0 + i) * ld + col + d] : 0.0f;
    }
}

// x[row] . y[lane] over n dimensions: a row broadcast, y read by lane
static __device__ __forceinline__ float sl_rdot(const float *x, const float *y, int ldy, int n)
{
    int lane = threadIdx.x % 32;
    float s = 0;
    for (int d = 0; d < n; d++)
        s += x[d] * y[lane * ldy + d];
    return s;
}

// acc[m] += sum_{j < n} c(lane j) z[j][lane + 32 m]
static __device__ __forceinline__ void sl_mix(float *acc, float c, const float *z, int ldz, int n)
{
    int lane = threadIdx.x % 32;
    for (int j = 0; j < n; j++) {
        float cj = __shfl_sync(0xffffffffu, c, j);
        SL_UNROLL
        for (int m = 0; m < SL_M; m++)
            acc[m] += cj * z[j * ldz + lane + 32 * m];
    }
}

static __global__ __launch_bounds__(SL_WARPS * 32, 1) void k_silu_fwd(
    float *out, const float *q, const float *k, const float *v, const float *rab,
    const int *off, const int *tiles, sl_args a)
{
    __shared__ float qs[SL_ROWS * SL_MAXHS], ks[SL_KEYS * SL_PAD], vs[SL_KEYS * SL_MAXHS];
    int r0, s0, s1;
    if (!be_tile_of(tiles, off, a.B, &r0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, i = r0 + w;
    int n = s1 - r0 < SL_ROWS ? s1 - r0 : SL_ROWS, kend = r0 + n;
    const float *bias = rab + (size_t)h * a.max_len;
    size_t cq = (size_t)h * a.dqk, cv = (size_t)h * a.dv;
    float acc[SL_M] = {0};
    sl_tile(qs, SL_MAXHS, SL_ROWS, q, (size_t)a.ld, cq, r0, n, a.dqk);
    for (int k0 = s0; k0 < kend; k0 += SL_KEYS) {
        int nk = kend - k0 < SL_KEYS ? kend - k0 : SL_KEYS;
        __syncthreads(); // the last tile's readers are done (and qs is in)
        sl_tile(ks, SL_PAD, SL_KEYS, k, (size_t)a.ld, cq, k0, nk, a.dqk);
        sl_tile(vs, SL_MAXHS, SL_KEYS, v, (size_t)a.ld, cv, k0, nk, a.dv);
        __syncthreads();
        if (w >= n)
            continue; // warp-uniform
        int j = k0 + lane, ok = lane < nk && j <= i;
        float s = sl_rdot(qs + w * SL_MAXHS, ks, SL_PAD, a.dqk) + (ok ? bias[i - j] : 0.0f);
        sl_mix(acc, ok ? a.scale * s * sl_sigmoid(s) : 0.0f, vs, SL_MAXHS, nk);
    }
    if (w >= n)
        return;
    float *oi = out + (size_t)i * a.H * a.dv + cv;
    SL_UNROLL
    for (int m = 0; m < SL_M; m++) {
        int d = lane + 32 * m;
        if (d < a.dv)
            oi[d] = acc[m];
    }
}

// dq_i += sum_{j <= i} ds_ij k_j: a block a query tile, the keys in tiles
static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_dq(
    float *dq, const float *dout, const float *q, const float *k, const float *v,
    const float *rab, const int *off, const int *tiles, sl_args a)
{
    __shared__ float qs[SL_ROWS * SL_MAXHS], gs[SL_ROWS * SL_MAXHS];
    __shared__ float ks[SL_KEYS * SL_PAD], vs[SL_KEYS * SL_PAD];
    int r0, s0, s1;
    if (!be_tile_of(tiles, off, a.B, &r0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, i = r0 + w;
    int n = s1 - r0 < SL_ROWS ? s1 - r0 : SL_ROWS, kend = r0 + n;
    const float *bias = rab + (size_t)h * a.max_len;
    size_t cq = (size_t)h * a.dqk, cv = (size_t)h * a.dv;
    float r[SL_M] = {0}, coef = 0;
    sl_tile(qs, SL_MAXHS, SL_ROWS, q, (size_t)a.ld, cq, r0, n, a.dqk);
    sl_tile(gs, SL_MAXHS, SL_ROWS, dout, (size_t)a.H * a.dv, cv, r0, n, a.dv);
    for (int k0 = s0; k0 < kend; k0 += SL_KEYS) {
        int nk = kend - k0 < SL_KEYS ? kend - k0 : SL_KEYS;
        __syncthreads();
        sl_tile(ks, SL_PAD, SL_KEYS, k, (size_t)a.ld, cq, k0, nk, a.dqk);
        sl_tile(vs, SL_PAD, SL_KEYS, v, (size_t)a.ld, cv, k0, nk, a.dv);
        __syncthreads();
        if (w >= n)
            continue;
        int j = k0 + lane, ok = lane < nk && j <= i;
        float s = sl_rdot(qs + w * SL_MAXHS, ks, SL_PAD, a.dqk) + (ok ? bias[i - j] : 0.0f);
        float da = sl_rdot(gs + w * SL_MAXHS, vs, SL_PAD, a.dv);
        sl_mix(r, ok ? sl_ds(s, da, a.scale, &coef) : 0.0f, ks, SL_PAD, nk);
    }
    if (w < n)
        sl_add(dq + (size_t)i * a.ld + cq, r, a.dqk, lane);
}

// dk_j += sum_{i >= j} ds_ij q_i, dv_j += sum_{i >= j} a_ij dout_i (either
// may be NULL): a block a key tile, the queries from its first row in tiles
static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_dkv(
    float *dk, float *dv, const float *dout, const float *q, const float *k, const float *v,
    const float *rab, const int *off, const int *tiles, sl_args a)
{
    __shared__ float ks[SL_ROWS * SL_MAXHS], vs[SL_ROWS * SL_MAXHS];
    __shared__ float qs[SL_KEYS * SL_PAD], gs[SL_KEYS * SL_PAD];
    int c0, s0, s1;
    if (!be_tile_of(tiles, off, a.B, &c0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, j = c0 + w;
    int nk = s1 - c0 < SL_ROWS ? s1 - c0 : SL_ROWS;
    const float *bias = rab + (size_t)h * a.max_len;
    size_t cq = (size_t)h * a.dqk, cv = (size_t)h * a.dv;
    float ak[SL_M] = {0}, av[SL_M] = {0}, coef = 0;
    sl_tile(ks, SL_MAXHS, SL_ROWS, k, (size_t)a.ld, cq, c0, nk, a.dqk);
    sl_tile(vs, SL_MAXHS, SL_ROWS, v, (size_t)a.ld, cv, c0, nk, a.dv);
    for (int i0 = c0; i0 < s1; i0 += SL_KEYS) {
        int ni = s1 - i0 < SL_KEYS ? s1 - i0 : SL_KEYS;
        __syncthreads();
        sl_tile(qs, SL_PAD, SL_KEYS, q, (size_t)a.ld, cq, i0, ni, a.dqk);
        sl_tile(gs, SL_PAD, SL_KEYS, dout, (size_t)a.H * a.dv, cv, i0, ni, a.dv);
        __syncthreads();
        if (w >= nk)
            continue;
        int i = i0 + lane, ok = lane < ni && i >= j;
        float s = sl_rdot(ks + w * SL_MAXHS, qs, SL_PAD, a.dqk) + (ok ? bias[i - j] : 0.0f);
        float da = sl_rdot(vs + w * SL_MAXHS, gs, SL_PAD, a.dv);
        float ds = ok ? sl_ds(s, da, a.scale, &coef) : 0.0f;
        sl_mix(ak, ds, qs, SL_PAD, ni);
        sl_mix(av, ok ? coef : 0.0f, gs, SL_PAD, ni);
    }
    if (w >= nk)
        return;
    if (dk)
        sl_add(dk + (size_t)j * a.ld + cq, ak, a.dqk, lane);
    if (dv)
        sl_add(dv + (size_t)j * a.ld + cv, av, a.dv, lane);
}

// part[(b H + h) max_len + d] = the sum over the rows i of segment b of
// ds(i, i - d) (0 for d >= its length), a warp a (segment, head,
// distance): lane l takes rows d + l, d + l + 32, ..., each pair's two
// dot products in the lane (rows differ across the lanes, the L1 holds
// them), and the lanes' sums meet in one warp sum at the end, rather than
// two warp sums a pair walking the rows one at a time
static __global__ __launch_bounds__(SL_WARPS * 32) void k_silu_drab_part(
    float *part, const float *dout, const float *q, const float *k, const float *v,
    const float *rab, const int *off, sl_args a)
{
    int w = blockIdx.x * SL_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= a.B * a.H * a.max_len)
        return;
    int d = w % a.max_len, bh = w / a.max_len, b = bh / a.H, h = bh % a.H;
    int o = off[b], L = off[b + 1] - o;
    float bias = rab[(size_t)h * a.max_len + d], acc = 0, coef;
    for (int i = d + lane; i < L; i += 32) {
        size_t ri = (size_t)(o + i) * a.ld, rj = (size_t)(o + i - d) * a.ld;
        const float *qi = q + ri + (size_t)h * a.dqk, *kj = k + rj + (size_t)h * a.dqk;
        const float *gi = dout + (size_t)(o + i) * a.H * a.dv + (size_t)h * a.dv;
        const float *vj = v + rj + (size_t)h * a.dv;
        float s = 0, da = 0;
        for (int e = 0; e < a.dqk; e++)
            s += qi[e] * kj[e];
        for (int e = 0; e < a.dv; e++)
            da += gi[e] * vj[e];
        acc += sl_ds(s + bias, da, a.scale, &coef);
    }
    acc = be_warp_sum(acc);
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
    int n;
    const int *tiles = be_seg_tiles(be, be_host_ints(be, off), B, SL_ROWS, &n,
                                    "attn_silu_forward: tiles");
    if (!tiles)
        return;
    SQ_LAUNCH(be, k_silu_fwd, dim3((unsigned)n, (unsigned)H), SL_WARPS * 32, 0, out, q, k, v,
              rab, be_ints(be, off), tiles, a);
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
    int n;
    const int *tiles = be_seg_tiles(be, be_host_ints(be, off), B, SL_ROWS, &n,
                                    "attn_silu_backward: tiles");
    if (!tiles)
        return;
    const int *doff = be_ints(be, off); // after the upload (its growth moves the staged ints)
    dim3 grid((unsigned)n, (unsigned)H);
    if (dq)
        SQ_LAUNCH(be, k_silu_dq, grid, SL_WARPS * 32, 0, dq, dout, q, k, v, rab, doff, tiles, a);
    if (dk || dv)
        SQ_LAUNCH(be, k_silu_dkv, grid, SL_WARPS * 32, 0, dk, dv, dout, q, k, v, rab, doff,
                  tiles, a);
    if (!drab)
        return;
    size_t nhd = (size_t)H * max_len;
    SQ_LAUNCH(be, k_silu_drab_part, sl_blocks((size_t)B * nhd), SL_WARPS * 32, 0, scratch,
              dout, q, k, v, rab, doff, a);
    SQ_LAUNCH(be, k_silu_drab_sum, be_blocks(nhd, 256), 256, 0, drab, scratch, B, H, max_len);
}
