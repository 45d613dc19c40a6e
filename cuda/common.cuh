// common.cuh - what every kernel file of the CUDA backend shares: the
// backend's context, the launch macro, the sticky error, the mirror of the
// step's integer arrays, and the declarations of the ops (from the one
// list in lib/ops/gpu_ops.h).
//
// Kernel files (k_*.cu) define be_NAME for their ops of the list and
// nothing else with external linkage: kernels and helpers are static.
// The same sources build two ways:
//   nvcc (cuda.mk)            the real backend, libseqrec-cuda.so;
//   the host C++ compiler     the simulated device (tests/sim/), against
//     with -DSQ_SIM             the small SIMT runtime there; so every launch
//                               goes through SQ_LAUNCH, never <<<>>> itself.
#ifndef SQ_CUDA_COMMON_CUH
#define SQ_CUDA_COMMON_CUH

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#ifdef SQ_SIM
#include "sim_cuda.h" // tests/sim: cuda_runtime, cuBLAS and the launch, on the CPU
#else
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#endif

#include "gpu_ops.h"

// Pinned staging buffers of the step's integer arrays: two, used in turn,
// so that the host fills one while the copy out of the other is in flight.
#define BE_STAGE_BUFS 2
#define BE_STAGE_MAX 16 // arrays staged at once (a packed batch has <= 8)

struct be_range {
    const char *host; // the host array as the op receives it
    size_t bytes;
    char *dev;        // its copy on the device
};

// SEQREC_GPU_PLAIN's words: the fast paths newest to real GPUs, each
// turned off for a diagnosis (the run then takes the path before it)
#define BE_PLAIN_LT 1          // "lt": a linear layer's bias in cuBLASLt's epilogue (blaslt.cu)
#define BE_PLAIN_BF16_LOGITS 2 // "bf16-logits": the full CE's bf16 logits (k_loss.cu)
#define BE_PLAIN_CACHE 4       // "cache": the cache of freed device blocks (alloc.cu)
#define BE_PLAIN_ALL 7

struct sq_gpu_be {
    int device;
    cudaStream_t stream;  // every kernel, copy and cuBLAS call of the context
    cublasHandle_t blas;
    struct be_lt *lt;     // cuBLASLt: the linear layers' GEMMs with their bias (blaslt.cu)
    void *blas_ws;        // cuBLAS's (and cuBLASLt's) fixed workspace (the same algorithms every run)
    size_t blas_ws_bytes;
    int sms;              // multiprocessors: grid sizes of the reductions
    int prec;             // the GEMMs' SQ_PREC_* (device.h): 1 tf32 by default
    // the sticky error: the first failure of an op, reported by be_sync
    int failed;
    sq_err err;
    // the step's integer arrays (be_stage)
    char *pinned[BE_STAGE_BUFS];
    cudaEvent_t pinned_done[BE_STAGE_BUFS];
    size_t pinned_bytes;
    int pinned_next;
    char *stage_dev;
    size_t stage_dev_bytes;
    struct be_range range[BE_STAGE_MAX];
    int n_range;
    // per-op host arrays (be_op_upload): a pinned buffer and its device copy
    char *op_pinned;
    char *op_dev;
    size_t op_bytes, op_used;
    cudaEvent_t op_done;
    // the buffers be_grow_pair replaced, kept until be_close (see there)
    struct be_retired *retired;
    // small device scratch of the ops that return a value (losses, norms)
    double *red;          // BE_RED_SLOTS doubles
    double *red_host;     // pinned, the same size
    // data-parallel ranks (k_nccl.cu): NCCL, its communicator and stream
    struct be_nccl *nccl;
    // CUDA graphs (graph.cu): the step's mode (BE_G_*), the graphs by key,
    // the one in use and where its signature log is read
    int gmode;
    struct be_graph *graphs;
    int n_graphs, cap_graphs;
    struct be_graph *gcur;
    int gslot;
    size_t gsig_at;
    size_t gused; // bytes of the slot's upload region taken this step
    double *vals; // BE_VALS: the values of a graph's step (be_result)
    int *gate;    // a graph's step: 1 when its update may run (graph_gate)
    // the values of the graph steps not yet read (graph_values), oldest
    // first: two turns of BE_VALS pinned doubles, each copied after its
    // step and waited for alone, so the host may run a step ahead
    double *vals_pin;
    cudaEvent_t vals_ev[2];
    int vals_n[2], vals_head, vals_pending;
    int n_vals;   // kept this step (and left for graph_values after it)
    struct be_prof *prof; // SEQREC_GPU_PROFILE (prof.cu), or NULL
    int invariant;        // be_gemm runs k_gemm.cu's batch-invariant kernel (scoring)
    int plain;            // BE_PLAIN_*: newer fast paths turned off (SEQREC_GPU_PLAIN, gpu.cu)
    int *scat_cnt;        // the scatter-adds' counts a row (k_rows.cu), kept between calls
    size_t scat_cnt_n;
    float *sum_ws;        // BE_SUM_WS floats: the column sums' partials (k_rows.cu)
    unsigned *sum_cnt;    // BE_SUM_CNT counters, zero between launches (be_sum_is_last, be_sum_fin)
    struct be_cache *cache; // freed device blocks kept for reuse (alloc.cu), or NULL
};
// alloc.cu: the context's device allocations (the table's alloc and free),
// through a cache of freed blocks unless SEQREC_GPU_PLAIN has "cache";
// be_cache_kept: the bytes it holds (not "used": be_mem_used leaves them out)
int be_alloc(sq_gpu_be *b, void **ptr, size_t bytes, sq_err *e);
void be_free(sq_gpu_be *b, void *ptr);
int be_cache_open(sq_gpu_be *b);
size_t be_cache_kept(const sq_gpu_be *b);
void be_cache_close(sq_gpu_be *b);
// k_topk.cu: a selection's item filter ok[V1] and rows' excluded lists
// (excl, eoff[B + 1]: topk.h) up through be_op_upload; *dex and *doff
// NULL when nothing is excluded. 0, or -1 (the sticky error says why).
int be_upload_filter(sq_gpu_be *be, const unsigned char *ok, int V1, const int *excl,
                     const int *eoff, int B, const unsigned char **dok, const int **dex,
                     const int **doff);
#define BE_SUM_WS ((size_t)1 << 22)
#define BE_SUM_CNT (BE_SUM_WS / 32) // a counter per 32 partial columns
#define BE_VALS 64
// Ends the NCCL communicator, if any (be_close).
void be_nccl_close(sq_gpu_be *b);
// Whether the context has a live NCCL communicator (a job of ranks).
int be_nccl_active(const sq_gpu_be *b);
// A wait that has made no progress for `waited` seconds: 0 to go on; else
// 1, the communicator aborted and the sticky error set (NCCL's asynchronous
// error, or SEQREC_NCCL_TIMEOUT passed).
int be_nccl_watch(sq_gpu_be *b, double waited, const char *what);
// Waits for the context's stream (ev NULL) or for ev: a plain synchronize,
// or in a job of ranks a poll under be_nccl_watch, so that a dead rank
// cannot hang this one. 1 and the sticky error on failure.
int be_wait(sq_gpu_be *b, cudaEvent_t ev, const char *what);
#define BE_RED_SLOTS 4096

// Softmax attention on the tensor cores (k_attn_tc.cu, tf32): k_attn.cu's
// op over its tiles (32 rows from each segment's start), for a context
// whose GEMMs are not fp32 and not batch-invariant; k_attn.cu dispatches.
void be_attention_tc_forward(sq_gpu_be *be, float *out, float *lse, const float *q,
                             const float *k, const float *v, int ld, const int *off, int B,
                             const int *tiles, int ntiles, int H, int hs, int causal);
void be_attention_tc_backward(sq_gpu_be *be, float *dq, float *dk, float *dv, const float *dout,
                              const float *out, const float *q, const float *k, const float *v,
                              const float *lse, int ld, const int *off, int B, const int *tiles,
                              int ntiles, int H, int hs, int causal, int set);

// bfloat16 in memory (cuBLAS's CUDA_R_16BF): a float's top 16 bits. What
// --precision bf16 keeps of the full cross-entropy's logits (k_loss.cu).
struct be_bf16 {
    unsigned short u;
};
static __device__ __forceinline__ float be_ldf(const float *p) { return *p; }
static __device__ __forceinline__ float be_ldf(const be_bf16 *p)
{
    return __uint_as_float((unsigned)p->u << 16);
}
static __device__ __forceinline__ void be_stf(float *p, float x) { *p = x; }
// the nearest bf16 (ties to even, as cuBLAS rounds its bf16 outputs); NaN
// stays NaN
static __device__ __forceinline__ void be_stf(be_bf16 *p, float x)
{
    unsigned u = __float_as_uint(x);
    p->u = (unsigned short)((u & 0x7fffffffu) > 0x7f800000u
                                ? (u >> 16) | 0x40u
                                : (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A GEMM's element types (be_gemm_typed): fp32, or bf16 in memory.
enum { BE_F32 = 0, BE_BF16 = 1 };
// be_gemm over typed matrices: A and B both fp32 (be_gemm itself) or both
// bf16 (the products exact in fp32, fp32 sums: CUBLAS_COMPUTE_32F), C
// fp32 or bf16 (rounded to nearest). Not batch-invariant: training's.
void be_gemm_typed(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                   int lda, const void *B, int ldb, int ab_type, float beta, void *C, int ldc,
                   int c_type);

// Column sums of a matrix of T rows of C values, ld apart (float, or
// bf16): dst[c] += sum over rows r of x[r ld + c] (k_rows.cu's two
// passes, a fixed order).
void be_colsum_ld(sq_gpu_be *be, float *dst, const float *x, int T, int C, size_t ld);
void be_colsum_ld(sq_gpu_be *be, float *dst, const be_bf16 *x, int T, int C, size_t ld);

// cuBLASLt (blaslt.cu): its handle and descriptors, made by be_open after
// cuBLAS's (0, or the failure) and freed by be_close.
int be_lt_open(sq_gpu_be *b, sq_err *e);
void be_lt_close(sq_gpu_be *b);
// C[M, N] = A[M, K] W[N, K]^T + bias[N], row-major, the bias added in the
// GEMM's epilogue: 0 when queued; 1 when not done (no cuBLASLt algorithm
// for the shape, scoring's batch-invariant mode), the caller's to do.
int be_gemm_bias(sq_gpu_be *b, int M, int N, int K, const float *A, const float *W,
                 const float *bias, float *C);

// The batch-invariant GEMM (k_gemm.cu): be_gemm's contract, fp32, each
// output's sum in k order whatever the shape; be_gemm's path while the
// context's `invariant` mode is on.
void be_gemm_invariant(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha,
                       const float *A, int lda, const float *B, int ldb, float beta, float *C,
                       int ldc);

// ---- SEQREC_GPU_PROFILE (prof.cu) ----
// The profile, when the variable names a file: 0, or the failure (the file
// cannot be created: SQ_EX_CANTCREAT).
int be_prof_open(sq_gpu_be *b, sq_err *e);
// Times the ops harvested so far into the file and frees the profile.
void be_prof_close(sq_gpu_be *b);
// Around a call of the table's op `name` (the profiling table's entries):
// begin returns the handle end takes (-1: not timed).
int be_prof_begin(sq_gpu_be *b, const char *name);
void be_prof_end(sq_gpu_be *b, int handle);
// A finer label for the op being timed when it is `op` (a GEMM's shape),
// printf-style; nothing when another op (one that calls it) is timed.
__attribute__((format(printf, 3, 4))) void be_prof_label(sq_gpu_be *b, const char *op,
                                                         const char *fmt, ...);

// Records a failure unless one is already kept; code is SQ_EX_OSERR for
// device memory, else SQ_EX_SOFTWARE. Returns 1 when st is a failure.
int be_note(sq_gpu_be *b, cudaError_t st, const char *what);
int be_note_blas(sq_gpu_be *b, cublasStatus_t st, const char *what);

// The device address of an integer array an op was given: inside a staged
// host array, its mirror; otherwise p itself (already on the device).
const int *be_ints(const sq_gpu_be *b, const int *p);

// The host array behind an integer array an op was given, when it is a
// staged one (p itself), else NULL: what an op that works on the host
// first (bucketing rows for a deterministic scatter) can read.
const int *be_host_ints(const sq_gpu_be *b, const int *p);

// A device copy of host[bytes] made by an op (bucketed rows, offsets),
// valid for the work queued after it in this step; NULL (and the sticky
// error) when it cannot be had. The space is reused from the next
// be_stage on: one step's op uploads at most grow it.
void *be_op_upload(sq_gpu_be *b, const void *host, size_t bytes);
// be_op_upload in two halves, for an op that builds its array in place
// (no buffer of its own, no copy): be_op_space gives the host bytes to fill
// (pinned) and sets *dev to their device copy's address; be_op_send queues
// the copy. NULL (and the sticky error) when the space cannot be had.
// Space taken and not sent is only spent until the next be_stage.
char *be_op_space(sq_gpu_be *b, size_t bytes, char **dev);
int be_op_send(sq_gpu_be *b, const char *host, char *dev, size_t bytes);

// k_rows.cu: out[host[i]] += in[i] for i < n, rows a host array of the
// op's own (not staged: no device copy), each target's sources added in
// increasing i (the host's buckets, uploaded through be_op_space): the
// deterministic scatter of an op whose rows it builds itself (k_bkl.cu).
void be_scatter_add_host(sq_gpu_be *be, float *out, const float *in, const int *host, int n,
                         int C, const char *what);

// The tiles of a packed batch for kernels that take `rows` rows of one
// segment a block (k_attn.cu, k_silu.cu): the first row of every `rows`
// rows of each segment, counted from its start (so a row's tile does not
// follow where its segment sits), then -1 up to (T + (rows - 1) B) / rows
// entries, the most the shapes allow (the grid: graph-safe). h: the host
// offsets (be_host_ints), T = h[B] > 0. The device copy (be_op_upload),
// its length in *n; NULL and the sticky error when it cannot be had.
const int *be_seg_tiles(sq_gpu_be *b, const int *h, int B, int rows, int *n, const char *what);

// The rows off[B] of a staged offsets array: -1 (and the sticky error
// `what`) when off is not a staged host array or B < 0.
int be_staged_rows(sq_gpu_be *b, const int *off, int B, const char *what);

// be->red[slot] (BE_RED_SLOTS doubles of device scratch) to the host: the
// one wait of an op that returns a value; NAN when the copy fails.
double be_download_red(sq_gpu_be *b, int slot);

// Dynamic shared memory, 16-byte aligned, as `type *name`.
#ifdef SQ_SIM
#define BE_DYN_SHARED(type, name) type *name = (type *)sim_dyn_shared()
#else
#define BE_DYN_SHARED(type, name)                            \
    extern __shared__ __align__(16) unsigned char be_dyn_[]; \
    type *name = (type *)be_dyn_
#endif

// Blocks of `threads` threads covering n items (at least one block).
static inline unsigned be_blocks(size_t n, unsigned threads)
{
    size_t g = (n + threads - 1) / threads;
    return g ? (unsigned)(g < 0x7fffffffu ? g : 0x7fffffffu) : 1u;
}

// Element-wise kernels (k_elem.cu, k_hstu.cu): a grid-stride loop over n
// elements, and the blocks of `threads` threads it runs on: enough to fill
// the device, at most 16 a multiprocessor.
#define BE_EW_LOOP(i, n)                                                    \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); \
         i += (size_t)gridDim.x * blockDim.x)
static inline unsigned be_ew_blocks(const sq_gpu_be *be, size_t n, unsigned threads)
{
    size_t cap = (size_t)be->sms * 16, g = (n + threads - 1) / threads;
    return (unsigned)(g < 1 ? 1 : g > cap ? cap : g);
}

// ---- CUDA graphs (graph.cu) ----
// A step's work is captured once per shape key and replayed (HACKING.md,
// "CUDA graphs"). The modes of a step:
//   BE_G_EAGER    no graph: queued and run as always;
//   BE_G_RECORD   run eagerly, and every launch, GEMM and copy written to the
//                 key's signature log (its kernel, shape and arguments);
//   BE_G_CAPTURE  queued into a stream capture (nothing runs), each node
//                 compared with the log;
//   BE_G_PLAN     a replay's host pass: nothing is queued, the host work
//                 (planning, uploads into the slot's pinned region) is done
//                 and each node compared with the log, then the graph runs.
// A node that differs from the log (an argument that depends on the batch,
// not on the key's shapes) is the sticky error: the op is not graph-safe.
enum { BE_G_EAGER = 0, BE_G_RECORD, BE_G_CAPTURE, BE_G_PLAN };
#define BE_SIG_MAX 512 // bytes of one node's signature

// One node's signature against the log (RECORD appends, CAPTURE and PLAN
// compare); 1 when the node must not be queued (PLAN), else 0.
int be_sig_node(sq_gpu_be *b, const char *name, const unsigned char *sig, size_t n);
// p as a signature records it: an address inside the slot's upload region
// as its offset there (each slot has its own region), else itself.
uintptr_t be_sig_ptr(const sq_gpu_be *b, const void *p);

// A kernel argument into the signature: by value, as the kernel receives
// it; pointers through be_sig_ptr. Its bytes are compared, so a struct
// argument must have no padding (padding could differ alone).
template <class P> static inline void be_sig_arg(const sq_gpu_be *b, unsigned char *buf,
                                                 size_t *at, P v)
{
    if constexpr (std::is_pointer<P>::value) {
        uintptr_t u = be_sig_ptr(b, (const void *)v);
        memcpy(buf + *at, &u, sizeof u);
        *at += sizeof u;
    } else {
        static_assert(std::is_trivially_copyable<P>::value, "a kernel argument is copied");
        memcpy(buf + *at, &v, sizeof v);
        *at += sizeof v;
    }
}

// Every launch: its signature in a graph's step, then queued on the
// context's stream (not in a replay's host pass), its launch error kept.
template <class... P, class... A>
static inline void be_launch(sq_gpu_be *b, const char *name, void (*kern)(P...), dim3 grid,
                             dim3 block, size_t shmem, A... args)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    if (b->gmode != BE_G_EAGER) {
        static_assert(6 * sizeof(unsigned) + sizeof(size_t) +
                              (0 + ... + (sizeof(uintptr_t) + sizeof(P))) <= BE_SIG_MAX,
                      "a kernel's signature is over BE_SIG_MAX");
        unsigned char buf[BE_SIG_MAX];
        unsigned dims[6] = {grid.x, grid.y, grid.z, block.x, block.y, block.z};
        size_t at = 0;
        memcpy(buf, dims, sizeof dims);
        memcpy(buf + sizeof dims, &shmem, sizeof shmem);
        at = sizeof dims + sizeof shmem;
        (be_sig_arg<P>(b, buf, &at, static_cast<P>(args)), ...);
        if (be_sig_node(b, name, buf, at))
            return;
    }
#ifdef SQ_SIM
    be_note(b, sim_launch(name, kern, grid, block, shmem, b->stream, args...), name);
#else
    kern<<<grid, block, shmem, b->stream>>>(static_cast<P>(args)...);
    be_note(b, cudaGetLastError(), name);
#endif
}
#define SQ_LAUNCH(b, kern, grid, block, shmem, ...) \
    be_launch((b), #kern, kern, dim3(grid), dim3(block), (shmem), __VA_ARGS__)

// cudaMemsetAsync / cudaMemcpyAsync of an op on the context's stream, as
// be_launch does a kernel (signature; not queued in a replay's host pass).
void be_memset_async(sq_gpu_be *b, void *p, int v, size_t bytes, const char *what);
void be_memcpy_async(sq_gpu_be *b, void *dst, const void *src, size_t bytes,
                     cudaMemcpyKind kind, const char *what);
// An op's value: red[slot] / div. Eagerly, downloaded (the op's one wait);
// in a graph's step, kept on the device as the step's next value (div
// read there too, as it follows the batch) and 0 returned, a placeholder
// that keeps the model's step on its finite path (its backward runs; the
// trainer reads the step's values after it, graph_values, and decides).
double be_result(sq_gpu_be *b, int slot, double div);
// 1, and the sticky error, when a graph's step would read a value back to
// the host (`what`): its value would be the capture's or a stale one.
int be_graph_no_read(sq_gpu_be *b, const char *what);
// Grows a pinned buffer and its device twin to cap bytes (waiting for the
// stream), keeping their first `keep` bytes and moving the staged ranges
// inside them: what a step uploaded before is still read by its later ops.
// The old pair is retired, not freed, until be_close: an address an op
// took before the growth (an earlier upload's, a staged array's through
// be_ints) still holds what was uploaded there, for the launches it is
// queued with. A buffer grows to at least twice its size, so what is
// retired is less than what it grew to.
int be_grow_pair(sq_gpu_be *b, char **pinned, char **dev, size_t *bytes, size_t keep,
                 size_t cap);
// The graphs' memory (be_close).
void be_graph_close(sq_gpu_be *b);
// In a graph's step (CAPTURE, PLAN): `bytes` of the slot's upload region,
// host (pinned) and device halves; 0 and the sticky error when the step
// asks for more than its first did. RECORD grows the region as needed.
int be_graph_take(sq_gpu_be *b, size_t bytes, char **host, char **dev);

// The ops of the list, defined across the k_*.cu files and gpu.cu.
#define SQ_BE_DECL_X(ret, name, params, args) ret be_##name(sq_gpu_be *be, SQ_GPU_STRIP params);
SQ_GPU_OP_LIST(SQ_BE_DECL_X)
#undef SQ_BE_DECL_X

// The segment b of packed row t: off[b] <= t < off[b + 1], off[0..B]
// ascending (binary search): what every kernel over packed segments asks.
static __device__ __forceinline__ int be_seg_of(const int *off, int B, int t)
{
    int lo = 0, hi = B; // off[lo] <= t < off[hi]
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (off[mid] <= t)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

// A block's tile of be_seg_tiles' list (blockIdx.x): its first row r0 and
// its segment [s0, s1); 0 for a dummy entry past the batch's tiles.
static __device__ __forceinline__ int be_tile_of(const int *tiles, const int *off, int B, int *r0,
                                                 int *s0, int *s1)
{
    *r0 = tiles[blockIdx.x];
    if (*r0 < 0)
        return 0;
    int b = be_seg_of(off, B, *r0);
    *s0 = off[b];
    *s1 = off[b + 1];
    return 1;
}

// Warp-level sum (all lanes get it), in a fixed order: deterministic.
static __device__ inline float be_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
static __device__ inline float be_warp_max(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// real.h's sq_dot: 8 partial sums over blocks of 8, a tail, added in a
// fixed tree: the CPU's order, so (with --fmad=false) the CPU's bits
static __device__ inline float be_dot8(const float *a, const float *b, int n)
{
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            acc[l] += a[i + l] * b[i + l];
    float tail = 0;
    for (; i < n; i++)
        tail += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) +
           tail;
}

// real.h's sq_sigmoid: evaluated on the side where exp cannot overflow
// (CUDA's expf)
static __device__ __forceinline__ float be_sigmoid(float x)
{
    if (x >= 0)
        return 1.0f / (1.0f + expf(-x));
    float e = expf(x);
    return e / (1.0f + e);
}

// real.h's sq_softmax_row over a[0, n) in place (n >= 1): the max, exp(a -
// max) and their sum in order, then a multiply by 1 / sum; CUDA's expf
static __device__ inline void be_softmax_row(float *a, int n)
{
    float mx = a[0];
    for (int j = 1; j < n; j++)
        if (a[j] > mx)
            mx = a[j];
    float sum = 0;
    for (int j = 0; j < n; j++) {
        a[j] = expf(a[j] - mx);
        sum += a[j];
    }
    float inv = 1.0f / sum;
    for (int j = 0; j < n; j++)
        a[j] *= inv;
}

// Block sum of one double per thread (blockDim.x a power of two, sh one
// double a thread), in a fixed tree; every thread gets it, and sh is free
// again on return.
static __device__ inline double be_block_sum_d(double s, double *sh)
{
    sh[threadIdx.x] = s;
    __syncthreads();
    for (unsigned h = blockDim.x / 2; h > 0; h >>= 1) {
        if (threadIdx.x < h)
            sh[threadIdx.x] += sh[threadIdx.x + h];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

// ---- column sums in two passes (k_rows.cu, k_dwconv.cu) ----
// A sum over T rows of C columns fills the device when pass 1 gives each
// block (32 columns, a group of R rows) and its BE_SUM_LANES row lanes,
// each summing rows r0 + l, r0 + l + BE_SUM_LANES, ... in order, a partial
// in the context's workspace (sum_ws), and pass 2 sums a column's groups
// the same way, in the last block of pass 1's launch (be_sum_is_last, be_sum_fin). be_sum_groups picks R from T, the partial rows per group
// (`per`: taps, ...) and C alone: at least BE_SUM_ROWS rows a group, and G
// x per x C partials within BE_SUM_WS and G within the grid's 65535.
#define BE_SUM_LANES 8
// dst[c] += the column sums of x [T, C] (k_rows.cu: the two passes)
void be_colsum(sq_gpu_be *be, float *dst, const float *x, int T, int C);
#define BE_SUM_ROWS 128

static inline int be_sum_groups(int T, int per, int C, int *R)
{
    size_t cap = BE_SUM_WS / ((size_t)per * (size_t)C);
    size_t G = ((size_t)T + BE_SUM_ROWS - 1) / BE_SUM_ROWS;
    G = G < cap ? G : cap;
    G = G < 65535 ? G : 65535;
    G = G < 1 ? 1 : G;
    *R = (int)(((size_t)T + G - 1) / G);
    return (int)(((size_t)T + *R - 1) / *R);
}

// The BE_SUM_LANES lanes' values of each column of a (32, BE_SUM_LANES)
// block added in lane order: every thread calls it (a barrier inside); the
// result is every thread's (lane 0 writes it).
static __device__ __forceinline__ float be_lanes_sum(float (*sh)[32], float acc)
{
    sh[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    float s = 0;
    for (int k = 0; k < BE_SUM_LANES; k++)
        s += sh[k][threadIdx.x];
    return s;
}

// Pass 2 in pass 1's launch: each block of a column block `key` calls
// be_sum_is_last once its partials are in the workspace; the block that
// arrives last, as counted by cnt[key], gets 1 (every thread of it) and
// adds the groups' partials of its columns with be_sum_fin, in pass 2's
// fixed lane order. Whichever block is last, the order is the groups':
// the same bits every run, and no second launch. The counter goes back to
// 0 for the next launch. Every thread of the block calls both (barriers
// inside); *last is the block's shared flag.
static __device__ __forceinline__ int be_sum_is_last(int *last, unsigned *cnt, unsigned key,
                                                     int G)
{
    __threadfence(); // this thread's partials, seen by the last block
    __syncthreads();
    if (threadIdx.x == 0 && threadIdx.y == 0) {
        *last = atomicAdd(&cnt[key], 1u) == (unsigned)G - 1;
        if (*last)
            cnt[key] = 0; // every block of the key has arrived
    }
    __syncthreads();
    if (*last)
        __threadfence();
    return *last;
}

// The sum of column c's G group partials (group g at part[g C + c]) in
// lane order; lane row 0's is the column's (the others partial)
static __device__ __forceinline__ float be_sum_fin(float (*sh)[32], const float *part, int C,
                                                   int G, int c)
{
    float acc = 0;
    if (c < C)
        for (int g = threadIdx.y; g < G; g += BE_SUM_LANES)
            acc += __ldcg(part + (size_t)g * C + c);
    __syncthreads(); // sh's last readers are done
    return be_lanes_sum(sh, acc);
}

#endif
