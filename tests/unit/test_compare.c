/* Unit tests for lib/train/compare.c: the special functions against values
 * worked by hand and values of scipy 1.10.1 (scipy.special.betainc,
 * 2 * scipy.stats.t.sf, scipy.stats.wilcoxon(mode="approx")), and the
 * comparison of two small rank sets. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compare.h"
#include "unit.h"

UNIT_TEST(test_compare_betainc)
{
    /* I_x(2, 3) = 6x^2/2 - 8x^3/3 ... = x^2 (6 - 8x + 3x^2): 0.5248 at 0.4 */
    CHECK_NEAR(sq_betainc(2, 3, 0.4), 0.5248, 1e-13);
    /* I_x(1/2, 1/2) = 2/pi asin(sqrt x) */
    CHECK_NEAR(sq_betainc(0.5, 0.5, 0.3), 2 / M_PI * asin(sqrt(0.3)), 1e-13);
    CHECK_NEAR(sq_betainc(0.5, 0.5, 1e-8), 6.366197734286144e-05, 1e-16);
    /* scipy.special.betainc */
    CHECK_NEAR(sq_betainc(10, 0.5, 0.9), 0.15164090963470997, 1e-12);
    CHECK_NEAR(sq_betainc(100, 0.5, 0.99), 0.15677586542443941, 1e-12);
    CHECK_NEAR(sq_betainc(5000, 0.5, 0.999), 0.0015615791602887161, 1e-13);
    CHECK_NEAR(sq_betainc(3, 4, 0), 0, 0);
    CHECK_NEAR(sq_betainc(3, 4, 1), 1, 0);
}

UNIT_TEST(test_compare_t_pvalue)
{
    /* one degree of freedom (Cauchy): p = 1 - 2/pi atan(t) */
    CHECK_NEAR(sq_t_pvalue(0.5, 1), 1 - 2 / M_PI * atan(0.5), 1e-13);
    /* 2 * scipy.stats.t.sf(|t|, df) */
    CHECK_NEAR(sq_t_pvalue(2.0, 5), 0.10193947882985828, 1e-12);
    CHECK_NEAR(sq_t_pvalue(-3.2, 30), 0.0032386017119531373, 1e-14);
    CHECK_NEAR(sq_t_pvalue(1.96, 1e6), 0.04999606758526978, 1e-10);
    double p = sq_t_pvalue(10, 399);
    CHECK(fabs(p - 3.707202633497368e-21) < 1e-9 * 3.7e-21);
    CHECK_NEAR(sq_t_pvalue(0, 10), 1.0, 1e-15);
}

/* d = 1 -2 3 3 -0.5 0 4 4 4 -1: nine non-zero, |d| ranks 0.5:1, 1:2.5 (two),
 * 2:4, 3:5.5 (two), 4:8 (three); W+ = 2.5 + 5.5 + 5.5 + 24 = 37.5, W- =
 * 7.5, T = 7.5; mean 22.5, ties 6 + 6 + 24 = 36, var (1710 - 18)/24 =
 * 70.5; z = (7.5 - 22.5 + 0.5)/sqrt(70.5); p = erfc(|z|/sqrt 2), which
 * scipy gives as 0.08418115742117628. */
UNIT_TEST(test_compare_wilcoxon)
{
    double d[10] = {1, -2, 3, 3, -0.5, 0, 4, 4, 4, -1}, tmp[20], w;
    double p = sq_wilcoxon_p(d, 10, tmp, &w);
    CHECK_NEAR(w, 7.5, 0);
    CHECK_NEAR(p, erfc(14.5 / sqrt(70.5) / sqrt(2.0)), 1e-15);
    CHECK_NEAR(p, 0.08418115742117628, 1e-13);
    double z[3] = {0, 0, 0};
    CHECK_NEAR(sq_wilcoxon_p(z, 3, tmp, &w), 1.0, 0);
}

/* Two rank sets of three records: A ranks 1, 2, 4; B ranks 1, 1, 1 (K 1):
 * HR@1 A 1/3, B 1, d = 0, 1, 1: mean 2/3, sd 0.57735, t = 2, df 2,
 * p = 1 - 2/sqrt(6) = 0.18350; every bootstrap mean lies in [0, 1]. */
UNIT_TEST(test_compare_run)
{
    uint32_t k[1] = {1};
    sq_metrics a, b;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&a, k, 1, &e), 0);
    CHECK_EQ(sq_metrics_init(&b, k, 1, &e), 0);
    uint32_t ra[3] = {1, 2, 4};
    for (uint32_t i = 0; i < 3; i++) {
        CHECK_EQ(sq_metrics_add_item(&a, i + 1, ra[i], 10, 5, &e), 0);
        CHECK_EQ(sq_metrics_add_item(&b, i + 1, 1, 10, 5, &e), 0);
    }
    sq_metrics_opts o = {0};
    sq_compare *c = malloc(sizeof *c);
    CHECK(c != NULL);
    CHECK_EQ(sq_compare_run(&a, "A", &b, "B", &o, 200, 7, c, &e), 0);
    const sq_compare_row *r = &c->row[SQ_MV_HR];
    CHECK_NEAR(r->a, 1.0 / 3, 1e-15);
    CHECK_NEAR(r->b, 1.0, 1e-15);
    CHECK_NEAR(r->diff, 2.0 / 3, 1e-15);
    CHECK_NEAR(r->t, 2.0, 1e-12);
    CHECK_NEAR(r->t_p, 1 - 2 / sqrt(6.0), 1e-12);
    CHECK(r->ci_lo >= 0 && r->ci_lo <= r->diff && r->ci_hi >= r->diff && r->ci_hi <= 1);
    /* the same seed, the same interval; the records must match */
    sq_compare *c2 = malloc(sizeof *c2);
    CHECK(c2 != NULL);
    CHECK_EQ(sq_compare_run(&a, "A", &b, "B", &o, 200, 7, c2, &e), 0);
    CHECK(c2->row[SQ_MV_HR].ci_lo == r->ci_lo && c2->row[SQ_MV_HR].ci_hi == r->ci_hi);
    CHECK_EQ(sq_metrics_add_item(&b, 9, 1, 10, 5, &e), 0);
    CHECK_EQ(sq_compare_run(&a, "A", &b, "B", &o, 200, 7, c2, &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "--compare: A has 3 records, B 4: not the same records");
    b.rec[1].item = 6;
    e = (sq_err){0};
    CHECK_EQ(sq_metrics_add_item(&a, 9, 1, 10, 5, &e), 0);
    CHECK_EQ(sq_compare_run(&a, "A", &b, "B", &o, 200, 7, c2, &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "--compare: record 2 differs: user 2 item 5 in A, user 2 item 6 in B");
    free(c);
    free(c2);
    sq_metrics_free(&a);
    sq_metrics_free(&b);
}
