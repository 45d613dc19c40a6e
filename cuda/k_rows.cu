// k_rows.cu - row ops: embeddings, positional embeddings, row gather, scatter and
// scatter-add, LayerNorm and linear layers (ops.c's sections 1-4 and its
// row helpers).
//
// DETERMINISM. A scatter-add (embedding and positional gradients, rows of
// sq_scatter_add_rows) adds several source rows into one target row. No
// float atomics: the index array is a staged host array (be_host_ints),
// bucketed on the host into CSR (targets, each with its sources in
// increasing order), uploaded (be_op_upload), and one block per target
// adds its sources in that order, as the CPU does: the CPU's bits. Rows
// that increase (no target shared) skip the buckets: one writer an element
// (eager steps; a CUDA graph's keeps the CSR kernel). An index
// array already on the device (not staged) falls back to one thread per
// column walking every source in order: the same sums, slower.
// Column sums (LayerNorm's dw, db; linear's db) are per-row-group sums in
// row order into the backend's workspace, then the groups summed in order
// (two passes, below): fixed, but not the CPU's order (tolerance in the
// parity tests).
//
// Budget: 256 threads a block, __launch_bounds__(256), no dynamic shared
// memory; LayerNorm a warp per row (8 rows a block).
#include <stdlib.h>

#include "common.cuh"

#define ROW_THREADS 256

// ---- gathers -----------------------------------------------------------

// out[i] = scale * in[idx[i]] (idx NULL: row i); idx 0 gives a zero row
// when zero_pad (embeddings: id 0 is the padding item)
static __global__ __launch_bounds__(ROW_THREADS) void k_gather(float *out, const float *in,
                                                               const int *idx, int n, int C,
                                                               float scale, int zero_pad,
                                                               int scaled)
{
    size_t total = (size_t)n * C;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        size_t i = k / C, c = k % C;
        int r = idx ? idx[i] : (int)i;
        float v = in[(size_t)r * C + c];
        out[k] = zero_pad && r == 0 ? 0.0f : scaled ? scale * v : v;
    }
}

static unsigned row_blocks(sq_gpu_be *be, size_t n)
{
    size_t cap = (size_t)be->sms * 16, g = (n + ROW_THREADS - 1) / ROW_THREADS;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

void be_embedding_forward(sq_gpu_be *be, float *out, const float *table, const int *ids, int T,
                          int C, float scale)
{
    size_t n = (size_t)T * C;
    if (n)
        SQ_LAUNCH(be, k_gather, row_blocks(be, n), ROW_THREADS, 0, out, table,
                  be_ints(be, ids), T, C, scale, 1, 1);
}

void be_gather_rows(sq_gpu_be *be, float *out, const float *in, const int *rows, int n, int C)
{
    size_t m = (size_t)n * C;
    if (m)
        SQ_LAUNCH(be, k_gather, row_blocks(be, m), ROW_THREADS, 0, out, in,
                  rows ? be_ints(be, rows) : (const int *)NULL, n, C, 1.0f, 0, 0);
}

// out[rows[i]] = in[i]: the rows distinct, one writer an element
static __global__ __launch_bounds__(ROW_THREADS) void k_scatter_rows(float *out, const float *in,
                                                                     const int *rows, int n,
                                                                     int C)
{
    size_t total = (size_t)n * C;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x)
        out[(size_t)rows[k / C] * C + k % C] = in[k];
}

void be_scatter_rows(sq_gpu_be *be, float *out, const float *in, const int *rows, int n, int C)
{
    size_t m = (size_t)n * C;
    if (m)
        SQ_LAUNCH(be, k_scatter_rows, row_blocks(be, m), ROW_THREADS, 0, out, in,
                  be_ints(be, rows), n, C);
}

static __global__ __launch_bounds__(ROW_THREADS) void k_posemb(float *out, const float *inp,
                                                               const float *pe, const int *pos,
                                                               int T, int C)
{
    size_t total = (size_t)T * C;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x)
        out[k] = inp[k] + pe[(size_t)pos[k / C] * C + k % C];
}

void be_posemb_forward(sq_gpu_be *be, float *out, const float *inp, const float *pe,
                       const int *pos, int T, int C)
{
    size_t n = (size_t)T * C;
    if (n)
        SQ_LAUNCH(be, k_posemb, row_blocks(be, n), ROW_THREADS, 0, out, inp, pe,
                  be_ints(be, pos), T, C);
}

// ---- scatter-adds ------------------------------------------------------

// Block u < *nU: target row tgt[u] += scale * in[src[k]] for k in
// [start[u], start[u+1]), in order; threads over columns. The count is read
// on the device: in a CUDA graph's step the grid is the bucket's n blocks
// whatever the batch's U (graph.cu), the blocks past it return.
#define CSR_AHEAD 8

static __global__ __launch_bounds__(ROW_THREADS) void k_scatter_csr(float *out, const float *in,
                                                                    const int *nU,
                                                                    const int *tgt,
                                                                    const int *start,
                                                                    const int *src, int C,
                                                                    float scale, int scaled)
{
    int u = blockIdx.x;
    if (u >= *nU)
        return;
    float *o = out + (size_t)tgt[u] * C;
    int k0 = start[u], k1 = start[u + 1];
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = o[c];
        int k = k0;
        // a popular item's or a position's thousands of sources: the loads
        // of CSR_AHEAD sources issued before their adds (the same order of
        // adds, the same bits), not one load's latency a source
        for (; k + CSR_AHEAD <= k1; k += CSR_AHEAD) {
            float v[CSR_AHEAD];
            for (int j = 0; j < CSR_AHEAD; j++)
                v[j] = in[(size_t)src[k + j] * C + c];
            for (int j = 0; j < CSR_AHEAD; j++)
                acc += scaled ? scale * v[j] : v[j];
        }
        for (; k < k1; k++) {
            float v = in[(size_t)src[k] * C + c];
            acc += scaled ? scale * v : v;
        }
        o[c] = acc;
    }
}

// out[idx[i]] += scale * in[i] where no two i share a target (idx NULL:
// row i), idx 0 skipped when skip0: one writer an element, the same sum as
// the CSR's one source.
static __global__ __launch_bounds__(ROW_THREADS) void k_scatter_distinct(
    float *out, const float *in, const int *idx, int n, int C, float scale, int scaled,
    int skip0)
{
    size_t total = (size_t)n * C;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < total;
         k += (size_t)gridDim.x * blockDim.x) {
        int r = idx ? idx[k / C] : (int)(k / C);
        if (skip0 && r == 0)
            continue;
        float v = in[k];
        float *o = out + (size_t)r * C + k % C;
        *o = *o + (scaled ? scale * v : v);
    }
}

// Whether the host rows increase strictly (no target shared): NULL does.
static int rows_distinct(const int *host, int n)
{
    for (int i = 1; host && i < n; i++)
        if (host[i] <= host[i - 1])
            return 0;
    return !host || n < 1 || host[0] >= 0;
}

// The fallback for device index arrays: thread c walks every source.
static __global__ __launch_bounds__(ROW_THREADS) void k_scatter_cols(float *out, const float *in,
                                                                     const int *idx, int n,
                                                                     int C, float scale,
                                                                     int scaled, int skip0)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C)
        return;
    for (int i = 0; i < n; i++) {
        int r = idx ? idx[i] : i;
        if (skip0 && r == 0)
            continue;
        float v = in[(size_t)i * C + c];
        out[(size_t)r * C + c] += scaled ? scale * v : v;
    }
}

// The CSR of out[idx[i]] += in[i], i < n (idx NULL: row i; idx 0 left out
// when skip0), into csr's 3 n + 2 ints at fixed offsets (one upload of the
// same size for every batch of n rows): U, tgt [U], start [U + 1], src.
// A counting sort on the target row: stable, so each target lists its
// sources in increasing i, the CPU's order. It replaced a qsort of (row,
// i) pairs: 53 ms on the host for a batch of 300,000 rows over 3,616 items
// (ml-1m at batch 2048), and 33 ms more for the positions, every step.
// 0, -1 out of memory, or -2 a negative row.
static int scatter_csr(sq_gpu_be *be, int *csr, const int *host, int n, int skip0)
{
    int maxr = -1;
    for (int i = 0; i < n; i++) {
        int r = host ? host[i] : i;
        if (r < 0)
            return -2;
        maxr = r > maxr ? r : maxr;
    }
    // the counts kept between calls: a fresh calloc of a large catalogue's
    // rows was page faults and zeroing every call
    size_t nc = (size_t)maxr + 2;
    if (nc > be->scat_cnt_n) {
        int *c = (int *)realloc(be->scat_cnt, nc * sizeof *c);
        if (!c)
            return -1;
        be->scat_cnt = c;
        be->scat_cnt_n = nc;
    }
    int *cnt = be->scat_cnt;
    memset(cnt, 0, nc * sizeof *cnt);
    int m = 0;
    for (int i = 0; i < n; i++) {
        int r = host ? host[i] : i;
        if (!(skip0 && r == 0)) {
            cnt[r + 1]++;
            m++;
        }
    }
    int U = 0, *tgt = csr + 1, *start = tgt + n, *src = start + n + 1;
    for (int r = 0; r <= maxr; r++) { // cnt[r]: the first slot of row r
        int c = cnt[r + 1];
        cnt[r + 1] = cnt[r] + c;
        if (c) {
            tgt[U] = r;
            start[U++] = cnt[r];
        }
    }
    start[U] = m;
    csr[0] = U;
    for (int i = 0; i < n; i++) {
        int r = host ? host[i] : i;
        if (!(skip0 && r == 0))
            src[cnt[r]++] = i;
    }
    return 0;
}

// The CSR path of a scatter whose rows the host holds (host[i], i < n; NULL
// row i): buckets built in the op upload's pinned space (no copy), then a
// block a target row; a graph's step sends the CSR whatever U, an eager one
// only when a row is left.
static void scatter_by_csr(sq_gpu_be *be, float *out, const float *in, const int *host, int n,
                           int C, float scale, int scaled, int skip0, const char *what)
{
    size_t bytes = ((size_t)3 * n + 2) * sizeof(int);
    char *dev = NULL;
    int *csr = (int *)be_op_space(be, bytes, &dev);
    if (!csr)
        return;
    int rc = scatter_csr(be, csr, host, n, skip0);
    if (rc) {
        if (rc == -1)
            be_note(be, cudaErrorMemoryAllocation, what);
        else if (!be->failed) {
            be->failed = 1;
            sq_fail(&be->err, SQ_EX_SOFTWARE, "%s: a negative row index", what);
        }
        return;
    }
    int U = csr[0];
    int graph = be->gmode != BE_G_EAGER;
    if ((U || graph) && !be_op_send(be, (const char *)csr, dev, bytes)) {
        const int *d = (const int *)dev;
        SQ_LAUNCH(be, k_scatter_csr, graph ? n : U, ROW_THREADS, 0, out, in, d, d + 1,
                  d + 1 + n, d + 2 + 2 * (size_t)n, C, scale, scaled);
    }
}

// out[idx[i]] += scale * in[i] for i < n (idx 0 skipped when skip0), every
// target's sources added in increasing i.
static void scatter(sq_gpu_be *be, float *out, const float *in, const int *idx, int n, int C,
                    float scale, int scaled, int skip0, const char *what)
{
    if (n <= 0 || C <= 0)
        return;
    const int *host = idx ? be_host_ints(be, idx) : NULL;
    if (idx && !host) { // device indices: one thread a column
        SQ_LAUNCH(be, k_scatter_cols, be_blocks((size_t)C, ROW_THREADS), ROW_THREADS, 0, out,
                  in, idx, n, C, scale, scaled, skip0);
        return;
    }
    // increasing rows (a loss's rows, an identity) need no buckets; a CUDA
    // graph's step keeps the CSR kernel, which any batch of the bucket fits
    if (be->gmode == BE_G_EAGER && rows_distinct(host, n)) {
        SQ_LAUNCH(be, k_scatter_distinct, row_blocks(be, (size_t)n * C), ROW_THREADS, 0, out,
                  in, idx ? be_ints(be, idx) : (const int *)NULL, n, C, scale, scaled, skip0);
        return;
    }
    scatter_by_csr(be, out, in, host, n, C, scale, scaled, skip0, what);
}

void be_scatter_add_host(sq_gpu_be *be, float *out, const float *in, const int *host, int n,
                         int C, const char *what)
{
    if (n > 0 && C > 0)
        scatter_by_csr(be, out, in, host, n, C, 1.0f, 0, 0, what);
}

void be_embedding_backward(sq_gpu_be *be, float *dtable, const float *dout, const int *ids,
                           int T, int C, float scale)
{
    scatter(be, dtable, dout, ids, T, C, scale, 1, 1, "embedding_backward");
}

void be_scatter_add_rows(sq_gpu_be *be, float *out, const float *in, const int *rows, int n,
                         int C)
{
    scatter(be, out, in, rows, n, C, 1.0f, 0, 0, "scatter_add_rows");
}

void be_posemb_backward(sq_gpu_be *be, float *dinp, float *dpe, const float *dout,
                        const int *pos, int T, int C)
{
    if (dinp)
        be_add2d(be, dinp, C, dout, C, T, C);
    scatter(be, dpe, dout, pos, T, C, 1.0f, 0, 0, "posemb_backward");
}

// ---- column sums -------------------------------------------------------

// dst[c] += sum over rows r of f(r, c), f = dout[r][c] (kind 0) or
// (inp[r][c] - mean[r]) rstd[r] dout[r][c] (kind 1: LayerNorm's dw), in
// two passes (common.cuh, be_sum_groups) in one launch: block (32 columns,
// group g of R rows) puts its partial in the workspace, and the last block
// of its columns adds the groups' partials in order (be_sum_is_last,
// be_sum_fin); LayerNorm's dw and db in the same pass (kind 2). The
// one-pass form, a block per 32 columns, ran 4 blocks of a
// 132-multiprocessor GPU for C = 128, each thread walking T / 8 rows; the
// two-launch form spent a second launch on each of 22 sums a SASRec step.
// A fixed order, the same bits every run, no float atomics.
#define SUM_LANES BE_SUM_LANES

// D: dout's element type (float; be_bf16 for kind 0 alone: the full CE's
// bf16 dlogits, whose output bias's gradient is their column sums)
template <class D>
static __global__ __launch_bounds__(32 * SUM_LANES) void k_colsum(
    float *dst, float *dst2, float *part, unsigned *cnt, const D *dout, const float *inp,
    const float *mean, const float *rstd, int T, int C, size_t ld, int R, int G, int kind)
{
    __shared__ float sh[SUM_LANES][32];
    __shared__ int last;
    int c = blockIdx.x * 32 + threadIdx.x, g = blockIdx.y;
    int r0 = g * R, r1 = T - r0 < R ? T : r0 + R;
    float acc = 0, acc2 = 0;
    if (c < C)
        for (int r = r0 + (int)threadIdx.y; r < r1; r += SUM_LANES) {
            float d = be_ldf(dout + (size_t)r * ld + c);
            acc += kind ? (inp[(size_t)r * ld + c] - mean[r]) * rstd[r] * d : d;
            if (kind == 2) // db beside dw; kinds 0 and 1 add nothing more
                acc2 += d;
        }
    float *part2 = part + (size_t)G * C; // kind 2's db partials
    float s = be_lanes_sum(sh, acc);
    if (threadIdx.y == 0 && c < C)
        part[(size_t)g * C + c] = s;
    if (kind == 2) {
        __syncthreads(); // sh's readers are done
        s = be_lanes_sum(sh, acc2);
        if (threadIdx.y == 0 && c < C)
            part2[(size_t)g * C + c] = s;
    }
    if (!be_sum_is_last(&last, cnt, blockIdx.x, G))
        return;
    s = be_sum_fin(sh, part, C, G, c);
    if (threadIdx.y == 0 && c < C)
        dst[c] += s;
    if (kind == 2) {
        s = be_sum_fin(sh, part2, C, G, c);
        if (threadIdx.y == 0 && c < C)
            dst2[c] += s;
    }
}

// kind 0: dst += column sums of dout; 1: dst += LayerNorm's dw sums; 2:
// both in one pass, dw into dst and db into dst2. ld: the rows' stride
// (C but for the bf16 dlogits' padded rows).
template <class D>
static void colsum(sq_gpu_be *be, float *dst, float *dst2, const D *dout, const float *inp,
                   const float *mean, const float *rstd, int T, int C, int kind,
                   size_t ld = 0)
{
    if (T <= 0 || C <= 0)
        return;
    int per = kind == 2 ? 2 : 1;
    if ((size_t)per * C > BE_SUM_WS) { // not one partial row: no layer is this wide
        if (!be->failed) {
            be->failed = 1;
            sq_fail(&be->err, SQ_EX_SOFTWARE, "column sum over %d columns", C);
        }
        return;
    }
    int R, G = be_sum_groups(T, per, C, &R);
    unsigned cols = (unsigned)((C + 31) / 32);
    const char *name = std::is_same<D, float>::value ? "k_colsum" : "k_colsum_bf16";
    be_launch(be, name, k_colsum<D>, dim3(cols, (unsigned)G), dim3(32, SUM_LANES), 0, dst, dst2,
              be->sum_ws, be->sum_cnt, dout, inp, mean, rstd, T, C, ld ? ld : (size_t)C, R, G,
              kind);
}

void be_colsum(sq_gpu_be *be, float *dst, const float *x, int T, int C)
{
    colsum<float>(be, dst, NULL, x, NULL, NULL, NULL, T, C, 0);
}

void be_colsum_ld(sq_gpu_be *be, float *dst, const float *x, int T, int C, size_t ld)
{
    colsum<float>(be, dst, NULL, x, NULL, NULL, NULL, T, C, 0, ld);
}

void be_colsum_ld(sq_gpu_be *be, float *dst, const be_bf16 *x, int T, int C, size_t ld)
{
    colsum<be_bf16>(be, dst, NULL, x, NULL, NULL, NULL, T, C, 0, ld);
}

// ---- LayerNorm: a warp per row ------------------------------------------

#define LN_ROWS 8 // rows (warps) a block

static __global__ __launch_bounds__(LN_ROWS * 32) void k_ln_forward(
    float *out, float *mean, float *rstd, const float *inp, const float *w, const float *b,
    int T, int C, float eps)
{
    int t = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (t >= T) // whole warps leave together: the shuffles below stay full
        return;
    const float *x = inp + (size_t)t * C;
    float s = 0;
    for (int c = lane; c < C; c += 32)
        s += x[c];
    float m = be_warp_sum(s) / (float)C;
    float v = 0;
    for (int c = lane; c < C; c += 32)
        v += (x[c] - m) * (x[c] - m);
    float r = 1.0f / sqrtf(be_warp_sum(v) / (float)C + eps);
    float *o = out + (size_t)t * C;
    for (int c = lane; c < C; c += 32)
        o[c] = (x[c] - m) * r * w[c] + b[c];
    if (lane == 0) {
        mean[t] = m;
        rstd[t] = r;
    }
}

// set: dinp = 0 + ... (ops.c's ln_back_rows: a zeroed dinp's bits, dinp
// not read); else dinp += ...
static __global__ __launch_bounds__(LN_ROWS * 32) void k_ln_backward(
    float *dinp, const float *dout, const float *inp, const float *w, const float *mean,
    const float *rstd, int T, int C, int set)
{
    int t = blockIdx.x * LN_ROWS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (t >= T)
        return;
    const float *x = inp + (size_t)t * C, *d = dout + (size_t)t * C;
    float m = mean[t], s = rstd[t], g = 0, gn = 0;
    for (int c = lane; c < C; c += 32) {
        float gc = w[c] * d[c];
        g += gc;
        gn += gc * ((x[c] - m) * s);
    }
    float gmean = be_warp_sum(g) / (float)C, gnmean = be_warp_sum(gn) / (float)C;
    float *dx = dinp + (size_t)t * C;
    for (int c = lane; c < C; c += 32)
        dx[c] = (set ? 0.0f : dx[c]) + s * (w[c] * d[c] - gmean - (x[c] - m) * s * gnmean);
}

void be_layernorm_forward(sq_gpu_be *be, float *out, float *mean, float *rstd, const float *inp,
                          const float *w, const float *b, int T, int C, float eps)
{
    if (T > 0)
        SQ_LAUNCH(be, k_ln_forward, (unsigned)((T + LN_ROWS - 1) / LN_ROWS), LN_ROWS * 32, 0,
                  out, mean, rstd, inp, w, b, T, C, eps);
}

static void ln_backward(sq_gpu_be *be, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, const float *mean, const float *rstd,
                        int T, int C, int set)
{
    if (T <= 0)
        return;
    SQ_LAUNCH(be, k_ln_backward, (unsigned)((T + LN_ROWS - 1) / LN_ROWS), LN_ROWS * 32, 0,
              dinp, dout, inp, w, mean, rstd, T, C, set);
    if (dw && db) // one pass for both
        colsum<float>(be, dw, db, dout, inp, mean, rstd, T, C, 2);
    else if (dw || db)
        colsum<float>(be, dw ? dw : db, NULL, dout, inp, mean, rstd, T, C, dw ? 1 : 0);
}

void be_layernorm_backward(sq_gpu_be *be, float *dinp, float *dw, float *db, const float *dout,
                           const float *inp, const float *w, const float *mean,
                           const float *rstd, int T, int C)
{
    ln_backward(be, dinp, dw, db, dout, inp, w, mean, rstd, T, C, 0);
}

void be_layernorm_backward_to(sq_gpu_be *be, float *dinp, float *dw, float *db,
                              const float *dout, const float *inp, const float *w,
                              const float *mean, const float *rstd, int T, int C)
{
    ln_backward(be, dinp, dw, db, dout, inp, w, mean, rstd, T, C, 1);
}

// ---- linear: out[T, OC] = inp[T, C] W[OC, C]^T + b ----------------------

void be_linear_forward(sq_gpu_be *be, float *out, const float *inp, const float *w,
                       const float *b, int T, int C, int OC)
{
    if (T <= 0 || OC <= 0)
        return;
    if (b && !be_gemm_bias(be, T, OC, C, inp, w, b, out)) // the bias in the GEMM's epilogue
        return;
    if (b) // out = b on every row, then out += inp W^T (beta 1), as the CPU
        be_copy2d(be, out, OC, b, 0, T, OC);
    be_gemm(be, 0, 1, T, OC, C, 1.0f, inp, C, w, C, b ? 1.0f : 0.0f, out, OC);
}

// beta 1: dinp added to; 0: written
static void linear_backward(sq_gpu_be *be, float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int T, int C, int OC, float beta)
{
    if (T <= 0)
        return;
    if (dinp) // dinp[T, C] (+)= dout[T, OC] W[OC, C]
        be_gemm(be, 0, 0, T, C, OC, 1.0f, dout, OC, w, C, beta, dinp, C);
    // dW[OC, C] += dout^T[OC, T] inp[T, C]
    be_gemm(be, 1, 0, OC, C, T, 1.0f, dout, OC, inp, C, 1.0f, dw, C);
    if (db)
        colsum<float>(be, db, NULL, dout, NULL, NULL, NULL, T, OC, 0);
}

void be_linear_backward(sq_gpu_be *be, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int T, int C, int OC)
{
    linear_backward(be, dinp, dw, db, dout, inp, w, T, C, OC, 1.0f);
}

void be_linear_backward_to(sq_gpu_be *be, float *dinp, float *dw, float *db, const float *dout,
                           const float *inp, const float *w, int T, int C, int OC)
{
    linear_backward(be, dinp, dw, db, dout, inp, w, T, C, OC, 0.0f);
}
