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
    memset(mb, 0, sizeof *mb);
}

/* g = w g + wk gk over one chunk (vec.h: the same bits at every width) */
SQ_VEC static void scale_add(float *restrict g, float w, const float *restrict gk, float wk,
                             size_t n)
{
    if (!gk) {
        #pragma omp simd
        for (size_t i = 0; i < n; i++)
            g[i] *= w;
        return;
    }
    #pragma omp simd
    for (size_t i = 0; i < n; i++)
        g[i] = w * g[i] + wk * gk[i];
}

/* g0 = sum_k w_k g_k over the parts in order, a chunk of parameters per
 * task; each worker's chunk is zeroed once read, while it is in cache, so
 * that its next step need not (mb->clean) */
static void reduce(sq_micro *mb, sq_net *net, int np, const double *w)
{
    size_t n = net->ts->total;
    long chunks = sq_chunks(n);
    #pragma omp parallel for schedule(static) num_threads(mb->P)
    for (long c = 0; c < chunks; c++) {
        size_t len, i0 = sq_chunk(n, c, &len);
        scale_add(net->grads + i0, (float)w[0], NULL, 0, len);
        for (int k = 1; k < np; k++) {
            scale_add(net->grads + i0, 1.0f, mb->net[k].grads + i0, (float)w[k], len);
            memset(mb->net[k].grads + i0, 0, len * sizeof *net->grads);
        }
    }
    for (int k = 1; k < np; k++)
        mb->clean[k] = 1;
}

double sq_micro_step(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                     const sq_packed *b, const sq_step_opts *so, uint64_t step, int *count)
{
    size_t n = net->ts->total;
    int np = mb->P > 1 ? sq_packed_split(b, mb->P, mb->part, mb->buf, mb->cap) : 0;
    if (np < 2) {
        sq_zero(net->cx, net->grads, n);
        return def->step(net, work, b, so, step, count);
    }
    double loss[SQ_MICRO_MAX], w[SQ_MICRO_MAX];
    int cnt[SQ_MICRO_MAX];
    #pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++) {
        sq_net *nk = k ? &mb->net[k] : net;
        if (k && !mb->shared)
            memcpy(nk->params, net->params, n * sizeof *nk->params);
        if (!k || !mb->clean[k])
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
        sum += cnt[k] ? w[k] * loss[k] : 0;
        if (!isfinite(loss[k]))
            return loss[k];
    }
    reduce(mb, net, np, w);
    return sum;
}
