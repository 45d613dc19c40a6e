/* mix_linear.c - the linear family on the Q/K/V/O projection (mix_qkv.h):
 * linrec, linear, efficient and hydra attention (the kernels and their
 * equations: attn_linear.h; seqrec-train(1)). None forms an n x n matrix:
 * causal rows by prefix sums, O(n C hs). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_linear.h"
#include "mix_qkv.h"
#include "ops.h"
#include "real.h"

#include <stdlib.h>

/* linrec's options (mixer.h: sq_mixer_cfg's opt); the other kinds of the
 * family have none. */
typedef struct {
    int scale;                   /* --linrec-scale: 0 code, 1 paper */
    int variant;                 /* --linrec-variant: a sq_linrec_variant */
} linrec_options;
SQ_MIXER_OPTS_FIT(linrec_options);

/* attn_linear.h's number of a kind's kernel (the sq_mixer's variant;
 * linrec: the kernel of its --linrec-scale and --linrec-variant). */
static sq_lattn_kind lattn_of(const sq_mixer_env *env)
{
    int v = env->self->variant;
    if (v == SQ_LATTN_LINREC) {
        linrec_options o;
        SQ_MIXER_OPTS(env->m, linrec_options, o);
        return sq_lattn_linrec(o.scale ? SQ_LINREC_PAPER : SQ_LINREC_CODE,
                               (sq_linrec_variant)o.variant);
    }
    return (sq_lattn_kind)v;
}

static void R(core)(const R(sq_mix_args) *a, real *out)
{
    const sq_mixer_env *env = a->env;
    R(sq_qkv_bufs) q;
    R(sq_qkv_carve)(a, &q);
    R(sq_lattn_forward)(a->cx, lattn_of(env), out, q.kcache, q.kscratch, q.q, q.k, q.v,
                        env->dim, a->b->off, a->b->B, env->heads, env->dim, env->causal);
}

static void R(core_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q)
{
    const sq_mixer_env *env = a->env;
    R(sq_qkv_zero_grads)(a, q);
    R(sq_lattn_backward)(a->cx, lattn_of(env), q->dq, q->dk, q->dv, q->kscratch, q->datty,
                         q->q, q->k, q->v, q->kcache, env->dim, a->b->off, a->b->B,
                         env->heads, env->dim, env->causal);
}

void R(sq_mix_linear_forward)(const R(sq_mix_args) *a, real *out, const real *qin,
                              const real *kvin)
{
    R(sq_qkv_forward)(a, out, qin, kvin, R(core));
}

void R(sq_mix_linear_backward)(const R(sq_mix_args) *a, const real *out, const real *dout,
                               const real *qin, const real *kvin, real *dqin, real *dkvin)
{
    (void)out;
    R(sq_qkv_backward)(a, dout, qin, kvin, dqin, dkvin, R(core_backward));
}

#if !SQ_REAL_IS_F64

SQ_MIXER_FUNCS(sq_mix_linear_forward, sq_mix_linear_backward)

/* The kernel's sizes for a batch of cap.B sequences over cap.T rows (the
 * kernels' size functions take offsets: an even split bounds them; the
 * GPU's pieces are counted by a bound of T and B alone). */
size_t sq_mix_linear_kernel_size(const sq_mixer_env *env, const sq_mixer_cap *cap, int scratch,
                                 int lattn_kind)
{
    int B = cap->B > 0 ? cap->B : 1, T = cap->T;
    int *off = malloc(((size_t)B + 1) * sizeof *off);
    if (!off)
        return (size_t)-1; /* the workspace allocation then fails */
    for (int b = 0; b <= B; b++)
        off[b] = (int)((int64_t)T * b / B);
    sq_lattn_kind k = (sq_lattn_kind)lattn_kind;
    size_t n = !scratch  ? sq_lattn_cache_size(k, off, B, env->heads, env->dim)
               : cap->gpu ? sq_lattn_gpu_scratch_size(k, off, B, env->heads, env->dim)
                          : sq_lattn_scratch_size(k, off, B, env->heads, env->dim);
    free(off);
    return n;
}

static size_t cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t k = sq_mix_linear_kernel_size(env, cap, 0, lattn_of(env));
    return k == (size_t)-1 ? k : sq_qkv_cache_size(env, cap, k);
}

static size_t scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t k = sq_mix_linear_kernel_size(env, cap, 1, lattn_of(env));
    return k == (size_t)-1 ? k : sq_qkv_scratch_size(env, cap, k);
}

static int map(const sq_mix_args *a, const float *qin, float *m, sq_err *e)
{
    (void)qin;
    (void)e;
    return sq_qkv_map(a, core, m);
}

static int hydra_heads(int dim)
{
    return dim; /* Hydra attention: one feature per head */
}

static const sq_opt linrec_opts[] = {
    {.name = "linrec-scale", .type = SQ_OPT_CHOICE,
     .offset = SQ_MIXER_OPT(linrec_options, scale), .def = "code", .choices = "code|paper",
     .arg = "S",
     .help = "linrec: code (default: 1/sqrt(d/h) on the product)\n"
             "or paper (also 1/sqrt(N) on the key columns)"},
    /* the choices' order is sq_linrec_variant's; older files: full */
    {.name = "linrec-variant", .type = SQ_OPT_CHOICE,
     .offset = SQ_MIXER_OPT(linrec_options, variant),
     .def = "full", .choices = "full|no-l2|no-elu", .arg = "V", .optional = 1,
     .help = "linrec: full (default), or LinRec's ablations no-l2\n"
             "(elu, no L2 normalisation) and no-elu (L2 norms of raw q, k)"},
    {0},
};

#define LINEAR_KIND(var, kname, khelp, ...)                                          \
    const sq_mixer var = {.name = kname, .help = khelp, .tensors = sq_qkv_tensors,   \
                          .n_tensors = QKV_NT, .cache_size = cache_size,             \
                          .scratch_size = scratch_size,                              \
                          .forward = sq_mix_linear_forward,                          \
                          .backward = sq_mix_linear_backward,                        \
                          .forward_f64 = sq_mix_linear_forward_f64,                  \
                          .backward_f64 = sq_mix_linear_backward_f64, .map = map,    \
                          .gpu = 1, __VA_ARGS__};

LINEAR_KIND(sq_mixer_linrec, "linrec", "LinRec L2-normalised elu, O(N d^2/h)",
            .variant = SQ_LATTN_LINREC, .opts = linrec_opts, .signed_map = 1)
LINEAR_KIND(sq_mixer_linear, "linear", "elu+1 linear transformer, O(N d^2/h)",
            .variant = SQ_LATTN_LINEAR)
LINEAR_KIND(sq_mixer_efficient, "efficient", "row/column softmax, O(N d^2/h)",
            .variant = SQ_LATTN_EFFICIENT)
LINEAR_KIND(sq_mixer_hydra, "hydra", "cosine Hydra attention, O(N d^2/h)",
            .variant = SQ_LATTN_HYDRA, .default_heads = hydra_heads, .signed_map = 1)

#endif
