/* attn_pos.c - position-only token mixers (formulas, layouts, costs:
 * attn_pos.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * attn_pos_f64.o (see real.h). Activations are parallel over segments (each
 * segment's rows belong to one thread, summed in a fixed order); parameter
 * gradients are parallel over parameter rows, each row summing the segments
 * in index order, so every result is bitwise the same for any thread count.
 * Segments are short (tens to hundreds of rows): plain loops, no BLAS, except
 * fpositional's R1 R2^T products, which run outside any parallel region.
 *
 * On a CUDA context positional, the fixed patterns and mixing forward to
 * cuda/k_pos.cu (the SQ_ON_GPU line at their top); fpositional has no
 * kernel of its own: its products and fills are ops (sq_gemm, sq_fill2d:
 * cuBLAS there) around positional's. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_pos.h"
#include "ops.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#include <float.h>

/* ------------------------------------------------------------------------ */
/* Sizes (precision-free: compiled once, in the float build).              */

#if !SQ_REAL_IS_F64
size_t sq_pa_cache_size(const int *off, int B, int H)
{
    size_t n = 0;
    for (int b = 0; b < B; b++) {
        size_t len = (size_t)(off[b + 1] - off[b]);
        n += len * len;
    }
    return n * (size_t)H;
}

size_t sq_fpa_scratch_size(int max_len, int H)
{
    return (size_t)H * (size_t)max_len * (size_t)max_len;
}

size_t sq_mixing_cache_size(int T, int C)
{
    return 2 * (size_t)T * (size_t)C;
}

size_t sq_mixing_scratch_size(int T, int C)
{
    return (size_t)T * (size_t)C;
}
#endif

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* Offset of segment b's probability blocks: H * sum_{b'<b} len^2. O(B),
 * negligible next to the O(len^2 hs) work of a (segment, head) pair. */
static size_t pa_base(const int *off, int b, int H)
{
    size_t n = 0;
    for (int i = 0; i < b; i++) {
        size_t len = (size_t)(off[i + 1] - off[i]);
        n += len * len;
    }
    return n * (size_t)H;
}

/* The row of a segment (positions p[0..L-1], strictly increasing) that sits
 * at position q, or -1. */
static int seg_row(const int *p, int L, int q)
{
    int lo = 0, hi = L - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        if (p[mid] == q)
            return mid;
        if (p[mid] < q)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ------------------------------------------------------------------------ */
/* 1. positional (PARec)                                                    */

void R(sq_pa_forward)(const sq_ctx *cx, real *out, real *att, const real *Rw,
                      const real *v, int ld, const int *off, const int *pos,
                      int B, int H, int C, int max_len, int causal)
{
    SQ_ON_GPU(cx, pa_forward, (out, att, Rw, v, ld, off, pos, B, H, C, max_len, causal));
    int hs = C / H;
    real scale = (real)1 / r_sqrt((real)hs);
    size_t nn = (size_t)max_len * max_len;
    /* One (segment, head) pair per iteration, one thread each: disjoint
     * outputs, fixed order inside, so dynamic scheduling is deterministic. */
    SQ_PAR_LOOP(dynamic, 1, int, bh, B * H, 1, {
        int b = bh / H, h = bh % H;
        int o = off[b], L = off[b + 1] - off[b];
        const int *p = pos + o;
        real *a = att + pa_base(off, b, H) + (size_t)h * L * L;
        const real *Rh = Rw + (size_t)h * nn;
        for (int i = 0; i < L; i++) {
            const real *rrow = Rh + (size_t)p[i] * max_len;
            real *arow = a + (size_t)i * L;
            int jend = causal ? i + 1 : L;
            for (int j = 0; j < jend; j++)
                arow[j] = scale * rrow[p[j]];
            sq_softmax_row(arow, jend, L);
            sq_attend_row(out + (size_t)(o + i) * C + h * hs, arow,
                          v + (size_t)o * ld + h * hs, jend, ld, hs);
        }
    });
}

void R(sq_pa_backward)(const sq_ctx *cx, real *dRw, real *dv, const real *dout,
                       const real *out, const real *v, const real *att,
                       int ld, const int *off, const int *pos, int B, int H,
                       int C, int max_len, int causal)
{
    SQ_ON_GPU(cx, pa_backward,
              (dRw, dv, dout, out, v, att, ld, off, pos, B, H, C, max_len, causal));
    int hs = C / H;
    real scale = (real)1 / r_sqrt((real)hs);
    size_t nn = (size_t)max_len * max_len;
    /* dv_j += sum_i A_ij dout_i: per (segment, head), rows in order. */
    if (dv) {
        SQ_PAR_LOOP(dynamic, 1, int, bh, B * H, 1, {
            int b = bh / H, h = bh % H;
            int o = off[b], L = off[b + 1] - off[b];
            const real *a = att + pa_base(off, b, H) + (size_t)h * L * L;
            for (int i = 0; i < L; i++) {
                const real *arow = a + (size_t)i * L;
                const real *doi = dout + (size_t)(o + i) * C + h * hs;
                int jend = causal ? i + 1 : L;
                for (int j = 0; j < jend; j++)
                    sq_axpy(dv + (size_t)(o + j) * ld + h * hs, arow[j], doi, hs);
            }
        });
    }
    if (!dRw)
        return;
    /* dRw[h, p_i, p_j] += A_ij (dout_i . v_j - dout_i . out_i) scale: the
     * softmax backward, with sum_j' A_ij' dA_ij' = dout_i . out_i. One row
     * (h, q) of dRw per iteration; the segments that occupy position q add
     * into it in segment order. */
    SQ_PAR_LOOP(dynamic, 1, int, hq, H * max_len, 1, {
        int h = hq / max_len, q = hq % max_len;
        real *drow = dRw + (size_t)h * nn + (size_t)q * max_len;
        size_t base = 0; /* pa_base(off, b, H), kept up to date */
        for (int b = 0; b < B; b++) {
            int o = off[b], L = off[b + 1] - off[b];
            const int *p = pos + o;
            int i = seg_row(p, L, q);
            if (i >= 0) {
                const real *arow = att + base + (size_t)h * L * L + (size_t)i * L;
                const real *doi = dout + (size_t)(o + i) * C + h * hs;
                real rowdot = sq_dot(doi, out + (size_t)(o + i) * C + h * hs, hs);
                int jend = causal ? i + 1 : L;
                for (int j = 0; j < jend; j++) {
                    real dA = sq_dot(doi, v + (size_t)(o + j) * ld + h * hs, hs);
                    drow[p[j]] += scale * arow[j] * (dA - rowdot);
                }
            }
            base += (size_t)H * L * L;
        }
    });
}

/* ------------------------------------------------------------------------ */
/* 2. fpositional (FPARec)                                                  */

/* The smallest position in the batch (segments are increasing: their first
 * rows), max_len when there are no rows. */
static int min_pos(const int *off, const int *pos, int B, int max_len)
{
    int m = max_len;
    for (int b = 0; b < B; b++)
        if (off[b + 1] > off[b] && pos[off[b]] < m)
            m = pos[off[b]];
    return m;
}

void R(sq_fpa_forward)(const sq_ctx *cx, real *out, real *att, real *scratch,
                       const real *R1, const real *R2, int k, const real *v,
                       int ld, const int *off, const int *pos, int B, int H,
                       int C, int max_len, int causal)
{
    /* scoring (rowwise): the whole table, a GEMM of one shape whatever
     * the batch, so that a history's outputs do not depend on the others */
    int pmin = cx->rowwise ? 0 : min_pos(off, pos, B, max_len), m = max_len - pmin;
    if (m <= 0)
        return;
    size_t nn = (size_t)max_len * max_len, nk = (size_t)max_len * k;
    /* Rw[h] block [pmin.., pmin..] = R1[h][pmin..] R2[h][pmin..]^T (ops:
     * on a CUDA context cuBLAS's, then positional's kernels) */
    for (int h = 0; h < H; h++) {
        size_t r0 = (size_t)h * nk + (size_t)pmin * k;
        R(sq_gemm)(cx, 0, 1, m, m, k, 1, R1 + r0, k, R2 + r0, k, 0,
                   scratch + (size_t)h * nn + (size_t)pmin * max_len + pmin, max_len);
    }
    R(sq_pa_forward)(cx, out, att, scratch, v, ld, off, pos, B, H, C, max_len,
                     causal);
}

void R(sq_fpa_backward)(const sq_ctx *cx, real *dR1, real *dR2, real *dv,
                        real *scratch, const real *dout, const real *out,
                        const real *v, const real *att, const real *R1,
                        const real *R2, int k, int ld, const int *off,
                        const int *pos, int B, int H, int C, int max_len,
                        int causal)
{
    /* scoring (rowwise): the whole table, a GEMM of one shape whatever
     * the batch, so that a history's outputs do not depend on the others */
    int pmin = cx->rowwise ? 0 : min_pos(off, pos, B, max_len), m = max_len - pmin;
    if (m <= 0)
        return;
    size_t nn = (size_t)max_len * max_len, nk = (size_t)max_len * k;
    for (int h = 0; h < H; h++)
        R(sq_fill2d)(cx, scratch + (size_t)h * nn + (size_t)pmin * max_len + pmin, max_len, m,
                     m, 0);
    R(sq_pa_backward)(cx, scratch, dv, dout, out, v, att, ld, off, pos, B, H, C,
                      max_len, causal);
    for (int h = 0; h < H; h++) {
        size_t r0 = (size_t)h * nk + (size_t)pmin * k;
        const real *dRb = scratch + (size_t)h * nn + (size_t)pmin * max_len + pmin;
        /* dR1 += dRw R2, dR2 += dRw^T R1 (blocks of rows pmin..) */
        R(sq_gemm)(cx, 0, 0, m, k, m, 1, dRb, max_len, R2 + r0, k, 1, dR1 + r0, k);
        R(sq_gemm)(cx, 1, 0, m, k, m, 1, dRb, max_len, R1 + r0, k, 1, dR2 + r0, k);
    }
}

/* ------------------------------------------------------------------------ */
/* 3. Fixed patterns                                                        */

/* Unnormalised weight a_ij of key position pj for query position pi. */
static inline real fixed_a(int kind, int pi, int pj, int max_len,
                           real logdecay, int causal)
{
    int dist = pi > pj ? pi - pj : pj - pi;
    switch (kind) {
    case SQ_ATTN_LINEAR_ANNEAL:
        return causal ? (real)(pj + 1) : (real)(max_len - dist);
    case SQ_ATTN_EXP_ANNEAL:
        return dist ? r_exp((real)dist * logdecay) : (real)1;
    default: /* SQ_ATTN_AVERAGE */
        return 1;
    }
}

/* 1 / sum_{j in allowed(i)} a_ij (the sum is >= 1: a_ii >= 1 or = 1). */
static inline real fixed_inv(int kind, const int *p, int i, int jend,
                             int max_len, real logdecay, int causal)
{
    real sum = 0;
    for (int j = 0; j < jend; j++)
        sum += fixed_a(kind, p[i], p[j], max_len, logdecay, causal);
    return (real)1 / sum;
}

void R(sq_fixed_forward)(const sq_ctx *cx, real *out, const real *v, int ld,
                         const int *off, const int *pos, int B, int C,
                         int max_len, int kind, real decay, int causal)
{
    SQ_ON_GPU(cx, fixed_forward, (out, v, ld, off, pos, B, C, max_len, kind, decay, causal));
    real logdecay = kind == SQ_ATTN_EXP_ANNEAL ? r_log(decay) : (real)0;
    SQ_PAR_LOOP(dynamic, 1, int, b, B, 1, {
        int o = off[b], L = off[b + 1] - off[b];
        const int *p = pos + o;
        for (int i = 0; i < L; i++) {
            int jend = causal ? i + 1 : L;
            /* out_i = (sum_j a_ij v_j) / sum_j a_ij: one weight per pair */
            real *oi = out + (size_t)(o + i) * C, sum = 0;
            for (int c = 0; c < C; c++)
                oi[c] = 0;
            for (int j = 0; j < jend; j++) {
                real a = fixed_a(kind, p[i], p[j], max_len, logdecay, causal);
                sum += a;
                sq_axpy(oi, a, v + (size_t)(o + j) * ld, C);
            }
            real inv = (real)1 / sum;
            for (int c = 0; c < C; c++)
                oi[c] *= inv;
        }
    });
}

void R(sq_fixed_backward)(const sq_ctx *cx, real *dv, const real *dout, int ld,
                          const int *off, const int *pos, int B, int C,
                          int max_len, int kind, real decay, int causal)
{
    SQ_ON_GPU(cx, fixed_backward, (dv, dout, ld, off, pos, B, C, max_len, kind, decay, causal));
    real logdecay = kind == SQ_ATTN_EXP_ANNEAL ? r_log(decay) : (real)0;
    SQ_PAR_LOOP(dynamic, 1, int, b, B, 1, {
        int o = off[b], L = off[b + 1] - off[b];
        const int *p = pos + o;
        for (int i = 0; i < L; i++) {
            int jend = causal ? i + 1 : L;
            real inv = fixed_inv(kind, p, i, jend, max_len, logdecay, causal);
            const real *doi = dout + (size_t)(o + i) * C;
            for (int j = 0; j < jend; j++)
                sq_axpy(dv + (size_t)(o + j) * ld,
                     inv * fixed_a(kind, p[i], p[j], max_len, logdecay, causal),
                     doi, C);
        }
    });
}

/* ------------------------------------------------------------------------ */
/* 4. Token mixing                                                          */

void R(sq_mixing_forward)(const sq_ctx *cx, real *out, real *cache,
                          const real *x, int ld, const real *W1, const real *b1,
                          const real *W2, const real *b2, const int *off,
                          const int *pos, int B, int C, int max_len, int causal)
{
    SQ_ON_GPU(cx, mixing_forward,
              (out, cache, x, ld, W1, b1, W2, b2, off, pos, B, C, max_len, causal));
    size_t TC = (size_t)off[B] * C;
    real *u = cache, *g = cache + TC;
    SQ_PAR_LOOP(dynamic, 1, int, b, B, 1, {
        int o = off[b], L = off[b + 1] - off[b];
        const int *p = pos + o;
        /* hidden units at the segment's positions */
        for (int t = 0; t < L; t++) {
            const real *w1row = W1 + (size_t)p[t] * max_len;
            real *ut = u + (size_t)(o + t) * C, *gt = g + (size_t)(o + t) * C;
            for (int c = 0; c < C; c++)
                ut[c] = b1[p[t]];
            int jend = causal ? t + 1 : L;
            for (int j = 0; j < jend; j++)
                sq_axpy(ut, w1row[p[j]], x + (size_t)(o + j) * ld, C);
            for (int c = 0; c < C; c++)
                gt[c] = sq_gelu(ut[c]);
        }
        /* outputs */
        for (int i = 0; i < L; i++) {
            const real *w2row = W2 + (size_t)p[i] * max_len;
            real *oi = out + (size_t)(o + i) * C;
            for (int c = 0; c < C; c++)
                oi[c] = b2[p[i]];
            int tend = causal ? i + 1 : L;
            for (int t = 0; t < tend; t++)
                sq_axpy(oi, w2row[p[t]], g + (size_t)(o + t) * C, C);
        }
    });
}

void R(sq_mixing_backward)(const sq_ctx *cx, real *dx, real *dW1, real *db1,
                           real *dW2, real *db2, real *scratch,
                           const real *dout, const real *x, const real *cache,
                           const real *W1, const real *W2, int ld,
                           const int *off, const int *pos, int B, int C,
                           int max_len, int causal)
{
    SQ_ON_GPU(cx, mixing_backward, (dx, dW1, db1, dW2, db2, scratch, dout, x, cache, W1, W2, ld,
                                    off, pos, B, C, max_len, causal));
    size_t TC = (size_t)off[B] * C;
    const real *u = cache, *g = cache + TC;
    real *du = scratch;
    /* Per segment: du_t = gelu'(u_t) * sum_{i: t in allowed(i)} W2[p_i, p_t]
     * dout_i, then dx_j += sum_{t: j in allowed(t)} W1[p_t, p_j] du_t. */
    SQ_PAR_LOOP(dynamic, 1, int, b, B, 1, {
        int o = off[b], L = off[b + 1] - off[b];
        const int *p = pos + o;
        for (int t = 0; t < L; t++) {
            real *dut = du + (size_t)(o + t) * C;
            const real *ut = u + (size_t)(o + t) * C;
            for (int c = 0; c < C; c++)
                dut[c] = 0;
            for (int i = causal ? t : 0; i < L; i++)
                sq_axpy(dut, W2[(size_t)p[i] * max_len + p[t]],
                     dout + (size_t)(o + i) * C, C);
            for (int c = 0; c < C; c++)
                dut[c] *= sq_gelu_grad(ut[c]);
        }
        if (!dx)
            continue;
        for (int t = 0; t < L; t++) {
            const real *w1row = W1 + (size_t)p[t] * max_len;
            const real *dut = du + (size_t)(o + t) * C;
            int jend = causal ? t + 1 : L;
            for (int j = 0; j < jend; j++)
                sq_axpy(dx + (size_t)(o + j) * ld, w1row[p[j]], dut, C);
        }
    });
    /* Parameter rows: position q's rows of W1, W2 and entries of b1, b2,
     * the segments that occupy q adding in segment order. */
    SQ_PAR_LOOP(dynamic, 1, int, q, max_len, 1, {
        real *dw1 = dW1 + (size_t)q * max_len, *dw2 = dW2 + (size_t)q * max_len;
        for (int b = 0; b < B; b++) {
            int o = off[b], L = off[b + 1] - off[b];
            const int *p = pos + o;
            int i = seg_row(p, L, q);
            if (i < 0)
                continue;
            const real *doi = dout + (size_t)(o + i) * C;
            const real *dui = du + (size_t)(o + i) * C;
            real s2 = 0, s1 = 0;
            for (int c = 0; c < C; c++) {
                s2 += doi[c];
                s1 += dui[c];
            }
            db2[q] += s2;
            db1[q] += s1;
            int jend = causal ? i + 1 : L;
            for (int j = 0; j < jend; j++) {
                dw2[p[j]] += sq_dot(doi, g + (size_t)(o + j) * C, C);
                dw1[p[j]] += sq_dot(dui, x + (size_t)(o + j) * ld, C);
            }
        }
    });
}
