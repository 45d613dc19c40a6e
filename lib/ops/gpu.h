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
#include "gpu_ops.h"

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

/* Device memory; failures reported through e. */
int sq_gpu_alloc(sq_gpu *g, void **ptr, size_t bytes, sq_err *e);
void sq_gpu_free(sq_gpu *g, void *ptr);

/* Every op of gpu_ops.h's list as sq_gpu_NAME(g, ...), g open (not NULL):
 * sq_gpu_memset0, _upload, _download, _stage (the step's integer arrays),
 * _sync (the sticky error, once a step), _mem_used (the device's used
 * bytes), _gemm, _layernorm_forward, ... */
#define SQ_GPU_DECL_X(ret, name, params, args) \
    ret sq_gpu_##name(sq_gpu *gpu, SQ_GPU_STRIP params);
SQ_GPU_OP_LIST(SQ_GPU_DECL_X)
#undef SQ_GPU_DECL_X

#ifdef __cplusplus
}
#endif
#endif
