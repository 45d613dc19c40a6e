/* infonce.h - the InfoNCE (NT-Xent) loss between two views of each of U
 * sequences (CL4SRec, Xie et al. ICDE 2022; RecBole's info_nce with sim =
 * dot):
 *
 *     z = [h_a(1) .. h_a(U), h_b(1) .. h_b(U)]     M = 2U vectors of C reals
 *     S_ik = z_i . z_k / tau
 *     L = 1/M sum_i ( log sum_{k != i} e^S_ik - S_i,p(i) )
 *
 * p(i) the other view of the same sequence (i +- U): each anchor's
 * positive is that view, its negatives the other M - 2 views of the batch.
 * With P_ik = softmax over k != i of S_ik (P_ii = 0) and
 * G_ik = (P_ik - [k = p(i)]) / M:
 *
 *     dL/dz = (G + G^T) z / tau
 *
 * Two options (sq_infonce_opt):
 *   cosine  z_i = h_i / |h_i| (l2norm.h; cosine similarity, bounded by 1/tau): the
 *           gradient through the normalisation is
 *           dL/dh_i = (g_i - z_i (z_i . g_i)) / |h_i|, g_i = dL/dz_i;
 *   label   one label a pair (its sample's next item): a view whose label
 *           is the anchor's is left out of the anchor's negatives (the sum
 *           over k != i skips it, P_ik = 0), as DuoRec's and the false-
 *           negative literature's masking; the positive always stays.
 *
 * Conventions of ops.h: the op context first, gradients ADDED, results
 * bitwise the same for any thread count (sequential loops in a fixed
 * order; the GEMMs are the backend's). */
#ifndef SQ_INFONCE_H
#define SQ_INFONCE_H

#include <stddef.h>

#include "ctx.h"

/* Reals of scratch the forward fills and the backward reads, for U pairs
 * of C reals: z, dz and the raw states [2U, C], S/G [2U, 2U], the norms
 * [2U]. */
size_t sq_infonce_scratch_size(int U, int C);

typedef struct {
    double tau;       /* temperature, > 0 */
    int cosine;       /* 1: cosine similarity; 0: dot product (RecBole's) */
    const int *label; /* [U] or NULL: same-label views are no negatives */
} sq_infonce_opt;

#define SQ_TWICE "infonce.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* The two pieces of the loss between its GEMMs, on S [M, M] (M = 2U) in
 * place. sq_nce_softmax: each row i becomes P_i (the softmax over the kept
 * k: not i, and with label[U] (or NULL) not a same-label view other than
 * the positive), returning sum_i (lse_i - S_i,p(i)) / div, in double (the division
 * its own: a CUDA graph's step keeps the value on the device).
 * sq_nce_grad: S = (S - onehot(p)) g, then S + S^T. */
double R(sq_nce_softmax)(const sq_ctx *cx, real *S, int U, const int *label, double div);
void R(sq_nce_grad)(const sq_ctx *cx, real *S, int U, real g);
/* The views of pair i are rows ra[i] and rb[i] of h [*, C] (U >= 2: with
 * one pair there is no negative, and the loss is 0). Returns L and keeps z
 * and P in scratch for the backward. */
double R(sq_infonce_forward)(const sq_ctx *cx, real *scratch, const real *h, const int *ra,
                             const int *rb, int U, int C, const sq_infonce_opt *o);
/* ADDS dloss * dL/dh to dh (rows ra[i], rb[i]); needs the forward's scratch
 * (overwrites its S part). */
void R(sq_infonce_backward)(const sq_ctx *cx, real *dh, real *scratch, const int *ra,
                            const int *rb, int U, int C, const sq_infonce_opt *o,
                            real dloss);

#endif
