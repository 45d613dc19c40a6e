/* ops.c - the CPU ops (layouts and conventions: ops.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * ops_f64.o (see real.h).
 * GEMMs go to CBLAS; everything else is a plain loop, parallelised with
 * OpenMP where it pays. No BLAS call is made inside a parallel region: the
 * OpenBLAS build is threaded itself and would oversubscribe. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "ops.h"
#include "real.h"
#include "ongpu.h"
#include "rng.h"
#include "rowwise.h"
#include "vec.h"

#include <float.h>
#include <stdlib.h>
#include <string.h>

/* Column-parallel reductions (bias gradients, scatter-adds into tables) give
 * each thread a block of columns and loop over rows in order inside it: the
 * sum for every element is then taken in row order, whatever the thread
 * count. 16 floats = one cache line. */
#define COL_BLOCK 16

/* sum x[0, n) in SQ_LANES partial sums added in a fixed tree (vec.h): the
 * same bits at every vector width. */
static inline real R(vsum)(const real *x, int n)
{
    real acc[SQ_LANES] = {0};
    int i = 0;
    for (; i + SQ_LANES <= n; i += SQ_LANES)
        for (int l = 0; l < SQ_LANES; l++)
            acc[l] += x[i + l];
    real tail = 0;
    for (; i < n; i++)
        tail += x[i];
    for (int w = SQ_LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; l++)
            acc[l] += acc[l + w];
    return acc[0] + tail;
}

/* The rows of an element-wise-per-row op that one parallel chunk takes. */
static inline int rows_per_chunk(int C)
{
    return C >= SQ_CHUNK ? 1 : SQ_CHUNK / C;
}

/* ------------------------------------------------------------------------ */
/* Layout helpers (precision-free: compiled once, in the float build).      */

#if !SQ_REAL_IS_F64
int sq_pack_offsets(int *off, const int *len, int B)
{
    off[0] = 0;
    for (int b = 0; b < B; b++)
        off[b + 1] = off[b] + len[b];
    return off[B];
}

void sq_pack_positions(int *pos, const int *off, int B, int max_len)
{
    for (int b = 0; b < B; b++) {
        int len = off[b + 1] - off[b];
        for (int t = 0; t < len; t++)
            pos[off[b] + t] = max_len - len + t;
    }
}

int sq_seg_of(const int *off, int B, int row)
{
    int lo = 0, hi = B - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (off[mid] <= row)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

size_t sq_attention_cache_size(const int *off, int B, int H)
{
    size_t n = 0;
    for (int b = 0; b < B; b++) {
        size_t len = (size_t)(off[b + 1] - off[b]);
        n += len * len;
    }
    return n * (size_t)H;
}

int sq_ce_chunk(int n, int V1)
{
    /* logits of about 2^20 reals (4 MiB in float) stay in the caches while
     * the softmax and the two backward GEMMs read them again: on Beauty
     * (12,102 items) 86 rows a chunk ran a 1-thread CE epoch in 9.3-10.6 s
     * against 10.8-11.5 s with 512, whose 24 MB went to memory and back
     * five times (at 2 threads from equal to 12% faster: README) */
    int rows = V1 > 0 ? (int)(((size_t)1 << 20) / (size_t)V1) : n;
    rows = rows < 16 ? 16 : rows;
    return n < 1 ? 1 : rows < n ? rows : n;
}

int sq_ce_chunk_on(const sq_ctx *cx, int n, int V1)
{
    if (cx->backend != SQ_BACKEND_CUDA)
        return sq_ce_chunk(n, V1);
    /* a GPU has no cache to fit: the chunk is what 2^26 logits (256 MiB)
     * hold, so its GEMMs fill the device and the chunks' launches (seven
     * each) stop mattering: ml-1m-part at batch 2048 went from about 1000
     * chunks a step (the CPU's 307 rows) to 16 */
    int rows = V1 > 0 ? (int)(((size_t)1 << 26) / (size_t)V1) : n;
    rows = rows < 16 ? 16 : rows;
    return n < 1 ? 1 : rows < n ? rows : n;
}

int sq_count_targets(const int *pos, int n)
{
    int cnt = 0;
    for (int i = 0; i < n; i++)
        cnt += pos[i] != 0;
    return cnt;
}

size_t sq_ce_scratch_size(int chunk, int V1, int C)
{
    /* logits/dlogits [chunk, V1], gathered h [chunk, C], dh [chunk, C],
     * per-row loss [chunk] */
    return (size_t)chunk * ((size_t)V1 + 2 * (size_t)C + 1);
}

size_t sq_sampled_shared_scratch_size(int chunk, int K, int C)
{
    /* E_neg and its gradient [K, C], the slots' bias less correction and
     * bias gradient [K], logits [chunk, K], gathered h and its gradient
     * [chunk, C], each row's loss and positive's dlogit [chunk] */
    return 2 * (size_t)K * C + 2 * (size_t)K + (size_t)chunk * ((size_t)K + 2 * (size_t)C + 2);
}

int sq_sampled_shared_chunk(size_t have, int n, int K, int C)
{
    size_t fixed = sq_sampled_shared_scratch_size(0, K, C), row = (size_t)K + 2 * (size_t)C + 2;
    if (K < 1 || have < fixed + row)
        return 0;
    size_t fit = (have - fixed) / row;
    /* logits of about 2^20 reals stay in the caches between the GEMMs, as
     * sq_ce_chunk's */
    int rows = (int)(((size_t)1 << 20) / (size_t)K);
    rows = rows < 16 ? 16 : rows;
    rows = (size_t)rows < fit ? rows : (int)fit;
    return n < 1 ? 1 : rows < n ? rows : n;
}
#endif

/* ------------------------------------------------------------------------ */
/* 1. Embedding lookup                                                      */

void R(sq_embedding_forward)(const sq_ctx *cx, real *out, const real *table,
                             const int *ids, int T, int C, real scale)
{
    SQ_ON_GPU(cx, embedding_forward, (out, table, ids, T, C, scale));
    SQ_PAR_FOR(int, t, T, 1, {
        real *o = out + (size_t)t * C;
        const real *e = table + (size_t)ids[t] * C;
        for (int c = 0; c < C; c++)
            o[c] = ids[t] ? scale * e[c] : (real)0; /* id 0 = padding */
    });
}

void R(sq_embedding_backward)(const sq_ctx *cx, real *dtable, const real *dout,
                              const int *ids, int T, int C, real scale)
{
    SQ_ON_GPU(cx, embedding_backward, (dtable, dout, ids, T, C, scale));
    /* Several tokens share an item: scatter-add by column blocks, tokens in
     * order (deterministic, no atomics). Row 0 never gets gradient. */
    SQ_PAR_FOR(int, c0, C, COL_BLOCK, {
        int c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int t = 0; t < T; t++) {
            if (!ids[t])
                continue;
            real *d = dtable + (size_t)ids[t] * C;
            const real *g = dout + (size_t)t * C;
            for (int c = c0; c < c1; c++)
                d[c] += scale * g[c];
        }
    });
}

/* ------------------------------------------------------------------------ */
/* 2. Learned positional embedding                                          */

void R(sq_posemb_forward)(const sq_ctx *cx, real *out, const real *inp,
                          const real *pe, const int *pos, int T, int C)
{
    SQ_ON_GPU(cx, posemb_forward, (out, inp, pe, pos, T, C));
    SQ_PAR_FOR(int, t, T, 1, {
        const real *p = pe + (size_t)pos[t] * C;
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = inp[(size_t)t * C + c] + p[c];
    });
}

void R(sq_posemb_backward)(const sq_ctx *cx, real *dinp, real *dpe,
                           const real *dout, const int *pos, int T, int C)
{
    SQ_ON_GPU(cx, posemb_backward, (dinp, dpe, dout, pos, T, C));
    SQ_PAR_FOR(int, c0, C, COL_BLOCK, {
        int c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int t = 0; t < T; t++) {
            const real *g = dout + (size_t)t * C;
            real *dp = dpe + (size_t)pos[t] * C;
            if (dinp)
                for (int c = c0; c < c1; c++)
                    dinp[(size_t)t * C + c] += g[c];
            for (int c = c0; c < c1; c++)
                dp[c] += g[c];
        }
    });
}

/* ------------------------------------------------------------------------ */
/* 3. Layer norm                                                            */

/* Rows [t0, t1). The row sums keep SQ_LANES partial sums added in a
 * fixed tree (vec.h), as R(vsum): the same bits at every vector width. */
SQ_VEC static void R(ln_rows)(real *restrict out, real *restrict mean, real *restrict rstd,
                              const real *restrict inp, const real *restrict w,
                              const real *restrict b, int t0, int t1, int C, real eps)
{
    int Cv = C - C % SQ_LANES;
    for (int t = t0; t < t1; t++) {
        const real *x = inp + (size_t)t * C;
        real m = R(vsum)(x, C) / (real)C;
        /* two-pass variance: no cancellation when |mean| >> std */
        real acc[SQ_LANES] = {0}, tail = 0;
        for (int c = 0; c < Cv; c += SQ_LANES)
            for (int l = 0; l < SQ_LANES; l++)
                acc[l] += (x[c + l] - m) * (x[c + l] - m);
        for (int c = Cv; c < C; c++)
            tail += (x[c] - m) * (x[c] - m);
        real var = (R(vsum)(acc, SQ_LANES) + tail) / (real)C;
        real s = (real)1 / r_sqrt(var + eps);
        real *o = out + (size_t)t * C;
        #pragma omp simd
        for (int c = 0; c < C; c++)
            o[c] = (x[c] - m) * s * w[c] + b[c];
        mean[t] = m;
        rstd[t] = s;
    }
}

void R(sq_layernorm_forward)(const sq_ctx *cx, real *out, real *mean,
                             real *rstd, const real *inp, const real *w,
                             const real *b, int T, int C, real eps)
{
    SQ_ON_GPU(cx, layernorm_forward, (out, mean, rstd, inp, w, b, T, C, eps));
    int rows = rows_per_chunk(C);
    SQ_PAR_FOR(int, t0, T, rows, {
        R(ln_rows)(out, mean, rstd, inp, w, b, t0, t0 + rows < T ? t0 + rows : T, C, eps);
    });
}

/* dx of rows [t0, t1). With n = xhat = (x - mean) rstd and g = w * dout:
 * dx = rstd (g - mean(g) - n mean(g n))   (the llm.c derivation). set:
 * written as 0 + dx (a zeroed dinp's bits), dinp not read; else added. */
SQ_VEC static void R(ln_back_rows)(real *restrict dinp, const real *restrict dout,
                                   const real *restrict inp, const real *restrict w,
                                   const real *restrict mean, const real *restrict rstd,
                                   int t0, int t1, int C, int set)
{
    int Cv = C - C % SQ_LANES;
    for (int t = t0; t < t1; t++) {
        const real *x = inp + (size_t)t * C, *d = dout + (size_t)t * C;
        real m = mean[t], s = rstd[t];
        real ag[SQ_LANES] = {0}, agn[SQ_LANES] = {0}, tg = 0, tgn = 0;
        for (int c = 0; c < Cv; c += SQ_LANES)
            for (int l = 0; l < SQ_LANES; l++) {
                real g = w[c + l] * d[c + l];
                ag[l] += g;
                agn[l] += g * ((x[c + l] - m) * s);
            }
        for (int c = Cv; c < C; c++) {
            real g = w[c] * d[c];
            tg += g;
            tgn += g * ((x[c] - m) * s);
        }
        real gmean = (R(vsum)(ag, SQ_LANES) + tg) / (real)C;
        real gnmean = (R(vsum)(agn, SQ_LANES) + tgn) / (real)C;
        real *dx = dinp + (size_t)t * C;
        if (set) {
            #pragma omp simd
            for (int c = 0; c < C; c++)
                dx[c] = (real)0 + s * (w[c] * d[c] - gmean - (x[c] - m) * s * gnmean);
            continue;
        }
        #pragma omp simd
        for (int c = 0; c < C; c++)
            dx[c] += s * (w[c] * d[c] - gmean - (x[c] - m) * s * gnmean);
    }
}

/* dw = sum_t n * dout, db = sum_t dout over columns [c0, c1), tokens in
 * order. */
SQ_VEC static void R(ln_back_cols)(real *restrict dw, real *restrict db,
                                   const real *restrict dout, const real *restrict inp,
                                   const real *restrict mean, const real *restrict rstd,
                                   int c0, int c1, int T, int C)
{
    for (int t = 0; t < T; t++) {
        const real *x = inp + (size_t)t * C, *d = dout + (size_t)t * C;
        real m = mean[t], s = rstd[t];
        #pragma omp simd
        for (int c = c0; c < c1; c++) {
            dw[c] += (x[c] - m) * s * d[c];
            db[c] += d[c];
        }
    }
}

static void R(ln_backward)(const sq_ctx *cx, real *dinp, real *dw, real *db, const real *dout,
                           const real *inp, const real *w, const real *mean, const real *rstd,
                           int T, int C, int set)
{
    int rows = rows_per_chunk(C);
    SQ_PAR_FOR(int, t0, T, rows, {
        R(ln_back_rows)(dinp, dout, inp, w, mean, rstd, t0, t0 + rows < T ? t0 + rows : T, C,
                        set);
    });
    /* a block of 4 vectors of 16 columns per task: enough to vectorise */
    SQ_PAR_FOR(int, c0, C, 4 * COL_BLOCK, {
        int c1 = c0 + 4 * COL_BLOCK < C ? c0 + 4 * COL_BLOCK : C;
        R(ln_back_cols)(dw, db, dout, inp, mean, rstd, c0, c1, T, C);
    });
}

void R(sq_layernorm_backward)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                              const real *dout, const real *inp,
                              const real *w, const real *mean,
                              const real *rstd, int T, int C)
{
    SQ_ON_GPU(cx, layernorm_backward, (dinp, dw, db, dout, inp, w, mean, rstd, T, C));
    R(ln_backward)(cx, dinp, dw, db, dout, inp, w, mean, rstd, T, C, 0);
}

void R(sq_layernorm_backward_to)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                                 const real *dout, const real *inp, const real *w,
                                 const real *mean, const real *rstd, int T, int C)
{
    SQ_ON_GPU(cx, layernorm_backward_to, (dinp, dw, db, dout, inp, w, mean, rstd, T, C));
    R(ln_backward)(cx, dinp, dw, db, dout, inp, w, mean, rstd, T, C, 1);
}

/* ------------------------------------------------------------------------ */
/* 4. Linear                                                                */

void R(sq_linear_forward)(const sq_ctx *cx, real *out, const real *inp,
                          const real *w, const real *b, int T, int C, int OC)
{
    SQ_ON_GPU(cx, linear_forward, (out, inp, w, b, T, C, OC));
    if (cx->rowwise && cx->backend == SQ_BACKEND_CPU) {
        R(sq_rowwise_linear)(cx, out, inp, w, b, T, C, OC);
        return;
    }
    /* out = b broadcast, then out += inp W^T in one GEMM (beta = 1). */
    if (b) {
        SQ_PAR_FOR(int, t, T, 1, {
            memcpy(out + (size_t)t * OC, b, (size_t)OC * sizeof *out);
        });
    }
    r_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, OC, C,
           1, inp, C, w, C, b ? 1 : 0, out, OC);
}

/* beta 1: dinp added to; 0: written (the GEMM of a zeroed dinp) */
static void R(linear_backward)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                               const real *dout, const real *inp, const real *w, int T, int C,
                               int OC, real beta)
{
    if (dinp) /* dinp[T, C] (+)= dout[T, OC] W[OC, C] */
        r_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, C, OC,
               1, dout, OC, w, C, beta, dinp, C);
    /* dW[OC, C] += dout^T[OC, T] inp[T, C] */
    r_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, T,
           1, dout, OC, inp, C, 1, dw, C);
    if (db) {
        SQ_PAR_FOR(int, o0, OC, COL_BLOCK, {
            int o1 = o0 + COL_BLOCK < OC ? o0 + COL_BLOCK : OC;
            for (int t = 0; t < T; t++)
                for (int o = o0; o < o1; o++)
                    db[o] += dout[(size_t)t * OC + o];
        });
    }
}

void R(sq_linear_backward)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                           const real *dout, const real *inp, const real *w,
                           int T, int C, int OC)
{
    SQ_ON_GPU(cx, linear_backward, (dinp, dw, db, dout, inp, w, T, C, OC));
    R(linear_backward)(cx, dinp, dw, db, dout, inp, w, T, C, OC, 1);
}

void R(sq_linear_backward_to)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                              const real *dout, const real *inp, const real *w, int T, int C,
                              int OC)
{
    SQ_ON_GPU(cx, linear_backward_to, (dinp, dw, db, dout, inp, w, T, C, OC));
    R(linear_backward)(cx, dinp, dw, db, dout, inp, w, T, C, OC, 0);
}

/* ------------------------------------------------------------------------ */
/* 5. GELU and ReLU                                                         */

/* The float build uses vec.h's erf and exp so that the loops vectorise
 * (within 6e-7 of erf, a few ulp of 1 + erf); the double build, which
 * the gradient checks use, keeps libm's. */
#if SQ_REAL_IS_F64
#define gelu_v sq_gelu
#define gelu_grad_v sq_gelu_grad
#else
static inline float gelu_v(float x)
{
    return 0.5f * x * (1.0f + sq_verff(x * 0.70710678118654752440f));
}

static inline float gelu_grad_v(float x)
{
    float cdf = 0.5f * (1.0f + sq_verff(x * 0.70710678118654752440f));
    return cdf + x * (0.39894228040143267794f * sq_vexpf(-0.5f * x * x));
}
#endif

SQ_VEC static void R(gelu_chunk)(real *restrict out, const real *restrict inp, size_t n)
{
    SQ_SIMD_IF_FLOAT
    for (size_t i = 0; i < n; i++)
        out[i] = gelu_v(inp[i]);
}

void R(sq_gelu_forward)(const sq_ctx *cx, real *out, const real *inp, size_t n)
{
    SQ_ON_GPU(cx, gelu_forward, (out, inp, n));
    SQ_FOR_CHUNKS(n, R(gelu_chunk)(out + i0, inp + i0, len));
}

/* set: dinp = 0 + ... (a zeroed dinp's bits, dinp not read); else += */
SQ_VEC static void R(gelu_back_chunk)(real *restrict dinp, const real *restrict dout,
                                      const real *restrict inp, size_t n, int set)
{
    if (set) {
        SQ_SIMD_IF_FLOAT
        for (size_t i = 0; i < n; i++)
            dinp[i] = (real)0 + dout[i] * gelu_grad_v(inp[i]);
        return;
    }
    SQ_SIMD_IF_FLOAT
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * gelu_grad_v(inp[i]);
}

void R(sq_gelu_backward)(const sq_ctx *cx, real *dinp, const real *dout,
                         const real *inp, size_t n)
{
    SQ_ON_GPU(cx, gelu_backward, (dinp, dout, inp, n));
    SQ_FOR_CHUNKS(n, R(gelu_back_chunk)(dinp + i0, dout + i0, inp + i0, len, 0));
}

void R(sq_gelu_backward_to)(const sq_ctx *cx, real *dinp, const real *dout, const real *inp,
                            size_t n)
{
    SQ_ON_GPU(cx, gelu_backward_to, (dinp, dout, inp, n));
    SQ_FOR_CHUNKS(n, R(gelu_back_chunk)(dinp + i0, dout + i0, inp + i0, len, 1));
}

SQ_VEC static void R(relu_chunk)(real *out, const real *inp, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = inp[i] > 0 ? inp[i] : (real)0;
}

void R(sq_relu_forward)(const sq_ctx *cx, real *out, const real *inp, size_t n)
{
    SQ_ON_GPU(cx, relu_forward, (out, inp, n));
    SQ_FOR_CHUNKS(n, R(relu_chunk)(out + i0, inp + i0, len));
}

SQ_VEC static void R(relu_back_chunk)(real *restrict dinp, const real *restrict dout,
                                      const real *restrict inp, size_t n)
{
    /* the subgradient 0 at x = 0, as PyTorch. dout read whatever the sign:
     * a select of two values, which SSE2 vectorises (a load under the
     * condition stayed scalar there, 35x slower: issue 33) */
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        real g = dout[i];
        dinp[i] += inp[i] > 0 ? g : (real)0;
    }
}

void R(sq_relu_backward)(const sq_ctx *cx, real *dinp, const real *dout,
                         const real *inp, size_t n)
{
    SQ_ON_GPU(cx, relu_backward, (dinp, dout, inp, n));
    SQ_FOR_CHUNKS(n, R(relu_back_chunk)(dinp + i0, dout + i0, inp + i0, len));
}

/* ------------------------------------------------------------------------ */
/* 6. Dropout                                                               */

/* The key of one dropout call: a hash of (seed, step, site), so that the
 * mask is a pure function of (seed, step, site, element) - the same for
 * any thread count and vector width. */
static inline uint64_t dropout_key(uint64_t seed, uint64_t step, uint64_t site)
{
    uint64_t x = seed + step * 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 31)) + site * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 29)) * 0x94d049bb133111ebull;
    return x ^ (x >> 32);
}

/* Elements [i0, i0 + n) of one call: out = inp m (kind 0), res + inp m
 * (kind 1: the residual after a sublayer), relu(inp) m (kind 2: the FFN's
 * hidden layer), m = keep_scale or 0 by the draw: a product, not a branch
 * (a dropped element is +-0), and a 32-bit counter (n <= SQ_CHUNK), so
 * that GCC vectorises it. The draw is a float compared with (float)p in
 * both builds, so the float and double twins drop the same elements; the
 * chunk's high index bits go to the key. Kinds 1 and 2 never write the
 * dropped tensor (on a GPU, a pass of it each way) and give the bits of the
 * two ops in turn: the mask first, then the product as dropout's backward
 * forms it (keep_scale * mask: the same m). out may be inp or res (in
 * place: gru4rec, hstu). */
SQ_VEC static void R(dropout_chunk)(real *out, uint8_t *restrict mask, const real *res,
                                    const real *inp, size_t i0, size_t n, float p,
                                    real keep_scale, uint64_t key, int kind)
{
    key += (uint64_t)(i0 >> 32) * 0xd6e8feb86659fd93ull;
    uint32_t c0 = (uint32_t)i0;
    if (kind == 0) { /* one pass: the draw and the product */
        #pragma omp simd
        for (uint32_t j = 0; j < (uint32_t)n; j++) {
            float u = sq_counter_uniform(key, c0 + j);
            mask[j] = (uint8_t)(u >= p);
            out[j] = inp[j] * (u >= p ? keep_scale : (real)0);
        }
        return;
    }
    #pragma omp simd
    for (uint32_t j = 0; j < (uint32_t)n; j++)
        mask[j] = (uint8_t)(sq_counter_uniform(key, c0 + j) >= p);
    if (kind == 1) {
        #pragma omp simd
        for (size_t j = 0; j < n; j++)
            out[j] = res[j] + inp[j] * (keep_scale * (real)mask[j]);
    } else {
        #pragma omp simd
        for (size_t j = 0; j < n; j++)
            out[j] = (inp[j] > 0 ? inp[j] : (real)0) * (keep_scale * (real)mask[j]);
    }
}

void R(sq_dropout_forward)(const sq_ctx *cx, real *out, uint8_t *mask,
                           const real *inp, int T, int C, real p, uint64_t seed,
                           uint64_t step, uint64_t site)
{
    SQ_ON_GPU(cx, dropout_forward, (out, mask, inp, T, C, p, seed, step, site));
    real keep_scale = (real)1 / ((real)1 - p);
    uint64_t key = dropout_key(seed, step, site);
    size_t n = (size_t)T * C;
    if (p == 0) { /* scoring, or no dropout: nothing to draw */
        memset(mask, 1, n);
        if (out != inp)
            memcpy(out, inp, n * sizeof *out);
        return;
    }
    SQ_FOR_CHUNKS(n, R(dropout_chunk)(out + i0, mask + i0, NULL, inp + i0, i0, len, (float)p,
                                      keep_scale, key, 0));
}

void R(sq_dropout_add_forward)(const sq_ctx *cx, real *out, uint8_t *mask, const real *res,
                               const real *inp, int T, int C, real p, uint64_t seed,
                               uint64_t step, uint64_t site)
{
    SQ_ON_GPU(cx, dropout_add_forward, (out, mask, res, inp, T, C, p, seed, step, site));
    size_t n = (size_t)T * C;
    if (p == 0) { /* scoring, or no dropout: the residual */
        memset(mask, 1, n);
        R(sq_residual_forward)(cx, out, res, inp, n);
        return;
    }
    real keep_scale = (real)1 / ((real)1 - p);
    uint64_t key = dropout_key(seed, step, site);
    SQ_FOR_CHUNKS(n, R(dropout_chunk)(out + i0, mask + i0, res + i0, inp + i0, i0, len,
                                      (float)p, keep_scale, key, 1));
}

void R(sq_relu_dropout_forward)(const sq_ctx *cx, real *out, uint8_t *mask, const real *inp,
                                int T, int C, real p, uint64_t seed, uint64_t step,
                                uint64_t site)
{
    SQ_ON_GPU(cx, relu_dropout_forward, (out, mask, inp, T, C, p, seed, step, site));
    size_t n = (size_t)T * C;
    if (p == 0) { /* scoring, or no dropout: the ReLU */
        memset(mask, 1, n);
        R(sq_relu_forward)(cx, out, inp, n);
        return;
    }
    real keep_scale = (real)1 / ((real)1 - p);
    uint64_t key = dropout_key(seed, step, site);
    SQ_FOR_CHUNKS(n, R(dropout_chunk)(out + i0, mask + i0, NULL, inp + i0, i0, len,
                                      (float)p, keep_scale, key, 2));
}

/* set: dinp = 0 + ... (sq_dropout_backward_to: a zeroed dinp's bits, -0
 * made +0 as there, without zeroing or reading it); else dinp += ... */
SQ_VEC static void R(dropout_back_chunk)(real *restrict dinp, const real *restrict dout,
                                         const uint8_t *restrict mask, size_t n,
                                         real keep_scale, int set)
{
    if (set) {
        #pragma omp simd
        for (size_t i = 0; i < n; i++)
            dinp[i] = (real)0 + dout[i] * (keep_scale * (real)mask[i]);
        return;
    }
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        dinp[i] += dout[i] * (keep_scale * (real)mask[i]);
}

void R(sq_dropout_backward)(const sq_ctx *cx, real *dinp, const real *dout,
                            const uint8_t *mask, size_t n, real p)
{
    SQ_ON_GPU(cx, dropout_backward, (dinp, dout, mask, n, p));
    real keep_scale = (real)1 / ((real)1 - p);
    SQ_FOR_CHUNKS(n, R(dropout_back_chunk)(dinp + i0, dout + i0, mask + i0, len, keep_scale, 0));
}

void R(sq_dropout_backward_to)(const sq_ctx *cx, real *dinp, const real *dout,
                               const uint8_t *mask, size_t n, real p)
{
    SQ_ON_GPU(cx, dropout_backward_to, (dinp, dout, mask, n, p));
    real keep_scale = (real)1 / ((real)1 - p);
    SQ_FOR_CHUNKS(n, R(dropout_back_chunk)(dinp + i0, dout + i0, mask + i0, len, keep_scale, 1));
}

/* Back through sq_relu_dropout_forward: dinp = 0 + relu'(inp) (dout keep
 * mask), with the dropout's gradient formed as sq_dropout_backward forms
 * it into a zeroed array (0 + ...: -0 becomes +0 there too), so the bits
 * are those of the two backwards in turn, each into zeros; neither the
 * intermediate array nor dinp is zeroed or read. */
SQ_VEC static void R(relu_dropout_back_chunk)(real *restrict dinp, const real *restrict dout,
                                              const uint8_t *restrict mask,
                                              const real *restrict inp, size_t n,
                                              real keep_scale)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        real g = (real)0 + dout[i] * (keep_scale * (real)mask[i]);
        dinp[i] = (real)0 + (inp[i] > 0 ? g : (real)0);
    }
}

void R(sq_relu_dropout_backward_to)(const sq_ctx *cx, real *dinp, const real *dout,
                                    const uint8_t *mask, const real *inp, size_t n, real p)
{
    SQ_ON_GPU(cx, relu_dropout_backward_to, (dinp, dout, mask, inp, n, p));
    real keep_scale = (real)1 / ((real)1 - p);
    SQ_FOR_CHUNKS(n, R(relu_dropout_back_chunk)(dinp + i0, dout + i0, mask + i0, inp + i0, len,
                                                keep_scale));
}

/* ------------------------------------------------------------------------ */
/* 7. Residual                                                              */

SQ_VEC static void R(residual_chunk)(real *out, const real *a, const real *b, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void R(sq_residual_forward)(const sq_ctx *cx, real *out, const real *a,
                            const real *b, size_t n)
{
    SQ_ON_GPU(cx, residual_forward, (out, a, b, n));
    SQ_FOR_CHUNKS(n, R(residual_chunk)(out + i0, a + i0, b + i0, len));
}

SQ_VEC static void R(residual_back_chunk)(real *da, real *db, const real *dout, size_t n)
{
    #pragma omp simd
    for (size_t i = 0; i < n; i++) {
        da[i] += dout[i];
        db[i] += dout[i];
    }
}

void R(sq_residual_backward)(const sq_ctx *cx, real *da, real *db,
                             const real *dout, size_t n)
{
    SQ_ON_GPU(cx, residual_backward, (da, db, dout, n));
    SQ_FOR_CHUNKS(n, R(residual_back_chunk)(da + i0, db + i0, dout + i0, len));
}

/* ------------------------------------------------------------------------ */
/* 8b. Segment mean                                                         */

void R(sq_segmean_forward)(const sq_ctx *cx, real *out, const real *inp, const int *off,
                           int B, int C)
{
    SQ_ON_GPU(cx, segmean_forward, (out, inp, off, B, C));
    /* one segment per iteration, its rows summed in order: deterministic */
    SQ_PAR_FOR(int, b, B, 1, {
        real *o = out + (size_t)b * C;
        int n = off[b + 1] - off[b];
        for (int c = 0; c < C; c++)
            o[c] = 0;
        for (int t = off[b]; t < off[b + 1]; t++)
            for (int c = 0; c < C; c++)
                o[c] += inp[(size_t)t * C + c];
        real s = n > 0 ? (real)1 / (real)n : 0;
        for (int c = 0; c < C; c++)
            o[c] *= s;
    });
}

void R(sq_segmean_backward)(const sq_ctx *cx, real *dinp, const real *dout, const int *off,
                            int B, int C)
{
    SQ_ON_GPU(cx, segmean_backward, (dinp, dout, off, B, C));
    SQ_PAR_FOR(int, b, B, 1, {
        int n = off[b + 1] - off[b];
        if (n <= 0)
            continue;
        real s = (real)1 / (real)n;
        for (int t = off[b]; t < off[b + 1]; t++)
            for (int c = 0; c < C; c++)
                dinp[(size_t)t * C + c] += s * dout[(size_t)b * C + c];
    });
}

/* ------------------------------------------------------------------------ */
/* 8. Multi-head attention on packed segments                               */

/* Offset of segment b's probability blocks: H * sum_{b'<b} len[b']^2.
 * O(B) per call, negligible next to the O(len^2 hs) work of a pair. */
static size_t att_base(const int *off, int b, int H)
{
    size_t n = 0;
    for (int i = 0; i < b; i++) {
        size_t len = (size_t)(off[i + 1] - off[i]);
        n += len * len;
    }
    return n * (size_t)H;
}

/* x[0, n) = exp(x - mx) in place. Returns the sum of the new x but for
 * its last n % SQ_LANES, in SQ_LANES partial sums added in a fixed tree
 * (vsum), and *tail the sum of those last ones, in order: the same bits at
 * every vector width (vec.h's exp). The double build (the gradient checks):
 * libm's exp, the whole sum in order, *tail 0. */
static inline __attribute__((always_inline)) real R(exp_shift)(real *restrict x, int n, real mx,
                                                               real *tail)
{
#if SQ_REAL_IS_F64
    real sum = 0;
    for (int j = 0; j < n; j++) {
        x[j] = exp(x[j] - mx);
        sum += x[j];
    }
    *tail = 0;
    return sum;
#else
    float acc[SQ_LANES] = {0};
    int j = 0;
    for (; j + SQ_LANES <= n; j += SQ_LANES)
        for (int l = 0; l < SQ_LANES; l++) {
            x[j + l] = sq_vexpf(x[j + l] - mx);
            acc[l] += x[j + l];
        }
    float t = 0;
    for (; j < n; j++) {
        x[j] = sq_vexpf(x[j] - mx);
        t += x[j];
    }
    *tail = t;
    return R(vsum)(acc, SQ_LANES);
#endif
}

/* In place over a[0, n): softmax, exp(a - max a) / sum; a[n, len) = 0.
 * The float build uses vec.h's exp and sums in SQ_LANES partial sums added
 * in a fixed tree (the same bits at every vector width); the double build
 * (the gradient checks) libm's exp in order. */
SQ_VEC static void R(softmax_vrow)(real *restrict a, int n, int len)
{
    real mx = a[0];
    for (int j = 1; j < n; j++)
        mx = a[j] > mx ? a[j] : mx;
    real tail, lanes = R(exp_shift)(a, n, mx, &tail);
    real sum = lanes + tail;
    real inv = (real)1 / sum;
    #pragma omp simd
    for (int jj = 0; jj < n; jj++)
        a[jj] *= inv;
    for (int jj = n; jj < len; jj++)
        a[jj] = 0;
}

/* y[0, w) += sum_i c[i * cs] x_i[0, w) over i in [i0, i1) in order, x_i =
 * x + i * ldx, in an accumulator the compiler keeps in registers when w is
 * a constant: y (a row of out, dq, dk or dv) is read and written once, not
 * once a term. */
static inline __attribute__((always_inline)) void R(accum_w)(real *restrict y,
                                                             const real *restrict c, int cs,
                                                             const real *restrict x, int ldx,
                                                             int i0, int i1, int w)
{
    real acc[16];
    for (int d = 0; d < w; d++)
        acc[d] = y[d];
    for (int i = i0; i < i1; i++) {
        real ci = c[(size_t)i * cs];
        const real *restrict xi = x + (size_t)i * ldx;
        #pragma omp simd
        for (int d = 0; d < w; d++)
            acc[d] += ci * xi[d];
    }
    for (int d = 0; d < w; d++)
        y[d] = acc[d];
}

/* The same over y[0, hs), 16 columns at a time (heads of 8: one block of
 * 8). Every y[d] is the same sum in i order whatever the blocks. */
static inline __attribute__((always_inline)) void R(accum)(real *restrict y,
                                                           const real *restrict c, int cs,
                                                           const real *restrict x, int ldx,
                                                           int i0, int i1, int hs)
{
    int d0 = 0;
    for (; d0 + 16 <= hs; d0 += 16)
        R(accum_w)(y + d0, c, cs, x + d0, ldx, i0, i1, 16);
    if (hs - d0 == 8)
        R(accum_w)(y + d0, c, cs, x + d0, ldx, i0, i1, 8);
    else if (hs > d0)
        R(accum_w)(y + d0, c, cs, x + d0, ldx, i0, i1, hs - d0);
}

/* Pair bh of an attention op: segment *b, head *h, first row *o; returns
 * the segment's length. */
static inline int pair_of(const int *off, int H, int bh, int *b, int *h, int *o)
{
    *b = bh / H;
    *h = bh % H;
    *o = off[*b];
    return off[*b + 1] - off[*b];
}

/* mt[hs, L] = the first hs columns of L rows of m (row stride ld),
 * transposed: a head's keys or values, a dimension a contiguous row. */
static inline void R(pack_t)(real *restrict mt, const real *m, int ld, int L, int hs)
{
    for (int j = 0; j < L; j++)
        for (int d = 0; d < hs; d++)
            mt[(size_t)d * L + j] = m[(size_t)j * ld + d];
}

/* s[j] = x . m_j for j < jend, over the head's dimensions in order,
 * ((x_0 m_j0) + x_1 m_j1) + ..., a vector of rows j at a time from mt (m
 * packed by pack_t), or (mt NULL) from m in place: the same sums. */
static inline __attribute__((always_inline)) void R(dots_row)(real *restrict s, const real *x,
                                                              const real *m, int ld,
                                                              const real *mt, int L, int jend,
                                                              int hs)
{
    #pragma omp simd
    for (int j = 0; j < jend; j++)
        s[j] = 0;
    for (int d = 0; d < hs; d++) {
        real xd = x[d];
        if (mt) {
            const real *restrict md = mt + (size_t)d * L;
            #pragma omp simd
            for (int j = 0; j < jend; j++)
                s[j] += xd * md[j];
        } else {
            for (int j = 0; j < jend; j++)
                s[j] += xd * m[(size_t)j * ld + d];
        }
    }
}

/* One (segment, head) pair of sq_attention_forward: L rows of q, k, v
 * (row stride ld) into out (stride C) and the probabilities a [L, L].
 * The scores of a row are built over the head's dimensions in order,
 * s_j = scale (((q_0 k_j0) + q_1 k_j1) + ...), a vector of keys j at a
 * time, from kt = k transposed ([hs, L], packed here; NULL: read k in
 * place, the same sums): with heads of 8-16 dimensions a dot product per
 * pair is mostly overhead. out_i = sum_j p_ij v_j in j order. */
SQ_VEC static void R(attn_pair_forward)(real *restrict out, real *restrict a, const real *q,
                                        const real *k, const real *v, int ld, int C, int L,
                                        int hs, real scale, int causal, real *restrict kt)
{
    if (kt)
        R(pack_t)(kt, k, ld, L, hs);
    for (int i = 0; i < L; i++) {
        const real *qi = q + (size_t)i * ld;
        real *arow = a + (size_t)i * L, *oi = out + (size_t)i * C;
        int jend = causal ? i + 1 : L;
        R(dots_row)(arow, qi, k, ld, kt, L, jend, hs);
        #pragma omp simd
        for (int j = 0; j < jend; j++)
            arow[j] *= scale;
        R(softmax_vrow)(arow, jend, L);
        for (int d = 0; d < hs; d++)
            oi[d] = 0;
        R(accum)(oi, arow, 1, v, ld, 0, jend, hs);
    }
}

void R(sq_attention_forward)(const sq_ctx *cx, real *out, real *att,
                             const real *q, const real *k, const real *v,
                             int ld, const int *off, int B, int H, int C,
                             int causal)
{
    SQ_ON_GPU(cx, attention_forward, (out, att, q, k, v, ld, off, B, H, C, causal));
    int hs = C / H, maxL = 0;
    real scale = (real)1 / r_sqrt((real)hs);
    for (int b = 0; b < B; b++)
        maxL = off[b + 1] - off[b] > maxL ? off[b + 1] - off[b] : maxL;
    /* One (segment, head) pair per iteration. Pairs write disjoint outputs
     * and each is computed by one thread in a fixed order, so dynamic
     * scheduling (segments differ in length) stays deterministic. Each
     * thread packs its pairs' keys into its own kt (without memory for
     * it, the kernel reads them in place: the same sums). */
    SQ_PAR_EACH(bh, B * H, real, kt, (size_t)maxL * hs, {
        int b, h, o, L = pair_of(off, H, bh, &b, &h, &o);
        size_t at = (size_t)o * ld + (size_t)h * hs;
        if (L > 0)
            R(attn_pair_forward)(out + (size_t)o * C + (size_t)h * hs,
                                 att + att_base(off, b, H) + (size_t)h * L * L, q + at,
                                 k + at, v + at, ld, C, L, hs, scale, causal, kt);
    });
}

/* ds_ij = scale p_ij (do_i . v_j - do_i . out_i) of row i into dsr[0, jend),
 * the dot over the head's dimensions in order, from vt = v transposed
 * ([hs, L]) or (NULL) from v in place: the same sums. */
static inline void R(ds_row)(real *restrict dsr, const real *restrict p, const real *doi,
                             real rowdot, const real *v, int ld, const real *vt, int L,
                             int jend, int hs, real scale)
{
    R(dots_row)(dsr, doi, v, ld, vt, L, jend, hs);
    #pragma omp simd
    for (int j = 0; j < jend; j++)
        dsr[j] = scale * p[j] * (dsr[j] - rowdot);
}

/* One (segment, head) pair of sq_attention_backward. Per row i, with
 * p = softmax(s), dp_ij = dout_i . v_j:
 *   ds_ij = p_ij (dp_ij - sum_j' p_ij' dp_ij'),  and the sum equals
 *           dout_i . out_i since out_i = sum_j p_ij v_j
 *   dq_i += scale sum_j ds_ij k_j   (j in order)
 *   dk_j += scale sum_i ds_ij q_i,  dv_j += sum_i p_ij dout_i   (i in order)
 * ds (scale folded in) is kept whole in dS [L, L] so that dk and dv are
 * summed a key at a time in registers; scratch = vt [hs, L] then dS, or
 * NULL: ds recomputed where it is needed (the same sums). */
SQ_VEC static void R(attn_pair_backward)(real *dq, real *dk, real *dv, const real *dout,
                                         const real *out, const real *q, const real *k,
                                         const real *v, const real *a, int ld, int C, int L,
                                         int hs, real scale, int causal, real *scratch)
{
    real *vt = scratch, *dS = scratch ? scratch + (size_t)hs * L : NULL;
    if (vt)
        R(pack_t)(vt, v, ld, L, hs);
    real row[1];
    for (int i = 0; i < L; i++) {
        const real *doi = dout + (size_t)i * C;
        real rowdot = sq_dot(doi, out + (size_t)i * C, hs);
        int jend = causal ? i + 1 : L;
        if (dS) {
            real *dsr = dS + (size_t)i * L;
            R(ds_row)(dsr, a + (size_t)i * L, doi, rowdot, v, ld, vt, L, jend, hs, scale);
            R(accum)(dq + (size_t)i * ld, dsr, 1, k, ld, 0, jend, hs);
        } else {
            for (int j = 0; j < jend; j++) { /* one ds at a time, in j order */
                R(ds_row)(row, a + (size_t)i * L + j, doi, rowdot, v + (size_t)j * ld, ld,
                          NULL, 1, 1, hs, scale);
                R(accum)(dq + (size_t)i * ld, row, 1, k + (size_t)j * ld, ld, 0, 1, hs);
            }
        }
    }
    for (int j = 0; j < L; j++) {
        int i0 = causal ? j : 0;
        if (dS) {
            R(accum)(dk + (size_t)j * ld, dS + j, L, q, ld, i0, L, hs);
        } else {
            for (int i = i0; i < L; i++) {
                const real *doi = dout + (size_t)i * C;
                real rowdot = sq_dot(doi, out + (size_t)i * C, hs);
                R(ds_row)(row, a + (size_t)i * L + j, doi, rowdot, v + (size_t)j * ld, ld,
                          NULL, 1, 1, hs, scale);
                R(accum)(dk + (size_t)j * ld, row, 1, q + (size_t)i * ld, ld, 0, 1, hs);
            }
        }
        R(accum)(dv + (size_t)j * ld, a + j, L, dout, C, i0, L, hs);
    }
}

/* set: the pair's rows of dq, dk, dv (its head's columns) zeroed first */
static void R(attention_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                  const real *dout, const real *out, const real *q,
                                  const real *k, const real *v, const real *att, int ld,
                                  const int *off, int B, int H, int C, int causal, int set)
{
    int hs = C / H, maxL = 0;
    real scale = (real)1 / r_sqrt((real)hs);
    for (int b = 0; b < B; b++)
        maxL = off[b + 1] - off[b] > maxL ? off[b + 1] - off[b] : maxL;
    /* as the forward: a pair per iteration, each thread its scratch */
    SQ_PAR_EACH(bh, B * H, real, scratch, ((size_t)hs + (size_t)maxL) * (size_t)maxL, {
        int b, h, o, L = pair_of(off, H, bh, &b, &h, &o);
        size_t at = (size_t)o * ld + (size_t)h * hs, ao = (size_t)o * C + (size_t)h * hs;
        for (int i = 0; set && i < L; i++) {
            memset(dq + at + (size_t)i * ld, 0, (size_t)hs * sizeof *dq);
            memset(dk + at + (size_t)i * ld, 0, (size_t)hs * sizeof *dk);
            memset(dv + at + (size_t)i * ld, 0, (size_t)hs * sizeof *dv);
        }
        if (L > 0)
            R(attn_pair_backward)(dq + at, dk + at, dv + at, dout + ao, out + ao, q + at,
                                  k + at, v + at,
                                  att + att_base(off, b, H) + (size_t)h * L * L, ld, C, L,
                                  hs, scale, causal, scratch);
    });
}

void R(sq_attention_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                              const real *dout, const real *out, const real *q,
                              const real *k, const real *v, const real *att,
                              int ld, const int *off, int B, int H, int C,
                              int causal)
{
    SQ_ON_GPU(cx, attention_backward,
              (dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal));
    R(attention_backward)(cx, dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal, 0);
}

void R(sq_attention_backward_to)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                 const real *dout, const real *out, const real *q,
                                 const real *k, const real *v, const real *att, int ld,
                                 const int *off, int B, int H, int C, int causal)
{
    SQ_ON_GPU(cx, attention_backward_to,
              (dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal));
    R(attention_backward)(cx, dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal, 1);
}

/* ------------------------------------------------------------------------ */
/* 9. Full-softmax cross-entropy with tied item embeddings                  */

/* sq_ce_full and sq_ce_full_bias: logits = h E^T (+ bias). */
/* One row of logits lr[0, V1) of target y: softmax over items 1..V1-1 in
 * place, and (grad) dlogits = g (p - onehot(y)) in the same buffer; item
 * 0 (padding) is out of the softmax, its gradient 0. Returns -log p_y.
 * The float build uses vec.h's exp and sums in SQ_LANES partial sums in a
 * fixed order (the same bits at every vector width; a row of items is
 * read three times while it is in cache). */
SQ_VEC static real R(ce_row)(real *restrict lr, int V1, int y, real g, int grad)
{
    real ly = lr[y], lmax[SQ_LANES];
    for (int l = 0; l < SQ_LANES; l++)
        lmax[l] = -FLT_MAX;
    int jm = 1;
    for (; jm + SQ_LANES <= V1; jm += SQ_LANES)
        for (int l = 0; l < SQ_LANES; l++)
            lmax[l] = lr[jm + l] > lmax[l] ? lr[jm + l] : lmax[l];
    for (; jm < V1; jm++)
        lmax[0] = lr[jm] > lmax[0] ? lr[jm] : lmax[0];
    real mx = lmax[0];
    for (int l = 1; l < SQ_LANES; l++)
        mx = lmax[l] > mx ? lmax[l] : mx;
    lr[0] = 0;
    real tail, lanes = R(exp_shift)(lr + 1, V1 - 1, mx, &tail);
    double sum = (double)lanes + tail;
    /* -log p_y = log sum_j exp(l_j - mx) + mx - l_y */
    real loss = (real)log(sum) + mx - ly;
    if (grad) {
        real inv = (real)(g / sum);
        #pragma omp simd
        for (int k = 1; k < V1; k++)
            lr[k] *= inv;
        lr[y] -= g;
    }
    return loss;
}

static double R(ce_full)(const sq_ctx *cx, real *dh, real *dE, real *dbias, real *scratch,
                         const real *h, const real *E, const real *bias, const int *rows,
                         const int *targets, int n, int C, int V1, int chunk, real dloss,
                         int *count)
{
    int cnt = 0;
    for (int i = 0; i < n; i++)
        cnt += targets[i] != 0;
    *count = cnt;
    if (cnt == 0)
        return 0;
    int grad = dh && dE;
    /* d(dloss * mean_i loss_i) / dlogit_ij = g (p_ij - [j = target_i]) */
    real g = dloss / (real)cnt;
    real *logits = scratch;                      /* [chunk, V1] */
    real *hc = logits + (size_t)chunk * V1;      /* [chunk, C] */
    real *dhc = hc + (size_t)chunk * C;          /* [chunk, C] */
    real *rowloss = dhc + (size_t)chunk * C;     /* [chunk] */
    double total = 0;
    for (int e0 = 0; e0 < n; e0 += chunk) {
        int m = n - e0 < chunk ? n - e0 : chunk; /* entries e0 .. e0+m-1 */
        /* Gather the rows of h: O(m C), nothing next to the GEMMs. Ignored
         * entries (rare: the batch builder lists real targets) ride along
         * with zero gradient. */
        for (int r = 0; r < m; r++) {
            int e = e0 + r;
            if (targets[e])
                memcpy(hc + (size_t)r * C, h + (size_t)(rows ? rows[e] : e) * C,
                       (size_t)C * sizeof *hc);
            else
                memset(hc + (size_t)r * C, 0, (size_t)C * sizeof *hc);
        }
        /* logits[m, V1] = hc[m, C] E[V1, C]^T */
        r_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, V1, C,
               1, hc, C, E, C, 0, logits, V1);
        if (bias) /* logits[r] += bias: the output bias of every item */
            for (int r = 0; r < m; r++)
                sq_axpy(logits + (size_t)r * V1, 1, bias, V1);
        /* Softmax over items 1..V1-1 in place, the loss, and (training)
         * dlogits in the same buffer. Item 0 (padding) is out of the
         * softmax: its probability and gradient are 0. */
        SQ_PAR_FOR(int, r, m, 1, {
            int y = targets[e0 + r];
            real *lr = logits + (size_t)r * V1;
            if (!y) {
                rowloss[r] = 0;
                memset(lr, 0, (size_t)V1 * sizeof *lr);
                continue;
            }
            rowloss[r] = R(ce_row)(lr, V1, y, g, grad);
        });
        for (int r = 0; r < m; r++) /* fixed order */
            total += rowloss[r];
        if (!grad)
            continue;
        if (dbias) /* d bias = the column sums of dlogits, rows in order */
            for (int r = 0; r < m; r++)
                sq_axpy(dbias, 1, logits + (size_t)r * V1, V1);
        /* dhc[m, C] = dlogits[m, V1] E[V1, C] */
        r_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, C, V1,
               1, logits, V1, E, C, 0, dhc, C);
        /* dE[V1, C] += dlogits^T[V1, m] hc[m, C] */
        r_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, V1, C, m,
               1, logits, V1, hc, C, 1, dE, C);
        /* scatter dhc back to the rows of h, entries in order */
        for (int r = 0; r < m; r++) {
            int e = e0 + r;
            if (!targets[e])
                continue;
            real *d = dh + (size_t)(rows ? rows[e] : e) * C;
            for (int c = 0; c < C; c++)
                d[c] += dhc[(size_t)r * C + c];
        }
    }
    return total / cnt;
}

double R(sq_ce_full)(const sq_ctx *cx, real *dh, real *dE, real *scratch,
                     const real *h, const real *E, const int *rows,
                     const int *targets, int n, int C, int V1, int chunk,
                     real dloss, int *count)
{
    SQ_ON_GPU_RET(cx, ce_full,
              (dh, dE, scratch, h, E, rows, targets, n, C, V1, chunk, dloss, count));
    return R(ce_full)(cx, dh, dE, NULL, scratch, h, E, NULL, rows, targets, n, C, V1, chunk,
                      dloss, count);
}

double R(sq_ce_full_bias)(const sq_ctx *cx, real *dh, real *dE, real *dbias,
                          real *scratch, const real *h, const real *E,
                          const real *bias, const int *rows, const int *targets,
                          int n, int C, int V1, int chunk, real dloss, int *count)
{
    SQ_ON_GPU_RET(cx, ce_full_bias,
              (dh, dE, dbias, scratch, h, E, bias, rows, targets, n, C, V1, chunk, dloss, count));
    return R(ce_full)(cx, dh, dE, dbias, scratch, h, E, bias, rows, targets, n, C, V1, chunk,
                      dloss, count);
}

/* ------------------------------------------------------------------------ */
/* 10. Sampled losses: BCE (10) and softmax cross-entropy (10b)             */

/* What varies between the sampled losses (10, 10b, 10c, 10d). */
typedef struct {
    int softmax;       /* 1: softmax over the positive and negatives; 0: BCE */
    int mask_hits;     /* a negative equal to the positive is left out */
    const real *bias;  /* per-item logit bias, or NULL; dbias its gradient */
    real *dbias;
    const float *lq;   /* softmax: subtracted from each negative's logit, or NULL */
    real beta;         /* BCE: the positive's weight (gBCE's beta; 1) */
    real scale;        /* each entry's loss times this (gBCE: 1 / (K + 1)) */
} R(samp_kind);

/* Logit of item x for entry h (the correction of slot k, k >= 0, taken off). */
static real R(samp_logit)(const R(samp_kind) *sk, const real *hi, const real *E, int x, int k,
                          int C)
{
    real s = sq_dot(hi, E + (size_t)x * C, C);
    if (sk->bias)
        s += sk->bias[x];
    if (k >= 0 && sk->lq)
        s -= (real)sk->lq[k];
    return s;
}

/* Whether slot k of an entry with positive p and negatives negi takes part. */
static int samp_used(int masked, int p, const int *negi, int k)
{
    return k < 0 || (negi[k] && !(masked && negi[k] == p));
}

/* log(e^s_p + sum_k e^s_k) over entry i's positive p and its negatives in
 * use, max-shifted online so that nothing overflows; *sp = s_p. */
static double R(sampled_lse)(const R(samp_kind) *sk, const real *hi, const real *E, int p,
                             const int *negi, const float *lqi, int K, int C, real *sp)
{
    R(samp_kind) k1 = *sk;
    k1.lq = lqi;
    *sp = R(samp_logit)(sk, hi, E, p, -1, C);
    double mx = *sp, sum = 1;
    for (int k = 0; k < K; k++) {
        if (!samp_used(sk->mask_hits, p, negi, k))
            continue;
        double s = R(samp_logit)(&k1, hi, E, negi[k], k, C);
        if (s > mx) {
            sum = sum * exp(mx - s) + 1;
            mx = s;
        } else {
            sum += exp(s - mx);
        }
    }
    return mx + log(sum);
}

/* The entry loop of every sampled loss (samp_kind says which).
 * Sequential: O(n (K+1) C) work, and the scatter into rows of E that
 * several entries share must be ordered to be deterministic. */
static double R(sampled_loss)(real *dh, real *dE, const real *h, const real *E,
                              const int *rows, const int *pos, const int *neg, int n, int K,
                              int C, real dloss, int *count, const R(samp_kind) *sk)
{
    int cnt = sq_count_targets(pos, n);
    *count = cnt;
    if (cnt == 0)
        return 0;
    int grad = dh && dE;
    real g = dloss * sk->scale / (real)cnt;
    double total = 0;
    R(samp_kind) ki = *sk;
    for (int i = 0; i < n; i++) {
        if (!pos[i])
            continue;
        const real *hi = h + (size_t)(rows ? rows[i] : i) * C;
        real *dhi = grad ? dh + (size_t)(rows ? rows[i] : i) * C : NULL;
        const int *negi = neg + (size_t)i * K;
        ki.lq = sk->lq ? sk->lq + (size_t)i * K : NULL;
        double lse = 0;
        if (sk->softmax) { /* -log softmax_p = lse - s_p */
            real sp;
            lse = R(sampled_lse)(sk, hi, E, pos[i], negi, ki.lq, K, C, &sp);
            total += lse - sp;
            if (!grad)
                continue;
        }
        for (int k = -1; k < K; k++) {
            if (!samp_used(sk->mask_hits, pos[i], negi, k))
                continue;
            int item = k < 0 ? pos[i] : negi[k];
            const real *e = E + (size_t)item * C;
            real s = R(samp_logit)(&ki, hi, E, item, k, C);
            /* BCE positive: -beta log sigmoid(s) = beta softplus(-s), d/ds =
             * beta (sigmoid(s) - 1); negative: -log(1 - sigmoid(s)) =
             * softplus(s), d/ds = sigmoid(s); softmax: d/ds = softmax(s) -
             * [positive] (a correction is a constant shift of s) */
            if (!sk->softmax)
                total += k < 0 ? sk->beta * sq_softplus(-s) : sq_softplus(s);
            if (!grad)
                continue;
            real p = sk->softmax ? (real)exp((double)s - lse) : sq_sigmoid(s);
            real ds = g * (p - (k < 0 ? (real)1 : (real)0));
            if (k < 0 && !sk->softmax)
                ds *= sk->beta;
            real *de = dE + (size_t)item * C;
            for (int c = 0; c < C; c++) {
                dhi[c] += ds * e[c];
                de[c] += ds * hi[c];
            }
            if (sk->dbias)
                sk->dbias[item] += ds;
        }
    }
    return total * sk->scale / cnt;
}

double R(sq_bce_sampled)(const sq_ctx *cx, real *dh, real *dE, const real *h,
                         const real *E, const int *rows, const int *pos,
                         const int *neg, int n, int K, int C, real dloss,
                         int *count)
{
    SQ_ON_GPU_RET(cx, bce_sampled, (dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count));
    (void)cx; /* sequential, see sampled_loss */
    R(samp_kind) sk = {.beta = 1, .scale = 1};
    return R(sampled_loss)(dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

double R(sq_ce_sampled)(const sq_ctx *cx, real *dh, real *dE, const real *h, const real *E,
                        const int *rows, const int *pos, const int *neg, int n, int K, int C,
                        real dloss, int *count)
{
    SQ_ON_GPU_RET(cx, ce_sampled, (dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count));
    (void)cx; /* sequential, see sampled_loss */
    R(samp_kind) sk = {.softmax = 1, .beta = 1, .scale = 1};
    return R(sampled_loss)(dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

double R(sq_ce_sampled_logq)(const sq_ctx *cx, real *dh, real *dE, real *dbias, const real *h,
                             const real *E, const real *bias, const int *rows, const int *pos,
                             const int *neg, const float *lq, int n, int K, int C, real dloss,
                             int *count)
{
    SQ_ON_GPU_RET(cx, ce_sampled_logq,
                  (dh, dE, dbias, h, E, bias, rows, pos, neg, lq, n, K, C, dloss, count));
    (void)cx; /* sequential, see sampled_loss */
    R(samp_kind) sk = {.softmax = 1, .mask_hits = 1, .bias = bias, .dbias = dbias, .lq = lq,
                       .beta = 1, .scale = 1};
    return R(sampled_loss)(dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

double R(sq_gbce_sampled)(const sq_ctx *cx, real *dh, real *dE, real *dbias, const real *h,
                          const real *E, const real *bias, const int *rows, const int *pos,
                          const int *neg, int n, int K, int C, real beta, real dloss,
                          int *count)
{
    SQ_ON_GPU_RET(cx, gbce_sampled,
                  (dh, dE, dbias, h, E, bias, rows, pos, neg, n, K, C, beta, dloss, count));
    (void)cx;
    R(samp_kind) sk = {.mask_hits = 1, .bias = bias, .dbias = dbias, .beta = beta,
                       .scale = (real)1 / (real)(K + 1)};
    return R(sampled_loss)(dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk);
}

/* ------------------------------------------------------------------------ */
/* 10e. The sampled losses of 10c and 10d over one shared set of negatives  */

/* Row r of the shared logits, lr[0, K) = h_r . E_neg[k] on entry, of an
 * entry with positive p and logit sp: its softmax loss (10c) and, with
 * grad, d loss / d logit times g in place (masked slots 0), *dsp the
 * positive's. add[k] = b_nk - lq[k]. Masked slots enter the max and the
 * exp as -FLT_MAX and leave as 0 before the sum, so they count nowhere. */
SQ_VEC static double R(shared_ssm_row)(real *restrict lr, const int *restrict neg,
                                       const real *restrict add, int K, int p, real sp,
                                       real g, int grad, real *dsp)
{
    #pragma omp simd
    for (int k = 0; k < K; k++)
        lr[k] = neg[k] && neg[k] != p ? lr[k] + add[k] : -FLT_MAX;
    real mx = sp;
    #pragma omp simd reduction(max : mx)
    for (int k = 0; k < K; k++)
        mx = lr[k] > mx ? lr[k] : mx;
    real tail;
    R(exp_shift)(lr, K, mx, &tail);
    #pragma omp simd
    for (int k = 0; k < K; k++)
        lr[k] = neg[k] && neg[k] != p ? lr[k] : 0;
    real ep = (real)exp((double)sp - mx);
    double sum = (double)R(vsum)(lr, K) + ep;
    double lse = mx + log(sum); /* -log softmax_p = lse - s_p */
    if (grad) {
        real inv = (real)(g / sum);
        #pragma omp simd
        for (int k = 0; k < K; k++)
            lr[k] *= inv;
        *dsp = g * ((real)(ep / sum) - 1);
    }
    return lse - sp;
}

/* log(1 + e) for e in [0, 1], vectorisable: 2 atanh(z), z = e / (2 + e)
 * in [0, 1/3], its series to z^13 (truncated below 2e-8 relative; in
 * float within 2.3e-7 of log1p over [0, 1]), and e^x by vec.h's exp. The
 * double build (the gradient checks): libm's. */
static inline real R(log1p_unit)(real e)
{
#if SQ_REAL_IS_F64
    return log1p(e);
#else
    real z = e / (2 + e), w = z * z;
    return 2 * z * (1 + w * (1.0f / 3 + w * (1.0f / 5 + w * (1.0f / 7 + w * (1.0f / 9 +
                    w * (1.0f / 11 + w * (1.0f / 13)))))));
#endif
}

static inline real R(vexp)(real x)
{
#if SQ_REAL_IS_F64
    return exp(x);
#else
    return sq_vexpf(x);
#endif
}

/* A negative of gBCE at *x (its logit less add on entry): returns its loss
 * softplus(s), *x = g sigmoid(s) its dlogit; both 0 when the slot is
 * masked (item 0 or the positive p). One exp for both. */
static inline real R(gbce_slot)(real *x, int item, int p, real add, real g)
{
    real s = *x + add, e = R(vexp)(-r_fabs(s));
    int used = item && item != p;
    *x = used ? g * (s >= 0 ? 1 : e) / (1 + e) : 0;
    return used ? (s > 0 ? s : 0) + R(log1p_unit)(e) : 0;
}

/* The same for gBCE (10d), before its 1 / (K + 1): beta softplus(-s_p) +
 * sum_k softplus(s_k), d/ds_k = sigmoid(s_k), d/ds_p = beta (sigmoid(s_p)
 * - 1); the sum in SQ_LANES partial sums (vsum): the same bits at every
 * vector width. */
SQ_VEC static double R(shared_gbce_row)(real *restrict lr, const int *restrict neg,
                                        const real *restrict add, int K, int p, real sp,
                                        real beta, real g, int grad, real *dsp)
{
    real acc[SQ_LANES] = {0}, tail = 0;
    int k = 0;
    for (; k + SQ_LANES <= K; k += SQ_LANES)
        for (int l = 0; l < SQ_LANES; l++)
            acc[l] += R(gbce_slot)(lr + k + l, neg[k + l], p, add[k + l], g);
    for (; k < K; k++)
        tail += R(gbce_slot)(lr + k, neg[k], p, add[k], g);
    if (grad)
        *dsp = g * beta * (sq_sigmoid(sp) - 1);
    return (double)(beta * sq_softplus(-sp)) + R(vsum)(acc, SQ_LANES) + tail;
}

/* The scratch of R(sampled_shared), carved from one buffer. */
typedef struct {
    real *En, *dEn;  /* E_neg [K, C], its gradient */
    real *add, *dbk; /* b_nk - lq[k] [K], the gradient of slot k's bias */
    real *S;         /* logits, then dlogits [chunk, K] */
    real *hc, *dhc;  /* gathered rows of h [chunk, C], their gradient */
    real *rowloss, *dsp; /* [chunk]: each row's loss, its positive's dlogit */
} R(shared_work);

static R(shared_work) R(shared_carve)(real *s, int chunk, int K, int C)
{
    size_t KC = (size_t)K * C, mC = (size_t)chunk * C;
    R(shared_work) w = {.En = s, .dEn = s + KC, .add = s + 2 * KC};
    w.dbk = w.add + K;
    w.S = w.dbk + K;
    w.hc = w.S + (size_t)chunk * K;
    w.dhc = w.hc + mC;
    w.rowloss = w.dhc + mC;
    w.dsp = w.rowloss + chunk;
    return w;
}

/* E_neg = the rows of the set, add = their bias less their correction;
 * the gradients' accumulators zeroed. */
static void R(shared_prepare)(R(shared_work) *w, const R(samp_kind) *sk, const real *E,
                              const int *neg, int K, int C)
{
    for (int k = 0; k < K; k++) {
        memcpy(w->En + (size_t)k * C, E + (size_t)neg[k] * C, (size_t)C * sizeof *w->En);
        w->add[k] = (sk->bias ? sk->bias[neg[k]] : 0) - (sk->lq ? (real)sk->lq[k] : 0);
    }
    memset(w->dEn, 0, (size_t)K * C * sizeof *w->dEn);
    memset(w->dbk, 0, (size_t)K * sizeof *w->dbk);
}

/* Entries e0 .. e0+m-1: gather their rows of h, S = hc E_neg^T, each
 * row's loss and (grad) dlogits in S. Returns the rows' loss sum. */
static double R(shared_chunk_fwd)(const sq_ctx *cx, R(shared_work) *w, const R(samp_kind) *sk,
                                  const real *h, const real *E, const int *rows,
                                  const int *pos, const int *neg, int e0, int m, int K, int C,
                                  real g, int grad)
{
    for (int r = 0; r < m; r++) {
        int e = e0 + r;
        if (pos[e])
            memcpy(w->hc + (size_t)r * C, h + (size_t)(rows ? rows[e] : e) * C,
                   (size_t)C * sizeof *w->hc);
        else /* rides along with zero gradient */
            memset(w->hc + (size_t)r * C, 0, (size_t)C * sizeof *w->hc);
    }
    /* S[m, K] = hc[m, C] E_neg[K, C]^T */
    r_gemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, K, C, 1, w->hc, C, w->En, C, 0, w->S,
           K);
    R(shared_work) wk = *w;
    SQ_PAR_FOR(int, r, m, 1, {
        int p = pos[e0 + r];
        real *lr = wk.S + (size_t)r * K;
        wk.dsp[r] = 0;
        if (!p) {
            wk.rowloss[r] = 0;
            memset(lr, 0, (size_t)K * sizeof *lr);
            continue;
        }
        real sp = sq_dot(wk.hc + (size_t)r * C, E + (size_t)p * C, C) +
                  (sk->bias ? sk->bias[p] : 0);
        wk.rowloss[r] = (real)(sk->softmax
            ? R(shared_ssm_row)(lr, neg, wk.add, K, p, sp, g, grad, &wk.dsp[r])
            : R(shared_gbce_row)(lr, neg, wk.add, K, p, sp, sk->beta, g, grad, &wk.dsp[r]));
    });
    double total = 0;
    for (int r = 0; r < m; r++) /* fixed order */
        total += w->rowloss[r];
    return total;
}

/* The backward of a chunk: dhc = dS E_neg + the positives' terms, added to
 * dh entry by entry; dE_neg += dS^T hc; the positives' rows of dE (and
 * dbias) entry by entry; the slots' bias gradients summed rows in order. */
static void R(shared_chunk_bwd)(R(shared_work) *w, const R(samp_kind) *sk, real *dh, real *dE,
                                const real *E, const int *rows, const int *pos, int e0, int m,
                                int K, int C)
{
    r_gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, C, K, 1, w->S, K, w->En, C, 0, w->dhc,
           C);
    r_gemm(CblasRowMajor, CblasTrans, CblasNoTrans, K, C, m, 1, w->S, K, w->hc, C, 1, w->dEn,
           C);
    for (int r = 0; r < m; r++) {
        int e = e0 + r, p = pos[e];
        if (!p)
            continue;
        real ds = w->dsp[r], *d = dh + (size_t)(rows ? rows[e] : e) * C;
        real *dhr = w->dhc + (size_t)r * C;
        const real *hr = w->hc + (size_t)r * C;
        sq_axpy(dhr, ds, E + (size_t)p * C, C);
        sq_axpy(d, 1, dhr, C);
        sq_axpy(dE + (size_t)p * C, ds, hr, C);
        if (sk->dbias) {
            sk->dbias[p] += ds;
            sq_axpy(w->dbk, 1, w->S + (size_t)r * K, K);
        }
    }
}

/* 10c/10d with neg[K] (and lq[K]) shared by the n entries: the logits
 * against the set are one GEMM a chunk of entries. Same loss and
 * gradients as R(sampled_loss) with the set in every row; sums are taken
 * in another order (rows in order, slots in order: deterministic). */
static double R(sampled_shared)(const sq_ctx *cx, real *dh, real *dE, const real *h,
                                const real *E, const int *rows, const int *pos, const int *neg,
                                int n, int K, int C, real dloss, int *count,
                                const R(samp_kind) *sk, real *scratch, int chunk)
{
    int cnt = sq_count_targets(pos, n);
    *count = cnt;
    if (cnt == 0)
        return 0;
    int grad = dh && dE;
    real g = dloss * sk->scale / (real)cnt;
    R(shared_work) w = R(shared_carve)(scratch, chunk, K, C);
    R(shared_prepare)(&w, sk, E, neg, K, C);
    double total = 0;
    for (int e0 = 0; e0 < n; e0 += chunk) {
        int m = n - e0 < chunk ? n - e0 : chunk;
        total += R(shared_chunk_fwd)(cx, &w, sk, h, E, rows, pos, neg, e0, m, K, C, g, grad);
        if (grad)
            R(shared_chunk_bwd)(&w, sk, dh, dE, E, rows, pos, e0, m, K, C);
    }
    if (grad) /* the set's rows into dE (and dbias), slots in order */
        for (int k = 0; k < K; k++) {
            if (!neg[k])
                continue;
            sq_axpy(dE + (size_t)neg[k] * C, 1, w.dEn + (size_t)k * C, C);
            if (sk->dbias)
                sk->dbias[neg[k]] += w.dbk[k];
        }
    return total * sk->scale / cnt;
}

double R(sq_ce_sampled_shared)(const sq_ctx *cx, real *dh, real *dE, real *dbias,
                               real *scratch, const real *h, const real *E, const real *bias,
                               const int *rows, const int *pos, const int *neg,
                               const float *lq, int n, int K, int C, int chunk, real dloss,
                               int *count)
{
    SQ_ON_GPU_RET(cx, ce_sampled_shared, (dh, dE, dbias, scratch, h, E, bias, rows, pos, neg,
                                          lq, n, K, C, chunk, dloss, count));
    R(samp_kind) sk = {.softmax = 1, .mask_hits = 1, .bias = bias, .dbias = dbias, .lq = lq,
                       .beta = 1, .scale = 1};
    return R(sampled_shared)(cx, dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk,
                             scratch, chunk);
}

double R(sq_gbce_sampled_shared)(const sq_ctx *cx, real *dh, real *dE, real *dbias,
                                 real *scratch, const real *h, const real *E, const real *bias,
                                 const int *rows, const int *pos, const int *neg, int n, int K,
                                 int C, int chunk, real beta, real dloss, int *count)
{
    SQ_ON_GPU_RET(cx, gbce_sampled_shared, (dh, dE, dbias, scratch, h, E, bias, rows, pos, neg,
                                            n, K, C, chunk, beta, dloss, count));
    R(samp_kind) sk = {.mask_hits = 1, .bias = bias, .dbias = dbias, .beta = beta,
                       .scale = (real)1 / (real)(K + 1)};
    return R(sampled_shared)(cx, dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count, &sk,
                             scratch, chunk);
}

/* ------------------------------------------------------------------------ */
/* 11. Memory                                                               */

void R(sq_zero)(const sq_ctx *cx, real *x, size_t n)
{
    SQ_ON_GPU(cx, zero, (x, n));
    (void)cx; /* one memset: memory-bound, nothing for threads to gain */
    if (n)
        memset(x, 0, n * sizeof *x);
}

void R(sq_scale)(const sq_ctx *cx, real *x, size_t n, real a)
{
    SQ_ON_GPU(cx, scale, (x, n, a));
    (void)cx; /* memory-bound, like the zeroing */
    for (size_t i = 0; i < n; i++)
        x[i] *= a;
}

void R(sq_copy)(const sq_ctx *cx, real *dst, const real *src, size_t n)
{
    SQ_ON_GPU(cx, copy, (dst, src, n));
    (void)cx;
    if (n)
        memcpy(dst, src, n * sizeof *dst);
}

void R(sq_fill2d)(const sq_ctx *cx, real *dst, int ld, int rows, int cols,
                  real v)
{
    SQ_ON_GPU(cx, fill2d, (dst, ld, rows, cols, v));
    SQ_PAR_FOR(int, r, rows, 1, {
        real *d = dst + (size_t)r * ld;
        for (int c = 0; c < cols; c++)
            d[c] = v;
    });
}

void R(sq_copy2d)(const sq_ctx *cx, real *dst, int ld_dst, const real *src,
                  int ld_src, int rows, int cols)
{
    SQ_ON_GPU(cx, copy2d, (dst, ld_dst, src, ld_src, rows, cols));
    if (cols <= 0)
        return;
    SQ_PAR_FOR(int, r, rows, 1, {
        memcpy(dst + (size_t)r * ld_dst, src + (size_t)r * ld_src,
               (size_t)cols * sizeof *dst);
    });
}

void R(sq_add2d)(const sq_ctx *cx, real *dst, int ld_dst, const real *src,
                 int ld_src, int rows, int cols)
{
    SQ_ON_GPU(cx, add2d, (dst, ld_dst, src, ld_src, rows, cols));
    SQ_PAR_FOR(int, r, rows, 1, {
        real *d = dst + (size_t)r * ld_dst;
        const real *s = src + (size_t)r * ld_src;
        for (int c = 0; c < cols; c++)
            d[c] += s[c];
    });
}

void R(sq_gather_rows)(const sq_ctx *cx, real *out, const real *in,
                       const int *rows, int n, int C)
{
    SQ_ON_GPU(cx, gather_rows, (out, in, rows, n, C));
    if (C <= 0)
        return;
    SQ_PAR_FOR(int, i, n, 1, {
        memcpy(out + (size_t)i * C, in + (size_t)(rows ? rows[i] : i) * C,
               (size_t)C * sizeof *out);
    });
}

void R(sq_scatter_add_rows)(const sq_ctx *cx, real *out, const real *in,
                            const int *rows, int n, int C)
{
    SQ_ON_GPU(cx, scatter_add_rows, (out, in, rows, n, C));
    /* Rows may repeat: column blocks in parallel, entries in order inside
     * each (as sq_embedding_backward), so every sum runs in i order. */
    SQ_PAR_FOR(int, c0, C, COL_BLOCK, {
        int c1 = c0 + COL_BLOCK < C ? c0 + COL_BLOCK : C;
        for (int i = 0; i < n; i++) {
            real *o = out + (size_t)(rows ? rows[i] : i) * C;
            const real *s = in + (size_t)i * C;
            for (int c = c0; c < c1; c++)
                o[c] += s[c];
        }
    });
}

void R(sq_scatter_rows)(const sq_ctx *cx, real *out, const real *in,
                        const int *rows, int n, int C)
{
    SQ_ON_GPU(cx, scatter_rows, (out, in, rows, n, C));
    if (C <= 0)
        return;
    SQ_PAR_FOR(int, i, n, 1, {
        memcpy(out + (size_t)rows[i] * C, in + (size_t)i * C, (size_t)C * sizeof *out);
    });
}

/* ------------------------------------------------------------------------ */
/* 12. GEMM                                                                 */

void R(sq_gemm)(const sq_ctx *cx, int trans_a, int trans_b, int M, int N,
                int K, real alpha, const real *A, int lda, const real *B,
                int ldb, real beta, real *Cm, int ldc)
{
    SQ_ON_GPU(cx, gemm, (trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc));
    (void)cx; /* OpenBLAS keeps its own thread count (sq_threads_set) */
    r_gemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
           trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B,
           ldb, beta, Cm, ldc);
}
