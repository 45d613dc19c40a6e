// gpu.cu - the backend's context: device, stream, cuBLAS with a fixed
// workspace, checked allocations, the explicit host<->device staging, the
// mirror of the step's integer arrays, the sticky error, the GEMM, and the
// table of the one op list (gpu_ops.h).
//
// Built into libseqrec-cuda.so, which the programs dlopen on demand
// (lib/ops/gpu_load.c). Only sq_cuda_backend is exported: everything here
// is hidden, and sq_fail is the object's own hidden copy of
// lib/util/err.c (cuda.mk), so no call binds to a symbol of the program.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common.cuh"

#include <time.h>

#define BE_BLAS_WS (32u << 20) // cuBLAS's workspace: 32 MiB, fixed for the run

static int fail_code(cudaError_t st)
{
    return st == cudaErrorMemoryAllocation ? SQ_EX_OSERR : SQ_EX_SOFTWARE;
}

int be_note(sq_gpu_be *b, cudaError_t st, const char *what)
{
    if (st == cudaSuccess)
        return 0;
    if (!b->failed) {
        b->failed = 1;
        sq_fail(&b->err, fail_code(st), "CUDA: %s: %s", what, cudaGetErrorString(st));
    }
    return 1;
}

int be_note_blas(sq_gpu_be *b, cublasStatus_t st, const char *what)
{
    if (st == CUBLAS_STATUS_SUCCESS)
        return 0;
    if (!b->failed) {
        b->failed = 1;
        sq_fail(&b->err, st == CUBLAS_STATUS_ALLOC_FAILED ? SQ_EX_OSERR : SQ_EX_SOFTWARE,
                "cuBLAS: %s failed (status %d)", what, (int)st);
    }
    return 1;
}

int be_wait(sq_gpu_be *b, cudaEvent_t ev, const char *what)
{
    if (!be_nccl_active(b))
        return be_note(b, ev ? cudaEventSynchronize(ev) : cudaStreamSynchronize(b->stream), what);
    struct timespec t0, now, nap = {0, 50000}; // polled every 50 us
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        cudaError_t st = ev ? cudaEventQuery(ev) : cudaStreamQuery(b->stream);
        if (st != cudaErrorNotReady)
            return be_note(b, st, what);
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (be_nccl_watch(b, (double)(now.tv_sec - t0.tv_sec) + 1e-9 * (now.tv_nsec - t0.tv_nsec),
                          what))
            return 1;
        nanosleep(&nap, NULL);
    }
}

// The sticky error into e (once), or 0.
static int sticky(sq_gpu_be *b, sq_err *e)
{
    return b->failed ? sq_fail(e, b->err.code, "%s", b->err.msg) : 0;
}

// The staged range holding p, or NULL (the newest first: be_stage_add may
// have staged a host array again this step).
static const struct be_range *range_of(const sq_gpu_be *b, const void *p)
{
    const char *c = (const char *)p;
    for (int i = b->n_range - 1; i >= 0; i--)
        if (c >= b->range[i].host && c < b->range[i].host + b->range[i].bytes)
            return &b->range[i];
    return NULL;
}

const int *be_ints(const sq_gpu_be *b, const int *p)
{
    const struct be_range *r = range_of(b, p);
    return r ? (const int *)(r->dev + ((const char *)p - r->host)) : p;
}

const int *be_host_ints(const sq_gpu_be *b, const int *p)
{
    return range_of(b, p) ? p : NULL;
}

struct be_retired {
    char *pinned, *dev;
    struct be_retired *next;
};

int be_grow_pair(sq_gpu_be *b, char **pinned, char **dev, size_t *bytes, size_t keep,
                 size_t cap)
{
    char *p = NULL, *d = NULL;
    if (be_wait(b, NULL, "upload buffer") ||
        be_note(b, cudaHostAlloc((void **)&p, cap, cudaHostAllocDefault), "upload buffer") ||
        be_note(b, cudaMalloc((void **)&d, cap), "upload buffer")) {
        cudaFreeHost(p);
        return -1;
    }
    if (keep && (be_note(b, cudaMemcpy(d, *dev, keep, cudaMemcpyDeviceToDevice),
                         "upload buffer"))) {
        cudaFreeHost(p);
        cudaFree(d);
        return -1;
    }
    if (keep)
        memcpy(p, *pinned, keep);
    if (*dev || *pinned) { // retired (common.cuh), not freed
        struct be_retired *r = (struct be_retired *)malloc(sizeof *r);
        if (!r) {
            be_note(b, cudaErrorMemoryAllocation, "upload buffer");
            cudaFreeHost(p);
            cudaFree(d);
            return -1;
        }
        *r = {*pinned, *dev, b->retired};
        b->retired = r;
    }
    for (int i = 0; i < b->n_range; i++) // the arrays staged into it move too
        if (*dev && b->range[i].dev >= *dev && b->range[i].dev < *dev + *bytes)
            b->range[i].dev = d + (b->range[i].dev - *dev);
    *pinned = p;
    *dev = d;
    *bytes = cap;
    return 0;
}

// One pinned buffer and one device buffer, filled from the start after
// each be_stage (the step's first upload), so a step's op uploads never
// overwrite each other; growing (the first steps only) keeps what the step
// uploaded so far, which later ops may still read (be_stage_add's arrays).
char *be_op_space(sq_gpu_be *b, size_t bytes, char **dev)
{
    char *h;
    if (b->gmode != BE_G_EAGER) // a graph's step: the slot's region (graph.cu)
        return be_graph_take(b, bytes, &h, dev) ? NULL : h;
    size_t at = b->op_used, need = at + ((bytes + 255) & ~(size_t)255);
    if (need > b->op_bytes) {
        if (be_grow_pair(b, &b->op_pinned, &b->op_dev, &b->op_bytes, at,
                         need < 65536 ? 65536 : 2 * need))
            return NULL;
    } else if (at == 0) {
        // the first upload since be_stage: the previous step's copies out
        // of the pinned buffer must be done before it is rewritten
        if (be_wait(b, b->op_done, "op upload"))
            return NULL;
    }
    b->op_used = need;
    *dev = b->op_dev + at;
    return b->op_pinned + at;
}

int be_op_send(sq_gpu_be *b, const char *host, char *dev, size_t bytes)
{
    if (b->gmode != BE_G_EAGER) { // a failure is the sticky error's, as a launch's
        be_memcpy_async(b, dev, host, bytes, cudaMemcpyHostToDevice, "op upload");
        return 0;
    }
    return be_note(b, cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, b->stream),
                   "op upload") ||
           be_note(b, cudaEventRecord(b->op_done, b->stream), "op upload");
}

void *be_op_upload(sq_gpu_be *b, const void *host, size_t bytes)
{
    char *dev, *h = be_op_space(b, bytes, &dev);
    if (!h)
        return NULL;
    memcpy(h, host, bytes);
    return be_op_send(b, h, dev, bytes) ? NULL : dev;
}

const int *be_seg_tiles(sq_gpu_be *b, const int *h, int B, int rows, int *n, const char *what)
{
    size_t most = ((size_t)h[B] + (size_t)(rows - 1) * (size_t)B) / (size_t)rows;
    int *t = (int *)malloc(most * sizeof *t);
    if (!t) {
        be_note(b, cudaErrorMemoryAllocation, what);
        return NULL;
    }
    size_t i = 0;
    for (int s = 0; s < B; s++)
        for (int r = h[s]; r < h[s + 1]; r += rows)
            t[i++] = r;
    while (i < most)
        t[i++] = -1;
    const int *d = (const int *)be_op_upload(b, t, most * sizeof *t);
    free(t);
    *n = (int)most;
    return d;
}

static int be_probe(char *name, size_t n)
{
    int count = 0;
    cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess || count == 0) {
        if (n)
            snprintf(name, n, "no CUDA device (%s)",
                     st != cudaSuccess ? cudaGetErrorString(st) : "none found");
        return 0;
    }
    cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) {
        if (n)
            snprintf(name, n, "cudaGetDeviceProperties failed");
        return 0;
    }
    if (n)
        snprintf(name, n, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                 p.totalGlobalMem / 1073741824.0);
    return 1;
}

static void be_close(sq_gpu_be *b)
{
    if (!b)
        return;
    if (b->stream) // a dead rank's peers' stream never drains: watched
        be_wait(b, NULL, "the last kernels");
    be_prof_close(b);
    be_nccl_close(b);
    be_cache_close(b);
    be_graph_close(b);
    while (b->retired) {
        struct be_retired *r = b->retired;
        b->retired = r->next;
        cudaFreeHost(r->pinned);
        cudaFree(r->dev);
        free(r);
    }
    be_lt_close(b);
    if (b->blas)
        cublasDestroy(b->blas);
    cudaFree(b->blas_ws);
    cudaFree(b->stage_dev);
    cudaFree(b->op_dev);
    cudaFreeHost(b->op_pinned);
    if (b->op_done)
        cudaEventDestroy(b->op_done);
    cudaFree(b->red);
    cudaFree(b->vals);
    cudaFree(b->gate);
    cudaFree(b->sum_ws);
    cudaFree(b->sum_cnt);
    free(b->scat_cnt);
    cudaFreeHost(b->vals_pin);
    for (int i = 0; i < 2; i++)
        if (b->vals_ev[i])
            cudaEventDestroy(b->vals_ev[i]);
    cudaFreeHost(b->red_host);
    for (int i = 0; i < BE_STAGE_BUFS; i++) {
        cudaFreeHost(b->pinned[i]);
        if (b->pinned_done[i])
            cudaEventDestroy(b->pinned_done[i]);
    }
    if (b->stream)
        cudaStreamDestroy(b->stream);
    free(b);
}

#define OPEN_TRY(call)                                                                  \
    do {                                                                                \
        cudaError_t st_ = (call);                                                       \
        if (st_ != cudaSuccess) {                                                       \
            be_close(c);                                                                \
            return sq_fail(e, fail_code(st_), "CUDA: %s: %s", #call,                     \
                           cudaGetErrorString(st_));                                    \
        }                                                                               \
    } while (0)

// SEQREC_GPU_PLAIN: a comma-separated list of "lt", "bf16-logits", "cache"
// or "all" (BE_PLAIN_*); 0, or a usage error naming the word it does not know
static int plain_words(const char *v, int *mask, sq_err *e)
{
    static const struct {
        const char *word;
        int bit;
    } words[] = {{"lt", BE_PLAIN_LT}, {"bf16-logits", BE_PLAIN_BF16_LOGITS},
                 {"cache", BE_PLAIN_CACHE}, {"all", BE_PLAIN_ALL}};
    *mask = 0;
    while (v && *v) {
        size_t n = strcspn(v, ",");
        int bit = 0;
        for (size_t i = 0; i < sizeof words / sizeof words[0]; i++)
            if (strlen(words[i].word) == n && !strncmp(v, words[i].word, n))
                bit = words[i].bit;
        if (!bit && n)
            return sq_fail(e, SQ_EX_USAGE, "SEQREC_GPU_PLAIN: unknown path '%.*s' (give lt, "
                           "bf16-logits, cache or all, separated by commas)", (int)n, v);
        *mask |= bit;
        v += n + (v[n] == ',');
    }
    return 0;
}

static int be_open(sq_gpu_be **b, int device, sq_err *e)
{
    *b = NULL;
    int plain, rc = plain_words(getenv("SEQREC_GPU_PLAIN"), &plain, e);
    if (rc)
        return rc;
    int count = 0;
    cudaError_t st = cudaGetDeviceCount(&count);
    if (st != cudaSuccess || count == 0)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "no CUDA device (%s)",
                       st != cudaSuccess ? cudaGetErrorString(st) : "none found");
    if (device < 0 || device >= count)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "no CUDA device %d (this machine has %d: 0..%d)",
                       device, count, count - 1);
    sq_gpu_be *c = (sq_gpu_be *)calloc(1, sizeof *c);
    if (!c)
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    c->device = device;
    c->plain = plain;
    OPEN_TRY(cudaSetDevice(device));
    cudaDeviceProp p;
    OPEN_TRY(cudaGetDeviceProperties(&p, device));
    c->sms = p.multiProcessorCount > 0 ? p.multiProcessorCount : 1;
    c->prec = 1; // tf32, as the math mode below
    OPEN_TRY(cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking));
    OPEN_TRY(cudaMalloc(&c->blas_ws, BE_BLAS_WS));
    c->blas_ws_bytes = BE_BLAS_WS;
    OPEN_TRY(cudaMalloc((void **)&c->red, BE_RED_SLOTS * sizeof(double)));
    OPEN_TRY(cudaMalloc((void **)&c->vals, BE_VALS * sizeof(double)));
    OPEN_TRY(cudaMalloc((void **)&c->gate, sizeof(int)));
    OPEN_TRY(cudaMalloc((void **)&c->sum_ws, BE_SUM_WS * sizeof(float)));
    OPEN_TRY(cudaMalloc((void **)&c->sum_cnt, BE_SUM_CNT * sizeof(unsigned)));
    OPEN_TRY(cudaMemsetAsync(c->sum_cnt, 0, BE_SUM_CNT * sizeof(unsigned), c->stream));
    OPEN_TRY(cudaHostAlloc((void **)&c->vals_pin, 2 * BE_VALS * sizeof(double),
                           cudaHostAllocDefault));
    for (int i = 0; i < 2; i++)
        OPEN_TRY(cudaEventCreateWithFlags(&c->vals_ev[i], cudaEventDisableTiming));
    OPEN_TRY(cudaHostAlloc((void **)&c->red_host, BE_RED_SLOTS * sizeof(double),
                           cudaHostAllocDefault));
    for (int i = 0; i < BE_STAGE_BUFS; i++)
        OPEN_TRY(cudaEventCreateWithFlags(&c->pinned_done[i], cudaEventDisableTiming));
    OPEN_TRY(cudaEventCreateWithFlags(&c->op_done, cudaEventDisableTiming));
    if (cublasCreate(&c->blas) != CUBLAS_STATUS_SUCCESS) {
        c->blas = NULL;
        be_close(c);
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLAS: cublasCreate failed");
    }
    // tf32 by default (--precision); a fixed workspace on the context's
    // stream: the same algorithms, so the same bits, on every run
    if (cublasSetStream(c->blas, c->stream) != CUBLAS_STATUS_SUCCESS ||
        cublasSetWorkspace(c->blas, c->blas_ws, c->blas_ws_bytes) != CUBLAS_STATUS_SUCCESS ||
        cublasSetMathMode(c->blas, CUBLAS_TF32_TENSOR_OP_MATH) != CUBLAS_STATUS_SUCCESS) {
        be_close(c);
        return sq_fail(e, SQ_EX_SOFTWARE, "cuBLAS: cannot set the stream, workspace or "
                       "math mode");
    }
    if (be_cache_open(c)) {
        be_close(c);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    rc = be_lt_open(c, e);
    if (!rc)
        rc = be_prof_open(c, e);
    if (rc) {
        be_close(c);
        return rc;
    }
    *b = c;
    return 0;
}

int be_memset0(sq_gpu_be *b, void *p, size_t bytes, sq_err *e)
{
    if (bytes)
        be_memset_async(b, p, 0, bytes, "cudaMemsetAsync");
    return sticky(b, e);
}

// Staging (initialisation, saving, checkpoints, validation): explicit,
// ordered with the stream, and waited for.
int be_upload(sq_gpu_be *b, void *dst, const void *src, size_t bytes, sq_err *e)
{
    if (bytes && !be_note(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                             b->stream), "upload"))
        be_wait(b, NULL, "upload");
    return sticky(b, e);
}

int be_download(sq_gpu_be *b, void *dst, const void *src, size_t bytes, sq_err *e)
{
    if (bytes && !be_note(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost,
                                             b->stream), "download"))
        be_wait(b, NULL, "download");
    return sticky(b, e);
}

// Grows a pinned buffer and the device mirror to hold `need` bytes.
static int stage_room(sq_gpu_be *b, size_t need)
{
    if (need > b->pinned_bytes) {
        size_t cap = need < 65536 ? 65536 : need + need / 2;
        for (int i = 0; i < BE_STAGE_BUFS; i++) {
            if (b->pinned[i]) {
                be_wait(b, b->pinned_done[i], "stage");
                cudaFreeHost(b->pinned[i]);
                b->pinned[i] = NULL;
            }
            if (be_note(b, cudaHostAlloc((void **)&b->pinned[i], cap, cudaHostAllocDefault),
                        "pinned staging buffer"))
                return -1;
        }
        b->pinned_bytes = cap;
    }
    if (need > b->stage_dev_bytes) {
        size_t cap = need < 65536 ? 65536 : need + need / 2;
        if (b->stage_dev) {
            be_wait(b, NULL, "stage");
            cudaFree(b->stage_dev);
            b->stage_dev = NULL;
        }
        if (be_note(b, cudaMalloc((void **)&b->stage_dev, cap), "staging mirror"))
            return -1;
        b->stage_dev_bytes = cap;
    }
    return 0;
}

// A graph's step stages through the slot's region (graph.cu): the same
// offsets every step of a key, so the captured copies and kernels find
// them.
static int stage_graph(sq_gpu_be *b, const void *const *host, const size_t *bytes, int n,
                       sq_err *e)
{
    for (int i = 0; i < n; i++) {
        if (!host[i] || !bytes[i])
            continue;
        char *dev = (char *)be_op_upload(b, host[i], bytes[i]);
        if (!dev)
            break;
        b->range[b->n_range++] = {(const char *)host[i], bytes[i], dev};
    }
    return sticky(b, e);
}

// The step's integer arrays up in one copy: packed into the next pinned
// buffer (waiting only for that buffer's previous copy), then one
// asynchronous copy on the stream; ops find the mirror through be_ints.
// The device mirror is reused in stream order: the previous step's kernels
// were queued before this copy.
int be_stage(sq_gpu_be *b, const void *const *host, const size_t *bytes, int n, sq_err *e)
{
    if (n > BE_STAGE_MAX)
        return sq_fail(e, SQ_EX_SOFTWARE, "CUDA: %d arrays staged at once (at most %d)", n,
                       BE_STAGE_MAX);
    b->n_range = 0;
    b->op_used = 0;
    if (b->gmode != BE_G_EAGER) // a graph's step: each array an op upload
        return stage_graph(b, host, bytes, n, e);
    size_t need = 0;
    for (int i = 0; i < n; i++)
        need += (bytes[i] + 255) & ~(size_t)255;
    if (stage_room(b, need))
        return sticky(b, e);
    int k = b->pinned_next;
    b->pinned_next = (k + 1) % BE_STAGE_BUFS;
    be_wait(b, b->pinned_done[k], "stage");
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        if (!host[i] || !bytes[i])
            continue;
        memcpy(b->pinned[k] + at, host[i], bytes[i]);
        b->range[b->n_range++] = {(const char *)host[i], bytes[i], b->stage_dev + at};
        at += (bytes[i] + 255) & ~(size_t)255;
    }
    if (at) {
        be_note(b, cudaMemcpyAsync(b->stage_dev, b->pinned[k], at, cudaMemcpyHostToDevice,
                                   b->stream), "stage");
        be_note(b, cudaEventRecord(b->pinned_done[k], b->stream), "stage");
    }
    return sticky(b, e);
}

// One more host array for this step's ops, after be_stage (a model's own
// per-step integers: Caser's windows, FPMC's users): copied through the
// op uploads, and found by be_ints/be_host_ints like the batch's arrays
// until the next be_stage. Failures go to the sticky error.
void be_stage_add(sq_gpu_be *b, const void *host, size_t bytes)
{
    if (!host || !bytes)
        return;
    if (b->n_range == BE_STAGE_MAX) {
        be_note(b, cudaErrorInvalidValue, "stage_add: too many arrays staged in one step");
        return;
    }
    char *dev = (char *)be_op_upload(b, host, bytes);
    if (dev)
        b->range[b->n_range++] = {(const char *)host, bytes, dev};
}

int be_staged_rows(sq_gpu_be *b, const int *off, int B, const char *what)
{
    const int *h = be_host_ints(b, off);
    if (!h || B < 0) {
        be_note(b, cudaErrorInvalidValue, what);
        return -1;
    }
    return h[B];
}

// be->red[slot] to the host: the one wait of an op that returns a value
// (NAN, and the sticky error, when the copy fails).
double be_download_red(sq_gpu_be *b, int slot)
{
    if (be_graph_no_read(b, "an op's value read back to the host") ||
        be_note(b, cudaMemcpyAsync(b->red_host + slot, b->red + slot, sizeof(double),
                                   cudaMemcpyDeviceToHost, b->stream), "download") ||
        be_wait(b, NULL, "download"))
        return NAN;
    return b->red_host[slot];
}

// Once a step: waits for the stream and reports the sticky error.
int be_sync(sq_gpu_be *b, sq_err *e)
{
    if (be_graph_no_read(b, "sq_ctx_sync"))
        return sticky(b, e);
    be_wait(b, NULL, "the step's kernels");
    return sticky(b, e);
}

// The device's used bytes, cudaMemGetInfo's total - free: every process's
// allocations, the runtime's and cuBLAS's workspace included (a bench takes
// the difference around what it allocates), less the freed blocks this
// context keeps (alloc.cu), which are not in use.
int be_mem_used(sq_gpu_be *b, size_t *bytes, sq_err *e)
{
    size_t avail = 0, total = 0;
    *bytes = 0;
    if (be_note(b, cudaMemGetInfo(&avail, &total), "cudaMemGetInfo"))
        return sticky(b, e);
    *bytes = total - avail;
    *bytes -= be_cache_kept(b) < *bytes ? be_cache_kept(b) : *bytes;
    return sticky(b, e);
}

// mode: 0 fp32, 1 tf32, 2 bf16 (device.h's SQ_PREC_*). fp32 makes the
// handle pedantic (no tensor cores); bf16 leaves it in the default mode
// and asks each GEMM for its type (CUBLAS_COMPUTE_32F_FAST_16BF, or bf16
// operands): a pedantic handle makes CUBLAS_COMPUTE_32F its pedantic form,
// and what it does to a FAST_16BF compute type is not documented, so the
// bf16 GEMMs are not left to it.
int be_set_precision(sq_gpu_be *b, int mode, sq_err *e)
{
    static const cublasMath_t math[3] = {CUBLAS_PEDANTIC_MATH, CUBLAS_TF32_TENSOR_OP_MATH,
                                         CUBLAS_DEFAULT_MATH};
    if (mode < 0 || mode > 2)
        return sq_fail(e, SQ_EX_SOFTWARE, "precision mode %d", mode);
    b->prec = mode;
    be_note_blas(b, cublasSetMathMode(b->blas, math[mode]), "precision");
    return sticky(b, e);
}

// A GEMM's signature in a graph's step (its shape, precision, scalars and
// operands): 1 when it must not be queued (be_sig_node)
static int gemm_sig(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha,
                    const void *A, int lda, const void *B, int ldb, float beta, const void *C,
                    int ldc, int types)
{
    if (b->gmode == BE_G_EAGER)
        return 0;
    int dims[10] = {ta, tb, M, N, K, lda, ldb, ldc, b->prec, types};
    float ab[2] = {alpha, beta};
    uintptr_t ptr[3] = {be_sig_ptr(b, A), be_sig_ptr(b, B), be_sig_ptr(b, C)};
    unsigned char sig[sizeof dims + sizeof ab + sizeof ptr];
    memcpy(sig, dims, sizeof dims);
    memcpy(sig + sizeof dims, ab, sizeof ab);
    memcpy(sig + sizeof dims + sizeof ab, ptr, sizeof ptr);
    return be_sig_node(b, "gemm", sig, sizeof sig);
}

// cuBLAS is column-major: a row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so swap the operands and M/N.
void be_gemm(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha, const float *A,
             int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (b->prof)
        be_prof_label(b, "gemm", "gemm %dx%dx%d %c%c%s", M, N, K, ta ? 't' : 'n', tb ? 't' : 'n',
                      b->invariant ? " invariant" : "");
    if (b->invariant) { // scoring: the same bits for a row in any batch (k_gemm.cu)
        be_gemm_invariant(b, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        return;
    }
    if (gemm_sig(b, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 0))
        return;
    if (b->prec == 2) { // fp32 in and out, bf16 products, fp32 sums
        be_note_blas(b, cublasGemmEx(b->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                     ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B,
                                     CUDA_R_32F, ldb, A, CUDA_R_32F, lda, &beta, C, CUDA_R_32F,
                                     ldc, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_GEMM_DEFAULT),
                     "gemm (bf16)");
        return;
    }
    be_note_blas(b, cublasSgemm(b->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ldb, A,
                                lda, &beta, C, ldc), "sgemm");
}

void be_gemm_typed(sq_gpu_be *b, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                   int lda, const void *B, int ldb, int ab_type, float beta, void *C, int ldc,
                   int c_type)
{
    if (ab_type == BE_F32 && c_type == BE_F32) {
        be_gemm(b, ta, tb, M, N, K, alpha, (const float *)A, lda, (const float *)B, ldb, beta,
                (float *)C, ldc);
        return;
    }
    if (M <= 0 || N <= 0)
        return;
    if (ab_type != BE_BF16 || b->invariant) { // no such GEMM: a caller's bug
        if (!b->failed) {
            b->failed = 1;
            sq_fail(&b->err, SQ_EX_SOFTWARE, "CUDA: a GEMM of fp32 A and B into bf16 C, or a "
                                             "typed GEMM while scoring");
        }
        return;
    }
    if (b->prof)
        be_prof_label(b, "gemm", "gemm %dx%dx%d %c%c bf16%s", M, N, K, ta ? 't' : 'n',
                      tb ? 't' : 'n', c_type == BE_BF16 ? " to bf16" : "");
    if (gemm_sig(b, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, 1 + c_type))
        return;
    // a pedantic handle (fp32, be_set_precision) in the default mode for
    // the call, so that bf16 operands may use the tensor cores (their
    // products are exact in fp32, the sums fp32 either way)
    cudaDataType_t ct = c_type == BE_BF16 ? CUDA_R_16BF : CUDA_R_32F;
    int pedantic = b->prec == 0;
    if (pedantic)
        be_note_blas(b, cublasSetMathMode(b->blas, CUBLAS_DEFAULT_MATH), "math mode");
    be_note_blas(b, cublasGemmEx(b->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, CUDA_R_16BF,
                                 ldb, A, CUDA_R_16BF, lda, &beta, C, ct, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                 "gemm (bf16 in memory)");
    if (pedantic)
        be_note_blas(b, cublasSetMathMode(b->blas, CUBLAS_PEDANTIC_MATH), "math mode");
}

static const sq_gpu_ops be_ops = {
    sq_gpu_ops_hash(), sizeof(sq_err), be_probe, be_open, be_close, be_alloc, be_free,
#define SQ_BE_TABLE_X(ret, name, params, args) be_##name,
    SQ_GPU_OP_LIST(SQ_BE_TABLE_X)
#undef SQ_BE_TABLE_X
};

// SEQREC_GPU_PROFILE's table (prof.cu): each op of the list bracketed by
// be_prof_begin and be_prof_end, whatever it returns (the context is pb_: the
// ops' own parameters include a b).
#define BE_PROF_CALL_void(name, args) be_##name(pb_, SQ_GPU_STRIP args)
#define BE_PROF_CALL_int(name, args) int r_ = be_##name(pb_, SQ_GPU_STRIP args)
#define BE_PROF_CALL_double(name, args) double r_ = be_##name(pb_, SQ_GPU_STRIP args)
#define BE_PROF_RET_void
#define BE_PROF_RET_int return r_;
#define BE_PROF_RET_double return r_;
#define SQ_BE_PROF_X(ret, name, params, args)                   \
    static ret prof_##name(sq_gpu_be *pb_, SQ_GPU_STRIP params)   \
    {                                                           \
        int h_ = be_prof_begin(pb_, #name);                       \
        BE_PROF_CALL_##ret(name, args);                         \
        be_prof_end(pb_, h_);                                     \
        BE_PROF_RET_##ret                                       \
    }
SQ_GPU_OP_LIST(SQ_BE_PROF_X)
#undef SQ_BE_PROF_X

static const sq_gpu_ops be_ops_prof = {
    sq_gpu_ops_hash(), sizeof(sq_err), be_probe, be_open, be_close, be_alloc, be_free,
#define SQ_BE_TABLE_X(ret, name, params, args) prof_##name,
    SQ_GPU_OP_LIST(SQ_BE_TABLE_X)
#undef SQ_BE_TABLE_X
};

// The object's one export (SQ_GPU_OPS_SYMBOL); it is built with
// -fvisibility=hidden, so this is the only default-visibility symbol. With
// SEQREC_GPU_PROFILE set, the profiling table (be_open makes the profile).
extern "C" __attribute__((visibility("default"))) const sq_gpu_ops *sq_cuda_backend(void)
{
    const char *prof = getenv("SEQREC_GPU_PROFILE");
    return prof && *prof ? &be_ops_prof : &be_ops;
}
