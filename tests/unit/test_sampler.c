/* Unit tests for lib/data/sampler.c: --neg-sampler's words, the popularity
 * sampler's frequencies and corrections against the counts, the in-batch
 * corrections against the batch's targets counted by hand, and the
 * builder's draws: the same for a seed, independent of the batch size. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "sampler.h"
#include "unit.h"

UNIT_TEST(test_sampler_words)
{
    char buf[32];
    CHECK_EQ(sq_neg_sampler_parse("uniform"), SQ_NEG_UNIFORM);
    CHECK_EQ(sq_neg_sampler_parse("in-batch"), SQ_NEG_INBATCH);
    CHECK_EQ(sq_neg_sampler_parse("mixed"), SQ_NEG_MIXED);
    CHECK_EQ(sq_neg_sampler_parse("pop"), sq_neg_sampler_parse("pop:1"));
    int v = sq_neg_sampler_parse("pop:0.75");
    CHECK_EQ(sq_neg_kind(v), SQ_NEG_POP);
    CHECK_NEAR(sq_neg_alpha(v), 0.75, 1e-12);
    CHECK_STR(sq_neg_sampler_format(v, buf, sizeof buf), "pop:0.75");
    CHECK_EQ(sq_neg_sampler_parse(buf), v);
    CHECK_STR(sq_neg_sampler_format(sq_neg_sampler_parse("pop:0"), buf, sizeof buf), "pop:0");
    const char *bad[] = {"", "pop:", "pop:-0.1", "pop:1.5", "pop:0.1234", "pop:x", "pop:0.5x",
                         "Uniform", "inbatch"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_EQ(sq_neg_sampler_parse(bad[i]), -1);
}

/* 5 items counted 8, 4, 2, 1, 0 over two users */
static const uint32_t pop_items[15] = {1, 1, 1, 1, 2, 2, 3, 1, 1, 1, 1, 2, 2, 3, 4};
static const uint64_t pop_start[2] = {0, 7};
static const uint32_t pop_ntrain[2] = {7, 8};

UNIT_TEST(test_sampler_pop)
{
    sq_err e = {0};
    sq_sampler s;
    const double cnt[6] = {0, 8, 4, 2, 1, 0};
    double alpha = 0.5, Z = 0;
    for (int i = 1; i <= 5; i++)
        Z += cnt[i] > 0 ? pow(cnt[i], alpha) : 0;
    int K = 3;
    CHECK_EQ(sq_sampler_init(&s, SQ_NEG_POP + 8 * 500, K, 5, pop_items, pop_start, pop_ntrain,
                             2, &e), 0);
    sq_rng r;
    sq_rng_seed(&r, 9, 1);
    long hits[6] = {0};
    int neg[3];
    float lq[3];
    const int draws = 100000;
    for (int d = 0; d < draws; d++) {
        sq_sampler_draw(&s, &r, 0, neg, lq);
        for (int k = 0; k < K; k++) {
            hits[neg[k]]++;
            double q = pow(cnt[neg[k]], alpha) / Z;
            if (d < 100)
                CHECK_NEAR(lq[k], log(K * q), 1e-6);
        }
    }
    CHECK_EQ(hits[0], 0);
    CHECK_EQ(hits[5], 0); /* never in the training parts: never drawn */
    for (int i = 1; i <= 4; i++) /* 300k draws: a few standard deviations */
        CHECK_NEAR((double)hits[i] / (K * draws), pow(cnt[i], alpha) / Z, 0.005);
    sq_sampler_free(&s);
    /* K out of 1..n_items - 1 */
    CHECK_EQ(sq_sampler_init(&s, SQ_NEG_UNIFORM, 5, 5, pop_items, pop_start, pop_ntrain, 2, &e),
             SQ_EX_USAGE);
    sq_sampler_free(&s);
    CHECK_EQ(sq_sampler_init(&s, SQ_NEG_MIXED, 1, 5, pop_items, pop_start, pop_ntrain, 2, &e),
             SQ_EX_USAGE);
    sq_sampler_free(&s);
}

UNIT_TEST(test_sampler_inbatch)
{
    sq_err e = {0};
    sq_sampler s;
    int tg[6] = {4, 7, 4, 4, 9, 7}, neg[6 * 4];
    float lq[6 * 4];
    for (int mixed = 0; mixed <= 1; mixed++) {
        int K = 4, K1 = mixed ? 2 : 4;
        CHECK_EQ(sq_sampler_init(&s, mixed ? SQ_NEG_MIXED : SQ_NEG_INBATCH, K, 20, NULL, NULL,
                                 NULL, 0, &e), 0);
        sq_rng r;
        sq_rng_seed(&r, 4, 2);
        memset(neg, 0, sizeof neg);
        if (mixed) /* the uniform slots come first from the draws of each sample */
            for (int i = 0; i < 6; i++)
                sq_sampler_draw(&s, &r, K1, neg + i * K, lq + i * K);
        sq_sampler_inbatch(&s, &r, tg, 6, NULL, 6, neg, lq);
        for (int i = 0; i < 6 * K; i++) {
            int x = neg[i], c = 0;
            for (int j = 0; j < 6; j++)
                c += tg[j] == x;
            if (i % K < K1)
                CHECK(c > 0); /* an in-batch slot holds a target of the batch */
            /* K Q = K1 c / n + (K - K1) / n_items */
            CHECK_NEAR(lq[i], log((double)K1 * c / 6 + (double)(K - K1) / 20), 1e-6);
        }
        for (int i = 0; i <= 20; i++)
            CHECK_EQ(s.cnt[i], 0u); /* the counts are cleared for the next batch */
        sq_sampler_free(&s);
    }
}

/* The builder: a sample's uniform or popularity negatives do not depend
 * on the batch size; in-batch ones come from the batch. */
UNIT_TEST(test_sampler_batcher)
{
    sq_err e = {0};
    sq_seqs d = {.n_users = 2, .n_items = 5, .items = pop_items, .start = pop_start,
                 .n_train = pop_ntrain};
    sq_batcher a, b;
    CHECK_EQ(sq_batcher_init(&a, &d, SQ_TARGET_ALL, 10, 2, 0, 7, &e), 0);
    CHECK_EQ(sq_batcher_init(&b, &d, SQ_TARGET_ALL, 10, 1, 0, 7, &e), 0);
    CHECK_EQ(sq_batcher_sampled(&a, SQ_NEG_POP + 8 * 1000, 3, 0, &e), 0);
    CHECK_EQ(sq_batcher_sampled(&b, SQ_NEG_POP + 8 * 1000, 3, 0, &e), 0);
    sq_batcher_shuffle(&a, 1);
    sq_batcher_shuffle(&b, 1);
    const sq_packed *pa = sq_batcher_get(&a, 1, 0);
    CHECK(pa->lq != NULL && pa->K == 3);
    int na = pa->n, same = 1;
    int *ka = malloc((size_t)na * 3 * sizeof *ka);
    memcpy(ka, pa->neg, (size_t)na * 3 * sizeof *ka);
    for (uint64_t i = 0, at = 0; i < 2; i++) { /* the same samples, one a batch */
        const sq_packed *pb = sq_batcher_get(&b, 1, i);
        same &= memcmp(ka + at, pb->neg, (size_t)pb->n * 3 * sizeof *ka) == 0;
        at += (uint64_t)pb->n * 3;
    }
    CHECK(same);
    free(ka);
    sq_batcher_free(&a);
    sq_batcher_free(&b);
    /* in-batch: K must be below the batch size */
    CHECK_EQ(sq_batcher_init(&a, &d, SQ_TARGET_ALL, 10, 2, 0, 7, &e), 0);
    CHECK_EQ(sq_batcher_sampled(&a, SQ_NEG_INBATCH, 2, 0, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--batch") != NULL);
    sq_batcher_free(&a);
}

/* --neg-share sequence and batch: each sample's entries, or every entry of
 * the batch, get one set (negatives and corrections), the same for a
 * seed; in-batch slots are drawn from the batch's targets. */
UNIT_TEST(test_sampler_shared)
{
    sq_err e = {0};
    sq_seqs d = {.n_users = 2, .n_items = 5, .items = pop_items, .start = pop_start,
                 .n_train = pop_ntrain};
    const int samplers[2] = {SQ_NEG_UNIFORM, SQ_NEG_MIXED};
    for (int share = SQ_SHARE_SEQUENCE; share <= SQ_SHARE_BATCH; share++)
        for (int s = 0; s < 2; s++) {
            int K = s ? 2 : 4; /* mixed: K / 2 in-batch slots below the batch of 2 */
            sq_batcher a, b;
            CHECK_EQ(sq_batcher_init(&a, &d, SQ_TARGET_ALL, 10, 2, 0, 7, &e), 0);
            CHECK_EQ(sq_batcher_init(&b, &d, SQ_TARGET_ALL, 10, 2, 0, 7, &e), 0);
            CHECK_EQ(sq_batcher_sampled(&a, samplers[s], K, share, &e), 0);
            CHECK_EQ(sq_batcher_sampled(&b, samplers[s], K, share, &e), 0);
            sq_batcher_shuffle(&a, 1);
            sq_batcher_shuffle(&b, 1);
            const sq_packed *pa = sq_batcher_get(&a, 1, 0);
            CHECK(pa->B == 2 && pa->n > 3);
            CHECK_EQ(pa->neg_share, share);
            /* entries [0, n1) are the first sample's (rows in its segment) */
            int n1 = 0;
            while (n1 < pa->n && pa->rows[n1] < pa->off[1])
                n1++;
            CHECK(n1 > 0 && n1 < pa->n);
            int same = 1, ok = 1;
            for (int i = 0; i < pa->n; i++) {
                int i0 = share == SQ_SHARE_BATCH || i < n1 ? 0 : n1;
                same &= memcmp(pa->neg + (size_t)i * K, pa->neg + (size_t)i0 * K,
                               (size_t)K * sizeof *pa->neg) == 0 &&
                        memcmp(pa->lq + (size_t)i * K, pa->lq + (size_t)i0 * K,
                               (size_t)K * sizeof *pa->lq) == 0;
                for (int k = 0; k < K; k++) {
                    int x = pa->neg[(size_t)i * K + k];
                    ok &= x >= 1 && x <= 5;
                    if (k < sq_neg_inbatch_slots(samplers[s], K)) {
                        int hit = 0;
                        for (int m = 0; m < pa->n; m++)
                            hit |= pa->targets[m] == x;
                        ok &= hit;
                    } else if (!s) {
                        ok &= pa->lq[(size_t)i * K + k] == (float)log(4.0 / 5);
                    }
                }
            }
            CHECK(same && ok);
            const sq_packed *pb = sq_batcher_get(&b, 1, 0);
            CHECK(memcmp(pa->neg, pb->neg, (size_t)pa->n * K * sizeof *pa->neg) == 0);
            CHECK(memcmp(pa->lq, pb->lq, (size_t)pa->n * K * sizeof *pa->lq) == 0);
            sq_batcher_free(&a);
            sq_batcher_free(&b);
        }
}
