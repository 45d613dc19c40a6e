// k_nccl.cu - the sum across data-parallel ranks on GPUs: NCCL's unique id,
// its communicator and an in-place all-reduce (lib/train/micro.h ACROSS
// PROCESSES, the GPU's part).
//
// NCCL is loaded with dlopen on the first call (SEQREC_NCCL_LIB, default
// libnccl.so.2), not linked: a GPU machine without NCCL still runs every
// single-process job, and a Python environment's NCCL can be named.
// Determinism: NCCL's algorithm and protocol are pinned (NCCL_ALGO=Ring,
// NCCL_PROTO=Simple, unless the user set them): with the same ranks and
// the same inputs an all-reduce adds in the same order every run.
// The all-reduce runs on a stream of its own, ordered after the work
// queued so far and before the work queued after (events), so the compute
// stream's later kernels wait on it and nothing waits on the host.
//
// A rank that died (or hangs) leaves the others' all-reduce unfinished,
// and every kernel queued after it: the backend's waits (be_wait) then
// poll, and be_nccl_watch ends the job, NCCL's asynchronous error or
// SEQREC_NCCL_TIMEOUT seconds (default 600) without progress aborting the
// communicator (ncclCommAbort: its kernels end, the streams drain) and
// failing with 69, so no rank hangs and none writes its output.
//
// The simulated device (SQ_SIM) has one process and no NCCL: one rank,
// whose sum is its own buffer, so the wiring runs in `make unit-sim`;
// SEQREC_SIM_NCCL_HANG=1 makes its all-reduce never finish, as a dead
// rank's peers' does (the watchdog's test).
#include "common.cuh"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef SQ_SIM
typedef struct { char internal[128]; } ncclUniqueId;
typedef void *ncclComm_t;
typedef int ncclResult_t;
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
enum { ncclSuccess = 0, ncclInvalidUsage = 5, ncclInProgress = 7, ncclUint8 = 1,
       ncclFloat32 = 7, ncclFloat64 = 8, ncclSum = 0 };
#define NCCL_UNIQUE_ID_BYTES 128
#else
#include <dlfcn.h>
#include <nccl.h>
#endif

struct be_nccl {
    void *lib;
    ncclComm_t comm;
    cudaStream_t stream;
    cudaEvent_t ready, done;
    ncclResult_t (*get_id)(ncclUniqueId *);
    ncclResult_t (*init)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*allreduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                              ncclComm_t, cudaStream_t);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*abort)(ncclComm_t);
    ncclResult_t (*async)(ncclComm_t, ncclResult_t *);
    const char *(*error)(ncclResult_t);
    double timeout; // seconds a wait may make no progress (SEQREC_NCCL_TIMEOUT)
};

#ifdef SQ_SIM
// One rank: the id is zeros, the communicator a token, the sum the buffer.
static int sim_token;
static ncclResult_t sim_get_id(ncclUniqueId *id)
{
    memset(id, 0, sizeof *id);
    return ncclSuccess;
}
static ncclResult_t sim_init(ncclComm_t *c, int ranks, ncclUniqueId, int rank)
{
    *c = &sim_token;
    return ranks == 1 && rank == 0 ? ncclSuccess : ncclInvalidUsage;
}
// SEQREC_SIM_NCCL_MIRROR=R (tests): a float sum adds R copies of the
// buffer, as R ranks that hold this rank's values would, so that a sum
// that skips or misplaces values shows with one process; the statistics'
// doubles and the host collectives' bytes stay one rank's
static __global__ void k_mirror(float *o, size_t n, int R)
{
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        float x = o[i], acc = x;
        for (int k = 1; k < R; k++)
            acc += x;
        o[i] = acc;
    }
}

static ncclResult_t sim_allreduce(const void *in, void *out, size_t n, ncclDataType_t t,
                                  ncclRedOp_t, ncclComm_t, cudaStream_t s)
{
    size_t bytes = n * (t == ncclFloat64 ? 8 : t == ncclUint8 ? 1 : 4);
    if (in != out && cudaMemcpyAsync(out, in, bytes, cudaMemcpyDeviceToDevice, s))
        return ncclInvalidUsage;
    if (getenv("SEQREC_SIM_NCCL_HANG"))
        sim_stream_stick(s); // a peer never joins: nothing after this finishes
    const char *m = getenv("SEQREC_SIM_NCCL_MIRROR");
    int R = m ? atoi(m) : 1;
    if (t != ncclFloat32 || R < 2 || !n)
        return ncclSuccess;
    size_t blocks = (n + 255) / 256;
    return sim_launch("k_mirror", k_mirror, dim3((unsigned)(blocks < 1024 ? blocks : 1024)),
                      dim3(256), 0, s, (float *)out, n, R)
               ? ncclInvalidUsage
               : ncclSuccess;
}
static ncclResult_t sim_destroy(ncclComm_t) { return ncclSuccess; }
static ncclResult_t sim_abort(ncclComm_t)
{
    sim_unstick_all();
    return ncclSuccess;
}
static ncclResult_t sim_async(ncclComm_t, ncclResult_t *r)
{
    *r = ncclSuccess;
    return ncclSuccess;
}
static const char *sim_error(ncclResult_t r) { return r ? "invalid usage (one rank)" : "ok"; }

static int nccl_load(struct be_nccl *n, sq_err *e)
{
    (void)e;
    n->get_id = sim_get_id;
    n->init = sim_init;
    n->allreduce = sim_allreduce;
    n->destroy = sim_destroy;
    n->abort = sim_abort;
    n->async = sim_async;
    n->error = sim_error;
    return 0;
}
#else
static int nccl_load(struct be_nccl *n, sq_err *e)
{
    const char *path = getenv("SEQREC_NCCL_LIB");
    if (!path || !*path)
        path = "libnccl.so.2";
    if (!(n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)))
        return sq_fail(e, SQ_EX_UNAVAILABLE, "NCCL: cannot load %s (%s): install NCCL or name "
                       "it with SEQREC_NCCL_LIB", path, dlerror());
    *(void **)&n->get_id = dlsym(n->lib, "ncclGetUniqueId");
    *(void **)&n->init = dlsym(n->lib, "ncclCommInitRank");
    *(void **)&n->allreduce = dlsym(n->lib, "ncclAllReduce");
    *(void **)&n->destroy = dlsym(n->lib, "ncclCommDestroy");
    *(void **)&n->abort = dlsym(n->lib, "ncclCommAbort");
    *(void **)&n->async = dlsym(n->lib, "ncclCommGetAsyncError");
    *(void **)&n->error = dlsym(n->lib, "ncclGetErrorString");
    if (!n->get_id || !n->init || !n->allreduce || !n->destroy || !n->abort || !n->async ||
        !n->error)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "NCCL: %s lacks the calls seqrec needs", path);
    return 0;
}
#endif

// The backend's NCCL state, loaded on first use; NULL and e set on failure
static struct be_nccl *nccl_of(sq_gpu_be *be, sq_err *e)
{
    if (be->nccl)
        return be->nccl;
    struct be_nccl *n = (struct be_nccl *)calloc(1, sizeof *n);
    if (!n) {
        sq_fail(e, SQ_EX_OSERR, "out of memory");
        return NULL;
    }
    be->nccl = n; // be_nccl_close frees it, loaded or not
    return nccl_load(n, e) ? NULL : n;
}

int be_nccl_id(sq_gpu_be *be, void *id, size_t n, sq_err *e)
{
    struct be_nccl *c = nccl_of(be, e);
    if (!c)
        return e->code;
    if (n < sizeof(ncclUniqueId))
        return sq_fail(e, SQ_EX_SOFTWARE, "NCCL: an id needs %zu bytes", sizeof(ncclUniqueId));
    ncclUniqueId u;
    ncclResult_t r = c->get_id(&u);
    if (r != ncclSuccess)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "NCCL: ncclGetUniqueId: %s", c->error(r));
    memcpy(id, &u, sizeof u);
    return 0;
}

int be_nccl_open(sq_gpu_be *be, const void *id, size_t n, int ranks, int rank, sq_err *e)
{
    struct be_nccl *c = nccl_of(be, e);
    if (!c)
        return e->code;
    if (c->comm)
        return sq_fail(e, SQ_EX_SOFTWARE, "NCCL: the context already has a communicator");
    if (n < sizeof(ncclUniqueId))
        return sq_fail(e, SQ_EX_SOFTWARE, "NCCL: an id needs %zu bytes", sizeof(ncclUniqueId));
    const char *to = getenv("SEQREC_NCCL_TIMEOUT");
    char *end = NULL;
    c->timeout = to ? strtod(to, &end) : 600;
    if (to && (end == to || *end || !(c->timeout > 0) || c->timeout > 1e9))
        return sq_fail(e, SQ_EX_USAGE, "SEQREC_NCCL_TIMEOUT '%s': expected seconds > 0", to);
    // the same order of additions every run (the header above)
    setenv("NCCL_ALGO", "Ring", 0);
    setenv("NCCL_PROTO", "Simple", 0);
    cudaError_t st;
    if ((st = cudaSetDevice(be->device)) != cudaSuccess ||
        (st = cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking)) != cudaSuccess ||
        (st = cudaEventCreateWithFlags(&c->ready, cudaEventDisableTiming)) != cudaSuccess ||
        (st = cudaEventCreateWithFlags(&c->done, cudaEventDisableTiming)) != cudaSuccess)
        return sq_fail(e, SQ_EX_UNAVAILABLE, "NCCL: CUDA: %s", cudaGetErrorString(st));
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclResult_t r = c->init(&c->comm, ranks, u, rank);
    if (r != ncclSuccess) {
        c->comm = NULL;
        return sq_fail(e, SQ_EX_UNAVAILABLE, "NCCL: ncclCommInitRank (rank %d of %d): %s", rank,
                       ranks, c->error(r));
    }
    return 0;
}

// An exact all-gather is a sum of bytes where one rank gives each byte and
// the others zeros (ranks.c): hence uint8 besides the floats.
int be_nccl_sum(sq_gpu_be *be, void *buf, size_t count, int dtype, sq_err *e)
{
    ncclDataType_t t = dtype == SQ_NCCL_F64 ? ncclFloat64 : dtype == SQ_NCCL_U8 ? ncclUint8
                                                                                : ncclFloat32;
    struct be_nccl *c = be->nccl;
    if (!c || !c->comm)
        return sq_fail(e, SQ_EX_SOFTWARE, "NCCL: no communicator (nccl_open first)");
    if (be->failed)
        return sq_fail(e, be->err.code, "%s", be->err.msg);
    if (be_note(be, cudaEventRecord(c->ready, be->stream), "NCCL: event") ||
        be_note(be, cudaStreamWaitEvent(c->stream, c->ready, 0), "NCCL: wait"))
        return sq_fail(e, be->err.code, "%s", be->err.msg);
    ncclResult_t r = c->allreduce(buf, buf, count, t, ncclSum, c->comm, c->stream);
    if (r != ncclSuccess)
        return sq_fail(e, SQ_EX_SOFTWARE, "NCCL: ncclAllReduce of %zu values: %s", count,
                       c->error(r));
    if (be_note(be, cudaEventRecord(c->done, c->stream), "NCCL: event") ||
        be_note(be, cudaStreamWaitEvent(be->stream, c->done, 0), "NCCL: wait"))
        return sq_fail(e, be->err.code, "%s", be->err.msg);
    return 0;
}

int be_nccl_active(const sq_gpu_be *b)
{
    return b->nccl && b->nccl->comm;
}

// Ends the job's NCCL for good: the communicator aborted (its kernels end,
// the streams drain); 1 when the sticky error is still free for the reason.
static int nccl_give_up(sq_gpu_be *b)
{
    struct be_nccl *c = b->nccl;
    c->abort(c->comm);
    c->comm = NULL;
    if (b->failed)
        return 0;
    b->failed = 1;
    return 1;
}

int be_nccl_watch(sq_gpu_be *b, double waited, const char *what)
{
    struct be_nccl *c = b->nccl;
    ncclResult_t r = ncclSuccess;
    if (c->async(c->comm, &r) == ncclSuccess && r != ncclSuccess && r != ncclInProgress) {
        const char *why = c->error(r);
        if (nccl_give_up(b))
            sq_fail(&b->err, SQ_EX_UNAVAILABLE,
                    "NCCL: waiting for %s: %s: another rank failed; the job stops", what, why);
        return 1;
    }
    if (waited > c->timeout) {
        if (nccl_give_up(b))
            sq_fail(&b->err, SQ_EX_UNAVAILABLE,
                    "NCCL: waiting for %s, no progress in %.0f s (SEQREC_NCCL_TIMEOUT): another "
                    "rank died or hangs; the job stops", what, c->timeout);
        return 1;
    }
    return 0;
}

void be_nccl_close(sq_gpu_be *b)
{
    struct be_nccl *c = b->nccl;
    if (!c)
        return;
    if (c->stream)
        cudaStreamSynchronize(c->stream);
    if (c->comm)
        c->destroy(c->comm);
    if (c->ready)
        cudaEventDestroy(c->ready);
    if (c->done)
        cudaEventDestroy(c->done);
    if (c->stream)
        cudaStreamDestroy(c->stream);
#ifndef SQ_SIM
    if (c->lib)
        dlclose(c->lib);
#endif
    free(c);
    b->nccl = NULL;
}
