// k_bkl.cu - Blin's bidirectional KL between two views' next-item
// distributions over every item (bkl.h, the full mode: cand NULL), the GPU
// twin of bkl.c's sq_bkl. The sampled mode (a support per pair) has no
// kernel: blin's gpu_check refuses --softmax sampled on a GPU, and a call
// here records the sticky error.
//
// As the CPU: chunks of m pairs; the 2m states gathered (view a rows 0..m-1,
// view b rows m..2m-1), one cuBLAS GEMM for their logits over every item,
// a block per pair for its max, its four sums and its gradient in place,
// two GEMMs back to the states and the item table, and the states'
// gradients added into dh in pair order (rows may be shared between
// pairs). The sums run in double over a block's threads (each thread its
// items in order, then the block's fixed tree; the CPU: one sum in item
// order), expf as the CPU's float exp: results equal the CPU's to
// rounding, two runs the same bits.
//
// Budget: __launch_bounds__(256); the pair kernel 2 KiB of static shared
// memory (one double a thread) and its statistics; no spills.
#include "common.cuh"

#define BK_THREADS 256

// hc rows r = h[ra[e0 + r]] and m + r = h[rb[e0 + r]], a thread an element
static __global__ __launch_bounds__(BK_THREADS) void k_bkl_gather(float *hc, const float *h,
                                                                  const int *ra, const int *rb,
                                                                  int e0, int m, int C)
{
    size_t id = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (id >= (size_t)2 * m * C)
        return;
    int r = (int)(id / C), c = (int)(id % C);
    int src = r < m ? ra[e0 + r] : rb[e0 + r - m];
    hc[id] = h[(size_t)src * C + c];
}

// Block r: the pair of logit rows a = logits[r], b = logits[m + r] over
// items 1..V1-1: rowloss[r] = KL(P||Q) + KL(Q||P) and, when grad, the rows
// overwritten by g times their gradient (bkl.c's bkl_rows; item 0: 0)
static __global__ __launch_bounds__(BK_THREADS) void k_bkl_pair(float *logits, float *rowloss,
                                                                int m, int V1, float g, int grad)
{
    __shared__ double sh[BK_THREADS];
    __shared__ float fm[2][BK_THREADS];
    __shared__ double st[5]; // lza, lzb, kpq, kqp, d
    float *a = logits + (size_t)blockIdx.x * V1, *b = logits + (size_t)(m + blockIdx.x) * V1;
    int tid = threadIdx.x;
    float ma = a[1], mb = b[1];
    for (int j = 1 + tid; j < V1; j += blockDim.x) {
        ma = a[j] > ma ? a[j] : ma;
        mb = b[j] > mb ? b[j] : mb;
    }
    fm[0][tid] = ma;
    fm[1][tid] = mb;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (tid < (int)h) {
            fm[0][tid] = fm[0][tid + h] > fm[0][tid] ? fm[0][tid + h] : fm[0][tid];
            fm[1][tid] = fm[1][tid + h] > fm[1][tid] ? fm[1][tid + h] : fm[1][tid];
        }
        __syncthreads();
    }
    ma = fm[0][0];
    mb = fm[1][0];
    double za = 0, zb = 0, wa = 0, wb = 0;
    for (int j = 1 + tid; j < V1; j += blockDim.x) {
        double ea = expf(a[j] - ma), eb = expf(b[j] - mb), delta = (double)a[j] - b[j];
        za += ea;
        zb += eb;
        wa += ea * delta;
        wb -= eb * delta;
    }
    za = be_block_sum_d(za, sh);
    zb = be_block_sum_d(zb, sh);
    wa = be_block_sum_d(wa, sh);
    wb = be_block_sum_d(wb, sh);
    if (tid == 0) { // bkl.c's bkl_finish
        double lza = ma + log(za), lzb = mb + log(zb), epa = wa / za, eqb = wb / zb;
        st[0] = lza;
        st[1] = lzb;
        st[2] = epa - (lza - lzb);
        st[3] = eqb + (lza - lzb);
        st[4] = epa + eqb;
        rowloss[blockIdx.x] = (float)st[4];
    }
    __syncthreads();
    if (!grad)
        return;
    if (tid == 0)
        a[0] = b[0] = 0;
    for (int j = 1 + tid; j < V1; j += blockDim.x) { // bkl.c's bkl_dlogit
        double lp = (double)a[j] - st[0], lq = (double)b[j] - st[1];
        float p = expf((float)lp), q = expf((float)lq), d = (float)(lp - lq);
        float da = g * (p * (d - (float)st[2]) + (p - q));
        float db = g * (q * (-d - (float)st[3]) + (q - p));
        a[j] = da;
        b[j] = db;
    }
}

// red[0] (+)= rowloss[0..m) in pair order (one thread: m is a chunk)
static __global__ __launch_bounds__(32) void k_bkl_total(double *red, const float *rowloss,
                                                         int m, int first)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    double t = first ? 0.0 : red[0];
    for (int r = 0; r < m; r++)
        t += rowloss[r];
    red[0] = t;
}

// dh rows ra[e0 + r] += dhc[r], rb[e0 + r] += dhc[m + r], pairs in order: a
// thread a column (rows may repeat, so the pairs cannot run side by side)
static __global__ __launch_bounds__(BK_THREADS) void k_bkl_scatter(float *dh, const float *dhc,
                                                                   const int *ra,
                                                                   const int *rb, int e0, int m,
                                                                   int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int r = 0; r < m; r++) {
        dh[(size_t)ra[e0 + r] * C + c] += dhc[(size_t)r * C + c];
        dh[(size_t)rb[e0 + r] * C + c] += dhc[(size_t)(m + r) * C + c];
    }
}

double be_bkl(sq_gpu_be *be, float *dh, float *dE, float *scratch, const float *h,
              const float *E, const int *ra, const int *rb, const int *cand, int S, int n,
              int C, int V1, int chunk, float dloss)
{
    (void)S;
    if (n <= 0)
        return 0;
    if (cand || chunk < 1) {
        be_note(be, cudaErrorInvalidValue, "bkl: the sampled mode has no GPU kernel");
        return NAN;
    }
    int grad = dh && dE;
    float g = dloss / (float)(2 * n);
    const int *dra = be_ints(be, ra), *drb = be_ints(be, rb);
    float *logits = scratch;                     // [2 chunk, V1]
    float *hc = logits + 2 * (size_t)chunk * V1; // [2 chunk, C]
    float *dhc = hc + 2 * (size_t)chunk * C;     // [2 chunk, C]
    float *rowloss = dhc + 2 * (size_t)chunk * C;
    for (int e0 = 0; e0 < n; e0 += chunk) {
        int m = n - e0 < chunk ? n - e0 : chunk;
        SQ_LAUNCH(be, k_bkl_gather, be_blocks((size_t)2 * m * C, BK_THREADS), BK_THREADS, 0, hc,
                  h, dra, drb, e0, m, C);
        be_gemm(be, 0, 1, 2 * m, V1, C, 1, hc, C, E, C, 0, logits, V1);
        SQ_LAUNCH(be, k_bkl_pair, (unsigned)m, BK_THREADS, 0, logits, rowloss, m, V1, g, grad);
        SQ_LAUNCH(be, k_bkl_total, 1, 32, 0, be->red, rowloss, m, e0 == 0);
        if (!grad)
            continue;
        be_gemm(be, 0, 0, 2 * m, C, V1, 1, logits, V1, E, C, 0, dhc, C);
        be_gemm(be, 1, 0, V1, C, 2 * m, 1, logits, V1, hc, C, 1, dE, C);
        SQ_LAUNCH(be, k_bkl_scatter, be_blocks((size_t)C, BK_THREADS), BK_THREADS, 0, dh, dhc,
                  dra, drb, e0, m, C);
    }
    return be_result(be, 0, 2.0 * n); // 0.5 x / n, the same bits
}
