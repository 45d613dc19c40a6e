/* Unit tests for CL4SRec: the contrastive views of the batcher (batch.h
 * CONTRASTIVE VIEWS), the InfoNCE op (infonce.h) and the model's loss
 * (lib/model/cl4srec.c).
 *
 *   - views: the samples are packed exactly as sq_batcher_init packs them,
 *     then two views of each; every view is a crop (a run of floor(eta
 *     len) of the inputs), a mask (floor(gamma len) mask tokens, the rest
 *     unchanged) or a reorder (a permutation inside one run of floor(beta
 *     len)); all three kinds occur; a user's views do not depend on the
 *     batch size and change with the epoch; ratios out of range are refused;
 *   - InfoNCE: the loss against its definition (ref_infonce, tests/ref), its
 *     gradient against central differences in double, float vs double;
 *   - the whole loss (next item CE or BCE + lambda InfoNCE, through the
 *     backbone with dropout) against central differences on every parameter
 *     of the double model, and the float build against the double one. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "batch.h"
#include "cl4srec.h"
#include "gradcheck.h"
#include "infonce.h"
#include "model.h"
#include "models.h"
#include "ref_ops.h"
#include "rng.h"
#include "unit.h"

#define GRAD_TOL 1e-6
#define F32_TOL 2e-5

/* 5 users: training parts of 3, 1 (no sample), 6, 2 and 11 items. */
static const uint32_t c_items[] = {1, 2, 3, 9, 4, 5, 6, 7, 8, 1, 2, 3,
                                   5, 6, 7, 8, 9, 1, 2, 3, 4, 6, 7};
static const uint64_t c_start[] = {0, 3, 4, 10, 12};
static const uint32_t c_ntrain[] = {3, 1, 6, 2, 11};

static sq_seqs cl_seqs(void)
{
    return (sq_seqs){.n_users = 5, .n_items = 9, .items = c_items, .start = c_start,
                     .n_train = c_ntrain};
}

enum { KIND_CROP = 1, KIND_MASK = 2, KIND_REORDER = 4 };

/* Checks view j of p against the inputs in[0, len) of its sample; returns
 * the kind it is (0 when it is none). */
static int view_kind(unit_ctx *t, const sq_packed *p, int j, const uint32_t *in, int len,
                     const sq_augment *a, int N)
{
    int o = p->off[j], rows = p->off[j + 1] - o;
    for (int r = 0; r < rows; r++)
        CHECK_EQ(p->pos[o + r], N - rows + r);
    const int *ids = p->ids + o;
    int c = (int)(a->crop * len) < 1 ? 1 : (int)(a->crop * len);
    if (rows != len) { /* a crop: a run of c inputs */
        CHECK_EQ(rows, c);
        int found = 0;
        for (int s = 0; s + c <= len && !found; s++) {
            int same = 1;
            for (int r = 0; r < c; r++)
                same &= ids[r] == (int)in[s + r];
            found |= same;
        }
        return found ? KIND_CROP : 0;
    }
    int masked = 0, changed = 0, first = -1, last = -1;
    for (int r = 0; r < len; r++) {
        masked += ids[r] == a->mask_id;
        if (ids[r] != (int)in[r]) {
            changed++;
            first = first < 0 ? r : first;
            last = r;
        }
    }
    if (masked)
        return masked == (int)(a->mask * len) && changed == masked ? KIND_MASK : 0;
    /* a reorder (or a crop of every item, or an identity shuffle): the same
     * multiset, the changes inside one run of floor(beta len) */
    int count[16] = {0};
    for (int r = 0; r < len; r++) {
        count[in[r]]++;
        count[ids[r]]--;
    }
    for (int i = 0; i < 16; i++)
        CHECK_EQ(count[i], 0);
    if (changed)
        CHECK(last - first + 1 <= (int)(a->reorder * len));
    return changed ? KIND_REORDER : KIND_REORDER | KIND_CROP | KIND_MASK;
}

UNIT_TEST(test_cl4srec_views)
{
    sq_err e = {0};
    sq_seqs d = cl_seqs();
    sq_augment a = {.crop = 0.5, .mask = 0.5, .reorder = 0.6, .mask_id = 10};
    int N = 8, kinds = 0, differ_epochs = 0;
    for (int mode = SQ_TARGET_ALL; mode <= SQ_TARGET_RANDOM; mode++) {
        sq_batcher b, b1, plain;
        CHECK_EQ(sq_batcher_init_cl(&b, &d, mode, N, 64, 2, &a, 7, &e), 0);
        CHECK_EQ(sq_batcher_init_cl(&b1, &d, mode, N, 1, 2, &a, 7, &e), 0);
        CHECK_EQ(sq_batcher_init(&plain, &d, mode, N, 64, 2, 7, &e), 0);
        uint32_t prev[64][2] = {{0}};
        for (uint64_t ep = 0; ep < 6; ep++) {
            sq_batcher_shuffle(&b, ep);
            sq_batcher_shuffle(&plain, ep);
            const sq_packed *p = sq_batcher_get(&b, ep, 0), *q = sq_batcher_get(&plain, ep, 0);
            int B = q->B, T0 = q->T;
            CHECK_EQ(p->views, 3);
            CHECK_EQ(p->B, 3 * B);
            CHECK_EQ(p->n, q->n);
            CHECK_EQ(p->n_first, q->n);
            CHECK(p->T <= b.cap_T);
            CHECK_EQ(memcmp(p->off, q->off, (size_t)(B + 1) * sizeof *p->off), 0);
            CHECK_EQ(memcmp(p->ids, q->ids, (size_t)T0 * sizeof *p->ids), 0);
            CHECK_EQ(memcmp(p->pos, q->pos, (size_t)T0 * sizeof *p->pos), 0);
            CHECK_EQ(memcmp(p->rows, q->rows, (size_t)q->n * sizeof *p->rows), 0);
            CHECK_EQ(memcmp(p->targets, q->targets, (size_t)q->n * sizeof *p->targets), 0);
            CHECK_EQ(memcmp(p->neg, q->neg, (size_t)q->n * 2 * sizeof *p->neg), 0);
            for (int j = 0; j < B; j++) {
                /* the sample's inputs are the packed original */
                const int *orig = q->ids + q->off[j];
                int len = q->off[j + 1] - q->off[j];
                uint32_t in[16];
                for (int r = 0; r < len; r++)
                    in[r] = (uint32_t)orig[r];
                for (int v = 1; v <= 2; v++) {
                    CHECK_EQ(p->user[v * B + j], p->user[j]);
                    int k = view_kind(t, p, v * B + j, in, len, &a, N);
                    CHECK(k != 0);
                    kinds |= k;
                    uint32_t h = 0; /* a hash: wraps */
                    for (int r = p->off[v * B + j]; r < p->off[v * B + j + 1]; r++)
                        h = h * 31u + (uint32_t)p->ids[r];
                    if (mode == SQ_TARGET_ALL && ep > 0)
                        differ_epochs += prev[p->user[j]][v - 1] != h;
                    prev[p->user[j]][v - 1] = h;
                }
            }
            /* batching does not change a sample's views */
            sq_batcher_shuffle(&b1, ep);
            for (uint64_t i = 0; i < b1.n_samples; i++) {
                const sq_packed *s = sq_batcher_get(&b1, ep, i);
                int k = 0;
                while (k < B && b.pb.user[k] != s->user[0])
                    k++;
                CHECK(k < B);
                if (k == B || mode == SQ_TARGET_LAST)
                    continue; /* several samples a user */
                for (int v = 1; v <= 2; v++) {
                    int len = s->off[v + 1] - s->off[v];
                    CHECK_EQ(p->off[v * B + k + 1] - p->off[v * B + k], len);
                    if (len == p->off[v * B + k + 1] - p->off[v * B + k])
                        CHECK_EQ(memcmp(s->ids + s->off[v], p->ids + p->off[v * B + k],
                                        (size_t)len * sizeof *s->ids), 0);
                }
            }
        }
        sq_batcher_free(&b);
        sq_batcher_free(&b1);
        sq_batcher_free(&plain);
    }
    CHECK_EQ(kinds & 7, 7);
    CHECK(differ_epochs > 0);
    sq_batcher b;
    sq_augment bad = a;
    bad.crop = 0;
    CHECK(sq_batcher_init_cl(&b, &d, 0, N, 4, 0, &bad, 7, &e) == SQ_EX_USAGE);
    bad = a;
    bad.mask = 1.5;
    CHECK(sq_batcher_init_cl(&b, &d, 0, N, 4, 0, &bad, 7, &e) == SQ_EX_USAGE);
    bad = a;
    bad.reorder = -0.1;
    CHECK(sq_batcher_init_cl(&b, &d, 0, N, 4, 0, &bad, 7, &e) == SQ_EX_USAGE);
}

/* ------------------------------------------------------------------------ */
/* The InfoNCE op                                                           */

enum { NCE_U = 3, NCE_C = 5, NCE_T = 8 };
static const int nce_ra[NCE_U] = {0, 2, 5}, nce_rb[NCE_U] = {7, 1, 3};

/* labels of the pairs: pairs 0 and 2 share theirs (each other's false
 * negatives under --cl-negatives distinct) */
static const int nce_label[NCE_U] = {4, 6, 4};

typedef struct {
    double *h, *scratch;
    const sq_infonce_opt *o;
} nce_ctx;

static double nce_obj(void *p)
{
    nce_ctx *c = p;
    sq_ctx cx = sq_ctx_cpu();
    return sq_infonce_forward_f64(&cx, c->scratch, c->h, nce_ra, nce_rb, NCE_U, NCE_C, c->o);
}

UNIT_TEST(test_infonce_gradcheck)
{
    sq_ctx cx = sq_ctx_cpu();
    double h[NCE_T * NCE_C], g[NCE_T * NCE_C];
    float hf[NCE_T * NCE_C], gf[NCE_T * NCE_C];
    size_t ns = sq_infonce_scratch_size(NCE_U, NCE_C);
    double *scratch = malloc(ns * sizeof *scratch);
    float *sf = malloc(ns * sizeof *sf);
    sq_rng r;
    sq_rng_seed(&r, 3, 0);
    for (int i = 0; i < NCE_T * NCE_C; i++) {
        h[i] = sq_rng_normal(&r);
        hf[i] = (float)h[i];
    }
    static const char *what[8] = {"dot tau 1",          "dot tau 0.3",
                                  "cos tau 1",          "cos tau 0.3",
                                  "dot tau 1 labels",   "dot tau 0.3 labels",
                                  "cos tau 1 labels",   "cos tau 0.3 labels"};
    for (int k = 0; k < 8; k++) {
        sq_infonce_opt o = {.tau = k & 1 ? 0.3 : 1.0, .cosine = (k >> 1) & 1,
                            .label = k & 4 ? nce_label : NULL};
        double dloss = 0.7;
        double L = sq_infonce_forward_f64(&cx, scratch, h, nce_ra, nce_rb, NCE_U, NCE_C, &o);
        double ref = ref_infonce(h, nce_ra, nce_rb, NCE_U, NCE_C, o.tau, o.cosine, o.label);
        CHECK_NEAR(L, ref, 1e-12);
        memset(g, 0, sizeof g);
        sq_infonce_backward_f64(&cx, g, scratch, nce_ra, nce_rb, NCE_U, NCE_C, &o, 1);
        nce_ctx c = {h, scratch, &o};
        double err = gc_check(nce_obj, &c, h, g, NCE_T * NCE_C);
        gc_note(t->name, what[k], err);
        CHECK(err < GRAD_TOL);
        /* rows in no pair get nothing; dloss scales */
        for (int cc = 0; cc < NCE_C; cc++)
            CHECK(g[4 * NCE_C + cc] == 0 && g[6 * NCE_C + cc] == 0);
        /* float against double */
        memset(gf, 0, sizeof gf);
        double Lf = sq_infonce_forward(&cx, sf, hf, nce_ra, nce_rb, NCE_U, NCE_C, &o);
        sq_infonce_backward(&cx, gf, sf, nce_ra, nce_rb, NCE_U, NCE_C, &o, (float)dloss);
        CHECK_NEAR(Lf, L, 1e-5);
        for (int i = 0; i < NCE_T * NCE_C; i++)
            g[i] *= dloss;
        double ferr = gc_rel_diff(gf, g, NCE_T * NCE_C);
        gc_note(t->name, "float vs double", ferr);
        CHECK(ferr < F32_TOL);
    }
    /* the labels change the loss: pairs 0 and 2 lose a negative each */
    sq_infonce_opt all = {.tau = 1}, distinct = {.tau = 1, .label = nce_label};
    CHECK(sq_infonce_forward_f64(&cx, scratch, h, nce_ra, nce_rb, NCE_U, NCE_C, &distinct) <
          sq_infonce_forward_f64(&cx, scratch, h, nce_ra, nce_rb, NCE_U, NCE_C, &all));
    /* one pair: no negative, no loss */
    CHECK(sq_infonce_forward_f64(&cx, scratch, h, nce_ra, nce_rb, 1, NCE_C, &all) == 0);
    free(scratch);
    free(sf);
}

/* ------------------------------------------------------------------------ */
/* The whole loss                                                           */

typedef struct {
    sq_sasrec_f64 *m;
    sq_sasrec_work_f64 *w;
    const sq_packed *b;
    int loss;
    const sq_cl4srec_cl *cl;
    double *scratch;
    int *rows;
} loss_ctx;

static double loss_obj(void *p)
{
    loss_ctx *c = p;
    int cnt;
    sq_sasrec_forward_f64(c->m, c->w, c->b, 1, 7, 3);
    return sq_cl4srec_loss_f64(c->m, c->w, c->b, sq_loss_of(c->loss), c->cl, c->scratch,
                               c->rows, NULL, &cnt);
}

/* Every parameter of the double model on a batch of the model's own
 * batcher (dropout on: its masks are a function of (seed, step)). */
static void check_loss(unit_ctx *t, const char *given, int loss, const sq_cl4srec_cl *cl,
                       const char *what)
{
    sq_err e = {0};
    const sq_model_def *def = sq_models_find("cl4srec");
    CHECK(def != NULL);
    if (!def)
        return;
    void *cfgmem = calloc(1, def->cfg_size);
    CHECK_EQ(def->config(cfgmem, given, &(sq_data_dims){.n_items = 9}, &e), 0);
    const sq_sasrec_config *cfg = cfgmem; /* the config starts with the backbone's */
    CHECK_EQ(cfg->mask_row, 1);
    sq_seqs d = cl_seqs();
    sq_step_opts so = {.loss = loss, .neg = 2, .target = SQ_TARGET_ALL, .batch = 4, .seed = 3};
    sq_batcher bt;
    CHECK_EQ(def->batcher(&bt, &d, cfgmem, &so, &e), 0);
    sq_batcher_shuffle(&bt, 0);
    const sq_packed *p = sq_batcher_get(&bt, 0, 0);
    sq_sasrec_cap cap = {.B = p->B, .T = p->T, .n = p->n, .att = bt.cap_att, .K = p->K,
                         .train = 1};
    sq_sasrec_f64 m, g;
    sq_sasrec_work_f64 w;
    CHECK_EQ(sq_sasrec_alloc_f64(&m, cfg, &e) || sq_sasrec_alloc_f64(&g, cfg, &e) ||
             sq_sasrec_work_alloc_f64(&w, &m, &cap, &e), 0);
    size_t ns = sq_infonce_scratch_size(p->B / 3, cfg->dim);
    double *scratch = malloc(ns * sizeof *scratch);
    float *sf = malloc(ns * sizeof *sf);
    int rows[3 * 4];
    sq_sasrec_init_weights_f64(&m, 5);
    sq_rng r;
    sq_rng_seed(&r, 9, 0);
    for (size_t i = 0; i < m.n; i++) /* general position: logits and LN vary */
        m.mem[i] += 0.2 * sq_rng_normal(&r);
    int cnt;
    memset(g.mem, 0, g.n * sizeof *g.mem);
    sq_sasrec_forward_f64(&m, &w, p, 1, 7, 3);
    double L0 = sq_cl4srec_loss_f64(&m, &w, p, sq_loss_of(loss), cl, scratch, rows, &g, &cnt);
    sq_sasrec_backward_f64(&m, &w, p, &g);
    CHECK_EQ(cnt, p->n);
    int C = cfg->dim, mask = sq_mask_id(cfg);
    double base = sq_sasrec_loss_f64(&m, &w, p, sq_loss_of(loss), NULL, &cnt);
    CHECK(L0 > base); /* the InfoNCE term is there */
    loss_ctx c = {&m, &w, p, loss, cl, scratch, rows};
    double err = gc_check(loss_obj, &c, m.mem, g.mem, m.n);
    gc_note(t->name, what, err);
    CHECK(err < GRAD_TOL);
    for (int i = 0; i < C; i++)
        CHECK(g.p.item_emb[i] == 0); /* padding row */
    int has_mask = 0;
    for (int i = 0; i < p->T; i++)
        has_mask |= p->ids[i] == mask;
    double gm = 0;
    for (int i = 0; i < C; i++)
        gm += fabs(g.p.item_emb[(size_t)mask * C + i]);
    CHECK(has_mask ? gm > 0 : gm == 0);

    /* the float build on the same parameters */
    sq_sasrec mf, gf;
    sq_sasrec_work wf;
    CHECK_EQ(sq_sasrec_alloc(&mf, cfg, &e) || sq_sasrec_alloc(&gf, cfg, &e) ||
             sq_sasrec_work_alloc(&wf, &mf, &cap, &e), 0);
    for (size_t i = 0; i < m.n; i++)
        mf.mem[i] = (float)m.mem[i];
    sq_sasrec_forward(&mf, &wf, p, 1, 7, 3);
    double Lf = sq_cl4srec_loss(&mf, &wf, p, sq_loss_of(loss), cl, sf, rows, &gf, &cnt);
    sq_sasrec_backward(&mf, &wf, p, &gf);
    CHECK_NEAR(Lf, L0, 1e-5);
    double ferr = gc_rel_diff(gf.mem, g.mem, g.n);
    gc_note(t->name, "float vs double grads", ferr);
    CHECK(ferr < F32_TOL);

    sq_sasrec_work_free(&wf);
    sq_sasrec_free(&gf);
    sq_sasrec_free(&mf);
    free(scratch);
    free(sf);
    sq_sasrec_work_free_f64(&w);
    sq_sasrec_free_f64(&g);
    sq_sasrec_free_f64(&m);
    sq_batcher_free(&bt);
    free(cfgmem);
}

UNIT_TEST(test_cl4srec_loss_gradcheck)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const char *tiny = "dim=8\nffn=8\nmax_len=6\nlayers=1\nheads=2\ndropout=0.2\n"
                       "cl4srec.mask_ratio=0.5\n";
    sq_cl4srec_cl dot = {.lambda = 0.8, .tau = 0.5},
                  cos = {.lambda = 0.8, .tau = 0.5, .cosine = 1, .distinct = 1};
    check_loss(t, tiny, SQ_LOSS_CE, &dot, "ce + infonce");
    check_loss(t, tiny, SQ_LOSS_BCE, &dot, "bce + infonce");
    check_loss(t, tiny, SQ_LOSS_CE, &cos, "ce + infonce cos distinct");
    omp_set_num_threads(saved);
}

/* A model file written before --cl-sim existed has no cl4srec.cl_sim key:
 * it trained with the dot product, and reads (and resumes) as such; a file
 * with the key keeps its value. */
UNIT_TEST(test_cl4srec_config_older_files)
{
    sq_err e = {0};
    const sq_model_def *def = sq_models_find("cl4srec");
    CHECK(def != NULL);
    if (!def)
        return;
    void *c = calloc(1, def->cfg_size), *r = calloc(1, def->cfg_size);
    CHECK_EQ(def->config(c, "", &(sq_data_dims){.n_items = 9}, &e), 0);
    sq_modelfile mf, back;
    memset(&mf, 0, sizeof mf);
    memset(&back, 0, sizeof back);
    CHECK_EQ(def->config_write(c, &mf, &e), 0);
    CHECK_EQ(sq_modelfile_set(&mf, &e, "n_items", "%d", 9), 0); /* the trainer's line */
    char v[16];
    CHECK(sq_modelfile_get(&mf, "cl4srec.cl_sim", v, sizeof v));
    CHECK_STR(v, "cos");
    CHECK_EQ(def->config_read(r, &mf, "new.sqm", &e), 0);
    CHECK_EQ(def->config_write(r, &back, &e), 0);
    CHECK(sq_modelfile_get(&back, "cl4srec.cl_sim", v, sizeof v));
    CHECK_STR(v, "cos");
    sq_modelfile_free(&back);
    memset(&back, 0, sizeof back);
    /* drop the key, as an older file lacks it */
    char *k = strstr(mf.config, "cl4srec.cl_sim=cos\n");
    CHECK(k != NULL);
    size_t kl = strlen("cl4srec.cl_sim=cos\n");
    if (k)
        memmove(k, k + kl, strlen(k + kl) + 1);
    CHECK(!sq_modelfile_get(&mf, "cl4srec.cl_sim", v, sizeof v));
    CHECK_EQ(def->config_read(r, &mf, "old.sqm", &e), 0);
    CHECK_EQ(def->config_write(r, &back, &e), 0);
    CHECK(sq_modelfile_get(&back, "cl4srec.cl_sim", v, sizeof v));
    CHECK_STR(v, "dot");
    sq_modelfile_free(&back);
    sq_modelfile_free(&mf);
    free(c);
    free(r);
}
