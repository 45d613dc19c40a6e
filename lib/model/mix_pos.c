/* mix_pos.c - the positional family: positional (PARec), fpositional
 * (FPARec) and the fixed patterns average, linear-anneal and exp-anneal
 * (FPARec Table 4; the kernels and their equations: attn_pos.h). No Q, K
 * or output projection: V = qin Wv^T + bv, MIX_i,h = sum_{j in K(i)}
 * a_h(p_i, p_j) V_j,h with learned (R, or R1 R2^T) or fixed weights.
 * A layer's cache holds v [cap_T, C], then the kernel's probabilities; the
 * scratch holds (training) dv, then the kernel's scratch. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_pos.h"
#include "mixer.h"
#include "ops.h"
#include "real.h"

#include <math.h>
#include <stdlib.h>

/* The rows of P and G: Wv [L, C, C], bv [L, C], then R [L, H, N, N]
 * (positional) or R1, R2 [L, H, N, k] (fpositional). */
enum { P_WV, P_BV, P_R1, P_R2 };

/* fpositional's options (mixer.h: sq_mixer_cfg's opt). */
typedef struct {
    int rank;                    /* --rank: k of R1 R2^T */
} fpa_options;
SQ_MIXER_OPTS_FIT(fpa_options);

/* exp-anneal's. */
typedef struct {
    double decay;                /* --decay: the weight's factor per step */
} exp_options;
SQ_MIXER_OPTS_FIT(exp_options);

static int rank_of(const sq_mixer_env *env)
{
    fpa_options o;
    SQ_MIXER_OPTS(env->m, fpa_options, o);
    return o.rank;
}

/* The fixed pattern's decay: exp-anneal's option; the others have none. */
static double decay_of(const sq_mixer_env *env)
{
    exp_options o = {0};
    if (env->self->variant == SQ_ATTN_EXP_ANNEAL)
        SQ_MIXER_OPTS(env->m, exp_options, o);
    return o.decay;
}

typedef struct {
    real *v, *kcache, *dv, *kscratch;
} R(bufs);

static void R(carve)(const R(sq_mix_args) *a, R(bufs) *u)
{
    size_t TC = (size_t)a->cap_T * a->env->dim;
    u->v = a->cache;
    u->kcache = u->v + TC;
    u->dv = a->scratch;
    u->kscratch = a->train ? u->dv + TC : a->scratch;
}

/* The kernel on the values already in v: out = the heads' output. */
static void R(core)(const R(sq_mix_args) *a, real *out)
{
    const sq_mixer_env *env = a->env;
    const sq_packed *b = a->b;
    int C = env->dim, H = env->heads, N = env->max_len, v = env->self->variant;
    R(bufs) u;
    R(carve)(a, &u);
    if (v == SQ_ATTN_POSITIONAL)
        R(sq_pa_forward)(a->cx, out, u.kcache, a->P[P_R1], u.v, C, b->off, b->pos, b->B, H, C,
                         N, env->causal);
    else if (v == SQ_ATTN_FPOSITIONAL)
        R(sq_fpa_forward)(a->cx, out, u.kcache, u.kscratch, a->P[P_R1], a->P[P_R2],
                          rank_of(env), u.v, C, b->off, b->pos, b->B, H, C, N, env->causal);
    else
        R(sq_fixed_forward)(a->cx, out, u.v, C, b->off, b->pos, b->B, C, N, v,
                            (real)decay_of(env), env->causal);
}

void R(sq_mix_pos_forward)(const R(sq_mix_args) *a, real *out, const real *qin,
                           const real *kvin)
{
    (void)kvin; /* values come from the query input (FPARec Eq. 5) */
    int C = a->env->dim;
    R(bufs) u;
    R(carve)(a, &u);
    R(sq_linear_forward)(a->cx, u.v, qin, a->P[P_WV], a->P[P_BV], a->b->T, C, C);
    R(core)(a, out);
}

void R(sq_mix_pos_backward)(const R(sq_mix_args) *a, const real *out, const real *dout,
                            const real *qin, const real *kvin, real *dqin, real *dkvin)
{
    (void)kvin;
    (void)dkvin;
    const sq_mixer_env *env = a->env;
    const sq_packed *b = a->b;
    int T = b->T, C = env->dim, H = env->heads, N = env->max_len;
    int v = env->self->variant;
    R(bufs) u;
    R(carve)(a, &u);
    R(sq_zero)(a->cx, u.dv, (size_t)T * C);
    if (v == SQ_ATTN_POSITIONAL)
        R(sq_pa_backward)(a->cx, a->G[P_R1], u.dv, dout, out, u.v, u.kcache, C, b->off, b->pos,
                          b->B, H, C, N, env->causal);
    else if (v == SQ_ATTN_FPOSITIONAL)
        R(sq_fpa_backward)(a->cx, a->G[P_R1], a->G[P_R2], u.dv, u.kscratch, dout, out, u.v,
                           u.kcache, a->P[P_R1], a->P[P_R2], rank_of(env), C, b->off,
                           b->pos, b->B, H, C, N, env->causal);
    else
        R(sq_fixed_backward)(a->cx, u.dv, dout, C, b->off, b->pos, b->B, C, N, v,
                             (real)decay_of(env), env->causal);
    R(sq_linear_backward)(a->cx, dqin, a->G[P_WV], a->G[P_BV], u.dv, qin, a->P[P_WV], T, C,
                          C);
}

#if !SQ_REAL_IS_F64

SQ_MIXER_FUNCS(sq_mix_pos_forward, sq_mix_pos_backward)

static const sq_tensor_desc pa_tensors[] = {
    {"wv", 4, 1, SQ_INIT_WEIGHT, "LCC"}, {"bv", 16, 0, SQ_INIT_ZERO, "LC"},
    {"pa_r", 8, 1, SQ_INIT_TRUNC, "LHNN"},
};
static const sq_tensor_desc fixed_tensors[] = {
    {"wv", 4, 1, SQ_INIT_WEIGHT, "LCC"}, {"bv", 16, 0, SQ_INIT_ZERO, "LC"},
};
static const sq_tensor_desc fpa_tensors[] = {
    {"wv", 4, 1, SQ_INIT_WEIGHT, "LCC"}, {"bv", 16, 0, SQ_INIT_ZERO, "LC"},
    {"fpa_r1", 9, 1, SQ_INIT_TRUNC, "LHNK"}, {"fpa_r2", 10, 1, SQ_INIT_TRUNC, "LHNK"},
};

static int variant(const sq_mixer_env *env)
{
    return env->self->variant;
}

static size_t cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t TC = (size_t)cap->T * env->dim;
    int v = variant(env);
    int probs = v == SQ_ATTN_POSITIONAL || v == SQ_ATTN_FPOSITIONAL;
    return TC + (probs ? (size_t)env->heads * cap->att : 0);
}

static size_t scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t TC = (size_t)cap->T * env->dim;
    size_t k = variant(env) == SQ_ATTN_FPOSITIONAL ? sq_fpa_scratch_size(env->max_len, env->heads)
                                                   : 0;
    return (cap->train ? TC : 0) + k;
}

/* R: sd 0.01; R1, R2: 0.1 / k^(1/4), so that R1 R2^T has sd 0.01 (the
 * FPARec code's initialisers). */
static double trunc_sd(const sq_mixer_env *env, const char *tensor)
{
    (void)tensor;
    if (variant(env) == SQ_ATTN_FPOSITIONAL)
        return 0.1 / pow((double)rank_of(env), 0.25);
    return 0.01;
}

/* Learned N x N (or N x k) matrices per layer: refuse what cannot fit. */
static int check_size(const sq_mixer_env *env, sq_err *e)
{
    uint64_t N = (uint64_t)env->max_len, H = (uint64_t)env->heads, per = 0;
    if (variant(env) == SQ_ATTN_POSITIONAL)
        per = H * N * N;
    else if (variant(env) == SQ_ATTN_FPOSITIONAL)
        per = H * N * (N + 2 * (uint64_t)rank_of(env));
    if (per * (uint64_t)env->layers > (uint64_t)1 << 34)
        return sq_fail(e, SQ_EX_USAGE, "--max-len %d is too long for --attn %s", env->max_len,
                       env->self->name);
    return 0;
}

/* fpositional's R1, R2 [L, H, N, K]: K = --rank. */
static void fpa_dims(const sq_mixer_env *env, sq_dims *d)
{
    sq_dims_set(d, 'K', (uint64_t)rank_of(env));
}

static int map(const sq_mix_args *a, const float *qin, float *m, sq_err *e)
{
    (void)qin;
    float *out = malloc((size_t)a->b->T * a->env->dim * sizeof *out);
    if (!out)
        return sq_fail(e, SQ_EX_OSERR, "out of memory for the attention map");
    bufs u;
    carve(a, &u);
    int H = sq_mixer_probe(a, u.v, out, core, m);
    free(out);
    return H;
}

static const sq_opt fpa_opts[] = {
    {.name = "rank", .type = SQ_OPT_INT, .offset = SQ_MIXER_OPT(fpa_options, rank),
     .def = "40", .lo = 1, .hi = 65536, .arg = "K",
     .help = "fpositional: rank of R1 R2^T (default 40)"},
    {0},
};
static const sq_opt exp_opts[] = {
    {.name = "decay", .type = SQ_OPT_REAL, .offset = SQ_MIXER_OPT(exp_options, decay),
     .def = "0.36787944117144233", .lo = 0, .hi = 1, .lo_open = 1, .arg = "X",
     .help = "exp-anneal: weight decay per step (default e^-1)"},
    {0},
};

#define POS_KIND(var, kname, khelp, kvariant, ktensors, ...)                         \
    const sq_mixer var = {.name = kname, .help = khelp, .variant = kvariant,         \
                          .tensors = ktensors,                                       \
                          .n_tensors = (int)(sizeof ktensors / sizeof ktensors[0]),  \
                          .check = check_size, .trunc_sd = trunc_sd,                 \
                          .cache_size = cache_size, .scratch_size = scratch_size,    \
                          .forward = sq_mix_pos_forward,                             \
                          .backward = sq_mix_pos_backward,                           \
                          .forward_f64 = sq_mix_pos_forward_f64,                     \
                          .backward_f64 = sq_mix_pos_backward_f64, .map = map,       \
                          .gpu = 1, __VA_ARGS__};

POS_KIND(sq_mixer_positional, "positional", "PARec learned N x N, O(N^2 d)",
         SQ_ATTN_POSITIONAL, pa_tensors, .opts = NULL)
POS_KIND(sq_mixer_fpositional, "fpositional", "FPARec R1 R2^T of rank --rank",
         SQ_ATTN_FPOSITIONAL, fpa_tensors, .opts = fpa_opts, .dims = fpa_dims)
POS_KIND(sq_mixer_average, "average", "fixed pattern (FPARec Table 4), O(N^2 d)",
         SQ_ATTN_AVERAGE, fixed_tensors, .opts = NULL)
POS_KIND(sq_mixer_linear_anneal, "linear-anneal", "fixed pattern (FPARec Table 4), O(N^2 d)",
         SQ_ATTN_LINEAR_ANNEAL, fixed_tensors, .opts = NULL)
POS_KIND(sq_mixer_exp_anneal, "exp-anneal", "fixed pattern (FPARec Table 4), O(N^2 d)",
         SQ_ATTN_EXP_ANNEAL, fixed_tensors, .opts = exp_opts)

#endif
