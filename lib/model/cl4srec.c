/* cl4srec.c - CL4SRec (Xie et al., "Contrastive Learning for Sequential
 * Recommendation", ICDE 2022): the SASRec backbone (sasrec.h) trained on
 * the next item and on a contrastive task between two augmented views of
 * each training sequence.
 *
 *   batches    CONTRASTIVE VIEWS (batch.h): each batch packs the samples of
 *              --target (next item, any mode, negatives for --loss bce) and
 *              two augmented views of each sample's inputs, all 3B
 *              sequences in one forward of the backbone (the same dropout
 *              stream; the views carry no next-item entries). Each view is
 *              one of crop (--crop eta), mask (--mask-ratio gamma; the
 *              mask token is an extra row n_items + 1 of E, never scored)
 *              and reorder (--reorder beta), drawn uniformly per view;
 *   loss       L = L_rec + lambda L_cl: L_rec the backbone's
 *              next-item loss on the samples (softmax CE over every item,
 *              or BCE with sampled negatives), L_cl the InfoNCE of the two
 *              views' user representations (the states at each view's
 *              newest row) over the batch: 2B views, each one's positive
 *              the other view of its sample, its negatives the 2B - 2
 *              others (--cl-negatives distinct: not those of samples with
 *              the anchor's next item); similarity over --cl-temp tau
 *              (infonce.h), lambda 0.1 and tau 1 as RecBole's. DECISION:
 *              cosine similarity by default, where RecBole's CL4SRec
 *              takes the dot product (--cl-sim dot): over layer-normed
 *              64-wide states the dot product's logits span +-|h|^2, and
 *              the term then costs SASRec's quality (83% on the
 *              synthetic data, 33% on Beauty at 10 epochs; cosine: none,
 *              doc/repro/controlled.md). Two prefixes of one user in a
 *              batch (--target last) are each other's negatives, as in
 *              RecBole.
 *
 * Scoring is SASRec's (the mask row is never a candidate).
 *
 * The loss is written over `real` (compiled twice, like sasrec.c) so that
 * the unit tests check the whole step's gradient in double; the registered
 * model exists once, in the float build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "cl4srec.h"
#include "infonce.h"
#include "ops.h"
#include "real.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The label of each pair: the target of its sample's newest row (the
 * entries run in row order), or a value no item has where that row has no
 * entry. */
static void R(pair_labels)(const sq_packed *b, int U, int *label)
{
    for (int j = 0; j < U; j++)
        label[j] = -1 - j;
    for (int i = 0, j = 0; i < b->n && j < U; i++) {
        int r = b->rows ? b->rows[i] : i;
        while (j < U && b->off[j + 1] <= r)
            j++;
        if (j < U && r == b->off[j + 1] - 1)
            label[j] = b->targets[i];
    }
}

double R(sq_cl4srec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                          sq_loss_spec loss, const sq_cl4srec_cl *cl, real *scratch, int *rows,
                          R(sq_sasrec) *g, int *count)
{
    double L = R(sq_sasrec_loss)(m, w, b, loss, g, count);
    int U = (b->B - b->pad_seqs) / 3, C = m->cfg.dim; /* the padding: no pair */
    if (!(cl->lambda > 0) || U < 2)
        return L;
    /* the user representations: the newest row of each view */
    int *ra = rows, *rb = rows + U, *label = rows + 2 * U;
    for (int j = 0; j < U; j++) {
        ra[j] = b->off[U + j + 1] - 1;
        rb[j] = b->off[2 * U + j + 1] - 1;
    }
    if (cl->distinct)
        R(pair_labels)(b, U, label);
    /* on a GPU the ops read their device copy (a no-op on the CPU) */
    sq_ctx_stage_add(&m->cx, rows, 3 * (size_t)U * sizeof *rows);
    sq_infonce_opt o = {.tau = cl->tau, .cosine = cl->cosine,
                        .label = cl->distinct ? label : NULL};
    double nce = R(sq_infonce_forward)(&m->cx, scratch, w->out, ra, rb, U, C, &o);
    if (g)
        R(sq_infonce_backward)(&m->cx, w->dout, scratch, ra, rb, U, C, &o, (real)cl->lambda);
    double v[2] = {L, nce}, wt[2] = {1, cl->lambda}; /* as a CUDA graph's step sums them */
    return sq_ctx_loss_mix(&m->cx, wt, v, 2);
}

#if !SQ_REAL_IS_F64

enum { CL_COS = 0, CL_DOT = 1 };      /* --cl-sim's choices, in order */
enum { CL_ALL = 0, CL_DISTINCT = 1 }; /* --cl-negatives' */

typedef struct {
    sq_sasrec_config base; /* first: the backbone's options bind at their offsets */
    double cl_weight, cl_temp;
    int cl_sim, cl_negatives;
    double crop, mask_ratio, reorder;
} cl4srec_config;

#define OFF(field) offsetof(cl4srec_config, field)
static const sq_opt cl4srec_opts[] = {
    {.name = "cl-weight", .key = "cl4srec.cl_weight", .type = SQ_OPT_REAL,
     .offset = OFF(cl_weight), .def = "0.1", .lo = 0, .hi = 1000, .arg = "X",
     .help = "cl4srec: weight lambda of the InfoNCE term\n(default 0.1; 0: SASRec with a mask row)"},
    {.name = "cl-temp", .key = "cl4srec.cl_temp", .type = SQ_OPT_REAL, .offset = OFF(cl_temp),
     .def = "1", .lo = 0, .hi = 100, .lo_open = 1, .arg = "X",
     .help = "cl4srec: InfoNCE temperature tau (default 1)"},
    {.name = "cl-sim", .key = "cl4srec.cl_sim", .type = SQ_OPT_CHOICE, .offset = OFF(cl_sim),
     .def = "cos", .choices = "cos|dot", .arg = "S", .optional = 1, /* older files: dot */
     .help = "cl4srec: InfoNCE similarity, cosine (default)\nor dot product (RecBole's, which costs quality:\ndoc/repro/controlled.md)"},
    {.name = "cl-negatives", .key = "cl4srec.cl_negatives", .type = SQ_OPT_CHOICE,
     .offset = OFF(cl_negatives), .def = "all", .choices = "all|distinct", .arg = "N", .optional = 1,
     .help = "cl4srec: all: every other view of the batch is a\nnegative; distinct: not the views of samples\nwith the anchor's next item (default all)"},
    {.name = "crop", .key = "cl4srec.crop", .type = SQ_OPT_REAL, .offset = OFF(crop),
     .def = "0.6", .lo = 0, .hi = 1, .lo_open = 1, .arg = "X",
     .help = "cl4srec: a crop keeps floor(X len) items\n(eta; default 0.6)"},
    {.name = "mask-ratio", .key = "cl4srec.mask_ratio", .type = SQ_OPT_REAL,
     .offset = OFF(mask_ratio), .def = "0.3", .lo = 0, .hi = 1, .arg = "X",
     .help = "cl4srec: a mask view masks floor(X len) items\n(gamma; default 0.3)"},
    {.name = "reorder", .key = "cl4srec.reorder", .type = SQ_OPT_REAL, .offset = OFF(reorder),
     .def = "0.6", .lo = 0, .hi = 1, .arg = "X",
     .help = "cl4srec: a reorder view shuffles a run of\nfloor(X len) items (beta; default 0.6)"},
    {0},
};
#undef OFF

/* RecBole's backbone: 2 heads and dropout 0.5 (2 blocks, d = 64 and
 * n = 50 are the backbone's defaults already). */
static const sq_sasrec_extra cl4srec_extra = {
    .opts = cl4srec_opts, .model = "cl4srec", .defaults = "heads=2\ndropout=0.5\n"};

/* ------------------------------------------------------------------------ */
/* Configs                                                                  */

static int config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    cl4srec_config *c = cfg;
    if (sq_sasrec_config_from(&c->base, SQ_BACKBONE_SASREC, given, d->n_items, d->padded_len,
                              &cl4srec_extra, e))
        return e->code;
    c->base.mask_row = 1;
    return 0;
}

static int config_check(const void *cfg, sq_err *e)
{
    const cl4srec_config *c = cfg;
    if (sq_opt_check(cl4srec_opts, c, SQ_EX_USAGE, e))
        return e->code;
    return sq_sasrec_config_check(&c->base, e);
}

static int config_write(const void *cfg, sq_modelfile *mf, sq_err *e)
{
    const cl4srec_config *c = cfg;
    if (sq_sasrec_config_write(&c->base, mf, e) ||
        sq_opt_write(cl4srec_opts, c, sq_modelfile_set_kv, mf, e))
        return e->code;
    return 0;
}

static int config_read(void *cfg, const sq_modelfile *mf, const char *path, sq_err *e)
{
    cl4srec_config *c = cfg;
    sq_opt_defaults(cl4srec_opts, c);
    if (sq_sasrec_config_read_as(&c->base, mf, path, SQ_BACKBONE_SASREC, e) ||
        sq_opt_apply(cl4srec_opts, c, mf->config, 1, SQ_EX_DATA, path, e))
        return e->code;
    /* files from before --cl-sim trained with the dot product */
    char v[8];
    if (!sq_modelfile_get(mf, "cl4srec.cl_sim", v, sizeof v))
        c->cl_sim = CL_DOT;
    c->base.mask_row = 1;
    return 0;
}

/* Scoring: SASRec's on the backbone (E's mask row is never scored). */
static int load(sq_model *mm, sq_modelfile *mf, const sq_ctx *cx, sq_err *e)
{
    cl4srec_config c;
    char name[32] = "model";
    sq_modelfile_get(mf, "model", name, sizeof name);
    if (config_read(&c, mf, name, e))
        return e->code;
    return sq_sasrec_load_as(mm, mf, &c.base, cx, e);
}

/* ------------------------------------------------------------------------ */
/* Training                                                                 */

/* The trainer's net: the backbone's on cl4srec's config (sasrec.h
 * sq_backbone_net). */
static const sq_model_def *backbone(void) { return &sq_model_sasrec; }

static int net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e)
{
    return sq_backbone_net_alloc(n, cfg, sizeof(cl4srec_config), 0, cx, e);
}

static int batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                   sq_err *e)
{
    const cl4srec_config *c = cfg;
    sq_augment aug = {.crop = c->crop, .mask = c->mask_ratio, .reorder = c->reorder,
                      .mask_id = sq_mask_id(&c->base)};
    if (sq_batcher_init_cl(bt, s, o->target, c->base.max_len, o->batch,
                           sq_loss_bce_negatives(o), &aug, o->seed, e))
        return e->code;
    return sq_loss_batcher_negatives(bt, o, e);
}

/* The backbone's workspace and the InfoNCE's scratch and rows. */
typedef struct {
    void *inner;
    const sq_ctx *cx;
    float *nce; /* on cx */
    int *rows;  /* host: the pairs' rows and labels, staged a step */
} cl4srec_work;

static void work_free(void *work)
{
    cl4srec_work *w = work;
    if (!w)
        return;
    backbone()->work_free(w->inner);
    if (w->nce)
        sq_ctx_free(w->cx, w->nce);
    free(w->rows);
    free(w);
}

static int work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e)
{
    const sq_backbone_net *p = n->impl;
    const cl4srec_config *c = n->cfg;
    cl4srec_work *w = calloc(1, sizeof *w);
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *work = w;
    if (backbone()->work_alloc(&p->inner, bt, &w->inner, e))
        return e->code;
    w->cx = n->cx;
    w->nce = sq_ctx_alloc(n->cx, sq_infonce_scratch_size(bt->batch, c->base.dim) *
                                     sizeof *w->nce, e);
    if (!w->nce)
        return e->code;
    w->rows = malloc(3 * (size_t)bt->batch * sizeof *w->rows);
    if (!w->rows)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the InfoNCE term");
    return 0;
}

static double step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                   uint64_t t, int *count)
{
    sq_backbone_net *p = n->impl;
    const cl4srec_config *c = n->cfg;
    cl4srec_work *cw = work;
    sq_sasrec *m = sq_sasrec_net_model(&p->inner), *g = sq_sasrec_net_grads(&p->inner);
    sq_sasrec_work *w = sq_sasrec_net_work(cw->inner);
    sq_sasrec_forward(m, w, b, 1, o->seed, t);
    sq_cl4srec_cl cl = {.lambda = c->cl_weight, .tau = c->cl_temp, .cosine = c->cl_sim == CL_COS,
                        .distinct = c->cl_negatives == CL_DISTINCT};
    double loss = sq_cl4srec_loss(m, w, b, sq_loss_step(o), &cl, cw->nce, cw->rows, g, count);
    if (loss == loss && loss - loss == 0) /* finite: the trainer stops otherwise */
        sq_sasrec_backward(m, w, b, g);
    return loss;
}

static void view(sq_model *out, const sq_net *n)
{
    sq_backbone_net *p = n->impl;
    sq_sasrec_model_view(out, sq_sasrec_net_model(&p->inner));
    snprintf(out->name, sizeof out->name, "cl4srec");
}

static const sq_opt *more_opts(int i)
{
    /* the backbone's options, then those of every attention kind */
    return i == 0 ? backbone()->opts : backbone()->more_opts(i - 1);
}

/* --device cuda: the InfoNCE term's ops have CUDA twins (k_nce.cu, and
 * k_core.cu's normalisation for the cosine); the backbone's attention kind
 * must have its kernels. */
static int gpu_check(const void *cfg, sq_err *e)
{
    const cl4srec_config *c = cfg;
    return backbone()->gpu_check(&c->base, e);
}

const sq_model_def sq_model_cl4srec = {
    .name = "cl4srec",
    .summary = "CL4SRec: SASRec plus InfoNCE between crop/mask/reorder views",
    .opts = cl4srec_opts, .more_opts = more_opts, .cfg_size = sizeof(cl4srec_config),
    .config = config, .config_check = config_check, .config_write = config_write,
    .config_read = config_read, .load = load,
    .net_alloc = net_alloc, .net_free = sq_backbone_net_free, .net_init = sq_backbone_net_init,
    .init_from = sq_backbone_init_from, .batcher = batcher, .work_alloc = work_alloc,
    .work_free = work_free, .step = step, .view = view, .gpu_check = gpu_check, .graphs = 1,
};

#endif
