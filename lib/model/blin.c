/* blin.c - Blin (Bai, Wang and He: RandomPad, linear attention with a
 * depthwise convolution, bidirectional KL): the SASRec backbone (sasrec.h)
 * trained on two views of every user with a loss of its own.
 *
 *   views      each training sequence twice per epoch, each an independent
 *              RandomPad (eq. 4; batch.h VIEWS: the same pad.c code as
 *              seqrec-pad) drawn from (seed, epoch, user, view); --pad zero
 *              is the Blin-ZC ablation: zero padding, the views random item
 *              crops of --crop-eta of the sequence;
 *   attention  --attn efficient-dwc (eq. 11) by default, any kind allowed
 *              (Blin-D: --attn softmax; Blin-DWC: --dwc-kernel 0);
 *   loss       (eq. 19-20) L = 1/2 (L_seq(view 1) + L_seq(view 2))
 *              + lambda L_bkl, L_seq the mean softmax cross-entropy of a
 *              view's trained positions (eq. 15-16) and L_bkl (eq. 17-18)
 *              1/2 (KL(P1||P2) + KL(P2||P1)) between the next-item
 *              distributions of the two views' newest positions (the user
 *              representations T^(L) of eq. 15), averaged over the users.
 *              P is a softmax over every item (--softmax full, the default:
 *              eq. 15 sums over the item set V, and full softmax is what a
 *              recommender scores with), or over the positive and --neg K
 *              sampled negatives (--softmax sampled; the KL then runs over
 *              the first view's positive and negatives, the same support for
 *              both views). --bkl-lambda 0 is the Blin-BKL ablation.
 *
 * Scoring: the history RandomPad-ed with as many repeats as fit (--infer-pad
 * repeat, the input the model was trained on, without the randomness) or
 * left alone (--infer-pad zero), then SASRec's scoring; auto (the default)
 * is repeat for RandomPad views and zero for --pad zero. */
#include "bkl.h"
#include "kv.h"
#include "ops.h"
#include "pad.h"
#include "sasrec.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { SOFTMAX_FULL = 0, SOFTMAX_SAMPLED = 1 };
enum { INFER_AUTO = 0, INFER_REPEAT = 1, INFER_ZERO = 2 };

typedef struct {
    sq_sasrec_config base; /* first: the backbone's options bind at their offsets */
    int pad;               /* SQ_VIEW_RANDOMPAD or SQ_VIEW_CROP (--pad randompad|zero) */
    double crop_eta;
    double bkl_lambda;
    int softmax;           /* SOFTMAX_FULL or SOFTMAX_SAMPLED */
    int infer_pad;         /* INFER_REPEAT or INFER_ZERO (INFER_AUTO until resolved) */
} blin_config;

#define OFF(field) offsetof(blin_config, field)
static const sq_opt blin_opts[] = {
    {.name = "pad", .key = "blin.pad", .type = SQ_OPT_CHOICE, .offset = OFF(pad),
     .def = "randompad", .choices = "randompad|zero", .arg = "P",
     .help = "blin: the two views, RandomPad (eq. 4; default)\n"
             "or zero padding with item crops (Blin-ZC)"},
    {.name = "crop-eta", .key = "blin.crop_eta", .type = SQ_OPT_REAL, .offset = OFF(crop_eta),
     .def = "0.6", .lo = 0, .hi = 1, .lo_open = 1, .arg = "X",
     .help = "blin --pad zero: a crop keeps floor(X len) items\n(default 0.6)"},
    {.name = "bkl-lambda", .key = "blin.bkl_lambda", .type = SQ_OPT_REAL,
     .offset = OFF(bkl_lambda), .def = "2", .lo = 0, .hi = 1000, .arg = "X",
     .help = "blin: weight of the bidirectional KL (eq. 20;\ndefault 2; 0: Blin-BKL)"},
    {.name = "softmax", .key = "blin.softmax", .type = SQ_OPT_CHOICE, .offset = OFF(softmax),
     .def = "full", .choices = "full|sampled", .arg = "S",
     .help = "blin: P of eq. 15 over every item (default) or\n"
             "over the positive and --neg K sampled negatives"},
    {.name = "infer-pad", .key = "blin.infer_pad", .type = SQ_OPT_CHOICE,
     .offset = OFF(infer_pad), .def = "auto", .choices = "auto|repeat|zero", .arg = "P",
     .help = "blin: scoring input, the history repeated as often\n"
             "as fits or alone; auto (default): as trained"},
    {0},
};
#undef OFF

/* The paper's settings (blin.txt 4.3) as blin's defaults of the backbone's
 * options: efficient-dwc attention, 2 heads, N = 100, dropout 0.5. */
static const sq_sasrec_extra blin_extra = {
    .opts = blin_opts, .model = "blin",
    .defaults = "attn=efficient-dwc\nheads=2\nmax_len=100\ndropout=0.5\n"};

/* ------------------------------------------------------------------------ */
/* Configs                                                                  */

/* --infer-pad auto: the input the model was trained on (RandomPad views:
 * repeated; zero-padded crops: alone). Model files hold the resolved value. */
static void resolve_infer_pad(blin_config *c)
{
    if (c->infer_pad == INFER_AUTO)
        c->infer_pad = c->pad == SQ_VIEW_CROP ? INFER_ZERO : INFER_REPEAT;
}

static int config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    if (sq_sasrec_config_from(cfg, SQ_BACKBONE_SASREC, given, d->n_items, d->padded_len,
                              &blin_extra, e))
        return e->code;
    resolve_infer_pad(cfg);
    return 0;
}

static int config_check(const void *cfg, sq_err *e)
{
    const blin_config *c = cfg;
    if (sq_opt_check(blin_opts, c, SQ_EX_USAGE, e))
        return e->code;
    return sq_sasrec_config_check(&c->base, e);
}

static int config_write(const void *cfg, sq_modelfile *mf, sq_err *e)
{
    const blin_config *c = cfg;
    if (sq_sasrec_config_write(&c->base, mf, e) ||
        sq_opt_write(blin_opts, c, sq_modelfile_set_kv, mf, e))
        return e->code;
    return 0;
}

static int config_read(void *cfg, const sq_modelfile *mf, const char *path, sq_err *e)
{
    blin_config *c = cfg;
    sq_opt_defaults(blin_opts, c);
    if (sq_sasrec_config_read_as(&c->base, mf, path, SQ_BACKBONE_SASREC, e) ||
        sq_opt_apply(blin_opts, c, mf->config, 1, SQ_EX_DATA, path, e))
        return e->code;
    resolve_infer_pad(c);
    return 0;
}

static int check_step(const void *cfg, const sq_step_opts *o, sq_err *e)
{
    (void)cfg;
    if (sq_loss_check(o, 1u << SQ_LOSS_CE, "blin",
                      "it trains softmax cross-entropy over two views with a KL term (eq. "
                      "15); for sampled negatives use --softmax sampled --neg K", e))
        return e->code;
    if (o->target != SQ_TARGET_ALL)
        return sq_fail(e, SQ_EX_USAGE, "--model blin trains every position of its views: "
                       "--target %s is not available", sq_target_name(o->target));
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Scoring: the history padded as in training, then SASRec's scores        */

typedef struct {
    sq_model inner;  /* the backbone (owned when loaded from a file) */
    int infer_pad, max_len;
} blin_scorer;

/* The scoring histories of b: each RandomPad-ed with the most repeats that
 * fit (INFER_REPEAT). *mem holds items, off and len. */
static int padded_batch(const blin_scorer *s, const sq_batch *b, sq_batch *out,
                        uint32_t **mem, sq_err *e)
{
    uint32_t N = (uint32_t)s->max_len;
    size_t B = (size_t)b->B;
    uint32_t *m = malloc((B * (N + 2) + 1) * sizeof *m);
    if (!m)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the scoring input");
    uint32_t *items = m, *off = m + B * N, *len = off + B;
    for (size_t i = 0; i < B; i++) {
        uint32_t span = b->len[i] ? sq_pad_repeat(items + i * N, N, b->items + b->off[i],
                                                  b->len[i], N)
                                  : 0;
        off[i] = (uint32_t)(i * N) + (N - span);
        len[i] = span;
    }
    *out = (sq_batch){.items = items, .off = off, .len = len, .B = b->B};
    *mem = m;
    return 0;
}

static int scores(sq_model *mm, const sq_batch *b, float *out, sq_err *e)
{
    blin_scorer *s = mm->impl;
    if (s->infer_pad == INFER_ZERO)
        return s->inner.scores(&s->inner, b, out, e);
    sq_batch pb;
    uint32_t *mem;
    if (padded_batch(s, b, &pb, &mem, e))
        return e->code;
    int rc = s->inner.scores(&s->inner, &pb, out, e);
    free(mem);
    return rc;
}

/* "sasrec --attn K" of the backbone's map -> "blin --attn K[, ...]". */
static void map_title(sq_attn_map *a, int repeated)
{
    const char *k = strstr(a->what, "--attn");
    char what[sizeof a->what];
    snprintf(what, sizeof what, "blin %s%s", k ? k : "", repeated ? ", history repeated" : "");
    memcpy(a->what, what, sizeof what);
}

static int attention(const sq_model *mm, const uint32_t *hist, uint32_t len, sq_attn_map *a,
                     sq_err *e)
{
    const blin_scorer *s = mm->impl;
    int rc;
    if (s->infer_pad == INFER_ZERO || len == 0) {
        if ((rc = s->inner.attention(&s->inner, hist, len, a, e)) == 0)
            map_title(a, 0);
        return rc;
    }
    uint32_t zero = 0;
    sq_batch one = {.items = hist, .off = &zero, .len = &len, .B = 1}, pb;
    uint32_t *mem;
    if (padded_batch(s, &one, &pb, &mem, e))
        return e->code;
    if ((rc = s->inner.attention(&s->inner, pb.items + pb.off[0], pb.len[0], a, e)) == 0)
        map_title(a, 1);
    free(mem);
    return rc;
}

static void scorer_free(sq_model *mm)
{
    blin_scorer *s = mm->impl;
    if (s) {
        sq_model_free(&s->inner);
        free(s);
    }
    mm->impl = NULL;
}

/* Wraps the backbone's scoring model `inner` (taken over) into mm. */
static int wrap(sq_model *mm, const sq_model *inner, const blin_config *c, sq_err *e)
{
    blin_scorer *s = calloc(1, sizeof *s);
    if (!s)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    s->inner = *inner;
    s->infer_pad = c->infer_pad;
    s->max_len = c->base.max_len;
    mm->n_items = c->base.n_items;
    mm->impl = s;
    mm->scores = scores;
    mm->attention = attention;
    mm->free_impl = scorer_free;
    return 0;
}

static int load(sq_model *mm, sq_modelfile *mf, const sq_ctx *cx, sq_err *e)
{
    blin_config c;
    char name[32] = "model";
    sq_modelfile_get(mf, "model", name, sizeof name);
    if (config_read(&c, mf, name, e))
        return e->code;
    sq_model inner = {0};
    snprintf(inner.name, sizeof inner.name, "sasrec");
    if (sq_sasrec_load_as(&inner, mf, &c.base, cx, e))
        return e->code;
    if (wrap(mm, &inner, &c, e)) {
        sq_model_free(&inner);
        return e->code;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Training                                                                 */

/* The trainer's net: the backbone's on blin's config (sasrec.h
 * sq_backbone_net); extra holds the validation view (a blin_scorer that
 * borrows the backbone). */
static const sq_model_def *backbone(void) { return &sq_model_sasrec; }

static int net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e)
{
    return sq_backbone_net_alloc(n, cfg, sizeof(blin_config), sizeof(blin_scorer), cx, e);
}

static int batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                   sq_err *e)
{
    const blin_config *c = cfg;
    int K = c->softmax == SOFTMAX_SAMPLED ? o->neg : 0;
    return sq_batcher_init_views(bt, s, c->pad, c->crop_eta, c->base.max_len, o->batch, K,
                                 o->seed, e);
}

/* The backbone's workspace, and the KL term's: its scratch, the rows of
 * the pairs and (sampled) their supports. */
typedef struct {
    void *inner;
    const sq_ctx *cx;
    float *bkl; /* on cx */
    int chunk, *ra, *rb, *cand; /* host; staged a step */
} blin_work;

static void work_free(void *work)
{
    blin_work *w = work;
    if (!w)
        return;
    backbone()->work_free(w->inner);
    if (w->bkl)
        sq_ctx_free(w->cx, w->bkl);
    free(w->ra);
    free(w->cand);
    free(w);
}

static int work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e)
{
    const sq_backbone_net *p = n->impl;
    const blin_config *c = n->cfg;
    blin_work *w = calloc(1, sizeof *w);
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *work = w;
    if (backbone()->work_alloc(&p->inner, bt, &w->inner, e))
        return e->code;
    int V1 = (int)c->base.n_items + 1, C = c->base.dim, B = bt->batch;
    /* chunks of pairs whose logits stay near 4 MB on the CPU; on a GPU
     * the CE's chunk (sq_ce_chunk_on: 2^26 logits), fewer launches */
    w->chunk = (int)(((size_t)1 << 20) / (size_t)V1);
    w->chunk = w->chunk < 1 ? 1 : w->chunk > B ? B : w->chunk;
    if (n->cx->backend == SQ_BACKEND_CUDA)
        w->chunk = sq_ce_chunk_on(n->cx, B, V1);
    w->cx = n->cx;
    if (!(w->bkl = sq_ctx_alloc(n->cx, sq_bkl_scratch_size(w->chunk, V1, C) * sizeof *w->bkl,
                                e)))
        return e->code;
    w->ra = malloc(2 * (size_t)B * sizeof *w->ra);
    w->cand = malloc((size_t)B * (size_t)(bt->K + 1) * sizeof *w->cand);
    if (!w->ra || !w->cand)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the KL term");
    w->rb = w->ra + B;
    return 0;
}

/* The KL pairs of a VIEWS batch: the newest row of each first view and of
 * its second view; sampled: the first view's newest target and negatives. */
static int kl_pairs(blin_work *w, const sq_packed *b)
{
    int U = (b->B - b->pad_seqs) / 2, K = b->K; /* the padding: no pair */
    for (int i = 0; i < U; i++) {
        w->ra[i] = b->off[i + 1] - 1;
        w->rb[i] = b->off[U + i + 1] - 1;
    }
    if (K == 0)
        return U;
    /* entries are listed oldest first: a first view's newest entry is the
     * last one before the next sequence's rows */
    for (int i = 0, j = 0; i < U; i++) {
        while (j + 1 < b->n_first && b->rows[j + 1] < b->off[i + 1])
            j++;
        w->cand[(size_t)i * (K + 1)] = b->targets[j];
        memcpy(w->cand + (size_t)i * (K + 1) + 1, b->neg + (size_t)j * K,
               (size_t)K * sizeof *w->cand);
    }
    return U;
}

/* Sequence loss of one view's entries [e0, e1) with weight 1/2. */
static double view_loss(const sq_sasrec *m, sq_sasrec_work *w, sq_sasrec *g,
                        const sq_packed *b, int e0, int e1, int *count)
{
    const sq_ctx *cx = &m->cx;
    int C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1, n = e1 - e0;
    if (b->K > 0)
        return sq_ce_sampled(cx, w->dout, g->p.item_emb, w->out, m->p.item_emb, b->rows + e0,
                             b->targets + e0, b->neg + (size_t)e0 * b->K, n, b->K, C, 0.5f,
                             count);
    return sq_ce_full(cx, w->dout, g->p.item_emb, w->ce, w->out, m->p.item_emb, b->rows + e0,
                      b->targets + e0, n, C, V1, w->ce_chunk, 0.5f, count);
}

static double step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                   uint64_t t, int *count)
{
    sq_backbone_net *p = n->impl;
    blin_work *bw = work;
    sq_sasrec *m = sq_sasrec_net_model(&p->inner), *g = sq_sasrec_net_grads(&p->inner);
    sq_sasrec_work *w = sq_sasrec_net_work(bw->inner);
    const sq_ctx *cx = &m->cx;
    int C = m->cfg.dim, V1 = (int)m->cfg.n_items + 1, c1 = 0, c2 = 0;
    sq_sasrec_forward(m, w, b, 1, o->seed, t);
    sq_zero(cx, w->dout, (size_t)b->T * C);
    double lambda = ((const blin_config *)n->cfg)->bkl_lambda;
    /* the loss of its values, as the device sums them in a CUDA graph */
    double v[3] = {0, 0, 0}, wt[3] = {0.5, 0.5, lambda};
    v[0] = view_loss(m, w, g, b, 0, b->n_first, &c1);
    v[1] = view_loss(m, w, g, b, b->n_first, b->n, &c2);
    if (lambda > 0) {
        int U = kl_pairs(bw, b), S = b->K > 0 ? b->K + 1 : 0;
        /* on a GPU the op reads the pairs' device copy (a no-op on the CPU) */
        sq_ctx_stage_add(cx, bw->ra, (size_t)U * sizeof *bw->ra);
        sq_ctx_stage_add(cx, bw->rb, (size_t)U * sizeof *bw->rb);
        v[2] = sq_bkl(cx, w->dout, g->p.item_emb, bw->bkl, w->out, m->p.item_emb, bw->ra,
                      bw->rb, S ? bw->cand : NULL, S, U, C, V1, bw->chunk, (float)lambda);
    }
    double loss = sq_ctx_loss_mix(cx, wt, v, lambda > 0 ? 3 : 2);
    *count = c1 + c2;
    if (loss == loss && loss - loss == 0) /* finite: the trainer stops otherwise */
        sq_sasrec_backward(m, w, b, g);
    return loss;
}

static void view(sq_model *out, const sq_net *n)
{
    sq_backbone_net *p = n->impl;
    const blin_config *c = n->cfg;
    blin_scorer *v = p->extra;
    sq_sasrec_model_view(&v->inner, sq_sasrec_net_model(&p->inner));
    v->infer_pad = c->infer_pad;
    v->max_len = c->base.max_len;
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "blin");
    out->n_items = c->base.n_items;
    out->impl = v;
    out->scores = scores;
    out->attention = attention;
}

static const sq_opt *more_opts(int i)
{
    /* the backbone's options, then those of every attention kind */
    return i == 0 ? backbone()->opts : backbone()->more_opts(i - 1);
}

/* --device cuda: the KL term has its kernels in both modes (k_bkl.cu) and
 * the sampled softmax its (k_sampled.cu); the backbone's attention kind
 * must have its kernels. */
static int gpu_check(const void *cfg, sq_err *e)
{
    const blin_config *c = cfg;
    return backbone()->gpu_check(&c->base, e);
}

const sq_model_def sq_model_blin = {
    .name = "blin",
    .summary = "Blin: RandomPad views, efficient-dwc attention, bidirectional KL",
    .opts = blin_opts, .more_opts = more_opts, .cfg_size = sizeof(blin_config),
    .config = config, .config_check = config_check, .config_write = config_write,
    .config_read = config_read, .load = load, .check_step = check_step,
    .net_alloc = net_alloc, .net_free = sq_backbone_net_free, .net_init = sq_backbone_net_init,
    .init_from = sq_backbone_init_from, .batcher = batcher, .work_alloc = work_alloc,
    .work_free = work_free, .step = step, .view = view, .gpu_check = gpu_check, .graphs = 1,
};
