/* ongpu.h - the one line at the top of a CPU op that has a GPU twin.
 *
 *     SQ_ON_GPU(cx, layernorm_forward, (out, mean, rstd, inp, w, b, T, C, eps));
 *
 * On a CUDA context it forwards the op's arguments to sq_gpu_NAME (gpu.h,
 * from the one list of gpu_ops.h) and returns; SQ_ON_GPU_RET returns the
 * twin's value. The double build (real.h) has no GPU twin: both expand to
 * nothing there. Include after real.h. */
#ifndef SQ_ONGPU_H
#define SQ_ONGPU_H

#include "ctx.h"
#include "gpu.h"

#if SQ_REAL_IS_F64
#define SQ_ON_GPU(cx, name, args) ((void)0)
#define SQ_ON_GPU_RET(cx, name, args) ((void)0)
#else
#define SQ_ON_GPU(cx, name, args)                                          \
    do {                                                                   \
        if ((cx)->backend == SQ_BACKEND_CUDA) {                            \
            sq_gpu_##name((sq_gpu *)(cx)->gpu, SQ_GPU_STRIP args);         \
            return;                                                        \
        }                                                                  \
    } while (0)
#define SQ_ON_GPU_RET(cx, name, args)                                      \
    do {                                                                   \
        if ((cx)->backend == SQ_BACKEND_CUDA)                              \
            return sq_gpu_##name((sq_gpu *)(cx)->gpu, SQ_GPU_STRIP args);  \
    } while (0)
#endif

#endif
