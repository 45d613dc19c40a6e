// k_adam.cu - the optimiser: Adam/AdamW (adam.h's sq_adam_update, and
// sq_adam_update_runs: a model's runs of configs in one launch), the
// gradient's L2 norm and global-norm clipping, with the CPU's arithmetic.
//
// Budgets (nvcc -Xptxas -v, sm_90): every kernel __launch_bounds__(256);
//   adam_kernel        30 registers, no shared memory
//   adam_rows_kernel   30 registers, no shared memory
//   adam_runs_kernel   34 registers, no shared memory (a grid row a run)
//   sumsq_kernel       16 registers, 2 KiB static shared (256 doubles)
//   sumsq_final_kernel 14 registers, 2 KiB static shared
//   scale_kernel       10 registers, no shared memory
// no spills, no local memory.
#include <cmath>

#include "common.cuh"

#define ADAM_THREADS 256
// The norm's first pass: at most this many blocks (partials in be->red),
// the count depending on n only, so that the bits never depend on the
// device.
#define NORM_THREADS 256
#define NORM_BLOCKS_MAX 1024
#define NORM_PER_BLOCK 8192

// Single roundings as the CPU (-ffp-contract=off): nvcc would otherwise fuse
// a * b + c into one fma and the parameters would drift from the CPU's bits.
#ifdef SQ_SIM
#define MUL_RN(a, b) ((a) * (b))
#define ADD_RN(a, b) ((a) + (b))
#define SUB_RN(a, b) ((a) - (b))
#else
#define MUL_RN(a, b) __fmul_rn((a), (b))
#define ADD_RN(a, b) __fadd_rn((a), (b))
#define SUB_RN(a, b) __fsub_rn((a), (b))
#endif

// adam.c's constants: b1, b2, lr, eps, bc1, sqrt(bc2), decay, l2.
struct adam_k {
    float b1, b2, lr, eps, bc1, bc2_sqrt, decay, l2;
};

// adam.c's adam_one, operation for operation (IEEE division and sqrt):
// element i updated with its gradient
static __device__ inline void adam_one(float *param, const float *grad, float *m, float *v,
                                       size_t i, const adam_k &k)
{
    float p = param[i];
    float g = ADD_RN(grad[i], MUL_RN(k.l2, p));
    float mi = ADD_RN(MUL_RN(k.b1, m[i]), MUL_RN(1.0f - k.b1, g));
    float vi = ADD_RN(MUL_RN(k.b2, v[i]), MUL_RN(MUL_RN(1.0f - k.b2, g), g));
    m[i] = mi;
    v[i] = vi;
    float mhat = mi / k.bc1;
    float denom = ADD_RN(sqrtf(vi) / k.bc2_sqrt, k.eps);
    param[i] = SUB_RN(MUL_RN(p, k.decay), MUL_RN(k.lr, mhat) / denom);
}

static __global__ __launch_bounds__(ADAM_THREADS) void adam_kernel(float *param,
                                                                   const float *grad, float *m,
                                                                   float *v, size_t n,
                                                                   const adam_k *kp,
                                                                   const int *gate)
{
    if (gate && !*gate) // a CUDA graph's step whose loss stops the run
        return;
    const adam_k k = *kp;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        adam_one(param, grad, m, v, i, k);
}

// A run of adam_runs_kernel: its elements and constants
struct adam_run {
    size_t off, len;
    adam_k k;
};

// The runs in one launch (adam.c's sq_adam_update_runs): blocks
// (x, y = run) walk run y's elements grid-stride; the same arithmetic a
// element as adam_kernel, so the same bits as a launch a run
static __global__ __launch_bounds__(ADAM_THREADS) void adam_runs_kernel(
    float *param, const float *grad, float *m, float *v, const adam_run *runs, const int *gate)
{
    if (gate && !*gate)
        return;
    const adam_run r = runs[blockIdx.y];
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < r.len; i += stride)
        adam_one(param + r.off, grad + r.off, m + r.off, v + r.off, i, r.k);
}

// Lazy Adam (adam.c's sq_adam_update_rows): element j of listed row
// rows[i] for the flat index i width + j; SQ_ADAM_NO_ROW entries skipped
static __global__ __launch_bounds__(ADAM_THREADS) void adam_rows_kernel(
    float *param, const float *grad, float *m, float *v, size_t width, const uint32_t *rows,
    size_t n, const adam_k *kp, const int *gate)
{
    if (gate && !*gate)
        return;
    const adam_k k = *kp;
    size_t stride = (size_t)gridDim.x * blockDim.x, total = n * width;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += stride) {
        uint32_t r = rows[i / width];
        if (r != UINT32_MAX)
            adam_one(param, grad, m, v, (size_t)r * width + i % width, k);
    }
}

// adam.c's adam_consts: in double on the host, rounded to float once
static adam_k adam_consts(double lr, double beta1, double beta2, double eps,
                          double weight_decay, int decoupled, long t)
{
    adam_k k;
    float flr = (float)lr, wd = (float)weight_decay;
    k.b1 = (float)beta1;
    k.b2 = (float)beta2;
    k.lr = flr;
    k.eps = (float)eps;
    k.bc1 = (float)(1.0 - pow(beta1, (double)t));
    k.bc2_sqrt = (float)sqrt(1.0 - pow(beta2, (double)t));
    k.decay = decoupled ? 1.0f - flr * wd : 1.0f;
    k.l2 = decoupled ? 0.0f : wd;
    return k;
}

// Blocks for a grid-stride loop over n elements: beyond a million blocks
// the stride covers the rest (any device is full)
static unsigned adam_grid(size_t n)
{
    unsigned grid = be_blocks(n, ADAM_THREADS);
    return grid > 65535u * 16u ? 65535u * 16u : grid;
}

// The gate of a CUDA graph's step (graph.cu), NULL eagerly
static const int *adam_gate(const sq_gpu_be *be)
{
    return be->gmode != BE_G_EAGER ? (const int *)be->gate : (const int *)NULL;
}

void be_adam_update(sq_gpu_be *be, float *param, const float *grad, float *m, float *v,
                    size_t n, double lr, double beta1, double beta2, double eps,
                    double weight_decay, int decoupled, long t)
{
    if (n == 0)
        return;
    adam_k k = adam_consts(lr, beta1, beta2, eps, weight_decay, decoupled, t);
    // the constants change with t: read on the device, so that a CUDA
    // graph's replay takes the step's own (graph.cu)
    const adam_k *dk = (const adam_k *)be_op_upload(be, &k, sizeof k);
    if (dk)
        SQ_LAUNCH(be, adam_kernel, adam_grid(n), ADAM_THREADS, 0, param, grad, m, v, n, dk,
                  adam_gate(be));
}

void be_adam_runs(sq_gpu_be *be, float *param, const float *grad, float *m, float *v,
                  const size_t *offs, const size_t *lens, const double *cfgs, int n, long t)
{
    adam_run runs[SQ_ADAM_RUNS_GPU];
    size_t most = 0;
    if (n <= 0)
        return;
    if (n > SQ_ADAM_RUNS_GPU) { // adam.c cuts longer lists
        be_note(be, cudaErrorInvalidValue, "adam_runs: too many runs");
        return;
    }
    for (int i = 0; i < n; i++) {
        const double *c = cfgs + 6 * i;
        runs[i].off = offs[i];
        runs[i].len = lens[i];
        runs[i].k = adam_consts(c[0], c[1], c[2], c[3], c[4], (int)c[5], t);
        most = lens[i] > most ? lens[i] : most;
    }
    if (!most)
        return;
    // the constants change with t: read on the device (a graph's replay)
    const adam_run *d = (const adam_run *)be_op_upload(be, runs, (size_t)n * sizeof *runs);
    if (d)
        SQ_LAUNCH(be, adam_runs_kernel, dim3(adam_grid(most), (unsigned)n), ADAM_THREADS, 0,
                  param, grad, m, v, d, adam_gate(be));
}

void be_adam_rows(sq_gpu_be *be, float *param, const float *grad, float *m, float *v,
                  size_t width, const uint32_t *rows, size_t n, double lr, double beta1,
                  double beta2, double eps, double weight_decay, int decoupled, long t)
{
    if (n == 0 || width == 0)
        return;
    adam_k k = adam_consts(lr, beta1, beta2, eps, weight_decay, decoupled, t);
    // the list follows the batch: uploaded (a graph's step fixes its length)
    const adam_k *dk = (const adam_k *)be_op_upload(be, &k, sizeof k);
    const uint32_t *drows = (const uint32_t *)be_op_upload(be, rows, n * sizeof *rows);
    if (dk && drows)
        SQ_LAUNCH(be, adam_rows_kernel, adam_grid(n * width), ADAM_THREADS, 0, param, grad, m,
                  v, width, drows, n, dk, adam_gate(be));
}

// Pass 1: block b sums g^2 over its contiguous slice, in double, each
// thread a strided part, then a fixed tree.
static __global__ __launch_bounds__(NORM_THREADS) void sumsq_kernel(double *part,
                                                                    const float *g, size_t n,
                                                                    size_t per_block)
{
    __shared__ double sh[NORM_THREADS];
    size_t i0 = (size_t)blockIdx.x * per_block;
    size_t i1 = i0 + per_block < n ? i0 + per_block : n;
    double s = 0;
    for (size_t i = i0 + threadIdx.x; i < i1; i += blockDim.x)
        s += (double)g[i] * (double)g[i];
    s = be_block_sum_d(s, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = s;
}

// Pass 2: one block sums the partials (fixed order) into out[0].
static __global__ __launch_bounds__(NORM_THREADS) void sumsq_final_kernel(double *out,
                                                                          const double *part,
                                                                          int np)
{
    __shared__ double sh[NORM_THREADS];
    double s = 0;
    for (int i = threadIdx.x; i < np; i += blockDim.x)
        s += part[i];
    s = be_block_sum_d(s, sh);
    if (threadIdx.x == 0)
        out[0] = s;
}

// The sum of squares, queued, into be->red[0] (partials in red[1..]).
static void queue_sumsq(sq_gpu_be *be, const float *g, size_t n)
{
    size_t blocks = (n + NORM_PER_BLOCK - 1) / NORM_PER_BLOCK;
    if (blocks < 1)
        blocks = 1;
    if (blocks > NORM_BLOCKS_MAX)
        blocks = NORM_BLOCKS_MAX;
    size_t per_block = (n + blocks - 1) / blocks;
    SQ_LAUNCH(be, sumsq_kernel, (unsigned)blocks, NORM_THREADS, 0, be->red + 1, g, n,
              per_block);
    SQ_LAUNCH(be, sumsq_final_kernel, 1, NORM_THREADS, 0, be->red, be->red + 1, (int)blocks);
}

double be_grad_norm(sq_gpu_be *be, const float *g, size_t n)
{
    if (n == 0)
        return 0;
    queue_sumsq(be, g, n);
    return sqrt(be_download_red(be, 0));
}

static __global__ __launch_bounds__(ADAM_THREADS) void scale_kernel(float *g, size_t n,
                                                                    float s)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        g[i] *= s;
}

// adam.c's sq_grad_clip: the norm, and g scaled when it exceeds max_norm.
double be_grad_clip(sq_gpu_be *be, float *g, size_t n, double max_norm)
{
    double norm = be_grad_norm(be, g, n);
    if (!std::isfinite(norm) || max_norm <= 0 || norm <= max_norm)
        return norm;
    float s = (float)(max_norm / (norm + 1e-6));
    SQ_LAUNCH(be, scale_kernel, adam_grid(n), ADAM_THREADS, 0, g, n, s);
    return norm;
}
