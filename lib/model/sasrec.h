/* sasrec.h - the transformer recommenders on the packed ops: SASRec (Kang &
 * McAuley, ICDM 2018) and BERT4Rec (Sun et al., CIKM 2019), each with any of
 * the token mixers of `seqrec-train --attn` (mixer.h).
 *
 * One model type, sq_sasrec, serves both backbones (cfg.backbone): they share
 * the embeddings, the mixers, the feed-forward network, the parameter block,
 * the optimiser and the training loop; they differ in the block (pre-LN vs
 * post-LN), the activation, the training task and the output layer.
 *
 * SASREC (cfg.backbone = SQ_BACKBONE_SASREC, cfg.block = SQ_BLOCK_SASREC:
 * the default), as the original TF code and SASRec.pytorch build it (C = dim, F = ffn, N = max_len, L = layers,
 * H = heads, p = dropout):
 *
 *   x0 = dropout(E[item] * sqrt(C) + P[pos])     pos = N - len + t
 *   per block l = 1..L:
 *     q  = LN1(x)                                 (the query is normalised,
 *     a  = MIX(q, x)                               keys and values are not)
 *     x  = q + dropout(a)
 *     y  = LN2(x)
 *     x  = y + dropout(W2 dropout(relu(W1 y + b1)) + b2)
 *   h  = LNf(x)                                   the sequence's states
 *   score(item i at a position) = h . E[i]        (tied output layer)
 *
 * always causal. E [n_items + 1, C] (row 0 = padding, kept 0), P [N, C];
 * LayerNorm eps 1e-8 (TF SASRec). Dropout is applied to the mixer's output
 * rather than to attention probabilities (PyTorch's MultiheadAttention drops
 * probabilities; the packed kernels keep none to drop). Padded positions are
 * never computed (packed rows).
 *
 * SASREC WITH RECBOLE'S BLOCK (cfg.block = SQ_BLOCK_RECBOLE, `--block
 * recbole`), as RecBole 1.1.1's SASRec (its TransformerEncoder, hidden_act
 * gelu): the BERT4Rec blocks below, causal, with SASRec's output layer:
 *
 *   x0 = dropout(LNe(E[item] + P[pos]))           (no sqrt(C) scale)
 *   per block: x = LN1(x + dropout(MIX(x, x)))
 *              x = LN2(x + dropout(W2 gelu(W1 x + b1) + b2))
 *   h  = x                                        (no final LayerNorm)
 *   score(item i at a position) = h . E[i]        (tied, no bias, no head)
 *
 * LayerNorm eps 1e-12 and RecBole's N(0, 0.02^2) init, as BERT4Rec; the
 * training task, losses, scoring input and E's rows are SASRec's. The code
 * is BERT4Rec's (sq_sasrec_post_ln: the post-LN path of sasrec.c).
 *
 * BERT4REC (cfg.backbone = SQ_BACKBONE_BERT4REC), as RecBole's BERT4Rec
 * (TransformerEncoder, post-LN BERT blocks, hidden_act gelu):
 *
 *   x0 = dropout(LNe(E[item] + P[pos]))           (no sqrt(C) scale)
 *   per block l = 1..L:
 *     x  = LN1(x + dropout(MIX(x, x)))
 *     x  = LN2(x + dropout(W2 gelu(W1 x + b1) + b2))
 *   h  = x                                        the sequence's states
 *   head(h) = LNh(gelu(Wh h + bh))                (RecBole's output_ffn,
 *   score(item i at a position) = head(h) . E[i] + ob[i]   gelu, output_ln)
 *
 * bidirectional inside each sequence, or causal with cfg.causal (the "causal
 * masked" BERT4Rec of HydraRec Table 2, HydraRecUni with --attn hydra).
 * E [n_items + 2, C]: row 0 = padding (kept 0), row n_items + 1 = the mask
 * token (SQ_MASK_ID); ob [n_items + 1] the output bias (ob[0] unused, 0).
 * GELU is the exact erf form; LayerNorm eps 1e-12 (RecBole). Training is the
 * cloze task (batch.h: CLOZE): masked positions predict the item they hide,
 * softmax cross-entropy over every real item 1..n_items (the mask token is
 * never a candidate). Scoring appends a mask token after the history's newest
 * N - 1 items (at position N - 1) and scores at it.
 *
 * ATTENTION KINDS. MIX(qin, kvin) of a block is the token mixer of
 * cfg.attn (mixer.h; the kinds, one per file of their family: mix_*.c;
 * their equations: seqrec-train(1)). The backbone hands each block's slice
 * of the mixer's tensors, its cache and the shared scratch to the mixer and
 * never names a kind.
 *
 * INITIALISATION. SASRec (SASRec.pytorch's xavier_normal_ on every 2-D
 * parameter): every weight matrix, E, P, mixing's W1 and W2 are N(0, 2 /
 * (fan_in + fan_out)) with (fan_in, fan_out) = (columns, rows) of the stored
 * matrix; BERT4Rec and SASRec --block recbole (RecBole): the same tensors
 * N(0, 0.02^2). All: E's row 0
 * is zeroed; R is a truncated normal (redrawn beyond 2 sd) with sd 0.01, R1
 * and R2 with sd 0.1 / k^(1/4) (so R1 R2^T has sd 0.01; the FPARec code's
 * initialisers); biases 0; LayerNorm weights 1 and biases 0. Draws come from
 * one generator seeded by (seed, "init") in the order of the tensor table.
 *
 * LOSSES. SQ_LOSS_CE: softmax cross-entropy over all items 1..n_items at
 * every trained position (FPARec's sparse_ce; BERT4Rec: every masked
 * position); SQ_LOSS_BCE (SASRec only): -log sig(h.E_pos) - sum_k log(1 -
 * sig(h.E_neg_k)) with sampled negatives (original SASRec); the sampled
 * softmax and gBCE of nextloss.h (both backbones; BERT4Rec's logits carry
 * its output bias). All are means over the trained positions.
 *
 * SCORING (seqrec-score, validation): SASRec: a history's newest N items are
 * the input; the state of the newest position scores every item, h E^T. An
 * empty history is one padding token at position N - 1: the scores then
 * come from the position embedding alone (the same for every cold user).
 * BERT4Rec: the newest N - 1 items and a mask token at N - 1 (alone for an
 * empty history); head(h of the mask) E^T + ob.
 *
 * TENSORS. The backbone's tensors are the X-macro table SQ_SASREC_TENSORS
 * below (name, storage order, weight decay, init, shape, which backbone
 * uses it); the mixer's follow them in the tensor set (tensor.h). One
 * table serves allocation, pointers, model files, init and Adam.
 *
 * Like the ops, the model is written once over `real` and compiled twice:
 * float (the code that trains) and double (names with _f64, for the
 * whole-model gradient check). It calls only ops (ops.h: also zero, copy,
 * gather and scatter of rows, GEMM) on buffers from the context's
 * allocator (ctx.h), so that a CUDA build of the same source runs it on a
 * GPU. */
#ifndef SQ_SASREC_H
#define SQ_SASREC_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "ctx.h"
#include "err.h"
#include "mixer.h"
#include "model.h"
#include "modelfile.h"
#include "nextloss.h" /* SQ_LOSS_* */
#include "tensor.h"

enum sq_backbone { SQ_BACKBONE_SASREC = 0, SQ_BACKBONE_BERT4REC = 1 };
/* SASRec's block (--block): the TF SASRec's or RecBole's (above). */
enum sq_block { SQ_BLOCK_SASREC = 0, SQ_BLOCK_RECBOLE = 1 };

typedef struct {
    uint32_t n_items;
    int n_layers, n_heads, dim, ffn, max_len;
    double dropout;
    double ln_eps;
    int backbone;      /* SQ_BACKBONE_SASREC (0) or SQ_BACKBONE_BERT4REC */
    int causal;        /* BERT4Rec: causal mixers; SASRec is always causal */
    int block;         /* SASRec: SQ_BLOCK_SASREC (0) or SQ_BLOCK_RECBOLE */
    double mask_prob;  /* BERT4Rec: the cloze task's masking probability */
    sq_mixer_cfg attn; /* --attn KIND and the kind's options */
    /* Set in code by a model on the backbone (no options, not in model
     * files; its config_read sets them again): */
    int mask_row;                 /* SASRec: E gains the mask-token row
                                     n_items + 1 (sq_mask_id; CL4SRec) */
    const sq_tensor_desc *extra;  /* n_extra tensors of the model's own, after
                                     the mixer's (CORE's alpha layer; shape
                                     symbols those of the table below and U = 1) */
    int n_extra;
} sq_sasrec_config;

/* The mask token of a BERT4Rec config: n_items + 1. */
static inline int sq_mask_id(const sq_sasrec_config *c)
{
    return (int)c->n_items + 1;
}

/* Whether c runs post-LN blocks after an embedding LayerNorm (BERT4Rec, and
 * SASRec --block recbole) rather than the TF SASRec's pre-LN blocks and
 * final LayerNorm. */
static inline int sq_sasrec_post_ln(const sq_sasrec_config *c)
{
    return c->backbone == SQ_BACKBONE_BERT4REC || c->block == SQ_BLOCK_RECBOLE;
}

/* Whether the mixers of c are causal. */
static inline int sq_sasrec_causal(const sq_sasrec_config *c)
{
    return c->backbone == SQ_BACKBONE_SASREC || c->causal;
}

/* What the mixer of c sees (points into c). */
static inline sq_mixer_env sq_sasrec_env(const sq_sasrec_config *c)
{
    sq_mixer_env env = {c->dim, c->n_heads, c->max_len, c->n_layers, sq_sasrec_causal(c),
                        &c->attn, sq_mixer_get(c->attn.kind)};
    return env;
}


/* The backbone's tensors: X(name, order, decay, init, shape, use) with use
 * ALL, PRE (the pre-LN blocks only: the final LayerNorm), POST (the post-LN
 * blocks only: the embedding LayerNorm) or BERT (BERT4Rec only: its head and
 * output bias); sq_sasrec_tensor_set applies the rule. Shape symbols: W item
 * rows (n_items + 1, BERT4Rec + 1 for the mask token), V n_items + 1, N
 * max_len, C dim, F ffn, L layers. */
#define SQ_SASREC_TENSORS(X)                                                    \
    X(item_emb, 0, 1, SQ_INIT_WEIGHT, "WC", ALL)                                \
    X(pos_emb, 1, 1, SQ_INIT_WEIGHT, "NC", ALL)                                 \
    X(w1, 6, 1, SQ_INIT_WEIGHT, "LFC", ALL)                                     \
    X(w2, 7, 1, SQ_INIT_WEIGHT, "LCF", ALL)                                     \
    X(head_w, 13, 1, SQ_INIT_WEIGHT, "CC", BERT)                                \
    X(b1, 18, 0, SQ_INIT_ZERO, "LF", ALL)                                       \
    X(b2, 19, 0, SQ_INIT_ZERO, "LC", ALL)                                       \
    X(ln1_w, 20, 0, SQ_INIT_ONE, "LC", ALL)                                     \
    X(ln1_b, 21, 0, SQ_INIT_ZERO, "LC", ALL)                                    \
    X(ln2_w, 22, 0, SQ_INIT_ONE, "LC", ALL)                                     \
    X(ln2_b, 23, 0, SQ_INIT_ZERO, "LC", ALL)                                    \
    X(lnf_w, 24, 0, SQ_INIT_ONE, "C", PRE)                                      \
    X(lnf_b, 25, 0, SQ_INIT_ZERO, "C", PRE)                                     \
    X(embln_w, 28, 0, SQ_INIT_ONE, "C", POST)                                   \
    X(embln_b, 29, 0, SQ_INIT_ZERO, "C", POST)                                  \
    X(head_b, 30, 0, SQ_INIT_ZERO, "C", BERT)                                   \
    X(headln_w, 31, 0, SQ_INIT_ONE, "C", BERT)                                  \
    X(headln_b, 32, 0, SQ_INIT_ZERO, "C", BERT)                                 \
    X(out_b, 33, 0, SQ_INIT_ZERO, "V", BERT)

#define SQ_SASREC_T_ENUM(name, ...) SQ_T_##name,
enum { SQ_SASREC_TENSORS(SQ_SASREC_T_ENUM) SQ_SASREC_NT };
#undef SQ_SASREC_T_ENUM

/* The models of the registry: "sasrec" and "bert4rec". */
extern const sq_model_def sq_model_sasrec, sq_model_bert4rec;

/* The defaults of seqrec-train(1) for a backbone (attention softmax). */
void sq_sasrec_defaults(sq_sasrec_config *c, int backbone);
/* Sets --attn to the kind named kind with its options' defaults; -1 when
 * there is no such kind. */
int sq_sasrec_set_attn(sq_sasrec_config *c, const char *kind);
/* SQ_EX_USAGE with a message when the config cannot be built (dim not a
 * multiple of heads, non-positive sizes, dropout outside [0, 1), the
 * kind's own checks, ...). */
int sq_sasrec_config_check(const sq_sasrec_config *c, sq_err *e);
/* The config keys of a model file: the options of the backbone's table and
 * of its kind ("model" and n_items are written by the caller); read also
 * takes n_items and the backbone from "model" (a file without "attn" is
 * softmax). */
int sq_sasrec_config_write(const sq_sasrec_config *c, sq_modelfile *mf, sq_err *e);
int sq_sasrec_config_read(sq_sasrec_config *c, const sq_modelfile *mf,
                          const char *path, sq_err *e);
/* What a model built on the SASRec backbone (blin.c) adds to its config:
 * its own options (bound into a config struct that starts with the
 * sq_sasrec_config), its name for messages, and its own defaults of the
 * backbone's options (kv text by config key, e.g. "attn=efficient-dwc\n";
 * NULL: none). */
typedef struct {
    const sq_opt *opts;
    const char *model;
    const char *defaults;
} sq_sasrec_extra;

/* The options given (kv text, config keys) into c: the defaults, the given
 * values of the backbone's, the kind's and x's options (x may be NULL),
 * --max-len from a padded stream's padded_len when not given; SQ_EX_USAGE
 * for an option none of them has or a config that cannot be built. */
int sq_sasrec_config_from(sq_sasrec_config *c, int backbone, const char *given,
                          uint32_t n_items, int padded_len, const sq_sasrec_extra *x,
                          sq_err *e);
/* sq_sasrec_config_read for a model file of a model built on `backbone`
 * (whatever its "model" key). */
int sq_sasrec_config_read_as(sq_sasrec_config *c, const sq_modelfile *mf, const char *path,
                             int backbone, sq_err *e);

/* The tensors of c: the backbone's table, then the mixer's. */
int sq_sasrec_tensor_set(const sq_sasrec_config *c, sq_tensor_set *s, sq_err *e);

/* Capacity of a workspace: most sequences, token rows, loss entries and
 * sum(len^2) of one batch, and whether it holds the backward buffers. */
typedef struct {
    int B, T, n;
    size_t att;
    int K;      /* negatives per entry */
    int train;  /* 1: gradient buffers and the loss scratch */
} sq_sasrec_cap;

#define SQ_TWICE "sasrec.h"
#include "twice.h"

/* ---- float build only ---- */

/* Registers the parameter tensors in use (borrowed) under their names. */
int sq_sasrec_add_tensors(const sq_sasrec *m, sq_modelfile *mf, sq_err *e);
/* Copies the parameter tensors of a file read by sq_modelfile_read into m
 * (allocated for the file's config); SQ_EX_DATA on a missing tensor or a
 * shape or type mismatch. */
int sq_sasrec_get_tensors(sq_sasrec *m, const sq_modelfile *mf, const char *path,
                          sq_err *e);
/* Scores every item for each history of hist (SCORING above) into
 * scores[b * (n_items + 1) + i]; allocates its own workspace, so calls on
 * distinct batches may run concurrently. */
int sq_sasrec_scores(const sq_sasrec *m, const sq_batch *hist, float *scores,
                     sq_err *e);
/* The scoring input of B histories (SCORING above) as one packed batch in
 * one malloc'd block *ints (ids, pos [T], off [B+1], rows [B]: each
 * sequence's newest row); *att = sum(len^2). Models on the backbone that
 * score on a GPU (core) pack their histories with it. */
int sq_sasrec_scoring_input(const sq_sasrec_config *c, const sq_batch *hist, sq_packed *pb,
                            int **ints, size_t *att, sq_err *e);
/* An sq_model that scores with m (borrowed: freeing the view frees
 * nothing of m), e.g. for validation during training. */
void sq_sasrec_model_view(sq_model *out, const sq_sasrec *m);
/* The sq_sasrec behind a loaded "sasrec" or "bert4rec" model; NULL for any
 * other model. */
const sq_sasrec *sq_sasrec_of(const sq_model *m);
/* Loads the tensors of a model file with config c into mm (a scoring
 * model owning its sq_sasrec; sq_model_loader's contract). */
int sq_sasrec_load_as(sq_model *mm, sq_modelfile *mf, const sq_sasrec_config *c,
                      const sq_ctx *cx, sq_err *e);

/* The parts of a net made by sq_model_sasrec.net_alloc and of a workspace
 * made by its work_alloc, for models that train the backbone with a step
 * of their own (blin.c). */
sq_sasrec *sq_sasrec_net_model(const sq_net *n);
sq_sasrec *sq_sasrec_net_grads(const sq_net *n);
sq_sasrec_work *sq_sasrec_net_work(void *work);

/* The net of a model on the backbone (blin, cl4srec, core): its config
 * struct starts with an sq_sasrec_config, and its net is sq_model_sasrec's
 * on that embedded config. n->impl is an sq_backbone_net; n->cfg is its
 * cfg (the model's whole config). */
typedef struct {
    sq_net inner; /* sq_model_sasrec's net on cfg's sq_sasrec_config */
    void *cfg;    /* a copy of the model's config (cfg_size bytes) */
    void *extra;  /* extra_size zeroed bytes of the model's own (NULL if 0) */
} sq_backbone_net;

/* net_alloc (model.h) for a config of cfg_size bytes whose first member is
 * the sq_sasrec_config. */
int sq_backbone_net_alloc(sq_net *n, const void *cfg, size_t cfg_size, size_t extra_size,
                          const sq_ctx *cx, sq_err *e);
/* net_free, net_init and init_from (model.h): the backbone's on inner. */
void sq_backbone_net_free(sq_net *n);
void sq_backbone_net_init(sq_net *n, uint64_t seed);
int sq_backbone_init_from(sq_net *n, const sq_modelfile *mf, const char *path, sq_err *e);

/* The attention weights of every layer for one history (its scoring input,
 * SCORING above: n rows, n <= N). On success *map is a malloc'd
 * [n_layers, H, n, n] array (layer l, head h, query row i, key row j at
 * ((l * H + h) * n + i) * n + j), *ids [n] the input ids (the mask token is
 * sq_mask_id) and *pos [n] their window positions (both malloc'd), *n_out =
 * n, *n_heads = H. What the weights are is the kind's (mixer.h, map):
 *   softmax, positional, fpositional, the fixed patterns: the probabilities
 *     (rows sum to 1, zero above the diagonal when causal);
 *   linrec, linear, efficient, hydra: the implied A_ij, found by running the
 *     kernel on unit value vectors (linear and efficient rows sum to 1;
 *     linrec and hydra have no normaliser);
 *   efficient-dwc: efficient's, plus the band of the convolution's taps
 *     (their mean over the head's channels, without the bias);
 *   mixing (no values, not linear): the channel mean of the Jacobian
 *     d MIX_i[c] / d qin_j[c] (H = 1).
 * Only this one n x n per head is formed. */
int sq_sasrec_attention_map(const sq_sasrec *m, const uint32_t *hist, uint32_t len,
                            float **map, int **ids, int **pos, int *n_out,
                            int *n_heads, sq_err *e);

#elif defined(SQ_DECLARE_TWICE)

/* Pointers into one block, one per tensor of the table (p.t[i] is tensor
 * i; the mixer's tensors, whole (all layers), in p.mix). */
typedef struct {
    union {
        struct {
#define SQ_SASREC_T_PTR(name, ...) real *name;
            SQ_SASREC_TENSORS(SQ_SASREC_T_PTR)
#undef SQ_SASREC_T_PTR
        };
        real *t[SQ_SASREC_NT];
    };
    real *mix[SQ_MIXER_MAXT];
} R(sq_sasrec_params);

/* Parameters (or their gradients, or Adam moments: same layout), in one
 * block of backend memory. */
typedef struct {
    sq_sasrec_config cfg;
    sq_ctx cx;         /* the backend the block lives on */
    sq_tensor_set ts;  /* sizes, offsets, decay flags */
    size_t n;          /* total reals */
    real *mem;         /* the one block */
    int borrowed;      /* mem is another model's (sq_sasrec_borrow) */
    R(sq_sasrec_params) p;
} R(sq_sasrec);

/* Activations of one batch (and, for training, their gradients): one block,
 * per-layer arrays at l * cap.T * width (the mixer cache at l * cache_n).
 * Arrays a config does not use have no elements. Per block, pre-LN (SASRec):
 * ln1 = LN1(x), xmid = ln1 + dropout(proj), ln2 = LN2(xmid), x[l+1] = ln2 +
 * dropout(h2); post-LN (BERT4Rec, --block recbole): xmid = x + dropout(proj),
 * ln1 = LN1(xmid), ln2 = ln1 + dropout(h2), x[l+1] = LN2(ln2). The dropped
 * tensors are never kept (sq_dropout_add_forward), nor pre-LN's relu(h1)
 * (sq_relu_dropout_forward): their masks are. */
typedef struct {
    sq_sasrec_cap cap;
    sq_ctx cx;                     /* the backend of mem */
    sq_mixer_env env;
    void *mem;
    real *emb;                     /* [T, C] E*sqrt(C) + P (post-LN: E + P) */
    real *embn, *embln_mean, *embln_rstd; /* post-LN: LNe(emb) */
    real *x;                       /* [L+1, T, C] block inputs; x[L] last */
    real *ln1, *ln1_mean, *ln1_rstd;
    real *proj, *xmid;             /* the mixer's output; the residual sum */
    real *cache;                   /* [L, cache_n] the mixer's caches */
    size_t cache_n;
    real *scratch;                 /* [scratch_n] shared by the layers */
    size_t scratch_n;
    real *ln2, *ln2_mean, *ln2_rstd;
    real *h1, *r, *rd, *h2;        /* FFN, [L, T, F] for h1, r (post-LN), rd (pre-LN) */
    real *out, *lnf_mean, *lnf_rstd; /* [T, C] the states h (post-LN: out
                                        is x[L], no final LayerNorm) */
    /* BERT4Rec output head on the n scored rows */
    real *hx, *hd, *hg, *hln, *hln_mean, *hln_rstd; /* [n, C] ([n] stats) */
    uint8_t *m_emb, *m_att, *m_ffn1, *m_ffn2; /* dropout masks */
    /* training only */
    real *ce;                      /* sq_ce_full scratch */
    int ce_chunk;
    real *dout, *dx, *dy, *dxmid, *dproj, *dh2, *dF1, *dF3, *demb;
    real *dhx, *dhd, *dhg;         /* BERT4Rec head */
} R(sq_sasrec_work);

/* Allocates parameters (zero) for a checked config, on the CPU or on the
 * backend of cx. */
int R(sq_sasrec_alloc)(R(sq_sasrec) *m, const sq_sasrec_config *c, sq_err *e);
int R(sq_sasrec_alloc_on)(R(sq_sasrec) *m, const sq_sasrec_config *c, const sq_ctx *cx,
                          sq_err *e);
void R(sq_sasrec_free)(R(sq_sasrec) *m);
/* The initialisation described above (host memory: the CPU backend). */
void R(sq_sasrec_init_weights)(R(sq_sasrec) *m, uint64_t seed);

/* Makes m read its parameters from mem (another model's block of the same
 * config, which must outlive m): m's own block is freed, and freeing m
 * leaves mem alone. The trainer's micro-batch workers share its
 * parameters this way instead of copying them every step. */
void R(sq_sasrec_borrow)(R(sq_sasrec) *m, real *mem);

/* A workspace on m's backend. */
int R(sq_sasrec_work_alloc)(R(sq_sasrec_work) *w, const R(sq_sasrec) *m,
                            const sq_sasrec_cap *cap, sq_err *e);
void R(sq_sasrec_work_free)(R(sq_sasrec_work) *w);

/* Forward pass of a packed batch (must fit w->cap): fills the states h,
 * w->out [T, C] (post-LN: an alias of x[L]). train != 0 applies dropout,
 * drawn from (seed, step, site, row). */
void R(sq_sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                          const sq_packed *b, int train, uint64_t seed,
                          uint64_t step);

/* Scoring's forward: the states of rows rows[0, n) of b only (increasing
 * token rows, one a history), into rows [0, n) of w->out (post-LN: of
 * x[L]; BERT4Rec's head then takes rows NULL). The last block runs its
 * mixer on every row and the rest on those n rows alone, about a third of
 * the FLOPs of a 2-block forward saved; every row's arithmetic is
 * sq_sasrec_forward's, so the states are the same bits. No dropout.
 * Returns -1 (nothing done) when rows is not increasing or the model has
 * no block: use sq_sasrec_forward then. */
int R(sq_sasrec_forward_rows)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                              const int *rows, int n);

/* The loss of the forward states over b's entries (mean over trained
 * entries, *count of them). With g != NULL (training workspace) it also
 * sets w->dout to d loss / d h and adds the output layer's gradient (E; for
 * BERT4Rec also the head and ob) to g. */
double R(sq_sasrec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                         const sq_packed *b, sq_loss_spec loss, R(sq_sasrec) *g,
                         int *count);

/* BERT4Rec's output head on n rows of the states x[L] (rows NULL: row
 * i): w->hln = LNh(gelu(Wh x[rows] + bh)). */
void R(sq_sasrec_head)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const int *rows, int n);

/* The mixer's view of layer l of the batch b in w (g: the gradients, or
 * NULL), for a kind's forward, backward or map. */
void R(sq_sasrec_mix_args)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                           const R(sq_sasrec) *g, int l, R(sq_mix_args) *a);

/* Back-propagates w->dout through the model, adding into g (the caller
 * zeroes g once per step). Needs the forward of the same batch in w. */
void R(sq_sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                           const sq_packed *b, R(sq_sasrec) *g);

#endif
