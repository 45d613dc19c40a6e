/* Unit tests for lib/sasrec.c and lib/batch.c.
 *
 * The whole model is checked against central finite differences in double
 * precision (lib/sasrec_f64.c is the same source as the float model that
 * trains): every parameter of a tiny model (2 blocks, d = 6 in 2 heads of 3
 * (Hydra: 6 and 3 heads), 9 items, three short packed sequences with a
 * padding token) -- SASRec through the CE and the BCE loss, with dropout
 * off and on (a fixed mask is a fixed function), SASRec with every
 * attention kind, BERT4Rec (cloze loss, head, output bias) with every kind
 * bidirectional and the QKV kinds and positional causal, SASRec with
 * RecBole's block (--block recbole: softmax and linrec). The float build
 * must then agree with the double one. Set SQ_TEST_VERBOSE=1 to print the
 * measured errors. Further: packed segments stay independent for every
 * kind, BERT4Rec's scores by hand, config round trips, cloze batches, and
 * attention maps that reproduce each layer's mixer. */
#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "attn_pos.h"
#include "batch.h"
#include "gradcheck.h"
#include "mix_qkv.h"
#include "mixer_opt.h"
#include "ops.h"
#include "rng.h"
#include "sasrec.h"
#include "unit.h"

#define GRAD_TOL 1e-6
#define F32_TOL 2e-5

/* A tiny fixed batch: 3 sequences of lengths 1, 4, 5; one ignored target
 * (0) and a padding token (id 0) inside the longest one. With cloze != 0
 * (BERT4Rec) rows 0, 2, 5 and 9 hold the mask token `cloze` and are the
 * loss entries, predicting the items they hide. */
typedef struct {
    int ids[10], pos[10], off[4], rows[10], targets[10], neg[20];
    float lq[20];
    uint32_t user[3];
    sq_packed pb;
} tiny_batch;

static void tiny_batch_init(tiny_batch *t, int max_len, int K, int cloze)
{
    static const int len[3] = {1, 4, 5};
    static const int ids[10] = {3, 1, 4, 1, 5, 9, 2, 0, 5, 3};
    static const int tg[10] = {5, 2, 7, 0, 9, 8, 1, 4, 6, 2};
    static const int masked[4] = {0, 2, 5, 9};
    memset(t, 0, sizeof *t);
    int T = sq_pack_offsets(t->off, len, 3), n = T;
    sq_pack_positions(t->pos, t->off, 3, max_len);
    for (int i = 0; i < T; i++) {
        t->ids[i] = ids[i];
        t->rows[i] = i;
        t->targets[i] = tg[i];
        for (int k = 0; k < K; k++)
            t->neg[i * K + k] = (i * 3 + k * 5) % 10; /* 0 = no negative, sometimes */
    }
    for (int i = 0; i < 20; i++) /* the sampled softmax's log(K Q) */
        t->lq[i] = (float)((i % 7) - 3) / 2;
    if (cloze) {
        n = 4;
        for (int i = 0; i < n; i++) {
            t->rows[i] = masked[i];
            t->targets[i] = ids[masked[i]];
            t->ids[masked[i]] = cloze;
        }
    }
    t->pb = (sq_packed){.B = 3, .T = T, .ids = t->ids, .off = t->off, .pos = t->pos,
                        .user = t->user, .n = n, .rows = t->rows, .targets = t->targets,
                        .K = K, .neg = K ? t->neg : NULL, .lq = K ? t->lq : NULL};
}

/* The tiny config of a backbone (seqrec-train's defaults for what it does
 * not set: softmax, BERT4Rec's mask probability). */
static sq_sasrec_config tiny_config_of(int backbone, double dropout)
{
    sq_sasrec_config c;
    sq_sasrec_defaults(&c, backbone);
    c.n_items = 9;
    c.n_layers = 2;
    c.n_heads = 2;
    c.dim = 6;
    c.ffn = 7;
    c.max_len = 5;
    c.dropout = dropout;
    c.ln_eps = 1e-8;
    c.causal = 0;
    return c;
}

static sq_sasrec_config tiny_config(double dropout)
{
    return tiny_config_of(SQ_BACKBONE_SASREC, dropout);
}

/* The kind named name (its row of the mixer table; -1 when unknown). */
static int kind_of(const char *name)
{
    return sq_mixer_find(name);
}

static int is_kind(int k, const char *name)
{
    return k == sq_mixer_find(name);
}

static const char *kind_name(int k)
{
    const sq_mixer *mx = sq_mixer_get(k);
    return mx ? mx->name : "(none)";
}

static const char *backbone_name(int bb)
{
    return bb == SQ_BACKBONE_BERT4REC ? "bert4rec" : "sasrec";
}

/* The QKV kinds (softmax and the linear family: Q/K/V/O projections). */
static int is_qkv(int k)
{
    return sq_mixer_get(k)->tensors == sq_qkv_tensors;
}

/* The tiny config with another backbone and attention kind (the kinds'
 * options: linrec code scaling, rank 3, decay 0.7). */
static sq_sasrec_config kind_config(int backbone, int attn, int causal, int heads)
{
    sq_sasrec_config c = tiny_config_of(backbone, 0);
    sq_mixer_defaults(&c.attn, attn);
    c.causal = causal;
    c.n_heads = heads;
    if (is_kind(attn, "fpositional"))
        mixer_set(&c.attn, "rank", "3");
    if (is_kind(attn, "exp-anneal"))
        mixer_set(&c.attn, "decay", "0.7");
    if (backbone == SQ_BACKBONE_BERT4REC)
        c.ln_eps = 1e-12;
    return c;
}

typedef struct {
    sq_sasrec_f64 *m;
    sq_sasrec_work_f64 *w;
    const sq_packed *b;
    sq_loss_spec loss;
} obj_ctx;

static double loss_obj(void *p)
{
    obj_ctx *c = p;
    int cnt;
    sq_sasrec_forward_f64(c->m, c->w, c->b, 1, 7, 3);
    return sq_sasrec_loss_f64(c->m, c->w, c->b, c->loss, NULL, &cnt);
}

/* Moves the parameters of a fresh init into general position: biases and
 * LayerNorm parameters away from 0 and 1, the item table (SASRec) and the
 * positional matrices larger than their tiny initial scale, the N(0, 0.02^2)
 * weights of RecBole's blocks (BERT4Rec, --block recbole) to ~0.2, so that
 * every gradient is exercised. */
/* The tensors of s in storage order (by offset, ties in table order). */
static void storage_order(const sq_tensor_set *s, int *idx)
{
    for (int i = 0; i < s->n; i++)
        idx[i] = i;
    for (int i = 1; i < s->n; i++)
        for (int j = i; j > 0 && s->off[idx[j]] < s->off[idx[j - 1]]; j--) {
            int x = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = x;
        }
}

static void perturb(sq_sasrec_f64 *m)
{
    const sq_tensor_set *s = &m->ts;
    int idx[SQ_MAX_TENSORS];
    storage_order(s, idx);
    sq_rng r;
    sq_rng_seed(&r, 5, 0);
    /* the tensors without weight decay (biases, LayerNorm), then those with */
    for (int k = 0; k < s->n; k++) {
        int i = idx[k];
        if (!s->desc[i]->decay)
            for (size_t j = 0; j < s->size[i]; j++)
                m->mem[s->off[i] + j] += 0.3 * sq_rng_normal(&r);
    }
    for (int k = 0; k < s->n; k++) {
        int i = idx[k];
        const char *name = s->desc[i]->name;
        size_t n = s->size[i];
        double *at = m->mem + s->off[i];
        if (!s->desc[i]->decay)
            continue;
        if (!strncmp(name, "pa_r", 4) || !strncmp(name, "fpa_r", 5))
            for (size_t j = 0; j < n; j++)
                at[j] += 0.5 * sq_rng_normal(&r);
        else if (sq_sasrec_post_ln(&m->cfg)) /* RecBole's N(0, 0.02^2) */
            for (size_t j = 0; j < n; j++)
                at[j] *= 10;
    }
    /* the item table larger than xavier's tiny scale, so logits vary */
    if (!sq_sasrec_post_ln(&m->cfg))
        for (size_t i = (size_t)m->cfg.dim; i < m->ts.size[SQ_T_item_emb]; i++)
            m->p.item_emb[i] *= 3;
}

/* Finite differences on every parameter of the double model (initialised
 * with `seed`, then perturbed); then the float model on the same
 * parameters. */
static void gradcheck_cfg1(unit_ctx *t, const sq_sasrec_config *cfg, int loss, uint64_t seed,
                           const char *what);

/* One thread: thousands of forwards of a model this small are all fork and
 * join otherwise (and crawl when the cores are shared). */
static void gradcheck_cfg(unit_ctx *t, const sq_sasrec_config *cfg, int loss, uint64_t seed,
                          const char *what)
{
    int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    gradcheck_cfg1(t, cfg, loss, seed, what);
    omp_set_num_threads(saved);
}

static void gradcheck_cfg1(unit_ctx *t, const sq_sasrec_config *cfg, int loss, uint64_t seed,
                           const char *what)
{
    sq_err e = {0};
    int bert = cfg->backbone == SQ_BACKBONE_BERT4REC;
    tiny_batch tb;
    tiny_batch_init(&tb, cfg->max_len, loss == SQ_LOSS_CE ? 0 : 2,
                    bert ? sq_mask_id(cfg) : 0);
    sq_loss_spec ls = {loss, 0.6}; /* gBCE: t = 0.6 */
    sq_sasrec_cap cap = {.B = 3, .T = tb.pb.T, .n = tb.pb.n,
                         .att = sq_attention_cache_size(tb.off, 3, 1), .K = tb.pb.K,
                         .train = 1};
    sq_sasrec_f64 m, g;
    sq_sasrec_work_f64 w;
    CHECK_EQ(sq_sasrec_alloc_f64(&m, cfg, &e), 0);
    CHECK_EQ(sq_sasrec_alloc_f64(&g, cfg, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc_f64(&w, &m, &cap, &e), 0);
    if (e.code) {
        fprintf(stderr, "  %s: %s\n", what, e.msg);
        return;
    }
    sq_sasrec_init_weights_f64(&m, seed);
    perturb(&m);

    int cnt = 0;
    memset(g.mem, 0, g.n * sizeof *g.mem);
    sq_sasrec_forward_f64(&m, &w, &tb.pb, 1, 7, 3);
    double L0 = sq_sasrec_loss_f64(&m, &w, &tb.pb, ls, &g, &cnt);
    sq_sasrec_backward_f64(&m, &w, &tb.pb, &g);
    CHECK_EQ(cnt, bert ? 4 : 9);
    CHECK(L0 > 0);

    obj_ctx c = {&m, &w, &tb.pb, ls};
    double err = gc_check(loss_obj, &c, m.mem, g.mem, m.n);
    gc_note(t->name, what, err);
    CHECK(err < GRAD_TOL);
    if (!(err < GRAD_TOL))
        fprintf(stderr, "  %s: gradient error %.3g\n", what, err);
    /* padding row: no gradient */
    for (int i = 0; i < cfg->dim; i++)
        CHECK(g.p.item_emb[i] == 0);

    /* float build on the same parameters */
    sq_sasrec mf, gf;
    sq_sasrec_work wf;
    CHECK_EQ(sq_sasrec_alloc(&mf, cfg, &e), 0);
    CHECK_EQ(sq_sasrec_alloc(&gf, cfg, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc(&wf, &mf, &cap, &e), 0);
    for (size_t i = 0; i < m.n; i++)
        mf.mem[i] = (float)m.mem[i];
    sq_sasrec_forward(&mf, &wf, &tb.pb, 1, 7, 3);
    double Lf = sq_sasrec_loss(&mf, &wf, &tb.pb, ls, &gf, &cnt);
    sq_sasrec_backward(&mf, &wf, &tb.pb, &gf);
    CHECK_NEAR(Lf, L0, 1e-5);
    double ferr = gc_rel_diff(gf.mem, g.mem, g.n);
    gc_note(t->name, "float vs double grads", ferr);
    CHECK(ferr < F32_TOL);

    sq_sasrec_work_free(&wf);
    sq_sasrec_free(&gf);
    sq_sasrec_free(&mf);
    sq_sasrec_work_free_f64(&w);
    sq_sasrec_free_f64(&g);
    sq_sasrec_free_f64(&m);
}

static void gradcheck_model(unit_ctx *t, int loss, double dropout, const char *what)
{
    sq_sasrec_config cfg = tiny_config(dropout);
    gradcheck_cfg(t, &cfg, loss, 11, what);
}

UNIT_TEST(test_sasrec_gradcheck_ce)
{
    gradcheck_model(t, SQ_LOSS_CE, 0, "ce, dropout 0");
}

UNIT_TEST(test_sasrec_gradcheck_bce)
{
    gradcheck_model(t, SQ_LOSS_BCE, 0, "bce K=2, dropout 0");
}

/* The sampled losses through the whole model (nextloss.h), both
 * backbones: BERT4Rec's logits carry its output bias. */
UNIT_TEST(test_sasrec_gradcheck_sampled)
{
    gradcheck_model(t, SQ_LOSS_SAMPLED_SOFTMAX, 0, "sampled-softmax K=2, dropout 0");
    gradcheck_model(t, SQ_LOSS_GBCE, 0.3, "gbce K=2 t=0.6, dropout 0.3");
    sq_sasrec_config c = tiny_config_of(SQ_BACKBONE_BERT4REC, 0);
    gradcheck_cfg(t, &c, SQ_LOSS_SAMPLED_SOFTMAX, 11, "bert4rec sampled-softmax K=2");
    gradcheck_cfg(t, &c, SQ_LOSS_GBCE, 11, "bert4rec gbce K=2 t=0.6");
}

UNIT_TEST(test_sasrec_gradcheck_dropout)
{
    gradcheck_model(t, SQ_LOSS_CE, 0.3, "ce, dropout 0.3");
    gradcheck_model(t, SQ_LOSS_BCE, 0.3, "bce K=2, dropout 0.3");
}

/* The kinds' checks initialise with seed 12. (A causal linrec normalises
 * the first key's column over that key alone: kh_0[a] = elu(k_0[a]) /
 * sqrt(elu(k_0[a])^2 + eps) is a step of width ~1e-6 at k_0[a] = 0, which a
 * finite difference of step 1e-4 sees as a jump when some k_0[a] lies that
 * close to 0. With seed 11 one does in the SASRec: a property of LinRec's
 * causal form, not of the gradient; with seed 12 none does.) */
#define KIND_SEED 12

/* Every attention kind in SASRec (causal), d = 6 in 2 heads of 3 (Hydra: 6
 * heads of 1, and 3 of 2), with a padding token, through the CE loss. */
UNIT_TEST(test_sasrec_gradcheck_kinds)
{
    for (int a = 0; a < sq_mixer_count(); a++) {
        sq_sasrec_config c = kind_config(SQ_BACKBONE_SASREC, a, 0, is_kind(a, "hydra") ? 6 : 2);
        gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, kind_name(a));
    }
    sq_sasrec_config c = kind_config(SQ_BACKBONE_SASREC, kind_of("linrec"), 0, 2);
    mixer_set(&c.attn, "linrec-scale", "paper");
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "linrec paper");
    mixer_set(&c.attn, "linrec-scale", "code");
    mixer_set(&c.attn, "linrec-variant", "no-l2");
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "linrec no-l2");
    mixer_set(&c.attn, "linrec-variant", "no-elu");
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "linrec no-elu");
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("hydra"), 0, 3);
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "hydra 3 heads");
}

/* BERT4Rec (cloze loss on 4 masked rows, head and output bias), every kind
 * bidirectional and the QKV kinds causal as well; dropout once. */
UNIT_TEST(test_bert4rec_gradcheck)
{
    char what[64];
    for (int causal = 0; causal <= 1; causal++)
        for (int a = 0; a < sq_mixer_count(); a++) {
            if (causal && !is_qkv(a) && !is_kind(a, "positional") && !is_kind(a, "efficient-dwc"))
                continue;
            sq_sasrec_config c = kind_config(SQ_BACKBONE_BERT4REC, a, causal,
                                             is_kind(a, "hydra") ? 6 : 2);
            snprintf(what, sizeof what, "bert4rec %s%s", kind_name(a),
                     causal ? " causal" : "");
            gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, what);
        }
    sq_sasrec_config c = kind_config(SQ_BACKBONE_BERT4REC, kind_of("softmax"), 0, 2);
    c.dropout = 0.3;
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "bert4rec softmax dropout 0.3");
}

/* A sequence's states do not depend on the other sequences of its batch
 * (packed segments), and sq_sasrec_scores is the newest state times E. */
UNIT_TEST(test_sasrec_segments_and_scores)
{
    sq_err e = {0};
    sq_sasrec_config cfg = tiny_config(0);
    tiny_batch tb;
    tiny_batch_init(&tb, cfg.max_len, 0, 0);
    sq_sasrec m;
    CHECK_EQ(sq_sasrec_alloc(&m, &cfg, &e), 0);
    sq_sasrec_init_weights(&m, 3);
    sq_sasrec_cap cap = {.B = 3, .T = tb.pb.T, .n = 0, .att = 64, .train = 0};
    sq_sasrec_work w, w1;
    CHECK_EQ(sq_sasrec_work_alloc(&w, &m, &cap, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc(&w1, &m, &cap, &e), 0);
    sq_sasrec_forward(&m, &w, &tb.pb, 0, 0, 0);
    /* sequence 1 (rows 1..4) alone */
    int off1[2] = {0, 4};
    sq_packed one = {.B = 1, .T = 4, .ids = tb.ids + 1, .off = off1, .pos = tb.pos + 1};
    sq_sasrec_forward(&m, &w1, &one, 0, 0, 0);
    CHECK(memcmp(w1.out, w.out + 1 * cfg.dim, 4 * cfg.dim * sizeof(float)) == 0);

    /* scores: histories = the batch's sequences plus an empty one and one
     * longer than max_len (only its newest 5 items count) */
    uint32_t items[] = {3, 1, 4, 1, 5, 7, 7, 9, 2, 0, 5, 3};
    uint32_t hoff[] = {0, 1, 5, 5}, hlen[] = {1, 4, 0, 7};
    /* history 3: items[5..12) = 7 7 9 2 0 5 3 -> newest five 9 2 0 5 3 */
    sq_batch hb = {.items = items, .off = hoff, .len = hlen, .B = 4};
    int V1 = 10;
    float *sc = calloc(4 * (size_t)V1, sizeof *sc);
    CHECK_EQ(sq_sasrec_scores(&m, &hb, sc, &e), 0);
    const int last_row[3] = {0, 4, 9}; /* newest rows of tb's sequences */
    for (int b = 0; b < 4; b++) {
        int hb_idx = b == 3 ? 2 : b; /* history 3 == tb sequence 2 */
        if (b == 2)
            continue;
        const float *h = w.out + (size_t)last_row[hb_idx] * cfg.dim;
        for (int i = 1; i < V1; i++) {
            double s = 0;
            for (int c = 0; c < cfg.dim; c++)
                s += (double)h[c] * m.p.item_emb[(size_t)i * cfg.dim + c];
            CHECK_NEAR(sc[(size_t)b * V1 + i], s, 1e-5);
        }
    }
    /* the empty history scores from the last position embedding alone */
    int id0 = 0, pos0 = cfg.max_len - 1, off0[2] = {0, 1};
    sq_packed cold = {.B = 1, .T = 1, .ids = &id0, .off = off0, .pos = &pos0};
    sq_sasrec_forward(&m, &w1, &cold, 0, 0, 0);
    for (int i = 1; i < V1; i++) {
        double s = 0;
        for (int c = 0; c < cfg.dim; c++)
            s += (double)w1.out[c] * m.p.item_emb[(size_t)i * cfg.dim + c];
        CHECK_NEAR(sc[2 * (size_t)V1 + i], s, 1e-5);
    }
    free(sc);
    sq_sasrec_work_free(&w1);
    sq_sasrec_work_free(&w);
    sq_sasrec_free(&m);
}

/* Config checks and the model-file round trip of config and tensors. */
UNIT_TEST(test_sasrec_config)
{
    sq_err e = {0};
    sq_sasrec_config c = tiny_config(0.2);
    CHECK_EQ(sq_sasrec_config_check(&c, &e), 0);
    c.n_heads = 4; /* 6 % 4 != 0 */
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    c = tiny_config(1.0);
    e.code = 0;
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    sq_tensor_set ts;
    c = tiny_config(0);
    e.code = 0;
    CHECK_EQ(sq_sasrec_tensor_set(&c, &ts, &e), 0);
    /* 10*6 + 5*6 + 2*(4*36 + 2*42 + 5*6 + 7 + 4*6) + 2*6 */
    CHECK_EQ(ts.total, 60 + 30 + 2 * (144 + 84 + 30 + 7 + 24) + 12);
    CHECK_STR(ts.desc[SQ_T_item_emb]->name, "item_emb");
    CHECK_EQ(ts.off[SQ_T_item_emb], 0);
    /* the backbone's table, then softmax's Q/K/V/O projections; no more */
    CHECK_EQ(ts.n, SQ_SASREC_NT + QKV_NT);
    CHECK_STR(ts.desc[SQ_SASREC_NT]->name, "wq");
    CHECK_STR(ts.desc[SQ_SASREC_NT + QKV_BO]->name, "bo");
}

/* The states h of a forward (SASRec: LNf output; BERT4Rec: x[L]). */
static const float *states(const sq_sasrec_work *w, const sq_sasrec_config *c)
{
    if (c->backbone == SQ_BACKBONE_BERT4REC)
        return w->x + (size_t)c->n_layers * w->cap.T * c->dim;
    return w->out;
}

/* A float model of config c, initialised and perturbed (perturb's rule). */
static int kind_model(sq_sasrec *m, const sq_sasrec_config *c, sq_err *e)
{
    sq_sasrec_f64 md;
    if (sq_sasrec_alloc_f64(&md, c, e))
        return e->code;
    if (sq_sasrec_alloc(m, c, e)) {
        sq_sasrec_free_f64(&md);
        return e->code;
    }
    sq_sasrec_init_weights_f64(&md, 3);
    perturb(&md);
    for (size_t i = 0; i < md.n; i++)
        m->mem[i] = (float)md.mem[i];
    sq_sasrec_free_f64(&md);
    return 0;
}

/* kind_model of c and two scoring works for batch pb (n scored rows);
 * nonzero (a check failed) when one cannot be had. */
static int model_two_works(unit_ctx *t, sq_sasrec *m, sq_sasrec_work *w, sq_sasrec_work *w1,
                           const sq_sasrec_config *c, const sq_packed *pb, int n)
{
    sq_err e = {0};
    sq_sasrec_cap cap = {.B = 3, .T = pb->T, .n = n, .att = 64, .train = 0};
    CHECK_EQ(kind_model(m, c, &e), 0);
    if (e.code)
        return 1;
    CHECK_EQ(sq_sasrec_work_alloc(w, m, &cap, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc(w1, m, &cap, &e), 0);
    return e.code != 0;
}

/* For every kind in both backbones (BERT4Rec bidirectional): a sequence's
 * states do not depend on the other sequences packed with it, even when
 * every position sees every other. */
UNIT_TEST(test_sasrec_kinds_segments)
{
    for (int bb = 0; bb <= 1; bb++)
        for (int a = 0; a < sq_mixer_count(); a++) {
            sq_sasrec_config c = kind_config(bb, a, 0, is_kind(a, "hydra") ? 6 : 2);
            tiny_batch tb;
            tiny_batch_init(&tb, c.max_len, 0, bb ? sq_mask_id(&c) : 0);
            sq_sasrec m;
            sq_sasrec_work w, w1;
            if (model_two_works(t, &m, &w, &w1, &c, &tb.pb, 0))
                return;
            sq_sasrec_forward(&m, &w, &tb.pb, 0, 0, 0);
            int off1[2] = {0, 4};
            sq_packed one = {.B = 1, .T = 4, .ids = tb.ids + 1, .off = off1, .pos = tb.pos + 1};
            sq_sasrec_forward(&m, &w1, &one, 0, 0, 0);
            const float *hb = states(&w, &c) + c.dim, *h1 = states(&w1, &c);
            double worst = 0;
            for (int i = 0; i < 4 * c.dim; i++)
                worst = fmax(worst, fabs((double)hb[i] - h1[i]));
            CHECK(worst < 1e-5);
            if (!(worst < 1e-5))
                fprintf(stderr, "  %s %s: %g\n", backbone_name(bb), kind_name(a), worst);
            sq_sasrec_work_free(&w1);
            sq_sasrec_work_free(&w);
            sq_sasrec_free(&m);
        }
}

/* Scoring's forward (sq_sasrec_forward_rows: the last block on the scored
 * rows alone) gives the bits of the full forward's rows, for every kind in
 * both backbones and both block paths, causal and not; it refuses rows out
 * of order. */
UNIT_TEST(test_sasrec_forward_rows_same_bits)
{
    for (int path = 0; path < 3; path++) /* SASRec pre-LN, SASRec post-LN, BERT4Rec */
        for (int a = 0; a < sq_mixer_count(); a++) {
            int bb = path == 2 ? SQ_BACKBONE_BERT4REC : SQ_BACKBONE_SASREC;
            sq_sasrec_config c = kind_config(bb, a, path < 2, is_kind(a, "hydra") ? 6 : 2);
            if (path == 1) {
                c.block = SQ_BLOCK_RECBOLE;
                c.ln_eps = 1e-12;
            }
            tiny_batch tb;
            tiny_batch_init(&tb, c.max_len, 0, 0);
            int last[3] = {0, 4, 9}; /* each sequence's last row */
            sq_sasrec m;
            sq_sasrec_work w, w1;
            if (model_two_works(t, &m, &w, &w1, &c, &tb.pb, 3))
                return;
            sq_sasrec_forward(&m, &w, &tb.pb, 0, 0, 0);
            CHECK_EQ(sq_sasrec_forward_rows(&m, &w1, &tb.pb, last, 3), 0);
            const float *h = states(&w, &c), *h1 = states(&w1, &c);
            int same = 1;
            for (int i = 0; i < 3; i++)
                same &= memcmp(h + (size_t)last[i] * c.dim, h1 + (size_t)i * c.dim,
                               (size_t)c.dim * sizeof *h) == 0;
            CHECK(same);
            if (!same)
                fprintf(stderr, "  path %d %s: the states differ\n", path, kind_name(a));
            if (bb == SQ_BACKBONE_BERT4REC) { /* and the head over them */
                sq_sasrec_head(&m, &w, last, 3);
                sq_sasrec_head(&m, &w1, NULL, 3);
                CHECK(memcmp(w.hln, w1.hln, (size_t)3 * c.dim * sizeof *w.hln) == 0);
            }
            int bad[2] = {4, 0};
            CHECK_EQ(sq_sasrec_forward_rows(&m, &w1, &tb.pb, bad, 2), -1);
            sq_sasrec_work_free(&w1);
            sq_sasrec_work_free(&w);
            sq_sasrec_free(&m);
        }
}

/* SASRec --block recbole (RecBole's post-LN GELU blocks, embedding LN, no
 * final LN, tied output): CE with softmax and linrec attention, dropout, BCE. */
static sq_sasrec_config recbole_config(const char *attn, double dropout)
{
    sq_sasrec_config c = kind_config(SQ_BACKBONE_SASREC, kind_of(attn), 0, 2);
    c.block = SQ_BLOCK_RECBOLE;
    c.ln_eps = 1e-12;
    c.dropout = dropout;
    return c;
}

UNIT_TEST(test_sasrec_recbole_gradcheck)
{
    sq_sasrec_config c = recbole_config("softmax", 0);
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "recbole softmax");
    c = recbole_config("linrec", 0);
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "recbole linrec");
    c = recbole_config("softmax", 0.3);
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "recbole softmax dropout 0.3");
    gradcheck_cfg(t, &c, SQ_LOSS_BCE, KIND_SEED, "recbole softmax bce dropout 0.3");
    c = recbole_config("linrec", 0.3);
    gradcheck_cfg(t, &c, SQ_LOSS_CE, KIND_SEED, "recbole linrec dropout 0.3");
}

/* The recbole block is BERT4Rec's encoder: on the same tensors its states
 * are a causal BERT4Rec's x[L] (BERT4Rec's blocks are checked against
 * PyTorch's nn.TransformerEncoderLayer below), and they are not a final
 * LayerNorm's output (the rows' mean is not 0). */
UNIT_TEST(test_sasrec_recbole_is_bert4rec_encoder)
{
    sq_err e = {0};
    sq_sasrec_config rc = recbole_config("softmax", 0);
    sq_sasrec_config bc = kind_config(SQ_BACKBONE_BERT4REC, kind_of("softmax"), 1, 2);
    sq_sasrec r, b;
    CHECK_EQ(kind_model(&r, &rc, &e), 0);
    CHECK_EQ(sq_sasrec_alloc(&b, &bc, &e), 0);
    if (e.code)
        return;
    /* every tensor of r into b by name (E: b has one more row, the mask) */
    for (int i = 0; i < r.ts.n; i++) {
        int j = sq_tensors_find(&b.ts, r.ts.desc[i]->name);
        CHECK(j >= 0 || !r.ts.size[i]);
        if (j >= 0 && r.ts.size[i])
            memcpy(b.mem + b.ts.off[j], r.mem + r.ts.off[i], r.ts.size[i] * sizeof *r.mem);
    }
    tiny_batch tb;
    tiny_batch_init(&tb, rc.max_len, 0, 0);
    sq_sasrec_cap cap = {.B = 3, .T = tb.pb.T, .n = tb.pb.n, .att = 64, .train = 0};
    sq_sasrec_work wr, wb;
    CHECK_EQ(sq_sasrec_work_alloc(&wr, &r, &cap, &e), 0);
    CHECK_EQ(sq_sasrec_work_alloc(&wb, &b, &cap, &e), 0);
    sq_sasrec_forward(&r, &wr, &tb.pb, 0, 0, 0);
    sq_sasrec_forward(&b, &wb, &tb.pb, 0, 0, 0);
    size_t TC = (size_t)tb.pb.T * rc.dim;
    CHECK(memcmp(wr.out, states(&wb, &bc), TC * sizeof(float)) == 0);
    double mean = 0;
    for (int c = 0; c < rc.dim; c++)
        mean += wr.out[c] / rc.dim;
    CHECK(fabs(mean) > 1e-3);
    sq_sasrec_work_free(&wb);
    sq_sasrec_work_free(&wr);
    sq_sasrec_free(&b);
    sq_sasrec_free(&r);
}

/* --block: RecBole's LayerNorm eps with it, its tensors (the embedding LN,
 * no final LN, no head or output bias), RecBole's init, the model file's
 * key (absent: sasrec), and BERT4Rec refusing it. */
UNIT_TEST(test_sasrec_recbole_config)
{
    sq_err e = {0};
    sq_sasrec_config c, r;
    CHECK_EQ(sq_sasrec_config_from(&c, SQ_BACKBONE_SASREC, "block=recbole\ndim=64\n", 200, 0,
                                   NULL, &e), 0);
    CHECK_EQ(c.block, SQ_BLOCK_RECBOLE);
    CHECK(c.ln_eps == 1e-12);
    CHECK_EQ(sq_sasrec_config_from(&r, SQ_BACKBONE_SASREC, "", 200, 0, NULL, &e), 0);
    CHECK_EQ(r.block, SQ_BLOCK_SASREC);
    CHECK(r.ln_eps == 1e-8);
    CHECK_EQ(sq_sasrec_config_from(&r, SQ_BACKBONE_SASREC, "block=postln\n", 200, 0, NULL,
                                   &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--block") != NULL);
    e.code = 0;
    CHECK_EQ(sq_sasrec_config_from(&r, SQ_BACKBONE_BERT4REC, "block=recbole\n", 200, 0, NULL,
                                   &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--block") != NULL);
    e.code = 0;
    r = kind_config(SQ_BACKBONE_BERT4REC, kind_of("softmax"), 0, 2);
    r.block = SQ_BLOCK_RECBOLE;
    CHECK_EQ(sq_sasrec_config_check(&r, &e), SQ_EX_USAGE);
    e.code = 0;

    sq_sasrec m;
    CHECK_EQ(sq_sasrec_alloc(&m, &c, &e), 0);
    if (e.code)
        return;
    const sq_tensor_set *ts = &m.ts;
    CHECK_EQ(ts->size[SQ_T_item_emb], (size_t)201 * 64);
    CHECK_EQ(ts->size[SQ_T_embln_w], 64);
    CHECK_EQ(ts->size[SQ_T_lnf_w] + ts->size[SQ_T_head_w] + ts->size[SQ_T_out_b], 0);
    sq_sasrec_init_weights(&m, 1);
    double s2 = 0;
    size_t n = ts->size[SQ_T_item_emb] - 64;
    for (size_t i = 64; i < ts->size[SQ_T_item_emb]; i++)
        s2 += (double)m.p.item_emb[i] * m.p.item_emb[i];
    CHECK_NEAR(sqrt(s2 / (double)n), 0.02, 0.001);
    CHECK(m.p.embln_w[0] == 1 && m.p.b1[0] == 0);
    sq_sasrec_free(&m);

    /* the model file: block=recbole round trips; without the key: sasrec */
    sq_modelfile mf = {0};
    CHECK_EQ(sq_modelfile_set(&mf, &e, "model", "sasrec"), 0);
    CHECK_EQ(sq_modelfile_set(&mf, &e, "n_items", "%u", c.n_items), 0);
    CHECK_EQ(sq_sasrec_config_write(&c, &mf, &e), 0);
    CHECK(strstr(mf.config, "block=recbole\n") != NULL);
    CHECK_EQ(sq_sasrec_config_read(&r, &mf, "x", &e), 0);
    CHECK_EQ(r.block, SQ_BLOCK_RECBOLE);
    CHECK(r.ln_eps == 1e-12);
    char *at = strstr(mf.config, "block=recbole\n");
    if (at)
        memmove(at, at + 14, strlen(at + 14) + 1);
    CHECK(strstr(mf.config, "block") == NULL);
    CHECK_EQ(sq_sasrec_config_read(&r, &mf, "x", &e), 0);
    CHECK_EQ(r.block, SQ_BLOCK_SASREC);
    sq_modelfile_free(&mf);
}

/* No kind but softmax and the positional ones sizes anything by sum(len^2):
 * a workspace whose capacity claims 2^40 of it still allocates. */
UNIT_TEST(test_sasrec_linear_workspace)
{
    static const char *const kinds[] = {"linrec", "linear", "efficient", "hydra",
                                        "average", "mixing"};
    for (int bb = 0; bb <= 1; bb++)
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
            sq_err e = {0};
            CHECK(kind_of(kinds[i]) >= 0);
            sq_sasrec_config c = kind_config(bb, kind_of(kinds[i]), 0, 2);
            c.max_len = 64;
            sq_sasrec_cap cap = {.B = 4, .T = 256, .n = 256, .att = (size_t)1 << 40,
                                 .train = 1};
            sq_sasrec m;
            sq_sasrec_work w;
            CHECK_EQ(sq_sasrec_alloc(&m, &c, &e), 0);
            if (e.code)
                return;
            CHECK_EQ(sq_sasrec_work_alloc(&w, &m, &cap, &e), 0);
            if (!e.code)
                sq_sasrec_work_free(&w);
            sq_sasrec_free(&m);
        }
}

/* BERT4Rec scoring: the newest N - 1 items and a mask token at position
 * N - 1; score = LNh(gelu(Wh h + bh)) . E[i] + ob[i] at the mask (here
 * recomputed by hand in double). */
UNIT_TEST(test_bert4rec_scores)
{
    sq_err e = {0};
    sq_sasrec_config c = kind_config(SQ_BACKBONE_BERT4REC, kind_of("softmax"), 0, 2);
    int C = c.dim, N = c.max_len, V1 = (int)c.n_items + 1, mask = sq_mask_id(&c);
    sq_sasrec m;
    CHECK_EQ(kind_model(&m, &c, &e), 0);
    if (e.code)
        return;
    /* histories: 3 items; none; 7 items (newest N - 1 = 4 kept) */
    uint32_t items[] = {3, 1, 4, 7, 7, 9, 2, 0, 5, 3};
    uint32_t hoff[] = {0, 3, 3}, hlen[] = {3, 0, 7};
    sq_batch hb = {.items = items, .off = hoff, .len = hlen, .B = 3};
    float *sc = calloc(3 * (size_t)V1, sizeof *sc);
    CHECK_EQ(sq_sasrec_scores(&m, &hb, sc, &e), 0);
    static const int in_ids[3][5] = {{3, 1, 4, -1, -1}, {-1, -1, -1, -1, -1}, {2, 0, 5, 3, -1}};
    static const int in_len[3] = {3, 0, 4};
    for (int b = 0; b < 3; b++) {
        int n = in_len[b] + 1, ids[5], pos[5], off[2] = {0, n};
        for (int r = 0; r < n; r++) {
            ids[r] = r < in_len[b] ? in_ids[b][r] : mask;
            pos[r] = N - n + r;
        }
        sq_packed pb = {.B = 1, .T = n, .ids = ids, .off = off, .pos = pos};
        sq_sasrec_cap cap = {.B = 1, .T = n, .n = 1, .att = 25, .train = 0};
        sq_sasrec_work w;
        CHECK_EQ(sq_sasrec_work_alloc(&w, &m, &cap, &e), 0);
        sq_sasrec_forward(&m, &w, &pb, 0, 0, 0);
        const float *h = states(&w, &c) + (size_t)(n - 1) * C;
        double u[16], mean = 0, var = 0;
        for (int i = 0; i < C; i++) {
            double z = m.p.head_b[i];
            for (int k = 0; k < C; k++)
                z += (double)m.p.head_w[i * C + k] * h[k];
            u[i] = 0.5 * z * (1 + erf(z / sqrt(2.0)));
            mean += u[i] / C;
        }
        for (int i = 0; i < C; i++)
            var += (u[i] - mean) * (u[i] - mean) / C;
        for (int i = 0; i < C; i++)
            u[i] = (u[i] - mean) / sqrt(var + c.ln_eps) * m.p.headln_w[i] + m.p.headln_b[i];
        for (int i = 1; i < V1; i++) {
            double s = m.p.out_b[i];
            for (int k = 0; k < C; k++)
                s += u[k] * m.p.item_emb[(size_t)i * C + k];
            CHECK_NEAR(sc[(size_t)b * V1 + i], s, 1e-5);
        }
        sq_sasrec_work_free(&w);
    }
    free(sc);
    sq_sasrec_free(&m);
}

/* Every kind's config survives the model file's keys; bad options are
 * refused. */
UNIT_TEST(test_sasrec_config_kinds)
{
    for (int bb = 0; bb <= 1; bb++)
        for (int a = 0; a < sq_mixer_count(); a++) {
            sq_err e = {0};
            sq_sasrec_config c = kind_config(bb, a, bb, 2), r;
            if (is_kind(a, "linrec"))
                mixer_set(&c.attn, "linrec-scale", "paper");
            CHECK_EQ(sq_mixer_find(sq_mixer_get(a)->name), a);
            sq_modelfile mf = {0};
            CHECK_EQ(sq_modelfile_set(&mf, &e, "model", "%s", backbone_name(bb)), 0);
            CHECK_EQ(sq_modelfile_set(&mf, &e, "n_items", "%u", c.n_items), 0);
            CHECK_EQ(sq_sasrec_config_write(&c, &mf, &e), 0);
            CHECK_EQ(sq_sasrec_config_read(&r, &mf, "x", &e), 0);
            CHECK_EQ(r.backbone, bb);
            CHECK_EQ(r.attn.kind, a);
            CHECK_EQ(r.causal, bb);
            /* every option of the kind as it was, by its text */
            char rb[64], cb[64];
            for (const sq_opt *o = sq_mixer_get(a)->opts; o && o->type; o++)
                CHECK_STR(mixer_get(&r.attn, o->name, rb, sizeof rb),
                          mixer_get(&c.attn, o->name, cb, sizeof cb));
            CHECK(!is_kind(a, "linrec") ||
                  !strcmp(mixer_get(&r.attn, "linrec-scale", rb, sizeof rb), "paper"));
            CHECK(!is_kind(a, "fpositional") ||
                  !strcmp(mixer_get(&r.attn, "rank", rb, sizeof rb), "3"));
            CHECK(!is_kind(a, "exp-anneal") ||
                  strtod(mixer_get(&r.attn, "decay", rb, sizeof rb), NULL) == 0.7);
            sq_modelfile_free(&mf);
            /* weight decay on the matrices and embeddings (two or more
             * dimensions besides the layers'), none on biases and LayerNorm
             * parameters */
            sq_tensor_set ts;
            CHECK_EQ(sq_sasrec_tensor_set(&c, &ts, &e), 0);
            for (int i = 0; i < ts.n; i++) {
                const char *shape = ts.desc[i]->shape;
                size_t dims = strlen(shape) - (shape[0] == 'L');
                int matrix = dims >= 2;
                CHECK_EQ(ts.desc[i]->decay, matrix);
                if (ts.desc[i]->decay != matrix)
                    fprintf(stderr, "  %s %s: tensor %s (%s) decay %d\n", backbone_name(bb),
                            kind_name(a), ts.desc[i]->name, shape, ts.desc[i]->decay);
            }
        }
    sq_err e = {0};
    CHECK_EQ(sq_mixer_find("quadratic"), -1);
    sq_sasrec_config c = kind_config(SQ_BACKBONE_SASREC, kind_of("fpositional"), 0, 2);
    mixer_poke(&c.attn, "rank", 0); /* --rank 0, built in code */
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("exp-anneal"), 0, 2);
    mixer_poke(&c.attn, "decay", 1.5); /* --decay 1.5 */
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("positional"), 0, 2);
    c.max_len = 65536;
    c.n_layers = 64;
    CHECK_EQ(sq_sasrec_config_check(&c, &e), SQ_EX_USAGE);
    /* per-kind parameter counts: PARec d^2 + H N^2 per layer (+ bv), no Q,
     * K, Wo; the fixed patterns Wv, bv only; mixing 2 N^2 + 2 N */
    sq_tensor_set ts;
    size_t base;
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("average"), 0, 2);
    CHECK_EQ(sq_sasrec_tensor_set(&c, &ts, &e), 0);
    base = ts.total;
    CHECK_EQ(base, 60 + 30 + 2 * (36 + 6 + 84 + 7 + 6 + 4 * 6) + 12);
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("positional"), 0, 2);
    CHECK_EQ(sq_sasrec_tensor_set(&c, &ts, &e), 0);
    CHECK_EQ(ts.total - base, 2 * 2 * 25);
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("fpositional"), 0, 2);
    CHECK_EQ(sq_sasrec_tensor_set(&c, &ts, &e), 0);
    CHECK_EQ(ts.total - base, 2 * 2 * 2 * 5 * 3);
    c = kind_config(SQ_BACKBONE_SASREC, kind_of("mixing"), 0, 2);
    CHECK_EQ(sq_sasrec_tensor_set(&c, &ts, &e), 0);
    CHECK_EQ(ts.total - base, 2 * (2 * 25 + 2 * 5) - 2 * (36 + 6));
}

/* The attention map of one history reproduces each layer's mixer: per head,
 * A (the map) times the forward's values gives the kernel's output; rows
 * sum to 1 for the normalised kinds; nothing above the diagonal when
 * causal. Mixing's map is the channel mean of its Jacobian, checked against
 * the kernel's backward with unit output gradients. */
UNIT_TEST(test_sasrec_attention_map)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    uint32_t hist[] = {3, 1, 4, 1, 5, 9, 2};
    for (int bb = 0; bb <= 1; bb++)
        for (int a = 0; a < sq_mixer_count(); a++) {
            sq_err e = {0};
            sq_sasrec_config c = kind_config(bb, a, 0, is_kind(a, "hydra") ? 6 : 2);
            int mixing = is_kind(a, "mixing");
            /* kinds that apply per-head weights to values: the QKV kinds and
             * the positional family (Wv first); mixing's is a Jacobian; of a
             * kind of neither family only the generic properties are checked */
            const sq_mixer *mx = sq_mixer_get(a);
            int has_values = is_qkv(a) || (mx->n_tensors && !strcmp(mx->tensors[0].name, "wv"));
            int causal = sq_sasrec_causal(&c), C = c.dim, L = c.n_layers;
            sq_sasrec m;
            CHECK_EQ(kind_model(&m, &c, &e), 0);
            float *map;
            int *ids, *pos, n, H;
            CHECK_EQ(sq_sasrec_attention_map(&m, hist, 3, &map, &ids, &pos, &n, &H, &e), 0);
            if (e.code)
                return;
            CHECK_EQ(n, bb ? 4 : 3);
            if (has_values || mixing)
                CHECK_EQ(H, mixing ? 1 : c.n_heads);
            CHECK(H >= 1 && H <= c.n_heads);
            CHECK_EQ(ids[n - 1], bb ? sq_mask_id(&c) : 4);
            CHECK_EQ(pos[n - 1], c.max_len - 1);
            int off[2] = {0, n};
            sq_packed pb = {.B = 1, .T = n, .ids = ids, .off = off, .pos = pos};
            sq_sasrec_cap cap = {.B = 1, .T = n, .n = 1, .att = 16, .train = 0};
            sq_sasrec_work w;
            CHECK_EQ(sq_sasrec_work_alloc(&w, &m, &cap, &e), 0);
            sq_sasrec_forward(&m, &w, &pb, 0, 0, 0);
            size_t sTC = (size_t)w.cap.T * C, nn = (size_t)n * n;
            int hs = C / c.n_heads, rows_sum_1 = !mx->signed_map;
            double worst = 0, rowdev = 0, upper = 0;
            for (int l = 0; l < L; l++) {
                const float *A = map + (size_t)l * H * nn;
                sq_mix_args args;
                sq_sasrec_mix_args(&m, &w, &pb, NULL, l, &args);
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < n; i++) {
                        double rs = 0;
                        for (int j = 0; j < n; j++) {
                            rs += A[h * nn + (size_t)i * n + j];
                            if (causal && j > i)
                                upper = fmax(upper, fabs(A[h * nn + (size_t)i * n + j]));
                        }
                        rowdev = fmax(rowdev, fabs(rs - 1));
                    }
                if (mixing) {
                    /* dx_j[k] = sum_i dout_i[k] dMIX_i[k]/dx_j[k] with dout = 1/C on
                     * row i only: sum_k dx_j[k] = J_ij */
                    const float *x = bb ? w.x + l * sTC : w.ln1 + l * sTC;
                    size_t NN = (size_t)c.max_len * c.max_len;
                    float *buf = calloc(4 * (size_t)n * C + 2 * NN + 2 * (size_t)c.max_len,
                                        sizeof *buf);
                    float *dout = buf, *dx = buf + n * C, *scr = dx + n * C;
                    float *dW = scr + 2 * n * C, *db = dW + 2 * NN;
                    for (int i = 0; i < n; i++) {
                        memset(buf, 0, 2 * (size_t)n * C * sizeof *buf);
                        for (int k = 0; k < C; k++)
                            dout[i * C + k] = 1.0f / C;
                        sq_mixing_backward(cx, dx, dW, db, dW + NN, db + c.max_len, scr, dout, x,
                                           args.cache, args.P[0], args.P[1], C, off, pos,
                                           1, C, c.max_len, causal);
                        for (int j = 0; j < n; j++) {
                            double jij = 0;
                            for (int k = 0; k < C; k++)
                                jij += dx[j * C + k];
                            worst = fmax(worst, fabs(jij - A[(size_t)i * n + j]));
                        }
                    }
                    free(buf);
                    continue;
                }
                if (!has_values)
                    continue;
                /* the QKV kinds: v and the heads' output atty in the layer's
                 * cache; the positional family: v first in the cache, the
                 * heads' output is the mixer's (no Wo) */
                const float *v = args.cache, *out = w.proj + l * sTC;
                if (is_qkv(a)) {
                    sq_qkv_bufs qb;
                    sq_qkv_carve(&args, &qb);
                    v = qb.v;
                    out = qb.atty;
                }
                for (int h = 0; h < H; h++)
                    for (int i = 0; i < n; i++)
                        for (int k = 0; k < hs; k++) {
                            double y = 0;
                            for (int j = 0; j < n; j++)
                                y += (double)A[h * nn + (size_t)i * n + j] *
                                     v[(size_t)j * C + h * hs + k];
                            worst = fmax(worst, fabs(y - out[(size_t)i * C + h * hs + k]));
                        }
            }
            CHECK(worst < 1e-5);
            CHECK(upper == 0);
            if (rows_sum_1)
                CHECK(rowdev < 1e-5);
            if (!(worst < 1e-5) || upper != 0 || (rows_sum_1 && !(rowdev < 1e-5)))
                fprintf(stderr, "  %s %s: A V err %g, upper %g, row sums %g\n",
                        backbone_name(bb), kind_name(a), worst, upper, rowdev);
            sq_sasrec_work_free(&w);
            free(map);
            free(ids);
            free(pos);
            sq_sasrec_free(&m);
        }
}

/* ------------------------------------------------------------------------ */
/* Batch builder                                                            */

/* 4 users: training parts of 3, 1 (no sample), 6 and 2 items. */
static const uint32_t seq_items[] = {1, 2, 3, 9, 4, 5, 6, 7, 8, 1, 2, 3};
static const uint64_t seq_start[] = {0, 3, 4, 10};
static const uint32_t seq_ntrain[] = {3, 1, 6, 2};

static sq_seqs tiny_seqs(void)
{
    return (sq_seqs){.n_users = 4, .n_items = 9, .items = seq_items,
                     .start = seq_start, .n_train = seq_ntrain};
}

UNIT_TEST(test_batch_all)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b;
    CHECK_EQ(sq_batcher_init(&b, &d, SQ_TARGET_ALL, 4, 8, 0, 1, &e), 0);
    CHECK_EQ(b.n_samples, 3);
    CHECK_EQ(sq_batcher_n_batches(&b), 1);
    CHECK_EQ(b.cap_T, 2 + 4 + 1);
    sq_batcher_shuffle(&b, 0);
    const sq_packed *p = sq_batcher_get(&b, 0, 0);
    CHECK_EQ(p->B, 3);
    CHECK_EQ(p->T, 7);
    CHECK_EQ(p->n, 7);
    for (int j = 0; j < p->B; j++) {
        uint32_t u = p->user[j];
        int len = p->off[j + 1] - p->off[j];
        const uint32_t *it = seq_items + seq_start[u];
        int nt = (int)seq_ntrain[u];
        CHECK_EQ(len, nt - 1 < 4 ? nt - 1 : 4);
        for (int s = 0; s < len; s++) {
            int row = p->off[j] + s;
            CHECK_EQ(p->ids[row], it[nt - 1 - len + s]);
            CHECK_EQ(p->pos[row], 4 - len + s);
            CHECK_EQ(p->rows[row], row);
            CHECK_EQ(p->targets[row], it[nt - len + s]);
        }
    }
    sq_batcher_free(&b);
}

UNIT_TEST(test_batch_last)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b;
    CHECK_EQ(sq_batcher_init(&b, &d, SQ_TARGET_LAST, 3, 2, 0, 1, &e), 0);
    CHECK_EQ(b.n_samples, 2 + 5 + 1);
    CHECK_EQ(sq_batcher_n_batches(&b), 4);
    sq_batcher_shuffle(&b, 2);
    int seen = 0;
    for (uint64_t i = 0; i < 4; i++) {
        const sq_packed *p = sq_batcher_get(&b, 2, i);
        CHECK_EQ(p->n, p->B);
        for (int j = 0; j < p->B; j++) {
            CHECK_EQ(p->rows[j], p->off[j + 1] - 1);
            CHECK(p->off[j + 1] - p->off[j] <= 3);
            seen++;
        }
    }
    CHECK_EQ(seen, 8);
    sq_batcher_free(&b);
}

/* Every target of every tiny user is trained exactly once an epoch by b,
 * with its inputs the items just before it, and at least min(idx, hist)
 * of them (idx: the target's index in the training part). */
static void check_every_target_once(unit_ctx *t, sq_batcher *b, int hist)
{
    int trained[4][6] = {{0}}, n = 0;
    sq_batcher_shuffle(b, 1);
    for (uint64_t i = 0; i < sq_batcher_n_batches(b); i++) {
        const sq_packed *p = sq_batcher_get(b, 1, i);
        for (int k = 0; k < p->n; k++) {
            int j = 0;
            while (p->off[j + 1] <= p->rows[k])
                j++;
            uint32_t u = p->user[j];
            const uint32_t *it = seq_items + seq_start[u];
            int idx = 1;
            while (idx < (int)seq_ntrain[u] && (int)it[idx] != p->targets[k])
                idx++;
            CHECK(idx < (int)seq_ntrain[u]);
            if (idx >= (int)seq_ntrain[u])
                continue;
            int seen = p->rows[k] - p->off[j] + 1; /* inputs up to the row */
            for (int q = 0; q < seen; q++)
                CHECK_EQ(p->ids[p->rows[k] - q], it[idx - 1 - q]);
            CHECK(seen >= (idx < hist ? idx : hist));
            trained[u][idx]++;
            n++;
        }
    }
    CHECK_EQ(n, 2 + 5 + 1);
    for (int u = 0; u < 4; u++)
        for (int idx = 1; idx < (int)seq_ntrain[u]; idx++)
            CHECK_EQ(trained[u][idx], 1);
}

/* --target windows: windows of max_len inputs tile each training part, so
 * every target of every user is trained exactly once an epoch (as with
 * --target last), with its inputs the items just before it. With a stride
 * S the windows overlap and each target has at least max_len - S + 1
 * inputs (all of them when it has fewer). */
UNIT_TEST(test_batch_windows)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b;
    /* users of 3, 6 and 2 training items:
     *   stride 0 (max_len), max_len 2: 1, 3 and 1 windows of 2 inputs;
     *   stride 1, max_len 3: a window per end, 2 + 5 + 1, each target
     *   with its whole prefix window;
     *   stride 2, max_len 3: ends 3; 6, 4, 2; 2;
     *   stride 3 = max_len 3: the tiling of sq_batcher_init */
    static const struct { int stride, max_len, n_samples, hist; } cases[] = {
        {0, 2, 5, 1}, {1, 3, 8, 3}, {2, 3, 5, 2}, {3, 3, 4, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        CHECK_EQ(sq_batcher_init_stride(&b, &d, SQ_TARGET_WINDOWS, cases[i].stride,
                                        cases[i].max_len, 2, 0, 1, &e), 0);
        CHECK_EQ(b.n_samples, cases[i].n_samples);
        check_every_target_once(t, &b, cases[i].hist);
        sq_batcher_free(&b);
    }
    /* refused: a stride over max_len, or with another mode */
    CHECK_EQ(sq_batcher_init_stride(&b, &d, SQ_TARGET_WINDOWS, 4, 3, 2, 0, 1, &e), SQ_EX_USAGE);
    e = (sq_err){0};
    CHECK_EQ(sq_batcher_init_stride(&b, &d, SQ_TARGET_ALL, 1, 3, 2, 0, 1, &e), SQ_EX_USAGE);
    CHECK(strstr(e.msg, "--target windows") != NULL);
    /* cloze windows tile all the items: 2 + 3 + 1 windows of <= 2 */
    CHECK_EQ(sq_batcher_init_cloze(&b, &d, SQ_TARGET_WINDOWS, 2, 2, 0.5, 10, 1, &e), 0);
    CHECK_EQ(b.n_samples, 6);
    sq_batcher_free(&b);
    CHECK_EQ(sq_target_parse("windows"), SQ_TARGET_WINDOWS);
    CHECK(!strcmp(sq_target_name(SQ_TARGET_WINDOWS), "windows"));
}

/* The end e of the prefix packed as sequence j of a --target random batch,
 * found from its target (the tiny users' items are distinct); checks its
 * inputs, positions and single entry on the way. 0 when they are wrong. */
static int random_end_of(unit_ctx *t, const sq_packed *p, int j, int max_len)
{
    uint32_t u = p->user[j];
    const uint32_t *it = seq_items + seq_start[u];
    int nt = (int)seq_ntrain[u], o = p->off[j], len = p->off[j + 1] - o, e = 0;
    CHECK_EQ(p->rows[j], p->off[j + 1] - 1); /* entry j: its sequence's last row */
    for (int k = 1; k < nt && !e; k++)
        if ((int)it[k] == p->targets[j])
            e = k + 1;
    CHECK(e >= 2 && e <= nt);
    if (e < 2)
        return 0;
    CHECK_EQ(len, e - 1 < max_len ? e - 1 : max_len);
    for (int r = 0; r < len; r++) {
        CHECK_EQ(p->ids[o + r], it[e - 1 - len + r]);
        CHECK_EQ(p->pos[o + r], max_len - len + r);
    }
    return e;
}

/* --target random: one prefix per user and epoch, its end drawn from
 * (seed, epoch, user) whatever the batch size, only its last position
 * trained; over the epochs every end 2..n_train comes up. */
UNIT_TEST(test_batch_random)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b2, b1, ball;
    CHECK_EQ(sq_target_parse("random"), SQ_TARGET_RANDOM);
    CHECK_STR(sq_target_name(SQ_TARGET_RANDOM), "random");
    CHECK_EQ(sq_batcher_init(&b2, &d, 7, 3, 2, 0, 1, &e), SQ_EX_USAGE);
    CHECK_EQ(sq_batcher_init(&b2, &d, SQ_TARGET_RANDOM, 3, 2, 2, 9, &e), 0);
    CHECK_EQ(sq_batcher_init(&b1, &d, SQ_TARGET_RANDOM, 3, 1, 2, 9, &e), 0);
    CHECK_EQ(sq_batcher_init(&ball, &d, SQ_TARGET_ALL, 3, 2, 2, 9, &e), 0);
    CHECK_EQ(b2.n_samples, 3);
    CHECK_EQ(b2.cap_T, ball.cap_T); /* the bounds of e = n_train */
    CHECK_EQ(b2.cap_att, ball.cap_att);
    int seen[4][8] = {{0}}, changed = 0, last_end[4] = {0};
    for (uint64_t ep = 0; ep < 64; ep++) {
        int ends[4] = {0}, entries = 0, negs[4][2] = {{0}};
        sq_batcher_shuffle(&b2, ep);
        for (uint64_t i = 0; i < sq_batcher_n_batches(&b2); i++) {
            const sq_packed *p = sq_batcher_get(&b2, ep, i);
            CHECK_EQ(p->n, p->B);
            entries += p->n;
            for (int j = 0; j < p->B; j++) {
                uint32_t u = p->user[j];
                int end = random_end_of(t, p, j, 3);
                ends[u] = end;
                seen[u][end]++;
                for (int k = 0; k < 2; k++) {
                    negs[u][k] = p->neg[j * 2 + k];
                    for (uint32_t m = 0; m < seq_ntrain[u]; m++)
                        CHECK(negs[u][k] != (int)seq_items[seq_start[u] + m]);
                }
            }
        }
        CHECK_EQ(entries, 3);
        /* batches of one: the same ends and negatives for every user */
        sq_batcher_shuffle(&b1, ep);
        for (uint64_t i = 0; i < 3; i++) {
            const sq_packed *q = sq_batcher_get(&b1, ep, i);
            uint32_t u = q->user[0];
            CHECK_EQ(random_end_of(t, q, 0, 3), ends[u]);
            CHECK(q->neg[0] == negs[u][0] && q->neg[1] == negs[u][1]);
        }
        changed += ep > 0 && ends[2] != last_end[2];
        memcpy(last_end, ends, sizeof ends);
    }
    CHECK(changed > 0);
    for (int end = 2; end <= 6; end++)
        CHECK(seen[2][end] > 0);
    CHECK(seen[0][2] > 0 && seen[0][3] > 0);
    CHECK_EQ(seen[3][2], 64);
    CHECK_EQ(seen[1][2] + seen[1][3], 0); /* one training item: no sample */
    sq_batcher_free(&b2);
    sq_batcher_free(&b1);
    sq_batcher_free(&ball);
}

/* Cloze with --target random: one window per user, ending at the end the
 * next-item batches of the same seed draw. */
UNIT_TEST(test_batch_random_cloze)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher bn, bc;
    CHECK_EQ(sq_batcher_init(&bn, &d, SQ_TARGET_RANDOM, 3, 4, 0, 11, &e), 0);
    CHECK_EQ(sq_batcher_init_cloze(&bc, &d, SQ_TARGET_RANDOM, 3, 4, 1.0, 10, 11, &e), 0);
    CHECK_EQ(bc.n_samples, 3);
    for (uint64_t ep = 0; ep < 16; ep++) {
        int ends[4] = {0};
        sq_batcher_shuffle(&bn, ep);
        sq_batcher_shuffle(&bc, ep);
        const sq_packed *p = sq_batcher_get(&bn, ep, 0);
        for (int j = 0; j < p->B; j++)
            ends[p->user[j]] = random_end_of(t, p, j, 3);
        const sq_packed *q = sq_batcher_get(&bc, ep, 0);
        CHECK_EQ(q->B, 3);
        /* mask probability 1: the entries are the window's items, in order */
        int at = 0;
        for (int j = 0; j < q->B; j++) {
            uint32_t u = q->user[j];
            int o = q->off[j], len = q->off[j + 1] - o, end = ends[u];
            CHECK_EQ(len, end < 3 ? end : 3);
            const uint32_t *it = seq_items + seq_start[u] + (end - len);
            for (int r = 0; r < len && at < q->n; r++, at++) {
                CHECK_EQ(q->ids[o + r], 10);
                CHECK_EQ(q->rows[at], o + r);
                CHECK_EQ(q->targets[at], it[r]);
            }
        }
        CHECK_EQ(at, q->n);
    }
    sq_batcher_free(&bn);
    sq_batcher_free(&bc);
}

/* Negatives avoid the user's training items and do not depend on the batch
 * size; the shuffle depends on the epoch. */
UNIT_TEST(test_batch_negatives)
{
    sq_err e = {0};
    sq_seqs d = tiny_seqs();
    sq_batcher b1, b3;
    CHECK_EQ(sq_batcher_init(&b1, &d, SQ_TARGET_ALL, 8, 1, 3, 42, &e), 0);
    CHECK_EQ(sq_batcher_init(&b3, &d, SQ_TARGET_ALL, 8, 3, 3, 42, &e), 0);
    sq_batcher_shuffle(&b1, 5);
    sq_batcher_shuffle(&b3, 5);
    const sq_packed *p3 = sq_batcher_get(&b3, 5, 0);
    int negs3[64], n3 = p3->n * 3;
    memcpy(negs3, p3->neg, (size_t)n3 * sizeof(int));
    uint32_t users3[3];
    memcpy(users3, p3->user, sizeof users3);
    int at = 0;
    for (uint64_t i = 0; i < 3; i++) {
        const sq_packed *p = sq_batcher_get(&b1, 5, i);
        CHECK_EQ(p->user[0], users3[i]);
        uint32_t u = p->user[0];
        for (int k = 0; k < p->n * 3; k++) {
            int x = p->neg[k];
            CHECK(x >= 1 && x <= 9);
            for (uint32_t j = 0; j < seq_ntrain[u]; j++)
                CHECK(x != (int)seq_items[seq_start[u] + j]);
            CHECK_EQ(x, negs3[at + k]);
        }
        at += p->n * 3;
    }
    CHECK_EQ(at, n3);
    /* another epoch, another order or other negatives */
    sq_batcher_shuffle(&b3, 6);
    const sq_packed *q = sq_batcher_get(&b3, 6, 0);
    CHECK(memcmp(q->neg, negs3, (size_t)n3 * sizeof(int)) != 0 ||
          memcmp(q->user, users3, sizeof users3) != 0);
    sq_batcher_free(&b1);
    sq_batcher_free(&b3);
}

/* Cloze batches: windows of the newest max_len training items, unshifted;
 * masked rows hold the mask token and are the loss entries with the hidden
 * item as target; padding tokens are never masked; at least one mask per
 * sequence; masks depend on (seed, epoch, user) only. */
UNIT_TEST(test_batch_cloze)
{
    static const uint32_t items[] = {1, 2, 3, 9, 4, 6, 0, 7, 8, 1, 2, 3};
    static const uint64_t start[] = {0, 3, 4, 10};
    static const uint32_t ntrain[] = {3, 1, 6, 2};
    sq_seqs d = {.n_users = 4, .n_items = 9, .items = items, .start = start, .n_train = ntrain};
    sq_err e = {0};
    sq_batcher b3, b1, ball;
    CHECK_EQ(sq_batcher_init_cloze(&b3, &d, SQ_TARGET_ALL, 4, 3, 0.3, 10, 7, &e), 0);
    CHECK_EQ(sq_batcher_init_cloze(&b1, &d, SQ_TARGET_ALL, 4, 1, 0.3, 10, 7, &e), 0);
    CHECK_EQ(sq_batcher_init_cloze(&ball, &d, SQ_TARGET_ALL, 4, 3, 1.0, 10, 7, &e), 0);
    sq_batcher bad;
    CHECK_EQ(sq_batcher_init_cloze(&bad, &d, SQ_TARGET_ALL, 4, 3, 0.0, 10, 7, &e),
             SQ_EX_USAGE);
    CHECK_EQ(b3.n_samples, 3);
    CHECK_EQ(b3.cap_T, 3 + 4 + 2);
    for (uint64_t ep = 0; ep < 6; ep++) {
        sq_batcher_shuffle(&b3, ep);
        sq_batcher_shuffle(&b1, ep);
        const sq_packed *p = sq_batcher_get(&b3, ep, 0);
        CHECK_EQ(p->B, 3);
        int ids3[16], rows3[16], tg3[16], n3 = p->n;
        memcpy(ids3, p->ids, (size_t)p->T * sizeof(int));
        memcpy(rows3, p->rows, (size_t)n3 * sizeof(int));
        memcpy(tg3, p->targets, (size_t)n3 * sizeof(int));
        int at = 0;
        for (int j = 0; j < 3; j++) {
            uint32_t u = p->user[j];
            int o = p->off[j], len = p->off[j + 1] - o, masks = 0;
            int nt = (int)ntrain[u], want = nt < 4 ? nt : 4;
            CHECK_EQ(len, want);
            const uint32_t *it = items + start[u] + (nt - len);
            for (int r = 0; r < len; r++) {
                CHECK_EQ(p->pos[o + r], 4 - len + r);
                if (ids3[o + r] == 10) {
                    CHECK(it[r] != 0);
                    CHECK(at < n3 && rows3[at] == o + r && tg3[at] == (int)it[r]);
                    at++;
                    masks++;
                } else {
                    CHECK_EQ(ids3[o + r], it[r]);
                }
            }
            CHECK(masks >= 1);
            /* the same user's masks in a batch of one */
            const sq_packed *q = sq_batcher_get(&b1, ep, (uint64_t)j);
            CHECK_EQ(q->user[0], u);
            CHECK(memcmp(q->ids, ids3 + o, (size_t)len * sizeof(int)) == 0);
        }
        CHECK_EQ(at, n3);
        /* mask probability 1: every non-padding item */
        sq_batcher_shuffle(&ball, ep);
        const sq_packed *pa = sq_batcher_get(&ball, ep, 0);
        CHECK_EQ(pa->n, 3 + 3 + 2);
        for (int r = 0; r < pa->T; r++)
            CHECK(pa->ids[r] == 10 || pa->ids[r] == 0);
    }
    /* another epoch, other masks (for the same user) */
    int diff_epochs = 0;
    sq_batcher_shuffle(&b1, 0);
    int first[4] = {0};
    for (uint64_t i = 0; i < 3; i++) {
        const sq_packed *q = sq_batcher_get(&b1, 0, i);
        if (q->user[0] == 2)
            memcpy(first, q->ids, 4 * sizeof(int));
    }
    for (uint64_t ep = 1; ep < 8; ep++) {
        sq_batcher_shuffle(&b1, ep);
        for (uint64_t i = 0; i < 3; i++) {
            const sq_packed *q = sq_batcher_get(&b1, ep, i);
            if (q->user[0] == 2 && memcmp(first, q->ids, 4 * sizeof(int)) != 0)
                diff_epochs = 1;
        }
    }
    CHECK(diff_epochs);
    sq_batcher_free(&b3);
    sq_batcher_free(&b1);
    sq_batcher_free(&ball);
}

/* ------------------------------------------------------------------------ */
/* PyTorch oracle (tests/reference/sasrec_ref.py, README.md there)          */

static int dump_tensor(FILE *idx, const char *dir, const char *name, const char *dt,
                       const void *data, size_t elem, size_t n, int nd, const size_t *shape)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int ok = fwrite(data, elem, n, f) == n;
    ok &= fclose(f) == 0;
    fprintf(idx, "tensor %s %s", name, dt);
    for (int d = 0; d < nd; d++)
        fprintf(idx, " %zu", shape[d]);
    fprintf(idx, "\n");
    return ok ? 0 : -1;
}

static double *read_f64(const char *dir, const char *name, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s.bin", dir, name);
    FILE *f = fopen(path, "rb");
    double *x = calloc(n ? n : 1, sizeof *x);
    if (!f || !x) {
        if (f)
            fclose(f);
        free(x);
        return NULL;
    }
    size_t got = fread(x, sizeof *x, n, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != n || extra) {
        free(x);
        return NULL;
    }
    return x;
}

/* max |a - b| / max(max |b|, floor) over n: the normwise relative
 * difference, with a floor for tensors whose exact value is 0 (the key
 * bias: softmax ignores a shift common to all keys), where only round-off
 * remains. */
static double rel_f64(const double *a, const double *b, size_t n, double floor_)
{
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        if (!(fabs(a[i] - b[i]) <= d))
            d = fabs(a[i] - b[i]);
        if (fabs(b[i]) > m)
            m = fabs(b[i]);
    }
    return d / fmax(m, fmax(floor_, 1e-300));
}

/* The C model (float and double) against sasrec_ref.py: SASRec (CE and
 * BCE) or BERT4Rec (bert != 0: cloze CE at 5 masked rows, bidirectional or
 * causal, torch's own TransformerEncoderLayer on the Python side). */
static void torch_reference(unit_ctx *t, int bert, int causal)
{
    const char *root = getenv("SEQREC_ROOT") ? getenv("SEQREC_ROOT") : ".";
    char script[512];
    snprintf(script, sizeof script, "%s/tests/reference/sasrec_ref.py", root);
    FILE *probe = fopen(script, "r");
    if (!probe)
        SKIP("tests/reference/sasrec_ref.py not found (run from the repository root)");
    fclose(probe);

    sq_err e = {0};
    sq_sasrec_config cfg;
    sq_sasrec_defaults(&cfg, bert ? SQ_BACKBONE_BERT4REC : SQ_BACKBONE_SASREC);
    cfg.n_items = 20;
    cfg.n_layers = 2;
    cfg.n_heads = 2;
    cfg.dim = 8;
    cfg.ffn = 12;
    cfg.max_len = 6;
    cfg.dropout = 0;
    cfg.ln_eps = bert ? 1e-12 : 1e-8;
    cfg.causal = causal;
    enum { B = 3, T = 13, K = 2 };
    int len[B] = {2, 5, 6}, off[B + 1], pos[T], ids[T], rows[T], targets[T], neg[T * K];
    sq_pack_offsets(off, len, B);
    sq_pack_positions(pos, off, B, cfg.max_len);
    sq_rng r;
    sq_rng_seed(&r, 77, 0);
    for (int i = 0; i < T; i++) {
        ids[i] = 1 + (int)sq_rng_below(&r, 20);
        rows[i] = i;
        targets[i] = 1 + (int)sq_rng_below(&r, 20);
        for (int k = 0; k < K; k++)
            neg[i * K + k] = (int)sq_rng_below(&r, 21); /* 0 = none, sometimes */
    }
    ids[9] = 0;     /* a padding token inside a sequence */
    targets[4] = 0; /* an ignored target */
    int n = T;
    if (bert) { /* cloze: masked rows predict the items they hide */
        static const int masked[5] = {1, 2, 5, 8, 12};
        n = 5;
        for (int i = 0; i < n; i++) {
            rows[i] = masked[i];
            targets[i] = ids[masked[i]];
            ids[masked[i]] = sq_mask_id(&cfg);
        }
    }
    sq_packed pb = {.B = B, .T = T, .ids = ids, .off = off, .pos = pos, .n = n, .rows = rows,
                    .targets = targets, .K = bert ? 0 : K, .neg = bert ? NULL : neg};
    sq_sasrec_cap cap = {.B = B, .T = T, .n = T, .att = sq_attention_cache_size(off, B, 1),
                         .K = K, .train = 1};

    sq_sasrec_f64 md, gd;
    sq_sasrec mf, gf;
    sq_sasrec_work_f64 wd;
    sq_sasrec_work wf;
    CHECK_EQ(sq_sasrec_alloc_f64(&md, &cfg, &e) || sq_sasrec_alloc_f64(&gd, &cfg, &e) ||
             sq_sasrec_alloc(&mf, &cfg, &e) || sq_sasrec_alloc(&gf, &cfg, &e) ||
             sq_sasrec_work_alloc_f64(&wd, &md, &cap, &e) ||
             sq_sasrec_work_alloc(&wf, &mf, &cap, &e), 0);
    if (e.code)
        return;
    sq_sasrec_init_weights_f64(&md, 5);
    /* the tensors in storage order */
    int order[SQ_MAX_TENSORS];
    storage_order(&md.ts, order);
    for (int k = 0; k < md.ts.n; k++) /* biases and LayerNorm parameters */
        if (!md.ts.desc[order[k]]->decay)
            for (size_t j = 0; j < md.ts.size[order[k]]; j++)
                md.mem[md.ts.off[order[k]] + j] += 0.2 * sq_rng_normal(&r);
    if (bert) { /* BERT4Rec: every N(0, 0.02^2) weight to ~0.2 */
        for (int i = 0; i < md.ts.n; i++)
            if (md.ts.desc[i]->decay)
                for (size_t j = 0; j < md.ts.size[i]; j++)
                    md.mem[md.ts.off[i] + j] *= 10;
        memset(md.p.item_emb, 0, (size_t)cfg.dim * sizeof *md.mem); /* padding row */
    } else {
        for (size_t i = (size_t)cfg.dim; i < md.ts.size[SQ_T_item_emb]; i++)
            md.p.item_emb[i] *= 4;
    }
    /* the same weights in both builds: round to float */
    for (size_t i = 0; i < md.n; i++) {
        mf.mem[i] = (float)md.mem[i];
        md.mem[i] = mf.mem[i];
    }

    char dir[] = "/tmp/sqref.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[600];
    snprintf(path, sizeof path, "%s/index.txt", dir);
    FILE *idx = fopen(path, "w");
    CHECK(idx != NULL);
    if (!idx)
        return;
    fprintf(idx, "config n_items %u\nconfig layers %d\nconfig heads %d\nconfig dim %d\n"
            "config ffn %d\nconfig max_len %d\nconfig ln_eps %.17g\nconfig model %s\n"
            "config causal %d\n", cfg.n_items, cfg.n_layers, cfg.n_heads, cfg.dim, cfg.ffn,
            cfg.max_len, cfg.ln_eps, backbone_name(cfg.backbone), cfg.causal);
    for (int k = 0; k < md.ts.n; k++) {
        int i = order[k];
        size_t shape[4];
        if (!md.ts.size[i])
            continue; /* not a tensor of this config */
        for (int d = 0; d < md.ts.nd[i]; d++)
            shape[d] = (size_t)md.ts.shape[i][d];
        CHECK_EQ(dump_tensor(idx, dir, md.ts.desc[i]->name, "f64", md.mem + md.ts.off[i], 8,
                             md.ts.size[i], md.ts.nd[i], shape), 0);
    }
    size_t sT[1] = {T}, sN[1] = {(size_t)n}, sOff[1] = {B + 1}, sNeg[2] = {T, K};
    CHECK_EQ(dump_tensor(idx, dir, "ids", "i32", ids, 4, T, 1, sT), 0);
    CHECK_EQ(dump_tensor(idx, dir, "off", "i32", off, 4, B + 1, 1, sOff), 0);
    CHECK_EQ(dump_tensor(idx, dir, "rows", "i32", rows, 4, (size_t)n, 1, sN), 0);
    CHECK_EQ(dump_tensor(idx, dir, "targets", "i32", targets, 4, (size_t)n, 1, sN), 0);
    CHECK_EQ(dump_tensor(idx, dir, "neg", "i32", neg, 4, T * K, 2, sNeg), 0);
    CHECK_EQ(fclose(idx), 0);

    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "for p in python3 /usr/bin/python3; do "
             "if \"$p\" -c 'import torch' >/dev/null 2>&1; then exec \"$p\" '%s' '%s'; fi; "
             "done; exit 77", script, dir);
    int st = system(cmd);
    int rc = st == -1 ? -1 : WEXITSTATUS(st);
    if (rc == 77) {
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        (void)!system(cmd);
        sq_sasrec_work_free(&wf);
        sq_sasrec_work_free_f64(&wd);
        sq_sasrec_free(&gf);
        sq_sasrec_free(&mf);
        sq_sasrec_free_f64(&gd);
        sq_sasrec_free_f64(&md);
        SKIP("python3-torch not installed");
    }
    CHECK_EQ(rc, 0);

    double worst_f = 0, worst_d = 0;
#define NOTE(errf, errd) do { \
        double ef_ = (errf), ed_ = (errd); \
        CHECK(ef_ < 1e-5); \
        CHECK(ed_ < 1e-10); \
        if (!(ef_ <= worst_f)) worst_f = ef_; \
        if (!(ed_ <= worst_d)) worst_d = ed_; \
    } while (0)
    double *th = read_f64(dir, "h", (size_t)T * cfg.dim);
    CHECK(th != NULL);
    size_t TC = (size_t)T * cfg.dim;
    for (int loss = SQ_LOSS_CE; th && loss <= (bert ? SQ_LOSS_CE : SQ_LOSS_BCE); loss++) {
        const char *ln = loss == SQ_LOSS_CE ? "ce" : "bce";
        int cnt;
        memset(gd.mem, 0, gd.n * sizeof *gd.mem);
        memset(gf.mem, 0, gf.n * sizeof *gf.mem);
        sq_sasrec_forward_f64(&md, &wd, &pb, 1, 1, 0);
        sq_sasrec_forward(&mf, &wf, &pb, 1, 1, 0);
        if (loss == SQ_LOSS_CE) { /* the states h: SASRec's LNf, BERT4Rec's x[L] */
            const float *sf = states(&wf, &cfg);
            const double *sd = bert ? wd.x + (size_t)cfg.n_layers * wd.cap.T * cfg.dim : wd.out;
            double *hf = calloc(TC, sizeof *hf);
            for (size_t i = 0; hf && i < TC; i++)
                hf[i] = sf[i];
            NOTE(rel_f64(hf, th, TC, 0), rel_f64(sd, th, TC, 0));
            free(hf);
        }
        double ld = sq_sasrec_loss_f64(&md, &wd, &pb, sq_loss_of(loss), &gd, &cnt);
        double lf = sq_sasrec_loss(&mf, &wf, &pb, sq_loss_of(loss), &gf, &cnt);
        sq_sasrec_backward_f64(&md, &wd, &pb, &gd);
        sq_sasrec_backward(&mf, &wf, &pb, &gf);
        char name[64];
        snprintf(name, sizeof name, "loss_%s", ln);
        double *tl = read_f64(dir, name, 1);
        CHECK(tl != NULL);
        if (tl)
            NOTE(fabs(lf - tl[0]) / fabs(tl[0]), fabs(ld - tl[0]) / fabs(tl[0]));
        free(tl);
        double *gfd = calloc(gf.n, sizeof *gfd);
        for (size_t i = 0; gfd && i < gf.n; i++)
            gfd[i] = gf.mem[i];
        /* floor: 1e-2 of the largest gradient of the loss */
        double gmax = 0;
        for (size_t i = 0; i < gd.n; i++)
            gmax = fmax(gmax, fabs(gd.mem[i]));
        for (int k = 0; gfd && k < md.ts.n; k++) {
            int i = order[k];
            size_t sz = md.ts.size[i], at = md.ts.off[i];
            if (!sz)
                continue;
            snprintf(name, sizeof name, "grad_%s.%s", ln, md.ts.desc[i]->name);
            double *tg = read_f64(dir, name, sz);
            CHECK(tg != NULL);
            if (tg) {
                NOTE(rel_f64(gfd + at, tg, sz, 1e-2 * gmax),
                     rel_f64(gd.mem + at, tg, sz, 1e-2 * gmax));
                gc_note(t->name, name, rel_f64(gfd + at, tg, sz, 1e-2 * gmax));
            }
            free(tg);
        }
        free(gfd);
    }
#undef NOTE
    free(th);
    gc_note(t->name, "torch vs C float (max rel)", worst_f);
    gc_note(t->name, "torch vs C double (max rel)", worst_d);
    if (!getenv("SQ_REF_KEEP")) { /* keep the exchange for a look by hand */
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        (void)!system(cmd);
    } else {
        printf("    kept %s\n", dir);
    }
    sq_sasrec_work_free(&wf);
    sq_sasrec_work_free_f64(&wd);
    sq_sasrec_free(&gf);
    sq_sasrec_free(&mf);
    sq_sasrec_free_f64(&gd);
    sq_sasrec_free_f64(&md);
}

UNIT_TEST(test_sasrec_torch_reference)
{
    torch_reference(t, 0, 0);
}

UNIT_TEST(test_bert4rec_torch_reference)
{
    torch_reference(t, 1, 0);
    torch_reference(t, 1, 1);
}
