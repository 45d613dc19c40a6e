/* micro.c - data-parallel micro-batches (see micro.h). */
#include "micro.h"

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#include "vec.h"

int sq_micro_open(sq_micro *mb, const sq_model_def *def, const void *cfg, const sq_net *net,
                  const sq_batcher *bt, int threads, sq_err *e)
{
    memset(mb, 0, sizeof *mb);
    mb->P = 1;
    if (def->grad_rows) {
        for (int i = 0; i < net->ts->n; i++)
            if (net->ts->nd[i] && net->ts->shape[i][0] > mb->mark_n)
                mb->mark_n = net->ts->shape[i][0];
        if (!(mb->mark = calloc(mb->mark_n ? mb->mark_n : 1, sizeof *mb->mark)))
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    if (threads <= 0)
        threads = omp_get_max_threads();
    if (!def->micro_batches || net->cx->backend != SQ_BACKEND_CPU || threads < 2)
        return 0;
    mb->P = threads < SQ_MICRO_MAX ? threads : SQ_MICRO_MAX;
    mb->cx1 = sq_ctx_cpu();
    mb->cx1.threads = 1;
    int views = bt->views > 1 ? bt->views : 1;
    mb->cap = (size_t)bt->batch * views + (size_t)mb->P + (size_t)bt->cap_T;
    if (!(mb->buf = malloc(mb->cap * sizeof *mb->buf)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    mb->shared = def->share_params != NULL;
    for (int k = 1; k < mb->P; k++) {
        if (def->net_alloc(&mb->net[k], cfg, &mb->cx1, e) ||
            def->work_alloc(&mb->net[k], bt, &mb->work[k], e))
            return e->code;
        if (mb->shared)
            def->share_params(&mb->net[k], net->params);
        mb->clean[k] = 1; /* allocated zeroed */
    }
    return 0;
}

void sq_micro_close(sq_micro *mb, const sq_model_def *def)
{
    for (int k = 1; k < mb->P; k++) {
        if (mb->work[k] && def->work_free)
            def->work_free(mb->work[k]);
        if (mb->net[k].impl)
            def->net_free(&mb->net[k]);
    }
    free(mb->buf);
    free(mb->mark);
    memset(mb, 0, sizeof *mb);
}

/* The parts' gradients, in the order of the sum */
static int parts_of(sq_micro *mb, sq_net *net, float **parts)
{
    parts[0] = net->grads;
    for (int k = 1; k < mb->np; k++)
        parts[k] = mb->net[k].grads;
    return mb->np;
}

/* The rows of the step's row-sparse tensor (def->grad_rows) into mb->mark;
 * mb->rows_t its index, -1 for a dense step */
static void mark_rows(sq_micro *mb, const sq_model_def *def, const sq_net *net,
                      const sq_packed *b, const sq_step_opts *so)
{
    mb->rows_t = -1;
    if (!mb->mark || !mb->defer)
        return;
    if (++mb->stamp == 0) { /* wrapped: old stamps would match again */
        memset(mb->mark, 0, mb->mark_n * sizeof *mb->mark);
        mb->stamp = 1;
    }
    int t = -1;
    if (def->grad_rows(net, b, so, mb->mark, mb->stamp, &t) && t >= 0 && t < net->ts->n &&
        net->ts->shape[t][0] <= mb->mark_n)
        mb->rows_t = t;
}

double sq_micro_step(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                     const sq_packed *b, const sq_step_opts *so, uint64_t step, int *count)
{
    size_t n = net->ts->total;
    int np = mb->P > 1 ? sq_packed_split(b, mb->P, mb->part, mb->buf, mb->cap) : 0;
    mark_rows(mb, def, net, b, so);
    if (np < 2) {
        if (!mb->clean[0])
            sq_zero(net->cx, net->grads, n);
        mb->clean[0] = 0;
        mb->np = 1;
        mb->w[0] = 1;
        return def->step(net, work, b, so, step, count);
    }
    double loss[SQ_MICRO_MAX], w[SQ_MICRO_MAX];
    int cnt[SQ_MICRO_MAX];
    #pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++) {
        sq_net *nk = k ? &mb->net[k] : net;
        if (k && !mb->shared)
            memcpy(nk->params, net->params, n * sizeof *nk->params);
        if (!mb->clean[k])
            sq_zero(nk->cx, nk->grads, n); /* worker 0: nested, one thread */
        mb->clean[k] = 0;
        cnt[k] = 0;
        loss[k] = def->step(nk, k ? mb->work[k] : work, &mb->part[k], so,
                            step ^ ((uint64_t)k << 48), &cnt[k]);
    }
    int total = 0;
    for (int k = 0; k < np; k++)
        total += cnt[k];
    *count = total;
    double sum = 0;
    for (int k = 0; k < np; k++) {
        w[k] = total ? (double)cnt[k] / total : 0;
        mb->w[k] = (float)w[k];
        sum += cnt[k] ? w[k] * loss[k] : 0;
        if (!isfinite(loss[k]))
            return loss[k];
    }
    mb->np = np;
    if (!mb->defer) {
        float *parts[SQ_MICRO_MAX];
        sq_grad_sum(net->cx, net->grads, parts, mb->w, parts_of(mb, net, parts), n);
        sq_micro_summed(mb);
    }
    return sum;
}

/* The fused update of [off, off + n), all of it dense */
static void adam_dense(sq_micro *mb, sq_net *net, float *m, float *v, size_t off, size_t n,
                       const sq_adam_cfg *cfg, long t)
{
    if (!n)
        return;
    float *parts[SQ_MICRO_MAX];
    int np = parts_of(mb, net, parts);
    for (int k = 0; k < np; k++)
        parts[k] += off;
    sq_adam_update_sum(net->cx, net->params + off, net->grads + off, parts, mb->w, np,
                       m + off, v + off, n, cfg, t);
}

void sq_micro_adam(sq_micro *mb, sq_net *net, float *m, float *v, size_t off, size_t n,
                   const sq_adam_cfg *cfg, long t)
{
    if (!mb->defer || !mb->np) { /* summed by the step (or no step) */
        sq_adam_update(net->cx, net->params + off, net->grads + off, m + off, v + off, n, cfg,
                       t);
        return;
    }
    const sq_tensor_set *ts = net->ts;
    int rt = mb->rows_t;
    size_t t0 = rt >= 0 ? ts->off[rt] : 0, t1 = rt >= 0 ? t0 + ts->size[rt] : 0;
    if (rt < 0 || t0 < off || t1 > off + n) {
        adam_dense(mb, net, m, v, off, n, cfg, t);
        return;
    }
    /* the row-sparse tensor inside the run: dense before and after it */
    adam_dense(mb, net, m, v, off, t0 - off, cfg, t);
    float *parts[SQ_MICRO_MAX];
    int np = parts_of(mb, net, parts);
    for (int k = 0; k < np; k++)
        parts[k] += t0;
    size_t rows = ts->shape[rt][0];
    sq_adam_update_rows(net->cx, net->params + t0, net->grads + t0, parts, mb->w, np, m + t0,
                        v + t0, rows, ts->size[rt] / rows, mb->mark, mb->stamp, cfg, t);
    adam_dense(mb, net, m, v, t1, off + n - t1, cfg, t);
}

void sq_micro_summed(sq_micro *mb)
{
    for (int k = 1; k < mb->np; k++)
        mb->clean[k] = 1;
    if (mb->np && mb->defer)
        mb->clean[0] = 1; /* the fused update zeroed it too */
    mb->np = 0;
}
