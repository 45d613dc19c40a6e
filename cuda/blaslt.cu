// blaslt.cu - a linear layer's GEMM with its bias added in cuBLASLt's
// epilogue (be_linear_forward): out[T, OC] = inp[T, C] W[OC, C]^T + b in
// one pass over out. cuBLAS's own GEMM has no bias: the layer wrote b into
// every row of out (a pass) and read it back as beta C (another), 2 T OC
// floats of traffic and a launch for each of SASRec's six biased
// projections a layer (ml-1m-part at batch 2048: ~3 GB a step).
//
// Column-major, as cuBLAS: out^T [OC, T] = W (stored [C, OC], transposed)
// times inp^T (stored [C, T]), and the bias is a value a row of out^T, as
// CUBLASLT_EPILOGUE_BIAS adds it. The compute type follows --precision
// (fp32: CUBLAS_COMPUTE_32F, no tensor cores; tf32: FAST_TF32; bf16:
// FAST_16BF). The algorithm is cuBLASLt's first by its heuristic, kept per
// shape (a few shapes a model, the same every step under CUDA graphs), so
// a shape gets the same algorithm, and the same bits, every time; a shape
// with none (or scoring's batch-invariant mode, k_gemm.cu) is not done
// here and the caller adds the bias itself, as before.
#include "common.cuh"

#define LT_CACHE 64 // shapes kept (a SASRec step has 3; eager batches vary T)

struct lt_shape {
    int key[4];        // M, N, K, the precision
    uint32_t align[4]; // W's, the input's, the output's and the bias's (lt_align)
    int ok;            // an algorithm; 0: none, the caller's path
    cublasLtMatmulAlgo_t algo;
    cublasLtMatrixLayout_t lay[3]; // W's, the input's and the output's, made once
};

// Frees a kept shape's layouts (its replacement, be_lt_close).
static void lt_forget(struct lt_shape *s)
{
    for (int i = 0; i < 3; i++)
        if (s->lay[i])
            cublasLtMatrixLayoutDestroy(s->lay[i]);
    memset(s, 0, sizeof *s);
}

struct be_lt {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t desc[3]; // a compute type a precision, made on first use
    cublasLtMatmulPreference_t pref;
    struct lt_shape shape[LT_CACHE];
    int n_shape, next; // kept, and the one a new shape replaces when full
};

int be_lt_open(sq_gpu_be *b, sq_err *e)
{
    struct be_lt *l = (struct be_lt *)calloc(1, sizeof *l);
    if (!l)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    b->lt = l;
    size_t ws = b->blas_ws_bytes;
    if (cublasLtCreate(&l->h) != CUBLAS_STATUS_SUCCESS) {
        l->h = NULL;
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLASLt: cublasLtCreate failed");
    }
    if (cublasLtMatmulPreferenceCreate(&l->pref) != CUBLAS_STATUS_SUCCESS) {
        l->pref = NULL;
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLASLt: cannot make a search preference");
    }
    if (cublasLtMatmulPreferenceSetAttribute(l->pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                             &ws, sizeof ws) != CUBLAS_STATUS_SUCCESS)
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLASLt: cannot set the workspace's size");
    return 0;
}

void be_lt_close(sq_gpu_be *b)
{
    struct be_lt *l = b->lt;
    if (!l)
        return;
    for (int i = 0; i < l->n_shape; i++)
        lt_forget(&l->shape[i]);
    for (int i = 0; i < 3; i++)
        if (l->desc[i])
            cublasLtMatmulDescDestroy(l->desc[i]);
    if (l->pref)
        cublasLtMatmulPreferenceDestroy(l->pref);
    if (l->h)
        cublasLtDestroy(l->h);
    free(l);
    b->lt = NULL;
}

// The precision's descriptor (transposed W, the bias epilogue), made on
// first use; NULL when cuBLASLt refuses it.
static cublasLtMatmulDesc_t lt_desc(struct be_lt *l, int prec)
{
    if (l->desc[prec])
        return l->desc[prec];
    cublasComputeType_t ct = prec == 1   ? CUBLAS_COMPUTE_32F_FAST_TF32
                             : prec == 2 ? CUBLAS_COMPUTE_32F_FAST_16BF
                                         : CUBLAS_COMPUTE_32F;
    cublasLtMatmulDesc_t d;
    int32_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N, epi = CUBLASLT_EPILOGUE_BIAS;
    if (cublasLtMatmulDescCreate(&d, ct, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS)
        return NULL;
    if (cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) ||
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) ||
        cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi)) {
        cublasLtMatmulDescDestroy(d);
        return NULL;
    }
    l->desc[prec] = d;
    return d;
}

// The largest power of two (at most 256) that divides p's address: the
// alignment cuBLASLt's heuristic is told (its default, 256, would offer
// algorithms that a row of a layer's buffer does not satisfy).
static uint32_t lt_align(const void *p)
{
    uintptr_t u = (uintptr_t)p;
    uint32_t a = 1;
    while (a < 256 && !(u & a))
        a <<= 1;
    return a;
}

// The shape's entry (dims, precision and the four operands' alignments):
// kept, or made now (its layouts, and the heuristic's algorithm: none when
// either fails).
static struct lt_shape *lt_find(struct be_lt *l, cublasLtMatmulDesc_t d, const int key[4],
                                const uint32_t al[4])
{
    for (int i = 0; i < l->n_shape; i++) {
        struct lt_shape *s = &l->shape[i];
        if (!memcmp(s->key, key, sizeof s->key) && !memcmp(s->align, al, sizeof s->align))
            return s;
    }
    struct lt_shape *s;
    if (l->n_shape < LT_CACHE) {
        s = &l->shape[l->n_shape++];
    } else { // full: the shapes replaced in turn (the heuristic gives a shape the same again)
        s = &l->shape[l->next];
        l->next = (l->next + 1) % LT_CACHE;
    }
    lt_forget(s);
    memcpy(s->key, key, sizeof s->key);
    memcpy(s->align, al, sizeof s->align);
    // column-major: W stored [K, N] (transposed by the descriptor), the
    // input [K, M], the output [N, M]
    int M = key[0], N = key[1], K = key[2];
    if (cublasLtMatrixLayoutCreate(&s->lay[0], CUDA_R_32F, (uint64_t)K, (uint64_t)N, K) ||
        cublasLtMatrixLayoutCreate(&s->lay[1], CUDA_R_32F, (uint64_t)K, (uint64_t)M, K) ||
        cublasLtMatrixLayoutCreate(&s->lay[2], CUDA_R_32F, (uint64_t)N, (uint64_t)M, N))
        return s;
    // cuBLAS's A is W, its B the input, C and D the output
    static const cublasLtMatmulPreferenceAttributes_t which[4] = {
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
        CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; i++)
        if (cublasLtMatmulPreferenceSetAttribute(l->pref, which[i], &al[i < 3 ? i : 2],
                                                 sizeof al[0]))
            return s;
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    memset(&r, 0, sizeof r);
    if (cublasLtMatmulAlgoGetHeuristic(l->h, d, s->lay[0], s->lay[1], s->lay[2], s->lay[2],
                                       l->pref, 1, &r, &got) == CUBLAS_STATUS_SUCCESS &&
        got > 0 && r.state == CUBLAS_STATUS_SUCCESS) {
        s->ok = 1;
        s->algo = r.algo;
    }
    return s;
}

// A graph step's node of the GEMM (graph.cu): 1 when it must not be queued
static int lt_sig(sq_gpu_be *b, int M, int N, int K, const float *A, const float *W,
                  const float *bias, const float *C)
{
    int dims[4] = {M, N, K, b->prec};
    uintptr_t ptr[4] = {be_sig_ptr(b, A), be_sig_ptr(b, W), be_sig_ptr(b, bias),
                        be_sig_ptr(b, C)};
    unsigned char sig[sizeof dims + sizeof ptr];
    memcpy(sig, dims, sizeof dims);
    memcpy(sig + sizeof dims, ptr, sizeof ptr);
    return be_sig_node(b, "gemm_bias", sig, sizeof sig);
}

// Queues the GEMM with the shape's algorithm: 0; or 1 when cuBLASLt
// refuses it at the call (CUBLAS_STATUS_NOT_SUPPORTED: the shape is then
// marked as having none). Not in a replay's host pass, which has decided.
static int lt_run(sq_gpu_be *b, cublasLtMatmulDesc_t d, struct lt_shape *s, const float *A,
                  const float *W, const float *bias, float *C)
{
    cublasLtMatrixLayout_t *lay = s->lay;
    struct be_lt *l = b->lt;
    float one = 1.0f, zero = 0.0f;
    cublasStatus_t st = cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias);
    if (st == CUBLAS_STATUS_SUCCESS)
        st = cublasLtMatmul(l->h, d, &one, W, lay[0], A, lay[1], &zero, C, lay[2], C, lay[2],
                            &s->algo, b->blas_ws, b->blas_ws_bytes, b->stream);
    // refused before anything was queued: eagerly, or in the step that
    // records a graph's key (its log then holds the old path, as will its
    // capture), the caller's path; in a capture the log says otherwise
    if (st == CUBLAS_STATUS_NOT_SUPPORTED && b->gmode != BE_G_CAPTURE) {
        s->ok = 0;
        return 1;
    }
    be_note_blas(b, st, "cublasLtMatmul (a linear layer with its bias)");
    return 0;
}

int be_gemm_bias(sq_gpu_be *b, int M, int N, int K, const float *A, const float *W,
                 const float *bias, float *C)
{
    struct be_lt *l = b->lt;
    if (!l || b->invariant || (b->plain & BE_PLAIN_LT) || b->prec < 0 || b->prec > 2 || M <= 0 ||
        N <= 0 || K <= 0)
        return 1;
    cublasLtMatmulDesc_t d = lt_desc(l, b->prec);
    if (!d)
        return 1;
    int key[4] = {M, N, K, b->prec};
    uint32_t al[4] = {lt_align(W), lt_align(A), lt_align(C), lt_align(bias)};
    struct lt_shape *s = lt_find(l, d, key, al);
    if (!s->ok)
        return 1;
    if (b->gmode == BE_G_PLAN) { // a replay's host pass: checked, not queued
        lt_sig(b, M, N, K, A, W, bias, C);
        return 0;
    }
    int rc = lt_run(b, d, s, A, W, bias, C);
    if (!rc && b->gmode != BE_G_EAGER) // recorded, or compared with the record
        lt_sig(b, M, N, K, A, W, bias, C);
    return rc;
}
