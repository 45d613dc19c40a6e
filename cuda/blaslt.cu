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
    int M, N, K, prec, ok; // ok: an algorithm; 0: none, the caller's path
    cublasLtMatmulAlgo_t algo;
};

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

// The shape's entry: kept, or asked of the heuristic now (lay: W's, inp's
// and out's layouts).
static const struct lt_shape *lt_find(struct be_lt *l, cublasLtMatmulDesc_t d, int M, int N,
                                      int K, int prec, cublasLtMatrixLayout_t lay[3])
{
    for (int i = 0; i < l->n_shape; i++) {
        const struct lt_shape *s = &l->shape[i];
        if (s->M == M && s->N == N && s->K == K && s->prec == prec)
            return s;
    }
    struct lt_shape *s;
    if (l->n_shape < LT_CACHE) {
        s = &l->shape[l->n_shape++];
    } else { // full: the shapes replaced in turn (the heuristic gives a shape the same again)
        s = &l->shape[l->next];
        l->next = (l->next + 1) % LT_CACHE;
    }
    memset(s, 0, sizeof *s);
    s->M = M;
    s->N = N;
    s->K = K;
    s->prec = prec;
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    memset(&r, 0, sizeof r);
    if (cublasLtMatmulAlgoGetHeuristic(l->h, d, lay[0], lay[1], lay[2], lay[2], l->pref, 1, &r,
                                       &got) == CUBLAS_STATUS_SUCCESS &&
        got > 0 && r.state == CUBLAS_STATUS_SUCCESS) {
        s->ok = 1;
        s->algo = r.algo;
    }
    return s;
}

int be_gemm_bias(sq_gpu_be *b, int M, int N, int K, const float *A, const float *W,
                 const float *bias, float *C)
{
    struct be_lt *l = b->lt;
    if (!l || b->invariant || b->prec < 0 || b->prec > 2 || M <= 0 || N <= 0 || K <= 0)
        return 1;
    cublasLtMatmulDesc_t d = lt_desc(l, b->prec);
    if (!d)
        return 1;
    cublasLtMatrixLayout_t lay[3] = {NULL, NULL, NULL};
    int rc = 1;
    if (cublasLtMatrixLayoutCreate(&lay[0], CUDA_R_32F, (uint64_t)K, (uint64_t)N, K) ||
        cublasLtMatrixLayoutCreate(&lay[1], CUDA_R_32F, (uint64_t)K, (uint64_t)M, K) ||
        cublasLtMatrixLayoutCreate(&lay[2], CUDA_R_32F, (uint64_t)N, (uint64_t)M, N))
        goto done;
    {
        const struct lt_shape *s = lt_find(l, d, M, N, K, b->prec, lay);
        if (!s->ok)
            goto done;
        rc = 0;
        if (b->gmode != BE_G_EAGER) {
            int dims[4] = {M, N, K, b->prec};
            uintptr_t ptr[4] = {be_sig_ptr(b, A), be_sig_ptr(b, W), be_sig_ptr(b, bias),
                                be_sig_ptr(b, C)};
            unsigned char sig[sizeof dims + sizeof ptr];
            memcpy(sig, dims, sizeof dims);
            memcpy(sig + sizeof dims, ptr, sizeof ptr);
            if (be_sig_node(b, "gemm_bias", sig, sizeof sig))
                goto done;
        }
        float one = 1.0f, zero = 0.0f;
        be_note_blas(b, cublasLtMatmulDescSetAttribute(d, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias), "gemm_bias");
        be_note_blas(b, cublasLtMatmul(l->h, d, &one, W, lay[0], A, lay[1], &zero, C, lay[2], C,
                                       lay[2], &s->algo, b->blas_ws, b->blas_ws_bytes,
                                       b->stream), "cublasLtMatmul (gemm_bias)");
    }
done:
    for (int i = 0; i < 3; i++)
        if (lay[i])
            cublasLtMatrixLayoutDestroy(lay[i]);
    return rc;
}
