// sim_cuda.h - the simulated CUDA device (tests only): the subset of
// cuda_runtime.h, cublas_v2.h and the device language that cuda/*.cu use,
// run on the CPU. Compiled by the host C++ compiler with -DSQ_SIM
// (common.cuh includes this). A launch runs its blocks one at a time (in
// the order SEQREC_SIM_ORDER says: forward, reverse or shuffled); a
// block's threads are fibers (ucontext), switched only at __syncthreads
// and at the warp intrinsics, which are real barriers: a barrier that not
// every thread reaches aborts ("divergent ..."). Device memory is a
// separate arena: every pointer argument of a launch must lie in it (or be
// NULL), and under ASan the arena is poisoned outside kernels and copies.
// See HACKING.md, "The simulated device".
#ifndef SQ_SIM_CUDA_H
#define SQ_SIM_CUDA_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <type_traits>

// maybe unused, as nvcc treats a header's kernels (a file that includes
// loss.cuh need not launch all of them); nvcc's build still names an
// unused kernel of a .cu file
#define __global__ __attribute__((unused))
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ // (the host may inline; libstdc++ spells its own attribute __noinline__)
#define __launch_bounds__(...)
// A block's static shared memory: each file's statics in a section of its
// own, sim_shared_FILE (SQ_SIM_TU, the file's name, from the build), which
// the runtime fills with garbage (0xcd) before every block of a kernel of
// that file, as a GPU's is uninitialised: a kernel that reads it before
// writing differs from its CPU twin here. (One section for every file cost
// a 381 KiB fill a block.) Under ASan plain statics instead: ASan guards a
// global with red zones only outside a named section (an index past a
// shared array fails there), and the fill is left to the plain build.
#if defined(__SANITIZE_ADDRESS__)
#define SIM_SHARED_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_SHARED_ASAN 1
#endif
#endif
#ifndef SQ_SIM_TU
#define SQ_SIM_TU misc
#endif
#define SIM_STR2(x) #x
#define SIM_STR(x) SIM_STR2(x)
#define SIM_CAT2(a, b) a##b
#define SIM_CAT(a, b) SIM_CAT2(a, b)
#ifdef SIM_SHARED_ASAN
#define __shared__ static
#define SIM_SHARED_LO ((char *)nullptr)
#define SIM_SHARED_HI ((char *)nullptr)
#else
#define __shared__ static __attribute__((section("sim_shared_" SIM_STR(SQ_SIM_TU))))
// the linker's bounds of this file's section, weak: a file with no static
// shared memory has none
extern "C" char SIM_CAT(__start_sim_shared_, SQ_SIM_TU)[] __attribute__((weak, visibility("hidden")));
extern "C" char SIM_CAT(__stop_sim_shared_, SQ_SIM_TU)[] __attribute__((weak, visibility("hidden")));
#define SIM_SHARED_LO SIM_CAT(__start_sim_shared_, SQ_SIM_TU)
#define SIM_SHARED_HI SIM_CAT(__stop_sim_shared_, SQ_SIM_TU)
#endif
#define __align__(n) __attribute__((aligned(n)))
#ifndef __restrict__
#define __restrict__ __restrict
#endif

// CUDA's vector type (vector_types.h): 16-byte aligned, one 128-bit load
struct __attribute__((aligned(16))) float4 {
    float x, y, z, w;
};

struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

struct sim_thread {
    dim3 tid, bid, bdim, gdim;
};
const sim_thread *sim_cur(void);
#define threadIdx (sim_cur()->tid)
#define blockIdx (sim_cur()->bid)
#define blockDim (sim_cur()->bdim)
#define gridDim (sim_cur()->gdim)
static constexpr int warpSize = 32;

void __syncthreads(void);
void __syncwarp(unsigned mask = 0xffffffffu);
uint64_t sim_shfl_raw(unsigned mask, uint64_t v, int mode, int arg, int width);
unsigned __ballot_sync(unsigned mask, int pred);
static inline int __any_sync(unsigned mask, int pred) { return __ballot_sync(mask, pred) != 0; }
static inline int __all_sync(unsigned mask, int pred)
{
    extern unsigned sim_active_lanes(void);
    return __ballot_sync(mask, pred) == sim_active_lanes();
}

template <class T> static inline T sim_shfl(unsigned mask, T v, int mode, int arg, int width)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a scalar");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    u = sim_shfl_raw(mask, u, mode, arg, width);
    T r;
    std::memcpy(&r, &u, sizeof r);
    return r;
}
template <class T> static inline T __shfl_xor_sync(unsigned m, T v, int lane, int w = 32) { return sim_shfl(m, v, 0, lane, w); }
template <class T> static inline T __shfl_down_sync(unsigned m, T v, unsigned d, int w = 32) { return sim_shfl(m, v, 1, (int)d, w); }
template <class T> static inline T __shfl_up_sync(unsigned m, T v, unsigned d, int w = 32) { return sim_shfl(m, v, 2, (int)d, w); }
template <class T> static inline T __shfl_sync(unsigned m, T v, int src, int w = 32) { return sim_shfl(m, v, 3, src, w); }

// device math: <cmath>, plus the fast intrinsics (exact here)
using std::isfinite;
using std::isinf;
using std::isnan;
static inline float sim_expf(float x) { return expf(x); }
static inline float sim_logf(float x) { return logf(x); }
#define __expf sim_expf // glibc declares its own __expf, __logf
#define __logf sim_logf
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __frcp_rn(float a) { return 1.0f / a; }
static inline float __saturatef(float a) { return a < 0.0f ? 0.0f : a > 1.0f ? 1.0f : a; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline unsigned __float_as_uint(float x) { unsigned u; std::memcpy(&u, &x, 4); return u; }
static inline float __uint_as_float(unsigned u) { float x; std::memcpy(&x, &u, 4); return x; }
// integer atomics only: float atomics are banned (determinism)
int atomicAdd(int *p, int v);
unsigned atomicAdd(unsigned *p, unsigned v);
// a launch's blocks run one after another here: every write is already
// visible, and a load through L2 is a load
static inline void __threadfence(void) {}
template <class T> static inline T __ldcg(const T *p) { return *p; }

// ---- runtime ----
enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorCapturedEvent = 907,
    cudaErrorUnknown = 999,
};
enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4,
};
struct sim_stream;
struct sim_event;
typedef sim_stream *cudaStream_t;
typedef sim_event *cudaEvent_t;
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int major, minor, multiProcessorCount, warpSize, maxThreadsPerBlock;
};
#define cudaStreamDefault 0u
#define cudaStreamNonBlocking 1u
#define cudaEventDefault 0u
#define cudaEventDisableTiming 2u
#define cudaHostAllocDefault 0u
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };

const char *cudaGetErrorString(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaMalloc(void **p, size_t n);
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t n) { return cudaMalloc((void **)p, n); }
cudaError_t cudaFree(void *p);
// the arena: total its size, avail what the live allocations (red zones and
// rounding included) leave
cudaError_t cudaMemGetInfo(size_t *avail, size_t *total);
cudaError_t cudaHostAlloc(void **p, size_t n, unsigned flags);
cudaError_t cudaMallocHost(void **p, size_t n);
cudaError_t cudaFreeHost(void *p);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s = 0);
cudaError_t cudaMemset(void *p, int v, size_t n);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s = 0);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
// A stream that never finishes, as one whose all-reduce waits for a rank
// that died (k_nccl.cu's SEQREC_SIM_NCCL_HANG): its queries answer
// cudaErrorNotReady, an event recorded on it and a stream waiting for that
// event are stuck too, and a synchronizing call on any of them ends the
// process (it would hang on a GPU). sim_unstick_all, as ncclCommAbort
// does, lets them all finish.
void sim_stream_stick(cudaStream_t s);
void sim_unstick_all(void);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaDeviceSynchronize(void);

// Stream capture and graphs. One capturing stream at a time (the backend
// has one stream). While a stream captures, the work queued on it (kernels,
// cudaMemcpyAsync/cudaMemsetAsync, cuBLAS on a handle bound to it) is
// recorded, not run; cudaGraphLaunch replays the nodes in capture order on
// the memory as it is then. Calls the real runtime refuses during capture
// (synchronizing, allocating, synchronous copies, pageable async copies)
// return cudaErrorStreamCaptureUnsupported and invalidate the capture.
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2,
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2,
};
struct sim_graph;
struct sim_graph_exec;
struct sim_graph_node;
typedef sim_graph *cudaGraph_t;
typedef sim_graph_exec *cudaGraphExec_t;
typedef sim_graph_node *cudaGraphNode_t;
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
// nodes NULL: *n = the count; else up to *n nodes, and *n = how many
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
template <class F> static inline cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) { return cudaSuccess; }

// ---- cuBLAS (column-major, as cuBLAS) ----
struct sim_blas;
typedef sim_blas *cublasHandle_t;
enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};
enum cublasOperation_t { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 };
enum cublasMath_t {
    CUBLAS_DEFAULT_MATH = 0,
    CUBLAS_PEDANTIC_MATH = 2,
    CUBLAS_TF32_TENSOR_OP_MATH = 3,
};
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc);
// cublasGemmEx on float matrices: FAST_16BF rounds A and B to bf16 (to
// nearest, ties to even) before an fp32 GEMM, what the tensor cores
// multiply (their sums' order is theirs); or on bf16 A and B (their
// values exact in float) with CUBLAS_COMPUTE_32F, C float or bf16 (the
// fp32 result rounded to nearest, ties to even). CUDA's values.
enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_16BF = 14 };
enum cublasComputeType_t {
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};
enum cublasGemmAlgo_t { CUBLAS_GEMM_DEFAULT = -1 };
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);

// ---- cuBLASLt: a GEMM with its epilogue (the bias of a linear layer) ----
// Float matrices (CUDA_R_32F) and the default or bias epilogue only; the
// compute type rounds A and B as cuBLAS's math modes do (32F and
// 32F_PEDANTIC: not at all; FAST_TF32, FAST_16BF). D = alpha op(A) op(B) +
// beta C (+ bias[row] on every column), C and D one matrix. The
// heuristic offers one algorithm, or none while SEQREC_SIM_LT_NONE is set
// (a GPU whose cuBLASLt has none for the shape: the callers' fallback).
// The algorithm needs A, B, C and D as aligned as the preference said
// (its minimum alignments, 256 bytes unless set): cublasLtMatmul refuses
// less aligned ones (CUBLAS_STATUS_NOT_SUPPORTED), as a GPU's may.
struct sim_lt;
struct sim_lt_desc;
struct sim_lt_layout;
struct sim_lt_pref;
typedef sim_lt *cublasLtHandle_t;
typedef sim_lt_desc *cublasLtMatmulDesc_t;
typedef sim_lt_layout *cublasLtMatrixLayout_t;
typedef sim_lt_pref *cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;
enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
};
enum cublasLtEpilogue_t { CUBLASLT_EPILOGUE_DEFAULT = 1, CUBLASLT_EPILOGUE_BIAS = 4 };
enum cublasLtMatmulPreferenceAttributes_t {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5, // uint32_t, default 256, as the B, C, D ones
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};
cublasStatus_t cublasLtCreate(cublasLtHandle_t *h);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                        cudaDataType_t scale);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t bytes);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t *results,
                                              int *returned);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Al, const void *B,
                              cublasLtMatrixLayout_t Bl, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cl, void *D, cublasLtMatrixLayout_t Dl,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t s);

// ---- the launch ----
#include "sim_wmma.h"

int sim_is_device(const void *p); // inside the arena
void *sim_dyn_shared(void);
// The order of blocks and threads from now on: "forward", "reverse" or
// "shuffle[:SEED]" (NULL: forward); SEQREC_SIM_ORDER sets it at the first
// launch (sim.cpp, "order")
void sim_order(const char *spec);
void sim_check_arg(const char *kern, int index, const void *p); // aborts on a host pointer
cudaError_t sim_run(const char *kern, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                    char *sh_lo, char *sh_hi, const std::function<void()> &body);

template <class T> static inline void sim_arg(const char *kern, int i, const T &a)
{
    if constexpr (std::is_pointer<T>::value)
        sim_check_arg(kern, i, (const void *)a);
    (void)kern;
    (void)i;
    (void)a;
}
template <class... P, class... A>
static inline cudaError_t sim_launch(const char *name, void (*kern)(P...), dim3 grid, dim3 block,
                                     size_t shmem, cudaStream_t s, A... args)
{
    static_assert(sizeof...(P) == sizeof...(A), "kernel argument count");
    int i = 1;
    (sim_arg(name, i++, args), ...);
    // by value: a launch recorded in a graph outlives this call
    return sim_run(name, grid, block, shmem, s, SIM_SHARED_LO, SIM_SHARED_HI,
                   [=]() { kern(static_cast<P>(args)...); });
}

#endif
