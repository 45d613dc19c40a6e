// gpu.cu - device context, checked allocations and the cuBLAS GEMM wrapper.
// Every CUDA and cuBLAS call is checked; errors come back through sq_err.
//
// Built into libseqrec-cuda.so, which the programs dlopen on demand
// (lib/ops/gpu_load.c). Only sq_cuda_backend is exported: every function
// here is static, and sq_fail is the object's own hidden copy of
// lib/util/err.c (cuda.mk), so no call binds to a symbol of the program.
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu_ops.h"

struct sq_gpu_be {
    int device;
    cublasHandle_t blas;
};

#define CUDA_TRY(call, e)                                                              \
    do {                                                                               \
        cudaError_t st_ = (call);                                                      \
        if (st_ != cudaSuccess)                                                        \
            return sq_fail((e), SQ_EX_SOFTWARE, "CUDA: %s: %s", #call,                \
                           cudaGetErrorString(st_));                                   \
    } while (0)

static int be_probe(char *name, size_t n)
{
    int count = 0;
    cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess || count == 0) {
        if (n)
            snprintf(name, n, "no CUDA device (%s)",
                     st != cudaSuccess ? cudaGetErrorString(st) : "none found");
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        if (n)
            snprintf(name, n, "cudaGetDeviceProperties failed");
        return 0;
    }
    if (n)
        snprintf(name, n, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                 p.totalGlobalMem / 1073741824.0);
    return 1;
}

static int be_open(sq_gpu_be **b, int device, sq_err *e)
{
    *b = NULL;
    CUDA_TRY(cudaSetDevice(device), e);
    sq_gpu_be *ctx = (sq_gpu_be *)calloc(1, sizeof *ctx);
    if (!ctx)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    ctx->device = device;
    if (cublasCreate(&ctx->blas) != CUBLAS_STATUS_SUCCESS) {
        free(ctx);
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLAS: cublasCreate failed");
    }
    *b = ctx;
    return 0;
}

static void be_close(sq_gpu_be *b)
{
    if (!b)
        return;
    cublasDestroy(b->blas);
    free(b);
}

static int be_alloc(sq_gpu_be *b, void **ptr, size_t bytes, sq_err *e)
{
    (void)b;
    *ptr = NULL;
    cudaError_t st = cudaMalloc(ptr, bytes);
    if (st != cudaSuccess)
        return sq_fail(e, SQ_EX_OSERR, "CUDA: cannot allocate %zu bytes: %s", bytes,
                       cudaGetErrorString(st));
    return 0;
}

static void be_free(sq_gpu_be *b, void *ptr)
{
    (void)b;
    if (ptr)
        cudaFree(ptr);
}

static int be_memset0(sq_gpu_be *b, void *p, size_t bytes, sq_err *e)
{
    (void)b;
    if (bytes)
        CUDA_TRY(cudaMemset(p, 0, bytes), e);
    return 0;
}

static int be_upload(sq_gpu_be *b, void *dst, const void *src, size_t bytes, sq_err *e)
{
    (void)b;
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), e);
    return 0;
}

static int be_download(sq_gpu_be *b, void *dst, const void *src, size_t bytes, sq_err *e)
{
    (void)b;
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), e);
    return 0;
}

// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so swap the operands and M/N.
static int be_sgemm(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha,
                    const float *A, int lda, const float *B, int ldb, float beta, float *C,
                    int ldc, sq_err *e)
{
    cublasStatus_t st = cublasSgemm(b->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb,
                                    A, lda, &beta, C, ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLAS: sgemm %dx%dx%d failed (status %d)", M, N,
                       K, (int)st);
    CUDA_TRY(cudaGetLastError(), e);
    return 0;
}

static const sq_gpu_ops be_ops = {
    SQ_GPU_OPS_ABI, sizeof(sq_err), be_probe, be_open, be_close, be_alloc, be_free,
    be_memset0, be_upload, be_download, be_sgemm,
};

// The object's one export (SQ_GPU_OPS_SYMBOL); it is built with
// -fvisibility=hidden, so this is the only default-visibility symbol.
extern "C" __attribute__((visibility("default"))) const sq_gpu_ops *sq_cuda_backend(void)
{
    return &be_ops;
}
