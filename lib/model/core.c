/* core.c - CORE (Hou et al., "CORE: Simple and Effective Session-based
 * Recommendation within Consistent Representation Space", SIGIR 2022) on
 * the SASRec backbone (sasrec.h), as RecBole's CORE builds it:
 *
 *   RCE            h_t = dropout_sess(E[x_t]), the session's item
 *                  embeddings, and its representation
 *                      r = sum_t alpha_t h_t
 *                  a weighted sum of the INPUT embeddings: r lives in the
 *                  space of the items it is scored against. alpha:
 *                    --encoder trm  alpha = softmax over the sequence's rows
 *                                   of w . o_t, o_t the backbone
 *                                   transformer's output at row t (causal,
 *                                   as RecBole's TransNet, whose mask is
 *                                   left-to-right); w [1, C] (RecBole's
 *                                   Linear(d, 1): its bias cancels in the
 *                                   softmax, so it is not kept);
 *                    --encoder ave  alpha_t = 1 / len (the backbone unused).
 *   RDM            logits_i = cos(r, dropout_item(E_i)) / tau: r and every
 *                  item row L2-normalised (F.normalize, eps 1e-12), the item
 *                  table under element dropout (training only), softmax
 *                  cross-entropy over items 1..n_items.
 *
 * One representation per sequence, so one loss entry: the sequence's
 * newest row (--target last or random; --target all would need a
 * representation per prefix, i.e. a pooling per row, and is refused).
 * Scoring uses the same normalised embeddings and tau, without dropout.
 *
 * The math is written over `real` (compiled twice, like sasrec.c) from
 * ops (embedding, dropout, GEMM, attnpool.h, l2norm.h, sq_ce_full) so that
 * the unit tests check the whole step's gradient in double; the registered
 * model exists once, in the float build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "core.h"
#include "attnpool.h"
#include "l2norm.h"
#include "ops.h"
#include "real.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Dropout sites of CORE's own draws (the backbone's are small numbers). */
#define SITE_SESS 1000
#define SITE_ITEM 1001
#define NORM_EPS 1e-12

#if !SQ_REAL_IS_F64
const sq_tensor_desc sq_core_tensors[1] = {{"core_w", 40, 1, SQ_INIT_WEIGHT, "UC"}};
#endif

int R(sq_core_work_alloc)(R(sq_core_work) *w, const sq_ctx *cx, int T, int B, int V1, int C,
                          int train, sq_err *e)
{
    memset(w, 0, sizeof *w);
    *w = (R(sq_core_work)){.T = T, .B = B, .V1 = V1, .C = C, .train = train};
    size_t TC = (size_t)T * C, BC = (size_t)B * C, VC = (size_t)V1 * C;
    w->ce_chunk = sq_ce_chunk_on(cx, B, V1);
    size_t n = 2 * TC + 3 * (size_t)T + 2 * BC + (size_t)B + 2 * VC + (size_t)V1;
    if (train)
        n += sq_ce_scratch_size(w->ce_chunk, V1, C) + 2 * BC + 2 * VC;
    real *p = sq_ctx_alloc(cx, n * sizeof *p, e);
    uint8_t *m = train ? sq_ctx_alloc(cx, TC + VC, e) : NULL;
    if (!p || (train && !m)) {
        sq_ctx_free(cx, p);
        return e->code;
    }
    real **arr[] = {&w->he, &w->hd, &w->s, &w->alpha, &w->ds, &w->r, &w->rnorm, &w->q,
                    &w->Ed, &w->En, &w->enorm, &w->ce, &w->dq, &w->dr, &w->dEn, &w->dEd};
    size_t len[] = {TC, TC, (size_t)T, (size_t)T, (size_t)T, BC, (size_t)B, BC, VC, VC,
                    (size_t)V1, train ? sq_ce_scratch_size(w->ce_chunk, V1, C) : 0,
                    train ? BC : 0, train ? BC : 0, train ? VC : 0, train ? VC : 0};
    for (size_t i = 0; i < sizeof len / sizeof *len; i++) {
        *arr[i] = len[i] ? p : NULL;
        p += len[i];
    }
    w->m_sess = m;
    w->m_item = m ? m + TC : NULL;
    return 0;
}

void R(sq_core_work_free)(R(sq_core_work) *w, const sq_ctx *cx)
{
    sq_ctx_free(cx, w->he);
    sq_ctx_free(cx, w->m_sess);
    memset(w, 0, sizeof *w);
}

/* The alpha layer's w [C] in a parameter (or gradient) block. */
static real *R(alpha_w)(const R(sq_sasrec) *m)
{
    int i = sq_tensors_find(&m->ts, sq_core_tensors[0].name);
    return m->mem + m->ts.off[i];
}

void R(sq_core_encode)(const R(sq_sasrec) *m, R(sq_sasrec_work) *bw, R(sq_core_work) *w,
                       const sq_packed *b, const sq_core_opts *o, int train, uint64_t seed,
                       uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    int T = b->T, B = b->B, C = m->cfg.dim, trm = o->encoder == SQ_CORE_TRM;
    if (trm) { /* s_t = w . o_t */
        R(sq_sasrec_forward)(m, bw, b, train, seed, step);
        R(sq_gemm)(cx, 0, 1, T, 1, C, 1, bw->out, C, R(alpha_w)(m), C, 0, w->s, 1);
    }
    R(sq_embedding_forward)(cx, w->he, m->p.item_emb, b->ids, T, C, 1);
    if (train)
        R(sq_dropout_forward)(cx, w->hd, w->m_sess, w->he, T, C, (real)o->sess_dropout, seed,
                              step, SITE_SESS);
    else
        R(sq_copy)(cx, w->hd, w->he, (size_t)T * C);
    R(sq_attnpool_forward)(cx, w->r, w->alpha, trm ? w->s : NULL, w->hd, b->off, B, C);
    R(sq_l2norm_forward)(cx, w->q, w->rnorm, w->r, B, C, (real)(1 / o->tau), (real)NORM_EPS);
}

void R(sq_core_items)(const R(sq_sasrec) *m, R(sq_core_work) *w, const sq_core_opts *o,
                      int train, uint64_t seed, uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    int V1 = (int)m->cfg.n_items + 1, C = m->cfg.dim;
    const real *E = m->p.item_emb;
    if (train) {
        R(sq_dropout_forward)(cx, w->Ed, w->m_item, E, V1, C, (real)o->item_dropout, seed,
                              step, SITE_ITEM);
        E = w->Ed;
    }
    R(sq_l2norm_forward)(cx, w->En, w->enorm, E, V1, C, 1, (real)NORM_EPS);
}

/* The backward of the encoder from w->dq into g (and, trm, the backbone). */
static void R(encode_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *bw,
                               R(sq_core_work) *w, const sq_packed *b, const sq_core_opts *o,
                               R(sq_sasrec) *g)
{
    const sq_ctx *cx = &m->cx;
    int T = b->T, B = b->B, C = m->cfg.dim, trm = o->encoder == SQ_CORE_TRM;
    size_t TC = (size_t)T * C;
    R(sq_zero)(cx, w->dr, (size_t)B * C);
    R(sq_l2norm_backward)(cx, w->dr, w->dq, w->q, w->rnorm, B, C, (real)(1 / o->tau),
                          (real)NORM_EPS);
    /* d hd into he's buffer (he is spent), then through the session
     * dropout into hd's (hd is spent once the pooling's backward ran) */
    R(sq_zero)(cx, w->he, TC);
    R(sq_attnpool_backward)(cx, w->he, trm ? w->ds : NULL, w->dr, w->alpha, w->hd, b->off, B,
                            C);
    R(sq_dropout_backward_to)(cx, w->hd, w->he, w->m_sess, TC, (real)o->sess_dropout);
    R(sq_embedding_backward)(cx, g->p.item_emb, w->hd, b->ids, T, C, 1);
    if (!trm)
        return;
    /* s = o w^T: dw += ds^T o, do = ds w */
    R(sq_gemm)(cx, 1, 0, 1, C, T, 1, w->ds, 1, bw->out, C, 1, R(alpha_w)(g), C);
    R(sq_gemm)(cx, 0, 0, T, C, 1, 1, w->ds, 1, R(alpha_w)(m), C, 0, bw->dout, C);
    R(sq_sasrec_backward)(m, bw, b, g);
}

double R(sq_core_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *bw, R(sq_core_work) *w,
                       const sq_packed *b, const sq_core_opts *o, uint64_t seed,
                       uint64_t step, R(sq_sasrec) *g, int *count)
{
    const sq_ctx *cx = &m->cx;
    int B = b->B, C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1;
    R(sq_core_encode)(m, bw, w, b, o, 1, seed, step);
    R(sq_core_items)(m, w, o, 1, seed, step);
    if (g) {
        R(sq_zero)(cx, w->dq, (size_t)B * C);
        R(sq_zero)(cx, w->dEn, (size_t)V1 * C);
    }
    /* entry i is sequence i's newest row: its representation is q row i */
    double loss = R(sq_next_item_loss)(cx, o->loss, b, NULL, g ? w->dq : NULL,
                                       g ? w->dEn : NULL, NULL, w->ce, w->q, w->En, NULL, C, V1,
                                       w->ce_chunk, 1, count);
    if (!g || !(loss == loss && loss - loss == 0)) /* the trainer stops on a non-finite loss */
        return loss;
    /* the item table: normalisation, dropout, into E */
    R(sq_zero)(cx, w->dEd, (size_t)V1 * C);
    R(sq_l2norm_backward)(cx, w->dEd, w->dEn, w->En, w->enorm, V1, C, 1, (real)NORM_EPS);
    R(sq_dropout_backward)(cx, g->p.item_emb, w->dEd, w->m_item, (size_t)V1 * C,
                           (real)o->item_dropout);
    R(encode_backward)(m, bw, w, b, o, g);
    return loss;
}

#if !SQ_REAL_IS_F64

typedef struct {
    sq_sasrec_config base; /* first: the backbone's options bind at their offsets */
    int encoder;           /* SQ_CORE_TRM or SQ_CORE_AVE */
    double tau, item_dropout, sess_dropout;
} core_config;

#define OFF(field) offsetof(core_config, field)
static const sq_opt core_opts[] = {
    {.name = "encoder", .key = "core.encoder", .type = SQ_OPT_CHOICE, .offset = OFF(encoder),
     .def = "trm", .choices = "trm|ave", .arg = "E",
     .help = "core: the weights alpha, from the transformer\n(trm, default) or 1/len (ave)"},
    {.name = "temperature", .key = "core.temperature", .type = SQ_OPT_REAL, .offset = OFF(tau),
     .def = "0.07", .lo = 0, .hi = 100, .lo_open = 1, .arg = "X",
     .help = "core: tau of the cosine logits (default 0.07)"},
    {.name = "item-dropout", .key = "core.item_dropout", .type = SQ_OPT_REAL,
     .offset = OFF(item_dropout), .def = "0.2", .lo = 0, .hi = 1, .hi_open = 1, .arg = "P",
     .help = "core: dropout on the item table of the logits\n(default 0.2)"},
    {.name = "sess-dropout", .key = "core.sess_dropout", .type = SQ_OPT_REAL,
     .offset = OFF(sess_dropout), .def = "0.2", .lo = 0, .hi = 1, .hi_open = 1, .arg = "P",
     .help = "core: dropout on the embeddings a session pools\n(default 0.2)"},
    {0},
};
#undef OFF

/* RecBole's CORE.yaml for the backbone: 2 heads, dropout 0.5 (d = 64, 2
 * layers, FFN 256 and n = 50 are the backbone's defaults already). */
static const sq_sasrec_extra core_extra = {
    .opts = core_opts, .model = "core", .defaults = "heads=2\ndropout=0.5\n"};

static sq_core_opts opts_of(const core_config *c)
{
    return (sq_core_opts){c->encoder, c->tau, c->item_dropout, c->sess_dropout, {0, 0}};
}

/* ------------------------------------------------------------------------ */
/* Configs                                                                  */

static void add_tensors(core_config *c)
{
    c->base.extra = sq_core_tensors;
    c->base.n_extra = 1;
}

static int config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    core_config *c = cfg;
    if (sq_sasrec_config_from(&c->base, SQ_BACKBONE_SASREC, given, d->n_items, d->padded_len,
                              &core_extra, e))
        return e->code;
    add_tensors(c);
    return 0;
}

static int config_check(const void *cfg, sq_err *e)
{
    const core_config *c = cfg;
    if (sq_opt_check(core_opts, c, SQ_EX_USAGE, e))
        return e->code;
    return sq_sasrec_config_check(&c->base, e);
}

static int config_write(const void *cfg, sq_modelfile *mf, sq_err *e)
{
    const core_config *c = cfg;
    if (sq_sasrec_config_write(&c->base, mf, e) ||
        sq_opt_write(core_opts, c, sq_modelfile_set_kv, mf, e))
        return e->code;
    return 0;
}

static int config_read(void *cfg, const sq_modelfile *mf, const char *path, sq_err *e)
{
    core_config *c = cfg;
    sq_opt_defaults(core_opts, c);
    if (sq_sasrec_config_read_as(&c->base, mf, path, SQ_BACKBONE_SASREC, e) ||
        sq_opt_apply(core_opts, c, mf->config, 1, SQ_EX_DATA, path, e))
        return e->code;
    add_tensors(c);
    return 0;
}

static int check_step(const void *cfg, const sq_step_opts *o, sq_err *e)
{
    (void)cfg;
    if (sq_loss_check(o, ~(1u << SQ_LOSS_BCE), "core",
                      "it trains softmax cross-entropy over cosine logits (RDM), full or "
                      "sampled (ce, sampled-softmax, gbce)", e))
        return e->code;
    if (sq_target_every_position(o->target))
        return sq_fail(e, SQ_EX_USAGE, "--model core pools one representation per sequence "
                       "(its newest row): use --target last or random, not --target %s",
                       sq_target_name(o->target));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Scoring: q = normalize(sum alpha E[x]) / tau against normalize(E)       */

typedef struct {
    const sq_sasrec *m;  /* owned when loaded from a file */
    sq_sasrec one;       /* m on one thread (a scoring thread's copy) */
    sq_core_opts o;
    int owned;
} core_scorer;

/* The representations q of histories b0, b0 + step, ... into rows of hs. */
static int forward_states(const void *model, const sq_batch *hist, int b0, int step,
                          float *hs, sq_err *e)
{
    const core_scorer *s = model;
    const sq_sasrec *m = &s->one;
    const sq_sasrec_config *c = &m->cfg;
    int N = c->max_len, C = c->dim, rc = 0;
    sq_sasrec_cap cap = {.B = 1, .T = N, .n = 1, .att = (size_t)N * N, .K = 0, .train = 0};
    sq_sasrec_work bw;
    sq_core_work w;
    int *ints = malloc((3 * (size_t)N + 3) * sizeof *ints);
    if (!ints)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    if (sq_sasrec_work_alloc(&bw, m, &cap, e)) {
        free(ints);
        return e->code;
    }
    if (sq_core_work_alloc(&w, &m->cx, N, 1, 0, C, 0, e)) {
        sq_sasrec_work_free(&bw);
        free(ints);
        return e->code;
    }
    for (int b = b0; b < hist->B && !rc; b += step) {
        sq_packed pb;
        if ((rc = sq_packed_one(&pb, ints, hist->items + hist->off[b], hist->len[b], c->max_len,
                                c->n_items, e)) != 0)
            break;
        sq_core_encode(m, &bw, &w, &pb, &s->o, 0, 0, 0);
        sq_copy(&m->cx, hs + (size_t)b * C, w.q, (size_t)C);
    }
    sq_core_work_free(&w, &m->cx);
    sq_sasrec_work_free(&bw);
    free(ints);
    return rc;
}

/* The normalised item table En [V1, C] (and its norms after it) on cx. */
static float *items_normalised(const sq_sasrec *m, size_t extra, sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    int C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1;
    float *En = sq_ctx_alloc(cx, ((size_t)V1 * C + (size_t)V1 + extra) * sizeof *En, e);
    if (En)
        sq_l2norm_forward(cx, En, En + (size_t)V1 * C, m->p.item_emb, V1, C, 1,
                          (float)NORM_EPS);
    return En;
}

/* On a GPU: the histories as one packed batch (the backbone's scoring
 * input), one encoding on the device with the GEMMs batch-invariant (set
 * by the caller, as sasrec_model.c's device_scores), the scores down
 * once. */
static int device_scores(const core_scorer *s, const sq_batch *hist, float *out, sq_err *e)
{
    const sq_sasrec *m = s->m;
    const sq_ctx *cx = &m->cx;
    int B = hist->B, C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1, have_bw = 0, have_w = 0;
    sq_packed pb;
    int *ints = NULL;
    size_t att;
    sq_sasrec_work bw;
    sq_core_work w;
    float *En = NULL;
    int rc = sq_sasrec_scoring_input(&m->cfg, hist, &pb, &ints, &att, e);
    if (!rc && !(rc = sq_packed_stage(cx, &pb, e))) {
        sq_sasrec_cap cap = {.B = pb.B, .T = pb.T, .n = pb.B, .att = att, .K = 0, .train = 0};
        if (!(rc = sq_sasrec_work_alloc(&bw, m, &cap, e)))
            have_bw = 1;
    }
    if (!rc && !(rc = sq_core_work_alloc(&w, cx, pb.T, B, 0, C, 0, e)))
        have_w = 1;
    /* the scores follow the table and its norms in one buffer */
    if (!rc && !(En = items_normalised(m, (size_t)B * V1, e)))
        rc = e->code;
    if (!rc) {
        float *dsc = En + (size_t)V1 * C + (size_t)V1;
        sq_core_encode(m, &bw, &w, &pb, &s->o, 0, 0, 0);
        rc = sq_score_states(cx, w.q, B, En, NULL, C, V1, dsc, e) ||
             sq_scores_out(cx, dsc, hist, V1, out, e) ? e->code : 0;
    }
    sq_ctx_free(cx, En);
    if (have_w)
        sq_core_work_free(&w, cx);
    if (have_bw)
        sq_sasrec_work_free(&bw);
    free(ints);
    return rc;
}

static int scores(sq_model *mm, const sq_batch *hist, float *out, sq_err *e)
{
    const core_scorer *s = mm->impl;
    const sq_sasrec *m = s->m;
    const sq_ctx *cx = &m->cx;
    int B = hist->B, C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1;
    if (B <= 0)
        return 0;
    if (cx->backend != SQ_BACKEND_CPU) {
        sq_ctx_invariant(cx, 1); /* a user's scores whatever the batch (ctx.h) */
        int rc = device_scores(s, hist, out, e);
        sq_ctx_invariant(cx, 0);
        return rc;
    }
    core_scorer one = *s;
    one.one = *m;
    one.one.cx.threads = 1;
    float *En = items_normalised(m, (size_t)B * C, e);
    if (!En)
        return e->code;
    float *hs = En + (size_t)V1 * C + (size_t)V1;
    int rc = sq_states_parallel(forward_states, &one, hist, sq_ctx_threads(cx), hs, e);
    if (!rc)
        rc = sq_score_states(cx, hs, B, En, NULL, C, V1, out, e);
    sq_ctx_free(cx, En);
    return rc;
}

static void scorer_free(sq_model *mm)
{
    core_scorer *s = mm->impl;
    if (s) {
        if (s->owned) {
            sq_sasrec_free((sq_sasrec *)s->m);
            free((sq_sasrec *)s->m);
        }
        free(s);
    }
    mm->impl = NULL;
}

static int load(sq_model *mm, sq_modelfile *mf, const sq_ctx *cx, sq_err *e)
{
    core_config c;
    char name[32] = "model";
    sq_modelfile_get(mf, "model", name, sizeof name);
    if (config_read(&c, mf, name, e))
        return e->code;
    sq_sasrec *m = malloc(sizeof *m);
    core_scorer *s = calloc(1, sizeof *s);
    if (!m || !s) {
        free(m);
        free(s);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    if (sq_sasrec_alloc_on(m, &c.base, cx, e) || sq_sasrec_get_tensors(m, mf, name, e)) {
        sq_sasrec_free(m);
        free(m);
        free(s);
        return e->code;
    }
    *s = (core_scorer){.m = m, .o = opts_of(&c), .owned = 1};
    mm->n_items = c.base.n_items;
    mm->impl = s;
    mm->scores = scores;
    mm->free_impl = scorer_free;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Training                                                                 */

/* The trainer's net: the backbone's on CORE's config (sasrec.h
 * sq_backbone_net); extra holds the validation view (a core_scorer that
 * borrows the backbone). */
static const sq_model_def *backbone(void) { return &sq_model_sasrec; }

static int net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e)
{
    return sq_backbone_net_alloc(n, cfg, sizeof(core_config), sizeof(core_scorer), cx, e);
}

static int batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                   sq_err *e)
{
    const core_config *c = cfg;
    if (sq_batcher_init(bt, s, o->target, c->base.max_len, o->batch, 0, o->seed, e))
        return e->code;
    return sq_loss_batcher_negatives(bt, o, e);
}

typedef struct {
    void *inner;
    sq_core_work w;
    const sq_ctx *cx;
} core_work;

static void work_free(void *work)
{
    core_work *w = work;
    if (!w)
        return;
    backbone()->work_free(w->inner);
    if (w->cx)
        sq_core_work_free(&w->w, w->cx);
    free(w);
}

static int work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e)
{
    const sq_backbone_net *p = n->impl;
    const core_config *c = n->cfg;
    core_work *w = calloc(1, sizeof *w);
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *work = w;
    if (backbone()->work_alloc(&p->inner, bt, &w->inner, e))
        return e->code;
    if (sq_core_work_alloc(&w->w, n->cx, bt->cap_T, bt->batch, (int)c->base.n_items + 1,
                           c->base.dim, 1, e))
        return e->code;
    w->cx = n->cx;
    return 0;
}

static double step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                   uint64_t t, int *count)
{
    sq_backbone_net *p = n->impl;
    core_work *cw = work;
    sq_core_opts co = opts_of(n->cfg);
    co.loss = sq_loss_step(o);
    return sq_core_loss(sq_sasrec_net_model(&p->inner), sq_sasrec_net_work(cw->inner), &cw->w,
                        b, &co, o->seed, t, sq_sasrec_net_grads(&p->inner), count);
}

static void view(sq_model *out, const sq_net *n)
{
    sq_backbone_net *p = n->impl;
    const core_config *c = n->cfg;
    core_scorer *v = p->extra;
    *v = (core_scorer){.m = sq_sasrec_net_model(&p->inner), .o = opts_of(c)};
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "core");
    out->n_items = c->base.n_items;
    out->impl = v;
    out->scores = scores;
}

/* --device cuda: every op of CORE's step has a CUDA twin (k_core.cu: the
 * normalisation and the pooling); the backbone's attention kind must have
 * its kernels. */
static int gpu_check(const void *cfg, sq_err *e)
{
    const core_config *c = cfg;
    return backbone()->gpu_check(&c->base, e);
}

static const sq_opt *more_opts(int i)
{
    /* the backbone's options, then those of every attention kind */
    return i == 0 ? backbone()->opts : backbone()->more_opts(i - 1);
}

const sq_model_def sq_model_core = {
    .name = "core",
    .summary = "CORE: input embeddings pooled by transformer weights, cosine logits",
    .opts = core_opts, .more_opts = more_opts, .cfg_size = sizeof(core_config),
    .config = config, .config_check = config_check, .config_write = config_write,
    .config_read = config_read, .load = load, .check_step = check_step,
    .net_alloc = net_alloc, .net_free = sq_backbone_net_free, .net_init = sq_backbone_net_init,
    .init_from = sq_backbone_init_from, .batcher = batcher, .work_alloc = work_alloc,
    .work_free = work_free, .step = step, .view = view, .gpu_check = gpu_check, .graphs = 1,
    .train_defaults = "train.target=last\n",
};

#endif
