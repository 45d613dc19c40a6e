/* mix_softmax.c - softmax attention (Vaswani et al.; SASRec, BERT4Rec):
 * per head out_i = sum_{j in K(i)} softmax_j(q_i.k_j / sqrt(hs)) v_j on the
 * Q/K/V/O projection (mix_qkv.h); the cache keeps the probabilities,
 * H sum(len^2) reals. O(n^2 C) time. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "mix_qkv.h"
#include "ops.h"
#include "real.h"

SQ_MIXER_FUNCS(sq_mix_softmax_forward, sq_mix_softmax_backward)

static void R(core)(const R(sq_mix_args) *a, real *out)
{
    const sq_mixer_env *env = a->env;
    R(sq_qkv_bufs) q;
    R(sq_qkv_carve)(a, &q);
    R(sq_attention_forward)(a->cx, out, q.kcache, q.q, q.k, q.v, env->dim, a->b->off,
                            a->b->B, env->heads, env->dim, env->causal);
}

static void R(core_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q)
{
    const sq_mixer_env *env = a->env;
    R(sq_attention_backward_to)(a->cx, q->dq, q->dk, q->dv, q->datty, q->atty, q->q, q->k,
                                q->v, q->kcache, env->dim, a->b->off, a->b->B, env->heads,
                                env->dim, env->causal);
}

void R(sq_mix_softmax_forward)(const R(sq_mix_args) *a, real *out, const real *qin,
                               const real *kvin)
{
    R(sq_qkv_forward)(a, out, qin, kvin, R(core));
}

void R(sq_mix_softmax_backward)(const R(sq_mix_args) *a, const real *out, const real *dout,
                                const real *qin, const real *kvin, real *dqin, real *dkvin)
{
    (void)out;
    R(sq_qkv_backward)(a, dout, qin, kvin, dqin, dkvin, R(core_backward));
}

#if !SQ_REAL_IS_F64

/* The CPU keeps the probabilities (H sum len^2); a GPU the rows'
 * log-sum-exps (T H: cuda/k_attn.cu recomputes the probabilities in the
 * backward), so its memory grows linearly in N. */
static size_t cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t kept = cap->gpu ? (size_t)cap->T : cap->att;
    return sq_qkv_cache_size(env, cap, (size_t)env->heads * kept);
}

static size_t scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    return sq_qkv_scratch_size(env, cap, 0);
}

static int map(const sq_mix_args *a, const float *qin, float *m, sq_err *e)
{
    (void)qin;
    (void)e;
    return sq_qkv_map(a, core, m);
}

const sq_mixer sq_mixer_softmax = {
    .name = "softmax",
    .help = "scaled dot product, O(N^2 d)",
    .tensors = sq_qkv_tensors,
    .n_tensors = QKV_NT,
    .cache_size = cache_size,
    .scratch_size = scratch_size,
    .forward = sq_mix_softmax_forward,
    .backward = sq_mix_softmax_backward,
    .forward_f64 = sq_mix_softmax_forward_f64,
    .backward_f64 = sq_mix_softmax_backward_f64,
    .map = map,
    .gpu = 1,
};

#endif
