/* compare.h - the paired comparison of two rank files over the same
 * records (seqrec-metrics --compare A B).
 *
 * The units are the records (or, per user, the users: metrics.h
 * sq_metrics_units); for each metric value v (HR@K, NDCG@K, ...) the
 * paired differences d_u = v_B(u) - v_A(u) give
 *   diff        mean d
 *   t-test      t = mean d / (sd d / sqrt n), sd with n - 1; two-sided p
 *               = I_{df/(df+t^2)}(df/2, 1/2), df = n - 1 (the Student t
 *               CDF through the regularized incomplete beta); every d equal:
 *               p = 1 when they are 0, else 0
 *   Wilcoxon    signed-rank over the non-zero d (zeros dropped), |d| ranked
 *               with average ranks for ties; T = min(W+, W-), two-sided p
 *               from the normal approximation with the tie and continuity
 *               corrections: z = (T - m + 1/2) / s, m = n(n+1)/4, s^2 =
 *               (n(n+1)(2n+1) - sum_ties t(t^2-1)/2) / 24, p = erfc(|z|/sqrt 2)
 *               (scipy.stats.wilcoxon's mode "approx"); no non-zero d: p = 1
 *   bootstrap   B resamples of the n units with replacement, drawn from
 *               sq_rng (seed, stream 0), the same resample for every
 *               metric; the 95% interval is the 2.5 and 97.5 percentiles of
 *               the resampled mean differences (linear interpolation
 *               between order statistics, numpy's default). */
#ifndef SQ_COMPARE_H
#define SQ_COMPARE_H

#include <stdint.h>
#include <stdio.h>

#include "err.h"
#include "metrics.h"

/* The regularized incomplete beta I_x(a, b), a, b > 0, 0 <= x <= 1. */
double sq_betainc(double a, double b, double x);
/* The two-sided p-value of Student's t with df degrees of freedom. */
double sq_t_pvalue(double t, double df);
/* The two-sided p-value of the Wilcoxon signed-rank test of d[0..n)
 * (tmp: room for 2n doubles); *w gets T. */
double sq_wilcoxon_p(const double *d, uint64_t n, double *tmp, double *w);

typedef struct {
    double a, b, diff, t, t_p, w, w_p, ci_lo, ci_hi;
} sq_compare_row;

typedef struct {
    int n_k;
    uint32_t k[SQ_METRICS_MAX_K];
    uint64_t records, units;
    int per_user, corrected;
    double gamma;
    uint32_t boot;
    uint64_t seed;
    sq_compare_row row[SQ_MV_N * SQ_METRICS_MAX_K + 1]; /* sq_metrics_nv's order */
} sq_compare;

/* Compares a and b (the same cutoffs) under o with boot resamples (>= 1)
 * seeded by seed. Records that differ (count, or a record's user or item:
 * "record N: user U item I in NAME_A, user U item I in NAME_B") are
 * SQ_EX_DATA. */
int sq_compare_run(const sq_metrics *a, const char *name_a, const sq_metrics *b,
                   const char *name_b, const sq_metrics_opts *o, uint32_t boot, uint64_t seed,
                   sq_compare *c, sq_err *e);

int sq_compare_write_table(const sq_compare *c, FILE *out, const char *name, sq_err *e);
int sq_compare_write_json(const sq_compare *c, FILE *out, const char *name, sq_err *e);

#endif
