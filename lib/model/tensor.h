/* tensor.h - one description of a model's parameter tensors.
 *
 * Each model (and each token mixer, for its per-layer tensors) lists its
 * tensors once, as a table of sq_tensor_desc: name in model files, shape in
 * symbols resolved from the config, storage order, weight decay, and the
 * initialiser. That one table drives
 *   allocation   the sizes and offsets in the flat parameter block,
 *   pointers     the owner's pointers into the block (index = table row),
 *   model files  which tensors are written and read, with their shapes,
 *   init         which tensors draw from the seeded generator, in what order,
 *   Adam         which runs of the block get weight decay.
 *
 * STORAGE ORDER. The block (and the model file) holds the tensors sorted by
 * `order`, ties in table order. The orders of today's tensors reproduce the
 * layout of the first SASRec files and the draw order of their
 * initialisation, so that old model files load and seeded runs repeat; a new
 * tensor takes a new number (100 and up). A tensor the config does not use
 * has no elements and is not in the file.
 *
 * SHAPES are strings of dimension symbols ("LCC": layers x dim x dim), each
 * letter's value set by the owner in an sq_dims (e.g. 'L' layers, 'C' dim,
 * 'F' ffn, 'N' max_len, 'H' heads, 'K' a mixer's own size, set by its dims
 * hook (mixer.h), 'V' n_items + 1, 'W' the item table's rows). */
#ifndef SQ_TENSOR_H
#define SQ_TENSOR_H

#include <stddef.h>
#include <stdint.h>

#include "ctx.h"

#include "err.h"
#include "modelfile.h"
#include "rng.h"

enum sq_init {
    SQ_INIT_ZERO = 0, /* biases */
    SQ_INIT_ONE,      /* LayerNorm weights */
    SQ_INIT_WEIGHT,   /* the backbone's weight rule (SASRec: Xavier normal on
                         the last two dims; BERT4Rec: N(0, 0.02^2)) */
    SQ_INIT_TRUNC,    /* a truncated normal (redrawn beyond 2 sd) of the sd the
                         owner gives (sq_init_rule) */
};

typedef struct {
    const char *name;  /* in model files */
    int order;         /* storage order (above) */
    int decay;         /* 1: in Adam's weight-decay group */
    int init;          /* SQ_INIT_* */
    const char *shape; /* dimension symbols, 1 to 4 of them */
} sq_tensor_desc;

/* The values of the dimension symbols 'A'..'z'. */
typedef struct {
    uint64_t v[64];
} sq_dims;

static inline void sq_dims_set(sq_dims *d, char sym, uint64_t value)
{
    d->v[sym - 'A'] = value;
}

enum { SQ_MAX_TENSORS = 64 };

/* The tensors of one model instance, resolved for its config. */
typedef struct {
    int n;
    const sq_tensor_desc *desc[SQ_MAX_TENSORS];
    int owner[SQ_MAX_TENSORS];        /* who added it (sq_tensors_add's `owner`) */
    int nd[SQ_MAX_TENSORS];
    uint64_t shape[SQ_MAX_TENSORS][4];
    size_t size[SQ_MAX_TENSORS];      /* elements (0: unused) */
    size_t off[SQ_MAX_TENSORS];       /* offset in the block, storage order */
    size_t total;                     /* elements of the block */
} sq_tensor_set;

/* Appends n descriptors with their shapes resolved from dims; use == 0
 * adds them unused (no elements). SQ_EX_SOFTWARE past SQ_MAX_TENSORS. */
int sq_tensors_add(sq_tensor_set *s, const sq_tensor_desc *d, int n, const sq_dims *dims,
                   int use, int owner, sq_err *e);
/* Sizes are known: computes off[] in storage order and total. */
void sq_tensors_layout(sq_tensor_set *s);
/* Index of the tensor named name, or -1. */
int sq_tensors_find(const sq_tensor_set *s, const char *name);

/* Registers every used tensor of mem (float, borrowed) in storage order. */
int sq_tensors_to_file(const sq_tensor_set *s, const float *mem, sq_modelfile *mf,
                       sq_err *e);
/* Copies every used tensor from a read file into mem; SQ_EX_DATA naming
 * path when one is missing or its type or shape differs. _on: mem on cx's
 * backend (a GPU's block through a host copy, uploaded). */
int sq_tensors_from_file_on(const sq_ctx *cx, const sq_tensor_set *s, float *mem,
                            const sq_modelfile *mf, const char *path, sq_err *e);
int sq_tensors_from_file(const sq_tensor_set *s, float *mem, const sq_modelfile *mf,
                         const char *path, sq_err *e);

/* Runs of the block for Adam: calls fn(ctx, off, n, decay) for each maximal
 * run of consecutive used tensors (storage order) with the same decay
 * flag. */
void sq_tensors_runs(const sq_tensor_set *s, void (*fn)(void *ctx, size_t off, size_t n,
                                                        int decay), void *ctx);

/* How SQ_INIT_WEIGHT and SQ_INIT_TRUNC tensors are drawn. */
typedef struct {
    int xavier;   /* WEIGHT: 1 Xavier normal on the last two dims, 0 N(0, sd^2) */
    double sd;    /* WEIGHT when !xavier */
    /* TRUNC: the sd of tensor i (owner's hook) */
    double (*trunc_sd)(const void *ctx, const sq_tensor_set *s, int i);
    const void *ctx;
} sq_init_rule;

#define SQ_TWICE "tensor.h"
#include "twice.h"

#elif defined(SQ_DECLARE_TWICE)

/* Fills mem (host memory, s->total reals): zeros and ones where the table
 * says, and the draws of WEIGHT and TRUNC tensors from one generator seeded
 * by (seed, "INIT"), tensor after tensor in storage order. */
void R(sq_tensors_init)(const sq_tensor_set *s, real *mem, const sq_init_rule *rule,
                        uint64_t seed);
/* The same into mem on cx's backend: on a GPU the generator fills a host
 * copy that is uploaded (the CPU's bits). A failed allocation or upload
 * leaves mem as it was (zeroed by sq_ctx_alloc): the caller's first step
 * shows it. */
void R(sq_tensors_init_on)(const sq_ctx *cx, const sq_tensor_set *s, real *mem,
                           const sq_init_rule *rule, uint64_t seed);

#endif
