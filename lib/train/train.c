/* train.c - the training loop (see train.h): any trained model of the
 * registry, through its sq_model_def. */
#include "train.h"
#include "micro.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <xxhash.h>

#include "adam.h"
#include "batch.h"
#include "cli.h"
#include "eval.h"
#include "nextloss.h"
#include "sampler.h"
#include "fileio.h"
#include "idmap.h"
#include "kv.h"
#include "modelfile.h"
#include "models.h"
#include "ops.h"
#include "ranks.h"
#include "sasrec.h"

/* train.state: the loop state saved in a checkpoint (doubles as their
 * bits). A checkpoint written before --stop-metric holds the first
 * ST_N_OLD, its ST_BEST_STOP being NDCG@10: the default stop metric's. */
enum {
    ST_EPOCHS_DONE, ST_STEP, ST_BEST_EPOCH, ST_BAD_EVALS, ST_BEST_STOP, ST_BEST_HR,
    ST_HAS_BEST, ST_STOPPED, ST_N_OLD,
    ST_BEST_NDCG = ST_N_OLD, ST_BEST_MRR, ST_N
};

/* The most negatives of --valid-candidates (packed with the kind in an int). */
#define VALID_MAX_NEG (1 << 28)

/* --valid-candidates as an int: SQ_CAND_* + 4 N (-1: not a value). */
static int valid_cand_parse(const char *w)
{
    sq_eval_opts eo;
    sq_err e = {0};
    if (sq_eval_parse_candidates(w, &eo, &e) || eo.n_neg > VALID_MAX_NEG)
        return -1;
    return eo.cand + 4 * (int)eo.n_neg;
}

static const char *valid_cand_format(int v, char *buf, size_t n)
{
    sq_eval_opts eo = {.cand = v & 3, .n_neg = (uint32_t)v >> 2};
    sq_eval_candidates_name(&eo, buf, n);
    return buf;
}

static const char *const stop_names[] = {"ndcg", "hr", "recall", "mrr"};

int sq_stop_metric_parse(const char *s, int *kind, uint32_t *k)
{
    const char *at = strchr(s, '@');
    uint32_t v;
    if (!at || sq_cli_u32(at + 1, 1, SQ_STOP_MAX_K, &v))
        return -1;
    for (int i = 0; i < 4; i++)
        if (strlen(stop_names[i]) == (size_t)(at - s) && !strncmp(s, stop_names[i], at - s)) {
            *kind = i;
            *k = v;
            return 0;
        }
    return -1;
}

const char *sq_stop_metric_name(int kind, uint32_t k, char *buf, size_t n)
{
    snprintf(buf, n, "%s@%u", stop_names[kind & 3], k);
    return buf;
}

void sq_train_stop_metric(const sq_train_opts *o, int *kind, uint32_t *k)
{
    *kind = o->stop_metric & 3;
    *k = (uint32_t)o->stop_metric >> 2;
}

/* --stop-metric as an int: SQ_STOP_* + 4 K (-1: not a value). */
static int stop_parse(const char *w)
{
    int kind;
    uint32_t k;
    return sq_stop_metric_parse(w, &kind, &k) ? -1 : kind + 4 * (int)k;
}

static const char *stop_format(int v, char *buf, size_t n)
{
    return sq_stop_metric_name(v & 3, (uint32_t)v >> 2, buf, n);
}

#define OFF(field) offsetof(sq_train_opts, field)
#define BIG 1e300

const sq_opt sq_train_options[] = {
    {.name = "loss", .key = "train.loss", .type = SQ_OPT_CHOICE, .offset = OFF(loss),
     .def = "ce", .choices = "ce|bce|sampled-softmax|gbce", .arg = "ce|bce|sampled-softmax|gbce",
     .help = "full softmax cross-entropy (default), BCE with\n"
             "sampled negatives (sasrec only), softmax over\n"
             "the target and --neg K sampled negatives with\n"
             "the log-Q correction, or gSASRec's gBCE"},
    {.name = "neg", .key = "train.neg", .type = SQ_OPT_INT, .offset = OFF(neg), .def = "1",
     .lo = 1, .hi = 1 << 20, .arg = "K",
     .help = "negatives per position for bce, sampled-softmax,\n"
             "gbce and blin's sampled softmax (default 1)"},
    {.name = "neg-sampler", .key = "train.neg_sampler", .type = SQ_OPT_ENUM,
     .offset = OFF(neg_sampler), .def = "uniform", .parse = sq_neg_sampler_parse,
     .format = sq_neg_sampler_format, .arg = "uniform|pop[:A]|in-batch|mixed",
     .help = "the negatives of sampled-softmax: uniform over\n"
             "the items (default), by training count^A\n"
             "(0 <= A <= 1, default 1), the batch's targets,\n"
             "or half in-batch and half uniform"},
    {.name = "neg-share", .key = "train.neg_share", .type = SQ_OPT_CHOICE,
     .offset = OFF(neg_share), .def = "position", .choices = "position|sequence|batch",
     .arg = "position|sequence|batch", .optional = 1,
     .help = "sampled-softmax and gbce: --neg K negatives\n"
             "drawn for each position (default), one set\n"
             "for each sequence's positions, or one set for\n"
             "the whole batch"},
    {.name = "gbce-t", .key = "train.gbce_t", .type = SQ_OPT_REAL, .offset = OFF(gbce_t),
     .def = "0.75", .lo = 0, .hi = 1, .arg = "T",
     .help = "gbce's calibration t in [0, 1] (default 0.75;\n"
             "0: BCE, 1: calibrated)"},
    {.name = "target", .key = "train.target", .type = SQ_OPT_CHOICE, .offset = OFF(target),
     .def = "all", .choices = "all|last|random|windows",
     .arg = "all|last|random|windows",
     .help = "train every position of the newest --max-len\n"
             "items (default), the last one of every prefix\n"
             "(RecBole's samples), the last one of one prefix\n"
             "per user drawn anew every epoch, or every\n"
             "position of windows tiling all the items"},
    {.name = "window-stride", .key = "train.window_stride", .type = SQ_OPT_INT,
     .offset = OFF(stride), .def = "0", .lo = 0, .hi = 1 << 20, .arg = "S",
     .help = "--target windows: end the windows S items\n"
             "apart, each training its S newest positions\n"
             "(default 0: --max-len, windows that tile)"},
    {.name = "lr", .key = "train.lr", .type = SQ_OPT_REAL, .offset = OFF(lr), .def = "1e-3",
     .lo = 0, .hi = BIG, .lo_open = 1, .arg = "X", .help = "Adam learning rate (default 1e-3)"},
    {.name = "beta1", .key = "train.beta1", .type = SQ_OPT_REAL, .offset = OFF(beta1),
     .def = "0.9", .lo = 0, .hi = 1, .hi_open = 1, .arg = "X", .help = "(default 0.9)"},
    {.name = "beta2", .key = "train.beta2", .type = SQ_OPT_REAL, .offset = OFF(beta2),
     .def = "0.98", .lo = 0, .hi = 1, .hi_open = 1, .arg = "X", .help = "(default 0.98)"},
    {.name = "eps", .key = "train.eps", .type = SQ_OPT_REAL, .offset = OFF(eps),
     .def = "1e-8", .lo = 0, .hi = BIG, .lo_open = 1, .arg = "X", .help = "(default 1e-8)"},
    {.name = "weight-decay", .key = "train.weight_decay", .type = SQ_OPT_REAL,
     .offset = OFF(weight_decay), .def = "0", .lo = 0, .hi = BIG, .arg = "X",
     .help = "decoupled weight decay (default 0)"},
    {.name = "lazy-adam", .key = "train.lazy_adam", .type = SQ_OPT_FLAG,
     .offset = OFF(lazy_adam), .def = "0", .optional = 1,
     .help = "with a sampled loss, update only the item rows\n"
             "a step touched (SparseAdam, LazyAdam): an\n"
             "epoch's cost no longer grows with the catalogue"},
    {.name = "cuda-graphs", .key = "train.cuda_graphs", .type = SQ_OPT_FLAG,
     .offset = OFF(graphs), .def = "0", .optional = 1,
     .help = "with --device cuda, each step one CUDA graph\n"
             "of its padded size (launches replayed)"},
    {.name = "clip", .key = "train.clip", .type = SQ_OPT_REAL, .offset = OFF(clip),
     .def = "0", .lo = 0, .hi = BIG, .arg = "X",
     .help = "clip the gradient norm to X (default 0: off)"},
    {.name = "batch", .key = "train.batch", .type = SQ_OPT_INT, .offset = OFF(batch),
     .def = "128", .lo = 1, .hi = 1 << 20, .arg = "N",
     .help = "sequences per batch (default 128)"},
    {.name = "epochs", .key = "train.epochs", .type = SQ_OPT_INT, .offset = OFF(epochs),
     .def = "200", .lo = 0, .hi = 1e9, .arg = "N", .help = "most epochs (default 200)"},
    {.name = "patience", .key = "train.patience", .type = SQ_OPT_INT, .offset = OFF(patience),
     .def = "10", .lo = 0, .hi = 1e9, .arg = "N",
     .help = "stop after N evaluations without a better\n"
             "validation --stop-metric (default 10; 0: never)"},
    {.name = "eval-every", .key = "train.eval_every", .type = SQ_OPT_INT,
     .offset = OFF(eval_every), .def = "1", .lo = 1, .hi = 1e9, .arg = "N",
     .help = "validate every N epochs (default 1)"},
    {.name = "valid-candidates", .key = "train.valid_candidates", .type = SQ_OPT_ENUM,
     .offset = OFF(valid_cand), .def = "full", .parse = valid_cand_parse,
     .format = valid_cand_format, .arg = "full|uni:N|pop:N", .optional = 1,
     .expect = "full, uni:N or pop:N, N a positive integer",
     .help = "rank each validation target against every item\n"
             "(default), or against it and N negatives drawn\n"
             "uniformly or by training popularity, as\n"
             "seqrec-score -t valid -c draws them"},
    {.name = "valid-exclude-history", .key = "train.valid_exclude_history",
     .type = SQ_OPT_FLAG, .offset = OFF(valid_exclude_history), .def = "0", .optional = 1,
     .help = "validation: drop the items of the history from\n"
             "the candidates and the negatives' pool, as\n"
             "seqrec-score -x (RecBole's and BERT4Rec's sampled\n"
             "evaluation)"},
    {.name = "valid-seed", .key = "train.valid_seed", .type = SQ_OPT_U64,
     .offset = OFF(valid_seed), .def = "1", .arg = "N", .optional = 1,
     .help = "seed of the uni:N and pop:N draws (default 1,\n"
             "seqrec-score's -s)"},
    {.name = "stop-metric", .key = "train.stop_metric", .type = SQ_OPT_ENUM,
     .offset = OFF(stop_metric), .def = "ndcg@10", .parse = stop_parse,
     .format = stop_format, .arg = "M", .optional = 1,
     .expect = "ndcg@K, hr@K, recall@K or mrr@K, K a positive integer",
     .help = "the validation metric that picks the best epoch\n"
             "and drives --patience: ndcg@K, hr@K, recall@K or\n"
             "mrr@K (default ndcg@10)"},
    {.name = "seed", .key = "train.seed", .type = SQ_OPT_U64, .offset = OFF(seed), .def = "1",
     .arg = "N", .help = "random seed (default 1)"},
    {.name = "max-loss", .key = "train.max_loss", .type = SQ_OPT_REAL, .offset = OFF(max_loss),
     .def = "0", .lo = 0, .hi = BIG, .arg = "X", .optional = 1,
     .help = "stop (exit 70, as a divergence) when a batch's loss\n"
             "exceeds X (default 0: off)"},
    {.name = "threads", .type = SQ_OPT_INT, .offset = OFF(threads), .lo = 1, .hi = 4096,
     .arg = "N", .cli_only = 1, .help = "threads (default: the CPUs this process may\n"
                                             "use); sasrec and bert4rec train a micro-batch\n"
                                             "per thread (under mpirun or srun: per thread\n"
                                             "of each process; seqrec-train(1) SEVERAL\n"
                                             "PROCESSES)"},
    {0},
};

void sq_train_defaults(sq_train_opts *o)
{
    memset(o, 0, sizeof *o);
    sq_opt_defaults(sq_train_options, o);
}

/* Every line of kv must set a trainer option: a misspelt key would
 * otherwise pass unseen. `code` naming src when one does not. */
static int trainer_keys_only(const char *kv, int code, const char *src, sq_err *e)
{
    for (const char *l = kv; *l; l += strcspn(l, "\n") + (l[strcspn(l, "\n")] != '\0')) {
        char key[64], kb[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(l, "=\n"), l);
        const sq_opt *t = sq_train_options;
        while (t->type && strcmp(sq_opt_key(t, kb, sizeof kb), key) != 0)
            t++;
        if (!t->type)
            return sq_fail(e, code, "%s: '%s' is not a training option", src, key);
    }
    return 0;
}

int sq_train_opts_for_model(sq_train_opts *o, const sq_model_def *m, const char *given_kv,
                            sq_err *e)
{
    sq_opt_defaults(sq_train_options, o);
    if (m && m->train_defaults) {
        char src[96];
        snprintf(src, sizeof src, "--model %s's training defaults", m->name);
        if (trainer_keys_only(m->train_defaults, SQ_EX_SOFTWARE, src, e) ||
            sq_opt_apply(sq_train_options, o, m->train_defaults, 0, SQ_EX_SOFTWARE, src, e))
            return e->code;
    }
    /* given last: the kv line of a key the user gave wins over both */
    if (given_kv && (trainer_keys_only(given_kv, SQ_EX_USAGE, "the options given", e) ||
                     sq_opt_apply(sq_train_options, o, given_kv, 0, SQ_EX_USAGE, NULL, e)))
        return e->code;
    return 0;
}

/* The sampled losses' options (nextloss.h, sampler.h). */
static int check_loss(const sq_train_opts *o, sq_err *e)
{
    char buf[32];
    if (o->neg_sampler && o->loss != SQ_LOSS_SAMPLED_SOFTMAX)
        return sq_fail(e, SQ_EX_USAGE, "--neg-sampler %s is for --loss sampled-softmax (gbce's "
                       "calibration assumes uniform negatives)",
                       sq_neg_sampler_format(o->neg_sampler, buf, sizeof buf));
    if (o->neg_share && !sq_loss_sampled(o->loss))
        return sq_fail(e, SQ_EX_USAGE, "--neg-share is for --loss sampled-softmax and gbce");
    if (o->lazy_adam && o->loss == SQ_LOSS_CE)
        return sq_fail(e, SQ_EX_USAGE, "--lazy-adam is for the sampled losses (bce, "
                       "sampled-softmax, gbce): with --loss ce every item's row has a "
                       "gradient every step");
    if (o->lazy_adam && o->model && !o->model->grad_rows)
        return sq_fail(e, SQ_EX_USAGE, "--lazy-adam: --model %s's steps have no row-sparse "
                       "gradient to skip rows of", o->model->name);
    return 0;
}

sq_step_opts sq_train_step_opts(const sq_train_opts *o)
{
    sq_step_opts s = {.loss = o->loss, .neg = o->neg, .neg_sampler = o->neg_sampler,
                      .neg_share = o->neg_share,
                      .gbce_t = o->gbce_t, .target = o->target,
                      .stride = o->stride, .batch = o->batch, .seed = o->seed};
    return s;
}

int sq_train_check(const sq_train_opts *o, sq_err *e)
{
    if (sq_opt_check(sq_train_options, o, SQ_EX_USAGE, e))
        return e->code; /* threads 0 (no default): all */
    if (!o->model || !o->model->step)
        return sq_fail(e, SQ_EX_USAGE, "no trained model");
    if (o->model->config_check && o->model->config_check(o->cfg, e))
        return e->code;
    if (o->stride && o->target != SQ_TARGET_WINDOWS)
        return sq_fail(e, SQ_EX_USAGE, "--window-stride needs --target windows");
    if (check_loss(o, e))
        return e->code;
    if (o->cx && o->cx->backend != SQ_BACKEND_CPU) {
        if (!o->model->gpu_check)
            return sq_fail(e, SQ_EX_USAGE, "--device cuda: --model %s runs on the CPU only "
                           "(on the GPU: " SQ_GPU_MODEL_NAMES ")", o->model->name);
        if (o->model->gpu_check(o->cfg, e))
            return e->code;
    }
    sq_step_opts s = sq_train_step_opts(o);
    return o->model->check_step ? o->model->check_step(o->cfg, &s, e) : 0;
}

/* The process's peak resident memory so far, in MiB (ru_maxrss: KiB on
 * Linux). */
static double max_rss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0;
    return (double)ru.ru_maxrss / 1024.0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ------------------------------------------------------------------------ */
/* Configs of the model file and the checkpoint                             */

/* The config keys of the model: its name, the data, its own keys. */
static int put_model(sq_modelfile *mf, const sq_model_def *def, const void *cfg,
                     const sq_header *data, sq_err *e)
{
    if (sq_modelfile_set(mf, e, "model", "%s", def->name) || sq_model_set_data(mf, data, e) ||
        def->config_write(cfg, mf, e))
        return e->code;
    return 0;
}

/* The id map a model carries (ID MAP), when there is one. */
static int put_map(sq_modelfile *mf, const char *map, size_t len, sq_err *e)
{
    uint64_t n[1] = {len};
    if (map && sq_modelfile_add(mf, SQ_ID_MAP_TENSOR, SQ_BYTES, 1, n, map, e))
        return e->code;
    return 0;
}

static int put_config(sq_modelfile *mf, const sq_train_opts *o, const sq_dataset *ds,
                      sq_err *e)
{
    if (put_model(mf, o->model, o->cfg, &ds->hdr, e) ||
        sq_opt_write(sq_train_options, o, sq_modelfile_set_kv, mf, e) ||
        put_map(mf, o->id_map, o->id_map_len, e))
        return e->code;
    return 0;
}

static int opts_from_file(sq_train_opts *o, const sq_modelfile *mf, const char *path,
                          sq_err *e)
{
    char buf[64];
    sq_train_defaults(o);
    if (!sq_modelfile_get(mf, "model", buf, sizeof buf))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no model", path);
    const sq_model_def *def = sq_models_find(buf);
    if (!def || !def->step)
        return sq_fail(e, SQ_EX_DATA, "%s: a %s model, not a checkpoint of a trained model",
                       path, buf);
    /* an optional key the file lacks takes the model's default */
    if (sq_train_opts_for_model(o, def, NULL, e))
        return e->code;
    o->model = def;
    o->cfg = calloc(1, def->cfg_size);
    if (!o->cfg)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (def->config_read(o->cfg, mf, path, e) ||
        sq_opt_apply(sq_train_options, o, mf->config, 1, SQ_EX_DATA, path, e))
        return e->code;
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
    if (rc) {
        free(o->cfg);
        o->cfg = NULL;
    }
    return rc;
}

/* The model's config keys of (def, cfg) as text, into a malloc'd *text:
 * two configs are the same model when their texts are. */
static int config_text(const sq_model_def *def, const void *cfg, char **text, sq_err *e)
{
    sq_modelfile mf = {0};
    *text = NULL;
    sq_header none = {0};
    int rc = put_model(&mf, def, cfg, &none, e);
    if (!rc && !(*text = strdup(mf.config ? mf.config : "")))
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    sq_modelfile_free(&mf);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* --init: the config of a model file                                       */

/* The model's own option keys of (def, cfg), as its config_write writes them. */
static int options_text(const sq_model_def *def, const void *cfg, char **text, sq_err *e)
{
    sq_modelfile mf = {0};
    *text = NULL;
    int rc = def->config_write(cfg, &mf, e);
    if (!rc && !(*text = strdup(mf.config ? mf.config : "")))
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    sq_modelfile_free(&mf);
    return rc;
}

/* SQ_EX_USAGE naming the first key whose value differs between the texts
 * of the file's config (a) and the one with the options given (b). */
static int options_differ(const char *path, const char *a, const char *b, sq_err *e)
{
    char key[64], va[128], vb[128];
    for (const char *l = a; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
        snprintf(key, sizeof key, "%.*s", (int)strcspn(l, "=\n"), l);
        va[0] = vb[0] = '\0';
        sq_kv_get(a, key, va, sizeof va);
        sq_kv_get(b, key, vb, sizeof vb);
        if (strcmp(va, vb) != 0)
            return sq_fail(e, SQ_EX_USAGE, "--init %s: the model has %s=%s, the options give "
                           "%s (its model options are kept: leave them out)", path, key, va,
                           vb[0] ? vb : "another value");
    }
    return sq_fail(e, SQ_EX_USAGE, "--init %s: the model options given differ from the "
                   "model's (leave them out)", path);
}

/* The options given on top of the file's: they must not change its config. */
static int given_same(const sq_model_def *d, const char *path, const char *text,
                      const char *given, const sq_data_dims *dd, const void *cfg, sq_err *e)
{
    size_t a = strlen(text), b = strlen(given);
    char *both = malloc(a + b + 1), *ta = NULL, *tb = NULL;
    void *c = calloc(1, d->cfg_size);
    int rc = 0;
    if (!both || !c)
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (!rc) {
        memcpy(both, text, a);
        memcpy(both + a, given, b + 1); /* the last line of a key wins (kv.h) */
        if (d->config(c, both, dd, e) || config_text(d, cfg, &ta, e) ||
            config_text(d, c, &tb, e))
            rc = e->code;
    }
    if (!rc && strcmp(ta, tb) != 0)
        rc = options_differ(path, ta, tb, e);
    free(both);
    free(c);
    free(ta);
    free(tb);
    return rc;
}

int sq_train_init_config(const char *path, const sq_model_def *want, const char *given,
                         const sq_data_dims *dd, const sq_model_def **def, void **cfg,
                         sq_err *e)
{
    sq_modelfile mf;
    char name[64];
    *cfg = NULL;
    *def = NULL;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    const sq_model_def *d = NULL;
    void *c0 = NULL;
    char *text = NULL;
    int rc = 0;
    if (!sq_modelfile_get(&mf, "model", name, sizeof name) || !(d = sq_models_find(name)))
        rc = sq_fail(e, SQ_EX_DATA, "%s: not a model file of a known model", path);
    else if (want && want != d)
        rc = sq_fail(e, SQ_EX_USAGE, "--init %s: a %s model, not --model %s", path, d->name,
                     want->name);
    else if (!d->init_from)
        rc = sq_fail(e, SQ_EX_USAGE, "--init %s: a %s model cannot be trained further", path,
                     d->name);
    else if (!(c0 = calloc(1, d->cfg_size)) || !(*cfg = calloc(1, d->cfg_size)))
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (!rc && (d->config_read(c0, &mf, path, e) || options_text(d, c0, &text, e) ||
                d->config(*cfg, text, dd, e)))
        rc = e->code;
    if (!rc && given && given[0])
        rc = given_same(d, path, text, given, dd, *cfg, e);
    sq_modelfile_free(&mf);
    free(c0);
    free(text);
    if (rc) {
        free(*cfg);
        *cfg = NULL;
    } else {
        *def = d;
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The state of a run                                                       */

typedef struct {
    const sq_train_opts *o;
    const sq_dataset *ds;
    sq_net net;
    float *m, *v;             /* Adam moments [ts->total] */
    float *best;              /* best parameters [ts->total] */
    uint64_t st[ST_N];        /* train.state */
    int has_valid;
    int diverged;             /* the run stopped on a non-finite loss or norm */
    const sq_comm *comm;      /* o->comm, or one process */
    int parts;                /* a step's parts: ranks x threads (RANKS) */
} run;

/* A double of train.state. */
static double st_get(const run *r, int i)
{
    double v;
    memcpy(&v, &r->st[i], sizeof v);
    return v;
}

static void st_set(run *r, int i, double v) { memcpy(&r->st[i], &v, sizeof v); }

/* The best epoch's validation metrics, as "valid.NAME" keys: HR@10, NDCG@10,
 * MRR@10 (not known for a checkpoint written before --stop-metric) and the
 * stop metric when it is another one. */
static int put_best(const run *r, sq_modelfile *mf, sq_err *e)
{
    char name[24], key[40];
    int kind;
    uint32_t k;
    sq_train_stop_metric(r->o, &kind, &k);
    sq_stop_metric_name(kind, k, name, sizeof name);
    snprintf(key, sizeof key, "valid.%s", name);
    double mrr = st_get(r, ST_BEST_MRR);
    int rc = sq_modelfile_set(mf, e, "train.best_epoch", "%" PRIu64, r->st[ST_BEST_EPOCH]) ||
             sq_modelfile_set(mf, e, "valid.hr@10", "%.9g", st_get(r, ST_BEST_HR)) ||
             sq_modelfile_set(mf, e, "valid.ndcg@10", "%.9g", st_get(r, ST_BEST_NDCG)) ||
             (!isnan(mrr) && sq_modelfile_set(mf, e, "valid.mrr@10", "%.9g", mrr)) ||
             (strcmp(name, "hr@10") && strcmp(name, "ndcg@10") && strcmp(name, "mrr@10") &&
              sq_modelfile_set(mf, e, key, "%.9g", st_get(r, ST_BEST_STOP)));
    return rc ? e->code : 0;
}

/* Saving, checkpoints and resume go through host memory: on the CPU the
 * backend's block itself, on a GPU a copy (explicit staging: one download
 * or upload per block, never an op reading device memory on the host). */
static const float *host_copy(const run *r, const float *p, float **tmp, sq_err *e)
{
    *tmp = NULL;
    if (r->net.cx->backend == SQ_BACKEND_CPU)
        return p;
    size_t bytes = r->net.ts->total * sizeof(float);
    if (!(*tmp = malloc(bytes ? bytes : 1))) {
        sq_fail(e, SQ_EX_OSERR, "out of memory");
        return NULL;
    }
    if (sq_ctx_download(r->net.cx, *tmp, p, bytes, e)) {
        free(*tmp);
        *tmp = NULL;
        return NULL;
    }
    return *tmp;
}

/* Where a block of the backend is read into: itself on the CPU, else a
 * host buffer that host_commit uploads and frees. */
static float *host_slot(const run *r, float *p, float **tmp, sq_err *e)
{
    *tmp = NULL;
    if (r->net.cx->backend == SQ_BACKEND_CPU)
        return p;
    size_t bytes = r->net.ts->total * sizeof(float);
    if (!(*tmp = calloc(1, bytes ? bytes : 1)))
        sq_fail(e, SQ_EX_OSERR, "out of memory");
    return *tmp;
}

static int host_commit(const run *r, float *p, float *tmp, int rc, sq_err *e)
{
    if (tmp && !rc)
        rc = sq_ctx_upload(r->net.cx, p, tmp, r->net.ts->total * sizeof(float), e);
    free(tmp);
    return rc;
}

/* How the run ended, for whoever reads the model later: the epochs it
 * trained and why it stopped there. "patience" says that --epochs did not
 * bind: a larger cap trains the same model (nothing depends on the cap but
 * the loop), which is how pipelines/run_budget.sh judges a run against a
 * paper's epoch budget. And the parts each step's batch was cut into
 * (threads x processes): the one thing besides the settings that the bits
 * depend on, which --config leaves to the machine. */
static int put_end(const run *r, sq_modelfile *mf, sq_err *e)
{
    const char *why = r->diverged ? "diverged" : r->st[ST_STOPPED] ? "patience" : "epochs";
    int rc = sq_modelfile_set(mf, e, "train.epochs_done", "%" PRIu64, r->st[ST_EPOCHS_DONE]) ||
             sq_modelfile_set(mf, e, "train.stop", "%s", why) ||
             sq_modelfile_set(mf, e, "train.parts", "%d", r->parts);
    return rc ? e->code : 0;
}

static int write_model(const run *r, const char *path, sq_err *e)
{
    sq_modelfile mf = {0};
    int rc = put_config(&mf, r->o, r->ds, e);
    if (!rc && r->st[ST_HAS_BEST])
        rc = put_best(r, &mf, e);
    if (!rc)
        rc = put_end(r, &mf, e);
    float *tmp = NULL;
    const float *p = NULL;
    if (!rc && !(p = host_copy(r, r->st[ST_HAS_BEST] ? r->best : r->net.params, &tmp, e)))
        rc = e->code;
    if (!rc)
        rc = sq_tensors_to_file(r->net.ts, p, &mf, e);
    if (!rc)
        rc = sq_modelfile_write(path, &mf, e);
    sq_modelfile_free(&mf);
    free(tmp);
    return rc;
}

static int write_ckpt(const run *r, const char *path, sq_err *e)
{
    sq_modelfile mf = {0};
    uint64_t n[1] = {r->net.ts->total}, ns[1] = {ST_N}, n1[1] = {1}, parts = (uint64_t)r->parts;
    int rc = put_config(&mf, r->o, r->ds, e);
    float *tmp[4] = {NULL, NULL, NULL, NULL};
    const float *p = NULL, *m = NULL, *v = NULL, *best = NULL;
    if (!rc && (!(p = host_copy(r, r->net.params, &tmp[0], e)) ||
                !(m = host_copy(r, r->m, &tmp[1], e)) || !(v = host_copy(r, r->v, &tmp[2], e)) ||
                !(best = host_copy(r, r->best, &tmp[3], e))))
        rc = e->code;
    if (!rc)
        rc = sq_tensors_to_file(r->net.ts, p, &mf, e);
    if (!rc)
        rc = sq_modelfile_add(&mf, "adam.m", SQ_F32, 1, n, m, e) ||
             sq_modelfile_add(&mf, "adam.v", SQ_F32, 1, n, v, e) ||
             sq_modelfile_add(&mf, "best.params", SQ_F32, 1, n, best, e) ||
             sq_modelfile_add(&mf, "train.state", SQ_U64, 1, ns, r->st, e) ||
             sq_modelfile_add(&mf, "train.parts", SQ_U64, 1, n1, &parts, e);
    rc = rc ? e->code : 0;
    if (!rc)
        rc = sq_modelfile_write(path, &mf, e);
    sq_modelfile_free(&mf);
    for (int i = 0; i < 4; i++)
        free(tmp[i]);
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

/* train.state, of this version or of a checkpoint written before
 * --stop-metric (ST_N_OLD values; its best value is NDCG@10's). */
static int get_state(run *r, const sq_modelfile *mf, const char *path, sq_err *e)
{
    const sq_tensor *t = sq_modelfile_find(mf, "train.state");
    if (t && t->dtype == SQ_U64 && t->ndim == 1 && t->shape[0] == ST_N_OLD) {
        memcpy(r->st, t->data, ST_N_OLD * sizeof r->st[0]);
        r->st[ST_BEST_NDCG] = r->st[ST_BEST_STOP];
        st_set(r, ST_BEST_MRR, NAN);
        return 0;
    }
    return get_flat(mf, path, "train.state", SQ_U64, ST_N, r->st, 8, e);
}

/* 65 when the stream h has another id map than the model file mf of the
 * same number of items (idmap.h; one without a fingerprint passes). */
static int same_map(const sq_modelfile *mf, const char *path, const sq_header *h, sq_err *e)
{
    sq_mapfp mfp, sfp;
    sq_mapfp_from_meta(mf->config, "data.", &mfp);
    sq_mapfp_from_meta(h->meta, "", &sfp);
    return sq_mapfp_check_stream(&mfp, path, &sfp, "the stream", NULL, 0, e);
}

/* The checkpoint must be of this data and of the same model (configs
 * compared as the texts they serialise to). */
static int same_run(const run *r, const sq_train_opts *fo, const sq_modelfile *mf,
                    const char *path, sq_err *e)
{
    char a[512], b[512], *ta = NULL, *tb = NULL;
    uint32_t n_items = 0;
    if (sq_modelfile_get(mf, "n_items", a, sizeof a))
        n_items = (uint32_t)strtoul(a, NULL, 10);
    if (n_items != r->ds->hdr.n_items)
        return sq_fail(e, SQ_EX_DATA, "%s: the checkpoint was trained on %" PRIu32 " items, "
                       "the stream has %" PRIu32 " (another dataset?)", path, n_items,
                       r->ds->hdr.n_items);
    if (sq_modelfile_get(mf, "data.dataset", a, sizeof a) &&
        sq_meta_get(&r->ds->hdr, "dataset", b, sizeof b) && strcmp(a, b) != 0)
        return sq_fail(e, SQ_EX_DATA, "%s: the checkpoint was trained on dataset '%s', the "
                       "stream is '%s'", path, a, b);
    if (same_map(mf, path, &r->ds->hdr, e))
        return e->code;
    int rc = config_text(fo->model, fo->cfg, &ta, e);
    if (!rc)
        rc = config_text(r->o->model, r->o->cfg, &tb, e);
    if (!rc && (fo->model != r->o->model || strcmp(ta, tb) != 0))
        rc = sq_fail(e, SQ_EX_USAGE, "%s: the model options differ from the checkpoint's",
                     path);
    free(ta);
    free(tb);
    return rc;
}

/* A launcher run resumes a checkpoint of as many parts a step (RANKS) */
static int same_parts(const run *r, const sq_modelfile *mf, const char *path, sq_err *e)
{
    if (r->comm->size == 1)
        return 0;
    const sq_tensor *t = sq_modelfile_find(mf, "train.parts");
    uint64_t p = 0;
    if (t && t->dtype == SQ_U64 && t->ndim == 1 && t->shape[0] == 1)
        memcpy(&p, t->data, sizeof p);
    if (p == (uint64_t)r->parts)
        return 0;
    int T = r->parts / r->comm->size;
    if (!p)
        return sq_fail(e, SQ_EX_USAGE, "%s: the checkpoint does not say how its steps were "
                       "cut (written before seqrec trained across processes): resume it in "
                       "one process", path);
    return sq_fail(e, SQ_EX_USAGE, "%s: the checkpoint's steps were cut into %" PRIu64 " parts "
                   "(processes x threads), this run's into %d (%d x %d): resume it with as "
                   "many parts, or in one process with --threads %" PRIu64, path, p, r->parts,
                   r->comm->size, T, p);
}

static int load_ckpt(run *r, const char *path, sq_err *e)
{
    sq_modelfile mf;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    sq_train_opts fo;
    uint64_t n = r->net.ts->total;
    int rc = opts_from_file(&fo, &mf, path, e);
    if (!rc)
        rc = same_run(r, &fo, &mf, path, e);
    if (!rc)
        rc = same_parts(r, &mf, path, e);
    float *blk[4] = {r->net.params, r->m, r->v, r->best}, *tmp[4] = {NULL, NULL, NULL, NULL};
    float *at[4] = {NULL, NULL, NULL, NULL};
    for (int i = 0; !rc && i < 4; i++)
        if (!(at[i] = host_slot(r, blk[i], &tmp[i], e)))
            rc = e->code;
    if (!rc)
        rc = sq_tensors_from_file(r->net.ts, at[0], &mf, path, e);
    if (!rc)
        rc = get_flat(&mf, path, "adam.m", SQ_F32, n, at[1], 4, e) ||
             get_flat(&mf, path, "adam.v", SQ_F32, n, at[2], 4, e) ||
             get_flat(&mf, path, "best.params", SQ_F32, n, at[3], 4, e) ||
             get_state(r, &mf, path, e) ? e->code : 0;
    for (int i = 0; i < 4; i++)
        rc = host_commit(r, blk[i], tmp[i], rc, e);
    free(fo.cfg);
    sq_modelfile_free(&mf);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* The loop                                                                 */

/* The training sequences of ds for the batch builder: split records train
 * on items[0, n_train); a padded row on its span from the first to the last
 * non-zero item (RandomPad's separating zeros stay, as padding tokens). */
static int make_seqs(const sq_dataset *ds, sq_seqs *s, uint64_t **start, uint32_t **ntr,
                     uint32_t **uid, sq_err *e)
{
    if (ds->n_seq > UINT32_MAX)
        return sq_fail(e, SQ_EX_DATA, "too many records");
    uint64_t n = ds->n_seq ? ds->n_seq : 1;
    *start = malloc(n * sizeof **start);
    *ntr = malloc(n * sizeof **ntr);
    *uid = malloc(n * sizeof **uid);
    if (!*start || !*ntr || !*uid)
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
        (*uid)[i] = q->user;
    }
    *s = (sq_seqs){.n_users = (uint32_t)ds->n_seq, .n_items = ds->hdr.n_items,
                   .items = ds->items, .start = *start, .n_train = *ntr,
                   .user_id = *uid};
    return 0;
}

static int diverged(run *r, uint64_t epoch, double what, const char *name,
                    const char *out_path, sq_err *e)
{
    r->diverged = 1;
    if (r->st[ST_HAS_BEST])
        return sq_fail(e, SQ_EX_SOFTWARE, "training diverged in epoch %" PRIu64 " at step %"
                       PRIu64 " (%s %g); %s gets the best model so far (epoch %" PRIu64
                       "); try a smaller --lr or --clip", epoch + 1, r->st[ST_STEP] + 1, name,
                       what, out_path, r->st[ST_BEST_EPOCH]);
    return sq_fail(e, SQ_EX_SOFTWARE, "training diverged in epoch %" PRIu64 " at step %" PRIu64
                   " (%s %g) before any validation: no model written; try a smaller --lr or "
                   "--clip", epoch + 1, r->st[ST_STEP] + 1, name, what);
}

/* The runs of the parameter block with one weight-decay flag (tensor.h:
 * sq_tensors_runs), listed once per run: Adam updates run by run. */
typedef struct {
    int n;
    sq_micro_run run[SQ_MAX_TENSORS];
    const sq_adam_cfg *decay, *plain;
} adam_runs;

static void add_run(void *p, size_t off, size_t n, int decay)
{
    adam_runs *a = p;
    a->run[a->n++] = (sq_micro_run){.off = off, .len = n, .cfg = decay ? a->decay : a->plain};
}

/* What a run holds besides its state. */
typedef struct {
    sq_batcher bt;
    void *work;
    uint64_t *start;
    uint32_t *ntr, *uid;
    sq_adam_cfg decay, plain;
    sq_eval_opts eo;
    sq_model view;
    sq_step_opts so;
    double first_loss;        /* of this process's first batch (0: none yet) */
    adam_runs runs;
    sq_micro mb;              /* the threads' micro-batches (micro.h) */
    sq_packed_pad pad;        /* --cuda-graphs: the batch padded to its bucket */
} loop;

/* --cuda-graphs: the step numbered `step` (zeroed gradients, the staged
 * batch, the model's step, and without --clip the update behind its gate)
 * queued as the CUDA graph of the batch's padded size (its bucket: rows,
 * entries, sequences); *count its loss entries. Its loss is read later
 * (graph_collect), so that the host may queue the next step first. */
static int graph_launch(run *r, loop *lp, const sq_packed *b, const sq_micro_update *u,
                        uint64_t step, int *count, sq_err *e)
{
    const sq_ctx *cx = r->net.cx;
    const sq_packed *p = sq_packed_pad_to(&lp->pad, b, e);
    if (!p)
        return e->code;
    *count = 0;
    /* the shape: rows, entries, sequences and the first view's entries */
    int shape[4] = {p->T, p->n, p->B, p->n_first};
    uint64_t key = XXH3_64bits(shape, sizeof shape);
    if (sq_ctx_graph_begin(cx, key, e))
        return e->code;
    /* the graph ends (a capture must) whatever the staging did: its error
     * is the sticky one that the end reports */
    sq_err se = {0};
    if (!sq_packed_stage(cx, p, &se)) {
        sq_micro_step(&lp->mb, r->o->model, &r->net, lp->work, p, &lp->so, step, count);
        if (u->clip <= 0) {
            sq_ctx_graph_gate(cx, u->max_loss);
            sq_micro_adam(&lp->mb, &r->net, u->m, u->v, u->runs, u->n_runs, u->t, &se);
        }
    }
    if (sq_ctx_graph_end(cx, e))
        return e->code;
    return se.code ? sq_fail(e, se.code, "%s", se.msg) : 0; /* the update's own */
}

/* The oldest launched step's result: its loss (waited for), and with
 * --clip its update, now */
static int graph_collect(run *r, loop *lp, const sq_micro_update *u, int count,
                         sq_micro_result *res, sq_err *e)
{
    double loss = NAN;
    int got = 0;
    if (sq_ctx_graph_values(r->net.cx, &loss, 1, &got, e))
        return e->code;
    if (got != 1)
        return sq_fail(e, SQ_EX_SOFTWARE, "--cuda-graphs: --model %s keeps %d values a step, "
                       "not its one loss", r->o->model->name, got);
    if (u->clip > 0)
        return sq_micro_finish(&lp->mb, &r->net, loss, count, u, res, e);
    *res = (sq_micro_result){.loss = loss, .count = count,
                             .updated = sq_micro_passes(loss, u->max_loss)};
    return 0;
}

/* One step of batch b, numbered r->st[ST_STEP] + ahead (the steps queued
 * and not yet taken into account): eagerly, or (--cuda-graphs) as a CUDA
 * graph. *res is a step's result when *has says so: this step's, or with
 * graphs and no --clip the step before's (ahead 1; the host queues a step
 * before it waits for the one before). SEQREC_CUDA_GRAPHS=eager
 * (graphs_eager) runs the padded steps without graphs: the same bytes. */
static int step_of(run *r, loop *lp, const sq_packed *b, sq_micro_update *u, int ahead,
                   int counts[2], sq_micro_result *res, int *has, sq_err *e)
{
    const sq_train_opts *o = r->o;
    const sq_ctx *cx = r->net.cx;
    uint64_t step = r->st[ST_STEP] + (uint64_t)ahead;
    u->t = (long)step + 1;
    *has = 1;
    if (!o->graphs)
        return (!sq_micro_stages(&lp->mb) && sq_packed_stage(cx, b, e)) ||
                       sq_micro_train(&lp->mb, o->model, &r->net, lp->work, b, &lp->so,
                                      step, u, res, e)
                   ? e->code
                   : 0;
    if (o->graphs_eager) {
        const sq_packed *p = sq_packed_pad_to(&lp->pad, b, e);
        int count = 0;
        if (!p || sq_packed_stage(cx, p, e))
            return e->code;
        double loss = sq_micro_step(&lp->mb, o->model, &r->net, lp->work, p, &lp->so, step,
                                    &count);
        return sq_micro_finish(&lp->mb, &r->net, loss, count, u, res, e);
    }
    if (graph_launch(r, lp, b, u, step, &counts[step % 2], e))
        return e->code;
    *has = ahead || o->clip > 0; /* with --clip, no step queued ahead */
    return *has ? graph_collect(r, lp, u, counts[(step - (uint64_t)ahead) % 2], res, e) : 0;
}

/* A step's result taken into account: the tests that stop a run, then the
 * step counted, its loss into the epoch's sums, the progress */
static int took(run *r, loop *lp, uint64_t epoch, const sq_micro_result *res, uint64_t i,
                uint64_t n_batches, const sq_train_hooks *hooks, const char *out_path,
                double *loss_sum, uint64_t *loss_cnt, sq_err *e)
{
    if (!isfinite(res->loss))
        return diverged(r, epoch, res->loss, "loss", out_path, e);
    if (r->o->max_loss > 0 && res->loss > r->o->max_loss)
        return diverged(r, epoch, res->loss, "loss above --max-loss", out_path, e);
    if (!res->updated)
        return diverged(r, epoch, res->norm, "gradient norm", out_path, e);
    if (lp->first_loss == 0)
        lp->first_loss = res->loss;
    r->st[ST_STEP]++;
    *loss_sum += res->loss * res->count;
    *loss_cnt += (uint64_t)res->count;
    if (hooks->progress)
        hooks->progress(hooks->ctx, epoch + 1, i + 1, n_batches,
                        *loss_cnt ? *loss_sum / (double)*loss_cnt : 0);
    return 0;
}

/* One epoch of batches; *loss the mean over its trained entries. GPU: the
 * batch's integers up in one copy (into the pinned buffer the step before
 * last used), the step queued. Eagerly the loss comes down after the
 * forward; the backward and the update still run while the loop builds the
 * next batch, and a failure among them is reported by the next step's
 * staging (or the wait below). With CUDA graphs (no --clip) the step's
 * loss is read after the next step is queued. */
static int one_epoch(run *r, loop *lp, uint64_t epoch, const sq_train_hooks *hooks,
                     const char *out_path, double *loss_mean, sq_err *e)
{
    const sq_train_opts *o = r->o;
    uint64_t n_batches = sq_batcher_n_batches(&lp->bt), loss_cnt = 0;
    double loss_sum = 0;
    sq_micro_update upd = {.m = r->m, .v = r->v, .runs = lp->runs.run, .n_runs = lp->runs.n,
                           .max_loss = o->max_loss, .clip = o->clip};
    int ahead = 0, counts[2] = {0, 0}, has = 0;
    sq_batcher_shuffle(&lp->bt, epoch);
    for (uint64_t i = 0; i < n_batches; i++) {
        sq_micro_result res;
        if (step_of(r, lp, sq_batcher_get(&lp->bt, epoch, i), &upd, ahead, counts, &res, &has,
                    e) ||
            (has && took(r, lp, epoch, &res, i - (uint64_t)ahead, n_batches, hooks, out_path,
                         &loss_sum, &loss_cnt, e)))
            return e->code;
        ahead = !has || ahead; /* a graph's step queued, its loss unread */
    }
    if (ahead) { /* the last graph step's loss */
        sq_micro_result res;
        if (graph_collect(r, lp, &upd, counts[r->st[ST_STEP] % 2], &res, e) ||
            took(r, lp, epoch, &res, n_batches - 1, n_batches, hooks, out_path, &loss_sum,
                 &loss_cnt, e))
            return e->code;
    }
    *loss_mean = loss_cnt ? loss_sum / (double)loss_cnt : 0;
    return sq_ctx_sync(r->net.cx, e); /* the epoch's last update, and its errors */
}

/* The validation metrics of the parameters now: @10 and the stop metric. */
static int validate(run *r, loop *lp, sq_epoch_stats *s, sq_err *e)
{
    int kind;
    uint32_t ks[2] = {10, 10};
    sq_train_stop_metric(r->o, &kind, &ks[1]);
    sq_metrics acc;
    if (sq_metrics_init(&acc, ks, ks[1] == 10 ? 1 : 2, e))
        return e->code;
    int rc = sq_ranks_eval(r->comm, &lp->view, r->ds, &lp->eo, &acc, e);
    if (!rc) {
        sq_metrics_at a = sq_metrics_get(&acc, 0), b = sq_metrics_get(&acc, acc.n_k - 1);
        s->hr10 = a.hr;
        s->ndcg10 = a.ndcg;
        s->mrr10 = a.mrr;
        s->stop = kind == SQ_STOP_NDCG ? b.ndcg : kind == SQ_STOP_HR ? b.hr
                : kind == SQ_STOP_RECALL ? b.recall : b.mrr;
        s->evaluated = 1;
    }
    sq_metrics_free(&acc);
    return rc;
}

/* Validation after an epoch: a better stop metric makes these the best
 * parameters (written at the end, and kept in the checkpoint until then);
 * `patience` evaluations without one stop the run. */
static int evaluate(run *r, loop *lp, uint64_t epoch, sq_epoch_stats *s, sq_err *e)
{
    if (validate(r, lp, s, e))
        return e->code;
    if (!r->st[ST_HAS_BEST] || s->stop > st_get(r, ST_BEST_STOP)) {
        s->improved = 1;
        r->st[ST_HAS_BEST] = 1;
        r->st[ST_BEST_EPOCH] = epoch + 1;
        r->st[ST_BAD_EVALS] = 0;
        st_set(r, ST_BEST_STOP, s->stop);
        st_set(r, ST_BEST_HR, s->hr10);
        st_set(r, ST_BEST_NDCG, s->ndcg10);
        st_set(r, ST_BEST_MRR, s->mrr10);
        sq_copy(r->net.cx, r->best, r->net.params, r->net.ts->total);
        return 0;
    }
    if (++r->st[ST_BAD_EVALS] >= (uint64_t)r->o->patience && r->o->patience > 0)
        r->st[ST_STOPPED] = 1;
    return 0;
}

/* --init: the parameters of the model file o->init over the seeded init
 * (train.h INIT). */
static int init_from_file(run *r, sq_err *e)
{
    const char *path = r->o->init;
    const sq_model_def *def = r->o->model;
    const sq_header *h = &r->ds->hdr;
    char a[512] = "", b[512];
    if (!def->init_from)
        return sq_fail(e, SQ_EX_USAGE, "--init: --model %s cannot start from a model file",
                       def->name);
    sq_modelfile mf;
    if (sq_modelfile_read(path, &mf, e))
        return e->code;
    uint32_t n_items = 0;
    int rc = 0;
    if (sq_modelfile_get(&mf, "n_items", a, sizeof a))
        n_items = (uint32_t)strtoul(a, NULL, 10);
    if (!sq_modelfile_get(&mf, "model", b, sizeof b) || strcmp(b, def->name) != 0)
        rc = sq_fail(e, SQ_EX_DATA, "%s: not a %s model", path, def->name);
    else if (n_items == 0 || n_items > h->n_items)
        rc = sq_fail(e, SQ_EX_DATA, "%s: the model was trained on %" PRIu32 " items, the "
                     "stream has %" PRIu32 " (fewer: another dataset, or another id map?)",
                     path, n_items, h->n_items);
    else if (sq_modelfile_get(&mf, "data.dataset", a, sizeof a) &&
             sq_meta_get(h, "dataset", b, sizeof b) && strcmp(a, b) != 0)
        rc = sq_fail(e, SQ_EX_DATA, "%s: the model was trained on dataset '%s', the stream "
                     "is '%s'", path, a, b);
    else if (!same_map(&mf, path, h, e))
        rc = def->init_from(&r->net, &mf, path, e);
    else
        rc = e->code;
    sq_modelfile_free(&mf);
    return rc;
}

/* Every rank runs the same options and threads on the same data (RANKS) */
static int same_everywhere(const run *r, sq_err *e)
{
    if (!sq_comm_ranks(r->comm))
        return 0;
    sq_modelfile mf = {0};
    int rc = put_config(&mf, r->o, r->ds, e);
    if (!rc && (sq_modelfile_set(&mf, e, "threads", "%d", r->parts / r->comm->size) ||
                sq_modelfile_set(&mf, e, "data.xxh3", "%016" PRIx64,
                                 sq_ranks_data_hash(r->ds))))
        rc = e->code;
    if (!rc)
        rc = sq_ranks_same_text(r->comm, mf.config ? mf.config : "", e);
    sq_modelfile_free(&mf);
    return rc;
}

/* --cuda-graphs: what it needs, and the padded batches' buffers: rows to a
 * multiple of an eighth of the most a batch has, in padding sequences of
 * at most max_len */
static int graphs_open(run *r, loop *lp, sq_err *e)
{
    const sq_train_opts *o = r->o;
    if (r->net.cx->backend != SQ_BACKEND_CUDA)
        return sq_fail(e, SQ_EX_USAGE, "--cuda-graphs needs --device cuda");
    if (!o->model->graphs)
        return sq_fail(e, SQ_EX_USAGE, "--cuda-graphs: --model %s's steps are not graph-safe "
                       "yet (HACKING.md, \"CUDA graphs\"): train it without", o->model->name);
    if (r->comm->size > 1)
        return sq_fail(e, SQ_EX_USAGE, "--cuda-graphs: one process (not %d ranks)",
                       r->comm->size);
    int q = (lp->bt.cap_T + 7) / 8, views = lp->bt.views > 1 ? lp->bt.views : 1;
    return sq_packed_pad_init(&lp->pad, lp->bt.cap_T, lp->bt.batch * views, q < 1 ? 1 : q,
                              lp->bt.max_len, lp->bt.K, e);
}

/* The bounds the model's workspace is sized by: the batcher's, or with
 * --cuda-graphs those of its padded batches (more rows, the padding
 * sequences, their attention) */
static sq_batcher work_bounds(const loop *lp, int graphs)
{
    sq_batcher b = lp->bt; /* read-only: work_alloc reads the bounds */
    if (graphs) {
        const sq_packed_pad *p = &lp->pad;
        b.batch += p->segs;
        b.cap_T = p->cap_T > p->cap_n ? p->cap_T : p->cap_n;
        b.cap_att += (size_t)(p->q + p->segs) * (size_t)b.max_len;
    }
    return b;
}

/* Everything a run needs before its first epoch. */
static int open_run(run *r, loop *lp, const char *out_path, const char *resume_path,
                    sq_err *e)
{
    const sq_train_opts *o = r->o;
    const sq_model_def *def = o->model;
    const sq_dataset *ds = r->ds;
    sq_ctx cx = sq_ctx_cpu();
    cx.threads = o->threads;
    if (o->cx)
        cx = *o->cx;
    /* Find out now, not after the first epoch, whether the output can be
     * written (by rank 0, the one that writes it). */
    if (r->comm->rank == 0 &&
        (sq_out_check_regular(out_path, "-o", e) || sq_out_check(out_path, e)))
        return e->code;
    sq_seqs seqs;
    if (make_seqs(ds, &seqs, &lp->start, &lp->ntr, &lp->uid, e))
        return e->code;
    for (uint64_t i = 0; i < ds->n_seq; i++)
        if (ds->seq[i].view == 0 && ds->seq[i].n_valid > 0)
            r->has_valid = 1;
    lp->so = sq_train_step_opts(o);
    if (def->batcher(&lp->bt, &seqs, o->cfg, &lp->so, e))
        return e->code;
    if (o->stride && lp->bt.stride != o->stride)
        return sq_fail(e, SQ_EX_USAGE, "--model %s does not take --window-stride", def->name);
    if (def->net_alloc(&r->net, o->cfg, &cx, e) || (o->graphs && graphs_open(r, lp, e)))
        return e->code;
    size_t bytes = r->net.ts->total * sizeof(float);
    if (!(r->m = sq_ctx_alloc(r->net.cx, bytes, e)) ||
        !(r->v = sq_ctx_alloc(r->net.cx, bytes, e)) ||
        !(r->best = sq_ctx_alloc(r->net.cx, bytes, e)))
        return e->code;
    sq_batcher bounds = work_bounds(lp, o->graphs);
    if (def->work_alloc(&r->net, &bounds, &lp->work, e) ||
        sq_micro_open(&lp->mb, def, o->cfg, &r->net, &lp->bt, o->threads, o->comm, e))
        return e->code;
    r->parts = lp->mb.G;
    if (o->graphs && lp->mb.G > 1)
        return sq_fail(e, SQ_EX_USAGE, "--cuda-graphs: a step of one part only (micro-batches "
                       "on a GPU?)");
    if (same_everywhere(r, e))
        return e->code;
    /* the fused update is CPU code (a GPU backend updates with its own Adam) */
    lp->mb.defer = o->clip <= 0 && r->net.cx->backend == SQ_BACKEND_CPU;
    lp->mb.lazy = o->lazy_adam;
    lp->mb.dense_sum = o->nccl_dense;
    if (resume_path) {
        if (load_ckpt(r, resume_path, e))
            return e->code;
    } else {
        def->net_init(&r->net, o->seed);
        if (o->init && init_from_file(r, e))
            return e->code;
    }
    lp->decay = (sq_adam_cfg){.lr = o->lr, .beta1 = o->beta1, .beta2 = o->beta2,
                              .eps = o->eps, .weight_decay = o->weight_decay, .decoupled = 1,
                              .lazy = o->lazy_adam};
    lp->plain = lp->decay;
    lp->plain.weight_decay = 0;
    lp->runs.decay = &lp->decay;
    lp->runs.plain = &lp->plain;
    sq_tensors_runs(r->net.ts, add_run, &lp->runs);
    sq_eval_defaults(&lp->eo);
    lp->eo.target = SQ_EVAL_VALID;
    lp->eo.cand = o->valid_cand & 3;
    lp->eo.n_neg = (uint32_t)o->valid_cand >> 2;
    lp->eo.exclude_history = o->valid_exclude_history;
    lp->eo.seed = o->valid_seed;
    lp->eo.threads = o->threads;
    def->view(&lp->view, &r->net);
    return 0;
}

static void close_run(run *r, loop *lp)
{
    const sq_model_def *def = r->o->model;
    sq_micro_close(&lp->mb, def);
    if (def->work_free)
        def->work_free(lp->work);
    if (r->net.cx) {
        sq_ctx_free(r->net.cx, r->best);
        sq_ctx_free(r->net.cx, r->v);
        sq_ctx_free(r->net.cx, r->m);
    }
    if (r->net.impl)
        def->net_free(&r->net);
    sq_batcher_free(&lp->bt);
    sq_packed_pad_free(&lp->pad);
    free(lp->start);
    free(lp->ntr);
    free(lp->uid);
}

/* The ranks' parameters after an epoch are one model's (RANKS) */
static int params_agree(const run *r, uint64_t epoch, sq_err *e)
{
    if (r->comm->size == 1)
        return 0;
    float *tmp = NULL;
    const float *p = host_copy(r, r->net.params, &tmp, e);
    int rc = p ? sq_ranks_same_params(r->comm, p, r->net.ts->total, epoch + 1, e) : e->code;
    free(tmp);
    return rc;
}

/* The stop metric's name and best so far, for the epoch's stats. */
static void stop_of(const run *r, sq_epoch_stats *s)
{
    int kind;
    uint32_t k;
    sq_train_stop_metric(r->o, &kind, &k);
    sq_stop_metric_name(kind, k, s->stop_name, sizeof s->stop_name);
    s->best_epoch = r->st[ST_HAS_BEST] ? r->st[ST_BEST_EPOCH] : 0;
    s->best_stop = r->st[ST_HAS_BEST] ? st_get(r, ST_BEST_STOP) : 0;
}

/* The validation's progress (eval.h) to the validating hook. */
typedef struct {
    const sq_train_hooks *hooks;
    uint64_t epoch;
} valid_progress;

static void valid_progress_fn(void *p, uint64_t done, uint64_t total)
{
    const valid_progress *vp = p;
    vp->hooks->validating(vp->hooks->ctx, vp->epoch, done, total);
}

int sq_train(const sq_train_opts *o, const sq_dataset *ds, const char *out_path,
             const char *resume_path, const sq_train_hooks *hooks, sq_err *e)
{
    sq_comm one = {.size = 1};
    run r = {.o = o, .ds = ds, .comm = o->comm ? o->comm : &one};
    loop lp = {0};
    sq_train_hooks nohooks = {0};
    if (!hooks)
        hooks = &nohooks;
    if (ds->hdr.kind != SQ_SPLIT && ds->hdr.kind != SQ_PADDED)
        return sq_fail(e, SQ_EX_DATA, "expected a split or padded stream, got %s",
                       sq_kind_name(ds->hdr.kind));
    if (sq_train_check(o, e))
        return e->code;
    size_t plen = strlen(out_path);
    char *ckpt_path = malloc(plen + 6);
    if (!ckpt_path)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(ckpt_path, out_path, plen);
    memcpy(ckpt_path + plen, ".ckpt", 6);

    int rc = open_run(&r, &lp, out_path, resume_path, e);
    valid_progress vp = {.hooks = hooks};
    if (hooks->validating) {
        lp.eo.progress = valid_progress_fn;
        lp.eo.progress_ctx = &vp;
    }
    for (uint64_t epoch = r.st[ST_EPOCHS_DONE];
         !rc && epoch < (uint64_t)o->epochs && !r.st[ST_STOPPED]; epoch++) {
        double t0 = now();
        vp.epoch = epoch + 1;
        sq_epoch_stats s = {.epoch = epoch + 1, .samples = lp.bt.n_samples};
        if ((rc = one_epoch(&r, &lp, epoch, hooks, out_path, &s.loss, e)) != 0)
            break;
        double t1 = now();
        s.train_seconds = t1 - t0;
        s.step = r.st[ST_STEP];
        /* a loss that grows past 10x its start has gone wrong without
         * reaching NaN (a learning rate far too large): say so */
        s.first_loss = lp.first_loss;
        s.loss_rose = lp.first_loss > 0 && s.loss > 10 * lp.first_loss;
        s.seq_per_s = t1 > t0 ? (double)lp.bt.n_samples / (t1 - t0) : 0;
        if ((rc = params_agree(&r, epoch, e)) != 0)
            break;
        if (r.has_valid && ((epoch + 1) % (uint64_t)o->eval_every == 0 ||
                            epoch + 1 == (uint64_t)o->epochs) &&
            (rc = evaluate(&r, &lp, epoch, &s, e)) != 0)
            break;
        r.st[ST_EPOCHS_DONE] = epoch + 1;
        s.seconds = now() - t0;
        s.eval_seconds = s.seconds - s.train_seconds;
        s.max_rss_mib = max_rss_mib();
        s.device_mib = -1;
        if (r.net.cx->backend != SQ_BACKEND_CPU) {
            size_t peak = 0;
            if ((rc = sq_ctx_mem_peak(r.net.cx, &peak, e)) != 0)
                break;
            s.device_mib = (double)peak / (1024.0 * 1024.0);
        }
        stop_of(&r, &s);
        if (hooks->epoch && (rc = hooks->epoch(hooks->ctx, &s, e)) != 0)
            break;
        if (r.comm->rank == 0)
            rc = write_ckpt(&r, ckpt_path, e);
    }
    /* The model file is written once, here: a run that fails leaves none
     * (a run stopped by a signal leaves its checkpoint), but a diverged one
     * gets the best model so far (train.h). */
    if (r.comm->rank != 0) {
        /* rank 0 writes */
    } else if (!rc) {
        rc = write_model(&r, out_path, e);
    } else if (r.diverged && r.st[ST_HAS_BEST]) {
        sq_err we = {0};
        if (write_model(&r, out_path, &we)) {
            *e = we;
            rc = we.code;
        }
    }
    close_run(&r, &lp);
    free(ckpt_path);
    return rc;
}

int sq_train_check_data(const sq_dataset *ds, const char *name, sq_err *e)
{
    if (ds->hdr.n_items == 0 || ds->n_seq == 0)
        return sq_fail(e, SQ_EX_DATA, "%s: an empty stream (%" PRIu64 " records, %" PRIu32
                       " items): nothing to train on", name, ds->n_seq, ds->hdr.n_items);
    for (uint64_t i = 0; i < ds->n_seq; i++)
        if (ds->seq[i].n_train > 0)
            return 0;
    return sq_fail(e, SQ_EX_DATA, "%s: no user has a training item (every item is held "
                   "out): nothing to train on", name);
}

int sq_train_fit(const sq_model_def *def, const sq_dataset *ds, const char *out_path,
                 const char *id_map, size_t id_map_len, int threads, int *evaluated,
                 double *hr10, double *ndcg10, sq_err *e)
{
    sq_modelfile mf;
    *evaluated = 0;
    if (sq_out_check_regular(out_path, "-o", e) || def->fit(ds, &mf, e))
        return e->code;
    int rc = put_map(&mf, id_map, id_map_len, e);
    if (!rc)
        rc = sq_modelfile_write(out_path, &mf, e);
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

/* ------------------------------------------------------------------------ */
/* The id map a model carries                                               */

/* The map that the model file from carries, when it is the stream's. */
static int map_of_model(const char *from, const sq_mapfp *sfp, char **bytes, size_t *len,
                        char *msg, size_t msg_n, sq_err *e)
{
    sq_modelfile mf;
    const char *b;
    size_t n;
    if (sq_modelfile_read(from, &mf, e))
        return e->code;
    int rc = sq_modelfile_id_map(&mf, from, &b, &n, e);
    sq_idmap m = {0};
    sq_mapfp fp;
    char x[32], y[32];
    if (rc == 0)
        rc = sq_idmap_parse(&m, b, n, from, e) || sq_mapfp_of_map(&m, from, &fp, e) ? e->code
                                                                                    : 0;
    if (rc == 0 && sfp->item.has && sfp->user.has && fp.item.n == sfp->item.n &&
        fp.item.hash == sfp->item.hash && fp.user.n == sfp->user.n &&
        fp.user.hash == sfp->user.hash) {
        if (!(*bytes = malloc(n)))
            rc = sq_fail(e, SQ_EX_OSERR, "out of memory for the id map of %s", from);
        else
            memcpy(*bytes, b, n);
        *len = n;
    } else if (rc == 0) {
        snprintf(msg, msg_n, "note: the id map that %s carries is not the stream's (items: "
                 "map %s, stream %s): the new model carries none (give --map FILE)", from,
                 sq_idfp_str(&fp.item, x, sizeof x), sq_idfp_str(&sfp->item, y, sizeof y));
    }
    sq_idmap_free(&m);
    sq_modelfile_free(&mf);
    return rc == 1 ? 0 : rc;
}

/* --map with --init or --resume: the map must extend the model's. */
static int extends_model(const sq_idmap *m, const char *map_name, const char *from, sq_err *e)
{
    sq_modelfile mf;
    sq_mapfp fp;
    if (sq_modelfile_read(from, &mf, e))
        return e->code;
    sq_mapfp_from_meta(mf.config, "data.", &fp);
    int rc = sq_idmap_check_extends(m, map_name, 1, &fp.item, "model", from, NULL, 0, e) ||
             sq_idmap_check_extends(m, map_name, 0, &fp.user, "model", from, NULL, 0, e);
    sq_modelfile_free(&mf);
    return rc ? e->code : 0;
}

int sq_train_pick_map(const char *map_path, const char *from, const sq_header *h,
                      const char *stream_name, char **bytes, size_t *len, char *msg,
                      size_t msg_n, sq_err *e)
{
    sq_mapfp sfp, mfp;
    sq_mapfp_from_meta(h->meta, "", &sfp);
    *bytes = NULL;
    *len = 0;
    msg[0] = '\0';
    if (!map_path)
        return from ? map_of_model(from, &sfp, bytes, len, msg, msg_n, e) : 0;
    sq_idmap m;
    char warn[512] = "";
    if (sq_idmap_read_raw(&m, map_path, bytes, e))
        return e->code;
    *len = m.len;
    int rc = sq_mapfp_of_map(&m, sq_in_name(map_path), &mfp, e) ||
             sq_mapfp_check_same(&mfp, sq_in_name(map_path), &sfp, stream_name, warn,
                                 sizeof warn, e) ||
             (from && extends_model(&m, sq_in_name(map_path), from, e));
    sq_idmap_free(&m);
    if (rc) {
        free(*bytes);
        *bytes = NULL;
        return e->code;
    }
    if (warn[0])
        snprintf(msg, msg_n, "warning: %s", warn);
    return 0;
}
