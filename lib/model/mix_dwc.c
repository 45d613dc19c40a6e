/* mix_dwc.c - efficient-dwc: efficient attention plus a depthwise
 * convolution of the values (Blin, eq. 11; the DWC term FLatten adds to
 * linear attention):
 *     D = sigma_row(Q) (sigma_col(K)^T V) + DWC(V),   MIX = D Wo^T + bo
 * on the Q/K/V/O projection (mix_qkv.h). The first term is the efficient
 * kind's kernel (attn_linear.h), the second sq_dwconv (dwconv.h) over the
 * rows of each sequence: causal windows (rows t-K+1 .. t) when the mixer is
 * causal, centred ones otherwise, K = --dwc-kernel taps per channel with a
 * bias. Both are summed before the output projection, as FLatten does
 * (x = attn(q, k, v) + dwc(v), then proj). --dwc-kernel 0 drops the
 * convolution (Blin's DWC ablation): the kind is then efficient exactly
 * (dwc_b stays in the table, unused: zero, with zero gradient).
 * A layer's cache and scratch are efficient's; the convolution needs none. */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "attn_linear.h"
#include "dwconv.h"
#include "mix_qkv.h"
#include "ops.h"
#include "real.h"

#include <math.h>
#include <stdlib.h>

/* The rows of P and G: the projection's (mix_qkv.h), then the taps dwc_w
 * [L, K, C] and the bias dwc_b [L, C]. */
enum { DWC_W = QKV_NT, DWC_B, DWC_NT };

/* The kind's options (mixer.h: sq_mixer_cfg's opt). */
typedef struct {
    int kernel;                  /* --dwc-kernel: taps K per channel (0: none) */
} dwc_options;
SQ_MIXER_OPTS_FIT(dwc_options);

static int kernel_of(const sq_mixer_env *env)
{
    dwc_options o;
    SQ_MIXER_OPTS(env->m, dwc_options, o);
    return o.kernel;
}

/* The heads' output: efficient attention of the layer's q, k, v into out,
 * then the convolution of v added, with the bias b (NULL for the map's
 * probe: there the output must be linear in v). */
static void R(conv_core)(const R(sq_mix_args) *a, real *out, const real *b)
{
    const sq_mixer_env *env = a->env;
    const sq_packed *pb = a->b;
    int C = env->dim, K = kernel_of(env);
    R(sq_qkv_bufs) q;
    R(sq_qkv_carve)(a, &q);
    R(sq_lattn_forward)(a->cx, SQ_LATTN_EFFICIENT, out, q.kcache, q.kscratch, q.q, q.k, q.v, C,
                        pb->off, pb->B, env->heads, C, env->causal);
    if (K > 0)
        R(sq_dwconv_forward)(a->cx, out, q.v, C, a->P[DWC_W], b, K, pb->off, pb->B, C,
                             env->causal);
}

static void R(core)(const R(sq_mix_args) *a, real *out)
{
    R(conv_core)(a, out, a->P[DWC_B]);
}

/* Both terms read v: each adds its part of dv. */
static void R(core_backward)(const R(sq_mix_args) *a, const R(sq_qkv_bufs) *q)
{
    const sq_mixer_env *env = a->env;
    const sq_packed *pb = a->b;
    int C = env->dim, K = kernel_of(env);
    R(sq_qkv_zero_grads)(a, q);
    R(sq_lattn_backward)(a->cx, SQ_LATTN_EFFICIENT, q->dq, q->dk, q->dv, q->kscratch, q->datty,
                         q->q, q->k, q->v, q->kcache, C, pb->off, pb->B, env->heads, C,
                         env->causal);
    if (K > 0)
        R(sq_dwconv_backward)(a->cx, q->dv, a->G[DWC_W], a->G[DWC_B], q->datty, q->v, C,
                              a->P[DWC_W], K, pb->off, pb->B, C, env->causal);
}

void R(sq_mix_dwc_forward)(const R(sq_mix_args) *a, real *out, const real *qin,
                           const real *kvin)
{
    R(sq_qkv_forward)(a, out, qin, kvin, R(core));
}

void R(sq_mix_dwc_backward)(const R(sq_mix_args) *a, const real *out, const real *dout,
                            const real *qin, const real *kvin, real *dqin, real *dkvin)
{
    (void)out;
    R(sq_qkv_backward)(a, dout, qin, kvin, dqin, dkvin, R(core_backward));
}

#if !SQ_REAL_IS_F64

SQ_MIXER_FUNCS(sq_mix_dwc_forward, sq_mix_dwc_backward)

/* The projection's eight as mix_qkv.c lists them (same names, orders and
 * inits: efficient's model-file layout, then the convolution's; a unit test
 * keeps the two lists equal), then the convolution: new storage orders. */
static const sq_tensor_desc dwc_tensors[DWC_NT] = {
    {"wq", 2, 1, SQ_INIT_WEIGHT, "LCC"},     {"wk", 3, 1, SQ_INIT_WEIGHT, "LCC"},
    {"wv", 4, 1, SQ_INIT_WEIGHT, "LCC"},     {"wo", 5, 1, SQ_INIT_WEIGHT, "LCC"},
    {"bq", 14, 0, SQ_INIT_ZERO, "LC"},       {"bk", 15, 0, SQ_INIT_ZERO, "LC"},
    {"bv", 16, 0, SQ_INIT_ZERO, "LC"},       {"bo", 17, 0, SQ_INIT_ZERO, "LC"},
    {"dwc_w", 100, 1, SQ_INIT_TRUNC, "LKC"}, {"dwc_b", 101, 0, SQ_INIT_ZERO, "LC"},
};

static size_t cache_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t k = sq_mix_linear_kernel_size(env, cap, 0, SQ_LATTN_EFFICIENT);
    return k == (size_t)-1 ? k : sq_qkv_cache_size(env, cap, k);
}

static size_t scratch_size(const sq_mixer_env *env, const sq_mixer_cap *cap)
{
    size_t k = sq_mix_linear_kernel_size(env, cap, 1, SQ_LATTN_EFFICIENT);
    return k == (size_t)-1 ? k : sq_qkv_scratch_size(env, cap, k);
}

/* dwc_w: a truncated normal (redrawn beyond 2 sd) of sd 1/sqrt(3K), the sd
 * of PyTorch's default for a depthwise Conv1d (kaiming_uniform with a =
 * sqrt(5): U(+-1/sqrt(fan_in)), fan_in = K), which FLatten's conv keeps.
 * Not the backbone's rule: Xavier on [K, C] would couple the scale to C,
 * though each channel has only its K taps, and BERT4Rec's 0.02 would start
 * the convolution near zero in one backbone only. K taps on values of
 * variance s^2 then give ~ s^2 / 3 whatever K is (the truncation at 2 sd
 * keeps 0.77 of that). */
static double trunc_sd(const sq_mixer_env *env, const char *tensor)
{
    (void)tensor;
    int K = kernel_of(env);
    return K > 0 ? 1 / sqrt(3.0 * K) : 0;
}

/* dwc_w [L, K, C]: K = --dwc-kernel. */
static void dwc_dims(const sq_mixer_env *env, sq_dims *d)
{
    sq_dims_set(d, 'K', (uint64_t)kernel_of(env));
}

static void probe_core(const sq_mix_args *a, float *out)
{
    conv_core(a, out, NULL); /* no bias: linear in v */
}

/* The implied weights on V: the efficient kernel's A^h plus the band of the
 * convolution's taps (bias left out), found by probing like sq_qkv_map.
 * A depthwise convolution has its own taps per channel, so a head has no
 * single band: the probe runs with each channel's taps replaced by their
 * mean over the head's channels (exact when those agree). Weights of
 * either sign. */
static int map(const sq_mix_args *a, const float *qin, float *m, sq_err *e)
{
    (void)qin;
    int K = kernel_of(a->env), C = a->env->dim, hs = C / a->env->heads;
    sq_mix_args pa = *a;
    float *wbar = NULL;
    if (K > 0) {
        wbar = malloc((size_t)K * C * sizeof *wbar);
        if (!wbar)
            return sq_fail(e, SQ_EX_OSERR, "out of memory for the attention map");
        for (int k = 0; k < K; k++)
            for (int c0 = 0; c0 < C; c0 += hs) {
                const float *w = a->P[DWC_W] + (size_t)k * C + c0;
                double s = 0;
                for (int c = 0; c < hs; c++)
                    s += w[c];
                for (int c = 0; c < hs; c++)
                    wbar[(size_t)k * C + c0 + c] = (float)(s / hs);
            }
        pa.P[DWC_W] = wbar;
    }
    sq_qkv_bufs q;
    sq_qkv_carve(&pa, &q);
    int H = sq_mixer_probe(&pa, q.v, q.atty, probe_core, m);
    free(wbar);
    return H;
}

static const sq_opt dwc_opts[] = {
    {.name = "dwc-kernel", .type = SQ_OPT_INT, .offset = SQ_MIXER_OPT(dwc_options, kernel),
     .def = "5", .lo = 0, .hi = 64, .arg = "K",
     .help = "efficient-dwc: taps of the depthwise convolution\n"
             "of V (default 5; 0: none, = efficient)"},
    {0},
};

const sq_mixer sq_mixer_efficient_dwc = {
    .name = "efficient-dwc",
    .help = "efficient + Blin's DWC of V, O(N d^2/h + N d K)",
    .opts = dwc_opts,
    .variant = SQ_LATTN_EFFICIENT,
    .signed_map = 1,
    .tensors = dwc_tensors,
    .n_tensors = DWC_NT,
    .dims = dwc_dims,
    .trunc_sd = trunc_sd,
    .cache_size = cache_size,
    .scratch_size = scratch_size,
    .forward = sq_mix_dwc_forward,
    .backward = sq_mix_dwc_backward,
    .forward_f64 = sq_mix_dwc_forward_f64,
    .backward_f64 = sq_mix_dwc_backward_f64,
    .map = map,
    .gpu = 1,
};

#endif
