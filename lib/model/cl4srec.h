/* cl4srec.h - CL4SRec's loss (lib/model/cl4srec.c), exported in both
 * precisions for the whole-model gradient check. */
#ifndef SQ_CL4SREC_H
#define SQ_CL4SREC_H

#include "sasrec.h"

/* The contrastive term's settings (cl4srec.c's options). */
typedef struct {
    double lambda, tau; /* weight and temperature */
    int cosine;         /* cosine similarity instead of dot */
    int distinct;       /* views of samples with the anchor's next item are
                           no negatives */
} sq_cl4srec_cl;

#define SQ_TWICE "cl4srec.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* The loss of a CONTRASTIVE VIEWS batch b (batch.h) whose forward is in w:
 * the backbone's next-item loss (`loss`: nextloss.h) of the
 * samples' entries plus cl->lambda InfoNCE (infonce.h) between the states of
 * the two views' newest rows. *count: the next-item entries. With g: sets
 * w->dout to d loss / d h and adds E's gradient to g (the caller then runs
 * the backbone's backward). scratch holds sq_infonce_scratch_size(b->B / 3,
 * C) reals, rows b->B ints. */
double R(sq_cl4srec_loss)(const R(sq_sasrec) *m, R(sq_sasrec_work) *w, const sq_packed *b,
                          sq_loss_spec loss, const sq_cl4srec_cl *cl, real *scratch, int *rows,
                          R(sq_sasrec) *g, int *count);

#endif
