/* ops.h - the CPU ops of the transformer recommenders: forward/backward
 * pairs on flat arrays with explicit shapes (llm.c's train_gpt2.c style).
 *
 * PRECISION. Every op exists twice: `sq_op_forward` on float (the code that
 * trains) and `sq_op_forward_f64` on double (the same source compiled again,
 * see real.h; the unit tests finite-difference the double build). The
 * declarations below are written once over `real`/`R(name)` and expanded for
 * both types.
 *
 * PACKED LAYOUT. A batch of B sequences of lengths len[b] >= 1 is stored as
 * T = sum(len) token rows of width C, no padding rows:
 *
 *     off[b] = len[0] + ... + len[b-1]   (off has B+1 entries, off[B] = T)
 *     sequence b, step t (oldest first) is row off[b] + t, 0 <= t < len[b]
 *     activation x[T, C]: element (row, c) is x[row * C + c]
 *
 * Token-wise ops (embedding, layer norm, linear, GELU/ReLU, dropout,
 * residual) see only [T, C] and never touch padding. Attention works per
 * segment off[b] .. off[b+1]-1, so keys of other sequences and padding are
 * excluded by construction (= a key-padding mask). Learned positions use
 * pos[row] = (max_len - len[b]) + t, the SASRec left-padding convention in
 * which the newest item always sits at position max_len - 1
 * (sq_pack_positions fills it; a right-padded or random-pad convention is
 * just another pos array).
 *
 * Other layouts:
 *   embedding table  [V+1, C], row 0 = padding item, kept zero
 *   linear weight    W[OC, C] row-major (PyTorch nn.Linear), bias b[OC]
 *   q, k, v          rows of stride ld >= C (ld = C for separate arrays,
 *                    ld = 3C for a fused [T, 3C] qkv with k = q + C, ...);
 *                    head h owns columns h*hs .. h*hs+hs-1, C = H * hs
 *   attention cache  segment b, head h: a [len, len] row-major block of
 *                    probabilities at H * sum_{b'<b} len[b']^2 + h * len^2
 *                    (sq_attention_cache_size gives the total); causal
 *                    blocks hold 0 above the diagonal
 *   dropout mask     uint8 [T, C], 1 = kept
 *
 * CONVENTIONS. Every op takes the op context (ctx.h) first: its OpenMP
 * loops run on sq_ctx_threads(cx) threads, and its buffers are memory of
 * cx's backend (sq_ctx_alloc). Every _backward ADDS into its gradient
 * buffers (the caller zeroes them once per step), so a tensor used twice
 * accumulates both contributions; the exceptions, named _to, write their
 * input's gradient dinp (a backward's first contribution to it, with the
 * bits of a zeroed buffer added to, saving the zeroing and a read of it on
 * a GPU): sq_gelu_backward_to, sq_dropout_backward_to,
 * sq_relu_dropout_backward_to, sq_layernorm_backward_to,
 * sq_linear_backward_to (their parameters' gradients dw, db still added
 * to) and sq_attention_backward_to.
 * Forward ops may run in place (out == inp) where they are
 * element-wise: GELU, ReLU, dropout, residual, positional add. OpenMP loops
 * use fixed partitions and fixed-order sums: results are bitwise identical
 * for any thread count (GEMMs: OpenBLAS, deterministic for a fixed build).
 * Indices (ids, rows, targets, positions) are int and must be in range: the
 * batch builder validates them, the hot loops do not. */
#ifndef SQ_OPS_H
#define SQ_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

/* off[0..B] = exclusive prefix sum of len[0..B-1]; returns T = off[B]. */
int sq_pack_offsets(int *off, const int *len, int B);

/* pos[T]: pos[off[b] + t] = max_len - len[b] + t (needs len[b] <= max_len). */
void sq_pack_positions(int *pos, const int *off, int B, int max_len);

/* The sequence (segment) of packed row `row`: the last b with off[b] <= row
 * (empty segments skipped); binary search over off[0..B-1]. */
int sq_seg_of(const int *off, int B, int row);

/* Number of reals in the attention probability cache: H * sum(len^2). */
size_t sq_attention_cache_size(const int *off, int B, int H);

/* Entries per chunk of sq_ce_full for n entries over V1 logit columns: as
 * many as keep the chunk's logits in cache, at most n (at least 1). */
int sq_ce_chunk(int n, int V1);
/* The chunk for cx: sq_ce_chunk's on the CPU, on a GPU as many entries as
 * 2^26 logits hold (at most n): the models size their scratch and run
 * their loss with it. */
int sq_ce_chunk_on(const sq_ctx *cx, int n, int V1);

/* Number of reals of scratch sq_ce_full needs for a chunk of rows. */
size_t sq_ce_scratch_size(int chunk, int V1, int C);

/* Number of reals of scratch the shared-negative ops (10e) need for a
 * chunk of entries and K negatives of C dimensions. */
size_t sq_sampled_shared_scratch_size(int chunk, int K, int C);
/* Entries per chunk of the 10e ops for n entries when `have` reals of
 * scratch are there: the logits about 2^20 reals, as sq_ce_chunk, or what
 * fits; 0 when not even one entry fits (the caller takes 10c or 10d). */
int sq_sampled_shared_chunk(size_t have, int n, int K, int C);
/* The entries of n with a target (pos[i] != 0): a loss's mean divides by it. */
int sq_count_targets(const int *pos, int n);

/* The declarations, expanded once for float and once for double. */
#define SQ_TWICE "ops.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* 1. Embedding lookup: out[t] = scale * table[ids[t]] (scale = sqrt(C) for
 * SASRec's item embeddings, 1 otherwise); id 0 gives a zero row and never
 * receives gradient. out [T, C], table [V+1, C]. */
void R(sq_embedding_forward)(const sq_ctx *cx, real *out, const real *table,
                             const int *ids, int T, int C, real scale);
void R(sq_embedding_backward)(const sq_ctx *cx, real *dtable, const real *dout,
                              const int *ids, int T, int C, real scale);

/* 2. Learned positional embedding: out[t] = inp[t] + pe[pos[t]], pe [P, C].
 * dinp may be NULL (its gradient is dout's: a caller may read dout). */
void R(sq_posemb_forward)(const sq_ctx *cx, real *out, const real *inp,
                          const real *pe, const int *pos, int T, int C);
void R(sq_posemb_backward)(const sq_ctx *cx, real *dinp, real *dpe,
                           const real *dout, const int *pos, int T, int C);

/* 3. Layer norm over C: out = (x - mean) * rstd * w + b,
 * rstd = 1 / sqrt(var + eps) with the biased variance (PyTorch). eps: 1e-8
 * (SASRec TF), 1e-12 (RecBole), 1e-5 (PyTorch default). mean, rstd [T] are
 * the cache for backward. */
void R(sq_layernorm_forward)(const sq_ctx *cx, real *out, real *mean,
                             real *rstd, const real *inp, const real *w,
                             const real *b, int T, int C, real eps);
void R(sq_layernorm_backward)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                              const real *dout, const real *inp,
                              const real *w, const real *mean,
                              const real *rstd, int T, int C);
void R(sq_layernorm_backward_to)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                                 const real *dout, const real *inp, const real *w,
                                 const real *mean, const real *rstd, int T, int C);

/* 4. Linear: out[T, OC] = inp[T, C] W^T + b, W [OC, C]; b may be NULL.
 * Backward adds dinp = dout W, dW = dout^T inp, db = column sums of dout;
 * dinp, db may be NULL when not wanted. */
void R(sq_linear_forward)(const sq_ctx *cx, real *out, const real *inp,
                          const real *w, const real *b, int T, int C, int OC);
void R(sq_linear_backward)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                           const real *dout, const real *inp, const real *w,
                           int T, int C, int OC);
void R(sq_linear_backward_to)(const sq_ctx *cx, real *dinp, real *dw, real *db,
                              const real *dout, const real *inp, const real *w, int T, int C,
                              int OC);

/* 5. Activations on n elements: GELU (exact erf form) and ReLU. */
void R(sq_gelu_forward)(const sq_ctx *cx, real *out, const real *inp, size_t n);
void R(sq_gelu_backward)(const sq_ctx *cx, real *dinp, const real *dout,
                         const real *inp, size_t n);
void R(sq_gelu_backward_to)(const sq_ctx *cx, real *dinp, const real *dout, const real *inp,
                            size_t n);
void R(sq_relu_forward)(const sq_ctx *cx, real *out, const real *inp, size_t n);
void R(sq_relu_backward)(const sq_ctx *cx, real *dinp, const real *dout,
                         const real *inp, size_t n);

/* 6. Inverted dropout: out = inp * mask / (1 - p), 0 <= p < 1. The mask of
 * row t is drawn from the stream sq_rng_seed(seed, hash(step, site, t)), so
 * it depends only on (seed, step, site, t), never on the thread count; site
 * tells apart the dropouts of one step (e.g. layer * 8 + which). */
void R(sq_dropout_forward)(const sq_ctx *cx, real *out, uint8_t *mask,
                           const real *inp, int T, int C, real p, uint64_t seed,
                           uint64_t step, uint64_t site);
void R(sq_dropout_backward)(const sq_ctx *cx, real *dinp, const real *dout,
                            const uint8_t *mask, size_t n, real p);
/* The same into dinp rather than added to it: the bits of sq_zero then
 * sq_dropout_backward, dinp neither zeroed nor read first (the one op of
 * this file that writes its gradient; a backward's first contribution). */
void R(sq_dropout_backward_to)(const sq_ctx *cx, real *dinp, const real *dout,
                               const uint8_t *mask, size_t n, real p);
/* Dropout fused with its neighbour (the dropped tensor never written):
 * out = res + dropout(inp), and out = dropout(relu(inp)); the masks and
 * bits of sq_dropout_forward with sq_residual_forward after it, or
 * sq_relu_forward before it. The first's backward is the two ops'. */
void R(sq_dropout_add_forward)(const sq_ctx *cx, real *out, uint8_t *mask, const real *res,
                               const real *inp, int T, int C, real p, uint64_t seed,
                               uint64_t step, uint64_t site);
void R(sq_relu_dropout_forward)(const sq_ctx *cx, real *out, uint8_t *mask, const real *inp,
                                int T, int C, real p, uint64_t seed, uint64_t step,
                                uint64_t site);
/* Back through sq_relu_dropout_forward into dinp (written, not added to):
 * dinp = relu'(inp) dropout'(dout), the bits of sq_dropout_backward into a
 * zeroed array, then sq_relu_backward from it into another. */
void R(sq_relu_dropout_backward_to)(const sq_ctx *cx, real *dinp, const real *dout,
                                    const uint8_t *mask, const real *inp, size_t n, real p);

/* 7. Residual: out = a + b. */
void R(sq_residual_forward)(const sq_ctx *cx, real *out, const real *a,
                            const real *b, size_t n);
void R(sq_residual_backward)(const sq_ctx *cx, real *da, real *db,
                             const real *dout, size_t n);

/* 8. Multi-head scaled dot-product attention on packed segments:
 * out_i = sum_j softmax_j(q_i . k_j / sqrt(hs)) v_j per head, over keys
 * j <= i of the same segment (causal != 0) or all keys of the segment.
 * q, k, v (and dq, dk, dv) have row stride ld; out, dout [T, C]; att is the
 * probability cache (sq_attention_cache_size). Backward needs the forward
 * output `out` unchanged (it uses sum_j p_ij dp_ij = dout_i . out_i). */
void R(sq_attention_forward)(const sq_ctx *cx, real *out, real *att,
                             const real *q, const real *k, const real *v,
                             int ld, const int *off, int B, int H, int C,
                             int causal);
void R(sq_attention_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                              const real *dout, const real *out, const real *q,
                              const real *k, const real *v, const real *att,
                              int ld, const int *off, int B, int H, int C,
                              int causal);
/* The same, dq, dk, dv written (every head's columns of every row of the
 * segments: the bits of zeroing them first). */
void R(sq_attention_backward_to)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                 const real *dout, const real *out, const real *q,
                                 const real *k, const real *v, const real *att, int ld,
                                 const int *off, int B, int H, int C, int causal);

/* 8b. Segment mean: out[b] = (1 / len_b) sum of the rows off[b] ..
 * off[b+1]-1 of inp [T, C] (a segment of no rows gives a zero row); out
 * [B, C]. ELASTIC's mean-pooled query. The backward adds dout[b] / len_b to
 * each row of segment b. */
void R(sq_segmean_forward)(const sq_ctx *cx, real *out, const real *inp, const int *off,
                           int B, int C);
void R(sq_segmean_backward)(const sq_ctx *cx, real *dinp, const real *dout, const int *off,
                            int B, int C);

/* 9. Full-softmax cross-entropy over all items with tied embeddings, fused
 * with the logits GEMM. Entry i scores row rows[i] of h [*, C] (rows NULL:
 * row i) against target item targets[i] (0 = ignore); logits = h E^T over
 * E [V1 = V+1, C], item 0 excluded from the softmax. Returns the mean loss
 * over the *count non-ignored entries (0 when there are none) and, when dh
 * and dE are not NULL, adds the gradients of dloss * mean loss to dh and dE.
 * Works in chunks of `chunk` entries, so memory is O(chunk * V1): scratch
 * holds sq_ce_scratch_size(chunk, V1, C) reals. */
double R(sq_ce_full)(const sq_ctx *cx, real *dh, real *dE, real *scratch,
                     const real *h, const real *E, const int *rows,
                     const int *targets, int n, int C, int V1, int chunk,
                     real dloss, int *count);
/* The same with an output bias per item: logits = h E^T + bias [V1]
 * (BERT4Rec's); adds d loss / d bias to dbias (with dh and dE). */
double R(sq_ce_full_bias)(const sq_ctx *cx, real *dh, real *dE, real *dbias,
                          real *scratch, const real *h, const real *E,
                          const real *bias, const int *rows, const int *targets,
                          int n, int C, int V1, int chunk, real dloss, int *count);

/* 10. Binary cross-entropy with sampled negatives (original SASRec): for
 * entry i with positive item pos[i] != 0 and negatives neg[i*K .. i*K+K-1]
 * (0 = none), loss_i = -log sigmoid(h.E_pos) - sum_k log(1 - sigmoid(h.E_nk)),
 * averaged over the *count entries with pos != 0 (the TF SASRec loss; equal
 * to SASRec.pytorch's two BCEWithLogits means for K = 1). rows as in
 * sq_ce_full. Adds the gradients of dloss * loss to dh and dE (rows of the
 * table) when they are not NULL. */
double R(sq_bce_sampled)(const sq_ctx *cx, real *dh, real *dE, const real *h,
                         const real *E, const int *rows, const int *pos,
                         const int *neg, int n, int K, int C, real dloss,
                         int *count);

/* 10b. Sampled softmax cross-entropy (the sampled reading of a full
 * softmax): entry i with positive pos[i] != 0 and negatives
 * neg[i*K .. i*K+K-1] (0 = none) has loss_i = -log(e^s_p / (e^s_p +
 * sum_k e^s_k)), s = h[rows[i]] . E[item]; the mean over the *count entries
 * with pos != 0; rows as in sq_ce_full. A negative equal to the positive
 * counts as a term of its own. Adds the gradients of dloss * mean to dh and
 * dE when they are not NULL. Sequential, deterministic. */
double R(sq_ce_sampled)(const sq_ctx *cx, real *dh, real *dE, const real *h, const real *E,
                        const int *rows, const int *pos, const int *neg, int n, int K, int C,
                        real dloss, int *count);

/* 10c. Sampled softmax with the log-Q correction (--loss sampled-softmax):
 * entry i with positive p = pos[i] != 0 and negatives n_k = neg[i*K + k]
 * has logits s_p = h.E_p + b_p and s_k = h.E_nk + b_nk - lq[i*K + k] (b the
 * optional bias, lq = log(K Q(n_k)), sampler.h: the corrected logits of
 * sampled softmax, Bengio and Senecal; Blanc and Rendle 2018, the positive
 * uncorrected), and loss_i = -log(e^s_p / (e^s_p + sum_k e^s_k)) over the
 * negatives that are neither 0 nor p (accidental hits are masked); the
 * mean over the *count entries with pos != 0. Adds the gradients of dloss *
 * mean to dh, dE (and dbias when bias) when dh and dE are not NULL.
 * Sequential, deterministic. lq is a host array (the batch's): the GPU
 * twin (cuda/k_sampled.cu, as 10d and 10e's) uploads it. */
double R(sq_ce_sampled_logq)(const sq_ctx *cx, real *dh, real *dE, real *dbias, const real *h,
                             const real *E, const real *bias, const int *rows, const int *pos,
                             const int *neg, const float *lq, int n, int K, int C, real dloss,
                             int *count);

/* 10d. gBCE (Petrov and Macdonald, RecSys 2023, gSASRec eq. 7): loss_i =
 * (beta softplus(-s_p) + sum_k softplus(s_k)) / (K + 1), i.e. -(log
 * sigmoid(s_p)^beta + sum_k log(1 - sigmoid(s_k))) / (K + 1), over the
 * negatives that are neither 0 nor p, s = h.E + b as in 10c (no
 * correction); the mean over the entries with pos != 0. beta comes from
 * the calibration t (sq_gbce_beta). */
double R(sq_gbce_sampled)(const sq_ctx *cx, real *dh, real *dE, real *dbias, const real *h,
                          const real *E, const real *bias, const int *rows, const int *pos,
                          const int *neg, int n, int K, int C, real beta, real dloss,
                          int *count);

/* 10e. 10c and 10d over one set of negatives shared by every entry
 * (seqrec-train --neg-share batch): neg[K] and lq[K] stand for every row of
 * 10c's neg and lq. Loss and gradients those of 10c (10d) given the set in
 * every row (hits masked per entry, bias, correction, beta, 1 / (K + 1));
 * the logits against the set are one GEMM a chunk of `chunk` entries,
 * scratch holding sq_sampled_shared_scratch_size(chunk, K, C) reals. Sums
 * in a fixed order (rows, then slots in order): deterministic for a
 * thread count. */
double R(sq_ce_sampled_shared)(const sq_ctx *cx, real *dh, real *dE, real *dbias,
                               real *scratch, const real *h, const real *E, const real *bias,
                               const int *rows, const int *pos, const int *neg,
                               const float *lq, int n, int K, int C, int chunk, real dloss,
                               int *count);
double R(sq_gbce_sampled_shared)(const sq_ctx *cx, real *dh, real *dE, real *dbias,
                                 real *scratch, const real *h, const real *E, const real *bias,
                                 const int *rows, const int *pos, const int *neg, int n, int K,
                                 int C, int chunk, real beta, real dloss, int *count);

/* 11. Memory: the buffer moves that the model code needs between ops, so
 * that it never touches backend memory itself. 2-D views are `rows` rows
 * of `cols` reals, row r at p + r * ld; the source of a copy never overlaps
 * its destination. */

/* x[0, n) = 0. */
void R(sq_zero)(const sq_ctx *cx, real *x, size_t n);
/* x[0, n) *= a (a data-parallel rank's share of a gradient sum). */
void R(sq_scale)(const sq_ctx *cx, real *x, size_t n, real a);
/* dst[0, n) = src[0, n). */
void R(sq_copy)(const sq_ctx *cx, real *dst, const real *src, size_t n);
/* Every element of the view dst (row stride ld) = v. */
void R(sq_fill2d)(const sq_ctx *cx, real *dst, int ld, int rows, int cols,
                  real v);
/* dst = src (views of rows x cols); ld_src = 0 broadcasts the one row src
 * to every row of dst (a bias). */
void R(sq_copy2d)(const sq_ctx *cx, real *dst, int ld_dst, const real *src,
                  int ld_src, int rows, int cols);
/* dst += src, ld_src = 0 broadcasting one row as in sq_copy2d. */
void R(sq_add2d)(const sq_ctx *cx, real *dst, int ld_dst, const real *src,
                 int ld_src, int rows, int cols);

/* Row gather: out row i = in row rows[i] (rows NULL: row i), i < n, rows
 * of C reals; and its backward, the scatter-add out row rows[i] += in row
 * i. Rows listed twice accumulate, each element in i order (deterministic,
 * whatever the thread count). */
void R(sq_gather_rows)(const sq_ctx *cx, real *out, const real *in,
                       const int *rows, int n, int C);
void R(sq_scatter_add_rows)(const sq_ctx *cx, real *out, const real *in,
                            const int *rows, int n, int C);
/* Row scatter, the gather undone: out row rows[i] = in row i, i < n, the
 * rows distinct (a GPU writes them at once). Unlisted rows keep theirs. */
void R(sq_scatter_rows)(const sq_ctx *cx, real *out, const real *in,
                        const int *rows, int n, int C);

/* 12. GEMM, row-major, the semantics of cblas_?gemm(CblasRowMajor, ...):
 * Cm[M, N] = alpha op(A) op(B) + beta Cm, op(X) = X^T when trans_X != 0;
 * A is [M, K] (trans_a: [K, M]) of row stride lda, B [K, N] (trans_b:
 * [N, K]) of stride ldb, Cm of stride ldc. beta = 0 ignores Cm's contents. */
void R(sq_gemm)(const sq_ctx *cx, int trans_a, int trans_b, int M, int N,
                int K, real alpha, const real *A, int lda, const real *B,
                int ldb, real beta, real *Cm, int ldc);

#endif
