/* Unit tests for seqrec-train --init (lib/train/train.c sq_train_init_config
 * and the trainer's init, lib/model/sasrec_model.c's init_from hook): a model
 * trained on 12 items starts a run on the same dataset grown to 15 items;
 * with 0 epochs the written model holds every old tensor unchanged, the
 * old item rows in place (BERT4Rec's mask row and output bias moved to the
 * new end) and the new items' rows as a fresh seeded run draws them; and
 * the refusals (fewer items, another dataset, other options, another model). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "modelfile.h"
#include "models.h"
#include "sasrec.h"
#include "train.h"
#include "unit.h"

/* 30 users over n_items items (the ring walk of test_train.c). */
static int ring_dataset(sq_dataset *ds, uint32_t n_items, const char *name, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, n_items);
    int rc = sq_meta_add(&h, e, "dataset", "%s", name) || sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    if (rc)
        return e->code ? e->code : 1;
    for (uint32_t u = 0; u < 30; u++) {
        uint32_t items[8], x = u % n_items + 1;
        for (int i = 0; i < 8; i++) {
            items[i] = x;
            x = x % n_items + 1;
        }
        sq_record rec = {.user = u + 1, .len = 8, .items = items, .n_train = 6, .n_valid = 1};
        if (sq_dataset_add(ds, &rec, e))
            return e->code;
    }
    return sq_dataset_finish(ds, e);
}

static const char *OPTS_GIVEN = "dim=8\nffn=8\nlayers=1\nmax_len=6\n";

/* Trains model `name` (the options OPTS_GIVEN) for `epochs` on ds into path,
 * starting from init (may be NULL) with the options given (may be NULL). */
static int train_one(const char *name, const sq_dataset *ds, int epochs, const char *init,
                     const char *given, const char *path, sq_err *e)
{
    sq_train_opts o;
    sq_train_defaults(&o);
    o.batch = 8;
    o.epochs = epochs;
    o.threads = 1;
    void *cfg = NULL;
    int rc;
    const sq_data_dims dd = {.n_items = ds->hdr.n_items, .n_users = sq_dataset_n_users(ds)};
    if (init) {
        const sq_model_def *def;
        rc = sq_train_init_config(init, sq_models_find(name), given, &dd, &def, &cfg, e);
        o.model = def;
        o.init = init;
    } else {
        o.model = sq_models_find(name);
        cfg = calloc(1, o.model->cfg_size);
        rc = cfg ? o.model->config(cfg, OPTS_GIVEN, &dd, e) : SQ_EX_OSERR;
    }
    o.cfg = cfg;
    if (!rc)
        rc = sq_train(&o, ds, path, NULL, NULL, e);
    free(cfg);
    return rc;
}

/* Rows [r0, r1) of tensor name in a and rows [s0, ...) in b are equal. */
static int same_rows(const sq_modelfile *a, const sq_modelfile *b, const char *name,
                     uint64_t r0, uint64_t r1, uint64_t s0)
{
    const sq_tensor *ta = sq_modelfile_find(a, name), *tb = sq_modelfile_find(b, name);
    if (!ta || !tb)
        return 0;
    uint64_t row = 1;
    for (int d = 1; d < ta->ndim; d++)
        row *= ta->shape[d];
    return memcmp((const float *)ta->data + r0 * row, (const float *)tb->data + s0 * row,
                  (r1 - r0) * row * sizeof(float)) == 0;
}

static void check_grown(unit_ctx *t, const char *name, const char *dir)
{
    sq_err e = {0};
    sq_dataset d12 = {0}, d15 = {0}, other = {0};
    CHECK_EQ(ring_dataset(&d12, 12, "ring", &e), 0);
    CHECK_EQ(ring_dataset(&d15, 15, "ring", &e), 0);
    CHECK_EQ(ring_dataset(&other, 15, "other", &e), 0);
    char old[96], grown[96], fresh[96];
    snprintf(old, sizeof old, "%s/%s-old.sqm", dir, name);
    snprintf(grown, sizeof grown, "%s/%s-grown.sqm", dir, name);
    snprintf(fresh, sizeof fresh, "%s/%s-fresh.sqm", dir, name);
    CHECK_EQ(train_one(name, &d12, 2, NULL, NULL, old, &e), 0);
    CHECK_EQ(train_one(name, &d15, 0, old, NULL, grown, &e), 0);
    CHECK_EQ(train_one(name, &d15, 0, NULL, NULL, fresh, &e), 0);
    int bert = strcmp(name, "bert4rec") == 0;
    sq_modelfile a, b, f;
    CHECK_EQ(sq_modelfile_read(old, &a, &e), 0);
    CHECK_EQ(sq_modelfile_read(grown, &b, &e), 0);
    CHECK_EQ(sq_modelfile_read(fresh, &f, &e), 0);
    if (e.code)
        return;
    for (int i = 0; i < a.n_tensors; i++) {
        const sq_tensor *ta = &a.tensors[i], *tb = sq_modelfile_find(&b, ta->name);
        CHECK(tb != NULL);
        if (!tb)
            continue;
        int items = !strcmp(ta->name, "item_emb") || !strcmp(ta->name, "out_b");
        if (!items) { /* every other tensor as it was */
            CHECK_EQ(ta->bytes, tb->bytes);
            CHECK(same_rows(&a, &b, ta->name, 0, ta->shape[0], 0));
            continue;
        }
        uint64_t extra = !strcmp(ta->name, "item_emb") && bert; /* the mask row */
        CHECK_EQ(tb->shape[0], ta->shape[0] + 3);
        CHECK(same_rows(&a, &b, ta->name, 0, 13, 0));                 /* items 0..12 */
        CHECK(same_rows(&b, &f, ta->name, 13, 16, 13));               /* new: seeded */
        if (extra)
            CHECK(same_rows(&a, &b, ta->name, 13, 14, 16));           /* the mask row */
    }
    sq_modelfile_free(&a);
    sq_modelfile_free(&b);
    sq_modelfile_free(&f);
    /* fine-tuning from it trains */
    CHECK_EQ(train_one(name, &d15, 1, old, OPTS_GIVEN, grown, &e), 0);
    /* refusals */
    char tmp[96];
    snprintf(tmp, sizeof tmp, "%s/x.sqm", dir);
    e.code = 0;
    CHECK_EQ(train_one(name, &d12, 0, grown, NULL, tmp, &e), SQ_EX_DATA); /* 15 > 12 */
    CHECK(strstr(e.msg, "15 items") != NULL);
    e.code = 0;
    CHECK_EQ(train_one(name, &other, 0, old, NULL, tmp, &e), SQ_EX_DATA);
    CHECK(strstr(e.msg, "dataset 'ring'") != NULL);
    e.code = 0;
    CHECK_EQ(train_one(name, &d15, 0, old, "dim=16\n", tmp, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "dim=8") != NULL);
    e.code = 0;
    CHECK_EQ(train_one(bert ? "sasrec" : "bert4rec", &d15, 0, old, NULL, tmp, &e),
             SQ_EX_USAGE);
    e.code = 0;
    CHECK_EQ(train_one(name, &d15, 0, tmp, NULL, tmp, &e), SQ_EX_NOINPUT);
    CHECK(access(tmp, F_OK) != 0);
    sq_dataset_free(&d12);
    sq_dataset_free(&d15);
    sq_dataset_free(&other);
}

UNIT_TEST(test_init_grows_item_rows)
{
    char dir[] = "/tmp/sqinit.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    check_grown(t, "sasrec", dir);
    check_grown(t, "bert4rec", dir);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ(system(cmd), 0);
}
