/* attn_cross.h - multi-head softmax cross-attention on packed segments:
 * queries from one packed set, keys and values from another, forward and
 * backward.
 *
 * The score-softmax-value core of ELASTIC's Linear Dispatcher Attention
 * (eq. 2-3): per user b the k interest tokens P_b attend over the user's
 * sequence X_b, P <- softmax(P Wq (X Wk)^T / sqrt(d)) X Wv, and the sequence
 * reads back from them, X <- softmax(X Wq' (P Wk')^T / sqrt(d)) P Wv'. Both
 * are this op with the roles of the two sets swapped; the projections are
 * the caller's linear layers. With offq == offk and the same rows for
 * queries and keys it is sq_attention_forward (ops.h, op 8) with causal = 0.
 *
 * SEGMENTS. Two packed layouts (ops.h: PACKED LAYOUT) over the same B:
 *     queries of segment b   rows offq[b] .. offq[b+1]-1   (nq_b of them)
 *     keys/values of b       rows offk[b] .. offk[b+1]-1   (nk_b of them)
 * offq, offk have B+1 non-decreasing entries; a segment may be empty in
 * either set (nq_b = 0: nothing to do; nk_b = 0: its query rows get a zero
 * output and no gradient). Query segment b sees only key segment b.
 *
 * OP. Head h owns columns h*hs .. h*hs+hs-1, C = H * hs (H divides C).
 * For query row i of segment b and head h, with q_i, k_j, v_j the head's
 * slices,
 *     s_ij = q_i . k_j / sqrt(hs),   p_ij = softmax_j(s_ij),
 *     out_i = sum_j p_ij v_j              (j over key segment b)
 * with the softmax taken as exp(s - max s) / sum, so that no score of any
 * size overflows. Time O(H hs sum_b nq_b nk_b) = O(C sum_b nq_b nk_b),
 * i.e. O(N k C) for ELASTIC's k tokens against N sequence rows.
 *
 * BUFFERS. q (and dq) rows of stride ldq >= C; k, v (and dk, dv) rows of
 * stride ldk >= C (k and v may be columns of one fused buffer: v = k + C,
 * ldk = 2C); out, dout [Tq, C], Tq = offq[B]. No function allocates: att is
 * the probability cache, sq_cross_attention_cache_size(offq, offk, B, H) =
 * H * sum_b nq_b nk_b reals; segment b, head h is the row-major
 * [nq_b, nk_b] block of p at H * sum_{b'<b} nq_b' nk_b' + h * nq_b nk_b.
 * The forward writes every entry of out and of att.
 *
 * BACKWARD. With dp_ij = dout_i . v_j and sum_j p_ij dp_ij = dout_i . out_i,
 *     ds_ij = p_ij (dp_ij - dout_i . out_i) / sqrt(hs)
 *     dq_i += sum_j ds_ij k_j,  dk_j += sum_i ds_ij q_i,  dv_j += sum_i p_ij dout_i
 * ADDED into dq, dk, dv (conventions of ops.h). It needs the forward's att
 * and out unchanged and the same q, k, v. dk and dv may be columns of one
 * fused buffer but never share elements; dq shares no element with dk or dv,
 * except in self-attention (offq == offk, ldq == ldk), where dq may even be
 * dk: then every shared element belongs to one (segment, head) and the sums
 * run in a fixed order, as in sq_attention_backward.
 *
 * PARALLELISM. One work item per (segment, head), dynamically scheduled:
 * item (b, h) alone writes head h's columns of segment b's rows of out, dq,
 * dk, dv and its att block, each in a fixed order, so results are bitwise
 * the same for any thread count. Below ~16k multiply-adds an op does not
 * fork. Every op exists for float and, with the _f64 suffix, for double. */
#ifndef SQ_ATTN_CROSS_H
#define SQ_ATTN_CROSS_H

#include <stddef.h>

#include "ctx.h"

/* Reals of the probability cache: H * sum_b nq_b nk_b. */
size_t sq_cross_attention_cache_size(const int *offq, const int *offk, int B, int H);

#define SQ_TWICE "attn_cross.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

void R(sq_cross_attention_forward)(const sq_ctx *cx, real *out, real *att, const real *q,
                                   int ldq, const int *offq, const real *k, const real *v,
                                   int ldk, const int *offk, int B, int H, int C);
void R(sq_cross_attention_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                    const real *dout, const real *out, const real *q,
                                    int ldq, const int *offq, const real *k, const real *v,
                                    int ldk, const int *offk, const real *att, int B, int H,
                                    int C);

#endif
