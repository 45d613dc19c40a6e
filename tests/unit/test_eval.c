/* Evaluation: ranks on a hand-made score table with ties, history
 * exclusion that keeps the target, uniform and popularity sampling without
 * replacement and their determinism, results independent of batch size and
 * threads, shard hashes, top-K order, the users set, padded histories, and
 * SASRec/BERT4Rec scores that are the same bits whatever the batch. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "eval.h"
#include "model.h"
#include "sasrec.h"
#include "hash_model.h"
#include "unit.h"

/* ---- a model with a fixed score table: every user gets table[] ---- */

static float table6[7] = {0, 5, 3, 3, 3, 1, 0}; /* items 1..6: 1 best, then 2,3,4 tie */

static int table_scores(sq_model *m, const sq_batch *b, float *scores, sq_err *e)
{
    (void)e;
    const float *tab = m->impl;
    for (int i = 0; i < b->B; i++)
        memcpy(scores + (size_t)i * (m->n_items + 1), tab, (m->n_items + 1) * sizeof(float));
    return 0;
}

static sq_model table_model(uint32_t n, float *tab)
{
    sq_model m = {.n_items = n, .impl = tab, .scores = table_scores};
    memcpy(m.name, "table", 6);
    return m;
}

/* A split dataset from rows of items and cut points. */
static int make_split(sq_dataset *ds, uint32_t n_items, const char *name, int n_users,
                      uint32_t **items, const uint32_t *len, const uint32_t *n_train,
                      const uint32_t *n_valid, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, n_items);
    int rc = sq_meta_add(&h, e, "dataset", "%s", name);
    if (!rc)
        rc = sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    for (int u = 0; u < n_users && !rc; u++) {
        sq_record r = {.user = (uint32_t)u + 1, .len = len[u], .items = items[u],
                       .n_train = n_train[u], .n_valid = n_valid[u]};
        rc = sq_dataset_add(ds, &r, e);
    }
    return rc ? rc : sq_dataset_finish(ds, e);
}

/* The hand-made case of the ranks test. */
static int table_dataset(sq_dataset *ds, sq_err *e)
{
    static uint32_t a[] = {1, 5, 2, 3, 4}, b[] = {2, 3, 2, 6, 2}, c[] = {6, 6};
    uint32_t *items[] = {a, b, c};
    uint32_t len[] = {5, 5, 2}, nt[] = {3, 3, 2}, nv[] = {1, 1, 0};
    return make_split(ds, 6, "t", 3, items, len, nt, nv, e);
}

typedef struct {
    sq_rank r[128];
    int n;
} ranks;

static int collect(void *ctx, const sq_rank *r, sq_err *e)
{
    (void)e;
    ranks *rs = ctx;
    if (rs->n < 128)
        rs->r[rs->n] = *r;
    rs->n++;
    return 0;
}

static int run_ranks(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o, ranks *rs)
{
    sq_err e = {0};
    memset(rs, 0, sizeof *rs);
    return sq_eval_ranks(m, ds, o, collect, rs, NULL, &e);
}

UNIT_TEST(test_eval_ranks_ties_pessimistic_and_optimistic)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    sq_model m = table_model(6, table6);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    ranks rs;
    /* test targets: user 1 item 4 (score 3: item 1 higher, 2 and 3 equal),
     * user 2 item 2 (score 3: item 1 higher, 3 and 4 equal); user 3 has none */
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.n, 2);
    CHECK_EQ(rs.r[0].user, 1);
    CHECK_EQ(rs.r[0].item, 4);
    CHECK_EQ(rs.r[0].rank, 4);
    CHECK_EQ(rs.r[0].n_cand, 6);
    CHECK_EQ(rs.r[1].user, 2);
    CHECK_EQ(rs.r[1].item, 2);
    CHECK_EQ(rs.r[1].rank, 4);
    o.optimistic = 1;
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.r[0].rank, 2);
    CHECK_EQ(rs.r[1].rank, 2);
    /* the best item ranks 1; the worst ranks last (item 6 ties with nothing) */
    o.optimistic = 0;
    o.target = SQ_EVAL_VALID;
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.n, 2);
    CHECK_EQ(rs.r[0].item, 3);
    CHECK_EQ(rs.r[0].rank, 4);
    CHECK_EQ(rs.r[1].item, 6);
    CHECK_EQ(rs.r[1].rank, 6);
    CHECK_EQ(rs.r[1].n_cand, 6);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_exclude_history_keeps_the_target)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    sq_model m = table_model(6, table6);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    o.exclude_history = 1;
    ranks rs;
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    /* user 1, target 4, history {1,5,2,3}: candidates 4 and 6 */
    CHECK_EQ(rs.r[0].rank, 1);
    CHECK_EQ(rs.r[0].n_cand, 2);
    /* user 2, target 2, history {2,3,2,6}: 2 stays; candidates 1,2,4,5 */
    CHECK_EQ(rs.r[1].item, 2);
    CHECK_EQ(rs.r[1].rank, 3);
    CHECK_EQ(rs.r[1].n_cand, 4);
    o.target = SQ_EVAL_VALID; /* user 1, target 3, history {1,5,2}: 3,4,6 */
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.r[0].rank, 2);
    CHECK_EQ(rs.r[0].n_cand, 3);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_means_match_the_metrics)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    sq_model m = table_model(6, table6);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    double hr, ndcg;
    uint64_t n;
    CHECK_EQ(sq_eval_means(&m, &ds, &o, 4, &hr, &ndcg, &n, &e), 0);
    CHECK_EQ(n, 2);
    CHECK_NEAR(hr, 1.0, 1e-12);                  /* ranks 4 and 4 */
    CHECK_NEAR(ndcg, 1.0 / log2(5.0), 1e-12);
    CHECK_EQ(sq_eval_means(&m, &ds, &o, 3, &hr, &ndcg, &n, &e), 0);
    CHECK_NEAR(hr, 0.0, 1e-12);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_nan_score_is_an_error)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    float tab[7] = {0, 1, 2, NAN, 4, 5, 6};
    sq_model m = table_model(6, tab);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    CHECK_EQ(sq_eval_ranks(&m, &ds, &o, NULL, NULL, NULL, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "NaN") != NULL);
    sq_dataset_free(&ds);
}

/* 1 user with a long history over 40 items; popularity from 3 other users. */
static int sample_dataset(sq_dataset *ds, sq_err *e)
{
    static uint32_t a[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 20},
                    b[] = {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 30},
                    c[] = {11, 12, 13, 14, 15, 16, 17, 18, 19, 21, 22, 23, 24, 25},
                    d[] = {31, 32, 33};
    uint32_t *items[] = {a, b, c, d};
    uint32_t len[] = {11, 12, 14, 3}, nt[] = {10, 11, 13, 2}, nv[] = {0, 0, 0, 0};
    return make_split(ds, 40, "s", 4, items, len, nt, nv, e);
}

/* Whether list[0, n) holds distinct items, none equal to target or (when
 * avoid) in avoid[0, n_avoid). */
static int distinct_ok(const uint32_t *list, uint32_t n, uint32_t target,
                       const uint32_t *avoid, uint32_t n_avoid)
{
    unsigned char seen[64] = {0};
    for (uint32_t i = 0; i < n; i++) {
        if (list[i] == 0 || list[i] > 40 || list[i] == target || seen[list[i]])
            return 0;
        seen[list[i]] = 1;
        for (uint32_t j = 0; j < n_avoid; j++)
            if (avoid[j] == list[i] && avoid[j] != target)
                return 0;
    }
    return 1;
}

UNIT_TEST(test_eval_uniform_sampling_without_replacement)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(sample_dataset(&ds, &e), 0);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    uint32_t l1[40], l2[40], n1, n2;
    const uint32_t *hist = sq_dataset_items(&ds, 0); /* user 1: target 20 at 10 */
    uint32_t sizes[] = {1, 5, 19, 20, 30, 38, 39, 100};
    for (int excl = 0; excl < 2; excl++) {
        o.exclude_history = excl;
        uint32_t pool = excl ? 39 - 10 : 39;
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            o.cand = SQ_CAND_UNI;
            o.n_neg = sizes[k];
            CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l1, &n1, &e), 0);
            CHECK_EQ(n1, sizes[k] < pool ? sizes[k] : pool);
            CHECK(distinct_ok(l1, n1, 20, excl ? hist : NULL, excl ? 10 : 0));
            /* the same draw again, and the same for a repeated call */
            CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l2, &n2, &e), 0);
            CHECK_EQ(n1, n2);
            CHECK(memcmp(l1, l2, n1 * sizeof *l1) == 0);
        }
    }
    /* another seed draws other negatives; each item is reachable */
    o.exclude_history = 0;
    o.n_neg = 5;
    CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l1, &n1, &e), 0);
    o.seed = 2;
    CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l2, &n2, &e), 0);
    CHECK(memcmp(l1, l2, 5 * sizeof *l1) != 0);
    int hit[41] = {0};
    for (uint64_t seed = 0; seed < 400; seed++) {
        o.seed = seed;
        CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l1, &n1, &e), 0);
        for (uint32_t i = 0; i < n1; i++)
            hit[l1[i]]++;
    }
    int reached = 0;
    for (int i = 1; i <= 40; i++)
        reached += hit[i] > 0;
    CHECK_EQ(reached, 39); /* all but the target */
    CHECK_EQ(hit[20], 0);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_pop_sampling_without_replacement)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(sample_dataset(&ds, &e), 0);
    /* training counts: item 1: 9, item 2: 3, 3: 2, 4..10: 1, 11..24: 1,
     * 31: 1, 32: 1; never in training: 20, 25, 26..30, 33..40 */
    CHECK_EQ(ds.pop[1], 9);
    CHECK_EQ(ds.pop[2], 3);
    CHECK_EQ(ds.pop[20], 0);
    CHECK_EQ(ds.pop[25], 0);
    uint32_t n_pos = 0;
    for (int i = 1; i <= 40; i++)
        n_pos += ds.pop[i] > 0;
    sq_eval_opts o;
    sq_eval_defaults(&o);
    o.cand = SQ_CAND_POP;
    uint32_t l1[40], l2[40], n1, n2;
    const uint32_t *hist = sq_dataset_items(&ds, 0);
    uint32_t sizes[] = {1, 3, 10, 14, 15, 20, 27, 100};
    for (int excl = 0; excl < 2; excl++) {
        o.exclude_history = excl;
        uint32_t pool = n_pos - (excl ? 10 : 0); /* the target 20 was never trained */
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            o.n_neg = sizes[k];
            CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l1, &n1, &e), 0);
            CHECK_EQ(n1, sizes[k] < pool ? sizes[k] : pool);
            CHECK(distinct_ok(l1, n1, 20, excl ? hist : NULL, excl ? 10 : 0));
            for (uint32_t i = 0; i < n1; i++)
                CHECK(ds.pop[l1[i]] > 0);
            CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l2, &n2, &e), 0);
            CHECK(n1 == n2 && memcmp(l1, l2, n1 * sizeof *l1) == 0);
        }
    }
    /* draws follow popularity: item 1 (9 of 31) comes first far more often
     * than item 4 (1 of 31) */
    o.exclude_history = 0;
    o.n_neg = 1;
    int first1 = 0, first4 = 0;
    for (uint64_t seed = 0; seed < 2000; seed++) {
        o.seed = seed;
        CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 10, l1, &n1, &e), 0);
        first1 += l1[0] == 1;
        first4 += l1[0] == 4;
    }
    CHECK(first1 > 450 && first1 < 720); /* expect 2000 * 9/31 = 581 */
    CHECK(first4 > 20 && first4 < 120);  /* expect 65 */
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_pop_sampling_fallback_when_rejection_stalls)
{
    /* Item 1 holds almost all the mass: after it, rejection sampling of the
     * 4 items left would stall; the exact fallback finishes the draw. */
    sq_err e = {0};
    sq_dataset ds;
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 8);
    CHECK_EQ(sq_dataset_init(&ds, &h, &e), 0);
    sq_header_free(&h);
    uint32_t row[] = {2, 3, 4, 5, 8};
    sq_record r = {.user = 1, .len = 5, .items = row, .n_train = 4, .n_valid = 0};
    CHECK_EQ(sq_dataset_add(&ds, &r, &e), 0);
    CHECK_EQ(sq_dataset_finish(&ds, &e), 0);
    ds.pop[1] = 1ull << 50;
    sq_eval_opts o;
    sq_eval_defaults(&o);
    o.cand = SQ_CAND_POP;
    o.n_neg = 4; /* pool: 1, 2, 3, 4, 5 */
    uint32_t l[8], n;
    for (uint64_t seed = 1; seed < 20; seed++) {
        o.seed = seed;
        CHECK_EQ(sq_eval_candidates(&ds, &o, 0, 4, l, &n, &e), 0);
        CHECK_EQ(n, 4);
        CHECK_EQ(l[0], 1);
        CHECK(distinct_ok(l, n, 8, NULL, 0));
    }
    sq_dataset_free(&ds);
}

/* A bigger dataset: 60 users over 50 items, a ratio-like split with
 * several validation and test targets per user. */
static int big_dataset(sq_dataset *ds, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 50);
    int rc = sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    uint32_t row[40];
    for (uint32_t u = 1; u <= 60 && !rc; u++) {
        uint32_t len = 3 + u % 17;
        for (uint32_t j = 0; j < len; j++)
            row[j] = 1 + (u * 7 + j * j * 3) % 50;
        sq_record r = {.user = u * 3, .len = len, .items = row,
                       .n_train = len - 2 - u % 2, .n_valid = 1};
        rc = sq_dataset_add(ds, &r, e);
    }
    return rc ? rc : sq_dataset_finish(ds, e);
}

UNIT_TEST(test_eval_independent_of_batch_and_threads)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(big_dataset(&ds, &e), 0);
    sq_model m = {.n_items = 50, .scores = hash_model_scores};
    const char *cands[] = {"full", "uni:7", "pop:7", "uni:45"};
    for (size_t c = 0; c < 4; c++) {
        for (int excl = 0; excl < 2; excl++) {
            sq_eval_opts o;
            sq_eval_defaults(&o);
            CHECK_EQ(sq_eval_parse_candidates(cands[c], &o, &e), 0);
            o.exclude_history = excl;
            o.batch = 1;
            o.threads = 1;
            ranks a, b;
            CHECK_EQ(run_ranks(&m, &ds, &o, &a), 0);
            o.batch = 7;
            o.threads = 3;
            CHECK_EQ(run_ranks(&m, &ds, &o, &b), 0);
            CHECK_EQ(a.n, 60 + 30); /* odd users have two test targets */
            CHECK_EQ(a.n, b.n);
            CHECK(memcmp(a.r, b.r, sizeof a.r) == 0);
            int ok = 1;
            for (int i = 0; i < a.n; i++)
                ok &= a.r[i].rank >= 1 && a.r[i].rank <= a.r[i].n_cand;
            CHECK(ok);
        }
    }
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_shard_hash_is_stable)
{
    /* XXH3-64, seed 0, of the user id as 4 little-endian bytes: these values
     * decide which machine scores which user, so they must never change. */
    static const uint64_t want[6] = {0, 0xdb02334e96d65708ull, 0x70f5911d66a20bc9ull,
                                     0xc8cfc1d86609e99dull, 0x971560b110149498ull,
                                     0xbb306458108ca26eull};
    static const uint32_t shard3[6] = {0, 2, 2, 0, 1, 2};
    for (uint32_t u = 1; u <= 5; u++) {
        CHECK(sq_shard_hash(u) == want[u]);
        CHECK_EQ(sq_shard_hash(u) % 3, shard3[u]);
        CHECK(sq_shard_has(u, shard3[u], 3));
    }
    /* every user is in exactly one shard */
    for (uint32_t u = 0; u < 1000; u++) {
        int in = 0;
        for (uint32_t i = 0; i < 3; i++)
            in += sq_shard_has(u, i, 3);
        CHECK_EQ(in, 1);
        CHECK(sq_shard_has(u, 0, 1) && sq_shard_has(u, 0, 0));
    }
}

UNIT_TEST(test_eval_shards_partition_the_targets)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(big_dataset(&ds, &e), 0);
    sq_model m = {.n_items = 50, .scores = hash_model_scores};
    sq_eval_opts o;
    sq_eval_defaults(&o);
    CHECK_EQ(sq_eval_parse_candidates("uni:9", &o, &e), 0);
    ranks all, part;
    CHECK_EQ(run_ranks(&m, &ds, &o, &all), 0);
    int total = 0;
    for (uint32_t i = 0; i < 3; i++) {
        o.shard_i = i;
        o.shard_n = 3;
        CHECK_EQ(run_ranks(&m, &ds, &o, &part), 0);
        total += part.n;
        /* exactly the records of the full run whose user hashes to i, with
         * the same ranks, in the same order */
        int k = 0, same = 1;
        for (int j = 0; j < all.n; j++) {
            if (sq_shard_hash(all.r[j].user) % 3 != i)
                continue;
            same &= k < part.n && memcmp(&all.r[j], &part.r[k], sizeof all.r[j]) == 0;
            k++;
        }
        CHECK(same);
        CHECK(part.n > 0);
        CHECK_EQ(k, part.n);
    }
    CHECK_EQ(total, all.n);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_parse_options)
{
    sq_err e = {0};
    sq_eval_opts o;
    sq_eval_defaults(&o);
    char buf[32];
    CHECK_EQ(sq_eval_parse_candidates("uni:99", &o, &e), 0);
    CHECK(o.cand == SQ_CAND_UNI && o.n_neg == 99);
    sq_eval_candidates_name(&o, buf, sizeof buf);
    CHECK_STR(buf, "uni:99");
    CHECK_EQ(sq_eval_parse_candidates("pop:100", &o, &e), 0);
    CHECK(o.cand == SQ_CAND_POP && o.n_neg == 100);
    CHECK_EQ(sq_eval_parse_candidates("full", &o, &e), 0);
    CHECK(o.cand == SQ_CAND_FULL);
    const char *bad[] = {"", "uni", "uni:", "uni:0", "pop:-1", "uni:5x", "all", "pop:+3",
                         "uni:99999999999", "Full"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.code = 0;
        CHECK_EQ(sq_eval_parse_candidates(bad[i], &o, &e), SQ_EX_USAGE);
    }
    e.code = 0;
    CHECK_EQ(sq_eval_parse_shard("2/3", &o, &e), 0);
    CHECK(o.shard_i == 2 && o.shard_n == 3);
    const char *bads[] = {"3/3", "1/0", "a/b", "1", "/3", "1/", "-1/3", "0/3/4"};
    for (size_t i = 0; i < sizeof bads / sizeof bads[0]; i++) {
        e.code = 0;
        CHECK_EQ(sq_eval_parse_shard(bads[i], &o, &e), SQ_EX_USAGE);
    }
}

typedef struct {
    uint32_t user[8], k[8], items[8][8];
    float scores[8][8];
    int n;
} tops;

static int collect_top(void *ctx, uint32_t user, uint32_t k, const uint32_t *items,
                       const float *scores, sq_err *e)
{
    (void)e;
    tops *t = ctx;
    if (t->n < 8 && k <= 8) {
        t->user[t->n] = user;
        t->k[t->n] = k;
        memcpy(t->items[t->n], items, k * sizeof *items);
        memcpy(t->scores[t->n], scores, k * sizeof *scores);
    }
    t->n++;
    return 0;
}

UNIT_TEST(test_eval_topk_order_and_exclusion)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    sq_model m = table_model(6, table6);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    tops tp = {0};
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 3, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.n, 3); /* every user, with or without targets */
    CHECK_EQ(tp.k[0], 3);
    /* 1 (5), then the tie 2, 3, 4 (3) in item order: 2, 3 */
    CHECK(tp.items[0][0] == 1 && tp.items[0][1] == 2 && tp.items[0][2] == 3);
    CHECK_NEAR(tp.scores[0][0], 5, 0);
    CHECK_NEAR(tp.scores[0][2], 3, 0);
    /* excluding everything known: user 1 knows 1,5,2,3,4: only 6 is left */
    o.exclude_history = 1;
    memset(&tp, 0, sizeof tp);
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 3, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.k[0], 1);
    CHECK_EQ(tp.items[0][0], 6);
    CHECK_EQ(tp.k[1], 3); /* user 2 knows 2, 3, 6: 1, 4, 5 */
    CHECK(tp.items[1][0] == 1 && tp.items[1][1] == 4 && tp.items[1][2] == 5);
    CHECK_EQ(tp.k[2], 3); /* user 3 knows 6 */
    CHECK(tp.items[2][0] == 1 && tp.items[2][1] == 2 && tp.items[2][2] == 3);
    /* K above n_items: every item, best first */
    o.exclude_history = 0;
    memset(&tp, 0, sizeof tp);
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 100, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.k[0], 6);
    CHECK(tp.items[0][3] == 4 && tp.items[0][4] == 5 && tp.items[0][5] == 6);
    sq_dataset_free(&ds);
}

/* Item filters (eval.h ITEM FILTERS): table6 scores 1 (5), 2 3 4 (3), 5 (1),
 * 6 (0). Filtering out item 1 and 3: user 1's test target 4 has item 2
 * equal (pessimistic) among 2, 4, 5, 6: rank 2 of 4; user 2's target 2
 * (item 4 equal): rank 2 of 4. Filtering out the target 4 drops user 1's
 * rank and counts it. Top-K skips them; sampled negatives never draw them. */
UNIT_TEST(test_eval_item_filter)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    sq_model m = table_model(6, table6);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    unsigned char ok[7] = {0, 0, 1, 0, 1, 1, 1};
    uint64_t filtered = 0;
    o.item_ok = ok;
    o.filtered_targets = &filtered;
    ranks rs;
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.n, 2);
    CHECK_EQ(rs.r[0].rank, 2);
    CHECK_EQ(rs.r[0].n_cand, 4);
    CHECK_EQ(rs.r[1].rank, 2);
    CHECK_EQ(rs.r[1].n_cand, 4);
    CHECK_EQ(filtered, 0);
    CHECK_EQ(sq_eval_record_jobs(&m, &ds, &o, 0, 0), 1);
    ok[4] = 0; /* user 1's target */
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.n, 1);
    CHECK_EQ(rs.r[0].user, 2);
    CHECK_EQ(rs.r[0].n_cand, 3); /* 2, 5, 6 */
    CHECK_EQ(filtered, 1);
    CHECK_EQ(sq_eval_record_jobs(&m, &ds, &o, 0, 0), 0);
    CHECK_EQ(sq_eval_record_jobs(&m, &ds, &o, 1, 0), 1); /* a top-K list all the same */
    /* uniform and popularity negatives: only allowed items are drawn */
    ok[4] = 1;
    for (int cand = SQ_CAND_UNI; cand <= SQ_CAND_POP; cand++) {
        o.cand = cand;
        o.n_neg = 10;
        uint32_t list[8], n_list = 0;
        /* user 2's test target 2 at position 4 of record 1 */
        CHECK_EQ(sq_eval_candidates(&ds, &o, 1, 4, list, &n_list, &e), 0);
        for (uint32_t i = 0; i < n_list; i++)
            CHECK(ok[list[i]] && list[i] != 2);
        if (cand == SQ_CAND_UNI)
            CHECK_EQ(n_list, 3); /* 4, 5, 6 */
    }
    /* top-K: filtered items are never listed */
    o.cand = SQ_CAND_FULL;
    tops tp = {0};
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 3, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.k[0], 3);
    CHECK(tp.items[0][0] == 2 && tp.items[0][1] == 4 && tp.items[0][2] == 5);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_eval_users_set_keeps_the_listed_users)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(table_dataset(&ds, &e), 0);
    sq_model m = table_model(6, table6);
    sq_eval_opts o;
    sq_eval_defaults(&o);
    unsigned char set[3] = {0, 0, 1}; /* user 2 only; user 3 is beyond n_users */
    o.users = set;
    o.n_users = 3;
    tops tp = {0};
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 2, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.n, 1);
    CHECK_EQ(tp.user[0], 2);
    ranks rs;
    CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
    CHECK_EQ(rs.n, 1);
    CHECK_EQ(rs.r[0].user, 2);
    /* with a shard: the users of both */
    set[1] = 1;
    o.shard_n = 3;
    o.shard_i = 2; /* users 1 and 2 are in shard 2 of 3 (test_eval_shard_hash_is_stable) */
    memset(&tp, 0, sizeof tp);
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 2, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.n, 2);
    o.shard_i = 0;
    memset(&tp, 0, sizeof tp);
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 2, collect_top, &tp, &e), 0);
    CHECK_EQ(tp.n, 0);
    sq_dataset_free(&ds);
}

/* Scores of n histories (lengths 0..) of a model, batched by B, with T
 * OpenMP threads, into out [n x (n_items + 1)]. */
static int scores_by(const sq_sasrec *m, const uint32_t *items, const uint32_t *off,
                     const uint32_t *len, int n, int B, int T, float *out, sq_err *e)
{
    size_t row = (size_t)m->cfg.n_items + 1;
    int keep = omp_get_max_threads();
    omp_set_num_threads(T);
    int rc = 0;
    for (int b0 = 0; b0 < n && !rc; b0 += B) {
        int nb = n - b0 < B ? n - b0 : B;
        uint32_t o2[64];
        for (int i = 0; i < nb; i++)
            o2[i] = off[b0 + i] - off[b0];
        sq_batch bt = {items + off[b0], o2, len + b0, nb, NULL, NULL};
        rc = sq_sasrec_scores(m, &bt, out + (size_t)b0 * row, e);
    }
    omp_set_num_threads(keep);
    return rc;
}

UNIT_TEST(test_eval_sasrec_scores_do_not_depend_on_the_batch)
{
    /* d = 64 and a 50-item window, the papers' sizes, where a GEMM over the
     * batch changed the last bits with the batch's shape */
    for (int backbone = 0; backbone < 2; backbone++) {
        sq_err e = {0};
        sq_sasrec_config c;
        sq_sasrec_defaults(&c, backbone ? SQ_BACKBONE_BERT4REC : SQ_BACKBONE_SASREC);
        c.n_items = 300;
        c.n_layers = 2;
        c.n_heads = 2;
        c.dim = 64;
        c.ffn = 64;
        c.max_len = 50;
        c.dropout = 0;
        sq_sasrec m;
        CHECK_EQ(sq_sasrec_alloc(&m, &c, &e), 0);
        sq_sasrec_init_weights(&m, 7);
        enum { N = 40 };
        uint32_t items[N * 70], off[N], len[N], at = 0;
        for (int u = 0; u < N; u++) {
            off[u] = at;
            len[u] = (uint32_t)(u * 37 % 70); /* 0 (cold) .. 69 (over the window) */
            for (uint32_t j = 0; j < len[u]; j++)
                items[at++] = 1 + (uint32_t)(u * 131 + j * 17) % 300;
        }
        size_t row = (size_t)c.n_items + 1;
        float *a = malloc(N * row * sizeof *a), *b = malloc(N * row * sizeof *b);
        CHECK(a && b);
        CHECK_EQ(scores_by(&m, items, off, len, N, N, 2, a, &e), 0);
        int finite = 1;
        for (size_t i = 0; i < N * row; i++)
            finite &= isfinite(a[i]) != 0;
        CHECK(finite);
        CHECK(a[0] == 0 && a[row] == 0); /* the padding column */
        static const int Bs[] = {1, 7, 13}, Ts[] = {1, 3, 2};
        for (int k = 0; k < 3; k++) {
            CHECK_EQ(scores_by(&m, items, off, len, N, Bs[k], Ts[k], b, &e), 0);
            CHECK(memcmp(a, b, N * row * sizeof *a) == 0);
        }
        /* a history scored inside a batch of others is the history alone */
        CHECK_EQ(scores_by(&m, items + off[5], (uint32_t[]){0}, len + 5, 1, 1, 1, b, &e), 0);
        CHECK(memcmp(a + 5 * row, b, row * sizeof *a) == 0);
        free(a);
        free(b);
        sq_sasrec_free(&m);
    }
}

UNIT_TEST(test_eval_padded_history_is_the_rows_sequence)
{
    /* Rows of 6 under three policies, then the targets 4 (valid) and 5
     * (test). The history is the row's last run of non-zero items: 1 2 3
     * (zeros left or right) or 1 2 (RandomPad [0 S 0 S] with S = 1 2).
     * View 1 (all 3s) must be ignored by evaluation and popularity. */
    sq_err e = {0};
    sq_header h;
    sq_header_init(&h, SQ_PADDED, 6);
    h.max_len = 6;
    static uint32_t rows[3][8] = {{0, 0, 0, 1, 2, 3, 4, 5},
                                  {1, 2, 3, 0, 0, 0, 4, 5},
                                  {0, 1, 2, 0, 1, 2, 4, 5}};
    static uint32_t view1[8] = {3, 3, 3, 3, 3, 3, 4, 5};
    static const uint32_t want_hist[3] = {3, 0, 4}, want_cand[3] = {2, 2, 3};
    for (int k = 0; k < 3; k++) {
        sq_dataset ds;
        CHECK_EQ(sq_dataset_init(&ds, &h, &e), 0);
        sq_record r = {.user = 7, .len = 8, .items = rows[k], .n_train = 6, .n_valid = 1};
        CHECK_EQ(sq_dataset_add(&ds, &r, &e), 0);
        r.view = 1;
        r.items = view1;
        CHECK_EQ(sq_dataset_add(&ds, &r, &e), 0);
        CHECK_EQ(sq_dataset_finish(&ds, &e), 0);
        CHECK_EQ(ds.seq[0].hist, want_hist[k]);
        CHECK_EQ(ds.pop[1], 1);
        CHECK_EQ(ds.pop[2], 1);
        CHECK_EQ(ds.pop[3], k == 2 ? 0 : 1);
        CHECK_EQ(ds.pop[0], 0);
        sq_model m = table_model(6, table6);
        sq_eval_opts o;
        sq_eval_defaults(&o);
        o.exclude_history = 1;
        ranks rs;
        CHECK_EQ(run_ranks(&m, &ds, &o, &rs), 0);
        /* view 0 only; test target 5 with the history (sequence, 4) excluded */
        CHECK_EQ(rs.n, 1);
        CHECK_EQ(rs.r[0].item, 5);
        CHECK_EQ(rs.r[0].n_cand, want_cand[k]);
        sq_dataset_free(&ds);
    }
    sq_header_free(&h);
}

UNIT_TEST(test_dataset_idmap_reads_preprocess_maps)
{
    char path[] = "/tmp/seqrec-map-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("user\t1\tann\nuser\t2\tbob smith\nitem\t1\tB00X\r\nitem\t3\tC\n", f);
    fclose(f);
    sq_err e = {0};
    sq_idmap m;
    CHECK_EQ(sq_idmap_read(&m, path, &e), 0);
    CHECK_STR(sq_idmap_user(&m, 1), "ann");
    CHECK_STR(sq_idmap_user(&m, 2), "bob smith");
    CHECK(sq_idmap_user(&m, 3) == NULL);
    CHECK(sq_idmap_user(&m, 0) == NULL);
    CHECK_STR(sq_idmap_item(&m, 1), "B00X"); /* CRLF line ends are fine */
    CHECK(sq_idmap_item(&m, 2) == NULL);
    CHECK_STR(sq_idmap_item(&m, 3), "C");
    sq_idmap_free(&m);
    /* (a tab inside the original id is its own: sq_idmap_line, test_interactions) */
    const char *bad[] = {"user\t1\n", "thing\t1\tx\n", "user\t0\tx\n", "item\tx\ty\n",
                         "user\t1\t\n"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        f = fopen(path, "w");
        CHECK(f != NULL);
        if (!f)
            break;
        fputs(bad[i], f);
        fclose(f);
        e.code = 0;
        CHECK_EQ(sq_idmap_read(&m, path, &e), SQ_EX_DATA);
        CHECK(strstr(e.msg, ": line 1: ") != NULL);
    }
    unlink(path);
    e.code = 0;
    CHECK_EQ(sq_idmap_read(&m, path, &e), SQ_EX_NOINPUT);
}

/* The default batch: 256 histories, fewer when their scores would pass
 * SQ_EVAL_SCORES_MAX floats; a given --batch is kept. */
UNIT_TEST(test_eval_batch_fits_the_catalogue)
{
    sq_eval_opts o;
    sq_eval_defaults(&o);
    CHECK_EQ(sq_eval_batch(&o, 12101), 256);
    CHECK_EQ(sq_eval_batch(&o, 262143), 256); /* 256 x 262144 floats: exactly the cap */
    CHECK_EQ(sq_eval_batch(&o, 262144), 255);
    CHECK_EQ(sq_eval_batch(&o, 1000000), 67);
    CHECK_EQ(sq_eval_batch(&o, UINT32_MAX), 1);
    CHECK((size_t)sq_eval_batch(&o, 1000000) * 1000001 <= SQ_EVAL_SCORES_MAX);
    o.batch = 512;
    CHECK_EQ(sq_eval_batch(&o, 1000000), 512);
}
