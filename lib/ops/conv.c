/* conv.c - Caser's horizontal (conv + relu + max over time) and vertical
 * convolutions over windows of L rows (equations and conventions: conv.h).
 *
 * Written over `real` and compiled twice: as float, and as double into
 * conv_f64.o (see real.h). The forwards and the input gradients go window
 * by window (windows are independent); the weight and bias gradients are
 * sums over the windows, split by filter instead, each filter summing its
 * windows in ascending order, so every sum has a fixed order whatever the
 * thread count. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "conv.h"
#include "real.h"
#include "ongpu.h"
#include "vec.h"

/* Below this many multiply-adds an op runs on one thread (a fork costs
 * more than a few microseconds of work). */
#define PAR_MIN_WORK 16384

static int par_worth(double work)
{
    return work >= PAR_MIN_WORK;
}

/* ------------------------------------------------------------------------ */
/* Horizontal filters                                                       */

/* One window: every height and filter, its max over positions. A filter
 * of height h over rows p..p+h-1 is one dot product of h C reals, since
 * the rows are contiguous. */
static void R(hconv_window)(real *out, int *arg, const real *x, const real *w, const real *b,
                            int L, int C, int F)
{
    for (int h = 1; h <= L; h++) {
        const real *wh = w + sq_hconv_offset(h, F, C);
        int hc = h * C;
        for (int f = 0; f < F; f++) {
            const real *wf = wh + (size_t)f * hc;
            real best = 0;
            int at = -1;
            for (int p = 0; p + h <= L; p++) {
                real a = b[(h - 1) * F + f] + sq_dot(wf, x + (size_t)p * C, hc);
                if (at < 0 || a > best) {
                    best = a;
                    at = p;
                }
            }
            out[(h - 1) * F + f] = best > 0 ? best : 0;
            arg[(h - 1) * F + f] = best > 0 ? at : -1;
        }
    }
}

void R(sq_hconv_forward)(const sq_ctx *cx, real *out, int ldo, int *arg, const real *x,
                         const real *w, const real *b, int n, int L, int C, int F)
{
    SQ_ON_GPU(cx, hconv_forward, (out, ldo, arg, x, w, b, n, L, C, F));
    double work = (double)n * F * C * L * L;
    SQ_PAR_LOOP(static, par_worth(work), int, i, n, 1, {
        R(hconv_window)(out + (size_t)i * ldo, arg + (size_t)i * L * F,
                        x + (size_t)i * L * C, w, b, L, C, F);
    });
}

/* dx of one window: each live output sends dout w_h[f] to the h rows of
 * its maximum. */
static void R(hconv_dx_window)(real *dx, const real *dout, const int *arg, const real *w,
                               int L, int C, int F)
{
    for (int h = 1; h <= L; h++) {
        const real *wh = w + sq_hconv_offset(h, F, C);
        for (int f = 0; f < F; f++) {
            int p = arg[(h - 1) * F + f];
            if (p >= 0)
                sq_axpy(dx + (size_t)p * C, dout[(h - 1) * F + f], wh + (size_t)f * h * C,
                        h * C);
        }
    }
}

void R(sq_hconv_backward)(const sq_ctx *cx, real *dx, real *dw, real *db, const real *dout,
                          int ldo, const int *arg, const real *x, const real *w, int n, int L,
                          int C, int F)
{
    SQ_ON_GPU(cx, hconv_backward, (dx, dw, db, dout, ldo, arg, x, w, n, L, C, F));
    double work = (double)n * F * C * L * L;
    SQ_PAR_LOOP(static, par_worth(work), int, i, n, 1, {
        R(hconv_dx_window)(dx + (size_t)i * L * C, dout + (size_t)i * ldo,
                           arg + (size_t)i * L * F, w, L, C, F);
    });
    /* filter j = (h - 1) F + f: dw_h[f] += dout x[rows of the max] and
     * db += dout, over the windows in ascending order */
    SQ_PAR_LOOP(dynamic, par_worth(work), int, j, L * F, 1, {
        int h = j / F + 1, f = j % F;
        real *dwf = dw + sq_hconv_offset(h, F, C) + (size_t)f * h * C, dbf = 0;
        for (int i = 0; i < n; i++) {
            int p = arg[(size_t)i * L * F + j];
            if (p < 0)
                continue;
            real g = dout[(size_t)i * ldo + j];
            sq_axpy(dwf, g, x + ((size_t)i * L + p) * C, h * C);
            dbf += g;
        }
        db[j] += dbf;
    });
}

/* ------------------------------------------------------------------------ */
/* Vertical filters                                                         */

void R(sq_vconv_forward)(const sq_ctx *cx, real *out, int ldo, const real *x, const real *w,
                         const real *b, int n, int L, int C, int F)
{
    SQ_ON_GPU(cx, vconv_forward, (out, ldo, x, w, b, n, L, C, F));
    SQ_PAR_LOOP(static, par_worth((double)n * F * L * C), int, i, n, 1, {
        const real *xi = x + (size_t)i * L * C;
        for (int f = 0; f < F; f++) {
            real *y = out + (size_t)i * ldo + (size_t)f * C;
            for (int c = 0; c < C; c++)
                y[c] = b ? b[f] : 0;
            for (int k = 0; k < L; k++)
                sq_axpy(y, w[(size_t)f * L + k], xi + (size_t)k * C, C);
        }
    });
}

void R(sq_vconv_backward)(const sq_ctx *cx, real *dx, real *dw, real *db, const real *dout,
                          int ldo, const real *x, const real *w, int n, int L, int C, int F)
{
    SQ_ON_GPU(cx, vconv_backward, (dx, dw, db, dout, ldo, x, w, n, L, C, F));
    int par = par_worth((double)n * F * L * C);
    /* dx[i, k] += sum_f w[f, k] dout[i, f] */
    SQ_PAR_LOOP(static, par, int, i, n, 1, {
        for (int k = 0; k < L; k++)
            for (int f = 0; f < F; f++)
                sq_axpy(dx + ((size_t)i * L + k) * C, w[(size_t)f * L + k],
                        dout + (size_t)i * ldo + (size_t)f * C, C);
    });
    /* dw[f, k] += sum_i dout[i, f] . x[i, k]; db[f] += sum_i sum_c dout[i, f, c] */
    SQ_PAR_LOOP(static, par, int, f, F, 1, {
        real dbf = 0;
        for (int i = 0; i < n; i++) {
            const real *g = dout + (size_t)i * ldo + (size_t)f * C;
            for (int k = 0; k < L; k++)
                dw[(size_t)f * L + k] += sq_dot(g, x + ((size_t)i * L + k) * C, C);
            for (int c = 0; c < C; c++)
                dbf += g[c];
        }
        if (db)
            db[f] += dbf;
    });
}
