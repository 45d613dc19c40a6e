/* elastic.h - ELASTIC (elastic.txt: "Efficient Linear Attention for
 * SequenTial Interest Compression"): linear dispatcher attention over k
 * interest tokens retrieved from a product-key memory.
 *
 * The authors published no code; every reading of the text below that the
 * paper leaves open is marked DECISION and recorded in seqrec-train(1).
 *
 *   x0 = dropout(E[item] * sqrt(C) + P[pos])      pos = N - len + t (SASRec)
 *
 *   QUERY NETWORK (eq. 4), on x0, A levels (A = the least a with
 *   stride^a >= N, at least 1): level j reshapes its input rows to
 *   (rows / stride, stride * C) and maps them to C:
 *       Z = reshape(Y_{j-1})        groups of `stride` consecutive rows of
 *                                   one sequence; DECISION: a sequence is
 *                                   left-padded with zero rows to a multiple
 *                                   of stride (the newest row always ends
 *                                   the last group, as positions align to
 *                                   the newest item), never padded to N
 *       U = Z Wj^T + bj
 *       Y_j = U + Wo MHA(LN(U) [Wq Wk Wv]) + bo   (bidirectional inside
 *                                   the sequence's groups; DECISION: the
 *                                   pre-LN residual form of every block
 *                                   here, for stable depth)
 *   so that each sequence ends with one row: q_raw. --query mean (Table 3,
 *   "w/o Query Net"): q_raw = the mean of the sequence's rows of x0.
 *       q = LNq(q_raw)          DECISION: Lample et al. batch-normalise the
 *                               query; LayerNorm is batch-independent
 *
 *   INTEREST MEMORY RETRIEVAL (eq. 5-7, Algorithm 1): sub-keys C1, C2
 *   [pool, C/2], experts [pool^2, C]; the k best experts of q (pkm.h) are
 *   the user's k interest tokens P^0 [k, C]. DECISION: with
 *   --expert-weights softmax (default) expert m is scaled by the softmax of
 *   the k scores (Lample et al.), so the keys and the query network get a
 *   gradient; `none` is Algorithm 1's plain gather, where they get none.
 *   --no-imr (Table 3): P^0 is one learned [k, C] shared by all users (the
 *   query network is then unused).
 *
 *   LINEAR DISPATCHER ATTENTION, per layer l (eq. 2-3), with
 *   CA(a, b) = Wo MHA(LNa(a) Wq, LNb(b) [Wk Wv]) + bo (cross-attention of
 *   attn_cross.h: every token of one user against the other set's tokens
 *   of the same user):
 *       P = P + dropout(CA_agg(P, X))     aggregation (eq. 2)
 *       P = P + dropout(FFN_p(LN(P)))
 *       X = X + dropout(CA_dis(X, P))     dispatch (eq. 3)
 *       X = X + dropout(FFN_x(LN(X)))
 *   FFN(y) = W2 relu(W1 y + b1) + b2. DECISION: residuals around the
 *   attentions too (the paper writes P^{i+1} = Attention(...) and puts the
 *   residual on the feed-forward), and P's feed-forward sits before the
 *   dispatch so that every parameter reaches the output (after it, the last
 *   layer's would be unused). --no-dispatcher (Table 3): DECISION, the
 *   text leaves it open: the aggregation is dropped, so the sequence reads
 *   the retrieved experts only (P = P^0 through the feed-forwards).
 *   Cost O(N k C) per layer, never N x N.
 *
 *   h = LNf(X); score(item i) = h . E[i] (tied; eq. 8), softmax
 *   cross-entropy over all items (eq. 9-10).
 *
 * LEAKAGE. Every token of P sees every input position, so the output at
 * position t depends on items after t: only the LAST position of an input
 * may be trained (DECISION). ELASTIC therefore trains prefixes: seqrec-train
 * --target random (its default: one random prefix per user and epoch) or
 * --target last (every prefix, RecBole's samples); --target all is refused.
 * Scoring uses the newest position, as every model here does.
 *
 * Written over `real` and compiled twice (float, and double as _f64, for
 * the finite-difference checks); every array is touched through ops. */
#ifndef SQ_ELASTIC_H
#define SQ_ELASTIC_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"
#include "ctx.h"
#include "err.h"
#include "model.h"
#include "nextloss.h"
#include "tensor.h"

enum { SQ_ELASTIC_QUERY_NET = 0, SQ_ELASTIC_QUERY_MEAN = 1 };
enum { SQ_ELASTIC_W_SOFTMAX = 0, SQ_ELASTIC_W_NONE = 1 };

typedef struct {
    uint32_t n_items;
    int n_layers, n_heads, dim, ffn, max_len;
    double dropout, ln_eps;
    int pool;          /* sub-keys per half: a pool of pool x pool experts */
    int topk;          /* k: experts retrieved = interest tokens */
    int stride;        /* the query network's pooling stride */
    int query;         /* SQ_ELASTIC_QUERY_NET or _MEAN */
    int weights;       /* SQ_ELASTIC_W_SOFTMAX or _NONE */
    int no_imr, no_dispatcher;
} sq_elastic_config;

/* Levels of the query network: the least a >= 1 with stride^a >= max_len. */
int sq_elastic_levels(const sq_elastic_config *c);

/* The tensors: X(name, decay, init, shape, use), use ALL, QNET (the query
 * network: IMR with --query net), IMR, NOIMR, AGG (the aggregation). Shape
 * symbols: W n_items + 1, N max_len, C dim, F ffn, L layers, A query
 * levels, S stride * C, T 3C, U 2C, P pool, D C / 2, E pool^2, M topk.
 * Storage order = table order. */
#define SQ_ELASTIC_TENSORS(X)                                         \
    X(item_emb, 1, SQ_INIT_WEIGHT, "WC", ALL)                         \
    X(pos_emb, 1, SQ_INIT_WEIGHT, "NC", ALL)                          \
    X(qn_w, 1, SQ_INIT_WEIGHT, "ACS", QNET)                           \
    X(qn_b, 0, SQ_INIT_ZERO, "AC", QNET)                              \
    X(qn_ln_w, 0, SQ_INIT_ONE, "AC", QNET)                            \
    X(qn_ln_b, 0, SQ_INIT_ZERO, "AC", QNET)                           \
    X(qn_qkv, 1, SQ_INIT_WEIGHT, "ATC", QNET)                         \
    X(qn_o, 1, SQ_INIT_WEIGHT, "ACC", QNET)                           \
    X(qn_ob, 0, SQ_INIT_ZERO, "AC", QNET)                             \
    X(q_ln_w, 0, SQ_INIT_ONE, "C", IMR)                               \
    X(q_ln_b, 0, SQ_INIT_ZERO, "C", IMR)                              \
    X(keys1, 1, SQ_INIT_WEIGHT, "PD", IMR)                            \
    X(keys2, 1, SQ_INIT_WEIGHT, "PD", IMR)                            \
    X(experts, 1, SQ_INIT_WEIGHT, "EC", IMR)                          \
    X(p0, 1, SQ_INIT_WEIGHT, "MC", NOIMR)                             \
    X(ag_lnq_w, 0, SQ_INIT_ONE, "LC", AGG)                            \
    X(ag_lnq_b, 0, SQ_INIT_ZERO, "LC", AGG)                           \
    X(ag_lnk_w, 0, SQ_INIT_ONE, "LC", AGG)                            \
    X(ag_lnk_b, 0, SQ_INIT_ZERO, "LC", AGG)                           \
    X(ag_q, 1, SQ_INIT_WEIGHT, "LCC", AGG)                            \
    X(ag_kv, 1, SQ_INIT_WEIGHT, "LUC", AGG)                           \
    X(ag_o, 1, SQ_INIT_WEIGHT, "LCC", AGG)                            \
    X(ag_ob, 0, SQ_INIT_ZERO, "LC", AGG)                              \
    X(pf_ln_w, 0, SQ_INIT_ONE, "LC", ALL)                             \
    X(pf_ln_b, 0, SQ_INIT_ZERO, "LC", ALL)                            \
    X(pf_w1, 1, SQ_INIT_WEIGHT, "LFC", ALL)                           \
    X(pf_b1, 0, SQ_INIT_ZERO, "LF", ALL)                              \
    X(pf_w2, 1, SQ_INIT_WEIGHT, "LCF", ALL)                           \
    X(pf_b2, 0, SQ_INIT_ZERO, "LC", ALL)                              \
    X(dp_lnq_w, 0, SQ_INIT_ONE, "LC", ALL)                            \
    X(dp_lnq_b, 0, SQ_INIT_ZERO, "LC", ALL)                           \
    X(dp_lnk_w, 0, SQ_INIT_ONE, "LC", ALL)                            \
    X(dp_lnk_b, 0, SQ_INIT_ZERO, "LC", ALL)                           \
    X(dp_q, 1, SQ_INIT_WEIGHT, "LCC", ALL)                            \
    X(dp_kv, 1, SQ_INIT_WEIGHT, "LUC", ALL)                           \
    X(dp_o, 1, SQ_INIT_WEIGHT, "LCC", ALL)                            \
    X(dp_ob, 0, SQ_INIT_ZERO, "LC", ALL)                              \
    X(xf_ln_w, 0, SQ_INIT_ONE, "LC", ALL)                             \
    X(xf_ln_b, 0, SQ_INIT_ZERO, "LC", ALL)                            \
    X(xf_w1, 1, SQ_INIT_WEIGHT, "LFC", ALL)                           \
    X(xf_b1, 0, SQ_INIT_ZERO, "LF", ALL)                              \
    X(xf_w2, 1, SQ_INIT_WEIGHT, "LCF", ALL)                           \
    X(xf_b2, 0, SQ_INIT_ZERO, "LC", ALL)                              \
    X(lnf_w, 0, SQ_INIT_ONE, "C", ALL)                                \
    X(lnf_b, 0, SQ_INIT_ZERO, "C", ALL)

#define SQ_ELASTIC_T_ENUM(name, ...) SQ_ET_##name,
enum { SQ_ELASTIC_TENSORS(SQ_ELASTIC_T_ENUM) SQ_ELASTIC_NT };
#undef SQ_ELASTIC_T_ENUM

extern const sq_model_def sq_model_elastic;

/* seqrec-train(1)'s defaults. */
void sq_elastic_defaults(sq_elastic_config *c);
/* SQ_EX_USAGE naming the option when c cannot be built. */
int sq_elastic_config_check(const sq_elastic_config *c, sq_err *e);
/* The tensors of c (the table above, resolved). */
int sq_elastic_tensor_set(const sq_elastic_config *c, sq_tensor_set *s, sq_err *e);

/* Capacity of a workspace: most sequences, token rows, loss entries, the
 * longest sequence, and whether it holds the backward buffers. fixed: the
 * query network runs each level on the most groups a batch of its T rows
 * and B sequences can have (FIXED LEVELS below); sq_elastic_work_alloc
 * sets it on a GPU. */
typedef struct {
    int B, T, n, N;
    int train;
    int fixed;
} sq_elastic_cap;

#define SQ_TWICE "elastic.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

typedef struct {
    union {
        struct {
#define SQ_ELASTIC_T_PTR(name, ...) real *name;
            SQ_ELASTIC_TENSORS(SQ_ELASTIC_T_PTR)
#undef SQ_ELASTIC_T_PTR
        };
        real *t[SQ_ELASTIC_NT];
    };
} R(sq_elastic_params);

/* Parameters (or gradients, or Adam moments) in one block of cx's memory. */
typedef struct {
    sq_elastic_config cfg;
    sq_ctx cx;
    sq_tensor_set ts;
    size_t n;
    real *mem;
    R(sq_elastic_params) p;
} R(sq_elastic);

/* Activations of one cross-attention sublayer, out = xq + dropout(CA(xq,
 * xk)) (CA above): q-side rows [Tq, C], k-side [Tk, C]. */
typedef struct {
    real *lnq, *mq, *rq, *lnk, *mk, *rk;
    real *q, *kv, *a, *o, *att;
    uint8_t *m;
} R(sq_elastic_xatt);

/* Activations of one feed-forward sublayer, out = x + dropout(FFN(LN(x))). */
typedef struct {
    real *ln, *mean, *rstd, *h1, *r, *h2;
    uint8_t *m;
} R(sq_elastic_ffn);

/* One level of the query network.
 *
 * FIXED LEVELS (cap.fixed, on a GPU): a CUDA graph's launches may depend on
 * the batch's shapes alone (HACKING.md "CUDA graphs"), but a level's group
 * count follows the sequences' lengths. So level j runs on the most groups
 * of any batch of the shapes, rows_j = min(rows_(j-1) / stride + B,
 * rows_(j-1)) (rows_(-1) = T; sum ceil(n_s / stride) is at most that): the
 * groups beyond the batch's own are dummies that gather the zero row, each
 * a segment of its own after the B sequences' (segs = B + rows_j, the
 * unused ones empty). Nothing reads a dummy's output, so its gradient is
 * an exact zero, and so is all it adds to the parameters' gradients. */
typedef struct {
    real *z, *u, *ln, *mean, *rstd, *qkv, *att, *a, *y; /* y: [rows + 1, C] */
    int *idx;    /* host: [rows * stride] the gathered input rows (pad: the zero row) */
    int *off;    /* host: [segs + 1] the groups of each sequence, then the dummies' */
    int rows, segs, cap;
} R(sq_elastic_level);

/* The workspace of one batch (and, for training, its gradients). */
typedef struct {
    sq_elastic_cap cap;
    sq_ctx cx;
    void *mem;
    void *host;                    /* the host ints below (offp, offn, the levels'
                                      idx and off), staged each forward on a GPU */
    size_t host_n;                 /* ints in host */
    int levels;
    int *offp;                     /* [B + 1] the interest tokens: b * k */
    int *offn;                     /* [B + 1] the output rows of each sequence */
    int grouped;                   /* the batch's entries are grouped by sequence */
    int *pkm_idx;                  /* [B, k] the retrieved experts, on cx (the op
                                      writes them: device memory on a GPU) */
    real *emb, *x0;                /* [T + 1, C]; x0's row T is kept zero */
    uint8_t *m_emb;
    R(sq_elastic_level) lev[24];
    real *qraw, *q, *q_mean, *q_rstd;   /* [B, C] */
    real *pkm_cache, *pkm_scratch;
    real *p0;                      /* [B k, C] */
    real *X, *P;                   /* [L + 1] layers of [T, C], [Bk, C]; X[L]
                                      holds the output rows only (OUTPUT ROWS) */
    real *Xg;                      /* [n, C] the last layer's input rows */
    real *Pmid, *Xmid;             /* [L] after the aggregation, the dispatch */
    R(sq_elastic_xatt) ag[64], dp[64];
    R(sq_elastic_ffn) pf[64], xf[64];
    real *out, *lnf_mean, *lnf_rstd; /* [n, C]: h of the batch's entries, in order */
    /* training only */
    real *ce;
    int ce_chunk;
    real *dX, *dP;                 /* running gradients of X and P */
    real *dXg;                     /* [n, C] the last layer's, on its rows */
    real *sx[4], *sp[4];           /* scratch: [T, max(2C, F)], [Bk, max(2C, F)] */
    real *dq, *dqraw;              /* [B, C] */
    real *dy, *dz;                 /* query net: [cap0 + 1, C], [cap0 * stride, C] */
    real *sl[3];                   /* query net scratch [cap0, 3C] */
} R(sq_elastic_work);

int R(sq_elastic_alloc_on)(R(sq_elastic) *m, const sq_elastic_config *c, const sq_ctx *cx,
                           sq_err *e);
void R(sq_elastic_free)(R(sq_elastic) *m);
/* Xavier normal on every weight (SASRec.pytorch's rule), the padding row
 * of E zeroed; host memory. */
void R(sq_elastic_init_weights)(R(sq_elastic) *m, uint64_t seed);

int R(sq_elastic_work_alloc)(R(sq_elastic_work) *w, const R(sq_elastic) *m,
                             const sq_elastic_cap *cap, sq_err *e);
void R(sq_elastic_work_free)(R(sq_elastic_work) *w);

/* Forward of a packed batch; train != 0 applies dropout drawn from (seed,
 * step, site, row).
 *
 * OUTPUT ROWS. Only b's entries are scored, so the last layer's sequence
 * side (the dispatch and the feed-forward, which nothing else reads) runs
 * on their rows only: w->out [b->n, C] is h of entry i (row b->rows[i]) in
 * entry order. (Entries not grouped by sequence run the last layer on every
 * row and gather them: the same values.) */
void R(sq_elastic_forward)(const R(sq_elastic) *m, R(sq_elastic_work) *w, const sq_packed *b,
                           int train, uint64_t seed, uint64_t step);
/* The next-item loss (nextloss.h: cross-entropy, or a sampled loss) over
 * b's entries (mean, *count of them); with g, also the output layer's
 * gradient and d loss / d h in w. */
double R(sq_elastic_loss)(const R(sq_elastic) *m, R(sq_elastic_work) *w, const sq_packed *b,
                          sq_loss_spec loss, R(sq_elastic) *g, int *count);
/* Back-propagates the loss's d h, adding into g. */
void R(sq_elastic_backward)(const R(sq_elastic) *m, R(sq_elastic_work) *w, const sq_packed *b,
                            R(sq_elastic) *g);

#endif
