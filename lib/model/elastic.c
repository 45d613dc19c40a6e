/* elastic.c - ELASTIC's forward, loss and backward on the packed ops (the
 * model and its decisions: elastic.h; options, model files and scoring:
 * elastic_model.c).
 *
 * Written over `real` and compiled twice (float, and double as _f64; see
 * real.h). Every array is touched through ops, on buffers from the model's
 * context; the host ints (query-network groups, retrieved experts) are
 * planned per batch on the host. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "elastic.h"
#include "attn_cross.h"
#include "ops.h"
#include "pkm.h"
#include "real.h"

#include <stdlib.h>
#include <string.h>

/* Dropout sites: 0 for the embedding, then four per layer. */
#define SITE_EMB 0
#define SITE(l, which) (1 + 4 * (uint64_t)(l) + (which))

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

int R(sq_elastic_alloc_on)(R(sq_elastic) *m, const sq_elastic_config *c, const sq_ctx *cx,
                           sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (sq_elastic_config_check(c, e) || sq_elastic_tensor_set(c, &m->ts, e))
        return e->code;
    m->cfg = *c;
    m->cx = *cx;
    m->n = m->ts.total;
    m->mem = sq_ctx_alloc(cx, (m->n ? m->n : 1) * sizeof *m->mem, e);
    if (!m->mem)
        return e->code;
    for (int i = 0; i < SQ_ELASTIC_NT; i++)
        m->p.t[i] = m->mem + m->ts.off[i];
    return 0;
}

void R(sq_elastic_free)(R(sq_elastic) *m)
{
    if (m->mem)
        sq_ctx_free(&m->cx, m->mem);
    memset(m, 0, sizeof *m);
}

void R(sq_elastic_init_weights)(R(sq_elastic) *m, uint64_t seed)
{
    sq_init_rule rule = {.xavier = 1, .sd = 0.02};
    /* the seeded generator runs on the host (uploaded on a GPU) */
    R(sq_tensors_init_on)(&m->cx, &m->ts, m->mem, &rule, seed);
    R(sq_zero)(&m->cx, m->p.item_emb, (size_t)m->cfg.dim); /* the padding row */
}

/* The parameters of one sublayer of layer l (pointers into a block). */
typedef struct {
    real *lnq_w, *lnq_b, *lnk_w, *lnk_b, *wq, *wkv, *wo, *bo;
} R(xatt_p);
typedef struct {
    real *ln_w, *ln_b, *w1, *b1, *w2, *b2;
} R(ffn_p);

static R(xatt_p) R(agg_p)(const R(sq_elastic_params) *p, int l, int C)
{
    size_t c = (size_t)l * C, cc = c * C;
    R(xatt_p) x = {p->ag_lnq_w + c, p->ag_lnq_b + c, p->ag_lnk_w + c, p->ag_lnk_b + c,
                   p->ag_q + cc, p->ag_kv + 2 * cc, p->ag_o + cc, p->ag_ob + c};
    return x;
}

static R(xatt_p) R(dis_p)(const R(sq_elastic_params) *p, int l, int C)
{
    size_t c = (size_t)l * C, cc = c * C;
    R(xatt_p) x = {p->dp_lnq_w + c, p->dp_lnq_b + c, p->dp_lnk_w + c, p->dp_lnk_b + c,
                   p->dp_q + cc, p->dp_kv + 2 * cc, p->dp_o + cc, p->dp_ob + c};
    return x;
}

static R(ffn_p) R(pffn_p)(const R(sq_elastic_params) *p, int l, int C, int F)
{
    size_t c = (size_t)l * C, fc = c * F;
    R(ffn_p) x = {p->pf_ln_w + c, p->pf_ln_b + c, p->pf_w1 + fc, p->pf_b1 + (size_t)l * F,
                  p->pf_w2 + fc, p->pf_b2 + c};
    return x;
}

static R(ffn_p) R(xffn_p)(const R(sq_elastic_params) *p, int l, int C, int F)
{
    size_t c = (size_t)l * C, fc = c * F;
    R(ffn_p) x = {p->xf_ln_w + c, p->xf_ln_b + c, p->xf_w1 + fc, p->xf_b1 + (size_t)l * F,
                  p->xf_w2 + fc, p->xf_b2 + c};
    return x;
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

#define TAKE(ptr, type, count) do { \
        size_t o_ = at; \
        at += align64((size_t)(count) * sizeof(type)); \
        if (base) (ptr) = (type *)(void *)(base + o_); \
    } while (0)

static size_t R(carve_xatt)(R(sq_elastic_xatt) *a, char *base, size_t at, size_t Tq,
                            size_t Tk, size_t C, size_t att)
{
    TAKE(a->lnq, real, Tq * C);
    TAKE(a->mq, real, Tq);
    TAKE(a->rq, real, Tq);
    TAKE(a->lnk, real, Tk * C);
    TAKE(a->mk, real, Tk);
    TAKE(a->rk, real, Tk);
    TAKE(a->q, real, Tq * C);
    TAKE(a->kv, real, Tk * 2 * C);
    TAKE(a->a, real, Tq * C);
    TAKE(a->o, real, Tq * C);
    TAKE(a->att, real, att);
    TAKE(a->m, uint8_t, Tq * C);
    return at;
}

static size_t R(carve_ffn)(R(sq_elastic_ffn) *f, char *base, size_t at, size_t T, size_t C,
                           size_t F)
{
    TAKE(f->ln, real, T * C);
    TAKE(f->mean, real, T);
    TAKE(f->rstd, real, T);
    TAKE(f->h1, real, T * F);
    TAKE(f->r, real, T * F);
    TAKE(f->h2, real, T * C);
    TAKE(f->m, uint8_t, T * C);
    return at;
}

/* Carves the workspace out of base (NULL: only measures); returns bytes. */
static size_t R(carve)(R(sq_elastic_work) *w, const sq_elastic_config *c, char *base)
{
    size_t at = 0, T = (size_t)w->cap.T, B = (size_t)w->cap.B, C = (size_t)c->dim;
    size_t F = (size_t)c->ffn, H = (size_t)c->n_heads, L = (size_t)c->n_layers;
    size_t Bk = B * (size_t)c->topk, S = (size_t)c->stride, V1 = (size_t)c->n_items + 1;
    size_t wide = 2 * C > F ? 2 * C : F, att = H * (size_t)c->topk * T;
    int qnet = !c->no_imr && c->query == SQ_ELASTIC_QUERY_NET, imr = !c->no_imr;
    int agg = !c->no_dispatcher, train = w->cap.train;
    TAKE(w->emb, real, T * C);
    TAKE(w->x0, real, (T + 1) * C);
    TAKE(w->m_emb, uint8_t, T * C);
    size_t gmax = (size_t)w->cap.N, cap0 = 0;
    for (int j = 0; qnet && j < w->levels; j++) {
        R(sq_elastic_level) *v = &w->lev[j];
        size_t R = (size_t)v->cap;
        gmax = (gmax + S - 1) / S;
        TAKE(v->z, real, R * S * C);
        TAKE(v->u, real, R * C);
        TAKE(v->ln, real, R * C);
        TAKE(v->mean, real, R);
        TAKE(v->rstd, real, R);
        TAKE(v->qkv, real, R * 3 * C);
        TAKE(v->att, real, H * gmax * R);
        TAKE(v->a, real, R * C);
        TAKE(v->y, real, (R + 1) * C);
        cap0 = cap0 > R ? cap0 : R;
    }
    TAKE(w->qraw, real, imr * B * C);
    TAKE(w->q, real, imr * B * C);
    TAKE(w->q_mean, real, imr * B);
    TAKE(w->q_rstd, real, imr * B);
    TAKE(w->pkm_cache, real, imr * sq_pkm_cache_size((int)B, c->topk));
    TAKE(w->pkm_scratch, real, imr * sq_pkm_scratch_size((int)B, c->pool, c->topk));
    TAKE(w->p0, real, Bk * C);
    TAKE(w->X, real, (L + 1) * T * C);
    TAKE(w->P, real, (L + 1) * Bk * C);
    TAKE(w->Xg, real, T * C);
    TAKE(w->Pmid, real, L * Bk * C);
    TAKE(w->Xmid, real, L * T * C);
    for (size_t l = 0; l < L; l++) {
        if (agg)
            at = R(carve_xatt)(&w->ag[l], base, at, Bk, T, C, att);
        at = R(carve_xatt)(&w->dp[l], base, at, T, Bk, C, att);
        at = R(carve_ffn)(&w->pf[l], base, at, Bk, C, F);
        at = R(carve_ffn)(&w->xf[l], base, at, T, C, F);
    }
    TAKE(w->out, real, T * C);
    TAKE(w->lnf_mean, real, T);
    TAKE(w->lnf_rstd, real, T);
    if (train) {
        TAKE(w->ce, real, sq_ce_scratch_size(w->ce_chunk, (int)V1, (int)C));
        TAKE(w->dX, real, (T + 1) * C);
        TAKE(w->dP, real, Bk * C);
        TAKE(w->dXg, real, T * C);
        for (int i = 0; i < 4; i++) {
            TAKE(w->sx[i], real, T * wide);
            TAKE(w->sp[i], real, Bk * wide);
        }
        TAKE(w->dq, real, imr * B * C);
        TAKE(w->dqraw, real, imr * B * C);
        TAKE(w->dy, real, 2 * (cap0 + 1) * C);
        TAKE(w->dz, real, cap0 * S * C);
        TAKE(w->sl[0], real, cap0 * 3 * C);
        TAKE(w->sl[1], real, cap0 * C);
        TAKE(w->sl[2], real, cap0 * C);
    }
    return at;
}
#undef TAKE

/* Query-network level capacities: at most every row of the level below
 * (each group holds a real row), and at most rows / stride + one partial
 * group per sequence (FIXED LEVELS, elastic.h); off: B + cap + 1
 * segments, the dummies' included. */
static int R(plan_caps)(R(sq_elastic_work) *w, const sq_elastic_config *c, sq_err *e)
{
    int qnet = !c->no_imr && c->query == SQ_ELASTIC_QUERY_NET;
    w->levels = qnet ? sq_elastic_levels(c) : 0;
    if (w->levels > (int)(sizeof w->lev / sizeof w->lev[0]))
        return sq_fail(e, SQ_EX_USAGE, "--stride %d: too many query levels for --max-len %d",
                       c->stride, c->max_len);
    size_t ints = 2 * ((size_t)w->cap.B + 1);
    int prev = w->cap.T;
    for (int j = 0; j < w->levels; j++) {
        int g = prev / c->stride + w->cap.B;
        w->lev[j].cap = g < prev ? g : prev;
        prev = w->lev[j].cap;
        ints += (size_t)prev * c->stride + (size_t)w->cap.B + (size_t)prev + 1;
    }
    int *h = calloc(ints, sizeof *h);
    if (!h)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    w->host = h;
    w->host_n = ints;
    w->offp = h;
    w->offn = h + w->cap.B + 1;
    h = w->offn + w->cap.B + 1;
    for (int j = 0; j < w->levels; j++) {
        w->lev[j].idx = h;
        h += (size_t)w->lev[j].cap * c->stride;
        w->lev[j].off = h;
        h += (size_t)w->cap.B + w->lev[j].cap + 1;
    }
    return 0;
}

int R(sq_elastic_work_alloc)(R(sq_elastic_work) *w, const R(sq_elastic) *m,
                             const sq_elastic_cap *cap, sq_err *e)
{
    const sq_elastic_config *c = &m->cfg;
    memset(w, 0, sizeof *w);
    w->cap = *cap;
    w->cap.fixed = cap->fixed || m->cx.backend != SQ_BACKEND_CPU; /* a launch's sizes */
    w->cx = m->cx;
    if (w->cap.T < 1)
        w->cap.T = 1;
    if (w->cap.B < 1)
        w->cap.B = 1;
    if (w->cap.N < 1 || w->cap.N > c->max_len)
        w->cap.N = c->max_len;
    w->ce_chunk = sq_ce_chunk_on(&m->cx, cap->n, (int)c->n_items + 1);
    if (R(plan_caps)(w, c, e))
        return e->code;
    size_t bytes = R(carve)(w, c, NULL);
    w->mem = sq_ctx_alloc(&w->cx, bytes, e);
    if (!w->mem)
        return e->code;
    R(carve)(w, c, w->mem);
    w->pkm_idx = sq_ctx_alloc(&w->cx, (size_t)w->cap.B * c->topk * sizeof *w->pkm_idx, e);
    return w->pkm_idx ? 0 : e->code;
}

void R(sq_elastic_work_free)(R(sq_elastic_work) *w)
{
    if (w->mem)
        sq_ctx_free(&w->cx, w->mem);
    if (w->pkm_idx)
        sq_ctx_free(&w->cx, w->pkm_idx);
    free(w->host);
    memset(w, 0, sizeof *w);
}

/* With cap.fixed, level v's dummy groups after its own (FIXED LEVELS,
 * elastic.h): up to below / stride + B groups, each gathering the zero row
 * of the level below (its row `below`) and a segment of its own. */
static void R(plan_dummies)(R(sq_elastic_level) *v, int B, int S, int below)
{
    int G = v->rows, most = below / S + B < below ? below / S + B : below;
    for (int t = G * S; t < most * S; t++)
        v->idx[t] = below;
    for (int i = 0; i < most; i++)
        v->off[B + 1 + i] = G + i + 1 < most ? G + i + 1 : most;
    v->rows = most;
    v->segs = B + most;
}

/* The groups of every query level for batch b: level j's group g of
 * sequence s gathers `stride` rows of level j-1 (x0 for j = 0), the
 * sequence left-padded with the zero row (index = the rows below). */
static void R(plan_batch)(R(sq_elastic_work) *w, const sq_elastic_config *c,
                          const sq_packed *b)
{
    int k = c->topk, S = c->stride;
    for (int i = 0; i <= b->B; i++) {
        w->offp[i] = i * k;
        w->offn[i] = 0;
    }
    /* the entries of each sequence (OUTPUT ROWS), in order of sequence */
    w->grouped = 1;
    for (int i = 0, s = 0; i < b->n && w->grouped; i++) {
        int r = b->rows ? b->rows[i] : i;
        while (s < b->B && r >= b->off[s + 1])
            s++;
        w->grouped = s < b->B && r >= b->off[s];
        if (w->grouped)
            w->offn[s + 1]++;
    }
    for (int i = 0; i < b->B; i++)
        w->offn[i + 1] += w->offn[i];
    const int *prev = b->off;
    int rows_prev = b->T;
    for (int j = 0; j < w->levels; j++) {
        R(sq_elastic_level) *v = &w->lev[j];
        int G = 0, n = 0;
        v->off[0] = 0;
        for (int s = 0; s < b->B; s++) {
            int cnt = prev[s + 1] - prev[s], g = (cnt + S - 1) / S, pad = g * S - cnt;
            for (int t = 0; t < g * S; t++)
                v->idx[n++] = t < pad ? rows_prev : prev[s] + t - pad;
            G += g;
            v->off[s + 1] = G;
        }
        v->rows = G;
        v->segs = b->B;
        if (w->cap.fixed)
            R(plan_dummies)(v, b->B, S, rows_prev);
        prev = v->off;
        rows_prev = v->rows;
    }
}

/* ------------------------------------------------------------------------ */
/* Sublayers                                                                */

typedef struct {
    const sq_ctx *cx;
    int B, H, C, F;
    real eps, pd;
    uint64_t seed, step;
} R(env);

/* out = xq + dropout(Wo MHA(LNq(xq) Wq, LNk(xk) Wkv) + bo). */
static void R(xatt_forward)(const R(env) *v, const R(xatt_p) *p, R(sq_elastic_xatt) *a,
                            real *out, const real *xq, int Tq, const int *offq,
                            const real *xk, int Tk, const int *offk, uint64_t site)
{
    const sq_ctx *cx = v->cx;
    int C = v->C;
    R(sq_layernorm_forward)(cx, a->lnq, a->mq, a->rq, xq, p->lnq_w, p->lnq_b, Tq, C, v->eps);
    R(sq_layernorm_forward)(cx, a->lnk, a->mk, a->rk, xk, p->lnk_w, p->lnk_b, Tk, C, v->eps);
    R(sq_linear_forward)(cx, a->q, a->lnq, p->wq, NULL, Tq, C, C);
    R(sq_linear_forward)(cx, a->kv, a->lnk, p->wkv, NULL, Tk, C, 2 * C);
    R(sq_cross_attention_forward)(cx, a->a, a->att, a->q, C, offq, a->kv, a->kv + C, 2 * C,
                                  offk, v->B, v->H, C);
    R(sq_linear_forward)(cx, a->o, a->a, p->wo, p->bo, Tq, C, C);
    R(sq_dropout_add_forward)(cx, out, a->m, xq, a->o, Tq, C, v->pd, v->seed, v->step, site);
}

/* Back through xatt_forward: dq holds d out on entry and gets d xq added
 * (the residual keeps d out in it); d xk is added to dk. sq: 4 q-side
 * scratch arrays [Tq, C], sk: 2 k-side [Tk, 2C]. */
static void R(xatt_backward)(const R(env) *v, const R(xatt_p) *p, const R(xatt_p) *g,
                             const R(sq_elastic_xatt) *a, real *dq, real *dk,
                             const real *xq, int Tq, const int *offq, const real *xk, int Tk,
                             const int *offk, real *const *sq, real *const *sk)
{
    const sq_ctx *cx = v->cx;
    int C = v->C;
    size_t qc = (size_t)Tq * C, kc = (size_t)Tk * C;
    R(sq_dropout_backward_to)(cx, sq[0], dq, a->m, qc, v->pd);
    R(sq_linear_backward_to)(cx, sq[1], g->wo, g->bo, sq[0], a->a, p->wo, Tq, C, C);
    R(sq_zero)(cx, sq[2], qc);
    R(sq_zero)(cx, sk[0], 2 * kc);
    R(sq_cross_attention_backward)(cx, sq[2], sk[0], sk[0] + C, sq[1], a->a, a->q, C, offq,
                                   a->kv, a->kv + C, 2 * C, offk, a->att, v->B, v->H, C);
    R(sq_linear_backward_to)(cx, sq[3], g->wq, NULL, sq[2], a->lnq, p->wq, Tq, C, C);
    R(sq_linear_backward_to)(cx, sk[1], g->wkv, NULL, sk[0], a->lnk, p->wkv, Tk, C, 2 * C);
    R(sq_layernorm_backward)(cx, dq, g->lnq_w, g->lnq_b, sq[3], xq, p->lnq_w, a->mq, a->rq, Tq,
                             C);
    R(sq_layernorm_backward)(cx, dk, g->lnk_w, g->lnk_b, sk[1], xk, p->lnk_w, a->mk, a->rk, Tk,
                             C);
}

/* out = x + dropout(W2 relu(W1 LN(x) + b1) + b2). */
static void R(ffn_forward)(const R(env) *v, const R(ffn_p) *p, R(sq_elastic_ffn) *f,
                           real *out, const real *x, int T, uint64_t site)
{
    const sq_ctx *cx = v->cx;
    int C = v->C, F = v->F;
    R(sq_layernorm_forward)(cx, f->ln, f->mean, f->rstd, x, p->ln_w, p->ln_b, T, C, v->eps);
    R(sq_linear_forward)(cx, f->h1, f->ln, p->w1, p->b1, T, C, F);
    R(sq_relu_forward)(cx, f->r, f->h1, (size_t)T * F);
    R(sq_linear_forward)(cx, f->h2, f->r, p->w2, p->b2, T, F, C);
    R(sq_dropout_add_forward)(cx, out, f->m, x, f->h2, T, C, v->pd, v->seed, v->step, site);
}

/* Back through ffn_forward: dx holds d out and gets d x added. s: 4
 * scratch arrays [T, max(C, F)]. */
static void R(ffn_backward)(const R(env) *v, const R(ffn_p) *p, const R(ffn_p) *g,
                            const R(sq_elastic_ffn) *f, real *dx, const real *x, int T,
                            real *const *s)
{
    const sq_ctx *cx = v->cx;
    int C = v->C, F = v->F;
    size_t tc = (size_t)T * C, tf = (size_t)T * F;
    R(sq_dropout_backward_to)(cx, s[0], dx, f->m, tc, v->pd);
    R(sq_linear_backward_to)(cx, s[1], g->w2, g->b2, s[0], f->r, p->w2, T, F, C);
    R(sq_zero)(cx, s[2], tf);
    R(sq_relu_backward)(cx, s[2], s[1], f->h1, tf);
    R(sq_linear_backward_to)(cx, s[3], g->w1, g->b1, s[2], f->ln, p->w1, T, C, F);
    R(sq_layernorm_backward)(cx, dx, g->ln_w, g->ln_b, s[3], x, p->ln_w, f->mean, f->rstd, T,
                             C);
}

/* ------------------------------------------------------------------------ */
/* Query network and retrieval                                              */

/* Level j: y = u + Wo MHA(LN(u) Wqkv) + bo, u = reshape(below) W^T + b. */
static void R(level_forward)(const R(env) *v, const R(sq_elastic) *m, R(sq_elastic_work) *w,
                             int j, real *below, int rows_below)
{
    const sq_ctx *cx = v->cx;
    const R(sq_elastic_params) *p = &m->p;
    R(sq_elastic_level) *lv = &w->lev[j];
    int C = v->C, S = m->cfg.stride, G = lv->rows;
    size_t jc = (size_t)j * C, SC = (size_t)S * C;
    R(sq_zero)(cx, below + (size_t)rows_below * C, (size_t)C); /* the padding row */
    R(sq_gather_rows)(cx, lv->z, below, lv->idx, G * S, C);
    R(sq_linear_forward)(cx, lv->u, lv->z, p->qn_w + jc * SC, p->qn_b + jc, G, (int)SC, C);
    R(sq_layernorm_forward)(cx, lv->ln, lv->mean, lv->rstd, lv->u, p->qn_ln_w + jc,
                            p->qn_ln_b + jc, G, C, v->eps);
    R(sq_linear_forward)(cx, lv->qkv, lv->ln, p->qn_qkv + 3 * jc * C, NULL, G, C, 3 * C);
    R(sq_attention_forward)(cx, lv->a, lv->att, lv->qkv, lv->qkv + C, lv->qkv + 2 * C, 3 * C,
                            lv->off, lv->segs, v->H, C, 0);
    R(sq_linear_forward)(cx, lv->y, lv->a, p->qn_o + jc * C, p->qn_ob + jc, G, C, C);
    R(sq_residual_forward)(cx, lv->y, lv->y, lv->u, (size_t)G * C);
}

/* Back through level j from dy [rows, C], adding into dbelow. */
static void R(level_backward)(const R(env) *v, const R(sq_elastic) *m, R(sq_elastic) *g,
                              R(sq_elastic_work) *w, int j, const real *dy, real *dbelow)
{
    const sq_ctx *cx = v->cx;
    const R(sq_elastic_params) *p = &m->p;
    R(sq_elastic_params) *gp = &g->p;
    const R(sq_elastic_level) *lv = &w->lev[j];
    int C = v->C, S = m->cfg.stride, G = lv->rows;
    size_t jc = (size_t)j * C, SC = (size_t)S * C, gc = (size_t)G * C;
    real *dqkv = w->sl[0], *du = w->sl[1], *da = w->sl[2];
    R(sq_copy)(cx, du, dy, gc); /* the residual */
    R(sq_linear_backward_to)(cx, da, gp->qn_o + jc * C, gp->qn_ob + jc, dy, lv->a,
                             p->qn_o + jc * C, G, C, C);
    /* the level's segments cover its G rows (plan_batch): dqkv written whole */
    R(sq_attention_backward_to)(cx, dqkv, dqkv + C, dqkv + 2 * C, da, lv->a, lv->qkv,
                                lv->qkv + C, lv->qkv + 2 * C, lv->att, 3 * C, lv->off,
                                lv->segs, v->H, C, 0);
    real *dln = da; /* da is spent */
    R(sq_linear_backward_to)(cx, dln, gp->qn_qkv + 3 * jc * C, NULL, dqkv, lv->ln,
                             p->qn_qkv + 3 * jc * C, G, C, 3 * C);
    R(sq_layernorm_backward)(cx, du, gp->qn_ln_w + jc, gp->qn_ln_b + jc, dln, lv->u,
                             p->qn_ln_w + jc, lv->mean, lv->rstd, G, C);
    R(sq_linear_backward_to)(cx, w->dz, gp->qn_w + jc * SC, gp->qn_b + jc, du, lv->z,
                             p->qn_w + jc * SC, G, (int)SC, C);
    R(sq_scatter_add_rows)(cx, dbelow, w->dz, lv->idx, G * S, C);
}

/* q = LNq(query network or mean of x0); P^0 = the retrieved experts (or
 * the shared p0). */
static void R(retrieve_forward)(const R(env) *v, const R(sq_elastic) *m, R(sq_elastic_work) *w,
                                const sq_packed *b)
{
    const sq_ctx *cx = v->cx;
    const sq_elastic_config *c = &m->cfg;
    const R(sq_elastic_params) *p = &m->p;
    int B = b->B, C = v->C, k = c->topk;
    if (c->no_imr) {
        R(sq_copy2d)(cx, w->p0, k * C, p->p0, 0, B, k * C);
        return;
    }
    if (c->query == SQ_ELASTIC_QUERY_MEAN) {
        R(sq_segmean_forward)(cx, w->qraw, w->x0, b->off, B, C);
    } else {
        real *below = w->x0;
        int rows = b->T;
        for (int j = 0; j < w->levels; j++) {
            R(level_forward)(v, m, w, j, below, rows);
            below = w->lev[j].y;
            rows = w->lev[j].rows;
        }
        R(sq_copy)(cx, w->qraw, below, (size_t)B * C); /* one row per sequence */
    }
    R(sq_layernorm_forward)(cx, w->q, w->q_mean, w->q_rstd, w->qraw, p->q_ln_w, p->q_ln_b, B,
                            C, v->eps);
    R(sq_pkm_forward)(cx, w->p0, w->pkm_idx, w->pkm_cache, w->pkm_scratch, w->q, p->keys1,
                      p->keys2, p->experts, B, c->pool, C, k,
                      c->weights == SQ_ELASTIC_W_SOFTMAX);
}

/* Back from d P^0 (w->dP) to the retrieval's parameters and d x0 (w->dX). */
static void R(retrieve_backward)(const R(env) *v, const R(sq_elastic) *m, R(sq_elastic) *g,
                                 R(sq_elastic_work) *w, const sq_packed *b)
{
    const sq_ctx *cx = v->cx;
    const sq_elastic_config *c = &m->cfg;
    const R(sq_elastic_params) *p = &m->p;
    R(sq_elastic_params) *gp = &g->p;
    int B = b->B, C = v->C, k = c->topk, weighted = c->weights == SQ_ELASTIC_W_SOFTMAX;
    if (c->no_imr) {
        for (int s = 0; s < B; s++) /* in order: deterministic */
            R(sq_add2d)(cx, gp->p0, C, w->dP + (size_t)s * k * C, C, k, C);
        return;
    }
    R(sq_zero)(cx, w->dq, (size_t)B * C);
    R(sq_pkm_backward)(cx, w->dq, gp->keys1, gp->keys2, gp->experts, w->pkm_scratch, w->dP,
                       w->q, p->keys1, p->keys2, p->experts, w->pkm_idx, w->pkm_cache, B,
                       c->pool, C, k, weighted);
    if (!weighted)
        return; /* Algorithm 1's gather: nothing reaches the query */
    R(sq_layernorm_backward_to)(cx, w->dqraw, gp->q_ln_w, gp->q_ln_b, w->dq, w->qraw, p->q_ln_w,
                                w->q_mean, w->q_rstd, B, C);
    if (c->query == SQ_ELASTIC_QUERY_MEAN) {
        R(sq_segmean_backward)(cx, w->dX, w->dqraw, b->off, B, C);
        return;
    }
    /* levels from the top; dy ping-pongs between two halves */
    size_t half = (size_t)(w->lev[0].cap + 1) * C;
    real *dy = w->dy;
    int top = w->lev[w->levels - 1].rows; /* B, and the dummies (FIXED LEVELS) */
    if (top > B)
        R(sq_zero)(cx, dy, (size_t)top * C);
    R(sq_copy)(cx, dy, w->dqraw, (size_t)B * C);
    for (int j = w->levels - 1; j >= 0; j--) {
        real *dbelow = j ? (dy == w->dy ? w->dy + half : w->dy) : w->dX;
        if (j)
            R(sq_zero)(cx, dbelow, (size_t)(w->lev[j - 1].rows + 1) * C);
        R(level_backward)(v, m, g, w, j, dy, dbelow);
        dy = dbelow;
    }
}

/* ------------------------------------------------------------------------ */
/* Forward, loss, backward                                                  */

static R(env) R(env_of)(const R(sq_elastic) *m, int B, real pd, uint64_t seed, uint64_t step)
{
    const sq_elastic_config *c = &m->cfg;
    R(env) v = {&m->cx, B, c->n_heads, c->dim, c->ffn, (real)c->ln_eps, pd, seed, step};
    return v;
}

/* Layer l on X[l], P[l]: aggregation and P's feed-forward on every row;
 * the dispatch and X's feed-forward on every row, or (the last layer,
 * entries grouped) on the entries' rows only, gathered into Xg. */
static void R(layer_forward)(const R(env) *v, const R(sq_elastic) *m, R(sq_elastic_work) *w,
                             const sq_packed *b, int l)
{
    const sq_elastic_config *c = &m->cfg;
    const R(sq_elastic_params) *p = &m->p;
    int T = b->T, C = c->dim, F = c->ffn, Bk = b->B * c->topk;
    size_t sX = (size_t)w->cap.T * C, sP = (size_t)w->cap.B * c->topk * C;
    real *X = w->X + l * sX, *P = w->P + l * sP, *Pm = w->Pmid + l * sP;
    real *Xm = w->Xmid + l * sX;
    R(xatt_p) ag = R(agg_p)(p, l, C), dp = R(dis_p)(p, l, C);
    R(ffn_p) pf = R(pffn_p)(p, l, C, F), xf = R(xffn_p)(p, l, C, F);
    if (!c->no_dispatcher)
        R(xatt_forward)(v, &ag, &w->ag[l], Pm, P, Bk, w->offp, X, T, b->off, SITE(l, 0));
    else
        R(sq_copy)(v->cx, Pm, P, (size_t)Bk * C);
    R(ffn_forward)(v, &pf, &w->pf[l], P + sP, Pm, Bk, SITE(l, 1));
    if (l == c->n_layers - 1 && w->grouped) {
        R(sq_gather_rows)(v->cx, w->Xg, X, b->rows, b->n, C);
        X = w->Xg;
        T = b->n;
    }
    const int *off = X == w->Xg ? w->offn : b->off;
    R(xatt_forward)(v, &dp, &w->dp[l], Xm, X, T, off, P + sP, Bk, w->offp, SITE(l, 2));
    R(ffn_forward)(v, &xf, &w->xf[l], w->X + (l + 1) * sX, Xm, T, SITE(l, 3));
}

void R(sq_elastic_forward)(const R(sq_elastic) *m, R(sq_elastic_work) *w, const sq_packed *b,
                           int train, uint64_t seed, uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    const sq_elastic_config *c = &m->cfg;
    const R(sq_elastic_params) *p = &m->p;
    int T = b->T, B = b->B, C = c->dim, L = c->n_layers, Bk = B * c->topk;
    size_t sX = (size_t)w->cap.T * C;
    R(env) v = R(env_of)(m, B, train ? (real)c->dropout : 0, seed, step);
    R(plan_batch)(w, c, b);
    sq_ctx_stage_add(cx, w->host, w->host_n * sizeof(int)); /* a no-op on the CPU */

    R(sq_embedding_forward)(cx, w->emb, p->item_emb, b->ids, T, C, r_sqrt((real)C));
    R(sq_posemb_forward)(cx, w->emb, w->emb, p->pos_emb, b->pos, T, C);
    R(sq_dropout_forward)(cx, w->x0, w->m_emb, w->emb, T, C, v.pd, seed, step, SITE_EMB);
    R(retrieve_forward)(&v, m, w, b);
    R(sq_copy)(cx, w->X, w->x0, (size_t)T * C);
    R(sq_copy)(cx, w->P, w->p0, (size_t)Bk * C);
    for (int l = 0; l < L; l++)
        R(layer_forward)(&v, m, w, b, l);
    /* h of the entries: X[L] holds their rows, or every row to gather */
    const real *hin = w->X + (size_t)L * sX;
    if (!w->grouped) {
        R(sq_gather_rows)(cx, w->Xg, hin, b->rows, b->n, C);
        hin = w->Xg;
    }
    R(sq_layernorm_forward)(cx, w->out, w->lnf_mean, w->lnf_rstd, hin, p->lnf_w, p->lnf_b,
                            b->n, C, v.eps);
}

double R(sq_elastic_loss)(const R(sq_elastic) *m, R(sq_elastic_work) *w, const sq_packed *b,
                          sq_loss_spec loss, R(sq_elastic) *g, int *count)
{
    const sq_ctx *cx = &m->cx;
    int C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1;
    real *dh = g ? w->sx[0] : NULL, *dE = g ? g->p.item_emb : NULL; /* d h: kept in sx[0]
                                                                          for the backward */
    if (dh)
        R(sq_zero)(cx, dh, (size_t)b->n * C);
    return R(sq_next_item_loss)(cx, loss, b, NULL, dh, dE, NULL, w->ce, w->out, m->p.item_emb,
                                NULL, C, V1, w->ce_chunk, 1, count);
}

/* The LDA layers in reverse, from d X[L] in w->dXg (grouped: the
 * entries' rows) or w->dX (every row); d X[0] ends in w->dX, d P^0 in
 * w->dP. */
static void R(layers_backward)(const R(env) *v, const R(sq_elastic) *m, R(sq_elastic) *g,
                               R(sq_elastic_work) *w, const sq_packed *b)
{
    const sq_elastic_config *c = &m->cfg;
    const R(sq_elastic_params) *p = &m->p;
    int T = b->T, C = c->dim, F = c->ffn, Bk = b->B * c->topk;
    size_t sX = (size_t)w->cap.T * C, sP = (size_t)w->cap.B * c->topk * C;
    R(sq_zero)(v->cx, w->dP, (size_t)Bk * C);
    for (int l = c->n_layers - 1; l >= 0; l--) {
        const real *X = w->X + l * sX, *P = w->P + l * sP, *Pm = w->Pmid + l * sP;
        const real *Xm = w->Xmid + l * sX;
        R(xatt_p) ag = R(agg_p)(p, l, C), dp = R(dis_p)(p, l, C);
        R(ffn_p) pf = R(pffn_p)(p, l, C, F), xf = R(xffn_p)(p, l, C, F);
        R(xatt_p) gag = R(agg_p)(&g->p, l, C), gdp = R(dis_p)(&g->p, l, C);
        R(ffn_p) gpf = R(pffn_p)(&g->p, l, C, F), gxf = R(xffn_p)(&g->p, l, C, F);
        if (l == c->n_layers - 1 && w->grouped) { /* on the entries' rows */
            R(ffn_backward)(v, &xf, &gxf, &w->xf[l], w->dXg, Xm, b->n, w->sx);
            R(xatt_backward)(v, &dp, &gdp, &w->dp[l], w->dXg, w->dP, w->Xg, b->n, w->offn,
                             P + sP, Bk, w->offp, w->sx, w->sp);
            R(sq_scatter_add_rows)(v->cx, w->dX, w->dXg, b->rows, b->n, C);
        } else {
            R(ffn_backward)(v, &xf, &gxf, &w->xf[l], w->dX, Xm, T, w->sx);
            R(xatt_backward)(v, &dp, &gdp, &w->dp[l], w->dX, w->dP, X, T, b->off, P + sP, Bk,
                             w->offp, w->sx, w->sp);
        }
        R(ffn_backward)(v, &pf, &gpf, &w->pf[l], w->dP, Pm, Bk, w->sp);
        if (!c->no_dispatcher)
            R(xatt_backward)(v, &ag, &gag, &w->ag[l], w->dP, w->dX, P, Bk, w->offp, X, T,
                             b->off, w->sp, w->sx);
    }
}

void R(sq_elastic_backward)(const R(sq_elastic) *m, R(sq_elastic_work) *w, const sq_packed *b,
                            R(sq_elastic) *g)
{
    const sq_ctx *cx = &m->cx;
    const sq_elastic_config *c = &m->cfg;
    R(sq_elastic_params) *gp = &g->p;
    int T = b->T, C = c->dim, L = c->n_layers;
    size_t TC = (size_t)T * C, sX = (size_t)w->cap.T * C;
    R(env) v = R(env_of)(m, b->B, (real)c->dropout, 0, 0);
    /* h = LNf(the entries' rows of X[L]); d h is in sx[0] (sq_elastic_loss) */
    const real *hin = w->grouped ? w->X + (size_t)L * sX : w->Xg;
    R(sq_layernorm_backward_to)(cx, w->dXg, gp->lnf_w, gp->lnf_b, w->sx[0], hin, m->p.lnf_w,
                                w->lnf_mean, w->lnf_rstd, b->n, C);
    R(sq_zero)(cx, w->dX, TC + C);
    if (!w->grouped) /* the entries were gathered from every row of X[L] */
        R(sq_scatter_add_rows)(cx, w->dX, w->dXg, b->rows, b->n, C);
    R(layers_backward)(&v, m, g, w, b);
    R(retrieve_backward)(&v, m, g, w, b);
    /* x0 = dropout(E[ids] sqrt(C) + P[pos]) */
    real *demb = w->sx[1], *dpos = w->sx[2];
    R(sq_dropout_backward_to)(cx, demb, w->dX, w->m_emb, TC, v.pd);
    R(sq_zero)(cx, dpos, TC);
    R(sq_posemb_backward)(cx, dpos, gp->pos_emb, demb, b->pos, T, C);
    R(sq_embedding_backward)(cx, gp->item_emb, dpos, b->ids, T, C, r_sqrt((real)C));
}
