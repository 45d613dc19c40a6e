/* threads.h - one thread pool per program: OpenMP's.
 *
 * OpenBLAS runs single-threaded; lib/ops/pgemm.c cuts a large GEMM over the
 * OpenMP team, so no OpenBLAS thread ever runs beside an OpenMP team (they
 * made three busy threads on two cores). Idle OpenMP threads must sleep,
 * not spin: a spinning team steals the cores of the next GEMM's threads
 * and of other programs (the fused CE step ran 1.8x slower that way on 2
 * cores). That is OMP_WAIT_POLICY=passive, but libgomp reads it when it is
 * loaded, before main; so sq_threads_passive re-executes the program once
 * with it (and OPENBLAS_NUM_THREADS=1, so that OpenBLAS starts no pool)
 * set, unless the user set them. */
#ifndef SQ_THREADS_H
#define SQ_THREADS_H

#include "err.h"

/* Call first thing in main. Returns only if no re-exec happened (the
 * variable was already set, or exec failed: then it just runs slower). */
void sq_threads_passive(char **argv);

/* The CPUs this process may run on (its affinity: a launcher's binding,
 * taskset), or the online CPUs when that cannot be read. */
int sq_threads_cpus(void);

/* Sets the OpenMP team to n threads (n <= 0: sq_threads_cpus()) and
 * OpenBLAS to 1.
 * Returns the number used. */
int sq_threads_set(int n);

/* sq_threads_set, first making sure, under an address-space limit (ulimit
 * -v), that the n threads can start, and with blas != 0 that n OpenBLAS
 * GEMM buffers (128 MiB each) fit beside them, then starting the team.
 * Without this libgomp exits 1 from inside a parallel region (leaving the
 * program's temporary outputs) and OpenBLAS's blas_memory_alloc retries its
 * mmap forever. Call before any output is opened. Returns the number of
 * threads, or -1 with e set (71). */
int sq_threads_start(int n, int blas, sq_err *e);

#endif
