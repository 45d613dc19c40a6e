/* mix_qkv.h - the Q/K/V/O projection that the softmax and linear kinds
 * share (mixer.h):
 *   Q = qin Wq^T + bq, K = kvin Wk^T + bk, V = kvin Wv^T + bv,
 *   MIX = Wo concat_h A_h(Q_h, K_h, V_h) + bo
 * with the kernel A of the kind. A layer's cache holds q, k, v and the
 * heads' output atty ([cap_T, C] each), then the kernel's own cache; the
 * scratch holds (training) dq, dk, dv, datty, then the kernel's scratch. */
#ifndef SQ_MIX_QKV_H
#define SQ_MIX_QKV_H

#include "mixer.h"

/* Wq, Wk, Wv, Wo [L, C, C], bq, bk, bv, bo [L, C]: the rows of P and G. */
enum { QKV_WQ, QKV_WK, QKV_WV, QKV_WO, QKV_BQ, QKV_BK, QKV_BV, QKV_BO, QKV_NT };
extern const sq_tensor_desc sq_qkv_tensors[QKV_NT];

size_t sq_qkv_cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap, size_t kernel);
size_t sq_qkv_scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap, size_t kernel);
/* The reals of a linear-family kernel's cache (scratch = 0) or scratch
 * (scratch = 1) for lattn_kind (attn_linear.h's sq_lattn_kind) at the
 * capacity cap; (size_t)-1 when out of memory (mix_linear.c; efficient-dwc
 * takes the efficient kernel's). */
size_t sq_mix_linear_kernel_size(const sq_mixer_env *env, const sq_mixer_cap *cap, int scratch,
                                 int lattn_kind);

#define SQ_TWICE "mix_qkv.h"
#include "twice.h"

/* The map of a QKV kind: probes its kernel (core writes atty from q, k, v). */
int sq_qkv_map(const sq_mix_args *a, void (*core)(const sq_mix_args *a, float *out),
               float *map);

#elif defined(SQ_DECLARE_TWICE)

/* The layer's buffers, carved from a->cache and a->scratch. */
typedef struct {
    real *q, *k, *v, *atty, *kcache;  /* cache */
    real *kscratch, *dq, *dk, *dv, *datty; /* scratch (d*: training) */
} R(sq_qkv_bufs);

void R(sq_qkv_carve)(const R(sq_mix_args) *a, R(sq_qkv_bufs) *q);
/* q, k, v of the layer from qin and kvin. */
void R(sq_qkv_in)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q, const real *qin,
                  const real *kvin);
/* out = atty Wo^T + bo. */
void R(sq_qkv_out)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q, real *out);
/* datty = d out through Wo (adding Wo's and bo's gradients). */
void R(sq_qkv_out_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q,
                            const real *dout);
/* Back through the projections from dq, dk, dv into dqin, dkvin and G. */
void R(sq_qkv_in_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q,
                           const real *qin, const real *kvin, real *dqin, real *dkvin);

/* dq, dk, dv zeroed: for a kernel's backward whose ops add to them. */
void R(sq_qkv_zero_grads)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q);

/* A kind's kernel: forward from the layer's q, k, v to the heads' output
 * out (carving its buffers itself: the attention map runs it on probe
 * values); backward from q->datty into q->dq, dk, dv, which it writes
 * (after sq_qkv_zero_grads where its ops add: a kernel whose op writes its
 * gradients spares the GPU three memsets and three reads). */
typedef void (*R(sq_qkv_kernel))(const R(sq_mix_args) *a, real *out);
typedef void (*R(sq_qkv_kernel_bwd))(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q);
/* The whole mixer of a QKV kind: projections, its kernel, output. */
void R(sq_qkv_forward)(const R(sq_mix_args) *a, real *out, const real *qin, const real *kvin,
                       R(sq_qkv_kernel) kernel);
void R(sq_qkv_backward)(const R(sq_mix_args) *a, const real *dout, const real *qin,
                        const real *kvin, real *dqin, real *dkvin,
                        R(sq_qkv_kernel_bwd) kernel);

#endif
