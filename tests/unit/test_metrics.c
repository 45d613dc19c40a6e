/* Unit tests for lib/train/metrics.c against values computed by hand. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "stream.h"
#include "unit.h"

/* Ranks {1, 2, 5, 11, 30} out of 100 candidates, K = 10 and 20:
 *   1/log2(2) = 1, 1/log2(3) = 0.6309297536, 1/log2(6) = 0.3868528072,
 *   1/log2(12) = 0.2789429457
 *   HR@10   = 3/5 = 0.6                 HR@20   = 4/5 = 0.8
 *   NDCG@10 = (1 + 0.6309297536 + 0.3868528072)/5          = 0.4035565122
 *   NDCG@20 = (1 + 0.6309297536 + 0.3868528072 + 0.2789429457)/5
 *                                                          = 0.4593451013
 *   MRR@10  = (1 + 1/2 + 1/5)/5 = 1.7/5 = 0.34
 *   MRR@20  = (1.7 + 1/11)/5 = 1.7909090909/5              = 0.3581818182
 *   P@10    = 0.6/10 = 0.06             P@20 = 0.8/20 = 0.04
 *   MRR     = (1.7 + 1/11 + 1/30)/5 = 1.8242424242/5       = 0.3648484848 */
UNIT_TEST(test_metrics_hand_computed)
{
    uint32_t k[2] = {10, 20};
    uint32_t ranks[5] = {1, 2, 5, 11, 30};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 2, &e), 0);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(sq_metrics_add(&m, (uint32_t)i + 1, ranks[i], 100, &e), 0);
    sq_metrics_at a = sq_metrics_get(&m, 0);
    CHECK_EQ(a.k, 10);
    CHECK_NEAR(a.hr, 0.6, 1e-12);
    CHECK_NEAR(a.recall, 0.6, 1e-12);
    CHECK_NEAR(a.ndcg, 0.4035565122, 1e-9);
    CHECK_NEAR(a.mrr, 0.34, 1e-12);
    CHECK_NEAR(a.precision, 0.06, 1e-12);
    a = sq_metrics_get(&m, 1);
    CHECK_EQ(a.k, 20);
    CHECK_NEAR(a.hr, 0.8, 1e-12);
    CHECK_NEAR(a.recall, 0.8, 1e-12);
    CHECK_NEAR(a.ndcg, 0.4593451013, 1e-9);
    CHECK_NEAR(a.mrr, 0.3581818182, 1e-9);
    CHECK_NEAR(a.precision, 0.04, 1e-12);
    CHECK_NEAR(sq_metrics_mrr(&m), 0.3648484848, 1e-9);
    CHECK_EQ(m.records, 5);
    CHECK_EQ(m.n_users, 5);
    sq_metrics_free(&m);
}

/* K above the candidate count: rank 5 of 5 is a hit at K = 10, and
 * Precision still divides by K (RecBole does): 1/10. */
UNIT_TEST(test_metrics_k_above_n_cand)
{
    uint32_t k[1] = {10};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    CHECK_EQ(sq_metrics_add(&m, 1, 5, 5, &e), 0); /* rank == n_cand is fine */
    sq_metrics_at a = sq_metrics_get(&m, 0);
    CHECK_NEAR(a.hr, 1.0, 1e-12);
    CHECK_NEAR(a.ndcg, 1.0 / log2(6.0), 1e-12);
    CHECK_NEAR(a.mrr, 0.2, 1e-12);
    CHECK_NEAR(a.precision, 0.1, 1e-12);
    CHECK_NEAR(sq_metrics_mrr(&m), 0.2, 1e-12);
    sq_metrics_free(&m);
}

UNIT_TEST(test_metrics_rank_bounds)
{
    uint32_t k[1] = {1};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    CHECK_EQ(sq_metrics_add(&m, 1, 1, 1, &e), 0); /* the only candidate */
    CHECK_EQ(sq_metrics_add(&m, 1, 6, 5, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "rank 6 outside 1..n_cand (5)") != NULL);
    e.code = 0;
    CHECK_EQ(sq_metrics_add(&m, 1, 0, 5, &e), SQ_EX_DATA);
    e.code = 0;
    CHECK_EQ(sq_metrics_add(&m, 1, 1, 0, &e), SQ_EX_DATA);
    CHECK_EQ(m.records, 1); /* refused records are not counted */
    sq_metrics_at a = sq_metrics_get(&m, 0);
    CHECK_NEAR(a.hr, 1.0, 1e-12);
    CHECK_NEAR(a.ndcg, 1.0, 1e-12);
    CHECK_NEAR(a.precision, 1.0, 1e-12);
    sq_metrics_free(&m);
}

/* Several records of one user count once each in the means, once in users. */
UNIT_TEST(test_metrics_users)
{
    uint32_t k[1] = {10};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    CHECK_EQ(sq_metrics_add(&m, 7, 1, 10, &e), 0);
    CHECK_EQ(sq_metrics_add(&m, 7, 10, 10, &e), 0);
    CHECK_EQ(sq_metrics_add(&m, 0, 2, 10, &e), 0);
    CHECK_EQ(sq_metrics_add(&m, UINT32_MAX, 2, 10, &e), 0);
    CHECK_EQ(m.records, 4);
    CHECK_EQ(m.n_users, 3);
    /* (1 + 0.1 + 0.5 + 0.5) / 4 */
    CHECK_NEAR(sq_metrics_get(&m, 0).mrr, 2.1 / 4, 1e-12);
    /* The set grows past its first capacity. */
    for (uint32_t u = 100; u < 10100; u++)
        CHECK_EQ(sq_metrics_add(&m, u % 5000, 1, 1, &e), 0);
    CHECK_EQ(m.n_users, 5001); /* 0..4999 and UINT32_MAX */
    sq_metrics_free(&m);
}

UNIT_TEST(test_metrics_parse_k)
{
    uint32_t k[SQ_METRICS_MAX_K];
    int n = 0;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_parse_k("10,20", k, &n, &e), 0);
    CHECK_EQ(n, 2);
    CHECK_EQ(k[0], 10);
    CHECK_EQ(k[1], 20);
    CHECK_EQ(sq_metrics_parse_k("50,1,5", k, &n, &e), 0);
    CHECK_EQ(n, 3);
    CHECK_EQ(k[0], 50);
    CHECK_EQ(k[2], 5);
    const char *bad[] = {"", "0", "10,", ",10", "a", "10,10", "-5", "10;20", "+5", "1 0",
                         "4294967296"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e.code = 0;
        CHECK_EQ(sq_metrics_parse_k(bad[i], k, &n, &e), SQ_EX_USAGE);
    }
    char many[256] = "1";
    for (int i = 2; i <= SQ_METRICS_MAX_K + 1; i++)
        snprintf(many + strlen(many), sizeof many - strlen(many), ",%d", i);
    e.code = 0;
    CHECK_EQ(sq_metrics_parse_k(many, k, &n, &e), SQ_EX_USAGE);
}

UNIT_TEST(test_metrics_parse_line)
{
    sq_record r;
    char why[256];
    CHECK_EQ(sq_ranks_parse_line("3\t2\t100\n", &r, why, sizeof why), 1);
    CHECK_EQ(r.user, 3);
    CHECK_EQ(r.rank, 2);
    CHECK_EQ(r.n_cand, 100);
    CHECK_EQ(r.item, 0);
    CHECK_EQ(sq_ranks_parse_line("3\t2\t100\t17\r\n", &r, why, sizeof why), 1);
    CHECK_EQ(r.item, 17);
    CHECK_EQ(sq_ranks_parse_line("4 1  5", &r, why, sizeof why), 1);
    CHECK_EQ(sq_ranks_parse_line("# user rank n_cand\n", &r, why, sizeof why), 0);
    CHECK_EQ(sq_ranks_parse_line("  \t\n", &r, why, sizeof why), 0);
    CHECK_EQ(sq_ranks_parse_line("", &r, why, sizeof why), 0);
    CHECK_EQ(sq_ranks_parse_line("3\t2\n", &r, why, sizeof why), -1);
    CHECK(strstr(why, "got 2") != NULL);
    CHECK_EQ(sq_ranks_parse_line("3\t2\t5\t1\t9\n", &r, why, sizeof why), -1);
    CHECK_EQ(sq_ranks_parse_line("3\tx\t5\n", &r, why, sizeof why), -1);
    CHECK(strstr(why, "rank: 'x'") != NULL);
    CHECK_EQ(sq_ranks_parse_line("3\t-1\t5\n", &r, why, sizeof why), -1);
    CHECK_EQ(sq_ranks_parse_line("3\t1\t4294967296\n", &r, why, sizeof why), -1);
    CHECK_EQ(sq_ranks_parse_line("3\t1\t5\t0\n", &r, why, sizeof why), -1);
    CHECK_EQ(sq_ranks_parse_line("3\t1.5\t5\n", &r, why, sizeof why), -1);
}

static int read_text(sq_metrics *m, const char *text, sq_err *e)
{
    uint32_t k[1] = {10};
    if (sq_metrics_init(m, k, 1, e))
        return e->code;
    FILE *f = fmemopen((void *)text, strlen(text), "r");
    if (!f)
        return -1;
    int rc = sq_metrics_read(m, f, "in.txt", e);
    fclose(f);
    return rc;
}

UNIT_TEST(test_metrics_read_text)
{
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(read_text(&m, "# ranks\n1\t1\t10\n\n2\t3\t10\t4\n", &e), 0);
    CHECK_EQ(m.records, 2);
    CHECK_NEAR(sq_metrics_mrr(&m), (1 + 1.0 / 3) / 2, 1e-12);
    sq_metrics_free(&m);

    e.code = 0;
    CHECK_EQ(read_text(&m, "1\t1\t10\n# c\n2\t3\n", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "in.txt: line 3: expected 3 or 4 fields") == e.msg);
    sq_metrics_free(&m);

    e.code = 0;
    CHECK_EQ(read_text(&m, "1\t1\t10\n2\t11\t10\n", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "in.txt: line 2: rank 11 outside 1..n_cand (10)");
    sq_metrics_free(&m);

    e.code = 0;
    CHECK_EQ(read_text(&m, "", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "in.txt: no rank records");
    sq_metrics_free(&m);

    e.code = 0;
    CHECK_EQ(read_text(&m, "# only a comment\n\n", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "in.txt: no rank records");
    sq_metrics_free(&m);
}

/* A ranks stream in memory with the given records. */
static char *ranks_stream(const uint32_t (*rows)[3], int n, size_t *len, uint16_t kind)
{
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f)
        return NULL;
    sq_header h;
    sq_header_init(&h, kind, 50);
    sq_writer w;
    sq_err e = {0};
    int rc = sq_writer_open(&w, f, "mem", &h, &e);
    for (int i = 0; rc == 0 && i < n; i++) {
        sq_record r;
        memset(&r, 0, sizeof r);
        uint32_t item = 3;
        r.user = rows[i][0];
        r.rank = rows[i][1];
        r.n_cand = rows[i][2];
        r.item = item;
        r.len = 1;
        r.items = &item;
        rc = sq_write(&w, &r, &e);
    }
    if (rc == 0)
        rc = sq_writer_finish(&w, &e);
    sq_writer_free(&w);
    sq_header_free(&h);
    fclose(f);
    if (rc) {
        free(buf);
        return NULL;
    }
    return buf;
}

UNIT_TEST(test_metrics_read_stream)
{
    const uint32_t rows[5][3] = {{1, 1, 100}, {2, 2, 100}, {3, 5, 100}, {4, 11, 100}, {5, 30, 100}};
    size_t len = 0;
    char *buf = ranks_stream(rows, 5, &len, SQ_RANKS);
    CHECK(buf != NULL);
    if (!buf)
        return;
    uint32_t k[1] = {10};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    FILE *f = fmemopen(buf, len, "rb");
    CHECK_EQ(sq_metrics_read(&m, f, "mem", &e), 0);
    fclose(f);
    CHECK_EQ(m.records, 5);
    CHECK_NEAR(sq_metrics_get(&m, 0).ndcg, 0.4035565122, 1e-9);
    CHECK_NEAR(sq_metrics_mrr(&m), 0.3648484848, 1e-9);
    sq_metrics_free(&m);

    /* Cut before the trailer: the reader's error, with a byte offset. */
    e.code = 0;
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    f = fmemopen(buf, len - 5, "rb");
    CHECK_EQ(sq_metrics_read(&m, f, "mem", &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "mem: byte ") == e.msg);
    fclose(f);
    sq_metrics_free(&m);
    free(buf);
}

UNIT_TEST(test_metrics_wrong_kind_and_empty_stream)
{
    size_t len = 0;
    char *buf = ranks_stream(NULL, 0, &len, SQ_RANKS);
    CHECK(buf != NULL);
    uint32_t k[1] = {10};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    FILE *f = fmemopen(buf, len, "rb");
    CHECK_EQ(sq_metrics_read(&m, f, "mem", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "mem: no rank records");
    fclose(f);
    sq_metrics_free(&m);
    free(buf);

    buf = ranks_stream(NULL, 0, &len, SQ_SEQUENCES);
    CHECK(buf != NULL);
    e.code = 0;
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    f = fmemopen(buf, len, "rb");
    CHECK_EQ(sq_metrics_read(&m, f, "mem", &e), SQ_EX_DATA);
    CHECK_STR(e.msg, "mem: byte 6: a sequences stream, expected ranks");
    fclose(f);
    sq_metrics_free(&m);
    free(buf);
}

static char *output_of(const sq_metrics *m, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    sq_err e = {0};
    sq_metrics_opts o = {0};
    sq_metrics_report r;
    if (sq_metrics_report_make(m, &o, &r, &e) == 0 && json)
        sq_metrics_write_json(&r, f, "mem", &e);
    else if (e.code == 0)
        sq_metrics_write_table(&r, f, "mem", &e);
    fclose(f);
    return buf;
}

UNIT_TEST(test_metrics_output)
{
    uint32_t k[2] = {10, 20};
    uint32_t ranks[5] = {1, 2, 5, 11, 30};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 2, &e), 0);
    for (int i = 0; i < 5; i++)
        CHECK_EQ(sq_metrics_add(&m, (uint32_t)i + 1, ranks[i], 100, &e), 0);
    char *table = output_of(&m, 0);
    CHECK_STR(table,
              "metric            @10        @20\n"
              "HR             0.6000     0.8000\n"
              "Recall         0.6000     0.8000\n"
              "NDCG           0.4036     0.4593\n"
              "MRR            0.3400     0.3582\n"
              "MAP            0.3400     0.3582\n"
              "Precision      0.0600     0.0400\n"
              "MRR (all)      0.3648\n"
              "records             5\n"
              "users               5\n");
    char *json = output_of(&m, 1);
    CHECK_STR(json,
              "{\"records\": 5, \"users\": 5, \"mrr\": 0.364848"
              ", \"hr@10\": 0.600000, \"recall@10\": 0.600000, \"ndcg@10\": 0.403557"
              ", \"mrr@10\": 0.340000, \"map@10\": 0.340000, \"precision@10\": 0.060000"
              ", \"hr@20\": 0.800000, \"recall@20\": 0.800000, \"ndcg@20\": 0.459345"
              ", \"mrr@20\": 0.358182, \"map@20\": 0.358182, \"precision@20\": 0.040000}\n");
    free(table);
    free(json);
    sq_metrics_free(&m);
}

/* MAP@K, --per-user and the rank estimate of --corrected, by hand:
 * user 1 ranks 1 and 4, user 2 rank 2, all of 10 candidates, K = 2.
 *   per record: HR@2 = 2/3, MAP@2 = (1 + 0 + 1/2)/3 = 0.5, MRR = (1 + 1/4 + 1/2)/3
 *   per user:   HR@2 = (1/2 + 1)/2 = 0.75, MAP@2 = (1/2 + 1/2)/2 = 0.5,
 *               MRR = (5/8 + 1/2)/2 = 0.5625 */
UNIT_TEST(test_metrics_map_per_user)
{
    uint32_t k[1] = {2};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 1, &e), 0);
    CHECK_EQ(sq_metrics_add_item(&m, 1, 1, 10, 3, &e), 0);
    CHECK_EQ(sq_metrics_add_item(&m, 2, 2, 10, 4, &e), 0);
    CHECK_EQ(sq_metrics_add_item(&m, 1, 4, 10, 5, &e), 0);
    sq_metrics_opts o = {0};
    sq_metrics_report r;
    CHECK_EQ(sq_metrics_report_make(&m, &o, &r, &e), 0);
    CHECK_EQ(r.units, 3);
    CHECK_NEAR(r.mean[SQ_MV_HR], 2.0 / 3, 1e-12);
    CHECK_NEAR(r.mean[SQ_MV_MAP], 0.5, 1e-12);
    CHECK_NEAR(r.mean[SQ_MV_N], 1.75 / 3, 1e-12);
    o.per_user = 1;
    CHECK_EQ(sq_metrics_report_make(&m, &o, &r, &e), 0);
    CHECK_EQ(r.units, 2);
    CHECK_NEAR(r.mean[SQ_MV_HR], 0.75, 1e-12);
    CHECK_NEAR(r.mean[SQ_MV_MAP], 0.5, 1e-12);
    CHECK_NEAR(r.mean[SQ_MV_NDCG], (0.5 + 1 / log2(3.0)) / 2, 1e-12);
    CHECK_NEAR(r.mean[SQ_MV_N], 0.5625, 1e-12);
    /* the units: users ascending, each its mean; keys the users */
    double *vals;
    uint32_t *keys;
    uint64_t n;
    CHECK_EQ(sq_metrics_units(&m, &o, &vals, &keys, &n, &e), 0);
    CHECK_EQ(n, 2);
    CHECK_EQ(keys[0], 1);
    CHECK_EQ(keys[1], 2);
    CHECK_NEAR(vals[SQ_MV_HR], 0.5, 1e-12);
    CHECK_NEAR(vals[sq_metrics_nv(&m) + SQ_MV_HR], 1.0, 1e-12);
    free(vals);
    free(keys);
    sq_metrics_free(&m);
}

/* The rank estimate: rank 2 of 101 candidates in 1001 items is
 * R = 1 + 1 * 1000 / 100 = 11; rank 1 stays 1; n_cand = N is kept. */
UNIT_TEST(test_metrics_corrected_rank_estimate)
{
    uint32_t k[2] = {10, 11};
    sq_metrics m;
    sq_err e = {0};
    CHECK_EQ(sq_metrics_init(&m, k, 2, &e), 0);
    sq_metrics_opts o = {.corrected = SQ_CORR_RANK, .n_items = 1001};
    double v[2 * SQ_MV_N + 1];
    sq_rank_rec a = {1, 2, 101, 0};
    sq_metrics_values(&m, &o, &a, v);
    CHECK_NEAR(v[SQ_MV_HR], 0.0, 0);
    CHECK_NEAR(v[SQ_MV_N + SQ_MV_HR], 1.0, 0);
    CHECK_NEAR(v[SQ_MV_N + SQ_MV_NDCG], 1 / log2(12.0), 1e-12);
    CHECK_NEAR(v[2 * SQ_MV_N], 1.0 / 11, 1e-12);
    sq_rank_rec b = {1, 1, 101, 0};
    sq_metrics_values(&m, &o, &b, v);
    CHECK_NEAR(v[2 * SQ_MV_N], 1.0, 0);
    sq_rank_rec c = {1, 7, 1001, 0}; /* a full ranking */
    sq_metrics_values(&m, &o, &c, v);
    CHECK_NEAR(v[2 * SQ_MV_N], 1.0 / 7, 1e-15);
    sq_metrics_free(&m);
}
