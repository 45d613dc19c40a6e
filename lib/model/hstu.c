/* hstu.c - HSTU (Zhai et al. 2024, "Actions Speak Louder than Words:
 * Trillion-Parameter Sequential Transducers for Generative
 * Recommendations"): its layers for sequential recommendation, as ELASTIC's
 * Table 2 uses them, a flat model (flat.h: flat.c does the options, files,
 * loss, step and scoring).
 *
 * THE MODEL, on the packed rows (ops.h) of a batch, d = --dim:
 *   X0 = dropout(E[ids] sqrt(d) + P[pos])      item table E tied to the output
 *   per layer l (Eq. 1-3 of the paper):
 *     U, V, Q, K = split(SiLU(LN1(X) W_uvqk))   W_uvqk [4d, d], no bias; d/H per head
 *     A = sum_{j <= i} SiLU(Q_i K_j + rab[i - j]) V_j / max_len   per head (attn_silu.h)
 *     X = X + W_o dropout(U * LN2(A)) + b_o     LN2 over all d columns (every head)
 *   h = LN_f(X) at the loss entries' rows; score(item) = h . E[item].
 * Each row sees only its own and older rows: every row has its state, so
 * every --target trains it.
 *
 * DECISIONS (generative-recommenders, the authors' code, is read for what
 * the paper leaves open; its ML-1M config gives the defaults):
 *   - the pointwise weights are divided by max_len, a constant: the code
 *     divides by the fixed padded length N of its dense batches,
 *     so a row's state never depends on the rows after it;
 *   - rab is the positional part rab^p only, one weight per head and
 *     distance i - j (0 .. max_len-1) per layer; the code shares one bias
 *     over the heads (the same at the default --heads 1) and adds time
 *     buckets rab^t from timestamps, which a SQRC stream does not carry;
 *   - dropout where the code puts it: on the embeddings and on the gated
 *     U * LN2(A) before W_o (no attention dropout: the code's rate is 0);
 *   - the layer norms have learned gains and biases (the code's have none:
 *     a superset that starts the same), eps 1e-6 (the code's);
 *   - the final norm is a layer norm: the code's ML-1M run L2-normalises h
 *     and the items and divides by a temperature 0.05 inside a sampled
 *     softmax; flat.c scores h . E[i] with full CE or BCE, for which a
 *     learned-gain layer norm (the code's other user_embedding_norm) fits;
 *   - positions are the suite's (ops.h: the newest item at max_len - 1, as
 *     SASRec and ELASTIC here); the code counts from the oldest;
 *   - init as the code: E, W_uvqk, rab ~ N(0, 0.02^2) truncated at 2 sd,
 *     P truncated with sd sqrt(1/d), W_o Xavier normal (the code: Xavier
 *     uniform, the same variance), biases 0, norms 1 and 0.
 *
 * Written over `real` and compiled twice (float, and double as _f64, which
 * tests/unit/test_hstu.c finite-differences whole). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "attn_silu.h"
#include "flat.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    sq_flat_head h;
    int n_layers, n_heads, dim;
    double dropout, ln_eps;
} sq_hstu_config;

/* The size per head of Q and K (the code's dqk) and of V and U (its dv):
 * both d / H here, as in the code's ML-1M config (50 = 50 / 1). */
static int head_dim(const sq_hstu_config *c)
{
    return c->dim / c->n_heads;
}

/* The tensors, in table (= storage) order. */
enum { T_ITEM, T_POS, T_LN1W, T_LN1B, T_UVQK, T_RAB, T_LN2W, T_LN2B, T_OW, T_OB, T_LNFW,
       T_LNFB, T_N };

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

typedef struct {
    sq_ctx cx;
    sq_flat_cap cap;
    real *emb, *X;             /* [T, C]; X: L + 1 layer inputs [T, C] */
    uint8_t *m_emb;            /* [T, C] */
    real *ln1, *mean1, *rstd1; /* per layer: [T, C], [T], [T] */
    real *pre, *act;           /* per layer: [T, 4C] before and after SiLU */
    real *att, *ln2, *mean2, *rstd2; /* per layer: [T, C], [T, C], [T], [T] */
    real *gate;                /* per layer: [T, C] = U * LN2(A), dropped out in place */
    uint8_t *m_gate;           /* per layer: [T, C] */
    real *xg, *h, *meanf, *rstdf; /* [n, C], [n, C], [n], [n] */
    /* backward */
    real *dX, *dxg, *dln1, *dact, *dpre, *dE[2], *scratch; /* dE: [T, C] each */
    void *mem;
} R(hstu_work);

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

#define TAKE(ptr, type, count) do { \
        size_t o_ = at; \
        at += align64((size_t)(count) * sizeof(type)); \
        if (base) (ptr) = (type *)(void *)(base + o_); \
    } while (0)

/* Carves w's buffers out of base (NULL: only measures); returns bytes. */
static size_t R(carve)(R(hstu_work) *w, const sq_hstu_config *c, char *base)
{
    size_t at = 0, T = (size_t)w->cap.T, n = (size_t)w->cap.n, C = (size_t)c->dim;
    size_t L = (size_t)c->n_layers, U = 4 * C, E = C;
    TAKE(w->emb, real, T * C);
    TAKE(w->X, real, (L + 1) * T * C);
    TAKE(w->m_emb, uint8_t, T * C);
    TAKE(w->ln1, real, L * T * C);
    TAKE(w->mean1, real, L * T);
    TAKE(w->rstd1, real, L * T);
    TAKE(w->pre, real, L * T * U);
    TAKE(w->act, real, L * T * U);
    TAKE(w->att, real, L * T * E);
    TAKE(w->ln2, real, L * T * E);
    TAKE(w->mean2, real, L * T);
    TAKE(w->rstd2, real, L * T);
    TAKE(w->gate, real, L * T * E);
    TAKE(w->m_gate, uint8_t, L * T * E);
    TAKE(w->xg, real, n * C);
    TAKE(w->h, real, n * C);
    TAKE(w->meanf, real, n);
    TAKE(w->rstdf, real, n);
    if (w->cap.train) {
        TAKE(w->dX, real, T * C);
        TAKE(w->dxg, real, n * C);
        TAKE(w->dln1, real, T * C);
        TAKE(w->dact, real, T * U);
        TAKE(w->dpre, real, T * U);
        TAKE(w->dE[0], real, T * E);
        TAKE(w->dE[1], real, T * E);
        TAKE(w->scratch, real,
             sq_attn_silu_scratch_size(w->cap.B, c->n_heads, c->h.max_len));
    }
    return at;
}
#undef TAKE

int R(sq_hstu_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work, sq_err *e);
void R(sq_hstu_work_free)(void *work);
const real *R(sq_hstu_forward)(const R(sq_flat) *m, void *work, const sq_packed *b, int train,
                               uint64_t seed, uint64_t step);
void R(sq_hstu_backward)(const R(sq_flat) *m, void *work, const sq_packed *b, const real *dh,
                         R(sq_flat) *g);

int R(sq_hstu_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work, sq_err *e)
{
    const sq_hstu_config *c = m->cfg;
    R(hstu_work) *w = calloc(1, sizeof *w);
    *work = w;
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    w->cx = m->cx;
    w->cap = *cap;
    w->cap.T = cap->T > 0 ? cap->T : 1;
    w->cap.n = cap->n > 0 ? cap->n : 1;
    w->cap.B = cap->B > 0 ? cap->B : 1;
    size_t bytes = R(carve)(w, c, NULL);
    if (!(w->mem = sq_ctx_alloc(&w->cx, bytes, e)))
        return e->code;
    R(carve)(w, c, w->mem);
    return 0;
}

void R(sq_hstu_work_free)(void *work)
{
    R(hstu_work) *w = work;
    if (!w)
        return;
    if (w->mem)
        sq_ctx_free(&w->cx, w->mem);
    free(w);
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                     */

/* Dropout sites: 0 the embeddings, 1 + l layer l's gate. */
#define SITE_EMB 0
#define SITE(l) (1 + (uint64_t)(l))

/* Layer l's parameters (or gradients): pointers into a flat model's tensors. */
typedef struct {
    real *ln1w, *ln1b, *uvqk, *rab, *ln2w, *ln2b, *ow, *ob;
} R(layer_p);

static R(layer_p) R(layer_of)(const R(sq_flat) *m, const sq_hstu_config *c, int l)
{
    size_t C = (size_t)c->dim, H = (size_t)c->n_heads;
    R(layer_p) p = {m->t[T_LN1W] + l * C, m->t[T_LN1B] + l * C,
                    m->t[T_UVQK] + l * 4 * C * C, m->t[T_RAB] + l * H * (size_t)c->h.max_len,
                    m->t[T_LN2W] + l * C, m->t[T_LN2B] + l * C,
                    m->t[T_OW] + l * C * C, m->t[T_OB] + l * C};
    return p;
}

/* The per-layer cache of layer l in w (pointers at layer l's slot). */
typedef struct {
    real *Xin, *Xout, *ln1, *mean1, *rstd1, *pre, *act, *att, *ln2, *mean2, *rstd2, *gate;
    uint8_t *m_gate;
} R(layer_c);

static R(layer_c) R(cache_of)(const R(hstu_work) *w, const sq_hstu_config *c, int l)
{
    size_t T = (size_t)w->cap.T, C = (size_t)c->dim, E = C, U = 4 * C;
    R(layer_c) k = {w->X + l * T * C, w->X + (l + 1) * T * C, w->ln1 + l * T * C,
                    w->mean1 + l * T, w->rstd1 + l * T, w->pre + l * T * U,
                    w->act + l * T * U, w->att + l * T * E, w->ln2 + l * T * E,
                    w->mean2 + l * T, w->rstd2 + l * T, w->gate + l * T * E,
                    w->m_gate + l * T * E};
    return k;
}

/* A row of the projection [T, 4d] holds U, V, Q, K, d columns each (head
 * h: columns h d/H .. (h+1) d/H - 1 of each). */
#define COL_U(c) 0
#define COL_V(c) ((c)->dim)
#define COL_Q(c) (2 * (c)->dim)
#define COL_K(c) (3 * (c)->dim)

static void R(layer_forward)(const R(sq_flat) *m, const sq_hstu_config *c, R(hstu_work) *w,
                             const sq_packed *b, int l, real pd, uint64_t seed, uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    R(layer_p) p = R(layer_of)(m, c, l);
    R(layer_c) k = R(cache_of)(w, c, l);
    int T = b->T, C = c->dim, H = c->n_heads, hd = head_dim(c), E = C, U = 4 * C;
    int N = c->h.max_len;
    real eps = (real)c->ln_eps;
    R(sq_layernorm_forward)(cx, k.ln1, k.mean1, k.rstd1, k.Xin, p.ln1w, p.ln1b, T, C, eps);
    R(sq_linear_forward)(cx, k.pre, k.ln1, p.uvqk, NULL, T, C, U);
    R(sq_silu_forward)(cx, k.act, k.pre, U, T, U);
    R(sq_attn_silu_forward)(cx, k.att, k.act + COL_Q(c), k.act + COL_K(c), k.act + COL_V(c), U,
                            p.rab, b->off, b->B, H, hd, hd, N, (real)1 / N);
    R(sq_layernorm_forward)(cx, k.ln2, k.mean2, k.rstd2, k.att, p.ln2w, p.ln2b, T, E, eps);
    R(sq_gate_forward)(cx, k.gate, k.act + COL_U(c), U, k.ln2, E, T, E);
    R(sq_dropout_forward)(cx, k.gate, k.m_gate, k.gate, T, E, pd, seed, step, SITE(l));
    R(sq_linear_forward)(cx, k.Xout, k.gate, p.ow, p.ob, T, E, C);
    R(sq_residual_forward)(cx, k.Xout, k.Xout, k.Xin, (size_t)T * C);
}

const real *R(sq_hstu_forward)(const R(sq_flat) *m, void *work, const sq_packed *b, int train,
                               uint64_t seed, uint64_t step)
{
    const sq_ctx *cx = &m->cx;
    const sq_hstu_config *c = m->cfg;
    R(hstu_work) *w = work;
    int T = b->T, C = c->dim, L = c->n_layers;
    real pd = train ? (real)c->dropout : 0;
    R(sq_embedding_forward)(cx, w->emb, m->t[T_ITEM], b->ids, T, C, r_sqrt((real)C));
    R(sq_posemb_forward)(cx, w->emb, w->emb, m->t[T_POS], b->pos, T, C);
    R(sq_dropout_forward)(cx, w->X, w->m_emb, w->emb, T, C, pd, seed, step, SITE_EMB);
    for (int l = 0; l < L; l++)
        R(layer_forward)(m, c, w, b, l, pd, seed, step);
    R(sq_gather_rows)(cx, w->xg, w->X + (size_t)L * w->cap.T * C, b->rows, b->n, C);
    R(sq_layernorm_forward)(cx, w->h, w->meanf, w->rstdf, w->xg, m->t[T_LNFW], m->t[T_LNFB],
                            b->n, C, (real)c->ln_eps);
    return w->h;
}

/* Back through layer l: w->dX holds d X[l+1] on entry and d X[l] on exit
 * (the residual keeps it). */
static void R(layer_backward)(const R(sq_flat) *m, const sq_hstu_config *c, R(hstu_work) *w,
                              const sq_packed *b, int l, R(sq_flat) *g)
{
    const sq_ctx *cx = &m->cx;
    R(layer_p) p = R(layer_of)(m, c, l), gp = R(layer_of)(g, c, l);
    R(layer_c) k = R(cache_of)(w, c, l);
    int T = b->T, C = c->dim, H = c->n_heads, hd = head_dim(c), E = C, U = 4 * C;
    int N = c->h.max_len;
    size_t TE = (size_t)T * E, TU = (size_t)T * U;
    real *d0 = w->dE[0], *d1 = w->dE[1];
    /* d dropout(gate) */
    R(sq_linear_backward_to)(cx, d0, gp.ow, gp.ob, w->dX, k.gate, p.ow, T, E, C);
    /* d gate */
    R(sq_dropout_backward_to)(cx, d1, d0, k.m_gate, TE, (real)c->dropout);
    R(sq_zero)(cx, w->dact, TU);
    R(sq_zero)(cx, d0, TE); /* d LN2(A) */
    R(sq_gate_backward)(cx, w->dact + COL_U(c), d0, d1, k.act + COL_U(c), U, k.ln2, E, T, E);
    /* d A */
    R(sq_layernorm_backward_to)(cx, d1, gp.ln2w, gp.ln2b, d0, k.att, p.ln2w, k.mean2, k.rstd2,
                                T, E);
    R(sq_attn_silu_backward)(cx, w->dact + COL_Q(c), w->dact + COL_K(c), w->dact + COL_V(c),
                             gp.rab, w->scratch, d1, k.act + COL_Q(c), k.act + COL_K(c),
                             k.act + COL_V(c), U, p.rab, b->off, b->B, H, hd, hd, N,
                             (real)1 / N);
    R(sq_zero)(cx, w->dpre, TU);
    R(sq_silu_backward)(cx, w->dpre, w->dact, k.pre, U, T, U);
    R(sq_linear_backward_to)(cx, w->dln1, gp.uvqk, NULL, w->dpre, k.ln1, p.uvqk, T, C, U);
    R(sq_layernorm_backward)(cx, w->dX, gp.ln1w, gp.ln1b, w->dln1, k.Xin, p.ln1w, k.mean1,
                             k.rstd1, T, C);
}

void R(sq_hstu_backward)(const R(sq_flat) *m, void *work, const sq_packed *b, const real *dh,
                         R(sq_flat) *g)
{
    const sq_ctx *cx = &m->cx;
    const sq_hstu_config *c = m->cfg;
    R(hstu_work) *w = work;
    int T = b->T, C = c->dim, L = c->n_layers;
    size_t TC = (size_t)T * C;
    R(sq_layernorm_backward_to)(cx, w->dxg, g->t[T_LNFW], g->t[T_LNFB], dh, w->xg, m->t[T_LNFW],
                                w->meanf, w->rstdf, b->n, C);
    R(sq_zero)(cx, w->dX, TC);
    R(sq_scatter_add_rows)(cx, w->dX, w->dxg, b->rows, b->n, C);
    for (int l = L - 1; l >= 0; l--)
        R(layer_backward)(m, c, w, b, l, g);
    /* X0 = dropout(E[ids] sqrt(C) + P[pos]) */
    real *demb = w->dln1; /* spent */
    R(sq_dropout_backward_to)(cx, demb, w->dX, w->m_emb, TC, (real)c->dropout);
    R(sq_zero)(cx, w->dX, TC);
    R(sq_posemb_backward)(cx, w->dX, g->t[T_POS], demb, b->pos, T, C);
    R(sq_embedding_backward)(cx, g->t[T_ITEM], w->dX, b->ids, T, C, r_sqrt((real)C));
}

/* ------------------------------------------------------------------------ */
/* Options, tensors, the def (once, in the float build)                     */

#if !SQ_REAL_IS_F64

/* The double build's twins (hstu_f64.o), for the gradient checks. */
int sq_hstu_work_alloc_f64(const sq_flat_f64 *m, const sq_flat_cap *cap, void **work,
                           sq_err *e);
void sq_hstu_work_free_f64(void *work);
const double *sq_hstu_forward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                                  int train, uint64_t seed, uint64_t step);
void sq_hstu_backward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                          const double *dh, sq_flat_f64 *g);

#define OFF(f) offsetof(sq_hstu_config, f)
static const sq_opt hstu_opts[] = {
    {.name = "layers", .type = SQ_OPT_INT, .offset = OFF(n_layers), .def = "2", .lo = 1,
     .hi = 64, .arg = "N", .help = "HSTU layers (default 2)"},
    {.name = "heads", .type = SQ_OPT_INT, .offset = OFF(n_heads), .def = "1", .lo = 1,
     .hi = 8192, .arg = "N", .help = "attention heads, dividing --dim (hstu: default 1)"},
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "50", .lo = 1, .hi = 8192,
     .arg = "N", .help = "embedding size d (hstu: default 50)"},
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(h.max_len), .def = "200", .lo = 1,
     .hi = 65536, .arg = "N", .help = "newest N items per sequence (hstu: default 200)"},
    {.name = "dropout", .type = SQ_OPT_REAL, .offset = OFF(dropout), .def = "0.2", .lo = 0,
     .hi = 1, .hi_open = 1, .arg = "P", .help = "dropout rate (default 0.2)"},
    {.key = "ln_eps", .type = SQ_OPT_REAL, .offset = OFF(ln_eps), .def = "1e-6", .lo = 0,
     .hi = 1, .lo_open = 1},
    {0},
};
#undef OFF

/* Shape symbols: W n_items + 1, N max_len, C dim, L layers, H heads,
 * U 4 dim (U, V, Q, K). */
static const sq_tensor_desc hstu_tensors[T_N] = {
    [T_ITEM] = {"item_emb", 100, 1, SQ_INIT_TRUNC, "WC"},
    [T_POS] = {"pos_emb", 101, 1, SQ_INIT_TRUNC, "NC"},
    [T_LN1W] = {"ln1_w", 102, 0, SQ_INIT_ONE, "LC"},
    [T_LN1B] = {"ln1_b", 103, 0, SQ_INIT_ZERO, "LC"},
    [T_UVQK] = {"uvqk", 104, 1, SQ_INIT_TRUNC, "LUC"},
    [T_RAB] = {"rab", 105, 0, SQ_INIT_TRUNC, "LHN"},
    [T_LN2W] = {"ln2_w", 106, 0, SQ_INIT_ONE, "LC"},
    [T_LN2B] = {"ln2_b", 107, 0, SQ_INIT_ZERO, "LC"},
    [T_OW] = {"o_w", 108, 1, SQ_INIT_WEIGHT, "LCC"},
    [T_OB] = {"o_b", 109, 0, SQ_INIT_ZERO, "LC"},
    [T_LNFW] = {"lnf_w", 110, 0, SQ_INIT_ONE, "C"},
    [T_LNFB] = {"lnf_b", 111, 0, SQ_INIT_ZERO, "C"},
};

static int hstu_check(const void *cfg, sq_err *e)
{
    const sq_hstu_config *c = cfg;
    if (c->dim % c->n_heads)
        return sq_fail(e, SQ_EX_USAGE, "--heads %d must divide --dim %d", c->n_heads, c->dim);
    return 0;
}

/* The widest head the GPU's SiLU attention holds (cuda/k_silu.cu: four
 * dimensions a lane of a warp). */
#define HSTU_GPU_HEAD_MAX 128

/* --device cuda: every op of the forward and backward has a CUDA twin
 * (the SiLU attention, SiLU and the gate: k_silu.cu, k_hstu.cu); the
 * attention's heads must fit its warps. */
static int hstu_gpu_check(const void *cfg, sq_err *e)
{
    const sq_hstu_config *c = cfg;
    if (head_dim(c) > HSTU_GPU_HEAD_MAX)
        return sq_fail(e, SQ_EX_USAGE, "--device cuda: --model hstu's heads have %d dimensions "
                       "(--dim %d / --heads %d), the GPU's at most %d: raise --heads, or "
                       "train on the CPU", head_dim(c), c->dim, c->n_heads,
                       HSTU_GPU_HEAD_MAX);
    return 0;
}

static int hstu_tensors_of(const void *cfg, sq_tensor_set *s, sq_err *e)
{
    const sq_hstu_config *c = cfg;
    sq_dims d = {{0}};
    sq_dims_set(&d, 'W', (uint64_t)c->h.n_items + 1);
    sq_dims_set(&d, 'N', (uint64_t)c->h.max_len);
    sq_dims_set(&d, 'C', (uint64_t)c->dim);
    sq_dims_set(&d, 'L', (uint64_t)c->n_layers);
    sq_dims_set(&d, 'H', (uint64_t)c->n_heads);
    sq_dims_set(&d, 'U', 4 * (uint64_t)c->dim);
    memset(s, 0, sizeof *s);
    if (sq_tensors_add(s, hstu_tensors, T_N, &d, 1, 0, e))
        return e->code;
    sq_tensors_layout(s);
    return 0;
}

/* The code's draws: P with sd sqrt(1/d), the rest 0.02. */
static double hstu_trunc_sd(const void *ctx, const sq_tensor_set *s, int i)
{
    (void)ctx;
    if (strcmp(s->desc[i]->name, "pos_emb") == 0)
        return 1 / sqrt((double)s->shape[i][1]);
    return 0.02;
}

const sq_flat_def sq_flat_hstu = {
    .name = "hstu",
    .opts = hstu_opts,
    .cfg_size = sizeof(sq_hstu_config),
    .check = hstu_check,
    .tensors = hstu_tensors_of,
    .out = "item_emb",
    .init = {.xavier = 1, .trunc_sd = hstu_trunc_sd},
    .gpu_check = hstu_gpu_check,
    .f = {sq_hstu_work_alloc, sq_hstu_work_free, sq_hstu_forward, sq_hstu_backward},
    .d = {sq_hstu_work_alloc_f64, sq_hstu_work_free_f64, sq_hstu_forward_f64,
          sq_hstu_backward_f64},
};

SQ_FLAT_MODEL(hstu, "HSTU: pointwise SiLU attention with relative position bias, gated "
              "(Zhai et al. 2024)", NULL);

#endif
