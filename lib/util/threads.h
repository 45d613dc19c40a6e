/* threads.h - one place that sets up the two thread pools of a program:
 * OpenMP (our loops) and OpenBLAS (GEMMs).
 *
 * libgomp's idle threads spin after every parallel region and steal the
 * cores OpenBLAS's own threads need for the next GEMM: the fused CE step ran
 * 1.8x slower that way on 2 cores. The fix is OMP_WAIT_POLICY=passive, but
 * libgomp reads it when it is loaded, before main. So sq_threads_passive
 * re-executes the program once with it set, unless the user set it. */
#ifndef SQ_THREADS_H
#define SQ_THREADS_H

/* Call first thing in main. Returns only if no re-exec happened (the
 * variable was already set, or exec failed: then it just runs slower). */
void sq_threads_passive(char **argv);

/* Sets OpenMP and OpenBLAS to n threads (n <= 0: number of online CPUs).
 * Returns the number used. */
int sq_threads_set(int n);

#endif
