/* gpu.h - the CUDA backend's entry points, callable from C.
 *
 * gpu_load.c implements them in every build by loading libseqrec-cuda.so
 * (the .cu files of cuda/, built when the Makefile finds nvcc: CUDA=auto|1) on the
 * first probe or open; a program that never asks for a GPU never loads
 * cuBLAS. Without the object, probe says why and open fails with
 * SQ_EX_USAGE. A context owns the object's handle and the cuBLAS handle:
 * no globals. */
#ifndef SQ_GPU_H
#define SQ_GPU_H

#include <stddef.h>
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sq_gpu sq_gpu;

/* 1 when the backend loads and a device is usable; name gets the device
 * name or the reason why not. The object is looked for at
 * $SEQREC_CUDA_LIB when that is set, else beside the program (gpu_load.c). */
int sq_gpu_probe(char *name, size_t n);
int sq_gpu_open(sq_gpu **g, int device, sq_err *e);
void sq_gpu_close(sq_gpu *g);

/* Device memory; every call checked, failures reported through e. */
int sq_gpu_alloc(sq_gpu *g, void **ptr, size_t bytes, sq_err *e);
void sq_gpu_free(sq_gpu *g, void *ptr);
/* Sets bytes of device memory at p to zero. */
int sq_gpu_memset0(sq_gpu *g, void *p, size_t bytes, sq_err *e);
int sq_gpu_upload(sq_gpu *g, void *dst, const void *src, size_t bytes, sq_err *e);
int sq_gpu_download(sq_gpu *g, void *dst, const void *src, size_t bytes, sq_err *e);

/* Row-major C[M,N] = alpha * op(A) op(B) + beta * C, the semantics of
 * cblas_sgemm(CblasRowMajor, ...), on device pointers (cuBLAS). */
int sq_gpu_sgemm(sq_gpu *g, int trans_a, int trans_b, int M, int N, int K,
                 float alpha, const float *A, int lda, const float *B, int ldb,
                 float beta, float *C, int ldc, sq_err *e);

#ifdef __cplusplus
}
#endif
#endif
