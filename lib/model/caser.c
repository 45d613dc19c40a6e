/* caser.c - Caser (Tang and Wang, "Personalized Top-N Sequential
 * Recommendation via Convolutional Sequence Embedding", WSDM 2018) as a flat
 * model (flat.h); where the paper is silent, RecBole's Caser.
 *
 * THE MODEL. Each loss entry (row r of a sequence) reads the window of the
 * L = --max-len items ending at row r, left zero-padded when fewer (padding
 * rows are zero: the embedding of id 0):
 *     X = E[window]                                   [L, d]
 *     o_h = horizontal filters (conv.h): for every height h = 1..L, nh
 *           filters of h x d, relu, max over the L - h + 1 positions [L nh]
 *     o_v = vertical filters: nv weighted sums of the L rows      [nv d]
 *     z = relu(W1 dropout([o_v; o_h]) + b1)                        [d]
 *     h = relu(W2 [z; P_u] + b2)                                   [d]
 * and item i scores h . E[i]: the output table is the input embedding E
 * (RecBole's tying and its fc2; the paper scores [z; P_u] against an output
 * table W' [2d] with a bias b' of its own). P_u is the user's row of the
 * user table (a row per user id of the training stream). Both convolutions
 * carry biases (PyTorch's Conv2d default in RecBole; the paper writes none).
 *
 * Written over `real` and compiled twice (float; double as _f64 for the
 * gradient checks). The options, tensors and the def exist once, in the
 * float build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "conv.h"
#include "flat.h"
#include "ops.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    sq_flat_head h; /* h.max_len is L */
    int dim, nh, nv;
    double dropout;
} sq_caser_config;

/* The tensors: X(name, order, decay, init, shape). Shape symbols: V
 * n_items + 1, U n_users, D dim, L max_len, F nh, G nv, Q nh L (L + 1) / 2
 * (the rows of d reals of every horizontal filter, conv.h's layout), I
 * nv d + L nh (fc1's inputs), E 2d. */
#define CASER_TENSORS(X)                               \
    X(item_emb, 100, 1, SQ_INIT_TRUNC, "VD")           \
    X(user_emb, 101, 1, SQ_INIT_TRUNC, "UD")           \
    X(conv_h, 102, 1, SQ_INIT_TRUNC, "QD")             \
    X(conv_h_b, 103, 0, SQ_INIT_ZERO, "LF")            \
    X(conv_v, 104, 1, SQ_INIT_TRUNC, "GL")             \
    X(conv_v_b, 105, 0, SQ_INIT_ZERO, "G")             \
    X(fc1_w, 106, 1, SQ_INIT_WEIGHT, "DI")             \
    X(fc1_b, 107, 0, SQ_INIT_ZERO, "D")                \
    X(fc2_w, 108, 1, SQ_INIT_WEIGHT, "DE")             \
    X(fc2_b, 109, 0, SQ_INIT_ZERO, "D")

#define CASER_INDEX(name, order, decay, init, shape) CT_##name,
enum { CASER_TENSORS(CASER_INDEX) CT_N };
#undef CASER_INDEX

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

typedef struct {
    sq_ctx cx;
    sq_flat_cap cap;
    int *wid;         /* [n L] host: the window's item ids (0: padding) */
    int *urow;        /* [n] host: the user row of each entry */
    void *mem;        /* the block below, on cx's backend */
    int *arg;         /* [n L nh] the horizontal maxima's positions */
    real *X;          /* [n L, d] the windows' embeddings */
    real *feat;       /* [n, F1] [o_v; o_h] */
    real *featd;      /* [n, F1] after dropout */
    uint8_t *mask;    /* [n, F1] dropout's */
    real *a1, *z;     /* [n, d] fc1 before and after relu */
    real *pu;         /* [n, d] the users' rows */
    real *cat;        /* [n, 2d] [z; P_u] */
    real *a2, *h;     /* [n, d] fc2 before and after relu */
    /* backward (cap.train) */
    real *dX, *dfeat, *dfeatd, *dz, *da1, *dpu, *dcat, *da2;
    int drop;         /* the last forward drew a dropout mask */
} R(caser_work);

static size_t R(align64)(size_t n) { return (n + 63) & ~(size_t)63; }

#define TAKE(ptr, type, count) do { \
        size_t o_ = at; \
        at += R(align64)((size_t)(count) * sizeof(type)); \
        if (base) (ptr) = (type *)(void *)(base + o_); \
    } while (0)

/* Carves the workspace out of base (NULL: only measures); returns bytes. */
static size_t R(carve)(R(caser_work) *w, const sq_caser_config *c, char *base)
{
    size_t at = 0, n = (size_t)(w->cap.n > 0 ? w->cap.n : 1), L = (size_t)c->h.max_len;
    size_t D = (size_t)c->dim, F1 = (size_t)c->nv * D + L * (size_t)c->nh;
    int tr = w->cap.train;
    TAKE(w->arg, int, n * L * (size_t)c->nh);
    TAKE(w->X, real, n * L * D);
    TAKE(w->feat, real, n * F1);
    TAKE(w->featd, real, tr * n * F1);
    TAKE(w->mask, uint8_t, tr * n * F1);
    TAKE(w->a1, real, n * D);
    TAKE(w->z, real, n * D);
    TAKE(w->pu, real, n * D);
    TAKE(w->cat, real, n * 2 * D);
    TAKE(w->a2, real, n * D);
    TAKE(w->h, real, n * D);
    if (tr) {
        TAKE(w->dX, real, n * L * D);
        TAKE(w->dfeat, real, n * F1);
        TAKE(w->dfeatd, real, n * F1);
        TAKE(w->dz, real, n * D);
        TAKE(w->da1, real, n * D);
        TAKE(w->dpu, real, n * D);
        TAKE(w->dcat, real, n * 2 * D);
        TAKE(w->da2, real, n * D);
    }
    return at;
}

void R(sq_caser_work_free)(void *work);
int R(sq_caser_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work, sq_err *e);
const real *R(sq_caser_forward)(const R(sq_flat) *m, void *work, const sq_packed *b, int train,
                                uint64_t seed, uint64_t step);
void R(sq_caser_backward)(const R(sq_flat) *m, void *work, const sq_packed *b, const real *dh,
                          R(sq_flat) *g);

int R(sq_caser_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work, sq_err *e)
{
    const sq_caser_config *c = m->cfg;
    R(caser_work) *w = calloc(1, sizeof *w);
    *work = w;
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for caser's workspace");
    w->cx = m->cx;
    w->cap = *cap;
    size_t n = (size_t)(cap->n > 0 ? cap->n : 1), bytes = R(carve)(w, c, NULL);
    w->wid = malloc(n * (size_t)c->h.max_len * sizeof *w->wid);
    w->urow = malloc(n * sizeof *w->urow);
    if (!w->wid || !w->urow)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for caser's workspace");
    if (!(w->mem = sq_ctx_alloc(&m->cx, bytes ? bytes : 1, e)))
        return e->code;
    R(carve)(w, c, w->mem);
    return 0;
}

void R(sq_caser_work_free)(void *work)
{
    R(caser_work) *w = work;
    if (!w)
        return;
    if (w->mem)
        sq_ctx_free(&w->cx, w->mem);
    free(w->wid);
    free(w->urow);
    free(w);
}

/* ------------------------------------------------------------------------ */
/* Forward and backward                                                     */

/* Host planning: entry i's window (the L items ending at its row, within
 * its sequence; 0 before the sequence starts) and its user row. */
static void R(plan)(const sq_packed *b, int L, int *wid, int *urow)
{
    for (int i = 0; i < b->n; i++) {
        int r = b->rows ? b->rows[i] : i, s = sq_seg_of(b->off, b->B, r);
        for (int k = 0; k < L; k++) {
            int j = r - (L - 1 - k);
            wid[(size_t)i * L + k] = j >= b->off[s] ? b->ids[j] : 0;
        }
        urow[i] = b->uid ? (int)b->uid[s] : 0;
    }
}

const real *R(sq_caser_forward)(const R(sq_flat) *m, void *work, const sq_packed *b, int train,
                                uint64_t seed, uint64_t step)
{
    const sq_caser_config *c = m->cfg;
    const sq_ctx *cx = &m->cx;
    R(caser_work) *w = work;
    real *const *t = m->t;
    int n = b->n, L = c->h.max_len, D = c->dim, V = c->nv * D, F1 = V + L * c->nh;
    R(plan)(b, L, w->wid, w->urow);
    /* on a GPU the ops read the plan's device copy (a no-op on the CPU) */
    sq_ctx_stage_add(cx, w->wid, (size_t)n * L * sizeof *w->wid);
    sq_ctx_stage_add(cx, w->urow, (size_t)n * sizeof *w->urow);
    R(sq_embedding_forward)(cx, w->X, t[CT_item_emb], w->wid, n * L, D, 1);
    if (c->nv)
        R(sq_vconv_forward)(cx, w->feat, F1, w->X, t[CT_conv_v], t[CT_conv_v_b], n, L, D,
                            c->nv);
    if (c->nh)
        R(sq_hconv_forward)(cx, w->feat + V, F1, w->arg, w->X, t[CT_conv_h], t[CT_conv_h_b],
                            n, L, D, c->nh);
    /* dropout on the concatenated convolution features (RecBole's place) */
    w->drop = train && c->dropout > 0;
    const real *in1 = w->feat;
    if (w->drop) {
        R(sq_dropout_forward)(cx, w->featd, w->mask, w->feat, n, F1, (real)c->dropout, seed,
                              step, 0);
        in1 = w->featd;
    }
    R(sq_linear_forward)(cx, w->a1, in1, t[CT_fc1_w], t[CT_fc1_b], n, F1, D);
    R(sq_relu_forward)(cx, w->z, w->a1, (size_t)n * D);
    R(sq_gather_rows)(cx, w->pu, t[CT_user_emb], w->urow, n, D);
    R(sq_copy2d)(cx, w->cat, 2 * D, w->z, D, n, D);
    R(sq_copy2d)(cx, w->cat + D, 2 * D, w->pu, D, n, D);
    R(sq_linear_forward)(cx, w->a2, w->cat, t[CT_fc2_w], t[CT_fc2_b], n, 2 * D, D);
    R(sq_relu_forward)(cx, w->h, w->a2, (size_t)n * D);
    return w->h;
}

void R(sq_caser_backward)(const R(sq_flat) *m, void *work, const sq_packed *b, const real *dh,
                          R(sq_flat) *g)
{
    const sq_caser_config *c = m->cfg;
    const sq_ctx *cx = &m->cx;
    R(caser_work) *w = work;
    real *const *t = m->t, *const *gt = g->t;
    int n = b->n, L = c->h.max_len, D = c->dim, V = c->nv * D, F1 = V + L * c->nh;
    size_t nD = (size_t)n * D;
    /* h = relu(a2), a2 = W2 [z; P_u] + b2 */
    R(sq_zero)(cx, w->da2, nD);
    R(sq_relu_backward)(cx, w->da2, dh, w->a2, nD);
    R(sq_linear_backward_to)(cx, w->dcat, gt[CT_fc2_w], gt[CT_fc2_b], w->da2, w->cat,
                             t[CT_fc2_w], n, 2 * D, D);
    R(sq_copy2d)(cx, w->dz, D, w->dcat, 2 * D, n, D);
    R(sq_copy2d)(cx, w->dpu, D, w->dcat + D, 2 * D, n, D);
    R(sq_scatter_add_rows)(cx, gt[CT_user_emb], w->dpu, w->urow, n, D);
    /* z = relu(a1), a1 = W1 dropout(feat) + b1 */
    R(sq_zero)(cx, w->da1, nD);
    R(sq_relu_backward)(cx, w->da1, w->dz, w->a1, nD);
    real *dfin = w->drop ? w->dfeatd : w->dfeat;
    R(sq_linear_backward_to)(cx, dfin, gt[CT_fc1_w], gt[CT_fc1_b], w->da1,
                             w->drop ? w->featd : w->feat, t[CT_fc1_w], n, F1, D);
    if (w->drop) {
        R(sq_dropout_backward_to)(cx, w->dfeat, w->dfeatd, w->mask, (size_t)n * F1,
                               (real)c->dropout);
    }
    /* the convolutions, then the embedding rows of the windows */
    R(sq_zero)(cx, w->dX, nD * L);
    if (c->nv)
        R(sq_vconv_backward)(cx, w->dX, gt[CT_conv_v], gt[CT_conv_v_b], w->dfeat, F1, w->X,
                             t[CT_conv_v], n, L, D, c->nv);
    if (c->nh)
        R(sq_hconv_backward)(cx, w->dX, gt[CT_conv_h], gt[CT_conv_h_b], w->dfeat + V, F1,
                             w->arg, w->X, t[CT_conv_h], n, L, D, c->nh);
    R(sq_embedding_backward)(cx, gt[CT_item_emb], w->dX, w->wid, n * L, D, 1);
}

#if !SQ_REAL_IS_F64
/* ------------------------------------------------------------------------ */
/* Options, tensors and the def (once)                                      */

#define OFF(field) offsetof(sq_caser_config, field)
static const sq_opt caser_opts[] = {
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "64", .lo = 1, .hi = 8192,
     .arg = "N", .help = "embedding size d (default 64)"},
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(h.max_len), .def = "5", .lo = 1,
     .hi = 256, .arg = "N", .help = "caser: the window L of newest items (default 5)"},
    {.name = "nh", .type = SQ_OPT_INT, .offset = OFF(nh), .def = "16", .lo = 0, .hi = 4096,
     .arg = "N",
     .help = "caser: horizontal filters per height 1..L\n(default 16; 0: none); caser's "
             "--max-len L\ndefaults to 5, its --dropout to 0.5"},
    {.name = "nv", .type = SQ_OPT_INT, .offset = OFF(nv), .def = "4", .lo = 0, .hi = 4096,
     .arg = "N", .help = "caser: vertical filters (default 4; 0: none)"},
    {.name = "dropout", .type = SQ_OPT_REAL, .offset = OFF(dropout), .def = "0.5", .lo = 0,
     .hi = 1, .hi_open = 1, .arg = "P",
     .help = "dropout rate on the convolution features\n(default 0.5)"},
    {0},
};
#undef OFF

/* At least one kind of filter, and tensors of a sane size. */
static int caser_check(const void *cfg, sq_err *e)
{
    const sq_caser_config *c = cfg;
    if (c->nh == 0 && c->nv == 0)
        return sq_fail(e, SQ_EX_USAGE, "--nh and --nv cannot both be 0: caser needs filters");
    double L = c->h.max_len;
    if ((double)c->nh * L * (L + 1) / 2 * c->dim > 1e9 || (double)c->nv * c->dim > 1e9)
        return sq_fail(e, SQ_EX_USAGE, "--nh %d or --nv %d too large for --max-len %d and "
                       "--dim %d", c->nh, c->nv, c->h.max_len, c->dim);
    return 0;
}

#define CASER_DESC(name, order, decay, init, shape) {#name, order, decay, init, shape},
static const sq_tensor_desc caser_desc[CT_N] = {CASER_TENSORS(CASER_DESC)};
#undef CASER_DESC

static int caser_tensors(const void *cfg, sq_tensor_set *s, sq_err *e)
{
    const sq_caser_config *c = cfg;
    uint64_t L = (uint64_t)c->h.max_len, D = (uint64_t)c->dim, F = (uint64_t)c->nh;
    uint64_t G = (uint64_t)c->nv;
    sq_dims d;
    memset(&d, 0, sizeof d);
    memset(s, 0, sizeof *s);
    sq_dims_set(&d, 'V', (uint64_t)c->h.n_items + 1);
    sq_dims_set(&d, 'U', c->h.n_users);
    sq_dims_set(&d, 'D', D);
    sq_dims_set(&d, 'L', L);
    sq_dims_set(&d, 'F', F);
    sq_dims_set(&d, 'G', G);
    sq_dims_set(&d, 'Q', F * L * (L + 1) / 2);
    sq_dims_set(&d, 'I', G * D + L * F);
    sq_dims_set(&d, 'E', 2 * D);
    for (int i = 0; i < CT_N; i++) {
        int use = i == CT_conv_h || i == CT_conv_h_b ? F > 0
                  : i == CT_conv_v || i == CT_conv_v_b ? G > 0 : 1;
        if (sq_tensors_add(s, &caser_desc[i], 1, &d, use, 0, e))
            return e->code;
    }
    sq_tensors_layout(s);
    return 0;
}

/* The sd of the truncated draws: the embeddings N(0, (1/d)^2) (RecBole's
 * and the original code's), the filters the variance of PyTorch's default
 * Conv2d init, 1 / (3 fan_in), fan_in = h d for the horizontal filters at
 * the mean height h = (L + 1) / 2, L for the vertical ones. */
static double caser_sd(const void *ctx, const sq_tensor_set *s, int i)
{
    (void)ctx;
    const char *name = s->desc[i]->name;
    if (!strcmp(name, "conv_v"))
        return 1 / sqrt(3.0 * (double)s->shape[i][1]);
    if (!strcmp(name, "conv_h")) {
        int j = sq_tensors_find(s, "conv_h_b");
        double L = j >= 0 ? (double)s->shape[j][0] : 1;
        return 1 / sqrt(3.0 * (double)s->shape[i][1] * (L + 1) / 2);
    }
    return 1 / (double)s->shape[i][1];
}

int sq_caser_work_alloc_f64(const sq_flat_f64 *m, const sq_flat_cap *cap, void **work,
                            sq_err *e);
void sq_caser_work_free_f64(void *work);
const double *sq_caser_forward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                                   int train, uint64_t seed, uint64_t step);
void sq_caser_backward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                           const double *dh, sq_flat_f64 *g);

const sq_flat_def sq_flat_caser = {
    .name = "caser",
    .opts = caser_opts,
    .cfg_size = sizeof(sq_caser_config),
    .users = 1,
    .check = caser_check,
    .tensors = caser_tensors,
    .out = "item_emb",
    .init = {.xavier = 1, .trunc_sd = caser_sd},
    .gpu_check = sq_flat_gpu_any,
    .f = {sq_caser_work_alloc, sq_caser_work_free, sq_caser_forward, sq_caser_backward},
    .d = {sq_caser_work_alloc_f64, sq_caser_work_free_f64, sq_caser_forward_f64,
          sq_caser_backward_f64},
};

SQ_FLAT_MODEL(caser, "Caser: horizontal and vertical convolutions over the newest L items "
              "and a user embedding (Tang and Wang 2018)", "train.target=last\n");
#endif
