// gpu.cu - device context, checked allocations and the cuBLAS GEMM wrapper.
// Every CUDA and cuBLAS call is checked; errors come back through sq_err.
#include <cstdio>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "gpu.h"

struct sq_gpu {
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

extern "C" int sq_gpu_probe(char *name, size_t n)
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

extern "C" int sq_gpu_open(sq_gpu **g, int device, sq_err *e)
{
    *g = NULL;
    CUDA_TRY(cudaSetDevice(device), e);
    sq_gpu *ctx = (sq_gpu *)calloc(1, sizeof *ctx);
    if (!ctx)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    ctx->device = device;
    if (cublasCreate(&ctx->blas) != CUBLAS_STATUS_SUCCESS) {
        free(ctx);
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLAS: cublasCreate failed");
    }
    *g = ctx;
    return 0;
}

extern "C" void sq_gpu_close(sq_gpu *g)
{
    if (!g)
        return;
    cublasDestroy(g->blas);
    free(g);
}

extern "C" int sq_gpu_alloc(sq_gpu *g, void **ptr, size_t bytes, sq_err *e)
{
    (void)g;
    *ptr = NULL;
    cudaError_t st = cudaMalloc(ptr, bytes);
    if (st != cudaSuccess)
        return sq_fail(e, SQ_EX_OSERR, "CUDA: cannot allocate %zu bytes: %s", bytes,
                       cudaGetErrorString(st));
    return 0;
}

extern "C" void sq_gpu_free(sq_gpu *g, void *ptr)
{
    (void)g;
    if (ptr)
        cudaFree(ptr);
}

extern "C" int sq_gpu_memset0(sq_gpu *g, void *p, size_t bytes, sq_err *e)
{
    (void)g;
    if (bytes)
        CUDA_TRY(cudaMemset(p, 0, bytes), e);
    return 0;
}

extern "C" int sq_gpu_upload(sq_gpu *g, void *dst, const void *src, size_t bytes, sq_err *e)
{
    (void)g;
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), e);
    return 0;
}

extern "C" int sq_gpu_download(sq_gpu *g, void *dst, const void *src, size_t bytes, sq_err *e)
{
    (void)g;
    CUDA_TRY(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), e);
    return 0;
}

// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so swap the operands and M/N.
extern "C" int sq_gpu_sgemm(sq_gpu *g, int ta, int tb, int M, int N, int K, float alpha,
                            const float *A, int lda, const float *B, int ldb, float beta,
                            float *C, int ldc, sq_err *e)
{
    cublasStatus_t st = cublasSgemm(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb,
                                    A, lda, &beta, C, ldc);
    if (st != CUBLAS_STATUS_SUCCESS)
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLAS: sgemm %dx%dx%d failed (status %d)", M, N, K,
                       (int)st);
    CUDA_TRY(cudaGetLastError(), e);
    return 0;
}
