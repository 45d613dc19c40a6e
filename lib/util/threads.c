#include "threads.h"

#include <omp.h>
#include <stdlib.h>
#include <unistd.h>

/* OpenBLAS's own entry point (declared in its cblas.h as well). */
void openblas_set_num_threads(int num_threads);

void sq_threads_passive(char **argv)
{
    int changed = 0;
    if (!getenv("OMP_WAIT_POLICY")) {
        if (setenv("OMP_WAIT_POLICY", "passive", 1) != 0)
            return;
        changed = 1;
    }
    /* no OpenBLAS pool at all: it would only sleep (sq_threads_set) */
    if (!getenv("OPENBLAS_NUM_THREADS")) {
        if (setenv("OPENBLAS_NUM_THREADS", "1", 1) != 0)
            return;
        changed = 1;
    }
    if (changed)
        execv("/proc/self/exe", argv); /* returns only on failure */
}

int sq_threads_set(int n)
{
    if (n <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n = c > 0 ? (int)c : 1;
    }
    omp_set_num_threads(n);
    /* a region inside a region (an op inside a micro-batch's thread) runs
     * on that one thread */
    omp_set_max_active_levels(1);
    /* one pool: OpenBLAS never runs threads beside the OpenMP team;
     * pgemm.c cuts a large GEMM over the team instead */
    openblas_set_num_threads(1);
    return n;
}
