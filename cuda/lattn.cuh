// lattn.cuh - what the linear attention kinds' two GPU forms share:
// k_lattn.cu (attn_linear.c's per-row sweeps, statement for statement) and
// k_lchunk.cu (the same sums a chunk of rows at a time).
#ifndef SQ_LATTN_CUH
#define SQ_LATTN_CUH

#include "common.cuh"

// sq_lattn_kind's values (attn_linear.h), as the op list passes them
enum { K_LINREC = 0, K_LINREC_PAPER, K_LINEAR, K_EFFICIENT, K_HYDRA, K_NO_L2, K_NO_L2_PAPER,
       K_NO_ELU, K_NO_ELU_PAPER };

// linrec's variant of a kind (attn_linear.h sq_linrec_variant: 0 full, 1
// no L2, 2 no elu) and whether it takes the paper's column scaling
static __device__ __forceinline__ int lat_variant(int kind)
{
    return kind >= K_NO_ELU ? 2 : kind >= K_NO_L2 ? 1 : 0;
}

static __device__ __forceinline__ int lat_paper(int kind)
{
    return kind == K_LINREC_PAPER || kind == K_NO_L2_PAPER || kind == K_NO_ELU_PAPER;
}

// One launch's arguments: the forward (fwd) or the backward of a kind.
struct lat_args {
    int kind, fwd, ld, B, H, C, causal, T, shared;
    float *out, *cache, *scratch, *dq, *dk, *dv;
    const float *q, *k, *v, *dout;
    const int *off;
};

/* elu(x) = x (x > 0), e^x - 1 (x <= 0), and d elu / dx = 1 (x > 0), e^x
 * (x <= 0): the CPU's float build computes e^x with vec.h's exp, e^x - 1
 * within 2e-7 of expm1. */
static __device__ __forceinline__ float elu_v(float x)
{
    return x > 0 ? x : expf(x) - 1.0f;
}

static __device__ __forceinline__ float elu_grad_v(float x)
{
    return x > 0 ? 1.0f : expf(x);
}

// k_lchunk.cu and k_echunk.cu: run a's work a chunk of rows at a time and
// return 1 when its kind and head size allow (lchunk: every kind but
// efficient, heads of up to 70 dimensions; echunk: efficient, up to 70;
// the chunk buffers fit 48 KiB); 0: the caller sweeps (k_lattn.cu).
int be_lchunk_launch(sq_gpu_be *be, const lat_args *a);
int be_echunk_launch(sq_gpu_be *be, const lat_args *a);

#endif
