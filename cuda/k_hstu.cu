// k_hstu.cu - HSTU's element-wise ops around its SiLU attention
// (attn_silu.h), the GPU twins of attn_silu.c's sq_silu_forward/backward
// and sq_gate_forward/backward:
//   SiLU on a view x (rows x cols, row stride ld): out = x sigmoid(x) in the
//     same view of out (out == x: in place); backward dx += dout silu'(x),
//     silu'(x) = sg (1 + x (1 - sg)), dout and dx in the same view;
//   the gate: out [rows, cols] (stride cols) = a * b, a of stride lda, b of
//     stride ldb; backward da += dout * b, db += dout * a (either NULL).
//
// A thread an element (grid-stride loops, as k_elem.cu), each element's
// arithmetic the CPU's expression in the CPU's order; built with
// --fmad=false (cuda.mk), so the gate and its backward give the CPU's bits
// and SiLU differs only by expf (the CPU's float build calls the C
// library's expf; here CUDA's, within 2 ulp). Nothing is summed across
// elements: two runs give the same bits.
//
// Budget: __launch_bounds__(256), no shared memory, a handful of registers.
#include "common.cuh"

#define HS_THREADS 256

// Grid-stride loop over the n = rows * cols elements of a view, and its
// blocks (common.cuh, as k_elem.cu's).
#define HS_LOOP(i, n) BE_EW_LOOP(i, n)
static unsigned hs_blocks(sq_gpu_be *be, size_t n)
{
    return be_ew_blocks(be, n, HS_THREADS);
}

static __global__ __launch_bounds__(HS_THREADS) void k_silu_ew(float *out, const float *x,
                                                               int ld, int cols, size_t n)
{
    HS_LOOP(i, n) {
        size_t at = (i / cols) * ld + i % cols;
        float z = x[at];
        out[at] = z * be_sigmoid(z);
    }
}

static __global__ __launch_bounds__(HS_THREADS) void k_silu_ew_back(float *dx,
                                                                    const float *dout,
                                                                    const float *x, int ld,
                                                                    int cols, size_t n)
{
    HS_LOOP(i, n) {
        size_t at = (i / cols) * ld + i % cols;
        float z = x[at], sg = be_sigmoid(z);
        dx[at] += dout[at] * sg * (1.0f + z * (1.0f - sg));
    }
}

static __global__ __launch_bounds__(HS_THREADS) void k_gate(float *out, const float *a, int lda,
                                                            const float *b, int ldb, int cols,
                                                            size_t n)
{
    HS_LOOP(i, n) {
        size_t r = i / cols, c = i % cols;
        out[i] = a[r * lda + c] * b[r * ldb + c];
    }
}

static __global__ __launch_bounds__(HS_THREADS) void k_gate_back(float *da, float *db,
                                                                 const float *dout,
                                                                 const float *a, int lda,
                                                                 const float *b, int ldb,
                                                                 int cols, size_t n)
{
    HS_LOOP(i, n) {
        size_t r = i / cols, c = i % cols;
        float g = dout[i];
        if (da)
            da[r * lda + c] += g * b[r * ldb + c];
        if (db)
            db[r * ldb + c] += g * a[r * lda + c];
    }
}

// The elements of a rows x cols view; 0 for an empty one.
static size_t hs_count(int rows, int cols)
{
    return rows > 0 && cols > 0 ? (size_t)rows * (size_t)cols : 0;
}

void be_silu_forward(sq_gpu_be *be, float *out, const float *x, int ld, int rows, int cols)
{
    size_t n = hs_count(rows, cols);
    if (n)
        SQ_LAUNCH(be, k_silu_ew, hs_blocks(be, n), HS_THREADS, 0, out, x, ld, cols, n);
}

void be_silu_backward(sq_gpu_be *be, float *dx, const float *dout, const float *x, int ld,
                      int rows, int cols)
{
    size_t n = hs_count(rows, cols);
    if (n)
        SQ_LAUNCH(be, k_silu_ew_back, hs_blocks(be, n), HS_THREADS, 0, dx, dout, x, ld, cols,
                  n);
}

void be_gate_forward(sq_gpu_be *be, float *out, const float *a, int lda, const float *b,
                     int ldb, int rows, int cols)
{
    size_t n = hs_count(rows, cols);
    if (n)
        SQ_LAUNCH(be, k_gate, hs_blocks(be, n), HS_THREADS, 0, out, a, lda, b, ldb, cols, n);
}

void be_gate_backward(sq_gpu_be *be, float *da, float *db, const float *dout, const float *a,
                      int lda, const float *b, int ldb, int rows, int cols)
{
    size_t n = hs_count(rows, cols);
    if (n && (da || db))
        SQ_LAUNCH(be, k_gate_back, hs_blocks(be, n), HS_THREADS, 0, da, db, dout, a, lda, b,
                  ldb, cols, n);
}
