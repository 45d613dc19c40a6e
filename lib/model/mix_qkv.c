/* mix_qkv.c - the Q/K/V/O projection of the softmax and linear kinds
 * (mix_qkv.h). Written over `real`, compiled as float and double. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "mix_qkv.h"
#include "ops.h"
#include "real.h"

#if !SQ_REAL_IS_F64

const sq_tensor_desc sq_qkv_tensors[QKV_NT] = {
    {"wq", 2, 1, SQ_INIT_WEIGHT, "LCC"}, {"wk", 3, 1, SQ_INIT_WEIGHT, "LCC"},
    {"wv", 4, 1, SQ_INIT_WEIGHT, "LCC"}, {"wo", 5, 1, SQ_INIT_WEIGHT, "LCC"},
    {"bq", 14, 0, SQ_INIT_ZERO, "LC"},   {"bk", 15, 0, SQ_INIT_ZERO, "LC"},
    {"bv", 16, 0, SQ_INIT_ZERO, "LC"},   {"bo", 17, 0, SQ_INIT_ZERO, "LC"},
};

static size_t tc(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    return (size_t)cap->T * (size_t)env->dim;
}

size_t sq_qkv_cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap, size_t kernel)
{
    return 4 * tc(env, cap) + kernel;
}

size_t sq_qkv_scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap, size_t kernel)
{
    return kernel + (cap->train ? 4 * tc(env, cap) : 0);
}

int sq_qkv_map(const sq_mix_args *a, void (*core)(const sq_mix_args *a, float *out),
               float *map)
{
    sq_qkv_bufs q;
    sq_qkv_carve(a, &q);
    return sq_mixer_probe(a, q.v, q.atty, core, map);
}

#endif

void R(sq_qkv_carve)(const R(sq_mix_args) *a, R(sq_qkv_bufs) *q)
{
    size_t TC = (size_t)a->cap_T * a->env->dim;
    q->q = a->cache;
    q->k = q->q + TC;
    q->v = q->k + TC;
    q->atty = q->v + TC;
    q->kcache = q->atty + TC;
    /* scratch: the gradients (training workspaces only), then the kernel's */
    q->dq = a->scratch;
    q->dk = q->dq + TC;
    q->dv = q->dk + TC;
    q->datty = q->dv + TC;
    q->kscratch = a->train ? q->datty + TC : a->scratch;
}

void R(sq_qkv_in)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q, const real *qin,
                  const real *kvin)
{
    int T = a->b->T, C = a->env->dim;
    R(sq_linear_forward)(a->cx, q->q, qin, a->P[QKV_WQ], a->P[QKV_BQ], T, C, C);
    R(sq_linear_forward)(a->cx, q->k, kvin, a->P[QKV_WK], a->P[QKV_BK], T, C, C);
    R(sq_linear_forward)(a->cx, q->v, kvin, a->P[QKV_WV], a->P[QKV_BV], T, C, C);
}

void R(sq_qkv_out)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q, real *out)
{
    int T = a->b->T, C = a->env->dim;
    R(sq_linear_forward)(a->cx, out, q->atty, a->P[QKV_WO], a->P[QKV_BO], T, C, C);
}

void R(sq_qkv_out_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q,
                            const real *dout)
{
    int T = a->b->T, C = a->env->dim;
    R(sq_linear_backward_to)(a->cx, q->datty, a->G[QKV_WO], a->G[QKV_BO], dout, q->atty,
                             a->P[QKV_WO], T, C, C);
}

void R(sq_qkv_zero_grads)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q)
{
    size_t TC = (size_t)a->b->T * a->env->dim;
    R(sq_zero)(a->cx, q->dq, TC);
    R(sq_zero)(a->cx, q->dk, TC);
    R(sq_zero)(a->cx, q->dv, TC);
}

void R(sq_qkv_in_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q,
                           const real *qin, const real *kvin, real *dqin, real *dkvin)
{
    int T = a->b->T, C = a->env->dim;
    R(sq_linear_backward)(a->cx, dqin, a->G[QKV_WQ], a->G[QKV_BQ], q->dq, qin, a->P[QKV_WQ],
                          T, C, C);
    R(sq_linear_backward)(a->cx, dkvin, a->G[QKV_WK], a->G[QKV_BK], q->dk, kvin,
                          a->P[QKV_WK], T, C, C);
    R(sq_linear_backward)(a->cx, dkvin, a->G[QKV_WV], a->G[QKV_BV], q->dv, kvin,
                          a->P[QKV_WV], T, C, C);
}

void R(sq_qkv_forward)(const R(sq_mix_args) *a, real *out, const real *qin, const real *kvin,
                       R(sq_qkv_kernel) kernel)
{
    R(sq_qkv_bufs) q;
    R(sq_qkv_carve)(a, &q);
    R(sq_qkv_in)(a, &q, qin, kvin);
    kernel(a, q.atty);
    R(sq_qkv_out)(a, &q, out);
}

void R(sq_qkv_backward)(const R(sq_mix_args) *a, const real *dout, const real *qin,
                        const real *kvin, real *dqin, real *dkvin,
                        R(sq_qkv_kernel_bwd) kernel)
{
    R(sq_qkv_bufs) q;
    R(sq_qkv_carve)(a, &q);
    R(sq_qkv_out_backward)(a, &q, dout);
    kernel(a, &q);
    R(sq_qkv_in_backward)(a, &q, qin, kvin, dqin, dkvin);
}
