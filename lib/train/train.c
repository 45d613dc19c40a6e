/* train.c - the training loop (see train.h). */
#include "train.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adam.h"
#include "batch.h"
#include "eval.h"
#include "fileio.h"
#include "modelfile.h"
#include "attn_linear.h"
#include "attn_pos.h"
#include "ops.h"
#include "pop.h"

/* train.state: the loop state saved in a checkpoint. */
enum {
    ST_EPOCHS_DONE, ST_STEP, ST_BEST_EPOCH, ST_BAD_EVALS, ST_BEST_NDCG, ST_BEST_HR,
    ST_HAS_BEST, ST_STOPPED, ST_N
};

void sq_train_defaults(sq_train_opts *o)
{
    memset(o, 0, sizeof *o);
    o->arch = (sq_sasrec_config){.n_items = 0, .n_layers = 2, .n_heads = 1, .dim = 64,
                                 .ffn = 256, .max_len = 50, .dropout = 0.2, .ln_eps = 1e-8,
                                 .backbone = SQ_BACKBONE_SASREC, .attn = SQ_AK_SOFTMAX,
                                 .causal = 0, .linrec_scale = SQ_LINREC_CODE, .rank = 40,
                                 .decay = SQ_EXP_ANNEAL_DECAY};
    o->mask_prob = 0.2;
    o->loss = SQ_LOSS_CE;
    o->neg = 1;
    o->target = SQ_TARGET_ALL;
    o->lr = 1e-3;
    o->beta1 = 0.9;
    o->beta2 = 0.98;
    o->eps = 1e-8;
    o->weight_decay = 0;
    o->clip = 0;
    o->batch = 128;
    o->epochs = 200;
    o->patience = 10;
    o->eval_every = 1;
    o->seed = 1;
    o->threads = 0;
}

int sq_train_check(const sq_train_opts *o, sq_err *e)
{
    if (!(o->lr > 0) || !isfinite(o->lr))
        return sq_fail(e, SQ_EX_USAGE, "--lr must be positive");
    if (!(o->beta1 >= 0 && o->beta1 < 1) || !(o->beta2 >= 0 && o->beta2 < 1))
        return sq_fail(e, SQ_EX_USAGE, "--beta1 and --beta2 must be in [0, 1)");
    if (!(o->eps > 0))
        return sq_fail(e, SQ_EX_USAGE, "--eps must be positive");
    if (!(o->weight_decay >= 0) || !(o->clip >= 0))
        return sq_fail(e, SQ_EX_USAGE, "--weight-decay and --clip must be >= 0");
    if (o->batch < 1 || o->batch > (1 << 20))
        return sq_fail(e, SQ_EX_USAGE, "--batch must be in 1..1048576");
    if (o->epochs < 0 || o->patience < 0 || o->eval_every < 1)
        return sq_fail(e, SQ_EX_USAGE, "--epochs, --patience must be >= 0, --eval-every >= 1");
    if (o->loss == SQ_LOSS_BCE && (o->neg < 1 || o->neg > 1024))
        return sq_fail(e, SQ_EX_USAGE, "--neg must be in 1..1024");
    if (o->threads < 0)
        return sq_fail(e, SQ_EX_USAGE, "--threads must be >= 1");
    if (o->arch.backbone == SQ_BACKBONE_BERT4REC) {
        if (o->loss != SQ_LOSS_CE)
            return sq_fail(e, SQ_EX_USAGE, "--loss bce is for --model sasrec (BERT4Rec's "
                           "cloze task uses ce)");
        if (!(o->mask_prob > 0 && o->mask_prob <= 1))
            return sq_fail(e, SQ_EX_USAGE, "--mask-prob must be in (0, 1]");
    }
    sq_sasrec_config a = o->arch;
    if (a.n_items == 0)
        a.n_items = 1; /* checked again once the data is known */
    return sq_sasrec_config_check(&a, e);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Configs of the model file and the checkpoint                             */

static int put_config(sq_modelfile *mf, const sq_train_opts *o, const sq_dataset *ds,
                      sq_err *e)
{
    int bert = o->arch.backbone == SQ_BACKBONE_BERT4REC;
    if (sq_modelfile_set(mf, e, "model", "%s", sq_backbone_name(o->arch.backbone)) ||
        sq_model_set_data(mf, &ds->hdr, e) ||
        sq_sasrec_config_write(&o->arch, mf, e) ||
        sq_modelfile_set(mf, e, "train.loss", "%s", o->loss == SQ_LOSS_BCE ? "bce" : "ce") ||
        sq_modelfile_set(mf, e, "train.neg", "%d", o->loss == SQ_LOSS_BCE ? o->neg : 0) ||
        sq_modelfile_set(mf, e, "train.target", "%s", sq_target_name(o->target)) ||
        sq_modelfile_set(mf, e, "train.lr", "%.17g", o->lr) ||
        sq_modelfile_set(mf, e, "train.beta1", "%.17g", o->beta1) ||
        sq_modelfile_set(mf, e, "train.beta2", "%.17g", o->beta2) ||
        sq_modelfile_set(mf, e, "train.eps", "%.17g", o->eps) ||
        sq_modelfile_set(mf, e, "train.weight_decay", "%.17g", o->weight_decay) ||
        sq_modelfile_set(mf, e, "train.clip", "%.17g", o->clip) ||
        sq_modelfile_set(mf, e, "train.batch", "%d", o->batch) ||
        sq_modelfile_set(mf, e, "train.epochs", "%d", o->epochs) ||
        sq_modelfile_set(mf, e, "train.patience", "%d", o->patience) ||
        sq_modelfile_set(mf, e, "train.eval_every", "%d", o->eval_every) ||
        sq_modelfile_set(mf, e, "train.seed", "%" PRIu64, o->seed) ||
        (bert && sq_modelfile_set(mf, e, "train.mask_prob", "%.17g", o->mask_prob)))
        return e->code;
    return 0;
}

static int cfg_str(const sq_modelfile *mf, const char *path, const char *key, char *buf,
                   size_t n, sq_err *e)
{
    if (!sq_modelfile_get(mf, key, buf, n))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no %s", path, key);
    return 0;
}

static int cfg_double(const sq_modelfile *mf, const char *path, const char *key, double *v,
                      sq_err *e)
{
    char buf[64], *end;
    if (cfg_str(mf, path, key, buf, sizeof buf, e))
        return e->code;
    *v = strtod(buf, &end);
    if (end == buf || *end)
        return sq_fail(e, SQ_EX_DATA, "%s: bad %s=%s", path, key, buf);
    return 0;
}

static int cfg_int(const sq_modelfile *mf, const char *path, const char *key, int *v,
                   sq_err *e)
{
    double d;
    if (cfg_double(mf, path, key, &d, e))
        return e->code;
    if (d != floor(d) || d < 0 || d > 1e9)
        return sq_fail(e, SQ_EX_DATA, "%s: bad %s", path, key);
    *v = (int)d;
    return 0;
}

static int opts_from_file(sq_train_opts *o, const sq_modelfile *mf, const char *path,
                          sq_err *e)
{
    char buf[64];
    sq_train_defaults(o);
    if (cfg_str(mf, path, "model", buf, sizeof buf, e))
        return e->code;
    if (sq_backbone_parse(buf) < 0)
        return sq_fail(e, SQ_EX_DATA, "%s: a %s model, not a sasrec or bert4rec checkpoint",
                       path, buf);
    if (sq_sasrec_config_read(&o->arch, mf, path, e))
        return e->code;
    if (o->arch.backbone == SQ_BACKBONE_BERT4REC &&
        cfg_double(mf, path, "train.mask_prob", &o->mask_prob, e))
        return e->code;
    if (cfg_str(mf, path, "train.loss", buf, sizeof buf, e))
        return e->code;
    o->loss = strcmp(buf, "bce") == 0 ? SQ_LOSS_BCE : SQ_LOSS_CE;
    if (cfg_str(mf, path, "train.target", buf, sizeof buf, e))
        return e->code;
    o->target = sq_target_parse(buf);
    double seed;
    if (o->target < 0 || cfg_int(mf, path, "train.neg", &o->neg, e) ||
        cfg_double(mf, path, "train.lr", &o->lr, e) ||
        cfg_double(mf, path, "train.beta1", &o->beta1, e) ||
        cfg_double(mf, path, "train.beta2", &o->beta2, e) ||
        cfg_double(mf, path, "train.eps", &o->eps, e) ||
        cfg_double(mf, path, "train.weight_decay", &o->weight_decay, e) ||
        cfg_double(mf, path, "train.clip", &o->clip, e) ||
        cfg_int(mf, path, "train.batch", &o->batch, e) ||
        cfg_int(mf, path, "train.epochs", &o->epochs, e) ||
        cfg_int(mf, path, "train.patience", &o->patience, e) ||
        cfg_int(mf, path, "train.eval_every", &o->eval_every, e) ||
        cfg_double(mf, path, "train.seed", &seed, e))
        return e->code ? e->code : sq_fail(e, SQ_EX_DATA, "%s: bad train.target", path);
    if (sq_modelfile_get(mf, "train.seed", buf, sizeof buf))
        o->seed = strtoull(buf, NULL, 10);
    sq_err ce = {0};
    if (sq_train_check(o, &ce))
        return sq_fail(e, SQ_EX_DATA, "%s: bad training options: %s", path, ce.msg);
    return 0;
}

int sq_train_read_opts(sq_train_opts *o, const char *ckpt_path, sq_err *e)
{
    sq_modelfile mf;
    if (sq_modelfile_read(ckpt_path, &mf, e))
        return e->code;
    int rc = opts_from_file(o, &mf, ckpt_path, e);
    sq_modelfile_free(&mf);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The state of a run                                                       */

typedef struct {
    const sq_train_opts *o;
    const sq_dataset *ds;
    sq_sasrec model, grads, m, v;
    float *best;              /* best parameters [model.n] */
    uint64_t st[ST_N];        /* train.state */
    int has_valid;
} run;

static int write_model(const run *r, const char *path, sq_err *e)
{
    sq_modelfile mf = {0};
    sq_sasrec view = r->model;
    view.mem = r->st[ST_HAS_BEST] ? r->best : r->model.mem;
    int rc = put_config(&mf, r->o, r->ds, e);
    if (!rc && r->st[ST_HAS_BEST]) {
        double ndcg, hr;
        memcpy(&ndcg, &r->st[ST_BEST_NDCG], sizeof ndcg);
        memcpy(&hr, &r->st[ST_BEST_HR], sizeof hr);
        rc = sq_modelfile_set(&mf, e, "train.best_epoch", "%" PRIu64, r->st[ST_BEST_EPOCH]) ||
             sq_modelfile_set(&mf, e, "valid.hr@10", "%.9g", hr) ||
             sq_modelfile_set(&mf, e, "valid.ndcg@10", "%.9g", ndcg);
        rc = rc ? e->code : 0;
    }
    if (!rc)
        rc = sq_sasrec_add_tensors(&view, &mf, e);
    if (!rc)
        rc = sq_modelfile_write(path, &mf, e);
    sq_modelfile_free(&mf);
    return rc;
}

static int write_ckpt(const run *r, const char *path, sq_err *e)
{
    sq_modelfile mf = {0};
    uint64_t n[1] = {r->model.n}, ns[1] = {ST_N};
    int rc = put_config(&mf, r->o, r->ds, e);
    if (!rc)
        rc = sq_sasrec_add_tensors(&r->model, &mf, e);
    if (!rc)
        rc = sq_modelfile_add(&mf, "adam.m", SQ_F32, 1, n, r->m.mem, e) ||
             sq_modelfile_add(&mf, "adam.v", SQ_F32, 1, n, r->v.mem, e) ||
             sq_modelfile_add(&mf, "best.params", SQ_F32, 1, n, r->best, e) ||
             sq_modelfile_add(&mf, "train.state", SQ_U64, 1, ns, r->st, e);
    rc = rc ? e->code : 0;
    if (!rc)
        rc = sq_modelfile_write(path, &mf, e);
    sq_modelfile_free(&mf);
    return rc;
}

static int get_flat(const sq_modelfile *mf, const char *path, const char *name,
                    uint8_t dtype, uint64_t count, void *dst, size_t elem, sq_err *e)
{
    const sq_tensor *t = sq_modelfile_find(mf, name);
    if (!t)
        return sq_fail(e, SQ_EX_DATA, "%s: not a checkpoint (no tensor %s)", path, name);
    if (t->dtype != dtype || t->ndim != 1 || t->shape[0] != count)
        return sq_fail(e, SQ_EX_DATA, "%s: tensor %s has the wrong type or shape", path, name);
    memcpy(dst, t->data, (size_t)count * elem);
    return 0;
}

static int same_arch(const sq_sasrec_config *a, const sq_sasrec_config *b)
{
    return a->n_items == b->n_items && a->n_layers == b->n_layers &&
           a->n_heads == b->n_heads && a->dim == b->dim && a->ffn == b->ffn &&
           a->max_len == b->max_len && a->dropout == b->dropout && a->ln_eps == b->ln_eps &&
           a->backbone == b->backbone && a->attn == b->attn && a->causal == b->causal &&
           (a->attn != SQ_AK_LINREC || a->linrec_scale == b->linrec_scale) &&
           (a->attn != SQ_AK_FPOSITIONAL || a->rank == b->rank) &&
           (a->attn != SQ_AK_EXP_ANNEAL || a->decay == b->decay);
}

static int load_ckpt(run *r, const char *path, sq_err *e)
{
    sq_modelfile mf;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    sq_train_opts fo;
    char a[512], b[512];
    int rc = opts_from_file(&fo, &mf, path, e);
    if (rc)
        goto done;
    if (fo.arch.n_items != r->ds->hdr.n_items) {
        rc = sq_fail(e, SQ_EX_DATA, "%s: the checkpoint was trained on %" PRIu32 " items, the "
                     "stream has %" PRIu32 " (another dataset?)", path, fo.arch.n_items,
                     r->ds->hdr.n_items);
        goto done;
    }
    if (sq_modelfile_get(&mf, "data.dataset", a, sizeof a) &&
        sq_meta_get(&r->ds->hdr, "dataset", b, sizeof b) && strcmp(a, b) != 0) {
        rc = sq_fail(e, SQ_EX_DATA, "%s: the checkpoint was trained on dataset '%s', the "
                     "stream is '%s'", path, a, b);
        goto done;
    }
    if (!same_arch(&fo.arch, &r->o->arch)) {
        rc = sq_fail(e, SQ_EX_USAGE, "%s: the model options differ from the checkpoint's",
                     path);
        goto done;
    }
    if ((rc = sq_sasrec_get_tensors(&r->model, &mf, path, e)) != 0 ||
        (rc = get_flat(&mf, path, "adam.m", SQ_F32, r->model.n, r->m.mem, 4, e)) != 0 ||
        (rc = get_flat(&mf, path, "adam.v", SQ_F32, r->model.n, r->v.mem, 4, e)) != 0 ||
        (rc = get_flat(&mf, path, "best.params", SQ_F32, r->model.n, r->best, 4, e)) != 0 ||
        (rc = get_flat(&mf, path, "train.state", SQ_U64, ST_N, r->st, 8, e)) != 0)
        goto done;
done:
    sq_modelfile_free(&mf);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */

/* The training sequences of ds for the batch builder: split records train
 * on items[0, n_train); a padded row on its span from the first to the last
 * non-zero item (RandomPad's separating zeros stay, as padding tokens). */
static int make_seqs(const sq_dataset *ds, sq_seqs *s, uint64_t **start, uint32_t **ntr,
                     sq_err *e)
{
    if (ds->n_seq > UINT32_MAX)
        return sq_fail(e, SQ_EX_DATA, "too many records");
    uint64_t n = ds->n_seq ? ds->n_seq : 1;
    *start = malloc(n * sizeof **start);
    *ntr = malloc(n * sizeof **ntr);
    if (!*start || !*ntr)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    for (uint64_t i = 0; i < ds->n_seq; i++) {
        const sq_seq *q = &ds->seq[i];
        const uint32_t *it = ds->items + q->off;
        uint32_t first = 0, end = q->n_train;
        if (ds->hdr.kind == SQ_PADDED) {
            while (first < end && it[first] == 0)
                first++;
            while (end > first && it[end - 1] == 0)
                end--;
        }
        (*start)[i] = q->off + first;
        (*ntr)[i] = end - first;
    }
    *s = (sq_seqs){.n_users = (uint32_t)ds->n_seq, .n_items = ds->hdr.n_items,
                   .items = ds->items, .start = *start, .n_train = *ntr};
    return 0;
}

static int diverged(const run *r, uint64_t epoch, double what, const char *name,
                    const char *out_path, sq_err *e)
{
    if (r->st[ST_HAS_BEST])
        return sq_fail(e, SQ_EX_SOFTWARE, "training diverged in epoch %" PRIu64 " at step %"
                       PRIu64 " (%s %g); %s keeps the best model so far (epoch %" PRIu64
                       "); try a smaller --lr or --clip", epoch + 1, r->st[ST_STEP] + 1, name,
                       what, out_path, r->st[ST_BEST_EPOCH]);
    return sq_fail(e, SQ_EX_SOFTWARE, "training diverged in epoch %" PRIu64 " at step %" PRIu64
                   " (%s %g) before any validation: no model written; try a smaller --lr or "
                   "--clip", epoch + 1, r->st[ST_STEP] + 1, name, what);
}

int sq_train_sasrec(const sq_train_opts *o, const sq_dataset *ds, const char *out_path,
                    const char *resume_path, const sq_train_hooks *hooks, sq_err *e)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    run r = {.o = o, .ds = ds};
    sq_batcher bt = {0};
    sq_sasrec_work w = {0};
    uint64_t *start = NULL;
    uint32_t *ntr = NULL;
    char *ckpt_path = NULL;
    sq_train_hooks nohooks = {0};
    if (!hooks)
        hooks = &nohooks;
    if (ds->hdr.kind != SQ_SPLIT && ds->hdr.kind != SQ_PADDED)
        return sq_fail(e, SQ_EX_DATA, "expected a split or padded stream, got %s",
                       sq_kind_name(ds->hdr.kind));
    if (o->arch.n_items != ds->hdr.n_items)
        return sq_fail(e, SQ_EX_SOFTWARE, "sq_train_sasrec: options for %" PRIu32
                       " items, data with %" PRIu32, o->arch.n_items, ds->hdr.n_items);
    if (sq_train_check(o, e))
        return e->code;
    size_t plen = strlen(out_path);
    ckpt_path = malloc(plen + 6);
    if (!ckpt_path)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(ckpt_path, out_path, plen);
    memcpy(ckpt_path + plen, ".ckpt", 6);

    int rc;
    /* Find out now, not after the first epoch, whether the output can be
     * written. */
    sq_outfile probe = {0};
    if ((rc = sq_out_open(&probe, out_path, 1, e)) != 0)
        goto done;
    sq_out_abort(&probe);

    sq_seqs seqs;
    if ((rc = make_seqs(ds, &seqs, &start, &ntr, e)) != 0)
        goto done;
    for (uint64_t i = 0; i < ds->n_seq; i++)
        if (ds->seq[i].view == 0 && ds->seq[i].n_valid > 0)
            r.has_valid = 1;

    if (o->arch.backbone == SQ_BACKBONE_BERT4REC)
        rc = sq_batcher_init_cloze(&bt, &seqs, o->target, o->arch.max_len, o->batch,
                                   o->mask_prob, sq_mask_id(&o->arch), o->seed, e);
    else
        rc = sq_batcher_init(&bt, &seqs, o->target, o->arch.max_len, o->batch,
                             o->loss == SQ_LOSS_BCE ? o->neg : 0, o->seed, e);
    if (rc)
        goto done;
    if ((rc = sq_sasrec_alloc(&r.model, &o->arch, e)) != 0 ||
        (rc = sq_sasrec_alloc(&r.grads, &o->arch, e)) != 0 ||
        (rc = sq_sasrec_alloc(&r.m, &o->arch, e)) != 0 ||
        (rc = sq_sasrec_alloc(&r.v, &o->arch, e)) != 0)
        goto done;
    r.best = calloc(r.model.n, sizeof *r.best);
    if (!r.best) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
        goto done;
    }
    sq_sasrec_cap cap = {.B = o->batch, .T = bt.cap_T, .n = bt.cap_T, .att = bt.cap_att,
                         .K = bt.K, .train = 1};
    if ((rc = sq_sasrec_work_alloc(&w, &o->arch, &cap, e)) != 0)
        goto done;

    if (resume_path) {
        if ((rc = load_ckpt(&r, resume_path, e)) != 0)
            goto done;
    } else {
        sq_sasrec_init_weights(&r.model, o->seed);
    }

    sq_adam_cfg decay = {.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2, .eps = o->eps,
                         .weight_decay = o->weight_decay, .decoupled = 1};
    sq_adam_cfg plain = decay;
    plain.weight_decay = 0;
    sq_eval_opts eo;
    sq_eval_defaults(&eo);
    eo.target = SQ_EVAL_VALID;
    eo.cand = SQ_CAND_FULL;
    eo.exclude_history = 0;
    eo.seed = o->seed;
    eo.threads = o->threads;
    sq_model view;
    sq_sasrec_model_view(&view, &r.model);

    uint64_t n_batches = sq_batcher_n_batches(&bt);
    size_t nd = r.model.n_decay, n = r.model.n;
    for (uint64_t epoch = r.st[ST_EPOCHS_DONE];
         epoch < (uint64_t)o->epochs && !r.st[ST_STOPPED]; epoch++) {
        double t0 = now(), loss_sum = 0;
        uint64_t loss_cnt = 0;
        sq_batcher_shuffle(&bt, epoch);
        for (uint64_t i = 0; i < n_batches; i++) {
            const sq_packed *pb = sq_batcher_get(&bt, epoch, i);
            int cnt = 0;
            memset(r.grads.mem, 0, n * sizeof *r.grads.mem);
            sq_sasrec_forward(&r.model, &w, pb, 1, o->seed, r.st[ST_STEP]);
            double loss = sq_sasrec_loss(&r.model, &w, pb, o->loss, &r.grads, &cnt);
            if (!isfinite(loss)) {
                rc = diverged(&r, epoch, loss, "loss", out_path, e);
                goto done;
            }
            sq_sasrec_backward(&r.model, &w, pb, &r.grads);
            double norm = sq_grad_clip(cx, r.grads.mem, n, o->clip);
            if (!isfinite(norm)) {
                rc = diverged(&r, epoch, norm, "gradient norm", out_path, e);
                goto done;
            }
            long t = (long)++r.st[ST_STEP];
            sq_adam_update(cx, r.model.mem, r.grads.mem, r.m.mem, r.v.mem, nd, &decay, t);
            sq_adam_update(cx, r.model.mem + nd, r.grads.mem + nd, r.m.mem + nd, r.v.mem + nd,
                           n - nd, &plain, t);
            loss_sum += loss * cnt;
            loss_cnt += (uint64_t)cnt;
            if (hooks->progress)
                hooks->progress(hooks->ctx, epoch + 1, i + 1, n_batches,
                                loss_cnt ? loss_sum / (double)loss_cnt : 0);
        }
        double t1 = now();
        sq_epoch_stats s = {.epoch = epoch + 1, .step = r.st[ST_STEP],
                            .loss = loss_cnt ? loss_sum / (double)loss_cnt : 0,
                            .samples = bt.n_samples};
        s.seq_per_s = t1 > t0 ? (double)bt.n_samples / (t1 - t0) : 0;
        if (r.has_valid && ((epoch + 1) % (uint64_t)o->eval_every == 0 ||
                            epoch + 1 == (uint64_t)o->epochs)) {
            uint64_t nt = 0;
            if ((rc = sq_eval_means(&view, ds, &eo, 10, &s.hr10, &s.ndcg10, &nt, e)) != 0)
                goto done;
            s.evaluated = 1;
            double best;
            memcpy(&best, &r.st[ST_BEST_NDCG], sizeof best);
            if (!r.st[ST_HAS_BEST] || s.ndcg10 > best) {
                s.improved = 1;
                r.st[ST_HAS_BEST] = 1;
                r.st[ST_BEST_EPOCH] = epoch + 1;
                r.st[ST_BAD_EVALS] = 0;
                memcpy(&r.st[ST_BEST_NDCG], &s.ndcg10, sizeof s.ndcg10);
                memcpy(&r.st[ST_BEST_HR], &s.hr10, sizeof s.hr10);
                memcpy(r.best, r.model.mem, n * sizeof *r.best);
                if ((rc = write_model(&r, out_path, e)) != 0)
                    goto done;
            } else if (++r.st[ST_BAD_EVALS] >= (uint64_t)o->patience && o->patience > 0) {
                r.st[ST_STOPPED] = 1;
            }
        }
        r.st[ST_EPOCHS_DONE] = epoch + 1;
        s.seconds = now() - t0;
        if (hooks->epoch && (rc = hooks->epoch(hooks->ctx, &s, e)) != 0)
            goto done;
        if ((rc = write_ckpt(&r, ckpt_path, e)) != 0)
            goto done;
    }
    rc = write_model(&r, out_path, e);

done:
    sq_sasrec_work_free(&w);
    free(r.best);
    sq_sasrec_free(&r.v);
    sq_sasrec_free(&r.m);
    sq_sasrec_free(&r.grads);
    sq_sasrec_free(&r.model);
    sq_batcher_free(&bt);
    free(start);
    free(ntr);
    free(ckpt_path);
    return rc;
}

int sq_train_pop(const sq_dataset *ds, const char *out_path, int threads, int *evaluated,
                 double *hr10, double *ndcg10, sq_err *e)
{
    sq_modelfile mf;
    *evaluated = 0;
    if (sq_pop_fit(ds, &mf, e))
        return e->code;
    int rc = sq_modelfile_write(out_path, &mf, e);
    sq_modelfile_free(&mf);
    int has_valid = 0;
    for (uint64_t i = 0; i < ds->n_seq; i++)
        if (ds->seq[i].view == 0 && ds->seq[i].n_valid > 0)
            has_valid = 1;
    if (rc || !has_valid)
        return rc;
    /* validate the model as written, through the loader seqrec-score uses */
    sq_model m;
    if ((rc = sq_model_load(&m, out_path, e)) != 0)
        return rc;
    sq_eval_opts eo;
    sq_eval_defaults(&eo);
    eo.target = SQ_EVAL_VALID;
    eo.cand = SQ_CAND_FULL;
    eo.threads = threads;
    uint64_t nt = 0;
    rc = sq_eval_means(&m, ds, &eo, 10, hr10, ndcg10, &nt, e);
    sq_model_free(&m);
    *evaluated = rc == 0;
    return rc;
}
