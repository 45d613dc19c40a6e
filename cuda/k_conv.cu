// k_conv.cu - Caser's two convolutions over windows of L rows (conv.h),
// forward and backward, the GPU twins of conv.c.
//
// Horizontal: a thread per (window, filter of height h) slides its filter
// over the window and keeps the first maximum (its relu and position, as
// conv.c). Each position's value is real.h's sq_dot (8 partial sums in
// its order) plus the bias, so with --fmad=false the outputs and the
// recorded positions are the CPU's. dx is a gather, a thread per window
// element adding the live filters over it in the CPU's (height, filter)
// order; dw a thread per weight adding the windows in ascending order, db
// a thread per filter: every sum in conv.c's order, the CPU's bits.
//
// Vertical: the forward and dx are a thread per output element adding in
// the CPU's order (its bits); dw[f, k] a thread per weight summing the
// windows' sq_dot in order, db a thread per filter: the CPU's bits too.
//
// Budget: __launch_bounds__(256), no shared memory, a few registers (the
// dot's 8 partial sums).
#include "common.cuh"

#define CV_THREADS 256

// conv.h's sq_hconv_offset: where the weights of height h start
static __host__ __device__ __forceinline__ size_t cv_off(int h, int F, int C)
{
    return (size_t)F * C * (size_t)h * (size_t)(h - 1) / 2;
}

// ------------------------------------------------------------------------
// Horizontal filters

// thread (window i, filter j = (h - 1) F + f)
static __global__ __launch_bounds__(CV_THREADS) void k_hconv_fwd(
    float *out, int ldo, int *arg, const float *x, const float *w, const float *b, int n,
    int L, int C, int F)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)n * L * F)
        return;
    int i = (int)(id / ((size_t)L * F)), j = (int)(id % ((size_t)L * F));
    int h = j / F + 1, f = j % F, hc = h * C;
    const float *wf = w + cv_off(h, F, C) + (size_t)f * hc, *xi = x + (size_t)i * L * C;
    float best = 0;
    int at = -1;
    for (int p = 0; p + h <= L; p++) {
        float a = b[j] + be_dot8(wf, xi + (size_t)p * C, hc);
        if (at < 0 || a > best) {
            best = a;
            at = p;
        }
    }
    out[(size_t)i * ldo + j] = best > 0 ? best : 0;
    arg[(size_t)i * L * F + j] = best > 0 ? at : -1;
}

// thread (window i, row k, column c): the live filters whose maximum covers
// row k, in (height, filter) order
static __global__ __launch_bounds__(CV_THREADS) void k_hconv_dx(
    float *dx, const float *dout, int ldo, const int *arg, const float *w, int n, int L, int C,
    int F)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)n * L * C)
        return;
    int i = (int)(id / ((size_t)L * C)), k = (int)(id / C % L), c = (int)(id % C);
    const int *ai = arg + (size_t)i * L * F;
    float acc = dx[id];
    for (int h = 1; h <= L; h++) {
        const float *wh = w + cv_off(h, F, C);
        for (int f = 0; f < F; f++) {
            int j = (h - 1) * F + f, p = ai[j];
            if (p >= 0 && p <= k && k < p + h)
                acc += dout[(size_t)i * ldo + j] * wh[(size_t)f * h * C + (size_t)(k - p) * C + c];
        }
    }
    dx[id] = acc;
}

// thread (weight q of all heights): dw[q] += dout x at the maximum, the
// windows in ascending order; the filter's first weight's thread also sums
// db
static __global__ __launch_bounds__(CV_THREADS) void k_hconv_dw(
    float *dw, float *db, const float *dout, int ldo, const int *arg, const float *x, int n,
    int L, int C, int F)
{
    size_t q = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= cv_off(L + 1, F, C))
        return;
    int h = 1;
    while (cv_off(h + 1, F, C) <= q)
        h++;
    size_t r = q - cv_off(h, F, C);
    int f = (int)(r / ((size_t)h * C)), e = (int)(r % ((size_t)h * C)), j = (h - 1) * F + f;
    float acc = dw[q], bacc = 0;
    for (int i = 0; i < n; i++) {
        int p = arg[(size_t)i * L * F + j];
        if (p < 0)
            continue;
        float g = dout[(size_t)i * ldo + j];
        acc += g * x[((size_t)i * L + p) * C + e];
        bacc += g;
    }
    dw[q] = acc;
    if (e == 0)
        db[j] += bacc;
}

void be_hconv_forward(sq_gpu_be *be, float *out, int ldo, int *arg, const float *x,
                      const float *w, const float *b, int n, int L, int C, int F)
{
    size_t m = (size_t)n * L * F;
    if (m)
        SQ_LAUNCH(be, k_hconv_fwd, be_blocks(m, CV_THREADS), CV_THREADS, 0, out, ldo, arg, x,
                  w, b, n, L, C, F);
}

void be_hconv_backward(sq_gpu_be *be, float *dx, float *dw, float *db, const float *dout,
                       int ldo, const int *arg, const float *x, const float *w, int n, int L,
                       int C, int F)
{
    size_t m = (size_t)n * L * C, nw = cv_off(L + 1, F, C);
    if (!m)
        return;
    SQ_LAUNCH(be, k_hconv_dx, be_blocks(m, CV_THREADS), CV_THREADS, 0, dx, dout, ldo, arg, w,
              n, L, C, F);
    SQ_LAUNCH(be, k_hconv_dw, be_blocks(nw, CV_THREADS), CV_THREADS, 0, dw, db, dout, ldo, arg,
              x, n, L, C, F);
}

// ------------------------------------------------------------------------
// Vertical filters

// thread (window i, filter f, column c): b[f] + sum_k w[f, k] x[i, k, c]
static __global__ __launch_bounds__(CV_THREADS) void k_vconv_fwd(
    float *out, int ldo, const float *x, const float *w, const float *b, int n, int L, int C,
    int F)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)n * F * C)
        return;
    int i = (int)(id / ((size_t)F * C)), f = (int)(id / C % F), c = (int)(id % C);
    float y = b ? b[f] : 0;
    for (int k = 0; k < L; k++)
        y += w[(size_t)f * L + k] * x[((size_t)i * L + k) * C + c];
    out[(size_t)i * ldo + (size_t)f * C + c] = y;
}

// thread (window i, row k, column c): dx += sum_f w[f, k] dout[i, f, c]
static __global__ __launch_bounds__(CV_THREADS) void k_vconv_dx(
    float *dx, const float *dout, int ldo, const float *w, int n, int L, int C, int F)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)n * L * C)
        return;
    int i = (int)(id / ((size_t)L * C)), k = (int)(id / C % L), c = (int)(id % C);
    float acc = dx[id];
    for (int f = 0; f < F; f++)
        acc += w[(size_t)f * L + k] * dout[(size_t)i * ldo + (size_t)f * C + c];
    dx[id] = acc;
}

// thread (f, k) of F L, then F more for db: dw[f, k] += sum_i dout[i, f] .
// x[i, k] (each window's dot added in turn); db[f] += every dout[i, f, c]
static __global__ __launch_bounds__(CV_THREADS) void k_vconv_dw(
    float *dw, float *db, const float *dout, int ldo, const float *x, int n, int L, int C,
    int F)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id < (size_t)F * L) {
        int f = (int)(id / L), k = (int)(id % L);
        float acc = dw[id];
        for (int i = 0; i < n; i++)
            acc += be_dot8(dout + (size_t)i * ldo + (size_t)f * C, x + ((size_t)i * L + k) * C,
                          C);
        dw[id] = acc;
    } else if (db && id < (size_t)F * L + F) {
        int f = (int)(id - (size_t)F * L);
        float acc = 0;
        for (int i = 0; i < n; i++)
            for (int c = 0; c < C; c++)
                acc += dout[(size_t)i * ldo + (size_t)f * C + c];
        db[f] += acc;
    }
}

void be_vconv_forward(sq_gpu_be *be, float *out, int ldo, const float *x, const float *w,
                      const float *b, int n, int L, int C, int F)
{
    size_t m = (size_t)n * F * C;
    if (m)
        SQ_LAUNCH(be, k_vconv_fwd, be_blocks(m, CV_THREADS), CV_THREADS, 0, out, ldo, x, w, b,
                  n, L, C, F);
}

void be_vconv_backward(sq_gpu_be *be, float *dx, float *dw, float *db, const float *dout,
                       int ldo, const float *x, const float *w, int n, int L, int C, int F)
{
    size_t m = (size_t)n * L * C, nw = (size_t)F * L + (size_t)F;
    if (!m || !F)
        return;
    SQ_LAUNCH(be, k_vconv_dx, be_blocks(m, CV_THREADS), CV_THREADS, 0, dx, dout, ldo, w, n, L,
              C, F);
    SQ_LAUNCH(be, k_vconv_dw, be_blocks(nw, CV_THREADS), CV_THREADS, 0, dw, db, dout, ldo, x, n,
              L, C, F);
}
