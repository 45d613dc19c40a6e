/* attn_silu.h - HSTU's pointwise aggregated attention (Zhai et al. 2024,
 * "Actions Speak Louder than Words", Eq. 2) and the two element-wise ops
 * around it (SiLU, the gate by U).
 *
 * SETTING. The packed layout of ops.h: segment b is rows off[b] ..
 * off[b+1]-1, L_b = its length <= max_len. q, k, v are rows of stride ld
 * (a fused [T, ld] buffer, as HSTU's one U V Q K projection gives); head h
 * owns columns h*qk_dim .. (h+1)*qk_dim-1 of q and k and h*v_dim ..
 * (h+1)*v_dim-1 of v. out is [T, H v_dim] (stride H v_dim). For rows i >= j of one segment, the
 * relative distance is d = i - j (0 <= d < L_b <= max_len) and
 *     s^h_ij = q_i^h . k_j^h + rab[h, d]
 *     a^h_ij = scale * silu(s^h_ij),            silu(x) = x sigmoid(x)
 *     out_i^h = sum_{j <= i} a^h_ij v_j^h
 * Causal by construction (row i reads rows j <= i of its own segment), no
 * softmax, no 1/sqrt(qk_dim): the weights are pointwise, and `scale` is the
 * normalisation (HSTU's code divides by the fixed padded length N of its
 * dense batches; the model passes 1 / max_len). rab [H, max_len] is the
 * learned relative position bias rab^p of the paper, one weight per head
 * and distance (the time buckets rab^t need timestamps: not here).
 *
 * Backward (dout given): with da_ij = dout_i . v_j and
 * ds_ij = scale * silu'(s_ij) da_ij, silu'(x) = sg (1 + x (1 - sg)),
 * sg = sigmoid(x):
 *     dv_j += sum_i a_ij dout_i,  dq_i += sum_j ds_ij k_j,
 *     dk_j += sum_i ds_ij q_i,    drab[h, d] += sum_{i - j = d} ds_ij.
 * Nothing is cached: the backward recomputes s (O(L^2 qk_dim) more work, no
 * O(H sum L^2) memory). It ADDS into dq, dk, dv (stride ld; any may be
 * NULL) and drab (NULL: not wanted), and needs `scratch` of
 * sq_attn_silu_scratch_size reals when drab is wanted: the per-segment
 * partial sums of drab, added in segment order, so that the result is
 * bitwise the same for any thread count. Activations are parallel over
 * (segment, head) pairs, whose rows and columns are disjoint.
 *
 * Cost: O(sum_b L_b^2 H (qk_dim + v_dim)) time forward, about three times that
 * backward; no memory but the scratch (B H max_len). */
#ifndef SQ_ATTN_SILU_H
#define SQ_ATTN_SILU_H

#include <stddef.h>

#include "ctx.h"

/* Reals of the backward's scratch (drab's per-segment sums): B H max_len. */
size_t sq_attn_silu_scratch_size(int B, int H, int max_len);

#define SQ_TWICE "attn_silu.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* The attention above; out [T, H v_dim] is overwritten. */
void R(sq_attn_silu_forward)(const sq_ctx *cx, real *out, const real *q, const real *k,
                             const real *v, int ld, const real *rab, const int *off, int B,
                             int H, int qk_dim, int v_dim, int max_len, real scale);
void R(sq_attn_silu_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv, real *drab,
                              real *scratch, const real *dout, const real *q, const real *k,
                              const real *v, int ld, const real *rab, const int *off, int B,
                              int H, int qk_dim, int v_dim, int max_len, real scale);

/* SiLU on the view x (rows x cols, row stride ld), out = x sigmoid(x) in
 * the same view of out (out == x allowed: in place); backward adds
 * dout silu'(x) into the view dx (stride ld, dout too). */
void R(sq_silu_forward)(const sq_ctx *cx, real *out, const real *x, int ld, int rows,
                        int cols);
void R(sq_silu_backward)(const sq_ctx *cx, real *dx, const real *dout, const real *x, int ld,
                         int rows, int cols);

/* The gate: out [rows, cols] (stride cols) = a * b element-wise, a of row
 * stride lda, b of row stride ldb; backward adds dout * b into da (stride
 * lda) and dout * a into db (stride ldb); either may be NULL. */
void R(sq_gate_forward)(const sq_ctx *cx, real *out, const real *a, int lda, const real *b,
                        int ldb, int rows, int cols);
void R(sq_gate_backward)(const sq_ctx *cx, real *da, real *db, const real *dout,
                         const real *a, int lda, const real *b, int ldb, int rows, int cols);

#endif
