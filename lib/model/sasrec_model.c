/* sasrec_model.c - SASRec and BERT4Rec as registered models (model.h):
 * their options and configs, the training step the generic trainer calls,
 * model files, scoring and attention maps. The math is sasrec.c. */
#include "sasrec.h"
#include "kv.h"
#include "ops.h"
#include "rowwise.h"
#include "rank.h"
#include "topk.h"

#include <inttypes.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_bert(const sq_sasrec_config *c) { return c->backbone == SQ_BACKBONE_BERT4REC; }

/* ------------------------------------------------------------------------ */
/* Options and configs                                                      */

static int kind_parse(const char *s) { return sq_mixer_find(s); }
static const char *kind_word(int k)
{
    const sq_mixer *m = sq_mixer_get(k);
    return m ? m->name : NULL;
}

/* --attn's list of kinds in --help, from the mixer table. */
static void kinds_help(FILE *f)
{
    for (int k = 0; k < sq_mixer_count(); k++) {
        const sq_mixer *m = sq_mixer_get(k);
        fprintf(f, "  %-20s  %-14s %s\n", "", m->name, m->help);
    }
}

#define OFF(field) offsetof(sq_sasrec_config, field)
#define COMMON_OPTS(eps)                                                                \
    {.name = "attn", .type = SQ_OPT_ENUM, .offset = OFF(attn.kind), .def = "softmax",  \
     .parse = kind_parse, .word = kind_word, .more_help = kinds_help, .arg = "NAME",   \
     .help = "the attention of every block (default softmax):"},                       \
    {.name = "layers", .type = SQ_OPT_INT, .offset = OFF(n_layers), .def = "2", .lo = 1, \
     .hi = 64, .arg = "N", .help = "transformer blocks (default 2)"},                  \
    {.name = "heads", .type = SQ_OPT_INT, .offset = OFF(n_heads), .def = "1", .lo = 1,   \
     .hi = 8192, .arg = "N",                                                           \
     .help = "attention heads, dividing --dim (default 1; for\nhydra: --dim)"},        \
    {.name = "dim", .type = SQ_OPT_INT, .offset = OFF(dim), .def = "64", .lo = 1,        \
     .hi = 8192, .arg = "N", .help = "hidden size d (default 64)"},                    \
    {.name = "ffn", .type = SQ_OPT_INT, .offset = OFF(ffn), .def = "256", .lo = 1,       \
     .hi = 65536, .arg = "N", .help = "feed-forward inner size (default 256)"},        \
    {.name = "max-len", .type = SQ_OPT_INT, .offset = OFF(max_len), .def = "50",         \
     .lo = 1, .hi = 65536, .arg = "N",                                                 \
     .help = "newest N items per sequence (default 50; a padded\n"                     \
             "stream's row length when it is one)"},                                   \
    {.name = "dropout", .type = SQ_OPT_REAL, .offset = OFF(dropout), .def = "0.2",       \
     .lo = 0, .hi = 1, .hi_open = 1, .arg = "P", .help = "dropout rate (default 0.2)"}, \
    {.key = "ln_eps", .type = SQ_OPT_REAL, .offset = OFF(ln_eps), .def = eps,            \
     .lo = 0, .hi = 1, .lo_open = 1}

static const sq_opt sasrec_opts[] = {
    COMMON_OPTS("1e-8"), /* LayerNorm eps of the TF SASRec (--block recbole: 1e-12) */
    /* optional: files from before the option are the TF block */
    {.name = "block", .type = SQ_OPT_CHOICE, .offset = OFF(block), .def = "sasrec",
     .choices = "sasrec|recbole", .arg = "NAME", .optional = 1,
     .help = "the SASRec backbone's block: sasrec (TF SASRec:\n"
             "pre-LN, ReLU) or recbole (RecBole: post-LN, GELU,\n"
             "N(0, 0.02) init; default sasrec)"},
    {0},
};

static const sq_opt bert_opts[] = {
    COMMON_OPTS("1e-12"), /* RecBole's BERT4Rec */
    {.name = "causal", .type = SQ_OPT_FLAG, .offset = OFF(causal), .def = "0",
     .help = "bert4rec: causal attention (HydraRecUni)"},
    {.name = "mask-prob", .key = "train.mask_prob", .type = SQ_OPT_REAL,
     .offset = OFF(mask_prob), .def = "0.2", .lo = 0, .hi = 1, .lo_open = 1, .arg = "P",
     .help = "bert4rec: cloze masking probability (default 0.2)"},
    {0},
};

static const sq_opt *backbone_opts(int backbone)
{
    return backbone == SQ_BACKBONE_BERT4REC ? bert_opts : sasrec_opts;
}

void sq_sasrec_defaults(sq_sasrec_config *c, int backbone)
{
    memset(c, 0, sizeof *c);
    sq_opt_defaults(backbone_opts(backbone), c);
    c->backbone = backbone;
    sq_mixer_defaults(&c->attn, c->attn.kind);
}

int sq_sasrec_set_attn(sq_sasrec_config *c, const char *kind)
{
    int k = sq_mixer_find(kind);
    if (k < 0)
        return -1;
    sq_mixer_defaults(&c->attn, k);
    return 0;
}

int sq_sasrec_config_check(const sq_sasrec_config *c, sq_err *e)
{
    if (c->backbone != SQ_BACKBONE_SASREC && c->backbone != SQ_BACKBONE_BERT4REC)
        return sq_fail(e, SQ_EX_USAGE, "unknown backbone %d", c->backbone);
    if (c->block != SQ_BLOCK_SASREC && c->backbone != SQ_BACKBONE_SASREC)
        return sq_fail(e, SQ_EX_USAGE, "--block is for the SASRec backbone");
    if (c->n_items < 1 || c->n_items > (1u << 30))
        return sq_fail(e, SQ_EX_USAGE, "n_items %" PRIu32 " out of range", c->n_items);
    /* every option in its range (a config built in code) */
    if (sq_opt_check(backbone_opts(c->backbone), c, SQ_EX_USAGE, e))
        return e->code;
    /* the embedding table must stay addressable with int row indices */
    if ((uint64_t)(c->n_items + 2) * (uint64_t)c->dim > (uint64_t)1 << 40)
        return sq_fail(e, SQ_EX_USAGE, "item table too large");
    sq_mixer_env env = sq_sasrec_env(c);
    return sq_mixer_check(&env, e);
}

int sq_sasrec_config_write(const sq_sasrec_config *c, sq_modelfile *mf, sq_err *e)
{
    const sq_mixer *m = sq_mixer_get(c->attn.kind);
    if (sq_opt_write(backbone_opts(c->backbone), c, sq_modelfile_set_kv, mf, e) ||
        (m->opts && sq_opt_write(m->opts, &c->attn, sq_modelfile_set_kv, mf, e)))
        return e->code;
    return 0;
}

int sq_sasrec_config_read(sq_sasrec_config *c, const sq_modelfile *mf, const char *path,
                          sq_err *e)
{
    char buf[64];
    int backbone = -1;
    if (sq_modelfile_get(mf, "model", buf, sizeof buf))
        backbone = !strcmp(buf, "sasrec") ? SQ_BACKBONE_SASREC
                 : !strcmp(buf, "bert4rec") ? SQ_BACKBONE_BERT4REC : -1;
    if (backbone < 0)
        return sq_fail(e, SQ_EX_DATA, "%s: config has no model=sasrec or bert4rec", path);
    return sq_sasrec_config_read_as(c, mf, path, backbone, e);
}

int sq_sasrec_config_read_as(sq_sasrec_config *c, const sq_modelfile *mf, const char *path,
                             int backbone, sq_err *e)
{
    char buf[64];
    sq_sasrec_defaults(c, backbone);
    if (!sq_modelfile_get(mf, "n_items", buf, sizeof buf) ||
        sscanf(buf, "%" SCNu32, &c->n_items) != 1)
        return sq_fail(e, SQ_EX_DATA, "%s: config has no n_items", path);
    /* every key but attn is required (the first SASRec files have none:
     * softmax); BERT4Rec files keep the mask probability with the training
     * options */
    const sq_opt *t = backbone_opts(backbone);
    const char *cfg = mf->config;
    if (sq_opt_apply(t + 1, c, cfg, 1, SQ_EX_DATA, path, e) ||
        sq_opt_apply(t, c, cfg, 0, SQ_EX_DATA, path, e))
        return e->code;
    sq_mixer_defaults(&c->attn, c->attn.kind);
    const sq_mixer *m = sq_mixer_get(c->attn.kind);
    if (m->opts && sq_opt_apply(m->opts, &c->attn, cfg, 1, SQ_EX_DATA, path, e))
        return e->code;
    sq_err ce = {0};
    if (sq_sasrec_config_check(c, &ce))
        return sq_fail(e, SQ_EX_DATA, "%s: bad config: %s", path, ce.msg);
    return 0;
}

/* A given option (by config key) that the config has no place for: name
 * the kind it belongs to, if any. */
static int not_an_option(const char *key, const char *model, const sq_mixer *m, sq_err *e)
{
    char name[64], kb[64];
    sq_opt_name_of_key(key, name, sizeof name);
    for (int k = 0; k < sq_mixer_count(); k++)
        for (const sq_opt *o = sq_mixer_get(k)->opts; o && o->type; o++)
            if (!strcmp(sq_opt_key(o, kb, sizeof kb), key))
                return sq_fail(e, SQ_EX_USAGE, "--%s is for --attn %s, not %s", name,
                               sq_mixer_get(k)->name, m->name);
    return sq_fail(e, SQ_EX_USAGE, "--%s is not an option of --model %s", name, model);
}

/* Whether key is the config key of an option of table t (NULL: none). */
static int has_key(const sq_opt *t, const char *key)
{
    char kb[64];
    for (const sq_opt *o = t; o && o->type; o++)
        if (!strcmp(sq_opt_key(o, kb, sizeof kb), key))
            return 1;
    return 0;
}

int sq_sasrec_config_from(sq_sasrec_config *c, int backbone, const char *given,
                          uint32_t n_items, int padded_len, const sq_sasrec_extra *x,
                          sq_err *e)
{
    const sq_opt *t = backbone_opts(backbone);
    const sq_opt *xo = x ? x->opts : NULL;
    char kb[64], val[64];
    sq_sasrec_defaults(c, backbone);
    if (x && x->defaults && sq_opt_apply(t, c, x->defaults, 0, SQ_EX_SOFTWARE, NULL, e))
        return e->code;
    c->n_items = n_items;
    if (xo)
        sq_opt_defaults(xo, c);
    if (sq_opt_apply(t, c, given, 0, SQ_EX_USAGE, NULL, e) ||
        (xo && sq_opt_apply(xo, c, given, 0, SQ_EX_USAGE, NULL, e)))
        return e->code;
    /* the kind's options, after the kind is known */
    int kind = c->attn.kind;
    sq_mixer_defaults(&c->attn, kind);
    const sq_mixer *m = sq_mixer_get(kind);
    if (m->opts && sq_opt_apply(m->opts, &c->attn, given, 0, SQ_EX_USAGE, NULL, e))
        return e->code;
    /* options of other models or kinds are refused */
    const char *model = x && x->model ? x->model : backbone ? "bert4rec" : "sasrec";
    for (const char *line = given; line && *line; line = strchr(line, '\n') + 1) {
        size_t kl = strcspn(line, "=");
        snprintf(kb, sizeof kb, "%.*s", (int)kl, line);
        if (!has_key(t, kb) && !has_key(m->opts, kb) && !has_key(xo, kb))
            return not_an_option(kb, model, m, e);
        if (!strchr(line, '\n'))
            break;
    }
    /* RecBole's LayerNorm eps goes with its block */
    if (c->block == SQ_BLOCK_RECBOLE && !sq_kv_get(given ? given : "", "ln_eps", val, sizeof val))
        c->ln_eps = 1e-12;
    if (padded_len > 0 && !sq_kv_get(given ? given : "", "max_len", val, sizeof val))
        c->max_len = padded_len;
    if (m->default_heads && !sq_kv_get(given ? given : "", "heads", val, sizeof val))
        c->n_heads = m->default_heads(c->dim);
    return sq_sasrec_config_check(c, e);
}

int sq_sasrec_tensor_set(const sq_sasrec_config *c, sq_tensor_set *s, sq_err *e)
{
    static const sq_tensor_desc table[SQ_SASREC_NT] = {
#define DESC(name, order, decay, init, shape, use) {#name, order, decay, init, shape},
        SQ_SASREC_TENSORS(DESC)
#undef DESC
    };
#define USE(name, order, decay, init, shape, use) use,
    enum { ALL, PRE, POST, BERT };
    static const int uses[SQ_SASREC_NT] = {SQ_SASREC_TENSORS(USE)};
#undef USE
    int bert = is_bert(c), post = sq_sasrec_post_ln(c);
    sq_dims d = {{0}};
    sq_dims_set(&d, 'W', (uint64_t)c->n_items + 1 + (bert || c->mask_row ? 1 : 0));
    sq_dims_set(&d, 'V', (uint64_t)c->n_items + 1);
    sq_dims_set(&d, 'N', (uint64_t)c->max_len);
    sq_dims_set(&d, 'C', (uint64_t)c->dim);
    sq_dims_set(&d, 'F', (uint64_t)c->ffn);
    sq_dims_set(&d, 'L', (uint64_t)c->n_layers);
    sq_dims_set(&d, 'H', (uint64_t)c->n_heads);
    sq_dims_set(&d, 'U', 1); /* a unit dimension, for the extra tensors */
    memset(s, 0, sizeof *s);
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        int u = uses[i];
        int use = u == ALL || (u == PRE && !post) || (u == POST && post) || (u == BERT && bert);
        if (sq_tensors_add(s, &table[i], 1, &d, use, 0, e))
            return e->code;
    }
    const sq_mixer *m = sq_mixer_get(c->attn.kind);
    if (m->n_tensors > SQ_MIXER_MAXT)
        return sq_fail(e, SQ_EX_SOFTWARE, "--attn %s: too many tensors", m->name);
    sq_mixer_env env = sq_sasrec_env(c);
    if (sq_mixer_tensors(&env, s, &d, 1, e))
        return e->code;
    if (c->n_extra > 0 && sq_tensors_add(s, c->extra, c->n_extra, &d, 1, 2, e))
        return e->code;
    sq_tensors_layout(s);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Model files, scoring and attention maps                                  */

int sq_sasrec_add_tensors(const sq_sasrec *m, sq_modelfile *mf, sq_err *e)
{
    return sq_tensors_to_file(&m->ts, m->mem, mf, e);
}

int sq_sasrec_get_tensors(sq_sasrec *m, const sq_modelfile *mf, const char *path,
                          sq_err *e)
{
    return sq_tensors_from_file_on(&m->cx, &m->ts, m->mem, mf, path, e);
}

/* The scoring input of B histories (SCORING in sasrec.h) as a packed batch
 * in one block *ints (ids, pos [T], off [B+1], rows [B]: each sequence's
 * newest row); *att = sum(len^2). */
int sq_sasrec_scoring_input(const sq_sasrec_config *c, const sq_batch *hist, sq_packed *pb,
                            int **ints, size_t *att, sq_err *e)
{
    int B = hist->B, N = c->max_len, bert = is_bert(c);
    uint32_t keep = (uint32_t)N - (bert ? 1 : 0); /* items of the history kept */
    size_t T = 0;
    *att = 0;
    for (int b = 0; b < B; b++) {
        size_t len = hist->len[b] < keep ? hist->len[b] : keep;
        len += bert ? 1 : len == 0; /* the mask token, or a padding token */
        T += len;
        *att += len * len;
    }
    if (T > (size_t)INT32_MAX / 2)
        return sq_fail(e, SQ_EX_USAGE, "scoring batch too large");
    *ints = malloc((2 * T + 2 * (size_t)B + 1) * sizeof **ints);
    if (!*ints)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
    memset(pb, 0, sizeof *pb);
    pb->ids = *ints;
    pb->pos = *ints + T;
    pb->off = *ints + 2 * T;
    pb->rows = pb->off + B + 1;
    pb->B = B;
    pb->T = (int)T;
    pb->n = B;
    int o = 0;
    pb->off[0] = 0;
    for (int b = 0; b < B; b++) {
        uint32_t n = hist->len[b], len = n < keep ? n : keep;
        const uint32_t *it = hist->items + hist->off[b] + (n - len);
        int extra = bert || len == 0, total = (int)len + extra;
        for (uint32_t t = 0; t < len; t++) {
            if (it[t] > c->n_items) {
                free(*ints);
                *ints = NULL;
                return sq_fail(e, SQ_EX_DATA, "item %" PRIu32 " > n_items %" PRIu32,
                               it[t], c->n_items);
            }
            pb->ids[o + (int)t] = (int)it[t];
        }
        if (extra) /* BERT4Rec: the mask token; SASRec: a cold user's padding */
            pb->ids[o + (int)len] = bert ? sq_mask_id(c) : 0;
        for (int t = 0; t < total; t++)
            pb->pos[o + t] = N - total + t;
        o += total;
        pb->off[b + 1] = o;
        pb->rows[b] = o - 1;
    }
    return 0;
}

/* BATCH INVARIANCE. A user's scores must not depend on the users it is
 * scored with (the batch, the shard) or on the thread count. A GEMM over the
 * batch does not give that: OpenBLAS picks its kernels and blocking by the
 * shape (a small-matrix kernel for small B, another for large), so the
 * same row summed in another order changed in the last bits with the batch.
 * So on the CPU the histories of a batch run one forward with cx.rowwise
 * set: every linear layer, and the scores h . E[i] (+ bias), is
 * sq_rowwise_linear (rowwise.h), whose every output is the same sum in the
 * same order whatever the rows beside it; the other ops work on a row or
 * on one sequence at a time (attention, convolutions), and the positional
 * tables of FPARec are computed whole (attn_pos.c). On a GPU the
 * context's GEMMs turn batch-invariant for the forward
 * (sq_ctx_invariant, cuda/k_gemm.cu): the same guarantee, other bits. */

int sq_score_states(const sq_ctx *cx, const float *h, int B, const float *E, const float *ob,
                    int C, int V1, float *scores, sq_err *e)
{
    (void)e;
    if (cx->backend == SQ_BACKEND_CPU) {
        sq_rowwise_linear(cx, scores, h, E, ob, B, C, V1);
        for (int b = 0; b < B; b++)
            scores[(size_t)b * V1] = 0; /* padding */
        return 0;
    }
    sq_gemm(cx, 0, 1, B, V1, C, 1, h, C, E, C, 0, scores, V1);
    if (ob)
        sq_add2d(cx, scores, V1, ob, 0, B, V1);
    sq_fill2d(cx, scores, V1, B, 1, 0);
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* The excluded lists of a top-K or ranking request: each history's items sorted
 * (topk.h), in CSR; *ex NULL when nothing is excluded. */
static int history_excluded(const sq_batch *hist, int **ex, int **eoff, sq_err *e)
{
    size_t n = 0;
    *ex = NULL;
    *eoff = NULL;
    if (!hist->topk->exclude_history)
        return 0;
    for (int b = 0; b < hist->B; b++)
        n += hist->len[b];
    if (n > INT32_MAX)
        return sq_fail(e, SQ_EX_USAGE, "the batch's histories exceed 2^31 items");
    *ex = malloc((n ? n : 1) * sizeof **ex);
    *eoff = malloc(((size_t)hist->B + 1) * sizeof **eoff);
    if (!*ex || !*eoff) {
        free(*ex);
        free(*eoff);
        *ex = *eoff = NULL;
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the histories' excluded items");
    }
    int at = 0;
    for (int b = 0; b < hist->B; b++) {
        (*eoff)[b] = at;
        for (uint32_t j = 0; j < hist->len[b]; j++)
            (*ex)[at + (int)j] = (int)hist->items[hist->off[b] + j];
        qsort(*ex + at, hist->len[b], sizeof **ex, cmp_int);
        at += (int)hist->len[b];
    }
    (*eoff)[hist->B] = at;
    return 0;
}

/* hist's top-K request selected on the device from dsc (topk.h), its
 * lists down in one copy (items, scores, k, nan side by side, 4-byte
 * words each): the request done. */
static int device_topk(const sq_ctx *cx, const float *dsc, const sq_batch *hist, int V1,
                       sq_err *e)
{
    sq_topk_req *q = hist->topk;
    int B = hist->B, K = (int)q->K, *ex = NULL, *eoff = NULL;
    size_t nk = (size_t)B * K, bytes = (2 * nk + 2 * (size_t)B) * sizeof(int);
    int *d = NULL, *h = NULL;
    int rc = history_excluded(hist, &ex, &eoff, e);
    if (!rc && !(d = sq_ctx_alloc(cx, bytes, e)))
        rc = e->code;
    if (!rc && !(h = malloc(bytes)))
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory for top-K lists");
    if (!rc)
        rc = sq_topk_rows(cx, d, (float *)(d + nk), d + 2 * nk, d + 2 * nk + B, dsc, B, V1, K,
                          q->ok, ex, eoff, e);
    if (!rc && !(rc = sq_ctx_download(cx, h, d, bytes, e))) {
        /* uint32 and int share their representation for these ids, counts */
        memcpy(q->items, h, nk * sizeof *h);
        memcpy(q->scores, h + nk, nk * sizeof *h);
        memcpy(q->k, h + 2 * nk, (size_t)B * sizeof *h);
        memcpy(q->nan, h + 2 * nk + B, (size_t)B * sizeof *h);
    }
    q->done = !rc;
    sq_ctx_free(cx, d);
    free(h);
    free(ex);
    free(eoff);
    return rc;
}

/* hist's ranking request counted on the device from dsc (rank.h), the
 * counts down in one copy: the request done. */
static int device_ranks(const sq_ctx *cx, const float *dsc, const sq_batch *hist, int V1,
                        sq_err *e)
{
    sq_topk_req *q = hist->topk;
    int B = hist->B, *ex = NULL, *eoff = NULL, *d = NULL;
    size_t n = (size_t)B * SQ_RANK_COUNTS;
    int rc = q->cand ? 0 : history_excluded(hist, &ex, &eoff, e);
    if (!rc && !(d = sq_ctx_alloc(cx, n * sizeof *d, e)))
        rc = e->code;
    /* the items as ints (they fit: a model has fewer than 2^31) */
    if (!rc && q->cand)
        rc = sq_rank_lists(cx, d, dsc, B, V1, (const int *)q->target, (const int *)q->cand,
                           (const int *)q->coff, e);
    else if (!rc)
        rc = sq_rank_rows(cx, d, dsc, B, V1, (const int *)q->target, q->ok, ex, eoff, e);
    if (!rc)
        rc = sq_ctx_download(cx, q->counts, d, n * sizeof *d, e);
    q->done = !rc;
    sq_ctx_free(cx, d);
    free(ex);
    free(eoff);
    return rc;
}

int sq_scores_out(const sq_ctx *cx, const float *dsc, const sq_batch *hist, int V1,
                  float *scores, sq_err *e)
{
    const sq_topk_req *q = hist->topk;
    if (q && q->target && cx->backend == SQ_BACKEND_CUDA)
        return device_ranks(cx, dsc, hist, V1, e);
    if (q && !q->target && cx->backend == SQ_BACKEND_CUDA && q->K >= 1 &&
        q->K <= SQ_TOPK_GPU_MAX)
        return device_topk(cx, dsc, hist, V1, e);
    return sq_ctx_download(cx, scores, dsc, (size_t)hist->B * V1 * sizeof *scores, e);
}

static int score_states(const sq_sasrec *m, const float *h, int B, float *scores, sq_err *e)
{
    return sq_score_states(&m->cx, h, B, m->p.item_emb, is_bert(&m->cfg) ? m->p.out_b : NULL,
                           m->cfg.dim, (int)m->cfg.n_items + 1, scores, e);
}

int sq_states_parallel(sq_states_fn states, const void *model, const sq_batch *hist,
                       int threads, float *hs, sq_err *e)
{
    int nt = threads < hist->B ? threads : hist->B, rc = 0;
    if (nt < 1)
        nt = 1;
#pragma omp parallel num_threads(nt)
    {
        sq_err te = {0};
        int t = omp_get_thread_num(), n = omp_get_num_threads();
        if (states(model, hist, t, n, hs, &te))
#pragma omp critical(sq_states_parallel_err)
        {
            if (!rc)
                rc = sq_fail(e, te.code, "%s", te.msg);
        }
    }
    return rc;
}

/* Token rows of one scoring forward: enough to fill the rowwise tiles, few
 * enough that its work stays under about 20 MB (17 MB for N = 100, d 64,
 * ffn 256, 2 blocks), which glibc then reuses instead of mapping afresh. */
#define SQ_SCORE_ROWS 1024

/* A work w (*have: allocated) that fits batch pb: the one there is, or a
 * new one as large as both. One work serves every run of a share, as the
 * trainer's serves every batch: a fresh one a run cost more in page
 * faults on its zeroed pages (tens of MB of attention rows) than the
 * forward itself. */
static int grow_work(sq_sasrec_work *w, int *have, const sq_sasrec *m, const sq_packed *pb,
                     size_t att, sq_err *e)
{
    if (*have && pb->B <= w->cap.B && pb->T <= w->cap.T && att <= w->cap.att)
        return 0;
    sq_sasrec_cap cap = {.B = pb->B, .T = pb->T, .n = pb->B, .att = att, .K = 0, .train = 0};
    if (*have) {
        cap.B = cap.B > w->cap.B ? cap.B : w->cap.B;
        cap.n = cap.B;
        cap.T = cap.T > w->cap.T ? cap.T : w->cap.T;
        cap.att = cap.att > w->cap.att ? cap.att : w->cap.att;
        sq_sasrec_work_free(w);
        *have = 0;
    }
    if (sq_sasrec_work_alloc(w, m, &cap, e))
        return e->code;
    *have = 1;
    return 0;
}

/* The states of histories [0, hist->B) into rows of hs on the CPU: runs
 * of consecutive histories of at most SQ_SCORE_ROWS token rows (or one
 * history), each one forward on cx's threads with cx.rowwise set (BATCH
 * INVARIANCE above: how the runs are cut changes no bit), all in one work. */
static int rowwise_states(const sq_sasrec *m, const sq_batch *hist, float *hs, sq_err *e)
{
    sq_sasrec one = *m;
    one.cx.rowwise = 1;
    const sq_sasrec_config *c = &one.cfg;
    uint32_t keep = (uint32_t)c->max_len - (is_bert(c) ? 1 : 0);
    int C = c->dim, rc = 0, have = 0;
    sq_sasrec_work w;
    for (int b0 = 0, b1; b0 < hist->B && !rc; b0 = b1) {
        size_t rows = 0;
        for (b1 = b0; b1 < hist->B; b1++) {
            size_t len = (hist->len[b1] < keep ? hist->len[b1] : keep) + 1;
            if (b1 > b0 && rows + len > SQ_SCORE_ROWS)
                break;
            rows += len;
        }
        sq_batch run = {hist->items, hist->off + b0, hist->len + b0, b1 - b0, NULL, NULL};
        sq_packed pb;
        int *ints = NULL;
        size_t att;
        if ((rc = sq_sasrec_scoring_input(c, &run, &pb, &ints, &att, e)) != 0)
            break;
        if ((rc = grow_work(&w, &have, &one, &pb, att, e)) == 0) {
            /* the last block on the scored rows alone (same bits) */
            const int *at = NULL; /* where the states are: rows [0, B), or pb.rows */
            if (sq_sasrec_forward_rows(&one, &w, &pb, pb.rows, pb.B) != 0) {
                sq_sasrec_forward(&one, &w, &pb, 0, 0, 0);
                at = pb.rows;
            }
            float *h = hs + (size_t)b0 * C;
            if (is_bert(c)) {
                sq_sasrec_head(&one, &w, at, pb.B);
                sq_copy(&one.cx, h, w.hln, (size_t)pb.B * C);
            } else {
                sq_gather_rows(&one.cx, h, w.out, at, pb.B, C);
            }
        }
        free(ints);
    }
    if (have)
        sq_sasrec_work_free(&w);
    return rc;
}

/* sq_states_fn: thread t of n takes histories [B t / n, B (t + 1) / n). */
static int rowwise_share(const void *model, const sq_batch *hist, int t, int n, float *hs,
                         sq_err *e)
{
    const sq_sasrec *one = model;
    int lo = (int)((long)hist->B * t / n), hi = (int)((long)hist->B * (t + 1) / n);
    if (lo >= hi)
        return 0;
    sq_batch part = {hist->items, hist->off + lo, hist->len + lo, hi - lo, NULL, NULL};
    return rowwise_states(one, &part, hs + (size_t)lo * one->cfg.dim, e);
}

/* On a GPU: the histories as one packed batch, one forward on the device
 * with the context's GEMMs batch-invariant (sq_ctx_invariant, set by the
 * caller: cuBLAS's kernels follow the shape, k_gemm.cu's do not; the other
 * ops work on a row or a sequence), the states and scores on the device,
 * the scores down once. */
static int device_scores(const sq_sasrec *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    const sq_sasrec_config *c = &m->cfg;
    int B = hist->B, C = c->dim, V1 = (int)c->n_items + 1, have = 0;
    sq_packed pb;
    int *ints = NULL;
    size_t att;
    sq_sasrec_work w;
    float *dsc = NULL, *hs = NULL;
    int rc = sq_sasrec_scoring_input(c, hist, &pb, &ints, &att, e);
    if (!rc && (sq_packed_stage(cx, &pb, e) || grow_work(&w, &have, m, &pb, att, e)))
        rc = e->code;
    if (!rc && (!(dsc = sq_ctx_alloc(cx, (size_t)B * V1 * sizeof *dsc, e)) ||
                !(hs = sq_ctx_alloc(cx, (size_t)B * C * sizeof *hs, e))))
        rc = e->code;
    if (!rc) {
        sq_sasrec_forward(m, &w, &pb, 0, 0, 0);
        if (is_bert(c)) {
            sq_sasrec_head(m, &w, pb.rows, B);
            sq_copy(cx, hs, w.hln, (size_t)B * C);
        } else {
            sq_gather_rows(cx, hs, w.out, pb.rows, B, C);
        }
        rc = score_states(m, hs, B, dsc, e);
    }
    if (!rc)
        rc = sq_scores_out(cx, dsc, hist, V1, scores, e);
    sq_ctx_free(cx, hs);
    sq_ctx_free(cx, dsc);
    if (have)
        sq_sasrec_work_free(&w);
    free(ints);
    return rc;
}

int sq_sasrec_scores(const sq_sasrec *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_ctx *cx = &m->cx;
    int B = hist->B, C = m->cfg.dim;
    if (B <= 0)
        return 0;
    if (cx->backend != SQ_BACKEND_CPU) {
        sq_ctx_invariant(cx, 1); /* BATCH INVARIANCE on the device too */
        int rc = device_scores(m, hist, scores, e);
        sq_ctx_invariant(cx, 0);
        return rc;
    }
    float *hs = sq_ctx_alloc(cx, (size_t)B * C * sizeof *hs, e);
    if (!hs)
        return e->code;
    /* each thread a contiguous share of the histories, its forwards
     * single-threaded: one wake-up of the team a batch, not one an op */
    sq_sasrec one = *m;
    one.cx.threads = 1;
    int rc = sq_states_parallel(rowwise_share, &one, hist, sq_ctx_threads(cx), hs, e);
    if (!rc)
        rc = score_states(m, hs, B, scores, e);
    sq_ctx_free(cx, hs);
    return rc;
}

int sq_sasrec_attention_map(const sq_sasrec *m, const uint32_t *hist, uint32_t len,
                            float **map, int **ids, int **pos, int *n_out, int *n_heads,
                            sq_err *e)
{
    const sq_sasrec_config *c = &m->cfg;
    *map = NULL;
    *ids = *pos = NULL;
    uint32_t off0 = 0;
    sq_batch hb = {.items = hist, .off = &off0, .len = &len, .B = 1};
    sq_packed pb;
    int *ints = NULL;
    size_t att;
    if (sq_sasrec_scoring_input(c, &hb, &pb, &ints, &att, e))
        return e->code;
    int n = pb.T, L = c->n_layers, H = c->n_heads;
    sq_sasrec_cap cap = {.B = 1, .T = n, .n = 1, .att = att, .K = 0, .train = 0};
    sq_sasrec_work w;
    if (sq_sasrec_work_alloc(&w, m, &cap, e)) {
        free(ints);
        return e->code;
    }
    size_t nn = (size_t)n * n;
    *map = malloc((size_t)L * H * nn * sizeof **map);
    *ids = malloc((size_t)n * sizeof **ids);
    *pos = malloc((size_t)n * sizeof **pos);
    int rc = 0;
    if (!*map || !*ids || !*pos) {
        rc = sq_fail(e, SQ_EX_OSERR, "out of memory for the attention map");
        goto done;
    }
    memcpy(*ids, pb.ids, (size_t)n * sizeof **ids);
    memcpy(*pos, pb.pos, (size_t)n * sizeof **pos);
    sq_sasrec_forward(m, &w, &pb, 0, 0, 0);
    size_t sTC = (size_t)w.cap.T * c->dim;
    int heads = H;
    for (int l = 0; l < L && !rc; l++) {
        sq_mix_args a;
        sq_sasrec_mix_args(m, &w, &pb, NULL, l, &a);
        /* the layer's query input: pre-LN LN1(x), post-LN x */
        const float *qin = sq_sasrec_post_ln(c) ? w.x + l * sTC : w.ln1 + l * sTC;
        int h = a.env->self->map(&a, qin, *map + (size_t)l * heads * nn, e);
        if (h < 0)
            rc = e->code;
        else if (l == 0 && h != heads) /* fewer maps than heads (mixing: one) */
            heads = h;
    }
    *n_out = n;
    *n_heads = heads;
done:
    if (rc) {
        free(*map);
        free(*ids);
        free(*pos);
        *map = NULL;
        *ids = *pos = NULL;
    }
    sq_sasrec_work_free(&w);
    free(ints);
    return rc;
}

static int view_scores(sq_model *mm, const sq_batch *b, float *scores, sq_err *e)
{
    return sq_sasrec_scores(mm->impl, b, scores, e);
}

static int view_attention(const sq_model *mm, const uint32_t *hist, uint32_t len,
                          sq_attn_map *a, sq_err *e)
{
    const sq_sasrec *m = mm->impl;
    const sq_sasrec_config *c = &m->cfg;
    const sq_mixer *mx = sq_mixer_get(c->attn.kind);
    memset(a, 0, sizeof *a);
    if (sq_sasrec_attention_map(m, hist, len, &a->map, &a->ids, &a->pos, &a->n, &a->heads, e))
        return e->code;
    a->layers = c->n_layers;
    a->mask_id = is_bert(c) ? sq_mask_id(c) : -1;
    a->signed_weights = mx->signed_map;
    snprintf(a->what, sizeof a->what, "%s --attn %s%s%s", is_bert(c) ? "bert4rec" : "sasrec",
             mx->name, is_bert(c) && c->causal ? " --causal" : "",
             c->block == SQ_BLOCK_RECBOLE ? " --block recbole" : "");
    return 0;
}

void sq_sasrec_model_view(sq_model *out, const sq_sasrec *m)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", is_bert(&m->cfg) ? "bert4rec" : "sasrec");
    out->n_items = m->cfg.n_items;
    out->impl = (void *)m;
    out->scores = view_scores;
    out->attention = view_attention;
}

const sq_sasrec *sq_sasrec_of(const sq_model *m)
{
    if (m->scores != view_scores || !m->impl)
        return NULL;
    return m->impl;
}

static void owned_free(sq_model *mm)
{
    sq_sasrec *m = mm->impl;
    if (m) {
        sq_sasrec_free(m);
        free(m);
    }
    mm->impl = NULL;
}

int sq_sasrec_load_as(sq_model *mm, sq_modelfile *mf, const sq_sasrec_config *c,
                      const sq_ctx *cx, sq_err *e)
{
    char name[32] = "model";
    sq_modelfile_get(mf, "model", name, sizeof name);
    sq_sasrec *m = malloc(sizeof *m);
    if (!m)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (sq_sasrec_alloc_on(m, c, cx, e) || sq_sasrec_get_tensors(m, mf, name, e)) {
        sq_sasrec_free(m);
        free(m);
        return e->code;
    }
    mm->n_items = c->n_items;
    mm->impl = m;
    mm->scores = view_scores;
    mm->attention = view_attention;
    mm->free_impl = owned_free;
    return 0;
}

static int load(sq_model *mm, sq_modelfile *mf, const sq_ctx *cx, sq_err *e)
{
    sq_sasrec_config c;
    char name[32] = "model";
    sq_modelfile_get(mf, "model", name, sizeof name);
    if (sq_sasrec_config_read(&c, mf, name, e))
        return e->code;
    return sq_sasrec_load_as(mm, mf, &c, cx, e);
}

/* ------------------------------------------------------------------------ */
/* The training step of the generic trainer (model.h)                       */

typedef struct {
    sq_sasrec model, grads;
} net_impl;

typedef struct {
    sq_sasrec_work w;
} net_work;

static const sq_opt *kind_opts(int i)
{
    static const sq_opt none[] = {{0}};
    const sq_mixer *m = sq_mixer_get(i);
    return !m ? NULL : m->opts ? m->opts : none;
}

static int sasrec_config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    return sq_sasrec_config_from(cfg, SQ_BACKBONE_SASREC, given, d->n_items, d->padded_len, NULL, e);
}

static int bert_config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    return sq_sasrec_config_from(cfg, SQ_BACKBONE_BERT4REC, given, d->n_items, d->padded_len, NULL,
                                 e);
}

static int config_check(const void *cfg, sq_err *e)
{
    return sq_sasrec_config_check(cfg, e);
}

static int config_write(const void *cfg, sq_modelfile *mf, sq_err *e)
{
    return sq_sasrec_config_write(cfg, mf, e);
}

static int config_read(void *cfg, const sq_modelfile *mf, const char *path, sq_err *e)
{
    return sq_sasrec_config_read(cfg, mf, path, e);
}

static int check_step(const void *cfg, const sq_step_opts *o, sq_err *e)
{
    if (is_bert(cfg) && o->loss == SQ_LOSS_BCE)
        return sq_fail(e, SQ_EX_USAGE, "--loss bce is for --model sasrec (BERT4Rec's cloze "
                       "task uses ce, sampled-softmax or gbce)");
    return 0;
}

static int gpu_check(const void *cfg, sq_err *e)
{
    const sq_sasrec_config *c = cfg;
    const sq_mixer *mx = sq_mixer_get(c->attn.kind);
    if (mx && mx->gpu)
        return 0;
    char kinds[512] = ""; /* the table's kinds with kernels, named */
    size_t at = 0;
    for (int k = 0; k < sq_mixer_count() && at < sizeof kinds; k++)
        if (sq_mixer_get(k)->gpu)
            at += (size_t)snprintf(kinds + at, sizeof kinds - at, "%s%s", at ? ", " : "",
                                   sq_mixer_get(k)->name);
    return sq_fail(e, SQ_EX_USAGE, "--device cuda: --attn %s runs on the CPU only (on the GPU: "
                   "%s)", mx ? mx->name : "?", kinds);
}

static int net_alloc(sq_net *n, const void *cfg, const sq_ctx *cx, sq_err *e)
{
    net_impl *p = calloc(1, sizeof *p);
    if (!p)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    n->impl = p;
    if (sq_sasrec_alloc_on(&p->model, cfg, cx, e) || sq_sasrec_alloc_on(&p->grads, cfg, cx, e))
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
        sq_sasrec_free(&p->grads);
        sq_sasrec_free(&p->model);
        free(p);
    }
    memset(n, 0, sizeof *n);
}

static void net_init(sq_net *n, uint64_t seed)
{
    sq_sasrec_init_weights(&((net_impl *)n->impl)->model, seed);
}

static void share_params(sq_net *n, float *params)
{
    sq_sasrec_borrow(&((net_impl *)n->impl)->model, params);
    n->params = params;
}

/* A sampled loss writes the item table's gradient at the inputs (the
 * embedding; BERT4Rec's mask token among them), the targets and their
 * negatives (the tied output) only. (BERT4Rec's output bias stays dense.) */
static size_t grad_rows(const sq_net *n, const sq_packed *b, const sq_step_opts *o,
                        sq_row_marks *m, int *tensor)
{
    (void)n;
    if (o->loss == SQ_LOSS_CE)
        return 0;
    *tensor = SQ_T_item_emb;
    for (int i = 0; i < b->T; i++)
        sq_row_mark(m, (uint32_t)b->ids[i]);
    for (int i = 0; i < b->n; i++)
        sq_row_mark(m, (uint32_t)b->targets[i]);
    /* --neg-share batch: every entry's row is entry 0's */
    size_t nk = (b->neg_share == SQ_SHARE_BATCH ? 1 : (size_t)b->n) * (size_t)b->K;
    for (size_t i = 0; b->neg && i < nk; i++)
        sq_row_mark(m, (uint32_t)b->neg[i]);
    return (size_t)b->T + (size_t)b->n + (b->neg ? nk : 0);
}

/* One tensor of a model file into the net's tensor i: rows [0, keep) in
 * place, the file's rows after them `grow` rows further down. */
static int copy_grown(sq_net *n, int i, const sq_tensor *t, uint64_t keep, uint64_t grow,
                      sq_err *e)
{
    const sq_tensor_set *s = n->ts;
    size_t row = s->size[i] / s->shape[i][0];
    float *dst = n->params + s->off[i];
    const float *src = t->data;
    if (sq_ctx_upload(n->cx, dst, src, keep * row * sizeof(float), e))
        return e->code;
    uint64_t rest = t->shape[0] - keep;
    if (rest && sq_ctx_upload(n->cx, dst + (keep + grow) * row, src + keep * row,
                              rest * row * sizeof(float), e))
        return e->code;
    return 0;
}

/* --init (model.h): the tensors whose first dimension is the item table
 * ('W': n_items + 1 rows, + 1 for BERT4Rec's mask token) or the items'
 * output bias ('V': n_items + 1) grow by the new items: rows 0..old n_items
 * stay, the mask row moves to the new last row, new items keep their
 * seeded init. */
static int init_from(sq_net *n, const sq_modelfile *mf, const char *path, sq_err *e)
{
    const sq_sasrec_config *c = n->cfg;
    const sq_tensor_set *s = n->ts;
    char buf[32] = "";
    uint32_t old = 0;
    if (!sq_modelfile_get(mf, "n_items", buf, sizeof buf) ||
        sscanf(buf, "%" SCNu32, &old) != 1 || old > c->n_items)
        return sq_fail(e, SQ_EX_DATA, "%s: n_items '%s' does not fit the stream's %" PRIu32,
                       path, buf, c->n_items);
    for (int i = 0; i < s->n; i++) {
        if (!s->size[i])
            continue;
        const sq_tensor_desc *d = s->desc[i];
        const sq_tensor *t = sq_modelfile_find(mf, d->name);
        int items = d->shape[0] == 'W' || d->shape[0] == 'V';
        uint64_t grow = items ? (uint64_t)c->n_items - old : 0;
        int ok = t && t->dtype == SQ_F32 && t->ndim == s->nd[i] &&
                 t->shape[0] + grow == s->shape[i][0];
        for (int k = 1; ok && k < s->nd[i]; k++)
            ok = t->shape[k] == s->shape[i][k];
        if (!ok)
            return sq_fail(e, SQ_EX_DATA, "%s: tensor %s is missing or does not fit the "
                           "model's options", path, d->name);
        uint64_t keep = items && (uint64_t)old + 1 < t->shape[0] ? (uint64_t)old + 1
                                                                  : t->shape[0];
        if (copy_grown(n, i, t, keep, grow, e))
            return e->code;
    }
    return 0;
}

static int batcher(sq_batcher *bt, const sq_seqs *s, const void *cfg, const sq_step_opts *o,
                   sq_err *e)
{
    const sq_sasrec_config *c = cfg;
    if (is_bert(c) ? sq_batcher_init_cloze(bt, s, o->target, c->max_len, o->batch,
                                           c->mask_prob, sq_mask_id(c), o->seed, e)
                   : sq_batcher_init_stride(bt, s, o->target, o->stride, c->max_len, o->batch,
                                            sq_loss_bce_negatives(o), o->seed, e))
        return e->code;
    return sq_loss_batcher_negatives(bt, o, e);
}

static int work_alloc(const sq_net *n, const sq_batcher *bt, void **work, sq_err *e)
{
    const net_impl *p = n->impl;
    net_work *w = calloc(1, sizeof *w);
    if (!w)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    *work = w;
    sq_sasrec_cap cap = {.B = bt->batch * (bt->views > 1 ? bt->views : 1), .T = bt->cap_T,
                         .n = bt->cap_T, .att = bt->cap_att, .K = bt->K, .train = 1};
    return sq_sasrec_work_alloc(&w->w, &p->model, &cap, e);
}

static void work_free(void *work)
{
    net_work *w = work;
    if (w) {
        sq_sasrec_work_free(&w->w);
        free(w);
    }
}

static double step(sq_net *n, void *work, const sq_packed *b, const sq_step_opts *o,
                   uint64_t t, int *count)
{
    net_impl *p = n->impl;
    sq_sasrec_work *w = &((net_work *)work)->w;
    sq_sasrec_forward(&p->model, w, b, 1, o->seed, t);
    double loss = sq_sasrec_loss(&p->model, w, b, sq_loss_step(o), &p->grads, count);
    if (loss == loss && loss - loss == 0) /* finite: the trainer stops otherwise */
        sq_sasrec_backward(&p->model, w, b, &p->grads);
    return loss;
}

sq_sasrec *sq_sasrec_net_model(const sq_net *n)
{
    return &((net_impl *)n->impl)->model;
}

sq_sasrec *sq_sasrec_net_grads(const sq_net *n)
{
    return &((net_impl *)n->impl)->grads;
}

sq_sasrec_work *sq_sasrec_net_work(void *work)
{
    return &((net_work *)work)->w;
}

static void view(sq_model *out, const sq_net *n)
{
    sq_sasrec_model_view(out, &((const net_impl *)n->impl)->model);
}

/* ------------------------------------------------------------------------ */
/* The net of a model on the backbone (sasrec.h sq_backbone_net)            */

int sq_backbone_net_alloc(sq_net *n, const void *cfg, size_t cfg_size, size_t extra_size,
                          const sq_ctx *cx, sq_err *e)
{
    sq_backbone_net *p = calloc(1, sizeof *p);
    if (!p)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    n->impl = p;
    p->cfg = malloc(cfg_size);
    p->extra = extra_size ? calloc(1, extra_size) : NULL;
    if (!p->cfg || (extra_size && !p->extra))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    memcpy(p->cfg, cfg, cfg_size);
    if (net_alloc(&p->inner, p->cfg, cx, e)) /* the config's first member */
        return e->code;
    n->cx = p->inner.cx;
    n->ts = p->inner.ts;
    n->params = p->inner.params;
    n->grads = p->inner.grads;
    n->cfg = p->cfg;
    return 0;
}

void sq_backbone_net_free(sq_net *n)
{
    sq_backbone_net *p = n->impl;
    if (p) {
        if (p->inner.impl)
            net_free(&p->inner);
        free(p->extra);
        free(p->cfg);
        free(p);
    }
    memset(n, 0, sizeof *n);
}

void sq_backbone_net_init(sq_net *n, uint64_t seed)
{
    net_init(&((sq_backbone_net *)n->impl)->inner, seed);
}

int sq_backbone_init_from(sq_net *n, const sq_modelfile *mf, const char *path, sq_err *e)
{
    return init_from(&((sq_backbone_net *)n->impl)->inner, mf, path, e);
}

#define TRANSFORMER(var, kname, ksummary, kconfig, kopts)                           \
    const sq_model_def var = {                                                      \
        .name = kname, .summary = ksummary, .opts = kopts, .more_opts = kind_opts,  \
        .cfg_size = sizeof(sq_sasrec_config), .config = kconfig,                    \
        .config_check = config_check,                                               \
        .config_write = config_write, .config_read = config_read, .load = load,     \
        .check_step = check_step, .net_alloc = net_alloc, .net_free = net_free,     \
        .net_init = net_init, .init_from = init_from, .batcher = batcher,           \
        .work_alloc = work_alloc,                                                   \
        .work_free = work_free, .step = step, .view = view, .micro_batches = 1,     \
        .share_params = share_params, .grad_rows = grad_rows,                       \
        .gpu_check = gpu_check, .graphs = 1,                                        \
    };

TRANSFORMER(sq_model_sasrec, "sasrec", "SASRec: causal, next item (the default)",
            sasrec_config, sasrec_opts)
TRANSFORMER(sq_model_bert4rec, "bert4rec", "BERT4Rec: bidirectional, cloze task",
            bert_config, bert_opts)
