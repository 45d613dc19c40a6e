/* sasrec.c - SASRec forward, loss and backward on the packed ops (the model
 * and its conventions: sasrec.h).
 *
 * Written over `real` and compiled twice: as float here and as double by
 * sasrec_f64.c (see real.h); the config, tensor table, model-file and
 * scoring glue exist once, in the float build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "sasrec.h"
#include "ops.h"
#include "real.h"
#include "rng.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_INIT 0x494e495400000000ull /* "INIT" */

/* Dropout sites: 0 for the embedding, then three per block. */
#define SITE_EMB 0
#define SITE(l, which) (1 + 3 * (uint64_t)(l) + (which))

/* ------------------------------------------------------------------------ */
/* Precision-free parts (float build only).                                 */

#if !SQ_REAL_IS_F64

static const char *const tensor_names[SQ_SASREC_NT] = {
    "item_emb", "pos_emb", "wq", "wk", "wv", "wo", "w1", "w2",
    "bq", "bk", "bv", "bo", "b1", "b2",
    "ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnf_w", "lnf_b",
};

const char *sq_sasrec_tensor_name(int i)
{
    return i >= 0 && i < SQ_SASREC_NT ? tensor_names[i] : NULL;
}

int sq_sasrec_tensor_shape(const sq_sasrec_config *c, int i, uint64_t s[4])
{
    uint64_t L = (uint64_t)c->n_layers, C = (uint64_t)c->dim, F = (uint64_t)c->ffn;
    switch (i) {
    case 0: s[0] = (uint64_t)c->n_items + 1; s[1] = C; return 2;
    case 1: s[0] = (uint64_t)c->max_len; s[1] = C; return 2;
    case 2: case 3: case 4: case 5: s[0] = L; s[1] = C; s[2] = C; return 3;
    case 6: s[0] = L; s[1] = F; s[2] = C; return 3;
    case 7: s[0] = L; s[1] = C; s[2] = F; return 3;
    case 12: s[0] = L; s[1] = F; return 2;
    case 18: case 19: s[0] = C; return 1;
    default: s[0] = L; s[1] = C; return 2; /* the other biases, LN */
    }
}

size_t sq_sasrec_sizes(const sq_sasrec_config *c, size_t sizes[SQ_SASREC_NT])
{
    size_t total = 0;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(c, i, s);
        size_t n = 1;
        for (int d = 0; d < nd; d++)
            n *= (size_t)s[d];
        sizes[i] = n;
        total += n;
    }
    return total;
}

int sq_sasrec_config_check(const sq_sasrec_config *c, sq_err *e)
{
    if (c->n_items < 1 || c->n_items > (1u << 30))
        return sq_fail(e, SQ_EX_USAGE, "n_items %" PRIu32 " out of range", c->n_items);
    if (c->n_layers < 1 || c->n_layers > 64)
        return sq_fail(e, SQ_EX_USAGE, "--layers must be in 1..64");
    if (c->dim < 1 || c->dim > 8192)
        return sq_fail(e, SQ_EX_USAGE, "--dim must be in 1..8192");
    if (c->n_heads < 1 || c->dim % c->n_heads)
        return sq_fail(e, SQ_EX_USAGE, "--heads must divide --dim (%d)", c->dim);
    if (c->ffn < 1 || c->ffn > 65536)
        return sq_fail(e, SQ_EX_USAGE, "--ffn must be in 1..65536");
    if (c->max_len < 1 || c->max_len > 65536)
        return sq_fail(e, SQ_EX_USAGE, "--max-len must be in 1..65536");
    if (!(c->dropout >= 0 && c->dropout < 1))
        return sq_fail(e, SQ_EX_USAGE, "--dropout must be in [0, 1)");
    if (!(c->ln_eps > 0))
        return sq_fail(e, SQ_EX_USAGE, "ln_eps must be positive");
    /* the embedding table must stay addressable with int row indices */
    if ((uint64_t)(c->n_items + 1) * (uint64_t)c->dim > (uint64_t)1 << 40)
        return sq_fail(e, SQ_EX_USAGE, "item table too large");
    return 0;
}

int sq_sasrec_config_write(const sq_sasrec_config *c, sq_modelfile *mf, sq_err *e)
{
    if (sq_modelfile_set(mf, e, "layers", "%d", c->n_layers) ||
        sq_modelfile_set(mf, e, "heads", "%d", c->n_heads) ||
        sq_modelfile_set(mf, e, "dim", "%d", c->dim) ||
        sq_modelfile_set(mf, e, "ffn", "%d", c->ffn) ||
        sq_modelfile_set(mf, e, "max_len", "%d", c->max_len) ||
        sq_modelfile_set(mf, e, "dropout", "%.17g", c->dropout) ||
        sq_modelfile_set(mf, e, "ln_eps", "%.17g", c->ln_eps))
        return e->code;
    return 0;
}

static int get_long(const sq_modelfile *mf, const char *path, const char *key,
                    long lo, long hi, long *out, sq_err *e)
{
    char buf[64], *end;
    if (!sq_modelfile_get(mf, key, buf, sizeof buf))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no %s", path, key);
    long v = strtol(buf, &end, 10);
    if (end == buf || *end || v < lo || v > hi)
        return sq_fail(e, SQ_EX_DATA, "%s: bad %s=%s", path, key, buf);
    *out = v;
    return 0;
}

static int get_double(const sq_modelfile *mf, const char *path, const char *key,
                      double *out, sq_err *e)
{
    char buf[64], *end;
    if (!sq_modelfile_get(mf, key, buf, sizeof buf))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no %s", path, key);
    *out = strtod(buf, &end);
    if (end == buf || *end)
        return sq_fail(e, SQ_EX_DATA, "%s: bad %s=%s", path, key, buf);
    return 0;
}

int sq_sasrec_config_read(sq_sasrec_config *c, const sq_modelfile *mf,
                          const char *path, sq_err *e)
{
    long v[6];
    static const char *keys[6] = {"n_items", "layers", "heads", "dim", "ffn", "max_len"};
    for (int i = 0; i < 6; i++)
        if (get_long(mf, path, keys[i], 1, 1L << 30, &v[i], e))
            return e->code;
    memset(c, 0, sizeof *c);
    c->n_items = (uint32_t)v[0];
    c->n_layers = (int)v[1];
    c->n_heads = (int)v[2];
    c->dim = (int)v[3];
    c->ffn = (int)v[4];
    c->max_len = (int)v[5];
    if (get_double(mf, path, "dropout", &c->dropout, e) ||
        get_double(mf, path, "ln_eps", &c->ln_eps, e))
        return e->code;
    sq_err ce = {0};
    if (sq_sasrec_config_check(c, &ce))
        return sq_fail(e, SQ_EX_DATA, "%s: bad sasrec config: %s", path, ce.msg);
    return 0;
}

#endif /* !SQ_REAL_IS_F64 */

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

static void R(point_params)(R(sq_sasrec_params) *p, real *mem, const size_t *sizes)
{
    real **ptrs[SQ_SASREC_NT] = {
        &p->item_emb, &p->pos_emb, &p->wq, &p->wk, &p->wv, &p->wo, &p->w1, &p->w2,
        &p->bq, &p->bk, &p->bv, &p->bo, &p->b1, &p->b2,
        &p->ln1w, &p->ln1b, &p->ln2w, &p->ln2b, &p->lnfw, &p->lnfb,
    };
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        *ptrs[i] = mem;
        mem += sizes[i];
    }
}

int R(sq_sasrec_alloc)(R(sq_sasrec) *m, const sq_sasrec_config *c, sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (sq_sasrec_config_check(c, e))
        return e->code;
    m->cfg = *c;
    m->n = sq_sasrec_sizes(c, m->sizes);
    for (int i = 0; i < SQ_SASREC_N_DECAY; i++)
        m->n_decay += m->sizes[i];
    m->mem = calloc(m->n, sizeof *m->mem);
    if (!m->mem)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %zu parameters", m->n);
    R(point_params)(&m->p, m->mem, m->sizes);
    return 0;
}

void R(sq_sasrec_free)(R(sq_sasrec) *m)
{
    free(m->mem);
    memset(m, 0, sizeof *m);
}

/* xavier_normal_ on each [rows, cols] slice of n reals. */
static void R(xavier)(sq_rng *r, real *w, size_t n, size_t rows, size_t cols)
{
    double sd = sqrt(2.0 / (double)(rows + cols));
    for (size_t i = 0; i < n; i++)
        w[i] = (real)(sd * sq_rng_normal(r));
}

void R(sq_sasrec_init_weights)(R(sq_sasrec) *m, uint64_t seed)
{
    const sq_sasrec_config *c = &m->cfg;
    sq_rng r;
    sq_rng_seed(&r, seed, STREAM_INIT);
    memset(m->mem, 0, m->n * sizeof *m->mem);
    real *mem = m->mem;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(c, i, s);
        if (i < SQ_SASREC_N_DECAY)
            R(xavier)(&r, mem, m->sizes[i], (size_t)s[nd - 2], (size_t)s[nd - 1]);
        mem += m->sizes[i];
    }
    memset(m->p.item_emb, 0, (size_t)c->dim * sizeof *m->mem); /* padding row */
    for (size_t i = 0; i < (size_t)c->n_layers * c->dim; i++) {
        m->p.ln1w[i] = 1;
        m->p.ln2w[i] = 1;
    }
    for (int i = 0; i < c->dim; i++)
        m->p.lnfw[i] = 1;
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Carves the workspace out of base (NULL: only measures); returns bytes. */
static size_t R(carve)(R(sq_sasrec_work) *w, const sq_sasrec_config *c, char *base)
{
    size_t at = 0;
    size_t T = (size_t)w->cap.T, L = (size_t)c->n_layers, C = (size_t)c->dim;
    size_t F = (size_t)c->ffn, H = (size_t)c->n_heads, TC = T * C, TF = T * F;
#define TAKE(ptr, type, count) do { \
        size_t o_ = at; \
        at += align64((size_t)(count) * sizeof(type)); \
        if (base) (ptr) = (type *)(void *)(base + o_); \
    } while (0)
    TAKE(w->emb, real, TC);
    TAKE(w->x, real, (L + 1) * TC);
    TAKE(w->ln1, real, L * TC);
    TAKE(w->ln1_mean, real, L * T);
    TAKE(w->ln1_rstd, real, L * T);
    TAKE(w->q, real, L * TC);
    TAKE(w->k, real, L * TC);
    TAKE(w->v, real, L * TC);
    TAKE(w->att, real, L * H * w->cap.att);
    TAKE(w->atty, real, L * TC);
    TAKE(w->proj, real, L * TC);
    TAKE(w->projd, real, L * TC);
    TAKE(w->xmid, real, L * TC);
    TAKE(w->ln2, real, L * TC);
    TAKE(w->ln2_mean, real, L * T);
    TAKE(w->ln2_rstd, real, L * T);
    TAKE(w->h1, real, L * TF);
    TAKE(w->r, real, L * TF);
    TAKE(w->rd, real, L * TF);
    TAKE(w->h2, real, L * TC);
    TAKE(w->h2d, real, L * TC);
    TAKE(w->out, real, TC);
    TAKE(w->lnf_mean, real, T);
    TAKE(w->lnf_rstd, real, T);
    TAKE(w->m_emb, uint8_t, TC);
    TAKE(w->m_att, uint8_t, L * TC);
    TAKE(w->m_ffn1, uint8_t, L * TF);
    TAKE(w->m_ffn2, uint8_t, L * TC);
    if (w->cap.train) {
        TAKE(w->ce, real, sq_ce_scratch_size(w->ce_chunk, (int)c->n_items + 1, c->dim));
        TAKE(w->dout, real, TC);
        TAKE(w->dx, real, TC);
        TAKE(w->dy, real, TC);
        TAKE(w->dxmid, real, TC);
        TAKE(w->dln1, real, TC);
        TAKE(w->dproj, real, TC);
        TAKE(w->datty, real, TC);
        TAKE(w->dq, real, TC);
        TAKE(w->dk, real, TC);
        TAKE(w->dv, real, TC);
        TAKE(w->dh2, real, TC);
        TAKE(w->demb, real, TC);
        TAKE(w->dF1, real, TF);
        TAKE(w->dF2, real, TF);
        TAKE(w->dF3, real, TF);
    }
#undef TAKE
    return at;
}

int R(sq_sasrec_work_alloc)(R(sq_sasrec_work) *w, const sq_sasrec_config *c,
                            const sq_sasrec_cap *cap, sq_err *e)
{
    memset(w, 0, sizeof *w);
    w->cap = *cap;
    if (w->cap.T < 1)
        w->cap.T = 1;
    if (w->cap.att < 1)
        w->cap.att = 1;
    int chunk = cap->n > 0 ? cap->n : 1;
    w->ce_chunk = chunk < 512 ? chunk : 512;
    size_t bytes = R(carve)(w, c, NULL);
    w->mem = aligned_alloc(64, bytes);
    if (!w->mem)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for a %zu-byte SASRec workspace", bytes);
    R(carve)(w, c, w->mem);
    return 0;
}

void R(sq_sasrec_work_free)(R(sq_sasrec_work) *w)
{
    free(w->mem);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------------------ */
/* Forward, loss, backward                                                  */

void R(sq_sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                          const sq_packed *b, int train, uint64_t seed,
                          uint64_t step)
{
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int T = b->T, C = c->dim, F = c->ffn, H = c->n_heads, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    size_t sA = (size_t)H * w->cap.att;
    real pd = train ? (real)c->dropout : (real)0, eps = (real)c->ln_eps;

    R(sq_embedding_forward)(w->emb, p->item_emb, b->ids, T, C, r_sqrt((real)C));
    R(sq_posemb_forward)(w->emb, w->emb, p->pos_emb, b->pos, T, C);
    R(sq_dropout_forward)(w->x, w->m_emb, w->emb, T, C, pd, seed, step, SITE_EMB);
    for (int l = 0; l < L; l++) {
        size_t lc = (size_t)l * C, lcc = (size_t)l * C * C, lfc = (size_t)l * F * C;
        real *x = w->x + l * sTC, *xn = w->x + (l + 1) * sTC;
        real *ln1 = w->ln1 + l * sTC, *q = w->q + l * sTC, *k = w->k + l * sTC;
        real *v = w->v + l * sTC, *atty = w->atty + l * sTC, *proj = w->proj + l * sTC;
        real *projd = w->projd + l * sTC, *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        real *h1 = w->h1 + l * sTF, *r = w->r + l * sTF, *rd = w->rd + l * sTF;
        real *h2 = w->h2 + l * sTC, *h2d = w->h2d + l * sTC;

        R(sq_layernorm_forward)(ln1, w->ln1_mean + l * sT, w->ln1_rstd + l * sT, x,
                                p->ln1w + lc, p->ln1b + lc, T, C, eps);
        R(sq_linear_forward)(q, ln1, p->wq + lcc, p->bq + lc, T, C, C);
        R(sq_linear_forward)(k, x, p->wk + lcc, p->bk + lc, T, C, C);
        R(sq_linear_forward)(v, x, p->wv + lcc, p->bv + lc, T, C, C);
        R(sq_attention_forward)(atty, w->att + l * sA, q, k, v, C, b->off, b->B, H, C, 1);
        R(sq_linear_forward)(proj, atty, p->wo + lcc, p->bo + lc, T, C, C);
        R(sq_dropout_forward)(projd, w->m_att + l * sTC, proj, T, C, pd, seed, step, SITE(l, 0));
        R(sq_residual_forward)(xmid, ln1, projd, TC);
        R(sq_layernorm_forward)(ln2, w->ln2_mean + l * sT, w->ln2_rstd + l * sT, xmid,
                                p->ln2w + lc, p->ln2b + lc, T, C, eps);
        R(sq_linear_forward)(h1, ln2, p->w1 + lfc, p->b1 + (size_t)l * F, T, C, F);
        R(sq_relu_forward)(r, h1, TF);
        R(sq_dropout_forward)(rd, w->m_ffn1 + l * sTF, r, T, F, pd, seed, step, SITE(l, 1));
        R(sq_linear_forward)(h2, rd, p->w2 + lfc, p->b2 + lc, T, F, C);
        R(sq_dropout_forward)(h2d, w->m_ffn2 + l * sTC, h2, T, C, pd, seed, step, SITE(l, 2));
        R(sq_residual_forward)(xn, ln2, h2d, TC);
    }
    R(sq_layernorm_forward)(w->out, w->lnf_mean, w->lnf_rstd, w->x + (size_t)L * sTC,
                            p->lnfw, p->lnfb, T, C, eps);
}

double R(sq_sasrec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                         const sq_packed *b, int loss, R(sq_sasrec) *g,
                         int *count)
{
    const sq_sasrec_config *c = &m->cfg;
    int C = c->dim, V1 = (int)c->n_items + 1;
    real *dh = g ? w->dout : NULL, *dE = g ? g->p.item_emb : NULL;
    if (dh)
        memset(dh, 0, (size_t)b->T * C * sizeof *dh);
    if (loss == SQ_LOSS_BCE)
        return R(sq_bce_sampled)(dh, dE, w->out, m->p.item_emb, b->rows, b->targets,
                                 b->neg, b->n, b->K, C, 1, count);
    return R(sq_ce_full)(dh, dE, w->ce, w->out, m->p.item_emb, b->rows, b->targets,
                         b->n, C, V1, w->ce_chunk, 1, count);
}

void R(sq_sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                           const sq_packed *b, R(sq_sasrec) *g)
{
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    R(sq_sasrec_params) *gp = &g->p;
    int T = b->T, C = c->dim, F = c->ffn, H = c->n_heads, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    size_t sA = (size_t)H * w->cap.att;
    real pd = (real)c->dropout;
    size_t bc = TC * sizeof(real), bf = TF * sizeof(real);

    /* h = LNf(x[L]) */
    memset(w->dx, 0, bc);
    R(sq_layernorm_backward)(w->dx, gp->lnfw, gp->lnfb, w->dout, w->x + (size_t)L * sTC,
                             p->lnfw, w->lnf_mean, w->lnf_rstd, T, C);
    for (int l = L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * C, lcc = (size_t)l * C * C, lfc = (size_t)l * F * C;
        const real *x = w->x + l * sTC, *ln1 = w->ln1 + l * sTC, *q = w->q + l * sTC;
        const real *k = w->k + l * sTC, *v = w->v + l * sTC, *atty = w->atty + l * sTC;
        const real *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        const real *h1 = w->h1 + l * sTF, *rd = w->rd + l * sTF;

        /* x[l+1] = y + dropout(h2),  h2 = W2 rd + b2 */
        memcpy(w->dy, w->dx, bc);
        memset(w->dh2, 0, bc);
        R(sq_dropout_backward)(w->dh2, w->dx, w->m_ffn2 + l * sTC, TC, pd);
        memset(w->dF1, 0, bf);
        R(sq_linear_backward)(w->dF1, gp->w2 + lfc, gp->b2 + lc, w->dh2, rd,
                              p->w2 + lfc, T, F, C);
        /* rd = dropout(relu(h1)),  h1 = W1 y + b1 */
        memset(w->dF2, 0, bf);
        R(sq_dropout_backward)(w->dF2, w->dF1, w->m_ffn1 + l * sTF, TF, pd);
        memset(w->dF3, 0, bf);
        R(sq_relu_backward)(w->dF3, w->dF2, h1, TF);
        R(sq_linear_backward)(w->dy, gp->w1 + lfc, gp->b1 + (size_t)l * F, w->dF3, ln2,
                              p->w1 + lfc, T, C, F);
        /* y = LN2(xmid) */
        memset(w->dxmid, 0, bc);
        R(sq_layernorm_backward)(w->dxmid, gp->ln2w + lc, gp->ln2b + lc, w->dy, xmid,
                                 p->ln2w + lc, w->ln2_mean + l * sT, w->ln2_rstd + l * sT,
                                 T, C);
        /* xmid = q + dropout(proj),  proj = Wo atty + bo */
        memcpy(w->dln1, w->dxmid, bc);
        memset(w->dproj, 0, bc);
        R(sq_dropout_backward)(w->dproj, w->dxmid, w->m_att + l * sTC, TC, pd);
        memset(w->datty, 0, bc);
        R(sq_linear_backward)(w->datty, gp->wo + lcc, gp->bo + lc, w->dproj, atty,
                              p->wo + lcc, T, C, C);
        /* atty = attention(Q, K, V) */
        memset(w->dq, 0, bc);
        memset(w->dk, 0, bc);
        memset(w->dv, 0, bc);
        R(sq_attention_backward)(w->dq, w->dk, w->dv, w->datty, atty, q, k, v,
                                 w->att + l * sA, C, b->off, b->B, H, C, 1);
        /* Q = Wq ln1 + bq, K = Wk x + bk, V = Wv x + bv, ln1 = LN1(x) */
        R(sq_linear_backward)(w->dln1, gp->wq + lcc, gp->bq + lc, w->dq, ln1,
                              p->wq + lcc, T, C, C);
        memset(w->dx, 0, bc);
        R(sq_linear_backward)(w->dx, gp->wk + lcc, gp->bk + lc, w->dk, x,
                              p->wk + lcc, T, C, C);
        R(sq_linear_backward)(w->dx, gp->wv + lcc, gp->bv + lc, w->dv, x,
                              p->wv + lcc, T, C, C);
        R(sq_layernorm_backward)(w->dx, gp->ln1w + lc, gp->ln1b + lc, w->dln1, x,
                                 p->ln1w + lc, w->ln1_mean + l * sT, w->ln1_rstd + l * sT,
                                 T, C);
    }
    /* x0 = dropout(E[ids] sqrt(C) + P[pos]) */
    memset(w->demb, 0, bc);
    R(sq_dropout_backward)(w->demb, w->dx, w->m_emb, TC, pd);
    memset(w->dy, 0, bc);
    R(sq_posemb_backward)(w->dy, gp->pos_emb, w->demb, b->pos, T, C);
    R(sq_embedding_backward)(gp->item_emb, w->dy, b->ids, T, C, r_sqrt((real)C));
}

/* ------------------------------------------------------------------------ */
/* Model files and scoring (float build only)                               */

#if !SQ_REAL_IS_F64

int sq_sasrec_add_tensors(const sq_sasrec *m, sq_modelfile *mf, sq_err *e)
{
    const real *mem = m->mem;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(&m->cfg, i, s);
        if (sq_modelfile_add(mf, tensor_names[i], SQ_F32, nd, s, mem, e))
            return e->code;
        mem += m->sizes[i];
    }
    return 0;
}

int sq_sasrec_get_tensors(sq_sasrec *m, const sq_modelfile *mf, const char *path,
                          sq_err *e)
{
    real *mem = m->mem;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(&m->cfg, i, s);
        const sq_tensor *t = sq_modelfile_find(mf, tensor_names[i]);
        if (!t)
            return sq_fail(e, SQ_EX_DATA, "%s: no tensor %s", path, tensor_names[i]);
        int ok = t->dtype == SQ_F32 && t->ndim == nd &&
                 t->bytes == m->sizes[i] * sizeof(float);
        for (int d = 0; ok && d < nd; d++)
            ok = t->shape[d] == s[d];
        if (!ok)
            return sq_fail(e, SQ_EX_DATA, "%s: tensor %s: type or shape does not match "
                           "the config", path, tensor_names[i]);
        memcpy(mem, t->data, m->sizes[i] * sizeof(float));
        mem += m->sizes[i];
    }
    return 0;
}

int sq_sasrec_scores(const sq_sasrec *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_sasrec_config *c = &m->cfg;
    int B = hist->B, N = c->max_len, C = c->dim, V1 = (int)c->n_items + 1;
    if (B <= 0)
        return 0;
    /* Inputs: the newest N items of each history; an empty history is one
     * padding token (id 0) at position N - 1. */
    size_t T = 0, att = 0;
    for (int b = 0; b < B; b++) {
        size_t len = hist->len[b] < (uint32_t)N ? hist->len[b] : (uint32_t)N;
        if (len == 0)
            len = 1;
        T += len;
        att += len * len;
    }
    if (T > (size_t)INT32_MAX / 2)
        return sq_fail(e, SQ_EX_USAGE, "scoring batch too large");
    sq_packed pb = {0};
    int *ints = malloc((2 * T + (size_t)B + 1) * sizeof *ints);
    float *hl = malloc((size_t)B * C * sizeof *hl);
    if (!ints || !hl) {
        free(ints);
        free(hl);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    }
    pb.ids = ints;
    pb.pos = ints + T;
    pb.off = ints + 2 * T;
    pb.B = B;
    pb.T = (int)T;
    int o = 0;
    pb.off[0] = 0;
    for (int b = 0; b < B; b++) {
        uint32_t n = hist->len[b], len = n < (uint32_t)N ? n : (uint32_t)N;
        const uint32_t *it = hist->items + hist->off[b] + (n - len);
        for (uint32_t t = 0; t < len; t++) {
            if (it[t] > c->n_items) {
                free(ints);
                free(hl);
                return sq_fail(e, SQ_EX_DATA, "item %" PRIu32 " > n_items %" PRIu32,
                               it[t], c->n_items);
            }
            pb.ids[o + (int)t] = (int)it[t];
            pb.pos[o + (int)t] = N - (int)len + (int)t;
        }
        if (len == 0) {
            pb.ids[o] = 0;
            pb.pos[o] = N - 1;
            len = 1;
        }
        o += (int)len;
        pb.off[b + 1] = o;
    }
    sq_sasrec_cap cap = {.B = B, .T = (int)T, .n = 0, .att = att, .K = 0, .train = 0};
    sq_sasrec_work w;
    if (sq_sasrec_work_alloc(&w, c, &cap, e)) {
        free(ints);
        free(hl);
        return e->code;
    }
    sq_sasrec_forward(m, &w, &pb, 0, 0, 0);
    for (int b = 0; b < B; b++)
        memcpy(hl + (size_t)b * C, w.out + (size_t)(pb.off[b + 1] - 1) * C,
               (size_t)C * sizeof *hl);
    /* scores[B, V1] = hl[B, C] E[V1, C]^T; column 0 (padding) gets 0 */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, V1, C, 1, hl, C,
                m->p.item_emb, C, 0, scores, V1);
    sq_sasrec_work_free(&w);
    free(ints);
    free(hl);
    return 0;
}

static int view_scores(sq_model *mm, const sq_batch *b, float *scores, sq_err *e)
{
    return sq_sasrec_scores(mm->impl, b, scores, e);
}

void sq_sasrec_model_view(sq_model *out, const sq_sasrec *m)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "sasrec");
    out->n_items = m->cfg.n_items;
    out->impl = (void *)m;
    out->scores = view_scores;
}

static void owned_free(sq_model *mm)
{
    sq_sasrec *m = mm->impl;
    if (m) {
        sq_sasrec_free(m);
        free(m);
    }
    mm->impl = NULL;
}

int sq_sasrec_load(sq_model *mm, sq_modelfile *mf, sq_err *e)
{
    sq_sasrec_config c;
    if (sq_sasrec_config_read(&c, mf, "sasrec", e))
        return e->code;
    sq_sasrec *m = malloc(sizeof *m);
    if (!m)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (sq_sasrec_alloc(m, &c, e) || sq_sasrec_get_tensors(m, mf, "sasrec", e)) {
        sq_sasrec_free(m);
        free(m);
        return e->code;
    }
    mm->n_items = c.n_items;
    mm->impl = m;
    mm->scores = view_scores;
    mm->free_impl = owned_free;
    return 0;
}

#endif /* !SQ_REAL_IS_F64 */
