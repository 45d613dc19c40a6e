/* Unit tests for lib/train.c: option checks, the loop on a tiny in-memory
 * dataset (the loss falls, the written model loads through the model table
 * and validates to the number the loop reported), and resume with a larger
 * --epochs ending where a longer uninterrupted run ends. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset.h"
#include "eval.h"
#include "model.h"
#include "mixer_opt.h"
#include "modelfile.h"
#include "models.h"
#include "sasrec.h"
#include "train.h"
#include "unit.h"

/* 40 users over 12 items: user u walks i -> i % 12 + 1 from its own start,
 * 9 items: 7 training, 1 validation, 1 test target. */
static int tiny_dataset(sq_dataset *ds, sq_err *e)
{
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 12);
    int rc = sq_meta_add(&h, e, "dataset", "tiny") || sq_dataset_init(ds, &h, e);
    sq_header_free(&h);
    if (rc)
        return e->code ? e->code : 1;
    for (uint32_t u = 0; u < 40; u++) {
        uint32_t items[9], x = u % 12 + 1;
        for (int i = 0; i < 9; i++) {
            items[i] = x;
            x = x % 12 + 1;
        }
        sq_record rec = {.user = u, .len = 9, .items = items, .n_train = 7, .n_valid = 1};
        if (sq_dataset_add(ds, &rec, e))
            return e->code;
    }
    return sq_dataset_finish(ds, e);
}

typedef struct {
    int n;
    double loss[16], ndcg[16];
} log_ctx;

static int on_epoch(void *p, const sq_epoch_stats *s, sq_err *e)
{
    (void)e;
    log_ctx *c = p;
    if (c->n < 16) {
        c->loss[c->n] = s->loss;
        c->ndcg[c->n] = s->evaluated ? s->ndcg10 : -1;
        c->n++;
    }
    return 0;
}

/* The files of a full run and of a run cut short and resumed, in dir. */
static void run_paths(const char *dir, char full[64], char part[64], char ckpt[80])
{
    snprintf(full, 64, "%s/full.sqm", dir);
    snprintf(part, 64, "%s/part.sqm", dir);
    snprintf(ckpt, 80, "%s/part.sqm.ckpt", dir);
}

static int same_file(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int ca = fgetc(fa), cb = fgetc(fb);
        if (ca != cb)
            same = 0;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return same;
}

/* Training options for seqrec-train's defaults of model name (its config
 * built from the options given, as seqrec-train builds it, into cfg). */
static int default_opts(sq_train_opts *o, const char *name, void *cfg, const char *given,
                        sq_err *e)
{
    sq_train_defaults(o);
    o->model = sq_models_find(name);
    o->cfg = cfg;
    if (!o->model)
        return sq_fail(e, SQ_EX_SOFTWARE, "no model %s", name);
    return o->model->config(cfg, given, &(sq_data_dims){.n_items = 12, .n_users = 64}, e);
}

UNIT_TEST(test_train_check)
{
    sq_err e = {0};
    sq_train_opts o;
    sq_sasrec_config cfg;
    CHECK_EQ(default_opts(&o, "sasrec", &cfg, NULL, &e), 0);
    CHECK_EQ(sq_train_check(&o, &e), 0);
    CHECK_EQ(cfg.dim, 64);
    CHECK_EQ(o.batch, 128);
    CHECK(o.beta2 == 0.98);
    o.lr = 0;
    CHECK_EQ(sq_train_check(&o, &e), SQ_EX_USAGE);
    e.code = 0;
    CHECK_EQ(default_opts(&o, "sasrec", &cfg, NULL, &e), 0);
    cfg.n_heads = 3; /* 64 % 3 */
    e.code = 0;
    CHECK_EQ(sq_train_check(&o, &e), SQ_EX_USAGE);
    /* the same refused where seqrec-train builds the config */
    e.code = 0;
    CHECK_EQ(default_opts(&o, "sasrec", &cfg, "heads=3\n", &e), SQ_EX_USAGE);
    e.code = 0;
    CHECK_EQ(default_opts(&o, "sasrec", &cfg, NULL, &e), 0);
    o.loss = SQ_LOSS_BCE;
    o.neg = 0;
    e.code = 0;
    CHECK_EQ(sq_train_check(&o, &e), SQ_EX_USAGE);
}

/* A model's training defaults go over seqrec-train's and under the options
 * given; a bad key or value of either is refused. */
UNIT_TEST(test_train_opts_for_model)
{
    sq_err e = {0};
    sq_train_opts o;
    int cfg;
    sq_model_def fake = {.name = "fake", .train_defaults = "train.target=last\n"};
    sq_train_defaults(&o);
    o.model = &fake;
    o.cfg = &cfg;
    o.init = "m0.sqm";
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, NULL, &e), 0);
    CHECK_EQ(o.target, SQ_TARGET_LAST);
    CHECK(o.lr == 1e-3);
    CHECK(o.model == &fake && o.cfg == &cfg && o.init && !strcmp(o.init, "m0.sqm"));
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, "train.target=all\n", &e), 0);
    CHECK_EQ(o.target, SQ_TARGET_ALL);
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, "train.lr=0.01\nthreads=3\n", &e), 0);
    CHECK_EQ(o.target, SQ_TARGET_LAST);
    CHECK(o.lr == 0.01);
    CHECK_EQ(o.threads, 3);
    /* without a model, or one without defaults: seqrec-train's */
    CHECK_EQ(sq_train_opts_for_model(&o, NULL, "train.epochs=3\n", &e), 0);
    CHECK_EQ(o.target, SQ_TARGET_ALL);
    CHECK_EQ(o.epochs, 3);
    CHECK_EQ(o.threads, 0);
    CHECK_EQ(sq_train_opts_for_model(&o, sq_models_find("sasrec"), NULL, &e), 0);
    CHECK_EQ(o.target, SQ_TARGET_ALL);
    /* refused: a bad or unknown value given, a bad default of the model */
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, "train.lr=-1\n", &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--lr") != NULL);
    e.code = 0;
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, "train.bogus=1\n", &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "train.bogus") != NULL);
    e.code = 0;
    fake.train_defaults = "train.targt=last\n";
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, NULL, &e), SQ_EX_SOFTWARE);
    CHECK(strstr(e.msg, "fake") && strstr(e.msg, "train.targt"));
    e.code = 0;
    fake.train_defaults = "train.target=first\n";
    CHECK_EQ(sq_train_opts_for_model(&o, &fake, NULL, &e), SQ_EX_SOFTWARE);
    /* every registered model's defaults are good ones */
    for (int m = 0; m < sq_models_count(); m++) {
        e.code = 0;
        CHECK_EQ(sq_train_opts_for_model(&o, sq_models_get(m), NULL, &e), 0);
        if (e.code)
            fprintf(stderr, "  %s\n", e.msg);
    }
}

UNIT_TEST(test_train_loop_and_resume)
{
    sq_err e = {0};
    sq_dataset ds = {0};
    CHECK_EQ(tiny_dataset(&ds, &e), 0);
    char dir[] = "/tmp/sqtrain.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char full[64], part[64], ckpt[80];
    run_paths(dir, full, part, ckpt);

    sq_train_opts o;
    sq_train_defaults(&o);
    sq_sasrec_config cfg;
    sq_sasrec_defaults(&cfg, SQ_BACKBONE_SASREC);
    cfg.n_items = 12;
    cfg.n_layers = 1;
    cfg.n_heads = 2;
    cfg.dim = 8;
    cfg.ffn = 16;
    cfg.max_len = 8;
    cfg.dropout = 0.1;
    cfg.ln_eps = 1e-8;
    o.model = sq_models_find("sasrec");
    o.cfg = &cfg;
    o.batch = 8;
    o.epochs = 6;
    o.patience = 0;
    o.lr = 1e-2;
    log_ctx lc = {0};
    sq_train_hooks hooks = {.ctx = &lc, .epoch = on_epoch};
    CHECK_EQ(sq_train(&o, &ds, full, NULL, &hooks, &e), 0);
    CHECK_EQ(lc.n, 6);
    CHECK(lc.loss[5] < lc.loss[0]);

    /* the model file loads through the table and validates to the best
     * NDCG@10 the loop reported */
    double best = -1;
    for (int i = 0; i < lc.n; i++)
        best = lc.ndcg[i] > best ? lc.ndcg[i] : best;
    sq_model m;
    CHECK_EQ(sq_model_load(&m, full, &e), 0);
    CHECK_STR(m.name, "sasrec");
    CHECK_EQ(m.n_items, 12);
    CHECK_EQ(sq_model_check_stream(&m, &ds.hdr, "tiny", &e), 0);
    sq_eval_opts eo;
    sq_eval_defaults(&eo);
    eo.target = SQ_EVAL_VALID;
    double hr, ndcg;
    uint64_t nt;
    CHECK_EQ(sq_eval_means(&m, &ds, &eo, 10, &hr, &ndcg, &nt, &e), 0);
    CHECK_EQ(nt, 40);
    CHECK(ndcg == best);
    sq_model_free(&m);

    /* 2 epochs, then resumed to 6: the same model as 6 at once */
    sq_train_opts o2 = o;
    o2.epochs = 2;
    CHECK_EQ(sq_train(&o2, &ds, part, NULL, NULL, &e), 0);
    sq_train_opts o3;
    CHECK_EQ(sq_train_read_opts(&o3, ckpt, &e), 0);
    CHECK_EQ(o3.epochs, 2);
    CHECK_EQ(o3.batch, 8);
    CHECK(o3.lr == o.lr);
    CHECK(o3.model == o.model);
    sq_sasrec_config *c3 = o3.cfg;
    CHECK(c3 != NULL);
    if (!c3)
        return;
    CHECK(c3->dropout == cfg.dropout);
    o3.epochs = 6;
    CHECK_EQ(sq_train(&o3, &ds, part, ckpt, NULL, &e), 0);
    CHECK(same_file(full, part));

    /* another dataset is refused */
    sq_dataset other = {0};
    sq_header h;
    sq_header_init(&h, SQ_SPLIT, 13);
    CHECK_EQ(sq_dataset_init(&other, &h, &e), 0);
    sq_header_free(&h);
    uint32_t items[4] = {1, 2, 3, 4};
    sq_record rec = {.user = 0, .len = 4, .items = items, .n_train = 2, .n_valid = 1};
    CHECK_EQ(sq_dataset_add(&other, &rec, &e), 0);
    CHECK_EQ(sq_dataset_finish(&other, &e), 0);
    c3->n_items = 13;
    sq_err e2 = {0};
    CHECK_EQ(sq_train(&o3, &other, part, ckpt, NULL, &e2), SQ_EX_DATA);
    sq_dataset_free(&other);
    free(o3.cfg);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)!system(cmd);
    sq_dataset_free(&ds);
}

/* BERT4Rec (causal Hydra, fpositional bidirectional): the model loads
 * through the table under its name and validates to the best NDCG@10 the
 * loop reported, and a resumed run ends on the same file as an
 * uninterrupted one. (Whether it learns is tests/bats/attn.bats' question:
 * the cloze task needs attention to neighbours, which a 0.02-scale init
 * takes more steps to grow than this tiny set offers.) */
UNIT_TEST(test_train_bert4rec)
{
    /* one thread: this tiny model is all fork and join otherwise */
    int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    sq_err e = {0};
    sq_dataset ds = {0};
    CHECK_EQ(tiny_dataset(&ds, &e), 0);
    char dir[] = "/tmp/sqtrain.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char full[64], part[64], ckpt[80];
    run_paths(dir, full, part, ckpt);
    for (int kind = 0; kind < 2; kind++) {
        sq_train_opts o;
        sq_train_defaults(&o);
        sq_sasrec_config cfg;
        sq_sasrec_defaults(&cfg, SQ_BACKBONE_BERT4REC);
        cfg.n_items = 12;
        cfg.n_layers = 1;
        cfg.dim = 8;
        cfg.ffn = 16;
        cfg.max_len = 8;
        cfg.dropout = 0.1;
        cfg.ln_eps = 1e-12;
        CHECK_EQ(sq_sasrec_set_attn(&cfg, kind ? "fpositional" : "hydra"), 0);
        cfg.n_heads = kind ? 2 : 8;
        cfg.causal = kind ? 0 : 1;
        if (kind)
            mixer_set(&cfg.attn, "rank", "3");
        cfg.mask_prob = 0.3;
        o.model = sq_models_find("bert4rec");
        o.cfg = &cfg;
        o.batch = 8;
        o.epochs = 4;
        o.patience = 0;
        o.lr = 1e-2;
        log_ctx lc = {0};
        sq_train_hooks hooks = {.ctx = &lc, .epoch = on_epoch};
        CHECK_EQ(sq_train(&o, &ds, full, NULL, &hooks, &e), 0);
        CHECK_EQ(lc.n, 4);
        CHECK(lc.loss[3] > 0);
        double best = -1;
        for (int i = 0; i < lc.n; i++)
            best = lc.ndcg[i] > best ? lc.ndcg[i] : best;
        sq_model m;
        CHECK_EQ(sq_model_load(&m, full, &e), 0);
        CHECK_STR(m.name, "bert4rec");
        CHECK(sq_sasrec_of(&m) != NULL);
        if (sq_sasrec_of(&m)) {
            CHECK_EQ(sq_sasrec_of(&m)->cfg.attn.kind, cfg.attn.kind);
            CHECK_EQ(sq_sasrec_of(&m)->cfg.causal, cfg.causal);
            char got[32], want[32];
            CHECK_STR(mixer_get(&sq_sasrec_of(&m)->cfg.attn, "rank", got, sizeof got),
                      mixer_get(&cfg.attn, "rank", want, sizeof want));
        }
        sq_eval_opts eo;
        sq_eval_defaults(&eo);
        eo.target = SQ_EVAL_VALID;
        double hr, ndcg;
        uint64_t nt;
        CHECK_EQ(sq_eval_means(&m, &ds, &eo, 10, &hr, &ndcg, &nt, &e), 0);
        CHECK(ndcg == best);
        sq_model_free(&m);

        sq_train_opts o2 = o, o3;
        o2.epochs = 2;
        CHECK_EQ(sq_train(&o2, &ds, part, NULL, NULL, &e), 0);
        CHECK_EQ(sq_train_read_opts(&o3, ckpt, &e), 0);
        const sq_sasrec_config *c3 = o3.cfg;
        CHECK(c3 != NULL);
        CHECK(o3.model == o.model);
        if (c3) {
            CHECK(c3->mask_prob == cfg.mask_prob);
            CHECK_EQ(c3->backbone, SQ_BACKBONE_BERT4REC);
            o3.epochs = 4;
            CHECK_EQ(sq_train(&o3, &ds, part, ckpt, NULL, &e), 0);
            CHECK(same_file(full, part));
        }
        free(o3.cfg);
        /* BCE is refused for BERT4Rec */
        o.loss = SQ_LOSS_BCE;
        sq_err e2 = {0};
        CHECK_EQ(sq_train_check(&o, &e2), SQ_EX_USAGE);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)!system(cmd);
    sq_dataset_free(&ds);
    omp_set_num_threads(saved_threads);
}

/* --stop-metric: ndcg@K, hr@K, recall@K, mrr@K with K >= 1, nothing else;
 * the name is the text parsed; through the option table it is stored as
 * train.stop_metric and refused naming --stop-metric. */
UNIT_TEST(test_train_stop_metric_parse)
{
    static const struct {
        const char *s;
        int kind;
        uint32_t k;
    } good[] = {
        {"ndcg@10", SQ_STOP_NDCG, 10}, {"hr@1", SQ_STOP_HR, 1},
        {"recall@20", SQ_STOP_RECALL, 20}, {"mrr@10", SQ_STOP_MRR, 10},
        {"mrr@1048576", SQ_STOP_MRR, SQ_STOP_MAX_K},
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        int kind = -1;
        uint32_t k = 0;
        char buf[24];
        CHECK_EQ(sq_stop_metric_parse(good[i].s, &kind, &k), 0);
        CHECK_EQ(kind, good[i].kind);
        CHECK_EQ(k, good[i].k);
        CHECK_STR(sq_stop_metric_name(kind, k, buf, sizeof buf), good[i].s);
    }
    static const char *const bad[] = {
        "ndcg@0", "auc@10", "ndcg", "ndcg@", "@10", "NDCG@10", "ndcg@-1", "ndcg@+1",
        "ndcg@10x", "ndcg@ 10", "nd@10", "ndcgg@10", "mrr@1048577", "", "hr@10@10",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int kind = -7;
        uint32_t k = 7;
        CHECK_EQ(sq_stop_metric_parse(bad[i], &kind, &k), -1);
        CHECK(kind == -7 && k == 7); /* untouched */
    }

    sq_err e = {0};
    sq_train_opts o;
    sq_train_defaults(&o);
    int kind;
    uint32_t k;
    sq_train_stop_metric(&o, &kind, &k);
    CHECK(kind == SQ_STOP_NDCG && k == 10);
    CHECK_EQ(o.valid_cand & 3, SQ_CAND_FULL);
    CHECK_EQ(o.valid_seed, 1);
    CHECK_EQ(sq_train_opts_for_model(&o, NULL,
                                     "train.stop_metric=mrr@5\n"
                                     "train.valid_candidates=pop:100\n", &e), 0);
    sq_train_stop_metric(&o, &kind, &k);
    CHECK(kind == SQ_STOP_MRR && k == 5);
    CHECK_EQ(o.valid_cand & 3, SQ_CAND_POP);
    CHECK_EQ(o.valid_cand >> 2, 100);
    /* written back as given */
    const sq_opt *sm = sq_opt_find(sq_train_options, "stop-metric");
    const sq_opt *c = sq_opt_find(sq_train_options, "valid-candidates");
    char buf[64];
    CHECK(sm && c);
    if (!sm || !c)
        return;
    CHECK_STR(sq_opt_format(sm, &o, buf, sizeof buf), "mrr@5");
    CHECK_STR(sq_opt_format(c, &o, buf, sizeof buf), "pop:100");
    CHECK_EQ(sq_opt_check(sq_train_options, &o, SQ_EX_USAGE, &e), 0);
    /* refused, naming the option and what it takes */
    CHECK_EQ(sq_opt_set(sm, &o, "auc@10", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--stop-metric") && strstr(e.msg, "mrr@K"));
    e.code = 0;
    CHECK_EQ(sq_opt_set(c, &o, "pop:0", SQ_EX_USAGE, NULL, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--valid-candidates") != NULL);
    e.code = 0;
    CHECK_EQ(sq_opt_set(c, &o, "uni:7", SQ_EX_USAGE, NULL, &e), 0);
    CHECK_STR(sq_opt_format(c, &o, buf, sizeof buf), "uni:7");
    /* a file without the keys (older than the options) reads the defaults */
    CHECK_EQ(sq_train_opts_for_model(&o, NULL, NULL, &e), 0);
    CHECK_EQ(sq_opt_apply(sq_train_options, &o, "train.lr=0.5\n", 0, SQ_EX_DATA, "f", &e), 0);
    sq_train_stop_metric(&o, &kind, &k);
    CHECK(kind == SQ_STOP_NDCG && k == 10 && o.valid_cand == SQ_CAND_FULL);
}

/* Rewrites the checkpoint at path as one written before --stop-metric: a
 * train.state of 8 values, no valid_candidates, valid_seed, stop_metric. */
static int make_old_ckpt(const char *path, sq_err *e)
{
    sq_modelfile mf;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    for (int i = 0; i < mf.n_tensors; i++)
        if (!strcmp(mf.tensors[i].name, "train.state")) {
            mf.tensors[i].shape[0] = 8;
            mf.tensors[i].bytes = 64;
        }
    char *w = mf.config;
    for (const char *l = mf.config; *l;) {
        size_t n = strcspn(l, "\n") + (l[strcspn(l, "\n")] == '\n');
        if (strncmp(l, "train.valid_", 12) && strncmp(l, "train.stop_metric=", 18)) {
            memmove(w, l, n);
            w += n;
        }
        l += n;
    }
    *w = '\0';
    int rc = sq_modelfile_write(path, &mf, e);
    sq_modelfile_free(&mf);
    return rc;
}

/* The config of a model file without its valid.mrr@10 line (not known
 * after resuming an old checkpoint whose best epoch came before), and
 * whether its tensors equal those of another. */
static int same_model_but_mrr(const char *a, const char *b, sq_err *e)
{
    sq_modelfile ma, mb;
    if (sq_modelfile_read(a, &ma, e))
        return 0;
    if (sq_modelfile_read(b, &mb, e)) {
        sq_modelfile_free(&ma);
        return 0;
    }
    int same = ma.n_tensors == mb.n_tensors;
    for (int i = 0; same && i < ma.n_tensors; i++)
        same = ma.tensors[i].bytes == mb.tensors[i].bytes &&
               !memcmp(ma.tensors[i].data, mb.tensors[i].data, ma.tensors[i].bytes);
    const char *keys[] = {"train.best_epoch", "valid.hr@10", "valid.ndcg@10",
                          "train.stop_metric", "train.valid_candidates"};
    for (size_t i = 0; same && i < sizeof keys / sizeof keys[0]; i++) {
        char va[64] = "", vb[64] = "";
        same = sq_modelfile_get(&ma, keys[i], va, sizeof va) ==
                   sq_modelfile_get(&mb, keys[i], vb, sizeof vb) && !strcmp(va, vb);
    }
    sq_modelfile_free(&ma);
    sq_modelfile_free(&mb);
    return same;
}

/* A checkpoint written before --stop-metric resumes (its best value is
 * NDCG@10's) and ends on the model of the uninterrupted run. */
UNIT_TEST(test_train_resume_old_checkpoint)
{
    int saved_threads = omp_get_max_threads();
    omp_set_num_threads(1);
    sq_err e = {0};
    sq_dataset ds = {0};
    CHECK_EQ(tiny_dataset(&ds, &e), 0);
    char dir[] = "/tmp/sqtrain.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char full[64], part[64], ckpt[80];
    run_paths(dir, full, part, ckpt);
    sq_train_opts o;
    sq_sasrec_config cfg;
    CHECK_EQ(default_opts(&o, "sasrec", &cfg, "layers=1\nheads=2\ndim=8\nffn=16\n"
                          "max_len=8\n", &e), 0);
    o.batch = 8;
    o.epochs = 5;
    o.patience = 0;
    o.lr = 1e-2;
    o.threads = 1;
    CHECK_EQ(sq_train(&o, &ds, full, NULL, NULL, &e), 0);
    sq_train_opts o2 = o, o3;
    o2.epochs = 2;
    CHECK_EQ(sq_train(&o2, &ds, part, NULL, NULL, &e), 0);
    CHECK_EQ(make_old_ckpt(ckpt, &e), 0);
    sq_modelfile mf;
    char v[32];
    CHECK_EQ(sq_modelfile_read(ckpt, &mf, &e), 0);
    const sq_tensor *st = sq_modelfile_find(&mf, "train.state");
    CHECK(st && st->shape[0] == 8);
    CHECK(!sq_modelfile_get(&mf, "train.stop_metric", v, sizeof v));
    sq_modelfile_free(&mf);
    CHECK_EQ(sq_train_read_opts(&o3, ckpt, &e), 0);
    if (e.code)
        fprintf(stderr, "  %s\n", e.msg);
    int kind;
    uint32_t k;
    sq_train_stop_metric(&o3, &kind, &k);
    CHECK(kind == SQ_STOP_NDCG && k == 10 && o3.valid_cand == SQ_CAND_FULL);
    o3.epochs = 5;
    o3.threads = 1;
    CHECK_EQ(sq_train(&o3, &ds, part, ckpt, NULL, &e), 0);
    if (e.code)
        fprintf(stderr, "  %s\n", e.msg);
    CHECK(same_model_but_mrr(full, part, &e));
    free(o3.cfg);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    (void)!system(cmd);
    sq_dataset_free(&ds);
    omp_set_num_threads(saved_threads);
}
