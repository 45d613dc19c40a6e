// k_nce.cu - the InfoNCE loss's two pieces between its GEMMs (infonce.h),
// the GPU twins of infonce.c's sq_nce_softmax and sq_nce_grad, on the
// similarity matrix S [M, M] (M = 2U views) in place:
//   softmax: row i becomes P_i, the softmax over the kept k (not i; with
//     labels, not a same-label view of another pair, the positive always
//     kept), and the loss sum_i (lse_i - S_i,p(i)) comes back in double;
//   grad: S = (S - onehot(p)) g, then S + S^T.
//
// softmax is a block per row: the row's max, its sum of exp in double
// (each thread its columns in order, then the block's fixed tree; the CPU
// sums in column order: equal to rounding) and P (CUDA's exp and log in
// double: the CPU's to 1 ulp), the row's loss into the context's workspace,
// then one block sums the rows' losses (fixed order): the same bits every
// run. (One block, a thread a row, had walked the 512 rows of a batch of
// 256 users on one multiprocessor, each thread's loads strided a row
// apart.) grad is a thread per pair (i <= k) writing both (i, k) and
// (k, i): the CPU's float arithmetic, its bits.
//
// Budget: __launch_bounds__(256); softmax and total 2 KiB of static shared
// memory (a double a thread), no spills.
#include "common.cuh"

#define NC_THREADS 256

// infonce.c's excluded: k is not among i's negatives
static __device__ __forceinline__ int nc_excluded(const int *label, int U, int i, int k)
{
    if (k == i)
        return 1;
    if (!label || k == (i < U ? i + U : i - U))
        return 0;
    return label[k % U] == label[i % U];
}

// The block's max of one float a thread (sh: a double a thread), on
// every thread; sh free again on return
static __device__ float nc_block_max(float m, double *sh)
{
    sh[threadIdx.x] = m;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h && sh[threadIdx.x + h] > sh[threadIdx.x])
            sh[threadIdx.x] = sh[threadIdx.x + h];
        __syncthreads();
    }
    float r = (float)sh[0];
    __syncthreads();
    return r;
}

// Block i: row i of S (M = 2U) in place: its max over the kept k, its sum
// of exp in double (each thread its k in order, then the block's fixed
// tree), P_i, and the row's loss lse_i - S_i,p(i) into rowloss[i]
static __global__ __launch_bounds__(NC_THREADS) void k_nce_softmax(double *rowloss, float *S,
                                                                    int U, const int *label)
{
    __shared__ double sh[NC_THREADS];
    int M = 2 * U, i = blockIdx.x, tid = threadIdx.x;
    float *s = S + (size_t)i * M;
    float sp = s[i < U ? i + U : i - U]; // read before the row is overwritten
    float mx = -INFINITY;
    for (int k = tid; k < M; k += blockDim.x)
        if (!nc_excluded(label, U, i, k) && s[k] > mx)
            mx = s[k];
    mx = nc_block_max(mx, sh);
    double sum = 0;
    for (int k = tid; k < M; k += blockDim.x)
        if (!nc_excluded(label, U, i, k))
            sum += exp((double)s[k] - mx);
    double lse = (double)mx + log(be_block_sum_d(sum, sh));
    for (int k = tid; k < M; k += blockDim.x)
        s[k] = nc_excluded(label, U, i, k) ? 0.0f : (float)exp((double)s[k] - lse);
    if (tid == 0)
        rowloss[i] = lse - (double)sp;
}

// red[0] = rowloss[0, M) (each thread its rows in order, then the fixed tree)
static __global__ __launch_bounds__(NC_THREADS) void k_nce_total(double *red,
                                                                  const double *rowloss, int M)
{
    __shared__ double sh[NC_THREADS];
    double acc = 0;
    for (int i = threadIdx.x; i < M; i += blockDim.x)
        acc += rowloss[i];
    acc = be_block_sum_d(acc, sh);
    if (threadIdx.x == 0)
        red[0] = acc;
}

// thread (i, k) of M x M with i <= k: G at (i, k) and (k, i), summed
static __global__ __launch_bounds__(NC_THREADS) void k_nce_grad(float *S, int U, float g)
{
    int M = 2 * U;
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)M * M)
        return;
    int i = (int)(id / M), k = (int)(id % M);
    if (i > k)
        return;
    int pi = i < U ? i + U : i - U, pk = k < U ? k + U : k - U;
    float a = (S[(size_t)i * M + k] - (k == pi ? 1 : 0)) * g;
    if (i == k) {
        S[id] = a;
        return;
    }
    float b = (S[(size_t)k * M + i] - (i == pk ? 1 : 0)) * g;
    float sym = a + b;
    S[(size_t)i * M + k] = sym;
    S[(size_t)k * M + i] = sym;
}

double be_nce_softmax(sq_gpu_be *be, float *S, int U, const int *label, double div)
{
    if (U < 1)
        return 0;
    // the rows' losses in the context's workspace (no column sum runs inside this op)
    size_t M = (size_t)2 * U;
    if (M > BE_SUM_WS / 2) {
        be_note(be, cudaErrorInvalidValue, "nce_softmax: more views than its workspace holds");
        return NAN;
    }
    double *rowloss = (double *)(void *)be->sum_ws;
    SQ_LAUNCH(be, k_nce_softmax, (unsigned)M, NC_THREADS, 0, rowloss, S, U,
              label ? be_ints(be, label) : (const int *)NULL);
    SQ_LAUNCH(be, k_nce_total, 1, NC_THREADS, 0, be->red, (const double *)rowloss, (int)M);
    return be_result(be, 0, div);
}

void be_nce_grad(sq_gpu_be *be, float *S, int U, float g)
{
    size_t n = (size_t)4 * U * U;
    if (n)
        SQ_LAUNCH(be, k_nce_grad, be_blocks(n, NC_THREADS), NC_THREADS, 0, S, U, g);
}
