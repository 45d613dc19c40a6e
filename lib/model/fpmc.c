/* fpmc.c - FPMC (Rendle et al., WWW 2010: factorizing personalized Markov
 * chains) with baskets of one item, as RecBole has it, a flat model
 * (flat.h). User u having just taken item l scores item i as
 *
 *     score(u, l, i) = UI[u] . IU[i] + IL[i] . LI[l]
 *
 * (matrix factorisation plus the factorised item-to-item transition). Both
 * terms are one dot product of
 *
 *     h = [UI[u] ; LI[l]]     (2 dim)
 *
 * with the row i of one output table item_out = [IU | IL] [V1, 2 dim], so
 * flat.c's losses and scoring apply unchanged. l is the item at the entry's
 * row (the newest item of its prefix); u the row's sequence's user id
 * (flat.h USERS: a row per user of the training stream). Options and
 * decisions: seqrec-train(1), THE FPMC MODEL.
 *
 * Written over `real` and compiled twice (float, and double as _f64); the
 * config, option table and def exist once, in the float build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "flat.h"
#include "ops.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    sq_flat_head h;
    int dim; /* d: each factor's size (RecBole embedding_size) */
} sq_fpmc_config;

/* The tensors, in table order (m->t[i]). */
enum { T_UI, T_LI, T_OUT, T_COUNT };

typedef struct {
    sq_ctx cx;
    real *u, *l;   /* [n, d] the entries' user and last-item rows */
    real *h;       /* [n, 2d] the forward's result */
    int *users;    /* [n] (host) the entries' user ids */
    int *items;    /* [n] (host) the items at the entries' rows */
} R(fpmc_work);

void R(sq_fpmc_work_free)(void *work)
{
    R(fpmc_work) *w = work;
    if (!w)
        return;
    real *bufs[] = {w->u, w->l, w->h};
    for (int i = 0; i < 3; i++)
        if (bufs[i])
            sq_ctx_free(&w->cx, bufs[i]);
    free(w->users);
    free(w->items);
    free(w);
}

int R(sq_fpmc_work_alloc)(const R(sq_flat) *m, const sq_flat_cap *cap, void **work, sq_err *e)
{
    const sq_fpmc_config *c = m->cfg;
    R(fpmc_work) *w = calloc(1, sizeof *w);
    *work = w;
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    w->cx = m->cx;
    size_t n = (size_t)(cap->n > 0 ? cap->n : 1), d = (size_t)c->dim;
    if (!(w->u = sq_ctx_alloc(&m->cx, n * d * sizeof(real), e)) ||
        !(w->l = sq_ctx_alloc(&m->cx, n * d * sizeof(real), e)) ||
        !(w->h = sq_ctx_alloc(&m->cx, n * 2 * d * sizeof(real), e)))
        return e->code;
    if (!(w->users = malloc(n * sizeof(int))) || !(w->items = malloc(n * sizeof(int))))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    return 0;
}

const real *R(sq_fpmc_forward)(const R(sq_flat) *m, void *work, const sq_packed *b, int train,
                               uint64_t seed, uint64_t step)
{
    (void)train, (void)seed, (void)step; /* no dropout */
    const sq_fpmc_config *c = m->cfg;
    const sq_ctx *cx = &m->cx;
    R(fpmc_work) *w = work;
    int n = b->n, d = c->dim;
    for (int i = 0; i < n; i++) { /* host: who and what each entry reads */
        int row = b->rows ? b->rows[i] : i;
        w->users[i] = (int)b->uid[sq_seg_of(b->off, b->B, row)];
        w->items[i] = b->ids[row];
    }
    /* on a GPU the ops read their device copy (a no-op on the CPU) */
    sq_ctx_stage_add(cx, w->users, (size_t)n * sizeof *w->users);
    sq_ctx_stage_add(cx, w->items, (size_t)n * sizeof *w->items);
    /* user ids start at 0: a gather, not the embedding op (whose id 0 is
     * padding); the last item is an embedding (padding: a zero row) */
    R(sq_gather_rows)(cx, w->u, m->t[T_UI], w->users, n, d);
    R(sq_embedding_forward)(cx, w->l, m->t[T_LI], w->items, n, d, 1);
    R(sq_copy2d)(cx, w->h, 2 * d, w->u, d, n, d);
    R(sq_copy2d)(cx, w->h + d, 2 * d, w->l, d, n, d);
    return w->h;
}

void R(sq_fpmc_backward)(const R(sq_flat) *m, void *work, const sq_packed *b, const real *dh,
                         R(sq_flat) *g)
{
    const sq_fpmc_config *c = m->cfg;
    const sq_ctx *cx = &m->cx;
    R(fpmc_work) *w = work;
    int n = b->n, d = c->dim;
    R(sq_copy2d)(cx, w->u, d, dh, 2 * d, n, d);
    R(sq_copy2d)(cx, w->l, d, dh + d, 2 * d, n, d);
    R(sq_scatter_add_rows)(cx, g->t[T_UI], w->u, w->users, n, d);
    R(sq_embedding_backward)(cx, g->t[T_LI], w->l, w->items, n, d, 1);
}

#if !SQ_REAL_IS_F64
/* ------------------------------------------------------------------------ */
/* The model (once)                                                         */

int sq_fpmc_work_alloc_f64(const sq_flat_f64 *m, const sq_flat_cap *cap, void **work,
                           sq_err *e);
void sq_fpmc_work_free_f64(void *work);
const double *sq_fpmc_forward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                                  int train, uint64_t seed, uint64_t step);
void sq_fpmc_backward_f64(const sq_flat_f64 *m, void *work, const sq_packed *b,
                          const double *dh, sq_flat_f64 *g);

#define OFF(field) offsetof(sq_fpmc_config, field)
static const sq_opt fpmc_opts[] = {
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "64", .lo = 1, .hi = 8192,
     .arg = "N", .help = "fpmc: the size of each factor (default 64)"},
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(h.max_len), .def = "1", .lo = 1,
     .hi = 65536, .arg = "N",
     .help = "newest N items per sequence (fpmc: default 1;\nonly the newest one is read)"},
    {0},
};
#undef OFF

static const sq_tensor_desc fpmc_tensors[T_COUNT] = {
    {"user_item", 100, 1, SQ_INIT_WEIGHT, "UD"}, /* UI */
    {"last_item", 101, 1, SQ_INIT_WEIGHT, "WD"}, /* LI, row 0 padding */
    {"item_out", 102, 1, SQ_INIT_WEIGHT, "WF"},  /* [IU | IL] */
};

static int fpmc_tensors_of(const void *cfg, sq_tensor_set *s, sq_err *e)
{
    const sq_fpmc_config *c = cfg;
    sq_dims d = {{0}};
    sq_dims_set(&d, 'U', (uint64_t)c->h.n_users);
    sq_dims_set(&d, 'W', (uint64_t)c->h.n_items + 1);
    sq_dims_set(&d, 'D', (uint64_t)c->dim);
    sq_dims_set(&d, 'F', 2 * (uint64_t)c->dim);
    memset(s, 0, sizeof *s);
    if (sq_tensors_add(s, fpmc_tensors, T_COUNT, &d, 1, 0, e))
        return e->code;
    sq_tensors_layout(s);
    return 0;
}

static int fpmc_check(const void *cfg, sq_err *e)
{
    const sq_fpmc_config *c = cfg;
    uint64_t rows = (uint64_t)c->h.n_items + 1 + c->h.n_users;
    if (rows * 2 * (uint64_t)c->dim > (uint64_t)1 << 40)
        return sq_fail(e, SQ_EX_USAGE, "--dim %d: the factor tables are too large", c->dim);
    return 0;
}

static const char *const fpmc_zero_row0[] = {"last_item", NULL};

const sq_flat_def sq_flat_fpmc = {
    .name = "fpmc", .opts = fpmc_opts, .cfg_size = sizeof(sq_fpmc_config), .users = 1,
    .check = fpmc_check, .tensors = fpmc_tensors_of, .out = "item_out",
    .zero_row0 = fpmc_zero_row0, .init = {.xavier = 1},
    .gpu_check = sq_flat_gpu_any,
    .f = {sq_fpmc_work_alloc, sq_fpmc_work_free, sq_fpmc_forward, sq_fpmc_backward},
    .d = {sq_fpmc_work_alloc_f64, sq_fpmc_work_free_f64, sq_fpmc_forward_f64,
          sq_fpmc_backward_f64},
};

/* Every prefix is a sample whose newest item is the last one (RecBole's
 * sequential samples); --target all with --max-len 1 would train each
 * user's newest transition only. */
SQ_FLAT_MODEL(fpmc, "FPMC: user-item and last-item-item factors (Rendle et al.)",
              "train.target=last\n");
#endif
