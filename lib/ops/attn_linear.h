/* attn_linear.h - linear-complexity attention kernels: LinRec, linear
 * (elu+1), efficient (row/column softmax) and Hydra, forward and backward.
 *
 * These replace only the score-softmax-value part of sq_attention_forward:
 * inputs q, k, v (rows of stride ld, head h owns columns h*hs .. h*hs+hs-1,
 * C = H * hs), output out [T, C], packed segments off[0..B] (ops.h). Every
 * kind has a bidirectional form (all keys of the segment) and a causal form
 * (keys j <= t for query t, by prefix sums). No kind ever forms a len x len
 * matrix: per (segment, head) the work is a sweep over the rows with an
 * hs x hs running state.
 *
 * NOTATION. Per segment of length L and head h, with rows t, j = 0 .. L-1
 * and q_t, k_j, v_j in R^hs the head's slices; a, e index key/value
 * features; K(t) = {j <= t} (causal) or {0 .. L-1} (bidirectional) is the
 * set of keys query t sees, and N(t) = |K(t)| (t + 1 or L);
 * elu(x) = x (x > 0), e^x - 1 (x <= 0); eps = SQ_LATTN_EPS = 1e-12 unless
 * stated. eps is added to every squared L2 norm, x / sqrt(|x|^2 + eps), so
 * each normalisation is smooth everywhere and maps a zero vector to 0; the
 * backward differentiates this exact form (the published LinRec code has no
 * eps; at |x|^2 ~ 1 the difference is ~1e-12 relative).
 *
 * linrec (LinRec, Liu et al. 2023, eq. 9):
 *     qh_t = c_q elu(q_t) / sqrt(|elu(q_t)|^2 + eps)          (row L2 norm)
 *     kh_j[a] = c_k(t) elu(k_j[a]) / sqrt(z_t[a] + eps),
 *         z_t[a] = sum_{j in K(t)} elu(k_j[a])^2       (column L2 norm over
 *                                                        the keys t sees)
 *     out_t = sum_{j in K(t)} (qh_t . kh_j) v_j
 *           = c_k(t) (qh_t (/) sqrt(z_t + eps))^T S_t     ((/): elementwise)
 *         S_t = sum_{j in K(t)} elu(k_j) v_j^T              (hs x hs)
 *   Scaling (sq_linrec_scale): SQ_LINREC_CODE (the published code, default):
 *   c_q = 1/sqrt(hs), c_k = 1 (a 1/sqrt(hs) on the product);
 *   SQ_LINREC_PAPER (eq. 6/9): c_q = 1/sqrt(hs) (rows: 1/(sqrt(d)|Q_i|)),
 *   c_k(t) = 1/sqrt(N(t)) (columns: 1/(sqrt(N)|K_j|)); N(t) = L in the
 *   bidirectional form and t + 1 in the causal one, so that a causal output
 *   never depends on how many later rows the segment has.
 *   Variants (sq_linrec_variant; the ablations of the paper's Figure 4,
 *   one kernel with two switches, either scaling):
 *     SQ_LINREC_FULL    the above;
 *     SQ_LINREC_NO_L2   "w/o L2 norm": no row or column normalisation,
 *                       qh_t = c_q elu(q_t), kh_j = c_k(t) elu(k_j): the
 *                       scores are unbounded (the paper's point); the cache
 *                       then holds ones;
 *     SQ_LINREC_NO_ELU  "w/o ELU": elu replaced by the identity, the L2
 *                       normalisations applied to the raw q_t and k_j.
 *   Time O(T C hs), extra memory O(T C + H hs^2).
 *
 * linear (Katharopoulos et al. 2020), phi(x) = elu(x) + 1 > 0:
 *     out_t = phi(q_t)^T S_t / (phi(q_t) . z_t + eps_den),
 *     S_t = sum_{j in K(t)} phi(k_j) v_j^T,  z_t = sum_{j in K(t)} phi(k_j),
 *   eps_den = SQ_LATTN_EPS_DEN = 1e-6 (as in fast-transformers).
 *   Time O(T C hs), extra memory O(T C + H hs^2).
 *
 * efficient (Shen et al. 2021):
 *     p_t = softmax_a(q_t)                      (over the head's features)
 *     s_j^(t)[a] = exp(k_j[a]) / sum_{i in K(t)} exp(k_i[a])
 *                                (over the keys t sees, per feature column)
 *     out_t = sum_a p_t[a] sum_{j in K(t)} s_j^(t)[a] v_j.
 *   The causal form keeps per column a running max m, the sum
 *   Z = sum exp(k_j - m) and S = sum exp(k_j - m) v_j^T and rescales both by
 *   exp(m_old - m_new) when m grows (online softmax): every exp has a
 *   non-positive argument, so logits of any size are safe; backward sweeps
 *   back with factors exp(lse_t - lse_{t+1}) <= 1, lse_t = m_t + log Z_t.
 *   Time O(T C hs), extra memory O(T C + H hs^2).
 *
 * hydra (Hydra attention, Bolya et al. 2022; HydraRec): cosine kernel with
 * phi normalising each token's WHOLE feature vector over all C columns (all
 * heads together, as the Hydra code does before splitting heads):
 *     phi(x_t) = x_t / sqrt(|x_t|^2 + eps)              (|.| over C)
 *     out_t,h = phi(q_t)_h^T sum_{j in K(t)} phi(k_j)_h v_j,h^T
 *   per head h, no normaliser, no scaling. With H = C (hs = 1, the HydraRec
 *   setting) this is out_t = phi(q_t) (.) sum_{j in K(t)} phi(k_j) (.) v_j
 *   elementwise. (A per-head norm would make every entry +-1 at hs = 1.)
 *   Time O(T C hs) = O(T C) for H = C, extra memory O(T C + H hs^2).
 *
 * BUFFERS. No function allocates. The caller provides
 *   cache    sq_lattn_cache_size(kind, off, B, H, C) reals, written by the
 *            forward and read by the backward (must be left unchanged):
 *              linrec     T*C (1/sqrt(z_t[a] + eps)) + T*H (1/|elu(q_t)|)
 *              linear     T*H (1 / denominator)
 *              efficient  T*C (lse_t[a])
 *              hydra      2*T (1/|q_t|, 1/|k_t|)
 *   scratch  sq_lattn_scratch_size(kind, off, B, H, C) reals, free between
 *            calls (forward and backward may share one):
 *              r*T*C (r = 2 for hydra, else 1; row buffers of backward)
 *              + G*H*(2 hs^2 + 6 hs), G = min(B, SQ_LATTN_GROUPS)
 *            The G*H slots hold the running states: work item (g, h) does
 *            head h of segments g, g+G, g+2G, ... in order, so the results
 *            do not depend on the thread count (parallelism is over these
 *            G*H items: one long segment with H = 1 runs on one thread;
 *            below ~16k multiply-adds an op does not fork at all).
 * Both are O(T C + H hs^2) = O(T C + C^2): never len^2.
 *   On a GPU context the scratch is sq_lattn_gpu_scratch_size(kind, off,
 *   B, H, C) reals instead: the row buffers, then room for the larger of
 *   the G*H slots and a state per piece and head, a piece being
 *   SQ_LATTN_GPU_PIECE rows of a segment from its start. The GPU's chunked
 *   forms (cuda/k_lchunk.cu, k_echunk.cu) run the pieces of a long segment
 *   on separate blocks, each from the sum of the earlier (or, backward,
 *   the later) pieces' states; O(T C hs / SQ_LATTN_GPU_PIECE) more.
 *
 * CONVENTIONS (ops.h): backward ADDS into dq, dk, dv (stride ld, like q,
 * k, v); it needs the forward's cache and the same q, k, v; it does not read
 * out. Every op exists for float and, with the _f64 suffix, for double. */
#ifndef SQ_ATTN_LINEAR_H
#define SQ_ATTN_LINEAR_H

#include <stddef.h>

#include "ctx.h"

#define SQ_LATTN_EPS 1e-12     /* added to squared L2 norms */
#define SQ_LATTN_EPS_DEN 1e-6  /* added to the linear kind's denominator */
#define SQ_LATTN_GROUPS 32     /* segment groups = state slots per head */

typedef enum {
    SQ_LINREC_CODE = 0, /* 1/sqrt(hs) on the product (published code) */
    SQ_LINREC_PAPER = 1 /* + key columns 1/sqrt(N) (paper eq. 6) */
} sq_linrec_scale;

typedef enum {
    SQ_LINREC_FULL = 0,  /* elu, rows and columns L2-normalised (eq. 9) */
    SQ_LINREC_NO_L2 = 1, /* ablation: elu, no L2 normalisation */
    SQ_LINREC_NO_ELU = 2 /* ablation: L2 normalisation of the raw q, k */
} sq_linrec_variant;

typedef enum {
    SQ_LATTN_LINREC = 0,    /* linrec, SQ_LINREC_CODE scaling */
    SQ_LATTN_LINREC_PAPER,  /* linrec, SQ_LINREC_PAPER scaling */
    SQ_LATTN_LINEAR,
    SQ_LATTN_EFFICIENT,
    SQ_LATTN_HYDRA,
    /* linrec's ablations (sq_linrec_variant), code and paper scaling */
    SQ_LATTN_LINREC_NO_L2,
    SQ_LATTN_LINREC_NO_L2_PAPER,
    SQ_LATTN_LINREC_NO_ELU,
    SQ_LATTN_LINREC_NO_ELU_PAPER
} sq_lattn_kind;

/* The kind of linrec with this scaling and variant, and back: whether kind
 * is a linrec kind, and then its scaling and variant (either may be NULL). */
sq_lattn_kind sq_lattn_linrec(sq_linrec_scale scale, sq_linrec_variant variant);
int sq_lattn_is_linrec(sq_lattn_kind kind, sq_linrec_scale *scale,
                       sq_linrec_variant *variant);

/* Reals of the forward->backward cache and of the scratch (see BUFFERS). */
size_t sq_lattn_cache_size(sq_lattn_kind kind, const int *off, int B, int H,
                           int C);
size_t sq_lattn_scratch_size(sq_lattn_kind kind, const int *off, int B,
                             int H, int C);

/* The GPU's scratch (see BUFFERS; SQ_LATTN_GPU_PIECE is gpu_ops.h's): the
 * pieces counted by the bound (T + (P - 1) B) / P, whatever the split. */
size_t sq_lattn_gpu_scratch_size(sq_lattn_kind kind, const int *off, int B,
                                 int H, int C);

#define SQ_TWICE "attn_linear.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

void R(sq_linrec_forward)(const sq_ctx *cx, real *out, real *cache,
                          real *scratch, const real *q, const real *k,
                          const real *v, int ld, const int *off, int B, int H,
                          int C, int causal, sq_linrec_scale scale,
                          sq_linrec_variant variant);
void R(sq_linrec_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                           real *scratch, const real *dout, const real *q,
                           const real *k, const real *v, const real *cache,
                           int ld, const int *off, int B, int H, int C,
                           int causal, sq_linrec_scale scale,
                           sq_linrec_variant variant);

void R(sq_linear_attn_forward)(const sq_ctx *cx, real *out, real *cache,
                               real *scratch, const real *q, const real *k,
                               const real *v, int ld, const int *off, int B,
                               int H, int C, int causal);
void R(sq_linear_attn_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                real *scratch, const real *dout, const real *q,
                                const real *k, const real *v, const real *cache,
                                int ld, const int *off, int B, int H, int C,
                                int causal);

void R(sq_efficient_attn_forward)(const sq_ctx *cx, real *out, real *cache,
                                  real *scratch, const real *q, const real *k,
                                  const real *v, int ld, const int *off, int B,
                                  int H, int C, int causal);
void R(sq_efficient_attn_backward)(const sq_ctx *cx, real *dq, real *dk,
                                   real *dv, real *scratch, const real *dout,
                                   const real *q, const real *k, const real *v,
                                   const real *cache, int ld, const int *off,
                                   int B, int H, int C, int causal);

void R(sq_hydra_attn_forward)(const sq_ctx *cx, real *out, real *cache,
                              real *scratch, const real *q, const real *k,
                              const real *v, int ld, const int *off, int B,
                              int H, int C, int causal);
void R(sq_hydra_attn_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                               real *scratch, const real *dout, const real *q,
                               const real *k, const real *v, const real *cache,
                               int ld, const int *off, int B, int H, int C,
                               int causal);

/* Dispatch on kind (for the model code: one call site per direction). */
void R(sq_lattn_forward)(const sq_ctx *cx, sq_lattn_kind kind, real *out,
                         real *cache, real *scratch, const real *q,
                         const real *k, const real *v, int ld, const int *off,
                         int B, int H, int C, int causal);
void R(sq_lattn_backward)(const sq_ctx *cx, sq_lattn_kind kind, real *dq,
                          real *dk, real *dv, real *scratch, const real *dout,
                          const real *q, const real *k, const real *v,
                          const real *cache, int ld, const int *off, int B,
                          int H, int C, int causal);

#endif
