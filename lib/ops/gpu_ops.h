/* gpu_ops.h - the one list of the CUDA backend's entry points, and the
 * table libseqrec-cuda.so hands its loader.
 *
 * The CUDA backend (the .cu files of cuda/) is built into a shared object
 * that the programs dlopen only when a GPU is asked for (gpu_load.c), so
 * that a program that never uses one does not load cuBLAS at start-up.
 * The object exports one C function, SQ_GPU_OPS_SYMBOL, that returns this
 * table; everything else in it is hidden. It must not export the sq_gpu_*
 * names of gpu.h: the programs define those, and ELF interposition would
 * bind the object's own calls to the programs' versions.
 *
 * ONE LIST. SQ_GPU_OP_LIST below names every op once: its return type,
 * name, parameters and the arguments that forward them. Three things are
 * expanded from it, so that they cannot drift apart:
 *   - the table's fields (this file), in list order;
 *   - the loader's forwarders sq_gpu_NAME(sq_gpu *, ...) (gpu_load.c) and
 *     their declarations (gpu.h);
 *   - the backend's declarations be_NAME(sq_gpu_be *, ...) and its table
 *     (cuda/common.cuh, cuda/gpu.cu).
 * A GPU op is therefore its kernel file (cuda/k_*.cu, defining be_NAME)
 * plus its line here (and, where a CPU op is its twin, the one-line
 * SQ_ON_GPU dispatch at the top of that op). Any change of the list
 * changes SQ_GPU_OPS_HASH, which the loader compares: an object built
 * against another list is refused, never called through.
 *
 * CONVENTIONS. Every op means what its CPU twin (ops.h, attn_linear.h,
 * adam.h) says, on device pointers, in float. Integer arrays (ids, offsets,
 * rows, targets) are HOST arrays of the step's packed batch that the
 * backend mirrors once a step (sq_gpu_stage), or device arrays. Ops queue
 * work on the context's stream and return at once; the first failure is
 * kept (sticky) and reported by sq_gpu_sync, which the trainer calls once
 * a step. Ops that return a value (a loss, a norm) wait for it. */
#ifndef SQ_GPU_OPS_H
#define SQ_GPU_OPS_H

#include <stddef.h>
#include <stdint.h>
#include "err.h"

/* The rows of a piece of a segment in the GPU's chunked linear attention
 * (k_lchunk.cu, k_echunk.cu): the GPU scratch's size (attn_linear.h
 * sq_lattn_gpu_scratch_size) and the kernels' split agree on it. A
 * multiple of the chunks' 32 and 16 rows. */
#define SQ_LATTN_GPU_PIECE 128
/* The runs one adam_runs call takes at most (adam.c cuts longer lists) */
#define SQ_ADAM_RUNS_GPU 64

#ifdef __cplusplus
extern "C" {
#endif

#define SQ_GPU_OPS_SYMBOL "sq_cuda_backend"
#define SQ_GPU_LIB_NAME "libseqrec-cuda.so"

/* Strips one pair of parentheses: SQ_GPU_STRIP (a, b) -> a, b */
#define SQ_GPU_STRIP(...) __VA_ARGS__

/* X(ret, name, (params), (args)) for every op, in table order. */
#define SQ_GPU_OP_LIST(X)                                                                    \
    /* the context, memory and the step; mem_used: the device's used bytes (cudaMemGetInfo's \
       total - free: every process's, the runtime's and cuBLAS's too) */                     \
    X(int, memset0, (void *p, size_t bytes, sq_err *e), (p, bytes, e))                       \
    X(int, upload, (void *dst, const void *src, size_t bytes, sq_err *e), (dst, src, bytes, e)) \
    X(int, download, (void *dst, const void *src, size_t bytes, sq_err *e),                  \
      (dst, src, bytes, e))                                                                  \
    X(int, stage, (const void *const *host, const size_t *bytes, int n, sq_err *e),          \
      (host, bytes, n, e))                                                                   \
    X(void, stage_add, (const void *host, size_t bytes), (host, bytes))                      \
    X(int, sync, (sq_err *e), (e))                                                           \
    X(int, set_precision, (int mode, sq_err *e), (mode, e))                                  \
    /* on: every GEMM batch-invariant (k_gemm.cu) until off: scoring's forwards */            \
    X(void, invariant, (int on), (on))                                                       \
    X(int, mem_used, (size_t *bytes, sq_err *e), (bytes, e))                                 \
    /* mem_peak: the most bytes the context's own allocations held at once (alloc.cu) */      \
    X(int, mem_peak, (size_t *bytes, sq_err *e), (bytes, e))                                 \
    /* CUDA graphs (graph.cu): a step bracketed, captured once a key, replayed */           \
    X(int, graph_begin, (uint64_t key, sq_err *e), (key, e))                                 \
    X(int, graph_end, (sq_err *e), (e))                                                      \
    X(int, graph_stats, (int *keys, long *replays, sq_err *e), (keys, replays, e))           \
    X(int, graph_values, (double *out, int n, int *got, sq_err *e), (out, n, got, e))        \
    X(void, graph_gate, (double max_loss), (max_loss))                                       \
    X(void, graph_mix, (const double *w, int n), (w, n))                                     \
    /* GEMM (cuBLAS, row-major cblas contract) */                                            \
    X(void, gemm, (int trans_a, int trans_b, int M, int N, int K, float alpha, const float *A, \
                   int lda, const float *B, int ldb, float beta, float *Cm, int ldc),        \
      (trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, Cm, ldc))                     \
    /* copies and fills (k_elem.cu) */                                                       \
    X(void, zero, (float *x, size_t n), (x, n))                                              \
    X(void, copy, (float *dst, const float *src, size_t n), (dst, src, n))                   \
    X(void, scale, (float *x, size_t n, float a), (x, n, a))                                 \
    X(void, fill2d, (float *dst, int ld, int rows, int cols, float v), (dst, ld, rows, cols, v)) \
    X(void, copy2d, (float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols), \
      (dst, ld_dst, src, ld_src, rows, cols))                                                \
    X(void, add2d, (float *dst, int ld_dst, const float *src, int ld_src, int rows, int cols), \
      (dst, ld_dst, src, ld_src, rows, cols))                                                \
    X(void, gather_rows, (float *out, const float *in, const int *rows, int n, int C),       \
      (out, in, rows, n, C))                                                                 \
    X(void, scatter_add_rows, (float *out, const float *in, const int *rows, int n, int C),  \
      (out, in, rows, n, C))                                                                 \
    X(void, scatter_rows, (float *out, const float *in, const int *rows, int n, int C),      \
      (out, in, rows, n, C))                                                                 \
    /* element-wise (k_elem.cu) */                                                           \
    X(void, gelu_forward, (float *out, const float *inp, size_t n), (out, inp, n))           \
    X(void, gelu_backward, (float *dinp, const float *dout, const float *inp, size_t n),     \
      (dinp, dout, inp, n))                                                                  \
    X(void, gelu_backward_to, (float *dinp, const float *dout, const float *inp, size_t n),  \
      (dinp, dout, inp, n))                                                                  \
    X(void, relu_forward, (float *out, const float *inp, size_t n), (out, inp, n))           \
    X(void, relu_backward, (float *dinp, const float *dout, const float *inp, size_t n),     \
      (dinp, dout, inp, n))                                                                  \
    /* depthwise convolution (k_dwconv.cu), HSTU's SiLU attention (k_silu.cu) */             \
    X(void, dwconv_forward, (float *out, const float *x, int ld, const float *w,             \
                             const float *b, int K, const int *off, int B, int C,            \
                             int causal),                                                    \
      (out, x, ld, w, b, K, off, B, C, causal))                                              \
    X(void, dwconv_backward, (float *dx, float *dw, float *db, const float *dout,            \
                              const float *x, int ld, const float *w, int K, const int *off, \
                              int B, int C, int causal),                                     \
      (dx, dw, db, dout, x, ld, w, K, off, B, C, causal))                                    \
    X(void, attn_silu_forward, (float *out, const float *q, const float *k, const float *v,  \
                                int ld, const float *rab, const int *off, int B, int H,      \
                                int qk_dim, int v_dim, int max_len, float scale),            \
      (out, q, k, v, ld, rab, off, B, H, qk_dim, v_dim, max_len, scale))                     \
    X(void, attn_silu_backward, (float *dq, float *dk, float *dv, float *drab,               \
                                 float *scratch, const float *dout, const float *q,          \
                                 const float *k, const float *v, int ld, const float *rab,   \
                                 const int *off, int B, int H, int qk_dim, int v_dim,        \
                                 int max_len, float scale),                                  \
      (dq, dk, dv, drab, scratch, dout, q, k, v, ld, rab, off, B, H, qk_dim, v_dim, max_len, \
       scale))                                                                               \
    /* Caser's convolutions (k_conv.cu) and GRU4Rec's GRU layer (k_gru.cu) */                \
    X(void, hconv_forward, (float *out, int ldo, int *arg, const float *x, const float *w,   \
                            const float *b, int n, int L, int C, int F),                     \
      (out, ldo, arg, x, w, b, n, L, C, F))                                                  \
    X(void, hconv_backward, (float *dx, float *dw, float *db, const float *dout, int ldo,    \
                             const int *arg, const float *x, const float *w, int n, int L,   \
                             int C, int F),                                                  \
      (dx, dw, db, dout, ldo, arg, x, w, n, L, C, F))                                        \
    X(void, vconv_forward, (float *out, int ldo, const float *x, const float *w,             \
                            const float *b, int n, int L, int C, int F),                     \
      (out, ldo, x, w, b, n, L, C, F))                                                       \
    X(void, vconv_backward, (float *dx, float *dw, float *db, const float *dout, int ldo,    \
                             const float *x, const float *w, int n, int L, int C, int F),    \
      (dx, dw, db, dout, ldo, x, w, n, L, C, F))                                             \
    X(void, gru_forward, (float *h, float *cache, float *scratch, const float *x,            \
                          const float *w_ih, const float *w_hh, const float *b_ih,           \
                          const float *b_hh, const int *off, int B, int In, int H),          \
      (h, cache, scratch, x, w_ih, w_hh, b_ih, b_hh, off, B, In, H))                         \
    X(void, gru_backward, (float *dx, float *dw_ih, float *dw_hh, float *db_ih, float *db_hh, \
                           float *scratch, const float *dh, const float *x, const float *h,  \
                           const float *cache, const float *w_ih, const float *w_hh,         \
                           const int *off, int B, int In, int H),                            \
      (dx, dw_ih, dw_hh, db_ih, db_hh, scratch, dh, x, h, cache, w_ih, w_hh, off, B, In, H)) \
    /* CORE's L2 normalisation and attention pooling (k_core.cu) */                         \
    X(void, l2norm_forward, (float *out, float *norm, const float *inp, int T, int C,        \
                             float s, float eps), (out, norm, inp, T, C, s, eps))            \
    X(void, l2norm_backward, (float *dinp, const float *dout, const float *out,              \
                              const float *norm, int T, int C, float s, float eps),          \
      (dinp, dout, out, norm, T, C, s, eps))                                                 \
    X(void, attnpool_forward, (float *out, float *alpha, const float *score,                 \
                               const float *inp, const int *off, int B, int C),              \
      (out, alpha, score, inp, off, B, C))                                                   \
    X(void, attnpool_backward, (float *dinp, float *dscore, const float *dout,               \
                                const float *alpha, const float *inp, const int *off, int B, \
                                int C), (dinp, dscore, dout, alpha, inp, off, B, C))         \
    /* InfoNCE's softmax rows and gradient (k_nce.cu) */                                   \
    X(double, nce_softmax, (float *S, int U, const int *label, double div), (S, U, label, div)) \
    X(void, nce_grad, (float *S, int U, float g), (S, U, g))                                 \
    /* Blin's bidirectional KL over every item (k_bkl.cu) */                              \
    X(double, bkl, (float *dh, float *dE, float *scratch, const float *h, const float *E,    \
                    const int *ra, const int *rb, const int *cand, int S, int n, int C,      \
                    int V1, int chunk, float dloss),                                         \
      (dh, dE, scratch, h, E, ra, rb, cand, S, n, C, V1, chunk, dloss))                      \
    /* ELASTIC's segment means, cross attention and product-key retrieval (k_elastic.cu) */ \
    X(void, segmean_forward, (float *out, const float *inp, const int *off, int B, int C),    \
      (out, inp, off, B, C))                                                                 \
    X(void, segmean_backward, (float *dinp, const float *dout, const int *off, int B, int C), \
      (dinp, dout, off, B, C))                                                               \
    X(void, cross_attention_forward, (float *out, float *att, const float *q, int ldq,       \
                                      const int *offq, const float *k, const float *v,       \
                                      int ldk, const int *offk, int B, int H, int C),        \
      (out, att, q, ldq, offq, k, v, ldk, offk, B, H, C))                                    \
    X(void, cross_attention_backward, (float *dq, float *dk, float *dv, const float *dout,   \
                                       const float *out, const float *q, int ldq,            \
                                       const int *offq, const float *k, const float *v,      \
                                       int ldk, const int *offk, const float *att, int B,    \
                                       int H, int C),                                        \
      (dq, dk, dv, dout, out, q, ldq, offq, k, v, ldk, offk, att, B, H, C))                  \
    X(void, pkm_forward, (float *out, int *idx, float *cache, float *scratch, const float *q, \
                          const float *C1, const float *C2, const float *E, int B, int n,    \
                          int d, int k, int weighted),                                       \
      (out, idx, cache, scratch, q, C1, C2, E, B, n, d, k, weighted))                        \
    X(void, pkm_backward, (float *dq, float *dC1, float *dC2, float *dE, float *scratch,     \
                           const float *dout, const float *q, const float *C1,               \
                           const float *C2, const float *E, const int *idx,                  \
                           const float *cache, int B, int n, int d, int k, int weighted),    \
      (dq, dC1, dC2, dE, scratch, dout, q, C1, C2, E, idx, cache, B, n, d, k, weighted))     \
    /* HSTU's SiLU and gate on strided views (k_hstu.cu) */                                  \
    X(void, silu_forward, (float *out, const float *x, int ld, int rows, int cols),          \
      (out, x, ld, rows, cols))                                                              \
    X(void, silu_backward, (float *dx, const float *dout, const float *x, int ld, int rows,  \
                            int cols), (dx, dout, x, ld, rows, cols))                        \
    X(void, gate_forward, (float *out, const float *a, int lda, const float *b, int ldb,     \
                           int rows, int cols), (out, a, lda, b, ldb, rows, cols))           \
    X(void, gate_backward, (float *da, float *db, const float *dout, const float *a,         \
                            int lda, const float *b, int ldb, int rows, int cols),           \
      (da, db, dout, a, lda, b, ldb, rows, cols))                                            \
    X(void, dropout_forward, (float *out, uint8_t *mask, const float *inp, int T, int C,     \
                              float p, uint64_t seed, uint64_t step, uint64_t site),         \
      (out, mask, inp, T, C, p, seed, step, site))                                           \
    X(void, dropout_backward, (float *dinp, const float *dout, const uint8_t *mask, size_t n, \
                               float p), (dinp, dout, mask, n, p))                           \
    X(void, dropout_backward_to, (float *dinp, const float *dout, const uint8_t *mask,       \
                                  size_t n, float p), (dinp, dout, mask, n, p))              \
    X(void, dropout_add_forward, (float *out, uint8_t *mask, const float *res,               \
                                  const float *inp, int T, int C, float p, uint64_t seed,    \
                                  uint64_t step, uint64_t site),                             \
      (out, mask, res, inp, T, C, p, seed, step, site))                                      \
    X(void, relu_dropout_forward, (float *out, uint8_t *mask, const float *inp, int T, int C, \
                                   float p, uint64_t seed, uint64_t step, uint64_t site),    \
      (out, mask, inp, T, C, p, seed, step, site))                                           \
    X(void, relu_dropout_backward_to, (float *dinp, const float *dout, const uint8_t *mask,  \
                                       const float *inp, size_t n, float p),                 \
      (dinp, dout, mask, inp, n, p))                                                         \
    X(void, residual_forward, (float *out, const float *a, const float *b, size_t n),        \
      (out, a, b, n))                                                                        \
    X(void, residual_backward, (float *da, float *db, const float *dout, size_t n),          \
      (da, db, dout, n))                                                                     \
    /* rows: embeddings, LayerNorm, linear layers (k_rows.cu) */                             \
    X(void, embedding_forward, (float *out, const float *table, const int *ids, int T, int C, \
                                float scale), (out, table, ids, T, C, scale))                \
    X(void, embedding_backward, (float *dtable, const float *dout, const int *ids, int T,    \
                                 int C, float scale), (dtable, dout, ids, T, C, scale))      \
    X(void, posemb_forward, (float *out, const float *inp, const float *pe, const int *pos,  \
                             int T, int C), (out, inp, pe, pos, T, C))                       \
    X(void, posemb_backward, (float *dinp, float *dpe, const float *dout, const int *pos,    \
                              int T, int C), (dinp, dpe, dout, pos, T, C))                   \
    X(void, layernorm_forward, (float *out, float *mean, float *rstd, const float *inp,      \
                                const float *w, const float *b, int T, int C, float eps),    \
      (out, mean, rstd, inp, w, b, T, C, eps))                                               \
    X(void, layernorm_backward, (float *dinp, float *dw, float *db, const float *dout,       \
                                 const float *inp, const float *w, const float *mean,        \
                                 const float *rstd, int T, int C),                           \
      (dinp, dw, db, dout, inp, w, mean, rstd, T, C))                                        \
    X(void, layernorm_backward_to, (float *dinp, float *dw, float *db, const float *dout,    \
                                    const float *inp, const float *w, const float *mean,     \
                                    const float *rstd, int T, int C),                        \
      (dinp, dw, db, dout, inp, w, mean, rstd, T, C))                                        \
    X(void, linear_forward, (float *out, const float *inp, const float *w, const float *b,   \
                             int T, int C, int OC), (out, inp, w, b, T, C, OC))              \
    X(void, linear_backward, (float *dinp, float *dw, float *db, const float *dout,          \
                              const float *inp, const float *w, int T, int C, int OC),       \
      (dinp, dw, db, dout, inp, w, T, C, OC))                                                \
    X(void, linear_backward_to, (float *dinp, float *dw, float *db, const float *dout,       \
                                 const float *inp, const float *w, int T, int C, int OC),    \
      (dinp, dw, db, dout, inp, w, T, C, OC))                                                \
    /* attention over packed segments (k_attn.cu, k_lattn.cu) */                             \
    X(void, attention_forward, (float *out, float *att, const float *q, const float *k,      \
                                const float *v, int ld, const int *off, int B, int H, int C, \
                                int causal), (out, att, q, k, v, ld, off, B, H, C, causal))  \
    X(void, attention_backward, (float *dq, float *dk, float *dv, const float *dout,         \
                                 const float *out, const float *q, const float *k,           \
                                 const float *v, const float *att, int ld, const int *off,   \
                                 int B, int H, int C, int causal),                           \
      (dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal))                       \
    X(void, attention_backward_to, (float *dq, float *dk, float *dv, const float *dout,      \
                                    const float *out, const float *q, const float *k,        \
                                    const float *v, const float *att, int ld, const int *off, \
                                    int B, int H, int C, int causal),                        \
      (dq, dk, dv, dout, out, q, k, v, att, ld, off, B, H, C, causal))                       \
    X(void, lattn_forward, (int kind, float *out, float *cache, float *scratch,              \
                            const float *q, const float *k, const float *v, int ld,          \
                            const int *off, int B, int H, int C, int causal),                \
      (kind, out, cache, scratch, q, k, v, ld, off, B, H, C, causal))                        \
    X(void, lattn_backward, (int kind, float *dq, float *dk, float *dv, float *scratch,      \
                             const float *dout, const float *q, const float *k,              \
                             const float *v, const float *cache, int ld, const int *off,     \
                             int B, int H, int C, int causal),                               \
      (kind, dq, dk, dv, scratch, dout, q, k, v, cache, ld, off, B, H, C, causal))           \
    /* position-only mixers (k_pos.cu; fpositional: positional on sq_gemm) */                \
    X(void, pa_forward, (float *out, float *att, const float *Rw, const float *v, int ld,    \
                         const int *off, const int *pos, int B, int H, int C, int max_len,   \
                         int causal),                                                        \
      (out, att, Rw, v, ld, off, pos, B, H, C, max_len, causal))                             \
    X(void, pa_backward, (float *dRw, float *dv, const float *dout, const float *out,        \
                          const float *v, const float *att, int ld, const int *off,          \
                          const int *pos, int B, int H, int C, int max_len, int causal),     \
      (dRw, dv, dout, out, v, att, ld, off, pos, B, H, C, max_len, causal))                  \
    X(void, fixed_forward, (float *out, const float *v, int ld, const int *off,              \
                            const int *pos, int B, int C, int max_len, int kind,             \
                            float decay, int causal),                                        \
      (out, v, ld, off, pos, B, C, max_len, kind, decay, causal))                            \
    X(void, fixed_backward, (float *dv, const float *dout, int ld, const int *off,           \
                             const int *pos, int B, int C, int max_len, int kind,            \
                             float decay, int causal),                                       \
      (dv, dout, ld, off, pos, B, C, max_len, kind, decay, causal))                          \
    X(void, mixing_forward, (float *out, float *cache, const float *x, int ld,               \
                             const float *W1, const float *b1, const float *W2,              \
                             const float *b2, const int *off, const int *pos, int B, int C,  \
                             int max_len, int causal),                                       \
      (out, cache, x, ld, W1, b1, W2, b2, off, pos, B, C, max_len, causal))                  \
    X(void, mixing_backward, (float *dx, float *dW1, float *db1, float *dW2, float *db2,     \
                              float *scratch, const float *dout, const float *x,             \
                              const float *cache, const float *W1, const float *W2, int ld,  \
                              const int *off, const int *pos, int B, int C, int max_len,     \
                              int causal),                                                   \
      (dx, dW1, db1, dW2, db2, scratch, dout, x, cache, W1, W2, ld, off, pos, B, C, max_len, \
       causal))                                                                              \
    /* losses (k_loss.cu): the mean loss over *count entries */                              \
    X(double, ce_full, (float *dh, float *dE, float *scratch, const float *h, const float *E, \
                        const int *rows, const int *targets, int n, int C, int V1, int chunk, \
                        float dloss, int *count),                                            \
      (dh, dE, scratch, h, E, rows, targets, n, C, V1, chunk, dloss, count))                 \
    X(double, ce_full_bias, (float *dh, float *dE, float *dbias, float *scratch,             \
                             const float *h, const float *E, const float *bias,              \
                             const int *rows, const int *targets, int n, int C, int V1,      \
                             int chunk, float dloss, int *count),                            \
      (dh, dE, dbias, scratch, h, E, bias, rows, targets, n, C, V1, chunk, dloss, count))    \
    X(double, bce_sampled, (float *dh, float *dE, const float *h, const float *E,            \
                            const int *rows, const int *pos, const int *neg, int n, int K,   \
                            int C, float dloss, int *count),                                 \
      (dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count))                                 \
    /* the sampled softmax with log-Q and gBCE (k_sampled.cu): each entry its own negatives, \
       or one set shared by the n entries (scratch and chunk as the CPU's); lq a host array; \
       ce_sampled: Blin's (10b), no correction, hits kept */                                 \
    X(double, ce_sampled, (float *dh, float *dE, const float *h, const float *E,             \
                           const int *rows, const int *pos, const int *neg, int n, int K,    \
                           int C, float dloss, int *count),                                  \
      (dh, dE, h, E, rows, pos, neg, n, K, C, dloss, count))                                 \
    X(double, ce_sampled_logq, (float *dh, float *dE, float *dbias, const float *h,          \
                                const float *E, const float *bias, const int *rows,          \
                                const int *pos, const int *neg, const float *lq, int n,      \
                                int K, int C, float dloss, int *count),                      \
      (dh, dE, dbias, h, E, bias, rows, pos, neg, lq, n, K, C, dloss, count))                \
    X(double, gbce_sampled, (float *dh, float *dE, float *dbias, const float *h,             \
                             const float *E, const float *bias, const int *rows,             \
                             const int *pos, const int *neg, int n, int K, int C, float beta, \
                             float dloss, int *count),                                       \
      (dh, dE, dbias, h, E, bias, rows, pos, neg, n, K, C, beta, dloss, count))              \
    X(double, ce_sampled_shared, (float *dh, float *dE, float *dbias, float *scratch,        \
                                  const float *h, const float *E, const float *bias,         \
                                  const int *rows, const int *pos, const int *neg,           \
                                  const float *lq, int n, int K, int C, int chunk,           \
                                  float dloss, int *count),                                  \
      (dh, dE, dbias, scratch, h, E, bias, rows, pos, neg, lq, n, K, C, chunk, dloss, count)) \
    X(double, gbce_sampled_shared, (float *dh, float *dE, float *dbias, float *scratch,      \
                                    const float *h, const float *E, const float *bias,       \
                                    const int *rows, const int *pos, const int *neg, int n,  \
                                    int K, int C, int chunk, float beta, float dloss,        \
                                    int *count),                                             \
      (dh, dE, dbias, scratch, h, E, bias, rows, pos, neg, n, K, C, chunk, beta, dloss, count)) \
    /* the optimiser (k_adam.cu) */                                                          \
    X(void, adam_update, (float *param, const float *grad, float *m, float *v, size_t n,     \
                          double lr, double beta1, double beta2, double eps,                 \
                          double weight_decay, int decoupled, long t),                       \
      (param, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, decoupled, t))             \
    X(void, adam_rows, (float *param, const float *grad, float *m, float *v, size_t width,   \
                        const uint32_t *rows, size_t n, double lr, double beta1, double beta2, \
                        double eps, double weight_decay, int decoupled, long t),             \
      (param, grad, m, v, width, rows, n, lr, beta1, beta2, eps, weight_decay, decoupled, t)) \
    X(void, adam_runs, (float *param, const float *grad, float *m, float *v,                 \
                        const size_t *offs, const size_t *lens, const double *cfgs, int n,   \
                        long t),                                                             \
      (param, grad, m, v, offs, lens, cfgs, n, t))                                           \
    X(double, grad_norm, (const float *g, size_t n), (g, n))                                 \
    X(double, grad_clip, (float *g, size_t n, double max_norm), (g, n, max_norm))            \
    /* scoring's top-K selection (k_topk.cu; ok, excl, eoff host arrays it uploads) */         \
    X(void, topk_rows, (int *items, float *top, int *k, int *nan, const float *sc, int B,     \
                        int V1, int K, const unsigned char *ok, const int *excl,             \
                        const int *eoff),                                                    \
      (items, top, k, nan, sc, B, V1, K, ok, excl, eoff))                                    \
    /* scoring's ranks of the targets (k_rank.cu; tgt, ok, excl, eoff host arrays) */       \
    X(void, rank_rows, (int *cnt, const float *sc, int B, int V1, const int *tgt,            \
                        const unsigned char *ok, const int *excl, const int *eoff),          \
      (cnt, sc, B, V1, tgt, ok, excl, eoff))                                                 \
    X(void, rank_lists, (int *cnt, const float *sc, int B, int V1, const int *tgt,           \
                         const int *cand, const int *coff),                                  \
      (cnt, sc, B, V1, tgt, cand, coff))                                                     \
    /* data-parallel ranks (k_nccl.cu): NCCL's id, communicator, in-place sum */            \
    X(int, nccl_id, (void *id, size_t n, sq_err *e), (id, n, e))                             \
    X(int, nccl_open, (const void *id, size_t n, int ranks, int rank, sq_err *e),           \
      (id, n, ranks, rank, e))                                                               \
    X(int, nccl_sum, (void *buf, size_t count, int dtype, sq_err *e), (buf, count, dtype, e))

/* nccl_sum's element types */
enum { SQ_NCCL_F32 = 0, SQ_NCCL_F64 = 1, SQ_NCCL_U8 = 2 };

/* The list's fingerprint, taken by the loader from its own build and from
 * the object's: the stringised list, hashed (FNV-1a) at start-up. */
#define SQ_GPU_STR2_(...) #__VA_ARGS__
#define SQ_GPU_STR_(x) SQ_GPU_STR2_(x)
#define SQ_GPU_OPS_TEXT SQ_GPU_STR_(SQ_GPU_OP_LIST(SQ_GPU_TEXT_X))
#define SQ_GPU_TEXT_X(ret, name, params, args) ret name params;

static inline uint64_t sq_gpu_ops_hash(void)
{
    const char *s = SQ_GPU_OPS_TEXT;
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

typedef struct sq_gpu_be sq_gpu_be;

typedef struct sq_gpu_ops {
    uint64_t hash;     /* sq_gpu_ops_hash() of the object's build */
    size_t err_size;   /* sizeof(sq_err) of the object's build */
    int (*probe)(char *name, size_t n);
    int (*open)(sq_gpu_be **b, int device, sq_err *e);
    void (*close)(sq_gpu_be *b);
    int (*alloc)(sq_gpu_be *b, void **ptr, size_t bytes, sq_err *e);
    void (*free)(sq_gpu_be *b, void *ptr);
#define SQ_GPU_FIELD_X(ret, name, params, args) ret (*name)(sq_gpu_be *be, SQ_GPU_STRIP params);
    SQ_GPU_OP_LIST(SQ_GPU_FIELD_X)
#undef SQ_GPU_FIELD_X
} sq_gpu_ops;

/* The type of the exported function. */
typedef const sq_gpu_ops *(*sq_gpu_ops_fn)(void);

#ifdef __cplusplus
}
#endif
#endif
