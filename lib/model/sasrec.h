/* sasrec.h - the transformer recommenders on the packed ops: SASRec (Kang &
 * McAuley, ICDM 2018) and BERT4Rec (Sun et al., CIKM 2019), each with any of
 * the token mixers of `seqrec-train --attn` (ATTENTION KINDS below).
 *
 * One model type, sq_sasrec, serves both backbones (cfg.backbone): they share
 * the embeddings, the mixers, the feed-forward network, the parameter block,
 * the optimiser and the training loop; they differ in the block (pre-LN vs
 * post-LN), the activation, the training task and the output layer.
 *
 * SASREC (cfg.backbone = SQ_BACKBONE_SASREC), as the original TF code and
 * SASRec.pytorch build it (C = dim, F = ffn, N = max_len, L = layers,
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
 * ATTENTION KINDS (cfg.attn; the kernels: ops.h, attn_linear.h,
 * attn_pos.h). MIX(qin, kvin) of a block, for one sequence of length n, hs =
 * C / H, rows i (query) and j (key), K(i) = {j <= i} when causal, else every
 * j of the sequence; p_i the window position of row i:
 *
 *   family QKV (softmax, linrec, linear, efficient, hydra): parameters Wq,
 *   Wk, Wv, Wo [C, C] and bq, bk, bv, bo [C] per layer;
 *     Q = qin Wq^T + bq, K = kvin Wk^T + bk, V = kvin Wv^T + bv,
 *     MIX = Wo concat_h A_h(Q_h, K_h, V_h) + bo
 *   with A per head:
 *     softmax     out_i = sum_{j in K(i)} softmax_j(q_i.k_j / sqrt(hs)) v_j
 *                 O(n^2 C) time, O(H n^2) memory (the probabilities)
 *     linrec      (LinRec eq. 9) qh_i = elu(q_i) / |elu(q_i)|, key columns
 *                 L2-normalised over K(i): kh_j[a] = elu(k_j[a]) /
 *                 sqrt(sum_{j' in K(i)} elu(k_j'[a])^2);
 *                 out_i = c sum_{j in K(i)} (qh_i . kh_j) v_j. Scaling
 *                 (cfg.linrec_scale): code (default) c = 1/sqrt(hs) on the
 *                 product; paper also 1/sqrt(|K(i)|) on the key columns.
 *                 O(n C hs) time, O(C hs) extra memory
 *     linear      (Katharopoulos et al.) phi = elu + 1,
 *                 out_i = phi(q_i)^T S_i / (phi(q_i) . z_i),
 *                 S_i = sum_{j in K(i)} phi(k_j) v_j^T, z_i = sum phi(k_j).
 *                 O(n C hs)
 *     efficient   (Shen et al.) out_i = sum_a softmax_a(q_i)[a]
 *                 sum_{j in K(i)} softmax_{j in K(i)}(k_j[a]) v_j.
 *                 O(n C hs); the causal prefix softmax is computed online
 *                 (stable for any logit size)
 *     hydra       (Hydra attention; HydraRec) phi(x) = x / |x| over all C
 *                 features; out_i,h = phi(q_i)_h^T sum_{j in K(i)}
 *                 phi(k_j)_h v_j,h^T. With H = C (the Hydra setting):
 *                 out_i = phi(q_i) (.) sum_j phi(k_j) (.) v_j, O(n C).
 *                 O(n C hs)
 *     The linear kinds never form an n x n matrix: causal by prefix sums.
 *
 *   positional (PARec): parameters Wv [C, C], bv [C], R [H, N, N] per layer;
 *     V = qin Wv^T + bv (SASRec: qin = LN1(x), FPARec Eq. 5's layer-normed
 *     input; BERT4Rec: the block input, already layer-normed),
 *     MIX_i,h = sum_{j in K(i)} softmax_{j in K(i)}(R[h, p_i, p_j] / sqrt(hs))
 *               V_j,h                                       (FPARec Eq. 6)
 *     no Q, K and no output projection (FPARec Table 1: d^2 + n^2 per
 *     layer). O(n^2 C) time, O(H n^2) memory.
 *   fpositional (FPARec): Wv, bv, R1, R2 [H, N, k] (k = cfg.rank): the
 *     same with R = R1 R2^T (Eq. 7), d^2 + 2 k N per layer.
 *     O(n^2 C + N^2 k) time per step.
 *   average, linear-anneal, exp-anneal (FPARec Table 4, Appendix B): Wv, bv
 *     only; MIX_i = sum_{j in K(i)} a_ij V_j / sum_{j in K(i)} a_ij with
 *     causal a_ij = 1, p_j + 1, decay^(p_i - p_j) (cfg.decay, e^-1 in the
 *     paper); bidirectional a_ij = 1, N - |p_i - p_j|, decay^|p_i - p_j|.
 *     O(n^2 C) time, no memory.
 *   mixing (FPARec's Token Mixing baseline, MLP-Mixer token mixing): W1, W2
 *     [N, N], b1, b2 [N] per layer, no V: per channel c,
 *     u_t = b1[p_t] + sum_{j in K(t)} W1[p_t, p_j] qin_j[c],
 *     MIX_i[c] = b2[p_i] + sum_{t in K(i)} W2[p_i, p_t] gelu(u_t).
 *     O(n^2 C) time, O(n C) memory.
 *
 * INITIALISATION. SASRec (SASRec.pytorch's xavier_normal_ on every 2-D
 * parameter): every weight matrix, E, P, mixing's W1 and W2 are N(0, 2 /
 * (fan_in + fan_out)) with (fan_in, fan_out) = (columns, rows) of the stored
 * matrix; BERT4Rec (RecBole): the same tensors N(0, 0.02^2). Both: E's row 0
 * is zeroed; R is a truncated normal (redrawn beyond 2 sd) with sd 0.01, R1
 * and R2 with sd 0.1 / k^(1/4) (so R1 R2^T has sd 0.01; the FPARec code's
 * initialisers); biases 0; LayerNorm weights 1 and biases 0. Draws come from
 * one generator seeded by (seed, "init") in the order of the tensor table.
 *
 * LOSSES. SQ_LOSS_CE: softmax cross-entropy over all items 1..n_items at
 * every trained position (FPARec's sparse_ce; BERT4Rec: every masked
 * position); SQ_LOSS_BCE (SASRec only): -log sig(h.E_pos) - sum_k log(1 -
 * sig(h.E_neg_k)) with sampled negatives (original SASRec). Both are means
 * over the trained positions.
 *
 * SCORING (seqrec-score, validation): SASRec: a history's newest N items are
 * the input; the state of the newest position scores every item, h E^T. An
 * empty history is one padding token at position N - 1: the scores then
 * come from the position embedding alone (the same for every cold user).
 * BERT4Rec: the newest N - 1 items and a mask token at N - 1 (alone for an
 * empty history); head(h of the mask) E^T + ob.
 *
 * Like the ops, the model is written once over `real` and compiled twice:
 * float (lib/sasrec.c, the code that trains) and double
 * (lib/sasrec_f64.c, names with _f64, for the whole-model gradient check). */
#ifndef SQ_SASREC_H
#define SQ_SASREC_H

#include <stddef.h>
#include <stdint.h>

#include "attn_linear.h"
#include "attn_pos.h"
#include "batch.h"
#include "err.h"
#include "model.h"
#include "modelfile.h"

enum sq_backbone { SQ_BACKBONE_SASREC = 0, SQ_BACKBONE_BERT4REC = 1 };

/* The attention kinds of --attn (ATTENTION KINDS above). */
enum sq_attn_kind {
    SQ_AK_SOFTMAX = 0,
    SQ_AK_LINREC,
    SQ_AK_LINEAR,
    SQ_AK_EFFICIENT,
    SQ_AK_HYDRA,
    SQ_AK_POSITIONAL,
    SQ_AK_FPOSITIONAL,
    SQ_AK_AVERAGE,
    SQ_AK_LINEAR_ANNEAL,
    SQ_AK_EXP_ANNEAL,
    SQ_AK_MIXING,
    SQ_AK_N
};

/* "softmax", "linrec", ..., "mixing" (NULL out of range); parse: -1 when
 * unknown. */
const char *sq_attn_kind_name(int kind);
int sq_attn_kind_parse(const char *s);
/* "sasrec" / "bert4rec"; parse: -1 when unknown. */
const char *sq_backbone_name(int backbone);
int sq_backbone_parse(const char *s);

typedef struct {
    uint32_t n_items;
    int n_layers, n_heads, dim, ffn, max_len;
    double dropout;
    double ln_eps;
    int backbone;      /* SQ_BACKBONE_SASREC (0) or SQ_BACKBONE_BERT4REC */
    int attn;          /* SQ_AK_* (0: softmax) */
    int causal;        /* BERT4Rec: causal mixers; SASRec is always causal */
    int linrec_scale;  /* linrec: SQ_LINREC_CODE (0) or SQ_LINREC_PAPER */
    int rank;          /* fpositional: k of R1, R2 [H, N, k] */
    double decay;      /* exp-anneal: 0 < decay <= 1 */
} sq_sasrec_config;

/* The mask token of a BERT4Rec config: n_items + 1. */
static inline int sq_mask_id(const sq_sasrec_config *c)
{
    return (int)c->n_items + 1;
}

/* Whether the mixers of c are causal. */
static inline int sq_sasrec_causal(const sq_sasrec_config *c)
{
    return c->backbone == SQ_BACKBONE_SASREC || c->causal;
}

enum sq_loss { SQ_LOSS_CE = 0, SQ_LOSS_BCE = 1 };

/* The parameter tensors, in storage order. The first SQ_SASREC_N_DECAY
 * (matrices and embeddings) form the weight-decay group; biases and
 * LayerNorm parameters follow. A tensor the config does not use (another
 * kind's, another backbone's) has no elements and is not stored in model
 * files; a softmax SASRec has exactly the 20 tensors of the original
 * layout, in the same order. */
enum {
    SQ_SASREC_NT = 34,
    SQ_SASREC_N_DECAY = 14,
};

/* The tensor's name in model files ("item_emb", "wq", ...) and shape (an
 * unused tensor: one dimension of 0). */
const char *sq_sasrec_tensor_name(int i);
int sq_sasrec_tensor_shape(const sq_sasrec_config *c, int i, uint64_t shape[4]);
/* Element counts of the tensors; returns the total. */
size_t sq_sasrec_sizes(const sq_sasrec_config *c, size_t sizes[SQ_SASREC_NT]);

/* SQ_EX_USAGE with a message when the config cannot be built (dim not a
 * multiple of heads, non-positive sizes, dropout outside [0, 1), an unknown
 * kind, a rank or decay out of range for the kind, ...). */
int sq_sasrec_config_check(const sq_sasrec_config *c, sq_err *e);
/* The architecture keys of a model file: layers, heads, dim, ffn, max_len,
 * dropout, ln_eps, attn and the kind's options (linrec_scale, rank,
 * decay), causal for BERT4Rec ("model" and n_items are written by the
 * caller, with sq_model_set_data); read also takes n_items and the backbone
 * from "model" (a file without "attn" is softmax). */
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

/* The loaders of sq_model_load's table (model.h) for "sasrec" and
 * "bert4rec": copy the config and tensors of mf into a model that m owns. */
int sq_sasrec_load(sq_model *m, sq_modelfile *mf, sq_err *e);
int sq_bert4rec_load(sq_model *m, sq_modelfile *mf, sq_err *e);

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
/* An sq_model that scores with m (borrowed: freeing the view frees
 * nothing of m), e.g. for validation during training. */
void sq_sasrec_model_view(sq_model *out, const sq_sasrec *m);
/* The sq_sasrec behind a loaded "sasrec" or "bert4rec" model; NULL for any
 * other model. */
const sq_sasrec *sq_sasrec_of(const sq_model *m);

/* The attention weights of every layer for one history (its scoring input,
 * SCORING above: n rows, n <= N). On success *map is a malloc'd
 * [n_layers, H, n, n] array (layer l, head h, query row i, key row j at
 * ((l * H + h) * n + i) * n + j), *ids [n] the input ids (the mask token is
 * sq_mask_id) and *pos [n] their window positions (both malloc'd), *n_out =
 * n, *n_heads = H. The weights are what each head applies to the value rows
 * (rows of its output = A V):
 *   softmax, positional, fpositional, the fixed patterns: the probabilities
 *     (rows sum to 1, zero above the diagonal when causal);
 *   linrec, linear, efficient, hydra: the implied A_ij, found by running the
 *     kernel on unit value vectors (linear and efficient rows sum to 1;
 *     linrec and hydra have no normaliser);
 *   mixing (no values, not linear): the channel mean of the Jacobian
 *     d MIX_i[c] / d qin_j[c] (H = 1).
 * Only this one n x n per head is formed. */
int sq_sasrec_attention_map(const sq_sasrec *m, const uint32_t *hist, uint32_t len,
                            float **map, int **ids, int **pos, int *n_out,
                            int *n_heads, sq_err *e);

#elif defined(SQ_SASREC_DECLARE)

/* Pointers into one block, one per tensor (order = the tensor table). */
typedef struct {
    real *item_emb, *pos_emb;                      /* [V+1(+1), C], [N, C] */
    real *wq, *wk, *wv, *wo;                       /* [L, C, C] */
    real *w1, *w2;                                 /* [L, F, C], [L, C, F] */
    real *pa_r;                                    /* [L, H, N, N] */
    real *fpa_r1, *fpa_r2;                         /* [L, H, N, k] */
    real *mix_w1, *mix_w2;                         /* [L, N, N] */
    real *head_w;                                  /* [C, C] */
    real *bq, *bk, *bv, *bo, *b1, *b2;             /* [L, C] (b1: [L, F]) */
    real *ln1w, *ln1b, *ln2w, *ln2b;               /* [L, C] */
    real *lnfw, *lnfb;                             /* [C] */
    real *mix_b1, *mix_b2;                         /* [L, N] */
    real *emblnw, *emblnb;                         /* [C] */
    real *head_b, *headlnw, *headlnb;              /* [C] */
    real *out_b;                                   /* [V+1] */
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
 * per-layer arrays at l * cap.T * width (the mixer cache at l * cache_n).
 * Arrays a config does not use have no elements. Per block, SASRec:
 * ln1 = LN1(x), xmid = ln1 + projd, ln2 = LN2(xmid), x[l+1] = ln2 + h2d;
 * BERT4Rec: xmid = x + projd, ln1 = LN1(xmid), ln2 = ln1 + h2d,
 * x[l+1] = LN2(ln2). */
typedef struct {
    sq_sasrec_cap cap;
    void *mem;
    real *emb;                     /* [T, C] E*sqrt(C) + P (BERT4Rec: E + P) */
    real *embn, *embln_mean, *embln_rstd; /* BERT4Rec: LNe(emb) */
    real *x;                       /* [L+1, T, C] block inputs; x[L] last */
    real *ln1, *ln1_mean, *ln1_rstd;
    real *q, *k, *v, *atty, *proj, *projd, *xmid;
    real *cache;                   /* [L, cache_n] the mixers' caches */
    size_t cache_n;
    real *scratch;                 /* [scratch_n] shared by the layers */
    size_t scratch_n;
    real *ln2, *ln2_mean, *ln2_rstd;
    real *h1, *r, *rd, *h2, *h2d;  /* FFN, [L, T, F] for h1, r, rd */
    real *out, *lnf_mean, *lnf_rstd; /* [T, C] the states h */
    /* BERT4Rec output head on the n scored rows */
    real *hx, *hd, *hg, *hln, *hln_mean, *hln_rstd; /* [n, C] ([n] stats) */
    real *haug, *eaug;             /* [n, C+1] (hln, 1), [V+1, C+1] (E, ob) */
    uint8_t *m_emb, *m_att, *m_ffn1, *m_ffn2; /* dropout masks */
    /* training only */
    real *ce;                      /* sq_ce_full scratch */
    int ce_chunk;
    real *dout, *dx, *dy, *dxmid, *dln1, *dproj, *datty, *dq, *dk, *dv,
         *dh2, *dF1, *dF2, *dF3, *demb;
    real *dhaug, *deaug, *dhx, *dhd, *dhg; /* BERT4Rec head */
} R(sq_sasrec_work);

/* Allocates parameters (zero) for a checked config. */
int R(sq_sasrec_alloc)(R(sq_sasrec) *m, const sq_sasrec_config *c, sq_err *e);
void R(sq_sasrec_free)(R(sq_sasrec) *m);
/* The initialisation described above. */
void R(sq_sasrec_init_weights)(R(sq_sasrec) *m, uint64_t seed);

int R(sq_sasrec_work_alloc)(R(sq_sasrec_work) *w, const sq_sasrec_config *c,
                            const sq_sasrec_cap *cap, sq_err *e);
void R(sq_sasrec_work_free)(R(sq_sasrec_work) *w);

/* Forward pass of a packed batch (must fit w->cap): fills the states h
 * (SASRec: w->out [T, C]; BERT4Rec: x[L]). train != 0 applies dropout,
 * drawn from (seed, step, site, row). */
void R(sq_sasrec_forward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                          const sq_packed *b, int train, uint64_t seed,
                          uint64_t step);

/* The loss of the forward states over b's entries (mean over trained
 * entries, *count of them). With g != NULL (training workspace) it also
 * sets w->dout to d loss / d h and adds the output layer's gradient (E; for
 * BERT4Rec also the head and ob) to g. */
double R(sq_sasrec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                         const sq_packed *b, int loss, R(sq_sasrec) *g,
                         int *count);

/* Back-propagates w->dout through the model, adding into g (the caller
 * zeroes g once per step). Needs the forward of the same batch in w. */
void R(sq_sasrec_backward)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w,
                           const sq_packed *b, R(sq_sasrec) *g);

#endif
