/* flat.c - the plumbing of the flat models (flat.h): parameters, the loss
 * against the output table, and (in the float build only) configs, model
 * files, the trainer's step and scoring. Written over `real`: the double
 * build gives the gradient checks sq_flat_alloc_f64 and sq_flat_loss_f64. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif
#include "real.h"

#include "flat.h"
#include "kv.h"
#include "ops.h"
#include "nextloss.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const sq_flat_head *R(head)(const void *cfg)
{
    return cfg;
}

/* The output table's index, rows (V1) and width (D) in m's tensors. */
static int R(out_index)(const sq_tensor_set *ts, const sq_flat_def *def)
{
    return sq_tensors_find(ts, def->out);
}

int R(sq_flat_alloc)(R(sq_flat) *m, const sq_flat_def *def, const void *cfg, const sq_ctx *cx,
                     sq_err *e)
{
    memset(m, 0, sizeof *m);
    m->def = def;
    m->cx = *cx;
    if (!(m->cfg = malloc(def->cfg_size)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(m->cfg, cfg, def->cfg_size);
    ((sq_flat_head *)m->cfg)->def = def;
    const sq_flat_head *h = R(head)(m->cfg);
    if (sq_flat_config_check(m->cfg, e) || def->tensors(m->cfg, &m->ts, e))
        return e->code;
    if (def->users && h->n_users == 0)
        return sq_fail(e, SQ_EX_DATA, "--model %s needs user ids: the training stream has no "
                       "user", def->name);
    int oi = R(out_index)(&m->ts, def);
    if (oi < 0 || m->ts.nd[oi] != 2 || m->ts.shape[oi][0] != (uint64_t)h->n_items + 1 ||
        (def->out_bias && sq_tensors_find(&m->ts, def->out_bias) < 0))
        return sq_fail(e, SQ_EX_SOFTWARE, "--model %s: no output table [n_items + 1, D] "
                       "named %s", def->name, def->out ? def->out : "(null)");
    if (!(m->mem = sq_ctx_alloc(cx, (m->ts.total ? m->ts.total : 1) * sizeof(real), e)))
        return e->code;
    for (int i = 0; i < m->ts.n; i++)
        m->t[i] = m->ts.size[i] ? m->mem + m->ts.off[i] : NULL;
    return 0;
}

void R(sq_flat_free)(R(sq_flat) *m)
{
    if (m->mem)
        sq_ctx_free(&m->cx, m->mem);
    free(m->cfg);
    memset(m, 0, sizeof *m);
}

/* Zeroes row 0 (padding) of tensor i of host memory mem. */
static void R(zero_row0)(const sq_tensor_set *ts, real *mem, int i)
{
    if (i >= 0 && ts->size[i] && ts->shape[i][0])
        memset(mem + ts->off[i], 0, ts->size[i] / ts->shape[i][0] * sizeof(real));
}

void R(sq_flat_init)(R(sq_flat) *m, uint64_t seed)
{
    size_t bytes = m->ts.total * sizeof(real);
    real *host = m->cx.backend == SQ_BACKEND_CPU ? m->mem : malloc(bytes ? bytes : 1);
    if (!host)
        return; /* the upload below would fail the same way: leave zeros */
    R(sq_tensors_init)(&m->ts, host, &m->def->init, seed);
    R(zero_row0)(&m->ts, host, R(out_index)(&m->ts, m->def));
    for (const char *const *z = m->def->zero_row0; z && *z; z++)
        R(zero_row0)(&m->ts, host, sq_tensors_find(&m->ts, *z));
    if (host != m->mem) {
        sq_err e = {0};
        (void)sq_ctx_upload(&m->cx, m->mem, host, bytes, &e);
        free(host);
    }
}

double R(sq_flat_loss)(const R(sq_flat) *m, const sq_packed *b, const real *h,
                       sq_loss_spec loss, real *scratch, real *dh, R(sq_flat) *g, int *count)
{
    const sq_ctx *cx = &m->cx;
    int oi = R(out_index)(&m->ts, m->def);
    int bi = m->def->out_bias ? sq_tensors_find(&m->ts, m->def->out_bias) : -1;
    int V1 = (int)m->ts.shape[oi][0], D = (int)m->ts.shape[oi][1];
    real *dO = g ? g->t[oi] : NULL, *db = g && bi >= 0 ? g->t[bi] : NULL;
    if (dh)
        R(sq_zero)(cx, dh, (size_t)b->n * D);
    /* (BCE: check_step refuses it with a bias) */
    return R(sq_next_item_loss)(cx, loss, b, NULL, dh, dO, db, scratch, h, m->t[oi],
                                bi >= 0 ? m->t[bi] : NULL, D, V1, sq_ce_chunk_on(cx, b->n, V1), 1,
                                count);
}

#if !SQ_REAL_IS_F64
/* ------------------------------------------------------------------------ */
/* Configs (once: they hold no reals)                                       */

static const sq_flat_def *def_of(const void *cfg)
{
    return ((const sq_flat_head *)cfg)->def;
}

/* SQ_EX_USAGE for a key of given that is not one of t's options. */
static int unknown_option(const sq_opt *t, const char *model, const char *given, sq_err *e)
{
    char kb[64], val[64], name[64];
    for (const char *line = given; line && *line;) {
        size_t kl = strcspn(line, "=\n");
        snprintf(kb, sizeof kb, "%.*s", (int)kl, line);
        const sq_opt *o = t;
        while (o->type && strcmp(sq_opt_key(o, val, sizeof val), kb))
            o++;
        if (!o->type && kl)
            return sq_fail(e, SQ_EX_USAGE, "--%s is not an option of --model %s",
                           sq_opt_name_of_key(kb, name, sizeof name), model);
        const char *nl = strchr(line, '\n');
        line = nl ? nl + 1 : NULL;
    }
    return 0;
}

int sq_flat_config(const sq_flat_def *def, void *cfg, const char *given, const sq_data_dims *d,
                   sq_err *e)
{
    char val[64];
    sq_flat_head *h = cfg;
    memset(cfg, 0, def->cfg_size);
    sq_opt_defaults(def->opts, cfg);
    h->def = def;
    h->n_items = d->n_items;
    h->n_users = def->users ? d->n_users : 0;
    if (unknown_option(def->opts, def->name, given, e) ||
        sq_opt_apply(def->opts, cfg, given, 0, SQ_EX_USAGE, NULL, e))
        return e->code;
    if (d->padded_len > 0 && !sq_kv_get(given ? given : "", "max_len", val, sizeof val))
        h->max_len = d->padded_len;
    return sq_flat_config_check(cfg, e);
}

int sq_flat_config_check(const void *cfg, sq_err *e)
{
    const sq_flat_def *def = def_of(cfg);
    const sq_flat_head *h = cfg;
    if (!def)
        return sq_fail(e, SQ_EX_SOFTWARE, "a flat model's config without its def");
    if (h->n_items < 1 || h->n_items > (1u << 30))
        return sq_fail(e, SQ_EX_USAGE, "n_items %" PRIu32 " out of range", h->n_items);
    if (h->max_len < 1)
        return sq_fail(e, SQ_EX_USAGE, "--max-len must be at least 1");
    if (sq_opt_check(def->opts, cfg, SQ_EX_USAGE, e))
        return e->code;
    return def->check ? def->check(cfg, e) : 0;
}

int sq_flat_config_write(const void *cfg, sq_modelfile *mf, sq_err *e)
{
    const sq_flat_def *def = def_of(cfg);
    char buf[32];
    if (def->users) {
        snprintf(buf, sizeof buf, "%" PRIu32, ((const sq_flat_head *)cfg)->n_users);
        if (sq_modelfile_set_kv(mf, "n_users", buf, e))
            return e->code;
    }
    return sq_opt_write(def->opts, cfg, sq_modelfile_set_kv, mf, e);
}

int sq_flat_config_read(const sq_flat_def *def, void *cfg, const sq_modelfile *mf,
                        const char *path, sq_err *e)
{
    sq_flat_head *h = cfg;
    char buf[64];
    memset(cfg, 0, def->cfg_size);
    sq_opt_defaults(def->opts, cfg);
    h->def = def;
    if (!sq_modelfile_get(mf, "n_items", buf, sizeof buf) ||
        sscanf(buf, "%" SCNu32, &h->n_items) != 1)
        return sq_fail(e, SQ_EX_DATA, "%s: config has no n_items", path);
    if (def->users && (!sq_modelfile_get(mf, "n_users", buf, sizeof buf) ||
                       sscanf(buf, "%" SCNu32, &h->n_users) != 1 || h->n_users == 0))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no n_users", path);
    if (sq_opt_apply(def->opts, cfg, mf->config, 1, SQ_EX_DATA, path, e))
        return e->code;
    sq_err ce = {0};
    if (sq_flat_config_check(cfg, &ce))
        return sq_fail(e, SQ_EX_DATA, "%s: bad config: %s", path, ce.msg);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Scoring                                                                  */

/* Token rows of history b's scoring input: its newest N items, a cold
 * user one padding token. */
static int input_rows(int N, const sq_batch *hist, int b)
{
    uint32_t n = hist->len[b];
    return n == 0 ? 1 : n < (uint32_t)N ? (int)n : N;
}

/* The scoring input of histories [b0, b1) of hist as one packed batch,
 * each as it would be packed alone, one after another: its newest max_len
 * items (a cold user: one padding token), positions ending at max_len - 1,
 * its newest row its one entry. T is their token rows; ints holds 2 T +
 * 2 (b1 - b0) + 1 entries (ids, pos [T], off [B + 1], rows [B]), uid
 * b1 - b0 (each history's user, 0 when not known). */
static void run_input(int N, const sq_batch *hist, int b0, int b1, int T, sq_packed *pb,
                      int *ints, uint32_t *uid)
{
    int B = b1 - b0, o = 0;
    memset(pb, 0, sizeof *pb);
    pb->ids = ints;
    pb->pos = ints + T;
    pb->off = ints + 2 * (size_t)T;
    pb->rows = pb->off + B + 1;
    pb->uid = uid;
    pb->B = B;
    pb->T = T;
    pb->n = B;
    pb->views = 1;
    pb->off[0] = 0;
    for (int b = 0; b < B; b++) {
        uint32_t n = hist->len[b0 + b];
        int Tb = input_rows(N, hist, b0 + b), len = n ? Tb : 0;
        const uint32_t *it = hist->items + hist->off[b0 + b] + (n - (uint32_t)len);
        pb->ids[o] = 0;
        for (int t = 0; t < len; t++)
            pb->ids[o + t] = (int)it[t];
        for (int t = 0; t < Tb; t++)
            pb->pos[o + t] = N - Tb + t;
        o += Tb;
        pb->off[b + 1] = o;
        pb->rows[b] = o - 1;
        uid[b] = hist->user ? hist->user[b0 + b] : 0;
    }
}

/* Refuses a history with an item out of range or a user without a row. */
static int check_history(const sq_flat *m, const sq_batch *hist, int b, sq_err *e)
{
    const sq_flat_head *h = m->cfg;
    const uint32_t *it = hist->items + hist->off[b];
    for (uint32_t t = 0; t < hist->len[b]; t++)
        if (it[t] == 0 || it[t] > h->n_items)
            return sq_fail(e, SQ_EX_DATA, "item %" PRIu32 " out of 1..n_items %" PRIu32, it[t],
                           h->n_items);
    if (m->def->users && (!hist->user || hist->user[b] >= h->n_users))
        return sq_fail(e, SQ_EX_DATA, "--model %s scores only users of its training stream "
                       "(user ids below %" PRIu32 ")", m->def->name, h->n_users);
    return 0;
}

/* Histories b0, b0 + step, ... forward on a one-thread copy of the model,
 * each packed alone, their states into rows of hs. */
static int forward_states(const void *model, const sq_batch *hist, int b0, int step, float *hs,
                          sq_err *e)
{
    const sq_flat *m = model;
    const sq_flat_fns *f = &m->def->f;
    int N = R(head)(m->cfg)->max_len;
    int oi = out_index(&m->ts, m->def), D = (int)m->ts.shape[oi][1];
    sq_flat_cap cap = {.B = 1, .T = N, .n = 1, .N = N, .train = 0};
    void *w = NULL;
    int *ints = malloc((2 * (size_t)N + 3) * sizeof *ints);
    if (!ints)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    if (f->work_alloc(m, &cap, &w, e)) {
        free(ints);
        if (f->work_free)
            f->work_free(w);
        return e->code;
    }
    int rc = 0;
    for (int b = b0; b < hist->B && !rc; b += step) {
        if ((rc = check_history(m, hist, b, e)) != 0)
            break;
        sq_packed pb;
        uint32_t uid;
        run_input(N, hist, b, b + 1, input_rows(N, hist, b), &pb, ints, &uid);
        const float *h = f->forward(m, w, &pb, 0, 0, 0);
        sq_copy(&m->cx, hs + (size_t)b * D, h, (size_t)D);
    }
    f->work_free(w);
    free(ints);
    return rc;
}

/* The end of the run of histories that starts at b0 (GPU scoring): at
 * most SQ_FLAT_GPU_ROWS token rows, or history b0 alone; *T its rows. */
static int run_end(int N, const sq_batch *hist, int b0, int *T)
{
    int b1 = b0, rows = 0;
    for (; b1 < hist->B; b1++) {
        int r = input_rows(N, hist, b1);
        if (b1 > b0 && rows + r > SQ_FLAT_GPU_ROWS)
            break;
        rows += r;
    }
    *T = rows;
    return b1;
}

/* On a GPU (flat.h): runs of consecutive histories, each one packed batch
 * staged and run by one forward into the states' rows on the device, then
 * the scores of them all on the device, downloaded once. Nothing on the
 * host reads or writes a device buffer. */
static int device_scores(const sq_flat *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    const sq_flat_fns *f = &m->def->f;
    int oi = out_index(&m->ts, m->def);
    int bi = m->def->out_bias ? sq_tensors_find(&m->ts, m->def->out_bias) : -1;
    int B = hist->B, V1 = (int)m->ts.shape[oi][0], D = (int)m->ts.shape[oi][1];
    int N = R(head)(m->cfg)->max_len, rc = 0;
    sq_flat_cap cap = {.B = 1, .T = 1, .n = 1, .N = N, .train = 0};
    for (int b = 0; b < B; b++)
        if (check_history(m, hist, b, e))
            return e->code;
    for (int b0 = 0, b1, T; b0 < B; b0 = b1) { /* the workspace of the largest run */
        b1 = run_end(N, hist, b0, &T);
        cap.B = b1 - b0 > cap.B ? b1 - b0 : cap.B;
        cap.T = T > cap.T ? T : cap.T;
    }
    cap.n = cap.B;
    int *ints = malloc((2 * (size_t)cap.T + 2 * (size_t)cap.B + 1) * sizeof *ints);
    uint32_t *uid = malloc((size_t)cap.B * sizeof *uid);
    void *w = NULL;
    float *hs = NULL, *dsc = NULL;
    if (!ints || !uid)
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    else if (f->work_alloc(m, &cap, &w, e) ||
             !(hs = sq_ctx_alloc(cx, (size_t)B * D * sizeof *hs, e)) ||
             !(dsc = sq_ctx_alloc(cx, (size_t)B * V1 * sizeof *dsc, e)))
        rc = e->code;
    for (int b0 = 0, b1, T; !rc && b0 < B; b0 = b1) {
        b1 = run_end(N, hist, b0, &T);
        sq_packed pb;
        run_input(N, hist, b0, b1, T, &pb, ints, uid);
        /* the run's integers up; the ops of its forward read them there
         * (the host arrays are rewritten only after they were queued) */
        if ((rc = sq_packed_stage(cx, &pb, e)) != 0)
            break;
        const float *h = f->forward(m, w, &pb, 0, 0, 0);
        sq_copy(cx, hs + (size_t)b0 * D, h, (size_t)(b1 - b0) * D);
    }
    if (!rc)
        rc = sq_score_states(cx, hs, B, m->t[oi], bi >= 0 ? m->t[bi] : NULL, D, V1, dsc, e);
    if (!rc)
        rc = sq_scores_out(cx, dsc, hist, V1, scores, e);
    sq_ctx_free(cx, dsc);
    sq_ctx_free(cx, hs);
    f->work_free(w);
    free(uid);
    free(ints);
    return rc;
}

static int flat_scores(const sq_flat *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    int oi = out_index(&m->ts, m->def);
    int bi = m->def->out_bias ? sq_tensors_find(&m->ts, m->def->out_bias) : -1;
    int B = hist->B, V1 = (int)m->ts.shape[oi][0], D = (int)m->ts.shape[oi][1];
    if (B <= 0)
        return 0;
    if (cx->backend != SQ_BACKEND_CPU) {
        sq_ctx_invariant(cx, 1); /* a user's scores whatever the batch (ctx.h) */
        int rc = device_scores(m, hist, scores, e);
        sq_ctx_invariant(cx, 0);
        return rc;
    }
    /* the CPU: each history alone on one thread, the scores rowwise, so
     * that a user's scores are the same bits whatever the batch */
    sq_flat one = *m;
    one.cx.threads = 1;
    float *hs = sq_ctx_alloc(cx, (size_t)B * D * sizeof *hs, e);
    if (!hs)
        return e->code;
    int rc = sq_states_parallel(forward_states, &one, hist, sq_ctx_threads(cx), hs, e);
    if (!rc)
        rc = sq_score_states(cx, hs, B, m->t[oi], bi >= 0 ? m->t[bi] : NULL, D, V1, scores, e);
    sq_ctx_free(cx, hs);
    return rc;
}

static int view_scores(sq_model *mm, const sq_batch *b, float *scores, sq_err *e)
{
    return flat_scores(mm->impl, b, scores, e);
}

static int knows_user(const sq_model *mm, uint32_t user)
{
    const sq_flat *m = mm->impl;
    return user < R(head)(m->cfg)->n_users;
}

static void set_view(sq_model *out, const sq_flat *m)
{
    snprintf(out->name, sizeof out->name, "%s", m->def->name);
    out->n_items = R(head)(m->cfg)->n_items;
    out->impl = (void *)(uintptr_t)m;
    out->scores = view_scores;
    out->knows_user = m->def->users ? knows_user : NULL;
}

static void owned_free(sq_model *mm)
{
    sq_flat *m = mm->impl;
    if (m) {
        sq_flat_free(m);
        free(m);
    }
    mm->impl = NULL;
}

/* The tensors of model file mf into m's block: itself on the CPU, a host
 * copy uploaded on a GPU. */
static int tensors_from_file(sq_flat *m, const sq_modelfile *mf, sq_err *e)
{
    return sq_tensors_from_file_on(&m->cx, &m->ts, m->mem, mf, m->def->name, e);
}

int sq_flat_load(const sq_flat_def *def, sq_model *mm, sq_modelfile *mf, const sq_ctx *cx,
                 sq_err *e)
{
    void *c = malloc(def->cfg_size);
    sq_flat *m = calloc(1, sizeof *m);
    int rc = !c || !m ? sq_fail(e, SQ_EX_OSERR, "out of memory")
                      : sq_flat_config_read(def, c, mf, def->name, e);
    if (!rc && (sq_flat_alloc(m, def, c, cx, e) || tensors_from_file(m, mf, e)))
        rc = e->code;
    free(c);
    if (rc) {
        if (m)
            sq_flat_free(m);
        free(m);
        return rc;
    }
    set_view(mm, m);
    mm->free_impl = owned_free;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* The training step of the generic trainer (model.h)                       */

typedef struct {
    sq_flat model, grads;
} net_impl;

typedef struct {
    const sq_flat_def *def;
    sq_ctx cx;
    void *mw;            /* the model's workspace */
    float *dh, *scratch;
} flat_work;

int sq_flat_check_step(const void *cfg, const sq_step_opts *o, sq_err *e)
{
    const sq_flat_def *def = def_of(cfg);
    if (o->loss == SQ_LOSS_BCE && def->out_bias)
        return sq_fail(e, SQ_EX_USAGE, "--model %s trains softmax cross-entropy only: --loss "
                       "bce is not available", def->name);
    return def->check_step ? def->check_step(cfg, o, e) : 0;
}

int sq_flat_gpu_check(const void *cfg, sq_err *e)
{
    const sq_flat_def *def = def_of(cfg);
    if (!def->gpu_check)
        return sq_fail(e, SQ_EX_USAGE, "--device cuda: --model %s runs on the CPU only (on the "
                       "GPU: " SQ_GPU_MODEL_NAMES ")", def->name);
    return def->gpu_check(cfg, e);
}

int sq_flat_gpu_any(const void *cfg, sq_err *e)
{
    (void)cfg, (void)e;
    return 0;
}

int sq_flat_net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e)
{
    net_impl *p = calloc(1, sizeof *p);
    if (!p)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    n->impl = p;
    if (sq_flat_alloc(&p->model, def_of(cfg), cfg, cx, e) ||
        sq_flat_alloc(&p->grads, def_of(cfg), cfg, cx, e))
        return e->code;
    n->cx = &p->model.cx;
    n->ts = &p->model.ts;
    n->params = p->model.mem;
    n->grads = p->grads.mem;
    n->cfg = p->model.cfg;
    return 0;
}

void sq_flat_net_free(sq_net *n)
{
    net_impl *p = n->impl;
    if (p) {
        sq_flat_free(&p->grads);
        sq_flat_free(&p->model);
        free(p);
    }
    memset(n, 0, sizeof *n);
}

void sq_flat_net_init(sq_net *n, uint64_t seed)
{
    sq_flat_init(&((net_impl *)n->impl)->model, seed);
}

int sq_flat_batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                    sq_err *e)
{
    if (sq_batcher_init_stride(bt, s, o->target, o->stride,
                               ((const sq_flat_head *)cfg)->max_len, o->batch,
                               sq_loss_bce_negatives(o), o->seed, e))
        return e->code;
    return sq_loss_batcher_negatives(bt, o, e);
}

int sq_flat_work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e)
{
    const net_impl *p = n->impl;
    const sq_flat *m = &p->model;
    flat_work *w = calloc(1, sizeof *w);
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *work = w;
    w->def = m->def;
    w->cx = m->cx;
    int oi = out_index(&m->ts, m->def), T = bt->cap_T;
    size_t D = (size_t)m->ts.shape[oi][1], V1 = (size_t)m->ts.shape[oi][0];
    sq_flat_cap cap = {.B = bt->batch * bt->views, .T = T, .n = T,
                       .N = R(head)(m->cfg)->max_len, .train = 1};
    if (!(w->dh = sq_ctx_alloc(&m->cx, (size_t)T * D * sizeof *w->dh, e)) ||
        !(w->scratch = sq_ctx_alloc(&m->cx,
                                    sq_ce_scratch_size(sq_ce_chunk_on(&m->cx, T, (int)V1), (int)V1,
                                                       (int)D) *
                                        sizeof *w->scratch, e)))
        return e->code;
    return m->def->f.work_alloc(m, &cap, &w->mw, e);
}

void sq_flat_work_free(void *work)
{
    flat_work *w = work;
    if (!w)
        return;
    if (w->mw)
        w->def->f.work_free(w->mw);
    if (w->dh)
        sq_ctx_free(&w->cx, w->dh);
    if (w->scratch)
        sq_ctx_free(&w->cx, w->scratch);
    free(w);
}

double sq_flat_step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                    uint64_t step, int *count)
{
    net_impl *p = n->impl;
    flat_work *w = work;
    const sq_flat_fns *f = &p->model.def->f;
    const float *h = f->forward(&p->model, w->mw, b, 1, o->seed, step);
    double loss = sq_flat_loss(&p->model, b, h, sq_loss_step(o), w->scratch, w->dh, &p->grads, count);
    if (loss == loss && loss - loss == 0) /* finite: the trainer stops otherwise */
        f->backward(&p->model, w->mw, b, w->dh, &p->grads);
    return loss;
}

void sq_flat_view(sq_model *out, const sq_net *n)
{
    memset(out, 0, sizeof *out);
    set_view(out, &((const net_impl *)n->impl)->model);
}

size_t sq_flat_loss_scratch(const sq_flat_def *def, const void *cfg, int n)
{
    sq_tensor_set ts;
    sq_err e = {0};
    memset(&ts, 0, sizeof ts);
    if (def->tensors(cfg, &ts, &e))
        return 0;
    int oi = out_index(&ts, def);
    int V1 = oi < 0 ? 0 : (int)ts.shape[oi][0];
    return oi < 0 ? 0 : sq_ce_scratch_size(sq_ce_chunk(n, V1), V1, (int)ts.shape[oi][1]);
}
#endif
