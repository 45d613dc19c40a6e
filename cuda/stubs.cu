// stubs.cu - DEVELOPMENT ONLY: a weak definition of every op of the list,
// failing with "no kernel yet", so that the object links while kernel
// files are written; a kernel file's strong be_NAME replaces it. Removed
// once every op has its kernel (tests/bats/cuda.bats checks that no weak
// be_ symbol is left in the object).
#include "common.cuh"

#define STUB_RET_void
#define STUB_RET_int return 0;
#define STUB_RET_double return 0;
#define STUB_X(ret, name, params, args)                                              \
    __attribute__((weak)) ret be_##name(sq_gpu_be *be, SQ_GPU_STRIP params)          \
    {                                                                                \
        be_note(be, cudaErrorNotSupported, "be_" #name ": no kernel yet");          \
        STUB_RET_##ret                                                               \
    }
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
SQ_GPU_OP_LIST(STUB_X)
#pragma GCC diagnostic pop
