/* tensor.c - tensor tables (tensor.h). The table glue exists once, in the
 * float build; the initialiser is written over `real` and compiled again as
 * double (NAME_f64.o, see real.h). */
#ifndef SQ_REAL
#define SQ_REAL float
#endif

#include "tensor.h"
#include "real.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define STREAM_INIT 0x494e495400000000ull /* "INIT" */

/* The used tensors in storage order (offsets ascend), into idx; returns
 * their number. */
static int storage_order(const sq_tensor_set *s, int *idx)
{
    int n = 0;
    for (int i = 0; i < s->n; i++)
        if (s->size[i])
            idx[n++] = i;
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s->off[idx[j - 1]] > s->off[idx[j]]; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    return n;
}

#if !SQ_REAL_IS_F64

int sq_tensors_add(sq_tensor_set *s, const sq_tensor_desc *d, int n, const sq_dims *dims,
                   int use, int owner, sq_err *e)
{
    for (int i = 0; i < n; i++) {
        if (s->n >= SQ_MAX_TENSORS)
            return sq_fail(e, SQ_EX_SOFTWARE, "more than %d tensors", SQ_MAX_TENSORS);
        int t = s->n++, nd = (int)strlen(d[i].shape);
        s->desc[t] = &d[i];
        s->owner[t] = owner;
        s->nd[t] = use ? nd : 1;
        size_t size = 1;
        for (int k = 0; k < 4; k++) {
            uint64_t v = k < nd ? dims->v[d[i].shape[k] - 'A'] : 0;
            s->shape[t][k] = use || k ? v : 0;
            if (k < nd)
                size *= (size_t)v;
        }
        s->size[t] = use ? size : 0;
    }
    return 0;
}

void sq_tensors_layout(sq_tensor_set *s)
{
    int idx[SQ_MAX_TENSORS];
    for (int i = 0; i < s->n; i++)
        idx[i] = i;
    /* stable insertion sort by order: a few dozen entries */
    for (int i = 1; i < s->n; i++)
        for (int j = i; j > 0 && s->desc[idx[j - 1]]->order > s->desc[idx[j]]->order; j--) {
            int t = idx[j];
            idx[j] = idx[j - 1];
            idx[j - 1] = t;
        }
    s->total = 0;
    for (int i = 0; i < s->n; i++) {
        s->off[idx[i]] = s->total;
        s->total += s->size[idx[i]];
    }
}

int sq_tensors_find(const sq_tensor_set *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->desc[i]->name, name) == 0)
            return i;
    return -1;
}

int sq_tensors_to_file(const sq_tensor_set *s, const float *mem, sq_modelfile *mf,
                       sq_err *e)
{
    int idx[SQ_MAX_TENSORS], n = storage_order(s, idx);
    for (int k = 0; k < n; k++) {
        int i = idx[k];
        if (sq_modelfile_add(mf, s->desc[i]->name, SQ_F32, s->nd[i], s->shape[i],
                             mem + s->off[i], e))
            return e->code;
    }
    return 0;
}

int sq_tensors_from_file(const sq_tensor_set *s, float *mem, const sq_modelfile *mf,
                         const char *path, sq_err *e)
{
    for (int i = 0; i < s->n; i++) {
        if (!s->size[i])
            continue;
        const char *name = s->desc[i]->name;
        const sq_tensor *t = sq_modelfile_find(mf, name);
        if (!t)
            return sq_fail(e, SQ_EX_DATA, "%s: no tensor %s", path, name);
        int ok = t->dtype == SQ_F32 && t->ndim == s->nd[i] &&
                 t->bytes == s->size[i] * sizeof(float);
        for (int d = 0; ok && d < s->nd[i]; d++)
            ok = t->shape[d] == s->shape[i][d];
        if (!ok)
            return sq_fail(e, SQ_EX_DATA, "%s: tensor %s: type or shape does not match "
                           "the config", path, name);
        memcpy(mem + s->off[i], t->data, s->size[i] * sizeof(float));
    }
    return 0;
}

int sq_tensors_from_file_on(const sq_ctx *cx, const sq_tensor_set *s, float *mem,
                            const sq_modelfile *mf, const char *path, sq_err *e)
{
    if (cx->backend == SQ_BACKEND_CPU)
        return sq_tensors_from_file(s, mem, mf, path, e);
    size_t bytes = s->total * sizeof(float);
    float *host = calloc(1, bytes ? bytes : 1);
    if (!host)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    int rc = sq_tensors_from_file(s, host, mf, path, e) ||
             sq_ctx_upload(cx, mem, host, bytes, e) ? e->code : 0;
    free(host);
    return rc;
}

void sq_tensors_runs(const sq_tensor_set *s, void (*fn)(void *ctx, size_t off, size_t n,
                                                        int decay), void *ctx)
{
    int idx[SQ_MAX_TENSORS], n = storage_order(s, idx);
    for (int k = 0; k < n;) {
        int decay = s->desc[idx[k]]->decay, j = k;
        size_t len = 0;
        while (j < n && s->desc[idx[j]]->decay == decay)
            len += s->size[idx[j++]];
        fn(ctx, s->off[idx[k]], len, decay);
        k = j;
    }
}

#endif /* !SQ_REAL_IS_F64 */

/* N(0, sd^2) on n reals; trunc: redrawn beyond 2 sd (TF truncated_normal). */
static void R(normal_fill)(sq_rng *r, real *w, size_t n, double sd, int trunc)
{
    for (size_t i = 0; i < n; i++) {
        double z = sq_rng_normal(r);
        while (trunc && (z > 2 || z < -2))
            z = sq_rng_normal(r);
        w[i] = (real)(sd * z);
    }
}

void R(sq_tensors_init)(const sq_tensor_set *s, real *mem, const sq_init_rule *rule,
                        uint64_t seed)
{
    sq_rng r;
    sq_rng_seed(&r, seed, STREAM_INIT);
    int idx[SQ_MAX_TENSORS], n = storage_order(s, idx); /* the order of the draws */
    for (int k = 0; k < n; k++) {
        int i = idx[k], nd = s->nd[i];
        real *w = mem + s->off[i];
        size_t size = s->size[i];
        switch (s->desc[i]->init) {
        case SQ_INIT_ONE:
            for (size_t j = 0; j < size; j++)
                w[j] = 1;
            break;
        case SQ_INIT_WEIGHT:
            if (!rule->xavier)
                R(normal_fill)(&r, w, size, rule->sd, 0);
            else /* xavier_normal_ on each [rows, cols] slice */
                R(normal_fill)(&r, w, size,
                               sqrt(2.0 / (double)(s->shape[i][nd - 2] + s->shape[i][nd - 1])),
                               0);
            break;
        case SQ_INIT_TRUNC:
            R(normal_fill)(&r, w, size, rule->trunc_sd(rule->ctx, s, i), 1);
            break;
        default:
            memset(w, 0, size * sizeof *w);
        }
    }
}

void R(sq_tensors_init_on)(const sq_ctx *cx, const sq_tensor_set *s, real *mem,
                           const sq_init_rule *rule, uint64_t seed)
{
    size_t bytes = s->total * sizeof(real);
    real *host = cx->backend == SQ_BACKEND_CPU ? mem : malloc(bytes ? bytes : 1);
    if (!host)
        return;
    R(sq_tensors_init)(s, host, rule, seed);
    if (host != mem) {
        sq_err e = {0};
        (void)sq_ctx_upload(cx, mem, host, bytes, &e);
        free(host);
    }
}
