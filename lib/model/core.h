/* core.h - CORE's math on the SASRec backbone (lib/model/core.c), in both
 * precisions for the whole-model gradient check. */
#ifndef SQ_CORE_H
#define SQ_CORE_H

#include <stdint.h>

#include "sasrec.h"

enum { SQ_CORE_TRM = 0, SQ_CORE_AVE = 1 };

/* CORE's own settings (its options). */
typedef struct {
    int encoder;         /* SQ_CORE_TRM or SQ_CORE_AVE */
    double tau;          /* temperature of the cosine logits */
    double item_dropout; /* on the item table the logits use (training) */
    double sess_dropout; /* on the embeddings the encoder pools (training) */
    sq_loss_spec loss;   /* training: the next-item loss (zero: full CE) */
} sq_core_opts;

/* The tensor of the alpha layer: w [1, C] (its bias cancels in the
 * softmax over positions). */
extern const sq_tensor_desc sq_core_tensors[1];

#define SQ_TWICE "core.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* CORE's activations (host or backend memory of cx) for up to T rows, B
 * sequences and V1 items of C reals. */
typedef struct {
    int T, B, V1, C, train;
    real *he, *hd;            /* [T, C] E[ids], after the session dropout */
    real *s, *alpha, *ds;     /* [T] scores w . o_t, weights, d scores */
    real *r, *rnorm, *q;      /* [B, C] pooled, [B] its norm, normalised / tau */
    real *Ed, *En, *enorm;    /* [V1, C] item table after dropout, normalised; [V1] */
    real *ce;                 /* sq_ce_full's scratch */
    int ce_chunk;
    real *dq, *dr, *dEn, *dEd;
    uint8_t *m_sess, *m_item; /* dropout masks [T, C], [V1, C] */
} R(sq_core_work);

int R(sq_core_work_alloc)(R(sq_core_work) *w, const sq_ctx *cx, int T, int B, int V1, int C,
                          int train, sq_err *e);
void R(sq_core_work_free)(R(sq_core_work) *w, const sq_ctx *cx);

/* The representations of b's sequences: w->q [B, C] = normalize(sum_t
 * alpha_t dropout(E[x_t])) / tau (the trm encoder runs the backbone's
 * forward into bw first). train: the dropouts, drawn from (seed, step). */
void R(sq_core_encode)(const R(sq_sasrec) *m, R(sq_sasrec_work) *bw, R(sq_core_work) *w,
                       const sq_packed *b, const sq_core_opts *o, int train, uint64_t seed,
                       uint64_t step);
/* The item table of the logits: w->En = normalize(dropout(E)) (no dropout
 * unless train). */
void R(sq_core_items)(const R(sq_sasrec) *m, R(sq_core_work) *w, const sq_core_opts *o,
                      int train, uint64_t seed, uint64_t step);

/* One training step's loss on b (entry i: sequence i's newest row, as
 * --target last and random give): encode, items, softmax cross-entropy of
 * q En^T over items 1..n_items (or o->loss's sampled loss), the mean over *count entries; with g
 * (and bw a training workspace) the whole backward, ADDING into g. */
double R(sq_core_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *bw, R(sq_core_work) *w,
                       const sq_packed *b, const sq_core_opts *o, uint64_t seed,
                       uint64_t step, R(sq_sasrec) *g, int *count);

#endif
