/* sasrec.c - SASRec and BERT4Rec forward, loss and backward on the packed
 * ops, with every --attn mixer (the models and their conventions:
 * sasrec.h).
 *
 * Written over `real` and compiled twice: as float here and as double by
 * sasrec_f64.c (see real.h); the config, tensor table, model-file, scoring
 * and attention-map glue exist once, in the float build. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "sasrec.h"
#include "attn_linear.h"
#include "attn_pos.h"
#include "ops.h"
#include "real.h"
#include "rng.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_INIT 0x494e495400000000ull /* "INIT" */

/* Dropout sites: 0 for the embedding, then three per block. */
#define SITE_EMB 0
#define SITE(l, which) (1 + 3 * (uint64_t)(l) + (which))

/* The tensor table (sasrec.h): indices, in storage order. */
enum {
    T_ITEM, T_POS, T_WQ, T_WK, T_WV, T_WO, T_W1, T_W2,
    T_PA_R, T_FPA_R1, T_FPA_R2, T_MIX_W1, T_MIX_W2, T_HEAD_W,
    T_BQ, T_BK, T_BV, T_BO, T_B1, T_B2,
    T_LN1W, T_LN1B, T_LN2W, T_LN2B, T_LNFW, T_LNFB,
    T_MIX_B1, T_MIX_B2, T_EMBLNW, T_EMBLNB, T_HEAD_B, T_HEADLNW, T_HEADLNB, T_OUT_B,
    T_COUNT
};

/* Kind classes (sasrec.h: ATTENTION KINDS). */
static int uses_qkv(int a) { return a >= SQ_AK_SOFTMAX && a <= SQ_AK_HYDRA; }
static int uses_v(int a) { return a != SQ_AK_MIXING; }
static int is_bert(const sq_sasrec_config *c) { return c->backbone == SQ_BACKBONE_BERT4REC; }

static sq_lattn_kind lattn_kind(const sq_sasrec_config *c)
{
    switch (c->attn) {
    case SQ_AK_LINREC:
        return c->linrec_scale == SQ_LINREC_PAPER ? SQ_LATTN_LINREC_PAPER : SQ_LATTN_LINREC;
    case SQ_AK_LINEAR:
        return SQ_LATTN_LINEAR;
    case SQ_AK_EFFICIENT:
        return SQ_LATTN_EFFICIENT;
    default:
        return SQ_LATTN_HYDRA;
    }
}

/* attn_pos.h's number of a fixed pattern. */
static int fixed_kind(int a)
{
    return a == SQ_AK_LINEAR_ANNEAL ? SQ_ATTN_LINEAR_ANNEAL
         : a == SQ_AK_EXP_ANNEAL ? SQ_ATTN_EXP_ANNEAL : SQ_ATTN_AVERAGE;
}

/* ------------------------------------------------------------------------ */
/* Precision-free parts (float build only).                                 */

#if !SQ_REAL_IS_F64

static const char *const tensor_names[SQ_SASREC_NT] = {
    "item_emb", "pos_emb", "wq", "wk", "wv", "wo", "w1", "w2",
    "pa_r", "fpa_r1", "fpa_r2", "mix_w1", "mix_w2", "head_w",
    "bq", "bk", "bv", "bo", "b1", "b2",
    "ln1_w", "ln1_b", "ln2_w", "ln2_b", "lnf_w", "lnf_b",
    "mix_b1", "mix_b2", "embln_w", "embln_b", "head_b", "headln_w", "headln_b", "out_b",
};
_Static_assert((int)T_COUNT == (int)SQ_SASREC_NT, "tensor table");
_Static_assert((int)T_HEAD_W + 1 == (int)SQ_SASREC_N_DECAY, "decay group");

static const char *const kind_names[SQ_AK_N] = {
    "softmax", "linrec", "linear", "efficient", "hydra", "positional", "fpositional",
    "average", "linear-anneal", "exp-anneal", "mixing",
};

const char *sq_attn_kind_name(int kind)
{
    return kind >= 0 && kind < SQ_AK_N ? kind_names[kind] : NULL;
}

int sq_attn_kind_parse(const char *s)
{
    for (int k = 0; k < SQ_AK_N; k++)
        if (s && strcmp(s, kind_names[k]) == 0)
            return k;
    return -1;
}

const char *sq_backbone_name(int backbone)
{
    return backbone == SQ_BACKBONE_SASREC ? "sasrec"
         : backbone == SQ_BACKBONE_BERT4REC ? "bert4rec" : NULL;
}

int sq_backbone_parse(const char *s)
{
    if (s && strcmp(s, "sasrec") == 0)
        return SQ_BACKBONE_SASREC;
    if (s && strcmp(s, "bert4rec") == 0)
        return SQ_BACKBONE_BERT4REC;
    return -1;
}

const char *sq_sasrec_tensor_name(int i)
{
    return i >= 0 && i < SQ_SASREC_NT ? tensor_names[i] : NULL;
}

/* s = (d0, d1, d2, d3)[0..nd); an unused tensor (use == 0) is one
 * dimension of 0. */
static int dims(uint64_t s[4], int use, int nd, uint64_t d0, uint64_t d1, uint64_t d2,
                uint64_t d3)
{
    s[0] = use ? d0 : 0;
    s[1] = d1;
    s[2] = d2;
    s[3] = d3;
    return use ? nd : 1;
}

int sq_sasrec_tensor_shape(const sq_sasrec_config *c, int i, uint64_t s[4])
{
    uint64_t L = (uint64_t)c->n_layers, C = (uint64_t)c->dim, F = (uint64_t)c->ffn;
    uint64_t N = (uint64_t)c->max_len, H = (uint64_t)c->n_heads, k = (uint64_t)c->rank;
    uint64_t V1 = (uint64_t)c->n_items + 1;
    int a = c->attn, bert = is_bert(c), qkv = uses_qkv(a), mix = a == SQ_AK_MIXING;
    switch (i) {
    case T_ITEM: return dims(s, 1, 2, V1 + (bert ? 1 : 0), C, 0, 0);
    case T_POS: return dims(s, 1, 2, N, C, 0, 0);
    case T_WQ: case T_WK: case T_WO: return dims(s, qkv, 3, L, C, C, 0);
    case T_WV: return dims(s, uses_v(a), 3, L, C, C, 0);
    case T_W1: return dims(s, 1, 3, L, F, C, 0);
    case T_W2: return dims(s, 1, 3, L, C, F, 0);
    case T_PA_R: return dims(s, a == SQ_AK_POSITIONAL, 4, L, H, N, N);
    case T_FPA_R1: case T_FPA_R2: return dims(s, a == SQ_AK_FPOSITIONAL, 4, L, H, N, k);
    case T_MIX_W1: case T_MIX_W2: return dims(s, mix, 3, L, N, N, 0);
    case T_HEAD_W: return dims(s, bert, 2, C, C, 0, 0);
    case T_BQ: case T_BK: case T_BO: return dims(s, qkv, 2, L, C, 0, 0);
    case T_BV: return dims(s, uses_v(a), 2, L, C, 0, 0);
    case T_B1: return dims(s, 1, 2, L, F, 0, 0);
    case T_LNFW: case T_LNFB: return dims(s, !bert, 1, C, 0, 0, 0);
    case T_MIX_B1: case T_MIX_B2: return dims(s, mix, 2, L, N, 0, 0);
    case T_EMBLNW: case T_EMBLNB: case T_HEAD_B: case T_HEADLNW: case T_HEADLNB:
        return dims(s, bert, 1, C, 0, 0, 0);
    case T_OUT_B: return dims(s, bert, 1, V1, 0, 0, 0);
    default: return dims(s, 1, 2, L, C, 0, 0); /* b2, the block LayerNorms */
    }
}

size_t sq_sasrec_sizes(const sq_sasrec_config *c, size_t sizes[SQ_SASREC_NT])
{
    size_t total = 0;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(c, i, s);
        size_t n = 1;
        for (int d = 0; d < nd; d++)
            n *= (size_t)s[d];
        sizes[i] = n;
        total += n;
    }
    return total;
}

int sq_sasrec_config_check(const sq_sasrec_config *c, sq_err *e)
{
    if (c->backbone != SQ_BACKBONE_SASREC && c->backbone != SQ_BACKBONE_BERT4REC)
        return sq_fail(e, SQ_EX_USAGE, "unknown backbone %d", c->backbone);
    if (c->attn < 0 || c->attn >= SQ_AK_N)
        return sq_fail(e, SQ_EX_USAGE, "unknown attention kind %d", c->attn);
    if (c->n_items < 1 || c->n_items > (1u << 30))
        return sq_fail(e, SQ_EX_USAGE, "n_items %" PRIu32 " out of range", c->n_items);
    if (c->n_layers < 1 || c->n_layers > 64)
        return sq_fail(e, SQ_EX_USAGE, "--layers must be in 1..64");
    if (c->dim < 1 || c->dim > 8192)
        return sq_fail(e, SQ_EX_USAGE, "--dim must be in 1..8192");
    if (c->n_heads < 1 || c->dim % c->n_heads)
        return sq_fail(e, SQ_EX_USAGE, "--heads must divide --dim (%d)", c->dim);
    if (c->ffn < 1 || c->ffn > 65536)
        return sq_fail(e, SQ_EX_USAGE, "--ffn must be in 1..65536");
    if (c->max_len < 1 || c->max_len > 65536)
        return sq_fail(e, SQ_EX_USAGE, "--max-len must be in 1..65536");
    if (!(c->dropout >= 0 && c->dropout < 1))
        return sq_fail(e, SQ_EX_USAGE, "--dropout must be in [0, 1)");
    if (!(c->ln_eps > 0))
        return sq_fail(e, SQ_EX_USAGE, "ln_eps must be positive");
    if (c->causal != 0 && c->causal != 1)
        return sq_fail(e, SQ_EX_USAGE, "causal must be 0 or 1");
    if (c->attn == SQ_AK_LINREC && c->linrec_scale != SQ_LINREC_CODE &&
        c->linrec_scale != SQ_LINREC_PAPER)
        return sq_fail(e, SQ_EX_USAGE, "--linrec-scale must be paper or code");
    if (c->attn == SQ_AK_FPOSITIONAL && (c->rank < 1 || c->rank > 65536))
        return sq_fail(e, SQ_EX_USAGE, "--rank must be in 1..65536");
    if (c->attn == SQ_AK_EXP_ANNEAL && !(c->decay > 0 && c->decay <= 1))
        return sq_fail(e, SQ_EX_USAGE, "--decay must be in (0, 1]");
    /* the embedding table must stay addressable with int row indices */
    if ((uint64_t)(c->n_items + 2) * (uint64_t)c->dim > (uint64_t)1 << 40)
        return sq_fail(e, SQ_EX_USAGE, "item table too large");
    /* positional matrices: L H N^2 (or L H N k) reals */
    uint64_t N = (uint64_t)c->max_len, per = 0;
    if (c->attn == SQ_AK_POSITIONAL)
        per = (uint64_t)c->n_heads * N * N;
    else if (c->attn == SQ_AK_FPOSITIONAL)
        per = (uint64_t)c->n_heads * N * (N + 2 * (uint64_t)c->rank);
    else if (c->attn == SQ_AK_MIXING)
        per = 2 * N * N;
    if (per * (uint64_t)c->n_layers > (uint64_t)1 << 34)
        return sq_fail(e, SQ_EX_USAGE, "--max-len %d is too long for --attn %s", c->max_len,
                       kind_names[c->attn]);
    return 0;
}

int sq_sasrec_config_write(const sq_sasrec_config *c, sq_modelfile *mf, sq_err *e)
{
    if (sq_modelfile_set(mf, e, "layers", "%d", c->n_layers) ||
        sq_modelfile_set(mf, e, "heads", "%d", c->n_heads) ||
        sq_modelfile_set(mf, e, "dim", "%d", c->dim) ||
        sq_modelfile_set(mf, e, "ffn", "%d", c->ffn) ||
        sq_modelfile_set(mf, e, "max_len", "%d", c->max_len) ||
        sq_modelfile_set(mf, e, "dropout", "%.17g", c->dropout) ||
        sq_modelfile_set(mf, e, "ln_eps", "%.17g", c->ln_eps) ||
        sq_modelfile_set(mf, e, "attn", "%s", kind_names[c->attn]) ||
        (c->attn == SQ_AK_LINREC &&
         sq_modelfile_set(mf, e, "linrec_scale", "%s",
                          c->linrec_scale == SQ_LINREC_PAPER ? "paper" : "code")) ||
        (c->attn == SQ_AK_FPOSITIONAL && sq_modelfile_set(mf, e, "rank", "%d", c->rank)) ||
        (c->attn == SQ_AK_EXP_ANNEAL && sq_modelfile_set(mf, e, "decay", "%.17g", c->decay)) ||
        (is_bert(c) && sq_modelfile_set(mf, e, "causal", "%d", c->causal)))
        return e->code;
    return 0;
}

static int get_long(const sq_modelfile *mf, const char *path, const char *key,
                    long lo, long hi, long *out, sq_err *e)
{
    char buf[64], *end;
    if (!sq_modelfile_get(mf, key, buf, sizeof buf))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no %s", path, key);
    long v = strtol(buf, &end, 10);
    if (end == buf || *end || v < lo || v > hi)
        return sq_fail(e, SQ_EX_DATA, "%s: bad %s=%s", path, key, buf);
    *out = v;
    return 0;
}

static int get_double(const sq_modelfile *mf, const char *path, const char *key,
                      double *out, sq_err *e)
{
    char buf[64], *end;
    if (!sq_modelfile_get(mf, key, buf, sizeof buf))
        return sq_fail(e, SQ_EX_DATA, "%s: config has no %s", path, key);
    *out = strtod(buf, &end);
    if (end == buf || *end)
        return sq_fail(e, SQ_EX_DATA, "%s: bad %s=%s", path, key, buf);
    return 0;
}

int sq_sasrec_config_read(sq_sasrec_config *c, const sq_modelfile *mf,
                          const char *path, sq_err *e)
{
    long v[6];
    static const char *keys[6] = {"n_items", "layers", "heads", "dim", "ffn", "max_len"};
    for (int i = 0; i < 6; i++)
        if (get_long(mf, path, keys[i], 1, 1L << 30, &v[i], e))
            return e->code;
    memset(c, 0, sizeof *c);
    c->n_items = (uint32_t)v[0];
    c->n_layers = (int)v[1];
    c->n_heads = (int)v[2];
    c->dim = (int)v[3];
    c->ffn = (int)v[4];
    c->max_len = (int)v[5];
    if (get_double(mf, path, "dropout", &c->dropout, e) ||
        get_double(mf, path, "ln_eps", &c->ln_eps, e))
        return e->code;
    char buf[64];
    if (!sq_modelfile_get(mf, "model", buf, sizeof buf) ||
        (c->backbone = sq_backbone_parse(buf)) < 0)
        return sq_fail(e, SQ_EX_DATA, "%s: config has no model=sasrec or bert4rec", path);
    c->attn = SQ_AK_SOFTMAX; /* files of the first SASRec have no attn key */
    if (sq_modelfile_get(mf, "attn", buf, sizeof buf) &&
        (c->attn = sq_attn_kind_parse(buf)) < 0)
        return sq_fail(e, SQ_EX_DATA, "%s: unknown attn=%s", path, buf);
    long lv;
    if (c->attn == SQ_AK_LINREC) {
        if (!sq_modelfile_get(mf, "linrec_scale", buf, sizeof buf) ||
            (strcmp(buf, "paper") && strcmp(buf, "code")))
            return sq_fail(e, SQ_EX_DATA, "%s: config has no linrec_scale=paper or code", path);
        c->linrec_scale = strcmp(buf, "paper") == 0 ? SQ_LINREC_PAPER : SQ_LINREC_CODE;
    }
    if (c->attn == SQ_AK_FPOSITIONAL) {
        if (get_long(mf, path, "rank", 1, 65536, &lv, e))
            return e->code;
        c->rank = (int)lv;
    }
    if (c->attn == SQ_AK_EXP_ANNEAL && get_double(mf, path, "decay", &c->decay, e))
        return e->code;
    if (is_bert(c)) {
        if (get_long(mf, path, "causal", 0, 1, &lv, e))
            return e->code;
        c->causal = (int)lv;
    }
    sq_err ce = {0};
    if (sq_sasrec_config_check(c, &ce))
        return sq_fail(e, SQ_EX_DATA, "%s: bad config: %s", path, ce.msg);
    return 0;
}

#endif /* !SQ_REAL_IS_F64 */

/* ------------------------------------------------------------------------ */
/* Parameters                                                               */

static void R(point_params)(R(sq_sasrec_params) *p, real *mem, const size_t *sizes)
{
    real **ptrs[SQ_SASREC_NT] = {
        &p->item_emb, &p->pos_emb, &p->wq, &p->wk, &p->wv, &p->wo, &p->w1, &p->w2,
        &p->pa_r, &p->fpa_r1, &p->fpa_r2, &p->mix_w1, &p->mix_w2, &p->head_w,
        &p->bq, &p->bk, &p->bv, &p->bo, &p->b1, &p->b2,
        &p->ln1w, &p->ln1b, &p->ln2w, &p->ln2b, &p->lnfw, &p->lnfb,
        &p->mix_b1, &p->mix_b2, &p->emblnw, &p->emblnb, &p->head_b, &p->headlnw,
        &p->headlnb, &p->out_b,
    };
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        *ptrs[i] = mem;
        mem += sizes[i];
    }
}

int R(sq_sasrec_alloc)(R(sq_sasrec) *m, const sq_sasrec_config *c, sq_err *e)
{
    memset(m, 0, sizeof *m);
    if (sq_sasrec_config_check(c, e))
        return e->code;
    m->cfg = *c;
    m->n = sq_sasrec_sizes(c, m->sizes);
    for (int i = 0; i < SQ_SASREC_N_DECAY; i++)
        m->n_decay += m->sizes[i];
    m->mem = calloc(m->n, sizeof *m->mem);
    if (!m->mem)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for %zu parameters", m->n);
    R(point_params)(&m->p, m->mem, m->sizes);
    return 0;
}

void R(sq_sasrec_free)(R(sq_sasrec) *m)
{
    free(m->mem);
    memset(m, 0, sizeof *m);
}

/* N(0, sd^2) on n reals; trunc: redrawn beyond 2 sd (TF truncated_normal). */
static void R(normal_fill)(sq_rng *r, real *w, size_t n, double sd, int trunc)
{
    for (size_t i = 0; i < n; i++) {
        double z = sq_rng_normal(r);
        while (trunc && (z > 2 || z < -2))
            z = sq_rng_normal(r);
        w[i] = (real)(sd * z);
    }
}

void R(sq_sasrec_init_weights)(R(sq_sasrec) *m, uint64_t seed)
{
    const sq_sasrec_config *c = &m->cfg;
    sq_rng r;
    sq_rng_seed(&r, seed, STREAM_INIT);
    memset(m->mem, 0, m->n * sizeof *m->mem);
    real *mem = m->mem;
    for (int i = 0; i < SQ_SASREC_N_DECAY; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(c, i, s);
        size_t n = m->sizes[i];
        if (i == T_PA_R)
            R(normal_fill)(&r, mem, n, 0.01, 1);
        else if (i == T_FPA_R1 || i == T_FPA_R2)
            R(normal_fill)(&r, mem, n, 0.1 / pow((double)c->rank, 0.25), 1);
        else if (is_bert(c))
            R(normal_fill)(&r, mem, n, 0.02, 0);
        else if (n) /* xavier_normal_ on each [rows, cols] slice */
            R(normal_fill)(&r, mem, n, sqrt(2.0 / (double)(s[nd - 2] + s[nd - 1])), 0);
        mem += n;
    }
    memset(m->p.item_emb, 0, (size_t)c->dim * sizeof *m->mem); /* padding row */
    for (size_t i = 0; i < (size_t)c->n_layers * c->dim; i++) {
        m->p.ln1w[i] = 1;
        m->p.ln2w[i] = 1;
    }
    for (int i = 0; i < c->dim; i++) {
        if (m->sizes[T_LNFW])
            m->p.lnfw[i] = 1;
        if (m->sizes[T_EMBLNW]) {
            m->p.emblnw[i] = 1;
            m->p.headlnw[i] = 1;
        }
    }
}

/* ------------------------------------------------------------------------ */
/* Workspace                                                                */

static size_t align64(size_t n) { return (n + 63) & ~(size_t)63; }

/* Carves the workspace out of base (NULL: only measures); returns bytes. */
static size_t R(carve)(R(sq_sasrec_work) *w, const sq_sasrec_config *c, char *base)
{
    size_t at = 0;
    size_t T = (size_t)w->cap.T, L = (size_t)c->n_layers, C = (size_t)c->dim;
    size_t F = (size_t)c->ffn, TC = T * C, TF = T * F, n = (size_t)w->cap.n;
    size_t V1 = (size_t)c->n_items + 1;
    int a = c->attn, bert = is_bert(c), train = w->cap.train;
    size_t qkv = uses_qkv(a) ? 1 : 0, hv = uses_v(a) ? 1 : 0, sas = bert ? 0 : 1;
    size_t hb = bert ? 1 : 0, tb = train && bert ? 1 : 0;
#define TAKE(ptr, type, count) do { \
        size_t o_ = at; \
        at += align64((size_t)(count) * sizeof(type)); \
        if (base) (ptr) = (type *)(void *)(base + o_); \
    } while (0)
    TAKE(w->emb, real, TC);
    TAKE(w->embn, real, hb * TC);
    TAKE(w->embln_mean, real, hb * T);
    TAKE(w->embln_rstd, real, hb * T);
    TAKE(w->x, real, (L + 1) * TC);
    TAKE(w->ln1, real, L * TC);
    TAKE(w->ln1_mean, real, L * T);
    TAKE(w->ln1_rstd, real, L * T);
    TAKE(w->q, real, qkv * L * TC);
    TAKE(w->k, real, qkv * L * TC);
    TAKE(w->v, real, hv * L * TC);
    TAKE(w->atty, real, qkv * L * TC);
    TAKE(w->proj, real, L * TC);
    TAKE(w->projd, real, L * TC);
    TAKE(w->xmid, real, L * TC);
    TAKE(w->cache, real, L * w->cache_n);
    TAKE(w->scratch, real, w->scratch_n);
    TAKE(w->ln2, real, L * TC);
    TAKE(w->ln2_mean, real, L * T);
    TAKE(w->ln2_rstd, real, L * T);
    TAKE(w->h1, real, L * TF);
    TAKE(w->r, real, L * TF);
    TAKE(w->rd, real, sas * L * TF);
    TAKE(w->h2, real, L * TC);
    TAKE(w->h2d, real, L * TC);
    TAKE(w->out, real, sas * TC);
    TAKE(w->lnf_mean, real, sas * T);
    TAKE(w->lnf_rstd, real, sas * T);
    TAKE(w->hx, real, hb * n * C);
    TAKE(w->hd, real, hb * n * C);
    TAKE(w->hg, real, hb * n * C);
    TAKE(w->hln, real, hb * n * C);
    TAKE(w->hln_mean, real, hb * n);
    TAKE(w->hln_rstd, real, hb * n);
    TAKE(w->haug, real, tb * n * (C + 1));
    TAKE(w->eaug, real, tb * V1 * (C + 1));
    TAKE(w->m_emb, uint8_t, TC);
    TAKE(w->m_att, uint8_t, L * TC);
    TAKE(w->m_ffn1, uint8_t, sas * L * TF);
    TAKE(w->m_ffn2, uint8_t, L * TC);
    if (train) {
        TAKE(w->ce, real, sq_ce_scratch_size(w->ce_chunk, (int)V1, (int)(C + hb)));
        TAKE(w->dout, real, TC);
        TAKE(w->dx, real, TC);
        TAKE(w->dy, real, TC);
        TAKE(w->dxmid, real, TC);
        TAKE(w->dln1, real, TC);
        TAKE(w->dproj, real, TC);
        TAKE(w->datty, real, qkv * TC);
        TAKE(w->dq, real, qkv * TC);
        TAKE(w->dk, real, qkv * TC);
        TAKE(w->dv, real, hv * TC);
        TAKE(w->dh2, real, TC);
        TAKE(w->demb, real, TC);
        TAKE(w->dF1, real, TF);
        TAKE(w->dF2, real, sas * TF);
        TAKE(w->dF3, real, TF);
        TAKE(w->dhaug, real, hb * n * (C + 1));
        TAKE(w->deaug, real, hb * V1 * (C + 1));
        TAKE(w->dhx, real, hb * n * C);
        TAKE(w->dhd, real, hb * n * C);
        TAKE(w->dhg, real, hb * n * C);
    }
#undef TAKE
    return at;
}

/* The per-layer cache and the shared scratch of c's mixer for batches
 * within cap (the kernels' own size functions, on a batch of cap.B
 * sequences and cap.T rows). */
static int R(mixer_sizes)(R(sq_sasrec_work) *w, const sq_sasrec_config *c, sq_err *e)
{
    int B = w->cap.B > 0 ? w->cap.B : 1, T = w->cap.T, H = c->n_heads, C = c->dim;
    int a = c->attn;
    w->cache_n = w->scratch_n = 0;
    if (a == SQ_AK_SOFTMAX || a == SQ_AK_POSITIONAL || a == SQ_AK_FPOSITIONAL)
        w->cache_n = (size_t)H * w->cap.att;
    if (a == SQ_AK_FPOSITIONAL)
        w->scratch_n = sq_fpa_scratch_size(c->max_len, H);
    if (a == SQ_AK_MIXING) {
        w->cache_n = sq_mixing_cache_size(T, C);
        w->scratch_n = sq_mixing_scratch_size(T, C);
    }
    if (uses_qkv(a) && a != SQ_AK_SOFTMAX) {
        int *off = malloc(((size_t)B + 1) * sizeof *off);
        if (!off)
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
        for (int b = 0; b <= B; b++)
            off[b] = (int)((int64_t)T * b / B);
        w->cache_n = sq_lattn_cache_size(lattn_kind(c), off, B, H, C);
        w->scratch_n = sq_lattn_scratch_size(lattn_kind(c), off, B, H, C);
        free(off);
    }
    return 0;
}

int R(sq_sasrec_work_alloc)(R(sq_sasrec_work) *w, const sq_sasrec_config *c,
                            const sq_sasrec_cap *cap, sq_err *e)
{
    memset(w, 0, sizeof *w);
    w->cap = *cap;
    if (w->cap.T < 1)
        w->cap.T = 1;
    if (w->cap.att < 1)
        w->cap.att = 1;
    int chunk = cap->n > 0 ? cap->n : 1;
    w->ce_chunk = chunk < 512 ? chunk : 512;
    if (R(mixer_sizes)(w, c, e))
        return e->code;
    size_t bytes = R(carve)(w, c, NULL);
    w->mem = aligned_alloc(64, bytes ? bytes : 64);
    if (!w->mem)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for a %zu-byte model workspace", bytes);
    R(carve)(w, c, w->mem);
    return 0;
}

void R(sq_sasrec_work_free)(R(sq_sasrec_work) *w)
{
    free(w->mem);
    memset(w, 0, sizeof *w);
}

/* ------------------------------------------------------------------------ */
/* The mixers (sasrec.h: ATTENTION KINDS)                                   */

/* The kernel of block l on the projections already in q, k, v of layer l:
 * writes the heads' output (before Wo) to out and fills the layer's cache.
 * The attention map runs it again on probe values. */
static void R(mix_core)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                        int l, real *out)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int C = c->dim, H = c->n_heads, N = c->max_len, a = c->attn, causal = sq_sasrec_causal(c);
    size_t sTC = (size_t)w->cap.T * C;
    const real *q = w->q + l * sTC, *k = w->k + l * sTC, *v = w->v + l * sTC;
    real *cache = w->cache + l * w->cache_n;
    size_t NN = (size_t)N * N, Nk = (size_t)N * c->rank;
    switch (a) {
    case SQ_AK_SOFTMAX:
        R(sq_attention_forward)(cx, out, cache, q, k, v, C, b->off, b->B, H, C, causal);
        break;
    case SQ_AK_LINREC: case SQ_AK_LINEAR: case SQ_AK_EFFICIENT: case SQ_AK_HYDRA:
        R(sq_lattn_forward)(cx, lattn_kind(c), out, cache, w->scratch, q, k, v, C, b->off, b->B,
                            H, C, causal);
        break;
    case SQ_AK_POSITIONAL:
        R(sq_pa_forward)(cx, out, cache, p->pa_r + l * H * NN, v, C, b->off, b->pos, b->B, H, C,
                         N, causal);
        break;
    case SQ_AK_FPOSITIONAL:
        R(sq_fpa_forward)(cx, out, cache, w->scratch, p->fpa_r1 + l * H * Nk,
                          p->fpa_r2 + l * H * Nk, c->rank, v, C, b->off, b->pos, b->B, H, C,
                          N, causal);
        break;
    default: /* fixed patterns; mixing has no core on values */
        R(sq_fixed_forward)(cx, out, v, C, b->off, b->pos, b->B, C, N, fixed_kind(a),
                            (real)c->decay, causal);
        break;
    }
}

/* proj[l] = MIX(qin, kvin) of block l. */
static void R(mix_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                           int l, const real *qin, const real *kvin)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int T = b->T, C = c->dim, N = c->max_len, a = c->attn;
    size_t sTC = (size_t)w->cap.T * C, lc = (size_t)l * C, lcc = (size_t)l * C * C;
    real *proj = w->proj + l * sTC;
    if (a == SQ_AK_MIXING) {
        size_t lnn = (size_t)l * N * N, ln = (size_t)l * N;
        R(sq_mixing_forward)(cx, proj, w->cache + l * w->cache_n, qin, C, p->mix_w1 + lnn,
                             p->mix_b1 + ln, p->mix_w2 + lnn, p->mix_b2 + ln, b->off, b->pos,
                             b->B, C, N, sq_sasrec_causal(c));
        return;
    }
    if (uses_qkv(a)) {
        real *atty = w->atty + l * sTC;
        R(sq_linear_forward)(cx, w->q + l * sTC, qin, p->wq + lcc, p->bq + lc, T, C, C);
        R(sq_linear_forward)(cx, w->k + l * sTC, kvin, p->wk + lcc, p->bk + lc, T, C, C);
        R(sq_linear_forward)(cx, w->v + l * sTC, kvin, p->wv + lcc, p->bv + lc, T, C, C);
        R(mix_core)(m, w, b, l, atty);
        R(sq_linear_forward)(cx, proj, atty, p->wo + lcc, p->bo + lc, T, C, C);
        return;
    }
    /* positional kinds and fixed patterns: V from the query input, no Wo */
    R(sq_linear_forward)(cx, w->v + l * sTC, qin, p->wv + lcc, p->bv + lc, T, C, C);
    R(mix_core)(m, w, b, l, proj);
}

/* Back through proj[l] = MIX(qin, kvin), from w->dproj: adds into dqin and
 * dkvin (which may be the same buffer) and g. Uses datty, dq, dk, dv. */
static void R(mix_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                            R(sq_sasrec) *g, int l, const real *qin, const real *kvin,
                            real *dqin, real *dkvin)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    R(sq_sasrec_params) *gp = &g->p;
    int T = b->T, C = c->dim, H = c->n_heads, N = c->max_len, a = c->attn;
    int causal = sq_sasrec_causal(c);
    size_t sTC = (size_t)w->cap.T * C, lc = (size_t)l * C, lcc = (size_t)l * C * C;
    size_t bc = (size_t)T * C * sizeof(real);
    const real *proj = w->proj + l * sTC, *cache = w->cache + l * w->cache_n;
    if (a == SQ_AK_MIXING) {
        size_t lnn = (size_t)l * N * N, ln = (size_t)l * N;
        R(sq_mixing_backward)(cx, dqin, gp->mix_w1 + lnn, gp->mix_b1 + ln, gp->mix_w2 + lnn,
                              gp->mix_b2 + ln, w->scratch, w->dproj, qin, cache,
                              p->mix_w1 + lnn, p->mix_w2 + lnn, C, b->off, b->pos, b->B, C, N,
                              causal);
        return;
    }
    const real *v = w->v + l * sTC;
    memset(w->dv, 0, bc);
    if (uses_qkv(a)) {
        const real *q = w->q + l * sTC, *k = w->k + l * sTC, *atty = w->atty + l * sTC;
        memset(w->datty, 0, bc);
        R(sq_linear_backward)(cx, w->datty, gp->wo + lcc, gp->bo + lc, w->dproj, atty,
                              p->wo + lcc, T, C, C);
        memset(w->dq, 0, bc);
        memset(w->dk, 0, bc);
        if (a == SQ_AK_SOFTMAX)
            R(sq_attention_backward)(cx, w->dq, w->dk, w->dv, w->datty, atty, q, k, v, cache, C,
                                     b->off, b->B, H, C, causal);
        else
            R(sq_lattn_backward)(cx, lattn_kind(c), w->dq, w->dk, w->dv, w->scratch, w->datty,
                                 q, k, v, cache, C, b->off, b->B, H, C, causal);
        R(sq_linear_backward)(cx, dqin, gp->wq + lcc, gp->bq + lc, w->dq, qin, p->wq + lcc,
                              T, C, C);
        R(sq_linear_backward)(cx, dkvin, gp->wk + lcc, gp->bk + lc, w->dk, kvin, p->wk + lcc,
                              T, C, C);
        R(sq_linear_backward)(cx, dkvin, gp->wv + lcc, gp->bv + lc, w->dv, kvin, p->wv + lcc,
                              T, C, C);
        return;
    }
    size_t NN = (size_t)N * N, Nk = (size_t)N * c->rank;
    if (a == SQ_AK_POSITIONAL)
        R(sq_pa_backward)(cx, gp->pa_r + l * H * NN, w->dv, w->dproj, proj, v, cache, C, b->off,
                          b->pos, b->B, H, C, N, causal);
    else if (a == SQ_AK_FPOSITIONAL)
        R(sq_fpa_backward)(cx, gp->fpa_r1 + l * H * Nk, gp->fpa_r2 + l * H * Nk, w->dv,
                           w->scratch, w->dproj, proj, v, cache, p->fpa_r1 + l * H * Nk,
                           p->fpa_r2 + l * H * Nk, c->rank, C, b->off, b->pos, b->B, H, C,
                           N, causal);
    else
        R(sq_fixed_backward)(cx, w->dv, w->dproj, C, b->off, b->pos, b->B, C, N, fixed_kind(a),
                             (real)c->decay, causal);
    R(sq_linear_backward)(cx, dqin, gp->wv + lcc, gp->bv + lc, w->dv, qin, p->wv + lcc, T, C, C);
}

/* ------------------------------------------------------------------------ */
/* Forward                                                                  */

static void R(sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                              const sq_packed *b, real pd, uint64_t seed, uint64_t step)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int T = b->T, C = c->dim, F = c->ffn, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    real eps = (real)c->ln_eps;

    R(sq_embedding_forward)(cx, w->emb, p->item_emb, b->ids, T, C, r_sqrt((real)C));
    R(sq_posemb_forward)(cx, w->emb, w->emb, p->pos_emb, b->pos, T, C);
    R(sq_dropout_forward)(cx, w->x, w->m_emb, w->emb, T, C, pd, seed, step, SITE_EMB);
    for (int l = 0; l < L; l++) {
        size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
        real *x = w->x + l * sTC, *xn = w->x + (l + 1) * sTC;
        real *ln1 = w->ln1 + l * sTC, *proj = w->proj + l * sTC;
        real *projd = w->projd + l * sTC, *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        real *h1 = w->h1 + l * sTF, *r = w->r + l * sTF, *rd = w->rd + l * sTF;
        real *h2 = w->h2 + l * sTC, *h2d = w->h2d + l * sTC;

        R(sq_layernorm_forward)(cx, ln1, w->ln1_mean + l * sT, w->ln1_rstd + l * sT, x,
                                p->ln1w + lc, p->ln1b + lc, T, C, eps);
        R(mix_forward)(m, w, b, l, ln1, x);
        R(sq_dropout_forward)(cx, projd, w->m_att + l * sTC, proj, T, C, pd, seed, step,
                              SITE(l, 0));
        R(sq_residual_forward)(cx, xmid, ln1, projd, TC);
        R(sq_layernorm_forward)(cx, ln2, w->ln2_mean + l * sT, w->ln2_rstd + l * sT, xmid,
                                p->ln2w + lc, p->ln2b + lc, T, C, eps);
        R(sq_linear_forward)(cx, h1, ln2, p->w1 + lfc, p->b1 + (size_t)l * F, T, C, F);
        R(sq_relu_forward)(cx, r, h1, TF);
        R(sq_dropout_forward)(cx, rd, w->m_ffn1 + l * sTF, r, T, F, pd, seed, step, SITE(l, 1));
        R(sq_linear_forward)(cx, h2, rd, p->w2 + lfc, p->b2 + lc, T, F, C);
        R(sq_dropout_forward)(cx, h2d, w->m_ffn2 + l * sTC, h2, T, C, pd, seed, step, SITE(l, 2));
        R(sq_residual_forward)(cx, xn, ln2, h2d, TC);
    }
    R(sq_layernorm_forward)(cx, w->out, w->lnf_mean, w->lnf_rstd, w->x + (size_t)L * sTC,
                            p->lnfw, p->lnfb, T, C, eps);
}

static void R(bert_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                            const sq_packed *b, real pd, uint64_t seed, uint64_t step)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int T = b->T, C = c->dim, F = c->ffn, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    real eps = (real)c->ln_eps;

    R(sq_embedding_forward)(cx, w->emb, p->item_emb, b->ids, T, C, 1);
    R(sq_posemb_forward)(cx, w->emb, w->emb, p->pos_emb, b->pos, T, C);
    R(sq_layernorm_forward)(cx, w->embn, w->embln_mean, w->embln_rstd, w->emb, p->emblnw,
                            p->emblnb, T, C, eps);
    R(sq_dropout_forward)(cx, w->x, w->m_emb, w->embn, T, C, pd, seed, step, SITE_EMB);
    for (int l = 0; l < L; l++) {
        size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
        real *x = w->x + l * sTC, *xn = w->x + (l + 1) * sTC;
        real *ln1 = w->ln1 + l * sTC, *proj = w->proj + l * sTC;
        real *projd = w->projd + l * sTC, *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        real *h1 = w->h1 + l * sTF, *r = w->r + l * sTF;
        real *h2 = w->h2 + l * sTC, *h2d = w->h2d + l * sTC;

        /* x1 = LN1(x + dropout(MIX(x, x))) */
        R(mix_forward)(m, w, b, l, x, x);
        R(sq_dropout_forward)(cx, projd, w->m_att + l * sTC, proj, T, C, pd, seed, step,
                              SITE(l, 0));
        R(sq_residual_forward)(cx, xmid, x, projd, TC);
        R(sq_layernorm_forward)(cx, ln1, w->ln1_mean + l * sT, w->ln1_rstd + l * sT, xmid,
                                p->ln1w + lc, p->ln1b + lc, T, C, eps);
        /* x' = LN2(x1 + dropout(W2 gelu(W1 x1 + b1) + b2)) */
        R(sq_linear_forward)(cx, h1, ln1, p->w1 + lfc, p->b1 + (size_t)l * F, T, C, F);
        R(sq_gelu_forward)(cx, r, h1, TF);
        R(sq_linear_forward)(cx, h2, r, p->w2 + lfc, p->b2 + lc, T, F, C);
        R(sq_dropout_forward)(cx, h2d, w->m_ffn2 + l * sTC, h2, T, C, pd, seed, step, SITE(l, 2));
        R(sq_residual_forward)(cx, ln2, ln1, h2d, TC);
        R(sq_layernorm_forward)(cx, xn, w->ln2_mean + l * sT, w->ln2_rstd + l * sT, ln2,
                                p->ln2w + lc, p->ln2b + lc, T, C, eps);
    }
}

void R(sq_sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                          const sq_packed *b, int train, uint64_t seed,
                          uint64_t step)
{
    real pd = train ? (real)m->cfg.dropout : (real)0;
    if (is_bert(&m->cfg))
        R(bert_forward)(m, w, b, pd, seed, step);
    else
        R(sasrec_forward)(m, w, b, pd, seed, step);
}

/* BERT4Rec's output head on n rows of the states x[L] (rows NULL: row i):
 * hln = LNh(gelu(Wh x[rows] + bh)). */
static void R(head_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const int *rows,
                            int n)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int C = c->dim;
    const real *h = w->x + (size_t)c->n_layers * w->cap.T * C;
    for (int i = 0; i < n; i++)
        memcpy(w->hx + (size_t)i * C, h + (size_t)(rows ? rows[i] : i) * C,
               (size_t)C * sizeof(real));
    R(sq_linear_forward)(cx, w->hd, w->hx, p->head_w, p->head_b, n, C, C);
    R(sq_gelu_forward)(cx, w->hg, w->hd, (size_t)n * C);
    R(sq_layernorm_forward)(cx, w->hln, w->hln_mean, w->hln_rstd, w->hg, p->headlnw, p->headlnb,
                            n, C, (real)c->ln_eps);
}

/* ------------------------------------------------------------------------ */
/* Loss                                                                     */

/* BERT4Rec: head, then the cross-entropy with the output bias riding along
 * as an extra column: (hln, 1) . (E[i], ob[i]) = hln . E[i] + ob[i]. */
static double R(bert_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                           R(sq_sasrec) *g, int *count)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    int C = c->dim, C1 = C + 1, V1 = (int)c->n_items + 1, n = b->n, T = b->T;
    R(head_forward)(m, w, b->rows, n);
    for (int i = 0; i < n; i++) {
        memcpy(w->haug + (size_t)i * C1, w->hln + (size_t)i * C, (size_t)C * sizeof(real));
        w->haug[(size_t)i * C1 + C] = 1;
    }
    for (int v = 0; v < V1; v++) {
        memcpy(w->eaug + (size_t)v * C1, p->item_emb + (size_t)v * C, (size_t)C * sizeof(real));
        w->eaug[(size_t)v * C1 + C] = p->out_b[v];
    }
    if (g) {
        memset(w->dhaug, 0, (size_t)n * C1 * sizeof(real));
        memset(w->deaug, 0, (size_t)V1 * C1 * sizeof(real));
    }
    double loss = R(sq_ce_full)(cx, g ? w->dhaug : NULL, g ? w->deaug : NULL, w->ce, w->haug,
                                w->eaug, NULL, b->targets, n, C1, V1, w->ce_chunk, 1, count);
    if (!g)
        return loss;
    R(sq_sasrec_params) *gp = &g->p;
    for (int v = 0; v < V1; v++) {
        for (int k = 0; k < C; k++)
            gp->item_emb[(size_t)v * C + k] += w->deaug[(size_t)v * C1 + k];
        gp->out_b[v] += w->deaug[(size_t)v * C1 + C];
    }
    /* back through hln = LNh(gelu(Wh hx + bh)); dhx reused for d hln first */
    size_t nc = (size_t)n * C * sizeof(real);
    for (int i = 0; i < n; i++)
        memcpy(w->dhx + (size_t)i * C, w->dhaug + (size_t)i * C1, (size_t)C * sizeof(real));
    memset(w->dhg, 0, nc);
    R(sq_layernorm_backward)(cx, w->dhg, gp->headlnw, gp->headlnb, w->dhx, w->hg, p->headlnw,
                             w->hln_mean, w->hln_rstd, n, C);
    memset(w->dhd, 0, nc);
    R(sq_gelu_backward)(cx, w->dhd, w->dhg, w->hd, (size_t)n * C);
    memset(w->dhx, 0, nc);
    R(sq_linear_backward)(cx, w->dhx, gp->head_w, gp->head_b, w->dhd, w->hx, p->head_w, n, C, C);
    memset(w->dout, 0, (size_t)T * C * sizeof(real));
    for (int i = 0; i < n; i++) {
        real *d = w->dout + (size_t)(b->rows ? b->rows[i] : i) * C;
        const real *s = w->dhx + (size_t)i * C;
        for (int k = 0; k < C; k++)
            d[k] += s[k];
    }
    return loss;
}

double R(sq_sasrec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                         const sq_packed *b, int loss, R(sq_sasrec) *g,
                         int *count)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    if (is_bert(c))
        return R(bert_loss)(m, w, b, g, count);
    int C = c->dim, V1 = (int)c->n_items + 1;
    real *dh = g ? w->dout : NULL, *dE = g ? g->p.item_emb : NULL;
    if (dh)
        memset(dh, 0, (size_t)b->T * C * sizeof *dh);
    if (loss == SQ_LOSS_BCE)
        return R(sq_bce_sampled)(cx, dh, dE, w->out, m->p.item_emb, b->rows, b->targets,
                                 b->neg, b->n, b->K, C, 1, count);
    return R(sq_ce_full)(cx, dh, dE, w->ce, w->out, m->p.item_emb, b->rows, b->targets,
                         b->n, C, V1, w->ce_chunk, 1, count);
}

/* ------------------------------------------------------------------------ */
/* Backward                                                                 */

static void R(sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                               const sq_packed *b, R(sq_sasrec) *g)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    R(sq_sasrec_params) *gp = &g->p;
    int T = b->T, C = c->dim, F = c->ffn, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    real pd = (real)c->dropout;
    size_t bc = TC * sizeof(real), bf = TF * sizeof(real);

    /* h = LNf(x[L]) */
    memset(w->dx, 0, bc);
    R(sq_layernorm_backward)(cx, w->dx, gp->lnfw, gp->lnfb, w->dout, w->x + (size_t)L * sTC,
                             p->lnfw, w->lnf_mean, w->lnf_rstd, T, C);
    for (int l = L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
        const real *x = w->x + l * sTC, *ln1 = w->ln1 + l * sTC;
        const real *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        const real *h1 = w->h1 + l * sTF, *rd = w->rd + l * sTF;

        /* x[l+1] = y + dropout(h2),  h2 = W2 rd + b2 */
        memcpy(w->dy, w->dx, bc);
        memset(w->dh2, 0, bc);
        R(sq_dropout_backward)(cx, w->dh2, w->dx, w->m_ffn2 + l * sTC, TC, pd);
        memset(w->dF1, 0, bf);
        R(sq_linear_backward)(cx, w->dF1, gp->w2 + lfc, gp->b2 + lc, w->dh2, rd,
                              p->w2 + lfc, T, F, C);
        /* rd = dropout(relu(h1)),  h1 = W1 y + b1 */
        memset(w->dF2, 0, bf);
        R(sq_dropout_backward)(cx, w->dF2, w->dF1, w->m_ffn1 + l * sTF, TF, pd);
        memset(w->dF3, 0, bf);
        R(sq_relu_backward)(cx, w->dF3, w->dF2, h1, TF);
        R(sq_linear_backward)(cx, w->dy, gp->w1 + lfc, gp->b1 + (size_t)l * F, w->dF3, ln2,
                              p->w1 + lfc, T, C, F);
        /* y = LN2(xmid) */
        memset(w->dxmid, 0, bc);
        R(sq_layernorm_backward)(cx, w->dxmid, gp->ln2w + lc, gp->ln2b + lc, w->dy, xmid,
                                 p->ln2w + lc, w->ln2_mean + l * sT, w->ln2_rstd + l * sT,
                                 T, C);
        /* xmid = q + dropout(proj),  proj = MIX(q, x),  q = LN1(x) */
        memcpy(w->dln1, w->dxmid, bc);
        memset(w->dproj, 0, bc);
        R(sq_dropout_backward)(cx, w->dproj, w->dxmid, w->m_att + l * sTC, TC, pd);
        memset(w->dx, 0, bc);
        R(mix_backward)(m, w, b, g, l, ln1, x, w->dln1, w->dx);
        R(sq_layernorm_backward)(cx, w->dx, gp->ln1w + lc, gp->ln1b + lc, w->dln1, x,
                                 p->ln1w + lc, w->ln1_mean + l * sT, w->ln1_rstd + l * sT,
                                 T, C);
    }
    /* x0 = dropout(E[ids] sqrt(C) + P[pos]) */
    memset(w->demb, 0, bc);
    R(sq_dropout_backward)(cx, w->demb, w->dx, w->m_emb, TC, pd);
    memset(w->dy, 0, bc);
    R(sq_posemb_backward)(cx, w->dy, gp->pos_emb, w->demb, b->pos, T, C);
    R(sq_embedding_backward)(cx, gp->item_emb, w->dy, b->ids, T, C, r_sqrt((real)C));
}

/* Same steps as sasrec_backward in another order: post-LN blocks, GELU and
 * no dropout inside the FFN. Kept as its own function so each backward reads
 * as its forward in reverse. */
static void R(bert_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                             const sq_packed *b, R(sq_sasrec) *g)
{
    const sq_ctx cx0 = sq_ctx_cpu(), *cx = &cx0;
    const sq_sasrec_config *c = &m->cfg;
    const R(sq_sasrec_params) *p = &m->p;
    R(sq_sasrec_params) *gp = &g->p;
    int T = b->T, C = c->dim, F = c->ffn, L = c->n_layers;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    size_t sTC = (size_t)w->cap.T * C, sTF = (size_t)w->cap.T * F, sT = (size_t)w->cap.T;
    real pd = (real)c->dropout;
    size_t bc = TC * sizeof(real), bf = TF * sizeof(real);

    memcpy(w->dx, w->dout, bc); /* d x[L] */
    for (int l = L - 1; l >= 0; l--) {
        size_t lc = (size_t)l * C, lfc = (size_t)l * F * C;
        const real *x = w->x + l * sTC, *ln1 = w->ln1 + l * sTC;
        const real *xmid = w->xmid + l * sTC, *ln2 = w->ln2 + l * sTC;
        const real *h1 = w->h1 + l * sTF, *r = w->r + l * sTF;

        /* x[l+1] = LN2(s2), s2 (in ln2) = x1 + dropout(h2) */
        memset(w->dy, 0, bc);
        R(sq_layernorm_backward)(cx, w->dy, gp->ln2w + lc, gp->ln2b + lc, w->dx, ln2,
                                 p->ln2w + lc, w->ln2_mean + l * sT, w->ln2_rstd + l * sT,
                                 T, C);
        memcpy(w->dln1, w->dy, bc);
        memset(w->dh2, 0, bc);
        R(sq_dropout_backward)(cx, w->dh2, w->dy, w->m_ffn2 + l * sTC, TC, pd);
        /* h2 = W2 gelu(h1) + b2, h1 = W1 x1 + b1 */
        memset(w->dF1, 0, bf);
        R(sq_linear_backward)(cx, w->dF1, gp->w2 + lfc, gp->b2 + lc, w->dh2, r, p->w2 + lfc,
                              T, F, C);
        memset(w->dF3, 0, bf);
        R(sq_gelu_backward)(cx, w->dF3, w->dF1, h1, TF);
        R(sq_linear_backward)(cx, w->dln1, gp->w1 + lfc, gp->b1 + (size_t)l * F, w->dF3, ln1,
                              p->w1 + lfc, T, C, F);
        /* x1 (in ln1) = LN1(xmid), xmid = x + dropout(MIX(x, x)) */
        memset(w->dxmid, 0, bc);
        R(sq_layernorm_backward)(cx, w->dxmid, gp->ln1w + lc, gp->ln1b + lc, w->dln1, xmid,
                                 p->ln1w + lc, w->ln1_mean + l * sT, w->ln1_rstd + l * sT,
                                 T, C);
        memcpy(w->dx, w->dxmid, bc);
        memset(w->dproj, 0, bc);
        R(sq_dropout_backward)(cx, w->dproj, w->dxmid, w->m_att + l * sTC, TC, pd);
        R(mix_backward)(m, w, b, g, l, x, x, w->dx, w->dx);
    }
    /* x0 = dropout(LNe(E[ids] + P[pos])) */
    memset(w->dy, 0, bc);
    R(sq_dropout_backward)(cx, w->dy, w->dx, w->m_emb, TC, pd);
    memset(w->demb, 0, bc);
    R(sq_layernorm_backward)(cx, w->demb, gp->emblnw, gp->emblnb, w->dy, w->emb, p->emblnw,
                             w->embln_mean, w->embln_rstd, T, C);
    memset(w->dy, 0, bc);
    R(sq_posemb_backward)(cx, w->dy, gp->pos_emb, w->demb, b->pos, T, C);
    R(sq_embedding_backward)(cx, gp->item_emb, w->dy, b->ids, T, C, 1);
}

void R(sq_sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                           const sq_packed *b, R(sq_sasrec) *g)
{
    if (is_bert(&m->cfg))
        R(bert_backward)(m, w, b, g);
    else
        R(sasrec_backward)(m, w, b, g);
}

/* ------------------------------------------------------------------------ */
/* Model files, scoring and attention maps (float build only)               */

#if !SQ_REAL_IS_F64

int sq_sasrec_add_tensors(const sq_sasrec *m, sq_modelfile *mf, sq_err *e)
{
    const real *mem = m->mem;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(&m->cfg, i, s);
        if (m->sizes[i] && sq_modelfile_add(mf, tensor_names[i], SQ_F32, nd, s, mem, e))
            return e->code;
        mem += m->sizes[i];
    }
    return 0;
}

int sq_sasrec_get_tensors(sq_sasrec *m, const sq_modelfile *mf, const char *path,
                          sq_err *e)
{
    real *mem = m->mem;
    for (int i = 0; i < SQ_SASREC_NT; i++) {
        uint64_t s[4];
        int nd = sq_sasrec_tensor_shape(&m->cfg, i, s);
        if (!m->sizes[i])
            continue;
        const sq_tensor *t = sq_modelfile_find(mf, tensor_names[i]);
        if (!t)
            return sq_fail(e, SQ_EX_DATA, "%s: no tensor %s", path, tensor_names[i]);
        int ok = t->dtype == SQ_F32 && t->ndim == nd &&
                 t->bytes == m->sizes[i] * sizeof(float);
        for (int d = 0; ok && d < nd; d++)
            ok = t->shape[d] == s[d];
        if (!ok)
            return sq_fail(e, SQ_EX_DATA, "%s: tensor %s: type or shape does not match "
                           "the config", path, tensor_names[i]);
        memcpy(mem, t->data, m->sizes[i] * sizeof(float));
        mem += m->sizes[i];
    }
    return 0;
}

/* The scoring input of B histories (SCORING in sasrec.h) as a packed batch
 * in one block *ints (ids, pos [T], off [B+1], rows [B]: each sequence's
 * newest row); *att = sum(len^2). */
static int scoring_input(const sq_sasrec_config *c, const sq_batch *hist, sq_packed *pb,
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

int sq_sasrec_scores(const sq_sasrec *m, const sq_batch *hist, float *scores, sq_err *e)
{
    const sq_sasrec_config *c = &m->cfg;
    int B = hist->B, C = c->dim, V1 = (int)c->n_items + 1;
    if (B <= 0)
        return 0;
    sq_packed pb;
    int *ints = NULL;
    size_t att;
    if (scoring_input(c, hist, &pb, &ints, &att, e))
        return e->code;
    sq_sasrec_cap cap = {.B = B, .T = pb.T, .n = B, .att = att, .K = 0, .train = 0};
    sq_sasrec_work w;
    if (sq_sasrec_work_alloc(&w, c, &cap, e)) {
        free(ints);
        return e->code;
    }
    sq_sasrec_forward(m, &w, &pb, 0, 0, 0);
    const float *h = w.hln;
    float *hl = NULL;
    if (is_bert(c)) {
        head_forward(m, &w, pb.rows, B);
    } else {
        hl = malloc((size_t)B * C * sizeof *hl);
        if (!hl) {
            sq_sasrec_work_free(&w);
            free(ints);
            return sq_fail(e, SQ_EX_OSERR, "out of memory for scoring");
        }
        for (int b = 0; b < B; b++)
            memcpy(hl + (size_t)b * C, w.out + (size_t)pb.rows[b] * C, (size_t)C * sizeof *hl);
        h = hl;
    }
    /* scores[B, V1] = h[B, C] E[V1, C]^T (+ ob); column 0 (padding) gets 0 */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, V1, C, 1, h, C,
                m->p.item_emb, C, 0, scores, V1);
    if (is_bert(c))
        for (int b = 0; b < B; b++) {
            float *s = scores + (size_t)b * V1;
            for (int i = 1; i < V1; i++)
                s[i] += m->p.out_b[i];
            s[0] = 0;
        }
    sq_sasrec_work_free(&w);
    free(ints);
    free(hl);
    return 0;
}

/* The channel mean of mixing's Jacobian for one segment of n rows (sasrec.h,
 * sq_sasrec_attention_map): J_ij = sum_t W2[p_i, p_t] g_t W1[p_t, p_j],
 * g_t = mean_c gelu'(u_t[c]), t over K(i), j over K(t). */
static void mixing_jacobian(const sq_sasrec *m, const sq_sasrec_work *w, const int *pos,
                            int n, int l, float *out)
{
    const sq_sasrec_config *c = &m->cfg;
    int C = c->dim, N = c->max_len, causal = sq_sasrec_causal(c);
    const float *u = w->cache + l * w->cache_n; /* u, then gelu(u) */
    const float *W1 = m->p.mix_w1 + (size_t)l * N * N, *W2 = m->p.mix_w2 + (size_t)l * N * N;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            int t0 = causal ? j : 0, t1 = causal ? i : n - 1;
            for (int t = t0; t <= t1; t++) {
                double gm = 0;
                for (int k = 0; k < C; k++)
                    gm += sq_gelu_grad(u[(size_t)t * C + k]);
                s += (double)W2[(size_t)pos[i] * N + pos[t]] * (gm / C) *
                     (double)W1[(size_t)pos[t] * N + pos[j]];
            }
            out[(size_t)i * n + j] = (float)s;
        }
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
    if (scoring_input(c, &hb, &pb, &ints, &att, e))
        return e->code;
    int n = pb.T, C = c->dim, L = c->n_layers, a = c->attn;
    int H = a == SQ_AK_MIXING ? 1 : c->n_heads, hs = C / c->n_heads;
    sq_sasrec_cap cap = {.B = 1, .T = n, .n = 1, .att = att, .K = 0, .train = 0};
    sq_sasrec_work w;
    if (sq_sasrec_work_alloc(&w, c, &cap, e)) {
        free(ints);
        return e->code;
    }
    size_t nn = (size_t)n * n;
    *map = malloc((size_t)L * H * nn * sizeof **map);
    *ids = malloc((size_t)n * sizeof **ids);
    *pos = malloc((size_t)n * sizeof **pos);
    if (!*map || !*ids || !*pos) {
        free(*map);
        free(*ids);
        free(*pos);
        *map = NULL;
        *ids = *pos = NULL;
        sq_sasrec_work_free(&w);
        free(ints);
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the attention map");
    }
    memcpy(*ids, pb.ids, (size_t)n * sizeof **ids);
    memcpy(*pos, pb.pos, (size_t)n * sizeof **pos);
    sq_sasrec_forward(m, &w, &pb, 0, 0, 0);
    size_t sTC = (size_t)w.cap.T * C;
    for (int l = 0; l < L; l++) {
        float *ml = *map + (size_t)l * H * nn;
        if (a == SQ_AK_MIXING) {
            mixing_jacobian(m, &w, pb.pos, n, l, ml);
            continue;
        }
        /* The layer's output is A V per head with A fixed by the forward:
         * with unit vectors in V (key j0 + c in column c of every head),
         * output column h*hs + c of row i is A^h[i, j0 + c]. Overwrites the
         * layer's v, cache and output, which the forward no longer needs. */
        float *v = w.v + l * sTC, *out = uses_qkv(a) ? w.atty + l * sTC : w.proj + l * sTC;
        for (int j0 = 0; j0 < n; j0 += hs) {
            for (int j = 0; j < n; j++)
                for (int k = 0; k < C; k++)
                    v[(size_t)j * C + k] = j == j0 + k % hs ? 1.0f : 0.0f;
            mix_core(m, &w, &pb, l, out);
            for (int h = 0; h < H; h++)
                for (int i = 0; i < n; i++)
                    for (int k = 0; k < hs && j0 + k < n; k++)
                        ml[(size_t)h * nn + (size_t)i * n + j0 + k] =
                            out[(size_t)i * C + h * hs + k];
        }
    }
    *n_out = n;
    *n_heads = H;
    sq_sasrec_work_free(&w);
    free(ints);
    return 0;
}

static int view_scores(sq_model *mm, const sq_batch *b, float *scores, sq_err *e)
{
    return sq_sasrec_scores(mm->impl, b, scores, e);
}

void sq_sasrec_model_view(sq_model *out, const sq_sasrec *m)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", sq_backbone_name(m->cfg.backbone));
    out->n_items = m->cfg.n_items;
    out->impl = (void *)m;
    out->scores = view_scores;
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

int sq_sasrec_load(sq_model *mm, sq_modelfile *mf, sq_err *e)
{
    sq_sasrec_config c;
    char name[32] = "model";
    sq_modelfile_get(mf, "model", name, sizeof name);
    if (sq_sasrec_config_read(&c, mf, name, e))
        return e->code;
    sq_sasrec *m = malloc(sizeof *m);
    if (!m)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    if (sq_sasrec_alloc(m, &c, e) || sq_sasrec_get_tensors(m, mf, name, e)) {
        sq_sasrec_free(m);
        free(m);
        return e->code;
    }
    mm->n_items = c.n_items;
    mm->impl = m;
    mm->scores = view_scores;
    mm->free_impl = owned_free;
    return 0;
}

int sq_bert4rec_load(sq_model *mm, sq_modelfile *mf, sq_err *e)
{
    return sq_sasrec_load(mm, mf, e);
}

#endif /* !SQ_REAL_IS_F64 */
