/* device.h - --device cpu|cuda[:N] and --precision fp32|tf32|bf16: the context a
 * program's main builds once and passes down (ctx.h).
 *
 * The CPU context costs nothing to make: the CUDA backend is loaded only
 * when "cuda" is asked for (gpu_load.c). Exit codes: 64 for a malformed
 * --device or --precision, 69 when no GPU (or no such device) is there,
 * 71 when the device is out of memory. */
#ifndef SQ_DEVICE_H
#define SQ_DEVICE_H

#include "ctx.h"
#include "err.h"

/* The GPU's GEMMs (cuBLAS): fp32 exactly, tf32 tensor cores (inputs
 * rounded to 10-bit mantissas), or bf16 tensor cores (inputs rounded to
 * bf16, fp32 accumulation: CUBLAS_COMPUTE_32F_FAST_16BF). Weights, Adam's
 * moments, activations and every other kernel stay fp32 in all three. */
enum { SQ_PREC_FP32 = 0, SQ_PREC_TF32 = 1, SQ_PREC_BF16 = 2 };

/* "cpu", "cuda" (device 0) or "cuda:N": backend and device number; 0 or
 * SQ_EX_USAGE. */
int sq_device_parse(const char *s, int *backend, int *index, sq_err *e);
/* "fp32", "tf32" or "bf16"; 0 or SQ_EX_USAGE. */
int sq_precision_parse(const char *s, int *precision, sq_err *e);

/* Fills cx for device (NULL: cpu) with threads CPU threads, opening the
 * GPU for cuda (precision SQ_PREC_*). sq_device_close releases it. */
int sq_device_open(sq_ctx *cx, const char *device, int precision, int threads, sq_err *e);
void sq_device_close(sq_ctx *cx);

#endif
