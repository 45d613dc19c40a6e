/* device.c - the context of --device and --precision (device.h). */
#include "device.h"
#include "gpu.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int sq_device_parse(const char *s, int *backend, int *index, sq_err *e)
{
    *backend = SQ_BACKEND_CPU;
    *index = 0;
    if (!s || strcmp(s, "cpu") == 0)
        return 0;
    if (strncmp(s, "cuda", 4) == 0 && (s[4] == '\0' || s[4] == ':')) {
        *backend = SQ_BACKEND_CUDA;
        if (s[4] == '\0')
            return 0;
        char *end;
        errno = 0;
        long v = strtol(s + 5, &end, 10);
        if (s[5] >= '0' && s[5] <= '9' && *end == '\0' && errno == 0 && v <= INT_MAX) {
            *index = (int)v;
            return 0;
        }
    }
    return sq_fail(e, SQ_EX_USAGE, "--device '%s': expected cpu, cuda or cuda:N", s);
}

int sq_precision_parse(const char *s, int *precision, sq_err *e)
{
    if (strcmp(s, "fp32") == 0)
        *precision = SQ_PREC_FP32;
    else if (strcmp(s, "tf32") == 0)
        *precision = SQ_PREC_TF32;
    else if (strcmp(s, "bf16") == 0)
        *precision = SQ_PREC_BF16;
    else
        return sq_fail(e, SQ_EX_USAGE, "--precision '%s': expected fp32, tf32 or bf16", s);
    return 0;
}

int sq_device_open(sq_ctx *cx, const char *device, int precision, int threads, sq_err *e)
{
    int backend, index;
    *cx = sq_ctx_cpu();
    cx->threads = threads;
    if (sq_device_parse(device, &backend, &index, e))
        return e->code;
    if (backend == SQ_BACKEND_CPU)
        return 0;
    sq_gpu *g = NULL;
    if (sq_gpu_open(&g, index, e))
        return e->code;
    if (sq_gpu_set_precision(g, precision, e)) {
        sq_gpu_close(g);
        return e->code;
    }
    cx->backend = SQ_BACKEND_CUDA;
    cx->gpu = g;
    return 0;
}

void sq_device_close(sq_ctx *cx)
{
    if (cx->backend == SQ_BACKEND_CUDA)
        sq_gpu_close(cx->gpu);
    *cx = sq_ctx_cpu();
}
