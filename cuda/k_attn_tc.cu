// k_attn_tc.cu - softmax attention over packed segments on the tensor
// cores (tf32 WMMA, m16n16k8): k_attn.cu's op and tiles, for a context
// whose GEMMs are not fp32 (--precision tf32, the GPU's default, or bf16)
// and not in scoring's batch-invariant mode. k_attn.cu dispatches.
//
// The tiles are k_attn.cu's: a block takes TC_ROWS = 32 rows of one
// segment and one head, tiles start at multiples of 32 from their
// segment's start (so a row's sums do not follow the packing), and the
// keys pass through shared memory 32 at a time. Every product of two tiles
// is a warp's WMMA on 16 x 16 fragments, the inputs rounded to tf32 as
// they are staged (cuBLAS's tf32 GEMMs round the same way); the softmax,
// the masks and the log-sum-exp are fp32 on the CUDA cores.
//
// A fragment's element-to-lane mapping is the hardware's, so an
// accumulator cannot be rescaled row by row as an online softmax would.
// The forward runs two passes over the keys instead: the first the row
// maxima and sums (the scores alone), the second the probabilities
// exp(s - lse), already normalised, into O += P V on the fragments.
// The backward needs no rescaling (dS = P (dP - D) from the saved lse):
//   dq: a block a query tile; S = Q K^T and dP = dO V^T side by side
//       (warps 0-3, 4-7), then dQ += dS K
//   dkv: a block a key tile; S^T = K Q^T and dP^T = V dO^T, then
//       dV += P^T dO and dK += dS^T Q, each warp a fragment of both
// Every sum in a fixed order, no atomics: two runs give the same bits.
//
// Heads of up to 64 dimensions (padded with zeros to 64, the fragments'
// 16). Budget: __launch_bounds__(256) (the backward's (256, 2): sm_80
// spilled at its own choice of 80 registers), 116/80 (forward, sm_80/
// sm_90) and 128 (dq; dk, dv) registers, static shared memory 30.1 KiB
// (forward) and 43.3 KiB (backward), no spills. The simulated device runs the WMMA calls
// as tests/sim/sim_wmma.h says (alignment and leading dimensions checked).
#include "common.cuh"

#ifndef SQ_SIM
#include <mma.h>
#endif

using namespace nvcuda;

#define TC_ROWS 32 // a tile's rows: queries or keys
#define TC_WARPS 8
#define TC_HP 64   // head dimensions, padded
#define TC_LD 68   // a q/k/v/dout tile's row stride: a multiple of 4, spread banks
#define TC_SLD 36  // a score tile's row stride
#define TC_RPW (TC_ROWS / TC_WARPS) // score rows a warp in the softmax steps

typedef wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tc_a;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major> tc_br;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major> tc_bc;
typedef wmma::fragment<wmma::accumulator, 16, 16, 8, float> tc_acc;

// rows [r0, r0 + n) of x (row stride ld, the head's columns from col) into
// s[TC_ROWS][TC_LD], rounded to tf32; zeros past n rows and hs columns
static __device__ void tc_load(float *s, const float *x, size_t ld, size_t col, int r0, int n,
                               int hs)
{
    for (int e = threadIdx.x; e < TC_ROWS * TC_HP; e += TC_WARPS * 32) {
        int i = e / TC_HP, d = e % TC_HP;
        float v = i < n && d < hs ? x[(size_t)(r0 + i) * ld + col + d] : 0.0f;
        s[i * TC_LD + d] = wmma::__float_to_tf32(v);
    }
}

// acc (fragment (fi, fj) of a TC_ROWS x TC_ROWS product) = A B^T over the
// kd padded dimensions: A's and B's rows are the tiles' (row-major, TC_LD)
static __device__ __forceinline__ void tc_abt(tc_acc &acc, const float *A, const float *B, int fi,
                                              int fj, int kd)
{
    tc_a a;
    tc_bc b;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < kd; k += 8) {
        wmma::load_matrix_sync(a, A + fi * 16 * TC_LD + k, TC_LD);
        wmma::load_matrix_sync(b, B + fj * 16 * TC_LD + k, TC_LD);
        wmma::mma_sync(acc, a, b, acc);
    }
}

// acc (fragment (fi, fj) of a TC_ROWS x TC_HP result) += P Z: P's rows
// (TC_SLD apart) over the tile's TC_ROWS rows of Z (TC_LD apart)
static __device__ __forceinline__ void tc_pz(tc_acc &acc, const float *P, const float *Z, int fi,
                                             int fj)
{
    tc_a a;
    tc_br b;
    for (int k = 0; k < TC_ROWS; k += 8) {
        wmma::load_matrix_sync(a, P + fi * 16 * TC_SLD + k, TC_SLD);
        wmma::load_matrix_sync(b, Z + k * TC_LD + fj * 16, TC_LD);
        wmma::mma_sync(acc, a, b, acc);
    }
}

// The padded dimensions a product sums: hs to a multiple of 8
static __device__ __forceinline__ int tc_kd(int hs)
{
    return (hs + 7) / 8 * 8;
}

// fragment (fi, fj) of a TC_ROWS x TC_ROWS score tile (warps 0-3)
static __device__ __forceinline__ void tc_scores(float *S, const float *A, const float *B, int w,
                                                 int kd)
{
    tc_acc acc;
    tc_abt(acc, A, B, w / 2, w % 2, kd);
    wmma::store_matrix_sync(S + (w / 2) * 16 * TC_SLD + (w % 2) * 16, acc, TC_SLD,
                            wmma::mem_row_major);
}

// The forward's first pass over a key tile: row r of the warp's rows
// updates its running maximum m and sum l over the tile's allowed keys
// (lane j: key k0 + j)
static __device__ __forceinline__ void tc_stats(float m[TC_RPW], float l[TC_RPW], const float *S,
                                                int rb, int n, int nk, int k0, int r0, float scale,
                                                int causal)
{
    int lane = threadIdx.x % 32;
    for (int r = 0; r < TC_RPW; r++) {
        int ok = rb + r < n && lane < nk && (!causal || k0 + lane <= r0 + rb + r);
        float sr = ok ? scale * S[(rb + r) * TC_SLD + lane] : -INFINITY, mt = be_warp_max(sr);
        if (mt == -INFINITY)
            continue; // no key of this tile for the row (warp-uniform)
        float mn = fmaxf(m[r], mt);
        l[r] = l[r] * expf(m[r] - mn) + be_warp_sum(ok ? expf(sr - mn) : 0.0f);
        m[r] = mn;
    }
}

static __global__ __launch_bounds__(TC_WARPS * 32) void k_attn_tc_fwd(
    float *out, float *lse, const float *q, const float *k, const float *v, int ld,
    const int *off, int B, const int *tiles, int H, int hs, float scale, int causal)
{
    __shared__ __align__(32) float qs[TC_ROWS * TC_LD];
    __shared__ __align__(32) float ks[TC_ROWS * TC_LD];
    __shared__ __align__(32) float vs[TC_ROWS * TC_LD];
    __shared__ __align__(32) float Ss[TC_ROWS * TC_SLD];
    __shared__ float Ls[TC_ROWS];
    int r0, s0, s1;
    if (!be_tile_of(tiles, off, B, &r0, &s0, &s1))
        return; // the whole block
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, rb = w * TC_RPW;
    int n = s1 - r0 < TC_ROWS ? s1 - r0 : TC_ROWS, kend = causal ? r0 + n : s1, kd = tc_kd(hs);
    size_t col = (size_t)h * hs;
    tc_load(qs, q, (size_t)ld, col, r0, n, hs);
    float m[TC_RPW], l[TC_RPW];
    for (int r = 0; r < TC_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
    }
    for (int k0 = s0; k0 < kend; k0 += TC_ROWS) { // pass 1: the rows' lse
        int nk = kend - k0 < TC_ROWS ? kend - k0 : TC_ROWS;
        __syncthreads(); // the last tile's readers are done (and qs is in)
        tc_load(ks, k, (size_t)ld, col, k0, nk, hs);
        __syncthreads();
        if (w < 4)
            tc_scores(Ss, qs, ks, w, kd);
        __syncthreads();
        tc_stats(m, l, Ss, rb, n, nk, k0, r0, scale, causal);
    }
    if (lane == 0)
        for (int r = 0; r < TC_RPW; r++)
            Ls[rb + r] = rb + r < n ? m[r] + logf(l[r]) : 0.0f;
    tc_acc o;
    wmma::fill_fragment(o, 0.0f);
    for (int k0 = s0; k0 < kend; k0 += TC_ROWS) { // pass 2: O = P V
        int nk = kend - k0 < TC_ROWS ? kend - k0 : TC_ROWS;
        __syncthreads();
        tc_load(ks, k, (size_t)ld, col, k0, nk, hs);
        tc_load(vs, v, (size_t)ld, col, k0, nk, hs);
        __syncthreads();
        if (w < 4)
            tc_scores(Ss, qs, ks, w, kd);
        __syncthreads();
        for (int r = 0; r < TC_RPW; r++) { // P, normalised, in place
            int i = rb + r, ok = i < n && lane < nk && (!causal || k0 + lane <= r0 + i);
            float *sp = Ss + i * TC_SLD + lane;
            *sp = wmma::__float_to_tf32(ok ? expf(scale * *sp - Ls[i]) : 0.0f);
        }
        __syncthreads();
        tc_pz(o, Ss, vs, w / 4, w % 4);
    }
    __syncthreads(); // qs's last readers are done: O goes there
    wmma::store_matrix_sync(qs + (w / 4) * 16 * TC_LD + (w % 4) * 16, o, TC_LD,
                            wmma::mem_row_major);
    __syncthreads();
    size_t C = (size_t)H * hs;
    for (int e = threadIdx.x; e < TC_ROWS * TC_HP; e += TC_WARPS * 32) {
        int i = e / TC_HP, d = e % TC_HP;
        if (i < n && d < hs)
            out[(size_t)(r0 + i) * C + col + d] = qs[i * TC_LD + d];
    }
    if (threadIdx.x < (unsigned)n)
        lse[(size_t)(r0 + threadIdx.x) * H + h] = Ls[threadIdx.x];
}

// D_t = dout_t . out_t (fp32, from global memory) and lse of the rows
// [r0, r0 + n) into Ds and Ls (0 past n)
static __device__ void tc_rowvals(float *Ds, float *Ls, const float *dout, const float *out,
                                  const float *lse, size_t C, size_t col, int r0, int n, int hs,
                                  int H, int h)
{
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = 0; r < TC_RPW; r++) {
        int i = w * TC_RPW + r;
        size_t o = (size_t)(r0 + i) * C + col;
        float a = 0.0f;
        for (int d = lane; i < n && d < hs; d += 32)
            a += dout[o + d] * out[o + d];
        a = be_warp_sum(a);
        if (lane == 0) {
            Ds[i] = i < n ? a : 0.0f;
            Ls[i] = i < n ? lse[(size_t)(r0 + i) * H + h] : 0.0f;
        }
    }
}

// y[rows r0 .., the head's columns] += the TC_ROWS x TC_HP tile t (rows
// < n, columns < hs); set: y = 0 + t, y not read (a zeroed y's bits)
static __device__ void tc_add_out(float *y, size_t ld, size_t col, const float *t, int r0, int n,
                                  int hs, int set)
{
    for (int e = threadIdx.x; e < TC_ROWS * TC_HP; e += TC_WARPS * 32) {
        int i = e / TC_HP, d = e % TC_HP;
        if (i < n && d < hs) {
            float *yi = y + (size_t)(r0 + i) * ld + col + d;
            *yi = (set ? 0.0f : *yi) + t[i * TC_LD + d];
        }
    }
}

// The backward kernels' shared memory: the q, dout, k and v tiles, two
// score tiles, and the rows' D and lse
struct tc_bwd_tiles {
    __align__(32) float q[TC_ROWS * TC_LD];
    __align__(32) float g[TC_ROWS * TC_LD];
    __align__(32) float k[TC_ROWS * TC_LD];
    __align__(32) float v[TC_ROWS * TC_LD];
    __align__(32) float s[TC_ROWS * TC_SLD];
    __align__(32) float p[TC_ROWS * TC_SLD];
    float D[TC_ROWS], L[TC_ROWS];
};

// dq: a block a query tile, the keys in tiles as in the forward
static __global__ __launch_bounds__(TC_WARPS * 32, 2) void k_attn_tc_dq(
    float *dq, const float *dout, const float *out, const float *q, const float *k,
    const float *v, const float *lse, int ld, const int *off, int B, const int *tiles, int H,
    int hs, float scale, int causal, int set)
{
    __shared__ tc_bwd_tiles sm;
    float *qs = sm.q, *gs = sm.g, *ks = sm.k, *vs = sm.v, *Ss = sm.s, *Ps = sm.p, *Ds = sm.D,
          *Ls = sm.L;
    int r0, s0, s1;
    if (!be_tile_of(tiles, off, B, &r0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, rb = w * TC_RPW;
    int n = s1 - r0 < TC_ROWS ? s1 - r0 : TC_ROWS, kend = causal ? r0 + n : s1, kd = tc_kd(hs);
    size_t col = (size_t)h * hs, C = (size_t)H * hs;
    tc_load(qs, q, (size_t)ld, col, r0, n, hs);
    tc_load(gs, dout, C, col, r0, n, hs);
    tc_rowvals(Ds, Ls, dout, out, lse, C, col, r0, n, hs, H, h);
    tc_acc acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k0 = s0; k0 < kend; k0 += TC_ROWS) {
        int nk = kend - k0 < TC_ROWS ? kend - k0 : TC_ROWS;
        __syncthreads();
        tc_load(ks, k, (size_t)ld, col, k0, nk, hs);
        tc_load(vs, v, (size_t)ld, col, k0, nk, hs);
        __syncthreads();
        if (w < 4)
            tc_scores(Ss, qs, ks, w, kd); // S = Q K^T
        else
            tc_scores(Ps, gs, vs, w - 4, kd); // dP = dO V^T
        __syncthreads();
        for (int r = 0; r < TC_RPW; r++) { // dS into Ss
            int i = rb + r, ok = i < n && lane < nk && (!causal || k0 + lane <= r0 + i);
            float *sp = Ss + i * TC_SLD + lane;
            float p = ok ? expf(scale * *sp - Ls[i]) : 0.0f;
            *sp = wmma::__float_to_tf32(ok ? scale * p * (Ps[i * TC_SLD + lane] - Ds[i]) : 0.0f);
        }
        __syncthreads();
        tc_pz(acc, Ss, ks, w / 4, w % 4); // dQ += dS K
    }
    __syncthreads();
    wmma::store_matrix_sync(qs + (w / 4) * 16 * TC_LD + (w % 4) * 16, acc, TC_LD,
                            wmma::mem_row_major);
    __syncthreads();
    tc_add_out(dq, (size_t)ld, col, qs, r0, n, hs, set);
}

// dk, dv: a block a key tile, the queries that see its keys in tiles of
// TC_ROWS from the tile's first row (causal) or the segment's start
static __global__ __launch_bounds__(TC_WARPS * 32, 2) void k_attn_tc_dkv(
    float *dk, float *dv, const float *dout, const float *out, const float *q, const float *k,
    const float *v, const float *lse, int ld, const int *off, int B, const int *tiles, int H,
    int hs, float scale, int causal, int set)
{
    __shared__ tc_bwd_tiles sm;
    float *qs = sm.q, *gs = sm.g, *ks = sm.k, *vs = sm.v, *St = sm.s, *Pt = sm.p, *Ds = sm.D,
          *Ls = sm.L;
    int c0, s0, s1;
    if (!be_tile_of(tiles, off, B, &c0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, rb = w * TC_RPW;
    int nk = s1 - c0 < TC_ROWS ? s1 - c0 : TC_ROWS, kd = tc_kd(hs);
    size_t col = (size_t)h * hs, C = (size_t)H * hs;
    tc_load(ks, k, (size_t)ld, col, c0, nk, hs);
    tc_load(vs, v, (size_t)ld, col, c0, nk, hs);
    tc_acc ak, av;
    wmma::fill_fragment(ak, 0.0f);
    wmma::fill_fragment(av, 0.0f);
    for (int i0 = causal ? c0 : s0; i0 < s1; i0 += TC_ROWS) {
        int ni = s1 - i0 < TC_ROWS ? s1 - i0 : TC_ROWS;
        __syncthreads();
        tc_load(qs, q, (size_t)ld, col, i0, ni, hs);
        tc_load(gs, dout, C, col, i0, ni, hs);
        tc_rowvals(Ds, Ls, dout, out, lse, C, col, i0, ni, hs, H, h);
        __syncthreads();
        if (w < 4)
            tc_scores(St, ks, qs, w, kd); // S^T = K Q^T: a key a row
        else
            tc_scores(Pt, vs, gs, w - 4, kd); // dP^T = V dO^T
        __syncthreads();
        for (int r = 0; r < TC_RPW; r++) { // P^T into Pt's place, dS^T into St
            int j = rb + r, ok = j < nk && lane < ni && (!causal || i0 + lane >= c0 + j);
            float *sp = St + j * TC_SLD + lane, *pp = Pt + j * TC_SLD + lane;
            float p = ok ? expf(scale * *sp - Ls[lane]) : 0.0f;
            float ds = ok ? scale * p * (*pp - Ds[lane]) : 0.0f;
            *pp = wmma::__float_to_tf32(p);
            *sp = wmma::__float_to_tf32(ds);
        }
        __syncthreads();
        tc_pz(av, Pt, gs, w / 4, w % 4); // dV += P^T dO
        tc_pz(ak, St, qs, w / 4, w % 4); // dK += dS^T Q
    }
    __syncthreads();
    wmma::store_matrix_sync(qs + (w / 4) * 16 * TC_LD + (w % 4) * 16, ak, TC_LD,
                            wmma::mem_row_major);
    wmma::store_matrix_sync(gs + (w / 4) * 16 * TC_LD + (w % 4) * 16, av, TC_LD,
                            wmma::mem_row_major);
    __syncthreads();
    tc_add_out(dk, (size_t)ld, col, qs, c0, nk, hs, set);
    tc_add_out(dv, (size_t)ld, col, gs, c0, nk, hs, set);
}

void be_attention_tc_forward(sq_gpu_be *be, float *out, float *lse, const float *q,
                             const float *k, const float *v, int ld, const int *off, int B,
                             const int *tiles, int ntiles, int H, int hs, int causal)
{
    SQ_LAUNCH(be, k_attn_tc_fwd, dim3((unsigned)ntiles, (unsigned)H), TC_WARPS * 32, 0, out,
              lse, q, k, v, ld, off, B, tiles, H, hs, 1.0f / sqrtf((float)hs), causal);
}

void be_attention_tc_backward(sq_gpu_be *be, float *dq, float *dk, float *dv, const float *dout,
                              const float *out, const float *q, const float *k, const float *v,
                              const float *lse, int ld, const int *off, int B, const int *tiles,
                              int ntiles, int H, int hs, int causal, int set)
{
    float scale = 1.0f / sqrtf((float)hs);
    dim3 grid((unsigned)ntiles, (unsigned)H);
    SQ_LAUNCH(be, k_attn_tc_dq, grid, TC_WARPS * 32, 0, dq, dout, out, q, k, v, lse, ld, off, B,
              tiles, H, hs, scale, causal, set);
    SQ_LAUNCH(be, k_attn_tc_dkv, grid, TC_WARPS * 32, 0, dk, dv, dout, out, q, k, v, lse, ld,
              off, B, tiles, H, hs, scale, causal, set);
}
