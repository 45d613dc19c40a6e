/* micro.c - data-parallel micro-batches (see micro.h). */
#include "micro.h"

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
        !(mb->loss = calloc((size_t)mb->G, sizeof *mb->loss)) ||
        !(mb->cnt = calloc((size_t)mb->G, sizeof *mb->cnt)))
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    return 0;
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
        if (!(mb->mark = calloc(mb->mark_n ? mb->mark_n : 1, sizeof *mb->mark)))
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
    if (mb->stats)
        sq_ctx_free(mb->cx, mb->stats);
    free(mb->stats_host);
    free(mb->buf);
    free(mb->in);
    free(mb->loss);
    free(mb->cnt);
    free(mb->mark);
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
    if (!mb->mark || net->cx->backend != SQ_BACKEND_CPU) /* a GPU updates densely */
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

/* Appends the pieces of segment [off, off + n) of run cfg: chunks of
 * SQ_CHUNK elements, or of rows when width > 0 (n then counts rows) */
static int add_pieces(sq_micro *mb, size_t off, size_t n, size_t width, int cfg)
{
    size_t per = !width ? SQ_CHUNK : width < SQ_CHUNK ? SQ_CHUNK / width : 1;
    for (size_t a = 0; a < n; a += per) {
        if (mb->n_pieces == mb->cap_pieces) {
            int cap = mb->cap_pieces ? 2 * mb->cap_pieces : 64;
            sq_adam_piece *p = realloc(mb->pieces, (size_t)cap * sizeof *p);
            if (!p)
                return -1;
            mb->pieces = p;
            mb->cap_pieces = cap;
        }
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

int sq_micro_adam(sq_micro *mb, sq_net *net, float *m, float *v, const sq_micro_run *runs,
                  int n_runs, long t, sq_err *e)
{
    const sq_adam_cfg *cfgs[SQ_ADAM_CFGS];
    int n_cfgs;
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
        for (int i = 0; i < n_runs; i++)
            sq_adam_update(net->cx, net->params + runs[i].off, net->grads + runs[i].off,
                           m + runs[i].off, v + runs[i].off, runs[i].len, runs[i].cfg, t);
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

/* Elements [a, a + len) of this rank's share of the sum (ACROSS
 * PROCESSES): its nl parts added in their order to in, the sum of the
 * parts before them (NULL on rank 0: its first part weighed starts the
 * sum), into net->grads, and the workers' elements zeroed. sq_grad_sum's
 * arithmetic: in * 1 is in exactly, so the bits of one process's sum. */
static void fold_slice(sq_micro *mb, sq_net *net, int nl, const float *in, size_t a,
                       size_t len)
{
    float *parts[SQ_MICRO_MAX + 1] = {mb->in}, w[SQ_MICRO_MAX + 1] = {1};
    int k = in != NULL; /* in starts the sum, or this rank's first part */
    for (int j = 0; j < nl; j++) {
        parts[k] = (j ? mb->net[j].grads : net->grads) + a;
        w[k++] = mb->w[mb->base + j];
    }
    sq_grad_sum(net->cx, parts[0], parts, w, k, len);
    if (in)
        memcpy(net->grads + a, mb->in, len * sizeof *mb->in);
}

/* The sum of the step's np parts into net->grads on every rank. The ranks
 * that hold parts, 0 to last, are a chain: each adds its parts to the
 * partial sum it receives from the rank before and sends the result on,
 * slice by slice, so they work at once (rank r folds slice s at stage
 * r + s, while it sends slice s - 1 on); the last rank's sum is then
 * broadcast. Each element is summed in part order, as one process does;
 * a rank holds one slice besides its own parts. */
static int chain_sum(sq_micro *mb, sq_net *net, int np, int nl, sq_err *e)
{
    const size_t L = SQ_MICRO_SLICE, n = net->ts->total, S = (n + L - 1) / L;
    int r = mb->comm->rank, last = (np - 1) / mb->P;
    for (size_t s = 0; r <= last && s <= S; s++) {
        /* slice s in, slice s - 1 out: elements [s L, s L + len) */
        size_t len = s < S ? (n - s * L < L ? n - s * L : L) : 0;
        size_t out = s ? (s - 1) * L : 0, nout = s ? (n - out < L ? n - out : L) : 0;
        int to = nout && r < last ? r + 1 : -1, from = len && r > 0 ? r - 1 : -1;
        if (sq_comm_sendrecv(mb->comm, net->grads + out, nout * sizeof *net->grads, to,
                             mb->in, len * sizeof *mb->in, from, e))
            return e->code;
        if (len)
            fold_slice(mb, net, nl, r > 0 ? mb->in : NULL, s * L, len);
    }
    return sq_comm_bcast(mb->comm, net->grads, n * sizeof *net->grads, last, e);
}

/* A step of np >= 2 parts across ranks: this rank's parts on its threads,
 * every part's loss and entries on every rank, the sum of all np parts in
 * their order on every rank (chain_sum) and the update, as one process of
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
    mb->np = 0; /* nothing is left unsummed: the sum is chain_sum's */
    res->loss = weigh(mb->loss, mb->cnt, np, mb->w, &res->count);
    if (!sq_micro_passes(res->loss, u->max_loss))
        return 0;
    if (chain_sum(mb, net, np, nl, e))
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
    if (sq_ctx_nccl_sum(net->cx, net->grads, n, SQ_NCCL_F32, e))
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

