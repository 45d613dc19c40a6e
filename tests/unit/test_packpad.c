/* sq_packed_pad (lib/data/batch.c): a packed batch padded to a CUDA graph's
 * bucket keeps its own rows, entries and sequences and adds padding
 * sequences of 1..max_len rows (ids 0, right-aligned positions) and
 * padding entries without a target; its shape depends on the bucket only. */
#include <stdint.h>
#include <string.h>

#include "batch.h"
#include "sampler.h"
#include "unit.h"

/* A batch of B sequences of the given lengths, an entry on every row but
 * each sequence's first. */
static void make_batch(sq_packed *b, int *ints, uint32_t *u32, const int *len, int B)
{
    int T = 0, n = 0;
    memset(b, 0, sizeof *b);
    b->ids = ints;
    b->pos = ints + 64;
    b->off = ints + 128;
    b->rows = ints + 160;
    b->targets = ints + 224;
    b->user = u32;
    b->uid = u32 + 16;
    b->off[0] = 0;
    for (int j = 0; j < B; j++) {
        for (int t = 0; t < len[j]; t++) {
            b->ids[T + t] = 1 + (T + t) % 7;
            b->pos[T + t] = 8 - len[j] + t;
            if (t > 0) {
                b->rows[n] = T + t - 1;
                b->targets[n++] = b->ids[T + t];
            }
        }
        T += len[j];
        b->off[j + 1] = T;
        b->user[j] = (uint32_t)(10 + j);
        b->uid[j] = (uint32_t)(100 + j);
    }
    b->B = B;
    b->T = T;
    b->n = n;
    b->views = 1;
}

UNIT_TEST(test_packed_pad_bucket)
{
    sq_packed_pad pp;
    sq_err e = {0};
    /* at most 3 sequences of max_len 4 (12 rows), rows in steps of 5: the
     * padding is 2..6 rows, in 2 sequences of at most 4 */
    CHECK_EQ(sq_packed_pad_init(&pp, 12, 3, 5, 4, 0, &e), 0);
    CHECK_EQ(pp.segs, 2);
    int ints[256];
    uint32_t u32[32];
    sq_packed b;
    int lens[2][3] = {{4, 3, 4}, {2, 4, 4}};
    for (int k = 0; k < 2; k++) {
        make_batch(&b, ints, u32, lens[k], 3);
        const sq_packed *p = sq_packed_pad_to(&pp, &b, &e);
        CHECK(p != NULL);
        if (!p)
            break;
        /* one shape for both: 15 rows, 10 entries, 5 sequences */
        CHECK_EQ(p->T, 15);
        CHECK_EQ(p->n, 10);
        CHECK_EQ(p->B, 5);
        CHECK(memcmp(p->ids, b.ids, (size_t)b.T * sizeof *p->ids) == 0);
        CHECK(memcmp(p->pos, b.pos, (size_t)b.T * sizeof *p->pos) == 0);
        CHECK(memcmp(p->off, b.off, 4 * sizeof *p->off) == 0);
        CHECK(memcmp(p->rows, b.rows, (size_t)b.n * sizeof *p->rows) == 0);
        CHECK(memcmp(p->targets, b.targets, (size_t)b.n * sizeof *p->targets) == 0);
        CHECK_EQ(p->off[5], 15);
        for (int j = 3; j < 5; j++) {
            int len = p->off[j + 1] - p->off[j];
            CHECK(len >= 1 && len <= 4);
            for (int r = 0; r < len; r++) {
                CHECK_EQ(p->ids[p->off[j] + r], 0);
                CHECK_EQ(p->pos[p->off[j] + r], 4 - len + r);
            }
            CHECK_EQ(p->user[j], 10u);
        }
        for (int i = b.n; i < p->n; i++) {
            CHECK_EQ(p->targets[i], 0);
            CHECK_EQ(p->rows[i], b.T);
        }
    }
    /* negatives of another K than the buffers', or more sequences than
     * the capacity: refused */
    make_batch(&b, ints, u32, lens[0], 3);
    b.K = 2;
    CHECK(sq_packed_pad_to(&pp, &b, &e) == NULL);
    CHECK_EQ(e.code, SQ_EX_SOFTWARE);
    int five[5] = {2, 2, 2, 2, 2};
    make_batch(&b, ints, u32, five, 5);
    e = (sq_err){0};
    CHECK(sq_packed_pad_to(&pp, &b, &e) == NULL);
    CHECK(strstr(e.msg, "over the capacity") != NULL);
    sq_packed_pad_free(&pp);
    /* K = 2 negatives an entry: the batch's kept, the padding entries' 0 */
    CHECK_EQ(sq_packed_pad_init(&pp, 12, 3, 5, 4, 2, &e), 0);
    int neg[64];
    make_batch(&b, ints, u32, lens[0], 3);
    for (int i = 0; i < 2 * b.n; i++)
        neg[i] = 1 + i % 5;
    b.K = 2;
    b.neg = neg;
    const sq_packed *p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ(p->K, 2);
        CHECK(memcmp(p->neg, neg, (size_t)(2 * b.n) * sizeof *neg) == 0);
        for (int i = 2 * b.n; i < 2 * p->n; i++)
            CHECK_EQ(p->neg[i], 0);
        CHECK(p->lq == NULL);
    }
    /* a sampled loss's log-Q corrections: padded with the negatives */
    float lq[64];
    for (int i = 0; i < 2 * b.n; i++)
        lq[i] = 0.25f * (float)(i + 1);
    b.lq = lq;
    p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL && p->lq != NULL);
    if (p && p->lq) {
        CHECK(memcmp(p->lq, lq, (size_t)(2 * b.n) * sizeof *lq) == 0);
        for (int i = 2 * b.n; i < 2 * p->n; i++)
            CHECK(p->lq[i] == 0);
    }
    /* negatives shared by sequence: the entries' own copies, as per-position
     * negatives (one loss call); by batch: kept */
    b.neg_share = SQ_SHARE_SEQUENCE;
    p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL && p->neg_share == SQ_SHARE_POSITION);
    CHECK(p != NULL && memcmp(p->neg, b.neg, (size_t)(2 * b.n) * sizeof *b.neg) == 0);
    b.neg_share = SQ_SHARE_BATCH;
    p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL && p->neg_share == SQ_SHARE_BATCH);
    sq_packed_pad_free(&pp);
}

/* Two views (sequences [0, 2) the first views, [2, 4) the second): the
 * views' sequences and rows stay in place, the padding sequences follow
 * them (pad_seqs), and each view's entries are padded on their own, so
 * that n_first too depends on the bucket only. Three views (CONTRASTIVE
 * VIEWS): the entries, all the samples', at once. */
UNIT_TEST(test_packed_pad_views)
{
    sq_packed_pad pp;
    sq_err e = {0};
    CHECK_EQ(sq_packed_pad_init(&pp, 16, 4, 5, 4, 0, &e), 0);
    int ints[256], lens[4] = {4, 3, 2, 4};
    uint32_t u32[32];
    sq_packed b;
    make_batch(&b, ints, u32, lens, 4);
    b.views = 2;
    b.n_first = 5; /* 3 + 2 entries of the first views */
    const sq_packed *p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ(p->pad_seqs, pp.segs);
        CHECK_EQ(p->B, 4 + pp.segs);
        CHECK_EQ(p->T % 5, 0);
        CHECK_EQ(p->n_first, 5);  /* 5 entries: a multiple of q already */
        CHECK_EQ(p->n, 5 + 5);    /* the second view's 4 entries and 1 padding */
        CHECK(memcmp(p->off, b.off, 5 * sizeof *p->off) == 0);
        CHECK(memcmp(p->rows, b.rows, 5 * sizeof *p->rows) == 0);
        CHECK(memcmp(p->rows + 5, b.rows + 5, 4 * sizeof *p->rows) == 0);
        CHECK(memcmp(p->targets + 5, b.targets + 5, 4 * sizeof *p->targets) == 0);
        CHECK_EQ(p->targets[9], 0);
        CHECK_EQ(p->rows[9], b.T);
    }
    b.n_first = 3; /* the first view's entries padded to 5, the second's */
    p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ(p->n_first, 5);
        CHECK_EQ(p->n, 5 + 10);
        for (int i = 3; i < 5; i++)
            CHECK(p->targets[i] == 0 && p->rows[i] == b.T);
        CHECK(memcmp(p->targets + 5, b.targets + 3, 6 * sizeof *p->targets) == 0);
        CHECK(memcmp(p->rows + 5, b.rows + 3, 6 * sizeof *p->rows) == 0);
        for (int i = 11; i < 15; i++)
            CHECK(p->targets[i] == 0 && p->rows[i] == b.T);
        /* padded already: refused */
        CHECK(sq_packed_pad_to(&pp, p, &e) == NULL);
    }
    b.views = 3;
    b.n_first = b.n;
    e = (sq_err){0};
    p = sq_packed_pad_to(&pp, &b, &e);
    CHECK(p != NULL);
    if (p) {
        CHECK_EQ(p->n, 10);
        CHECK_EQ(p->n_first, 10);
    }
    sq_packed_pad_free(&pp);
}
