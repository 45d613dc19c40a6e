/* Unit tests for CORE (lib/model/core.c) and its ops:
 *
 *   - l2norm (l2norm.h) and attnpool (attnpool.h): values against their
 *     definitions, gradients against central differences in double (the
 *     clamped branch of l2norm too, uniform weights of attnpool too), float
 *     against double;
 *   - the whole loss (session dropout, the transformer's alpha, the
 *     normalised representation, the item table under dropout, cosine
 *     logits over tau) against central differences on every parameter of
 *     the double model, both encoders, and the float build against it;
 *   - scoring: with --encoder ave the scores are cos(mean E[x], E_i) / tau,
 *     computed here directly; the model refuses --loss bce and --target
 *     all. */
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "attnpool.h"
#include "batch.h"
#include "core.h"
#include "gradcheck.h"
#include "l2norm.h"
#include "model.h"
#include "models.h"
#include "rng.h"
#include "unit.h"

#define GRAD_TOL 1e-6
#define F32_TOL 2e-5

static void fill_normal(double *x, size_t n, uint64_t seed)
{
    sq_rng r;
    sq_rng_seed(&r, seed, 0);
    for (size_t i = 0; i < n; i++)
        x[i] = sq_rng_normal(&r);
}

static void to_float(float *y, const double *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        y[i] = (float)x[i];
}

/* ------------------------------------------------------------------------ */
/* l2norm                                                                   */

enum { LT = 4, LC = 5 };

typedef struct {
    double *x, *y, *norm, *wt, s;
} l2_ctx;

static double l2_obj(void *p)
{
    l2_ctx *c = p;
    sq_ctx cx = sq_ctx_cpu();
    sq_l2norm_forward_f64(&cx, c->y, c->norm, c->x, LT, LC, c->s, 1e-3);
    double f = 0;
    for (int i = 0; i < LT * LC; i++)
        f += c->y[i] * c->wt[i];
    return f;
}

UNIT_TEST(test_l2norm_gradcheck)
{
    sq_ctx cx = sq_ctx_cpu();
    double x[LT * LC], y[LT * LC], norm[LT], wt[LT * LC], g[LT * LC];
    float xf[LT * LC], yf[LT * LC], nf[LT], wf[LT * LC], gf[LT * LC];
    fill_normal(x, LT * LC, 1);
    fill_normal(wt, LT * LC, 2);
    for (int c = 0; c < LC; c++)
        x[3 * LC + c] *= 1e-5; /* row 3 below eps: the clamped branch */
    double s = 1 / 0.07;
    sq_l2norm_forward_f64(&cx, y, norm, x, LT, LC, s, 1e-3);
    for (int row = 0; row < 3; row++) {
        double ss = 0;
        for (int c = 0; c < LC; c++)
            ss += y[row * LC + c] * y[row * LC + c];
        CHECK_NEAR(sqrt(ss), s, 1e-9);
    }
    memset(g, 0, sizeof g);
    sq_l2norm_backward_f64(&cx, g, wt, y, norm, LT, LC, s, 1e-3);
    l2_ctx c = {x, y, norm, wt, s};
    double err = gc_check(l2_obj, &c, x, g, LT * LC);
    gc_note(t->name, "rows and a clamped row", err);
    CHECK(err < GRAD_TOL);
    to_float(xf, x, LT * LC);
    to_float(wf, wt, LT * LC);
    memset(gf, 0, sizeof gf);
    sq_l2norm_forward(&cx, yf, nf, xf, LT, LC, (float)s, 1e-3f);
    sq_l2norm_backward(&cx, gf, wf, yf, nf, LT, LC, (float)s, 1e-3f);
    double ferr = gc_rel_diff(gf, g, LT * LC);
    gc_note(t->name, "float vs double", ferr);
    CHECK(ferr < F32_TOL);
}

/* ------------------------------------------------------------------------ */
/* attnpool                                                                 */

enum { PB = 3, PT = 7, PC = 4 };
static const int pool_off[PB + 1] = {0, 1, 4, 7};

typedef struct {
    double *inp, *score, *out, *alpha, *wt;
    int uniform;
} pool_ctx;

static double pool_obj(void *p)
{
    pool_ctx *c = p;
    sq_ctx cx = sq_ctx_cpu();
    sq_attnpool_forward_f64(&cx, c->out, c->alpha, c->uniform ? NULL : c->score, c->inp,
                            pool_off, PB, PC);
    double f = 0;
    for (int i = 0; i < PB * PC; i++)
        f += c->out[i] * c->wt[i];
    return f;
}

UNIT_TEST(test_attnpool_gradcheck)
{
    sq_ctx cx = sq_ctx_cpu();
    double inp[PT * PC], score[PT], out[PB * PC], alpha[PT], wt[PB * PC];
    double dinp[PT * PC], ds[PT];
    fill_normal(inp, PT * PC, 3);
    fill_normal(score, PT, 4);
    fill_normal(wt, PB * PC, 5);
    for (int uniform = 0; uniform < 2; uniform++) {
        pool_ctx c = {inp, score, out, alpha, wt, uniform};
        pool_obj(&c);
        /* the definition */
        for (int b = 0; b < PB; b++) {
            double z = 0;
            for (int j = pool_off[b]; j < pool_off[b + 1]; j++)
                z += exp(score[j]);
            for (int k = 0; k < PC; k++) {
                double o = 0;
                for (int j = pool_off[b]; j < pool_off[b + 1]; j++)
                    o += (uniform ? 1.0 / (pool_off[b + 1] - pool_off[b]) : exp(score[j]) / z) *
                         inp[j * PC + k];
                CHECK_NEAR(out[b * PC + k], o, 1e-12);
            }
        }
        memset(dinp, 0, sizeof dinp);
        sq_attnpool_backward_f64(&cx, dinp, uniform ? NULL : ds, wt, alpha, inp, pool_off, PB,
                                 PC);
        double err = gc_check(pool_obj, &c, inp, dinp, PT * PC);
        gc_note(t->name, uniform ? "uniform: d inp" : "d inp", err);
        CHECK(err < GRAD_TOL);
        if (uniform)
            continue;
        err = gc_check(pool_obj, &c, score, ds, PT);
        gc_note(t->name, "d score", err);
        CHECK(err < GRAD_TOL);
        CHECK(ds[0] == 0); /* one row: its weight is 1 whatever its score */
        /* float against double */
        float inpf[PT * PC], sf[PT], of[PB * PC], af[PT], wf[PB * PC], dif[PT * PC], dsf[PT];
        to_float(inpf, inp, PT * PC);
        to_float(sf, score, PT);
        to_float(wf, wt, PB * PC);
        memset(dif, 0, sizeof dif);
        sq_attnpool_forward(&cx, of, af, sf, inpf, pool_off, PB, PC);
        sq_attnpool_backward(&cx, dif, dsf, wf, af, inpf, pool_off, PB, PC);
        CHECK(gc_rel_diff(of, out, PB * PC) < F32_TOL);
        CHECK(gc_rel_diff(dif, dinp, PT * PC) < F32_TOL);
        CHECK(gc_rel_diff(dsf, ds, PT) < F32_TOL);
    }
}

/* ------------------------------------------------------------------------ */
/* The model                                                                */

/* 5 users: training parts of 3, 1 (no sample), 6, 2 and 5 items. */
static const uint32_t c_items[] = {1, 2, 3, 9, 4, 5, 6, 7, 8, 1, 2, 3, 5, 6, 7, 8, 9};
static const uint64_t c_start[] = {0, 3, 4, 10, 12};
static const uint32_t c_ntrain[] = {3, 1, 6, 2, 5};

static sq_seqs core_seqs(void)
{
    return (sq_seqs){.n_users = 5, .n_items = 9, .items = c_items, .start = c_start,
                     .n_train = c_ntrain};
}

/* The config of `given` (its sq_sasrec_config first) and its CORE opts. */
static void *core_cfg(unit_ctx *t, const char *given, sq_core_opts *o)
{
    sq_err e = {0};
    const sq_model_def *def = sq_models_find("core");
    CHECK(def != NULL);
    if (!def)
        return NULL;
    void *cfg = calloc(1, def->cfg_size);
    CHECK_EQ(def->config(cfg, given, &(sq_data_dims){.n_items = 9}, &e), 0);
    /* the fields after the backbone's: encoder, tau, item and session dropout */
    struct {
        sq_sasrec_config base;
        int encoder;
        double tau, item_dropout, sess_dropout;
    } *c = cfg;
    *o = (sq_core_opts){c->encoder, c->tau, c->item_dropout, c->sess_dropout, {0, 0}};
    return cfg;
}

typedef struct {
    sq_sasrec_f64 *m;
    sq_sasrec_work_f64 *bw;
    sq_core_work_f64 *w;
    const sq_packed *b;
    const sq_core_opts *o;
} loss_ctx;

static double loss_obj(void *p)
{
    loss_ctx *c = p;
    int cnt;
    return sq_core_loss_f64(c->m, c->bw, c->w, c->b, c->o, 7, 3, NULL, &cnt);
}

static void check_loss(unit_ctx *t, const char *given, const char *what)
{
    sq_err e = {0};
    sq_core_opts o;
    void *cfgmem = core_cfg(t, given, &o);
    if (!cfgmem)
        return;
    const sq_sasrec_config *cfg = cfgmem;
    CHECK_EQ(cfg->n_extra, 1);
    sq_seqs d = core_seqs();
    sq_batcher bt;
    CHECK_EQ(sq_batcher_init(&bt, &d, SQ_TARGET_LAST, cfg->max_len, 6, 0, 3, &e), 0);
    sq_batcher_shuffle(&bt, 0);
    const sq_packed *p = sq_batcher_get(&bt, 0, 1);
    CHECK_EQ(p->n, p->B);
    sq_sasrec_cap cap = {.B = p->B, .T = p->T, .n = p->n, .att = bt.cap_att, .train = 1};
    int V1 = (int)cfg->n_items + 1, C = cfg->dim;
    sq_sasrec_f64 m, g;
    sq_sasrec_work_f64 bw;
    sq_core_work_f64 w;
    sq_ctx cx = sq_ctx_cpu();
    CHECK_EQ(sq_sasrec_alloc_f64(&m, cfg, &e) || sq_sasrec_alloc_f64(&g, cfg, &e) ||
             sq_sasrec_work_alloc_f64(&bw, &m, &cap, &e) ||
             sq_core_work_alloc_f64(&w, &cx, p->T, p->B, V1, C, 1, &e), 0);
    sq_sasrec_init_weights_f64(&m, 5);
    sq_rng r;
    sq_rng_seed(&r, 9, 0);
    for (size_t i = 0; i < m.n; i++) /* general position */
        m.mem[i] += 0.3 * sq_rng_normal(&r);
    int cnt;
    memset(g.mem, 0, g.n * sizeof *g.mem);
    double L0 = sq_core_loss_f64(&m, &bw, &w, p, &o, 7, 3, &g, &cnt);
    CHECK_EQ(cnt, p->n);
    CHECK(L0 > 0);
    loss_ctx c = {&m, &bw, &w, p, &o};
    double err = gc_check(loss_obj, &c, m.mem, g.mem, m.n);
    gc_note(t->name, what, err);
    CHECK(err < GRAD_TOL);
    double gw = 0; /* the alpha layer learns with trm only */
    int iw = sq_tensors_find(&m.ts, "core_w");
    CHECK(iw >= 0);
    for (int i = 0; i < C && iw >= 0; i++)
        gw += fabs(g.mem[m.ts.off[iw] + (size_t)i]);
    CHECK(o.encoder == SQ_CORE_TRM ? gw > 0 : gw == 0);

    /* the float build on the same parameters */
    sq_sasrec mf, gf;
    sq_sasrec_work bwf;
    sq_core_work wf;
    CHECK_EQ(sq_sasrec_alloc(&mf, cfg, &e) || sq_sasrec_alloc(&gf, cfg, &e) ||
             sq_sasrec_work_alloc(&bwf, &mf, &cap, &e) ||
             sq_core_work_alloc(&wf, &cx, p->T, p->B, V1, C, 1, &e), 0);
    for (size_t i = 0; i < m.n; i++)
        mf.mem[i] = (float)m.mem[i];
    double Lf = sq_core_loss(&mf, &bwf, &wf, p, &o, 7, 3, &gf, &cnt);
    CHECK_NEAR(Lf, L0, 1e-5 * fmax(1, fabs(L0)));
    double ferr = gc_rel_diff(gf.mem, g.mem, g.n);
    gc_note(t->name, "float vs double grads", ferr);
    CHECK(ferr < F32_TOL);

    sq_core_work_free(&wf, &cx);
    sq_sasrec_work_free(&bwf);
    sq_sasrec_free(&gf);
    sq_sasrec_free(&mf);
    sq_core_work_free_f64(&w, &cx);
    sq_sasrec_work_free_f64(&bw);
    sq_sasrec_free_f64(&g);
    sq_sasrec_free_f64(&m);
    sq_batcher_free(&bt);
    free(cfgmem);
}

UNIT_TEST(test_core_loss_gradcheck)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const char *trm = "dim=8\nffn=8\nmax_len=6\nlayers=1\nheads=2\ndropout=0.2\n"
                      "core.temperature=0.5\n";
    const char *ave = "dim=8\nffn=8\nmax_len=6\nlayers=1\nheads=2\ndropout=0.2\n"
                      "core.encoder=ave\ncore.temperature=0.5\n";
    check_loss(t, trm, "trm, both dropouts");
    check_loss(t, ave, "ave, both dropouts");
    omp_set_num_threads(saved);
}

/* --encoder ave scores: cos(mean of the history's embeddings, E_i) / tau. */
UNIT_TEST(test_core_scores_ave)
{
    sq_err e = {0};
    const sq_model_def *def = sq_models_find("core");
    sq_core_opts o;
    void *cfg = core_cfg(t, "dim=8\nffn=8\nmax_len=4\nlayers=1\ncore.encoder=ave\n", &o);
    if (!def || !cfg)
        return;
    sq_ctx cx = sq_ctx_cpu();
    sq_net net;
    CHECK_EQ(def->net_alloc(&net, cfg, &cx, &e), 0);
    def->net_init(&net, 3);
    sq_model mm;
    def->view(&mm, &net);
    /* histories: 5 items (the newest 4 count), 1 item, none */
    static const uint32_t items[] = {9, 1, 2, 3, 4, 7};
    static const uint32_t off[] = {0, 5, 6}, len[] = {5, 1, 0};
    sq_batch hb = {.items = items, .off = off, .len = len, .B = 3};
    int V1 = 10, C = 8;
    float *sc = malloc(3 * (size_t)V1 * sizeof *sc);
    CHECK_EQ(mm.scores(&mm, &hb, sc, &e), 0);
    const float *E = net.params + net.ts->off[sq_tensors_find(net.ts, "item_emb")];
    for (int b = 0; b < 3; b++) {
        double r[8] = {0}, rn = 0;
        int n = len[b] > 4 ? 4 : (int)len[b];
        for (int k = 0; k < n; k++)
            for (int c = 0; c < C; c++)
                r[c] += E[(size_t)items[off[b] + len[b] - n + k] * C + c] / n;
        for (int c = 0; c < C; c++)
            rn += r[c] * r[c];
        rn = sqrt(rn);
        for (int i = 1; i < V1; i++) {
            double dot = 0, en = 0;
            for (int c = 0; c < C; c++) {
                dot += r[c] * E[(size_t)i * C + c];
                en += (double)E[(size_t)i * C + c] * E[(size_t)i * C + c];
            }
            double want = n ? dot / (rn * sqrt(en)) / o.tau : 0;
            CHECK(fabs(sc[(size_t)b * V1 + i] - want) <= 1e-4 * fmax(1, fabs(want)));
        }
    }
    free(sc);
    def->net_free(&net);
    /* training options CORE cannot use */
    sq_step_opts so = {.loss = 1, .target = SQ_TARGET_LAST, .batch = 4};
    CHECK_EQ(def->check_step(cfg, &so, &e), SQ_EX_USAGE);
    so = (sq_step_opts){.loss = 0, .target = SQ_TARGET_ALL, .batch = 4};
    CHECK_EQ(def->check_step(cfg, &so, &e), SQ_EX_USAGE);
    so.target = SQ_TARGET_RANDOM;
    CHECK_EQ(def->check_step(cfg, &so, &e), 0);
    free(cfg);
}
