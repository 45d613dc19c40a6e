/* elastic_model.c - ELASTIC as a registered model (model.h): its options
 * and config, tensors, the training step of the generic trainer, model
 * files, scoring and expert usage. The math is elastic.c; the model and its
 * decisions elastic.h. */
#include "elastic.h"
#include "kv.h"
#include "ops.h"
#include "pkm.h"
#include "sasrec.h" /* SQ_LOSS_CE */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------ */
/* Options and configs                                                      */

#define OFF(field) offsetof(sq_elastic_config, field)
static const sq_opt elastic_opts[] = {
    {.name = "layers", .type = SQ_OPT_INT, .offset = OFF(n_layers), .def = "2", .lo = 1,
     .hi = 64, .arg = "N", .help = "LDA layers (default 2)"},
    {.name = "heads", .type = SQ_OPT_INT, .offset = OFF(n_heads), .def = "2", .lo = 1,
     .hi = 8192, .arg = "N", .help = "attention heads, dividing --dim (default 2)"},
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "64", .lo = 2, .hi = 8192,
     .arg = "N", .help = "hidden size d, even (default 64)"},
    {.name = "ffn", .type = SQ_OPT_INT, .offset = OFF(ffn), .def = "256", .lo = 1,
     .hi = 65536, .arg = "N", .help = "feed-forward inner size (default 256)"},
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(max_len), .def = "256", .lo = 1,
     .hi = 65536, .arg = "N", .help = "newest N items per sequence (elastic: default 256)"},
    {.name = "dropout", .type = SQ_OPT_REAL, .offset = OFF(dropout), .def = "0.2", .lo = 0,
     .hi = 1, .hi_open = 1, .arg = "P", .help = "dropout rate (default 0.2)"},
    {.key = "ln_eps", .type = SQ_OPT_REAL, .offset = OFF(ln_eps), .def = "1e-8", .lo = 0,
     .hi = 1, .lo_open = 1},
    {.name = "pool", .type = SQ_OPT_SQUARE, .offset = OFF(pool), .def = "16x16", .lo = 1,
     .hi = 46340, .arg = "NxN",
     .help = "elastic: the interest pool, N x N experts behind\n"
             "two sets of N sub-keys (default 16x16)"},
    {.name = "topk-experts", .type = SQ_OPT_INT, .offset = OFF(topk), .def = "8", .lo = 1,
     .hi = 4096, .arg = "K",
     .help = "elastic: experts retrieved per user = interest\ntokens (default 8)"},
    {.name = "stride", .type = SQ_OPT_INT, .offset = OFF(stride), .def = "4", .lo = 2,
     .hi = 65536, .arg = "S", .help = "elastic: the query network's pooling stride\n(default 4)"},
    {.name = "query", .type = SQ_OPT_CHOICE, .offset = OFF(query), .def = "net",
     .choices = "net|mean", .arg = "net|mean",
     .help = "elastic: the retrieval query: the hierarchical\n"
             "query network (default) or the mean of the inputs"},
    {.name = "expert-weights", .type = SQ_OPT_CHOICE, .offset = OFF(weights),
     .def = "softmax", .choices = "softmax|none", .arg = "softmax|none",
     .help = "elastic: scale each retrieved expert by the softmax\n"
             "of its score (default) or not (Algorithm 1)"},
    {.name = "no-imr", .type = SQ_OPT_FLAG, .offset = OFF(no_imr), .def = "0",
     .help = "elastic: one learned set of interest tokens for\nall users (w/o IMR)"},
    {.name = "no-dispatcher", .type = SQ_OPT_FLAG, .offset = OFF(no_dispatcher), .def = "0",
     .help = "elastic: no aggregation; the sequence reads the\nretrieved experts (w/o Dispatcher)"},
    {0},
};
#undef OFF

void sq_elastic_defaults(sq_elastic_config *c)
{
    memset(c, 0, sizeof *c);
    sq_opt_defaults(elastic_opts, c);
}

int sq_elastic_levels(const sq_elastic_config *c)
{
    int a = 1;
    for (long long span = c->stride; span < c->max_len; span *= c->stride)
        a++;
    return a;
}

int sq_elastic_config_check(const sq_elastic_config *c, sq_err *e)
{
    if (c->n_items < 1 || c->n_items > (1u << 30))
        return sq_fail(e, SQ_EX_USAGE, "n_items %" PRIu32 " out of range", c->n_items);
    if (sq_opt_check(elastic_opts, c, SQ_EX_USAGE, e))
        return e->code;
    if (c->dim % c->n_heads)
        return sq_fail(e, SQ_EX_USAGE, "--heads %d does not divide --dim %d", c->n_heads,
                       c->dim);
    if (c->dim % 2)
        return sq_fail(e, SQ_EX_USAGE, "--dim %d: the product keys need an even dim",
                       c->dim);
    if (c->topk > c->pool * c->pool || (!c->no_imr && c->topk > c->pool))
        return sq_fail(e, SQ_EX_USAGE, "--topk-experts %d: at most N of --pool %dx%d (the "
                       "top-k of each sub-key set)", c->topk, c->pool, c->pool);
    if ((uint64_t)(c->n_items + 1) * (uint64_t)c->dim > (uint64_t)1 << 40 ||
        (uint64_t)c->pool * c->pool * c->dim > (uint64_t)1 << 40)
        return sq_fail(e, SQ_EX_USAGE, "item table or interest pool too large");
    if (c->n_layers > 64 || sq_elastic_levels(c) > 24)
        return sq_fail(e, SQ_EX_USAGE, "--stride %d: too many query levels for --max-len %d",
                       c->stride, c->max_len);
    return 0;
}

int sq_elastic_tensor_set(const sq_elastic_config *c, sq_tensor_set *s, sq_err *e)
{
    static const sq_tensor_desc table[SQ_ELASTIC_NT] = {
#define DESC(name, decay, init, shape, use) {#name, SQ_ET_##name, decay, init, shape},
        SQ_ELASTIC_TENSORS(DESC)
#undef DESC
    };
    enum { ALL, QNET, IMR, NOIMR, AGG };
#define USE(name, decay, init, shape, use) use,
    static const int uses[SQ_ELASTIC_NT] = {SQ_ELASTIC_TENSORS(USE)};
#undef USE
    int in_use[] = {1, !c->no_imr && c->query == SQ_ELASTIC_QUERY_NET, !c->no_imr, c->no_imr,
                    !c->no_dispatcher};
    sq_dims d = {{0}};
    uint64_t C = (uint64_t)c->dim;
    sq_dims_set(&d, 'W', (uint64_t)c->n_items + 1);
    sq_dims_set(&d, 'N', (uint64_t)c->max_len);
    sq_dims_set(&d, 'C', C);
    sq_dims_set(&d, 'F', (uint64_t)c->ffn);
    sq_dims_set(&d, 'L', (uint64_t)c->n_layers);
    sq_dims_set(&d, 'A', (uint64_t)sq_elastic_levels(c));
    sq_dims_set(&d, 'S', (uint64_t)c->stride * C);
    sq_dims_set(&d, 'T', 3 * C);
    sq_dims_set(&d, 'U', 2 * C);
    sq_dims_set(&d, 'P', (uint64_t)c->pool);
    sq_dims_set(&d, 'D', C / 2);
    sq_dims_set(&d, 'E', (uint64_t)c->pool * (uint64_t)c->pool);
    sq_dims_set(&d, 'M', (uint64_t)c->topk);
    memset(s, 0, sizeof *s);
    for (int i = 0; i < SQ_ELASTIC_NT; i++)
        if (sq_tensors_add(s, &table[i], 1, &d, in_use[uses[i]], 0, e))
            return e->code;
    sq_tensors_layout(s);
    return 0;
}

static int config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    sq_elastic_config *c = cfg;
    char kb[64], val[64];
    sq_elastic_defaults(c);
    c->n_items = d->n_items;
    if (sq_opt_apply(elastic_opts, c, given, 0, SQ_EX_USAGE, NULL, e))
        return e->code;
    for (const char *line = given; line && *line; line = strchr(line, '\n') + 1) {
        size_t kl = strcspn(line, "=");
        snprintf(kb, sizeof kb, "%.*s", (int)kl, line);
        const sq_opt *o = elastic_opts;
        while (o->type && strcmp(sq_opt_key(o, val, sizeof val), kb))
            o++;
        if (!o->type) {
            char name[64];
            sq_opt_name_of_key(kb, name, sizeof name);
            return sq_fail(e, SQ_EX_USAGE, "--%s is not an option of --model elastic", name);
        }
        if (!strchr(line, '\n'))
            break;
    }
    if (d->padded_len > 0 && !sq_kv_get(given ? given : "", "max_len", val, sizeof val))
        c->max_len = d->padded_len;
    return sq_elastic_config_check(c, e);
}

static int config_check(const void *cfg, sq_err *e) { return sq_elastic_config_check(cfg, e); }

static int config_write(const void *cfg, sq_modelfile *mf, sq_err *e)
{
    return sq_opt_write(elastic_opts, cfg, sq_modelfile_set_kv, mf, e);
}

static int config_read(void *cfg, const sq_modelfile *mf, const char *path, sq_err *e)
{
    sq_elastic_config *c = cfg;
    char buf[64];
    sq_elastic_defaults(c);
    if (!sq_modelfile_get(mf, "n_items", buf, sizeof buf) ||
        sscanf(buf, "%" SCNu32, &c->n_items) != 1)
        return sq_fail(e, SQ_EX_DATA, "%s: config has no n_items", path);
    if (sq_opt_apply(elastic_opts, c, mf->config, 1, SQ_EX_DATA, path, e))
        return e->code;
    sq_err ce = {0};
    if (sq_elastic_config_check(c, &ce))
        return sq_fail(e, SQ_EX_DATA, "%s: bad config: %s", path, ce.msg);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Scoring                                                                  */

/* What one scoring thread runs: histories b0, b0 + step, ... forward on a
 * one-thread copy of the model; their states into hs and, with count,
 * their experts counted (count is per thread: [threads, pool^2]). */
typedef struct {
    const sq_elastic *one;
    uint64_t *count;
} states_job;

static int forward_states(const void *job, const sq_batch *hist, int b0, int step, float *hs,
                          sq_err *e)
{
    const states_job *j = job;
    const sq_elastic *m = j->one;
    const sq_elastic_config *c = &m->cfg;
    int N = c->max_len, C = c->dim;
    sq_elastic_cap cap = {.B = 1, .T = N, .n = 1, .N = N, .train = 0};
    sq_elastic_work w;
    int *ints = malloc((2 * (size_t)N + 3) * sizeof *ints);
    if (!ints)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    if (sq_elastic_work_alloc(&w, m, &cap, e)) {
        free(ints);
        return e->code;
    }
    uint64_t *count = j->count ? j->count + (size_t)b0 * c->pool * c->pool : NULL;
    int rc = 0;
    for (int b = b0; b < hist->B && !rc; b += step) {
        sq_packed pb;
        if ((rc = sq_packed_one(&pb, ints, hist->items + hist->off[b], hist->len[b], c->max_len,
                                c->n_items, e)) != 0)
            break;
        sq_elastic_forward(m, &w, &pb, 0, 0, 0);
        if (hs)
            sq_copy(&m->cx, hs + (size_t)b * C, w.out, (size_t)C); /* its one entry */
        if (count && !c->no_imr)
            sq_pkm_count(w.pkm_idx, 1, c->topk, count);
    }
    sq_elastic_work_free(&w);
    free(ints);
    return rc;
}

/* On a GPU: the histories as one packed batch (sq_packed_histories), one
 * forward on the device; their states into hs (on the device) and, with
 * count, their experts counted on the host from the retrieval's indices. */
static int device_states(const sq_elastic *m, const sq_batch *hist, float *hs, uint64_t *count,
                         sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    const sq_elastic_config *c = &m->cfg;
    sq_packed pb;
    int *ints = NULL, *idx = NULL, have = 0;
    sq_elastic_work w;
    int rc = sq_packed_histories(&pb, &ints, hist, c->max_len, c->n_items, e);
    if (!rc && !(rc = sq_packed_stage(cx, &pb, e))) {
        sq_elastic_cap cap = {.B = pb.B, .T = pb.T, .n = pb.n, .N = c->max_len, .train = 0};
        if (!(rc = sq_elastic_work_alloc(&w, m, &cap, e)))
            have = 1;
    }
    if (!rc) {
        sq_elastic_forward(m, &w, &pb, 0, 0, 0);
        if (hs) /* the entries' rows: each history's newest, in order */
            sq_copy(cx, hs, w.out, (size_t)pb.n * c->dim);
        size_t nk = (size_t)pb.B * c->topk;
        if (count && !c->no_imr) {
            if (!(idx = malloc(nk * sizeof *idx)))
                rc = sq_fail(e, SQ_EX_OSERR, "out of memory for expert counts");
            else if (!(rc = sq_ctx_download(cx, idx, w.pkm_idx, nk * sizeof *idx, e)))
                sq_pkm_count(idx, pb.B, c->topk, count);
        }
        if (!rc)
            rc = sq_ctx_sync(cx, e);
    }
    if (have)
        sq_elastic_work_free(&w);
    free(idx);
    free(ints);
    return rc;
}

static int elastic_scores(const sq_elastic *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    int B = hist->B, C = m->cfg.dim;
    if (B <= 0)
        return 0;
    if (cx->backend != SQ_BACKEND_CPU) {
        float *hs = sq_ctx_alloc(cx, (size_t)B * C * sizeof *hs, e);
        float *dsc = hs ? sq_ctx_alloc(cx, (size_t)B * (m->cfg.n_items + 1) * sizeof *dsc, e)
                        : NULL;
        int rc = !hs || !dsc ? e->code : 0;
        sq_ctx_invariant(cx, 1); /* a user's scores whatever the batch (ctx.h) */
        if (!rc)
            rc = device_states(m, hist, hs, NULL, e) ||
                 sq_score_states(cx, hs, B, m->p.item_emb, NULL, C, (int)m->cfg.n_items + 1, dsc,
                                 e) ||
                 sq_scores_out(cx, dsc, hist, (int)m->cfg.n_items + 1, scores, e)
                 ? e->code : 0;
        sq_ctx_invariant(cx, 0);
        sq_ctx_free(cx, dsc);
        sq_ctx_free(cx, hs);
        return rc;
    }
    sq_elastic one = *m;
    one.cx.threads = 1;
    states_job job = {&one, NULL};
    float *hs = sq_ctx_alloc(cx, (size_t)B * C * sizeof *hs, e);
    if (!hs)
        return e->code;
    int rc = sq_states_parallel(forward_states, &job, hist, sq_ctx_threads(cx), hs, e);
    if (!rc)
        rc = sq_score_states(cx, hs, B, m->p.item_emb, NULL, C, (int)m->cfg.n_items + 1,
                             scores, e);
    sq_ctx_free(cx, hs);
    return rc;
}

/* Adds to count[pool^2] the experts each history of hist retrieves. */
static int elastic_experts(const sq_elastic *m, const sq_batch *hist, uint64_t *count,
                           sq_err *e)
{
    const sq_elastic_config *c = &m->cfg;
    if (c->no_imr || hist->B <= 0)
        return 0;
    if (m->cx.backend != SQ_BACKEND_CPU)
        return device_states(m, hist, NULL, count, e);
    size_t K = (size_t)c->pool * c->pool;
    int nt = sq_ctx_threads(&m->cx);
    nt = nt < hist->B ? nt : hist->B;
    sq_elastic one = *m;
    one.cx.threads = 1;
    uint64_t *per = calloc((size_t)nt * K, sizeof *per);
    if (!per)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for expert counts");
    states_job job = {&one, per};
    int rc = sq_states_parallel(forward_states, &job, hist, nt, NULL, e);
    for (int t = 0; t < nt && !rc; t++) /* in thread order: the sums are exact anyway */
        for (size_t i = 0; i < K; i++)
            count[i] += per[(size_t)t * K + i];
    free(per);
    return rc;
}

static int view_scores(sq_model *mm, const sq_batch *b, float *scores, sq_err *e)
{
    return elastic_scores(mm->impl, b, scores, e);
}

static int view_experts(const sq_model *mm, const sq_batch *b, uint64_t *count, sq_err *e)
{
    return elastic_experts(mm->impl, b, count, e);
}

static void set_view(sq_model *out, const sq_elastic *m)
{
    snprintf(out->name, sizeof out->name, "elastic");
    out->n_items = m->cfg.n_items;
    out->impl = (void *)(uintptr_t)m;
    out->scores = view_scores;
    out->experts = m->cfg.no_imr ? NULL : view_experts;
    out->n_experts = m->cfg.no_imr ? 0 : (uint64_t)m->cfg.pool * m->cfg.pool;
}

static void owned_free(sq_model *mm)
{
    sq_elastic *m = mm->impl;
    if (m) {
        sq_elastic_free(m);
        free(m);
    }
    mm->impl = NULL;
}

static int load(sq_model *mm, sq_modelfile *mf, const sq_ctx *cx, sq_err *e)
{
    sq_elastic_config c;
    if (config_read(&c, mf, "elastic", e))
        return e->code;
    sq_elastic *m = malloc(sizeof *m);
    if (!m)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (sq_elastic_alloc_on(m, &c, cx, e) ||
        sq_tensors_from_file_on(cx, &m->ts, m->mem, mf, "elastic", e)) {
        sq_elastic_free(m);
        free(m);
        return e->code;
    }
    set_view(mm, m);
    mm->free_impl = owned_free;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The training step of the generic trainer (model.h)                       */

typedef struct {
    sq_elastic model, grads;
} net_impl;

static int check_step(const void *cfg, const sq_step_opts *o, sq_err *e)
{
    (void)cfg;
    if (sq_loss_check(o, ~(1u << SQ_LOSS_BCE), "elastic",
                      "it trains softmax cross-entropy (eq. 9-10), full or sampled (ce, "
                      "sampled-softmax, gbce)", e))
        return e->code;
    if (sq_target_every_position(o->target))
        return sq_fail(e, SQ_EX_USAGE, "--model elastic trains the last position of each "
                       "input only (its interest tokens see every position, so training "
                       "all of them would leak the future): use --target random (its "
                       "default) or last");
    return 0;
}

static int net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e)
{
    net_impl *p = calloc(1, sizeof *p);
    if (!p)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    n->impl = p;
    if (sq_elastic_alloc_on(&p->model, cfg, cx, e) ||
        sq_elastic_alloc_on(&p->grads, cfg, cx, e))
        return e->code;
    n->cx = &p->model.cx;
    n->ts = &p->model.ts;
    n->params = p->model.mem;
    n->grads = p->grads.mem;
    n->cfg = &p->model.cfg;
    return 0;
}

static void net_free(sq_net *n)
{
    net_impl *p = n->impl;
    if (p) {
        sq_elastic_free(&p->grads);
        sq_elastic_free(&p->model);
        free(p);
    }
    memset(n, 0, sizeof *n);
}

static void net_init(sq_net *n, uint64_t seed)
{
    sq_elastic_init_weights(&((net_impl *)n->impl)->model, seed);
}

static int batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                   sq_err *e)
{
    const sq_elastic_config *c = cfg;
    if (sq_batcher_init(bt, s, o->target, c->max_len, o->batch, 0, o->seed, e))
        return e->code;
    return sq_loss_batcher_negatives(bt, o, e);
}

static int work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e)
{
    const net_impl *p = n->impl;
    sq_elastic_work *w = calloc(1, sizeof *w);
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *work = w;
    sq_elastic_cap cap = {.B = bt->batch, .T = bt->cap_T, .n = bt->cap_T,
                          .N = p->model.cfg.max_len, .train = 1};
    return sq_elastic_work_alloc(w, &p->model, &cap, e);
}

static void work_free(void *work)
{
    sq_elastic_work *w = work;
    if (w) {
        sq_elastic_work_free(w);
        free(w);
    }
}

static double step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                   uint64_t t, int *count)
{
    net_impl *p = n->impl;
    sq_elastic_work *w = work;
    sq_elastic_forward(&p->model, w, b, 1, o->seed, t);
    double loss = sq_elastic_loss(&p->model, w, b, sq_loss_step(o), &p->grads, count);
    if (loss == loss && loss - loss == 0) /* finite: the trainer stops otherwise */
        sq_elastic_backward(&p->model, w, b, &p->grads);
    return loss;
}

static void view(sq_model *out, const sq_net *n)
{
    memset(out, 0, sizeof *out);
    set_view(out, &((const net_impl *)n->impl)->model);
}

/* --device cuda: every op of ELASTIC's step has a CUDA twin (its own in
 * cuda/k_elastic.cu), its per-batch plan is staged, and it scores packed
 * histories on the device (device_states). Its launches follow the
 * batch's shapes alone (elastic.h FIXED LEVELS): .graphs, --cuda-graphs. */
static int gpu_check(const void *cfg, sq_err *e)
{
    (void)cfg, (void)e;
    return 0;
}

const sq_model_def sq_model_elastic = {
    .name = "elastic",
    .summary = "ELASTIC: dispatcher attention over retrieved interest experts",
    .opts = elastic_opts, .cfg_size = sizeof(sq_elastic_config), .config = config,
    .config_check = config_check, .config_write = config_write, .config_read = config_read,
    .load = load, .check_step = check_step, .net_alloc = net_alloc, .net_free = net_free,
    .net_init = net_init, .batcher = batcher, .work_alloc = work_alloc,
    .work_free = work_free, .step = step, .view = view, .gpu_check = gpu_check,
    .train_defaults = "train.target=random\n", .graphs = 1,
};
