// k_elem.cu - copies, fills, element-wise ops, dropout and residuals: the
// GPU twins of ops.c's sections 5-7 and its 2-D helpers.
//
// Budget: every kernel here is a grid-stride loop of 256 threads, no
// shared memory, a handful of registers (__launch_bounds__(256)).
// Built with --fmad=false (cuda.mk), so `a + s * b` rounds as the CPU's
// -ffp-contract=off code does: copies, fills, ReLU, dropout and residuals
// give the CPU's bits; GELU differs by the erf (the CPU's float build uses
// vec.h's polynomial, within 6e-7 of erf; here erff).
#include "common.cuh"

#define EW_THREADS 256

// Grid-stride loop over n elements, and its blocks (common.cuh).
#define EW_LOOP(i, n) BE_EW_LOOP(i, n)
static unsigned ew_blocks(sq_gpu_be *be, size_t n)
{
    return be_ew_blocks(be, n, EW_THREADS);
}

void be_zero(sq_gpu_be *be, float *x, size_t n)
{
    if (n)
        be_memset_async(be, x, 0, n * sizeof *x, "zero");
}

static __global__ __launch_bounds__(EW_THREADS) void k_scale(float *x, size_t n, float a)
{
    EW_LOOP(i, n)
        x[i] *= a;
}

void be_scale(sq_gpu_be *be, float *x, size_t n, float a)
{
    if (n)
        SQ_LAUNCH(be, k_scale, ew_blocks(be, n), EW_THREADS, 0, x, n, a);
}

void be_copy(sq_gpu_be *be, float *dst, const float *src, size_t n)
{
    if (n && dst != src)
        be_memcpy_async(be, dst, src, n * sizeof *dst, cudaMemcpyDeviceToDevice, "copy");
}

// 2-D views: rows x cols of a row-major array with leading dimension ld.
static __global__ __launch_bounds__(EW_THREADS) void k_fill2d(float *d, int ld, int rows,
                                                              int cols, float v)
{
    size_t n = (size_t)rows * cols;
    EW_LOOP(i, n) d[(i / cols) * ld + i % cols] = v;
}

static __global__ __launch_bounds__(EW_THREADS) void k_copy2d(float *d, int ldd, const float *s,
                                                              int lds, int rows, int cols,
                                                              int add)
{
    size_t n = (size_t)rows * cols;
    EW_LOOP(i, n) {
        size_t r = i / cols, c = i % cols;
        float v = s[r * lds + c];
        d[r * ldd + c] = add ? d[r * ldd + c] + v : v;
    }
}

void be_fill2d(sq_gpu_be *be, float *dst, int ld, int rows, int cols, float v)
{
    size_t n = (size_t)rows * cols;
    if (n)
        SQ_LAUNCH(be, k_fill2d, ew_blocks(be, n), EW_THREADS, 0, dst, ld, rows, cols, v);
}

void be_copy2d(sq_gpu_be *be, float *dst, int ld_dst, const float *src, int ld_src, int rows,
               int cols)
{
    size_t n = (size_t)rows * cols;
    if (n)
        SQ_LAUNCH(be, k_copy2d, ew_blocks(be, n), EW_THREADS, 0, dst, ld_dst, src, ld_src, rows,
                  cols, 0);
}

// ld_src 0: src is one row, added to every row (a bias)
void be_add2d(sq_gpu_be *be, float *dst, int ld_dst, const float *src, int ld_src, int rows,
              int cols)
{
    size_t n = (size_t)rows * cols;
    if (n)
        SQ_LAUNCH(be, k_copy2d, ew_blocks(be, n), EW_THREADS, 0, dst, ld_dst, src, ld_src, rows,
                  cols, 1);
}

// ---- GELU, ReLU --------------------------------------------------------

static __global__ __launch_bounds__(EW_THREADS) void k_gelu(float *out, const float *inp,
                                                            size_t n)
{
    EW_LOOP(i, n) {
        float x = inp[i];
        out[i] = 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f));
    }
}

// set: dinp = 0 + ... (ops.c's gelu_back_chunk), dinp not read; else +=
static __global__ __launch_bounds__(EW_THREADS) void k_gelu_back(float *dinp, const float *dout,
                                                                 const float *inp, size_t n,
                                                                 int set)
{
    EW_LOOP(i, n) {
        float x = inp[i];
        float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
        float pdf = 0.39894228040143267794f * expf(-0.5f * x * x);
        dinp[i] = (set ? 0.0f : dinp[i]) + dout[i] * (cdf + x * pdf);
    }
}

static __global__ __launch_bounds__(EW_THREADS) void k_relu(float *out, const float *inp,
                                                            size_t n)
{
    EW_LOOP(i, n) out[i] = inp[i] > 0 ? inp[i] : 0.0f;
}

static __global__ __launch_bounds__(EW_THREADS) void k_relu_back(float *dinp, const float *dout,
                                                                 const float *inp, size_t n)
{
    EW_LOOP(i, n) dinp[i] += inp[i] > 0 ? dout[i] : 0.0f;
}

void be_gelu_forward(sq_gpu_be *be, float *out, const float *inp, size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_gelu, ew_blocks(be, n), EW_THREADS, 0, out, inp, n);
}

void be_gelu_backward(sq_gpu_be *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_gelu_back, ew_blocks(be, n), EW_THREADS, 0, dinp, dout, inp, n, 0);
}

void be_gelu_backward_to(sq_gpu_be *be, float *dinp, const float *dout, const float *inp,
                         size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_gelu_back, ew_blocks(be, n), EW_THREADS, 0, dinp, dout, inp, n, 1);
}

void be_relu_forward(sq_gpu_be *be, float *out, const float *inp, size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_relu, ew_blocks(be, n), EW_THREADS, 0, out, inp, n);
}

void be_relu_backward(sq_gpu_be *be, float *dinp, const float *dout, const float *inp, size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_relu_back, ew_blocks(be, n), EW_THREADS, 0, dinp, dout, inp, n);
}

// ---- Dropout: ops.c's generator, element for element ------------------

// ops.c's dropout_key(seed, step, site)
static uint64_t drop_key(uint64_t seed, uint64_t step, uint64_t site)
{
    uint64_t x = seed + step * 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 31)) + site * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 29)) * 0x94d049bb133111ebull;
    return x ^ (x >> 32);
}

// vec.h's sq_hash32 and sq_counter_uniform
static __device__ __forceinline__ uint32_t hash32(uint32_t x)
{
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
}

static __device__ __forceinline__ float counter_uniform(uint64_t key, uint32_t i)
{
    uint32_t x = hash32(i ^ (uint32_t)key);
    x = hash32(x + (uint32_t)(key >> 32));
    return (float)(x >> 8) * (1.0f / 16777216.0f);
}

// set: dinp = 0 + ... (ops.c's dropout_back_chunk: a zeroed dinp's bits,
// dinp not read); else dinp += ...
static __global__ __launch_bounds__(EW_THREADS) void k_dropout_back(float *dinp,
                                                                    const float *dout,
                                                                    const uint8_t *mask,
                                                                    size_t n, float keep, int set)
{
    EW_LOOP(i, n) dinp[i] = (set ? 0.0f : dinp[i]) + dout[i] * (keep * (float)mask[i]);
}

void be_dropout_backward(sq_gpu_be *be, float *dinp, const float *dout, const uint8_t *mask,
                         size_t n, float p)
{
    if (n)
        SQ_LAUNCH(be, k_dropout_back, ew_blocks(be, n), EW_THREADS, 0, dinp, dout, mask, n,
                  1.0f / (1.0f - p), 0);
}

void be_dropout_backward_to(sq_gpu_be *be, float *dinp, const float *dout, const uint8_t *mask,
                            size_t n, float p)
{
    if (n)
        SQ_LAUNCH(be, k_dropout_back, ew_blocks(be, n), EW_THREADS, 0, dinp, dout, mask, n,
                  1.0f / (1.0f - p), 1);
}

// Dropout (ops.c's dropout_chunk): KIND 0 out = dropout(inp), fused with
// its neighbour: 1 out = res + dropout(inp) (a sublayer's residual), 2 out
// = dropout(relu(inp)) (the FFN's hidden layer), the dropped tensor never
// written. The CPU's draw and product, so its masks and bits: the CPU
// folds a chunk's high index bits into the key (its chunks of SQ_CHUNK
// elements never straddle 2^32), so element i uses the key of i >> 32 and
// the counter (uint32_t)i.
template <int KIND>
static __global__ __launch_bounds__(EW_THREADS) void k_dropout_fused(float *out, uint8_t *mask,
                                                                     const float *res,
                                                                     const float *inp, size_t n,
                                                                     float p, float keep,
                                                                     const uint64_t *key)
{
    EW_LOOP(i, n) {
        uint64_t k = *key + (uint64_t)(i >> 32) * 0xd6e8feb86659fd93ull;
        float u = counter_uniform(k, (uint32_t)i);
        uint8_t keep_it = (uint8_t)(u >= p);
        float m = keep * (float)keep_it, x = inp[i];
        mask[i] = keep_it;
        if (KIND == 2)
            x = x > 0 ? x : 0.0f;
        out[i] = KIND == 1 ? res[i] + x * m : x * m;
    }
}

// KIND as k_dropout_fused's; p 0 (scoring, or no dropout): the mask all 1,
// nothing drawn, the neighbour alone
static void dropout_fused(sq_gpu_be *be, int kind, float *out, uint8_t *mask, const float *res,
                          const float *inp, size_t n, float p, uint64_t seed, uint64_t step,
                          uint64_t site)
{
    if (!n)
        return;
    if (p == 0) {
        be_memset_async(be, mask, 1, n, "dropout");
        if (kind == 1)
            be_residual_forward(be, out, res, inp, n);
        else if (kind == 2)
            be_relu_forward(be, out, inp, n);
        else
            be_copy(be, out, inp, n);
        return;
    }
    float keep = 1.0f / (1.0f - p);
    // the key changes every step: read on the device, so that a CUDA
    // graph's replay draws the step's own mask (graph.cu)
    uint64_t key = drop_key(seed, step, site);
    const uint64_t *dkey = (const uint64_t *)be_op_upload(be, &key, sizeof key);
    if (!dkey)
        return;
    static const char *const name[3] = {"k_dropout", "k_dropout_add", "k_relu_dropout"};
    void (*const kern[3])(float *, uint8_t *, const float *, const float *, size_t, float, float,
                          const uint64_t *) = {k_dropout_fused<0>, k_dropout_fused<1>,
                                               k_dropout_fused<2>};
    be_launch(be, name[kind], kern[kind], dim3(ew_blocks(be, n)), dim3(EW_THREADS), 0, out, mask,
              res, inp, n, p, keep, dkey);
}

void be_dropout_forward(sq_gpu_be *be, float *out, uint8_t *mask, const float *inp, int T, int C,
                        float p, uint64_t seed, uint64_t step, uint64_t site)
{
    dropout_fused(be, 0, out, mask, NULL, inp, (size_t)T * C, p, seed, step, site);
}

void be_dropout_add_forward(sq_gpu_be *be, float *out, uint8_t *mask, const float *res,
                            const float *inp, int T, int C, float p, uint64_t seed,
                            uint64_t step, uint64_t site)
{
    dropout_fused(be, 1, out, mask, res, inp, (size_t)T * C, p, seed, step, site);
}

void be_relu_dropout_forward(sq_gpu_be *be, float *out, uint8_t *mask, const float *inp, int T,
                             int C, float p, uint64_t seed, uint64_t step, uint64_t site)
{
    dropout_fused(be, 2, out, mask, NULL, inp, (size_t)T * C, p, seed, step, site);
}

// Back through k_dropout_fused<2> into dinp, written (ops.c's
// relu_dropout_back_chunk: the bits of k_dropout_back into zeros, then
// k_relu_back into zeros)
static __global__ __launch_bounds__(EW_THREADS) void k_relu_dropout_back(float *dinp,
                                                                         const float *dout,
                                                                         const uint8_t *mask,
                                                                         const float *inp,
                                                                         size_t n, float keep)
{
    EW_LOOP(i, n) {
        float g = 0.0f + dout[i] * (keep * (float)mask[i]);
        dinp[i] = 0.0f + (inp[i] > 0 ? g : 0.0f);
    }
}

void be_relu_dropout_backward_to(sq_gpu_be *be, float *dinp, const float *dout,
                                 const uint8_t *mask, const float *inp, size_t n, float p)
{
    if (n)
        SQ_LAUNCH(be, k_relu_dropout_back, ew_blocks(be, n), EW_THREADS, 0, dinp, dout, mask, inp,
                  n, 1.0f / (1.0f - p));
}

// ---- Residual ----------------------------------------------------------

static __global__ __launch_bounds__(EW_THREADS) void k_add(float *out, const float *a,
                                                           const float *b, size_t n)
{
    EW_LOOP(i, n) out[i] = a[i] + b[i];
}

static __global__ __launch_bounds__(EW_THREADS) void k_add_both(float *da, float *db,
                                                                const float *dout, size_t n)
{
    EW_LOOP(i, n) {
        float g = dout[i];
        if (da)
            da[i] += g;
        if (db)
            db[i] += g;
    }
}

void be_residual_forward(sq_gpu_be *be, float *out, const float *a, const float *b, size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_add, ew_blocks(be, n), EW_THREADS, 0, out, a, b, n);
}

void be_residual_backward(sq_gpu_be *be, float *da, float *db, const float *dout, size_t n)
{
    if (n)
        SQ_LAUNCH(be, k_add_both, ew_blocks(be, n), EW_THREADS, 0, da, db, dout, n);
}
