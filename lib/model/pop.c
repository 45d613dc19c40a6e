/* pop.c - the popularity baseline (pop.h). */
#include "pop.h"

#include <stdlib.h>
#include <string.h>

typedef struct {
    float *score; /* [n_items + 1]: the counts as scores */
} pop_impl;

int sq_pop_fit(const sq_dataset *ds, sq_modelfile *mf, sq_err *e)
{
    memset(mf, 0, sizeof *mf);
    uint64_t shape[1] = {(uint64_t)ds->hdr.n_items + 1};
    if (!ds->pop)
        return sq_fail(e, SQ_EX_SOFTWARE, "sq_pop_fit: dataset without counts");
    if (sq_modelfile_set(mf, e, "model", "pop") ||
        sq_model_set_data(mf, &ds->hdr, e) ||
        sq_modelfile_set(mf, e, "pop.train_interactions", "%llu",
                         (unsigned long long)ds->n_train_total) ||
        sq_modelfile_add(mf, "pop.count", SQ_U64, 1, shape, ds->pop, e)) {
        sq_modelfile_free(mf);
        return e->code;
    }
    return 0;
}

static int pop_scores(sq_model *m, const sq_batch *b, float *scores, sq_err *e)
{
    (void)e;
    const pop_impl *p = m->impl;
    size_t row = (size_t)m->n_items + 1;
    for (int i = 0; i < b->B; i++)
        memcpy(scores + (size_t)i * row, p->score, row * sizeof *scores);
    return 0;
}

static void pop_free(sq_model *m)
{
    pop_impl *p = m->impl;
    if (p)
        free(p->score);
    free(p);
    m->impl = NULL;
}

int sq_pop_load(sq_model *m, sq_modelfile *mf, const sq_ctx *cx, sq_err *e)
{
    (void)cx; /* counts: no arithmetic for a device (pop_gpu_check) */
    const sq_tensor *t = sq_modelfile_find(mf, "pop.count");
    if (!t)
        return sq_fail(e, SQ_EX_DATA, "pop model without a pop.count tensor");
    if (t->dtype != SQ_U64 || t->ndim != 1 || t->shape[0] != (uint64_t)m->n_items + 1)
        return sq_fail(e, SQ_EX_DATA, "pop.count must be u64 [n_items + 1 = %llu]",
                       (unsigned long long)m->n_items + 1);
    pop_impl *p = calloc(1, sizeof *p);
    float *s = malloc(((size_t)m->n_items + 1) * sizeof *s);
    if (!p || !s) {
        free(p);
        free(s);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    const uint64_t *count = t->data;
    s[0] = 0;
    for (uint32_t i = 1; i <= m->n_items; i++)
        s[i] = (float)count[i];
    p->score = s;
    m->impl = p;
    m->scores = pop_scores;
    m->free_impl = pop_free;
    return 0;
}

/* pop has no options: any given is refused. */
static int pop_config(void *cfg, const char *given, const sq_data_dims *d, sq_err *e)
{
    (void)cfg;
    (void)d;
    if (given && *given) {
        char key[64], name[64];
        snprintf(key, sizeof key, "%.*s", (int)strcspn(given, "="), given);
        return sq_fail(e, SQ_EX_USAGE, "--%s is not an option of --model pop",
                       sq_opt_name_of_key(key, name, sizeof name));
    }
    return 0;
}

static const sq_opt pop_opts[] = {{0}};

/* --device cuda: pop has no arithmetic to put on a device (counting in
 * one pass, scores a copy of the counts), so it fits and scores on the
 * host whatever the device, the same bytes: a pipeline that runs every
 * model on a GPU keeps its popularity row. */
static int pop_gpu_check(const void *cfg, sq_err *e)
{
    (void)cfg, (void)e;
    return 0;
}

const sq_model_def sq_model_pop = {
    .name = "pop",
    .summary = "popularity: every user gets the training counts",
    .opts = pop_opts,
    .cfg_size = 1,
    .config = pop_config,
    .load = sq_pop_load,
    .fit = sq_pop_fit,
    .gpu_check = pop_gpu_check,
};
