// k_bkl.cu - Blin's bidirectional KL between two views' next-item
// distributions, the GPU twin of bkl.c's sq_bkl, in both modes.
//
// Full (cand NULL), as the CPU: chunks of m pairs; the 2m states gathered
// (view a rows 0..m-1, view b rows m..2m-1), one cuBLAS GEMM for their
// logits over every item, a block per pair for its max, its four sums and
// its gradient in place, two GEMMs back to the states and the item table,
// and the states' gradients added into dh through k_rows.cu's host-built
// buckets (be_scatter_add_host: a block a row; rows may be shared between
// pairs), view a's rows then view b's, bkl.c's order. (A thread a column
// walking the pairs in turn had run 512 dependent adds at Blin's batch
// 256, on one block of the GPU.) The sums run in double over a block's threads
// (each thread its items in order, then the block's fixed tree; the CPU:
// one sum in item order), expf as the CPU's float exp: results equal the
// CPU's to rounding, two runs the same bits.
//
// Sampled (a support of S items a pair, --softmax sampled): chunks of m
// pairs; a block a pair for its 2S logits (a warp a slot), its sums, its
// coefficients in place and its states' gradients (a thread a column,
// slots in order); dh through the buckets as above; dE through loss.cuh's
// buckets (the pairs' slots by item, host-planned, one writer a row: no
// float atomics). The supports and the CSR go up in one be_op_upload whose
// layout n and S fix (a CUDA graph's step).
//
// Budget (nvcc -Xptxas -v, sm_90): __launch_bounds__(256); the pair kernels
// 4 KiB of static shared memory (a double and two floats a thread, and
// their statistics), k_bkl_pair 31 registers, k_bkl_spair 58; no spills.
#include "loss.cuh"

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

// The block's maxima of its threads' ma and mb (fm: two rows of
// blockDim floats), on every thread
static __device__ void bkl_block_max(float *ma, float *mb, float (*fm)[BK_THREADS])
{
    int tid = threadIdx.x;
    fm[0][tid] = *ma;
    fm[1][tid] = *mb;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (tid < (int)h) {
            fm[0][tid] = fm[0][tid + h] > fm[0][tid] ? fm[0][tid + h] : fm[0][tid];
            fm[1][tid] = fm[1][tid + h] > fm[1][tid] ? fm[1][tid + h] : fm[1][tid];
        }
        __syncthreads();
    }
    *ma = fm[0][0];
    *mb = fm[1][0];
}

// bkl.c's bkl_finish from the threads' sums (their block sums, a fixed
// tree): st = lza, lzb, kpq, kqp, d for every thread past the barrier,
// *loss = d
static __device__ void bkl_block_stats(double ma, double mb, double za, double zb, double wa,
                                       double wb, double *sh, double *st, float *loss)
{
    za = be_block_sum_d(za, sh);
    zb = be_block_sum_d(zb, sh);
    wa = be_block_sum_d(wa, sh);
    wb = be_block_sum_d(wb, sh);
    if (threadIdx.x == 0) {
        double lza = ma + log(za), lzb = mb + log(zb), epa = wa / za, eqb = wb / zb;
        st[0] = lza;
        st[1] = lzb;
        st[2] = epa - (lza - lzb);
        st[3] = eqb + (lza - lzb);
        st[4] = epa + eqb;
        *loss = (float)st[4];
    }
    __syncthreads();
}

// bkl.c's bkl_dlogit: g times the gradients at logits x (view a), y (b)
static __device__ inline void bkl_dlogit(float x, float y, const double *st, float g, float *da,
                                         float *db)
{
    double lp = (double)x - st[0], lq = (double)y - st[1];
    float p = expf((float)lp), q = expf((float)lq), d = (float)(lp - lq);
    *da = g * (p * (d - (float)st[2]) + (p - q));
    *db = g * (q * (-d - (float)st[3]) + (q - p));
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
    bkl_block_max(&ma, &mb, fm);
    double za = 0, zb = 0, wa = 0, wb = 0;
    for (int j = 1 + tid; j < V1; j += blockDim.x) {
        double ea = expf(a[j] - ma), eb = expf(b[j] - mb), delta = (double)a[j] - b[j];
        za += ea;
        zb += eb;
        wa += ea * delta;
        wb -= eb * delta;
    }
    bkl_block_stats(ma, mb, za, zb, wa, wb, sh, st, &rowloss[blockIdx.x]);
    if (!grad)
        return;
    if (tid == 0)
        a[0] = b[0] = 0;
    for (int j = 1 + tid; j < V1; j += blockDim.x)
        bkl_dlogit(a[j], b[j], st, g, &a[j], &b[j]);
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

// dh rows ra[e0 + r] += dhc[r], then rb[e0 + r] += dhc[m + r], r < m: the
// chunk's 2m rows as one host list in dhc's order (view a's, then view
// b's; rows may repeat) through k_rows.cu's buckets, each row's terms in
// that order, as bkl.c adds them. rows: the caller's room for 2m ints.
static void bkl_scatter(sq_gpu_be *be, float *dh, const float *dhc, const int *hra,
                        const int *hrb, int *rows, int e0, int m, int C)
{
    memcpy(rows, hra + e0, (size_t)m * sizeof(int));
    memcpy(rows + m, hrb + e0, (size_t)m * sizeof(int));
    be_scatter_add_host(be, dh, dhc, rows, 2 * m, C, "bkl: the states' gradients");
}

// ---------------------------------------------------------------------------
// Sampled mode

// Block r: pair e0 + r over its support ci = cand[(e0 + r) S ..] (0: not in
// it): the logits a = h_a . E_c, b = h_b . E_c (a warp a slot) into la[r],
// lb[r]; rowloss[r] = KL(P||Q) + KL(Q||P) (bkl.c's online sums: here the
// max first, then the sums in double, a fixed tree); with grad, the
// coefficients da, db in place (0 off the support) and dhc rows r, m + r =
// sum over the slots, in order, of da E_c and db E_c.
static __global__ __launch_bounds__(BK_THREADS) void k_bkl_spair(
    float *la, float *lb, float *dhc, float *rowloss, const float *h, const float *E,
    const int *ra, const int *rb, const int *cand, int e0, int m, int S, int C, float g,
    int grad)
{
    __shared__ double sh[BK_THREADS];
    __shared__ float fm[2][BK_THREADS];
    __shared__ double st[5]; // lza, lzb, kpq, kqp, d
    int r = blockIdx.x, tid = threadIdx.x, lane = tid % 32, nw = blockDim.x / 32;
    const float *ha = h + (size_t)ra[e0 + r] * C, *hb = h + (size_t)rb[e0 + r] * C;
    const int *ci = cand + (size_t)(e0 + r) * S;
    float *a = la + (size_t)r * S, *b = lb + (size_t)r * S;
    for (int k = tid / 32; k < S; k += nw) { // k is the warp's: its lanes agree
        if (!ci[k])
            continue;
        const float *e = E + (size_t)ci[k] * C;
        float sa = warp_dot(ha, e, C, lane), sb = warp_dot(hb, e, C, lane);
        if (lane == 0) {
            a[k] = sa;
            b[k] = sb;
        }
    }
    __syncthreads();
    float ma = -INFINITY, mb = -INFINITY;
    for (int k = tid; k < S; k += blockDim.x)
        if (ci[k]) {
            ma = a[k] > ma ? a[k] : ma;
            mb = b[k] > mb ? b[k] : mb;
        }
    bkl_block_max(&ma, &mb, fm);
    double za = 0, zb = 0, wa = 0, wb = 0;
    for (int k = tid; k < S; k += blockDim.x) {
        if (!ci[k])
            continue;
        double ea = exp((double)a[k] - ma), eb = exp((double)b[k] - mb);
        double delta = (double)a[k] - (double)b[k];
        za += ea;
        zb += eb;
        wa += ea * delta;
        wb -= eb * delta;
    }
    bkl_block_stats(ma, mb, za, zb, wa, wb, sh, st, &rowloss[r]);
    if (!grad)
        return;
    for (int k = tid; k < S; k += blockDim.x) {
        if (ci[k])
            bkl_dlogit(a[k], b[k], st, g, &a[k], &b[k]);
        else
            a[k] = b[k] = 0.0f;
    }
    __syncthreads();
    for (int c = tid; c < C; c += blockDim.x) {
        float da = 0.0f, db = 0.0f;
        for (int k = 0; k < S; k++)
            if (ci[k]) {
                float ec = E[(size_t)ci[k] * C + c];
                da += a[k] * ec;
                db += b[k] * ec;
            }
        dhc[(size_t)r * C + c] = da;
        dhc[(size_t)(m + r) * C + c] = db;
    }
}

// The dE buckets of pairs [e0, e0 + m): slot k of pair r is two terms of
// row cand[.] (coefficient la[r S + k] with h's row ra, lb's (at m S
// after) with rb), in (pair, slot, view) order; 0, or -1 out of memory
static int bkl_plan(bucketing *bk, int *ints, const int *hra, const int *hrb,
                    const int *hcand, int e0, int m, int S)
{
    int M = 2 * m * S, L = 0, maxitem = 0;
    int *buf = (int *)malloc(sizeof(int) * ((size_t)M * 3 + 1));
    if (!buf)
        return -1;
    int *lp = buf, *item = buf + M, *row = buf + 2 * (size_t)M;
    for (int r = 0; r < m; r++)
        for (int k = 0; k < S; k++) {
            int it = hcand[(size_t)(e0 + r) * S + k];
            if (!it)
                continue;
            for (int v = 0; v < 2; v++) {
                lp[L] = v * m * S + r * S + k;
                item[L] = it;
                row[L++] = v ? hrb[e0 + r] : hra[e0 + r];
            }
            maxitem = it > maxitem ? it : maxitem;
        }
    int rc = bucket_pairs(bk, item, row, lp, L, M, maxitem + 1, ints);
    free(buf);
    return rc;
}

// Ints of the sampled mode's upload for a chunk of m pairs: the chunk's
// supports, then its CSR
static size_t bkl_upload_ints(int m, int S)
{
    return (size_t)m * S + bucket_ints(2 * m * S);
}

static double bkl_sampled(sq_gpu_be *be, float *dh, float *dE, float *scratch, const float *h,
                          const float *E, const int *ra, const int *rb, const int *cand, int S,
                          int n, int C, int V1, int chunk, float g, int grad)
{
    // the chunk's coefficients [2 m S], dhc [2 m C] and row losses [m] in
    // the full mode's room for a chunk (sq_bkl_scratch_size)
    if (!scratch || chunk < 1 || S > V1 + C) {
        be_note(be, cudaErrorInvalidValue, "bkl: the sampled mode needs the scratch of "
                "sq_bkl_scratch_size (a support of at most V1 + C items)");
        return NAN;
    }
    int *own[2] = {NULL, NULL};
    const int *hra = host_ids(be, ra, (size_t)n, &own[0]);
    const int *hrb = host_ids(be, rb, (size_t)n, &own[1]);
    int *hbuf = (int *)malloc(bkl_upload_ints(chunk < n ? chunk : n, S) * sizeof(int));
    int *rows = (int *)malloc(2 * (size_t)(chunk < n ? chunk : n) * sizeof(int));
    int bad = !hra || !hrb || !hbuf || !rows;
    for (int e0 = 0; e0 < n && !bad; e0 += chunk) {
        int m = n - e0 < chunk ? n - e0 : chunk;
        float *la = scratch, *lb = la + (size_t)m * S, *dhc = lb + (size_t)m * S;
        float *rowloss = dhc + 2 * (size_t)m * C;
        size_t words = grad ? bkl_upload_ints(m, S) : (size_t)m * S;
        bucketing bk;
        memset(&bk, 0, sizeof bk);
        memcpy(hbuf, cand + (size_t)e0 * S, (size_t)m * S * sizeof(int));
        if (grad && bkl_plan(&bk, hbuf + (size_t)m * S, hra, hrb, cand, e0, m, S)) {
            bad = 1;
            break;
        }
        int *dev = (int *)be_op_upload(be, hbuf, words * sizeof(int));
        if (!dev) {
            bad = 1;
            break;
        }
        // after the upload: growing its buffer moves the arrays staged in it
        // (sq_ctx_stage_add's, as the pairs' rows may be)
        const int *dra = be_ints(be, ra), *drb = be_ints(be, rb);
        // the kernel reads the chunk's supports at dev: e0 0 for it
        SQ_LAUNCH(be, k_bkl_spair, (unsigned)m, BK_THREADS, 0, la, lb, dhc, rowloss, h, E,
                  dra + e0, drb + e0, (const int *)dev, 0, m, S, C, g, grad);
        SQ_LAUNCH(be, k_bkl_total, 1, 32, 0, be->red, (const float *)rowloss, m, e0 == 0);
        if (!grad)
            continue;
        int graph = be->gmode != BE_G_EAGER;
        if (bk.nb || graph) {
            const int *d = dev + (size_t)m * S, *hb0 = hbuf + (size_t)m * S;
#define DEV(p) (d + ((p) - hb0))
            SQ_LAUNCH(be, bucket_kernel, graph ? 2 * m * S : bk.nb, LOSS_THREADS, 0, dE,
                      (float *)NULL, h, (const float *)la, (const float *)NULL, DEV(bk.start),
                      DEV(bk.dest), DEV(bk.pair), DEV(bk.src), DEV(bk.src + 2 * m * S), C);
#undef DEV
        }
        // after the dE launch: its CSR's upload at dev stays where it is
        bkl_scatter(be, dh, dhc, hra, hrb, rows, e0, m, C);
    }
    free(hbuf);
    free(rows);
    free(own[0]);
    free(own[1]);
    if (bad) {
        be_note(be, cudaErrorMemoryAllocation, "bkl: the sampled mode's host plan");
        return NAN;
    }
    return be_result(be, 0, 2.0 * n); // 0.5 x / n, the same bits
}

double be_bkl(sq_gpu_be *be, float *dh, float *dE, float *scratch, const float *h,
              const float *E, const int *ra, const int *rb, const int *cand, int S, int n,
              int C, int V1, int chunk, float dloss)
{
    if (n <= 0)
        return 0;
    int grad = dh && dE;
    if (cand)
        return bkl_sampled(be, dh, dE, scratch, h, E, ra, rb, cand, S, n, C, V1, chunk,
                           dloss / (float)(2 * n), grad);
    if (chunk < 1) {
        be_note(be, cudaErrorInvalidValue, "bkl: a chunk of no pairs");
        return NAN;
    }
    float g = dloss / (float)(2 * n);
    float *logits = scratch;                     // [2 chunk, V1]
    float *hc = logits + 2 * (size_t)chunk * V1; // [2 chunk, C]
    float *dhc = hc + 2 * (size_t)chunk * C;     // [2 chunk, C]
    float *rowloss = dhc + 2 * (size_t)chunk * C;
    int *own[2] = {NULL, NULL}, *rows = NULL;
    const int *hra = NULL, *hrb = NULL;
    if (grad) { // the host's rows for dh's buckets
        hra = host_ids(be, ra, (size_t)n, &own[0]);
        hrb = host_ids(be, rb, (size_t)n, &own[1]);
        rows = (int *)malloc(2 * (size_t)(chunk < n ? chunk : n) * sizeof(int));
        if (!hra || !hrb || !rows) {
            free(own[0]);
            free(own[1]);
            free(rows);
            be_note(be, cudaErrorMemoryAllocation, "bkl: the states' rows on the host");
            return NAN;
        }
    }
    for (int e0 = 0; e0 < n; e0 += chunk) {
        int m = n - e0 < chunk ? n - e0 : chunk;
        // each chunk: the scatter's upload may have moved the staged pairs
        const int *dra = be_ints(be, ra), *drb = be_ints(be, rb);
        SQ_LAUNCH(be, k_bkl_gather, be_blocks((size_t)2 * m * C, BK_THREADS), BK_THREADS, 0, hc,
                  h, dra, drb, e0, m, C);
        be_gemm(be, 0, 1, 2 * m, V1, C, 1, hc, C, E, C, 0, logits, V1);
        SQ_LAUNCH(be, k_bkl_pair, (unsigned)m, BK_THREADS, 0, logits, rowloss, m, V1, g, grad);
        SQ_LAUNCH(be, k_bkl_total, 1, 32, 0, be->red, rowloss, m, e0 == 0);
        if (!grad)
            continue;
        be_gemm(be, 0, 0, 2 * m, C, V1, 1, logits, V1, E, C, 0, dhc, C);
        be_gemm(be, 1, 0, V1, C, 2 * m, 1, logits, V1, hc, C, 1, dE, C);
        bkl_scatter(be, dh, dhc, hra, hrb, rows, e0, m, C);
    }
    free(own[0]);
    free(own[1]);
    free(rows);
    return be_result(be, 0, 2.0 * n); // 0.5 x / n, the same bits
}
