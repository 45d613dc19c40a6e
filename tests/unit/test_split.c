/* Unit tests for lib/data/split.c: the cut points of one user. */
#include <stdint.h>

#include "split.h"
#include "unit.h"

UNIT_TEST(test_split_loo)
{
    sq_cut c = sq_split_loo(5); /* 3 train, 1 valid, 1 test */
    CHECK_EQ(c.n_train, 3);
    CHECK_EQ(c.n_valid, 1);
    CHECK_EQ(c.is_short, 0);
    c = sq_split_loo(3); /* the threshold: one item of history */
    CHECK_EQ(c.n_train, 1);
    CHECK_EQ(c.n_valid, 1);
    CHECK_EQ(c.is_short, 0);
    c = sq_split_loo(1000000);
    CHECK_EQ(c.n_train, 999998);
    CHECK_EQ(c.n_valid, 1);
}

UNIT_TEST(test_split_loo_short_users)
{
    for (uint32_t len = 0; len < SQ_LOO_MIN_LEN; len++) {
        sq_cut c = sq_split_loo(len);
        CHECK_EQ(c.is_short, 1);
        CHECK_EQ(c.n_train, len); /* kept for training only */
        CHECK_EQ(c.n_valid, 0);
    }
}

/* Expected (n_train, n_valid) for len 0..23 from RecBole 1.x's
 * Dataset._calcu_split_ids run in Python on the same ratios. */
static void check_ratio_table(unit_ctx *t, const char *spec, const int *train, const int *valid)
{
    sq_split_opts o = {0};
    sq_err e = {0};
    CHECK_EQ(sq_split_parse_ratio(&o, spec, &e), 0);
    for (uint32_t len = 0; len < 24; len++) {
        sq_cut c = sq_split_ratio(len, o.ratio, o.n_ratio);
        CHECK_EQ(c.n_train, train[len]);
        CHECK_EQ(c.n_valid, valid[len]);
        CHECK(c.n_train + c.n_valid <= len);
        CHECK_EQ(c.is_short, len > 0 && c.n_train == len);
        if (c.n_train != (uint32_t)train[len] || c.n_valid != (uint32_t)valid[len])
            fprintf(stderr, "  (ratio %s, len %u)\n", spec, len);
    }
}

UNIT_TEST(test_split_ratio_recbole_rounding)
{
    static const int t811[24] = {0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9,
                                 10, 11, 12, 13, 14, 15, 16, 17, 16, 17, 18, 19};
    static const int v811[24] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2};
    check_ratio_table(t, "0.8,0.1,0.1", t811, v811);
    /* 0.7 + 0.2 + 0.1 sums to 0.9999999999999999 in doubles. */
    static const int t721[24] = {0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 7, 8,
                                 9, 10, 11, 11, 12, 13, 14, 15, 14, 15, 16, 17};
    static const int v721[24] = {0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 2, 2,
                                 2, 2, 2, 3, 3, 3, 3, 3, 4, 4, 4, 4};
    check_ratio_table(t, "0.7,0.2,0.1", t721, v721);
    static const int t622[24] = {0, 1, 1, 1, 2, 3, 4, 5, 6, 7, 6, 7,
                                 8, 9, 10, 9, 10, 11, 12, 13, 12, 13, 14, 15};
    check_ratio_table(t, "0.6,0.2,0.2", t622, v721);
    static const int t91[24] = {0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10,
                                11, 12, 13, 14, 15, 16, 17, 18, 18, 19, 20, 21};
    static const int zero[24] = {0};
    check_ratio_table(t, "0.9,0.1", t91, zero);
}

UNIT_TEST(test_split_ratio_nonempty_parts)
{
    /* Every part with a positive ratio gets an item once train can spare one:
     * len 3 under 0.8,0.1,0.1 is 1 train, 1 valid, 1 test. */
    double r[3] = {0.8, 0.1, 0.1};
    sq_cut c = sq_split_ratio(3, r, 3);
    CHECK_EQ(c.n_train, 1);
    CHECK_EQ(c.n_valid, 1);
    /* len 2: test is served first, validation stays empty. */
    c = sq_split_ratio(2, r, 3);
    CHECK_EQ(c.n_train, 1);
    CHECK_EQ(c.n_valid, 0);
    CHECK_EQ(c.is_short, 0);
    /* len 1: nothing to hold out, the user is short. */
    c = sq_split_ratio(1, r, 3);
    CHECK_EQ(c.n_train, 1);
    CHECK_EQ(c.is_short, 1);
    /* A zero part stays empty. */
    double z[3] = {0.9, 0.0, 0.1};
    c = sq_split_ratio(5, z, 3);
    CHECK_EQ(c.n_train, 4);
    CHECK_EQ(c.n_valid, 0);
}

UNIT_TEST(test_split_parse_ratio)
{
    sq_split_opts o = {0};
    sq_err e = {0};
    CHECK_EQ(sq_split_parse_ratio(&o, "0.8,0.1,0.1", &e), 0);
    CHECK_EQ(o.mode, SQ_SPLIT_RATIO);
    CHECK_EQ(o.n_ratio, 3);
    CHECK_NEAR(o.ratio[0], 0.8, 1e-12);
    CHECK_EQ(sq_split_parse_ratio(&o, "0.5,0.5", &e), 0);
    CHECK_EQ(o.n_ratio, 2);
    CHECK_EQ(o.ratio[2], 0);
    static const char *bad[] = {"0.8,0.1", "0.8,0.1,0.2", "0.8,,0.2", "x,0.5,0.5",
                                "0.5,0.5,0,0", "1", "", "0,0.5,0.5", "1.1,-0.1",
                                "0.8,0.1,0.1,", "nan,0.5", "0.8 ,0.1,0.1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_err e2 = {0};
        CHECK_EQ(sq_split_parse_ratio(&o, bad[i], &e2), SQ_EX_USAGE);
        CHECK(strstr(e2.msg, "--ratio") != NULL);
    }
}

UNIT_TEST(test_split_time_cut)
{
    int64_t ts[6] = {10, 20, 20, 30, 40, 50};
    sq_cut c;
    CHECK_EQ(sq_split_time(ts, 6, 30, 0, 0, &c), 0);
    CHECK_EQ(c.n_train, 3); /* ts < 30 */
    CHECK_EQ(c.n_valid, 0);
    CHECK_EQ(c.is_short, 0);
    CHECK_EQ(sq_split_time(ts, 6, 20, 35, 1, &c), 0);
    CHECK_EQ(c.n_train, 1); /* 10 */
    CHECK_EQ(c.n_valid, 3); /* 20 20 30 */
    CHECK_EQ(sq_split_time(ts, 6, 20, 41, 1, &c), 0);
    CHECK_EQ(c.n_valid, 4);
    CHECK_EQ(sq_split_time(ts, 6, 100, 200, 1, &c), 0);
    CHECK_EQ(c.n_train, 6); /* all before the cut: training only, not short */
    CHECK_EQ(c.n_valid, 0);
    CHECK_EQ(c.is_short, 0);
}

UNIT_TEST(test_split_time_short_and_unordered)
{
    int64_t ts[3] = {100, 200, 300};
    sq_cut c;
    CHECK_EQ(sq_split_time(ts, 3, 100, 0, 0, &c), 0); /* ts < 100: none */
    CHECK_EQ(c.n_train, 0);
    CHECK_EQ(c.is_short, 1);
    CHECK_EQ(sq_split_time(ts, 0, 100, 0, 0, &c), 0);
    CHECK_EQ(c.is_short, 0);
    int64_t un[4] = {1, 5, 3, 7};
    CHECK_EQ(sq_split_time(un, 4, 4, 0, 0, &c), 2);

    sq_split_opts o = {0};
    sq_err e = {0};
    CHECK_EQ(sq_split_parse_time(&o, "4", &e), 0);
    uint32_t items[4] = {1, 2, 3, 4};
    sq_record rec = {.user = 7, .len = 4, .items = items, .ts = un};
    CHECK_EQ(sq_split_record(&o, &rec, "in.sqr", &c, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "in.sqr: user 7: timestamps out of order") != NULL);
}

UNIT_TEST(test_split_parse_time)
{
    sq_split_opts o = {0};
    sq_err e = {0};
    CHECK_EQ(sq_split_parse_time(&o, "978300760", &e), 0);
    CHECK_EQ(o.mode, SQ_SPLIT_TIME);
    CHECK_EQ(o.t1, 978300760);
    CHECK_EQ(o.has_t2, 0);
    CHECK_EQ(sq_split_parse_time(&o, "-5,10", &e), 0);
    CHECK_EQ(o.t1, -5);
    CHECK_EQ(o.t2, 10);
    CHECK_EQ(o.has_t2, 1);
    static const char *bad[] = {"", "x", "10,5", "10,10", "1,2,3", "1.5", "10,", ",10",
                                "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_err e2 = {0};
        CHECK_EQ(sq_split_parse_time(&o, bad[i], &e2), SQ_EX_USAGE);
    }
}

UNIT_TEST(test_split_record_dispatch)
{
    uint32_t items[5] = {1, 2, 3, 4, 5};
    sq_record rec = {.user = 1, .len = 5, .items = items};
    sq_split_opts o = {.mode = SQ_SPLIT_LOO};
    sq_cut c;
    sq_err e = {0};
    CHECK_EQ(sq_split_record(&o, &rec, "x", &c, &e), 0);
    CHECK_EQ(c.n_train, 3);
    CHECK_EQ(sq_split_parse_ratio(&o, "0.6,0.2,0.2", &e), 0);
    CHECK_EQ(sq_split_record(&o, &rec, "x", &c, &e), 0);
    CHECK_EQ(c.n_train, 3);
    CHECK_EQ(c.n_valid, 1);
    CHECK_EQ(sq_split_parse_time(&o, "3", &e), 0);
    CHECK_EQ(sq_split_record(&o, &rec, "x", &c, &e), SQ_EX_DATA); /* no ts */
    CHECK_STR(sq_split_mode_name(SQ_SPLIT_LOO), "leave-one-out");
}

/* Holdout-users: about F of 10,000 users are held out, the same ones on
 * every call, other ones under another seed. */
UNIT_TEST(test_split_holdout_fraction_and_determinism)
{
    static const double fr[] = {0.05, 0.2, 0.5};
    for (size_t k = 0; k < sizeof fr / sizeof fr[0]; k++) {
        uint32_t n = 0, again = 0, differ = 0;
        for (uint32_t u = 1; u <= 10000; u++) {
            int h = sq_split_holdout_has(u, fr[k], 0);
            n += (uint32_t)h;
            again += h == sq_split_holdout_has(u, fr[k], 0);
            differ += h != sq_split_holdout_has(u, fr[k], 7);
        }
        /* binomial: 4 standard deviations of 10,000 draws is at most 200 */
        double sd = sqrt(10000 * fr[k] * (1 - fr[k]));
        CHECK(fabs((double)n - 10000 * fr[k]) < 4 * sd);
        CHECK_EQ(again, 10000);
        CHECK(differ > 0); /* seed 7 holds out another set */
    }
    /* a smaller fraction holds out a subset of a larger one, same seed */
    for (uint32_t u = 1; u <= 10000; u++)
        if (sq_split_holdout_has(u, 0.05, 3))
            CHECK(sq_split_holdout_has(u, 0.2, 3));
}

static void check_cut(unit_ctx *t, sq_cut c, uint32_t n_train, uint32_t n_valid, int is_short)
{
    CHECK_EQ(c.n_train, n_train);
    CHECK_EQ(c.n_valid, n_valid);
    CHECK_EQ(c.is_short, is_short);
}

UNIT_TEST(test_split_holdout_cuts)
{
    uint32_t in = 0, out = 0; /* a held-out user and another, seed 0, F 0.5 */
    for (uint32_t u = 1; u < 100 && (!in || !out); u++) {
        if (sq_split_holdout_has(u, 0.5, 0))
            in = in ? in : u;
        else
            out = out ? out : u;
    }
    CHECK(in && out);
    /* held out: last item validation, no test; the others: all train */
    check_cut(t, sq_split_holdout(in, 5, 0.5, 0), 4, 1, 0);
    check_cut(t, sq_split_holdout(in, 2, 0.5, 0), 1, 1, 0);
    check_cut(t, sq_split_holdout(out, 5, 0.5, 0), 5, 0, 0);
    /* single-item users all train; a held-out one is counted short */
    check_cut(t, sq_split_holdout(in, 1, 0.5, 0), 1, 0, 1);
    check_cut(t, sq_split_holdout(out, 1, 0.5, 0), 1, 0, 0);
    /* through sq_split_record */
    uint32_t items[5] = {1, 2, 3, 4, 5};
    sq_record rec = {.user = in, .len = 5, .items = items};
    sq_split_opts o = {0};
    sq_cut c;
    sq_err e = {0};
    CHECK_EQ(sq_split_parse_holdout(&o, "0.5", &e), 0);
    CHECK_EQ(o.mode, SQ_SPLIT_HOLDOUT);
    CHECK_EQ(sq_split_record(&o, &rec, "x", &c, &e), 0);
    check_cut(t, c, 4, 1, 0);
    rec.user = out;
    CHECK_EQ(sq_split_record(&o, &rec, "x", &c, &e), 0);
    check_cut(t, c, 5, 0, 0);
}

UNIT_TEST(test_split_parse_holdout_and_seed)
{
    sq_split_opts o = {0};
    sq_err e = {0};
    CHECK_EQ(sq_split_parse_holdout(&o, "0.05", &e), 0);
    CHECK_NEAR(o.holdout, 0.05, 1e-15);
    CHECK_STR(o.text, "0.05");
    CHECK_EQ(sq_split_parse_holdout(&o, "5e-1", &e), 0);
    static const char *bad[] = {"", "0", "1", "1.5", "-0.1", "abc", "0.1x", "nan", "inf",
                                "0.1,0.2"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sq_err e2 = {0};
        CHECK_EQ(sq_split_parse_holdout(&o, bad[i], &e2), SQ_EX_USAGE);
        CHECK(strstr(e2.msg, "--holdout-users") != NULL);
    }
    CHECK_EQ(sq_split_parse_seed(&o, "18446744073709551615", &e), 0);
    CHECK(o.seed == UINT64_MAX);
    CHECK_EQ(sq_split_parse_seed(&o, "0", &e), 0);
    CHECK(o.seed == 0);
    static const char *bad_seed[] = {"", "-1", "+1", "1.5", "x", "18446744073709551616", " 1"};
    for (size_t i = 0; i < sizeof bad_seed / sizeof bad_seed[0]; i++) {
        sq_err e2 = {0};
        CHECK_EQ(sq_split_parse_seed(&o, bad_seed[i], &e2), SQ_EX_USAGE);
    }
}

/* The meta sq_split_meta writes for o, in a fresh header, is want. */
static void check_meta(unit_ctx *t, const sq_split_opts *o, int drop, const char *want)
{
    sq_header h;
    sq_err e = {0};
    sq_header_init(&h, SQ_SPLIT, 10);
    CHECK_EQ(sq_split_meta(&h, o, drop, &e), 0);
    CHECK_STR(h.meta, want);
    sq_header_free(&h);
}

/* The meta of each mode: split.mode, the option, split.seed, split.short. */
UNIT_TEST(test_split_meta)
{
    sq_err e = {0};
    sq_split_opts o = {0};
    CHECK_EQ(sq_split_parse_holdout(&o, "0.05", &e), 0);
    CHECK_EQ(sq_split_parse_seed(&o, "42", &e), 0);
    check_meta(t, &o, 0, "split.mode=holdout-users\nsplit.holdout=0.05\nsplit.seed=42\n"
                         "split.short=train\n");
    o.seed = 0; /* the default seed is written too */
    check_meta(t, &o, 1, "split.mode=holdout-users\nsplit.holdout=0.05\nsplit.seed=0\n"
                         "split.short=drop\n");
    sq_split_opts loo = {.mode = SQ_SPLIT_LOO};
    check_meta(t, &loo, 1, "split.mode=leave-one-out\nsplit.short=drop\n");
    sq_split_opts r = {0};
    CHECK_EQ(sq_split_parse_ratio(&r, "0.8,0.1,0.1", &e), 0);
    check_meta(t, &r, 0, "split.mode=ratio\nsplit.ratio=0.8,0.1,0.1\nsplit.short=train\n");
    sq_split_opts tm = {0};
    CHECK_EQ(sq_split_parse_time(&tm, "20,40", &e), 0);
    check_meta(t, &tm, 0, "split.mode=time\nsplit.time=20,40\nsplit.short=train\n");
    CHECK_STR(sq_split_mode_name(SQ_SPLIT_HOLDOUT), "holdout-users");
}
