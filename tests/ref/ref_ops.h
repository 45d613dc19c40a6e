/* ref_ops.h - naive references of the ops, for the tests (llm.c's habit:
 * every kernel beside a plain CPU version of itself).
 *
 * Each function is the definition in the op's header comment (ops.h and the
 * other lib/ops headers) written as the simplest loops: double (some in long
 * double, where a test compares at 1e-12 against sums of exps), no blocking,
 * no BLAS, no chunks, no threads, no fused passes, explicit masks where the
 * op skips work by construction. Only forwards (and the optimiser's update,
 * which has no gradient to check): the backwards are checked against finite
 * differences of the op's own double build (gradcheck.h), and the forward
 * against these. Arguments mean what they mean for the op; out is
 * overwritten unless the op's forward adds (ref_dwconv).
 *
 * A new op adds its reference here and a row to the table of
 * tests/unit/test_ops.c (HACKING.md, "Adding an op"). */
#ifndef SQ_REF_OPS_H
#define SQ_REF_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "adam.h"
#include "attn_linear.h"

/* ops.h 1: out[t] = scale * table[ids[t]], id 0 a zero row. */
void ref_embedding(double *out, const double *table, const int *ids, int T, int C,
                   double scale);

/* ops.h 2: out[t] = inp[t] + pe[pos[t]]. */
void ref_posemb(double *out, const double *inp, const double *pe, const int *pos, int T,
                int C);

/* ops.h 3: out = (x - mean) / sqrt(var + eps) * w + b per row, the biased
 * variance. */
void ref_layernorm(double *out, const double *inp, const double *w, const double *b, int T,
                   int C, double eps);

/* ops.h 4: out[t, o] = b[o] + sum_c inp[t, c] W[o, c]; b may be NULL. */
void ref_linear(double *out, const double *inp, const double *w, const double *b, int T,
                int C, int OC);

/* ops.h 5: x Phi(x) with the erf, and max(x, 0). */
void ref_gelu(double *out, const double *inp, size_t n);
void ref_relu(double *out, const double *inp, size_t n);

/* ops.h 6 with a given mask: out = inp * mask / (1 - p). */
void ref_dropout(double *out, const double *inp, const uint8_t *mask, size_t n, double p);

/* ops.h 7: out = a + b. */
void ref_residual(double *out, const double *a, const double *b, size_t n);

/* ops.h 8: softmax attention, every query against every row of the batch
 * with an explicit mask (same segment; j <= i when causal). */
void ref_attention(double *out, const double *q, const double *k, const double *v, int ld,
                   const int *off, int B, int H, int C, int causal);

/* ops.h 9: the mean over the entries with a target of log sum_{j >= 1}
 * e^l_j - l_target, l_j = h[row] . E[j] (+ bias[j]; bias may be NULL);
 * *count the entries with a target. */
double ref_ce_full(const double *h, const double *E, const double *bias, const int *rows,
                   const int *targets, int n, int C, int V1, int *count);

/* ops.h 10: TF SASRec's loss, -log sigmoid written literally. */
double ref_bce_sampled(const double *h, const double *E, const int *rows, const int *pos,
                       const int *neg, int n, int K, int C, int *count);

/* ops.h 10b: -log(e^s_p / (e^s_p + sum_k e^s_k)), in long double. */
double ref_ce_sampled(const double *h, const double *E, const int *rows, const int *pos,
                      const int *neg, int n, int K, int C, int *count);

/* ops.h 10c: -log(e^s_p / (e^s_p + sum_k e^(s_k - lq_k))), s = h . E_item
 * + bias_item (bias may be NULL), the sum over negatives neither 0 nor the
 * positive; in long double. */
double ref_ce_sampled_logq(const double *h, const double *E, const double *bias,
                           const int *rows, const int *pos, const int *neg, const float *lq,
                           int n, int K, int C, int *count);

/* ops.h 10d: -(log(sigmoid(s_p)^beta) + sum_k log(1 - sigmoid(s_k))) / (K +
 * 1), written literally (the power, then its log), negatives as in 10c. */
double ref_gbce_sampled(const double *h, const double *E, const double *bias, const int *rows,
                        const int *pos, const int *neg, int n, int K, int C, double beta,
                        int *count);

/* ops.h 11: out row i = in row rows[i] (rows NULL: row i); and out row
 * rows[i] += in row i. */
void ref_gather_rows(double *out, const double *in, const int *rows, int n, int C);
void ref_scatter_add_rows(double *out, const double *in, const int *rows, int n, int C);

/* ops.h 12: Cm = alpha op(A) op(B) + beta Cm (beta = 0: Cm not read). */
void ref_gemm(int trans_a, int trans_b, int M, int N, int K, double alpha, const double *A,
              int lda, const double *B, int ldb, double beta, double *Cm, int ldc);

/* infonce.h: mean over the 2U anchors of -log of the positive's share among
 * the other 2U - 1 (cosine: of the normalised rows; label (may be NULL):
 * less the views of other pairs with the anchor's label). */
double ref_infonce(const double *h, const int *ra, const int *rb, int U, int C, double tau,
                   int cosine, const int *label);

/* bkl.h: mean over the pairs of 1/2 sum_x (P - Q)(log P - log Q), both
 * distributions in long double (cand NULL: items 1..V1-1). */
double ref_bkl(const double *h, const double *E, const int *ra, const int *rb,
               const int *cand, int S, int n, int C, int V1);

/* attn_cross.h: out [Tq, C] and the probability cache in its documented
 * layout, in long double (key segments of at most 64 rows). */
void ref_attn_cross(double *out, double *att, const double *q, int ldq, const int *offq,
                    const double *k, const double *v, int ldk, const int *offk, int B, int H,
                    int C);

/* attn_linear.h: for every query the explicit row of scores over the keys
 * it sees, in long double (segments of at most REF_LATTN_MAXL rows). */
#define REF_LATTN_MAXL 128
#define REF_LATTN_MAXHS 256 /* and heads of at most this many columns */
void ref_lattn(sq_lattn_kind kind, double *out, const double *q, const double *k,
               const double *v, int ld, const int *off, int B, int H, int C, int causal);

/* attn_silu.h: out_i^h = sum_{j <= i} scale silu(q_i^h . k_j^h + rab[h, i - j])
 * v_j^h over the rows j of i's segment, one element at a time. */
void ref_attn_silu(double *out, const double *q, const double *k, const double *v, int ld,
                   const double *rab, const int *off, int B, int H, int dqk, int dv,
                   int max_len, double scale);

/* attn_silu.h's SiLU on a view: out[r ld + c] = x / (1 + e^-x) of x[r ld + c]
 * for r < rows, c < cols (the view's other elements untouched); and the
 * gate: out[r cols + c] = a[r lda + c] b[r ldb + c]. */
void ref_silu(double *out, const double *x, int ld, int rows, int cols);
void ref_gate(double *out, const double *a, int lda, const double *b, int ldb, int rows,
              int cols);

/* gru.h: h of every row from PyTorch's gate equations, one sequence after
 * another from h = 0 (bi, bh may be NULL). */
void ref_gru(double *h, const double *x, const double *wi, const double *wh, const double *bi,
             const double *bh, const int *off, int B, int In, int H);

/* conv.h: out[i, (h-1) F + f] = relu(max_p a), arg the first p of the max
 * (-1 when it is <= 0); and out[i, f C + c] = b[f] + sum_k w[f, k] x[i, k, c]
 * (b NULL: no bias). */
void ref_hconv(double *out, int ldo, int *arg, const double *x, const double *w,
               const double *b, int n, int L, int C, int F);
void ref_vconv(double *out, int ldo, const double *x, const double *w, const double *b, int n,
               int L, int C, int F);

/* dwconv.h: out[t, c] += b[c] + sum_k w[k, c] x[t + k - lo, c] over the
 * rows of t's segment (b may be NULL). */
void ref_dwconv(double *out, const double *x, int ld, const double *w, const double *b, int K,
                const int *off, int B, int C, int causal);

/* attn_pos.h 1: positional (PARec): for every query row i and head h,
 * out_i[h cols] = sum_j softmax_j(Rw[h, p_i, p_j] / sqrt(hs)) v_j[h cols],
 * the softmax over every row j of the batch with an explicit mask (same
 * segment; p_j <= p_i when causal), p = pos. */
void ref_pa(double *out, const double *Rw, const double *v, int ld, const int *off,
            const int *pos, int B, int H, int C, int max_len, int causal);

/* attn_pos.h 2: fpositional (FPARec): positional at Rw[h] = R1[h] R2[h]^T,
 * R1, R2 [H, max_len, k]. */
void ref_fpa(double *out, const double *R1, const double *R2, int k, const double *v, int ld,
             const int *off, const int *pos, int B, int H, int C, int max_len, int causal);

/* attn_pos.h 3: the fixed patterns (kind SQ_ATTN_AVERAGE, _LINEAR_ANNEAL or
 * _EXP_ANNEAL): out_i = sum_j a_ij v_j / sum_j a_ij over the allowed rows j
 * (masked as ref_pa), a_ij from the header's table. */
void ref_fixed(double *out, const double *v, int ld, const int *off, const int *pos, int B,
               int C, int max_len, int kind, double decay, int causal);

/* attn_pos.h 4: token mixing, per channel c: u_t = b1[p_t] + sum_j W1[p_t,
 * p_j] x_j, out_i = b2[p_i] + sum_t W2[p_i, p_t] gelu(u_t) (erf GELU), t
 * and j over the allowed rows (masked as ref_pa). */
void ref_mixing(double *out, const double *x, int ld, const double *W1, const double *b1,
                const double *W2, const double *b2, const int *off, const int *pos, int B,
                int C, int max_len, int causal);

/* l2norm.h: out_t = s x_t / max(|x_t|, eps), norm_t = |x_t|. */
void ref_l2norm(double *out, double *norm, const double *x, int T, int C, double s, double eps);

/* attnpool.h: alpha the softmax of score over each sequence's rows (score
 * NULL: 1 / len), out_b = sum_t alpha_t x_t (zeros for an empty sequence). */
void ref_attnpool(double *out, double *alpha, const double *score, const double *x,
                  const int *off, int B, int C);

/* ops.h segmean: out_b = the mean of segment b's rows (zeros when empty). */
void ref_segmean(double *out, const double *x, const int *off, int B, int C);

/* pkm.h: for each query the k best of all n*n full keys q . [C1_i, C2_j]
 * by brute force (score descending, then expert index ascending) into idx,
 * and out[b, m] = w_m E[idx_m] (w = softmax of the k scores; 1 unweighted). */
void ref_pkm(double *out, int *idx, const double *q, const double *C1, const double *C2,
             const double *E, int B, int n, int d, int k, int weighted);

/* adam.h: one update at step t, the three formulas of sq_adam_update's
 * comment (PyTorch's Adam / AdamW) on param, m, v in place; and the L2
 * norm, and the global-norm clipping (g scaled by max_norm / (norm + 1e-6)
 * when max_norm > 0 and the finite norm exceeds it), returning the norm. */
void ref_adam(double *param, const double *grad, double *m, double *v, size_t n,
              const sq_adam_cfg *cfg, long t);
double ref_grad_norm(const double *g, size_t n);
double ref_grad_clip(double *g, size_t n, double max_norm);

#endif
