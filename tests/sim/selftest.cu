// selftest.cu - the simulated device's own checks (make unit-sim): barrier
// order, warp shuffles, dynamic shared memory, several blocks, the block
// and thread orders (SEQREC_SIM_ORDER), garbage in what nothing wrote
// (static shared memory, new device memory), and that the harness aborts on a
// divergent __syncthreads, on a host pointer passed to a kernel and (under
// ASan) on a device pointer read by the host and on a kernel writing past
// its buffer; stream capture and graph replay, and the calls a capture
// refuses.
#include "sim_cuda.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

static int fails;
#define CHECK(c)                                                           \
    do {                                                                   \
        if (!(c)) {                                                        \
            fprintf(stderr, "selftest: %s:%d: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                       \
        }                                                                  \
    } while (0)

template <int N> static __global__ void __launch_bounds__(N) k_blocksum(const float *x, float *out)
{
    __shared__ float s[N];
    unsigned t = threadIdx.x;
    s[t] = x[blockIdx.x * N + t];
    __syncthreads();
    for (int h = N / 2; h > 0; h >>= 1) {
        if ((int)t < h)
            s[t] += s[t + h];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = s[0];
}

static __global__ void k_warp(const float *x, float *xo, float *down, int *ball)
{
    unsigned t = threadIdx.x;
    float v = x[t], a = v, b = v;
    for (int o = 16; o > 0; o >>= 1)
        a += __shfl_xor_sync(0xffffffffu, a, o);
    for (int o = 16; o > 0; o >>= 1)
        b += __shfl_down_sync(0xffffffffu, b, o);
    xo[t] = a;
    down[t] = b;
    unsigned m = __ballot_sync(0xffffffffu, (t & 1) != 0);
    int src = __shfl_sync(0xffffffffu, (int)t, 5);
    int up = __shfl_up_sync(0xffffffffu, (int)t, 1);
    ball[t] = (int)(m == 0xaaaaaaaau) + 2 * (src == (int)(t / 32 * 32 + 5)) +
              4 * (up == (t % 32 ? (int)t - 1 : (int)t));
}

static __global__ void k_dyn(float *out, int n)
{
    float *d = (float *)sim_dyn_shared();
    unsigned t = threadIdx.x;
    d[n - 1 - (int)t] = (float)t;
    __syncthreads();
    out[blockIdx.x * n + t] = d[t];
}

static __global__ void k_divergent(float *out)
{
    if (threadIdx.x < 5) {
        __syncthreads();
        out[threadIdx.x] = 1.0f;
    }
}

static __global__ void k_touch(float *out) { out[threadIdx.x] = 0.0f; }

static __global__ void k_axpb(float *y, const float *x, float a, float b, int n)
{
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] = a * x[i] + b;
}
static __global__ void k_add(float *y, const float *x, int n)
{
    int i = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n)
        y[i] += x[i];
}

// Reads, with no barrier between, what another block (the one before) and
// another thread (t ^ 1) of this launch write: racy on a GPU, so its
// result shows the order the simulated device ran them in
enum { OB = 8, OT = 64 };
static __global__ void k_order(float *g, float *prev, float *pair)
{
    unsigned b = blockIdx.x, t = threadIdx.x;
    g[b * OT + t] = (float)(1 + b * OT + t);
    prev[b * OT + t] = b ? g[(b - 1) * OT + t] : -1.0f;
    pair[b * OT + t] = g[b * OT + (t ^ 1)];
}

// How many of k_order's racy reads saw the other's write: blocks, threads
static void order_seen(const char *spec, int *blocks, int *threads)
{
    float *g = nullptr, *prev = nullptr, *pair = nullptr;
    static float zero[OB * OT], hp[OB * OT], hq[OB * OT];
    size_t bytes = sizeof zero;
    if (cudaMalloc((void **)&g, bytes) || cudaMalloc((void **)&prev, bytes) ||
        cudaMalloc((void **)&pair, bytes) ||
        cudaMemcpy(g, zero, bytes, cudaMemcpyHostToDevice))
        abort();
    sim_order(spec);
    CHECK(sim_launch("k_order", k_order, dim3(OB), dim3(OT), 0, nullptr, g, prev, pair) ==
          cudaSuccess);
    sim_order(nullptr);
    cudaMemcpy(hp, prev, bytes, cudaMemcpyDeviceToHost);
    cudaMemcpy(hq, pair, bytes, cudaMemcpyDeviceToHost);
    *blocks = *threads = 0;
    for (int b = 1; b < OB; b++)
        *blocks += hp[b * OT] != 0.0f;
    for (int t = 0; t < OT; t++)
        *threads += hq[t] != 0.0f;
    cudaFree(g);
    cudaFree(prev);
    cudaFree(pair);
}

// forward: every block sees the one before, odd threads their pair;
// reverse: no block, even threads; a shuffle: some of each
static void orders(void)
{
    int b, t;
    order_seen("forward", &b, &t);
    CHECK(b == OB - 1 && t == OT / 2);
    order_seen("reverse", &b, &t);
    CHECK(b == 0 && t == OT / 2);
    order_seen("shuffle:3", &b, &t);
    CHECK(b < OB - 1 && t > 0 && t < OT);
}

// Reads its static shared memory before writing it: a GPU's holds garbage
static __global__ void k_unwritten(unsigned *out)
{
    __shared__ unsigned s[32];
    out[blockIdx.x * 32 + threadIdx.x] = s[threadIdx.x];
    __syncthreads();
    s[threadIdx.x] = 0; // zeros the next block would read, were they kept
}

// What nothing wrote reads as garbage: static shared memory in every block
// (0xcd bytes), new device memory (0xff bytes: NaN floats)
static void garbage(void)
{
    unsigned *d = nullptr, h[2 * 32];
    CHECK(cudaMalloc((void **)&d, sizeof h) == cudaSuccess);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(h[0] == 0xffffffffu && h[63] == 0xffffffffu);
    CHECK(sim_launch("k_unwritten", k_unwritten, dim3(2), dim3(32), 0, nullptr, d) ==
          cudaSuccess);
    CHECK(cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost) == cudaSuccess);
#ifndef SIM_SHARED_ASAN // (under ASan red zones guard the arrays instead)
    for (int i = 0; i < 64; i++)
        CHECK(h[i] == 0xcdcdcdcdu);
#endif
    cudaFree(d);
}

static int child_aborts(void (*fn)(void))
{
    fflush(stdout);
    fflush(stderr);
    pid_t p = fork();
    if (p == 0) {
        fn();
        _exit(0);
    }
    int st = 0;
    waitpid(p, &st, 0);
    return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static float *dev(size_t n)
{
    void *p = nullptr;
    if (cudaMalloc(&p, n * sizeof(float)) != cudaSuccess)
        abort();
    return (float *)p;
}

static void divergent(void)
{
    float *d = dev(64);
    sim_launch("k_divergent", k_divergent, dim3(1), dim3(64), 0, nullptr, d);
}
static void host_ptr(void)
{
    static float h[64];
    sim_launch("k_touch", k_touch, dim3(1), dim3(64), 0, nullptr, h);
}
static void kernel_oob(void)
{
    float *d = dev(16); // 64 threads write 64 floats: past the end, into the red zone
    sim_launch("k_touch", k_touch, dim3(1), dim3(64), 0, nullptr, d);
}
static void host_deref(void)
{
    float *d = dev(64);
    volatile float x = d[3]; // the host reading device memory
    (void)x;
}

// ---- stream capture and graphs
enum { GM = 40, GK = 3, GN = 2 }; // Y is GM x GK, Bm GK x GN, C GM x GN (column-major)
struct gbufs {
    float *x, *y, *bm, *c;
    float *pin; // pinned: the input, read by the copy when it runs
    float alpha, beta;
};

// The step: C = 0; x = pin; y = 2x + 1; y += x; C = alpha Y Bm + beta C
static int step(const gbufs &g, cudaStream_t s, cublasHandle_t h)
{
    const int n = GM * GK;
    int bad = cudaMemsetAsync(g.c, 0, GM * GN * sizeof(float), s) != cudaSuccess;
    bad += cudaMemcpyAsync(g.x, g.pin, n * sizeof(float), cudaMemcpyHostToDevice, s) != cudaSuccess;
    bad += sim_launch("k_axpb", k_axpb, dim3(2), dim3(64), 0, s, g.y, (const float *)g.x, 2.0f, 1.0f,
                      n) != cudaSuccess;
    bad += sim_launch("k_add", k_add, dim3(2), dim3(64), 0, s, g.y, (const float *)g.x, n) !=
           cudaSuccess;
    bad += cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, GM, GN, GK, &g.alpha, g.y, GM, g.bm, GK, &g.beta,
                       g.c, GM) != CUBLAS_STATUS_SUCCESS;
    return bad;
}

// C of the step for input pin (alpha 0.5, beta 1 on a zeroed C), on the host
static void step_ref(const float *pin, const float *bm, float *c)
{
    for (int j = 0; j < GN; j++)
        for (int i = 0; i < GM; i++) {
            float s = 0.0f;
            for (int l = 0; l < GK; l++)
                s += (3.0f * pin[l * GM + i] + 1.0f) * bm[j * GK + l];
            c[j * GM + i] = 0.5f * s;
        }
}

static void fill(float *p, int n, float v)
{
    for (int i = 0; i < n; i++)
        p[i] = v;
}

static int same(const float *a, const float *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return 0;
    return 1;
}

// capture the step, check nothing ran, replay it twice on new inputs
static void graph_replay(void)
{
    const int n = GM * GK;
    cudaStream_t s;
    cublasHandle_t h;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS && cublasSetStream(h, s) == CUBLAS_STATUS_SUCCESS);
    gbufs g = {dev(n), dev(n), dev(GK * GN), dev(GM * GN), nullptr, 0.5f, 1.0f};
    CHECK(cudaHostAlloc((void **)&g.pin, n * sizeof(float), cudaHostAllocDefault) == cudaSuccess);
    float hb[GK * GN], ref[GM * GN], hc[GM * GN], ey[n], hy[n], seven[n];
    for (int i = 0; i < GK * GN; i++)
        hb[i] = (float)(i - 2);
    CHECK(cudaMemcpy(g.bm, hb, sizeof hb, cudaMemcpyHostToDevice) == cudaSuccess);
    for (int i = 0; i < n; i++)
        g.pin[i] = (float)(i % 5);
    // eager
    CHECK(step(g, s, h) == 0 && cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(cudaMemcpy(hc, g.c, sizeof hc, cudaMemcpyDeviceToHost) == cudaSuccess);
    CHECK(cudaMemcpy(ey, g.y, sizeof ey, cudaMemcpyDeviceToHost) == cudaSuccess);
    step_ref(g.pin, hb, ref);
    CHECK(same(hc, ref, GM * GN));
    // captured: nothing runs
    fill(seven, n, 7.0f);
    cudaMemcpy(g.x, seven, sizeof seven, cudaMemcpyHostToDevice);
    cudaMemcpy(g.y, seven, sizeof seven, cudaMemcpyHostToDevice);
    cudaMemcpy(g.c, seven, GM * GN * sizeof(float), cudaMemcpyHostToDevice);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
    CHECK(cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusNone);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive);
    CHECK(step(g, s, h) == 0);
    cudaGraph_t gr = nullptr;
    CHECK(cudaStreamEndCapture(s, &gr) == cudaSuccess && gr);
    size_t nn = 0;
    cudaGraphNode_t nodes[8];
    CHECK(cudaGraphGetNodes(gr, nullptr, &nn) == cudaSuccess && nn == 5);
    nn = 8;
    CHECK(cudaGraphGetNodes(gr, nodes, &nn) == cudaSuccess && nn == 5 && nodes[4] && !nodes[5]);
    float hx[n];
    cudaMemcpy(hx, g.x, sizeof hx, cudaMemcpyDeviceToHost);
    cudaMemcpy(hy, g.y, sizeof hy, cudaMemcpyDeviceToHost);
    cudaMemcpy(hc, g.c, sizeof hc, cudaMemcpyDeviceToHost);
    CHECK(same(hx, seven, n) && same(hy, seven, n) && same(hc, seven, GM * GN));
    // replayed: the exec outlives its graph; alpha was read at capture
    cudaGraphExec_t ex = nullptr;
    CHECK(cudaGraphInstantiate(&ex, gr, 0) == cudaSuccess && ex);
    CHECK(cudaGraphDestroy(gr) == cudaSuccess);
    g.alpha = 99.0f;
    CHECK(cudaGraphLaunch(ex, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess);
    cudaMemcpy(hc, g.c, sizeof hc, cudaMemcpyDeviceToHost);
    cudaMemcpy(hy, g.y, sizeof hy, cudaMemcpyDeviceToHost);
    CHECK(same(hc, ref, GM * GN) && same(hy, ey, n));
    for (int i = 0; i < n; i++)
        g.pin[i] = (float)((i * 3) % 7) - 2.0f; // the copy reads the new input
    step_ref(g.pin, hb, ref);
    CHECK(cudaGraphLaunch(ex, s) == cudaSuccess && cudaStreamSynchronize(s) == cudaSuccess);
    cudaMemcpy(hc, g.c, sizeof hc, cudaMemcpyDeviceToHost);
    CHECK(same(hc, ref, GM * GN));
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess);
    CHECK(cudaFreeHost(g.pin) == cudaSuccess);
    cublasDestroy(h);
    cudaStreamDestroy(s);
}

// Begins a capture on s, makes the call refused, and checks that the
// capture ends invalidated with no graph
#define REFUSED(s, mode, call, err)                                                     \
    do {                                                                                \
        cudaGraph_t g_ = (cudaGraph_t)&g_;                                              \
        cudaStreamCaptureStatus st_ = cudaStreamCaptureStatusNone;                      \
        CHECK(cudaStreamBeginCapture(s, mode) == cudaSuccess);                          \
        CHECK((call) == (err));                                                         \
        CHECK(cudaStreamIsCapturing(s, &st_) == cudaSuccess &&                          \
              st_ == cudaStreamCaptureStatusInvalidated);                               \
        CHECK(cudaMemsetAsync(d, 0, 4, s) == cudaErrorStreamCaptureInvalidated);        \
        CHECK(cudaStreamEndCapture(s, &g_) == cudaErrorStreamCaptureInvalidated && !g_); \
    } while (0)

// what a capture refuses, and the misuses of the capture calls
static void graph_refusals(void)
{
    cudaStream_t s, sb;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    CHECK(cudaStreamCreate(&sb) == cudaSuccess); // blocking: the legacy stream waits for it
    float *d = dev(64), page[64] = {0}, *pin = nullptr;
    void *p = (void *)page;
    cudaEvent_t ev;
    cudaEventCreate(&ev);
    CHECK(cudaHostAlloc((void **)&pin, sizeof page, 0) == cudaSuccess);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaMalloc(&p, 64), cudaErrorStreamCaptureUnsupported);
    CHECK(p == nullptr);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaFree(d), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeThreadLocal, cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaMemcpy(d, page, 16, cudaMemcpyHostToDevice),
            cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaMemset(d, 0, 16), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaHostAlloc(&p, 16, 0), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeGlobal, cudaFreeHost(pin), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeRelaxed, // pageable memory, in any mode
            cudaMemcpyAsync(d, page, 16, cudaMemcpyHostToDevice, s), cudaErrorStreamCaptureUnsupported);
    REFUSED(s, cudaStreamCaptureModeGlobal, (cudaEventRecord(ev, s), cudaEventSynchronize(ev)),
            cudaErrorCapturedEvent);
    REFUSED(sb, cudaStreamCaptureModeGlobal, // the legacy stream would wait for the capture
            sim_launch("k_touch", k_touch, dim3(1), dim3(16), 0, nullptr, d),
            cudaErrorStreamCaptureImplicit);
    CHECK(cudaStreamSynchronize(s) == cudaSuccess); // not capturing any more
    // Relaxed tolerates an allocation; the graph has the one node
    cudaGraph_t g = nullptr;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed) == cudaSuccess);
    CHECK(cudaMalloc(&p, 64) == cudaSuccess && p);
    CHECK(cudaMemcpyAsync(d, pin, 16, cudaMemcpyHostToDevice, s) == cudaSuccess);
    CHECK(cudaEventRecord(ev, s) == cudaSuccess); // marks the capture, adds no node
    CHECK(cudaStreamEndCapture(s, &g) == cudaSuccess && g);
    // timing (SEQREC_GPU_PROFILE): a capture's point, an event never
    // recorded and an untimed one are refused; two recorded ones span the
    // work between them (the simulation's host time)
    cudaEvent_t t0 = nullptr, t1 = nullptr, nt = nullptr;
    float ms = -1;
    CHECK(cudaEventCreate(&t0) == cudaSuccess && cudaEventCreate(&t1) == cudaSuccess);
    CHECK(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming) == cudaSuccess);
    CHECK(cudaEventElapsedTime(&ms, t0, t1) == cudaErrorInvalidResourceHandle);
    CHECK(cudaEventRecord(t0, s) == cudaSuccess);
    CHECK(cudaEventElapsedTime(&ms, ev, t0) == cudaErrorInvalidResourceHandle);
    CHECK(sim_launch("k_touch", k_touch, dim3(4), dim3(64), 0, s, d) == cudaSuccess);
    CHECK(cudaEventRecord(t1, s) == cudaSuccess && cudaEventRecord(nt, s) == cudaSuccess);
    CHECK(cudaEventElapsedTime(&ms, t0, nt) == cudaErrorInvalidResourceHandle);
    CHECK(cudaEventElapsedTime(&ms, t0, t1) == cudaSuccess && ms >= 0);
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cudaEventDestroy(nt);
    size_t nn = 0;
    CHECK(cudaGraphGetNodes(g, nullptr, &nn) == cudaSuccess && nn == 1);
    // misuse
    cudaGraphExec_t ex = nullptr;
    CHECK(cudaGraphInstantiate(&ex, g, 0) == cudaSuccess);
    cudaGraph_t g2 = nullptr;
    CHECK(cudaStreamEndCapture(s, &g2) == cudaErrorIllegalState && !g2); // not capturing
    CHECK(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal) ==
          cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaSuccess);
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal) == cudaErrorIllegalState);
    CHECK(cudaGraphLaunch(ex, s) == cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(s, &g2) == cudaErrorStreamCaptureInvalidated && !g2);
    CHECK(strcmp(cudaGetErrorString(cudaErrorStreamCaptureInvalidated), "unknown error") != 0);
    CHECK(strcmp(cudaGetErrorString(cudaErrorStreamCaptureUnsupported), "unknown error") != 0);
    cudaGetLastError();
    CHECK(cudaGraphExecDestroy(ex) == cudaSuccess && cudaGraphDestroy(g) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess && cudaFreeHost(pin) == cudaSuccess);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
    cudaStreamDestroy(sb);
}

// A kernel recorded in a graph: captured(1) only records it, captured(0)
// replays it too (the checks run on replay)
static void captured(void (*kern)(float *), const char *name, float *d, int replay)
{
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    sim_launch(name, kern, dim3(1), dim3(64), 0, s, d);
    if (cudaStreamEndCapture(s, &g) != cudaSuccess || cudaGraphInstantiate(&ex, g, 0) != cudaSuccess)
        _exit(2);
    if (replay)
        cudaGraphLaunch(ex, s);
}
static void divergent_recorded(void) { captured(k_divergent, "k_divergent", dev(64), 0); }
static void divergent_replayed(void) { captured(k_divergent, "k_divergent", dev(64), 1); }
static void freed_replayed(void) // a graph replayed on a freed buffer (ASan)
{
    float *d = dev(64);
    cudaStream_t s;
    cudaGraph_t g;
    cudaGraphExec_t ex;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal);
    sim_launch("k_touch", k_touch, dim3(1), dim3(64), 0, s, d);
    cudaStreamEndCapture(s, &g);
    cudaGraphInstantiate(&ex, g, 0);
    cudaFree(d);
    cudaGraphLaunch(ex, s);
}

int main(void)
{
    setenv("SEQREC_SIMULATED_DEVICE", "1", 1);
    const int B = 3, N = 256;
    float hx[B * N], ho[B];
    for (int i = 0; i < B * N; i++)
        hx[i] = (float)(i % 7) - 3.0f;
    float *x = dev(B * N), *o = dev(B);
    CHECK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(cudaMemcpy(x, hx, sizeof hx, cudaMemcpyDeviceToHost) != cudaSuccess); // wrong way
    CHECK(sim_launch("k_blocksum", k_blocksum<N>, dim3(B), dim3(N), 0, nullptr, (const float *)x,
                     o) == cudaSuccess);
    CHECK(cudaMemcpy(ho, o, sizeof ho, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int b = 0; b < B; b++) {
        float s = 0;
        for (int i = 0; i < N; i++)
            s += hx[b * N + i];
        CHECK(ho[b] == s);
    }
    // warps: 2 full warps and a partial one is not used by the butterfly
    const int W = 64;
    float hw[W], hxo[W], hdn[W];
    int hb[W];
    for (int i = 0; i < W; i++)
        hw[i] = (float)((i * 37) % 11);
    float *w = dev(W), *xo = dev(W), *dn = dev(W);
    int *bl = nullptr;
    CHECK(cudaMalloc(&bl, W * sizeof(int)) == cudaSuccess);
    CHECK(cudaMemcpy(w, hw, sizeof hw, cudaMemcpyHostToDevice) == cudaSuccess);
    CHECK(sim_launch("k_warp", k_warp, dim3(1), dim3(W), 0, nullptr, (const float *)w, xo, dn,
                     bl) == cudaSuccess);
    cudaMemcpy(hxo, xo, sizeof hxo, cudaMemcpyDeviceToHost);
    cudaMemcpy(hdn, dn, sizeof hdn, cudaMemcpyDeviceToHost);
    cudaMemcpy(hb, bl, sizeof hb, cudaMemcpyDeviceToHost);
    for (int wp = 0; wp < 2; wp++) {
        float s = 0;
        for (int l = 0; l < 32; l++)
            s += hw[wp * 32 + l];
        for (int l = 0; l < 32; l++)
            CHECK(hxo[wp * 32 + l] == s);
        CHECK(hdn[wp * 32] == s);
    }
    for (int i = 0; i < W; i++)
        CHECK(hb[i] == 7);
    // dynamic shared memory, several blocks
    float *dd = dev(2 * 128), hd[2 * 128];
    CHECK(sim_launch("k_dyn", k_dyn, dim3(2), dim3(128), 128 * sizeof(float), nullptr, dd, 128) ==
          cudaSuccess);
    cudaMemcpy(hd, dd, sizeof hd, cudaMemcpyDeviceToHost);
    for (int i = 0; i < 2 * 128; i++)
        CHECK(hd[i] == (float)(127 - i % 128));
    // launch limits
    CHECK(sim_launch("k_touch", k_touch, dim3(1), dim3(2048), 0, nullptr, dd) ==
          cudaErrorInvalidConfiguration);
    CHECK(sim_launch("k_touch", k_touch, dim3(1), dim3(32), 64 * 1024, nullptr, dd) ==
          cudaErrorInvalidValue);
    graph_replay();
    graph_refusals();
    orders();
    garbage();
    // what must abort
    fprintf(stderr, "selftest: aborts follow, on purpose:\n");
    CHECK(child_aborts(divergent));
    CHECK(child_aborts(host_ptr));
    CHECK(!child_aborts(divergent_recorded));
    CHECK(child_aborts(divergent_replayed));
#if defined(__SANITIZE_ADDRESS__)
    CHECK(child_aborts(host_deref));
    CHECK(child_aborts(kernel_oob));
    CHECK(child_aborts(freed_replayed));
#else
    (void)host_deref;
    (void)kernel_oob;
    (void)freed_replayed;
#endif
    printf("sim selftest: %s\n", fails ? "FAILED" : "ok");
    return fails != 0;
}
