/* gradcheck.h - central finite differences for the op tests.
 *
 * The objective is a scalar function of some double arrays held in a
 * context (for an op: run the _f64 forward and return sum(out * w) with
 * fixed random w, whose gradient w.r.t. the output is w itself). gc_check
 * perturbs every element of one input array x in place, forms the
 * fourth-order central difference
 *     fd_i = (8 (f(x + h e_i) - f(x - h e_i)) - (f(x + 2h e_i) - f(x - 2h e_i))) / 12h
 * (truncation O(h^4) ~ 1e-16, round-off ~ 1e-16 |f| / h ~ 1e-12 at h = 1e-4;
 * the plain two-point form at h = 1e-6 leaves ~1e-7 of noise, too close to
 * the tolerance to tell a small bug from round-off) and compares it with the
 * analytic gradient g_i. */
#ifndef SQ_GRADCHECK_H
#define SQ_GRADCHECK_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "rng.h"

typedef double (*gc_objective)(void *ctx);

#define GC_H 1e-4      /* step */
#define GC_FLOOR 1e-3  /* relative error is absolute below this gradient size */

/* Largest |g_i - fd_i| / max(|g_i|, |fd_i|, GC_FLOOR) over x[0..n-1]. */
static inline double gc_check(gc_objective f, void *ctx, double *x,
                              const double *g, size_t n)
{
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double save = x[i];
        x[i] = save + GC_H;
        double fp = f(ctx);
        x[i] = save - GC_H;
        double fm = f(ctx);
        x[i] = save + 2 * GC_H;
        double fp2 = f(ctx);
        x[i] = save - 2 * GC_H;
        double fm2 = f(ctx);
        x[i] = save;
        double fd = (8 * (fp - fm) - (fp2 - fm2)) / (12 * GC_H);
        double den = fmax(fmax(fabs(g[i]), fabs(fd)), GC_FLOOR);
        double err = fabs(g[i] - fd) / den;
        if (!(err <= worst)) /* also catches NaN */
            worst = err;
    }
    return worst;
}

/* Normwise agreement of a float result with the double one:
 * max_i |a_i - b_i| / max(max_i |b_i|, 1e-30). */
static inline double gc_rel_diff(const float *a, const double *b, size_t n)
{
    double dmax = 0, bmax = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (!(d <= dmax))
            dmax = d;
        if (fabs(b[i]) > bmax)
            bmax = fabs(b[i]);
    }
    return dmax / fmax(bmax, 1e-30);
}

/* The same normwise agreement of two double arrays. */
static inline double gc_rel_diff_f64(const double *a, const double *b, size_t n)
{
    double dmax = 0, bmax = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(a[i] - b[i]);
        if (!(d <= dmax))
            dmax = d;
        bmax = fmax(bmax, fabs(b[i]));
    }
    return dmax / fmax(bmax, 1e-30);
}

static inline double *gc_zeros(size_t n)
{
    return calloc(n ? n : 1, sizeof(double));
}

static inline double *gc_normal(sq_rng *r, size_t n, double scale)
{
    double *x = gc_zeros(n);
    for (size_t i = 0; i < n; i++)
        x[i] = scale * sq_rng_normal(r);
    return x;
}

static inline float *gc_to_float(const double *x, size_t n)
{
    float *y = calloc(n ? n : 1, sizeof(float));
    for (size_t i = 0; i < n; i++)
        y[i] = (float)x[i];
    return y;
}

static inline double gc_dot(const double *a, const double *b, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += a[i] * b[i];
    return s;
}

/* Prints the measured error when SQ_TEST_VERBOSE is set in the environment. */
static inline void gc_note(const char *test, const char *what, double err)
{
    if (getenv("SQ_TEST_VERBOSE"))
        printf("    %-34s %-26s %.2e\n", test, what, err);
}

#endif
