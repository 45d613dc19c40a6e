#define _GNU_SOURCE /* sched_getaffinity */
#include "threads.h"

#include <errno.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

int sq_threads_cpus(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    return c > 0 ? (int)c : 1;
}

int sq_threads_set(int n)
{
    if (n <= 0)
        n = sq_threads_cpus();
    omp_set_num_threads(n);
    /* a region inside a region (an op inside a micro-batch's thread) runs
     * on that one thread */
    omp_set_max_active_levels(1);
    /* one pool: OpenBLAS never runs threads beside the OpenMP team;
     * pgemm.c cuts a large GEMM over the team instead */
    openblas_set_num_threads(1);
    return n;
}

/* OpenBLAS's GEMM buffer, mapped per concurrent call (BUFFER_SIZE of its
 * x86-64 build), plus slack for its guard page and alignment. */
#define SQ_BLAS_BUFFER (((size_t)128 << 20) + ((size_t)1 << 20))
#define SQ_PROBE_MAX 1024

static void *wait_gate(void *gate)
{
    /* held by the prober until every thread exists: all stacks at once */
    pthread_mutex_lock(gate);
    pthread_mutex_unlock(gate);
    return NULL;
}

/* Starts n - 1 threads with the default stack (libgomp's) while the BLAS
 * buffers are mapped; 0, or the errno of the first failure. */
static int probe(int n, int blas)
{
    size_t need = blas ? (size_t)n * SQ_BLAS_BUFFER : 0;
    void *buf = need ? mmap(NULL, need, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0) : NULL;
    if (buf == MAP_FAILED)
        return errno ? errno : ENOMEM;
    pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
    pthread_t t[SQ_PROBE_MAX];
    int started = 0, err = 0;
    pthread_mutex_lock(&gate);
    while (started < n - 1 && started < SQ_PROBE_MAX) {
        if ((err = pthread_create(&t[started], NULL, wait_gate, &gate)) != 0)
            break;
        started++;
    }
    pthread_mutex_unlock(&gate);
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    if (buf)
        munmap(buf, need);
    return err;
}

int sq_threads_start(int n, int blas, sq_err *e)
{
    n = sq_threads_set(n);
    struct rlimit rl;
    if (getrlimit(RLIMIT_AS, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
        return n;
    int err = probe(n, blas);
    if (err) {
        sq_fail(e, SQ_EX_OSERR, "out of memory: %d thread%s%s do not fit the address-space "
                "limit (ulimit -v %llu): %s; give fewer threads (--threads) or raise the limit",
                n, n == 1 ? "" : "s", blas ? " and their 128 MiB OpenBLAS buffers" : "",
                (unsigned long long)(rl.rlim_cur / 1024), strerror(err));
        return -1;
    }
    /* start the team now, before any output exists: libgomp keeps it (the
     * region does some work: GCC drops an empty one, and no team starts) */
    int got = 0;
    #pragma omp parallel num_threads(n)
    {
        #pragma omp atomic
        got++;
    }
    (void)got;
    return n;
}
