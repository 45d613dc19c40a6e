// selftest.cu - the simulated device's own checks (make unit-sim): barrier
// order, warp shuffles, dynamic shared memory, several blocks, and that
// the harness aborts on a divergent __syncthreads, on a host pointer
// passed to a kernel and (under ASan) on a device pointer read by the host
// and on a kernel writing past its buffer.
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
    // what must abort
    fprintf(stderr, "selftest: aborts follow, on purpose:\n");
    CHECK(child_aborts(divergent));
    CHECK(child_aborts(host_ptr));
#if defined(__SANITIZE_ADDRESS__)
    CHECK(child_aborts(host_deref));
    CHECK(child_aborts(kernel_oob));
#else
    (void)host_deref;
    (void)kernel_oob;
#endif
    printf("sim selftest: %s\n", fails ? "FAILED" : "ok");
    return fails != 0;
}
