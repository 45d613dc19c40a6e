/* sasrec.h - SASRec (Kang & McAuley, ICDM 2018) on the packed ops.
 *
 * THE MODEL, as the original TF code and SASRec.pytorch build it (C = dim,
 * F = ffn, N = max_len, L = layers, H = heads, p = dropout):
 *
 *   x0 = dropout(E[item] * sqrt(C) + P[pos])     pos = N - len + t
 *   per block l = 1..L:
 *     q  = LN1(x)                                 (the query is normalised,
 *     a  = MHA(q, x, x)                            keys and values are not)
 *          = Wo concat_h softmax(Q_h K_h^T / sqrt(C/H)) V_h + bo,
 *            Q = q Wq^T + bq, K = x Wk^T + bk, V = x Wv^T + bv, causal
 *            inside each sequence
 *     x  = q + dropout(a)
 *     y  = LN2(x)
 *     x  = y + dropout(W2 dropout(relu(W1 y + b1)) + b2)
 *   h  = LNf(x)                                   the sequence's states
 *   score(item i at a position) = h . E[i]        (tied output layer)
 *
 * E [n_items + 1, C] (row 0 = padding, kept 0), P [N, C]; LayerNorm eps
 * 1e-8 (TF SASRec). Dropout is applied to the attention block's output
 * rather than to the attention probabilities (PyTorch's MultiheadAttention
 * drops probabilities; the packed attention op keeps none to drop).
 * Padded positions are never computed (packed rows).
 *
 * INITIALISATION (SASRec.pytorch: xavier_normal_ on every 2-D parameter):
 * every weight matrix, E and P are N(0, 2 / (fan_in + fan_out)) with
 * (fan_in, fan_out) = (columns, rows) of the stored matrix (E: V+1 and C,
 * P: N and C, Wq: C and C, W1: C and F, ...); E's row 0 is then zeroed;
 * biases 0; LayerNorm weights 1 and biases 0. Draws come from one generator
 * seeded by (seed, "init") in the order of the tensor table below.
 *
 * LOSSES. SQ_LOSS_CE: softmax cross-entropy over all items 1..n_items at
 * every trained position (FPARec's sparse_ce); SQ_LOSS_BCE: -log sig(h.E_pos)
 * - sum_k log(1 - sig(h.E_neg_k)) with sampled negatives (original SASRec).
 * Both are means over the trained positions.
 *
 * SCORING (seqrec-score, validation): a history's newest N items are the
 * input; the state h of the newest position scores every item, h E^T. An
 * empty history is one padding token at position N - 1: the scores then
 * come from the position embedding alone (the same for every cold user).
 *
 * Like the ops, the model is written once over `real` and compiled twice:
 * float (lib/sasrec.c, the code that trains) and double
 * (lib/sasrec_f64.c, names with _f64, for the whole-model gradient check). */
#ifndef SQ_SASREC_H
#define SQ_SASREC_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "err.h"
#include "model.h"
#include "modelfile.h"

typedef struct {
    uint32_t n_items;
    int n_layers, n_heads, dim, ffn, max_len;
    double dropout;
    double ln_eps;
} sq_sasrec_config;

enum sq_loss { SQ_LOSS_CE = 0, SQ_LOSS_BCE = 1 };

/* The parameter tensors, in storage order. The first SQ_SASREC_N_DECAY
 * (matrices and embeddings) form the weight-decay group; biases and
 * LayerNorm parameters follow. */
enum {
    SQ_SASREC_NT = 20,
    SQ_SASREC_N_DECAY = 8,
};

/* The tensor's name in model files ("item_emb", "wq", ...) and shape. */
const char *sq_sasrec_tensor_name(int i);
int sq_sasrec_tensor_shape(const sq_sasrec_config *c, int i, uint64_t shape[4]);
/* Element counts of the tensors; returns the total. */
size_t sq_sasrec_sizes(const sq_sasrec_config *c, size_t sizes[SQ_SASREC_NT]);

/* SQ_EX_USAGE with a message when the config cannot be built (dim not a
 * multiple of heads, non-positive sizes, dropout outside [0, 1), ...). */
int sq_sasrec_config_check(const sq_sasrec_config *c, sq_err *e);
/* The architecture keys of a model file: layers, heads, dim, ffn, max_len,
 * dropout, ln_eps ("model" and n_items are written by the caller, with
 * sq_model_set_data); read also takes n_items. */
int sq_sasrec_config_write(const sq_sasrec_config *c, sq_modelfile *mf, sq_err *e);
int sq_sasrec_config_read(sq_sasrec_config *c, const sq_modelfile *mf,
                          const char *path, sq_err *e);

/* Capacity of a workspace: most sequences, token rows, loss entries and
 * sum(len^2) of one batch, and whether it holds the backward buffers. */
typedef struct {
    int B, T, n;
    size_t att;
    int K;      /* negatives per entry */
    int train;  /* 1: gradient buffers and the loss scratch */
} sq_sasrec_cap;

/* The loader of sq_model_load's table (model.h): copies the config and
 * tensors of mf into a model that m owns. */
int sq_sasrec_load(sq_model *m, sq_modelfile *mf, sq_err *e);

#pragma push_macro("real")
#pragma push_macro("R")
#undef real
#undef R
#define SQ_SASREC_DECLARE
#define real float
#define R(name) name
#include "sasrec.h"
#undef real
#undef R
#define real double
#define R(name) name##_f64
#include "sasrec.h"
#undef real
#undef R
#undef SQ_SASREC_DECLARE
#pragma pop_macro("R")
#pragma pop_macro("real")

/* ---- float build only ---- */

/* Registers the parameter tensors (borrowed) under their table names. */
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
/* An sq_model that scores with m (borrowed: freeing the view frees
 * nothing of m), e.g. for validation during training. */
void sq_sasrec_model_view(sq_model *out, const sq_sasrec *m);

#elif defined(SQ_SASREC_DECLARE)

/* Pointers into one block, one per tensor (order = the tensor table). */
typedef struct {
    real *item_emb, *pos_emb;                      /* [V+1, C], [N, C] */
    real *wq, *wk, *wv, *wo;                       /* [L, C, C] */
    real *w1, *w2;                                 /* [L, F, C], [L, C, F] */
    real *bq, *bk, *bv, *bo, *b1, *b2;             /* [L, C] (b1: [L, F]) */
    real *ln1w, *ln1b, *ln2w, *ln2b;               /* [L, C] */
    real *lnfw, *lnfb;                             /* [C] */
} R(sq_sasrec_params);

/* Parameters (or their gradients, or Adam moments: same layout). */
typedef struct {
    sq_sasrec_config cfg;
    size_t sizes[SQ_SASREC_NT];
    size_t n;          /* total reals */
    size_t n_decay;    /* reals of the weight-decay group (a prefix) */
    real *mem;         /* the one block */
    R(sq_sasrec_params) p;
} R(sq_sasrec);

/* Activations of one batch (and, for training, their gradients): one block,
 * per-layer arrays at l * cap.T * width. */
typedef struct {
    sq_sasrec_cap cap;
    void *mem;
    real *emb;                     /* [T, C] E*sqrt(C) + P */
    real *x;                       /* [L+1, T, C] block inputs; x[L] last */
    real *ln1, *ln1_mean, *ln1_rstd;
    real *q, *k, *v, *att, *atty, *proj, *projd, *xmid;
    real *ln2, *ln2_mean, *ln2_rstd;
    real *h1, *r, *rd, *h2, *h2d;  /* FFN, [L, T, F] for h1, r, rd */
    real *out, *lnf_mean, *lnf_rstd; /* [T, C] the states h */
    uint8_t *m_emb, *m_att, *m_ffn1, *m_ffn2; /* dropout masks */
    /* training only */
    real *ce;                      /* sq_ce_full scratch */
    int ce_chunk;
    real *dout, *dx, *dy, *dxmid, *dln1, *dproj, *datty, *dq, *dk, *dv,
         *dh2, *dF1, *dF2, *dF3, *demb;
} R(sq_sasrec_work);

/* Allocates parameters (zero) for a checked config. */
int R(sq_sasrec_alloc)(R(sq_sasrec) *m, const sq_sasrec_config *c, sq_err *e);
void R(sq_sasrec_free)(R(sq_sasrec) *m);
/* The initialisation described above. */
void R(sq_sasrec_init_weights)(R(sq_sasrec) *m, uint64_t seed);

int R(sq_sasrec_work_alloc)(R(sq_sasrec_work) *w, const sq_sasrec_config *c,
                            const sq_sasrec_cap *cap, sq_err *e);
void R(sq_sasrec_work_free)(R(sq_sasrec_work) *w);

/* Forward pass of a packed batch (must fit w->cap): fills w->out [T, C].
 * train != 0 applies dropout, drawn from (seed, step, site, row). */
void R(sq_sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                          const sq_packed *b, int train, uint64_t seed,
                          uint64_t step);

/* The loss of the forward states over b's entries (mean over trained
 * entries, *count of them). With g != NULL (training workspace) it also
 * sets w->dout to d loss / d h and adds the output layer's gradient to
 * g->p.item_emb. */
double R(sq_sasrec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                         const sq_packed *b, int loss, R(sq_sasrec) *g,
                         int *count);

/* Back-propagates w->dout through the model, adding into g (the caller
 * zeroes g once per step). Needs the forward of the same batch in w. */
void R(sq_sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                           const sq_packed *b, R(sq_sasrec) *g);

#endif
