// sim.cpp - the simulated device's runtime (see sim_cuda.h): the fibers of
// a block, the barriers, the device arena, the runtime and cuBLAS subset.
#include "sim_cuda.h"

#include <cblas.h>
#include <sys/mman.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#define SIM_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SIM_ASAN 1
#endif
#endif
#ifdef SIM_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define SIM_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SIM_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define SIM_STACK (256u << 10)
#else
#define SIM_POISON(p, n) ((void)(p), (void)(n))
#define SIM_UNPOISON(p, n) ((void)(p), (void)(n))
#define SIM_STACK (64u << 10)
#endif

#define SIM_HIDDEN __attribute__((visibility("hidden")))

[[noreturn]] static void die(const char *fmt, const char *a, int b = 0)
{
    fprintf(stderr, "simulated device: ");
    fprintf(stderr, fmt, a, b);
    fprintf(stderr, "\n");
    fflush(stderr);
    abort();
}

// ---------------------------------------------------------------- fibers
namespace {
struct barrier {
    unsigned count = 0, gen = 0;
};
struct fiber {
    sim_thread st;
    int done;
    void *fake_stack;
    const barrier *wait; // the barrier it waits at (gen wait_gen), or null
    unsigned wait_gen;
};
// A switch point: __builtin_setjmp's buffer (frame, resume address,
// stack). Unlike _setjmp/_longjmp it saves no signal mask and walks no
// cleanup handlers: a switch is a few stores and a jump
typedef void *jump_buf[5];
struct block_run {
    const char *kern;
    const std::function<void()> *body;
    unsigned n, nwarps;
    std::vector<fiber> f;
    barrier bar;
    std::vector<barrier> wbar;
    std::vector<uint64_t> slot; // two per thread: the lanes' deposits (deposit())
    unsigned cur, finished;
    int progress;
    jump_buf sched_jb;     // the scheduler, in enter()
    ucontext_t sched, start; // a stack's first entry only
    void *sched_fake;
    const void *sched_bottom;
    size_t sched_size;
};
// Thread i of every block runs on stack i: a fiber started there once (by
// swapcontext) that runs a body per block, then parks in to_sched until the
// next block; switches are __builtin_setjmp/__builtin_longjmp, which
// (unlike swapcontext) leave the signal mask alone: no system call
struct stack_slot {
    jump_buf jb; // where the fiber waits
    int started;
};
block_run *run_ = nullptr;
char *stacks_ = nullptr; // 1024 stacks, each after a guard page
stack_slot *slots_ = nullptr;
size_t page_;
void *dyn_ = nullptr;
size_t dyn_bytes_ = 0;
sim_thread host_thread_;
} // namespace

// GCC's noipa: no interprocedural register allocation across a switch
// (clang's is off by default and it lacks the attribute)
#if defined(__clang__)
#define SIM_NOIPA __attribute__((noinline))
#else
#define SIM_NOIPA __attribute__((noipa))
#endif

static char *stack_of(unsigned i) { return stacks_ + (size_t)i * (SIM_STACK + page_) + page_; }

// To a switch point saved by __builtin_setjmp; never in the function that
// saved it (GCC's rule for the builtin pair)
[[noreturn]] __attribute__((noinline)) static void jump(void **jb) { __builtin_longjmp(jb, 1); }

// The current fiber to the scheduler; it returns when enter() resumes it,
// maybe in a later block (run_ re-read). noipa, as enter(): the caller must
// assume the ABI's clobbers, not the few registers the compiler sees this
// body use (-fipa-ra, on at -O2, let wait_at keep a pointer in a register
// the scheduler's longjmp had changed)
SIM_NOIPA static void to_sched(void)
{
#ifdef SIM_ASAN
    fiber *f = &run_->f[run_->cur];
    __sanitizer_start_switch_fiber(f->done ? nullptr : &f->fake_stack, run_->sched_bottom,
                                   run_->sched_size);
#endif
    if (!__builtin_setjmp(slots_[run_->cur].jb))
        jump(run_->sched_jb);
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(run_->f[run_->cur].fake_stack, &run_->sched_bottom,
                                    &run_->sched_size);
#endif
}

static void fiber_main(void)
{
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &run_->sched_bottom, &run_->sched_size);
#endif
    for (;;) {
        (*run_->body)();
        run_->f[run_->cur].done = 1;
        run_->finished++;
        run_->progress = 1;
        to_sched();
    }
}

const sim_thread *sim_cur(void) { return run_ ? &run_->f[run_->cur].st : &host_thread_; }

static void wait_at(barrier *b, unsigned expected)
{
    block_run *r = run_;
    if (!r)
        die("%s: barrier or warp intrinsic outside a kernel", "host");
    r->progress = 1;
    if (++b->count == expected) {
        b->count = 0;
        b->gen++;
        return;
    }
    // the scheduler passes over it until the barrier opens (no switch in
    // and straight out again)
    fiber *f = &r->f[r->cur];
    f->wait = b;
    f->wait_gen = b->gen;
    while (b->gen == f->wait_gen)
        to_sched();
    r = run_;
    r->f[r->cur].wait = nullptr;
}

void __syncthreads(void) { wait_at(&run_->bar, run_->n); }

static unsigned lanes_of(unsigned w)
{
    unsigned left = run_->n - w * 32;
    return left < 32 ? left : 32;
}
unsigned sim_active_lanes(void)
{
    unsigned l = lanes_of(run_->cur / 32);
    return l == 32 ? 0xffffffffu : (1u << l) - 1;
}

static void check_mask(unsigned mask, const char *what)
{
    if (!run_)
        die("%s outside a kernel", what);
    if (mask != 0xffffffffu)
        die("warp intrinsic in kernel %s with a partial mask (only full masks are supported)",
            run_->kern);
}

void __syncwarp(unsigned mask)
{
    check_mask(mask, "__syncwarp");
    unsigned w = run_->cur / 32;
    wait_at(&run_->wbar[w], lanes_of(w));
}

// A warp's exchange: each lane deposits in half gen & 1 of the slots (gen:
// its warp barrier's generation), one barrier, then reads. No second
// barrier before the next exchange: that one writes the other half, and
// the one after (this half again) is past the next barrier, which every
// lane reaches only after its read here
static uint64_t *deposit(block_run *r, unsigned me, uint64_t v)
{
    unsigned w = me / 32;
    uint64_t *half = &r->slot[(size_t)(r->wbar[w].gen & 1) * r->nwarps * 32 + w * 32];
    half[me % 32] = v;
    wait_at(&r->wbar[w], lanes_of(w));
    return half;
}

uint64_t sim_shfl_raw(unsigned mask, uint64_t v, int mode, int arg, int width)
{
    check_mask(mask, "__shfl_*_sync");
    block_run *r = run_;
    unsigned me = r->cur, lane = me % 32, nl = lanes_of(me / 32);
    if (width <= 0 || width > 32 || (width & (width - 1)))
        die("shuffle width in kernel %s is not a power of two <= 32", r->kern);
    const uint64_t *half = deposit(r, me, v);
    int base = (int)lane & ~(width - 1), src;
    switch (mode) {
    case 0: src = (int)lane ^ arg; if (src >= base + width) src = (int)lane; break;
    case 1: src = (int)lane + arg; if (src >= base + width) src = (int)lane; break;
    case 2: src = (int)lane - arg; if (src < base) src = (int)lane; break;
    default: src = base + (((arg % width) + width) % width); break;
    }
    if ((unsigned)src >= nl)
        die("shuffle in kernel %s reads a lane past the end of the block", r->kern);
    return half[src];
}

unsigned __ballot_sync(unsigned mask, int pred)
{
    check_mask(mask, "__ballot_sync");
    block_run *r = run_;
    unsigned nl = lanes_of(r->cur / 32);
    const uint64_t *half = deposit(r, r->cur, pred != 0);
    unsigned b = 0;
    for (unsigned l = 0; l < nl; l++)
        b |= (unsigned)(half[l] != 0) << l;
    return b;
}

int atomicAdd(int *p, int v)
{
    int o = *p;
    *p = (int)((unsigned)o + (unsigned)v);
    return o;
}
unsigned atomicAdd(unsigned *p, unsigned v)
{
    unsigned o = *p;
    *p = o + v;
    return o;
}

void *sim_dyn_shared(void) { return dyn_; }

// ---------------------------------------------------------------- arena
namespace {
// The device's memory: 8 GiB of address space (reserved, not committed),
// or SEQREC_SIM_ARENA_GIB (1-1024) for a large batch's trace or host-only run
size_t arena_bytes_ = 0;
const size_t RED = 256; // poisoned red zone after every allocation
char *arena_ = nullptr;
size_t top_ = 0;
std::map<char *, size_t> live_;            // start -> bytes asked
std::multimap<size_t, char *> free_;       // span -> start
std::map<char *, size_t> span_;            // start -> span (bytes + red, rounded)
size_t used_ = 0;                          // the live allocations' spans
std::map<char *, size_t> pinned_;          // cudaHostAlloc'd: start -> bytes
int in_kernel_ = 0;
cudaError_t last_ = cudaSuccess;
} // namespace

// ---------------------------------------------------------------- capture
// A graph is its nodes in capture order; a node is a closure that does the
// work on replay (on the memory as it is then) and returns its error.
struct sim_graph_node {
    const char *what; // the kernel's name, "memcpy", "memset", "cublasSgemm"...
    std::function<cudaError_t()> run;
};
struct sim_graph {
    std::vector<std::unique_ptr<sim_graph_node>> nodes;
};
struct sim_graph_exec {
    std::vector<sim_graph_node> nodes; // a copy: the graph may be destroyed
};
struct sim_stream {
    int flags;
    sim_graph *g;                // non-null while capturing
    int invalid;                 // a refused call invalidated the capture
    cudaStreamCaptureMode mode;
    unsigned stuck;              // never finishes while == hang_gen_ (sim_stream_stick)
};
struct sim_event {
    int flags;
    int captured; // last recorded in a capture
    unsigned stuck;
    int recorded; // outside a capture, at `at` (ms of the host's monotonic clock)
    double at;
};
namespace {
// The generation of stuck streams and events: sim_unstick_all moves on.
unsigned hang_gen_ = 1;
// The capturing stream. Only one stream captures at a time (the backend has
// one stream); a second BeginCapture elsewhere is refused.
sim_stream *capture_ = nullptr;
} // namespace

static int capturing(cudaStream_t s) { return s && s == capture_; }
// A call the real runtime refuses during capture: it fails and the capture
// is invalidated (EndCapture then returns no graph).
static cudaError_t refuse(cudaError_t e = cudaErrorStreamCaptureUnsupported)
{
    if (capture_)
        capture_->invalid = 1;
    return last_ = e;
}
// An unsafe call (allocating, synchronizing) under a capture that is not
// Relaxed
static int strict(void) { return capture_ && capture_->mode != cudaStreamCaptureModeRelaxed; }
// Work on the legacy stream (0) while a blocking stream captures would
// depend on the capture: refused, and the capture invalidated.
static int implicit(cudaStream_t s)
{
    return !s && capture_ && !(capture_->flags & cudaStreamNonBlocking);
}
// Appends a node to the capture on s
static cudaError_t record(cudaStream_t s, const char *what, std::function<cudaError_t()> run)
{
    if (s->invalid)
        return last_ = cudaErrorStreamCaptureInvalidated;
    s->g->nodes.push_back(std::make_unique<sim_graph_node>(sim_graph_node{what, std::move(run)}));
    return cudaSuccess;
}

static int enabled(void)
{
    const char *v = getenv("SEQREC_SIMULATED_DEVICE");
    return v && !strcmp(v, "1");
}

// SEQREC_SIM_HOST_ONLY=1: kernels and GEMMs are checked, traced and
// skipped, and so are memsets, copies within the device and the fill of
// new and freed device memory (a copy to the
// host gives zeros: no NaN from garbage stops the run), so that a run's time is the host's own work
// a step (batching, bucketing, staging, launching): what a GPU cannot hide
// when the host is the slower side. The results are garbage; the time is
// the point (doc/bench.md).
static int host_only(void)
{
    static int v = -1;
    if (v < 0) {
        const char *e = getenv("SEQREC_SIM_HOST_ONLY");
        v = e && !strcmp(e, "1");
    }
    return v;
}

static size_t arena_size(void)
{
    if (!arena_bytes_) {
        const char *v = getenv("SEQREC_SIM_ARENA_GIB");
        long g = v && *v ? strtol(v, nullptr, 10) : 8;
        if (g < 1 || g > 1024)
            die("SEQREC_SIM_ARENA_GIB=%s: give 1 to 1024", v);
        arena_bytes_ = (size_t)g << 30;
    }
    return arena_bytes_;
}

static void arena_init(void)
{
    if (arena_)
        return;
    void *p = mmap(nullptr, arena_size(), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        die("cannot reserve the device arena%s", "");
    arena_ = (char *)p;
}

int sim_is_device(const void *p)
{
    return arena_ && (const char *)p >= arena_ && (const char *)p < arena_ + top_;
}

// the live allocation holding [p, p+n), or null
static char *alloc_of(const void *p, size_t n)
{
    if (!sim_is_device(p))
        return nullptr;
    auto it = live_.upper_bound((char *)p);
    if (it == live_.begin())
        return nullptr;
    --it;
    if ((const char *)p + n > it->first + it->second)
        return nullptr;
    return it->first;
}

static void unpoison_all(void)
{
    for (auto &a : live_)
        SIM_UNPOISON(a.first, a.second);
}
static void poison_all(void)
{
    for (auto &a : live_)
        SIM_POISON(a.first, a.second);
}

void sim_wmma_fail(const char *what)
{
    char m[256];
    snprintf(m, sizeof m, "%s (kernel %s)", what, run_ ? run_->kern : "?");
    die("%s", m);
}

void sim_check_arg(const char *kern, int index, const void *p)
{
    if (p && !sim_is_device(p))
        die("host pointer passed to kernel %s, argument %d", kern, index);
    // inside a live allocation or at its end: not into freed memory (an
    // address taken before its buffer was grown and freed)
    if (p && !alloc_of(p, 0))
        die("freed device memory passed to kernel %s, argument %d", kern, index);
}

static void trace_line(const char *name, unsigned long long a, unsigned b, size_t c);

cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = nullptr;
    if (!enabled())
        return last_ = cudaErrorNoDevice;
    if (strict())
        return refuse();
    arena_init();
    size_t span = ((n ? n : 1) + RED + 255) & ~(size_t)255;
    char *at;
    auto f = free_.lower_bound(span);
    if (f != free_.end() && f->first <= 2 * span) {
        at = f->second;
        span = f->first;
        free_.erase(f);
    } else {
        if (top_ + span > arena_size())
            return last_ = cudaErrorMemoryAllocation;
        at = arena_ + top_;
        top_ += span;
    }
    live_[at] = n;
    span_[at] = span;
    trace_line("alloc", n, 0, 0);
    used_ += span;
    // a GPU's new memory holds whatever was there: NaN bytes (0xff), so a
    // kernel that reads what nothing wrote differs from its CPU twin
    SIM_UNPOISON(at, n ? n : 1);
    if (!host_only()) // (no kernel reads it: the pages stay untouched)
        memset(at, 0xff, n);
    SIM_POISON(at, span);
    if (in_kernel_)
        SIM_UNPOISON(at, n);
    *p = at;
    return cudaSuccess;
}

cudaError_t cudaFree(void *p)
{
    if (strict())
        return refuse();
    if (!p)
        return cudaSuccess;
    auto it = live_.find((char *)p);
    if (it == live_.end())
        return last_ = cudaErrorInvalidDevicePointer;
    size_t span = span_[(char *)p];
    // what a kernel still reads through a stale pointer is garbage (NaN
    // floats, -1 ints), as a GPU's reused memory would be, not the old
    // values (ASan builds say so outright: the span is poisoned)
    SIM_UNPOISON(p, span); // outside a kernel device memory is poisoned to the host
    if (!host_only())
        memset(p, 0xff, span);
    SIM_POISON(p, span);
    trace_line("free", it->second, 0, 0);
    live_.erase(it);
    span_.erase((char *)p);
    used_ -= span;
    if ((char *)p + span == arena_ + top_) // the newest span: the arena's top comes down,
        top_ -= span;                      // so a larger block fits there (a GPU's memory is not a bump)
    else
        free_.emplace(span, (char *)p);
    return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t *avail, size_t *total)
{
    if (!enabled())
        return last_ = cudaErrorNoDevice;
    *total = arena_size();
    *avail = arena_size() - used_;
    return cudaSuccess;
}

cudaError_t cudaHostAlloc(void **p, size_t n, unsigned)
{
    *p = nullptr;
    if (strict())
        return refuse();
    *p = malloc(n ? n : 1);
    if (!*p)
        return last_ = cudaErrorMemoryAllocation;
    pinned_[(char *)*p] = n;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void **p, size_t n) { return cudaHostAlloc(p, n, 0); }
cudaError_t cudaFreeHost(void *p)
{
    if (strict())
        return refuse();
    if (sim_is_device(p))
        return last_ = cudaErrorInvalidValue;
    pinned_.erase((char *)p);
    free(p);
    return cudaSuccess;
}

// [p, p+n) lies in one cudaHostAlloc block
static int pinned_of(const void *p, size_t n)
{
    auto it = pinned_.upper_bound((char *)p);
    if (it == pinned_.begin())
        return 0;
    --it;
    return (const char *)p + n <= it->first + it->second;
}

// Which ends of a copy of kind k are device memory (bit 0 dst, bit 1 src),
// or the error of a bad direction or range
static cudaError_t copy_ends(void *dst, const void *src, size_t n, cudaMemcpyKind k, int *ends)
{
    int dd = k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice;
    int sd = k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice;
    if (k == cudaMemcpyDefault) {
        dd = sim_is_device(dst);
        sd = sim_is_device(src);
    }
    if (k > cudaMemcpyDefault || sim_is_device(dst) != dd || sim_is_device(src) != sd)
        return last_ = cudaErrorInvalidMemcpyDirection;
    if ((dd && !alloc_of(dst, n)) || (sd && !alloc_of(src, n)))
        return last_ = cudaErrorInvalidValue; // past the end of an allocation
    *ends = dd | sd << 1;
    return cudaSuccess;
}

// SEQREC_SIM_TRACE=FILE: a line a device op run, appended to FILE, to
// read a step's work and its grids (how many launches, and which run few
// blocks for large inputs) without a GPU. A kernel's line is its name,
// blocks, threads a block and dynamic shared bytes; the other ops' are
// "memset,BYTES,0,0", "copy,BYTES,0,0" (to, from or within the device)
// and "gemm,0,0,0" (a cuBLAS or cuBLASLt call); "alloc,BYTES,0,0" and
// "free,BYTES,0,0" a cudaMalloc and a cudaFree. Not a timing: the
// simulated device's costs are not a GPU's.
static void trace_line(const char *name, unsigned long long a, unsigned b, size_t c)
{
    static FILE *f;
    static int tried;
    if (!tried) {
        tried = 1;
        const char *v = getenv("SEQREC_SIM_TRACE");
        if (v && *v && !(f = fopen(v, "a")))
            die("SEQREC_SIM_TRACE: cannot open %s", v);
        if (f)
            setvbuf(f, nullptr, _IOLBF, 0);
    }
    if (f)
        fprintf(f, "%s,%llu,%u,%zu\n", name, a, b, c);
}

static void trace_launch(const char *kern, dim3 grid, dim3 block, size_t shmem)
{
    trace_line(kern, (unsigned long long)grid.x * grid.y * grid.z, block.x * block.y * block.z,
               shmem);
}

static cudaError_t copy(void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
    int ends = 0;
    if (!n)
        return cudaSuccess;
    cudaError_t e = copy_ends(dst, src, n, k, &ends);
    if (e != cudaSuccess)
        return e;
    int dd = ends & 1, sd = ends >> 1;
    if (dd || sd)
        trace_line("copy", n, 0, 0);
    if (dd)
        SIM_UNPOISON(dst, n);
    if (sd)
        SIM_UNPOISON((void *)src, n);
    if (sd && !dd && host_only())
        memset(dst, 0, n);
    else if (!(sd && dd && host_only())) // device to device: the device's work
        memmove(dst, src, n);
    if (dd && !in_kernel_)
        SIM_POISON(dst, n);
    if (sd && !in_kernel_)
        SIM_POISON((void *)src, n);
    return cudaSuccess;
}
// A synchronous copy or memset is unsafe during capture (it runs on the
// legacy stream and waits)
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k)
{
    if (strict() || implicit(nullptr))
        return refuse(strict() ? cudaErrorStreamCaptureUnsupported : cudaErrorStreamCaptureImplicit);
    return copy(dst, src, n, k);
}
// Captured, a copy reads its source on replay. Pageable host memory cannot
// be captured (its copy is staged at the call): only cudaHostAlloc'd.
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k, cudaStream_t s)
{
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    if (!capturing(s))
        return copy(dst, src, n, k);
    int ends = 0;
    cudaError_t e = n ? copy_ends(dst, src, n, k, &ends) : cudaSuccess;
    if (e != cudaSuccess)
        return e;
    if (n && ((!(ends & 1) && !pinned_of(dst, n)) || (!(ends & 2) && !pinned_of(src, n))))
        return refuse();
    return record(s, "memcpy", [=]() { return copy(dst, src, n, k); });
}
static cudaError_t fill(void *p, int v, size_t n)
{
    if (!n)
        return cudaSuccess;
    if (!alloc_of(p, n))
        return last_ = cudaErrorInvalidValue;
    trace_line("memset", n, 0, 0);
    if (host_only())
        return cudaSuccess;
    SIM_UNPOISON(p, n);
    memset(p, v, n);
    SIM_POISON(p, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (strict() || implicit(nullptr))
        return refuse(strict() ? cudaErrorStreamCaptureUnsupported : cudaErrorStreamCaptureImplicit);
    return fill(p, v, n);
}
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s)
{
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    if (!capturing(s))
        return fill(p, v, n);
    if (n && !alloc_of(p, n))
        return last_ = cudaErrorInvalidValue;
    return record(s, "memset", [=]() { return fill(p, v, n); });
}

// ---------------------------------------------------------------- launch
// getcontext returns twice: kept out of sim_run's frame
__attribute__((noinline)) static void init_fiber(ucontext_t *c, unsigned i)
{
    getcontext(c);
    c->uc_stack.ss_sp = stack_of(i);
    c->uc_stack.ss_size = SIM_STACK;
    c->uc_link = nullptr;
    makecontext(c, fiber_main, 0);
}

// Runs thread i until it waits or ends: the first time on its stack a fresh
// fiber (swapcontext, never resumed: the fiber comes back by jump()),
// then a jump() to where it waits
SIM_NOIPA static void enter(block_run *r, unsigned i)
{
    r->cur = i;
#ifdef SIM_ASAN
    __sanitizer_start_switch_fiber(&r->sched_fake, stack_of(i), SIM_STACK);
#endif
    if (!__builtin_setjmp(r->sched_jb)) {
        if (slots_[i].started)
            jump(slots_[i].jb);
        slots_[i].started = 1;
        init_fiber(&r->start, i);
        swapcontext(&r->sched, &r->start);
        abort(); // never resumed
    }
#ifdef SIM_ASAN
    __sanitizer_finish_switch_fiber(r->sched_fake, nullptr, nullptr);
#endif
}

static cudaError_t run_grid(const char *kern, dim3 grid, dim3 block, size_t shmem,
                           char *sh_lo, char *sh_hi, const std::function<void()> &body);

// ---------------------------------------------------------------- order
// The order a launch's blocks, and a block's threads between barriers, run
// in (SEQREC_SIM_ORDER): "forward" (the default), "reverse", or
// "shuffle[:SEED]", a fresh permutation of the blocks and of each block's
// threads at every launch. A real GPU runs blocks in any order and a
// block's warps interleaved: a kernel whose result changes with the order
// (one block reading what another writes in the same launch, a thread
// reading shared or global memory another wrote without a barrier between)
// is wrong there, and these orders make it differ here (make unit-sim-order).
namespace {
enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_SHUFFLE };
struct order_state {
    int mode = -1;         // -1: SEQREC_SIM_ORDER not read yet
    uint64_t rng = 0;      // the shuffle's generator (splitmix64)
    std::vector<unsigned> perm;
};
order_state order_;
} // namespace

static uint64_t order_next(void)
{
    uint64_t z = (order_.rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

void sim_order(const char *v)
{
    order_.mode = ORDER_FORWARD;
    if (!v || !*v || !strcmp(v, "forward"))
        return;
    if (!strcmp(v, "reverse")) {
        order_.mode = ORDER_REVERSE;
        return;
    }
    if (strncmp(v, "shuffle", 7) || (v[7] && v[7] != ':'))
        die("SEQREC_SIM_ORDER=%s: give forward, reverse or shuffle[:SEED]", v);
    order_.mode = ORDER_SHUFFLE;
    order_.rng = v[7] ? strtoull(v + 8, nullptr, 10) : 1;
}

static void order_init(void)
{
    if (order_.mode < 0)
        sim_order(getenv("SEQREC_SIM_ORDER"));
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// A launch's block order as i -> (a i + c) mod n: a bijection when a is
// prime to n, and no table of a grid's (up to 2^31) blocks
struct block_order {
    uint64_t n, a, c;
    uint64_t at(uint64_t i) const { return (uint64_t)(((unsigned __int128)a * i + c) % n); }
};

static block_order order_blocks(uint64_t n)
{
    block_order o = {n, 1, 0};
    if (order_.mode == ORDER_REVERSE) {
        o.a = n - 1; // -1 mod n
        o.c = n - 1;
        if (n == 1)
            o.a = 1, o.c = 0;
    } else if (order_.mode == ORDER_SHUFFLE && n > 1) {
        o.a = order_next() % n | 1;
        while (gcd64(o.a, n) != 1)
            o.a = (o.a + 2) % n;
        o.c = order_next() % n;
    }
    return o;
}

// The order of a block's n threads (order_.perm)
static void order_threads(unsigned n)
{
    order_.perm.resize(n);
    for (unsigned i = 0; i < n; i++)
        order_.perm[i] = order_.mode == ORDER_REVERSE ? n - 1 - i : i;
    if (order_.mode != ORDER_SHUFFLE)
        return;
    for (unsigned i = n; i > 1; i--) { // Fisher-Yates
        unsigned j = (unsigned)(order_next() % i);
        unsigned t = order_.perm[i - 1];
        order_.perm[i - 1] = order_.perm[j];
        order_.perm[j] = t;
    }
}

// A launch: checked when queued; run now, or recorded (a copy of the body,
// which holds the arguments by value) while its stream captures
cudaError_t sim_run(const char *kern, dim3 grid, dim3 block, size_t shmem, cudaStream_t s,
                    char *sh_lo, char *sh_hi, const std::function<void()> &body)
{
    size_t n = (size_t)block.x * block.y * block.z;
    if (!n || n > 1024 || block.z > 64 || !grid.x || !grid.y || !grid.z || grid.y > 65535 ||
        grid.z > 65535)
        return last_ = cudaErrorInvalidConfiguration;
    if (shmem > 48 * 1024)
        return last_ = cudaErrorInvalidValue;
    if (run_)
        die("kernel %s launched from inside a kernel", kern);
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    if (capturing(s)) {
        std::function<void()> b = body;
        return record(s, kern,
                      [=]() { return run_grid(kern, grid, block, shmem, sh_lo, sh_hi, b); });
    }
    return run_grid(kern, grid, block, shmem, sh_lo, sh_hi, body);
}


// sh_lo .. sh_hi: the kernel's file's static shared memory (sim_cuda.h,
// __shared__), NULL under ASan
static cudaError_t run_grid(const char *kern, dim3 grid, dim3 block, size_t shmem,
                           char *sh_lo, char *sh_hi, const std::function<void()> &body)
{
    size_t n = (size_t)block.x * block.y * block.z;
    trace_launch(kern, grid, block, shmem);
    if (host_only())
        return cudaSuccess;
    if (!stacks_) {
        page_ = 4096;
        size_t bytes = 1024 * (SIM_STACK + page_);
        void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            die("cannot map the fibers' stacks%s", "");
        stacks_ = (char *)p;
        slots_ = (stack_slot *)calloc(1024, sizeof *slots_);
        if (!slots_)
            die("cannot allocate the fibers' slots%s", "");
        for (unsigned i = 0; i < 1024; i++)
            mprotect(stack_of(i) - page_, page_, PROT_NONE);
    }
    if (dyn_bytes_ < shmem || !dyn_) {
        free(dyn_);
        dyn_bytes_ = shmem > 16 ? shmem : 16;
        dyn_ = aligned_alloc(16, (dyn_bytes_ + 15) & ~(size_t)15);
    }
    in_kernel_ = 1;
    unpoison_all();
    block_run r;
    r.kern = kern;
    r.body = &body;
    r.n = (unsigned)n;
    r.nwarps = (r.n + 31) / 32;
    r.f.resize(n);
    r.wbar.resize(r.nwarps);
    r.slot.assign((size_t)r.nwarps * 64, 0);
    order_init();
    uint64_t nb = (uint64_t)grid.x * grid.y * grid.z;
    block_order bo = order_blocks(nb);
    for (uint64_t ib = 0; ib < nb; ib++) {
        uint64_t lb = bo.at(ib);
        unsigned bx = (unsigned)(lb % grid.x), by = (unsigned)(lb / grid.x % grid.y),
                 bz = (unsigned)(lb / ((uint64_t)grid.x * grid.y));
        memset(dyn_, 0xcd, shmem); // the launch's bytes: the rest it cannot read
        if (sh_lo && sh_hi > sh_lo)
            memset(sh_lo, 0xcd, (size_t)(sh_hi - sh_lo));
        order_threads(r.n);
        r.bar = barrier();
        for (auto &w : r.wbar)
            w = barrier();
        for (unsigned i = 0; i < r.n; i++) {
            fiber *f = &r.f[i];
            f->st.tid = dim3(i % block.x, (i / block.x) % block.y, i / (block.x * block.y));
            f->st.bid = dim3(bx, by, bz);
            f->st.bdim = block;
            f->st.gdim = grid;
            f->done = 0;
            f->fake_stack = nullptr;
            f->wait = nullptr;
        }
        r.finished = 0;
        run_ = &r;
        while (r.finished < r.n) {
            r.progress = 0;
            for (unsigned k = 0; k < r.n; k++) {
                unsigned i = order_.perm[k];
                const fiber *f = &r.f[i];
                if (f->done || (f->wait && f->wait->gen == f->wait_gen))
                    continue;
                enter(&r, i);
            }
            if (!r.progress && r.finished < r.n)
                die(r.finished ? "divergent __syncthreads in kernel %s: a thread ended "
                                 "while others wait at a barrier"
                               : "divergent __syncthreads in kernel %s: the threads "
                                 "wait at different barriers",
                    kern);
        }
        run_ = nullptr;
    }
    poison_all();
    in_kernel_ = 0;
    return cudaSuccess;
}

// ---------------------------------------------------------------- runtime
const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice:
        return "this is the test harness's simulated device (tests/sim): it runs only with "
               "SEQREC_SIMULATED_DEVICE=1";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorStreamCaptureUnsupported: return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorCapturedEvent:
        return "operation not permitted on an event last recorded in a capturing stream";
    default: return "unknown error";
    }
}
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_;
    last_ = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_; }
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = enabled() ? 1 : 0;
    return *n ? cudaSuccess : cudaErrorNoDevice;
}
cudaError_t cudaSetDevice(int d) { return d == 0 && enabled() ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    if (d != 0 || !enabled())
        return cudaErrorInvalidDevice;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "simulated device");
    p->totalGlobalMem = arena_size();
    p->sharedMemPerBlock = 48 * 1024;
    p->major = 9;
    p->minor = 0;
    // 4, or SEQREC_SIM_SMS (1-1024): an H200's 132 gives a trace the grids
    // that the real device would launch
    const char *sms = getenv("SEQREC_SIM_SMS");
    long n = sms && *sms ? strtol(sms, nullptr, 10) : 4;
    if (n < 1 || n > 1024)
        die("SEQREC_SIM_SMS=%s: give 1 to 1024", sms);
    p->multiProcessorCount = (int)n;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags)
{
    *s = new sim_stream{(int)flags, nullptr, 0, cudaStreamCaptureModeGlobal, 0};
    return cudaSuccess;
}
// waiting for a capturing stream (or, for the legacy stream, one it
// implicitly waits for) is refused
static int stuck(unsigned gen) { return gen && gen == hang_gen_; }
void sim_stream_stick(cudaStream_t s)
{
    if (s)
        s->stuck = hang_gen_;
}
void sim_unstick_all(void) { hang_gen_++; }
cudaError_t cudaStreamSynchronize(cudaStream_t s)
{
    if (capturing(s))
        return refuse();
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    if (s && stuck(s->stuck))
        die("%s on a stream that never finishes (SEQREC_SIM_NCCL_HANG): a GPU would hang here",
            "cudaStreamSynchronize");
    return cudaSuccess;
}
cudaError_t cudaStreamQuery(cudaStream_t s)
{
    if (capturing(s))
        return refuse();
    return s && stuck(s->stuck) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s)
{
    if (capturing(s)) { // the capture ends with it
        delete s->g;
        capture_ = nullptr;
    }
    delete s;
    return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags)
{
    *e = new sim_event{(int)flags, 0, 0, 0, 0.0};
    return cudaSuccess;
}
// Recorded in a capture, an event adds no node (as cudaEventRecord without
// cudaEventRecordExternal): it marks a point of the capture, which only
// cudaStreamWaitEvent can use.
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s)
{
    if (!e)
        return cudaErrorInvalidResourceHandle;
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    if (capturing(s) && s->invalid)
        return last_ = cudaErrorStreamCaptureInvalidated;
    e->captured = capturing(s);
    e->stuck = s && stuck(s->stuck) ? s->stuck : 0;
    if (!e->captured) { // the stream's work so far has run: now is when it is reached
        struct timespec t;
        clock_gettime(CLOCK_MONOTONIC, &t);
        e->at = 1e3 * (double)t.tv_sec + 1e-6 * (double)t.tv_nsec;
        e->recorded = 1;
    }
    return cudaSuccess;
}
// Streams run in order, one at a time: an event is always already reached.
// A captured event waited for by another stream would fork the capture
// into it: not modelled (one capturing stream), refused.
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned)
{
    if (!e)
        return cudaErrorInvalidResourceHandle;
    if (e->captured && capture_ && !capturing(s))
        return refuse(cudaErrorNotSupported);
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    if (s && stuck(e->stuck))
        s->stuck = e->stuck;
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e)
{
    if (!e)
        return cudaErrorInvalidResourceHandle;
    if (e->captured && capture_)
        return refuse(cudaErrorCapturedEvent);
    if (stuck(e->stuck))
        die("%s on an event that never comes (SEQREC_SIM_NCCL_HANG): a GPU would hang here",
            "cudaEventSynchronize");
    return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e)
{
    if (!e)
        return cudaErrorInvalidResourceHandle;
    if (e->captured && capture_)
        return refuse(cudaErrorCapturedEvent);
    return stuck(e->stuck) ? cudaErrorNotReady : cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e)
{
    delete e;
    return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b)
{
    if (!a || !b || (a->flags & cudaEventDisableTiming) || (b->flags & cudaEventDisableTiming))
        return cudaErrorInvalidResourceHandle;
    if (!a->recorded || !b->recorded || a->captured || b->captured)
        return cudaErrorInvalidResourceHandle; // never recorded, or a capture's point
    *ms = (float)(b->at - a->at); // the host's time between them: the simulation's cost
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return capture_ ? refuse() : cudaSuccess; }

// ---------------------------------------------------------------- graphs
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode)
{
    if (!s) // the legacy stream cannot capture
        return last_ = cudaErrorStreamCaptureUnsupported;
    if ((unsigned)mode > cudaStreamCaptureModeRelaxed)
        return last_ = cudaErrorInvalidValue;
    if (s == capture_)
        return last_ = cudaErrorIllegalState;
    if (capture_) // a second capturing stream: not modelled
        return last_ = cudaErrorNotSupported;
    s->g = new sim_graph;
    s->invalid = 0;
    s->mode = mode;
    capture_ = s;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g)
{
    if (!g)
        return last_ = cudaErrorInvalidValue;
    *g = nullptr;
    if (!capturing(s))
        return last_ = cudaErrorIllegalState;
    capture_ = nullptr;
    sim_graph *got = s->g;
    s->g = nullptr;
    if (s->invalid) {
        delete got;
        return last_ = cudaErrorStreamCaptureInvalidated;
    }
    *g = got;
    return cudaSuccess;
}
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *st)
{
    if (!st)
        return last_ = cudaErrorInvalidValue;
    if (implicit(s)) // the capture is not invalidated
        return last_ = cudaErrorStreamCaptureImplicit;
    *st = !capturing(s) ? cudaStreamCaptureStatusNone
          : s->invalid  ? cudaStreamCaptureStatusInvalidated
                        : cudaStreamCaptureStatusActive;
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long)
{
    if (!e || !g)
        return last_ = cudaErrorInvalidValue;
    *e = new sim_graph_exec;
    for (auto &n : g->nodes)
        (*e)->nodes.push_back(*n);
    return cudaSuccess;
}
// Replay: the nodes one after the other, in capture order (a real graph
// may run independent nodes concurrently). A graph launch is not captured
// here (newer CUDA can capture it as a child graph): refused.
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s)
{
    if (!e)
        return last_ = cudaErrorInvalidResourceHandle;
    if (capturing(s))
        return refuse();
    if (implicit(s))
        return refuse(cudaErrorStreamCaptureImplicit);
    for (auto &n : e->nodes) {
        // host-only: a replay is the device's work, but for its copies
        // (one to the host gives zeros there)
        if (host_only() && strcmp(n.what, "memcpy"))
            continue;
        cudaError_t r = n.run();
        if (r != cudaSuccess)
            return last_ = r;
    }
    return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e)
{
    if (!e)
        return last_ = cudaErrorInvalidValue;
    delete e;
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g)
{
    if (!g)
        return last_ = cudaErrorInvalidValue;
    delete g;
    return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n)
{
    if (!g || !n)
        return last_ = cudaErrorInvalidValue;
    size_t have = g->nodes.size();
    if (nodes) {
        for (size_t i = 0; i < *n; i++)
            nodes[i] = i < have ? g->nodes[i].get() : nullptr;
        if (have < *n)
            *n = have;
    } else {
        *n = have;
    }
    return cudaSuccess;
}

// ---------------------------------------------------------------- cuBLAS
struct sim_blas {
    int math;
    cudaStream_t stream; // where its calls queue (0: the legacy stream)
};
cublasStatus_t cublasCreate(cublasHandle_t *h)
{
    *h = new sim_blas{0, nullptr};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy(cublasHandle_t h)
{
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *ws, size_t bytes)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    return bytes && !alloc_of(ws, bytes) ? CUBLAS_STATUS_INVALID_VALUE : CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    h->math = (int)m;
    return CUBLAS_STATUS_SUCCESS;
}
// How a GEMM rounds its inputs before the fp32 products and sums: as
// cublasSgemm under CUBLAS_PEDANTIC_MATH (not at all), under
// CUBLAS_TF32_TENSOR_OP_MATH (10 mantissa bits), or as cublasGemmEx's
// CUBLAS_COMPUTE_32F_FAST_16BF (7). A test that compares a GEMM's result
// with the fp32 CPU at 1e-4 without asking for fp32 then fails here, as it
// would on a GPU, instead of passing on exact products.
enum { RND_FP32, RND_TF32, RND_BF16 };

// x rounded to the nearest float of `drop` fewer mantissa bits (ties to
// even), as a float; NaN and infinities kept
static float mant_round(float x, int drop)
{
    uint32_t u, half = (1u << (drop - 1)) - 1u;
    memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + half + ((u >> drop) & 1u)) & ~((1u << drop) - 1u);
    memcpy(&x, &u, 4);
    return x;
}

// A host copy of the rows x cols column-major matrix at M (leading
// dimension ld) rounded as rnd says, packed (leading dimension rows)
static std::vector<float> rounded_copy(const float *M, int rows, int cols, int ld, int rnd)
{
    int drop = rnd == RND_BF16 ? 16 : 13;
    std::vector<float> out((size_t)rows * (size_t)cols);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++)
            out[(size_t)c * rows + r] = mant_round(M[(size_t)c * ld + r], drop);
    return out;
}

// Dies unless A, B and C (as op(A), op(B) read them) lie wholly in device
// memory; m, n > 0; sz: the bytes of an element of A, B and C
static void gemm_check(const char *who, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                       int k, const void *A, int lda, const void *B, int ldb, const void *C,
                       int ldc, const size_t sz[3] = nullptr)
{
    static const size_t four[3] = {4, 4, 4};
    const size_t *s = sz ? sz : four;
    size_t ar = ta == CUBLAS_OP_N ? (size_t)m : (size_t)k, ac = ta == CUBLAS_OP_N ? (size_t)k : (size_t)m;
    size_t br = tb == CUBLAS_OP_N ? (size_t)k : (size_t)n, bc = tb == CUBLAS_OP_N ? (size_t)n : (size_t)k;
    if ((k && (!alloc_of(A, s[0] * ((ac - 1) * (size_t)lda + ar)) ||
               !alloc_of(B, s[1] * ((bc - 1) * (size_t)ldb + br)))) ||
        !alloc_of(C, s[2] * ((size_t)(n - 1) * (size_t)ldc + (size_t)m)))
        die("%s: a matrix is not (wholly) in device memory", who);
}

// C = alpha op(A) op(B) + beta C, with A and B first rounded as rnd says
// (k > 0 then)
static cudaError_t gemm_now(int rnd, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, float alpha, const float *A, int lda, const float *B, int ldb,
                            float beta, float *C, int ldc)
{
    gemm_check(rnd == RND_BF16 ? "cublasGemmEx" : "cublasSgemm", ta, tb, m, n, k, A, lda, B, ldb,
               C, ldc);
    if (host_only())
        return cudaSuccess;
    CBLAS_TRANSPOSE oa = ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    CBLAS_TRANSPOSE ob = tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    unpoison_all();
    if (rnd != RND_FP32) {
        int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
        int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
        std::vector<float> ra = rounded_copy(A, ar, ac, lda, rnd);
        std::vector<float> rb = rounded_copy(B, br, bc, ldb, rnd);
        cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, ra.data(), ar, rb.data(), br, beta,
                    C, ldc);
    } else {
        cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
    }
    poison_all();
    return cudaSuccess;
}

// A cuBLAS call's work on stream s: run now, or recorded while s captures,
// with what it reads by value bound now (host-pointer mode: cuBLAS reads
// alpha and beta when called, a graph keeps the values). A template, so
// that a call run now makes no std::function (bench-gpu-host times it).
template <class F> static cublasStatus_t blas_queue(cudaStream_t s, const char *who, F run)
{
    if (implicit(s)) {
        refuse(cudaErrorStreamCaptureImplicit);
        return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    auto op = [run]() { // traced when it runs: eagerly, or in each replay
        trace_line("gemm", 0, 0, 0);
        return run();
    };
    if (!capturing(s)) {
        op();
        return CUBLAS_STATUS_SUCCESS;
    }
    return record(s, who, op) == cudaSuccess ? CUBLAS_STATUS_SUCCESS
                                              : CUBLAS_STATUS_EXECUTION_FAILED;
}

// A GEMM on h's stream (blas_queue); m, n > 0
static cublasStatus_t gemm_queue(cublasHandle_t h, int rnd, cublasOperation_t ta,
                                 cublasOperation_t tb, int m, int n, int k, const float *alpha,
                                 const float *A, int lda, const float *B, int ldb,
                                 const float *beta, float *C, int ldc)
{
    const char *who = rnd == RND_BF16 ? "cublasGemmEx" : "cublasSgemm";
    gemm_check(who, ta, tb, m, n, k, A, lda, B, ldb, C, ldc);
    float a = *alpha, b = *beta;
    return blas_queue(h->stream, who, [=]() {
        return gemm_now(rnd, ta, tb, m, n, k, a, A, lda, B, ldb, b, C, ldc);
    });
}

// bf16 storage (CUDA_R_16BF): a float's top half. Its value as a float
// (exact), and the bf16 nearest a float (ties to even; NaN stays NaN)
static float bf16_value(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float x;
    memcpy(&x, &u, 4);
    return x;
}
static uint16_t bf16_round(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// A host copy, as floats, of the rows x cols column-major matrix at M of
// type t (leading dimension ld), packed (leading dimension rows)
static std::vector<float> float_copy(const void *M, cudaDataType_t t, int rows, int cols, int ld)
{
    std::vector<float> out((size_t)rows * (size_t)cols);
    for (int c = 0; c < cols; c++)
        for (int r = 0; r < rows; r++) {
            size_t i = (size_t)c * ld + r;
            out[(size_t)c * rows + r] = t == CUDA_R_16BF ? bf16_value(((const uint16_t *)M)[i])
                                                         : ((const float *)M)[i];
        }
    return out;
}

// C = alpha op(A) op(B) + beta C over bf16 A and B (CUBLAS_COMPUTE_32F):
// their exact values in an fp32 GEMM, into float C, or into bf16 C read
// as floats and the result rounded (beta 0: C not read, as cuBLAS)
static cudaError_t gemm16_now(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              float alpha, const void *A, int lda, const void *B, int ldb,
                              float beta, void *C, cudaDataType_t ct, int ldc)
{
    if (host_only())
        return cudaSuccess;
    unpoison_all();
    int ar = ta == CUBLAS_OP_N ? m : k, ac = ta == CUBLAS_OP_N ? k : m;
    int br = tb == CUBLAS_OP_N ? k : n, bc = tb == CUBLAS_OP_N ? n : k;
    std::vector<float> fa = float_copy(A, CUDA_R_16BF, ar, ac, lda);
    std::vector<float> fb = float_copy(B, CUDA_R_16BF, br, bc, ldb);
    ar = ar > 0 ? ar : 1; // k = 0: BLAS's leading dimensions are at least 1
    br = br > 0 ? br : 1;
    CBLAS_TRANSPOSE oa = ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    CBLAS_TRANSPOSE ob = tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans;
    if (ct == CUDA_R_32F) {
        cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, fa.data(), ar, fb.data(), br, beta,
                    (float *)C, ldc);
    } else {
        std::vector<float> fc((size_t)m * (size_t)n, 0.0f);
        if (beta != 0.0f)
            fc = float_copy(C, CUDA_R_16BF, m, n, ldc);
        cblas_sgemm(CblasColMajor, oa, ob, m, n, k, alpha, fa.data(), ar, fb.data(), br, beta,
                    fc.data(), m);
        for (int c = 0; c < n; c++)
            for (int r = 0; r < m; r++)
                ((uint16_t *)C)[(size_t)c * ldc + r] = bf16_round(fc[(size_t)c * m + r]);
    }
    poison_all();
    return cudaSuccess;
}

// gemm16_now on h's stream (blas_queue)
static cublasStatus_t gemm16_queue(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb,
                                   int m, int n, int k, const float *alpha, const void *A,
                                   int lda, const void *B, int ldb, const float *beta, void *C,
                                   cudaDataType_t ct, int ldc)
{
    const size_t sz[3] = {2, 2, ct == CUDA_R_16BF ? (size_t)2 : (size_t)4};
    gemm_check("cublasGemmEx (bf16)", ta, tb, m, n, k, A, lda, B, ldb, C, ldc, sz);
    float a = *alpha, b = *beta;
    return blas_queue(h->stream, "cublasGemmEx (bf16)", [=]() {
        return gemm16_now(ta, tb, m, n, k, a, A, lda, B, ldb, b, C, ct, ldc);
    });
}

cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                            int n, int k, const void *alpha, const void *A, cudaDataType_t at,
                            int lda, const void *B, cudaDataType_t bt, int ldb, const void *beta,
                            void *C, cudaDataType_t ct, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo)
{
    (void)algo;
    // a pedantic handle turns COMPUTE_32F into its pedantic form, and what
    // it does to the FAST types is not documented: the backend never asks
    // (be_set_precision), and a test that did would fail here
    if (h && h->math == CUBLAS_PEDANTIC_MATH &&
        (compute == CUBLAS_COMPUTE_32F_FAST_16BF || at == CUDA_R_16BF))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (at == CUDA_R_16BF && bt == CUDA_R_16BF && (ct == CUDA_R_32F || ct == CUDA_R_16BF) &&
        compute == CUBLAS_COMPUTE_32F) {
        if (!h)
            return CUBLAS_STATUS_NOT_INITIALIZED;
        if (m < 0 || n < 0 || k < 0)
            return CUBLAS_STATUS_INVALID_VALUE;
        if (!m || !n)
            return CUBLAS_STATUS_SUCCESS;
        return gemm16_queue(h, ta, tb, m, n, k, (const float *)alpha, A, lda, B, ldb,
                            (const float *)beta, C, ct, ldc);
    }
    if (at != CUDA_R_32F || bt != CUDA_R_32F || ct != CUDA_R_32F)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (compute != CUBLAS_COMPUTE_32F_FAST_16BF || !m || !n || !k)
        return cublasSgemm(h, ta, tb, m, n, k, (const float *)alpha, (const float *)A, lda,
                           (const float *)B, ldb, (const float *)beta, (float *)C, ldc);
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    return gemm_queue(h, RND_BF16, ta, tb, m, n, k, (const float *)alpha, (const float *)A, lda,
                      (const float *)B, ldb, (const float *)beta, (float *)C, ldc);
}

cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m,
                           int n, int k, const float *alpha, const float *A, int lda,
                           const float *B, int ldb, const float *beta, float *C, int ldc)
{
    if (!h)
        return CUBLAS_STATUS_NOT_INITIALIZED;
    if (m < 0 || n < 0 || k < 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!m || !n)
        return CUBLAS_STATUS_SUCCESS;
    int rnd = h->math == CUBLAS_TF32_TENSOR_OP_MATH ? RND_TF32 : RND_FP32;
    return gemm_queue(h, rnd, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

// ---- cuBLASLt (sim_cuda.h): descriptors as plain structs ----
struct sim_lt {
    int unused;
};
struct sim_lt_desc {
    cublasComputeType_t compute;
    int ta, tb, epilogue;
    const float *bias;
};
struct sim_lt_layout {
    cudaDataType_t type;
    uint64_t rows, cols;
    int64_t ld;
};
struct sim_lt_pref {
    size_t ws;
    uint32_t align[4]; // the minimum alignments of A, B, C and D
};

// the descriptors are made with new and freed with delete
template <class T> static cublasStatus_t lt_delete(T *p)
{
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = new sim_lt{0};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) { return lt_delete(h); }
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (scale != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    *d = new sim_lt_desc{compute, 0, 0, CUBLASLT_EPILOGUE_DEFAULT, nullptr};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) { return lt_delete(d); }
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t attr,
                                              const void *buf, size_t bytes)
{
    if (!d || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
    case CUBLASLT_MATMUL_DESC_EPILOGUE: {
        int32_t v; // cublasOperation_t and cublasLtEpilogue_t are 32-bit
        if (bytes != sizeof v)
            return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&v, buf, sizeof v);
        (attr == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta
         : attr == CUBLASLT_MATMUL_DESC_TRANSB ? d->tb : d->epilogue) = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (bytes != sizeof d->bias)
            return CUBLAS_STATUS_INVALID_VALUE;
        memcpy(&d->bias, buf, sizeof d->bias);
        return CUBLAS_STATUS_SUCCESS;
    }
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (ld < (int64_t)(rows ? rows : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    *l = new sim_lt_layout{type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) { return lt_delete(l); }
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = new sim_lt_pref{0, {256, 256, 256, 256}};
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) { return lt_delete(p); }
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void *buf, size_t bytes)
{
    if (!p || !buf)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES && bytes == sizeof p->ws) {
        memcpy(&p->ws, buf, sizeof p->ws);
        return CUBLAS_STATUS_SUCCESS;
    }
    int i = (int)attr - (int)CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES;
    if (i < 0 || i > 3 || bytes != sizeof(uint32_t))
        return CUBLAS_STATUS_INVALID_VALUE;
    memcpy(&p->align[i], buf, sizeof(uint32_t));
    return CUBLAS_STATUS_SUCCESS;
}

// The GEMM's m, n, k from the layouts; 0 when they do not fit together or
// are not what the simulated cuBLASLt does (float; C and D alike)
static int lt_shape(const sim_lt_desc *d, const sim_lt_layout *A, const sim_lt_layout *B,
                    const sim_lt_layout *C, const sim_lt_layout *D, int *m, int *n, int *k)
{
    if (!d || !A || !B || !C || !D || A->type != CUDA_R_32F || B->type != CUDA_R_32F ||
        C->type != CUDA_R_32F || D->type != CUDA_R_32F || C->rows != D->rows ||
        C->cols != D->cols || C->ld != D->ld ||
        (d->epilogue != CUBLASLT_EPILOGUE_DEFAULT && d->epilogue != CUBLASLT_EPILOGUE_BIAS))
        return 0;
    uint64_t am = d->ta ? A->cols : A->rows, ak = d->ta ? A->rows : A->cols;
    uint64_t bk = d->tb ? B->cols : B->rows, bn = d->tb ? B->rows : B->cols;
    if (am != D->rows || bn != D->cols || ak != bk || am > INT32_MAX || bn > INT32_MAX ||
        ak > INT32_MAX)
        return 0;
    *m = (int)am;
    *n = (int)bn;
    *k = (int)ak;
    return 1;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t *results,
                                              int *returned)
{
    int m, n, k;
    const char *none = getenv("SEQREC_SIM_LT_NONE");
    *returned = 0;
    if (!h || !p || requested < 1 || !results)
        return CUBLAS_STATUS_INVALID_VALUE;
    if ((none && *none) || !lt_shape(d, A, B, C, D, &m, &n, &k))
        return CUBLAS_STATUS_NOT_SUPPORTED;
    memset(results, 0, sizeof *results);
    for (int i = 0; i < 4; i++) // what the algorithm assumes of the operands
        results[0].algo.data[i] = p->align[i];
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// D = alpha op(A) op(B) + beta D (+ bias[r] on row r of every column),
// now: what a cublasLtMatmul queued (C is D)
static cudaError_t lt_now(int rnd, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                          int k, float alpha, const float *A, int lda, const float *B, int ldb,
                          float beta, float *D, int ldd, const float *bias)
{
    gemm_now(rnd, ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, D, ldd);
    if (!bias || host_only())
        return cudaSuccess;
    unpoison_all();
    for (int c = 0; c < n; c++)
        for (int r = 0; r < m; r++)
            D[(size_t)c * ldd + r] += bias[r];
    poison_all();
    return cudaSuccess;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Al, const void *B,
                              cublasLtMatrixLayout_t Bl, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cl, void *D, cublasLtMatrixLayout_t Dl,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t s)
{
    int m, n, k;
    if (!h || !alpha || !beta || !algo)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (!lt_shape(d, Al, Bl, Cl, Dl, &m, &n, &k) || C != D)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    const void *ops[4] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        if ((uintptr_t)ops[i] % (algo->data[i] ? algo->data[i] : 1))
            return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!m || !n)
        return CUBLAS_STATUS_SUCCESS;
    cublasOperation_t ta = d->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = d->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    gemm_check("cublasLtMatmul", ta, tb, m, n, k, A, (int)Al->ld, B, (int)Bl->ld, D, (int)Dl->ld);
    const float *bias = d->epilogue == CUBLASLT_EPILOGUE_BIAS ? d->bias : nullptr;
    if (d->epilogue == CUBLASLT_EPILOGUE_BIAS && !alloc_of(bias, 4 * (size_t)m))
        die("cublasLtMatmul: the bias is not (wholly) in device memory%s", "");
    if (ws_bytes && !alloc_of(ws, ws_bytes))
        die("cublasLtMatmul: the workspace is not in device memory%s", "");
    int rnd = d->compute == CUBLAS_COMPUTE_32F_FAST_TF32   ? RND_TF32
              : d->compute == CUBLAS_COMPUTE_32F_FAST_16BF ? RND_BF16
                                                           : RND_FP32;
    float a = *(const float *)alpha, b = *(const float *)beta;
    int lda = (int)Al->ld, ldb = (int)Bl->ld, ldd = (int)Dl->ld;
    const float *fa = (const float *)A, *fb = (const float *)B;
    float *fd = (float *)D;
    return blas_queue(s, "cublasLtMatmul", [=]() {
        return lt_now(rnd, ta, tb, m, n, k, a, fa, lda, fb, ldb, b, fd, ldd, bias);
    });
}
