// k_core.cu - CORE's two ops (the GPU twins of l2norm.c and attnpool.c):
//   row-wise L2 normalisation with a scale, y_t = s x_t / max(|x_t|, eps),
//     and its backward (l2norm.h);
//   softmax-weighted pooling of each packed sequence's rows, out_b = sum_t
//     alpha_t inp_t, alpha the softmax of the rows' scores (or 1 / len),
//     and its backward (attnpool.h).
//
// The CPU's sums in double, in the CPU's order: a thread per row for the
// norms and the softmax's weights, per element for the outputs and dinp;
// the pooled gradient's dot products a warp per sequence (the lanes'
// columns, then the warp's tree). With --fmad=false the
// norms, the pooling and every gradient but dscore are the CPU's bits
// (double sqrt and division are correctly rounded on both); the softmax's
// exp is CUDA's double exp (within 1 ulp of the C library's), so alpha,
// and what follows from it, agree to float rounding.
//
// Budget: __launch_bounds__(256), no shared memory, a few registers.
#include "common.cuh"

#define CR_THREADS 256

// ------------------------------------------------------------------------
// L2 normalisation

// thread t: norm[t] = |x_t| (double, column order), y_t = s x_t / max(n, eps)
static __global__ __launch_bounds__(CR_THREADS) void k_l2n_fwd(float *out, float *norm,
                                                               const float *inp, int T, int C,
                                                               float s, float eps)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T)
        return;
    const float *x = inp + (size_t)t * C;
    float *y = out + (size_t)t * C;
    double ss = 0;
    for (int c = 0; c < C; c++)
        ss += (double)x[c] * x[c];
    double n = sqrt(ss), d = n > eps ? n : eps;
    norm[t] = (float)n;
    for (int c = 0; c < C; c++)
        y[c] = (float)(s * (double)x[c] / d);
}

// thread t: dx_t += (s / n) dy_t - (y_t . dy_t) / (s n) y_t, or (s / eps)
// dy_t on the clamped branch
static __global__ __launch_bounds__(CR_THREADS) void k_l2n_bwd(float *dinp, const float *dout,
                                                               const float *out,
                                                               const float *norm, int T, int C,
                                                               float s, float eps)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T)
        return;
    const float *y = out + (size_t)t * C, *dy = dout + (size_t)t * C;
    float *dx = dinp + (size_t)t * C;
    double n = norm[t];
    if (!(n > eps)) {
        for (int c = 0; c < C; c++)
            dx[c] += (float)(s / eps * (double)dy[c]);
        return;
    }
    double yd = 0;
    for (int c = 0; c < C; c++)
        yd += (double)y[c] * dy[c];
    double a = s / n, b = yd / (s * n);
    for (int c = 0; c < C; c++)
        dx[c] += (float)(a * dy[c] - b * y[c]);
}

void be_l2norm_forward(sq_gpu_be *be, float *out, float *norm, const float *inp, int T, int C,
                       float s, float eps)
{
    if (T > 0)
        SQ_LAUNCH(be, k_l2n_fwd, be_blocks((size_t)T, CR_THREADS), CR_THREADS, 0, out, norm,
                  inp, T, C, s, eps);
}

void be_l2norm_backward(sq_gpu_be *be, float *dinp, const float *dout, const float *out,
                        const float *norm, int T, int C, float s, float eps)
{
    if (T > 0)
        SQ_LAUNCH(be, k_l2n_bwd, be_blocks((size_t)T, CR_THREADS), CR_THREADS, 0, dinp, dout,
                  out, norm, T, C, s, eps);
}

// ------------------------------------------------------------------------
// Attention pooling

// thread t: alpha_t of its sequence's softmax (max-shifted, the sum in
// double in row order; score NULL: 1 / len). Each thread redoes its
// sequence's max and sum (len^2 work; a thread per sequence with the
// divisions in its loop spills registers around the double division)
static __global__ __launch_bounds__(CR_THREADS) void k_pool_alpha(float *alpha,
                                                                  const float *score,
                                                                  const int *off, int B, int T)
{
    int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= T)
        return;
    int b = be_seg_of(off, B, t), t0 = off[b], t1 = off[b + 1];
    if (!score) {
        alpha[t] = (float)(1.0 / (t1 - t0));
        return;
    }
    double mx = -INFINITY, z = 0;
    for (int u = t0; u < t1; u++)
        mx = score[u] > mx ? score[u] : mx;
    for (int u = t0; u < t1; u++)
        z += exp((double)score[u] - mx);
    alpha[t] = (float)(exp((double)score[t] - mx) / z);
}

// thread (b, c): out_b[c] = sum_t alpha_t inp_t[c], rows in order from 0
static __global__ __launch_bounds__(CR_THREADS) void k_pool_out(float *out, const float *alpha,
                                                                const float *inp,
                                                                const int *off, int B, int C)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)B * C)
        return;
    int b = (int)(id / C), c = (int)(id % C);
    float o = 0;
    for (int t = off[b]; t < off[b + 1]; t++)
        o += alpha[t] * inp[(size_t)t * C + c];
    out[id] = o;
}

// thread (t, c): dinp_t[c] += alpha_t dout_b[c]
static __global__ __launch_bounds__(CR_THREADS) void k_pool_dinp(float *dinp,
                                                                 const float *dout,
                                                                 const float *alpha,
                                                                 const int *off, int B, int T,
                                                                 int C)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)T * C)
        return;
    int t = (int)(id / C), c = (int)(id % C), b = be_seg_of(off, B, t);
    dinp[id] += alpha[t] * dout[(size_t)b * C + c];
}

// A double summed over a warp's lanes (xor butterfly: every lane gets the
// same bits, since each step adds the same two values on both lanes)
static __device__ inline double cr_warp_sum_d(double v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// warp b: g_t = inp_t . dout_b (double: each lane its columns in order,
// then the warp's tree; kept as a float first, as attnpool.c), dscore_t =
// alpha_t (g_t - sum_k alpha_k g_k). A warp a sequence, not a thread: the
// row's loads coalesced, and B blocks' worth of warps, not B threads.
static __global__ __launch_bounds__(CR_THREADS) void k_pool_dscore(float *dscore,
                                                                   const float *dout,
                                                                   const float *alpha,
                                                                   const float *inp,
                                                                   const int *off, int B, int C)
{
    int b = (int)(((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32), lane = threadIdx.x % 32;
    if (b >= B) // the warp's lanes alike
        return;
    const float *d = dout + (size_t)b * C;
    double mean = 0;
    for (int t = off[b]; t < off[b + 1]; t++) {
        const float *x = inp + (size_t)t * C;
        double g = 0;
        for (int c = lane; c < C; c += 32)
            g += (double)x[c] * d[c];
        g = cr_warp_sum_d(g);
        if (lane == 0)
            dscore[t] = (float)g;
        mean += alpha[t] * g;
    }
    __syncwarp(); // lane 0's g_t seen by the lanes that rescale them
    for (int t = off[b] + lane; t < off[b + 1]; t += 32)
        dscore[t] = (float)(alpha[t] * ((double)dscore[t] - mean));
}

// The rows off[B] of the staged offsets; -1 (and the sticky error) when off
// is not a staged host array or a shape is out of range.
static int cr_rows(sq_gpu_be *be, const int *off, int B, int C, const char *what)
{
    return C < 1 ? be_staged_rows(be, off, -1, what) : be_staged_rows(be, off, B, what);
}

void be_attnpool_forward(sq_gpu_be *be, float *out, float *alpha, const float *score,
                         const float *inp, const int *off, int B, int C)
{
    int T = cr_rows(be, off, B, C, "attnpool_forward: off not staged, or a bad shape");
    if (T < 0 || !B)
        return;
    const int *doff = be_ints(be, off);
    if (T > 0)
        SQ_LAUNCH(be, k_pool_alpha, be_blocks((size_t)T, CR_THREADS), CR_THREADS, 0, alpha,
                  score, doff, B, T);
    SQ_LAUNCH(be, k_pool_out, be_blocks((size_t)B * C, CR_THREADS), CR_THREADS, 0, out, alpha,
              inp, doff, B, C);
}

void be_attnpool_backward(sq_gpu_be *be, float *dinp, float *dscore, const float *dout,
                          const float *alpha, const float *inp, const int *off, int B, int C)
{
    int T = cr_rows(be, off, B, C, "attnpool_backward: off not staged, or a bad shape");
    if (T <= 0)
        return;
    const int *doff = be_ints(be, off);
    SQ_LAUNCH(be, k_pool_dinp, be_blocks((size_t)T * C, CR_THREADS), CR_THREADS, 0, dinp, dout,
              alpha, doff, B, T, C);
    if (dscore)
        SQ_LAUNCH(be, k_pool_dscore, be_blocks((size_t)B * 32, CR_THREADS), CR_THREADS, 0,
                  dscore, dout, alpha, inp, doff, B, C);
}
