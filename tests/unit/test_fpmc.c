/* Unit tests for the fpmc model (lib/model/fpmc.c).
 *   - every tensor of the double build against finite differences of the
 *     loss (flat_check.h), CE and BCE, every --target, several dims;
 *   - h of an entry is [UI[user] ; LI[item at its row]], so that its score
 *     against item_out = [IU | IL] is UI_u . IU_i + IL_i . LI_l, checked
 *     against that sum written out;
 *   - the options' ranges, and that the model needs user ids.
 * SQ_TEST_VERBOSE=1 prints the errors. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "flat.h"
#include "flat_check.h"
#include "gradcheck.h"
#include "ops.h"
#include "sasrec.h" /* SQ_LOSS_CE */
#include "unit.h"

extern const sq_flat_def sq_flat_fpmc;
extern const sq_model_def sq_model_fpmc;

/* An fpmc config over 9 items and 6 users (NULL on a usage error). */
static void *config_of(const char *given, uint32_t n_users, sq_err *e)
{
    void *c = calloc(1, sq_model_fpmc.cfg_size);
    sq_data_dims d = {.n_items = 9, .n_users = n_users};
    if (c && sq_model_fpmc.config(c, given, &d, e)) {
        free(c);
        return NULL;
    }
    return c;
}

UNIT_TEST(test_fpmc_gradcheck)
{
    static const struct {
        const char *given;
        int target, loss;
    } runs[] = {
        {"dim=4\n", SQ_TARGET_LAST, SQ_LOSS_CE},
        {"dim=4\nmax_len=5\n", SQ_TARGET_ALL, SQ_LOSS_CE},
        {"dim=3\nmax_len=3\n", SQ_TARGET_RANDOM, SQ_LOSS_BCE},
        {"dim=5\n", SQ_TARGET_LAST, SQ_LOSS_BCE},
    };
    double worst = 0;
    for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
        sq_err e = {0};
        void *c = config_of(runs[i].given, 6, &e);
        CHECK(c != NULL);
        if (!c)
            continue;
        double w = flat_gradcheck(t, &sq_flat_fpmc, c, runs[i].target, runs[i].loss, 1e-6);
        worst = fmax(worst, w);
        free(c);
    }
    gc_note(t->name, "grad every tensor", worst);
}

/* The score of (u, l, i) through h . item_out[i] is RecBole's
 * UI_u . IU_i + IL_i . LI_l; the padding item (a cold user) reads a zero
 * LI row. */
UNIT_TEST(test_fpmc_score)
{
    sq_err e = {0};
    void *c = config_of("dim=3\nmax_len=4\n", 6, &e);
    CHECK(c != NULL);
    if (!c)
        return;
    sq_ctx cx = sq_ctx_cpu();
    sq_flat m;
    CHECK_EQ(sq_flat_alloc(&m, &sq_flat_fpmc, c, &cx, &e), 0);
    sq_flat_init(&m, 9);
    int len[2] = {3, 2}, off[3], ids[5] = {4, 2, 7, 0, 5}, pos[5] = {0}, rows[3] = {2, 0, 3};
    uint32_t uid[2] = {5, 1};
    int T = sq_pack_offsets(off, len, 2);
    sq_packed pb = {.B = 2, .T = T, .ids = ids, .off = off, .pos = pos, .uid = uid, .n = 3,
                    .rows = rows};
    sq_flat_cap cap = {.B = 2, .T = T, .n = 3, .N = 4, .train = 0};
    void *w = NULL;
    CHECK_EQ(sq_flat_fpmc.f.work_alloc(&m, &cap, &w, &e), 0);
    if (!e.code) {
        const float *h = sq_flat_fpmc.f.forward(&m, w, &pb, 1, 1, 1);
        const float *UI = m.t[0], *LI = m.t[1], *O = m.t[2];
        static const int user_of[3] = {5, 5, 1};
        double worst = 0;
        for (int k = 0; k < 3; k++)
            for (int i = 1; i <= 9; i++) {
                int u = user_of[k], l = ids[rows[k]];
                double ref = 0, got = 0;
                for (int j = 0; j < 3; j++) {
                    ref += UI[u * 3 + j] * O[i * 6 + j] + O[i * 6 + 3 + j] * LI[l * 3 + j];
                    got += h[k * 6 + j] * O[i * 6 + j] + h[k * 6 + 3 + j] * O[i * 6 + 3 + j];
                }
                worst = fmax(worst, fabs(ref - got));
            }
        CHECK(worst < 1e-6);
        for (int j = 0; j < 3; j++) /* entry 2 reads the padding item */
            CHECK(h[2 * 6 + 3 + j] == 0);
        gc_note(t->name, "h . O vs the sum", worst);
    }
    sq_flat_fpmc.f.work_free(w);
    sq_flat_free(&m);
    free(c);
}

UNIT_TEST(test_fpmc_config)
{
    sq_err e = {0};
    void *c = config_of(NULL, 6, &e);
    CHECK(c != NULL);
    if (c) {
        const sq_flat_head *h = c;
        CHECK_EQ(h->max_len, 1);
        CHECK_EQ(h->n_users, 6u);
        free(c);
    }
    static const char *const bad[] = {"dim=0\n", "dim=8193\n", "max_len=0\n", "hidden=4\n"};
    static const char *const named[] = {"--dim", "--dim", "--max-len", "--hidden"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        e = (sq_err){0};
        void *x = config_of(bad[i], 6, &e);
        CHECK(x == NULL && e.code == SQ_EX_USAGE && strstr(e.msg, named[i]) != NULL);
        free(x);
    }
    /* no user in the training stream: no model */
    e = (sq_err){0};
    c = config_of(NULL, 0, &e);
    if (c) {
        sq_ctx cx = sq_ctx_cpu();
        sq_flat m;
        CHECK(sq_flat_alloc(&m, &sq_flat_fpmc, c, &cx, &e) != 0);
        CHECK(strstr(e.msg, "user") != NULL);
        sq_flat_free(&m);
        free(c);
    }
    /* BPR is not offered: CE and BCE only */
    CHECK(sq_model_fpmc.train_defaults && strstr(sq_model_fpmc.train_defaults, "last"));
}
