/* micro.c - data-parallel micro-batches (see micro.h). */
#include "micro.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_ops.h"
#include "ops.h"
#include "vec.h"

/* Ranks on GPUs: one part a rank, the parts' statistics summed by NCCL */
static int open_gpu_ranks(sq_micro *mb, const sq_net *net, const sq_comm *comm, sq_err *e)
{
    if (comm->size > SQ_MICRO_MAX)
        return sq_fail(e, SQ_EX_USAGE, "%d processes: at most %d", comm->size, SQ_MICRO_MAX);
    mb->gpu = 1;
    mb->cx = net->cx;
    mb->comm = comm;
    mb->P = 1;
    mb->G = comm->size;
    mb->base = comm->rank;
    size_t bytes = 2 * (size_t)mb->G * sizeof(double);
    if (!(mb->loss = calloc((size_t)mb->G, sizeof *mb->loss)) ||
        !(mb->cnt = calloc((size_t)mb->G, sizeof *mb->cnt)) ||
        !(mb->stats_host = malloc(bytes)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    return (mb->stats = sq_ctx_alloc(net->cx, bytes, e)) ? 0 : e->code;
}

/* The ranks' buffers of ACROSS PROCESSES (micro.h) */
static int open_ranks(sq_micro *mb, const sq_model_def *def, const sq_net *net,
                      const sq_comm *comm, sq_err *e)
{
    if (!def->micro_batches)
        return sq_fail(e, SQ_EX_USAGE, "--model %s cannot train across %d processes: its "
                       "batch cannot be cut into parts (run it in one process)", def->name,
                       comm->size);
    if (net->cx->backend != SQ_BACKEND_CPU)
        return open_gpu_ranks(mb, net, comm, e);
    if ((long)comm->size * mb->P > SQ_MICRO_MAX)
        return sq_fail(e, SQ_EX_USAGE, "%d processes x %d threads: at most %d parts a step",
                       comm->size, mb->P, SQ_MICRO_MAX);
    mb->comm = comm;
    mb->G = comm->size * mb->P;
    mb->base = comm->rank * mb->P;
    size_t slice = net->ts->total < SQ_MICRO_SLICE ? net->ts->total : SQ_MICRO_SLICE;
    if (!(mb->in = malloc((slice ? slice : 1) * sizeof *mb->in)) ||
        !(mb->out = malloc((slice ? slice : 1) * sizeof *mb->out)) ||
        !(mb->loss = calloc((size_t)mb->G, sizeof *mb->loss)) ||
        !(mb->cnt = calloc((size_t)mb->G, sizeof *mb->cnt)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    return 0;
}

/* The batcher a worker's work is sized by (work_alloc reads its caps): a
 * part of G holds at most ceil(T / G) + 1.5 max_len of the batch's T rows
 * (sq_packed_split, batch.h), and at most max_len times its rows in sums
 * of squared lengths, so a worker keeps a part's activations, not a
 * batch's: 16 threads' workers hold about one batch between them, not 15. */
static sq_batcher worker_caps(const sq_batcher *bt, int G)
{
    sq_batcher p = *bt; /* a copy: only its caps change, only they are read */
    size_t L = (size_t)bt->max_len, T = ((size_t)bt->cap_T + (size_t)G - 1) / (size_t)G + 2 * L;
    if (T < (size_t)bt->cap_T) {
        p.cap_T = (int)T;
        p.cap_att = bt->cap_att < T * L ? bt->cap_att : T * L;
    }
    return p;
}

int sq_micro_open(sq_micro *mb, const sq_model_def *def, const void *cfg, const sq_net *net,
                  const sq_batcher *bt, int threads, const sq_comm *comm, sq_err *e)
{
    memset(mb, 0, sizeof *mb);
    mb->P = mb->G = 1;
    if (def->grad_rows) {
        for (int i = 0; i < net->ts->n; i++)
            if (net->ts->nd[i] && net->ts->shape[i][0] > mb->mark_n)
                mb->mark_n = net->ts->shape[i][0];
        if (!(mb->mark = calloc(mb->mark_n ? mb->mark_n : 1, sizeof *mb->mark)) ||
            (net->cx->backend != SQ_BACKEND_CPU &&
             !(mb->list = malloc((mb->mark_n ? mb->mark_n : 1) * sizeof *mb->list))))
            return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    if (threads <= 0)
        threads = omp_get_max_threads();
    int ranks = sq_comm_ranks(comm);
    if (!ranks && (!def->micro_batches || net->cx->backend != SQ_BACKEND_CPU || threads < 2))
        return 0;
    if (def->micro_batches && net->cx->backend == SQ_BACKEND_CPU)
        mb->P = mb->G = threads < SQ_MICRO_MAX ? threads : SQ_MICRO_MAX;
    if (ranks && open_ranks(mb, def, net, comm, e))
        return e->code;
    mb->cx1 = sq_ctx_cpu();
    mb->cx1.threads = 1;
    int views = bt->views > 1 ? bt->views : 1;
    mb->cap = (size_t)bt->batch * views + (size_t)mb->G + (size_t)bt->cap_T;
    if (!(mb->buf = malloc(mb->cap * sizeof *mb->buf)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    mb->shared = def->share_params != NULL;
    sq_batcher part_bt = worker_caps(bt, mb->G);
    for (int k = 1; k < mb->P; k++) {
        if (def->net_alloc(&mb->net[k], cfg, &mb->cx1, e) ||
            def->work_alloc(&mb->net[k], &part_bt, &mb->work[k], e))
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
    if (mb->cx) { /* ranks on GPUs: their device buffers */
        sq_ctx_free(mb->cx, mb->stats);
        sq_ctx_free(mb->cx, mb->packed);
        sq_ctx_free(mb->cx, mb->dlist);
    }
    free(mb->stats_host);
    free(mb->buf);
    free(mb->in);
    free(mb->out);
    free(mb->segs);
    free(mb->loss);
    free(mb->cnt);
    free(mb->mark);
    free(mb->list);
    free(mb->pieces);
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

/* The step's parts are summed (and, deferred, zeroed): the next step need
 * not zero them */
static void summed(sq_micro *mb)
{
    for (int k = 1; k < mb->np; k++)
        mb->clean[k] = 1;
    if (mb->np && mb->defer)
        mb->clean[0] = 1; /* the fused update zeroed it too */
    mb->np = 0;
}

/* The rows of the step's row-sparse tensor (def->grad_rows) into mb->mark;
 * mb->rows_t its index, -1 for a dense step */
static void mark_rows(sq_micro *mb, const sq_model_def *def, const sq_net *net,
                      const sq_packed *b, const sq_step_opts *so)
{
    mb->rows_t = -1;
    /* a GPU's exact Adam is dense: no marks to make, but for its ranks'
     * sum (gpu_sum) */
    if (!mb->mark || (net->cx->backend != SQ_BACKEND_CPU && !mb->lazy && !mb->gpu))
        return;
    if (++mb->stamp == 0) { /* wrapped: old stamps would match again */
        memset(mb->mark, 0, mb->mark_n * sizeof *mb->mark);
        mb->stamp = 1;
    }
    int t = -1;
    /* a GPU's rows are listed as they are marked (list_rows) */
    sq_row_marks rm = {.mark = mb->mark, .stamp = mb->stamp, .list = mb->list};
    size_t most = def->grad_rows(net, b, so, &rm, &t);
    mb->listed = rm.n;
    if (most && t >= 0 && t < net->ts->n && net->ts->shape[t][0] <= mb->mark_n) {
        mb->rows_t = t;
        mb->rows_most = most;
    }
}

/* Cuts b into the step's parts (mb->part) and marks its rows; the parts
 * (0 or 1: the batch is one step) */
static int prepare(sq_micro *mb, const sq_model_def *def, const sq_net *net,
                   const sq_packed *b, const sq_step_opts *so)
{
    int np = mb->G > 1 ? sq_packed_split(b, mb->G, mb->part, mb->buf, mb->cap) : 0;
    mark_rows(mb, def, net, b, so);
    return np;
}

/* Worker j's step on its part k = base + j (the part's index seeds its
 * dropout), into the worker's own gradients */
static void run_part(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                     const sq_step_opts *so, uint64_t step, int j, double *loss, int *cnt)
{
    size_t n = net->ts->total;
    sq_net *nj = j ? &mb->net[j] : net;
    int k = mb->base + j;
    if (j && !mb->shared)
        memcpy(nj->params, net->params, n * sizeof *nj->params);
    if (!mb->clean[j])
        sq_zero(nj->cx, nj->grads, n); /* worker 0: nested, one thread */
    mb->clean[j] = 0;
    cnt[k] = 0;
    loss[k] = def->step(nj, j ? mb->work[j] : work, &mb->part[k], so,
                        step ^ ((uint64_t)k << 48), &cnt[k]);
}

/* The parts' weights n_k / n into w and their entries into *total; the
 * batch's loss, or the first part's that is not finite */
static double weigh(const double *loss, const int *cnt, int np, float *w, int *total)
{
    int tot = 0;
    for (int k = 0; k < np; k++)
        tot += cnt[k];
    *total = tot;
    double sum = 0;
    for (int k = 0; k < np; k++) {
        double wk = tot ? (double)cnt[k] / tot : 0;
        w[k] = (float)wk;
        sum += cnt[k] ? wk * loss[k] : 0;
        if (!isfinite(loss[k]))
            return loss[k];
    }
    return sum;
}

/* sq_micro_step after prepare() */
static double step_parts(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                         const sq_packed *b, const sq_step_opts *so, uint64_t step, int np,
                         int *count)
{
    size_t n = net->ts->total;
    if (np < 2) {
        if (!mb->clean[0])
            sq_zero(net->cx, net->grads, n);
        mb->clean[0] = 0;
        mb->np = 1;
        mb->w[0] = 1;
        return def->step(net, work, b, so, step, count);
    }
    double loss[SQ_MICRO_MAX];
    int cnt[SQ_MICRO_MAX];
    #pragma omp parallel for schedule(static, 1) num_threads(np)
    for (int k = 0; k < np; k++)
        run_part(mb, def, net, work, so, step, k, loss, cnt);
    double sum = weigh(loss, cnt, np, mb->w, count);
    if (!isfinite(sum))
        return sum;
    mb->np = np;
    if (!mb->defer) {
        float *parts[SQ_MICRO_MAX];
        sq_grad_sum(net->cx, net->grads, parts, mb->w, parts_of(mb, net, parts), n);
        summed(mb);
    }
    return sum;
}

double sq_micro_step(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                     const sq_packed *b, const sq_step_opts *so, uint64_t step, int *count)
{
    int np = prepare(mb, def, net, b, so);
    return step_parts(mb, def, net, work, b, so, step, np, count);
}

/* A growing array *p of *cap elements of `size` bytes with room for one
 * more after its n: doubled (from 64) when full; -1 out of memory. */
static int room_for(int n, void **p, int *cap, size_t size)
{
    if (n < *cap)
        return 0;
    int c = *cap ? 2 * *cap : 64;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Appends the pieces of segment [off, off + n) of run cfg: chunks of
 * SQ_CHUNK elements, or of rows when width > 0 (n then counts rows) */
static int add_pieces(sq_micro *mb, size_t off, size_t n, size_t width, int cfg)
{
    size_t per = !width ? SQ_CHUNK : width < SQ_CHUNK ? SQ_CHUNK / width : 1;
    for (size_t a = 0; a < n; a += per) {
        if (room_for(mb->n_pieces, (void **)&mb->pieces, &mb->cap_pieces, sizeof *mb->pieces))
            return -1;
        mb->pieces[mb->n_pieces++] = (sq_adam_piece){
            .off = off, .a = a, .b = a + per < n ? a + per : n, .width = width, .cfg = cfg};
    }
    return 0;
}

/* The step's update in pieces: each run dense, but a row-sparse tensor
 * inside one by rows; cfgs[*n_cfgs] the runs' distinct configs */
static int plan(sq_micro *mb, const sq_net *net, const sq_micro_run *runs, int n_runs,
                const sq_adam_cfg **cfgs, int *n_cfgs)
{
    const sq_tensor_set *ts = net->ts;
    int rt = mb->rows_t;
    size_t t0 = rt >= 0 ? ts->off[rt] : 0, t1 = rt >= 0 ? t0 + ts->size[rt] : 0;
    mb->n_pieces = 0;
    *n_cfgs = 0;
    for (int i = 0; i < n_runs; i++) {
        int c = 0;
        while (c < *n_cfgs && cfgs[c] != runs[i].cfg)
            c++;
        if (c == *n_cfgs) {
            if (c == SQ_ADAM_CFGS)
                return SQ_EX_SOFTWARE;
            cfgs[(*n_cfgs)++] = runs[i].cfg;
        }
        size_t off = runs[i].off, end = off + runs[i].len;
        int rc;
        if (rt < 0 || t0 < off || t1 > end) {
            rc = add_pieces(mb, off, end - off, 0, c);
        } else {
            size_t rows = ts->shape[rt][0];
            rc = add_pieces(mb, off, t0 - off, 0, c) ||
                 add_pieces(mb, t0, rows, ts->size[rt] / rows, c) ||
                 add_pieces(mb, t1, end - t1, 0, c);
        }
        if (rc)
            return SQ_EX_OSERR;
    }
    return 0;
}

static int plan_or_fail(sq_micro *mb, const sq_net *net, const sq_micro_run *runs, int n_runs,
                        const sq_adam_cfg **cfgs, int *n_cfgs, sq_err *e)
{
    int rc = plan(mb, net, runs, n_runs, cfgs, n_cfgs);
    if (rc)
        return sq_fail(e, rc, rc == SQ_EX_OSERR ? "out of memory"
                                                : "more than %d Adam configs", SQ_ADAM_CFGS);
    return 0;
}

/* mb->list, the step's rows of tensor rows_t in the order marked
 * (mark_rows), padded with SQ_ADAM_NO_ROW to the most the step's shape
 * marks (at most every row); the list's length, and the marked rows' in
 * *marked. O(marked), not O(rows): a million-item table's step lists its
 * batch's rows. */
static size_t list_rows(sq_micro *mb, size_t rows, size_t *marked)
{
    size_t n = mb->listed, len = mb->rows_most < rows ? mb->rows_most : rows;
    *marked = n;
    while (n < len)
        mb->list[n++] = SQ_ADAM_NO_ROW;
    return len;
}

/* Elements [a, b) of the block with config c, appended to the dense runs */
static void dense(sq_adam_run *d, int *nd, size_t a, size_t b, const sq_adam_cfg *c)
{
    if (b > a)
        d[(*nd)++] = (sq_adam_run){.off = a, .len = b - a, .cfg = c};
}

/* A GPU's update of a lazy step (mb->lazy): each run densely (one call for
 * them all), but a lazy run's row-sparse tensor by its marked rows alone,
 * in one launch whose length is the step's shape's (a CUDA graph's step) */
static void gpu_rows_adam(sq_micro *mb, sq_net *net, float *m, float *v,
                          const sq_micro_run *runs, int n_runs, long t)
{
    const sq_tensor_set *ts = net->ts;
    int rt = mb->rows_t, nd = 0;
    size_t t0 = ts->off[rt], t1 = t0 + ts->size[rt], rows = ts->shape[rt][0];
    sq_adam_run d[SQ_MAX_TENSORS + 2]; /* one run split in two around the rows */
    for (int i = 0; i < n_runs && i < SQ_MAX_TENSORS; i++) {
        size_t off = runs[i].off, end = off + runs[i].len;
        const sq_adam_cfg *c = runs[i].cfg;
        if (!c->lazy || t0 < off || t1 > end) {
            dense(d, &nd, off, end, c);
            continue;
        }
        dense(d, &nd, off, t0, c);
        size_t marked, n = list_rows(mb, rows, &marked);
        sq_adam_update_rows(net->cx, net->params + t0, net->grads + t0, m + t0, v + t0,
                            ts->size[rt] / rows, mb->list, n, c, t);
        dense(d, &nd, t1, end, c);
    }
    sq_adam_update_runs(net->cx, net->params, net->grads, m, v, d, nd, t);
}

int sq_micro_adam(sq_micro *mb, sq_net *net, float *m, float *v, const sq_micro_run *runs,
                  int n_runs, long t, sq_err *e)
{
    const sq_adam_cfg *cfgs[SQ_ADAM_CFGS];
    int n_cfgs;
    if (mb->rows_t >= 0 && net->cx->backend != SQ_BACKEND_CPU) { /* summed: a GPU's */
        gpu_rows_adam(mb, net, m, v, runs, n_runs, t);
        summed(mb);
        return 0;
    }
    if ((!mb->defer || !mb->np) && mb->rows_t >= 0) { /* summed, row-sparse */
        if (plan_or_fail(mb, net, runs, n_runs, cfgs, &n_cfgs, e))
            return e->code;
        float *grad[1] = {net->grads};
        sq_adam_update_pieces(net->cx, net->params, net->grads, grad, NULL, 1, m, v,
                              mb->pieces, mb->n_pieces, cfgs, n_cfgs, mb->mark, mb->stamp, t);
        summed(mb);
        return 0;
    }
    if (!mb->defer || !mb->np) { /* summed by the step (or no step) */
        sq_adam_update_runs(net->cx, net->params, net->grads, m, v, runs, n_runs, t);
        summed(mb);
        return 0;
    }
    if (plan_or_fail(mb, net, runs, n_runs, cfgs, &n_cfgs, e))
        return e->code;
    float *parts[SQ_MICRO_MAX];
    int np = parts_of(mb, net, parts);
    sq_adam_update_pieces(net->cx, net->params, net->grads, parts, mb->w, np, m, v, mb->pieces,
                          mb->n_pieces, cfgs, n_cfgs, mb->mark, mb->stamp, t);
    summed(mb);
    return 0;
}

int sq_micro_passes(double loss, double max_loss)
{
    return isfinite(loss) && (max_loss <= 0 || loss <= max_loss);
}

/* The deferred step of np >= 2 parts and its update in one parallel
 * region: the parts, a barrier, then every thread weighs the parts itself
 * (the same bits as the master's) and takes its share of the update's
 * pieces. A sleeping thread is woken once a step instead of twice. */
static int fused(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                 const sq_step_opts *so, uint64_t step, int np, const sq_micro_update *u,
                 sq_micro_result *res, sq_err *e)
{
    const sq_adam_cfg *cfgs[SQ_ADAM_CFGS];
    int n_cfgs;
    if (plan_or_fail(mb, net, u->runs, u->n_runs, cfgs, &n_cfgs, e))
        return e->code;
    mb->np = np;
    float *parts[SQ_MICRO_MAX];
    parts_of(mb, net, parts);
    double loss[SQ_MICRO_MAX];
    int cnt[SQ_MICRO_MAX];
    #pragma omp parallel num_threads(np)
    {
        #pragma omp for schedule(static, 1)
        for (int k = 0; k < np; k++)
            run_part(mb, def, net, work, so, step, k, loss, cnt);
        float w[SQ_MICRO_MAX];
        int total;
        if (sq_micro_passes(weigh(loss, cnt, np, w, &total), u->max_loss))
            sq_adam_share_pieces(net->params, net->grads, parts, w, np, u->m, u->v,
                                 mb->pieces, mb->n_pieces, cfgs, n_cfgs, mb->mark, mb->stamp,
                                 u->t);
    }
    res->loss = weigh(loss, cnt, np, mb->w, &res->count);
    if ((res->updated = sq_micro_passes(res->loss, u->max_loss)))
        summed(mb);
    return 0;
}

/* Elements [x, x + m) of this rank's share of the sum (ACROSS PROCESSES):
 * its nl parts added in their order to in (the partial sum of the parts
 * before them, in[0] element x's; NULL on rank 0: its first part weighed
 * starts the sum), into net->grads, the workers' elements (and in's)
 * zeroed. As sq_grad_sum adds: w g + 1 in is in + w g exactly, so the
 * bits of one process's sum. */
static void fold_range(sq_micro *mb, sq_net *net, int nl, float *in, size_t x, size_t m)
{
    float *parts[SQ_MICRO_MAX + 1], w[SQ_MICRO_MAX + 1];
    int k = 0;
    parts[k] = net->grads + x;
    w[k++] = mb->w[mb->base];
    if (in) {
        parts[k] = in;
        w[k++] = 1;
    }
    for (int j = 1; j < nl; j++) {
        parts[k] = mb->net[j].grads + x;
        w[k++] = mb->w[mb->base + j];
    }
    /* a short run (a row or few): no team (so a row-sparse tensor's rows
     * are added on one thread) */
    sq_grad_sum(m < SQ_CHUNK ? &mb->cx1 : net->cx, parts[0], parts, w, k, m);
}

static int add_seg(sq_micro *mb, size_t x, size_t m)
{
    if (!m)
        return 0;
    if (room_for(mb->n_segs, (void **)&mb->segs, &mb->cap_segs, sizeof *mb->segs))
        return -1;
    mb->segs[mb->n_segs++] = (sq_micro_seg){.x = x, .m = m, .p = mb->active};
    mb->active += m;
    return 0;
}

/* The step's elements that the ranks sum, into mb->segs: all of them, but
 * of a row-sparse tensor (mb->rows_t) only the step's rows; the others
 * are zero in every part and the update reads none of them (micro.h), so
 * a large catalogue moves and adds its batch's rows only */
static int plan_segs(sq_micro *mb, const sq_net *net, sq_err *e)
{
    const sq_tensor_set *ts = net->ts;
    int rt = mb->rows_t, rc = 0;
    mb->n_segs = 0;
    mb->active = 0;
    if (rt < 0) {
        rc = add_seg(mb, 0, ts->total);
    } else {
        size_t t0 = ts->off[rt], rows = ts->shape[rt][0], width = ts->size[rt] / rows;
        rc = add_seg(mb, 0, t0);
        for (size_t r = 0, end; !rc && r < rows; r = end) {
            for (end = r; end < rows && mb->mark[end] == mb->stamp; end++)
                ;
            if (end == r) /* not the step's row */
                end++;
            else
                rc = add_seg(mb, t0 + r * width, (end - r) * width);
        }
        rc = rc || add_seg(mb, t0 + ts->size[rt], ts->total - t0 - ts->size[rt]);
    }
    return rc ? sq_fail(e, SQ_EX_OSERR, "out of memory") : 0;
}

/* The first segment that holds element p of the travel order */
static int seg_at(const sq_micro *mb, size_t p)
{
    int lo = 0, hi = mb->n_segs - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (mb->segs[mid].p <= p)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

enum { SEG_PACK, SEG_UNPACK, SEG_FOLD };

/* Elements [p, p + len) of the travel order, segment by segment, with buf
 * (their packed values): copied from net->grads into buf, from buf into
 * net->grads, or this rank's parts added to buf's partial sum (buf NULL:
 * rank 0, fold_range) */
static void seg_pass(sq_micro *mb, sq_net *net, int nl, int op, float *buf, size_t p,
                     size_t len)
{
    for (int i = seg_at(mb, p); i < mb->n_segs && mb->segs[i].p < p + len; i++) {
        const sq_micro_seg *g = &mb->segs[i];
        size_t lo = g->p > p ? g->p : p, hi = g->p + g->m < p + len ? g->p + g->m : p + len;
        size_t x = g->x + (lo - g->p), m = hi - lo;
        float *b = buf ? buf + (lo - p) : NULL;
        if (op == SEG_PACK)
            memcpy(b, net->grads + x, m * sizeof *b);
        else if (op == SEG_UNPACK)
            memcpy(net->grads + x, b, m * sizeof *b);
        else
            fold_range(mb, net, nl, b, x, m);
    }
}

/* Whether elements [p, p + len) of the travel order are one run of
 * net->grads (then at *x): sent from it and received into it as they are */
static int seg_whole(const sq_micro *mb, size_t p, size_t len, size_t *x)
{
    const sq_micro_seg *g = &mb->segs[seg_at(mb, p)];
    *x = g->x + (p - g->p);
    return p + len <= g->p + g->m;
}

/* The sum's ring (ring_sum): the slice that starts on rank 0 at stage t.
 * Slice s is at rank h mod q at stage start(s) + h, hop h in [0, 2q - 1):
 * a partial sum at hops below q, the finished sum after. Two ranks: a new
 * slice every stage (each link carries one hop of each slice); more:
 * blocks of q slices every 2 q stages, so no link carries two slices in a
 * stage (hops r and r + q cross the same link). -1: none starts then. */
static long ring_slice(long t, int q, long S)
{
    long s = q <= 2 ? t : t % (2L * q) < q ? t / (2L * q) * q + t % (2L * q) : -1;
    return t >= 0 && s < S ? s : -1;
}

/* Rank r's slices at stage t of the ring (of q ranks, S slices): the one
 * it sends on (*out), the one it receives (*in, finished: *fin), and the
 * one it adds its parts to (returned), each -1 for none */
static long ring_stage(long t, int r, int q, long S, long *out, long *in, int *fin)
{
    long mine = -1;
    *out = *in = -1;
    *fin = 0;
    for (long h = r; h < 2L * q - 1; h += q) { /* the hops at rank r */
        long s = ring_slice(t - h, q, S);
        if (s >= 0 && h < q)
            mine = s;
        if (s >= 0 && h > 0) {
            *in = s;
            *fin = h >= q;
        }
        if (h + 1 < 2L * q - 1 && (s = ring_slice(t - h - 1, q, S)) >= 0)
            *out = s;
    }
    return mine;
}

/* Slice s's elements of the travel order (0 for none) */
static size_t slice_len(const sq_micro *mb, long s)
{
    size_t a = (size_t)s * SQ_MICRO_SLICE;
    return s < 0 ? 0 : mb->active - a < SQ_MICRO_SLICE ? mb->active - a : SQ_MICRO_SLICE;
}

/* The sum of the step's np parts into net->grads on every rank. The q
 * ranks that hold parts, 0 to q - 1, are a ring: each slice of the
 * elements to sum (plan_segs) starts on rank 0, goes round once
 * collecting each rank's parts in their order (rank r adds its own to the
 * sum of the parts before, received from r - 1), then goes round again,
 * finished, to ranks 0 .. q - 2. Each rank sends to r + 1 and receives
 * from r - 1 at once, a slice at a time, so every link works; ranks
 * without a part (a batch of fewer than G parts) get the sum broadcast.
 * Each element is summed in part order, as one process does; a rank holds
 * two slices besides its own parts. */
static int ring_sum(sq_micro *mb, sq_net *net, int np, int nl, sq_err *e)
{
    const size_t L = SQ_MICRO_SLICE;
    if (plan_segs(mb, net, e))
        return e->code;
    const long S = (long)((mb->active + L - 1) / L);
    int r = mb->comm->rank, q = (np - 1) / mb->P + 1, to = (r + 1) % q, from = (r + q - 1) % q;
    long end = q <= 2 ? S + 2L * q : (S + q - 1) / q * 2L * q + 2L * q;
    for (long t = 0; r < q && t < end; t++) {
        long out, in;
        int fin;
        long mine = ring_stage(t, r, q, S, &out, &in, &fin);
        size_t no = slice_len(mb, out), ni = slice_len(mb, in), x;
        float *sb = mb->out, *rb = mb->in; /* a run of net->grads travels as it is */
        if (no && seg_whole(mb, (size_t)out * L, no, &x))
            sb = net->grads + x;
        else if (no)
            seg_pass(mb, net, nl, SEG_PACK, mb->out, (size_t)out * L, no);
        if (ni && fin && seg_whole(mb, (size_t)in * L, ni, &x))
            rb = net->grads + x;
        if ((no || ni) && sq_comm_sendrecv(mb->comm, sb, no * sizeof *sb, no ? to : -1, rb,
                                           ni * sizeof *rb, ni ? from : -1, e))
            return e->code;
        if (ni && fin && rb == mb->in)
            seg_pass(mb, net, nl, SEG_UNPACK, mb->in, (size_t)in * L, ni);
        if (mine >= 0)
            seg_pass(mb, net, nl, SEG_FOLD, r ? mb->in : NULL, (size_t)mine * L,
                     slice_len(mb, mine));
    }
    if (q < mb->comm->size)
        return sq_comm_bcast(mb->comm, net->grads, net->ts->total * sizeof *net->grads, 0, e);
    return 0;
}

/* A step of np >= 2 parts across ranks: this rank's parts on its threads,
 * every part's loss and entries on every rank, the sum of all np parts in
 * their order on every rank (ring_sum) and the update, as one process of
 * G threads computes them (micro.h). */
static int ranks_train(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                       const sq_step_opts *so, uint64_t step, int np,
                       const sq_micro_update *u, sq_micro_result *res, sq_err *e)
{
    int nl = np - mb->base < 0 ? 0 : np - mb->base < mb->P ? np - mb->base : mb->P;
    size_t n = net->ts->total, P = (size_t)mb->P;
    for (int k = 0; k < mb->G; k++) {
        mb->loss[k] = 0;
        mb->cnt[k] = 0;
    }
    #pragma omp parallel for schedule(static, 1) num_threads(nl > 1 ? nl : 1)
    for (int j = 0; j < nl; j++)
        run_part(mb, def, net, work, so, step, j, mb->loss, mb->cnt);
    if (sq_comm_allgather(mb->comm, mb->loss + mb->base, mb->loss, P * sizeof *mb->loss, e) ||
        sq_comm_allgather(mb->comm, mb->cnt + mb->base, mb->cnt, P * sizeof *mb->cnt, e))
        return e->code;
    mb->np = 0; /* nothing is left unsummed: the sum is ring_sum's */
    res->loss = weigh(mb->loss, mb->cnt, np, mb->w, &res->count);
    if (!sq_micro_passes(res->loss, u->max_loss))
        return 0;
    if (ring_sum(mb, net, np, nl, e))
        return e->code;
    for (int j = 1; j < nl; j++)
        mb->clean[j] = 1; /* the fold zeroed them */
    if (u->clip > 0 && !isfinite(res->norm = sq_grad_clip(net->cx, net->grads, n, u->clip)))
        return 0;
    if (sq_micro_adam(mb, net, u->m, u->v, u->runs, u->n_runs, u->t, e))
        return e->code;
    res->updated = 1;
    return 0;
}

/* The parts' losses and entries on every rank: each rank's in its slot,
 * the others zero, summed over NCCL (exact) */
static int gpu_stats(sq_micro *mb, sq_err *e)
{
    size_t n = 2 * (size_t)mb->G;
    if (sq_ctx_upload(mb->cx, mb->stats, mb->stats_host, n * sizeof(double), e) ||
        sq_ctx_nccl_sum(mb->cx, mb->stats, n, SQ_NCCL_F64, e) ||
        sq_ctx_download(mb->cx, mb->stats_host, mb->stats, n * sizeof(double), e))
        return e->code;
    for (int k = 0; k < mb->G; k++) {
        mb->loss[k] = mb->stats_host[2 * k];
        mb->cnt[k] = (int)mb->stats_host[2 * k + 1];
    }
    return 0;
}

/* Room on the device for k packed rows of width floats and their list */
static int packed_room(sq_micro *mb, size_t k, size_t width, sq_err *e)
{
    if (k * width <= mb->cap_packed)
        return 0;
    sq_ctx_free(mb->cx, mb->packed);
    sq_ctx_free(mb->cx, mb->dlist);
    mb->cap_packed = 0;
    if (!(mb->packed = sq_ctx_alloc(mb->cx, k * width * sizeof(float), e)) ||
        !(mb->dlist = sq_ctx_alloc(mb->cx, k * sizeof(int), e)))
        return e->code;
    mb->cap_packed = k * width;
    return 0;
}

/* The step's gradient summed over NCCL: all of it, but of a row-sparse
 * tensor (mb->rows_t) the step's rows alone, packed (gathered, summed,
 * put back). The others are zero on every rank (micro.h), so a large
 * catalogue's step moves its batch's rows, not its table. */
static int gpu_sum(sq_micro *mb, sq_net *net, sq_err *e)
{
    const sq_tensor_set *ts = net->ts;
    size_t n = ts->total;
    int rt = mb->rows_t;
    size_t rows = rt >= 0 ? ts->shape[rt][0] : 0, width = rt >= 0 ? ts->size[rt] / rows : 0;
    if (rt < 0 || mb->dense_sum || rows > INT_MAX || width > INT_MAX)
        return sq_ctx_nccl_sum(net->cx, net->grads, n, SQ_NCCL_F32, e);
    size_t t0 = ts->off[rt], t1 = t0 + ts->size[rt], k;
    list_rows(mb, rows, &k);
    float *g = net->grads + t0;
    /* the list is uint32_t: the same bits as the ints the row ops take */
    if (k && (packed_room(mb, k, width, e) ||
              sq_ctx_upload(mb->cx, mb->dlist, mb->list, k * sizeof(int), e)))
        return e->code;
    if (k)
        sq_gather_rows(net->cx, mb->packed, g, mb->dlist, (int)k, (int)width);
    if ((t0 && sq_ctx_nccl_sum(net->cx, net->grads, t0, SQ_NCCL_F32, e)) ||
        (k && sq_ctx_nccl_sum(net->cx, mb->packed, k * width, SQ_NCCL_F32, e)) ||
        (n > t1 && sq_ctx_nccl_sum(net->cx, net->grads + t1, n - t1, SQ_NCCL_F32, e)))
        return e->code;
    if (k)
        sq_scatter_rows(net->cx, g, mb->packed, mb->dlist, (int)k, (int)width);
    return 0;
}

/* A step of ranks on GPUs (micro.h): this rank's part, the statistics,
 * its weighted gradient summed over NCCL, then the update every rank
 * applies alike */
static int gpu_ranks_train(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                           const sq_packed *b, const sq_step_opts *so, uint64_t step,
                           const sq_micro_update *u, sq_micro_result *res, sq_err *e)
{
    int np = prepare(mb, def, net, b, so), k = mb->base;
    size_t n = net->ts->total;
    /* a batch that cannot be cut is rank 0's step; the others add zeros */
    const sq_packed *mine = np >= 2 ? (k < np ? &mb->part[k] : NULL) : (k == 0 ? b : NULL);
    memset(mb->stats_host, 0, 2 * (size_t)mb->G * sizeof(double));
    sq_zero(net->cx, net->grads, n);
    if (mine) {
        int cnt = 0;
        if (sq_packed_stage(net->cx, mine, e))
            return e->code;
        mb->stats_host[2 * k] = def->step(net, work, mine, so,
                                          np >= 2 ? step ^ ((uint64_t)k << 48) : step, &cnt);
        mb->stats_host[2 * k + 1] = cnt;
    }
    if (gpu_stats(mb, e))
        return e->code;
    res->loss = weigh(mb->loss, mb->cnt, np >= 2 ? np : 1, mb->w, &res->count);
    if (!sq_micro_passes(res->loss, u->max_loss))
        return 0;
    if (mine && np >= 2 && mb->w[k] != 1)
        sq_scale(net->cx, net->grads, n, mb->w[k]);
    if (gpu_sum(mb, net, e))
        return e->code;
    if (u->clip > 0 && !isfinite(res->norm = sq_grad_clip(net->cx, net->grads, n, u->clip)))
        return 0;
    mb->np = 0;
    if (sq_micro_adam(mb, net, u->m, u->v, u->runs, u->n_runs, u->t, e))
        return e->code;
    res->updated = 1;
    return 0;
}

int sq_micro_train(sq_micro *mb, const sq_model_def *def, sq_net *net, void *work,
                   const sq_packed *b, const sq_step_opts *so, uint64_t step,
                   const sq_micro_update *u, sq_micro_result *res, sq_err *e)
{
    memset(res, 0, sizeof *res);
    /* a deferred step leaves its gradient unsummed: the norm would see
     * part 0 alone */
    if (u->clip > 0 && mb->defer)
        return sq_fail(e, SQ_EX_SOFTWARE, "a deferred micro-batch sum cannot be clipped");
    if (mb->gpu)
        return gpu_ranks_train(mb, def, net, work, b, so, step, u, res, e);
    int np = prepare(mb, def, net, b, so);
    if (np >= 2 && mb->comm)
        return ranks_train(mb, def, net, work, so, step, np, u, res, e);
    if (np >= 2 && mb->defer)
        return fused(mb, def, net, work, so, step, np, u, res, e);
    int count = 0;
    double loss = step_parts(mb, def, net, work, b, so, step, np, &count);
    return sq_micro_finish(mb, net, loss, count, u, res, e);
}

int sq_micro_finish(sq_micro *mb, sq_net *net, double loss, int count,
                    const sq_micro_update *u, sq_micro_result *res, sq_err *e)
{
    res->loss = loss;
    res->count = count;
    if (!sq_micro_passes(res->loss, u->max_loss))
        return 0;
    /* no clipping, no norm: a pass over every gradient saved (a diverging
     * step shows in the next loss) */
    if (u->clip > 0 && !isfinite(res->norm = sq_grad_clip(net->cx, net->grads,
                                                          net->ts->total, u->clip)))
        return 0;
    if (sq_micro_adam(mb, net, u->m, u->v, u->runs, u->n_runs, u->t, e))
        return e->code;
    res->updated = 1;
    return 0;
}

