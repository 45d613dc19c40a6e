/* attn_pos.h - token mixers whose weights depend only on positions: PARec's
 * and FPARec's learned positional attention, the fixed patterns of FPARec's
 * ablation (Table 4) and the token-mixing (MLP-Mixer) baseline of FPARec's
 * Table 3 (Luo et al., "Learning Positional Attention for Sequential
 * Recommendation", 2024; equation numbers below are that paper's).
 *
 * SETTING. All mixers read value rows v (row stride ld >= C, [T, C]; the
 * caller projects them, e.g. v = LN(x) Wv^T as in Eq. 5) of the packed
 * layout of ops.h: segment b is rows off[b] .. off[b+1]-1, L = its length,
 * and pos[row] its window positions in 0 .. max_len-1, strictly increasing
 * along the segment (sq_pack_positions: pos = max_len - L + t, the newest
 * item at max_len - 1; the positions before the segment are the padding).
 * Below, i and j are rows of one segment and p_i = pos[row i].
 *   allowed(i)  causal: the rows j of i's segment with p_j <= p_i;
 *               bidirectional (causal = 0): every row of i's segment.
 * Keys of other segments and padding positions never participate (the TF
 * code's key mask); every output row is a convex or MLP mix of allowed rows
 * only. out [T, C] (stride C). Backward ADDS into its gradients, needs the
 * forward's inputs/caches unchanged, and is deterministic for any thread
 * count: OpenMP runs over segments for activations and over parameter rows
 * (segments summed in index order) for parameter gradients.
 *
 * 1. positional (PARec, Eq. 6). Parameter Rw [H, max_len, max_len] per
 *    layer (the paper: one R_l, i.e. H = 1; the authors' code keeps one
 *    [max_len, max_len] matrix per head, columns h*hs .. h*hs+hs-1 of v,
 *    C = H hs, scale 1/sqrt(hs)):
 *        A^h_ij = exp(Rw[h, p_i, p_j] / sqrt(hs))
 *                 / sum_{j' in allowed(i)} exp(Rw[h, p_i, p_j'] / sqrt(hs))
 *        out_i[h cols] = sum_{j in allowed(i)} A^h_ij v_j[h cols]
 *    (Eq. 6 writes Mask(softmax(R/sqrt d)); the code masks future and
 *    padding keys to -2^32+1 before the softmax, which is the above.)
 *    The probabilities are cached in the layout of ops.h's attention cache
 *    (segment b, head h: an [L, L] block at H sum_{b'<b} L_b'^2 + h L^2,
 *    0 above the diagonal when causal): sq_pa_cache_size reals.
 *    Backward: dv_j += sum_i A_ij dout_i; with dA_ij = dout_i . v_j,
 *    dRw[h, p_i, p_j] += A_ij (dA_ij - dout_i . out_i) / sqrt(hs) for the
 *    used entries only (rows p of Rw that no segment occupies, and the
 *    upper triangle when causal, get nothing).
 *    Cost: O(sum_b L_b^2 C) time forward and backward, H sum L^2 cache.
 *
 * 2. fpositional (FPARec, Eq. 7): positional with Rw[h] = R1[h] R2[h]^T,
 *    R1, R2 [H, max_len, k] (the paper's k = 40 on ML-1M with max_len 500,
 *    Table 5). Forward forms the block of R1 R2^T over the positions in use
 *    (pmin .. max_len-1, pmin = the smallest position of the batch) in
 *    scratch by GEMM, then runs positional; backward forms dRw there and
 *    adds dR1 += dRw R2, dR2 += dRw^T R1 (GEMMs). The scratch holds
 *    sq_fpa_scratch_size reals = H max_len^2 (entries outside the block are
 *    neither read nor written). Cost: positional's + O(H m^2 k) per forward
 *    and 2 O(H m^2 k) per backward, m = max_len - pmin <= max_len, i.e.
 *    O(max_len^2 k) per step independent of the batch size.
 *
 * 3. Fixed patterns (Appendix B, Eq. 12-15), no parameters, no cache:
 *        out_i = sum_{j in allowed(i)} a_ij v_j / sum_{j in allowed(i)} a_ij
 *    causal (the paper's definitions, j = p_j + 1 the 1-based window index):
 *        average        a_ij = 1                                    (Eq. 12)
 *        linear-anneal  a_ij = p_j + 1                              (Eq. 13)
 *        exp-anneal     a_ij = decay^(p_i - p_j), decay = e^-1 in   (Eq. 14)
 *                       the paper (SQ_EXP_ANNEAL_DECAY); any 0 < decay <= 1
 *    bidirectional (not in the paper; symmetric in the distance):
 *        average        a_ij = 1
 *        linear-anneal  a_ij = max_len - |p_i - p_j|   (>= 1)
 *        exp-anneal     a_ij = decay^|p_i - p_j|
 *    Eq. 15 normalises over k = 1..n, padding positions included; here the
 *    sum runs over allowed(i) only, so padding values never leak in (the
 *    weights agree with Eq. 15 for a full window). Note that causal
 *    linear-anneal weights rise with the key's absolute window position,
 *    not with the distance to the query: for a query p_i < max_len - 1 they
 *    differ from max_len - (p_i - p_j). Backward: dv_j += sum_i w_ij dout_i.
 *    Cost: O(sum L^2 C) time (direct sums; weights recomputed), no memory.
 *
 * 4. mixing (Token Mixing baseline of Table 3: the token-mixing MLP of
 *    MLP-Mixer, Tolstikhin et al. 2021, future positions masked). Hidden
 *    width = max_len, hidden unit q sitting at position q, GELU (exact erf,
 *    as MLP-Mixer); W1, W2 [max_len, max_len], b1, b2 [max_len]. For each
 *    channel c, over the rows of one segment:
 *        u_t[c]   = b1[p_t] + sum_{j in allowed(t)} W1[p_t, p_j] x_j[c]
 *        out_i[c] = b2[p_i] + sum_{t in allowed(i)} W2[p_i, p_t] gelu(u_t[c])
 *    Causal = W1 and W2 lower-triangular (output i sees hidden units at
 *    positions <= p_i, each of which sees inputs at positions <= its own);
 *    the segment uses the sub-network on its own positions: padding inputs
 *    AND padding hidden units are left out (= the max_len-wide mixer on the
 *    window, padding rows of x zero, hidden units at padding positions
 *    removed). The cache holds u and gelu(u), 2 T C reals
 *    (sq_mixing_cache_size); backward needs T C reals of scratch
 *    (sq_mixing_scratch_size) for du. Gradients: dx, dW1, db1, dW2, db2 (used
 *    entries only). Cost: O(sum L^2 C) time forward and backward.
 */
#ifndef SQ_ATTN_POS_H
#define SQ_ATTN_POS_H

#include <stddef.h>

#include "ctx.h"

/* e^-1: the exponential-annealing decay of Eq. 14. */
#define SQ_EXP_ANNEAL_DECAY 0.36787944117144232160

/* The kernels' own numbers of the kinds of this file (the kind argument of
 * sq_fixed_*; the mixers' variant). Their names are the mixer table's
 * (lib/model/mixers.c). */
enum sq_attn_pos_kind {
    SQ_ATTN_POSITIONAL = 0,   /* "positional"     PARec */
    SQ_ATTN_FPOSITIONAL = 1,  /* "fpositional"    FPARec */
    SQ_ATTN_AVERAGE = 2,      /* "average"        Eq. 12 */
    SQ_ATTN_LINEAR_ANNEAL = 3, /* "linear-anneal" Eq. 13 */
    SQ_ATTN_EXP_ANNEAL = 4,   /* "exp-anneal"     Eq. 14 */
    SQ_ATTN_MIXING = 5,       /* "mixing"         token mixing */
};

/* Reals of the positional probability cache: H * sum_b len_b^2. */
size_t sq_pa_cache_size(const int *off, int B, int H);
/* Reals of fpositional's scratch (R1 R2^T, then dRw): H * max_len^2. */
size_t sq_fpa_scratch_size(int max_len, int H);
/* Reals of the mixing cache (u, gelu(u)): 2 T C. */
size_t sq_mixing_cache_size(int T, int C);
/* Reals of the mixing backward scratch (du): T C. */
size_t sq_mixing_scratch_size(int T, int C);

/* The declarations, expanded once for float and once for double. */
#define SQ_TWICE "attn_pos.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* 1. positional (PARec). Rw [H, max_len, max_len]; att: sq_pa_cache_size
 * reals; C = H * hs. Backward: dRw or dv may be NULL (not wanted); needs
 * the forward's out and att unchanged. */
void R(sq_pa_forward)(const sq_ctx *cx, real *out, real *att, const real *Rw,
                      const real *v, int ld, const int *off, const int *pos,
                      int B, int H, int C, int max_len, int causal);
void R(sq_pa_backward)(const sq_ctx *cx, real *dRw, real *dv, const real *dout,
                       const real *out, const real *v, const real *att,
                       int ld, const int *off, const int *pos, int B, int H,
                       int C, int max_len, int causal);

/* 2. fpositional (FPARec). R1, R2 [H, max_len, k]; scratch:
 * sq_fpa_scratch_size reals (forward and backward may share it). dv may be
 * NULL. */
void R(sq_fpa_forward)(const sq_ctx *cx, real *out, real *att, real *scratch,
                       const real *R1, const real *R2, int k, const real *v,
                       int ld, const int *off, const int *pos, int B, int H,
                       int C, int max_len, int causal);
void R(sq_fpa_backward)(const sq_ctx *cx, real *dR1, real *dR2, real *dv,
                        real *scratch, const real *dout, const real *out,
                        const real *v, const real *att, const real *R1,
                        const real *R2, int k, int ld, const int *off,
                        const int *pos, int B, int H, int C, int max_len,
                        int causal);

/* 3. Fixed patterns: kind SQ_ATTN_AVERAGE, SQ_ATTN_LINEAR_ANNEAL or
 * SQ_ATTN_EXP_ANNEAL (decay is read by the last only). */
void R(sq_fixed_forward)(const sq_ctx *cx, real *out, const real *v, int ld,
                         const int *off, const int *pos, int B, int C,
                         int max_len, int kind, real decay, int causal);
void R(sq_fixed_backward)(const sq_ctx *cx, real *dv, const real *dout, int ld,
                          const int *off, const int *pos, int B, int C,
                          int max_len, int kind, real decay, int causal);

/* 4. mixing. x [T, C] stride ld (dx too; dx may be NULL); W1, W2
 * [max_len, max_len] row-major (W1[q, p]: input position p -> hidden unit
 * q; W2[p, q]: hidden unit q -> output position p); b1, b2 [max_len];
 * cache: sq_mixing_cache_size(T, C) reals, scratch:
 * sq_mixing_scratch_size(T, C) reals. */
void R(sq_mixing_forward)(const sq_ctx *cx, real *out, real *cache,
                          const real *x, int ld, const real *W1, const real *b1,
                          const real *W2, const real *b2, const int *off,
                          const int *pos, int B, int C, int max_len,
                          int causal);
void R(sq_mixing_backward)(const sq_ctx *cx, real *dx, real *dW1, real *db1,
                           real *dW2, real *db2, real *scratch,
                           const real *dout, const real *x, const real *cache,
                           const real *W1, const real *W2, int ld,
                           const int *off, const int *pos, int B, int C,
                           int max_len, int causal);

#endif
