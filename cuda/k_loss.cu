// k_loss.cu - the losses: full-softmax cross-entropy over every item, in
// row chunks (ops.h 9, sq_ce_full / sq_ce_full_bias), and BCE with sampled
// negatives (ops.h 10, sq_bce_sampled).
//
// Full CE, per chunk of `chunk` entries (so the batch's T x V1 logits never
// exist at once; scratch is laid out as the CPU's: logits [chunk, V1],
// gathered h [chunk, C], dh [chunk, C], row losses [chunk]):
//   gather the entries' rows of h (zero for ignored entries)
//   logits = hc E^T                           (cuBLAS)
//   one block per row: online log-sum-exp over items 1..V1-1, the loss,
//   and dlogits = dloss/count (softmax - onehot) over the logits in place
//   (the row kept in shared memory between the two, catalogues of up to
//   10240 items: the logits read once)
//   the chunk's losses added, in double and a fixed order, to be->red[0]
//   dbias += column sums of dlogits           (a fixed order, no atomics)
//   dh += dlogits E, dE += dlogits^T hc       (cuBLAS, beta 1)
// Under --precision bf16 the logits and dlogits are stored in bf16 (rows
// padded to 8 values), hc and a bf16 copy of E made once a call are the
// GEMMs' operands, every sum stays fp32: half the bytes of the chunk's
// five passes over its logits, the traffic that bounds a large batch's CE
// (ml-1m-part at batch 2048: ~2.9 GB of fp32 logits a step, each written
// once and read three times). The CPU has no bf16: the parity test
// (test_cuda_ce_bf16.c) emulates the roundings in double.
// BCE: scores and coefficients per (entry, item) pair on the device; the
// scatter into rows of dE (and of dh) that pairs share is bucketed on the
// host, one block per destination row summing its pairs in the CPU's order
// (loss.cuh, shared with k_sampled.cu's sampled softmax and gBCE).
// Nothing uses float atomics: the same inputs give the same bits.
//
// Budgets (nvcc -Xptxas -v, sm_90; every kernel __launch_bounds__(256)):
//   ce_row_kernel            32 registers (float and bf16 logits), 256 B static
//                            shared, up to 40 KiB dynamic
//   gather_kernel into bf16  18 registers; to_bf16_kernel 14
//   sum_rows_kernel          16 registers, 2 KiB static shared (256 doubles)
//   colsum_kernel            32 registers
//   scatter_kernel           30 registers (rows that may repeat)
//   scatter_distinct_kernel  18 registers
//   pair_kernel              31 registers
//   (loss.cuh: gather_kernel 18, count_kernel 16 with 2 KiB static
//   shared, bucket_kernel 40 with its dbias)
// no spills, no local memory.
#include <cfloat>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "loss.cuh"

// ---------------------------------------------------------------------------
// Full-softmax cross-entropy (the shared pieces: loss.cuh)

// acc[0] (+)= sum of x[0, n) as doubles: one block, fixed order, so the
// loss has the same bits every run. first: acc[0] starts at 0.
static __global__ __launch_bounds__(LOSS_THREADS) void sum_rows_kernel(double *acc,
                                                                       const float *x, int n,
                                                                       int first)
{
    __shared__ double sh[LOSS_THREADS];
    double s = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        s += (double)x[i];
    s = be_block_sum_d(s, sh);
    if (threadIdx.x == 0)
        acc[0] = (first ? 0.0 : acc[0]) + s;
}

// Combines two online (max, sum of exp(l - max)) pairs.
static __device__ inline void lse_merge(float &mx, float &s, float om, float os)
{
    float M = fmaxf(mx, om);
    s = s * expf(mx - M) + os * expf(om - M);
    mx = M;
}

// One block per row r of the chunk, target y = targets[r] (0: the row's
// loss and dlogits are 0). One pass for the online max and sum over items
// 1..V1-1 (item 0 is padding, out of the softmax), then -log p_y and, when
// grad, dlogits = g (p - onehot(y)) over the row in place. cached: the
// row's logits kept in dynamic shared memory from the first pass to the
// second (V1 <= CE_ROW_CACHE floats), so the chunk's logits are read once,
// not twice (the same values, the same bits).
// L: the logits' type in memory, float or be_bf16 (--precision bf16: the
// row's arithmetic is fp32 either way, dlogits rounded to L when stored);
// ld: the row stride (V1, or V1 rounded up for aligned bf16 rows).
#define CE_ROW_CACHE (40 * 1024 / 4)
template <class L>
static __global__ __launch_bounds__(LOSS_THREADS) void ce_row_kernel(L *logits, float *rowloss,
                                                                     const float *bias,
                                                                     const int *targets, int V1,
                                                                     size_t ld, const float *gp,
                                                                     int grad, int cached)
{
    __shared__ float wm[32], ws[32];
    BE_DYN_SHARED(float, row);
    float g = *gp;
    int r = blockIdx.x, y = targets[r];
    L *lr = logits + (size_t)r * ld;
    if (!y) {
        for (int j = threadIdx.x; j < V1; j += blockDim.x)
            be_stf(lr + j, 0.0f);
        if (threadIdx.x == 0)
            rowloss[r] = 0.0f;
        return;
    }
    float mx = -FLT_MAX, s = 0.0f;
    for (int j = 1 + threadIdx.x; j < V1; j += blockDim.x) {
        float l = bias ? be_ldf(lr + j) + bias[j] : be_ldf(lr + j);
        if (cached)
            row[j] = l;
        if (l > mx) {
            s = s * expf(mx - l) + 1.0f;
            mx = l;
        } else {
            s += expf(l - mx);
        }
    }
    // the warp's lanes, then the warps, in a fixed order (xor pairs give
    // every lane the same bits: the merge is symmetric)
    for (int o = 16; o > 0; o >>= 1) {
        float om = __shfl_xor_sync(0xffffffffu, mx, o), os = __shfl_xor_sync(0xffffffffu, s, o);
        lse_merge(mx, s, om, os);
    }
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
    if (lane == 0) {
        wm[warp] = mx;
        ws[warp] = s;
    }
    __syncthreads();
    mx = wm[0];
    s = ws[0];
    for (int w = 1; w < nw; w++)
        lse_merge(mx, s, wm[w], ws[w]);
    float ly = bias ? be_ldf(lr + y) + bias[y] : be_ldf(lr + y);
    if (threadIdx.x == 0)
        rowloss[r] = logf(s) + mx - ly; // -log p_y
    if (!grad)
        return;
    __syncthreads(); // every thread has read lr[y]
    float inv = g / s;
    for (int j = threadIdx.x; j < V1; j += blockDim.x) {
        float l = !j ? 0.0f : cached ? row[j] : bias ? be_ldf(lr + j) + bias[j] : be_ldf(lr + j);
        float d = j ? expf(l - mx) * inv : 0.0f;
        be_stf(lr + j, j == y ? d - g : d);
    }
}

// y = bf16(x), n values (the item table, once a call)
static __global__ __launch_bounds__(LOSS_THREADS) void to_bf16_kernel(be_bf16 *y, const float *x,
                                                                      size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        be_stf(y + i, x[i]);
}

// dbias[j] += dlogits[r][j] for r = 0..m-1 in order (the CPU's axpys): a
// thread a column, for catalogues of over CE_COLSUM_TWO_PASS items, whose
// columns alone fill the GPU. Smaller ones take be_colsum's two passes over
// groups of rows: this form ran 15 blocks for ml-1m's 3616 columns, each
// thread walking a chunk's ~18,500 rows.
#define CE_COLSUM_TWO_PASS 65536
static __global__ __launch_bounds__(LOSS_THREADS) void colsum_kernel(float *dbias,
                                                                     const float *dl, int m,
                                                                     int V1, size_t ld)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= V1)
        return;
    float acc = dbias[j];
    for (int r = 0; r < m; r++)
        acc += dl[(size_t)r * ld + j];
    dbias[j] = acc;
}

// dh[rows[e0 + r]] += dhc[r] over the chunk's non-ignored entries; one
// thread per column walks the entries in order, so repeated rows add in
// the CPU's order. Used where the rows may repeat.
static __global__ __launch_bounds__(LOSS_THREADS) void scatter_kernel(float *dh,
                                                                      const float *dhc,
                                                                      const int *rows,
                                                                      const int *targets,
                                                                      int e0, int m, int C)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int r = 0; r < m; r++)
        if (targets[e0 + r])
            dh[(size_t)rows[e0 + r] * C + c] += dhc[(size_t)r * C + c];
}

// The same, one thread per element, where the rows are known distinct.
static __global__ __launch_bounds__(LOSS_THREADS) void scatter_distinct_kernel(
    float *dh, const float *dhc, const int *rows, const int *targets, int e0, int m, int C)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)m * C)
        return;
    int r = (int)(i / C), c = (int)(i % C), e = e0 + r;
    if (targets[e])
        dh[(size_t)rows[e] * C + c] += dhc[i];
}

// A full-CE call as its chunk loops see it (device addresses). direct:
// entry e is h's row e (drows NULL), so a chunk's GEMMs read h's rows in
// place of a gathered copy (an ignored entry's logits are computed and
// its dlogits are 0: its row adds nothing).
struct ce_call {
    float *dh, *dE, *dbias, *scratch;
    const float *h, *E, *bias, *dg;
    const int *dt, *drows;
    int n, C, V1, chunk, grad, distinct, direct;
};

// 1 when every entry's host row is its own index: the usual next-item
// batch (a target at every row), whose gather and scatter are identities
static int rows_identity(const int *hrows, int n)
{
    for (int i = 0; i < n; i++)
        if (hrows[i] != i)
            return 0;
    return 1;
}

// dh[rows of entries e0 .. e0+m-1] += dlogits E, through dhc when the
// entries have rows; ab: the type of dl and El (E, or its bf16 copy), ld
// dl's row stride
static void ce_dh(sq_gpu_be *be, const ce_call *k, int e0, int m, const void *dl, size_t ld,
                  const void *El, int ab)
{
    int C = k->C, V1 = k->V1;
    if (!k->drows) { // entry e is row e: straight into dh (ignored rows add 0)
        be_gemm_typed(be, 0, 0, m, C, V1, 1.0f, dl, (int)ld, El, C, ab, 1.0f,
                      k->dh + (size_t)e0 * C, C, BE_F32);
        return;
    }
    float *dhc = k->scratch + (size_t)k->chunk * (V1 + C);
    be_gemm_typed(be, 0, 0, m, C, V1, 1.0f, dl, (int)ld, El, C, ab, 0.0f, dhc, C, BE_F32);
    if (k->distinct)
        SQ_LAUNCH(be, scatter_distinct_kernel, be_blocks((size_t)m * C, LOSS_THREADS),
                  LOSS_THREADS, 0, k->dh, dhc, k->drows, k->dt, e0, m, C);
    else
        SQ_LAUNCH(be, scatter_kernel, be_blocks(C, LOSS_THREADS), LOSS_THREADS, 0, k->dh, dhc,
                  k->drows, k->dt, e0, m, C);
}

// The chunks in fp32: logits, hc [chunk, C], dhc [chunk, C] and the row
// losses [chunk] in scratch (sq_ce_scratch_size's layout). The logits'
// rows are padded to 4 floats (16 bytes: cuBLAS's vectorised, tensor-core
// kernels want aligned rows; ml-1m-part's 3417 items are odd), so a pass
// takes the rows that fit in the chunk's [chunk, V1] floats: one row
// fewer a pass for every ~V1 / 3 rows.
static void ce_chunks_f32(sq_gpu_be *be, const ce_call *k)
{
    int C = k->C, V1 = k->V1;
    size_t ld = ((size_t)V1 + 3) & ~(size_t)3, room = (size_t)k->chunk * V1;
    int chunk = (int)(room / ld);
    if (chunk < 1) { // fewer floats than one padded row (V1 < 4): unpadded
        ld = (size_t)V1;
        chunk = k->chunk;
    }
    float *logits = k->scratch, *hc = logits + room;
    float *rowloss = hc + 2 * (size_t)k->chunk * C;
    size_t cache = k->grad && V1 <= CE_ROW_CACHE ? (size_t)V1 * sizeof(float) : 0;
    for (int e0 = 0; e0 < k->n; e0 += chunk) {
        int m = k->n - e0 < chunk ? k->n - e0 : chunk; // entries e0 .. e0+m-1
        const float *hr = k->h + (size_t)e0 * C; // the chunk's rows of h (direct)
        if (!k->direct) {
            gather_rows(be, hc, k->h, k->drows, k->dt, e0, m, C);
            hr = hc;
        }
        be_gemm(be, 0, 1, m, V1, C, 1.0f, hr, C, k->E, C, 0.0f, logits, (int)ld);
        be_launch(be, "ce_row_kernel", ce_row_kernel<float>, dim3(m), dim3(LOSS_THREADS), cache,
                  logits, rowloss, k->bias, k->dt + e0, V1, ld, k->dg, k->grad, cache > 0);
        SQ_LAUNCH(be, sum_rows_kernel, 1, LOSS_THREADS, 0, be->red, rowloss, m, e0 == 0);
        if (!k->grad)
            continue;
        if (k->dbias && V1 <= CE_COLSUM_TWO_PASS)
            be_colsum_ld(be, k->dbias, logits, m, V1, ld);
        else if (k->dbias)
            SQ_LAUNCH(be, colsum_kernel, be_blocks(V1, LOSS_THREADS), LOSS_THREADS, 0, k->dbias,
                      (const float *)logits, m, V1, ld);
        ce_dh(be, k, e0, m, logits, ld, k->E, BE_F32);
        be_gemm(be, 1, 0, V1, C, m, 1.0f, logits, (int)ld, hr, C, 1.0f, k->dE, C);
    }
}

// --precision bf16: the logits and dlogits in bf16 (half the bytes the
// chunk's GEMMs and its row kernel move: the traffic that bounds a large
// batch's CE), their rows padded to 8 values (16 bytes, the tensor cores'
// alignment); hc and E in bf16 for the GEMMs; every sum still fp32. All of
// it inside the fp32 logits' space of the scratch; *at the offsets (bytes)
// of E16 and hc16, or 0 when they do not fit (a chunk under about 2 C
// rows: its CE is small, and runs in fp32).
static size_t ce_bf16_ld(const ce_call *k, size_t at[2])
{
    size_t ld = ((size_t)k->V1 + 7) & ~(size_t)7, A = 256;
    at[0] = ((size_t)k->chunk * ld * 2 + A - 1) / A * A;
    at[1] = at[0] + ((size_t)k->V1 * k->C * 2 + A - 1) / A * A;
    size_t end = at[1] + (size_t)k->chunk * k->C * 2, room = (size_t)k->chunk * k->V1 * 4;
    return end <= room ? ld : 0;
}

static void ce_chunks_bf16(sq_gpu_be *be, const ce_call *k, size_t ld, const size_t at[2])
{
    int C = k->C, V1 = k->V1, chunk = k->chunk;
    be_bf16 *logits = (be_bf16 *)k->scratch;
    be_bf16 *E16 = (be_bf16 *)((char *)k->scratch + at[0]);
    be_bf16 *hc = (be_bf16 *)((char *)k->scratch + at[1]);
    float *rowloss = k->scratch + (size_t)chunk * (V1 + 2 * (size_t)C);
    size_t nE = (size_t)V1 * C;
    size_t cache = k->grad && V1 <= CE_ROW_CACHE ? (size_t)V1 * sizeof(float) : 0;
    SQ_LAUNCH(be, to_bf16_kernel, be_blocks(nE, LOSS_THREADS), LOSS_THREADS, 0, E16, k->E, nE);
    for (int e0 = 0; e0 < k->n; e0 += chunk) {
        int m = k->n - e0 < chunk ? k->n - e0 : chunk;
        gather_rows(be, hc, k->h, k->drows, k->dt, e0, m, C);
        be_gemm_typed(be, 0, 1, m, V1, C, 1.0f, hc, C, E16, C, BE_BF16, 0.0f, logits, (int)ld,
                      BE_BF16);
        be_launch(be, "ce_row_bf16_kernel", ce_row_kernel<be_bf16>, dim3(m), dim3(LOSS_THREADS),
                  cache, logits, rowloss, k->bias, k->dt + e0, V1, ld, k->dg, k->grad, cache > 0);
        SQ_LAUNCH(be, sum_rows_kernel, 1, LOSS_THREADS, 0, be->red, rowloss, m, e0 == 0);
        if (!k->grad)
            continue;
        if (k->dbias) // the padding columns past V1 are not summed
            be_colsum_ld(be, k->dbias, logits, m, V1, ld);
        ce_dh(be, k, e0, m, logits, ld, E16, BE_BF16);
        be_gemm_typed(be, 1, 0, V1, C, m, 1.0f, logits, (int)ld, hc, C, BE_BF16, 1.0f, k->dE, C,
                      BE_F32);
    }
}

// Both full-CE ops: bias and dbias NULL for sq_ce_full.
static double ce_full(sq_gpu_be *be, float *dh, float *dE, float *dbias, float *scratch,
                      const float *h, const float *E, const float *bias, const int *rows,
                      const int *targets, int n, int C, int V1, int chunk, float dloss,
                      int *count)
{
    // the count scales dlogits, so it is known before the first chunk
    int cnt = count_nonzero(be, targets, n);
    *count = cnt;
    int graph = be->gmode != BE_G_EAGER;
    if ((cnt == 0 && !graph) || be->failed)
        return 0;
    // the CPU's float; read on the device, as it follows the batch's count
    // (a CUDA graph's step: graph.cu); no target in a graph's batch: 0 / 1
    float g = cnt ? dloss / (float)cnt : 0.0f;
    const float *dg = (const float *)be_op_upload(be, &g, sizeof g);
    if (!dg)
        return 0;
    const int *hrows = rows ? be_host_ints(be, rows) : NULL;
    const int *htargets = be_host_ints(be, targets);
    // rows that are the entries' own indices: as no rows. Eagerly only: a
    // CUDA graph's key may hold batches with and without (padding entries)
    int same = hrows && !graph && rows_identity(hrows, n);
    ce_call k = {dh, dE, dbias, scratch, h, E, bias, dg, be_ints(be, targets),
                 rows && !same ? be_ints(be, rows) : NULL, n, C, V1, chunk, dh && dE,
                 !same && hrows && htargets && rows_increasing(hrows, htargets, n),
                 !rows || same};
    int bf16 = be->prec == 2 && !(be->plain & BE_PLAIN_BF16_LOGITS);
    size_t at[2], ld = bf16 ? ce_bf16_ld(&k, at) : 0;
    if (ld)
        ce_chunks_bf16(be, &k, ld, at);
    else
        ce_chunks_f32(be, &k);
    return be_result(be, 0, cnt ? cnt : 1);
}

double be_ce_full(sq_gpu_be *be, float *dh, float *dE, float *scratch, const float *h,
                  const float *E, const int *rows, const int *targets, int n, int C, int V1,
                  int chunk, float dloss, int *count)
{
    return ce_full(be, dh, dE, NULL, scratch, h, E, NULL, rows, targets, n, C, V1, chunk,
                   dloss, count);
}

double be_ce_full_bias(sq_gpu_be *be, float *dh, float *dE, float *dbias, float *scratch,
                       const float *h, const float *E, const float *bias, const int *rows,
                       const int *targets, int n, int C, int V1, int chunk, float dloss,
                       int *count)
{
    return ce_full(be, dh, dE, dbias, scratch, h, E, bias, rows, targets, n, C, V1, chunk,
                   dloss, count);
}

// ---------------------------------------------------------------------------
// BCE with sampled negatives (softplus_f, sigmoid_f, the plan: loss.cuh)

// One warp per pair p = i (K+1) + k+1 (k = -1: the positive pos[i], else
// the negative neg[i K + k]): s = h_row . E_item, the loss term and the
// gradient coefficient g (sigmoid(s) - [positive]); both 0 for a pair the
// CPU skips (pos[i] or the item 0).
static __global__ __launch_bounds__(LOSS_THREADS) void pair_kernel(float *coef, float *term,
                                                                   const float *h,
                                                                   const float *E,
                                                                   const int *rows,
                                                                   const int *pos,
                                                                   const int *neg, int n, int K,
                                                                   int C, const float *gp)
{
    int lane = threadIdx.x % 32;
    float g = *gp;
    long long p = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    if (p >= (long long)n * (K + 1))
        return; // the whole warp: p is the same on its lanes
    int i = (int)(p / (K + 1)), k = (int)(p % (K + 1)) - 1;
    int item = k < 0 ? pos[i] : neg[(size_t)i * K + k];
    if (!pos[i] || !item) {
        if (lane == 0)
            coef[p] = term[p] = 0.0f;
        return;
    }
    const float *hi = h + (size_t)(rows ? rows[i] : i) * C, *e = E + (size_t)item * C;
    float s = warp_dot(hi, e, C, lane);
    if (lane == 0) {
        term[p] = k < 0 ? softplus_f(-s) : softplus_f(s);
        coef[p] = g * (sigmoid_f(s) - (k < 0 ? 1.0f : 0.0f));
    }
}

double be_bce_sampled(sq_gpu_be *be, float *dh, float *dE, const float *h, const float *E,
                      const int *rows, const int *pos, const int *neg, int n, int K, int C,
                      float dloss, int *count)
{
    int cnt = count_nonzero(be, pos, n);
    *count = cnt;
    int graph = be->gmode != BE_G_EAGER;
    if ((cnt == 0 && !graph) || be->failed)
        return 0;
    int grad = dh && dE;
    // the CPU's float; no target in a graph's batch: 0 / 1
    float g = cnt ? dloss / (float)cnt : 0.0f;
    int P = n * (K + 1);
    // one upload, its layout fixed by n and K (a CUDA graph's step uploads
    // the same bytes every batch): room for the pairs' coefficients and
    // loss terms, the scale g, then (grad) the two CSRs bucketed from the
    // host ids
    size_t at_g = 2 * (size_t)P, words = at_g + 1 + (grad ? pair_plan_ints(n, K) : 0);
    int *dev = NULL, *hbuf = op_words(be, words, &dev);
    if (!hbuf)
        return 0;
    int *own[3] = {NULL, NULL, NULL};
    pair_plan pl;
    memset(&pl, 0, sizeof pl);
    int bad = grad && pair_plan_ids(be, &pl, hbuf + at_g + 1, rows, pos, neg, n, K, 0, own);
    if (op_send_words(be, hbuf, dev, words, bad, at_g, g, NULL, 0)) {
        free_ids(own);
        return 0;
    }
    float *coef = (float *)dev, *term = coef + P;
    const float *dg = term + P;
    const int *drows = rows ? be_ints(be, rows) : NULL;
    const int *dneg = K ? be_ints(be, neg) : NULL;
    SQ_LAUNCH(be, pair_kernel, be_blocks((size_t)P * 32, LOSS_THREADS), LOSS_THREADS, 0, coef,
              term, h, E, drows, be_ints(be, pos), dneg, n, K, C, dg);
    SQ_LAUNCH(be, sum_rows_kernel, 1, LOSS_THREADS, 0, be->red, term, P, 1);
    if (grad)
        pair_plan_scatter(be, &pl, hbuf, dev, P, dh, dE, NULL, h, E, coef, C);
    free_ids(own);
    return be_result(be, 0, cnt ? cnt : 1);
}
