/* Unit tests for lib/train/exposure.c against values worked by hand. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "exposure.h"
#include "unit.h"

/* Counts 0, 2, 2, 5 of items 1..4: the percentiles 100 (less + equal/2)/4
 * are 12.5, 50, 50, 87.5. */
UNIT_TEST(test_exposure_popularity_pct)
{
    uint64_t c[5] = {0, 0, 2, 2, 5};
    double p[5];
    sq_err e = {0};
    CHECK_EQ(sq_popularity_pct(c, 4, p, &e), 0);
    CHECK_NEAR(p[1], 12.5, 1e-12);
    CHECK_NEAR(p[2], 50.0, 1e-12);
    CHECK_NEAR(p[3], 50.0, 1e-12);
    CHECK_NEAR(p[4], 87.5, 1e-12);
}

/* Lists {2,3,4} and {2,4,1} of 6 items.
 *   @1: counts item2 = 2: coverage 1/6, Gini (2*6-6-1)*2/(6*2) = 10/12
 *   @3: counts 1,2,1,2,0,0 -> sorted 0,0,1,1,2,2, sum 6:
 *       sum (2j-7) c_j = 1*(-1) + 1*1 + 2*3 + 2*5 = 16, Gini 16/36
 *   PopBias@1 with pct = 10 i: both lists 20 -> 20; @3: (20+30+40)/3 = 30,
 *   (20+40+10)/3 = 70/3 -> mean 80/3; per user (both user 5): the same mean. */
UNIT_TEST(test_exposure_lists_by_hand)
{
    uint32_t k[2] = {1, 3};
    double pct[7] = {0, 10, 20, 30, 40, 50, 60};
    uint32_t l1[3] = {2, 3, 4}, l2[3] = {2, 4, 1};
    sq_exposure x;
    sq_err e = {0};
    CHECK_EQ(sq_exposure_init(&x, k, 2, 6, pct, &e), 0);
    CHECK_EQ(sq_exposure_add(&x, 5, l1, 3, 1, &e), 0);
    CHECK_EQ(sq_exposure_add(&x, 5, l2, 3, 1, &e), 0);
    uint32_t bad = 7;
    CHECK_EQ(sq_exposure_add(&x, 5, &bad, 1, 1, &e), SQ_EX_DATA);
    sq_metrics_report r = {0};
    CHECK_EQ(sq_exposure_report(&x, 0, &r, &e), 0);
    CHECK_EQ(r.lists, 2);
    CHECK_NEAR(r.coverage[0], 1.0 / 6, 1e-12);
    CHECK_NEAR(r.gini[0], 10.0 / 12, 1e-12);
    CHECK_NEAR(r.coverage[1], 4.0 / 6, 1e-12);
    CHECK_NEAR(r.gini[1], 16.0 / 36, 1e-12);
    CHECK_NEAR(r.popbias[0], 20.0, 1e-12);
    CHECK_NEAR(r.popbias[1], 80.0 / 3, 1e-12);
    CHECK_EQ(sq_exposure_report(&x, 1, &r, &e), 0);
    CHECK_NEAR(r.popbias[1], 80.0 / 3, 1e-12);
    sq_exposure_free(&x);
}

/* A rank record is a list of its target at its rank: rank 3 is in the top
 * 3, not the top 1; PopBias skips a list with nothing within K. Per user:
 * user 1 (items 1 at rank 1, 2 at rank 1: 15), user 2 (item 6: 60) ->
 * 37.5; per list (10 + 20 + 60)/3 = 30. */
UNIT_TEST(test_exposure_rank_records)
{
    uint32_t k[2] = {1, 3};
    double pct[7] = {0, 10, 20, 30, 40, 50, 60};
    sq_exposure x;
    sq_err e = {0};
    CHECK_EQ(sq_exposure_init(&x, k, 2, 6, pct, &e), 0);
    uint32_t i1 = 1, i2 = 2, i6 = 6, i4 = 4;
    CHECK_EQ(sq_exposure_add(&x, 1, &i1, 1, 1, &e), 0);
    CHECK_EQ(sq_exposure_add(&x, 1, &i2, 1, 1, &e), 0);
    CHECK_EQ(sq_exposure_add(&x, 2, &i6, 1, 1, &e), 0);
    CHECK_EQ(sq_exposure_add(&x, 2, &i4, 1, 3, &e), 0);
    sq_metrics_report r = {0};
    CHECK_EQ(sq_exposure_report(&x, 0, &r, &e), 0);
    CHECK_NEAR(r.coverage[0], 3.0 / 6, 1e-12);
    CHECK_NEAR(r.coverage[1], 4.0 / 6, 1e-12);
    CHECK_NEAR(r.popbias[0], 30.0, 1e-12);
    CHECK_EQ(sq_exposure_report(&x, 1, &r, &e), 0);
    CHECK_NEAR(r.popbias[0], 37.5, 1e-12);
    /* @3 per user: user 1 15, user 2 (60 + 40)/2 = 50 */
    CHECK_NEAR(r.popbias[1], 32.5, 1e-12);
    sq_exposure_free(&x);
}
