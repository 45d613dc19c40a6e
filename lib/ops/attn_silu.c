/* attn_silu.c - HSTU's pointwise SiLU attention with a relative position
 * bias, SiLU and the gate (formulas, layouts, costs: attn_silu.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * attn_silu_f64.o (see real.h). Segments are short (tens to hundreds of
 * rows): plain loops over one (segment, head) pair per iteration, no BLAS. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_silu.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

#if !SQ_REAL_IS_F64
size_t sq_attn_silu_scratch_size(int B, int H, int max_len)
{
    return (size_t)B * (size_t)H * (size_t)max_len;
}
#endif

/* ------------------------------------------------------------------------ */
/* The attention                                                            */

void R(sq_attn_silu_forward)(const sq_ctx *cx, real *out, const real *q, const real *k,
                             const real *v, int ld, const real *rab, const int *off, int B,
                             int H, int qk_dim, int v_dim, int max_len, real scale)
{
    SQ_ON_GPU(cx, attn_silu_forward,
              (out, q, k, v, ld, rab, off, B, H, qk_dim, v_dim, max_len, scale));
    int E = H * v_dim;
    /* One (segment, head) pair per iteration: disjoint outputs, a fixed
     * order inside, so dynamic scheduling stays deterministic. */
    SQ_PAR_LOOP(dynamic, 1, int, bh, B * H, 1, {
        int b = bh / H, h = bh % H, o = off[b], L = off[b + 1] - off[b];
        const real *bias = rab + (size_t)h * max_len;
        for (int i = 0; i < L; i++) {
            const real *qi = q + (size_t)(o + i) * ld + h * qk_dim;
            real *oi = out + (size_t)(o + i) * E + h * v_dim;
            for (int c = 0; c < v_dim; c++)
                oi[c] = 0;
            for (int j = 0; j <= i; j++) {
                const real *kj = k + (size_t)(o + j) * ld + h * qk_dim;
                real s = sq_dot(qi, kj, qk_dim) + bias[i - j];
                sq_axpy(oi, scale * s * sq_sigmoid(s), v + (size_t)(o + j) * ld + h * v_dim,
                        v_dim);
            }
        }
    });
}

void R(sq_attn_silu_backward)(const sq_ctx *cx, real *dq, real *dk, real *dv, real *drab,
                              real *scratch, const real *dout, const real *q, const real *k,
                              const real *v, int ld, const real *rab, const int *off, int B,
                              int H, int qk_dim, int v_dim, int max_len, real scale)
{
    SQ_ON_GPU(cx, attn_silu_backward, (dq, dk, dv, drab, scratch, dout, q, k, v, ld, rab, off,
                                       B, H, qk_dim, v_dim, max_len, scale));
    int E = H * v_dim;
    SQ_PAR_LOOP(dynamic, 1, int, bh, B * H, 1, {
        int b = bh / H, h = bh % H, o = off[b], L = off[b + 1] - off[b];
        const real *bias = rab + (size_t)h * max_len;
        real *part = drab ? scratch + (size_t)bh * max_len : NULL; /* this pair's drab */
        for (int d = 0; part && d < max_len; d++)
            part[d] = 0;
        for (int i = 0; i < L; i++) {
            size_t ri = (size_t)(o + i) * ld;
            const real *qi = q + ri + h * qk_dim;
            const real *gi = dout + (size_t)(o + i) * E + h * v_dim;
            for (int j = 0; j <= i; j++) {
                size_t rj = (size_t)(o + j) * ld;
                const real *kj = k + rj + h * qk_dim, *vj = v + rj + h * v_dim;
                real s = sq_dot(qi, kj, qk_dim) + bias[i - j], sg = sq_sigmoid(s);
                real da = sq_dot(gi, vj, v_dim);
                real ds = scale * da * sg * ((real)1 + s * ((real)1 - sg));
                if (dv)
                    sq_axpy(dv + rj + h * v_dim, scale * s * sg, gi, v_dim);
                if (dq)
                    sq_axpy(dq + ri + h * qk_dim, ds, kj, qk_dim);
                if (dk)
                    sq_axpy(dk + rj + h * qk_dim, ds, qi, qk_dim);
                if (part)
                    part[i - j] += ds;
            }
        }
    });
    if (!drab)
        return;
    /* drab[h, d] = the pairs' partial sums in segment order */
    SQ_PAR_FOR(int, hd, H * max_len, 1, {
        int h = hd / max_len, d = hd % max_len;
        real acc = 0;
        for (int b = 0; b < B; b++)
            acc += scratch[((size_t)b * H + h) * max_len + d];
        drab[hd] += acc;
    });
}

/* ------------------------------------------------------------------------ */
/* SiLU and the gate                                                        */

void R(sq_silu_forward)(const sq_ctx *cx, real *out, const real *x, int ld, int rows,
                        int cols)
{
    SQ_ON_GPU(cx, silu_forward, (out, x, ld, rows, cols));
    SQ_PAR_FOR(int, r, rows, 1, {
        for (int c = 0; c < cols; c++) {
            real z = x[(size_t)r * ld + c];
            out[(size_t)r * ld + c] = z * sq_sigmoid(z);
        }
    });
}

void R(sq_silu_backward)(const sq_ctx *cx, real *dx, const real *dout, const real *x, int ld,
                         int rows, int cols)
{
    SQ_ON_GPU(cx, silu_backward, (dx, dout, x, ld, rows, cols));
    SQ_PAR_FOR(int, r, rows, 1, {
        for (int c = 0; c < cols; c++) {
            size_t i = (size_t)r * ld + c;
            real sg = sq_sigmoid(x[i]);
            dx[i] += dout[i] * sg * ((real)1 + x[i] * ((real)1 - sg));
        }
    });
}

void R(sq_gate_forward)(const sq_ctx *cx, real *out, const real *a, int lda, const real *b,
                        int ldb, int rows, int cols)
{
    SQ_ON_GPU(cx, gate_forward, (out, a, lda, b, ldb, rows, cols));
    SQ_PAR_FOR(int, r, rows, 1, {
        for (int c = 0; c < cols; c++)
            out[(size_t)r * cols + c] = a[(size_t)r * lda + c] * b[(size_t)r * ldb + c];
    });
}

void R(sq_gate_backward)(const sq_ctx *cx, real *da, real *db, const real *dout,
                         const real *a, int lda, const real *b, int ldb, int rows, int cols)
{
    SQ_ON_GPU(cx, gate_backward, (da, db, dout, a, lda, b, ldb, rows, cols));
    SQ_PAR_FOR(int, r, rows, 1, {
        for (int c = 0; c < cols; c++) {
            real g = dout[(size_t)r * cols + c];
            if (da)
                da[(size_t)r * lda + c] += g * b[(size_t)r * ldb + c];
            if (db)
                db[(size_t)r * ldb + c] += g * a[(size_t)r * lda + c];
        }
    });
}
