/* l2norm.h - row-wise L2 normalisation with a scale (CORE's F.normalize
 * of the session representation and of the item embeddings):
 *
 *     y_t = s x_t / max(||x_t||, eps)
 *
 * and its backward, with n = ||x_t|| > eps:
 *
 *     dx_t = (s / n) dy_t - (1 / (s n)) y_t (y_t . dy_t)
 *
 * (n <= eps: dx_t = (s / eps) dy_t, the clamped branch). Conventions of
 * ops.h: the op context first, the input gradient ADDED, each row on its
 * own (bitwise the same for any thread count). */
#ifndef SQ_L2NORM_H
#define SQ_L2NORM_H

#include "ctx.h"

#define SQ_TWICE "l2norm.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* out [T, C] = s inp / max(||inp||, eps) row by row; norm [T] keeps ||inp_t||. */
void R(sq_l2norm_forward)(const sq_ctx *cx, real *out, real *norm, const real *inp, int T,
                          int C, real s, real eps);
/* dinp += d loss / d inp given dout, the forward's out and norm. */
void R(sq_l2norm_backward)(const sq_ctx *cx, real *dinp, const real *dout, const real *out,
                           const real *norm, int T, int C, real s, real eps);

#endif
