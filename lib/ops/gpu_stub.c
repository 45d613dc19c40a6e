/* gpu_stub.c - the GPU entry points when no CUDA backend is compiled in. */
#include "gpu.h"

#ifndef SEQREC_CUDA
#include <stdio.h>

int sq_gpu_probe(char *name, size_t n)
{
    if (n)
        snprintf(name, n, "built without CUDA (nvcc not found, or CUDA=0)");
    return 0;
}

int sq_gpu_open(sq_gpu **g, int device, sq_err *e)
{
    (void)device;
    *g = NULL;
    return sq_fail(e, SQ_EX_USAGE, "this build has no CUDA backend (rebuild with CUDA=1)");
}

void sq_gpu_close(sq_gpu *g) { (void)g; }
int sq_gpu_alloc(sq_gpu *g, void **ptr, size_t bytes, sq_err *e)
{
    (void)g; (void)bytes;
    *ptr = NULL;
    return sq_fail(e, SQ_EX_USAGE, "no CUDA backend");
}
void sq_gpu_free(sq_gpu *g, void *ptr) { (void)g; (void)ptr; }
int sq_gpu_memset0(sq_gpu *g, void *p, size_t bytes, sq_err *e)
{
    (void)g; (void)p; (void)bytes;
    return sq_fail(e, SQ_EX_USAGE, "no CUDA backend");
}
int sq_gpu_upload(sq_gpu *g, void *dst, const void *src, size_t bytes, sq_err *e)
{
    (void)g; (void)dst; (void)src; (void)bytes;
    return sq_fail(e, SQ_EX_USAGE, "no CUDA backend");
}
int sq_gpu_download(sq_gpu *g, void *dst, const void *src, size_t bytes, sq_err *e)
{
    return sq_gpu_upload(g, dst, src, bytes, e);
}
int sq_gpu_sgemm(sq_gpu *g, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                 int lda, const float *B, int ldb, float beta, float *C, int ldc, sq_err *e)
{
    (void)g; (void)ta; (void)tb; (void)M; (void)N; (void)K; (void)alpha; (void)A; (void)lda;
    (void)B; (void)ldb; (void)beta; (void)C; (void)ldc;
    return sq_fail(e, SQ_EX_USAGE, "no CUDA backend");
}
#else
typedef int sq_gpu_stub_unused; /* the CUDA build provides these in cuda/ */
#endif
