/* mix_mixing.c - mixing: FPARec's Token Mixing baseline (MLP-Mixer token
 * mixing, masked when causal; the kernel and its equation: attn_pos.h).
 * W1, W2 [L, N, N], b1, b2 [L, N]; no values. The cache holds u and
 * gelu(u); the scratch (training) du. O(n^2 C) time. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_pos.h"
#include "mixer.h"
#include "ops.h"
#include "real.h"

enum { M_W1, M_W2, M_B1, M_B2 };

void R(sq_mix_mixing_forward)(const R(sq_mix_args) *a, real *out, const real *qin,
                              const real *kvin)
{
    (void)kvin;
    const sq_mixer_env *env = a->env;
    const sq_packed *b = a->b;
    R(sq_mixing_forward)(a->cx, out, a->cache, qin, env->dim, a->P[M_W1], a->P[M_B1],
                         a->P[M_W2], a->P[M_B2], b->off, b->pos, b->B, env->dim,
                         env->max_len, env->causal);
}

void R(sq_mix_mixing_backward)(const R(sq_mix_args) *a, const real *out, const real *dout,
                               const real *qin, const real *kvin, real *dqin, real *dkvin)
{
    (void)out;
    (void)kvin;
    (void)dkvin;
    const sq_mixer_env *env = a->env;
    const sq_packed *b = a->b;
    R(sq_mixing_backward)(a->cx, dqin, a->G[M_W1], a->G[M_B1], a->G[M_W2], a->G[M_B2],
                          a->scratch, dout, qin, a->cache, a->P[M_W1], a->P[M_W2], env->dim,
                          b->off, b->pos, b->B, env->dim, env->max_len, env->causal);
}

#if !SQ_REAL_IS_F64

SQ_MIXER_FUNCS(sq_mix_mixing_forward, sq_mix_mixing_backward)

static const sq_tensor_desc tensors[] = {
    {"mix_w1", 11, 1, SQ_INIT_WEIGHT, "LNN"}, {"mix_w2", 12, 1, SQ_INIT_WEIGHT, "LNN"},
    {"mix_b1", 26, 0, SQ_INIT_ZERO, "LN"},    {"mix_b2", 27, 0, SQ_INIT_ZERO, "LN"},
};

static size_t cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    return sq_mixing_cache_size(cap->T, env->dim);
}

static size_t scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    return sq_mixing_scratch_size(cap->T, env->dim);
}

static int check(const sq_mixer_env *env, sq_err *e)
{
    uint64_t N = (uint64_t)env->max_len;
    if (2 * N * N * (uint64_t)env->layers > (uint64_t)1 << 34)
        return sq_fail(e, SQ_EX_USAGE, "--max-len %d is too long for --attn mixing",
                       env->max_len);
    return 0;
}

/* No values and not linear: the map is the channel mean of the Jacobian
 * d MIX_i[c] / d qin_j[c] of the segment's n rows: J_ij = sum_t W2[p_i,
 * p_t] g_t W1[p_t, p_j], g_t = mean_c gelu'(u_t[c]), t over K(i), j over
 * K(t). One map (H = 1). */
static int map(const sq_mix_args *a, const float *qin, float *out, sq_err *e)
{
    (void)qin;
    (void)e;
    const sq_mixer_env *env = a->env;
    int C = env->dim, N = env->max_len, n = a->b->T;
    const int *pos = a->b->pos;
    const float *u = a->cache, *W1 = a->P[M_W1], *W2 = a->P[M_W2];
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            int t0 = env->causal ? j : 0, t1 = env->causal ? i : n - 1;
            for (int t = t0; t <= t1; t++) {
                double gm = 0;
                for (int k = 0; k < C; k++)
                    gm += sq_gelu_grad(u[(size_t)t * C + k]);
                s += (double)W2[(size_t)pos[i] * N + pos[t]] * (gm / C) *
                     (double)W1[(size_t)pos[t] * N + pos[j]];
            }
            out[(size_t)i * n + j] = (float)s;
        }
    return 1;
}

const sq_mixer sq_mixer_mixing = {
    .name = "mixing",
    .help = "masked token-mixing MLP, O(N^2 d)",
    .tensors = tensors,
    .n_tensors = 4,
    .check = check,
    .cache_size = cache_size,
    .scratch_size = scratch_size,
    .forward = sq_mix_mixing_forward,
    .backward = sq_mix_mixing_backward,
    .forward_f64 = sq_mix_mixing_forward_f64,
    .backward_f64 = sq_mix_mixing_backward_f64,
    .map = map,
    .signed_map = 1,
    .gpu = 1,
};

#endif
