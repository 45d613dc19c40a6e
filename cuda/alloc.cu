// alloc.cu - the context's device allocations, with a small cache of freed
// blocks (PyTorch's caching allocator in miniature).
//
// Why: cudaFree waits for the whole device, and a cudaMalloc costs tens of
// microseconds or more. Scoring allocates and frees its work every batch
// of users (3 to 17 blocks a batch by the model, 13 to 500 MB: the
// simulated device's trace of gpu-check's models), so a batch of scores
// drained the GPU about ten times. A training step allocates nothing;
// its buffers live for the run.
//
// How: a freed block goes into the cache instead of cudaFree, and an
// allocation of its size class takes it back. Sizes go up to their class:
// multiples of 256 bytes to 4 KiB, then 8 classes an octave (at most 12.5%
// more than asked), so batches whose work differs by a few percent share
// blocks. The cache keeps at most BE_CACHE_N blocks and BE_CACHE_BYTES; a
// block past either is freed. When cudaMalloc fails, the cache is emptied
// and the class's size tried again, then the exact size. Every use of a
// block is queued on the context's stream (NCCL's stream is joined back to
// it before anything is freed), so a block taken from the cache is used
// after its last use, as the memset that zeroes it (sq_ctx_alloc) is.
//
// The cache is not "used" memory: be_mem_used leaves its bytes out.
// SEQREC_GPU_PLAIN=cache turns it off (exact sizes, cudaMalloc and
// cudaFree each time): for compute-sanitizer and the simulated device's
// guards, which cannot see an overrun into a class's slack, or a freed
// block used again, while it is on.
//
// The live blocks are listed either way, so that be_mem_peak can say the
// most bytes the context held at once (PyTorch's max_memory_allocated:
// the blocks as allocated, a class's slack included, not the cache's or
// the runtime's and cuBLAS's own): the device memory a training log
// reports.
#include <cstdlib>
#include <cstring>

#include "common.cuh"

#define BE_CACHE_N 64                      // blocks kept
#define BE_CACHE_BYTES ((size_t)4 << 30)   // bytes kept: 4 GiB

struct be_block {
    void *p;
    size_t bytes; // as allocated (a class's size, or exact)
};

struct be_blocks {
    struct be_block *v;
    int n, cap;
};

struct be_cache {
    struct be_blocks live; // allocated and not freed: a pointer's size at be_free
    struct be_blocks kept; // freed, not given back to CUDA
    size_t kept_bytes;
    size_t live_bytes, peak_bytes; // held now, and the most at once
    int keep;                      // 0: SEQREC_GPU_PLAIN=cache (nothing kept)
};

// The class of n bytes: the least multiple of 256 (to 4 KiB), or of an
// eighth of n's octave (2^k < n <= 2^(k+1): steps of 2^k / 8)
static size_t size_class(size_t n)
{
    if (n <= 4096)
        return (n + 255) & ~(size_t)255;
    if (n > (size_t)1 << 62) // no device has it: cudaMalloc says so, at its size
        return n;
    int k = 0;
    while (((size_t)1 << (k + 1)) < n)
        k++;
    size_t step = (size_t)1 << (k - 3); // 2^k < n <= 2^(k+1), k >= 12
    return (n + step - 1) / step * step;
}

static int blocks_push(struct be_blocks *s, void *p, size_t bytes)
{
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        struct be_block *v = (struct be_block *)realloc(s->v, (size_t)cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = {p, bytes};
    return 0;
}

// Removes entry i, the others kept in order (the kept list is oldest first)
static void blocks_drop(struct be_blocks *s, int i)
{
    memmove(s->v + i, s->v + i + 1, (size_t)(s->n - i - 1) * sizeof *s->v);
    s->n--;
}

// Gives every kept block back to CUDA.
static void cache_release(struct be_cache *c)
{
    for (int i = 0; i < c->kept.n; i++)
        cudaFree(c->kept.v[i].p);
    c->kept.n = 0;
    c->kept_bytes = 0;
}

// A kept block of `bytes` exactly, taken out of the cache; or NULL
static void *cache_take(struct be_cache *c, size_t bytes)
{
    for (int i = c->kept.n - 1; i >= 0; i--) // the newest first
        if (c->kept.v[i].bytes == bytes) {
            void *p = c->kept.v[i].p;
            blocks_drop(&c->kept, i);
            c->kept_bytes -= bytes;
            return p;
        }
    return NULL;
}

static int plain_alloc(sq_gpu_be *b, void **ptr, size_t bytes, sq_err *e)
{
    cudaError_t st = cudaMalloc(ptr, bytes);
    if (st == cudaSuccess)
        return 0;
    cudaGetLastError(); // reported here, not again by the next launch's check
    *ptr = NULL;
    return sq_fail(e, st == cudaErrorMemoryAllocation ? SQ_EX_OSERR : SQ_EX_SOFTWARE,
                   "CUDA: cannot allocate %zu bytes of device %d: %s", bytes, b->device,
                   cudaGetErrorString(st));
}

int be_alloc(sq_gpu_be *b, void **ptr, size_t bytes, sq_err *e)
{
    *ptr = NULL;
    bytes = bytes ? bytes : 1;
    // a graph's step allocates nothing (its capture would refuse cudaMalloc;
    // a block from the cache would hide that until the cache missed)
    if (b->gmode != BE_G_EAGER)
        return sq_fail(e, SQ_EX_SOFTWARE, "CUDA: %zu bytes allocated inside a CUDA graph's "
                       "step (graph.cu: a step allocates nothing)", bytes);
    struct be_cache *c = b->cache;
    if (!c)
        return plain_alloc(b, ptr, bytes, e);
    size_t want = c->keep ? size_class(bytes) : bytes;
    void *p = c->keep ? cache_take(c, want) : NULL;
    if (!c->keep) {
        if (plain_alloc(b, &p, want, e))
            return e->code;
    } else if (!p && cudaMalloc(&p, want) != cudaSuccess) {
        cudaGetLastError(); // the failure is handled here: not sticky
        cache_release(c);
        p = NULL;
        if (cudaMalloc(&p, want) != cudaSuccess) {
            cudaGetLastError();
            want = bytes;
            if (plain_alloc(b, &p, want, e))
                return e->code;
        }
    }
    if (blocks_push(&c->live, p, want)) {
        cudaFree(p);
        return sq_fail(e, SQ_EX_OSERR, "out of memory");
    }
    c->live_bytes += want;
    if (c->live_bytes > c->peak_bytes)
        c->peak_bytes = c->live_bytes;
    *ptr = p;
    return 0;
}

void be_free(sq_gpu_be *b, void *ptr)
{
    if (!ptr)
        return;
    struct be_cache *c = b->cache;
    int i = c ? c->live.n - 1 : -1;
    while (i >= 0 && c->live.v[i].p != ptr)
        i--;
    if (i < 0) { // no cache, or not the cache's: CUDA's
        cudaFree(ptr);
        return;
    }
    size_t bytes = c->live.v[i].bytes;
    blocks_drop(&c->live, i);
    c->live_bytes -= bytes;
    if (!c->keep || bytes != size_class(bytes) || bytes > BE_CACHE_BYTES) { // exact, or too big
        cudaFree(ptr);
        return;
    }
    while (c->kept.n && (c->kept.n >= BE_CACHE_N || c->kept_bytes + bytes > BE_CACHE_BYTES)) {
        cudaFree(c->kept.v[0].p); // the oldest out, the others kept in order
        c->kept_bytes -= c->kept.v[0].bytes;
        memmove(c->kept.v, c->kept.v + 1, (size_t)--c->kept.n * sizeof *c->kept.v);
    }
    if (blocks_push(&c->kept, ptr, bytes))
        cudaFree(ptr);
    else
        c->kept_bytes += bytes;
}

int be_cache_open(sq_gpu_be *b)
{
    b->cache = (struct be_cache *)calloc(1, sizeof *b->cache);
    if (!b->cache)
        return -1;
    b->cache->keep = !(b->plain & BE_PLAIN_CACHE);
    return 0;
}

size_t be_cache_kept(const sq_gpu_be *b) { return b->cache ? b->cache->kept_bytes : 0; }

// The most bytes this context's allocations held at once (the table's
// mem_peak): every block from be_alloc, as allocated
int be_mem_peak(sq_gpu_be *b, size_t *bytes, sq_err *e)
{
    (void)e;
    *bytes = b->cache ? b->cache->peak_bytes : 0;
    return 0;
}

void be_cache_close(sq_gpu_be *b)
{
    if (!b->cache)
        return;
    cache_release(b->cache);
    free(b->cache->kept.v);
    free(b->cache->live.v); // what is still live is the caller's (freed at exit)
    free(b->cache);
    b->cache = NULL;
}
