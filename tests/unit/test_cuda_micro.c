/* The trainer's update on a GPU (lib/train/micro.c): lazy Adam through
 * the step's listed rows (gpu_rows_adam, sq_adam_update_rows) against the
 * CPU's lazy pieces, through the CPU API on a CUDA context (cuda_check.h);
 * skipped without a backend.
 *
 * One sampled-softmax step of SASRec (11 users of items 1..9 in a table of 2000,
 * 4 uniform negatives an entry: they touch a few hundred rows) on each device,
 * the moments starting non-zero (exact Adam would move every row). The
 * item table's rows the step did not mark keep their values and moments
 * to the bit on both; every other element agrees to 1e-4 relative + 1e-6
 * (the GPU's sums in another order); exact Adam on the GPU moves the
 * unmarked rows. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "micro.h"
#include "models.h"
#include "nextloss.h"

enum { LZ_USERS = 11, LZ_ITEMS = 2000 };
static uint32_t lz_items[LZ_USERS * 24], lz_ntrain[LZ_USERS];
static uint64_t lz_start[LZ_USERS];

static sq_seqs lz_seqs(void)
{
    uint64_t at = 0;
    for (int u = 0; u < LZ_USERS; u++) {
        lz_start[u] = at;
        lz_ntrain[u] = 3 + (uint32_t)(u * 7 % 21);
        for (uint32_t i = 0; i < lz_ntrain[u]; i++)
            lz_items[at++] = 1 + (uint32_t)((u * 5 + i * 3 + i * i) % 9);
    }
    return (sq_seqs){.n_users = LZ_USERS, .n_items = LZ_ITEMS, .items = lz_items,
                     .start = lz_start, .n_train = lz_ntrain};
}

/* What a step left: parameters before and after, moments after (host),
 * and the item table's marks */
typedef struct {
    size_t n, t0, rows, width;
    float *p0, *p, *m, *v;
    uint32_t *mark, stamp;
} lz_out;

static void lz_free(lz_out *o)
{
    free(o->p0);
    free(o->mark);
    memset(o, 0, sizeof *o);
}

/* One step and its update on cx (lazy or exact Adam); 0 when it ran */
static int lz_step(const sq_ctx *cx, int lazy, lz_out *o)
{
    const sq_model_def *def = sq_models_find("sasrec");
    sq_step_opts so = {.loss = SQ_LOSS_SAMPLED_SOFTMAX, .neg = 4, .target = SQ_TARGET_ALL,
                       .batch = LZ_USERS, .seed = 3};
    sq_adam_cfg cfg = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.98, .eps = 1e-8,
                       .weight_decay = 0.1, .decoupled = 1, .lazy = lazy};
    sq_seqs d = lz_seqs();
    sq_err e = {0};
    sq_net net = {0};
    sq_batcher bt;
    sq_micro mb;
    void *mc = calloc(1, def->cfg_size), *work = NULL;
    float *m = NULL, *v = NULL, *mv0 = NULL;
    int cnt = 0, rc = -1;
    memset(&bt, 0, sizeof bt);
    memset(&mb, 0, sizeof mb);
    memset(o, 0, sizeof *o);
    if (!mc || def->config(mc, "dim=8\nffn=8\nmax_len=12\nlayers=1\ndropout=0\n",
                           &(sq_data_dims){.n_items = LZ_ITEMS}, &e) ||
        def->net_alloc(&net, mc, cx, &e) || def->batcher(&bt, &d, mc, &so, &e) ||
        def->work_alloc(&net, &bt, &work, &e) ||
        sq_micro_open(&mb, def, mc, &net, &bt, 1, NULL, &e))
        goto out;
    mb.lazy = lazy;
    def->net_init(&net, 5);
    size_t n = o->n = net.ts->total;
    o->p0 = malloc(4 * n * sizeof *o->p0);
    mv0 = malloc(2 * n * sizeof *mv0);
    m = sq_ctx_alloc(cx, n * sizeof *m, &e);
    v = sq_ctx_alloc(cx, n * sizeof *v, &e);
    if (!o->p0 || !mv0 || !m || !v)
        goto out;
    o->p = o->p0 + n;
    o->m = o->p + n;
    o->v = o->m + n;
    for (size_t i = 0; i < 2 * n; i++)
        mv0[i] = (float)(1e-3 * (1 + (double)(i % 7)));
    sq_batcher_shuffle(&bt, 0);
    const sq_packed *pb = sq_batcher_get(&bt, 0, 0);
    sq_micro_run run = {.off = 0, .len = n, .cfg = &cfg};
    if (sq_ctx_download(cx, o->p0, net.params, n * sizeof *m, &e) ||
        sq_ctx_upload(cx, m, mv0, n * sizeof *m, &e) ||
        sq_ctx_upload(cx, v, mv0 + n, n * sizeof *v, &e) || sq_packed_stage(cx, pb, &e))
        goto out;
    sq_micro_step(&mb, def, &net, work, pb, &so, 1, &cnt);
    if ((lazy || cx->backend == SQ_BACKEND_CPU) && mb.rows_t < 0)
        goto out; /* a lazy step, or the CPU's, marks its rows */
    if (sq_micro_adam(&mb, &net, m, v, &run, 1, 3, &e) ||
        sq_ctx_download(cx, o->p, net.params, n * sizeof *m, &e) ||
        sq_ctx_download(cx, o->m, m, n * sizeof *m, &e) ||
        sq_ctx_download(cx, o->v, v, n * sizeof *v, &e) || sq_ctx_sync(cx, &e))
        goto out;
    if (mb.rows_t >= 0) {
        o->t0 = net.ts->off[mb.rows_t];
        o->rows = net.ts->shape[mb.rows_t][0];
        o->width = net.ts->size[mb.rows_t] / o->rows;
        o->stamp = mb.stamp;
        if (!(o->mark = malloc(o->rows * sizeof *o->mark)))
            goto out;
        memcpy(o->mark, mb.mark, o->rows * sizeof *o->mark);
    }
    rc = cnt > 0 ? 0 : -1;
out:
    if (rc && e.msg[0])
        fprintf(stderr, "    lazy step: %s\n", e.msg);
    if (m)
        sq_ctx_free(cx, m);
    if (v)
        sq_ctx_free(cx, v);
    free(mv0);
    if (work)
        def->work_free(work);
    sq_micro_close(&mb, def);
    sq_batcher_free(&bt);
    if (net.ts)
        def->net_free(&net);
    free(mc);
    return rc;
}

/* Element i's row of the item table, or -1 outside it */
static long lz_row(const lz_out *o, size_t i)
{
    return i >= o->t0 && i < o->t0 + o->rows * o->width ? (long)((i - o->t0) / o->width) : -1;
}

UNIT_TEST(test_cuda_micro_lazy)
{
    cuda_env g;
    if (cuda_open(t, &g))
        return;
    sq_ctx cpu = sq_ctx_cpu();
    cpu.threads = 1;
    lz_out c = {0}, gl = {0}, ge = {0};
    int ok = lz_step(&cpu, 1, &c) == 0 && lz_step(&g.cx, 1, &gl) == 0 &&
             lz_step(&g.cx, 0, &ge) == 0;
    CHECK(ok);
    if (ok) {
        CHECK_EQ(c.n, gl.n);
        int kept = 1, marked = 0, unmarked = 0, moved = 0;
        for (size_t i = 0; i < c.n && c.n == gl.n; i++) {
            long r = lz_row(&c, i);
            int first = r >= 0 && (i - c.t0) % c.width == 0;
            /* the same rows marked on both devices */
            if (r >= 0 && (c.mark[r] == c.stamp) != (gl.mark[r] == gl.stamp))
                kept = 0;
            if (r >= 0 && c.mark[r] != c.stamp) {
                kept &= c.p[i] == c.p0[i] && gl.p[i] == gl.p0[i] && gl.m[i] == c.m[i] &&
                        gl.v[i] == c.v[i] && c.p0[i] == gl.p0[i];
                unmarked += first;
                moved += first && ge.p[i] != ge.p0[i];
            } else {
                marked += first;
            }
        }
        CHECK(kept);
        CHECK(marked > 0 && unmarked > 0);
        CHECK_EQ(moved, unmarked); /* exact Adam moves them */
        CHECK(cuda_close_to(gl.p, c.p, c.n, 1e-6, 1e-4, "lazy params"));
        CHECK(cuda_close_to(gl.m, c.m, c.n, 1e-6, 1e-4, "lazy m"));
        CHECK(cuda_close_to(gl.v, c.v, c.n, 1e-6, 1e-4, "lazy v"));
        if (getenv("SQ_TEST_VERBOSE"))
            fprintf(stderr, "    %d rows marked, %d unmarked\n", marked, unmarked);
    }
    lz_free(&c);
    lz_free(&gl);
    lz_free(&ge);
    cuda_close(&g);
}
