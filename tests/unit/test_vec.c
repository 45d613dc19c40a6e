/* Unit tests for lib/ops/vec.h: the vectorisable exp and erf against
 * libm, and the counter-based uniforms of dropout. Set SQ_TEST_VERBOSE=1
 * to print the measured errors. */
#include <stdint.h>
#include <stdlib.h>

#include "unit.h"
#include "vec.h"

static int verbose(void)
{
    const char *v = getenv("SQ_TEST_VERBOSE");
    return v && *v && *v != '0';
}

UNIT_TEST(test_vec_exp)
{
    /* relative error against double exp over the range softmax and GELU
     * use (x <= 0) and the positive side up to the clamp */
    double worst = 0;
    for (int k = 0; k <= 2000000; k++) {
        float x = -87.0f + 175.0f * (float)k / 2000000.0f;
        double ref = exp((double)x), e = fabs((double)sq_vexpf(x) - ref) / ref;
        if (e > worst)
            worst = e;
    }
    if (verbose())
        fprintf(stderr, "  sq_vexpf: worst relative error %.3g (float eps 1.19e-7)\n", worst);
    CHECK(worst < 3.6e-7); /* 3 ulp */
    CHECK(sq_vexpf(0.0f) == 1.0f);
    CHECK(sq_vexpf(-1e30f) >= 0 && sq_vexpf(-1e30f) < 1e-37f);
    CHECK(isnan(sq_vexpf(NAN)));
    CHECK(isfinite(sq_vexpf(1e30f)));
}

UNIT_TEST(test_vec_erf)
{
    double worst = 0;
    for (int k = 0; k <= 400000; k++) {
        float x = -6.0f + 12.0f * (float)k / 400000.0f;
        double e = fabs((double)sq_verff(x) - erf((double)x));
        if (e > worst)
            worst = e;
    }
    if (verbose())
        fprintf(stderr, "  sq_verff: worst absolute error %.3g\n", worst);
    CHECK(worst < 6e-7); /* A&S's 1.5e-7 plus float rounding */
    CHECK(sq_verff(0.0f) == 0.0f);
    CHECK(sq_verff(-1.5f) == -sq_verff(1.5f));
}

UNIT_TEST(test_vec_counter_uniform)
{
    /* moments, a 64-bin histogram and the lag-1 correlation of 2^20
     * consecutive counters (the dropout pattern), for two keys */
    enum { N = 1 << 20, BINS = 64 };
    uint64_t keys[2] = {0x1234567ull, 0xfedcba9876543210ull};
    for (int k = 0; k < 2; k++) {
        long hist[BINS] = {0};
        double s = 0, s2 = 0, lag = 0, prev = 0;
        int in_range = 1;
        for (uint32_t i = 0; i < N; i++) {
            double u = sq_counter_uniform(keys[k], i);
            in_range &= u >= 0 && u < 1;
            s += u;
            s2 += u * u;
            lag += (u - 0.5) * (prev - 0.5);
            prev = u;
            hist[(int)(u * BINS)]++;
        }
        double mean = s / N, var = s2 / N - mean * mean, corr = lag / N / (1.0 / 12);
        double chi2 = 0, expect = (double)N / BINS;
        for (int b = 0; b < BINS; b++)
            chi2 += (hist[b] - expect) * (hist[b] - expect) / expect;
        if (verbose())
            fprintf(stderr, "  key %d: mean %.5f var %.5f lag-1 corr %.2g chi2(63) %.1f\n", k,
                    mean, var, corr, chi2);
        CHECK(in_range);
        CHECK(fabs(mean - 0.5) < 0.0015);   /* sd 2.8e-4 */
        CHECK(fabs(var - 1.0 / 12) < 0.001);
        CHECK(fabs(corr) < 0.005);          /* sd 1e-3 */
        CHECK(chi2 < 120);                  /* 63 dof: p < 1e-5 above */
    }
    /* another key, another stream */
    int same = 0;
    for (uint32_t i = 0; i < 1000; i++)
        same += sq_counter_uniform(keys[0], i) == sq_counter_uniform(keys[1], i);
    CHECK(same < 5);
}

UNIT_TEST(test_vec_lanes_sum)
{
    float acc[SQ_LANES];
    for (int l = 0; l < SQ_LANES; l++)
        acc[l] = (float)(l + 1);
    CHECK(sq_lanes_sum(acc) == 136.0f);
    /* the fixed tree, not a left-to-right sum: 1e8 + 1 - 1e8 differs */
    for (int l = 0; l < SQ_LANES; l++)
        acc[l] = 0;
    acc[0] = 1e8f;
    acc[8] = 1.0f;
    acc[1] = -1e8f;
    CHECK(sq_lanes_sum(acc) == 0.0f);
}
