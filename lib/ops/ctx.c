/* ctx.c - the op context's memory and threads (see ctx.h). The CPU backend
 * uses the C library and OpenMP; the CUDA one forwards to gpu.h with the
 * context's sq_gpu. */
#include "ctx.h"
#include "gpu.h"

#include <omp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* CPU blocks: 64-byte aligned (a cache line, an AVX-512 register), so
 * aligned_alloc needs the size rounded up to a multiple of 64. */
#define CTX_ALIGN 64

void *sq_ctx_alloc(const sq_ctx *cx, size_t bytes, sq_err *e)
{
    if (cx->backend == SQ_BACKEND_CUDA) {
        void *p = NULL;
        if (sq_gpu_alloc(cx->gpu, &p, bytes ? bytes : 1, e) != 0)
            return NULL;
        if (sq_gpu_memset0(cx->gpu, p, bytes, e) != 0) {
            sq_gpu_free(cx->gpu, p);
            return NULL;
        }
        return p;
    }
    size_t n = bytes ? bytes : 1;
    if (n > SIZE_MAX - (CTX_ALIGN - 1)) {
        sq_fail(e, SQ_EX_OSERR, "out of memory (%zu bytes)", bytes);
        return NULL;
    }
    n = (n + CTX_ALIGN - 1) / CTX_ALIGN * CTX_ALIGN;
    void *p = aligned_alloc(CTX_ALIGN, n);
    if (!p) {
        sq_fail(e, SQ_EX_OSERR, "out of memory (%zu bytes)", bytes);
        return NULL;
    }
    memset(p, 0, n);
    return p;
}

void sq_ctx_free(const sq_ctx *cx, void *p)
{
    if (!p)
        return;
    if (cx->backend == SQ_BACKEND_CUDA)
        sq_gpu_free(cx->gpu, p);
    else
        free(p);
}

int sq_ctx_upload(const sq_ctx *cx, void *dst, const void *src, size_t bytes, sq_err *e)
{
    if (cx->backend == SQ_BACKEND_CUDA)
        return sq_gpu_upload(cx->gpu, dst, src, bytes, e);
    if (bytes)
        memcpy(dst, src, bytes);
    return 0;
}

int sq_ctx_download(const sq_ctx *cx, void *dst, const void *src, size_t bytes, sq_err *e)
{
    if (cx->backend == SQ_BACKEND_CUDA)
        return sq_gpu_download(cx->gpu, dst, src, bytes, e);
    if (bytes)
        memcpy(dst, src, bytes);
    return 0;
}

int sq_ctx_stage(const sq_ctx *cx, const void *const *host, const size_t *bytes, int n,
                 sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_stage(cx->gpu, host, bytes, n, e) : 0;
}

void sq_ctx_stage_add(const sq_ctx *cx, const void *host, size_t bytes)
{
    if (cx->backend == SQ_BACKEND_CUDA)
        sq_gpu_stage_add(cx->gpu, host, bytes);
}

int sq_ctx_graph_begin(const sq_ctx *cx, uint64_t key, sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_graph_begin(cx->gpu, key, e) : 0;
}

int sq_ctx_graph_end(const sq_ctx *cx, sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_graph_end(cx->gpu, e) : 0;
}

int sq_ctx_graph_values(const sq_ctx *cx, double *out, int n, int *got, sq_err *e)
{
    *got = 0;
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_graph_values(cx->gpu, out, n, got, e) : 0;
}

int sq_ctx_mem_peak(const sq_ctx *cx, size_t *bytes, sq_err *e)
{
    *bytes = 0;
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_mem_peak(cx->gpu, bytes, e) : 0;
}

int sq_ctx_graph_stats(const sq_ctx *cx, int *keys, long *replays, sq_err *e)
{
    *keys = 0;
    *replays = 0;
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_graph_stats(cx->gpu, keys, replays, e) : 0;
}

void sq_ctx_graph_gate(const sq_ctx *cx, double max_loss)
{
    if (cx->backend == SQ_BACKEND_CUDA)
        sq_gpu_graph_gate(cx->gpu, max_loss);
}

double sq_ctx_loss_mix(const sq_ctx *cx, const double *w, const double *v, int n)
{
    double s = 0;
    for (int i = 0; i < n; i++) {
        double t = w[i] * v[i]; /* one rounding each, as the device's */
        s += t;
    }
    if (cx->backend == SQ_BACKEND_CUDA)
        sq_gpu_graph_mix(cx->gpu, w, n);
    return s;
}

int sq_ctx_sync(const sq_ctx *cx, sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_sync(cx->gpu, e) : 0;
}

void sq_ctx_invariant(const sq_ctx *cx, int on)
{
    if (cx->backend == SQ_BACKEND_CUDA)
        sq_gpu_invariant(cx->gpu, on);
}

static int no_nccl(sq_err *e)
{
    return sq_fail(e, SQ_EX_SOFTWARE, "NCCL is the GPU's: the CPU's ranks sum over MPI");
}

int sq_ctx_nccl_id(const sq_ctx *cx, void *id, size_t n, sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_nccl_id(cx->gpu, id, n, e) : no_nccl(e);
}

int sq_ctx_nccl_open(const sq_ctx *cx, const void *id, size_t n, int ranks, int rank,
                     sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_nccl_open(cx->gpu, id, n, ranks, rank, e)
                                          : no_nccl(e);
}

int sq_ctx_nccl_sum(const sq_ctx *cx, void *buf, size_t count, int dtype, sq_err *e)
{
    return cx->backend == SQ_BACKEND_CUDA ? sq_gpu_nccl_sum(cx->gpu, buf, count, dtype, e)
                                          : no_nccl(e);
}

int sq_ctx_threads(const sq_ctx *cx)
{
    return cx && cx->threads > 0 ? cx->threads : omp_get_max_threads();
}

int sq_ctx_team(const sq_ctx *cx)
{
    int n = sq_ctx_threads(cx);
    return n > 1 && omp_get_active_level() < omp_get_max_active_levels() ? n : 1;
}
