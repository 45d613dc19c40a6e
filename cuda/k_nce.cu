// k_nce.cu - the InfoNCE loss's two pieces between its GEMMs (infonce.h),
// the GPU twins of infonce.c's sq_nce_softmax and sq_nce_grad, on the
// similarity matrix S [M, M] (M = 2U views) in place:
//   softmax: row i becomes P_i, the softmax over the kept k (not i; with
//     labels, not a same-label view of another pair, the positive always
//     kept), and the loss sum_i (lse_i - S_i,p(i)) comes back in double;
//   grad: S = (S - onehot(p)) g, then S + S^T.
//
// softmax is one block: a thread per row (rows tid, tid + 256, ...), the
// row's max, sum and P in the CPU's order and precision (double, CUDA's exp
// and log: the CPU's to 1 ulp), each thread's losses summed in row order,
// then the block's fixed tree: the same bits every run, the CPU's sum to
// rounding. grad is a thread per pair (i <= k) writing both (i, k) and
// (k, i): the CPU's float arithmetic, its bits.
//
// Budget: __launch_bounds__(256); softmax 2 KiB of static shared memory
// (the block sum), no spills.
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

static __global__ __launch_bounds__(NC_THREADS) void k_nce_softmax(double *red, float *S, int U,
                                                                    const int *label)
{
    __shared__ double sh[NC_THREADS];
    int M = 2 * U;
    double acc = 0;
    for (int i = threadIdx.x; i < M; i += blockDim.x) {
        float *s = S + (size_t)i * M;
        int p = i < U ? i + U : i - U;
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < M; k++)
            if (!nc_excluded(label, U, i, k) && s[k] > mx)
                mx = s[k];
        for (int k = 0; k < M; k++)
            if (!nc_excluded(label, U, i, k))
                sum += exp((double)s[k] - mx);
        double lse = mx + log(sum);
        acc += lse - (double)s[p];
        for (int k = 0; k < M; k++)
            s[k] = nc_excluded(label, U, i, k) ? 0.0f : (float)exp((double)s[k] - lse);
    }
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
    SQ_LAUNCH(be, k_nce_softmax, 1, NC_THREADS, 0, be->red, S, U,
              label ? be_ints(be, label) : (const int *)NULL);
    return be_result(be, 0, div);
}

void be_nce_grad(sq_gpu_be *be, float *S, int U, float g)
{
    size_t n = (size_t)4 * U * U;
    if (n)
        SQ_LAUNCH(be, k_nce_grad, be_blocks(n, NC_THREADS), NC_THREADS, 0, S, U, g);
}
