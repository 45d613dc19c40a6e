/* attn_cross.c - multi-head softmax cross-attention on packed segments
 * (equations, buffers and conventions: attn_cross.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * attn_cross_f64.o (see real.h). The loops are those of
 * sq_attention_forward/backward (ops.c) with the query rows and the key
 * rows of a segment taken from two layouts: the same row kernels
 * (sq_softmax_row, sq_attend_row, sq_dot, sq_axpy) in the same order, so
 * that with offq == offk the results equal the bidirectional self-attention
 * ones. Segments are short (ELASTIC: k tokens against tens to thousands of
 * rows), so plain loops beat a GEMM call per (segment, head). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_cross.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

/* Below this many multiply-adds (H hs sum nq nk) the ops run on the
 * calling thread: a team costs more than the work. */
#define XATT_FORK_WORK 16384

/* Offset of segment b's probability blocks: H * sum_{b'<b} nq_b' nk_b'.
 * O(B) per work item, nothing next to the O(nq nk hs) work of an item. */
static size_t xatt_base(const int *offq, const int *offk, int b, int H)
{
    size_t n = 0;
    for (int i = 0; i < b; i++)
        n += (size_t)(offq[i + 1] - offq[i]) * (size_t)(offk[i + 1] - offk[i]);
    return n * (size_t)H;
}

#if !SQ_REAL_IS_F64
size_t sq_cross_attention_cache_size(const int *offq, const int *offk, int B, int H)
{
    return xatt_base(offq, offk, B, H);
}
#endif

/* Whether an op with this cache size is worth a team of threads. */
static int xatt_fork(const int *offq, const int *offk, int B, int H, int C)
{
    return xatt_base(offq, offk, B, H) * (size_t)(C / H) >= XATT_FORK_WORK;
}

void R(sq_cross_attention_forward)(const sq_ctx *cx, real *out, real *att, const real *q,
                                   int ldq, const int *offq, const real *k, const real *v,
                                   int ldk, const int *offk, int B, int H, int C)
{
    SQ_ON_GPU(cx, cross_attention_forward, (out, att, q, ldq, offq, k, v, ldk, offk, B, H, C));
    int hs = C / H;
    real scale = (real)1 / r_sqrt((real)hs);
    /* One (segment, head) item per iteration: items write disjoint parts
     * of out and att, each in a fixed order, so dynamic scheduling
     * (segments differ in size) stays deterministic. */
    SQ_PAR_LOOP(dynamic, xatt_fork(offq, offk, B, H, C), int, bh, B * H, 1, {
        int b = bh / H, h = bh % H;
        int oq = offq[b], nq = offq[b + 1] - offq[b];
        int ok = offk[b], nk = offk[b + 1] - offk[b];
        real *a = att + xatt_base(offq, offk, b, H) + (size_t)h * nq * nk;
        const real *kh = k + (size_t)ok * ldk + h * hs;
        const real *vh = v + (size_t)ok * ldk + h * hs;
        for (int i = 0; i < nq; i++) {
            const real *qi = q + (size_t)(oq + i) * ldq + h * hs;
            real *oi = out + (size_t)(oq + i) * C + h * hs;
            real *arow = a + (size_t)i * nk;
            if (nk == 0) { /* no keys: a zero row, no probabilities */
                for (int d = 0; d < hs; d++)
                    oi[d] = 0;
                continue;
            }
            for (int j = 0; j < nk; j++)
                arow[j] = scale * sq_dot(qi, kh + (size_t)j * ldk, hs);
            sq_softmax_row(arow, nk, nk); /* exp(s - max s) / sum */
            sq_attend_row(oi, arow, vh, nk, ldk, hs);
        }
    });
}

void R(sq_cross_attention_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv,
                                    const real *dout, const real *out, const real *q,
                                    int ldq, const int *offq, const real *k, const real *v,
                                    int ldk, const int *offk, const real *att, int B, int H,
                                    int C)
{
    SQ_ON_GPU(cx, cross_attention_backward,
              (dq, dk, dv, dout, out, q, ldq, offq, k, v, ldk, offk, att, B, H, C));
    int hs = C / H;
    real scale = (real)1 / r_sqrt((real)hs);
    /* Per query row i, with p = softmax(s), dp_ij = dout_i . v_j:
     *   dv_j += p_ij dout_i
     *   ds_ij = scale p_ij (dp_ij - dout_i . out_i)
     *   dq_i += ds_ij k_j,  dk_j += ds_ij q_i
     * in the order of sq_attention_backward. Item (b, h) alone owns the
     * rows of segment b in both sets (head h's columns), so dk_j and dv_j
     * sum over i in row order whatever the thread count. */
    SQ_PAR_LOOP(dynamic, xatt_fork(offq, offk, B, H, C), int, bh, B * H, 1, {
        int b = bh / H, h = bh % H;
        int oq = offq[b], nq = offq[b + 1] - offq[b];
        int ok = offk[b], nk = offk[b + 1] - offk[b];
        if (nk == 0) /* the zero output rows depend on nothing */
            continue;
        const real *a = att + xatt_base(offq, offk, b, H) + (size_t)h * nq * nk;
        for (int i = 0; i < nq; i++) {
            const real *arow = a + (size_t)i * nk;
            const real *doi = dout + (size_t)(oq + i) * C + h * hs;
            const real *qi = q + (size_t)(oq + i) * ldq + h * hs;
            real *dqi = dq + (size_t)(oq + i) * ldq + h * hs;
            real rowdot = sq_dot(doi, out + (size_t)(oq + i) * C + h * hs, hs);
            for (int j = 0; j < nk; j++) {
                size_t kr = (size_t)(ok + j) * ldk + h * hs;
                real p = arow[j];
                real ds = scale * p * (sq_dot(doi, v + kr, hs) - rowdot);
                sq_axpy(dv + kr, p, doi, hs);
                sq_axpy(dqi, ds, k + kr, hs);
                sq_axpy(dk + kr, ds, qi, hs);
            }
        }
    });
}
