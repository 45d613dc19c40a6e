/* gru4rec.c - GRU4Rec (Hidasi et al., ICLR 2016) in RecBole's sequential
 * form, a flat model (flat.h):
 *
 *     x_t = dropout(E[item_t])              E [V1, dim], row 0 padding
 *     h^1 = GRU_1(x), ..., h^L = GRU_L(h^{L-1})   (gru.h, hidden units each,
 *                                           h_0 = 0 per sequence)
 *     s_t = W_d h^L_t + b_d                 dense: hidden -> dim
 *     score(i) = s_t . E[i]                 the item table is the output table
 *
 * Every row of a sequence has its own state (the GRU is causal), so every
 * --target trains it. The dense layer runs on the loss entries' rows only.
 * Options and decisions: seqrec-train(1), THE GRU4REC MODEL.
 *
 * Written over `real` and compiled twice (float, and double as _f64; see
 * real.h); the config, option table and def exist once, in the float
 * build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "flat.h"
#include "gru.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    sq_flat_head h;
    int dim;        /* embedding size (RecBole embedding_size) */
    int hidden;     /* GRU units (hidden_size) */
    int layers;     /* stacked GRU layers (num_layers) */
    double dropout; /* on the item embeddings (dropout_prob) */
} sq_gru4rec_config;

/* The tensors, in table order (m->t[i]). */
enum { T_EMB, T_WIH0, T_WIH, T_WHH, T_BIH, T_BHH, T_DW, T_DB, T_COUNT };

/* The parameters of GRU layer l (pointers into a block of tensors). */
typedef struct {
    real *wih, *whh, *bih, *bhh;
} R(gru_layer);

static R(gru_layer) R(layer_of)(real *const *t, int l, int H)
{
    size_t G = 3 * (size_t)H;
    R(gru_layer) p = {l ? t[T_WIH] + (size_t)(l - 1) * G * H : t[T_WIH0],
                      t[T_WHH] + (size_t)l * G * H, t[T_BIH] + (size_t)l * G,
                      t[T_BHH] + (size_t)l * G};
    return p;
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

typedef struct {
    sq_ctx cx;
    real *emb;      /* [T, dim] the GRU's input, after dropout */
    uint8_t *mask;  /* [T, dim] dropout mask */
    real *X;        /* [L, T, H] every layer's states */
    real *cache;    /* [L, T, 4H] the GRU caches */
    real *scratch;  /* sq_gru_scratch_size */
    real *hs;       /* [n, H] the entries' last-layer states */
    real *out;      /* [n, dim] h, the forward's result */
    real *dhs;      /* [n, H] (train) */
    real *dX[2];    /* [T, max(dim, H)] (train) */
    int T;          /* capacity in rows */
    int dropped;    /* the last forward applied dropout */
} R(gru4rec_work);

void R(sq_gru4rec_work_free)(void *work)
{
    R(gru4rec_work) *w = work;
    if (!w)
        return;
    void *bufs[] = {w->emb, w->mask, w->X, w->cache, w->scratch, w->hs, w->out, w->dhs,
                    w->dX[0], w->dX[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        if (bufs[i])
            sq_ctx_free(&w->cx, bufs[i]);
    free(w);
}

int R(sq_gru4rec_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work,
                             sq_err *e)
{
    const sq_gru4rec_config *c = m->cfg;
    R(gru4rec_work) *w = calloc(1, sizeof *w);
    *work = w;
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    w->cx = m->cx;
    w->T = cap->T;
    size_t T = (size_t)cap->T, n = (size_t)cap->n, E = (size_t)c->dim, H = (size_t)c->hidden;
    size_t L = (size_t)c->layers, wide = E > H ? E : H, r = sizeof(real);
    const sq_ctx *cx = &m->cx;
    if (!(w->emb = sq_ctx_alloc(cx, T * E * r, e)) || !(w->mask = sq_ctx_alloc(cx, T * E, e)) ||
        !(w->X = sq_ctx_alloc(cx, L * T * H * r, e)) ||
        !(w->cache = sq_ctx_alloc(cx, L * sq_gru_cache_size(cap->T, c->hidden) * r, e)) ||
        !(w->scratch = sq_ctx_alloc(cx, sq_gru_scratch_size(cap->B, cap->T, c->hidden) * r,
                                    e)) ||
        !(w->hs = sq_ctx_alloc(cx, n * H * r, e)) || !(w->out = sq_ctx_alloc(cx, n * E * r, e)))
        return e->code;
    if (cap->train &&
        (!(w->dhs = sq_ctx_alloc(cx, n * H * r, e)) ||
         !(w->dX[0] = sq_ctx_alloc(cx, T * wide * r, e)) ||
         !(w->dX[1] = sq_ctx_alloc(cx, T * wide * r, e))))
        return e->code;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                     */

const real *R(sq_gru4rec_forward)(const R(sq_flat) *m, void *work, const sq_packed *b,
                                  int train, uint64_t seed, uint64_t step)
{
    const sq_gru4rec_config *c = m->cfg;
    const sq_ctx *cx = &m->cx;
    R(gru4rec_work) *w = work;
    int T = b->T, E = c->dim, H = c->hidden;
    R(sq_embedding_forward)(cx, w->emb, m->t[T_EMB], b->ids, T, E, 1);
    w->dropped = train && c->dropout > 0;
    if (w->dropped)
        R(sq_dropout_forward)(cx, w->emb, w->mask, w->emb, T, E, (real)c->dropout, seed, step,
                              0);
    const real *x = w->emb;
    for (int l = 0; l < c->layers; l++) {
        R(gru_layer) p = R(layer_of)(m->t, l, H);
        real *h = w->X + (size_t)l * w->T * H;
        R(sq_gru_forward)(cx, h, w->cache + (size_t)l * sq_gru_cache_size(w->T, H), w->scratch,
                          x, p.wih, p.whh, p.bih, p.bhh, b->off, b->B, l ? H : E, H);
        x = h;
    }
    R(sq_gather_rows)(cx, w->hs, x, b->rows, b->n, H);
    R(sq_linear_forward)(cx, w->out, w->hs, m->t[T_DW], m->t[T_DB], b->n, H, E);
    return w->out;
}

void R(sq_gru4rec_backward)(const R(sq_flat) *m, void *work, const sq_packed *b,
                            const real *dh, R(sq_flat) *g)
{
    const sq_gru4rec_config *c = m->cfg;
    const sq_ctx *cx = &m->cx;
    R(gru4rec_work) *w = work;
    int T = b->T, E = c->dim, H = c->hidden;
    R(sq_linear_backward_to)(cx, w->dhs, g->t[T_DW], g->t[T_DB], dh, w->hs, m->t[T_DW], b->n, H,
                             E);
    /* d loss / d h^L: the entries' rows, zero elsewhere */
    real *dcur = w->dX[0], *dnext = w->dX[1];
    R(sq_zero)(cx, dcur, (size_t)T * H);
    R(sq_scatter_add_rows)(cx, dcur, w->dhs, b->rows, b->n, H);
    for (int l = c->layers - 1; l >= 0; l--) {
        int in = l ? H : E;
        R(gru_layer) p = R(layer_of)(m->t, l, H), gp = R(layer_of)(g->t, l, H);
        const real *x = l ? w->X + (size_t)(l - 1) * w->T * H : w->emb;
        R(sq_zero)(cx, dnext, (size_t)T * in);
        R(sq_gru_backward)(cx, dnext, gp.wih, gp.whh, gp.bih, gp.bhh, w->scratch, dcur, x,
                           w->X + (size_t)l * w->T * H,
                           w->cache + (size_t)l * sq_gru_cache_size(w->T, H), p.wih, p.whh,
                           b->off, b->B, in, H);
        real *s = dcur;
        dcur = dnext;
        dnext = s;
    }
    if (w->dropped) { /* dcur: d loss / d (dropped embeddings) */
        R(sq_dropout_backward_to)(cx, dnext, dcur, w->mask, (size_t)T * E, (real)c->dropout);
        dcur = dnext;
    }
    R(sq_embedding_backward)(cx, g->t[T_EMB], dcur, b->ids, T, E, 1);
}

#if !SQ_REAL_IS_F64
/* ------------------------------------------------------------------------ */
/* The model (once)                                                         */

int sq_gru4rec_work_alloc_f64(const sq_flat_f64 *m, const sq_flat_cap *cap, void **work,
                              sq_err *e);
void sq_gru4rec_work_free_f64(void *work);
const double *sq_gru4rec_forward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                                     int train, uint64_t seed, uint64_t step);
void sq_gru4rec_backward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                             const double *dh, sq_flat_f64 *g);

#define OFF(field) offsetof(sq_gru4rec_config, field)
static const sq_opt gru4rec_opts[] = {
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "64", .lo = 1,
     .hi = 8192, .arg = "N", .help = "gru4rec: item embedding size (default 64)"},
    {.name = "hidden", .type = SQ_OPT_INT, .offset = OFF(hidden), .def = "128", .lo = 1,
     .hi = 8192, .arg = "N", .help = "gru4rec: GRU hidden units (default 128)"},
    {.name = "layers", .type = SQ_OPT_INT, .offset = OFF(layers), .def = "1", .lo = 1,
     .hi = 16, .arg = "N", .help = "gru4rec: stacked GRU layers (default 1)"},
    {.name = "dropout", .type = SQ_OPT_REAL, .offset = OFF(dropout), .def = "0.3", .lo = 0,
     .hi = 1, .hi_open = 1, .arg = "P",
     .help = "gru4rec: dropout on the item embeddings\n(default 0.3)"},
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(h.max_len), .def = "50", .lo = 1,
     .hi = 65536, .arg = "N", .help = "newest N items per sequence (gru4rec: default 50)"},
    {0},
};
#undef OFF

static const sq_tensor_desc gru4rec_tensors[T_COUNT] = {
    {"item_emb", 100, 1, SQ_INIT_WEIGHT, "WE"},  /* also the output table */
    {"gru_w_ih0", 101, 1, SQ_INIT_WEIGHT, "GE"}, /* layer 0: from the embeddings */
    {"gru_w_ih", 102, 1, SQ_INIT_WEIGHT, "MGH"}, /* layers 1..L-1 */
    {"gru_w_hh", 103, 1, SQ_INIT_WEIGHT, "LGH"},
    {"gru_b_ih", 104, 0, SQ_INIT_ZERO, "LG"},
    {"gru_b_hh", 105, 0, SQ_INIT_ZERO, "LG"},
    {"dense_w", 106, 1, SQ_INIT_WEIGHT, "EH"},
    {"dense_b", 107, 0, SQ_INIT_ZERO, "E"},
};

static int gru4rec_tensors_of(const void *cfg, sq_tensor_set *s, sq_err *e)
{
    const sq_gru4rec_config *c = cfg;
    sq_dims d = {{0}};
    sq_dims_set(&d, 'W', (uint64_t)c->h.n_items + 1);
    sq_dims_set(&d, 'E', (uint64_t)c->dim);
    sq_dims_set(&d, 'H', (uint64_t)c->hidden);
    sq_dims_set(&d, 'G', 3 * (uint64_t)c->hidden);
    sq_dims_set(&d, 'L', (uint64_t)c->layers);
    sq_dims_set(&d, 'M', (uint64_t)c->layers - 1);
    memset(s, 0, sizeof *s);
    if (sq_tensors_add(s, gru4rec_tensors, T_WIH, &d, 1, 0, e) ||
        sq_tensors_add(s, gru4rec_tensors + T_WIH, 1, &d, c->layers > 1, 0, e) ||
        sq_tensors_add(s, gru4rec_tensors + T_WHH, T_COUNT - T_WHH, &d, 1, 0, e))
        return e->code;
    sq_tensors_layout(s);
    return 0;
}

static int gru4rec_check(const void *cfg, sq_err *e)
{
    const sq_gru4rec_config *c = cfg;
    if ((uint64_t)(c->h.n_items + 1) * (uint64_t)c->dim > (uint64_t)1 << 40)
        return sq_fail(e, SQ_EX_USAGE, "--dim %d: the item table is too large", c->dim);
    return 0;
}

const sq_flat_def sq_flat_gru4rec = {
    .name = "gru4rec", .opts = gru4rec_opts, .cfg_size = sizeof(sq_gru4rec_config),
    .check = gru4rec_check, .tensors = gru4rec_tensors_of, .out = "item_emb",
    .init = {.xavier = 1},
    .gpu_check = sq_flat_gpu_any,
    .f = {sq_gru4rec_work_alloc, sq_gru4rec_work_free, sq_gru4rec_forward,
          sq_gru4rec_backward},
    .d = {sq_gru4rec_work_alloc_f64, sq_gru4rec_work_free_f64, sq_gru4rec_forward_f64,
          sq_gru4rec_backward_f64},
};

SQ_FLAT_MODEL(gru4rec, "GRU4Rec: item embeddings, GRU layers, dense (Hidasi et al.)", NULL);
#endif
