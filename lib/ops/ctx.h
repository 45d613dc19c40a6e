/* ctx.h - the context every op takes: which backend runs it and with what.
 *
 * Model code (lib/model/) never touches memory itself: it calls ops, and
 * every op takes a `const sq_ctx *` first. On the CPU the context names the
 * thread count of the op's OpenMP loops; the CUDA backend (cuda/) adds its
 * stream and cuBLAS handle, so that the same model sources, compiled against
 * the CUDA ops, run on a GPU without a second copy of the model.
 *
 * Buffers (parameters, gradients, optimiser moments, workspaces) come from
 * sq_ctx_alloc, so that they live where the backend computes: host memory,
 * 64-byte aligned, on the CPU; device memory on CUDA. Host-side work that is
 * not an op (initialisation from the seeded generator, model-file I/O)
 * runs on host copies; the trainer moves them (sq_ctx_upload/_download).
 *
 * The context owns nothing that outlives the program's main: it is a plain
 * struct that main (or a test) fills and passes down; no globals. */
#ifndef SQ_CTX_H
#define SQ_CTX_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

enum sq_backend { SQ_BACKEND_CPU = 0, SQ_BACKEND_CUDA = 1 };

typedef struct sq_ctx {
    int backend;   /* SQ_BACKEND_* */
    int threads;   /* CPU: threads of the ops' OpenMP loops (0: OpenMP's
                      current default, as sq_threads_set left it) */
    void *gpu;     /* CUDA: the sq_gpu of gpu.h (stream, cuBLAS handle) */
    int rowwise;   /* CPU: linear layers batch-invariant (rowwise.h), so
                      that rows of many histories scored together give
                      each one's bits alone (scoring) */
} sq_ctx;

/* The CPU context with OpenMP's default thread count. */
static inline sq_ctx sq_ctx_cpu(void)
{
    sq_ctx c = {SQ_BACKEND_CPU, 0, NULL, 0};
    return c;
}

/* bytes of backend memory, zeroed (64-byte aligned on the CPU); NULL and
 * SQ_EX_OSERR in e when it cannot be had. bytes == 0 gives a valid
 * minimal block. */
void *sq_ctx_alloc(const sq_ctx *cx, size_t bytes, sq_err *e);
void sq_ctx_free(const sq_ctx *cx, void *p);
/* Host <-> backend copies (plain memcpy on the CPU). */
int sq_ctx_upload(const sq_ctx *cx, void *dst, const void *src, size_t bytes, sq_err *e);
int sq_ctx_download(const sq_ctx *cx, void *dst, const void *src, size_t bytes, sq_err *e);
/* CUDA: the step's integer arrays up in one copy (gpu.h sq_gpu_stage:
 * ops given these host arrays read their device mirror); the queued work
 * waited for and its sticky error reported, once a step. No-ops on the
 * CPU. */
int sq_ctx_stage(const sq_ctx *cx, const void *const *host, const size_t *bytes, int n,
                 sq_err *e);
/* CUDA: one more host integer array for this step's ops, after the
 * batch's sq_ctx_stage (a model's own per-step ids, planned on the host
 * in its forward); a failure is the sticky error sq_ctx_sync reports.
 * A no-op on the CPU. */
void sq_ctx_stage_add(const sq_ctx *cx, const void *host, size_t bytes);
int sq_ctx_sync(const sq_ctx *cx, sq_err *e);
/* CUDA: while on, every GEMM of the context is batch-invariant
 * (cuda/k_gemm.cu: each output the same fp32 sum in k order whatever the
 * shape, instead of cuBLAS's shape-picked kernels): a model's device
 * scoring turns it on around its forward, so that a user's scores do not
 * depend on the batch or shard, as the CPU's rowwise ops give. A no-op on
 * the CPU (there cx.rowwise is the switch). */
void sq_ctx_invariant(const sq_ctx *cx, int on);
/* CUDA: a step's work as a CUDA graph (cuda/graph.cu; HACKING.md "CUDA
 * graphs"): what is queued between begin and end is recorded on a key's
 * first step, captured on its next two and replayed from then on. The key
 * names every shape the step's launches depend on (a packed-size bucket);
 * the ops inside must be graph-safe, and a launch that differs from the
 * key's first step is the error (SQ_EX_SOFTWARE), its step not run. The
 * step's staging (sq_ctx_stage) belongs inside. No-ops on the CPU. */
int sq_ctx_graph_begin(const sq_ctx *cx, uint64_t key, sq_err *e);
int sq_ctx_graph_end(const sq_ctx *cx, sq_err *e);
/* CUDA: the values the oldest graph step not yet read kept on the device
 * (its losses, in the order the ops returned them), waited for (that step
 * alone: two steps may be unread, so the host can queue a step before it
 * reads the one before; a third drops the oldest): *got of them into out (at most n). On
 * the CPU, or with none unread, *got = 0. */
int sq_ctx_graph_values(const sq_ctx *cx, double *out, int n, int *got, sq_err *e);
/* CUDA: the most bytes of device memory the context's allocations held at
 * once so far (cuda/alloc.cu: PyTorch's max_memory_allocated, not the
 * runtime's or cuBLAS's own). The CPU: 0. */
int sq_ctx_mem_peak(const sq_ctx *cx, size_t *bytes, sq_err *e);
/* CUDA: the graphs' keys so far and the steps that ran as replays (the
 * CPU: 0 and 0). */
int sq_ctx_graph_stats(const sq_ctx *cx, int *keys, long *replays, sq_err *e);
/* CUDA, in a graph's step after its loss (its first value): the updates
 * queued after it in the step (Adam) run only when that loss is finite and
 * at most max_loss (0: no bound), decided on the device. A no-op eagerly
 * and on the CPU, where the host tests the loss. */
void sq_ctx_graph_gate(const sq_ctx *cx, double max_loss);
/* A step's loss made of its last n values v (the ops' results, in the
 * order they returned them): sum_i w[i] v[i], i in order, in double. In a
 * CUDA graph's step, where the ops' values are placeholders (kept on the
 * device), the same sum is made there and takes their place: the step's
 * one value, which its gate and sq_ctx_graph_values read. */
double sq_ctx_loss_mix(const sq_ctx *cx, const double *w, const double *v, int n);
/* Data-parallel ranks on a GPU (CUDA: NCCL, cuda/k_nccl.cu; the CPU sums
 * over MPI instead and answers SQ_EX_SOFTWARE): rank 0's new id (n >= 128
 * bytes), joining the communicator of `ranks` with it (every rank at
 * once), and an in-place sum over the ranks of count elements of backend
 * memory of type dtype (gpu_ops.h SQ_NCCL_*), queued on the context's
 * stream. */
int sq_ctx_nccl_id(const sq_ctx *cx, void *id, size_t n, sq_err *e);
int sq_ctx_nccl_open(const sq_ctx *cx, const void *id, size_t n, int ranks, int rank,
                     sq_err *e);
int sq_ctx_nccl_sum(const sq_ctx *cx, void *buf, size_t count, int dtype, sq_err *e);
/* The thread count an OpenMP loop of an op uses: cx->threads, or OpenMP's
 * default when it is 0 (or cx is NULL). */
int sq_ctx_threads(const sq_ctx *cx);
/* The threads a team opened here and now would have: sq_ctx_threads, or
 * 1 inside a parallel region when no further level can be active
 * (OpenMP's default: no nesting), as for the first part of a micro-batch
 * step, which runs on the main context inside the step's team. vec.h's
 * loops run inline, without a team, when this is 1. */
int sq_ctx_team(const sq_ctx *cx);

#endif
