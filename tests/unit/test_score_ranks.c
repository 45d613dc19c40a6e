/* Scoring across ranks (score_ranks.h): the shards' packed results, merged,
 * come out in one unsharded call's order with the same bytes, for ranks
 * and top-K lists and any shard count, a user with two records and users
 * left out included; parts that do not fit the records are refused; one
 * process's run is the plain call; the gather's rounds of any size put a
 * part back together byte for byte. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "dataset.h"
#include "eval.h"
#include "model.h"
#include "score_ranks.h"
#include "hash_model.h"
#include "unit.h"

/* The model cannot score user 7 (as caser for users beyond its table) */
static int knows(const sq_model *m, uint32_t user)
{
    (void)m;
    return user != 7;
}

/* 40 records of users 1..39 and user 5 again at the end (two records of
 * one user, apart), histories of 3..9 items of 30, cut leave-one-out */
static int ranks_dataset(sq_dataset *ds, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 30);
    int rc = sq_meta_add(&h, e, "dataset", "%s", "sr");
    if (!rc)
        rc = sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    for (uint32_t r = 0; r < 40 && !rc; r++) {
        uint32_t items[9], len = 3 + (r * 7) % 7;
        for (uint32_t j = 0; j < len; j++)
            items[j] = 1 + (r * 11 + j * 5) % 30;
        sq_record rec = {.user = r < 39 ? r + 1 : 5, .len = len, .items = items,
                         .n_train = len - 2, .n_valid = 1};
        rc = sq_dataset_add(ds, &rec, e);
    }
    return rc ? rc : sq_dataset_finish(ds, e);
}

/* What the output callbacks got, as text */
typedef struct {
    char *s;
    size_t n, cap;
} text;

static int add(text *t, const char *line)
{
    size_t l = strlen(line);
    if (t->n + l + 1 > t->cap) {
        size_t cap = (t->cap ? t->cap * 2 : 4096) + l;
        char *p = realloc(t->s, cap);
        if (!p)
            return -1;
        t->s = p;
        t->cap = cap;
    }
    memcpy(t->s + t->n, line, l + 1);
    t->n += l;
    return 0;
}

static int put_rank(void *ctx, const sq_rank *r, sq_err *e)
{
    char line[96];
    snprintf(line, sizeof line, "%u %u %u %u\n", r->user, r->item, r->rank, r->n_cand);
    return add(ctx, line) ? sq_fail(e, SQ_EX_OSERR, "oom") : 0;
}

static int put_topk(void *ctx, uint32_t user, uint32_t k, const uint32_t *items,
                    const float *scores, sq_err *e)
{
    char line[64];
    snprintf(line, sizeof line, "%u:", user);
    int rc = add(ctx, line);
    for (uint32_t j = 0; j < k && !rc; j++) {
        uint32_t bits;
        memcpy(&bits, &scores[j], sizeof bits);
        snprintf(line, sizeof line, " %u/%08x", items[j], bits);
        rc = add(ctx, line);
    }
    return rc || add(ctx, "\n") ? sq_fail(e, SQ_EX_OSERR, "oom") : 0;
}

/* The merge of n shards of (K 0: ranks, else top-K) equals one call */
static int merge_is_one_call(sq_model *m, const sq_dataset *ds, const sq_eval_opts *o,
                             uint32_t K, int n)
{
    sq_err e = {0};
    text one = {0}, merged = {0};
    int rc = K ? sq_eval_topk(m, ds, o, K, put_topk, &one, &e)
               : sq_eval_ranks(m, ds, o, put_rank, &one, NULL, &e);
    sq_score_part parts[8] = {{0}};
    for (int s = 0; s < n && !rc; s++) {
        sq_eval_opts so = *o;
        so.shard_i = (uint32_t)s;
        so.shard_n = (uint32_t)n;
        rc = K ? sq_eval_topk(m, ds, &so, K, sq_score_keep_topk, &parts[s], &e)
               : sq_eval_ranks(m, ds, &so, sq_score_keep_rank, &parts[s], NULL, &e);
    }
    sq_score_out out = {.rank = put_rank, .topk = put_topk, .ctx = &merged};
    if (!rc)
        rc = sq_score_merge(m, ds, o, K != 0, parts, n, &out, &e);
    int same = !rc && one.n > 0 && one.n == merged.n && memcmp(one.s, merged.s, one.n) == 0;
    for (int s = 0; s < n; s++)
        sq_score_part_free(&parts[s]);
    free(one.s);
    free(merged.s);
    return same;
}

UNIT_TEST(test_score_ranks_merge_is_one_process)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(ranks_dataset(&ds, &e), 0);
    sq_model m = {.n_items = 30, .scores = hash_model_scores, .knows_user = knows};
    sq_eval_opts o;
    sq_eval_defaults(&o);
    o.threads = 1;
    o.batch = 5;
    for (int n = 1; n <= 5; n++) {
        CHECK(merge_is_one_call(&m, &ds, &o, 0, n));
        CHECK(merge_is_one_call(&m, &ds, &o, 4, n));
    }
    /* validation targets, sampled candidates, a users set, short lists */
    o.target = SQ_EVAL_VALID;
    CHECK_EQ(sq_eval_parse_candidates("uni:6", &o, &e), 0);
    unsigned char users[41] = {0};
    for (int u = 0; u < 41; u += 3)
        users[u] = 1;
    users[5] = 1;
    o.users = users;
    o.n_users = 41;
    CHECK(merge_is_one_call(&m, &ds, &o, 0, 3));
    CHECK(merge_is_one_call(&m, &ds, &o, 40, 4));
    sq_dataset_free(&ds);
}

UNIT_TEST(test_score_ranks_merge_refuses_parts_that_do_not_fit)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(ranks_dataset(&ds, &e), 0);
    sq_model m = {.n_items = 30, .scores = hash_model_scores};
    sq_eval_opts o;
    sq_eval_defaults(&o);
    o.threads = 1;
    sq_score_part parts[2] = {{0}};
    for (int s = 0; s < 2; s++) {
        sq_eval_opts so = o;
        so.shard_i = (uint32_t)s;
        so.shard_n = 2;
        CHECK_EQ(sq_eval_ranks(&m, &ds, &so, sq_score_keep_rank, &parts[s], NULL, &e), 0);
    }
    text got = {0};
    sq_score_out out = {.rank = put_rank, .ctx = &got};
    /* the parts swapped: users where others were due */
    sq_score_part sw[2] = {parts[1], parts[0]};
    CHECK_EQ(sq_score_merge(&m, &ds, &o, 0, sw, 2, &out, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "do not follow the stream's order") != NULL);
    /* one result short, then one too many */
    sq_score_part cut = parts[0];
    cut.n -= sizeof(sq_rank);
    sq_score_part sh[2] = {cut, parts[1]};
    e = (sq_err){0};
    CHECK_EQ(sq_score_merge(&m, &ds, &o, 0, sh, 2, &out, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "rank 0 gave fewer ranked targets") != NULL);
    e = (sq_err){0};
    CHECK_EQ(sq_score_keep_rank(&parts[1], &(sq_rank){1, 2, 3, 4}, &e), 0);
    CHECK_EQ(sq_score_merge(&m, &ds, &o, 0, parts, 2, &out, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "rank 1 gave 16 bytes of results more") != NULL);
    /* ranks parts read as top-K lists */
    e = (sq_err){0};
    CHECK_EQ(sq_score_merge(&m, &ds, &o, 1, parts, 2, &out, &e), SQ_EX_SOFTWARE);
    for (int s = 0; s < 2; s++)
        sq_score_part_free(&parts[s]);
    free(got.s);
    sq_dataset_free(&ds);
}

static void count_tick(void *ctx)
{
    ++*(int *)ctx;
}

UNIT_TEST(test_score_ranks_one_process_is_the_plain_call)
{
    sq_err e = {0};
    sq_dataset ds;
    CHECK_EQ(ranks_dataset(&ds, &e), 0);
    sq_model m = {.n_items = 30, .scores = hash_model_scores, .knows_user = knows};
    sq_eval_opts o;
    sq_eval_defaults(&o);
    o.threads = 1;
    sq_comm c = {.size = 1};
    text one = {0}, run = {0};
    uint64_t unknown = 0;
    o.unknown_users = &unknown;
    CHECK_EQ(sq_eval_topk(&m, &ds, &o, 3, put_topk, &one, &e), 0);
    CHECK_EQ(unknown, 1); /* user 7 */
    unknown = 0;
    sq_score_out out = {.rank = put_rank, .topk = put_topk, .ctx = &run};
    CHECK_EQ(sq_score_run(&c, &m, &ds, &o, 3, &out, &e), 0);
    CHECK_EQ(unknown, 1);
    CHECK(out.fail.agreed && out.fail.rank < 0);
    CHECK(one.n == run.n && memcmp(one.s, run.s, one.n) == 0);
    /* --shard applies to one process */
    o.shard_i = 1;
    o.shard_n = 2;
    CHECK_EQ(sq_score_run(&c, &m, &ds, &o, 3, &out, &e), 0);
    /* the status exchange of one process hands its status back */
    sq_score_fail f;
    CHECK_EQ(sq_score_agree(&c, 0, &f, &e), 0);
    CHECK_EQ(sq_score_agree(&c, SQ_EX_DATA, &f, &e), SQ_EX_DATA);
    CHECK(f.agreed && !f.remote && f.rank == 0);
    CHECK_EQ(sq_score_same(&c, "/nonexistent", &ds, &o, 3, &f, &e), 0);
    free(one.s);
    free(run.s);
    sq_dataset_free(&ds);
}

UNIT_TEST(test_score_ranks_part_keeps_topk_lists_packed)
{
    sq_err e = {0};
    int ticks = 0;
    sq_score_part p = {.tick = count_tick, .ctx = &ticks};
    uint32_t items[3] = {4, 9, 2};
    float scores[3] = {1.5f, 1.0f, -0.25f};
    CHECK_EQ(sq_score_keep_topk(&p, 12, 3, items, scores, &e), 0);
    CHECK_EQ(sq_score_keep_topk(&p, 13, 0, NULL, NULL, &e), 0);
    CHECK_EQ(ticks, 2);
    CHECK_EQ(p.n, 8 + 3 * 8 + 8);
    uint32_t head[2];
    memcpy(head, p.p, sizeof head);
    CHECK_EQ(head[0], 12);
    CHECK_EQ(head[1], 3);
    CHECK(memcmp(p.p + 8, items, sizeof items) == 0);
    CHECK(memcmp(p.p + 20, scores, sizeof scores) == 0);
    memcpy(head, p.p + 32, sizeof head);
    CHECK_EQ(head[0], 13);
    CHECK_EQ(head[1], 0);
    sq_score_part_free(&p);
    CHECK(p.p == NULL && p.n == 0);
}

UNIT_TEST(test_score_ranks_gather_rounds_rebuild_the_part)
{
    sq_err e = {0};
    sq_comm c = {.size = 1};
    sq_score_part mine = {0};
    for (uint32_t u = 0; u < 50; u++)
        CHECK_EQ(sq_score_keep_rank(&mine, &(sq_rank){u, u * 3, u % 7, 9}, &e), 0);
    /* rounds of 1 byte, of 7 (not a result's size), of all at once */
    size_t rounds[] = {1, 7, 16, 799, 800, 801, 0};
    for (size_t i = 0; i < sizeof rounds / sizeof *rounds; i++) {
        sq_score_part *parts = NULL;
        sq_score_fail f;
        CHECK_EQ(sq_score_gather(&c, &mine, rounds[i], &parts, &f, &e), 0);
        CHECK(parts != NULL && parts[0].n == mine.n &&
              memcmp(parts[0].p, mine.p, mine.n) == 0);
        sq_score_parts_free(parts, 1);
    }
    /* an empty part */
    sq_score_part none = {0}, *parts = NULL;
    sq_score_fail f;
    CHECK_EQ(sq_score_gather(&c, &none, 3, &parts, &f, &e), 0);
    CHECK(parts != NULL && parts[0].n == 0);
    sq_score_parts_free(parts, 1);
    sq_score_part_free(&mine);
}
