/* mixer.h - the token mixers (attention kinds, `--attn KIND`) of the
 * transformer backbones, registered in one table (mixers.c).
 *
 * A mixer is MIX(qin, kvin) -> out on the packed rows [T, C] of a batch: the
 * sublayer a transformer block puts between its LayerNorm and its residual.
 * Each kind is one sq_mixer: its name, options, per-layer parameter tensors
 * (and the shape symbols only its options give), the sizes of its per-layer
 * cache (activations kept from forward to backward) and of its scratch
 * (shared by the layers), its forward and backward (causal or
 * bidirectional, from env->causal; float and the _f64 twin) and its
 * attention-map materialisation. The backbone (sasrec.c) owns the layers,
 * the residuals, dropout and the parameter block; it hands each layer's
 * slice of the mixer's tensors, cache and scratch to the mixer, with the
 * env that carries the mixer's own row (env->self). A kind's options are a
 * struct of its own (sq_mixer_cfg below): the backbone knows none of them.
 *
 * Families share code: the Q/K/V/O projection (mix_qkv.c) serves softmax
 * (mix_softmax.c), the linear family (mix_linear.c) and Blin's
 * efficient-dwc (mix_dwc.c: efficient plus a depthwise convolution); the positional
 * family and the fixed patterns (mix_pos.c) project V only; mixing
 * (mix_mixing.c) has no values. Adding a kind: HACKING.md. */
#ifndef SQ_MIXER_H
#define SQ_MIXER_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "batch.h"
#include "ctx.h"
#include "err.h"
#include "opt.h"
#include "tensor.h"

enum { SQ_MIXER_OPT_BYTES = 32, SQ_MIXER_MAXT = 12 };

/* What --attn KIND and the kind's options set. The options are a struct of
 * the kind's own, declared in its file and kept in opt: only the kind reads
 * it (SQ_MIXER_OPTS); everyone else defaults, sets, checks, reads and
 * writes it through the kind's option table, whose entries bind its fields
 * (SQ_MIXER_OPT). Zero bytes where the kind has no options. */
typedef struct {
    int kind;                    /* row of the mixer table (sq_mixer_find) */
    union {                      /* aligned for any int, double or uint64_t */
        double align_;
        int64_t align2_;
        unsigned char b[SQ_MIXER_OPT_BYTES];
    } opt;
} sq_mixer_cfg;

/* Copies the options of c's kind into out, a variable of that kind's
 * struct type (a copy, not a cast of opt's bytes: C's aliasing rules). */
#define SQ_MIXER_OPTS(c, type, out) \
    ((void)sizeof(&(out) == (type *)0), memcpy(&(out), (c)->opt.b, sizeof(type)))
/* The sq_opt offset of field of the kind's struct type. */
#define SQ_MIXER_OPT(type, field) (offsetof(sq_mixer_cfg, opt) + offsetof(type, field))
/* Beside the struct's declaration: it fits opt. */
#define SQ_MIXER_OPTS_FIT(type)                                               \
    _Static_assert(sizeof(type) <= SQ_MIXER_OPT_BYTES &&                      \
                       _Alignof(type) <= _Alignof(sq_mixer_cfg),              \
                   #type " does not fit sq_mixer_cfg's opt (SQ_MIXER_OPT_BYTES)")

/* What a mixer sees of the model around it. */
typedef struct {
    int dim, heads, max_len, layers;
    int causal;                  /* row i sees keys j <= i only */
    const sq_mixer_cfg *m;
    /* m's row of the table (sq_mixer_get(m->kind)), set by whoever builds
     * the env: a mixer and the backbone's per-call dispatch go through it
     * rather than look the kind up again. */
    const struct sq_mixer *self;
} sq_mixer_env;

/* The capacity a workspace is sized for: most sequences, rows and
 * sum(len^2) of one batch; train: backward buffers too; gpu: the workspace
 * is a GPU's, whose kernels may keep less (softmax: a log-sum-exp a row and
 * head, the probabilities recomputed in the backward: O(T H), not
 * O(H sum len^2)). */
typedef struct {
    int B, T;
    size_t att;
    int train;
    int gpu;
} sq_mixer_cap;

#define SQ_TWICE "mixer.h"
#include "twice.h"

typedef struct sq_mixer {
    const char *name;
    const char *help;            /* seqrec-train --help: equation, cost */
    const sq_opt *opts;          /* the kind's options (NULL: none) */
    int variant;                 /* the family's own number of the kind */
    int signed_map;              /* its map has weights of either sign */
    int gpu;                     /* its ops have CUDA twins (--device cuda) */
    const sq_tensor_desc *tensors; /* per-layer tensors: shapes start with 'L' */
    int n_tensors;
    /* Sets the shape symbols of its tensors that only its options give
     * (fpositional 'K' = --rank, efficient-dwc 'K' = --dwc-kernel); NULL:
     * none. The backbone knows no kind's options. */
    void (*dims)(const sq_mixer_env *env, sq_dims *d);
    /* Kind-specific checks of a config (SQ_EX_USAGE); NULL: none. */
    int (*check)(const sq_mixer_env *env, sq_err *e);
    /* --heads when not given (0: the backbone's default); hydra: dim. */
    int (*default_heads)(int dim);
    /* The sd of a SQ_INIT_TRUNC tensor (by name). */
    double (*trunc_sd)(const sq_mixer_env *env, const char *tensor);
    /* Reals of one layer's cache and of the scratch the layers share. */
    size_t (*cache_size)(const sq_mixer_env *env, const sq_mixer_cap *cap);
    size_t (*scratch_size)(const sq_mixer_env *env, const sq_mixer_cap *cap);
    sq_mix_fwd forward;
    sq_mix_bwd backward;
    sq_mix_fwd_f64 forward_f64;
    sq_mix_bwd_f64 backward_f64;
    /* The attention weights of one layer of a one-sequence batch (n rows)
     * after its forward, into map [heads, n, n]; returns the number of
     * heads. May overwrite the layer's cache. (sasrec.h: attention maps.) */
    int (*map)(const sq_mix_args *a, const float *qin, float *map, sq_err *e);
} sq_mixer;

/* Declares a kind's forward and backward in both precisions (fwd, fwd_f64,
 * bwd, bwd_f64), so that its float build can fill the sq_mixer. */
#define SQ_MIXER_FUNCS(fwd, bwd)                                                     \
    void fwd(const sq_mix_args *a, float *out, const float *qin, const float *kvin); \
    void bwd(const sq_mix_args *a, const float *out, const float *dout,              \
             const float *qin, const float *kvin, float *dqin, float *dkvin);        \
    void fwd##_f64(const sq_mix_args_f64 *a, double *out, const double *qin,         \
                   const double *kvin);                                              \
    void bwd##_f64(const sq_mix_args_f64 *a, const double *out, const double *dout,  \
                   const double *qin, const double *kvin, double *dqin, double *dkvin);

/* The table (mixers.c). */
int sq_mixer_count(void);
const sq_mixer *sq_mixer_get(int kind);          /* NULL out of range */
int sq_mixer_find(const char *name);             /* -1 when unknown */
/* "softmax, linrec, ..." for messages. */
const char *sq_mixer_names(char *buf, size_t n);

/* The config of kind k with its options at their defaults. */
void sq_mixer_defaults(sq_mixer_cfg *c, int kind);
/* Option `name` (its --name) of c's kind set from its text, range-checked
 * as on the command line: SQ_EX_USAGE when the kind has no such option or
 * the value is refused. (For code that starts from names: the tests.) */
int sq_mixer_set(sq_mixer_cfg *c, const char *name, const char *value, sq_err *e);
/* That option's value as the model file writes it, into buf; NULL when
 * c's kind has no such option. */
const char *sq_mixer_option(const sq_mixer_cfg *c, const char *name, char *buf, size_t n);
/* The generic checks (heads divide dim, sizes) and the kind's own. */
int sq_mixer_check(const sq_mixer_env *env, sq_err *e);
/* Adds the kind's tensors to s (dims: the backbone's, 'L' = layers, then
 * the kind's own: its dims hook). */
int sq_mixer_tensors(const sq_mixer_env *env, sq_tensor_set *s, const sq_dims *dims,
                     int owner, sq_err *e);

/* The attention map of a kind whose kernel applies per-head weights to
 * values v [n, C] (the layer's own buffer): runs core (which writes the
 * heads' output to out [n, C]) on unit probe values; returns the heads. */
int sq_mixer_probe(const sq_mix_args *a, float *v, float *out,
                   void (*core)(const sq_mix_args *a, float *out), float *map);

#elif defined(SQ_DECLARE_TWICE)

/* One call of a mixer on layer l of a batch. */
typedef struct {
    const sq_ctx *cx;
    const sq_mixer_env *env;
    const sq_packed *b;          /* off, pos, B, T */
    real *P[SQ_MIXER_MAXT];      /* the layer's slice of each tensor (table order) */
    real *G[SQ_MIXER_MAXT];      /* their gradients (backward only) */
    real *cache;                 /* the layer's cache */
    real *scratch;               /* the shared scratch */
    int cap_T;                   /* rows the cache was sized for */
    int train;                   /* the workspace has the backward buffers */
} R(sq_mix_args);

/* out [T, C] = MIX(qin, kvin); fills the layer's cache. */
typedef void (*R(sq_mix_fwd))(const R(sq_mix_args) *a, real *out, const real *qin,
                              const real *kvin);
/* Back from dout through the forward of the same batch (out: what it
 * wrote): ADDS into dqin and dkvin (which may be the same buffer) and into
 * a->G. */
typedef void (*R(sq_mix_bwd))(const R(sq_mix_args) *a, const real *out, const real *dout,
                              const real *qin, const real *kvin, real *dqin, real *dkvin);

#endif
