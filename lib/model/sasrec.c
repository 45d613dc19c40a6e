/* sasrec.c - SASRec and BERT4Rec forward, loss and backward on the packed
 * ops, with any token mixer (the models and their conventions: sasrec.h;
 * the mixers: mixer.h). Two block paths: the TF SASRec's pre-LN one, and
 * RecBole's post-LN one that BERT4Rec and SASRec --block recbole share. The configs, model files, scoring and attention
 * maps are sasrec_model.c.
 *
 * Written over `real` and compiled twice (float, and double as _f64; see
 * real.h). Every array is touched through ops, on buffers from the model's
 * context. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "sasrec.h"
#include "ops.h"
#include "real.h"

#include <stdlib.h>
#include <string.h>

/* Dropout sites: 0 for the embedding, then three per block. */
#define SITE_EMB 0
#define SITE(l, which) (1 + 3 * (uint64_t)(l) + (which))

static int is_bert(const sq_sasrec_config *c) { return c->backbone == SQ_BACKBONE_BERT4REC; }
static int post_ln(const sq_sasrec_config *c) { return sq_sasrec_post_ln(c); }

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

static void R(point_params)(R(sq_sasrec) *m)
{
    for (int i = 0; i < SQ_SASREC_NT; i++)
        m->p.t[i] = m->mem + m->ts.off[i];
    for (int j = 0; j < SQ_MIXER_MAXT; j++)
        m->p.mix[j] = SQ_SASREC_NT + j < m->ts.n ? m->mem + m->ts.off[SQ_SASREC_NT + j] : NULL;
}

int R(sq_sasrec_alloc_on)(R(sq_sasrec) *m, const sq_sasrec_config *c, const sq_ctx *cx,
                          sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (sq_sasrec_config_check(c, e) || sq_sasrec_tensor_set(c, &m->ts, e))
        return e->code;
    m->cfg = *c;
    m->cx = *cx;
    m->n = m->ts.total;
    m->mem = sq_ctx_alloc(cx, m->n * sizeof *m->mem, e);
    if (!m->mem)
        return e->code;
    R(point_params)(m);
    return 0;
}

int R(sq_sasrec_alloc)(R(sq_sasrec) *m, const sq_sasrec_config *c, sq_err *e)
{
    sq_ctx cpu = sq_ctx_cpu();
    return R(sq_sasrec_alloc_on)(m, c, &cpu, e);
}

void R(sq_sasrec_free)(R(sq_sasrec) *m)
{
    if (m->mem && !m->borrowed)
        sq_ctx_free(&m->cx, m->mem);
    memset(m, 0, sizeof *m);
}

void R(sq_sasrec_borrow)(R(sq_sasrec) *m, real *mem)
{
    if (m->mem && !m->borrowed)
        sq_ctx_free(&m->cx, m->mem);
    m->mem = mem;
    m->borrowed = 1;
    R(point_params)(m);
}

/* The mixer's truncated-normal tensors (FPARec's R, R1, R2). */
static double R(trunc_sd)(const void *ctx, const sq_tensor_set *s, int i)
{
    const sq_sasrec_config *c = ctx;
    sq_mixer_env env = sq_sasrec_env(c);
    return env.self->trunc_sd ? env.self->trunc_sd(&env, s->desc[i]->name) : 0.01;
}

void R(sq_sasrec_init_weights)(R(sq_sasrec) *m, uint64_t seed)
{
    const sq_sasrec_config *c = &m->cfg;
    sq_init_rule rule = {.xavier = !post_ln(c), .sd = 0.02, .trunc_sd = R(trunc_sd),
                         .ctx = c};
    /* the seeded generator runs on the host (uploaded on a GPU) */
    R(sq_tensors_init_on)(&m->cx, &m->ts, m->mem, &rule, seed);
    R(sq_zero)(&m->cx, m->p.item_emb, (size_t)c->dim); /* the padding row */
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Carves the workspace out of base (NULL: only measures); returns bytes. */
static size_t R(carve)(R(sq_sasrec_work) *w, const sq_sasrec_config *c, char *base)
{
    size_t at = 0;
    size_t T = (size_t)w->cap.T, L = (size_t)c->n_layers, C = (size_t)c->dim;
    size_t F = (size_t)c->ffn, TC = T * C, TF = T * F, n = (size_t)w->cap.n;
    size_t V1 = (size_t)c->n_items + 1;
    int train = w->cap.train;
    /* pre: the pre-LN arrays (FFN dropout, final LN); post: the embedding
     * LN; hb: BERT4Rec's head */
    size_t pre = post_ln(c) ? 0 : 1, post = 1 - pre, hb = is_bert(c) ? 1 : 0;
#define TAKE(ptr, type, count) do { \
        size_t o_ = at; \
        at += align64((size_t)(count) * sizeof(type)); \
        if (base) (ptr) = (type *)(void *)(base + o_); \
    } while (0)
    TAKE(w->emb, real, TC);
    TAKE(w->embn, real, post * TC);
    TAKE(w->embln_mean, real, post * T);
    TAKE(w->embln_rstd, real, post * T);
    TAKE(w->x, real, (L + 1) * TC);
    TAKE(w->ln1, real, L * TC);
    TAKE(w->ln1_mean, real, L * T);
    TAKE(w->ln1_rstd, real, L * T);
    TAKE(w->proj, real, L * TC);
    TAKE(w->xmid, real, L * TC);
    TAKE(w->cache, real, L * w->cache_n);
    TAKE(w->scratch, real, w->scratch_n);
    TAKE(w->ln2, real, L * TC);
    TAKE(w->ln2_mean, real, L * T);
    TAKE(w->ln2_rstd, real, L * T);
    TAKE(w->h1, real, L * TF);
    TAKE(w->r, real, post * L * TF); /* post-LN's GELU; pre-LN's ReLU is fused */
    TAKE(w->rd, real, pre * L * TF);
    TAKE(w->h2, real, L * TC);
    TAKE(w->out, real, pre * TC);
    TAKE(w->lnf_mean, real, pre * T);
    TAKE(w->lnf_rstd, real, pre * T);
    TAKE(w->hx, real, hb * n * C);
    TAKE(w->hd, real, hb * n * C);
    TAKE(w->hg, real, hb * n * C);
    TAKE(w->hln, real, hb * n * C);
    TAKE(w->hln_mean, real, hb * n);
    TAKE(w->hln_rstd, real, hb * n);
    TAKE(w->m_emb, uint8_t, TC);
    TAKE(w->m_att, uint8_t, L * TC);
    TAKE(w->m_ffn1, uint8_t, pre * L * TF);
    TAKE(w->m_ffn2, uint8_t, L * TC);
    if (train) {
        TAKE(w->ce, real, sq_ce_scratch_size(w->ce_chunk, (int)V1, (int)C));
        TAKE(w->dout, real, TC);
        TAKE(w->dx, real, TC);
        TAKE(w->dy, real, TC);
        TAKE(w->dxmid, real, TC);
        TAKE(w->dproj, real, TC);
        TAKE(w->dh2, real, TC);
        TAKE(w->demb, real, TC);
        TAKE(w->dF1, real, TF);
        TAKE(w->dF3, real, TF);
        TAKE(w->dhx, real, hb * n * C);
        TAKE(w->dhd, real, hb * n * C);
        TAKE(w->dhg, real, hb * n * C);
    }
#undef TAKE
    if (base && post) /* the states are the last block's output */
        w->out = w->x + L * TC;
    return at;
}

int R(sq_sasrec_work_alloc)(R(sq_sasrec_work) *w, const R(sq_sasrec) *m,
                            const sq_sasrec_cap *cap, sq_err *e)
{
    const sq_sasrec_config *c = &m->cfg;
    memset(w, 0, sizeof *w);
    w->cap = *cap;
    w->cx = m->cx;
    if (w->cap.T < 1)
        w->cap.T = 1;
    if (w->cap.att < 1)
        w->cap.att = 1;
    w->ce_chunk = sq_ce_chunk_on(&m->cx, cap->n, (int)c->n_items + 1);
    w->env = sq_sasrec_env(c);
    const sq_mixer *mx = w->env.self;
    sq_mixer_cap mc = {.B = w->cap.B > 0 ? w->cap.B : 1, .T = w->cap.T, .att = w->cap.att,
                       .train = w->cap.train, .gpu = w->cx.backend != SQ_BACKEND_CPU};
    w->cache_n = mx->cache_size(&w->env, &mc);
    w->scratch_n = mx->scratch_size(&w->env, &mc);
    if (w->cache_n == (size_t)-1 || w->scratch_n == (size_t)-1)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    size_t bytes = R(carve)(w, c, NULL);
    w->mem = sq_ctx_alloc(&w->cx, bytes, e);
    if (!w->mem)
        return e->code;
    R(carve)(w, c, w->mem);
    return 0;
}

void R(sq_sasrec_work_free)(R(sq_sasrec_work) *w)
{
    if (w->mem)
        sq_ctx_free(&w->cx, w->mem);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------------------ */
/* The mixer of block l                                                     */

/* The mixer's view of layer l: its slice of each tensor (and gradient),
 * its cache, the shared scratch. */
void R(sq_sasrec_mix_args)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                        const R(sq_sasrec) *g, int l, R(sq_mix_args) *a)
{
    memset(a, 0, sizeof *a);
    w->env = sq_sasrec_env(&m->cfg);
    a->cx = &m->cx;
    a->env = &w->env;
    a->b = b;
    a->cache = w->cache + l * w->cache_n;
    a->scratch = w->scratch;
    a->cap_T = w->cap.T;
    a->train = w->cap.train;
    size_t L = (size_t)m->cfg.n_layers;
    for (int j = 0; j < SQ_MIXER_MAXT && SQ_SASREC_NT + j < m->ts.n; j++) {
        size_t per = m->ts.size[SQ_SASREC_NT + j] / L;
        a->P[j] = m->p.mix[j] + l * per;
        a->G[j] = g ? g->p.mix[j] + l * per : NULL;
    }
}

/* proj[l] = MIX(qin, kvin). */
static void R(mix_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                           int l, const real *qin, const real *kvin)
{
    R(sq_mix_args) a;
    R(sq_sasrec_mix_args)(m, w, b, NULL, l, &a);
#if SQ_REAL_IS_F64
    a.env->self->forward_f64(&a, w->proj + l * (size_t)w->cap.T * m->cfg.dim, qin, kvin);
#else
    a.env->self->forward(&a, w->proj + l * (size_t)w->cap.T * m->cfg.dim, qin, kvin);
#endif
}

/* Back through proj[l] = MIX(qin, kvin) from w->dproj, adding into dqin
 * and dkvin (possibly the same buffer) and g. */
static void R(mix_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                            R(sq_sasrec) *g, int l, const real *qin, const real *kvin,
                            real *dqin, real *dkvin)
{
    R(sq_mix_args) a;
    R(sq_sasrec_mix_args)(m, w, b, g, l, &a);
    const real *proj = w->proj + l * (size_t)w->cap.T * m->cfg.dim;
#if SQ_REAL_IS_F64
    a.env->self->backward_f64(&a, proj, w->dproj, qin, kvin, dqin, dkvin);
#else
    a.env->self->backward(&a, proj, w->dproj, qin, kvin, dqin, dkvin);
#endif
}
/* ------------------------------------------------------------------------ */
/* Forward                                                                  */

/* The embedding rows of batch b into x[0]: pre-LN (the TF SASRec)
 * E*sqrt(C) + P, post-LN LNe(E + P); then dropout. */
static void R(embed_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                             real pd, uint64_t seed, uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int T = b->T, C = c->dim;
    const real *e = w->emb;
    R(sq_embedding_forward)(cx, w->emb, p->item_emb, b->ids, T, C,
                            post_ln(c) ? (real)1 : r_sqrt((real)C));
    R(sq_posemb_forward)(cx, w->emb, w->emb, p->pos_emb, b->pos, T, C);
    if (post_ln(c)) {
        R(sq_layernorm_forward)(cx, w->embn, w->embln_mean, w->embln_rstd, w->emb, p->embln_w,
                                p->embln_b, T, C, (real)c->ln_eps);
        e = w->embn;
    }
    R(sq_dropout_forward)(cx, w->x, w->m_emb, e, T, C, pd, seed, step, SITE_EMB);
}

/* Block l up to its mixer's output proj[l], on all T rows: pre-LN
 * ln1 = LN1(x), proj = MIX(ln1, x); post-LN proj = MIX(x, x). */
static void R(block_mix)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b, int l)
{
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int T = b->T, C = c->dim;
    size_t sTC = (size_t)w->cap.T * C, sT = (size_t)w->cap.T, lc = (size_t)l * C;
    real *x = w->x + l * sTC, *ln1 = w->ln1 + l * sTC;
    if (post_ln(c)) {
        R(mix_forward)(m, w, b, l, x, x);
        return;
    }
    R(sq_layernorm_forward)(&m->cx, ln1, w->ln1_mean + l * sT, w->ln1_rstd + l * sT, x,
                            p->ln1_w + lc, p->ln1_b + lc, T, C, (real)c->ln_eps);
    R(mix_forward)(m, w, b, l, ln1, x);
}

/* The rest of block l, row by row, on rows [0, T) of proj[l] and of its
 * residual input (pre-LN ln1[l], post-LN x[l]) into x[l+1]. Pre-LN (TF
 * SASRec): xmid = ln1 + dropout(proj), ln2 = LN2(xmid), x' = ln2 +
 * dropout(W2 dropout(relu(W1 ln2 + b1)) + b2). Post-LN (RecBole):
 * ln1 = LN1(x + dropout(proj)), x' = LN2(ln1 + dropout(W2 gelu(W1 ln1 + b1)
 * + b2)). */
static void R(block_tail)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, int l, int T, real pd,
                          uint64_t seed, uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int C = c->dim, F = c->ffn, post = post_ln(c);
    size_t TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
    real eps = (real)c->ln_eps;
    real *x = w->x + l * sTC, *xn = w->x + (l + 1) * sTC;
    real *ln1 = w->ln1 + l * sTC, *proj = w->proj + l * sTC;
    real *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
    real *h1 = w->h1 + l * sTF, *r = w->r + l * sTF, *rd = w->rd + l * sTF;
    real *h2 = w->h2 + l * sTC;

    /* xmid = (post ? x : ln1) + dropout(proj), the dropped proj never written */
    R(sq_dropout_add_forward)(cx, xmid, w->m_att + l * sTC, post ? x : ln1, proj, T, C, pd, seed,
                              step, SITE(l, 0));
    /* the FFN's input: pre-LN ln2 = LN2(xmid), post-LN ln1 = LN1(xmid) */
    real *fin = post ? ln1 : ln2;
    R(sq_layernorm_forward)(cx, fin, (post ? w->ln1_mean : w->ln2_mean) + l * sT,
                            (post ? w->ln1_rstd : w->ln2_rstd) + l * sT, xmid,
                            (post ? p->ln1_w : p->ln2_w) + lc, (post ? p->ln1_b : p->ln2_b) + lc,
                            T, C, eps);
    R(sq_linear_forward)(cx, h1, fin, p->w1 + lfc, p->b1 + (size_t)l * F, T, C, F);
    if (post) {
        R(sq_gelu_forward)(cx, r, h1, TF);
        R(sq_linear_forward)(cx, h2, r, p->w2 + lfc, p->b2 + lc, T, F, C);
    } else {
        /* rd = dropout(relu(h1)), r never written */
        R(sq_relu_dropout_forward)(cx, rd, w->m_ffn1 + l * sTF, h1, T, F, pd, seed, step,
                                   SITE(l, 1));
        R(sq_linear_forward)(cx, h2, rd, p->w2 + lfc, p->b2 + lc, T, F, C);
    }
    /* post: ln2 = ln1 + dropout(h2), x' = LN2(ln2); pre: x' = ln2 + dropout(h2) */
    R(sq_dropout_add_forward)(cx, post ? ln2 : xn, w->m_ffn2 + l * sTC, post ? ln1 : ln2, h2, T,
                              C, pd, seed, step, SITE(l, 2));
    if (post)
        R(sq_layernorm_forward)(cx, xn, w->ln2_mean + l * sT, w->ln2_rstd + l * sT, ln2,
                                p->ln2_w + lc, p->ln2_b + lc, T, C, eps);
}

/* Pre-LN: out = LNf(x[L]) on rows [0, T). Post-LN: out is x[L]. */
static void R(final_ln)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, int T)
{
    const sq_sasrec_config *c = &m->cfg;
    if (post_ln(c))
        return;
    R(sq_layernorm_forward)(&m->cx, w->out, w->lnf_mean, w->lnf_rstd,
                            w->x + (size_t)c->n_layers * w->cap.T * c->dim, m->p.lnf_w,
                            m->p.lnf_b, T, c->dim, (real)c->ln_eps);
}

void R(sq_sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                          const sq_packed *b, int train, uint64_t seed,
                          uint64_t step)
{
    real pd = train ? (real)m->cfg.dropout : (real)0;
    R(embed_forward)(m, w, b, pd, seed, step);
    for (int l = 0; l < m->cfg.n_layers; l++) {
        R(block_mix)(m, w, b, l);
        R(block_tail)(m, w, l, b->T, pd, seed, step);
    }
    R(final_ln)(m, w, b->T);
}

/* Rows rows[0, n) of a [T, C] array moved to rows [0, n), in order (in
 * place: rows[i] >= i, so no row is read after it is overwritten). */
static void R(compact_rows)(real *a, const int *rows, int n, int C)
{
    for (int i = 0; i < n; i++)
        if (rows[i] != i)
            memmove(a + (size_t)i * C, a + (size_t)rows[i] * C, (size_t)C * sizeof *a);
}

int R(sq_sasrec_forward_rows)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                              const int *rows, int n)
{
    const sq_sasrec_config *c = &m->cfg;
    int L = c->n_layers, C = c->dim;
    for (int i = 0; i < n; i++)
        if (rows[i] < i || (i && rows[i] <= rows[i - 1]) || rows[i] >= b->T)
            return -1;
    if (L < 1)
        return -1;
    R(embed_forward)(m, w, b, 0, 0, 0);
    for (int l = 0; l < L - 1; l++) {
        R(block_mix)(m, w, b, l);
        R(block_tail)(m, w, l, b->T, 0, 0, 0);
    }
    /* the last block: its mixer on every row (the keys and values of the
     * rows wanted), the rest on the rows wanted alone */
    int l = L - 1;
    size_t sTC = (size_t)w->cap.T * C;
    R(block_mix)(m, w, b, l);
    R(compact_rows)(w->proj + l * sTC, rows, n, C);
    R(compact_rows)((post_ln(c) ? w->x : w->ln1) + l * sTC, rows, n, C);
    R(block_tail)(m, w, l, n, 0, 0, 0);
    R(final_ln)(m, w, n);
    return 0;
}

/* BERT4Rec's output head on n rows of the states x[L] (rows NULL: row i):
 * hln = LNh(gelu(Wh x[rows] + bh)). */
void R(sq_sasrec_head)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const int *rows,
                            int n)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int C = c->dim;
    const real *h = w->x + (size_t)c->n_layers * w->cap.T * C;
    R(sq_gather_rows)(cx, w->hx, h, rows, n, C);
    R(sq_linear_forward)(cx, w->hd, w->hx, p->head_w, p->head_b, n, C, C);
    R(sq_gelu_forward)(cx, w->hg, w->hd, (size_t)n * C);
    R(sq_layernorm_forward)(cx, w->hln, w->hln_mean, w->hln_rstd, w->hg, p->headln_w,
                            p->headln_b, n, C, (real)c->ln_eps);
}

/* ------------------------------------------------------------------------ */
/* Loss                                                                     */

/* BERT4Rec: head, then the cross-entropy with the output bias riding along
 * as an extra column: (hln, 1) . (E[i], ob[i]) = hln . E[i] + ob[i]. */
static double R(bert_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                           sq_loss_spec loss, R(sq_sasrec) *g, int *count)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int C = c->dim, V1 = (int)c->n_items + 1, n = b->n, T = b->T;
    size_t nc = (size_t)n * C;
    R(sq_sasrec_head)(m, w, b->rows, n);
    if (g)
        R(sq_zero)(cx, w->dhx, nc); /* d hln first */
    R(sq_sasrec_params) *gp = g ? &g->p : NULL;
    double L = R(sq_next_item_loss)(cx, loss, b, NULL, g ? w->dhx : NULL,
                                    g ? gp->item_emb : NULL, g ? gp->out_b : NULL, w->ce, w->hln,
                                    p->item_emb, p->out_b, C, V1, w->ce_chunk, 1, count);
    if (!g)
        return L;
    /* back through hln = LNh(gelu(Wh hx + bh)) */
    R(sq_layernorm_backward_to)(cx, w->dhg, gp->headln_w, gp->headln_b, w->dhx, w->hg,
                                p->headln_w, w->hln_mean, w->hln_rstd, n, C);
    R(sq_gelu_backward_to)(cx, w->dhd, w->dhg, w->hd, nc);
    R(sq_linear_backward_to)(cx, w->dhx, gp->head_w, gp->head_b, w->dhd, w->hx, p->head_w, n,
                             C, C);
    R(sq_zero)(cx, w->dout, (size_t)T * C);
    R(sq_scatter_add_rows)(cx, w->dout, w->dhx, b->rows, n, C);
    return L;
}

double R(sq_sasrec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                         const sq_packed *b, sq_loss_spec loss, R(sq_sasrec) *g,
                         int *count)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    if (is_bert(c))
        return R(bert_loss)(m, w, b, loss, g, count);
    int C = c->dim, V1 = (int)c->n_items + 1;
    real *dh = g ? w->dout : NULL, *dE = g ? g->p.item_emb : NULL;
    if (dh)
        R(sq_zero)(cx, dh, (size_t)b->T * C);
    return R(sq_next_item_loss)(cx, loss, b, b->rows, dh, dE, NULL, w->ce, w->out,
                                m->p.item_emb, NULL, C, V1, w->ce_chunk, 1, count);
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                 */

static void R(sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                               const sq_packed *b, R(sq_sasrec) *g)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    R(sq_sasrec_params) *gp = &g->p;
    int T = b->T, C = c->dim, F = c->ffn, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    real pd = (real)c->dropout;

    /* h = LNf(x[L]) */
    R(sq_layernorm_backward_to)(cx, w->dx, gp->lnf_w, gp->lnf_b, w->dout,
                                w->x + (size_t)L * sTC, p->lnf_w, w->lnf_mean, w->lnf_rstd, T,
                                C);
    for (int l = L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
        const real *x = w->x + l * sTC, *ln1 = w->ln1 + l * sTC;
        const real *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        const real *h1 = w->h1 + l * sTF, *rd = w->rd + l * sTF;

        /* x[l+1] = y + dropout(h2),  h2 = W2 rd + b2; d y starts as d x[l+1]
         * (the residual), so dx serves as dy (no copy), read by the dropout
         * before the FFN's backward adds to it */
        real *dy = w->dx;
        R(sq_dropout_backward_to)(cx, w->dh2, w->dx, w->m_ffn2 + l * sTC, TC, pd);
        R(sq_linear_backward_to)(cx, w->dF1, gp->w2 + lfc, gp->b2 + lc, w->dh2, rd,
                                 p->w2 + lfc, T, F, C);
        /* rd = dropout(relu(h1)),  h1 = W1 y + b1 */
        R(sq_relu_dropout_backward_to)(cx, w->dF3, w->dF1, w->m_ffn1 + l * sTF, h1, TF, pd);
        R(sq_linear_backward)(cx, dy, gp->w1 + lfc, gp->b1 + (size_t)l * F, w->dF3, ln2,
                              p->w1 + lfc, T, C, F);
        /* y = LN2(xmid) */
        R(sq_layernorm_backward_to)(cx, w->dxmid, gp->ln2_w + lc, gp->ln2_b + lc, dy, xmid,
                                    p->ln2_w + lc, w->ln2_mean + l * sT,
                                    w->ln2_rstd + l * sT, T, C);
        /* xmid = q + dropout(proj),  proj = MIX(q, x),  q = LN1(x): d q
         * starts as d xmid, so dxmid serves as dln1 (no copy), read by the
         * dropout before the mixer's backward adds to it */
        real *dln1 = w->dxmid;
        R(sq_dropout_backward_to)(cx, w->dproj, w->dxmid, w->m_att + l * sTC, TC, pd);
        R(sq_zero)(cx, w->dx, TC);
        R(mix_backward)(m, w, b, g, l, ln1, x, dln1, w->dx);
        R(sq_layernorm_backward)(cx, w->dx, gp->ln1_w + lc, gp->ln1_b + lc, dln1, x,
                                 p->ln1_w + lc, w->ln1_mean + l * sT, w->ln1_rstd + l * sT,
                                 T, C);
    }
    /* x0 = dropout(E[ids] sqrt(C) + P[pos]): the sum's two inputs get
     * demb itself (no copy) */
    R(sq_dropout_backward_to)(cx, w->demb, w->dx, w->m_emb, TC, pd);
    R(sq_posemb_backward)(cx, NULL, gp->pos_emb, w->demb, b->pos, T, C);
    R(sq_embedding_backward)(cx, gp->item_emb, w->demb, b->ids, T, C, r_sqrt((real)C));
}

/* Same steps as sasrec_backward in another order: post-LN blocks, GELU and
 * no dropout inside the FFN. Kept as its own function so each backward reads
 * as its forward in reverse. From w->dout = d loss / d x[L] (BERT4Rec: the
 * head's backward set it; --block recbole: the loss). */
static void R(postln_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                               const sq_packed *b, R(sq_sasrec) *g)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    R(sq_sasrec_params) *gp = &g->p;
    int T = b->T, C = c->dim, F = c->ffn, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    real pd = (real)c->dropout;

    for (int l = L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
        const real *x = w->x + l * sTC, *ln1 = w->ln1 + l * sTC;
        const real *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        const real *h1 = w->h1 + l * sTF, *r = w->r + l * sTF;
        /* d x[l+1]: the loss's dout for the last block (read in place, not
         * copied into dx), then what block l+1's backward left in dx */
        const real *dxn = l == L - 1 ? w->dout : w->dx;

        /* x[l+1] = LN2(s2), s2 (in ln2) = x1 + dropout(h2); d x1 starts as
         * d s2, so dy serves as both (no copy), read by the dropout before
         * the FFN's backward adds to it */
        real *dln1 = w->dy;
        R(sq_layernorm_backward_to)(cx, w->dy, gp->ln2_w + lc, gp->ln2_b + lc, dxn, ln2,
                                    p->ln2_w + lc, w->ln2_mean + l * sT,
                                    w->ln2_rstd + l * sT, T, C);
        R(sq_dropout_backward_to)(cx, w->dh2, w->dy, w->m_ffn2 + l * sTC, TC, pd);
        /* h2 = W2 gelu(h1) + b2, h1 = W1 x1 + b1 */
        R(sq_linear_backward_to)(cx, w->dF1, gp->w2 + lfc, gp->b2 + lc, w->dh2, r,
                                 p->w2 + lfc, T, F, C);
        R(sq_gelu_backward_to)(cx, w->dF3, w->dF1, h1, TF);
        R(sq_linear_backward)(cx, dln1, gp->w1 + lfc, gp->b1 + (size_t)l * F, w->dF3, ln1,
                              p->w1 + lfc, T, C, F);
        /* x1 (in ln1) = LN1(xmid), xmid = x + dropout(MIX(x, x)): d x
         * starts as d xmid, so it is made in dx (no copy), read by the
         * dropout before the mixer's backward adds to it */
        R(sq_layernorm_backward_to)(cx, w->dx, gp->ln1_w + lc, gp->ln1_b + lc, dln1, xmid,
                                    p->ln1_w + lc, w->ln1_mean + l * sT,
                                    w->ln1_rstd + l * sT, T, C);
        R(sq_dropout_backward_to)(cx, w->dproj, w->dx, w->m_att + l * sTC, TC, pd);
        R(mix_backward)(m, w, b, g, l, x, x, w->dx, w->dx);
    }
    /* x0 = dropout(LNe(E[ids] + P[pos])) */
    R(sq_dropout_backward_to)(cx, w->dy, w->dx, w->m_emb, TC, pd);
    R(sq_layernorm_backward_to)(cx, w->demb, gp->embln_w, gp->embln_b, w->dy, w->emb,
                                p->embln_w, w->embln_mean, w->embln_rstd, T, C);
    R(sq_posemb_backward)(cx, NULL, gp->pos_emb, w->demb, b->pos, T, C);
    R(sq_embedding_backward)(cx, gp->item_emb, w->demb, b->ids, T, C, 1);
}

void R(sq_sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                           const sq_packed *b, R(sq_sasrec) *g)
{
    if (post_ln(&m->cfg))
        R(postln_backward)(m, w, b, g);
    else
        R(sasrec_backward)(m, w, b, g);
}
