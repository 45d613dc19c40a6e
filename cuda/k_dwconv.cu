// k_dwconv.cu - depthwise 1-D convolution along packed segments (dwconv.h:
// out[t, c] += b[c] + sum_k w[k, c] x[t + k - lo, c], zeros outside t's
// segment; lo = K - 1 causal, (K - 1) / 2 bidirectional), forward and
// backward, the GPU twins of dwconv.c.
//
// The forward and dx are gathers, a thread per element (row, channel),
// each summing its taps in the CPU's order (k ascending, added onto the
// output in place): with --fmad=false they give the CPU's bits. dw and db
// are column sums over the rows in common.cuh's two passes, a tap (and db)
// a grid row: groups of rows into the context's workspace, then the groups
// in order by the last block (one launch): a fixed order, no float atomics
// (not the CPU's order, one sum of all rows: results equal to float
// rounding).
//
// Budget: __launch_bounds__(256) for the gathers and the sums (1 KiB of
// static shared memory); a few registers.
#include "common.cuh"

#define DC_THREADS 256

static __device__ __forceinline__ int dc_max(int a, int b) { return a > b ? a : b; }
static __device__ __forceinline__ int dc_min(int a, int b) { return a < b ? a : b; }

// out_t[c] += b[c] + sum_k w_k[c] x_{t+k-lo}[c], the taps whose row is in
// t's segment [o, e)
static __global__ __launch_bounds__(DC_THREADS) void k_dwc_fwd(
    float *out, const float *x, int ld, const float *w, const float *b, int K, int lo,
    const int *off, int B, int T, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C)
        return;
    int t = (int)(i / C), c = (int)(i % C), s = be_seg_of(off, B, t);
    int o = off[s], e = off[s + 1];
    float y = out[i];
    if (b)
        y += b[c];
    int k0 = dc_max(0, o - t + lo), k1 = dc_min(K, e - t + lo);
    for (int k = k0; k < k1; k++)
        y += w[(size_t)k * C + c] * x[(size_t)(t + k - lo) * ld + c];
    out[i] = y;
}

// dx_j[c] += sum_k w_k[c] dout_{j-k+lo}[c], the output rows in j's segment
static __global__ __launch_bounds__(DC_THREADS) void k_dwc_dx(
    float *dx, const float *dout, int ld, const float *w, int K, int lo, const int *off,
    int B, int T, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T * C)
        return;
    int j = (int)(i / C), c = (int)(i % C), s = be_seg_of(off, B, j);
    int o = off[s], e = off[s + 1];
    float *d = dx + (size_t)j * ld + c;
    float acc = *d;
    int k0 = dc_max(0, j + lo - e + 1), k1 = dc_min(K, j + lo - o + 1);
    for (int k = k0; k < k1; k++)
        acc += w[(size_t)k * C + c] * dout[(size_t)(j - k + lo) * C + c];
    *d = acc;
}

// dw and db (common.cuh's two passes in one launch), block (channels 32
// bx .., tap k = by, row group bz): the partial of dw_k[c] = sum_t
// dout_t[c] x_{t+k-lo}[c] over the group's rows t whose tap row is in t's
// segment (by == K: of db[c] = sum_t dout_t[c]), into part[(k G + g) C +
// c]; the last block of (bx, by) adds the groups' partials in order onto
// dw_k (by == K: db). A lane's rows ascend, so its segment only moves
// forward.
static __global__ __launch_bounds__(32 * BE_SUM_LANES) void k_dwc_dw(
    float *dw, float *db, float *part, unsigned *cnt, const float *dout, const float *x, int ld,
    int K, int lo, const int *off, int B, int T, int C, int R, int G)
{
    __shared__ float sh[BE_SUM_LANES][32];
    __shared__ int last;
    int c = blockIdx.x * 32 + threadIdx.x, k = blockIdx.y, g = blockIdx.z;
    int r0 = g * R, r1 = T - r0 < R ? T : r0 + R, t0 = r0 + (int)threadIdx.y;
    float acc = 0;
    if (c < C && k == K) {
        for (int t = t0; t < r1; t += BE_SUM_LANES)
            acc += dout[(size_t)t * C + c];
    } else if (c < C && t0 < r1) {
        int s = be_seg_of(off, B, t0);
        for (int t = t0; t < r1; t += BE_SUM_LANES) {
            while (off[s + 1] <= t)
                s++;
            int j = t + k - lo;
            if (j >= off[s] && j < off[s + 1])
                acc += dout[(size_t)t * C + c] * x[(size_t)j * ld + c];
        }
    }
    float sum = be_lanes_sum(sh, acc);
    float *pk = part + (size_t)k * G * C;
    if (threadIdx.y == 0 && c < C)
        pk[(size_t)g * C + c] = sum;
    if (!be_sum_is_last(&last, cnt, blockIdx.y * gridDim.x + blockIdx.x, G))
        return;
    sum = be_sum_fin(sh, pk, C, G, c);
    if (threadIdx.y == 0 && c < C) {
        if (k == K)
            db[c] += sum;
        else
            dw[(size_t)k * C + c] += sum;
    }
}

// The rows T = off[B] of the staged host offsets; -1 (and the sticky
// error) when off is not a staged host array or a shape is out of range.
static int dc_rows(sq_gpu_be *be, const int *off, int B, int K, int C, int ld,
                   const char *what)
{
    const int *h = be_host_ints(be, off);
    if (!h || B < 0 || K < 1 || C < 1 || ld < C) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    return h[B];
}

static int dc_lo(int K, int causal)
{
    return causal ? K - 1 : (K - 1) / 2; // dwconv.h's sq_dwconv_lo
}

void be_dwconv_forward(sq_gpu_be *be, float *out, const float *x, int ld, const float *w,
                       const float *b, int K, const int *off, int B, int C, int causal)
{
    int T = dc_rows(be, off, B, K, C, ld, "dwconv_forward: off not staged, or a bad shape");
    if (T <= 0)
        return;
    SQ_LAUNCH(be, k_dwc_fwd, be_blocks((size_t)T * C, DC_THREADS), DC_THREADS, 0, out, x, ld,
              w, b, K, dc_lo(K, causal), be_ints(be, off), B, T, C);
}

void be_dwconv_backward(sq_gpu_be *be, float *dx, float *dw, float *db, const float *dout,
                        const float *x, int ld, const float *w, int K, const int *off, int B,
                        int C, int causal)
{
    int T = dc_rows(be, off, B, K, C, ld, "dwconv_backward: off not staged, or a bad shape");
    if (T <= 0)
        return;
    int lo = dc_lo(K, causal);
    const int *doff = be_ints(be, off);
    SQ_LAUNCH(be, k_dwc_dx, be_blocks((size_t)T * C, DC_THREADS), DC_THREADS, 0, dx, dout, ld,
              w, K, lo, doff, B, T, C);
    int taps = K + (db ? 1 : 0), R, G;
    if ((size_t)taps * C > BE_SUM_WS) { // not one group's partials: no layer is this wide
        be_note(be, cudaErrorInvalidValue, "dwconv_backward: too many channels x taps");
        return;
    }
    G = be_sum_groups(T, taps, C, &R);
    unsigned cols = (unsigned)((C + 31) / 32);
    SQ_LAUNCH(be, k_dwc_dw, dim3(cols, (unsigned)taps, (unsigned)G), dim3(32, BE_SUM_LANES), 0,
              dw, db, be->sum_ws, be->sum_cnt, dout, x, ld, K, lo, doff, B, T, C, R, G);
}
