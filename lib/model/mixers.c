/* mixers.c - the table of token mixers (mixer.h) and what all kinds share:
 * defaults, checks, their tensors, and the probe that turns a kernel into
 * its attention map. A new kind adds one line to SQ_MIXERS below. */
#include "mixer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The kinds, in the order of --help: a new kind is one line. */
#define SQ_MIXERS(X)   \
    X(softmax)         \
    X(linrec)          \
    X(linear)          \
    X(efficient)       \
    X(efficient_dwc)   \
    X(hydra)           \
    X(positional)      \
    X(fpositional)     \
    X(average)         \
    X(linear_anneal)   \
    X(exp_anneal)      \
    X(mixing)          \
    /* the list ends here */

#define DECLARE(k) extern const sq_mixer sq_mixer_##k;
SQ_MIXERS(DECLARE)
#undef DECLARE
#define ADDRESS(k) &sq_mixer_##k,
static const sq_mixer *const table[] = {SQ_MIXERS(ADDRESS)};
#undef ADDRESS

int sq_mixer_count(void)
{
    return (int)(sizeof table / sizeof table[0]);
}

const sq_mixer *sq_mixer_get(int kind)
{
    return kind >= 0 && kind < sq_mixer_count() ? table[kind] : NULL;
}

int sq_mixer_find(const char *name)
{
    for (int k = 0; name && k < sq_mixer_count(); k++)
        if (strcmp(table[k]->name, name) == 0)
            return k;
    return -1;
}

const char *sq_mixer_names(char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int k = 0; k < sq_mixer_count() && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? ", " : "", table[k]->name);
    return buf;
}

void sq_mixer_defaults(sq_mixer_cfg *c, int kind)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    const sq_mixer *m = sq_mixer_get(kind);
    if (m && m->opts)
        sq_opt_defaults(m->opts, c);
}

/* The option of c's kind named name, or NULL. */
static const sq_opt *option_of(const sq_mixer_cfg *c, const char *name)
{
    const sq_mixer *m = sq_mixer_get(c->kind);
    return m ? sq_opt_find(m->opts, name) : NULL;
}

int sq_mixer_set(sq_mixer_cfg *c, const char *name, const char *value, sq_err *e)
{
    const sq_opt *o = option_of(c, name);
    if (!o)
        return sq_fail(e, SQ_EX_USAGE, "--%s is not an option of --attn %s", name,
                       sq_mixer_get(c->kind) ? sq_mixer_get(c->kind)->name : "?");
    return sq_opt_set(o, c, value, SQ_EX_USAGE, NULL, e);
}

const char *sq_mixer_option(const sq_mixer_cfg *c, const char *name, char *buf, size_t n)
{
    const sq_opt *o = option_of(c, name);
    return o ? sq_opt_format(o, c, buf, n) : NULL;
}

int sq_mixer_check(const sq_mixer_env *env, sq_err *e)
{
    const sq_mixer *m = env->self, *k = sq_mixer_get(env->m->kind);
    if (!k)
        return sq_fail(e, SQ_EX_USAGE, "unknown attention kind %d", env->m->kind);
    if (m != k) /* an env built without its row, or with another kind's */
        return sq_fail(e, SQ_EX_SOFTWARE, "mixer env: its row is not --attn %s's", k->name);
    if (env->heads < 1 || env->dim % env->heads)
        return sq_fail(e, SQ_EX_USAGE, "--heads must divide --dim (%d)", env->dim);
    if (env->causal != 0 && env->causal != 1)
        return sq_fail(e, SQ_EX_USAGE, "causal must be 0 or 1");
    /* the kind's options, in their ranges (a config built in code) */
    if (sq_opt_check(m->opts, env->m, SQ_EX_USAGE, e))
        return e->code;
    return m->check ? m->check(env, e) : 0;
}

int sq_mixer_tensors(const sq_mixer_env *env, sq_tensor_set *s, const sq_dims *dims,
                     int owner, sq_err *e)
{
    const sq_mixer *m = env->self;
    sq_dims d = *dims;
    sq_dims_set(&d, 'L', (uint64_t)env->layers);
    if (m->dims)
        m->dims(env, &d);
    return sq_tensors_add(s, m->tensors, m->n_tensors, &d, 1, owner, e);
}

int sq_mixer_probe(const sq_mix_args *a, float *v, float *out,
                   void (*core)(const sq_mix_args *a, float *out), float *map)
{
    int n = a->b->T, C = a->env->dim, H = a->env->heads, hs = C / H;
    size_t nn = (size_t)n * n;
    /* The layer's output is A V per head with A fixed by the forward: with
     * unit vectors in V (key j0 + c in column c of every head), output
     * column h*hs + c of row i is A^h[i, j0 + c]. */
    for (int j0 = 0; j0 < n; j0 += hs) {
        for (int j = 0; j < n; j++)
            for (int k = 0; k < C; k++)
                v[(size_t)j * C + k] = j == j0 + k % hs ? 1.0f : 0.0f;
        core(a, out);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++)
                for (int k = 0; k < hs && j0 + k < n; k++)
                    map[(size_t)h * nn + (size_t)i * n + j0 + k] = out[(size_t)i * C + h * hs + k];
    }
    return H;
}
