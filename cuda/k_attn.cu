// k_attn.cu - softmax attention over packed segments (ops.c section 8):
// out_t = sum_j softmax_j(q_t . k_j / sqrt(hs)) v_j per head, over the keys
// j <= t of t's segment (causal) or all of them.
//
// TILED ONLINE SOFTMAX, no L x L matrix (FlashAttention's schedule, fp32):
// a block takes a tile of AT_ROWS rows of one segment and one head; the
// segment's keys pass through shared memory AT_ROWS at a time, each tile
// read once for all the block's rows (the first form, a warp a row, read
// every key once a row and waited on a 5-shuffle sum a key). A warp owns
// AT_RPW rows: for the scores its lanes are the tile's keys (lane j, key
// k0 + j), for the outputs its lanes are the head's dimensions (lane and
// lane + 32), the probabilities passed from the one to the other through
// the warp's rows of shared memory (4 shuffles a key before: the shared
// loads and shuffles, not the arithmetic, bounded the tile's loops). The forward keeps each row's running max m, sum l and
// weighted values, and stores the row's log-sum-exp lse = m + log l in
// att[t * H + h] (the CPU keeps the probabilities there: H sum len^2 >=
// T H floats, so the GPU's use is a prefix of the caller's buffer). The
// backward recomputes p_tj = exp(s_tj - lse_t) and, with D_t = dout_t .
// out_t:
//   dq_t = scale sum_j p_tj (dout_t . v_j - D_t) k_j     (a block a query tile)
//   dk_j = scale sum_t p_tj (dout_t . v_j - D_t) q_t     (a block a key tile,
//   dv_j = sum_t p_tj dout_t                              the queries in order)
// Every sum in a fixed order, no atomics: two runs give the same bits.
//
// TILES. Tiles start at multiples of AT_ROWS from their segment's start
// (the host lists them: at_tiles), and a row's keys pass in tiles from its
// segment's start, so what a row's sums see does not depend on where its
// segment sits in the packed batch: scoring's batch invariance
// (sq_ctx_invariant) holds here without a mode. The masked keys of a tile
// add exact zeros.
//
// Heads of up to 64 dimensions. Budget: __launch_bounds__(256) (8 warps;
// dk/dv's with 3 blocks an SM, 80 registers: sm_80 spilled at its own
// choice of 64; sm_90: 64, 54 and 80 registers), static shared memory
// 28.1 KiB (forward) and 36.5 KiB (backward: q, dout, k and v tiles, and
// each warp's probabilities), no spills. Time O(sum len^2 C),
// memory O(T H).
#include "common.cuh"

#define AT_ROWS 32 // a tile's rows (queries or keys); a warp's lanes
#define AT_WARPS 8
#define AT_RPW (AT_ROWS / AT_WARPS) // rows a warp
#define AT_MAXHS 64
#define AT_PAD (AT_MAXHS + 1) // a tile read by lane along its rows: + 1 spreads the banks

// rows [r0, r0 + n) of x (row stride ld, the head's columns from col) into
// s[AT_ROWS][ldsm], zeros past n rows and hs columns
static __device__ void at_load(float *s, int ldsm, const float *x, size_t ld, size_t col, int r0,
                               int n, int hs)
{
    for (int e = threadIdx.x; e < AT_ROWS * AT_MAXHS; e += AT_WARPS * 32) {
        int i = e / AT_MAXHS, d = e % AT_MAXHS;
        s[i * ldsm + d] = i < n && d < hs ? x[(size_t)(r0 + i) * ld + col + d] : 0.0f;
    }
}

// a[r] = sum_d x[rows[r]][d] y[lane][d]: x's rows broadcast, four of a
// row's dimensions a 128-bit load (ldx a multiple of 4, x 16-byte
// aligned), y's read by lane; d ascending, as one dimension at a time: the
// same sums (the first form made 5 shared loads for 4 products)
static __device__ __forceinline__ void at_dots(float a[AT_RPW], const float *x, int ldx,
                                               const float *y, int ldy, int r_base, int hs)
{
    int lane = threadIdx.x % 32, d = 0;
    for (int r = 0; r < AT_RPW; r++)
        a[r] = 0.0f;
    for (; d + 4 <= hs; d += 4) {
        const float *yl = y + lane * ldy + d;
        float y0 = yl[0], y1 = yl[1], y2 = yl[2], y3 = yl[3];
        for (int r = 0; r < AT_RPW; r++) {
            float4 xr = *(const float4 *)(x + (r_base + r) * ldx + d);
            a[r] += xr.x * y0;
            a[r] += xr.y * y1;
            a[r] += xr.z * y2;
            a[r] += xr.w * y3;
        }
    }
    for (; d < hs; d++) {
        float yd = y[lane * ldy + d];
        for (int r = 0; r < AT_RPW; r++)
            a[r] += x[(r_base + r) * ldx + d] * yd;
    }
}

// acc[r] += sum_{j < n} w_r(lane j) z[j][(lane, lane + 32)]: the weights
// from the lanes that computed them, through the warp's rows of P
// ([AT_RPW][32] in shared memory: four keys' weights of a row a 128-bit
// broadcast load, where the first form made 4 shuffles a key), z's rows
// read along the dimensions; j ascending
static __device__ __forceinline__ void at_mix(float acc[AT_RPW][2], const float w[AT_RPW],
                                              float *P, const float *z, int ldz, int n)
{
    int lane = threadIdx.x % 32, j = 0;
    __syncwarp(); // the warp's last reads of P are done
    for (int r = 0; r < AT_RPW; r++)
        P[r * 32 + lane] = w[r];
    __syncwarp();
    for (; j + 4 <= n; j += 4) {
        float4 pr[AT_RPW];
        for (int r = 0; r < AT_RPW; r++)
            pr[r] = *(const float4 *)(P + r * 32 + j);
        for (int u = 0; u < 4; u++) {
            float z0 = z[(j + u) * ldz + lane], z1 = z[(j + u) * ldz + lane + 32];
            for (int r = 0; r < AT_RPW; r++) {
                float wj = u == 0 ? pr[r].x : u == 1 ? pr[r].y : u == 2 ? pr[r].z : pr[r].w;
                acc[r][0] += wj * z0;
                acc[r][1] += wj * z1;
            }
        }
    }
    for (; j < n; j++) {
        float z0 = z[j * ldz + lane], z1 = z[j * ldz + lane + 32];
        for (int r = 0; r < AT_RPW; r++) {
            float wj = P[r * 32 + j];
            acc[r][0] += wj * z0;
            acc[r][1] += wj * z1;
        }
    }
}

static __global__ __launch_bounds__(AT_WARPS * 32) void k_attn_fwd(
    float *out, float *lse, const float *q, const float *k, const float *v, int ld,
    const int *off, int B, const int *tiles, int H, int hs, float scale, int causal)
{
    __shared__ __align__(16) float qs[AT_ROWS * AT_MAXHS];
    __shared__ __align__(16) float Ps[AT_WARPS * AT_RPW * 32];
    __shared__ float ks[AT_ROWS * AT_PAD], vs[AT_ROWS * AT_MAXHS];
    int r0, s0, s1;
    if (!be_tile_of(tiles, off, B, &r0, &s0, &s1))
        return; // the whole block
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, rb = w * AT_RPW;
    int n = s1 - r0 < AT_ROWS ? s1 - r0 : AT_ROWS, kend = causal ? r0 + n : s1;
    size_t col = (size_t)h * hs;
    at_load(qs, AT_MAXHS, q, (size_t)ld, col, r0, n, hs);
    float m[AT_RPW], l[AT_RPW], acc[AT_RPW][2], p[AT_RPW];
    for (int r = 0; r < AT_RPW; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0f;
        acc[r][0] = acc[r][1] = 0.0f;
    }
    for (int k0 = s0; k0 < kend; k0 += AT_ROWS) {
        int nk = kend - k0 < AT_ROWS ? kend - k0 : AT_ROWS;
        __syncthreads(); // the last tile's readers are done (and qs is in)
        at_load(ks, AT_PAD, k, (size_t)ld, col, k0, nk, hs);
        at_load(vs, AT_MAXHS, v, (size_t)ld, col, k0, nk, hs);
        __syncthreads();
        if (rb >= n)
            continue; // the warp's rows are past the tile's (warp-uniform)
        float s[AT_RPW];
        at_dots(s, qs, AT_MAXHS, ks, AT_PAD, rb, hs);
        for (int r = 0; r < AT_RPW; r++) {
            int ok = rb + r < n && lane < nk && (!causal || k0 + lane <= r0 + rb + r);
            float sr = ok ? scale * s[r] : -INFINITY, mt = be_warp_max(sr);
            p[r] = 0.0f;
            if (mt == -INFINITY)
                continue; // no key of this tile for the row (warp-uniform)
            float mn = fmaxf(m[r], mt), f = expf(m[r] - mn);
            p[r] = ok ? expf(sr - mn) : 0.0f;
            l[r] = l[r] * f + be_warp_sum(p[r]);
            acc[r][0] *= f;
            acc[r][1] *= f;
            m[r] = mn;
        }
        at_mix(acc, p, Ps + w * AT_RPW * 32, vs, AT_MAXHS, nk);
    }
    for (int r = 0; r < AT_RPW; r++) {
        int i = rb + r;
        if (i >= n)
            break;
        size_t ho = (size_t)(r0 + i) * H * hs + col;
        if (lane < hs)
            out[ho + lane] = acc[r][0] / l[r];
        if (lane + 32 < hs)
            out[ho + lane + 32] = acc[r][1] / l[r];
        if (lane == 0)
            lse[(size_t)(r0 + i) * H + h] = m[r] + logf(l[r]);
    }
}

// D_t = dout_t . out_t of the rows [r0, r0 + n) into Ds (a warp its rows,
// read from global memory: each once a tile)
static __device__ void at_dsum(float *Ds, const float *dout, const float *out, size_t C,
                               size_t col, int r0, int n, int hs)
{
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (int r = 0; r < AT_RPW; r++) {
        int i = w * AT_RPW + r;
        if (i >= n)
            break; // warp-uniform
        size_t o = (size_t)(r0 + i) * C + col;
        float a = lane < hs ? dout[o + lane] * out[o + lane] : 0.0f;
        if (lane + 32 < hs)
            a += dout[o + lane + 32] * out[o + lane + 32];
        a = be_warp_sum(a);
        if (lane == 0)
            Ds[i] = a;
    }
}

// dq: a block a query tile, the keys in tiles as in the forward
static __global__ __launch_bounds__(AT_WARPS * 32) void k_attn_dq(
    float *dq, const float *dout, const float *out, const float *q, const float *k,
    const float *v, const float *lse, int ld, const int *off, int B, const int *tiles, int H,
    int hs, float scale, int causal, int set)
{
    __shared__ __align__(16) float qs[AT_ROWS * AT_MAXHS];
    __shared__ __align__(16) float gs[AT_ROWS * AT_MAXHS];
    __shared__ __align__(16) float Ps[AT_WARPS * AT_RPW * 32];
    __shared__ float ks[AT_ROWS * AT_PAD], vs[AT_ROWS * AT_PAD], Ds[AT_ROWS];
    int r0, s0, s1;
    if (!be_tile_of(tiles, off, B, &r0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, rb = w * AT_RPW;
    int n = s1 - r0 < AT_ROWS ? s1 - r0 : AT_ROWS, kend = causal ? r0 + n : s1;
    size_t col = (size_t)h * hs, C = (size_t)H * hs;
    at_load(qs, AT_MAXHS, q, (size_t)ld, col, r0, n, hs);
    at_load(gs, AT_MAXHS, dout, C, col, r0, n, hs);
    at_dsum(Ds, dout, out, C, col, r0, n, hs);
    float L[AT_RPW], acc[AT_RPW][2];
    for (int r = 0; r < AT_RPW; r++) {
        L[r] = rb + r < n ? lse[(size_t)(r0 + rb + r) * H + h] : 0.0f;
        acc[r][0] = acc[r][1] = 0.0f;
    }
    for (int k0 = s0; k0 < kend; k0 += AT_ROWS) {
        int nk = kend - k0 < AT_ROWS ? kend - k0 : AT_ROWS;
        __syncthreads();
        at_load(ks, AT_PAD, k, (size_t)ld, col, k0, nk, hs);
        at_load(vs, AT_PAD, v, (size_t)ld, col, k0, nk, hs);
        __syncthreads();
        if (rb >= n)
            continue;
        float s[AT_RPW], dp[AT_RPW], ds[AT_RPW];
        at_dots(s, qs, AT_MAXHS, ks, AT_PAD, rb, hs);
        at_dots(dp, gs, AT_MAXHS, vs, AT_PAD, rb, hs);
        for (int r = 0; r < AT_RPW; r++) {
            int ok = rb + r < n && lane < nk && (!causal || k0 + lane <= r0 + rb + r);
            ds[r] = ok ? scale * expf(scale * s[r] - L[r]) * (dp[r] - Ds[rb + r]) : 0.0f;
        }
        at_mix(acc, ds, Ps + w * AT_RPW * 32, ks, AT_PAD, nk);
    }
    for (int r = 0; r < AT_RPW; r++) {
        if (rb + r >= n)
            break;
        size_t hq = (size_t)(r0 + rb + r) * ld + col;
        if (lane < hs)
            dq[hq + lane] = (set ? 0.0f : dq[hq + lane]) + acc[r][0];
        if (lane + 32 < hs)
            dq[hq + lane + 32] = (set ? 0.0f : dq[hq + lane + 32]) + acc[r][1];
    }
}

// dk, dv: a block a key tile, the queries that see its keys in tiles of
// AT_ROWS from the tile's first row (causal) or the segment's start
static __global__ __launch_bounds__(AT_WARPS * 32, 3) void k_attn_dkv(
    float *dk, float *dv, const float *dout, const float *out, const float *q, const float *k,
    const float *v, const float *lse, int ld, const int *off, int B, const int *tiles, int H,
    int hs, float scale, int causal, int set)
{
    __shared__ __align__(16) float ks[AT_ROWS * AT_MAXHS];
    __shared__ __align__(16) float vs[AT_ROWS * AT_MAXHS];
    __shared__ __align__(16) float Ps[AT_WARPS * AT_RPW * 32];
    __shared__ float qs[AT_ROWS * AT_PAD], gs[AT_ROWS * AT_PAD], Ls[AT_ROWS], Ds[AT_ROWS];
    int c0, s0, s1;
    if (!be_tile_of(tiles, off, B, &c0, &s0, &s1))
        return;
    int h = blockIdx.y, w = threadIdx.x / 32, lane = threadIdx.x % 32, rb = w * AT_RPW;
    int nk = s1 - c0 < AT_ROWS ? s1 - c0 : AT_ROWS;
    size_t col = (size_t)h * hs, C = (size_t)H * hs;
    at_load(ks, AT_MAXHS, k, (size_t)ld, col, c0, nk, hs);
    at_load(vs, AT_MAXHS, v, (size_t)ld, col, c0, nk, hs);
    float ak[AT_RPW][2], av[AT_RPW][2];
    for (int r = 0; r < AT_RPW; r++)
        ak[r][0] = ak[r][1] = av[r][0] = av[r][1] = 0.0f;
    for (int i0 = causal ? c0 : s0; i0 < s1; i0 += AT_ROWS) {
        int ni = s1 - i0 < AT_ROWS ? s1 - i0 : AT_ROWS;
        __syncthreads();
        at_load(qs, AT_PAD, q, (size_t)ld, col, i0, ni, hs);
        at_load(gs, AT_PAD, dout, C, col, i0, ni, hs);
        at_dsum(Ds, dout, out, C, col, i0, ni, hs);
        int x = (int)threadIdx.x;
        if (x < AT_ROWS)
            Ls[x] = x < ni ? lse[(size_t)(i0 + x) * H + h] : 0.0f;
        __syncthreads();
        if (rb >= nk)
            continue;
        float s[AT_RPW], dp[AT_RPW], p[AT_RPW], ds[AT_RPW];
        at_dots(s, ks, AT_MAXHS, qs, AT_PAD, rb, hs); // s[r] = k_(rb + r) . q_lane
        at_dots(dp, vs, AT_MAXHS, gs, AT_PAD, rb, hs);
        for (int r = 0; r < AT_RPW; r++) {
            int ok = rb + r < nk && lane < ni && (!causal || i0 + lane >= c0 + rb + r);
            p[r] = ok ? expf(scale * s[r] - Ls[lane]) : 0.0f;
            ds[r] = ok ? scale * p[r] * (dp[r] - Ds[lane]) : 0.0f; // Ds past ni: stale
        }
        at_mix(av, p, Ps + w * AT_RPW * 32, gs, AT_PAD, ni);
        at_mix(ak, ds, Ps + w * AT_RPW * 32, qs, AT_PAD, ni);
    }
    for (int r = 0; r < AT_RPW; r++) {
        if (rb + r >= nk)
            break;
        size_t hk = (size_t)(c0 + rb + r) * ld + col;
        if (lane < hs) {
            dk[hk + lane] = (set ? 0.0f : dk[hk + lane]) + ak[r][0];
            dv[hk + lane] = (set ? 0.0f : dv[hk + lane]) + av[r][0];
        }
        if (lane + 32 < hs) {
            dk[hk + lane + 32] = (set ? 0.0f : dk[hk + lane + 32]) + ak[r][1];
            dv[hk + lane + 32] = (set ? 0.0f : dv[hk + lane + 32]) + av[r][1];
        }
    }
}

// The batch's tiles of AT_ROWS rows on the device (be_seg_tiles), their
// count in *n; NULL (and the sticky error) when off is not a staged host
// array or the heads are out of range, NULL alone when there are no rows.
static const int *at_tiles(sq_gpu_be *be, const int *off, int B, int H, int C, int *n,
                           const char *what)
{
    const int *h = be_host_ints(be, off);
    if (!h || H <= 0 || C % H || C / H > AT_MAXHS) {
        be_note(be, cudaErrorInvalidValue, what);
        return NULL;
    }
    return h[B] > 0 ? be_seg_tiles(be, h, B, AT_ROWS, n, what) : NULL;
}

// The tensor cores' kernels (k_attn_tc.cu, tf32) where the GEMMs are not
// fp32 (--precision tf32 or bf16) and not scoring's batch-invariant ones;
// these fp32 kernels otherwise. The forward's and backward's agree: the
// mode does not change within a step.
static int at_tensor_cores(const sq_gpu_be *be)
{
    return be->prec != 0 && !be->invariant;
}

void be_attention_forward(sq_gpu_be *be, float *out, float *att, const float *q, const float *k,
                          const float *v, int ld, const int *off, int B, int H, int C,
                          int causal)
{
    int n;
    const int *tiles = at_tiles(be, off, B, H, C, &n,
                                "attention_forward: off not staged, or heads over 64");
    if (!tiles)
        return;
    int hs = C / H;
    if (at_tensor_cores(be)) {
        be_attention_tc_forward(be, out, att, q, k, v, ld, be_ints(be, off), B, tiles, n, H, hs,
                                causal);
        return;
    }
    dim3 grid((unsigned)n, (unsigned)H);
    SQ_LAUNCH(be, k_attn_fwd, grid, AT_WARPS * 32, 0, out, att, q, k, v, ld, be_ints(be, off),
              B, tiles, H, hs, 1.0f / sqrtf((float)hs), causal);
}

// set: dq, dk, dv written (each row's head columns by one block), not added to
static void attention_backward(sq_gpu_be *be, float *dq, float *dk, float *dv, const float *dout,
                               const float *out, const float *q, const float *k,
                               const float *v, const float *att, int ld, const int *off, int B,
                               int H, int C, int causal, int set)
{
    int n;
    const int *tiles = at_tiles(be, off, B, H, C, &n,
                                "attention_backward: off not staged, or heads over 64");
    if (!tiles)
        return;
    int hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
    const int *doff = be_ints(be, off); // after the upload (its growth moves the staged ints)
    if (at_tensor_cores(be)) {
        be_attention_tc_backward(be, dq, dk, dv, dout, out, q, k, v, att, ld, doff, B, tiles, n,
                                 H, hs, causal, set);
        return;
    }
    dim3 grid((unsigned)n, (unsigned)H);
    SQ_LAUNCH(be, k_attn_dq, grid, AT_WARPS * 32, 0, dq, dout, out, q, k, v, att, ld, doff, B,
              tiles, H, hs, scale, causal, set);
    SQ_LAUNCH(be, k_attn_dkv, grid, AT_WARPS * 32, 0, dk, dv, dout, out, q, k, v, att, ld, doff,
              B, tiles, H, hs, scale, causal, set);
}

void be_attention_backward(sq_gpu_be *be, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const float *q, const float *k, const float *v,
                           const float *att, int ld, const int *off, int B, int H, int C,
                           int causal)
{
    attention_backward(be, dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal, 0);
}

void be_attention_backward_to(sq_gpu_be *be, float *dq, float *dk, float *dv, const float *dout,
                              const float *out, const float *q, const float *k, const float *v,
                              const float *att, int ld, const int *off, int B, int H, int C,
                              int causal)
{
    attention_backward(be, dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal, 1);
}
