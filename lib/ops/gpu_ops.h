/* gpu_ops.h - the table of functions libseqrec-cuda.so hands its loader.
 *
 * The CUDA backend (the .cu files of cuda/) is built into a shared object
 * that the programs dlopen only when a GPU is asked for (gpu_load.c), so
 * that a program that never uses one does not load cuBLAS at start-up.
 * The object exports one C function, SQ_GPU_OPS_SYMBOL, that returns this
 * table; everything else in it is hidden. It must not export the sq_gpu_*
 * names of gpu.h: the programs define those, and ELF interposition would
 * bind the object's own calls to the programs' versions.
 *
 * sq_gpu_be is the backend's context (device, cuBLAS handle), opaque here.
 * The functions mean what their sq_gpu_* namesakes in gpu.h say. */
#ifndef SQ_GPU_OPS_H
#define SQ_GPU_OPS_H

#include <stddef.h>
#include "err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Raised whenever the table or sq_err changes: the loader refuses an
 * object built against another layout instead of calling through it. */
#define SQ_GPU_OPS_ABI 1
#define SQ_GPU_OPS_SYMBOL "sq_cuda_backend"
#define SQ_GPU_LIB_NAME "libseqrec-cuda.so"

typedef struct sq_gpu_be sq_gpu_be;

typedef struct sq_gpu_ops {
    int abi;           /* SQ_GPU_OPS_ABI of the object's build */
    size_t err_size;   /* sizeof(sq_err) of the object's build */
    int (*probe)(char *name, size_t n);
    int (*open)(sq_gpu_be **b, int device, sq_err *e);
    void (*close)(sq_gpu_be *b);
    int (*alloc)(sq_gpu_be *b, void **ptr, size_t bytes, sq_err *e);
    void (*free)(sq_gpu_be *b, void *ptr);
    int (*memset0)(sq_gpu_be *b, void *p, size_t bytes, sq_err *e);
    int (*upload)(sq_gpu_be *b, void *dst, const void *src, size_t bytes, sq_err *e);
    int (*download)(sq_gpu_be *b, void *dst, const void *src, size_t bytes, sq_err *e);
    int (*sgemm)(sq_gpu_be *b, int trans_a, int trans_b, int M, int N, int K, float alpha,
                 const float *A, int lda, const float *B, int ldb, float beta, float *C,
                 int ldc, sq_err *e);
} sq_gpu_ops;

/* The type of the exported function. */
typedef const sq_gpu_ops *(*sq_gpu_ops_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
