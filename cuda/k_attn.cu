// k_attn.cu - softmax attention over packed segments (ops.c section 8):
// out_t = sum_j softmax_j(q_t . k_j / sqrt(hs)) v_j per head, over the keys
// j <= t of t's segment (causal) or all of them.
//
// ONLINE SOFTMAX, no L x L matrix: one warp per (row, head) sweeps its keys
// keeping the running max m, the sum l and the weighted values; the
// forward stores the row's log-sum-exp lse = m + log l in att[t * H + h]
// (the CPU keeps the probabilities there: H sum len^2 >= T H floats, so
// the GPU's use is a prefix of the caller's buffer). The backward
// recomputes p_tj = exp(s_tj - lse_t) and, with D_t = dout_t . out_t:
//   dq_t = scale sum_j p_tj (dout_t . v_j - D_t) k_j     (a warp per row)
//   dk_j = scale sum_t p_tj (dout_t . v_j - D_t) q_t     (a warp per key,
//   dv_j = sum_t p_tj dout_t                              queries in order)
// Every sum in a fixed order, no atomics: two runs give the same bits.
// Heads of up to 64 dimensions: each lane holds dimensions lane and
// lane + 32. Time O(sum len^2 C), memory O(T H).
//
// Budget: __launch_bounds__(256) (8 warps), no shared memory, a few dozen
// registers.
#include "common.cuh"

#define AT_WARPS 8
#define AT_MAXHS 64

// a . b over the head's dimensions held as lanes' pairs (x0, x1)
static __device__ __forceinline__ float hdot(float a0, float a1, float b0, float b1)
{
    return be_warp_sum(a0 * b0 + a1 * b1);
}

static __global__ __launch_bounds__(AT_WARPS * 32, 1) void k_attn_fwd(
    float *out, float *lse, const float *q, const float *k, const float *v, int ld,
    const int *off, int B, int T, int H, int hs, float scale, int causal)
{
    int w = blockIdx.x * AT_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= T * H)
        return;
    int t = w / H, h = w % H, b = be_seg_of(off, B, t), s0 = off[b], s1 = off[b + 1];
    int jend = causal ? t + 1 : s1;
    int d0 = lane, d1 = lane + 32;
    size_t hq = (size_t)t * ld + (size_t)h * hs;
    float q0 = d0 < hs ? q[hq + d0] : 0, q1 = d1 < hs ? q[hq + d1] : 0;
    float m = -INFINITY, l = 0, a0 = 0, a1 = 0;
    for (int j = s0; j < jend; j++) {
        size_t hk = (size_t)j * ld + (size_t)h * hs;
        float k0 = d0 < hs ? k[hk + d0] : 0, k1 = d1 < hs ? k[hk + d1] : 0;
        float s = scale * hdot(q0, q1, k0, k1);
        float mn = fmaxf(m, s), f = expf(m - mn), p = expf(s - mn);
        float v0 = d0 < hs ? v[hk + d0] : 0, v1 = d1 < hs ? v[hk + d1] : 0;
        l = l * f + p;
        a0 = a0 * f + p * v0;
        a1 = a1 * f + p * v1;
        m = mn;
    }
    size_t ho = (size_t)t * H * hs + (size_t)h * hs;
    if (d0 < hs)
        out[ho + d0] = a0 / l;
    if (d1 < hs)
        out[ho + d1] = a1 / l;
    if (lane == 0)
        lse[(size_t)t * H + h] = m + logf(l);
}

// dq; D_t = dout_t . out_t
static __global__ __launch_bounds__(AT_WARPS * 32, 1) void k_attn_dq(
    float *dq, const float *dout, const float *out, const float *q, const float *k,
    const float *v, const float *lse, int ld, const int *off, int B, int T, int H, int hs,
    float scale, int causal)
{
    int w = blockIdx.x * AT_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= T * H)
        return;
    int t = w / H, h = w % H, C = H * hs, b = be_seg_of(off, B, t), s0 = off[b], s1 = off[b + 1];
    int jend = causal ? t + 1 : s1, d0 = lane, d1 = lane + 32;
    size_t ho = (size_t)t * C + (size_t)h * hs, hq = (size_t)t * ld + (size_t)h * hs;
    float g0 = d0 < hs ? dout[ho + d0] : 0, g1 = d1 < hs ? dout[ho + d1] : 0;
    float o0 = d0 < hs ? out[ho + d0] : 0, o1 = d1 < hs ? out[ho + d1] : 0;
    float q0 = d0 < hs ? q[hq + d0] : 0, q1 = d1 < hs ? q[hq + d1] : 0;
    float D = hdot(g0, g1, o0, o1), L = lse[(size_t)t * H + h], r0 = 0, r1 = 0;
    for (int j = s0; j < jend; j++) {
        size_t hk = (size_t)j * ld + (size_t)h * hs;
        float k0 = d0 < hs ? k[hk + d0] : 0, k1 = d1 < hs ? k[hk + d1] : 0;
        float v0 = d0 < hs ? v[hk + d0] : 0, v1 = d1 < hs ? v[hk + d1] : 0;
        float p = expf(scale * hdot(q0, q1, k0, k1) - L);
        float ds = scale * p * (hdot(g0, g1, v0, v1) - D);
        r0 += ds * k0;
        r1 += ds * k1;
    }
    if (d0 < hs)
        dq[hq + d0] += r0;
    if (d1 < hs)
        dq[hq + d1] += r1;
}

// dk, dv: a warp per (key row j, head), the queries that see j in order
// (D_t recomputed: no scratch between the passes)
static __global__ __launch_bounds__(AT_WARPS * 32, 1) void k_attn_dkv(
    float *dk, float *dv, const float *dout, const float *out, const float *q, const float *k,
    const float *v, const float *lse, int ld, const int *off, int B, int T, int H, int hs,
    float scale, int causal)
{
    int w = blockIdx.x * AT_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (w >= T * H)
        return;
    int j = w / H, h = w % H, C = H * hs, b = be_seg_of(off, B, j), s0 = off[b], s1 = off[b + 1];
    int d0 = lane, d1 = lane + 32;
    size_t hk = (size_t)j * ld + (size_t)h * hs;
    float k0 = d0 < hs ? k[hk + d0] : 0, k1 = d1 < hs ? k[hk + d1] : 0;
    float v0 = d0 < hs ? v[hk + d0] : 0, v1 = d1 < hs ? v[hk + d1] : 0;
    float ak0 = 0, ak1 = 0, av0 = 0, av1 = 0;
    for (int t = causal ? j : s0; t < s1; t++) {
        size_t hq = (size_t)t * ld + (size_t)h * hs, ho = (size_t)t * C + (size_t)h * hs;
        float q0 = d0 < hs ? q[hq + d0] : 0, q1 = d1 < hs ? q[hq + d1] : 0;
        float g0 = d0 < hs ? dout[ho + d0] : 0, g1 = d1 < hs ? dout[ho + d1] : 0;
        float o0 = d0 < hs ? out[ho + d0] : 0, o1 = d1 < hs ? out[ho + d1] : 0;
        float p = expf(scale * hdot(q0, q1, k0, k1) - lse[(size_t)t * H + h]);
        float ds = scale * p * (hdot(g0, g1, v0, v1) - hdot(g0, g1, o0, o1));
        ak0 += ds * q0;
        ak1 += ds * q1;
        av0 += p * g0;
        av1 += p * g1;
    }
    if (d0 < hs) {
        dk[hk + d0] += ak0;
        dv[hk + d0] += av0;
    }
    if (d1 < hs) {
        dk[hk + d1] += ak1;
        dv[hk + d1] += av1;
    }
}

// The rows T = off[B] of the staged host offsets (the grid's size); -1
// (and the sticky error) when off is not a staged host array or hs is
// out of range.
static int attn_rows(sq_gpu_be *be, const int *off, int B, int H, int C, const char *what)
{
    const int *h = be_host_ints(be, off);
    if (!h || H <= 0 || C % H || C / H > AT_MAXHS) {
        be_note(be, cudaErrorInvalidValue, what);
        return -1;
    }
    return h[B];
}

void be_attention_forward(sq_gpu_be *be, float *out, float *att, const float *q, const float *k,
                          const float *v, int ld, const int *off, int B, int H, int C,
                          int causal)
{
    int T = attn_rows(be, off, B, H, C, "attention_forward: off not staged, or heads over 64");
    if (T <= 0)
        return;
    int hs = C / H;
    unsigned blocks = (unsigned)(((size_t)T * H + AT_WARPS - 1) / AT_WARPS);
    SQ_LAUNCH(be, k_attn_fwd, blocks, AT_WARPS * 32, 0, out, att, q, k, v, ld,
              be_ints(be, off), B, T, H, hs, 1.0f / sqrtf((float)hs), causal);
}

void be_attention_backward(sq_gpu_be *be, float *dq, float *dk, float *dv, const float *dout,
                           const float *out, const float *q, const float *k, const float *v,
                           const float *att, int ld, const int *off, int B, int H, int C,
                           int causal)
{
    int T = attn_rows(be, off, B, H, C, "attention_backward: off not staged, or heads over 64");
    if (T <= 0)
        return;
    int hs = C / H;
    float scale = 1.0f / sqrtf((float)hs);
    const int *doff = be_ints(be, off);
    unsigned blocks = (unsigned)(((size_t)T * H + AT_WARPS - 1) / AT_WARPS);
    SQ_LAUNCH(be, k_attn_dq, blocks, AT_WARPS * 32, 0, dq, dout, out, q, k, v, att, ld, doff,
              B, T, H, hs, scale, causal);
    SQ_LAUNCH(be, k_attn_dkv, blocks, AT_WARPS * 32, 0, dk, dv, dout, out, q, k, v, att, ld, doff,
              B, T, H, hs, scale, causal);
}
