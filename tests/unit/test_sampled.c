/* Unit tests for lib/train/sampled.c (seqrec-metrics --corrected bv)
 * against values worked by hand. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "sampled.h"
#include "unit.h"

/* N = 4 items, m = 1 negative: A(R, r) over r = 1, 2 is R=1: 1, 0;
 * R=2: 2/3, 1/3; R=3: 1/3, 2/3; R=4: 0, 1. */
UNIT_TEST(test_sampled_pmf)
{
    CHECK_NEAR(sq_bv_pmf(4, 1, 1, 1), 1.0, 1e-14);
    CHECK_NEAR(sq_bv_pmf(4, 1, 1, 2), 0.0, 0);
    CHECK_NEAR(sq_bv_pmf(4, 1, 2, 1), 2.0 / 3, 1e-14);
    CHECK_NEAR(sq_bv_pmf(4, 1, 3, 2), 2.0 / 3, 1e-14);
    CHECK_NEAR(sq_bv_pmf(4, 1, 4, 2), 1.0, 1e-14);
    /* a larger case sums to 1 over r and has the mean m (R-1)/(N-1) */
    double s = 0, mean = 0;
    for (uint32_t r = 1; r <= 101; r++) {
        double p = sq_bv_pmf(20000, 100, 777, r);
        s += p;
        mean += p * (r - 1);
    }
    CHECK_NEAR(s, 1.0, 1e-10);
    CHECK_NEAR(mean, 100.0 * 776 / 19999, 1e-9);
}

/* gamma = 1: x(r) = sum_R A(R, r) M(R) / sum_R A(R, r).
 *   HR@1 = [1, 0, 0, 0]: x(1) = 1 / 2, x(2) = 0
 *   MRR = 1/R: x(1) = (1 + 1/3 + 1/9) / 2 = 13/18,
 *              x(2) = (1/6 + 2/9 + 1/4) / 2 = 23/72 */
UNIT_TEST(test_sampled_bv_gamma_one_by_hand)
{
    uint32_t k[1] = {1};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    int nv = sq_metrics_nv(&m);
    double x[2 * (SQ_MV_N + 1)];
    CHECK_EQ(sq_bv_weights(&m, 4, 1, 1.0, x, &e), 0);
    CHECK_NEAR(x[SQ_MV_HR], 0.5, 1e-13);
    CHECK_NEAR(x[nv + SQ_MV_HR], 0.0, 1e-13);
    CHECK_NEAR(x[SQ_MV_N], 13.0 / 18, 1e-13);
    CHECK_NEAR(x[nv + SQ_MV_N], 23.0 / 72, 1e-13);
    /* smaller gamma: less bias. E[x(r) | R] over uniform R, the bias of
     * HR@1 summed in squares, is below gamma = 1's */
    double xs[2 * (SQ_MV_N + 1)];
    CHECK_EQ(sq_bv_weights(&m, 4, 1, 0.05, xs, &e), 0);
    double b1 = 0, b2 = 0;
    for (uint32_t R = 1; R <= 4; R++) {
        double want = R == 1, e1 = 0, e2 = 0;
        for (uint32_t r = 1; r <= 2; r++) {
            e1 += sq_bv_pmf(4, 1, R, r) * x[(r - 1) * nv + SQ_MV_HR];
            e2 += sq_bv_pmf(4, 1, R, r) * xs[(r - 1) * nv + SQ_MV_HR];
        }
        b1 += (e1 - want) * (e1 - want);
        b2 += (e2 - want) * (e2 - want);
    }
    CHECK(b2 < b1);
    /* refusals */
    CHECK_EQ(sq_bv_weights(&m, 4, 3, 0.5, x, &e), SQ_EX_SOFTWARE);
    sq_metrics_free(&m);
}

UNIT_TEST(test_sampled_parse)
{
    sq_metrics_opts o = {0};
    sq_err e = {0};
    CHECK_EQ(sq_metrics_parse_corrected("rank", &o, &e), 0);
    CHECK_EQ(o.corrected, SQ_CORR_RANK);
    CHECK_EQ(sq_metrics_parse_corrected("bv", &o, &e), 0);
    CHECK_EQ(o.corrected, SQ_CORR_BV);
    CHECK_NEAR(o.gamma, 0.1, 0);
    CHECK_EQ(sq_metrics_parse_corrected("bv:0.5", &o, &e), 0);
    CHECK_NEAR(o.gamma, 0.5, 0);
    const char *bad[] = {"bv:0", "bv:1.5", "bv:", "bv:x", "bvx", "mle", ""};
    for (int i = 0; i < 7; i++) {
        e = (sq_err){0};
        CHECK_EQ(sq_metrics_parse_corrected(bad[i], &o, &e), SQ_EX_USAGE);
    }
}
