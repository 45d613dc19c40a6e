// sim_wmma.h - nvcuda::wmma for the simulated device (included by
// sim_cuda.h): the warp-wide matrix operations of <mma.h> that the kernels
// use, m16n16k8 with tf32 inputs and float accumulators, on the CPU.
//
// A fragment is a lane's share of a 16 x 8 (matrix_a), 8 x 16 (matrix_b)
// or 16 x 16 (accumulator) tile. The real mapping of elements to lanes is
// the hardware's and undocumented; code may only load, store, fill and
// multiply fragments and apply the same operation to every element, which
// any mapping serves, so this one is plain: element e of lane l is the
// tile's (l num_elements + e)-th in row-major order. mma_sync is
// collective: the lanes put their fragments in the warp's scratch, meet
// at __syncwarp, and each computes its elements of D = A B + C, the k
// products added in order (a GPU's order inside the instruction is its
// own: tests compare with tolerances). What the hardware requires and a
// mistake would break there fails here too (sim_wmma_fail): a pointer not
// 32-byte aligned, a leading dimension not a multiple of 4 floats, a
// tile not wholly in one allocation is the arena's red zone under ASan.
#ifndef SIM_WMMA_H
#define SIM_WMMA_H

[[noreturn]] void sim_wmma_fail(const char *what);

namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
} // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void> struct fragment {
    static_assert(M == 16 && N == 16 && K == 8, "the simulated device has m16n16k8 alone");
    static constexpr int rows = std::is_same<Use, matrix_b>::value ? K : M;
    static constexpr int cols = std::is_same<Use, matrix_a>::value ? K : N;
    enum { num_elements = rows * cols / 32 };
    float x[num_elements];
};

// tf32: 10 mantissa bits, rounded to nearest with ties away from zero (the
// hardware's cvt.rna.tf32.f32); NaN and infinities kept
static inline float __float_to_tf32(float f)
{
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    std::memcpy(&f, &u, 4);
    return f;
}

static inline int sim_lane(void) { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) % 32; }
static inline int sim_warp(void) { return (int)(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) / 32; }

static inline void sim_wmma_check(const void *p, unsigned ldm)
{
    if ((uintptr_t)p % 32)
        sim_wmma_fail("a wmma load or store at an address not 32-byte aligned");
    if (ldm % 4)
        sim_wmma_fail("a wmma leading dimension not a multiple of 4 floats");
}

// element (r, c) of a rows x cols tile at p, row-major or column-major
static inline float &sim_at(float *p, unsigned ldm, int r, int c, int colmajor)
{
    return colmajor ? p[(size_t)c * ldm + r] : p[(size_t)r * ldm + c];
}

// A lane's num elements x of a tile of `cols` columns at p, read (store 0)
// or written (store 1). No barrier: a lane touches its own elements alone
// (each barrier is 32 fiber switches here)
static inline void sim_frag_io(float *x, int num, int cols, float *p, unsigned ldm, int colmajor,
                               int store)
{
    sim_wmma_check(p, ldm);
    int lane = sim_lane();
    for (int e = 0; e < num; e++) {
        int i = lane * num + e;
        float &m = sim_at(p, ldm, i / cols, i % cols, colmajor);
        if (store)
            m = x[e];
        else
            x[e] = m;
    }
}

template <class Use, class L, int M, int N, int K, class T>
static inline void load_matrix_sync(fragment<Use, M, N, K, T, L> &f, const float *p, unsigned ldm)
{
    typedef fragment<Use, M, N, K, T, L> F;
    sim_frag_io(f.x, F::num_elements, F::cols, (float *)p, ldm,
                std::is_same<L, col_major>::value, 0);
}

template <int M, int N, int K>
static inline void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
                                    unsigned ldm, layout_t l)
{
    typedef fragment<accumulator, M, N, K, float> F;
    sim_frag_io(f.x, F::num_elements, F::cols, (float *)p, ldm, l == mem_col_major, 0);
}

template <int M, int N, int K>
static inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                                     unsigned ldm, layout_t l)
{
    typedef fragment<accumulator, M, N, K, float> F;
    sim_frag_io((float *)f.x, F::num_elements, F::cols, p, ldm, l == mem_col_major, 1);
}

template <class Use, int M, int N, int K, class T, class L>
static inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, float v)
{
    for (int e = 0; e < fragment<Use, M, N, K, T, L>::num_elements; e++)
        f.x[e] = v;
}

// the warps' scratch: one block runs at a time on the simulated device
struct sim_mma_scratch {
    float a[32][16 * 8], b[32][8 * 16], c[32][16 * 16];
};
static inline sim_mma_scratch &sim_mma_tiles(void)
{
    static sim_mma_scratch s;
    return s;
}

template <class LA, class LB>
static inline void mma_sync(fragment<accumulator, 16, 16, 8, float> &d,
                            const fragment<matrix_a, 16, 16, 8, precision::tf32, LA> &a,
                            const fragment<matrix_b, 16, 16, 8, precision::tf32, LB> &b,
                            const fragment<accumulator, 16, 16, 8, float> &c)
{
    sim_mma_scratch &s = sim_mma_tiles();
    int lane = sim_lane(), w = sim_warp();
    // the last mma's readers are done: every mma ends at a barrier
    for (int e = 0; e < 4; e++) {
        s.a[w][lane * 4 + e] = a.x[e];
        s.b[w][lane * 4 + e] = b.x[e];
    }
    for (int e = 0; e < 8; e++)
        s.c[w][lane * 8 + e] = c.x[e];
    __syncwarp();
    for (int e = 0; e < 8; e++) {
        int i = lane * 8 + e, r = i / 16, col = i % 16;
        float acc = s.c[w][i];
        for (int k = 0; k < 8; k++)
            acc += s.a[w][r * 8 + k] * s.b[w][k * 16 + col];
        d.x[e] = acc;
    }
    __syncwarp();
}
} // namespace wmma
} // namespace nvcuda

#endif
