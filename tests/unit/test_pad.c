/* Unit tests for lib/data/pad.c: zero padding and RandomPad rows. */
#include <stdint.h>
#include <stdlib.h>

#include "pad.h"
#include "rng.h"
#include "unit.h"

static int row_eq(const uint32_t *a, const uint32_t *b, uint32_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

UNIT_TEST(test_pad_zero_left_right)
{
    uint32_t s[3] = {7, 8, 9}, row[6];
    CHECK_EQ(sq_pad_row(row, 6, s, 3, SQ_PAD_ZERO_LEFT, NULL), 3);
    uint32_t left[6] = {0, 0, 0, 7, 8, 9};
    CHECK(row_eq(row, left, 6));
    CHECK_EQ(sq_pad_row(row, 6, s, 3, SQ_PAD_ZERO_RIGHT, NULL), 3);
    uint32_t right[6] = {7, 8, 9, 0, 0, 0};
    CHECK(row_eq(row, right, 6));
    /* Exactly n items: no padding either way. */
    CHECK_EQ(sq_pad_row(row, 3, s, 3, SQ_PAD_ZERO_LEFT, NULL), 3);
    CHECK(row_eq(row, s, 3));
    /* Empty sequence: a row of zeros. */
    for (int i = 0; i < 6; i++)
        row[i] = 99;
    CHECK_EQ(sq_pad_row(row, 6, s, 0, SQ_PAD_ZERO_RIGHT, NULL), 0);
    uint32_t zeros[6] = {0};
    CHECK(row_eq(row, zeros, 6));
}

UNIT_TEST(test_pad_truncation_keeps_newest)
{
    uint32_t s[7] = {1, 2, 3, 4, 5, 6, 7}, row[4];
    uint32_t newest[4] = {4, 5, 6, 7};
    CHECK_EQ(sq_pad_row(row, 4, s, 7, SQ_PAD_ZERO_LEFT, NULL), 4);
    CHECK(row_eq(row, newest, 4));
    CHECK_EQ(sq_pad_row(row, 4, s, 7, SQ_PAD_ZERO_RIGHT, NULL), 4);
    CHECK(row_eq(row, newest, 4));
    sq_rng r;
    sq_rng_seed(&r, 1, 0);
    sq_rng before = r;
    CHECK_EQ(sq_pad_row(row, 4, s, 7, SQ_PAD_RANDOM, &r), 4);
    CHECK(row_eq(row, newest, 4));
    CHECK(memcmp(&r, &before, sizeof r) == 0); /* no draw when nothing fits */
}

UNIT_TEST(test_randompad_max)
{
    CHECK_EQ(sq_randompad_max(3, 10), 1);  /* S0S = 7 fits, S0S0S = 11 does not */
    CHECK_EQ(sq_randompad_max(2, 10), 2);  /* S0S0S = 8, four copies 11 */
    CHECK_EQ(sq_randompad_max(1, 10), 4);  /* 1010101010 minus one: 5 copies = 9 */
    CHECK_EQ(sq_randompad_max(1, 2), 0);   /* |S| = n/2: no repeat (Blin 5.2) */
    CHECK_EQ(sq_randompad_max(5, 10), 0);
    CHECK_EQ(sq_randompad_max(4, 10), 1);
    CHECK_EQ(sq_randompad_max(10, 10), 0);
    CHECK_EQ(sq_randompad_max(11, 10), 0);
    CHECK_EQ(sq_randompad_max(0, 10), 0);
    CHECK_EQ(sq_randompad_max(1, 100), 49);
    /* alpha >= 1 exactly when 2|S| < n, for every small case; and the
     * largest alpha always fits while alpha + 1 never does. */
    for (uint32_t n = 1; n <= 64; n++)
        for (uint32_t m = 1; m <= n; m++) {
            uint32_t a = sq_randompad_max(m, n);
            CHECK_EQ(a >= 1, 2 * m < n);
            CHECK((a + 1) * m + a <= n);
            CHECK((a + 2) * m + (a + 1) > n);
        }
}

/* Checks one RandomPad row of s[m] (m <= n) and returns alpha, or -1. */
static int check_randompad_row(const uint32_t *row, uint32_t n, const uint32_t *s, uint32_t m,
                               uint32_t span)
{
    uint32_t pos = n, copies = 0;
    /* Walk copies from the right: S, then (0 S)* , then only zeros. */
    for (;;) {
        if (pos < m || !row_eq(row + pos - m, s, m))
            return -1;
        pos -= m;
        copies++;
        if (pos >= m + 1 && row[pos - 1] == 0 && row_eq(row + pos - 1 - m, s, m))
            pos--; /* exactly one separator before the next copy */
        else
            break;
    }
    if (n - pos != span)
        return -1;
    for (uint32_t i = 0; i < pos; i++)
        if (row[i] != 0)
            return -1;
    return (int)copies - 1;
}

UNIT_TEST(test_randompad_invariants)
{
    uint32_t row[64], again[64], s[64];
    for (uint32_t i = 0; i < 64; i++)
        s[i] = 100 + i; /* no zeros, all distinct */
    for (uint32_t n = 1; n <= 40; n += 3) {
        for (uint32_t m = 1; m <= n + 2 && m <= 64; m++) {
            uint32_t k = m < n ? m : n;
            uint32_t max = sq_randompad_max(k, n);
            int seen_lo = 0, seen_hi = 0;
            for (uint64_t seed = 0; seed < 200; seed++) {
                sq_rng r;
                sq_rng_seed(&r, seed, sq_pad_stream(m, n));
                uint32_t span = sq_pad_row(row, n, s, m, SQ_PAD_RANDOM, &r);
                int alpha = check_randompad_row(row, n, s + (m - k), k, span);
                CHECK(alpha >= 0); /* ends at n-1, single 0 separators, zeros left */
                CHECK(row[n - 1] == s[m - 1]);
                CHECK_EQ(span, (uint32_t)(alpha + 1) * k + (uint32_t)alpha);
                if (max == 0)
                    CHECK_EQ(alpha, 0); /* includes every 2|S| >= n */
                else
                    CHECK(alpha >= 1 && (uint32_t)alpha <= max);
                seen_lo |= alpha == 1;
                seen_hi |= (uint32_t)alpha == max;
                /* Same seed, same row. */
                sq_rng_seed(&r, seed, sq_pad_stream(m, n));
                sq_pad_row(again, n, s, m, SQ_PAD_RANDOM, &r);
                CHECK(row_eq(row, again, n));
            }
            if (max >= 1 && max <= 20) { /* both ends of [1, max] are drawn */
                CHECK(seen_lo);
                CHECK(seen_hi);
            }
        }
    }
}

UNIT_TEST(test_randompad_uniform_alpha)
{
    /* |S| = 1, n = 100: alpha uniform on 1..49; 49000 draws, each value
     * expected 1000 times; 5 sigma is about 160. */
    uint32_t s[1] = {5}, row[100];
    int count[50] = {0};
    for (uint64_t seed = 0; seed < 49000; seed++) {
        sq_rng r;
        sq_rng_seed(&r, 9, seed);
        uint32_t span = sq_pad_row(row, 100, s, 1, SQ_PAD_RANDOM, &r);
        uint32_t alpha = (span + 1) / 2 - 1;
        CHECK(alpha >= 1 && alpha <= 49);
        if (alpha >= 1 && alpha <= 49)
            count[alpha]++;
    }
    for (int a = 1; a <= 49; a++)
        CHECK(count[a] > 840 && count[a] < 1160);
}

UNIT_TEST(test_randompad_example_rows)
{
    /* The man page's example: |S| = 3, n = 10 has room for alpha = 1 only. */
    uint32_t s[3] = {1, 2, 3}, row[10];
    uint32_t want[10] = {0, 0, 0, 1, 2, 3, 0, 1, 2, 3};
    for (uint64_t seed = 0; seed < 10; seed++) {
        sq_rng r;
        sq_rng_seed(&r, seed, 0);
        CHECK_EQ(sq_pad_row(row, 10, s, 3, SQ_PAD_RANDOM, &r), 7);
        CHECK(row_eq(row, want, 10));
    }
    /* |S| = 2, n = 10: alpha in {1, 2}. */
    uint32_t s2[2] = {4, 5};
    uint32_t a1[10] = {0, 0, 0, 0, 0, 4, 5, 0, 4, 5};
    uint32_t a2[10] = {0, 0, 4, 5, 0, 4, 5, 0, 4, 5};
    int n1 = 0, n2 = 0;
    for (uint64_t seed = 0; seed < 100; seed++) {
        sq_rng r;
        sq_rng_seed(&r, seed, 0);
        sq_pad_row(row, 10, s2, 2, SQ_PAD_RANDOM, &r);
        n1 += row_eq(row, a1, 10);
        n2 += row_eq(row, a2, 10);
    }
    CHECK_EQ(n1 + n2, 100);
    CHECK(n1 > 0 && n2 > 0);
}

UNIT_TEST(test_pad_streams_differ)
{
    /* Views and users get different streams; seeds differ too. */
    uint32_t s[1] = {3}, a[200], b[200];
    int differ_view = 0, differ_seed = 0;
    for (uint32_t u = 0; u < 20; u++) {
        sq_rng r;
        sq_rng_seed(&r, 1, sq_pad_stream(u, 0));
        sq_pad_row(a, 200, s, 1, SQ_PAD_RANDOM, &r);
        sq_rng_seed(&r, 1, sq_pad_stream(u, 1));
        sq_pad_row(b, 200, s, 1, SQ_PAD_RANDOM, &r);
        differ_view += !row_eq(a, b, 200);
        sq_rng_seed(&r, 2, sq_pad_stream(u, 0));
        sq_pad_row(b, 200, s, 1, SQ_PAD_RANDOM, &r);
        differ_seed += !row_eq(a, b, 200);
    }
    CHECK(differ_view >= 15); /* 99 values of alpha: collisions are rare */
    CHECK(differ_seed >= 15);
    CHECK(sq_pad_stream(1, 0) != sq_pad_stream(0, 1));
}

UNIT_TEST(test_pad_mode_names)
{
    CHECK_EQ(sq_pad_mode_parse("zero"), SQ_PAD_ZERO_LEFT);
    CHECK_EQ(sq_pad_mode_parse("randompad"), SQ_PAD_RANDOM);
    CHECK_EQ(sq_pad_mode_parse("random"), -1);
    CHECK_STR(sq_pad_policy_name(SQ_PAD_ZERO_RIGHT), "zero");
    CHECK_STR(sq_pad_policy_name(SQ_PAD_RANDOM), "randompad");
}
